/* unpack.c: the layer unpacker's daemon side: a queue of unpacks, each one's cgroup, its two
 * children (the confined parser, then the applier of owners, modes and opaque directories;
 * why two: unpack-child.c) and the report. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
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
#include "sh/seccomp.h"
#include "sh/spawn.h"
#include "sh/unpacker.h"
#include "unpack-internal.h"

enum phase { PH_QUEUED, PH_PARSING, PH_APPLYING, PH_DONE };

struct sh_layer_unpacker {
        sh_loop *loop;
        uid_t uid;
        sh_cgroup_root *cgroot;
        sh_cgroup *cg; /* {parent}/layers: every unpack's cgroup is below it */
        sh_seccomp *parser, *applier;
        unsigned counter;
        unsigned busy;    /* unpacks not yet freed */
        unsigned running; /* children started and not yet reported */
        sh_timer *kick;
        sh_layer_unpack *queue, *queue_tail, *active;
        bool closing, pumping;
};

struct sh_layer_unpack {
        sh_layer_unpacker *u;
        enum phase phase;
        int blobfd, destfd, recfd, errfd; /* our own dups; the record: a memfd */
        sh_layer_compression c;
        uint64_t max_bytes, max_entries;
        char cgname[32];
        sh_cgroup *cg;
        sh_child *child;
        sh_timer *timer;
        char reason[SH_LAYER_REASON_MAX];
        sh_layer_unpack_result res;
        sh_layer_unpack_done_fn done; /* NULL once cancelled */
        void *data;
        SH_LIST_FIELDS(sh_layer_unpack, list);
};

int sh_layer_unpacker_new(sh_loop *loop, const sh_config *cfg, const sh_cgroup *parent,
                          sh_layer_unpacker **ret, sh_error **err)
{
        sh_layer_unpacker *u = calloc(1, sizeof(*u));
        const sh_cg_limits lim = {
                .memory_max = SH_LAYER_CG_MEMORY_MAX,
                .pids_max = SH_LAYER_CG_PIDS_MAX,
                .cpu_max_milli = SH_LAYER_CG_CPU_MILLI,
        };
        int r;

        *ret = NULL;
        if (!u)
                return sh_error_make(err, ENOMEM, "out of memory");
        if (!parent || cfg->uid_base < 1) {
                free(u);
                return sh_error_new(err, SH_E_INTERNAL,
                                    "the layer unpacker needs a parent cgroup and a uid below "
                                    "the sandboxes'");
        }
        u->loop = loop;
        u->uid = (uid_t)(cfg->uid_base - 1);
        u->cgroot = sh_cgroup_root_of(parent);
        r = sh_layer_filters_build(&u->parser, &u->applier, err);
        if (r < 0) {
                sh_error_wrap(err, "building the layer unpacker's system call filters");
                goto fail;
        }
        /* All unpacks together get at most these; each has its own, smaller limits. The
         * parent is only read (its path). */
        r = sh_cgroup_create(u->cgroot, (sh_cgroup *)parent, "layers", &lim, &u->cg, err);
        if (r < 0) {
                sh_error_wrap(err, "creating the layer unpacker's cgroup");
                goto fail;
        }
        *ret = u;
        return 0;
fail:
        sh_layer_unpacker_free(u);
        return r;
}

static void unpack_free(sh_layer_unpack *x);
static void queue_del(sh_layer_unpacker *u, sh_layer_unpack *x);

void sh_layer_unpacker_free(sh_layer_unpacker *u)
{
        if (!u)
                return;
        while (u->queue) {
                sh_layer_unpack *x = u->queue;

                queue_del(u, x);
                x->phase = PH_DONE;
                unpack_free(x);
        }
        sh_loop_cancel_timer(u->loop, u->kick);
        u->kick = NULL;
        if (u->busy) {
                sh_layer_unpack *x;

                /* Freed once the last child is reaped; nobody is told. */
                u->closing = true;
                SH_LIST_FOREACH(list, x, u->active) {
                        x->done = NULL;
                        if (x->child)
                                (void)sh_child_kill(x->child, SIGKILL);
                }
                return;
        }
        if (u->cg) {
                sh_error *err = NULL;

                if (sh_cgroup_destroy(u->cg, &err) < 0)
                        sh_error_release(&err); /* removed with the daemon's subtree */
                sh_cgroup_free(u->cg);
        }
        sh_seccomp_free(u->parser);
        sh_seccomp_free(u->applier);
        free(u);
}

static void queue_push(sh_layer_unpacker *u, sh_layer_unpack *x)
{
        SH_LIST_INSERT_AFTER(list, u->queue, u->queue_tail, x);
        u->queue_tail = x;
}

