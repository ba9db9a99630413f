/* test_tools_policy.c: the rules of a tool bundle's entries (src/tools/policy.c) against hostile
 * entries: absolute paths, ".." in every position, links that leave the bundle or climb out
 * through earlier links, hard links to outside, device nodes, depth, size and count limits,
 * non-ASCII and control bytes; and the modes entries get. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../src/tools/policy.h"
#include "sh/tools.h"
#include "sh/util.h"

static sh_bundle_policy *p;

static void setup(void)
{
        p = sh_bundle_policy_new();
        ck_assert_ptr_nonnull(p);
}

static void teardown(void)
{
        sh_bundle_policy_free(p);
}

static sh_bundle_verdict check_as(const char *path, mode_t type, const char *target, int64_t size,
                                  mode_t perm, mode_t *ret_perm)
{
        sh_bundle_entry e = {.path = path, .type = type, .size = size, .perm = perm};
        mode_t out = 07777;

        if (type == S_IFLNK)
                e.symlink = target;
        else if (target)
                e.hardlink = target;
        sh_bundle_verdict v = sh_bundle_check(p, &e, &out);
        if (ret_perm)
                *ret_perm = out;
        return v;
}

static sh_bundle_verdict file(const char *path)
{
        return check_as(path, S_IFREG, NULL, 1, 0644, NULL);
}

static sh_bundle_verdict dir(const char *path)
{
        return check_as(path, S_IFDIR, NULL, 0, 0755, NULL);
}

static sh_bundle_verdict symlink_(const char *path, const char *target)
{
        return check_as(path, S_IFLNK, target, 0, 0777, NULL);
}

static sh_bundle_verdict hardlink(const char *path, const char *target)
{
        return check_as(path, S_IFREG, target, 0, 0644, NULL);
}

START_TEST(test_an_ordinary_bundle_is_taken)
{
        ck_assert_int_eq(dir("bin"), SH_BUNDLE_TAKE);
        ck_assert_int_eq(file("bin/hello"), SH_BUNDLE_TAKE);
        ck_assert_int_eq(file("./lib/x.so"), SH_BUNDLE_TAKE);
        ck_assert_int_eq(symlink_("bin/hi", "hello"), SH_BUNDLE_TAKE);
        ck_assert_int_eq(symlink_("lib/y.so", "../lib/x.so"), SH_BUNDLE_TAKE);
        ck_assert_int_eq(hardlink("bin/hello2", "bin/hello"), SH_BUNDLE_TAKE);
        /* names that only look like dots */
        ck_assert_int_eq(file("..a"), SH_BUNDLE_TAKE);
        ck_assert_int_eq(file("a.."), SH_BUNDLE_TAKE);
        ck_assert_int_eq(file("..."), SH_BUNDLE_TAKE);
}
END_TEST

START_TEST(test_the_root_itself_is_skipped)
{
        ck_assert_int_eq(dir("."), SH_BUNDLE_SKIP);
        ck_assert_int_eq(dir("./"), SH_BUNDLE_SKIP);
        ck_assert_int_eq(dir(".//./"), SH_BUNDLE_SKIP);
        ck_assert_int_eq(dir(""), SH_BUNDLE_SKIP);
}
END_TEST

START_TEST(test_absolute_paths_are_refused)
{
        ck_assert_int_eq(file("/etc/passwd"), SH_BUNDLE_BAD_PATH);
        ck_assert_int_eq(file("//x"), SH_BUNDLE_BAD_PATH);
        ck_assert_int_eq(dir("/"), SH_BUNDLE_BAD_PATH);
        ck_assert_int_eq(check_as(NULL, S_IFREG, NULL, 0, 0644, NULL), SH_BUNDLE_BAD_PATH);
}
END_TEST

START_TEST(test_dotdot_in_every_position_is_refused)
{
        static const char *const bad[] = {"..",      "../x",      "a/..",     "a/../b",
                                          "a/b/..",  "./..",      "a//..//b", "a/./../b",
                                          "../../x", "x/../../y", "../",      "a/../"};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_msg(file(bad[i]) == SH_BUNDLE_BAD_PATH, "'%s' taken", bad[i]);
                ck_assert_msg(dir(bad[i]) == SH_BUNDLE_BAD_PATH, "dir '%s' taken", bad[i]);
        }
}
END_TEST

