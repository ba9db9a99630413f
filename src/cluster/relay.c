/* relay.c: a request of this pod's client relayed to a peer pod and its answer relayed back as
 * it comes (sh/relay.h). The request is diverted in the surface's admit (sh_request_divert):
 * its body goes to a sink that holds one piece of it at a time (the upload pauses until the
 * exchange has sent it on), its answer is a queued stream whose marks pause the exchange's
 * receiving. The exchange (sh/exchange.h) starts at once; its head is answered once the client's
 * body is in (the transport answers no earlier), a failure before the head is the surface's
 * to answer, after it the client's stream is cut. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sh/exchange.h"
#include "sh/list.h"
#include "sh/log.h"
#include "sh/relay.h"

#define RELAY_CONN_EXTRA  8           /* connections beyond peer_relay_max: probes, listings */
#define RELAY_STREAM_HIGH (256 << 10) /* unread answer bytes past which the peer is paused */
#define RELAY_STREAM_LOW  (64 << 10)
#define RELAY_BLOCK       (64 << 10) /* the most one read of the transport takes */

typedef struct relay relay;

struct sh_relayer {
        const sh_config *cfg;
        sh_loop *loop;
        char *mark; /* "X-Sandbox-Host-Hop: <token>" */
        sh_exchanger *ex;
        relay *all; /* in flight */
        unsigned n;
        size_t held_max; /* the most bytes of a client's body held at once */
};

struct relay {
        sh_relayer *rl;       /* NULL once the relayer is gone */
        sh_request *r;        /* NULL once the request ended */
        sh_queued_stream *qs; /* our reference, until the exchange ended */
        sh_exchange *x;       /* until its done, or cancelled */
        sh_relay_failed_fn failed;
        void *data;
        char *url;
        /* the client's body: one piece the transport handed over, sent on before the next */
        char *buf;
        size_t len, off, cap;
        bool body_in;    /* the client's whole body is in */
        bool dispatched; /* the transport asks for the answer (the body is in) */
        bool answered;   /* the client has its answer (the head, or the surface's) */
        bool over;       /* the exchange ended: the rest of the client's body is dropped */
        /* a head that came before the client's body was all in, or a failure, kept till then */
        unsigned status;
        sh_response *held;
        char why[SH_EXCHANGE_REASON_MAX];
        bool failed_early;
        SH_LIST_FIELDS(relay, all);
};

/* ---- which header fields cross --------------------------------------------------------------- */

/* Whether `name` is one of the comma-separated tokens of `list`. */
static bool listed(const char *list, const char *name)
{
        size_t n = strlen(name);

        while (list && *list) {
                size_t k;

                list += strspn(list, " \t,");
                k = strcspn(list, " \t,");
                if (k == n && strncasecmp(list, name, n) == 0)
                        return true;
                list += k;
        }
        return false;
}

static bool hop_by_hop(const char *name, const char *connection)
{
        static const char *const hop[] = {
                "Connection", "Keep-Alive",        "TE",       "Trailer",
                "Upgrade",    "Transfer-Encoding", "Trailers",
        };

        for (size_t i = 0; i < ARRAY_SIZE(hop); i++)
                if (strcasecmp(name, hop[i]) == 0)
                        return true;
        return strncasecmp(name, "Proxy-", 6) == 0 || listed(connection, name);
}

bool sh_relay_request_field_kept(const char *name, const char *connection)
{
        return !hop_by_hop(name, connection) && strcasecmp(name, "Host") != 0 &&
               strcasecmp(name, "Content-Length") != 0 && strcasecmp(name, "Expect") != 0 &&
               strcasecmp(name, SH_HOP_HEADER) != 0;
}

bool sh_relay_answer_field_kept(const char *name, const char *connection)
{
        return !hop_by_hop(name, connection) && strcasecmp(name, "Content-Length") != 0 &&
               strcasecmp(name, "X-Request-ID") != 0;
}

bool sh_request_hop_marked(const sh_request *r)
{
        return sh_request_header(r, SH_HOP_HEADER) != NULL;
}

/* ---- the relayer ------------------------------------------------------------------------------ */