static void queue_del(sh_layer_unpacker *u, sh_layer_unpack *x)
{
        if (u->queue_tail == x)
                u->queue_tail = x->list_prev;
        SH_LIST_REMOVE(list, u->queue, x);
}

static void unpack_free(sh_layer_unpack *x)
{
        sh_layer_unpacker *u = x->u;

        sh_loop_cancel_timer(u->loop, x->timer);
        /* Its children were reaped; a straggler of the cgroup is killed first. */
        sh_cgroup_bury(x->cg, true);
        sh_close(x->blobfd);
        sh_close(x->destfd);
        sh_close(x->recfd);
        sh_close(x->errfd);
        free(x);
        if (--u->busy == 0 && u->closing) {
                u->closing = false;
                sh_layer_unpacker_free(u);
        }
}

static void pump(sh_layer_unpacker *u);

/* The one place an unpack ends: its caller told (unless cancelled), the slot to the next. */
static void report(sh_layer_unpack *x, sh_error_kind kind)
{
        sh_layer_unpacker *u = x->u;
        bool was_running = x->phase == PH_PARSING || x->phase == PH_APPLYING, gone;

        x->phase = PH_DONE;
        if (was_running) {
                SH_LIST_REMOVE(list, u->active, x);
                u->running--;
        }
        if (x->done) {
                sh_error e = {.kind = kind, .msg = x->reason};

                x->done(x->reason[0] ? &e : NULL, &x->res, x->data);
        }
        gone = u->closing && u->busy == 1;
        unpack_free(x);
        if (!gone && !u->pumping)
                pump(u);
}

_printf_(3, 4) static void fail(sh_layer_unpack *x, sh_error_kind kind, const char *fmt, ...)
{
        char buf[SH_LAYER_REASON_MAX];
        va_list ap;

        va_start(ap, fmt); /* through a copy: x->reason may be an argument */
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        memcpy(x->reason, buf, sizeof(buf));
        if (!x->reason[0])
                snprintf(x->reason, sizeof(x->reason), "the layer could not be unpacked");
        report(x, kind);
}

/* The children's reasons: a rule of the layer broken, or the host's trouble. */
static sh_error_kind kind_of_reason(const char *reason)
{
        return strncmp(reason, "layer refused", 13) == 0 ? SH_E_INVALID : SH_E_INTERNAL;
}

static void on_deadline(sh_loop *l, sh_timer *t, void *data)
{
        sh_layer_unpack *x = data;

        x->timer = NULL;
        /* SIGKILL to a namespace's PID 1 kills the whole namespace; child_done reports. */
        if (x->child)
                (void)sh_child_kill(x->child, SIGKILL);
}

static void child_done(sh_child *c, pid_t pid, int status, void *data);

/* A child of this unpack in its cgroup: the parser (clone into new namespaces) or the
 * applier (fork). `keep` holds its fds but for the reason pipe and the cgroup.procs fds,
 * appended here. */
static int start_child(sh_layer_unpack *x, bool parser, int *keep, int nkeep, sh_child_main_fn fn,
                       void *arg, int *nprocs, const char **what)
{
        int p[2] = {-1, -1}, procs[4], n, i, e;

        n = sh_cgroup_open_procs(x->cg, procs, ARRAY_SIZE(procs));
        if (n < 0) {
                *what = "opening the unpacker's cgroup";
                return n;
        }
        *nprocs = n;
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
                e = -errno;
                for (i = 0; i < n; i++)
                        close(procs[i]);
                *what = "pipe";
                return e;
        }
        keep[nkeep++] = p[1];
        for (i = 0; i < n; i++)
                keep[nkeep++] = procs[i];
        sh_close(x->errfd);
        x->errfd = p[0];
        if (parser)
                x->child = sh_child_clone_fds(x->u->loop, SH_UNPACKER_NS, keep, nkeep, fn, arg,
                                              child_done, x);
        else
                x->child = sh_child_fork_fds(x->u->loop, keep, nkeep, fn, arg, child_done, x);
        e = errno;
        close(p[1]);
        for (i = 0; i < n; i++)
                close(procs[i]);
        if (!x->child) {
                *what = parser ? "starting the parser" : "starting the applier";
                return -e;
        }
        return 0;
}

static void arm_deadline(sh_layer_unpack *x, uint64_t ms)
{
        sh_loop_cancel_timer(x->u->loop, x->timer);
        /* Without the timer the parser's RLIMIT_CPU still ends it. */
        x->timer = sh_loop_add_timer(x->u->loop, ms, on_deadline, x);
}

