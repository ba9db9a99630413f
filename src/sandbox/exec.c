/* exec.c: exec sessions: pipes from the sandbox read by the loop, NDJSON frames, capped
 * out/err buffers, heartbeats, the grace for descendants, and the kill of the exec cgroup. */
#include "sh/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sh/buf.h"
#include "sh/cgroup.h"
#include "sh/log.h"
#include "sh/worker.h"

#define HEARTBEAT_MS 4500       /* contract: a frame at least every 5 s */
#define QUEUE_HIGH   (1u << 20) /* stop reading the pipes above this much unread NDJSON */
#define READ_CHUNK   (256 * 1024)
#define PIPE_SIZE    (1024 * 1024) /* exec pipes: fewer wake-ups per MB */

struct sh_exec {
        unsigned refs; /* the sandbox's list + the consumer */
        sh_manager *m;
        sh_sandbox *sb;
        uint32_t id;
        struct sh_cgroup *cg;
        int fd[2]; /* read ends: stdout, stderr (-1 once at EOF) */
        sh_io *io[2];
        bool paused;
        sh_buf q;      /* NDJSON not yet read by the consumer */
        sh_buf out[2]; /* kept stdout / stderr, up to exec_output_max */
        bool truncated;
        bool started, exited, final_queued, detached, killed, list_released;
        int status;
        sh_timer *grace_t, *hb_t;
        uint64_t last_frame_ms;
        sh_exec_notify_fn notify;
        void *data;
        sh_exec *prev, *next; /* in sb->execs */
};

static void exec_unref(sh_exec *e);

static void notify(sh_exec *e)
{
        e->last_frame_ms = sh_now_ms();
        if (e->notify && !e->detached)
                e->notify(e, e->data);
}

/* Append `{"<key>":"<base64>"` (no closing brace) to q. */
static int append_b64(sh_buf *q, const char *key, const void *data, size_t n)
{
        size_t b64 = 4 * ((n + 2) / 3) + 1; /* with EVP_EncodeBlock's terminator */
        int w;

        if (n > INT_MAX / 2 || sh_buf_reserve(q, b64 + strlen(key) + 8) < 0)
                return -ENOMEM;
        q->len += (size_t)sprintf(q->p + q->len, "\"%s\":\"", key);
        w = EVP_EncodeBlock((unsigned char *)q->p + q->len, (const unsigned char *)data, (int)n);
        q->len += (size_t)w;
        q->p[q->len++] = '"';
        return 0;
}

static void queue_chunk(sh_exec *e, const char *data, size_t n)
{
        if (sh_buf_append(&e->q, "{", 1) < 0 || append_b64(&e->q, "o", data, n) < 0 ||
            sh_buf_append(&e->q, "}\n", 2) < 0)
                log_error("exec-oom", e->sb->id, "cannot queue output");
        notify(e);
}

static void stop_reading(sh_exec *e, int i)
{
        sh_loop *l = sh_manager_loop(e->m);

        sh_loop_del_io(l, e->io[i]);
        e->io[i] = NULL;
        sh_close(e->fd[i]);
        e->fd[i] = -1;
}

static void finish(sh_exec *e);

/* The sandbox list's reference goes once the command has exited and every holder of its
 * pipes has closed them: nothing more can come. */
static void maybe_release(sh_exec *e)
{
        if (e->list_released || !e->exited || e->fd[0] >= 0 || e->fd[1] >= 0)
                return;
        e->list_released = true;
        exec_unref(e);
}

static void maybe_finish(sh_exec *e)
{
        if (e->final_queued || !e->exited)
                return;
        if (e->fd[0] < 0 && e->fd[1] < 0)
                finish(e);
}

