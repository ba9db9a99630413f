/* test_fsprobe.c: src/fs/fsprobe.c: the kernel's own filesystems are told apart from the ones
 * that hold files (fds on /proc, /sys, a cgroup, devpts refused; a directory of the test's
 * own, a tmpfs accepted), O_PATH fds included; an fd's access ACL is read, also through an
 * O_PATH fd, and reported absent when there is none. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "sh/fsprobe.h"
#include "unit.h"

static bool on_kernel_fs(const char *path, int flags)
{
        int fd = open(path, flags | O_CLOEXEC);
        bool r;

        ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
        r = sh_fs_on_kernel_fs(fd);
        close(fd);
        return r;
}

START_TEST(test_proc_and_sys_are_kernel_filesystems)
{
        ck_assert(on_kernel_fs("/proc", O_PATH | O_DIRECTORY));
        ck_assert(on_kernel_fs("/proc/self/fd", O_RDONLY | O_DIRECTORY));
        ck_assert(on_kernel_fs("/proc/sys/kernel/hostname", O_PATH));
        ck_assert(on_kernel_fs("/sys", O_PATH | O_DIRECTORY));
        ck_assert(on_kernel_fs("/sys/kernel", O_RDONLY | O_DIRECTORY));
        if (access("/dev/pts", F_OK) == 0)
                ck_assert(on_kernel_fs("/dev/pts", O_PATH | O_DIRECTORY));
}
END_TEST

START_TEST(test_a_cgroup_hierarchy_is_a_kernel_filesystem)
{
        const char *cand[] = {"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup",
                              "/sys/fs/cgroup/unified"};
        unsigned seen = 0;

        for (size_t i = 0; i < sizeof(cand) / sizeof(*cand); i++) {
                struct statfs s;

                if (statfs(cand[i], &s) < 0 || ((unsigned long)s.f_type != CGROUP_SUPER_MAGIC &&
                                                (unsigned long)s.f_type != CGROUP2_SUPER_MAGIC))
                        continue;
                ck_assert_msg(on_kernel_fs(cand[i], O_PATH | O_DIRECTORY), "%s", cand[i]);
                seen++;
        }
        if (!seen)
                fprintf(stderr, "SKIP: no cgroup hierarchy mounted here\n");
}
END_TEST

START_TEST(test_a_directory_and_a_tmpfs_are_not)
{
        char dir[4096];
        struct statfs s;

        ck_assert_int_eq(ut_mkdtemp(dir, sizeof(dir), "fsprobe"), 0);
        ut_write_file(ut_path(dir, "f"), "x");
        ck_assert(!on_kernel_fs(dir, O_PATH | O_DIRECTORY));
        ck_assert(!on_kernel_fs(dir, O_RDONLY | O_DIRECTORY));
        ck_assert(!on_kernel_fs(ut_path(dir, "f"), O_PATH));
        ut_rm_rf(dir);
        if (statfs("/dev/shm", &s) == 0 && (unsigned long)s.f_type == TMPFS_MAGIC)
                ck_assert(!on_kernel_fs("/dev/shm", O_PATH | O_DIRECTORY));
        else
                fprintf(stderr, "SKIP: /dev/shm is not a tmpfs here\n");
}
END_TEST

START_TEST(test_what_cannot_be_told_is_refused)
{
        ck_assert(sh_fs_on_kernel_fs(-1));
}
END_TEST

/* owner rwx, user 4242 r-x, group r-x, mask r-x, other --- */
static const unsigned char acl[] = {2,    0, 0, 0,                          /* version */
                                    1,    0, 7, 0, 0xff, 0xff, 0xff, 0xff,  /* owner */
                                    2,    0, 5, 0, 0x92, 0x10, 0,    0,     /* user 4242 */
                                    4,    0, 5, 0, 0xff, 0xff, 0xff, 0xff,  /* group */
                                    0x10, 0, 5, 0, 0xff, 0xff, 0xff, 0xff,  /* mask */
                                    0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}; /* other */

START_TEST(test_the_access_acl_is_read_through_o_path_fds)
{
        char dir[4096], buf[256];
        int fd, rfd;

        ck_assert_int_eq(ut_mkdtemp(dir, sizeof(dir), "fsprobe-acl"), 0);
        ut_write_file(ut_path(dir, "f"), "x");
        fd = open(ut_path(dir, "f"), O_PATH | O_CLOEXEC);
        rfd = open(ut_path(dir, "f"), O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_ge(rfd, 0);
        ck_assert_int_eq(sh_fs_acl_access(fd, buf, sizeof(buf)), -ENODATA);
        ck_assert_int_eq(sh_fs_acl_access(rfd, buf, sizeof(buf)), -ENODATA);
        if (setxattr(ut_path(dir, "f"), "system.posix_acl_access", acl, sizeof(acl), 0) < 0) {
                ck_assert_msg(errno == EOPNOTSUPP, "setxattr: %s", strerror(errno));
                fprintf(stderr, "SKIP: %s has no POSIX ACLs\n", dir);
        } else {
                ck_assert_int_eq(sh_fs_acl_access(fd, buf, sizeof(buf)), sizeof(acl));
                ck_assert_mem_eq(buf, acl, sizeof(acl));
                memset(buf, 0, sizeof(buf));
                ck_assert_int_eq(sh_fs_acl_access(rfd, buf, sizeof(buf)), sizeof(acl));
                ck_assert_mem_eq(buf, acl, sizeof(acl));
                ck_assert_int_eq(sh_fs_acl_access(fd, buf, 8), -ERANGE);
        }
        ck_assert_int_lt(sh_fs_acl_access(-1, buf, sizeof(buf)), 0);
        close(fd);
        close(rfd);
        ut_rm_rf(dir);
}
END_TEST

START_TEST(test_a_kernel_filesystem_has_no_acl)
{
        char buf[64];
        int fd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(sh_fs_acl_access(fd, buf, sizeof(buf)), -ENODATA);
        close(fd);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("fsprobe");
        TCase *t = tcase_create("fsprobe");

        tcase_add_test(t, test_proc_and_sys_are_kernel_filesystems);
        tcase_add_test(t, test_a_cgroup_hierarchy_is_a_kernel_filesystem);
        tcase_add_test(t, test_a_directory_and_a_tmpfs_are_not);
        tcase_add_test(t, test_what_cannot_be_told_is_refused);
        tcase_add_test(t, test_the_access_acl_is_read_through_o_path_fds);
        tcase_add_test(t, test_a_kernel_filesystem_has_no_acl);
        suite_add_tcase(s, t);
        return ut_run(s);
}
