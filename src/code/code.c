/* code.c: the code interpreter's service (code.h; OPENSANDBOX.md section 3.3). A context is one
 * exec session of the sandbox's running its language's driver with an input pipe (cells) and
 * a frames pipe (fd 3); its life:
 *
 *   STARTING --ready frame--> IDLE <--done frame-- BUSY (a cell sent)
 *      |                        |                    |
 *      '--the exit (127: the interpreter missing; a fail frame: its message)--> freed
 *                               '--the exit, a broken frame, a kill--> DEAD (a cell: its death)
 *
 * Everything the sandbox writes is untrusted: a frame line longer than result_max + 64 KiB, a
 * malformed one, or one that comes out of turn breaks the context (killed; its cell ends with
 * its death), never more. A cell's timeout or a consumer gone: SIGINT, then the kill after
 * SH_CODE_GRACE_MS. Idle (or dead) contexts end after idle_ms. */
#include "sh/code.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sh/bgexec.h"
#include "sh/buf.h"
#include "sh/codeframe.h"
#include "sh/exec.h"
#include "sh/list.h"
#include "sh/log.h"
#include "sh/macro.h"
#include "sh/random.h"
#include "sh/sandbox.h"
#include "sh/util.h"

#define START_ERR_MAX 4096        /* stderr kept to explain a driver that did not start */
#define READ_MAX      (16u << 10) /* one output chunk: the consumer's events per line */
#define DEATH_MAX     256

typedef enum {
        SH_CODE_STARTING, /* its driver has not said ready */
        SH_CODE_IDLE,
        SH_CODE_BUSY, /* a cell runs */
        SH_CODE_DEAD, /* its process ended: asked cells are refused naming why, until its delete
                       * or its idle time */
} sh_code_state;

struct sh_code_set {
        sh_code_env env;
        sh_sandbox *sb;
        char log_id[SH_ID_LEN + 1];
        sh_code_ctx *ctxs; /* oldest first */
        sh_code_ctx *tail;
        unsigned n;
};

struct sh_code_ctx {
        unsigned refs;    /* the set's (until deleted), the exec's (until its end), a call's */
        sh_code_set *set; /* NULL once out of it */
        sh_loop *loop;
        uint64_t idle_ms, frame_max;
        char log_id[SH_ID_LEN + 1];
        char id[SH_UUID_LEN + 1];
        sh_code_lang lang;
        sh_code_state state;
        uint64_t count;
        bool once;  /* ended after its cell */
        sh_exec *e; /* the consumer's reference, until the exec's end */
        bool paused;

        sh_code_framebuf frames; /* the frames pipe's lines */
        uint64_t result_max;     /* a result's bundle at most */
        sh_buf start_err;
        char *fail_msg;        /* the driver's fail frame */
        char death[DEATH_MAX]; /* why it broke or died ("": not yet) */

        sh_code_ready_fn ready_fn;
        void *ready_data;

        sh_code_event_fn cell_fn; /* the running cell's consumer; NULL: none or detached */
        void *cell_data;
        bool cell; /* a cell runs (BUSY), its END not yet given */
        uint64_t cell_start_ms;
        cJSON *cell_error;    /* its error frame, held for the END */
        sh_timer *cell_timer; /* its timeout, then the grace */
        bool grace;
        sh_timer *idle_timer;

        SH_LIST_FIELDS(sh_code_ctx, all);
};

/* ---- references and timers ----------------------------------------------------------------- */

/* Out of line: the release build's inlining shows GCC's -Wuse-after-free a free in one unref
 * and a use in the next, which it cannot tell a call's own reference (refs++ first) keeps
 * from happening. */
static __attribute__((noinline)) void ctx_free(sh_code_ctx *c)
{
        sh_loop_cancel_timer(c->loop, c->cell_timer);
        sh_loop_cancel_timer(c->loop, c->idle_timer);
        sh_exec_detach(c->e);
        sh_code_framebuf_done(&c->frames);
        sh_buf_done(&c->start_err);
        cJSON_Delete(c->cell_error);
        free(c->fail_msg);
        free(c);
}

