/* linesplit.c: a stream of bytes cut into lines as they come, with a bound on a line
 * (sh/linesplit.h). */
#include "sh/linesplit.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Where to cut a full line so that no valid UTF-8 character is split: before a lead byte whose
 * sequence would run past the end. A byte that starts no valid sequence is cut anywhere. */
static size_t utf8_cut(const char *p, size_t len)
{
        size_t j, need;
        unsigned char c;

        for (j = len; j > 0 && len - j < 4; j--) {
                c = (unsigned char)p[j - 1];
                if ((c & 0xc0) == 0x80)
                        continue; /* a continuation byte: look further back */
                need = c >= 0xf0 && c <= 0xf4   ? 4
                       : c >= 0xe0 && c <= 0xef ? 3
                       : c >= 0xc2 && c <= 0xdf ? 2
                                                : 1;
                return j - 1 + need > len && j - 1 > 0 ? j - 1 : len;
        }
        return len;
}

static int line_alloc(sh_linesplit *l)
{
        if (!l->p && !(l->p = malloc(l->max)))
                return -ENOMEM;
        return 0;
}

/* The next '\n' and the next '\r' at or after i (n: none), each searched again only once i has
 * passed it: every byte is looked at by each search at most once a feed, however the two
 * alternate (a megabyte of "\r" costs one '\n' search, not one per line). memchr is the
 * C library's vectorized search. */
typedef struct eol_scan {
        size_t nl, cr; /* SIZE_MAX: not searched yet */
} eol_scan;

static size_t next_eol(eol_scan *s, const char *p, size_t i, size_t n)
{
        const char *q;

        if (s->nl == SIZE_MAX || s->nl < i) {
                q = memchr(p + i, '\n', n - i);
                s->nl = q ? (size_t)(q - p) : n;
        }
        if (s->cr == SIZE_MAX || s->cr < i) {
                q = memchr(p + i, '\r', n - i);
                s->cr = q ? (size_t)(q - p) : n;
        }
        return s->nl < s->cr ? s->nl : s->cr;
}

ssize_t sh_linesplit_feed(sh_linesplit *l, const char *p, size_t n, sh_line_fn fn, void *data)
{
        eol_scan scan = {SIZE_MAX, SIZE_MAX};
        size_t i = 0, j, run, k;
        int r;

        while (i < n) {
                if (p[i] == '\n' || p[i] == '\r') {
                        /* "\r\n" is one terminator; any other one ends a line, empty or not */
                        if (l->len > 0)
                                r = fn(data, l->p, l->len);
                        else if (p[i] == '\n' && l->cr)
                                r = 0;
                        else
                                r = fn(data, "", 0);
                        l->len = 0;
                        l->cr = p[i] == '\r';
                        i++;
                        if (r < 0)
                                return r;
                        if (r > 0)
                                return (ssize_t)i;
                        continue;
                }
                l->cr = false;
                j = next_eol(&scan, p, i, n);
                if (l->len == 0 && j < n && j - i <= l->max) {
                        /* a whole line in the input: no copy (its terminator comes next) */
                        r = fn(data, p + i, j - i);
                        l->cr = p[j] == '\r';
                        i = j + 1;
                        if (r < 0)
                                return r;
                        if (r > 0)
                                return (ssize_t)i;
                        continue;
                }
                while (i < j) {
                        if (line_alloc(l) < 0)
                                return -ENOMEM;
                        if (l->len == l->max) {
                                /* Full, and more of the line comes: cut (lazily, so that a
                                 * line of exactly 64 KiB is one event, not two). */
                                k = utf8_cut(l->p, l->len);
                                r = fn(data, l->p, k);
                                memmove(l->p, l->p + k, l->len - k);
                                l->len -= k;
                                if (r < 0)
                                        return r;
                                if (r > 0)
                                        return (ssize_t)i;
                        }
                        run = j - i < l->max - l->len ? j - i : l->max - l->len;
                        memcpy(l->p + l->len, p + i, run);
                        l->len += run;
                        i += run;
                }
        }
        return (ssize_t)n;
}

int sh_linesplit_flush(sh_linesplit *l, sh_line_fn fn, void *data)
{
        int r = 0;

        if (l->len > 0)
                r = fn(data, l->p, l->len);
        l->len = 0;
        l->cr = false;
        return r < 0 ? r : 0;
}

void sh_linesplit_done(sh_linesplit *l)
{
        free(l->p);
        *l = (sh_linesplit){.max = l->max};
}
