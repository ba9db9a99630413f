/* api_tools.c: POST /tools/resolve (CONTRACT.md section 6). Validation is here; fetching,
 * verification and the store arrive with issue 5: until then every tool is refused with
 * that reason (per-tool refusal is the contract's shape for a tool that cannot be had). */
#include "sh/http.h"

void sh_api_tools_resolve(sh_request *r)
{
        cJSON *body = sh_request_json(r), *tools, *v, *out, *refused;

        if (!body)
                return;
        tools = cJSON_GetObjectItemCaseSensitive(body, "tools");
        if (!cJSON_IsObject(tools)) {
                cJSON_Delete(body);
                sh_reply_errorf(r, 400, "BadRequest", "'tools' must be an object of URLs");
                return;
        }
        cJSON_ArrayForEach(v, tools) if (!cJSON_IsString(v))
        {
                cJSON_Delete(body);
                sh_reply_errorf(r, 400, "BadRequest", "'tools' must be an object of URLs");
                return;
        }
        out = cJSON_CreateObject();
        cJSON_AddItemToObject(out, "tools", cJSON_CreateObject());
        refused = cJSON_AddObjectToObject(out, "refused");
        cJSON_ArrayForEach(v, tools)
                cJSON_AddStringToObject(refused, v->string, "this host cannot resolve tools yet");
        cJSON_Delete(body);
        sh_reply_json(r, 200, out);
}
