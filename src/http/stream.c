/* stream.c: the queued stream: a streamed body fed by a producer that does not wait for the
 * client (an exec's output, a sampler), with its queue's high and low marks (backpressure),
 * an optional keepalive frame after a silence, its end, and the client's disconnect. It
 * reads through the request's pending token (pending.c), which owns the stream: the token's
 * last reference frees it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http-internal.h"

struct sh_queued_stream {
        sh_pending *tok; /* the token this stream is the data of */
        const sh_queued_stream_ops *ops;
        void *data;
        sh_loop *loop;
        size_t high, low, block;
        uint64_t keepalive_ms;
        sh_buf q;         /* frames not yet handed out */
        bool answered;    /* its response is made: pushes wake the connection */
        bool ended;       /* the producer's last bytes are queued */
        bool held;        /* past the high mark: the producer was told to stop */
        bool gone;        /* the request ended: bytes pushed now are dropped */
        bool cut;         /* ended by a failure: the stream is cut after what is queued */
        sh_timer *ka;     /* the keepalive's next look */
        uint64_t last_ms; /* the last push (monotonic): the silence counts from it */
};

static ssize_t qs_read(void *data, char *out, size_t max)
{
        sh_queued_stream *s = data;
        size_t n = sh_buf_unread(&s->q);

        if (n > max)
                n = max;
        if (n == 0) {
                if (!s->ended)
                        return 0;   /* the producer's next push wakes the connection */
                sh_buf_done(&s->q); /* all read: nothing of the stream stays */
                return s->cut ? SH_STREAM_CUT : SH_STREAM_END;
        }
        memcpy(out, s->q.p + s->q.off, n);
        s->q.off += n;
        if (s->q.off == s->q.len)
                s->q.off = s->q.len = 0;
        if (s->held && sh_buf_unread(&s->q) < s->low) {
                s->held = false;
                s->ops->backpressure(s->data, false);
        }
        return (ssize_t)n;
}

/* The request ended: the client left (or it read the end). Nothing is queued any more, and
 * nobody reads: a producer told to stop is let go. */
static void qs_gone(void *data)
{
        sh_queued_stream *s = data;

        s->gone = true;
        sh_loop_cancel_timer(s->loop, s->ka);
        s->ka = NULL;
        sh_buf_done(&s->q);
        if (s->ops->gone)
                s->ops->gone(s->data);
        if (s->held) {
                s->held = false;
                s->ops->backpressure(s->data, false);
        }
}

static void qs_release(void *data)
{
        sh_queued_stream *s = data;

        sh_loop_cancel_timer(s->loop, s->ka);
        sh_buf_done(&s->q);
        if (s->ops->release)
                s->ops->release(s->data);
        free(s);
}

static const sh_pending_ops qs_ops = {
        .gone = qs_gone,
        .release = qs_release,
        .read = qs_read,
};

sh_queued_stream *sh_queued_stream_new(sh_request *r, sh_loop *loop,
                                       const sh_queued_stream_ops *ops,
                                       const sh_queued_stream_opts *o, void *data)
{
        sh_queued_stream *s = calloc(1, sizeof(*s));

        if (!s)
                return NULL;
        s->ops = ops;
        s->data = data;
        s->loop = loop;
        s->high = ops->backpressure ? o->high : 0;
        s->low = o->low;
        s->block = o->block;
        s->keepalive_ms = ops->keepalive ? o->keepalive_ms : 0;
        s->tok = sh_request_wait(r, &qs_ops, s);
        if (!s->tok) {
                free(s);
                return NULL;
        }
        return s;
}

sh_request *sh_queued_stream_request(const sh_queued_stream *s)
{
        return sh_pending_request(s->tok);
}

static void on_keepalive(sh_loop *l, sh_timer *t, void *data)
{
        sh_queued_stream *s = data;
        uint64_t now = sh_now_ms();

        s->ka = NULL;
        if (s->ended || s->gone)
                return;
        if (now - s->last_ms >= s->keepalive_ms) {
                if (s->ops->keepalive(s->data, &s->q) == 0)
                        sh_queued_stream_pushed(s);
                now = s->last_ms = sh_now_ms();
        }
        s->ka = sh_loop_add_timer(l, s->keepalive_ms - (now - s->last_ms), on_keepalive, s);
}

sh_response *sh_queued_stream_response_sized(sh_queued_stream *s, uint64_t size)
{
        sh_response *resp;

        if (s->answered || s->gone)
                return NULL;
        resp = sh_response_stream_sized(s->tok, s->block, size);
        if (!resp)
                return NULL;
        s->answered = true;
        s->last_ms = sh_now_ms();
        if (s->keepalive_ms && !s->ended)
                s->ka = sh_loop_add_timer(s->loop, s->keepalive_ms, on_keepalive, s);
        return resp;
}

sh_response *sh_queued_stream_response(sh_queued_stream *s)
{
        return sh_queued_stream_response_sized(s, SH_SIZE_UNKNOWN);
}

int sh_queued_stream_reply(sh_queued_stream *s, const sh_header *headers)
{
        sh_request *r = sh_queued_stream_request(s);
        sh_response *resp;

        if (!r)
                return 0;
        resp = sh_queued_stream_response(s);
        if (!resp)
                return -ENOMEM;
        for (; headers->name; headers++)
                sh_response_header(resp, headers->name, headers->value);
        sh_reply(r, 200, resp);
        return 0;
}

sh_buf *sh_queued_stream_queue(sh_queued_stream *s)
{
        return &s->q;
}

void sh_queued_stream_pushed(sh_queued_stream *s)
{
        if (s->gone) {
                sh_buf_done(&s->q); /* nobody will read it */
                return;
        }
        s->last_ms = sh_now_ms();
        if (s->high && !s->held && sh_buf_unread(&s->q) > s->high) {
                s->held = true;
                s->ops->backpressure(s->data, true);
        }
        /* Before its response the connection waits for the answer, not for bytes. */
        if (s->answered)
                sh_pending_wake(s->tok);
}

int sh_queued_stream_push(sh_queued_stream *s, const void *p, size_t n)
{
        int r = sh_buf_append(&s->q, p, n);

        sh_queued_stream_pushed(s);
        return r;
}

void sh_queued_stream_end(sh_queued_stream *s)
{
        if (s->ended)
                return;
        s->ended = true;
        sh_loop_cancel_timer(s->loop, s->ka);
        s->ka = NULL;
        sh_queued_stream_pushed(s);
}

void sh_queued_stream_cut(sh_queued_stream *s)
{
        if (s->ended)
                return;
        s->cut = true;
        sh_queued_stream_end(s);
}

void sh_queued_stream_close(sh_queued_stream *s)
{
        if (!s)
                return;
        sh_queued_stream_end(s);
        sh_queued_stream_release(s);
}

size_t sh_queued_stream_unread(const sh_queued_stream *s)
{
        return sh_buf_unread(&s->q);
}

void sh_queued_stream_release(sh_queued_stream *s)
{
        if (s)
                sh_pending_release(s->tok);
}
