/* api_exec.c: POST /sandboxes/{rid}/exec (CONTRACT.md section 4): validation (a plain 400
 * before any stream opens), then a 200 application/x-ndjson stream fed by the exec session
 * through the transport's queued stream: frames queued as output arrives, handed out as the
 * client reads, the session paused past 1 MiB unread. */
#include <stdio.h>
#include <string.h>

#include "sh/capability.h"
#include "sh/exec.h"
#include "sh/log.h"
#include "sh/native.h"

SH_CAPABILITY(exec, "exec")
SH_CAPABILITY(exec_stream, "exec.ndjson-stream")
SH_CAPABILITY(exec_oom, "exec.oom-flag")
SH_CAPABILITY(exec_kill_on_disconnect, "exec.kill-on-disconnect")

#define HEARTBEAT_MS 4500       /* contract: a frame at least every 5 s */
#define QUEUE_HIGH   (1u << 20) /* pause the session above this much unread NDJSON */

static const sh_queued_stream_opts stream_opts = {
        .high = QUEUE_HIGH, .low = QUEUE_HIGH / 2, .block = 256 * 1024};

/* One exec stream: the session's events, encoded into the request's queued stream until the
 * transport takes them; freed with the stream. */
typedef struct stream {
        sh_exec *e;             /* NULL once detached */
        sh_queued_stream *qs;   /* borrowed: valid while e is attached (gone detaches it) */
        char id[SH_ID_LEN + 1]; /* the sandbox, for log lines */
} stream;

static void on_event(sh_exec *e, const sh_exec_event *ev, void *data)
{
        stream *st = data;

        if (sh_ndjson_event(sh_queued_stream_queue(st->qs), ev) < 0)
                log_error("exec-oom", st->id, "%s",
                          ev->type == SH_EXEC_EV_EXIT    ? "cannot queue the exit frame"
                          : ev->type == SH_EXEC_EV_ERROR ? "cannot queue the error frame"
                                                         : "cannot queue output");
        /* A client that does not read pauses the session (the stream's high mark), whose full
         * pipe then stops the command. Memory never grows with a silent client. */
        sh_queued_stream_pushed(st->qs);
        if (ev->type == SH_EXEC_EV_EXIT || ev->type == SH_EXEC_EV_ERROR)
                sh_queued_stream_end(st->qs);
}

static void stream_backpressure(void *data, bool stop)
{
        stream *st = data;

        if (st->e)
                (stop ? sh_exec_pause : sh_exec_resume)(st->e);
}

/* The request has ended: a client that went away before the last frame has its command
 * killed by the session. */
static void stream_gone(void *data)
{
        stream *st = data;

        sh_exec_detach(TAKE_PTR(st->e));
}

static void stream_release(void *data)
{
        stream *st = data;

        sh_exec_detach(st->e);
        free(st);
}

static const sh_queued_stream_ops stream_ops = {
        .backpressure = stream_backpressure,
        .gone = stream_gone,
        .release = stream_release,
};

static bool strings_only(const cJSON *o)
{
        const cJSON *v;

        cJSON_ArrayForEach(v, o) if (!cJSON_IsString(v)) return false;
        return true;
}

void sh_api_exec(sh_request *r)
{
        cJSON *body = sh_native_json(r), *cmd, *env, *v;
        sh_native_ctx *n = sh_native(r);
        sh_sandbox *sb = sh_native_sandbox(r);
        const sh_exec_opts opts = {
                .capture_max = n->cfg->exec_output_max,
                .heartbeat_ms = HEARTBEAT_MS,
        };
        static const sh_header headers[] = {{"Content-Type", "application/x-ndjson"},
                                            {"X-Content-Type-Options", "nosniff"},
                                            {NULL, NULL}};
        _cleanup_free_ char **argv = NULL;
        sh_error *err = NULL;
        size_t argc = 0;
        stream *st;

        if (!body)
                return;
        cmd = cJSON_GetObjectItemCaseSensitive(body, "cmd");
        env = cJSON_GetObjectItemCaseSensitive(body, "env");
        if (!cJSON_IsArray(cmd) || cJSON_GetArraySize(cmd) == 0 || !strings_only(cmd)) {
                sh_reply_errorf(r, SH_E_INVALID, "'cmd' must be a non-empty list of strings");
                goto out;
        }
        if (cJSON_IsNull(env))
                env = NULL;
        if (env && (!cJSON_IsObject(env) || !strings_only(env))) {
                sh_reply_errorf(r, SH_E_INVALID, "'env' must be an object of strings");
                goto out;
        }
        argv = calloc((size_t)cJSON_GetArraySize(cmd) + 1, sizeof(char *));
        st = argv ? calloc(1, sizeof(*st)) : NULL;
        if (!st || !(st->qs = sh_queued_stream_new(r, n->loop, &stream_ops, &stream_opts, st))) {
                free(st);
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                goto out;
        }
        snprintf(st->id, sizeof(st->id), "%s", sh_sandbox_id(sb));
        cJSON_ArrayForEach(v, cmd) argv[argc++] = v->valuestring; /* borrowed */
        if (sh_sandbox_exec(sb, argv, env, &opts, on_event, st, &st->e, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                sh_queued_stream_release(st->qs);
                goto out;
        }
        if (sh_queued_stream_reply(st->qs, headers) < 0)
                sh_reply_errorf(r, SH_E_INTERNAL, "cannot create the response");
        sh_queued_stream_release(st->qs); /* the request's and the response's remain */
out:
        cJSON_Delete(body);
}
