/* test_dns_proxy.c: the sandboxes' DNS proxy (src/egress/dns.c) on a real loop, dnsmasq on
 * 127.0.0.1 as its upstream, the proxy on 127.0.0.7, clients on 127.0.0.2 (sandbox 1) and
 * 127.0.0.3 (sandbox 2): an allowed name is answered and its addresses reported before the
 * client has the answer, along a CNAME chain; a denied name is NXDOMAIN, AAAA empty, garbage
 * and unknown sources unanswered; a silent upstream is SERVFAIL after the tries; a flood from
 * one sandbox does not starve another; TCP answers, and a slow TCP client is cut. Skipped
 * without dnsmasq (Debian dnsmasq-base). */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sh/dns.h"
#include "sh/loop.h"
#include "unit.h"

#define DNSMASQ   "/usr/sbin/dnsmasq"
#define PROXY_IP  "127.0.0.7"
#define SBX1_IP   "127.0.0.2"
#define SBX2_IP   "127.0.0.3"
#define STRAY_IP  "127.0.0.9"
#define LOCAL_TTL 77
#define BIG_ADDRS 40 /* big.test's A records: 40 x 16 bytes, past 512 */

static pid_t dnsmasq_pid = -1;
static uint16_t upstream_port;

static sh_loop *loop;
static sh_dns *proxy;

typedef struct seen {
        uint64_t sandbox;
        char name[64];
        char addr[INET_ADDRSTRLEN];
        uint32_t ttl;
        bool client_had_answer; /* the client's socket held the answer when reported */
} seen;
static seen reported[64];
static int n_reported;
static int watched_fd = -1; /* the client whose answer must come after the reports */
static bool opens = true;   /* what resolved() answers: the addresses were opened */

static uint64_t sandbox_of(void *data, const struct sockaddr_in *src)
{
        char ip[INET_ADDRSTRLEN];

        (void)data;
        inet_ntop(AF_INET, &src->sin_addr, ip, sizeof(ip));
        return strcmp(ip, SBX1_IP) == 0 ? 1 : strcmp(ip, SBX2_IP) == 0 ? 2 : 0;
}

static bool allowed(void *data, uint64_t sandbox, const char *name)
{
        (void)data;
        (void)sandbox;
        return strcmp(name, "blocked.test") != 0;
}

static bool resolved(void *data, uint64_t sandbox, const char *name, const sh_dns_addr *addrs,
                     size_t n)
{
        seen *s;
        char b;

        (void)data;
        for (size_t i = 0; i < n; i++) {
                if (n_reported >= (int)(sizeof(reported) / sizeof(reported[0])))
                        return opens;
                s = &reported[n_reported++];
                s->sandbox = sandbox;
                snprintf(s->name, sizeof(s->name), "%s", name);
                inet_ntop(AF_INET, &addrs[i].addr, s->addr, sizeof(s->addr));
                s->ttl = addrs[i].ttl_s;
                s->client_had_answer =
                        watched_fd >= 0 && recv(watched_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
        }
        return opens;
}

static const sh_dns_ops ops = {.sandbox_of = sandbox_of, .allowed = allowed, .resolved = resolved};

static struct sockaddr_in addr_of(const char *ip, uint16_t port)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

        ck_assert_int_eq(inet_pton(AF_INET, ip, &a.sin_addr), 1);
        return a;
}

/* A port of 127.0.0.1 free for both UDP and TCP now (dnsmasq binds both). */
static uint16_t free_port(void)
{
        for (;;) {
                struct sockaddr_in a = addr_of("127.0.0.1", 0);
                socklen_t len = sizeof(a);
                int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                bool ok;

                ck_assert_int_ge(u, 0);
                ck_assert_int_ge(t, 0);
                ck_assert_int_eq(bind(u, (struct sockaddr *)&a, sizeof(a)), 0);
                ck_assert_int_eq(getsockname(u, (struct sockaddr *)&a, &len), 0);
                ok = bind(t, (struct sockaddr *)&a, sizeof(a)) == 0;
                close(u);
                close(t);
                if (ok)
                        return ntohs(a.sin_port);
        }
}

/* A client socket of `type` bound to ip. */
static int client(const char *ip, int type)
{
        struct sockaddr_in a = addr_of(ip, 0);
        int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        return fd;
}

