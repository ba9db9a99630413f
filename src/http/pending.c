/* pending.c: the pending-reply token: the one owner of "the request is gone / the job is done,
 * in either order", and of suspending and resuming a connection that waits for an answer or
 * for its stream's next bytes. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "http-internal.h"

sh_pending *sh_request_wait(sh_request *r, const sh_pending_ops *ops, void *data)
{
        sh_pending *p;

        if (r->token || r->responded)
                return NULL; /* one token per request, and only before the answer */
        p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        p->refs = 2; /* the request's and the caller's */
        p->r = r;
        p->ops = ops;
        p->data = data;
        r->token = p;
        return p;
}

sh_request *sh_pending_request(const sh_pending *p)
{
        return p ? p->r : NULL;
}

sh_pending *sh_pending_ref(sh_pending *p)
{
        if (p)
                p->refs++;
        return p;
}

void sh_pending_release(sh_pending *p)
{
        if (!p || --p->refs > 0)
                return;
        if (p->ops && p->ops->release)
                p->ops->release(p->data);
        free(p);
}

void sh_pending_wake(sh_pending *p)
{
        if (p && p->r)
                sh_http_resume(p->r);
}

void sh_pending_request_ended(sh_request *r)
{
        sh_pending *p = r->token;

        if (!p)
                return;
        r->token = NULL;
        p->r = NULL;
        /* The job learns it first, while the request's reference still holds the token. */
        if (p->ops && p->ops->gone)
                p->ops->gone(p->data);
        sh_pending_release(p);
}

/* The content reader of a streamed response: the job's bytes, or a wait for more. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *out, size_t max)
{
        sh_pending *p = cls;
        ssize_t n;

        if (!p->r)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        n = p->ops->read(p->data, out, max);
        if (n > 0)
                return n;
        if (n == SH_STREAM_END)
                return MHD_CONTENT_READER_END_OF_STREAM;
        if (n != 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        /* Nothing yet: returning 0 without suspending would spin MHD; the job wakes us. */
        sh_http_suspend(p->r);
        return 0;
}

static void stream_free(void *cls)
{
        sh_pending_release(cls);
}

sh_response *sh_response_stream(sh_pending *p, size_t block)
{
        return sh_response_stream_sized(p, block, SH_SIZE_UNKNOWN);
}

sh_response *sh_response_stream_sized(sh_pending *p, size_t block, uint64_t size)
{
        struct MHD_Response *resp;

        if (!p || !p->ops || !p->ops->read)
                return NULL;
        resp = MHD_create_response_from_callback(size == SH_SIZE_UNKNOWN ? MHD_SIZE_UNKNOWN : size,
                                                 block, stream_reader, p, stream_free);
        if (resp)
                sh_pending_ref(p); /* the response's, dropped by stream_free */
        return resp;
}

/* ---- a body read by offset ------------------------------------------------------------- */

typedef struct read_at_body {
        const sh_read_at_ops *ops;
        void *data;
        uint64_t pos, end;
        size_t step;
} read_at_body;

static ssize_t read_at_read(void *data, char *out, size_t max)
{
        read_at_body *b = data;
        ssize_t n;

        if (b->pos >= b->end)
                return SH_STREAM_END;
        if (max > b->step)
                max = b->step;
        if (max > b->end - b->pos)
                max = (size_t)(b->end - b->pos);
        n = b->ops->read_at(b->data, b->pos, out, max);
        if (n <= 0)
                return SH_STREAM_CUT;
        b->pos += (uint64_t)n;
        return n;
}

static void read_at_release(void *data)
{
        read_at_body *b = data;

        b->ops->release(b->data);
        free(b);
}

static const sh_pending_ops read_at_ops = {.release = read_at_release, .read = read_at_read};

sh_response *sh_response_read_at(sh_request *r, uint64_t from, uint64_t end, size_t step,
                                 const sh_read_at_ops *ops, void *data)
{
        read_at_body *b = from < end ? calloc(1, sizeof(*b)) : NULL;
        sh_response *resp;
        sh_pending *tok;

        if (from >= end) {
                ops->release(data);
                return sh_response_buffer(NULL, 0);
        }
        if (!b) {
                ops->release(data);
                return NULL;
        }
        *b = (read_at_body){.ops = ops, .data = data, .pos = from, .end = end, .step = step};
        tok = sh_request_wait(r, &read_at_ops, b);
        if (!tok) {
                read_at_release(b);
                return NULL;
        }
        resp = sh_response_stream(tok, step);
        sh_pending_release(tok); /* the request's and the response's remain */
        return resp;
}

/* ---- a body made in slices ------------------------------------------------------------- */

