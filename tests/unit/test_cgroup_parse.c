/* test_cgroup_parse.c: the pure cgroup parsers (/proc/self/cgroup, mountinfo, path join, keyed files) against canned v1, v2 and hybrid fixtures. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/cgroup.h"
#include "unit.h"

/* --- fixtures: real files from a v1 host (this project's machine), a v2-only Debian 12
 * guest, a systemd hybrid host, and a Docker v1 container without a cgroup namespace --- */

static const char v1_self[] = "9:name=systemd:/\n"
                              "8:pids:/\n"
                              "7:blkio:/\n"
                              "6:freezer:/\n"
                              "5:devices:/\n"
                              "4:memory:/process_api/e0253d9c42a567b9eaebc6db8d50fe57\n"
                              "3:cpuset:/\n"
                              "2:cpuacct:/\n"
                              "1:cpu:/\n"
                              "0::/\n";

static const char v1_mountinfo[] =
        "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
        "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
        "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
        "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
        "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
        "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static const char v2_self[] = "0::/system.slice/sandbox-host.service\n";

static const char v2_mountinfo[] =
        "21 26 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
        "25 21 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 "
        "cgroup2 rw,nsdelegate,memory_recursiveprot\n"
        "26 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro\n";

/* systemd hybrid: v1 controllers (cpu co-mounted with cpuacct), v2 only for systemd */
static const char hybrid_self[] = "12:pids:/user.slice/user-1000.slice/session-2.scope\n"
                                  "11:freezer:/\n"
                                  "10:memory:/user.slice/user-1000.slice/session-2.scope\n"
                                  "4:cpu,cpuacct:/user.slice\n"
                                  "1:name=systemd:/user.slice/user-1000.slice/session-2.scope\n"
                                  "0::/user.slice/user-1000.slice/session-2.scope\n";

static const char hybrid_mountinfo[] =
        "25 18 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
        "26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - "
        "cgroup2 cgroup2 rw,nsdelegate\n"
        "27 25 0:25 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - "
        "cgroup cgroup rw,xattr,name=systemd\n"
        "31 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - "
        "cgroup cgroup rw,cpu,cpuacct\n"
        "32 25 0:30 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:16 - cgroup "
        "cgroup rw,memory\n"
        "33 25 0:31 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:17 - "
        "cgroup cgroup rw,freezer\n"
        "34 25 0:32 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:18 - cgroup "
        "cgroup rw,pids\n";

/* Docker v1 without a cgroup namespace: the container's cgroup is mounted as the root */
static const char docker_self[] = "6:memory:/docker/0123abcd\n"
                                  "5:pids:/docker/0123abcd\n";
static const char docker_mountinfo[] =
        "700 690 0:40 /docker/0123abcd /sys/fs/cgroup/memory ro,nosuid master:20 - cgroup "
        "cgroup rw,memory\n"
        "701 690 0:41 /docker/0123abcd /sys/fs/cgroup/pids ro,nosuid master:21 - cgroup cgroup "
        "rw,pids\n";

static char *self_path(const char *text, const char *ctl)
{
        char *p = NULL;
        int r = sh_cg_parse_proc_self(text, ctl, &p);

        return r == 0 ? p : NULL;
}

static char *mount_of(const char *text, const char *ctl)
{
        char *p = NULL;
        int r = sh_cg_parse_mountinfo(text, ctl, &p);

        return r == 0 ? p : NULL;
}

#define ASSERT_STR_OWNED(expr, want)                                                               \
        do {                                                                                       \
                char *_s = (expr);                                                                 \
                ck_assert_ptr_nonnull(_s);                                                         \
                ck_assert_str_eq(_s, (want));                                                      \
                free(_s);                                                                          \
        } while (0)

START_TEST(proc_self_v1)
{
        char *p = (char *)1;

        ASSERT_STR_OWNED(self_path(v1_self, "memory"),
                         "/process_api/e0253d9c42a567b9eaebc6db8d50fe57");
        ASSERT_STR_OWNED(self_path(v1_self, "pids"), "/");
        ASSERT_STR_OWNED(self_path(v1_self, "cpu"), "/");
        ASSERT_STR_OWNED(self_path(v1_self, "name=systemd"), "/");
        /* the hybrid machine's empty v2 line is still a v2 line */
        ASSERT_STR_OWNED(self_path(v1_self, NULL), "/");
        ck_assert_int_eq(sh_cg_parse_proc_self(v1_self, "hugetlb", &p), -ENOENT);
        ck_assert_ptr_eq(p, (char *)1); /* untouched on failure */
        /* a prefix of a controller name is not that controller */
        ck_assert_int_eq(sh_cg_parse_proc_self(v1_self, "mem", &p), -ENOENT);
        ck_assert_int_eq(sh_cg_parse_proc_self(v1_self, "systemd", &p), -ENOENT);
}
END_TEST

