/* network.c: the sandboxes' network (sh/network.h): the egress layer's pieces put together for
 * the manager's sandboxes. Every call runs on the loop; each change is one synchronous netlink
 * transaction (net.h says what they cost). A slot's state lives here, by the sandbox's slot:
 * its policy, its key for the DNS proxy (never reused: a query of a deleted sandbox's address
 * finds nothing), the addresses DNS answers opened for it (to take away those of names a new
 * policy denies). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "sandbox-internal.h"
#include "sh/dns.h"
#include "sh/log.h"
#include "sh/net.h"
#include "sh/network.h"
#include "sh/loop.h"
#include "sh/util.h"

#define DNS_SET_MAX 4096 /* addresses one sandbox's DNS set holds */
#define OPENED_MAX  1024 /* opened addresses remembered per sandbox (past it: the oldest go) */
#define RESOLV_PATH "/etc/resolv.conf"
/* Answers whose addresses one sandbox opens a second (each a transaction on the loop), after a
 * burst: past it an answer's new addresses stay closed (its client's connections fail; logged
 * at most once a second). A flood of answers with fresh addresses costs the loop this much. */
#define OPEN_RATE  20
#define OPEN_BURST 60
#define WHY_MAX    512

/* An address a DNS answer opened, and the name it answered. */
typedef struct opened {
        uint32_t addr; /* host byte order */
        uint64_t until_ms;
        char *name;
} opened;

typedef struct net_slot {
        sh_sandbox *sb; /* borrowed (the registry holds it); NULL: no network */
        uint64_t key;   /* the DNS proxy's name for it */
        sh_egress_policy policy;
        opened *open;
        size_t n_open;
        double open_tokens;    /* the bucket of OPEN_RATE: transactions it may still make */
        uint64_t open_last_ms; /* when the bucket was filled last */
        uint64_t open_said_ms; /* when its being over the rate was logged last */
} net_slot;

struct sh_network {
        const sh_config *cfg;
        bool supported;
        char why[WHY_MAX];
        sh_egress_ipv4_net range;
        struct in_addr gateway;
        char ifprefix[SH_EGRESS_IFPREFIX_MAX + 1];
        sh_egress_operator op;
        sh_egress_links *links;
        sh_egress_nft *nft;
        sh_dns *dns;
        net_slot *slots;
        uint32_t nslots;
        uint64_t serial;
        unsigned attached;
};

/* ---- a slot's state ------------------------------------------------------------------------- */

static net_slot *slot_of(const sh_network *n, const sh_sandbox *sb)
{
        unsigned s = sh_sandbox_slot(sb);

        return s < n->nslots && n->slots[s].sb == sb ? &n->slots[s] : NULL;
}

static net_slot *slot_by_key(const sh_network *n, uint64_t key)
{
        uint32_t s = (uint32_t)(key & 0xffffffffu);

        return key && s < n->nslots && n->slots[s].sb && n->slots[s].key == key ? &n->slots[s]
                                                                                : NULL;
}

static void opened_drop(net_slot *s, size_t i)
{
        free(s->open[i].name);
        s->open[i] = s->open[--s->n_open];
}

static void opened_prune(net_slot *s, uint64_t now)
{
        for (size_t i = 0; i < s->n_open;)
                if (s->open[i].until_ms <= now)
                        opened_drop(s, i);
                else
                        i++;
}

static void opened_clear(net_slot *s)
{
        while (s->n_open)
                opened_drop(s, s->n_open - 1);
        free(TAKE_PTR(s->open));
}

/* Remember name → addr until until_ms (the nft set forgets it by itself). Out of memory or
 * past the bound: the oldest entry goes (a policy change then cannot take that address away
 * before its TTL; logged). */
static void opened_note(net_slot *s, const char *name, uint32_t addr, uint64_t until_ms)
{
        size_t i, oldest = 0;
        char *copy;

        for (i = 0; i < s->n_open; i++)
                if (s->open[i].addr == addr && STREQ(s->open[i].name, name)) {
                        if (s->open[i].until_ms < until_ms)
                                s->open[i].until_ms = until_ms;
                        return;
                }
        opened_prune(s, sh_now_ms());
        if (!s->open && !(s->open = calloc(OPENED_MAX, sizeof(*s->open))))
                return;
        if (s->n_open == OPENED_MAX) {
                for (i = 1; i < s->n_open; i++)
                        if (s->open[i].until_ms < s->open[oldest].until_ms)
                                oldest = i;
                opened_drop(s, oldest);
        }
        copy = strdup(name);
        if (!copy)
                return;
        s->open[s->n_open++] = (opened){.addr = addr, .until_ms = until_ms, .name = copy};
}

