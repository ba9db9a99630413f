/* usage.c: a sandbox's use of its limits sampled from a loop timer (sh/usage.h): two readings
 * of its cgroup a period apart make the CPU share; the sampler stops when nobody asked for a
 * while and nobody waits. */
#include "sh/usage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "sandbox-internal.h"
#include "sh/log.h"

struct sh_sampler {
        sh_loop *loop;
        sh_sampler_opts o;
        char log_id[SH_ID_LEN + 1];
        sh_sandbox *sb; /* sh_sandbox_sampler's: a reference, o.src */
        sh_sampler_fn fn;
        void *data;
        sh_timer *t; /* NULL: stopped */
        bool have_prev, have_sample;
        uint64_t prev_cpu_ns, prev_ms; /* the previous reading (monotonic ms) */
        uint64_t asked_ms;
        sh_usage u;
};

double sh_usage_cpu_pct(uint64_t used_ns, uint64_t interval_ms, uint64_t cpu_max_milli)
{
        double pct;

        if (!interval_ms || !cpu_max_milli)
                return 0;
        pct = (double)used_ns / ((double)interval_ms * 1e6) / ((double)cpu_max_milli / 1000.0) *
              100.0;
        return pct > 100.0 ? 100.0 : pct;
}

/* A reading: the CPU over the interval since the previous one. */
static void take(sh_sampler *s)
{
        uint64_t now = sh_now_ms();
        sh_error *err = NULL;
        sh_cg_usage r;

        if (s->o.read(s->o.src, &r, &err) < 0) {
                log_warn("usage-read-failed", s->log_id, "%s, ignoring",
                         err && err->msg ? err->msg : "");
                sh_error_release(&err);
                return;
        }
        if (s->have_prev && now > s->prev_ms) {
                /* a counter that went back (a helper's time left with it) counts as idle */
                s->u.cpu_pct =
                        sh_usage_cpu_pct(r.cpu_ns > s->prev_cpu_ns ? r.cpu_ns - s->prev_cpu_ns : 0,
                                         now - s->prev_ms, s->o.cpu_max_milli);
                s->have_sample = true;
        }
        s->u.memory_used =
                s->o.memory_max && r.mem_bytes > s->o.memory_max ? s->o.memory_max : r.mem_bytes;
        s->u.wall_ms = sh_now_wall_ms();
        s->prev_cpu_ns = r.cpu_ns;
        s->prev_ms = now;
        s->have_prev = true;
}

static void on_tick(sh_loop *l, sh_timer *t, void *data)
{
        sh_sampler *s = data;
        bool waited_on;

        s->t = NULL;
        take(s);
        waited_on = s->fn(s->data, s->have_sample ? &s->u : NULL);
        if (!waited_on && sh_now_ms() - s->asked_ms > s->o.idle_ms) {
                s->have_prev = s->have_sample = false; /* the next ask starts afresh */
                return;
        }
        s->t = sh_loop_add_timer(l, s->o.period_ms, on_tick, s);
        if (!s->t)
                log_error("usage-timer", s->log_id, "out of memory: sampling stops");
}

sh_sampler *sh_sampler_new(sh_loop *loop, const sh_sampler_opts *o, sh_sampler_fn fn, void *data)
{
        sh_sampler *s = calloc(1, sizeof(*s));

        if (!s)
                return NULL;
        s->loop = loop;
        s->o = *o;
        snprintf(s->log_id, sizeof(s->log_id), "%s", o->log_id ? o->log_id : "");
        s->o.log_id = s->log_id;
        s->fn = fn;
        s->data = data;
        s->u.cpu_max_milli = o->cpu_max_milli;
        s->u.memory_max = o->memory_max;
        return s;
}

static int read_cgroup(void *src, sh_cg_usage *u, sh_error **err)
{
        sh_cgroup *cg = sh_sandbox_cgroup(src);

        if (!cg)
                return sh_error_new(err, SH_E_SANDBOX_NOT_FOUND, "the sandbox has no cgroup");
        return sh_cgroup_usage(cg, u, err);
}

sh_sampler *sh_sandbox_sampler(sh_sandbox *sb, sh_sampler_fn fn, void *data)
{
        const sh_sampler_opts o = {.period_ms = SH_USAGE_PERIOD_MS,
                                   .idle_ms = SH_USAGE_IDLE_MS,
                                   .read = read_cgroup,
                                   .src = sb,
                                   .cpu_max_milli = sh_sandbox_cpu_max_milli(sb),
                                   .memory_max = sh_sandbox_memory_max(sb),
                                   .log_id = sh_sandbox_id(sb)};
        sh_sampler *s = sh_sampler_new(sh_sandbox_host(sb)->exec.loop, &o, fn, data);

        if (s)
                s->sb = sh_sandbox_ref(sb);
        return s;
}

int sh_sampler_ask(sh_sampler *s, const sh_usage **ret)
{
        s->asked_ms = sh_now_ms();
        if (!s->t) {
                take(s);
                s->t = sh_loop_add_timer(s->loop, s->o.period_ms, on_tick, s);
                if (!s->t)
                        return -ENOMEM;
        }
        *ret = s->have_sample ? &s->u : NULL;
        return 0;
}

bool sh_sampler_running(const sh_sampler *s)
{
        return s->t != NULL;
}

void sh_sampler_free(sh_sampler *s)
{
        if (!s)
                return;
        sh_loop_cancel_timer(s->loop, s->t);
        sh_sandbox_unref(s->sb);
        free(s);
}
