/* test_error.c: error kinds (each errno's kind, explicit kinds, names) and the native
 * surface's mapping of every kind to CONTRACT.md section 8's status and type. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sh/error.h"
#include "sh/native.h"

START_TEST(test_errno_gives_its_kind)
{
        static const struct {
                int errnum;
                sh_error_kind kind;
        } cases[] = {
                {ENOENT, SH_E_NOT_FOUND},
                {EEXIST, SH_E_EXISTS},
                {EISDIR, SH_E_IS_A_DIRECTORY},
                {ENOTDIR, SH_E_NOT_A_DIRECTORY},
                {EINVAL, SH_E_INVALID},
                {ENOTEMPTY, SH_E_INVALID},
                {ELOOP, SH_E_INVALID},
                {ENAMETOOLONG, SH_E_INVALID},
                {EXDEV, SH_E_INVALID},
                {EBADMSG, SH_E_INVALID},
                {EFBIG, SH_E_TOO_LARGE},
                {ENOSPC, SH_E_NO_SPACE},
                {EDQUOT, SH_E_NO_SPACE},
                {EAGAIN, SH_E_UNAVAILABLE},
                {EMFILE, SH_E_UNAVAILABLE},
                {ENFILE, SH_E_UNAVAILABLE},
                {EBUSY, SH_E_BUSY},
                {EIO, SH_E_INTERNAL},
                {EACCES, SH_E_INTERNAL},
                {ENOMEM, SH_E_INTERNAL},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                sh_error *err = NULL;

                ck_assert_int_eq(sh_error_make(&err, cases[i].errnum, "x %d", 1), -cases[i].errnum);
                ck_assert_ptr_nonnull(err);
                ck_assert_int_eq(err->errnum, cases[i].errnum);
                ck_assert_msg(err->kind == cases[i].kind, "errno %d: kind %s", cases[i].errnum,
                              sh_error_kind_name(err->kind));
                ck_assert_str_eq(err->msg, "x 1");
                sh_error_release(&err);
                ck_assert_ptr_null(err);
        }
}
END_TEST

START_TEST(test_errno_zero_is_an_internal_eio)
{
        sh_error *err = NULL;

        ck_assert_int_eq(sh_error_make(&err, 0, "boom"), -EIO);
        ck_assert_int_eq(err->errnum, EIO);
        ck_assert_int_eq(err->kind, SH_E_INTERNAL);
        sh_error_release(&err);
}
END_TEST

START_TEST(test_named_kind_has_no_errno)
{
        sh_error *err = NULL;

        ck_assert_int_eq(sh_error_new(&err, SH_E_SANDBOX_NOT_FOUND, "gone %s", "now"), -1);
        ck_assert_int_eq(err->errnum, 0);
        ck_assert_int_eq(err->kind, SH_E_SANDBOX_NOT_FOUND);
        ck_assert_str_eq(err->msg, "gone now");
        ck_assert_int_eq(sh_error_wrap(&err, "ctx"), -1);
        ck_assert_str_eq(err->msg, "ctx: gone now");
        ck_assert_int_eq(err->kind, SH_E_SANDBOX_NOT_FOUND);
        sh_error_release(&err);
}
END_TEST

START_TEST(test_a_missing_error_is_internal)
{
        ck_assert_int_eq(sh_error_kind_of(NULL), SH_E_INTERNAL);
}
END_TEST

START_TEST(test_every_kind_has_a_distinct_name)
{
        for (int a = 0; a < SH_E_KIND_COUNT; a++) {
                ck_assert_ptr_nonnull(sh_error_kind_name((sh_error_kind)a));
                for (int b = a + 1; b < SH_E_KIND_COUNT; b++)
                        ck_assert_str_ne(sh_error_kind_name((sh_error_kind)a),
                                         sh_error_kind_name((sh_error_kind)b));
        }
        ck_assert_str_eq(sh_error_kind_name(SH_E_KIND_COUNT), "internal");
}
END_TEST

/* CONTRACT.md section 8, one row per kind. */
START_TEST(test_native_maps_every_kind_to_the_contract)
{
        static const struct {
                sh_error_kind kind;
                unsigned status;
                const char *type;
        } rows[] = {
                {SH_E_INTERNAL, 500, "Internal"},
                {SH_E_INVALID, 400, "BadRequest"},
                {SH_E_NOT_FOUND, 404, "FileNotFoundError"},
                {SH_E_EXISTS, 400, "FileExistsError"},
                {SH_E_IS_A_DIRECTORY, 400, "IsADirectoryError"},
                {SH_E_NOT_A_DIRECTORY, 400, "NotADirectoryError"},
                {SH_E_TOO_LARGE, 413, "PayloadTooLarge"},
                {SH_E_NO_SPACE, 500, "Internal"},
                {SH_E_UNAVAILABLE, 503, "Unavailable"},
                {SH_E_BUSY, 503, "Unavailable"},
                {SH_E_SANDBOX_NOT_FOUND, 404, "SandboxNotFound"},
                {SH_E_PERSIST_FAILED, 500, "PersistFailed"},
                {SH_E_CANCELLED, 500, "Cancelled"},
                {SH_E_SETTING, 500, "InvalidSetting"},
                {SH_E_NO_ROUTE, 404, "NotFound"},
                {SH_E_METHOD_NOT_ALLOWED, 405, "MethodNotAllowed"},
        };

        ck_assert_int_eq(sizeof(rows) / sizeof(rows[0]), SH_E_KIND_COUNT);
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                ck_assert_uint_eq(sh_native_status(rows[i].kind), rows[i].status);
                ck_assert_str_eq(sh_native_type(rows[i].kind), rows[i].type);
        }
        ck_assert_uint_eq(sh_native_status(SH_E_KIND_COUNT), 500);
        ck_assert_str_eq(sh_native_type(SH_E_KIND_COUNT), "Internal");
}
END_TEST

static Suite *error_suite(void)
{
        Suite *s = suite_create("error");
        TCase *tc = tcase_create("error");

        tcase_add_test(tc, test_errno_gives_its_kind);
        tcase_add_test(tc, test_errno_zero_is_an_internal_eio);
        tcase_add_test(tc, test_named_kind_has_no_errno);
        tcase_add_test(tc, test_a_missing_error_is_internal);
        tcase_add_test(tc, test_every_kind_has_a_distinct_name);
        tcase_add_test(tc, test_native_maps_every_kind_to_the_contract);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(error_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
