/* dnsmsg.c: the DNS messages of the proxy (dns.h), pure: a client's query parsed, the answers
 * the proxy makes itself (NXDOMAIN, empty, REFUSED, SERVFAIL, truncated) built, an upstream's
 * answer checked against the question and its A records collected along the CNAME chain.
 * Our own bounded parser rather than a library: the proxy reads only the header, the question
 * and the answer section's A and CNAME records, never allocates per packet, and every read is
 * bounded by the message (fuzzed: tests/fuzz/fuzz_dnsmsg.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "sh/dns.h"

#define HDR 12

static uint16_t get16(const uint8_t *p)
{
        return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
        return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

/* The name at *off of the message (p, n) in wire form, uncompressed, its case kept, into out
 * (SH_DNS_WIRE_MAX bytes), its length in *ret_len; *off moves past the name where it is
 * written (a pointer's two bytes). A compression pointer must point before every place the
 * name was read from so far, so that each jump goes strictly backwards and no loop is
 * possible; labels of 64 or more bytes (the 0x40 and 0x80 forms) are refused. 0 or -EINVAL. */
static int name_read(const uint8_t *p, size_t n, size_t *off, uint8_t *out, size_t *ret_len)
{
        size_t pos = *off, len = 0, end = 0;
        size_t lowest = pos; /* every pointer must go below it */

        for (;;) {
                uint8_t c;

                if (pos >= n)
                        return -EINVAL;
                c = p[pos];
                if ((c & 0xC0) == 0xC0) {
                        size_t to;

                        if (pos + 1 >= n)
                                return -EINVAL;
                        to = ((size_t)(c & 0x3F) << 8) | p[pos + 1];
                        if (to >= lowest)
                                return -EINVAL;
                        if (!end)
                                end = pos + 2;
                        pos = lowest = to;
                        continue;
                }
                if (c & 0xC0)
                        return -EINVAL;
                if (len + 1 + c > SH_DNS_WIRE_MAX || pos + 1 + c > n)
                        return -EINVAL;
                memcpy(out + len, p + pos, 1 + (size_t)c);
                len += 1 + (size_t)c;
                pos += 1 + (size_t)c;
                if (c == 0)
                        break;
        }
        *off = end ? end : pos;
        *ret_len = len;
        return 0;
}

static uint8_t lower(uint8_t c)
{
        return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c;
}

/* Two names in wire form equal but for the case of ASCII letters (a length byte is at most 63,
 * below 'A': lowering every byte is safe). */
static bool name_eq(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
        if (alen != blen)
                return false;
        for (size_t i = 0; i < alen; i++)
                if (lower(a[i]) != lower(b[i]))
                        return false;
        return true;
}

