/* fsops.c: workspace file operations (CONTRACT.md section 3) on top of safe_open: mkdir -p,
 * atomic upload, non-blocking read, stat queries, unlink/rename/detach, tree removal, walk
 * and disk usage. Nothing here ever resolves a client path without the root fd. */
#include "sh/fsops.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/macro.h"
#include "sh/safe_open.h"
#include "sh/syscalls.h"
#include "sh/util.h"

/* How often to pick a new random temporary name when one is taken (a sandbox process can
 * create entries with any name, so a collision is possible, just never for long). */
#define TMPNAME_TRIES 16
/* remove_tree keeps at most this many directory levels open; deeper subtrees are moved up
 * (see rm_contents), so fd use is bounded whatever depth a sandbox builds. */
#define RM_MAX_OPEN 64

static bool is_absent(int r)
{
        return r == -ENOENT || r == -ENOTDIR || r == -ELOOP;
}

/* A random name that no sandbox process can predict, so it cannot pre-plant an entry there
 * to make us fail (it could still collide by chance; callers retry on EEXIST). */
static void random_name(char *buf, size_t size, const char *prefix)
{
        static unsigned counter;
        uint64_t rnd = 0;

        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
                rnd = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&rnd;
        snprintf(buf, size, "%s%016llx.%u", prefix, (unsigned long long)rnd, counter++);
}

/* ---- mkdir -p ----------------------------------------------------------------------- */

/* mkdir `name` in `pfd`, give it to the owner with mode 0755 exactly (independent of the
 * umask), and return an fd of it. The open after mkdirat uses O_NOFOLLOW: if a sandbox
 * process swapped in a link we fail instead of chowning whatever the link names. */
static int mkdir_one(int pfd, const char *name, const sh_fs_owner *own)
{
        _cleanup_close_ int fd = -1;

        if (mkdirat(pfd, name, 0700) < 0)
                return -errno;
        fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (own && fchown(fd, own->uid, own->gid) < 0)
                return -errno;
        if (fchmod(fd, 0755) < 0)
                return -errno;
        return TAKE_FD(fd);
}

/* mkdir -p returning an O_PATH (or O_RDONLY) directory fd of `path`. With `as_parent`, a
 * non-directory at the end of `path` is ENOTDIR rather than EEXIST: `path` is then the parent
 * of what the caller wants to create, and open("f/x") with a file f is ENOTDIR too. */
static int mkdir_p_fd(int rootfd, const char *path, const sh_fs_owner *own, bool as_parent,
                      sh_error **err)
{
        const int eexist = as_parent ? ENOTDIR : EEXIST;
        _cleanup_free_ char *work = NULL;
        _cleanup_close_ int cur = -1;
        size_t len, pos, next;
        int fd;

        fd = sh_safe_openat(rootfd, path, O_PATH | O_DIRECTORY, 0);
        if (fd >= 0)
                return fd;
        if (fd == -ENOTDIR) {
                /* Either the last component is a non-directory or one in the middle is. */
                fd = sh_safe_openat(rootfd, path, O_PATH, 0);
                if (fd >= 0) {
                        sh_close(fd);
                        return sh_error_make(err, eexist, "'%s' exists and is not a directory",
                                             path);
                }
                return sh_error_make(err, ENOTDIR, "'%s': a component is not a directory", path);
        }
        if (fd != -ENOENT)
                return sh_error_make(err, -fd, "open '%s'", path);

        work = strdup(path);
        if (!work)
                return sh_error_make(err, ENOMEM, "mkdir '%s'", path);
        len = strlen(work);

        /* Deepest existing ancestor: search backwards, so the common "one new level" costs
         * one more resolution, not one per component. */
        pos = len;
        for (;;) {
                char *slash;

                work[pos] = '\0';
                slash = strrchr(work, '/');
                if (!slash) {
                        next = 0;
                        fd = sh_safe_openat(rootfd, "", O_PATH | O_DIRECTORY, 0);
                        if (fd < 0)
                                return sh_error_make(err, -fd, "open workspace root");
                        break;
                }
                pos = (size_t)(slash - work);
                work[pos] = '\0';
                fd = sh_safe_openat(rootfd, work, O_PATH | O_DIRECTORY, 0);
                if (fd >= 0) {
                        next = pos + 1;
                        break;
                }
                if (fd == -ENOTDIR)
                        return sh_error_make(err, ENOTDIR, "'%s': a component is not a directory",
                                             path);
                if (fd != -ENOENT)
                        return sh_error_make(err, -fd, "open '%s'", work);
        }
        cur = fd;
        memcpy(work, path, len + 1);

        /* Create the rest one level at a time, each relative to the fd of its parent. */
        while (next < len) {
                size_t end = next;
                bool final;

                while (end < len && work[end] != '/')
                        end++;
                final = end == len;
                work[end] = '\0';
                fd = mkdir_one(cur, work + next, own);
                if (fd == -EEXIST) {
                        /* Raced with another creator, or a (dangling) link or a file is in
                         * the way: look again through the safe resolver, links in root. */
                        fd = sh_safe_openat(rootfd, work, O_PATH | O_DIRECTORY, 0);
                        if (is_absent(fd)) {
                                if (final)
                                        return sh_error_make(err, eexist,
                                                             "'%s' exists and is not a directory",
                                                             path);
                                return sh_error_make(err, ENOTDIR,
                                                     "'%s': a component is not a directory", path);
                        }
                }
                if (fd < 0)
                        return sh_error_make(err, -fd, "mkdir '%s'", work);
                if (!final)
                        work[end] = '/';
                sh_close(cur);
                cur = fd;
                next = end + 1;
        }
        return TAKE_FD(cur);
}

