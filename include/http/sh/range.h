/* range.h: the Range header of a download (RFC 9110 section 14) over a file of a known size,
 * judged without any I/O (pure): the /v1 download's (OPENSANDBOX.md section 3.2). */
#pragma once

#include <stdint.h>

/* One range `bytes=a-b`, `a-` or `-n` (the unit in any case) over a file of `size` bytes. 1
 * with [*from, *to] inclusive, an end at or past the size being the last byte and a suffix
 * longer than the file all of it; -1 when unsatisfiable (416: a start at or past the size, `-0`,
 * an empty file); 0 when the header is no such range and the whole file is served (junk, b < a,
 * several ranges). Numbers too long for 64 bits saturate: a huge start is past the file, a huge
 * end its end. */
int sh_range_parse(const char *h, uint64_t size, uint64_t *from, uint64_t *to);
