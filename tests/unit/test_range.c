/* test_range.c: the Range header of a download (src/http/range.c), every form of
 * RFC 9110 section 14 over a 10-byte file: a-b, a-, -n, an end at and past the size, a start
 * at or past it (416), several ranges, junk and numbers too long for 64 bits; the Content-Range
 * of a range and of a 416, a file's Content-Disposition. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sh/range.h"
#include "unit.h"

/* The range [from, to] of h over size bytes, which must be satisfiable. */
static void served(const char *h, uint64_t size, uint64_t from, uint64_t to)
{
        uint64_t f = 12345, t = 12345;
        int r = sh_range_parse(h, size, &f, &t);

        ck_assert_msg(r == 1, "'%s' over %llu: %d, not a range", h, (unsigned long long)size, r);
        ck_assert_msg(f == from && t == to, "'%s' over %llu: [%llu, %llu], not [%llu, %llu]", h,
                      (unsigned long long)size, (unsigned long long)f, (unsigned long long)t,
                      (unsigned long long)from, (unsigned long long)to);
}

/* h over size bytes answers `want` (0 whole file, -1 unsatisfiable) and touches nothing. */
static void judged(const char *h, uint64_t size, int want)
{
        uint64_t f = 12345, t = 12345;
        int r = sh_range_parse(h, size, &f, &t);

        ck_assert_msg(r == want, "'%s' over %llu: %d, not %d", h, (unsigned long long)size, r,
                      want);
        ck_assert_uint_eq(f, 12345);
        ck_assert_uint_eq(t, 12345);
}

START_TEST(test_a_dash_b_is_that_range_inclusive)
{
        served("bytes=0-0", 10, 0, 0);
        served("bytes=2-5", 10, 2, 5);
        served("bytes=0-9", 10, 0, 9);
        served("bytes=9-9", 10, 9, 9);
}
END_TEST

START_TEST(test_an_end_equal_to_the_size_is_the_last_byte)
{
        /* the cases: 8-10 is bytes 8 and 9, 0-10 the whole file, never an 11th byte */
        served("bytes=8-10", 10, 8, 9);
        served("bytes=0-10", 10, 0, 9);
        served("bytes=9-10", 10, 9, 9);
}
END_TEST

START_TEST(test_an_end_past_the_size_is_the_last_byte)
{
        served("bytes=8-11", 10, 8, 9);
        served("bytes=0-1000000", 10, 0, 9);
        served("bytes=3-18446744073709551615", 10, 3, 9);
}
END_TEST

START_TEST(test_a_dash_is_to_the_end)
{
        served("bytes=0-", 10, 0, 9);
        served("bytes=7-", 10, 7, 9);
        served("bytes=9-", 10, 9, 9);
}
END_TEST

START_TEST(test_dash_n_is_the_last_n_bytes_or_the_whole_file)
{
        served("bytes=-1", 10, 9, 9);
        served("bytes=-3", 10, 7, 9);
        served("bytes=-10", 10, 0, 9);
        served("bytes=-11", 10, 0, 9);
        served("bytes=-1000000", 10, 0, 9);
}
END_TEST

START_TEST(test_a_start_at_or_past_the_size_is_unsatisfiable)
{
        judged("bytes=10-", 10, -1);
        judged("bytes=10-10", 10, -1);
        judged("bytes=10-20", 10, -1);
        judged("bytes=11-", 10, -1);
        judged("bytes=-0", 10, -1);
        /* nothing of an empty file can be asked */
        judged("bytes=0-", 0, -1);
        judged("bytes=0-0", 0, -1);
        judged("bytes=-5", 0, -1);
}
END_TEST

START_TEST(test_the_unit_is_case_insensitive)
{
        served("Bytes=1-2", 10, 1, 2);
        served("BYTES=-2", 10, 8, 9);
}
END_TEST

START_TEST(test_several_ranges_are_the_whole_file)
{
        judged("bytes=0-1,3-4", 10, 0);
        judged("bytes=0-1, 3-4", 10, 0);
        judged("bytes=-1,0-0", 10, 0);
        judged("bytes=0-1,", 10, 0);
        /* also when one of them alone would be unsatisfiable */
        judged("bytes=20-30,0-1", 10, 0);
}
END_TEST

START_TEST(test_junk_is_the_whole_file)
{
        static const char *const junk[] = {
                "",           "bytes",      "bytes=",     "bytes=-",    "bytes=--1",
                "bytes=1",    "bytes=a-b",  "bytes=1-a",  "bytes=1-2x", "bytes= 1-2",
                "bytes=1 -2", "bytes=1- 2", "bytes=+1-2", "bytes=1-+2", "bytes=0x1-2",
                "bytes=-1-2", "bytes=1--2", "bytes=5-3",  "bytes=-a",   "bytes=-1x",
                "items=0-1",  "bytes:0-1",  "bytes =0-1", "byte=0-1",   "bytes=1-2-3",
        };

        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
                judged(junk[i], 10, 0);
        /* b < a is invalid (ignored), even past the size */
        judged("bytes=20-5", 10, 0);
}
END_TEST

