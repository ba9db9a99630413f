/* api_exec.c: POST /sandboxes/{rid}/exec (CONTRACT.md section 4): validation (a plain 400
 * before any stream opens), then a 200 application/x-ndjson stream fed by the exec session:
 * the content reader hands out queued frames, suspends the connection when there are none,
 * and the session resumes it as output arrives. */
#include <string.h>

#include "sh/exec.h"
#include "sh/http.h"
#include "sh/log.h"

SH_CAPABILITY(exec, "exec")
SH_CAPABILITY(exec_stream, "exec.ndjson-stream")
SH_CAPABILITY(exec_oom, "exec.oom-flag")
SH_CAPABILITY(exec_kill_on_disconnect, "exec.kill-on-disconnect")

typedef struct stream {
        unsigned refs; /* the request (hstate) and the response (reader cls) */
        sh_exec *e;
        sh_request *r; /* NULL once the request is gone */
        bool detached;
} stream;

/* Let go of the session (it kills the command if the stream had not ended). Once. */
static void stream_detach(stream *st)
{
        if (!st->detached) {
                st->detached = true;
                sh_exec_detach(st->e);
        }
}

static void stream_unref(stream *st)
{
        if (--st->refs > 0)
                return;
        stream_detach(st);
        free(st);
}

static void on_frames(sh_exec *e, void *data)
{
        stream *st = data;

        if (st->r && st->r->suspended) {
                st->r->suspended = false;
                MHD_resume_connection(st->r->conn);
                sh_server_kick(st->r->srv);
        }
}

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max)
{
        stream *st = cls;
        size_t n = sh_exec_read(st->e, out, max);

        if (n > 0)
                return (ssize_t)n;
        if (sh_exec_done(st->e))
                return MHD_CONTENT_READER_END_OF_STREAM;
        /* Nothing to send yet: suspend (returning 0 without it would spin) until the session
         * queues a frame; a heartbeat comes at least every 5 s. */
        if (st->r && !st->r->suspended) {
                st->r->suspended = true;
                MHD_suspend_connection(st->r->conn);
        }
        return 0;
}

static void response_free(void *cls)
{
        stream_unref(cls);
}

static void request_gone(sh_request *r, bool aborted)
{
        stream *st = r->hstate;

        st->r = NULL;
        /* A client that went away before the exit frame: the session kills the command. */
        stream_detach(st);
        stream_unref(st);
        r->hstate = NULL;
}

static bool strings_only(const cJSON *o)
{
        const cJSON *v;

        cJSON_ArrayForEach(v, o) if (!cJSON_IsString(v)) return false;
        return true;
}

void sh_api_exec(sh_request *r)
{
        cJSON *body = sh_request_json(r), *cmd, *env;
        struct MHD_Response *resp;
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
        if (!st) {
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                goto out;
        }
        st->refs = 2;
        st->r = r;
        if (sh_exec_start(sh_server_manager(r->srv), r->sb, cmd, env, on_frames, st, &st->e, &err) <
            0) {
                free(st);
                sh_reply_error(r, err);
                sh_error_release(&err);
                goto out;
        }
        r->hstate = st;
        r->hstate_free = request_gone;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256 * 1024, reader, st,
                                                 response_free);
        if (!resp) {
                stream_unref(st); /* the response's reference that never was */
                sh_reply_errorf(r, SH_E_INTERNAL, "cannot create the response");
                goto out;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
        MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        sh_reply(r, 200, resp);
out:
        cJSON_Delete(body);
}
