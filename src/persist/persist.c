/* persist.c: loop side of persist/restore: the rsync job queue, helper children, output, freeze. */
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
#include "sh/spawn.h"

#define WATCH_MS            200  /* how often a deleted sandbox is looked for */
#define TAIL_MAX            1024 /* bytes of rsync's output kept for `detail` */
#define RSYNC_EXIT_VANISHED 24   /* "some files vanished before transfer" */

typedef enum { JOB_QUEUED, JOB_RUNNING } job_state;

typedef struct job {
        sh_persister *p;
        sh_sandbox *sb; /* a reference */
        sh_persist_child_arg arg;
        char *item_id; /* a copy: arg.item_id points here */
        job_state state;
        bool cancelled; /* the sandbox went away: answer SandboxNotFound */
        bool timed_out;
        bool no_watch; /* its output could not be watched: killed at once */
        bool frozen;   /* we froze the sandbox's cgroup and must thaw it */
        bool starting; /* inside sh_child_fork_fds (its done callback may run there) */
        bool exited;
        int status;
        sh_child *child;
        int outfd;
        sh_io *out_io;
        sh_timer *timeout;
        char tail[TAIL_MAX];
        size_t tail_len;
        sh_persist_done_fn done;
        void *data;
        struct job *prev, *next;
} job;

struct sh_persister {
        const sh_config *cfg;
        sh_loop *loop;
        sh_manager *mgr;
        const char *rsync; /* static string, NULL: not found */
        job *head, *tail;
        unsigned running;
        sh_timer *pump_t;
        sh_timer *watch_t;
};

static sh_persister *the_persister;

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

int sh_persister_new(const sh_config *cfg, sh_loop *loop, sh_persister **ret, sh_error **err)
{
        sh_persister *p = calloc(1, sizeof(*p));

        if (!p)
                return sh_error_make(err, ENOMEM, "out of memory");
        p->cfg = cfg;
        p->loop = loop;
        p->rsync = find_rsync();
        *ret = p;
        return 0;
}

sh_persister *sh_persister_get(sh_manager *m)
{
        sh_loop *loop = sh_manager_loop(m);
        const sh_config *cfg = sh_manager_config(m);
        sh_error *err = NULL;

        if (the_persister && the_persister->mgr == m && the_persister->loop == loop &&
            the_persister->cfg == cfg)
                return the_persister;
        /* A new daemon in the same process (the in-process tests): the old one is gone. */
        sh_persister_free(the_persister);
        the_persister = NULL;
        if (sh_persister_new(cfg, loop, &the_persister, &err) < 0) {
                sh_error_release(&err);
                return NULL;
        }
        the_persister->mgr = m;
        sh_manager_set_delete_hook(m, sh_persist_forget_hook, the_persister);
        return the_persister;
}

void sh_persist_shutdown(sh_loop *loop)
{
        if (!the_persister || the_persister->loop != loop)
                return;
        sh_persister_free(the_persister);
        the_persister = NULL;
}

/* ---- the queue ------------------------------------------------------------------------- */

