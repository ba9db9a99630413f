/* tree.c: the iterative, bounded-fd walker of whole directory trees (remover, finisher, cgroup
 * walks), whole or an event at a time. */
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
        bool skip;  /* its entries are not read (the callback said SH_TREE_SKIP) */
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
        lv[depth].skip = false;
        *ret_entered = true;
        return emit(fn, data, SH_TREE_DIR, fd, copy, depth);
}

struct sh_tree_walker {
        level *lv;
        unsigned max_open;
        unsigned depth; /* levels open */
        bool started;   /* the top's SH_TREE_DIR was told */
};

int sh_tree_open(int topfd, unsigned max_open, sh_tree_walker **ret)
{
        sh_tree_walker *w;
        int fd, r;
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
        w = calloc(1, sizeof(*w));
        if (w)
                w->lv = calloc(max_open, sizeof(*w->lv));
        if (!w || !w->lv) {
                free(w);
                closedir(top);
                return -ENOMEM;
        }
        w->lv[0].d = top;
        w->depth = 1;
        w->max_open = max_open;
        *ret = w;
        return 0;
}

/* The callback's verdict on entering the level just opened at index i (SH_TREE_SKIP: its
 * entries are not read). */
static int entered(sh_tree_walker *w, unsigned i, int r)
{
        if (r == SH_TREE_SKIP)
                w->lv[i].skip = true;
        return r < 0 ? r : 1;
}

int sh_tree_step(sh_tree_walker *w, sh_tree_fn fn, void *data)
{
        if (!w->started) {
                w->started = true;
                return entered(w, 0, emit(fn, data, SH_TREE_DIR, dirfd(w->lv[0].d), "", 0));
        }
        while (w->depth > 0) {
                level *l = &w->lv[w->depth - 1];
                int pfd = dirfd(l->d), r = 0;
                unsigned char type = DT_UNKNOWN;
                struct dirent *de = NULL;
                bool in;

                errno = 0;
                if (!l->skip)
                        de = readdir(l->d);
                if (!de) {
                        if (errno && !l->skip)
                                r = emit_error(fn, data, pfd, NULL, w->depth - 1, "readdir", errno);
                        if (r < 0)
                                return r;
                        closedir(l->d);
                        l->d = NULL;
                        w->depth--;
                        if (w->depth > 0)
                                r = emit(fn, data, SH_TREE_LEAVE, dirfd(w->lv[w->depth - 1].d),
                                         l->name, w->depth);
                        free(l->name);
                        l->name = NULL;
                        return r < 0 ? r : w->depth > 0;
                }
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                r = entry_type(pfd, de, &type);
                if (r < 0) {
                        r = emit_error(fn, data, pfd, de->d_name, w->depth, "stat", -r);
                        return r < 0 ? r : 1;
                }
                {
                        sh_tree_ev ev = {.kind = SH_TREE_ENTRY,
                                         .dirfd = pfd,
                                         .name = de->d_name,
                                         .depth = w->depth,
                                         .type = type};

                        r = fn(&ev, data);
                }
                if (r != SH_TREE_DESCEND)
                        return r < 0 ? r : 1;
                if (w->depth >= w->max_open)
                        return -ELOOP;
                r = descend(w->lv, w->depth, de->d_name, fn, data, &in);
                if (!in)
                        return r < 0 ? r : 1;
                return entered(w, w->depth++, r);
        }
        return 0;
}

void sh_tree_free(sh_tree_walker *w)
{
        if (!w)
                return;
        while (w->depth > 0) {
                w->depth--;
                if (w->lv[w->depth].d)
                        closedir(w->lv[w->depth].d);
                free(w->lv[w->depth].name);
        }
        free(w->lv);
        free(w);
}

int sh_tree_walk(int topfd, unsigned max_open, sh_tree_fn fn, void *data)
{
        sh_tree_walker *w;
        int r = sh_tree_open(topfd, max_open, &w);

        if (r < 0)
                return r;
        while ((r = sh_tree_step(w, fn, data)) > 0)
                ;
        sh_tree_free(w);
        return r;
}
