/* test_exec_engine.c: the sandbox layer's exec mechanisms on real sandboxes, with the services
 * in this thread and no transport (wire_services_start): an exec's timeout and the reason of
 * its kill; background commands (sh/bgexec.h): their output in their logs, held for the owner
 * until it lets go, their bound and their logs' budget. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sh/bgexec.h"
#include "sh/exec.h"
#include "sh/sandbox.h"
#include "unit.h"
#include "wire_helpers.h"

#define WAIT_MS 20000 /* a bound on every wait for an exec's end, never a speed */

static sh_loop *loop;
static sh_manager *mgr;
static sh_sandbox *sb;

static void setup_with(const char *const *flags)
{
        mgr = wire_services_start(flags, &loop);
        sb = wire_sandbox();
}

static void setup(void)
{
        setup_with(NULL);
}

/* Two background commands at most, logs of 1 KiB (4 KiB together). */
static void setup_small(void)
{
        static const char *const flags[] = {"--background-max=2", "--command-log-max=1K", NULL};

        setup_with(flags);
}

static void teardown(void)
{
        sh_sandbox_unref(sb);
        wire_services_stop();
}

static bool said_up(void *data)
{
        return strstr(((wire_seen *)data)->out, "up") != NULL;
}

static void run_sh(wire_seen *s, const char *script, const sh_exec_opts *o)
{
        wire_exec_sh(sb, s, script, NULL, o);
}

START_TEST(an_exec_past_its_timeout_is_killed_and_its_end_says_so)
{
        wire_seen s;

        run_sh(&s, "sleep 1000", &(sh_exec_opts){.timeout_ms = 200});
        wire_loop_until(wire_exec_ended, &s, WAIT_MS, "the timed-out exec's end");
        ck_assert_int_eq(s.end, SH_EXEC_EV_EXIT);
        ck_assert_int_eq(s.code, 128 + 9);
        ck_assert_str_eq(s.why, "timed out after 200 ms");
}
END_TEST

START_TEST(an_exec_that_ends_before_its_timeout_ends_as_it_would)
{
        wire_seen s;

        run_sh(&s, "echo done", &(sh_exec_opts){.timeout_ms = 60000});
        wire_loop_until(wire_exec_ended, &s, WAIT_MS, "the exec's end");
        ck_assert_int_eq(s.code, 0);
        ck_assert_str_eq(s.why, "");
        ck_assert_str_eq(s.out, "done\n");
}
END_TEST

START_TEST(a_kill_reaches_the_whole_tree_and_its_first_reason_is_the_ends)
{
        wire_seen s;

        /* a descendant that left the shell's session still holds the pipe: the kill ends it */
        run_sh(&s, "setsid sleep 1000 & echo up; wait", &(sh_exec_opts){0});
        wire_loop_until(said_up, &s, WAIT_MS, "the exec's first line");
        sh_exec_kill(s.e, "interrupted");
        sh_exec_kill(s.e, "a later reason");
        wire_loop_until(wire_exec_ended, &s, WAIT_MS, "the killed exec's end");
        ck_assert_int_eq(s.end, SH_EXEC_EV_EXIT);
        ck_assert_str_eq(s.why, "interrupted");
}
END_TEST

START_TEST(an_exec_that_was_not_killed_has_no_reason)
{
        wire_seen s;

        run_sh(&s, "exit 3", &(sh_exec_opts){0});
        wire_loop_until(wire_exec_ended, &s, WAIT_MS, "the exec's end");
        ck_assert_int_eq(s.code, 3);
        ck_assert_str_eq(s.why, "");
}
END_TEST

/* ---- background commands -------------------------------------------------------------- */

/* What an owner of a background command saw. */
typedef struct bg {
        sh_bgexec *b;
        bool ended, unhold_at_first;
        sh_exec_event_type end;
        char why[128];
        char held[256]; /* the output it was given */
        size_t held_len;
} bg;

