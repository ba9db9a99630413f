/* unpack.c: the tool store and its queue of unpacks: cgroup, confined child, finisher, install. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sh/list.h"
#include "sh/macro.h"
#include "sh/remove.h"
#include "sh/seccomp.h"
#include "sh/spawn.h"
#include "sh/tools.h"
#include "unpack-internal.h"

/* The confinement of the unpacker and why each step is there: unpack-child.c. This file is the
 * daemon's side: the store, a queue of unpacks, each one's cgroup, its two children (the
 * unpacker, then the finisher that hands the tree to root) and the install. */

#define STAGE_DIR         ".stage"
#define CACHE_DIR         ".cache"
#define FINISH_TIMEOUT_MS 60000u

enum phase { PH_QUEUED, PH_UNPACKING, PH_FINISHING, PH_DONE };

struct sh_store {
        sh_loop *loop;
        uid_t uid;
        int toolsfd;            /* {root}/tools */
        int stagefd;            /* {root}/tools/.stage: root-only, private staging */
        int cachefd;            /* {root}/tools/.cache: root-only, the stale-fallback results */
        sh_cgroup_root *cgroot; /* the daemon's subtree (borrowed) */
        sh_cgroup *cg;          /* {subtree}/tools: every unpack's cgroup is below it */
        sh_seccomp *filter;     /* the unpacker's allow-list, built once */
        unsigned counter;
        unsigned busy;    /* unpacks not yet freed: they need the fds until they report */
        unsigned running; /* children started and not yet reported */
        sh_timer *kick;   /* a pump of the queue from the loop */
        sh_unpack *queue, *queue_tail; /* waiting for one of the SH_TOOLS_UNPACK_PARALLEL slots */
        sh_unpack *active;             /* started */
        bool closing;                  /* freed once the last unpack reported */
        bool pumping;                  /* inside pump() */
};

struct sh_unpack {
        sh_store *s;
        char sha[65];
        char stage[64]; /* name under .stage */
        char cgname[32];
        enum phase phase;
        int bundlefd;  /* our own dup of the caller's fd */
        int dirfd;     /* the staging dir */
        int errfd;     /* read end of the running child's reason pipe */
        sh_cgroup *cg; /* tools/<cgname>, for the unpacker and then the finisher */
        sh_child *child;
        sh_timer *timer;
        bool ok; /* PH_DONE: the outcome to report */
        char reason[SH_TOOLS_REASON_MAX];
        sh_unpack_payload_fn payload;
        sh_unpack_done_fn done;
        void *data;
        SH_LIST_FIELDS(sh_unpack, list); /* on the store's queue or active list */
};

/* ---- removing a tree (in a child: it may be big) ------------------------------------- */

#define OLD_PREFIX ".stage-old-"

typedef struct rm_arg {
        char name[64]; /* "": every OLD_PREFIX entry of the directory */
} rm_arg;

static int remover_main(void *arg)
{
        rm_arg *a = arg;
        DIR *d;
        struct dirent *de;

        /* Best effort: a child, nobody to tell. */
        if (a->name[0])
                return sh_fs_remove_tree(3, a->name, NULL) < 0;
        d = fdopendir(3);
        if (!d)
                return 1;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, OLD_PREFIX, strlen(OLD_PREFIX)) == 0)
                        (void)sh_fs_remove_tree(dirfd(d), de->d_name, NULL);
        closedir(d);
        return 0;
}

/* Fire and forget: the loop reaps the child. `name` "" sweeps old staging areas of {root}/tools
 * (dirfd), otherwise removes dirfd/name. */
static void remove_later(sh_store *s, int dirfd, const char *name)
{
        rm_arg a = {{0}};

        snprintf(a.name, sizeof(a.name), "%s", name);
        (void)sh_child_fork(s->loop, dirfd, remover_main, &a, NULL, NULL);
}

/* ---- the store ---------------------------------------------------------------------- */

