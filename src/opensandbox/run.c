/* run.c: a run of a sandbox's shell (OPENSANDBOX.md section 3.1): a /command (foreground or
 * background) or a session's run, from its start to its end. A command is entered by
 * sandbox-init itself (its working directory, the handshake line, then `bash -c`, `sh -c`
 * without bash: SH_PROTO_EXEC_SHELL); a session's run goes through its fixed script
 * (sessions.c). Both run on the same engine as a native exec (sh_sandbox_exec: its own cgroup,
 * backpressure, the timeout), with no heartbeat of the engine's. Its SSE stream (sse.c
 * encodes) is a queued stream with a `ping` after 3 s of silence; the wrapper's handshake line
 * decides its answer (a 400 for a directory that cannot be entered); a background command
 * answers at once and runs on as the sandbox layer's (sh/bgexec.h: its output in a bounded log
 * of the sandbox's); an interrupt or the client leaving kills its whole tree. Its life is one
 * state (execd.h) changed only by the transitions here. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "execd.h"
#include "sh/random.h"

/* A shell function of the session script: enter the directory $1 (`~` is
 * HOME; made first when $2 is set) or say why not on stdout ("<nonce> nodir", "notdir",
 * "noaccess"; the nonce in $__sh_n) and exit 125. */
#define ENTER                                                                                      \
        "__sh_enter() {\n"                                                                         \
        "__sh_e=$1\n"                                                                              \
        "case $__sh_e in \"~\") __sh_e=$HOME;; \"~/\"*) __sh_e=$HOME/${__sh_e#\"~/\"};; esac\n"    \
        "if [ -n \"$2\" ]; then mkdir -p -- \"$__sh_e\" >/dev/null 2>&1; fi\n"                     \
        "if [ ! -e \"$__sh_e\" ]; then printf '%s nodir\\n' \"$__sh_n\"; exit 125; fi\n"           \
        "if [ ! -d \"$__sh_e\" ]; then printf '%s notdir\\n' \"$__sh_n\"; exit 125; fi\n"          \
        "cd -- \"$__sh_e\" 2>/dev/null || { printf '%s noaccess\\n' \"$__sh_n\"; exit 125; }\n"    \
        "}\n"

/* A session's run, as `bash -c SCRIPT bash NONCE CWD TEXT STATE FIRST` (sessions.c): the state
 * (its output silenced: nothing may come before the handshake line), the first run's directory
 * (made if missing, as OpenSandbox's execd makes it at the create), the run's own directory,
 * the handshake, the command in this same shell (so that `cd` and `export` stay), then the
 * marker, the new state and the end marker, and the command's exit code. */
static const char session_script[] =
        "__sh_n=$1 __sh_d=$2 __sh_c=$3 __sh_s=$4 __sh_f=$5\n"
        "set --\n"
        "if [ -n \"$__sh_s\" ]; then eval \"$__sh_s\" >/dev/null 2>&1; fi\n" ENTER
        "if [ -n \"$__sh_f\" ]; then __sh_enter \"$__sh_f\" mkdir; fi\n"
        "if [ -n \"$__sh_d\" ]; then __sh_enter \"$__sh_d\"; fi\n"
        "unset -f __sh_enter; unset __sh_d __sh_s __sh_f __sh_e\n"
        "printf '%s ok\\n' \"$__sh_n\"\n"
        "eval \"$__sh_c\"\n"
        "__sh_rc=$?\n"
        "__sh_q= __sh_r=$PWD\n"
        "while :; do case $__sh_r in *\\'*) __sh_q=$__sh_q${__sh_r%%\\'*}\"'\\\\''\"; "
        "__sh_r=${__sh_r#*\\'};; *) __sh_q=$__sh_q$__sh_r; break;; esac; done\n"
        "printf '\\n%s\\n' \"$__sh_n\"\n"
        "printf \"cd -- '%s'\\n\" \"$__sh_q\"\n"
        "export -p\n"
        "printf '%s.\\n' \"$__sh_n\"\n"
        "exit \"$__sh_rc\"\n";

/* ... started by `/bin/sh -c LAUNCHER sh SCRIPT NONCE CWD TEXT STATE FIRST`: in bash (sh
 * without). */
static const char launcher[] = "s=$1; shift\n"
                               "if command -v bash >/dev/null 2>&1; then exec bash -c \"$s\" bash "
                               "\"$@\"; fi\n"
                               "exec sh -c \"$s\" sh \"$@\"\n";

