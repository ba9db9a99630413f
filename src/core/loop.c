/* loop.c: epoll event loop with fd handlers, timers in a binary min-heap on one timerfd,
 * before-sleep hooks and a signalfd. Deleting handlers from inside callbacks is safe: freed
 * after dispatch. */
#include "sh/loop.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "sh/list.h"
#include "sh/macro.h"

struct sh_io {
        int fd;
        sh_io_fn fn;
        void *data;
        bool dead;
        sh_io *next_dead;
        SH_LIST_FIELDS(sh_io, live); /* every live io, so the loop can free what is left */
};

struct sh_timer {
        uint64_t deadline_ms;
        uint64_t seq; /* the order of adding: equal deadlines fire first in, first out */
        size_t idx;   /* its place in the heap */
        sh_timer_fn fn;
        void *data;
};

typedef struct hook {
        sh_hook_fn fn;
        void *data;
} hook;

struct sh_loop {
        int epfd;
        int timerfd;
        sh_io *timer_io;
        /* Timers in a binary min-heap by (deadline, seq): adding and cancelling cost
         * O(log n) with thousands of sandboxes' timers, the soonest is heap[0]. */
        sh_timer **heap;
        size_t n_timers, cap_timers;
        uint64_t timer_seq;
        hook hooks[8];
        sh_io *ios; /* live ios */
        int n_hooks;
        sh_io *dead;
        bool stop;
        uint64_t armed_ms; /* deadline the timerfd is armed for, 0: disarmed */
        int sigfd;
        sh_io_fn sig_fn;
        void *sig_data;
};

uint64_t sh_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t sh_now_ms(void)
{
        return sh_now_ns() / 1000000ULL;
}

