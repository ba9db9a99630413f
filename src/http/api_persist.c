/* api_persist.c: POST /sandboxes/{rid}/persist (CONTRACT.md section 5). The no-op rules are
 * here; the rsync transfer itself is issue 4 and answers PersistFailed until it lands. */
#include "sh/http.h"

void sh_api_persist(sh_request *r)
{
        cJSON *body = sh_request_json(r), *del;
        const sh_config *cfg = sh_server_config(r->srv);
        sh_error *err = NULL;
        bool ready = false;

        if (!body)
                return;
        del = cJSON_GetObjectItemCaseSensitive(body, "delete");
        if (del && !cJSON_IsNull(del) && !cJSON_IsBool(del)) {
                cJSON_Delete(body);
                sh_reply_errorf(r, 400, "BadRequest", "'delete' must be a boolean");
                return;
        }
        cJSON_Delete(body);
        /* No archive root or no item_id: a no-op, so old clients keep working. */
        if (!cfg->nfs_root || !r->sb->item_id) {
                sh_reply_empty(r, 204);
                return;
        }
        if (sh_sandbox_is_ready(r->sb, &ready, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        /* A half-restored workspace must never overwrite the archive. */
        if (!ready) {
                sh_reply_empty(r, 204);
                return;
        }
        sh_reply_errorf(r, 500, "PersistFailed",
                        "persist to the archive is not available in "
                        "this build yet");
}
