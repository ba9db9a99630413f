/* surface.c: the /v1 surface itself (OPENSANDBOX.md section 1): its route table (every file's,
 * joined), admission (the API key of lifecycle routes, the sandbox's record, the access token
 * of execd and egress routes, the paused rule, renew on access), the error body {code,
 * message} for every error on its paths (the transport's own too), X-Request-ID on every
 * answer, and the replies its handlers share. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "os-internal.h"
#include "sh/random.h"
#include "sh/relay.h"
#include "sh/snapstore.h"

#define REQUEST_ID_MAX 128 /* a client's X-Request-ID longer than this is replaced */
#define RETRY_AFTER    "5" /* seconds, with every 503 */
#define PAGE_SIZE_MAX  200
#define PAGE_SIZE_DEF  20

os_ctx *os_ctx_of(const sh_request *r)
{
        return sh_request_ctx(r);
}

os_record *os_request_record(const sh_request *r)
{
        return sh_request_local(r);
}

/* ---- errors ----------------------------------------------------------------------------------- */

int os_err_set(os_err *e, unsigned status, const char *code, const char *fmt, ...)
{
        va_list ap;

        e->status = status;
        e->code = code;
        va_start(ap, fmt);
        vsnprintf(e->message, sizeof(e->message), fmt, ap);
        va_end(ap);
        return -1;
}

int os_err_code(os_err *e, os_code c, const char *fmt, ...)
{
        va_list ap;

        e->status = os_code_status(c);
        e->code = os_code_name(c);
        va_start(ap, fmt);
        vsnprintf(e->message, sizeof(e->message), fmt, ap);
        va_end(ap);
        return -1;
}

/* The body of every error: {"code", "message"}, never empty (the SDK reads an empty error body
 * as success), valid JSON text whatever client bytes the message quotes. */
static sh_response *error_response(unsigned status, const char *code, const char *msg)
{
        cJSON *o = cJSON_CreateObject();
        char *clean = strdup(msg && *msg ? msg : "error");
        sh_response *resp;

        if (clean)
                sh_utf8_sanitize(clean);
        if (o) {
                cJSON_AddStringToObject(o, "code", code);
                cJSON_AddStringToObject(o, "message", clean ? clean : "error");
        }
        free(clean);
        resp = sh_response_json(o);
        if (resp && status == 503)
                sh_response_header(resp, "Retry-After", RETRY_AFTER);
        return resp;
}

static void reply_error(sh_request *r, unsigned status, const char *code, const char *msg)
{
        if (status >= 500)
                log_error("request-failed", sh_request_log_id(r), "%s %s: %s %s",
                          sh_request_method(r), sh_request_path(r), code, msg);
        sh_reply(r, status, error_response(status, code, msg));
}

void os_reply_error(sh_request *r, unsigned status, const char *code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        reply_error(r, status, code, msg);
}

void os_reply_code(sh_request *r, os_code c, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        reply_error(r, os_code_status(c), os_code_name(c), msg);
}

void os_reply_error_header(sh_request *r, unsigned status, const char *code, const char *name,
                           const char *value, const char *msg)
{
        sh_response *resp = error_response(status, code, msg);

        /* out of memory for the header: the error goes without it (sh_response_header says) */
        (void)sh_response_header(resp, name, value);
        sh_reply(r, status, resp);
}

void os_reply_err(sh_request *r, const os_err *e)
{
        reply_error(r, e->status, e->code, e->message);
}

static bool route_is_proxy(const sh_request *r)
{
        const sh_route *rt = sh_request_route(r);

        return rt && (rt->flags & (OS_R_EXECD | OS_R_EGRESS));
}

/* An error of the services, by its kind; execd and egress routes speak execd's codes. */
void os_reply_sh_error(sh_request *r, const sh_error *err)
{
        os_code c = os_code_of_kind(sh_error_kind_of(err), route_is_proxy(r));

        reply_error(r, os_code_status(c), os_code_name(c),
                    err && err->msg ? err->msg : "internal error");
}

/* The transport's errors on /v1 paths (no route, a wrong method, framing, 413, 503). */
static sh_response *surface_error(sh_request *r, const sh_error *err, unsigned *ret_status)
{
        os_code c = os_code_of_kind(sh_error_kind_of(err), route_is_proxy(r));

        *ret_status = os_code_status(c);
        return error_response(*ret_status, os_code_name(c), err && err->msg ? err->msg : "error");
}

void os_reply_json(sh_request *r, unsigned status, cJSON *body)
{
        if (!body) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        sh_reply_json(r, status, body);
}

void os_reply_empty(sh_request *r, unsigned status)
{
        sh_reply_empty_sized(r, status);
}

