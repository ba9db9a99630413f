/* lines.h: a range of a file's lines, read in bounded steps (the /v1 download's line mode,
 * OPENSANDBOX.md section 3.2: `offset` and `limit`): lines first..first+limit-1 (1-based),
 * joined by "\n" (a last line without its "\n" is a line; nothing after a final "\n" is). Each
 * step reads SH_FS_LINES_READ bytes of the file at most and appends the wanted lines among them
 * to the caller's buffer, so a step's work and the memory are bounded whatever the file; the
 * caller runs the steps as a job of the loop (sh/job.h). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sh/buf.h"

#define SH_FS_LINES_READ (64u << 10)

typedef struct sh_fs_lines {
        int fd;              /* read from its offset on (borrowed) */
        uint64_t first, end; /* the lines wanted: [first, end); end 0: to the last */
        uint64_t line;       /* the line the next byte read belongs to */
        uint64_t emitted;    /* lines begun in the output */
        bool open_line;      /* the current line is begun in the output */
        char buf[SH_FS_LINES_READ];
} sh_fs_lines;

/* Lines offset..offset+limit-1 of fd (offset >= 1; limit 0: to the last). */
void sh_fs_lines_init(sh_fs_lines *l, int fd, uint64_t offset, uint64_t limit);

/* One read, its wanted bytes appended to b (at most SH_FS_LINES_READ + 1). 1: more to read;
 * 0: the range (or the file) is over; -errno: the read failed, or -ENOMEM. */
int sh_fs_lines_step(sh_fs_lines *l, sh_buf *b);
