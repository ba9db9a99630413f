/* api_files.c: the file endpoints of CONTRACT.md section 3: upload (streamed to an unnamed
 * file, then renamed into place), download (sendfile from the file), exists, size,
 * disk-usage (walked in slices between other work), walk (streamed as it is walked), delete
 * file, mkdir, delete dir (moved out, removed in the background), rename. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sh/buf.h"
#include "sh/capability.h"
#include "sh/log.h"
#include "sh/native.h"

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

/* ---- upload: a body sink streaming into an unnamed file, renamed into place at the end --- */

typedef struct upload {
        sh_fs_upload *up; /* NULL once dropped (over the limit, a failed write) or committed */
        char *path;       /* normalised target */
        uint64_t max;
        bool too_large;
        bool gone;     /* the sandbox was deleted while the body came */
        sh_error *err; /* a write failed: why */
} upload;

/* What was staged is given up: freed off the loop when it is big (sh_manager_discard_unnamed). */
static void upload_drop(sh_request *r, upload *u)
{
        if (u->up)
                sh_manager_discard_unnamed(sh_native(r)->mgr, sh_native_sandbox(r),
                                           sh_fs_upload_take_fd(TAKE_PTR(u->up)));
}

static int upload_begin(sh_request *r, void **state)
{
        sh_native_ctx *n = sh_native(r);
        _cleanup_close_ int wsfd = -1;
        upload *u;

        if (sh_request_declared_over(r, n->cfg->upload_max)) {
                sh_reply_errorf(r, SH_E_TOO_LARGE, "upload larger than the limit of %llu bytes",
                                (unsigned long long)n->cfg->upload_max);
                return -1;
        }
        u = calloc(1, sizeof(*u));
        if (!u) {
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return -1;
        }
        u->max = n->cfg->upload_max;
        u->path = sh_native_path_param(r, "path", false);
        if (!u->path || (wsfd = sh_native_workspace(r)) < 0) {
                free(u->path);
                free(u);
                return -1;
        }
        if (sh_fs_upload_begin(wsfd, &u->up, &u->err) < 0) {
                reply_fs_error(r, u->err);
                sh_error_release(&u->err);
                free(u->path);
                free(u);
                return -1;
        }
        *state = u;
        return 0;
}

static int upload_data(sh_request *r, void *state, const char *data, size_t len)
{
        upload *u = state;

        if (len > u->max || sh_fs_upload_size(u->up) > u->max - len) {
                /* Over the limit: drop what was staged now; the rest of the body is read and
                 * discarded, then answered with 413. The old file is untouched. */
                u->too_large = true;
                upload_drop(r, u);
                return -1;
        }
        /* Deleted meanwhile: nothing more is written into its filesystem, and nothing lands
         * (the answer is 404). */
        if (sh_sandbox_deleted(sh_native_sandbox(r))) {
                u->gone = true;
                upload_drop(r, u);
                return -1;
        }
        if (sh_fs_upload_write(u->up, data, len, &u->err) < 0) {
                upload_drop(r, u);
                return -1;
        }
        return 0;
}

static int upload_end(sh_request *r, void *state)
{
        upload *u = state;

        if (u->too_large) {
                sh_reply_errorf(r, SH_E_TOO_LARGE, "request body too large");
                return -1;
        }
        if (u->gone) {
                sh_reply_errorf(r, SH_E_SANDBOX_NOT_FOUND, "the sandbox was deleted");
                return -1;
        }
        if (u->err) {
                reply_fs_error(r, u->err);
                return -1;
        }
        return 0;
}

static void upload_abort(sh_request *r, void *state)
{
        upload *u = state;

        /* A cut connection, a 413 or a failed write leaves nothing behind. */
        upload_drop(r, u);
        sh_error_release(&u->err);
        free(u->path);
        free(u);
}

const sh_body_sink sh_native_upload_sink = {
        .begin = upload_begin,
        .data = upload_data,
        .end = upload_end,
        .abort = upload_abort,
};

/* The native surface's policy for the fs operations (sh_fs_ctx): the workspace wsfd, no guard,
 * the sandbox's owner, the trash trashfd (-1: none), too many links an absent file. */
