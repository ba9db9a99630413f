/* snapshots.c: snapshots of a sandbox's workspace (OPENSANDBOX.md section 2.1): POST
 * /v1/sandboxes/{id}/snapshots, /v1/snapshots, /v1/snapshots/{sid}, and the restore of a
 * create with `snapshotId`. Not served yet: 501 NOT_SUPPORTED, and every snapshotId is unknown
 * (issue 12, item 5, engineer B). */
#include "os-internal.h"

#define SB OS_R_SANDBOX

static void api_not_supported(sh_request *r)
{
        os_reply_error(r, 501, "NOT_SUPPORTED", "snapshots are not served by this host yet");
}

int os_snapshot_restore_source(os_ctx *ctx, const char *snapshot_id, os_snapshot_source **ret,
                               os_err *e)
{
        *ret = NULL;
        return os_err_set(e, 404, "SNAPSHOT_NOT_FOUND", "no snapshot with this id on this host");
}

const cJSON *os_snapshot_source_entrypoint(const os_snapshot_source *src)
{
        return NULL;
}

int os_snapshot_restore_start(os_snapshot_source *src, os_record *rec, os_restore_done_fn done,
                              void *data, os_err *e)
{
        return os_err_set(e, 501, "NOT_SUPPORTED", "snapshots are not served by this host yet");
}

void os_snapshot_source_free(os_snapshot_source *src)
{
}

void os_snapshot_record_gone(os_record *rec)
{
}

void os_snapshot_free_all(os_ctx *ctx)
{
}

const sh_route os_snapshot_routes[] = {
        {"/v1/sandboxes/{}/snapshots", SH_M_POST, &sh_body_buffer, api_not_supported, SB},
        {"/v1/snapshots", SH_M_GET, NULL, api_not_supported, 0},
        {"/v1/snapshots/{}", SH_M_GET | SH_M_DELETE, NULL, api_not_supported, 0},
};
const size_t os_snapshot_n_routes = ARRAY_SIZE(os_snapshot_routes);
