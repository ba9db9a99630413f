/* idmap.c: the names of the image's /etc/passwd and /etc/group, parsed from bytes a sandbox may
 * have written (a writable image is not read-only for its own sandbox's files elsewhere, and an
 * image is anyone's tarball): bounded in bytes read and entries kept, strict on the shape of a
 * line, never trusting a terminator. Pure. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"

static bool name_ok(const char *p, size_t n)
{
        if (n == 0 || n > OS_IDMAP_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = p[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-' || (c == '$' && i == n - 1)))
                        return false;
        }
        return true;
}

/* Decimal digits only, at most 4294967294 (-1 is no id). */
static bool id_parse(const char *p, size_t n, uint32_t *ret)
{
        uint64_t v = 0;

        if (n == 0 || n > 10)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return false;
                v = v * 10 + (uint64_t)(p[i] - '0');
        }
        if (v >= UINT32_MAX)
                return false;
        *ret = (uint32_t)v;
        return true;
}

int os_idmap_parse(os_idmap *m, const char *p, size_t n)
{
        const char *end;
        size_t cap = 0;

        m->v = NULL;
        m->n = 0;
        if (n > OS_IDMAP_FILE_MAX)
                n = OS_IDMAP_FILE_MAX;
        end = p + n;
        while (p < end && m->n < OS_IDMAP_ENTRIES) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *le = nl ? nl : end;
                const char *c1, *c2, *c3;
                uint32_t id;

                /* name ':' password ':' id (':' or end of line) */
                c1 = memchr(p, ':', (size_t)(le - p));
                c2 = c1 ? memchr(c1 + 1, ':', (size_t)(le - c1 - 1)) : NULL;
                c3 = c2 ? memchr(c2 + 1, ':', (size_t)(le - c2 - 1)) : NULL;
                if (!c3)
                        c3 = le;
                if (c1 && c2 && name_ok(p, (size_t)(c1 - p)) &&
                    id_parse(c2 + 1, (size_t)(c3 - c2 - 1), &id)) {
                        if (m->n == cap) {
                                size_t nc = cap ? cap * 2 : 64;
                                os_idmap_entry *v = realloc(m->v, nc * sizeof(*v));
                                if (!v) {
                                        os_idmap_done(m);
                                        return -ENOMEM;
                                }
                                m->v = v;
                                cap = nc;
                        }
                        memcpy(m->v[m->n].name, p, (size_t)(c1 - p));
                        m->v[m->n].name[c1 - p] = '\0';
                        m->v[m->n].id = id;
                        m->n++;
                }
                p = nl ? nl + 1 : end;
        }
        return 0;
}

int os_idmap_lookup(const os_idmap *m, const char *name, uint32_t *ret)
{
        for (size_t i = 0; i < m->n; i++)
                if (strcmp(m->v[i].name, name) == 0) {
                        *ret = m->v[i].id;
                        return 0;
                }
        if (id_parse(name, strlen(name), ret))
                return 0;
        return -ENOENT;
}

const char *os_idmap_name(const os_idmap *m, uint32_t id)
{
        for (size_t i = 0; i < m->n; i++)
                if (m->v[i].id == id)
                        return m->v[i].name;
        return NULL;
}

void os_idmap_done(os_idmap *m)
{
        free(m->v);
        m->v = NULL;
        m->n = 0;
}
