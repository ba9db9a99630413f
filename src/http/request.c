/* request.c: one request as the surfaces see it: accessors, the in-memory body sink, and the
 * responses and replies (errors go through the request's surface, which decides their
 * shape). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "http-internal.h"
#include "sh/range.h"
#include "sh/log.h"

/* ---- accessors -------------------------------------------------------------------------- */

sh_server *sh_request_server(const sh_request *r)
{
        return r->srv;
}

void *sh_request_ctx(const sh_request *r)
{
        return r->surface ? r->surface->ctx : NULL;
}

const sh_route *sh_request_route(const sh_request *r)
{
        return r->route;
}

const char *sh_request_method(const sh_request *r)
{
        return r->method;
}

unsigned sh_request_method_id(const sh_request *r)
{
        return r->m;
}

const char *sh_request_path(const sh_request *r)
{
        return r->path ? r->path : r->uri;
}

const sh_query *sh_request_query(const sh_request *r)
{
        return &r->query;
}

const char *sh_request_param(const sh_request *r, unsigned i, size_t *len)
{
        if (i >= r->params.n) {
                *len = 0;
                return NULL;
        }
        *len = r->params.len[i];
        return r->params.p[i];
}

const char *sh_request_header(const sh_request *r, const char *name)
{
        return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

bool sh_request_declared_over(const sh_request *r, uint64_t max)
{
        const char *cl = sh_request_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
        uint64_t n;

        return cl && sh_parse_u64(cl, &n) == 0 && n > max;
}

const char *sh_request_target(const sh_request *r)
{
        const char *p = strstr(r->uri, "://");

        if (r->uri[0] != '/' && p) { /* absolute form: its path */
                p = strchr(p + 3, '/');
                return p ? p : "/";
        }
        return r->uri;
}

struct fields_walk {
        sh_request_field_fn fn;
        void *data;
};

static enum MHD_Result field_walk(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
        struct fields_walk *w = cls;

        return w->fn(w->data, key ? key : "", value ? value : "") ? MHD_YES : MHD_NO;
}

void sh_request_fields(const sh_request *r, sh_request_field_fn fn, void *data)
{
        struct fields_walk w = {.fn = fn, .data = data};

        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, field_walk, &w);
}

sh_body_kind sh_request_body_kind(const sh_request *r, uint64_t *len)
{
        const char *cl = sh_request_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);

        *len = 0;
        if (sh_request_header(r, MHD_HTTP_HEADER_TRANSFER_ENCODING))
                return SH_BODY_CHUNKED; /* the framing check let only "chunked" through */
        if (cl && sh_parse_u64(cl, len) == 0)
                return SH_BODY_LENGTH;
        return SH_BODY_NONE;
}

void sh_request_set_log_id(sh_request *r, const char *id)
{
        r->log_id = id;
}

const char *sh_request_log_id(const sh_request *r)
{
        return r->log_id;
}

void sh_request_set_local(sh_request *r, void *p)
{
        r->local = p;
}

void *sh_request_local(const sh_request *r)
{
        return r->local;
}

void *sh_request_sink_state(const sh_request *r)
{
        return r->sink_state;
}

bool sh_request_answered(const sh_request *r)
{
        return r->responded;
}

/* ---- the in-memory body ----------------------------------------------------------------- */

typedef struct body_buffer {
        sh_buf b;
        bool too_large;
} body_buffer;

static int buffer_begin(sh_request *r, void **state)
{
        body_buffer *bb;

        if (sh_request_declared_over(r, SH_BODY_BUFFER_MAX)) {
                sh_reply_errorf(r, SH_E_TOO_LARGE, "request body too large");
                return -1;
        }
        bb = calloc(1, sizeof(*bb));
        if (!bb) {
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return -1;
        }
        *state = bb;
        return 0;
}

static int buffer_data(sh_request *r, void *state, const char *p, size_t n)
{
        body_buffer *bb = state;

        /* one byte more for the terminator cJSON's error paths rely on */
        if (n > SH_BODY_BUFFER_MAX - bb->b.len || sh_buf_reserve(&bb->b, n + 1) < 0) {
                bb->too_large = true;
                return -1;
        }
        sh_buf_append(&bb->b, p, n);
        bb->b.p[bb->b.len] = '\0';
        return 0;
}

static int buffer_end(sh_request *r, void *state)
{
        body_buffer *bb = state;

        if (bb->too_large) {
                sh_reply_errorf(r, SH_E_TOO_LARGE, "request body too large");
                return -1;
        }
        return 0;
}

static void buffer_abort(sh_request *r, void *state)
{
        body_buffer *bb = state;

        sh_buf_done(&bb->b);
        free(bb);
}

const sh_body_sink sh_body_buffer = {
        .begin = buffer_begin,
        .data = buffer_data,
        .end = buffer_end,
        .abort = buffer_abort,
};

char *sh_request_body(sh_request *r, size_t *len)
{
        body_buffer *bb = r->sink == &sh_body_buffer ? r->sink_state : NULL;

        *len = bb ? bb->b.len : 0;
        if (!bb)
                return NULL;
        return bb->b.p ? bb->b.p : (char *)"";
}

/* ---- responses -------------------------------------------------------------------------- */

sh_response *sh_response_json(cJSON *body)
{
        char *text = body ? cJSON_PrintUnformatted(body) : NULL;
        struct MHD_Response *resp;

        cJSON_Delete(body);
        if (!text)
                return NULL;
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return NULL;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        return resp;
}

sh_response *sh_response_empty(void)
{
        return MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
}

