/* test_dnsmsg.c: the DNS proxy's messages (src/egress/dnsmsg.c): a query parsed, the proxy's
 * own answers built (NXDOMAIN, empty AAAA, truncated), an upstream's answer checked against
 * its question and id and its A records collected along the CNAME chain with clamped TTLs,
 * hostile messages refused, the upstream setting and resolv.conf read. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <string.h>

#include "sh/dns.h"
#include "unit.h"

typedef struct msg {
        uint8_t b[2048];
        size_t n;
} msg;

static void u8(msg *m, uint8_t v)
{
        m->b[m->n++] = v;
}

static void u16(msg *m, uint16_t v)
{
        u8(m, (uint8_t)(v >> 8));
        u8(m, (uint8_t)v);
}

static void u32(msg *m, uint32_t v)
{
        u16(m, (uint16_t)(v >> 16));
        u16(m, (uint16_t)v);
}

/* A dotted name in wire form, uncompressed. */
static void name(msg *m, const char *dotted)
{
        while (*dotted) {
                const char *dot = strchr(dotted, '.');
                size_t l = dot ? (size_t)(dot - dotted) : strlen(dotted);

                u8(m, (uint8_t)l);
                memcpy(m->b + m->n, dotted, l);
                m->n += l;
                dotted += l + (dot ? 1 : 0);
        }
        u8(m, 0);
}

static void header(msg *m, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an, uint16_t ns,
                   uint16_t ar)
{
        m->n = 0;
        u16(m, id);
        u16(m, flags);
        u16(m, qd);
        u16(m, an);
        u16(m, ns);
        u16(m, ar);
}

/* A message's header and its one question (IN). */
static void head(msg *m, uint16_t id, uint16_t flags, uint16_t an, const char *qname,
                 uint16_t qtype)
{
        header(m, id, flags, 1, an, 0, 0);
        name(m, qname);
        u16(m, qtype);
        u16(m, SH_DNS_CLASS_IN);
}

static void query(msg *m, uint16_t id, const char *qname, uint16_t qtype)
{
        head(m, id, 0x0100, 0, qname, qtype);
}

/* A record: owner as a pointer to offset `ptr` (0: the dotted name `owner`). */
static void rr_head(msg *m, const char *owner, uint16_t ptr, uint16_t type, uint32_t ttl,
                    uint16_t rdlen)
{
        if (ptr)
                u16(m, 0xC000 | ptr);
        else
                name(m, owner);
        u16(m, type);
        u16(m, SH_DNS_CLASS_IN);
        u32(m, ttl);
        u16(m, rdlen);
}

static void rr_a(msg *m, const char *owner, uint16_t ptr, uint32_t ttl, const char *ip)
{
        struct in_addr a;

        ck_assert_int_eq(inet_pton(AF_INET, ip, &a), 1);
        rr_head(m, owner, ptr, SH_DNS_TYPE_A, ttl, 4);
        memcpy(m->b + m->n, &a, 4);
        m->n += 4;
}

static void rr_cname(msg *m, const char *owner, uint16_t ptr, uint32_t ttl, const char *target)
{
        size_t at;

        rr_head(m, owner, ptr, SH_DNS_TYPE_CNAME, ttl, 0);
        at = m->n;
        name(m, target);
        m->b[at - 2] = (uint8_t)((m->n - at) >> 8);
        m->b[at - 1] = (uint8_t)(m->n - at);
}

static sh_dns_query parsed(const char *qname, uint16_t qtype)
{
        msg m;
        sh_dns_query q;

        query(&m, 0x1234, qname, qtype);
        ck_assert_int_eq(sh_dns_query_parse(m.b, m.n, &q), 0);
        return q;
}

static const char *ip(struct in_addr a)
{
        static char buf[INET_ADDRSTRLEN];

        return inet_ntop(AF_INET, &a, buf, sizeof(buf));
}

START_TEST(test_a_query_gives_its_id_type_and_lower_case_name)
{
        sh_dns_query q = parsed("PyPI.Org", SH_DNS_TYPE_A);

        ck_assert_uint_eq(q.id, 0x1234);
        ck_assert(q.rd);
        ck_assert_uint_eq(q.qtype, SH_DNS_TYPE_A);
        ck_assert_str_eq(q.name, "pypi.org");
        ck_assert_uint_eq(q.udp_size, SH_DNS_UDP_MIN);
}
END_TEST

