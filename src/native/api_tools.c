/* api_tools.c: POST /tools/resolve: validates the request; the request waits until every tool
 * has settled. */
#include <string.h>

#include "sh/capability.h"
#include "sh/log.h"
#include "sh/native.h"
#include "sh/tools.h"

SH_CAPABILITY(tools_resolve, "tools.resolve")

/* One resolve's view of its request; freed with the token. */
typedef struct resolve_ctx {
        sh_pending *tok; /* the resolve's reference, until it has answered */
        sh_resolve *res; /* running (NULL: finished, or not started yet) */
} resolve_ctx;

static void resolved(cJSON *out, void *data)
{
        resolve_ctx *c = data;
        sh_request *r = sh_pending_request(c->tok);

        c->res = NULL; /* the resolve frees itself after this returns */
        if (r && !out)
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory building the response");
        else if (r)
                sh_reply_json(r, 200, out);
        else
                cJSON_Delete(out);
        sh_pending_release(TAKE_PTR(c->tok));
}

/* The requester is gone: stop resolving (installs already running still finish). */
static void resolve_gone(void *data)
{
        resolve_ctx *c = data;

        if (!c->res)
                return;
        sh_tools_resolve_cancel(TAKE_PTR(c->res));
        sh_pending_release(TAKE_PTR(c->tok));
}

static void resolve_release(void *data)
{
        free(data);
}

static const sh_pending_ops resolve_ops = {.gone = resolve_gone, .release = resolve_release};

void sh_api_tools_resolve(sh_request *r)
{
        cJSON *body = sh_native_json(r), *tools, *v;
        _cleanup_free_ const char **names = NULL, **urls = NULL;
        resolve_ctx *c = NULL;
        sh_error *err = NULL;
        size_t n = 0, i;

        if (!body)
                return;
        tools = cJSON_GetObjectItemCaseSensitive(body, "tools");
        if (!tools || cJSON_IsNull(tools)) {
                sh_reply_errorf(r, SH_E_INVALID,
                                "'tools' is required: an object of tool name -> manifest URL");
                goto out;
        }
        if (!cJSON_IsObject(tools)) {
                sh_reply_errorf(r, SH_E_INVALID,
                                "'tools' must be an object of tool name -> manifest URL");
                goto out;
        }
        cJSON_ArrayForEach(v, tools)
        {
                if (!cJSON_IsString(v) || !v->string) {
                        sh_reply_errorf(r, SH_E_INVALID,
                                        "'tools' values must be manifest URL strings");
                        goto out;
                }
                /* One entry per name in the response: a repeated key would be ambiguous. */
                for (cJSON *w = tools->child; w != v; w = w->next)
                        if (strcmp(w->string, v->string) == 0) {
                                sh_reply_errorf(r, SH_E_INVALID,
                                                "tool name '%.100s' is given twice", v->string);
                                goto out;
                        }
                if (++n > SH_TOOLS_PER_REQUEST_MAX) {
                        sh_reply_errorf(r, SH_E_INVALID, "at most %u tools per request",
                                        SH_TOOLS_PER_REQUEST_MAX);
                        goto out;
                }
        }
        names = calloc(n ? n : 1, sizeof(*names));
        urls = calloc(n ? n : 1, sizeof(*urls));
        if (!names || !urls) {
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                goto out;
        }
        i = 0;
        cJSON_ArrayForEach(v, tools)
        {
                names[i] = v->string;
                urls[i] = v->valuestring;
                i++;
        }
        c = calloc(1, sizeof(*c));
        if (!c || !(c->tok = sh_request_wait(r, &resolve_ops, c))) {
                free(c);
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                goto out;
        }
        /* Every tool may settle at once (cached, refused): then `resolved` has answered
         * before this returns; else the loop answers when the last one settles. */
        if (sh_tools_resolve_start(sh_native(r)->tools, names, urls, n, resolved, c, &c->res,
                                   &err) < 0) {
                log_error("tools-failed", NULL, "%s", err && err->msg ? err->msg : "unknown");
                sh_reply_errorf(r, SH_E_INTERNAL, "the tool resolver is unavailable: %s",
                                err && err->msg ? err->msg : "unknown error");
                sh_error_release(&err);
                sh_pending_release(TAKE_PTR(c->tok));
        }
out:
        cJSON_Delete(body);
}