/* ---- pages of a list -------------------------------------------------------------------------- */

/* A query parameter as a page number or size: all digits, within [1, max]. */
static int page_param(sh_request *r, const char *name, uint64_t def, uint64_t max, uint64_t *ret)
{
        const sh_query_param *p = sh_query_find(sh_request_query(r), name);
        uint64_t v;

        *ret = def;
        if (!p)
                return 0;
        if (memchr(p->val, '\0', p->val_len) || sh_parse_u64(p->val, &v) < 0 || v < 1 || v > max) {
                os_reply_code(r, OS_E_INVALID_REQUEST, "'%s' must be an integer from 1 to %llu",
                              name, (unsigned long long)max);
                return -1;
        }
        *ret = v;
        return 0;
}

int os_pager_parse(sh_request *r, os_pager *pg)
{
        *pg = (os_pager){0};
        if (page_param(r, "page", 1, UINT32_MAX, &pg->page) < 0 ||
            page_param(r, "pageSize", PAGE_SIZE_DEF, PAGE_SIZE_MAX, &pg->size) < 0)
                return -1;
        pg->first = (pg->page - 1) * pg->size;
        return 0;
}

static void pager_fail(sh_request *r, os_pager *pg)
{
        cJSON_Delete(pg->out);
        pg->out = pg->items = NULL;
        os_reply_code(r, OS_E_INTERNAL, "out of memory");
}

int os_pager_open(sh_request *r, os_pager *pg)
{
        pg->out = cJSON_CreateObject();
        pg->items = pg->out ? cJSON_AddArrayToObject(pg->out, "items") : NULL;
        if (!pg->items) {
                pager_fail(r, pg);
                return -1;
        }
        return 0;
}

bool os_pager_take(os_pager *pg)
{
        bool on = pg->total >= pg->first && pg->total < pg->first + pg->size;

        pg->total++;
        return on;
}

int os_pager_add(sh_request *r, os_pager *pg, cJSON *item)
{
        if (!item) {
                pager_fail(r, pg);
                return -1;
        }
        cJSON_AddItemToArray(pg->items, item);
        return 0;
}

void os_pager_reply(sh_request *r, os_pager *pg)
{
        uint64_t pages = (pg->total + pg->size - 1) / pg->size;
        cJSON *p = cJSON_AddObjectToObject(pg->out, "pagination");

        if (!p || !cJSON_AddNumberToObject(p, "page", (double)pg->page) ||
            !cJSON_AddNumberToObject(p, "pageSize", (double)pg->size) ||
            !cJSON_AddNumberToObject(p, "totalItems", (double)pg->total) ||
            !cJSON_AddNumberToObject(p, "totalPages", (double)pages) ||
            !cJSON_AddBoolToObject(p, "hasNextPage", pg->page < pages)) {
                pager_fail(r, pg);
                return;
        }
        os_reply_json(r, 200, pg->out);
        pg->out = pg->items = NULL;
}

cJSON *os_json_body(sh_request *r, const char *code, bool *empty)
{
        size_t len, i;
        char *body = sh_request_body(r, &len);
        const char *why;
        cJSON *j;

        *empty = false;
        if (!body) {
                os_reply_code(r, OS_E_INTERNAL, "no body buffered for this route");
                return NULL;
        }
        for (i = 0; i < len && strchr(" \t\r\n", body[i]) && body[i]; i++)
                ;
        if (i == len) {
                *empty = true;
                return NULL;
        }
        /* The one intake of /v1 JSON bodies: UTF-8 without NUL, and no control character or
         * \u0000 in any string, key or value (cJSON would cut a path at the NUL). */
        j = sh_json_parse_text(body, &len, 0, &why);
        if (!j)
                os_reply_error(r, 400, code, "the body is %s", why);
        return j;
}

/* ---- X-Request-ID ------------------------------------------------------------------------------ */

/* Every answer carries X-Request-ID (section 1): the request's own when it is a sane token
 * (visible ASCII, bounded: it is echoed into a header), else a fresh random UUID. */
static void surface_decorate(sh_request *r, sh_response *resp)
{
        const char *mine = sh_request_header(r, "X-Request-ID");
        char fresh[SH_UUID_LEN + 1];
        size_t n, i;

        if (mine && (n = strlen(mine)) > 0 && n <= REQUEST_ID_MAX) {
                for (i = 0; i < n; i++)
                        if (mine[i] <= ' ' || mine[i] > '~')
                                break;
                if (i == n) {
                        sh_response_header(resp, "X-Request-ID", mine);
                        return;
                }
        }
        /* getrandom fails only on a kernel without it: no header then */
        if (sh_random_uuid(fresh) == 0)
                sh_response_header(resp, "X-Request-ID", fresh);
}

