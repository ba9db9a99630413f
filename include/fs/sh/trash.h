/* trash.h: what a replace or a delete leaves behind goes into a trash directory instead of being
 * dropped where it stood. The last reference to a file's inode is what frees its blocks, and
 * freeing a big file costs its filesystem time (ext4: ~0.3 s per GiB written, measured): a
 * renameat over it or an unlinkat of it would pay that inside the daemon's loop. Moved into a
 * trash (a directory of the same filesystem that no sandbox can reach), the entry is freed
 * there: at once when that is cheap, else by a remover, off the loop (sandbox/remover.c).
 *
 * Every function here moves entries with rename(2) only (RENAME_EXCHANGE, RENAME_NOREPLACE):
 * the daemon never drops a name a sandbox can swap. The entry that moves is whatever stands at
 * the name at that instant, and it is looked at only once it is in the trash, where nothing but
 * the daemon can change it; a sandbox that swaps the file meanwhile gets its own file moved into
 * the trash, never a big one freed on the loop. No function here logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "sh/error.h"

/* An entry in the trash whose blocks are at most this many bytes is freed at once: unlinking
 * 1 MiB costs ~0.3 ms; anything bigger waits for a remover. Only blocks are counted (st_blocks:
 * a sparse file's holes cost nothing to free), and never the link count (a sandbox may drop its
 * other links to the inode at any moment). */
#define SH_FS_TRASH_INLINE_MAX (1u << 20)

/* Longest name a trash entry gets from these functions, with its NUL. */
#define SH_FS_TRASH_NAME_MAX 64

/* Look at what was just moved into trashfd as `name`: freed now when that is cheap (not a
 * directory, or an empty one, with at most SH_FS_TRASH_INLINE_MAX bytes of blocks), else left
 * there. 1: it is left for a remover; 0: nothing is left (freed, or already gone). */
int sh_fs_trash_settle(int trashfd, const char *name);

/* Move the entry `base` of directory pfd into trashfd (same filesystem) and settle it. `dir`:
 * the entry must be a directory (DELETE /directories), else it must not be (DELETE /files). A
 * wrong type is refused before anything moves (EISDIR, ENOTDIR); one swapped in meanwhile is
 * put back where it was (and refused the same way), or, should its name be taken again by then,
 * left in the trash. Absent: ENOENT. Returns 1 (the trash holds it for a remover), 0 (freed at
 * once), or -1 with err. */
int sh_fs_trash_entry(int pfd, const char *base, bool dir, int trashfd, sh_error **err);

/* Put the unnamed file fd (O_TMPFILE, owner and mode already set) at `base` of directory pfd
 * atomically: readers see the old entry or the new file, never a mix, never nothing. It is
 * linked under a random name first, then exchanged with base (RENAME_EXCHANGE), and what stood
 * at base goes into trashfd and is settled; no entry there: renamed into place (never over one
 * that appeared meanwhile). A directory at base is EISDIR and nothing changes. trashfd < 0 (no
 * trash on this filesystem, such as a sandbox's /tmp), or a filesystem without
 * RENAME_EXCHANGE: renamed over base, which drops the old entry in place (a link of it into the
 * trash first, when there is one). Returns 1 (the trash holds the old entry for a remover), 0,
 * or -1 with err; fd stays the caller's. */
int sh_fs_trash_commit(int fd, int pfd, const char *base, int trashfd, sh_error **err);

/* rename(2) of spfd/sbase to dpfd/dbase (same filesystem as trashfd) that never drops a file
 * standing at dbase: nothing there, renamed without replacing; a non-directory there, exchanged
 * (RENAME_EXCHANGE) and the old entry moved into the trash and settled. With a directory on
 * either side, trashfd < 0 or a filesystem without those flags: the plain rename(2) (a directory
 * replaces only an empty one). Returns 1 (the trash holds the old entry for a remover), 0, or
 * -1 with err. */
int sh_fs_trash_rename(int spfd, const char *sbase, int dpfd, const char *dbase, int trashfd,
                       sh_error **err);

/* An unnamed file given up (a cut upload, a refused replace): its blocks are freed when its last
 * fd closes, so a big one is linked into trashfd first (1: the trash holds it for a remover).
 * Small, trashfd < 0 or the link failing: 0, and the close frees it. The caller closes fd. */
int sh_fs_trash_unnamed(int fd, int trashfd);

/* The directory dirfd, an fd of another mount namespace's view of a workspace (a sandbox's: its
 * /workspace is a bind mount of its own, on which no trash is), as an O_PATH fd below wsfd, the
 * daemon's own fd of that workspace: found by the path the kernel shows for dirfd, which must
 * lie below `mountpoint` ("/workspace"), and accepted only if it is that very directory
 * (st_dev and st_ino: dirfd holds the inode, so its number names no other). The answer may be
 * used for everything dirfd was (same inode), and on the daemon's mount rename(2) reaches the
 * trash. -EXDEV: dirfd is not on the workspace's filesystem, or on a read-only mount of it
 * (nothing to move: work in place); -ESTALE: on it, but its path does not lead to it (renamed
 * meanwhile: try again); -ENOENT: it was removed; -ENAMETOOLONG: its path is over PATH_MAX. */
int sh_fs_view_dir(int wsfd, const char *mountpoint, int dirfd);
