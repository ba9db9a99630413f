/* fsops.h: the file operations of both surfaces (CONTRACT.md section 3, OPENSANDBOX.md section
 * 3.2) built on safe_open, each under a surface's policy (sh_fs_ctx). Every path argument is
 * already normalised (sh_path_normalize); "" is the root. Errors carry
 * a kind (sh/error.h), from the errno where one caused it (ENOENT: not found, EISDIR: is a
 * directory, ENOTDIR: not a directory, EEXIST: exists, EINVAL: invalid) or named; the surfaces
 * map kinds to their statuses. None of these functions logs. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "sh/error.h"
#include "sh/remove.h" /* the file handlers use the whole fs layer */
#include "sh/safe_open.h"
#include "sh/trash.h"
#include "sh/walk.h"

/* Owner of everything the host creates in a workspace (the sandbox uid). Functions taking a
 * `const sh_fs_owner *` accept NULL: keep the daemon's own ids (tests, start-up). */
typedef struct sh_fs_owner {
        uid_t uid;
        gid_t gid;
} sh_fs_owner;

/* The policy every operation below acts under, one per surface: where paths resolve, what each
 * directory on the way must pass, who owns what is made, where what a replace or a delete leaves
 * goes. The native surface's: its workspace, no guard, the sandbox's uid, the sandbox's trash.
 * The /v1 surface's: the sandbox's root, its uid rules on every directory a lookup passes through
 * (`guard`) and on every directory an entry is made in or removed from (`may_change`), the trash
 * reached through the daemon's own view of each directory (`trash`). The callbacks' `data` is
 * the caller's. */
typedef struct sh_fs_ctx {
        int root;                   /* every path resolves below it (borrowed) */
        const sh_safe_guard *guard; /* every directory a lookup passes through; NULL: none */
        /* May an entry be made in, or removed from, directory dirfd (one the guard passed)? 0, or
         * -errno refusing. Asked of each level mkdir -p makes, and of the parent of each entry
         * made, replaced, moved or removed. NULL: always. */
        int (*may_change)(void *data, int dirfd);
        /* May the entry of fd, whose statx is *s, be read (sh_fs_open_read_at): asked before it is
         * opened, of what the lookup found, and again of what was opened. 0, or -errno refusing.
         * NULL: always. */
        int (*may_read)(void *data, int fd, const struct statx *s);
        /* The trash for what a replace or a delete in directory *pfd leaves: *ret_trashfd (-1:
         * none, dropped in place), *pfd possibly replaced by another fd of the same directory
         * through which that trash is reached (sh_fs_view_dir). 0 or -errno. NULL: trashfd. */
        int (*trash)(void *data, int *pfd, int *ret_trashfd);
        void *data;
        void *trash_data;       /* the trash hook's data (sh_sandbox_trash_view); NULL: data */
        int trashfd;            /* without `trash`: every directory's trash, or -1 */
        const sh_fs_owner *own; /* of what is made; NULL: the daemon's own ids */
        mode_t dir_mode;        /* of each directory mkdir -p makes on the way (0: 0755) */
        bool loop_absent;       /* too many links is absence (ENOENT), as the native contract
                                    * has it; else ELOOP */
} sh_fs_ctx;

/* mkdir -p: create `path` and missing parents (c->dir_mode, owned by c->own). An existing
 * directory is fine; an existing non-directory at `path` is EEXIST; a non-directory in the
 * middle is ENOTDIR. The root ("") is fine (nothing to do). */
int sh_fs_mkdir_p(const sh_fs_ctx *c, const char *path, sh_error **err);

/* The same, `path` itself made with exactly `mode` and owned by *own (NULL: c->own) when it is
 * made: an fd of the directory (O_PATH, or O_RDONLY when made). */
int sh_fs_mkdir_p_at(const sh_fs_ctx *c, const char *path, mode_t mode, const sh_fs_owner *own,
                     sh_error **err);

/* The parent directory of non-root `path` (O_PATH), every directory on the way checked by the
 * guard, and itself by may_change; *ret_base: the last component. */
int sh_fs_open_parent(const sh_fs_ctx *c, const char *path, const char **ret_base, sh_error **err);

/* Like sh_fs_open_parent, but creates missing parents first (as sh_fs_mkdir_p; a non-directory
 * where the parent should be is ENOTDIR). */
int sh_fs_open_parent_p(const sh_fs_ctx *c, const char *path, const char **ret_base,
                        sh_error **err);

/* The entry at non-root `path` itself (never what a link names), ready to be moved or removed:
 * its parent as sh_fs_open_parent opens it (returned), its base name and *ret_st (fstatat, links
 * not followed; absent ENOENT). */