START_TEST(proc_self_v2)
{
        char *p = NULL;

        ASSERT_STR_OWNED(self_path(v2_self, NULL), "/system.slice/sandbox-host.service");
        ck_assert_int_eq(sh_cg_parse_proc_self(v2_self, "memory", &p), -ENOENT);
}
END_TEST

START_TEST(proc_self_hybrid)
{
        ASSERT_STR_OWNED(self_path(hybrid_self, "cpu"), "/user.slice");
        ASSERT_STR_OWNED(self_path(hybrid_self, "cpuacct"), "/user.slice");
        ASSERT_STR_OWNED(self_path(hybrid_self, "freezer"), "/");
        ASSERT_STR_OWNED(self_path(hybrid_self, "pids"),
                         "/user.slice/user-1000.slice/session-2.scope");
        ASSERT_STR_OWNED(self_path(hybrid_self, NULL),
                         "/user.slice/user-1000.slice/session-2.scope");
}
END_TEST

START_TEST(proc_self_malformed)
{
        char *p = NULL;

        ck_assert_int_eq(sh_cg_parse_proc_self("", NULL, &p), -ENOENT);
        ck_assert_int_eq(sh_cg_parse_proc_self("garbage\n::\n0:\n", NULL, &p), -ENOENT);
        /* a path must be absolute */
        ck_assert_int_eq(sh_cg_parse_proc_self("0::relative\n", NULL, &p), -ENOENT);
        ck_assert_int_eq(sh_cg_parse_proc_self("3:memory:\n", "memory", &p), -ENOENT);
        /* "1::/x" is not the v2 line (id must be 0) */
        ck_assert_int_eq(sh_cg_parse_proc_self("1::/x\n", NULL, &p), -ENOENT);
        /* no trailing newline, ':' inside the path */
        ASSERT_STR_OWNED(self_path("0::/a:b/c", NULL), "/a:b/c");
        ASSERT_STR_OWNED(self_path("4:pids,memory:/m", "memory"), "/m");
}
END_TEST

START_TEST(mountinfo_v1)
{
        char *p = NULL;

        ASSERT_STR_OWNED(mount_of(v1_mountinfo, "memory"), "/sys/fs/cgroup/memory");
        ASSERT_STR_OWNED(mount_of(v1_mountinfo, "cpu"), "/sys/fs/cgroup/cpu");
        ASSERT_STR_OWNED(mount_of(v1_mountinfo, "cpuacct"), "/sys/fs/cgroup/cpuacct");
        ASSERT_STR_OWNED(mount_of(v1_mountinfo, "freezer"), "/sys/fs/cgroup/freezer");
        ASSERT_STR_OWNED(mount_of(v1_mountinfo, "name=systemd"), "/sys/fs/cgroup/systemd");
        ASSERT_STR_OWNED(mount_of(v1_mountinfo, NULL), "/sys/fs/cgroup/unified");
        /* tmpfs is not a cgroup, whatever its options */
        ck_assert_int_eq(sh_cg_parse_mountinfo(v1_mountinfo, "hugetlb", &p), -ENOENT);
        ck_assert_int_eq(sh_cg_parse_mountinfo(v1_mountinfo, "mode=755", &p), -ENOENT);
}
END_TEST

START_TEST(mountinfo_v2)
{
        char *p = NULL, *root = NULL;

        ck_assert_int_eq(sh_cg_parse_mountinfo_ex(v2_mountinfo, NULL, &p, &root), 0);
        ck_assert_str_eq(p, "/sys/fs/cgroup");
        ck_assert_str_eq(root, "/");
        free(p);
        free(root);
        ck_assert_int_eq(sh_cg_parse_mountinfo(v2_mountinfo, "memory", &p), -ENOENT);
}
END_TEST