START_TEST(test_numbers_too_long_for_64_bits_saturate)
{
        /* a start past any file is past this one; an end past it is its end; a suffix
         * longer than it is all of it: never a wrap to a small number */
        judged("bytes=18446744073709551616-", 10, -1);
        judged("bytes=99999999999999999999999999-", 10, -1);
        judged("bytes=18446744073709551616-18446744073709551617", 10, -1);
        served("bytes=0-18446744073709551616", 10, 0, 9);
        served("bytes=4-99999999999999999999999999", 10, 4, 9);
        served("bytes=-18446744073709551616", 10, 0, 9);
        served("bytes=-99999999999999999999999999", 10, 0, 9);
        /* 2^64 + 5 as a start must not be 5 */
        judged("bytes=18446744073709551621-", 10, -1);
}
END_TEST

START_TEST(test_big_files_keep_full_64_bit_positions)
{
        const uint64_t big = UINT64_MAX - 1; /* a file this size cannot exist; the math can */

        served("bytes=18446744073709551613-", big, UINT64_MAX - 2, UINT64_MAX - 2);
        served("bytes=-2", big, UINT64_MAX - 3, UINT64_MAX - 2);
        served("bytes=0-18446744073709551615", big, 0, UINT64_MAX - 2);
        judged("bytes=18446744073709551614-", big, -1);
}
END_TEST

START_TEST(test_content_range_of_a_range_and_of_none)
{
        char cr[SH_RANGE_HEADER_MAX];

        sh_range_header(cr, sizeof(cr), true, 2, 5, 10);
        ck_assert_str_eq(cr, "bytes 2-5/10");
        sh_range_header(cr, sizeof(cr), false, 0, 0, 10);
        ck_assert_str_eq(cr, "bytes */10");
        sh_range_header(cr, sizeof(cr), true, UINT64_MAX - 1, UINT64_MAX - 1, UINT64_MAX);
        ck_assert_str_eq(cr,
                         "bytes 18446744073709551614-18446744073709551614/18446744073709551615");
}
END_TEST

START_TEST(test_disposition_names_the_base_name_plain_and_exact)
{
        char *h = sh_content_disposition("/workspace/dir/report 1.txt");

        ck_assert_str_eq(h,
                         "attachment; filename=\"report 1.txt\"; filename*=UTF-8''report%201.txt");
        free(h);
        h = sh_content_disposition("plain");
        ck_assert_str_eq(h, "attachment; filename=\"plain\"; filename*=UTF-8''plain");
        free(h);
}
END_TEST

START_TEST(test_disposition_never_lets_a_quote_or_a_line_break_through)
{
        char *h = sh_content_disposition("/a/x\"y\r\nSet-Cookie: z\\\xc3\xa9");

        ck_assert_ptr_null(strpbrk(h, "\r\n\\"));
        ck_assert_str_eq(h, "attachment; filename=\"x_y__Set-Cookie: z___\"; "
                            "filename*=UTF-8''x%22y%0D%0ASet-Cookie%3A%20z%5C%C3%A9");
        free(h);
}
END_TEST

START_TEST(test_disposition_cuts_a_name_at_255_bytes)
{
        char name[1024];
        char *h;

        memset(name, 0xff, sizeof(name) - 1);
        name[sizeof(name) - 1] = '\0';
        h = sh_content_disposition(name);
        /* 255 bytes: 255 '_' plain, 255 "%FF" exact */
        ck_assert_uint_eq(strlen(h),
                          strlen("attachment; filename=\"\"; filename*=UTF-8''") + 255 + 3 * 255);
        free(h);
}
END_TEST

static Suite *range_suite(void)
{
        Suite *s = suite_create("range");
        TCase *tc = tcase_create("forms");

        tcase_add_test(tc, test_a_dash_b_is_that_range_inclusive);
        tcase_add_test(tc, test_an_end_equal_to_the_size_is_the_last_byte);
        tcase_add_test(tc, test_an_end_past_the_size_is_the_last_byte);
        tcase_add_test(tc, test_a_dash_is_to_the_end);
        tcase_add_test(tc, test_dash_n_is_the_last_n_bytes_or_the_whole_file);
        tcase_add_test(tc, test_a_start_at_or_past_the_size_is_unsatisfiable);
        tcase_add_test(tc, test_the_unit_is_case_insensitive);
        suite_add_tcase(s, tc);
        tc = tcase_create("refused");
        tcase_add_test(tc, test_several_ranges_are_the_whole_file);
        tcase_add_test(tc, test_junk_is_the_whole_file);
        tcase_add_test(tc, test_numbers_too_long_for_64_bits_saturate);
        tcase_add_test(tc, test_big_files_keep_full_64_bit_positions);
        suite_add_tcase(s, tc);
        tc = tcase_create("headers");
        tcase_add_test(tc, test_content_range_of_a_range_and_of_none);
        tcase_add_test(tc, test_disposition_names_the_base_name_plain_and_exact);
        tcase_add_test(tc, test_disposition_never_lets_a_quote_or_a_line_break_through);
        tcase_add_test(tc, test_disposition_cuts_a_name_at_255_bytes);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(range_suite());
}
