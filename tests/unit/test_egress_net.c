/* test_egress_net.c: a sandbox's link and the daemon's nftables table (egress/link.c,
 * egress/nft.c) in network namespaces each test makes: a "pod" (the test process itself,
 * unshared), an "internet" linked to it on 198.51.100.0/24 with 203.0.113.x on its lo, and
 * two "sandboxes". Every namespace is anonymous, held by the test process's fds: it goes,
 * with every link and table in it, when the (forked) test ends. The host's namespace is never
 * touched. */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <nftables/libnftables.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sh/net.h"
#include "unit.h"

#define WAIT_MS 1500 /* how long a connection or datagram that should not pass is waited for */

typedef struct world {
        int pod, inet, sbx[2];
        sh_egress_ipv4_net range;
        struct in_addr gw, addr[2];
        sh_egress_links *links;
        sh_egress_nft *nft;
        char tag[32];
} world;

static int ns_self(void)
{
        int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        return fd;
}

/* A new namespace, its fd; the caller stays in the pod's. */
static int ns_new(int pod)
{
        int fd;

        ck_assert_int_eq(unshare(CLONE_NEWNET), 0);
        fd = ns_self();
        ck_assert_int_eq(setns(pod, CLONE_NEWNET), 0);
        return fd;
}

/* Run "ip <args>" (space-separated, no quoting) in namespace ns; asserts it succeeds. */
static void ip_in(int ns, const char *fmt, ...) _printf_(2, 3);
static void ip_in(int ns, const char *fmt, ...)
{
        char line[512], *argv[32], *save = NULL, *tok;
        size_t argc = 0;
        va_list ap;
        pid_t pid;

        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        argv[argc++] = (char *)"ip";
        for (tok = strtok_r(line, " ", &save); tok && argc + 1 < ARRAY_SIZE(argv);
             tok = strtok_r(NULL, " ", &save))
                argv[argc++] = tok;
        argv[argc] = NULL;
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (setns(ns, CLONE_NEWNET) < 0)
                        _exit(126);
                execvp("ip", argv);
                _exit(127);
        }
        ck_assert_msg(ut_wait_pid(pid, 10000) == 0, "ip %s failed", line);
}

/* A socket made in namespace ns (the process comes back to the pod's). */
static int socket_in(const world *w, int ns, int type)
{
        int fd;

        ck_assert_int_eq(setns(ns, CLONE_NEWNET), 0);
        fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(setns(w->pod, CLONE_NEWNET), 0);
        ck_assert_int_ge(fd, 0);
        return fd;
}

static struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

        ck_assert_int_eq(inet_pton(AF_INET, ip, &a.sin_addr), 1);
        return a;
}

/* A TCP listener in ns on ip (any port); its port. */
static int listen_in(const world *w, int ns, const char *ip, uint16_t *port)
{
        struct sockaddr_in a = sin_of(ip, 0);
        socklen_t len = sizeof(a);
        int fd = socket_in(w, ns, SOCK_STREAM);

        ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(fd, 64), 0);
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        *port = ntohs(a.sin_port);
        return fd;
}

/* A TCP connection from ns (from address `src` when not NULL) to ip:port within WAIT_MS: its
 * fd, or -1. */
static int connect_src(const world *w, int ns, const char *src, const char *ip, uint16_t port)
{
        struct sockaddr_in a = sin_of(ip, port);
        struct pollfd p = {.events = POLLOUT};
        socklen_t len = sizeof(int);
        int e = 0;

        p.fd = socket_in(w, ns, SOCK_STREAM | SOCK_NONBLOCK);
        if (src) {
                struct sockaddr_in b = sin_of(src, 0);

                ck_assert_int_eq(bind(p.fd, (struct sockaddr *)&b, sizeof(b)), 0);
        }
        if (connect(p.fd, (struct sockaddr *)&a, sizeof(a)) == 0)
                return p.fd;
        ck_assert_int_eq(errno, EINPROGRESS);
        if (poll(&p, 1, WAIT_MS) == 1 && getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 &&
            e == 0)
                return p.fd;
        close(p.fd);
        return -1;
}

static int connect_from(const world *w, int ns, const char *ip, uint16_t port)
{
        return connect_src(w, ns, NULL, ip, port);
}

static bool reaches(const world *w, int ns, const char *ip, uint16_t port)
{
        int fd = connect_from(w, ns, ip, port);

        if (fd < 0)
                return false;
        close(fd);
        return true;
}

/* Whether a datagram from `from` (from address `src` when not NULL) to ip:53 reaches a
 * socket bound there in `to`. */
