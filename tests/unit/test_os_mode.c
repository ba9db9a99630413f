/* test_os_mode.c: the execd API's `mode` (src/opensandbox/mode.c): octal digits written as a
 * decimal number, 0 or absent leaves the mode, setuid/setgid/sticky and digits 8/9 refused,
 * JSON values of every type, and a loop of random values that must never crash. */
#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/opensandbox/mode.h"
#include "unit.h"

static int dec(uint64_t v, unsigned *m)
{
        *m = 0xdead;
        return os_mode_from_decimal(v, m);
}

START_TEST(test_decimal_digits_are_octal_bits)
{
        unsigned m;

        ck_assert_int_eq(dec(644, &m), 0);
        ck_assert_uint_eq(m, 0644);
        ck_assert_int_eq(dec(755, &m), 0);
        ck_assert_uint_eq(m, 0755);
        ck_assert_int_eq(dec(777, &m), 0);
        ck_assert_uint_eq(m, 0777);
        ck_assert_int_eq(dec(600, &m), 0);
        ck_assert_uint_eq(m, 0600);
        ck_assert_int_eq(dec(7, &m), 0);
        ck_assert_uint_eq(m, 07);
        ck_assert_int_eq(dec(70, &m), 0);
        ck_assert_uint_eq(m, 070);
        ck_assert_int_eq(dec(400, &m), 0);
        ck_assert_uint_eq(m, 0400);
        /* A leading 0 fourth digit is no special bit. */
        ck_assert_int_eq(dec(644, &m), 0);
        ck_assert_uint_eq(m, 0644);
}
END_TEST

START_TEST(test_zero_means_leave_the_mode_as_it_is)
{
        unsigned m;

        ck_assert_int_eq(dec(0, &m), 0);
        ck_assert_uint_eq(m, 0);
}
END_TEST

START_TEST(test_setuid_setgid_and_sticky_are_refused)
{
        static const uint64_t special[] = {4755, 2755, 1777, 7777, 1000, 4000, 6644, 3700};
        unsigned m = 0xdead;

        for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++) {
                ck_assert_int_eq(os_mode_from_decimal(special[i], &m), -EPERM);
                ck_assert_uint_eq(m, 0xdead); /* untouched on failure */
        }
}
END_TEST

START_TEST(test_digits_eight_and_nine_are_refused)
{
        static const uint64_t bad[] = {8, 9, 648, 694, 800, 999, 788, 1008, 2048, 1009};
        unsigned m = 0xdead;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_int_eq(os_mode_from_decimal(bad[i], &m), -EINVAL);
        ck_assert_uint_eq(m, 0xdead);
}
END_TEST

START_TEST(test_more_than_four_digits_are_refused)
{
        unsigned m = 0xdead;

        ck_assert_int_eq(os_mode_from_decimal(7778, &m), -EINVAL);
        ck_assert_int_eq(os_mode_from_decimal(10000, &m), -EINVAL);
        ck_assert_int_eq(os_mode_from_decimal(100644, &m), -EINVAL);
        ck_assert_int_eq(os_mode_from_decimal(UINT64_MAX, &m), -EINVAL);
        /* 0644 + 2^32 * k must not wrap into a valid mode */
        ck_assert_int_eq(os_mode_from_decimal(644 + (UINT64_C(1) << 32), &m), -EINVAL);
        ck_assert_uint_eq(m, 0xdead);
}
END_TEST

static int js(const char *text, unsigned *m)
{
        cJSON *j = cJSON_Parse(text);
        int r;

        ck_assert_ptr_nonnull(j);
        *m = 0xdead;
        r = os_mode_from_json(j, m);
        cJSON_Delete(j);
        return r;
}

START_TEST(test_json_numbers_absent_and_null)
{
        unsigned m = 0xdead;

        ck_assert_int_eq(os_mode_from_json(NULL, &m), 0);
        ck_assert_uint_eq(m, 0);
        ck_assert_int_eq(js("null", &m), 0);
        ck_assert_uint_eq(m, 0);
        ck_assert_int_eq(js("0", &m), 0);
        ck_assert_uint_eq(m, 0);
        ck_assert_int_eq(js("-0", &m), 0);
        ck_assert_uint_eq(m, 0);
        ck_assert_int_eq(js("644", &m), 0);
        ck_assert_uint_eq(m, 0644);
        ck_assert_int_eq(js("755.0", &m), 0); /* JSON cannot tell 755.0 from 755 */
        ck_assert_uint_eq(m, 0755);
        ck_assert_int_eq(js("7.77e2", &m), 0);
        ck_assert_uint_eq(m, 0777);
}
END_TEST

