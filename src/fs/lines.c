/* lines.c: a range of a file's lines, read in bounded steps (sh/lines.h). */
#include "sh/lines.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

void sh_fs_lines_init(sh_fs_lines *l, int fd, uint64_t offset, uint64_t limit)
{
        l->fd = fd;
        l->first = offset;
        l->end = limit && limit <= UINT64_MAX - offset ? offset + limit : 0; /* else: to the last */
        l->line = 1;
        l->emitted = 0;
        l->open_line = false;
}

static bool past_end(const sh_fs_lines *l)
{
        return l->end && l->line >= l->end;
}

/* The wanted bytes of n bytes read at q into b (at most n + 1: a separator may come first;
 * the room is there). */
static void split(sh_fs_lines *l, const char *q, size_t n, sh_buf *b)
{
        const char *end = q + n;

        while (q < end && !past_end(l)) {
                const char *nl = memchr(q, '\n', (size_t)(end - q));
                const char *seg = nl ? nl : end;

                if (l->line >= l->first && (seg > q || nl)) {
                        if (!l->open_line) {
                                if (l->emitted++ > 0)
                                        b->p[b->len++] = '\n';
                                l->open_line = true;
                        }
                        memcpy(b->p + b->len, q, (size_t)(seg - q));
                        b->len += (size_t)(seg - q);
                }
                if (!nl)
                        break;
                l->line++;
                l->open_line = false;
                q = nl + 1;
        }
}

int sh_fs_lines_step(sh_fs_lines *l, sh_buf *b)
{
        ssize_t n;

        if (past_end(l))
                return 0;
        do
                n = read(l->fd, l->buf, sizeof(l->buf));
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if (n == 0)
                return 0;
        if (sh_buf_reserve(b, (size_t)n + 1) < 0)
                return -ENOMEM;
        split(l, l->buf, (size_t)n, b);
        return 1;
}