static bool dns_src_arrives(const world *w, int from, const char *src, int to, const char *ip)
{
        struct sockaddr_in a = sin_of(ip, 53);
        struct pollfd p = {.events = POLLIN};
        int s = socket_in(w, from, SOCK_DGRAM);
        bool got;

        if (src) {
                struct sockaddr_in b = sin_of(src, 0);

                ck_assert_int_eq(bind(s, (struct sockaddr *)&b, sizeof(b)), 0);
        }
        p.fd = socket_in(w, to, SOCK_DGRAM);
        ck_assert_int_eq(bind(p.fd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(sendto(s, "q", 1, 0, (struct sockaddr *)&a, sizeof(a)), 1);
        got = poll(&p, 1, WAIT_MS) == 1;
        close(s);
        close(p.fd);
        return got;
}

static bool dns_arrives(const world *w, int from, int to, const char *ip)
{
        return dns_src_arrives(w, from, NULL, to, ip);
}

/* Whether a byte written on c reaches the listener's accepted end (accepted now if need be). */
static bool passes(int listener, int *accepted, int c)
{
        struct pollfd p = {.events = POLLIN};
        char b;

        if (*accepted < 0) {
                p.fd = listener;
                ck_assert_int_eq(poll(&p, 1, WAIT_MS), 1);
                *accepted = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
                ck_assert_int_ge(*accepted, 0);
        }
        if (write(c, "x", 1) != 1)
                return false;
        p.fd = *accepted;
        return poll(&p, 1, WAIT_MS) == 1 && read(*accepted, &b, 1) == 1;
}

static void world_down(world *w);

/* Sandbox 0's connection c (accepted as acc by l) carries nothing more, and no new one to
 * 198.51.100.2 is made; then the world goes. */
static void expect_cut(world *w, int l, int acc, int c, uint16_t port)
{
        ck_assert(!passes(l, &acc, c));
        ck_assert(!reaches(w, w->sbx[0], "198.51.100.2", port));
        close(c);
        close(acc);
        close(l);
        world_down(w);
}

static const sh_egress_ipv4_net *nets(const char *const *s, size_t n, sh_egress_ipv4_net *out)
{
        size_t i;

        for (i = 0; i < n; i++)
                ck_assert_int_eq(sh_egress_ipv4_net_parse(s[i], &out[i]), 0);
        return out;
}

/* A table of the name `tag` will have, with a chain "junk": a previous run's. */
static void stale_table(const char *tag)
{
        struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        char cmd[256];

        ck_assert_ptr_nonnull(ctx);
        nft_ctx_buffer_error(ctx);
        snprintf(cmd, sizeof(cmd),
                 "add table inet sandbox_host_%s\nadd chain inet sandbox_host_%s junk\n", tag, tag);
        ck_assert_int_eq(nft_run_cmd_from_buffer(ctx, cmd), 0);
        nft_ctx_free(ctx);
}

/* The table (w->nft) of the world's tag and range. Operator lists: deny 203.0.113.0/28,
 * allow 203.0.113.20. */
static void table_open(world *w, uint32_t conn_max, uint32_t dns_max)
{
        static const char *deny[] = {"203.0.113.0/28"}, *allow[] = {"203.0.113.20"};
        sh_egress_ipv4_net d[1], a[1];
        sh_egress_nft_config c = {.ifprefix = "shv", .conn_max = conn_max, .dns_max = dns_max};
        _cleanup_error_ sh_error *err = NULL;

        c.tag = w->tag;
        c.range = w->range;
        c.proxy = w->gw;
        c.deny = nets(deny, 1, d);
        c.ndeny = 1;
        c.allow = nets(allow, 1, a);
        c.nallow = 1;
        ck_assert_msg(sh_egress_nft_open(&c, &w->nft, &err) == 0, "%s", err ? err->msg : "");
}

/* The pod, the internet, two sandboxes, the links and the table (no sandbox in it yet; with
 * `stale`, a previous run's table of its name was there). */
static void world_up(world *w, uint32_t conn_max, uint32_t dns_max, bool stale)
{
        _cleanup_error_ sh_error *err = NULL;
        pid_t me = getpid();
        int i;

        memset(w, 0, sizeof(*w));
        ck_assert_int_eq(unshare(CLONE_NEWNET), 0);
        w->pod = ns_self();
        w->inet = ns_new(w->pod);
        for (i = 0; i < 2; i++)
                w->sbx[i] = ns_new(w->pod);
        ip_in(w->pod, "link set lo up");
        ip_in(w->pod, "link add name up0 type veth peer name eth0 netns /proc/%d/fd/%d", (int)me,
              w->inet);
        ip_in(w->pod, "addr add 198.51.100.1/24 dev up0");
        ip_in(w->pod, "link set up0 up");
        ip_in(w->pod, "route add 203.0.113.0/24 via 198.51.100.2");
        ip_in(w->inet, "link set lo up");
        ip_in(w->inet, "addr add 198.51.100.2/24 dev eth0");
        ip_in(w->inet, "link set eth0 up");
        for (i = 0; i < 4; i++)
                ip_in(w->inet, "addr add 203.0.113.%d/32 dev lo", i == 0 ? 10 : i * 10 + 10);
        ck_assert_int_eq(sh_egress_ipv4_net_parse(SH_EGRESS_CIDR_DEFAULT, &w->range), 0);
        w->gw = sh_egress_gateway(&w->range);
        for (i = 0; i < 2; i++)
                ck_assert_int_eq(sh_egress_slot_addr(&w->range, (uint32_t)i, &w->addr[i]), 0);
        ck_assert_msg(sh_egress_links_open(&w->range, "shv", &w->links, &err) == 0, "%s",
                      err ? err->msg : "");
        snprintf(w->tag, sizeof(w->tag), "t%d", (int)me);
        if (stale)
                stale_table(w->tag);
        table_open(w, conn_max, dns_max);
}

/* Links before the table (net.h), then the namespaces (and what is in them) go. */
static void world_down(world *w)
{
        _cleanup_error_ sh_error *err = NULL;
        int i;

        for (i = 0; w->links && i < 2; i++)
                ck_assert_int_eq(sh_egress_link_del(w->links, (uint32_t)i, &err), 0);
        w->links = sh_egress_links_close(w->links);
        if (w->nft)
                ck_assert_int_eq(sh_egress_nft_close(w->nft, &err), 0);
        w->nft = NULL;
        close(w->inet);
        close(w->sbx[0]);
        close(w->sbx[1]);
        close(w->pod);
}

/* Sandbox i into the table, then its link (the order net.h asks for). */
static void sandbox_up(world *w, uint32_t i, const char *const *allow, size_t nallow,
                       bool default_allow)
{
        sh_egress_nft_rule rules[8];
        _cleanup_error_ sh_error *err = NULL;
        char name[IFNAMSIZ];
        size_t k;

        for (k = 0; k < nallow; k++) {
                ck_assert_int_eq(sh_egress_ipv4_net_parse(allow[k], &rules[k].net), 0);
                rules[k].allow = true;
        }
        sh_egress_link_name(w->links, i, name, sizeof(name));
        ck_assert_msg(sh_egress_nft_sandbox_add(w->nft, i, name, w->addr[i], rules, nallow,
                                                default_allow, &err) == 0,
                      "%s", err ? err->msg : "");
        ck_assert_msg(sh_egress_link_add(w->links, i, w->sbx[i], &err) == 0, "%s",
                      err ? err->msg : "");
}

/* Whether "list <what>" succeeds; its output's first `size` - 1 bytes in out (if any). */
static bool nft_list(const char *what, char *out, size_t size)
{
        struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        char cmd[128];
        int r;

        ck_assert_ptr_nonnull(ctx);
        nft_ctx_buffer_output(ctx);
        nft_ctx_buffer_error(ctx);
        snprintf(cmd, sizeof(cmd), "list %s", what);
        r = nft_run_cmd_from_buffer(ctx, cmd);
        if (out)
                snprintf(out, size, "%s", nft_ctx_get_output_buffer(ctx));
        nft_ctx_free(ctx);
        return r == 0;
}

/* nft_list with each object's handle ("nft -a"), and with `netlink`, what
 * "nft --debug=netlink" prints too. */
static bool nft_list_handles(const char *what, bool netlink, char *out, size_t size)
{
        struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        char cmd[160];
        int r;

        ck_assert_ptr_nonnull(ctx);
        nft_ctx_output_set_flags(ctx, NFT_CTX_OUTPUT_HANDLE);
        if (netlink) /* each rule's expressions and each element's bytes as the kernel has them */
                nft_ctx_output_set_debug(ctx, NFT_DEBUG_NETLINK);
        nft_ctx_buffer_output(ctx);
        nft_ctx_buffer_error(ctx);
        snprintf(cmd, sizeof(cmd), "list %s", what);
        r = nft_run_cmd_from_buffer(ctx, cmd);
        snprintf(out, size, "%s", nft_ctx_get_output_buffer(ctx));
        nft_ctx_free(ctx);
        return r == 0;
}

static bool nft_lists(const world *w, const char *what)
{
        (void)w;
        return nft_list(what, NULL, 0);
}

START_TEST(test_allowed_address_reached_other_not)
{
        static const char *allow[] = {"198.51.100.2/32"};
        world w;
        uint16_t port;
        int l;

        world_up(&w, 64, 16, false);
        sandbox_up(&w, 0, allow, 1, false);
        l = listen_in(&w, w.inet, "0.0.0.0", &port);
        ck_assert(reaches(&w, w.sbx[0], "198.51.100.2", port));
        ck_assert(!reaches(&w, w.sbx[0], "203.0.113.30", port));
        close(l);
        world_down(&w);
}
END_TEST

START_TEST(test_dns_address_opens_for_its_ttl_and_keeps_open_connections)
{
        _cleanup_error_ sh_error *err = NULL;
        char set[64], listing[2048];
        struct in_addr a;
        uint64_t until;
        world w;
        uint16_t port;
        int l, c, acc = -1;
        bool there = true;

        world_up(&w, 4096, 16, false);
        sandbox_up(&w, 0, NULL, 0, false);
        l = listen_in(&w, w.inet, "0.0.0.0", &port);
        ck_assert(!reaches(&w, w.sbx[0], "198.51.100.2", port));
        inet_pton(AF_INET, "198.51.100.2", &a);
        ck_assert_msg(sh_egress_nft_allow_addr(w.nft, 0, a, 2, &err) == 0, "%s",
                      err ? err->msg : "");
        c = connect_from(&w, w.sbx[0], "198.51.100.2", port);
        ck_assert_int_ge(c, 0);
        /* The element leaves the set within a bound, and with it the address. */
        snprintf(set, sizeof(set), "set inet %s dns_0", sh_egress_nft_table(w.nft));
        for (until = ut_now_ms() + 15000; there && ut_now_ms() < until; ut_sleep_ms(100)) {
                ck_assert(nft_list(set, listing, sizeof(listing)));
                there = strstr(listing, "198.51.100.2") != NULL;
        }
        ck_assert(!there);
        ck_assert(!reaches(&w, w.sbx[0], "198.51.100.2", port));
        /* The connection opened while it was there still carries data. */
        ck_assert(passes(l, &acc, c));
        close(c);
        close(acc);
        close(l);
        world_down(&w);
}
END_TEST

/* A full DNS set refuses a new address, still refreshes one it holds, and still lets a
 * policy change forget one. */
START_TEST(test_full_dns_set_refuses_new_addresses_only)
{
        _cleanup_error_ sh_error *err = NULL;
        static const char *ip[] = {"203.0.113.30", "203.0.113.40", "203.0.113.50"};
        char set[64], listing[2048];
        struct in_addr a[3];
        world w;
        int i;

        world_up(&w, 64, 2, false);
        sandbox_up(&w, 0, NULL, 0, false);
        for (i = 0; i < 3; i++)
                inet_pton(AF_INET, ip[i], &a[i]);
        ck_assert_int_eq(sh_egress_nft_allow_addr(w.nft, 0, a[0], 60, &err), 0);
        ck_assert_int_eq(sh_egress_nft_allow_addr(w.nft, 0, a[1], 60, &err), 0);
        ck_assert_int_eq(sh_egress_nft_allow_addr(w.nft, 0, a[2], 60, &err), -ENFILE);
        ck_assert_ptr_null(strchr(err->msg, '\n')); /* nft's message on one line */
        sh_error_release(&err);
        ck_assert_msg(sh_egress_nft_allow_addr(w.nft, 0, a[1], 120, &err) == 0, "%s",
                      err ? err->msg : "");
        snprintf(set, sizeof(set), "set inet %s dns_0", sh_egress_nft_table(w.nft));
        ck_assert(nft_list(set, listing, sizeof(listing)));
        ck_assert_msg(strstr(listing, "203.0.113.40 timeout 2m"), "%s", listing);
        ck_assert_msg(sh_egress_nft_policy(w.nft, 0, NULL, 0, false, &a[0], 1, &err) == 0, "%s",
                      err ? err->msg : "");
        ck_assert_int_eq(sh_egress_nft_allow_addr(w.nft, 0, a[2], 60, &err), 0);
        world_down(&w);
}
END_TEST

/* An address opened (one libnftnl batch) is in the sandbox's set with its TTL as timeout; opened
 * again it is there once, its timeout and expiry set anew. */
START_TEST(test_opened_address_in_set_with_its_timeout_refreshed_when_opened_again)
{
        _cleanup_error_ sh_error *err = NULL;
        char set[64], listing[2048];
        const char *e;
        struct in_addr a;
        world w;

        world_up(&w, 64, 16, false);
        sandbox_up(&w, 0, NULL, 0, false);
        inet_pton(AF_INET, "203.0.113.30", &a);
        snprintf(set, sizeof(set), "set inet %s dns_0", sh_egress_nft_table(w.nft));
        ck_assert_msg(sh_egress_nft_allow_addr(w.nft, 0, a, 60, &err) == 0, "%s",
                      err ? err->msg : "");
        ck_assert(nft_list(set, listing, sizeof(listing)));
        ck_assert_msg(strstr(listing, "203.0.113.30 timeout 1m expires"), "%s", listing);
        ck_assert_msg(sh_egress_nft_allow_addr(w.nft, 0, a, 300, &err) == 0, "%s",
                      err ? err->msg : "");
        ck_assert(nft_list(set, listing, sizeof(listing)));
        /* The expiry too: over the first TTL (1m), which it would still be under if only kept. */
        e = strstr(listing, "203.0.113.30 timeout 5m expires ");
        ck_assert_msg(e, "%s", listing);
        e += strlen("203.0.113.30 timeout 5m expires ");
        ck_assert_msg(strncmp(e, "5m", 2) == 0 || strncmp(e, "4m", 2) == 0, "%s", listing);
        ck_assert_ptr_null(strstr(strstr(listing, "203.0.113.30") + 1, "203.0.113.30"));
        world_down(&w);
}
END_TEST

/* A full set refuses a new address with -ENFILE (and leaves it out); a slot not in the table
 * gives -ENOENT. */
START_TEST(test_open_address_full_set_enfile_no_slot_enoent)
{
        _cleanup_error_ sh_error *err = NULL;
        char set[64], listing[2048];
        struct in_addr a, b;
        world w;

        world_up(&w, 64, 1, false);
        sandbox_up(&w, 0, NULL, 0, false);
        inet_pton(AF_INET, "203.0.113.30", &a);
        inet_pton(AF_INET, "203.0.113.40", &b);
        ck_assert_msg(sh_egress_nft_allow_addr(w.nft, 0, a, 60, &err) == 0, "%s",
                      err ? err->msg : "");
        ck_assert_int_eq(sh_egress_nft_allow_addr(w.nft, 0, b, 60, &err), -ENFILE);
        ck_assert_int_eq(err->errnum, ENFILE);
        sh_error_release(&err);
        snprintf(set, sizeof(set), "set inet %s dns_0", sh_egress_nft_table(w.nft));
        ck_assert(nft_list(set, listing, sizeof(listing)));
        ck_assert_msg(strstr(listing, "203.0.113.30"), "%s", listing);
        ck_assert_msg(!strstr(listing, "203.0.113.40"), "%s", listing);
        ck_assert_int_eq(sh_egress_nft_allow_addr(w.nft, 1, b, 60, &err), -ENOENT);
        world_down(&w);
}
END_TEST

START_TEST(test_operator_deny_wins_and_operator_allow_is_everyones)
{
        static const char *allow[] = {"203.0.113.0/24"};
        _cleanup_error_ sh_error *err = NULL;
        struct in_addr a;
        world w;
        uint16_t port;
        int l;

        world_up(&w, 64, 16, false);
        sandbox_up(&w, 0, allow, 1, true);
        sandbox_up(&w, 1, NULL, 0, false);
        inet_pton(AF_INET, "203.0.113.10", &a);
        ck_assert_int_eq(sh_egress_nft_allow_addr(w.nft, 0, a, 60, &err), 0);
        l = listen_in(&w, w.inet, "0.0.0.0", &port);
        ck_assert(!reaches(&w, w.sbx[0], "203.0.113.10", port));
        ck_assert(reaches(&w, w.sbx[0], "203.0.113.30", port));
        ck_assert(reaches(&w, w.sbx[1], "203.0.113.20", port));
        ck_assert(!reaches(&w, w.sbx[1], "203.0.113.30", port));
        close(l);
        world_down(&w);
}
END_TEST

/* A TCP listener in ns on ip:53. */
static int listen_dns(const world *w, int ns, const char *ip)
{
        struct sockaddr_in a = sin_of(ip, 53);
        int fd = socket_in(w, ns, SOCK_STREAM);

        ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(fd, 4), 0);
        return fd;
}

START_TEST(test_sandbox_reaches_only_the_dns_proxy_of_the_pod)
{
        char gw[INET_ADDRSTRLEN], other[INET_ADDRSTRLEN];
        world w;
        uint16_t api, api2, peer;
        int l[5], i;

        world_up(&w, 64, 16, false);
        sandbox_up(&w, 0, NULL, 0, true);
        sandbox_up(&w, 1, NULL, 0, true);
        inet_ntop(AF_INET, &w.gw, gw, sizeof(gw));
        inet_ntop(AF_INET, &w.addr[1], other, sizeof(other));
        l[0] = listen_in(&w, w.pod, gw, &api);
        l[1] = listen_in(&w, w.pod, "198.51.100.1", &api2);
        l[2] = listen_in(&w, w.sbx[1], "0.0.0.0", &peer);
        l[3] = listen_dns(&w, w.pod, gw);
        l[4] = listen_dns(&w, w.inet, "198.51.100.2");
        /* The daemon's API on the gateway and on the pod's address, another sandbox: no. */
        ck_assert(!reaches(&w, w.sbx[0], gw, api));
        ck_assert(!reaches(&w, w.sbx[0], "198.51.100.1", api2));
        ck_assert(!reaches(&w, w.sbx[0], other, peer));
        /* DNS: to the proxy's address over UDP and TCP; to anything else, never (the
         * sandbox's default is allow). */
        ck_assert(dns_arrives(&w, w.sbx[0], w.pod, gw));
        ck_assert(reaches(&w, w.sbx[0], gw, 53));
        ck_assert(!dns_arrives(&w, w.sbx[0], w.inet, "198.51.100.2"));
        ck_assert(!reaches(&w, w.sbx[0], "198.51.100.2", 53));
        for (i = 0; i < 5; i++)
                close(l[i]);
        world_down(&w);
}
END_TEST

/* A sandbox's UDP DNS flood is dropped by the input chain's meter (its counter counts it)
 * before it reaches the proxy's socket, and another sandbox's query still arrives. */
START_TEST(test_a_sandboxs_dns_flood_is_dropped_before_the_proxy_and_anothers_query_arrives)
{
        static char listing[16384];
        char gw[INET_ADDRSTRLEN], what[128];
        struct sockaddr_in a;
        const char *at;
        world w;
        int l, s, i, sent = 0;

        world_up(&w, 64, 16, false);
        sandbox_up(&w, 0, NULL, 0, true);
        sandbox_up(&w, 1, NULL, 0, true);
        inet_ntop(AF_INET, &w.gw, gw, sizeof(gw));
        a = sin_of(gw, 53);
        l = socket_in(&w, w.pod, SOCK_DGRAM); /* the proxy's socket: what passes lands here */
        ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
        s = socket_in(&w, w.sbx[0], SOCK_DGRAM);
        /* Far more than the meter's burst: whatever the pace, some are over its rate. */
        for (i = 0; i < 20000; i++)
                if (sendto(s, "q", 1, MSG_DONTWAIT, (struct sockaddr *)&a, sizeof(a)) == 1)
                        sent++;
        close(s);
        ck_assert_int_gt(sent, (int)(2 * SH_EGRESS_DNS_PPS_BURST));
        snprintf(what, sizeof(what), "chain inet %s input", sh_egress_nft_table(w.nft));
        ck_assert(nft_list(what, listing, sizeof(listing)));
        at = strstr(listing, "counter packets ");
        ck_assert_msg(at, "no meter counter in %s", listing);
        ck_assert_msg(strtoul(at + strlen("counter packets "), NULL, 10) > 0, "%s", listing);
        close(l);
        ck_assert(dns_arrives(&w, w.sbx[1], w.pod, gw));
        world_down(&w);
}
END_TEST

/* A sandbox that takes another address (its root may own its namespace) gets nothing out. */
START_TEST(test_spoofed_source_dropped)
{
        char gw[INET_ADDRSTRLEN];
        world w;
        uint16_t port;
        int l, c;

        world_up(&w, 64, 16, false);
        sandbox_up(&w, 0, NULL, 0, true);
        sandbox_up(&w, 1, NULL, 0, true);
        l = listen_in(&w, w.inet, "0.0.0.0", &port);
        ip_in(w.sbx[0], "addr add 100.127.0.3/32 dev eth0"); /* sandbox 1's */
        ip_in(w.sbx[0], "addr add 192.0.2.9/32 dev eth0");
        ck_assert(reaches(&w, w.sbx[0], "198.51.100.2", port));
        c = connect_src(&w, w.sbx[0], "100.127.0.3", "198.51.100.2", port);
        ck_assert_int_lt(c, 0);
        c = connect_src(&w, w.sbx[0], "192.0.2.9", "198.51.100.2", port);
        ck_assert_int_lt(c, 0);
        /* Nor does its DNS reach the proxy: the query would count as sandbox 1's. */
        inet_ntop(AF_INET, &w.gw, gw, sizeof(gw));
        ck_assert(dns_src_arrives(&w, w.sbx[0], NULL, w.pod, gw));
        ck_assert(!dns_src_arrives(&w, w.sbx[0], "100.127.0.3", w.pod, gw));
        close(l);
        world_down(&w);
}
END_TEST

START_TEST(test_connections_per_sandbox_bounded)
{
        world w;
        uint16_t port;
        int l, c[4], i;

        world_up(&w, 3, 16, false);
        sandbox_up(&w, 0, NULL, 0, true);
        l = listen_in(&w, w.inet, "0.0.0.0", &port);
        for (i = 0; i < 3; i++) {
                c[i] = connect_from(&w, w.sbx[0], "198.51.100.2", port);
                ck_assert_int_ge(c[i], 0);
        }
        ck_assert(!reaches(&w, w.sbx[0], "198.51.100.2", port));
        for (i = 0; i < 3; i++)
                close(c[i]);
        close(l);
        world_down(&w);
}
END_TEST

START_TEST(test_policy_change_cuts_established_connections)
{
        _cleanup_error_ sh_error *err = NULL;
        world w;
        uint16_t port;
        int l, c, acc = -1;

        world_up(&w, 64, 16, false);
        sandbox_up(&w, 0, NULL, 0, true);
        l = listen_in(&w, w.inet, "0.0.0.0", &port);
        c = connect_from(&w, w.sbx[0], "198.51.100.2", port);
        ck_assert_int_ge(c, 0);
        ck_assert(passes(l, &acc, c));
        ck_assert_msg(sh_egress_nft_policy(w.nft, 0, NULL, 0, false, NULL, 0, &err) == 0, "%s",
                      err ? err->msg : "");
        expect_cut(&w, l, acc, c, port);
}
END_TEST

START_TEST(test_policy_change_forgets_addresses_keeps_allowed_ones)
{
        _cleanup_error_ sh_error *err = NULL;
        sh_egress_nft_rule r;
        struct in_addr a;
        world w;
        uint16_t port;
        int l, c, acc = -1;

        world_up(&w, 64, 16, false);
        sandbox_up(&w, 0, NULL, 0, false);
        l = listen_in(&w, w.inet, "0.0.0.0", &port);
        inet_pton(AF_INET, "198.51.100.2", &a);
        ck_assert_int_eq(sh_egress_nft_allow_addr(w.nft, 0, a, 600, &err), 0);
        c = connect_from(&w, w.sbx[0], "198.51.100.2", port);
        ck_assert_int_ge(c, 0);
        /* A new rule that allows 203.0.113.30: the open connection is judged again, allowed. */
        ck_assert_int_eq(sh_egress_ipv4_net_parse("203.0.113.30", &r.net), 0);
        r.allow = true;
        ck_assert_int_eq(sh_egress_nft_policy(w.nft, 0, &r, 1, false, NULL, 0, &err), 0);
        ck_assert(passes(l, &acc, c));
        ck_assert(reaches(&w, w.sbx[0], "203.0.113.30", port));
        /* Its name denied: its address forgotten, the connection cut. */
        ck_assert_int_eq(sh_egress_nft_policy(w.nft, 0, &r, 1, false, &a, 1, &err), 0);
        expect_cut(&w, l, acc, c, port);
}
END_TEST

START_TEST(test_delete_removes_link_chains_and_set)
{
        _cleanup_error_ sh_error *err = NULL;
        char what[128];
        world w;
        unsigned eth0;

        world_up(&w, 64, 16, false);
        sandbox_up(&w, 0, NULL, 0, true);
        ck_assert_uint_ne(if_nametoindex("shv0"), 0);
        ck_assert_int_eq(sh_egress_link_del(w.links, 0, &err), 0);
        ck_assert_int_eq(sh_egress_nft_sandbox_del(w.nft, 0, &err), 0);
        ck_assert_uint_eq(if_nametoindex("shv0"), 0);
        ck_assert_int_eq(setns(w.sbx[0], CLONE_NEWNET), 0);
        eth0 = if_nametoindex("eth0");
        ck_assert_int_eq(setns(w.pod, CLONE_NEWNET), 0);
        ck_assert_uint_eq(eth0, 0);
        snprintf(what, sizeof(what), "chain inet %s sb_0", sh_egress_nft_table(w.nft));
        ck_assert(!nft_lists(&w, what));
        snprintf(what, sizeof(what), "set inet %s dns_0", sh_egress_nft_table(w.nft));
        ck_assert(!nft_lists(&w, what));
        /* Deleting again is no error; the slot can be used again. */
        ck_assert_int_eq(sh_egress_link_del(w.links, 0, &err), 0);
        ck_assert_int_eq(sh_egress_nft_sandbox_del(w.nft, 0, &err), 0);
        sandbox_up(&w, 0, NULL, 0, true);
        world_down(&w);
}
END_TEST

START_TEST(test_stale_table_replaced_and_table_gone_at_close)
{
        _cleanup_error_ sh_error *err = NULL;
        struct sockaddr_in a = {.sin_family = AF_INET};
        char table[128], junk[160];
        world w;
        int s;

        world_up(&w, 64, 16, true);
        snprintf(table, sizeof(table), "table inet %s", sh_egress_nft_table(w.nft));
        snprintf(junk, sizeof(junk), "chain inet %s junk", sh_egress_nft_table(w.nft));
        ck_assert(nft_lists(&w, table));
        ck_assert(!nft_lists(&w, junk));
        ck_assert_int_eq(sh_egress_nft_close(w.nft, &err), 0);
        ck_assert(!nft_lists(&w, table));
        /* The gateway is on lo while the links are open, and leaves with them. */
        a.sin_addr = w.gw;
        s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
        close(s);
        w.links = sh_egress_links_close(w.links);
        w.nft = NULL;
        s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), -1);
        ck_assert_int_eq(errno, EADDRNOTAVAIL);
        close(s);
        world_down(&w);
}
END_TEST

