/* test_cluster_peers.c: the peers of this pod (cluster/peers.c) against fake peers on
 * loopback, served on the same loop: a static list probed at /healthz, this pod recognised by
 * its instance, a peer dropped when its probe fails, two peers of one token used for neither,
 * the owner of an id by its token, the roomiest peer, asking every peer. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sh/cluster.h"
#include "sh/log.h"
#include "unit.h"

#define TOKEN_SELF "aaaaaaaa"
#define WAIT_MS    10000 /* a bound for a few probe periods, not a measurement */

/* A fake peer: answers every request with `status` and `body` (or, when `mute`, closes the
 * connection unanswered), and keeps the last request's path and hop mark. */
typedef struct fake {
        int lfd;
        sh_io *io;
        uint16_t port;
        int status;
        char body[1024];
        bool mute;
        unsigned hits;
        char last_path[256];
        char last_hop[64];
} fake;

typedef struct conn {
        fake *f;
        int fd;
        sh_io *io;
        char buf[4096];
        size_t len;
} conn;

static sh_loop *loop;

static void header_value(const char *req, const char *name, char *out, size_t size)
{
        const char *p = strcasestr(req, name);
        size_t n = 0;

        out[0] = '\0';
        if (!p)
                return;
        p += strlen(name);
        while (*p == ' ')
                p++;
        while (p[n] && p[n] != '\r' && n + 1 < size)
                n++;
        memcpy(out, p, n);
        out[n] = '\0';
}

static void conn_io(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        conn *c = data;
        ssize_t n = read(fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
        char resp[2048];
        int k;

        (void)events;
        if (n > 0) {
                c->len += (size_t)n;
                c->buf[c->len] = '\0';
                if (!strstr(c->buf, "\r\n\r\n") && c->len < sizeof(c->buf) - 1)
                        return;
                c->f->hits++;
                sscanf(c->buf, "GET %255s", c->f->last_path);
                header_value(c->buf, SH_HOP_HEADER ":", c->f->last_hop, sizeof(c->f->last_hop));
                if (!c->f->mute) {
                        k = snprintf(resp, sizeof(resp),
                                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                                     c->f->status, strlen(c->f->body), c->f->body);
                        ck_assert_int_eq(write(fd, resp, (size_t)k), k);
                }
        } else if (n < 0 && errno == EAGAIN) {
                return;
        }
        sh_loop_del_io(l, io);
        close(fd);
        free(c);
}

static void fake_accept(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        fake *f = data;
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        conn *c;

        (void)io;
        (void)events;
        if (cfd < 0)
                return;
        c = calloc(1, sizeof(*c));
        ck_assert_ptr_nonnull(c);
        c->f = f;
        c->fd = cfd;
        c->io = sh_loop_add_io(l, cfd, EPOLLIN, conn_io, c);
        ck_assert_ptr_nonnull(c->io);
}

static void fake_start(fake *f)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);

        f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(f->lfd, 0);
        ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(f->lfd, 16), 0);
        ck_assert_int_eq(getsockname(f->lfd, (struct sockaddr *)&a, &len), 0);
        f->port = ntohs(a.sin_port);
        f->status = 200;
        f->io = sh_loop_add_io(loop, f->lfd, EPOLLIN, fake_accept, f);
        ck_assert_ptr_nonnull(f->io);
}

static void fake_health(fake *f, const char *token, const char *instance, bool accepting,
                        unsigned room)
{
        snprintf(f->body, sizeof(f->body),
                 "{\"status\":\"ok\",\"cluster\":{\"token\":\"%s\",\"instance\":\"%s\","
                 "\"accepting\":%s,\"room\":%u,\"in_use\":0,\"peers\":0}}",
                 token, instance, accepting ? "true" : "false", room);
}

static void fake_stop(fake *f)
{
        sh_loop_del_io(loop, f->io);
        close(f->lfd);
}

/* ---- running the loop until something holds ------------------------------------------------ */

