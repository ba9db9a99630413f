/* test_exec_engine.c: the sandbox layer's exec mechanisms on real sandboxes, with the services
 * in this thread and no transport (wire_services_start): an exec's timeout and the reason of
 * its kill. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "sh/exec.h"
#include "sh/sandbox.h"
#include "unit.h"
#include "wire_helpers.h"

#define WAIT_MS 20000 /* a bound on every wait for an exec's end, never a speed */

static sh_loop *loop;
static sh_manager *mgr;
static sh_sandbox *sb;

static void setup(void)
{
        mgr = wire_services_start(NULL, &loop);
        sb = wire_sandbox();
}

static void teardown(void)
{
        sh_sandbox_unref(sb);
        wire_services_stop();
}

/* What one consumer of an exec saw. */
typedef struct seen {
        sh_exec *e;
        bool ended;
        sh_exec_event_type end; /* EXIT or ERROR */
        int code;
        char why[128]; /* the end's `why`, "" when NULL */
        char out[256];
        size_t out_len;
} seen;

static void on_event(sh_exec *e, const sh_exec_event *ev, void *data)
{
        seen *s = data;
        size_t room = sizeof(s->out) - 1 - s->out_len;

        if (ev->type == SH_EXEC_EV_CHUNK) {
                size_t n = ev->chunk.len < room ? ev->chunk.len : room;

                memcpy(s->out + s->out_len, ev->chunk.data, n);
                s->out_len += n;
                return;
        }
        if (ev->type == SH_EXEC_EV_HEARTBEAT)
                return;
        s->ended = true;
        s->end = ev->type;
        s->code = ev->type == SH_EXEC_EV_EXIT ? ev->exit.code : -1;
        snprintf(s->why, sizeof(s->why), "%s", ev->why ? ev->why : "");
        sh_exec_detach(TAKE_PTR(s->e));
}

static bool ended(void *data)
{
        return ((seen *)data)->ended;
}

static bool said_up(void *data)
{
        return strstr(((seen *)data)->out, "up") != NULL;
}

static void run_sh(seen *s, const char *script, const sh_exec_opts *o)
{
        char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
        sh_error *err = NULL;

        memset(s, 0, sizeof(*s));
        if (sh_sandbox_exec(sb, argv, NULL, o, on_event, s, &s->e, &err) < 0)
                ck_abort_msg("sh_sandbox_exec: %s", err && err->msg ? err->msg : "?");
}

START_TEST(an_exec_past_its_timeout_is_killed_and_its_end_says_so)
{
        seen s;

        run_sh(&s, "sleep 1000", &(sh_exec_opts){.timeout_ms = 200});
        wire_loop_until(ended, &s, WAIT_MS, "the timed-out exec's end");
        ck_assert_int_eq(s.end, SH_EXEC_EV_EXIT);
        ck_assert_int_eq(s.code, 128 + 9);
        ck_assert_str_eq(s.why, "timed out after 200 ms");
}
END_TEST

START_TEST(an_exec_that_ends_before_its_timeout_ends_as_it_would)
{
        seen s;

        run_sh(&s, "echo done", &(sh_exec_opts){.timeout_ms = 60000});
        wire_loop_until(ended, &s, WAIT_MS, "the exec's end");
        ck_assert_int_eq(s.code, 0);
        ck_assert_str_eq(s.why, "");
        ck_assert_str_eq(s.out, "done\n");
}
END_TEST

START_TEST(a_kill_reaches_the_whole_tree_and_its_first_reason_is_the_ends)
{
        seen s;

        /* a descendant that left the shell's session still holds the pipe: the kill ends it */
        run_sh(&s, "setsid sleep 1000 & echo up; wait", &(sh_exec_opts){0});
        wire_loop_until(said_up, &s, WAIT_MS, "the exec's first line");
        sh_exec_kill(s.e, "interrupted");
        sh_exec_kill(s.e, "a later reason");
        wire_loop_until(ended, &s, WAIT_MS, "the killed exec's end");
        ck_assert_int_eq(s.end, SH_EXEC_EV_EXIT);
        ck_assert_str_eq(s.why, "interrupted");
}
END_TEST

START_TEST(an_exec_that_was_not_killed_has_no_reason)
{
        seen s;

        run_sh(&s, "exit 3", &(sh_exec_opts){0});
        wire_loop_until(ended, &s, WAIT_MS, "the exec's end");
        ck_assert_int_eq(s.code, 3);
        ck_assert_str_eq(s.why, "");
}
END_TEST

static Suite *exec_suite(void)
{
        Suite *s = suite_create("exec_engine");
        TCase *tc = tcase_create("kill");

        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, an_exec_past_its_timeout_is_killed_and_its_end_says_so);
        tcase_add_test(tc, an_exec_that_ends_before_its_timeout_ends_as_it_would);
        tcase_add_test(tc, a_kill_reaches_the_whole_tree_and_its_first_reason_is_the_ends);
        tcase_add_test(tc, an_exec_that_was_not_killed_has_no_reason);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        int k = ut_need_root("sandboxes need root (their cgroups and namespaces)");

        return k ? k : wire_main(exec_suite());
}
