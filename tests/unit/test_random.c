/* test_random.c: random names from the kernel's CSPRNG (src/core/random.c): hex of the asked
 * length and alphabet, a bound on what one call takes, version 4 UUIDs in their textual form,
 * and no two names alike. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "sh/random.h"
#include "unit.h"

static bool lower_hex(const char *s, size_t n)
{
        return strspn(s, "0123456789abcdef") == n && s[n] == '\0';
}

START_TEST(test_hex_names_have_two_digits_a_byte_and_differ)
{
        char a[2 * 24 + 1], b[2 * 24 + 1];

        ck_assert_int_eq(sh_random_hex(a, 24), 0);
        ck_assert_int_eq(sh_random_hex(b, 24), 0);
        ck_assert(lower_hex(a, 48));
        ck_assert(lower_hex(b, 48));
        ck_assert_str_ne(a, b); /* 192 bits: never alike */
}
END_TEST

START_TEST(test_a_hex_name_past_the_bound_is_refused)
{
        char out[2 * SH_RANDOM_HEX_MAX + 3] = "untouched";

        ck_assert_int_eq(sh_random_hex(out, SH_RANDOM_HEX_MAX + 1), -EINVAL);
        ck_assert_str_eq(out, "untouched");
        ck_assert_int_eq(sh_random_hex(out, SH_RANDOM_HEX_MAX), 0);
        ck_assert(lower_hex(out, 2 * SH_RANDOM_HEX_MAX));
}
END_TEST

START_TEST(test_uuids_are_version_4_in_their_text_form)
{
        char u[SH_UUID_LEN + 1], v[SH_UUID_LEN + 1];

        ck_assert_int_eq(sh_random_uuid(u), 0);
        ck_assert_int_eq(sh_random_uuid(v), 0);
        ck_assert_uint_eq(strlen(u), SH_UUID_LEN);
        for (int i = 0; i < SH_UUID_LEN; i++) {
                if (i == 8 || i == 13 || i == 18 || i == 23)
                        ck_assert_int_eq(u[i], '-');
                else
                        ck_assert_ptr_nonnull(strchr("0123456789abcdef", u[i]));
        }
        ck_assert_int_eq(u[14], '4');                 /* version */
        ck_assert_ptr_nonnull(strchr("89ab", u[19])); /* variant 10 */
        ck_assert_str_ne(u, v);
}
END_TEST

static Suite *random_suite(void)
{
        Suite *s = suite_create("random");
        TCase *tc = tcase_create("names");

        tcase_add_test(tc, test_hex_names_have_two_digits_a_byte_and_differ);
        tcase_add_test(tc, test_a_hex_name_past_the_bound_is_refused);
        tcase_add_test(tc, test_uuids_are_version_4_in_their_text_form);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(random_suite());
}
