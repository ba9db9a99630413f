/* test_codeframe.c: the frames of a code driver's fd 3 (src/code/codeframe.c): the five shapes
 * decoded, anything else refused whole (the cell's code can write there), the bounds, the
 * languages and the argv that starts a driver (src/code/codedrivers.c), and the splitter of the
 * pipe into lines with its bound. */
#include <check.h>
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/codedrivers.h"
#include "sh/codeframe.h"
#include "unit.h"

#define BUNDLE_MAX 4096u

static int parse(const char *line, sh_code_frame *f)
{
        return sh_code_frame_parse(line, strlen(line), BUNDLE_MAX, f);
}

/* The line is refused, and the frame left zeroed. */
static void refused(const char *line)
{
        sh_code_frame f;

        ck_assert_msg(parse(line, &f) == -1, "taken: %s", line);
        ck_assert_ptr_null(f.msg);
        ck_assert_ptr_null(f.bundle);
        ck_assert_ptr_null(f.ename);
        ck_assert_ptr_null(f.traceback);
}

START_TEST(test_ready_and_done_are_decoded)
{
        sh_code_frame f;

        ck_assert_int_eq(parse("{\"t\":\"ready\"}", &f), 0);
        ck_assert_int_eq(f.type, SH_CODE_FRAME_READY);
        sh_code_frame_done(&f);
        ck_assert_int_eq(parse(" { \"t\" : \"done\" } ", &f), 0);
        ck_assert_int_eq(f.type, SH_CODE_FRAME_DONE);
        sh_code_frame_done(&f);
}
END_TEST

START_TEST(test_fail_carries_its_message)
{
        sh_code_frame f;

        ck_assert_int_eq(parse("{\"t\":\"fail\",\"msg\":\"cwd '/x': No such file\"}", &f), 0);
        ck_assert_int_eq(f.type, SH_CODE_FRAME_FAIL);
        ck_assert_str_eq(f.msg, "cwd '/x': No such file");
        sh_code_frame_done(&f);
}
END_TEST

START_TEST(test_result_carries_its_bundle)
{
        sh_code_frame f;

        ck_assert_int_eq(parse("{\"t\":\"result\",\"data\":{\"text/plain\":\"42\","
                               "\"image/png\":\"iVBORw==\",\"application/json\":\"[1]\"}}",
                               &f),
                         0);
        ck_assert_int_eq(f.type, SH_CODE_FRAME_RESULT);
        ck_assert_int_eq(cJSON_GetArraySize(f.bundle), 3);
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(f.bundle, "text/plain")->valuestring,
                         "42");
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(f.bundle, "image/png")->valuestring,
                         "iVBORw==");
        sh_code_frame_done(&f);
        ck_assert_ptr_null(f.bundle);
}
END_TEST

START_TEST(test_error_carries_name_value_and_traceback_lines)
{
        sh_code_frame f;

        ck_assert_int_eq(parse("{\"t\":\"error\",\"ename\":\"ValueError\",\"evalue\":\"bad\\n2\","
                               "\"traceback\":[\"Traceback:\",\"ValueError: bad\"]}",
                               &f),
                         0);
        ck_assert_int_eq(f.type, SH_CODE_FRAME_ERROR);
        ck_assert_str_eq(f.ename, "ValueError");
        ck_assert_str_eq(f.evalue, "bad\n2");
        ck_assert_uint_eq(f.traceback_n, 2);
        ck_assert_str_eq(f.traceback[1], "ValueError: bad");
        sh_code_frame_done(&f);
        ck_assert_int_eq(parse("{\"t\":\"error\",\"ename\":\"CommandExecError\",\"evalue\":\"3\","
                               "\"traceback\":[]}",
                               &f),
                         0);
        ck_assert_uint_eq(f.traceback_n, 0);
        sh_code_frame_done(&f);
}
END_TEST

START_TEST(test_what_is_not_json_or_not_an_object_is_refused)
{
        refused("");
        refused("junk, not a frame");
        refused("{\"t\":\"ready\"");
        refused("{\"t\":\"ready\"} {\"t\":\"done\"}");
        refused("[\"ready\"]");
        refused("\"ready\"");
        refused("null");
}
END_TEST

START_TEST(test_an_unknown_type_or_a_type_not_a_string_is_refused)
{
        refused("{\"t\":\"hello\"}");
        refused("{\"t\":\"READY\"}");
        refused("{\"t\":1}");
        refused("{\"type\":\"ready\"}");
        refused("{}");
}
END_TEST