typedef struct until {
        bool (*cond)(void *data);
        void *data;
        uint64_t deadline;
        bool held;
} until;

static void until_tick(sh_loop *l, sh_timer *t, void *data)
{
        until *u = data;

        (void)t;
        if (u->cond(u->data))
                u->held = true;
        if (u->held || ut_now_ms() >= u->deadline)
                sh_loop_stop(l);
        else
                ck_assert_ptr_nonnull(sh_loop_add_timer(l, 5, until_tick, u));
}

static bool never(void *data)
{
        (void)data;
        return false;
}

/* Run the loop for ms (a few probe periods: for what must not happen). */
static void loop_for(unsigned ms)
{
        until u = {.cond = never, .deadline = ut_now_ms() + ms};

        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 0, until_tick, &u));
        ck_assert_int_eq(sh_loop_run(loop), 0);
}

static bool loop_until(bool (*cond)(void *data), void *data)
{
        until u = {.cond = cond, .data = data, .deadline = ut_now_ms() + WAIT_MS};

        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 0, until_tick, &u));
        ck_assert_int_eq(sh_loop_run(loop), 0);
        return u.held;
}

/* ---- the cluster under test ----------------------------------------------------------------- */

static sh_config cfg;
static char peers[512];

static void setup(void)
{
        sh_log_set_level(SH_LOG_ERROR);
        ck_assert_int_eq(sh_loop_new(&loop), 0);
        memset(&cfg, 0, sizeof(cfg));
        cfg.peers = peers;
        cfg.peers_interval_ms = 50;
        cfg.peer_timeout_ms = 2000;
}

static void teardown(void)
{
        sh_loop_free(loop);
        loop = NULL;
}

static void room_fn(void *data, sh_cluster_room *ret)
{
        (void)data;
        ret->accepting = true;
        ret->room = 5;
        ret->in_use = 1;
}

static sh_cluster *cluster_of(fake *f, size_t n)
{
        size_t off = (size_t)snprintf(peers, sizeof(peers), "static:");
        sh_cluster *c = NULL;
        sh_error *err = NULL;

        for (size_t i = 0; i < n; i++)
                off += (size_t)snprintf(peers + off, sizeof(peers) - off, "%shttp://127.0.0.1:%u",
                                        i ? "," : "", f[i].port);
        ck_assert_int_eq(sh_cluster_new(&cfg, loop, TOKEN_SELF, 8080, room_fn, NULL, &c, &err), 0);
        ck_assert(sh_cluster_enabled(c));
        return c;
}

static unsigned peers_count(sh_cluster *c)
{
        cJSON *h = sh_cluster_health_json(c);
        unsigned n;

        ck_assert_ptr_nonnull(h);
        n = (unsigned)cJSON_GetObjectItemCaseSensitive(h, "peers")->valuedouble;
        cJSON_Delete(h);
        return n;
}

typedef struct want_peers {
        sh_cluster *c;
        unsigned n;
        fake *f; /* with n: and f was asked again since */
        unsigned hits;
} want_peers;

static bool has_peers(void *data)
{
        want_peers *w = data;

        return peers_count(w->c) == w->n && (!w->f || w->f->hits > w->hits);
}

static const char *instance_of(sh_cluster *c, char out[64])
{
        cJSON *h = sh_cluster_health_json(c);

        snprintf(out, 64, "%s", cJSON_GetObjectItemCaseSensitive(h, "instance")->valuestring);
        cJSON_Delete(h);
        return out;
}

/* n fake peers, the i-th answering as tokens[i] (accepting, room 9), and the cluster of them
 * (not probed before the loop runs: a test may change their answers first). */
static sh_cluster *start_peers(fake *f, size_t n, const char *const *tokens)
{
        for (size_t i = 0; i < n; i++) {
                char inst[32];

                fake_start(&f[i]);
                snprintf(inst, sizeof(inst), "i%zu", i);
                fake_health(&f[i], tokens[i], inst, true, 9);
        }
        return cluster_of(f, n);
}

