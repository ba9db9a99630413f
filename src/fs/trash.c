/* trash.c: what a replace or a delete leaves, moved into a trash directory of the same filesystem
 * with rename(2) and freed there (at once when cheap, else by a remover); the daemon's own view of
 * a sandbox's workspace directory, on whose mount that rename reaches the trash. */
#include "sh/trash.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "sh/macro.h"
#include "sh/safe_open.h"
#include "sh/syscalls.h"

#include "fs-internal.h"

/* rename(2) of pfd/base to a new random name in trashfd, never over anything: the name. */
static int to_trash(int pfd, const char *base, int trashfd, char *name)
{
        int r = -EEXIST;

        for (int i = 0; i < SH_FS_TMPNAME_TRIES && r == -EEXIST; i++) {
                sh_fs_random_name(name, SH_FS_TRASH_NAME_MAX, "t.");
                r = renameat2(pfd, base, trashfd, name, RENAME_NOREPLACE) < 0 ? -errno : 0;
        }
        /* A filesystem without RENAME_NOREPLACE: the trash is the daemon's and the name random */
        if (r == -EINVAL)
                r = renameat(pfd, base, trashfd, name) < 0 ? -errno : 0;
        return r;
}

static bool big(const struct stat *st)
{
        return (uint64_t)st->st_blocks * 512 > SH_FS_TRASH_INLINE_MAX;
}

