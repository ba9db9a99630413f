/* fsops.c: the file operations of both surfaces on top of safe_open, under a surface's policy
 * (sh_fs_ctx: guard, may_change, owner, trash): mkdir -p, parents, atomic upload, non-blocking
 * read, stat queries, unlink/rename/detach (the walk is walk.c, the tree remover remove.c).
 * Nothing here ever resolves a client path without the root fd. */
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

#include "sh/fsprobe.h"
#include "sh/macro.h"
#include "sh/safe_open.h"
#include "sh/syscalls.h"
#include "sh/trash.h"
#include "sh/util.h"

#include "fs-internal.h"

/* ---- the policy: parents, mkdir -p, the trash --------------------------------------- */

/* A lookup's -errno as c's contract has it (loop_absent: too many links is absence). */
static int lookup_errno(const sh_fs_ctx *c, int r)
{
        return c->loop_absent && r == -ELOOP ? ENOENT : -r;
}

/* may_change of directory fd: 0 or -errno. */
static int may_change(const sh_fs_ctx *c, int fd)
{
        return c->may_change ? c->may_change(c->data, fd) : 0;
}

int sh_fs_mkdir_p_at(const sh_fs_ctx *c, const char *path, mode_t mode, const sh_fs_owner *own,
                     sh_error **err)
{
        const sh_fs_owner *pown = c->own;
        const mode_t pmode = c->dir_mode ? c->dir_mode : 0755;
        const sh_safe_mkdir how = {.mode = mode ? mode : pmode,
                                   .uid = own    ? own->uid
                                          : pown ? pown->uid
                                                 : (uid_t)-1,
                                   .gid = own    ? own->gid
                                          : pown ? pown->gid
                                                 : (gid_t)-1,
                                   .parents_mode = pmode,
                                   .parents_uid = pown ? pown->uid : (uid_t)-1,
                                   .parents_gid = pown ? pown->gid : (gid_t)-1,
                                   .may_create = c->may_change,
                                   .data = c->data};
        int fd = sh_safe_mkdir_p(c->root, path, &how, c->guard);

        if (fd >= 0)
                return fd;
        if (fd == -EEXIST)
                return sh_error_make(err, EEXIST, "'%s' exists and is not a directory", path);
        if (fd == -ENOTDIR)
                return sh_error_make(err, ENOTDIR, "'%s': a component is not a directory", path);
        return sh_error_make(err, -fd, "mkdir '%s'", path);
}

int sh_fs_mkdir_p(const sh_fs_ctx *c, const char *path, sh_error **err)
{
        int fd = sh_fs_mkdir_p_at(c, path, 0, NULL, err);

        if (fd < 0)
                return fd;
        sh_close(fd);
        return 0;
}

/* The parent of non-root `path` split off: its path (*ret_parent, the caller's) and base. */
static int split(const char *path, char **ret_parent, const char **ret_base, sh_error **err)
{
        if (!*path)
                return sh_error_make(err, EINVAL, "the root has no parent");
        if (sh_path_split(path, ret_parent, ret_base) < 0)
                return sh_error_make(err, ENOMEM, "split '%s'", path);
        /* base is used with *at() calls on the parent: "." or ".." would name the parent
         * or the grandparent. Normalised paths never hold them; refuse anyway. */
        if (!**ret_base || STREQ(*ret_base, ".") || STREQ(*ret_base, ".."))
                return sh_error_make(err, EINVAL, "'%s': bad last component", path);
        return 0;
}

/* A parent opened, checked by may_change. */
static int checked_parent(const sh_fs_ctx *c, int fd, const char *path, sh_error **err)
{
        int r;

        if (fd >= 0 && (r = may_change(c, fd)) < 0) {
                sh_close(fd);
                return sh_error_make(err, -r, "'%s'", path);
        }
        return fd;
}

int sh_fs_open_parent(const sh_fs_ctx *c, const char *path, const char **ret_base, sh_error **err)
{
        int fd;

        if (!*path)
                return sh_error_make(err, EINVAL, "the root has no parent");
        fd = sh_safe_open_parent_guarded(c->root, path, ret_base, c->guard);
        if (fd < 0)
                return sh_error_make(err, lookup_errno(c, fd), "'%s'", path);
        return checked_parent(c, fd, path, err);
}