static void stop_peers(sh_cluster *c, fake *f, size_t n)
{
        sh_cluster_free(c);
        for (size_t i = 0; i < n; i++)
                fake_stop(&f[i]);
}

static void wait_peers(sh_cluster *c, unsigned n)
{
        ck_assert(loop_until(has_peers, &(want_peers){.c = c, .n = n}));
}

START_TEST(test_a_static_peer_is_probed_hop_marked_and_owns_its_ids)
{
        fake f[1] = {0};
        sh_cluster *c;
        const sh_peer *p;
        char url[64];

        c = start_peers(f, 1, (const char *[]){"0123abcd"});
        wait_peers(c, 1);
        ck_assert_str_eq(f[0].last_path, "/healthz");
        ck_assert_str_eq(f[0].last_hop, TOKEN_SELF);
        p = sh_cluster_owner(c, "0123abcd0123456789abcdef0123456789abcdef", 40);
        ck_assert_ptr_nonnull(p);
        snprintf(url, sizeof(url), "http://127.0.0.1:%u", f[0].port);
        ck_assert_str_eq(sh_peer_url(p), url);
        ck_assert_str_eq(sh_peer_token(p), "0123abcd");
        /* a snapshot id's token follows its prefix */
        ck_assert_ptr_eq(sh_cluster_owner(c, "snap-0123abcd0123456789abcdef0123456789abcdef", 45),
                         p);
        stop_peers(c, f, 1);
}
END_TEST

START_TEST(test_no_peer_owns_an_id_of_this_pod_or_of_an_unknown_token)
{
        fake f[1] = {0};
        sh_cluster *c;

        c = start_peers(f, 1, (const char *[]){"0123abcd"});
        wait_peers(c, 1);
        ck_assert_ptr_null(sh_cluster_owner(c, TOKEN_SELF "0123456789abcdef0123456789abcdef", 40));
        ck_assert_ptr_null(sh_cluster_owner(c, "bbbbbbbb0123456789abcdef0123456789abcdef", 40));
        ck_assert_ptr_null(sh_cluster_owner(c, "0123abc", 7));
        ck_assert_ptr_null(sh_cluster_owner(c, "0123ABCD0123456789abcdef0123456789abcdef", 40));
        stop_peers(c, f, 1);
}
END_TEST

START_TEST(test_the_answer_with_our_instance_is_this_pod)
{
        fake f[1] = {0};
        sh_cluster *c;
        char inst[64];

        c = start_peers(f, 1, (const char *[]){TOKEN_SELF});
        fake_health(&f[0], TOKEN_SELF, instance_of(c, inst), true, 5);
        /* probed once (then never again: it is this pod), and no peer */
        ck_assert(loop_until(has_peers, &(want_peers){.c = c, .n = 0, .f = &f[0], .hits = 0}));
        loop_for(300);
        ck_assert_uint_eq(f[0].hits, 1);
        ck_assert_uint_eq(peers_count(c), 0);
        stop_peers(c, f, 1);
}
END_TEST

START_TEST(test_a_peer_whose_probe_fails_is_dropped_at_once)
{
        fake f[1] = {0};
        sh_cluster *c;

        c = start_peers(f, 1, (const char *[]){"0123abcd"});
        wait_peers(c, 1);
        f[0].mute = true;
        wait_peers(c, 0);
        ck_assert_ptr_null(sh_cluster_owner(c, "0123abcd0123456789abcdef0123456789abcdef", 40));
        /* back: used again from its first answer */
        f[0].mute = false;
        wait_peers(c, 1);
        stop_peers(c, f, 1);
}
END_TEST

