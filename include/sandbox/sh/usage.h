/* usage.h: what a sandbox uses of its limits, sampled (the /v1 surface's execd metrics): its
 * cgroup's CPU time over the last period as a share of its CPU limit, and its memory, read by a
 * loop timer once a period while someone asks. A sampler nobody asked for a while (idle_ms),
 * and for which nobody waits, stops; the next ask starts it again. Nothing ever waits on the
 * loop: a sample is at hand, or the first one comes a period after the ask. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sh/cgroup.h"
#include "sh/loop.h"
#include "sh/sandbox.h"

#define SH_USAGE_PERIOD_MS 1000  /* a sandbox's sampler: one reading a second */
#define SH_USAGE_IDLE_MS   60000 /* ... stopped after a minute without an ask */

typedef struct sh_usage {
        uint64_t cpu_max_milli; /* the CPU limit, cores x 1000 */
        double cpu_pct;         /* the use over the last period, a share of the limit: 0-100 */
        uint64_t memory_max;    /* bytes */
        uint64_t memory_used;   /* bytes, at most memory_max (when there is one) */
        uint64_t wall_ms;       /* when it was read (the wall clock) */
} sh_usage;

/* used_ns of CPU time over interval_ms as a share of cpu_max_milli, 0-100 (0 without a limit or
 * an interval). Pure. */
double sh_usage_cpu_pct(uint64_t used_ns, uint64_t interval_ms, uint64_t cpu_max_milli);

typedef struct sh_sampler sh_sampler;

/* After each period: u the newest sample (NULL: none yet, the first period is not over or the
 * readings fail). Returns whether someone of the caller's still waits on the sampler: it then
 * runs on however long nobody asked. */
typedef bool (*sh_sampler_fn)(void *data, const sh_usage *u);

typedef struct sh_sampler_opts {
        uint64_t period_ms, idle_ms;
        /* One reading: the CPU time used so far (a counter), the memory in use. 0, or -1 with
         * err (logged; the sample is not updated). */
        int (*read)(void *src, sh_cg_usage *u, sh_error **err);
        void *src;
        uint64_t cpu_max_milli, memory_max;
        const char *log_id; /* copied */
} sh_sampler_opts;

/* A sampler, stopped until asked. NULL when out of memory. */
sh_sampler *sh_sampler_new(sh_loop *loop, const sh_sampler_opts *o, sh_sampler_fn fn, void *data);
/* The sampler of sb's cgroup and limits (SH_USAGE_PERIOD_MS, SH_USAGE_IDLE_MS), which holds a
 * reference of sb until it is freed. */
sh_sampler *sh_sandbox_sampler(sh_sandbox *sb, sh_sampler_fn fn, void *data);
/* Someone asks: the sampler runs from now on (started if it was stopped: a first reading now)
 * and its idle time starts again. *ret: the newest sample (valid until the next period), or
 * NULL (fn tells of the first one). 0, or -ENOMEM when it cannot run. */
int sh_sampler_ask(sh_sampler *s, const sh_usage **ret);
bool sh_sampler_running(const sh_sampler *s);
void sh_sampler_free(sh_sampler *s); /* accepts NULL */
