/* layerpolicy.h: what an OCI image layer may hold, entry by entry, as one pure function the
 * layer unpacker asks before anything is written (images-design.md, "What an unpacked layer
 * directory holds"): relative paths without "..", no entry below a symbolic link of the
 * layer, hard links only to files and links of the layer that came before, only files,
 * directories and links (and whiteouts, in their OCI form), bounded depth, length, count and
 * size. Unlike a tool bundle (tools/policy.h), a layer keeps its owners and modes, and its
 * symbolic links are stored as they are (absolute targets too): they are never followed by
 * the unpacker, and inside a sandbox they resolve in its own root. Every byte of an entry is
 * hostile. No system calls (tests/unit/test_layerpolicy.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SH_LAYER_PATH_MAX  4096u /* bytes of an entry's path or link target, NUL included */
#define SH_LAYER_DEPTH_MAX 256u  /* path components of one entry */

#define SH_LAYER_WHITEOUT_PREFIX ".wh."
#define SH_LAYER_OPAQUE_NAME     ".wh..wh..opq"

/* One entry as the archive describes it. */
typedef struct sh_layer_entry {
        const char *path;     /* as in the archive */
        size_t path_len;      /* its bytes as the archive gave them: a NUL among them is refused */
        const char *hardlink; /* the target of a hard link, or NULL */
        mode_t type;          /* S_IFREG, S_IFDIR, S_IFLNK, ... (libarchive's AE_IF* are these) */
        int64_t size;         /* bytes of data (< 0: the archive is corrupt) */
} sh_layer_entry;

typedef enum {
        SH_LAYER_TAKE,       /* write it, at the normalised path (and hard link target) */
        SH_LAYER_SKIP,       /* the layer's root, or aufs metadata (".wh..wh.*"): ignored */
        SH_LAYER_WHITEOUT,   /* ".wh.NAME": a 0/0 character device at the normalised path */
        SH_LAYER_OPAQUE,     /* ".wh..wh..opq": its directory (normalised, "" the root) opaque */
        SH_LAYER_TOO_MANY,   /* more than max_entries entries */
        SH_LAYER_TOO_BIG,    /* the files add up to more than max_bytes */
        SH_LAYER_BAD_PATH,   /* absolute, a ".." component, a NUL, or empty */
        SH_LAYER_TOO_DEEP,   /* more than SH_LAYER_DEPTH_MAX components */
        SH_LAYER_TOO_LONG,   /* SH_LAYER_PATH_MAX bytes or more */
        SH_LAYER_BELOW_LINK, /* a component of its path is a symbolic link of the layer */
        SH_LAYER_HARDLINK_OUTSIDE, /* a hard link to a path that cannot be in the layer */
        SH_LAYER_HARDLINK_FORWARD, /* a hard link to no file or link of the layer before it */
        SH_LAYER_BAD_TYPE,         /* a device node, FIFO or socket */
        SH_LAYER_BAD_WHITEOUT,     /* ".wh." alone, a whiteout of "." or "..", or of an entry of
                                     * this layer, or not a plain file */
        SH_LAYER_NO_MEMORY,        /* the policy could not track the layer's entries */
} sh_layer_verdict;

/* The state of one layer's check (entries and bytes so far, what each path is). */
typedef struct sh_layer_policy sh_layer_policy;

sh_layer_policy *sh_layer_policy_new(uint64_t max_bytes, uint64_t max_entries); /* NULL: ENOMEM */
void sh_layer_policy_free(sh_layer_policy *p);

/* The verdict on the next entry of the layer. For TAKE, WHITEOUT and OPAQUE, `norm` (of
 * `size` >= SH_LAYER_PATH_MAX bytes) receives the normalised path (no "." or empty component,
 * no leading or trailing "/") the entry is written at (for WHITEOUT the whited-out name, for
 * OPAQUE its directory), and for a hard link `norm_link` (same size) its normalised target.
 * Every header counts toward max_entries. A refused entry is the end of the layer. */
sh_layer_verdict sh_layer_check(sh_layer_policy *p, const sh_layer_entry *e, char *norm,
                                char *norm_link, size_t size);

/* Entries and bytes of regular files counted so far. */
uint64_t sh_layer_policy_entries(const sh_layer_policy *p);
uint64_t sh_layer_policy_bytes(const sh_layer_policy *p);

/* The reason for a refusal, as the client reads it ("layer refused: ..."), naming the entry
 * by its quoted path (printable ASCII only). */
void sh_layer_reason(const sh_layer_policy *p, sh_layer_verdict v, const char *path, char *buf,
                     size_t size);
