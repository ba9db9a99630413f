/* files_read.c: the execd file routes that read (OPENSANDBOX.md section 3.2): download (one Range,
 * or line mode as a job of the loop), listings and searches (the walker's listing mode, its
 * answer a body of the job: walked twice past 256 KiB, counted, then streamed), info of many
 * paths. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "sh/lines.h"
#include "sh/range.h"

/* Line mode: the lines asked (sh/lines.h), read in slices of at most LINES_SLICE bytes of the
 * file (or SH_LOOP_JOB_NS), SH_FS_LINES_READ at a time; the answer a body of the job
 * (sh_body_job): sent whole within LINES_HEAD bytes (an empty one too, with its Content-Length,
 * as the surface's every empty answer), streamed from there a slice each time the transport wants
 * bytes. So the loop time of a step and the memory are bounded whatever the file, and a client
 * that does not read stops the reading. A read that fails before the answer is a 500, after it
 * cuts the stream. */
#define LINES_SLICE (1u << 20)
#define LINES_HEAD  (256u << 10)

typedef struct ljob {
        sh_body_job bj; /* first */
        char *shown;
        sh_fs_lines l;
} ljob;

static void ljob_release(void *data)
{
        ljob *j = data;

        sh_body_job_free(&j->bj);
        sh_close(j->l.fd);
        free(j->shown);
        free(j);
}

static const sh_pending_ops ljob_ops = {
        .gone = sh_request_job_op_gone, .release = ljob_release, .read = sh_request_job_op_read};

static int ljob_step(void *data, sh_buf *b)
{
        return sh_fs_lines_step(&((ljob *)data)->l, b);
}

static void ljob_failed(void *data, sh_request *r, bool sent, int k)
{
        ljob *j = data;

        if (!sent)
                os_reply_code(r, OS_E_RUNTIME, "read '%s': %s", j->shown, strerror(-k));
        else
                log_warn("download-cut", sh_request_log_id(r),
                         "line mode of '%s': %s; the answer was cut", j->shown, strerror(-k));
}

static const sh_body_job_ops ljob_body = {.step = ljob_step, .failed = ljob_failed};

