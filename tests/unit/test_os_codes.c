/* test_os_codes.c: OpenSandbox's error codes (src/opensandbox/codes.c): the one table, the
 * kinds of the services' errors and the errnos of execd's file routes as its codes. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "../../src/opensandbox/os-internal.h"
#include "unit.h"

START_TEST(test_every_code_has_an_error_status_and_an_upper_case_name)
{
        for (int c = 0; c < OS_E_COUNT; c++) {
                const char *name = os_code_name((os_code)c);
                unsigned status = os_code_status((os_code)c);

                ck_assert_msg(status >= 400 && status <= 599, "code %d: status %u", c, status);
                ck_assert_msg(name && *name, "code %d has no name", c);
                ck_assert_msg(strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == strlen(name),
                              "code %d: '%s'", c, name);
        }
}
END_TEST

START_TEST(test_one_code_name_can_carry_several_statuses)
{
        /* NOT_SUPPORTED: a field refused, a port not exposed, a route not served */
        ck_assert_str_eq(os_code_name(OS_E_NOT_SUPPORTED), "NOT_SUPPORTED");
        ck_assert_str_eq(os_code_name(OS_E_NO_SUCH_PORT), "NOT_SUPPORTED");
        ck_assert_str_eq(os_code_name(OS_E_NOT_SERVED), "NOT_SUPPORTED");
        ck_assert_uint_eq(os_code_status(OS_E_NOT_SUPPORTED), 400);
        ck_assert_uint_eq(os_code_status(OS_E_NO_SUCH_PORT), 404);
        ck_assert_uint_eq(os_code_status(OS_E_NOT_SERVED), 501);
}
END_TEST

START_TEST(test_a_code_out_of_the_table_is_internal)
{
        ck_assert_uint_eq(os_code_status(OS_E_COUNT), 500);
        ck_assert_str_eq(os_code_name(OS_E_COUNT), "INTERNAL");
}
END_TEST

START_TEST(test_execd_routes_speak_execd_codes_for_the_same_kind)
{
        ck_assert_int_eq(os_code_of_kind(SH_E_INVALID, false), OS_E_INVALID_REQUEST);
        ck_assert_int_eq(os_code_of_kind(SH_E_INVALID, true), OS_E_BAD_BODY);
        ck_assert_int_eq(os_code_of_kind(SH_E_NOT_FOUND, false), OS_E_NOT_FOUND);
        ck_assert_int_eq(os_code_of_kind(SH_E_NOT_FOUND, true), OS_E_FILE_NOT_FOUND);
        ck_assert_int_eq(os_code_of_kind(SH_E_INTERNAL, false), OS_E_INTERNAL);
        ck_assert_int_eq(os_code_of_kind(SH_E_INTERNAL, true), OS_E_RUNTIME);
        ck_assert_uint_eq(os_code_status(os_code_of_kind(SH_E_TOO_LARGE, true)), 413);
}
END_TEST

START_TEST(test_some_kinds_mean_the_same_on_every_route)
{
        for (int execd = 0; execd < 2; execd++) {
                ck_assert_int_eq(os_code_of_kind(SH_E_SANDBOX_NOT_FOUND, execd),
                                 OS_E_SANDBOX_NOT_FOUND);
                ck_assert_int_eq(os_code_of_kind(SH_E_UNAVAILABLE, execd), OS_E_UNAVAILABLE);
                ck_assert_int_eq(os_code_of_kind(SH_E_BUSY, execd), OS_E_UNAVAILABLE);
                ck_assert_int_eq(os_code_of_kind(SH_E_METHOD_NOT_ALLOWED, execd),
                                 OS_E_METHOD_NOT_ALLOWED);
                ck_assert_int_eq(os_code_of_kind(SH_E_NO_ROUTE, execd), OS_E_NOT_FOUND);
        }
}
END_TEST

START_TEST(test_file_errnos_are_missing_refused_retry_or_the_hosts_failure)
{
        ck_assert_int_eq(os_code_of_file_errno(ENOENT), OS_E_FILE_NOT_FOUND);
        ck_assert_uint_eq(os_code_status(OS_E_FILE_NOT_FOUND), 404);
        /* what the kernel refuses of the path is the request's fault */
        ck_assert_int_eq(os_code_of_file_errno(EACCES), OS_E_BAD_BODY);
        ck_assert_int_eq(os_code_of_file_errno(EROFS), OS_E_BAD_BODY);
        ck_assert_int_eq(os_code_of_file_errno(ENOSPC), OS_E_BAD_BODY);
        ck_assert_int_eq(os_code_of_file_errno(E2BIG), OS_E_BAD_BODY);
        ck_assert_int_eq(os_code_of_file_errno(EAGAIN), OS_E_RUNTIME_RETRY);
        ck_assert_uint_eq(os_code_status(OS_E_RUNTIME_RETRY), 503);
        ck_assert_int_eq(os_code_of_file_errno(EIO), OS_E_RUNTIME);
        ck_assert_uint_eq(os_code_status(OS_E_RUNTIME), 500);
}
END_TEST

START_TEST(test_an_err_takes_its_status_and_code_from_the_table)
{
        os_err e;

        ck_assert_int_eq(os_err_code(&e, OS_E_SNAPSHOT_NOT_FOUND, "no %s", "such"), -1);
        ck_assert_uint_eq(e.status, 404);
        ck_assert_str_eq(e.code, "SNAPSHOT_NOT_FOUND");
        ck_assert_str_eq(e.message, "no such");
}
END_TEST

static Suite *codes_suite(void)
{
        Suite *s = suite_create("os_codes");
        TCase *tc = tcase_create("codes");

        tcase_add_test(tc, test_every_code_has_an_error_status_and_an_upper_case_name);
        tcase_add_test(tc, test_one_code_name_can_carry_several_statuses);
        tcase_add_test(tc, test_a_code_out_of_the_table_is_internal);
        tcase_add_test(tc, test_execd_routes_speak_execd_codes_for_the_same_kind);
        tcase_add_test(tc, test_some_kinds_mean_the_same_on_every_route);
        tcase_add_test(tc, test_file_errnos_are_missing_refused_retry_or_the_hosts_failure);
        tcase_add_test(tc, test_an_err_takes_its_status_and_code_from_the_table);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(codes_suite());
}
