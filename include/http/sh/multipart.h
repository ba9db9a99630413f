/* multipart.h: a streaming multipart/form-data parser (RFC 7578 over RFC 2046) for an upload's
 * body sink (the execd `POST /files/upload`'s, OPENSANDBOX.md 3.2). Fed the body in chunks of any
 * size (one byte at a time works), it calls part_begin / part_data / part_end as the parts go
 * by. Its memory is fixed at creation: a part's data goes to part_data as it arrives, and only
 * a boundary's length of it is held back between two calls (it may be the start of the next
 * delimiter). Pure: no syscalls; every byte of the body and of the Content-Type is hostile.
 *
 * What it accepts, and why where it is a choice:
 * - Content-Type: `multipart/form-data` (any case) with exactly one `boundary` parameter,
 *   quoted or not, of 1..70 characters of RFC 2046's bchars, not ending in a space; other
 *   parameters are ignored; at most SH_MP_CONTENT_TYPE_MAX bytes.
 * - Preamble and epilogue are ignored (RFC 2046 5.1.1). Clients write no preamble, so a body
 *   without the first boundary in its first SH_MP_PREAMBLE_MAX bytes is refused at once (a
 *   wrong boundary is not read to the end of a large body). A delimiter is "CRLF--boundary"
 *   followed by "--" (the close), by spaces/tabs then CRLF, or by CRLF; the same bytes followed
 *   by anything else are a part's data, not a delimiter (so they may appear in a file).
 * - Part headers: lines ending in CRLF (a bare CR or LF, a NUL, another control character but
 *   tab, an obsolete folded line, a line that is no `Name: value`: refused), at most
 *   SH_MP_HEADER_MAX bytes in all per part, at most SH_MP_PARTS_MAX parts. Content-Disposition
 *   is required and must be `form-data` with a non-empty `name`; `filename` is optional
 *   (RFC 7578 4.2); a repeated parameter or header is refused (two readers must never see two
 *   different names); other parameters (`filename*`, which RFC 7578 forbids) are ignored.
 *   Content-Transfer-Encoding, if present, must be 7bit, 8bit or binary (nothing is decoded).
 * - Quoted strings are decoded: `\x` is x (RFC 822 quoted-pair), so `name="a\"b"` is the name
 *   `a"b`. A raw CR or LF cannot be inside one (it ends the header line, and the line is then
 *   an unterminated quote: refused). Percent escapes (`%22`, which browsers and undici write for
 *   a quote) are not decoded: names are compared as sent. Bytes >= 0x80 pass (UTF-8 file names),
 *   unchecked.
 * - A part whose headers end the part at once (`...CRLF CRLF--boundary`) has no data
 *   (RFC 2046: the body of a part is optional); a body that is `--boundary--` has no part. */
#pragma once

#include <stddef.h>

#include "sh/error.h"

#define SH_MP_BOUNDARY_MAX     70         /* RFC 2046 */
#define SH_MP_CONTENT_TYPE_MAX 1024       /* bytes of the request's Content-Type */
#define SH_MP_HEADER_MAX       (8 * 1024) /* bytes of one part's headers, blank line included */
#define SH_MP_PARTS_MAX        256        /* parts of one body (128 metadata/file pairs) */
#define SH_MP_PREAMBLE_MAX     (8 * 1024) /* bytes before the first boundary */

typedef struct sh_mp sh_mp;

/* What part_begin is told; valid until part_end returns (or the parser is freed). */
typedef struct sh_mp_part {
        const char *name;         /* the field's name, decoded, non-empty, no NUL */
        const char *filename;     /* decoded, may be ""; NULL: no filename parameter */
        const char *content_type; /* the header's value, trimmed; NULL: none given */
        unsigned index;           /* 0 for the first part of the body */
} sh_mp_part;

/* The caller's side. Each returns 0, or < 0 with *err set to stop the parse: sh_mp_feed then
 * returns that result and error, and nothing is called any more. After an error (the caller's
 * or the parser's) the open part gets no part_end: the caller drops what it made of it. */
typedef struct sh_mp_callbacks {
        int (*part_begin)(void *ctx, const sh_mp_part *part, sh_error **err);
        /* The next n > 0 bytes of the open part's data, in order. */
        int (*part_data)(void *ctx, const char *p, size_t n, sh_error **err);
        /* The open part's data is complete (its delimiter was seen). */
        int (*part_end)(void *ctx, sh_error **err);
} sh_mp_callbacks;

/* The boundary of a Content-Type value (NULL: none), checked as above, NUL-terminated in ret.
 * 0, or < 0 with an SH_E_INVALID error saying what is wrong. */
int sh_mp_boundary(const char *content_type, char ret[SH_MP_BOUNDARY_MAX + 1], sh_error **err);

/* A parser for a body of that Content-Type (sh_mp_boundary's errors). `cb` and `ctx` are kept
 * (cb must outlive the parser). 0 and *ret, or < 0. */
int sh_mp_new(const char *content_type, const sh_mp_callbacks *cb, void *ctx, sh_mp **ret,
              sh_error **err);

/* The next n bytes of the body (n may be 0). 0, or < 0 with *err: SH_E_INVALID for a body
 * that breaks the rules above, SH_E_TOO_LARGE for a header block or part count over its
 * bound, or what a callback returned. After a failure every call fails again. */
int sh_mp_feed(sh_mp *m, const char *p, size_t n, sh_error **err);

/* The body is over: 0 if it ended with the close delimiter (the epilogue after it is
 * ignored); < 0 with an SH_E_INVALID error for a body that holds no boundary at all (a missing
 * or wrong boundary) or that stops before the close delimiter (a cut body: the open part gets
 * no part_end). */
int sh_mp_finish(sh_mp *m, sh_error **err);

/* How many parts have begun so far. */
unsigned sh_mp_parts(const sh_mp *m);

/* Free the parser (NULL is fine); returns NULL. */
sh_mp *sh_mp_free(sh_mp *m);
