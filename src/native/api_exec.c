/* api_exec.c: POST /sandboxes/{rid}/exec (CONTRACT.md section 4): validation (a plain 400
 * before any stream opens), then a 200 application/x-ndjson stream fed by the exec session:
 * the stream hands out queued frames, waits when there are none, and the session wakes it as
 * output arrives. */
#include <string.h>

#include "sh/capability.h"
#include "sh/exec.h"
#include "sh/log.h"
#include "sh/native.h"

SH_CAPABILITY(exec, "exec")
SH_CAPABILITY(exec_stream, "exec.ndjson-stream")
SH_CAPABILITY(exec_oom, "exec.oom-flag")
SH_CAPABILITY(exec_kill_on_disconnect, "exec.kill-on-disconnect")

/* One exec stream; freed with its token. */
typedef struct stream {
        sh_exec *e;      /* NULL once detached */
        sh_pending *tok; /* borrowed: valid while e is attached (gone detaches it) */
} stream;

static void on_frames(sh_exec *e, void *data)
{
        stream *st = data;

        sh_pending_wake(st->tok);
}

static ssize_t stream_read(void *data, char *out, size_t max)
{
        stream *st = data;
        size_t n = sh_exec_read(st->e, out, max);

        if (n > 0)
                return (ssize_t)n;
        /* Nothing to send yet: the connection waits until the session queues a frame; a
         * heartbeat comes at least every 5 s. */
        return sh_exec_done(st->e) ? SH_STREAM_END : 0;
}

/* The request has ended: a client that went away before the exit frame has its command
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

static const sh_pending_ops stream_ops = {
        .gone = stream_gone,
        .release = stream_release,
        .read = stream_read,
};

static bool strings_only(const cJSON *o)
{
        const cJSON *v;

        cJSON_ArrayForEach(v, o) if (!cJSON_IsString(v)) return false;
        return true;
}

void sh_api_exec(sh_request *r)
{
        cJSON *body = sh_native_json(r), *cmd, *env;
        sh_response *resp;
        sh_error *err = NULL;
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
        st = calloc(1, sizeof(*st));
        if (!st || !(st->tok = sh_request_wait(r, &stream_ops, st))) {
                free(st);
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                goto out;
        }
        if (sh_exec_start(sh_native(r)->mgr, sh_native_sandbox(r), cmd, env, on_frames, st, &st->e,
                          &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                sh_pending_release(st->tok);
                goto out;
        }
        resp = sh_response_stream(st->tok, 256 * 1024);
        sh_pending_release(st->tok); /* the request's and the response's references remain */
        if (!resp) {
                sh_reply_errorf(r, SH_E_INTERNAL, "cannot create the response");
                goto out;
        }
        sh_response_header(resp, "Content-Type", "application/x-ndjson");
        sh_response_header(resp, "X-Content-Type-Options", "nosniff");
        sh_reply(r, 200, resp);
out:
        cJSON_Delete(body);
}
