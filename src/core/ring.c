/* ring.c: a bounded byte ring and the tail of a text to show (sh/ring.h). */
#include "sh/ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void sh_ring_append(sh_ring *g, const char *p, size_t n)
{
        size_t end, first;

        g->total += n;
        if (!g->cap || !n)
                return;
        /* Below the bound the bytes sit from 0 on (the ring only wraps once it is full):
         * growing is a realloc. */
        if (g->alloc < g->cap && g->len + n > g->alloc) {
                size_t want = g->alloc ? 2 * g->alloc : 4096;
                char *q;

                while (want < g->len + n && want < g->cap)
                        want *= 2;
                if (want > g->cap)
                        want = g->cap;
                q = realloc(g->p, want);
                if (!q)
                        return;
                g->p = q;
                g->alloc = want;
        }
        if (g->alloc < g->cap) {
                memcpy(g->p + g->len, p, n);
                g->len += n;
                return;
        }
        /* Only the last cap bytes of a long append can stay. */
        if (n >= g->cap) {
                p += n - g->cap;
                memcpy(g->p, p, g->cap);
                g->start = 0;
                g->len = g->cap;
                return;
        }
        end = (g->start + g->len) % g->cap;
        first = g->cap - end < n ? g->cap - end : n;
        memcpy(g->p + end, p, first);
        memcpy(g->p, p + first, n - first);
        if (g->len + n > g->cap) {
                g->start = (g->start + g->len + n - g->cap) % g->cap;
                g->len = g->cap;
        } else {
                g->len += n;
        }
}

void sh_ring_copy(const sh_ring *g, char *out)
{
        size_t first;

        if (!g->len)
                return;
        first = g->cap - g->start < g->len ? g->cap - g->start : g->len;
        memcpy(out, g->p + g->start, first);
        memcpy(out + first, g->p, g->len - first);
}

void sh_ring_done(sh_ring *g)
{
        free(g->p);
        *g = (sh_ring){0};
}

size_t sh_text_tail(char *text, size_t len, size_t budget, bool *cut)
{
        size_t skip = len > budget ? len - budget : 0;
        const char *nl;

        *cut = *cut || skip > 0;
        /* Cut inside a line: start at the next whole one, when it is near. */
        if (*cut && skip < len && (skip == 0 || text[skip - 1] != '\n')) {
                nl = memchr(text + skip, '\n',
                            len - skip < SH_TAIL_LINE_SKIP ? len - skip : SH_TAIL_LINE_SKIP);
                if (nl && (size_t)(nl + 1 - text) < len)
                        skip = (size_t)(nl + 1 - text);
        }
        memmove(text, text + skip, len - skip);
        text[len - skip] = '\0';
        return len - skip;
}

int sh_ring_tail(const sh_ring *g, size_t budget, char **ret, size_t *ret_len, bool *ret_cut)
{
        char *all = malloc(g->len + 1);

        if (!all)
                return -ENOMEM;
        sh_ring_copy(g, all);
        *ret_cut = g->total > g->len;
        *ret_len = sh_text_tail(all, g->len, budget, ret_cut);
        *ret = all;
        return 0;
}