START_TEST(test_a_peer_without_a_cluster_object_is_no_peer)
{
        fake f[1] = {0};
        sh_cluster *c;

        c = start_peers(f, 1, (const char *[]){"0123abcd"});
        snprintf(f[0].body, sizeof(f[0].body), "{\"status\":\"ok\"}");
        ck_assert(loop_until(has_peers, &(want_peers){.c = c, .n = 0, .f = &f[0], .hits = 1}));
        stop_peers(c, f, 1);
}
END_TEST

START_TEST(test_two_peers_of_one_token_are_used_for_neither)
{
        fake f[3] = {0};
        sh_cluster *c;

        c = start_peers(f, 3, (const char *[]){"0123abcd", "0123abcd", "99999999"});
        ck_assert(loop_until(has_peers, &(want_peers){.c = c, .n = 1, .f = &f[1], .hits = 1}));
        ck_assert_ptr_null(sh_cluster_owner(c, "0123abcd0123456789abcdef0123456789abcdef", 40));
        ck_assert_ptr_nonnull(sh_cluster_owner(c, "999999990123456789abcdef0123456789abcdef", 40));
        stop_peers(c, f, 3);
}
END_TEST

START_TEST(test_the_roomiest_accepting_peer_and_creates_handed_count_against_its_room)
{
        fake f[3] = {0};
        sh_cluster *c;
        const sh_peer *p;

        c = start_peers(f, 3, (const char *[]){"11111111", "22222222", "33333333"});
        fake_health(&f[0], "11111111", "i0", true, 3);
        fake_health(&f[1], "22222222", "i1", true, 7);
        fake_health(&f[2], "33333333", "i2", false, 50);
        wait_peers(c, 3);
        p = sh_cluster_roomiest(c);
        ck_assert_ptr_nonnull(p);
        ck_assert_str_eq(sh_peer_token(p), "22222222");
        /* 7 - 4 = 3 left: still the roomiest (ties keep the first found) or the 3 of 11111111 */
        for (int i = 0; i < 4; i++)
                sh_peer_took_create(c, p);
        p = sh_cluster_roomiest(c);
        ck_assert(STREQ(sh_peer_token(p), "22222222") || STREQ(sh_peer_token(p), "11111111"));
        /* every peer's room spent: none, never the one that is not accepting */
        for (int i = 0; i < 10; i++)
                sh_peer_took_create(c, sh_cluster_roomiest(c));
        ck_assert_ptr_null(sh_cluster_roomiest(c));
        stop_peers(c, f, 3);
}
END_TEST

typedef struct asked {
        bool done;
        size_t n;
        char tokens[4][16];
        char bodies[4][1024];
        bool failed[4];
} asked;

static void ask_done(const sh_cluster_answer *a, size_t n, void *data)
{
        asked *s = data;

        s->done = true;
        s->n = n;
        for (size_t i = 0; i < n && i < 4; i++) {
                snprintf(s->tokens[i], sizeof(s->tokens[i]), "%s", a[i].token);
                s->failed[i] = a[i].body == NULL;
                ck_assert(a[i].body || a[i].why);
                if (a[i].body)
                        snprintf(s->bodies[i], sizeof(s->bodies[i]), "%s", a[i].body);
        }
}

static bool ask_ended(void *data)
{
        return ((asked *)data)->done;
}

START_TEST(test_asking_every_peer_gives_one_callback_with_every_answer)
{
        fake f[2] = {0};
        const char *hdrs[] = {"OPEN-SANDBOX-API-KEY: k", NULL};
        sh_cluster *c;
        sh_error *err = NULL;
        asked s = {0};

        c = start_peers(f, 2, (const char *[]){"11111111", "22222222"});
        wait_peers(c, 2);
        cfg.peers_interval_ms = 600000; /* no probe from now on: the next answers are the ask's */
        f[1].status = 500;
        ck_assert_ptr_nonnull(
                sh_cluster_ask_all(c, "/v1/sandboxes?x=1", hdrs, 4096, ask_done, &s, &err));
        ck_assert(!s.done);
        ck_assert(loop_until(ask_ended, &s));
        ck_assert_uint_eq(s.n, 2);
        for (size_t i = 0; i < 2; i++) {
                bool first = strcmp(s.tokens[i], "11111111") == 0;

                ck_assert(first || strcmp(s.tokens[i], "22222222") == 0);
                ck_assert(s.failed[i] == !first);
                if (first)
                        ck_assert_ptr_nonnull(strstr(s.bodies[i], "11111111"));
        }
        ck_assert_str_eq(f[0].last_hop, TOKEN_SELF);
        stop_peers(c, f, 2);
}
END_TEST

