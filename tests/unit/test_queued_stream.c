/* test_queued_stream.c: the transport's queued stream (src/http/stream.c): what a producer
 * pushes is read byte for byte, the end after the last byte, the high and low marks, the
 * keepalive after a silence, the client's disconnect, its 200 answer; and a body read by offset
 * (pending.c: sh_response_read_at). The request is a bare one (no connection): the stream is
 * read as the transport reads it, through its token. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/http/http-internal.h"
#include "sh/http.h"
#include "unit.h"

#define SAFETY_MS 2000 /* every loop run is bounded by a timer that fails the test */

typedef struct producer {
        int high, low, gone, released, keepalives;
        int order; /* 1: gone came before the low that followed it */
        uint64_t last_push_ms;
        uint64_t keepalive_ms;
        int stop_after; /* keepalives, then the loop stops */
} producer;

static sh_loop *loop;
static sh_request *req;
static sh_pending *tok; /* the stream's token, as the transport holds it */
static producer pr;

/* high counts the stops, low the goes-on */
static void on_backpressure(void *data, bool stop)
{
        producer *p = data;

        if (stop) {
                p->high++;
                return;
        }
        p->low++;
        if (p->gone && !p->order)
                p->order = 1;
}

static void on_gone(void *data)
{
        ((producer *)data)->gone++;
}

static void on_release(void *data)
{
        ((producer *)data)->released++;
}

static int on_keepalive(void *data, sh_buf *q)
{
        producer *p = data;

        /* never early: the silence since the last push is a whole period */
        ck_assert_uint_ge(sh_now_ms() - p->last_push_ms, p->keepalive_ms);
        p->keepalives++;
        if (p->stop_after && p->keepalives >= p->stop_after)
                sh_loop_stop(loop);
        p->last_push_ms = sh_now_ms(); /* a keepalive is a push too */
        return sh_buf_append(q, "ka\n", 3);
}

static const sh_queued_stream_ops ops = {
        .backpressure = on_backpressure,
        .keepalive = on_keepalive,
        .gone = on_gone,
        .release = on_release,
};
static const sh_queued_stream_ops no_marks_ops = {.release = on_release};

static void setup(void)
{
        memset(&pr, 0, sizeof(pr));
        ck_assert_int_eq(sh_loop_new(&loop), 0);
        req = calloc(1, sizeof(*req));
        ck_assert_ptr_nonnull(req);
}

static void teardown(void)
{
        free(req);
        sh_loop_free(loop);
}

static sh_queued_stream *open_stream(const sh_queued_stream_ops *o, size_t high, size_t low,
                                     uint64_t keepalive_ms)
{
        const sh_queued_stream_opts opts = {
                .high = high, .low = low, .keepalive_ms = keepalive_ms, .block = 4096};
        sh_queued_stream *s = sh_queued_stream_new(req, loop, o, &opts, &pr);

        ck_assert_ptr_nonnull(s);
        tok = req->token;
        ck_assert_ptr_nonnull(tok);
        pr.keepalive_ms = keepalive_ms;
        return s;
}

/* One read of the transport: up to max bytes. */
static ssize_t take(char *out, size_t max)
{
        return tok->ops->read(tok->data, out, max);
}

/* Everything queued now, as a string (at most 255 bytes), read `step` bytes at a time. */
static const char *take_all(size_t step)
{
        static char got[256];
        size_t len = 0;
        ssize_t n;

        while ((n = take(got + len, step < sizeof(got) - 1 - len ? step : 0)) > 0)
                len += (size_t)n;
        got[len] = '\0';
        return got;
}

static void push(sh_queued_stream *s, const char *text)
{
        pr.last_push_ms = sh_now_ms();
        ck_assert_int_eq(sh_queued_stream_push(s, text, strlen(text)), 0);
}

/* The request ends and the stream's last references go: the producer's, the response's. */
static void finish(sh_queued_stream *s, sh_response *resp)
{
        sh_pending_request_ended(req);
        if (resp)
                MHD_destroy_response(resp);
        sh_queued_stream_release(s);
        ck_assert_int_eq(pr.released, 1);
}

