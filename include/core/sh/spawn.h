/* spawn.h: child processes of the daemon, watched by pidfd from the event loop and reaped
 * there (never in a signal handler). A child keeps only the fds it is given. */
#pragma once

#include <sched.h>
#include <sys/types.h>

#include "sh/loop.h"

typedef struct sh_child sh_child;
/* Called from the loop once the child has exited; `status` is a waitpid(2) status. */
typedef void (*sh_child_done_fn)(sh_child *c, pid_t pid, int status, void *data);
/* Runs in the child; its return value becomes the exit code. */
typedef int (*sh_child_main_fn)(void *arg);

/* Fork a child that keeps stdin/stdout/stderr and `keep_fd` (moved to fd 3 when >= 0; -1 for
 * none), closes every other fd, resets signal handling and runs fn(arg, ...). `done` may be
 * NULL; it is called from the loop once the child has exited, never before this returns.
 * Returns the handle (owned by the loop until done has run) or NULL with errno: then no
 * child runs (one that was made is killed and reaped later) and done is never called. */
sh_child *sh_child_fork(sh_loop *l, int keep_fd, sh_child_main_fn fn, void *arg,
                        sh_child_done_fn done, void *data);

/* The same with `n` fds kept, moved to 3, 4, ... 3 + n - 1 in the order given. */
sh_child *sh_child_fork_fds(sh_loop *l, const int *keep, int n, sh_child_main_fn fn, void *arg,
                            sh_child_done_fn done, void *data);

/* The same, the child born in new namespaces: `ns_flags` is a set of CLONE_NEW* flags among
 * SH_CHILD_NS_FLAGS (others: EINVAL). With CLONE_NEWPID the child is PID 1 of its namespace:
 * when it exits the kernel kills every process left in it, and by the time the child is
 * reaped (done runs) none of them is alive any more. */
sh_child *sh_child_clone_fds(sh_loop *l, unsigned long ns_flags, const int *keep, int n,
                             sh_child_main_fn fn, void *arg, sh_child_done_fn done, void *data);
#define SH_CHILD_NS_FLAGS                                                                          \
        (CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

pid_t sh_child_pid(const sh_child *c);

/* Drop the done callback: the child is still reaped, nobody is told. */
void sh_child_forget(sh_child *c);

/* Reap `pid`, a process we did not fork but are, or are about to be, the reaper of: an orphan
 * reparented to us as child subreaper (a sandbox's worker, its intermediate's child until that
 * one exits). It holds no fd, so ten thousand workers cost no pidfds: its pid stays its own
 * until we reap it, nobody else being its reaper, which makes sh_child_kill by pid as safe as
 * by a pidfd. It is not watched: the owner calls sh_child_poke when it may have exited (its
 * socket closed, a SIGKILL sent); from then on it is looked at every 100 ms until it is reaped
 * (it is given up, as failed, if it is still not ours a minute later). `done` (may be NULL)
 * from the loop once it is reaped. NULL with errno when no such process exists. */
sh_child *sh_child_adopt(sh_loop *l, pid_t pid, sh_child_done_fn done, void *data);
/* An adopted orphan may have exited: reap it now, or from the sweep once it is a zombie. */
void sh_child_poke(sh_loop *l, sh_child *c);

/* Number of children not yet reaped. */
unsigned sh_child_count(void);

/* Block until every child has exited and been reaped (their done callbacks run). For
 * shutdown only, once the loop has stopped. */
void sh_child_wait_all(sh_loop *l);

/* Send a signal to a live child (by its pidfd, an adopted orphan by its pid: no pid reuse race
 * either way). */
int sh_child_kill(sh_child *c, int sig);
