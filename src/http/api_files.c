/* api_files.c: the file endpoints of CONTRACT.md section 3: upload (streamed to an unnamed
 * file, then renamed into place), download (sendfile from the file), exists, size,
 * disk-usage (walked in slices between other work), walk (streamed as it is walked), delete
 * file, mkdir, delete dir (moved out, removed in the background), rename. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sh/http.h"
#include "sh/log.h"

SH_CAPABILITY(files, "files")
SH_CAPABILITY(upload_atomic, "files.upload-atomic")
SH_CAPABILITY(walk_stream, "files.walk-stream")
SH_CAPABILITY(download_sendfile, "files.download-sendfile")

/* An exact JSON integer: cJSON numbers are doubles, which round sizes above 2^53 (a sparse
 * file in a workspace can claim any size) and may print them in exponent form. */
static void add_u64(cJSON *o, const char *name, uint64_t v)
{
        char text[24];

        snprintf(text, sizeof(text), "%llu", (unsigned long long)v);
        cJSON_AddRawToObject(o, name, text);
}

/* A workspace that is full (its disk limit, SANDBOX_HOST_DISK_MAX and _INODES_MAX: ENOSPC on
 * a filesystem of its own, EDQUOT under project quota) cannot take what the client sent:
 * 413 PayloadTooLarge, as for a body above the upload limit, and never 500 Internal, which
 * would say the host failed. The old file is untouched either way. */
static void reply_fs_error(sh_request *r, const sh_error *err)
{
        if (sh_error_kind_of(err) == SH_E_NO_SPACE) {
                sh_reply_errorf(r, SH_E_TOO_LARGE,
                                "the workspace is full (its disk limit is reached): %s",
                                err->msg ? err->msg : strerror(err->errnum));
                return;
        }
        sh_reply_error(r, err);
}

/* ---- upload ---------------------------------------------------------------------------- */

int sh_api_upload_begin(sh_request *r)
{
        sh_error *err = NULL;

        r->upload_path = sh_request_path_param(r, "path", false);
        if (!r->upload_path)
                return -1;
        if (sh_fs_upload_begin(r->sb->wsfd, &r->upload, &err) < 0) {
                reply_fs_error(r, err);
                sh_error_release(&err);
                return -1;
        }
        return 0;
}

void sh_api_upload_data(sh_request *r, const char *data, size_t len)
{
        uint64_t max = sh_server_config(r->srv)->upload_max;

        if (r->body_failed || r->body_too_large || !r->upload)
                return;
        if (len > max || sh_fs_upload_size(r->upload) > max - len) {
                /* Over the limit: drop what was staged now; the rest of the body is read and
                 * discarded, then answered with 413. The old file is untouched. */
                r->body_too_large = true;
                sh_fs_upload_abort(TAKE_PTR(r->upload));
                return;
        }
        if (sh_fs_upload_write(r->upload, data, len, &r->body_err) < 0) {
                r->body_failed = true;
                sh_fs_upload_abort(TAKE_PTR(r->upload));
        }
}

void sh_api_upload(sh_request *r)
{
        sh_error *err = NULL;

        if (r->body_failed) {
                reply_fs_error(r, r->body_err);
                return;
        }
        if (sh_fs_upload_commit(TAKE_PTR(r->upload), r->sb->wsfd, r->upload_path, &r->sb->owner,
                                &err) < 0) {
                reply_fs_error(r, err);
                sh_error_release(&err);
                return;
        }
        sh_reply_empty(r, 204);
}

/* ---- download, exists, size ------------------------------------------------------------ */