START_TEST(test_an_edns_payload_size_is_the_clients_udp_size_up_to_4096)
{
        msg m;
        sh_dns_query q;

        query(&m, 1, "pypi.org", SH_DNS_TYPE_A);
        m.b[11] = 1; /* one additional record: OPT, root owner, class = payload size */
        u8(&m, 0);
        u16(&m, SH_DNS_TYPE_OPT);
        u16(&m, 1232);
        u32(&m, 0);
        u16(&m, 0);
        ck_assert_int_eq(sh_dns_query_parse(m.b, m.n, &q), 0);
        ck_assert_uint_eq(q.udp_size, 1232);
        m.b[m.n - 8] = 0xFF; /* 0xFFD0 */
        ck_assert_int_eq(sh_dns_query_parse(m.b, m.n, &q), 0);
        ck_assert_uint_eq(q.udp_size, 4096);
}
END_TEST

START_TEST(test_a_name_with_a_dot_inside_a_label_is_no_host_name)
{
        msg m;
        sh_dns_query q;

        header(&m, 1, 0, 1, 0, 0, 0);
        u8(&m, 8);
        memcpy(m.b + m.n, "pypi.org", 8);
        m.n += 8;
        u8(&m, 0);
        u16(&m, SH_DNS_TYPE_A);
        u16(&m, SH_DNS_CLASS_IN);
        ck_assert_int_eq(sh_dns_query_parse(m.b, m.n, &q), 0);
        ck_assert_str_eq(q.name, "");
}
END_TEST

START_TEST(test_an_answer_or_two_questions_is_no_query)
{
        msg m;
        sh_dns_query q;

        query(&m, 1, "pypi.org", SH_DNS_TYPE_A);
        m.b[2] |= 0x80; /* QR */
        ck_assert_int_eq(sh_dns_query_parse(m.b, m.n, &q), -EINVAL);
        query(&m, 1, "pypi.org", SH_DNS_TYPE_A);
        m.b[5] = 2;
        ck_assert_int_eq(sh_dns_query_parse(m.b, m.n, &q), -EINVAL);
}
END_TEST

START_TEST(test_a_denied_name_is_nxdomain_with_the_question_echoed_and_ra_set)
{
        msg m;
        sh_dns_query q;
        uint8_t out[512];
        size_t n;

        query(&m, 0xBEEF, "WWW.github.com", SH_DNS_TYPE_A);
        ck_assert_int_eq(sh_dns_query_parse(m.b, m.n, &q), 0);
        n = sh_dns_reply(&q, SH_DNS_NXDOMAIN, false, out, sizeof(out));
        ck_assert_uint_eq(n, m.n);
        ck_assert_uint_eq(out[0], 0xBE);
        ck_assert_uint_eq(out[1], 0xEF);
        ck_assert_uint_eq(out[2], 0x81); /* QR, RD */
        ck_assert_uint_eq(out[3], 0x80 | SH_DNS_NXDOMAIN);
        ck_assert_mem_eq(out + 4, "\0\1\0\0\0\0\0\0", 8);
        ck_assert_mem_eq(out + 12, m.b + 12, m.n - 12); /* the client's case kept */
}
END_TEST

START_TEST(test_an_empty_aaaa_answer_is_noerror_without_records)
{
        sh_dns_query q = parsed("pypi.org", SH_DNS_TYPE_AAAA);
        uint8_t out[512];
        size_t n = sh_dns_reply(&q, SH_DNS_NOERROR, false, out, sizeof(out));

        ck_assert_uint_eq(n, 12 + 10 + 4);
        ck_assert_uint_eq(out[3], 0x80);
        ck_assert_mem_eq(out + 6, "\0\0\0\0\0\0", 6);
        ck_assert_uint_eq((out[n - 4] << 8) | out[n - 3], SH_DNS_TYPE_AAAA);
}
END_TEST