static void download_lines(sh_request *r, int fd, uint64_t offset, uint64_t limit,
                           const char *shown)
{
        ljob *j = calloc(1, sizeof(*j));

        if (!j || !(j->shown = strdup(shown))) {
                free(j);
                sh_close(fd);
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        sh_fs_lines_init(&j->l, fd, offset, limit);
        j->bj.rj.job.steps = LINES_SLICE / SH_FS_LINES_READ; /* a step: one read */
        j->bj.head = LINES_HEAD;
        j->bj.block = SH_FS_LINES_READ;
        j->bj.type = "text/plain; charset=utf-8";
        if (!sh_body_job_start(&j->bj, r, os_ctx_of(r)->loop, &ljob_ops, &ljob_body, "download"))
                ljob_release(j);
}

void os_files_download(sh_request *r)
{
        _cleanup_(fctx_done) fctx f = {.root = -1};
        const sh_query_param *q = f_query_path(r);
        const char *range = sh_request_header(r, "Range");
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -1;
        uint64_t offset, limit;
        bool has_off, has_lim;
        char cr[SH_RANGE_HEADER_MAX];
        struct statx s;
        sh_error *err = NULL;
        os_err e;

        if (!q || f_query_uint(r, "offset", &offset, &has_off) < 0 ||
            f_query_uint(r, "limit", &limit, &has_lim) < 0)
                return;
        if ((has_off && offset < 1) || (has_lim && limit < 1)) {
                os_reply_code(r, OS_E_BAD_BODY, "offset and limit are at least 1");
                return;
        }
        if ((has_off || has_lim) && range) {
                os_reply_code(r, OS_E_BAD_BODY, "offset/limit and Range exclude each other");
                return;
        }
        if (fctx_init(r, &f) < 0)
                return;
        /* never blocking: a FIFO or a device is never opened */
        if (!(p = f_path(q->val, q->val_len, &e)) ||
            (sh_fs_open_read_at(&f.fs, p, &fd, &s, &err) < 0 &&
             f_fail(&f, &err, q->val, "read", &e) < 0)) {
                os_reply_err(r, &e);
                return;
        }
        if (has_off || has_lim) {
                download_lines(r, TAKE_FD(fd), has_off ? offset : 1, limit, q->val);
        } else if (sh_reply_file(r, TAKE_FD(fd), s.stx_size, "application/octet-stream", p, cr) <
                   0) {
                char msg[160];

                snprintf(msg, sizeof(msg), "range '%.64s' is outside the file's %" PRIu64 " bytes",
                         range, (uint64_t)s.stx_size);
                os_reply_error_header(r, os_code_status(OS_E_RANGE_NOT_SATISFIABLE),
                                      os_code_name(OS_E_RANGE_NOT_SATISFIABLE), "Content-Range", cr,
                                      msg);
        }
}

/* A listing or a search: fs/walk.c's listing mode (each directory by name, a directory's
 * entries right after it, links never followed or entered, directories entered only as
 * walk_may_enter allows), its answer a JSON array of FileInfo made as the walk goes, a body of
 * the job (sh_body_job; docs/architecture.md "Listings and searches"): kept while the request
 * waits and sent whole within WALK_HEAD_MAX bytes; past it counted, nothing kept, against the
 * bounds (SANDBOX_HOST_LISTING_MAX bytes, WALK_ENTRIES_MAX entries: a 400 naming the bound before
 * a byte is sent), then walked again from the same top directory and streamed. The status is
 * gone by then: a tree grown past a bound, or a walk that fails, cuts the stream (the client sees
 * an unfinished chunked body and an unclosed array, never a well-formed short list), logged. So a
 * big answer is walked twice; an answer that fits the head, the common one, once. */
#define WALK_HEAD_MAX (256u << 10)
#define WALK_HELD_MAX (16u << 20) /* directory listings a walk holds (its current path's) */
#define WALK_BLOCK    (64u << 10) /* the transport's block of a streamed answer */

typedef struct wjob {
        sh_body_job bj; /* first */
        fctx f;
        int top;       /* the directory walked (O_PATH, checked by walk_top): each pass's */
        char *shown;   /* the top as asked: every path shown starts with it */
        char *pattern; /* search: a glob; NULL: a listing */
        sh_fs_walk_opts o;
        sh_fs_walker *w;
        uint64_t bytes, count; /* of the answer of this pass, the brackets included */
        uint64_t max;          /* SANDBOX_HOST_LISTING_MAX */
        os_err e;
} wjob;

static void wjob_release(void *data)
{
        wjob *j = data;

        sh_fs_walk_free(j->w);
        sh_body_job_free(&j->bj);
        sh_close(j->top);
        free(j->shown);
        free(j->pattern);
        fctx_done(&j->f);
        free(j);
}

static const sh_pending_ops wjob_ops = {
        .gone = sh_request_job_op_gone, .release = wjob_release, .read = sh_request_job_op_read};

/* Kernel filesystems are never entered, nor a directory the sandbox's uid could not list
 * itself (read and search). */
static bool walk_may_enter(void *data, int fd)
{
        fctx *f = data;
        struct statx s;

        return !sh_fs_on_kernel_fs(fd) && sh_fs_statx(fd, &s) == 0 &&
               f_may(f, fd, &s, OS_MAY_READ | OS_MAY_EXEC);
}

/* A pass over the top directory, its "[" appended to b. 0, or -1 with j->e filled. */
static int wjob_again(void *data, sh_buf *b)
{
        wjob *j = data;
        sh_error *err = NULL;

        sh_fs_walk_free(TAKE_PTR(j->w));
        j->count = 0;
        j->bytes = 2; /* "[" and "]" */
        if (sh_fs_walk_open_at(j->top, j->shown, &j->o, &j->w, &err) < 0) {
                f_error(&j->e, err ? err->errnum : ENOMEM, j->shown, "list");
                sh_error_release(&err);
                return -1;
        }
        if (sh_buf_append(b, "[", 1) < 0)
                return os_err_code(&j->e, OS_E_RUNTIME, "out of memory");
        return 0;
}

/* The FileInfo of entry e appended to b (after a comma but for the first), counted against
 * the bounds. 0, or -1 with j->e filled. */
static int wjob_add(wjob *j, sh_buf *b, const sh_fs_entry *e)
{
        cJSON *fi = f_file_info(&j->f, e->path, e->stx);
        char *text = fi ? cJSON_PrintUnformatted(fi) : NULL;
        bool comma = j->count > 0;
        int r = -1;

        cJSON_Delete(fi);
        if (!text)
                os_err_code(&j->e, OS_E_RUNTIME, "out of memory");
        else if (++j->count > WALK_ENTRIES_MAX)
                os_err_code(&j->e, OS_E_BAD_BODY, "more than %u entries: narrow the path or depth",
                            WALK_ENTRIES_MAX);
        else if ((j->bytes += strlen(text) + comma) > j->max)
                os_err_code(&j->e, OS_E_BAD_BODY,
                            "the answer would pass %" PRIu64
                            " bytes (SANDBOX_HOST_LISTING_MAX): narrow the path or depth",
                            j->max);
        else if ((comma && sh_buf_append(b, ",", 1) < 0) ||
                 sh_buf_append(b, text, strlen(text)) < 0)
                os_err_code(&j->e, OS_E_RUNTIME, "out of memory");
        else
                r = 0;
        free(text);
        return r;
}

/* One walker step, its entry (or the closing "]") into b. 1, 0 at the end, -1 with j->e
 * filled. */
static int wjob_step(void *data, sh_buf *b)
{
        wjob *j = data;
        sh_error *err = NULL;
        sh_fs_entry e;
        int k = sh_fs_walk_next(j->w, &e, &err);

        if (k < 0 && err && err->errnum == E2BIG)
                os_err_code(&j->e, OS_E_BAD_BODY,
                            "'%s': the directories on one path below it hold more than %u MiB "
                            "of names: narrow the path or depth",
                            j->shown, WALK_HELD_MAX >> 20);
        else if (k < 0)
                f_error(&j->e, err ? err->errnum : EIO, j->shown, "list");
        else if (k == 1 && wjob_add(j, b, &e) < 0)
                k = -1;
        else if (k == 0 && sh_buf_append(b, "]", 1) < 0)
                k = os_err_code(&j->e, OS_E_RUNTIME, "out of memory");
        sh_error_release(&err);
        return k < 0 ? -1 : k;
}

static void wjob_failed(void *data, sh_request *r, bool sent, int k)
{
        wjob *j = data;

        (void)k;
        if (!sent)
                os_reply_err(r, &j->e);
        else
                log_warn("listing-cut", sh_request_log_id(r),
                         "the answer below '%s' was cut after %" PRIu64 " entries: %s", j->shown,
                         j->count, j->e.message);
}

static const sh_body_job_ops wjob_body = {
        .step = wjob_step, .again = wjob_again, .failed = wjob_failed};

/* The directory to walk: `path` itself must be a directory (a link there is a 400, as execd),
 * readable by the sandbox's uid. */
static int walk_top(fctx *f, const char *p, const char *shown, os_err *e)
{
        _cleanup_close_ int fd = -1;
        struct statx s;

        if ((fd = f_open(f, p, O_PATH | O_NOFOLLOW, &s, shown, "list", e)) < 0)
                return -1;
        if (S_ISLNK(s.stx_mode))
                return os_err_code(e, OS_E_BAD_BODY, "'%s' is a link: pass the directory it names",
                                   shown);
        if (!S_ISDIR(s.stx_mode))
                return f_error(e, ENOTDIR, shown, "list");
        if (!f_may(f, fd, &s, OS_MAY_READ | OS_MAY_EXEC))
                return f_error(e, EACCES, shown, "list");
        return TAKE_FD(fd);
}

static void run_walk(sh_request *r, const char *pattern, unsigned depth)
{
        const sh_query_param *q = f_query_path(r);
        _cleanup_free_ char *p = NULL;
        wjob *j;

        if (!q)
                return;
        j = calloc(1, sizeof(*j));
        if (!j || (pattern && !(j->pattern = strdup(pattern))) || !(j->shown = strdup(q->val))) {
                if (j)
                        free(j->pattern);
                free(j);
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        j->top = -1;
        if (fctx_init(r, &j->f) < 0) {
                wjob_release(j);
                return;
        }
        j->max = os_ctx_of(r)->cfg->listing_max;
        j->o = (sh_fs_walk_opts){
                .all = !pattern,
                .max_depth = depth,
                .pattern = j->pattern,
                .pattern_path = pattern && strchr(pattern, '/'),
                .may_enter = walk_may_enter,
                .data = &j->f,
                .held_max = WALK_HELD_MAX,
        };
        f_read_maps(&j->f); /* once, before the walk: the names of every entry */
        if (!(p = f_path(q->val, q->val_len, &j->e)) ||
            (j->top = walk_top(&j->f, p, q->val, &j->e)) < 0 || wjob_again(j, &j->bj.rj.ss.b) < 0) {
                os_reply_err(r, &j->e);
                wjob_release(j);
                return;
        }
        /* the walk needs no more of the sandbox's root than the top directory */
        j->f.root = j->f.fs.root = sh_close(j->f.root);
        j->bj.head = WALK_HEAD_MAX;
        j->bj.block = WALK_BLOCK;
        j->bj.type = "application/json";
        if (!sh_body_job_start(&j->bj, r, os_ctx_of(r)->loop, &wjob_ops, &wjob_body, "walk"))
                wjob_release(j);
}

void os_files_list(sh_request *r)
{
        uint64_t depth;
        bool has;

        if (f_query_uint(r, "depth", &depth, &has) < 0)
                return;
        if (!has || depth == 0)
                depth = 1;
        if (depth > WALK_DEPTH_MAX)
                depth = WALK_DEPTH_MAX;
        run_walk(r, NULL, (unsigned)depth);
}

void os_files_search(sh_request *r)
{
        const sh_query_param *pat = sh_query_find(sh_request_query(r), "pattern");
        const char *pattern = pat && pat->val_len ? pat->val : "**";

        if (pat && memchr(pat->val, '\0', pat->val_len)) {
                os_reply_code(r, OS_E_BAD_BODY, "the pattern holds a NUL byte");
                return;
        }
        run_walk(r, pattern, WALK_DEPTH_MAX);
}

/* ---- GET /files/info ---------------------------------------------------------------------------- */

/* The query's `path=`s (the first PATHS_MAX of them), one an entry: the entry itself (a link is
 * shown as a link, never followed). */
static int info_entry(f_pjob *j)
{
        const sh_query_param *qp = f_pjob_next_path(j);
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -1;
        struct statx s;
        cJSON *fi;

        if (!qp)
                return 0;
        if (!(p = f_path(qp->val, qp->val_len, &j->e)) ||
            (fd = f_open(&j->f, p, O_PATH | O_NOFOLLOW, &s, qp->val, "info", &j->e)) < 0)
                return -1;
        if (cJSON_GetObjectItemCaseSensitive(j->out, qp->val))
                return 1; /* asked twice: one answer */
        if (!(fi = f_file_info(&j->f, qp->val, &s)) ||
            !cJSON_AddItemToObject(j->out, qp->val, fi)) {
                cJSON_Delete(fi);
                return os_err_code(&j->e, OS_E_RUNTIME, "out of memory");
        }
        return 1;
}

void os_files_info(sh_request *r)
{
        cJSON *out;

        if (!f_query_path(r))
                return;
        if (!(out = cJSON_CreateObject())) {
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        f_pjob_run(r, NULL, out, info_entry);
}
