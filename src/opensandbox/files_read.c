/* files_read.c: the execd file routes that read (OPENSANDBOX.md section 3.2): download (one Range,
 * or line mode as a job of the loop), listings and searches (the walker's listing mode, its
 * answer walked twice past 256 KiB: counted, then streamed), info of many paths. */
#include <ctype.h>
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

/* Content-Disposition with the base name: plain ASCII in `filename`, the exact name in
 * RFC 5987's `filename*` (a name with quotes, CR or LF never reaches a header as such). */
static void add_disposition(sh_response *resp, const char *path)
{
        const char *base = strrchr(path, '/');
        char plain[256], enc[3 * 255 + 1];
        size_t np = 0, ne = 0;
        char *h = NULL;

        base = base ? base + 1 : path;
        for (const unsigned char *c = (const unsigned char *)base; *c && np < 255; c++) {
                plain[np++] = (*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\') ? (char)*c : '_';
                if (ne + 3 < sizeof(enc)) {
                        if (isalnum(*c) || strchr("!#$&+-.^_`|~", *c))
                                enc[ne++] = (char)*c;
                        else
                                ne += (size_t)snprintf(enc + ne, 4, "%%%02X", *c);
                }
        }
        plain[np] = enc[ne] = '\0';
        if (asprintf(&h, "attachment; filename=\"%s\"; filename*=UTF-8''%s", plain, enc) >= 0) {
                sh_response_header(resp, "Content-Disposition", h);
                free(h);
        }
}

/* Line mode (below: a job of the loop). */
static void download_lines(sh_request *r, int fd, uint64_t offset, uint64_t limit,
                           const char *shown);

void os_files_download(sh_request *r)
{
        _cleanup_(fctx_done) fctx f = {.root = -1};
        const sh_query_param *q = f_query_one(r, "path");
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -1;
        uint64_t offset, limit, from = 0, to = 0;
        bool has_off, has_lim;
        const char *range;
        struct statx s;
        sh_response *resp;
        char cr[96];
        int rr = 0;
        os_err e;

        if (!q) {
                os_reply_error(r, 400, OS_MISSING, "missing query parameter 'path'");
                return;
        }
        if (f_query_uint(r, "offset", &offset, &has_off) < 0 ||
            f_query_uint(r, "limit", &limit, &has_lim) < 0)
                return;
        if ((has_off && offset < 1) || (has_lim && limit < 1)) {
                os_reply_error(r, 400, OS_BAD_BODY, "offset and limit are at least 1");
                return;
        }
        range = sh_request_header(r, "Range");
        if ((has_off || has_lim) && range) {
                os_reply_error(r, 400, OS_BAD_BODY, "offset/limit and Range exclude each other");
                return;
        }
        if (fctx_init(r, &f) < 0)
                return;
        if (!(p = f_path(q->val, q->val_len, &e)) ||
            (fd = f_open_read(&f, p, q->val, &s, &e)) < 0) {
                os_reply_err(r, &e);
                return;
        }
        if (has_off || has_lim) {
                download_lines(r, TAKE_FD(fd), has_off ? offset : 1, limit, q->val);
                return;
        }
        if (range && (rr = sh_range_parse(range, s.stx_size, &from, &to)) < 0) {
                char msg[160];

                snprintf(cr, sizeof(cr), "bytes */%" PRIu64, (uint64_t)s.stx_size);
                snprintf(msg, sizeof(msg), "range '%.64s' is outside the file's %" PRIu64 " bytes",
                         range, (uint64_t)s.stx_size);
                os_reply_error_header(r, 416, OS_BAD_BODY, "Content-Range", cr, msg);
                return;
        }
        if (rr == 1) {
                resp = sh_response_fd_at(r, TAKE_FD(fd), from, to - from + 1);
                snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, from, to,
                         (uint64_t)s.stx_size);
                if (resp)
                        sh_response_header(resp, "Content-Range", cr);
        } else {
                /* sent from the very inode checked, with sendfile: memory does not grow */
                resp = sh_response_fd(r, TAKE_FD(fd), s.stx_size);
        }
        if (resp) {
                sh_response_header(resp, "Content-Type", "application/octet-stream");
                sh_response_header(resp, "Accept-Ranges", "bytes");
                add_disposition(resp, p);
        }
        sh_reply(r, rr == 1 ? 206 : 200, resp);
}