START_TEST(test_an_extra_or_repeated_key_is_refused)
{
        refused("{\"t\":\"ready\",\"x\":1}");
        refused("{\"t\":\"done\",\"t\":\"done\"}");
        refused("{\"t\":\"fail\",\"msg\":\"a\",\"msg\":\"b\"}");
        refused("{\"t\":\"result\",\"data\":{\"text/plain\":\"1\"},\"more\":true}");
        refused("{\"t\":\"error\",\"ename\":\"E\",\"evalue\":\"v\",\"traceback\":[],\"x\":0}");
}
END_TEST

START_TEST(test_a_missing_or_mistyped_field_is_refused)
{
        refused("{\"t\":\"fail\"}");
        refused("{\"t\":\"fail\",\"msg\":7}");
        refused("{\"t\":\"result\"}");
        refused("{\"t\":\"result\",\"data\":\"text\"}");
        refused("{\"t\":\"error\",\"ename\":\"E\",\"evalue\":\"v\"}");
        refused("{\"t\":\"error\",\"ename\":\"E\",\"evalue\":1,\"traceback\":[]}");
        refused("{\"t\":\"error\",\"ename\":\"E\",\"evalue\":\"v\",\"traceback\":\"x\"}");
        refused("{\"t\":\"error\",\"ename\":\"E\",\"evalue\":\"v\",\"traceback\":[\"a\",2]}");
        refused("{\"t\":\"error\",\"ename\":\"\",\"evalue\":\"v\",\"traceback\":[]}");
}
END_TEST

START_TEST(test_a_bundle_key_that_is_not_a_mime_type_is_refused)
{
        refused("{\"t\":\"result\",\"data\":{\"plain\":\"1\"}}");
        refused("{\"t\":\"result\",\"data\":{\"text/\":\"1\"}}");
        refused("{\"t\":\"result\",\"data\":{\"/plain\":\"1\"}}");
        refused("{\"t\":\"result\",\"data\":{\"text/pl ain\":\"1\"}}");
        refused("{\"t\":\"result\",\"data\":{\"text/plain; charset=utf-8\":\"1\"}}");
        refused("{\"t\":\"result\",\"data\":{\"a/b/c\":\"1\"}}");
}
END_TEST

START_TEST(test_a_bundle_empty_or_with_a_value_not_a_string_or_a_key_twice_is_refused)
{
        refused("{\"t\":\"result\",\"data\":{}}");
        refused("{\"t\":\"result\",\"data\":{\"text/plain\":1}}");
        refused("{\"t\":\"result\",\"data\":{\"text/plain\":{\"a\":\"b\"}}}");
        refused("{\"t\":\"result\",\"data\":{\"text/plain\":\"1\",\"Text/Plain\":\"2\"}}");
}
END_TEST

START_TEST(test_a_bundle_over_its_bound_is_refused_and_one_at_it_taken)
{
        /* "text/plain" is 10 bytes: a value of BUNDLE_MAX - 10 bytes fills the bound. */
        size_t fill = BUNDLE_MAX - 10;
        char *line = malloc(BUNDLE_MAX + 64);
        sh_code_frame f;
        int n;

        n = sprintf(line, "{\"t\":\"result\",\"data\":{\"text/plain\":\"");
        memset(line + n, 'a', fill);
        strcpy(line + n + fill, "\"}}");
        ck_assert_int_eq(parse(line, &f), 0);
        sh_code_frame_done(&f);
        memset(line + n, 'a', fill + 1);
        strcpy(line + n + fill + 1, "\"}}");
        refused(line);
        free(line);
}
END_TEST

START_TEST(test_a_traceback_over_its_line_count_is_refused)
{
        size_t cap = 64 + 4 * (SH_CODE_TRACEBACK_MAX + 1);
        char *line = malloc(cap);
        size_t k = (size_t)sprintf(line, "{\"t\":\"error\",\"ename\":\"E\",\"evalue\":\"v\","
                                         "\"traceback\":[");
        sh_code_frame f;

        for (unsigned i = 0; i < SH_CODE_TRACEBACK_MAX; i++)
                k += (size_t)sprintf(line + k, "%s\"\"", i ? "," : "");
        strcpy(line + k, "]}");
        ck_assert_int_eq(parse(line, &f), 0);
        ck_assert_uint_eq(f.traceback_n, SH_CODE_TRACEBACK_MAX);
        sh_code_frame_done(&f);
        strcpy(line + k, ",\"\"]}");
        refused(line);
        free(line);
}
END_TEST

