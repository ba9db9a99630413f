/* pause.c: POST /v1/sandboxes/{id}/pause and …/resume (OPENSANDBOX.md section 2): the states
 * of a pause on the sandbox layer's (sh_sandbox_pause: a freeze hold of its own, the freezer
 * looked at from loop timers): Pausing until every process of the sandbox is frozen, then
 * Paused; Resuming, then Running from the next turn of the loop. A persist or snapshot of a
 * paused sandbox never thaws it, and a resume during a snapshot's copy leaves the copy frozen
 * until it ends (the holds are counted). */
#include "os-internal.h"

#define SB OS_R_SANDBOX

/* The sandbox layer's end of a pause: Paused, or back to Running (thawed) saying why. Never
 * called once the sandbox is deleted (its record has gone then). */
static void paused(sh_sandbox *sb, const sh_error *err, void *data)
{
        os_record *rec = os_record_of(sb);
        const char *why = err && err->msg ? err->msg : "";

        if (!rec)
                return;
        if (err) {
                os_record_log(rec, SH_LOG_WARN, "pause-failed", "%s", why);
                os_record_set_state(rec, OS_RUNNING, "pause_failed", "the pause failed: %s", why);
                return;
        }
        os_record_set_state(rec, OS_PAUSED, "paused", "the sandbox is paused");
        os_record_log(rec, SH_LOG_INFO, "sandbox-paused", "every process is frozen");
}

static void api_pause(sh_request *r)
{
        os_record *rec = os_request_record(r);
        sh_error *err = NULL;

        if (rec->state != OS_RUNNING || !rec->sb) {
                os_reply_code(r, OS_E_INVALID_STATE,
                              "only a Running sandbox can be paused: it is %s",
                              os_state_name(rec->state));
                return;
        }
        if (sh_sandbox_pause(rec->sb, paused, NULL, &err) < 0) {
                os_reply_code(r, OS_E_INTERNAL, "cannot freeze the sandbox: %s",
                              err && err->msg ? err->msg : "");
                sh_error_release(&err);
                return;
        }
        os_record_set_state(rec, OS_PAUSING, "pause_requested", "the sandbox is being frozen");
        os_record_log(rec, SH_LOG_INFO, "sandbox-pause", "pausing");
        os_reply_empty(r, 202);
}

static void resumed(sh_sandbox *sb, const sh_error *err, void *data)
{
        os_record *rec = os_record_of(sb);

        if (!rec)
                return;
        os_record_set_state(rec, OS_RUNNING, "resumed", "the sandbox runs");
        os_record_log(rec, SH_LOG_INFO, "sandbox-resumed", "thawed");
}

static void api_resume(sh_request *r)
{
        os_record *rec = os_request_record(r);
        sh_error *err = NULL;

        if (rec->state != OS_PAUSED || !rec->sb) {
                os_reply_code(r, OS_E_INVALID_STATE,
                              "only a Paused sandbox can be resumed: it is %s",
                              os_state_name(rec->state));
                return;
        }
        /* The pause's hold goes; the sandbox thaws unless a snapshot's copy still holds it
         * (then it thaws when the copy ends). */
        if (sh_sandbox_resume(rec->sb, resumed, NULL, &err) < 0) {
                os_reply_code(r, OS_E_INTERNAL, "cannot resume the sandbox: %s",
                              err && err->msg ? err->msg : "");
                sh_error_release(&err);
                return;
        }
        os_record_set_state(rec, OS_RESUMING, "resume_requested", "the sandbox is being thawed");
        os_reply_empty(r, 202);
}

const sh_route os_pause_routes[] = {
        {"/v1/sandboxes/{}/pause", SH_M_POST, NULL, api_pause, SB},
        {"/v1/sandboxes/{}/resume", SH_M_POST, NULL, api_resume, SB},
};
const size_t os_pause_n_routes = ARRAY_SIZE(os_pause_routes);
