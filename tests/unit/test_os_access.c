/* test_os_access.c: the uid rules of the /v1 file routes and their POSIX ACL decoder
 * (src/opensandbox/access.c): search is not read, the owner, the group and the others' bits,
 * every ACL entry kind and the mask, hostile ACL bytes; and, as root on a filesystem with
 * ACLs, the same answers as the kernel gives a process of that uid for random modes and ACLs
 * (read through sh_fs_acl_access on O_PATH fds, as files.c reads them). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../../src/opensandbox/access.h"
#include "sh/fsprobe.h"
#include "unit.h"

#define SB_UID 2000123u /* the sandbox's uid and gid in these tests */
#define SB_GID 2000123u

enum { USER_OBJ = 0x01, USER = 0x02, GROUP_OBJ = 0x04, GROUP = 0x08, MASK = 0x10, OTHER = 0x20 };

typedef struct ace {
        unsigned tag, perm, id;
} ace;

/* The xattr bytes of an ACL (as libacl and the kernel write them). Returns the length. */
static size_t encode(const ace *a, size_t n, unsigned char *out)
{
        out[0] = 2, out[1] = out[2] = out[3] = 0;
        for (size_t i = 0; i < n; i++) {
                unsigned char *p = out + 4 + 8 * i;

                p[0] = (unsigned char)a[i].tag, p[1] = (unsigned char)(a[i].tag >> 8);
                p[2] = (unsigned char)a[i].perm, p[3] = (unsigned char)(a[i].perm >> 8);
                for (int k = 0; k < 4; k++)
                        p[4 + k] = (unsigned char)(a[i].id >> (8 * k));
        }
        return 4 + 8 * n;
}

static const uint32_t sb_gids[] = {SB_GID};
static const os_who sb = {SB_UID, sb_gids, 1};

/* The answer for the sandbox on an entry of root's (owner 0, group `gid`) with `mode` and the
 * ACL a[0..n) (n == 0: none). */
static bool allowed(uint32_t gid, uint32_t mode, const ace *a, size_t n, unsigned want)
{
        unsigned char buf[OS_ACL_BYTES_MAX];
        const os_inode ino = {0, gid, S_IFDIR | mode};
        os_acl acl;

        if (!n)
                return os_access_allowed(&ino, NULL, &sb, want);
        ck_assert_int_eq(os_acl_parse(buf, encode(a, n, buf), &acl), 0);
        return os_access_allowed(&ino, &acl, &sb, want);
}

/* ---- the mode bits ------------------------------------------------------------------------ */

START_TEST(test_search_is_not_read)
{
        /* a directory of root's readable by others but not searchable (0744), and the other
         * way round (0711): what dir_guard asks is search, what a listing asks is both */
        ck_assert(allowed(0, 0744, NULL, 0, OS_MAY_READ));
        ck_assert(!allowed(0, 0744, NULL, 0, OS_MAY_EXEC));
        ck_assert(!allowed(0, 0744, NULL, 0, OS_MAY_READ | OS_MAY_EXEC));
        ck_assert(allowed(0, 0711, NULL, 0, OS_MAY_EXEC));
        ck_assert(!allowed(0, 0711, NULL, 0, OS_MAY_READ));
        ck_assert(!allowed(0, 0700, NULL, 0, OS_MAY_EXEC));
        ck_assert(allowed(0, 0755, NULL, 0, OS_MAY_READ | OS_MAY_EXEC));
        ck_assert(!allowed(0, 0755, NULL, 0, OS_MAY_WRITE | OS_MAY_EXEC));
}
END_TEST

START_TEST(test_the_group_bits_apply_to_the_sandboxs_group_only)
{
        ck_assert(allowed(SB_GID, 0770, NULL, 0, OS_MAY_WRITE | OS_MAY_EXEC));
        ck_assert(!allowed(SB_GID, 0707, NULL, 0, OS_MAY_EXEC)); /* the group's, not the others' */
        ck_assert(!allowed(1, 0770, NULL, 0, OS_MAY_EXEC));
        ck_assert(allowed(1, 0707, NULL, 0, OS_MAY_READ | OS_MAY_WRITE | OS_MAY_EXEC));
}
END_TEST

