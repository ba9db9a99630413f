/* files_write.c: what the execd file routes write with (mkdir -p as the sandbox's uid, the trash
 * for what a replace or a delete leaves and the answers that wait for it, unnamed files put in
 * over their target) and the upload (a multipart body sink, OPENSANDBOX.md section 3.2). */
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "sh/multipart.h"

/* ---- creating: mkdir -p, atomic files ------------------------------------------------------- */

/* May the sandbox's uid make an entry in directory fd (sh_safe_mkdir's may_create): what the
 * guard asks of a directory entered, and its bits allow writing it too. */
int f_may_create(void *data, int dirfd)
{
        struct statx s;
        int r;

        if ((r = f_dir_guard(data, dirfd)) < 0 || (r = sh_fs_statx(dirfd, &s)) < 0)
                return r;
        return f_may(data, dirfd, &s, OS_MAY_WRITE | OS_MAY_EXEC) ? 0 : -f_denied(dirfd);
}

/* mkdir -p `path` below the root (sh_fs_mkdir_p_at: one walk, every directory entered checked
 * by dir_guard, each missing level made in a directory the sandbox's uid may write); `path`
 * itself (when made) owned by *own with `mode`, as mkdir -p -m. An fd of the directory, or -1
 * with e filled. */
int f_mkdir_p(fctx *f, const char *path, mode_t mode, const sh_fs_owner *own, const char *shown,
              os_err *e)
{
        _cleanup_close_ int fd = -1;
        sh_error *err = NULL;

        fd = sh_fs_mkdir_p_at(&f->fs, path, mode, own, &err);
        if (fd < 0 && !f->kfs && (err->errnum == ENOTDIR || err->errnum == EEXIST)) {
                sh_error_release(&err);
                return os_err_code(e, OS_E_BAD_BODY, "mkdir: '%s': a component is not a directory",
                                   shown);
        }
        if (fd < 0)
                return f_fail(f, &err, shown, "mkdir", e);
        if (f_kernel_fs(fd))
                return f_refused_kfs(e, shown);
        return TAKE_FD(fd);
}

/* ---- the trash: the answers that wait for what a replace or a delete leaves ------------- */

/* k (sh/trash.h) > 0: the trash holds something for the sandbox's remover, which the answer
 * waits for (f_answer): a delete or a replace is answered once the space is free again, as when
 * the daemon freed it itself, and its remover runs once for the request. */
void f_trashed(fctx *f, int k)
{
        if (k > 0)
                f->trashed = true;
}

void f_answer(fctx *f, sh_request *r, sh_request_job *rj, unsigned status, cJSON *body)
{
        sh_response *resp = body ? sh_response_json(body) : sh_response_empty();
        sh_waiter *w;

        if (!f->trashed) {
                sh_reply(rj ? sh_request_job_request(rj) : r, status, resp);
                if (rj)
                        sh_request_job_done(rj);
                return;
        }
        f->trashed = false;
        w = rj ? sh_request_job_hold(rj, status, resp) : sh_request_hold(r, status, resp);
        if (!sh_manager_trash_wait(f->mgr, f->sb, w) && w)
                w->done(w);
}

/* ---- POST /files/upload (multipart through a body sink) ---------------------------------------- */

typedef struct upload {
        fctx f;
        sh_mp *mp;
        uint64_t max, seen;
        os_err e;
        bool failed;
        enum { U_META_NEXT = 0, U_IN_META, U_FILE_NEXT, U_IN_FILE, U_OTHER } st;
        sh_buf meta;
        unsigned pairs;
        /* the pair being written */
        char *shown;
        char *path;
        const char *base;
        sh_fs_owner own;
        mode_t mode;
        sh_fs_staged t; /* its unnamed file, beside it (sh_fs_stage) */
} upload;

/* The pair's unnamed file given up: freed off the loop when it is big. */
static void upload_drop(upload *u)
{
        sh_manager_discard_unnamed(u->f.mgr, u->f.sb, sh_fs_stage_drop(&u->t));
}

static void upload_free(upload *u)
{
        if (!u)
                return;
        upload_drop(u); /* an unnamed file: nothing is left behind */
        sh_buf_done(&u->meta);
        sh_mp_free(u->mp);
        free(u->shown);
        free(u->path);
        fctx_done(&u->f);
        free(u);
}

/* The metadata part is in: {path, owner?, group?, mode?}; the file's parents are made and its
 * unnamed file opened, ready for the file part. */
