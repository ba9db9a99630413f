/* test_wire_surfaces.c: the transport's seams over real HTTP, with two test surfaces of its
 * own and no daemon: each surface shapes its own errors (the transport's own 404, 405 and 413
 * too) and adds its own headers, PATCH and a free path tail route, a request waits for its
 * answer through a pending token, a stream waits and is woken, and a streaming job learns
 * when its client has left; a job of the loop answering a request (sh_request_job) answers whole
 * within its head, streams past it, and stops when its client leaves; a body made by a job's steps
 * (sh_body_job) is answered whole within its head, streamed on past it, or counted and made again
 * as the stream, its failures answered before the answer and cut after it; an answer held until
 * its waiter is told (sh_request_hold) is given then, and never once its request ended; a file
 * answered as its Range asks (sh_reply_file). */
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "sh/config.h"
#include "sh/http.h"
#include "sh/log.h"
#include "sh/range.h"
#include "wire_helpers.h"

static atomic_int gone_calls; /* streaming jobs told that their request ended */

/* ---- the two surfaces ------------------------------------------------------------------- */

static unsigned status_of(sh_error_kind kind)
{
        switch (kind) {
        case SH_E_NO_ROUTE:
                return 404;
        case SH_E_METHOD_NOT_ALLOWED:
                return 405;
        case SH_E_TOO_LARGE:
                return 413;
        case SH_E_INVALID:
                return 400;
        default:
                return 500;
        }
}

/* "/": {"error": "<kind name>", "detail"} */
static sh_response *plain_error(sh_request *r, const sh_error *err, unsigned *ret_status)
{
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "error", sh_error_kind_name(sh_error_kind_of(err)));
        cJSON_AddStringToObject(o, "detail", err && err->msg ? err->msg : "");
        *ret_status = status_of(sh_error_kind_of(err));
        return sh_response_json(o);
}

/* "/v1/": {"code", "message"}, and a request id on every answer */
static sh_response *v1_error(sh_request *r, const sh_error *err, unsigned *ret_status)
{
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "code",
                                sh_error_kind_of(err) == SH_E_NO_ROUTE    ? "NOT_FOUND"
                                : sh_error_kind_of(err) == SH_E_TOO_LARGE ? "TOO_LARGE"
                                                                          : "OTHER");
        cJSON_AddStringToObject(o, "message", err && err->msg ? err->msg : "");
        *ret_status = status_of(sh_error_kind_of(err));
        return sh_response_json(o);
}

static void v1_decorate(sh_request *r, sh_response *resp)
{
        const char *id = sh_request_header(r, "X-Request-ID");

        sh_response_header(resp, "X-Request-ID", id ? id : "fresh-id");
}

static void h_hello(sh_request *r)
{
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "method", sh_request_method(r));
        sh_reply_json(r, 200, o);
}

/* The parameters, as {"p0": ..., "p1": ...}. */
static void h_params(sh_request *r)
{
        cJSON *o = cJSON_CreateObject();
        char name[8], val[256];
        size_t len;

        for (unsigned i = 0; sh_request_param(r, i, &len); i++) {
                snprintf(name, sizeof(name), "p%u", i);
                snprintf(val, sizeof(val), "%.*s", (int)len, sh_request_param(r, i, &len));
                cJSON_AddStringToObject(o, name, val);
        }
        sh_reply_json(r, 200, o);
}

static void h_body(sh_request *r)
{
        size_t len;
        char *body = sh_request_body(r, &len);
        cJSON *o = cJSON_CreateObject();

        cJSON_AddNumberToObject(o, "len", (double)len);
        cJSON_AddStringToObject(o, "body", body ? body : "");
        sh_reply_json(r, 200, o);
}

/* POST /later: answered 20 ms later from a loop timer, through the token. */
typedef struct later {
        sh_pending *tok;
        sh_loop *loop;
        sh_timer *t;
} later;

