/* ringlog.h: a bounded log in a file of a sandbox's (sh_sandbox_open_log: outside its view, on
 * the filesystem of its disk limit): the last `max` bytes of what was appended (a background
 * command's output, an entrypoint's), the file a ring of max bytes (byte offset o at o % max,
 * so it never holds more), byte offsets over everything appended, reads from an offset in
 * bounded steps. The daemon holds none of its bytes, and no fd of it between uses.
 * sh_ringlog_write and sh_ringlog_pread work on a given fd (pure but for that I/O). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sh/error.h"
#include "sh/sandbox.h"

typedef struct sh_ringlog {
        uint64_t total; /* the offset after the newest byte kept */
        uint64_t first; /* the offset of the oldest byte kept (total: none) */
        uint64_t max;   /* the bound (> 0) */
        char name[24];  /* its file; "" once dropped */
        bool made;      /* the file exists */
        bool warned;    /* a write fell short, and the log said so */
} sh_ringlog;

uint64_t sh_ringlog_first(const sh_ringlog *g);
uint64_t sh_ringlog_kept(const sh_ringlog *g); /* total - first */
/* Write n bytes (the last max of them) at the end of the log into fd, its file opened for
 * writing. Returns the bytes kept (fewer than n when the file could not grow: its filesystem
 * is full; what was not written is not counted), or -errno when none could be. */
ssize_t sh_ringlog_write(sh_ringlog *g, int fd, const char *p, size_t n);
/* Up to n bytes from offset off into out, read from fd (its file): the count, 0 at or past
 * the end, -ESTALE when off is no longer kept (overwritten or dropped), -errno. */
ssize_t sh_ringlog_pread(const sh_ringlog *g, int fd, uint64_t off, char *out, size_t n);

/* A log of max bytes in the file `name` of the sandbox's log directory (sh_sandbox_open_log's
 * rules), made by its first append (a log that never gets a byte leaves no file). */
void sh_ringlog_init(sh_ringlog *g, const char *name, uint64_t max);
/* The same, its file made now (empty, new): 0, or -1 with err (the sandbox's disk is full). */
int sh_ringlog_create(sh_ringlog *g, sh_sandbox *sb, const char *name, uint64_t max,
                      sh_error **err);
/* Append n bytes through sb: the change in bytes kept (what was dropped to make room counts
 * negative). A write that falls short is logged once per log (log_id: the sandbox). Nothing is
 * written into a deleted sandbox (its file goes with its tree). */
int64_t sh_ringlog_append(sh_ringlog *g, sh_sandbox *sb, const char *p, size_t n,
                          const char *log_id);
/* sh_ringlog_pread through sb (the file opened and closed in the call). */
ssize_t sh_ringlog_read(const sh_ringlog *g, sh_sandbox *sb, uint64_t off, char *out, size_t n);
/* The tail of its text to show (sh_text_tail, sh/ring.h): at most its last `budget` bytes,
 * read through sb, as a new string the caller frees; *ret_cut: older bytes are left out. 0,
 * or -errno. */
int sh_ringlog_tail(const sh_ringlog *g, sh_sandbox *sb, size_t budget, char **ret, size_t *ret_len,
                    bool *ret_cut);
/* Keep nothing more, and remove its file (sb NULL or deleted: the file goes with the
 * sandbox's tree). Returns the bytes it kept. */
uint64_t sh_ringlog_drop(sh_ringlog *g, sh_sandbox *sb, const char *log_id);