int sh_fs_mkdir_p(int rootfd, const char *path, const sh_fs_owner *own, sh_error **err)
{
        int fd = mkdir_p_fd(rootfd, path, own, false, err);

        if (fd < 0)
                return fd;
        sh_close(fd);
        return 0;
}

int sh_fs_open_parent_p(int rootfd, const char *path, const sh_fs_owner *own, const char **ret_base,
                        sh_error **err)
{
        _cleanup_free_ char *parent = NULL;
        const char *base;
        int fd;

        if (!*path)
                return sh_error_make(err, EINVAL, "the workspace root has no parent");
        if (sh_path_split(path, &parent, &base) < 0)
                return sh_error_make(err, ENOMEM, "split '%s'", path);
        /* base is used with *at() calls on the parent: "." or ".." would name the parent
         * or the grandparent. Normalised paths never hold them; refuse anyway. */
        if (!*base || STREQ(base, ".") || STREQ(base, ".."))
                return sh_error_make(err, EINVAL, "'%s': bad last component", path);
        fd = mkdir_p_fd(rootfd, parent, own, true, err);
        if (fd < 0)
                return fd;
        *ret_base = base;
        return fd;
}

/* Open the parent of `path` (no creation), mapping errors for the contract. */
static int open_parent(int rootfd, const char *path, const char **ret_base, sh_error **err)
{
        int fd = sh_safe_open_parent(rootfd, path, ret_base);

        if (fd >= 0)
                return fd;
        if (fd == -ELOOP)
                return sh_error_make(err, ENOENT, "'%s': too many levels of links", path);
        return sh_error_make(err, -fd, "'%s'", path);
}

/* ---- upload ------------------------------------------------------------------------- */

struct sh_fs_upload {
        int fd; /* O_TMPFILE: unnamed until commit, so a cut upload leaves nothing behind */
        uint64_t size;
};

int sh_fs_upload_begin(int rootfd, sh_fs_upload **ret, sh_error **err)
{
        _cleanup_close_ int fd = -1;
        sh_fs_upload *u;

        /* In the workspace root itself, so that the final link and rename stay on one
         * filesystem (EXDEV otherwise) and the data counts against the workspace's quota. */
        fd = sh_safe_openat(rootfd, "", O_TMPFILE | O_RDWR, 0600);
        if (fd < 0)
                return sh_error_make(err, -fd, "create upload file");
        u = calloc(1, sizeof(*u));
        if (!u)
                return sh_error_make(err, ENOMEM, "upload");
        u->fd = TAKE_FD(fd);
        *ret = u;
        return 0;
}

int sh_fs_upload_write(sh_fs_upload *u, const void *buf, size_t len, sh_error **err)
{
        const char *p = buf;

        while (len > 0) {
                ssize_t n = write(u->fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return sh_error_make(err, errno, "write upload");
                }
                if (n == 0)
                        return sh_error_make(err, EIO, "write upload: no progress");
                p += n;
                len -= (size_t)n;
                u->size += (uint64_t)n;
        }
        return 0;
}

uint64_t sh_fs_upload_size(const sh_fs_upload *u)
{
        return u->size;
}

void sh_fs_upload_abort(sh_fs_upload *u)
{
        if (!u)
                return;
        sh_close(u->fd);
        free(u);
}

static void upload_abortp(sh_fs_upload **u)
{
        sh_fs_upload_abort(*u);
        *u = NULL;
}

/* Give the unnamed file a name `name` in `pfd`. linkat(AT_EMPTY_PATH) needs
 * CAP_DAC_READ_SEARCH (ENOENT without it); the /proc/self/fd route needs only /proc. Neither
 * replaces an existing entry, so a name a sandbox planted is EEXIST, never clobbered. */
static int link_tmpfile(int fd, int pfd, const char *name)
{
        char proc[64];

        if (linkat(fd, "", pfd, name, AT_EMPTY_PATH) == 0)
                return 0;
        if (errno != ENOENT && errno != EPERM && errno != EINVAL)
                return -errno;
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        if (linkat(AT_FDCWD, proc, pfd, name, AT_SYMLINK_FOLLOW) < 0)
                return -errno;
        return 0;
}

int sh_fs_upload_commit(sh_fs_upload *u_in, int rootfd, const char *path, const sh_fs_owner *own,
                        sh_error **err)
{
        _cleanup_(upload_abortp) sh_fs_upload *u = u_in;
        _cleanup_close_ int pfd = -1;
        char tmp[64];
        const char *base;
        struct stat st;
        int r = -EEXIST;

        if (!*path)
                return sh_error_make(err, EISDIR, "the workspace root is a directory");
        pfd = sh_fs_open_parent_p(rootfd, path, own, &base, err);
        if (pfd < 0)
                return pfd;
        /* A directory at the target: refuse before touching anything (renameat would say
         * EISDIR too, but only after the temporary name existed). */
        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                return sh_error_make(err, EISDIR, "'%s' is a directory", path);
        /* Owner and mode while still unnamed: never visible with the daemon's ids. */
        if (own && fchown(u->fd, own->uid, own->gid) < 0)
                return sh_error_make(err, errno, "chown upload");
        if (fchmod(u->fd, 0644) < 0)
                return sh_error_make(err, errno, "chmod upload");

        for (int i = 0; i < TMPNAME_TRIES && r == -EEXIST; i++) {
                random_name(tmp, sizeof(tmp), ".sh-upload.");
                r = link_tmpfile(u->fd, pfd, tmp);
        }
        if (r < 0)
                return sh_error_make(err, -r, "link upload into '%s'", path);
        /* rename(2) replaces the target atomically: readers see old or new, never a mix.
         * It never follows a link at either name, so a link planted at the target is
         * replaced, not written through. */
        if (renameat(pfd, tmp, pfd, base) < 0) {
                r = -errno;
                (void)unlinkat(pfd, tmp, 0);
                return sh_error_make(err, -r, "replace '%s'", path);
        }
        return 0;
}