static void later_fire(sh_loop *l, sh_timer *t, void *data)
{
        later *j = data;
        sh_request *r = sh_pending_request(j->tok);
        cJSON *o = cJSON_CreateObject();

        j->t = NULL;
        cJSON_AddBoolToObject(o, "later", true);
        if (r)
                sh_reply_json(r, 200, o);
        else
                cJSON_Delete(o);
        sh_pending_release(TAKE_PTR(j->tok));
}

static void later_gone(void *data)
{
        later *j = data;

        sh_loop_cancel_timer(j->loop, TAKE_PTR(j->t));
        sh_pending_release(TAKE_PTR(j->tok));
}

static const sh_pending_ops later_ops = {.gone = later_gone, .release = free};

static sh_loop *the_loop;

static void h_later(sh_request *r)
{
        later *j = calloc(1, sizeof(*j));

        ck_assert_ptr_nonnull(j);
        j->loop = the_loop;
        j->tok = sh_request_wait(r, &later_ops, j);
        ck_assert_ptr_nonnull(j->tok);
        /* a second token for the same request is refused */
        ck_assert_ptr_null(sh_request_wait(r, &later_ops, j));
        j->t = sh_loop_add_timer(the_loop, 20, later_fire, j);
        ck_assert_ptr_nonnull(j->t);
}

/* GET /ticks?n=N: N pieces "tick\n", one every 10 ms (0: forever), woken by a timer. */
typedef struct ticks {
        sh_pending *tok; /* borrowed */
        sh_timer *t;
        unsigned n, sent;
        bool ready; /* a piece may go out */
} ticks;

static void tick_fire(sh_loop *l, sh_timer *t, void *data)
{
        ticks *k = data;

        k->t = NULL;
        k->ready = true;
        sh_pending_wake(k->tok);
}

static ssize_t ticks_read(void *data, char *out, size_t max)
{
        ticks *k = data;

        if (k->n && k->sent == k->n)
                return SH_STREAM_END;
        if (!k->ready) {
                if (!k->t)
                        k->t = sh_loop_add_timer(the_loop, 10, tick_fire, k);
                return k->t ? 0 : SH_STREAM_CUT; /* nothing yet: the connection waits */
        }
        k->ready = false;
        k->sent++;
        memcpy(out, "tick\n", 5);
        return 5;
}

static void ticks_gone(void *data)
{
        ticks *k = data;

        sh_loop_cancel_timer(the_loop, TAKE_PTR(k->t));
        atomic_fetch_add(&gone_calls, 1);
}

static void ticks_release(void *data)
{
        ticks *k = data;

        sh_loop_cancel_timer(the_loop, k->t);
        free(k);
}

static const sh_pending_ops ticks_ops = {
        .gone = ticks_gone,
        .release = ticks_release,
        .read = ticks_read,
};

static void h_ticks(sh_request *r)
{
        const sh_query_param *q = sh_query_find(sh_request_query(r), "n");
        ticks *k = calloc(1, sizeof(*k));
        sh_response *resp;

        ck_assert_ptr_nonnull(k);
        k->n = q ? (unsigned)atoi(q->val) : 0;
        k->tok = sh_request_wait(r, &ticks_ops, k);
        ck_assert_ptr_nonnull(k->tok);
        resp = sh_response_stream(k->tok, 4096);
        sh_pending_release(k->tok); /* the request's and the response's references remain */
        ck_assert_ptr_nonnull(resp);
        sh_response_header(resp, "Content-Type", "text/plain");
        sh_reply(r, 200, resp);
}

/* GET /count?n=N&head=H: a job of the loop (sh_request_job) writing "0\n1\n..." up to N (0:
 * forever), one number a step, 10 steps a slice; answered whole if it ends within H bytes, else
 * streamed from there. */
typedef struct counting {
        sh_request_job rj; /* first */
        unsigned n, next;
        size_t head;
        bool streaming;
} counting;

