/* walk.c: the walks of the APIs, the workspace walk and the /v1 listing and search (sorted, in
 * bounded steps, few fds), and the disk-usage accumulator. */
#include "sh/walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sh/macro.h"
#include "sh/safe_open.h"
#include "sh/syscalls.h"

#include "fs-internal.h"

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
 *   buffer, then returns SH_FS_WALK_AGAIN if it found nothing to yield: skipped entries and
 *   empty directories cost the caller's slice like yielded ones.
 * - sorting: a directory is read one getdents64 buffer per step; each buffer's entries are
 *   sorted as they arrive (a "run", at most WALK_DENTS / 24 entries) and the level yields
 *   them through a k-way merge (a min-heap of runs), so no step ever sorts a whole
 *   directory. A directory can only be yielded once it is read to the end (its smallest
 *   name may come last), so the listing of each level on the current path is in memory:
 *   memory is bounded by depth times the widest directory, never by the number of files
 *   (and, when the caller asks, by held_max bytes in all).
 * - memory per level: the entries not visited yet, the run heap and 56 bytes; no buffers.
 *
 * Two orders (sh_fs_walk_opts): the native walk's (bytewise order of the full paths, a
 * directory compared as "name/", regular files only) and the listing's (by name within each
 * directory, a directory's entries right after it). Both are a depth-first walk over sorted
 * levels; only the comparison of two names differs. */
#define WALK_OPEN  SH_FS_WALK_OPEN
#define WALK_STEP  256
#define WALK_DENTS (32 * 1024)

/* One getdents64 buffer of a directory, sorted. Entry k starts at walk_run_names(r) +
 * off[k]: a type byte ('d' a directory, 'f' a regular file, 'o' anything else), a length
 * byte, the name, a NUL. */
typedef struct walk_run {
        uint32_t n, next;
        uint32_t size; /* bytes allocated, counted in the walker's held */
        uint32_t off[];
} walk_run;

typedef struct walk_level {
        walk_run **heap; /* runs not yet exhausted, a min-heap on each run's next entry */
        uint32_t nheap, heapcap;
        int fd;       /* -1 while outside the window of open levels */
        bool listed;  /* getdents64 reached the end */
        bool visited; /* an entry was taken: w->path holds its name after plen */
        bool by_name; /* the listing's order (a copy of the walker's, for the comparisons) */
        dev_t dev;    /* identity recorded when first entered; every reopen must match it */
        ino_t ino;
        size_t plen; /* bytes of the path prefix ("root/dir/") for this level's entries */
} walk_level;

struct sh_fs_walker {
        walk_level *lv;
        size_t depth, cap;
        char *path;
        size_t path_cap;
        size_t root_plen; /* bytes of the prefix before the root's entries */
        /* Fallback reopen of level `reopen` (0: none) by name; `reopen_at` is the deepest
         * level open on the way. */
        size_t reopen, reopen_at;
        bool listing;       /* sh_fs_walk_open_at: the listing's order and options */
        sh_fs_walk_opts o;  /* the listing's options */
        size_t held;        /* bytes of runs held (o.held_max) */
        bool enter_pending; /* the directory yielded last is entered at the next step */
        struct statx stx;   /* the entry yielded last */
};

static const char *walk_run_names(const walk_run *r)
{
        return (const char *)&r->off[r->n];
}

static const char *walk_run_head(const walk_run *r)
{
        return walk_run_names(r) + r->off[r->next];
}

static void walk_run_free(sh_fs_walker *w, walk_run *r)
{
        w->held -= r->size;
        free(r);
}

static void walk_level_done(sh_fs_walker *w, walk_level *l)
{
        l->fd = sh_close(l->fd);
        for (uint32_t i = 0; i < l->nheap; i++)
                walk_run_free(w, l->heap[i]);
        free(l->heap);
        l->heap = NULL;
        l->nheap = l->heapcap = 0;
}

/* Order of two entries of one directory (a type byte, a length byte, the name). The walk's:
 * a directory compares as "name/" (its files all start with that), a file as "name",
 * bytewise unsigned; then a depth-first walk over sorted levels yields globally sorted
 * paths, e.g. "a-c" < "a/b" because '-' < '/'. The listing's: the names alone, bytewise
 * unsigned as strcmp. */
