/* fuzz_acl.c: the POSIX ACL decoder and the uid rules of the /v1 file routes
 * (opensandbox/access.c, through access.h): the `system.posix_acl_access` bytes come from a
 * filesystem the sandbox or an image wrote. Input: the inode's uid, gid and mode, the acting
 * uid, up to 3 groups (a count byte, then 4 bytes each), the access wanted (1 byte), then the
 * xattr's bytes. Properties: a decoded ACL lies within the bytes; the sandbox's own entries are
 * always its own; an access granted grants each of its parts. */
#include "fuzz.h"

#include "access.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        os_inode ino = {.uid = fz_u32(&f), .gid = fz_u32(&f), .mode = fz_u32(&f)};
        uint32_t gids[3];
        os_who who = {.uid = fz_u32(&f), .gids = gids, .n_gids = fz_u8(&f) % 4};
        unsigned want, part;
        os_acl acl = {0};
        const os_acl *a = NULL;
        char *buf;

        for (size_t i = 0; i < 3; i++)
                gids[i] = fz_u32(&f);
        want = fz_u8(&f) & 7;
        buf = fz_dup(f.p, f.n);
        if (os_acl_parse(buf, f.n, &acl) == 0) {
                FZ_CHECK(acl.p == (const unsigned char *)buf + 4 && acl.n >= 1);
                FZ_CHECK(4 + acl.n * 8 == f.n);
                a = &acl;
        }
        (void)os_access_acl_matters(&ino, &who);
        if (os_access_allowed(&ino, a, &who, want)) {
                for (part = 1; part <= 4; part <<= 1)
                        if (want & part)
                                FZ_CHECK(os_access_allowed(&ino, a, &who, part));
        }
        who.uid = ino.uid;
        FZ_CHECK(os_access_allowed(&ino, a, &who, want));
        free(buf);
        return 0;
}
