/* walk.h: the walks the APIs serve: every regular file below a directory in bytewise order of
 * its path (CONTRACT.md section 3: walk, disk-usage), or a listing or search of a sandbox's
 * directory (OPENSANDBOX.md section 3.2), in bounded steps that a caller runs between other
 * work, with memory and fds bounded whatever tree a sandbox builds; and the disk-usage
 * accumulator over its entries. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "sh/error.h"

/* Walk: every regular file below `root_path`, depth first, links not followed, yielded in
 * bytewise order of the full path (a directory sorts as "name/"), with memory bounded by the
 * depth times the widest directory, never by the number of files, and a few fds whatever
 * the depth (the root and a window of the deepest levels; a level above the window is
 * reopened when the walk climbs back, and only if it is still the directory first entered,
 * by st_dev/st_ino). */
typedef struct sh_fs_entry {
        const char *path;        /* the walk's prefix, then '/'-separated names; valid until next */
        const char *rel;         /* the part of path below the walk's root */
        const char *name;        /* its base name (the end of path) */
        const struct statx *stx; /* the entry itself (never followed); valid until next */
        uint64_t size;           /* stx_size */
        int64_t mtime_ns;        /* stx_mtime in ns */
        dev_t dev;
        ino_t ino;
        nlink_t nlink;
} sh_fs_entry;

/* Directory levels a walker keeps open below its root (so this + 1 fds, one more for a
 * moment while it climbs back to a level it had closed). */
#define SH_FS_WALK_OPEN 8

typedef struct sh_fs_walker sh_fs_walker;
/* A root that does not exist, or is not a directory, yields nothing (not an error). */
int sh_fs_walk_open(int rootfd, const char *root_path, sh_fs_walker **ret, sh_error **err);

/* A listing or a search (the /v1 file API, OPENSANDBOX.md section 3.2) instead of the walk
 * above: each directory in order of its entries' names (bytewise, as strcmp), a directory's
 * entries right after it (pre-order, "a", "a/x", "a-c"), which is what a file browser shows
 * and what execd's YAML asks ("lexical order by entry name within each directory,
 * descendants follow their parent"). The bounds of the walk above hold the same. */
typedef struct sh_fs_walk_opts {
        /* Yield every entry (directories before their own entries, links, FIFOs...), not only
         * regular files. */
        bool all;
        /* Directory levels yielded below the root: 1 yields the root's entries only. 0: no
         * bound. */
        unsigned max_depth;
        /* An fnmatch(3) glob (flags 0) a yielded entry must match: its base name, or with
         * pattern_path its path below the root. NULL: all. The string outlives the walker. */
        const char *pattern;
        bool pattern_path;
        /* May the walk enter the directory open at fd (O_RDONLY, not yet read)? The caller's
         * own rules (whose permissions, which filesystems). NULL: every directory. */
        bool (*may_enter)(void *data, int fd);
        void *data;
        /* Bytes of directory listings the walk may hold at once (those of the levels on its
         * current path); a directory that would pass them fails the walk with E2BIG. 0: no
         * bound. */
        size_t held_max;
} sh_fs_walk_opts;
/* Walk the directory open at dirfd (O_PATH or not; not taken: the walker opens its own), its
 * entries' paths starting with `prefix` (a '/' added unless prefix is empty or ends in '/'). */
int sh_fs_walk_open_at(int dirfd, const char *prefix, const sh_fs_walk_opts *o, sh_fs_walker **ret,
                       sh_error **err);
/* One bounded step: 1 and *ret filled, 0 at the end, <0 on error, or SH_FS_WALK_AGAIN when
 * it has done its share of work (a few hundred entries read, stat'ed or skipped, directories
 * entered or left) without finding an entry to yield: call again, after other work if need
 * be. Entries
 * that vanish mid-walk are skipped, and so is a directory that is no longer the one the walk
 * entered when it climbs back to it (with what is left of its entries). */
#define SH_FS_WALK_AGAIN 2
int sh_fs_walk_next(sh_fs_walker *w, sh_fs_entry *ret, sh_error **err);
void sh_fs_walk_free(sh_fs_walker *w);

/* disk-usage accumulator: st_size of each regular file, each inode once. */
typedef struct sh_fs_usage sh_fs_usage;
sh_fs_usage *sh_fs_usage_new(void);
int sh_fs_usage_add(sh_fs_usage *u, const sh_fs_entry *e); /* 0 or -ENOMEM */
uint64_t sh_fs_usage_bytes(const sh_fs_usage *u);
void sh_fs_usage_free(sh_fs_usage *u);