static bool host_char(uint8_t c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* A wire name as text for the policy: lower-case, labels joined by '.', no trailing dot; ""
 * when it is the root or a label holds any other byte (a '.' inside a label would make the
 * text name a different name from the one resolved). */
static void name_text(const uint8_t *w, size_t wlen, char *out)
{
        size_t o = 0, i = 0;

        out[0] = '\0';
        while (i < wlen && w[i]) {
                size_t l = w[i++];

                if (o)
                        out[o++] = '.';
                for (size_t k = 0; k < l; k++) {
                        uint8_t c = lower(w[i + k]);

                        if (!host_char(c)) {
                                out[0] = '\0';
                                return;
                        }
                        out[o++] = (char)c;
                }
                i += l;
        }
        out[o] = '\0';
}

/* Past one resource record at *off: its name, its fixed part into type/class/ttl/rdlen, *off
 * at its data. 0 or -EINVAL (past the message). */
static int rr_head(const uint8_t *p, size_t n, size_t *off, uint8_t *owner, size_t *owner_len,
                   uint16_t *type, uint16_t *klass, uint32_t *ttl, uint16_t *rdlen)
{
        if (name_read(p, n, off, owner, owner_len) < 0 || *off + 10 > n)
                return -EINVAL;
        *type = get16(p + *off);
        *klass = get16(p + *off + 2);
        *ttl = get32(p + *off + 4);
        *rdlen = get16(p + *off + 8);
        *off += 10;
        if (*off + *rdlen > n)
                return -EINVAL;
        return 0;
}

int sh_dns_query_parse(const uint8_t *p, size_t n, sh_dns_query *ret)
{
        size_t off = HDR;
        uint16_t flags, ar;

        memset(ret, 0, sizeof(*ret));
        if (n < HDR || n > SH_DNS_MSG_MAX)
                return -EINVAL;
        flags = get16(p + 2);
        /* QR clear, opcode QUERY; exactly one question, nothing in answer or authority. */
        if ((flags & 0x8000) || ((flags >> 11) & 0xF) != 0 || get16(p + 4) != 1 ||
            get16(p + 6) != 0 || get16(p + 8) != 0)
                return -EINVAL;
        ar = get16(p + 10);
        if (name_read(p, n, &off, ret->wire, &ret->wire_len) < 0 || off + 4 > n)
                return -EINVAL;
        ret->id = get16(p);
        ret->rd = (flags & 0x0100) != 0;
        ret->qtype = get16(p + off);
        ret->qclass = get16(p + off + 2);
        off += 4;
        ret->udp_size = SH_DNS_UDP_MIN;
        /* Each record takes at least 11 bytes: the count is bounded by the message. */
        for (uint16_t i = 0; i < ar; i++) {
                uint8_t owner[SH_DNS_WIRE_MAX];
                size_t owner_len;
                uint16_t type, klass, rdlen;
                uint32_t ttl;

                if (rr_head(p, n, &off, owner, &owner_len, &type, &klass, &ttl, &rdlen) < 0)
                        return -EINVAL;
                if (type == SH_DNS_TYPE_OPT && klass > SH_DNS_UDP_MIN)
                        ret->udp_size = klass > 4096 ? 4096 : klass;
                off += rdlen;
        }
        name_text(ret->wire, ret->wire_len, ret->name);
        return 0;
}

static size_t build(const sh_dns_query *q, uint16_t id, uint16_t flags, uint8_t *out, size_t size)
{
        size_t len = HDR + q->wire_len + 4;

        if (size < len)
                return 0;
        memset(out, 0, HDR);
        put16(out, id);
        put16(out + 2, flags);
        put16(out + 4, 1);
        memcpy(out + HDR, q->wire, q->wire_len);
        put16(out + HDR + q->wire_len, q->qtype);
        put16(out + HDR + q->wire_len + 2, q->qclass);
        return len;
}

size_t sh_dns_reply(const sh_dns_query *q, uint8_t rcode, bool tc, uint8_t *out, size_t size)
{
        uint16_t flags = 0x8000 | 0x0080 | (rcode & 0xF);

        if (q->rd)
                flags |= 0x0100;
        if (tc)
                flags |= 0x0200;
        return build(q, q->id, flags, out, size);
}

size_t sh_dns_upstream_query(const sh_dns_query *q, uint16_t id, uint8_t *out, size_t size)
{
        return build(q, id, 0x0100, out, size);
}

uint32_t sh_dns_ttl_clamp(uint32_t ttl)
{
        if (ttl > INT32_MAX) /* RFC 2181 8: a TTL with its top bit set is zero */
                ttl = 0;
        if (ttl < SH_DNS_TTL_MIN)
                return SH_DNS_TTL_MIN;
        return ttl > SH_DNS_TTL_MAX ? SH_DNS_TTL_MAX : ttl;
}

static uint32_t min32(uint32_t a, uint32_t b)
{
        return a < b ? a : b;
}

int sh_dns_answer_parse(const uint8_t *p, size_t n, const sh_dns_query *q, uint16_t id,
                        sh_dns_addr *addrs, size_t max, sh_dns_answer *ret)
{
        uint8_t target[SH_DNS_WIRE_MAX], owner[SH_DNS_WIRE_MAX];
        size_t off = HDR, an_off, target_len, owner_len;
        uint16_t flags, an;
        uint32_t chain_ttl = UINT32_MAX;

        memset(ret, 0, sizeof(*ret));
        if (n < HDR || n > SH_DNS_MSG_MAX || get16(p) != id)
                return -EINVAL;
        flags = get16(p + 2);
        if (!(flags & 0x8000) || ((flags >> 11) & 0xF) != 0 || get16(p + 4) != 1)
                return -EINVAL;
        an = get16(p + 6);
        if (name_read(p, n, &off, owner, &owner_len) < 0 || off + 4 > n ||
            !name_eq(owner, owner_len, q->wire, q->wire_len) || get16(p + off) != q->qtype ||
            get16(p + off + 2) != q->qclass)
                return -EINVAL;
        an_off = off + 4;
        ret->rcode = flags & 0xF;
        ret->tc = (flags & 0x0200) != 0;

        /* The whole answer section must be well formed before anything of it is believed. */
        off = an_off;
        for (uint16_t i = 0; i < an; i++) {
                uint16_t type, klass, rdlen;
                uint32_t ttl;

                if (rr_head(p, n, &off, owner, &owner_len, &type, &klass, &ttl, &rdlen) < 0)
                        return -EINVAL;
                off += rdlen;
        }

        memcpy(target, q->wire, q->wire_len);
        target_len = q->wire_len;
        for (unsigned link = 0; link <= SH_DNS_CHAIN_MAX; link++) {
                uint8_t next[SH_DNS_WIRE_MAX];
                size_t next_len = 0;
                uint32_t next_ttl = 0;

                off = an_off;
                for (uint16_t i = 0; i < an; i++) {
                        uint16_t type, klass, rdlen;
                        uint32_t ttl;
                        size_t data;

                        /* Checked in the first pass: the same bytes read again. */
                        if (rr_head(p, n, &off, owner, &owner_len, &type, &klass, &ttl, &rdlen) < 0)
                                return -EINVAL;
                        data = off;
                        off += rdlen;
                        if (klass != SH_DNS_CLASS_IN ||
                            !name_eq(owner, owner_len, target, target_len))
                                continue;
                        ttl = ttl > INT32_MAX ? 0 : ttl;
                        if (type == SH_DNS_TYPE_A && rdlen == 4) {
                                if (ret->n_addrs < max) {
                                        sh_dns_addr *a = &addrs[ret->n_addrs++];

                                        memcpy(&a->addr, p + data, 4);
                                        a->ttl_s = sh_dns_ttl_clamp(min32(ttl, chain_ttl));
                                }
                                ret->n_total++;
                        } else if (type == SH_DNS_TYPE_CNAME && !next_len) {
                                size_t d = data;

                                /* The target must lie within the record's data. */
                                if (name_read(p, n, &d, next, &next_len) < 0 || d > data + rdlen)
                                        return -EINVAL;
                                next_ttl = min32(ttl, chain_ttl);
                        }
                }
                if (!next_len)
                        break;
                memcpy(target, next, next_len);
                target_len = next_len;
                chain_ttl = next_ttl;
        }
        return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
        put16(p, (uint16_t)(v >> 16));
        put16(p + 2, (uint16_t)v);
}

int sh_dns_ttls(uint8_t *p, size_t n, uint32_t age, uint32_t *ret_min)
{
        uint8_t owner[SH_DNS_WIRE_MAX];
        size_t off = HDR, owner_len, at[SH_DNS_TTLS_MAX], k = 0;
        uint32_t least = UINT32_MAX, count;

        if (n < HDR || get16(p + 4) != 1 || name_read(p, n, &off, owner, &owner_len) < 0 ||
            off + 4 > n)
                return -EINVAL;
        off += 4;
        count = (uint32_t)get16(p + 6) + get16(p + 8) + get16(p + 10);
        if (count > SH_DNS_TTLS_MAX)
                return -EINVAL;
        /* Every record read before a byte is changed (a name may point into a TTL). */
        for (uint32_t i = 0; i < count; i++) {
                uint16_t type, klass, rdlen;
                uint32_t ttl;

                if (rr_head(p, n, &off, owner, &owner_len, &type, &klass, &ttl, &rdlen) < 0)
                        return -EINVAL;
                if (type != SH_DNS_TYPE_OPT) {
                        least = min32(least, ttl > INT32_MAX ? 0 : ttl);
                        at[k++] = off - 6;
                }
                off += rdlen;
        }
        for (size_t i = 0; age && i < k; i++) {
                uint32_t ttl = get32(p + at[i]);

                ttl = ttl > INT32_MAX ? 0 : ttl;
                put32(p + at[i], ttl > age ? ttl - age : 0);
        }
        *ret_min = least;
        return 0;
}

int sh_dns_upstream_parse(const char *s, struct sockaddr_in *ret)
{
        char ip[INET_ADDRSTRLEN];
        const char *colon = strchr(s, ':');
        size_t iplen = colon ? (size_t)(colon - s) : strlen(s);
        unsigned long port = 53;

        memset(ret, 0, sizeof(*ret));
        if (iplen == 0 || iplen >= sizeof(ip))
                return -EINVAL;
        memcpy(ip, s, iplen);
        ip[iplen] = '\0';
        if (colon) {
                const char *d = colon + 1;

                port = 0;
                if (!*d || strlen(d) > 5)
                        return -EINVAL;
                for (; *d; d++) {
                        if (*d < '0' || *d > '9')
                                return -EINVAL;
                        port = port * 10 + (unsigned long)(*d - '0');
                }
                if (port < 1 || port > 65535)
                        return -EINVAL;
        }
        ret->sin_family = AF_INET;
        ret->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, ip, &ret->sin_addr) != 1) {
                memset(ret, 0, sizeof(*ret));
                return -EINVAL;
        }
        return 0;
}