START_TEST(test_pushed_bytes_are_read_byte_for_byte_in_order)
{
        sh_queued_stream *s = open_stream(&ops, 0, 0, 0);
        static const char bin[] = {'a', 0, '\n', (char)0xff};
        char out[16];

        ck_assert_int_eq(take(out, sizeof(out)), 0); /* nothing yet: the connection waits */
        push(s, "one\n");
        push(s, "two\n");
        ck_assert_int_eq(sh_queued_stream_push(s, bin, sizeof(bin)), 0);
        ck_assert_uint_eq(sh_queued_stream_unread(s), 12);
        ck_assert_int_eq(take(out, 3), 3); /* a read takes at most what it is given */
        ck_assert_mem_eq(out, "one", 3);
        ck_assert_int_eq(take(out, sizeof(out)), 9);
        ck_assert_mem_eq(out, "\ntwo\na\0\n\xff", 9);
        ck_assert_int_eq(take(out, sizeof(out)), 0);
        finish(s, NULL);
}
END_TEST

START_TEST(test_an_encoder_appends_whole_frames_then_says_so)
{
        sh_queued_stream *s = open_stream(&ops, 0, 0, 0);
        sh_buf *q = sh_queued_stream_queue(s);

        ck_assert_int_eq(sh_buf_append(q, "{\"o\":\"\"}\n", 9), 0);
        sh_queued_stream_pushed(s);
        ck_assert_str_eq(take_all(4), "{\"o\":\"\"}\n");
        finish(s, NULL);
}
END_TEST

START_TEST(test_the_end_is_read_after_the_last_byte)
{
        sh_queued_stream *s = open_stream(&ops, 0, 0, 0);
        char out[16];

        push(s, "last\n");
        sh_queued_stream_end(s);
        sh_queued_stream_end(s); /* once is enough: a second changes nothing */
        ck_assert_int_eq(take(out, 2), 2);
        ck_assert_int_eq(take(out, sizeof(out)), 3);
        ck_assert_mem_eq(out, "st\n", 3);
        ck_assert_int_eq(take(out, sizeof(out)), SH_STREAM_END);
        ck_assert_int_eq(take(out, sizeof(out)), SH_STREAM_END);
        ck_assert_int_eq(pr.gone, 0);
        finish(s, NULL);
        ck_assert_int_eq(pr.gone, 1); /* the request's end is told all the same */
}
END_TEST

START_TEST(test_a_cut_stream_is_cut_after_what_it_holds)
{
        sh_queued_stream *s = open_stream(&ops, 0, 0, 0);
        char out[16];

        push(s, "part");
        sh_queued_stream_cut(s);
        sh_queued_stream_end(s); /* already over: still cut */
        ck_assert_int_eq(take(out, sizeof(out)), 4);
        ck_assert_mem_eq(out, "part", 4);
        ck_assert_int_eq(take(out, sizeof(out)), SH_STREAM_CUT);
        finish(s, NULL);
}
END_TEST

START_TEST(test_past_the_high_mark_the_producer_stops_and_under_the_low_goes_on)
{
        sh_queued_stream *s = open_stream(&ops, 10, 5, 0);
        char out[16];

        push(s, "12345678"); /* 8: under the mark */
        ck_assert_int_eq(pr.high, 0);
        push(s, "abc"); /* 11: past it */
        ck_assert_int_eq(pr.high, 1);
        push(s, "more"); /* still past it: told once */
        ck_assert_int_eq(pr.high, 1);
        ck_assert_int_eq(take(out, 10), 10); /* 5 left: not under 5 */
        ck_assert_int_eq(pr.low, 0);
        ck_assert_int_eq(take(out, 1), 1); /* 4 left */
        ck_assert_int_eq(pr.low, 1);
        ck_assert_int_eq(take(out, sizeof(out)), 4);
        ck_assert_int_eq(pr.low, 1);
        push(s, "0123456789x"); /* past it again: told again */
        ck_assert_int_eq(pr.high, 2);
        finish(s, NULL);
}
END_TEST