START_TEST(test_the_sandboxs_own_entries_are_wholly_its_own)
{
        const os_inode own = {SB_UID, 1, S_IFDIR | 0000};
        const ace deny[] = {{USER_OBJ, 0, 0}, {GROUP_OBJ, 0, 0}, {OTHER, 0, 0}};
        unsigned char buf[64];
        os_acl acl;

        ck_assert(os_access_allowed(&own, NULL, &sb, 7));
        ck_assert_int_eq(os_acl_parse(buf, encode(deny, 3, buf), &acl), 0);
        ck_assert(os_access_allowed(&own, &acl, &sb, 7));
        ck_assert(!os_access_acl_matters(&own, &sb));
}
END_TEST

/* ---- the ACL entries ---------------------------------------------------------------------- */

START_TEST(test_a_named_user_entry_overrides_the_others_bits)
{
        /* 0755 with user:sb:--- : the sandbox is refused what everyone else has */
        const ace none[] = {{USER_OBJ, 7, 0},
                            {USER, 0, SB_UID},
                            {GROUP_OBJ, 5, 0},
                            {MASK, 5, 0},
                            {OTHER, 5, 0}};
        /* 0700 with user:sb:r-x : the sandbox gets what no one else has */
        const ace some[] = {{USER_OBJ, 7, 0},
                            {USER, 5, SB_UID},
                            {GROUP_OBJ, 0, 0},
                            {MASK, 5, 0},
                            {OTHER, 0, 0}};

        ck_assert(!allowed(0, 0755, none, 5, OS_MAY_EXEC));
        ck_assert(!allowed(0, 0755, none, 5, OS_MAY_READ));
        ck_assert(allowed(0, 0750, some, 5, OS_MAY_READ | OS_MAY_EXEC));
        ck_assert(!allowed(0, 0750, some, 5, OS_MAY_WRITE));
}
END_TEST

START_TEST(test_the_mask_limits_named_entries_and_the_owning_group)
{
        const ace u[] = {{USER_OBJ, 7, 0},
                         {USER, 7, SB_UID},
                         {GROUP_OBJ, 7, 0},
                         {MASK, 4, 0},
                         {OTHER, 7, 0}};
        const ace g[] = {{USER_OBJ, 7, 0}, {GROUP_OBJ, 7, 0}, {MASK, 1, 0}, {OTHER, 7, 0}};

        ck_assert(allowed(0, 0747, u, 5, OS_MAY_READ));
        ck_assert(!allowed(0, 0747, u, 5, OS_MAY_EXEC)); /* other's 7 is never reached */
        ck_assert(allowed(SB_GID, 0717, g, 4, OS_MAY_EXEC));
        ck_assert(!allowed(SB_GID, 0717, g, 4, OS_MAY_READ));
}
END_TEST

START_TEST(test_a_matching_group_that_grants_too_little_shuts_out_other)
{
        /* the sandbox's group is named with r--, other has rwx: other is not consulted */
        const ace a[] = {{USER_OBJ, 7, 0},
                         {GROUP_OBJ, 0, 0},
                         {GROUP, 4, SB_GID},
                         {MASK, 7, 0},
                         {OTHER, 7, 0}};
        /* two matching groups: one of them must grant everything wanted on its own */
        const ace two[] = {{USER_OBJ, 7, 0},
                           {GROUP_OBJ, 4, 0},
                           {GROUP, 1, SB_GID},
                           {MASK, 7, 0},
                           {OTHER, 0, 0}};

        ck_assert(allowed(1, 0777, a, 5, OS_MAY_READ));
        ck_assert(!allowed(1, 0777, a, 5, OS_MAY_EXEC));
        ck_assert(allowed(SB_GID, 0770, two, 5, OS_MAY_READ));
        ck_assert(allowed(SB_GID, 0770, two, 5, OS_MAY_EXEC));
        ck_assert(!allowed(SB_GID, 0770, two, 5, OS_MAY_READ | OS_MAY_EXEC));
}
END_TEST

START_TEST(test_an_acl_with_the_group_bits_clear_is_not_consulted)
{
        /* as the kernel (acl_permission_check): a mask of --- makes the mode's group bits 0,
         * and then only the mode counts: a named user with rwx falls back to other */
        const ace a[] = {{USER_OBJ, 7, 0},
                         {USER, 7, SB_UID},
                         {GROUP_OBJ, 0, 0},
                         {MASK, 0, 0},
                         {OTHER, 5, 0}};

        ck_assert(allowed(0, 0705, a, 5, OS_MAY_READ | OS_MAY_EXEC));
        ck_assert(!allowed(0, 0705, a, 5, OS_MAY_WRITE));
}
END_TEST

