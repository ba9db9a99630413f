/* commands.c: a sandbox's execd commands (OPENSANDBOX.md section 3.1): POST /command (shell
 * text through a fixed wrapper: the working directory, then `bash -c`, `sh -c` without bash),
 * its SSE stream fed by the exec engine (sse.c encodes), background commands (at most
 * SANDBOX_HOST_BACKGROUND_MAX running, one daemon fd each: their stdout and stderr share one
 * pipe) with a bounded log in a file of the sandbox's (sh/ringlog.h), GET /command/status/{id},
 * GET /command/{id}/logs (streamed from that file in bounded steps), DELETE /command?id=, the
 * timeout, the registry of a sandbox's last 1024 commands (their texts bounded together), and
 * the sandbox's execd state itself (rec->execd), which sessions.c and metrics.c share. Every
 * command runs through the same engine as a native exec (sh_sandbox_exec): its own cgroup,
 * kill on disconnect, backpressure. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "execd.h"
#include "sh/capability.h"

SH_CAPABILITY(os_command, "opensandbox.command")
SH_CAPABILITY(os_command_background, "opensandbox.command-background")

/* The wrapper every /command runs through, as `/bin/sh -c WRAPPER sh NONCE CWD TEXT`. It
 * enters the working directory (`~` is HOME), says so on stdout before any byte of the
 * command's own (the daemon reads that line: a directory that cannot be entered is the
 * request's 400, as OpenSandbox's execd answers), then becomes `bash -c TEXT` (`sh -c`
 * without bash). Client text only ever reaches it as arguments, never inside the script. */
static const char wrapper[] =
        "n=$1 d=$2 c=$3\n"
        "if [ -n \"$d\" ]; then\n"
        "case $d in \"~\") d=$HOME;; \"~/\"*) d=$HOME/${d#\"~/\"};; esac\n"
        "if [ ! -e \"$d\" ]; then printf '%s nodir\\n' \"$n\"; exit 125; fi\n"
        "if [ ! -d \"$d\" ]; then printf '%s notdir\\n' \"$n\"; exit 125; fi\n"
        "cd -- \"$d\" 2>/dev/null || { printf '%s noaccess\\n' \"$n\"; exit 125; }\n"
        "fi\n"
        "printf '%s ok\\n' \"$n\"\n"
        "if command -v bash >/dev/null 2>&1; then exec bash -c \"$c\"; fi\n"
        "exec sh -c \"$c\"\n";

/* A session's run: `/bin/sh -c LAUNCHER sh SCRIPT NONCE CWD TEXT STATE FIRST` (sessions.c
 * gives SCRIPT): the script runs in bash (sh without). */
static const char launcher[] = "s=$1; shift\n"
                               "if command -v bash >/dev/null 2>&1; then exec bash -c \"$s\" bash "
                               "\"$@\"; fi\n"
                               "exec sh -c \"$s\" sh \"$@\"\n";
extern const char os_session_script[];

/* A command's life. Its transitions (cmd_ran, cmd_refused, cmd_broken, cmd_finish) are the
 * only writers of its state:
 *
 *   STARTING --the wrapper said ok--------------------> RUNNING ---------the end--> FINISHED
 *      |-----the directory cannot be entered (400)----> REFUSED ---------the end--> FINISHED
 *      |-----not the wrapper's line (killed)----------> BROKEN ----------the end--> FINISHED
 *      '-----the end before the wrapper said anything (a start failure)-----------> FINISHED
 *
 * A command the engine could not start at all is FINISHED at once. */
typedef enum {
        CMD_STARTING, /* running its wrapper, which has not yet said it entered the directory */
        CMD_RUNNING,  /* the wrapper said ok: what comes is the command's own output */
        CMD_REFUSED,  /* the directory cannot be entered: answered 400, out of the registry */
        CMD_BROKEN,   /* the image's /bin/sh did not run the wrapper: killed */
        CMD_FINISHED, /* ended: its exit code, error and finish time are set */
} cmd_state;

struct os_cmd {
        unsigned refs;
        os_execd *x; /* NULL once out of the registry (or never in it: session runs) */
        cmd_state state;
        char id[OS_UUID_LEN + 1];
        char log_id[SH_ID_LEN + 1];
        char *content;   /* the shell text */
        char *cwd;       /* the directory asked for, NULL: the default */
        size_t text_len; /* content and cwd: its share of x->text_bytes */
        bool background; /* output into its log; running in the registry: x->n_running_bg */
        os_session *session;
        sh_loop *loop;

        sh_exec *e; /* the consumer's reference, until the end */
        os_handshake hs;
        sh_buf pre_err; /* stderr that came before the handshake line */
        os_sse sse;
        uint64_t start_ms, finished_ms; /* wall */
        int exit_code;
        char *error;
        char why[128]; /* why it was killed, for its traceback */
        sh_timer *timeout_t;
        uint64_t timeout_ms;
        sh_ringlog log; /* background: its output, in a file of the sandbox's */

        /* its request's stream: ours until its last event is queued or the client left */
        sh_queued_stream *qs;

        SH_LIST_FIELDS(os_cmd, all);
};

static void cmd_unref(os_cmd *c);

/* ---- the sandbox's execd state ---------------------------------------------------------------- */

os_execd *os_execd_of(os_record *rec)
{
        os_execd *x;

        if (rec->gone)
                return NULL;
        if (rec->execd)
                return rec->execd;
        x = calloc(1, sizeof(*x));
        if (!x)
                return NULL;
        x->rec = rec;
        x->rate = sh_exec_rate_new(rec->ctx->loop, OS_LOG_RATE);
        if (!x->rate) {
                free(x);
                return NULL;
        }
        rec->execd = x;
        return x;
}

