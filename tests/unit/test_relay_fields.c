/* test_relay_fields.c: which header fields a relay passes (src/cluster/relay.c): a request's
 * to the peer, an answer's back to the client; hop-by-hop ones never, nor those the message's
 * Connection header names, any case. */
#include <check.h>

#include "sh/relay.h"
#include "unit.h"

START_TEST(test_end_to_end_request_fields_go_to_the_peer)
{
        const char *kept[] = {"X-Request-ID",
                              "OPEN-SANDBOX-API-KEY",
                              "X-EXECD-ACCESS-TOKEN",
                              "Content-Type",
                              "Range",
                              "Accept",
                              "User-Agent",
                              "Cookie"};

        for (size_t i = 0; i < ARRAY_SIZE(kept); i++)
                ck_assert_msg(sh_relay_request_field_kept(kept[i], NULL), "%s", kept[i]);
}
END_TEST

START_TEST(test_hop_by_hop_request_fields_stay_here)
{
        const char *dropped[] = {"Connection",
                                 "keep-alive",
                                 "Proxy-Authorization",
                                 "TE",
                                 "Trailer",
                                 "Transfer-Encoding",
                                 "Upgrade",
                                 "Host",
                                 "Content-Length",
                                 "Expect",
                                 "x-sandbox-host-hop"};

        for (size_t i = 0; i < ARRAY_SIZE(dropped); i++)
                ck_assert_msg(!sh_relay_request_field_kept(dropped[i], NULL), "%s", dropped[i]);
}
END_TEST

START_TEST(test_a_field_named_by_connection_is_hop_by_hop)
{
        ck_assert(!sh_relay_request_field_kept("X-Private", "close, x-private"));
        ck_assert(!sh_relay_answer_field_kept("X-Private", "X-Private"));
        ck_assert(sh_relay_request_field_kept("X-Private-Not", "close, x-private"));
        ck_assert(sh_relay_request_field_kept("X-Private", ""));
}
END_TEST

START_TEST(test_answer_fields_come_back_but_their_request_id_and_framing)
{
        ck_assert(sh_relay_answer_field_kept("Content-Type", NULL));
        ck_assert(sh_relay_answer_field_kept("Content-Range", NULL));
        ck_assert(sh_relay_answer_field_kept("Retry-After", NULL));
        ck_assert(sh_relay_answer_field_kept("Date", NULL));
        ck_assert(!sh_relay_answer_field_kept("X-Request-Id", NULL));
        ck_assert(!sh_relay_answer_field_kept("content-length", NULL));
        ck_assert(!sh_relay_answer_field_kept("Transfer-Encoding", NULL));
        ck_assert(!sh_relay_answer_field_kept("Connection", NULL));
        ck_assert(!sh_relay_answer_field_kept("Keep-Alive", NULL));
}
END_TEST

static Suite *relay_fields_suite(void)
{
        Suite *s = suite_create("relay_fields");
        TCase *tc = tcase_create("relay_fields");

        tcase_add_test(tc, test_end_to_end_request_fields_go_to_the_peer);
        tcase_add_test(tc, test_hop_by_hop_request_fields_stay_here);
        tcase_add_test(tc, test_a_field_named_by_connection_is_hop_by_hop);
        tcase_add_test(tc, test_answer_fields_come_back_but_their_request_id_and_framing);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(relay_fields_suite());
}