START_TEST(mountinfo_hybrid)
{
        ASSERT_STR_OWNED(mount_of(hybrid_mountinfo, "cpu"), "/sys/fs/cgroup/cpu,cpuacct");
        ASSERT_STR_OWNED(mount_of(hybrid_mountinfo, "cpuacct"), "/sys/fs/cgroup/cpu,cpuacct");
        ASSERT_STR_OWNED(mount_of(hybrid_mountinfo, "pids"), "/sys/fs/cgroup/pids");
        ASSERT_STR_OWNED(mount_of(hybrid_mountinfo, NULL), "/sys/fs/cgroup/unified");
}
END_TEST

START_TEST(mountinfo_escapes_and_optional_fields)
{
        static const char text[] =
                "50 40 0:50 /a\\040b /mnt/cg\\040v2 rw shared:3 master:4 propagate_from:5 - "
                "cgroup2 none rw\n";
        char *p = NULL, *root = NULL;

        ck_assert_int_eq(sh_cg_parse_mountinfo_ex(text, NULL, &p, &root), 0);
        ck_assert_str_eq(p, "/mnt/cg v2");
        ck_assert_str_eq(root, "/a b");
        free(p);
        free(root);
        /* truncated lines (no separator, no super options) are skipped */
        ck_assert_int_eq(sh_cg_parse_mountinfo("1 2 0:3 / /x rw - cgroup2\n", NULL, &p), -ENOENT);
        ck_assert_int_eq(sh_cg_parse_mountinfo("1 2 0:3 / /x rw cgroup2 cgroup2 rw\n", NULL, &p),
                         -ENOENT);
        ck_assert_int_eq(sh_cg_parse_mountinfo("", NULL, &p), -ENOENT);
        /* a bad escape stays literal */
        ck_assert_int_eq(sh_cg_parse_mountinfo("1 2 0:3 / /x\\9 rw - cgroup2 c rw", NULL, &p), 0);
        ck_assert_str_eq(p, "/x\\9");
        free(p);
}
END_TEST

static char *join(const char *mp, const char *root, const char *path)
{
        char *p = NULL;

        return sh_cg_path_join(mp, root, path, &p) == 0 ? p : NULL;
}

START_TEST(path_join)
{
        char *p = NULL;

        ASSERT_STR_OWNED(join("/sys/fs/cgroup/memory", "/", "/process_api/x"),
                         "/sys/fs/cgroup/memory/process_api/x");
        ASSERT_STR_OWNED(join("/sys/fs/cgroup/pids", "/", "/"), "/sys/fs/cgroup/pids");
        ASSERT_STR_OWNED(join("/sys/fs/cgroup", "/", "/system.slice/a.service"),
                         "/sys/fs/cgroup/system.slice/a.service");
        /* docker without cgroupns: the mount root is the container's cgroup */
        ASSERT_STR_OWNED(join("/sys/fs/cgroup/memory", "/docker/0123abcd", "/docker/0123abcd"),
                         "/sys/fs/cgroup/memory");
        ASSERT_STR_OWNED(join("/sys/fs/cgroup/memory", "/docker/0123abcd", "/docker/0123abcd/x"),
                         "/sys/fs/cgroup/memory/x");
        ck_assert_int_eq(sh_cg_path_join("/m", "/docker/0123abcd", "/docker/0123abcdef", &p),
                         -ENOENT);
        ck_assert_int_eq(sh_cg_path_join("/m", "/docker/a", "/other", &p), -ENOENT);
        /* a cgroup outside our namespace is shown as "/.."; never build a path from it */
        ck_assert_int_eq(sh_cg_path_join("/m", "/", "/../../x", &p), -EINVAL);
        ck_assert_int_eq(sh_cg_path_join("/m", "/", "/a/..", &p), -EINVAL);
        ck_assert_int_eq(sh_cg_path_join("/m", "/", "relative", &p), -EINVAL);
        ASSERT_STR_OWNED(join("/m", "/", "/a..b/..c"), "/m/a..b/..c");
}
END_TEST

START_TEST(docker_v1)
{
        char *mp = NULL, *root = NULL, *self = NULL, *dir = NULL;

        ck_assert_int_eq(sh_cg_parse_mountinfo_ex(docker_mountinfo, "pids", &mp, &root), 0);
        ck_assert_int_eq(sh_cg_parse_proc_self(docker_self, "pids", &self), 0);
        ck_assert_int_eq(sh_cg_path_join(mp, root, self, &dir), 0);
        ck_assert_str_eq(dir, "/sys/fs/cgroup/pids");
        free(mp);
        free(root);
        free(self);
        free(dir);
}
END_TEST