static void start_applier(sh_layer_unpack *x)
{
        sh_layer_apply_arg a = {
                .filter = sh_seccomp_prog(x->u->applier),
                .max_bytes = x->max_bytes,
                /* the tree also has the directories the layer left implicit */
                .max_entries =
                        x->max_entries > UINT64_MAX / 4 ? UINT64_MAX / 2 : 2 * x->max_entries + 256,
        };
        int keep[8] = {x->destfd, x->recfd}, r;
        const char *what = "";

        x->phase = PH_APPLYING;
        r = start_child(x, false, keep, 2, sh_layer_applier_main, &a, &a.nprocs, &what);
        if (r < 0) {
                fail(x, SH_E_INTERNAL, "this host could not finish the layer: %s: %s", what,
                     strerror(-r));
                return;
        }
        arm_deadline(x, SH_LAYER_APPLY_TIMEOUT_MS);
}

/* The parser has been reaped, and with it (PID 1) its namespace; its cgroup must be empty
 * too before the applier touches the tree: nothing of it may still change it. */
static void parser_exited(sh_layer_unpack *x, int status)
{
        sh_error *err = NULL;
        uint64_t ooms = 0;
        bool empty = false;

        x->errfd = sh_unpacker_read_reason(x->errfd, x->reason, sizeof(x->reason));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                if (x->reason[0]) {
                        fail(x, kind_of_reason(x->reason), "%s", x->reason);
                        return;
                }
                if (WIFSIGNALED(status) && sh_cgroup_oom_kills(x->cg, &ooms, &err) == 0 &&
                    ooms > 0) {
                        fail(x, SH_E_INVALID,
                             "layer refused: unpacking exceeded this host's memory limit of "
                             "%llu MiB",
                             (unsigned long long)(SH_LAYER_UNPACK_MEMORY_MAX >> 20));
                        return;
                }
                sh_error_release(&err);
                if (WIFSIGNALED(status))
                        fail(x, SH_E_INVALID,
                             "layer refused: unpacking exceeded this host's limits (%" PRIu64
                             " bytes, %u s; signal %d)",
                             x->max_bytes, SH_LAYER_UNPACK_TIMEOUT_MS / 1000, WTERMSIG(status));
                else
                        fail(x, SH_E_INTERNAL, "unpacking the layer failed (exit %d)",
                             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
                return;
        }
        if (sh_cgroup_is_empty(x->cg, &empty, &err) < 0 || !empty) {
                fail(x, SH_E_INTERNAL, "this host could not confirm that the unpacker ended: %s",
                     err && err->msg ? err->msg : "its cgroup still has processes");
                sh_error_release(&err);
                return;
        }
        x->reason[0] = '\0';
        start_applier(x);
}

static void applier_exited(sh_layer_unpack *x, int status)
{
        unsigned long long bytes = 0, entries = 0;

        x->errfd = sh_unpacker_read_reason(x->errfd, x->reason, sizeof(x->reason));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                if (!x->reason[0])
                        snprintf(x->reason, sizeof(x->reason),
                                 "this host could not finish the layer (%s %d)",
                                 WIFSIGNALED(status) ? "signal" : "exit",
                                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
                fail(x, kind_of_reason(x->reason), "%s", x->reason);
                return;
        }
        if (sscanf(x->reason, "%llu %llu", &bytes, &entries) != 2) {
                fail(x, SH_E_INTERNAL, "this host could not count the layer's entries");
                return;
        }
        x->res.bytes = bytes;
        x->res.entries = entries;
        x->reason[0] = '\0';
        report(x, SH_E_INTERNAL);
}

static void child_done(sh_child *c, pid_t pid, int status, void *data)
{
        sh_layer_unpack *x = data;

        x->child = NULL;
        sh_loop_cancel_timer(x->u->loop, x->timer);
        x->timer = NULL;
        if (x->phase == PH_PARSING && x->done)
                parser_exited(x, status);
        else if (x->phase == PH_APPLYING && x->done)
                applier_exited(x, status);
        else
                report(x, SH_E_CANCELLED);
}