static void counting_gone(void *data)
{
        sh_request_job_gone(data);
        atomic_fetch_add(&gone_calls, 1);
}

static void counting_release(void *data)
{
        sh_request_job_free(data);
        free(data);
}

static ssize_t counting_read(void *data, char *out, size_t max)
{
        return sh_request_job_read(data, out, max);
}

static const sh_pending_ops counting_ops = {
        .gone = counting_gone, .release = counting_release, .read = counting_read};

static int counting_step(void *data)
{
        counting *c = data;
        sh_buf *b = &c->rj.ss.b;
        char num[16];
        int k = snprintf(num, sizeof(num), "%u\n", c->next++);

        if (c->n && c->next > c->n) {
                c->rj.ss.ended = true;
                return c->streaming ? SH_LOOP_JOB_DONE : sh_request_job_whole(&c->rj, "text/plain");
        }
        if (sh_buf_append(b, num, (size_t)k) < 0) {
                c->rj.cut = true;
                return SH_LOOP_JOB_DONE;
        }
        if (c->streaming)
                return b->len >= c->rj.want ? SH_LOOP_JOB_PAUSE : 1;
        if (b->len <= c->head)
                return 1;
        c->streaming = true;
        return sh_request_job_stream(&c->rj, 4096, "text/plain");
}

static void h_count(sh_request *r)
{
        const sh_query_param *n = sh_query_find(sh_request_query(r), "n");
        const sh_query_param *h = sh_query_find(sh_request_query(r), "head");
        counting *c = calloc(1, sizeof(*c));

        ck_assert_ptr_nonnull(c);
        c->n = n ? (unsigned)atoi(n->val) : 0;
        c->head = h ? (size_t)atoi(h->val) : 0;
        c->rj.job.steps = 10;
        ck_assert(sh_request_job_wait(&c->rj, r, the_loop, &counting_ops, counting_step, "count"));
        sh_request_job_run(&c->rj);
}

/* GET /body?n=N&head=H&again=A&fail=F: a body "0\n1\n...(N-1)\n" made by an sh_body_job, one
 * number a step, 10 steps a slice, kept within H bytes; A 1: it can be made again (counted
 * first past its head); F > 0: the step making number F fails. */
typedef struct made_body {
        sh_body_job bj; /* first */
        unsigned n, next, fail;
} made_body;

static atomic_int body_agains, body_cuts;

static int body_step(void *data, sh_buf *b)
{
        made_body *c = data;
        char num[16];
        int k = snprintf(num, sizeof(num), "%u\n", c->next);

        if (c->fail && c->next == c->fail)
                return -EIO;
        if (c->next++ == c->n)
                return 0;
        return sh_buf_append(b, num, (size_t)k) < 0 ? -ENOMEM : 1;
}

static int body_again(void *data, sh_buf *b)
{
        ((made_body *)data)->next = 0;
        atomic_fetch_add(&body_agains, 1);
        return 0;
}

static void body_failed(void *data, sh_request *r, bool sent, int k)
{
        if (sent)
                atomic_fetch_add(&body_cuts, 1);
        else
                sh_reply(r, 500, sh_response_buffer(strdup("failed"), 6));
}

static const sh_body_job_ops body_ops = {.step = body_step, .failed = body_failed};
static const sh_body_job_ops body_again_ops = {
        .step = body_step, .again = body_again, .failed = body_failed};

static void body_release(void *data)
{
        sh_body_job_free(data);
        free(data);
}

static const sh_pending_ops body_pending = {
        .gone = counting_gone, .release = body_release, .read = counting_read};

static unsigned query_uint(sh_request *r, const char *name)
{
        const sh_query_param *q = sh_query_find(sh_request_query(r), name);

        return q ? (unsigned)atoi(q->val) : 0;
}