static void on_pipe(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_exec *e = data;
        static char chunk[READ_CHUNK]; /* one loop thread: one buffer */
        int i = fd == e->fd[0] ? 0 : 1;
        ssize_t n = read(fd, chunk, sizeof(chunk));

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                stop_reading(e, i);
                maybe_finish(e);
                maybe_release(e);
                return;
        }
        if (e->final_queued)
                return; /* the final frame is queued: nothing more is kept */
        {
                size_t max = sh_manager_config(e->m)->exec_output_max;
                size_t room = e->out[i].len < max ? max - e->out[i].len : 0;
                size_t keep = (size_t)n < room ? (size_t)n : room;

                if (keep && sh_buf_append(&e->out[i], chunk, keep) < 0)
                        keep = 0;
                if (keep < (size_t)n)
                        e->truncated = true;
        }
        queue_chunk(e, chunk, (size_t)n);
        /* Backpressure: a consumer that does not read stops our reads, and a full pipe then
         * stops the command. Memory never grows with a silent client. */
        if (e->q.len - e->q.off > QUEUE_HIGH && !e->paused) {
                int k;

                e->paused = true;
                for (k = 0; k < 2; k++)
                        if (e->io[k]) {
                                sh_loop_del_io(l, e->io[k]);
                                e->io[k] = NULL;
                        }
        }
}

static void resume_reading(sh_exec *e)
{
        sh_loop *l = sh_manager_loop(e->m);
        int k;

        if (!e->paused)
                return;
        e->paused = false;
        for (k = 0; k < 2; k++)
                if (e->fd[k] >= 0 && !e->io[k])
                        e->io[k] = sh_loop_add_io(l, e->fd[k], EPOLLIN, on_pipe, e);
}

static void on_heartbeat(sh_loop *l, sh_timer *t, void *data)
{
        sh_exec *e = data;
        uint64_t now = sh_now_ms();

        e->hb_t = NULL;
        if (e->final_queued)
                return;
        if (now - e->last_frame_ms >= HEARTBEAT_MS) {
                /* An empty chunk: harmless to the client, and the write that tells us a
                 * vanished client is gone. */
                if (sh_buf_append(&e->q, "{\"o\":\"\"}\n", 9) == 0)
                        notify(e);
                e->hb_t = sh_loop_add_timer(l, HEARTBEAT_MS, on_heartbeat, e);
        } else {
                e->hb_t = sh_loop_add_timer(l, HEARTBEAT_MS - (now - e->last_frame_ms),
                                            on_heartbeat, e);
        }
}

/* After the final frame nothing of the pipes is wanted any more: close the daemon's read
 * ends. Draining them instead would let a sandbox's background writers keep the daemon busy
 * reading and dropping their output for as long as they live (`yes &` held ~80% of a core);
 * now their writes fail with EPIPE (or SIGPIPE), which is their business, and nothing of
 * theirs is left in the daemon. */
static void close_pipes(sh_exec *e)
{
        int k;

        for (k = 0; k < 2; k++)
                if (e->fd[k] >= 0)
                        stop_reading(e, k);
        e->paused = false;
}

static void on_grace(sh_loop *l, sh_timer *t, void *data)
{
        sh_exec *e = data;

        e->grace_t = NULL;
        /* Descendants still hold the pipes: answer now; they keep running in the sandbox
         * (finish closes our ends of their pipes). */
        if (!e->final_queued) {
                finish(e);
                maybe_release(e);
        }
}

