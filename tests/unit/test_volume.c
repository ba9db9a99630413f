/* test_volume.c: the lexical rules of a create's volumes (src/sandbox/volume.c) against hostile
 * names, mountPaths, subPaths and host paths: ".." in every position, kernel filesystems, the
 * workspace, prefixes that only look alike, the checks of a whole set, and the mount order. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/volume.h"

static char out[SH_VOLUME_PATH_MAX], base[SH_VOLUME_BASE_MAX], rel[SH_VOLUME_PATH_MAX];

static const char *target(const char *in)
{
        return sh_volume_target(in, out, sizeof(out));
}

static const char *host(const char *in, const char *allow)
{
        return sh_volume_host(in, allow, base, sizeof(base), rel, sizeof(rel));
}

static sh_volume host_volume(const char *name, const char *b, const char *path, const char *t)
{
        sh_volume v = {.kind = SH_VOLUME_HOST};

        snprintf(v.name, sizeof(v.name), "%s", name);
        snprintf(v.base, sizeof(v.base), "%s", b);
        snprintf(v.path, sizeof(v.path), "%s", path);
        snprintf(v.target, sizeof(v.target), "%s", t);
        return v;
}

START_TEST(test_names_and_claims_are_dns_labels)
{
        char long_name[300];

        ck_assert(sh_volume_name_valid("data"));
        ck_assert(sh_volume_name_valid("a-1"));
        ck_assert(sh_volume_name_valid("0"));
        ck_assert(!sh_volume_name_valid(""));
        ck_assert(!sh_volume_name_valid("-a"));
        ck_assert(!sh_volume_name_valid("a-"));
        ck_assert(!sh_volume_name_valid("Data"));
        ck_assert(!sh_volume_name_valid("a.b"));
        ck_assert(!sh_volume_name_valid("a_b"));
        ck_assert(!sh_volume_claim_valid(".."));
        ck_assert(!sh_volume_claim_valid("."));
        ck_assert(!sh_volume_claim_valid("a/b"));
        ck_assert(!sh_volume_name_valid(NULL));
        memset(long_name, 'a', 63);
        long_name[63] = '\0';
        ck_assert(sh_volume_name_valid(long_name));
        long_name[63] = 'a';
        long_name[64] = '\0';
        ck_assert(!sh_volume_name_valid(long_name));
        ck_assert(sh_volume_claim_valid(long_name));
        memset(long_name, 'a', 253);
        long_name[253] = '\0';
        ck_assert(sh_volume_claim_valid(long_name));
        long_name[253] = 'a';
        long_name[254] = '\0';
        ck_assert(!sh_volume_claim_valid(long_name));
}
END_TEST

START_TEST(test_storage_is_a_quantity)
{
        ck_assert(sh_volume_storage_valid("1Gi"));
        ck_assert(sh_volume_storage_valid("10"));
        ck_assert(sh_volume_storage_valid("1.5Ti"));
        ck_assert(!sh_volume_storage_valid("1G"));
        ck_assert(!sh_volume_storage_valid("Gi"));
        ck_assert(!sh_volume_storage_valid("1.Gi"));
        ck_assert(!sh_volume_storage_valid(".5Gi"));
        ck_assert(!sh_volume_storage_valid("1Gi "));
        ck_assert(!sh_volume_storage_valid(""));
}
END_TEST

static uint64_t storage(const char *s)
{
        uint64_t b = 0;

        ck_assert_msg(sh_volume_storage_bytes(s, &b), "'%s' is a quantity", s);
        return b;
}

START_TEST(test_storage_is_counted_in_binary_units)
{
        ck_assert_uint_eq(storage("10"), 10);
        ck_assert_uint_eq(storage("2Mi"), 2ULL << 20);
        ck_assert_uint_eq(storage("1Gi"), 1ULL << 30);
        ck_assert_uint_eq(storage("3Ti"), 3ULL << 40);
        ck_assert_uint_eq(storage("1Pi"), 1ULL << 50);
        ck_assert_uint_eq(storage("15Ei"), 15ULL << 60);
        ck_assert_uint_eq(storage("0"), 0);
}
END_TEST

START_TEST(test_storage_decimals_round_up_to_a_byte)
{
        ck_assert_uint_eq(storage("1.5Ki"), 1536);
        ck_assert_uint_eq(storage("1.5Gi"), 3ULL << 29);
        ck_assert_uint_eq(storage("0.001Ki"), 2); /* 1.024 bytes */
        ck_assert_uint_eq(storage("2.5"), 3);
        ck_assert_uint_eq(storage("1.0000000000Ki"), 1024); /* zeros past 9 decimals */
        ck_assert_uint_eq(storage("1.0000000001"), 2);      /* a digit past 9 decimals */
}
END_TEST