/* Line mode: the lines asked (sh/lines.h), read in slices: at most LINES_SLICE bytes of the
 * file (or SH_LOOP_JOB_NS) a slice, SH_FS_LINES_READ at a time. First from the loop while the
 * request waits: an answer that ends within LINES_HEAD bytes is sent whole, with its
 * Content-Length (an empty one too, as the surface's every empty answer); a longer one is
 * streamed from there, a slice each time the transport wants bytes. So the loop time of a step
 * and the memory are bounded whatever the file, and a client that does not read stops the
 * reading. A read that fails before the answer is a 500, after it cuts the stream. */
#define LINES_SLICE (1u << 20)
#define LINES_HEAD  (256u << 10)
#define LINES_TYPE  "text/plain; charset=utf-8"

typedef struct ljob {
        sh_request_job rj; /* first */
        char *shown;
        bool streaming;
        sh_fs_lines l;
} ljob;

static void ljob_release(void *data)
{
        ljob *j = data;

        sh_request_job_free(&j->rj);
        sh_close(j->l.fd);
        free(j->shown);
        free(j);
}

static const sh_pending_ops ljob_ops = {
        .gone = f_job_gone, .release = ljob_release, .read = f_job_read};

/* One read: in the head, answered once the lines end or pass LINES_HEAD; in the stream, a pause
 * once the slice made what the transport asked. */
static int ljob_step(void *data)
{
        ljob *j = data;
        sh_request_job *rj = &j->rj;
        int k = sh_fs_lines_step(&j->l, &rj->ss.b);

        if (k > 0 && j->streaming)
                return rj->ss.b.len >= rj->want ? SH_LOOP_JOB_PAUSE : 1;
        if (k > 0)
                return rj->ss.b.len < LINES_HEAD
                               ? 1
                               : (j->streaming = true,
                                  sh_request_job_stream(rj, SH_FS_LINES_READ, LINES_TYPE));
        if (k == 0 && j->streaming)
                rj->ss.ended = true;
        if (k == 0)
                return j->streaming ? SH_LOOP_JOB_DONE : sh_request_job_whole(rj, LINES_TYPE);
        if (!j->streaming) {
                os_reply_error(sh_request_job_request(rj), 500, OS_RUNTIME, "read '%s': %s",
                               j->shown, strerror(-k));
                return sh_request_job_done(rj);
        }
        log_warn("download-cut", sh_request_log_id(sh_pending_request(rj->ss.tok)),
                 "line mode of '%s': %s; the answer was cut", j->shown, strerror(-k));
        rj->cut = true;
        return SH_LOOP_JOB_DONE;
}