static void h_body_job(sh_request *r)
{
        made_body *c = calloc(1, sizeof(*c));

        ck_assert_ptr_nonnull(c);
        c->n = query_uint(r, "n");
        c->fail = query_uint(r, "fail");
        c->bj.head = query_uint(r, "head");
        c->bj.block = 4096;
        c->bj.type = "text/plain";
        c->bj.rj.job.steps = 10;
        ck_assert(sh_body_job_start(&c->bj, r, the_loop, &body_pending,
                                    query_uint(r, "again") ? &body_again_ops : &body_ops, "body"));
}

/* GET /file: "0123456789" as /dir/ten.txt, as the Range asks; a 416 with the Content-Range it
 * gives. */
static void h_file(sh_request *r)
{
        int fd = memfd_create("ten", MFD_CLOEXEC);
        char cr[SH_RANGE_HEADER_MAX];
        sh_response *resp;

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "0123456789", 10), 10);
        if (sh_reply_file(r, fd, 10, "application/octet-stream", "/dir/ten.txt", cr) == 0)
                return;
        resp = sh_response_empty();
        sh_response_header(resp, "Content-Range", cr);
        sh_reply(r, 416, resp);
}

/* POST /held?ms=N: the answer {"held":true} held (sh_request_hold) on `held`, a list of waiters
 * as a service keeps them, which a loop timer wakes N ms later (0: never). */
static sh_waiter *held;

static void held_fire(sh_loop *l, sh_timer *t, void *data)
{
        sh_waiters_wake(&held);
}

static void h_held(sh_request *r)
{
        const sh_query_param *q = sh_query_find(sh_request_query(r), "ms");
        cJSON *o = cJSON_CreateObject();
        sh_waiter *w;

        cJSON_AddBoolToObject(o, "held", true);
        w = sh_request_hold(r, 200, sh_response_json(o));
        ck_assert_ptr_nonnull(w);
        sh_waiter_add(&held, w);
        if (q && atoi(q->val) > 0)
                ck_assert_ptr_nonnull(sh_loop_add_timer(the_loop, atoi(q->val), held_fire, NULL));
}

static const sh_route plain_routes[] = {
        {"/held", SH_M_POST, NULL, h_held, 0},   {"/body", SH_M_GET, NULL, h_body_job, 0},
        {"/file", SH_M_GET, NULL, h_file, 0},    {"/hello", SH_M_GET, NULL, h_hello, 0},
        {"/later", SH_M_POST, NULL, h_later, 0}, {"/ticks", SH_M_GET, NULL, h_ticks, 0},
        {"/count", SH_M_GET, NULL, h_count, 0},
};

static const sh_route v1_routes[] = {
        {"/v1/things/{}", SH_M_PATCH | SH_M_GET, NULL, h_params, 0},
        {"/v1/sandboxes/{}/proxy/44772/{*}", SH_M_GET | SH_M_POST, NULL, h_params, 0},
        {"/v1/body", SH_M_POST, &sh_body_buffer, h_body, 0},
};

/* ---- the server in a thread ------------------------------------------------------------- */

static struct {
        sh_config cfg;
        sh_server *srv;
        char url[128];
} S;

static void start(void)
{
        const sh_surface plain = {.name = "plain",
                                  .prefix = "/",
                                  .routes = plain_routes,
                                  .n_routes = ARRAY_SIZE(plain_routes),
                                  .error = plain_error};
        const sh_surface v1 = {.name = "v1",
                               .prefix = "/v1/",
                               .routes = v1_routes,
                               .n_routes = ARRAY_SIZE(v1_routes),
                               .error = v1_error,
                               .decorate = v1_decorate};
        sh_error *err = NULL;

        wire_transport_config(&S.cfg);
        ck_assert_int_eq(sh_loop_new(&the_loop), 0);
        ck_assert_int_eq(sh_server_new(&S.cfg, the_loop, &S.srv, &err), 0);
        ck_assert_int_eq(sh_server_add_surface(S.srv, &plain, &err), 0);
        ck_assert_int_eq(sh_server_add_surface(S.srv, &v1, &err), 0);
        snprintf(S.url, sizeof(S.url), "%s", sh_server_url(S.srv));
        wire_loop_thread_start(the_loop);
}

