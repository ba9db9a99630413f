/* passwd.c: an image's /etc/passwd or /etc/group text (hostile input) as a table of names and
 * ids, looked up both ways. */
#include "sh/passwd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ID_DIGITS_MAX 10 /* UINT32_MAX has 10 digits */
#define FIELDS_MAX    7  /* the most any kind has */

static bool portable(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '-';
}

bool sh_iddb_name_valid(const char *s, size_t len)
{
        size_t body = len;
        bool digits = true;

        if (len == 0 || len > SH_IDDB_NAME_MAX || s[0] == '-')
                return false;
        if (s[len - 1] == '$')
                body--;
        if (body == 0)
                return false;
        for (size_t i = 0; i < body; i++) {
                if (!portable(s[i]))
                        return false;
                if (s[i] < '0' || s[i] > '9')
                        digits = false;
        }
        return !digits;
}

int sh_iddb_parse_id(const char *s, size_t len, uint32_t *ret)
{
        uint64_t v = 0;

        if (len == 0)
                return -EINVAL;
        for (size_t i = 0; i < len; i++)
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
        /* Bounded before the arithmetic: 10 digits fit a uint64_t whatever they are. Leading
         * zeros beyond that are too long a number, not an overflow of ours. */
        if (len > ID_DIGITS_MAX)
                return -ERANGE;
        for (size_t i = 0; i < len; i++)
                v = v * 10 + (uint64_t)(s[i] - '0');
        /* (uid_t)-1 means "leave it" to chown: it must never come out of a lookup. */
        if (v >= SH_IDDB_ID_NONE)
                return -ERANGE;
        *ret = (uint32_t)v;
        return 0;
}

/* One line of the file, split in place into at most FIELDS_MAX fields (pointers into db). */
typedef struct entry {
        const char *name;
        size_t name_len;
        uint32_t id;
} entry;

static size_t fields_of(sh_iddb_kind kind)
{
        return kind == SH_IDDB_GROUP ? 4 : 7;
}

/* Whether the line [p, p + n) is a well-formed entry of `kind`; fills *e. Every access is
 * below p + n: the line was cut by the caller at its '\n' or at the end of the buffer. */
static bool parse_line(sh_iddb_kind kind, const char *p, size_t n, entry *e)
{
        const char *field[FIELDS_MAX];
        size_t flen[FIELDS_MAX], nf = 0, want = fields_of(kind), start = 0;

        if (n == 0 || p[0] == '#' || p[0] == '+' || p[0] == '-')
                return false;
        /* A NUL anywhere makes the line unusable: C code reading the same file (glibc) would
         * see a different line than we do. */
        if (memchr(p, '\0', n))
                return false;
        for (size_t i = 0; i <= n; i++) {
                if (i < n && p[i] != ':')
                        continue;
                if (nf == want)
                        return false; /* more fields than the kind has */
                field[nf] = p + start;
                flen[nf++] = i - start;
                start = i + 1;
        }
        if (nf != want)
                return false;
        if (!sh_iddb_name_valid(field[0], flen[0]))
                return false;
        if (sh_iddb_parse_id(field[2], flen[2], &e->id) < 0)
                return false;
        e->name = field[0];
        e->name_len = flen[0];
        return true;
}

/* The next entry of the table, grown by doubling up to SH_IDDB_ENTRIES_MAX. NULL: no memory. */
static sh_idmap_entry *grow(sh_idmap *m, size_t *cap)
{
        if (m->n == *cap) {
                size_t nc = *cap ? *cap * 2 : 64;
                sh_idmap_entry *v;

                if (nc > SH_IDDB_ENTRIES_MAX)
                        nc = SH_IDDB_ENTRIES_MAX;
                v = realloc(m->v, nc * sizeof(*v));
                if (!v)
                        return NULL;
                m->v = v;
                *cap = nc;
        }
        return &m->v[m->n];
}

/* Both orders break ties by the address in m->v, which is the file's order: the first of
 * duplicates comes first, and a lookup finds it. */