/* ---- admission: key, record, token, paused, renew on access ---------------------------------- */

/* Constant-time equality of a secret and what a client sent: both hashed to 32 bytes first,
 * so neither the comparison nor its length leaks how much of a guess was right. */
static bool secret_equal(const unsigned char want_hash[32], const char *got)
{
        unsigned char h[32];

        crypto_generichash(h, sizeof(h), (const unsigned char *)got, strlen(got), NULL, 0);
        return sodium_memcmp(h, want_hash, sizeof(h)) == 0;
}

static int check_api_key(sh_request *r, os_ctx *ctx)
{
        const char *key;

        if (!ctx->api_key)
                return 0;
        key = sh_request_header(r, "OPEN-SANDBOX-API-KEY");
        if (!key || !*key) {
                os_reply_code(r, OS_E_MISSING_API_KEY,
                              "this host needs an API key in the OPEN-SANDBOX-API-KEY header");
                return -1;
        }
        /* Never logged: a wrong key may be a right key with a typo. */
        if (!secret_equal(ctx->api_key_hash, key)) {
                os_reply_code(r, OS_E_INVALID_API_KEY, "the API key is not this host's");
                return -1;
        }
        return 0;
}

/* An execd or egress route: the sandbox's own token, under the route's own header name, when
 * a key is set on the host or the sandbox asked for secureAccess. The API key alone is not
 * enough: it is the lifecycle's credential, the token is the sandbox's. */
static int check_token(sh_request *r, os_ctx *ctx, const os_record *rec, bool execd)
{
        const char *name = execd ? "X-EXECD-ACCESS-TOKEN" : "OPENSANDBOX-EGRESS-AUTH";
        const char *tok;

        if (!ctx->api_key && !rec->secure_access)
                return 0;
        tok = sh_request_header(r, name);
        if (!tok || !*tok) {
                os_reply_code(r, OS_E_UNAUTHORIZED,
                              "this sandbox needs its access token in the %s header "
                              "(from the endpoint look-up)",
                              name);
                return -1;
        }
        if (!secret_equal(rec->token_hash, tok)) {
                os_reply_code(r, OS_E_UNAUTHORIZED, "the access token is not this sandbox's");
                return -1;
        }
        return 0;
}

static int surface_admit(sh_request *r)
{
        os_ctx *ctx = os_ctx_of(r);
        unsigned flags = sh_request_route(r)->flags;
        bool proxy = flags & (OS_R_EXECD | OS_R_EGRESS);
        const char *id;
        os_record *rec;
        size_t len;

        /* Lifecycle and diagnostics: the key before anything else, so that nothing (not even
         * whether an id exists) is learnt without it. */
        if (!proxy && check_api_key(r, ctx) < 0)
                return -1;
        /* Another pod's (section 1): relayed to it; the relay has the request from now on. */
        if (flags & OS_R_CREATE)
                return os_cluster_hand_create(r) < 0 ? -1 : 0;
        if (flags & OS_R_SNAPSHOT) {
                id = sh_request_param(r, 0, &len);
                return os_snapshot_relay_owner(r, id, len) < 0 ? -1 : 0;
        }
        if (!(flags & OS_R_SANDBOX))
                return 0;
        id = sh_request_param(r, 0, &len);
        rec = id ? os_record_find(ctx, id, len) : NULL;
        if (!rec) {
                int k = id ? os_cluster_relay_owner(r, id, len, false) : 0;

                if (k != 0)
                        return k < 0 ? -1 : 0;
                os_reply_code(r, OS_E_SANDBOX_NOT_FOUND, "no sandbox with this id on this host");
                return -1;
        }
        sh_request_set_local(r, os_record_ref(rec));
        sh_request_set_log_id(r, rec->id);
        if (!proxy)
                return 0;
        if (check_token(r, ctx, rec, flags & OS_R_EXECD) < 0)
                return -1;
        if (!(flags & OS_R_EXECD))
                return 0;
        /* A sandbox whose image is still pulled has no execd yet (the SDK's health check
         * retries); one whose pull failed never will. */
        if (rec->state == OS_PENDING) {
                os_reply_code(r, OS_E_UNAVAILABLE, "the sandbox is Pending: its image is pulled");
                return -1;
        }
        if (rec->state == OS_FAILED) {
                os_reply_code(r, OS_E_INVALID_STATE, "the sandbox failed: %.400s",
                              rec->message ? rec->message : "");
                return -1;
        }
        /* A paused sandbox's execd does not answer (so the SDK's health check is false). */
        if (rec->state == OS_PAUSED || rec->state == OS_PAUSING || rec->state == OS_RESUMING) {
                os_reply_code(r, OS_E_SANDBOX_PAUSED, "the sandbox is %s",
                              os_state_name(rec->state));
                return -1;
        }
        /* Renew on access: every execd request moves expiresAt to at least now + N (never
         * past now + the ceiling: sh_sandbox_renew). */
        if (rec->renew_extend_s)
                sh_sandbox_renew(rec->sb, rec->renew_extend_s * 1000);
        return 0;
}

