/* job.c: jobs of the loop run in slices (sh/job.h): a slice's budget in steps and time, the next
 * slice from a 0 ms timer; conditions polled from timers further and further apart. */
#include "sh/job.h"

#include <errno.h>
#include <stddef.h>

int sh_loop_job_slice(sh_loop_job *j)
{
        const unsigned steps = j->steps ? j->steps : SH_LOOP_JOB_STEPS;
        const uint64_t ns = j->ns ? j->ns : SH_LOOP_JOB_NS;
        uint64_t start = sh_now_ns(), spent = 0;

        for (;;) {
                int k = j->step(j->data);

                if (k == SH_LOOP_JOB_DONE)
                        return 0; /* j may be gone: not touched again */
                if (k < 0)
                        return 1; /* a pause */
                spent += (unsigned)k;
                if (spent >= steps || sh_now_ns() - start >= ns)
                        return 1;
        }
}

static void job_timer(sh_loop *l, sh_timer *t, void *data);

static void job_next(sh_loop_job *j)
{
        if (j->stopped)
                return;
        j->t = sh_loop_add_timer(j->loop, 0, job_timer, j);
        if (!j->t) {
                j->stopped = true;
                if (j->stalled)
                        j->stalled(j->data);
        }
}

static void job_timer(sh_loop *l, sh_timer *t, void *data)
{
        sh_loop_job *j = data;

        (void)l;
        (void)t;
        j->t = NULL; /* the loop frees a fired timer */
        if (!j->stopped && sh_loop_job_slice(j))
                job_next(j);
}

void sh_loop_job_run(sh_loop_job *j)
{
        j->stopped = false;
        if (sh_loop_job_slice(j))
                job_next(j);
}

void sh_loop_job_stop(sh_loop_job *j)
{
        j->stopped = true;
        if (j->t)
                sh_loop_cancel_timer(j->loop, j->t);
        j->t = NULL;
}

static void poll_tick(sh_loop *l, sh_timer *t, void *data)
{
        sh_loop_poll *p = data;
        sh_error *err = NULL;
        int k;

        (void)t;
        p->t = NULL; /* the loop frees a fired timer */
        k = p->check(p->data, &err);
        if (k == 0 && sh_now_ms() < p->deadline_ms) {
                p->gap_ms = p->gap_ms ? p->gap_ms * 2 : 1;
                if (p->gap_ms > (p->gap_max_ms ? p->gap_max_ms : 1))
                        p->gap_ms = p->gap_max_ms ? p->gap_max_ms : 1;
                p->t = sh_loop_add_timer(l, p->gap_ms, poll_tick, p);
                if (p->t)
                        return;
                k = -ENOMEM;
        }
        p->end(p->data, k > 0 ? 1 : k, err);
        sh_error_release(&err);
}

int sh_loop_poll_start(sh_loop_poll *p)
{
        p->gap_ms = 0;
        p->deadline_ms = sh_now_ms() + p->timeout_ms;
        p->t = sh_loop_add_timer(p->loop, 0, poll_tick, p);
        return p->t ? 0 : -ENOMEM;
}

void sh_loop_poll_stop(sh_loop_poll *p)
{
        sh_loop_cancel_timer(p->loop, p->t);
        p->t = NULL;
}
