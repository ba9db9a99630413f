/* test_loop.c: the event loop: timers (their heap: order, cancel, many), io, deleting ios in
 * callbacks, hooks, stop, signals. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sh/loop.h"
#include "unit.h"

#define SAFETY_MS 2000 /* every loop run is bounded by a timer that fails the test */

static sh_loop *loop;
static int fired[16];
static int n_fired;

static void setup(void)
{
        n_fired = 0;
        memset(fired, 0, sizeof(fired));
        ck_assert_int_eq(sh_loop_new(&loop), 0);
        ck_assert_ptr_nonnull(loop);
}

static void teardown(void)
{
        sh_loop_free(loop);
        loop = NULL;
}

static void on_safety(sh_loop *l, sh_timer *t, void *data)
{
        bool *hit = data;

        *hit = true;
        sh_loop_stop(l);
}

/* Run the loop with a safety timer of `ms`; fails if the safety timer ended it: the run's
 * call timeout (a loop that waits too long fails, nothing is measured). */
static void run_within(unsigned ms)
{
        bool hit = false;
        sh_timer *safety = sh_loop_add_timer(loop, ms, on_safety, &hit);

        ck_assert_ptr_nonnull(safety);
        ck_assert_int_eq(sh_loop_run(loop), 0);
        ck_assert_msg(!hit, "the loop ran into the %u ms safety timer", ms);
        sh_loop_cancel_timer(loop, safety);
}

static void run_bounded(void)
{
        run_within(SAFETY_MS);
}

static void on_record(sh_loop *l, sh_timer *t, void *data)
{
        fired[n_fired++] = (int)(intptr_t)data;
}

static void on_record_and_stop(sh_loop *l, sh_timer *t, void *data)
{
        on_record(l, t, data);
        sh_loop_stop(l);
}

static void make_pipe(int p[2])
{
        ck_assert_int_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
}

/* ---- timers ----------------------------------------------------------------------------- */

START_TEST(test_timers_fire_in_deadline_order)
{
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 30, on_record, (void *)3));
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 10, on_record, (void *)1));
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 50, on_record_and_stop, (void *)5));
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 20, on_record, (void *)2));
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 0, on_record, (void *)0));
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 40, on_record, (void *)4));
        run_bounded();
        ck_assert_int_eq(n_fired, 6);
        for (int i = 0; i < 6; i++)
                ck_assert_int_eq(fired[i], i);
}
END_TEST

START_TEST(test_equal_deadlines_fire_in_insertion_order)
{
        for (int i = 0; i < 5; i++)
                ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 15, on_record, (void *)(intptr_t)i));
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 30, on_record_and_stop, (void *)5));
        run_bounded();
        ck_assert_int_eq(n_fired, 6);
        for (int i = 0; i < 6; i++)
                ck_assert_int_eq(fired[i], i);
}
END_TEST

START_TEST(test_timer_never_fires_early)
{
        uint64_t start = sh_now_ms();

        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 40, on_record_and_stop, (void *)1));
        run_within(1000); /* and not much later: a 1 s safety timer ends a late one */
        ck_assert_int_eq(n_fired, 1);
        ck_assert_uint_ge(sh_now_ms() - start, 40); /* a lower bound: never early */
}
END_TEST

START_TEST(test_cancelled_timer_does_not_fire)
{
        sh_timer *t = sh_loop_add_timer(loop, 10, on_record, (void *)99);

        ck_assert_ptr_nonnull(t);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 40, on_record_and_stop, (void *)1));
        sh_loop_cancel_timer(loop, t);
        sh_loop_cancel_timer(loop, NULL); /* accepted */
        run_bounded();
        ck_assert_int_eq(n_fired, 1);
        ck_assert_int_eq(fired[0], 1);
}
END_TEST

static sh_timer *victim;

static void on_cancel_victim(sh_loop *l, sh_timer *t, void *data)
{
        on_record(l, t, data);
        sh_loop_cancel_timer(l, victim);
        victim = NULL;
}