START_TEST(test_storage_past_64_bits_is_refused)
{
        uint64_t b = 7;

        ck_assert(!sh_volume_storage_bytes("16Ei", &b));
        ck_assert(!sh_volume_storage_bytes("18446744073709551616", &b));
        ck_assert(sh_volume_storage_bytes("18446744073709551615", &b));
        ck_assert_uint_eq(b, UINT64_MAX);
        ck_assert(!sh_volume_storage_bytes("1G", &b));
}
END_TEST

START_TEST(test_a_mount_path_is_normalised)
{
        ck_assert_ptr_null(target("/data"));
        ck_assert_str_eq(out, "/data");
        ck_assert_ptr_null(target("//data/./x//"));
        ck_assert_str_eq(out, "/data/x");
        ck_assert_ptr_null(target("/workspace/data"));
        ck_assert_str_eq(out, "/workspace/data");
        ck_assert_ptr_null(target("/procfs"));
        ck_assert_ptr_null(target("/device"));
        ck_assert_ptr_null(target("/system"));
}
END_TEST

START_TEST(test_a_mount_path_over_the_kernel_the_root_or_the_workspace_is_refused)
{
        static const char *const bad[] = {"/",
                                          "//",
                                          "/.",
                                          "/proc",
                                          "/proc/",
                                          "/proc/1",
                                          "/./proc",
                                          "/dev",
                                          "/dev/shm",
                                          "/sys",
                                          "/sys/fs/cgroup",
                                          "/workspace",
                                          "/workspace/",
                                          "//workspace/.",
                                          "data",
                                          "",
                                          "./data"};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(target(bad[i]) != NULL, "'%s' taken", bad[i]);
        ck_assert_ptr_nonnull(target(NULL));
}
END_TEST

START_TEST(test_dotdot_in_every_position_is_refused)
{
        static const char *const bad[] = {"..",   "../x",     "a/..", "a/../b",
                                          "./..", "a//..//b", "../",  "x/../../y"};
        char abs[64];

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                snprintf(abs, sizeof(abs), "/%s", bad[i]);
                ck_assert_msg(target(abs) != NULL, "mountPath '%s' taken", abs);
                ck_assert_msg(sh_volume_sub(bad[i], out, sizeof(out)) != NULL, "subPath '%s' taken",
                              bad[i]);
                ck_assert_msg(host(abs, "/") != NULL, "host.path '%s' taken", abs);
        }
        /* names that only look like dots */
        ck_assert_ptr_null(sh_volume_sub("..a/a../...", out, sizeof(out)));
        ck_assert_str_eq(out, "..a/a../...");
}
END_TEST

START_TEST(test_a_sub_path_is_relative_and_normalised)
{
        ck_assert_ptr_null(sh_volume_sub("a/b", out, sizeof(out)));
        ck_assert_str_eq(out, "a/b");
        ck_assert_ptr_null(sh_volume_sub("./a//b/", out, sizeof(out)));
        ck_assert_str_eq(out, "a/b");
        ck_assert_ptr_null(sh_volume_sub("", out, sizeof(out)));
        ck_assert_str_eq(out, "");
        ck_assert_ptr_null(sh_volume_sub(".", out, sizeof(out)));
        ck_assert_str_eq(out, "");
        ck_assert_ptr_nonnull(sh_volume_sub("/a", out, sizeof(out)));
        ck_assert_ptr_nonnull(sh_volume_sub("/", out, sizeof(out)));
}
END_TEST