static void finish(sh_exec *e)
{
        sh_loop *l = sh_manager_loop(e->m);
        uint64_t ooms = 0;
        int code, sig = 0;
        char tail[96];
        sh_error *err = NULL;

        if (e->final_queued)
                return;
        e->final_queued = true;
        sh_loop_cancel_timer(l, e->grace_t);
        e->grace_t = NULL;
        sh_loop_cancel_timer(l, e->hb_t);
        e->hb_t = NULL;
        close_pipes(e);
        if (WIFSIGNALED(e->status)) {
                sig = WTERMSIG(e->status);
                code = 128 + sig;
        } else {
                code = WEXITSTATUS(e->status);
        }
        if (e->cg && sh_cgroup_oom_kills(e->cg, &ooms, &err) < 0) {
                log_warn("oom-read-failed", e->sb->id, "%s, ignoring", err ? err->msg : "");
                sh_error_release(&err);
        }
        snprintf(tail, sizeof(tail), "{\"exit\":%d,", code);
        if (sh_buf_append(&e->q, tail, strlen(tail)) < 0 ||
            append_b64(&e->q, "out", e->out[0].p ? e->out[0].p : "", e->out[0].len) < 0 ||
            sh_buf_append(&e->q, ",", 1) < 0 ||
            append_b64(&e->q, "err", e->out[1].p ? e->out[1].p : "", e->out[1].len) < 0)
                log_error("exec-oom", e->sb->id, "cannot queue the exit frame");
        tail[0] = '\0';
        if (sig)
                snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), ",\"signal\":%d", sig);
        if (ooms > 0)
                snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), ",\"oom\":true");
        if (e->truncated)
                snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), ",\"truncated\":true");
        snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), "}\n");
        if (sh_buf_append(&e->q, tail, strlen(tail)) < 0)
                log_error("exec-oom", e->sb->id, "cannot queue the exit frame");
        sh_buf_done(&e->out[0]);
        sh_buf_done(&e->out[1]);
        notify(e);
}

static void fail_frame(sh_exec *e, const char *type, const char *detail)
{
        cJSON *o;
        char *text;

        if (e->final_queued)
                return;
        e->final_queued = true;
        /* Paused by backpressure or not, the session no longer waits for the pipes' EOF:
         * it ends once the command has exited (maybe_release). */
        close_pipes(e);
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "error", type);
        cJSON_AddStringToObject(o, "detail", detail);
        text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!text || sh_buf_append(&e->q, text, strlen(text)) < 0 ||
            sh_buf_append(&e->q, "\n", 1) < 0)
                log_error("exec-oom", e->sb->id, "cannot queue the error frame");
        free(text);
        notify(e);
}

static void exec_free(sh_exec *e)
{
        sh_loop *l = sh_manager_loop(e->m);
        int k;

        sh_loop_cancel_timer(l, e->grace_t);
        sh_loop_cancel_timer(l, e->hb_t);
        for (k = 0; k < 2; k++) {
                sh_loop_del_io(l, e->io[k]);
                sh_close(e->fd[k]);
        }
        if (e->cg) {
                sh_error *err = NULL;

                if (!e->exited || e->killed) {
                        if (sh_cgroup_kill(e->cg, &err) < 0)
                                log_warn("exec-kill-failed", e->sb->id, "%s", err ? err->msg : "");
                        sh_error_release(&err);
                }
                sh_manager_bury_cgroup(e->m, e->cg);
        }
        if (e->prev)
                e->prev->next = e->next;
        else if (e->sb->execs == e)
                e->sb->execs = e->next;
        if (e->next)
                e->next->prev = e->prev;
        sh_buf_done(&e->q);
        sh_buf_done(&e->out[0]);
        sh_buf_done(&e->out[1]);
        sh_sandbox_unref(e->sb);
        free(e);
}

static void exec_unref(sh_exec *e)
{
        if (e && --e->refs == 0)
                exec_free(e);
}

static sh_exec *find(sh_sandbox *sb, uint32_t id)
{
        sh_exec *e;

        for (e = sb->execs; e; e = e->next)
                if (e->id == id)
                        return e;
        return NULL;
}

void sh_exec_on_started(sh_sandbox *sb, uint32_t id, int pid)
{
        sh_exec *e = find(sb, id);

        if (e)
                e->started = true;
}

void sh_exec_on_exited(sh_sandbox *sb, uint32_t id, int status)
{
        sh_exec *e = find(sb, id);
        uint64_t grace;

        if (!e || e->exited)
                return;
        e->exited = true;
        e->status = status;
        if (e->final_queued) {
                maybe_release(e);
                return;
        }
        maybe_finish(e);
        if (e->final_queued) {
                maybe_release(e);
                return;
        }
        if (!e->final_queued) {
                grace = sh_manager_config(e->m)->exec_grace_ms;
                e->grace_t = sh_loop_add_timer(sh_manager_loop(e->m), grace, on_grace, e);
                if (!e->grace_t) {
                        finish(e);
                        maybe_release(e);
                }
        }
}

