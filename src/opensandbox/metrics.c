/* metrics.c: a sandbox's execd metrics (OPENSANDBOX.md section 3.1): GET /metrics and GET
 * /metrics/watch from the sandbox layer's sampler of its cgroup (sh/usage.h: once a second
 * while asked within the last minute or watched): cpu_count its CPU limit in cores,
 * cpu_used_pct its use over the last second as a share of that limit, mem_total_mib its memory
 * limit, mem_used_mib its use. The first ask waits (a pending answer) for the first full
 * second; a watch is a queued stream of one JSON line a sample. */
#include <stdio.h>
#include <string.h>

#include "execd.h"
#include "sh/capability.h"
#include "sh/usage.h"

SH_CAPABILITY(os_metrics, "opensandbox.metrics")

#define WATCH_QUEUED (64 * 1024) /* a watcher that does not read skips samples past this */
#define WAITERS_MAX  64          /* GET /metrics waiting for a first sample, per sandbox */
#define MIB          (1024.0 * 1024.0)

/* Who waits on a sandbox's samples: a GET /metrics for the first one (answered with it), or a
 * watch (a JSON line a sample, until the sandbox goes). */
typedef struct waiter waiter;
struct waiter {
        sh_pending *tok;      /* GET /metrics: the request's answer, until given or gone */
        sh_queued_stream *qs; /* a watch: its stream */
        os_metrics *m;        /* NULL once out of its list */
        SH_LIST_FIELDS(waiter, all);
};

struct os_metrics {
        sh_sampler *s;
        sh_loop *loop;
        waiter *waiters;
        unsigned n_asking; /* of them, GET /metrics */
};

static cJSON *sample_json(const sh_usage *u)
{
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddNumberToObject(o, "cpu_count", (double)u->cpu_max_milli / 1000.0) ||
            !cJSON_AddNumberToObject(o, "cpu_used_pct", u->cpu_pct) ||
            !cJSON_AddNumberToObject(o, "mem_total_mib", (double)u->memory_max / MIB) ||
            !cJSON_AddNumberToObject(o, "mem_used_mib", (double)u->memory_used / MIB) ||
            !cJSON_AddNumberToObject(o, "timestamp", (double)u->wall_ms)) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

/* Out of its list, and the waiter's reference to its request goes (its stream's, or its
 * token's: maybe the last, which frees w). */
static void waiter_done(void *data)
{
        waiter *w = data;

        if (w->m) {
                SH_LIST_REMOVE(all, w->m->waiters, w);
                w->m->n_asking -= !w->qs;
                w->m = NULL;
        }
        if (w->qs)
                sh_queued_stream_release(TAKE_PTR(w->qs));
        else
                sh_pending_release(TAKE_PTR(w->tok));
}

static void waiter_release(void *data)
{
        waiter_done(data);
        free(data);
}

static const sh_pending_ops waiter_ops = {.gone = waiter_done, .release = waiter_release};
static const sh_queued_stream_ops watch_ops = {.gone = waiter_done, .release = waiter_release};
static const sh_queued_stream_opts watch_opts = {.block = 4096};

/* Each sample: the first asks answered with it, each watcher given it as one JSON line (unless
 * it is too far behind: a client that does not read skips samples). */
static bool on_sample(void *data, const sh_usage *u)
{
        os_metrics *m = data;
        waiter *w, *next;
        cJSON *o = u && m->waiters ? sample_json(u) : NULL;
        char *line = o ? cJSON_PrintUnformatted(o) : NULL;
        sh_buf *q;

        for (w = m->waiters; u && w; w = next) {
                next = w->all_next;
                if (w->tok) {
                        if (sh_pending_request(w->tok))
                                os_reply_json(sh_pending_request(w->tok), 200, sample_json(u));
                        waiter_done(w);
                } else if (line && sh_queued_stream_unread(w->qs) <= WATCH_QUEUED) {
                        q = sh_queued_stream_queue(w->qs);
                        if (sh_buf_append(q, line, strlen(line)) == 0 &&
                            sh_buf_append(q, "\n", 1) == 0)
                                sh_queued_stream_pushed(w->qs);
                }
        }
        free(line);
        cJSON_Delete(o);
        return m->waiters != NULL;
}

/* The sandbox's metrics, asked now: its sampler runs. NULL when it cannot. */
static os_metrics *ask(os_record *rec, const sh_usage **u)
{
        os_execd *x = os_execd_of(rec);
        sh_sandbox *sb = os_record_sandbox(rec);
        os_metrics *m;

        if (!x || !sb)
                return NULL;
        if (!(m = x->metrics)) {
                m = calloc(1, sizeof(*m));
                if (!m || !(m->s = sh_sandbox_sampler(sb, on_sample, m))) {
                        free(m);
                        return NULL;
                }
                m->loop = rec->ctx->loop;
                x->metrics = m;
        }
        return sh_sampler_ask(m->s, u) < 0 ? NULL : m;
}

/* The record goes: the first asks are answered 404, the watches end. */
void os_metrics_gone(os_execd *x)
{
        os_metrics *m = x->metrics;
        waiter *w;

        if (!m)
                return;
        sh_sampler_free(m->s);
        while ((w = m->waiters)) {
                if (w->tok && sh_pending_request(w->tok))
                        os_reply_code(sh_pending_request(w->tok), OS_E_SANDBOX_NOT_FOUND,
                                      "the sandbox was deleted");
                if (w->qs)
                        sh_queued_stream_end(w->qs);
                waiter_done(w);
        }
        x->metrics = NULL;
        free(m);
}

/* ---- the routes ------------------------------------------------------------------------------- */

static void api_metrics(sh_request *r)
{
        const sh_usage *u = NULL;
        os_metrics *m = ask(os_request_record(r), &u);
        waiter *w;

        if (!m) {
                os_reply_code(r, OS_E_RUNTIME, "cannot sample the sandbox's metrics");
                return;
        }
        if (u) {
                os_reply_json(r, 200, sample_json(u));
                return;
        }
        /* The first ask: answered once a full second has been measured. */
        if (m->n_asking >= WAITERS_MAX || !(w = calloc(1, sizeof(*w)))) {
                os_reply_code(r, OS_E_UNAVAILABLE, "too many metrics requests at once");
                return;
        }
        w->tok = sh_request_wait(r, &waiter_ops, w);
        if (!w->tok) {
                free(w);
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        w->m = m;
        SH_LIST_PREPEND(all, m->waiters, w);
        m->n_asking++;
}

static void api_watch(sh_request *r)
{
        const sh_usage *u;
        os_metrics *m = ask(os_request_record(r), &u);
        waiter *w;

        if (!m || !(w = calloc(1, sizeof(*w)))) {
                os_reply_code(r, OS_E_RUNTIME, "cannot sample the sandbox's metrics");
                return;
        }
        w->qs = sh_queued_stream_new(r, m->loop, &watch_ops, &watch_opts, w);
        if (!w->qs) {
                free(w);
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        w->m = m;
        SH_LIST_PREPEND(all, m->waiters, w);
        os_reply_event_stream(w->qs);
}

const sh_route os_metrics_routes[] = {
        {OS_EXECD_PATH "/metrics", SH_M_GET, NULL, api_metrics, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/metrics", OS_EXECD_METHODS, NULL, os_execd_wrong_method, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/metrics/watch", SH_M_GET, NULL, api_watch, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/metrics/watch", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
};
const size_t os_metrics_n_routes = ARRAY_SIZE(os_metrics_routes);