START_TEST(test_a_host_path_lies_under_a_prefix_component_wise)
{
        ck_assert_ptr_null(host("/data/x", "/data"));
        ck_assert_str_eq(base, "/data");
        ck_assert_str_eq(rel, "x");
        ck_assert_ptr_null(host("/data", "/data"));
        ck_assert_str_eq(rel, ".");
        ck_assert_ptr_null(host("/data//x/./y/", "/other:/data/"));
        ck_assert_str_eq(base, "/data");
        ck_assert_str_eq(rel, "x/y");
        ck_assert_ptr_nonnull(host("/database", "/data"));
        ck_assert_ptr_nonnull(host("/dat", "/data"));
        ck_assert_ptr_nonnull(host("/etc", "/data"));
        ck_assert_ptr_nonnull(host("/data/x", NULL));
        ck_assert_ptr_nonnull(host("/data/x", ""));
        ck_assert_ptr_nonnull(host("data/x", "/data"));
        ck_assert_ptr_nonnull(host("/data/../etc", "/data"));
        /* the longest prefix that holds it */
        ck_assert_ptr_null(host("/data/a/b", "/data:/data/a"));
        ck_assert_str_eq(base, "/data/a");
        ck_assert_str_eq(rel, "b");
        /* "/" allows everything but the kernel's filesystems */
        ck_assert_ptr_nonnull(host("/proc/sys", "/"));
        ck_assert_ptr_nonnull(host("/sys", "/"));
        ck_assert_ptr_nonnull(host("/dev/sda", "/"));
        ck_assert_ptr_null(host("/etc", "/"));
        ck_assert_str_eq(base, "/");
        ck_assert_str_eq(rel, "etc");
}
END_TEST

START_TEST(test_a_set_with_a_name_or_mount_path_twice_is_refused)
{
        sh_volume v[2] = {host_volume("a", "/data", "x", "/mnt/a"),
                          host_volume("b", "/data", "y", "/mnt/b")};
        char why[256];

        ck_assert_int_eq(sh_volumes_check(v, 2, 16, why, sizeof(why)), 0);
        snprintf(v[1].name, sizeof(v[1].name), "a");
        ck_assert_int_eq(sh_volumes_check(v, 2, 16, why, sizeof(why)), -1);
        ck_assert_ptr_nonnull(strstr(why, "'a'"));
        snprintf(v[1].name, sizeof(v[1].name), "b");
        snprintf(v[1].target, sizeof(v[1].target), "/mnt/a");
        ck_assert_int_eq(sh_volumes_check(v, 2, 16, why, sizeof(why)), -1);
        ck_assert_int_eq(sh_volumes_check(v, 2, 1, why, sizeof(why)), -1);
}
END_TEST

START_TEST(test_a_set_with_a_field_out_of_form_is_refused)
{
        sh_volume v = host_volume("a", "/data", "x", "/mnt/a");
        char why[256];

        ck_assert_int_eq(sh_volumes_check(&v, 1, 16, why, sizeof(why)), 0);
        snprintf(v.path, sizeof(v.path), "../x");
        ck_assert_int_eq(sh_volumes_check(&v, 1, 16, why, sizeof(why)), -1);
        v = host_volume("a", "/data/", "x", "/mnt/a");
        ck_assert_int_eq(sh_volumes_check(&v, 1, 16, why, sizeof(why)), -1);
        v = host_volume("a", "/data", "x", "/mnt//a");
        ck_assert_int_eq(sh_volumes_check(&v, 1, 16, why, sizeof(why)), -1);
        v = host_volume("a", "/data", "x", "/proc");
        ck_assert_int_eq(sh_volumes_check(&v, 1, 16, why, sizeof(why)), -1);
        v = host_volume("a", "/data", "x", "/mnt/a");
        snprintf(v.sub, sizeof(v.sub), "/etc");
        ck_assert_int_eq(sh_volumes_check(&v, 1, 16, why, sizeof(why)), -1);
        /* a pvc's path is a claim, its base the daemon's */
        v = host_volume("a", "", "claim", "/mnt/a");
        v.kind = SH_VOLUME_PVC;
        ck_assert_int_eq(sh_volumes_check(&v, 1, 16, why, sizeof(why)), 0);
        snprintf(v.path, sizeof(v.path), "..");
        ck_assert_int_eq(sh_volumes_check(&v, 1, 16, why, sizeof(why)), -1);
        v = host_volume("a", "/data", "claim", "/mnt/a");
        v.kind = SH_VOLUME_PVC;
        ck_assert_int_eq(sh_volumes_check(&v, 1, 16, why, sizeof(why)), -1);
        v.kind = 7;
        ck_assert_int_eq(sh_volumes_check(&v, 1, 16, why, sizeof(why)), -1);
}
END_TEST

