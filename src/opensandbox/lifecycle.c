/* lifecycle.c: the lifecycle routes after create (OPENSANDBOX.md section 2): get, list (state
 * OR, metadata AND, pages, oldest first), delete, the metadata merge patch (RFC 7396),
 * renew-expiration, the endpoint look-up (44772 execd, 18080 egress) and the SDK's metrics
 * events. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "os-internal.h"

#define SB           OS_R_SANDBOX
#define METADATA_MAX 128 /* pairs in one sandbox's metadata */
#define EXECD_PORT   44772
#define EGRESS_PORT  18080

/* ---- get -------------------------------------------------------------------------------------- */

static void api_get(sh_request *r)
{
        os_reply_json(r, 200, os_record_json(os_request_record(r), true));
}

/* ---- list ------------------------------------------------------------------------------------- */

/* `metadata=k%3Dv%26k2%3Dv2`: one value, itself form-encoded (the SDK's encoding). */
static int metadata_filter(sh_request *r, sh_query *ret)
{
        const sh_query_param *p = sh_query_find(sh_request_query(r), "metadata");
        size_t i;

        *ret = (sh_query){0};
        if (!p || p->val_len == 0)
                return 0;
        if (memchr(p->val, '\0', p->val_len) || sh_query_parse(p->val, ret) < 0)
                goto bad;
        /* A pair is matched by its key as a C string: a NUL inside one would match a prefix. */
        for (i = 0; i < ret->n; i++)
                if (memchr(ret->v[i].key, '\0', ret->v[i].key_len))
                        goto bad;
        return 0;
bad:
        sh_query_done(ret);
        *ret = (sh_query){0};
        os_reply_code(r, OS_E_INVALID_REQUEST, "'metadata' must be form-encoded pairs k=v&k2=v2");
        return -1;
}

static bool metadata_matches(const os_record *rec, const sh_query *f)
{
        size_t i;

        for (i = 0; i < f->n; i++) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec->metadata, f->v[i].key);

                if (!cJSON_IsString(v) || strlen(v->valuestring) != f->v[i].val_len ||
                    memcmp(v->valuestring, f->v[i].val, f->v[i].val_len) != 0)
                        return false;
        }
        return true;
}

static void api_list(sh_request *r)
{
        const sh_query *q = sh_request_query(r);
        os_ctx *ctx = os_ctx_of(r);
        unsigned states = 0; /* a bit per os_state; 0: any */
        sh_sandbox **sbs = NULL;
        size_t i, n = 0;
        os_pager pg;
        sh_query mf;

        if (os_pager_parse(r, &pg) < 0)
                return;
        for (i = 0; i < q->n; i++) {
                int st;

                if (q->v[i].key_len != 5 || memcmp(q->v[i].key, "state", 5) != 0)
                        continue;
                st = os_state_parse(q->v[i].val, q->v[i].val_len);
                if (st < 0) {
                        os_reply_code(r, OS_E_INVALID_REQUEST,
                                      "'state' must be one of Pending, Running, Pausing, Paused, "
                                      "Resuming, Stopping, Terminated, Failed");
                        return;
                }
                states |= 1u << st;
        }
        if (metadata_filter(r, &mf) < 0)
                return;
        /* One walk of the registry (bounded by the host's capacity), oldest first. */
        if (sh_manager_list(ctx->mgr, &sbs, &n) < 0) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                goto done;
        }
        /* Across pods (or a peer asking for this pod's own): every match, merged or sent. */
        if (ctx->relayer) {
                os_list l;

                os_list_open(&l, &pg);
                for (i = 0; l.items && i < n; i++) {
                        os_record *rec = os_record_of(sbs[i]);

                        if (!rec || (states && !(states & (1u << rec->state))) ||
                            !metadata_matches(rec, &mf))
                                continue;
                        if (os_list_want(&l))
                                os_list_push(&l, os_record_json(rec, true));
                }
                os_cluster_list(r, &l, &pg, false, "sandboxes");
                goto done;
        }
        /* One pod: only the page's items are built. */
        if (os_pager_open(r, &pg) < 0)
                goto done;
        for (i = 0; i < n; i++) {
                os_record *rec = os_record_of(sbs[i]); /* NULL: a native sandbox */

                if (!rec || (states && !(states & (1u << rec->state))) ||
                    !metadata_matches(rec, &mf))
                        continue;
                if (os_pager_take(&pg) && os_pager_add(r, &pg, os_record_json(rec, true)) < 0)
                        goto done;
        }
        os_pager_reply(r, &pg);
done:
        free(sbs);
        sh_query_done(&mf);
}

/* ---- delete ----------------------------------------------------------------------------------- */

