/* syscalls.h: raw syscall wrappers and kernel constants that glibc 2.36 (Debian 12) lacks.
 * Each wrapper behaves like a libc call: it returns -1 and sets errno on failure, and
 * ENOSYS when the number is unknown at build time. Callers probe at run time and cache. */
#pragma once

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* openat2(2), Linux 5.6. glibc has no wrapper before 2.43; remove this block when the
 * baseline has one. The struct is our own name so that it never clashes with
 * <linux/openat2.h> should another file include that. */
#ifndef SYS_openat2
#define SYS_openat2 437
#endif

#ifndef RESOLVE_NO_XDEV
#define RESOLVE_NO_XDEV 0x01
#endif
#ifndef RESOLVE_NO_MAGICLINKS
#define RESOLVE_NO_MAGICLINKS 0x02
#endif
#ifndef RESOLVE_NO_SYMLINKS
#define RESOLVE_NO_SYMLINKS 0x04
#endif
#ifndef RESOLVE_BENEATH
#define RESOLVE_BENEATH 0x08
#endif
#ifndef RESOLVE_IN_ROOT
#define RESOLVE_IN_ROOT 0x10
#endif
#ifndef RESOLVE_CACHED
#define RESOLVE_CACHED 0x20
#endif

struct sh_open_how {
        uint64_t flags;
        uint64_t mode;
        uint64_t resolve;
};

static inline int sh_openat2(int dirfd, const char *path, const struct sh_open_how *how,
                             size_t size)
{
        return (int)syscall(SYS_openat2, dirfd, path, how, size);
}

/* renameat2(2) flags: glibc 2.28+ declares renameat2() and these in <stdio.h> under
 * _GNU_SOURCE; keep the constants for older headers. */
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* quotactl_fd(2), Linux 5.14: quotactl on the filesystem of an open fd (a pod has no block
 * device node to name). glibc has no wrapper; remove this block when the baseline has one. */
#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif

static inline int sh_quotactl_fd(int fd, unsigned int cmd, unsigned int id, void *addr)
{
        return (int)syscall(SYS_quotactl_fd, fd, cmd, id, addr);
}

/* umount2(2) flag, glibc 2.36 has it in <sys/mount.h>; kept for older headers. */
#ifndef UMOUNT_NOFOLLOW
#define UMOUNT_NOFOLLOW 0x00000008
#endif

/* ---- mounts ------------------------------------------------------------------------------ */

/* mount_setattr(2), Linux 5.12: change a mount's flags (with AT_RECURSIVE, every mount below
 * it too). glibc 2.36 has no wrapper and no <linux/mount.h> struct in its headers; remove this
 * block when the baseline has one. */
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef MOUNT_ATTR_NOSUID
#define MOUNT_ATTR_NOSUID 0x00000002
#endif
#ifndef MOUNT_ATTR_NODEV
#define MOUNT_ATTR_NODEV 0x00000004
#endif
#ifndef MOUNT_ATTR_NOEXEC
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

struct sh_mount_attr {
        uint64_t attr_set;
        uint64_t attr_clr;
        uint64_t propagation;
        uint64_t userns_fd;
};

static inline int sh_mount_setattr(int dirfd, const char *path, unsigned int flags,
                                   const struct sh_mount_attr *attr)
{
        return (int)syscall(SYS_mount_setattr, dirfd, path, flags, attr, sizeof(*attr));
}

/* open_tree(2) and move_mount(2), Linux 5.2: a detached copy of a mount made from an fd, and
 * attached at another fd, no path looked up again. glibc 2.36 declares wrappers in
 * <sys/mount.h>, which clashes with the kernel's mount headers; by number here like the rest. */
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif

static inline int sh_open_tree(int dirfd, const char *path, unsigned int flags)
{
        return (int)syscall(SYS_open_tree, dirfd, path, flags);
}

static inline int sh_move_mount(int from_dirfd, const char *from_path, int to_dirfd,
                                const char *to_path, unsigned int flags)
{
        return (int)syscall(SYS_move_mount, from_dirfd, from_path, to_dirfd, to_path, flags);
}

