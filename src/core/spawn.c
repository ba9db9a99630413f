/* spawn.c: fork children with a clean fd table and reap them through pidfds on the loop. */
#include "sh/spawn.h"

#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
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
        int pidfd;
        sh_io *io;
        sh_child_done_fn done;
        void *data;
        SH_LIST_FIELDS(sh_child, children);
};

static sh_child *children;
static unsigned n_children;

static void reap(sh_loop *l, sh_child *c, int status)
{
        sh_loop_del_io(l, c->io);
        sh_close(c->pidfd);
        SH_LIST_REMOVE(children, children, c);
        n_children--;
        if (c->done)
                c->done(c, c->pid, status, c->data);
        free(c);
}

static void pidfd_readable(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_child *c = data;
        int status = 0;
        pid_t r;

        r = waitpid(c->pid, &status, WNOHANG);
        if (r == 0)
                return; /* spurious */
        if (r < 0)
                status = W_EXITCODE(255, 0); /* already reaped elsewhere: treat as failed */
        reap(l, c, status);
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

/* fork(), or with namespace flags a raw clone(2) without CLONE_VM: the child runs on a copy
 * of our stack like a forked one, already inside its new namespaces. (glibc's clone() wrapper
 * needs a separate stack; fork() cannot take flags.) */
static pid_t fork_flags(unsigned long flags)
{
        if (!flags)
                return fork();
        return sh_clone_fork(flags | SIGCHLD);
}

static sh_child *spawn(sh_loop *l, unsigned long flags, const int *keep, int n, sh_child_main_fn fn,
                       void *arg, sh_child_done_fn done, void *data)
{
        sh_child *c = calloc(1, sizeof(*c));
        pid_t pid;

        if (!c)
                return NULL;
        pid = fork_flags(flags);
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
        c->done = done;
        c->data = data;
        c->pidfd = sh_pidfd_open(pid, 0);
        if (c->pidfd >= 0)
                c->io = sh_loop_add_io(l, c->pidfd, EPOLLIN, pidfd_readable, c);
        SH_LIST_PREPEND(children, children, c);
        n_children++;
        if (c->pidfd < 0 || !c->io) {
                /* Without a pidfd we cannot watch it from the loop: wait for it now. */
                int status = 0;

                while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                        ;
                reap(l, c, status);
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

typedef struct orphan {
        pid_t pid;
        int pidfd;
        sh_io *io;
        SH_LIST_FIELDS(struct orphan, orphans);
} orphan;

static orphan *orphans;

static void orphan_free(sh_loop *l, orphan *o)
{
        sh_loop_del_io(l, o->io);
        close(o->pidfd);
        SH_LIST_REMOVE(orphans, orphans, o);
        free(o);
}

static void orphan_readable(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        orphan *o = data;

        if (waitpid(o->pid, NULL, WNOHANG) == 0)
                return;
        orphan_free(l, o);
}

int sh_child_reap_later(sh_loop *l, pid_t pid)
{
        orphan *o = calloc(1, sizeof(*o));

        if (!o)
                return -ENOMEM;
        o->pid = pid;
        o->pidfd = sh_pidfd_open(pid, 0);
        if (o->pidfd < 0) {
                int r = -errno;

                free(o);
                return r;
        }
        o->io = sh_loop_add_io(l, o->pidfd, EPOLLIN, orphan_readable, o);
        if (!o->io) {
                int r = -errno;

                close(o->pidfd);
                free(o);
                return r;
        }
        SH_LIST_PREPEND(orphans, orphans, o);
        return 0;
}

unsigned sh_child_count(void)
{
        return n_children;
}

int sh_child_kill(sh_child *c, int sig)
{
        if (sh_pidfd_send_signal(c->pidfd, sig) < 0)
                return -errno;
        return 0;
}

void sh_child_wait_all(sh_loop *l)
{
        while (orphans) {
                if (waitpid(orphans->pid, NULL, 0) < 0 && errno == EINTR)
                        continue;
                orphan_free(l, orphans);
        }
        while (children) {
                sh_child *c = children;
                int status = 0;

                if (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
                        continue;
                reap(l, c, status);
        }
}
