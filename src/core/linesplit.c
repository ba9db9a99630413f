/* linesplit.c: a stream of bytes cut into lines as they come, with a bound on a line
 * (sh/linesplit.h). */
#include "sh/linesplit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

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

/* The first '\n' or '\r' at or after i (n: none): 16 bytes at a time with SSE2, else one. Each
 * call looks at the bytes up to the terminator it returns, and the next starts after it: a
 * feed looks at each byte once. */
static size_t next_eol(const char *p, size_t i, size_t n)
{
#ifdef __SSE2__
        const __m128i nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r');

        for (; i + 16 <= n; i += 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
                unsigned m = (unsigned)_mm_movemask_epi8(
                        _mm_or_si128(_mm_cmpeq_epi8(v, nl), _mm_cmpeq_epi8(v, cr)));

                if (m)
                        return i + (size_t)__builtin_ctz(m);
        }
#endif
        while (i < n && p[i] != '\n' && p[i] != '\r')
                i++;
        return i;
}

ssize_t sh_linesplit_feed(sh_linesplit *l, const char *p, size_t n, sh_line_fn fn, void *data)
{
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
                j = next_eol(p, i, n);
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
