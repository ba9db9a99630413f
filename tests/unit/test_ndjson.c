/* test_ndjson.c: the native surface's NDJSON encoding of exec events (CONTRACT.md section 4),
 * byte for byte. */
#include <check.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "sh/native.h"

/* The frames appended to a fresh queue for one event, as a string. */
static char *frame(const sh_exec_event *ev)
{
        sh_buf q = {0};
        char *s;

        ck_assert_int_eq(sh_ndjson_event(&q, ev), 0);
        s = malloc(q.len + 1); /* q is not a C string: no strndup */
        ck_assert_ptr_nonnull(s);
        memcpy(s, q.p ? q.p : "", q.len);
        s[q.len] = '\0';
        sh_buf_done(&q);
        return s;
}

static void assert_frame(const sh_exec_event *ev, const char *want)
{
        char *got = frame(ev);

        ck_assert_str_eq(got, want);
        free(got);
}

START_TEST(test_chunk_is_o_with_base64)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_CHUNK};

        ev.chunk.stream = SH_EXEC_STDOUT;
        ev.chunk.data = "hello\n";
        ev.chunk.len = 6;
        assert_frame(&ev, "{\"o\":\"aGVsbG8K\"}\n");
}
END_TEST

START_TEST(test_stderr_chunk_is_the_same_o_frame)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_CHUNK};

        /* the native contract interleaves both streams in arrival order */
        ev.chunk.stream = SH_EXEC_STDERR;
        ev.chunk.data = "err";
        ev.chunk.len = 3;
        assert_frame(&ev, "{\"o\":\"ZXJy\"}\n");
}
END_TEST

START_TEST(test_binary_chunk_keeps_every_byte)
{
        static const char bytes[] = {0, 1, (char)0xff, '"', '\n', (char)0x80};
        sh_exec_event ev = {.type = SH_EXEC_EV_CHUNK};

        ev.chunk.data = bytes;
        ev.chunk.len = sizeof(bytes);
        assert_frame(&ev, "{\"o\":\"AAH/IgqA\"}\n");
}
END_TEST

START_TEST(test_heartbeat_is_the_empty_chunk)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_HEARTBEAT};

        assert_frame(&ev, "{\"o\":\"\"}\n");
}
END_TEST

START_TEST(test_exit_has_code_and_both_buffers)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_EXIT};

        ev.exit.code = 3;
        ev.exit.out = "out";
        ev.exit.out_len = 3;
        ev.exit.err = "";
        ev.exit.err_len = 0;
        assert_frame(&ev, "{\"exit\":3,\"out\":\"b3V0\",\"err\":\"\"}\n");
}
END_TEST

START_TEST(test_exit_by_signal_oom_truncated_adds_the_fields_in_order)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_EXIT};

        ev.exit.code = 137;
        ev.exit.signal = 9;
        ev.exit.oom = true;
        ev.exit.truncated = true;
        ev.exit.out = "";
        ev.exit.err = "e";
        ev.exit.err_len = 1;
        assert_frame(&ev, "{\"exit\":137,\"out\":\"\",\"err\":\"ZQ==\",\"signal\":9,\"oom\":true,"
                          "\"truncated\":true}\n");
        ev.exit.oom = false;
        ev.exit.truncated = false;
        assert_frame(&ev, "{\"exit\":137,\"out\":\"\",\"err\":\"ZQ==\",\"signal\":9}\n");
        ev.exit.signal = 0;
        ev.exit.code = 0;
        ev.exit.truncated = true;
        assert_frame(&ev, "{\"exit\":0,\"out\":\"\",\"err\":\"ZQ==\",\"truncated\":true}\n");
}
END_TEST

START_TEST(test_error_has_the_contract_type_of_its_kind)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_ERROR};

        ev.error.kind = SH_E_SANDBOX_NOT_FOUND;
        ev.error.text = "the sandbox was deleted";
        assert_frame(&ev,
                     "{\"error\":\"SandboxNotFound\",\"detail\":\"the sandbox was deleted\"}\n");
        ev.error.kind = SH_E_CANCELLED;
        ev.error.text = "the client went away";
        assert_frame(&ev, "{\"error\":\"Cancelled\",\"detail\":\"the client went away\"}\n");
        ev.error.kind = SH_E_INTERNAL;
        ev.error.text = "a \"quoted\" word";
        assert_frame(&ev, "{\"error\":\"Internal\",\"detail\":\"a \\\"quoted\\\" word\"}\n");
}
END_TEST

START_TEST(test_frames_append_behind_unread_ones)
{
        sh_exec_event a = {.type = SH_EXEC_EV_CHUNK}, hb = {.type = SH_EXEC_EV_HEARTBEAT};
        sh_buf q = {0};

        a.chunk.data = "ab";
        a.chunk.len = 2;
        ck_assert_int_eq(sh_ndjson_event(&q, &a), 0);
        q.off = 3; /* the transport took "{\"o" already */
        ck_assert_int_eq(sh_ndjson_event(&q, &hb), 0);
        ck_assert_uint_eq(sh_buf_unread(&q), strlen("\":\"YWI=\"}\n{\"o\":\"\"}\n"));
        ck_assert_int_eq(memcmp(q.p + q.off, "\":\"YWI=\"}\n{\"o\":\"\"}\n", sh_buf_unread(&q)), 0);
        sh_buf_done(&q);
}
END_TEST

START_TEST(test_large_chunk_decodes_to_itself)
{
        static unsigned char data[256 * 1024 + 1];
        sh_exec_event ev = {.type = SH_EXEC_EV_CHUNK};
        unsigned char *back = malloc(sizeof(data));
        size_t got = 0;
        char *f;

        ck_assert_ptr_nonnull(back);
        randombytes_buf(data, sizeof(data));
        ev.chunk.data = (const char *)data;
        ev.chunk.len = sizeof(data);
        f = frame(&ev);
        ck_assert_int_eq(strncmp(f, "{\"o\":\"", 6), 0);
        ck_assert_int_eq(strcmp(f + strlen(f) - 3, "\"}\n"), 0);
        ck_assert_int_eq(sodium_base642bin(back, sizeof(data), f + 6, strlen(f) - 9, NULL, &got,
                                           NULL, sodium_base64_VARIANT_ORIGINAL),
                         0);
        ck_assert_uint_eq(got, sizeof(data));
        ck_assert_int_eq(memcmp(back, data, sizeof(data)), 0);
        free(f);
        free(back);
}
END_TEST

static Suite *ndjson_suite(void)
{
        Suite *s = suite_create("ndjson");
        TCase *tc = tcase_create("ndjson");

        tcase_add_test(tc, test_chunk_is_o_with_base64);
        tcase_add_test(tc, test_stderr_chunk_is_the_same_o_frame);
        tcase_add_test(tc, test_binary_chunk_keeps_every_byte);
        tcase_add_test(tc, test_heartbeat_is_the_empty_chunk);
        tcase_add_test(tc, test_exit_has_code_and_both_buffers);
        tcase_add_test(tc, test_exit_by_signal_oom_truncated_adds_the_fields_in_order);
        tcase_add_test(tc, test_error_has_the_contract_type_of_its_kind);
        tcase_add_test(tc, test_frames_append_behind_unread_ones);
        tcase_add_test(tc, test_large_chunk_decodes_to_itself);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr;
        int failed;

        if (sodium_init() < 0)
                return 1;
        sr = srunner_create(ndjson_suite());
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
