/* access.c: the uid rules of the /v1 file routes (files.c acts as root in the sandbox's root and
 * must never do for the sandbox what its own uid could not) and the decoder of the POSIX ACLs
 * they honour. Pure: no syscalls; the bytes decoded are hostile (tests/unit/test_os_access.c
 * checks the answers against the kernel's own for random modes and ACLs). */
#include "access.h"

#include <errno.h>

/* <linux/posix_acl_xattr.h> and <linux/posix_acl.h>, which are not all exported to user
 * space: the xattr's version and its entries' tags and permissions. */
#define ACL_XATTR_VERSION 0x0002u
#define ACL_HEADER        4u
#define ACL_ENTRY         8u
#define TAG_USER_OBJ      0x01u
#define TAG_USER          0x02u
#define TAG_GROUP_OBJ     0x04u
#define TAG_GROUP         0x08u
#define TAG_MASK          0x10u
#define TAG_OTHER         0x20u
#define NO_ID             0xffffffffu /* (uid_t)-1: no id, as the kernel refuses it */

static uint32_t le16(const unsigned char *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t le32(const unsigned char *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct entry {
        uint32_t tag, perm, id;
} entry;

static entry entry_at(const os_acl *acl, size_t i)
{
        const unsigned char *p = acl->p + (size_t)i * ACL_ENTRY;

        return (entry){le16(p), le16(p + 2), le32(p + 4)};
}

int os_acl_parse(const void *buf, size_t len, os_acl *ret)
{
        const unsigned char *b = buf;
        os_acl acl;
        /* posix_acl_valid's states: the owner, named users, the owning group, named groups,
         * the mask, other, done */
        enum { S_USER_OBJ, S_USER, S_GROUP, S_OTHER, S_DONE } state = S_USER_OBJ;
        bool needs_mask = false;

        if (!b || len < ACL_HEADER + ACL_ENTRY || len > OS_ACL_BYTES_MAX ||
            (len - ACL_HEADER) % ACL_ENTRY != 0 || le32(b) != ACL_XATTR_VERSION)
                return -EINVAL;
        acl = (os_acl){b + ACL_HEADER, (len - ACL_HEADER) / ACL_ENTRY};
        for (size_t i = 0; i < acl.n; i++) {
                entry e = entry_at(&acl, i);

                if (e.perm & ~7u)
                        return -EINVAL;
                switch (e.tag) {
                case TAG_USER_OBJ:
                        if (state != S_USER_OBJ)
                                return -EINVAL;
                        state = S_USER;
                        break;
                case TAG_USER:
                        if (state != S_USER || e.id == NO_ID)
                                return -EINVAL;
                        needs_mask = true;
                        break;
                case TAG_GROUP_OBJ:
                        if (state != S_USER)
                                return -EINVAL;
                        state = S_GROUP;
                        break;
                case TAG_GROUP:
                        if (state != S_GROUP || e.id == NO_ID)
                                return -EINVAL;
                        needs_mask = true;
                        break;
                case TAG_MASK:
                        if (state != S_GROUP)
                                return -EINVAL;
                        state = S_OTHER;
                        break;
                case TAG_OTHER:
                        if (state != S_OTHER && (state != S_GROUP || needs_mask))
                                return -EINVAL;
                        state = S_DONE;
                        break;
                default:
                        return -EINVAL;
                }
                if (state == S_DONE && i + 1 != acl.n)
                        return -EINVAL; /* nothing after other */
        }
        if (state != S_DONE)
                return -EINVAL;
        *ret = acl;
        return 0;
}

static bool in_groups(const os_who *who, uint32_t gid)
{
        for (size_t i = 0; i < who->n_gids; i++)
                if (who->gids[i] == gid)
                        return true;
        return false;
}

/* posix_acl_permission for someone not the owner: the first named user entry that names the
 * uid decides (limited by the mask); else the owning group and the named groups the process
 * is in: one of them must grant everything wanted (each limited by the mask), and if any
 * matched but none granted, other is not consulted. */
static bool acl_allows(const os_inode *ino, const os_acl *acl, const os_who *who, unsigned want)
{
        bool found = false;

        for (size_t i = 0; i < acl->n; i++) {
                entry e = entry_at(acl, i);

                switch (e.tag) {
                case TAG_USER:
                        if (e.id != who->uid)
                                continue;
                        break;
                case TAG_GROUP_OBJ:
                case TAG_GROUP:
                        if (!in_groups(who, e.tag == TAG_GROUP ? e.id : ino->gid))
                                continue;
                        found = true;
                        if ((e.perm & want) != want)
                                continue;
                        break;
                case TAG_OTHER:
                        return !found && (e.perm & want) == want;
                default: /* the owner's entry (not who), the mask */
                        continue;
                }
                /* a named entry matched: the mask after it limits it */
                for (size_t j = i + 1; j < acl->n; j++) {
                        entry m = entry_at(acl, j);

                        if (m.tag == TAG_MASK)
                                return (e.perm & m.perm & want) == want;
                }
                return (e.perm & want) == want;
        }
        return false; /* no other entry: os_acl_parse never lets one through */
}

bool os_access_acl_matters(const os_inode *ino, const os_who *who)
{
        return ino->uid != who->uid && (ino->mode & 070);
}

bool os_access_allowed(const os_inode *ino, const os_acl *acl, const os_who *who, unsigned want)
{
        unsigned bits;

        want &= 7u;
        /* The sandbox's own entries: it could chmod them anyway. */
        if (ino->uid == who->uid)
                return true;
        if (acl && os_access_acl_matters(ino, who))
                return acl_allows(ino, acl, who, want);
        bits = in_groups(who, ino->gid) ? (ino->mode >> 3) & 7u : ino->mode & 7u;
        return (want & ~bits) == 0;
}
