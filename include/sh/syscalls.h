/* syscalls.h: raw syscall wrappers and kernel constants that glibc 2.36 (Debian 12) lacks.
 * Each wrapper behaves like a libc call: it returns -1 and sets errno on failure, and
 * ENOSYS when the number is unknown at build time. Callers probe at run time and cache. */
#pragma once

#include <errno.h>
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
