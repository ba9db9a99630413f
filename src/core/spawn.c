/* spawn.c: fork children with a clean fd table and reap them through pidfds on the loop; reap
 * the orphans we adopt (sandbox workers) without holding an fd for each. */
#include "sh/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sh/list.h"
#include "sh/macro.h"
#include "sh/syscalls.h"

struct sh_child {
        pid_t pid;
        int pidfd; /* -1 for an orphan (sh_child_adopt): its pid is its own until we reap it */
        sh_io *io; /* NULL: not watched (an orphan, or the loop could not take it) */
        sh_child_done_fn done;
        void *data;
        bool orphan;    /* sh_child_adopt: not ours to count */
        bool swept;     /* on the `sweeping` list */
        uint64_t since; /* an orphan: when it was first poked */
        SH_LIST_FIELDS(sh_child, children);
        SH_LIST_FIELDS(sh_child, sweeping);
};

static sh_child *children; /* every child and orphan not yet reaped */
static sh_child *sweeping; /* the ones the sweep looks at: unwatched, or orphans poked */
static unsigned n_children;
static sh_timer *sweep_t; /* while one is on `sweeping` */

static void reap(sh_loop *l, sh_child *c, int status)
{
        sh_loop_del_io(l, c->io);
        sh_close(c->pidfd);
        if (c->swept)
                SH_LIST_REMOVE(sweeping, sweeping, c);
        SH_LIST_REMOVE(children, children, c);
        if (!c->orphan)
                n_children--;
        if (c->done)
                c->done(c, c->pid, status, c->data);
        free(c);
}

/* An orphan that is not our child a minute after its first poke never will be. */
#define ORPHAN_GIVE_UP_MS 60000

/* Reap c if it has exited; true if it did. Never waits. */
static bool try_reap(sh_loop *l, sh_child *c)
{
        int status = 0;
        pid_t r = waitpid(c->pid, &status, WNOHANG);

        if (r == 0)
                return false;
        /* An orphan may not be ours yet: a worker is its intermediate's child until that one
         * has exited (it does at once; we are the child subreaper). */
        if (r < 0 && errno == ECHILD && c->orphan && sh_now_ms() - c->since < ORPHAN_GIVE_UP_MS)
                return false;
        if (r < 0)
                status = W_EXITCODE(255, 0); /* already reaped elsewhere: treat as failed */
        reap(l, c, status);
        return true;
}

static void pidfd_readable(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        (void)try_reap(l, data); /* a spurious wake-up reaps nothing */
}

/* The children the loop could not watch (sh_loop_add_io failed: out of memory) and the orphans
 * poked, looked at every SWEEP_MS until they are gone: only those, never every child. */
#define SWEEP_MS 100

static void sweep(sh_loop *l, sh_timer *t, void *data)
{
        sh_child *c, *next;

        sweep_t = NULL;
        SH_LIST_FOREACH_SAFE(sweeping, c, next, sweeping) {
                (void)try_reap(l, c);
        }
        if (sweeping)
                sweep_t = sh_loop_add_timer(l, SWEEP_MS, sweep, NULL);
}

/* Put c on the sweep. 0, or -ENOMEM when the sweep timer cannot be set (c is then reaped by a
 * later sweep or sh_child_wait_all). */
static int sweep_add(sh_loop *l, sh_child *c)
{
        if (!c->swept) {
                SH_LIST_PREPEND(sweeping, sweeping, c);
                c->swept = true;
        }
        if (!sweep_t)
                sweep_t = sh_loop_add_timer(l, SWEEP_MS, sweep, NULL);
        return sweep_t ? 0 : -ENOMEM;
}

/* Watch c's pidfd from the loop, or, when the loop cannot take it, from the sweep. 0, or
 * -errno when it is not watched at all. */
static int watch(sh_loop *l, sh_child *c)
{
        c->io = sh_loop_add_io(l, c->pidfd, EPOLLIN, pidfd_readable, c);
        if (c->io)
                return 0;
        return sweep_add(l, c);
}

sh_child *sh_child_fork(sh_loop *l, int keep_fd, sh_child_main_fn fn, void *arg,
                        sh_child_done_fn done, void *data)
{
        return sh_child_fork_fds(l, &keep_fd, keep_fd >= 0 ? 1 : 0, fn, arg, done, data);
}

/* In the child: place keep[i] at fd 3 + i. Sources may collide with targets, so first lift
 * every source above the target range, then move them down. */