/* A query in wire form into out; its length. */
static size_t make_query(uint16_t id, const char *name, uint16_t qtype, uint8_t *out)
{
        size_t n = 12;

        memset(out, 0, 12);
        out[0] = (uint8_t)(id >> 8);
        out[1] = (uint8_t)id;
        out[2] = 0x01; /* RD */
        out[5] = 1;
        while (*name) {
                const char *dot = strchr(name, '.');
                size_t l = dot ? (size_t)(dot - name) : strlen(name);

                out[n++] = (uint8_t)l;
                memcpy(out + n, name, l);
                n += l;
                name += l + (dot ? 1 : 0);
        }
        out[n++] = 0;
        out[n++] = (uint8_t)(qtype >> 8);
        out[n++] = (uint8_t)qtype;
        out[n++] = 0;
        out[n++] = 1;
        return n;
}

/* ---- running the loop until a client has its answer ---- */

typedef struct wait_for {
        uint8_t buf[4096];
        ssize_t len; /* -1: nothing yet; 0 over TCP: the proxy closed */
} wait_for;

static void on_client(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        wait_for *w = data;

        (void)io;
        (void)events;
        w->len = recv(fd, w->buf, sizeof(w->buf), MSG_DONTWAIT);
        if (w->len < 0 && errno == EAGAIN)
                return;
        sh_loop_stop(l);
}

static void on_guard(sh_loop *l, sh_timer *t, void *data)
{
        (void)t;
        *(bool *)data = true;
        sh_loop_stop(l);
}

/* Run the loop until fd is readable (its first read in w) or `ms` have passed. */
static void run_until_answer(int fd, wait_for *w, unsigned ms)
{
        bool expired = false;
        sh_io *io = sh_loop_add_io(loop, fd, EPOLLIN, on_client, w);
        sh_timer *guard = sh_loop_add_timer(loop, ms, on_guard, &expired);

        ck_assert_ptr_nonnull(io);
        ck_assert_ptr_nonnull(guard);
        w->len = -1;
        ck_assert_int_eq(sh_loop_run(loop), 0);
        if (!expired)
                sh_loop_cancel_timer(loop, guard);
        sh_loop_del_io(loop, io);
}

/* A UDP query from fd to the proxy; the answer within ms into w (w->len -1: none). */
static void ask_udp(int fd, const char *name, uint16_t qtype, wait_for *w, unsigned ms)
{
        struct sockaddr_in p = addr_of(PROXY_IP, sh_dns_port(proxy));
        uint8_t q[512];
        size_t n = make_query(0xABCD, name, qtype, q);

        ck_assert_int_eq(sendto(fd, q, n, 0, (struct sockaddr *)&p, sizeof(p)), (ssize_t)n);
        run_until_answer(fd, w, ms);
}

static unsigned rcode(const wait_for *w)
{
        return w->buf[3] & 0xF;
}

static unsigned ancount(const wait_for *w)
{
        return (unsigned)(w->buf[6] << 8 | w->buf[7]);
}

/* A UDP query from a new client at ip that must be answered with `want`; the answer in w. */
static void ask_expect(const char *ip, const char *name, uint16_t qtype, unsigned want, wait_for *w)
{
        int fd = client(ip, SOCK_DGRAM);

        ask_udp(fd, name, qtype, w, 5000);
        ck_assert_int_gt(w->len, 12);
        ck_assert_uint_eq(rcode(w), want);
        close(fd);
}

/* A TCP client at ip connected to the proxy (the loop run a moment for its accept). */
static int tcp_client(const char *ip)
{
        struct sockaddr_in p = addr_of(PROXY_IP, sh_dns_port(proxy));
        int fd = client(ip, SOCK_STREAM);
        wait_for w;
        int r = connect(fd, (struct sockaddr *)&p, sizeof(p));

        ck_assert(r == 0 || errno == EINPROGRESS);
        run_until_answer(fd, &w, 100);
        return fd;
}

/* A query over TCP from fd; the loop run until at least `len` bytes came back in one read. */
static void ask_tcp(int fd, const char *name, uint16_t qtype, wait_for *w, ssize_t len)
{
        uint8_t q[514];
        size_t n = make_query(0xABCD, name, qtype, q + 2);

        q[0] = 0;
        q[1] = (uint8_t)n;
        ck_assert_int_eq(send(fd, q, n + 2, MSG_NOSIGNAL), (ssize_t)(n + 2));
        w->len = -1;
        for (int i = 0; i < 10 && w->len < len; i++)
                run_until_answer(fd, w, 500);
        ck_assert_int_ge(w->len, len);
}

