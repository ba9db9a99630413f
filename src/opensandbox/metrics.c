/* metrics.c: a sandbox's execd metrics (OPENSANDBOX.md section 3.1): GET /metrics and GET
 * /metrics/watch from the sandbox's own cgroup (v1 and v2, sh_cgroup_usage): cpu_count its CPU
 * limit in cores, cpu_used_pct its use over the last second as a share of that limit,
 * mem_total_mib its memory limit, mem_used_mib its use. A loop timer samples once a second
 * each sandbox that has been asked within the last minute (or is watched): no request ever
 * waits on the loop; the first one waits (a pending answer) for the first full second. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "execd.h"
#include "sh/capability.h"
#include "sh/cgroup.h"

SH_CAPABILITY(os_metrics, "opensandbox.metrics")

#define SAMPLE_MS    1000
#define IDLE_STOP_MS 60000       /* a sampler nobody asked for this long stops */
#define WATCH_QUEUED (64 * 1024) /* a watcher that does not read skips samples past this */
#define WAITERS_MAX  64          /* GET /metrics waiting for a first sample, per sandbox */

/* A GET /metrics waiting for the first sample, or a watch's stream of samples. */
typedef struct waiter waiter;
struct waiter {
        sh_pending *tok;      /* GET /metrics: the request's answer, until given or gone */
        sh_queued_stream *qs; /* a watch: its stream, until the sandbox goes */
        os_metrics *m;        /* NULL once the sandbox is gone */
        SH_LIST_FIELDS(waiter, all);
};

struct os_metrics {
        os_execd *x;
        sh_loop *loop;
        char log_id[SH_ID_LEN + 1];
        sh_timer *t;
        bool have_prev, have_sample;
        uint64_t prev_cpu_ns, prev_ms; /* monotonic ms */
        double cpu_pct, mem_used_mib;
        uint64_t sample_wall_ms;
        uint64_t asked_ms;
        waiter *waiters; /* GET /metrics before the first sample */
        unsigned n_waiters;
        waiter *watchers;
};

/* ---- one sample ------------------------------------------------------------------------------- */

static double cores(const os_execd *x)
{
        sh_sandbox *sb = os_record_sandbox(x->rec);

        return sb ? (double)sh_sandbox_cpu_max_milli(sb) / 1000.0 : 0;
}

static double mem_total_mib(const os_execd *x)
{
        sh_sandbox *sb = os_record_sandbox(x->rec);

        return sb ? (double)sh_sandbox_memory_max(sb) / (1024.0 * 1024.0) : 0;
}

static cJSON *sample_json(const os_metrics *m)
{
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddNumberToObject(o, "cpu_count", cores(m->x)) ||
            !cJSON_AddNumberToObject(o, "cpu_used_pct", m->cpu_pct) ||
            !cJSON_AddNumberToObject(o, "mem_total_mib", mem_total_mib(m->x)) ||
            !cJSON_AddNumberToObject(o, "mem_used_mib", m->mem_used_mib) ||
            !cJSON_AddNumberToObject(o, "timestamp", (double)m->sample_wall_ms)) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

/* Read the cgroup's counters: the CPU over the interval since the previous reading. */
static void take_sample(os_metrics *m)
{
        sh_sandbox *sb = os_record_sandbox(m->x->rec);
        struct sh_cgroup *cg = sb ? sh_sandbox_cgroup(sb) : NULL;
        uint64_t now = sh_now_ms();
        sh_cg_usage u;
        sh_error *err = NULL;
        double c = cores(m->x), total = mem_total_mib(m->x);

        if (!cg || sh_cgroup_usage(cg, &u, &err) < 0) {
                log_warn("metrics-read-failed", m->log_id, "%s, ignoring",
                         err && err->msg ? err->msg : "the sandbox has no cgroup");
                sh_error_release(&err);
                return;
        }
        if (m->have_prev && now > m->prev_ms) {
                /* a counter that went back (a helper's time left with it) counts as idle */
                double used = u.cpu_ns > m->prev_cpu_ns ? (double)(u.cpu_ns - m->prev_cpu_ns) : 0;
                double pct = c > 0 ? used / ((double)(now - m->prev_ms) * 1e6) / c * 100.0 : 0;

                m->cpu_pct = pct > 100.0 ? 100.0 : pct;
                m->have_sample = true;
        }
        m->mem_used_mib = (double)u.mem_bytes / (1024.0 * 1024.0);
        if (total > 0 && m->mem_used_mib > total)
                m->mem_used_mib = total;
        m->sample_wall_ms = os_now_wall_ms();
        m->prev_cpu_ns = u.cpu_ns;
        m->prev_ms = now;
        m->have_prev = true;
}

/* ---- waiters and watchers ----------------------------------------------------------------------- */

static void waiter_unlink(waiter *w)
{
        os_metrics *m = w->m;

        if (!m)
                return;
        if (w->qs) {
                SH_LIST_REMOVE(all, m->watchers, w);
        } else {
                SH_LIST_REMOVE(all, m->waiters, w);
                m->n_waiters--;
        }
        w->m = NULL;
}

static void waiter_gone(void *data)
{
        waiter *w = data;

        waiter_unlink(w);
        sh_pending_release(TAKE_PTR(w->tok));
}

static void watcher_gone(void *data)
{
        waiter *w = data;

        waiter_unlink(w);
        sh_queued_stream_release(TAKE_PTR(w->qs));
}

static void waiter_release(void *data)
{
        waiter *w = data;

        waiter_unlink(w);
        free(w);
}

static const sh_pending_ops waiter_ops = {.gone = waiter_gone, .release = waiter_release};
static const sh_queued_stream_ops watch_ops = {.gone = watcher_gone, .release = waiter_release};
static const sh_queued_stream_opts watch_opts = {.block = 4096};

