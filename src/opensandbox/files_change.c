/* files_change.c: the execd file routes that change entries (OPENSANDBOX.md section 3.2):
 * DELETE /files, permissions, mv, replace (sh_fs_replace_file in slices), POST and DELETE
 * /directories (into the trash, or the tree remover in slices: sh_fs_rmdir). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"

/* ---- DELETE /files ------------------------------------------------------------------------------ */

/* One path: 0 (removed, or absent: fine), or -1 refused with e filled. */
static int delete_one(fctx *f, const char *shown, size_t n, os_err *e)
{
        _cleanup_free_ char *p = f_path(shown, n, e);
        sh_error *err = NULL;
        int k;

        if (!p || !*p) /* '/' itself is refused */
                return p ? f_parent(f, p, false, NULL, shown, "delete", e) : -1;
        /* the entry itself, never what a link names, into the trash (sh_fs_unlink_file); a
         * directory swapped in meanwhile is refused (put back) */
        if ((k = sh_fs_unlink_file(&f->fs, p, &err)) >= 0) {
                f_trashed(f, k);
                return 0;
        }
        if (err && err->errnum == EISDIR && !f->kfs) {
                sh_error_release(&err);
                return os_err_code(e, OS_E_BAD_BODY,
                                   "'%s' is a directory: DELETE /directories removes it", shown);
        }
        f_fail(f, &err, shown, "delete", e);
        return STREQ(e->code, os_code_name(OS_E_FILE_NOT_FOUND)) ? 0 : -1;
}

/* The query's paths one a step, as info's are (f_pjob: their lookups from a request's budget, in
 * slices); the first refused is the answer, what was removed before it stays removed. */
static int delete_entry(f_pjob *j)
{
        const sh_query_param *qp = f_pjob_next_path(j);

        if (!qp)
                return 0;
        return delete_one(&j->f, qp->val, qp->val_len, &j->e) < 0 ? -1 : 1;
}

void os_files_delete(sh_request *r)
{
        if (f_query_path(r))
                f_pjob_run(r, NULL, NULL, delete_entry);
}

/* ---- POST /files/permissions -------------------------------------------------------------------- */

/* {owner?, group?, mode?} on the entry at p (links followed inside the root, as chmod(1)):
 * only on the sandbox's own entries; an owner or a group absent is kept. */
static int set_perm(fctx *f, const char *p, const char *shown, const cJSON *perm, os_err *e)
{
        const cJSON *owner = cJSON_GetObjectItemCaseSensitive(perm, "owner");
        const cJSON *group = cJSON_GetObjectItemCaseSensitive(perm, "group");
        _cleanup_close_ int fd = -1;
        sh_fs_owner own;
        struct statx s;
        mode_t mode;
        char proc[64];

        if (!cJSON_IsObject(perm))
                return os_err_code(e, OS_E_BAD_BODY, "'%s': permissions are {owner?, group?, mode}",
                                   shown);
        if (f_parse_mode(cJSON_GetObjectItemCaseSensitive(perm, "mode"), &mode, e) < 0 ||
            (fd = f_open(f, p, O_PATH, &s, shown, "chmod", e)) < 0)
                return -1;
        if (!S_ISREG(s.stx_mode) && !S_ISDIR(s.stx_mode))
                return os_err_code(e, OS_E_BAD_BODY, "'%s' is not a file or a directory", shown);
        if (s.stx_uid != f->uid)
                return f_error(e, EPERM, shown, "chmod");
        if (f_perms(f, perm, &own, NULL, e) < 0)
                return -1;
        if (!owner || cJSON_IsNull(owner))
                own.uid = s.stx_uid;
        if (!group || cJSON_IsNull(group))
                own.gid = s.stx_gid;
        /* chown first (it would clear setuid bits, never set here anyway), then the mode */
        if ((own.uid != s.stx_uid || own.gid != s.stx_gid) &&
            fchownat(fd, "", own.uid, own.gid, AT_EMPTY_PATH) < 0)
                return f_error(e, errno, shown, "chown");
        /* the very inode resolved (an O_PATH fd cannot fchmod): its magic link */
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        if (mode && chmod(proc, mode) < 0)
                return f_error(e, errno, shown, "chmod");
        return 0;
}

