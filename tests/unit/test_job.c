/* test_job.c: jobs of the loop run in slices (sh/job.h): a slice ends at its budget of steps or
 * time, or at a pause; the next slice comes from the loop, after what else is due; a job that
 * said DONE or was stopped is not stepped again. A poll of the loop ends once: when its
 * condition holds, fails or its time runs out, never inside its start, never once stopped. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "sh/job.h"
#include "unit.h"

#define SAFETY_MS 2000 /* every loop run is bounded by a timer that fails the test */

typedef struct counter {
        unsigned calls;
        unsigned done_at;  /* the call that says DONE (0: never) */
        unsigned pause_at; /* the call that says PAUSE (0: never) */
        int cost;          /* of every other call */
        bool spin;         /* each call waits for the clock to move */
        unsigned stalled;
        sh_loop *stop_loop; /* stopped at DONE */
} counter;

static int count_step(void *data)
{
        counter *c = data;

        c->calls++;
        if (c->spin) {
                uint64_t t = sh_now_ns();

                while (sh_now_ns() == t)
                        ;
        }
        if (c->calls == c->done_at) {
                if (c->stop_loop)
                        sh_loop_stop(c->stop_loop);
                return SH_LOOP_JOB_DONE;
        }
        if (c->calls == c->pause_at)
                return SH_LOOP_JOB_PAUSE;
        return c->cost;
}

static void count_stalled(void *data)
{
        ((counter *)data)->stalled++;
}

static void on_safety(sh_loop *l, sh_timer *t, void *data)
{
        (void)t;
        *(bool *)data = true;
        sh_loop_stop(l);
}

static void run_within(sh_loop *l, unsigned ms, bool *hit)
{
        sh_timer *safety = sh_loop_add_timer(l, ms, on_safety, hit);

        ck_assert_ptr_nonnull(safety);
        ck_assert_int_eq(sh_loop_run(l), 0);
        if (!*hit)
                sh_loop_cancel_timer(l, safety);
}

START_TEST(test_a_slice_ends_after_its_budget_of_steps)
{
        counter c = {.cost = 1};
        sh_loop_job j = {.step = count_step, .data = &c, .steps = 10, .ns = UINT64_MAX};

        ck_assert_int_eq(sh_loop_job_slice(&j), 1);
        ck_assert_uint_eq(c.calls, 10);
}
END_TEST

START_TEST(test_a_step_is_charged_what_it_says_it_cost)
{
        counter c = {.cost = 4};
        sh_loop_job j = {.step = count_step, .data = &c, .steps = 10, .ns = UINT64_MAX};

        ck_assert_int_eq(sh_loop_job_slice(&j), 1);
        ck_assert_uint_eq(c.calls, 3); /* 4 + 4 + 4 >= 10 */
}
END_TEST

START_TEST(test_a_slice_without_a_budget_takes_the_default_steps)
{
        counter c = {.cost = 1};
        sh_loop_job j = {.step = count_step, .data = &c, .ns = UINT64_MAX};

        ck_assert_int_eq(sh_loop_job_slice(&j), 1);
        ck_assert_uint_eq(c.calls, SH_LOOP_JOB_STEPS);
}
END_TEST

START_TEST(test_a_slice_ends_when_its_time_is_spent)
{
        counter c = {.cost = 1, .spin = true};
        sh_loop_job j = {.step = count_step, .data = &c, .steps = 1000000, .ns = 1};

        ck_assert_int_eq(sh_loop_job_slice(&j), 1);
        ck_assert_uint_eq(c.calls, 1);
}
END_TEST

START_TEST(test_a_pause_ends_the_slice_with_more_to_do)
{
        counter c = {.cost = 1, .pause_at = 3};
        sh_loop_job j = {.step = count_step, .data = &c, .steps = 100, .ns = UINT64_MAX};

        ck_assert_int_eq(sh_loop_job_slice(&j), 1);
        ck_assert_uint_eq(c.calls, 3);
        ck_assert_int_eq(sh_loop_job_slice(&j), 1);
        ck_assert_uint_eq(c.calls, 103);
}
END_TEST