START_TEST(test_a_truncated_reply_sets_tc_and_holds_only_the_question)
{
        sh_dns_query q = parsed("pypi.org", SH_DNS_TYPE_A);
        uint8_t out[512];
        size_t n = sh_dns_reply(&q, SH_DNS_NOERROR, true, out, sizeof(out));

        ck_assert_uint_eq(n, 12 + 10 + 4);
        ck_assert_uint_eq(out[2] & 0x02, 0x02);
        ck_assert_mem_eq(out + 6, "\0\0\0\0\0\0", 6);
}
END_TEST

START_TEST(test_the_upstream_query_has_our_id_rd_and_the_question)
{
        sh_dns_query q = parsed("pypi.org", SH_DNS_TYPE_A);
        uint8_t out[512];
        size_t n = sh_dns_upstream_query(&q, 0x4242, out, sizeof(out));
        sh_dns_query back;

        ck_assert_int_eq(sh_dns_query_parse(out, n, &back), 0);
        ck_assert_uint_eq(back.id, 0x4242);
        ck_assert(back.rd);
        ck_assert_str_eq(back.name, "pypi.org");
}
END_TEST

/* The answer to "www.github.com" A, id 7: a CNAME to github.com (compressed owner), its A
 * records, and a record of another owner that must be ignored. */
static void chain_answer(msg *m, uint32_t cname_ttl, uint32_t a_ttl)
{
        head(m, 7, 0x8180, 4, "www.github.com", SH_DNS_TYPE_A);
        rr_cname(m, NULL, 12, cname_ttl, "github.com");
        rr_a(m, NULL, 12 + 4, a_ttl, "140.82.121.3");
        rr_a(m, "evil.test", 0, 60, "169.254.169.254");
        rr_a(m, "GitHub.com", 0, a_ttl, "140.82.121.4");
}

/* An answer with a record in each section: A (TTL a), authority (TTL ns), and an EDNS OPT
 * whose TTL field holds the DO flag (0x8000). */
static void sections_answer(msg *m, uint32_t a, uint32_t ns)
{
        header(m, 7, 0x8180, 1, 1, 1, 1);
        name(m, "pypi.org");
        u16(m, SH_DNS_TYPE_A);
        u16(m, SH_DNS_CLASS_IN);
        rr_a(m, NULL, 12, a, "192.0.2.10");
        rr_a(m, NULL, 12, ns, "192.0.2.11");
        rr_head(m, "", 0, SH_DNS_TYPE_OPT, 0x8000, 0);
}