int sh_fs_open_entry(const sh_fs_ctx *c, const char *path, const char **ret_base,
                     struct stat *ret_st, sh_error **err);

/* The trash for what a replace or a delete in directory *pfd leaves (c's `trash`, or
 * c->trashfd): 0 and *ret_trashfd (-1: none), or -errno. */
int sh_fs_trash_of(const sh_fs_ctx *c, int *pfd, int *ret_trashfd);

/* An unnamed file staged beside an entry of directory pfd and put in over it at the end (the /v1
 * upload and replace: staged in the entry's own directory, so on its filesystem whatever the
 * mount). sh_fs_stage takes pfd (checked by the caller: sh_fs_open_parent), finds its trash
 * (sh_fs_trash_of: pfd may become the daemon's view of the directory) and makes the unnamed file
 * there; -1 with err (nothing is left: s holds nothing). sh_fs_stage_commit puts it in over
 * `base` (sh_fs_upload_commit_at; owner *own, exactly `mode`): 1 (the trash holds the old entry
 * for a remover), 0, or -1 with err (s keeps the file). sh_fs_stage_drop closes the directory and
 * hands back the unnamed file's fd when one was not committed (the caller frees its blocks off
 * the loop when it is big), else -1. */
typedef struct sh_fs_upload sh_fs_upload;
typedef struct sh_fs_staged {
        sh_fs_upload *u; /* NULL: none, or committed */
        int pfd;         /* the directory, or -1 */
        int trashfd;     /* its trash (the policy's, borrowed), or -1 */
} sh_fs_staged;
int sh_fs_stage(const sh_fs_ctx *c, int pfd, sh_fs_staged *s, sh_error **err);
int sh_fs_stage_commit(sh_fs_staged *s, const char *base, const sh_fs_owner *own, mode_t mode,
                       sh_error **err);
int sh_fs_stage_drop(sh_fs_staged *s);

/* Upload staging: an unnamed file (O_TMPFILE) on the workspace's filesystem, written as the
 * body arrives, then linked in and renamed over the target in one step. Until commit
 * nothing is visible; abort leaves no trace. */
int sh_fs_upload_begin(int rootfd, sh_fs_upload **ret, sh_error **err);
int sh_fs_upload_write(sh_fs_upload *u, const void *buf, size_t len, sh_error **err);
uint64_t sh_fs_upload_size(const sh_fs_upload *u);
/* The staged file as `base` of directory pfd, atomically (whatever non-directory stood there; a
 * directory there is EISDIR and nothing changes), owned by *own (NULL: the daemon's) with exactly
 * `mode`, set while it is still unnamed. What stood there goes into trashfd (sh_fs_trash_commit;
 * < 0: none, dropped in place). 1 (the trash holds the old entry for a remover), 0, or -1 with
 * err; u stays the caller's either way (committed, closing it frees nothing). */
int sh_fs_upload_commit_at(sh_fs_upload *u, int pfd, const char *base, const sh_fs_owner *own,
                           mode_t mode, int trashfd, sh_error **err);
/* The staged file as `path` below c->root: missing parents created (sh_fs_open_parent_p), owner
 * c->own and mode 0644, in over whatever non-directory stood there (the root is EISDIR), the old
 * entry into the directory's trash (sh_fs_trash_of), and so the staged file when the commit
 * fails and it is big. Frees u in every case; *ret_kept: the trash holds something of it for a
 * remover. */
int sh_fs_upload_commit(sh_fs_upload *u, const sh_fs_ctx *c, const char *path, bool *ret_kept,
                        sh_error **err);
/* Discard (accepts NULL): a big staged file goes into trashfd first (sh_fs_trash_unnamed), so
 * that closing it frees nothing on the loop. 1: the trash holds it for a remover; else 0. */
int sh_fs_upload_abort(sh_fs_upload *u, int trashfd);
/* Discard u, handing its staged file's fd to the caller (who decides where its blocks are
 * freed; -1 for NULL). */
int sh_fs_upload_take_fd(sh_fs_upload *u);
/* The staged file's fd (u keeps it): for a writer of its own (sh/replace.h). */
int sh_fs_upload_fd(const sh_fs_upload *u);

/* Open a regular file for reading without ever blocking on a FIFO or touching a device:
 * O_PATH first, fstat, then reopen of that very inode. A directory is EISDIR, any other
 * non-regular file SH_E_INVALID, absent ENOENT. */
int sh_fs_open_read(int rootfd, const char *path, int *ret_fd, uint64_t *ret_size, sh_error **err);