/* ---- the upstream ---- */

static char big_records[BIG_ADDRS][64];

static bool dnsmasq_try(void)
{
        char port[32], user[64];
        struct passwd *pw = getpwuid(getuid());
        int probe;
        uint8_t q[512];
        size_t n;
        struct sockaddr_in up;

        upstream_port = free_port();
        for (int i = 0; i < BIG_ADDRS; i++)
                snprintf(big_records[i], sizeof(big_records[i]),
                         "--host-record=big.test,198.51.100.%d", i + 1);
        snprintf(port, sizeof(port), "--port=%u", upstream_port);
        /* Its own user: no change of credentials, so the death signal below holds. */
        snprintf(user, sizeof(user), "--user=%s", pw ? pw->pw_name : "root");
        dnsmasq_pid = fork();
        ck_assert_int_ge(dnsmasq_pid, 0);
        if (dnsmasq_pid == 0) {
                char *argv[64] = {DNSMASQ,
                                  "--keep-in-foreground",
                                  "--conf-file=/dev/null",
                                  "--no-resolv",
                                  "--no-hosts",
                                  port,
                                  "--listen-address=127.0.0.1",
                                  "--bind-interfaces",
                                  "--pid-file=", /* none: nothing to clean up */
                                  user,
                                  "--local-ttl=77",
                                  "--address=/pypi.org/192.0.2.10",
                                  "--host-record=github.test,192.0.2.20",
                                  "--cname=www.github.test,github.test"};
                size_t n_args = 14;

                /* big.test: more addresses than 512 bytes hold (TC over UDP). */
                for (int i = 0; i < BIG_ADDRS; i++)
                        argv[n_args++] = big_records[i];
                argv[n_args] = NULL;
                prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test does not leave it */
                execv(DNSMASQ, argv);
                _exit(127);
        }
        /* Ready when it answers. */
        probe = client("127.0.0.1", SOCK_DGRAM);
        up = addr_of("127.0.0.1", upstream_port);
        n = make_query(1, "pypi.org", SH_DNS_TYPE_A, q);
        for (int i = 0; i < 100; i++) {
                uint8_t b[512];

                ck_assert_int_eq(sendto(probe, q, n, 0, (struct sockaddr *)&up, sizeof(up)),
                                 (ssize_t)n);
                ut_sleep_ms(50);
                if (recv(probe, b, sizeof(b), MSG_DONTWAIT) > 0) {
                        close(probe);
                        return true;
                }
                if (waitpid(dnsmasq_pid, NULL, WNOHANG) == dnsmasq_pid) { /* the port taken */
                        dnsmasq_pid = -1;
                        break;
                }
        }
        close(probe);
        return false;
}

/* dnsmasq on a free port of 127.0.0.1, answering: another port when one was taken meanwhile. */
static void dnsmasq_start(void)
{
        for (int i = 0; i < 5; i++)
                if (dnsmasq_try())
                        return;
        ck_abort_msg("dnsmasq did not answer on 127.0.0.1:%u", upstream_port);
}

static void proxy_start(sh_dns_config *cfg)
{
        cfg->listen = addr_of(PROXY_IP, 0);
        if (!cfg->upstream.sin_family)
                cfg->upstream = addr_of("127.0.0.1", upstream_port);
        ck_assert_int_eq(sh_loop_new(&loop), 0);
        ck_assert_int_eq(sh_dns_new(loop, cfg, &ops, NULL, &proxy), 0);
}

/* The proxy again with cfg (on a new loop). */
static void proxy_restart(sh_dns_config *cfg)
{
        sh_dns_free(proxy);
        sh_loop_free(loop);
        proxy_start(cfg);
}

/* The proxy again with cfg, its upstream a UDP socket of the test's on 127.0.0.1 (returned:
 * silent unless the test reads it). */
static int proxy_with_test_upstream(sh_dns_config *cfg)
{
        int up = client("127.0.0.1", SOCK_DGRAM);
        socklen_t len = sizeof(cfg->upstream);

        ck_assert_int_eq(getsockname(up, (struct sockaddr *)&cfg->upstream, &len), 0);
        proxy_restart(cfg);
        return up;
}

