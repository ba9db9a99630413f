/* persist-internal.h: what persist.c (the loop side) and confine.c (the child side) share. */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct sh_persister;
struct sh_manager;
/* The manager a persister works for (snapshot.c: its removers, settings and loop). */
struct sh_manager *sh_persister_manager(const struct sh_persister *p);

/* Exit codes of the confined helper besides rsync's own (0..35) and 128 + signal. */
#define SH_PERSIST_EXIT_TOO_BIG    123 /* the source tree is above the byte cap; why on fd 2 */
#define SH_PERSIST_EXIT_NO_ARCHIVE 124 /* restore: no archive directory yet (not an error) */
#define SH_PERSIST_EXIT_SETUP      125 /* the helper failed before rsync ran; why is on fd 2 */

#define SH_PERSIST_LIBS_MAX 64 /* libraries rsync may load */

/* The libraries rsync loads, as the loader named them at the daemon's start, with the
 * identity (device, inode, change time) of rsync and of each: a helper uses the list only if
 * every one is still the same file, else it asks the loader again. */
typedef struct sh_persist_libs {
        struct stat rsync_st;
        int n;
        char *path[SH_PERSIST_LIBS_MAX];
        struct stat st[SH_PERSIST_LIBS_MAX];
} sh_persist_libs;

/* Ask the loader which libraries `rsync` needs, in a child (the answer is read from a pipe,
 * bounded; the child is waited for). For the daemon's start, before the loop runs. Returns 0
 * with *ret (free with sh_persist_libs_free), or < 0: the helpers then ask per job. */
int sh_persist_libs_discover(const char *rsync, sh_persist_libs **ret);

/* Free a list from sh_persist_libs_discover (NULL: nothing). */
void sh_persist_libs_free(sh_persist_libs *l);

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
        const sh_persist_libs *libs; /* rsync's libraries as found at start; NULL: ask now */
} sh_persist_child_arg;

/* The helper child: fd 3 is the workspace (O_PATH), fd 4 the output pipe (moved to 1 and 2),
 * fds 5.. the cgroup.procs of its helper cgroup (joined first). Takes a network namespace of
 * its own, builds a minimal root in its own mount namespace, checks the source's size, runs
 * rsync below a small init of a new PID namespace (rsync under both seccomp filters and with
 * the capabilities it needs that the daemon has) and exits with rsync's exit code (128 + N
 * when rsync died of signal N), or one of the codes above. SIGTERM stops rsync gracefully,
 * then kills everything it forked. */
int sh_persist_child_main(void *arg);