/* ---- hostile bytes ------------------------------------------------------------------------ */

static int parse(const ace *a, size_t n)
{
        unsigned char buf[OS_ACL_BYTES_MAX + 64];
        os_acl acl;

        return os_acl_parse(buf, encode(a, n, buf), &acl);
}

START_TEST(test_invalid_acls_are_refused)
{
        const ace ok[] = {{USER_OBJ, 7, 0}, {GROUP_OBJ, 5, 0}, {OTHER, 5, 0}};
        const ace no_mask[] = {{USER_OBJ, 7, 0}, {USER, 7, 5}, {GROUP_OBJ, 5, 0}, {OTHER, 5, 0}};
        const ace order[] = {{GROUP_OBJ, 5, 0}, {USER_OBJ, 7, 0}, {OTHER, 5, 0}};
        const ace two_owners[] = {
                {USER_OBJ, 7, 0}, {USER_OBJ, 7, 0}, {GROUP_OBJ, 5, 0}, {OTHER, 5, 0}};
        const ace after[] = {{USER_OBJ, 7, 0}, {GROUP_OBJ, 5, 0}, {OTHER, 5, 0}, {USER, 7, 5}};
        const ace perm[] = {{USER_OBJ, 7, 0}, {GROUP_OBJ, 8, 0}, {OTHER, 5, 0}};
        const ace tag[] = {{USER_OBJ, 7, 0}, {GROUP_OBJ, 5, 0}, {0x40, 5, 0}, {OTHER, 5, 0}};
        const ace noid[] = {{USER_OBJ, 7, 0},
                            {USER, 7, 0xffffffffu},
                            {GROUP_OBJ, 5, 0},
                            {MASK, 7, 0},
                            {OTHER, 5, 0}};
        const ace no_other[] = {{USER_OBJ, 7, 0}, {GROUP_OBJ, 5, 0}};
        unsigned char buf[OS_ACL_BYTES_MAX + 64];
        os_acl acl;
        size_t len;

        ck_assert_int_eq(parse(ok, 3), 0);
        ck_assert_int_eq(parse(no_mask, 4), -EINVAL);
        ck_assert_int_eq(parse(order, 3), -EINVAL);
        ck_assert_int_eq(parse(two_owners, 4), -EINVAL);
        ck_assert_int_eq(parse(after, 4), -EINVAL);
        ck_assert_int_eq(parse(perm, 3), -EINVAL);
        ck_assert_int_eq(parse(tag, 4), -EINVAL);
        ck_assert_int_eq(parse(noid, 5), -EINVAL);
        ck_assert_int_eq(parse(no_other, 2), -EINVAL);
        ck_assert_int_eq(parse(ok, 0), -EINVAL);
        len = encode(ok, 3, buf);
        ck_assert_int_eq(os_acl_parse(buf, len - 1, &acl), -EINVAL); /* a cut entry */
        ck_assert_int_eq(os_acl_parse(NULL, 0, &acl), -EINVAL);
        buf[0] = 1; /* another version */
        ck_assert_int_eq(os_acl_parse(buf, len, &acl), -EINVAL);
}
END_TEST

/* A valid ACL of `n` entries (n >= 4): the owner, n - 4 named users, the group, the mask,
 * other. */
static size_t long_acl(ace *a, size_t n)
{
        size_t k = 0;

        a[k++] = (ace){USER_OBJ, 7, 0};
        while (k < n - 3) {
                a[k] = (ace){USER, 7, (unsigned)k};
                k++;
        }
        a[k++] = (ace){GROUP_OBJ, 5, 0};
        a[k++] = (ace){MASK, 7, 0};
        a[k++] = (ace){OTHER, 5, 0};
        return k;
}

START_TEST(test_an_acl_longer_than_the_bound_is_refused_whole)
{
        static ace a[OS_ACL_BYTES_MAX / 8 + 2];
        const size_t most = (OS_ACL_BYTES_MAX - 4) / 8;

        ck_assert_uint_eq(most, 1023);
        ck_assert_int_eq(parse(a, long_acl(a, most)), 0);
        ck_assert_int_eq(parse(a, long_acl(a, most + 1)), -EINVAL);
}
END_TEST

/* Random bytes and random mutations of a valid ACL: never a read outside the buffer (ASan
 * runs this), and whatever parses is judged without a crash. */
