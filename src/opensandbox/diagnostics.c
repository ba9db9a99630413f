/* diagnostics.c: GET /v1/sandboxes/{id}/diagnostics/logs and …/events (OPENSANDBOX.md section
 * 2.2): lifecycle log lines and state transitions of a sandbox, its entrypoint's output. Not
 * served yet: 501 NOT_SUPPORTED (issue 12, item 6, engineer B). */
#include "os-internal.h"

#define SB OS_R_SANDBOX

static void api_not_supported(sh_request *r)
{
        os_reply_error(r, 501, "NOT_SUPPORTED", "diagnostics are not served by this host yet");
}

void os_diag_on_transition(os_record *rec, os_state from, os_state to)
{
}

void os_diag_on_log(os_record *rec, sh_log_level level, const char *event, const char *line)
{
}

void os_diag_record_gone(os_record *rec)
{
}

void os_diag_free_all(os_ctx *ctx)
{
}

const sh_route os_diag_routes[] = {
        {"/v1/sandboxes/{}/diagnostics/logs", SH_M_GET, NULL, api_not_supported, SB},
        {"/v1/sandboxes/{}/diagnostics/events", SH_M_GET, NULL, api_not_supported, SB},
};
const size_t os_diag_n_routes = ARRAY_SIZE(os_diag_routes);
