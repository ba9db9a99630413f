/* linesplit.h: a stream of bytes cut into lines as they come: "\n", "\r" and "\r\n" each end
 * a line (OpenSandbox's execd splits a command's output so); a line longer than `max` is cut at
 * the last UTF-8 character boundary at or below it, so no cut splits a valid character. Memory:
 * one buffer of `max` bytes, made when a line first spans two feeds (pure). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* One line (its terminator stripped; len 0: an empty line), or a cut of a longer one. Returns 0
 * to go on, 1 to stop the feed (the rest of the bytes is not lines), < 0 on error. */
typedef int (*sh_line_fn)(void *data, const char *line, size_t len);

typedef struct sh_linesplit {
        size_t max; /* the longest line given whole (> 0) */
        char *p;    /* the line so far (max bytes once allocated) */
        size_t len;
        bool cr; /* the last byte was '\r': a '\n' right after ends nothing */
} sh_linesplit;

/* Feed n bytes: fn for each complete line. Returns the bytes consumed (n, or fewer when fn
 * stopped the feed), or < 0 (fn's error, or -ENOMEM). */
ssize_t sh_linesplit_feed(sh_linesplit *l, const char *p, size_t n, sh_line_fn fn, void *data);
/* The end of the stream: the last unterminated line, if any. 0 or < 0. */
int sh_linesplit_flush(sh_linesplit *l, sh_line_fn fn, void *data);
/* Its buffer freed; it may be fed again. */
void sh_linesplit_done(sh_linesplit *l);