/* The bytes a sandbox's background logs may keep together: OS_LOG_BUDGET_TIMES full logs. */
static uint64_t log_budget(const os_execd *x)
{
        return OS_LOG_BUDGET_TIMES * x->rec->ctx->cfg->command_log_max;
}

/* A background command no longer runs (it ends, or leaves the registry unfinished): its room
 * under SANDBOX_HOST_BACKGROUND_MAX is free. */
static void bg_stopped(os_cmd *c)
{
        if (c->background && c->x && c->state != CMD_FINISHED)
                c->x->n_running_bg--;
}

/* Its log goes (its file removed): a finished command's, over the budget, or one that leaves
 * the registry. */
static void drop_log(os_cmd *c)
{
        os_execd *x = c->x;

        x->log_bytes -= sh_ringlog_drop(&c->log, os_record_sandbox(x->rec), c->log_id);
}

static void unlink_cmd(os_cmd *c)
{
        os_execd *x = c->x;

        if (!x)
                return;
        if (x->cmds_tail == c)
                x->cmds_tail = c->all_prev;
        SH_LIST_REMOVE(all, x->cmds, c);
        x->n_cmds--;
        x->text_bytes -= c->text_len;
        bg_stopped(c);
        drop_log(c);
        c->x = NULL;
        cmd_unref(c);
}

/* Room for one more, whose texts take `need` bytes: the oldest finished commands go, until
 * fewer than 1024 are remembered and their texts and the new one's fit OS_COMMAND_TEXTS_MAX.
 * False when the running ones alone leave no room. */
static bool registry_room(os_execd *x, size_t need)
{
        os_cmd *c, *next;

        for (c = x->cmds;
             c && (x->n_cmds >= OS_COMMANDS_MAX || x->text_bytes + need > OS_COMMAND_TEXTS_MAX);
             c = next) {
                next = c->all_next;
                if (c->state == CMD_FINISHED)
                        unlink_cmd(c);
        }
        return x->n_cmds < OS_COMMANDS_MAX && x->text_bytes + need <= OS_COMMAND_TEXTS_MAX;
}

static os_cmd *find_cmd(os_execd *x, const char *id, size_t len)
{
        os_cmd *c;

        if (!x || len != OS_UUID_LEN)
                return NULL;
        for (c = x->cmds; c; c = c->all_next)
                if (memcmp(c->id, id, OS_UUID_LEN) == 0)
                        return c;
        return NULL;
}

/* Over the sandbox's budget for logs: finished commands' logs go, oldest first (a running
 * command's log is bounded by COMMAND_LOG_MAX, and they by SANDBOX_HOST_BACKGROUND_MAX). */
static void enforce_budget(os_execd *x)
{
        uint64_t budget = log_budget(x);
        os_cmd *c;

        for (c = x->cmds; c && x->log_bytes > budget; c = c->all_next)
                if (c->state == CMD_FINISHED && sh_ringlog_kept(&c->log))
                        drop_log(c);
}

void os_execd_record_gone(os_record *rec)
{
        os_execd *x = rec->execd;
        os_cmd *c;

        if (!x)
                return;
        os_metrics_gone(x);
        os_sessions_gone(x);
        /* Their processes die with the sandbox; the engine then ends each session with an
         * error event, which a foreground stream shows. */
        for (c = x->cmds; c; c = c->all_next)
                if (c->state != CMD_FINISHED && !c->why[0])
                        snprintf(c->why, sizeof(c->why), "the sandbox was deleted");
        while (x->cmds)
                unlink_cmd(x->cmds);
        /* the sessions billed to it (the entrypoint's too) keep it until they end */
        sh_exec_rate_unref(x->rate);
        rec->execd = NULL;
        free(x);
}

void os_execd_free_all(os_ctx *ctx)
{
        /* Every record has gone (os_execd_record_gone): nothing is left here. */
}

/* ---- the stream -------------------------------------------------------------------------------- */

/* Our reference to the stream goes: after its last event, or when the client left. */
static void stream_end(os_cmd *c)
{
        sh_queued_stream_end(c->qs);
        sh_queued_stream_release(TAKE_PTR(c->qs));
}

/* `ping` after every 3 s of silence: harmless to the client, and the write that tells us a
 * vanished client is gone. */
static int stream_ping(void *data, sh_buf *q)
{
        return os_sse_text(q, "ping", "pong", 4, os_now_wall_ms());
}

/* Backpressure: a client that does not read stops the command, never the daemon's memory. */
static void stream_high(void *data)
{
        os_cmd *c = data;

        if (c->e)
                sh_exec_pause(c->e);
}

static void stream_low(void *data)
{
        os_cmd *c = data;

        if (c->e)
                sh_exec_resume(c->e);
}

/* The request has ended. A foreground command whose client left before its last event dies
 * with its whole tree (its exit still comes, for its status; nobody reads any more, so the
 * stream lets its pipes drain to their end); a background one runs on. */
static void stream_gone(void *data)
{
        os_cmd *c = data;

        if (c->state != CMD_FINISHED && !c->background) {
                if (!c->why[0])
                        snprintf(c->why, sizeof(c->why), "the client went away");
                log_info("command-killed", c->log_id, "client went away before the end");
                if (c->e)
                        sh_exec_kill(c->e);
        }
        sh_queued_stream_release(TAKE_PTR(c->qs));
}

static void stream_release(void *data)
{
        cmd_unref(data);
}

