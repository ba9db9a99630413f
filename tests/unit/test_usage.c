/* test_usage.c: a sandbox's use of its limits, sampled (src/sandbox/usage.c): the CPU share of
 * two readings a period apart, the memory within its limit, the first sample a period after
 * the first ask, and a sampler that stops when nobody asked for a while and nobody waits, on a
 * loop of the test's with readings of its own. */
#include <check.h>
#include <string.h>

#include "sh/usage.h"
#include "unit.h"

#define PERIOD_MS 10
#define IDLE_MS   40
#define SAFETY_MS 2000 /* every loop run is bounded by a timer that fails the test */

/* The readings the sampler is given, and what it told. */
typedef struct fake {
        uint64_t cpu_ns, mem;
        uint64_t cpu_step; /* added to cpu_ns at each reading */
        bool fail;
        unsigned reads, ticks, samples;
        sh_usage last;
        bool waiting;        /* what the tick answers: someone waits */
        unsigned stop_after; /* stop the loop at this many ticks (0: never) */
        sh_loop *loop;
} fake;

static int fake_read(void *src, sh_cg_usage *u, sh_error **err)
{
        fake *f = src;

        f->reads++;
        if (f->fail)
                return sh_error_new(err, SH_E_INTERNAL, "no reading");
        f->cpu_ns += f->cpu_step;
        u->cpu_ns = f->cpu_ns;
        u->mem_bytes = f->mem;
        return 0;
}

static bool fake_tick(void *data, const sh_usage *u)
{
        fake *f = data;

        f->ticks++;
        if (u) {
                f->samples++;
                f->last = *u;
        }
        if (f->stop_after && f->ticks == f->stop_after)
                sh_loop_stop(f->loop);
        return f->waiting;
}

static sh_sampler *sampler_of(fake *f, sh_loop *loop)
{
        const sh_sampler_opts o = {.period_ms = PERIOD_MS,
                                   .idle_ms = IDLE_MS,
                                   .read = fake_read,
                                   .src = f,
                                   .cpu_max_milli = 500,
                                   .memory_max = 1000,
                                   .log_id = "test"};
        sh_sampler *s = sh_sampler_new(loop, &o, fake_tick, f);

        f->loop = loop;
        ck_assert_ptr_nonnull(s);
        return s;
}

static void on_safety(sh_loop *l, sh_timer *t, void *data)
{
        (void)t;
        *(bool *)data = true;
        sh_loop_stop(l);
}

/* Run until the fake stops the loop (or the sampler stops and nothing is left to run). */
static void run(sh_loop *l)
{
        bool hit = false;
        sh_timer *safety = sh_loop_add_timer(l, SAFETY_MS, on_safety, &hit);

        ck_assert_ptr_nonnull(safety);
        ck_assert_int_eq(sh_loop_run(l), 0);
        ck_assert_msg(!hit, "the loop ran into the %u ms safety timer", SAFETY_MS);
        sh_loop_cancel_timer(l, safety);
}

START_TEST(the_cpu_share_is_of_the_limit_and_at_most_100)
{
        /* 250 ms of CPU in a second, half a core: 50 % of the limit */
        ck_assert_double_eq_tol(sh_usage_cpu_pct(250000000, 1000, 500), 50.0, 1e-9);
        ck_assert_double_eq_tol(sh_usage_cpu_pct(2000000000, 1000, 1000), 100.0, 1e-9);
        ck_assert_double_eq(sh_usage_cpu_pct(1000, 1000, 0), 0);
        ck_assert_double_eq(sh_usage_cpu_pct(1000, 0, 1000), 0);
}
END_TEST

START_TEST(the_first_sample_comes_a_period_after_the_first_ask)
{
        sh_loop *l;
        fake f = {.cpu_step = 0, .mem = 400, .waiting = true, .stop_after = 1};
        const sh_usage *u = &f.last;
        sh_sampler *s;

        ck_assert_int_eq(sh_loop_new(&l), 0);
        s = sampler_of(&f, l);
        ck_assert(!sh_sampler_running(s));
        ck_assert_int_eq(sh_sampler_ask(s, &u), 0);
        ck_assert_ptr_null(u); /* one reading: no interval yet */
        ck_assert(sh_sampler_running(s));
        run(l);
        ck_assert_uint_eq(f.samples, 1);
        ck_assert_uint_eq(f.last.memory_used, 400);
        ck_assert_uint_eq(f.last.memory_max, 1000);
        ck_assert_uint_eq(f.last.cpu_max_milli, 500);
        ck_assert_uint_gt(f.last.wall_ms, 0);
        /* now an ask has it at once */
        ck_assert_int_eq(sh_sampler_ask(s, &u), 0);
        ck_assert_ptr_nonnull(u);
        sh_sampler_free(s);
        sh_loop_free(l);
}
END_TEST

