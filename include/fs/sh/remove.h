/* remove.h: the one remover of directory trees (a deleted sandbox's or directory's trash, a
 * stale unpack, a cgroup subtree): never follows a link, no recursion, a bounded number of
 * open directories however deep the tree (sh/tree.h). Its cost grows with the tree: run it
 * where blocking is fine (a child process, start-up), but for a cgroup's few directories. */
#pragma once

#include "sh/error.h"

/* Remove `name` below `dirfd` and everything under it; never follows links; keeps going past
 * entries it cannot remove and reports the first error. Absent is 0. */
int sh_fs_remove_tree(int dirfd, const char *name, sh_error **err);

/* The same for a cgroupfs tree: only directories are removed (a cgroup's control files go
 * with its rmdir and cannot be unlinked), deepest first; a cgroup that still holds processes
 * or children fails with EBUSY. */
int sh_fs_remove_dirs(int dirfd, const char *name, sh_error **err);