static int walk_ent_cmp(const char *a, const char *b, bool by_name)
{
        size_t la = (unsigned char)a[1], lb = (unsigned char)b[1], m = la < lb ? la : lb;
        unsigned ca, cb;
        int c = memcmp(a + 2, b + 2, m);

        if (c)
                return c;
        ca = m < la ? (unsigned char)a[2 + m] : (a[0] == 'd' && !by_name ? '/' : 0);
        cb = m < lb ? (unsigned char)b[2 + m] : (b[0] == 'd' && !by_name ? '/' : 0);
        return ca < cb ? -1 : ca > cb ? 1 : 0;
}

typedef struct walk_sort_ctx {
        const char *names;
        bool by_name;
} walk_sort_ctx;

static int walk_off_cmp(const void *pa, const void *pb, void *data)
{
        const walk_sort_ctx *c = data;

        return walk_ent_cmp(c->names + *(const uint32_t *)pa, c->names + *(const uint32_t *)pb,
                            c->by_name);
}

static bool walk_heap_less(const walk_level *l, uint32_t i, uint32_t j)
{
        return walk_ent_cmp(walk_run_head(l->heap[i]), walk_run_head(l->heap[j]), l->by_name) < 0;
}

static void walk_heap_down(walk_level *l, uint32_t i)
{
        for (;;) {
                uint32_t c = 2 * i + 1, m = i;
                walk_run *t;

                if (c < l->nheap && walk_heap_less(l, c, m))
                        m = c;
                if (c + 1 < l->nheap && walk_heap_less(l, c + 1, m))
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
        while (i > 0 && walk_heap_less(l, i, (i - 1) / 2)) {
                uint32_t p = (i - 1) / 2;

                l->heap[i] = l->heap[p];
                l->heap[p] = run;
                i = p;
        }
        return 0;
}

/* Entry kinds a walk keeps, resolved in the getdents64 buffer itself (d_type rewritten). */
#define WALK_SKIP 0xff

/* The type byte of a getdents64 entry, or WALK_SKIP. The walk keeps regular files and
 * directories (links, FIFOs, sockets, devices never show in it); a listing keeps every
 * entry (what it is exactly is looked at when it is visited). */
static unsigned walk_kind(const sh_fs_walker *w, int dirfd, const struct dirent64 *de)
{
        unsigned t = de->d_type;

        if (t == DT_UNKNOWN && !w->o.all) {
                struct stat st;

                if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return WALK_SKIP; /* vanished */
                t = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
        }
        if (t == DT_DIR)
                return 'd';
        if (t == DT_REG)
                return 'f';
        return w->o.all ? 'o' : WALK_SKIP;
}

/* Read one getdents64 buffer of level `l` into a sorted run. */
static int walk_read(sh_fs_walker *w, walk_level *l, unsigned *work)
{
        /* the buffer lives only during this step: nothing per level, nothing per walker */
        char buf[WALK_DENTS] __attribute__((aligned(8)));
        size_t names = 0, n = 0, k = 0, used = 0, size;
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
                de->d_type = (unsigned char)walk_kind(w, l->fd, de);
                if (de->d_type == WALK_SKIP)
                        continue;
                /* No *at() call takes a longer name: it could never be stat'ed. */
                if (nl > NAME_MAX)
                        return -ENAMETOOLONG;
                names += nl + 3;
                n++;
        }
        if (n == 0)
                return 0;
        /* a 32 KiB buffer holds at most 1365 entries of at most 258 bytes each: no overflow */
        size = sizeof(*run) + n * sizeof(run->off[0]) + names;
        if (w->o.held_max && w->held + size > w->o.held_max)
                return -E2BIG;
        run = malloc(size);
        if (!run)
                return -ENOMEM;
        run->n = (uint32_t)n;
        run->next = 0;
        run->size = (uint32_t)size;
        w->held += size;
        dst = (char *)&run->off[n];
        for (ssize_t pos = 0; pos < len;) {
                struct dirent64 *de = (struct dirent64 *)(buf + pos);
                size_t nl;

                pos += de->d_reclen;
                if (de->d_type == WALK_SKIP)
                        continue;
                nl = strlen(de->d_name);
                run->off[k++] = (uint32_t)used;
                dst[used] = (char)de->d_type;
                dst[used + 1] = (char)nl;
                memcpy(dst + used + 2, de->d_name, nl + 1);
                used += nl + 3;
        }
        qsort_r(run->off, n, sizeof(run->off[0]), walk_off_cmp,
                &(walk_sort_ctx){.names = dst, .by_name = l->by_name});
        if (walk_heap_push(l, run) < 0) {
                walk_run_free(w, run);
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
        *l = (walk_level){
                .fd = fd, .by_name = w->listing, .dev = st.st_dev, .ino = st.st_ino, .plen = plen};
        /* The root (level 0) stays open: every fallback reopen starts from an open level. */
        if (w->depth > WALK_OPEN + 1)
                w->lv[w->depth - 1 - WALK_OPEN].fd = sh_close(w->lv[w->depth - 1 - WALK_OPEN].fd);
        return 0;
}

/* Drop levels down to `depth` (exclusive of the ones below it). */
static void walk_truncate(sh_fs_walker *w, size_t depth)
{
        while (w->depth > depth)
                walk_level_done(w, &w->lv[--w->depth]);
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
        if (fd < 0 && !sh_fs_is_absent(-errno))
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
        walk_level_done(w, l);
        w->depth--;
}

static sh_fs_walker *walk_new(const char *prefix)
{
        sh_fs_walker *w = calloc(1, sizeof(*w));
        size_t plen = strlen(prefix);

        if (!w || grow(&w->path, &w->path_cap, plen + 2, 1) < 0) {
                free(w);
                return NULL;
        }
        memcpy(w->path, prefix, plen);
        if (plen > 0 && prefix[plen - 1] != '/')
                w->path[plen++] = '/';
        w->path[plen] = '\0';
        w->root_plen = plen;
        return w;
}

int sh_fs_walk_open(int rootfd, const char *root_path, sh_fs_walker **ret, sh_error **err)
{
        sh_fs_walker *w = walk_new(root_path);
        int fd, r;

        if (!w)
                return sh_error_make(err, ENOMEM, "walk");
        /* O_NOFOLLOW: a link at the walk root is not followed (links are never followed
         * by a walk); absent, a link or a non-directory all yield nothing. */
        fd = sh_safe_openat(rootfd, root_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (fd < 0) {
                if (!sh_fs_is_absent(fd)) {
                        sh_fs_walk_free(w);
                        return sh_error_make(err, -fd, "open '%s'", root_path);
                }
        } else {
                r = walk_push(w, fd, w->root_plen);
                if (r < 0) {
                        sh_fs_walk_free(w);
                        return sh_error_make(err, -r, "open '%s'", root_path);
                }
        }
        *ret = w;
        return 0;
}

int sh_fs_walk_open_at(int dirfd, const char *prefix, const sh_fs_walk_opts *o, sh_fs_walker **ret,
                       sh_error **err)
{
        sh_fs_walker *w = walk_new(prefix);
        int fd, r;

        if (!w)
                return sh_error_make(err, ENOMEM, "walk");
        w->listing = true;
        w->o = *o;
        /* the directory itself, as the caller checked it: never looked up again by name */
        fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || (r = walk_push(w, fd, w->root_plen)) < 0) {
                r = fd < 0 ? -errno : r;
                sh_fs_walk_free(w);
                return sh_error_make(err, -r, "open '%s'", prefix);
        }
        *ret = w;
        return 0;
}

/* statx of `name` in directory fd, never followed, into w->stx: 0, 1 if it vanished, or
 * -errno. */
static int walk_stat(sh_fs_walker *w, int fd, const char *name)
{
        if (statx(fd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, &w->stx) == 0)
                return 0;
        return errno == ENOENT ? 1 : -errno;
}

static bool walk_matches(const sh_fs_walker *w, const char *name)
{
        return !w->o.pattern ||
               fnmatch(w->o.pattern, w->o.pattern_path ? w->path + w->root_plen : name, 0) == 0;
}

/* Enter directory `name` (nl bytes, at plen in w->path) of level l: opened without following
 * a link, and only when it is what was stat'ed (a listing: the directory it yielded) and the
 * caller lets the walk in. 0 (entered or skipped) or -errno. */
static int walk_enter(sh_fs_walker *w, walk_level *l, size_t plen, size_t nl, bool check)
{
        const char *name = w->path + plen;
        int fd, r;

        if (w->o.max_depth && w->depth >= w->o.max_depth)
                return 0;
        /* O_NOFOLLOW|O_DIRECTORY: a directory swapped for a link or a file is refused; the
         * identity of what we did open is recorded by walk_push for every later reopen. */
        fd = openat(l->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return sh_fs_is_absent(-errno) ? 0 : -errno;
        if (check) {
                struct stat st;

                if (fstat(fd, &st) < 0 ||
                    st.st_dev != makedev(w->stx.stx_dev_major, w->stx.stx_dev_minor) ||
                    st.st_ino != w->stx.stx_ino) {
                        sh_close(fd);
                        return 0; /* swapped since it was yielded: not its entries */
                }
        }
        if (w->o.may_enter && !w->o.may_enter(w->o.data, fd)) {
                sh_close(fd);
                return 0;
        }
        if (grow(&w->path, &w->path_cap, plen + nl + 2, 1) < 0) {
                sh_close(fd);
                return -ENOMEM;
        }
        w->path[plen + nl] = '/';
        w->path[plen + nl + 1] = '\0';
        r = walk_push(w, fd, plen + nl + 1);
        return r;
}

static void walk_fill(sh_fs_walker *w, size_t plen, sh_fs_entry *ret)
{
        const struct statx *s = &w->stx;

        *ret = (sh_fs_entry){
                .path = w->path,
                .rel = w->path + w->root_plen,
                .name = w->path + plen,
                .stx = s,
                .size = s->stx_size,
                .mtime_ns = (int64_t)s->stx_mtime.tv_sec * 1000000000LL + s->stx_mtime.tv_nsec,
                .dev = makedev(s->stx_dev_major, s->stx_dev_minor),
                .ino = s->stx_ino,
                .nlink = s->stx_nlink,
        };
}

/* Take the smallest entry of the top level into w->path and visit it: 1 with *ret for an
 * entry to yield, 0 otherwise (a directory was entered, or the entry was skipped), or <0. */
static int walk_visit(sh_fs_walker *w, sh_fs_entry *ret, sh_error **err)
{
        walk_level *l = &w->lv[w->depth - 1];
        walk_run *run = l->heap[0];
        const char *e = walk_run_head(run);
        size_t nl = (unsigned char)e[1], plen = l->plen;
        char type = e[0], *name;
        bool again;
        int r;

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
                walk_run_free(w, run);
        }
        walk_heap_down(l, 0);
        if (again)
                return 0;

        if (type == 'd' && !w->o.all) {
                /* a walk or a search: its directories are entered, never yielded */
                r = walk_enter(w, l, plen, nl, false);
                return r < 0 ? sh_error_make(err, -r, "open '%s'", w->path) : 0;
        }
        /* a search's name is matched before anything is looked at */
        if (!w->o.all && !walk_matches(w, name))
                return 0;
        r = walk_stat(w, l->fd, name);
        if (r != 0)
                return r > 0 ? 0 : sh_error_make(err, -r, "stat '%s'", w->path);
        if (w->o.all) {
                /* A listing's order does not depend on what an entry is: it is shown as it
                 * is now, and a directory is entered at the next step (after the caller used
                 * the entry), only if it is still the one shown. */
                w->enter_pending = S_ISDIR(w->stx.stx_mode);
                if (!walk_matches(w, name))
                        return 0;
        } else if (!S_ISREG(w->stx.stx_mode)) {
                /* An entry whose type changed since the listing is skipped like a vanished
                 * one: descending now would break the sort order we promised. */
                return 0;
        }
        walk_fill(w, plen, ret);
        return 1;
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
                if (w->enter_pending) {
                        size_t nl = strlen(w->path + l->plen);

                        w->enter_pending = false;
                        r = walk_enter(w, l, l->plen, nl, true);
                        if (r < 0)
                                return sh_error_make(err, -r, "open '%s'", w->path);
                        continue;
                }
                if (!l->listed) {
                        r = walk_read(w, l, &work);
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