static int cmp_id(const void *a, const void *b)
{
        const sh_idmap_entry *x = *(const sh_idmap_entry *const *)a;
        const sh_idmap_entry *y = *(const sh_idmap_entry *const *)b;

        if (x->id != y->id)
                return x->id < y->id ? -1 : 1;
        return x < y ? -1 : x > y;
}

static int cmp_name(const void *a, const void *b)
{
        const sh_idmap_entry *x = *(const sh_idmap_entry *const *)a;
        const sh_idmap_entry *y = *(const sh_idmap_entry *const *)b;
        int c = strcmp(x->name, y->name);

        if (c)
                return c;
        return x < y ? -1 : x > y;
}

int sh_idmap_parse(sh_idmap *m, sh_iddb_kind kind, const char *db, size_t len)
{
        size_t pos = 0, cap = 0;

        *m = (sh_idmap){0};
        while (db && pos < len && m->n < SH_IDDB_ENTRIES_MAX) {
                const char *nl = memchr(db + pos, '\n', len - pos);
                size_t n = nl ? (size_t)(nl - (db + pos)) : len - pos;
                sh_idmap_entry *slot;
                entry e;

                /* A line too long to hold valid fields is still only scanned once: memchr and
                 * the field split are both linear, so the whole parse is O(len). */
                if (parse_line(kind, db + pos, n, &e)) {
                        if (!(slot = grow(m, &cap)))
                                goto oom;
                        slot->id = e.id;
                        memcpy(slot->name, e.name, e.name_len); /* <= SH_IDDB_NAME_MAX */
                        slot->name[e.name_len] = '\0';
                        m->n++;
                }
                pos += n + 1;
        }
        if (m->n == 0)
                return 0;
        m->by_id = malloc(m->n * sizeof(*m->by_id));
        m->by_name = malloc(m->n * sizeof(*m->by_name));
        if (!m->by_id || !m->by_name)
                goto oom;
        for (size_t i = 0; i < m->n; i++)
                m->by_id[i] = m->by_name[i] = &m->v[i];
        qsort(m->by_id, m->n, sizeof(*m->by_id), cmp_id);
        qsort(m->by_name, m->n, sizeof(*m->by_name), cmp_name);
        return 0;
oom:
        sh_idmap_done(m);
        return -ENOMEM;
}

int sh_idmap_lookup_name(const sh_idmap *m, const char *name, uint32_t *ret_id)
{
        size_t lo = 0, hi = m->n;

        if (!name || !sh_iddb_name_valid(name, strnlen(name, SH_IDDB_NAME_MAX + 1)))
                return -EINVAL;
        /* the first entry whose name is not below `name`: the first line of that name */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (strcmp(m->by_name[mid]->name, name) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == m->n || strcmp(m->by_name[lo]->name, name) != 0)
                return -ENOENT;
        *ret_id = m->by_name[lo]->id;
        return 0;
}

const char *sh_idmap_name(const sh_idmap *m, uint32_t id)
{
        size_t lo = 0, hi = m->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (m->by_id[mid]->id < id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < m->n && m->by_id[lo]->id == id ? m->by_id[lo]->name : NULL;
}

int sh_idmap_resolve(const sh_idmap *m, const char *spec, uint32_t *ret_id)
{
        size_t n;
        bool digits = true;

        if (!spec)
                return -EINVAL;
        n = strnlen(spec, SH_IDDB_NAME_MAX + 1);
        for (size_t i = 0; i < n; i++)
                if (spec[i] < '0' || spec[i] > '9')
                        digits = false;
        if (n > 0 && digits) {
                if (spec[n] != '\0')
                        return -ERANGE; /* more than SH_IDDB_NAME_MAX digits */
                return sh_iddb_parse_id(spec, n, ret_id);
        }
        return sh_idmap_lookup_name(m, spec, ret_id);
}

void sh_idmap_done(sh_idmap *m)
{
        free(m->v);
        free(m->by_id);
        free(m->by_name);
        *m = (sh_idmap){0};
}