START_TEST(test_timer_cancelled_from_another_timer_callback)
{
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 5, on_cancel_victim, (void *)1));
        victim = sh_loop_add_timer(loop, 20, on_record, (void *)99);
        ck_assert_ptr_nonnull(victim);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 40, on_record_and_stop, (void *)2));
        run_bounded();
        ck_assert_int_eq(n_fired, 2);
        ck_assert_int_eq(fired[0], 1);
        ck_assert_int_eq(fired[1], 2);
}
END_TEST

START_TEST(test_cancel_due_timer_sharing_deadline_from_callback)
{
        /* both due in the same pass: the first cancels the second, which must not run */
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 10, on_cancel_victim, (void *)1));
        victim = sh_loop_add_timer(loop, 10, on_record, (void *)99);
        ck_assert_ptr_nonnull(victim);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 30, on_record_and_stop, (void *)2));
        run_bounded();
        ck_assert_int_eq(n_fired, 2);
        ck_assert_int_eq(fired[1], 2);
}
END_TEST

static void on_rearm(sh_loop *l, sh_timer *t, void *data)
{
        on_record(l, t, data);
        if (n_fired < 3)
                ck_assert_ptr_nonnull(sh_loop_add_timer(l, 5, on_rearm, (void *)(intptr_t)n_fired));
        else
                sh_loop_stop(l);
}

START_TEST(test_timer_added_from_timer_callback_fires)
{
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 5, on_rearm, (void *)0));
        run_bounded();
        ck_assert_int_eq(n_fired, 3);
        ck_assert_int_eq(fired[0], 0);
        ck_assert_int_eq(fired[1], 1);
        ck_assert_int_eq(fired[2], 2);
}
END_TEST

START_TEST(test_free_with_pending_timers)
{
        /* sh_loop_free cancels what is left (leak-checked under ASan) */
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 100000, on_record, NULL));
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 200000, on_record, NULL));
}
END_TEST

/* ---- io --------------------------------------------------------------------------------- */

typedef struct io_state {
        int calls;
        uint32_t events;
        char buf[16];
        ssize_t got;
        bool delete_self;
        bool stop;
        sh_io *other; /* deleted by whichever callback runs first */
        sh_io **other_slot;
} io_state;

static void on_readable(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        io_state *s = data;

        s->calls++;
        s->events = events;
        if (s->other && s->other_slot && *s->other_slot) {
                sh_loop_del_io(l, *s->other_slot);
                *s->other_slot = NULL;
        }
        if (s->delete_self) {
                sh_loop_del_io(l, io);
                return; /* the data stays unread: level-triggered epoll would report it again */
        }
        s->got = read(fd, s->buf, sizeof(s->buf));
        if (s->stop)
                sh_loop_stop(l);
}

static void on_write_later(sh_loop *l, sh_timer *t, void *data)
{
        int fd = (int)(intptr_t)data;

        ck_assert_int_eq(write(fd, "ping", 4), 4);
}

START_TEST(test_io_handler_gets_readability_on_pipe)
{
        io_state s = {.stop = true};
        int p[2];
        sh_io *io;

        make_pipe(p);
        io = sh_loop_add_io(loop, p[0], EPOLLIN, on_readable, &s);
        ck_assert_ptr_nonnull(io);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 10, on_write_later, (void *)(intptr_t)p[1]));
        run_bounded();
        ck_assert_int_eq(s.calls, 1);
        ck_assert(s.events & EPOLLIN);
        ck_assert_int_eq(s.got, 4);
        ck_assert_mem_eq(s.buf, "ping", 4);
        sh_loop_del_io(loop, io);
        close(p[0]);
        close(p[1]);
}
END_TEST

/* A turn's timers and its fds: a job re-adding its next slice at 0 ms, or due timers past the
 * turn's budget, wait for the fds to be looked at (sh_loop_run: SH_LOOP_TIMERS_NS). */

typedef struct turns {
        int rfd;
        int slices;         /* the job's slices run */
        int slices_at_read; /* ... when the fd's handler first ran (-1: not yet) */
        char order[8];      /* 't' a busy timer, 'i' the fd */
        int n_order;
} turns;

