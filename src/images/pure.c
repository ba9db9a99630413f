/* pure.c: what the image service's pure decoders share (pure.h). */
#include "pure.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/util.h"

void sh_why(char *reason, size_t n, const char *fmt, ...)
{
        va_list ap;

        if (!reason || !n)
                return;
        va_start(ap, fmt);
        vsnprintf(reason, n, fmt, ap);
        va_end(ap);
}

const char *sh_quote(const char *s, size_t n, char out[SH_QUOTE_MAX + 4])
{
        size_t k = n < SH_QUOTE_MAX ? n : SH_QUOTE_MAX;

        for (size_t i = 0; i < k; i++)
                out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
        if (k < n) {
                memcpy(out + k, "...", 3);
                k += 3;
        }
        out[k] = '\0';
        return out;
}

cJSON *sh_json_object_of(const char *body, size_t len, const char *what, char *reason, size_t n)
{
        char *copy = malloc(len + 1);
        const char *bad = NULL;
        cJSON *j;

        if (!copy) {
                sh_why(reason, n, "this host is out of memory");
                return NULL;
        }
        memcpy(copy, body, len);
        copy[len] = '\0';
        j = sh_json_parse_text(copy, &len, 0, &bad);
        free(copy);
        if (!j) {
                sh_why(reason, n, "%s is %s", what, bad ? bad : "not valid JSON");
                return NULL;
        }
        if (!cJSON_IsObject(j)) {
                cJSON_Delete(j);
                sh_why(reason, n, "%s is not a JSON object", what);
                return NULL;
        }
        return j;
}
