/* test_cluster.c: the pure parts of the peers (cluster/peers-pure.c): a SANDBOX_HOST_PEERS
 * value, and what a peer's /healthz says of it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sh/cluster.h"
#include "unit.h"

static int parse(const char *s, sh_peers_spec *spec)
{
        char reason[256];
        int r = sh_peers_spec_parse(s, spec, reason, sizeof(reason));

        if (r < 0)
                ck_assert(reason[0] != '\0');
        return r;
}

START_TEST(test_dns_name_without_port_uses_the_listen_port)
{
        sh_peers_spec s;

        ck_assert_int_eq(parse("dns:sandbox-host-peers.ns.svc.cluster.local", &s), 0);
        ck_assert(s.dns);
        ck_assert_str_eq(s.name, "sandbox-host-peers.ns.svc.cluster.local");
        ck_assert_uint_eq(s.port, 0);
        ck_assert_ptr_null(s.urls);
        sh_peers_spec_done(&s);
}
END_TEST

START_TEST(test_dns_name_with_port)
{
        sh_peers_spec s;

        ck_assert_int_eq(parse("dns:peers:8080", &s), 0);
        ck_assert_str_eq(s.name, "peers");
        ck_assert_uint_eq(s.port, 8080);
        sh_peers_spec_done(&s);
}
END_TEST

START_TEST(test_dns_refuses_a_bad_name_or_port)
{
        sh_peers_spec s;

        ck_assert_int_eq(parse("dns:", &s), -EINVAL);
        ck_assert_int_eq(parse("dns:a..b", &s), -EINVAL);
        ck_assert_int_eq(parse("dns:-a", &s), -EINVAL);
        ck_assert_int_eq(parse("dns:a_b", &s), -EINVAL);
        ck_assert_int_eq(parse("dns:a/b", &s), -EINVAL);
        ck_assert_int_eq(parse("dns:peers:0", &s), -EINVAL);
        ck_assert_int_eq(parse("dns:peers:65536", &s), -EINVAL);
        ck_assert_int_eq(parse("dns:peers:", &s), -EINVAL);
        ck_assert_int_eq(parse("dns:peers:80x", &s), -EINVAL);
        ck_assert_ptr_null(s.name);
}
END_TEST

START_TEST(test_static_urls_are_normalised_with_their_port)
{
        sh_peers_spec s;

        ck_assert_int_eq(parse("static:http://10.0.0.1:8080,HTTP://Pod-B/,http://[fd00::1]:9", &s),
                         0);
        ck_assert(!s.dns);
        ck_assert_str_eq(s.urls[0], "http://10.0.0.1:8080");
        ck_assert_str_eq(s.urls[1], "http://pod-b:80");
        ck_assert_str_eq(s.urls[2], "http://[fd00::1]:9");
        ck_assert_ptr_null(s.urls[3]);
        sh_peers_spec_done(&s);
}
END_TEST

START_TEST(test_static_refuses_https_paths_and_empty_entries)
{
        sh_peers_spec s;

        ck_assert_int_eq(parse("static:https://a:1", &s), -EINVAL);
        ck_assert_int_eq(parse("static:http://a:1/x", &s), -EINVAL);
        ck_assert_int_eq(parse("static:http://u@a:1", &s), -EINVAL);
        ck_assert_int_eq(parse("static:http://a:1,,http://b:1", &s), -EINVAL);
        ck_assert_int_eq(parse("static:", &s), -EINVAL);
        ck_assert_int_eq(parse("static:http://", &s), -EINVAL);
        ck_assert_int_eq(parse("static:http://[zz]:1", &s), -EINVAL);
        ck_assert_int_eq(parse("static:http://a:99999", &s), -EINVAL);
        ck_assert_ptr_null(s.urls);
}
END_TEST

START_TEST(test_static_takes_at_most_the_bound)
{
        char buf[SH_CLUSTER_STATIC_MAX * 16 + 64];
        size_t off = 0;
        sh_peers_spec s;

        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "static:");
        for (int i = 0; i < SH_CLUSTER_STATIC_MAX; i++)
                off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%shttp://h%d", i ? "," : "",
                                        i);
        ck_assert_int_eq(parse(buf, &s), 0);
        sh_peers_spec_done(&s);
        snprintf(buf + off, sizeof(buf) - off, ",http://one-more");
        ck_assert_int_eq(parse(buf, &s), -EINVAL);
}
END_TEST

START_TEST(test_an_unknown_kind_is_refused)
{
        sh_peers_spec s;

        ck_assert_int_eq(parse("srv:peers", &s), -EINVAL);
        ck_assert_int_eq(parse("", &s), -EINVAL);
        ck_assert_int_eq(parse("http://a:1", &s), -EINVAL);
}
END_TEST

#define HEALTH(cluster) "{\"status\":\"ok\",\"cluster\":" cluster "}"

START_TEST(test_health_gives_token_instance_accepting_room)
{
        const char *b = HEALTH("{\"token\":\"0123abcd\",\"instance\":\"ff00\",\"accepting\":true,"
                               "\"room\":17,\"in_use\":3,\"peers\":2}");
        sh_peer_health h;

        ck_assert_int_eq(sh_peer_health_parse(b, strlen(b), &h), 0);
        ck_assert_str_eq(h.token, "0123abcd");
        ck_assert_str_eq(h.instance, "ff00");
        ck_assert(h.accepting);
        ck_assert_uint_eq(h.room, 17);
}
END_TEST

START_TEST(test_health_without_a_cluster_object_is_refused)
{
        const char *b = "{\"status\":\"ok\"}";
        sh_peer_health h;

        ck_assert_int_eq(sh_peer_health_parse(b, strlen(b), &h), -EINVAL);
        ck_assert_int_eq(sh_peer_health_parse("not json", 8, &h), -EINVAL);
        ck_assert_int_eq(sh_peer_health_parse(NULL, 0, &h), -EINVAL);
}
END_TEST

START_TEST(test_health_refuses_a_malformed_token)
{
        const char *bad[] = {
                HEALTH("{\"token\":\"0123ABCD\",\"instance\":\"a\",\"accepting\":true,\"room\":1}"),
                HEALTH("{\"token\":\"0123abc\",\"instance\":\"a\",\"accepting\":true,\"room\":1}"),
                HEALTH("{\"token\":7,\"instance\":\"a\",\"accepting\":true,\"room\":1}"),
        };
        sh_peer_health h;

        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
                ck_assert_int_eq(sh_peer_health_parse(bad[i], strlen(bad[i]), &h), -EINVAL);
}
END_TEST

START_TEST(test_health_refuses_a_bad_instance_accepting_or_room)
{
        const char *bad[] = {
                HEALTH("{\"token\":\"0123abcd\",\"instance\":\"\",\"accepting\":true,\"room\":1}"),
                HEALTH("{\"token\":\"0123abcd\",\"instance\":\"a/"
                       "b\",\"accepting\":true,\"room\":1}"),
                HEALTH("{\"token\":\"0123abcd\",\"instance\":\"0123456789abcdef0123456789abcdef0\","
                       "\"accepting\":true,\"room\":1}"),
                HEALTH("{\"token\":\"0123abcd\",\"instance\":\"a\",\"accepting\":1,\"room\":1}"),
                HEALTH("{\"token\":\"0123abcd\",\"instance\":\"a\",\"accepting\":true,\"room\":-"
                       "1}"),
                HEALTH("{\"token\":\"0123abcd\",\"instance\":\"a\",\"accepting\":true,\"room\":1."
                       "5}"),
                HEALTH("{\"token\":\"0123abcd\",\"instance\":\"a\",\"accepting\":true,\"room\":"
                       "1e300}"),
                HEALTH("{\"token\":\"0123abcd\",\"instance\":\"a\",\"accepting\":true}"),
        };
        sh_peer_health h;

        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
                ck_assert_int_eq(sh_peer_health_parse(bad[i], strlen(bad[i]), &h), -EINVAL);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("cluster");
        TCase *tc = tcase_create("pure");

        tcase_add_test(tc, test_dns_name_without_port_uses_the_listen_port);
        tcase_add_test(tc, test_dns_name_with_port);
        tcase_add_test(tc, test_dns_refuses_a_bad_name_or_port);
        tcase_add_test(tc, test_static_urls_are_normalised_with_their_port);
        tcase_add_test(tc, test_static_refuses_https_paths_and_empty_entries);
        tcase_add_test(tc, test_static_takes_at_most_the_bound);
        tcase_add_test(tc, test_an_unknown_kind_is_refused);
        tcase_add_test(tc, test_health_gives_token_instance_accepting_room);
        tcase_add_test(tc, test_health_without_a_cluster_object_is_refused);
        tcase_add_test(tc, test_health_refuses_a_malformed_token);
        tcase_add_test(tc, test_health_refuses_a_bad_instance_accepting_or_room);
        suite_add_tcase(s, tc);
        return ut_run(s);
}