static void stop(void)
{
        wire_loop_thread_stop();
        sh_server_free(S.srv);
        sh_loop_free(the_loop);
        sh_config_done(&S.cfg);
}

/* ---- a small client --------------------------------------------------------------------- */

typedef struct resp {
        long status;
        char body[8192];
        size_t len;
        char headers[4096];
        size_t hlen;
        size_t stop_after; /* abort the transfer once this many body bytes came (0: never) */
} resp;

static size_t on_body(char *p, size_t size, size_t n, void *data)
{
        resp *r = data;
        size_t k = wire_keep(r->body, sizeof(r->body), &r->len, p, size * n);

        if (r->stop_after && r->len >= r->stop_after)
                return 0; /* the client leaves */
        return k;
}

static size_t on_header(char *p, size_t size, size_t n, void *data)
{
        resp *r = data;

        return wire_keep(r->headers, sizeof(r->headers), &r->hlen, p, size * n);
}

static void call(const char *method, const char *path, const char *body, const char *const *hdrs,
                 resp *r)
{
        struct curl_slist *h = NULL;
        char url[512];
        CURL *c;

        snprintf(url, sizeof(url), "%s%s", S.url, path);
        c = wire_curl(url, method, on_body, on_header, r);
        if (body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        }
        for (size_t i = 0; hdrs && hdrs[i]; i++)
                h = curl_slist_append(h, hdrs[i]);
        if (h)
                curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        (void)curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
}

/* The value of a response header, or NULL (static buffer). */
static const char *header(const resp *r, const char *name)
{
        static char val[256];
        const char *p = r->headers;
        size_t n = strlen(name);

        while ((p = strchr(p, '\n'))) {
                p++;
                if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
                        size_t k = strcspn(p + n + 1, "\r\n");

                        snprintf(val, sizeof(val), "%.*s", (int)k, p + n + 1);
                        return val[0] == ' ' ? val + 1 : val;
                }
        }
        return NULL;
}

static cJSON *json_of(const resp *r)
{
        cJSON *j = cJSON_Parse(r->body);

        ck_assert_msg(j != NULL, "not JSON: '%s'", r->body);
        return j;
}

static void assert_field(const resp *r, const char *name, const char *want)
{
        cJSON *j = json_of(r), *f = cJSON_GetObjectItemCaseSensitive(j, name);

        ck_assert_msg(cJSON_IsString(f), "no string '%s' in '%s'", name, r->body);
        ck_assert_str_eq(f->valuestring, want);
        cJSON_Delete(j);
}

/* ---- tests ------------------------------------------------------------------------------ */

START_TEST(test_each_surface_shapes_its_own_errors)
{
        resp a = {0}, b = {0}, c = {0};

        start();
        call("GET", "/nope", NULL, NULL, &a);
        ck_assert_int_eq(a.status, 404);
        assert_field(&a, "error", "no-route");
        call("GET", "/v1/nope", NULL, NULL, &b);
        ck_assert_int_eq(b.status, 404);
        assert_field(&b, "code", "NOT_FOUND");
        ck_assert_msg(strstr(b.body, "\"error\"") == NULL, "%s", b.body);
        call("DELETE", "/v1/things/x", NULL, NULL, &c);
        ck_assert_int_eq(c.status, 405);
        ck_assert_str_eq(header(&c, "Allow"), "GET, HEAD, PATCH");
        assert_field(&c, "code", "OTHER");
        stop();
}
END_TEST

START_TEST(test_a_surface_body_limit_is_answered_in_its_shape)
{
        static const char *const big[] = {"Content-Length: 2000000", "Expect:", NULL};
        resp a = {0};

        start();
        /* a declared body above the buffer sink's bound: 413 before the body is read */
        call("POST", "/v1/body", "x", big, &a);
        ck_assert_int_eq(a.status, 413);
        assert_field(&a, "code", "TOO_LARGE");
        stop();
}
END_TEST