START_TEST(memory_over_the_limit_is_the_limit_and_a_counter_going_back_is_idle)
{
        sh_loop *l;
        fake f = {.cpu_ns = 1000000000, .mem = 5000, .waiting = true, .stop_after = 1};
        const sh_usage *u;
        sh_sampler *s;

        ck_assert_int_eq(sh_loop_new(&l), 0);
        s = sampler_of(&f, l);
        ck_assert_int_eq(sh_sampler_ask(s, &u), 0);
        f.cpu_ns = 0; /* the next reading is lower than the first */
        run(l);
        ck_assert_uint_eq(f.samples, 1);
        ck_assert_uint_eq(f.last.memory_used, 1000);
        ck_assert_double_eq(f.last.cpu_pct, 0);
        sh_sampler_free(s);
        sh_loop_free(l);
}
END_TEST

START_TEST(failed_readings_make_no_sample_and_the_sampler_goes_on)
{
        sh_loop *l;
        fake f = {.fail = true, .waiting = true, .stop_after = 3};
        const sh_usage *u;
        sh_sampler *s;

        ck_assert_int_eq(sh_loop_new(&l), 0);
        s = sampler_of(&f, l);
        ck_assert_int_eq(sh_sampler_ask(s, &u), 0);
        run(l);
        ck_assert_uint_eq(f.ticks, 3);
        ck_assert_uint_eq(f.samples, 0);
        ck_assert(sh_sampler_running(s));
        sh_sampler_free(s);
        sh_loop_free(l);
}
END_TEST

static void stop_when_stopped(sh_loop *l, sh_timer *t, void *data)
{
        sh_sampler *s = data;

        (void)t;
        if (!sh_sampler_running(s))
                sh_loop_stop(l);
        else
                ck_assert_ptr_nonnull(sh_loop_add_timer(l, PERIOD_MS, stop_when_stopped, s));
}

START_TEST(a_sampler_nobody_asked_and_nobody_waits_on_stops_and_an_ask_starts_it)
{
        sh_loop *l;
        fake f = {.cpu_step = 1000000, .waiting = false};
        const sh_usage *u;
        sh_sampler *s;
        uint64_t asked;
        unsigned reads;

        ck_assert_int_eq(sh_loop_new(&l), 0);
        s = sampler_of(&f, l);
        asked = sh_now_ms();
        ck_assert_int_eq(sh_sampler_ask(s, &u), 0);
        ck_assert_ptr_nonnull(sh_loop_add_timer(l, PERIOD_MS, stop_when_stopped, s));
        run(l);
        ck_assert(!sh_sampler_running(s));
        ck_assert_uint_ge(sh_now_ms() - asked, IDLE_MS); /* never before its idle time */
        reads = f.reads;
        /* the next ask starts afresh: a reading now, no sample until a period later */
        ck_assert_int_eq(sh_sampler_ask(s, &u), 0);
        ck_assert_ptr_null(u);
        ck_assert_uint_eq(f.reads, reads + 1);
        ck_assert(sh_sampler_running(s));
        sh_sampler_free(s);
        sh_loop_free(l);
}
END_TEST

START_TEST(a_sampler_someone_waits_on_runs_past_the_idle_time)
{
        sh_loop *l;
        fake f = {.waiting = true, .stop_after = 3 * IDLE_MS / PERIOD_MS};
        const sh_usage *u;
        sh_sampler *s;

        ck_assert_int_eq(sh_loop_new(&l), 0);
        s = sampler_of(&f, l);
        ck_assert_int_eq(sh_sampler_ask(s, &u), 0);
        run(l);
        ck_assert(sh_sampler_running(s));
        sh_sampler_free(s);
        sh_loop_free(l);
}
END_TEST

static Suite *usage_suite(void)
{
        Suite *s = suite_create("usage");
        TCase *tc = tcase_create("sampler");

        tcase_add_test(tc, the_cpu_share_is_of_the_limit_and_at_most_100);
        tcase_add_test(tc, the_first_sample_comes_a_period_after_the_first_ask);
        tcase_add_test(tc, memory_over_the_limit_is_the_limit_and_a_counter_going_back_is_idle);
        tcase_add_test(tc, failed_readings_make_no_sample_and_the_sampler_goes_on);
        tcase_add_test(tc, a_sampler_nobody_asked_and_nobody_waits_on_stops_and_an_ask_starts_it);
        tcase_add_test(tc, a_sampler_someone_waits_on_runs_past_the_idle_time);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(usage_suite());
}
