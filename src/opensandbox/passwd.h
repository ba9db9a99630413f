/* passwd.h: the user and group names of a sandbox's image (OPENSANDBOX.md 3.2): lookups in
 * the text of its /etc/passwd or /etc/group, given as a buffer the caller read (at most
 * OS_IDDB_READ_MAX bytes, through the sandbox root). The text is the image's, so hostile:
 * any bytes, NULs, huge or endless lines, no final newline, missing fields, ids that are not
 * numbers or overflow, duplicate names. Pure: no syscalls, nothing read past `len`, no
 * allocation. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OS_IDDB_NAME_MAX 32         /* bytes of a user or group name (useradd's limit) */
#define OS_IDDB_READ_MAX (1u << 20) /* what the caller should read of either file at most */
#define OS_IDDB_ID_NONE  UINT32_MAX /* (uid_t)-1: chown's "leave it", never a valid id */

typedef enum os_iddb_kind {
        OS_IDDB_PASSWD = 0, /* name:password:uid:gid:gecos:home:shell (7 fields) */
        OS_IDDB_GROUP,      /* name:password:gid:members (4 fields) */
} os_iddb_kind;

/* Whether `len` bytes are a name this module accepts: 1..OS_IDDB_NAME_MAX bytes of the POSIX
 * portable filename character set [A-Za-z0-9._-] (the portable user name of POSIX 3.437),
 * not starting with '-', optionally ending in one '$' (Samba machine accounts, which
 * shadow's useradd also accepts), and not all digits (a number is an id, never a name: a
 * group called "1000" would make "1000" mean two things). Stricter than glibc, which takes any
 * bytes but ':' and '\n': a line whose name fails this is ignored, so odd bytes in an image's
 * file can never be matched or shown. */
bool os_iddb_name_valid(const char *s, size_t len);

/* A numeric id: 1..10 decimal digits (no sign, space or '+'), at most OS_IDDB_ID_NONE - 1.
 * Returns 0, or -EINVAL (not a number) / -ERANGE (too large, including (uid_t)-1). */
int os_iddb_parse_id(const char *s, size_t len, uint32_t *ret);

/* The id of the first line of `db` (`len` bytes, any content) that names `name` and is well
 * formed (exactly the kind's field count, a valid name, a valid id): later duplicates are
 * never seen, as in glibc. Lines that start with '#', '+' or '-' (comments, NIS) are
 * skipped, and so is any line holding a NUL. Returns 0 and *ret_id, -EINVAL when `name` is
 * no valid name (os_iddb_name_valid), -ENOENT when no line has it. */
int os_iddb_lookup_name(os_iddb_kind kind, const char *db, size_t len, const char *name,
                        uint32_t *ret_id);

/* The name of the first well-formed line of `db` with id `id`, NUL-terminated in ret_name.
 * Returns 0, or -ENOENT (FileInfo then shows the number). */
int os_iddb_lookup_id(os_iddb_kind kind, const char *db, size_t len, uint32_t id,
                      char ret_name[OS_IDDB_NAME_MAX + 1]);

/* What a client's `owner` or `group` means (OPENSANDBOX.md 3.2: "names (or numbers)"): a
 * string of digits is that id (db is not consulted and may be NULL), anything else a name
 * looked up in db. Returns 0 and *ret_id; -EINVAL (neither a number nor a valid name),
 * -ERANGE (a number too large), -ENOENT (a name not in db). Whether the id may be used
 * (mapped in the sandbox's user namespace) is the caller's to check. */
int os_iddb_resolve(os_iddb_kind kind, const char *db, size_t len, const char *spec,
                    uint32_t *ret_id);