static int upload_meta(upload *u)
{
        cJSON *j, *path;
        _cleanup_close_ int pfd = -1;
        sh_error *err = NULL;
        size_t mlen = u->meta.len;
        const char *why;
        int r = -1;

        if (sh_buf_append(&u->meta, "", 1) < 0)
                return os_err_code(&u->e, OS_E_RUNTIME, "out of memory");
        /* as every /v1 JSON body: a NUL in the path would cut it */
        j = sh_json_parse_text(u->meta.p, &mlen, 0, &why);
        u->meta.len = 0;
        path = j ? cJSON_GetObjectItemCaseSensitive(j, "path") : NULL;
        if (!cJSON_IsObject(j) || !cJSON_IsString(path) || !*path->valuestring) {
                os_err_code(&u->e, OS_E_INVALID_FILE_METADATA,
                            "the metadata part is JSON {path, owner?, group?, mode?}");
                goto out;
        }
        free(u->shown);
        free(u->path);
        u->path = NULL;
        if (!(u->shown = strdup(path->valuestring))) {
                os_err_code(&u->e, OS_E_RUNTIME, "out of memory");
                goto out;
        }
        if (!(u->path = f_path(u->shown, strlen(u->shown), &u->e)) ||
            f_resolve_id(&u->f, cJSON_GetObjectItemCaseSensitive(j, "owner"), false, &u->own.uid,
                         &u->e) < 0 ||
            f_resolve_id(&u->f, cJSON_GetObjectItemCaseSensitive(j, "group"), true, &u->own.gid,
                         &u->e) < 0 ||
            f_parse_mode(cJSON_GetObjectItemCaseSensitive(j, "mode"), &u->mode, &u->e) < 0)
                goto out;
        if (!u->mode)
                u->mode = 0644;
        if (!*u->path) {
                f_error(&u->e, EISDIR, u->shown, "upload");
                goto out;
        }
        /* parents: the sandbox's own, 0755; the last checked writable by the sandbox */
        pfd = f_parent_p(&u->f, u->path, &u->base, u->shown, "upload", &u->e);
        if (pfd < 0)
                goto out;
        if (sh_fs_stage(&u->f.fs, TAKE_FD(pfd), &u->t, &err) < 0) {
                f_fail(&u->f, &err, u->shown, "upload", &u->e);
                goto out;
        }
        r = 0;
out:
        cJSON_Delete(j);
        return r;
}

/* The pair's file in over its target (sh_fs_stage_commit: readers see the old file or the new
 * one, never a mix; a link there is replaced, never written through). Only while the sandbox
 * lives: the check and the rename run in one turn of the loop, which no delete comes between,
 * so nothing is ever written into a deleted sandbox's tree (its trash, being removed). */
static int upload_commit(upload *u)
{
        sh_error *err = NULL;
        int k;

        if (sh_sandbox_deleted(u->f.sb))
                return f_gone(&u->e);
        if ((k = sh_fs_stage_commit(&u->t, u->base, &u->own, u->mode, &err)) < 0)
                return f_fail(&u->f, &err, u->shown, "write", &u->e);
        f_trashed(&u->f, k);
        return 0;
}

/* What the parser tells the upload, in order: a part begins (p: its name), some of its data, its
 * end. < 0 with u->e filled refuses the body. */
typedef enum { UP_BEGIN, UP_DATA, UP_END } upload_ev;

static int upload_event(void *data, upload_ev ev, const char *p, size_t n)
{
        upload *u = data;
        int r;

        switch (ev) {
        case UP_BEGIN:
                if (STREQ(p, "metadata")) {
                        if (u->st == U_FILE_NEXT)
                                return os_err_code(&u->e, OS_E_INVALID_FILE_METADATA,
                                                   "two metadata parts in a row: each is followed "
                                                   "by its file part");
                        u->st = U_IN_META;
                        u->meta.len = 0;
                } else if (STREQ(p, "file")) {
                        if (u->st != U_FILE_NEXT)
                                return os_err_code(
                                        &u->e, OS_E_INVALID_FILE_METADATA,
                                        "a file part without its metadata part before it");
                        u->st = U_IN_FILE;
                } else {
                        u->st = u->st == U_FILE_NEXT ? U_FILE_NEXT : U_OTHER;
                        if (u->st == U_FILE_NEXT)
                                return os_err_code(&u->e, OS_E_INVALID_FILE_METADATA,
                                                   "the part after a metadata part is its file");
                }
                return 0;
        case UP_DATA:
                if (u->st == U_IN_META) {
                        if (u->meta.len + n > METADATA_MAX)
                                return os_err_code(&u->e, OS_E_INVALID_FILE_METADATA,
                                                   "a metadata part is at most %u bytes",
                                                   METADATA_MAX);
                        if (sh_buf_append(&u->meta, p, n) < 0)
                                return os_err_code(&u->e, OS_E_RUNTIME, "out of memory");
                } else if (u->st == U_IN_FILE) {
                        sh_error *err = NULL;

                        if (sh_fs_upload_write(u->t.u, p, n, &err) < 0)
                                return f_fail(&u->f, &err, u->shown, "upload", &u->e);
                }
                return 0;
        case UP_END:
                if (u->st == U_IN_META) {
                        if (upload_meta(u) < 0)
                                return -1;
                        u->st = U_FILE_NEXT;
                } else if (u->st == U_IN_FILE) {
                        r = upload_commit(u);
                        upload_drop(u);
                        if (r < 0)
                                return -1;
                        u->pairs++;
                        u->st = U_META_NEXT;
                } else {
                        u->st = U_META_NEXT;
                }
                return 0;
        }
        return 0;
}

