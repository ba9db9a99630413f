/* files_write.c: POST /files/upload (OPENSANDBOX.md section 3.2): a multipart body sink
 * (http/multipart.c's parts) of metadata and file pairs, each file written into an unnamed file
 * staged beside its target (sh_fs_stage) as the body comes and put in over it at the pair's end;
 * the answer waits for what the uploads left in the trash. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "sh/multipart.h"

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
        sh_fs_staged t; /* its unnamed file, beside it */
} upload;

/* The pair's unnamed file given up: freed off the loop when it is big. */
static void upload_drop(upload *u)
{
        sh_manager_discard_unnamed(u->f.mgr, u->f.sb, sh_fs_stage_drop(&u->t));
}

static void upload_free(upload *u)
{
        upload_drop(u); /* an unnamed file: nothing is left behind */
        sh_buf_done(&u->meta);
        sh_mp_free(u->mp);
        free(u->shown);
        free(u->path);
        fctx_done(&u->f);
        free(u);
}

/* The metadata part is in: {path, owner?, group?, mode?}; the file's parents are made (the
 * sandbox's own, 0755; the last checked writable by the sandbox) and its unnamed file staged,
 * ready for the file part. */
static int upload_meta(upload *u)
{
        _cleanup_cjson_ cJSON *j = NULL;
        const cJSON *path;
        sh_error *err = NULL;
        size_t mlen = u->meta.len;
        const char *why;
        int pfd;

        if (sh_buf_append(&u->meta, "", 1) < 0)
                return os_err_code(&u->e, OS_E_RUNTIME, "out of memory");
        /* as every /v1 JSON body: a NUL in the path would cut it */
        j = sh_json_parse_text(u->meta.p, &mlen, 0, &why);
        u->meta.len = 0;
        path = j ? cJSON_GetObjectItemCaseSensitive(j, "path") : NULL;
        if (!cJSON_IsObject(j) || !cJSON_IsString(path) || !*path->valuestring)
                return os_err_code(&u->e, OS_E_INVALID_FILE_METADATA,
                                   "the metadata part is JSON {path, owner?, group?, mode?}");
        free(u->shown);
        free(TAKE_PTR(u->path));
        if (!(u->shown = strdup(path->valuestring)))
                return os_err_code(&u->e, OS_E_RUNTIME, "out of memory");
        if (!(u->path = f_path(u->shown, strlen(u->shown), &u->e)) ||
            f_perms(&u->f, j, &u->own, &u->mode, &u->e) < 0)
                return -1;
        if (!*u->path)
                return f_error(&u->e, EISDIR, u->shown, "upload");
        if ((pfd = f_parent(&u->f, u->path, true, &u->base, u->shown, "upload", &u->e)) < 0)
                return -1;
        if (sh_fs_stage(&u->f.fs, pfd, &u->t, &err) < 0)
                return f_fail(&u->f, &err, u->shown, "upload", &u->e);
        return 0;
}

/* The pair's file in over its target (sh_fs_stage_commit: readers see the old file or the new
 * one, never a mix; a link there is replaced, never written through), owned as asked, its mode
 * 0644 unless asked. Only while the sandbox lives: the check and the rename run in one turn of
 * the loop, which no delete comes between, so nothing is ever written into a deleted sandbox's
 * tree (its trash, being removed). */
static int upload_commit(upload *u)
{
        sh_error *err = NULL;
        int k;

        if (sh_sandbox_deleted(u->f.sb))
                k = f_gone(&u->e);
        else if ((k = sh_fs_stage_commit(&u->t, u->base, &u->own, u->mode ? u->mode : 0644, &err)) <
                 0)
                f_fail(&u->f, &err, u->shown, "write", &u->e);
        f_trashed(&u->f, k);
        upload_drop(u);
        if (k >= 0)
                u->pairs++;
        return k < 0 ? -1 : 0;
}

/* The parser's callbacks, in order: a part begins, some of its data, its end. A refusal (u->e
 * filled) stops the parse: its answer is u->e, the sh_error only carries the stop back through
 * sh_mp_feed. */
static int upload_stop(upload *u, sh_error **err)
{
        return sh_error_new(err, u->e.status >= 500 ? SH_E_INTERNAL : SH_E_INVALID, "%s",
                            u->e.message);
}

