/* test_wire_relay.c: a request relayed to another pod and its answer relayed back
 * (sh/relay.h), over real HTTP with no daemon: two servers on one loop, a front one whose
 * surface relays every request (its admit) to a back one (or to a raw peer of the test that
 * accepts and never answers, or dies in the middle of its answer). Each test proves one
 * behaviour: status, headers and body kept; the hop mark; a large upload intact with the relay
 * holding one piece of it at a time; a stream relayed as it comes whose producer is stopped by
 * a client that does not read, and let go when that client leaves; a Range answer's 206 with
 * its Content-Range and Content-Length; HEAD; a peer that refuses, is silent, or dies; the
 * bound on relays in flight. */
#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sh/config.h"
#include "sh/http.h"
#include "sh/log.h"
#include "sh/range.h"
#include "sh/relay.h"
#include "wire_helpers.h"

#define CALL_TIMEOUT_MS 10000
#define PEER_TIMEOUT_MS 300
#define TOKEN           "abcd1234"

static struct {
        sh_config cfg;
        sh_loop *loop;
        sh_server *front, *back;
        sh_relayer *rl;
        char front_url[128], back_url[128];
        char target[128]; /* where the front relays (set before each call) */
} T;

static atomic_int failed_calls, producer_held, producer_gone, sink_ended, file_fd = -1;
static atomic_ulong sink_sum, sink_len;

/* ---- the back: the peer's own surface ------------------------------------------------------- */

static sh_response *plain_error(sh_request *r, const sh_error *err, unsigned *ret_status)
{
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "error", sh_error_kind_name(sh_error_kind_of(err)));
        *ret_status = sh_error_kind_of(err) == SH_E_UNAVAILABLE ? 503
                      : sh_error_kind_of(err) == SH_E_NO_ROUTE  ? 404
                      : sh_error_kind_of(err) == SH_E_TOO_LARGE ? 413
                                                                : 500;
        return sh_response_json(o);
}

static void add_header_field(cJSON *o, sh_request *r, const char *name)
{
        const char *v = sh_request_header(r, name);

        if (v)
                cJSON_AddStringToObject(o, name, v);
}

/* GET /echo: what came, as JSON (these fields of the request), 201 with headers of its own */
static const char *const echoed[] = {SH_HOP_HEADER, "X-Custom", "X-Request-ID", "Accept",
                                     "Keep-Alive",  "Host",     "Expect"};

static void h_echo(sh_request *r)
{
        cJSON *o = cJSON_CreateObject();
        sh_response *resp;

        cJSON_AddStringToObject(o, "method", sh_request_method(r));
        cJSON_AddStringToObject(o, "target", sh_request_target(r));
        cJSON_AddBoolToObject(o, "hop_marked", sh_request_hop_marked(r));
        for (size_t i = 0; i < ARRAY_SIZE(echoed); i++)
                add_header_field(o, r, echoed[i]);
        resp = sh_response_json(o);
        sh_response_header(resp, "X-Back", "yes");
        sh_response_header(resp, "X-Request-ID", "the-back's-own");
        sh_reply(r, 201, resp);
}

/* POST /sink: a body read slowly (a pause per piece, resumed 1 ms later), counted and summed */
typedef struct slow_sink {
        sh_request *r;
        uint64_t len, sum;
        sh_timer *t;
} slow_sink;

static void slow_resume(sh_loop *l, sh_timer *t, void *data)
{
        slow_sink *s = data;

        s->t = NULL;
        sh_request_body_resume(s->r);
}

static int slow_begin(sh_request *r, void **state)
{
        slow_sink *s = calloc(1, sizeof(*s));

        s->r = r;
        *state = s;
        return 0;
}

static int slow_data(sh_request *r, void *state, const char *p, size_t n)
{
        slow_sink *s = state;

        for (size_t i = 0; i < n; i++)
                s->sum = s->sum * 31 + (unsigned char)p[i];
        s->len += n;
        s->t = sh_loop_add_timer(T.loop, 1, slow_resume, s);
        return SH_SINK_PAUSE;
}

