/* safe_open.c: confine every open of a client- or sandbox-controlled path to a root fd, with
 * openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) or an equivalent O_NOFOLLOW walker. */
#include "sh/safe_open.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/macro.h"
#include "sh/syscalls.h"

/* openat2 fails with EAGAIN when a rename or mount elsewhere raced with a RESOLVE_IN_ROOT
 * lookup (the kernel cannot prove the result stayed inside the root). A sandbox process can
 * provoke that at will, so retry a bounded number of times, then give up with EAGAIN
 * rather than spin forever. */
#define SAFE_OPENAT2_TRIES 64
/* Same limit as the kernel (MAXSYMLINKS), so both resolvers agree on ELOOP. */
#define SAFE_MAX_LINKS 40
/* Bound on re-walking the final component when a racer swaps it between our checks. */
#define SAFE_RACE_TRIES 64

enum { PROBE_UNKNOWN = 0, PROBE_YES = 1, PROBE_NO = -1 };
static int openat2_state = PROBE_UNKNOWN;
static bool force_fallback;

void sh_safe_force_fallback(bool on)
{
        force_fallback = on;
}

/* Probe once: resolve "/" under RESOLVE_IN_ROOT. ENOSYS means an old kernel (< 5.6), EPERM
 * (or ENOSYS) a seccomp policy that refuses the call, EINVAL/E2BIG flags the kernel does not
 * know. Any other failure (EMFILE...) says nothing about support: probe again next time. */
bool sh_safe_openat2_available(void)
{
        struct sh_open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        int fd;

        if (force_fallback)
                return false;
        if (openat2_state != PROBE_UNKNOWN)
                return openat2_state == PROBE_YES;
        fd = sh_openat2(AT_FDCWD, "/", &how, sizeof(how));
        if (fd >= 0) {
                close(fd);
                openat2_state = PROBE_YES;
        } else if (errno == ENOSYS || errno == EPERM || errno == EINVAL || errno == E2BIG) {
                openat2_state = PROBE_NO;
        } else {
                return false;
        }
        return openat2_state == PROBE_YES;
}

static int open_openat2(int rootfd, const char *path, int flags, mode_t mode)
{
        struct sh_open_how how = {
                .flags = (uint64_t)(unsigned)(flags | O_CLOEXEC),
                /* openat2 (unlike openat) rejects a mode without O_CREAT/O_TMPFILE */
                .mode = ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? mode : 0,
                /* IN_ROOT: ".." resolves as if rootfd were "/". NO_MAGICLINKS:
                 * /proc/<pid>/fd/N style links jump to arbitrary inodes and would bypass
                 * IN_ROOT entirely, so refuse them outright. NO_SYMLINKS: a path with a
                 * link on the way fails with ELOOP and goes to the walker, which counts the
                 * steps of its target (the kernel cannot be asked how many it took). */
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS,
        };

        for (int i = 0; i < SAFE_OPENAT2_TRIES; i++) {
                int fd = sh_openat2(rootfd, *path ? path : ".", &how, sizeof(how));
                if (fd >= 0)
                        return fd;
                if (errno != EAGAIN)
                        return -errno;
        }
        return -EAGAIN;
}

/* ---- the steps of a lookup ------------------------------------------------------------ */

/* One lookup: what it has been charged, the links it followed, what it draws from. */
typedef struct lookup {
        sh_safe_budget *budget; /* NULL: only the lookup's own bound */
        uint64_t steps;
        int nlinks;
} lookup;

/* The components of the n bytes at s (runs between slashes, "." and ".." included). */
static uint64_t count_components(const char *s, size_t n)
{
        uint64_t c = 0;

        for (size_t i = 0; i < n; i++)
                if (s[i] != '/' && (i == 0 || s[i - 1] == '/'))
                        c++;
        return c;
}

/* Take up n more steps before looking them up: -E2BIG (nothing charged) past the lookup's
 * own bound or what is left of its budget. */
static int charge(lookup *lk, uint64_t n)
{
        if (lk->steps + n > SH_SAFE_LOOKUP_STEPS)
                return -E2BIG;
        if (lk->budget) {
                if (n > lk->budget->left) {
                        lk->budget->exhausted = true;
                        return -E2BIG;
                }
                lk->budget->left -= n;
        }
        lk->steps += n;
        return 0;
}

/* Every lookup begins here, whichever resolver runs: the path's own components are charged
 * first, so openat2 (a path without links) and the walker charge a path alike. */