START_TEST(test_depth_and_length_are_bounded)
{
        char path[SH_BUNDLE_PATH_MAX + 8];
        size_t n = 0;

        for (int i = 0; i < SH_BUNDLE_DEPTH_MAX; i++)
                n += (size_t)snprintf(path + n, sizeof(path) - n, i ? "/d" : "d");
        ck_assert_int_eq(file(path), SH_BUNDLE_TAKE);
        snprintf(path + n, sizeof(path) - n, "/d");
        ck_assert_int_eq(file(path), SH_BUNDLE_BAD_PATH);
        /* "." components do not count, real ones do */
        memset(path, 'a', SH_BUNDLE_PATH_MAX - 1);
        path[SH_BUNDLE_PATH_MAX - 1] = '\0';
        ck_assert_int_eq(file(path), SH_BUNDLE_TAKE);
        memset(path, 'a', SH_BUNDLE_PATH_MAX);
        path[SH_BUNDLE_PATH_MAX] = '\0';
        ck_assert_int_eq(file(path), SH_BUNDLE_BAD_PATH);
}
END_TEST

START_TEST(test_symbolic_links_must_stay_inside)
{
        char target[SH_BUNDLE_PATH_MAX + 2];

        ck_assert_int_eq(symlink_("etc", "/etc"), SH_BUNDLE_SYMLINK_OUTSIDE);
        ck_assert_int_eq(symlink_("up", ".."), SH_BUNDLE_SYMLINK_OUTSIDE);
        ck_assert_int_eq(symlink_("a/l", "../../outside"), SH_BUNDLE_SYMLINK_OUTSIDE);
        ck_assert_int_eq(symlink_("a/l", "../x"), SH_BUNDLE_TAKE);
        ck_assert_int_eq(symlink_("a/b/l", "../../x"), SH_BUNDLE_TAKE);
        ck_assert_int_eq(symlink_("a/b/l", "../../../x"), SH_BUNDLE_SYMLINK_OUTSIDE);
        /* ".." after a descent could go through a link: never trusted lexically */
        ck_assert_int_eq(symlink_("d", "."), SH_BUNDLE_TAKE);
        ck_assert_int_eq(symlink_("x", "d/.."), SH_BUNDLE_SYMLINK_OUTSIDE);
        ck_assert_int_eq(symlink_("a/x", "b/../../c"), SH_BUNDLE_SYMLINK_OUTSIDE);
        ck_assert_int_eq(symlink_("e", ""), SH_BUNDLE_SYMLINK_OUTSIDE);
        ck_assert_int_eq(symlink_("n", NULL), SH_BUNDLE_SYMLINK_OUTSIDE);
        memset(target, 'a', SH_BUNDLE_PATH_MAX);
        target[SH_BUNDLE_PATH_MAX] = '\0';
        ck_assert_int_eq(symlink_("long", target), SH_BUNDLE_SYMLINK_OUTSIDE);
}
END_TEST

START_TEST(test_nothing_goes_below_an_earlier_link)
{
        /* "d/up" is the root; below it, "../.." would climb out of the bundle while looking
         * like it stays two levels down */
        ck_assert_int_eq(dir("d"), SH_BUNDLE_TAKE);
        ck_assert_int_eq(symlink_("d/up", ".."), SH_BUNDLE_TAKE);
        ck_assert_int_eq(symlink_("d/up/x", "../.."), SH_BUNDLE_BELOW_LINK);
        ck_assert_int_eq(file("d/up/f"), SH_BUNDLE_BELOW_LINK);
        ck_assert_int_eq(dir("./d//up/./sub"), SH_BUNDLE_BELOW_LINK);
        ck_assert_int_eq(hardlink("h", "d/up/f"), SH_BUNDLE_BELOW_LINK);
        /* a link to a link is a link, not a path through one */
        ck_assert_int_eq(hardlink("h2", "d/up"), SH_BUNDLE_TAKE);
        /* the link itself may be replaced: a directory of that name is no link any more */
        ck_assert_int_eq(dir("d/up"), SH_BUNDLE_TAKE);
        ck_assert_int_eq(file("d/up/f"), SH_BUNDLE_TAKE);
        /* and a link that replaces a file is one */
        ck_assert_int_eq(file("g"), SH_BUNDLE_TAKE);
        ck_assert_int_eq(symlink_("g", "d"), SH_BUNDLE_TAKE);
        ck_assert_int_eq(file("g/f"), SH_BUNDLE_BELOW_LINK);
}
END_TEST