static void on_turns_readable(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        turns *t = data;
        char b[8];

        (void)io;
        (void)events;
        ck_assert_int_gt(read(fd, b, sizeof(b)), 0);
        if (t->slices_at_read < 0)
                t->slices_at_read = t->slices;
        if (t->n_order < (int)sizeof(t->order))
                t->order[t->n_order++] = 'i';
        sh_loop_stop(l);
}

static void on_slice(sh_loop *l, sh_timer *tm, void *data)
{
        turns *t = data;

        (void)tm;
        t->slices++;
        if (t->slices_at_read < 0 && t->slices < 100000)
                ck_assert_ptr_nonnull(sh_loop_add_timer(l, 0, on_slice, t));
}

START_TEST(test_a_timer_readded_at_zero_ms_waits_for_the_fds_ready_meanwhile)
{
        turns t = {.slices_at_read = -1};
        int p[2];
        sh_io *io;

        make_pipe(p);
        ck_assert_int_eq(write(p[1], "x", 1), 1);
        io = sh_loop_add_io(loop, p[0], EPOLLIN, on_turns_readable, &t);
        ck_assert_ptr_nonnull(io);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 0, on_slice, &t));
        run_bounded();
        /* one slice a turn: the fd is served after the first, not once the clock moved on */
        ck_assert_int_eq(t.slices_at_read, 1);
        sh_loop_del_io(loop, io);
        close(p[0]);
        close(p[1]);
}
END_TEST

static void on_busy(sh_loop *l, sh_timer *tm, void *data)
{
        turns *t = data;
        uint64_t end = sh_now_ns() + SH_LOOP_TIMERS_NS + 1000000;

        (void)l;
        (void)tm;
        while (sh_now_ns() < end)
                ;
        if (t->n_order < (int)sizeof(t->order))
                t->order[t->n_order++] = 't';
}

START_TEST(test_due_timers_past_a_turns_budget_wait_for_the_fds)
{
        turns t = {.slices_at_read = -1};
        int p[2];
        sh_io *io;

        make_pipe(p);
        ck_assert_int_eq(write(p[1], "x", 1), 1);
        io = sh_loop_add_io(loop, p[0], EPOLLIN, on_turns_readable, &t);
        ck_assert_ptr_nonnull(io);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 0, on_busy, &t));
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 0, on_busy, &t));
        run_bounded();
        ck_assert_int_eq(t.n_order, 2);
        ck_assert_mem_eq(t.order, "ti", 2); /* the second busy timer waits for the next turn */
        sh_loop_del_io(loop, io);
        close(p[0]);
        close(p[1]);
}
END_TEST

START_TEST(test_io_hangup_is_delivered)
{
        io_state s = {.stop = true};
        int p[2];
        sh_io *io;

        make_pipe(p);
        io = sh_loop_add_io(loop, p[0], EPOLLIN, on_readable, &s);
        ck_assert_ptr_nonnull(io);
        close(p[1]);
        run_bounded();
        ck_assert_int_eq(s.calls, 1);
        ck_assert(s.events & EPOLLHUP);
        ck_assert_int_eq(s.got, 0); /* EOF */
        sh_loop_del_io(loop, io);
        close(p[0]);
}
END_TEST

START_TEST(test_add_io_on_bad_fd_fails)
{
        io_state s = {0};

        errno = 0;
        ck_assert_ptr_null(sh_loop_add_io(loop, -1, EPOLLIN, on_readable, &s));
        ck_assert_int_eq(errno, EBADF);
}
END_TEST

static void on_stop_timer(sh_loop *l, sh_timer *t, void *data)
{
        sh_loop_stop(l);
}

START_TEST(test_io_deleted_inside_its_own_callback)
{
        io_state s = {.delete_self = true};
        int p[2];

        make_pipe(p);
        ck_assert_ptr_nonnull(sh_loop_add_io(loop, p[0], EPOLLIN, on_readable, &s));
        ck_assert_int_eq(write(p[1], "x", 1), 1);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 50, on_stop_timer, NULL));
        run_bounded();
        /* still readable, but deleted after the first call: never called again */
        ck_assert_int_eq(s.calls, 1);
        close(p[0]);
        close(p[1]);
}
END_TEST

