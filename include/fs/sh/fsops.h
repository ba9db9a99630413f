/* fsops.h: workspace file operations (CONTRACT.md section 3) built on safe_open. Every path
 * argument is already normalised (sh_path_normalize); "" is the workspace root. Errors carry
 * a kind (sh/error.h), from the errno where one caused it (ENOENT: not found, EISDIR: is a
 * directory, ENOTDIR: not a directory, EEXIST: exists, EINVAL: invalid) or named; the surfaces
 * map kinds to their statuses. None of these functions logs. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sh/error.h"
#include "sh/remove.h" /* the file handlers use the whole fs layer */
#include "sh/trash.h"
#include "sh/walk.h"

/* Owner of everything the host creates in a workspace (the sandbox uid). Functions taking a
 * `const sh_fs_owner *` accept NULL: keep the daemon's own ids (tests, start-up). */
typedef struct sh_fs_owner {
        uid_t uid;
        gid_t gid;
} sh_fs_owner;

/* mkdir -p: create `path` and missing parents (mode 0755, owned by *own). An existing
 * directory is fine; an existing non-directory at `path` is EEXIST; a non-directory in the
 * middle is ENOTDIR. The root ("") is fine (nothing to do). */
int sh_fs_mkdir_p(int rootfd, const char *path, const sh_fs_owner *own, sh_error **err);

/* Like sh_safe_open_parent, but creates missing parents first (as sh_fs_mkdir_p). */
int sh_fs_open_parent_p(int rootfd, const char *path, const sh_fs_owner *own, const char **ret_base,
                        sh_error **err);

/* Upload staging: an unnamed file (O_TMPFILE) on the workspace's filesystem, written as the
 * body arrives, then linked in and renamed over the target in one step. Until commit
 * nothing is visible; abort leaves no trace. */
typedef struct sh_fs_upload sh_fs_upload;
int sh_fs_upload_begin(int rootfd, sh_fs_upload **ret, sh_error **err);
int sh_fs_upload_write(sh_fs_upload *u, const void *buf, size_t len, sh_error **err);
uint64_t sh_fs_upload_size(const sh_fs_upload *u);
/* Create missing parents, set owner and mode 0644, replace `path` atomically (whatever
 * non-directory stood there; a directory there is EISDIR and nothing changes; the root is
 * EISDIR). What stood there goes into trashfd (sh_fs_trash_commit; < 0: none, dropped in
 * place), and so does the staged file when the commit fails and it is big. Frees u in every
 * case; *ret_kept: the trash holds something of it for a remover. */
int sh_fs_upload_commit(sh_fs_upload *u, int rootfd, const char *path, const sh_fs_owner *own,
                        int trashfd, bool *ret_kept, sh_error **err);
/* Discard (accepts NULL): a big staged file goes into trashfd first (sh_fs_trash_unnamed), so
 * that closing it frees nothing on the loop. 1: the trash holds it for a remover; else 0. */
int sh_fs_upload_abort(sh_fs_upload *u, int trashfd);
/* Discard u, handing its staged file's fd to the caller (who decides where its blocks are
 * freed; -1 for NULL). */
int sh_fs_upload_take_fd(sh_fs_upload *u);

/* Open a regular file for reading without ever blocking on a FIFO or touching a device:
 * O_PATH first, fstat, then reopen of that very inode. A directory is EISDIR, any other
 * non-regular file SH_E_INVALID, absent ENOENT. */
int sh_fs_open_read(int rootfd, const char *path, int *ret_fd, uint64_t *ret_size, sh_error **err);

/* The second half of sh_fs_open_read, for a caller that resolved the path itself: the O_PATH
 * fd `pfd` (borrowed) checked to be a regular file and reopened for reading, O_NONBLOCK;
 * `path` only names it in errors. */
int sh_fs_reopen_read(int pfd, const char *path, int *ret_fd, uint64_t *ret_size, sh_error **err);

/* Any entry at `path`, links resolved inside the root; a dangling link is false. Never fails
 * for absence (ENOENT/ENOTDIR/ELOOP are false). */
int sh_fs_exists(int rootfd, const char *path, bool *ret, sh_error **err);

/* Size of a regular file, or -1 (JSON null) when absent or not a regular file. */
int sh_fs_size(int rootfd, const char *path, int64_t *ret, sh_error **err);

/* Remove a non-directory entry (a link itself, never its target). Absent ENOENT, a
 * directory (or the root) EISDIR. trashfd >= 0: moved into that trash (sh_fs_trash_entry),
 * then 1 when it waits there for a remover; < 0: unlinked in place. */
int sh_fs_unlink_file(int rootfd, const char *path, int trashfd, sh_error **err);

/* rename(2) semantics inside the root; missing parents of dst created; absent src ENOENT;
 * src or dst the root EINVAL. A file replaced at dst goes into trashfd (sh_fs_trash_rename;
 * < 0: dropped in place): 1 when it waits there for a remover. */
int sh_fs_rename(int rootfd, const char *src, const char *dst, const sh_fs_owner *own, int trashfd,
                 sh_error **err);

/* Move the directory at `path` out of the workspace, to `trash_name` inside `trashfd` (a
 * directory on the same filesystem), so that it disappears at once and can be removed in
 * the background. Absent ENOENT; not a directory ENOTDIR; the root EINVAL. A link to a
 * directory is not a directory here (links are never followed for the last component). */
int sh_fs_detach_dir(int rootfd, const char *path, int trashfd, const char *trash_name,
                     sh_error **err);