static void slow_abort(sh_request *r, void *state)
{
        slow_sink *s = state;

        sh_loop_cancel_timer(T.loop, s->t);
        free(s);
        sink_ended = 1;
}

static const sh_body_sink slow = {.begin = slow_begin, .data = slow_data, .abort = slow_abort};

static void h_sink(sh_request *r)
{
        slow_sink *s = sh_request_sink_state(r);
        cJSON *o = cJSON_CreateObject();

        sink_len = s->len;
        sink_sum = s->sum;
        cJSON_AddNumberToObject(o, "len", (double)s->len);
        sh_reply_json(r, 200, o);
}

/* GET /stream: a producer that pushes 16 KiB a millisecond while it is let, never ending */
typedef struct producer {
        sh_queued_stream *qs;
        sh_timer *t;
        bool held, gone;
} producer;

static void produce(sh_loop *l, sh_timer *t, void *data)
{
        producer *p = data;
        static char block[16384];

        p->t = NULL;
        if (p->gone)
                return;
        if (!p->held) {
                memset(block, 'e', sizeof(block));
                sh_queued_stream_push(p->qs, block, sizeof(block));
        }
        p->t = sh_loop_add_timer(T.loop, 1, produce, p);
}

static void producer_bp(void *data, bool stop)
{
        producer *p = data;

        p->held = stop;
        if (stop)
                producer_held = 1;
}

static void producer_gone_fn(void *data)
{
        producer *p = data;

        p->gone = true;
        producer_gone = 1;
        sh_loop_cancel_timer(T.loop, p->t);
        p->t = NULL;
        sh_queued_stream_release(TAKE_PTR(p->qs));
}

static const sh_queued_stream_ops producer_ops = {
        .backpressure = producer_bp, .gone = producer_gone_fn, .release = free};

static void h_stream(sh_request *r)
{
        const sh_queued_stream_opts o = {.high = 65536, .low = 16384, .block = 16384};
        producer *p = calloc(1, sizeof(*p));
        const sh_header h[] = {{"Content-Type", "text/event-stream"}, {NULL, NULL}};

        p->qs = sh_queued_stream_new(r, T.loop, &producer_ops, &o, p);
        ck_assert_ptr_nonnull(p->qs);
        sh_queued_stream_push(p->qs, "data: first\n\n", 13);
        sh_queued_stream_reply(p->qs, h);
        p->t = sh_loop_add_timer(T.loop, 1, produce, p);
}

/* GET /file: a file of 100000 bytes, as the Range asks */
static void h_file(sh_request *r)
{
        char cr[SH_RANGE_HEADER_MAX];
        int fd = dup(file_fd);

        if (sh_reply_file(r, fd, 100000, "application/octet-stream", "f.bin", cr) < 0)
                sh_reply_empty(r, 416);
}

/* POST /early: its body is over the buffer's bound, answered 413 before it is read */
static void h_never_back(sh_request *r)
{
        sh_reply_empty(r, 599);
}

/* DELETE /gone: 204 */
static void h_gone(sh_request *r)
{
        sh_reply_empty_sized(r, 204);
}

/* GET /late: the answer after 2 * PEER_TIMEOUT_MS (within the timeout's reach only as a body) */
static void late_fire(sh_loop *l, sh_timer *t, void *data)
{
        sh_pending *p = data;

        if (sh_pending_request(p))
                sh_reply_empty(sh_pending_request(p), 200);
        sh_pending_release(p);
}

static void h_late(sh_request *r)
{
        static const sh_pending_ops late_ops = {0};
        sh_pending *p = sh_request_wait(r, &late_ops, NULL);

        sh_loop_add_timer(T.loop, 2 * PEER_TIMEOUT_MS, late_fire, p);
}