START_TEST(test_asking_no_peer_calls_back_from_the_loop_with_none)
{
        sh_cluster *c = NULL;
        sh_error *err = NULL;
        asked s = {0};

        cfg.peers = NULL;
        ck_assert_int_eq(sh_cluster_new(&cfg, loop, TOKEN_SELF, 8080, NULL, NULL, &c, &err), 0);
        ck_assert(!sh_cluster_enabled(c));
        ck_assert_ptr_nonnull(
                sh_cluster_ask_all(c, "/v1/sandboxes", NULL, 4096, ask_done, &s, &err));
        ck_assert(!s.done);
        ck_assert(loop_until(ask_ended, &s));
        ck_assert_uint_eq(s.n, 0);
        sh_cluster_free(c);
}
END_TEST

START_TEST(test_a_cancelled_ask_never_calls_back)
{
        sh_cluster *c = NULL;
        sh_error *err = NULL;
        asked s = {0};
        sh_cluster_ask *a;

        cfg.peers = NULL;
        ck_assert_int_eq(sh_cluster_new(&cfg, loop, TOKEN_SELF, 8080, NULL, NULL, &c, &err), 0);
        a = sh_cluster_ask_all(c, "/v1/sandboxes", NULL, 4096, ask_done, &s, &err);
        ck_assert_ptr_nonnull(a);
        sh_cluster_ask_cancel(a);
        loop_for(100);
        ck_assert(!s.done);
        sh_cluster_free(c);
}
END_TEST

START_TEST(test_a_malformed_setting_is_an_error_naming_it)
{
        sh_cluster *c = NULL;
        sh_error *err = NULL;

        snprintf(peers, sizeof(peers), "static:ftp://x");
        ck_assert_int_eq(sh_cluster_new(&cfg, loop, TOKEN_SELF, 8080, NULL, NULL, &c, &err), -1);
        ck_assert_ptr_null(c);
        ck_assert_int_eq(sh_error_kind_of(err), SH_E_SETTING);
        ck_assert_ptr_nonnull(strstr(err->msg, "SANDBOX_HOST_PEERS"));
        sh_error_release(&err);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("cluster_peers");
        TCase *tc = tcase_create("static");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_a_static_peer_is_probed_hop_marked_and_owns_its_ids);
        tcase_add_test(tc, test_no_peer_owns_an_id_of_this_pod_or_of_an_unknown_token);
        tcase_add_test(tc, test_the_answer_with_our_instance_is_this_pod);
        tcase_add_test(tc, test_a_peer_whose_probe_fails_is_dropped_at_once);
        tcase_add_test(tc, test_a_peer_without_a_cluster_object_is_no_peer);
        tcase_add_test(tc, test_two_peers_of_one_token_are_used_for_neither);
        tcase_add_test(tc,
                       test_the_roomiest_accepting_peer_and_creates_handed_count_against_its_room);
        tcase_add_test(tc, test_asking_every_peer_gives_one_callback_with_every_answer);
        tcase_add_test(tc, test_asking_no_peer_calls_back_from_the_loop_with_none);
        tcase_add_test(tc, test_a_cancelled_ask_never_calls_back);
        tcase_add_test(tc, test_a_malformed_setting_is_an_error_naming_it);
        suite_add_tcase(s, tc);
        return ut_run(s);
}