/* How long an address stays open at most (ms since boot), 0: not open. */
static uint64_t opened_until(const net_slot *s, uint32_t addr)
{
        uint64_t until = 0;

        for (size_t i = 0; i < s->n_open; i++)
                if (s->open[i].addr == addr && s->open[i].until_ms > until)
                        until = s->open[i].until_ms;
        return until;
}

/* An answer's address is opened for its TTL and a tenth more (at least a second): the same
 * name asked again within that tenth finds it open past the new answer's TTL and costs no
 * transaction, while every client's cached answer stays usable to its end. */
static uint32_t ttl_slack(uint32_t ttl_s)
{
        return ttl_s + (ttl_s / 10 ? ttl_s / 10 : 1);
}

/* The policy's CIDR rules for the table, in order. *ret is malloc'd (NULL when none). */
static int nft_rules(const sh_egress_policy *p, sh_egress_nft_rule **ret, size_t *ret_n)
{
        sh_egress_nft_rule *v = NULL;
        size_t i, n = 0;

        for (i = 0; i < p->rules.n; i++)
                n += p->rules.v[i].target.kind == SH_EGRESS_CIDR;
        if (n && !(v = calloc(n, sizeof(*v))))
                return -ENOMEM;
        n = 0;
        for (i = 0; i < p->rules.n; i++) {
                const sh_egress_rule *r = &p->rules.v[i];

                if (r->target.kind != SH_EGRESS_CIDR)
                        continue;
                v[n].net.addr.s_addr = htonl(r->target.net);
                v[n].net.prefix = r->target.prefix;
                v[n++].allow = r->action == SH_EGRESS_ALLOW;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* ---- the DNS proxy's callbacks -------------------------------------------------------------- */

static uint64_t dns_sandbox_of(void *data, const struct sockaddr_in *src)
{
        sh_network *n = data;
        uint32_t a = ntohl(src->sin_addr.s_addr), base = ntohl(n->range.addr.s_addr);

        if (a < base + 2 || a - base - 2 >= n->nslots)
                return 0;
        return n->slots[a - base - 2].sb ? n->slots[a - base - 2].key : 0;
}

static bool dns_allowed(void *data, uint64_t key, const char *name)
{
        sh_network *n = data;
        net_slot *s = slot_by_key(n, key);

        return s && sh_egress_judge_name(&s->policy, &n->op, name, strlen(name)).action ==
                            SH_EGRESS_ALLOW;
}

static bool dns_resolved(void *data, uint64_t key, const char *name, const sh_dns_addr *addrs,
                         size_t k)
{
        sh_network *n = data;
        net_slot *s = slot_by_key(n, key);
        struct in_addr open[64];
        uint32_t ttls[64];
        sh_error *err = NULL;
        char text[INET_ADDRSTRLEN];
        size_t i, m = 0;
        uint64_t now = sh_now_ms();

        if (!s)
                return false;
        for (i = 0; i < k && m < ARRAY_SIZE(open); i++) {
                uint32_t a = ntohl(addrs[i].addr.s_addr);

                /* An allowed name's address is opened unless the deny list or a CIDR rule
                 * denies it (rebinding: an allowed name answered with the metadata or the
                 * pod's address). */
                if (sh_egress_judge_answer(&s->policy, &n->op, name, strlen(name), a).action !=
                    SH_EGRESS_ALLOW) {
                        inet_ntop(AF_INET, &addrs[i].addr, text, sizeof(text));
                        log_info("egress-answer-denied", sh_sandbox_id(s->sb),
                                 "%s answered %s: not opened", name, text);
                        continue;
                }
                /* Open already past this answer's TTL: the name asked again (a client without
                 * a cache, a flood) costs no transaction. */
                if (opened_until(s, a) >= now + (uint64_t)addrs[i].ttl_s * 1000) {
                        opened_note(s, name, a, opened_until(s, a));
                        continue;
                }
                open[m] = addrs[i].addr;
                ttls[m++] = ttl_slack(addrs[i].ttl_s);
        }
        if (!m)
                return true;
        s->open_tokens += (double)(now - s->open_last_ms) * OPEN_RATE / 1000.0;
        if (s->open_tokens > OPEN_BURST)
                s->open_tokens = OPEN_BURST;
        s->open_last_ms = now;
        if (s->open_tokens < 1) {
                if (now - s->open_said_ms >= 1000) {
                        s->open_said_ms = now;
                        log_warn("egress-open-rate", sh_sandbox_id(s->sb),
                                 "%s: over %d answers with new addresses a second: not opened",
                                 name, OPEN_RATE);
                }
                return false;
        }
        s->open_tokens -= 1;
        if (sh_egress_nft_allow_addrs(n->nft, (uint32_t)(s - n->slots), open, ttls, m, &err) < 0) {
                log_warn("egress-open-failed", sh_sandbox_id(s->sb), "%s: %s", name,
                         err && err->msg ? err->msg : "");
                sh_error_release(&err);
                return false;
        }
        for (i = 0; i < m; i++)
                opened_note(s, name, ntohl(open[i].s_addr), now + (uint64_t)ttls[i] * 1000);
        return true;
}

static const sh_dns_ops dns_ops = {
        .sandbox_of = dns_sandbox_of,
        .allowed = dns_allowed,
        .resolved = dns_resolved,
};

/* ---- open and close -------------------------------------------------------------------------- */

_printf_(2, 3) static void unsupported(sh_network *n, const char *fmt, ...)
{
        va_list ap;

        n->supported = false;
        va_start(ap, fmt);
        vsnprintf(n->why, sizeof(n->why), fmt, ap);
        va_end(ap);
        log_warn("egress-unavailable", NULL, "sandboxes get no network: %s", n->why);
}

/* The pod's own IPv4 addresses, each a /32 of the deny list: no sandbox reaches the daemon's
 * API (or anything else of the pod) through them. */
static int deny_pod_addresses(sh_network *n, sh_error **err)
{
        struct ifaddrs *all, *i;
        int r = 0;

        if (getifaddrs(&all) < 0)
                return sh_error_make(err, errno, "listing the pod's addresses");
        for (i = all; i && r == 0; i = i->ifa_next)
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
                        r = sh_egress_list_add_cidr(
                                &n->op.deny,
                                ntohl(((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr),
                                32, err);
        freeifaddrs(all);
        return r;
}

/* The operator's CIDR entries, for the table. */
static int list_nets(const sh_egress_list *l, sh_egress_ipv4_net **ret, size_t *ret_n)
{
        sh_egress_ipv4_net *v = calloc(l->n ? l->n : 1, sizeof(*v));
        size_t i, k = 0;

        if (!v)
                return -ENOMEM;
        for (i = 0; i < l->n; i++)
                if (l->v[i].kind == SH_EGRESS_CIDR) {
                        v[k].addr.s_addr = htonl(l->v[i].net);
                        v[k++].prefix = l->v[i].prefix;
                }
        *ret = v;
        *ret_n = k;
        return 0;
}

/* The links, the DNS proxy and the table; a failure leaves the host without network (the
 * reason kept) and nothing of it open. */
static void open_pieces(sh_network *n, sh_loop *loop, const char *tag)
{
        _cleanup_free_ sh_egress_ipv4_net *deny = NULL, *allow = NULL;
        size_t ndeny = 0, nallow = 0;
        sh_dns_config dc = {0};
        sh_error *err = NULL;
        int r;

        r = sh_dns_upstream_pick(n->cfg->dns_upstream, RESOLV_PATH, &dc.upstream);
        if (r < 0) {
                unsupported(n,
                            "no upstream resolver (SANDBOX_HOST_DNS_UPSTREAM, or a nameserver "
                            "in " RESOLV_PATH "): %s",
                            strerror(-r));
                return;
        }
        if (sh_egress_links_open(&n->range, n->ifprefix, &n->links, &err) < 0)
                goto fail;
        dc.listen.sin_family = AF_INET;
        dc.listen.sin_addr = n->gateway;
        dc.listen.sin_port = htons(53);
        r = sh_dns_new(loop, &dc, &dns_ops, n, &n->dns);
        if (r < 0) {
                n->links = sh_egress_links_close(n->links);
                unsupported(
                        n, "the DNS proxy cannot bind the gateway's port 53: %s%s", strerror(-r),
                        r == -EACCES       ? " (it needs CAP_NET_BIND_SERVICE, or the sysctl "
                                             "net.ipv4.ip_unprivileged_port_start=53)"
                        : r == -EADDRINUSE ? " (another daemon of this network namespace? give it "
                                             "another SANDBOX_HOST_EGRESS_CIDR)"
                                           : "");
                return;
        }
        if (list_nets(&n->op.deny, &deny, &ndeny) < 0 ||
            list_nets(&n->op.allow, &allow, &nallow) < 0) {
                sh_error_make(&err, ENOMEM, "out of memory");
                goto fail;
        }
        if (sh_egress_nft_open(
                    &(sh_egress_nft_config){
                            .tag = tag,
                            .ifprefix = n->ifprefix,
                            .range = n->range,
                            .proxy = n->gateway,
                            .deny = deny,
                            .ndeny = ndeny,
                            .allow = allow,
                            .nallow = nallow,
                            .conn_max = (uint32_t)n->cfg->egress_conn_max,
                            .dns_max = DNS_SET_MAX,
                    },
                    &n->nft, &err) < 0)
                goto fail;
        n->supported = true;
        log_info("egress-ready", NULL, "sandboxes' network %s/%u, DNS proxy on %s:53, table %s",
                 inet_ntoa(n->range.addr), n->range.prefix, "the gateway",
                 sh_egress_nft_table(n->nft));
        return;
fail:
        sh_dns_free(TAKE_PTR(n->dns));
        n->links = sh_egress_links_close(n->links);
        if (err && err->errnum)
                unsupported(n, "%s: %s%s", err->msg ? err->msg : "", strerror(err->errnum),
                            err->errnum == EPERM ? " (the pod lacks CAP_NET_ADMIN)" : "");
        else
                unsupported(n, "%s", err && err->msg ? err->msg : "out of memory");
        sh_error_release(&err);
}

int sh_network_open(const sh_config *cfg, sh_loop *loop, const char *pod_token, sh_network **ret,
                    sh_error **err)
{
        sh_network *n = calloc(1, sizeof(*n));
        size_t i;

        if (!n)
                return sh_error_make(err, ENOMEM, "out of memory");
        n->cfg = cfg;
        /* The lists are the operator's settings: a malformed one stops the start. */
        if (sh_egress_operator_parse(&n->op, cfg->egress_deny, cfg->egress_allow, err) < 0) {
                free(n);
                return -1;
        }
        if (sh_egress_ipv4_net_parse(cfg->egress_cidr, &n->range) < 0) {
                sh_egress_operator_done(&n->op);
                free(n);
                return sh_error_new(err, SH_E_SETTING, "SANDBOX_HOST_EGRESS_CIDR '%s' is no range",
                                    cfg->egress_cidr);
        }
        n->gateway = sh_egress_gateway(&n->range);
        /* The links' names: "s" and four letters of the pod's token, so that two daemons of one
         * namespace (each with its own range) never take each other's. */
        n->ifprefix[0] = 's';
        for (i = 0; i < 4; i++) {
                char c = pod_token[i];

                n->ifprefix[1 + i] = (char)('a' + (c >= 'a' ? c - 'a' + 10 : c - '0'));
        }
        n->nslots = sh_egress_slots(&n->range);
        if (n->nslots > cfg->max_sandboxes)
                n->nslots = (uint32_t)cfg->max_sandboxes;
        if (sh_egress_list_add_cidr(&n->op.deny, ntohl(n->range.addr.s_addr), n->range.prefix,
                                    err) < 0 ||
            deny_pod_addresses(n, err) < 0 || !(n->slots = calloc(n->nslots, sizeof(*n->slots)))) {
                if (!n->slots && !*err)
                        sh_error_make(err, ENOMEM, "out of memory");
                sh_egress_operator_done(&n->op);
                free(n->slots);
                free(n);
                return -1;
        }
        if (!cfg->egress)
                unsupported(n, "turned off (SANDBOX_HOST_EGRESS=off)");
        else
                open_pieces(n, loop, pod_token);
        *ret = n;
        return 0;
}

void sh_network_close(sh_network *n)
{
        sh_error *err = NULL;
        uint32_t i;

        if (!n)
                return;
        /* Links first, then the table (net.h: fail closed). */
        for (i = 0; i < n->nslots; i++)
                if (n->slots[i].sb) {
                        if (sh_egress_link_del(n->links, i, &err) < 0) {
                                log_warn("egress-close-failed", NULL, "link %u: %s", i,
                                         err && err->msg ? err->msg : "");
                                sh_error_release(&err);
                        }
                        sh_egress_policy_done(&n->slots[i].policy);
                        opened_clear(&n->slots[i]);
                }
        sh_dns_free(n->dns);
        if (n->nft && sh_egress_nft_close(n->nft, &err) < 0) {
                log_warn("egress-close-failed", NULL, "table: %s", err && err->msg ? err->msg : "");
                sh_error_release(&err);
        }
        sh_egress_links_close(n->links);
        sh_egress_operator_done(&n->op);
        free(n->slots);
        free(n);
}

uint32_t sh_network_nameserver(const sh_network *n)
{
        return n && n->supported ? n->gateway.s_addr : 0;
}

/* ---- a sandbox's network ---------------------------------------------------------------------- */

int sh_network_attach(sh_network *n, sh_sandbox *sb, int netns_fd, sh_egress_policy *p,
                      sh_error **err)
{
        unsigned s = sh_sandbox_slot(sb);
        _cleanup_free_ sh_egress_nft_rule *rules = NULL;
        _cleanup_close_ int ns = -1;
        char path[64], ifname[IFNAMSIZ];
        struct in_addr addr;
        size_t nrules = 0;
        uint64_t t0, t1;
        pid_t pid;
        int r;

        if (!n->supported) {
                sh_egress_policy_done(p);
                return sh_error_new(err, SH_E_INVALID, "sandboxes here have no network: %s",
                                    n->why);
        }
        if (s >= n->nslots || n->slots[s].sb || sh_egress_slot_addr(&n->range, s, &addr) < 0) {
                sh_egress_policy_done(p);
                return sh_error_new(err, SH_E_INTERNAL, "slot %u has no address of the range", s);
        }
        /* The worker's own (handed over as it started), else by /proc: that needs
         * CAP_SYS_PTRACE once its PID 1 is set up (not dumpable). */
        pid = sh_sandbox_worker_pid(sb);
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
        if (netns_fd < 0 && (pid <= 0 || (ns = open(path, O_RDONLY | O_CLOEXEC)) < 0)) {
                r = pid <= 0 ? ESRCH : errno;
                sh_egress_policy_done(p);
                return sh_error_make(err, r, "opening the sandbox's network namespace: %s",
                                     strerror(r));
        }
        if (nft_rules(p, &rules, &nrules) < 0) {
                sh_egress_policy_done(p);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        sh_egress_link_name(n->links, s, ifname, sizeof(ifname));
        /* The table first, then the link (net.h: fail closed). */
        t0 = sh_now_ns();
        if (sh_egress_nft_sandbox_add(n->nft, s, ifname, addr, rules, nrules,
                                      p->default_action == SH_EGRESS_ALLOW, err) < 0) {
                sh_egress_policy_done(p);
                return -1;
        }
        t1 = sh_now_ns();
        r = sh_egress_link_add(n->links, s, netns_fd >= 0 ? netns_fd : ns, err);
        /* What each step cost (issue 24's create row). */
        log_debug("egress-attach-time", sh_sandbox_id(sb), "table %.3f ms, link %.3f ms",
                  (double)(t1 - t0) / 1e6, (double)(sh_now_ns() - t1) / 1e6);
        if (r < 0) {
                sh_error *ignored = NULL;

                if (sh_egress_nft_sandbox_del(n->nft, s, &ignored) < 0)
                        sh_error_release(&ignored);
                sh_egress_policy_done(p);
                return -1;
        }
        n->slots[s] = (net_slot){.sb = sb,
                                 .key = (++n->serial << 32) | s,
                                 .policy = *p,
                                 .open_tokens = OPEN_BURST,
                                 .open_last_ms = sh_now_ms()};
        *p = (sh_egress_policy){0};
        n->attached++;
        return 0;
}

void sh_network_detach(sh_network *n, sh_sandbox *sb)
{
        net_slot *s = n ? slot_of(n, sb) : NULL;
        uint32_t i;
        sh_error *err = NULL;

        if (!s)
                return;
        i = (uint32_t)(s - n->slots);
        /* The link first, then its place in the table (net.h). */
        if (sh_egress_link_del(n->links, i, &err) < 0 ||
            sh_egress_nft_sandbox_del(n->nft, i, &err) < 0) {
                log_warn("egress-detach-failed", sh_sandbox_id(sb), "%s",
                         err && err->msg ? err->msg : "");
                sh_error_release(&err);
        }
        sh_dns_forget(n->dns, s->key);
        sh_egress_policy_done(&s->policy);
        opened_clear(s);
        *s = (net_slot){0};
        n->attached--;
}

const sh_egress_policy *sh_network_policy(const sh_network *n, const sh_sandbox *sb)
{
        const net_slot *s = slot_of(n, sb);

        return s ? &s->policy : NULL;
}

int sh_network_set_policy(sh_network *n, sh_sandbox *sb, sh_egress_policy *p, sh_error **err)
{
        net_slot *s = slot_of(n, sb);
        _cleanup_free_ sh_egress_nft_rule *rules = NULL;
        _cleanup_free_ struct in_addr *forget = NULL;
        _cleanup_free_ bool *allowed = NULL;
        size_t nrules = 0, nforget = 0, i, j;
        uint64_t t0;
        bool keep;

        if (!s) {
                sh_egress_policy_done(p);
                return sh_error_new(err, SH_E_INVALID, "the sandbox has no network");
        }
        opened_prune(s, sh_now_ms());
        if (nft_rules(p, &rules, &nrules) < 0 ||
            (s->n_open && (!(forget = calloc(s->n_open, sizeof(*forget))) ||
                           !(allowed = calloc(s->n_open, sizeof(*allowed)))))) {
                sh_egress_policy_done(p);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        /* Each opened (name, address) judged once by the new policy (a verdict walks its
         * rules: at most OPENED_MAX of them on the loop, never their square). */
        for (i = 0; i < s->n_open; i++)
                allowed[i] = sh_egress_judge_answer(p, &n->op, s->open[i].name,
                                                    strlen(s->open[i].name), s->open[i].addr)
                                     .action == SH_EGRESS_ALLOW;
        /* An address goes when no name that opened it is still allowed to. */
        for (i = 0; i < s->n_open; i++) {
                if (allowed[i])
                        continue;
                keep = false;
                for (j = 0; j < s->n_open && !keep; j++)
                        keep = allowed[j] && s->open[j].addr == s->open[i].addr;
                for (j = 0; j < nforget && !keep; j++)
                        keep = forget[j].s_addr == htonl(s->open[i].addr);
                if (!keep)
                        forget[nforget++].s_addr = htonl(s->open[i].addr);
        }
        t0 = sh_now_ns();
        if (sh_egress_nft_policy(n->nft, (uint32_t)(s - n->slots), rules, nrules,
                                 p->default_action == SH_EGRESS_ALLOW, forget, nforget, err) < 0) {
                sh_egress_policy_done(p);
                return -1;
        }
        log_debug("egress-policy-time", sh_sandbox_id(sb), "table %.3f ms",
                  (double)(sh_now_ns() - t0) / 1e6);
        /* Backwards: opened_drop moves the last entry into the hole, whose verdict is known. */
        for (i = s->n_open; i-- > 0;)
                if (!allowed[i]) {
                        allowed[i] = allowed[s->n_open - 1];
                        opened_drop(s, i);
                }
        sh_egress_policy_done(&s->policy);
        s->policy = *p;
        *p = (sh_egress_policy){0};
        /* What the sandbox's cached answers opened was judged again above: the next query of
         * each name goes upstream and is judged by the new policy. */
        sh_dns_flush(n->dns, s->key);
        return 0;
}

/* ---- what the host says ----------------------------------------------------------------------- */

bool sh_network_supported(const sh_network *n)
{
        return n->supported;
}

const char *sh_network_why(const sh_network *n)
{
        return n->supported ? NULL : n->why;
}

const char *sh_network_enforcement(const sh_network *n)
{
        return n->supported ? "dns+nft" : "none";
}

const sh_egress_operator *sh_network_operator(const sh_network *n)
{
        return &n->op;
}

cJSON *sh_network_health_json(const sh_network *n)
{
        cJSON *o = cJSON_CreateObject();
        char range[INET_ADDRSTRLEN + 4], gw[INET_ADDRSTRLEN];

        if (!o || !cJSON_AddBoolToObject(o, "supported", n->supported) ||
            !cJSON_AddStringToObject(o, "enforcement", sh_network_enforcement(n)))
                goto oom;
        if (!n->supported) {
                if (!cJSON_AddStringToObject(o, "reason", n->why))
                        goto oom;
                return o;
        }
        inet_ntop(AF_INET, &n->range.addr, range, sizeof(range));
        snprintf(range + strlen(range), sizeof(range) - strlen(range), "/%u", n->range.prefix);
        inet_ntop(AF_INET, &n->gateway, gw, sizeof(gw));
        if (!cJSON_AddStringToObject(o, "range", range) ||
            !cJSON_AddStringToObject(o, "gateway", gw) ||
            !cJSON_AddNumberToObject(o, "sandboxes", n->attached) ||
            !cJSON_AddNumberToObject(o, "conn_max", (double)n->cfg->egress_conn_max))
                goto oom;
        return o;
oom:
        cJSON_Delete(o);
        return NULL;
}