START_TEST(test_done_ends_the_job)
{
        counter c = {.cost = 1, .done_at = 5};
        sh_loop_job j = {.step = count_step, .data = &c, .steps = 100, .ns = UINT64_MAX};

        ck_assert_int_eq(sh_loop_job_slice(&j), 0);
        ck_assert_uint_eq(c.calls, 5);
}
END_TEST

/* A timer due now, recorded when it fires: the loop served it between two slices. */
static void on_other(sh_loop *l, sh_timer *t, void *data)
{
        counter *c = data;

        (void)l;
        (void)t;
        c->stalled = c->calls; /* the calls made before it ran */
}

START_TEST(test_a_run_slices_from_the_loop_with_other_work_in_between)
{
        sh_loop *l;
        counter c = {.cost = 1, .done_at = 25};
        sh_loop_job j = {.step = count_step, .data = &c, .steps = 10, .ns = UINT64_MAX};
        bool hit = false;

        ck_assert_int_eq(sh_loop_new(&l), 0);
        c.stop_loop = l;
        j.loop = l;
        c.stalled = UINT32_MAX;
        ck_assert_ptr_nonnull(sh_loop_add_timer(l, 0, on_other, &c));
        sh_loop_job_run(&j);
        ck_assert_uint_eq(c.calls, 10); /* the first slice now */
        run_within(l, SAFETY_MS, &hit);
        ck_assert(!hit);
        ck_assert_uint_eq(c.calls, 25);
        /* the other timer ran after the first slice, before the job was done */
        ck_assert_uint_ge(c.stalled, 10);
        ck_assert_uint_lt(c.stalled, 25);
        sh_loop_free(l);
}
END_TEST

START_TEST(test_a_stopped_job_is_not_stepped_again)
{
        sh_loop *l;
        counter c = {.cost = 1};
        sh_loop_job j = {.step = count_step,
                         .stalled = count_stalled,
                         .data = &c,
                         .steps = 10,
                         .ns = UINT64_MAX};
        bool hit = false;

        ck_assert_int_eq(sh_loop_new(&l), 0);
        j.loop = l;
        sh_loop_job_run(&j);
        ck_assert_uint_eq(c.calls, 10);
        sh_loop_job_stop(&j);
        sh_loop_job_stop(&j);    /* twice is fine */
        run_within(l, 50, &hit); /* the safety timer ends this run: nothing else is due */
        ck_assert_uint_eq(c.calls, 10);
        ck_assert_uint_eq(c.stalled, 0);
        sh_loop_free(l);
}
END_TEST

/* ---- polls ---------------------------------------------------------------------------- */

typedef struct poller {
        unsigned checks;
        unsigned holds_at; /* the look that finds the condition (0: never) */
        unsigned fails_at; /* the look that fails (0: never) */
        unsigned ends;
        int result;
        sh_error_kind kind; /* of the end's error */
        bool had_err;
        sh_loop *loop; /* stopped at the end */
} poller;

static int poll_check(void *data, sh_error **err)
{
        poller *p = data;

        p->checks++;
        if (p->checks == p->fails_at)
                return sh_error_new(err, SH_E_UNAVAILABLE, "cannot look");
        return p->checks == p->holds_at;
}

static void poll_end(void *data, int result, const sh_error *err)
{
        poller *p = data;

        p->ends++;
        p->result = result;
        p->had_err = err != NULL;
        p->kind = err ? err->kind : SH_E_INTERNAL;
        sh_loop_stop(p->loop);
}

static sh_loop_poll poll_of(sh_loop *l, poller *p, uint64_t timeout_ms)
{
        p->loop = l;
        return (sh_loop_poll){.loop = l,
                              .check = poll_check,
                              .end = poll_end,
                              .data = p,
                              .timeout_ms = timeout_ms,
                              .gap_max_ms = 4};
}

