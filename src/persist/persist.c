/* persist.c: loop side of persist/restore: the job queue, the freeze, helper children, output. */
#include "sh/persist.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "persist-internal.h"
#include "sh/cgroup.h"
#include "sh/helper.h"
#include "sh/job.h"
#include "sh/list.h"
#include "sh/seccomp.h"
#include "sh/spawn.h"

#define WATCH_MS            200  /* how often a deleted sandbox is looked for */
#define TAIL_MAX            1024 /* bytes of rsync's output kept for `detail` */
#define RSYNC_EXIT_VANISHED 24   /* "some files vanished before transfer" */
/* How long a sandbox may take to freeze (a task in an uninterruptible sleep delays it), and
 * how often the freezer is looked at meanwhile: from a timer, the loop never waits. */
#define FREEZE_TIMEOUT_MS  5000
#define FREEZE_POLL_MAX_MS 16

/* QUEUED -> (persist: FREEZING ->) RUNNING. FREEZING and RUNNING hold a slot. */
typedef enum { JOB_QUEUED, JOB_FREEZING, JOB_RUNNING } job_state;

typedef struct job {
        sh_persister *p;
        sh_sandbox *sb; /* a reference */
        sh_persist_child_arg arg;
        char *item_id;      /* a copy: arg.item_id points here */
        char *root;         /* a copy: arg.nfs_root points here */
        bool any_workspace; /* a save that skips the readiness rule (snapshots) */
        bool need_archive;  /* a restore whose source must exist (snapshots) */
        job_state state;
        bool cancelled; /* the sandbox went away: answer SandboxNotFound */
        bool timed_out;
        bool no_watch; /* its output could not be watched: killed at once */
        bool frozen;   /* holds a freeze of the sandbox: released at the end */
        int status;
        sh_child *child;
        int outfd;
        sh_io *out_io;
        sh_timer *timeout;
        sh_loop_poll freeze; /* FREEZING: the freezer looked at from the loop's timers */
        sh_cgroup *hcg;      /* the helper's cgroup, below the sandbox's; buried at the end */
        char tail[TAIL_MAX];
        size_t tail_len;
        sh_persist_done_fn done;
        void *data;
        SH_LIST_FIELDS(struct job, jobs); /* the persister's queue, oldest first */
} job;

struct sh_persister {
        const sh_config *cfg;
        sh_loop *loop;
        sh_manager *mgr;
        const char *rsync;          /* static string, NULL: not found */
        sh_persist_libs *libs;      /* rsync's libraries, found once; NULL: each job asks */
        sh_seccomp *sandbox_filter; /* the sandbox's own filter, for rsync too */
        const struct sock_fprog *socket_filter; /* the helpers' AF_UNIX-only filter */
        job *jobs;                              /* queued and running, in submission order */
        unsigned running;
        sh_timer *pump_t;
        sh_timer *watch_t;
        sh_sandbox_observer deletes; /* the manager tells us of every delete */
};

sh_manager *sh_persister_manager(const sh_persister *p)
{
        return p->mgr;
}

/* rsync is looked up in fixed system directories only, never through $PATH. */
static const char *find_rsync(void)
{
        static const char *const candidates[] = {"/usr/bin/rsync", "/bin/rsync",
                                                 "/usr/local/bin/rsync"};

        for (size_t i = 0; i < ARRAY_SIZE(candidates); i++)
                if (access(candidates[i], X_OK) == 0)
                        return candidates[i];
        return NULL;
}

static void on_deleted(sh_sandbox *sb, void *data)
{
        sh_persist_forget(data, sb);
}

static void persister_freep(sh_persister **p)
{
        sh_persister_free(*p);
}

int sh_persister_new(const sh_config *cfg, sh_loop *loop, sh_manager *m, sh_persister **ret,
                     sh_error **err)
{
        _cleanup_(persister_freep) sh_persister *p = calloc(1, sizeof(*p));

        if (!p)
                return sh_error_make(err, ENOMEM, "out of memory");
        p->cfg = cfg;
        p->loop = loop;
        p->mgr = m;
        p->rsync = find_rsync();
        /* Which libraries rsync loads, asked of the loader once here (a fork and an exec, a
         * few ms, before the loop runs) instead of in every job; a job checks that rsync and
         * each library are still the same files, else asks again. A failure only means
         * every job asks (and reports what goes wrong). */
        if (p->rsync && sh_persist_libs_discover(p->rsync, &p->libs) < 0)
                p->libs = NULL;
        /* rsync runs under the sandboxes' deny list (nothing of the kernel a sandbox may not
         * reach) plus the helpers' socket filter; both are made now, loaded in the child. */
        if (sh_seccomp_build(&p->sandbox_filter, err) < 0 ||
            !(p->socket_filter = sh_helper_rsync_filter(err)))
                return -1;
        /* A deleted sandbox's jobs are cancelled at once (the watch timer would notice within
         * WATCH_MS anyway). */
        p->deletes.deleted = on_deleted;
        p->deletes.data = p;
        sh_manager_observe(m, &p->deletes);
        *ret = TAKE_PTR(p);
        return 0;
}