START_TEST(test_io_deleted_by_another_callback_in_same_batch)
{
        io_state a = {0}, b = {0};
        sh_io *ia, *ib;
        int pa[2], pb[2];

        make_pipe(pa);
        make_pipe(pb);
        ia = sh_loop_add_io(loop, pa[0], EPOLLIN, on_readable, &a);
        ib = sh_loop_add_io(loop, pb[0], EPOLLIN, on_readable, &b);
        ck_assert_ptr_nonnull(ia);
        ck_assert_ptr_nonnull(ib);
        /* whichever runs first deletes the other (both are ready in one epoll_wait) */
        a.other = ib;
        a.other_slot = &ib;
        b.other = ia;
        b.other_slot = &ia;
        ck_assert_int_eq(write(pa[1], "a", 1), 1);
        ck_assert_int_eq(write(pb[1], "b", 1), 1);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 30, on_stop_timer, NULL));
        run_bounded();
        ck_assert_int_eq(a.calls + b.calls >= 1, 1);
        ck_assert_msg((a.calls == 0) != (b.calls == 0), "both ran: a=%d b=%d", a.calls, b.calls);
        sh_loop_del_io(loop, ia);
        sh_loop_del_io(loop, ib);
        close(pa[0]);
        close(pa[1]);
        close(pb[0]);
        close(pb[1]);
}
END_TEST

static void on_writable(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        io_state *s = data;

        s->calls++;
        s->events = events;
        sh_loop_stop(l);
}

START_TEST(test_mod_io_switches_events)
{
        io_state s = {0};
        int p[2];
        sh_io *io;

        make_pipe(p);
        /* the write end is never readable; switched to EPOLLOUT it is ready at once */
        io = sh_loop_add_io(loop, p[1], EPOLLIN, on_writable, &s);
        ck_assert_ptr_nonnull(io);
        ck_assert_int_eq(sh_loop_mod_io(loop, io, EPOLLOUT), 0);
        run_bounded();
        ck_assert_int_eq(s.calls, 1);
        ck_assert(s.events & EPOLLOUT);
        sh_loop_del_io(loop, io);
        close(p[0]);
        close(p[1]);
}
END_TEST

/* ---- the timers' heap ------------------------------------------------------------------- */

#define MANY 200000 /* with a sorted list (O(n) a timer) adding these took ~10^10 steps */

/* One of many timers: what it asked, and the clock around its adding (its deadline lies in
 * [before + ms, after + ms]). */
typedef struct many_timer {
        sh_timer *t;
        uint64_t ms, before, after;
        bool cancelled;
        int fired; /* its place in the firing order, from 1; 0: not fired */
} many_timer;

static many_timer *many;
static int n_many_fired;
static int *many_order; /* the indices in firing order */

static void on_many(sh_loop *l, sh_timer *t, void *data)
{
        many_timer *m = &many[(intptr_t)data];

        /* no ck_assert on the hot path: each passing one writes Check's location record */
        if (m->fired || m->t != t)
                ck_abort_msg("timer %d fired twice, or as another", (int)(intptr_t)data);
        m->t = NULL;
        m->fired = ++n_many_fired;
        many_order[n_many_fired - 1] = (int)(intptr_t)data;
}

static void add_many(int n, uint64_t spread, unsigned seed)
{
        many = calloc((size_t)n, sizeof(*many));
        many_order = calloc((size_t)n, sizeof(*many_order));
        ck_assert_ptr_nonnull(many);
        ck_assert_ptr_nonnull(many_order);
        n_many_fired = 0;
        srand(seed);
        for (int i = 0; i < n; i++) {
                many[i].ms = (uint64_t)rand() % spread;
                many[i].before = sh_now_ms();
                many[i].t = sh_loop_add_timer(loop, many[i].ms, on_many, (void *)(intptr_t)i);
                many[i].after = sh_now_ms();
                if (!many[i].t)
                        ck_abort_msg("timer %d not added", i);
        }
}