START_TEST(test_random_bytes_never_crash_the_decoder)
{
        const ace base[] = {{USER_OBJ, 7, 0},   {USER, 5, SB_UID}, {GROUP_OBJ, 5, 0},
                            {GROUP, 7, SB_GID}, {MASK, 5, 0},      {OTHER, 1, 0}};
        unsigned char valid[128];
        size_t vlen = encode(base, 6, valid);
        unsigned seed = 12345;

        for (int round = 0; round < 200000; round++) {
                size_t len = (size_t)rand_r(&seed) % (vlen + 16);
                unsigned char *b = malloc(len ? len : 1);
                const os_inode ino = {0, SB_GID, S_IFREG | ((unsigned)rand_r(&seed) & 0777)};
                os_acl acl;

                ck_assert_ptr_nonnull(b);
                for (size_t i = 0; i < len; i++)
                        b[i] = i < vlen && rand_r(&seed) % 8 ? valid[i]
                                                             : (unsigned char)rand_r(&seed);
                if (os_acl_parse(b, len, &acl) == 0)
                        (void)os_access_allowed(&ino, &acl, &sb, (unsigned)rand_r(&seed) & 7);
                free(b);
        }
}
END_TEST

/* ---- the kernel's own answers ------------------------------------------------------------- */

#define KCASES 300

typedef struct kcase {
        char path[4200];
        bool dir;
} kcase;

static unsigned pick(unsigned *seed, unsigned n)
{
        return (unsigned)rand_r(seed) % n;
}

/* A random valid ACL over a few ids around the sandbox's (sorted, as the kernel keeps them). */
static size_t random_acl(unsigned *seed, ace *a)
{
        size_t n = 0;
        bool named = false;

        a[n++] = (ace){USER_OBJ, pick(seed, 8), 0};
        for (unsigned id = SB_UID - 1; id <= SB_UID + 1; id++)
                if (pick(seed, 3) == 0) {
                        a[n++] = (ace){USER, pick(seed, 8), id};
                        named = true;
                }
        a[n++] = (ace){GROUP_OBJ, pick(seed, 8), 0};
        for (unsigned id = SB_GID - 1; id <= SB_GID + 1; id++)
                if (pick(seed, 3) == 0) {
                        a[n++] = (ace){GROUP, pick(seed, 8), id};
                        named = true;
                }
        if (named || pick(seed, 2))
                a[n++] = (ace){MASK, pick(seed, 8), 0};
        a[n++] = (ace){OTHER, pick(seed, 8), 0};
        return n;
}

/* The kernel's answer for every case and every access, from a child that has become the
 * sandbox's uid and gid with no supplementary groups, as sandbox-init makes its processes:
 * out[i * 8 + want]. */
static void kernel_answers(const kcase *c, size_t n, unsigned char *out)
{
        int p[2];
        pid_t pid;

        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[0]);
                if (setgroups(0, NULL) < 0 || setresgid(SB_GID, SB_GID, SB_GID) < 0 ||
                    setresuid(SB_UID, SB_UID, SB_UID) < 0)
                        _exit(2);
                for (size_t i = 0; i < n; i++)
                        for (unsigned want = 0; want < 8; want++) {
                                unsigned char v = access(c[i].path, (int)want) == 0;

                                if (write(p[1], &v, 1) != 1)
                                        _exit(3);
                        }
                _exit(0);
        }
        close(p[1]);
        for (size_t got = 0; got < n * 8;) {
                ssize_t k = read(p[0], out + got, n * 8 - got);

                ck_assert_msg(k > 0, "the child's answers ended after %zu", got);
                got += (size_t)k;
        }
        close(p[0]);
        ck_assert_int_eq(ut_wait_pid(pid, 30000), 0);
}

