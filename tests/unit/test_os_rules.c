/* test_os_rules.c: the pure rules of the /v1 surface (src/opensandbox/rules.c) and the
 * record's output ring: Kubernetes quantities, label rules, image uri candidates, RFC 3339. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/opensandbox/os-internal.h"
#include "unit.h"

/* ---- quantities -------------------------------------------------------------------------- */

static uint64_t q(const char *s, uint64_t scale)
{
        uint64_t v = 0;
        int r = os_quantity_parse(s, scale, &v);

        ck_assert_msg(r == 0, "quantity '%s' refused (%d)", s, r);
        return v;
}

START_TEST(test_cpu_quantities_in_millicores)
{
        ck_assert_uint_eq(q("500m", 1000), 500);
        ck_assert_uint_eq(q("1", 1000), 1000);
        ck_assert_uint_eq(q("1.5", 1000), 1500);
        ck_assert_uint_eq(q("0.75", 1000), 750);
        ck_assert_uint_eq(q("250m", 1000), 250);
        ck_assert_uint_eq(q("0.0001", 1000), 1); /* rounded up, never to 0 */
        ck_assert_uint_eq(q("0", 1000), 0);
}
END_TEST

START_TEST(test_memory_quantities_binary_and_decimal)
{
        ck_assert_uint_eq(q("512Mi", 1), 512ULL << 20);
        ck_assert_uint_eq(q("2Gi", 1), 2ULL << 30);
        ck_assert_uint_eq(q("1.5Gi", 1), 1536ULL << 20);
        ck_assert_uint_eq(q("262144Ki", 1), 256ULL << 20);
        ck_assert_uint_eq(q("314572800", 1), 300ULL << 20);
        ck_assert_uint_eq(q("1G", 1), 1000000000ULL);
        ck_assert_uint_eq(q("300M", 1), 300000000ULL);
        ck_assert_uint_eq(q("1k", 1), 1000);
        ck_assert_uint_eq(q("1E", 1), 1000000000000000000ULL);
        ck_assert_uint_eq(q("2e3", 1), 2000);
        ck_assert_uint_eq(q("+5", 1), 5);
}
END_TEST

START_TEST(test_huge_quantities_saturate)
{
        ck_assert_uint_eq(q("100Ei", 1), UINT64_MAX);
        ck_assert_uint_eq(q("99999999999999999999", 1000), UINT64_MAX);
}
END_TEST

START_TEST(test_unparsable_quantities_are_refused)
{
        static const char *const bad[] = {
                "",    "lots",   "1.5.5",  "1,5", "12Qi", "Gi",
                "abc", "1..5Gi", "512 Mi", "-1",  "m",    ".",
                "1e",  "1Mib",   "0x10",   " 1",  "1 ",   "1234567890123456789012345678901"};
        uint64_t v;
        size_t i;

        for (i = 0; i < ARRAY_SIZE(bad); i++)
                ck_assert_msg(os_quantity_parse(bad[i], 1, &v) == -EINVAL, "'%s' accepted", bad[i]);
}
END_TEST

/* ---- labels ------------------------------------------------------------------------------ */

