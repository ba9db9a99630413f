/* test_layerpolicy.c: the rules of an image layer's entries (src/images/layerpolicy.c) against
 * hostile entries (absolute paths, "..", NUL bytes, entries below links, hard links outside
 * or forward, device nodes, FIFOs, depth, length, size and count bounds) and the forms an
 * ordinary layer has (whiteouts, opaque directories, links stored as they are). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../src/images/layerpolicy.h"
#include "../../src/images/unpack.h"

static sh_layer_policy *p;
static char norm[SH_LAYER_PATH_MAX], norm_link[SH_LAYER_PATH_MAX];

static void setup(void)
{
        p = sh_layer_policy_new(1000, 100);
        ck_assert_ptr_nonnull(p);
}

static void teardown(void)
{
        sh_layer_policy_free(p);
}

static sh_layer_verdict entry(const char *path, mode_t type, const char *hardlink, int64_t size)
{
        sh_layer_entry e = {.path = path,
                            .path_len = strlen(path),
                            .hardlink = hardlink,
                            .type = type,
                            .size = size};

        return sh_layer_check(p, &e, norm, norm_link, sizeof(norm));
}

static sh_layer_verdict file(const char *path)
{
        return entry(path, S_IFREG, NULL, 1);
}

START_TEST(test_an_ordinary_layer_is_taken_at_normalised_paths)
{
        ck_assert_int_eq(entry("./usr/", S_IFDIR, NULL, 0), SH_LAYER_TAKE);
        ck_assert_str_eq(norm, "usr");
        ck_assert_int_eq(file("usr//bin/./ls"), SH_LAYER_TAKE);
        ck_assert_str_eq(norm, "usr/bin/ls");
        ck_assert_uint_eq(sh_layer_policy_entries(p), 2);
        ck_assert_uint_eq(sh_layer_policy_bytes(p), 1);
}
END_TEST

START_TEST(test_the_layer_root_is_skipped)
{
        ck_assert_int_eq(entry("./", S_IFDIR, NULL, 0), SH_LAYER_SKIP);
        ck_assert_int_eq(entry(".", S_IFDIR, NULL, 0), SH_LAYER_SKIP);
}
END_TEST

START_TEST(test_the_layer_root_as_a_file_is_refused)
{
        ck_assert_int_eq(file("./"), SH_LAYER_BAD_PATH);
}
END_TEST

START_TEST(test_absolute_paths_are_refused)
{
        ck_assert_int_eq(file("/etc/passwd"), SH_LAYER_BAD_PATH);
}
END_TEST

START_TEST(test_dotdot_in_every_position_is_refused)
{
        ck_assert_int_eq(file("../x"), SH_LAYER_BAD_PATH);
        ck_assert_int_eq(file("a/../../x"), SH_LAYER_BAD_PATH);
        ck_assert_int_eq(file("a/.."), SH_LAYER_BAD_PATH);
        ck_assert_int_eq(file("a/b/../c"), SH_LAYER_BAD_PATH);
}
END_TEST

START_TEST(test_a_name_with_a_nul_is_refused)
{
        sh_layer_entry e = {.path = "etc\0/../x", .path_len = 9, .type = S_IFREG};

        ck_assert_int_eq(sh_layer_check(p, &e, norm, norm_link, sizeof(norm)), SH_LAYER_BAD_PATH);
}
END_TEST

START_TEST(test_a_path_deeper_than_256_levels_is_refused)
{
        char deep[2 * 258 + 1];

        for (int i = 0; i < 257; i++)
                memcpy(deep + 2 * i, "a/", 2);
        deep[2 * 257 - 1] = '\0';
        ck_assert_int_eq(file(deep), SH_LAYER_TOO_DEEP);
        deep[2 * 256 - 1] = '\0';
        ck_assert_int_eq(file(deep), SH_LAYER_TAKE);
}
END_TEST

START_TEST(test_a_path_of_4096_bytes_is_refused)
{
        char *s = malloc(SH_LAYER_PATH_MAX + 1);

        memset(s, 'a', SH_LAYER_PATH_MAX);
        for (unsigned i = 200; i < SH_LAYER_PATH_MAX; i += 200)
                s[i] = '/';
        s[SH_LAYER_PATH_MAX] = '\0';
        ck_assert_int_eq(file(s), SH_LAYER_TOO_LONG);
        s[SH_LAYER_PATH_MAX - 1] = '\0';
        ck_assert_int_eq(file(s), SH_LAYER_TAKE);
        free(s);
}
END_TEST

START_TEST(test_symbolic_links_are_taken_whatever_their_target)
{
        ck_assert_int_eq(entry("bin", S_IFLNK, NULL, 0), SH_LAYER_TAKE);
        ck_assert_int_eq(entry("etc/mtab", S_IFLNK, NULL, 0), SH_LAYER_TAKE);
}
END_TEST

START_TEST(test_an_entry_below_a_link_of_the_layer_is_refused)
{
        ck_assert_int_eq(entry("lib", S_IFLNK, NULL, 0), SH_LAYER_TAKE);
        ck_assert_int_eq(file("lib/evil.so"), SH_LAYER_BELOW_LINK);
        ck_assert_int_eq(file("./lib//x/y"), SH_LAYER_BELOW_LINK);
}
END_TEST

START_TEST(test_a_link_replaced_by_a_directory_may_hold_entries)
{
        ck_assert_int_eq(entry("lib", S_IFLNK, NULL, 0), SH_LAYER_TAKE);
        ck_assert_int_eq(entry("lib", S_IFDIR, NULL, 0), SH_LAYER_TAKE);
        ck_assert_int_eq(file("lib/x"), SH_LAYER_TAKE);
}
END_TEST

START_TEST(test_hard_links_to_earlier_files_and_links_are_taken)
{
        ck_assert_int_eq(file("./a"), SH_LAYER_TAKE);
        ck_assert_int_eq(entry("b", S_IFREG, "./a", 0), SH_LAYER_TAKE);
        ck_assert_str_eq(norm, "b");
        ck_assert_str_eq(norm_link, "a");
        ck_assert_int_eq(entry("l", S_IFLNK, NULL, 0), SH_LAYER_TAKE);
        ck_assert_int_eq(entry("m", S_IFREG, "l", 0), SH_LAYER_TAKE);
}
END_TEST

START_TEST(test_a_hard_link_outside_the_layer_is_refused)
{
        ck_assert_int_eq(entry("x", S_IFREG, "/etc/shadow", 0), SH_LAYER_HARDLINK_OUTSIDE);
        ck_assert_int_eq(entry("y", S_IFREG, "../../etc/shadow", 0), SH_LAYER_HARDLINK_OUTSIDE);
        ck_assert_int_eq(entry("z", S_IFREG, ".", 0), SH_LAYER_HARDLINK_OUTSIDE);
}
END_TEST

START_TEST(test_a_hard_link_forward_is_refused)
{
        ck_assert_int_eq(entry("b", S_IFREG, "a", 0), SH_LAYER_HARDLINK_FORWARD);
}
END_TEST

START_TEST(test_a_hard_link_to_a_directory_is_refused)
{
        ck_assert_int_eq(entry("d", S_IFDIR, NULL, 0), SH_LAYER_TAKE);
        ck_assert_int_eq(entry("b", S_IFREG, "d", 0), SH_LAYER_HARDLINK_FORWARD);
}
END_TEST

START_TEST(test_a_hard_link_through_a_link_is_refused)
{
        ck_assert_int_eq(entry("l", S_IFLNK, NULL, 0), SH_LAYER_TAKE);
        ck_assert_int_eq(entry("b", S_IFREG, "l/passwd", 0), SH_LAYER_BELOW_LINK);
}
END_TEST

START_TEST(test_device_nodes_fifos_and_sockets_are_refused)
{
        ck_assert_int_eq(entry("dev/null", S_IFCHR, NULL, 0), SH_LAYER_BAD_TYPE);
        ck_assert_int_eq(entry("dev/sda", S_IFBLK, NULL, 0), SH_LAYER_BAD_TYPE);
        ck_assert_int_eq(entry("fifo", S_IFIFO, NULL, 0), SH_LAYER_BAD_TYPE);
        ck_assert_int_eq(entry("sock", S_IFSOCK, NULL, 0), SH_LAYER_BAD_TYPE);
}
END_TEST

START_TEST(test_a_whiteout_names_its_target)
{
        ck_assert_int_eq(file("etc/.wh.motd"), SH_LAYER_WHITEOUT);
        ck_assert_str_eq(norm, "etc/motd");
        ck_assert_int_eq(file("./.wh.opt"), SH_LAYER_WHITEOUT);
        ck_assert_str_eq(norm, "opt");
}
END_TEST

START_TEST(test_an_opaque_marker_names_its_directory)
{
        ck_assert_int_eq(file("var/cache/.wh..wh..opq"), SH_LAYER_OPAQUE);
        ck_assert_str_eq(norm, "var/cache");
        ck_assert_int_eq(file(".wh..wh..opq"), SH_LAYER_OPAQUE);
        ck_assert_str_eq(norm, "");
}
END_TEST

START_TEST(test_aufs_metadata_is_skipped)
{
        ck_assert_int_eq(entry(".wh..wh.plnk", S_IFDIR, NULL, 0), SH_LAYER_SKIP);
}
END_TEST

START_TEST(test_a_whiteout_of_nothing_or_of_dotdot_is_refused)
{
        ck_assert_int_eq(file("etc/.wh."), SH_LAYER_BAD_WHITEOUT);
        ck_assert_int_eq(file("etc/.wh..."), SH_LAYER_BAD_WHITEOUT);
}
END_TEST

START_TEST(test_a_whiteout_of_an_entry_of_the_same_layer_is_refused)
{
        ck_assert_int_eq(file("etc/motd"), SH_LAYER_TAKE);
        ck_assert_int_eq(file("etc/.wh.motd"), SH_LAYER_BAD_WHITEOUT);
}
END_TEST

START_TEST(test_a_whiteout_that_is_a_device_or_a_link_is_refused)
{
        ck_assert_int_eq(entry(".wh.x", S_IFCHR, NULL, 0), SH_LAYER_BAD_WHITEOUT);
        ck_assert_int_eq(file("a"), SH_LAYER_TAKE);
        ck_assert_int_eq(entry(".wh.y", S_IFREG, "a", 0), SH_LAYER_BAD_WHITEOUT);
}
END_TEST

START_TEST(test_a_whiteout_below_a_link_is_refused)
{
        ck_assert_int_eq(entry("l", S_IFLNK, NULL, 0), SH_LAYER_TAKE);
        ck_assert_int_eq(file("l/.wh.x"), SH_LAYER_BELOW_LINK);
}
END_TEST

START_TEST(test_a_hard_link_to_a_whiteout_is_refused)
{
        ck_assert_int_eq(file(".wh.x"), SH_LAYER_WHITEOUT);
        ck_assert_int_eq(entry("y", S_IFREG, "x", 0), SH_LAYER_HARDLINK_FORWARD);
}
END_TEST

START_TEST(test_the_files_add_up_to_at_most_max_bytes)
{
        ck_assert_int_eq(entry("a", S_IFREG, NULL, 600), SH_LAYER_TAKE);
        ck_assert_int_eq(entry("b", S_IFREG, NULL, 401), SH_LAYER_TOO_BIG);
        ck_assert_int_eq(entry("c", S_IFREG, NULL, 400), SH_LAYER_TAKE);
}
END_TEST

START_TEST(test_a_negative_size_is_refused)
{
        ck_assert_int_eq(entry("a", S_IFREG, NULL, -1), SH_LAYER_TOO_BIG);
}
END_TEST

START_TEST(test_every_header_counts_toward_max_entries)
{
        char name[16];

        for (int i = 0; i < 100; i++) {
                snprintf(name, sizeof(name), "f%d", i);
                ck_assert_int_eq(entry(name, i % 2 ? S_IFDIR : S_IFREG, NULL, 0), SH_LAYER_TAKE);
        }
        ck_assert_int_eq(entry("./", S_IFDIR, NULL, 0), SH_LAYER_TOO_MANY);
}
END_TEST

START_TEST(test_a_refusal_names_the_entry_printably)
{
        char why[512];

        sh_layer_reason(p, SH_LAYER_BAD_TYPE, "dev/\x1b[31mnull", why, sizeof(why));
        ck_assert_str_eq(why, "layer refused: entry 'dev/?[31mnull' is a device node, FIFO or "
                              "socket (only files, directories, links and whiteouts are allowed)");
}
END_TEST

START_TEST(test_the_bounds_are_in_their_reasons)
{
        char why[512];

        sh_layer_reason(p, SH_LAYER_TOO_MANY, "x", why, sizeof(why));
        ck_assert_str_eq(why, "layer refused: more than 100 entries (at 'x')");
        sh_layer_reason(p, SH_LAYER_TOO_BIG, "x", why, sizeof(why));
        ck_assert_str_eq(why, "layer refused: its files add up to more than 1000 bytes (at 'x')");
}
END_TEST

START_TEST(test_media_types_give_the_compression)
{
        sh_layer_compression c = SH_LAYER_ZSTD;

        ck_assert_int_eq(sh_layer_compression_of("application/vnd.oci.image.layer.v1.tar", &c), 0);
        ck_assert_int_eq(c, SH_LAYER_PLAIN);
        ck_assert_int_eq(sh_layer_compression_of("application/vnd.oci.image.layer.v1.tar+gzip", &c),
                         0);
        ck_assert_int_eq(c, SH_LAYER_GZIP);
        ck_assert_int_eq(sh_layer_compression_of("application/vnd.oci.image.layer.v1.tar+zstd", &c),
                         0);
        ck_assert_int_eq(c, SH_LAYER_ZSTD);
        ck_assert_int_eq(
                sh_layer_compression_of("application/vnd.docker.image.rootfs.diff.tar.gzip", &c),
                0);
        ck_assert_int_eq(c, SH_LAYER_GZIP);
        ck_assert_int_eq(
                sh_layer_compression_of(
                        "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", &c),
                0);
        ck_assert_int_eq(c, SH_LAYER_ZSTD);
        ck_assert_int_eq(sh_layer_compression_of(
                                 "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", &c),
                         0);
        ck_assert_int_eq(c, SH_LAYER_GZIP);
}
END_TEST

START_TEST(test_a_media_type_that_is_no_layer_is_refused)
{
        sh_layer_compression c;

        ck_assert_int_eq(sh_layer_compression_of("application/vnd.oci.image.config.v1+json", &c),
                         -EINVAL);
        ck_assert_int_eq(
                sh_layer_compression_of("application/vnd.oci.image.layer.v1.tar+bzip2", &c),
                -EINVAL);
        ck_assert_int_eq(sh_layer_compression_of(NULL, &c), -EINVAL);
}
END_TEST

static Suite *policy_suite(void)
{
        Suite *s = suite_create("layerpolicy");
        TCase *tc = tcase_create("entries");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_an_ordinary_layer_is_taken_at_normalised_paths);
        tcase_add_test(tc, test_the_layer_root_is_skipped);
        tcase_add_test(tc, test_the_layer_root_as_a_file_is_refused);
        tcase_add_test(tc, test_absolute_paths_are_refused);
        tcase_add_test(tc, test_dotdot_in_every_position_is_refused);
        tcase_add_test(tc, test_a_name_with_a_nul_is_refused);
        tcase_add_test(tc, test_a_path_deeper_than_256_levels_is_refused);
        tcase_add_test(tc, test_a_path_of_4096_bytes_is_refused);
        tcase_add_test(tc, test_symbolic_links_are_taken_whatever_their_target);
        tcase_add_test(tc, test_an_entry_below_a_link_of_the_layer_is_refused);
        tcase_add_test(tc, test_a_link_replaced_by_a_directory_may_hold_entries);
        tcase_add_test(tc, test_hard_links_to_earlier_files_and_links_are_taken);
        tcase_add_test(tc, test_a_hard_link_outside_the_layer_is_refused);
        tcase_add_test(tc, test_a_hard_link_forward_is_refused);
        tcase_add_test(tc, test_a_hard_link_to_a_directory_is_refused);
        tcase_add_test(tc, test_a_hard_link_through_a_link_is_refused);
        tcase_add_test(tc, test_device_nodes_fifos_and_sockets_are_refused);
        tcase_add_test(tc, test_a_whiteout_names_its_target);
        tcase_add_test(tc, test_an_opaque_marker_names_its_directory);
        tcase_add_test(tc, test_aufs_metadata_is_skipped);
        tcase_add_test(tc, test_a_whiteout_of_nothing_or_of_dotdot_is_refused);
        tcase_add_test(tc, test_a_whiteout_of_an_entry_of_the_same_layer_is_refused);
        tcase_add_test(tc, test_a_whiteout_that_is_a_device_or_a_link_is_refused);
        tcase_add_test(tc, test_a_whiteout_below_a_link_is_refused);
        tcase_add_test(tc, test_a_hard_link_to_a_whiteout_is_refused);
        tcase_add_test(tc, test_the_files_add_up_to_at_most_max_bytes);
        tcase_add_test(tc, test_a_negative_size_is_refused);
        tcase_add_test(tc, test_every_header_counts_toward_max_entries);
        tcase_add_test(tc, test_a_refusal_names_the_entry_printably);
        tcase_add_test(tc, test_the_bounds_are_in_their_reasons);
        tcase_add_test(tc, test_media_types_give_the_compression);
        tcase_add_test(tc, test_a_media_type_that_is_no_layer_is_refused);
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
