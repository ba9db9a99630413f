/* job.h: a job of the loop run in slices, and a condition waited for from the loop's timers.
 * A job of the loop run in slices: Work that is long only in total (walking 100,000
 * entries, removing a tree in a tmpfs, rewriting a 64 MiB file) is cut into steps, and the steps
 * into slices: a slice runs steps until they have cost `steps` units or taken `ns`, whichever
 * comes first, or a step asks for a pause; between two slices the loop serves everyone else (the
 * next slice is a 0 ms timer). So no job holds the loop longer than one slice and one step,
 * whatever its size, and every job of the daemon draws the same budget (SH_LOOP_JOB_STEPS,
 * SH_LOOP_JOB_NS) unless it says why not.
 *
 * The job knows nothing of requests: a job that answers one (the native walk and disk-usage, the
 * /v1 listings, searches, line-mode downloads, replacements, recursive deletes and many-path
 * requests) holds the request's pending token (sh/http.h), answers from its last step, and is
 * stopped (sh_loop_job_stop) from the token's `gone`. A streamed answer runs one slice each time
 * the transport wants bytes (sh_loop_job_slice, from sh_sliced_stream's slice function). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sh/error.h"
#include "sh/loop.h"

/* A slice's default budget: 2,048 steps (a walker step, a lookup step, an entry removed...) or
 * 5 ms. */
#define SH_LOOP_JOB_STEPS 2048u
#define SH_LOOP_JOB_NS    (5ull * 1000 * 1000)

/* What a step returns besides its cost (> 0: more to do, that many units spent): */
#define SH_LOOP_JOB_DONE  0    /* the job is over: the job is not touched again */
#define SH_LOOP_JOB_PAUSE (-1) /* more to do, but this slice ends here (a buffer is full) */

typedef struct sh_loop_job {
        /* One step of the job: its cost (>= 1), SH_LOOP_JOB_PAUSE or SH_LOOP_JOB_DONE. A step
         * that ends the job (an answer given, an error answered) returns DONE, and may have
         * freed the job by then. */
        int (*step)(void *data);
        /* The loop could not schedule the next slice (out of memory): the job is stopped, and
         * its owner answers. NULL: nothing to tell. */
        void (*stalled)(void *data);
        void *data;
        unsigned steps; /* a slice's budget in units; 0: SH_LOOP_JOB_STEPS */
        uint64_t ns;    /* and in time; 0: SH_LOOP_JOB_NS */
        sh_loop *loop;  /* for sh_loop_job_run */
        /* private */
        sh_timer *t; /* the next slice's, while one waits */
        bool stopped;
} sh_loop_job;

/* One slice now: 1 when there is more to do, 0 when a step said DONE (j may be gone then). */
int sh_loop_job_slice(sh_loop_job *j);

/* Run the job: one slice now, then one slice from the loop each time it comes round, until a
 * step says DONE or sh_loop_job_stop. */
void sh_loop_job_run(sh_loop_job *j);

/* No slice runs any more (accepts a job never run, or stopped already). */
void sh_loop_job_stop(sh_loop_job *j);

/* A condition waited for from the loop's timers, never by sleeping (a cgroup's freeze): looked
 * at first from a 0 ms timer, then 1, 2, 4... ms apart up to `gap_max_ms`, until `check` says
 * it holds or failed, or `timeout_ms` has passed since the start; `end` runs once, from the
 * loop, never inside sh_loop_poll_start. The caller's memory, set before the start. */
typedef struct sh_loop_poll {
        sh_loop *loop;
        /* 1: the condition holds; 0: not yet; < 0: it never will (err set). */
        int (*check)(void *data, sh_error **err);
        /* Once: result 1 (held), 0 (timeout_ms passed first) or < 0 (check failed, err; out of
         * memory for a timer, err NULL). The poll is over: it may be freed. */
        void (*end)(void *data, int result, const sh_error *err);
        void *data;
        uint64_t timeout_ms;
        unsigned gap_max_ms; /* 0: 1 ms */
        /* private */
        sh_timer *t;
        uint64_t deadline_ms;
        unsigned gap_ms;
} sh_loop_poll;

/* 0, or -ENOMEM (nothing started, end not called). */
int sh_loop_poll_start(sh_loop_poll *p);
/* The poll stops (end is not called); accepts one over or never started. */
void sh_loop_poll_stop(sh_loop_poll *p);
