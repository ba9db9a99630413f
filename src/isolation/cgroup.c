/* cgroup.c: cgroup front end: mode detection, the daemon's subtree, generic create/attach/destroy, and dispatch to the v1/v2 backends (the pure parsers are cgroup-parse.c). */
#include "cgroup-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sh/list.h"
#include "sh/remove.h"
#include "sh/tree.h"

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* ------------------------------------------------------------------------------------------ */
/* File helpers shared by the backends.                                                        */

/* read(2), again after a signal: the bytes read, 0 at the end, or -errno. */
static ssize_t read_some(int fd, void *buf, size_t n)
{
        for (;;) {
                ssize_t r = read(fd, buf, n);

                if (r >= 0 || errno != EINTR)
                        return r < 0 ? -errno : r;
        }
}

int sh_cg_read_file(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, cap = 0;

        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t n;

                if (cap - len < 4096) {
                        size_t ncap = cap ? cap * 2 : 8192;
                        char *nb;

                        if (ncap > max + 1)
                                ncap = max + 1;
                        if (ncap <= len + 1)
                                return -EFBIG;
                        nb = realloc(buf, ncap);
                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                        cap = ncap;
                }
                n = read_some(fd, buf + len, cap - len - 1);
                if (n < 0)
                        return (int)n;
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        if (ret_len)
                *ret_len = len;
        *ret = TAKE_PTR(buf);
        return 0;
}

int sh_cg_write_file(int dirfd, const char *name, const char *val)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        size_t len = strlen(val);
        ssize_t n;

        if (fd < 0)
                return -errno;
        do
                n = write(fd, val, len);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return (size_t)n == len ? 0 : -EIO;
}

int sh_cg_open_dir(int dirfd, const char *name)
{
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

        return fd < 0 ? -errno : fd;
}

int sh_cg_check_magic(int dirfd, unsigned long magic)
{
        struct statfs sfs;

        if (fstatfs(dirfd, &sfs) < 0)
                return -errno;
        return (unsigned long)sfs.f_type == magic ? 0 : -EMEDIUMTYPE;
}

/* Only the purge of leftovers waits like this (see purge): the loop is not running then. */
static void sleep_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

int sh_cg_for_each_child(int dirfd, sh_cg_dir_cb cb, void *userdata)
{
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;

        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                int r = -errno;

                close(fd);
                return r;
        }
        /* cgroupfs has d_type; a directory is a child cgroup, everything else a control file */
        while ((errno = 0, de = readdir(d))) {
                int r;

                if (de->d_type != DT_DIR || STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                r = cb(dirfd, de->d_name, userdata);
                if (r < 0)
                        return r;
        }
        return errno ? -errno : 0;
}

/* Stream cgroup.procs of one cgroup: it can be long (a fork bomb up to pids.max), so it is
 * parsed in chunks rather than read whole. Each line is one decimal pid. */
static int for_each_pid_one(int dirfd, sh_cg_pid_cb cb, void *userdata)
{
        _cleanup_close_ int fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        char buf[4096];
        char num[24];
        size_t nl = 0;

        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t n = read_some(fd, buf, sizeof(buf));

                if (n < 0)
                        return (int)n;
                if (n == 0)
                        break;
                for (ssize_t i = 0; i < n; i++) {
                        if (buf[i] == '\n') {
                                uint64_t v;
                                int r;

                                if (nl == 0)
                                        continue;
                                if (sh_cg_parse_u64_span(num, nl, &v) < 0 || v == 0 || v > INT_MAX)
                                        return -EBADMSG;
                                nl = 0;
                                r = cb((pid_t)v, userdata);
                                if (r < 0)
                                        return r;
                        } else {
                                if (nl >= sizeof(num))
                                        return -EBADMSG;
                                num[nl++] = buf[i];
                        }
                }
        }
        return nl ? -EBADMSG : 0;
}

typedef struct pid_walk {
        sh_cg_pid_cb cb;
        void *userdata;
} pid_walk;

/* The cgroups of a tree are its directories (the rest are control files); a child removed
 * meanwhile is skipped. At most SH_CG_DEPTH_MAX levels below the top. */
static int cg_tree_entry(const sh_tree_ev *ev)
{
        if (ev->kind == SH_TREE_ERROR)
                return ev->err == ENOENT ? 0 : -ev->err;
        if (ev->kind != SH_TREE_ENTRY || ev->type != DT_DIR)
                return 0;
        return ev->depth > SH_CG_DEPTH_MAX ? -ELOOP : SH_TREE_DESCEND;
}

static int pid_visit(const sh_tree_ev *ev, void *data)
{
        pid_walk *w = data;

        if (ev->kind == SH_TREE_DIR)
                return for_each_pid_one(ev->dirfd, w->cb, w->userdata);
        return cg_tree_entry(ev);
}

int sh_cg_for_each_pid(int dirfd, bool recursive, sh_cg_pid_cb cb, void *userdata)
{
        pid_walk w = {.cb = cb, .userdata = userdata};

        if (!recursive)
                return for_each_pid_one(dirfd, cb, userdata);
        return sh_tree_walk(dirfd, SH_CG_DEPTH_MAX + 1, pid_visit, &w);
}

typedef struct kill_walk {
        const char *controller;
        const char *cgpath;
        int sig; /* SIGKILL for a kill */
        int count;
} kill_walk;

/* pidfd first, then check that the pid is still in our cgroup: if the process we hold died
 * and its pid went to someone else between the two steps, the check looks at the newcomer but
 * the signal goes to the pidfd's (dead) process and fails with ESRCH. So a recycled pid
 * outside the sandbox is never signalled. */
static int kill_one(pid_t pid, void *userdata)
{
        kill_walk *k = userdata;
        _cleanup_close_ int pidfd = -1;
        _cleanup_free_ char *text = NULL, *path = NULL;
        char proc[64];
        size_t cl;
        int r;

        if (pid == getpid())
                return 0;
        pidfd = sh_pidfd_open(pid, 0);
        if (pidfd < 0 && errno != ENOSYS)
                return 0; /* gone already */
        snprintf(proc, sizeof(proc), "/proc/%d/cgroup", (int)pid);
        r = sh_cg_read_file(AT_FDCWD, proc, SH_CG_SMALL_MAX, &text, NULL);
        if (r < 0)
                return 0;
        if (sh_cg_parse_proc_self(text, k->controller, &path) < 0)
                return 0;
        cl = strlen(k->cgpath);
        if (strncmp(path, k->cgpath, cl) != 0 || (path[cl] != '\0' && path[cl] != '/'))
                return 0;
        if (pidfd >= 0)
                r = sh_pidfd_send_signal(pidfd, k->sig);
        else
                r = kill(pid, k->sig); /* kernel < 5.3: no pidfd, the check is best effort */
        if (r == 0)
                k->count++;
        return 0;
}

