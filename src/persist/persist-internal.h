/* persist-internal.h: what persist.c (the loop side) and confine.c (the child side) share. */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Exit codes of the confined helper besides rsync's own (0..35) and 128 + signal. */
#define SH_PERSIST_EXIT_TOO_BIG    123 /* the source tree is above the byte cap; why on fd 2 */
#define SH_PERSIST_EXIT_NO_ARCHIVE 124 /* restore: no archive directory yet (not an error) */
#define SH_PERSIST_EXIT_SETUP      125 /* the helper failed before rsync ran; why is on fd 2 */

typedef struct sh_persist_child_arg {
        bool restore;      /* archive -> workspace; else workspace -> archive */
        bool delete_extra; /* persist only: reconcile (--delete-after) */
        bool make_root;    /* persist only: create the archive root (and its parents) first */
        uid_t uid;         /* restore: the sandbox's owner */
        gid_t gid;
        const char *rsync;     /* absolute host path of the rsync binary */
        const char *nfs_root;  /* the archive root */
        const char *item_id;   /* validated: [A-Za-z0-9][A-Za-z0-9._-]{0,127} */
        uint64_t max_bytes;    /* the source's regular files may add up to this (apparent) */
        unsigned io_timeout_s; /* rsync --timeout */
        int nprocs;            /* cgroup.procs fds of its cgroup, at 5.. */
        const struct sock_fprog *sandbox_filter; /* the sandbox's own seccomp filter */
        const struct sock_fprog *socket_filter;  /* the helpers' AF_UNIX-only filter */
} sh_persist_child_arg;

/* The helper child: fd 3 is the workspace (O_PATH), fd 4 the output pipe (moved to 1 and 2),
 * fds 5.. the cgroup.procs of its helper cgroup (joined first). Takes a network namespace of
 * its own, builds a minimal root in its own mount namespace, checks the source's size, runs
 * rsync below a small init of a new PID namespace (rsync under both seccomp filters and with
 * the capabilities it needs that the daemon has) and exits with rsync's exit code (128 + N
 * when rsync died of signal N), or one of the codes above. SIGTERM stops rsync gracefully,
 * then kills everything it forked. */
int sh_persist_child_main(void *arg);
