/* passwd.c: name <-> id lookups in an image's /etc/passwd or /etc/group text (hostile input). */
#include "passwd.h"

#include <errno.h>
#include <string.h>

#define ID_DIGITS_MAX 10 /* UINT32_MAX has 10 digits */
#define FIELDS_MAX    7  /* the most any kind has */

static bool portable(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '-';
}

bool os_iddb_name_valid(const char *s, size_t len)
{
        size_t body = len;
        bool digits = true;

        if (len == 0 || len > OS_IDDB_NAME_MAX || s[0] == '-')
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

int os_iddb_parse_id(const char *s, size_t len, uint32_t *ret)
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
        if (v >= OS_IDDB_ID_NONE)
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

static size_t fields_of(os_iddb_kind kind)
{
        return kind == OS_IDDB_GROUP ? 4 : 7;
}

/* Whether the line [p, p + n) is a well-formed entry of `kind`; fills *e. Every access is
 * below p + n: the line was cut by the caller at its '\n' or at the end of the buffer. */
static bool parse_line(os_iddb_kind kind, const char *p, size_t n, entry *e)
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
        if (!os_iddb_name_valid(field[0], flen[0]))
                return false;
        if (os_iddb_parse_id(field[2], flen[2], &e->id) < 0)
                return false;
        e->name = field[0];
        e->name_len = flen[0];
        return true;
}

/* Call match() on each well-formed entry of db in order until it returns true. */
static bool scan(os_iddb_kind kind, const char *db, size_t len,
                 bool (*match)(const entry *e, const void *want), const void *want, entry *found)
{
        size_t pos = 0;

        if (!db)
                return false;
        while (pos < len) {
                const char *nl = memchr(db + pos, '\n', len - pos);
                size_t n = nl ? (size_t)(nl - (db + pos)) : len - pos;
                entry e;

                /* A line too long to hold valid fields is still only scanned once: memchr and
                 * the field split are both linear, so the whole lookup is O(len). */
                if (parse_line(kind, db + pos, n, &e) && match(&e, want)) {
                        *found = e;
                        return true;
                }
                pos += n + 1;
        }
        return false;
}

static bool match_name(const entry *e, const void *want)
{
        const char *name = want;

        return strlen(name) == e->name_len && memcmp(name, e->name, e->name_len) == 0;
}

static bool match_id(const entry *e, const void *want)
{
        return e->id == *(const uint32_t *)want;
}

int os_iddb_lookup_name(os_iddb_kind kind, const char *db, size_t len, const char *name,
                        uint32_t *ret_id)
{
        entry e;

        if (!name || !os_iddb_name_valid(name, strnlen(name, OS_IDDB_NAME_MAX + 1)))
                return -EINVAL;
        if (!scan(kind, db, len, match_name, name, &e))
                return -ENOENT;
        *ret_id = e.id;
        return 0;
}

int os_iddb_lookup_id(os_iddb_kind kind, const char *db, size_t len, uint32_t id,
                      char ret_name[OS_IDDB_NAME_MAX + 1])
{
        entry e;

        if (!scan(kind, db, len, match_id, &id, &e))
                return -ENOENT;
        memcpy(ret_name, e.name, e.name_len); /* <= OS_IDDB_NAME_MAX: checked by the parse */
        ret_name[e.name_len] = '\0';
        return 0;
}

int os_iddb_resolve(os_iddb_kind kind, const char *db, size_t len, const char *spec,
                    uint32_t *ret_id)
{
        size_t n;
        bool digits = true;

        if (!spec)
                return -EINVAL;
        n = strnlen(spec, OS_IDDB_NAME_MAX + 1);
        for (size_t i = 0; i < n; i++)
                if (spec[i] < '0' || spec[i] > '9')
                        digits = false;
        if (n > 0 && digits) {
                if (spec[n] != '\0')
                        return -ERANGE; /* more than OS_IDDB_NAME_MAX digits */
                return os_iddb_parse_id(spec, n, ret_id);
        }
        return os_iddb_lookup_name(kind, db, len, spec, ret_id);
}
