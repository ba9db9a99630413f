/* api_persist.c: POST /sandboxes/{rid}/persist (CONTRACT.md 5): no-op rules, then an rsync job
 * whose end answers the waiting request (if it still waits). */
#include "sh/capability.h"
#include "sh/log.h"
#include "sh/native.h"
#include "sh/persist.h"

SH_CAPABILITY(persist, "persist")

/* One persist job's view of its request; the job owns it. */
typedef struct persist_ctx {
        sh_pending *tok;
        bool delete_extra;
} persist_ctx;

static void persist_done(sh_sandbox *sb, const sh_error *err, void *data)
{
        persist_ctx *c = data;
        sh_request *r = sh_pending_request(c->tok);
        const char *item = sh_sandbox_item_id(sb);

        if (err)
                log_warn("persist-failed", sh_sandbox_id(sb), "%s", err->msg ? err->msg : "");
        else
                log_info("persisted", sh_sandbox_id(sb), "item %s%s", item ? item : "",
                         c->delete_extra ? " (reconciled)" : "");
        if (r && err)
                sh_reply_error(r, err);
        else if (r)
                sh_reply_empty(r, 204);
        sh_pending_release(c->tok);
        free(c);
}

void sh_api_persist(sh_request *r)
{
        cJSON *body = sh_native_json(r), *del;
        sh_native_ctx *n = sh_native(r);
        sh_sandbox *sb = sh_native_sandbox(r);
        persist_ctx *c;
        sh_error *err = NULL;
        bool ready = false, delete_extra;

        if (!body)
                return;
        del = cJSON_GetObjectItemCaseSensitive(body, "delete");
        if (del && !cJSON_IsNull(del) && !cJSON_IsBool(del)) {
                cJSON_Delete(body);
                sh_reply_errorf(r, SH_E_INVALID, "'delete' must be a boolean");
                return;
        }
        /* Absent (or null) is the additive checkpoint: the choice that never deletes. */
        delete_extra = del && cJSON_IsTrue(del);
        cJSON_Delete(body);
        /* No archive root or no item_id: a no-op, so old clients keep working. */
        if (!n->cfg->nfs_root || !sh_sandbox_item_id(sb)) {
                sh_reply_empty(r, 204);
                return;
        }
        if (sh_sandbox_is_ready(sb, &ready, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        /* A half-restored workspace must never overwrite the archive (checked again when the
         * job starts, after any wait in the queue). */
        if (!ready) {
                sh_reply_empty(r, 204);
                return;
        }
        c = calloc(1, sizeof(*c));
        if (!c || !(c->tok = sh_request_wait(r, NULL, NULL))) {
                free(c);
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return;
        }
        c->delete_extra = delete_extra;
        if (sh_persist_save(n->persister, sb, delete_extra, persist_done, c, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                sh_pending_release(c->tok);
                free(c);
        }
}
