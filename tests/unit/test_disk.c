/* test_disk.c: the pure part of the disk limit: finding the mounts a killed daemon left below a
 * path in mountinfo text (escapes, prefix boundaries, deepest first). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "sh/disk.h"
#include "unit.h"

static const char mountinfo[] =
        "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        "40 27 0:40 / /var/lib/sh rw,relatime - tmpfs tmpfs rw\n"
        "41 40 7:0 / /var/lib/sh/.trash/sb.1.2.3/disk rw,nosuid,nodev - ext4 /dev/loop0 rw\n"
        "42 40 7:0 /workspace /var/lib/sh/.trash/sb.1.2.3/workspace rw - ext4 /dev/loop0 rw\n"
        "43 41 0:41 / /var/lib/sh/.trash/sb.1.2.3/disk/deeper rw - tmpfs tmpfs rw\n"
        "44 40 0:42 / /var/lib/sh/.trash/with\\040space rw - tmpfs tmpfs rw\n"
        "45 40 0:43 / /var/lib/sh/.trashy rw - tmpfs tmpfs rw\n"
        "46 40 0:44 / /var/lib/sh/.trash rw - tmpfs tmpfs rw\n"
        "47 27 0:45 / /var/lib/shx/.trash/a rw - tmpfs tmpfs rw";

START_TEST(test_mounts_below_a_prefix_deepest_first)
{
        char **v = NULL;
        size_t n = 0;

        ck_assert_int_eq(sh_disk_mounts_below(mountinfo, "/var/lib/sh/.trash/", &v, &n), 0);
        ck_assert_uint_eq(n, 4);
        /* children before their parents: detaching in this order never hits a busy mount */
        ck_assert_str_eq(v[0], "/var/lib/sh/.trash/sb.1.2.3/disk/deeper");
        ck_assert_str_eq(v[1], "/var/lib/sh/.trash/sb.1.2.3/workspace");
        ck_assert_str_eq(v[2], "/var/lib/sh/.trash/sb.1.2.3/disk");
        ck_assert_str_eq(v[3], "/var/lib/sh/.trash/with space");
        sh_disk_strv_free(v, n);
}
END_TEST

START_TEST(test_mounts_below_excludes_the_prefix_and_its_lookalikes)
{
        char **v = NULL;
        size_t n = 0;

        ck_assert_int_eq(sh_disk_mounts_below(mountinfo, "/var/lib/sh/", &v, &n), 0);
        for (size_t i = 0; i < n; i++) {
                ck_assert_msg(strncmp(v[i], "/var/lib/sh/", 12) == 0, "%s", v[i]);
                ck_assert_str_ne(v[i], "/var/lib/sh");
        }
        ck_assert_uint_eq(n, 6); /* .trash itself and .trashy too, not /var/lib/shx */
        sh_disk_strv_free(v, n);
        ck_assert_int_eq(sh_disk_mounts_below(mountinfo, "/nowhere/", &v, &n), 0);
        ck_assert_uint_eq(n, 0);
        sh_disk_strv_free(v, n);
}
END_TEST

START_TEST(test_mounts_below_survives_malformed_lines)
{
        char **v = NULL;
        size_t n = 0;

        ck_assert_int_eq(sh_disk_mounts_below("\n\nbroken\n1 2 3\n1 2 3 4 /x/y/z\n", "/x/", &v, &n),
                         0);
        ck_assert_uint_eq(n, 1);
        ck_assert_str_eq(v[0], "/x/y/z");
        sh_disk_strv_free(v, n);
        ck_assert_int_eq(sh_disk_mounts_below("", "/x/", &v, &n), 0);
        ck_assert_uint_eq(n, 0);
        sh_disk_strv_free(v, n);
}
END_TEST

START_TEST(test_mode_names)
{
        ck_assert_str_eq(sh_disk_mode_name(SH_DISK_NONE), "none");
        ck_assert_str_eq(sh_disk_mode_name(SH_DISK_PROJECT), "project");
        ck_assert_str_eq(sh_disk_mode_name(SH_DISK_LOOP), "loop");
        ck_assert_str_eq(sh_disk_mode_name(SH_DISK_TMPFS), "tmpfs");
        ck_assert(!sh_disk_mounted(NULL));
        ck_assert_int_eq(sh_disk_get_mode(NULL), SH_DISK_NONE);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("disk");
        TCase *tc = tcase_create("mountinfo");

        tcase_add_test(tc, test_mounts_below_a_prefix_deepest_first);
        tcase_add_test(tc, test_mounts_below_excludes_the_prefix_and_its_lookalikes);
        tcase_add_test(tc, test_mounts_below_survives_malformed_lines);
        tcase_add_test(tc, test_mode_names);
        suite_add_tcase(s, tc);
        return ut_run(s);
}
