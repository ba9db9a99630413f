/* code.c: a sandbox's code interpreter routes (OPENSANDBOX.md section 3.3) over the code
 * service (sh/code.h): POST /code/context (answered once the driver says ready), GET and
 * DELETE /code/contexts[?language=], GET and DELETE /code/contexts/{id}, POST /code (a cell:
 * the SSE stream of section 3.1, with `execution_count`, `result` events, then
 * `execution_complete` or `error`; without a context id, a context of its own for that cell
 * only), DELETE /code?id= (an interrupt). Each sandbox's contexts are its execd state's
 * (rec->execd->code), ended with its record. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execd.h"
#include "sh/code.h"

/* ---- the sandbox's contexts ----------------------------------------------------------------- */

static sh_code_set *set_of(sh_request *r, os_record *rec)
{
        os_execd *x = os_execd_of(rec);
        sh_sandbox *sb = os_record_sandbox(rec);
        const sh_config *cfg = os_ctx_of(r)->cfg;
        sh_code_env env = {
                .loop = os_ctx_of(r)->loop,
                .contexts_max = cfg->code_contexts_max,
                .idle_ms = cfg->code_context_idle_s * 1000,
                .result_max = cfg->code_result_max,
        };

        if (!x || !sb) {
                os_reply_code(r, OS_E_SANDBOX_NOT_FOUND, "the sandbox was deleted");
                return NULL;
        }
        if (!x->code && !(x->code = sh_code_set_new(&env, sb)))
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
        return x->code;
}

void os_code_gone(os_execd *x)
{
        sh_code_set_free(TAKE_PTR(x->code));
}

/* A language asked by name (its sh_code_lang), or answered 400 (-1). By value: a pointer to the
 * caller's variable handed on to sh_code_lang_parse makes the release build's GCC (-O3) see a
 * dangling pointer in a later call (-Wdangling-pointer, a false positive). */
static int lang_of(sh_request *r, const char *name)
{
        for (int i = 0; i < SH_CODE_LANGS; i++)
                if (strcmp(name, sh_code_lang_name((sh_code_lang)i)) == 0)
                        return i;
        os_reply_code(r, OS_E_INVALID_REQUEST,
                      "language '%.64s' is not served: python, javascript or bash", name);
        return -1;
}