static sh_fs_ctx fs_ctx(sh_request *r, int wsfd, int trashfd)
{
        return (sh_fs_ctx){.root = wsfd,
                           .trashfd = trashfd,
                           .own = sh_sandbox_owner(sh_native_sandbox(r)),
                           .loop_absent = true};
}

/* kept: the trash holds something of the request's, and the empty answer waits until it is
 * removed (sh_request_hold: its remover runs once for it): a replace or a delete is answered when
 * the space is free again, as when the daemon freed it itself, yet never on the loop. */
static void reply_after_trash(sh_request *r, bool kept, unsigned status)
{
        sh_waiter *w;

        if (!kept) {
                sh_reply_empty(r, status);
                return;
        }
        w = sh_request_hold(r, status, sh_response_empty());
        if (!sh_manager_trash_wait(sh_native(r)->mgr, sh_native_sandbox(r), w) && w)
                w->done(w);
}

void sh_api_upload(sh_request *r)
{
        upload *u = sh_request_sink_state(r);
        sh_sandbox *sb = sh_native_sandbox(r);
        sh_fs_ctx c;
        sh_error *err = NULL;
        bool kept;
        /* Opened again and checked: the one the upload began in, or 404 once the sandbox was
         * deleted while the body came (the check and the commit run in one turn of the loop,
         * which no delete can come between). */
        _cleanup_close_ int wsfd = sh_native_workspace(r), trashfd = -1;

        if (wsfd < 0)
                return;
        trashfd = sh_sandbox_trash_or_none(sh_native_sandbox(r));
        c = fs_ctx(r, wsfd, trashfd);
        if (sh_fs_upload_commit(TAKE_PTR(u->up), &c, u->path, &kept, &err) < 0) {
                if (kept)
                        sh_manager_trash_kick(sh_native(r)->mgr, sb);
                reply_fs_error(r, err);
                sh_error_release(&err);
                return;
        }
        reply_after_trash(r, kept, 204);
}

/* ---- download, exists, size ------------------------------------------------------------ */

