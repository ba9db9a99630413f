/* test_os_sse.c: the pure parts of the /v1 execd (src/opensandbox/sse.c): the SSE events byte
 * for byte (lines split by test_linesplit.c's splitter), the encoder of the engine's
 * typed events (exit codes, signals, invalid UTF-8, a session run's state), the wrapper's
 * handshake (stdout alone, or merged with stderr). The background log's ring is
 * test_ringlog.c's. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/opensandbox/execd.h"
#include "unit.h"

/* ---- events ----------------------------------------------------------------------------------- */

static char *text_of(sh_buf *q)
{
        char *s = malloc(q->len - q->off + 1);

        memcpy(s, q->p + q->off, q->len - q->off);
        s[q->len - q->off] = '\0';
        q->off = q->len = 0;
        return s;
}

START_TEST(test_events_are_one_json_object_and_a_blank_line)
{
        sh_buf q = {0};
        char *s;

        ck_assert_int_eq(os_sse_text(&q, "init", "id-1", 4, 1700000000000ULL), 0);
        s = text_of(&q);
        ck_assert_str_eq(s,
                         "{\"type\":\"init\",\"text\":\"id-1\",\"timestamp\":1700000000000}\n\n");
        free(s);
        ck_assert_int_eq(os_sse_text(&q, "stdout", "say \"hi\"\t\\", 10, 5), 0);
        s = text_of(&q);
        ck_assert_str_eq(
                s,
                "{\"type\":\"stdout\",\"text\":\"say \\\"hi\\\"\\u0009\\\\\",\"timestamp\":5}\n\n");
        free(s);
        ck_assert_int_eq(os_sse_complete(&q, 42, 7), 0);
        s = text_of(&q);
        ck_assert_str_eq(
                s, "{\"type\":\"execution_complete\",\"execution_time\":42,\"timestamp\":7}\n\n");
        free(s);
        ck_assert_int_eq(os_sse_error(&q, "3", "exit status 3", 8), 0);
        s = text_of(&q);
        ck_assert_str_eq(s, "{\"type\":\"error\",\"timestamp\":8,\"error\":{\"ename\":"
                            "\"CommandExecError\",\"evalue\":\"3\",\"traceback\":[\"exit status "
                            "3\"]}}\n\n");
        free(s);
        sh_buf_done(&q);
}
END_TEST

START_TEST(test_invalid_utf8_arrives_as_lone_surrogates_valid_utf8_unchanged)
{
        sh_buf q = {0};
        char *s;

        ck_assert_int_eq(os_sse_text(&q, "stdout", "\xff\xe2\x82\xac\xc3", 5, 1), 0);
        s = text_of(&q);
        ck_assert_str_eq(s, "{\"type\":\"stdout\",\"text\":\"\\udcff\xe2\x82\xac\\udcc3\","
                            "\"timestamp\":1}\n\n");
        free(s);
        sh_buf_done(&q);
}
END_TEST

static sh_exec_event chunk(sh_exec_stream st, const char *s)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_CHUNK};

        ev.chunk.stream = st;
        ev.chunk.data = s;
        ev.chunk.len = strlen(s);
        return ev;
}

static sh_exec_event exited(int code, int sig)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_EXIT};

        ev.exit.code = code;
        ev.exit.signal = sig;
        return ev;
}

START_TEST(test_the_encoder_splits_lines_per_stream_and_ends_once)
{
        os_sse s = {.start_ms = 100};
        sh_buf q = {0};
        sh_exec_event ev;
        char *t;

        ev = chunk(SH_EXEC_STDOUT, "one\ntw");
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 110), 0);
        ev = chunk(SH_EXEC_STDERR, "warn\n");
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 111), 0);
        ev = chunk(SH_EXEC_STDOUT, "o\n\n");
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 112), 0);
        ev = exited(0, 0);
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 150), 0);
        t = text_of(&q);
        ck_assert_str_eq(t, "{\"type\":\"stdout\",\"text\":\"one\",\"timestamp\":110}\n\n"
                            "{\"type\":\"stderr\",\"text\":\"warn\",\"timestamp\":111}\n\n"
                            "{\"type\":\"stdout\",\"text\":\"two\",\"timestamp\":112}\n\n"
                            "{\"type\":\"stdout\",\"text\":\"\\u000a\",\"timestamp\":112}\n\n"
                            "{\"type\":\"execution_complete\",\"execution_time\":50,"
                            "\"timestamp\":150}\n\n");
        free(t);
        /* nothing after the end */
        ev = exited(1, 0);
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 160), 0);
        ck_assert_uint_eq(q.len, 0);
        os_sse_done(&s);
        sh_buf_done(&q);
}
END_TEST