static uint32_t ttl_at(const msg *m, size_t rdata_end_back)
{
        const uint8_t *p = m->b + m->n - rdata_end_back;

        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

START_TEST(test_the_least_ttl_of_every_section_is_found_and_opt_holds_none)
{
        uint32_t least = 0;
        msg m;

        sections_answer(&m, 300, 40);
        ck_assert_int_eq(sh_dns_ttls(m.b, m.n, 0, &least), 0);
        ck_assert_uint_eq(least, 40);
        sections_answer(&m, 300, 0x80000000u); /* past 2^31 - 1: zero (RFC 2181) */
        ck_assert_int_eq(sh_dns_ttls(m.b, m.n, 0, &least), 0);
        ck_assert_uint_eq(least, 0);
}
END_TEST

START_TEST(test_ttls_are_lowered_by_the_age_down_to_zero_and_opt_is_untouched)
{
        uint32_t least = 0;
        msg m;

        sections_answer(&m, 300, 40);
        ck_assert_int_eq(sh_dns_ttls(m.b, m.n, 100, &least), 0);
        ck_assert_uint_eq(least, 40); /* the least before the age */
        /* From the end: OPT (name 1, type 2, class 2, ttl 4, rdlen 2), the second A's rdata 4
         * and rdlen 2 before it, ... */
        ck_assert_uint_eq(ttl_at(&m, 6), 0x8000);
        ck_assert_uint_eq(ttl_at(&m, 11 + 4 + 6), 0);
        ck_assert_uint_eq(ttl_at(&m, 11 + 2 * (4 + 6) + 6), 200);
}
END_TEST

START_TEST(test_a_malformed_message_keeps_its_ttls)
{
        uint32_t least;
        msg m, copy;

        sections_answer(&m, 300, 40);
        for (size_t n = 0; n < m.n; n++) {
                copy = m;
                ck_assert_int_eq(sh_dns_ttls(copy.b, n, 100, &least), -EINVAL);
                ck_assert_mem_eq(copy.b, m.b, m.n);
        }
}
END_TEST

START_TEST(test_the_a_records_along_the_cname_chain_are_collected_and_no_others)
{
        sh_dns_query q = parsed("www.github.com", SH_DNS_TYPE_A);
        sh_dns_addr addrs[8];
        sh_dns_answer a;
        msg m;

        chain_answer(&m, 300, 60);
        ck_assert_int_eq(sh_dns_answer_parse(m.b, m.n, &q, 7, addrs, 8, &a), 0);
        ck_assert_uint_eq(a.rcode, 0);
        ck_assert_uint_eq(a.n_addrs, 2);
        ck_assert_str_eq(ip(addrs[0].addr), "140.82.121.3");
        ck_assert_str_eq(ip(addrs[1].addr), "140.82.121.4");
        ck_assert_uint_eq(addrs[0].ttl_s, 60);
}
END_TEST

START_TEST(test_an_address_keeps_the_least_ttl_of_its_chain)
{
        sh_dns_query q = parsed("www.github.com", SH_DNS_TYPE_A);
        sh_dns_addr addrs[8];
        sh_dns_answer a;
        msg m;

        chain_answer(&m, 30, 600);
        ck_assert_int_eq(sh_dns_answer_parse(m.b, m.n, &q, 7, addrs, 8, &a), 0);
        ck_assert_uint_eq(addrs[0].ttl_s, 30);
}
END_TEST

START_TEST(test_ttls_are_clamped_to_the_bounds)
{
        ck_assert_uint_eq(sh_dns_ttl_clamp(0), SH_DNS_TTL_MIN);
        ck_assert_uint_eq(sh_dns_ttl_clamp(SH_DNS_TTL_MIN + 1), SH_DNS_TTL_MIN + 1);
        ck_assert_uint_eq(sh_dns_ttl_clamp(86400), SH_DNS_TTL_MAX);
        ck_assert_uint_eq(sh_dns_ttl_clamp(0x80000000u), SH_DNS_TTL_MIN); /* RFC 2181: zero */
}
END_TEST

START_TEST(test_more_addresses_than_room_are_counted_not_written)
{
        sh_dns_query q = parsed("www.github.com", SH_DNS_TYPE_A);
        sh_dns_addr addrs[1];
        sh_dns_answer a;
        msg m;

        chain_answer(&m, 300, 60);
        ck_assert_int_eq(sh_dns_answer_parse(m.b, m.n, &q, 7, addrs, 1, &a), 0);
        ck_assert_uint_eq(a.n_addrs, 1);
        ck_assert_uint_eq(a.n_total, 2);
}
END_TEST

START_TEST(test_an_answer_of_another_id_or_question_is_not_ours)
{
        sh_dns_query q = parsed("www.github.com", SH_DNS_TYPE_A);
        sh_dns_query other = parsed("pypi.org", SH_DNS_TYPE_A);
        sh_dns_query aaaa = parsed("www.github.com", SH_DNS_TYPE_AAAA);
        sh_dns_addr addrs[8];
        sh_dns_answer a;
        msg m;

        chain_answer(&m, 300, 60);
        ck_assert_int_eq(sh_dns_answer_parse(m.b, m.n, &q, 8, addrs, 8, &a), -EINVAL);
        ck_assert_int_eq(sh_dns_answer_parse(m.b, m.n, &other, 7, addrs, 8, &a), -EINVAL);
        ck_assert_int_eq(sh_dns_answer_parse(m.b, m.n, &aaaa, 7, addrs, 8, &a), -EINVAL);
        m.b[2] &= 0x7F; /* a query, not an answer */
        ck_assert_int_eq(sh_dns_answer_parse(m.b, m.n, &q, 7, addrs, 8, &a), -EINVAL);
}
END_TEST

START_TEST(test_a_truncated_upstream_answer_says_tc)
{
        sh_dns_query q = parsed("pypi.org", SH_DNS_TYPE_A);
        sh_dns_addr addrs[8];
        sh_dns_answer a;
        msg m;

        head(&m, 7, 0x8380, 0, "pypi.org", SH_DNS_TYPE_A);
        ck_assert_int_eq(sh_dns_answer_parse(m.b, m.n, &q, 7, addrs, 8, &a), 0);
        ck_assert(a.tc);
}
END_TEST

START_TEST(test_a_compression_loop_is_refused)
{
        sh_dns_query q = parsed("www.github.com", SH_DNS_TYPE_A);
        sh_dns_addr addrs[8];
        sh_dns_answer a;
        msg m;
        size_t at;

        head(&m, 7, 0x8180, 1, "www.github.com", SH_DNS_TYPE_A);
        at = m.n;
        rr_a(&m, NULL, (uint16_t)at, 60, "192.0.2.1"); /* the owner points at itself */
        ck_assert_int_eq(sh_dns_answer_parse(m.b, m.n, &q, 7, addrs, 8, &a), -EINVAL);
        m.b[at + 1] = (uint8_t)(at + 4); /* forward */
        ck_assert_int_eq(sh_dns_answer_parse(m.b, m.n, &q, 7, addrs, 8, &a), -EINVAL);
}
END_TEST

START_TEST(test_a_cname_loop_ends_within_the_chain_bound)
{
        sh_dns_query q = parsed("a.test", SH_DNS_TYPE_A);
        sh_dns_addr addrs[64];
        sh_dns_answer a;
        msg m;

        head(&m, 7, 0x8180, 3, "a.test", SH_DNS_TYPE_A);
        rr_cname(&m, "a.test", 0, 60, "b.test");
        rr_cname(&m, "b.test", 0, 60, "a.test");
        rr_a(&m, "a.test", 0, 60, "192.0.2.1");
        ck_assert_int_eq(sh_dns_answer_parse(m.b, m.n, &q, 7, addrs, 64, &a), 0);
        ck_assert_uint_le(a.n_total, SH_DNS_CHAIN_MAX + 1);
}
END_TEST

START_TEST(test_a_truncated_message_is_refused_at_every_length)
{
        sh_dns_query q = parsed("www.github.com", SH_DNS_TYPE_A);
        sh_dns_addr addrs[8];
        sh_dns_answer a;
        sh_dns_query pq;
        msg m, qm;

        chain_answer(&m, 300, 60);
        for (size_t n = 0; n < m.n; n++)
                ck_assert_int_eq(sh_dns_answer_parse(m.b, n, &q, 7, addrs, 8, &a), -EINVAL);
        query(&qm, 1, "pypi.org", SH_DNS_TYPE_A);
        for (size_t n = 0; n < qm.n; n++)
                ck_assert_int_eq(sh_dns_query_parse(qm.b, n, &pq), -EINVAL);
}
END_TEST

START_TEST(test_counts_past_the_message_are_refused)
{
        sh_dns_query q = parsed("www.github.com", SH_DNS_TYPE_A);
        sh_dns_addr addrs[8];
        sh_dns_answer a;
        sh_dns_query pq;
        msg m;

        chain_answer(&m, 300, 60);
        m.b[6] = m.b[7] = 0xFF;
        ck_assert_int_eq(sh_dns_answer_parse(m.b, m.n, &q, 7, addrs, 8, &a), -EINVAL);
        query(&m, 1, "pypi.org", SH_DNS_TYPE_A);
        m.b[10] = m.b[11] = 0xFF;
        ck_assert_int_eq(sh_dns_query_parse(m.b, m.n, &pq), -EINVAL);
}
END_TEST

START_TEST(test_a_name_past_255_bytes_is_refused)
{
        msg m;
        sh_dns_query q;

        header(&m, 1, 0, 1, 0, 0, 0);
        for (int i = 0; i < 5; i++) { /* 5 x 64 bytes */
                u8(&m, 63);
                memset(m.b + m.n, 'a', 63);
                m.n += 63;
        }
        u8(&m, 0);
        u16(&m, SH_DNS_TYPE_A);
        u16(&m, SH_DNS_CLASS_IN);
        ck_assert_int_eq(sh_dns_query_parse(m.b, m.n, &q), -EINVAL);
}
END_TEST

START_TEST(test_the_upstream_setting_is_an_ipv4_address_and_an_optional_port)
{
        struct sockaddr_in a;

        ck_assert_int_eq(sh_dns_upstream_parse("10.96.0.10", &a), 0);
        ck_assert_uint_eq(ntohs(a.sin_port), 53);
        ck_assert_str_eq(ip(a.sin_addr), "10.96.0.10");
        ck_assert_int_eq(sh_dns_upstream_parse("127.0.0.1:5353", &a), 0);
        ck_assert_uint_eq(ntohs(a.sin_port), 5353);
        ck_assert_int_eq(sh_dns_upstream_parse("127.0.0.1:0", &a), -EINVAL);
        ck_assert_int_eq(sh_dns_upstream_parse("127.0.0.1:65536", &a), -EINVAL);
        ck_assert_int_eq(sh_dns_upstream_parse("127.0.0.1:", &a), -EINVAL);
        ck_assert_int_eq(sh_dns_upstream_parse("dns.example", &a), -EINVAL);
        ck_assert_int_eq(sh_dns_upstream_parse("::1", &a), -EINVAL);
        ck_assert_int_eq(sh_dns_upstream_parse("", &a), -EINVAL);
}
END_TEST

START_TEST(test_resolv_conf_gives_its_first_ipv4_nameserver)
{
        struct sockaddr_in a;

        ck_assert_int_eq(sh_dns_resolv_conf_first("# x\nsearch a.svc\nnameserver fd00::10\n"
                                                  "  nameserver\t10.96.0.10 # kube-dns\n"
                                                  "nameserver 8.8.8.8\n",
                                                  &a),
                         0);
        ck_assert_str_eq(ip(a.sin_addr), "10.96.0.10");
        ck_assert_uint_eq(ntohs(a.sin_port), 53);
        ck_assert_int_eq(sh_dns_resolv_conf_first("nameserver 100.100.100.1001\n", &a), -ENOENT);
        ck_assert_int_eq(sh_dns_resolv_conf_first("options ndots:5\n", &a), -ENOENT);
}
END_TEST

static Suite *suite(void)
{
        Suite *s = suite_create("dnsmsg");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_a_query_gives_its_id_type_and_lower_case_name);
        tcase_add_test(tc, test_an_edns_payload_size_is_the_clients_udp_size_up_to_4096);
        tcase_add_test(tc, test_a_name_with_a_dot_inside_a_label_is_no_host_name);
        tcase_add_test(tc, test_an_answer_or_two_questions_is_no_query);
        tcase_add_test(tc, test_a_denied_name_is_nxdomain_with_the_question_echoed_and_ra_set);
        tcase_add_test(tc, test_an_empty_aaaa_answer_is_noerror_without_records);
        tcase_add_test(tc, test_a_truncated_reply_sets_tc_and_holds_only_the_question);
        tcase_add_test(tc, test_the_upstream_query_has_our_id_rd_and_the_question);
        tcase_add_test(tc, test_the_a_records_along_the_cname_chain_are_collected_and_no_others);
        tcase_add_test(tc, test_an_address_keeps_the_least_ttl_of_its_chain);
        tcase_add_test(tc, test_ttls_are_clamped_to_the_bounds);
        tcase_add_test(tc, test_more_addresses_than_room_are_counted_not_written);
        tcase_add_test(tc, test_an_answer_of_another_id_or_question_is_not_ours);
        tcase_add_test(tc, test_a_truncated_upstream_answer_says_tc);
        tcase_add_test(tc, test_a_compression_loop_is_refused);
        tcase_add_test(tc, test_a_cname_loop_ends_within_the_chain_bound);
        tcase_add_test(tc, test_a_truncated_message_is_refused_at_every_length);
        tcase_add_test(tc, test_counts_past_the_message_are_refused);
        tcase_add_test(tc, test_a_name_past_255_bytes_is_refused);
        tcase_add_test(tc, test_the_least_ttl_of_every_section_is_found_and_opt_holds_none);
        tcase_add_test(tc, test_ttls_are_lowered_by_the_age_down_to_zero_and_opt_is_untouched);
        tcase_add_test(tc, test_a_malformed_message_keeps_its_ttls);
        tcase_add_test(tc, test_the_upstream_setting_is_an_ipv4_address_and_an_optional_port);
        tcase_add_test(tc, test_resolv_conf_gives_its_first_ipv4_nameserver);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(suite());
}
