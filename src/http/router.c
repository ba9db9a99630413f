/* router.c: routing mechanics (pure): method names, matching a path against a surface's
 * route table (404 for unknown routes whatever the method, 405 with Allow for a known route
 * and a wrong method, decided before any parameter means anything), and choosing the
 * surface by path prefix. The tables belong to the surfaces. */
#include <string.h>

#include "sh/http.h"

static const struct {
        const char *name;
        unsigned bit;
} methods[] = {
        {"GET", SH_M_GET}, {"HEAD", SH_M_HEAD},     {"POST", SH_M_POST},
        {"PUT", SH_M_PUT}, {"DELETE", SH_M_DELETE}, {"PATCH", SH_M_PATCH},
};

unsigned sh_method_from_string(const char *m)
{
        size_t i;

        if (!m)
                return 0;
        for (i = 0; i < ARRAY_SIZE(methods); i++)
                if (STREQ(m, methods[i].name))
                        return methods[i].bit;
        return 0;
}

/* Match `path` against `pattern`, collecting the parameters. */
static bool match(const char *pattern, const char *path, sh_route_params *pp)
{
        pp->n = 0;
        while (*pattern) {
                if (pattern[0] == '{' && pattern[1] == '*' && pattern[2] == '}' && !pattern[3]) {
                        if (pp->n == SH_ROUTE_PARAMS_MAX)
                                return false;
                        pp->p[pp->n] = path;
                        pp->len[pp->n++] = strlen(path);
                        return true;
                }
                if (pattern[0] == '{' && pattern[1] == '}') {
                        size_t n = strcspn(path, "/");

                        if (n == 0 || pp->n == SH_ROUTE_PARAMS_MAX)
                                return false;
                        pp->p[pp->n] = path;
                        pp->len[pp->n++] = n;
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

/* "GET, HEAD, POST" for a set of methods, in a fixed order. */
static void allow_text(unsigned served, char allow[SH_ALLOW_MAX])
{
        size_t i, len = 0;

        if (served & SH_M_GET)
                served |= SH_M_HEAD;
        allow[0] = '\0';
        for (i = 0; i < ARRAY_SIZE(methods); i++) {
                size_t n = strlen(methods[i].name);

                if (!(served & methods[i].bit) || len + n + 3 > SH_ALLOW_MAX)
                        continue;
                if (len) {
                        memcpy(allow + len, ", ", 2);
                        len += 2;
                }
                memcpy(allow + len, methods[i].name, n + 1);
                len += n;
        }
}

const sh_route *sh_route_match(const sh_route *routes, size_t n, const char *path, unsigned method,
                               sh_route_params *params, sh_error_kind *ret_kind,
                               char allow[SH_ALLOW_MAX])
{
        unsigned served = 0, want = method == SH_M_HEAD ? SH_M_GET : method;
        size_t i;

        for (i = 0; i < n; i++) {
                sh_route_params pp;

                if (!match(routes[i].pattern, path, &pp))
                        continue;
                served |= routes[i].methods;
                if (want && (routes[i].methods & want)) {
                        *params = pp;
                        return &routes[i];
                }
        }
        if (!served) {
                *ret_kind = SH_E_NO_ROUTE;
                return NULL;
        }
        allow_text(served, allow);
        *ret_kind = SH_E_METHOD_NOT_ALLOWED;
        return NULL;
}

const sh_surface *sh_surface_for(const sh_surface *s, size_t n, const char *path)
{
        const sh_surface *best = NULL;
        size_t i, best_len = 0;

        for (i = 0; i < n; i++) {
                size_t len = strlen(s[i].prefix);

                if (strncmp(path, s[i].prefix, len) == 0 && (!best || len > best_len)) {
                        best = &s[i];
                        best_len = len;
                }
        }
        return best;
}
