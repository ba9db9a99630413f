/* range.c: the Range header of a download (RFC 9110 section 14): one byte range over a file of a
 * known size, judged without any I/O, and its Content-Range; a file's Content-Disposition
 * (pure). */
#include "sh/range.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
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

void sh_range_header(char *out, size_t n, bool ok, uint64_t from, uint64_t to, uint64_t size)
{
        if (ok)
                snprintf(out, n, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, from, to, size);
        else
                snprintf(out, n, "bytes */%" PRIu64, size);
}

char *sh_content_disposition(const char *path)
{
        const char *base = strrchr(path, '/');
        char plain[256], enc[3 * 255 + 1];
        size_t np = 0, ne = 0;
        char *h = NULL;

        base = base ? base + 1 : path;
        /* at most 255 bytes of the name: 3 each at most in enc */
        for (const unsigned char *c = (const unsigned char *)base; *c && np < 255; c++) {
                plain[np++] = (*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\') ? (char)*c : '_';
                if (isalnum(*c) || strchr("!#$&+-.^_`|~", *c))
                        enc[ne++] = (char)*c;
                else
                        ne += (size_t)snprintf(enc + ne, 4, "%%%02X", *c);
        }
        plain[np] = enc[ne] = '\0';
        return asprintf(&h, "attachment; filename=\"%s\"; filename*=UTF-8''%s", plain, enc) < 0
                       ? NULL
                       : h;
}