/* Every timer not cancelled fired once, none cancelled did, and in an order their deadlines
 * allow: b after a unless b's deadline was surely earlier; equal ones first in, first out. */
static void check_many(int n)
{
        int expected = 0;

        for (int i = 0; i < n; i++) {
                if (many[i].cancelled ? many[i].fired != 0 : many[i].fired == 0)
                        ck_abort_msg("timer %d: cancelled %d fired %d", i, many[i].cancelled,
                                     many[i].fired);
                expected += !many[i].cancelled;
        }
        ck_assert_int_eq(n_many_fired, expected);
        for (int k = 1; k < n_many_fired; k++) {
                const many_timer *a = &many[many_order[k - 1]], *b = &many[many_order[k]];

                if (b->after + b->ms < a->before + a->ms)
                        ck_abort_msg("timer %d (%llu ms) fired after timer %d (%llu ms)",
                                     many_order[k], (unsigned long long)b->ms, many_order[k - 1],
                                     (unsigned long long)a->ms);
                if (a->before == a->after && b->before == b->after &&
                    a->before + a->ms == b->before + b->ms && many_order[k - 1] > many_order[k])
                        ck_abort_msg("timers %d and %d of one deadline fired last in, first out",
                                     many_order[k - 1], many_order[k]);
        }
        free(many);
        free(many_order);
        many = NULL;
        many_order = NULL;
}

START_TEST(test_many_timers_fire_in_deadline_order)
{
        add_many(MANY, 50, 1);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 60, on_stop_timer, NULL));
        run_within(SAFETY_MS * 10);
        check_many(MANY);
}
END_TEST

START_TEST(test_many_timers_cancelled_in_any_order_never_fire)
{
        /* every third, from the end, then every fifth from the start: the heap's holes filled
         * from its last place, up or down */
        add_many(MANY, 50, 2);
        for (int i = MANY - 1; i >= 0; i -= 3) {
                sh_loop_cancel_timer(loop, many[i].t);
                many[i].t = NULL;
                many[i].cancelled = true;
        }
        for (int i = 0; i < MANY; i += 5)
                if (!many[i].cancelled) {
                        sh_loop_cancel_timer(loop, many[i].t);
                        many[i].t = NULL;
                        many[i].cancelled = true;
                }
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 60, on_stop_timer, NULL));
        run_within(SAFETY_MS * 10);
        check_many(MANY);
}
END_TEST

static void on_cancel_next(sh_loop *l, sh_timer *t, void *data)
{
        int i = (int)(intptr_t)data;

        on_many(l, t, data);
        /* the next one by index, whatever its deadline: wherever it is in the heap */
        if (i + 1 < 1000 && many[i + 1].t && !many[i + 1].cancelled && (i & 1) == 0) {
                sh_loop_cancel_timer(l, many[i + 1].t);
                many[i + 1].t = NULL;
                many[i + 1].cancelled = true;
        }
}

START_TEST(test_timers_cancelled_from_callbacks_in_a_heap_never_fire)
{
        many = calloc(1000, sizeof(*many));
        many_order = calloc(1000, sizeof(*many_order));
        ck_assert_ptr_nonnull(many);
        ck_assert_ptr_nonnull(many_order);
        n_many_fired = 0;
        srand(3);
        for (int i = 0; i < 1000; i++) {
                many[i].ms = (uint64_t)rand() % 30;
                many[i].before = sh_now_ms();
                many[i].t =
                        sh_loop_add_timer(loop, many[i].ms, on_cancel_next, (void *)(intptr_t)i);
                many[i].after = sh_now_ms();
                ck_assert_ptr_nonnull(many[i].t);
        }
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 40, on_stop_timer, NULL));
        run_bounded();
        check_many(1000);
}
END_TEST

/* ---- hooks ------------------------------------------------------------------------------ */

typedef struct hook_state {
        int calls;
        int stop_after;
        int64_t ret;
        int io_calls_seen; /* io_state.calls when the hook ran last */
        io_state *io;
} hook_state;

