/* fuzz_router.c: routing (http/router.c) against the real route tables: the native surface's
 * and each file's of the /v1 surface, and the choice of surface by prefix. Input: a method
 * byte, then the decoded path (any byte but NUL). Properties: a matched route serves the
 * method, and its pattern with its parameters put in is the path ("{}" one non-empty segment,
 * "{*}" the rest); an unmatched one is 404, or 405 with the methods the path serves. */
#include "fuzz.h"

#include "os-internal.h"
#include "sh/native.h"

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "BREW"};

/* The pattern of r with p's parameters put in is path. */
static void check_params(const sh_route *r, const sh_route_params *p, const char *path)
{
        const char *pat = r->pattern, *s = path;
        unsigned k = 0;

        while (*pat) {
                if (pat[0] == '{') {
                        bool rest = pat[1] == '*';

                        FZ_CHECK(k < p->n && p->p[k] == s);
                        if (rest) {
                                FZ_CHECK(p->len[k] == strlen(s));
                        } else {
                                FZ_CHECK(p->len[k] > 0 && !memchr(s, '/', p->len[k]));
                        }
                        s += p->len[k++];
                        pat += rest ? 3 : 2;
                        continue;
                }
                FZ_CHECK(*pat == *s);
                pat++;
                s++;
        }
        FZ_CHECK(*s == '\0' && k == p->n);
}

static void match(const sh_route *routes, size_t n, const char *path, unsigned m)
{
        sh_error_kind kind = SH_E_INTERNAL;
        char allow[SH_ALLOW_MAX];
        sh_route_params p;
        const sh_route *r = sh_route_match(routes, n, path, m, &p, &kind, allow);

        if (r) {
                FZ_CHECK(r->methods & (m == SH_M_HEAD ? SH_M_GET : m));
                check_params(r, &p, path);
                return;
        }
        FZ_CHECK(kind == SH_E_NO_ROUTE || kind == SH_E_METHOD_NOT_ALLOWED);
        if (kind == SH_E_METHOD_NOT_ALLOWED)
                FZ_CHECK(strnlen(allow, SH_ALLOW_MAX) > 0 &&
                         strnlen(allow, SH_ALLOW_MAX) < SH_ALLOW_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const struct {
                const sh_route *v;
                const size_t *n;
        } tables[] = {
                {sh_native_routes, &sh_native_n_routes},
                {os_lifecycle_routes, &os_lifecycle_n_routes},
                {os_pause_routes, &os_pause_n_routes},
                {os_snapshot_routes, &os_snapshot_n_routes},
                {os_diag_routes, &os_diag_n_routes},
                {os_command_routes, &os_command_n_routes},
                {os_session_routes, &os_session_n_routes},
                {os_metrics_routes, &os_metrics_n_routes},
                {os_files_routes, &os_files_n_routes},
                {os_proxy_routes, &os_proxy_n_routes},
        };
        const sh_surface surfaces[] = {{.name = "native", .prefix = "/"},
                                       {.name = "opensandbox", .prefix = "/v1/"}};
        fz f = fz_init(data, size);
        const char *name = methods[fz_mode(&f, ARRAY_SIZE(methods))];
        unsigned m = sh_method_from_string(name);
        char *path = fz_rest_str(&f);
        const sh_surface *s;
        size_t i;

        FZ_CHECK(STREQ(name, "BREW") ? m == 0 : m != 0);
        for (i = 0; i < ARRAY_SIZE(tables); i++)
                match(tables[i].v, *tables[i].n, path, m);
        s = sh_surface_for(surfaces, ARRAY_SIZE(surfaces), path);
        FZ_CHECK(path[0] == '/' ? s != NULL : s == NULL);
        if (s)
                FZ_CHECK(s == &surfaces[strncmp(path, "/v1/", 4) == 0]);
        FZ_CHECK(sh_method_from_string(path) == 0 || strlen(path) <= 6);
        free(path);
        return 0;
}