static void ctx_unref(sh_code_ctx *c)
{
        if (c && --c->refs == 0)
                ctx_free(c);
}

static void unlink_ctx(sh_code_ctx *c)
{
        sh_code_set *s = c->set;

        if (!s)
                return;
        if (s->tail == c)
                s->tail = c->all_prev;
        SH_LIST_REMOVE(all, s->ctxs, c);
        s->n--;
        c->set = NULL;
        ctx_unref(c);
}

static void idle_fired(sh_loop *l, sh_timer *t, void *data)
{
        sh_code_ctx *c = data;

        c->idle_timer = NULL;
        log_info("code-context-idle", c->log_id, "context %s ended after %llu ms idle", c->id,
                 (unsigned long long)c->idle_ms);
        sh_code_context_delete(c);
}

static void idle_arm(sh_code_ctx *c)
{
        sh_loop_cancel_timer(c->loop, c->idle_timer);
        c->idle_timer = c->set ? sh_loop_add_timer(c->loop, c->idle_ms, idle_fired, c) : NULL;
}

/* ---- its breaking and its end -------------------------------------------------------------- */

/* The context cannot go on (a frame it should not have sent, a cell that would not stop): its
 * processes killed; the exec's end then ends its cell with `why`. */
static void ctx_break(sh_code_ctx *c, const char *why)
{
        if (!c->death[0])
                snprintf(c->death, sizeof(c->death), "%s", why);
        log_warn("code-context-broken", c->log_id, "context %s: %s", c->id, why);
        if (c->e)
                sh_exec_kill(c->e, why);
}

static void cell_end(sh_code_ctx *c, sh_code_end how, const char *ename, const char *evalue,
                     const cJSON *tb)
{
        sh_code_event ev = {.type = SH_CODE_EV_END, .execution_count = c->count};
        sh_code_event_fn fn = c->cell_fn;
        uint64_t now = sh_now_ms();

        sh_loop_cancel_timer(c->loop, c->cell_timer);
        c->cell_timer = NULL;
        c->grace = false;
        c->cell = false;
        c->cell_fn = NULL;
        sh_code_resume(c); /* the next cell's consumer starts unpaused */
        ev.end.how = how;
        ev.end.time_ms = now > c->cell_start_ms ? now - c->cell_start_ms : 0;
        ev.end.ename = ename;
        ev.end.evalue = evalue;
        ev.end.traceback = tb;
        if (fn)
                fn(c, &ev, c->cell_data);
        cJSON_Delete(TAKE_PTR(c->cell_error));
}

/* The interpreter is not in the image: the shell's exit 127, or its "not found" on stderr. */
static bool interpreter_missing(const sh_code_ctx *c, const sh_exec_event *ev)
{
        if (ev->type == SH_EXEC_EV_EXIT && ev->exit.code == 127)
                return true;
        return c->start_err.len && (memmem(c->start_err.p, c->start_err.len, "not found", 9) ||
                                    memmem(c->start_err.p, c->start_err.len, "No such file", 12));
}

/* The create's answer (once), then the context leaves the set if it failed. */
static void ready(sh_code_ctx *c, const sh_error *err)
{
        sh_code_ready_fn fn = TAKE_PTR(c->ready_fn);

        if (fn)
                fn(c, err, c->ready_data);
}

static void start_failed(sh_code_ctx *c, const sh_exec_event *ev)
{
        sh_error *err = NULL;
        char why[512];

        if (c->fail_msg)
                sh_error_new(&err, SH_E_INVALID, "the %s context cannot start: %s",
                             sh_code_lang_name(c->lang), c->fail_msg);
        else if (interpreter_missing(c, ev))
                sh_error_new(&err, SH_E_INVALID,
                             "the sandbox's image has no %s: the %s language needs it",
                             sh_code_interpreter(c->lang), sh_code_lang_name(c->lang));
        else {
                sh_exec_failure_text(ev, c->start_err.p, c->start_err.len, why, sizeof(why));
                sh_error_new(&err, SH_E_INTERNAL, "the %s context did not start: %s",
                             sh_code_lang_name(c->lang), c->death[0] ? c->death : why);
        }
        unlink_ctx(c);
        ready(c, err);
        sh_error_release(&err);
}

