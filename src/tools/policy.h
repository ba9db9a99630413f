/* policy.h: what a tool bundle may hold, entry by entry (CONTRACT.md section 6), as one pure
 * function the unpacker asks before libarchive writes anything: relative paths without "..",
 * no entry below a symbolic link of the bundle, symbolic links that stay inside the bundle,
 * hard links to entries of the bundle, only files, directories and links, bounded depth, count
 * and size; and the modes an entry gets. Every byte of an entry is hostile. No system calls
 * (tests/unit/test_tools_policy.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SH_BUNDLE_PATH_MAX  4096 /* bytes of an entry's path or link target */
#define SH_BUNDLE_DEPTH_MAX 64   /* path components of one entry */

/* One entry as the archive describes it. */
typedef struct sh_bundle_entry {
        const char *path;     /* as in the archive */
        const char *hardlink; /* the target of a hard link, or NULL */
        const char *symlink;  /* the target of a symbolic link (type S_IFLNK), or NULL */
        mode_t type;          /* S_IFREG, S_IFDIR, S_IFLNK, ... (libarchive's AE_IF* are these) */
        int64_t size;         /* bytes of data (< 0: the archive is corrupt) */
        mode_t perm;          /* the mode bits the author gave */
} sh_bundle_entry;

typedef enum {
        SH_BUNDLE_TAKE,             /* unpack it, with *ret_perm */
        SH_BUNDLE_SKIP,             /* "." or "./": the bundle's root itself */
        SH_BUNDLE_TOO_MANY,         /* more than SH_TOOLS_FILES_MAX entries */
        SH_BUNDLE_BAD_PATH,         /* absolute, "..", too deep or too long */
        SH_BUNDLE_BELOW_LINK,       /* a component of its path is a symbolic link of the bundle */
        SH_BUNDLE_HARDLINK_OUTSIDE, /* a hard link to no entry of the bundle */
        SH_BUNDLE_SYMLINK_OUTSIDE,  /* a symbolic link that leaves the bundle */
        SH_BUNDLE_BAD_TYPE,         /* a device node, FIFO or socket */
        SH_BUNDLE_TOO_BIG,          /* the files add up to more than SH_TOOLS_UNPACKED_MAX */
        SH_BUNDLE_NO_MEMORY,        /* the policy could not track the bundle's links */
} sh_bundle_verdict;

/* The state of one bundle's check (entries and bytes so far, its symbolic links). */
typedef struct sh_bundle_policy sh_bundle_policy;

sh_bundle_policy *sh_bundle_policy_new(void); /* NULL: out of memory */
void sh_bundle_policy_free(sh_bundle_policy *p);

/* The verdict on the next entry of the bundle; for SH_BUNDLE_TAKE *ret_perm is the mode it is
 * unpacked with: 0755 for a directory, for a file 0755 where the author made it executable by
 * anyone, else 0644 (readable by every sandbox uid, never setuid, setgid, sticky or
 * world-writable), a link's own mode is the kernel's. A refused entry changes nothing. */
sh_bundle_verdict sh_bundle_check(sh_bundle_policy *p, const sh_bundle_entry *e, mode_t *ret_perm);

/* The reason for a refusal, as the client reads it ("unsafe bundle: ..."), naming the entry
 * by its quoted path. */
void sh_bundle_reason(sh_bundle_verdict v, const char *path, char *buf, size_t size);
