/* jail.h: the steps every child that touches hostile bytes takes to confine itself, one set
 * for all of them: the sandbox's PID 1 (isolation/child.c, in sandbox-init), the persist
 * helper around rsync (persist/confine.c), the tool unpacker (tools/unpack-child.c) and the
 * tree removers (sandbox/remover.c). Each child runs the steps it needs in its own order;
 * what differs is the profile (which mounts, which flags), never the code of a step.
 *
 * Child side, after fork or clone: no allocation, no logging, libc only (sandbox-init links
 * this file statically), async-signal-safe but for sh_jail_confine's filter load. Every
 * function returns 0, or -1 with errno set, unless it says otherwise. */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>

/* Flags of sh_jail_lock and the binds. nosuid and nodev are always set. */
#define SH_JAIL_RDONLY    (1u << 0)
#define SH_JAIL_NOEXEC    (1u << 1)
#define SH_JAIL_RECURSIVE (1u << 2) /* the mounts below too (binds: MS_REC) */

/* --- mounts --- */

/* In a new mount namespace: make every mount private, so that nothing mounted here reaches
 * the host's namespace and nothing the host mounts later appears here. */
int sh_jail_private(void);

/* fd (a directory of the namespace we were cloned from: the kernel refuses to bind mounts of
 * another namespace) opened again by its path in ours, O_PATH. Must be the very same inode:
 * a path swapped anywhere in between fails (ESTALE) instead of redirecting. Returns the new
 * fd or -1. */
int sh_jail_reopen_dir(int fd);

/* Mount a small tmpfs at `dir` to become the new root (mode 0755, 1 MiB, nosuid, nodev): it
 * holds nothing but mount points. */
int sh_jail_tmpfs_root(const char *dir);

/* Bind `src` at the existing `dst` (a directory or a file), then add `flags` to the new
 * mount (with SH_JAIL_RECURSIVE, to every mount below it too). */
int sh_jail_bind(const char *src, const char *dst, unsigned flags);

/* Bind the directory behind fd (an fd of this namespace) at `dst` (created, mode 0755), not
 * recursively, then add `flags` to the new mount. */
int sh_jail_bind_fd(int fd, const char *dst, unsigned flags);

/* Add nosuid, nodev and `flags` to the mount at `path` (never clearing a flag: the kernel
 * refuses that for locked mounts, and we only ever tighten). */
int sh_jail_lock(const char *path, unsigned flags);

/* pivot_root into `dir`, detach the old root and make the new one read-only: afterwards no
 * path, not even "..", leads back to the host's file system. */
int sh_jail_enter(const char *dir);
/* The same, the new root left writable (a sandbox's overlay root). */
int sh_jail_pivot(const char *dir);

/* --- cgroup, network, filter --- */

/* Move into a cgroup: write "0" to each of the n cgroup.procs fds starting at fd `first`
 * (one per hierarchy: v1 has several), then close them. First, before any work, so that all
 * of it is billed there. Closes every one of them; 0 or the first -errno. */
int sh_jail_join_cgroup(int first, int n);

/* A network namespace of its own: a loopback interface (down) and nothing else, so the child
 * can reach no network and no abstract UNIX socket of the host. I/O to file systems already
 * mounted (the archive on NFS) is the kernel's and goes on as before. 0 or -errno. */
int sh_jail_own_network(void);

/* A network namespace of its own, no_new_privs and `filter`: the whole confinement of a
 * helper that runs our own code (a tree remover). Last before it reads a hostile byte.
 * 0 or -errno. */
int sh_jail_confine(const struct sock_fprog *filter);