START_TEST(test_many_links_are_all_remembered)
{
        char path[32];

        for (int i = 0; i < 3000; i++) {
                snprintf(path, sizeof(path), "l%d", i);
                ck_assert_int_eq(symlink_(path, "."), SH_BUNDLE_TAKE);
        }
        for (int i = 0; i < 3000; i += 7) {
                snprintf(path, sizeof(path), "l%d/f", i);
                ck_assert_int_eq(file(path), SH_BUNDLE_BELOW_LINK);
        }
        ck_assert_int_eq(file("l3000/f"), SH_BUNDLE_TAKE);
}
END_TEST

START_TEST(test_hard_links_must_name_an_entry_of_the_bundle)
{
        ck_assert_int_eq(hardlink("pw", "/etc/passwd"), SH_BUNDLE_HARDLINK_OUTSIDE);
        ck_assert_int_eq(hardlink("pw", "../../../../etc/passwd"), SH_BUNDLE_HARDLINK_OUTSIDE);
        ck_assert_int_eq(hardlink("pw", "a/../../x"), SH_BUNDLE_HARDLINK_OUTSIDE);
        ck_assert_int_eq(hardlink("root", "."), SH_BUNDLE_HARDLINK_OUTSIDE);
        ck_assert_int_eq(hardlink("root", ""), SH_BUNDLE_HARDLINK_OUTSIDE);
        ck_assert_int_eq(hardlink("ok", "bin/x"), SH_BUNDLE_TAKE);
}
END_TEST

START_TEST(test_only_files_directories_and_links)
{
        ck_assert_int_eq(check_as("null", S_IFCHR, NULL, 0, 0666, NULL), SH_BUNDLE_BAD_TYPE);
        ck_assert_int_eq(check_as("sda", S_IFBLK, NULL, 0, 0660, NULL), SH_BUNDLE_BAD_TYPE);
        ck_assert_int_eq(check_as("fifo", S_IFIFO, NULL, 0, 0644, NULL), SH_BUNDLE_BAD_TYPE);
        ck_assert_int_eq(check_as("sock", S_IFSOCK, NULL, 0, 0644, NULL), SH_BUNDLE_BAD_TYPE);
        ck_assert_int_eq(check_as("none", 0, NULL, 0, 0644, NULL), SH_BUNDLE_BAD_TYPE);
}
END_TEST

START_TEST(test_the_files_add_up_to_at_most_the_limit)
{
        ck_assert_int_eq(
                check_as("a", S_IFREG, NULL, (int64_t)SH_TOOLS_UNPACKED_MAX - 10, 0644, NULL),
                SH_BUNDLE_TAKE);
        ck_assert_int_eq(check_as("b", S_IFREG, NULL, 11, 0644, NULL), SH_BUNDLE_TOO_BIG);
        /* a refused entry costs nothing: the rest still fits */
        ck_assert_int_eq(check_as("c", S_IFREG, NULL, 10, 0644, NULL), SH_BUNDLE_TAKE);
        ck_assert_int_eq(check_as("d", S_IFREG, NULL, 1, 0644, NULL), SH_BUNDLE_TOO_BIG);
        ck_assert_int_eq(check_as("e", S_IFREG, NULL, -1, 0644, NULL), SH_BUNDLE_TOO_BIG);
        ck_assert_int_eq(check_as("f", S_IFREG, NULL, INT64_MAX, 0644, NULL), SH_BUNDLE_TOO_BIG);
        ck_assert_int_eq(check_as("g", S_IFREG, NULL, 0, 0644, NULL), SH_BUNDLE_TAKE);
}
END_TEST

START_TEST(test_every_entry_counts_toward_the_limit)
{
        char path[32];

        /* the skipped root counts too: the bound is on the headers read */
        ck_assert_int_eq(dir("."), SH_BUNDLE_SKIP);
        for (unsigned i = 1; i < SH_TOOLS_FILES_MAX; i++) {
                snprintf(path, sizeof(path), "f%u", i);
                ck_assert_int_eq(check_as(path, S_IFREG, NULL, 0, 0644, NULL), SH_BUNDLE_TAKE);
        }
        ck_assert_int_eq(file("one-more"), SH_BUNDLE_TOO_MANY);
        ck_assert_int_eq(dir("."), SH_BUNDLE_TOO_MANY);
}
END_TEST