START_TEST(test_a_flush_sends_the_last_unterminated_lines_and_the_encoder_goes_on)
{
        os_sse s = {0};
        sh_buf q = {0};
        sh_exec_event ev;
        char *t;

        ev = chunk(SH_EXEC_STDOUT, "a\npart");
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 1), 0);
        ev = chunk(SH_EXEC_STDERR, "err");
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 2), 0);
        ck_assert_int_eq(os_sse_flush(&s, &q, 3), 0);
        /* a code cell's stream goes on after a flush: the next cell's lines */
        ev = chunk(SH_EXEC_STDOUT, "next\n");
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 4), 0);
        ck_assert_int_eq(os_sse_flush(&s, &q, 5), 0);
        t = text_of(&q);
        ck_assert_str_eq(t, "{\"type\":\"stdout\",\"text\":\"a\",\"timestamp\":1}\n\n"
                            "{\"type\":\"stdout\",\"text\":\"part\",\"timestamp\":3}\n\n"
                            "{\"type\":\"stderr\",\"text\":\"err\",\"timestamp\":3}\n\n"
                            "{\"type\":\"stdout\",\"text\":\"next\",\"timestamp\":4}\n\n");
        free(t);
        os_sse_done(&s);
        sh_buf_done(&q);
}
END_TEST

START_TEST(test_an_object_event_is_the_object_with_its_type_and_timestamp_on_one_line)
{
        sh_buf q = {0};
        cJSON *o = cJSON_Parse("{\"results\":{\"text/plain\":\"a\\nb\"},\"execution_count\":2}");
        char *t;

        ck_assert_ptr_nonnull(o);
        ck_assert_int_eq(os_sse_object(&q, "result", o, 9), 0);
        t = text_of(&q);
        ck_assert_str_eq(t, "{\"results\":{\"text/plain\":\"a\\nb\"},\"execution_count\":2,"
                            "\"type\":\"result\",\"timestamp\":9}\n\n");
        free(t);
        cJSON_Delete(o);
        sh_buf_done(&q);
}
END_TEST

START_TEST(test_failures_and_signals_are_error_events_with_the_code_as_text)
{
        os_sse s = {0};
        sh_buf q = {0};
        sh_exec_event ev;
        char *t;

        ev = chunk(SH_EXEC_STDERR, "last words");
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 1), 0);
        ev = exited(128 + 9, 9);
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 2), 0);
        t = text_of(&q);
        ck_assert_str_eq(t, "{\"type\":\"stderr\",\"text\":\"last words\",\"timestamp\":2}\n\n"
                            "{\"type\":\"error\",\"timestamp\":2,\"error\":{\"ename\":"
                            "\"CommandExecError\",\"evalue\":\"137\",\"traceback\":[\"killed by "
                            "signal 9 (KILL)\"]}}\n\n");
        free(t);
        os_sse_done(&s);
        /* a kill the caller explains (a timeout) */
        s = (os_sse){0};
        ev = exited(137, 9);
        ev.why = "timed out after 5 ms";
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 3), 0);
        t = text_of(&q);
        ck_assert_ptr_nonnull(
                strstr(t, "\"evalue\":\"137\",\"traceback\":[\"timed out after 5 ms\"]"));
        free(t);
        os_sse_done(&s);
        /* the engine's own end (the sandbox went) */
        s = (os_sse){0};
        ev = (sh_exec_event){.type = SH_EXEC_EV_ERROR};
        ev.error.kind = SH_E_SANDBOX_NOT_FOUND;
        ev.error.text = "the sandbox was deleted";
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 4), 0);
        t = text_of(&q);
        ck_assert_ptr_nonnull(strstr(t, "\"evalue\":\"the sandbox was deleted\""));
        free(t);
        /* the heartbeat is a ping */
        s = (os_sse){0};
        ev = (sh_exec_event){.type = SH_EXEC_EV_HEARTBEAT};
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 5), 0);
        t = text_of(&q);
        ck_assert_str_eq(t, "{\"type\":\"ping\",\"text\":\"pong\",\"timestamp\":5}\n\n");
        free(t);
        os_sse_done(&s);
        sh_buf_done(&q);
}
END_TEST