void sh_exec_fail_all(sh_sandbox *sb, const char *type, const char *detail)
{
        sh_exec *e, *next;

        for (e = sb->execs; e; e = next) {
                next = e->next;
                e->exited = true;
                fail_frame(e, type, detail);
                maybe_release(e);
        }
}

size_t sh_exec_read(sh_exec *e, char *out, size_t max)
{
        size_t n = e->q.len - e->q.off;

        if (n > max)
                n = max;
        if (n == 0)
                return 0;
        memcpy(out, e->q.p + e->q.off, n);
        e->q.off += n;
        if (e->q.off == e->q.len)
                e->q.off = e->q.len = 0;
        if (e->paused && e->q.len - e->q.off < QUEUE_HIGH / 2)
                resume_reading(e);
        return n;
}

bool sh_exec_done(const sh_exec *e)
{
        return e->final_queued && e->q.len == e->q.off;
}

void sh_exec_detach(sh_exec *e)
{
        if (!e || e->detached)
                return;
        e->detached = true;
        e->notify = NULL;
        if (!e->final_queued) {
                /* The client went away before the end: the command and everything it
                 * started die with it, found through the exec's own cgroup. */
                sh_error *err = NULL;

                e->killed = true;
                if (e->cg && sh_cgroup_kill(e->cg, &err) < 0) {
                        log_warn("exec-kill-failed", e->sb->id, "%s", err ? err->msg : "");
                        sh_error_release(&err);
                }
                log_info("exec-killed", e->sb->id, "client went away before the end");
                fail_frame(e, "Cancelled", "the client went away");
        }
        exec_unref(e); /* the consumer's reference */
}

/* environment = base variables, then the sandbox's create env, then the exec's env; a later
 * value of a name replaces the earlier one. */
static int build_env(sh_sandbox *sb, const cJSON *env, char ***ret, sh_error **err)
{
        static const char *const base[] = {
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME=/workspace",
                "LANG=C.UTF-8",
                "PWD=/workspace",
                "TMPDIR=/tmp",
                "USER=sandbox",
                "SHELL=/bin/sh"};
        const cJSON *layers[2] = {sb->env, env}, *v;
        size_t n = ARRAY_SIZE(base), cap, i, k;
        char **out;

        cap = n + (size_t)cJSON_GetArraySize(sb->env) +
              (env ? (size_t)cJSON_GetArraySize(env) : 0) + 1;
        out = calloc(cap, sizeof(char *));
        if (!out)
                return sh_error_make(err, ENOMEM, "out of memory");
        for (i = 0; i < n; i++)
                out[i] = strdup(base[i]);
        for (k = 0; k < 2; k++) {
                if (!layers[k])
                        continue;
                cJSON_ArrayForEach(v, layers[k])
                {
                        size_t nl = strlen(v->string);
                        char *kv;

                        if (nl == 0 || strchr(v->string, '=')) {
                                for (i = 0; i < n; i++)
                                        free(out[i]);
                                free(out);
                                return sh_error_new(err, SH_E_INVALID,
                                                    "env names must be non-empty and hold no '='");
                        }
                        if (asprintf(&kv, "%s=%s", v->string, v->valuestring) < 0)
                                kv = NULL;
                        for (i = 0; i < n; i++)
                                if (out[i] && strncmp(out[i], kv ? kv : "", nl + 1) == 0)
                                        break;
                        if (i < n) {
                                free(out[i]);
                                out[i] = kv;
                        } else {
                                out[n++] = kv;
                        }
                }
        }
        for (i = 0; i < n; i++)
                if (!out[i]) {
                        for (k = 0; k < n; k++)
                                free(out[k]);
                        free(out);
                        return sh_error_make(err, ENOMEM, "out of memory");
                }
        *ret = out;
        return 0;
}