static const sh_route back_routes[] = {
        {"/gone", SH_M_DELETE, NULL, h_gone, 0},
        {"/early", SH_M_POST, &sh_body_buffer, h_never_back, 0},
        {"/late", SH_M_GET, NULL, h_late, 0},
        {"/echo", SH_M_GET | SH_M_POST, NULL, h_echo, 0},
        {"/sink", SH_M_POST | SH_M_PUT, &slow, h_sink, 0},
        {"/stream", SH_M_GET, NULL, h_stream, 0},
        {"/file", SH_M_GET, NULL, h_file, 0},
};

/* ---- the front: every request relayed --------------------------------------------------------- */

static void relay_failed(sh_request *r, const char *why, void *data)
{
        cJSON *o = cJSON_CreateObject();

        failed_calls++;
        cJSON_AddStringToObject(o, "code", "SANDBOX_NOT_FOUND");
        cJSON_AddStringToObject(o, "why", why);
        sh_reply_json(r, 404, o);
}

static int front_admit(sh_request *r)
{
        return sh_relay_request(T.rl, r, T.target, relay_failed, NULL);
}

static void front_decorate(sh_request *r, sh_response *resp)
{
        const char *id = sh_request_header(r, "X-Request-ID");

        sh_response_header(resp, "X-Request-ID", id ? id : "fresh-id");
}

static void h_never(sh_request *r)
{
        sh_reply_empty(r, 599); /* a relayed request never reaches its route's handler */
}

static const sh_route front_routes[] = {
        {"/{*}", SH_M_GET | SH_M_HEAD | SH_M_POST | SH_M_PUT | SH_M_DELETE | SH_M_PATCH,
         &sh_body_buffer, h_never, 0},
};

/* ---- the servers in a thread ------------------------------------------------------------------ */

static void start_with(uint64_t relay_max)
{
        const sh_surface back = {.name = "back",
                                 .prefix = "/",
                                 .routes = back_routes,
                                 .n_routes = ARRAY_SIZE(back_routes),
                                 .error = plain_error};
        const sh_surface front = {.name = "front",
                                  .prefix = "/",
                                  .routes = front_routes,
                                  .n_routes = ARRAY_SIZE(front_routes),
                                  .error = plain_error,
                                  .admit = front_admit,
                                  .decorate = front_decorate};
        sh_error *err = NULL;
        char path[] = "/tmp/relay-file-XXXXXX";
        static char data[100000];
        int fd;

        wire_transport_config(&T.cfg);
        T.cfg.peer_timeout_ms = PEER_TIMEOUT_MS;
        T.cfg.peer_relay_max = relay_max;
        ck_assert_int_eq(sh_loop_new(&T.loop), 0);
        ck_assert_int_eq(sh_server_new(&T.cfg, T.loop, &T.back, &err), 0);
        ck_assert_int_eq(sh_server_add_surface(T.back, &back, &err), 0);
        ck_assert_int_eq(sh_server_new(&T.cfg, T.loop, &T.front, &err), 0);
        ck_assert_int_eq(sh_server_add_surface(T.front, &front, &err), 0);
        ck_assert_int_eq(sh_relayer_new(&T.cfg, T.loop, TOKEN, &T.rl, &err), 0);
        snprintf(T.front_url, sizeof(T.front_url), "%s", sh_server_url(T.front));
        snprintf(T.back_url, sizeof(T.back_url), "%s", sh_server_url(T.back));
        snprintf(T.target, sizeof(T.target), "%s", T.back_url);
        fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        unlink(path);
        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (char)('a' + i % 26);
        ck_assert_int_eq(write(fd, data, sizeof(data)), (int)sizeof(data));
        file_fd = fd;
        wire_loop_thread_start(T.loop);
}

static void start(void)
{
        start_with(256);
}

static void stop(void)
{
        wire_loop_thread_stop();
        sh_relayer_free(T.rl);
        sh_server_free(T.front);
        sh_server_free(T.back);
        sh_loop_free(T.loop);
        close(file_fd);
        sh_config_done(&T.cfg);
}

/* ---- a client --------------------------------------------------------------------------------- */

