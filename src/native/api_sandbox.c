/* api_sandbox.c: create (with the item_id restore) and delete sandboxes (CONTRACT.md 2.1, 2.2)
 * and the readiness marker (3.1). */
#include <string.h>

#include "sh/capability.h"
#include "sh/log.h"
#include "sh/native.h"

SH_CAPABILITY(readiness_marker, "readiness-marker")
SH_CAPABILITY(create_images, "create.images")
SH_CAPABILITY(create_restore, "create.restore")

/* An optional field: absent and null are the same (NULL); anything else must pass `check`. */
static bool optional_field(const cJSON *body, const char *name, cJSON_bool (*check)(const cJSON *),
                           const cJSON **ret)
{
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(body, name);

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

int sh_native_create_opts(const cJSON *body, sh_create_opts *o, const char **ret_why)
{
        const cJSON *image, *env, *ports, *item;

        if (!optional_field(body, "image", cJSON_IsString, &image)) {
                *ret_why = "'image' must be a string";
                return -1;
        }
        if (!optional_field(body, "env", cJSON_IsObject, &env) || (env && !env_valid(env))) {
                *ret_why = "'env' must be an object of strings";
                return -1;
        }
        /* Accepted and ignored in v1 (no network path into a sandbox); only its type is
         * checked, a list, whatever it holds. */
        if (!optional_field(body, "exposed_ports", cJSON_IsArray, &ports)) {
                *ret_why = "'exposed_ports' must be a list";
                return -1;
        }
        if (!optional_field(body, "item_id", cJSON_IsString, &item) ||
            (item && !sh_item_id_valid(item->valuestring))) {
                *ret_why = "'item_id' must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}";
                return -1;
        }
        o->image = image ? image->valuestring : NULL;
        o->env = env;
        o->item_id = item ? item->valuestring : NULL;
        return 0;
}

/* One create: the request waits for the sandbox layer's done. */
typedef struct create_ctx {
        sh_pending *tok; /* the job's reference, until done (or the request is gone) */
        sh_sandbox *sb;  /* a reference */
        bool ended;      /* done has run, or the create was cancelled */
} create_ctx;

static void reply_created(sh_request *r, sh_sandbox *sb)
{
        const char *item = sh_sandbox_item_id(sb);
        cJSON *out;

        log_info("sandbox-created", sh_sandbox_id(sb), "uid %u%s%s",
                 (unsigned)sh_sandbox_owner(sb)->uid, item ? ", item " : "", item ? item : "");
        out = cJSON_CreateObject();
        cJSON_AddStringToObject(out, "pod_url", sh_server_pod_url(sh_native(r)->srv));
        cJSON_AddStringToObject(out, "remote_id", sh_sandbox_id(sb));
        sh_reply_json(r, 200, out);
}

static void create_done(sh_sandbox *sb, const sh_error *err, void *data)
{
        create_ctx *c = data;
        sh_request *r = sh_pending_request(c->tok);

        c->ended = true;
        if (r && err)
                sh_reply_error(r, err);
        else if (r)
                reply_created(r, sb);
        sh_pending_release(TAKE_PTR(c->tok));
}

/* The request ended unanswered (shutdown): its sandbox must not stay behind unknown. */
static void create_gone(void *data)
{
        create_ctx *c = data;

        if (c->ended)
                return;
        c->ended = true;
        sh_sandbox_create_cancel(c->sb);
        sh_pending_release(TAKE_PTR(c->tok));
}

static void create_release(void *data)
{
        create_ctx *c = data;

        sh_sandbox_unref(c->sb);
        free(c);
}

static const sh_pending_ops create_ops = {.gone = create_gone, .release = create_release};

void sh_api_create(sh_request *r)
{
        sh_manager *m = sh_native(r)->mgr;
        sh_create_opts o = {0};
        const char *why;
        cJSON *body;
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
        body = sh_native_json(r);
        if (!body)
                return;
        if (sh_native_create_opts(body, &o, &why) < 0) {
                sh_reply_errorf(r, SH_E_INVALID, "%s", why);
                goto out;
        }
        c = calloc(1, sizeof(*c));
        if (!c || !(c->tok = sh_request_wait(r, &create_ops, c))) {
                free(c);
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                goto out;
        }
        /* Answered once the sandbox serves and, with an item, its restore is done. */
        if (sh_manager_create(m, &o, create_done, c, &c->sb, &err) < 0) {
                c->ended = true;
                sh_reply_error(r, err);
                sh_error_release(&err);
                sh_pending_release(TAKE_PTR(c->tok));
        }
out:
        cJSON_Delete(body);
}

void sh_api_delete(sh_request *r)
{
        sh_error *err = NULL;

        if (sh_manager_delete(sh_native(r)->mgr, sh_native_sandbox(r), &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        sh_reply_empty(r, 204);
}

void sh_api_mark_ready(sh_request *r)
{
        sh_error *err = NULL;

        if (sh_sandbox_mark_ready(sh_native_sandbox(r), &err) < 0) {
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

        if (sh_sandbox_is_ready(sh_native_sandbox(r), &ready, &err) < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
                return;
        }
        o = cJSON_CreateObject();
        cJSON_AddBoolToObject(o, "ready", ready);
        sh_reply_json(r, 200, o);
}
