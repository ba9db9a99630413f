/* minroot.h: the steps of a minimal root for a helper child that handles hostile bytes: a
 * private mount namespace, a tmpfs root holding only mount points, directories bound in by
 * fd, pivot_root. Child side, after fork or clone(CLONE_NEWNS); no allocation, no logging:
 * every function returns 0, or -1 with errno set. (persist/confine.c has its own copies of
 * these steps today; a later change moves it onto this file.) */
#pragma once

#include <stdbool.h>

/* Flags of sh_minroot_lock / sh_minroot_bind_fd. nosuid and nodev are always set. */
#define SH_MINROOT_RDONLY (1u << 0)
#define SH_MINROOT_NOEXEC (1u << 1)

/* In a new mount namespace: make every mount private, so that nothing mounted here reaches
 * the host's namespace and nothing the host mounts later appears here. */
int sh_minroot_private(void);

/* fd (a directory of the namespace we were cloned from: the kernel refuses to bind mounts of
 * another namespace) opened again by its path in ours, O_PATH. Must be the very same inode:
 * a path swapped anywhere in between fails (ESTALE) instead of redirecting. Returns the new
 * fd or -1. */
int sh_minroot_reopen_dir(int fd);

/* Mount a small tmpfs at `dir` to become the new root (mode 0755, 1 MiB, nosuid, nodev). */
int sh_minroot_tmpfs(const char *dir);

/* Bind the directory behind fd (an fd of this namespace) at `dst` (created, mode 0755), not
 * recursively, then add `flags` to the new mount. */
int sh_minroot_bind_fd(int fd, const char *dst, unsigned flags);

/* Add nosuid, nodev and `flags` to the mount at `path` (never clearing a flag: the kernel
 * refuses that for locked mounts, and we only ever tighten). */
int sh_minroot_lock(const char *path, unsigned flags);

/* pivot_root into `dir`, detach the old root and make the new one read-only: afterwards no
 * path, not even "..", leads back to the host's file system. */
int sh_minroot_enter(const char *dir);