START_TEST(test_an_error_over_its_bytes_is_refused)
{
        size_t big = SH_CODE_ERROR_MAX;
        char *line = malloc(big + 128);
        int n = sprintf(line, "{\"t\":\"error\",\"ename\":\"E\",\"evalue\":\"");

        memset(line + n, 'v', big);
        strcpy(line + n + big, "\",\"traceback\":[]}");
        refused(line); /* ename's byte and evalue's: one past the bound */
        free(line);
}
END_TEST

START_TEST(test_text_not_utf8_or_with_a_nul_is_refused)
{
        sh_code_frame f;
        static const char nul[] = "{\"t\":\"fail\",\"msg\":\"a\0b\"}";

        refused("{\"t\":\"fail\",\"msg\":\"\xff\"}");
        refused("{\"t\":\"fail\",\"msg\":\"a\\u0000b\"}");
        refused("{\"t\":\"fail\",\"msg\":\"\\udc80\"}");
        refused("{\"t\":\"fail\",\"msg\":\"a\tb\"}"); /* a raw control character */
        ck_assert_int_eq(sh_code_frame_parse(nul, sizeof(nul) - 1, BUNDLE_MAX, &f), -1);
}
END_TEST

START_TEST(test_a_line_is_read_only_within_its_length)
{
        sh_code_frame f;
        static const char two[] = "{\"t\":\"done\"}{\"t\":\"ready\"}";

        ck_assert_int_eq(sh_code_frame_parse(two, 12, BUNDLE_MAX, &f), 0);
        ck_assert_int_eq(f.type, SH_CODE_FRAME_DONE);
        ck_assert_int_eq(sh_code_frame_parse(two, 11, BUNDLE_MAX, &f), -1);
}
END_TEST

START_TEST(test_a_fail_message_over_its_bound_is_refused)
{
        char *line = malloc(SH_CODE_FAIL_MSG_MAX + 64);
        int n = sprintf(line, "{\"t\":\"fail\",\"msg\":\"");

        memset(line + n, 'm', SH_CODE_FAIL_MSG_MAX + 1);
        strcpy(line + n + SH_CODE_FAIL_MSG_MAX + 1, "\"}");
        refused(line);
        free(line);
}
END_TEST

/* ---- the splitter ------------------------------------------------------------------------ */

START_TEST(test_the_splitter_gives_complete_lines_across_appends)
{
        sh_code_framebuf b;
        const char *l;
        size_t n;

        sh_code_framebuf_init(&b, 64);
        ck_assert_int_eq(sh_code_framebuf_append(&b, "{\"t\":\"re", 8), 0);
        ck_assert_int_eq(sh_code_framebuf_take(&b, &l, &n), 0);
        ck_assert_uint_eq(sh_code_framebuf_pending(&b), 8);
        ck_assert_int_eq(sh_code_framebuf_append(&b, "ady\"}\nab\n\ncd", 12), 0);
        ck_assert_int_eq(sh_code_framebuf_take(&b, &l, &n), 1);
        ck_assert_uint_eq(n, 13);
        ck_assert(memcmp(l, "{\"t\":\"ready\"}", 13) == 0);
        ck_assert_int_eq(sh_code_framebuf_take(&b, &l, &n), 1);
        ck_assert(n == 2 && memcmp(l, "ab", 2) == 0);
        ck_assert_int_eq(sh_code_framebuf_take(&b, &l, &n), 1);
        ck_assert_uint_eq(n, 0);
        ck_assert_int_eq(sh_code_framebuf_take(&b, &l, &n), 0);
        ck_assert_uint_eq(sh_code_framebuf_pending(&b), 2);
        ck_assert_int_eq(sh_code_framebuf_append(&b, "\n", 1), 0);
        ck_assert_int_eq(sh_code_framebuf_take(&b, &l, &n), 1);
        ck_assert(n == 2 && memcmp(l, "cd", 2) == 0);
        ck_assert_uint_eq(sh_code_framebuf_pending(&b), 0);
        sh_code_framebuf_done(&b);
}
END_TEST

START_TEST(test_the_splitter_takes_an_empty_append_as_nothing)
{
        sh_code_framebuf b;
        const char *l;
        size_t n;

        sh_code_framebuf_init(&b, 16);
        ck_assert_int_eq(sh_code_framebuf_append(&b, "", 0), 0);
        ck_assert_int_eq(sh_code_framebuf_take(&b, &l, &n), 0);
        ck_assert_uint_eq(sh_code_framebuf_pending(&b), 0);
        sh_code_framebuf_done(&b);
}
END_TEST

