/* remove.c: the tree remover (never follows a link, bounded fds however deep, passes for the
 * deepest parts), on top of the tree walker; a directory's removal under a policy, into its
 * trash or in place a step at a time. */
#include "sh/remove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/fsops.h"
#include "sh/macro.h"
#include "sh/syscalls.h"
#include "sh/tree.h"

#include "fs-internal.h"

/* At most this many directory levels are open at once; deeper subtrees are moved up (see
 * rm_contents), so fd use is bounded whatever depth a sandbox builds. */
#define RM_MAX_OPEN 64

typedef struct rm_state {
        int topfd;
        bool dirs_only; /* cgroupfs: directories only */
        bool moved;     /* this pass moved a subtree up: another pass */
        int first;      /* the first error, -errno */
        sh_error **err;
        bool (*may_enter)(void *data, int fd);
        void *data;
} rm_state;

/* Keep going past failures, but remember the first one for the caller. */
static void rm_fail(rm_state *st, int errnum, const char *what, const char *name)
{
        if (errnum == ENOENT || st->first)
                return;
        st->first = -errnum;
        sh_error_make(st->err, errnum, "remove tree: %s '%s'", what, name);
}

/* A directory at the deepest level we keep open: renamed up into the top under a random name,
 * for the next pass. */
static void move_up(rm_state *st, int dirfd, const char *name)
{
        char nm[64];
        int r = -EEXIST;

        for (int i = 0; i < SH_FS_TMPNAME_TRIES && r == -EEXIST; i++) {
                sh_fs_random_name(nm, sizeof(nm), ".sh-rm.");
                r = renameat2(dirfd, name, st->topfd, nm, RENAME_NOREPLACE) < 0 ? -errno : 0;
        }
        if (r == 0)
                st->moved = true;
        else
                rm_fail(st, -r, "move up", name);
}

/* Only unlinkat and O_NOFOLLOW opens relative to directory fds we hold: no link is ever
 * followed and no path is looked up twice. */
static int rm_visit(const sh_tree_ev *ev, void *data)
{
        rm_state *st = data;

        switch (ev->kind) {
        case SH_TREE_ENTRY:
                if (ev->type != DT_DIR) {
                        if (st->dirs_only)
                                return 0;
                        /* a link is removed itself: unlinkat never follows */
                        if (unlinkat(ev->dirfd, ev->name, 0) == 0)
                                return 0;
                        if (errno != EISDIR) {
                                rm_fail(st, errno, "unlink", ev->name);
                                return 0;
                        }
                        /* it became a directory meanwhile: descend below */
                }
                if (ev->depth >= RM_MAX_OPEN) {
                        move_up(st, ev->dirfd, ev->name);
                        return 0;
                }
                return SH_TREE_DESCEND;
        case SH_TREE_LEAVE:
                if (unlinkat(ev->dirfd, ev->name, AT_REMOVEDIR) < 0)
                        rm_fail(st, errno, "rmdir", ev->name);
                return 0;
        case SH_TREE_ERROR:
                /* swapped for a link or file since readdir: unlink that */
                if (STREQ(ev->what, "open") && (ev->err == ENOTDIR || ev->err == ELOOP) &&
                    !st->dirs_only) {
                        if (unlinkat(ev->dirfd, ev->name, 0) < 0)
                                rm_fail(st, errno, "unlink", ev->name);
                        return 0;
                }
                rm_fail(st, ev->err, ev->what, ev->name ? ev->name : ".");
                return 0;
        case SH_TREE_DIR:
                /* a directory the caller's rules keep us out of: left as it is */
                if (st->may_enter && !st->may_enter(st->data, ev->dirfd)) {
                        rm_fail(st, EPERM, "enter", ev->depth ? ev->name : ".");
                        return SH_TREE_SKIP;
                }
                return 0;
        }
        return 0;
}