static void sliced_stream_wake(sh_loop *l, sh_timer *t, void *data)
{
        sh_sliced_stream *ss = data;

        ss->t = NULL; /* the loop frees a fired timer */
        sh_pending_wake(ss->tok);
}

ssize_t sh_sliced_stream_read(sh_sliced_stream *ss, char *out, size_t max, sh_slice_fn fn,
                              void *data)
{
        bool sliced = false; /* one slice per call, so every call is bounded */
        size_t copied = 0;

        for (;;) {
                size_t n = sh_buf_unread(&ss->b);

                if (n > 0) {
                        if (n > max - copied)
                                n = max - copied;
                        memcpy(out + copied, ss->b.p + ss->b.off, n);
                        ss->b.off += n;
                        copied += n;
                        if (copied == max)
                                return (ssize_t)copied;
                        continue;
                }
                ss->b.off = ss->b.len = 0;
                if (ss->ended || sliced) {
                        if (copied)
                                return (ssize_t)copied;
                        if (ss->ended)
                                return SH_STREAM_END;
                        /* Nothing made: the connection waits one loop iteration. */
                        if (!ss->t)
                                ss->t = sh_loop_add_timer(ss->loop, 0, sliced_stream_wake, ss);
                        return ss->t ? 0 : SH_STREAM_CUT;
                }
                sliced = true;
                if (fn(data, &ss->b, max - copied, &ss->ended) < 0)
                        return SH_STREAM_CUT;
        }
}

void sh_sliced_stream_stop(sh_sliced_stream *ss)
{
        sh_loop_cancel_timer(ss->loop, ss->t);
        ss->t = NULL;
}

void sh_sliced_stream_done(sh_sliced_stream *ss)
{
        sh_sliced_stream_stop(ss);
        sh_buf_done(&ss->b);
}

/* ---- an answer made by a job of the loop ---------------------------------------------- */

static void request_job_stalled(void *data)
{
        sh_request_job *rj = data;
        sh_request *r = sh_request_job_request(rj);

        if (r)
                sh_reply_errorf(r, SH_E_INTERNAL, "cannot schedule the %s", rj->what);
        sh_request_job_done(rj);
}

bool sh_request_job_wait(sh_request_job *rj, sh_request *r, sh_loop *loop,
                         const sh_pending_ops *ops, int (*step)(void *data), const char *what)
{
        rj->job.step = step;
        rj->job.stalled = request_job_stalled;
        rj->job.data = rj;
        rj->job.loop = rj->ss.loop = loop;
        rj->what = what;
        if (!(rj->tok = sh_request_wait(r, ops, rj))) {
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return false;
        }
        return true;
}

void sh_request_job_run(sh_request_job *rj)
{
        sh_loop_job_run(&rj->job);
}

bool sh_request_job_start(sh_request_job *rj, sh_request *r, sh_loop *loop,
                          const sh_pending_ops *ops, int (*step)(void *data), const char *what)
{
        if (!sh_request_job_wait(rj, r, loop, ops, step, what))
                return false;
        sh_request_job_run(rj);
        return true;
}

sh_request *sh_request_job_request(const sh_request_job *rj)
{
        return sh_pending_request(rj->tok);
}

int sh_request_job_done(sh_request_job *rj)
{
        sh_pending_release(rj->tok);
        rj->tok = NULL;
        return SH_LOOP_JOB_DONE;
}

int sh_request_job_whole(sh_request_job *rj, const char *type)
{
        sh_response *resp = sh_response_buffer(rj->ss.b.p, rj->ss.b.len);

        rj->ss.b.p = NULL; /* the response's now */
        sh_buf_done(&rj->ss.b);
        if (resp && type)
                sh_response_header(resp, "Content-Type", type);
        sh_reply(sh_request_job_request(rj), 200, resp);
        return sh_request_job_done(rj);
}

int sh_request_job_stream(sh_request_job *rj, size_t block, const char *type)
{
        sh_response *resp;

        rj->ss.tok = rj->tok; /* borrowed: the request and the response keep it */
        resp = sh_response_stream(rj->tok, block);
        if (resp && type)
                sh_response_header(resp, "Content-Type", type);
        sh_reply(sh_request_job_request(rj), 200, resp);
        return sh_request_job_done(rj);
}

void sh_request_job_gone(sh_request_job *rj)
{
        sh_waiter_cancel(&rj->held);
        sh_loop_job_stop(&rj->job);
        sh_sliced_stream_stop(&rj->ss);
        sh_request_job_done(rj);
}

