/* access.h: what a sandbox's uid may do to an entry, judged for the daemon that acts as root in
 * the sandbox's root (files.c): the uid rules and the POSIX ACL decoder. Pure: no syscalls
 * (unit-tested in tests/unit/test_os_access.c, also against the kernel's own answers). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The access wanted, as the permission bits of a mode: read, write, search or execute. */
#define OS_MAY_READ  4u
#define OS_MAY_WRITE 2u
#define OS_MAY_EXEC  1u

/* The longest `system.posix_acl_access` value judged: its 4-byte header and 1,023 entries of
 * 8 bytes. Longer (the kernel allows 8,191): refused, never judged in part. */
#define OS_ACL_BYTES_MAX 8192u

/* An access ACL as the kernel gives it through `system.posix_acl_access` (little-endian: a
 * version header, then entries of tag, permission and id), checked by os_acl_parse: `n`
 * entries from `p` (which stays the caller's). */
typedef struct os_acl {
        const unsigned char *p;
        size_t n;
} os_acl;

/* Check the `len` bytes at `buf`, hostile (they come from a filesystem the sandbox or an image
 * wrote): the version, whole entries, at most OS_ACL_BYTES_MAX bytes, known tags and
 * permissions, and the kernel's own rules for a valid ACL (posix_acl_valid: exactly one owner,
 * owning-group and other entry, named users and groups in ascending order without duplicates,
 * a mask exactly when there are named entries, in that order). 0 and *ret, or -EINVAL. */
int os_acl_parse(const void *buf, size_t len, os_acl *ret);

/* The entry judged: its owner, group and mode (a statx's stx_uid, stx_gid, stx_mode). */
typedef struct os_inode {
        uint32_t uid, gid;
        uint32_t mode;
} os_inode;

/* Who acts: the sandbox's uid and its groups as its processes have them (the gid, and the
 * supplementary groups: the volumes' group when it mounts a volume, else none). */
typedef struct os_who {
        uint32_t uid;
        const uint32_t *gids;
        size_t n_gids;
} os_who;

/* May `who` have every access of `want` (OS_MAY_*) on `ino`, whose access ACL is `acl` (NULL:
 * it has none)? The sandbox's own entries are wholly its own (it could chmod them): always.
 * Anyone else's: exactly as the kernel judges an unprivileged process (acl_permission_check
 * and posix_acl_permission of fs/namei.c and fs/posix_acl.c): the ACL's named users, then the
 * owning group and named groups (one of them must grant all of `want`), each limited by the
 * mask, then other; the ACL is consulted only when the mode's group bits are not all clear,
 * as the kernel does; without one, the group's bits or the others'. */
bool os_access_allowed(const os_inode *ino, const os_acl *acl, const os_who *who, unsigned want);

/* Whether an entry of this mode can hold an ACL that changes the answer for someone not its
 * owner: its group bits are not all clear (the kernel looks no further otherwise). The
 * caller reads the xattr only then. */
bool os_access_acl_matters(const os_inode *ino, const os_who *who);