/* ---- the queue ------------------------------------------------------------------------- */

static void job_unlink(sh_persister *p, job *j)
{
        SH_LIST_REMOVE(jobs, p->jobs, j);
}

static void pump(sh_loop *l, sh_timer *t, void *data);
static void watch(sh_loop *l, sh_timer *t, void *data);

/* Queue changes are acted on from the loop, never inside the caller's stack: every done
 * callback runs from the loop. */
static void schedule_pump(sh_persister *p)
{
        if (!p->pump_t)
                p->pump_t = sh_loop_add_timer(p->loop, 0, pump, p);
}

static void append_tail(job *j, const char *buf, size_t n)
{
        if (n >= TAIL_MAX) {
                memcpy(j->tail, buf + n - TAIL_MAX, TAIL_MAX);
                j->tail_len = TAIL_MAX;
                return;
        }
        if (j->tail_len + n > TAIL_MAX) {
                size_t drop = j->tail_len + n - TAIL_MAX;

                memmove(j->tail, j->tail + drop, j->tail_len - drop);
                j->tail_len -= drop;
        }
        memcpy(j->tail + j->tail_len, buf, n);
        j->tail_len += n;
}

static void close_output(job *j)
{
        if (j->out_io)
                sh_loop_del_io(j->p->loop, j->out_io);
        j->out_io = NULL;
        j->outfd = sh_close(j->outfd);
}