static void download_lines(sh_request *r, int fd, uint64_t offset, uint64_t limit,
                           const char *shown)
{
        ljob *j = calloc(1, sizeof(*j));

        if (!j || !(j->shown = strdup(shown))) {
                free(j);
                sh_close(fd);
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        sh_fs_lines_init(&j->l, fd, offset, limit);
        j->rj.job.steps = LINES_SLICE / SH_FS_LINES_READ; /* a step: one read */
        if (!f_job_start(&j->rj, r, &ljob_ops, ljob_step, "download"))
                ljob_release(j);
}

/* A listing or a search: fs/walk.c's listing mode (each directory by name, a directory's
 * entries right after it, links never followed or entered, directories entered only as
 * walk_may_enter allows), its answer a JSON array of FileInfo made as the walk goes, with
 * bounded memory whatever the tree (docs/architecture.md "Listings and searches"):
 *
 * - head: the walk runs in slices from the loop while the request waits, and the answer is
 *   kept; one that ends within WALK_HEAD_MAX bytes is sent whole (with its Content-Length),
 *   and an error met meanwhile is answered as such;
 * - count: past WALK_HEAD_MAX, what is kept is dropped and the walk goes on only counting
 *   what it would send: past SANDBOX_HOST_LISTING_MAX bytes or WALK_ENTRIES_MAX entries the
 *   answer is 400 naming the bound, before a byte of it is sent;
 * - stream: within them, the walk starts again from the same top directory and the answer
 *   is streamed (chunked) as it is walked, one slice each time the transport wants bytes
 *   (sh_sliced_stream): a client that does not read stops the walk, and the daemon holds a
 *   block and about one slice's entries for it. The status is gone by then: if the tree
 *   grew past a bound, or the walk fails, the stream is cut where it is (the client sees an
 *   unfinished chunked body and an unclosed array, never a well-formed short list) and the
 *   cut is logged.
 *
 * So a big answer is walked twice; an answer that fits the head, the common one, once. */
#define WALK_HEAD_MAX (256u << 10)
#define WALK_HELD_MAX (16u << 20) /* directory listings a walk holds (its current path's) */
#define WALK_BLOCK    (64u << 10) /* the transport's block of a streamed answer */

typedef enum { WALK_HEAD, WALK_COUNT, WALK_STREAM } walk_phase;

typedef struct wjob {
        sh_request_job rj; /* first */
        fctx f;
        int top;       /* the directory walked (O_PATH, checked by walk_top): each pass's */
        char *shown;   /* the top as asked: every path shown starts with it */
        char *pattern; /* search: a glob; NULL: a listing */
        sh_fs_walk_opts o;
        sh_fs_walker *w;
        walk_phase phase;
        sh_buf out;            /* head: the answer so far; count: the entry being counted */
        uint64_t bytes, count; /* of the answer of this pass, the brackets included */
        uint64_t max;          /* SANDBOX_HOST_LISTING_MAX */
        os_err e;
} wjob;

static void wjob_release(void *data)
{
        wjob *j = data;

        sh_fs_walk_free(j->w);
        sh_request_job_free(&j->rj);
        sh_buf_done(&j->out);
        sh_close(j->top);
        free(j->shown);
        free(j->pattern);
        fctx_done(&j->f);
        free(j);
}

/* Kernel filesystems are never entered, nor a directory the sandbox's uid could not list
 * itself (read and search). */
static bool walk_may_enter(void *data, int fd)
{
        fctx *f = data;
        struct statx s;

        return !f_kernel_fs(fd) && sh_fs_statx(fd, &s) == 0 &&
               f_may(f, fd, &s, OS_MAY_READ | OS_MAY_EXEC);
}

/* A new pass over the top directory. 0, or -1 with j->e filled. */
static int wjob_begin(wjob *j, walk_phase phase, sh_buf *b)
{
        sh_error *err = NULL;

        sh_fs_walk_free(TAKE_PTR(j->w));
        j->phase = phase;
        j->count = 0;
        j->bytes = 2; /* "[" and "]" */
        if (sh_fs_walk_open_at(j->top, j->shown, &j->o, &j->w, &err) < 0) {
                f_error(&j->e, err ? err->errnum : ENOMEM, j->shown, "list");
                sh_error_release(&err);
                return -1;
        }
        if (sh_buf_append(b, "[", 1) < 0)
                return os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
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
                os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        else if (++j->count > WALK_ENTRIES_MAX)
                os_err_set(&j->e, 400, OS_BAD_BODY,
                           "more than %u entries: narrow the path or depth", WALK_ENTRIES_MAX);
        else if ((j->bytes += strlen(text) + comma) > j->max)
                os_err_set(&j->e, 400, OS_BAD_BODY,
                           "the answer would pass %" PRIu64
                           " bytes (SANDBOX_HOST_LISTING_MAX): narrow the path or depth",
                           j->max);
        else if ((comma && sh_buf_append(b, ",", 1) < 0) ||
                 sh_buf_append(b, text, strlen(text)) < 0)
                os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        else
                r = 0;
        free(text);
        return r;
}

/* A walk that failed: why, as execd's answer. */
static void wjob_failed(wjob *j, sh_error *err)
{
        if (err && err->errnum == E2BIG)
                os_err_set(&j->e, 400, OS_BAD_BODY,
                           "'%s': the directories on one path below it hold more than %u MiB "
                           "of names: narrow the path or depth",
                           j->shown, WALK_HELD_MAX >> 20);
        else
                f_error(&j->e, err ? err->errnum : EIO, j->shown, "list");
}

/* Entry e into this pass's answer: the head keeps it (and past WALK_HEAD_MAX the pass turns to
 * counting), the count only counts it, the stream sends it. 0, or -1 with j->e filled. */
static int wjob_entry(wjob *j, const sh_fs_entry *e)
{
        sh_buf *b = j->phase == WALK_STREAM ? &j->rj.ss.b : &j->out;

        if (j->phase == WALK_COUNT)
                j->out.len = 0;
        if (wjob_add(j, b, e) < 0)
                return -1;
        if (j->phase == WALK_HEAD && j->out.len > WALK_HEAD_MAX) {
                j->phase = WALK_COUNT;
                sh_buf_done(&j->out);
        }
        return 0;
}

/* Counted within the bounds: answer with the stream, walked again from the top. */
static void wjob_stream(wjob *j, sh_request *r)
{
        sh_buf_done(&j->out);
        if (wjob_begin(j, WALK_STREAM, &j->rj.ss.b) < 0) {
                os_reply_err(r, &j->e);
                return;
        }
        sh_request_job_stream(&j->rj, WALK_BLOCK, "application/json");
}

/* The head's or the count's walk is over (k 0) or failed (k < 0, j->e filled): the answer. */
static int wjob_answer(wjob *j, int k)
{
        sh_request *r = sh_request_job_request(&j->rj);

        if (k == 0 && j->phase == WALK_COUNT) {
                wjob_stream(j, r);
        } else if (k == 0 && sh_buf_append(&j->out, "]", 1) == 0) {
                j->rj.ss.b = j->out; /* the answer, whole */
                j->out = (sh_buf){0};
                return sh_request_job_whole(&j->rj, "application/json");
        } else {
                if (k == 0)
                        os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
                os_reply_err(r, &j->e);
        }
        return sh_request_job_done(&j->rj);
}

/* The stream's walk is over (k 0) or failed (k < 0, j->e filled): its end, or its cut. */
static int wjob_stream_end(wjob *j, int k)
{
        if (k == 0 && sh_buf_append(&j->rj.ss.b, "]", 1) == 0) {
                j->rj.ss.ended = true;
                return SH_LOOP_JOB_DONE;
        }
        if (k == 0)
                os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        /* The 200 is gone: the client sees a cut stream, never a short list. */
        log_warn("listing-cut", sh_request_log_id(sh_pending_request(j->rj.ss.tok)),
                 "the answer below '%s' was cut after %" PRIu64 " entries: %s", j->shown, j->count,
                 j->e.message);
        j->rj.cut = true;
        return SH_LOOP_JOB_DONE;
}

/* One walker step of this pass, its entry into the answer: the head and the count answer once
 * the walk is over, from the loop; the stream pauses once the slice made what the transport
 * asked for. */
static int wjob_step(void *data)
{
        wjob *j = data;
        sh_error *err = NULL;
        sh_fs_entry e;
        int k = sh_fs_walk_next(j->w, &e, &err);

        if (k < 0)
                wjob_failed(j, err);
        else if (k == 1 && wjob_entry(j, &e) < 0)
                k = -1;
        sh_error_release(&err);
        if (k > 0)
                return j->phase == WALK_STREAM && j->rj.ss.b.len >= j->rj.want ? SH_LOOP_JOB_PAUSE
                                                                               : 1;
        return j->phase == WALK_STREAM ? wjob_stream_end(j, k) : wjob_answer(j, k);
}

static const sh_pending_ops wjob_ops = {
        .gone = f_job_gone, .release = wjob_release, .read = f_job_read};

/* The directory to walk: `path` itself must be a directory (a link there is a 400, as execd),
 * readable by the sandbox's uid. */
static int walk_top(fctx *f, const char *p, const char *shown, os_err *e)
{
        _cleanup_close_ int fd = -1;
        struct statx s;

        if ((fd = f_open(f, p, O_PATH | O_NOFOLLOW, &s, shown, "list", e)) < 0)
                return -1;
        if (S_ISLNK(s.stx_mode))
                return os_err_set(e, 400, OS_BAD_BODY,
                                  "'%s' is a link: pass the directory it names", shown);
        if (!S_ISDIR(s.stx_mode))
                return f_error(e, ENOTDIR, shown, "list");
        if (!f_may(f, fd, &s, OS_MAY_READ | OS_MAY_EXEC))
                return f_error(e, EACCES, shown, "list");
        return TAKE_FD(fd);
}

static void run_walk(sh_request *r, const char *pattern, unsigned depth)
{
        const sh_query_param *q = f_query_one(r, "path");
        _cleanup_free_ char *p = NULL;
        wjob *j;

        if (!q) {
                os_reply_error(r, 400, OS_MISSING, "missing query parameter 'path'");
                return;
        }
        j = calloc(1, sizeof(*j));
        if (!j || (pattern && !(j->pattern = strdup(pattern))) || !(j->shown = strdup(q->val))) {
                if (j)
                        free(j->pattern);
                free(j);
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        j->f.root = j->top = -1;
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
            (j->top = walk_top(&j->f, p, q->val, &j->e)) < 0 ||
            wjob_begin(j, WALK_HEAD, &j->out) < 0) {
                os_reply_err(r, &j->e);
                wjob_release(j);
                return;
        }
        /* the walk needs no more of the sandbox's root than the top directory */
        j->f.root = j->f.fs.root = sh_close(j->f.root);
        if (!f_job_start(&j->rj, r, &wjob_ops, wjob_step, "walk"))
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
        const sh_query_param *pat = f_query_one(r, "pattern");
        const char *pattern = pat && pat->val_len ? pat->val : "**";

        if (pat && memchr(pat->val, '\0', pat->val_len)) {
                os_reply_error(r, 400, OS_BAD_BODY, "the pattern holds a NUL byte");
                return;
        }
        run_walk(r, pattern, WALK_DEPTH_MAX);
}

/* ---- GET /files/info ---------------------------------------------------------------------------- */

/* The next `path=` of the query (the first PATHS_MAX of them), as info_entry takes them. */
static const sh_query_param *next_query_path(f_pjob *j, sh_request *r)
{
        const sh_query *q = sh_request_query(r);

        while (q && j->qi < q->n && j->taken < PATHS_MAX) {
                const sh_query_param *qp = &q->v[j->qi++];

                if (STREQ(qp->key, "path")) {
                        j->taken++;
                        return qp;
                }
        }
        return NULL;
}

static int info_entry(f_pjob *j, sh_request *r)
{
        const sh_query_param *qp = next_query_path(j, r);
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -1;
        struct statx s;
        cJSON *fi;

        if (!qp)
                return 0;
        /* the entry itself: a link is shown as a link, never followed */
        if (!(p = f_path(qp->val, qp->val_len, &j->e)) ||
            (fd = f_open(&j->f, p, O_PATH | O_NOFOLLOW, &s, qp->val, "info", &j->e)) < 0)
                return -1;
        if (cJSON_GetObjectItemCaseSensitive(j->out, qp->val))
                return 1; /* asked twice: one answer */
        fi = f_file_info(&j->f, qp->val, &s);
        if (!fi || !cJSON_AddItemToObject(j->out, qp->val, fi)) {
                cJSON_Delete(fi);
                return os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        }
        return 1;
}

void os_files_info(sh_request *r)
{
        const sh_query_param *ps[1];
        cJSON *out;

        if (f_query_paths(r, ps, 1) == 0) {
                os_reply_error(r, 400, OS_MISSING, "missing query parameter 'path'");
                return;
        }
        if (!(out = cJSON_CreateObject())) {
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        f_pjob_run(r, NULL, out, info_entry);
}
