/* ndjson.c: the native contract's encoding of exec events (CONTRACT.md section 4), pure: a
 * chunk of either stream is {"o": base64} (stdout and stderr interleaved in arrival order), a
 * heartbeat the empty chunk, the exit {"exit", "out", "err"} plus "signal", "oom" and
 * "truncated" when they apply, an error {"error", "detail"} with the contract's type. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sh/base64.h"
#include "sh/native.h"

/* Append `"<key>":"<base64>"` to q. */
static int append_b64(sh_buf *q, const char *key, const void *data, size_t n)
{
        size_t klen = strlen(key);

        if (n > (SIZE_MAX - klen - 8) / 2 || sh_buf_reserve(q, sh_base64_len(n) + klen + 8) < 0)
                return -ENOMEM;
        q->p[q->len++] = '"';
        memcpy(q->p + q->len, key, klen);
        q->len += klen;
        memcpy(q->p + q->len, "\":\"", 3);
        q->len += 3;
        q->len += sh_base64_encode(q->p + q->len, data, n);
        q->p[q->len++] = '"';
        return 0;
}

static int append_str(sh_buf *q, const char *s)
{
        return sh_buf_append(q, s, strlen(s));
}

static int ndjson_chunk(sh_buf *q, const void *data, size_t n)
{
        if (append_str(q, "{") < 0 || append_b64(q, "o", data, n) < 0 || append_str(q, "}\n") < 0)
                return -ENOMEM;
        return 0;
}

static int ndjson_heartbeat(sh_buf *q)
{
        return append_str(q, "{\"o\":\"\"}\n");
}

static int ndjson_exit(sh_buf *q, const sh_exec_exit *x)
{
        char tail[96];

        snprintf(tail, sizeof(tail), "{\"exit\":%d,", x->code);
        if (append_str(q, tail) < 0 || append_b64(q, "out", x->out, x->out_len) < 0 ||
            append_str(q, ",") < 0 || append_b64(q, "err", x->err, x->err_len) < 0)
                return -ENOMEM;
        tail[0] = '\0';
        if (x->signal)
                snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), ",\"signal\":%d",
                         x->signal);
        if (x->oom)
                snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), ",\"oom\":true");
        if (x->truncated)
                snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), ",\"truncated\":true");
        snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), "}\n");
        return append_str(q, tail);
}

static int ndjson_error(sh_buf *q, sh_error_kind kind, const char *text)
{
        cJSON *o = cJSON_CreateObject();
        char *s;
        int r = -ENOMEM;

        if (o && cJSON_AddStringToObject(o, "error", sh_native_type(kind)) &&
            cJSON_AddStringToObject(o, "detail", text ? text : "") &&
            (s = cJSON_PrintUnformatted(o))) {
                r = append_str(q, s) < 0 || append_str(q, "\n") < 0 ? -ENOMEM : 0;
                free(s);
        }
        cJSON_Delete(o);
        return r;
}

int sh_ndjson_event(sh_buf *q, const sh_exec_event *ev)
{
        size_t keep = sh_buf_unread(q); /* growing q may move its unread bytes to the front */
        int r = -EINVAL;

        switch (ev->type) {
        case SH_EXEC_EV_CHUNK:
                r = ndjson_chunk(q, ev->chunk.data, ev->chunk.len);
                break;
        case SH_EXEC_EV_HEARTBEAT:
                r = ndjson_heartbeat(q);
                break;
        case SH_EXEC_EV_EXIT:
                r = ndjson_exit(q, &ev->exit);
                break;
        case SH_EXEC_EV_ERROR:
                r = ndjson_error(q, ev->error.kind, ev->error.text);
                break;
        }
        /* Never half a frame: a client must not see a line that is not one. */
        if (r < 0)
                q->len = q->off + keep;
        return r;
}
