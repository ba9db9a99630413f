/* test_env_shape.c: the shape of a command's env (src/sandbox/sandbox.c: sh_env_shape_why),
 * which both surfaces' bodies are judged by. */
#include <check.h>

#include "sh/sandbox.h"
#include "sh/util.h"
#include "unit.h"

static const char *why_of(const char *json)
{
        static const char *why;
        _cleanup_cjson_ cJSON *o = cJSON_Parse(json);

        ck_assert_ptr_nonnull(o);
        why = sh_env_shape_why(o);
        return why;
}

START_TEST(test_no_env_and_an_object_of_strings_are_an_env)
{
        ck_assert_ptr_null(sh_env_shape_why(NULL));
        ck_assert_ptr_null(why_of("{}"));
        ck_assert_ptr_null(why_of("{\"A\":\"1\",\"B_2\":\"\"}"));
}
END_TEST

START_TEST(test_anything_but_an_object_of_strings_is_refused)
{
        ck_assert_str_eq(why_of("[\"A=1\"]"), "is an object of strings");
        ck_assert_str_eq(why_of("\"A=1\""), "is an object of strings");
        ck_assert_str_eq(why_of("{\"A\":1}"), "is an object of strings");
        ck_assert_str_eq(why_of("{\"A\":\"1\",\"B\":null}"), "is an object of strings");
}
END_TEST

START_TEST(test_a_name_empty_or_holding_an_equals_sign_is_refused)
{
        ck_assert_str_eq(why_of("{\"\":\"1\"}"), "names are non-empty and hold no '='");
        ck_assert_str_eq(why_of("{\"A=B\":\"1\"}"), "names are non-empty and hold no '='");
}
END_TEST

static Suite *env_shape_suite(void)
{
        Suite *s = suite_create("env_shape");
        TCase *tc = tcase_create("shape");

        tcase_add_test(tc, test_no_env_and_an_object_of_strings_are_an_env);
        tcase_add_test(tc, test_anything_but_an_object_of_strings_is_refused);
        tcase_add_test(tc, test_a_name_empty_or_holding_an_equals_sign_is_refused);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(env_shape_suite());
}