/* cg's directory in hierarchy h below the subtree: its own relpath, or where it is its
 * parent's (`up`), the relpath without its last component; its length in *len. */
static const char *cg_path(const sh_cgroup *cg, size_t h, int *len)
{
        const char *slash = strrchr(cg->relpath, '/');

        *len = (cg->up & (1u << h)) && slash ? (int)(slash - cg->relpath)
                                             : (int)strlen(cg->relpath);
        return cg->relpath;
}

static char *cg_cgpath(sh_cgroup *cg, size_t h)
{
        int len;
        const char *rel = cg_path(cg, h, &len);
        char *p;

        if (asprintf(&p, "%s/%.*s", cg->root->h[h].base_cgpath, len, rel) < 0)
                return NULL;
        return p;
}

static int signal_in(sh_cgroup *cg, size_t h, bool recursive, int sig)
{
        _cleanup_free_ char *cgpath = NULL;
        kill_walk k = {.controller = cg->root->h[h].controller, .sig = sig};
        _cleanup_close_ int fd = sh_cg_open(cg, h);
        int r;

        if (fd == -ENOENT)
                return 0; /* not there (any more): nothing to kill */
        if (fd < 0)
                return fd;
        cgpath = cg_cgpath(cg, h);
        if (!cgpath)
                return -ENOMEM;
        k.cgpath = cgpath;
        r = sh_cg_for_each_pid(fd, recursive, kill_one, &k);
        return r < 0 ? r : k.count;
}

int sh_cg_kill_all_in(sh_cgroup *cg, size_t h)
{
        return signal_in(cg, h, true, SIGKILL);
}

int sh_cg_kill_own_in(sh_cgroup *cg, size_t h)
{
        return signal_in(cg, h, false, SIGKILL);
}

typedef struct sum_walk {
        const char *name;
        const char *key;
        uint64_t sum;
} sum_walk;

static int sum_visit(const sh_tree_ev *ev, void *data)
{
        _cleanup_free_ char *text = NULL;
        sum_walk *s = data;
        uint64_t v;
        int r;

        if (ev->kind != SH_TREE_DIR)
                return cg_tree_entry(ev);
        r = sh_cg_read_file(ev->dirfd, s->name, SH_CG_SMALL_MAX, &text, NULL);
        if (r < 0)
                return r;
        r = sh_cg_parse_keyed(text, s->key, &v);
        if (r < 0)
                return r;
        if (s->sum > UINT64_MAX - v)
                return -EOVERFLOW;
        s->sum += v;
        return 0;
}

int sh_cg_sum_keyed(int dirfd, const char *name, const char *key, uint64_t *ret)
{
        sum_walk s = {.name = name, .key = key};
        int r = sh_tree_walk(dirfd, SH_CG_DEPTH_MAX + 1, sum_visit, &s);

        if (r < 0)
                return r;
        *ret = s.sum;
        return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Mode detection and the subtree.                                                             */

static bool valid_name(const char *s, size_t max)
{
        size_t n = strlen(s);

        if (n == 0 || n > max || s[0] == '.')
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];

                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return false;
        }
        return true;
}

/* Fill h for one hierarchy from the two /proc texts: own_dir and base_cgpath. */
static int hier_init(sh_cg_hier *h, const char *controller, const char *selfcg,
                     const char *mountinfo, const char *subtree)
{
        _cleanup_free_ char *mp = NULL, *mroot = NULL, *cgpath = NULL;
        int r;

        h->controller = controller;
        r = sh_cg_parse_mountinfo_ex(mountinfo, controller, &mp, &mroot);
        if (r < 0)
                return r;
        r = sh_cg_parse_proc_self(selfcg, controller, &cgpath);
        if (r < 0)
                return r;
        if (!controller) {
                /* v2: a daemon that already moved itself into its leaf
                 * ("<own>/<subtree>/daemon") must find <own> again, not nest a new subtree
                 * inside its leaf (a second open in one process, or a re-exec). */
                _cleanup_free_ char *leaf = NULL;
                size_t cl = strlen(cgpath), ll;

                if (asprintf(&leaf, "/%s/daemon", subtree) < 0)
                        return -ENOMEM;
                ll = strlen(leaf);
                if (cl >= ll && STREQ(cgpath + cl - ll, leaf)) {
                        cgpath[cl - ll] = '\0';
                        if (!*cgpath) {
                                cgpath[0] = '/';
                                cgpath[1] = '\0';
                        }
                }
        }
        r = sh_cg_path_join(mp, mroot, cgpath, &h->own_dir);
        if (r < 0)
                return r;
        h->mountpoint = TAKE_PTR(mp);
        if (asprintf(&h->base_cgpath, "%s/%s", STREQ(cgpath, "/") ? "" : cgpath, subtree) < 0) {
                h->base_cgpath = NULL;
                return -ENOMEM;
        }
        return 0;
}

static void hier_done(sh_cg_hier *h)
{
        free(h->mountpoint);
        free(h->own_dir);
        free(h->base_cgpath);
        h->mountpoint = h->own_dir = h->base_cgpath = NULL;
        h->own_fd = sh_close(h->own_fd);
        h->subtree_fd = sh_close(h->subtree_fd);
}

/* v2 is usable when the cgroup2 mount's root offers memory, pids and cpu; an empty cgroup2
 * beside v1 hierarchies (hybrid, as on the development machine) is not. */
static bool v2_usable(const char *selfcg, const char *mountinfo)
{
        _cleanup_free_ char *mp = NULL, *ctl = NULL;
        _cleanup_close_ int fd = -1;

        if (sh_cg_parse_mountinfo(mountinfo, NULL, &mp) < 0)
                return false;
        fd = open(mp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || sh_cg_check_magic(fd, CGROUP2_SUPER_MAGIC) < 0)
                return false;
        if (sh_cg_read_file(fd, "cgroup.controllers", SH_CG_SMALL_MAX, &ctl, NULL) < 0)
                return false;
        (void)selfcg;
        return sh_cg_has_token(ctl, "memory") && sh_cg_has_token(ctl, "pids") &&
               sh_cg_has_token(ctl, "cpu");
}

