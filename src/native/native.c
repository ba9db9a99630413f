/* native.c: the native surface (CONTRACT.md): its route table (section 2; with
 * SANDBOX_HOST_NATIVE off only the pod's probes and /drain), the sandbox lookup of the routes
 * that name one (a sandbox another surface made is not found here when SANDBOX_HOST_API_KEY is
 * set), and its error model (section 8): every kind of error becomes one status and one contract
 * type, in the body {"error": type, "detail": text}. The native contract is unauthenticated by
 * design: the host is reachable only inside its namespace, and a remote_id is the capability. */
#include "sh/native.h"

#include <string.h>

#include "sh/log.h"

#define SB SH_NATIVE_SANDBOX

const sh_route sh_native_routes[] = {
        {"/sandboxes", SH_M_POST, &sh_body_buffer, sh_api_create, 0},
        {"/sandboxes/{}", SH_M_DELETE, NULL, sh_api_delete, SB},
        {"/sandboxes/{}/exec", SH_M_POST, &sh_body_buffer, sh_api_exec, SB},
        {"/sandboxes/{}/persist", SH_M_POST, &sh_body_buffer, sh_api_persist, SB},
        {"/sandboxes/{}/file", SH_M_PUT, &sh_native_upload_sink, sh_api_upload, SB},
        {"/sandboxes/{}/file", SH_M_GET, NULL, sh_api_download, SB},
        {"/sandboxes/{}/file", SH_M_DELETE, NULL, sh_api_delete_file, SB},
        {"/sandboxes/{}/exists", SH_M_GET, NULL, sh_api_exists, SB},
        {"/sandboxes/{}/disk-usage", SH_M_GET, NULL, sh_api_disk_usage, SB},
        {"/sandboxes/{}/size", SH_M_GET, NULL, sh_api_size, SB},
        {"/sandboxes/{}/mark-ready", SH_M_POST, NULL, sh_api_mark_ready, SB},
        {"/sandboxes/{}/ready", SH_M_GET, NULL, sh_api_ready, SB},
        {"/sandboxes/{}/walk", SH_M_GET, NULL, sh_api_walk, SB},
        {"/sandboxes/{}/mkdir", SH_M_POST, &sh_body_buffer, sh_api_mkdir, SB},
        {"/sandboxes/{}/dir", SH_M_DELETE, NULL, sh_api_delete_dir, SB},
        {"/sandboxes/{}/rename", SH_M_POST, &sh_body_buffer, sh_api_rename, SB},
        {"/tools/resolve", SH_M_POST, &sh_body_buffer, sh_api_tools_resolve, 0},
        {"/healthz", SH_M_GET, NULL, sh_api_healthz, SH_ROUTE_PROBE},
        {"/readyz", SH_M_GET, NULL, sh_api_readyz, SH_ROUTE_PROBE},
        {"/drain", SH_M_POST, NULL, sh_api_drain, 0},
};
const size_t sh_native_n_routes = ARRAY_SIZE(sh_native_routes);

/* SANDBOX_HOST_NATIVE off (a pod that serves only /v1): what Kubernetes needs of the pod, its
 * probes and the preStop hook's /drain, and nothing else: every other path is 404 NotFound. */
static const sh_route native_pod_routes[] = {
        {"/healthz", SH_M_GET, NULL, sh_api_healthz, SH_ROUTE_PROBE},
        {"/readyz", SH_M_GET, NULL, sh_api_readyz, SH_ROUTE_PROBE},
        {"/drain", SH_M_POST, NULL, sh_api_drain, 0},
};

/* ---- errors ----------------------------------------------------------------------------- */

static const struct {
        unsigned status;
        const char *type;
} native_errors[SH_E_KIND_COUNT] = {
        [SH_E_INTERNAL] = {500, "Internal"},
        [SH_E_INVALID] = {400, "BadRequest"},
        [SH_E_NOT_FOUND] = {404, "FileNotFoundError"},
        [SH_E_EXISTS] = {400, "FileExistsError"},
        [SH_E_IS_A_DIRECTORY] = {400, "IsADirectoryError"},
        [SH_E_NOT_A_DIRECTORY] = {400, "NotADirectoryError"},
        [SH_E_TOO_LARGE] = {413, "PayloadTooLarge"},
        /* A full workspace is the host's failure to most endpoints; the file endpoints that
         * take the client's bytes answer 413 themselves (api_files.c). */
        [SH_E_NO_SPACE] = {500, "Internal"},
        [SH_E_UNAVAILABLE] = {503, "Unavailable"},
        [SH_E_BUSY] = {503, "Unavailable"},
        [SH_E_SANDBOX_NOT_FOUND] = {404, "SandboxNotFound"},
        [SH_E_PERSIST_FAILED] = {500, "PersistFailed"},
        [SH_E_CANCELLED] = {500, "Cancelled"},
        [SH_E_SETTING] = {500, "InvalidSetting"},
        [SH_E_NO_ROUTE] = {404, "NotFound"},
        [SH_E_METHOD_NOT_ALLOWED] = {405, "MethodNotAllowed"},
};