START_TEST(test_decorate_adds_its_header_to_every_answer_of_its_surface)
{
        static const char *const id[] = {"X-Request-ID: abc-123", NULL};
        resp ok = {0}, err = {0}, other = {0};

        start();
        call("GET", "/v1/things/t1", NULL, id, &ok);
        ck_assert_int_eq(ok.status, 200);
        ck_assert_str_eq(header(&ok, "X-Request-ID"), "abc-123");
        call("GET", "/v1/missing", NULL, NULL, &err);
        ck_assert_int_eq(err.status, 404);
        ck_assert_str_eq(header(&err, "X-Request-ID"), "fresh-id");
        call("GET", "/hello", NULL, id, &other);
        ck_assert_int_eq(other.status, 200);
        ck_assert_ptr_null(header(&other, "X-Request-ID"));
        stop();
}
END_TEST

START_TEST(test_patch_and_a_free_tail_reach_their_handlers)
{
        resp a = {0}, b = {0}, c = {0}, d = {0};

        start();
        call("PATCH", "/v1/things/t-9", "{}", NULL, &a);
        ck_assert_int_eq(a.status, 200);
        assert_field(&a, "p0", "t-9");
        call("GET", "/v1/sandboxes/sb1/proxy/44772/files/a/b", NULL, NULL, &b);
        ck_assert_int_eq(b.status, 200);
        assert_field(&b, "p0", "sb1");
        assert_field(&b, "p1", "files/a/b");
        call("POST", "/v1/sandboxes/sb1/proxy/44772/", "", NULL, &c);
        ck_assert_int_eq(c.status, 200);
        assert_field(&c, "p1", "");
        /* the buffered body reaches the handler whole */
        call("POST", "/v1/body", "{\"k\":1}", NULL, &d);
        ck_assert_int_eq(d.status, 200);
        assert_field(&d, "body", "{\"k\":1}");
        stop();
}
END_TEST

START_TEST(test_a_waiting_request_is_answered_from_the_loop)
{
        resp a = {0};

        start();
        call("POST", "/later", "", NULL, &a);
        ck_assert_int_eq(a.status, 200);
        ck_assert_str_eq(a.body, "{\"later\":true}");
        stop();
}
END_TEST

START_TEST(test_a_stream_waits_and_is_woken_until_its_end)
{
        resp a = {0};

        start();
        call("GET", "/ticks?n=5", NULL, NULL, &a);
        ck_assert_int_eq(a.status, 200);
        ck_assert_str_eq(a.body, "tick\ntick\ntick\ntick\ntick\n");
        /* gone runs once, when the request has ended (here after its last byte) */
        stop();
        ck_assert_int_eq(atomic_load(&gone_calls), 1);
}
END_TEST

START_TEST(test_the_job_learns_when_its_client_leaves)
{
        resp a = {.stop_after = 10};
        int i;

        start();
        atomic_store(&gone_calls, 0);
        call("GET", "/ticks", NULL, NULL, &a); /* forever; the client leaves after 2 ticks */
        ck_assert_int_eq(a.status, 200);
        /* The next tick's write fails and the request ends: its job is told. Bounded wait. */
        for (i = 0; i < 500 && atomic_load(&gone_calls) == 0; i++)
                usleep(10000);
        ck_assert_int_eq(atomic_load(&gone_calls), 1);
        stop();
}
END_TEST

/* "0\n1\n...(n-1)\n" */
static void expect_count(const resp *a, unsigned n)
{
        char want[8192] = "";
        size_t len = 0;

        for (unsigned i = 0; i < n; i++)
                len += (size_t)snprintf(want + len, sizeof(want) - len, "%u\n", i);
        ck_assert_str_eq(a->body, want);
}