static int detect(sh_cgroup_root *r, const char *selfcg, const char *mountinfo, sh_error **err)
{
        static const char *const v1[] = {"memory", "pids", "cpu", "freezer"};
        int k;

        if (v2_usable(selfcg, mountinfo)) {
                k = hier_init(&r->h[0], NULL, selfcg, mountinfo, r->subtree_name);
                if (k < 0)
                        return sh_error_make(err, -k, "cgroup v2: cannot locate our own cgroup");
                r->mode = SH_CG_V2;
                r->ops = &sh_cg_v2_ops;
                r->nhier = 1;
                return 0;
        }
        for (size_t i = 0; i < ARRAY_SIZE(v1); i++) {
                k = hier_init(&r->h[i], v1[i], selfcg, mountinfo, r->subtree_name);
                if (k < 0)
                        return sh_error_make(
                                err, k == -ENOENT ? EOPNOTSUPP : -k,
                                "no usable cgroup hierarchy: no cgroup2 with memory, pids and cpu, "
                                "and the v1 '%s' hierarchy is %s",
                                v1[i], k == -ENOENT ? "not mounted or not ours" : "unreadable");
        }
        r->mode = SH_CG_V1;
        r->ops = &sh_cg_v1_ops;
        r->nhier = ARRAY_SIZE(v1);
        return 0;
}

static sh_cgroup *cg_new(sh_cgroup_root *r, const char *relpath)
{
        sh_cgroup *cg = calloc(1, sizeof(*cg));

        if (!cg)
                return NULL;
        cg->root = r;
        cg->relpath = strdup(relpath);
        if (!cg->relpath) {
                free(cg);
                return NULL;
        }
        return cg;
}

int sh_cg_open(const sh_cgroup *cg, size_t h)
{
        char path[PATH_MAX];
        const char *rel;
        int len;

        if (h >= cg->root->nhier || !((cg->present | cg->up) & (1u << h)))
                return -ENOENT;
        rel = cg_path(cg, h, &len);
        if (snprintf(path, sizeof(path), "%.*s", len, rel) >= (int)sizeof(path))
                return -ENAMETOOLONG;
        return sh_cg_open_dir(cg->root->h[h].subtree_fd, path);
}

void sh_cgroup_free(sh_cgroup *cg)
{
        if (!cg)
                return;
        free(cg->relpath);
        free(cg);
}

static void cgroup_freep(sh_cgroup **cg)
{
        sh_cgroup_free(*cg);
}

/* ---- freeze and kill ---- */

/* Whether the freeze of the freezer directory fd is complete (1) or not yet (0: then it is
 * asked for again, which retries tasks that were busy and freezes children made since), or
 * -errno. */
static int freeze_check(const sh_cg_ops *ops, int fd)
{
        int k = ops->frozen(fd);

        if (k != 0)
                return k;
        k = ops->freeze_start(fd);
        return k < 0 ? k : 0;
}

static size_t freezer_hier(const sh_cgroup_root *r)
{
        return r->mode == SH_CG_V1 ? SH_CG_V1_FREEZER : 0;
}

/* freeze_check on cg's freezer directory, opened for it. */
static int freeze_check_cg(sh_cgroup *cg)
{
        _cleanup_close_ int fd = sh_cg_open(cg, freezer_hier(cg->root));

        return fd < 0 ? fd : freeze_check(cg->root->ops, fd);
}

int sh_cgroup_freeze_begin(sh_cgroup *cg, sh_error **err)
{
        _cleanup_close_ int fd = sh_cg_open(cg, freezer_hier(cg->root));
        int k = fd < 0 ? fd : cg->root->ops->freeze_start(fd);

        return k < 0 ? sh_error_make(err, -k, "cannot freeze cgroup '%s'", cg->relpath) : 0;
}

int sh_cgroup_freeze_poll(sh_cgroup *cg, bool *ret_frozen, sh_error **err)
{
        _cleanup_close_ int fd = sh_cg_open(cg, freezer_hier(cg->root));
        int k = fd < 0 ? fd : freeze_check(cg->root->ops, fd);

        if (k < 0)
                return sh_error_make(err, -k, "cannot read the freezer state of cgroup '%s'",
                                     cg->relpath);
        *ret_frozen = k == 1;
        return 0;
}

int sh_cgroup_thaw(sh_cgroup *cg, sh_error **err)
{
        _cleanup_close_ int fd = sh_cg_open(cg, freezer_hier(cg->root));
        int k = fd < 0 ? fd : cg->root->ops->thaw(fd);

        return k < 0 ? sh_error_make(err, -k, "cannot thaw cgroup '%s'", cg->relpath) : 0;
}

/* One SIGKILL pass over every hierarchy (a process may, after a crash half-way through an
 * attach, be in some of them only). How many were signalled; the first error into *first. */
static int kill_pass(sh_cgroup *cg, int *first)
{
        int n = 0;

        for (size_t h = 0; h < cg->root->nhier; h++) {
                int k = sh_cg_kill_all_in(cg, h);

                if (k < 0 && *first == 0)
                        *first = k;
                if (k > 0)
                        n += k;
        }
        return n;
}

/* The end of a kill. Frozen, nothing can have forked since the last pass (a frozen task does
 * not run) and no pid can have been recycled (frozen tasks do not exit): one more pass, and
 * the SIGKILLs land at the thaw. Not frozen in time, a process may have forked before its
 * SIGKILL arrived; a task with SIGKILL pending cannot fork any more, so each further pass
 * shrinks the set and a few suffice. Always thawed. */
static void kill_finish(sh_cgroup *cg, bool frozen, int *first)
{
        const sh_cg_ops *ops = cg->root->ops;
        _cleanup_close_ int fd = -1;

        kill_pass(cg, first);
        fd = sh_cg_open(cg, freezer_hier(cg->root));
        if (fd >= 0) {
                int k = ops->thaw(fd);

                if (k < 0 && *first == 0)
                        *first = k;
        }
        for (int pass = 0; !frozen && pass < ops->kill_passes; pass++)
                if (kill_pass(cg, first) == 0)
                        break;
}

/* A kill waiting for its freeze, looked at from timers of the root's loop (1, 2, 4, ... 20 ms
 * apart), never by sleeping: the daemon's loop goes on meanwhile. It owns a copy of the
 * cgroup's handle: the caller may free its own at once. */
typedef struct sh_cg_kill {
        sh_cgroup *cg;
        uint64_t deadline_ms;
        unsigned delay_ms;
        sh_timer *t;
        SH_LIST_FIELDS(struct sh_cg_kill, kills);
} sh_cg_kill;

#define KILL_POLL_MAX_MS 20

static void kill_free(sh_cg_kill *k)
{
        sh_cgroup_root *r = k->cg->root;

        sh_loop_cancel_timer(r->loop, k->t);
        SH_LIST_REMOVE(kills, r->kills, k);
        sh_cgroup_free(k->cg);
        free(k);
}

