/* test_exec_text.c: an exec's end in words (src/sandbox/exec.c): sh_exec_exit_text, the end of
 * an exec that ran, and sh_exec_failure_text, why one that never ran its command ended. */
#include <check.h>
#include <signal.h>

#include "sh/exec.h"
#include "unit.h"

static char out[160];

START_TEST(test_the_exit_text_says_the_kills_reason_first)
{
        sh_exec_exit x = {.code = 137, .signal = SIGKILL, .oom = true};

        sh_exec_exit_text(&x, "timed out", out, sizeof(out));
        ck_assert_str_eq(out, "timed out");
}
END_TEST

START_TEST(test_the_exit_text_names_the_oom_killer_then_the_signal_then_the_status)
{
        sh_exec_exit x = {.code = 137, .signal = SIGKILL, .oom = true};

        sh_exec_exit_text(&x, NULL, out, sizeof(out));
        ck_assert_str_eq(out, "killed by the OOM killer (the sandbox's memory limit)");
        x.oom = false;
        sh_exec_exit_text(&x, NULL, out, sizeof(out));
        ck_assert_str_eq(out, "killed by signal 9 (KILL)");
        x = (sh_exec_exit){.code = 3};
        sh_exec_exit_text(&x, NULL, out, sizeof(out));
        ck_assert_str_eq(out, "exit status 3");
}
END_TEST

START_TEST(test_a_failure_is_its_kills_reason_before_its_stderr)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_EXIT, .why = "interrupted"};

        sh_exec_failure_text(&ev, "oops\n", 5, out, sizeof(out));
        ck_assert_str_eq(out, "interrupted");
}
END_TEST

START_TEST(test_a_failure_quotes_its_stderr_without_newlines_or_controls)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_EXIT, .exit = {.code = 127}};
        char small[8];

        sh_exec_failure_text(&ev, "sh: a\tb\nnot found\r\n\n", 20, out, sizeof(out));
        ck_assert_str_eq(out, "sh: a b not found");
        sh_exec_failure_text(&ev, "0123456789", 10, small, sizeof(small));
        ck_assert_str_eq(small, "0123456"); /* cut to the room there is */
}
END_TEST

START_TEST(test_a_silent_failure_is_the_engines_error_or_the_exit_code)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_ERROR, .error = {.text = "the sandbox was deleted"}};

        sh_exec_failure_text(&ev, "\n", 1, out, sizeof(out));
        ck_assert_str_eq(out, "the sandbox was deleted");
        ev.error.text = NULL;
        sh_exec_failure_text(&ev, NULL, 0, out, sizeof(out));
        ck_assert_str_eq(out, "the command ended");
        ev = (sh_exec_event){.type = SH_EXEC_EV_EXIT, .exit = {.code = 126}};
        sh_exec_failure_text(&ev, NULL, 0, out, sizeof(out));
        ck_assert_str_eq(out, "the command could not start (exit 126)");
}
END_TEST

static Suite *exec_text_suite(void)
{
        Suite *s = suite_create("exec_text");
        TCase *tc = tcase_create("text");

        tcase_add_test(tc, test_the_exit_text_says_the_kills_reason_first);
        tcase_add_test(tc, test_the_exit_text_names_the_oom_killer_then_the_signal_then_the_status);
        tcase_add_test(tc, test_a_failure_is_its_kills_reason_before_its_stderr);
        tcase_add_test(tc, test_a_failure_quotes_its_stderr_without_newlines_or_controls);
        tcase_add_test(tc, test_a_silent_failure_is_the_engines_error_or_the_exit_code);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(exec_text_suite());
}
