/* test_native_input.c: the native surface's pure input rules (native/input.c,
 * native/api_sandbox.c): a JSON body as text (empty is {}, an object, byte-string paths through
 * surrogate escapes) and the fields of a create body (CONTRACT.md 2.1). The same rules over
 * HTTP are the contract tier's (tests/contract). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "sh/native.h"
#include "unit.h"

/* The body `text` through sh_native_json_text: the object, or NULL with why. */
static cJSON *body_of(const char *text, char *why, size_t why_size)
{
        size_t n = strlen(text);
        char *copy = malloc(n + 1);
        cJSON *j;

        ck_assert_ptr_nonnull(copy);
        memcpy(copy, text, n + 1);
        j = sh_native_json_text(copy, n, why, why_size);
        free(copy);
        return j;
}

/* The body `text` is the empty object. */
static void assert_empty_object(const char *text)
{
        char why[128];
        cJSON *j = body_of(text, why, sizeof(why));

        ck_assert(cJSON_IsObject(j));
        ck_assert_ptr_null(j->child);
        cJSON_Delete(j);
}

START_TEST(test_an_empty_body_is_an_empty_object)
{
        assert_empty_object("");
}
END_TEST

START_TEST(test_a_whitespace_body_is_an_empty_object)
{
        assert_empty_object(" \r\n\t ");
}
END_TEST

START_TEST(test_a_body_that_is_no_object_is_refused)
{
        char why[128];

        ck_assert_ptr_null(body_of("[1, 2]", why, sizeof(why)));
        ck_assert_str_eq(why, "the body must be a JSON object");
}
END_TEST

START_TEST(test_a_body_that_is_no_json_is_refused_saying_why)
{
        char why[128];

        ck_assert_ptr_null(body_of("{\"a\": 1} {}", why, sizeof(why)));
        ck_assert_str_eq(why, "the body is not valid JSON");
}
END_TEST

START_TEST(test_a_surrogate_escape_is_the_raw_byte)
{
        char why[128];
        cJSON *j = body_of("{\"path\": \"/tmp/\\udcff\"}", why, sizeof(why));
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "path");

        ck_assert(cJSON_IsString(p));
        ck_assert_str_eq(p->valuestring, "/tmp/\xff");
        cJSON_Delete(j);
}
END_TEST

/* The create fields of `text` (an object): 0 and o, or -1 and why. */
static int create_opts(const char *text, cJSON **ret_body, sh_create_opts *o, const char **why)
{
        *ret_body = cJSON_Parse(text);
        ck_assert(cJSON_IsObject(*ret_body));
        return sh_native_create_opts(*ret_body, o, why);
}

START_TEST(test_create_fields_absent_or_null_are_none)
{
        sh_create_opts o = {.image = "x", .item_id = "x"};
        const char *why = NULL;
        cJSON *body;

        ck_assert_int_eq(
                create_opts("{\"image\": null, \"env\": null, \"item_id\": null}", &body, &o, &why),
                0);
        ck_assert_ptr_null(o.image);
        ck_assert_ptr_null(o.env);
        ck_assert_ptr_null(o.item_id);
        cJSON_Delete(body);
}
END_TEST

START_TEST(test_create_fields_point_into_the_body)
{
        sh_create_opts o = {0};
        const char *why = NULL;
        cJSON *body;

        ck_assert_int_eq(create_opts("{\"image\": \"py\", \"env\": {\"A\": \"1\"}, "
                                     "\"exposed_ports\": [8080], \"item_id\": \"task-1\"}",
                                     &body, &o, &why),
                         0);
        ck_assert_str_eq(o.image, "py");
        ck_assert_ptr_eq(o.env, cJSON_GetObjectItemCaseSensitive(body, "env"));
        ck_assert_str_eq(o.item_id, "task-1");
        cJSON_Delete(body);
}
END_TEST

/* A create body `text` is refused, saying `why`. */
static void assert_create_refused(const char *text, const char *why)
{
        sh_create_opts o = {0};
        const char *got = NULL;
        cJSON *body;

        ck_assert_int_eq(create_opts(text, &body, &o, &got), -1);
        ck_assert_str_eq(got, why);
        cJSON_Delete(body);
}

START_TEST(test_create_image_that_is_no_string_is_refused)
{
        assert_create_refused("{\"image\": 1}", "'image' must be a string");
}
END_TEST

START_TEST(test_create_env_with_a_value_that_is_no_string_is_refused)
{
        assert_create_refused("{\"env\": {\"A\": 1}}", "'env' must be an object of strings");
}
END_TEST

START_TEST(test_create_exposed_ports_that_is_no_list_is_refused)
{
        assert_create_refused("{\"exposed_ports\": 8080}", "'exposed_ports' must be a list");
}
END_TEST

START_TEST(test_create_item_id_out_of_its_syntax_is_refused)
{
        assert_create_refused("{\"item_id\": \"-x\"}",
                              "'item_id' must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}");
}
END_TEST

static Suite *native_input_suite(void)
{
        Suite *s = suite_create("native_input");
        TCase *tc = tcase_create("native_input");

        tcase_add_test(tc, test_an_empty_body_is_an_empty_object);
        tcase_add_test(tc, test_a_whitespace_body_is_an_empty_object);
        tcase_add_test(tc, test_a_body_that_is_no_object_is_refused);
        tcase_add_test(tc, test_a_body_that_is_no_json_is_refused_saying_why);
        tcase_add_test(tc, test_a_surrogate_escape_is_the_raw_byte);
        tcase_add_test(tc, test_create_fields_absent_or_null_are_none);
        tcase_add_test(tc, test_create_fields_point_into_the_body);
        tcase_add_test(tc, test_create_image_that_is_no_string_is_refused);
        tcase_add_test(tc, test_create_env_with_a_value_that_is_no_string_is_refused);
        tcase_add_test(tc, test_create_exposed_ports_that_is_no_list_is_refused);
        tcase_add_test(tc, test_create_item_id_out_of_its_syntax_is_refused);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(native_input_suite());
}