static void launch(sh_layer_unpack *x)
{
        sh_layer_unpacker *u = x->u;
        const sh_cg_limits lim = {
                .memory_max = SH_LAYER_UNPACK_MEMORY_MAX,
                .pids_max = SH_LAYER_UNPACK_PIDS_MAX,
                .cpu_max_milli = SH_LAYER_UNPACK_CPU_MILLI,
        };
        sh_layer_child_arg a = {
                .uid = u->uid,
                .filter = sh_seccomp_prog(u->parser),
                .c = x->c,
                .max_bytes = x->max_bytes,
                .max_entries = x->max_entries,
        };
        sh_error *err = NULL;
        const char *what = "";
        int keep[8] = {x->blobfd, x->destfd, x->recfd}, r;

        x->phase = PH_PARSING;
        SH_LIST_PREPEND(list, u->active, x);
        u->running++;
        snprintf(x->cgname, sizeof(x->cgname), "l%u", ++u->counter);
        if (sh_cgroup_create(u->cgroot, u->cg, x->cgname, &lim, &x->cg, &err) < 0) {
                fail(x, SH_E_INTERNAL, "this host could not unpack the layer: %s",
                     err && err->msg ? err->msg : "cannot create its cgroup");
                sh_error_release(&err);
                return;
        }
        r = start_child(x, true, keep, 3, sh_layer_parser_main, &a, &a.nprocs, &what);
        if (r < 0) {
                fail(x, SH_E_INTERNAL, "this host could not unpack the layer: %s: %s", what,
                     strerror(-r));
                return;
        }
        arm_deadline(x, SH_LAYER_UNPACK_TIMEOUT_MS + 5000);
}

static void pump(sh_layer_unpacker *u)
{
        u->pumping = true;
        while (!u->closing && u->running < SH_LAYER_UNPACK_PARALLEL && u->queue) {
                sh_layer_unpack *x = u->queue;

                queue_del(u, x);
                launch(x);
        }
        u->pumping = false;
}

static void on_kick(sh_loop *l, sh_timer *t, void *data)
{
        sh_layer_unpacker *u = data;

        u->kick = NULL;
        pump(u);
}

sh_layer_unpack *sh_layer_unpack_start(sh_layer_unpacker *u, int blob_fd, sh_layer_compression c,
                                       int dest_dirfd, uint64_t max_bytes, uint64_t max_entries,
                                       sh_layer_unpack_done_fn done, void *data, sh_error **err)
{
        sh_layer_unpack *x;

        if (u->closing) {
                sh_error_new(err, SH_E_UNAVAILABLE, "the layer unpacker is shutting down");
                return NULL;
        }
        if (c != SH_LAYER_PLAIN && c != SH_LAYER_GZIP && c != SH_LAYER_ZSTD) {
                sh_error_new(err, SH_E_INVALID, "unknown layer compression %d", (int)c);
                return NULL;
        }
        x = calloc(1, sizeof(*x));
        if (!x) {
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        x->u = u;
        x->blobfd = x->destfd = x->recfd = x->errfd = -1;
        x->c = c;
        x->max_bytes = max_bytes;
        x->max_entries = max_entries;
        x->done = done;
        x->data = data;
        /* Our own fds: the caller's may be closed while we wait in the queue. */
        x->blobfd = fcntl(blob_fd, F_DUPFD_CLOEXEC, 3);
        x->destfd = fcntl(dest_dirfd, F_DUPFD_CLOEXEC, 3);
        if (x->blobfd < 0 || x->destfd < 0) {
                sh_error_make(err, errno, "holding the layer's blob and destination");
                goto fail;
        }
        /* The parser's record for the applier: memory billed to the parser's cgroup, no name
         * anywhere, never in the tree. */
        x->recfd = memfd_create("sh-layer-record", MFD_CLOEXEC);
        if (x->recfd < 0) {
                sh_error_make(err, errno, "creating the layer's record");
                goto fail;
        }
        /* The unprivileged parser owns its destination and nothing else on the host (the
         * applier gives it to root at the end). */
        if (fchown(x->destfd, u->uid, u->uid) < 0 || fchmod(x->destfd, 0700) < 0) {
                sh_error_make(err, errno, "handing the layer's directory to the unpacker");
                goto fail;
        }
        if (!u->kick && !(u->kick = sh_loop_add_timer(u->loop, 0, on_kick, u))) {
                sh_error_make(err, ENOMEM, "scheduling the unpacker");
                goto fail;
        }
        u->busy++;
        x->phase = PH_QUEUED;
        queue_push(u, x);
        return x;
fail:
        sh_close(x->blobfd);
        sh_close(x->destfd);
        sh_close(x->recfd);
        free(x);
        return NULL;
}

void sh_layer_unpack_cancel(sh_layer_unpack *x)
{
        if (!x)
                return;
        x->done = NULL;
        if (x->phase == PH_QUEUED) {
                queue_del(x->u, x);
                x->phase = PH_DONE;
                unpack_free(x);
                return;
        }
        /* Reaped from the loop, then freed without a word (child_done). */
        if (x->child)
                (void)sh_child_kill(x->child, SIGKILL);
}