START_TEST(test_the_splitter_takes_a_line_of_exactly_its_bound)
{
        sh_code_framebuf b;
        char line[17];
        const char *l;
        size_t n;

        memset(line, 'x', 16);
        line[16] = '\n';
        sh_code_framebuf_init(&b, 16);
        ck_assert_int_eq(sh_code_framebuf_append(&b, line, 17), 0);
        ck_assert_int_eq(sh_code_framebuf_take(&b, &l, &n), 1);
        ck_assert_uint_eq(n, 16);
        sh_code_framebuf_done(&b);
}
END_TEST

START_TEST(test_the_splitter_breaks_on_a_complete_line_over_its_bound)
{
        sh_code_framebuf b;
        char line[18];
        const char *l;
        size_t n;

        memset(line, 'x', 17);
        line[17] = '\n';
        sh_code_framebuf_init(&b, 16);
        ck_assert_int_eq(sh_code_framebuf_append(&b, "ok\n", 3), 0);
        ck_assert_int_eq(sh_code_framebuf_append(&b, line, 18), -1);
        ck_assert_int_eq(sh_code_framebuf_take(&b, &l, &n), -1);
        ck_assert_int_eq(sh_code_framebuf_append(&b, "ok\n", 3), -1);
        sh_code_framebuf_done(&b);
}
END_TEST

START_TEST(test_the_splitter_breaks_on_an_open_line_over_its_bound_as_it_grows)
{
        sh_code_framebuf b;
        const char *l;
        size_t n;

        sh_code_framebuf_init(&b, 16);
        for (int i = 0; i < 4; i++)
                ck_assert_int_eq(sh_code_framebuf_append(&b, "xxxx", 4), 0);
        ck_assert_int_eq(sh_code_framebuf_append(&b, "x", 1), -1);
        ck_assert_int_eq(sh_code_framebuf_take(&b, &l, &n), -1);
        ck_assert_ptr_null(b.buf.p); /* what it held is dropped */
        sh_code_framebuf_done(&b);
}
END_TEST

/* ---- languages and argv ------------------------------------------------------------------ */

START_TEST(test_the_three_languages_parse_and_nothing_else)
{
        sh_code_lang l = SH_CODE_BASH;

        ck_assert_int_eq(sh_code_lang_parse("python", &l), 0);
        ck_assert_int_eq(l, SH_CODE_PYTHON);
        ck_assert_int_eq(sh_code_lang_parse("javascript", &l), 0);
        ck_assert_int_eq(l, SH_CODE_JAVASCRIPT);
        ck_assert_int_eq(sh_code_lang_parse("bash", &l), 0);
        ck_assert_int_eq(l, SH_CODE_BASH);
        ck_assert_int_eq(sh_code_lang_parse("Python", &l), -1);
        ck_assert_int_eq(sh_code_lang_parse("python3", &l), -1);
        ck_assert_int_eq(sh_code_lang_parse("", &l), -1);
        ck_assert_int_eq(sh_code_lang_parse(NULL, &l), -1);
        ck_assert_int_eq(l, SH_CODE_BASH);
        ck_assert_str_eq(sh_code_lang_name(SH_CODE_JAVASCRIPT), "javascript");
        ck_assert_str_eq(sh_code_interpreter(SH_CODE_JAVASCRIPT), "node");
        ck_assert_ptr_null(sh_code_driver_source((sh_code_lang)7));
}
END_TEST

START_TEST(test_every_driver_is_embedded_and_names_its_language)
{
        ck_assert_ptr_nonnull(strstr(sh_code_driver_source(SH_CODE_PYTHON), "driver for Python"));
        ck_assert_ptr_nonnull(
                strstr(sh_code_driver_source(SH_CODE_JAVASCRIPT), "driver for JavaScript"));
        ck_assert_ptr_nonnull(strstr(sh_code_driver_source(SH_CODE_BASH), "driver for bash"));
}
END_TEST