static const sh_queued_stream_ops stream_ops = {
        .high = stream_high,
        .low = stream_low,
        .keepalive = stream_ping,
        .gone = stream_gone,
        .release = stream_release,
};
static const sh_queued_stream_opts stream_opts = {
        .high = OS_STREAM_HIGH,
        .low = OS_STREAM_HIGH / 2,
        .keepalive_ms = OS_PING_MS,
        .block = 256 * 1024,
};

/* The 200 text/event-stream answer, with what is queued. */
static void reply_stream(os_cmd *c)
{
        sh_request *r = sh_queued_stream_request(c->qs);
        sh_response *resp;

        if (!r)
                return;
        resp = sh_queued_stream_response(c->qs);
        if (!resp) {
                os_reply_error(r, 500, OS_RUNTIME, "cannot create the response");
                return;
        }
        sh_response_header(resp, "Content-Type", "text/event-stream");
        sh_response_header(resp, "Cache-Control", "no-cache");
        sh_response_header(resp, "X-Accel-Buffering", "no");
        sh_response_header(resp, "X-Content-Type-Options", "nosniff");
        sh_reply(r, 200, resp);
}

/* ---- the command's life ----------------------------------------------------------------------- */

#define ERROR_MAX 511 /* the text of a command's `error` kept (its registry's budget) */

/* The first ERROR_MAX bytes of error, NUL-terminated (NULL: out of memory). A loop, not
 * strndup: the callers' texts are arrays shorter than the bound, which gcc's -O3 flags. */
static char *copy_error(const char *error)
{
        size_t n = 0;
        char *p;

        while (n < ERROR_MAX && error[n])
                n++;
        if (!(p = malloc(n + 1)))
                return NULL;
        memcpy(p, error, n);
        p[n] = '\0';
        return p;
}

/* ---- its transitions ---- */

/* STARTING -> RUNNING: the wrapper entered the directory; the command runs. */
static void cmd_ran(os_cmd *c)
{
        c->state = CMD_RUNNING;
}

/* STARTING -> REFUSED: the directory cannot be entered (the request's 400); the wrapper's exit
 * is still awaited. */
static void cmd_refused(os_cmd *c)
{
        c->state = CMD_REFUSED;
}

/* STARTING -> BROKEN: what came first is not the wrapper's line: the image's /bin/sh is no
 * shell. Killed; its end explains. */
static void cmd_broken(os_cmd *c)
{
        c->state = CMD_BROKEN;
        snprintf(c->why, sizeof(c->why), "the shell did not start as a shell");
        if (c->e)
                sh_exec_kill(c->e);
}

/* Any -> FINISHED, once: its exit code and error (kept bounded, as valid JSON text), its finish
 * time, its room among the running background commands freed, its timeout off. */
static void cmd_finish(os_cmd *c, int code, const char *error)
{
        if (c->state == CMD_FINISHED)
                return;
        bg_stopped(c);
        c->state = CMD_FINISHED;
        c->finished_ms = os_now_wall_ms();
        c->exit_code = code;
        free(c->error);
        c->error = error && *error ? copy_error(error) : NULL;
        /* it may quote the sandbox's own bytes (a start failure's stderr): valid JSON text */
        if (c->error)
                sh_utf8_sanitize(c->error);
        sh_loop_cancel_timer(c->loop, c->timeout_t);
        c->timeout_t = NULL;
}

/* It never ran (no handshake before its end): a start failure, its evalue the message. */
static void start_failed(os_cmd *c, const char *msg)
{
        c->sse.ended = true;
        if (c->qs) {
                if (os_sse_error(sh_queued_stream_queue(c->qs), msg, msg, os_now_wall_ms()) < 0)
                        log_error("command-oom", c->log_id, "cannot queue the error event");
                reply_stream(c); /* not answered yet: that waits for the handshake */
                stream_end(c);
        }
}

/* The stderr bytes of a command that never ran: what its wrapper or the exec said. */
static void failure_message(os_cmd *c, const sh_exec_event *ev, char *out, size_t size)
{
        size_t n = c->pre_err.len, i;

        while (n && (c->pre_err.p[n - 1] == '\n' || c->pre_err.p[n - 1] == '\r'))
                n--;
        if (n) {
                snprintf(out, size, "%.*s", (int)(n < size - 1 ? n : size - 1), c->pre_err.p);
                for (i = 0; out[i]; i++)
                        if ((unsigned char)out[i] < 0x20)
                                out[i] = ' ';
        } else if (ev->type == SH_EXEC_EV_ERROR) {
                snprintf(out, size, "%s", ev->error.text ? ev->error.text : "the command ended");
        } else {
                snprintf(out, size, "the command could not start (exit %d)", ev->exit.code);
        }
}