static void setup(void)
{
        sh_dns_config cfg = {0};

        n_reported = 0;
        watched_fd = -1;
        opens = true;
        dnsmasq_start();
        proxy_start(&cfg);
}

static void teardown(void)
{
        sh_dns_free(proxy);
        proxy = NULL;
        sh_loop_free(loop);
        loop = NULL;
        if (dnsmasq_pid > 0) {
                kill(dnsmasq_pid, SIGTERM);
                ck_assert_int_ge(ut_wait_pid(dnsmasq_pid, 5000), 0);
                dnsmasq_pid = -1;
        }
}

/* ---- the tests ---- */

START_TEST(test_an_allowed_name_is_answered_after_its_address_is_reported)
{
        int fd = client(SBX1_IP, SOCK_DGRAM);
        wait_for w;

        watched_fd = fd;
        ask_udp(fd, "pypi.org", SH_DNS_TYPE_A, &w, 5000);
        ck_assert_int_gt(w.len, 12);
        ck_assert_uint_eq(w.buf[0], 0xAB); /* the client's id, not ours */
        ck_assert_uint_eq(w.buf[1], 0xCD);
        ck_assert_uint_eq(rcode(&w), SH_DNS_NOERROR);
        ck_assert_uint_eq(ancount(&w), 1);
        ck_assert_int_eq(n_reported, 1);
        ck_assert_uint_eq(reported[0].sandbox, 1);
        ck_assert_str_eq(reported[0].name, "pypi.org");
        ck_assert_str_eq(reported[0].addr, "192.0.2.10");
        ck_assert_uint_eq(reported[0].ttl, LOCAL_TTL);
        ck_assert(!reported[0].client_had_answer);
        close(fd);
}
END_TEST

START_TEST(test_the_address_at_the_end_of_a_cname_chain_is_reported)
{
        wait_for w;

        ask_expect(SBX2_IP, "www.github.test", SH_DNS_TYPE_A, SH_DNS_NOERROR, &w);
        ck_assert_int_eq(n_reported, 1);
        ck_assert_uint_eq(reported[0].sandbox, 2);
        ck_assert_str_eq(reported[0].name, "www.github.test");
        ck_assert_str_eq(reported[0].addr, "192.0.2.20");
}
END_TEST

START_TEST(test_a_denied_name_is_nxdomain_and_nothing_is_reported)
{
        wait_for w;

        ask_expect(SBX1_IP, "blocked.test", SH_DNS_TYPE_A, SH_DNS_NXDOMAIN, &w);
        ck_assert_uint_eq(w.buf[3] & 0x80, 0x80); /* RA */
        ck_assert_int_eq(n_reported, 0);
}
END_TEST

START_TEST(test_aaaa_is_answered_empty)
{
        wait_for w;

        ask_expect(SBX1_IP, "pypi.org", SH_DNS_TYPE_AAAA, SH_DNS_NOERROR, &w);
        ck_assert_uint_eq(ancount(&w), 0);
        ck_assert_int_eq(n_reported, 0);
}
END_TEST

START_TEST(test_an_unknown_source_gets_no_answer)
{
        int fd = client(STRAY_IP, SOCK_DGRAM);
        wait_for w;

        ask_udp(fd, "pypi.org", SH_DNS_TYPE_A, &w, 500);
        ck_assert_int_eq(w.len, -1);
        ck_assert_int_eq(n_reported, 0);
        close(fd);
}
END_TEST

START_TEST(test_garbage_is_dropped_and_the_next_query_answered)
{
        struct sockaddr_in p = addr_of(PROXY_IP, sh_dns_port(proxy));
        int fd = client(SBX1_IP, SOCK_DGRAM);
        uint8_t junk[8192];
        wait_for w;

        memset(junk, 0xC0, sizeof(junk)); /* pointers everywhere, and too long */
        ck_assert_int_eq(sendto(fd, junk, sizeof(junk), 0, (struct sockaddr *)&p, sizeof(p)),
                         (ssize_t)sizeof(junk));
        ck_assert_int_eq(sendto(fd, junk, 40, 0, (struct sockaddr *)&p, sizeof(p)), 40);
        run_until_answer(fd, &w, 300);
        ck_assert_int_eq(w.len, -1);
        ask_udp(fd, "pypi.org", SH_DNS_TYPE_A, &w, 5000);
        ck_assert_int_gt(w.len, 12);
        ck_assert_uint_eq(rcode(&w), SH_DNS_NOERROR);
        close(fd);
}
END_TEST

