/* test_framing.c: sh_http_check_framing: the request smuggling rules (RFC 9112 section 6) and
 * field syntax MHD 0.9.75 leaves to us. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "sh/http.h"
#include "sh/native.h"
#include "unit.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* 0 when accepted; else asserts the error is 400 BadRequest and returns -1. */
static int check(const sh_http_field *f, size_t n, bool http10)
{
        sh_error *err = NULL;
        int r = sh_http_check_framing(f, n, http10, &err);

        if (r == 0) {
                ck_assert_ptr_null(err);
                return 0;
        }
        ck_assert_int_lt(r, 0);
        ck_assert_ptr_nonnull(err);
        ck_assert_int_eq(sh_error_kind_of(err), SH_E_INVALID);
        ck_assert_int_eq(sh_native_status(sh_error_kind_of(err)), 400);
        ck_assert_str_eq(sh_native_type(sh_error_kind_of(err)), "BadRequest");
        sh_error_release(&err);
        return -1;
}

START_TEST(test_ordinary_requests_pass)
{
        const sh_http_field get[] = {{"Host", "127.0.0.1:8080"}, {"Accept", "*/*"}};
        const sh_http_field put[] = {{"Host", "x"},
                                     {"Content-Type", "application/octet-stream"},
                                     {"Content-Length", "1048576"},
                                     {"X-Tab", "a\tb"},
                                     {"X-Empty", ""}};
        const sh_http_field chunked[] = {{"Host", "x"}, {"transfer-encoding", "Chunked"}};

        ck_assert_int_eq(check(NULL, 0, false), 0);
        ck_assert_int_eq(check(get, N(get), false), 0);
        ck_assert_int_eq(check(put, N(put), false), 0);
        ck_assert_int_eq(check(put, N(put), true), 0);
        ck_assert_int_eq(check(chunked, N(chunked), false), 0);
}
END_TEST

START_TEST(test_content_lengths_that_disagree_are_refused)
{
        const sh_http_field two[] = {{"Content-Length", "3"}, {"content-length", "5"}};
        const sh_http_field later[] = {{"Content-Length", "3"},
                                       {"Host", "x"},
                                       {"Content-Length", "3"},
                                       {"Content-Length", "4"}};

        ck_assert_int_eq(check(two, N(two), false), -1);
        ck_assert_int_eq(check(later, N(later), false), -1);
}
END_TEST

START_TEST(test_the_same_content_length_twice_is_one_length)
{
        const sh_http_field same[] = {{"Content-Length", "3"}, {"Content-Length", "3"}};
        const sh_http_field zeros[] = {{"Content-Length", "3"}, {"Content-Length", "003"}};

        ck_assert_int_eq(check(same, N(same), false), 0);
        ck_assert_int_eq(check(zeros, N(zeros), false), 0);
}
END_TEST

START_TEST(test_a_content_length_that_is_not_digits_is_refused)
{
        static const char *const bad[] = {
                "", "-1", "+5", "5 ", " 5", "0x10", "5,5", "1e3", "99999999999999999999999"};
        size_t i;

        for (i = 0; i < N(bad); i++) {
                /* MHD checks the first field only: the bad one comes second */
                const sh_http_field f[] = {{"Content-Length", "5"}, {"Content-Length", bad[i]}};

                ck_assert_msg(check(f, N(f), false) == -1, "'%s' accepted", bad[i]);
        }
}
END_TEST

START_TEST(test_content_length_with_transfer_encoding_is_refused)
{
        const sh_http_field f[] = {{"Content-Length", "3"}, {"Transfer-Encoding", "chunked"}};
        const sh_http_field g[] = {{"Transfer-Encoding", "chunked"}, {"Content-Length", "3"}};

        ck_assert_int_eq(check(f, N(f), false), -1);
        ck_assert_int_eq(check(g, N(g), false), -1);
}
END_TEST

START_TEST(test_transfer_encoding_other_than_chunked_is_refused)
{
        static const char *const bad[] = {"gzip, chunked", "chunked, gzip", "identity", "gzip",
                                          "chunked ",      "chunked;x=1",   ""};
        size_t i;

        for (i = 0; i < N(bad); i++) {
                const sh_http_field f[] = {{"Transfer-Encoding", bad[i]}};

                ck_assert_msg(check(f, N(f), false) == -1, "'%s' accepted", bad[i]);
        }
}
END_TEST

START_TEST(test_two_transfer_encoding_fields_are_refused)
{
        const sh_http_field f[] = {{"Transfer-Encoding", "chunked"},
                                   {"Transfer-Encoding", "chunked"}};

        ck_assert_int_eq(check(f, N(f), false), -1);
}
END_TEST

START_TEST(test_transfer_encoding_in_http10_is_refused)
{
        const sh_http_field f[] = {{"Transfer-Encoding", "chunked"}};

        ck_assert_int_eq(check(f, N(f), true), -1);
}
END_TEST

START_TEST(test_a_field_name_that_is_not_a_token_is_refused)
{
        static const char *const bad[] = {"Content-Length ", " Host", "", "X Y", "X\"", "X(",
                                          "\xc3\xa9"};
        size_t i;

        for (i = 0; i < N(bad); i++) {
                const sh_http_field f[] = {{"Host", "x"}, {bad[i], "5"}};

                ck_assert_msg(check(f, N(f), false) == -1, "name '%s' accepted", bad[i]);
        }
}
END_TEST

START_TEST(test_control_characters_in_a_value_are_refused)
{
        static const char *const bad[] = {"a\rb", "a\r", "\x01", "a\x1f", "a\x7f"};
        size_t i;

        for (i = 0; i < N(bad); i++) {
                const sh_http_field f[] = {{"X-A", bad[i]}};

                ck_assert_msg(check(f, N(f), false) == -1, "value %zu accepted", i);
        }
}
END_TEST

START_TEST(test_obs_text_in_a_value_passes)
{
        const sh_http_field f[] = {{"X-A", "caf\xc3\xa9 \xff"}};

        ck_assert_int_eq(check(f, N(f), false), 0);
}
END_TEST

static Suite *framing_suite(void)
{
        Suite *s = suite_create("framing");
        TCase *tc = tcase_create("rules");

        tcase_add_test(tc, test_ordinary_requests_pass);
        tcase_add_test(tc, test_content_lengths_that_disagree_are_refused);
        tcase_add_test(tc, test_the_same_content_length_twice_is_one_length);
        tcase_add_test(tc, test_a_content_length_that_is_not_digits_is_refused);
        tcase_add_test(tc, test_content_length_with_transfer_encoding_is_refused);
        tcase_add_test(tc, test_transfer_encoding_other_than_chunked_is_refused);
        tcase_add_test(tc, test_two_transfer_encoding_fields_are_refused);
        tcase_add_test(tc, test_transfer_encoding_in_http10_is_refused);
        tcase_add_test(tc, test_a_field_name_that_is_not_a_token_is_refused);
        tcase_add_test(tc, test_control_characters_in_a_value_are_refused);
        tcase_add_test(tc, test_obs_text_in_a_value_passes);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(framing_suite());
}