static int perm_entry(f_pjob *j)
{
        _cleanup_free_ char *p = NULL;
        const cJSON *it = f_pjob_next(j, &p);

        if (!it || it == j->body)
                return it ? -1 : 0;
        return set_perm(&j->f, p, it->string, it, &j->e) < 0 ? -1 : 1;
}

#define PERMS_SHAPE "the body is {path: {owner?, group?, mode}}"

void os_files_permissions(sh_request *r)
{
        f_pjob_body(r, false, PERMS_SHAPE, NULL, NULL, NULL, perm_entry);
}

/* ---- POST /files/mv ------------------------------------------------------------------------------ */

/* The names themselves (sh_fs_rename): links at either end are moved, never followed; the
 * destination's parents are made (the sandbox's own); an existing destination is an error
 * (NOREPLACE), never clobbered. */
static int move_entry(f_pjob *j)
{
        const cJSON *it = j->next;
        const char *src_shown, *dst_shown;
        _cleanup_free_ char *src = NULL, *dst = NULL;
        sh_error *err = NULL;
        bool at_src;

        if (!it)
                return 0;
        j->next = it->next;
        src_shown = cJSON_GetObjectItemCaseSensitive(it, "src")->valuestring;
        dst_shown = cJSON_GetObjectItemCaseSensitive(it, "dest")->valuestring;
        if (!(src = f_path(src_shown, strlen(src_shown), &j->e)) ||
            !(dst = f_path(dst_shown, strlen(dst_shown), &j->e)))
                return -1;
        if (!*src)
                return f_parent(&j->f, src, false, NULL, src_shown, "move", &j->e);
        if (sh_fs_rename(&j->f.fs, src, dst, SH_FS_NOREPLACE, &at_src, &err) == 0)
                return 1;
        return at_src ? f_fail(&j->f, &err, src_shown, "move", &j->e)
                      : f_fail_mkdir(&j->f, &err, dst_shown, "move", &j->e);
}

static bool move_ok(const cJSON *it)
{
        return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(it, "src")) &&
               cJSON_IsString(cJSON_GetObjectItemCaseSensitive(it, "dest"));
}

void os_files_move(sh_request *r)
{
        f_pjob_body(r, true, "the body is a list of {src, dest}", "each move is {src, dest}",
                    move_ok, NULL, move_entry);
}

/* ---- POST /files/replace ----------------------------------------------------------------------- */

/* POST /files/replace is a job of the loop (f_pjob), run in slices, each of its files rewritten by
 * fs/replace.c under the request's policy (sh_fs_replace_file: counted first, no match or a bound
 * passed and nothing is written at all; the new text into an unnamed file beside it, which
 * replaces the file at the end, its owner and mode kept, the old file into the trash). Bounded:
 * the file and what it becomes (REPLACE_MAX), its matches (REPLACE_MATCHES_MAX), the paths of one
 * request (PATHS_MAX), the memory of a job (one chunk and one output buffer beside the body). */
#define REPLACE_MATCHES_MAX (1u << 20)

/* A step that failed (err taken): why, as execd's answer. -1. */
static int replace_failed(f_pjob *j, sh_error **err)
{
        const char *shown = j->next->string;
        sh_fs_replace_refusal why = j->x.x.refused;
        int errnum = *err ? (*err)->errnum : ENOMEM;

        if (why != SH_FS_REPLACE_OK)
                sh_error_release(err);
        if (why == SH_FS_REPLACE_MATCHES)
                return os_err_code(&j->e, OS_E_BAD_BODY,
                                   "'%s' holds more than %u matches: not rewritten", shown,
                                   REPLACE_MATCHES_MAX);
        if (why != SH_FS_REPLACE_OK)
                return os_err_code(&j->e, OS_E_BAD_BODY, "'%s' %s %u MiB: not rewritten", shown,
                                   why == SH_FS_REPLACE_OVER ? "is over" : "would grow over",
                                   REPLACE_MAX >> 20);
        return f_fail(&j->f, err, shown,
                      j->x.pass == 0                       ? "read"
                      : j->x.pass == 3 && errnum != EAGAIN ? "write"
                                                           : "replace",
                      &j->e);
}

/* The entry's file opened, or a step of its work, or its commit: the entry stays j->next until
 * its file is done. */