/* Finish k now, frozen or not (shutdown, or its deadline). Errors of a kill nobody waits for
 * any more are not reported: the cgroup's removal, retried until it is empty, is the check. */
static void kill_end(sh_cg_kill *k, bool frozen)
{
        int first = 0;

        kill_finish(k->cg, frozen, &first);
        kill_free(k);
}

static void kill_tick(sh_loop *l, sh_timer *t, void *data)
{
        sh_cg_kill *k = data;
        int c = freeze_check_cg(k->cg);

        k->t = NULL;
        if (c == 0 && sh_now_ms() < k->deadline_ms) {
                if (k->delay_ms < KILL_POLL_MAX_MS)
                        k->delay_ms *= 2;
                k->t = sh_loop_add_timer(l, k->delay_ms, kill_tick, k);
                if (k->t)
                        return;
        }
        kill_end(k, c == 1);
}

static sh_cgroup *cg_dup(sh_cgroup *cg)
{
        sh_cgroup *d = cg_new(cg->root, cg->relpath);

        if (d) {
                d->present = cg->present;
                d->up = cg->up;
        }
        return d;
}

/* Let the root's loop finish the kill of cg; 0, or -errno when it cannot (no loop, no
 * memory): the caller finishes it now. A kill of cg already waiting is that one. */
static int kill_wait(sh_cgroup *cg)
{
        sh_cgroup_root *r = cg->root;
        sh_cg_kill *k;

        if (!r->loop)
                return -EAGAIN;
        SH_LIST_FOREACH(kills, k, r->kills) {
                if (STREQ(k->cg->relpath, cg->relpath))
                        return 0;
        }
        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        k->cg = cg_dup(cg);
        k->delay_ms = 1;
        k->deadline_ms = sh_now_ms() + r->ops->kill_freeze_ms;
        k->t = k->cg ? sh_loop_add_timer(r->loop, k->delay_ms, kill_tick, k) : NULL;
        if (!k->t) {
                sh_cgroup_free(k->cg);
                free(k);
                return -ENOMEM;
        }
        SH_LIST_PREPEND(kills, r->kills, k);
        return 0;
}

/* Kill every process of cg and below: by the kernel where it can (v2 cgroup.kill), else with
 * the freezer: freeze, SIGKILL each, and once the freeze is complete SIGKILL each again and
 * thaw. The freeze is waited for from the loop's timers when `may_wait` (and the root has a
 * loop), else not at all (the passes of an unfrozen kill). */
static int kill_begin(sh_cgroup *cg, bool may_wait, sh_error **err)
{
        const sh_cg_ops *ops = cg->root->ops;
        _cleanup_close_ int fd = -1;
        int first = 0, k;

        if (ops->kill_direct) {
                k = ops->kill_direct(cg, err);
                if (k != 0)
                        return k < 0 ? k : 0;
        }
        fd = sh_cg_open(cg, freezer_hier(cg->root));
        k = fd >= 0 ? ops->freeze_start(fd) : -ENOENT;
        if (k < 0 && fd >= 0)
                first = k;
        kill_pass(cg, &first);
        if (k == 0)
                k = freeze_check(ops, fd);
        if (k != 0 || !may_wait || kill_wait(cg) < 0)
                kill_finish(cg, k == 1, &first);
        if (first < 0)
                return sh_error_make(err, -first, "cannot kill cgroup '%s'", cg->relpath);
        return 0;
}

int sh_cgroup_kill(sh_cgroup *cg, sh_error **err)
{
        return kill_begin(cg, true, err);
}

/* ---- the graveyard ---- */

/* A cgroup whose removal waits for its last processes to exit. */
typedef struct sh_cg_grave {
        sh_cgroup *cg;
        uint64_t since_ms;
        bool kill;
        SH_LIST_FIELDS(struct sh_cg_grave, graves);
} sh_cg_grave;

#define GRAVE_FIRST_MS   20
#define GRAVE_EVERY_MS   100
#define GRAVE_GIVE_UP_MS 60000

void sh_cgroup_root_on_lost(sh_cgroup_root *r, sh_cgroup_lost_fn fn, void *data)
{
        r->lost = fn;
        r->lost_data = data;
}

static void lost(sh_cgroup *cg, const char *why)
{
        sh_cgroup_root *r = cg->root;

        if (r->lost)
                r->lost(cg->relpath, why, r->lost_data);
}

/* Try each grave once (`try`): removed, given up after a minute, or kept. At the end
 * (`end`), every grave is let go, tried or not, and silently: the subtree's removal (or the
 * next start) takes what is left. */
static void graves_pass(sh_cgroup_root *r, bool try, bool end)
{
        uint64_t now = sh_now_ms();
        sh_cg_grave *g, *next;

        SH_LIST_FOREACH_SAFE(graves, g, next, r->graves) {
                sh_error *err = NULL;
                bool gone = true;

                if (try) {
                        if (g->kill)
                                (void)sh_cgroup_kill(g->cg, &err);
                        sh_error_release(&err);
                        gone = sh_cgroup_destroy(g->cg, &err) == 0;
                }
                if (!gone && !end) {
                        if (now - g->since_ms <= GRAVE_GIVE_UP_MS) {
                                sh_error_release(&err);
                                continue;
                        }
                        lost(g->cg, err && err->msg ? err->msg : "cannot remove it");
                }
                sh_error_release(&err);
                SH_LIST_REMOVE(graves, r->graves, g);
                sh_cgroup_free(g->cg);
                free(g);
        }
}

static void graves_sweep(sh_loop *l, sh_timer *t, void *data)
{
        sh_cgroup_root *r = data;

        r->graves_t = NULL;
        graves_pass(r, true, false);
        if (r->graves)
                r->graves_t = sh_loop_add_timer(l, GRAVE_EVERY_MS, graves_sweep, r);
}

void sh_cgroup_bury(sh_cgroup *cg, bool kill)
{
        sh_cgroup_root *r;
        sh_error *err = NULL;
        sh_cg_grave *g;

        if (!cg)
                return;
        r = cg->root;
        if (sh_cgroup_destroy(cg, &err) == 0) {
                sh_cgroup_free(cg);
                return;
        }
        sh_error_release(&err);
        if (kill)
                (void)sh_cgroup_kill(cg, &err);
        sh_error_release(&err);
        g = calloc(1, sizeof(*g));
        if (!g) {
                lost(cg, "out of memory for its removal later");
                sh_cgroup_free(cg);
                return;
        }
        g->cg = cg;
        g->kill = kill;
        g->since_ms = sh_now_ms();
        SH_LIST_PREPEND(graves, r->graves, g);
        if (r->loop && !r->graves_t)
                r->graves_t = sh_loop_add_timer(r->loop, GRAVE_FIRST_MS, graves_sweep, r);
}