/* ---- read and queries --------------------------------------------------------------- */

int sh_fs_open_read(int rootfd, const char *path, int *ret_fd, uint64_t *ret_size, sh_error **err)
{
        _cleanup_close_ int pfd = -1, fd = -1;
        struct stat st, st2;
        char proc[64];

        /* O_PATH opens nothing: no FIFO open that blocks, no device driver open routine. */
        pfd = sh_safe_openat(rootfd, path, O_PATH, 0);
        if (pfd < 0) {
                if (pfd == -ELOOP)
                        return sh_error_make(err, ENOENT, "'%s': too many levels of links", path);
                return sh_error_make(err, -pfd, "open '%s'", path);
        }
        if (fstat(pfd, &st) < 0)
                return sh_error_make(err, errno, "stat '%s'", path);
        if (S_ISDIR(st.st_mode))
                return sh_error_make(err, EISDIR, "'%s' is a directory", path);
        if (!S_ISREG(st.st_mode))
                return sh_error_new(err, SH_E_INVALID, "'%s' is not a regular file", path);
        /* Reopen that very inode for reading; /proc/self/fd/N is a magic link to it, so no
         * second path lookup can be raced. */
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
        fd = open(proc, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
                /* the O_PATH fd pins the inode, so ENOENT can only mean no /proc: not a
                 * missing file, and must not become a 404 */
                if (errno == ENOENT)
                        return sh_error_make(err, EIO, "reopen '%s': /proc not mounted?", path);
                return sh_error_make(err, errno, "reopen '%s'", path);
        }
        if (fstat(fd, &st2) < 0)
                return sh_error_make(err, errno, "stat '%s'", path);
        if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino || !S_ISREG(st2.st_mode))
                return sh_error_make(err, EAGAIN, "'%s' changed while opening", path);
        *ret_size = (uint64_t)st2.st_size;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int sh_fs_exists(int rootfd, const char *path, bool *ret, sh_error **err)
{
        int fd = sh_safe_openat(rootfd, path, O_PATH, 0);

        if (fd >= 0) {
                sh_close(fd);
                *ret = true;
                return 0;
        }
        if (is_absent(fd)) {
                *ret = false;
                return 0;
        }
        return sh_error_make(err, -fd, "open '%s'", path);
}

int sh_fs_size(int rootfd, const char *path, int64_t *ret, sh_error **err)
{
        _cleanup_close_ int fd = sh_safe_openat(rootfd, path, O_PATH, 0);
        struct stat st;

        if (fd < 0) {
                if (is_absent(fd)) {
                        *ret = -1;
                        return 0;
                }
                return sh_error_make(err, -fd, "open '%s'", path);
        }
        if (fstat(fd, &st) < 0)
                return sh_error_make(err, errno, "stat '%s'", path);
        *ret = S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
        return 0;
}

/* ---- unlink, rename, detach --------------------------------------------------------- */

int sh_fs_unlink_file(int rootfd, const char *path, sh_error **err)
{
        _cleanup_close_ int pfd = -1;
        const char *base;
        struct stat st;

        if (!*path)
                return sh_error_make(err, EISDIR, "the workspace root is a directory");
        pfd = open_parent(rootfd, path, &base, err);
        if (pfd < 0)
                return pfd;
        /* AT_SYMLINK_NOFOLLOW: a link is removed itself, its target is never looked at. */
        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return sh_error_make(err, errno, "'%s'", path);
        if (S_ISDIR(st.st_mode))
                return sh_error_make(err, EISDIR, "'%s' is a directory", path);
        /* Without AT_REMOVEDIR unlinkat refuses a directory swapped in meanwhile (EISDIR). */
        if (unlinkat(pfd, base, 0) < 0)
                return sh_error_make(err, errno, "unlink '%s'", path);
        return 0;
}