static int request_job_slice(void *data, sh_buf *b, size_t want, bool *ended)
{
        sh_request_job *rj = data;

        (void)b;
        (void)ended; /* the steps set rj->ss.ended */
        rj->want = want;
        (void)sh_loop_job_slice(&rj->job);
        return rj->cut ? SH_STREAM_CUT : 0;
}

ssize_t sh_request_job_read(sh_request_job *rj, char *out, size_t max)
{
        return sh_sliced_stream_read(&rj->ss, out, max, request_job_slice, rj);
}

void sh_request_job_op_gone(void *data)
{
        sh_request_job_gone(data);
}

ssize_t sh_request_job_op_read(void *data, char *out, size_t max)
{
        return sh_request_job_read(data, out, max);
}

void sh_request_job_free(sh_request_job *rj)
{
        sh_sliced_stream_done(&rj->ss);
        if (rj->held_resp)
                MHD_destroy_response(TAKE_PTR(rj->held_resp));
}

/* ---- an answer made as a body ----------------------------------------------------------- */

enum { BODY_KEPT, BODY_COUNTED, BODY_STREAMED };

static int body_failed(sh_body_job *bj, int k)
{
        bool sent = bj->phase == BODY_STREAMED;

        bj->ops->failed(bj,
                        sent ? sh_pending_request(bj->rj.ss.tok) : sh_request_job_request(&bj->rj),
                        sent, k);
        if (!sent)
                return sh_request_job_done(&bj->rj);
        bj->rj.cut = true;
        return SH_LOOP_JOB_DONE;
}

/* One step of the body, into what its phase keeps it in: the head kept, turned past `head` into
 * the count or the stream; the count's end makes it again as the stream; the stream pauses once
 * the slice made what the transport asked for. */
static int body_step(void *data)
{
        sh_body_job *bj = data;
        sh_buf *b = bj->phase == BODY_COUNTED ? &bj->count : &bj->rj.ss.b;
        int k;

        b->len = bj->phase == BODY_COUNTED ? 0 : b->len;
        if ((k = bj->ops->step(bj, b)) < 0)
                return body_failed(bj, k);
        if (bj->phase == BODY_STREAMED && k == 0)
                bj->rj.ss.ended = true;
        if (bj->phase == BODY_STREAMED)
                return k == 0 ? SH_LOOP_JOB_DONE : b->len >= bj->rj.want ? SH_LOOP_JOB_PAUSE : 1;
        if (k == 0 && bj->phase == BODY_KEPT)
                return sh_request_job_whole(&bj->rj, bj->type);
        if (k == 0) {
                sh_buf_done(&bj->count);
                if ((k = bj->ops->again(bj, &bj->rj.ss.b)) < 0)
                        return body_failed(bj, k);
        } else if (bj->phase == BODY_COUNTED || b->len <= bj->head) {
                return 1;
        } else if (bj->ops->again) {
                bj->phase = BODY_COUNTED;
                sh_buf_done(b);
                return 1;
        }
        bj->phase = BODY_STREAMED;
        return sh_request_job_stream(&bj->rj, bj->block, bj->type);
}

bool sh_body_job_start(sh_body_job *bj, sh_request *r, sh_loop *loop, const sh_pending_ops *ops,
                       const sh_body_job_ops *bops, const char *what)
{
        bj->ops = bops;
        bj->phase = BODY_KEPT;
        return sh_request_job_start(&bj->rj, r, loop, ops, body_step, what);
}

void sh_body_job_free(sh_body_job *bj)
{
        sh_request_job_free(&bj->rj);
        sh_buf_done(&bj->count);
}

/* ---- an answer that waits ------------------------------------------------------------- */

static void request_job_held(sh_waiter *w)
{
        sh_request_job *rj = (sh_request_job *)((char *)w - offsetof(sh_request_job, held));
        sh_request *r = sh_request_job_request(rj);

        if (r)
                sh_reply(r, rj->held_status, TAKE_PTR(rj->held_resp));
        sh_request_job_done(rj);
}

sh_waiter *sh_request_job_hold(sh_request_job *rj, unsigned status, sh_response *resp)
{
        rj->held.done = request_job_held;
        rj->held_status = status;
        rj->held_resp = resp;
        return &rj->held;
}

static void held_release(void *data)
{
        sh_request_job_free(data);
        free(data);
}

static const sh_pending_ops held_ops = {.gone = sh_request_job_op_gone, .release = held_release};

sh_waiter *sh_request_hold(sh_request *r, unsigned status, sh_response *resp)
{
        sh_request_job *rj = calloc(1, sizeof(*rj));

        if (!rj || !(rj->tok = sh_request_wait(r, &held_ops, rj))) {
                free(rj);
                sh_reply(r, status, resp);
                return NULL;
        }
        return sh_request_job_hold(rj, status, resp);
}
