/* test_log.c: sh/log.h's tap: which lines reach it, at which levels, and not twice. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sh/log.h"
#include "unit.h"

typedef struct seen {
        int n;
        char sandbox[8][40];
        char line[8][512];
} seen;

static void tap(const char *sandbox, const char *line, size_t len, void *data)
{
        seen *s = data;

        ck_assert_uint_eq(strlen(line), len);
        if (s->n < 8) {
                snprintf(s->sandbox[s->n], sizeof(s->sandbox[0]), "%s", sandbox);
                snprintf(s->line[s->n], sizeof(s->line[0]), "%s", line);
        }
        s->n++;
}

/* A tap that logs about the same sandbox from inside the tap. */
static void loud_tap(const char *sandbox, const char *line, size_t len, void *data)
{
        tap(sandbox, line, len, data);
        log_info("tap-echo", sandbox, "from the tap");
}

static int saved_stderr = -1;

/* The lines on stderr are not looked at: they go to /dev/null. */
static void quiet(void)
{
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        saved_stderr = dup(2);
        ck_assert_int_ge(dup2(fd, 2), 0);
        close(fd);
}

static sh_log_tap the_tap;

static void set_tap(sh_log_tap_fn fn, void *data)
{
        sh_log_tap_remove(&the_tap);
        the_tap = (sh_log_tap){.fn = fn, .data = data};
        if (fn)
                sh_log_tap_add(&the_tap);
}

static void loud(void)
{
        set_tap(NULL, NULL);
        sh_log_set_level(SH_LOG_INFO);
        dup2(saved_stderr, 2);
        close(saved_stderr);
}

START_TEST(test_tap_sees_only_lines_that_name_a_sandbox)
{
        seen s = {0};

        quiet();
        set_tap(tap, &s);
        log_info("created", "abc", "made %d", 1);
        log_info("no-sandbox", NULL, "nothing");
        log_warn("warned", "def", "careful");
        loud();
        ck_assert_int_eq(s.n, 2);
        ck_assert_str_eq(s.sandbox[0], "abc");
        ck_assert_ptr_nonnull(strstr(s.line[0], "\"event\":\"created\""));
        ck_assert_ptr_nonnull(strstr(s.line[0], "\"msg\":\"made 1\""));
        ck_assert_ptr_nonnull(strstr(s.line[0], "\"time\":\""));
        ck_assert_ptr_null(strchr(s.line[0], '\n'));
        ck_assert_str_eq(s.sandbox[1], "def");
}
END_TEST

START_TEST(test_tap_sees_info_lines_whatever_the_stderr_level)
{
        seen s = {0};

        quiet();
        sh_log_set_level(SH_LOG_ERROR);
        set_tap(tap, &s);
        log_info("created", "abc", "made");
        log_debug("detail", "abc", "debug is off");
        sh_log_request("GET", "/x", 200, 1.5, "abc");
        sh_log_request("GET", "/y", 200, 1.5, NULL);
        loud();
        ck_assert_int_eq(s.n, 2);
        ck_assert_ptr_nonnull(strstr(s.line[0], "\"event\":\"created\""));
        ck_assert_ptr_nonnull(strstr(s.line[1], "\"path\":\"/x\""));
}
END_TEST

START_TEST(test_tap_sees_debug_lines_when_debug_is_on)
{
        seen s = {0};

        quiet();
        sh_log_set_level(SH_LOG_DEBUG);
        set_tap(tap, &s);
        log_debug("detail", "abc", "debug is on");
        loud();
        ck_assert_int_eq(s.n, 1);
}
END_TEST

START_TEST(test_a_line_logged_by_the_tap_is_not_tapped_again)
{
        seen s = {0};

        quiet();
        set_tap(loud_tap, &s);
        log_info("created", "abc", "made");
        loud();
        ck_assert_int_eq(s.n, 1);
}
END_TEST

START_TEST(test_two_taps_both_see_a_line)
{
        seen s = {0}, t = {0};
        sh_log_tap other = {.fn = tap, .data = &t};

        quiet();
        set_tap(tap, &s);
        sh_log_tap_add(&other);
        log_info("created", "abc", "made");
        sh_log_tap_remove(&other);
        sh_log_tap_remove(&other);
        log_info("created", "abc", "made again");
        loud();
        ck_assert_int_eq(s.n, 2);
        ck_assert_int_eq(t.n, 1);
}
END_TEST

static bool wants_abc(const char *sandbox, void *data)
{
        (void)data;
        return strcmp(sandbox, "abc") == 0;
}

START_TEST(test_a_tap_sees_only_the_sandboxes_it_wants)
{
        seen s = {0}, t = {0};
        sh_log_tap picky = {.fn = tap, .wants = wants_abc, .data = &t};

        quiet();
        sh_log_set_level(SH_LOG_ERROR);
        set_tap(tap, &s);
        sh_log_tap_add(&picky);
        sh_log_request("GET", "/a", 200, 1.0, "abc");
        sh_log_request("GET", "/b", 200, 1.0, "other");
        log_info("created", "other", "made");
        sh_log_tap_remove(&picky);
        loud();
        ck_assert_int_eq(s.n, 3);
        ck_assert_int_eq(t.n, 1);
        ck_assert_ptr_nonnull(strstr(t.line[0], "\"path\":\"/a\""));
}
END_TEST

START_TEST(test_no_tap_after_it_is_removed)
{
        seen s = {0};

        quiet();
        set_tap(tap, &s);
        set_tap(NULL, NULL);
        log_info("created", "abc", "made");
        loud();
        ck_assert_int_eq(s.n, 0);
}
END_TEST

static Suite *log_suite(void)
{
        Suite *s = suite_create("log");
        TCase *tc = tcase_create("tap");

        tcase_add_test(tc, test_tap_sees_only_lines_that_name_a_sandbox);
        tcase_add_test(tc, test_tap_sees_info_lines_whatever_the_stderr_level);
        tcase_add_test(tc, test_tap_sees_debug_lines_when_debug_is_on);
        tcase_add_test(tc, test_a_line_logged_by_the_tap_is_not_tapped_again);
        tcase_add_test(tc, test_two_taps_both_see_a_line);
        tcase_add_test(tc, test_a_tap_sees_only_the_sandboxes_it_wants);
        tcase_add_test(tc, test_no_tap_after_it_is_removed);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(log_suite());
}