static int64_t on_hook(sh_loop *l, void *data)
{
        hook_state *h = data;

        h->calls++;
        if (h->io)
                h->io_calls_seen = h->io->calls;
        if (h->stop_after && h->calls >= h->stop_after)
                sh_loop_stop(l);
        return h->ret;
}

START_TEST(test_hook_bounds_the_wait)
{
        hook_state h = {.stop_after = 5, .ret = 20};
        uint64_t start = sh_now_ms();

        /* nothing else is registered: without the hook's bound the loop would sleep until the
         * safety timer */
        ck_assert_int_eq(sh_loop_add_hook(loop, on_hook, &h), 0);
        run_within(SAFETY_MS / 2);
        ck_assert_int_eq(h.calls, 5);
        ck_assert_uint_ge(sh_now_ms() - start, 4 * 20 - 10); /* waited: ms truncation */
}
END_TEST

START_TEST(test_hook_zero_means_poll)
{
        hook_state h = {.stop_after = 50, .ret = 0};

        ck_assert_int_eq(sh_loop_add_hook(loop, on_hook, &h), 0);
        run_within(500); /* 50 waits of no time; a loop that slept would not make it */
        ck_assert_int_eq(h.calls, 50);
}
END_TEST

START_TEST(test_smallest_hook_bound_wins)
{
        hook_state unbounded = {.ret = -1}, tight = {.stop_after = 4, .ret = 10};

        ck_assert_int_eq(sh_loop_add_hook(loop, on_hook, &unbounded), 0);
        ck_assert_int_eq(sh_loop_add_hook(loop, on_hook, &tight), 0);
        run_within(SAFETY_MS / 2); /* the unbounded hook would wait for the safety timer */
        ck_assert_int_eq(tight.calls, 4);
        ck_assert_int_eq(unbounded.calls, 4);
}
END_TEST

START_TEST(test_hook_runs_before_each_wait)
{
        hook_state h = {.ret = -1};
        io_state s = {0};
        int p[2];
        sh_io *io;

        make_pipe(p);
        h.io = &s;
        io = sh_loop_add_io(loop, p[0], EPOLLIN, on_readable, &s);
        ck_assert_ptr_nonnull(io);
        ck_assert_int_eq(sh_loop_add_hook(loop, on_hook, &h), 0);
        /* three wakeups by io, then a timer stops the loop: the hook ran before every wait */
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 10, on_write_later, (void *)(intptr_t)p[1]));
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 30, on_write_later, (void *)(intptr_t)p[1]));
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 50, on_write_later, (void *)(intptr_t)p[1]));
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 70, on_stop_timer, NULL));
        run_bounded();
        ck_assert_int_eq(s.calls, 3);
        ck_assert_int_eq(h.io_calls_seen, 3); /* it also ran after the last io callback */
        ck_assert_int_ge(h.calls, 4);
        sh_loop_del_io(loop, io);
        close(p[0]);
        close(p[1]);
}
END_TEST

START_TEST(test_hook_slots_are_limited)
{
        hook_state h = {.ret = -1};
        int r = 0, n = 0;

        while (n < 100 && (r = sh_loop_add_hook(loop, on_hook, &h)) == 0)
                n++;
        ck_assert_int_eq(r, -ENOSPC);
        ck_assert_int_ge(n, 1);
}
END_TEST

/* ---- stop ------------------------------------------------------------------------------- */

START_TEST(test_stop_from_hook_ends_run_before_waiting)
{
        hook_state h = {.stop_after = 1, .ret = -1};

        ck_assert_int_eq(sh_loop_add_hook(loop, on_hook, &h), 0);
        run_bounded(); /* would sleep until the safety timer if stop were ignored */
        ck_assert_int_eq(h.calls, 1);
}
END_TEST

START_TEST(test_stop_then_run_again)
{
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 5, on_record_and_stop, (void *)1));
        run_bounded();
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 5, on_record_and_stop, (void *)2));
        run_bounded();
        ck_assert_int_eq(n_fired, 2);
        ck_assert_int_eq(fired[1], 2);
}
END_TEST

