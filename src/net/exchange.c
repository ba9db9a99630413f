/* exchange.c: one HTTP exchange streamed both ways on the loop (sh/exchange.h), on libcurl's
 * multi interface (multi.c): the request body pulled through curl's read callback (paused
 * with CURL_READFUNC_PAUSE), the answer's head gathered from the header callback and given
 * once at its empty line, its body given as curl hands it over (paused with
 * curl_easy_pause), the head's timeout a loop timer: the peer's silence before the head (from
 * the start, from each piece of the body it took, from the body's end). */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net-internal.h"
#include "sh/exchange.h"
#include "sh/list.h"
#include "sh/util.h"

#define KEEPIDLE_S  10 /* TCP keepalive: first probe after this much silence */
#define KEEPINTVL_S 5  /* then every this often */

struct sh_exchanger {
        sh_multi m;
        sh_exchange *all; /* in flight */
};

struct sh_exchange {
        sh_exchanger *e;
        CURL *easy;
        struct curl_slist *headers;
        const sh_exchange_ops *ops;
        void *data;
        char *url;
        /* the answer's head being gathered: "Name: value" lines */
        char **lines;
        size_t n_lines, cap_lines, head_bytes;
        bool head_given;
        bool aborted; /* a callback of the caller said no more */
        bool timed_out;
        int paused;       /* CURLPAUSE_* bits as curl has them (or will, at the kick) */
        sh_timer *kick_t; /* the pause bits handed to curl from the loop */
        sh_timer *head_t; /* the head's timeout, from the request body's end */
        uint64_t head_timeout_ms;
        SH_LIST_FIELDS(sh_exchange, all);
};

static void lines_clear(sh_exchange *x)
{
        for (size_t i = 0; i < x->n_lines; i++)
                free(x->lines[i]);
        x->n_lines = 0;
        x->head_bytes = 0;
}

static void exchange_free(sh_exchange *x)
{
        sh_exchanger *e = x->e;

        SH_LIST_REMOVE(all, e->all, x);
        if (e->m.loop_alive) {
                sh_loop_cancel_timer(e->m.loop, x->kick_t);
                sh_loop_cancel_timer(e->m.loop, x->head_t);
        }
        curl_multi_remove_handle(e->m.multi, x->easy);
        curl_easy_cleanup(x->easy);
        curl_slist_free_all(x->headers);
        lines_clear(x);
        free(x->lines);
        free(x->url);
        free(x);
}

/* The end: done, then freed. From the loop, outside curl's callbacks. */
static void finish(sh_exchange *x, CURLcode rc)
{
        sh_exchange_result res = {.end = SH_EXCHANGE_OK};

        if (!x->head_given || rc != CURLE_OK || x->aborted || x->timed_out) {
                res.end = x->head_given ? SH_EXCHANGE_CUT : SH_EXCHANGE_NO_HEAD;
                res.timed_out = x->timed_out || rc == CURLE_OPERATION_TIMEDOUT;
                snprintf(res.reason, sizeof(res.reason), "%s",
                         x->timed_out     ? "no answer within the timeout"
                         : x->aborted     ? "stopped by the receiver"
                         : rc != CURLE_OK ? curl_easy_strerror(rc)
                                          : "the answer ended before its head");
        }
        x->ops->done(x->data, &res);
        exchange_free(x);
}

static void check_done(void *owner)
{
        sh_exchanger *e = owner;
        CURLMsg *msg;
        int left;

        while ((msg = curl_multi_info_read(e->m.multi, &left))) {
                sh_exchange *x = NULL;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
                if (x)
                        finish(x, msg->data.result);
        }
}

int sh_exchanger_new(sh_loop *loop, unsigned max_conns, sh_exchanger **ret, sh_error **err)
{
        sh_exchanger *e = calloc(1, sizeof(*e));

        if (!e)
                return sh_error_make(err, ENOMEM, "out of memory");
        if (sh_multi_init(&e->m, loop, (long)max_conns, check_done, e, err) < 0) {
                free(e);
                return -1;
        }
        *ret = e;
        return 0;
}

void sh_exchanger_free(sh_exchanger *e, bool loop_alive)
{
        if (!e)
                return;
        e->m.loop_alive = loop_alive;
        while (e->all)
                exchange_free(e->all);
        sh_multi_done(&e->m);
        free(e);
}

/* ---- the request body ------------------------------------------------------------------- */

static void on_head_timeout(sh_loop *l, sh_timer *t, void *data)
{
        sh_exchange *x = data;

        x->head_t = NULL; /* the loop frees a fired timer */
        x->timed_out = true;
        finish(x, CURLE_OPERATION_TIMEDOUT);
}

/* The peer is to do something within the head's timeout: connect, take the request body's
 * next piece, answer after its end. Waiting on our own caller's body (a pause) does not count. */