static void exec_ended(sh_code_ctx *c, const sh_exec_event *ev)
{
        if (c->state == SH_CODE_STARTING) {
                start_failed(c, ev);
        } else {
                char why[DEATH_MAX];

                if (c->death[0])
                        snprintf(why, sizeof(why), "%s", c->death);
                else if (ev->type == SH_EXEC_EV_EXIT)
                        sh_exec_exit_text(&ev->exit, ev->why, why, sizeof(why));
                else
                        snprintf(why, sizeof(why), "%s",
                                 ev->why          ? ev->why
                                 : ev->error.text ? ev->error.text
                                                  : "ended");
                snprintf(c->death, sizeof(c->death), "the context ended: %.*s",
                         (int)(sizeof(c->death) - 32), why);
                c->state = SH_CODE_DEAD;
                log_info("code-context-end", c->log_id, "context %s: %s", c->id, c->death);
                if (c->cell)
                        cell_end(c, SH_CODE_END_DEATH, "ContextDied", c->death, NULL);
                if (c->once)
                        unlink_ctx(c);
                else
                        idle_arm(c); /* a dead one stays to be asked, then goes */
        }
        sh_exec_detach(TAKE_PTR(c->e)); /* ended: only the reference goes */
}

/* ---- frames ---------------------------------------------------------------------------------- */

/* An error frame kept for the cell's end: {ename, evalue, traceback}. */
static int error_keep(sh_code_ctx *c, const sh_code_frame *f)
{
        cJSON *o = cJSON_CreateObject(), *tb = cJSON_AddArrayToObject(o, "traceback");
        size_t i;

        c->cell_error = o;
        if (!tb || !cJSON_AddStringToObject(o, "ename", f->ename ? f->ename : "") ||
            !cJSON_AddStringToObject(o, "evalue", f->evalue ? f->evalue : ""))
                return -1;
        for (i = 0; i < f->traceback_n; i++)
                if (!cJSON_AddItemToArray(tb, cJSON_CreateString(f->traceback[i])))
                        return -1;
        return 0;
}

static void take_frame(sh_code_ctx *c, const char *line, size_t len)
{
        sh_code_frame f;
        sh_code_event ev = {.type = SH_CODE_EV_RESULT};

        if (sh_code_frame_parse(line, len, c->result_max, &f) < 0) {
                ctx_break(c, "the interpreter sent a malformed frame");
                return;
        }
        switch (f.type) {
        case SH_CODE_FRAME_READY:
                if (c->state != SH_CODE_STARTING)
                        break;
                c->state = SH_CODE_IDLE;
                idle_arm(c);
                ready(c, NULL);
                sh_code_frame_done(&f);
                return;
        case SH_CODE_FRAME_FAIL:
                if (c->state != SH_CODE_STARTING || c->fail_msg)
                        break;
                c->fail_msg = strdup(f.msg ? f.msg : "");
                sh_code_frame_done(&f);
                return;
        case SH_CODE_FRAME_RESULT:
                if (!c->cell || c->grace)
                        break;
                ev.execution_count = c->count;
                ev.bundle = f.bundle;
                if (c->cell_fn)
                        c->cell_fn(c, &ev, c->cell_data);
                sh_code_frame_done(&f);
                return;
        case SH_CODE_FRAME_ERROR:
                if (!c->cell || c->cell_error)
                        break;
                if (error_keep(c, &f) < 0) {
                        sh_code_frame_done(&f);
                        ctx_break(c, "out of memory");
                        return;
                }
                sh_code_frame_done(&f);
                return;
        case SH_CODE_FRAME_DONE:
                if (!c->cell)
                        break;
                sh_code_frame_done(&f);
                c->state = SH_CODE_IDLE;
                if (c->cell_error)
                        cell_end(c, SH_CODE_END_ERROR,
                                 cJSON_GetStringValue(cJSON_GetObjectItem(c->cell_error, "ename")),
                                 cJSON_GetStringValue(cJSON_GetObjectItem(c->cell_error, "evalue")),
                                 cJSON_GetObjectItem(c->cell_error, "traceback"));
                else
                        cell_end(c, SH_CODE_END_OK, NULL, NULL, NULL);
                if (c->once)
                        sh_code_context_delete(c);
                else if (c->state == SH_CODE_IDLE)
                        idle_arm(c);
                return;
        default:
                break;
        }
        sh_code_frame_done(&f);
        ctx_break(c, "the interpreter sent a frame out of turn");
}

