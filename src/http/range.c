/* range.c: the Range header of a download (RFC 9110 section 14): one byte range over a file of a
 * known size, judged without any I/O (pure). */
#include "sh/range.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

/* The decimal digits at *p (at least one), saturated at UINT64_MAX: a position past any file
 * is past this one too, so an overflow never wraps to a small one. false without a digit. */
static bool digits(const char **p, uint64_t *ret)
{
        const char *s = *p;
        uint64_t v = 0;

        if (*s < '0' || *s > '9')
                return false;
        for (; *s >= '0' && *s <= '9'; s++) {
                unsigned d = (unsigned)(*s - '0');

                v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
        }
        *p = s;
        *ret = v;
        return true;
}

int sh_range_parse(const char *h, uint64_t size, uint64_t *from, uint64_t *to)
{
        const char *p;
        uint64_t a, b;

        /* the unit is case-insensitive; several ranges are not served (the whole file is) */
        if (strncasecmp(h, "bytes=", 6) != 0 || strchr(h, ','))
                return 0;
        p = h + 6;
        if (*p == '-') { /* the last n bytes: all of them when the file is shorter */
                p++;
                if (!digits(&p, &b) || *p)
                        return 0;
                if (b == 0 || size == 0)
                        return -1;
                *from = b >= size ? 0 : size - b;
                *to = size - 1;
                return 1;
        }
        if (!digits(&p, &a) || *p++ != '-')
                return 0;
        if (!*p)
                b = UINT64_MAX; /* a-: to the end */
        else if (!digits(&p, &b) || *p || b < a)
                return 0; /* b < a is invalid, so ignored (RFC 9110 section 14.1.1) */
        if (a >= size)
                return -1;
        /* an end at or past the size is the last byte: the range is what the file has */
        *from = a;
        *to = b >= size ? size - 1 : b;
        return 1;
}