static int arrange_fds(const int *keep, int n)
{
        int lifted[16];
        int i;

        if (n > (int)ARRAY_SIZE(lifted))
                return -EINVAL;
        for (i = 0; i < n; i++) {
                lifted[i] = fcntl(keep[i], F_DUPFD, 3 + n);
                if (lifted[i] < 0)
                        return -errno;
        }
        for (i = 0; i < n; i++)
                if (dup2(lifted[i], 3 + i) < 0)
                        return -errno;
        return 0;
}

static sh_child *spawn(sh_loop *l, unsigned long flags, const int *keep, int n, sh_child_main_fn fn,
                       void *arg, sh_child_done_fn done, void *data)
{
        sh_child *c = calloc(1, sizeof(*c));
        int pidfd = -1;
        pid_t pid;

        if (!c)
                return NULL;
        /* The child and its pidfd in one step (sh/syscalls.h): either both or neither. */
        pid = sh_fork_pidfd(flags, &pidfd);
        if (pid < 0) {
                int saved = errno;

                free(c);
                errno = saved;
                return NULL;
        }
        if (pid == 0) {
                sigset_t all;
                int rc;

                /* The daemon blocks its signals for signalfd; a child must not inherit that. */
                sigemptyset(&all);
                sigprocmask(SIG_SETMASK, &all, NULL);
                signal(SIGPIPE, SIG_DFL);
                if (arrange_fds(keep, n) < 0)
                        _exit(125);
                sh_close_from((unsigned)(3 + n));
                rc = fn(arg);
                _exit(rc & 0xff);
        }
        c->pid = pid;
        c->pidfd = pidfd;
        c->done = done;
        c->data = data;
        SH_LIST_PREPEND(children, children, c);
        n_children++;
        if (watch(l, c) < 0) {
                /* Nothing watches it: the start fails, cleanly. The child dies at once, is
                 * reaped by a later sweep or at shutdown, and done is never called. */
                (void)sh_pidfd_send_signal(pidfd, SIGKILL);
                c->done = NULL;
                errno = ENOMEM;
                return NULL;
        }
        return c;
}

sh_child *sh_child_fork_fds(sh_loop *l, const int *keep, int n, sh_child_main_fn fn, void *arg,
                            sh_child_done_fn done, void *data)
{
        return spawn(l, 0, keep, n, fn, arg, done, data);
}

sh_child *sh_child_clone_fds(sh_loop *l, unsigned long ns_flags, const int *keep, int n,
                             sh_child_main_fn fn, void *arg, sh_child_done_fn done, void *data)
{
        if (ns_flags & ~(unsigned long)SH_CHILD_NS_FLAGS) {
                errno = EINVAL;
                return NULL;
        }
        return spawn(l, ns_flags, keep, n, fn, arg, done, data);
}

pid_t sh_child_pid(const sh_child *c)
{
        return c->pid;
}

void sh_child_forget(sh_child *c)
{
        c->done = NULL;
}

sh_child *sh_child_adopt(sh_loop *l, pid_t pid, sh_child_done_fn done, void *data)
{
        sh_child *c;

        (void)l;
        if (pid <= 0 || kill(pid, 0) < 0) {
                if (pid <= 0)
                        errno = EINVAL;
                return NULL;
        }
        c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->pid = pid;
        c->pidfd = -1;
        c->orphan = true;
        c->done = done;
        c->data = data;
        SH_LIST_PREPEND(children, children, c);
        return c;
}

void sh_child_poke(sh_loop *l, sh_child *c)
{
        if (!c->orphan || c->swept)
                return;
        c->since = sh_now_ms();
        if (!try_reap(l, c))
                (void)sweep_add(l, c); /* not a zombie (or not ours) yet */
}

unsigned sh_child_count(void)
{
        return n_children;
}

int sh_child_kill(sh_child *c, int sig)
{
        /* An orphan by its pid: it is its own until we reap it (we are its only reaper), and
         * c lives until then, so the pid cannot be another process's. */
        if (c->pidfd < 0 ? kill(c->pid, sig) < 0 : sh_pidfd_send_signal(c->pidfd, sig) < 0)
                return -errno;
        return 0;
}

void sh_child_wait_all(sh_loop *l)
{
        /* After the loop has stopped (shutdown): nothing else runs any more. */
        sh_loop_cancel_timer(l, sweep_t);
        sweep_t = NULL;
        while (children) {
                sh_child *c = children;
                int status = 0;

                if (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
                        continue;
                reap(l, c, status);
        }
}