/* Read whatever rsync wrote (non-blocking), keeping the last TAIL_MAX bytes. */
static void drain_output(job *j)
{
        char buf[4096];

        while (j->outfd >= 0) {
                ssize_t n = read(j->outfd, buf, sizeof(buf));

                if (n > 0) {
                        append_tail(j, buf, (size_t)n);
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                close_output(j); /* EOF or a read error: nothing more to learn */
        }
}

static void output_readable(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        drain_output(data);
}

/* The tail as one line of text: trailing newlines dropped, inner ones shown as " | ". */
static void tail_text(job *j, char *out, size_t size)
{
        size_t n = j->tail_len, i, k = 0;

        while (n && (j->tail[n - 1] == '\n' || j->tail[n - 1] == '\r'))
                n--;
        for (i = 0; i < n && k + 4 < size; i++) {
                if (j->tail[i] == '\n') {
                        memcpy(out + k, " | ", 3);
                        k += 3;
                } else {
                        out[k++] = j->tail[i] ? j->tail[i] : '?';
                }
        }
        out[k] = '\0';
}

/* Every job that froze its sandbox releases its hold, on every way out (done, failed,
 * cancelled, deleted, shutdown): job_complete is the only end of a job. A hold, not a thaw: a
 * sandbox paused meanwhile (or before) stays frozen (sh_sandbox_freeze_hold). */
static void thaw(job *j)
{
        sh_error *err = NULL;

        if (!j->frozen)
                return;
        j->frozen = false;
        (void)sh_sandbox_freeze_release(j->sb, &err);
        sh_error_release(&err);
}

/* End a job: unlink, thaw, tell the caller, free. `err` may be NULL (success). */
static void job_complete(job *j, const sh_error *err)
{
        sh_persister *p = j->p;

        if (j->state != JOB_QUEUED)
                p->running--;
        job_unlink(p, j);
        sh_loop_cancel_timer(p->loop, j->timeout);
        j->timeout = NULL;
        sh_loop_poll_stop(&j->freeze);
        close_output(j);
        thaw(j);
        /* The helper has been reaped (or never ran): its cgroup goes once empty. */
        if (j->hcg)
                sh_manager_bury_cgroup(p->mgr, j->hcg);
        j->hcg = NULL;
        if (j->done)
                j->done(j->sb, err, j->data);
        sh_sandbox_unref(j->sb);
        free(j->item_id);
        free(j->root);
        free(j);
        schedule_pump(p);
}

static void job_fail(job *j, sh_error_kind kind, const char *fmt, ...) _printf_(3, 4);

static void job_fail(job *j, sh_error_kind kind, const char *fmt, ...)
{
        sh_error *err = NULL;
        char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        sh_error_new(&err, kind, "%s", msg ? msg : "persist failed");
        free(msg);
        job_complete(j, err);
        sh_error_release(&err);
}

static const char *what(const job *j)
{
        return j->arg.restore ? "restore" : "persist";
}

/* The helper has exited: turn its status and rsync's output into the result. */
static void job_finished(job *j)
{
        char tail[TAIL_MAX * 3 + 8];
        int st = j->status, code;

        j->child = NULL;
        drain_output(j);
        tail_text(j, tail, sizeof(tail));
        if (j->cancelled) {
                job_fail(j, SH_E_SANDBOX_NOT_FOUND, "the sandbox was deleted during the %s",
                         what(j));
                return;
        }
        if (j->no_watch) {
                job_fail(j, SH_E_PERSIST_FAILED, "%s: out of memory watching rsync", what(j));
                return;
        }
        if (j->timed_out) {
                job_fail(j, SH_E_PERSIST_FAILED, "%s: rsync did not finish within %llu s", what(j),
                         (unsigned long long)(j->p->cfg->persist_timeout_ms / 1000));
                return;
        }
        if (WIFSIGNALED(st)) {
                job_fail(j, SH_E_PERSIST_FAILED, "%s: the rsync helper was killed by signal %d",
                         what(j), WTERMSIG(st));
                return;
        }
        code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        /* Vanished files are files the sandbox removed while rsync ran (an additive checkpoint
         * during a turn): they are correctly absent. rsync still applied everything else. */
        if (code == SH_PERSIST_EXIT_NO_ARCHIVE && j->arg.restore && j->need_archive) {
                job_fail(j, SH_E_PERSIST_FAILED, "restore: the source directory is gone");
                return;
        }
        if (code == 0 || code == RSYNC_EXIT_VANISHED ||
            (code == SH_PERSIST_EXIT_NO_ARCHIVE && j->arg.restore)) {
                job_complete(j, NULL);
                return;
        }
        if (code == SH_PERSIST_EXIT_SETUP || code == SH_PERSIST_EXIT_TOO_BIG)
                job_fail(j, SH_E_PERSIST_FAILED, "%s: %s", what(j), tail);
        else if (code > 128)
                job_fail(j, SH_E_PERSIST_FAILED, "%s: rsync was killed by signal %d%s%s", what(j),
                         code - 128, *tail ? ": " : "", tail);
        else
                job_fail(j, SH_E_PERSIST_FAILED, "%s: rsync failed with exit code %d%s%s", what(j),
                         code, *tail ? ": " : "", tail);
}

static void child_done(sh_child *c, pid_t pid, int status, void *data)
{
        job *j = data;

        j->status = status;
        job_finished(j);
}

static void job_timeout(sh_loop *l, sh_timer *t, void *data)
{
        job *j = data;

        j->timeout = NULL;
        j->timed_out = true;
        if (j->child)
                (void)sh_child_kill(j->child, SIGTERM);
}

static bool conflicts(sh_persister *p, job *j)
{
        job *o;

        SH_LIST_FOREACH(jobs, o, p->jobs) {
                if (o->state != JOB_QUEUED &&
                    (o->sb == j->sb || (STREQ(o->item_id, j->item_id) && STREQ(o->root, j->root))))
                        return true;
        }
        return false;
}

/* Fork j's helper into a helper cgroup of the sandbox's (its CPU, memory and pids are the
 * sandbox's; the freeze spares it). Returns with j running, or completed (then freed). */
static void job_spawn(sh_persister *p, job *j)
{
        sh_error *err = NULL;
        int fds[2] = {-1, -1}, keep[2 + SH_HELPER_PROCS_MAX], n = 0;
        _cleanup_close_ int wsfd = sh_sandbox_open_workspace(j->sb, &err);

        if (wsfd < 0) {
                job_fail(j,
                         sh_error_kind_of(err) == SH_E_SANDBOX_NOT_FOUND ? SH_E_SANDBOX_NOT_FOUND
                                                                         : SH_E_PERSIST_FAILED,
                         "%s: %s", what(j), err && err->msg ? err->msg : "opening the workspace");
                sh_error_release(&err);
                return;
        }
        if (!sh_sandbox_cgroup(j->sb) ||
            sh_helper_cgroup_new(sh_manager_cgroups(p->mgr), sh_sandbox_cgroup(j->sb), 'p', 0,
                                 &j->hcg, keep + 2, SH_HELPER_PROCS_MAX, &n, &err) < 0) {
                job_fail(j, SH_E_PERSIST_FAILED, "%s: the helper's cgroup: %s", what(j),
                         err && err->msg ? err->msg : "the sandbox has no cgroup");
                sh_error_release(&err);
                return;
        }
        j->arg.nprocs = n;
        if (pipe2(fds, O_CLOEXEC) < 0 || fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0) {
                int e = errno;

                sh_close(fds[0]); /* pipe2(2) leaves them -1 when it fails */
                sh_close(fds[1]);
                for (int i = 0; i < n; i++)
                        close(keep[2 + i]);
                job_fail(j, SH_E_PERSIST_FAILED, "%s: pipe: %s", what(j), strerror(e));
                return;
        }
        j->outfd = fds[0];
        if (j->state == JOB_QUEUED)
                p->running++;
        j->state = JOB_RUNNING;
        keep[0] = wsfd; /* the child gets its own copy; ours closes on return */
        keep[1] = fds[1];
        /* child_done runs from the loop, never before sh_child_fork_fds returns. */
        j->child = sh_child_fork_fds(p->loop, keep, 2 + n, sh_persist_child_main, &j->arg,
                                     child_done, j);
        close(fds[1]);
        for (int i = 0; i < n; i++)
                close(keep[2 + i]);
        if (!j->child) {
                job_fail(j, SH_E_PERSIST_FAILED, "%s: fork: %s", what(j), strerror(errno));
                return;
        }
        j->out_io = sh_loop_add_io(p->loop, j->outfd, EPOLLIN, output_readable, j);
        if (!j->out_io) {
                /* Unread, the pipe would fill and stall rsync until the timeout. */
                j->no_watch = true;
                (void)sh_child_kill(j->child, SIGTERM);
        }
        j->timeout = sh_loop_add_timer(p->loop, p->cfg->persist_timeout_ms, job_timeout, j);
}

/* FREEZING: the freezer is looked at from timers (a freeze can take a while, and the loop
 * never waits for it); rsync is spawned once every process of the sandbox is frozen. */
static int freeze_look(void *data, sh_error **err)
{
        job *j = data;
        bool frozen = false;

        if (j->cancelled || sh_sandbox_deleted(j->sb))
                return sh_error_new(err, SH_E_SANDBOX_NOT_FOUND,
                                    "the sandbox was deleted during the %s", what(j));
        return sh_sandbox_freeze_poll(j->sb, &frozen, err) < 0 ? -1 : frozen;
}

static void freeze_done(void *data, int result, const sh_error *err)
{
        job *j = data;

        if (result > 0)
                job_spawn(j->p, j);
        else if (result == 0)
                job_fail(j, SH_E_PERSIST_FAILED,
                         "persist: the sandbox did not freeze within %u ms (a process in an "
                         "uninterruptible sleep?)",
                         FREEZE_TIMEOUT_MS);
        else if (sh_error_kind_of(err) == SH_E_SANDBOX_NOT_FOUND)
                job_fail(j, SH_E_SANDBOX_NOT_FOUND, "%s", err->msg);
        else
                job_fail(j, SH_E_PERSIST_FAILED, "persist: %s the sandbox%s%s",
                         err ? "freezing" : "out of memory freezing", err ? ": " : "",
                         err && err->msg ? err->msg : "");
}

/* Start j. Returns with j freezing or running, or completed (then j is freed). */
static void job_start(sh_persister *p, job *j)
{
        sh_error *err = NULL;
        bool ready = false;

        if (j->cancelled || sh_sandbox_deleted(j->sb)) {
                job_fail(j, SH_E_SANDBOX_NOT_FOUND, "the sandbox was deleted before its %s ran",
                         what(j));
                return;
        }
        if (!p->rsync) {
                job_fail(j, SH_E_PERSIST_FAILED, "%s: rsync is not installed on this host",
                         what(j));
                return;
        }
        if (j->arg.restore) {
                /* Nothing of the sandbox runs yet (the create has not been answered). */
                job_spawn(p, j);
                return;
        }
        /* Checked again here, not only when the request came: a queued persist must not write
         * a workspace that stopped being trusted while it waited. A snapshot copies whatever
         * the workspace holds (its own root, never the sandbox's archive item). */
        if (!j->any_workspace && sh_sandbox_is_ready(j->sb, &ready, &err) < 0) {
                job_fail(j, SH_E_PERSIST_FAILED, "persist: %s",
                         err && err->msg ? err->msg : "reading the readiness marker");
                sh_error_release(&err);
                return;
        }
        if (!j->any_workspace && !ready) {
                job_complete(j, NULL);
                return;
        }
        /* The quiet point, for every persist (additive checkpoints and drain too): nothing
         * of the sandbox runs while rsync reads its tree. A sandbox process could otherwise
         * swap a file rsync has listed for a FIFO (rsync blocks in open(2) until the job
         * timeout, holding a slot), or a directory for a link; and what rsync copies is a
         * snapshot. The helpers' cgroups are spared: rsync runs beside the frozen sandbox. */
        if (sh_sandbox_freeze_hold(j->sb, &err) < 0) {
                job_fail(j, SH_E_PERSIST_FAILED, "persist: freezing the sandbox: %s",
                         err && err->msg ? err->msg : "no cgroup");
                sh_error_release(&err);
                return;
        }
        j->frozen = true;
        j->state = JOB_FREEZING;
        p->running++;
        j->freeze = (sh_loop_poll){.loop = p->loop,
                                   .check = freeze_look,
                                   .end = freeze_done,
                                   .data = j,
                                   .timeout_ms = FREEZE_TIMEOUT_MS,
                                   .gap_max_ms = FREEZE_POLL_MAX_MS};
        if (sh_loop_poll_start(&j->freeze) < 0)
                job_fail(j, SH_E_PERSIST_FAILED, "persist: out of memory freezing the sandbox");
}

static void pump(sh_loop *l, sh_timer *t, void *data)
{
        sh_persister *p = data;
        job *j, *next;

        p->pump_t = NULL;
        SH_LIST_FOREACH_SAFE(jobs, j, next, p->jobs) {
                if (j->state != JOB_QUEUED)
                        continue;
                if (j->cancelled || sh_sandbox_deleted(j->sb)) {
                        job_start(p, j); /* completes it with SandboxNotFound */
                        continue;
                }
                if (p->running >= p->cfg->persist_parallel)
                        continue;
                if (conflicts(p, j))
                        continue;
                job_start(p, j);
                /* job_start may have completed j and others: start over from the head. */
                next = p->jobs;
        }
        if (p->jobs && !p->watch_t)
                p->watch_t = sh_loop_add_timer(l, WATCH_MS, watch, p);
}

/* A sandbox deleted while its job waits or runs: the job is cancelled (the manager may also
 * call sh_persist_forget directly; this catches it either way). */
static void watch(sh_loop *l, sh_timer *t, void *data)
{
        sh_persister *p = data;
        job *j;

        p->watch_t = NULL;
        SH_LIST_FOREACH(jobs, j, p->jobs) {
                if (sh_sandbox_deleted(j->sb) && !j->cancelled)
                        sh_persist_forget(p, j->sb); /* marks only: the list stays intact */
        }
        if (p->jobs)
                p->watch_t = sh_loop_add_timer(l, WATCH_MS, watch, p);
}

static void job_free_unstarted(job *j)
{
        sh_sandbox_unref(j->sb);
        free(j->item_id);
        free(j->root);
        free(j);
}

static void job_freep(job **j)
{
        if (*j)
                job_free_unstarted(*j);
}

/* Queue a job between sb's workspace and {root}/{item}/ (root and item already checked). */
static int submit(sh_persister *p, sh_sandbox *sb, const char *root, const char *item, bool restore,
                  bool delete_extra, bool own_target, sh_persist_done_fn done, void *data,
                  sh_error **err)
{
        _cleanup_(job_freep) job *j = NULL;

        if (!root || !item)
                return sh_error_new(err, SH_E_PERSIST_FAILED, "no archive for this sandbox");
        j = calloc(1, sizeof(*j));
        if (!j || !(j->item_id = strdup(item)) || !(j->root = strdup(root)))
                return sh_error_make(err, ENOMEM, "out of memory");
        j->p = p;
        j->sb = sh_sandbox_ref(sb);
        j->outfd = -1;
        j->done = done;
        j->data = data;
        j->any_workspace = own_target && !restore;
        j->arg.make_root = own_target && !restore;
        j->need_archive = own_target && restore;
        j->arg.restore = restore;
        j->arg.delete_extra = delete_extra;
        j->arg.uid = sh_sandbox_owner(sb)->uid;
        j->arg.gid = sh_sandbox_owner(sb)->gid;
        j->arg.rsync = p->rsync;
        j->arg.libs = p->libs;
        j->arg.nfs_root = j->root;
        j->arg.item_id = j->item_id;
        j->arg.max_bytes = p->cfg->persist_max_bytes;
        j->arg.io_timeout_s = (unsigned)(p->cfg->persist_io_timeout_ms / 1000);
        j->arg.sandbox_filter = sh_seccomp_prog(p->sandbox_filter);
        j->arg.socket_filter = p->socket_filter;
        j->state = JOB_QUEUED;
        SH_LIST_APPEND(jobs, p->jobs, j); /* O(jobs): the pump walks them all anyway */
        schedule_pump(p);
        if (!p->pump_t) {
                /* No timer (out of memory): the job cannot be run from the loop. */
                job_unlink(p, j);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        TAKE_PTR(j); /* the queue's */
        return 0;
}

int sh_persist_restore(sh_persister *p, sh_sandbox *sb, sh_persist_done_fn done, void *data,
                       sh_error **err)
{
        return submit(p, sb, p->cfg->nfs_root, sh_sandbox_item_id(sb), true, false, false, done,
                      data, err);
}

int sh_persist_save(sh_persister *p, sh_sandbox *sb, bool delete_extra, sh_persist_done_fn done,
                    void *data, sh_error **err)
{
        return submit(p, sb, p->cfg->nfs_root, sh_sandbox_item_id(sb), false, delete_extra, false,
                      done, data, err);
}

/* The names a job may be given: what CONTRACT.md allows for an item id, so that the child's
 * openat(root, item, O_NOFOLLOW) is one component below the root and nothing else. */
static int check_target(const char *root, const char *item, sh_error **err)
{
        if (!root || root[0] != '/')
                return sh_error_new(err, SH_E_INVALID, "the archive root must be absolute");
        if (!item || !sh_item_id_valid(item))
                return sh_error_new(err, SH_E_INVALID, "invalid archive item name");
        return 0;
}

int sh_persist_save_to(sh_persister *p, sh_sandbox *sb, const char *root, const char *item,
                       sh_persist_done_fn done, void *data, sh_error **err)
{
        if (check_target(root, item, err) < 0)
                return -1;
        return submit(p, sb, root, item, false, true, true, done, data, err);
}

int sh_persist_restore_from(sh_persister *p, sh_sandbox *sb, const char *root, const char *item,
                            sh_persist_done_fn done, void *data, sh_error **err)
{
        if (check_target(root, item, err) < 0)
                return -1;
        return submit(p, sb, root, item, true, false, true, done, data, err);
}

void sh_persist_forget(sh_persister *p, sh_sandbox *sb)
{
        bool any = false;
        job *j;

        if (!p)
                return;
        SH_LIST_FOREACH(jobs, j, p->jobs) {
                if (j->sb != sb || j->cancelled)
                        continue;
                j->cancelled = true;
                any = true;
                /* Running: the helper passes SIGTERM on to rsync as SIGKILL, and the job ends
                 * when the helper is reaped. Queued: the pump ends it. */
                if (j->child)
                        (void)sh_child_kill(j->child, SIGTERM);
        }
        if (any)
                schedule_pump(p);
}

void sh_persister_free(sh_persister *p)
{
        sh_error *err = NULL;

        if (!p)
                return;
        sh_error_new(&err, SH_E_UNAVAILABLE, "the host is shutting down");
        while (p->jobs) {
                job *j = p->jobs;

                if (j->child) {
                        /* Reaped by the loop (or sh_child_wait_all) without telling us. */
                        (void)sh_child_kill(j->child, SIGTERM);
                        sh_child_forget(j->child);
                        j->child = NULL;
                }
                job_complete(j, err);
        }
        sh_error_release(&err);
        sh_loop_cancel_timer(p->loop, p->pump_t);
        sh_loop_cancel_timer(p->loop, p->watch_t);
        /* The manager may outlive us: it must not call into a freed persister. */
        sh_manager_unobserve(p->mgr, &p->deletes);
        sh_seccomp_free(p->sandbox_filter);
        sh_persist_libs_free(p->libs);
        free(p);
}