START_TEST(test_the_answers_are_the_kernels_for_random_modes_and_acls)
{
        static kcase c[KCASES];
        static unsigned char kern[KCASES * 8];
        char dir[4096];
        unsigned seed = 777, with_acl = 0;

        if (geteuid() != 0)
                return; /* the suite's main skipped already; a forked run lands here */
        ck_assert_int_eq(ut_mkdtemp(dir, sizeof(dir), "os-access"), 0);
        ck_assert_int_eq(chmod(dir, 0755), 0);
        for (size_t i = 0; i < KCASES; i++) {
                ace a[16];
                unsigned char buf[256];
                size_t n = pick(&seed, 6) ? random_acl(&seed, a) : 0;
                int fd;

                c[i].dir = pick(&seed, 2);
                snprintf(c[i].path, sizeof(c[i].path), "%s/e%zu", dir, i);
                if (c[i].dir)
                        ck_assert_int_eq(mkdir(c[i].path, 0700), 0);
                else
                        ut_write_file(c[i].path, "x");
                /* owned by root or by a stranger, in the sandbox's group or not */
                ck_assert_int_eq(chown(c[i].path, pick(&seed, 2) ? 0 : SB_UID + 7,
                                       pick(&seed, 2) ? SB_GID : SB_GID + 1),
                                 0);
                ck_assert_int_eq(chmod(c[i].path, pick(&seed, 01000)), 0);
                if (n &&
                    setxattr(c[i].path, "system.posix_acl_access", buf, encode(a, n, buf), 0) < 0) {
                        ck_assert_msg(errno == EOPNOTSUPP, "setxattr: %s", strerror(errno));
                        ut_rm_rf(dir);
                        fprintf(stderr, "SKIP: %s has no POSIX ACLs\n", dir);
                        return;
                }
                fd = open(c[i].path, O_PATH | O_CLOEXEC);
                ck_assert_int_ge(fd, 0);
                with_acl += sh_fs_acl_access(fd, buf, sizeof(buf)) > 0;
                close(fd);
        }
        ck_assert_uint_gt(with_acl, KCASES / 4); /* most ACLs were kept, not folded into modes */
        kernel_answers(c, KCASES, kern);
        for (size_t i = 0; i < KCASES; i++) {
                unsigned char buf[OS_ACL_BYTES_MAX];
                struct stat st;
                os_acl acl;
                os_inode ino;
                ssize_t n;
                int fd = open(c[i].path, O_PATH | O_CLOEXEC);

                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(fstat(fd, &st), 0);
                ino = (os_inode){st.st_uid, st.st_gid, st.st_mode};
                n = sh_fs_acl_access(fd, buf, sizeof(buf));
                close(fd);
                ck_assert_msg(n > 0 || n == -ENODATA, "%s: %zd", c[i].path, n);
                if (n > 0)
                        ck_assert_int_eq(os_acl_parse(buf, (size_t)n, &acl), 0);
                for (unsigned want = 1; want < 8; want++) {
                        bool ours = os_access_allowed(&ino, n > 0 ? &acl : NULL, &sb, want);

                        ck_assert_msg(ours == kern[i * 8 + want],
                                      "%s (%s, mode %o, uid %u, gid %u, %s): want %u: ours %d, "
                                      "the kernel's %d",
                                      c[i].path, c[i].dir ? "dir" : "file", st.st_mode & 07777,
                                      st.st_uid, st.st_gid, n > 0 ? "an ACL" : "no ACL", want, ours,
                                      kern[i * 8 + want]);
                }
        }
        ut_rm_rf(dir);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("os_access");
        TCase *t = tcase_create("rules");
        TCase *k = tcase_create("kernel");

        tcase_add_test(t, test_search_is_not_read);
        tcase_add_test(t, test_the_group_bits_apply_to_the_sandboxs_group_only);
        tcase_add_test(t, test_the_sandboxs_own_entries_are_wholly_its_own);
        tcase_add_test(t, test_a_named_user_entry_overrides_the_others_bits);
        tcase_add_test(t, test_the_mask_limits_named_entries_and_the_owning_group);
        tcase_add_test(t, test_a_matching_group_that_grants_too_little_shuts_out_other);
        tcase_add_test(t, test_an_acl_with_the_group_bits_clear_is_not_consulted);
        tcase_add_test(t, test_invalid_acls_are_refused);
        tcase_add_test(t, test_an_acl_longer_than_the_bound_is_refused_whole);
        tcase_add_test(t, test_random_bytes_never_crash_the_decoder);
        /* 200,000 random rounds: a fixed amount of work, whose time is the machine's (ASan
         * beside other jobs took longer than Check's default 4 s) */
        tcase_set_timeout(t, 60);
        suite_add_tcase(s, t);
        if (geteuid() == 0) {
                tcase_set_timeout(k, 60);
                tcase_add_test(k, test_the_answers_are_the_kernels_for_random_modes_and_acls);
                suite_add_tcase(s, k);
        } else {
                fprintf(stderr, "SKIP: the kernel comparison needs root (setresuid, chown)\n");
        }
        return ut_run(s);
}
