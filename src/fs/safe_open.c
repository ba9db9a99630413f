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
                /* IN_ROOT: links and ".." resolve as if rootfd were "/". NO_MAGICLINKS:
                 * /proc/<pid>/fd/N style links jump to arbitrary inodes and would bypass
                 * IN_ROOT entirely, so refuse them outright. */
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
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
 * the O_PATH fd we opened with O_NOFOLLOW, so it is the very inode we checked. The result is
 * bounded: at most SAFE_MAX_LINKS targets of at most PATH_MAX bytes each. */
static int expand_link(int linkfd, const char *rest, char **buf, const char **p, int *nlinks,
                       bool *ret_absolute)
{
        char target[PATH_MAX];
        ssize_t n;
        size_t rlen;
        char *nb;

        if (++*nlinks > SAFE_MAX_LINKS)
                return -ELOOP;
        n = readlinkat(linkfd, "", target, sizeof(target));
        if (n < 0)
                return -errno;
        if ((size_t)n >= sizeof(target))
                return -ENAMETOOLONG;
        if (n == 0)
                return -ENOENT; /* as the kernel: an empty link resolves to nothing */
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

/* Component-by-component resolution with the semantics of RESOLVE_IN_ROOT: the kernel never
 * follows a link here (every open carries O_NOFOLLOW); we read each link and continue the
 * walk ourselves from the root (absolute target) or the link's directory (relative), and
 * ".." at the root stays at the root. Magic links are plain text to us, so they can never
 * teleport the walk (the NO_MAGICLINKS part). */
static int open_fallback(int rootfd, const char *path, int flags, mode_t mode,
                         const sh_safe_guard *g)
{
        _cleanup_(fdstack_done) fdstack st = {0};
        _cleanup_free_ char *buf = strdup(path);
        /* O_CREAT|O_EXCL never follows a final link in the kernel either (EEXIST) */
        const bool follow_last = !(flags & O_NOFOLLOW) && !((flags & O_CREAT) && (flags & O_EXCL));
        const char *p = buf;
        int nlinks = 0, races = 0;
        int r;

        if (!buf)
                return -ENOMEM;
        /* the guard sees the root first: every lookup starts there or comes back to it */
        if (g && (r = g->dir(g->data, rootfd)) < 0)
                return r;

        for (;;) {
                char comp[NAME_MAX + 1];
                const char *start, *end, *q;
                struct stat sb;
                bool last, absolute = false;
                size_t len;
                int fd, cur;

                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                start = p;
                end = strchrnul(p, '/');
                len = (size_t)(end - p);
                /* bound check before copying into the fixed buffer */
                if (len > NAME_MAX)
                        return -ENAMETOOLONG;
                memcpy(comp, p, len);
                comp[len] = '\0';
                q = end;
                while (*q == '/')
                        q++;
                /* a component followed by '/' must be a directory, even at the end */
                last = *end == '\0';
                p = q;

                if (STREQ(comp, "."))
                        continue;
                if (STREQ(comp, "..")) {
                        fdstack_pop(&st); /* at the root this is a no-op: never above it */
                        continue;
                }
                cur = fdstack_top(&st, rootfd);

                if (!last || follow_last) {
                        fd = probe_component(cur, comp, &sb);
                        if (fd == -ENOENT && last && (flags & O_CREAT))
                                goto open_last;
                        if (fd < 0)
                                return fd;
                        if (S_ISLNK(sb.st_mode)) {
                                r = expand_link(fd, end, &buf, &p, &nlinks, &absolute);
                                sh_close(fd);
                                if (r < 0)
                                        return r;
                                if (absolute)
                                        while (st.n > 0)
                                                fdstack_pop(&st);
                                continue;
                        }
                        if (!last) {
                                if (!S_ISDIR(sb.st_mode)) {
                                        sh_close(fd);
                                        return -ENOTDIR;
                                }
                                /* entered: checked before anything in it is looked at (".."
                                 * pops back to a directory checked already) */
                                if (g && (r = g->dir(g->data, fd)) < 0) {
                                        sh_close(fd);
                                        return r;
                                }
                                r = fdstack_push(&st, fd);
                                if (r < 0) {
                                        sh_close(fd);
                                        return r;
                                }
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
                if (++races > SAFE_RACE_TRIES)
                        return -EAGAIN;
                p = start; /* the entry became a link under us: resolve it again */
        }

        /* Nothing left: the result is the directory we stand in (the root for ""). */
        r = openat(fdstack_top(&st, rootfd), ".", (flags & ~O_NOFOLLOW) | O_CLOEXEC, mode);
        return r < 0 ? -errno : r;
}

int sh_safe_openat_guarded(int rootfd, const char *path, int flags, mode_t mode,
                           const sh_safe_guard *g)
{
        int r;

        if (!path)
                return -EINVAL;
        if (!g && sh_safe_openat2_available()) {
                r = open_openat2(rootfd, path, flags, mode);
                if (r != -ENOSYS)
                        return r;
                /* a seccomp policy installed after the probe: stop using openat2 */
                openat2_state = PROBE_NO;
        }
        return open_fallback(rootfd, path, flags, mode, g);
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
        if (g && slash && (r = g->dir(g->data, fd)) < 0) {
                sh_close(fd);
                return r;
        }
        *ret_base = base;
        return fd;
}
