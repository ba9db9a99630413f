/* test_exec_io.c: an exec's extra channels on real sandboxes, with the services in this thread
 * and no transport (wire_services_start): its input (a pipe on fd 0 fed by sh_exec_write, its
 * bound, its close), its frames (a pipe on fd 3, each byte delivered after the output written
 * before it, with and without backpressure), the fds a command gets, and a signal to its
 * processes (sh_exec_signal) that the session outlives. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/buf.h"
#include "sh/exec.h"
#include "sh/sandbox.h"
#include "unit.h"
#include "wire_helpers.h"

#define WAIT_MS 20000 /* a bound on every wait for an exec's end, never a speed */
#define ROUNDS  200   /* output-then-frame rounds of the ordering tests */

static sh_loop *loop;
static sh_manager *mgr;
static sh_sandbox *sb;

static void setup(void)
{
        /* a write to a pipe whose reader is gone is EPIPE, as in the daemon (its handler) */
        signal(SIGPIPE, SIG_IGN);
        mgr = wire_services_start(NULL, &loop);
        sb = wire_sandbox();
}

static void teardown(void)
{
        sh_sandbox_unref(sb);
        wire_services_stop();
}

/* What a consumer saw: each stream's bytes, the order of frames against the output, its end. */
typedef struct seen {
        sh_exec *e;
        bool ended;
        sh_exec_event_type end;
        int code;
        sh_buf got[3];      /* stdout, stderr, frames: every byte, in order */
        size_t lines[2];    /* stdout's and stderr's complete lines so far */
        size_t frame_lines; /* complete frame lines so far */
        size_t early;       /* frames delivered before the output written before them */
        bool pause_each;    /* pause after every chunk, resume from a timer */
        sh_timer *resume_t;
        size_t pauses;
        char exit_out[64], exit_err[64]; /* what the exit event captured */
} seen;

static void on_resume(sh_loop *l, sh_timer *t, void *data)
{
        seen *s = data;

        s->resume_t = NULL;
        sh_exec_resume(s->e);
}

static size_t count_nl(const char *p, size_t n)
{
        size_t k = 0;

        for (size_t i = 0; i < n; i++)
                k += p[i] == '\n';
        return k;
}

/* A frame line "F<i>" comes after the command wrote "out<i>" and "err<i>": by then at least
 * i + 1 lines of each. */
static void check_frame_lines(seen *s, const char *p, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (p[i] != '\n')
                        continue;
                s->frame_lines++;
                if (s->lines[0] < s->frame_lines || s->lines[1] < s->frame_lines)
                        s->early++;
        }
}

static void on_event(sh_exec *e, const sh_exec_event *ev, void *data)
{
        seen *s = data;

        (void)e;
        if (ev->type == SH_EXEC_EV_CHUNK) {
                int k = ev->chunk.stream;

                ck_assert_int_le(k, SH_EXEC_FRAMES);
                ck_assert_int_eq(sh_buf_append(&s->got[k], ev->chunk.data, ev->chunk.len), 0);
                if (k < 2)
                        s->lines[k] += count_nl(ev->chunk.data, ev->chunk.len);
                else
                        check_frame_lines(s, ev->chunk.data, ev->chunk.len);
                if (s->pause_each && !s->resume_t) {
                        sh_exec_pause(s->e);
                        s->pauses++;
                        s->resume_t = sh_loop_add_timer(loop, 1, on_resume, s);
                        ck_assert_ptr_nonnull(s->resume_t);
                }
                return;
        }
        if (ev->type == SH_EXEC_EV_HEARTBEAT)
                return;
        s->ended = true;
        s->end = ev->type;
        s->code = ev->type == SH_EXEC_EV_EXIT ? ev->exit.code : -1;
        if (ev->type == SH_EXEC_EV_EXIT) {
                snprintf(s->exit_out, sizeof(s->exit_out), "%.*s", (int)ev->exit.out_len,
                         ev->exit.out);
                snprintf(s->exit_err, sizeof(s->exit_err), "%.*s", (int)ev->exit.err_len,
                         ev->exit.err);
        }
        sh_loop_cancel_timer(loop, TAKE_PTR(s->resume_t));
        sh_exec_detach(TAKE_PTR(s->e));
}

static bool ended(void *data)
{
        return ((seen *)data)->ended;
}

/* Wait for the end (`what` names it in a failure): an exit with status 0. */
static void exited_ok(seen *s, const char *what)
{
        wire_loop_until(ended, s, WAIT_MS, what);
        ck_assert_int_eq(s->end, SH_EXEC_EV_EXIT);
        ck_assert_int_eq(s->code, 0);
}

static void run(seen *s, const char *script, const sh_exec_opts *o)
{
        char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
        sh_error *err = NULL;

        if (sh_sandbox_exec(sb, argv, NULL, o, on_event, s, &s->e, &err) < 0)
                ck_abort_msg("sh_sandbox_exec: %s", err && err->msg ? err->msg : "?");
}

/* stream k's bytes as a string (owned by s) */
static const char *text(seen *s, int k)
{
        ck_assert_int_eq(sh_buf_append(&s->got[k], "", 1), 0);
        s->got[k].len--;
        return s->got[k].p;
}

