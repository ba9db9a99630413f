/* input.c: the native contract's input rules, shared by its handlers: JSON bodies (empty =
 * {}, must be an object, UTF-8, byte-string paths through surrogate escapes) and workspace
 * path parameters (CONTRACT.md sections 2 and 3). */
#include <string.h>

#include "sh/native.h"

/* cJSON cannot carry a NUL inside a string, accepts raw control characters and refuses lone
 * surrogates. Before parsing, scan the text: a raw control character or a \u0000 escape inside
 * a string makes the body a 400 (paths may not hold NUL), and
 * \udc80..\udcff (how Python's surrogateescape spells a non-UTF-8 byte) becomes that raw byte,
 * so byte-string paths survive a JSON body. Returns false for a \u0000 or a control byte. */
static bool json_prepass(char *text, size_t *len)
{
        size_t i = 0, o = 0, n = *len;
        bool in_string = false;

        while (i < n) {
                char c = text[i];

                if (!in_string) {
                        if (c == '"')
                                in_string = true;
                        text[o++] = text[i++];
                        continue;
                }
                if (c == '"') {
                        in_string = false;
                        text[o++] = text[i++];
                        continue;
                }
                if ((unsigned char)c < 0x20)
                        return false; /* JSON forbids raw control characters in strings */
                if (c == '\\' && i + 1 < n) {
                        if (text[i + 1] == 'u' && i + 5 < n) {
                                char hex[5] = {text[i + 2], text[i + 3], text[i + 4], text[i + 5],
                                               0};
                                unsigned long v = strtoul(hex, NULL, 16);
                                bool all_hex = strspn(hex, "0123456789abcdefABCDEF") == 4;

                                if (all_hex && v == 0)
                                        return false;
                                if (all_hex && v >= 0xdc80 && v <= 0xdcff) {
                                        text[o++] = (char)(v & 0xff);
                                        i += 6;
                                        continue;
                                }
                        }
                        text[o++] = text[i++];
                        text[o++] = text[i++];
                        continue;
                }
                text[o++] = text[i++];
        }
        text[o] = '\0';
        *len = o;
        return true;
}

cJSON *sh_native_json(sh_request *r)
{
        size_t len, i;
        char *body = sh_request_body(r, &len);
        cJSON *j;

        if (!body) { /* a route without a buffered body: a bug of the route table */
                sh_reply_errorf(r, SH_E_INTERNAL, "no body buffered for this route");
                return NULL;
        }
        for (i = 0; i < len && body[i] && strchr(" \t\r\n", body[i]); i++)
                ;
        if (i == len)
                return cJSON_CreateObject(); /* empty or whitespace-only body is {} */
        /* JSON text is UTF-8 (RFC 8259): anything else, NUL bytes included, is not JSON. */
        if (memchr(body, '\0', len) || !sh_utf8_valid(body, len)) {
                sh_reply_errorf(r, SH_E_INVALID, "the body is not valid JSON");
                return NULL;
        }
        if (!json_prepass(body, &len)) {
                sh_reply_errorf(r, SH_E_INVALID,
                                "the body is not valid JSON (a control character or NUL in a "
                                "string)");
                return NULL;
        }
        j = sh_json_parse_exact(body, len);
        if (!j) {
                sh_reply_errorf(r, SH_E_INVALID, "the body is not valid JSON");
                return NULL;
        }
        if (!cJSON_IsObject(j)) {
                cJSON_Delete(j);
                sh_reply_errorf(r, SH_E_INVALID, "the body must be a JSON object");
                return NULL;
        }
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