static int replace_entry(f_pjob *j)
{
        const cJSON *it = j->next;
        _cleanup_free_ char *p = NULL;
        sh_error *err = NULL;
        cJSON *res;
        int k;

        if (!it)
                return 0;
        if (!j->x_open) {
                const char *old = cJSON_GetObjectItemCaseSensitive(it, "old")->valuestring;
                const char *new = cJSON_GetObjectItemCaseSensitive(it, "new")->valuestring;

                if (!(p = f_path(it->string, strlen(it->string), &j->e)))
                        return -1;
                j->x_open = true;
                k = sh_fs_replace_file_open(&j->x, &j->f.fs, p, old, strlen(old), new, strlen(new),
                                            REPLACE_MAX, REPLACE_MATCHES_MAX, &err);
                return k < 0 ? replace_failed(j, &err) : 1;
        }
        if ((k = sh_fs_replace_file_step(&j->x, &err)) == 1)
                return 1;
        /* only while the sandbox lives: the check and the commit run in one turn of the loop,
         * which no delete comes between (nothing is written into a deleted sandbox's tree) */
        if (k == SH_FS_REPLACE_WRITTEN && sh_sandbox_deleted(j->f.sb))
                return f_gone(&j->e);
        if (k == SH_FS_REPLACE_WRITTEN)
                f_trashed(&j->f, k = sh_fs_replace_file_commit(&j->x, &err));
        if (k < 0)
                return replace_failed(j, &err);
        if (j->out && (!(res = cJSON_AddObjectToObject(j->out, it->string)) ||
                       !cJSON_AddNumberToObject(res, "replacedCount", (double)j->x.x.count)))
                return os_err_code(&j->e, OS_E_RUNTIME, "out of memory");
        f_pjob_file_done(j);
        j->next = it->next;
        return 1;
}

static bool replace_ok(const cJSON *it)
{
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(it, "old");

        return cJSON_IsString(o) && *o->valuestring &&
               cJSON_IsString(cJSON_GetObjectItemCaseSensitive(it, "new"));
}

