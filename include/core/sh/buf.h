/* buf.h: a growable byte buffer with a read offset (append at len, consume from off). Used
 * for request bodies, NDJSON queues and streamed JSON. */
#pragma once

#include <stddef.h>

typedef struct sh_buf {
        char *p;
        size_t len, off, cap;
} sh_buf;

/* Room for `more` bytes after len (compacting consumed bytes first). 0 or -ENOMEM. */
int sh_buf_reserve(sh_buf *b, size_t more);
/* Append n bytes. 0 or -ENOMEM. */
int sh_buf_append(sh_buf *b, const void *data, size_t n);
/* Append a string (without its NUL). 0 or -ENOMEM. */
int sh_buf_append_str(sh_buf *b, const char *s);
/* Bytes not yet consumed. */
static inline size_t sh_buf_unread(const sh_buf *b)
{
        return b->len - b->off;
}
/* Free the memory and zero the buffer (accepts a zeroed buffer). */
void sh_buf_done(sh_buf *b);