#define ERROR_MAX 511 /* the text of a command's `error` kept (its registry's budget) */

/* ---- the stream -------------------------------------------------------------------------------- */

/* `ping` after every 3 s of silence: harmless to the client, and the write that tells us a
 * vanished client is gone. */
static int stream_ping(void *data, sh_buf *q)
{
        return os_sse_text(q, "ping", "pong", 4, os_now_wall_ms());
}

/* A client that does not read stops the command, never the daemon's memory. */
static void stream_backpressure(void *data, bool stop)
{
        os_cmd *c = data;

        if (c->e)
                (stop ? sh_exec_pause : sh_exec_resume)(c->e);
}

/* The request has ended. A foreground command whose client left before its last event dies
 * with its whole tree (its exit still comes, for its status; nobody reads any more, so the
 * stream lets its pipes drain to their end); a background one runs on. */
static void stream_gone(void *data)
{
        os_cmd *c = data;

        if (!c->bg)
                os_cmd_kill(c, "the client went away");
        sh_queued_stream_release(TAKE_PTR(c->qs));
}

static void stream_release(void *data)
{
        os_cmd_unref(data);
}

static const sh_queued_stream_ops stream_ops = {
        .backpressure = stream_backpressure,
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

/* ev into the stream, if its client is still there. */
static void queue(os_cmd *c, const sh_exec_event *ev)
{
        if (c->qs && os_sse_event(&c->sse, sh_queued_stream_queue(c->qs), ev, os_now_wall_ms()) < 0)
                log_error("command-oom", c->log_id, "cannot queue output");
}

/* ---- the command's life: its transitions -------------------------------------------------------- */

/* STARTING -> BROKEN: what came first is not the handshake line (a session's: the image's shell
 * is no shell). Killed; its end explains. */
static void cmd_broken(os_cmd *c)
{
        c->state = CMD_BROKEN;
        os_cmd_kill(c, "the shell did not start as a shell");
}

/* Any -> FINISHED, once: its exit code and error (its first ERROR_MAX bytes, valid JSON text:
 * it may quote the sandbox's own bytes, a start failure's stderr), its finish time. */
static void cmd_finish(os_cmd *c, int code, const char *error)
{
        if (c->state == CMD_FINISHED)
                return;
        c->state = CMD_FINISHED;
        c->finished_ms = os_now_wall_ms();
        c->exit_code = code;
        free(c->error);
        c->error = error && *error ? sh_memdup0(error, strnlen(error, ERROR_MAX)) : NULL;
        if (c->error)
                sh_utf8_sanitize(c->error);
}

/* ---- its end ----------------------------------------------------------------------------------- */

/* It never ran (no handshake before its end): a start failure, its evalue the message. The
 * stream is answered now (its answer waited for the handshake). */
static void start_failed(os_cmd *c, const char *msg)
{
        c->sse.ended = true;
        if (!c->qs)
                return;
        if (os_sse_error(sh_queued_stream_queue(c->qs), msg, msg, os_now_wall_ms()) < 0)
                log_error("command-oom", c->log_id, "cannot queue the error event");
        os_reply_event_stream(c->qs);
        sh_queued_stream_close(TAKE_PTR(c->qs));
}

static void end_of_run(os_cmd *c, const sh_exec_event *ev)
{
        const cmd_state was = c->state;
        const bool exited = ev->type == SH_EXEC_EV_EXIT;
        size_t slen = 0;
        char msg[512];

        if (was == CMD_STARTING || was == CMD_BROKEN) {
                sh_exec_failure_text(ev, c->pre_err.p, c->pre_err.len, msg, sizeof(msg));
                cmd_finish(c, exited ? ev->exit.code : 125, msg);
                start_failed(c, msg);
        } else if (was == CMD_REFUSED) {
                cmd_finish(c, 125, "the working directory cannot be entered");
        } else if (exited) {
                sh_exec_exit_text(&ev->exit, ev->why, msg, sizeof(msg));
                cmd_finish(c, ev->exit.code, ev->exit.code ? msg : NULL);
        } else {
                cmd_finish(c, -1, ev->why ? ev->why : ev->error.text);
        }
        if (c->session) {
                const char *st =
                        was == CMD_RUNNING && exited ? os_sse_session_state(&c->sse, &slen) : NULL;

                os_session_run_ended(TAKE_PTR(c->session), c, st, slen);
        }
        /* Nothing of its output stays with a finished command (a remembered one keeps only its
         * status): the line splitter's buffers, the state, what came before the handshake. */
        os_sse_done(&c->sse);
        sh_buf_done(&c->pre_err);
}

/* ---- the handshake ----------------------------------------------------------------------------- */

/* The handshake line is in: answer the request. */
static void handshake_done(os_cmd *c)
{
        static const char *const refused[] = {
                [OS_HS_NODIR] = "working directory does not exist",
                [OS_HS_NOTDIR] = "working directory path is not a directory",
                [OS_HS_NOACCESS] = "cannot access working directory",
        };
        sh_request *r = c->qs ? sh_queued_stream_request(c->qs) : NULL;
        sh_exec_event ev = {.type = SH_EXEC_EV_CHUNK};

        if (c->hs.result == OS_HS_BAD) {
                cmd_broken(c);
                return;
        }
        if (c->hs.result != OS_HS_OK) {
                /* As OpenSandbox's execd: a 400 before any stream; the command never ran (its
                 * wrapper's exit is still awaited). */
                c->state = CMD_REFUSED;
                if (r)
                        os_reply_code(r, OS_E_BAD_BODY, "%s: %s", refused[c->hs.result],
                                      c->cwd ? c->cwd : "");
                sh_queued_stream_release(TAKE_PTR(c->qs));
                if (c->x)
                        os_cmd_unlink(c);
                return;
        }
        c->state = CMD_RUNNING;
        if (c->bg) {
                /* init and execution_complete at once; the command runs on, its output into
                 * its log, after what the shell said before the handshake line */
                if (c->qs && os_sse_complete(sh_queued_stream_queue(c->qs),
                                             os_now_wall_ms() - c->start_ms, os_now_wall_ms()) < 0)
                        log_error("command-oom", c->log_id, "cannot queue an event");
                sh_bgexec_append(c->bg, c->pre_err.p, c->pre_err.len);
                sh_bgexec_unhold(c->bg);
        } else if (c->pre_err.len) {
                /* stderr that raced ahead of the handshake line, now in order */
                ev.chunk.stream = SH_EXEC_STDERR;
                ev.chunk.data = c->pre_err.p;
                ev.chunk.len = c->pre_err.len;
                queue(c, &ev);
        }
        sh_buf_done(&c->pre_err);
        if (!c->qs)
                return;
        os_reply_event_stream(c->qs);
        if (c->bg)
                sh_queued_stream_close(TAKE_PTR(c->qs));
        else
                sh_queued_stream_pushed(c->qs);
}

/* Output before the handshake: its stdout to the handshake (a background command's one pipe
 * carries stderr too: the shell's own lines before the handshake's are kept as its stderr
 * would be), its stderr kept. Returns how many bytes of the chunk were taken. */
static size_t before_handshake(os_cmd *c, const sh_exec_event *ev)
{
        size_t used;

        if (ev->chunk.stream == SH_EXEC_STDERR) {
                if (c->pre_err.len < OS_STREAM_HIGH &&
                    sh_buf_append(&c->pre_err, ev->chunk.data, ev->chunk.len) < 0)
                        log_error("command-oom", c->log_id, "cannot keep output");
                return ev->chunk.len;
        }
        used = os_handshake_feed(&c->hs, ev->chunk.data, ev->chunk.len, c->bg ? &c->pre_err : NULL);
        if (c->hs.result != OS_HS_WAIT) {
                /* handshake_done may unlink it: the engine's reference still holds it, so ours
                 * is dropped without a free check (gcc -O3 would see a free before c's use) */
                c->refs++;
                handshake_done(c);
                c->refs--;
        }
        return used;
}

/* ---- the engine's events ----------------------------------------------------------------------- */

/* A streamed run's events, or a background command's (its output until its log takes it, its
 * end). */
static void on_event(sh_exec *e, const sh_exec_event *ev, void *data)
{
        os_cmd *c = data;
        sh_exec_event sub = *ev;

        if (ev->type == SH_EXEC_EV_HEARTBEAT)
                return; /* our own ping timer keeps the stream alive */
        if (ev->type == SH_EXEC_EV_CHUNK) {
                if (c->state == CMD_STARTING) {
                        size_t used = before_handshake(c, ev);

                        sub.chunk.data += used;
                        sub.chunk.len -= used;
                }
                if (c->state != CMD_RUNNING || !sub.chunk.len)
                        return; /* the handshake's, or a failed start's leftovers */
                if (c->bg) {
                        sh_bgexec_append(c->bg, sub.chunk.data, sub.chunk.len);
                } else if (c->qs) {
                        size_t before = sh_buf_unread(sh_queued_stream_queue(c->qs));

                        queue(c, &sub);
                        /* the next read's size from what this one's events came to */
                        sh_exec_set_read_max(
                                e, sh_buf_unread(sh_queued_stream_queue(c->qs)) - before >
                                                   (size_t)OS_STREAM_GROWTH * sub.chunk.len
                                           ? OS_STREAM_READ_MIN
                                           : OS_STREAM_READ);
                        sh_queued_stream_pushed(c->qs); /* past its high mark: paused */
                }
                return;
        }
        /* The end (exit or error). */
        c->refs++;
        if (c->state == CMD_RUNNING && !c->bg && c->qs) {
                queue(c, ev);
                sh_queued_stream_close(TAKE_PTR(c->qs));
        }
        end_of_run(c, ev);
        sh_exec_detach(TAKE_PTR(c->e)); /* ended: only the reference goes */
        /* The engine's reference goes, then ours: the engine's is never the last (ours still
         * holds it), so it is dropped without a free check (one os_cmd_unref, after which c is
         * never touched). */
        c->refs--;
        os_cmd_unref(c);
}

/* ---- the command ------------------------------------------------------------------------------- */

/* The whole tree; its end (signal 9) says why (sh_exec_kill). Nothing once it ended. */
void os_cmd_kill(os_cmd *c, const char *why)
{
        if (c->bg)
                sh_bgexec_kill(c->bg, why);
        else
                sh_exec_kill(c->e, why);
}

static void cmd_free(os_cmd *c)
{
        sh_exec_detach(c->e);
        sh_bgexec_free(c->bg);
        os_sse_done(&c->sse);
        sh_buf_done(&c->pre_err);
        free(c->content);
        free(c->cwd);
        free(c->error);
        free(c);
}

void os_cmd_unref(os_cmd *c)
{
        if (c && --c->refs == 0)
                cmd_free(c);
}

/* ---- starting a run ----------------------------------------------------------------------------- */

/* A new command of rec for o, not started, under the bounds of what the sandbox remembers and
 * runs (a background command's log made: sh_bgexec_new). NULL having answered r. */
static os_cmd *cmd_new(sh_request *r, os_record *rec, os_execd *x, const os_run_opts *o)
{
        const char *cwd = o->cwd ? o->cwd : o->first_cwd;
        os_cmd *c = calloc(1, sizeof(*c));
        sh_error *err = NULL;

        if (!c || !(c->content = strdup(o->text)) || (cwd && !(c->cwd = strdup(cwd)))) {
                if (c)
                        free(c->content);
                free(c);
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return NULL;
        }
        c->refs = 1;
        c->text_len = strlen(o->text) + (cwd ? strlen(cwd) : 0);
        /* A background command: the sandbox's, under its bounds, its log made now (a sandbox
         * whose disk is full is told so at once); its output ours until the handshake's. */
        if (o->background &&
            sh_bgexec_new(os_record_sandbox(rec),
                          &(sh_bgexec_opts){
                                  .timeout_ms = o->timeout_ms, .hold = true, .shell = !o->session},
                          &c->bg, &err) < 0) {
                if (sh_error_kind_of(err) == SH_E_UNAVAILABLE)
                        os_reply_code(r, OS_E_UNAVAILABLE, "%s", err->msg);
                else
                        os_reply_code(r, OS_E_RUNTIME, "cannot make the command's log: %s",
                                      err && err->msg ? err->msg : "");
                sh_error_release(&err);
                cmd_free(c);
                return NULL;
        }
        if (!o->session && !os_cmd_room(x, c->text_len)) {
                os_reply_code(r, OS_E_UNAVAILABLE,
                              "the sandbox's running commands fill what it remembers (%d "
                              "commands, %u bytes of text): wait for one to end",
                              OS_COMMANDS_MAX, OS_COMMAND_TEXTS_MAX);
                cmd_free(c);
                return NULL;
        }
        c->session = o->session;
        c->start_ms = c->sse.start_ms = os_now_wall_ms();
        c->sse.session = o->session != NULL;
        snprintf(c->log_id, sizeof(c->log_id), "%s", rec->id);
        if (sh_random_uuid(c->id) < 0 || sh_random_hex(c->hs.nonce, OS_NONCE_LEN / 2) < 0) {
                os_reply_code(r, OS_E_RUNTIME, "cannot draw the command's id: %s", strerror(errno));
                cmd_free(c);
                return NULL;
        }
        memcpy(c->sse.nonce, c->hs.nonce, sizeof(c->sse.nonce));
        return c;
}

/* Run it: a session's script through the launcher, or the command through the wrapper. Same
 * engine as a native exec: the sandbox's uid, namespaces and cgroup, an exec cgroup of its own
 * (the whole tree dies with a kill), stdin /dev/null, the environment: base, the sandbox's,
 * then envs. */
static int cmd_start(os_cmd *c, sh_sandbox *sb, const os_run_opts *o, sh_error **err)
{
        char *cwd = (char *)(o->cwd ? o->cwd : ""), *text = (char *)o->text;
        char *state = (char *)(o->state ? o->state : "");
        char *first = (char *)(o->first_cwd ? o->first_cwd : "");
        char *script = (char *)session_script, *nonce = c->hs.nonce;
        char *const session[] = {
                "/bin/sh", "-c", (char *)launcher, "sh", script, nonce, cwd, text, state,
                first,     NULL};
        /* A command: sandbox-init enters its directory and says so (the handshake) itself,
         * then becomes `bash -c TEXT` (SH_PROTO_EXEC_SHELL): one execve less than a shell
         * wrapper, and the same lines. */
        char *const command[] = {nonce, cwd, text, NULL};
        char *const *argv = o->session ? session : command;
        /* A streamed run is read OS_STREAM_READ_MIN at a time at first, then as on_event says
         * (execd.h): one chunk of empty lines is an event each, and what one read queues
         * before the backpressure sees it stays bounded. No heartbeat: our `ping` counts. */
        const sh_exec_opts eo = {
                .timeout_ms = o->timeout_ms, .read_max = OS_STREAM_READ, .shell = !o->session};

        if (c->bg)
                return sh_bgexec_start(c->bg, argv, o->envs, on_event, c, err);
        if (sh_sandbox_exec(sb, argv, o->envs, &eo, on_event, c, &c->e, err) < 0)
                return -1;
        sh_exec_set_read_max(c->e, OS_STREAM_READ_MIN);
        return 0;
}

void os_run_start(sh_request *r, os_record *rec, const os_run_opts *o)
{
        os_execd *x = os_execd_of(rec);
        sh_sandbox *sb = os_record_sandbox(rec);
        const char *init;
        sh_error *err = NULL;
        char msg[512];
        os_run_opts own;
        os_cmd *c;

        if (!x || !sb) {
                os_reply_code(r, OS_E_SANDBOX_NOT_FOUND, "the sandbox was deleted");
                return;
        }
        /* A command that names no cwd starts in its image's WorkingDir, when it has one (a
         * session's runs keep the session's). */
        if (!o->cwd && !o->session && sh_sandbox_workdir(sb)) {
                own = *o;
                own.cwd = sh_sandbox_workdir(sb);
                o = &own;
        }
        if (!(c = cmd_new(r, rec, x, o)))
                return;
        c->qs = sh_queued_stream_new(r, rec->ctx->loop, &stream_ops, &stream_opts, c);
        if (!c->qs) {
                cmd_free(c);
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        c->refs++; /* the stream's, dropped by stream_release */
        /* init first, whatever comes after it */
        init = o->init_id ? o->init_id : c->id;
        if (os_sse_text(sh_queued_stream_queue(c->qs), "init", init, strlen(init), c->start_ms) <
            0) {
                cmd_finish(c, -1, NULL); /* it never ran: the request's end kills nothing */
                sh_queued_stream_release(TAKE_PTR(c->qs));
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                os_cmd_unref(c);
                return;
        }
        if (cmd_start(c, sb, o, &err) < 0) {
                /* a start failure: init, then the error naming why */
                snprintf(msg, sizeof(msg), "%s", err && err->msg ? err->msg : "cannot start");
                sh_error_release(&err);
                cmd_finish(c, -1, msg);
                start_failed(c, msg);
                os_cmd_unref(c);
                return;
        }
        c->refs++; /* the engine's, until its end event */
        if (o->session)
                os_session_run_started(o->session, c);
        else
                os_cmd_link(x, c);
        os_cmd_unref(c);
}