#define NONCE "0123456789abcdef0123456789abcdef"

static char *session_run(const char *out, char **state)
{
        os_sse s = {.session = true, .start_ms = 1};
        sh_buf q = {0};
        sh_exec_event ev = chunk(SH_EXEC_STDOUT, out);
        const char *st;
        size_t n = 0;
        char *t;

        memcpy(s.nonce, NONCE, sizeof(s.nonce));
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 1), 0);
        ev = exited(0, 0);
        ck_assert_int_eq(os_sse_event(&s, &q, &ev, 1), 0);
        st = os_sse_session_state(&s, &n);
        *state = NULL;
        if (st) { /* not strndup: bytes of a buffer (strict_string_checks) */
                *state = malloc(n + 1);
                memcpy(*state, st, n);
                (*state)[n] = '\0';
        }
        t = text_of(&q);
        os_sse_done(&s);
        sh_buf_done(&q);
        return t;
}

START_TEST(test_a_session_runs_state_is_taken_out_of_its_output)
{
        static const char done[] =
                "{\"type\":\"execution_complete\",\"execution_time\":0,\"timestamp\":1}\n\n";
        char *t, *st;

        /* output ended with a newline: the wrapper's "\n" makes no empty line */
        t = session_run("x\n\n" NONCE "\ncd -- '/w'\nexport A=1\n" NONCE ".\n", &st);
        ck_assert_str_eq(t, "{\"type\":\"stdout\",\"text\":\"x\",\"timestamp\":1}\n\n"
                            "{\"type\":\"execution_complete\",\"execution_time\":0,"
                            "\"timestamp\":1}\n\n");
        ck_assert_str_eq(st, "cd -- '/w'\nexport A=1\n");
        free(t);
        free(st);
        /* unterminated: the wrapper's "\n" ends the line */
        t = session_run("x\n" NONCE "\nS\n" NONCE ".\n", &st);
        ck_assert_str_eq(t, "{\"type\":\"stdout\",\"text\":\"x\",\"timestamp\":1}\n\n"
                            "{\"type\":\"execution_complete\",\"execution_time\":0,"
                            "\"timestamp\":1}\n\n");
        ck_assert_str_eq(st, "S\n");
        free(t);
        free(st);
        /* a real empty line stays */
        t = session_run("x\n\n\n" NONCE "\nS\n" NONCE ".\n", &st);
        ck_assert_ptr_nonnull(strstr(t, "\"text\":\"\\u000a\""));
        free(t);
        free(st);
        /* no end marker (killed mid-dump): no state */
        t = session_run("\n" NONCE "\ncd -- '/w'\n", &st);
        ck_assert_ptr_null(st);
        ck_assert_str_eq(t, done);
        free(t);
}
END_TEST

/* ---- the handshake ---------------------------------------------------------------------------- */

START_TEST(test_the_handshake_line_is_read_and_the_rest_is_output)
{
        os_handshake h = {0};
        const char *in = NONCE " ok\nhello";

        memcpy(h.nonce, NONCE, sizeof(h.nonce));
        ck_assert_uint_eq(os_handshake_feed(&h, in, 10, NULL), 10);
        ck_assert_int_eq(h.result, OS_HS_WAIT);
        ck_assert_uint_eq(os_handshake_feed(&h, in + 10, strlen(in) - 10, NULL),
                          OS_NONCE_LEN + 4 - 10);
        ck_assert_int_eq(h.result, OS_HS_OK);

        h = (os_handshake){0};
        memcpy(h.nonce, NONCE, sizeof(h.nonce));
        os_handshake_feed(&h, NONCE " nodir\n", OS_NONCE_LEN + 7, NULL);
        ck_assert_int_eq(h.result, OS_HS_NODIR);

        /* another nonce, or no line at all, is not the wrapper's */
        h = (os_handshake){0};
        memcpy(h.nonce, NONCE, sizeof(h.nonce));
        os_handshake_feed(&h, "ffffffffffffffffffffffffffffffff ok\n", OS_NONCE_LEN + 4, NULL);
        ck_assert_int_eq(h.result, OS_HS_BAD);
        h = (os_handshake){0};
        memcpy(h.nonce, NONCE, sizeof(h.nonce));
        for (int i = 0; i < 100 && h.result == OS_HS_WAIT; i++)
                os_handshake_feed(&h, "x", 1, NULL);
        ck_assert_int_eq(h.result, OS_HS_BAD);
}
END_TEST

