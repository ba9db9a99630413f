/* fuzz_dnsmsg.c: the DNS proxy's messages (egress/dnsmsg.c). '0' + bytes: a client's query
 * (sh_dns_query_parse); '1' + bytes: an upstream's answer to the query "www.github.com" A with
 * id 7 (sh_dns_answer_parse); '2' + text: a SANDBOX_HOST_DNS_UPSTREAM value; '3' + text: a
 * resolv.conf. Properties: a parsed query has a wire name of at most 255 bytes, a text name of
 * host-name characters without a trailing dot, a UDP size of 512..4096, and the answers built
 * for it parse back as answers to it; a parsed answer writes at most the room given, every TTL
 * within the bounds, any message's TTLs aged or left whole; an upstream is IPv4 with a port. */
#include "fuzz.h"

#include <arpa/inet.h>
#include <errno.h>

#include "sh/dns.h"

static void query(fz *f)
{
        char *b = fz_dup(f->p, f->n);
        sh_dns_query q;
        uint8_t out[512];
        sh_dns_addr addrs[4];
        sh_dns_answer a;
        size_t n;

        if (sh_dns_query_parse((const uint8_t *)b, f->n, &q) == 0) {
                size_t len = strlen(q.name);

                FZ_CHECK(q.wire_len >= 1 && q.wire_len <= SH_DNS_WIRE_MAX);
                FZ_CHECK(len <= SH_DNS_TEXT_MAX && (len == 0 || q.name[len - 1] != '.'));
                for (const char *p = q.name; *p; p++)
                        FZ_CHECK((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                                 *p == '-' || *p == '_' || *p == '.');
                FZ_CHECK(q.udp_size >= SH_DNS_UDP_MIN && q.udp_size <= 4096);
                n = sh_dns_reply(&q, SH_DNS_NXDOMAIN, false, out, sizeof(out));
                FZ_CHECK(n == 12 + q.wire_len + 4);
                FZ_CHECK(sh_dns_answer_parse(out, n, &q, q.id, addrs, 4, &a) == 0);
                FZ_CHECK(a.rcode == SH_DNS_NXDOMAIN && a.n_addrs == 0 && !a.tc);
                n = sh_dns_upstream_query(&q, 7, out, sizeof(out));
                FZ_CHECK(n == 12 + q.wire_len + 4);
        }
        free(b);
}

/* The TTLs of any message: refused, it is unchanged; else its least TTL is what it reads again
 * when not aged, and an aged copy still reads (or is refused: a name may point into a TTL). */
static void ttls(uint8_t *b, size_t n)
{
        uint8_t *copy = (uint8_t *)fz_dup(b, n);
        uint32_t before, after;

        if (sh_dns_ttls(b, n, 5, &before) < 0) {
                FZ_CHECK(memcmp(b, copy, n) == 0);
        } else {
                FZ_CHECK(sh_dns_ttls(copy, n, 0, &after) == 0 && after == before);
                (void)sh_dns_ttls(b, n, 0, &after);
        }
        free(copy);
}

static void answer(fz *f)
{
        static const uint8_t qm[] = {0,   7, 1,   0,   0,   1, 0,   0,   0,   0,   0,
                                     0,   3, 'w', 'w', 'w', 6, 'g', 'i', 't', 'h', 'u',
                                     'b', 3, 'c', 'o', 'm', 0, 0,   1,   0,   1};
        char *b = fz_dup(f->p, f->n);
        sh_dns_query q;
        sh_dns_addr addrs[4];
        sh_dns_answer a;

        FZ_CHECK(sh_dns_query_parse(qm, sizeof(qm), &q) == 0);
        if (sh_dns_answer_parse((const uint8_t *)b, f->n, &q, 7, addrs, 4, &a) == 0) {
                FZ_CHECK(a.n_addrs <= 4 && a.n_addrs <= a.n_total);
                for (size_t i = 0; i < a.n_addrs; i++)
                        FZ_CHECK(addrs[i].ttl_s >= SH_DNS_TTL_MIN &&
                                 addrs[i].ttl_s <= SH_DNS_TTL_MAX);
        }
        ttls((uint8_t *)b, f->n);
        free(b);
}

static void upstream(fz *f, bool resolv)
{
        char *s = fz_rest_str(f);
        struct sockaddr_in a;
        int r = resolv ? sh_dns_resolv_conf_first(s, &a) : sh_dns_upstream_parse(s, &a);

        if (r == 0)
                FZ_CHECK(a.sin_family == AF_INET && a.sin_port != 0);
        else
                FZ_CHECK(r == (resolv ? -ENOENT : -EINVAL) && a.sin_family == 0);
        free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);

        switch (fz_mode(&f, 4)) {
        case 0:
                query(&f);
                break;
        case 1:
                answer(&f);
                break;
        case 2:
                upstream(&f, false);
                break;
        default:
                upstream(&f, true);
                break;
        }
        return 0;
}