START_TEST(test_a_request_job_ends_within_its_head_and_is_answered_whole)
{
        resp a = {0};

        start();
        call("GET", "/count?n=100&head=4096", NULL, NULL, &a);
        ck_assert_int_eq(a.status, 200);
        expect_count(&a, 100);
        ck_assert_ptr_nonnull(header(&a, "Content-Length"));
        ck_assert_ptr_null(header(&a, "Transfer-Encoding"));
        stop();
}
END_TEST

START_TEST(test_a_request_job_past_its_head_goes_on_as_a_stream)
{
        resp a = {0};

        start();
        call("GET", "/count?n=1000&head=64", NULL, NULL, &a);
        ck_assert_int_eq(a.status, 200);
        expect_count(&a, 1000);
        ck_assert_ptr_null(header(&a, "Content-Length"));
        ck_assert_str_eq(header(&a, "Transfer-Encoding"), "chunked");
        stop();
}
END_TEST

START_TEST(test_a_request_job_stops_when_its_client_leaves)
{
        resp a = {.stop_after = 100};
        int i;

        start();
        atomic_store(&gone_calls, 0);
        call("GET", "/count?head=10", NULL, NULL, &a); /* forever; the client leaves */
        ck_assert_int_eq(a.status, 200);
        for (i = 0; i < 500 && atomic_load(&gone_calls) == 0; i++)
                usleep(10000);
        ck_assert_int_eq(atomic_load(&gone_calls), 1);
        stop();
}
END_TEST

START_TEST(test_a_body_within_its_head_is_answered_whole)
{
        resp a = {0};

        start();
        call("GET", "/body?n=100&head=4096&again=1", NULL, NULL, &a);
        ck_assert_int_eq(a.status, 200);
        expect_count(&a, 100);
        ck_assert_str_eq(header(&a, "Content-Length"), "290");
        ck_assert_str_eq(header(&a, "Content-Type"), "text/plain");
        stop();
}
END_TEST

START_TEST(test_a_body_past_its_head_is_streamed_on_from_where_it_is)
{
        resp a = {0};

        start();
        atomic_store(&body_agains, 0);
        call("GET", "/body?n=1000&head=64", NULL, NULL, &a);
        ck_assert_int_eq(a.status, 200);
        expect_count(&a, 1000);
        ck_assert_str_eq(header(&a, "Transfer-Encoding"), "chunked");
        ck_assert_int_eq(atomic_load(&body_agains), 0);
        stop();
}
END_TEST

START_TEST(test_a_body_made_again_is_counted_then_streamed_from_its_start)
{
        resp a = {0};

        start();
        atomic_store(&body_agains, 0);
        call("GET", "/body?n=1000&head=64&again=1", NULL, NULL, &a);
        ck_assert_int_eq(a.status, 200);
        expect_count(&a, 1000);
        ck_assert_str_eq(header(&a, "Transfer-Encoding"), "chunked");
        ck_assert_int_eq(atomic_load(&body_agains), 1);
        stop();
}
END_TEST

START_TEST(test_a_body_that_fails_while_counted_is_answered_by_its_owner)
{
        resp a = {0};

        start();
        call("GET", "/body?n=1000&head=64&again=1&fail=900", NULL, NULL, &a);
        ck_assert_int_eq(a.status, 500);
        ck_assert_str_eq(a.body, "failed");
        stop();
}
END_TEST

START_TEST(test_a_body_that_fails_in_its_stream_is_cut)
{
        resp a = {0};

        start();
        atomic_store(&body_cuts, 0);
        call("GET", "/body?n=1000&head=64&fail=900", NULL, NULL, &a);
        ck_assert_int_eq(a.status, 200);
        ck_assert_uint_lt(a.len, 1000 * 4);
        ck_assert_int_eq(atomic_load(&body_cuts), 1);
        stop();
}
END_TEST