static void surface_finish(sh_request *r)
{
        os_record_unref(sh_request_local(r));
        sh_request_set_local(r, NULL);
}

/* ---- the surface ------------------------------------------------------------------------------ */

/* commands.c's (its commands, sessions and metrics), registered here until it has a start of
 * its own. */
static const os_record_observer execd_observer = {.gone = os_execd_record_gone};

int sh_opensandbox_new(const sh_config *cfg, sh_loop *loop, sh_manager *mgr,
                       struct sh_persister *persister, sh_server *srv, sh_cluster *cluster,
                       sh_opensandbox **ret, sh_error **err)
{
        const struct {
                const sh_route *v;
                size_t n;
        } tables[] = {
                {os_lifecycle_routes, os_lifecycle_n_routes},
                {os_pause_routes, os_pause_n_routes},
                {os_snapshot_routes, os_snapshot_n_routes},
                {os_diag_routes, os_diag_n_routes},
                {os_command_routes, os_command_n_routes},
                {os_session_routes, os_session_n_routes},
                {os_metrics_routes, os_metrics_n_routes},
                {os_files_routes, os_files_n_routes},
                {os_code_routes, os_code_n_routes},
                {os_proxy_routes, os_proxy_n_routes},
        };
        os_ctx *ctx;
        size_t i, n = 0;

        if (sodium_init() < 0)
                return sh_error_new(err, SH_E_INTERNAL, "libsodium cannot start");
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
                return sh_error_make(err, ENOMEM, "out of memory");
        ctx->cfg = cfg;
        ctx->loop = loop;
        ctx->mgr = mgr;
        ctx->persister = persister;
        ctx->srv = srv;
        ctx->cluster = cluster;
        for (i = 0; i < ARRAY_SIZE(tables); i++)
                n += tables[i].n;
        ctx->routes = calloc(n, sizeof(*ctx->routes));
        if (!ctx->routes) {
                free(ctx);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        for (i = 0; i < ARRAY_SIZE(tables); i++) {
                memcpy(ctx->routes + ctx->n_routes, tables[i].v, tables[i].n * sizeof(sh_route));
                ctx->n_routes += tables[i].n;
        }
        /* Only the key's hash is kept: what is compared, never the key itself. */
        if (cfg->api_key && *cfg->api_key) {
                ctx->api_key = true;
                crypto_generichash(ctx->api_key_hash, sizeof(ctx->api_key_hash),
                                   (const unsigned char *)cfg->api_key, strlen(cfg->api_key), NULL,
                                   0);
        }
        /* Each file that keeps something per record registers its observer. */
        if (sh_snapshots_open(persister, &ctx->snapshots, err) < 0) {
                free(ctx->routes);
                free(ctx);
                return -1;
        }
        /* Across pods (section 1): a call for another pod's sandbox is relayed to it. */
        if (cluster && sh_cluster_enabled(cluster) &&
            sh_relayer_new(cfg, loop, sh_cluster_token(cluster), &ctx->relayer, err) < 0) {
                sh_snapstore_free(TAKE_PTR(ctx->snapshots));
                free(ctx->routes);
                free(ctx);
                return -1;
        }
        os_diag_init(ctx);
        os_record_observe(ctx, &execd_observer);
        os_records_init(ctx);
        *ret = ctx;
        return 0;
}

void sh_opensandbox_surface(sh_opensandbox *os, sh_surface *ret)
{
        *ret = (sh_surface){
                .name = OS_SURFACE,
                .prefix = "/v1/",
                .routes = os->routes,
                .n_routes = os->n_routes,
                .ctx = os,
                .admit = surface_admit,
                .error = surface_error,
                .decorate = surface_decorate,
                .finish = surface_finish,
        };
}

void sh_opensandbox_free(sh_opensandbox *os)
{
        if (!os)
                return;
        os_records_done(os);
        sh_relayer_free(TAKE_PTR(os->relayer));
        sh_snapstore_free(TAKE_PTR(os->snapshots));
        free(os->routes);
        free(os);
}