/* "list table" of the world's table with its handles and the kernel's expressions and
 * elements (nft --debug=netlink), in out (asserted to fit). */
static void table_listing(const world *w, char *out, size_t size)
{
        char what[128];

        snprintf(what, sizeof(what), "table inet %s", sh_egress_nft_table(w->nft));
        ck_assert(nft_list_handles(what, true, out, size));
        ck_assert_uint_lt(strlen(out), size - 1);
}

/* The text transaction sh_egress_nft_sandbox_add ran through libnftables before it was one
 * libnftnl batch, for slot s with policy generation gen: the reference its batch must equal. */
static void sandbox_add_text(const world *w, uint32_t s, const char *ifname, struct in_addr addr,
                             const sh_egress_nft_rule *rules, size_t nrules, bool default_allow,
                             uint32_t conn_max, uint32_t dns_max, uint32_t gen)
{
        struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        const char *T = sh_egress_nft_table(w->nft);
        char cmd[8192], a[INET_ADDRSTRLEN], net[INET_ADDRSTRLEN];
        size_t len = 0, i;

#define ADD(...) (len += (size_t)snprintf(cmd + len, sizeof(cmd) - len, __VA_ARGS__))
        inet_ntop(AF_INET, &addr, a, sizeof(a));
        ADD("add set inet %s dns_%u { type ipv4_addr; flags timeout; size %u; }\n", T, s, dns_max);
        ADD("add chain inet %s sb_%u\nadd chain inet %s sbp_%u\n", T, s, T, s);
        ADD("add rule inet %s sb_%u ct state new ct count over %u drop\n", T, s, conn_max);
        ADD("add rule inet %s sb_%u jump sbp_%u\n", T, s, s);
        ADD("flush chain inet %s sbp_%u\n", T, s);
        ADD("add rule inet %s sbp_%u ct mark %u accept\n", T, s, gen);
        ADD("add rule inet %s sbp_%u ct original ip daddr @deny drop\n", T, s);
        ADD("add rule inet %s sbp_%u ct original ip daddr @allow ct mark set %u accept\n", T, s,
            gen);
        for (i = 0; i < nrules; i++) {
                inet_ntop(AF_INET, &rules[i].net.addr, net, sizeof(net));
                ADD("add rule inet %s sbp_%u ct original ip daddr %s/%u ", T, s, net,
                    rules[i].net.prefix);
                if (rules[i].allow)
                        ADD("ct mark set %u accept\n", gen);
                else
                        ADD("drop\n");
        }
        ADD("add rule inet %s sbp_%u ct original ip daddr @dns_%u ct mark set %u accept\n", T, s, s,
            gen);
        if (default_allow)
                ADD("add rule inet %s sbp_%u ct mark set %u accept\n", T, s, gen);
        ADD("add element inet %s pairs { \"%s\" . %s }\n", T, ifname, a);
        ADD("add element inet %s out { \"%s\" . %s : jump sb_%u }\n", T, ifname, a, s);
        ADD("add element inet %s in { \"%s\" . %s : jump sb_%u }\n", T, ifname, a, s);
#undef ADD
        ck_assert_uint_lt(len, sizeof(cmd));
        ck_assert_ptr_nonnull(ctx);
        nft_ctx_buffer_output(ctx);
        nft_ctx_buffer_error(ctx);
        ck_assert_msg(nft_run_cmd_from_buffer(ctx, cmd) == 0, "%s", nft_ctx_get_error_buffer(ctx));
        nft_ctx_free(ctx);
}