int sh_fs_rename(int rootfd, const char *src, const char *dst, const sh_fs_owner *own,
                 sh_error **err)
{
        _cleanup_close_ int spfd = -1, dpfd = -1;
        const char *sbase, *dbase;
        struct stat st;

        if (!*src || !*dst)
                return sh_error_make(err, EINVAL, "cannot rename the workspace root");
        spfd = open_parent(rootfd, src, &sbase, err);
        if (spfd < 0)
                return spfd;
        /* Check the source before creating the destination's parents: a failed rename
         * should leave no new directories behind. */
        if (fstatat(spfd, sbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return sh_error_make(err, errno, "'%s'", src);
        dpfd = sh_fs_open_parent_p(rootfd, dst, own, &dbase, err);
        if (dpfd < 0)
                return dpfd;
        /* renameat acts on the names themselves: links at src or dst are moved/replaced,
         * never followed. */
        if (renameat(spfd, sbase, dpfd, dbase) < 0)
                return sh_error_make(err, errno, "rename '%s' to '%s'", src, dst);
        return 0;
}

int sh_fs_detach_dir(int rootfd, const char *path, int trashfd, const char *trash_name,
                     sh_error **err)
{
        _cleanup_close_ int pfd = -1;
        const char *base;
        struct stat st;

        if (!*path)
                return sh_error_make(err, EINVAL, "cannot remove the workspace root");
        pfd = open_parent(rootfd, path, &base, err);
        if (pfd < 0)
                return pfd;
        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return sh_error_make(err, errno, "'%s'", path);
        if (!S_ISDIR(st.st_mode))
                return sh_error_make(err, ENOTDIR, "'%s' is not a directory", path);
        /* If a racer swaps the directory for a link now, the link is what moves to the
         * trash, and remove_tree never follows it. NOREPLACE: never clobber trash. */
        if (renameat2(pfd, base, trashfd, trash_name, RENAME_NOREPLACE) < 0) {
                if (errno != EINVAL && errno != ENOSYS)
                        return sh_error_make(err, errno, "detach '%s'", path);
                /* filesystem without RENAME_NOREPLACE: the trash name is unique anyway */
                if (renameat(pfd, base, trashfd, trash_name) < 0)
                        return sh_error_make(err, errno, "detach '%s'", path);
        }
        return 0;
}

/* ---- remove_tree -------------------------------------------------------------------- */

typedef struct rm_level {
        DIR *d;
        char *name; /* this directory's name in the level above (NULL for the top) */
} rm_level;

/* Keep going past failures, but remember the first one for the caller. */
static void rm_fail(sh_error **err, int *first, int errnum, const char *what, const char *name)
{
        if (errnum == ENOENT || *first)
                return;
        *first = -errnum;
        sh_error_make(err, errnum, "remove tree: %s '%s'", what, name);
}

/* Empty the directory open as `topfd` (without removing it). Only unlinkat and O_NOFOLLOW
 * opens relative to directory fds we hold: no link is ever followed and no path is looked up
 * twice. At most RM_MAX_OPEN levels are open at once; a directory deeper than that is moved
 * (renamed) up into `topfd` under a random name and removed in a later pass, so a
 * pathologically deep tree costs passes, never unbounded fds or stack. The passes have no
 * cap: a cap would leave any tree deeper than cap * RM_MAX_OPEN on disk for good. They end
 * because each pass that moves a subtree brings it RM_MAX_OPEN - 1 levels closer to the top
 * (and removes what it climbed through), so a tree of depth D takes about D / 63 passes. */
static void rm_contents(int topfd, sh_error **err, int *first)
{
        rm_level lv[RM_MAX_OPEN];
        bool moved = true;

        while (moved) {
                size_t depth;
                int fd0;

                moved = false;
                fd0 = fcntl(topfd, F_DUPFD_CLOEXEC, 3);
                if (fd0 < 0) {
                        rm_fail(err, first, errno, "dup", ".");
                        return;
                }
                lv[0].d = fdopendir(fd0);
                if (!lv[0].d) {
                        rm_fail(err, first, errno, "opendir", ".");
                        sh_close(fd0);
                        return;
                }
                /* the dup shares the file offset with topfd: start each pass at the top */
                rewinddir(lv[0].d);
                lv[0].name = NULL;
                depth = 1;

                while (depth > 0) {
                        rm_level *l = &lv[depth - 1];
                        int pfd = dirfd(l->d);
                        unsigned char type;
                        struct dirent *de;
                        char *name;
                        DIR *d;
                        int fd;

                        errno = 0;
                        de = readdir(l->d);
                        if (!de) {
                                if (errno)
                                        rm_fail(err, first, errno, "readdir",
                                                l->name ? l->name : ".");
                                closedir(l->d);
                                depth--;
                                if (depth > 0) {
                                        if (unlinkat(dirfd(lv[depth - 1].d), l->name,
                                                     AT_REMOVEDIR) < 0)
                                                rm_fail(err, first, errno, "rmdir", l->name);
                                        free(l->name);
                                }
                                continue;
                        }
                        if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                                continue;
                        type = de->d_type;
                        if (type == DT_UNKNOWN) {
                                struct stat st;
                                if (fstatat(pfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                                        rm_fail(err, first, errno, "stat", de->d_name);
                                        continue;
                                }
                                type = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
                        }
                        if (type != DT_DIR) {
                                /* a link is removed itself: unlinkat never follows */
                                if (unlinkat(pfd, de->d_name, 0) == 0)
                                        continue;
                                if (errno != EISDIR) {
                                        rm_fail(err, first, errno, "unlink", de->d_name);
                                        continue;
                                }
                                /* it became a directory meanwhile: descend below */
                        }
                        if (depth == RM_MAX_OPEN) {
                                char nm[64];
                                int r = -EEXIST;

                                for (int i = 0; i < TMPNAME_TRIES && r == -EEXIST; i++) {
                                        random_name(nm, sizeof(nm), ".sh-rm.");
                                        r = renameat2(pfd, de->d_name, topfd, nm,
                                                      RENAME_NOREPLACE) < 0
                                                    ? -errno
                                                    : 0;
                                }
                                if (r == 0)
                                        moved = true;
                                else
                                        rm_fail(err, first, -r, "move up", de->d_name);
                                continue;
                        }
                        fd = openat(pfd, de->d_name,
                                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0) {
                                /* swapped for a link or file since readdir: unlink that */
                                if (errno == ENOTDIR || errno == ELOOP) {
                                        if (unlinkat(pfd, de->d_name, 0) < 0)
                                                rm_fail(err, first, errno, "unlink", de->d_name);
                                } else {
                                        rm_fail(err, first, errno, "open", de->d_name);
                                }
                                continue;
                        }
                        name = strdup(de->d_name);
                        d = name ? fdopendir(fd) : NULL;
                        if (!d) {
                                rm_fail(err, first, name ? errno : ENOMEM, "opendir", de->d_name);
                                free(name);
                                sh_close(fd);
                                continue;
                        }
                        lv[depth].d = d;
                        lv[depth].name = name;
                        depth++;
                }
        }
}

int sh_fs_remove_tree(int dirfd, const char *name, sh_error **err)
{
        _cleanup_close_ int fd = -1;
        struct stat st;
        int first = 0;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : sh_error_make(err, errno, "stat '%s'", name);
        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
                        return sh_error_make(err, errno, "unlink '%s'", name);
                return 0;
        }
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                if (errno != ENOTDIR && errno != ELOOP)
                        return sh_error_make(err, errno, "open '%s'", name);
                /* replaced by a link or file since the stat: remove that entry itself */
                if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
                        return sh_error_make(err, errno, "unlink '%s'", name);
                return 0;
        }
        rm_contents(fd, err, &first);
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
                rm_fail(err, &first, errno, "rmdir", name);
        return first;
}

/* ---- walk --------------------------------------------------------------------------- */

/* A walk has to stay cheap for the daemon whatever tree a sandbox builds (issue 10):
 *
 * - fds: the walk root plus the deepest WALK_OPEN levels of the current path stay open. A
 *   level above them is closed; when the walk climbs back to it, it is reopened through ".."
 *   of the level below and used only if its st_dev/st_ino are the ones recorded when the
 *   walk first entered it. Otherwise (a sandbox moved a directory meanwhile) it is reopened
 *   by name from the nearest open ancestor, one O_NOFOLLOW|O_DIRECTORY level at a time,
 *   each level checked the same way; a level that fails the check is treated as vanished
 *   (its remaining entries are skipped, its replacement is never entered).
 * - work: one sh_fs_walk_next call does at most WALK_STEP units (an entry read, stat'ed or
 *   skipped, a directory entered or left, a level reopened) plus the rest of one getdents64
 *   buffer, then returns SH_FS_WALK_AGAIN if it found no file: skipped entries and empty
 *   directories cost the caller's slice like yielded ones.
 * - sorting: a directory is read one getdents64 buffer per step; each buffer's entries are
 *   sorted as they arrive (a "run", at most WALK_DENTS / 24 entries) and the level yields
 *   them through a k-way merge (a min-heap of runs), so no step ever sorts a whole
 *   directory. A directory can only be yielded once it is read to the end (its smallest
 *   name may come last), so the listing of each level on the current path is in memory:
 *   memory is bounded by depth times the widest directory, never by the number of files.
 * - memory per level: the entries not visited yet, the run heap and 48 bytes; no buffers. */
#define WALK_OPEN  SH_FS_WALK_OPEN
#define WALK_STEP  256
#define WALK_DENTS (32 * 1024)

/* One getdents64 buffer of a directory, sorted. Entry k starts at walk_run_names(r) +
 * off[k]: a type byte ('d' or 'f'), a length byte, the name, a NUL. */
typedef struct walk_run {
        uint32_t n, next;
        uint32_t off[];
} walk_run;

typedef struct walk_level {
        walk_run **heap; /* runs not yet exhausted, a min-heap on each run's next entry */
        uint32_t nheap, heapcap;
        int fd;       /* -1 while outside the window of open levels */
        bool listed;  /* getdents64 reached the end */
        bool visited; /* an entry was taken: w->path holds its name after plen */
        dev_t dev;    /* identity recorded when first entered; every reopen must match it */
        ino_t ino;
        size_t plen; /* bytes of the path prefix ("root/dir/") for this level's entries */
} walk_level;

struct sh_fs_walker {
        walk_level *lv;
        size_t depth, cap;
        char *path;
        size_t path_cap;
        /* Fallback reopen of level `reopen` (0: none) by name; `reopen_at` is the deepest
         * level open on the way. */
        size_t reopen, reopen_at;
};

static const char *walk_run_names(const walk_run *r)
{
        return (const char *)&r->off[r->n];
}

static const char *walk_run_head(const walk_run *r)
{
        return walk_run_names(r) + r->off[r->next];
}

static void walk_level_done(walk_level *l)
{
        l->fd = sh_close(l->fd);
        for (uint32_t i = 0; i < l->nheap; i++)
                free(l->heap[i]);
        free(l->heap);
        l->heap = NULL;
        l->nheap = l->heapcap = 0;
}

/* Order of the full paths: a directory compares as "name/" (its files all start with that),
 * a file as "name", bytewise unsigned. Then a depth-first walk over sorted levels yields
 * globally sorted paths, e.g. "a-c" < "a/b" because '-' < '/'. */
static int walk_ent_cmp(const char *a, const char *b)
{
        size_t la = (unsigned char)a[1], lb = (unsigned char)b[1], m = la < lb ? la : lb;
        unsigned ca, cb;
        int c = memcmp(a + 2, b + 2, m);

        if (c)
                return c;
        ca = m < la ? (unsigned char)a[2 + m] : (a[0] == 'd' ? '/' : 0);
        cb = m < lb ? (unsigned char)b[2 + m] : (b[0] == 'd' ? '/' : 0);
        return ca < cb ? -1 : ca > cb ? 1 : 0;
}

static int walk_off_cmp(const void *pa, const void *pb, void *names)
{
        return walk_ent_cmp((const char *)names + *(const uint32_t *)pa,
                            (const char *)names + *(const uint32_t *)pb);
}

static bool walk_heap_less(walk_run *const *h, uint32_t i, uint32_t j)
{
        return walk_ent_cmp(walk_run_head(h[i]), walk_run_head(h[j])) < 0;
}

static void walk_heap_down(walk_level *l, uint32_t i)
{
        for (;;) {
                uint32_t c = 2 * i + 1, m = i;
                walk_run *t;

                if (c < l->nheap && walk_heap_less(l->heap, c, m))
                        m = c;
                if (c + 1 < l->nheap && walk_heap_less(l->heap, c + 1, m))
                        m = c + 1;
                if (m == i)
                        return;
                t = l->heap[i];
                l->heap[i] = l->heap[m];
                l->heap[m] = t;
                i = m;
        }
}

static int grow(void *pp, size_t *cap, size_t need, size_t elem)
{
        size_t ncap = *cap ? *cap : 64;
        void *p;

        if (need <= *cap)
                return 0;
        while (ncap < need) {
                if (ncap > SIZE_MAX / 2 / elem)
                        return -ENOMEM;
                ncap *= 2;
        }
        p = realloc(*(void **)pp, ncap * elem);
        if (!p)
                return -ENOMEM;
        *(void **)pp = p;
        *cap = ncap;
        return 0;
}

static int walk_heap_push(walk_level *l, walk_run *run)
{
        uint32_t i;

        if (l->nheap == l->heapcap) {
                /* exact for the common one-run directory, doubling after that */
                uint32_t ncap = l->heapcap ? l->heapcap * 2 : 1;
                walk_run **h;

                if (ncap < l->heapcap)
                        return -ENOMEM;
                h = realloc(l->heap, ncap * sizeof(*h));
                if (!h)
                        return -ENOMEM;
                l->heap = h;
                l->heapcap = ncap;
        }
        i = l->nheap++;
        l->heap[i] = run;
        while (i > 0 && walk_heap_less(l->heap, i, (i - 1) / 2)) {
                uint32_t p = (i - 1) / 2;

                l->heap[i] = l->heap[p];
                l->heap[p] = run;
                i = p;
        }
        return 0;
}

/* Entry kinds a walk keeps, resolved in the getdents64 buffer itself (d_type rewritten). */
#define WALK_SKIP 0xff

/* Read one getdents64 buffer of level `l` into a sorted run. Only regular files and
 * directories are kept (links, FIFOs, sockets, devices never show in a walk). */
static int walk_read(walk_level *l, unsigned *work)
{
        /* the buffer lives only during this step: nothing per level, nothing per walker */
        char buf[WALK_DENTS] __attribute__((aligned(8)));
        size_t names = 0, n = 0, k = 0, used = 0;
        walk_run *run;
        ssize_t len;
        char *dst;

        len = getdents64(l->fd, buf, sizeof(buf));
        if (len < 0) {
                if (errno == ENOENT) { /* the directory was removed under us: vanished */
                        l->listed = true;
                        return 0;
                }
                return -errno;
        }
        if (len == 0) {
                l->listed = true;
                return 0;
        }
        for (ssize_t pos = 0; pos < len;) {
                struct dirent64 *de = (struct dirent64 *)(buf + pos);
                size_t nl = strlen(de->d_name);

                pos += de->d_reclen;
                (*work)++;
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, "..")) {
                        de->d_type = WALK_SKIP;
                        continue;
                }
                if (de->d_type == DT_UNKNOWN) {
                        struct stat st;

                        if (fstatat(l->fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                de->d_type = WALK_SKIP; /* vanished */
                        else if (S_ISDIR(st.st_mode))
                                de->d_type = DT_DIR;
                        else if (S_ISREG(st.st_mode))
                                de->d_type = DT_REG;
                }
                if (de->d_type != DT_DIR && de->d_type != DT_REG) {
                        de->d_type = WALK_SKIP;
                        continue;
                }
                /* No *at() call takes a longer name: it could never be stat'ed. */
                if (nl > NAME_MAX)
                        return -ENAMETOOLONG;
                names += nl + 3;
                n++;
        }
        if (n == 0)
                return 0;
        /* a 32 KiB buffer holds at most 1365 entries of at most 258 bytes each: no overflow */
        run = malloc(sizeof(*run) + n * sizeof(run->off[0]) + names);
        if (!run)
                return -ENOMEM;
        run->n = (uint32_t)n;
        run->next = 0;
        dst = (char *)&run->off[n];
        for (ssize_t pos = 0; pos < len;) {
                struct dirent64 *de = (struct dirent64 *)(buf + pos);
                size_t nl;

                pos += de->d_reclen;
                if (de->d_type == WALK_SKIP)
                        continue;
                nl = strlen(de->d_name);
                run->off[k++] = (uint32_t)used;
                dst[used] = de->d_type == DT_DIR ? 'd' : 'f';
                dst[used + 1] = (char)nl;
                memcpy(dst + used + 2, de->d_name, nl + 1);
                used += nl + 3;
        }
        qsort_r(run->off, n, sizeof(run->off[0]), walk_off_cmp, dst);
        if (walk_heap_push(l, run) < 0) {
                free(run);
                return -ENOMEM;
        }
        return 0;
}

static bool walk_same(int fd, const walk_level *l)
{
        struct stat st;

        return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == l->dev &&
               st.st_ino == l->ino;
}

/* Push the directory `fd` (taken over in every case) whose entries' paths start with the
 * first `plen` bytes of w->path; then close the level that left the window of open ones. */
static int walk_push(sh_fs_walker *w, int fd, size_t plen)
{
        walk_level *l;
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0) {
                r = -errno;
                sh_close(fd);
                return r;
        }
        r = grow(&w->lv, &w->cap, w->depth + 1, sizeof(*w->lv));
        if (r < 0) {
                sh_close(fd);
                return r;
        }
        l = &w->lv[w->depth++];
        *l = (walk_level){.fd = fd, .dev = st.st_dev, .ino = st.st_ino, .plen = plen};
        /* The root (level 0) stays open: every fallback reopen starts from an open level. */
        if (w->depth > WALK_OPEN + 1)
                w->lv[w->depth - 1 - WALK_OPEN].fd = sh_close(w->lv[w->depth - 1 - WALK_OPEN].fd);
        return 0;
}