/* Each watcher gets the sample as one JSON line (unless it is too far behind). */
static void feed_watchers(os_metrics *m)
{
        waiter *w, *next;
        char *line = NULL;
        sh_buf *q;
        cJSON *o;

        if (!m->watchers || !m->have_sample || !(o = sample_json(m)))
                return;
        line = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!line)
                return;
        for (w = m->watchers; w; w = next) {
                next = w->all_next;
                if (sh_queued_stream_unread(w->qs) > WATCH_QUEUED)
                        continue; /* a client that does not read skips samples */
                q = sh_queued_stream_queue(w->qs);
                if (sh_buf_append(q, line, strlen(line)) == 0 && sh_buf_append(q, "\n", 1) == 0)
                        sh_queued_stream_pushed(w->qs);
        }
        free(line);
}

static void answer_waiters(os_metrics *m)
{
        waiter *w;
        sh_request *r;

        while ((w = m->waiters)) {
                waiter_unlink(w);
                r = sh_pending_request(w->tok);
                if (r)
                        os_reply_json(r, 200, sample_json(m));
                sh_pending_release(TAKE_PTR(w->tok));
        }
}

static void on_sample(sh_loop *l, sh_timer *t, void *data)
{
        os_metrics *m = data;

        m->t = NULL;
        take_sample(m);
        if (m->have_sample) {
                answer_waiters(m);
                feed_watchers(m);
        }
        /* nobody asked for a minute and nobody watches: stop (the next ask starts again) */
        if (!m->watchers && !m->waiters && sh_now_ms() - m->asked_ms > IDLE_STOP_MS) {
                m->have_prev = m->have_sample = false;
                return;
        }
        m->t = sh_loop_add_timer(l, SAMPLE_MS, on_sample, m);
        if (!m->t)
                log_error("metrics-timer", m->log_id, "out of memory: sampling stops");
}

/* The sandbox's sampler, started if it does not run. */
static os_metrics *sampler(os_record *rec)
{
        os_execd *x = os_execd_of(rec);
        os_metrics *m;

        if (!x)
                return NULL;
        if (!(m = x->metrics)) {
                m = calloc(1, sizeof(*m));
                if (!m)
                        return NULL;
                m->x = x;
                m->loop = rec->ctx->loop;
                snprintf(m->log_id, sizeof(m->log_id), "%s", rec->id);
                x->metrics = m;
        }
        m->asked_ms = sh_now_ms();
        if (!m->t) {
                take_sample(m);
                m->t = sh_loop_add_timer(m->loop, SAMPLE_MS, on_sample, m);
                if (!m->t)
                        return NULL;
        }
        return m;
}

void os_metrics_gone(os_execd *x)
{
        os_metrics *m = x->metrics;
        waiter *w;
        sh_request *r;

        if (!m)
                return;
        sh_loop_cancel_timer(m->loop, m->t);
        while ((w = m->waiters)) {
                waiter_unlink(w);
                r = sh_pending_request(w->tok);
                if (r)
                        os_reply_error(r, 404, "SANDBOX_NOT_FOUND", "the sandbox was deleted");
                sh_pending_release(TAKE_PTR(w->tok));
        }
        while ((w = m->watchers)) {
                waiter_unlink(w);
                sh_queued_stream_end(w->qs);
                sh_queued_stream_release(TAKE_PTR(w->qs));
        }
        x->metrics = NULL;
        free(m);
}

/* ---- the routes ------------------------------------------------------------------------------- */

static void api_metrics(sh_request *r)
{
        os_metrics *m = sampler(os_request_record(r));
        waiter *w;

        if (!m) {
                os_reply_error(r, 500, OS_RUNTIME, "cannot sample the sandbox's metrics");
                return;
        }
        if (m->have_sample) {
                os_reply_json(r, 200, sample_json(m));
                return;
        }
        /* The first ask: answered once a full second has been measured. */
        if (m->n_waiters >= WAITERS_MAX || !(w = calloc(1, sizeof(*w)))) {
                os_reply_error(r, 503, "UNAVAILABLE", "too many metrics requests at once");
                return;
        }
        w->tok = sh_request_wait(r, &waiter_ops, w);
        if (!w->tok) {
                free(w);
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        w->m = m;
        SH_LIST_PREPEND(all, m->waiters, w);
        m->n_waiters++;
}

static void api_watch(sh_request *r)
{
        os_metrics *m = sampler(os_request_record(r));
        sh_response *resp;
        waiter *w;

        if (!m || !(w = calloc(1, sizeof(*w)))) {
                os_reply_error(r, 500, OS_RUNTIME, "cannot sample the sandbox's metrics");
                return;
        }
        w->qs = sh_queued_stream_new(r, m->loop, &watch_ops, &watch_opts, w);
        resp = w->qs ? sh_queued_stream_response(w->qs) : NULL;
        if (!resp) {
                if (w->qs)
                        sh_queued_stream_release(TAKE_PTR(w->qs)); /* frees w with the request */
                else
                        free(w);
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        w->m = m;
        SH_LIST_PREPEND(all, m->watchers, w);
        sh_response_header(resp, "Content-Type", "text/event-stream");
        sh_response_header(resp, "Cache-Control", "no-cache");
        sh_response_header(resp, "X-Accel-Buffering", "no");
        sh_reply(r, 200, resp);
}

const sh_route os_metrics_routes[] = {
        {OS_EXECD_PATH "/metrics", SH_M_GET, NULL, api_metrics, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/metrics", OS_EXECD_METHODS, NULL, os_execd_wrong_method, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/metrics/watch", SH_M_GET, NULL, api_watch, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/metrics/watch", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
};
const size_t os_metrics_n_routes = ARRAY_SIZE(os_metrics_routes);