int sh_fs_open_parent_p(const sh_fs_ctx *c, const char *path, const char **ret_base, sh_error **err)
{
        _cleanup_free_ char *parent = NULL;
        sh_error *e = NULL;
        int fd;

        if (split(path, &parent, ret_base, err) < 0)
                return -1;
        fd = sh_fs_mkdir_p_at(c, parent, 0, NULL, &e);
        if (fd < 0 && e && e->errnum == EEXIST) {
                /* open("f/x") with a file f is ENOTDIR too */
                sh_error_release(&e);
                return sh_error_make(err, ENOTDIR, "'%s' exists and is not a directory", parent);
        }
        if (fd < 0) {
                *err = e;
                return fd;
        }
        return checked_parent(c, fd, path, err);
}

int sh_fs_open_entry(const sh_fs_ctx *c, const char *path, const char **ret_base,
                     struct stat *ret_st, sh_error **err)
{
        _cleanup_close_ int pfd = sh_fs_open_parent(c, path, ret_base, err);

        if (pfd < 0)
                return pfd;
        if (fstatat(pfd, *ret_base, ret_st, AT_SYMLINK_NOFOLLOW) < 0)
                return sh_error_make(err, errno, "'%s'", path);
        return TAKE_FD(pfd);
}

int sh_fs_trash_of(const sh_fs_ctx *c, int *pfd, int *ret_trashfd)
{
        *ret_trashfd = c->trashfd;
        return c->trash ? c->trash(c->trash_data ? c->trash_data : c->data, pfd, ret_trashfd) : 0;
}

/* ---- an unnamed file staged beside an entry ------------------------------------------ */

int sh_fs_stage(const sh_fs_ctx *c, int pfd, sh_fs_staged *s, sh_error **err)
{
        int r;

        *s = (sh_fs_staged){.pfd = pfd, .trashfd = -1};
        if ((r = sh_fs_trash_of(c, &s->pfd, &s->trashfd)) < 0)
                sh_error_make(err, -r, "the directory's trash");
        else if (sh_fs_upload_begin(s->pfd, &s->u, err) == 0)
                return 0;
        s->pfd = sh_close(s->pfd);
        return -1;
}

int sh_fs_stage_commit(sh_fs_staged *s, const char *base, const sh_fs_owner *own, mode_t mode,
                       sh_error **err)
{
        int k = sh_fs_upload_commit_at(s->u, s->pfd, base, own, mode, s->trashfd, err);

        if (k >= 0)
                sh_fs_upload_abort(TAKE_PTR(s->u), -1); /* named now: its blocks are the file's */
        return k;
}

int sh_fs_stage_drop(sh_fs_staged *s)
{
        s->pfd = sh_close(s->pfd);
        return sh_fs_upload_take_fd(TAKE_PTR(s->u));
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

int sh_fs_upload_take_fd(sh_fs_upload *u)
{
        int fd;

        if (!u)
                return -1;
        fd = u->fd;
        free(u);
        return fd;
}

int sh_fs_upload_abort(sh_fs_upload *u, int trashfd)
{
        int kept;

        if (!u)
                return 0;
        kept = sh_fs_trash_unnamed(u->fd, trashfd);
        sh_close(u->fd);
        free(u);
        return kept;
}

/* Give the unnamed file a name `name` in `pfd`. linkat(AT_EMPTY_PATH) needs
 * CAP_DAC_READ_SEARCH (ENOENT without it); the /proc/self/fd route needs only /proc. Neither
 * replaces an existing entry, so a name a sandbox planted is EEXIST, never clobbered. */
int sh_fs_link_unnamed(int fd, int pfd, const char *name)
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

int sh_fs_upload_fd(const sh_fs_upload *u)
{
        return u->fd;
}

int sh_fs_upload_commit_at(sh_fs_upload *u, int pfd, const char *base, const sh_fs_owner *own,
                           mode_t mode, int trashfd, sh_error **err)
{
        struct stat st;

        /* A directory at the target: refuse before touching anything (renameat would say
         * EISDIR too, but only after the temporary name existed). */
        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                return sh_error_make(err, EISDIR, "'%s' is a directory", base);
        /* Owner and mode while still unnamed: never visible with the daemon's ids. In a set-gid
         * directory (a named volume's) the group stays the one it inherited, as for a file the
         * sandbox makes itself. */
        if (fstat(pfd, &st) < 0)
                return sh_error_make(err, errno, "stat the upload's directory");
        if (own && fchown(u->fd, own->uid, st.st_mode & S_ISGID ? (gid_t)-1 : own->gid) < 0)
                return sh_error_make(err, errno, "chown upload");
        if (fchmod(u->fd, mode) < 0)
                return sh_error_make(err, errno, "chmod upload");
        /* Readers see old or new, never a mix; a link planted at the target is replaced, not
         * written through; the old file goes into the trash (trash.h). */
        return sh_fs_trash_commit(u->fd, pfd, base, trashfd, err);
}

int sh_fs_upload_commit(sh_fs_upload *u, const sh_fs_ctx *c, const char *path, bool *ret_kept,
                        sh_error **err)
{
        _cleanup_close_ int pfd = -1;
        const char *base;
        int r, trashfd = -1;

        *ret_kept = false;
        if (!*path)
                r = sh_error_make(err, EISDIR, "the root is a directory");
        else if ((pfd = sh_fs_open_parent_p(c, path, &base, err)) < 0)
                r = pfd;
        else if ((r = sh_fs_trash_of(c, &pfd, &trashfd)) < 0)
                r = sh_error_make(err, -r, "'%s'", path);
        else
                r = sh_fs_upload_commit_at(u, pfd, base, c->own, 0644, trashfd, err);
        if (r > 0)
                *ret_kept = true;
        /* Committed, its blocks are the file's; refused, a big one waits in the trash. */
        if (sh_fs_upload_abort(u, r < 0 ? trashfd : -1) > 0)
                *ret_kept = true;
        return r < 0 ? r : 0;
}

/* ---- read and queries --------------------------------------------------------------- */

int sh_fs_statx(int fd, struct statx *s)
{
        return statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME,
                     s) < 0
                       ? -errno
                       : 0;
}