static void free_strv(char **v)
{
        size_t i;

        if (!v)
                return;
        for (i = 0; v[i]; i++)
                free(v[i]);
        free(v);
}

int sh_exec_start(sh_manager *m, sh_sandbox *sb, const cJSON *cmd, const cJSON *env,
                  sh_exec_notify_fn fn, void *data, sh_exec **ret, sh_error **err)
{
        sh_loop *l = sh_manager_loop(m);
        sh_exec *e;
        char **argv = NULL, **envp = NULL, name[32];
        int out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, procs[SH_EXEC_MAX_PROCS_FDS];
        int nprocs = 0, i, r = -1;
        const cJSON *v;
        size_t argc = 0;

        if (sb->worker_dead || !sb->worker_ready || !sb->worker)
                return sh_error_new(err, SH_E_SANDBOX_NOT_FOUND, "the sandbox's worker is gone");
        e = calloc(1, sizeof(*e));
        if (!e)
                return sh_error_make(err, ENOMEM, "out of memory");
        e->refs = 2;
        e->m = m;
        e->sb = sh_sandbox_ref(sb);
        e->id = ++sb->next_exec_id;
        e->fd[0] = e->fd[1] = -1;
        e->notify = fn;
        e->data = data;
        e->last_frame_ms = sh_now_ms();
        /* link first so that exec_free can unlink on every path */
        e->next = sb->execs;
        if (sb->execs)
                sb->execs->prev = e;
        sb->execs = e;

        argv = calloc((size_t)cJSON_GetArraySize(cmd) + 1, sizeof(char *));
        if (!argv) {
                sh_error_make(err, ENOMEM, "out of memory");
                goto fail;
        }
        cJSON_ArrayForEach(v, cmd) argv[argc++] = v->valuestring; /* borrowed */
        if (build_env(sb, env, &envp, err) < 0)
                goto fail;
        snprintf(name, sizeof(name), "exec-%u", e->id);
        if (sh_cgroup_create(sh_manager_cgroups(m), sb->cg, name, NULL, &e->cg, err) < 0)
                goto fail;
        nprocs = sh_cgroup_open_procs(e->cg, procs, SH_EXEC_MAX_PROCS_FDS);
        if (nprocs < 0) {
                sh_error_make(err, -nprocs, "opening the exec cgroup");
                nprocs = 0;
                goto fail;
        }
        if (pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0) {
                sh_error_make(err, errno, "pipe");
                goto fail;
        }
        if (sh_worker_exec(sb->worker, e->id, argv, envp, out_p[1], err_p[1], procs, nprocs, err) <
            0)
                goto fail;
        e->fd[0] = out_p[0];
        e->fd[1] = err_p[0];
        out_p[0] = err_p[0] = -1;
        for (i = 0; i < 2; i++) {
                /* A larger pipe means fewer wake-ups per megabyte of output (best effort:
                 * the limit is /proc/sys/fs/pipe-max-size). */
                (void)fcntl(e->fd[i], F_SETPIPE_SZ, PIPE_SIZE);
                if (fcntl(e->fd[i], F_SETFL, O_NONBLOCK) < 0 ||
                    !(e->io[i] = sh_loop_add_io(l, e->fd[i], EPOLLIN, on_pipe, e))) {
                        sh_error_make(err, errno, "watching the exec pipes");
                        goto fail_started;
                }
        }
        e->hb_t = sh_loop_add_timer(l, HEARTBEAT_MS, on_heartbeat, e);
        r = 0;
        *ret = e;
        goto out;
fail_started:
        e->killed = true; /* exec_free kills the cgroup */
fail:
        e->refs = 1;
        exec_unref(e);
out:
        sh_close(out_p[0]);
        sh_close(out_p[1]);
        sh_close(err_p[0]);
        sh_close(err_p[1]);
        for (i = 0; i < nprocs; i++)
                close(procs[i]);
        free(argv);
        free_strv(envp);
        return r;
}