START_TEST(test_modes_are_normalised)
{
        mode_t m;

        ck_assert_int_eq(check_as("x", S_IFREG, NULL, 0, 04777, &m), SH_BUNDLE_TAKE);
        ck_assert_uint_eq(m, 0755);
        ck_assert_int_eq(check_as("y", S_IFREG, NULL, 0, 02640, &m), SH_BUNDLE_TAKE);
        ck_assert_uint_eq(m, 0644);
        ck_assert_int_eq(check_as("z", S_IFREG, NULL, 0, 0100, &m), SH_BUNDLE_TAKE);
        ck_assert_uint_eq(m, 0755);
        ck_assert_int_eq(check_as("w", S_IFREG, NULL, 0, 0666, &m), SH_BUNDLE_TAKE);
        ck_assert_uint_eq(m, 0644);
        ck_assert_int_eq(check_as("d", S_IFDIR, NULL, 0, 01777, &m), SH_BUNDLE_TAKE);
        ck_assert_uint_eq(m, 0755);
        ck_assert_int_eq(check_as("e", S_IFDIR, NULL, 0, 0700, &m), SH_BUNDLE_TAKE);
        ck_assert_uint_eq(m, 0755);
}
END_TEST

START_TEST(test_non_ascii_and_control_bytes_unpack_as_they_are_and_are_quoted)
{
        char q[160], why[SH_TOOLS_REASON_MAX], big[400];

        ck_assert_int_eq(file("caf\xc3\xa9/\x01\n\x7f"), SH_BUNDLE_TAKE);
        sh_quote_printable("caf\xc3\xa9/\x01\n\x7f", q, sizeof(q));
        ck_assert_str_eq(q, "caf?"
                            "?/?"
                            "??");
        sh_bundle_reason(SH_BUNDLE_BAD_PATH, "/\x1b[31mred", why, sizeof(why));
        ck_assert_str_eq(why, "unsafe bundle: entry '/?[31mred' is absolute, contains '..' or is "
                              "too deep");
        memset(big, 'b', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        sh_quote_printable(big, q, 16);
        ck_assert_str_eq(q, "bbbbbbbbbbbb...");
        sh_quote_printable(NULL, q, sizeof(q));
        ck_assert_str_eq(q, "");
}
END_TEST

START_TEST(test_every_refusal_says_unsafe_bundle)
{
        char why[SH_TOOLS_REASON_MAX];

        for (int v = SH_BUNDLE_TOO_MANY; v <= SH_BUNDLE_TOO_BIG; v++) {
                sh_bundle_reason((sh_bundle_verdict)v, "x", why, sizeof(why));
                ck_assert_msg(strncmp(why, "unsafe bundle: ", 15) == 0, "%d: %s", v, why);
        }
        /* not the bundle's fault */
        sh_bundle_reason(SH_BUNDLE_NO_MEMORY, "x", why, sizeof(why));
        ck_assert_str_eq(why, "this host is out of memory");
}
END_TEST

static Suite *policy_suite(void)
{
        Suite *s = suite_create("tools_policy");
        TCase *tc = tcase_create("entries");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_an_ordinary_bundle_is_taken);
        tcase_add_test(tc, test_the_root_itself_is_skipped);
        tcase_add_test(tc, test_absolute_paths_are_refused);
        tcase_add_test(tc, test_dotdot_in_every_position_is_refused);
        tcase_add_test(tc, test_depth_and_length_are_bounded);
        tcase_add_test(tc, test_symbolic_links_must_stay_inside);
        tcase_add_test(tc, test_nothing_goes_below_an_earlier_link);
        tcase_add_test(tc, test_many_links_are_all_remembered);
        tcase_add_test(tc, test_hard_links_must_name_an_entry_of_the_bundle);
        tcase_add_test(tc, test_only_files_directories_and_links);
        tcase_add_test(tc, test_the_files_add_up_to_at_most_the_limit);
        tcase_add_test(tc, test_every_entry_counts_toward_the_limit);
        tcase_add_test(tc, test_modes_are_normalised);
        tcase_add_test(tc, test_non_ascii_and_control_bytes_unpack_as_they_are_and_are_quoted);
        tcase_add_test(tc, test_every_refusal_says_unsafe_bundle);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(policy_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