static int may_read(const sh_fs_ctx *c, int fd, struct statx *s, const char *path, sh_error **err)
{
        int r = sh_fs_statx(fd, s);

        if (r == 0 && c->may_read)
                r = c->may_read(c->data, fd, s);
        return r < 0 ? sh_error_make(err, -r, "'%s'", path) : 0;
}

int sh_fs_open_read_at(const sh_fs_ctx *c, const char *path, int *ret_fd, struct statx *ret_stx,
                       sh_error **err)
{
        _cleanup_close_ int pfd = -1, fd = -1;
        uint64_t size;

        /* O_PATH opens nothing: no FIFO open that blocks, no device driver open routine. */
        pfd = sh_safe_openat_guarded(c->root, path, O_PATH, 0, c->guard);
        if (pfd == -ELOOP)
                return sh_error_make(err, ENOENT, "'%s': too many levels of links", path);
        if (pfd < 0)
                return sh_error_make(err, -pfd, "open '%s'", path);
        /* the entry before the open: one its reader may not read is never opened */
        if (may_read(c, pfd, ret_stx, path, err) < 0 ||
            sh_fs_reopen_read(pfd, path, &fd, &size, err) < 0 ||
            may_read(c, fd, ret_stx, path, err) < 0)
                return -1;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int sh_fs_open_read(int rootfd, const char *path, int *ret_fd, uint64_t *ret_size, sh_error **err)
{
        const sh_fs_ctx c = {.root = rootfd};
        struct statx s;

        if (sh_fs_open_read_at(&c, path, ret_fd, &s, err) < 0)
                return -1;
        *ret_size = s.stx_size;
        return 0;
}

int sh_fs_read_bounded(int rootfd, const char *path, size_t max, char **ret, size_t *ret_len,
                       sh_error **err)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        uint64_t size;
        size_t got = 0;
        ssize_t n;

        if (sh_fs_open_read(rootfd, path, &fd, &size, err) < 0)
                return -1;
        if (sh_fs_on_kernel_fs(fd))
                return sh_error_make(err, EACCES, "'%s' is on a kernel filesystem", path);
        if (!(buf = malloc(max ? max : 1)))
                return sh_error_make(err, ENOMEM, "read '%s'", path);
        while (got < max && (n = read(fd, buf + got, max - got)) != 0) {
                if (n < 0 && errno != EINTR)
                        return sh_error_make(err, errno, "read '%s'", path);
                got += n > 0 ? (size_t)n : 0;
        }
        *ret = TAKE_PTR(buf);
        *ret_len = got;
        return 0;
}

