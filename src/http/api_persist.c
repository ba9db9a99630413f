/* api_persist.c: POST /sandboxes/{rid}/persist (CONTRACT.md 5): no-op rules, then an rsync job. */
#include "sh/http.h"
#include "sh/log.h"
#include "sh/persist.h"

SH_CAPABILITY(persist, "persist")

/* The request and the job may end in either order: whichever ends second frees this. */
typedef struct persist_ctx {
        sh_request *r; /* NULL once the request is gone */
        bool delete_extra;
} persist_ctx;

static void persist_done(sh_sandbox *sb, const sh_error *err, void *data)
{
        persist_ctx *c = data;
        sh_request *r = c->r;

        if (r) {
                r->hstate = NULL;
                r->hstate_free = NULL;
        }
        if (err)
                log_warn("persist-failed", sb->id, "%s", err->msg ? err->msg : "");
        else
                log_info("persisted", sb->id, "item %s%s", sb->item_id ? sb->item_id : "",
                         c->delete_extra ? " (reconciled)" : "");
        free(c);
        if (!r)
                return;
        if (err)
                sh_reply_error(r, err);
        else
                sh_reply_empty(r, 204);
}

static void persist_free(sh_request *r, bool aborted)
{
        persist_ctx *c = r->hstate;

        if (c)
                c->r = NULL;
        r->hstate = NULL;
}

void sh_api_persist(sh_request *r)
{
        cJSON *body = sh_request_json(r), *del;
        const sh_config *cfg = sh_server_config(r->srv);
        sh_persister *p;
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
        if (!cfg->nfs_root || !r->sb->item_id) {
                sh_reply_empty(r, 204);
                return;
        }
        if (sh_sandbox_is_ready(r->sb, &ready, &err) < 0) {
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
        p = sh_server_persister(r->srv);
        c = calloc(1, sizeof(*c));
        if (!p || !c) {
                free(c);
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return;
        }
        c->r = r;
        c->delete_extra = delete_extra;
        if (sh_persist_save(p, r->sb, delete_extra, persist_done, c, &err) < 0) {
                free(c);
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        r->hstate = c;
        r->hstate_free = persist_free;
        sh_request_suspend(r);
}
