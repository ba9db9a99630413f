/* input.c: the native contract's input rules, shared by its handlers: JSON bodies (empty =
 * {}, must be an object, UTF-8, byte-string paths through surrogate escapes) and workspace
 * path parameters (CONTRACT.md sections 2 and 3). */
#include <stdio.h>
#include <string.h>

#include "sh/native.h"

cJSON *sh_native_json_text(char *body, size_t len, char *why, size_t why_size)
{
        const char *reason;
        size_t i;
        cJSON *j;

        why[0] = '\0';
        for (i = 0; i < len && body[i] && strchr(" \t\r\n", body[i]); i++)
                ;
        if (i == len)
                return cJSON_CreateObject(); /* empty or whitespace-only body is {} */
        /* UTF-8 without NUL, no control character or \u0000 in a string (paths may not hold
         * NUL), and byte-string paths through surrogate escapes (sh_json_parse_text). */
        j = sh_json_parse_text(body, &len, SH_JSON_SURROGATE_BYTES, &reason);
        if (!j) {
                snprintf(why, why_size, "the body is %s", reason);
                return NULL;
        }
        if (!cJSON_IsObject(j)) {
                cJSON_Delete(j);
                snprintf(why, why_size, "the body must be a JSON object");
                return NULL;
        }
        return j;
}

cJSON *sh_native_json(sh_request *r)
{
        size_t len;
        char *body = sh_request_body(r, &len), why[128];
        cJSON *j;

        if (!body) { /* a route without a buffered body: a bug of the route table */
                sh_reply_errorf(r, SH_E_INTERNAL, "no body buffered for this route");
                return NULL;
        }
        j = sh_native_json_text(body, len, why, sizeof(why));
        if (!j && why[0])
                sh_reply_errorf(r, SH_E_INVALID, "%s", why);
        return j;
}

char *sh_native_path_param(sh_request *r, const char *name, bool optional)
{
        const sh_query_param *p = sh_query_find(sh_request_query(r), name);
        char *path = NULL;

        if (!p || p->val_len == 0) {
                if (optional)
                        return strdup("");
                sh_reply_errorf(r, SH_E_INVALID, "missing query parameter '%s'", name);
                return NULL;
        }
        if (sh_path_normalize(p->val, p->val_len, &path) < 0) {
                sh_reply_errorf(r, SH_E_INVALID,
                                "invalid path (empty, NUL byte, longer than %d bytes, or "
                                "climbing above the workspace)",
                                SH_PATH_MAX);
                return NULL;
        }
        return path;
}
