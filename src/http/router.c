/* router.c: the route table (CONTRACT.md section 2) and pure path matching: 404 for unknown
 * routes whatever the method, 405 with Allow for a known route and a wrong method, decided
 * before any sandbox lookup. */
#include <string.h>

#include "sh/http.h"

static const sh_route routes[] = {
        {"/sandboxes", SH_M_POST, SH_BODY_JSON, false, sh_api_create, false},
        {"/sandboxes/{}", SH_M_DELETE, SH_BODY_NONE, true, sh_api_delete, false},
        {"/sandboxes/{}/exec", SH_M_POST, SH_BODY_JSON, true, sh_api_exec, false},
        {"/sandboxes/{}/persist", SH_M_POST, SH_BODY_JSON, true, sh_api_persist, false},
        {"/sandboxes/{}/file", SH_M_PUT, SH_BODY_UPLOAD, true, sh_api_upload, false},
        {"/sandboxes/{}/file", SH_M_GET, SH_BODY_NONE, true, sh_api_download, false},
        {"/sandboxes/{}/file", SH_M_DELETE, SH_BODY_NONE, true, sh_api_delete_file, false},
        {"/sandboxes/{}/exists", SH_M_GET, SH_BODY_NONE, true, sh_api_exists, false},
        {"/sandboxes/{}/disk-usage", SH_M_GET, SH_BODY_NONE, true, sh_api_disk_usage, false},
        {"/sandboxes/{}/size", SH_M_GET, SH_BODY_NONE, true, sh_api_size, false},
        {"/sandboxes/{}/mark-ready", SH_M_POST, SH_BODY_NONE, true, sh_api_mark_ready, false},
        {"/sandboxes/{}/ready", SH_M_GET, SH_BODY_NONE, true, sh_api_ready, false},
        {"/sandboxes/{}/walk", SH_M_GET, SH_BODY_NONE, true, sh_api_walk, false},
        {"/sandboxes/{}/mkdir", SH_M_POST, SH_BODY_JSON, true, sh_api_mkdir, false},
        {"/sandboxes/{}/dir", SH_M_DELETE, SH_BODY_NONE, true, sh_api_delete_dir, false},
        {"/sandboxes/{}/rename", SH_M_POST, SH_BODY_JSON, true, sh_api_rename, false},
        {"/tools/resolve", SH_M_POST, SH_BODY_JSON, false, sh_api_tools_resolve, false},
        {"/healthz", SH_M_GET, SH_BODY_NONE, false, sh_api_healthz, true},
        {"/readyz", SH_M_GET, SH_BODY_NONE, false, sh_api_readyz, true},
        {"/drain", SH_M_POST, SH_BODY_NONE, false, sh_api_drain, false},
};

unsigned sh_method_from_string(const char *m)
{
        if (!m)
                return 0;
        if (STREQ(m, "GET"))
                return SH_M_GET;
        if (STREQ(m, "HEAD"))
                return SH_M_HEAD;
        if (STREQ(m, "POST"))
                return SH_M_POST;
        if (STREQ(m, "PUT"))
                return SH_M_PUT;
        if (STREQ(m, "DELETE"))
                return SH_M_DELETE;
        return 0;
}

/* Match `path` against `pattern`; on success the "{}" segment (if any) is returned. */
static bool match(const char *pattern, const char *path, const char **id, size_t *id_len)
{
        *id = NULL;
        *id_len = 0;
        while (*pattern) {
                if (pattern[0] == '{' && pattern[1] == '}') {
                        size_t n = strcspn(path, "/");

                        if (n == 0)
                                return false;
                        *id = path;
                        *id_len = n;
                        path += n;
                        pattern += 2;
                        continue;
                }
                if (*pattern != *path)
                        return false;
                pattern++;
                path++;
        }
        return *path == '\0';
}

const sh_route *sh_route_match(const char *path, unsigned method, const char **ret_id,
                               size_t *ret_id_len, int *ret_status, const char **ret_allow)
{
        static const char *const allow_names[] = {"GET, HEAD", "", "POST", "PUT", "DELETE"};
        static char allow[64];
        unsigned served = 0, want = method == SH_M_HEAD ? SH_M_GET : method;
        size_t i;

        for (i = 0; i < ARRAY_SIZE(routes); i++) {
                const char *id;
                size_t id_len;

                if (!match(routes[i].pattern, path, &id, &id_len))
                        continue;
                served |= routes[i].method;
                if (routes[i].method == want) {
                        *ret_id = id;
                        *ret_id_len = id_len;
                        return &routes[i];
                }
        }
        if (!served) {
                *ret_status = 404;
                return NULL;
        }
        allow[0] = '\0';
        for (i = 0; i < ARRAY_SIZE(allow_names); i++) {
                if (!(served & (1u << i)) || !*allow_names[i])
                        continue;
                if (allow[0])
                        strcat(allow, ", ");
                strcat(allow, allow_names[i]);
        }
        *ret_status = 405;
        *ret_allow = allow;
        return NULL;
}
