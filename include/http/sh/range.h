/* range.h: the Range header of a download (RFC 9110 section 14) over a file of a known size,
 * judged without any I/O, its Content-Range, and the Content-Disposition of a file sent as an
 * attachment (pure): the /v1 download's (OPENSANDBOX.md section 3.2; sh_reply_file). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One range `bytes=a-b`, `a-` or `-n` (the unit in any case) over a file of `size` bytes. 1
 * with [*from, *to] inclusive, an end at or past the size being the last byte and a suffix
 * longer than the file all of it; -1 when unsatisfiable (416: a start at or past the size, `-0`,
 * an empty file); 0 when the header is no such range and the whole file is served (junk, b < a,
 * several ranges). Numbers too long for 64 bits saturate: a huge start is past the file, a huge
 * end its end. */
int sh_range_parse(const char *h, uint64_t size, uint64_t *from, uint64_t *to);

/* The Content-Range of [from, to] of `size` bytes ("bytes a-b/size"), or of none for a 416
 * ("bytes * /size" without the space; ok false), into out (n bytes; SH_RANGE_HEADER_MAX is
 * enough). */
#define SH_RANGE_HEADER_MAX 96
void sh_range_header(char *out, size_t n, bool ok, uint64_t from, uint64_t to, uint64_t size);

/* Content-Disposition for the file `path`'s base name: `attachment; filename="..."` (plain
 * printable ASCII, every other byte, a quote or a backslash as '_') and RFC 5987's `filename*`
 * (the exact name, percent-encoded UTF-8), so that no quote, CR or LF of a name ever reaches a
 * header as such; a name is cut at 255 bytes. Allocated (the caller frees it), NULL when out of
 * memory. */
char *sh_content_disposition(const char *path);
