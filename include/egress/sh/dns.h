/* dns.h: the sandboxes' DNS proxy (egress/, docs/architecture.md, ../shared/OPENSANDBOX.md
 * section 4): one UDP socket and one TCP listener on the loop, for every sandbox; a query's
 * sandbox is found from its source address, its name judged by the caller; a denied name is
 * NXDOMAIN, AAAA an empty NOERROR (IPv4 only), an allowed name is forwarded to the upstream
 * resolver and the A records of its answer reported to the caller (who opens them) before the
 * answer reaches the client. Never blocks; every queue, buffer and count is bounded.
 *
 * The pure half (src/egress/dnsmsg.c): a bounded parser and builder of the few messages the
 * proxy needs, no allocation, fuzzed (tests/fuzz/fuzz_dnsmsg.c). */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/loop.h"

/* ---- messages (dnsmsg.c, pure) ---- */

#define SH_DNS_TTL_MIN   5u    /* seconds an address stays open at least ... */
#define SH_DNS_TTL_MAX   3600u /* ... and at most, whatever the answer's TTL says */
#define SH_DNS_WIRE_MAX  255   /* bytes of a name in wire form (RFC 1035 2.3.4) */
#define SH_DNS_TEXT_MAX  253   /* characters of a name in text, without the trailing dot */
#define SH_DNS_UDP_MIN   512   /* bytes of a UDP answer to a client without EDNS */
#define SH_DNS_MSG_MAX   65535 /* bytes of a message: the 2-byte length prefix of TCP */
#define SH_DNS_CHAIN_MAX 8     /* CNAMEs followed from the question's name to its A records */

#define SH_DNS_TYPE_A     1
#define SH_DNS_TYPE_CNAME 5
#define SH_DNS_TYPE_OPT   41
#define SH_DNS_TYPE_AAAA  28
#define SH_DNS_CLASS_IN   1

#define SH_DNS_NOERROR  0
#define SH_DNS_FORMERR  1
#define SH_DNS_SERVFAIL 2
#define SH_DNS_NXDOMAIN 3
#define SH_DNS_REFUSED  5

/* A client's query: exactly one question, QR clear, opcode QUERY, no answer or authority
 * records (the additional section is read only for an EDNS OPT, RFC 6891). */
typedef struct sh_dns_query {
        uint16_t id;
        bool rd; /* recursion desired: echoed */
        uint16_t qtype, qclass;
        uint8_t wire[SH_DNS_WIRE_MAX]; /* the question's name, uncompressed, its case */
        size_t wire_len;
        char name[SH_DNS_TEXT_MAX + 1]; /* lower-case, no trailing dot; "" when the name is
                                             * the root or not a host name (letters, digits,
                                             * '-', '_' in every label): answered REFUSED */
        uint16_t udp_size;              /* the answer a UDP client takes: 512, or its EDNS
                                             * payload size (at most 4096) */
} sh_dns_query;

/* Parse a client's message of n bytes. 0, or -EINVAL when it is not one query as above (the
 * proxy drops it unanswered: nothing in a garbage packet earns an answer). */
int sh_dns_query_parse(const uint8_t *p, size_t n, sh_dns_query *ret);

/* The answer to q without records: q's id and question, QR and RA set, RD echoed, `rcode`,
 * TC when `tc`. Its length (at most 12 + 4 + SH_DNS_WIRE_MAX, which `size` must hold). */
size_t sh_dns_reply(const sh_dns_query *q, uint8_t rcode, bool tc, uint8_t *out, size_t size);

/* The query the proxy sends upstream for q: `id`, RD set, q's question, nothing else. Its
 * length (`size` as for sh_dns_reply). */
size_t sh_dns_upstream_query(const sh_dns_query *q, uint16_t id, uint8_t *out, size_t size);