static void job_unlink(sh_persister *p, job *j)
{
        if (j->prev)
                j->prev->next = j->next;
        else
                p->head = j->next;
        if (j->next)
                j->next->prev = j->prev;
        else
                p->tail = j->prev;
        j->prev = j->next = NULL;
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

static void thaw(job *j)
{
        sh_error *err = NULL;

        if (!j->frozen)
                return;
        j->frozen = false;
        if (j->sb->cg)
                (void)sh_cgroup_freeze(j->sb->cg, false, &err);
        sh_error_release(&err);
}

/* End a job: unlink, thaw, tell the caller, free. `err` may be NULL (success). */
static void job_complete(job *j, const sh_error *err)
{
        sh_persister *p = j->p;

        if (j->state == JOB_RUNNING)
                p->running--;
        job_unlink(p, j);
        sh_loop_cancel_timer(p->loop, j->timeout);
        j->timeout = NULL;
        close_output(j);
        thaw(j);
        if (j->done)
                j->done(j->sb, err, j->data);
        sh_sandbox_unref(j->sb);
        free(j->item_id);
        free(j);
        schedule_pump(p);
}

static void job_fail(job *j, int status, const char *type, const char *fmt, ...) _printf_(4, 5);

static void job_fail(job *j, int status, const char *type, const char *fmt, ...)
{
        sh_error *err = NULL;
        char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        sh_error_http(&err, status, type, "%s", msg ? msg : "persist failed");
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
                job_fail(j, 404, "SandboxNotFound", "the sandbox was deleted during the %s",
                         what(j));
                return;
        }
        if (j->no_watch) {
                job_fail(j, 500, "PersistFailed", "%s: out of memory watching rsync", what(j));
                return;
        }
        if (j->timed_out) {
                job_fail(j, 500, "PersistFailed", "%s: rsync did not finish within %llu s", what(j),
                         (unsigned long long)(j->p->cfg->persist_timeout_ms / 1000));
                return;
        }
        if (WIFSIGNALED(st)) {
                job_fail(j, 500, "PersistFailed", "%s: the rsync helper was killed by signal %d",
                         what(j), WTERMSIG(st));
                return;
        }
        code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        /* Vanished files are files the sandbox removed while rsync ran (an additive checkpoint
         * during a turn): they are correctly absent. rsync still applied everything else. */
        if (code == 0 || code == RSYNC_EXIT_VANISHED ||
            (code == SH_PERSIST_EXIT_NO_ARCHIVE && j->arg.restore)) {
                job_complete(j, NULL);
                return;
        }
        if (code == SH_PERSIST_EXIT_SETUP)
                job_fail(j, 500, "PersistFailed", "%s: %s", what(j), tail);
        else if (code > 128)
                job_fail(j, 500, "PersistFailed", "%s: rsync was killed by signal %d%s%s", what(j),
                         code - 128, *tail ? ": " : "", tail);
        else
                job_fail(j, 500, "PersistFailed", "%s: rsync failed with exit code %d%s%s", what(j),
                         code, *tail ? ": " : "", tail);
}

static void child_done(sh_child *c, pid_t pid, int status, void *data)
{
        job *j = data;

        j->exited = true;
        j->status = status;
        if (j->starting)
                return; /* job_start sees `exited` and finishes */
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
        for (job *o = p->head; o; o = o->next)
                if (o->state == JOB_RUNNING && (o->sb == j->sb || STREQ(o->item_id, j->item_id)))
                        return true;
        return false;
}

