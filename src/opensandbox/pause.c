/* pause.c: POST /v1/sandboxes/{id}/pause and …/resume (OPENSANDBOX.md section 2) through the
 * cgroup freezer. Not served yet: 501 NOT_SUPPORTED (issue 12, item 4, engineer B). */
#include "os-internal.h"

#define SB OS_R_SANDBOX

static void api_pause(sh_request *r)
{
        os_reply_error(r, 501, "NOT_SUPPORTED", "pause is not served by this host yet");
}

static void api_resume(sh_request *r)
{
        os_reply_error(r, 501, "NOT_SUPPORTED", "resume is not served by this host yet");
}

void os_pause_record_gone(os_record *rec)
{
}

void os_pause_free_all(os_ctx *ctx)
{
}

const sh_route os_pause_routes[] = {
        {"/v1/sandboxes/{}/pause", SH_M_POST, NULL, api_pause, SB},
        {"/v1/sandboxes/{}/resume", SH_M_POST, NULL, api_resume, SB},
};
const size_t os_pause_n_routes = ARRAY_SIZE(os_pause_routes);
