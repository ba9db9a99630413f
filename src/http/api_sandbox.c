/* api_sandbox.c: create (with the item_id restore) and delete sandboxes (CONTRACT.md 2.1, 2.2)
 * and the readiness marker (3.1). */
#include <string.h>

#include "sh/http.h"
#include "sh/log.h"
#include "sh/persist.h"

SH_CAPABILITY(readiness_marker, "readiness-marker")
SH_CAPABILITY(create_images, "create.images")
SH_CAPABILITY(create_restore, "create.restore")

/* An optional field: absent and null are the same (NULL); anything else must pass `check`. */
static bool optional_field(cJSON *body, const char *name, cJSON_bool (*check)(const cJSON *),
                           cJSON **ret)
{
        cJSON *f = cJSON_GetObjectItemCaseSensitive(body, name);

        *ret = NULL;
        if (!f || cJSON_IsNull(f))
                return true;
        if (!check(f))
                return false;
        *ret = f;
        return true;
}

static bool env_valid(const cJSON *env)
{
        const cJSON *v;

        cJSON_ArrayForEach(v, env) if (!cJSON_IsString(v) || !v->string) return false;
        return true;
}

/* One create: the request and a restore job may end in either order; whichever ends last
 * frees this. */
typedef struct create_ctx {
        sh_request *r;  /* NULL once the request is gone */
        sh_sandbox *sb; /* a reference */
        bool restoring; /* a restore job holds this */
} create_ctx;

static void create_ctx_free(create_ctx *c)
{
        sh_sandbox_unref(c->sb);
        free(c);
}

static void reply_created(sh_request *r, sh_sandbox *sb)
{
        cJSON *out;

        log_info("sandbox-created", sb->id, "uid %u%s%s", (unsigned)sb->owner.uid,
                 sb->item_id ? ", item " : "", sb->item_id ? sb->item_id : "");
        out = cJSON_CreateObject();
        cJSON_AddStringToObject(out, "pod_url", sh_server_pod_url(r->srv));
        cJSON_AddStringToObject(out, "remote_id", sb->id);
        sh_reply_json(r, 200, out);
}

/* A create that cannot complete: the half-made sandbox goes (marker first, so it is never
 * seen as trusted), then the error is the answer. */
static void create_fail(sh_request *r, sh_sandbox *sb, const sh_error *err)
{
        sh_error *ignored = NULL;

        if (!sb->deleted && sh_manager_delete(sh_server_manager(r->srv), sb, &ignored) < 0)
                log_warn("delete-failed", sb->id, "%s", ignored ? ignored->msg : "");
        sh_error_release(&ignored);
        sh_reply_error(r, err);
}

static void restore_done(sh_sandbox *sb, const sh_error *err, void *data)
{
        create_ctx *c = data;
        sh_error *own = NULL;

        c->restoring = false;
        if (!c->r) {
                /* The request is gone (its end already deleted the sandbox). */
                create_ctx_free(c);
                return;
        }
        if (err) {
                log_warn("restore-failed", sb->id, "item %s: %s", sb->item_id,
                         err->msg ? err->msg : "");
                if (sh_error_kind_of(err) == SH_E_SANDBOX_NOT_FOUND) {
                        sh_error_new(&own, SH_E_UNAVAILABLE,
                                     "the sandbox was deleted during its restore");
                        create_fail(c->r, sb, own);
                } else {
                        create_fail(c->r, sb, err);
                }
                sh_error_release(&own);
                return;
        }
        /* Only a complete, re-owned workspace of a live sandbox is marked trusted. */
        if (sb->deleted) {
                sh_error_new(&own, SH_E_UNAVAILABLE, "the sandbox was deleted during its restore");
                create_fail(c->r, sb, own);
                sh_error_release(&own);
                return;
        }
        if (sh_sandbox_mark_ready(sb, &own) < 0) {
                create_fail(c->r, sb, own);
                sh_error_release(&own);
                return;
        }
        reply_created(c->r, sb);
}

