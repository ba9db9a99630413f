/* passwd.h: the user and group names of a root filesystem (a sandbox's image; the /v1 file
 * API's owners and groups, OPENSANDBOX.md 3.2): a table of the entries of its /etc/passwd or
 * /etc/group, made from a buffer the caller read (at most SH_IDDB_READ_MAX bytes, through the
 * sandbox root), then looked up both ways. The text is the
 * image's, so hostile: any bytes, NULs, huge or endless lines, no final newline, missing
 * fields, ids that are not numbers or overflow, duplicate names. Pure: no syscalls, nothing read
 * past `len`; the table's memory is bounded by SH_IDDB_ENTRIES_MAX.
 *
 * Why a table and not a scan of the text per lookup: a listing or a search answers a FileInfo
 * for each of up to 200,000 entries, each naming its owner and its group, and the sandbox's own
 * ids are usually in no line, so every such lookup would read the whole file: 400 GB of work
 * for one request with a 1 MiB /etc/passwd. The table is made once per request (linear in the
 * text, then sorted) and each lookup is a binary search. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SH_IDDB_NAME_MAX    32         /* bytes of a user or group name (useradd's limit) */
#define SH_IDDB_READ_MAX    (1u << 20) /* what the caller should read of either file at most */
#define SH_IDDB_ID_NONE     UINT32_MAX /* (uid_t)-1: chown's "leave it", never a valid id */
#define SH_IDDB_ENTRIES_MAX 16384      /* well-formed lines kept of one file: the first ones */

typedef enum sh_iddb_kind {
        SH_IDDB_PASSWD = 0, /* name:password:uid:gid:gecos:home:shell (7 fields) */
        SH_IDDB_GROUP,      /* name:password:gid:members (4 fields) */
} sh_iddb_kind;

/* Whether `len` bytes are a name this module accepts: 1..SH_IDDB_NAME_MAX bytes of the POSIX
 * portable filename character set [A-Za-z0-9._-] (the portable user name of POSIX 3.437),
 * not starting with '-', optionally ending in one '$' (Samba machine accounts, which
 * shadow's useradd also accepts), and not all digits (a number is an id, never a name: a
 * group called "1000" would make "1000" mean two things). Stricter than glibc, which takes any
 * bytes but ':' and '\n': a line whose name fails this is ignored, so odd bytes in an image's
 * file can never be matched or shown. */
bool sh_iddb_name_valid(const char *s, size_t len);

/* A numeric id: 1..10 decimal digits (no sign, space or '+'), at most SH_IDDB_ID_NONE - 1.
 * Returns 0, or -EINVAL (not a number) / -ERANGE (too large, including (uid_t)-1). */
int sh_iddb_parse_id(const char *s, size_t len, uint32_t *ret);

/* One well-formed line of a file: its name and its id (uid, or gid for a group). */
typedef struct sh_idmap_entry {
        uint32_t id;
        char name[SH_IDDB_NAME_MAX + 1];
} sh_idmap_entry;

/* The well-formed lines of one file: exactly the kind's field count, a valid name
 * (sh_iddb_name_valid), a valid id (sh_iddb_parse_id); lines that start with '#', '+' or '-'
 * (comments, NIS) and any line holding a NUL are skipped. At most the first
 * SH_IDDB_ENTRIES_MAX are kept. A zeroed table is an empty one. The fields are the module's. */
typedef struct sh_idmap {
        sh_idmap_entry *v;              /* the kept lines, in the file's order */
        const sh_idmap_entry **by_id;   /* the same, by id, then in the file's order */
        const sh_idmap_entry **by_name; /* the same, by name, then in the file's order */
        size_t n;
} sh_idmap;

/* Make *m (empty: zeroed or done) from `len` bytes of `db` (any content; NULL if len is 0).
 * Returns 0, or -ENOMEM (*m is then empty). */
int sh_idmap_parse(sh_idmap *m, sh_iddb_kind kind, const char *db, size_t len);

/* The id of the first line that names `name`: later duplicates are never seen, as in glibc.
 * Returns 0 and *ret_id, -EINVAL when `name` is no valid name (sh_iddb_name_valid), -ENOENT
 * when no line has it. */
int sh_idmap_lookup_name(const sh_idmap *m, const char *name, uint32_t *ret_id);

/* The name of the first line with id `id`, or NULL (FileInfo then shows the number). Valid
 * until sh_idmap_done. */
const char *sh_idmap_name(const sh_idmap *m, uint32_t id);

/* What a client's `owner` or `group` means (OPENSANDBOX.md 3.2: "names (or numbers)"): a
 * string of digits is that id (the table is not consulted), anything else a name looked up in
 * it. Returns 0 and *ret_id; -EINVAL (neither a number nor a valid name), -ERANGE (a number too
 * large), -ENOENT (a name not in the file). Whether the id may be used (mapped in the
 * sandbox's user namespace) is the caller's to check. */
int sh_idmap_resolve(const sh_idmap *m, const char *spec, uint32_t *ret_id);

/* Free the table's memory; *m is empty again (a zeroed or empty table is fine). */
void sh_idmap_done(sh_idmap *m);
