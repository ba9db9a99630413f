/* cmdlog.c: the bounded log of a background command's output (OPENSANDBOX.md section 3.1):
 * the last `max` bytes in blocks (the memory a log holds is its blocks, so a sandbox's logs can
 * be budgeted together), byte offsets over everything ever appended (the logs route's
 * `cursor`), reads from an offset. Pure. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "execd.h"

static uint64_t kept(const os_log *g)
{
        if (g->n_blk == 0)
                return 0;
        return (uint64_t)(g->n_blk - 1) * OS_LOG_BLOCK + g->tail - g->head;
}

uint64_t os_log_first(const os_log *g)
{
        return g->total - kept(g);
}

size_t os_log_blocks(const os_log *g)
{
        return g->n_blk;
}

bool os_log_drop_block(os_log *g)
{
        if (g->n_blk == 0)
                return false;
        free(g->blk[0]);
        memmove(g->blk, g->blk + 1, (g->n_blk - 1) * sizeof(*g->blk));
        g->n_blk--;
        g->head = 0;
        if (g->n_blk == 0)
                g->tail = 0;
        return true;
}

long os_log_append(os_log *g, const char *p, size_t n)
{
        uint64_t max = g->max ? g->max : 1;
        long delta = 0;
        size_t run;

        g->total += n;
        while (n > 0) {
                if (g->n_blk == 0 || g->tail == OS_LOG_BLOCK) {
                        char *b;

                        if (g->n_blk == g->cap_blk) {
                                size_t nc = g->cap_blk ? 2 * g->cap_blk : 8;
                                char **nb = realloc(g->blk, nc * sizeof(*nb));

                                if (!nb)
                                        return INT32_MIN;
                                g->blk = nb;
                                g->cap_blk = nc;
                        }
                        if (!(b = malloc(OS_LOG_BLOCK)))
                                return INT32_MIN;
                        g->blk[g->n_blk++] = b;
                        g->tail = 0;
                        delta++;
                }
                run = OS_LOG_BLOCK - g->tail < n ? OS_LOG_BLOCK - g->tail : n;
                memcpy(g->blk[g->n_blk - 1] + g->tail, p, run);
                g->tail += run;
                p += run;
                n -= run;
                /* The oldest bytes go past the bound: whole blocks first, then the head of
                 * the oldest moves (its memory goes with the block). */
                while (kept(g) > max) {
                        uint64_t over = kept(g) - max;

                        if (g->n_blk > 1 && over >= OS_LOG_BLOCK - g->head) {
                                os_log_drop_block(g);
                                delta--;
                        } else {
                                g->head += (size_t)over;
                        }
                }
        }
        return delta;
}

int os_log_read(const os_log *g, uint64_t from, char **ret, size_t *ret_len, uint64_t *ret_from)
{
        uint64_t first = os_log_first(g), n;
        size_t b, off, out = 0, run;
        char *p;

        if (from < first)
                from = first;
        *ret = NULL;
        *ret_len = 0;
        *ret_from = from > g->total ? g->total : from;
        if (from >= g->total)
                return 0;
        n = g->total - from;
        if (n > SIZE_MAX || !(p = malloc((size_t)n)))
                return -ENOMEM;
        /* the position of `from` among the blocks */
        off = (size_t)(from - first) + g->head;
        b = off / OS_LOG_BLOCK;
        off %= OS_LOG_BLOCK;
        for (; b < g->n_blk && out < n; b++, off = 0) {
                size_t end = b == g->n_blk - 1 ? g->tail : OS_LOG_BLOCK;

                run = end - off;
                memcpy(p + out, g->blk[b] + off, run);
                out += run;
        }
        *ret = p;
        *ret_len = out;
        return 0;
}

void os_log_done(os_log *g)
{
        size_t i;

        for (i = 0; i < g->n_blk; i++)
                free(g->blk[i]);
        free(g->blk);
        *g = (os_log){.max = g->max};
}
