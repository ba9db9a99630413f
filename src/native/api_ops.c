/* api_ops.c: operations endpoints (CONTRACT.md section 7): /healthz, /readyz, /drain. */
#include "sh/capability.h"
#include "sh/log.h"
#include "sh/native.h"
#include "sh/network.h"
#include "sh/persist.h"

SH_CAPABILITY(drain, "drain")
SH_CAPABILITY(drain_checkpoint, "drain.checkpoint")

void sh_api_healthz(sh_request *r)
{
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "status", "ok");
        cJSON_AddStringToObject(o, "version", SH_VERSION "+" SH_GIT_COMMIT);
        cJSON_AddItemToObject(o, "capabilities", sh_capabilities_json());
        /* what this pod says of itself to its peers (cluster.h) */
        if (sh_native(r)->cluster)
                cJSON_AddItemToObject(o, "cluster", sh_cluster_health_json(sh_native(r)->cluster));
        /* whether sandboxes get network here, and why not (sh/network.h) */
        cJSON_AddItemToObject(o, "egress",
                              sh_network_health_json(sh_manager_network(sh_native(r)->mgr)));
        sh_reply_json(r, 200, o);
}

void sh_api_readyz(sh_request *r)
{
        sh_manager *m = sh_native(r)->mgr;
        cJSON *o;

        if (sh_manager_draining(m)) {
                sh_reply_errorf(r, SH_E_UNAVAILABLE, "the host is draining");
                return;
        }
        if (sh_manager_full(m)) {
                sh_reply_errorf(r, SH_E_UNAVAILABLE, "the host is at capacity");
                return;
        }
        if (!sh_manager_images_ready(m)) {
                sh_reply_errorf(r, SH_E_UNAVAILABLE,
                                "the images of SANDBOX_HOST_PREPULL are still being pulled");
                return;
        }
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "ready");
        sh_reply_json(r, 200, o);
}

/* One drain: answered when its last checkpoint has ended; the checkpoints own it. */
typedef struct drain_ctx {
        sh_pending *tok; /* NULL: answered at once */
        sh_persister *p;
        unsigned sandboxes, pending, persisted, failed;
} drain_ctx;

static void drain_reply(drain_ctx *c, sh_request *r)
{
        cJSON *o;

        if (r) {
                log_info("drain-checkpoint", NULL, "%u sandbox(es), %u persisted, %u failed",
                         c->sandboxes, c->persisted, c->failed);
                o = cJSON_CreateObject();
                cJSON_AddNumberToObject(o, "sandboxes", c->sandboxes);
                cJSON_AddNumberToObject(o, "persisted", c->persisted);
                cJSON_AddNumberToObject(o, "failed", c->failed);
                sh_reply_json(r, 200, o);
        }
        sh_pending_release(c->tok);
        free(c);
}

static void drain_one_done(sh_sandbox *sb, const sh_error *err, void *data)
{
        drain_ctx *c = data;

        /* A sandbox deleted meanwhile is neither checkpointed nor a failed checkpoint. */
        if (!err)
                c->persisted++;
        else if (sh_error_kind_of(err) != SH_E_SANDBOX_NOT_FOUND) {
                c->failed++;
                log_warn("persist-failed", sh_sandbox_id(sb), "drain checkpoint: %s",
                         err->msg ? err->msg : "");
        }
        if (--c->pending == 0)
                drain_reply(c, sh_pending_request(c->tok));
}

static void drain_one(sh_sandbox *sb, void *data)
{
        drain_ctx *c = data;
        sh_error *err = NULL;
        bool ready = false;

        if (!sh_sandbox_item_id(sb) || sh_sandbox_deleted(sb))
                return;
        if (sh_sandbox_is_ready(sb, &ready, &err) < 0 || !ready) {
                sh_error_release(&err);
                return;
        }
        if (!c->p || sh_persist_save(c->p, sb, false, drain_one_done, c, &err) < 0) {
                log_warn("persist-failed", sh_sandbox_id(sb), "drain checkpoint: %s",
                         err && err->msg ? err->msg : "out of memory");
                sh_error_release(&err);
                c->failed++;
                return;
        }
        c->pending++;
}

void sh_api_drain(sh_request *r)
{
        sh_native_ctx *n = sh_native(r);
        drain_ctx *c;

        if (!sh_manager_draining(n->mgr))
                log_info("draining", NULL, "no new sandboxes are accepted from now on");
        sh_manager_set_draining(n->mgr, true);
        c = calloc(1, sizeof(*c));
        if (!c) {
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return;
        }
        c->sandboxes = sh_manager_count(n->mgr);
        /* Without an archive root there is nothing to checkpoint (section 5: no-ops). */
        if (n->cfg->nfs_root) {
                c->p = n->persister;
                /* One count held by the walk itself, so that no checkpoint can answer before
                 * every one has been queued (they end from the loop anyway). */
                c->pending = 1;
                sh_manager_foreach(n->mgr, drain_one, c);
                c->pending--;
        }
        if (c->pending == 0) {
                drain_reply(c, r);
                return;
        }
        c->tok = sh_request_wait(r, NULL, NULL);
        if (!c->tok) /* the checkpoints still end and free c; this request is answered now */
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
}