static void end_of_run(os_cmd *c, const sh_exec_event *ev)
{
        char msg[512];
        size_t slen = 0;
        const char *st;

        const cmd_state was = c->state;

        if (was == CMD_STARTING || was == CMD_BROKEN) {
                /* killed before it ran (timeout, interrupt, the client left, not a shell): that
                 * is why; else what the wrapper or the exec said */
                if (c->why[0])
                        snprintf(msg, sizeof(msg), "%s", c->why);
                else
                        failure_message(c, ev, msg, sizeof(msg));
                cmd_finish(c, ev->type == SH_EXEC_EV_EXIT ? ev->exit.code : 125, msg);
                start_failed(c, msg);
        } else if (was == CMD_REFUSED) {
                cmd_finish(c, 125, "the working directory cannot be entered");
        } else if (ev->type == SH_EXEC_EV_EXIT) {
                if (ev->exit.code == 0)
                        cmd_finish(c, 0, NULL);
                else if (c->why[0])
                        cmd_finish(c, ev->exit.code, c->why);
                else if (ev->exit.signal) {
                        snprintf(msg, sizeof(msg), "killed by signal %d", ev->exit.signal);
                        cmd_finish(c, ev->exit.code, msg);
                } else {
                        snprintf(msg, sizeof(msg), "exit status %d", ev->exit.code);
                        cmd_finish(c, ev->exit.code, msg);
                }
        } else {
                cmd_finish(c, -1, c->why[0] ? c->why : ev->error.text);
        }
        if (c->session) {
                st = was == CMD_RUNNING && ev->type == SH_EXEC_EV_EXIT
                             ? os_sse_session_state(&c->sse, &slen)
                             : NULL;
                os_session_run_ended(c->session, c, st, slen);
                c->session = NULL;
        }
        /* Nothing of its output stays with a finished command (a remembered one keeps only its
         * status): the line splitter's buffers, the state, what came before the handshake. */
        os_sse_done(&c->sse);
        sh_buf_done(&c->pre_err);
}

/* The handshake line is in: answer the request. */
static void handshake_done(os_cmd *c)
{
        sh_request *r = c->qs ? sh_queued_stream_request(c->qs) : NULL;
        const char *why = NULL;
        sh_exec_event ev = {.type = SH_EXEC_EV_CHUNK};

        switch (c->hs.result) {
        case OS_HS_OK:
                cmd_ran(c);
                break;
        case OS_HS_NODIR:
                why = "working directory does not exist";
                break;
        case OS_HS_NOTDIR:
                why = "working directory path is not a directory";
                break;
        case OS_HS_NOACCESS:
                why = "cannot access working directory";
                break;
        default:
                cmd_broken(c);
                return;
        }
        if (why) {
                /* As OpenSandbox's execd: a 400 before any stream; the command never ran. */
                cmd_refused(c);
                if (r)
                        os_reply_error(r, 400, OS_BAD_BODY, "%s: %s", why, c->cwd ? c->cwd : "");
                sh_queued_stream_release(TAKE_PTR(c->qs));
                if (c->x)
                        unlink_cmd(c);
                return;
        }
        if (c->background) {
                /* init and execution_complete at once; the command runs on, its output into
                 * the log. */
                if (c->qs) {
                        if (os_sse_complete(sh_queued_stream_queue(c->qs),
                                            os_now_wall_ms() - c->start_ms, os_now_wall_ms()) < 0)
                                log_error("command-oom", c->log_id, "cannot queue an event");
                        reply_stream(c);
                        stream_end(c);
                }
                /* what the shell said before the handshake line, in order */
                if (c->pre_err.len && c->x) {
                        c->x->log_bytes +=
                                sh_ringlog_append(&c->log, os_record_sandbox(c->x->rec),
                                                  c->pre_err.p, c->pre_err.len, c->log_id);
                        enforce_budget(c->x);
                }
                sh_buf_done(&c->pre_err);
                return;
        }
        if (c->qs)
                reply_stream(c);
        /* stderr that raced ahead of the handshake line, now in order */
        if (c->pre_err.len) {
                ev.chunk.stream = SH_EXEC_STDERR;
                ev.chunk.data = c->pre_err.p;
                ev.chunk.len = c->pre_err.len;
                if (c->qs &&
                    os_sse_event(&c->sse, sh_queued_stream_queue(c->qs), &ev, os_now_wall_ms()) < 0)
                        log_error("command-oom", c->log_id, "cannot queue output");
        }
        sh_buf_done(&c->pre_err);
        if (c->qs)
                sh_queued_stream_pushed(c->qs);
}

/* Into its log file (the daemon keeps none of it); a command out of the registry (its
 * sandbox going) keeps nothing more. */
static void background_output(os_cmd *c, const char *p, size_t n)
{
        if (!c->x)
                return;
        c->x->log_bytes +=
                sh_ringlog_append(&c->log, os_record_sandbox(c->x->rec), p, n, c->log_id);
        enforce_budget(c->x);
}

static void on_event(sh_exec *e, const sh_exec_event *ev, void *data)
{
        os_cmd *c = data;
        sh_exec_event sub = *ev;
        size_t used;

        if (ev->type == SH_EXEC_EV_HEARTBEAT)
                return; /* our own ping timer keeps the stream alive */
        if (ev->type == SH_EXEC_EV_CHUNK && c->state == CMD_STARTING) {
                if (ev->chunk.stream == SH_EXEC_STDERR) {
                        if (c->pre_err.len < OS_STREAM_HIGH &&
                            sh_buf_append(&c->pre_err, ev->chunk.data, ev->chunk.len) < 0)
                                log_error("command-oom", c->log_id, "cannot keep output");
                        return;
                }
                /* A background command's one pipe carries stderr too: the shell's own lines
                 * before the handshake's are kept as its stderr would be. */
                used = os_handshake_feed(&c->hs, ev->chunk.data, ev->chunk.len,
                                         c->background ? &c->pre_err : NULL);
                if (c->hs.result == OS_HS_WAIT)
                        return;
                c->refs++; /* handshake_done may unlink it */
                handshake_done(c);
                cmd_unref(c); /* the engine's reference still holds it */
                sub.chunk.data += used;
                sub.chunk.len -= used;
                if (c->state != CMD_RUNNING || sub.chunk.len == 0)
                        return;
        }
        if (ev->type == SH_EXEC_EV_CHUNK && c->state != CMD_RUNNING)
                return; /* a failed start's leftovers */
        if (ev->type == SH_EXEC_EV_CHUNK && c->background) {
                background_output(c, sub.chunk.data, sub.chunk.len);
                return;
        }
        if (ev->type == SH_EXEC_EV_CHUNK) {
                if (!c->qs)
                        return; /* the client left */
                if (os_sse_event(&c->sse, sh_queued_stream_queue(c->qs), &sub, os_now_wall_ms()) <
                    0)
                        log_error("command-oom", c->log_id, "cannot queue output");
                sh_queued_stream_pushed(c->qs); /* past its high mark: paused */
                return;
        }
        /* The end (exit or error). */
        c->refs++;
        if (c->state == CMD_RUNNING && !c->background && c->qs) {
                c->sse.why = c->why[0] ? c->why : NULL;
                if (os_sse_event(&c->sse, sh_queued_stream_queue(c->qs), ev, os_now_wall_ms()) < 0)
                        log_error("command-oom", c->log_id, "cannot queue the last event");
                stream_end(c);
        }
        end_of_run(c, ev);
        sh_exec_detach(TAKE_PTR(c->e)); /* ended: only the reference goes */
        /* The engine's reference goes, then ours: the engine's is never the last (ours still
         * holds it), so it is dropped without a free check (one cmd_unref, after which c is
         * never touched). */
        c->refs--;
        cmd_unref(c);
}

