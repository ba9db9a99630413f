/* test_os_rules.c: the pure rules of the /v1 surface (src/opensandbox/rules.c): label rules,
 * image uri candidates. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/opensandbox/os-internal.h"
#include "unit.h"

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

static Suite *os_rules_suite(void)
{
        Suite *s = suite_create("os_rules");
        TCase *tc = tcase_create("labels");

        tcase_add_test(tc, test_label_keys);
        tcase_add_test(tc, test_label_values);
        suite_add_tcase(s, tc);
        tc = tcase_create("images");
        tcase_add_test(tc, test_image_candidates_in_order);
        tcase_add_test(tc, test_image_candidates_never_leave_the_images_dir);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(os_rules_suite());
}