typedef struct resp {
        long status;
        int rc;
        char body[200000];
        size_t len;
        char headers[8192];
        size_t hlen;
        /* an upload made on the fly: `up_len` bytes, its sum as slow_data sums */
        uint64_t up_len, up_sent, up_sum;
} resp;

static size_t on_body(char *p, size_t size, size_t n, void *data)
{
        resp *r = data;

        return wire_keep(r->body, sizeof(r->body), &r->len, p, size * n);
}

static size_t on_header(char *p, size_t size, size_t n, void *data)
{
        resp *r = data;

        return wire_keep(r->headers, sizeof(r->headers), &r->hlen, p, size * n);
}

static size_t on_read(char *buf, size_t size, size_t n, void *data)
{
        resp *r = data;
        size_t k = size * n;

        if (k > r->up_len - r->up_sent)
                k = (size_t)(r->up_len - r->up_sent);
        for (size_t i = 0; i < k; i++) {
                buf[i] = (char)((r->up_sent + i) * 7 % 251);
                r->up_sum = r->up_sum * 31 + (unsigned char)buf[i];
        }
        r->up_sent += k;
        return k;
}

static void call(const char *method, const char *path, const char *const *hdrs, bool chunked,
                 resp *r)
{
        struct curl_slist *h = NULL;
        char url[512];
        CURL *c;

        snprintf(url, sizeof(url), "%s%s", T.front_url, path);
        c = wire_curl(url, method, on_body, on_header, r);
        if (r->up_len) {
                curl_easy_setopt(c, CURLOPT_POST, 1L);
                curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
                curl_easy_setopt(c, CURLOPT_READDATA, r);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                                 chunked ? (curl_off_t)-1 : (curl_off_t)r->up_len);
        }
        for (size_t i = 0; hdrs && hdrs[i]; i++)
                h = curl_slist_append(h, hdrs[i]);
        if (h)
                curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        r->rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
}

/* How many times header `name` is in the answer, its (last) value into val. */
static int header_count(const resp *r, const char *name, char *val, size_t size)
{
        const char *p = r->headers;
        size_t n = strlen(name);
        int count = 0;

        while ((p = strchr(p, '\n'))) {
                p++;
                if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
                        const char *v = p + n + 1 + strspn(p + n + 1, " ");
                        size_t k = strcspn(v, "\r\n");

                        if (val)
                                snprintf(val, size, "%.*s", (int)k, v);
                        count++;
                }
        }
        return count;
}

/* The answer has header `name` once, valued `want`. */
static void one_header(const resp *r, const char *name, const char *want)
{
        char val[256];

        ck_assert_int_eq(header_count(r, name, val, sizeof(val)), 1);
        ck_assert_str_eq(val, want);
}

static const char *json_str(cJSON *j, const char *name)
{
        cJSON *f = cJSON_GetObjectItemCaseSensitive(j, name);

        return cJSON_IsString(f) ? f->valuestring : NULL;
}

static bool wait_for(atomic_int *flag, unsigned ms)
{
        for (unsigned i = 0; i < ms / 5 && !*flag; i++)
                usleep(5000);
        return *flag != 0;
}

/* ---- a raw peer: accepts, reads the request head, then `mode` -------------------------------- */

enum { RAW_SILENT, RAW_DIES, RAW_DIES_CHUNKED };
static struct {
        int lfd;
        int mode;
        pthread_t thread;
        atomic_int done;
} RAW;