void sh_api_download(sh_request *r)
{
        _cleanup_free_ char *path = sh_request_path_param(r, "path", false);
        struct MHD_Response *resp;
        sh_error *err = NULL;
        uint64_t size;
        int fd;

        if (!path)
                return;
        if (sh_fs_open_read(r->sb->wsfd, path, &fd, &size, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        /* MHD sends it with sendfile(2) and closes fd when the response is destroyed. */
        resp = MHD_create_response_from_fd64(size, fd);
        if (!resp) {
                close(fd);
                sh_reply_errorf(r, SH_E_INTERNAL, "cannot create the response");
                return;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
        sh_reply(r, 200, resp);
}

void sh_api_exists(sh_request *r)
{
        _cleanup_free_ char *path = sh_request_path_param(r, "path", false);
        sh_error *err = NULL;
        bool exists = false;
        cJSON *o;

        if (!path)
                return;
        if (sh_fs_exists(r->sb->wsfd, path, &exists, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        o = cJSON_CreateObject();
        cJSON_AddBoolToObject(o, "exists", exists);
        sh_reply_json(r, 200, o);
}

void sh_api_size(sh_request *r)
{
        _cleanup_free_ char *path = sh_request_path_param(r, "path", false);
        sh_error *err = NULL;
        int64_t size = -1;
        cJSON *o;

        if (!path)
                return;
        if (sh_fs_size(r->sb->wsfd, path, &size, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        o = cJSON_CreateObject();
        if (size < 0)
                cJSON_AddNullToObject(o, "size");
        else
                add_u64(o, "size", (uint64_t)size);
        sh_reply_json(r, 200, o);
}

/* ---- disk-usage: walked in slices so a huge workspace never stalls the loop ------------- */

/* One slice of a walk between other work of the loop: at most SLICE_CALLS walker steps or
 * SLICE_NS, whichever comes first. Each step is bounded by the walker (a few hundred entries
 * read, stat'ed or skipped, whether they yield a file or not), so the slice is bounded by
 * time and not by the shape of the tree. */
#define SLICE_CALLS 4096
#define SLICE_NS    (5 * 1000 * 1000ULL)

typedef struct du_job {
        sh_fs_walker *w;
        sh_fs_usage *u;
        sh_timer *t;
        sh_loop *loop;
} du_job;

static void du_free(sh_request *r, bool aborted)
{
        du_job *j = r->hstate;

        sh_loop_cancel_timer(j->loop, j->t);
        sh_fs_walk_free(j->w);
        sh_fs_usage_free(j->u);
        free(j);
        r->hstate = NULL;
}

/* Returns true when the request was answered. */
static bool du_slice(sh_request *r)
{
        du_job *j = r->hstate;
        uint64_t start = sh_now_ns();
        sh_error *err = NULL;
        sh_fs_entry e;
        unsigned n = 0;
        int k;

        while ((k = sh_fs_walk_next(j->w, &e, &err)) > 0) {
                if (k == 1 && sh_fs_usage_add(j->u, &e) < 0) {
                        sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                        return true;
                }
                if (++n >= SLICE_CALLS || sh_now_ns() - start > SLICE_NS)
                        return false;
        }
        if (k < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return true;
        }
        cJSON *o = cJSON_CreateObject();
        add_u64(o, "bytes", sh_fs_usage_bytes(j->u));
        sh_reply_json(r, 200, o);
        return true;
}

static void du_timer(sh_loop *l, sh_timer *t, void *data)
{
        sh_request *r = data;
        du_job *j = r->hstate;

        j->t = NULL; /* the loop frees a fired timer */
        if (!du_slice(r))
                j->t = sh_loop_add_timer(l, 0, du_timer, r);
        if (!j->t && !r->responded)
                sh_reply_errorf(r, SH_E_INTERNAL, "cannot schedule the walk");
}

void sh_api_disk_usage(sh_request *r)
{
        du_job *j = calloc(1, sizeof(*j));
        sh_error *err = NULL;

        if (!j || !(j->u = sh_fs_usage_new())) {
                free(j);
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return;
        }
        j->loop = sh_server_loop(r->srv);
        r->hstate = j;
        r->hstate_free = du_free;
        if (sh_fs_walk_open(r->sb->wsfd, "", &j->w, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        if (du_slice(r))
                return;
        j->t = sh_loop_add_timer(j->loop, 0, du_timer, r);
        if (!j->t) {
                sh_reply_errorf(r, SH_E_INTERNAL, "cannot schedule the walk");
                return;
        }
        sh_request_suspend(r);
}

/* ---- walk: streamed as it is walked; memory bounded by the walker, not the tree -------- */

/* Each call of the content reader walks one slice at most (as disk-usage does). A slice that
 * found nothing to send (skipped entries, empty directories) suspends the connection and
 * resumes it from a loop timer, so other work runs in between: returning 0 without
 * suspending would leave the connection unserved (MHD waits for socket activity). */
typedef struct walk_stream {
        unsigned refs; /* the request (hstate) and the response (reader cls) */
        sh_request *r; /* NULL once the request is gone */
        sh_loop *loop;
        sh_timer *t; /* pending resume, or NULL */
        sh_fs_walker *w;
        sh_buf b;  /* encoded bytes not yet handed to MHD */
        int phase; /* 0: header, 1: entries, 2: footer written */
        bool first;
} walk_stream;

static void walk_stream_unref(walk_stream *ws)
{
        if (--ws->refs > 0)
                return;
        sh_fs_walk_free(ws->w);
        sh_buf_done(&ws->b);
        free(ws);
}

static void walk_stream_free(void *cls)
{
        walk_stream_unref(cls);
}

static void walk_request_gone(sh_request *r, bool aborted)
{
        walk_stream *ws = r->hstate;

        sh_loop_cancel_timer(ws->loop, ws->t);
        ws->t = NULL;
        ws->r = NULL;
        r->hstate = NULL;
        walk_stream_unref(ws);
}

static void walk_resume(sh_loop *l, sh_timer *t, void *data)
{
        walk_stream *ws = data;

        ws->t = NULL; /* the loop frees a fired timer */
        if (ws->r && ws->r->suspended) {
                ws->r->suspended = false;
                MHD_resume_connection(ws->r->conn);
                sh_server_kick(ws->r->srv);
        }
}

static int ws_append_entry(walk_stream *ws, const sh_fs_entry *e)
{
        size_t plen = strlen(e->path);
        int n;

        if (sh_buf_reserve(&ws->b, 6 * plen + 96) < 0)
                return -1;
        if (!ws->first)
                ws->b.p[ws->b.len++] = ',';
        ws->first = false;
        memcpy(ws->b.p + ws->b.len, "{\"path\":", 8);
        ws->b.len += 8;
        ws->b.len += sh_json_quote_bytes(e->path, plen, ws->b.p + ws->b.len);
        n = snprintf(ws->b.p + ws->b.len, ws->b.cap - ws->b.len, ",\"size\":%llu,\"version\":%lld}",
                     (unsigned long long)e->size, (long long)e->mtime_ns);
        ws->b.len += (size_t)n;
        return 0;
}

/* Suspend until the next loop iteration: a slice found nothing to send yet. */
static ssize_t walk_yield(walk_stream *ws)
{
        if (!ws->r)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        ws->t = sh_loop_add_timer(ws->loop, 0, walk_resume, ws);
        if (!ws->t)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        ws->r->suspended = true;
        MHD_suspend_connection(ws->r->conn);
        return 0;
}

/* Encode entries into ws->b, about as much as MHD asked for, in one slice at most; the
 * footer (or a cut) when the walk is over. Returns 0, or an MHD end code. */
static ssize_t walk_slice(walk_stream *ws, size_t max)
{
        uint64_t start = sh_now_ns();
        sh_error *err = NULL;
        unsigned calls = 0;
        sh_fs_entry e;
        int k;

        while ((k = sh_fs_walk_next(ws->w, &e, &err)) > 0) {
                if (k == 1 && ws_append_entry(ws, &e) < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (ws->b.len >= max || ++calls >= SLICE_CALLS || sh_now_ns() - start > SLICE_NS)
                        return 0;
        }
        if (k < 0) {
                /* The status line is gone already: cut the stream, so the client sees
                 * invalid JSON, never a short list. */
                log_warn("walk-failed", NULL, "%s", err && err->msg ? err->msg : "");
                sh_error_release(&err);
                return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (sh_buf_reserve(&ws->b, 4) < 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        memcpy(ws->b.p + ws->b.len, "]}", 2);
        ws->b.len += 2;
        ws->phase = 2;
        return 0;
}

static ssize_t walk_reader(void *cls, uint64_t pos, char *out, size_t max)
{
        walk_stream *ws = cls;
        bool sliced = false; /* one slice of walking per call, so every call is bounded */
        size_t copied = 0;

        for (;;) {
                ssize_t k;

                if (ws->b.off < ws->b.len) {
                        size_t n = ws->b.len - ws->b.off;

                        if (n > max - copied)
                                n = max - copied;
                        memcpy(out + copied, ws->b.p + ws->b.off, n);
                        ws->b.off += n;
                        copied += n;
                        if (copied == max)
                                return (ssize_t)copied;
                        continue;
                }
                ws->b.off = ws->b.len = 0;
                if (ws->phase == 2 || sliced) {
                        if (copied)
                                return (ssize_t)copied;
                        return ws->phase == 2 ? MHD_CONTENT_READER_END_OF_STREAM : walk_yield(ws);
                }
                if (ws->phase == 0) {
                        if (sh_buf_reserve(&ws->b, 16) < 0)
                                return MHD_CONTENT_READER_END_WITH_ERROR;
                        memcpy(ws->b.p, "{\"entries\":[", 12);
                        ws->b.len = 12;
                        ws->phase = 1;
                        continue;
                }
                sliced = true;
                k = walk_slice(ws, max - copied);
                if (k != 0)
                        return k;
        }
}

void sh_api_walk(sh_request *r)
{
        _cleanup_free_ char *root = sh_request_path_param(r, "root", true);
        walk_stream *ws;
        struct MHD_Response *resp;
        sh_error *err = NULL;

        if (!root)
                return;
        ws = calloc(1, sizeof(*ws));
        if (!ws) {
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return;
        }
        ws->refs = 1;
        ws->first = true;
        ws->loop = sh_server_loop(r->srv);
        if (sh_fs_walk_open(r->sb->wsfd, root, &ws->w, &err) < 0) {
                walk_stream_unref(ws);
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, walk_reader, ws,
                                                 walk_stream_free);
        if (!resp) {
                walk_stream_unref(ws);
                sh_reply_errorf(r, SH_E_INTERNAL, "cannot create the response");
                return;
        }
        /* from here the response holds one reference and the request the other */
        ws->refs = 2;
        ws->r = r;
        r->hstate = ws;
        r->hstate_free = walk_request_gone;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        sh_reply(r, 200, resp);
}

/* ---- delete file, mkdir, delete dir, rename -------------------------------------------- */

void sh_api_delete_file(sh_request *r)
{
        _cleanup_free_ char *path = sh_request_path_param(r, "path", false);
        sh_error *err = NULL;

        if (!path)
                return;
        if (sh_fs_unlink_file(r->sb->wsfd, path, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        sh_reply_empty(r, 204);
}

/* A required string field of a JSON body normalised as a workspace path; NULL after a 400. */
static char *json_path_field(sh_request *r, cJSON *body, const char *name)
{
        cJSON *f = cJSON_GetObjectItemCaseSensitive(body, name);
        char *path = NULL;

        if (!cJSON_IsString(f)) {
                sh_reply_errorf(r, SH_E_INVALID, "'%s' must be a string", name);
                return NULL;
        }
        if (sh_path_normalize(f->valuestring, strlen(f->valuestring), &path) < 0) {
                sh_reply_errorf(r, SH_E_INVALID, "invalid path in '%s'", name);
                return NULL;
        }
        return path;
}

void sh_api_mkdir(sh_request *r)
{
        cJSON *body = sh_request_json(r);
        _cleanup_free_ char *path = NULL;
        sh_error *err = NULL;

        if (!body)
                return;
        path = json_path_field(r, body, "path");
        cJSON_Delete(body);
        if (!path)
                return;
        if (sh_fs_mkdir_p(r->sb->wsfd, path, &r->sb->owner, &err) < 0) {
                reply_fs_error(r, err);
                sh_error_release(&err);
                return;
        }
        sh_reply_empty(r, 204);
}

void sh_api_delete_dir(sh_request *r)
{
        _cleanup_free_ char *path = sh_request_path_param(r, "path", false);
        sh_error *err = NULL;

        if (!path)
                return;
        if (!*path) {
                sh_reply_errorf(r, SH_E_INVALID, "the workspace root cannot be removed");
                return;
        }
        if (sh_manager_remove_dir(sh_server_manager(r->srv), r->sb, path, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        sh_reply_empty(r, 204);
}

void sh_api_rename(sh_request *r)
{
        cJSON *body = sh_request_json(r);
        _cleanup_free_ char *src = NULL, *dst = NULL;
        sh_error *err = NULL;

        if (!body)
                return;
        src = json_path_field(r, body, "src");
        if (src)
                dst = json_path_field(r, body, "dst");
        cJSON_Delete(body);
        if (!src || !dst)
                return;
        if (sh_fs_rename(r->sb->wsfd, src, dst, &r->sb->owner, &err) < 0) {
                reply_fs_error(r, err);
                sh_error_release(&err);
                return;
        }
        sh_reply_empty(r, 204);
}
