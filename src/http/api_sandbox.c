/* api_sandbox.c: create and delete sandboxes (CONTRACT.md 2.1, 2.2) and the readiness marker
 * (3.1). */
#include <string.h>

#include "sh/http.h"
#include "sh/log.h"

SH_CAPABILITY(readiness_marker, "readiness-marker")
SH_CAPABILITY(create_images, "create.images")

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

static bool ports_valid(const cJSON *ports)
{
        const cJSON *v;

        cJSON_ArrayForEach(v, ports) if (!cJSON_IsNumber(v)) return false;
        return true;
}

static void create_ready(sh_sandbox *sb, const sh_error *err, void *data)
{
        sh_request *r = data;
        cJSON *out;

        if (err) {
                sh_reply_error(r, err);
                return;
        }
        log_info("sandbox-created", sb->id, "uid %u", (unsigned)sb->owner.uid);
        out = cJSON_CreateObject();
        cJSON_AddStringToObject(out, "pod_url", sh_server_pod_url(r->srv));
        cJSON_AddStringToObject(out, "remote_id", sb->id);
        sh_reply_json(r, 200, out);
}

static void create_free(sh_request *r, bool aborted)
{
        sh_sandbox *sb = r->hstate;
        sh_error *err = NULL;

        /* A create that was never answered (shutdown) must not leave a sandbox nobody knows. */
        if (sb->on_ready) {
                sb->on_ready = NULL;
                if (!sb->deleted && sh_manager_delete(sh_server_manager(r->srv), sb, &err) < 0)
                        log_warn("delete-failed", sb->id, "%s", err ? err->msg : "");
                sh_error_release(&err);
        }
        sh_sandbox_unref(sb);
        r->hstate = NULL;
}

void sh_api_create(sh_request *r)
{
        sh_manager *m = sh_server_manager(r->srv);
        cJSON *body, *image, *env, *ports, *item;
        sh_create_opts o = {0};
        sh_sandbox *sb = NULL;
        sh_error *err = NULL;

        /* Capacity and draining are answered before the body is judged: a busy host says so
         * whatever was asked. */
        if (sh_manager_draining(m) || sh_manager_full(m)) {
                sh_reply_errorf(r, 503, "Unavailable",
                                sh_manager_draining(m) ? "the host is draining"
                                                       : "the host is at capacity");
                return;
        }
        body = sh_request_json(r);
        if (!body)
                return;
        if (!optional_field(body, "image", cJSON_IsString, &image)) {
                sh_reply_errorf(r, 400, "BadRequest", "'image' must be a string");
                goto out;
        }
        if (!optional_field(body, "env", cJSON_IsObject, &env) || (env && !env_valid(env))) {
                sh_reply_errorf(r, 400, "BadRequest", "'env' must be an object of strings");
                goto out;
        }
        if (!optional_field(body, "exposed_ports", cJSON_IsArray, &ports) ||
            (ports && !ports_valid(ports))) {
                sh_reply_errorf(r, 400, "BadRequest", "'exposed_ports' must be a list of ports");
                goto out;
        }
        if (!optional_field(body, "item_id", cJSON_IsString, &item) ||
            (item && !sh_item_id_valid(item->valuestring))) {
                sh_reply_errorf(r, 400, "BadRequest",
                                "'item_id' must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}");
                goto out;
        }
        o.image = image ? image->valuestring : NULL;
        o.env = env;
        o.item_id = item ? item->valuestring : NULL;
        if (sh_manager_create(m, &o, create_ready, r, &sb, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                goto out;
        }
        /* Answered once the sandbox's worker serves (create_ready). */
        r->hstate = sb;
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
