/* test_egress_plan.c: the address plan of the sandboxes' range (egress/plan.c): networks
 * parsed strictly, the gateway, each slot's address and the range's capacity. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>

#include "sh/net.h"
#include "unit.h"

static const char *str(struct in_addr a)
{
        static char buf[INET_ADDRSTRLEN];

        return inet_ntop(AF_INET, &a, buf, sizeof(buf));
}

START_TEST(test_network_parsed_with_its_prefix)
{
        sh_egress_ipv4_net n;

        ck_assert_int_eq(sh_egress_ipv4_net_parse("100.127.0.0/16", &n), 0);
        ck_assert_str_eq(str(n.addr), "100.127.0.0");
        ck_assert_uint_eq(n.prefix, 16);
        ck_assert_int_eq(sh_egress_ipv4_net_parse("0.0.0.0/0", &n), 0);
        ck_assert_uint_eq(n.prefix, 0);
}
END_TEST

START_TEST(test_bare_address_is_a_slash_32)
{
        sh_egress_ipv4_net n;

        ck_assert_int_eq(sh_egress_ipv4_net_parse("192.0.2.7", &n), 0);
        ck_assert_str_eq(str(n.addr), "192.0.2.7");
        ck_assert_uint_eq(n.prefix, 32);
}
END_TEST

START_TEST(test_host_bits_and_malformed_networks_refused)
{
        static const char *bad[] = {"10.0.0.1/8",  "10.0.0.0/33",  "10.0.0.0/",   "10.0.0.0/08",
                                    "10.0.0.0/1a", "10.1/16",      "010.0.0.0/8", "",
                                    "/8",          "10.0.0.0/8/8", "256.0.0.0/8", "10.0.0.0/-1"};
        sh_egress_ipv4_net n;
        size_t i;

        for (i = 0; i < ARRAY_SIZE(bad); i++)
                ck_assert_msg(sh_egress_ipv4_net_parse(bad[i], &n) == -EINVAL, "%s", bad[i]);
}
END_TEST

START_TEST(test_gateway_first_host_then_slots)
{
        sh_egress_ipv4_net n;
        struct in_addr a;

        ck_assert_int_eq(sh_egress_ipv4_net_parse(SH_EGRESS_CIDR_DEFAULT, &n), 0);
        ck_assert_str_eq(str(sh_egress_gateway(&n)), "100.127.0.1");
        ck_assert_int_eq(sh_egress_slot_addr(&n, 0, &a), 0);
        ck_assert_str_eq(str(a), "100.127.0.2");
        ck_assert_int_eq(sh_egress_slot_addr(&n, 300, &a), 0);
        ck_assert_str_eq(str(a), "100.127.1.46");
}
END_TEST

START_TEST(test_range_capacity_bounds_the_slots)
{
        sh_egress_ipv4_net n;
        struct in_addr a;

        ck_assert_int_eq(sh_egress_ipv4_net_parse("100.127.0.0/16", &n), 0);
        ck_assert_uint_eq(sh_egress_slots(&n), 65534);
        ck_assert_int_eq(sh_egress_slot_addr(&n, 65533, &a), 0);
        ck_assert_str_eq(str(a), "100.127.255.255");
        ck_assert_int_eq(sh_egress_slot_addr(&n, 65534, &a), -ERANGE);
        ck_assert_int_eq(sh_egress_ipv4_net_parse("192.0.2.0/30", &n), 0);
        ck_assert_uint_eq(sh_egress_slots(&n), 2);
        ck_assert_int_eq(sh_egress_ipv4_net_parse("192.0.2.0/31", &n), 0);
        ck_assert_uint_eq(sh_egress_slots(&n), 0);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("egress_plan");
        TCase *tc = tcase_create("plan");

        tcase_add_test(tc, test_network_parsed_with_its_prefix);
        tcase_add_test(tc, test_bare_address_is_a_slash_32);
        tcase_add_test(tc, test_host_bits_and_malformed_networks_refused);
        tcase_add_test(tc, test_gateway_first_host_then_slots);
        tcase_add_test(tc, test_range_capacity_bounds_the_slots);
        suite_add_tcase(s, tc);
        return ut_run(s);
}