int sh_relayer_new(const sh_config *cfg, sh_loop *loop, const char *token, sh_relayer **ret,
                   sh_error **err)
{
        sh_relayer *rl = calloc(1, sizeof(*rl));

        if (!rl || asprintf(&rl->mark, "%s: %s", SH_HOP_HEADER, token) < 0) {
                free(rl);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        rl->cfg = cfg;
        rl->loop = loop;
        if (sh_exchanger_new(loop, (unsigned)cfg->peer_relay_max + RELAY_CONN_EXTRA, &rl->ex, err) <
            0) {
                free(rl->mark);
                free(rl);
                return -1;
        }
        *ret = rl;
        return 0;
}

unsigned sh_relayer_in_flight(const sh_relayer *rl)
{
        return rl->n;
}

size_t sh_relayer_body_held_max(const sh_relayer *rl)
{
        return rl->held_max;
}

/* ---- one relay: its end ----------------------------------------------------------------------- */

static void relay_log(const relay *y, const char *what)
{
        log_warn("relay-failed", y->r ? sh_request_log_id(y->r) : NULL, "%s %s: %s",
                 y->url ? y->url : "", what, y->why);
}

/* The client has its answer, or the failure is told: from the transport's dispatch on. */
static void answer(relay *y)
{
        sh_request *r = y->r;

        if (!r || y->answered || !y->dispatched)
                return;
        if (y->held) {
                y->answered = true;
                sh_reply(r, y->status, TAKE_PTR(y->held));
        } else if (y->failed_early) {
                y->answered = true;
                y->failed(r, y->why, y->data);
        }
}

static void ex_done(void *data, const sh_exchange_result *res)
{
        relay *y = data;

        y->x = NULL;
        y->over = true;
        if (res->end != SH_EXCHANGE_OK) {
                snprintf(y->why, sizeof(y->why), "%s", res->reason);
                relay_log(y, res->end == SH_EXCHANGE_NO_HEAD || !y->answered
                                     ? "failed before its answer"
                                     : "cut in its answer");
        }
        if (res->end == SH_EXCHANGE_OK) {
                sh_queued_stream_end(y->qs);
        } else if (y->answered) {
                sh_queued_stream_cut(y->qs);
        } else {
                /* nothing went to the client: the surface answers, once the body is in */
                sh_response_free(TAKE_PTR(y->held));
                y->failed_early = true;
        }
        /* the client's body, if it still comes, is dropped from now on */
        if (y->r && !y->body_in)
                sh_request_body_resume(y->r);
        answer(y);
        sh_queued_stream_release(TAKE_PTR(y->qs));
}

/* ---- the client's body ------------------------------------------------------------------------- */

static ssize_t ex_send(void *data, char *buf, size_t max)
{
        relay *y = data;
        size_t n = y->len - y->off;

        if (n == 0)
                return y->body_in ? 0 : SH_EXCHANGE_PAUSE;
        if (n > max)
                n = max;
        memcpy(buf, y->buf + y->off, n);
        y->off += n;
        if (y->off == y->len) {
                y->off = y->len = 0;
                if (y->r)
                        sh_request_body_resume(y->r); /* the next piece */
        }
        return (ssize_t)n;
}

static int sink_begin(sh_request *r, void **state)
{
        return 0; /* *state: the relay (sh_request_divert) */
}

static int sink_data(sh_request *r, void *state, const char *p, size_t n)
{
        relay *y = state;
        char *b;

        if (y->over || !y->x)
                return -1; /* the exchange ended: the rest is read and dropped */
        if (y->len + n > y->cap) {
                b = realloc(y->buf, y->len + n);
                if (!b) {
                        snprintf(y->why, sizeof(y->why), "out of memory");
                        return -1;
                }
                y->buf = b;
                y->cap = y->len + n;
        }
        if (y->rl && y->len + n > y->rl->held_max)
                y->rl->held_max = y->len + n;
        memcpy(y->buf + y->len, p, n);
        y->len += n;
        sh_exchange_send_resume(y->x);
        return SH_SINK_PAUSE; /* until ex_send took it all */
}

static int sink_end(sh_request *r, void *state)
{
        relay *y = state;

        y->body_in = true;
        if (y->x)
                sh_exchange_send_resume(y->x); /* its end */
        return 0;
}

static void relay_handler(sh_request *r)
{
        relay *y = sh_request_sink_state(r);

        y->dispatched = true;
        answer(y); /* or later: the transport waits on the stream's token */
}

static const sh_body_sink relay_sink = {
        .begin = sink_begin,
        .data = sink_data,
        .end = sink_end,
};

/* ---- the answer ----------------------------------------------------------------------------- */

static int ex_head(void *data, const sh_exchange_head *h)
{
        relay *y = data;
        const char *connection = NULL;
        sh_response *resp;

        if (!y->r || !y->qs)
                return -1;
        for (size_t i = 0; i < h->n; i++)
                if (strcasecmp(h->fields[i].name, "Connection") == 0)
                        connection = h->fields[i].value;
        /* A 204 has no body, and one "Content-Length: 0" as this pod's own 204s have
         * (sh_response_empty_sized); anything else is the stream, of the peer's length. */
        resp = h->status == 204
                       ? sh_response_empty_sized(204)
                       : sh_queued_stream_response_sized(y->qs, h->length >= 0 ? (uint64_t)h->length
                                                                               : SH_SIZE_UNKNOWN);
        if (!resp) {
                snprintf(y->why, sizeof(y->why), "out of memory");
                return -1;
        }
        for (size_t i = 0; i < h->n; i++)
                if (sh_relay_answer_field_kept(h->fields[i].name, connection) &&
                    sh_response_header(resp, h->fields[i].name, h->fields[i].value) < 0)
                        log_warn("relay-header", sh_request_log_id(y->r),
                                 "the peer's header '%.64s' could not be kept", h->fields[i].name);
        y->status = (unsigned)h->status;
        y->held = resp;
        answer(y);
        return 0;
}

static int ex_body(void *data, const char *p, size_t n)
{
        relay *y = data;

        if (!y->qs)
                return -1;
        return sh_queued_stream_push(y->qs, p, n) < 0 ? -1 : 0;
}

static void qs_backpressure(void *data, bool stop)
{
        relay *y = data;

        if (y->x)
                sh_exchange_recv_pause(y->x, stop);
}

/* The client left (or read the end): nothing more is wanted of the peer. */
static void qs_gone(void *data)
{
        relay *y = data;

        y->r = NULL;
        sh_response_free(TAKE_PTR(y->held)); /* it holds a reference to the stream */
        if (y->x) {
                sh_exchange_cancel(TAKE_PTR(y->x));
                sh_queued_stream_release(TAKE_PTR(y->qs));
        }
}

static void qs_release(void *data)
{
        relay *y = data;

        if (y->rl) {
                SH_LIST_REMOVE(all, y->rl->all, y);
                y->rl->n--;
        }
        sh_response_free(y->held);
        free(y->buf);
        free(y->url);
        free(y);
}

static const sh_queued_stream_ops relay_stream_ops = {
        .backpressure = qs_backpressure,
        .gone = qs_gone,
        .release = qs_release,
};

static const sh_exchange_ops relay_exchange_ops = {
        .send = ex_send,
        .head = ex_head,
        .body = ex_body,
        .done = ex_done,
};

/* ---- starting ----------------------------------------------------------------------------- */

typedef struct fields {
        char **h;
        size_t n, cap;
        const char *connection;
        bool failed;
} fields;

/* Room for one more, and the mark and the NULL after it. */
static bool fields_room(fields *f)
{
        if (f->n + 3 > f->cap) {
                size_t cap = f->cap ? 2 * f->cap : 16;
                char **h = realloc(f->h, cap * sizeof(*h));

                if (!h) {
                        f->failed = true;
                        return false;
                }
                f->h = h;
                f->cap = cap;
        }
        return true;
}

static bool add_field(void *data, const char *name, const char *value)
{
        fields *f = data;

        if (!sh_relay_request_field_kept(name, f->connection))
                return true;
        if (!fields_room(f))
                return false;
        if (asprintf(&f->h[f->n], "%s: %s", name, value) < 0) {
                f->failed = true;
                return false;
        }
        f->n++;
        return true;
}

static void fields_done(fields *f)
{
        for (size_t i = 0; i < f->n; i++)
                free(f->h[i]);
        free(f->h);
}

/* A relay of r: from admit, its body streamed (body NULL); from a handler, the body it already
 * holds in memory (`body`, `body_len`: copied). */
static int relay_start(sh_relayer *rl, sh_request *r, const char *base_url,
                       sh_relay_failed_fn failed, void *data, const char *body, size_t body_len)
{
        const sh_queued_stream_opts qo = {
                .high = RELAY_STREAM_HIGH, .low = RELAY_STREAM_LOW, .block = RELAY_BLOCK};
        fields f = {.connection = sh_request_header(r, "Connection")};
        sh_exchange_opts xo = {
                .method = sh_request_method(r),
                .connect_timeout_ms = rl->cfg->peer_timeout_ms,
                .head_timeout_ms = rl->cfg->peer_timeout_ms,
        };
        sh_error *err = NULL;
        uint64_t len = 0;
        relay *y;

        if (rl->n >= rl->cfg->peer_relay_max) {
                sh_reply_errorf(r, SH_E_UNAVAILABLE,
                                "too many requests relayed to other pods at once (%" PRIu64 ")",
                                rl->cfg->peer_relay_max);
                return -1;
        }
        y = calloc(1, sizeof(*y));
        if (!y || asprintf(&y->url, "%s%s", base_url, sh_request_target(r)) < 0) {
                free(y);
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return -1;
        }
        y->rl = rl;
        y->r = r;
        y->failed = failed;
        y->data = data;
        sh_request_fields(r, add_field, &f);
        if (!f.failed && fields_room(&f))
                f.h[f.n++] = rl->mark; /* borrowed: taken out before fields_done */
        if (f.failed) {
                fields_done(&f);
                free(y->url);
                free(y);
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return -1;
        }
        f.h[f.n] = NULL;
        y->qs = sh_queued_stream_new(r, rl->loop, &relay_stream_ops, &qo, y);
        if (!y->qs) {
                f.h[--f.n] = NULL;
                fields_done(&f);
                free(y->url);
                free(y);
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return -1;
        }
        /* from here y is the stream's: its release frees it */
        SH_LIST_PREPEND(all, rl->all, y);
        rl->n++;
        if (body) {
                /* the handler's: the whole body is in, the transport waits for the answer */
                y->buf = malloc(body_len ? body_len : 1);
                if (!y->buf) {
                        f.h[--f.n] = NULL;
                        fields_done(&f);
                        sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                        sh_queued_stream_release(TAKE_PTR(y->qs));
                        return -1;
                }
                memcpy(y->buf, body, body_len);
                y->len = y->cap = body_len;
                y->body_in = y->dispatched = true;
                xo.body = true;
                xo.body_length = (int64_t)body_len;
        } else {
                switch (sh_request_body_kind(r, &len)) {
                case SH_BODY_LENGTH:
                        xo.body = true;
                        xo.body_length = (int64_t)len;
                        break;
                case SH_BODY_CHUNKED:
                        xo.body = true;
                        xo.body_length = -1;
                        break;
                case SH_BODY_NONE:
                        break;
                }
                sh_request_divert(r, &relay_sink, relay_handler, y);
        }
        xo.url = y->url;
        xo.headers = (const char *const *)f.h;
        y->x = sh_exchange_start(rl->ex, &xo, &relay_exchange_ops, y, &err);
        f.h[--f.n] = NULL;
        fields_done(&f);
        if (!y->x) {
                snprintf(y->why, sizeof(y->why), "%s", err && err->msg ? err->msg : "?");
                relay_log(y, "could not start");
                sh_reply_error(r, err);
                sh_error_release(&err);
                sh_queued_stream_release(TAKE_PTR(y->qs));
                return -1;
        }
        return 0;
}

int sh_relay_request(sh_relayer *rl, sh_request *r, const char *base_url, sh_relay_failed_fn failed,
                     void *data)
{
        return relay_start(rl, r, base_url, failed, data, NULL, 0);
}

int sh_relay_request_body(sh_relayer *rl, sh_request *r, const char *base_url, const char *body,
                          size_t len, sh_relay_failed_fn failed, void *data)
{
        return relay_start(rl, r, base_url, failed, data, body ? body : "", len);
}

void sh_relayer_free(sh_relayer *rl)
{
        relay *y;

        if (!rl)
                return;
        /* every relay in flight is cut; those whose request still lives are freed with it */
        while ((y = rl->all)) {
                SH_LIST_REMOVE(all, rl->all, y);
                y->rl = NULL;
                if (y->x) {
                        sh_exchange_cancel(TAKE_PTR(y->x));
                        y->over = true;
                        sh_response_free(TAKE_PTR(y->held));
                        if (y->answered) {
                                sh_queued_stream_cut(y->qs);
                        } else {
                                snprintf(y->why, sizeof(y->why), "this pod is shutting down");
                                y->failed_early = true;
                                if (y->r && !y->body_in)
                                        sh_request_body_resume(y->r);
                                answer(y);
                        }
                        sh_queued_stream_release(TAKE_PTR(y->qs));
                }
        }
        sh_exchanger_free(rl->ex, true);
        free(rl->mark);
        free(rl);
}