START_TEST(test_a_host_base_must_be_an_allowed_prefix)
{
        sh_volume v = host_volume("a", "/data", "x", "/mnt/a");
        char why[256];

        ck_assert_int_eq(sh_volumes_allowed(&v, 1, "/data:/srv", why, sizeof(why)), 0);
        ck_assert_int_eq(sh_volumes_allowed(&v, 1, "/srv", why, sizeof(why)), -1);
        ck_assert_int_eq(sh_volumes_allowed(&v, 1, NULL, why, sizeof(why)), -1);
        ck_assert_ptr_nonnull(strstr(why, "SANDBOX_HOST_VOLUME_HOST_ALLOW"));
        /* under a prefix is not the prefix */
        ck_assert_int_eq(sh_volumes_allowed(&v, 1, "/", why, sizeof(why)), -1);
        v.kind = SH_VOLUME_PVC;
        ck_assert_int_eq(sh_volumes_allowed(&v, 1, NULL, why, sizeof(why)), 0);
}
END_TEST

START_TEST(test_parents_are_mounted_before_what_lies_below_them)
{
        sh_volume v[4] = {host_volume("c", "/d", "x", "/a/b/c"), host_volume("a", "/d", "x", "/a"),
                          host_volume("b", "/d", "x", "/a/b"), host_volume("z", "/d", "x", "/z")};

        sh_volumes_sort(v, 4);
        ck_assert_str_eq(v[0].name, "a");
        ck_assert_str_eq(v[1].name, "z"); /* the create's order among equals */
        ck_assert_str_eq(v[2].name, "b");
        ck_assert_str_eq(v[3].name, "c");
}
END_TEST

static Suite *volume_suite(void)
{
        Suite *s = suite_create("volume");
        TCase *tc = tcase_create("rules");

        tcase_add_test(tc, test_names_and_claims_are_dns_labels);
        tcase_add_test(tc, test_storage_is_a_quantity);
        tcase_add_test(tc, test_storage_is_counted_in_binary_units);
        tcase_add_test(tc, test_storage_decimals_round_up_to_a_byte);
        tcase_add_test(tc, test_storage_past_64_bits_is_refused);
        tcase_add_test(tc, test_a_mount_path_is_normalised);
        tcase_add_test(tc, test_a_mount_path_over_the_kernel_the_root_or_the_workspace_is_refused);
        tcase_add_test(tc, test_dotdot_in_every_position_is_refused);
        tcase_add_test(tc, test_a_sub_path_is_relative_and_normalised);
        tcase_add_test(tc, test_a_host_path_lies_under_a_prefix_component_wise);
        tcase_add_test(tc, test_a_set_with_a_name_or_mount_path_twice_is_refused);
        tcase_add_test(tc, test_a_set_with_a_field_out_of_form_is_refused);
        tcase_add_test(tc, test_a_host_base_must_be_an_allowed_prefix);
        tcase_add_test(tc, test_parents_are_mounted_before_what_lies_below_them);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(volume_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