/* The end of the graveyard: each grave tried a last time (`try`) and let go. */
static void graves_end(sh_cgroup_root *r, bool try)
{
        sh_loop_cancel_timer(r->loop, r->graves_t);
        r->graves_t = NULL;
        graves_pass(r, try, true);
}

/* Every kill still waiting, finished at once. */
static void kills_end(sh_cgroup_root *r)
{
        while (r->kills) {
                sh_cg_kill *k = r->kills;
                int c = freeze_check_cg(k->cg);

                kill_end(k, c == 1);
        }
}

void sh_cgroup_root_set_loop(sh_cgroup_root *r, sh_loop *l)
{
        kills_end(r);
        sh_loop_cancel_timer(r->loop, r->graves_t);
        r->graves_t = NULL;
        r->loop = l;
        if (l && r->graves)
                r->graves_t = sh_loop_add_timer(l, GRAVE_FIRST_MS, graves_sweep, r);
}

/* Thaw the freezer cgroup at dirfd and every one below it (best effort, bounded depth). On
 * v1 a cgroup frozen on its own stays frozen when its parent thaws, and a frozen process
 * takes no SIGKILL: a daemon killed in the middle of a kill (freeze, SIGKILL, thaw) leaves
 * such children, which no later kill of the parent would end. */
typedef struct thaw_ctx {
        const sh_cg_ops *ops;
        unsigned depth;
} thaw_ctx;

static int thaw_child(int dirfd, const char *name, void *userdata)
{
        thaw_ctx *t = userdata, below = {t->ops, t->depth + 1};
        _cleanup_close_ int fd = -1;

        if (t->depth >= 16)
                return 0; /* deeper than any cgroup of ours; the kill reports what is left */
        fd = sh_cg_open_dir(dirfd, name);
        if (fd < 0)
                return 0; /* gone meanwhile */
        (void)t->ops->thaw(fd);
        (void)sh_cg_for_each_child(fd, thaw_child, &below);
        return 0;
}

static void thaw_tree(const sh_cg_ops *ops, int fd)
{
        thaw_ctx t = {ops, 0};

        if (fd < 0 || !ops->thaw)
                return;
        (void)ops->thaw(fd);
        (void)sh_cg_for_each_child(fd, thaw_child, &t);
}

/* Kill everything in cg, wait (bounded) until it is empty, and remove it. Only at start,
 * before the loop runs (a killed daemon's leftovers), and at shutdown, once it has stopped:
 * nothing else is served meanwhile, and the next sandbox of the same name needs it gone. */
static int purge(sh_cgroup *cg, sh_error **err)
{
        uint64_t deadline = sh_now_ms() + SH_CG_LEFTOVER_TIMEOUT_MS;
        bool empty = false;

        for (;;) {
                _cleanup_close_ int ffd = sh_cg_open(cg, freezer_hier(cg->root));
                int r;

                /* a leftover may hold cgroups frozen by the daemon that left it */
                thaw_tree(cg->root->ops, ffd);
                r = kill_begin(cg, false, err);

                if (r < 0)
                        return r;
                r = cg->root->ops->is_empty(cg, &empty, err);
                if (r < 0)
                        return r;
                if (empty || sh_now_ms() >= deadline)
                        break;
                sleep_ms(10);
        }
        if (!empty)
                return sh_error_make(err, EBUSY, "cgroup '%s' still has processes after SIGKILL",
                                     cg->relpath);
        return sh_cgroup_destroy(cg, err);
}

typedef struct name_list {
        char **v;
        size_t n;
} name_list;

static int collect_name(int dirfd, const char *name, void *userdata)
{
        name_list *l = userdata;
        char **nv;

        (void)dirfd;
        if (l->n >= 65536)
                return -E2BIG;
        nv = realloc(l->v, (l->n + 1) * sizeof(*nv));
        if (!nv)
                return -ENOMEM;
        l->v = nv;
        l->v[l->n] = strdup(name);
        if (!l->v[l->n])
                return -ENOMEM;
        l->n++;
        return 0;
}

static void name_list_done(name_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                free(l->v[i]);
        free(l->v);
        l->v = NULL;
        l->n = 0;
}

/* Kill and remove every cgroup directly below the subtree (v2: but the daemon's leaf), in
 * every hierarchy: what a killed daemon left, or everything at shutdown. */
static int purge_children(sh_cgroup_root *r, sh_error **err)
{
        for (size_t h = 0; h < r->nhier; h++) {
                _cleanup_(name_list_done) name_list l = {0};
                int k = sh_cg_for_each_child(r->h[h].subtree_fd, collect_name, &l);

                if (k < 0)
                        return sh_error_make(err, -k, "cannot list cgroup '%s/%s'", r->h[h].own_dir,
                                             r->subtree_name);
                for (size_t i = 0; i < l.n; i++) {
                        _cleanup_(cgroup_freep) sh_cgroup *cg = NULL;

                        if (r->mode == SH_CG_V2 && STREQ(l.v[i], "daemon"))
                                continue;
                        cg = cg_new(r, l.v[i]);
                        if (!cg)
                                return sh_error_make(err, ENOMEM, "out of memory");
                        /* a crash may have left it in some hierarchies only */
                        for (size_t j = 0; j < r->nhier; j++) {
                                struct stat st;

                                if (fstatat(r->h[j].subtree_fd, l.v[i], &st, AT_SYMLINK_NOFOLLOW) <
                                    0) {
                                        if (errno != ENOENT)
                                                return sh_error_make(err, errno,
                                                                     "cannot look at cgroup '%s'",
                                                                     l.v[i]);
                                } else if (S_ISDIR(st.st_mode)) {
                                        cg->present |= 1u << j;
                                }
                        }
                        k = purge(cg, err);
                        if (k < 0)
                                return sh_error_wrap(err, "removing leftover cgroup");
                }
        }
        return 0;
}