/* a and b are the same text; else where they part, a few lines of each. */
static void same_text(const char *a, const char *b)
{
        size_t i = 0, from;

        while (a[i] && a[i] == b[i])
                i++;
        from = i > 120 ? i - 120 : 0;
        ck_assert_msg(a[i] == b[i], "at byte %zu:\n%.300s\n---- against ----\n%.300s", i, a + from,
                      b + from);
}

static int line_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A listing with its elements' lines ("\telement ...", in the order of the set's hash, which
 * differs from set to set) sorted, after the rest, and the table's handle left out: the same
 * bytes in a comparable order. */
static void elements_sorted(char *text)
{
        static char copy[65536], *lines[4096];
        size_t n = 0, len = 0, i;
        char *save = NULL, *l;

        ck_assert_uint_lt(strlen(text), sizeof(copy));
        strcpy(copy, text);
        text[0] = '\0';
        for (l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
                if (strncmp(l, "\telement ", 9) == 0) {
                        ck_assert_uint_lt(n, ARRAY_SIZE(lines));
                        lines[n++] = l;
                } else if (strncmp(l, "table inet ", 11) == 0)
                        len += (size_t)sprintf(text + len, "table\n"); /* its handle: new */
                else
                        len += (size_t)sprintf(text + len, "%s\n", l);
        qsort(lines, n, sizeof(*lines), line_cmp);
        for (i = 0; i < n; i++)
                len += (size_t)sprintf(text + len, "%s\n", lines[i]);
}

/* A sandbox's place in the table (one libnftnl batch) lists, handles and all, as what the
 * text transaction made: every kind of CIDR rule nft writes differently (a host, whole-byte
 * prefixes, other prefixes, /0), allowed and denied, with and without the default allow. */
START_TEST(test_sandbox_add_batch_lists_as_the_text_transaction)
{
        static const char *const cidrs[] = {"198.51.100.7/32", "198.51.0.0/16", "0.0.0.0/0",
                                            "10.16.0.0/12",    "192.0.2.0/24",  "128.0.0.0/1",
                                            "10.1.2.2/31",     "10.0.0.0/8"};
        static char batch[65536], text[65536];
        sh_egress_nft_rule rules[ARRAY_SIZE(cidrs)];
        _cleanup_error_ sh_error *err = NULL;
        char name[2][IFNAMSIZ];
        const char *at;
        uint32_t gen = 0;
        size_t k;
        world w;

        world_up(&w, 64, 16, false);
        for (k = 0; k < ARRAY_SIZE(cidrs); k++) {
                ck_assert_int_eq(sh_egress_ipv4_net_parse(cidrs[k], &rules[k].net), 0);
                rules[k].allow = k % 2 == 0;
        }
        for (k = 0; k < 2; k++)
                sh_egress_link_name(w.links, (uint32_t)k, name[k], sizeof(name[k]));
        ck_assert_msg(sh_egress_nft_sandbox_add(w.nft, 0, name[0], w.addr[0], rules,
                                                ARRAY_SIZE(rules), true, &err) == 0,
                      "%s", err ? err->msg : "");
        ck_assert_msg(
                sh_egress_nft_sandbox_add(w.nft, 1, name[1], w.addr[1], NULL, 0, false, &err) == 0,
                "%s", err ? err->msg : "");
        table_listing(&w, batch, sizeof(batch));
        /* The generation the table gave slot 0 (slot 1's is the next). */
        at = strstr(batch, "ct mark 0x");
        ck_assert_ptr_nonnull(at);
        gen = (uint32_t)strtoul(at + strlen("ct mark "), NULL, 16);
        /* The same table anew (its objects' handles start again), the text transactions. */
        ck_assert_int_eq(sh_egress_nft_close(w.nft, &err), 0);
        w.nft = NULL;
        table_open(&w, 64, 16);
        sandbox_add_text(&w, 0, name[0], w.addr[0], rules, ARRAY_SIZE(rules), true, 64, 16, gen);
        sandbox_add_text(&w, 1, name[1], w.addr[1], NULL, 0, false, 64, 16, gen + 1);
        table_listing(&w, text, sizeof(text));
        elements_sorted(batch);
        elements_sorted(text);
        same_text(batch, text);
        ck_assert_ptr_nonnull(strstr(batch, "ct original ip daddr 10.16.0.0/12 drop"));
        ck_assert_ptr_nonnull(strstr(batch, "[ connlimit count 64 flags 1 ]"));
        world_down(&w);
}
END_TEST

/* No netlink socket the table or the links hold reaches a program the daemon starts. */
START_TEST(test_netlink_sockets_are_close_on_exec)
{
        world w;
        struct dirent *e;
        int seen = 0;
        DIR *d;

        world_up(&w, 64, 16, false);
        d = opendir("/proc/self/fd");
        ck_assert_ptr_nonnull(d);
        while ((e = readdir(d))) {
                int fd = atoi(e->d_name), v = 0;
                socklen_t len = sizeof(v);

                if (fd < 3 || getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 ||
                    v != AF_NETLINK)
                        continue;
                ck_assert_msg(fcntl(fd, F_GETFD) & FD_CLOEXEC, "fd %d", fd);
                seen++;
        }
        closedir(d);
        ck_assert_int_ge(seen, 2); /* libnftables' and the links' */
        world_down(&w);
}
END_TEST

START_TEST(test_links_turn_forwarding_on)
{
        char c = 0;
        world w;
        int fd;

        world_up(&w, 64, 16, false);
        fd = open("/proc/sys/net/ipv4/ip_forward", O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(read(fd, &c, 1), 1);
        ck_assert_int_eq(c, '1');
        close(fd);
        world_down(&w);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("egress_net");
        TCase *tc = tcase_create("netns");
        int r = ut_need_root("network namespaces, links and nftables need root");

        if (r)
                return r;
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_allowed_address_reached_other_not);
        tcase_add_test(tc, test_dns_address_opens_for_its_ttl_and_keeps_open_connections);
        tcase_add_test(tc, test_full_dns_set_refuses_new_addresses_only);
        tcase_add_test(tc, test_opened_address_in_set_with_its_timeout_refreshed_when_opened_again);
        tcase_add_test(tc, test_open_address_full_set_enfile_no_slot_enoent);
        tcase_add_test(tc, test_operator_deny_wins_and_operator_allow_is_everyones);
        tcase_add_test(tc, test_sandbox_reaches_only_the_dns_proxy_of_the_pod);
        tcase_add_test(
                tc,
                test_a_sandboxs_dns_flood_is_dropped_before_the_proxy_and_anothers_query_arrives);
        tcase_add_test(tc, test_spoofed_source_dropped);
        tcase_add_test(tc, test_connections_per_sandbox_bounded);
        tcase_add_test(tc, test_policy_change_cuts_established_connections);
        tcase_add_test(tc, test_policy_change_forgets_addresses_keeps_allowed_ones);
        tcase_add_test(tc, test_delete_removes_link_chains_and_set);
        tcase_add_test(tc, test_stale_table_replaced_and_table_gone_at_close);
        tcase_add_test(tc, test_sandbox_add_batch_lists_as_the_text_transaction);
        tcase_add_test(tc, test_netlink_sockets_are_close_on_exec);
        tcase_add_test(tc, test_links_turn_forwarding_on);
        suite_add_tcase(s, tc);
        return ut_run_forked(s);
}