unsigned sh_native_status(sh_error_kind kind)
{
        if ((unsigned)kind >= SH_E_KIND_COUNT || !native_errors[kind].type)
                return 500;
        return native_errors[kind].status;
}

const char *sh_native_type(sh_error_kind kind)
{
        if ((unsigned)kind >= SH_E_KIND_COUNT || !native_errors[kind].type)
                return "Internal";
        return native_errors[kind].type;
}

static sh_response *native_error(sh_request *r, const sh_error *err, unsigned *ret_status)
{
        sh_error_kind kind = sh_error_kind_of(err);
        cJSON *o = cJSON_CreateObject();
        char *clean = strdup(err && err->msg ? err->msg : "internal error");
        sh_response *resp;

        /* A detail may quote client bytes (a path): keep the body valid JSON text. */
        if (clean)
                sh_utf8_sanitize(clean);
        if (o) {
                cJSON_AddStringToObject(o, "error", sh_native_type(kind));
                cJSON_AddStringToObject(o, "detail", clean ? clean : "");
        }
        free(clean);
        *ret_status = sh_native_status(kind);
        resp = sh_response_json(o);
        if (*ret_status == 503)
                sh_response_header(resp, "Retry-After", "5");
        return resp;
}

/* ---- the request's sandbox -------------------------------------------------------------- */

/* After the route (so 404 NotFound and 405 never depend on an id), before the body: a route
 * naming a sandbox gets a reference to it, or 404 SandboxNotFound. With an API key set, the
 * key and the access tokens of another surface's sandboxes (/v1's) must mean what they say:
 * this unauthenticated surface does not know those sandboxes at all (the same answer as for
 * an id that does not exist, so it tells nothing either). */
static int native_admit(sh_request *r)
{
        sh_native_ctx *n = sh_request_ctx(r);
        const char *id;
        size_t len;
        sh_sandbox *sb;

        if (!(sh_request_route(r)->flags & SH_NATIVE_SANDBOX))
                return 0;
        id = sh_request_param(r, 0, &len);
        sb = id ? sh_manager_get(n->mgr, id, len) : NULL;
        if (sb && n->cfg->api_key && sh_sandbox_surface(sb)) {
                sh_sandbox_unref(sb);
                sb = NULL;
        }
        if (!sb) {
                sh_reply_errorf(r, SH_E_SANDBOX_NOT_FOUND, "no such sandbox");
                return -1;
        }
        sh_request_set_local(r, sb);
        sh_request_set_log_id(r, sh_sandbox_id(sb));
        return 0;
}

static void native_finish(sh_request *r)
{
        sh_sandbox_unref(sh_request_local(r));
        sh_request_set_local(r, NULL);
}

sh_native_ctx *sh_native(const sh_request *r)
{
        return sh_request_ctx(r);
}

sh_sandbox *sh_native_sandbox(const sh_request *r)
{
        return sh_request_local(r);
}

int sh_native_workspace(sh_request *r)
{
        sh_error *err = NULL;
        int fd = sh_sandbox_open_workspace(sh_native_sandbox(r), &err);

        if (fd < 0) {
                sh_reply_error(r, err);
                sh_error_release(&err);
        }
        return fd;
}

void sh_native_surface(sh_native_ctx *ctx, sh_surface *ret)
{
        bool on = ctx->cfg->native;

        *ret = (sh_surface){
                .name = "native",
                .prefix = "/",
                .routes = on ? sh_native_routes : native_pod_routes,
                .n_routes = on ? ARRAY_SIZE(sh_native_routes) : ARRAY_SIZE(native_pod_routes),
                .ctx = ctx,
                .admit = native_admit,
                .error = native_error,
                .finish = native_finish,
        };
}