/* Start j's helper. Returns with j running, or completed (then j is freed). */
static void job_start(sh_persister *p, job *j)
{
        sh_error *err = NULL;
        int fds[2], keep[2];
        bool ready = false;

        if (j->cancelled || j->sb->deleted) {
                job_fail(j, 404, "SandboxNotFound", "the sandbox was deleted before its %s ran",
                         what(j));
                return;
        }
        if (!p->rsync) {
                job_fail(j, 500, "PersistFailed", "%s: rsync is not installed on this host",
                         what(j));
                return;
        }
        /* Checked again here, not only when the request came: a queued persist must not write
         * a workspace that stopped being trusted while it waited. */
        if (!j->arg.restore) {
                if (sh_sandbox_is_ready(j->sb, &ready, &err) < 0) {
                        job_fail(j, 500, "PersistFailed", "persist: %s",
                                 err && err->msg ? err->msg : "reading the readiness marker");
                        sh_error_release(&err);
                        return;
                }
                if (!ready) {
                        job_complete(j, NULL);
                        return;
                }
        }
        if (j->arg.delete_extra) {
                /* The quiet point: nothing in the sandbox runs while rsync takes the snapshot
                 * that the archive is reconciled to. */
                if (!j->sb->cg || sh_cgroup_freeze(j->sb->cg, true, &err) < 0) {
                        job_fail(j, 500, "PersistFailed", "persist: freezing the sandbox: %s",
                                 err && err->msg ? err->msg : "no cgroup");
                        sh_error_release(&err);
                        return;
                }
                j->frozen = true;
        }
        if (pipe2(fds, O_CLOEXEC) < 0) {
                job_fail(j, 500, "PersistFailed", "%s: pipe: %s", what(j), strerror(errno));
                return;
        }
        if (fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0) {
                int e = errno;

                close(fds[0]);
                close(fds[1]);
                job_fail(j, 500, "PersistFailed", "%s: pipe: %s", what(j), strerror(e));
                return;
        }
        j->outfd = fds[0];
        j->state = JOB_RUNNING;
        p->running++;
        keep[0] = j->sb->wsfd;
        keep[1] = fds[1];
        j->starting = true;
        j->child =
                sh_child_fork_fds(p->loop, keep, 2, sh_persist_child_main, &j->arg, child_done, j);
        j->starting = false;
        close(fds[1]);
        if (!j->child) {
                if (j->exited)
                        job_finished(j);
                else
                        job_fail(j, 500, "PersistFailed", "%s: fork: %s", what(j), strerror(errno));
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

static void pump(sh_loop *l, sh_timer *t, void *data)
{
        sh_persister *p = data;
        job *j, *next;

        p->pump_t = NULL;
        for (j = p->head; j; j = next) {
                next = j->next;
                if (j->state != JOB_QUEUED)
                        continue;
                if (j->cancelled || j->sb->deleted) {
                        job_start(p, j); /* completes it with SandboxNotFound */
                        continue;
                }
                if (p->running >= p->cfg->persist_parallel)
                        continue;
                if (conflicts(p, j))
                        continue;
                job_start(p, j);
                /* job_start may have completed j and others: start over from the head. */
                next = p->head;
        }
        if (p->head && !p->watch_t)
                p->watch_t = sh_loop_add_timer(l, WATCH_MS, watch, p);
}

/* A sandbox deleted while its job waits or runs: the job is cancelled (the manager may also
 * call sh_persist_forget directly; this catches it either way). */
static void watch(sh_loop *l, sh_timer *t, void *data)
{
        sh_persister *p = data;

        p->watch_t = NULL;
        for (job *j = p->head; j; j = j->next)
                if (j->sb->deleted && !j->cancelled)
                        sh_persist_forget(p, j->sb); /* marks only: the list stays intact */
        if (p->head)
                p->watch_t = sh_loop_add_timer(l, WATCH_MS, watch, p);
}

static int submit(sh_persister *p, sh_sandbox *sb, bool restore, bool delete_extra,
                  sh_persist_done_fn done, void *data, sh_error **err)
{
        job *j;

        if (!p->cfg->nfs_root || !sb->item_id)
                return sh_error_http(err, 500, "PersistFailed", "no archive for this sandbox");
        j = calloc(1, sizeof(*j));
        if (!j)
                return sh_error_make(err, ENOMEM, "out of memory");
        j->item_id = strdup(sb->item_id);
        if (!j->item_id) {
                free(j);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        j->p = p;
        j->sb = sh_sandbox_ref(sb);
        j->outfd = -1;
        j->done = done;
        j->data = data;
        j->arg.restore = restore;
        j->arg.delete_extra = delete_extra;
        j->arg.uid = sb->owner.uid;
        j->arg.gid = sb->owner.gid;
        j->arg.rsync = p->rsync;
        j->arg.nfs_root = p->cfg->nfs_root;
        j->arg.item_id = j->item_id;
        j->state = JOB_QUEUED;
        j->prev = p->tail;
        if (p->tail)
                p->tail->next = j;
        else
                p->head = j;
        p->tail = j;
        schedule_pump(p);
        if (!p->pump_t) {
                /* No timer (out of memory): the job cannot be run from the loop. */
                job_unlink(p, j);
                sh_sandbox_unref(j->sb);
                free(j->item_id);
                free(j);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        return 0;
}

int sh_persist_restore(sh_persister *p, sh_sandbox *sb, sh_persist_done_fn done, void *data,
                       sh_error **err)
{
        return submit(p, sb, true, false, done, data, err);
}

int sh_persist_save(sh_persister *p, sh_sandbox *sb, bool delete_extra, sh_persist_done_fn done,
                    void *data, sh_error **err)
{
        return submit(p, sb, false, delete_extra, done, data, err);
}

void sh_persist_forget(sh_persister *p, sh_sandbox *sb)
{
        if (!p)
                return;
        for (job *j = p->head; j; j = j->next) {
                if (j->sb != sb || j->cancelled)
                        continue;
                j->cancelled = true;
                /* Running: the helper passes SIGTERM on to rsync as SIGKILL, and the job ends
                 * when the helper is reaped. Queued: the pump ends it. */
                if (j->child)
                        (void)sh_child_kill(j->child, SIGTERM);
        }
        schedule_pump(p);
}

void sh_persist_forget_hook(sh_sandbox *sb, void *data)
{
        sh_persist_forget(data, sb);
}

void sh_persister_free(sh_persister *p)
{
        sh_error *err = NULL;

        if (!p)
                return;
        sh_error_http(&err, 503, "Unavailable", "the host is shutting down");
        while (p->head) {
                job *j = p->head;

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
        if (p == the_persister)
                the_persister = NULL;
        free(p);
}