/* The remover, a step at a time: the entry itself looked at (a file or a link is unlinked, a
 * directory opened with O_NOFOLLOW), then its tree emptied an event of the tree walker a step
 * (sh_tree_step), pass after pass, then the directory itself removed.
 *
 * A directory deeper than RM_MAX_OPEN levels is moved (renamed) up into the top under a random
 * name and removed in a later pass, so a pathologically deep tree costs passes, never unbounded
 * fds or stack. The passes have no cap: a cap would leave any tree deeper than
 * cap * RM_MAX_OPEN on disk for good. They end because each pass that moves a subtree brings it
 * RM_MAX_OPEN - 1 levels closer to the top (and removes what it climbed through), so a tree of
 * depth D takes about D / 63 passes. (cgroupfs renames only within a parent: there the move
 * fails, and the error is reported; cgroups are never that deep.) */
typedef enum { RM_START, RM_WALK, RM_TOP, RM_DONE } rm_phase;

struct sh_fs_remover {
        rm_state st;
        int dirfd; /* borrowed */
        char *name;
        sh_tree_walker *w;
        rm_phase phase;
        sh_error *e; /* the first error's message (sh_fs_remove_tree's) */
};

static int remover_new(int dirfd, const char *name, bool dirs_only, sh_fs_remover **ret)
{
        sh_fs_remover *rm = calloc(1, sizeof(*rm));

        if (!rm || !(rm->name = strdup(name))) {
                free(rm);
                return -ENOMEM;
        }
        rm->dirfd = dirfd;
        rm->st.topfd = -1;
        rm->st.dirs_only = dirs_only;
        rm->st.err = &rm->e;
        *ret = rm;
        return 0;
}

int sh_fs_remover_new(int dirfd, const char *name, bool (*may_enter)(void *data, int fd),
                      void *data, sh_fs_remover **ret)
{
        int r = remover_new(dirfd, name, false, ret);

        if (r == 0) {
                (*ret)->st.may_enter = may_enter;
                (*ret)->st.data = data;
        }
        return r;
}

/* The entry itself: a non-directory unlinked (done), a directory opened for its tree. */
static rm_phase rm_start(sh_fs_remover *rm)
{
        rm_state *st = &rm->st;
        struct stat top;
        int fd, r;

        if (fstatat(rm->dirfd, rm->name, &top, AT_SYMLINK_NOFOLLOW) < 0) {
                rm_fail(st, errno, "stat", rm->name);
                return RM_DONE;
        }
        if (!S_ISDIR(top.st_mode)) {
                if (st->dirs_only)
                        rm_fail(st, ENOTDIR, "not a directory", rm->name);
                else if (unlinkat(rm->dirfd, rm->name, 0) < 0)
                        rm_fail(st, errno, "unlink", rm->name);
                return RM_DONE;
        }
        fd = openat(rm->dirfd, rm->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                /* replaced by a link or file since the stat: remove that entry itself */
                if (errno != ENOTDIR && errno != ELOOP)
                        rm_fail(st, errno, "open", rm->name);
                else if (unlinkat(rm->dirfd, rm->name, 0) < 0)
                        rm_fail(st, errno, "unlink", rm->name);
                return RM_DONE;
        }
        st->topfd = fd;
        if ((r = sh_tree_open(fd, RM_MAX_OPEN, &rm->w)) < 0) {
                rm_fail(st, -r, "open", ".");
                return RM_TOP;
        }
        return RM_WALK;
}

/* One event of this pass; at its end another pass when it moved a subtree up. */
static rm_phase rm_walk(sh_fs_remover *rm)
{
        rm_state *st = &rm->st;
        int r = sh_tree_step(rm->w, rm_visit, st);

        if (r > 0)
                return RM_WALK;
        sh_tree_free(TAKE_PTR(rm->w));
        if (r < 0) {
                rm_fail(st, -r, "open", ".");
                return RM_TOP;
        }
        if (!st->moved)
                return RM_TOP;
        st->moved = false;
        if ((r = sh_tree_open(st->topfd, RM_MAX_OPEN, &rm->w)) < 0) {
                rm_fail(st, -r, "open", ".");
                return RM_TOP;
        }
        return RM_WALK;
}

