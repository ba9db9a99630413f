/* proxy.c: a sandbox's execd (`/v1/sandboxes/{id}/proxy/44772/…`) and egress API (`…/18080/…`),
 * served by the daemon itself (OPENSANDBOX.md sections 1, 3 and 4; nothing is proxied). The
 * surface's admission has checked the sandbox's token and the paused rule. execd: `GET /ping`;
 * `/v1/isolated…` is never served: 501 NOT_SUPPORTED, at once and without reading a body
 * (commands.c, sessions.c, metrics.c, files.c and code.c serve the rest). Egress: the
 * sandbox's policy on the host's network (sh/network.h: GET, PATCH merged, DELETE of targets,
 * each answering the new status); the credential vault is not served. */
#include <string.h>

#include "os-internal.h"
#include "sh/network.h"
#include "sh/policy.h"

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

        if (rest && len >= 11 && memcmp(rest, "v1/isolated", 11) == 0 &&
            (len == 11 || rest[11] == '/'))
                os_reply_code(r, OS_E_NOT_SERVED, "isolated sessions are not served here");
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

/* The sandbox's policy and the host's network (sh/network.h). A sandbox without network (a
 * host without egress support) holds deny-all, reported with enforcementMode "none". */
static const sh_egress_policy *policy_of(sh_request *r, sh_network **ret_net)
{
        os_record *rec = os_request_record(r);

        *ret_net = sh_manager_network(os_ctx_of(r)->mgr);
        return rec && rec->sb ? sh_network_policy(*ret_net, rec->sb) : NULL;
}

static void reply_status(sh_request *r, const sh_network *net, const sh_egress_policy *p,
                         bool with_policy)
{
        sh_egress_policy none;

        if (!p) {
                sh_egress_policy_init(&none, SH_EGRESS_DENY);
                os_reply_json(r, 200, sh_egress_status_to_json(&none, "none", with_policy));
                return;
        }
        os_reply_json(r, 200,
                      sh_egress_status_to_json(p, sh_network_enforcement(net), with_policy));
}

static void egress_get(sh_request *r)
{
        sh_network *net;
        const sh_egress_policy *p = policy_of(r, &net);

        reply_status(r, net, p, true);
}

/* A policy replaced: the next connection sees it, an open one it denies is cut. Without
 * network, rules that only deny change nothing (the sandbox reaches nothing) and one that
 * would allow cannot be honoured. */
static void apply(sh_request *r, sh_network *net, sh_egress_policy *next)
{
        os_record *rec = os_request_record(r);
        sh_error *err = NULL;

        if (sh_network_set_policy(net, rec->sb, next, &err) < 0) {
                os_reply_code(r, OS_E_INTERNAL, "changing the policy: %s",
                              err && err->msg ? err->msg : "");
                sh_error_release(&err);
                return;
        }
        reply_status(r, net, sh_network_policy(net, rec->sb), false);
}

/* A body the policy module refused: 400 with its reason (or 500 out of memory). */
static void reply_policy_error(sh_request *r, const sh_error *err)
{
        os_reply_code(r,
                      sh_error_kind_of(err) == SH_E_INVALID ? OS_E_INVALID_REQUEST : OS_E_INTERNAL,
                      "%s", err && err->msg ? err->msg : "");
}

/* PATCH (rules merged, `patch`) and DELETE (targets removed): the body parsed, a copy of the
 * sandbox's policy changed and applied; both answer the new status. */
static void egress_change(sh_request *r, bool patch)
{
        bool empty;
        cJSON *body = os_json_body(r, "INVALID_REQUEST", &empty);
        sh_egress_rules in = {0};
        sh_egress_list targets = {0};
        sh_egress_policy next = {0};
        sh_error *err = NULL;
        sh_network *net;
        const sh_egress_policy *cur = policy_of(r, &net);

        if (!body && !empty)
                return;
        if ((patch ? sh_egress_rules_from_json(body, &in, &err)
                   : sh_egress_targets_from_json(body, &targets, &err)) < 0) {
                reply_policy_error(r, err);
                goto out;
        }
        if (!cur) {
                if (patch && sh_egress_rules_allow_any(&in))
                        os_reply_code(r, OS_E_NOT_SUPPORTED,
                                      "this sandbox has no network (%s): nothing can be allowed",
                                      sh_network_why(net) ? sh_network_why(net)
                                                          : "made without one");
                else
                        reply_status(r, net, NULL, false);
                goto out;
        }
        if (sh_egress_policy_copy(cur, &next) < 0) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                goto out;
        }
        if (patch && sh_egress_policy_patch(&next, &in, &err) < 0) {
                reply_policy_error(r, err);
                goto out;
        }
        if (!patch)
                sh_egress_policy_delete(&next, &targets);
        apply(r, net, &next);
out:
        sh_egress_policy_done(&next);
        sh_egress_rules_done(&in);
        sh_egress_list_done(&targets);
        sh_error_release(&err);
        cJSON_Delete(body);
}

static void egress_patch(sh_request *r)
{
        egress_change(r, true);
}

static void egress_delete(sh_request *r)
{
        egress_change(r, false);
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