static void api_delete(sh_request *r)
{
        os_record *rec = os_request_record(r);
        sh_error *err = NULL;

        os_record_log(rec, SH_LOG_INFO, "sandbox-delete", "deleted by DELETE /v1/sandboxes");
        if (os_record_delete(rec, "user_delete", &err) < 0) {
                os_reply_sh_error(r, err);
                sh_error_release(&err);
                return;
        }
        os_reply_empty(r, 204);
}

/* ---- metadata --------------------------------------------------------------------------------- */

int os_metadata_check(const cJSON *md, unsigned have, os_err *e)
{
        const cJSON *v;
        const char *why;
        unsigned n = have;

        cJSON_ArrayForEach(v, md)
        {
                if (!cJSON_IsString(v))
                        return os_err_code(e, OS_E_INVALID_METADATA,
                                           "metadata values are strings ('%.64s')", v->string);
                if ((why = os_label_key_invalid(v->string)))
                        return os_err_code(e, OS_E_INVALID_METADATA, "metadata key '%.300s': %s",
                                           v->string, why);
                if ((why = os_label_value_invalid(v->valuestring)))
                        return os_err_code(e, OS_E_INVALID_METADATA,
                                           "metadata value of '%.300s': %s", v->string, why);
                /* A record's metadata is bounded: a huge map is the client's, not the host's. */
                if (++n > METADATA_MAX)
                        return os_err_code(e, OS_E_INVALID_METADATA, "at most %u metadata pairs",
                                           METADATA_MAX);
        }
        return 0;
}

/* RFC 7396 on a map of strings: a string sets, null removes, absent keeps; all or nothing. */
static void api_patch(sh_request *r)
{
        os_record *rec = os_request_record(r);
        cJSON *body, *v, *next = NULL;
        bool empty;
        os_err e;

        body = os_json_body(r, "INVALID_REQUEST", &empty);
        if (!body && !empty)
                return;
        if (empty || !cJSON_IsObject(body)) {
                cJSON_Delete(body);
                os_reply_code(r, OS_E_INVALID_REQUEST,
                              "the body is a JSON object of metadata changes");
                return;
        }
        next = cJSON_Duplicate(rec->metadata, true);
        if (!next)
                goto oom;
        cJSON_ArrayForEach(v, body)
        {
                if (cJSON_IsNull(v)) {
                        cJSON_DeleteItemFromObjectCaseSensitive(next, v->string);
                        continue;
                }
                if (!cJSON_IsString(v)) {
                        os_reply_code(r, OS_E_INVALID_METADATA,
                                      "metadata values are strings or null ('%.64s')", v->string);
                        goto out;
                }
        }
        cJSON_ArrayForEach(v, body)
        {
                cJSON *copy;

                if (cJSON_IsNull(v))
                        continue;
                copy = cJSON_CreateString(v->valuestring);
                if (!copy)
                        goto oom;
                if (cJSON_GetObjectItemCaseSensitive(next, v->string))
                        cJSON_ReplaceItemInObjectCaseSensitive(next, v->string, copy);
                else
                        cJSON_AddItemToObject(next, v->string, copy);
        }
        if (os_metadata_check(next, 0, &e) < 0) {
                os_reply_err(r, &e);
                goto out;
        }
        os_record_set_metadata(rec, TAKE_PTR(next));
        os_reply_json(r, 200, os_record_json(rec, true));
        goto out;
oom:
        os_reply_code(r, OS_E_INTERNAL, "out of memory");
out:
        cJSON_Delete(next);
        cJSON_Delete(body);
}

/* ---- renew-expiration ------------------------------------------------------------------------- */

static void api_renew(sh_request *r)
{
        os_record *rec = os_request_record(r);
        const sh_config *cfg = os_ctx_of(r)->cfg;
        cJSON *body, *at, *out;
        uint64_t when, now = sh_now_wall_ms();
        bool empty;
        char t[32];

        body = os_json_body(r, "INVALID_REQUEST", &empty);
        if (!body && !empty)
                return;
        at = cJSON_GetObjectItemCaseSensitive(body, "expiresAt");
        if (!cJSON_IsObject(body) || !cJSON_IsString(at) ||
            sh_rfc3339_parse(at->valuestring, &when) < 0) {
                os_reply_code(r, OS_E_INVALID_REQUEST,
                              "the body is {\"expiresAt\": an RFC 3339 date-time}");
                goto out;
        }
        /* As OpenSandbox's own server: a sandbox without expiry has nothing to renew. */
        if (!sh_sandbox_expiry(rec->sb)) {
                os_reply_code(r, OS_E_INVALID_STATE,
                              "the sandbox has no expiry (it was created without a timeout)");
                goto out;
        }
        if (when <= now) {
                os_reply_code(r, OS_E_INVALID_REQUEST, "expiresAt must be in the future");
                goto out;
        }
        if (cfg->max_timeout_s && when > now + cfg->max_timeout_s * 1000) {
                os_reply_code(r, OS_E_INVALID_REQUEST,
                              "expiresAt is past this host's ceiling (now + %llu s)",
                              (unsigned long long)cfg->max_timeout_s);
                goto out;
        }
        /* The SDK sends now + N: a renew may also shorten the expiry. */
        sh_sandbox_set_expiry(rec->sb, when);
        os_record_log(rec, SH_LOG_DEBUG, "sandbox-renewed", "expiresAt moved by renew-expiration");
        sh_rfc3339_format(when, t);
        out = cJSON_CreateObject();
        if (out && !cJSON_AddStringToObject(out, "expiresAt", t)) {
                cJSON_Delete(out);
                out = NULL;
        }
        os_reply_json(r, 200, out);
out:
        cJSON_Delete(body);
}

