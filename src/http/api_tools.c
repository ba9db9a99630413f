/* api_tools.c: POST /tools/resolve: validates the request, suspends it until tools settle. */
#include <string.h>

#include "sh/http.h"
#include "sh/log.h"
#include "sh/sandbox.h"
#include "sh/tools.h"

SH_CAPABILITY(tools_resolve, "tools.resolve")

static void request_gone(sh_request *r, bool aborted)
{
        sh_tools_resolve_cancel(r->hstate);
        r->hstate = NULL;
}

static void resolved(cJSON *out, void *data)
{
        sh_request *r = data;

        r->hstate = NULL; /* the resolve frees itself after this returns */
        if (!out) {
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory building the response");
                return;
        }
        sh_reply_json(r, 200, out);
}

void sh_api_tools_resolve(sh_request *r)
{
        cJSON *body = sh_request_json(r), *tools, *v;
        const char **names = NULL, **urls = NULL;
        sh_resolve *res = NULL;
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
        if (sh_tools_resolve_start(sh_server_tools(r->srv), names, urls, n, resolved, r, &res,
                                   &err) < 0) {
                log_error("tools-failed", NULL, "%s", err && err->msg ? err->msg : "unknown");
                sh_reply_errorf(r, SH_E_INTERNAL, "the tool resolver is unavailable: %s",
                                err && err->msg ? err->msg : "unknown error");
                sh_error_release(&err);
                goto out;
        }
        if (res) { /* still fetching: the loop replies when every tool settled */
                r->hstate = res;
                r->hstate_free = request_gone;
                sh_request_suspend(r);
        }
out:
        free(names);
        free(urls);
        cJSON_Delete(body);
}