/* One address of an answer, its TTL already clamped to [SH_DNS_TTL_MIN, SH_DNS_TTL_MAX]. */
typedef struct sh_dns_addr {
        struct in_addr addr;
        uint32_t ttl_s;
} sh_dns_addr;

typedef struct sh_dns_answer {
        uint8_t rcode;
        bool tc;
        size_t n_addrs; /* the A records found (at most the `max` given), out of ... */
        size_t n_total; /* ... all the chain reaches */
} sh_dns_answer;

/* Check that the n bytes at p answer the upstream query `id` for q's question (QR set, the
 * id, one question of q's name (any case), type and class), and collect the A records of q's
 * name, or of the names its CNAME chain in the answer section leads to (at most
 * SH_DNS_CHAIN_MAX links, each owned by the name before it): records of other owners are
 * ignored (an upstream cannot open what the question did not ask). Each address's TTL is the
 * least along its chain, clamped. 0 with *ret, or -EINVAL: not the answer (the proxy keeps
 * waiting for the right one, anti-spoofing) or malformed (compression loops or forward
 * pointers, counts past the message, names past 255 bytes). */
int sh_dns_answer_parse(const uint8_t *p, size_t n, const sh_dns_query *q, uint16_t id,
                        sh_dns_addr *addrs, size_t max, sh_dns_answer *ret);

/* The TTLs of the message p (n bytes, one question, at most SH_DNS_TTLS_MAX records): the
 * least TTL of its records (answer, authority and additional sections, an EDNS OPT record's
 * field excepted: it holds flags) into *ret_min (UINT32_MAX without records; a TTL past
 * 2^31 - 1 counts as 0, RFC 2181 8), and, age > 0, every such TTL lowered by age seconds (0 at
 * least) in place: a cached answer served `age` seconds after it came. 0, or -EINVAL
 * (malformed, or more records: nothing is changed). */
#define SH_DNS_TTLS_MAX 128 /* records: more than a cached answer (SH_DNS_CACHE_MSG_MAX) holds */
int sh_dns_ttls(uint8_t *p, size_t n, uint32_t age, uint32_t *ret_min);
/* The TTL an opened address keeps: ttl clamped to [SH_DNS_TTL_MIN, SH_DNS_TTL_MAX]. */
uint32_t sh_dns_ttl_clamp(uint32_t ttl);

/* An upstream "ip[:port]" (IPv4, port 1..65535, 53 when absent) into *ret. 0 or -EINVAL. */
int sh_dns_upstream_parse(const char *s, struct sockaddr_in *ret);
/* The first IPv4 `nameserver` of a resolv.conf text (port 53). 0, or -ENOENT (none). */
int sh_dns_resolv_conf_first(const char *text, struct sockaddr_in *ret);

/* ---- the proxy (dns.c, on the loop) ---- */

/* Defaults of the bounds (a field of sh_dns_config left 0 takes its default). */
#define SH_DNS_TIMEOUT_MS       2000 /* one attempt upstream, then one retry */
#define SH_DNS_TRIES            2
#define SH_DNS_SANDBOX_INFLIGHT 64    /* queries of one sandbox upstream at once */
#define SH_DNS_INFLIGHT         1024  /* queries upstream at once (one fd each) */
#define SH_DNS_SANDBOX_RATE     200   /* queries a second of one sandbox ... */
#define SH_DNS_SANDBOX_BURST    400   /* ... after a burst of this many */
#define SH_DNS_SANDBOX_TCP      8     /* TCP clients of one sandbox at once */
#define SH_DNS_TCP              256   /* TCP clients at once */
#define SH_DNS_TCP_IDLE_MS      10000 /* a TCP client without a whole query this long: cut */
#define SH_DNS_QUERY_MAX        4096 /* bytes of a client's query: a longer one is dropped (TCP: cut) */
#define SH_DNS_TCP_OUT_MAX      (2 * (SH_DNS_MSG_MAX + 2)) /* answers a client has not read */
/* Each sandbox's cache of A answers (its own: what one sandbox asked never shows in another's
 * timing), kept until the answer's least TTL, flushed when its policy changes. */
