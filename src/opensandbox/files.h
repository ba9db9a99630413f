/* files.h: what the execd file routes share (issue 14; OPENSANDBOX.md section 3.2): the
 * streaming multipart parser of uploads (multipart.c, pure) and the bounded reader of the
 * image's /etc/passwd and /etc/group (idmap.c, pure over bytes). Nothing outside
 * src/opensandbox/ includes it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ---- bounds (docs/opensandbox.md "Limits") ------------------------------------------------ */

#define OS_MP_BOUNDARY_MAX 70          /* RFC 2046 */
#define OS_MP_HEADERS_MAX  8192        /* one part's headers */
#define OS_MP_HOLD         (64u << 10) /* bytes held back while looking for a delimiter */
#define OS_MP_METADATA_MAX (64u << 10) /* one metadata part */
#define OS_IDMAP_FILE_MAX  (1u << 20)  /* bytes of /etc/passwd or /etc/group read */
#define OS_IDMAP_NAME_MAX  64          /* a user or group name kept */
#define OS_IDMAP_ENTRIES   16384       /* entries kept of one file */

/* ---- multipart.c ---------------------------------------------------------------------------- */

typedef enum {
        OS_MP_START = 0,
        OS_MP_PREAMBLE,
        OS_MP_AFTER_DELIM,
        OS_MP_HEADERS,
        OS_MP_BODY,
        OS_MP_DONE,
} os_mp_state;

typedef enum {
        OS_MP_PART,     /* a part's headers are in: m->name, m->filename */
        OS_MP_DATA,     /* some of its data (p, n) */
        OS_MP_PART_END, /* its data is complete */
} os_mp_event;

/* cb for each event; < 0 stops the parse with that value. */
typedef int (*os_mp_fn)(void *data, os_mp_event ev, const char *p, size_t n);

typedef struct os_mp {
        os_mp_state state;
        char delim[OS_MP_BOUNDARY_MAX + 8];
        size_t dlen;
        char hold[OS_MP_HOLD];
        size_t hlen, hoff;
        bool rescan;
        char tail; /* after a delimiter: '-' or '\r' seen */
        unsigned pad;
        char hdr[OS_MP_HEADERS_MAX + 1];
        size_t hdr_len;
        /* the current part */
        char name[256];
        char filename[1024];
        bool has_filename;
} os_mp;

/* The boundary parameter of a multipart/form-data Content-Type. 0 or -EINVAL. */
int os_mp_boundary(const char *ctype, char out[OS_MP_BOUNDARY_MAX + 1]);
void os_mp_init(os_mp *m, const char *boundary);
/* Feed the next n bytes of the body. 0, the callback's value < 0, -EINVAL (not multipart as
 * RFC 7578 writes it) or -E2BIG (a part's headers over the bound). */
int os_mp_feed(os_mp *m, const char *p, size_t n, os_mp_fn cb, void *data);
/* The closing delimiter was seen. */
bool os_mp_done(const os_mp *m);

/* ---- idmap.c -------------------------------------------------------------------------------- */

/* Names and ids of one of the image's files (/etc/passwd or /etc/group): `name:x:id:...` lines.
 * A line that is not of that shape (binary, no colon, a number out of range, a name with bytes
 * outside [A-Za-z0-9._-] or too long) is skipped; at most OS_IDMAP_ENTRIES are kept. */
typedef struct os_idmap_entry {
        char name[OS_IDMAP_NAME_MAX + 1];
        uint32_t id;
} os_idmap_entry;

typedef struct os_idmap {
        os_idmap_entry *v;
        size_t n;
} os_idmap;

/* Parse n bytes (any bytes; at most OS_IDMAP_FILE_MAX are looked at). 0 or -ENOMEM. */
int os_idmap_parse(os_idmap *m, const char *p, size_t n);
/* The id of a name, or of a number written in decimal ("1000"). 0, or -ENOENT. */
int os_idmap_lookup(const os_idmap *m, const char *name, uint32_t *ret);
/* The first name of an id, or NULL. */
const char *os_idmap_name(const os_idmap *m, uint32_t id);
void os_idmap_done(os_idmap *m);
