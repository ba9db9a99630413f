/* job.c: jobs of the loop run in slices (sh/job.h): a slice's budget in steps and time, the next
 * slice from a 0 ms timer. */
#include "sh/job.h"

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