START_TEST(test_a_stream_without_marks_never_stops_its_producer)
{
        sh_queued_stream *s = open_stream(&no_marks_ops, 10, 5, 0);

        push(s, "0123456789abcdef");
        ck_assert_int_eq(pr.high, 0);
        ck_assert_str_eq(take_all(64), "0123456789abcdef");
        ck_assert_int_eq(pr.low, 0);
        finish(s, NULL);
}
END_TEST

START_TEST(test_the_clients_disconnect_is_gone_once_and_lets_a_stopped_producer_go)
{
        sh_queued_stream *s = open_stream(&ops, 4, 2, 0);

        push(s, "0123456789");
        ck_assert_int_eq(pr.high, 1);
        ck_assert_ptr_eq(sh_queued_stream_request(s), req);
        sh_pending_request_ended(req); /* the client went away, nothing read */
        ck_assert_int_eq(pr.gone, 1);
        ck_assert_int_eq(pr.low, 1); /* nobody reads any more: it goes on */
        ck_assert_int_eq(pr.order, 1);
        ck_assert_ptr_null(sh_queued_stream_request(s));
        ck_assert_uint_eq(sh_queued_stream_unread(s), 0); /* what was queued is dropped */
        push(s, "late");                                  /* and what comes later */
        ck_assert_uint_eq(sh_queued_stream_unread(s), 0);
        ck_assert_int_eq(pr.high, 1);
        ck_assert_int_eq(pr.released, 0); /* the producer's reference still holds it */
        sh_queued_stream_release(s);
        ck_assert_int_eq(pr.released, 1);
        ck_assert_int_eq(pr.gone, 1);
}
END_TEST

START_TEST(test_the_last_reference_frees_the_stream_whichever_goes_last)
{
        sh_queued_stream *s = open_stream(&ops, 0, 0, 0);
        sh_response *resp = sh_queued_stream_response(s);

        ck_assert_ptr_nonnull(resp);
        ck_assert_ptr_null(sh_queued_stream_response(s)); /* one response */
        push(s, "queued");
        sh_queued_stream_end(s);
        sh_queued_stream_release(s); /* the producer lets go first: still read to its end */
        ck_assert_int_eq(pr.released, 0);
        ck_assert_str_eq(take_all(4), "queued");
        ck_assert_int_eq(take(NULL, 0), SH_STREAM_END);
        sh_pending_request_ended(req);
        ck_assert_int_eq(pr.released, 0);
        MHD_destroy_response(resp); /* the response's reference, the last */
        ck_assert_int_eq(pr.released, 1);
}
END_TEST

START_TEST(test_a_close_ends_the_stream_and_lets_the_producers_reference_go)
{
        sh_queued_stream *s = open_stream(&ops, 0, 0, 0);
        char out[16];

        push(s, "bye\n");
        sh_queued_stream_close(s);
        sh_queued_stream_close(NULL); /* nothing */
        ck_assert_str_eq(take_all(16), "bye\n");
        ck_assert_int_eq(take(out, sizeof(out)), SH_STREAM_END);
        ck_assert_int_eq(pr.released, 0); /* the request's reference remains */
        sh_pending_request_ended(req);
        ck_assert_int_eq(pr.released, 1);
}
END_TEST

START_TEST(test_the_reply_is_a_200_with_the_headers_given)
{
        static const sh_header headers[] = {
                {"Content-Type", "text/event-stream"}, {"X-A", "b"}, {NULL, NULL}};
        sh_queued_stream *s = open_stream(&ops, 0, 0, 0);
        sh_response *resp;

        ck_assert_int_eq(sh_queued_stream_reply(s, headers), 0);
        resp = req->pending;
        ck_assert_ptr_nonnull(resp);
        ck_assert_uint_eq(req->pending_status, 200);
        ck_assert_str_eq(MHD_get_response_header(resp, "Content-Type"), "text/event-stream");
        ck_assert_str_eq(MHD_get_response_header(resp, "X-A"), "b");
        ck_assert_int_eq(sh_queued_stream_reply(s, headers), -ENOMEM); /* one response */
        sh_pending_request_ended(req);
        sh_queued_stream_release(s);
        MHD_destroy_response(resp);
        ck_assert_int_eq(pr.released, 1);
}
END_TEST