/* Drop levels down to `depth` (exclusive of the ones below it). */
static void walk_truncate(sh_fs_walker *w, size_t depth)
{
        while (w->depth > depth)
                walk_level_done(&w->lv[--w->depth]);
}

/* Start reopening level `t` by name: from the nearest open level above it. */
static void walk_reopen_start(sh_fs_walker *w, size_t t)
{
        size_t a = t - 1;

        while (a > 0 && w->lv[a].fd < 0)
                a--;
        w->reopen = t;
        w->reopen_at = a;
}

/* One level of the fallback reopen: open the child of reopen_at on the way to `reopen` by
 * its name (from w->path), without following links, and accept it only if it is the very
 * directory recorded. A level that is gone, or is something else now, ends the levels below
 * it: they are skipped like vanished ones, and whatever replaced them is never entered. */
static int walk_reopen_step(sh_fs_walker *w)
{
        size_t j = w->reopen_at + 1, start = w->lv[j - 1].plen, nl = w->lv[j].plen - 1 - start;
        char name[NAME_MAX + 1];
        int fd;

        memcpy(name, w->path + start, nl);
        name[nl] = '\0';
        fd = openat(w->lv[j - 1].fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && !is_absent(-errno))
                return -errno;
        if (fd < 0 || !walk_same(fd, &w->lv[j])) {
                sh_close(fd);
                walk_truncate(w, j);
                w->reopen = 0;
                return 0;
        }
        w->lv[j].fd = fd;
        /* keep only the levels the window allows (and the root) */
        if (j - 1 > 0 && j - 1 + WALK_OPEN <= w->reopen)
                w->lv[j - 1].fd = sh_close(w->lv[j - 1].fd);
        w->reopen_at = j;
        if (j == w->reopen)
                w->reopen = 0;
        return 0;
}