static cJSON *context_json(sh_code_ctx *c)
{
        cJSON *o = cJSON_CreateObject();

        if (o &&
            (!cJSON_AddStringToObject(o, "id", sh_code_context_id(c)) ||
             !cJSON_AddStringToObject(o, "language", sh_code_lang_name(sh_code_context_lang(c))))) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

/* The context named by the path (param 1), or NULL having answered 404. */
static sh_code_ctx *context_of(sh_request *r, const char *id, size_t len)
{
        os_record *rec = os_request_record(r);
        os_execd *x = rec->execd;
        sh_code_ctx *c = x ? sh_code_context_find(x->code, id, len) : NULL;

        if (!c)
                os_reply_code(r, OS_E_CONTEXT_NOT_FOUND, "context %.*s not found",
                              (int)(len > 64 ? 64 : len), id ? id : "");
        return c;
}

/* ---- POST /code/context --------------------------------------------------------------------- */

typedef struct create_wait {
        sh_pending *tok;
        sh_code_ctx *c; /* until ready or gone */
} create_wait;

static void create_gone(void *data)
{
        create_wait *w = data;

        if (w->c)
                sh_code_context_cancel(TAKE_PTR(w->c));
}

static void create_release(void *data)
{
        free(data);
}

static const sh_pending_ops create_ops = {.gone = create_gone, .release = create_release};

static void create_ready(sh_code_ctx *c, const sh_error *err, void *data)
{
        create_wait *w = data;
        sh_request *r = sh_pending_request(w->tok);

        w->c = NULL;
        if (r && err)
                os_reply_code(r,
                              sh_error_kind_of(err) == SH_E_INVALID ? OS_E_INVALID_REQUEST
                                                                    : OS_E_RUNTIME,
                              "%s", err->msg ? err->msg : "the context did not start");
        else if (r)
                os_reply_json(r, 200, context_json(c));
        sh_pending_release(TAKE_PTR(w->tok));
}

static void api_create(sh_request *r)
{
        os_record *rec = os_request_record(r);
        bool empty;
        _cleanup_cjson_ cJSON *body = os_json_body(r, os_code_name(OS_E_BAD_BODY), &empty);
        const cJSON *lang = sh_json_opt(body, "language"), *cwd = sh_json_opt(body, "cwd");
        sh_code_set *set = NULL;
        int l;
        sh_error *err = NULL;
        create_wait *w;

        if (!body && !empty)
                return;
        if (!cJSON_IsObject(body) || !cJSON_IsString(lang)) {
                os_reply_code(r, OS_E_BAD_BODY, "the body is {language, cwd?}");
                return;
        }
        if (cwd && !cJSON_IsString(cwd)) {
                os_reply_code(r, OS_E_BAD_BODY, "'cwd' is a string");
                return;
        }
        if ((l = lang_of(r, lang->valuestring)) < 0 || !(set = set_of(r, rec)))
                return;
        w = calloc(1, sizeof(*w));
        if (!w || !(w->tok = sh_request_wait(r, &create_ops, w))) {
                free(w);
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        if (sh_code_context_new(set, (sh_code_lang)l, cwd ? cwd->valuestring : NULL, create_ready,
                                w, &w->c, &err) < 0) {
                os_reply_code(r,
                              sh_error_kind_of(err) == SH_E_INVALID ? OS_E_INVALID_REQUEST
                                                                    : OS_E_RUNTIME,
                              "%s", err && err->msg ? err->msg : "cannot start the context");
                sh_error_release(&err);
                w->c = NULL;
                sh_pending_release(TAKE_PTR(w->tok));
        }
}

/* ---- the contexts ----------------------------------------------------------------------------- */

static void add_one(sh_code_ctx *c, void *data)
{
        cJSON *o = context_json(c);

        if (o)
                cJSON_AddItemToArray(data, o);
}

/* The language query: its language; absent: SH_CODE_LANGS (every one); empty or unknown:
 * answered 400 (-1). */
static int query_lang(sh_request *r)
{
        const sh_query_param *q = sh_query_find(sh_request_query(r), "language");

        return q ? lang_of(r, q->val) : SH_CODE_LANGS;
}

static void api_list(sh_request *r)
{
        os_execd *x = os_request_record(r)->execd;
        cJSON *a;
        int l = query_lang(r);

        if (l < 0)
                return;
        if (!(a = cJSON_CreateArray())) {
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        if (x)
                sh_code_context_list(x->code, l == SH_CODE_LANGS,
                                     l == SH_CODE_LANGS ? SH_CODE_PYTHON : (sh_code_lang)l, add_one,
                                     a);
        os_reply_json(r, 200, a);
}

static void api_delete_lang(sh_request *r)
{
        os_execd *x = os_request_record(r)->execd;
        int l = query_lang(r);

        if (l < 0)
                return;
        if (l == SH_CODE_LANGS) {
                os_reply_code(r, OS_E_MISSING_QUERY, "missing query parameter 'language'");
                return;
        }
        if (x)
                sh_code_context_delete_lang(x->code, (sh_code_lang)l);
        os_reply_empty(r, 200);
}

static void api_get(sh_request *r)
{
        size_t len;
        const char *id = sh_request_param(r, 1, &len);
        sh_code_ctx *c = context_of(r, id, len);

        if (c)
                os_reply_json(r, 200, context_json(c));
}

static void api_delete(sh_request *r)
{
        size_t len;
        const char *id = sh_request_param(r, 1, &len);
        sh_code_ctx *c = context_of(r, id, len);

        if (!c)
                return;
        sh_code_context_delete(c);
        os_reply_empty(r, 200);
}

/* ---- DELETE /code?id= ------------------------------------------------------------------------- */

static void api_interrupt(sh_request *r)
{
        const sh_query_param *id = sh_query_find(sh_request_query(r), "id");
        sh_code_ctx *c;

        if (!id || !id->val_len) {
                os_reply_code(r, OS_E_MISSING_QUERY, "missing query parameter 'id'");
                return;
        }
        if ((c = context_of(r, id->val, id->val_len))) {
                sh_code_interrupt(c);
                os_reply_empty(r, 200);
        }
}

/* ---- POST /code: a cell and its stream ------------------------------------------------------- */

typedef struct os_cell {
        unsigned refs;  /* the stream's, the context's (until the end) */
        sh_code_ctx *c; /* until the end, the client gone */
        bool starting;  /* a context of its own, waiting for ready */
        char *code;     /* kept until it is sent (a context of its own) */
        size_t code_len;
        uint64_t timeout_ms;
        sh_queued_stream *qs; /* ours until the last event or the client gone */
        os_sse sse;
        bool counted; /* its execution_count event sent */
        char log_id[SH_ID_LEN + 1];
} os_cell;

static void cell_unref(os_cell *cell)
{
        if (cell && --cell->refs == 0) {
                os_sse_done(&cell->sse);
                free(cell->code);
                free(cell);
        }
}

static int cell_ping(void *data, sh_buf *q)
{
        return os_sse_text(q, "ping", "pong", 4, os_now_wall_ms());
}

static void cell_backpressure(void *data, bool stop)
{
        os_cell *cell = data;

        if (cell->c && !cell->starting)
                (stop ? sh_code_pause : sh_code_resume)(cell->c);
}

/* The client left: the cell is interrupted, its context killed after the grace unless it
 * stopped (a context of its own: deleted). */
static void cell_gone(void *data)
{
        os_cell *cell = data;
        sh_code_ctx *c = TAKE_PTR(cell->c);

        if (c && cell->starting)
                sh_code_context_cancel(c);
        else if (c)
                sh_code_detach(c);
        if (c)
                cell_unref(cell); /* the context's */
        sh_queued_stream_release(TAKE_PTR(cell->qs));
}

static void cell_release(void *data)
{
        cell_unref(data);
}

static const sh_queued_stream_ops cell_ops = {
        .backpressure = cell_backpressure,
        .keepalive = cell_ping,
        .gone = cell_gone,
        .release = cell_release,
};
static const sh_queued_stream_opts cell_opts = {
        .high = OS_STREAM_HIGH,
        .low = OS_STREAM_HIGH / 2,
        .keepalive_ms = OS_PING_MS,
        .block = 256 * 1024,
};

/* `execution_count` once, before the first result or the end (after the lines). */
static int queue_count(os_cell *cell, sh_buf *q, uint64_t count, uint64_t now)
{
        cJSON *o;
        int r;

        if (os_sse_flush(&cell->sse, q, now) < 0)
                return -ENOMEM;
        if (cell->counted)
                return 0;
        cell->counted = true;
        if (!(o = cJSON_CreateObject()) ||
            !cJSON_AddNumberToObject(o, "execution_count", (double)count)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        r = os_sse_object(q, "execution_count", o, now);
        cJSON_Delete(o);
        return r;
}

static int queue_result(os_cell *cell, sh_buf *q, const sh_code_event *ev, uint64_t now)
{
        cJSON *o = cJSON_CreateObject(), *b = cJSON_Duplicate(ev->bundle, true);
        int r = -ENOMEM;

        if (o && b && cJSON_AddItemToObject(o, "results", b)) {
                b = NULL;
                if (cJSON_AddNumberToObject(o, "execution_count", (double)ev->execution_count))
                        r = os_sse_object(q, "result", o, now);
        }
        cJSON_Delete(b);
        cJSON_Delete(o);
        return r;
}

static int queue_end(sh_buf *q, const sh_code_event *ev, uint64_t now)
{
        cJSON *o, *e, *tb;
        int r = -ENOMEM;

        if (ev->end.how == SH_CODE_END_OK)
                return os_sse_complete(q, ev->end.time_ms, now);
        o = cJSON_CreateObject();
        e = cJSON_AddObjectToObject(o, "error");
        tb = ev->end.traceback ? cJSON_Duplicate(ev->end.traceback, true) : cJSON_CreateArray();
        if (e && tb && cJSON_AddStringToObject(e, "ename", ev->end.ename ? ev->end.ename : "") &&
            cJSON_AddStringToObject(e, "evalue", ev->end.evalue ? ev->end.evalue : "") &&
            cJSON_AddItemToObject(e, "traceback", tb)) {
                tb = NULL;
                r = os_sse_object(q, "error", o, now);
        }
        cJSON_Delete(tb);
        cJSON_Delete(o);
        return r;
}

static void on_cell(sh_code_ctx *c, const sh_code_event *ev, void *data)
{
        os_cell *cell = data;
        sh_buf *q = cell->qs ? sh_queued_stream_queue(cell->qs) : NULL;
        uint64_t now = os_now_wall_ms();
        sh_exec_event chunk = {.type = SH_EXEC_EV_CHUNK};
        int r = 0;

        switch (ev->type) {
        case SH_CODE_EV_OUTPUT:
                chunk.chunk.stream = ev->output.stream ? SH_EXEC_STDERR : SH_EXEC_STDOUT;
                chunk.chunk.data = ev->output.data;
                chunk.chunk.len = ev->output.len;
                if (q)
                        r = os_sse_event(&cell->sse, q, &chunk, now);
                break;
        case SH_CODE_EV_RESULT:
                if (q && (r = queue_count(cell, q, ev->execution_count, now)) == 0)
                        r = queue_result(cell, q, ev, now);
                break;
        case SH_CODE_EV_END:
                if (q && (r = queue_count(cell, q, ev->execution_count, now)) == 0)
                        r = queue_end(q, ev, now);
                break;
        }
        if (r < 0)
                log_error("code-oom", cell->log_id, "cannot queue the cell's events");
        if (ev->type != SH_CODE_EV_END) {
                if (cell->qs)
                        sh_queued_stream_pushed(cell->qs);
                return;
        }
        cell->c = NULL;
        sh_queued_stream_close(TAKE_PTR(cell->qs));
        cell_unref(cell); /* the context's */
}

/* The cell sent to its context: the stream answered (init = the context's id). A refusal
 * (busy, dead) is the request's answer instead. */
static void cell_send(os_cell *cell)
{
        sh_request *r = cell->qs ? sh_queued_stream_request(cell->qs) : NULL;
        sh_code_ctx *c = cell->c;
        const char *id = sh_code_context_id(c);
        sh_error *err = NULL;
        const bool own = cell->starting;

        cell->starting = false;
        if (own)
                sh_code_context_once(c);
        if (sh_code_run(c, cell->code, cell->code_len, cell->timeout_ms, on_cell, cell, &err) < 0) {
                if (r)
                        os_reply_code(r,
                                      sh_error_kind_of(err) == SH_E_BUSY      ? OS_E_INVALID_STATE
                                      : sh_error_kind_of(err) == SH_E_INVALID ? OS_E_INVALID_STATE
                                      : sh_error_kind_of(err) == SH_E_TOO_LARGE
                                              ? OS_E_BODY_TOO_LARGE
                                              : OS_E_RUNTIME,
                                      "%s", err && err->msg ? err->msg : "cannot run the cell");
                sh_error_release(&err);
                if (own)
                        sh_code_context_delete(c);
                cell->c = NULL;
                sh_queued_stream_release(TAKE_PTR(cell->qs));
                cell_unref(cell); /* the context's */
                return;
        }
        free(TAKE_PTR(cell->code));
        if (cell->qs && os_sse_text(sh_queued_stream_queue(cell->qs), "init", id, strlen(id),
                                    os_now_wall_ms()) < 0)
                log_error("code-oom", cell->log_id, "cannot queue the init event");
        if (cell->qs)
                os_reply_event_stream(cell->qs);
}

/* A context of the cell's own is ready (or failed). */
static void cell_ready(sh_code_ctx *c, const sh_error *err, void *data)
{
        os_cell *cell = data;
        sh_request *r = cell->qs ? sh_queued_stream_request(cell->qs) : NULL;

        if (err) {
                if (r)
                        os_reply_code(r,
                                      sh_error_kind_of(err) == SH_E_INVALID ? OS_E_INVALID_REQUEST
                                                                            : OS_E_RUNTIME,
                                      "%s", err->msg ? err->msg : "the context did not start");
                cell->c = NULL;
                sh_queued_stream_release(TAKE_PTR(cell->qs));
                cell_unref(cell);
                return;
        }
        cell_send(cell);
}

static int cell_body(sh_request *r, const cJSON *body, os_cell *cell, const cJSON **ret_ctx)
{
        const cJSON *code = sh_json_opt(body, "code"), *ctx = sh_json_opt(body, "context");
        const cJSON *t = sh_json_opt(body, "timeout");

        if (!cJSON_IsObject(body) || !cJSON_IsString(code)) {
                os_reply_code(r, OS_E_BAD_BODY, "the body is {context?, code, timeout?}");
                return -1;
        }
        if (ctx && !cJSON_IsNull(ctx) && !cJSON_IsObject(ctx)) {
                os_reply_code(r, OS_E_BAD_BODY, "'context' is an object {id?, language?}");
                return -1;
        }
        if (t && (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble > 9.2e18 ||
                  t->valuedouble != (double)(uint64_t)t->valuedouble)) {
                os_reply_code(r, OS_E_BAD_BODY, "'timeout' is a number of milliseconds");
                return -1;
        }
        cell->code_len = strlen(code->valuestring);
        if (!(cell->code = sh_memdup0(code->valuestring, cell->code_len))) {
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return -1;
        }
        cell->timeout_ms = t ? (uint64_t)t->valuedouble : 0;
        *ret_ctx = cJSON_IsObject(ctx) ? ctx : NULL;
        return 0;
}

static void api_run(sh_request *r)
{
        os_record *rec = os_request_record(r);
        bool empty;
        _cleanup_cjson_ cJSON *body = os_json_body(r, os_code_name(OS_E_BAD_BODY), &empty);
        const cJSON *ctx = NULL, *id, *lang;
        os_cell *cell;
        int l = SH_CODE_PYTHON;
        sh_code_set *set = NULL;
        sh_error *err = NULL;

        if (!body && !empty)
                return;
        if (!(cell = calloc(1, sizeof(*cell)))) {
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        cell->refs = 1;
        cell->sse.start_ms = os_now_wall_ms();
        snprintf(cell->log_id, sizeof(cell->log_id), "%s", rec->id);
        if (cell_body(r, body, cell, &ctx) < 0)
                goto out;
        id = sh_json_opt(ctx, "id");
        lang = sh_json_opt(ctx, "language");
        if ((id && !cJSON_IsNull(id) && !cJSON_IsString(id)) ||
            (lang && !cJSON_IsNull(lang) && !cJSON_IsString(lang))) {
                os_reply_code(r, OS_E_BAD_BODY, "'context.id' and 'context.language' are strings");
                goto out;
        }
        if (cJSON_IsString(id) && *id->valuestring) {
                /* a context of the sandbox's: unknown is 404 before any stream */
                if (!(cell->c = context_of(r, id->valuestring, strlen(id->valuestring))))
                        goto out;
        } else if ((cJSON_IsString(lang) && *lang->valuestring &&
                    (l = lang_of(r, lang->valuestring)) < 0) ||
                   !(set = set_of(r, rec))) {
                goto out;
        }
        if (!(cell->qs = sh_queued_stream_new(r, rec->ctx->loop, &cell_ops, &cell_opts, cell))) {
                cell->c = NULL;
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                goto out;
        }
        cell->refs++; /* the stream's */
        cell->refs++; /* the context's, until the cell's end */
        if (cell->c) {
                cell_send(cell);
                goto out;
        }
        /* the stateless form: a context of its own, for this cell only */
        cell->starting = true;
        if (sh_code_context_new(set, (sh_code_lang)l, NULL, cell_ready, cell, &cell->c, &err) < 0) {
                os_reply_code(r,
                              sh_error_kind_of(err) == SH_E_INVALID ? OS_E_INVALID_REQUEST
                                                                    : OS_E_RUNTIME,
                              "%s", err && err->msg ? err->msg : "cannot start the context");
                sh_error_release(&err);
                cell->c = NULL;
                sh_queued_stream_release(TAKE_PTR(cell->qs));
                cell->refs--; /* the context's */
        }
out:
        cell_unref(cell);
}

const sh_route os_code_routes[] = {
        {OS_EXECD_PATH "/code/context", SH_M_POST, &sh_body_buffer, api_create, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/code/context", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/code/contexts", SH_M_GET, NULL, api_list, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/code/contexts", SH_M_DELETE, NULL, api_delete_lang, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/code/contexts", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/code/contexts/{}", SH_M_GET, NULL, api_get, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/code/contexts/{}", SH_M_DELETE, NULL, api_delete, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/code/contexts/{}", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/code", SH_M_POST, &sh_body_buffer, api_run, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/code", SH_M_DELETE, NULL, api_interrupt, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/code", OS_EXECD_METHODS, NULL, os_execd_wrong_method, OS_EXECD_FLAGS},
};
const size_t os_code_n_routes = ARRAY_SIZE(os_code_routes);