int sh_fs_trash_settle(int trashfd, const char *name)
{
        struct stat st;

        /* Nothing but the daemon reaches the trash: the entry looked at is the one unlinked. */
        if (fstatat(trashfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : 1;
        if (big(&st))
                return 1;
        /* a directory goes now only if it is empty (rmdir refuses any other): a tree is the
         * remover's, however small */
        if (unlinkat(trashfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0 || errno == ENOENT)
                return 0;
        return 1;
}

int sh_fs_trash_entry(int pfd, const char *base, bool dir, int trashfd, sh_error **err)
{
        char name[SH_FS_TRASH_NAME_MAX];
        struct stat st;
        int r;

        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return sh_error_make(err, errno, "'%s'", base);
        if (S_ISDIR(st.st_mode) != dir)
                return sh_error_make(err, dir ? ENOTDIR : EISDIR, "'%s'", base);
        r = to_trash(pfd, base, trashfd, name);
        if (r < 0)
                return sh_error_make(err, -r, "moving '%s' to the trash", base);
        /* What moved is what stood there at the rename: another type swapped in meanwhile goes
         * back (never over a name taken again since: then it stays, and goes). */
        if (fstatat(trashfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) != dir &&
            renameat2(trashfd, name, pfd, base, RENAME_NOREPLACE) == 0)
                return sh_error_make(err, dir ? ENOTDIR : EISDIR, "'%s'", base);
        return sh_fs_trash_settle(trashfd, name);
}

/* trashfd < 0, or no RENAME_EXCHANGE: the old entry is dropped by the rename, after a link of it
 * into the trash when there is one (then its blocks wait there: the rename drops a reference
 * that is not the last, unless a sandbox swaps the file in between). */
static int commit_in_place(int pfd, const char *tmp, const char *base, int trashfd, sh_error **err)
{
        char name[SH_FS_TRASH_NAME_MAX];
        bool linked = false;
        int r = -EEXIST;

        for (int i = 0; trashfd >= 0 && i < SH_FS_TMPNAME_TRIES && r == -EEXIST; i++) {
                sh_fs_random_name(name, sizeof(name), "t.");
                r = linkat(pfd, base, trashfd, name, 0) < 0 ? -errno : 0;
        }
        /* absent (nothing to keep), a directory (EPERM: refused below), at its link limit
         * (EMLINK): no link; the rename decides */
        linked = trashfd >= 0 && r == 0;
        if (renameat(pfd, tmp, pfd, base) < 0) {
                r = errno;
                (void)unlinkat(pfd, tmp, 0);
                if (linked)
                        (void)unlinkat(trashfd, name, 0); /* a link: base still holds it */
                return sh_error_make(err, r, "replace '%s'", base);
        }
        return linked ? sh_fs_trash_settle(trashfd, name) : 0;
}

int sh_fs_trash_commit(int fd, int pfd, const char *base, int trashfd, sh_error **err)
{
        char tmp[SH_FS_TRASH_NAME_MAX], name[SH_FS_TRASH_NAME_MAX];
        struct stat st;
        int r = -EEXIST;

        /* A directory at base: refused before the temporary name exists. */
        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                return sh_error_make(err, EISDIR, "'%s' is a directory", base);
        for (int i = 0; i < SH_FS_TMPNAME_TRIES && r == -EEXIST; i++) {
                sh_fs_random_name(tmp, sizeof(tmp), ".sh-upload.");
                r = sh_fs_link_unnamed(fd, pfd, tmp);
        }
        if (r < 0)
                return sh_error_make(err, -r, "linking the new '%s'", base);
        if (trashfd < 0)
                return commit_in_place(pfd, tmp, base, -1, err);
        for (int tries = 0; tries < SH_FS_TMPNAME_TRIES; tries++) {
                /* Nothing at base: into place, never over an entry that appeared meanwhile. */
                if (renameat2(pfd, tmp, pfd, base, RENAME_NOREPLACE) == 0)
                        return 0;
                if (errno == EINVAL)
                        return commit_in_place(pfd, tmp, base, trashfd, err);
                if (errno != EEXIST)
                        break;
                /* Swapped: base holds the new file, tmp what stood there (nothing dropped). */
                if (renameat2(pfd, tmp, pfd, base, RENAME_EXCHANGE) == 0)
                        goto exchanged;
                if (errno == EINVAL)
                        return commit_in_place(pfd, tmp, base, trashfd, err);
                if (errno != ENOENT)
                        break;
                /* base went again meanwhile: try the plain rename once more */
        }
        r = errno;
        (void)unlinkat(pfd, tmp, 0); /* our name of the new file: fd holds its blocks */
        return sh_error_make(err, r, "replace '%s'", base);
exchanged:
        if (fstatat(pfd, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
                /* a directory swapped in at base meanwhile: everything back as it was */
                r = renameat2(pfd, tmp, pfd, base, RENAME_EXCHANGE) == 0 ? 0 : -errno;
                if (r == 0)
                        (void)unlinkat(pfd, tmp, 0);
                return sh_error_make(err, r == 0 ? EISDIR : -r, "'%s' is a directory", base);
        }
        /* The old entry, into the trash. Should that fail (its name renamed away by a sandbox
         * that found it: it is the sandbox's again), it is left where it is: never dropped here. */
        if (to_trash(pfd, tmp, trashfd, name) < 0)
                return 0;
        return sh_fs_trash_settle(trashfd, name);
}

int sh_fs_trash_rename(int spfd, const char *sbase, int dpfd, const char *dbase, int trashfd,
                       sh_error **err)
{
        char name[SH_FS_TRASH_NAME_MAX];
        struct stat was, now;

        /* Nothing at dbase: moved, nothing dropped. */
        if (trashfd >= 0 && renameat2(spfd, sbase, dpfd, dbase, RENAME_NOREPLACE) == 0)
                return 0;
        /* Two names of one inode: rename(2) does nothing (both stay), and so does the plain one. */
        if (trashfd < 0 || errno != EEXIST || fstatat(spfd, sbase, &was, AT_SYMLINK_NOFOLLOW) < 0 ||
            fstatat(dpfd, dbase, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
            (was.st_dev == now.st_dev && was.st_ino == now.st_ino) ||
            renameat2(spfd, sbase, dpfd, dbase, RENAME_EXCHANGE) < 0)
                goto in_place;
        /* Exchanged: dbase holds what was moved, sbase what stood at dbase. With a directory on
         * either side rename(2)'s own rules apply (a directory replaces only an empty one, which
         * costs nothing to free): everything back, and the plain rename decides. */
        if (fstatat(dpfd, dbase, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
            fstatat(spfd, sbase, &was, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(now.st_mode) ||
            S_ISDIR(was.st_mode) || to_trash(spfd, sbase, trashfd, name) < 0) {
                if (renameat2(spfd, sbase, dpfd, dbase, RENAME_EXCHANGE) < 0)
                        return sh_error_make(err, errno, "rename to '%s'", dbase);
                goto in_place;
        }
        return sh_fs_trash_settle(trashfd, name);
in_place:
        if (renameat(spfd, sbase, dpfd, dbase) < 0)
                return sh_error_make(err, errno, "rename to '%s'", dbase);
        return 0;
}

int sh_fs_trash_unnamed(int fd, int trashfd)
{
        char name[SH_FS_TRASH_NAME_MAX];
        struct stat st;
        int r = -EEXIST;

        if (trashfd < 0 || fstat(fd, &st) < 0 || !big(&st))
                return 0;
        for (int i = 0; i < SH_FS_TMPNAME_TRIES && r == -EEXIST; i++) {
                sh_fs_random_name(name, sizeof(name), "t.");
                r = sh_fs_link_unnamed(fd, trashfd, name);
        }
        return r == 0 ? 1 : 0;
}

int sh_fs_view_dir(int wsfd, const char *mountpoint, int dirfd)
{
        _cleanup_close_ int fd = -1;
        char proc[64], path[PATH_MAX];
        size_t mlen = strlen(mountpoint);
        struct stat want, ws, got;
        struct statvfs v;
        const char *rel;
        ssize_t n;

        if (fstat(dirfd, &want) < 0 || fstat(wsfd, &ws) < 0)
                return -errno;
        if (!S_ISDIR(want.st_mode))
                return -ENOTDIR;
        if (want.st_dev != ws.st_dev)
                return -EXDEV;
        /* A read-only bind of the same filesystem (an image directory on the state root's): no
         * write may go through the daemon's writable mount of it. */
        if (fstatvfs(dirfd, &v) < 0)
                return -errno;
        if (v.f_flag & ST_RDONLY)
                return -EXDEV;
        if (want.st_nlink == 0)
                return -ENOENT;
        /* The path of dirfd in its own mount namespace (d_path, as its processes see it). */
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
        n = readlink(proc, path, sizeof(path));
        if (n < 0)
                return errno == ENAMETOOLONG ? -ENAMETOOLONG : -EIO;
        if ((size_t)n >= sizeof(path))
                return -ENAMETOOLONG;
        path[n] = '\0';
        if (strncmp(path, mountpoint, mlen) != 0 || (path[mlen] != '\0' && path[mlen] != '/'))
                return -ESTALE;
        rel = path[mlen] == '/' ? path + mlen + 1 : "";
        fd = sh_safe_openat(wsfd, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
        if (fd < 0)
                return -ESTALE;
        if (fstat(fd, &got) < 0)
                return -errno;
        if (got.st_dev != want.st_dev || got.st_ino != want.st_ino)
                return -ESTALE;
        return TAKE_FD(fd);
}