static void create_ready(sh_sandbox *sb, const sh_error *err, void *data)
{
        create_ctx *c = data;
        sh_request *r = c->r;
        sh_persister *p;
        sh_error *own = NULL;

        if (err) {
                sh_reply_error(r, err);
                return;
        }
        if (!sh_server_config(r->srv)->nfs_root || !sb->item_id) {
                reply_created(r, sb);
                return;
        }
        /* Section 2.1: restore {nfs_root}/{item_id}/, re-own, mark ready, then answer. */
        p = sh_server_persister(r->srv);
        if (!p) {
                sh_error_make(&own, ENOMEM, "out of memory");
                create_fail(r, sb, own);
                sh_error_release(&own);
                return;
        }
        if (sh_persist_restore(p, sb, restore_done, c, &own) < 0) {
                create_fail(r, sb, own);
                sh_error_release(&own);
                return;
        }
        c->restoring = true;
}

static void create_free(sh_request *r, bool aborted)
{
        create_ctx *c = r->hstate;
        sh_sandbox *sb = c->sb;
        sh_error *err = NULL;

        r->hstate = NULL;
        /* A create that was never answered (shutdown) must not leave a sandbox nobody knows:
         * neither while its worker starts nor while its restore runs. */
        if (sb->on_ready || c->restoring) {
                sb->on_ready = NULL;
                if (!sb->deleted && sh_manager_delete(sh_server_manager(r->srv), sb, &err) < 0)
                        log_warn("delete-failed", sb->id, "%s", err ? err->msg : "");
                sh_error_release(&err);
        }
        if (c->restoring) {
                c->r = NULL; /* restore_done frees c */
                return;
        }
        create_ctx_free(c);
}

void sh_api_create(sh_request *r)
{
        sh_manager *m = sh_server_manager(r->srv);
        cJSON *body, *image, *env, *ports, *item;
        sh_create_opts o = {0};
        sh_sandbox *sb = NULL;
        create_ctx *c;
        sh_error *err = NULL;

        /* Capacity and draining are answered before the body is judged: a busy host says so
         * whatever was asked. */
        if (sh_manager_draining(m) || sh_manager_full(m)) {
                sh_reply_errorf(r, SH_E_UNAVAILABLE,
                                sh_manager_draining(m) ? "the host is draining"
                                                       : "the host is at capacity");
                return;
        }
        body = sh_request_json(r);
        if (!body)
                return;
        if (!optional_field(body, "image", cJSON_IsString, &image)) {
                sh_reply_errorf(r, SH_E_INVALID, "'image' must be a string");
                goto out;
        }
        if (!optional_field(body, "env", cJSON_IsObject, &env) || (env && !env_valid(env))) {
                sh_reply_errorf(r, SH_E_INVALID, "'env' must be an object of strings");
                goto out;
        }
        /* Accepted and ignored in v1 (no network path into a sandbox); only its type is
         * checked, a list, whatever it holds. */
        if (!optional_field(body, "exposed_ports", cJSON_IsArray, &ports)) {
                sh_reply_errorf(r, SH_E_INVALID, "'exposed_ports' must be a list");
                goto out;
        }
        if (!optional_field(body, "item_id", cJSON_IsString, &item) ||
            (item && !sh_item_id_valid(item->valuestring))) {
                sh_reply_errorf(r, SH_E_INVALID,
                                "'item_id' must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}");
                goto out;
        }
        o.image = image ? image->valuestring : NULL;
        o.env = env;
        o.item_id = item ? item->valuestring : NULL;
        c = calloc(1, sizeof(*c));
        if (!c) {
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                goto out;
        }
        c->r = r;
        if (sh_manager_create(m, &o, create_ready, c, &sb, &err) < 0) {
                free(c);
                sh_reply_error(r, err);
                sh_error_release(&err);
                goto out;
        }
        c->sb = sb;
        /* Answered once the sandbox's worker serves and, with an item, its restore is done
         * (create_ready, restore_done). */
        r->hstate = c;
        r->hstate_free = create_free;
        sh_request_suspend(r);
out:
        cJSON_Delete(body);
}

void sh_api_delete(sh_request *r)
{
        sh_error *err = NULL;

        if (sh_manager_delete(sh_server_manager(r->srv), r->sb, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        sh_reply_empty(r, 204);
}

void sh_api_mark_ready(sh_request *r)
{
        sh_error *err = NULL;

        if (sh_sandbox_mark_ready(r->sb, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        sh_reply_empty(r, 204);
}

void sh_api_ready(sh_request *r)
{
        sh_error *err = NULL;
        bool ready = false;
        cJSON *o;

        if (sh_sandbox_is_ready(r->sb, &ready, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        o = cJSON_CreateObject();
        cJSON_AddBoolToObject(o, "ready", ready);
        sh_reply_json(r, 200, o);
}
