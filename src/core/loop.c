/* loop.c: epoll event loop with fd handlers, a timer list on one timerfd, before-sleep hooks
 * and a signalfd. Deleting handlers from inside callbacks is safe: freed after dispatch. */
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
        sh_timer_fn fn;
        void *data;
        SH_LIST_FIELDS(sh_timer, timers);
};

typedef struct hook {
        sh_hook_fn fn;
        void *data;
} hook;

struct sh_loop {
        int epfd;
        int timerfd;
        sh_io *timer_io;
        sh_timer *timers; /* sorted by deadline */
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
        while (l->timers)
                sh_loop_cancel_timer(l, l->timers);
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

sh_timer *sh_loop_add_timer(sh_loop *l, uint64_t ms, sh_timer_fn fn, void *data)
{
        sh_timer *t = calloc(1, sizeof(*t)), *i, *after = NULL;

        if (!t)
                return NULL;
        t->deadline_ms = sh_now_ms() + ms;
        t->fn = fn;
        t->data = data;
        /* Sorted by deadline; timers of the same deadline fire in the order they were added. */
        SH_LIST_FOREACH(timers, i, l->timers) {
                if (i->deadline_ms > t->deadline_ms)
                        break;
                after = i;
        }
        SH_LIST_INSERT_AFTER(timers, l->timers, after, t);
        return t;
}

void sh_loop_cancel_timer(sh_loop *l, sh_timer *t)
{
        if (!t)
                return;
        SH_LIST_REMOVE(timers, l->timers, t);
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

static void run_due_timers(sh_loop *l)
{
        uint64_t now = sh_now_ms();

        while (l->timers && l->timers->deadline_ms <= now) {
                sh_timer *t = l->timers;

                SH_LIST_REMOVE(timers, l->timers, t);
                t->fn(l, t, t->data);
                free(t);
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
                if (l->timers && (!deadline || l->timers->deadline_ms < deadline))
                        deadline = l->timers->deadline_ms;
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