START_TEST(test_a_stream_whose_request_ended_is_not_answered)
{
        static const sh_header headers[] = {{"Content-Type", "text/plain"}, {NULL, NULL}};
        sh_queued_stream *s = open_stream(&ops, 0, 0, 0);

        sh_pending_request_ended(req);
        ck_assert_int_eq(sh_queued_stream_reply(s, headers), 0);
        ck_assert_ptr_null(req->pending);
        ck_assert(!req->responded);
        sh_queued_stream_release(s);
        ck_assert_int_eq(pr.released, 1);
}
END_TEST

/* ---- sh_response_read_at ---- */

typedef struct source {
        const char *bytes;
        uint64_t fail_at; /* a read from here on gives nothing (0: never) */
        int reads, released;
} source;

static ssize_t source_read_at(void *data, uint64_t off, char *out, size_t n)
{
        source *src = data;

        src->reads++;
        if (src->fail_at && off >= src->fail_at)
                return -ESTALE;
        memcpy(out, src->bytes + off, n);
        return (ssize_t)n;
}

static void source_release(void *data)
{
        ((source *)data)->released++;
}

static const sh_read_at_ops source_ops = {.read_at = source_read_at, .release = source_release};

START_TEST(test_a_read_at_body_is_its_range_read_a_step_at_a_time)
{
        source src = {.bytes = "0123456789"};
        sh_response *resp = sh_response_read_at(req, 2, 9, 3, &source_ops, &src);
        char out[16];

        ck_assert_ptr_nonnull(resp);
        tok = req->token;
        ck_assert_int_eq(take(out, sizeof(out)), 3); /* never more than a step */
        ck_assert_mem_eq(out, "234", 3);
        ck_assert_int_eq(take(out, 2), 2);
        ck_assert_mem_eq(out, "56", 2);
        ck_assert_int_eq(take(out, sizeof(out)), 2); /* never past its end */
        ck_assert_mem_eq(out, "78", 2);
        ck_assert_int_eq(take(out, sizeof(out)), SH_STREAM_END);
        ck_assert_int_eq(src.reads, 3);
        sh_pending_request_ended(req);
        ck_assert_int_eq(src.released, 0);
        MHD_destroy_response(resp);
        ck_assert_int_eq(src.released, 1);
}
END_TEST

START_TEST(test_a_read_at_body_is_cut_where_its_bytes_are_gone)
{
        source src = {.bytes = "0123456789", .fail_at = 4};
        sh_response *resp = sh_response_read_at(req, 0, 10, 4, &source_ops, &src);
        char out[16];

        ck_assert_ptr_nonnull(resp);
        tok = req->token;
        ck_assert_int_eq(take(out, sizeof(out)), 4);
        ck_assert_int_eq(take(out, sizeof(out)), SH_STREAM_CUT);
        sh_pending_request_ended(req);
        MHD_destroy_response(resp);
        ck_assert_int_eq(src.released, 1);
}
END_TEST

START_TEST(test_an_empty_read_at_range_is_an_empty_body_read_never)
{
        source src = {.bytes = ""};
        sh_response *resp = sh_response_read_at(req, 5, 5, 4, &source_ops, &src);

        ck_assert_ptr_nonnull(resp);
        ck_assert_ptr_null(req->token); /* nothing waits */
        ck_assert_int_eq(src.released, 1);
        ck_assert_int_eq(src.reads, 0);
        MHD_destroy_response(resp);
}
END_TEST

static void on_safety(sh_loop *l, sh_timer *t, void *data)
{
        *(bool *)data = true;
        sh_loop_stop(l);
}

static void run_bounded(void)
{
        bool hit = false;
        sh_timer *safety = sh_loop_add_timer(loop, SAFETY_MS, on_safety, &hit);

        ck_assert_ptr_nonnull(safety);
        ck_assert_int_eq(sh_loop_run(loop), 0);
        ck_assert_msg(!hit, "the loop ran into the %u ms safety timer", SAFETY_MS);
        sh_loop_cancel_timer(loop, safety);
}