START_TEST(test_json_values_that_are_no_mode_are_refused)
{
        static const char *const bad[] = {
                "\"644\"",
                "true",
                "false",
                "[644]",
                "{\"mode\":644}",
                "-1",
                "-644",
                "644.5",
                "0.1",
                "1e300",
                "-1e300",
                "1e-300",
                "8",
                "99999999999999999999",
                "4294967940",
                "18446744073709552260",
        };
        unsigned m;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(js(bad[i], &m) == -EINVAL, "accepted %s", bad[i]);
        ck_assert_int_eq(js("4755", &m), -EPERM);
        ck_assert_int_eq(js("1777", &m), -EPERM);
}
END_TEST

START_TEST(test_json_nan_and_infinity_are_refused)
{
        cJSON *j = cJSON_CreateNumber(0);
        unsigned m = 0xdead;

        ck_assert_ptr_nonnull(j);
        cJSON_SetNumberValue(j, NAN);
        ck_assert_int_eq(os_mode_from_json(j, &m), -EINVAL);
        cJSON_SetNumberValue(j, INFINITY);
        ck_assert_int_eq(os_mode_from_json(j, &m), -EINVAL);
        cJSON_SetNumberValue(j, -INFINITY);
        ck_assert_int_eq(os_mode_from_json(j, &m), -EINVAL);
        cJSON_SetNumberValue(j, 1e19);
        ck_assert_int_eq(os_mode_from_json(j, &m), -EINVAL);
        ck_assert_uint_eq(m, 0xdead);
        cJSON_Delete(j);
}
END_TEST

START_TEST(test_bits_are_shown_as_decimal_digits)
{
        ck_assert_uint_eq(os_mode_to_decimal(0644), 644);
        ck_assert_uint_eq(os_mode_to_decimal(0755), 755);
        ck_assert_uint_eq(os_mode_to_decimal(0), 0);
        ck_assert_uint_eq(os_mode_to_decimal(04755), 4755);
        ck_assert_uint_eq(os_mode_to_decimal(0100644), 644); /* S_IFREG is no permission bit */
        ck_assert_uint_eq(os_mode_to_decimal(07777), 7777);
}
END_TEST

START_TEST(test_every_permission_round_trips)
{
        for (unsigned mode = 0; mode <= 0777; mode++) {
                unsigned back = 0xdead;

                ck_assert_int_eq(os_mode_from_decimal(os_mode_to_decimal(mode), &back), 0);
                ck_assert_uint_eq(back, mode);
        }
}
END_TEST

START_TEST(test_random_values_never_crash_and_never_give_special_bits)
{
        unsigned seed = 12345;

        for (int i = 0; i < 200000; i++) {
                uint64_t v = ((uint64_t)rand_r(&seed) << 33) ^ ((uint64_t)rand_r(&seed) << 11) ^
                             (uint64_t)rand_r(&seed);
                unsigned m = 0;
                double d;
                cJSON *j;

                if (i & 1)
                        v %= 20000;
                if (os_mode_from_decimal(v, &m) == 0)
                        ck_assert_uint_eq(m & ~0777u, 0);
                memcpy(&d, &v, sizeof(d)); /* any bit pattern: NaNs, denormals, huge */
                j = cJSON_CreateNumber(0);
                ck_assert_ptr_nonnull(j);
                j->valuedouble = d;
                if (os_mode_from_json(j, &m) == 0)
                        ck_assert_uint_eq(m & ~0777u, 0);
                cJSON_Delete(j);
        }
}
END_TEST

static Suite *mode_suite(void)
{
        Suite *s = suite_create("os_mode");
        TCase *tc = tcase_create("mode");

        tcase_add_test(tc, test_decimal_digits_are_octal_bits);
        tcase_add_test(tc, test_zero_means_leave_the_mode_as_it_is);
        tcase_add_test(tc, test_setuid_setgid_and_sticky_are_refused);
        tcase_add_test(tc, test_digits_eight_and_nine_are_refused);
        tcase_add_test(tc, test_more_than_four_digits_are_refused);
        tcase_add_test(tc, test_json_numbers_absent_and_null);
        tcase_add_test(tc, test_json_values_that_are_no_mode_are_refused);
        tcase_add_test(tc, test_json_nan_and_infinity_are_refused);
        tcase_add_test(tc, test_bits_are_shown_as_decimal_digits);
        tcase_add_test(tc, test_every_permission_round_trips);
        tcase_add_test(tc, test_random_values_never_crash_and_never_give_special_bits);
        /* 200,000 random values: a fixed amount of work, whose time is the machine's (ASan
         * beside other jobs took longer than Check's default 4 s) */
        tcase_set_timeout(tc, 60);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(mode_suite());
}