START_TEST(test_a_file_is_answered_whole_or_as_its_range_asks)
{
        const char *const range[] = {"Range: bytes=2-5", NULL};
        const char *const past[] = {"Range: bytes=20-", NULL};
        resp a = {0}, b = {0}, c = {0};

        start();
        call("GET", "/file", NULL, NULL, &a);
        ck_assert_int_eq(a.status, 200);
        ck_assert_str_eq(a.body, "0123456789");
        ck_assert_str_eq(header(&a, "Accept-Ranges"), "bytes");
        ck_assert_str_eq(header(&a, "Content-Disposition"),
                         "attachment; filename=\"ten.txt\"; filename*=UTF-8''ten.txt");
        ck_assert_ptr_null(header(&a, "Content-Range"));
        call("GET", "/file", NULL, range, &b);
        ck_assert_int_eq(b.status, 206);
        ck_assert_str_eq(b.body, "2345");
        ck_assert_str_eq(header(&b, "Content-Range"), "bytes 2-5/10");
        call("GET", "/file", NULL, past, &c);
        ck_assert_int_eq(c.status, 416);
        ck_assert_str_eq(header(&c, "Content-Range"), "bytes */10");
        stop();
}
END_TEST

START_TEST(test_a_held_answer_is_given_once_its_waiter_is_told)
{
        resp a = {0};

        start();
        call("POST", "/held?ms=20", "", NULL, &a);
        ck_assert_int_eq(a.status, 200);
        ck_assert_str_eq(a.body, "{\"held\":true}");
        ck_assert_ptr_null(held);
        stop();
}
END_TEST

START_TEST(test_a_held_answer_stops_waiting_when_its_request_ends)
{
        resp a = {0};
        CURL *c = curl_easy_init();
        char url[512];

        start();
        ck_assert_ptr_nonnull(c);
        /* never told: the client gives up, then the server goes with the request still held */
        snprintf(url, sizeof(url), "%s/held", S.url);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 200L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
        ck_assert_int_eq(curl_easy_perform(c), CURLE_OPERATION_TIMEDOUT);
        curl_easy_cleanup(c);
        stop();
        /* the request's end took its waiter off the list: nothing is told, nothing leaks */
        ck_assert_ptr_null(held);
}
END_TEST

static Suite *surfaces_suite(void)
{
        Suite *s = suite_create("surfaces");
        TCase *tc = tcase_create("surfaces");

        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_each_surface_shapes_its_own_errors);
        tcase_add_test(tc, test_a_surface_body_limit_is_answered_in_its_shape);
        tcase_add_test(tc, test_decorate_adds_its_header_to_every_answer_of_its_surface);
        tcase_add_test(tc, test_patch_and_a_free_tail_reach_their_handlers);
        tcase_add_test(tc, test_a_waiting_request_is_answered_from_the_loop);
        tcase_add_test(tc, test_a_stream_waits_and_is_woken_until_its_end);
        tcase_add_test(tc, test_the_job_learns_when_its_client_leaves);
        tcase_add_test(tc, test_a_request_job_ends_within_its_head_and_is_answered_whole);
        tcase_add_test(tc, test_a_request_job_past_its_head_goes_on_as_a_stream);
        tcase_add_test(tc, test_a_request_job_stops_when_its_client_leaves);
        tcase_add_test(tc, test_a_body_within_its_head_is_answered_whole);
        tcase_add_test(tc, test_a_body_past_its_head_is_streamed_on_from_where_it_is);
        tcase_add_test(tc, test_a_body_made_again_is_counted_then_streamed_from_its_start);
        tcase_add_test(tc, test_a_body_that_fails_while_counted_is_answered_by_its_owner);
        tcase_add_test(tc, test_a_body_that_fails_in_its_stream_is_cut);
        tcase_add_test(tc, test_a_file_is_answered_whole_or_as_its_range_asks);
        tcase_add_test(tc, test_a_held_answer_is_given_once_its_waiter_is_told);
        tcase_add_test(tc, test_a_held_answer_stops_waiting_when_its_request_ends);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return wire_main(surfaces_suite());
}