int sh_cgroup_root_open(const char *instance, sh_cgroup_root **ret, sh_error **err)
{
        _cleanup_free_ char *selfcg = NULL, *mountinfo = NULL;
        sh_cgroup_root *r;
        int k;

        if (!instance || !valid_name(instance, SH_CG_NAME_MAX))
                return sh_error_make(err, EINVAL, "invalid cgroup instance name");
        r = calloc(1, sizeof(*r));
        if (!r)
                return sh_error_make(err, ENOMEM, "out of memory");
        r->v2_daemon_fd = r->v1_favor_fd = -1;
        for (size_t h = 0; h < SH_CG_MAX_HIER; h++)
                r->h[h].own_fd = r->h[h].subtree_fd = -1;
        if (asprintf(&r->subtree_name, "sandbox-host.%s", instance) < 0) {
                r->subtree_name = NULL;
                k = sh_error_make(err, ENOMEM, "out of memory");
                goto fail;
        }
        k = sh_cg_read_file(AT_FDCWD, "/proc/self/cgroup", SH_CG_SMALL_MAX, &selfcg, NULL);
        if (k < 0) {
                k = sh_error_make(err, -k, "cannot read /proc/self/cgroup");
                goto fail;
        }
        k = sh_cg_read_file(AT_FDCWD, "/proc/self/mountinfo", SH_CG_MOUNTINFO_MAX, &mountinfo,
                            NULL);
        if (k < 0) {
                k = sh_error_make(err, -k, "cannot read /proc/self/mountinfo");
                goto fail;
        }
        k = detect(r, selfcg, mountinfo, err);
        if (k < 0)
                goto fail;
        k = r->ops->open(r, err);
        if (k < 0)
                goto fail;
        k = purge_children(r, err);
        if (k < 0)
                goto fail;
        *ret = r;
        return 0;
fail:
        sh_cgroup_root_free(r);
        return k;
}

int sh_cgroup_root_destroy(sh_cgroup_root *r, sh_error **err)
{
        int k;

        kills_end(r);
        graves_end(r, true);
        k = purge_children(r, err);

        if (k < 0)
                return k;
        return r->ops->destroy_root(r, err);
}

void sh_cgroup_root_free(sh_cgroup_root *r)
{
        if (!r)
                return;
        kills_end(r);
        graves_end(r, false);
        for (size_t h = 0; h < SH_CG_MAX_HIER; h++)
                hier_done(&r->h[h]);
        sh_close(r->v2_daemon_fd);
        sh_close(r->v1_favor_fd);
        free(r->subtree_name);
        free(r);
}

/* ---- favordynmods -------------------------------------------------------------------------- */

/* fsopen(2) and friends by number (glibc 2.36 declares them, but its <sys/mount.h> clashes
 * with the kernel's mount headers, as in isolation/child.c). */
#define FAV_FSCONFIG_SET_FLAG   0
#define FAV_FSCONFIG_SET_STRING 1
#define FAV_FSCONFIG_CMD_CREATE 6
#define FAV_FSOPEN_CLOEXEC      1
#define FAV_FSMOUNT_CLOEXEC     1

/* Whether the cgroup2 mount at /sys/fs/cgroup has favordynmods among its super options. */
static bool v2_mounted_favoring(void)
{
        _cleanup_free_ char *mountinfo = NULL;
        const char *line;

        if (sh_cg_read_file(AT_FDCWD, "/proc/self/mountinfo", SH_CG_MOUNTINFO_MAX, &mountinfo,
                            NULL) < 0)
                return false;
        for (line = mountinfo; line && *line;) {
                const char *end = strchr(line, '\n'), *sep = strstr(line, " - cgroup2 ");
                size_t len = end ? (size_t)(end - line) : strlen(line);

                if (sep && sep < line + len && strstr(line, " /sys/fs/cgroup ") &&
                    memmem(sep, len - (size_t)(sep - line), "favordynmods", 12))
                        return true;
                line = end ? end + 1 : NULL;
        }
        return false;
}