static void *raw_thread(void *arg)
{
        char buf[8192];
        size_t got = 0;
        int c = accept(RAW.lfd, NULL, NULL);
        struct timeval tv = {.tv_sec = 5};

        if (c < 0)
                return NULL;
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        while (got < sizeof(buf) - 1 && !memmem(buf, got, "\r\n\r\n", 4)) {
                ssize_t n = recv(c, buf + got, sizeof(buf) - 1 - got, 0);

                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        if (RAW.mode == RAW_DIES_CHUNKED) {
                const char *head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   "5\r\nhello\r\n";

                (void)!send(c, head, strlen(head), MSG_NOSIGNAL);
        } else if (RAW.mode == RAW_DIES) {
                const char *head = "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n";
                static char part[5000];

                memset(part, 'd', sizeof(part));
                (void)!send(c, head, strlen(head), MSG_NOSIGNAL);
                (void)!send(c, part, sizeof(part), MSG_NOSIGNAL);
        } else {
                while (!RAW.done)
                        usleep(10000);
        }
        close(c);
        return NULL;
}

static void raw_start(int mode)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t sl = sizeof(a);

        RAW.mode = mode;
        RAW.done = 0;
        RAW.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(RAW.lfd, 0);
        ck_assert_int_eq(bind(RAW.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(RAW.lfd, 8), 0);
        ck_assert_int_eq(getsockname(RAW.lfd, (struct sockaddr *)&a, &sl), 0);
        snprintf(T.target, sizeof(T.target), "http://127.0.0.1:%u", ntohs(a.sin_port));
        ck_assert_int_eq(pthread_create(&RAW.thread, NULL, raw_thread, NULL), 0);
}

static void raw_stop(void)
{
        RAW.done = 1;
        shutdown(RAW.lfd, SHUT_RDWR);
        pthread_join(RAW.thread, NULL);
        close(RAW.lfd);
}

/* ---- the tests -------------------------------------------------------------------------------- */

START_TEST(test_status_headers_and_body_are_kept)
{
        static resp r;
        const char *h[] = {"X-Custom: kept", "X-Request-ID: req-1", "Keep-Alive: timeout=5", NULL};
        cJSON *j;

        start();
        call("GET", "/echo?a=%2F&b=1", h, false, &r);
        ck_assert_int_eq(r.status, 201);
        one_header(&r, "X-Back", "yes");
        /* the client's own request id, once: not the back's */
        one_header(&r, "X-Request-ID", "req-1");
        one_header(&r, "Content-Type", "application/json");
        ck_assert_int_le(header_count(&r, "Date", NULL, 0), 1);
        j = cJSON_Parse(r.body);
        ck_assert_ptr_nonnull(j);
        ck_assert_str_eq(json_str(j, "method"), "GET");
        ck_assert_str_eq(json_str(j, "target"), "/echo?a=%2F&b=1");
        ck_assert_str_eq(json_str(j, "X-Custom"), "kept");
        ck_assert_str_eq(json_str(j, "X-Request-ID"), "req-1");
        ck_assert_ptr_null(json_str(j, "Keep-Alive"));  /* hop-by-hop: not relayed */
        ck_assert_str_eq(json_str(j, "Accept"), "*/*"); /* the client's own */
        cJSON_Delete(j);
        stop();
}
END_TEST

START_TEST(test_the_hop_mark_goes_upstream_and_is_recognised)
{
        static resp r;
        cJSON *j;

        start();
        call("GET", "/echo", NULL, false, &r);
        ck_assert_int_eq(r.status, 201);
        j = cJSON_Parse(r.body);
        ck_assert_ptr_nonnull(j);
        ck_assert_str_eq(json_str(j, SH_HOP_HEADER), TOKEN);
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "hop_marked")));
        cJSON_Delete(j);
        /* a client's own mark is not passed on as its: the relay's replaces it */
        memset(&r, 0, sizeof(r));
        call("GET", "/echo", (const char *[]){SH_HOP_HEADER ": forged", NULL}, false, &r);
        j = cJSON_Parse(r.body);
        ck_assert_ptr_nonnull(j);
        ck_assert_str_eq(json_str(j, SH_HOP_HEADER), TOKEN);
        cJSON_Delete(j);
        /* the back, asked directly without a mark: not marked */
        snprintf(T.front_url, sizeof(T.front_url), "%s", T.back_url);
        memset(&r, 0, sizeof(r));
        call("GET", "/echo", NULL, false, &r);
        j = cJSON_Parse(r.body);
        ck_assert_ptr_nonnull(j);
        ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "hop_marked")));
        cJSON_Delete(j);
        stop();
}
END_TEST

