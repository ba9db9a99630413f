/* tree.c: the iterative, bounded-fd walker of whole directory trees (remover, finisher, cgroup
 * walks). */
#include "sh/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/macro.h"

typedef struct level {
        DIR *d;
        char *name; /* this directory's name in the level above (NULL for the top) */
} level;

static int emit(sh_tree_fn fn, void *data, sh_tree_kind kind, int dirfd, const char *name,
                unsigned depth)
{
        sh_tree_ev ev = {.kind = kind, .dirfd = dirfd, .name = name, .depth = depth};

        return fn(&ev, data);
}

static int emit_error(sh_tree_fn fn, void *data, int dirfd, const char *name, unsigned depth,
                      const char *what, int err)
{
        sh_tree_ev ev = {.kind = SH_TREE_ERROR,
                         .dirfd = dirfd,
                         .name = name,
                         .depth = depth,
                         .err = err,
                         .what = what};

        return fn(&ev, data);
}

/* The entry's type without following a link: d_type, or an fstatat where the file system
 * does not fill it in. 0 or -errno. */
static int entry_type(int dirfd, const struct dirent *de, unsigned char *ret)
{
        struct stat st;

        if (de->d_type != DT_UNKNOWN) {
                *ret = de->d_type;
                return 0;
        }
        if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        *ret = IFTODT(st.st_mode);
        return 0;
}

/* Open entry `name` of dirfd as the next level: O_NOFOLLOW, so a link swapped in since the
 * readdir fails (ELOOP, or ENOTDIR for a file) instead of leading anywhere. 0, or the
 * callback's verdict on the failure. */
static int descend(level *lv, unsigned depth, const char *name, sh_tree_fn fn, void *data,
                   bool *ret_entered)
{
        int pfd = dirfd(lv[depth - 1].d);
        int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        char *copy;
        DIR *d;

        *ret_entered = false;
        if (fd < 0)
                return emit_error(fn, data, pfd, name, depth, "open", errno);
        copy = strdup(name);
        d = copy ? fdopendir(fd) : NULL;
        if (!d) {
                int e = copy ? errno : ENOMEM;

                free(copy);
                close(fd);
                return emit_error(fn, data, pfd, name, depth, "opendir", e);
        }
        lv[depth].d = d;
        lv[depth].name = copy;
        *ret_entered = true;
        return emit(fn, data, SH_TREE_DIR, fd, copy, depth);
}

int sh_tree_walk(int topfd, unsigned max_open, sh_tree_fn fn, void *data)
{
        level *lv;
        unsigned depth = 0; /* levels open */
        int fd, r = 0;
        DIR *top;

        if (max_open == 0)
                return -EINVAL;
        /* A file of its own: the walk never moves topfd's offset. */
        fd = openat(topfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        top = fdopendir(fd);
        if (!top) {
                r = -errno;
                close(fd);
                return r;
        }
        lv = calloc(max_open, sizeof(*lv));
        if (!lv) {
                closedir(top);
                return -ENOMEM;
        }
        lv[0].d = top;
        depth = 1;
        r = emit(fn, data, SH_TREE_DIR, fd, "", 0);
        while (r >= 0 && depth > 0) {
                level *l = &lv[depth - 1];
                int pfd = dirfd(l->d);
                unsigned char type = DT_UNKNOWN;
                struct dirent *de;
                bool entered;

                errno = 0;
                de = readdir(l->d);
                if (!de) {
                        if (errno)
                                r = emit_error(fn, data, pfd, NULL, depth - 1, "readdir", errno);
                        if (r < 0)
                                break;
                        closedir(l->d);
                        l->d = NULL;
                        depth--;
                        if (depth > 0)
                                r = emit(fn, data, SH_TREE_LEAVE, dirfd(lv[depth - 1].d), l->name,
                                         depth);
                        free(l->name);
                        l->name = NULL;
                        continue;
                }
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                r = entry_type(pfd, de, &type);
                if (r < 0) {
                        r = emit_error(fn, data, pfd, de->d_name, depth, "stat", -r);
                        continue;
                }
                {
                        sh_tree_ev ev = {.kind = SH_TREE_ENTRY,
                                         .dirfd = pfd,
                                         .name = de->d_name,
                                         .depth = depth,
                                         .type = type};

                        r = fn(&ev, data);
                }
                if (r != SH_TREE_DESCEND)
                        continue;
                if (depth >= max_open) {
                        r = -ELOOP;
                        break;
                }
                r = descend(lv, depth, de->d_name, fn, data, &entered);
                if (entered)
                        depth++;
        }
        while (depth > 0) {
                depth--;
                closedir(lv[depth].d);
                free(lv[depth].name);
        }
        free(lv);
        return r < 0 ? r : 0;
}