int sh_dns_resolv_conf_first(const char *text, struct sockaddr_in *ret)
{
        const char *line = text;

        memset(ret, 0, sizeof(*ret));
        while (line && *line) {
                const char *nl = strchr(line, '\n');
                const char *p = line, *e = nl ? nl : line + strlen(line);
                char ip[INET_ADDRSTRLEN];
                size_t k = 0;

                while (p < e && (*p == ' ' || *p == '\t'))
                        p++;
                if ((size_t)(e - p) > 10 && strncmp(p, "nameserver", 10) == 0 &&
                    (p[10] == ' ' || p[10] == '\t')) {
                        p += 10;
                        while (p < e && (*p == ' ' || *p == '\t'))
                                p++;
                        while (p + k < e && k < sizeof(ip) - 1 && p[k] != ' ' && p[k] != '\t' &&
                               p[k] != '\r' && p[k] != '#' && p[k] != ';')
                                k++;
                        memcpy(ip, p, k);
                        ip[k] = '\0';
                        /* An address longer than any IPv4 one is not cut to a prefix. */
                        if (p + k < e && p[k] != ' ' && p[k] != '\t' && p[k] != '\r' &&
                            p[k] != '#' && p[k] != ';')
                                ip[0] = '\0';
                        if (inet_pton(AF_INET, ip, &ret->sin_addr) == 1) {
                                ret->sin_family = AF_INET;
                                ret->sin_port = htons(53);
                                return 0;
                        }
                }
                line = nl ? nl + 1 : NULL;
        }
        memset(ret, 0, sizeof(*ret));
        return -ENOENT;
}