/* A client's large upload asks for a 100 Continue; the relay's own request never does. */
START_TEST(test_no_expect_goes_upstream)
{
        static resp r;
        cJSON *j;

        start();
        r.up_len = 2u << 20;
        call("POST", "/echo", (const char *[]){"Expect: 100-continue", NULL}, false, &r);
        ck_assert_int_eq(r.status, 201);
        j = cJSON_Parse(r.body);
        ck_assert_ptr_nonnull(j);
        ck_assert_ptr_null(json_str(j, "Expect"));
        cJSON_Delete(j);
        stop();
}
END_TEST

/* Relays one after the other to one peer reuse one connection. */
START_TEST(test_relays_in_a_row_reuse_one_connection_to_the_peer)
{
        static resp r;

        start();
        for (int i = 0; i < 3; i++) {
                memset(&r, 0, sizeof(r));
                call("GET", "/echo", NULL, false, &r);
                ck_assert_int_eq(r.status, 201);
        }
        ck_assert_uint_eq(sh_server_connections(T.back), 1);
        stop();
}
END_TEST

static void upload(const char *method, bool chunked)
{
        static resp r;

        start();
        r.up_len = 8u << 20;
        call(method, "/sink", NULL, chunked, &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_uint_eq(sink_len, r.up_len);
        ck_assert_uint_eq(sink_sum, r.up_sum);
        /* one piece of the transport at a time, never the body */
        ck_assert_uint_gt(sh_relayer_body_held_max(T.rl), 0);
        ck_assert_uint_le(sh_relayer_body_held_max(T.rl), 256u << 10);
        stop();
}

/* The peer answers before it read the body (413 on its Content-Length): the client has that
 * answer once its own body is in (the rest is dropped), not a failure. */
START_TEST(test_an_answer_before_the_body_is_given_after_it)
{
        static resp r;

        start();
        failed_calls = 0;
        r.up_len = 3u << 20;
        call("POST", "/early", NULL, false, &r);
        ck_assert_int_eq(r.rc, CURLE_OK);
        ck_assert_int_eq(r.status, 413);
        ck_assert_int_eq(failed_calls, 0);
        stop();
}
END_TEST

START_TEST(test_a_large_upload_arrives_intact_with_the_relay_holding_one_piece)
{
        upload("POST", false);
}
END_TEST

START_TEST(test_a_large_chunked_put_arrives_intact)
{
        upload("PUT", true);
}
END_TEST

/* Every relay ends (within 2 s) */
static void assert_none_in_flight(void)
{
        for (int i = 0; i < 400 && sh_relayer_in_flight(T.rl); i++)
                usleep(5000);
        ck_assert_uint_eq(sh_relayer_in_flight(T.rl), 0);
}

/* A raw connection to the front, with a small receive buffer (a client that stops reading is
 * soon felt) and 5 s timeouts. */
static int front_connect(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET};
        struct timeval tv = {.tv_sec = 5};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rcvbuf = 4096;

        ck_assert_int_ge(fd, 0);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        a.sin_port = htons(sh_server_port(T.front));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        return fd;
}

/* A client that reads the head and a little, then stops reading: the back's producer is told
 * to stop (the relay stopped reading the back); the client leaves: the back's request ends. */
START_TEST(test_a_stream_stalls_its_producer_and_ends_it_when_the_client_leaves)
{
        const char *req = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
        char buf[4096] = "";
        size_t got;
        ssize_t n;
        int fd;

        start();
        producer_held = producer_gone = 0;
        fd = front_connect();
        ck_assert_int_eq(send(fd, req, strlen(req), 0), (int)strlen(req));
        /* the first frame comes as it was pushed, the stream going on behind it */
        for (got = 0; got < sizeof(buf) - 1 && !strstr(buf, "data: first"); got += (size_t)n) {
                n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
                ck_assert_int_gt(n, 0);
                buf[got + (size_t)n] = '\0';
        }
        ck_assert_msg(strstr(buf, "200") && strstr(buf, "text/event-stream"), "%s", buf);
        ck_assert_msg(strstr(buf, "data: first"), "%s", buf);
        ck_assert_msg(wait_for(&producer_held, CALL_TIMEOUT_MS), "the producer never stopped");
        ck_assert(!producer_gone);
        close(fd);
        ck_assert_msg(wait_for(&producer_gone, CALL_TIMEOUT_MS), "the back's request never ended");
        assert_none_in_flight();
        stop();
}
END_TEST