START_TEST(test_label_keys)
{
        char key[400];

        ck_assert_ptr_null(os_label_key_invalid("team"));
        ck_assert_ptr_null(os_label_key_invalid("app.kubernetes.io/name"));
        ck_assert_ptr_null(os_label_key_invalid("A-b_c.D"));
        ck_assert_ptr_nonnull(os_label_key_invalid(""));
        ck_assert_ptr_nonnull(os_label_key_invalid("-a"));
        ck_assert_ptr_nonnull(os_label_key_invalid("a b"));
        ck_assert_ptr_nonnull(os_label_key_invalid("a/b/c"));
        ck_assert_ptr_nonnull(os_label_key_invalid("/name"));
        ck_assert_ptr_nonnull(os_label_key_invalid("prefix/"));
        ck_assert_ptr_nonnull(os_label_key_invalid("Upper.Case/name"));
        ck_assert_ptr_nonnull(os_label_key_invalid("under_score.io/name"));
        ck_assert_ptr_nonnull(os_label_key_invalid("opensandbox.io/owner"));
        ck_assert_ptr_null(os_label_key_invalid("x.opensandbox.io/owner"));
        memset(key, 'k', 63);
        key[63] = '\0';
        ck_assert_ptr_null(os_label_key_invalid(key));
        key[63] = 'k';
        key[64] = '\0';
        ck_assert_ptr_nonnull(os_label_key_invalid(key));
        /* a prefix of exactly 253, then 254 */
        memset(key, 'a', 253);
        key[63] = key[127] = key[191] = '.';
        memcpy(key + 253, "/n", 3);
        ck_assert_ptr_null(os_label_key_invalid(key));
        memmove(key + 1, key, 256);
        key[0] = 'a';
        ck_assert_ptr_nonnull(os_label_key_invalid(key));
}
END_TEST

START_TEST(test_label_values)
{
        ck_assert_ptr_null(os_label_value_invalid(""));
        ck_assert_ptr_null(os_label_value_invalid("Z9-_.z"));
        ck_assert_ptr_nonnull(os_label_value_invalid("-v"));
        ck_assert_ptr_nonnull(os_label_value_invalid("v-"));
        ck_assert_ptr_nonnull(os_label_value_invalid("two words"));
        ck_assert_ptr_nonnull(os_label_value_invalid("slash/y"));
        ck_assert_ptr_nonnull(os_label_value_invalid("\xc3\xa9"));
}
END_TEST

/* ---- images ------------------------------------------------------------------------------ */

static void assert_candidates(const char *uri, size_t n, const char *a, const char *b,
                              const char *c)
{
        const char *want[3] = {a, b, c};
        char out[3][256];
        size_t got = os_image_candidates(uri, out), i;

        ck_assert_msg(got == n, "'%s': %zu candidates, want %zu", uri, got, n);
        for (i = 0; i < n; i++)
                ck_assert_str_eq(out[i], want[i]);
}

START_TEST(test_image_candidates_in_order)
{
        assert_candidates("example.com/team/tool", 2, "example.com_team_tool", "tool", NULL);
        assert_candidates("registry.io/x/tool:1.2", 3, "registry.io_x_tool:1.2", "tool:1.2",
                          "tool");
        assert_candidates("python:3.11", 2, "python:3.11", "python", NULL);
        assert_candidates("tool@sha256:abcd", 2, "tool@sha256:abcd", "tool", NULL);
        assert_candidates("localhost:5000/ns/app:latest", 3, "localhost:5000_ns_app:latest",
                          "app:latest", "app");
        assert_candidates("default", 1, "default", NULL, NULL);
}
END_TEST

START_TEST(test_image_candidates_never_leave_the_images_dir)
{
        assert_candidates("", 0, NULL, NULL, NULL);
        assert_candidates("/", 1, "_", NULL, NULL);
        assert_candidates(".", 0, NULL, NULL, NULL);
        assert_candidates("..", 0, NULL, NULL, NULL);
        assert_candidates("a/..", 1, "a_..", NULL, NULL);
        assert_candidates("a/.", 1, "a_.", NULL, NULL);
        assert_candidates(":tag", 1, ":tag", NULL, NULL);
}
END_TEST

/* ---- RFC 3339 ---------------------------------------------------------------------------- */

START_TEST(test_time_round_trip)
{
        char t[32];
        uint64_t ms;

        os_time_format(1767323045678ULL, t);
        ck_assert_str_eq(t, "2026-01-02T03:04:05.678Z");
        ck_assert_int_eq(os_time_parse(t, &ms), 0);
        ck_assert_uint_eq(ms, 1767323045678ULL);
        ck_assert_int_eq(os_time_parse("2026-01-02T05:04:05+02:00", &ms), 0);
        ck_assert_uint_eq(ms, 1767323045000ULL);
        ck_assert_int_eq(os_time_parse("2026-01-02t03:04:05.123456789z", &ms), 0);
        ck_assert_uint_eq(ms, 1767323045123ULL);
        ck_assert_int_eq(os_time_parse("2024-02-29T00:00:00Z", &ms), 0);
}
END_TEST