/* The parser's callbacks. A refusal of upload_event stops the parse: its answer is u->e, the
 * sh_error only carries the stop back through sh_mp_feed. */
static int upload_stop(const upload *u, sh_error **err)
{
        return sh_error_new(err, u->e.status >= 500 ? SH_E_INTERNAL : SH_E_INVALID, "%s",
                            u->e.message);
}

static int upload_part_begin(void *data, const sh_mp_part *part, sh_error **err)
{
        return upload_event(data, UP_BEGIN, part->name, strlen(part->name)) < 0
                       ? upload_stop(data, err)
                       : 0;
}

static int upload_part_data(void *data, const char *p, size_t n, sh_error **err)
{
        return upload_event(data, UP_DATA, p, n) < 0 ? upload_stop(data, err) : 0;
}

static int upload_part_end(void *data, sh_error **err)
{
        return upload_event(data, UP_END, NULL, 0) < 0 ? upload_stop(data, err) : 0;
}

static const sh_mp_callbacks upload_parts = {.part_begin = upload_part_begin,
                                             .part_data = upload_part_data,
                                             .part_end = upload_part_end};

static int upload_begin(sh_request *r, void **state)
{
        const char *ct = sh_request_header(r, "Content-Type");
        char boundary[SH_MP_BOUNDARY_MAX + 1];
        _cleanup_error_ sh_error *err = NULL;
        upload *u;

        *state = NULL;
        if (sh_mp_boundary(ct, boundary, &err) < 0) {
                os_reply_code(r, OS_E_BAD_BODY, "%s",
                              err ? err->msg : "the body is multipart/form-data with a boundary");
                return -1;
        }
        u = calloc(1, sizeof(*u));
        if (!u) {
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return -1;
        }
        u->t = (sh_fs_staged){.pfd = -1, .trashfd = -1};
        u->max = os_ctx_of(r)->cfg->upload_max;
        /* a declared body over the bound is refused before any byte is read */
        if (sh_request_declared_over(r, u->max)) {
                free(u);
                os_reply_code(r, OS_E_BODY_TOO_LARGE, "the upload is over %" PRIu64 " bytes",
                              os_ctx_of(r)->cfg->upload_max);
                return -1;
        }
        if (fctx_init(r, &u->f) < 0) {
                free(u);
                return -1;
        }
        if (sh_mp_new(ct, &upload_parts, u, &u->mp, &err) < 0) {
                upload_free(u);
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return -1;
        }
        *state = u;
        return 0;
}

static int upload_data(sh_request *r, void *state, const char *p, size_t n)
{
        upload *u = state;
        _cleanup_error_ sh_error *err = NULL;

        if (u->failed)
                return -1;
        u->seen += n;
        if (u->seen > u->max) {
                os_err_code(&u->e, OS_E_BODY_TOO_LARGE, "the upload is over %" PRIu64 " bytes",
                            u->max);
                u->failed = true;
                upload_drop(u);
                return -1;
        }
        /* Deleted while the body comes: nothing more is written, nothing lands, 404. */
        if (sh_sandbox_deleted(u->f.sb)) {
                f_gone(&u->e);
                u->failed = true;
                upload_drop(u);
                return -1;
        }
        if (sh_mp_feed(u->mp, p, n, &err) < 0) {
                /* the parser's own refusal (a refusal of upload_event is in u->e already) */
                if (!u->e.status)
                        os_err_code(&u->e, OS_E_BAD_BODY, "%s",
                                    err ? err->msg : "the body is not multipart/form-data");
                u->failed = true;
                upload_drop(u);
                return -1;
        }
        return 0;
}

static int upload_end(sh_request *r, void *state)
{
        upload *u = state;
        _cleanup_error_ sh_error *err = NULL;

        /* a cut body (no closing delimiter) or one without any boundary */
        if (!u->failed && sh_mp_finish(u->mp, &err) < 0)
                os_err_code(&u->e, OS_E_BAD_BODY, "%s",
                            err ? err->msg : "the multipart body is cut");
        else if (!u->failed && u->st == U_FILE_NEXT)
                os_err_code(&u->e, OS_E_INVALID_FILE_METADATA,
                            "a metadata part without its file part");
        else if (!u->failed && u->pairs == 0)
                os_err_code(&u->e, OS_E_INVALID_FILE_METADATA, "no metadata and file parts");
        else if (!u->failed && sh_sandbox_deleted(u->f.sb))
                f_gone(&u->e); /* what it wrote before the delete went with the sandbox */
        else if (!u->failed)
                return 0;
        upload_drop(u);
        os_reply_err(r, &u->e);
        return -1;
}

static void upload_abort(sh_request *r, void *state)
{
        upload_free(state);
}

const sh_body_sink os_files_upload_sink = {
        .begin = upload_begin, .data = upload_data, .end = upload_end, .abort = upload_abort};

void os_files_upload(sh_request *r)
{
        upload *u = sh_request_sink_state(r);

        f_answer(&u->f, r, NULL, 200, NULL);
}