/* A client that sends part of a large body and leaves: the relay's exchange is cancelled (the
 * back's request ends), nothing stays in flight. */
START_TEST(test_a_client_that_leaves_mid_upload_cancels_the_exchange)
{
        const char *req = "POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n";
        static char part[1 << 20];
        int fd;

        start();
        sink_ended = 0;
        fd = front_connect();
        ck_assert_int_eq(send(fd, req, strlen(req), 0), (int)strlen(req));
        memset(part, 'u', sizeof(part));
        ck_assert_int_eq(send(fd, part, sizeof(part), 0), (int)sizeof(part));
        close(fd);
        ck_assert_msg(wait_for(&sink_ended, CALL_TIMEOUT_MS), "the back's request never ended");
        assert_none_in_flight();
        stop();
}
END_TEST

START_TEST(test_a_range_answer_keeps_its_206_content_range_and_length)
{
        static resp r;

        start();
        call("GET", "/file", (const char *[]){"Range: bytes=10-19", NULL}, false, &r);
        ck_assert_int_eq(r.status, 206);
        one_header(&r, "Content-Range", "bytes 10-19/100000");
        one_header(&r, "Content-Length", "10");
        ck_assert_int_eq(header_count(&r, "Transfer-Encoding", NULL, 0), 0);
        ck_assert_str_eq(r.body, "klmnopqrst");
        memset(&r, 0, sizeof(r));
        call("GET", "/file", NULL, false, &r);
        ck_assert_int_eq(r.status, 200);
        one_header(&r, "Content-Length", "100000");
        ck_assert_uint_eq(r.len, 100000);
        stop();
}
END_TEST

START_TEST(test_head_is_answered_with_the_length_and_no_body)
{
        static resp r;

        start();
        call("HEAD", "/file", NULL, false, &r);
        ck_assert_int_eq(r.rc, CURLE_OK);
        ck_assert_int_eq(r.status, 200);
        one_header(&r, "Content-Length", "100000");
        ck_assert_uint_eq(r.len, 0);
        stop();
}
END_TEST

START_TEST(test_a_204_keeps_its_one_content_length_of_0)
{
        static resp r;

        start();
        call("DELETE", "/gone", NULL, false, &r);
        ck_assert_int_eq(r.status, 204);
        one_header(&r, "Content-Length", "0");
        ck_assert_int_eq(header_count(&r, "Transfer-Encoding", NULL, 0), 0);
        stop();
}
END_TEST

START_TEST(test_a_peer_slower_than_the_timeout_is_the_surfaces_to_answer)
{
        static resp r;

        start();
        failed_calls = 0;
        call("GET", "/late", NULL, false, &r);
        ck_assert_int_eq(r.status, 404);
        ck_assert_int_eq(failed_calls, 1);
        usleep(3 * PEER_TIMEOUT_MS * 1000); /* the back's late answer is given (to no one) */
        stop();
}
END_TEST

START_TEST(test_a_refused_connection_is_the_surfaces_to_answer)
{
        static resp r;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t sl = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        start();
        failed_calls = 0;
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &sl), 0);
        close(fd); /* nobody listens there */
        snprintf(T.target, sizeof(T.target), "http://127.0.0.1:%u", ntohs(a.sin_port));
        call("GET", "/echo", NULL, false, &r);
        ck_assert_int_eq(r.status, 404);
        ck_assert_msg(strstr(r.body, "SANDBOX_NOT_FOUND"), "%s", r.body);
        ck_assert_int_eq(failed_calls, 1);
        stop();
}
END_TEST