static void on_bg(sh_exec *e, const sh_exec_event *ev, void *data)
{
        bg *g = data;

        (void)e;
        if (ev->type == SH_EXEC_EV_CHUNK) {
                size_t n = ev->chunk.len < sizeof(g->held) - 1 - g->held_len
                                   ? ev->chunk.len
                                   : sizeof(g->held) - 1 - g->held_len;

                memcpy(g->held + g->held_len, ev->chunk.data, n);
                g->held_len += n;
                if (g->unhold_at_first) {
                        int ws = sh_sandbox_open_workspace(sb, NULL), fd;

                        sh_bgexec_unhold(g->b);
                        /* the command waits for this file before it says more */
                        ck_assert_int_ge(ws, 0);
                        fd = openat(ws, "go", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                        ck_assert_int_ge(fd, 0);
                        close(fd);
                        close(ws);
                }
                return;
        }
        g->ended = true;
        g->end = ev->type;
        snprintf(g->why, sizeof(g->why), "%s", ev->why ? ev->why : "");
}

static bool bg_ended(void *data)
{
        return ((bg *)data)->ended;
}

static void bg_new(bg *g, const sh_bgexec_opts *o)
{
        sh_error *err = NULL;

        memset(g, 0, sizeof(*g));
        if (sh_bgexec_new(sb, o, &g->b, &err) < 0)
                ck_abort_msg("sh_bgexec_new: %s", err && err->msg ? err->msg : "?");
}

static void bg_start(bg *g, const char *script)
{
        char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
        sh_error *err = NULL;

        if (sh_bgexec_start(g->b, argv, NULL, on_bg, g, &err) < 0)
                ck_abort_msg("sh_bgexec_start: %s", err && err->msg ? err->msg : "?");
}

/* Its log from its first kept byte, NUL-terminated, into out. */
static const char *log_text(const bg *g, char *out, size_t size)
{
        const sh_ringlog *l = sh_bgexec_log(g->b);
        ssize_t n = sh_bgexec_read(g->b, sh_ringlog_first(l), out, size - 1);

        ck_assert_int_ge(n, 0);
        out[n] = '\0';
        return out;
}

START_TEST(a_background_commands_output_goes_to_its_log_as_it_came)
{
        char text[256];
        bg g;

        bg_new(&g, &(sh_bgexec_opts){0});
        bg_start(&g, "echo out; echo err >&2; echo again");
        wire_loop_until(bg_ended, &g, WAIT_MS, "the command's end");
        ck_assert_int_eq(g.end, SH_EXEC_EV_EXIT);
        ck_assert_uint_eq(g.held_len, 0);
        ck_assert_str_eq(log_text(&g, text, sizeof(text)), "out\nerr\nagain\n");
        ck_assert(!sh_bgexec_running(g.b));
        sh_bgexec_free(g.b);
}
END_TEST

START_TEST(held_output_goes_to_the_owner_until_it_lets_go)
{
        char text[256];
        bg g;

        bg_new(&g, &(sh_bgexec_opts){.hold = true});
        g.unhold_at_first = true;
        bg_start(&g, "echo first; while [ ! -e /workspace/go ]; do sleep 0.01; done; echo second");
        wire_loop_until(bg_ended, &g, WAIT_MS, "the command's end");
        ck_assert_str_eq(g.held, "first\n");
        ck_assert_str_eq(log_text(&g, text, sizeof(text)), "second\n");
        sh_bgexec_append(g.b, "more\n", 5); /* the owner's own bytes, after */
        ck_assert_str_eq(log_text(&g, text, sizeof(text)), "second\nmore\n");
        sh_bgexec_free(g.b);
}
END_TEST

START_TEST(a_background_command_past_its_timeout_is_killed_saying_so)
{
        bg g;

        bg_new(&g, &(sh_bgexec_opts){.timeout_ms = 200});
        bg_start(&g, "sleep 1000");
        wire_loop_until(bg_ended, &g, WAIT_MS, "the command's end");
        ck_assert_str_eq(g.why, "timed out after 200 ms");
        sh_bgexec_free(g.b);
}
END_TEST

START_TEST(running_commands_stop_at_the_bound_and_a_named_log_is_outside_it)
{
        sh_error *err = NULL;
        sh_bgexec *third = NULL;
        bg a, b, named;

        bg_new(&a, &(sh_bgexec_opts){0});
        bg_start(&a, "sleep 1000");
        bg_new(&b, &(sh_bgexec_opts){0});
        bg_start(&b, "sleep 1000");
        ck_assert_int_eq(sh_bgexec_new(sb, &(sh_bgexec_opts){0}, &third, &err), -1);
        ck_assert_int_eq(sh_error_kind_of(err), SH_E_UNAVAILABLE);
        ck_assert_ptr_nonnull(strstr(err->msg, "SANDBOX_HOST_BACKGROUND_MAX"));
        sh_error_release(&err);
        /* an entrypoint's log is not one of them */
        bg_new(&named, &(sh_bgexec_opts){.log_name = "entrypoint", .log_max = 1024});
        sh_bgexec_free(named.b);
        /* one that ends makes room */
        sh_bgexec_kill(a.b, "interrupted");
        wire_loop_until(bg_ended, &a, WAIT_MS, "the killed command's end");
        ck_assert_str_eq(a.why, "interrupted");
        ck_assert_int_eq(sh_bgexec_new(sb, &(sh_bgexec_opts){0}, &third, &err), 0);
        sh_bgexec_free(third);
        /* one let go while it runs: killed, its end told to nobody, its room free */
        sh_bgexec_free(b.b);
        ck_assert_int_eq(sh_bgexec_new(sb, &(sh_bgexec_opts){0}, &third, &err), 0);
        ck_assert(!b.ended);
        sh_bgexec_free(third);
        sh_bgexec_free(a.b);
}
END_TEST

START_TEST(past_the_budget_the_oldest_finished_logs_go_first)
{
        const sh_ringlog *l;
        char buf[16];
        bg g[5];

        /* 1 KiB each, 4 KiB together: the fifth's output pushes the first's out */
        for (int i = 0; i < 5; i++) {
                bg_new(&g[i], &(sh_bgexec_opts){0});
                bg_start(&g[i], "head -c 1024 /dev/zero");
                wire_loop_until(bg_ended, &g[i], WAIT_MS, "a command's end");
        }
        l = sh_bgexec_log(g[0].b);
        ck_assert_uint_eq(sh_ringlog_kept(l), 0);
        ck_assert_int_eq(sh_bgexec_read(g[0].b, 0, buf, sizeof(buf)), -ESTALE);
        for (int i = 1; i < 5; i++)
                ck_assert_uint_eq(sh_ringlog_kept(sh_bgexec_log(g[i].b)), 1024);
        for (int i = 0; i < 5; i++)
                sh_bgexec_free(g[i].b);
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

        tc = tcase_create("background");
        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, a_background_commands_output_goes_to_its_log_as_it_came);
        tcase_add_test(tc, held_output_goes_to_the_owner_until_it_lets_go);
        tcase_add_test(tc, a_background_command_past_its_timeout_is_killed_saying_so);
        suite_add_tcase(s, tc);

        tc = tcase_create("background_bounds");
        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, setup_small, teardown);
        tcase_add_test(tc, running_commands_stop_at_the_bound_and_a_named_log_is_outside_it);
        tcase_add_test(tc, past_the_budget_the_oldest_finished_logs_go_first);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        int k = ut_need_root("sandboxes need root (their cgroups and namespaces)");

        return k ? k : wire_main(exec_suite());
}