static void peer_due(sh_exchange *x)
{
        if (x->head_given || !x->head_timeout_ms)
                return;
        sh_loop_cancel_timer(x->e->m.loop, x->head_t);
        x->head_t = sh_loop_add_timer(x->e->m.loop, x->head_timeout_ms, on_head_timeout, x);
}

static size_t read_cb(char *buf, size_t size, size_t nitems, void *userdata)
{
        sh_exchange *x = userdata;
        ssize_t n = x->ops->send(x->data, buf, size * nitems);

        if (n == SH_EXCHANGE_PAUSE) {
                x->paused |= CURLPAUSE_SEND;
                sh_loop_cancel_timer(x->e->m.loop, x->head_t); /* our caller's wait */
                x->head_t = NULL;
                return CURL_READFUNC_PAUSE;
        }
        if (n < 0) {
                x->aborted = true;
                return CURL_READFUNC_ABORT;
        }
        peer_due(x); /* the next piece taken, or the answer, in time */
        return (size_t)n;
}

/* ---- the answer ------------------------------------------------------------------------- */

/* The head is whole: given once, its fields split at their colon. */
static int give_head(sh_exchange *x)
{
        _cleanup_free_ sh_exchange_field *f = calloc(x->n_lines ? x->n_lines : 1, sizeof(*f));
        sh_exchange_head h = {.length = -1};
        bool chunked = false;
        long code = 0;

        if (!f)
                return -1;
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
        h.status = code;
        for (size_t i = 0; i < x->n_lines; i++) {
                char *colon = strchr(x->lines[i], ':');
                char *v;

                if (!colon)
                        continue;
                *colon = '\0';
                for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
                        ;
                f[h.n].name = x->lines[i];
                f[h.n].value = v;
                if (strcasecmp(f[h.n].name, "Content-Length") == 0) {
                        uint64_t len;

                        if (sh_parse_u64(v, &len) == 0 && len <= INT64_MAX)
                                h.length = (int64_t)len;
                }
                if (strcasecmp(f[h.n].name, "Transfer-Encoding") == 0)
                        chunked = true;
                h.n++;
        }
        if (chunked)
                h.length = -1;
        h.fields = f;
        x->head_given = true;
        if (x->head_t) {
                sh_loop_cancel_timer(x->e->m.loop, x->head_t);
                x->head_t = NULL;
        }
        return x->ops->head(x->data, &h);
}

static size_t header_cb(char *p, size_t size, size_t n, void *userdata)
{
        sh_exchange *x = userdata;
        size_t len = size * n, k = len;
        long code = 0;
        char *line;

        if (x->head_given)
                return len; /* trailers: dropped */
        while (k && (p[k - 1] == '\n' || p[k - 1] == '\r'))
                k--;
        if (k == 0) { /* the empty line: a 1xx goes on to the real head */
                curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
                if (code >= 100 && code < 200) {
                        lines_clear(x);
                        return len;
                }
                if (give_head(x) < 0) {
                        x->aborted = true;
                        return 0;
                }
                return len;
        }
        if (k >= 5 && strncmp(p, "HTTP/", 5) == 0) { /* a status line: a head begins */
                lines_clear(x);
                return len;
        }
        x->head_bytes += k;
        if (x->head_bytes > SH_EXCHANGE_HEAD_MAX || p[0] == ' ' || p[0] == '\t')
                return 0; /* too long, or a folded line: a broken answer */
        if (x->n_lines == x->cap_lines) {
                size_t cap = x->cap_lines ? 2 * x->cap_lines : 16;
                char **l = realloc(x->lines, cap * sizeof(*l));

                if (!l)
                        return 0;
                x->lines = l;
                x->cap_lines = cap;
        }
        line = strndup(p, k);
        if (!line)
                return 0;
        x->lines[x->n_lines++] = line;
        return len;
}

static size_t write_cb(char *p, size_t size, size_t n, void *userdata)
{
        sh_exchange *x = userdata;
        size_t len = size * n;

        if (!x->head_given)
                return len; /* a body before any head: none of ours */
        if (x->ops->body(x->data, p, len) < 0) {
                x->aborted = true;
                return 0;
        }
        return len;
}

/* ---- starting, pausing, stopping -------------------------------------------------------- */

static void slist_freep(struct curl_slist **l)
{
        curl_slist_free_all(*l); /* accepts NULL */
}

static bool has_header(const char *const *h, const char *name)
{
        size_t n = strlen(name);

        for (; h && *h; h++)
                if (strncasecmp(*h, name, n) == 0 && (*h)[n] == ':')
                        return true;
        return false;
}