START_TEST(test_the_argv_is_the_seams_for_each_language)
{
        char buf[SH_CODE_ARGV_BUF], *argv[8];

        ck_assert_int_eq(sh_code_driver_argv(SH_CODE_PYTHON, "/w", 8388608, buf, sizeof(buf), argv),
                         0);
        ck_assert_str_eq(argv[0], "python3");
        ck_assert_str_eq(argv[1], "-c");
        ck_assert_ptr_eq(argv[2], sh_code_driver_source(SH_CODE_PYTHON));
        ck_assert_str_eq(argv[3], "sandbox-host-code");
        ck_assert_str_eq(argv[4], "/w");
        ck_assert_str_eq(argv[5], "8388608");
        ck_assert_ptr_null(argv[6]);
        ck_assert_int_eq(
                sh_code_driver_argv(SH_CODE_JAVASCRIPT, "", UINT64_MAX, buf, sizeof(buf), argv), 0);
        ck_assert_str_eq(argv[0], "node");
        ck_assert_str_eq(argv[1], "-e");
        ck_assert_str_eq(argv[3], "");
        ck_assert_str_eq(argv[4], "18446744073709551615");
        ck_assert_ptr_null(argv[5]);
        ck_assert_int_eq(sh_code_driver_argv(SH_CODE_BASH, "/w", 1, buf, sizeof(buf), argv), 0);
        ck_assert_str_eq(argv[0], "bash");
        ck_assert_str_eq(argv[3], "sandbox-host-code");
        ck_assert_ptr_null(argv[6]);
}
END_TEST

START_TEST(test_the_argv_refuses_a_small_buffer_or_an_unknown_language)
{
        char buf[SH_CODE_ARGV_BUF], *argv[8] = {0};

        ck_assert_int_eq(sh_code_driver_argv(SH_CODE_BASH, "/w", 1, buf, 4, argv), -1);
        ck_assert_int_eq(sh_code_driver_argv((sh_code_lang)3, "/w", 1, buf, sizeof(buf), argv), -1);
        ck_assert_int_eq(sh_code_driver_argv(SH_CODE_BASH, NULL, 1, buf, sizeof(buf), argv), -1);
        ck_assert_ptr_null(argv[0]);
}
END_TEST

static Suite *codeframe_suite(void)
{
        Suite *s = suite_create("codeframe");
        TCase *tc = tcase_create("frames");

        tcase_add_test(tc, test_ready_and_done_are_decoded);
        tcase_add_test(tc, test_fail_carries_its_message);
        tcase_add_test(tc, test_result_carries_its_bundle);
        tcase_add_test(tc, test_error_carries_name_value_and_traceback_lines);
        tcase_add_test(tc, test_what_is_not_json_or_not_an_object_is_refused);
        tcase_add_test(tc, test_an_unknown_type_or_a_type_not_a_string_is_refused);
        tcase_add_test(tc, test_an_extra_or_repeated_key_is_refused);
        tcase_add_test(tc, test_a_missing_or_mistyped_field_is_refused);
        tcase_add_test(tc, test_a_bundle_key_that_is_not_a_mime_type_is_refused);
        tcase_add_test(tc,
                       test_a_bundle_empty_or_with_a_value_not_a_string_or_a_key_twice_is_refused);
        tcase_add_test(tc, test_a_bundle_over_its_bound_is_refused_and_one_at_it_taken);
        tcase_add_test(tc, test_a_traceback_over_its_line_count_is_refused);
        tcase_add_test(tc, test_an_error_over_its_bytes_is_refused);
        tcase_add_test(tc, test_text_not_utf8_or_with_a_nul_is_refused);
        tcase_add_test(tc, test_a_line_is_read_only_within_its_length);
        tcase_add_test(tc, test_a_fail_message_over_its_bound_is_refused);
        suite_add_tcase(s, tc);
        tc = tcase_create("splitter");
        tcase_add_test(tc, test_the_splitter_gives_complete_lines_across_appends);
        tcase_add_test(tc, test_the_splitter_takes_an_empty_append_as_nothing);
        tcase_add_test(tc, test_the_splitter_takes_a_line_of_exactly_its_bound);
        tcase_add_test(tc, test_the_splitter_breaks_on_a_complete_line_over_its_bound);
        tcase_add_test(tc, test_the_splitter_breaks_on_an_open_line_over_its_bound_as_it_grows);
        suite_add_tcase(s, tc);
        tc = tcase_create("drivers");
        tcase_add_test(tc, test_the_three_languages_parse_and_nothing_else);
        tcase_add_test(tc, test_every_driver_is_embedded_and_names_its_language);
        tcase_add_test(tc, test_the_argv_is_the_seams_for_each_language);
        tcase_add_test(tc, test_the_argv_refuses_a_small_buffer_or_an_unknown_language);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(codeframe_suite());
}
