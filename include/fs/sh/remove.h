/* remove.h: the one remover of directory trees (a deleted sandbox's or directory's trash, a
 * stale unpack, a cgroup subtree): never follows a link, no recursion, a bounded number of
 * open directories however deep the tree (sh/tree.h). Its cost grows with the tree: run it
 * where blocking is fine (a child process, start-up), but for a cgroup's few directories. */
#pragma once

#include <stdbool.h>

#include "sh/error.h"

/* Remove `name` below `dirfd` and everything under it; never follows links; keeps going past
 * entries it cannot remove and reports the first error. Absent is 0. */
int sh_fs_remove_tree(int dirfd, const char *name, sh_error **err);

/* The same for a cgroupfs tree: only directories are removed (a cgroup's control files go
 * with its rmdir and cannot be unlinked), deepest first; a cgroup that still holds processes
 * or children fails with EBUSY. */
int sh_fs_remove_dirs(int dirfd, const char *name, sh_error **err);

/* The same remover cut into steps, for a caller that runs it between other work (a job of the
 * loop, sh/job.h: the /v1 recursive delete of a directory outside the workspace, in a tmpfs):
 * each step does one thing (the entry looked at, one event of the tree walker: an entry unlinked
 * or entered, a directory removed; the directory itself removed at the end). dirfd is borrowed
 * and must stay open while the remover lives. `may_enter` (NULL: every directory) is asked of
 * each directory entered, the top included: one it refuses is left with its entries (EPERM). */
typedef struct sh_fs_remover sh_fs_remover;
int sh_fs_remover_new(int dirfd, const char *name, bool (*may_enter)(void *data, int fd),
                      void *data, sh_fs_remover **ret); /* 0 or -ENOMEM */
int sh_fs_remover_step(sh_fs_remover *rm);              /* 1: more to do; 0: done */
int sh_fs_remover_errno(const sh_fs_remover *rm);       /* the first error (not ENOENT), or 0 */
sh_fs_remover *sh_fs_remover_free(sh_fs_remover *rm);   /* accepts NULL; returns NULL */