sh_response *sh_response_buffer(char *p, size_t n)
{
        struct MHD_Response *resp;

        if (n == 0) {
                free(p);
                return sh_response_empty();
        }
        resp = MHD_create_response_from_buffer(n, p, MHD_RESPMEM_MUST_FREE);
        if (!resp)
                free(p);
        return resp;
}

sh_response *sh_response_fd(sh_request *r, int fd, uint64_t size)
{
        return sh_response_fd_at(r, fd, 0, size);
}

sh_response *sh_response_fd_at(sh_request *r, int fd, uint64_t offset, uint64_t size)
{
        /* MHD sends it with sendfile(2) and closes fd when the response is destroyed, after
         * the request's completion: the fd is the file's as long as r lives. */
        struct MHD_Response *resp = MHD_create_response_from_fd_at_offset64(size, fd, offset);

        if (!resp) {
                close(fd);
                return NULL;
        }
        /* watched once it is r's answer (sh_reply) */
        r->file = (sh_http_file){.resp = resp, .fd = fd, .end = offset + size};
        return resp;
}

int sh_response_header(sh_response *resp, const char *name, const char *value)
{
        return resp && MHD_add_response_header(resp, name, value) == MHD_YES ? 0 : -1;
}

void sh_response_free(sh_response *resp)
{
        if (resp)
                MHD_destroy_response(resp);
}

int sh_reply_file(sh_request *r, int fd, uint64_t size, const char *type, const char *name,
                  char *cr)
{
        const char *range = sh_request_header(r, "Range");
        uint64_t from = 0, to = 0;
        int rr = range ? sh_range_parse(range, size, &from, &to) : 0;
        sh_response *resp;
        char *disp;

        sh_range_header(cr, SH_RANGE_HEADER_MAX, rr == 1, from, to, size);
        if (rr < 0) {
                close(fd);
                return -1;
        }
        /* sent from the very inode given, with sendfile: memory does not grow */
        resp = rr == 1 ? sh_response_fd_at(r, fd, from, to - from + 1)
                       : sh_response_fd(r, fd, size);
        if (resp && rr == 1)
                sh_response_header(resp, "Content-Range", cr);
        if (resp) {
                sh_response_header(resp, "Content-Type", type);
                sh_response_header(resp, "Accept-Ranges", "bytes");
                if ((disp = sh_content_disposition(name)))
                        sh_response_header(resp, "Content-Disposition", disp);
                free(disp);
        }
        sh_reply(r, rr == 1 ? 206 : 200, resp);
        return 0;
}

/* ---- replies ---------------------------------------------------------------------------- */

void sh_reply(sh_request *r, unsigned status, sh_response *resp)
{
        if (r->responded) { /* a bug: answer once; keep the first */
                if (resp)
                        MHD_destroy_response(resp);
                return;
        }
        r->responded = true;
        r->status = (int)status;
        if (resp && resp == r->file.resp)
                sh_http_watch_file(r);
        r->file.resp = NULL;
        if (!resp) {
                r->status = 500;
                r->no_response = true;
                sh_http_resume(r);
                return;
        }
        if (r->close)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        if (r->surface && r->surface->decorate)
                r->surface->decorate(r, resp);
        if (r->in_handler) {
                if (MHD_queue_response(r->conn, status, resp) != MHD_YES)
                        log_warn("queue-failed", r->log_id, "cannot queue a %u response", status);
                MHD_destroy_response(resp);
                return;
        }
        r->pending = resp;
        r->pending_status = status;
        sh_http_resume(r);
}

void sh_reply_json(sh_request *r, unsigned status, cJSON *body)
{
        sh_reply(r, status, sh_response_json(body));
}

void sh_reply_empty(sh_request *r, unsigned status)
{
        sh_reply(r, status, sh_response_empty());
}

sh_response *sh_response_empty_sized(unsigned status)
{
        sh_response *resp = sh_response_empty();

        /* MHD refuses a Content-Length set by hand unless told to allow it; it then sends the
         * one given. Only where it would send none: elsewhere that would be a second copy. */
        if (resp && status == MHD_HTTP_NO_CONTENT) {
#if MHD_VERSION >= 0x00096702
                if (MHD_set_response_options(resp, MHD_RF_INSANITY_HEADER_CONTENT_LENGTH,
                                             MHD_RO_END) != MHD_YES ||
                    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_LENGTH, "0") != MHD_YES)
                        log_warn("response-header", NULL,
                                 "cannot add Content-Length to an empty %u, ignoring", status);
#endif
        }
        return resp;
}

void sh_reply_empty_sized(sh_request *r, unsigned status)
{
        sh_reply(r, status, sh_response_empty_sized(status));
}

void sh_http_reply_error(sh_request *r, const sh_error *err, bool log, const char *allow)
{
        unsigned status = 500;
        sh_response *resp =
                r->surface && r->surface->error ? r->surface->error(r, err, &status) : NULL;

        if (log && status >= 500)
                log_error("request-failed", r->log_id, "%s %s: %s", r->method,
                          r->path ? r->path : "", err && err->msg ? err->msg : "");
        /* RFC 9110 15.5.6: a 405 names the methods the resource serves. */
        if (resp && allow)
                MHD_add_response_header(resp, "Allow", allow);
        sh_reply(r, status, resp);
}

void sh_reply_error(sh_request *r, const sh_error *err)
{
        sh_http_reply_error(r, err, true, NULL);
}

void sh_reply_errorf(sh_request *r, sh_error_kind kind, const char *fmt, ...)
{
        /* On the stack: an answer must not need memory the host may have run out of. */
        sh_error err = {.kind = kind};
        char buf[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        err.msg = buf;
        sh_http_reply_error(r, &err, false, NULL);
}