/* Frames bytes: whole lines taken, a line past the bound breaks the context. */
static void feed_frames(sh_code_ctx *c, const char *p, size_t n)
{
        const char *line;
        size_t len;
        int r;

        if (c->death[0])
                return; /* broken: what it still says is not read */
        r = sh_code_framebuf_append(&c->frames, p, n);
        while (r == 0 && !c->death[0] && c->e &&
               (r = sh_code_framebuf_take(&c->frames, &line, &len)) == 1) {
                take_frame(c, line, len);
                r = 0;
        }
        if (r < 0 && !c->death[0])
                ctx_break(c, r == -2 ? "out of memory"
                                     : "the interpreter sent a frame over its bound");
}

/* ---- the exec's events ----------------------------------------------------------------------- */

static void on_exec(sh_exec *e, const sh_exec_event *ev, void *data)
{
        sh_code_ctx *c = data;
        sh_code_event out = {.type = SH_CODE_EV_OUTPUT};

        c->refs++;
        switch (ev->type) {
        case SH_EXEC_EV_CHUNK:
                if ((int)ev->chunk.stream == SH_EXEC_FRAMES) {
                        feed_frames(c, ev->chunk.data, ev->chunk.len);
                } else if (c->state == SH_CODE_STARTING) {
                        if (ev->chunk.stream == SH_EXEC_STDERR && c->start_err.len < START_ERR_MAX)
                                (void)sh_buf_append(&c->start_err, ev->chunk.data,
                                                    ev->chunk.len < START_ERR_MAX - c->start_err.len
                                                            ? ev->chunk.len
                                                            : START_ERR_MAX - c->start_err.len);
                } else if (c->cell && c->cell_fn) {
                        out.execution_count = c->count;
                        out.output.stream = ev->chunk.stream == SH_EXEC_STDERR ? 1 : 0;
                        out.output.data = ev->chunk.data;
                        out.output.len = ev->chunk.len;
                        c->cell_fn(c, &out, c->cell_data);
                }
                break;
        case SH_EXEC_EV_HEARTBEAT:
                break;
        case SH_EXEC_EV_EXIT:
        case SH_EXEC_EV_ERROR:
                exec_ended(c, ev);
                ctx_unref(c); /* the exec's */
                break;
        }
        ctx_unref(c);
}

/* ---- the set --------------------------------------------------------------------------------- */

sh_code_set *sh_code_set_new(const sh_code_env *env, sh_sandbox *sb)
{
        sh_code_set *s = calloc(1, sizeof(*s));

        if (!s)
                return NULL;
        s->env = *env;
        s->sb = sh_sandbox_ref(sb);
        snprintf(s->log_id, sizeof(s->log_id), "%s", sh_sandbox_id(sb));
        return s;
}

void sh_code_set_free(sh_code_set *s)
{
        if (!s)
                return;
        /* Their processes die with the sandbox; the engine then ends each exec, which ends a
         * running cell with its death and frees the context. */
        while (s->ctxs)
                sh_code_context_delete(s->ctxs);
        sh_sandbox_unref(s->sb);
        free(s);
}

/* ---- contexts -------------------------------------------------------------------------------- */