uint64_t sh_now_wall_ms(void)
{
        struct timespec ts;

        if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
                return 0;
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void timerfd_readable(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        uint64_t expirations;

        /* Drain the expiration count; the due timers run from the main loop. */
        if (read(fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
                return;
        l->armed_ms = 0;
}

int sh_loop_new(sh_loop **ret)
{
        sh_loop *l = calloc(1, sizeof(*l));

        if (!l)
                return -ENOMEM;
        l->sigfd = -1;
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        l->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (l->epfd < 0 || l->timerfd < 0) {
                int r = -errno;

                sh_close(l->epfd);
                sh_close(l->timerfd);
                free(l);
                return r;
        }
        l->timer_io = sh_loop_add_io(l, l->timerfd, EPOLLIN, timerfd_readable, NULL);
        if (!l->timer_io) {
                int r = -errno;

                sh_loop_free(l);
                return r;
        }
        *ret = l;
        return 0;
}

static void free_dead(sh_loop *l)
{
        while (l->dead) {
                sh_io *io = l->dead;

                l->dead = io->next_dead;
                free(io);
        }
}

void sh_loop_free(sh_loop *l)
{
        if (!l)
                return;
        while (l->n_timers)
                sh_loop_cancel_timer(l, l->heap[0]);
        free(l->heap);
        while (l->ios)
                sh_loop_del_io(l, l->ios);
        free_dead(l);
        sh_close(l->sigfd);
        sh_close(l->timerfd);
        sh_close(l->epfd);
        free(l);
}

sh_io *sh_loop_add_io(sh_loop *l, int fd, uint32_t events, sh_io_fn fn, void *data)
{
        struct epoll_event ev = {.events = events};
        sh_io *io = calloc(1, sizeof(*io));

        if (!io)
                return NULL;
        io->fd = fd;
        io->fn = fn;
        io->data = data;
        ev.data.ptr = io;
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                int saved = errno;

                free(io);
                errno = saved;
                return NULL;
        }
        SH_LIST_PREPEND(live, l->ios, io);
        return io;
}

int sh_loop_mod_io(sh_loop *l, sh_io *io, uint32_t events)
{
        struct epoll_event ev = {.events = events, .data.ptr = io};

        if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
                return -errno;
        return 0;
}

void sh_loop_del_io(sh_loop *l, sh_io *io)
{
        if (!io || io->dead)
                return;
        /* The fd may already be closed by its owner; EBADF/ENOENT are then expected. */
        (void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
        SH_LIST_REMOVE(live, l->ios, io);
        io->dead = true;
        io->next_dead = l->dead;
        l->dead = io;
}

/* a fires before b */
static bool timer_before(const sh_timer *a, const sh_timer *b)
{
        return a->deadline_ms != b->deadline_ms ? a->deadline_ms < b->deadline_ms : a->seq < b->seq;
}

static void heap_put(sh_loop *l, size_t i, sh_timer *t)
{
        l->heap[i] = t;
        t->idx = i;
}

/* t, at i or about to be put there, moves up to its place. */
static void sift_up(sh_loop *l, size_t i, sh_timer *t)
{
        while (i > 0 && timer_before(t, l->heap[(i - 1) / 2])) {
                heap_put(l, i, l->heap[(i - 1) / 2]);
                i = (i - 1) / 2;
        }
        heap_put(l, i, t);
}

/* t, about to be put at i, moves down to its place. */
static void sift_down(sh_loop *l, size_t i, sh_timer *t)
{
        for (;;) {
                size_t c = 2 * i + 1;

                if (c >= l->n_timers)
                        break;
                if (c + 1 < l->n_timers && timer_before(l->heap[c + 1], l->heap[c]))
                        c++;
                if (!timer_before(l->heap[c], t))
                        break;
                heap_put(l, i, l->heap[c]);
                i = c;
        }
        heap_put(l, i, t);
}

/* Take t out of the heap (the last one fills its place). */
static void heap_remove(sh_loop *l, sh_timer *t)
{
        size_t i = t->idx;
        sh_timer *last = l->heap[--l->n_timers];

        if (last == t)
                return;
        if (i > 0 && timer_before(last, l->heap[(i - 1) / 2]))
                sift_up(l, i, last);
        else
                sift_down(l, i, last);
}

sh_timer *sh_loop_add_timer(sh_loop *l, uint64_t ms, sh_timer_fn fn, void *data)
{
        sh_timer *t;

        if (l->n_timers == l->cap_timers) {
                size_t cap = l->cap_timers ? 2 * l->cap_timers : 64;
                sh_timer **h = reallocarray(l->heap, cap, sizeof(*h));

                if (!h)
                        return NULL;
                l->heap = h;
                l->cap_timers = cap;
        }
        t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        t->deadline_ms = sh_now_ms() + ms;
        t->seq = l->timer_seq++;
        t->fn = fn;
        t->data = data;
        sift_up(l, l->n_timers++, t);
        return t;
}

void sh_loop_cancel_timer(sh_loop *l, sh_timer *t)
{
        if (!t)
                return;
        heap_remove(l, t);
        free(t);
}

int sh_loop_add_hook(sh_loop *l, sh_hook_fn fn, void *data)
{
        if (l->n_hooks >= (int)ARRAY_SIZE(l->hooks))
                return -ENOSPC;
        l->hooks[l->n_hooks].fn = fn;
        l->hooks[l->n_hooks].data = data;
        l->n_hooks++;
        return 0;
}

static void signalfd_readable(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        struct signalfd_siginfo si;

        while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                l->sig_fn(l, io, fd, si.ssi_signo, l->sig_data);
}

int sh_loop_add_signals(sh_loop *l, const int *signals, int n, sh_io_fn fn, void *data)
{
        sigset_t mask;
        int i;

        sigemptyset(&mask);
        for (i = 0; i < n; i++)
                sigaddset(&mask, signals[i]);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return -errno;
        l->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (l->sigfd < 0)
                return -errno;
        l->sig_fn = fn;
        l->sig_data = data;
        if (!sh_loop_add_io(l, l->sigfd, EPOLLIN, signalfd_readable, NULL))
                return -errno;
        return 0;
}

void sh_loop_stop(sh_loop *l)
{
        l->stop = true;
}

/* The timers due when the turn began, in order, until SH_LOOP_TIMERS_NS have gone by (at least
 * one runs): a timer added meanwhile (a job's next slice: sh/job.h) waits for the next turn, and
 * so do the due ones past the budget, so that the loop looks at its fds between them. Many jobs
 * at once each get a slice in turn, and a request that arrives meanwhile waits for one turn's
 * budget and one slice, not for a slice of every job. */
static void run_due_timers(sh_loop *l)
{
        uint64_t start = sh_now_ns(), now = start / 1000000, before = l->timer_seq;

        while (l->n_timers && l->heap[0]->deadline_ms <= now && l->heap[0]->seq < before) {
                sh_timer *t = l->heap[0];

                heap_remove(l, t);
                t->fn(l, t, t->data);
                free(t);
                if (sh_now_ns() - start >= SH_LOOP_TIMERS_NS)
                        break;
        }
}

/* Arm the timerfd for an absolute monotonic deadline (ms); 0 disarms. */
static void arm(sh_loop *l, uint64_t deadline_ms)
{
        struct itimerspec its = {0};

        if (deadline_ms == l->armed_ms)
                return;
        its.it_value.tv_sec = (time_t)(deadline_ms / 1000);
        its.it_value.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
        if (timerfd_settime(l->timerfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
                l->armed_ms = deadline_ms;
}

int sh_loop_run(sh_loop *l)
{
        struct epoll_event events[64];

        l->stop = false;
        while (!l->stop) {
                uint64_t now, deadline = 0;
                int64_t limit = -1;
                int i, n, wait_ms = -1;

                run_due_timers(l);
                for (i = 0; i < l->n_hooks && !l->stop; i++) {
                        int64_t h = l->hooks[i].fn(l, l->hooks[i].data);

                        if (h >= 0 && (limit < 0 || h < limit))
                                limit = h;
                }
                if (l->stop)
                        break;
                now = sh_now_ms();
                if (limit >= 0)
                        deadline = now + (uint64_t)limit;
                if (l->n_timers && (!deadline || l->heap[0]->deadline_ms < deadline))
                        deadline = l->heap[0]->deadline_ms;
                if (deadline && deadline <= now)
                        wait_ms = 0; /* something is due now: just poll */
                else
                        arm(l, deadline);

                n = epoll_wait(l->epfd, events, (int)ARRAY_SIZE(events), wait_ms);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                for (i = 0; i < n; i++) {
                        sh_io *io = events[i].data.ptr;

                        if (!io->dead)
                                io->fn(l, io, io->fd, events[i].events, io->data);
                }
                free_dead(l);
        }
        return 0;
}