static int lookup_begin(lookup *lk, const char *path, const sh_safe_guard *g)
{
        size_t len;

        *lk = (lookup){.budget = g ? g->budget : NULL};
        if (!path)
                return -EINVAL;
        len = strlen(path);
        if (len >= PATH_MAX)
                return -ENAMETOOLONG; /* as the kernel, before any component */
        return charge(lk, count_components(path, len));
}

static int guard_dir(const sh_safe_guard *g, int dirfd)
{
        return g && g->dir ? g->dir(g->data, dirfd) : 0;
}

/* ---- fallback walker ---------------------------------------------------------------- */

/* The directories entered so far, as O_PATH fds; the root itself is implicit (not owned).
 * ".." pops back to the fd we came from instead of opening "..": a directory that a racer
 * moves elsewhere in the tree must never let ".." climb above the root. */
typedef struct fdstack {
        int *fds;
        size_t n, cap;
} fdstack;

static void fdstack_done(fdstack *s)
{
        while (s->n > 0)
                sh_close(s->fds[--s->n]);
        free(s->fds);
        s->fds = NULL;
        s->cap = 0;
}

static int fdstack_top(const fdstack *s, int rootfd)
{
        return s->n > 0 ? s->fds[s->n - 1] : rootfd;
}

static int fdstack_push(fdstack *s, int fd)
{
        if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 16;
                int *p = realloc(s->fds, cap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                s->fds = p;
                s->cap = cap;
        }
        s->fds[s->n++] = fd;
        return 0;
}

static void fdstack_pop(fdstack *s)
{
        if (s->n > 0)
                sh_close(s->fds[--s->n]);
}

/* Replace the unresolved remainder of the path by link target + `rest` (`rest` starts with
 * '/' or is empty, so a trailing slash keeps requiring a directory). The link is read from
 * the O_PATH fd we opened with O_NOFOLLOW, so it is the very inode we checked. The target's
 * components are charged to the lookup before any is looked up, so the work is bounded by the
 * steps; the text too: at most SAFE_MAX_LINKS targets of at most PATH_MAX bytes each.
 * *ret_tlen: the target's length (where `rest` now begins in *buf). */
static int expand_link(int linkfd, const char *rest, char **buf, const char **p, lookup *lk,
                       bool *ret_absolute, size_t *ret_tlen)
{
        char target[PATH_MAX];
        ssize_t n;
        size_t rlen;
        char *nb;
        int r;

        if (++lk->nlinks > SAFE_MAX_LINKS)
                return -ELOOP;
        n = readlinkat(linkfd, "", target, sizeof(target));
        if (n < 0)
                return -errno;
        if ((size_t)n >= sizeof(target))
                return -ENAMETOOLONG;
        if (n == 0)
                return -ENOENT; /* as the kernel: an empty link resolves to nothing */
        if ((r = charge(lk, count_components(target, (size_t)n))) < 0)
                return r;
        rlen = strlen(rest);
        nb = malloc((size_t)n + rlen + 1);
        if (!nb)
                return -ENOMEM;
        memcpy(nb, target, (size_t)n);
        memcpy(nb + n, rest, rlen + 1);
        free(*buf);
        *buf = nb;
        *p = nb;
        *ret_absolute = target[0] == '/';
        *ret_tlen = (size_t)n;
        return 0;
}