static void seen_done(seen *s)
{
        for (int k = 0; k < 3; k++)
                sh_buf_done(&s->got[k]);
}

static void write_all(seen *s, const char *p)
{
        sh_error *err = NULL;

        if (sh_exec_write(s->e, p, strlen(p), &err) < 0)
                ck_abort_msg("sh_exec_write: %s", err && err->msg ? err->msg : "?");
}

static bool said_up(void *data)
{
        seen *s = data;

        return s->ended || (s->got[0].p && memmem(s->got[0].p, s->got[0].len, "up\n", 3));
}

/* ---- input ------------------------------------------------------------------------------ */

START_TEST(a_command_reads_what_was_written_and_eof_after_the_close)
{
        seen s = {0};

        run(&s, "cat; echo end", &(sh_exec_opts){.input = true});
        write_all(&s, "hello\n");
        write_all(&s, "world");
        sh_exec_close_input(s.e);
        exited_ok(&s, "the end of cat's input");
        ck_assert_str_eq(text(&s, 0), "hello\nworldend\n");
        seen_done(&s);
}
END_TEST

START_TEST(input_larger_than_the_pipe_reaches_the_command_whole)
{
        seen s = {0};
        char *big = malloc(SH_EXEC_INPUT_MAX);
        sh_error *err = NULL;

        ck_assert_ptr_nonnull(big);
        memset(big, 'x', SH_EXEC_INPUT_MAX);
        run(&s, "wc -c", &(sh_exec_opts){.input = true});
        ck_assert_int_eq(sh_exec_write(s.e, big, SH_EXEC_INPUT_MAX, &err), 0);
        sh_exec_close_input(s.e);
        free(big);
        exited_ok(&s, "the count of the input");
        ck_assert_int_eq(atol(text(&s, 0)), SH_EXEC_INPUT_MAX);
        seen_done(&s);
}
END_TEST

START_TEST(input_past_the_bound_is_refused_and_nothing_after_the_close)
{
        seen s = {0};
        char *big = calloc(1, SH_EXEC_INPUT_MAX + 1);
        sh_error *err = NULL;

        ck_assert_ptr_nonnull(big);
        /* a command that never reads: what the pipe does not take stays queued */
        run(&s, "sleep 1000", &(sh_exec_opts){.input = true});
        ck_assert_int_eq(sh_exec_write(s.e, big, SH_EXEC_INPUT_MAX + 1, &err), -1);
        ck_assert_int_eq(sh_error_kind_of(err), SH_E_UNAVAILABLE);
        sh_error_release(&err);
        ck_assert_int_eq(sh_exec_write(s.e, big, SH_EXEC_INPUT_MAX, &err), 0);
        /* the pipe took at most its size: far more than one more byte is still queued */
        ck_assert_int_eq(sh_exec_write(s.e, big, SH_EXEC_INPUT_MAX / 2, &err), -1);
        ck_assert_int_eq(sh_error_kind_of(err), SH_E_UNAVAILABLE);
        sh_error_release(&err);
        sh_exec_close_input(s.e);
        ck_assert_int_eq(sh_exec_write(s.e, "a", 1, &err), -1);
        ck_assert_int_eq(sh_error_kind_of(err), SH_E_INVALID);
        sh_error_release(&err);
        free(big);
        sh_exec_kill(s.e, "test over");
        wire_loop_until(ended, &s, WAIT_MS, "the killed command's end");
        ck_assert_int_eq(s.end, SH_EXEC_EV_EXIT);
        seen_done(&s);
}
END_TEST

START_TEST(input_to_a_command_that_closed_it_is_dropped_and_its_exit_comes)
{
        seen s = {0};
        char *big = calloc(1, 1 << 20);
        sh_error *err = NULL;

        ck_assert_ptr_nonnull(big);
        run(&s, "exec 0</dev/null; echo up; sleep 0.3; echo bye", &(sh_exec_opts){.input = true});
        wire_loop_until(said_up, &s, WAIT_MS, "the command's first line");
        /* no reader left: EPIPE, not an error of the write nor an event */
        ck_assert_int_eq(sh_exec_write(s.e, big, 1 << 20, &err), 0);
        ck_assert_int_eq(sh_exec_write(s.e, big, 1, &err), 0);
        free(big);
        exited_ok(&s, "the command's end");
        ck_assert_str_eq(text(&s, 0), "up\nbye\n");
        seen_done(&s);
}
END_TEST

START_TEST(a_command_without_input_reads_dev_null_and_has_no_fd_3)
{
        seen s = {0};

        run(&s, "readlink /proc/self/fd/0; cat; echo rc=$?; ls /proc/$$/fd", &(sh_exec_opts){0});
        exited_ok(&s, "the command's end");
        ck_assert_str_eq(text(&s, 0), "/dev/null\nrc=0\n0\n1\n2\n");
        seen_done(&s);
}
END_TEST

/* ---- frames ----------------------------------------------------------------------------- */