static int open_private_dir(int parent, const char *name)
{
        int fd;
        struct stat st;

        if (mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* Sandboxes see {root}/tools read-only at /tools: keep what is ours unreadable there. */
        if (fstat(fd, &st) < 0 || (st.st_mode & 077 && fchmod(fd, 0700) < 0)) {
                int r = -errno;

                close(fd);
                return r;
        }
        return fd;
}

int sh_store_open(const char *root, sh_loop *loop, uid_t uid, sh_cgroup_root *cgroot,
                  sh_store **ret, sh_error **err)
{
        sh_store *s = calloc(1, sizeof(*s));
        const sh_cg_limits lim = {
                .memory_max = SH_TOOLS_CG_MEMORY_MAX,
                .pids_max = SH_TOOLS_CG_PIDS_MAX,
                .cpu_max_milli = SH_TOOLS_CG_CPU_MILLI,
        };
        _cleanup_close_ int rootfd = -1;
        int r;

        if (!s)
                return sh_error_make(err, ENOMEM, "out of memory");
        s->loop = loop;
        s->uid = uid;
        s->cgroot = cgroot;
        s->toolsfd = s->stagefd = s->cachefd = -1;
        if (sh_unpack_filter_build(&s->filter, err) < 0) {
                r = sh_error_wrap(err, "building the unpacker's system call filter");
                goto fail;
        }
        /* All unpacking of this daemon together gets at most these; each unpack has its own
         * child cgroup with its own, smaller limits. */
        if (sh_cgroup_create(cgroot, NULL, "tools", &lim, &s->cg, err) < 0) {
                r = sh_error_wrap(err, "creating the unpacker's cgroup");
                goto fail;
        }
        rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0) {
                r = sh_error_make(err, errno, "opening the state root '%s'", root);
                goto fail;
        }
        if (mkdirat(rootfd, "tools", 0755) < 0 && errno != EEXIST) {
                r = sh_error_make(err, errno, "creating '%s/tools'", root);
                goto fail;
        }
        s->toolsfd = openat(rootfd, "tools", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rootfd = sh_close(rootfd);
        if (s->toolsfd < 0) {
                r = sh_error_make(err, errno, "opening '%s/tools'", root);
                goto fail;
        }
        /* Half-unpacked trees of an earlier run: the whole staging area is renamed away and
         * removed in a child, so nothing can sweep a staging dir of this run by mistake. */
        {
                char old[64];
                uint8_t rnd[8];

                randombytes_buf(rnd, sizeof(rnd));
                snprintf(old, sizeof(old), OLD_PREFIX "%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
                         rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
                if (renameat(s->toolsfd, STAGE_DIR, s->toolsfd, old) < 0 && errno != ENOENT) {
                        r = sh_error_make(err, errno, "moving '%s/tools/" STAGE_DIR "' aside",
                                          root);
                        goto fail;
                }
        }
        s->stagefd = open_private_dir(s->toolsfd, STAGE_DIR);
        if (s->stagefd < 0) {
                r = sh_error_make(err, -s->stagefd, "opening '%s/tools/" STAGE_DIR "'", root);
                goto fail;
        }
        s->cachefd = open_private_dir(s->toolsfd, CACHE_DIR);
        if (s->cachefd < 0) {
                r = sh_error_make(err, -s->cachefd, "opening '%s/tools/" CACHE_DIR "'", root);
                goto fail;
        }
        remove_later(s, s->toolsfd, "");
        *ret = s;
        return 0;
fail:
        sh_store_free(s);
        return r;
}

static void unpack_free(sh_unpack *u);
static void queue_del(sh_store *s, sh_unpack *u);

void sh_store_free(sh_store *s)
{
        if (!s)
                return;
        /* Unpacks still waiting never start; running ones are killed (their children report
         * from the loop, and the last report frees the store). */
        while (s->queue) {
                sh_unpack *u = s->queue;

                queue_del(s, u);
                if (s->stagefd >= 0)
                        remove_later(s, s->stagefd, u->stage);
                u->phase = PH_DONE;
                unpack_free(u);
        }
        sh_loop_cancel_timer(s->loop, s->kick);
        s->kick = NULL;
        if (s->busy) {
                s->closing = true;
                sh_unpack *u;

                SH_LIST_FOREACH(list, u, s->active) {
                        if (u->child)
                                (void)sh_child_kill(u->child, SIGKILL);
                }
                return;
        }
        if (s->cg) {
                sh_error *err = NULL;

                if (sh_cgroup_destroy(s->cg, &err) < 0)
                        sh_error_release(&err); /* removed with the daemon's subtree */
                sh_cgroup_free(s->cg);
        }
        sh_seccomp_free(s->filter);
        sh_close(s->toolsfd);
        sh_close(s->stagefd);
        sh_close(s->cachefd);
        free(s);
}

int sh_store_cache_fd(const sh_store *s)
{
        return s->cachefd;
}

bool sh_store_has(const sh_store *s, const char *sha)
{
        struct stat st;

        return fstatat(s->toolsfd, sha, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

int sh_store_tmpfile(const sh_store *s)
{
        /* On disk (not in memory) when the filesystem can: bundles may be 256 MiB each. */
        int fd = openat(s->stagefd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

        if (fd >= 0)
                return fd;
        if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
                return -errno;
        fd = memfd_create("sh-bundle", MFD_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* ---- the parent side ---------------------------------------------------------------- */

/* The queue keeps arrival order: in at the tail, out at the head. */
static void queue_push(sh_store *s, sh_unpack *u)
{
        SH_LIST_INSERT_AFTER(list, s->queue, s->queue_tail, u);
        s->queue_tail = u;
}

static void queue_del(sh_store *s, sh_unpack *u)
{
        if (s->queue_tail == u)
                s->queue_tail = u->list_prev;
        SH_LIST_REMOVE(list, s->queue, u);
}

static void unpack_free(sh_unpack *u)
{
        sh_store *s = u->s;

        sh_loop_cancel_timer(s->loop, u->timer);
        /* Its init was reaped, so nothing of it can be alive: a straggler is killed first. */
        sh_cgroup_bury(u->cg, true);
        sh_close(u->bundlefd);
        sh_close(u->dirfd);
        sh_close(u->errfd);
        free(u);
        if (--s->busy == 0 && s->closing) {
                s->closing = false;
                sh_store_free(s);
        }
}

static void pump(sh_store *s);

/* The one place an unpack ends: the caller is told, the slot goes to the next in line. */
static void report(sh_unpack *u)
{
        sh_store *s = u->s;
        bool was_running = u->phase == PH_UNPACKING || u->phase == PH_FINISHING, gone;

        u->phase = PH_DONE;
        if (was_running) {
                SH_LIST_REMOVE(list, s->active, u);
                s->running--;
        }
        if (u->done)
                u->done(u->ok, u->ok ? NULL : u->reason, u->data);
        /* The last report of a closing store frees it; a report from inside pump() leaves the
         * next start to that pump's loop. */
        gone = s->closing && s->busy == 1;
        unpack_free(u);
        if (!gone && !s->pumping)
                pump(s);
}

_printf_(2, 3) static void fail(sh_unpack *u, const char *fmt, ...)
{
        char buf[SH_TOOLS_REASON_MAX];
        va_list ap;

        va_start(ap, fmt); /* through a copy: u->reason may be an argument */
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        memcpy(u->reason, buf, sizeof(buf));
        u->ok = false;
        remove_later(u->s, u->s->stagefd, u->stage);
        report(u);
}

static void read_reason(sh_unpack *u)
{
        u->errfd = sh_unpacker_read_reason(u->errfd, u->reason, sizeof(u->reason));
}

static void on_deadline(sh_loop *l, sh_timer *t, void *data);

static int arm_deadline(sh_unpack *u, uint64_t ms)
{
        sh_loop_cancel_timer(u->s->loop, u->timer);
        u->timer = sh_loop_add_timer(u->s->loop, ms, on_deadline, u);
        return u->timer ? 0 : -ENOMEM;
}

static void child_done(sh_child *c, pid_t pid, int status, void *data);

/* Start a child of this unpack in its cgroup: the unpacker (clone into new namespaces) or the
 * finisher (fork). `keep` holds the child's fds but for the reason pipe and the cgroup.procs
 * fds, which are appended here. */
static int start_child(sh_unpack *u, bool unpacker, int *keep, int nkeep, sh_child_main_fn fn,
                       void *arg, int *nprocs, const char **what)
{
        int p[2] = {-1, -1}, procs[4], n, i;

        n = sh_cgroup_open_procs(u->cg, procs, ARRAY_SIZE(procs));
        if (n < 0) {
                *what = "opening the unpacker's cgroup";
                return n;
        }
        *nprocs = n;
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
                int r = -errno;

                for (i = 0; i < n; i++)
                        close(procs[i]);
                *what = "pipe";
                return r;
        }
        keep[nkeep++] = p[1];
        for (i = 0; i < n; i++)
                keep[nkeep++] = procs[i];
        sh_close(u->errfd);
        u->errfd = p[0];
        /* child_done runs from the loop, never before the fork returns. */
        if (unpacker)
                u->child = sh_child_clone_fds(u->s->loop, SH_UNPACK_NS, keep, nkeep, fn, arg,
                                              child_done, u);
        else
                u->child = sh_child_fork_fds(u->s->loop, keep, nkeep, fn, arg, child_done, u);
        i = errno;
        close(p[1]);
        for (int k = 0; k < n; k++)
                close(procs[k]);
        if (!u->child) {
                *what = unpacker ? "starting the unpacker" : "starting the finisher";
                return -i;
        }
        return 0;
}

static void start_finisher(sh_unpack *u)
{
        sh_unpack_fin_arg a = {0};
        int keep[8], r;
        const char *what = "";

        keep[0] = u->dirfd;
        u->phase = PH_FINISHING;
        r = start_child(u, false, keep, 1, sh_unpack_finisher_main, &a, &a.nprocs, &what);
        if (r < 0) {
                fail(u, "this host could not install the bundle: %s: %s", what, strerror(-r));
                return;
        }
        (void)arm_deadline(u, FINISH_TIMEOUT_MS);
}

/* The unpacker has been reaped. As PID 1 of its namespace, everything it could have started
 * died before it could be reaped; the cgroup is checked as well before the tree is touched:
 * nothing of the unpacker may still be alive to change it during the install. */
static void unpacker_exited(sh_unpack *u, int status)
{
        sh_error *err = NULL;
        uint64_t ooms = 0;
        bool empty = false;

        read_reason(u);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                if (u->reason[0]) {
                        fail(u, "%s", u->reason);
                        return;
                }
                if (WIFSIGNALED(status) && sh_cgroup_oom_kills(u->cg, &ooms, &err) == 0 &&
                    ooms > 0) {
                        fail(u,
                             "unsafe bundle: unpacking exceeded this host's memory limit of "
                             "%llu MiB",
                             (unsigned long long)(SH_TOOLS_UNPACK_MEMORY_MAX >> 20));
                        return;
                }
                sh_error_release(&err);
                if (WIFSIGNALED(status))
                        fail(u,
                             "unsafe bundle: unpacking exceeded this host's limits (%llu "
                             "bytes, %u s; signal %d)",
                             (unsigned long long)SH_TOOLS_UNPACKED_MAX,
                             SH_TOOLS_UNPACK_TIMEOUT_MS / 1000, WTERMSIG(status));
                else
                        fail(u, "unpacking failed (exit %d)",
                             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
                return;
        }
        if (sh_cgroup_is_empty(u->cg, &empty, &err) < 0 || !empty) {
                fail(u, "this host could not confirm that the unpacker ended: %s",
                     err && err->msg ? err->msg : "its cgroup still has processes");
                sh_error_release(&err);
                return;
        }
        start_finisher(u);
}

/* The tree is root's and complete: one atomic step into the store. The name is the
 * content's hash, so if another install of the same sha got there first, its tree is ours
 * byte for byte: keep it. */
static void finisher_exited(sh_unpack *u, int status)
{
        read_reason(u);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                if (!u->reason[0])
                        snprintf(u->reason, sizeof(u->reason),
                                 "this host could not hand the bundle to root (%s %d)",
                                 WIFSIGNALED(status) ? "signal" : "exit",
                                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
                fail(u, "%s", u->reason);
                return;
        }
        if (renameat2(u->s->stagefd, u->stage, u->s->toolsfd, u->sha, RENAME_NOREPLACE) < 0) {
                if (errno != EEXIST && errno != ENOTEMPTY) {
                        fail(u, "this host could not install the bundle: %s", strerror(errno));
                        return;
                }
                remove_later(u->s, u->s->stagefd, u->stage);
        }
        u->ok = true;
        report(u);
}

static void child_exited(sh_unpack *u, int status)
{
        sh_loop_cancel_timer(u->s->loop, u->timer);
        u->timer = NULL;
        if (u->phase == PH_UNPACKING)
                unpacker_exited(u, status);
        else
                finisher_exited(u, status);
}

static void child_done(sh_child *c, pid_t pid, int status, void *data)
{
        sh_unpack *u = data;

        u->child = NULL;
        child_exited(u, status);
}

static void on_deadline(sh_loop *l, sh_timer *t, void *data)
{
        sh_unpack *u = data;

        u->timer = NULL;
        /* SIGKILL to a namespace's PID 1 from outside it: the kernel kills the whole
         * namespace. child_done reports it. */
        if (u->child)
                (void)sh_child_kill(u->child, SIGKILL);
}

/* Start the unpacker of `u` in a fresh cgroup, or report why not. Runs from the loop only
 * (never inside sh_unpack_start), so it may report at once. */
static void launch(sh_unpack *u)
{
        sh_store *s = u->s;
        const sh_cg_limits lim = {
                .memory_max = SH_TOOLS_UNPACK_MEMORY_MAX,
                .pids_max = SH_TOOLS_UNPACK_PIDS_MAX,
                .cpu_max_milli = SH_TOOLS_UNPACK_CPU_MILLI,
        };
        sh_unpack_child_arg a = {
                .uid = s->uid, .filter = sh_seccomp_prog(s->filter), .payload = u->payload};
        sh_error *err = NULL;
        const char *what = "";
        int keep[8], r;

        snprintf(u->cgname, sizeof(u->cgname), "u%u", ++s->counter);
        if (sh_cgroup_create(s->cgroot, s->cg, u->cgname, &lim, &u->cg, &err) < 0) {
                fail(u, "this host could not unpack the bundle: %s",
                     err && err->msg ? err->msg : "cannot create its cgroup");
                sh_error_release(&err);
                return;
        }
        u->phase = PH_UNPACKING;
        SH_LIST_PREPEND(list, s->active, u);
        s->running++;
        keep[0] = u->bundlefd;
        keep[1] = u->dirfd;
        r = start_child(u, true, keep, 2, sh_unpack_child_main, &a, &a.nprocs, &what);
        if (r < 0) {
                fail(u, "this host could not unpack the bundle: %s: %s", what, strerror(-r));
                return;
        }
        /* Without the timer the child's RLIMIT_CPU still ends it; not worth failing for. */
        (void)arm_deadline(u, SH_TOOLS_UNPACK_TIMEOUT_MS + 5000);
}

static void pump(sh_store *s)
{
        s->pumping = true;
        while (!s->closing && s->running < SH_TOOLS_UNPACK_PARALLEL && s->queue) {
                sh_unpack *u = s->queue;

                queue_del(s, u);
                launch(u);
        }
        s->pumping = false;
}

static void on_kick(sh_loop *l, sh_timer *t, void *data)
{
        sh_store *s = data;

        s->kick = NULL;
        pump(s);
}

sh_unpack *sh_unpack_start_with(sh_store *s, int fd, const char *sha, sh_unpack_payload_fn payload,
                                sh_unpack_done_fn done, void *data, sh_error **err)
{
        sh_unpack *u = calloc(1, sizeof(*u));
        uint8_t rnd[8];

        if (s->closing) {
                free(u);
                sh_error_make(err, ESHUTDOWN, "the tool store is shutting down");
                return NULL;
        }
        if (!u) {
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        u->s = s;
        u->bundlefd = u->dirfd = u->errfd = -1;
        u->payload = payload;
        u->done = done;
        u->data = data;
        snprintf(u->sha, sizeof(u->sha), "%s", sha);
        randombytes_buf(rnd, sizeof(rnd));
        snprintf(u->stage, sizeof(u->stage), "%u-%u-%02x%02x%02x%02x%02x%02x%02x%02x",
                 (unsigned)getpid(), s->counter, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5],
                 rnd[6], rnd[7]);
        /* Our own fd: the caller's may be closed while we wait in the queue. */
        u->bundlefd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (u->bundlefd < 0) {
                sh_error_make(err, errno, "holding the bundle");
                goto fail;
        }
        if (mkdirat(s->stagefd, u->stage, 0700) < 0) {
                sh_error_make(err, errno, "creating a staging directory");
                goto fail;
        }
        u->dirfd = openat(s->stagefd, u->stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (u->dirfd < 0) {
                sh_error_make(err, errno, "opening the staging directory");
                goto fail_rm;
        }
        /* The unprivileged unpacker owns its staging dir and nothing else on the host. */
        if (fchown(u->dirfd, s->uid, s->uid) < 0) {
                sh_error_make(err, errno, "handing the staging directory to the unpacker");
                goto fail_rm;
        }
        /* Started from the loop, never from here: the caller must not be told anything
         * before this returns. */
        if (!s->kick && !(s->kick = sh_loop_add_timer(s->loop, 0, on_kick, s))) {
                sh_error_make(err, ENOMEM, "scheduling the unpacker");
                goto fail_rm;
        }
        s->busy++; /* from here on unpack_free accounts for it */
        u->phase = PH_QUEUED;
        queue_push(s, u);
        return u;
fail_rm:
        remove_later(s, s->stagefd, u->stage);
fail:
        sh_close(u->bundlefd);
        sh_close(u->dirfd);
        free(u);
        return NULL;
}

sh_unpack *sh_unpack_start(sh_store *s, int fd, const char *sha, sh_unpack_done_fn done, void *data,
                           sh_error **err)
{
        return sh_unpack_start_with(s, fd, sha, sh_unpack_extract, done, data, err);
}

void sh_unpack_forget(sh_unpack *u)
{
        if (u)
                u->done = NULL;
}

pid_t sh_unpack_pid(const sh_unpack *u)
{
        return u && u->child ? sh_child_pid(u->child) : -1;
}