int sh_cgroup_root_favor_dynmods(sh_cgroup_root *r, sh_error **err)
{
        _cleanup_close_ int fd = -1;
        int mfd;

        if (r->mode == SH_CG_V2)
                return v2_mounted_favoring() ? 1 : 0;
        if (r->mode != SH_CG_V1)
                return 0;
        if (r->v1_favor_fd >= 0)
                return 1;
        fd = (int)syscall(SYS_fsopen, "cgroup", FAV_FSOPEN_CLOEXEC);
        if (fd < 0)
                return sh_error_make(err, errno, "fsopen(cgroup)");
        if (syscall(SYS_fsconfig, fd, FAV_FSCONFIG_SET_FLAG, "none", NULL, 0) < 0 ||
            syscall(SYS_fsconfig, fd, FAV_FSCONFIG_SET_STRING, "name", SH_CG_FAVOR_NAME, 0) < 0 ||
            syscall(SYS_fsconfig, fd, FAV_FSCONFIG_SET_FLAG, "favordynmods", NULL, 0) < 0 ||
            syscall(SYS_fsconfig, fd, FAV_FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return sh_error_make(err, errno,
                                     "cannot make the cgroup v1 hierarchy name=%s,favordynmods",
                                     SH_CG_FAVOR_NAME);
        mfd = (int)syscall(SYS_fsmount, fd, FAV_FSMOUNT_CLOEXEC, 0);
        if (mfd < 0)
                return sh_error_make(err, errno, "fsmount(name=%s)", SH_CG_FAVOR_NAME);
        r->v1_favor_fd = mfd;
        return 1;
}

sh_cg_mode sh_cgroup_mode(const sh_cgroup_root *r)
{
        return r ? r->mode : SH_CG_NONE;
}

sh_cgroup_root *sh_cgroup_root_of(const sh_cgroup *cg)
{
        return cg->root;
}

/* ------------------------------------------------------------------------------------------ */
/* One cgroup.                                                                                 */

/* `leaf`: sh_cgroup_create_leaf. */
static int cg_create(sh_cgroup_root *r, sh_cgroup *parent, const char *name,
                     const sh_cg_limits *lim, bool leaf, sh_cgroup **ret, sh_error **err)
{
        _cleanup_(cgroup_freep) sh_cgroup *cg = NULL;
        _cleanup_free_ char *rel = NULL;
        size_t made = 0;
        int k;

        if (!name || !valid_name(name, SH_CG_NAME_MAX))
                return sh_error_make(err, EINVAL, "invalid cgroup name");
        if (parent && parent->root != r)
                return sh_error_make(err, EINVAL, "parent cgroup of another root");
        if (r->mode == SH_CG_V2 && !parent && STREQ(name, "daemon"))
                return sh_error_make(err, EEXIST, "cgroup name 'daemon' is reserved");
        if (asprintf(&rel, "%s%s%s", parent ? parent->relpath : "", parent ? "/" : "", name) < 0) {
                rel = NULL;
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        cg = cg_new(r, rel);
        if (!cg)
                return sh_error_make(err, ENOMEM, "out of memory");
        if (parent && r->ops->prepare_parent) {
                k = r->ops->prepare_parent(parent, lim != NULL, err);
                if (k < 0)
                        return k;
        }
        /* By its path below the subtree: the parent's directories are not opened (nor held). */
        for (; made < r->nhier; made++) {
                if (parent && !(parent->present & (1u << made))) {
                        k = sh_error_make(err, ENOENT, "parent cgroup '%s' is incomplete",
                                          parent->relpath);
                        goto undo;
                }
                if (leaf && r->mode == SH_CG_V1 && made == SH_CG_V1_MEMORY) {
                        cg->up |= 1u << made; /* the parent's memory cgroup */
                        continue;
                }
                if (mkdirat(r->h[made].subtree_fd, rel, 0755) < 0) {
                        k = sh_error_make(err, errno, "cannot create cgroup '%s' in %s", rel,
                                          r->h[made].controller ? r->h[made].controller
                                                                : "cgroup2");
                        goto undo;
                }
                cg->present |= 1u << made;
        }
        if (lim) {
                k = r->ops->set_limits(cg, lim, err);
                if (k < 0)
                        goto undo;
        }
        *ret = TAKE_PTR(cg);
        return 0;
undo:
        /* nothing runs in a cgroup we just made: removing it cannot fail with EBUSY */
        while (made-- > 0)
                if (cg->present & (1u << made))
                        (void)unlinkat(r->h[made].subtree_fd, rel, AT_REMOVEDIR);
        return k;
}

int sh_cgroup_create(sh_cgroup_root *r, sh_cgroup *parent, const char *name,
                     const sh_cg_limits *lim, sh_cgroup **ret, sh_error **err)
{
        return cg_create(r, parent, name, lim, false, ret, err);
}

int sh_cgroup_create_leaf(sh_cgroup_root *r, sh_cgroup *parent, const char *name, sh_cgroup **ret,
                          sh_error **err)
{
        if (!parent)
                return sh_error_make(err, EINVAL, "a leaf needs a parent cgroup");
        return cg_create(r, parent, name, NULL, true, ret, err);
}

int sh_cgroup_open_procs(sh_cgroup *cg, int *fds, int max)
{
        char path[PATH_MAX];
        int n = 0;

        for (size_t h = 0; h < cg->root->nhier; h++) {
                const char *rel;
                int len;

                if (!((cg->present | cg->up) & (1u << h)))
                        continue;
                rel = cg_path(cg, h, &len);
                if (snprintf(path, sizeof(path), "%.*s/cgroup.procs", len, rel) >=
                    (int)sizeof(path)) {
                        while (n > 0)
                                sh_close(fds[--n]);
                        return -ENAMETOOLONG;
                }
                if (n >= max) {
                        while (n > 0)
                                sh_close(fds[--n]);
                        return -ENOBUFS;
                }
                fds[n] = openat(cg->root->h[h].subtree_fd, path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fds[n] < 0) {
                        int r = -errno;

                        while (n > 0)
                                sh_close(fds[--n]);
                        return r;
                }
                n++;
        }
        return n;
}

int sh_cgroup_open_dir(sh_cgroup *cg)
{
        if (cg->root->mode != SH_CG_V2)
                return -EOPNOTSUPP;
        return sh_cg_open(cg, 0);
}

int sh_cgroup_attach(sh_cgroup *cg, pid_t pid, sh_error **err)
{
        char buf[32];

        if (pid <= 0)
                return sh_error_make(err, EINVAL, "invalid pid %d", (int)pid);
        snprintf(buf, sizeof(buf), "%d", (int)pid);
        for (size_t h = 0; h < cg->root->nhier; h++) {
                _cleanup_close_ int fd = sh_cg_open(cg, h);
                int k;

                if (fd < 0)
                        return sh_error_make(err, -fd, "cgroup '%s' is incomplete", cg->relpath);
                k = sh_cg_write_file(fd, "cgroup.procs", buf);
                if (k < 0)
                        return sh_error_make(err, -k, "cannot move pid %d into cgroup '%s' (%s)",
                                             (int)pid, cg->relpath,
                                             cg->root->h[h].controller ? cg->root->h[h].controller
                                                                       : "cgroup2");
        }
        return 0;
}

/* ---- a sandbox's processes beside its helpers ---- */

static bool is_helper(const char *name)
{
        return strncmp(name, SH_CG_HELPER_PREFIX, strlen(SH_CG_HELPER_PREFIX)) == 0;
}

typedef enum { PROCS_FREEZE, PROCS_CHECK, PROCS_THAW } procs_op;

typedef struct procs_walk {
        const sh_cg_ops *ops;
        procs_op op;
        int first; /* the first error */
        bool all;  /* every child answered 1 (PROCS_CHECK) */
} procs_walk;

static int procs_child(int dirfd, const char *name, void *userdata)
{
        procs_walk *w = userdata;
        _cleanup_close_ int fd = -1;
        int k;

        if (is_helper(name))
                return 0;
        fd = sh_cg_open_dir(dirfd, name);
        if (fd == -ENOENT)
                return 0; /* removed meanwhile (an exec cgroup): nothing left to freeze */
        if (fd < 0) {
                k = fd;
        } else {
                k = w->op == PROCS_FREEZE  ? w->ops->freeze_start(fd)
                    : w->op == PROCS_CHECK ? freeze_check(w->ops, fd)
                                           : w->ops->thaw(fd);
                /* a cgroup removed after we opened it has no processes either */
                if (k == -ENOENT || k == -ENODEV)
                        return 0;
        }
        if (k < 0 && w->first == 0)
                w->first = k;
        if (k <= 0)
                w->all = false;
        return 0;
}

/* Apply op to every child of cg but the helpers'; the first error, after trying all. */
static int procs_walk_children(sh_cgroup *cg, procs_op op, bool *ret_all)
{
        _cleanup_close_ int fd = sh_cg_open(cg, freezer_hier(cg->root));
        procs_walk w = {.ops = cg->root->ops, .op = op, .all = true};
        int k;

        if (fd < 0)
                return fd;
        k = sh_cg_for_each_child(fd, procs_child, &w);
        if (k < 0 && w.first == 0)
                w.first = k;
        if (ret_all)
                *ret_all = w.all;
        return w.first;
}

static int any_pid(pid_t pid, void *userdata)
{
        (void)pid;
        (void)userdata;
        return -EBUSY;
}

int sh_cgroup_freeze_procs_begin(sh_cgroup *cg, sh_error **err)
{
        _cleanup_close_ int fd = sh_cg_open(cg, freezer_hier(cg->root));
        int k;

        if (fd < 0)
                return sh_error_make(err, -fd, "cgroup '%s' has no freezer", cg->relpath);
        /* A process in cg itself would escape a freeze of the children (and on v2 cannot
         * exist beside children with controllers): refuse rather than freeze half. */
        k = sh_cg_for_each_pid(fd, false, any_pid, NULL);
        if (k < 0)
                return sh_error_make(err, -k, "cannot freeze cgroup '%s'%s", cg->relpath,
                                     k == -EBUSY ? ": it holds processes itself" : "");
        k = procs_walk_children(cg, PROCS_FREEZE, NULL);
        if (k < 0) {
                (void)procs_walk_children(cg, PROCS_THAW, NULL);
                return sh_error_make(err, -k, "cannot freeze cgroup '%s'", cg->relpath);
        }
        return 0;
}

int sh_cgroup_freeze_procs_poll(sh_cgroup *cg, bool *ret_frozen, sh_error **err)
{
        bool all = false;
        int k = procs_walk_children(cg, PROCS_CHECK, &all);

        if (k < 0)
                return sh_error_make(err, -k, "cannot read the freezer state of cgroup '%s'",
                                     cg->relpath);
        *ret_frozen = all;
        return 0;
}

int sh_cgroup_thaw_procs(sh_cgroup *cg, sh_error **err)
{
        int k = procs_walk_children(cg, PROCS_THAW, NULL);

        if (k < 0)
                return sh_error_make(err, -k, "cannot thaw cgroup '%s'", cg->relpath);
        return 0;
}

typedef struct kill_procs_ctx {
        sh_cgroup *cg;
        sh_error *first;
} kill_procs_ctx;

static int kill_procs_child(int dirfd, const char *name, void *userdata)
{
        kill_procs_ctx *c = userdata;
        sh_cgroup_root *r = c->cg->root;
        _cleanup_(cgroup_freep) sh_cgroup *child = NULL;
        _cleanup_free_ char *rel = NULL;
        sh_error *e = NULL;

        (void)dirfd;
        if (is_helper(name))
                return 0;
        if (asprintf(&rel, "%s/%s", c->cg->relpath, name) < 0) {
                rel = NULL;
                return -ENOMEM;
        }
        child = cg_new(r, rel);
        if (!child)
                return -ENOMEM;
        /* Where the parent is (a hierarchy where the child is missing is skipped by the kill). */
        child->present = c->cg->present;
        if (sh_cgroup_kill(child, &e) < 0 && !c->first)
                c->first = e;
        else
                sh_error_release(&e);
        return 0;
}

int sh_cgroup_kill_procs(sh_cgroup *cg, sh_error **err)
{
        kill_procs_ctx c = {.cg = cg};
        _cleanup_close_ int fd = -1;
        int first = 0, k;

        /* Processes of cg's own directory (there should be none), each hierarchy. */
        for (size_t h = 0; h < cg->root->nhier; h++) {
                k = sh_cg_kill_own_in(cg, h);
                if (k < 0 && first == 0)
                        first = k;
        }
        /* Then every child but the helpers' (each one atomically where the backend can:
         * v2 cgroup.kill; v1 freeze, kill, thaw). No process moves between them: only the
         * daemon writes cgroup.procs. */
        /* In the freezer's hierarchy, which has every child: a leaf (the worker's init) is
         * missing from v1's memory hierarchy, and a frozen one must be killed and thawed. */
        fd = sh_cg_open(cg, freezer_hier(cg->root));
        k = fd >= 0 ? sh_cg_for_each_child(fd, kill_procs_child, &c) : fd == -ENOENT ? 0 : fd;
        if (k < 0 && first == 0)
                first = k;
        if (c.first) {
                *err = c.first;
                return -1;
        }
        if (first < 0)
                return sh_error_make(err, -first, "cannot kill cgroup '%s'", cg->relpath);
        return 0;
}

int sh_cgroup_is_empty(sh_cgroup *cg, bool *ret, sh_error **err)
{
        return cg->root->ops->is_empty(cg, ret, err);
}

static int found_a_pid(pid_t pid, void *userdata)
{
        (void)pid;
        (void)userdata;
        return -EEXIST; /* stop at the first one */
}

int sh_cgroup_exec_is_empty(sh_cgroup *cg, bool *ret, sh_error **err)
{
        _cleanup_close_ int fd = sh_cg_open(cg, freezer_hier(cg->root));
        int k;

        k = fd < 0 ? fd : sh_cg_for_each_pid(fd, true, found_a_pid, NULL);
        if (k < 0 && k != -EEXIST)
                return sh_error_make(err, -k, "cannot read processes of cgroup '%s'", cg->relpath);
        *ret = k != -EEXIST;
        return 0;
}

int sh_cgroup_exec_signal(sh_cgroup *cg, int sig, sh_error **err)
{
        int k = signal_in(cg, freezer_hier(cg->root), true, sig);

        if (k < 0)
                return sh_error_make(err, -k, "cannot signal the processes of cgroup '%s'",
                                     cg->relpath);
        return k;
}

int sh_cgroup_oom_kills(sh_cgroup *cg, uint64_t *ret, sh_error **err)
{
        return cg->root->ops->oom_kills(cg, ret, err);
}

int sh_cgroup_usage(sh_cgroup *cg, sh_cg_usage *ret, sh_error **err)
{
        return cg->root->ops->usage(cg, ret, err);
}

int sh_cgroup_destroy(sh_cgroup *cg, sh_error **err)
{
        int first = 0;

        for (size_t h = 0; h < cg->root->nhier; h++) {
                int k;

                if (!(cg->present & (1u << h)))
                        continue;
                /* Most cgroups have no children (an exec's never has: its processes hold no
                 * privilege to make one): one rmdir, without reading the directory's dozens
                 * of control files. Else, deepest first: a cgroup with children cannot go. */
                k = unlinkat(cg->root->h[h].subtree_fd, cg->relpath, AT_REMOVEDIR) == 0 ? 0
                                                                                        : -errno;
                if (k == -EBUSY || k == -ENOTEMPTY)
                        k = sh_fs_remove_dirs(cg->root->h[h].subtree_fd, cg->relpath, NULL);
                /* Not there is removed: an exec's cgroup goes with its sandbox's subtree when
                 * both wait in the graveyard (the sandbox's, buried later, is tried first). */
                if (k == -ENOENT)
                        k = 0;
                if (k < 0 && first == 0)
                        first = k;
                if (k == 0)
                        cg->present &= ~(1u << h);
        }
        if (first < 0)
                return sh_error_make(err, -first, "cannot remove cgroup '%s': %s", cg->relpath,
                                     first == -EBUSY ? "processes remain" : strerror(-first));
        return 0;
}