static void on_timeout(sh_loop *l, sh_timer *t, void *data)
{
        os_cmd *c = data;

        c->timeout_t = NULL;
        if (c->state == CMD_FINISHED)
                return;
        /* The whole tree, then the exit (signal 9) ends the stream with an error event. */
        if (!c->why[0])
                snprintf(c->why, sizeof(c->why), "timed out after %" PRIu64 " ms", c->timeout_ms);
        log_info("command-timeout", c->log_id, "killed after %" PRIu64 " ms", c->timeout_ms);
        os_cmd_kill(c, NULL);
}

void os_cmd_kill(os_cmd *c, const char *why)
{
        if (c->state == CMD_FINISHED || !c->e)
                return;
        if (why && !c->why[0])
                snprintf(c->why, sizeof(c->why), "%s", why);
        sh_exec_kill(c->e);
}

int os_cmd_interrupt(os_execd *x, const char *id, size_t len, const char *why)
{
        os_cmd *c = find_cmd(x, id, len);

        if (!c)
                return 0;
        os_cmd_kill(c, why);
        return 1;
}

static void cmd_free(os_cmd *c)
{
        sh_exec_detach(c->e);
        sh_loop_cancel_timer(c->loop, c->timeout_t);
        os_sse_done(&c->sse);
        sh_buf_done(&c->pre_err);
        free(c->content);
        free(c->cwd);
        free(c->error);
        free(c);
}

static void cmd_unref(os_cmd *c)
{
        if (c && --c->refs == 0)
                cmd_free(c);
}

void os_cmd_unref(os_cmd *c)
{
        cmd_unref(c);
}

void os_cmd_forget_session(os_cmd *c)
{
        c->session = NULL;
}

/* ---- starting a run ----------------------------------------------------------------------------- */

