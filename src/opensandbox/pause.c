/* pause.c: POST /v1/sandboxes/{id}/pause and …/resume (OPENSANDBOX.md section 2) through the
 * cgroup freezer (v1 freezer.state, v2 cgroup.freeze): Pausing until every process of the
 * sandbox is frozen, looked at from loop timers (the loop never waits for a freeze), then
 * Paused; Resuming, then Running. The freeze is a hold on the sandbox (sh_sandbox_freeze_hold):
 * a persist or snapshot of a paused sandbox never thaws it, and a resume during a snapshot's
 * copy leaves the copy frozen until it ends. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "os-internal.h"

#define SB OS_R_SANDBOX
/* How long a sandbox may take to freeze (a task in an uninterruptible sleep delays it), and
 * the longest gap between two looks at the freezer. */
#define FREEZE_TIMEOUT_MS  5000
#define FREEZE_POLL_MAX_MS 16

/* What a record keeps (rec->pause). */
typedef struct pause_st {
        os_record *rec; /* borrowed: the record owns this */
        bool held;      /* a freeze hold is taken (Pausing, Paused) */
        sh_timer *t;    /* Pausing: the next look; Resuming: the step to Running */
        uint64_t deadline_ms;
        unsigned delay_ms;
} pause_st;

static pause_st *pause_of(os_record *rec)
{
        pause_st *p = rec->pause;

        if (!p && (p = calloc(1, sizeof(*p))))
                p->rec = rec;
        rec->pause = p;
        return p;
}

static void cancel_timer(pause_st *p)
{
        if (p->t)
                sh_loop_cancel_timer(p->rec->ctx->loop, p->t);
        p->t = NULL;
}

/* Give the hold back (the last holder's release thaws). */
static void release(pause_st *p)
{
        sh_error *err = NULL;

        if (!p->held)
                return;
        p->held = false;
        if (p->rec->sb && sh_sandbox_freeze_release(p->rec->sb, &err) < 0)
                os_record_log(p->rec, SH_LOG_WARN, "resume-failed", "thawing: %s",
                              err && err->msg ? err->msg : "");
        sh_error_release(&err);
}

/* The pause did not happen: back to Running, thawed, saying why. */
static void pause_failed(pause_st *p, const char *why)
{
        cancel_timer(p);
        release(p);
        os_record_log(p->rec, SH_LOG_WARN, "pause-failed", "%s", why);
        os_record_set_state(p->rec, OS_RUNNING, "pause_failed", "the pause failed: %s", why);
}

static void freeze_tick(sh_loop *l, sh_timer *t, void *data)
{
        pause_st *p = data;
        sh_error *err = NULL;
        bool frozen = false;

        p->t = NULL;
        if (!p->rec->sb)
                return;
        if (sh_sandbox_freeze_poll(p->rec->sb, &frozen, &err) < 0) {
                char why[300];

                snprintf(why, sizeof(why), "reading the freezer: %s",
                         err && err->msg ? err->msg : "");
                sh_error_release(&err);
                pause_failed(p, why);
                return;
        }
        if (frozen) {
                os_record_set_state(p->rec, OS_PAUSED, "paused", "the sandbox is paused");
                os_record_log(p->rec, SH_LOG_INFO, "sandbox-paused", "every process is frozen");
                return;
        }
        if (sh_now_ms() >= p->deadline_ms) {
                pause_failed(p, "the sandbox did not freeze within 5 s (a process in an "
                                "uninterruptible sleep?)");
                return;
        }
        if (p->delay_ms < FREEZE_POLL_MAX_MS)
                p->delay_ms *= 2;
        p->t = sh_loop_add_timer(l, p->delay_ms, freeze_tick, p);
        if (!p->t)
                pause_failed(p, "out of memory");
}

static void api_pause(sh_request *r)
{
        os_record *rec = os_request_record(r);
        sh_error *err = NULL;
        pause_st *p;

        if (rec->state != OS_RUNNING || !rec->sb) {
                os_reply_code(r, OS_E_INVALID_STATE,
                              "only a Running sandbox can be paused: it is %s",
                              os_state_name(rec->state));
                return;
        }
        p = pause_of(rec);
        if (!p) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        /* Asks the kernel to freeze every process of the sandbox (not the helpers working for
         * it); never waits: the ticks look at the freezer. */
        if (sh_sandbox_freeze_hold(rec->sb, &err) < 0) {
                os_reply_code(r, OS_E_INTERNAL, "cannot freeze the sandbox: %s",
                              err && err->msg ? err->msg : "");
                sh_error_release(&err);
                return;
        }
        p->held = true;
        p->delay_ms = 1;
        p->deadline_ms = sh_now_ms() + FREEZE_TIMEOUT_MS;
        p->t = sh_loop_add_timer(rec->ctx->loop, 0, freeze_tick, p);
        if (!p->t) {
                release(p);
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        os_record_set_state(rec, OS_PAUSING, "pause_requested", "the sandbox is being frozen");
        os_record_log(rec, SH_LOG_INFO, "sandbox-pause", "pausing");
        os_reply_empty(r, 202);
}

static void resumed(sh_loop *l, sh_timer *t, void *data)
{
        pause_st *p = data;

        p->t = NULL;
        os_record_set_state(p->rec, OS_RUNNING, "resumed", "the sandbox runs");
        os_record_log(p->rec, SH_LOG_INFO, "sandbox-resumed", "thawed");
}

static void api_resume(sh_request *r)
{
        os_record *rec = os_request_record(r);
        pause_st *p = rec->pause;

        if (rec->state != OS_PAUSED || !p || !rec->sb) {
                os_reply_code(r, OS_E_INVALID_STATE,
                              "only a Paused sandbox can be resumed: it is %s",
                              os_state_name(rec->state));
                return;
        }
        os_record_set_state(rec, OS_RESUMING, "resume_requested", "the sandbox is being thawed");
        /* The pause's hold goes; the sandbox thaws unless a snapshot's copy still holds it
         * (then it thaws when the copy ends). Running from the next turn of the loop. */
        release(p);
        p->t = sh_loop_add_timer(rec->ctx->loop, 0, resumed, p);
        if (!p->t)
                resumed(rec->ctx->loop, NULL, p);
        os_reply_empty(r, 202);
}

static void record_gone(os_record *rec)
{
        pause_st *p = rec->pause;

        if (!p)
                return;
        /* The sandbox is being deleted: its kill ends frozen processes too (it thaws them
         * after the SIGKILLs, v1 and v2), so the hold is not given back first, which would
         * let them run for a moment. */
        cancel_timer(p);
        free(p);
        rec->pause = NULL;
}

void os_pause_init(os_ctx *ctx)
{
        static const os_record_observer observer = {.gone = record_gone};

        os_record_observe(ctx, &observer);
}

const sh_route os_pause_routes[] = {
        {"/v1/sandboxes/{}/pause", SH_M_POST, NULL, api_pause, SB},
        {"/v1/sandboxes/{}/resume", SH_M_POST, NULL, api_resume, SB},
};
const size_t os_pause_n_routes = ARRAY_SIZE(os_pause_routes);