START_TEST(test_a_silent_upstream_is_servfail_after_the_tries)
{
        sh_dns_config cfg = {.timeout_ms = 100, .tries = 2};
        int silent, fd;
        wait_for w;

        silent = proxy_with_test_upstream(&cfg);
        fd = client(SBX1_IP, SOCK_DGRAM);
        ask_udp(fd, "pypi.org", SH_DNS_TYPE_A, &w, 5000);
        ck_assert_int_gt(w.len, 12);
        ck_assert_uint_eq(rcode(&w), SH_DNS_SERVFAIL);
        ck_assert_int_eq(n_reported, 0);
        close(fd);
        close(silent);
}
END_TEST

/* A fake upstream: to each query, first an answer with another id (a spoofer's guess), then an
 * answer of another question, then the right one. */
static void on_fake_upstream(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        static const uint8_t spoofed[4] = {203, 0, 113, 66}, real[4] = {203, 0, 113, 7};
        uint8_t b[600];
        struct sockaddr_in from;
        socklen_t flen = sizeof(from);
        ssize_t n = recvfrom(fd, b, 512, MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
        const uint8_t rr[] = {0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4};

        (void)l;
        (void)io;
        (void)events;
        (void)data;
        if (n < 12)
                return;
        b[2] |= 0x80; /* QR */
        b[7] = 1;     /* one answer */
        memcpy(b + n, rr, sizeof(rr));
        for (int i = 0; i < 3; i++) {
                uint8_t m[600];

                memcpy(m, b, (size_t)n + sizeof(rr));
                memcpy(m + n + sizeof(rr), i < 2 ? spoofed : real, 4);
                if (i == 0)
                        m[1] ^= 1; /* another id */
                if (i == 1)
                        m[n - 3] ^= 0x01; /* another question: type 0 */
                ck_assert_int_gt(sendto(fd, m, (size_t)n + sizeof(rr) + 4, 0,
                                        (struct sockaddr *)&from, flen),
                                 0);
        }
}

START_TEST(test_an_answer_of_another_id_or_question_is_ignored)
{
        sh_dns_config cfg = {0};
        int up;
        sh_io *io;
        wait_for w;

        up = proxy_with_test_upstream(&cfg);
        io = sh_loop_add_io(loop, up, EPOLLIN, on_fake_upstream, NULL);
        ck_assert_ptr_nonnull(io);
        ask_expect(SBX1_IP, "pypi.org", SH_DNS_TYPE_A, SH_DNS_NOERROR, &w);
        ck_assert_int_eq(n_reported, 1);
        ck_assert_str_eq(reported[0].addr, "203.0.113.7");
        ck_assert_uint_eq(w.buf[w.len - 1], 7);
        sh_loop_del_io(loop, io);
        close(up);
}
END_TEST

/* A flood from sandbox 1: bursts of queries every few ms while sandbox 2 asks. */
typedef struct flood {
        int fd;
        sh_timer *t;
        unsigned sent;
} flood;

static void on_flood(sh_loop *l, sh_timer *t, void *data)
{
        flood *f = data;
        struct sockaddr_in p = addr_of(PROXY_IP, sh_dns_port(proxy));
        uint8_t q[512];

        (void)t;
        for (int i = 0; i < 100; i++) {
                size_t n = make_query((uint16_t)f->sent, "pypi.org", SH_DNS_TYPE_A, q);

                if (sendto(f->fd, q, n, MSG_DONTWAIT, (struct sockaddr *)&p, sizeof(p)) > 0)
                        f->sent++;
        }
        f->t = sh_loop_add_timer(l, 2, on_flood, f);
}

START_TEST(test_a_flood_from_one_sandbox_does_not_starve_another)
{
        flood f = {.fd = client(SBX1_IP, SOCK_DGRAM)};
        int fd = client(SBX2_IP, SOCK_DGRAM);
        wait_for w = {.len = -1};
        bool answered = false;

        f.t = sh_loop_add_timer(loop, 0, on_flood, &f);
        ck_assert_ptr_nonnull(f.t);
        run_until_answer(fd, &w, 300); /* the flood in full swing first */
        ck_assert_uint_gt(f.sent, 1000);
        /* Like a resolver, it asks again after a while without an answer. */
        for (int i = 0; i < 10 && !answered; i++) {
                ask_udp(fd, "www.github.test", SH_DNS_TYPE_A, &w, 300);
                answered = w.len > 12 && w.buf[0] == 0xAB && rcode(&w) == SH_DNS_NOERROR;
        }
        sh_loop_cancel_timer(loop, f.t);
        ck_assert_msg(answered, "sandbox 2 was not answered during the flood");
        close(f.fd);
        close(fd);
}
END_TEST

START_TEST(test_a_query_over_tcp_is_answered_over_tcp)
{
        int fd = tcp_client(SBX1_IP);
        wait_for w;

        ask_tcp(fd, "pypi.org", SH_DNS_TYPE_A, &w, 2 + 12 + 1);
        ck_assert_uint_eq((unsigned)(w.buf[0] << 8 | w.buf[1]), (unsigned)w.len - 2);
        ck_assert_uint_eq(w.buf[2], 0xAB);
        ck_assert_uint_eq(w.buf[5] & 0xF, SH_DNS_NOERROR);
        ck_assert_int_eq(n_reported, 1);
        close(fd);
}
END_TEST

START_TEST(test_an_answer_past_the_clients_udp_size_is_truncated_and_whole_over_tcp)
{
        wait_for w;
        int fd;

        /* UDP: the upstream's answer came over TCP (its UDP one was truncated), every address
         * was reported, and the client gets TC with the question alone. */
        ask_expect(SBX1_IP, "big.test", SH_DNS_TYPE_A, SH_DNS_NOERROR, &w);
        ck_assert_uint_eq(w.buf[2] & 0x02, 0x02);
        ck_assert_uint_eq(ancount(&w), 0);
        ck_assert_int_le(w.len, SH_DNS_UDP_MIN);
        ck_assert_int_eq(n_reported, BIG_ADDRS);
        /* TCP: the whole answer. */
        fd = tcp_client(SBX1_IP);
        ask_tcp(fd, "big.test", SH_DNS_TYPE_A, &w, 2 + 12 + 16 * BIG_ADDRS);
        ck_assert_uint_eq((unsigned)(w.buf[8] << 8 | w.buf[9]), BIG_ADDRS);
        close(fd);
}
END_TEST

START_TEST(test_a_sandbox_past_its_queries_in_flight_gets_servfail_at_once)
{
        sh_dns_config cfg = {.timeout_ms = 10000, .sandbox_inflight = 2};
        int silent, fd;
        wait_for w;

        silent = proxy_with_test_upstream(&cfg);
        fd = client(SBX1_IP, SOCK_DGRAM);
        ask_udp(fd, "pypi.org", SH_DNS_TYPE_A, &w, 100);
        ck_assert_int_eq(w.len, -1); /* in flight */
        ask_udp(fd, "pypi.org", SH_DNS_TYPE_A, &w, 100);
        ck_assert_int_eq(w.len, -1); /* in flight: the bound reached */
        ask_udp(fd, "pypi.org", SH_DNS_TYPE_A, &w, 5000);
        ck_assert_int_gt(w.len, 12);
        ck_assert_uint_eq(rcode(&w), SH_DNS_SERVFAIL);
        ask_expect(SBX2_IP, "blocked.test", SH_DNS_TYPE_A, SH_DNS_NXDOMAIN,
                   &w); /* others: served */
        close(fd);
        close(silent);
}
END_TEST

START_TEST(test_a_sandbox_past_its_tcp_clients_is_cut_at_once)
{
        sh_dns_config cfg = {.sandbox_tcp = 1};
        wait_for w = {.len = -1};
        int first, second;

        proxy_restart(&cfg);
        first = tcp_client(SBX1_IP);
        second = tcp_client(SBX1_IP);
        for (int i = 0; i < 10 && w.len != 0; i++)
                run_until_answer(second, &w, 200);
        ck_assert_int_eq(w.len, 0);                                /* EOF: closed at its accept */
        ask_tcp(first, "pypi.org", SH_DNS_TYPE_A, &w, 2 + 12 + 1); /* the first one still served */
        close(first);
        close(second);
}
END_TEST

START_TEST(test_a_slow_tcp_client_is_cut)
{
        sh_dns_config cfg = {.tcp_idle_ms = 200};
        wait_for w = {.len = -1};
        int fd;

        proxy_restart(&cfg);
        fd = tcp_client(SBX1_IP);
        ck_assert_int_eq(send(fd, "\0", 1, MSG_NOSIGNAL), 1); /* half a length, then nothing */
        for (int i = 0; i < 20 && w.len != 0; i++)
                run_until_answer(fd, &w, 250);
        ck_assert_int_eq(w.len, 0); /* EOF: the proxy closed it */
        close(fd);
}
END_TEST

START_TEST(test_a_forgotten_sandbox_leaves_nothing_in_flight)
{
        sh_dns_config cfg = {.timeout_ms = 10000};
        int silent, fd, fds_before;
        wait_for w;

        silent = proxy_with_test_upstream(&cfg);
        fd = client(SBX1_IP, SOCK_DGRAM);
        fds_before = ut_count_fds();
        ask_udp(fd, "pypi.org", SH_DNS_TYPE_A, &w, 200); /* in flight: one upstream socket */
        ck_assert_int_eq(w.len, -1);
        ck_assert_int_eq(ut_count_fds(), fds_before + 1);
        sh_dns_forget(proxy, 1);
        ck_assert_int_eq(ut_count_fds(), fds_before);
        close(fd);
        close(silent);
}
END_TEST

/* The TTL of an answer's first record (pypi.org's one A record: right after the question). */
static uint32_t first_ttl(const wait_for *w, const char *name)
{
        /* the question (name, type, class), then the record's owner (a pointer), type and class */
        size_t off = 12 + strlen(name) + 2 + 4 + 2 + 2 + 2;

        ck_assert_int_ge(w->len, (ssize_t)(off + 4));
        return (uint32_t)w->buf[off] << 24 | (uint32_t)w->buf[off + 1] << 16 |
               (uint32_t)w->buf[off + 2] << 8 | w->buf[off + 3];
}

START_TEST(test_an_allowed_name_asked_again_is_answered_from_the_sandboxs_cache)
{
        int fd = client(SBX1_IP, SOCK_DGRAM);
        struct sockaddr_in p = addr_of(PROXY_IP, sh_dns_port(proxy));
        uint8_t q[512];
        size_t n;
        wait_for w;

        ask_udp(fd, "pypi.org", SH_DNS_TYPE_A, &w, 5000);
        ck_assert_int_eq(n_reported, 1);
        /* Again, another id, the name in capitals: from the cache (nothing reported), the
         * client's id and its question's case, the same record. */
        n = make_query(0x1234, "PYPI.ORG", SH_DNS_TYPE_A, q);
        ck_assert_int_eq(sendto(fd, q, n, 0, (struct sockaddr *)&p, sizeof(p)), (ssize_t)n);
        run_until_answer(fd, &w, 5000);
        ck_assert_int_eq(w.len, (ssize_t)(n + 16));
        ck_assert_int_eq(n_reported, 1);
        ck_assert_uint_eq(w.buf[0], 0x12);
        ck_assert_uint_eq(w.buf[1], 0x34);
        ck_assert_uint_eq(rcode(&w), SH_DNS_NOERROR);
        ck_assert_uint_eq(ancount(&w), 1);
        ck_assert_mem_eq(w.buf + 12, q + 12, n - 12);
        ck_assert_uint_le(first_ttl(&w, "pypi.org"), LOCAL_TTL);
        ck_assert_mem_eq(w.buf + w.len - 4, "\xc0\x00\x02\x0a", 4);
        close(fd);
}
END_TEST

START_TEST(test_a_sandboxs_cache_is_its_own)
{
        wait_for w;

        ask_expect(SBX1_IP, "pypi.org", SH_DNS_TYPE_A, SH_DNS_NOERROR, &w);
        ask_expect(SBX2_IP, "pypi.org", SH_DNS_TYPE_A, SH_DNS_NOERROR, &w);
        ck_assert_int_eq(n_reported, 2);
        ck_assert_uint_eq(reported[1].sandbox, 2);
}
END_TEST

START_TEST(test_a_flushed_sandbox_asks_upstream_again)
{
        wait_for w;

        ask_expect(SBX1_IP, "pypi.org", SH_DNS_TYPE_A, SH_DNS_NOERROR, &w);
        sh_dns_flush(proxy, 1);
        ask_expect(SBX1_IP, "pypi.org", SH_DNS_TYPE_A, SH_DNS_NOERROR, &w);
        ck_assert_int_eq(n_reported, 2);
}
END_TEST

START_TEST(test_an_answer_whose_addresses_were_not_opened_is_not_kept)
{
        wait_for w;

        opens = false;
        ask_expect(SBX1_IP, "pypi.org", SH_DNS_TYPE_A, SH_DNS_NOERROR, &w);
        ask_expect(SBX1_IP, "pypi.org", SH_DNS_TYPE_A, SH_DNS_NOERROR, &w);
        ck_assert_int_eq(n_reported, 2);
}
END_TEST

/* A sandbox keeps SH_DNS_CACHE_ENTRIES answers: one more name pushes out its oldest, which is
 * then asked upstream again, while the newest is still answered from the cache. */
START_TEST(test_a_sandboxs_cache_past_its_entries_forgets_its_oldest_answer)
{
        char name[64];
        wait_for w;
        int i;

        for (i = 0; i <= SH_DNS_CACHE_ENTRIES; i++) {
                snprintf(name, sizeof(name), "n%d.pypi.org", i);
                ask_expect(SBX1_IP, name, SH_DNS_TYPE_A, SH_DNS_NOERROR, &w);
        }
        ck_assert_int_eq(n_reported, SH_DNS_CACHE_ENTRIES + 1);
        snprintf(name, sizeof(name), "n%d.pypi.org", SH_DNS_CACHE_ENTRIES);
        ask_expect(SBX1_IP, name, SH_DNS_TYPE_A, SH_DNS_NOERROR, &w);
        ck_assert_int_eq(n_reported, SH_DNS_CACHE_ENTRIES + 1);
        ask_expect(SBX1_IP, "n0.pypi.org", SH_DNS_TYPE_A, SH_DNS_NOERROR, &w);
        ck_assert_int_eq(n_reported, SH_DNS_CACHE_ENTRIES + 2);
}
END_TEST

static Suite *suite(void)
{
        Suite *s = suite_create("dns_proxy");
        TCase *tc = tcase_create("core");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_an_allowed_name_is_answered_after_its_address_is_reported);
        tcase_add_test(tc, test_the_address_at_the_end_of_a_cname_chain_is_reported);
        tcase_add_test(tc, test_a_denied_name_is_nxdomain_and_nothing_is_reported);
        tcase_add_test(tc, test_aaaa_is_answered_empty);
        tcase_add_test(tc, test_an_unknown_source_gets_no_answer);
        tcase_add_test(tc, test_garbage_is_dropped_and_the_next_query_answered);
        tcase_add_test(tc, test_a_silent_upstream_is_servfail_after_the_tries);
        tcase_add_test(tc, test_an_answer_of_another_id_or_question_is_ignored);
        tcase_add_test(tc, test_a_flood_from_one_sandbox_does_not_starve_another);
        tcase_add_test(tc, test_a_query_over_tcp_is_answered_over_tcp);
        tcase_add_test(tc,
                       test_an_answer_past_the_clients_udp_size_is_truncated_and_whole_over_tcp);
        tcase_add_test(tc, test_a_sandbox_past_its_queries_in_flight_gets_servfail_at_once);
        tcase_add_test(tc, test_a_sandbox_past_its_tcp_clients_is_cut_at_once);
        tcase_add_test(tc, test_a_slow_tcp_client_is_cut);
        tcase_add_test(tc, test_a_forgotten_sandbox_leaves_nothing_in_flight);
        tcase_add_test(tc, test_an_allowed_name_asked_again_is_answered_from_the_sandboxs_cache);
        tcase_add_test(tc, test_a_sandboxs_cache_is_its_own);
        tcase_add_test(tc, test_a_flushed_sandbox_asks_upstream_again);
        tcase_add_test(tc, test_an_answer_whose_addresses_were_not_opened_is_not_kept);
        tcase_add_test(tc, test_a_sandboxs_cache_past_its_entries_forgets_its_oldest_answer);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        if (access(DNSMASQ, X_OK) != 0) {
                printf("SKIP: %s is absent (Debian dnsmasq-base)\n", DNSMASQ);
                return UT_SKIP;
        }
        return ut_run(suite());
}