/* Open `comp` in `dirfd` without following it, to learn what it is. */
static int probe_component(int dirfd, const char *comp, struct stat *st)
{
        int fd = openat(dirfd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        if (fstat(fd, st) < 0) {
                int r = -errno;
                sh_close(fd);
                return r;
        }
        return fd;
}

/* A walk in progress (open_fallback, mkdir_walk): the directories entered, the unresolved rest
 * of the path (from p in buf, which link targets replace), its lookup and its guard. */
typedef struct walk {
        fdstack st;
        char *buf;
        const char *p;
        lookup *lk;
        const sh_safe_guard *g;
        int rootfd, races;
} walk;

static void walk_done(walk *w)
{
        fdstack_done(&w->st);
        free(w->buf);
        w->buf = NULL;
}

static int walk_begin(walk *w, int rootfd, const char *path, const sh_safe_guard *g, lookup *lk)
{
        *w = (walk){.lk = lk, .g = g, .rootfd = rootfd};
        if (!(w->buf = strdup(path)))
                return -ENOMEM;
        w->p = w->buf;
        /* the guard sees the root first: every lookup starts there or comes back to it */
        return guard_dir(g, rootfd);
}

static int walk_cur(const walk *w)
{
        return fdstack_top(&w->st, w->rootfd);
}

/* The next component to look up into comp: 1 (*ret_start, *ret_end: where it is in the buffer),
 * 0 when none is left, -ENAMETOOLONG over NAME_MAX (checked before the copy into the fixed
 * buffer). "." is passed over and ".." pops back to the directory we came from (at the root a
 * no-op: never above it). */
static int walk_next(walk *w, char comp[static NAME_MAX + 1], const char **ret_start,
                     const char **ret_end)
{
        for (;;) {
                const char *s = w->p, *e;
                size_t len;

                while (*s == '/')
                        s++;
                if (!*s) {
                        w->p = s;
                        return 0;
                }
                e = strchrnul(s, '/');
                len = (size_t)(e - s);
                if (len > NAME_MAX)
                        return -ENAMETOOLONG;
                memcpy(comp, s, len);
                comp[len] = '\0';
                for (w->p = e; *w->p == '/'; w->p++)
                        ;
                if (STREQ(comp, "."))
                        continue;
                if (STREQ(comp, "..")) {
                        fdstack_pop(&w->st);
                        continue;
                }
                *ret_start = s;
                *ret_end = e;
                return 1;
        }
}

/* Go on through the link open at fd (closed here), the component ending at `end`: its target
 * and the rest, from the root when it is absolute. *ret_tlen as expand_link. */
static int walk_link(walk *w, int fd, const char *end, size_t *ret_tlen)
{
        bool absolute = false;
        int r = expand_link(fd, end, &w->buf, &w->p, w->lk, &absolute, ret_tlen);

        sh_close(fd);
        if (r < 0)
                return r;
        if (absolute)
                while (w->st.n > 0)
                        fdstack_pop(&w->st);
        return 0;
}

/* Enter directory fd (taken): shown to the guard first unless it is the result (`last`), which
 * is not checked, as the final component of any lookup; nothing in it is looked at before. */
static int walk_enter(walk *w, int fd, bool last)
{
        int r;

        if ((!last && (r = guard_dir(w->g, fd)) < 0) || (r = fdstack_push(&w->st, fd)) < 0) {
                sh_close(fd);
                return r;
        }
        return 0;
}

/* The entry at `start` changed under us: look at it again, a bounded number of times. */
static int walk_again(walk *w, const char *start)
{
        if (++w->races > SAFE_RACE_TRIES)
                return -EAGAIN;
        w->p = start;
        return 0;
}

/* Component-by-component resolution with the semantics of RESOLVE_IN_ROOT: the kernel never
 * follows a link here (every open carries O_NOFOLLOW); we read each link and continue the
 * walk ourselves from the root (absolute target) or the link's directory (relative), and
 * ".." at the root stays at the root. Magic links are plain text to us, so they can never
 * teleport the walk (the NO_MAGICLINKS part). The path is charged already (lookup_begin);
 * every link's target is charged as it is taken up, so the components looked up are at most
 * the steps charged, plus SAFE_RACE_TRIES looks again at a final component. */
static int open_fallback(int rootfd, const char *path, int flags, mode_t mode,
                         const sh_safe_guard *g, lookup *lk)
{
        _cleanup_(walk_done) walk w = {0};
        /* O_CREAT|O_EXCL never follows a final link in the kernel either (EEXIST) */
        const bool follow_last = !(flags & O_NOFOLLOW) && !((flags & O_CREAT) && (flags & O_EXCL));
        char comp[NAME_MAX + 1];
        const char *start, *end;
        int r;

        if ((r = walk_begin(&w, rootfd, path, g, lk)) < 0)
                return r;
        while ((r = walk_next(&w, comp, &start, &end)) > 0) {
                /* a component followed by '/' must be a directory, even at the end */
                const bool last = *end == '\0';
                const int cur = walk_cur(&w);
                struct stat sb;
                size_t tlen;
                int fd;

                if (!last || follow_last) {
                        fd = probe_component(cur, comp, &sb);
                        if (fd == -ENOENT && last && (flags & O_CREAT))
                                goto open_last;
                        if (fd < 0)
                                return fd;
                        if (S_ISLNK(sb.st_mode)) {
                                if ((r = walk_link(&w, fd, end, &tlen)) < 0)
                                        return r;
                                continue;
                        }
                        if (!last) {
                                if (!S_ISDIR(sb.st_mode)) {
                                        sh_close(fd);
                                        return -ENOTDIR;
                                }
                                if ((r = walk_enter(&w, fd, false)) < 0)
                                        return r;
                                continue;
                        }
                        sh_close(fd);
                }

        open_last:
                /* The final open keeps O_NOFOLLOW: if a racer turned the entry into a link
                 * since we looked, the kernel refuses (ELOOP, or ENOTDIR with O_DIRECTORY)
                 * or, with O_PATH, hands us the link itself; then we look again. */
                fd = openat(cur, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
                if (fd >= 0) {
                        if (!follow_last || !(flags & O_PATH))
                                return fd;
                        if (fstat(fd, &sb) < 0) {
                                r = -errno;
                                sh_close(fd);
                                return r;
                        }
                        if (!S_ISLNK(sb.st_mode))
                                return fd;
                        sh_close(fd);
                } else {
                        r = -errno;
                        if (!follow_last || (r != -ELOOP && r != -ENOTDIR))
                                return r;
                        fd = probe_component(cur, comp, &sb);
                        if (fd < 0 && fd != -ENOENT)
                                return fd;
                        if (fd >= 0)
                                sh_close(fd);
                        if (fd < 0 || !S_ISLNK(sb.st_mode))
                                return r; /* a genuine error, not a race */
                }
                /* the entry became a link under us: resolve it again */
                if ((r = walk_again(&w, start)) < 0)
                        return r;
        }
        if (r < 0)
                return r;
        /* Nothing left: the result is the directory we stand in (the root for ""). */
        r = openat(walk_cur(&w), ".", (flags & ~O_NOFOLLOW) | O_CLOEXEC, mode);
        return r < 0 ? -errno : r;
}

int sh_safe_openat_guarded(int rootfd, const char *path, int flags, mode_t mode,
                           const sh_safe_guard *g)
{
        lookup lk;
        int r;

        if ((r = lookup_begin(&lk, path, g)) < 0)
                return r;
        if (!(g && g->dir) && sh_safe_openat2_available()) {
                r = open_openat2(rootfd, path, flags, mode);
                /* ELOOP: a link on the way (RESOLVE_NO_SYMLINKS), or a final one that
                 * O_NOFOLLOW refuses: the walker follows it, or refuses it alike */
                if (r != -ENOSYS && r != -ELOOP)
                        return r;
                /* a seccomp policy installed after the probe: stop using openat2 */
                if (r == -ENOSYS)
                        openat2_state = PROBE_NO;
        }
        return open_fallback(rootfd, path, flags, mode, g, &lk);
}

int sh_safe_openat(int rootfd, const char *path, int flags, mode_t mode)
{
        return sh_safe_openat_guarded(rootfd, path, flags, mode, NULL);
}

int sh_safe_open_parent(int rootfd, const char *path, const char **ret_base)
{
        return sh_safe_open_parent_guarded(rootfd, path, ret_base, NULL);
}

int sh_safe_open_parent_guarded(int rootfd, const char *path, const char **ret_base,
                                const sh_safe_guard *g)
{
        const char *slash, *base;
        _cleanup_free_ char *parent = NULL;
        int fd, r;

        if (!path || !*path)
                return -EINVAL;
        slash = strrchr(path, '/');
        base = slash ? slash + 1 : path;
        /* Callers act on base with *at() calls relative to the parent: "." or ".." there
         * would name the parent or the grandparent itself, never a child. Normalised paths
         * never hold them; refuse anyway. */
        if (!*base || STREQ(base, ".") || STREQ(base, ".."))
                return -EINVAL;
        if (slash) {
                parent = strndup(path, (size_t)(slash - path));
                if (!parent)
                        return -ENOMEM;
        }
        fd = sh_safe_openat_guarded(rootfd, parent ? parent : "", O_PATH | O_DIRECTORY, 0, g);
        if (fd < 0)
                return fd;
        /* the parent is where the caller acts: it is entered too */
        if (slash && (r = guard_dir(g, fd)) < 0) {
                sh_close(fd);
                return r;
        }
        *ret_base = base;
        return fd;
}

/* ---- mkdir -p in one walk ------------------------------------------------------------ */

/* mkdir `name` in `pfd`, give it uid:gid and `mode` exactly (independent of the umask), and
 * return an O_RDONLY fd of it. The reopen carries O_NOFOLLOW: if a racer swapped something in
 * (a link, a file) or took it away, -EEXIST says "look again", and nothing is chowned. */
static int make_dir(int pfd, const char *name, mode_t mode, uid_t uid, gid_t gid)
{
        _cleanup_close_ int fd = -1;
        struct stat pst;

        /* In a set-gid directory (a named volume's: docs/opensandbox.md) the new one keeps the
         * group and the set-gid bit it inherits, as the kernel gives them to a sandbox's own
         * mkdir: another sandbox of that group can use it. */
        if (fstat(pfd, &pst) < 0)
                return -errno;
        if (pst.st_mode & S_ISGID) {
                gid = (gid_t)-1;
                mode |= S_ISGID;
        }
        if (mkdirat(pfd, name, 0700) < 0)
                return -errno;
        fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ELOOP || errno == ENOTDIR || errno == ENOENT ? -EEXIST : -errno;
        if ((uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(fd, uid, gid) < 0)
                return -errno;
        if (fchmod(fd, mode) < 0)
                return -errno;
        return TAKE_FD(fd);
}

static bool has_component(const char *s)
{
        return s[strspn(s, "/")] != '\0';
}

/* The walker of open_fallback, entering every component as a directory and making the
 * missing ones. `own_from` is where the path's own components begin in the buffer: before it
 * lie link targets, whose missing components are never made (a dangling link is in the way). */
static int mkdir_walk(int rootfd, const char *path, const sh_safe_mkdir *how,
                      const sh_safe_guard *g, lookup *lk)
{
        _cleanup_(walk_done) walk w = {0};
        char comp[NAME_MAX + 1];
        const char *start, *end;
        size_t own_from = 0;
        int r;

        if ((r = walk_begin(&w, rootfd, path, g, lk)) < 0)
                return r;
        while ((r = walk_next(&w, comp, &start, &end)) > 0) {
                const bool last = *w.p == '\0';
                const int cur = walk_cur(&w);
                struct stat sb;
                size_t rest = (size_t)(end - w.buf), tlen;
                int fd = probe_component(cur, comp, &sb);

                if (fd == -ENOENT) {
                        /* a link's target names nothing here: the link stands where a
                         * directory is wanted (the last one, or one on the way) */
                        if ((size_t)(start - w.buf) < own_from)
                                return has_component(w.buf + own_from) ? -ENOTDIR : -EEXIST;
                        if (how->may_create && (r = how->may_create(how->data, cur)) < 0)
                                return r;
                        fd = last ? make_dir(cur, comp, how->mode, how->uid, how->gid)
                                  : make_dir(cur, comp, how->parents_mode, how->parents_uid,
                                             how->parents_gid);
                        if (fd == -EEXIST) {
                                /* another creator, or a racer's entry: look at it again */
                                if ((r = walk_again(&w, start)) < 0)
                                        return r;
                                continue;
                        }
                        if (fd < 0)
                                return fd;
                } else if (fd < 0) {
                        return fd;
                } else if (S_ISLNK(sb.st_mode)) {
                        if ((r = walk_link(&w, fd, end, &tlen)) < 0)
                                return r;
                        own_from = tlen + (own_from > rest ? own_from - rest : 0);
                        continue;
                } else if (!S_ISDIR(sb.st_mode)) {
                        sh_close(fd);
                        return last ? -EEXIST : -ENOTDIR;
                }
                if ((r = walk_enter(&w, fd, last)) < 0)
                        return r;
        }
        if (r < 0)
                return r;
        if (w.st.n > 0)
                return w.st.fds[--w.st.n]; /* handed out: no longer the stack's */
        r = openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        return r < 0 ? -errno : r;
}

int sh_safe_mkdir_p(int rootfd, const char *path, const sh_safe_mkdir *how, const sh_safe_guard *g)
{
        lookup lk;
        int r;

        if ((r = lookup_begin(&lk, path, g)) < 0)
                return r;
        /* the common case, a directory that is there: one openat2 when nothing is checked */
        if (!(g && g->dir) && sh_safe_openat2_available()) {
                r = open_openat2(rootfd, path, O_PATH | O_DIRECTORY, 0);
                if (r >= 0)
                        return r;
                if (r == -ENOSYS)
                        openat2_state = PROBE_NO;
        }
        return mkdir_walk(rootfd, path, how, g, &lk);
}