START_TEST(test_stop_before_run_is_reset_by_run)
{
        /* sh_loop_run clears an earlier stop: it runs until a new one */
        sh_loop_stop(loop);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 10, on_record_and_stop, (void *)1));
        run_bounded();
        ck_assert_int_eq(n_fired, 1);
}
END_TEST

/* ---- signals, clock --------------------------------------------------------------------- */

static void on_signal(sh_loop *l, sh_io *io, int fd, uint32_t signo, void *data)
{
        int *got = data;

        *got = (int)signo;
        sh_loop_stop(l);
}

START_TEST(test_signal_delivered_through_loop)
{
        static const int sigs[] = {SIGUSR1};
        int got = 0;

        ck_assert_int_eq(sh_loop_add_signals(loop, sigs, 1, on_signal, &got), 0);
        ck_assert_int_eq(raise(SIGUSR1), 0); /* blocked now: stays pending for the signalfd */
        run_bounded();
        ck_assert_int_eq(got, SIGUSR1);
}
END_TEST

START_TEST(test_clock_is_monotonic_ms_and_ns)
{
        uint64_t a = sh_now_ns(), ms = sh_now_ms(), b = sh_now_ns();

        ck_assert_uint_le(a, b);
        ck_assert_uint_ge(ms, a / 1000000ULL);
        ck_assert_uint_le(ms, b / 1000000ULL);
        usleep(2000);
        ck_assert_uint_ge(sh_now_ns() - b, 2000000ULL);
}
END_TEST

static Suite *loop_suite(void)
{
        Suite *s = suite_create("loop");
        TCase *tc;

        tc = tcase_create("timers");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_timers_fire_in_deadline_order);
        tcase_add_test(tc, test_equal_deadlines_fire_in_insertion_order);
        tcase_add_test(tc, test_timer_never_fires_early);
        tcase_add_test(tc, test_cancelled_timer_does_not_fire);
        tcase_add_test(tc, test_timer_cancelled_from_another_timer_callback);
        tcase_add_test(tc, test_cancel_due_timer_sharing_deadline_from_callback);
        tcase_add_test(tc, test_timer_added_from_timer_callback_fires);
        tcase_add_test(tc, test_free_with_pending_timers);
        suite_add_tcase(s, tc);

        tc = tcase_create("heap");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60); /* a bound, never a measure: a list took hours here */
        tcase_add_test(tc, test_many_timers_fire_in_deadline_order);
        tcase_add_test(tc, test_many_timers_cancelled_in_any_order_never_fire);
        tcase_add_test(tc, test_timers_cancelled_from_callbacks_in_a_heap_never_fire);
        suite_add_tcase(s, tc);

        tc = tcase_create("io");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_io_handler_gets_readability_on_pipe);
        tcase_add_test(tc, test_io_hangup_is_delivered);
        tcase_add_test(tc, test_a_timer_readded_at_zero_ms_waits_for_the_fds_ready_meanwhile);
        tcase_add_test(tc, test_due_timers_past_a_turns_budget_wait_for_the_fds);
        tcase_add_test(tc, test_add_io_on_bad_fd_fails);
        tcase_add_test(tc, test_io_deleted_inside_its_own_callback);
        tcase_add_test(tc, test_io_deleted_by_another_callback_in_same_batch);
        tcase_add_test(tc, test_mod_io_switches_events);
        suite_add_tcase(s, tc);

        tc = tcase_create("hooks");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_hook_bounds_the_wait);
        tcase_add_test(tc, test_hook_zero_means_poll);
        tcase_add_test(tc, test_smallest_hook_bound_wins);
        tcase_add_test(tc, test_hook_runs_before_each_wait);
        tcase_add_test(tc, test_hook_slots_are_limited);
        suite_add_tcase(s, tc);

        tc = tcase_create("stop");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_stop_from_hook_ends_run_before_waiting);
        tcase_add_test(tc, test_stop_then_run_again);
        tcase_add_test(tc, test_stop_before_run_is_reset_by_run);
        tcase_add_test(tc, test_signal_delivered_through_loop);
        tcase_add_test(tc, test_clock_is_monotonic_ms_and_ns);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(loop_suite());
}
