/* files.h: what the execd file routes share (issue 14; OPENSANDBOX.md section 3.2): the
 * bounded reader of the image's /etc/passwd and /etc/group (idmap.c, pure over bytes). Nothing
 * outside src/opensandbox/ includes it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ---- bounds (docs/opensandbox.md "Limits") ------------------------------------------------ */

#define OS_IDMAP_FILE_MAX (1u << 20) /* bytes of /etc/passwd or /etc/group read */
#define OS_IDMAP_NAME_MAX 64         /* a user or group name kept */
#define OS_IDMAP_ENTRIES  16384      /* entries kept of one file */

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