#define ROUNDS_SCRIPT                                                                              \
        "i=0; while [ $i -lt 200 ]; do echo out$i; echo err$i >&2; echo F$i >&3; "                 \
        "i=$((i+1)); done"

START_TEST(a_frame_comes_after_the_output_written_before_it)
{
        seen s = {0};

        run(&s, ROUNDS_SCRIPT, &(sh_exec_opts){.frames = true});
        exited_ok(&s, "the rounds' end");
        ck_assert_uint_eq(s.frame_lines, ROUNDS);
        ck_assert_uint_eq(s.lines[0], ROUNDS);
        ck_assert_uint_eq(s.lines[1], ROUNDS);
        ck_assert_msg(s.early == 0, "%zu of %d frames came before their output", s.early, ROUNDS);
        ck_assert(strncmp(text(&s, 2), "F0\nF1\n", 6) == 0);
        seen_done(&s);
}
END_TEST

START_TEST(a_paused_consumer_still_gets_each_frame_after_its_output)
{
        seen s = {.pause_each = true};

        run(&s, ROUNDS_SCRIPT, &(sh_exec_opts){.frames = true, .read_max = 16});
        exited_ok(&s, "the rounds' end");
        ck_assert_uint_gt(s.pauses, 0);
        ck_assert_uint_eq(s.frame_lines, ROUNDS);
        ck_assert_msg(s.early == 0, "%zu of %d frames came before their output", s.early, ROUNDS);
        seen_done(&s);
}
END_TEST

START_TEST(frames_are_chunks_and_not_captured_for_the_exit)
{
        seen s = {0};

        run(&s, "echo a; echo F >&3; echo b >&2",
            &(sh_exec_opts){.frames = true, .capture_max = 1024});
        exited_ok(&s, "the command's end");
        ck_assert_str_eq(text(&s, 2), "F\n");
        ck_assert_str_eq(s.exit_out, "a\n");
        ck_assert_str_eq(s.exit_err, "b\n");
        seen_done(&s);
}
END_TEST

START_TEST(a_command_with_input_and_frames_gets_fds_0_to_3_and_no_more)
{
        seen s = {0};

        run(&s, "ls /proc/$$/fd; readlink /proc/$$/fd/0 | cut -c1-5",
            &(sh_exec_opts){.input = true, .frames = true});
        exited_ok(&s, "the command's end");
        ck_assert_str_eq(text(&s, 0), "0\n1\n2\n3\npipe:\n");
        seen_done(&s);
}
END_TEST

/* The input and frames pipes belong to the command's uid: it can open them again by their
 * /proc/self/fd paths (what a driver without dup does to move them). */
START_TEST(a_command_can_reopen_its_input_and_frames_pipes)
{
        seen s = {0};

        run(&s, "exec 5</proc/self/fd/0 6>/proc/self/fd/3 && echo reopened",
            &(sh_exec_opts){.input = true, .frames = true});
        exited_ok(&s, "the command's end");
        ck_assert_str_eq(text(&s, 0), "reopened\n");
        seen_done(&s);
}
END_TEST

/* ---- signals ---------------------------------------------------------------------------- */

START_TEST(a_signal_reaches_the_commands_trap_and_the_command_goes_on)
{
        seen s = {0};

        run(&s,
            "trap 'echo trapped; t=1' INT; echo up; "
            "while [ -z \"$t\" ]; do sleep 0.05; done; echo after",
            &(sh_exec_opts){0});
        wire_loop_until(said_up, &s, WAIT_MS, "the trap set");
        sh_exec_signal(s.e, SIGINT);
        exited_ok(&s, "the command's end after its trap");
        ck_assert_str_eq(text(&s, 0), "up\ntrapped\nafter\n");
        seen_done(&s);
}
END_TEST

static Suite *exec_io_suite(void)
{
        Suite *s = suite_create("exec_io");
        TCase *tc = tcase_create("input");

        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, a_command_reads_what_was_written_and_eof_after_the_close);
        tcase_add_test(tc, input_larger_than_the_pipe_reaches_the_command_whole);
        tcase_add_test(tc, input_past_the_bound_is_refused_and_nothing_after_the_close);
        tcase_add_test(tc, input_to_a_command_that_closed_it_is_dropped_and_its_exit_comes);
        tcase_add_test(tc, a_command_without_input_reads_dev_null_and_has_no_fd_3);
        suite_add_tcase(s, tc);

        tc = tcase_create("frames");
        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, a_frame_comes_after_the_output_written_before_it);
        tcase_add_test(tc, a_paused_consumer_still_gets_each_frame_after_its_output);
        tcase_add_test(tc, frames_are_chunks_and_not_captured_for_the_exit);
        tcase_add_test(tc, a_command_with_input_and_frames_gets_fds_0_to_3_and_no_more);
        tcase_add_test(tc, a_command_can_reopen_its_input_and_frames_pipes);
        suite_add_tcase(s, tc);

        tc = tcase_create("signal");
        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, a_signal_reaches_the_commands_trap_and_the_command_goes_on);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        int k = ut_need_root("sandboxes need root (their cgroups and namespaces)");

        return k ? k : wire_main(exec_io_suite());
}
