/* proxy.c: a sandbox's execd (`/v1/sandboxes/{id}/proxy/44772/…`) and egress API (`…/18080/…`),
 * served by the daemon itself (OPENSANDBOX.md sections 1, 3 and 4; nothing is proxied). The
 * surface's admission has checked the sandbox's token and the paused rule. execd: `GET /ping`;
 * `/code…` and `/v1/isolated…` are never served: 501 NOT_SUPPORTED, at once and without reading
 * a body (commands.c, sessions.c, metrics.c and files.c serve the rest). Egress: the policy
 * is deny-all by construction (a sandbox has only loopback); the credential vault is not
 * served. */
#include <string.h>

#include "os-internal.h"

#define EXECD  (OS_R_SANDBOX | OS_R_EXECD)
#define EGRESS (OS_R_SANDBOX | OS_R_EGRESS)
#define ALL    (SH_M_GET | SH_M_POST | SH_M_PUT | SH_M_DELETE | SH_M_PATCH)

/* ---- execd ------------------------------------------------------------------------------------ */

static void execd_ping(sh_request *r)
{
        os_reply_empty(r, 200);
}

static void execd_not_supported(sh_request *r)
{
        size_t len;
        const char *rest = sh_request_param(r, 1, &len);

        if (rest &&
            ((len >= 4 && memcmp(rest, "code", 4) == 0 && (len == 4 || rest[4] == '/')) ||
             (len >= 11 && memcmp(rest, "v1/isolated", 11) == 0 && (len == 11 || rest[11] == '/'))))
                os_reply_code(r, OS_E_NOT_SERVED,
                              "code interpreters and isolated sessions are not served here");
        else
                os_reply_code(r, OS_E_NOT_SERVED, "this execd route is not served by this host");
}

/* Before any body byte: the route's answer (a 501) is given whatever the body, which is never
 * read (a huge upload costs nothing). */
static int refuse_begin(sh_request *r, void **state)
{
        *state = NULL;
        sh_request_route(r)->fn(r);
        return -1;
}

static void refuse_abort(sh_request *r, void *state)
{
}

static const sh_body_sink refuse_sink = {.begin = refuse_begin, .abort = refuse_abort};

/* ---- egress ----------------------------------------------------------------------------------- */

/* What GET /policy says, and PATCH and DELETE after they change nothing: true, since the
 * sandbox's network namespace has only loopback. */
static cJSON *policy_status(bool with_policy)
{
        cJSON *o = cJSON_CreateObject(), *p;

        if (!o || !cJSON_AddStringToObject(o, "status", "ok") ||
            !cJSON_AddStringToObject(o, "mode", "deny_all") ||
            !cJSON_AddStringToObject(o, "enforcementMode", "namespace"))
                goto oom;
        if (with_policy) {
                p = cJSON_AddObjectToObject(o, "policy");
                if (!p || !cJSON_AddStringToObject(p, "defaultAction", "deny") ||
                    !cJSON_AddArrayToObject(p, "egress"))
                        goto oom;
        }
        return o;
oom:
        cJSON_Delete(o);
        return NULL;
}

static void egress_get(sh_request *r)
{
        os_reply_json(r, 200, policy_status(true));
}

/* Rules that only deny change nothing of a sandbox that reaches nothing; a rule that would
 * allow traffic cannot be honoured. */
static void egress_patch(sh_request *r)
{
        bool empty;
        cJSON *body = os_json_body(r, "INVALID_REQUEST", &empty), *rule;
        bool allow = false;

        if (!body && !empty)
                return;
        if (!cJSON_IsArray(body) || cJSON_GetArraySize(body) == 0) {
                os_reply_code(r, OS_E_INVALID_REQUEST,
                              "the body is a non-empty list of {action, target} rules");
                goto out;
        }
        cJSON_ArrayForEach(rule, body)
        {
                const cJSON *a = cJSON_GetObjectItemCaseSensitive(rule, "action");
                const cJSON *t = cJSON_GetObjectItemCaseSensitive(rule, "target");

                if (!cJSON_IsObject(rule) || !cJSON_IsString(a) || !cJSON_IsString(t) ||
                    (!STREQ(a->valuestring, "deny") && !STREQ(a->valuestring, "allow"))) {
                        os_reply_code(r, OS_E_INVALID_REQUEST,
                                      "a rule is {\"action\": allow|deny, \"target\": <domain>}");
                        goto out;
                }
                allow = allow || STREQ(a->valuestring, "allow");
        }
        if (allow) {
                os_reply_code(r, OS_E_NOT_SUPPORTED,
                              "sandboxes here have no network: nothing can be allowed");
                goto out;
        }
        os_reply_json(r, 200, policy_status(false));
out:
        cJSON_Delete(body);
}

static void egress_delete(sh_request *r)
{
        bool empty;
        cJSON *body = os_json_body(r, "INVALID_REQUEST", &empty), *t;

        if (!body && !empty)
                return;
        if (body) {
                bool ok = cJSON_IsArray(body);

                cJSON_ArrayForEach(t, body) ok = ok && cJSON_IsString(t);
                if (!ok) {
                        os_reply_code(r, OS_E_INVALID_REQUEST,
                                      "the body is a list of target strings");
                        cJSON_Delete(body);
                        return;
                }
        }
        cJSON_Delete(body);
        os_reply_json(r, 200, policy_status(false));
}

static void egress_vault(sh_request *r)
{
        os_reply_code(r, OS_E_NOT_SERVED, "the credential vault is not served by this host");
}

const sh_route os_proxy_routes[] = {
        {"/v1/sandboxes/{}/proxy/44772/ping", SH_M_GET, NULL, execd_ping, EXECD},
        {"/v1/sandboxes/{}/proxy/44772/{*}", ALL, &refuse_sink, execd_not_supported, EXECD},
        {"/v1/sandboxes/{}/proxy/18080/policy", SH_M_GET, NULL, egress_get, EGRESS},
        {"/v1/sandboxes/{}/proxy/18080/policy", SH_M_PATCH, &sh_body_buffer, egress_patch, EGRESS},
        {"/v1/sandboxes/{}/proxy/18080/policy", SH_M_DELETE, &sh_body_buffer, egress_delete,
         EGRESS},
        {"/v1/sandboxes/{}/proxy/18080/credential-vault", ALL, &refuse_sink, egress_vault, EGRESS},
        {"/v1/sandboxes/{}/proxy/18080/credential-vault/{*}", ALL, &refuse_sink, egress_vault,
         EGRESS},
};
const size_t os_proxy_n_routes = ARRAY_SIZE(os_proxy_routes);
