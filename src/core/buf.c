/* buf.c: growable byte buffer. */
#include "sh/buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sh_buf_reserve(sh_buf *b, size_t more)
{
        size_t cap;
        char *np;

        if (b->off > 0 && b->off == b->len)
                b->off = b->len = 0;
        if (more > (size_t)-1 / 2 - b->len)
                return -ENOMEM;
        if (b->len + more <= b->cap)
                return 0;
        if (b->off > 0) { /* compact first: consumed bytes are dead space */
                memmove(b->p, b->p + b->off, b->len - b->off);
                b->len -= b->off;
                b->off = 0;
                if (b->len + more <= b->cap)
                        return 0;
        }
        cap = b->cap ? b->cap : 4096;
        while (cap < b->len + more)
                cap *= 2;
        np = realloc(b->p, cap);
        if (!np)
                return -ENOMEM;
        b->p = np;
        b->cap = cap;
        return 0;
}

int sh_buf_append(sh_buf *b, const void *data, size_t n)
{
        if (sh_buf_reserve(b, n) < 0)
                return -ENOMEM;
        if (n)
                memcpy(b->p + b->len, data, n);
        b->len += n;
        return 0;
}

int sh_buf_append_str(sh_buf *b, const char *s)
{
        return sh_buf_append(b, s, strlen(s));
}

void sh_buf_done(sh_buf *b)
{
        free(b->p);
        memset(b, 0, sizeof(*b));
}