START_TEST(test_merged_lines_before_the_handshake_are_the_shells_own_output)
{
        os_handshake h = {0};
        sh_buf noise = {0};
        char longline[300];
        const char *in = "sh: warning\nffffffffffffffffffffffffffffffff ok\n" NONCE " ok\nout";
        size_t n = strlen(in), used;

        memcpy(h.nonce, NONCE, sizeof(h.nonce));
        /* byte by byte, as a pipe may give them */
        for (used = 0; used < n && h.result == OS_HS_WAIT; used++)
                ck_assert_uint_eq(os_handshake_feed(&h, in + used, 1, &noise), 1);
        ck_assert_int_eq(h.result, OS_HS_OK);
        ck_assert_str_eq(in + used, "out");
        ck_assert_uint_eq(noise.len, 12 + OS_NONCE_LEN + 4);
        ck_assert_int_eq(memcmp(noise.p, "sh: warning\nffffffff", 20), 0);
        sh_buf_done(&noise);

        /* a line longer than the handshake's, then the handshake in the same read */
        h = (os_handshake){0};
        memcpy(h.nonce, NONCE, sizeof(h.nonce));
        memset(longline, 'z', sizeof(longline));
        longline[sizeof(longline) - 1] = '\n';
        ck_assert_uint_eq(os_handshake_feed(&h, longline, sizeof(longline), &noise),
                          sizeof(longline));
        ck_assert_int_eq(h.result, OS_HS_WAIT);
        ck_assert_uint_eq(os_handshake_feed(&h, NONCE " nodir\n", OS_NONCE_LEN + 7, &noise),
                          OS_NONCE_LEN + 7);
        ck_assert_int_eq(h.result, OS_HS_NODIR);
        ck_assert_uint_eq(noise.len, sizeof(longline));
        sh_buf_done(&noise);

        /* what came before it is kept up to OS_CAPTURE bytes, however much came */
        h = (os_handshake){0};
        memcpy(h.nonce, NONCE, sizeof(h.nonce));
        for (int i = 0; i < 100; i++)
                os_handshake_feed(&h, longline, sizeof(longline), &noise);
        ck_assert_int_eq(h.result, OS_HS_WAIT);
        ck_assert_uint_eq(noise.len, OS_CAPTURE);
        sh_buf_done(&noise);
}
END_TEST

static Suite *os_sse_suite(void)
{
        Suite *s = suite_create("os_sse");
        TCase *tc = tcase_create("events");
        tcase_add_test(tc, test_events_are_one_json_object_and_a_blank_line);
        tcase_add_test(tc, test_invalid_utf8_arrives_as_lone_surrogates_valid_utf8_unchanged);
        tcase_add_test(tc, test_the_encoder_splits_lines_per_stream_and_ends_once);
        tcase_add_test(tc, test_failures_and_signals_are_error_events_with_the_code_as_text);
        tcase_add_test(tc, test_a_flush_sends_the_last_unterminated_lines_and_the_encoder_goes_on);
        tcase_add_test(tc,
                       test_an_object_event_is_the_object_with_its_type_and_timestamp_on_one_line);
        tcase_add_test(tc, test_a_session_runs_state_is_taken_out_of_its_output);
        suite_add_tcase(s, tc);
        tc = tcase_create("handshake");
        tcase_add_test(tc, test_the_handshake_line_is_read_and_the_rest_is_output);
        tcase_add_test(tc, test_merged_lines_before_the_handshake_are_the_shells_own_output);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(os_sse_suite());
}