#define SH_DNS_CACHE_ENTRIES 16         /* answers of one sandbox (the oldest goes) */
#define SH_DNS_CACHE_MSG_MAX 1232       /* bytes of an answer kept (a larger one is not) */
#define SH_DNS_CACHE_BYTES   (4u << 20) /* of every sandbox's answers together */

/* The caller's side, called from the loop; none of them may call sh_dns_forget or
 * sh_dns_free. What each question gets is listed at the top of src/egress/dns.c: garbage, an
 * unknown source and a sandbox over its rate get nothing; a sandbox at its bound of queries in
 * flight, or an upstream silent through every try, gets SERVFAIL. */
typedef struct sh_dns_ops {
        /* The sandbox whose address sent a query (the source IPv4 address, the port): a
         * non-zero key of the caller's, stable while the sandbox lives and never reused; 0:
         * unknown, the query is dropped. */
        uint64_t (*sandbox_of)(void *data, const struct sockaddr_in *src);
        /* Whether the sandbox may resolve `name` (lower-case, no trailing dot). */
        bool (*allowed)(void *data, uint64_t sandbox, const char *name);
        /* The A records of an allowed name's answer (n >= 1, at most 64 of them; more are
         * relayed, not reported): called once per answer, before it is sent to the client,
         * so that the addresses are open when the client connects (in one transaction: a
         * flood of large answers costs one per answer). `name` is the question's name.
         * True when each address the sandbox may reach is open for at least its TTL: the
         * answer is then kept in the sandbox's cache until its least TTL; false (not opened:
         * a bound, a failure) keeps nothing, and the next query goes upstream again. */
        bool (*resolved)(void *data, uint64_t sandbox, const char *name, const sh_dns_addr *addrs,
                         size_t n);
} sh_dns_ops;

typedef struct sh_dns_config {
        struct sockaddr_in listen;   /* the UDP socket and the TCP listener bind it */
        struct sockaddr_in upstream; /* the resolver allowed names go to */
        uint64_t timeout_ms;
        unsigned tries;
        unsigned sandbox_inflight, inflight;
        unsigned sandbox_rate, sandbox_burst;
        unsigned sandbox_tcp, tcp;
        uint64_t tcp_idle_ms;
} sh_dns_config;

typedef struct sh_dns sh_dns;

/* Bind both sockets and watch them on l. 0 with *ret, or -errno (the address in use, ...).
 * The ops and data are kept; ops->resolved may be NULL. */
int sh_dns_new(sh_loop *l, const sh_dns_config *cfg, const sh_dns_ops *ops, void *data,
               sh_dns **ret);
/* The port the sockets are bound to (the config's, or the kernel's pick for port 0: the UDP
 * socket's, the TCP listener binds the same). */
uint16_t sh_dns_port(const sh_dns *d);
/* A sandbox is gone: its queries in flight are cancelled unanswered, its TCP clients cut, its
 * bounds forgotten. Unknown keys are ignored. */
void sh_dns_forget(sh_dns *d, uint64_t sandbox);
/* The sandbox's cached answers are dropped: its policy changed, so what the next query opens
 * is judged again. Unknown keys are ignored. */
void sh_dns_flush(sh_dns *d, uint64_t sandbox);
/* Stop and free everything (NULL accepted). */
void sh_dns_free(sh_dns *d);

/* The upstream the daemon uses: SANDBOX_HOST_DNS_UPSTREAM when set (`setting`, non-NULL),
 * else the first IPv4 nameserver of the resolv.conf at `resolv_path`. 0, -EINVAL (a malformed
 * setting), -ENOENT (no nameserver) or -errno (reading the file). */
int sh_dns_upstream_pick(const char *setting, const char *resolv_path, struct sockaddr_in *ret);