/* ?verbose: the answer is {path: {replacedCount}} */
void os_files_replace(sh_request *r)
{
        const sh_query_param *v = sh_query_find(sh_request_query(r), "verbose");
        bool verbose = v && (STREQ(v->val, "true") || STREQ(v->val, "1"));
        cJSON *out = verbose ? cJSON_CreateObject() : NULL;

        if (verbose && !out) {
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        f_pjob_body(r, false, "the body is {path: {old, new}}",
                    "each replacement is {old: non-empty text, new: text}", replace_ok, out,
                    replace_entry);
}

/* ---- POST /directories ------------------------------------------------------------------------ */

/* mkdir -p (sh_fs_mkdir_p_at: one walk, every directory entered checked by the guard, each
 * missing level made in a directory the sandbox's uid may write), the path itself, when made,
 * with the owner and mode asked (0755 unless asked), as mkdir -p -m. */
static int mkdirs_entry(f_pjob *j)
{
        _cleanup_free_ char *p = NULL;
        const cJSON *it = f_pjob_next(j, &p);
        _cleanup_close_ int fd = -1;
        sh_error *err = NULL;
        sh_fs_owner own;
        mode_t mode;

        if (!it || it == j->body)
                return it ? -1 : 0;
        if (!cJSON_IsObject(it))
                return os_err_code(&j->e, OS_E_BAD_BODY,
                                   "'%s': permissions are {owner?, group?, mode}", it->string);
        if (f_perms(&j->f, it, &own, &mode, &j->e) < 0)
                return -1;
        if ((fd = sh_fs_mkdir_p_at(&j->f.fs, p, mode ? mode : 0755, &own, &err)) < 0) {
                if (err && err->errnum == EEXIST)
                        err->errnum = ENOTDIR; /* a non-directory there: named as one on the way */
                return f_fail_mkdir(&j->f, &err, it->string, "mkdir", &j->e);
        }
        return sh_fs_on_kernel_fs(fd) ? f_refused_kfs(&j->e, it->string) : 1;
}

void os_files_mkdirs(sh_request *r)
{
        f_pjob_body(r, false, PERMS_SHAPE, NULL, NULL, NULL, mkdirs_entry);
}

/* ---- DELETE /directories ---------------------------------------------------------------------- */

/* Every path is checked before anything is removed, then each removed a step at a time as a job
 * of the loop (sh_fs_rmdir): a directory of the workspace moves into the sandbox's trash at once
 * (through the daemon's view of its parent: sh_sandbox_trash_view) and is removed there by the
 * sandbox's remover, off the loop; one elsewhere (its /tmp, a tmpfs) is removed in place by the
 * tree remover (depth first, never following a link, a bounded number of directories open
 * however deep the tree, kernel filesystems never entered), going on past what cannot be
 * removed. The first error is the answer. */
typedef struct rtop {
        sh_fs_rmdir d;
        char *shown;
} rtop;

typedef struct rjob {
        sh_request_job rj; /* first */
        fctx f;            /* its trash, and the sandbox its remover works for */
        rtop *tops;
        size_t ntops, itop; /* itop: the one being removed */
        size_t err_top;     /* the path of the first error */
        int first_err;
        os_err e;
} rjob;

static void rjob_release(void *data)
{
        rjob *j = data;

        for (size_t i = 0; i < j->ntops; i++) {
                sh_fs_rmdir_done(&j->tops[i].d);
                free(j->tops[i].shown);
        }
        free(j->tops);
        fctx_done(&j->f);
        free(j);
}

static const sh_pending_ops rjob_ops = {.gone = sh_request_job_op_gone, .release = rjob_release};

/* Kernel filesystems are never entered (never below a sandbox's writable directory; refused
 * anyway). */
static bool remove_may_enter(void *data, int fd)
{
        return !sh_fs_on_kernel_fs(fd);
}

static int rjob_step(void *data)
{
        rjob *j = data;
        rtop *t = &j->tops[j->itop];

        if (j->itop < j->ntops && sh_fs_rmdir_step(&t->d, remove_may_enter, NULL) > 0)
                return 1;
        if (j->itop < j->ntops) {
                f_trashed(&j->f, t->d.kept);
                if (!j->first_err && t->d.errnum) {
                        j->first_err = t->d.errnum;
                        j->err_top = j->itop;
                }
                j->itop++;
                return 1;
        }
        if (!j->first_err) {
                f_answer(&j->f, NULL, &j->rj, 200, NULL);
                return SH_LOOP_JOB_DONE;
        }
        f_error(&j->e, j->first_err, j->tops[j->err_top].shown, "delete");
        os_reply_err(sh_request_job_request(&j->rj), &j->e);
        return sh_request_job_done(&j->rj);
}

/* The directory at p (shown as asked) checked into the next top: 1; absent: 0; refused: -1 with
 * e filled. */
static int rmdir_top(rjob *j, const char *p, const char *shown, os_err *e)
{
        rtop *t = &j->tops[j->ntops];
        sh_error *err = NULL;
        struct stat st;

        if (!*p)
                return f_parent(&j->f, p, false, NULL, shown, "delete", e);
        if (sh_fs_rmdir_open(&t->d, &j->f.fs, p, &st, &err) < 0) {
                sh_fs_rmdir_done(&t->d);
                if (err && err->errnum == ENOTDIR && st.st_mode && !S_ISDIR(st.st_mode)) {
                        sh_error_release(&err);
                        return os_err_code(e, OS_E_BAD_BODY,
                                           "'%s' is not a directory: DELETE /files removes it",
                                           shown);
                }
                f_fail(&j->f, &err, shown, "delete", e);
                return STREQ(e->code, os_code_name(OS_E_FILE_NOT_FOUND)) ? 0 : -1;
        }
        j->ntops++;
        if (!(t->shown = strdup(shown)))
                return os_err_code(e, OS_E_RUNTIME, "out of memory");
        return 1;
}

void os_files_rmdirs(sh_request *r)
{
        const sh_query_param *ps[PATHS_MAX];
        size_t n = 0, qi = 0;
        rjob *j;
        os_err e;

        if (!f_query_path(r))
                return;
        while (n < PATHS_MAX && (ps[n] = sh_query_next(sh_request_query(r), "path", &qi)))
                n++;
        if (!(j = calloc(1, sizeof(*j))) || !(j->tops = calloc(n, sizeof(*j->tops)))) {
                free(j);
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        if (fctx_init(r, &j->f) < 0) {
                rjob_release(j);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *p = f_path(ps[i]->val, ps[i]->val_len, &e);

                if (!p || rmdir_top(j, p, ps[i]->val, &e) < 0) {
                        rjob_release(j);
                        os_reply_err(r, &e);
                        return;
                }
        }
        if (!sh_request_job_start(&j->rj, r, os_ctx_of(r)->loop, &rjob_ops, rjob_step, "removal"))
                rjob_release(j);
}