int sh_code_context_new(sh_code_set *s, sh_code_lang lang, const char *cwd, sh_code_ready_fn fn,
                        void *data, sh_code_ctx **ret, sh_error **err)
{
        static const char *const env_text = "{\"MPLBACKEND\":\"Agg\",\"PYTHONUNBUFFERED\":\"1\"}";
        sh_exec_opts eo = {.input = true,
                           .frames = true,
                           .read_max = READ_MAX,
                           .rate_charge_min = SH_BG_CHARGE_MIN};
        _cleanup_cjson_ cJSON *env = NULL;
        char *argv[8] = {0}, num[SH_CODE_ARGV_BUF];
        sh_code_ctx *c;

        if (s->n >= s->env.contexts_max)
                return sh_error_new(err, SH_E_INVALID,
                                    "the sandbox holds %u code contexts already, its most "
                                    "(SANDBOX_HOST_CODE_CONTEXTS_MAX): delete one first",
                                    s->n);
        if (cwd && strlen(cwd) > SH_CODE_CWD_MAX)
                return sh_error_new(err, SH_E_INVALID, "'cwd' is a path of at most %d bytes",
                                    SH_CODE_CWD_MAX);
        env = cJSON_Parse(env_text);
        c = calloc(1, sizeof(*c));
        if (!c || !env) {
                free(c);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        c->loop = s->env.loop;
        c->idle_ms = s->env.idle_ms;
        c->frame_max = s->env.result_max + SH_CODE_FRAME_SLACK;
        c->result_max = s->env.result_max;
        c->lang = lang;
        c->state = SH_CODE_STARTING;
        c->ready_fn = fn;
        c->ready_data = data;
        snprintf(c->log_id, sizeof(c->log_id), "%s", s->log_id);
        if (sh_random_uuid(c->id) < 0) {
                free(c);
                return sh_error_make(err, errno, "cannot draw the context's id");
        }
        if (sh_code_driver_argv(lang, cwd ? cwd : "", s->env.result_max, num, sizeof(num), argv) <
            0) {
                free(c);
                return sh_error_new(err, SH_E_INVALID, "no such language");
        }
        /* Its reads billed to the sandbox's rate of unattended output: what a context writes
         * between cells (a thread of its own printing on) is read and dropped, so it must not
         * take the daemon's one thread at the pipe's speed. */
        if (!(eo.rate = sh_bgexec_rate(s->sb, err))) {
                free(c);
                return -1;
        }
        sh_code_framebuf_init(&c->frames, c->frame_max);
        if (sh_sandbox_exec(s->sb, argv, env, &eo, on_exec, c, &c->e, err) < 0) {
                sh_code_framebuf_done(&c->frames);
                free(c);
                return -1;
        }
        c->refs = 2; /* the set's, the exec's */
        c->set = s;
        SH_LIST_INSERT_AFTER(all, s->ctxs, s->tail, c);
        s->tail = c;
        s->n++;
        log_info("code-context-start", c->log_id, "context %s (%s) starting", c->id,
                 sh_code_lang_name(lang));
        *ret = c;
        return 0;
}

void sh_code_context_cancel(sh_code_ctx *c)
{
        c->ready_fn = NULL;
        sh_code_context_delete(c);
}

sh_code_ctx *sh_code_context_find(sh_code_set *s, const char *id, size_t len)
{
        sh_code_ctx *c;

        if (!s || !id || len != SH_UUID_LEN)
                return NULL;
        for (c = s->ctxs; c; c = c->all_next)
                if (c->state != SH_CODE_STARTING && memcmp(c->id, id, SH_UUID_LEN) == 0)
                        return c;
        return NULL;
}

void sh_code_context_list(sh_code_set *s, bool all, sh_code_lang lang,
                          void (*fn)(sh_code_ctx *c, void *data), void *data)
{
        sh_code_ctx *c;

        for (c = s ? s->ctxs : NULL; c; c = c->all_next)
                if (c->state != SH_CODE_STARTING && !c->once && (all || c->lang == lang))
                        fn(c, data);
}

void sh_code_context_delete(sh_code_ctx *c)
{
        c->refs++;
        sh_loop_cancel_timer(c->loop, TAKE_PTR(c->idle_timer));
        if (c->e) {
                if (!c->death[0])
                        snprintf(c->death, sizeof(c->death), "the context was deleted");
                sh_exec_kill(c->e, "the context was deleted");
        }
        unlink_ctx(c);
        ctx_unref(c);
}

unsigned sh_code_context_delete_lang(sh_code_set *s, sh_code_lang lang)
{
        sh_code_ctx *c, *next;
        unsigned n = 0;

        for (c = s ? s->ctxs : NULL; c; c = next) {
                next = c->all_next;
                if (c->lang == lang && c->state != SH_CODE_STARTING && !c->once) {
                        sh_code_context_delete(c);
                        n++;
                }
        }
        return n;
}

const char *sh_code_context_id(const sh_code_ctx *c)
{
        return c->id;
}

sh_code_lang sh_code_context_lang(const sh_code_ctx *c)
{
        return c->lang;
}

void sh_code_context_once(sh_code_ctx *c)
{
        c->once = true;
}

/* ---- cells ----------------------------------------------------------------------------------- */

static void grace_fired(sh_loop *l, sh_timer *t, void *data)
{
        sh_code_ctx *c = data;

        c->cell_timer = NULL;
        ctx_break(c, c->cell_fn ? "the cell timed out and did not stop on its interrupt"
                                : "the cell's client went away and it did not stop on its "
                                  "interrupt");
}

/* Interrupt it, and kill the context if it has not ended after the grace. */
static void interrupt_then_kill(sh_code_ctx *c)
{
        if (!c->cell || c->grace)
                return;
        sh_loop_cancel_timer(c->loop, c->cell_timer);
        c->grace = true;
        sh_exec_signal(c->e, SIGINT);
        c->cell_timer = sh_loop_add_timer(c->loop, SH_CODE_GRACE_MS, grace_fired, c);
        if (!c->cell_timer)
                ctx_break(c, "out of memory");
}

static void timeout_fired(sh_loop *l, sh_timer *t, void *data)
{
        sh_code_ctx *c = data;

        c->cell_timer = NULL;
        log_info("code-cell-timeout", c->log_id, "context %s: its cell timed out", c->id);
        interrupt_then_kill(c);
}

int sh_code_run(sh_code_ctx *c, const char *code, size_t n, uint64_t timeout_ms,
                sh_code_event_fn fn, void *data, sh_error **err)
{
        char head[32];
        int hn;

        if (c->state == SH_CODE_BUSY)
                return sh_error_new(err, SH_E_BUSY,
                                    "context %s runs a cell already: wait for its end or "
                                    "interrupt it",
                                    c->id);
        if (c->state != SH_CODE_IDLE || !c->e)
                return sh_error_new(err, SH_E_INVALID, "context %s cannot run a cell: %s", c->id,
                                    c->death[0] ? c->death : "it is not ready");
        if (n > SH_CODE_CELL_MAX)
                return sh_error_new(err, SH_E_TOO_LARGE, "a cell is at most %u bytes",
                                    SH_CODE_CELL_MAX);
        hn = snprintf(head, sizeof(head), "%zu\n", n);
        if (sh_exec_write(c->e, head, (size_t)hn, err) < 0 || sh_exec_write(c->e, code, n, err) < 0)
                return -1;
        if (timeout_ms) {
                c->cell_timer = sh_loop_add_timer(c->loop, timeout_ms, timeout_fired, c);
                if (!c->cell_timer) {
                        ctx_break(c, "out of memory");
                        return sh_error_make(err, ENOMEM, "out of memory");
                }
        }
        sh_loop_cancel_timer(c->loop, TAKE_PTR(c->idle_timer));
        c->state = SH_CODE_BUSY;
        c->cell = true;
        c->grace = false;
        c->count++;
        c->cell_fn = fn;
        c->cell_data = data;
        c->cell_start_ms = sh_now_ms();
        return 0;
}

void sh_code_pause(sh_code_ctx *c)
{
        if (c->e && !c->paused) {
                c->paused = true;
                sh_exec_pause(c->e);
        }
}

void sh_code_resume(sh_code_ctx *c)
{
        if (c->e && c->paused) {
                c->paused = false;
                sh_exec_resume(c->e);
        }
}

void sh_code_detach(sh_code_ctx *c)
{
        c->cell_fn = NULL;
        sh_code_resume(c); /* nobody reads: its output drains to nothing */
        interrupt_then_kill(c);
}

void sh_code_interrupt(sh_code_ctx *c)
{
        if (c->cell && c->e)
                sh_exec_signal(c->e, SIGINT);
}
