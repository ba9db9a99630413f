/* net.h: a sandbox's network on the pod's side (issue 24, OPENSANDBOX.md section 4): the
 * address plan of SANDBOX_HOST_EGRESS_CIDR, one veth link per sandbox (link.c, rtnetlink
 * through libmnl) and the daemon's nftables table that filters what crosses them (nft.c,
 * libnftables; an address opened through libnftnl). Nothing here decides a policy: the caller
 * (the sandbox layer) hands in the rules the policy module (egress.h) evaluated and the
 * addresses the DNS proxy resolved.
 *
 * The plan. The range (default 100.127.0.0/16) is the daemon's own. Its first host address,
 * the gateway G (100.127.0.1), is on the pod's `lo` while the links are open (so the DNS
 * proxy can bind G:53 before any sandbox exists) and on the host end of every link. Sandbox
 * slot n has address base + 2 + n, a /32: inside its namespace `eth0` holds "A peer G" and a
 * default route via G; on the pod's side the host end `<prefix><n>` holds "G peer A", which
 * routes A to that link alone. No bridge: no sandbox sees another's frames.
 *
 * The table (`inet sandbox_host_<tag>`). forward: DNS (tcp/udp 53) from a link is dropped;
 * a packet in the original direction from a link is dispatched by (its link, its source) to
 * the sandbox's chain, one in the reply direction by (its link, its destination); anything
 * else from or to a link or the range is dropped (a spoofed source, a connection opened
 * towards a sandbox, another sandbox, IPv6). A sandbox's chain: `ct state new ct count over
 * conn_max drop`, then its policy chain, first match wins: the connection's mark is the
 * current generation (accepted: judged already), the operator's deny set (drop), the
 * operator's allow set, its CIDR rules in order, its set of addresses opened by DNS answers
 * (each element with its TTL), then its default; an accepted connection is marked with the
 * generation. input: UDP to port 53 from a link past SH_EGRESS_DNS_PPS packets a second (after
 * a burst of SH_EGRESS_DNS_PPS_BURST) per source address is dropped (a meter, the set
 * `dnsrate`: a sandbox's DNS flood never fills the proxy's one socket, where the others'
 * queries wait); then from a link only tcp/udp 53 to G from that link's own address; all else
 * from a link or the range is dropped (the daemon's API, the pod's addresses, other pods).
 * postrouting: the range masqueraded out of every interface but the links.
 *
 * Established connections and policy changes (conntrack, decided): every packet of a
 * sandbox's connection crosses its chain; one whose conntrack mark is the sandbox's current
 * generation is accepted at once, so an address whose DNS answer's TTL ran out keeps its
 * open connections. sh_egress_nft_policy starts a new generation in the same transaction as
 * the new rules, so every open connection is judged again by its next packet (in either
 * direction): one the new policy denies is dropped from then on (cut), one it allows is
 * marked again. One opened only by a DNS answer whose TTL has run out is cut by a policy
 * change too (its name is resolved again by the next connection). No conntrack entry is
 * deleted: they time out as the kernel's do.
 *
 * Cost (measured on 2 cores, kernel 6.18, libnftables 1.0.6, libnftnl 1.2.4; tests/bench/
 * nft_cost.c, medians, the machine loaded by other builds): every change is one netlink
 * transaction. A policy replaced (and a sandbox removed) goes through libnftables, which first
 * reads what the table holds into its cache to check it, so its cost grows with the sandboxes
 * in the table: with 16, 256 and 1024 sandboxes a policy replaced takes 0.24, 1.0 and 8 ms on
 * the loop. A sandbox added (on its create's path) and an address opened (the hot path: every A
 * record of a DNS answer) are batches of libnftnl messages sent without that read: a sandbox
 * added 0.10 and 0.30 ms with 16 and 256 (it was 0.3 and 1.1 ms through libnftables), an
 * address opened 0.03, 0.07 and 0.18 ms (it was 0.19, 0.81 and 5.8 ms); what is left grows
 * only with the kernel's lookup of a set or chain by its name (a list of the table's). The way
 * out for the policy replaced is the same batch (its rules are built as expressions already).
 *
 * Ordering (fail closed): add a sandbox to the table before its link, remove its link before
 * it leaves the table, close every link before the table (no packet is forwarded from a
 * link the table does not know: the forward chain drops every `<prefix>*` interface it has no
 * chain for).
 *
 * The pod's sysctls: net.ipv4.ip_forward must be 1 (sh_egress_links_open sets it, or fails
 * saying so when /proc/sys is read-only: in Kubernetes it is a namespaced sysctl set in the
 * pod's securityContext.sysctls, an "unsafe" one the kubelet must allow); rp_filter may be
 * anything (each sandbox's address is routed to its link only, and the table checks each
 * link's source itself). Everything needs CAP_NET_ADMIN in the pod's network namespace, and
 * sh_egress_link_add CAP_SYS_ADMIN to enter the sandbox's. IPv4 only: IPv6 from a link is
 * dropped. */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kernel's meter of each sandbox's UDP DNS packets (the input chain): twice the proxy's
 * own bucket (SH_DNS_SANDBOX_RATE, _BURST), so a client within the proxy's rate never meets it,
 * and source addresses it tracks at once (the range's sandboxes fit; entries go after 10 s). */
#define SH_EGRESS_DNS_PPS        400u
#define SH_EGRESS_DNS_PPS_BURST  800u
#define SH_EGRESS_DNS_METER_SIZE 65535u

#include "sh/error.h"

/* An IPv4 network: address (network byte order) and prefix length. */
typedef struct sh_egress_ipv4_net {
        struct in_addr addr;
        unsigned prefix; /* 0..32 */
} sh_egress_ipv4_net;

#define SH_EGRESS_CIDR_DEFAULT "100.127.0.0/16"
#define SH_EGRESS_PREFIX_MAX   30 /* a range holds the gateway and at least two sandboxes */
#define SH_EGRESS_IFPREFIX_MAX 8  /* bytes of a link name prefix ("shv") */
#define SH_EGRESS_TAG_MAX      32 /* bytes of a table tag */

/* Parse "a.b.c.d" or "a.b.c.d/n" (sh_parse_ipv4_net: host bits must be zero). 0 or
 * -EINVAL. */
int sh_egress_ipv4_net_parse(const char *s, sh_egress_ipv4_net *ret);

/* The range's gateway (its first host address: the DNS proxy's address) (pure). */
struct in_addr sh_egress_gateway(const sh_egress_ipv4_net *range);

/* How many sandbox slots the range holds: its size less the network and gateway addresses
 * (pure). */
uint32_t sh_egress_slots(const sh_egress_ipv4_net *range);

/* Slot n's address (pure). 0, or -ERANGE when the range has no such slot. */
int sh_egress_slot_addr(const sh_egress_ipv4_net *range, uint32_t slot, struct in_addr *ret);

/* ---- link.c: one veth per sandbox ---- */

typedef struct sh_egress_links sh_egress_links;

/* Open the links of `range` in the calling process's network namespace (the pod's): set
 * net.ipv4.ip_forward (an error says what to set when it is 0 and cannot be written), add
 * the gateway /32 to lo (there already: kept), open an rtnetlink socket. Links are named
 * `ifprefix` + slot (`ifprefix`: [a-z]{1,8}, e.g. "shv"). */
int sh_egress_links_open(const sh_egress_ipv4_net *range, const char *ifprefix,
                         sh_egress_links **ret, sh_error **err);

/* Remove the gateway from lo (when this opened it there) and free. Links still up are left
 * (delete them first). Accepts NULL; returns NULL. */
sh_egress_links *sh_egress_links_close(sh_egress_links *l);

/* The name of slot's link on the pod's side into buf (IFNAMSIZ bytes). */
void sh_egress_link_name(const sh_egress_links *l, uint32_t slot, char *buf, size_t size);

/* Give the sandbox whose network namespace is `netns_fd` its link: the veth pair (a stale
 * one of the slot's name is replaced), the peer created in that namespace as `eth0`, both
 * ends addressed and up, lo up there, the default route via the gateway. The namespace is
 * entered with setns(2) only for as long as one socket() takes (single-threaded daemon), so
 * the loop never waits on a child: every request is a synchronous rtnetlink call answered
 * before the kernel returns from sendmsg. On failure nothing of the slot is left. */
int sh_egress_link_add(sh_egress_links *l, uint32_t slot, int netns_fd, sh_error **err);

/* Delete slot's link (its peer goes with it). Absent: 0. */
int sh_egress_link_del(sh_egress_links *l, uint32_t slot, sh_error **err);

/* ---- nft.c: the daemon's nftables table ---- */

typedef struct sh_egress_nft sh_egress_nft;

typedef struct sh_egress_nft_config {
        const char *tag;      /* table "sandbox_host_<tag>": [a-z0-9_]{1,32}, unique per daemon */
        const char *ifprefix; /* the links' name prefix (sh_egress_links_open) */
        sh_egress_ipv4_net range;
        struct in_addr proxy;            /* the DNS proxy's address (the gateway) */
        const sh_egress_ipv4_net *deny;  /* the operator's deny list: wins over everything */
        size_t ndeny;                    /* ... */
        const sh_egress_ipv4_net *allow; /* the operator's allow list: every sandbox's */
        size_t nallow;                   /* ... */
        uint32_t conn_max;               /* connections tracked at once per sandbox, >= 1 */
        uint32_t dns_max;                /* addresses one sandbox's DNS set holds, >= 1 */
} sh_egress_nft_config;

/* A CIDR rule of a sandbox's policy, in the policy's order. */
typedef struct sh_egress_nft_rule {
        sh_egress_ipv4_net net;
        bool allow;
} sh_egress_nft_rule;

/* Create the table (a stale one of the same name, a previous run's, is replaced in the same
 * transaction). The lists are copied. */
int sh_egress_nft_open(const sh_egress_nft_config *c, sh_egress_nft **ret, sh_error **err);

/* Delete the table and free (always frees; accepts NULL). 0, or the deletion's error. */
int sh_egress_nft_close(sh_egress_nft *n, sh_error **err);

/* The table's name ("sandbox_host_<tag>"). */
const char *sh_egress_nft_table(const sh_egress_nft *n);

/* Add slot's sandbox, its link `ifname` and address `addr`, with its policy (as
 * sh_egress_nft_policy), in one transaction. -EEXIST when the slot is in already. */
int sh_egress_nft_sandbox_add(sh_egress_nft *n, uint32_t slot, const char *ifname,
                              struct in_addr addr, const sh_egress_nft_rule *rules, size_t nrules,
                              bool default_allow, sh_error **err);

/* Remove slot's sandbox: its chains, its set, its entries. Absent: 0. */
int sh_egress_nft_sandbox_del(sh_egress_nft *n, uint32_t slot, sh_error **err);

/* Replace slot's policy atomically: its CIDR rules in order, then its DNS set, then
 * `default_allow`; `forget` (addresses of names now denied) leave its DNS set in the same
 * transaction; a new generation re-judges its open connections (see above). */
int sh_egress_nft_policy(sh_egress_nft *n, uint32_t slot, const sh_egress_nft_rule *rules,
                         size_t nrules, bool default_allow, const struct in_addr *forget,
                         size_t nforget, sh_error **err);

/* Open `addr` to slot's sandbox for ttl_s seconds (>= 1; a DNS answer's clamped TTL): added
 * to its DNS set, or its timeout set anew when it is there. -ENOENT: no such slot;
 * -ENFILE: the set is full (dns_max). */
int sh_egress_nft_allow_addr(sh_egress_nft *n, uint32_t slot, struct in_addr addr, uint32_t ttl_s,
                             sh_error **err);
/* The same of k addresses (ttls[i] each; k at most SH_EGRESS_NFT_ADDRS_MAX) in one
 * transaction: all opened, or none. */
#define SH_EGRESS_NFT_ADDRS_MAX 64
int sh_egress_nft_allow_addrs(sh_egress_nft *n, uint32_t slot, const struct in_addr *addrs,
                              const uint32_t *ttls, size_t k, sh_error **err);