/* pivot_root(2): glibc has no wrapper at all. */
static inline int sh_pivot_root(const char *new_root, const char *put_old)
{
        return (int)syscall(SYS_pivot_root, new_root, put_old);
}

/* ---- fds and exec ------------------------------------------------------------------------ */

/* close_range(2), Linux 5.9 (glibc 2.34 has a wrapper; this one also builds on older
 * headers). */
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static inline int sh_close_range(unsigned int first, unsigned int last, unsigned int flags)
{
        return (int)syscall(SYS_close_range, first, last, flags);
}

/* Close every fd from `first` up: close_range(2), or one by one before Linux 5.9 (up to
 * 65536, far above any RLIMIT_NOFILE the daemon runs with). For a child before it runs
 * anything: only the fds it was handed survive. */
static inline void sh_close_from(unsigned int first)
{
        if (sh_close_range(first, ~0U, 0) == 0)
                return;
        for (unsigned int fd = first; fd < 65536; fd++)
                (void)close((int)fd);
}

/* execveat(2), Linux 3.19 (glibc 2.34 has a wrapper). */
static inline int sh_execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                              int flags)
{
        return (int)syscall(SYS_execveat, dirfd, path, argv, envp, flags);
}

/* memfd_create(2) and seal flags of Linux 6.3; older kernels refuse them with EINVAL. */
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x0020
#endif

/* seccomp(2), Linux 3.17 (no glibc wrapper). */
static inline int sh_seccomp_syscall(unsigned int op, unsigned int flags, void *args)
{
        return (int)syscall(SYS_seccomp, op, flags, args);
}

/* ---- processes --------------------------------------------------------------------------- */

/* Namespace flags newer than some headers. */
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* pidfd_open(2), Linux 5.3, and pidfd_send_signal(2), Linux 5.1 (glibc 2.36 has wrappers in
 * <sys/pidfd.h>; these also build against older headers). */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

static inline int sh_pidfd_open(pid_t pid, unsigned int flags)
{
        return (int)syscall(SYS_pidfd_open, pid, flags);
}

static inline int sh_pidfd_send_signal(int pidfd, int sig)
{
        return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* A child like fork(2)'s (no CLONE_VM, no stack of its own: it runs on a copy of the caller's
 * stack), in new namespaces if `flags` asks, with a pidfd of it: clone3(2) (Linux 5.3), or
 * clone(2) with CLONE_PIDFD (5.2) where clone3 is unknown or filtered (ENOSYS: a container
 * runtime's seccomp profile). The pidfd comes with the child in one system call: there is no
 * moment when the child exists and the caller has no fd to watch it by, and a failure makes
 * no child at all. The pidfd is O_CLOEXEC. Returns the pid (0 in the child) or -1 with errno.
 * clone(2)'s argument order here is that of x86-64, arm64 and most others (parent_tid
 * third); s390 and microblaze differ.
 *
 * Unlike glibc's fork() (which returns no pidfd), no atfork handler runs and malloc's locks
 * are not taken for other threads. The daemon has one thread; the one other thread that can
 * exist is libcurl's resolver of a host name (a tool URL), which holds a malloc lock only for
 * an instant: a child cloned in that very instant that allocates could block on it. */
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif

struct sh_clone_args {
        uint64_t flags;
        uint64_t pidfd;
        uint64_t child_tid;
        uint64_t parent_tid;
        uint64_t exit_signal;
        uint64_t stack;
        uint64_t stack_size;
        uint64_t tls;
};

static inline pid_t sh_fork_pidfd(unsigned long flags, int *ret_pidfd)
{
        struct sh_clone_args args = {
                .flags = flags | CLONE_PIDFD,
                .pidfd = (uint64_t)(uintptr_t)ret_pidfd,
                .exit_signal = SIGCHLD,
        };
        pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));

        if (pid >= 0 || errno != ENOSYS)
                return pid;
        return (pid_t)syscall(SYS_clone, flags | CLONE_PIDFD | SIGCHLD, NULL, ret_pidfd, NULL,
                              NULL);
}