int sh_fs_remover_step(sh_fs_remover *rm)
{
        switch (rm->phase) {
        case RM_START:
                rm->phase = rm_start(rm);
                break;
        case RM_WALK:
                rm->phase = rm_walk(rm);
                break;
        case RM_TOP:
                if (unlinkat(rm->dirfd, rm->name, AT_REMOVEDIR) < 0)
                        rm_fail(&rm->st, errno, "rmdir", rm->name);
                rm->phase = RM_DONE;
                break;
        case RM_DONE:
                break;
        }
        return rm->phase != RM_DONE;
}

int sh_fs_remover_errno(const sh_fs_remover *rm)
{
        return -rm->st.first;
}

sh_fs_remover *sh_fs_remover_free(sh_fs_remover *rm)
{
        if (!rm)
                return NULL;
        sh_tree_free(rm->w);
        sh_close(rm->st.topfd);
        sh_error_release(&rm->e);
        free(rm->name);
        free(rm);
        return NULL;
}

static int remove_tree(int dirfd, const char *name, bool dirs_only, sh_error **err)
{
        sh_fs_remover *rm;
        int r = remover_new(dirfd, name, dirs_only, &rm);

        if (r < 0)
                return sh_error_make(err, -r, "remove tree: '%s'", name);
        while (sh_fs_remover_step(rm))
                ;
        r = rm->st.first;
        if (r < 0 && err && !*err)
                *err = TAKE_PTR(rm->e);
        sh_fs_remover_free(rm);
        return r;
}

int sh_fs_remove_tree(int dirfd, const char *name, sh_error **err)
{
        return remove_tree(dirfd, name, false, err);
}

int sh_fs_remove_dirs(int dirfd, const char *name, sh_error **err)
{
        return remove_tree(dirfd, name, true, err);
}

/* ---- a directory's removal under a policy ------------------------------------------------ */

int sh_fs_rmdir_open(sh_fs_rmdir *d, const sh_fs_ctx *c, const char *path, struct stat *ret_st,
                     sh_error **err)
{
        const char *base;
        int r;

        *d = (sh_fs_rmdir){.pfd = -1, .trashfd = -1};
        memset(ret_st, 0, sizeof(*ret_st));
        if ((d->pfd = sh_fs_open_entry(c, path, &base, ret_st, err)) < 0)
                return -1;
        if (!S_ISDIR(ret_st->st_mode))
                return sh_error_make(err, ENOTDIR, "'%s' is not a directory", path);
        if ((r = sh_fs_trash_of(c, &d->pfd, &d->trashfd)) < 0)
                return sh_error_make(err, -r, "'%s'", path);
        if (!(d->base = strdup(base)))
                return sh_error_make(err, ENOMEM, "out of memory");
        return 0;
}

static void rmdir_failed(sh_fs_rmdir *d, int errnum)
{
        if (errnum != ENOENT)
                d->errnum = errnum;
}

int sh_fs_rmdir_step(sh_fs_rmdir *d, bool (*may_enter)(void *data, int fd), void *data)
{
        sh_error *err = NULL;
        int k;

        if (d->trashfd >= 0) {
                if ((k = sh_fs_trash_entry(d->pfd, d->base, true, d->trashfd, &err)) < 0)
                        rmdir_failed(d, err ? err->errnum : EIO);
                sh_error_release(&err);
                d->kept = k > 0;
                return 0;
        }
        if (!d->rm) {
                if ((k = sh_fs_remover_new(d->pfd, d->base, may_enter, data, &d->rm)) < 0)
                        rmdir_failed(d, -k);
                return k < 0 ? 0 : 1;
        }
        if (sh_fs_remover_step(d->rm))
                return 1;
        rmdir_failed(d, sh_fs_remover_errno(d->rm));
        d->rm = sh_fs_remover_free(d->rm);
        return 0;
}

void sh_fs_rmdir_done(sh_fs_rmdir *d)
{
        d->rm = sh_fs_remover_free(d->rm);
        d->pfd = sh_close(d->pfd);
        free(TAKE_PTR(d->base));
}