int sh_fs_reopen_read(int pfd, const char *path, int *ret_fd, uint64_t *ret_size, sh_error **err)
{
        _cleanup_close_ int fd = -1;
        struct stat st, st2;
        char proc[64];

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
        if (sh_fs_is_absent(fd)) {
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
                if (sh_fs_is_absent(fd)) {
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

int sh_fs_unlink_file(const sh_fs_ctx *c, const char *path, sh_error **err)
{
        _cleanup_close_ int pfd = -1;
        const char *base;
        struct stat st;
        int r, trashfd;

        if (!*path)
                return sh_error_make(err, EISDIR, "the root is a directory");
        /* AT_SYMLINK_NOFOLLOW: a link is removed itself, its target is never looked at. */
        if ((pfd = sh_fs_open_entry(c, path, &base, &st, err)) < 0)
                return pfd;
        if (S_ISDIR(st.st_mode))
                return sh_error_make(err, EISDIR, "'%s' is a directory", path);
        if ((r = sh_fs_trash_of(c, &pfd, &trashfd)) < 0)
                return sh_error_make(err, -r, "'%s'", path);
        /* The entry itself, a link never followed, into the trash (trash.h). */
        if (trashfd >= 0)
                return sh_fs_trash_entry(pfd, base, false, trashfd, err);
        /* Without AT_REMOVEDIR unlinkat refuses a directory swapped in meanwhile (EISDIR). */
        if (unlinkat(pfd, base, 0) < 0)
                return sh_error_make(err, errno, "unlink '%s'", path);
        return 0;
}

int sh_fs_rename(const sh_fs_ctx *c, const char *src, const char *dst, unsigned flags,
                 bool *ret_src, sh_error **err)
{
        const bool noreplace = flags & SH_FS_NOREPLACE;
        _cleanup_close_ int spfd = -1, dpfd = -1;
        const char *sbase, *dbase;
        struct stat st;
        int r, trashfd = -1;
        bool at_src = true;

        if (!*src || (!*dst && !noreplace)) {
                r = sh_error_make(err, EINVAL, "cannot rename the root");
                goto out;
        }
        /* Check the source before creating the destination's parents: a failed rename
         * should leave no new directories behind. */
        if ((spfd = sh_fs_open_entry(c, src, &sbase, &st, err)) < 0) {
                r = spfd;
                goto out;
        }
        at_src = false;
        if (!*dst)
                r = sh_error_make(err, EEXIST, "the root exists");
        else if ((dpfd = sh_fs_open_parent_p(c, dst, &dbase, err)) < 0)
                r = dpfd;
        /* The names themselves: links at either end are moved, never followed. NOREPLACE: an
         * existing destination is an error, never clobbered. */
        else if (noreplace)
                r = renameat2(spfd, sbase, dpfd, dbase, RENAME_NOREPLACE) < 0
                            ? sh_error_make(err, errno, "rename to '%s'", dst)
                            : 0;
        else if ((r = sh_fs_trash_of(c, &dpfd, &trashfd)) < 0)
                r = sh_error_make(err, -r, "'%s'", dst);
        /* a file replaced at dst goes into the trash (trash.h) */
        else
                r = sh_fs_trash_rename(spfd, sbase, dpfd, dbase, trashfd, err);
out:
        if (ret_src)
                *ret_src = r < 0 && at_src;
        return r;
}

int sh_fs_detach_dir(const sh_fs_ctx *c, const char *path, const char *trash_name, sh_error **err)
{
        _cleanup_close_ int pfd = -1;
        const char *base;
        struct stat st;

        if (!*path)
                return sh_error_make(err, EINVAL, "cannot remove the root");
        if ((pfd = sh_fs_open_entry(c, path, &base, &st, err)) < 0)
                return pfd;
        if (!S_ISDIR(st.st_mode))
                return sh_error_make(err, ENOTDIR, "'%s' is not a directory", path);
        /* If a racer swaps the directory for a link now, the link is what moves to the
         * trash, and remove_tree never follows it. NOREPLACE: never clobber trash. */
        if (renameat2(pfd, base, c->trashfd, trash_name, RENAME_NOREPLACE) < 0) {
                if (errno != EINVAL && errno != ENOSYS)
                        return sh_error_make(err, errno, "detach '%s'", path);
                /* filesystem without RENAME_NOREPLACE: the trash name is unique anyway */
                if (renameat(pfd, base, c->trashfd, trash_name) < 0)
                        return sh_error_make(err, errno, "detach '%s'", path);
        }
        return 0;
}

/* ---- shared with walk.c and remove.c ------------------------------------------------- */

/* A random name that no sandbox process can predict, so it cannot pre-plant an entry there
 * to make us fail (it could still collide by chance; callers retry on EEXIST). */
void sh_fs_random_name(char *buf, size_t size, const char *prefix)
{
        static unsigned counter;
        uint64_t rnd = 0;

        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
                rnd = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&rnd;
        snprintf(buf, size, "%s%016llx.%u", prefix, (unsigned long long)rnd, counter++);
}