/* ---- endpoints -------------------------------------------------------------------------------- */

static void api_endpoint(sh_request *r)
{
        os_record *rec = os_request_record(r);
        os_ctx *ctx = os_ctx_of(r);
        const char *pod = sh_server_pod_url(ctx->srv), *p;
        _cleanup_free_ char *url = NULL;
        unsigned port = 0;
        size_t len, i;
        cJSON *out, *h;

        p = sh_request_param(r, 1, &len);
        for (i = 0; p && i < len && i < 6 && p[i] >= '0' && p[i] <= '9'; i++)
                port = port * 10 + (unsigned)(p[i] - '0');
        if (!p || i != len || (port != EXECD_PORT && port != EGRESS_PORT)) {
                os_reply_code(r, OS_E_NO_SUCH_PORT,
                              "sandboxes here expose no ports: only %u (execd) and %u (egress)",
                              EXECD_PORT, EGRESS_PORT);
                return;
        }
        if (sh_query_find(sh_request_query(r), "expires")) {
                os_reply_code(r, OS_E_NOT_SUPPORTED, "signed endpoints are not supported");
                return;
        }
        /* The pod_url's host:port and path prefix, then the proxy path (use_server_proxy
         * changes nothing: the daemon serves the route itself). */
        if (strncmp(pod, "http://", 7) == 0)
                pod += 7;
        else if (strncmp(pod, "https://", 8) == 0)
                pod += 8;
        if (asprintf(&url, "%s/v1/sandboxes/%s/proxy/%u", pod, rec->id, port) < 0) {
                url = NULL;
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        out = cJSON_CreateObject();
        if (!out || !cJSON_AddStringToObject(out, "endpoint", url))
                goto oom;
        /* The token is handed out here only, and only when it is asked for. */
        if (ctx->api_key || rec->secure_access) {
                h = cJSON_AddObjectToObject(out, "headers");
                if (!h || !cJSON_AddStringToObject(h,
                                                   port == EXECD_PORT ? "X-EXECD-ACCESS-TOKEN"
                                                                      : "OPENSANDBOX-EGRESS-AUTH",
                                                   rec->token))
                        goto oom;
        }
        os_reply_json(r, 200, out);
        return;
oom:
        cJSON_Delete(out);
        os_reply_code(r, OS_E_INTERNAL, "out of memory");
}

/* ---- metrics events ----------------------------------------------------------------------------- */

/* The SDK reports its create durations here: accepted and logged at debug, nothing kept. */
static void api_metrics_events(sh_request *r)
{
        size_t len;

        (void)sh_request_body(r, &len);
        log_debug("sdk-metrics-event", NULL, "%zu bytes", len);
        os_reply_empty(r, 204);
}

const sh_route os_lifecycle_routes[] = {
        {"/v1/sandboxes", SH_M_POST, &sh_body_buffer, os_api_create, OS_R_CREATE},
        {"/v1/sandboxes", SH_M_GET, NULL, api_list, 0},
        {"/v1/sandboxes/{}", SH_M_GET, NULL, api_get, SB},
        {"/v1/sandboxes/{}", SH_M_DELETE, NULL, api_delete, SB},
        {"/v1/sandboxes/{}/metadata", SH_M_PATCH, &sh_body_buffer, api_patch, SB},
        {"/v1/sandboxes/{}/renew-expiration", SH_M_POST, &sh_body_buffer, api_renew, SB},
        {"/v1/sandboxes/{}/endpoints/{}", SH_M_GET, NULL, api_endpoint, SB},
        {"/v1/metrics/events", SH_M_POST, &sh_body_buffer, api_metrics_events, 0},
};
const size_t os_lifecycle_n_routes = ARRAY_SIZE(os_lifecycle_routes);