START_TEST(keyed)
{
        static const char oom_control[] = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        static const char events[] = "low 0\nhigh 0\nmax 35\noom 1\noom_kill 1\noom_group_kill 0\n";
        static const char cg_events[] = "populated 1\nfrozen 0\n";
        uint64_t v = 42;

        ck_assert_int_eq(sh_cg_parse_keyed(oom_control, "oom_kill", &v), 0);
        ck_assert_uint_eq(v, 3);
        ck_assert_int_eq(sh_cg_parse_keyed(events, "oom_kill", &v), 0);
        ck_assert_uint_eq(v, 1);
        ck_assert_int_eq(sh_cg_parse_keyed(events, "oom", &v), 0);
        ck_assert_uint_eq(v, 1);
        ck_assert_int_eq(sh_cg_parse_keyed(cg_events, "populated", &v), 0);
        ck_assert_uint_eq(v, 1);
        ck_assert_int_eq(sh_cg_parse_keyed(cg_events, "frozen", &v), 0);
        ck_assert_uint_eq(v, 0);
        v = 42;
        ck_assert_int_eq(sh_cg_parse_keyed(cg_events, "froz", &v), -ENOENT);
        ck_assert_int_eq(sh_cg_parse_keyed("oom_kill_disable 0\n", "oom_kill", &v), -ENOENT);
        ck_assert_uint_eq(v, 42);
        ck_assert_int_eq(sh_cg_parse_keyed("oom_kill x\n", "oom_kill", &v), -EBADMSG);
        ck_assert_int_eq(sh_cg_parse_keyed("oom_kill -1\n", "oom_kill", &v), -EBADMSG);
        ck_assert_int_eq(sh_cg_parse_keyed("oom_kill \n", "oom_kill", &v), -EBADMSG);
        ck_assert_int_eq(sh_cg_parse_keyed("oom_kill 18446744073709551616\n", "oom_kill", &v),
                         -EBADMSG);
        ck_assert_int_eq(sh_cg_parse_keyed("oom_kill 18446744073709551615", "oom_kill", &v), 0);
        ck_assert_uint_eq(v, UINT64_MAX);
}
END_TEST

/* /proc/<pid>/stat: the four CPU times after the name, whatever the name holds. */
START_TEST(proc_stat_ticks)
{
        uint64_t v = 0;
        char line[512];

        snprintf(line, sizeof(line),
                 "1234 (sleep) S 1 1234 1234 0 -1 4194560 100 0 0 0 7 3 11 13 20 0 1 0 "
                 "5000 1000 100 18446744073709551615\n");
        ck_assert_int_eq(sh_cg_parse_proc_stat_ticks(line, &v), 0);
        ck_assert_uint_eq(v, 7 + 3 + 11 + 13);
        /* a name with spaces and parentheses: fields count from the last ')' */
        snprintf(line, sizeof(line), "77 (a) b) (c) R 1 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0\n");
        ck_assert_int_eq(sh_cg_parse_proc_stat_ticks(line, &v), 0);
        ck_assert_uint_eq(v, 10);
        ck_assert_int_eq(sh_cg_parse_proc_stat_ticks("12 (x) S 1 2 3", &v), -EBADMSG);
        ck_assert_int_eq(sh_cg_parse_proc_stat_ticks("no parenthesis at all", &v), -EBADMSG);
        ck_assert_int_eq(sh_cg_parse_proc_stat_ticks("1 (x) S 1 1 1 0 -1 0 0 0 0 0 a 2 3 4", &v),
                         -EBADMSG);
}
END_TEST

static Suite *suite(void)
{
        Suite *s = suite_create("cgroup_parse");
        TCase *tc = tcase_create("parse");

        tcase_add_test(tc, proc_self_v1);
        tcase_add_test(tc, proc_self_v2);
        tcase_add_test(tc, proc_self_hybrid);
        tcase_add_test(tc, proc_self_malformed);
        tcase_add_test(tc, mountinfo_v1);
        tcase_add_test(tc, mountinfo_v2);
        tcase_add_test(tc, mountinfo_hybrid);
        tcase_add_test(tc, mountinfo_escapes_and_optional_fields);
        tcase_add_test(tc, path_join);
        tcase_add_test(tc, docker_v1);
        tcase_add_test(tc, keyed);
        tcase_add_test(tc, proc_stat_ticks);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(suite());
}
