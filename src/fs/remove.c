/* remove.c: the tree remover (never follows a link, bounded fds however deep, passes for the
 * deepest parts), on top of the tree walker. */
#include "sh/remove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
                return 0;
        }
        return 0;
}

/* Empty the directory open as `topfd` (without removing it). A directory deeper than
 * RM_MAX_OPEN levels is moved (renamed) up into `topfd` under a random name and removed in a
 * later pass, so a pathologically deep tree costs passes, never unbounded fds or stack. The
 * passes have no cap: a cap would leave any tree deeper than cap * RM_MAX_OPEN on disk for
 * good. They end because each pass that moves a subtree brings it RM_MAX_OPEN - 1 levels
 * closer to the top (and removes what it climbed through), so a tree of depth D takes about
 * D / 63 passes. (cgroupfs renames only within a parent: there the move fails, and the
 * error is reported; cgroups are never that deep.) */
static void rm_contents(rm_state *st)
{
        do {
                int r;

                st->moved = false;
                r = sh_tree_walk(st->topfd, RM_MAX_OPEN, rm_visit, st);
                if (r < 0) {
                        rm_fail(st, -r, "open", ".");
                        return;
                }
        } while (st->moved);
}

static int remove_tree(int dirfd, const char *name, bool dirs_only, sh_error **err)
{
        _cleanup_close_ int fd = -1;
        rm_state st = {.dirs_only = dirs_only, .err = err};
        struct stat st_top;

        if (fstatat(dirfd, name, &st_top, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : sh_error_make(err, errno, "stat '%s'", name);
        if (!S_ISDIR(st_top.st_mode)) {
                if (dirs_only)
                        return sh_error_make(err, ENOTDIR, "remove tree: '%s'", name);
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
        st.topfd = fd;
        rm_contents(&st);
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
                rm_fail(&st, errno, "rmdir", name);
        return st.first;
}

int sh_fs_remove_tree(int dirfd, const char *name, sh_error **err)
{
        return remove_tree(dirfd, name, false, err);
}

int sh_fs_remove_dirs(int dirfd, const char *name, sh_error **err)
{
        return remove_tree(dirfd, name, true, err);
}