/* A small file (an image's /etc/passwd) read whole: its first `max` bytes at most, into a new
 * buffer (*ret, *ret_len), opened as sh_fs_open_read; one on a kernel filesystem is refused
 * (EACCES: through a sandbox's /proc it would be the host's). */
int sh_fs_read_bounded(int rootfd, const char *path, size_t max, char **ret, size_t *ret_len,
                       sh_error **err);

/* The same below c->root under its policy: every directory on the way through the guard, the
 * entry and what was opened asked of may_read; *ret_stx its statx (sh_fs_statx). */
int sh_fs_open_read_at(const sh_fs_ctx *c, const char *path, int *ret_fd, struct statx *ret_stx,
                       sh_error **err);

/* The second half of sh_fs_open_read, for a caller that resolved the path itself: the O_PATH
 * fd `pfd` (borrowed) checked to be a regular file and reopened for reading, O_NONBLOCK;
 * `path` only names it in errors. */
int sh_fs_reopen_read(int pfd, const char *path, int *ret_fd, uint64_t *ret_size, sh_error **err);

/* The entry of fd itself (never followed): its basic stats and birth time. 0 or -errno. */
int sh_fs_statx(int fd, struct statx *s);

/* Any entry at `path`, links resolved inside the root; a dangling link is false. Never fails
 * for absence (ENOENT/ENOTDIR/ELOOP are false). */
int sh_fs_exists(int rootfd, const char *path, bool *ret, sh_error **err);

/* Size of a regular file, or -1 (JSON null) when absent or not a regular file. */
int sh_fs_size(int rootfd, const char *path, int64_t *ret, sh_error **err);

/* Remove a non-directory entry (a link itself, never its target). Absent ENOENT, a directory
 * (or the root) EISDIR. Into the directory's trash (sh_fs_trash_of; sh_fs_trash_entry), then 1
 * when it waits there for a remover; no trash: unlinked in place. */
int sh_fs_unlink_file(const sh_fs_ctx *c, const char *path, sh_error **err);

/* rename(2) semantics inside the root; missing parents of dst created (sh_fs_open_parent_p);
 * absent src ENOENT; src or dst the root EINVAL. A file replaced at dst goes into the trash of
 * dst's directory (sh_fs_trash_rename; none: dropped in place): 1 when it waits there for a
 * remover. With SH_FS_NOREPLACE an entry at dst is EEXIST (the root too, after src is found),
 * never replaced. *ret_src (may be NULL): the error is the source's (its parent, or itself),
 * else the destination's. */
#define SH_FS_NOREPLACE 1u
int sh_fs_rename(const sh_fs_ctx *c, const char *src, const char *dst, unsigned flags,
                 bool *ret_src, sh_error **err);

/* A directory's removal under a policy, a step at a time (the /v1 DELETE /directories).
 * sh_fs_rmdir_open: the entry at non-root `path` itself (never what a link names), which must be
 * a directory (ENOTDIR, *ret_st its lstat then: the caller tells that from a lookup's ENOTDIR),
 * and its directory's trash (sh_fs_trash_of). sh_fs_rmdir_step: 1 while there is more; 0 when it
 * is done: moved into the trash at once (kept: it waits there for a remover, not being empty:
 * sh_fs_trash_entry), or, without a trash, removed in place by the tree remover a step at a time
 * (may_enter asked of each directory, going on past what cannot be removed); errnum: the first
 * error (never ENOENT), or 0. */
typedef struct sh_fs_rmdir {
        int pfd;
        char *base;
        int trashfd;       /* the policy's (borrowed), or -1: in place */
        sh_fs_remover *rm; /* in place, once begun */
        bool kept;
        int errnum;
} sh_fs_rmdir;
int sh_fs_rmdir_open(sh_fs_rmdir *d, const sh_fs_ctx *c, const char *path, struct stat *ret_st,
                     sh_error **err);
int sh_fs_rmdir_step(sh_fs_rmdir *d, bool (*may_enter)(void *data, int fd), void *data);
void sh_fs_rmdir_done(sh_fs_rmdir *d); /* accepts one never opened (pfd -1) */

/* Move the directory at `path` out of the workspace, to `trash_name` inside c->trashfd (a
 * directory on the same filesystem), so that it disappears at once and can be removed in
 * the background. Absent ENOENT; not a directory ENOTDIR; the root EINVAL. A link to a
 * directory is not a directory here (links are never followed for the last component). */
int sh_fs_detach_dir(const sh_fs_ctx *c, const char *path, const char *trash_name, sh_error **err);