static int header_list(const sh_exchange_opts *o, struct curl_slist **ret, sh_error **err)
{
        _cleanup_(slist_freep) struct curl_slist *l = NULL;
        const char *const *h;
        const char *const extra[] = {
                "Expect:", /* no 100-continue round trip */
                has_header(o->headers, "Accept") ? NULL : "Accept:",
                o->body && !has_header(o->headers, "Content-Type") ? "Content-Type:" : NULL,
        };

        for (h = o->headers; h && *h; h++) {
                struct curl_slist *nl;

                if (strpbrk(*h, "\r\n") || !strchr(*h, ':'))
                        return sh_error_new(err, SH_E_INVALID, "a request header is malformed");
                nl = curl_slist_append(l, *h);
                if (!nl)
                        return sh_error_make(err, ENOMEM, "out of memory");
                l = nl;
        }
        for (size_t i = 0; i < ARRAY_SIZE(extra); i++) {
                struct curl_slist *nl;

                if (!extra[i])
                        continue;
                nl = curl_slist_append(l, extra[i]);
                if (!nl)
                        return sh_error_make(err, ENOMEM, "out of memory");
                l = nl;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static bool configure(sh_exchange *x, const sh_exchange_opts *o)
{
        CURL *c = x->easy;
        bool head = strcmp(o->method, "HEAD") == 0;
        bool ok = curl_easy_setopt(c, CURLOPT_URL, x->url) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http") == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_NOPROXY, "*") == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_HTTP_CONTENT_DECODING, 0L) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, (long)KEEPIDLE_S) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, (long)KEEPINTVL_S) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)o->connect_timeout_ms) ==
                          CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_HEADERDATA, x) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_WRITEDATA, x) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_PRIVATE, x) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->headers) == CURLE_OK;

        if (ok && head)
                ok = curl_easy_setopt(c, CURLOPT_NOBODY, 1L) == CURLE_OK;
        if (ok && o->body && !head)
                ok = curl_easy_setopt(c, CURLOPT_POST, 1L) == CURLE_OK &&
                     curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                                      (curl_off_t)(o->body_length >= 0 ? o->body_length : -1)) ==
                             CURLE_OK &&
                     curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb) == CURLE_OK &&
                     curl_easy_setopt(c, CURLOPT_READDATA, x) == CURLE_OK;
        /* the method as it was sent (curl's own word for GET, POST and HEAD) */
        if (ok && strcmp(o->method, "GET") != 0 && !head &&
            !(o->body && strcmp(o->method, "POST") == 0))
                ok = curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, o->method) == CURLE_OK;
        return ok;
}

sh_exchange *sh_exchange_start(sh_exchanger *e, const sh_exchange_opts *o,
                               const sh_exchange_ops *ops, void *data, sh_error **err)
{
        sh_exchange *x = calloc(1, sizeof(*x));

        if (!x) {
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        x->e = e;
        x->ops = ops;
        x->data = data;
        x->head_timeout_ms = o->head_timeout_ms;
        SH_LIST_PREPEND(all, e->all, x);
        x->url = strdup(o->url);
        x->easy = curl_easy_init();
        if (!x->url || !x->easy) {
                sh_error_make(err, ENOMEM, "out of memory");
                goto fail;
        }
        if (header_list(o, &x->headers, err) < 0)
                goto fail;
        if (!configure(x, o)) {
                sh_error_make(err, EINVAL, "configuring libcurl for an exchange");
                goto fail;
        }
        if (curl_multi_add_handle(e->m.multi, x->easy) != CURLM_OK) {
                sh_error_make(err, ENOMEM, "starting an exchange");
                goto fail;
        }
        peer_due(x);
        return x;
fail:
        exchange_free(x);
        return NULL;
}

void sh_exchange_cancel(sh_exchange *x)
{
        if (x)
                exchange_free(x);
}

static void on_kick(sh_loop *l, sh_timer *t, void *data)
{
        sh_exchange *x = data;

        x->kick_t = NULL;
        curl_easy_pause(x->easy, x->paused);
        check_done(x->e); /* x may be gone from here */
}

static void kick(sh_exchange *x)
{
        if (!x->kick_t)
                x->kick_t = sh_loop_add_timer(x->e->m.loop, 0, on_kick, x);
}

void sh_exchange_send_resume(sh_exchange *x)
{
        if (!(x->paused & CURLPAUSE_SEND))
                return;
        x->paused &= ~CURLPAUSE_SEND;
        peer_due(x);
        kick(x);
}

void sh_exchange_recv_pause(sh_exchange *x, bool pause)
{
        if (pause == !!(x->paused & CURLPAUSE_RECV))
                return;
        if (pause) {
                x->paused |= CURLPAUSE_RECV;
                curl_easy_pause(x->easy, x->paused);
                return;
        }
        x->paused &= ~CURLPAUSE_RECV;
        kick(x);
}