/* Leave the top level (read to the end, every entry visited) and make its parent usable. */
static void walk_leave(sh_fs_walker *w)
{
        walk_level *l = &w->lv[w->depth - 1], *p = w->depth > 1 ? l - 1 : NULL;

        if (p && p->fd < 0) {
                /* ".." of a directory we hold is its parent now; accepted only if it is the
                 * parent we entered from (dev/ino), else reopened by name, checked alike. */
                int fd = openat(l->fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                if (fd >= 0 && walk_same(fd, p))
                        p->fd = fd;
                else {
                        sh_close(fd);
                        walk_reopen_start(w, w->depth - 2);
                }
        }
        walk_level_done(l);
        w->depth--;
}

int sh_fs_walk_open(int rootfd, const char *root_path, sh_fs_walker **ret, sh_error **err)
{
        sh_fs_walker *w;
        size_t plen = strlen(root_path);
        int fd, r;

        w = calloc(1, sizeof(*w));
        if (!w)
                return sh_error_make(err, ENOMEM, "walk");
        if (grow(&w->path, &w->path_cap, plen + 2, 1) < 0) {
                sh_fs_walk_free(w);
                return sh_error_make(err, ENOMEM, "walk");
        }
        memcpy(w->path, root_path, plen);
        if (plen > 0)
                w->path[plen++] = '/';
        w->path[plen] = '\0';

        /* O_NOFOLLOW: a link at the walk root is not followed (links are never followed
         * by a walk); absent, a link or a non-directory all yield nothing. */
        fd = sh_safe_openat(rootfd, root_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (fd < 0) {
                if (!is_absent(fd)) {
                        sh_fs_walk_free(w);
                        return sh_error_make(err, -fd, "open '%s'", root_path);
                }
        } else {
                r = walk_push(w, fd, plen);
                if (r < 0) {
                        sh_fs_walk_free(w);
                        return sh_error_make(err, -r, "open '%s'", root_path);
                }
        }
        *ret = w;
        return 0;
}

/* Take the smallest entry of the top level into w->path and visit it: 1 with *ret for a
 * regular file, 0 otherwise (a directory was entered, or the entry was skipped). */
static int walk_visit(sh_fs_walker *w, sh_fs_entry *ret, sh_error **err)
{
        walk_level *l = &w->lv[w->depth - 1];
        walk_run *run = l->heap[0];
        const char *e = walk_run_head(run);
        size_t nl = (unsigned char)e[1], plen = l->plen;
        char type = e[0], *name;
        bool again;
        struct stat st;
        int fd, r;

        if (grow(&w->path, &w->path_cap, plen + nl + 2, 1) < 0)
                return sh_error_make(err, ENOMEM, "walk");
        name = w->path + plen;
        /* A directory listed while a sandbox renames entries in it can show a name in two
         * getdents64 buffers; the merge puts both copies next to each other: visit one. */
        again = l->visited && strcspn(name, "/") == nl && memcmp(name, e + 2, nl) == 0;
        memcpy(name, e + 2, nl + 1);
        l->visited = true;
        if (++run->next == run->n) {
                l->heap[0] = l->heap[--l->nheap];
                free(run);
        }
        walk_heap_down(l, 0);
        if (again)
                return 0;

        if (type == 'f') {
                if (fstatat(l->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)
                                return 0; /* vanished mid-walk */
                        return sh_error_make(err, errno, "stat '%s'", w->path);
                }
                /* An entry whose type changed since the listing is skipped like a vanished
                 * one: descending now would break the sort order we promised. */
                if (!S_ISREG(st.st_mode))
                        return 0;
                *ret = (sh_fs_entry){
                        .path = w->path,
                        .size = (uint64_t)st.st_size,
                        .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
                        .dev = st.st_dev,
                        .ino = st.st_ino,
                        .nlink = st.st_nlink,
                };
                return 1;
        }
        /* O_NOFOLLOW|O_DIRECTORY: a directory swapped for a link or a file is refused; the
         * identity of what we did open is recorded by walk_push for every later reopen. */
        fd = openat(l->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (is_absent(-errno))
                        return 0;
                return sh_error_make(err, errno, "open '%s'", w->path);
        }
        w->path[plen + nl] = '/';
        w->path[plen + nl + 1] = '\0';
        r = walk_push(w, fd, plen + nl + 1);
        if (r < 0)
                return sh_error_make(err, -r, "open '%s'", w->path);
        return 0;
}

int sh_fs_walk_next(sh_fs_walker *w, sh_fs_entry *ret, sh_error **err)
{
        unsigned work = 0;

        while (w->depth > 0) {
                walk_level *l;
                int r;

                if (work >= WALK_STEP)
                        return SH_FS_WALK_AGAIN;
                work++;
                if (w->reopen) {
                        r = walk_reopen_step(w);
                        if (r < 0)
                                return sh_error_make(err, -r, "reopen below '%.*s'",
                                                     (int)w->lv[w->reopen_at].plen, w->path);
                        continue;
                }
                l = &w->lv[w->depth - 1];
                if (!l->listed) {
                        r = walk_read(l, &work);
                        if (r < 0)
                                return sh_error_make(err, -r, "read '%.*s'", (int)l->plen, w->path);
                        continue;
                }
                if (l->nheap == 0) {
                        walk_leave(w);
                        continue;
                }
                r = walk_visit(w, ret, err);
                if (r != 0)
                        return r;
        }
        return 0;
}

void sh_fs_walk_free(sh_fs_walker *w)
{
        if (!w)
                return;
        walk_truncate(w, 0);
        free(w->lv);
        free(w->path);
        free(w);
}

/* ---- disk usage --------------------------------------------------------------------- */

/* Only inodes with more than one link can be met twice, so only those enter the set: the
 * memory stays proportional to the hard-linked files, not to all files. */
typedef struct usage_slot {
        uint64_t dev, ino;
        bool used;
} usage_slot;

struct sh_fs_usage {
        uint64_t bytes;
        usage_slot *tab;
        size_t cap, n; /* cap is 0 or a power of two; n <= cap / 2 */
};

static uint64_t usage_hash(uint64_t dev, uint64_t ino)
{
        uint64_t x = ino ^ (dev * 0x9e3779b97f4a7c15ULL);

        /* splitmix64 finaliser */
        x ^= x >> 30;
        x *= 0xbf58476d1ce4e5b9ULL;
        x ^= x >> 27;
        x *= 0x94d049bb133111ebULL;
        x ^= x >> 31;
        return x;
}

/* true if inserted, false if present */
static bool usage_insert(usage_slot *tab, size_t cap, uint64_t dev, uint64_t ino)
{
        size_t i = (size_t)usage_hash(dev, ino) & (cap - 1);

        while (tab[i].used) {
                if (tab[i].dev == dev && tab[i].ino == ino)
                        return false;
                i = (i + 1) & (cap - 1);
        }
        tab[i] = (usage_slot){.dev = dev, .ino = ino, .used = true};
        return true;
}

sh_fs_usage *sh_fs_usage_new(void)
{
        return calloc(1, sizeof(sh_fs_usage));
}

int sh_fs_usage_add(sh_fs_usage *u, const sh_fs_entry *e)
{
        if (e->nlink > 1) {
                if ((u->n + 1) * 2 > u->cap) {
                        size_t ncap = u->cap ? u->cap * 2 : 64;
                        usage_slot *nt;

                        if (ncap > SIZE_MAX / sizeof(*nt))
                                return -ENOMEM;
                        nt = calloc(ncap, sizeof(*nt));
                        if (!nt)
                                return -ENOMEM;
                        for (size_t i = 0; i < u->cap; i++)
                                if (u->tab[i].used)
                                        usage_insert(nt, ncap, u->tab[i].dev, u->tab[i].ino);
                        free(u->tab);
                        u->tab = nt;
                        u->cap = ncap;
                }
                if (!usage_insert(u->tab, u->cap, (uint64_t)e->dev, (uint64_t)e->ino))
                        return 0;
                u->n++;
        }
        u->bytes += e->size;
        return 0;
}

uint64_t sh_fs_usage_bytes(const sh_fs_usage *u)
{
        return u->bytes;
}

void sh_fs_usage_free(sh_fs_usage *u)
{
        if (!u)
                return;
        free(u->tab);
        free(u);
}