START_TEST(test_a_silent_peer_is_the_surfaces_to_answer_after_the_timeout)
{
        static resp r;

        start();
        failed_calls = 0;
        raw_start(RAW_SILENT);
        call("GET", "/echo", NULL, false, &r);
        ck_assert_int_eq(r.status, 404);
        ck_assert_int_eq(failed_calls, 1);
        raw_stop();
        stop();
}
END_TEST

static void peer_dies(int mode)
{
        static resp r;

        start();
        failed_calls = 0;
        raw_start(mode);
        call("GET", "/echo", NULL, false, &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_int_eq(r.rc, CURLE_PARTIAL_FILE); /* short, not a hang (not a timeout) */
        ck_assert_uint_lt(r.len, 1000000);
        ck_assert_int_eq(failed_calls, 0);
        raw_stop();
        stop();
}

START_TEST(test_a_peer_that_dies_in_its_answer_cuts_the_clients_body)
{
        peer_dies(RAW_DIES);
}
END_TEST

START_TEST(test_a_peer_that_dies_in_its_chunked_answer_cuts_the_clients_stream)
{
        peer_dies(RAW_DIES_CHUNKED);
}
END_TEST

/* One relay in flight (a stream a client reads) at a bound of one: the next is 503 at once. */
START_TEST(test_past_the_bound_a_relay_is_answered_503_at_once)
{
        const char *req = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
        static resp r;
        char buf[256];
        int fd;

        start_with(1);
        fd = front_connect();
        ck_assert_int_eq(send(fd, req, strlen(req), 0), (int)strlen(req));
        ck_assert_int_gt(recv(fd, buf, sizeof(buf), 0), 0); /* its head: it is in flight */
        ck_assert_uint_eq(sh_relayer_in_flight(T.rl), 1);
        call("GET", "/echo", NULL, false, &r);
        ck_assert_int_eq(r.status, 503);
        close(fd);
        assert_none_in_flight();
        memset(&r, 0, sizeof(r));
        call("GET", "/echo", NULL, false, &r);
        ck_assert_int_eq(r.status, 201); /* room again */
        stop();
}
END_TEST

static Suite *relay_suite(void)
{
        Suite *s = suite_create("relay");
        TCase *tc = tcase_create("relay");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_status_headers_and_body_are_kept);
        tcase_add_test(tc, test_the_hop_mark_goes_upstream_and_is_recognised);
        tcase_add_test(tc, test_no_expect_goes_upstream);
        tcase_add_test(tc, test_an_answer_before_the_body_is_given_after_it);
        tcase_add_test(tc, test_relays_in_a_row_reuse_one_connection_to_the_peer);
        tcase_add_test(tc, test_a_large_upload_arrives_intact_with_the_relay_holding_one_piece);
        tcase_add_test(tc, test_a_large_chunked_put_arrives_intact);
        tcase_add_test(tc, test_a_stream_stalls_its_producer_and_ends_it_when_the_client_leaves);
        tcase_add_test(tc, test_a_client_that_leaves_mid_upload_cancels_the_exchange);
        tcase_add_test(tc, test_a_range_answer_keeps_its_206_content_range_and_length);
        tcase_add_test(tc, test_head_is_answered_with_the_length_and_no_body);
        tcase_add_test(tc, test_a_204_keeps_its_one_content_length_of_0);
        tcase_add_test(tc, test_a_peer_slower_than_the_timeout_is_the_surfaces_to_answer);
        tcase_add_test(tc, test_a_refused_connection_is_the_surfaces_to_answer);
        tcase_add_test(tc, test_a_silent_peer_is_the_surfaces_to_answer_after_the_timeout);
        tcase_add_test(tc, test_a_peer_that_dies_in_its_answer_cuts_the_clients_body);
        tcase_add_test(tc, test_a_peer_that_dies_in_its_chunked_answer_cuts_the_clients_stream);
        tcase_add_test(tc, test_past_the_bound_a_relay_is_answered_503_at_once);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return wire_main(relay_suite());
}