START_TEST(test_a_keepalive_frame_comes_after_each_silence_once_answered)
{
        sh_queued_stream *s = open_stream(&ops, 0, 0, 20);
        sh_response *resp;

        push(s, "data\n"); /* before the response: no keepalive counts yet */
        pr.last_push_ms = sh_now_ms();
        resp = sh_queued_stream_response(s);
        ck_assert_ptr_nonnull(resp);
        pr.stop_after = 3;
        run_bounded(); /* on_keepalive checks each came after a whole silence */
        ck_assert_int_eq(pr.keepalives, 3);
        ck_assert_str_eq(take_all(64), "data\nka\nka\nka\n");
        finish(s, resp);
}
END_TEST

static sh_queued_stream *pushing;

static void on_push_later(sh_loop *l, sh_timer *t, void *data)
{
        push(pushing, "later\n");
}

START_TEST(test_a_push_puts_the_keepalive_off_by_a_whole_period)
{
        sh_queued_stream *s = open_stream(&ops, 0, 0, 60);
        sh_response *resp = sh_queued_stream_response(s);

        pr.last_push_ms = sh_now_ms();
        ck_assert_ptr_nonnull(resp);
        pushing = s;
        /* a push in the middle of the first period: the keepalive waits a whole period from
         * it (on_keepalive checks), and comes after it */
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 30, on_push_later, NULL));
        pr.stop_after = 1;
        run_bounded();
        ck_assert_str_eq(take_all(64), "later\nka\n");
        finish(s, resp);
}
END_TEST

static void on_stop(sh_loop *l, sh_timer *t, void *data)
{
        sh_loop_stop(l);
}

START_TEST(test_no_keepalive_once_ended)
{
        sh_queued_stream *s = open_stream(&ops, 0, 0, 10);
        sh_response *resp = sh_queued_stream_response(s);

        ck_assert_ptr_nonnull(resp);
        sh_queued_stream_end(s);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 50, on_stop, NULL));
        run_bounded();
        ck_assert_int_eq(pr.keepalives, 0); /* no timer was left to fire it */
        ck_assert_int_eq(take(NULL, 0), SH_STREAM_END);
        finish(s, resp);
}
END_TEST

static Suite *queued_stream_suite(void)
{
        Suite *s = suite_create("queued_stream");
        TCase *tc = tcase_create("bytes");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_pushed_bytes_are_read_byte_for_byte_in_order);
        tcase_add_test(tc, test_an_encoder_appends_whole_frames_then_says_so);
        tcase_add_test(tc, test_the_end_is_read_after_the_last_byte);
        tcase_add_test(tc, test_a_cut_stream_is_cut_after_what_it_holds);
        tcase_add_test(tc, test_a_close_ends_the_stream_and_lets_the_producers_reference_go);
        tcase_add_test(tc, test_the_reply_is_a_200_with_the_headers_given);
        tcase_add_test(tc, test_a_stream_whose_request_ended_is_not_answered);
        suite_add_tcase(s, tc);
        tc = tcase_create("read_at");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_a_read_at_body_is_its_range_read_a_step_at_a_time);
        tcase_add_test(tc, test_a_read_at_body_is_cut_where_its_bytes_are_gone);
        tcase_add_test(tc, test_an_empty_read_at_range_is_an_empty_body_read_never);
        suite_add_tcase(s, tc);
        tc = tcase_create("backpressure");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_past_the_high_mark_the_producer_stops_and_under_the_low_goes_on);
        tcase_add_test(tc, test_a_stream_without_marks_never_stops_its_producer);
        suite_add_tcase(s, tc);
        tc = tcase_create("lifetime");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_the_clients_disconnect_is_gone_once_and_lets_a_stopped_producer_go);
        tcase_add_test(tc, test_the_last_reference_frees_the_stream_whichever_goes_last);
        suite_add_tcase(s, tc);
        tc = tcase_create("keepalive");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_a_keepalive_frame_comes_after_each_silence_once_answered);
        tcase_add_test(tc, test_a_push_puts_the_keepalive_off_by_a_whole_period);
        tcase_add_test(tc, test_no_keepalive_once_ended);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(queued_stream_suite());
}