static int upload_part_begin(void *data, const sh_mp_part *part, sh_error **err)
{
        upload *u = data;
        const char *why = NULL;

        if (STREQ(part->name, "metadata") && u->st == U_FILE_NEXT)
                why = "two metadata parts in a row: each is followed by its file part";
        else if (STREQ(part->name, "file") && u->st != U_FILE_NEXT)
                why = "a file part without its metadata part before it";
        else if (!STREQ(part->name, "metadata") && !STREQ(part->name, "file") &&
                 u->st == U_FILE_NEXT)
                why = "the part after a metadata part is its file";
        if (why) {
                os_err_code(&u->e, OS_E_INVALID_FILE_METADATA, "%s", why);
                return upload_stop(u, err);
        }
        u->st = STREQ(part->name, "metadata") ? U_IN_META
                : STREQ(part->name, "file")   ? U_IN_FILE
                                              : U_OTHER;
        u->meta.len = 0;
        return 0;
}

static int upload_part_data(void *data, const char *p, size_t n, sh_error **err)
{
        upload *u = data;
        sh_error *werr = NULL;

        if (u->st == U_IN_META && u->meta.len + n > METADATA_MAX)
                os_err_code(&u->e, OS_E_INVALID_FILE_METADATA,
                            "a metadata part is at most %u bytes", METADATA_MAX);
        else if (u->st == U_IN_META && sh_buf_append(&u->meta, p, n) < 0)
                os_err_code(&u->e, OS_E_RUNTIME, "out of memory");
        else if (u->st == U_IN_FILE && sh_fs_upload_write(u->t.u, p, n, &werr) < 0)
                f_fail(&u->f, &werr, u->shown, "upload", &u->e);
        else
                return 0;
        return upload_stop(u, err);
}

static int upload_part_end(void *data, sh_error **err)
{
        upload *u = data;
        int r = u->st == U_IN_META ? upload_meta(u) : u->st == U_IN_FILE ? upload_commit(u) : 0;

        u->st = u->st == U_IN_META ? U_FILE_NEXT : U_META_NEXT;
        return r < 0 ? upload_stop(u, err) : 0;
}

static const sh_mp_callbacks upload_parts = {.part_begin = upload_part_begin,
                                             .part_data = upload_part_data,
                                             .part_end = upload_part_end};

static int upload_begin(sh_request *r, void **state)
{
        const char *ct = sh_request_header(r, "Content-Type");
        char boundary[SH_MP_BOUNDARY_MAX + 1];
        _cleanup_error_ sh_error *err = NULL;
        uint64_t max = os_ctx_of(r)->cfg->upload_max;
        upload *u;

        *state = NULL;
        if (sh_mp_boundary(ct, boundary, &err) < 0) {
                os_reply_code(r, OS_E_BAD_BODY, "%s",
                              err ? err->msg : "the body is multipart/form-data with a boundary");
                return -1;
        }
        /* a declared body over the bound is refused before any byte is read */
        if (sh_request_declared_over(r, max)) {
                os_reply_code(r, OS_E_BODY_TOO_LARGE, "the upload is over %" PRIu64 " bytes", max);
                return -1;
        }
        if (!(u = calloc(1, sizeof(*u)))) {
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return -1;
        }
        u->t = (sh_fs_staged){.pfd = -1, .trashfd = -1};
        u->max = max;
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
        if ((u->seen += n) > u->max)
                os_err_code(&u->e, OS_E_BODY_TOO_LARGE, "the upload is over %" PRIu64 " bytes",
                            u->max);
        else if (sh_sandbox_deleted(u->f.sb)) /* nothing more is written, nothing lands: 404 */
                f_gone(&u->e);
        else if (sh_mp_feed(u->mp, p, n, &err) == 0)
                return 0;
        else if (!u->e.status) /* the parser's own refusal (a callback's is in u->e already) */
                os_err_code(&u->e, OS_E_BAD_BODY, "%s",
                            err ? err->msg : "the body is not multipart/form-data");
        u->failed = true;
        upload_drop(u);
        return -1;
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
        if (state)
                upload_free(state);
}

const sh_body_sink os_files_upload_sink = {
        .begin = upload_begin, .data = upload_data, .end = upload_end, .abort = upload_abort};

void os_files_upload(sh_request *r)
{
        upload *u = sh_request_sink_state(r);

        f_answer(&u->f, r, NULL, 200, NULL);
}