void os_run_start(sh_request *r, os_record *rec, const os_run_opts *o)
{
        os_execd *x = os_execd_of(rec);
        sh_sandbox *sb = os_record_sandbox(rec);
        const uint64_t bg_max = rec->ctx->cfg->background_max;
        /* A background command's stdout and stderr share one pipe: one daemon fd while it
         * runs, with no request open (its log keeps them as they come anyway). A streamed one
         * is read OS_STREAM_READ at a time: one chunk of empty lines is an event each, and
         * what it queues before the backpressure sees it stays ~1 MiB. What a background
         * command's pipe gives is billed to its sandbox's read rate: past it the command waits
         * (its pipe fills) for the refill, so the daemon's one thread never spends more than
         * that on one sandbox's background output; a small read costs its syscalls (the read,
         * the log file's open, write and close) whatever its size: OS_LOG_CHARGE_MIN. */
        const sh_exec_opts eo = {.capture_max = 0,
                                 .heartbeat_ms = 0, /* none: our `ping` counts */
                                 .merge_output = o->background,
                                 .read_max = o->background ? 0 : OS_STREAM_READ,
                                 .rate = x && o->background ? x->rate : NULL,
                                 .rate_charge_min = OS_LOG_CHARGE_MIN};
        const char *cwd = o->cwd ? o->cwd : o->first_cwd;
        size_t text_len = strlen(o->text) + (cwd ? strlen(cwd) : 0);
        char *argv[11], name[24];
        sh_error *err = NULL;
        os_cmd *c;
        int k = 0;

        if (!x || !sb) {
                os_reply_error(r, 404, "SANDBOX_NOT_FOUND", "the sandbox was deleted");
                return;
        }
        if (o->background && x->n_running_bg >= bg_max) {
                os_reply_error(r, 503, "UNAVAILABLE",
                               "the sandbox runs %" PRIu64 " background commands already "
                               "(SANDBOX_HOST_BACKGROUND_MAX): wait for one to end",
                               bg_max);
                return;
        }
        if (!o->session && !registry_room(x, text_len)) {
                os_reply_error(r, 503, "UNAVAILABLE",
                               "the sandbox's running commands fill what it remembers (%d "
                               "commands, %u bytes of text): wait for one to end",
                               OS_COMMANDS_MAX, OS_COMMAND_TEXTS_MAX);
                return;
        }
        c = calloc(1, sizeof(*c));
        if (!c || !(c->content = strdup(o->text)) || (cwd && !(c->cwd = strdup(cwd)))) {
                if (c)
                        free(c->content);
                free(c);
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        c->refs = 1; /* ours, until the end of this function */
        c->loop = rec->ctx->loop;
        c->background = o->background;
        c->session = o->session;
        c->timeout_ms = o->timeout_ms;
        c->text_len = text_len;
        c->start_ms = os_now_wall_ms();
        c->sse.start_ms = c->start_ms;
        c->sse.session = o->session != NULL;
        snprintf(c->log_id, sizeof(c->log_id), "%s", rec->id);
        os_uuid(c->id);
        os_nonce(c->hs.nonce);
        memcpy(c->sse.nonce, c->hs.nonce, sizeof(c->sse.nonce));
        /* Its log's file, before it runs: a sandbox whose disk is full is told so now. */
        snprintf(name, sizeof(name), "c-%" PRIu64, x->next_log++);
        if (o->background &&
            sh_ringlog_create(&c->log, sb, name, rec->ctx->cfg->command_log_max, &err) < 0) {
                os_reply_error(r, 500, OS_RUNTIME, "cannot make the command's log: %s",
                               err && err->msg ? err->msg : "");
                sh_error_release(&err);
                cmd_free(c);
                return;
        }
        c->qs = sh_queued_stream_new(r, c->loop, &stream_ops, &stream_opts, c);
        if (!c->qs) {
                sh_ringlog_drop(&c->log, sb, c->log_id);
                cmd_free(c);
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        c->refs++; /* the stream's, dropped by stream_release */
        /* init first, whatever comes after it */
        if (os_sse_text(sh_queued_stream_queue(c->qs), "init", o->init_id ? o->init_id : c->id,
                        strlen(o->init_id ? o->init_id : c->id), c->start_ms) < 0) {
                sh_ringlog_drop(&c->log, sb, c->log_id);
                cmd_finish(c, -1, NULL); /* it never ran: the request's end kills nothing */
                sh_queued_stream_release(TAKE_PTR(c->qs));
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                cmd_unref(c);
                return;
        }
        argv[k++] = "/bin/sh";
        argv[k++] = "-c";
        if (o->session) {
                argv[k++] = (char *)launcher;
                argv[k++] = "sh";
                argv[k++] = (char *)os_session_script;
                argv[k++] = c->hs.nonce;
                argv[k++] = (char *)(o->cwd ? o->cwd : "");
                argv[k++] = (char *)o->text;
                argv[k++] = (char *)(o->state ? o->state : "");
                argv[k++] = (char *)(o->first_cwd ? o->first_cwd : "");
        } else {
                argv[k++] = (char *)wrapper;
                argv[k++] = "sh";
                argv[k++] = c->hs.nonce;
                argv[k++] = (char *)(o->cwd ? o->cwd : "");
                argv[k++] = (char *)o->text;
        }
        argv[k] = NULL;
        /* Same engine as a native exec: the sandbox's uid, namespaces and cgroup, an exec
         * cgroup of its own (the whole tree dies with a kill), stdin /dev/null, the
         * environment: base, the sandbox's, then envs. */
        if (sh_sandbox_exec(sb, argv, o->envs, &eo, on_event, c, &c->e, &err) < 0) {
                char msg[512];

                snprintf(msg, sizeof(msg), "%s", err && err->msg ? err->msg : "cannot start");
                sh_error_release(&err);
                if (c->log.name[0])
                        sh_ringlog_drop(&c->log, sb, c->log_id);
                /* a start failure: init, then the error naming why */
                cmd_finish(c, -1, msg);
                start_failed(c, msg);
                cmd_unref(c);
                return;
        }
        c->refs++; /* the engine's, until its end event */
        if (!o->session) {
                c->x = x;
                c->refs++; /* the registry's */
                SH_LIST_INSERT_AFTER(all, x->cmds, x->cmds_tail, c);
                x->cmds_tail = c;
                x->n_cmds++;
                x->text_bytes += c->text_len;
                if (c->background)
                        x->n_running_bg++; /* until bg_stopped */
        } else {
                c->refs++; /* the session's, until os_session_run_ended */
        }
        if (c->timeout_ms) {
                c->timeout_t = sh_loop_add_timer(c->loop, c->timeout_ms, on_timeout, c);
                if (!c->timeout_t)
                        log_error("command-timeout", c->log_id,
                                  "out of memory: the command's timeout is not armed");
        }
        if (o->session)
                os_session_run_started(o->session, c);
        cmd_unref(c);
}

/* ---- the routes ------------------------------------------------------------------------------- */

/* `field` of body: absent or null is NULL. */
static const cJSON *opt(const cJSON *body, const char *name)
{
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(body, name);

        return f && !cJSON_IsNull(f) ? f : NULL;
}

/* Validates the fields /command and a session's run share. 0, or -1 having answered. */
int os_run_fields(sh_request *r, const cJSON *body, os_run_opts *o)
{
        const cJSON *cmd = opt(body, "command"), *cwd = opt(body, "cwd");
        const cJSON *t = opt(body, "timeout");

        if (!cJSON_IsObject(body)) {
                os_reply_error(r, 400, OS_BAD_BODY, "the body is a JSON object");
                return -1;
        }
        if (!cJSON_IsString(cmd) || !*cmd->valuestring) {
                os_reply_error(r, 400, OS_BAD_BODY, "'command' is a non-empty string");
                return -1;
        }
        /* One argv string of the kernel's (MAX_ARG_STRLEN): a longer one could not be run. */
        if (strlen(cmd->valuestring) > OS_COMMAND_TEXT_MAX) {
                os_reply_error(r, 400, OS_BAD_BODY, "'command' is longer than %u bytes",
                               OS_COMMAND_TEXT_MAX);
                return -1;
        }
        if (cwd && (!cJSON_IsString(cwd) || strlen(cwd->valuestring) > 4096)) {
                os_reply_error(r, 400, OS_BAD_BODY, "'cwd' is a path of at most 4096 bytes");
                return -1;
        }
        if (t && (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble > 9.2e18 ||
                  t->valuedouble != (double)(uint64_t)t->valuedouble)) {
                os_reply_error(r, 400, OS_BAD_BODY, "'timeout' is a number of milliseconds");
                return -1;
        }
        o->text = cmd->valuestring;
        o->cwd = cwd && *cwd->valuestring ? cwd->valuestring : NULL;
        o->timeout_ms = t ? (uint64_t)t->valuedouble : 0;
        return 0;
}

static int judge_ids(sh_request *r, const cJSON *body, const sh_sandbox *sb)
{
        const cJSON *uid = opt(body, "uid"), *gid = opt(body, "gid");
        const sh_fs_owner *own = sh_sandbox_owner(sb);

        if ((uid && !cJSON_IsNumber(uid)) || (gid && !cJSON_IsNumber(gid)) ||
            (uid && (uid->valuedouble < 0 || uid->valuedouble > 4294967295.0)) ||
            (gid && (gid->valuedouble < 0 || gid->valuedouble > 4294967295.0))) {
                os_reply_error(r, 400, OS_BAD_BODY, "'uid' and 'gid' are non-negative integers");
                return -1;
        }
        if (gid && !uid) {
                os_reply_error(r, 400, OS_BAD_BODY, "uid is required when gid is provided");
                return -1;
        }
        /* A sandbox's processes have its one uid and gid: another would need privileges the
         * sandbox never has. */
        if ((uid && (uid_t)uid->valuedouble != own->uid) ||
            (gid && (gid_t)gid->valuedouble != own->gid)) {
                os_reply_error(r, 400, "NOT_SUPPORTED",
                               "commands here run as the sandbox's own uid %u and gid %u only",
                               (unsigned)own->uid, (unsigned)own->gid);
                return -1;
        }
        return 0;
}

static int judge_envs(sh_request *r, const cJSON *envs)
{
        const cJSON *v;

        if (!envs)
                return 0;
        if (!cJSON_IsObject(envs)) {
                os_reply_error(r, 400, OS_BAD_BODY, "'envs' is an object of strings");
                return -1;
        }
        cJSON_ArrayForEach(v, envs)
        {
                if (!cJSON_IsString(v)) {
                        os_reply_error(r, 400, OS_BAD_BODY, "'envs' is an object of strings");
                        return -1;
                }
                if (!*v->string || strchr(v->string, '=')) {
                        os_reply_error(r, 400, OS_BAD_BODY,
                                       "'envs' names are non-empty and hold no '='");
                        return -1;
                }
        }
        return 0;
}

static void api_run(sh_request *r)
{
        os_record *rec = os_request_record(r);
        bool empty;
        cJSON *body = os_json_body(r, OS_BAD_BODY, &empty);
        const cJSON *bg, *envs;
        os_run_opts o = {0};

        if (!body) {
                if (empty)
                        os_reply_error(r, 400, OS_BAD_BODY, "the body is a JSON object");
                return;
        }
        if (os_run_fields(r, body, &o) < 0)
                goto out;
        bg = opt(body, "background");
        envs = opt(body, "envs");
        if (bg && !cJSON_IsBool(bg)) {
                os_reply_error(r, 400, OS_BAD_BODY, "'background' is a boolean");
                goto out;
        }
        if (!os_record_sandbox(rec)) {
                os_reply_error(r, 404, "SANDBOX_NOT_FOUND", "the sandbox was deleted");
                goto out;
        }
        if (judge_ids(r, body, os_record_sandbox(rec)) < 0 || judge_envs(r, envs) < 0)
                goto out;
        o.background = bg && cJSON_IsTrue(bg);
        o.envs = envs;
        os_run_start(r, rec, &o);
out:
        cJSON_Delete(body);
}

static void add_time(cJSON *o, const char *name, uint64_t ms)
{
        char t[32];

        os_time_format(ms, t);
        cJSON_AddStringToObject(o, name, t);
}

static void api_status(sh_request *r)
{
        os_record *rec = os_request_record(r);
        size_t len;
        const char *id = sh_request_param(r, 1, &len);
        os_cmd *c = find_cmd(rec->execd, id, len);
        cJSON *o;

        if (!c) {
                os_reply_error(r, 404, OS_BAD_BODY, "command not found: %.*s",
                               (int)(len > 64 ? 64 : len), id);
                return;
        }
        o = cJSON_CreateObject();
        if (o) {
                cJSON_AddStringToObject(o, "id", c->id);
                cJSON_AddStringToObject(o, "content", c->content);
                cJSON_AddBoolToObject(o, "running", c->state != CMD_FINISHED);
                if (c->state == CMD_FINISHED)
                        cJSON_AddNumberToObject(o, "exit_code", c->exit_code);
                if (c->error)
                        cJSON_AddStringToObject(o, "error", c->error);
                add_time(o, "started_at", c->start_ms);
                if (c->state == CMD_FINISHED)
                        add_time(o, "finished_at", c->finished_ms);
        }
        os_reply_json(r, 200, o);
}

/* A logs answer: the bytes [pos, end) of a command's log, read from its file OS_LOG_STEP at a
 * time as the client takes them (the daemon holds one step, never the log). `end` is decided
 * when the answer starts (its header names it): the log may grow meanwhile, the body stops
 * there. Bytes overwritten before they were sent (a client slower than the command's output
 * past COMMAND_LOG_MAX), or a sandbox deleted meanwhile, cut the connection: a short body,
 * never a wrong one. */
typedef struct log_reader {
        os_cmd *c;      /* a reference */
        os_record *rec; /* a reference: its sandbox, while it lives */
        uint64_t pos, end;
} log_reader;

static ssize_t log_read(void *data, char *out, size_t max)
{
        log_reader *lr = data;
        ssize_t n;

        if (lr->pos >= lr->end)
                return SH_STREAM_END;
        if (max > OS_LOG_STEP)
                max = OS_LOG_STEP;
        if (max > lr->end - lr->pos)
                max = (size_t)(lr->end - lr->pos);
        n = sh_ringlog_read(&lr->c->log, os_record_sandbox(lr->rec), lr->pos, out, max);
        if (n <= 0) {
                log_info("command-logs-cut", lr->c->log_id,
                         "a logs answer ends at %" PRIu64 " of %" PRIu64 ": %s", lr->pos, lr->end,
                         n == -ESTALE ? "overwritten before it was read"
                                      : strerror(n < 0 ? (int)-n : EIO));
                return SH_STREAM_CUT;
        }
        lr->pos += (uint64_t)n;
        return n;
}

static void log_reader_release(void *data)
{
        log_reader *lr = data;

        cmd_unref(lr->c);
        os_record_unref(lr->rec);
        free(lr);
}

static const sh_pending_ops log_ops = {
        .release = log_reader_release,
        .read = log_read,
};

static void api_logs(sh_request *r)
{
        os_record *rec = os_request_record(r);
        size_t len;
        const char *id = sh_request_param(r, 1, &len);
        const sh_query_param *cur = sh_query_find(sh_request_query(r), "cursor");
        os_cmd *c = find_cmd(rec->execd, id, len);
        uint64_t from = 0, end;
        char hdr[32];
        sh_response *resp;
        sh_pending *tok;
        log_reader *lr;

        if (!c) {
                os_reply_error(r, 404, OS_BAD_BODY, "command not found: %.*s",
                               (int)(len > 64 ? 64 : len), id);
                return;
        }
        if (!c->background) {
                os_reply_error(r, 400, OS_BAD_BODY,
                               "command %s is not running in background: its output was its "
                               "stream",
                               c->id);
                return;
        }
        if (cur && cur->val_len &&
            (memchr(cur->val, '\0', cur->val_len) || sh_parse_u64(cur->val, &from) < 0)) {
                os_reply_error(r, 400, OS_BAD_BODY, "'cursor' is a byte offset (an integer >= 0)");
                return;
        }
        /* From the oldest kept byte when the cursor is older; to the end as it is now. */
        end = c->log.total;
        if (from < sh_ringlog_first(&c->log))
                from = sh_ringlog_first(&c->log);
        if (from > end)
                from = end;
        if (from == end) {
                resp = sh_response_buffer(NULL, 0);
        } else {
                lr = calloc(1, sizeof(*lr));
                if (!lr) {
                        os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                        return;
                }
                c->refs++;
                *lr = (log_reader){.c = c, .rec = os_record_ref(rec), .pos = from, .end = end};
                tok = sh_request_wait(r, &log_ops, lr);
                if (!tok) {
                        log_reader_release(lr);
                        os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                        return;
                }
                resp = sh_response_stream(tok, OS_LOG_STEP);
                sh_pending_release(tok); /* the request's and the response's remain */
        }
        if (!resp) {
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        /* The offset after what the body holds: the next poll's cursor. */
        snprintf(hdr, sizeof(hdr), "%" PRIu64, end);
        sh_response_header(resp, "EXECD-COMMANDS-TAIL-CURSOR", hdr);
        sh_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
        sh_response_header(resp, "X-Content-Type-Options", "nosniff");
        sh_reply(r, 200, resp);
}

static void api_interrupt(sh_request *r)
{
        os_record *rec = os_request_record(r);
        const sh_query_param *id = sh_query_find(sh_request_query(r), "id");
        os_execd *x = os_execd_of(rec);

        if (!id || !id->val_len) {
                os_reply_error(r, 400, OS_MISSING, "missing query parameter 'id'");
                return;
        }
        if (x && os_cmd_interrupt(x, id->val, id->val_len, "interrupted") == 1) {
                os_reply_empty(r, 200);
                return;
        }
        if (x && os_session_interrupt(x, id->val, id->val_len) == 1) {
                os_reply_empty(r, 200);
                return;
        }
        os_reply_error(r, 404, OS_BAD_BODY, "no command or session with this id");
}

/* A served execd path asked with another method: 405 (else proxy.c's catch-all, which knows
 * no method, would say the route is not served yet). */
void os_execd_wrong_method(sh_request *r)
{
        os_reply_error(r, 405, "METHOD_NOT_ALLOWED", "%s is not a method of this route",
                       sh_request_method(r));
}

const sh_route os_command_routes[] = {
        {OS_EXECD_PATH "/command", SH_M_POST, &sh_body_buffer, api_run, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/command", SH_M_DELETE, NULL, api_interrupt, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/command", OS_EXECD_METHODS, NULL, os_execd_wrong_method, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/command/status/{}", SH_M_GET, NULL, api_status, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/command/status/{}", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/command/{}/logs", SH_M_GET, NULL, api_logs, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/command/{}/logs", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
};
const size_t os_command_n_routes = ARRAY_SIZE(os_command_routes);