START_TEST(test_a_poll_ends_once_when_its_condition_holds)
{
        poller p = {.holds_at = 3};
        sh_loop *l;
        sh_loop_poll lp;
        bool hit = false;

        ck_assert_int_eq(sh_loop_new(&l), 0);
        lp = poll_of(l, &p, SAFETY_MS);
        ck_assert_int_eq(sh_loop_poll_start(&lp), 0);
        ck_assert_uint_eq(p.checks, 0); /* never inside the start */
        run_within(l, SAFETY_MS, &hit);
        ck_assert(!hit);
        ck_assert_uint_eq(p.ends, 1);
        ck_assert_int_eq(p.result, 1);
        ck_assert(!p.had_err);
        ck_assert_uint_eq(p.checks, 3);
        sh_loop_free(l);
}
END_TEST

START_TEST(test_a_poll_ends_with_0_once_its_time_runs_out)
{
        poller p = {0};
        sh_loop *l;
        sh_loop_poll lp;
        bool hit = false;

        ck_assert_int_eq(sh_loop_new(&l), 0);
        lp = poll_of(l, &p, 20);
        ck_assert_int_eq(sh_loop_poll_start(&lp), 0);
        run_within(l, SAFETY_MS, &hit);
        ck_assert(!hit);
        ck_assert_uint_eq(p.ends, 1);
        ck_assert_int_eq(p.result, 0);
        ck_assert_uint_ge(p.checks, 2);
        sh_loop_free(l);
}
END_TEST

START_TEST(test_a_failed_look_ends_the_poll_with_its_error)
{
        poller p = {.fails_at = 2};
        sh_loop *l;
        sh_loop_poll lp;
        bool hit = false;

        ck_assert_int_eq(sh_loop_new(&l), 0);
        lp = poll_of(l, &p, SAFETY_MS);
        ck_assert_int_eq(sh_loop_poll_start(&lp), 0);
        run_within(l, SAFETY_MS, &hit);
        ck_assert(!hit);
        ck_assert_uint_eq(p.ends, 1);
        ck_assert_int_lt(p.result, 0);
        ck_assert(p.had_err);
        ck_assert_int_eq(p.kind, SH_E_UNAVAILABLE);
        ck_assert_uint_eq(p.checks, 2);
        sh_loop_free(l);
}
END_TEST

START_TEST(test_a_stopped_poll_never_looks_or_ends)
{
        poller p = {.holds_at = 1};
        sh_loop *l;
        sh_loop_poll lp;
        bool hit = false;

        ck_assert_int_eq(sh_loop_new(&l), 0);
        lp = poll_of(l, &p, SAFETY_MS);
        ck_assert_int_eq(sh_loop_poll_start(&lp), 0);
        sh_loop_poll_stop(&lp);
        sh_loop_poll_stop(&lp); /* twice is fine */
        run_within(l, 30, &hit);
        ck_assert(hit);
        ck_assert_uint_eq(p.checks, 0);
        ck_assert_uint_eq(p.ends, 0);
        sh_loop_free(l);
}
END_TEST

static Suite *job_suite(void)
{
        Suite *s = suite_create("loop_job");
        TCase *tc = tcase_create("slices");

        tcase_add_test(tc, test_a_slice_ends_after_its_budget_of_steps);
        tcase_add_test(tc, test_a_step_is_charged_what_it_says_it_cost);
        tcase_add_test(tc, test_a_slice_without_a_budget_takes_the_default_steps);
        tcase_add_test(tc, test_a_slice_ends_when_its_time_is_spent);
        tcase_add_test(tc, test_a_pause_ends_the_slice_with_more_to_do);
        tcase_add_test(tc, test_done_ends_the_job);
        suite_add_tcase(s, tc);
        tc = tcase_create("loop");
        tcase_add_test(tc, test_a_run_slices_from_the_loop_with_other_work_in_between);
        tcase_add_test(tc, test_a_stopped_job_is_not_stepped_again);
        suite_add_tcase(s, tc);
        tc = tcase_create("polls");
        tcase_add_test(tc, test_a_poll_ends_once_when_its_condition_holds);
        tcase_add_test(tc, test_a_poll_ends_with_0_once_its_time_runs_out);
        tcase_add_test(tc, test_a_failed_look_ends_the_poll_with_its_error);
        tcase_add_test(tc, test_a_stopped_poll_never_looks_or_ends);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(job_suite());
}