void sh_api_download(sh_request *r)
{
        _cleanup_free_ char *path = sh_native_path_param(r, "path", false);
        _cleanup_close_ int wsfd = -1;
        sh_response *resp;
        sh_error *err = NULL;
        uint64_t size;
        int fd;

        if (!path || (wsfd = sh_native_workspace(r)) < 0)
                return;
        if (sh_fs_open_read(wsfd, path, &fd, &size, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        /* Sent with sendfile(2); the response closes fd. */
        resp = sh_response_fd(r, fd, size);
        if (!resp) {
                sh_reply_errorf(r, SH_E_INTERNAL, "cannot create the response");
                return;
        }
        sh_response_header(resp, "Content-Type", "application/octet-stream");
        sh_reply(r, 200, resp);
}

void sh_api_exists(sh_request *r)
{
        _cleanup_free_ char *path = sh_native_path_param(r, "path", false);
        _cleanup_close_ int wsfd = -1;
        sh_error *err = NULL;
        bool exists = false;
        cJSON *o;

        if (!path || (wsfd = sh_native_workspace(r)) < 0)
                return;
        if (sh_fs_exists(wsfd, path, &exists, &err) < 0) {
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
        _cleanup_free_ char *path = sh_native_path_param(r, "path", false);
        _cleanup_close_ int wsfd = -1;
        sh_error *err = NULL;
        int64_t size = -1;
        cJSON *o;

        if (!path || (wsfd = sh_native_workspace(r)) < 0)
                return;
        if (sh_fs_size(wsfd, path, &size, &err) < 0) {
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

/* A job of the loop answering the request (sh_request_job): each step is one walker step,
 * itself bounded (a few hundred entries read, stat'ed or skipped, whether they yield a file or
 * not), so a slice is bounded by time and not by the shape of the tree. */
typedef struct du_job {
        sh_request_job rj; /* first */
        sh_fs_walker *w;
        sh_fs_usage *u;
} du_job;

static void du_gone(void *data)
{
        sh_request_job_gone(data);
}

static void du_release(void *data)
{
        du_job *j = data;

        sh_request_job_free(&j->rj);
        sh_fs_walk_free(j->w);
        sh_fs_usage_free(j->u);
        free(j);
}

static const sh_pending_ops du_ops = {.gone = du_gone, .release = du_release};

static int du_step(void *data)
{
        du_job *j = data;
        sh_request *r = sh_request_job_request(&j->rj);
        sh_error *err = NULL;
        sh_fs_entry e;
        cJSON *o;
        int k = sh_fs_walk_next(j->w, &e, &err);

        if (k == 1 && sh_fs_usage_add(j->u, &e) < 0)
                k = sh_error_make(&err, ENOMEM, "out of memory");
        if (k > 0)
                return 1;
        if (k < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return sh_request_job_done(&j->rj);
        }
        o = cJSON_CreateObject();
        add_u64(o, "bytes", sh_fs_usage_bytes(j->u));
        sh_reply_json(r, 200, o);
        return sh_request_job_done(&j->rj);
}

void sh_api_disk_usage(sh_request *r)
{
        du_job *j = NULL;
        sh_error *err = NULL;
        _cleanup_close_ int wsfd = sh_native_workspace(r); /* the walker opens its own */

        if (wsfd < 0)
                return;
        j = calloc(1, sizeof(*j));
        if (!j || !(j->u = sh_fs_usage_new())) {
                free(j);
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return;
        }
        if (!sh_request_job_wait(&j->rj, r, sh_native(r)->loop, &du_ops, du_step, "walk")) {
                du_release(j);
                return;
        }
        if (sh_fs_walk_open(wsfd, "", &j->w, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                sh_request_job_done(&j->rj);
                return;
        }
        /* The first slice now, the rest from the loop while the request waits. */
        sh_request_job_run(&j->rj);
}

/* ---- walk: streamed as it is walked; memory bounded by the walker, not the tree -------- */

/* Each read of the stream runs one slice of the walk's job at most (as disk-usage's): a slice
 * that found nothing to send (skipped entries, empty directories) makes the connection wait a
 * loop iteration, so other work runs in between. */
typedef struct walk_stream {
        sh_request_job rj; /* first */
        sh_fs_walker *w;
        bool first;
} walk_stream;

static void walk_gone(void *data)
{
        sh_request_job_gone(data);
}

static void walk_release(void *data)
{
        walk_stream *ws = data;

        sh_request_job_free(&ws->rj);
        sh_fs_walk_free(ws->w);
        free(ws);
}

/* One entry encoded; -1 out of memory. */
static int ws_append_entry(walk_stream *ws, const sh_fs_entry *e)
{
        sh_buf *b = &ws->rj.ss.b;
        size_t plen = strlen(e->path);
        int n;

        if (sh_buf_reserve(b, 6 * plen + 96) < 0)
                return -1;
        if (!ws->first)
                b->p[b->len++] = ',';
        ws->first = false;
        memcpy(b->p + b->len, "{\"path\":", 8);
        b->len += 8;
        b->len += sh_json_quote_bytes(e->path, plen, b->p + b->len);
        n = snprintf(b->p + b->len, b->cap - b->len, ",\"size\":%llu,\"version\":%lld}",
                     (unsigned long long)e->size, (long long)e->mtime_ns);
        b->len += (size_t)n;
        return 0;
}

/* One walker step, its file encoded: a pause once the slice made about what was asked for; the
 * footer (or a cut) when the walk is over. */
static int walk_step(void *data)
{
        walk_stream *ws = data;
        sh_error *err = NULL;
        sh_fs_entry e;
        int k = sh_fs_walk_next(ws->w, &e, &err);

        if (k == 1 && ws_append_entry(ws, &e) < 0)
                k = -ENOMEM;
        if (k > 0)
                return ws->rj.ss.b.len >= ws->rj.want ? SH_LOOP_JOB_PAUSE : 1;
        if (k < 0) {
                /* The status line is gone already: cut the stream, so the client sees
                 * invalid JSON, never a short list. */
                if (err)
                        log_warn("walk-failed", NULL, "%s", err->msg ? err->msg : "");
                sh_error_release(&err);
                ws->rj.cut = true;
        } else if (sh_buf_append(&ws->rj.ss.b, "]}", 2) < 0) {
                ws->rj.cut = true;
        } else {
                ws->rj.ss.ended = true;
        }
        return SH_LOOP_JOB_DONE;
}

static ssize_t walk_read(void *data, char *out, size_t max)
{
        return sh_request_job_read(data, out, max);
}

static const sh_pending_ops walk_ops = {
        .gone = walk_gone,
        .release = walk_release,
        .read = walk_read,
};

void sh_api_walk(sh_request *r)
{
        _cleanup_free_ char *root = sh_native_path_param(r, "root", true);
        _cleanup_close_ int wsfd = -1; /* the walker opens its own */
        walk_stream *ws;
        sh_error *err = NULL;

        if (!root || (wsfd = sh_native_workspace(r)) < 0)
                return;
        ws = calloc(1, sizeof(*ws));
        if (!ws) {
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return;
        }
        ws->first = true;
        if (sh_buf_append(&ws->rj.ss.b, "{\"entries\":[", 12) < 0)
                sh_error_make(&err, ENOMEM, "out of memory");
        if (err || sh_fs_walk_open(wsfd, root, &ws->w, &err) < 0) {
                walk_release(ws);
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        if (!sh_request_job_wait(&ws->rj, r, sh_native(r)->loop, &walk_ops, walk_step, "walk")) {
                walk_release(ws);
                return;
        }
        sh_request_job_stream(&ws->rj, 64 * 1024, "application/json");
}

/* ---- delete file, mkdir, delete dir, rename -------------------------------------------- */

void sh_api_delete_file(sh_request *r)
{
        _cleanup_free_ char *path = sh_native_path_param(r, "path", false);
        _cleanup_close_ int wsfd = -1, trashfd = -1;
        sh_fs_ctx c;
        sh_error *err = NULL;
        int k;

        if (!path || (wsfd = sh_native_workspace(r)) < 0)
                return;
        /* Into the trash: a big file is freed by the sandbox's remover, never here. */
        trashfd = sh_sandbox_trash_or_none(sh_native_sandbox(r));
        c = fs_ctx(r, wsfd, trashfd);
        k = sh_fs_unlink_file(&c, path, &err);
        if (k < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        reply_after_trash(r, k > 0, 204);
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
        cJSON *body = sh_native_json(r);
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int wsfd = -1;
        sh_fs_ctx c;
        sh_error *err = NULL;

        if (!body)
                return;
        path = json_path_field(r, body, "path");
        cJSON_Delete(body);
        if (!path || (wsfd = sh_native_workspace(r)) < 0)
                return;
        c = fs_ctx(r, wsfd, -1);
        if (sh_fs_mkdir_p(&c, path, &err) < 0) {
                reply_fs_error(r, err);
                sh_error_release(&err);
                return;
        }
        sh_reply_empty(r, 204);
}

void sh_api_delete_dir(sh_request *r)
{
        _cleanup_free_ char *path = sh_native_path_param(r, "path", false);
        sh_error *err = NULL;

        if (!path)
                return;
        if (!*path) {
                sh_reply_errorf(r, SH_E_INVALID, "the workspace root cannot be removed");
                return;
        }
        if (sh_manager_remove_dir(sh_native(r)->mgr, sh_native_sandbox(r), path, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        sh_reply_empty(r, 204);
}

void sh_api_rename(sh_request *r)
{
        cJSON *body = sh_native_json(r);
        _cleanup_free_ char *src = NULL, *dst = NULL;
        _cleanup_close_ int wsfd = -1, trashfd = -1;
        sh_fs_ctx c;
        sh_error *err = NULL;
        int k;

        if (!body)
                return;
        src = json_path_field(r, body, "src");
        if (src)
                dst = json_path_field(r, body, "dst");
        cJSON_Delete(body);
        if (!src || !dst || (wsfd = sh_native_workspace(r)) < 0)
                return;
        /* a file replaced at dst goes into the trash, for the remover */
        trashfd = sh_sandbox_trash_or_none(sh_native_sandbox(r));
        c = fs_ctx(r, wsfd, trashfd);
        k = sh_fs_rename(&c, src, dst, 0, NULL, &err);
        if (k < 0) {
                reply_fs_error(r, err);
                sh_error_release(&err);
                return;
        }
        reply_after_trash(r, k > 0, 204);
}