START_TEST(test_time_refuses_what_is_not_rfc_3339)
{
        static const char *const bad[] = {"tomorrow",
                                          "2026-01-02 03:04:05Z",
                                          "2026-01-02T03:04:05",
                                          "1700000000",
                                          "",
                                          "2026-13-02T03:04:05Z",
                                          "2025-02-29T00:00:00Z",
                                          "2026-01-02T03:04:05.Z",
                                          "2026-01-02T03:04:05+0200",
                                          "2026-01-02T03:04:05Zx"};
        uint64_t ms;
        size_t i;

        for (i = 0; i < ARRAY_SIZE(bad); i++)
                ck_assert_msg(os_time_parse(bad[i], &ms) == -EINVAL, "'%s' accepted", bad[i]);
}
END_TEST

/* ---- the output ring --------------------------------------------------------------------- */

static char *ring_text(const os_ring *g)
{
        char *s = calloc(1, g->len + 1);

        ck_assert_ptr_nonnull(s);
        os_ring_copy(g, s);
        return s;
}

START_TEST(test_ring_keeps_the_last_cap_bytes)
{
        os_ring g = {.cap = 8};
        char *s;

        os_ring_append(&g, "abc", 3);
        s = ring_text(&g);
        ck_assert_str_eq(s, "abc");
        free(s);
        os_ring_append(&g, "defghij", 7);
        s = ring_text(&g);
        ck_assert_str_eq(s, "cdefghij");
        free(s);
        os_ring_append(&g, "0123456789", 10);
        s = ring_text(&g);
        ck_assert_str_eq(s, "23456789");
        free(s);
        ck_assert_uint_eq(g.total, 20);
        ck_assert_uint_eq(g.alloc, 8);
        os_ring_done(&g);
}
END_TEST

START_TEST(test_ring_grows_only_with_what_it_holds)
{
        os_ring g = {.cap = 1u << 20};
        char block[1000];
        unsigned i;

        memset(block, 'x', sizeof(block));
        os_ring_append(&g, block, 10);
        ck_assert_uint_le(g.alloc, 4096);
        for (i = 0; i < 3000; i++)
                os_ring_append(&g, block, sizeof(block));
        ck_assert_uint_eq(g.alloc, 1u << 20);
        ck_assert_uint_eq(g.len, 1u << 20);
        ck_assert_uint_eq(g.total, 3000 * 1000 + 10);
        os_ring_done(&g);
}
END_TEST

static Suite *os_rules_suite(void)
{
        Suite *s = suite_create("os_rules");
        TCase *tc = tcase_create("quantities");

        tcase_add_test(tc, test_cpu_quantities_in_millicores);
        tcase_add_test(tc, test_memory_quantities_binary_and_decimal);
        tcase_add_test(tc, test_huge_quantities_saturate);
        tcase_add_test(tc, test_unparsable_quantities_are_refused);
        suite_add_tcase(s, tc);
        tc = tcase_create("labels");
        tcase_add_test(tc, test_label_keys);
        tcase_add_test(tc, test_label_values);
        suite_add_tcase(s, tc);
        tc = tcase_create("images");
        tcase_add_test(tc, test_image_candidates_in_order);
        tcase_add_test(tc, test_image_candidates_never_leave_the_images_dir);
        suite_add_tcase(s, tc);
        tc = tcase_create("times");
        tcase_add_test(tc, test_time_round_trip);
        tcase_add_test(tc, test_time_refuses_what_is_not_rfc_3339);
        suite_add_tcase(s, tc);
        tc = tcase_create("ring");
        tcase_add_test(tc, test_ring_keeps_the_last_cap_bytes);
        tcase_add_test(tc, test_ring_grows_only_with_what_it_holds);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(os_rules_suite());
}
