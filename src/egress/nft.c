/* nft.c: the daemon's nftables table (net.h): created at start, a sandbox's chains and set
 * added and removed with it, its policy replaced and its DNS answers opened, each change one
 * transaction: of libnftables (the kernel's own rule language; sets with timeouts; atomic
 * batches; no `nft` program spawned per change), except an address opened, the hot path (every
 * A record of a DNS answer), and a sandbox's place added (on its create's path), each one batch
 * of libnftnl messages on a netfilter socket of its own: libnftables reads the whole table into
 * its cache before every command, which costs more with every sandbox in the table. The batch
 * makes what the text form would (tests/unit/test_egress_net.c compares the two). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netlink.h>
#include <nftables/libnftables.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "sh/net.h"
#include "sh/random.h"

typedef struct slot {
        bool used;
        char ifname[16];
        struct in_addr addr;
} slot;

#define IFNAMSIZ_KEY 16   /* an ifname in a set key: zero-padded to this */
#define NL_BUF       8192 /* one batch of ours (an address opened), or one read of its answers */

struct sh_egress_nft {
        struct nft_ctx *ctx;
        struct mnl_socket *nl; /* netfilter, for the libnftnl batches (nonblocking, cloexec) */
        uint32_t seq;          /* the last sequence number sent on nl */
        char table[64];
        uint32_t conn_max, dns_max;
        uint32_t gen; /* the last generation given; conntrack marks of accepted connections */
        slot *slots;
        size_t nslots;
};

/* One transaction being written: the commands, in nft's language. */
typedef struct txn {
        char *text;
        size_t len;
        FILE *f;
} txn;

static int txn_begin(txn *t)
{
        *t = (txn){0};
        t->f = open_memstream(&t->text, &t->len);
        return t->f ? 0 : -errno;
}

static void txn_drop(txn *t)
{
        if (t->f)
                fclose(t->f);
        free(t->text);
        *t = (txn){0};
}

static void addf(txn *t, const char *fmt, ...) _printf_(2, 3);
static void addf(txn *t, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vfprintf(t->f, fmt, ap);
        va_end(ap);
}

/* The errno behind nft's message (it prints the kernel's strerror), else EIO. */
static int errno_of(const char *why)
{
        static const int known[] = {ENFILE, ENOENT, EEXIST, EPERM, EOPNOTSUPP, ENOMEM, EBUSY};
        size_t i;

        for (i = 0; why && i < ARRAY_SIZE(known); i++)
                if (strstr(why, strerror(known[i])))
                        return known[i];
        return EIO;
}

/* Run the transaction (all of it or nothing) and free it. 0, or -errno with *err saying what
 * nft said. */
static int txn_run(sh_egress_nft *n, txn *t, sh_error **err)
{
        const char *why;
        int r;

        if (fclose(t->f) != 0) {
                t->f = NULL;
                txn_drop(t);
                return sh_error_make(err, ENOMEM, "nft: building a transaction");
        }
        t->f = NULL;
        r = nft_run_cmd_from_buffer(n->ctx, t->text);
        (void)nft_ctx_get_output_buffer(n->ctx); /* read: emptied for the next one */
        why = nft_ctx_get_error_buffer(n->ctx);
        if (r != 0) {
                char line[512];
                size_t i, len = 0;

                /* One line: nft's message spans several (the command, a caret line). */
                for (i = 0; why && why[i] && len + 1 < sizeof(line); i++)
                        if (why[i] != '\n' || (len && line[len - 1] != ' '))
                                line[len++] = why[i] == '\n' || why[i] == '\t' ? ' ' : why[i];
                while (len && line[len - 1] == ' ')
                        len--;
                line[len] = '\0';
                r = sh_error_make(err, errno_of(why), "nft: %s", len ? line : "failed");
        }
        txn_drop(t);
        return r;
}

static void put_net(txn *t, const sh_egress_ipv4_net *net)
{
        char a[INET_ADDRSTRLEN];

        inet_ntop(AF_INET, &net->addr, a, sizeof(a));
        addf(t, "%s/%u", a, net->prefix);
}

static void put_addr(txn *t, struct in_addr addr)
{
        char a[INET_ADDRSTRLEN];

        inet_ntop(AF_INET, &addr, a, sizeof(a));
        addf(t, "%s", a);
}

static void put_set(txn *t, const char *name, const sh_egress_ipv4_net *nets, size_t count)
{
        size_t i;

        addf(t, "  set %s { type ipv4_addr; flags interval; auto-merge;", name);
        if (count) {
                addf(t, " elements = { ");
                for (i = 0; i < count; i++) {
                        if (i)
                                addf(t, ", ");
                        put_net(t, &nets[i]);
                }
                addf(t, " };");
        }
        addf(t, " }\n");
}

static bool valid_word(const char *s, size_t max, const char *extra)
{
        size_t i, len = s ? strlen(s) : 0;

        if (len == 0 || len > max)
                return false;
        for (i = 0; i < len; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
                      strchr(extra, s[i])))
                        return false;
        return true;
}

/* libnftables (1.0.6) opens its netfilter socket without O_CLOEXEC: every fd of the daemon is
 * born close-on-exec, so one such socket without it is libnftables', and gets the flag. */
static void cloexec_netfilter_sockets(void)
{
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;

        if (!d)
                return;
        while ((e = readdir(d))) {
                int fd = atoi(e->d_name), v = 0, flags;
                socklen_t len = sizeof(v);

                if (fd < 3 || fd == dirfd(d) || (flags = fcntl(fd, F_GETFD)) < 0 ||
                    (flags & FD_CLOEXEC))
                        continue;
                if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 || v != AF_NETLINK)
                        continue;
                len = sizeof(v);
                if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) == 0 &&
                    v == NETLINK_NETFILTER)
                        (void)fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
        }
        closedir(d);
}

static void nft_free(sh_egress_nft *n)
{
        if (n->ctx)
                nft_ctx_free(n->ctx);
        if (n->nl)
                mnl_socket_close(n->nl);
        free(n->slots);
        free(n);
}

int sh_egress_nft_open(const sh_egress_nft_config *c, sh_egress_nft **ret, sh_error **err)
{
        sh_egress_nft *n;
        txn t;
        int r;

        if (!valid_word(c->tag, SH_EGRESS_TAG_MAX, "_") ||
            !valid_word(c->ifprefix, SH_EGRESS_IFPREFIX_MAX, "") ||
            strpbrk(c->ifprefix, "0123456789") || c->conn_max < 1 || c->dns_max < 1 ||
            c->range.prefix > SH_EGRESS_PREFIX_MAX)
                return sh_error_new(err, SH_E_INVALID, "nft: a bad table tag, prefix or bound");
        n = calloc(1, sizeof(*n));
        if (!n)
                return sh_error_make(err, ENOMEM, "nft: allocating");
        snprintf(n->table, sizeof(n->table), "sandbox_host_%s", c->tag);
        n->conn_max = c->conn_max;
        n->dns_max = c->dns_max;
        /* A random first generation: a conntrack entry of a previous run, still alive, never
         * carries a mark this run gives. 0 is never given (unmarked). */
        if (sh_random_bytes(&n->gen, sizeof(n->gen)) < 0)
                n->gen = 1;
        n->ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        if (!n->ctx || nft_ctx_buffer_output(n->ctx) != 0 || nft_ctx_buffer_error(n->ctx) != 0) {
                nft_free(n);
                return sh_error_make(err, ENOMEM, "nft: a libnftables context");
        }
        cloexec_netfilter_sockets();
        n->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (!n->nl || mnl_socket_bind(n->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                r = -errno;
                nft_free(n);
                return sh_error_make(err, -r, "nft: a netfilter socket: %s", strerror(-r));
        }
        n->seq = (uint32_t)time(NULL);
        r = txn_begin(&t);
        if (r < 0) {
                nft_free(n);
                return sh_error_make(err, -r, "nft: building a transaction");
        }
        /* "add" makes the delete valid when there is no stale table; the new one follows. */
        addf(&t, "add table inet %s\ndelete table inet %s\ntable inet %s {\n", n->table, n->table,
             n->table);
        addf(&t, "  set pairs { type ifname . ipv4_addr; }\n");
        addf(&t, "  map out { type ifname . ipv4_addr : verdict; }\n");
        addf(&t, "  map in { type ifname . ipv4_addr : verdict; }\n");
        put_set(&t, "deny", c->deny, c->ndeny);
        put_set(&t, "allow", c->allow, c->nallow);
        addf(&t,
             "  chain forward {\n    type filter hook forward priority filter; policy accept;\n");
        /* DNS goes only to the proxy, which is local (input): never forwarded. */
        addf(&t, "    iifname \"%s*\" meta l4proto { tcp, udp } th dport 53 drop\n", c->ifprefix);
        /* Nothing of the range (another sandbox) from a sandbox, whatever the lists say. */
        addf(&t, "    iifname \"%s*\" ip daddr ", c->ifprefix);
        put_net(&t, &c->range);
        addf(&t, " drop\n");
        addf(&t, "    ct direction original iifname . ip saddr vmap @out\n");
        addf(&t, "    ct direction reply oifname . ip daddr vmap @in\n");
        addf(&t, "    iifname \"%s*\" drop\n    oifname \"%s*\" drop\n", c->ifprefix, c->ifprefix);
        addf(&t, "    ip saddr ");
        put_net(&t, &c->range);
        addf(&t, " drop\n    ip daddr ");
        put_net(&t, &c->range);
        addf(&t, " drop\n  }\n");
        /* Each sandbox's UDP DNS packets metered by source before the proxy's one socket: a
         * flood past the proxy's own rate is dropped here, so it never fills the socket the
         * other sandboxes' queries wait in. Entries time out; a full set meters nobody new
         * (the proxy's own bucket still holds). */
        addf(&t, "  set dnsrate { type ipv4_addr; size %u; flags dynamic,timeout; timeout 10s; }\n",
             SH_EGRESS_DNS_METER_SIZE);
        addf(&t, "  chain input {\n    type filter hook input priority filter; policy accept;\n");
        addf(&t,
             "    iifname \"%s*\" udp dport 53 add @dnsrate { ip saddr limit rate over "
             "%u/second burst %u packets } counter drop\n",
             c->ifprefix, SH_EGRESS_DNS_PPS, SH_EGRESS_DNS_PPS_BURST);
        addf(&t, "    iifname . ip saddr @pairs ip daddr ");
        put_addr(&t, c->proxy);
        addf(&t, " meta l4proto { tcp, udp } th dport 53 accept\n");
        addf(&t, "    iifname \"%s*\" drop\n    ip saddr ", c->ifprefix);
        put_net(&t, &c->range);
        addf(&t, " drop\n  }\n");
        addf(&t, "  chain postrouting {\n    type nat hook postrouting priority srcnat; policy "
                 "accept;\n    ip saddr ");
        put_net(&t, &c->range);
        addf(&t, " oifname != \"%s*\" masquerade\n  }\n}\n", c->ifprefix);
        r = txn_run(n, &t, err);
        if (r < 0) {
                sh_error_wrap(err, "creating table %s", n->table);
                nft_free(n);
                return r;
        }
        *ret = n;
        return 0;
}

int sh_egress_nft_close(sh_egress_nft *n, sh_error **err)
{
        txn t;
        int r;

        if (!n)
                return 0;
        r = txn_begin(&t);
        if (r < 0)
                r = sh_error_make(err, -r, "nft: building a transaction");
        else {
                addf(&t, "delete table inet %s\n", n->table);
                r = txn_run(n, &t, err);
        }
        nft_free(n);
        return r;
}

const char *sh_egress_nft_table(const sh_egress_nft *n)
{
        return n->table;
}

static slot *find(sh_egress_nft *n, uint32_t s)
{
        return s < n->nslots && n->slots[s].used ? &n->slots[s] : NULL;
}

static int sandbox_add_batch(sh_egress_nft *n, uint32_t s, const char *ifname, struct in_addr addr,
                             const sh_egress_nft_rule *rules, size_t nrules, bool default_allow,
                             uint32_t *which);

/* Write slot s's policy chain anew (flushed first): see net.h for the order. */
static void put_policy(sh_egress_nft *n, txn *t, uint32_t s, const sh_egress_nft_rule *rules,
                       size_t nrules, bool default_allow)
{
        const char *T = n->table;
        size_t i;

        if (++n->gen == 0)
                n->gen = 1;
        addf(t, "flush chain inet %s sbp_%u\n", T, s);
        addf(t, "add rule inet %s sbp_%u ct mark %u accept\n", T, s, n->gen);
        addf(t, "add rule inet %s sbp_%u ct original ip daddr @deny drop\n", T, s);
        addf(t, "add rule inet %s sbp_%u ct original ip daddr @allow ct mark set %u accept\n", T, s,
             n->gen);
        for (i = 0; i < nrules; i++) {
                addf(t, "add rule inet %s sbp_%u ct original ip daddr ", T, s);
                put_net(t, &rules[i].net);
                if (rules[i].allow)
                        addf(t, " ct mark set %u accept\n", n->gen);
                else
                        addf(t, " drop\n");
        }
        addf(t, "add rule inet %s sbp_%u ct original ip daddr @dns_%u ct mark set %u accept\n", T,
             s, s, n->gen);
        if (default_allow)
                addf(t, "add rule inet %s sbp_%u ct mark set %u accept\n", T, s, n->gen);
}

static bool valid_rules(const sh_egress_nft_rule *rules, size_t nrules)
{
        size_t i;

        for (i = 0; i < nrules; i++)
                if (rules[i].net.prefix > 32)
                        return false;
        return true;
}

int sh_egress_nft_sandbox_add(sh_egress_nft *n, uint32_t s, const char *ifname, struct in_addr addr,
                              const sh_egress_nft_rule *rules, size_t nrules, bool default_allow,
                              sh_error **err)
{
        const char *T = n->table;
        uint32_t which = 0;
        int r;

        if (!valid_word(ifname, sizeof(n->slots[0].ifname) - 1, "") || !valid_rules(rules, nrules))
                return sh_error_new(err, SH_E_INVALID, "nft: a bad link name or rule");
        if (find(n, s))
                return sh_error_make(err, EEXIST, "nft: slot %u is in the table already", s);
        if (s >= n->nslots) {
                size_t want = (size_t)s + 1 > n->nslots * 2 ? (size_t)s + 1 : n->nslots * 2;
                slot *grown = realloc(n->slots, want * sizeof(*grown));

                if (!grown)
                        return sh_error_make(err, ENOMEM, "nft: allocating");
                memset(grown + n->nslots, 0, (want - n->nslots) * sizeof(*grown));
                n->slots = grown;
                n->nslots = want;
        }
        r = sandbox_add_batch(n, s, ifname, addr, rules, nrules, default_allow, &which);
        if (r < 0)
                return sh_error_make(err, -r,
                                     "nft: adding slot %u to table %s: %s (message %u of the "
                                     "batch)",
                                     s, T, strerror(-r), which);
        n->slots[s].used = true;
        snprintf(n->slots[s].ifname, sizeof(n->slots[s].ifname), "%s", ifname);
        n->slots[s].addr = addr;
        return 0;
}

int sh_egress_nft_sandbox_del(sh_egress_nft *n, uint32_t s, sh_error **err)
{
        const char *T = n->table;
        slot *sl = find(n, s);
        txn t;
        int r;

        if (!sl)
                return 0;
        r = txn_begin(&t);
        if (r < 0)
                return sh_error_make(err, -r, "nft: building a transaction");
        addf(&t, "delete element inet %s out { \"%s\" . ", T, sl->ifname);
        put_addr(&t, sl->addr);
        addf(&t, " }\ndelete element inet %s in { \"%s\" . ", T, sl->ifname);
        put_addr(&t, sl->addr);
        addf(&t, " }\ndelete element inet %s pairs { \"%s\" . ", T, sl->ifname);
        put_addr(&t, sl->addr);
        addf(&t, " }\n");
        /* Rules first: a chain or set still referenced cannot go. */
        addf(&t, "flush chain inet %s sb_%u\nflush chain inet %s sbp_%u\n", T, s, T, s);
        addf(&t, "delete chain inet %s sb_%u\ndelete chain inet %s sbp_%u\n", T, s, T, s);
        addf(&t, "delete set inet %s dns_%u\n", T, s);
        r = txn_run(n, &t, err);
        if (r < 0)
                return sh_error_wrap(err, "removing slot %u from table %s", s, T);
        sl->used = false;
        return 0;
}

/* Make sure `addr` is in slot s's DNS set, then take it out: the add makes the delete valid
 * whether or not it was there (nft 1.0.6 has no "destroy"); one transaction. */
static void put_forget(txn *t, const char *T, uint32_t s, struct in_addr addr)
{
        addf(t, "add element inet %s dns_%u { ", T, s);
        put_addr(t, addr);
        addf(t, " timeout 1s }\ndelete element inet %s dns_%u { ", T, s);
        put_addr(t, addr);
        addf(t, " }\n");
}

int sh_egress_nft_policy(sh_egress_nft *n, uint32_t s, const sh_egress_nft_rule *rules,
                         size_t nrules, bool default_allow, const struct in_addr *forget,
                         size_t nforget, sh_error **err)
{
        size_t i;
        txn t;
        int r;

        if (!find(n, s))
                return sh_error_make(err, ENOENT, "nft: slot %u is not in the table", s);
        if (!valid_rules(rules, nrules))
                return sh_error_new(err, SH_E_INVALID, "nft: a bad rule");
        r = txn_begin(&t);
        if (r < 0)
                return sh_error_make(err, -r, "nft: building a transaction");
        for (i = 0; i < nforget; i++)
                put_forget(&t, n->table, s, forget[i]);
        put_policy(n, &t, s, rules, nrules, default_allow);
        r = txn_run(n, &t, err);
        if (r < 0)
                return sh_error_wrap(err, "replacing the policy of slot %u", s);
        return 0;
}

/* One element message of slot s's DNS set into the batch: the k addresses, each with its
 * timeout when timeout_ms is not NULL (timeout_ms[i], or timeout_ms[0] for all when `one`).
 * 0, or -ENOMEM. */
static int put_elems(sh_egress_nft *n, struct mnl_nlmsg_batch *b, uint16_t type, uint16_t flags,
                     const char *set, const struct in_addr *addrs, size_t k,
                     const uint64_t *timeout_ms, bool one)
{
        struct nftnl_set *st = nftnl_set_alloc();
        struct nlmsghdr *nlh;
        size_t i;

        if (!st || nftnl_set_set_str(st, NFTNL_SET_TABLE, n->table) < 0 ||
            nftnl_set_set_str(st, NFTNL_SET_NAME, set) < 0)
                goto oom;
        for (i = 0; i < k; i++) {
                struct nftnl_set_elem *e = nftnl_set_elem_alloc();

                if (!e || nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, &addrs[i].s_addr,
                                             sizeof(addrs[i].s_addr)) < 0) {
                        if (e)
                                nftnl_set_elem_free(e);
                        goto oom;
                }
                if (timeout_ms)
                        nftnl_set_elem_set_u64(e, NFTNL_SET_ELEM_TIMEOUT, timeout_ms[one ? 0 : i]);
                nftnl_set_elem_add(st, e); /* the set owns it now */
        }
        nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), type, NFPROTO_INET,
                                    flags | NLM_F_ACK, ++n->seq);
        nftnl_set_elems_nlmsg_build_payload(nlh, st);
        nftnl_set_free(st);
        mnl_nlmsg_batch_next(b);
        return 0;
oom:
        if (st)
                nftnl_set_free(st);
        return -ENOMEM;
}

/* Send the batch whose `count` messages are sequence numbers first.. (begin and end around
 * them) and read the kernel's answer to each: it handles a batch before sendmsg returns, so
 * every answer is there to read at once. 0, or the first -errno the kernel gave (*which: its
 * message, 1..count; 0 the begin, count + 1 the end). */
static int batch_talk(sh_egress_nft *n, struct mnl_nlmsg_batch *b, uint32_t first, uint32_t count,
                      uint32_t *which)
{
        _Alignas(struct nlmsghdr) char buf[NL_BUF];
        uint32_t portid = mnl_socket_get_portid(n->nl), answered = 0;
        int r = 0;

        if (mnl_socket_sendto(n->nl, mnl_nlmsg_batch_head(b), mnl_nlmsg_batch_size(b)) < 0)
                return -errno;
        /* An answer to the batch's begin or end (a batch refused whole) is the last one. */
        while (answered < count) {
                ssize_t got = mnl_socket_recvfrom(n->nl, buf, sizeof(buf));
                const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
                int len = (int)got;

                if (got < 0)
                        return r ? r : errno == EAGAIN ? -ETIMEDOUT : -errno;
                for (; mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
                        const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
                        uint32_t at = nlh->nlmsg_seq - (first - 1); /* wraps as seq does */

                        if (nlh->nlmsg_type != NLMSG_ERROR || nlh->nlmsg_pid != portid ||
                            at > count + 1 || nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*e)))
                                continue;
                        if (e->error < 0 && r == 0) {
                                r = e->error;
                                *which = at;
                        }
                        if (at == 0 || at > count)
                                return r ? r : -EIO;
                        answered++;
                }
        }
        return r;
}

/* ---- a sandbox's place in the table as one libnftnl batch ---------------------------------- */

/* The messages of one batch being written; `oom` once an allocation or the buffer failed. */
typedef struct nlb {
        sh_egress_nft *n;
        struct mnl_nlmsg_batch *b;
        uint32_t count; /* messages between begin and end */
        bool oom;
} nlb;

static void nlb_put(nlb *B)
{
        B->count++;
        if (!mnl_nlmsg_batch_next(B->b))
                B->oom = true;
}

static struct nftnl_expr *expr_new(nlb *B, struct nftnl_rule *r, const char *name)
{
        struct nftnl_expr *e = B->oom ? NULL : nftnl_expr_alloc(name);

        if (!e) {
                B->oom = true;
                return NULL;
        }
        nftnl_rule_add_expr(r, e); /* the rule owns it now */
        return e;
}

/* [ ct load <key> => reg 1 (, dir original) ] */
static void x_ct_load(nlb *B, struct nftnl_rule *r, uint32_t key, bool original)
{
        struct nftnl_expr *e = expr_new(B, r, "ct");

        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, key);
        if (original)
                nftnl_expr_set_u8(e, NFTNL_EXPR_CT_DIR, 0); /* IP_CT_DIR_ORIGINAL */
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
}

/* [ cmp <op> reg 1 <data> ] */
static void x_cmp(nlb *B, struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len)
{
        struct nftnl_expr *e = expr_new(B, r, "cmp");

        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
        nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
}

/* [ bitwise reg 1 = ( reg 1 & <mask> ) ^ 0 ], 4 bytes */
static void x_and(nlb *B, struct nftnl_rule *r, uint32_t mask)
{
        struct nftnl_expr *e = expr_new(B, r, "bitwise");
        uint32_t zero = 0;

        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, sizeof(mask));
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask, sizeof(mask));
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, sizeof(zero));
}

/* [ lookup reg 1 set <name> ] */
static void x_lookup(nlb *B, struct nftnl_rule *r, const char *set, uint32_t set_id)
{
        struct nftnl_expr *e = expr_new(B, r, "lookup");

        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
        nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
        nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, set_id);
}

/* [ immediate reg 0 <verdict> (-> chain) ] */
static void x_verdict(nlb *B, struct nftnl_rule *r, int verdict, const char *chain)
{
        struct nftnl_expr *e = expr_new(B, r, "immediate");

        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
        if (chain)
                nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
}

/* "ct mark set <gen>": [ immediate reg 1 <gen> ] [ ct set mark with reg 1 ] */
static void x_mark_set(nlb *B, struct nftnl_rule *r, uint32_t gen)
{
        struct nftnl_expr *e = expr_new(B, r, "immediate");

        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
        nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &gen, sizeof(gen));
        if (!(e = expr_new(B, r, "ct")))
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_MARK);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_SREG, NFT_REG_1);
}

/* "ct original ip daddr <net>" as nft 1.0.6 writes it: a whole-byte prefix compares its
 * bytes, any other (and /0) masks the address first. */
static void x_daddr_net(nlb *B, struct nftnl_rule *r, const sh_egress_ipv4_net *net)
{
        uint32_t mask = net->prefix ? htonl(~0u << (32 - net->prefix)) : 0;
        uint32_t a = net->addr.s_addr & mask;

        x_ct_load(B, r, NFT_CT_DST_IP, true);
        if (net->prefix && net->prefix % 8 == 0)
                x_cmp(B, r, NFT_CMP_EQ, &a, net->prefix / 8);
        else {
                x_and(B, r, mask);
                x_cmp(B, r, NFT_CMP_EQ, &a, sizeof(a));
        }
}

static struct nftnl_rule *rule_new(nlb *B, const char *chain)
{
        struct nftnl_rule *r = B->oom ? NULL : nftnl_rule_alloc();

        if (!r) {
                B->oom = true;
                return NULL;
        }
        nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
        nftnl_rule_set_str(r, NFTNL_RULE_TABLE, B->n->table);
        nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
        return r;
}

/* The rule into the batch, as "add rule" (appended), and freed. */
static void rule_put(nlb *B, struct nftnl_rule *r)
{
        struct nlmsghdr *nlh;

        if (!r)
                return;
        if (!B->oom) {
                nlh = nftnl_rule_nlmsg_build_hdr(
                        mnl_nlmsg_batch_current(B->b), NFT_MSG_NEWRULE, NFPROTO_INET,
                        NLM_F_APPEND | NLM_F_CREATE | NLM_F_ACK, ++B->n->seq);
                nftnl_rule_nlmsg_build_payload(nlh, r);
                nlb_put(B);
        }
        nftnl_rule_free(r);
}

static void chain_put(nlb *B, const char *name)
{
        struct nftnl_chain *c = B->oom ? NULL : nftnl_chain_alloc();
        struct nlmsghdr *nlh;

        if (!c) {
                B->oom = true;
                return;
        }
        nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, B->n->table);
        nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
        nlh = nftnl_chain_nlmsg_build_hdr(mnl_nlmsg_batch_current(B->b), NFT_MSG_NEWCHAIN,
                                          NFPROTO_INET, NLM_F_CREATE | NLM_F_ACK, ++B->n->seq);
        nftnl_chain_nlmsg_build_payload(nlh, c);
        nftnl_chain_free(c);
        nlb_put(B);
}

/* "add set <name> { type ipv4_addr; flags timeout; size <max>; }": key type 7 (ipv4_addr),
 * its byte order (big endian) in the set's user data, as nft writes them. */
static void dns_set_put(nlb *B, const char *name, uint32_t id)
{
        struct nftnl_set *st = B->oom ? NULL : nftnl_set_alloc();
        struct nftnl_udata_buf *ud = nftnl_udata_buf_alloc(64);
        struct nlmsghdr *nlh;

        if (!st || !ud || !nftnl_udata_put_u32(ud, 0 /* NFTNL_UDATA_SET_KEYBYTEORDER */, 2)) {
                B->oom = true;
                goto out;
        }
        nftnl_set_set_u32(st, NFTNL_SET_FAMILY, NFPROTO_INET);
        nftnl_set_set_str(st, NFTNL_SET_TABLE, B->n->table);
        nftnl_set_set_str(st, NFTNL_SET_NAME, name);
        nftnl_set_set_u32(st, NFTNL_SET_FLAGS, NFT_SET_TIMEOUT);
        nftnl_set_set_u32(st, NFTNL_SET_KEY_TYPE, 7);
        nftnl_set_set_u32(st, NFTNL_SET_KEY_LEN, sizeof(uint32_t));
        nftnl_set_set_u32(st, NFTNL_SET_ID, id);
        nftnl_set_set_u32(st, NFTNL_SET_DESC_SIZE, B->n->dns_max);
        nftnl_set_set_data(st, NFTNL_SET_USERDATA, nftnl_udata_buf_data(ud),
                           nftnl_udata_buf_len(ud));
        nlh = nftnl_set_nlmsg_build_hdr(mnl_nlmsg_batch_current(B->b), NFT_MSG_NEWSET, NFPROTO_INET,
                                        NLM_F_CREATE | NLM_F_ACK, ++B->n->seq);
        nftnl_set_nlmsg_build_payload(nlh, st);
        nlb_put(B);
out:
        if (ud)
                nftnl_udata_buf_free(ud);
        if (st)
                nftnl_set_free(st);
}

/* One element "<ifname> . <addr>" (the name zero-padded to 16 bytes) of set `set` added or
 * deleted, with the verdict "jump <chain>" when chain is not NULL. */
static void pair_put(nlb *B, uint16_t type, const char *set, const char *ifname,
                     struct in_addr addr, const char *chain)
{
        struct nftnl_set *st = B->oom ? NULL : nftnl_set_alloc();
        struct nftnl_set_elem *e = B->oom ? NULL : nftnl_set_elem_alloc();
        char key[IFNAMSIZ_KEY + sizeof(uint32_t)] = {0};
        struct nlmsghdr *nlh;

        if (!st || !e) {
                B->oom = true;
                goto out;
        }
        memcpy(key, ifname, strnlen(ifname, IFNAMSIZ_KEY - 1));
        memcpy(key + IFNAMSIZ_KEY, &addr.s_addr, sizeof(addr.s_addr));
        nftnl_set_set_str(st, NFTNL_SET_TABLE, B->n->table);
        nftnl_set_set_str(st, NFTNL_SET_NAME, set);
        nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, sizeof(key));
        if (chain) {
                nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, (uint32_t)NFT_JUMP);
                nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, chain);
        }
        nftnl_set_elem_add(st, TAKE_PTR(e));
        nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(B->b), type, NFPROTO_INET,
                                    (type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0) | NLM_F_ACK,
                                    ++B->n->seq);
        nftnl_set_elems_nlmsg_build_payload(nlh, st);
        nlb_put(B);
out:
        if (e)
                nftnl_set_elem_free(e);
        if (st)
                nftnl_set_free(st);
}

/* The rules of put_policy, the same ones, into a batch. */
static void policy_rules_put(nlb *B, uint32_t s, const sh_egress_nft_rule *rules, size_t nrules,
                             bool default_allow, uint32_t dns_set_id)
{
        sh_egress_nft *n = B->n;
        char chain[32], dns[32];
        struct nftnl_rule *r;
        size_t i;

        if (++n->gen == 0)
                n->gen = 1;
        snprintf(chain, sizeof(chain), "sbp_%u", s);
        snprintf(dns, sizeof(dns), "dns_%u", s);
        /* ct mark <gen> accept */
        r = rule_new(B, chain);
        x_ct_load(B, r, NFT_CT_MARK, false);
        x_cmp(B, r, NFT_CMP_EQ, &n->gen, sizeof(n->gen));
        x_verdict(B, r, NF_ACCEPT, NULL);
        rule_put(B, r);
        /* ct original ip daddr @deny drop */
        r = rule_new(B, chain);
        x_ct_load(B, r, NFT_CT_DST_IP, true);
        x_lookup(B, r, "deny", 0);
        x_verdict(B, r, NF_DROP, NULL);
        rule_put(B, r);
        /* ct original ip daddr @allow ct mark set <gen> accept */
        r = rule_new(B, chain);
        x_ct_load(B, r, NFT_CT_DST_IP, true);
        x_lookup(B, r, "allow", 0);
        x_mark_set(B, r, n->gen);
        x_verdict(B, r, NF_ACCEPT, NULL);
        rule_put(B, r);
        for (i = 0; i < nrules; i++) {
                r = rule_new(B, chain);
                x_daddr_net(B, r, &rules[i].net);
                if (rules[i].allow) {
                        x_mark_set(B, r, n->gen);
                        x_verdict(B, r, NF_ACCEPT, NULL);
                } else
                        x_verdict(B, r, NF_DROP, NULL);
                rule_put(B, r);
        }
        /* ct original ip daddr @dns_<s> ct mark set <gen> accept */
        r = rule_new(B, chain);
        x_ct_load(B, r, NFT_CT_DST_IP, true);
        x_lookup(B, r, dns, dns_set_id);
        x_mark_set(B, r, n->gen);
        x_verdict(B, r, NF_ACCEPT, NULL);
        rule_put(B, r);
        if (default_allow) {
                r = rule_new(B, chain);
                x_mark_set(B, r, n->gen);
                x_verdict(B, r, NF_ACCEPT, NULL);
                rule_put(B, r);
        }
}

/* The batch of sh_egress_nft_sandbox_add's transaction, what its text makes: the set, the two
 * chains, their rules, the three elements. 0, or -errno (*which: the failing message). */
static int sandbox_add_batch(sh_egress_nft *n, uint32_t s, const char *ifname, struct in_addr addr,
                             const sh_egress_nft_rule *rules, size_t nrules, bool default_allow,
                             uint32_t *which)
{
        /* Each message well under 512 bytes (a rule: at most 5 expressions). */
        size_t limit = (size_t)(16 + nrules) * 512;
        _cleanup_free_ char *buf = malloc(2 * limit);
        char sb[32], sbp[32], dns[32];
        nlb B = {.n = n};
        struct nftnl_rule *r;
        uint32_t first, zero = 0;
        struct nftnl_expr *e;
        int ret;

        if (!buf || !(B.b = mnl_nlmsg_batch_start(buf, limit)))
                return -ENOMEM;
        snprintf(sb, sizeof(sb), "sb_%u", s);
        snprintf(sbp, sizeof(sbp), "sbp_%u", s);
        snprintf(dns, sizeof(dns), "dns_%u", s);
        nftnl_batch_begin(mnl_nlmsg_batch_current(B.b), ++n->seq);
        mnl_nlmsg_batch_next(B.b);
        first = n->seq + 1;
        dns_set_put(&B, dns, 1);
        chain_put(&B, sb);
        chain_put(&B, sbp);
        /* ct state new ct count over <conn_max> drop */
        r = rule_new(&B, sb);
        x_ct_load(&B, r, NFT_CT_STATE, false);
        x_and(&B, r, NF_CT_STATE_BIT(IP_CT_NEW));
        x_cmp(&B, r, NFT_CMP_NEQ, &zero, sizeof(zero));
        if ((e = expr_new(&B, r, "connlimit"))) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_CONNLIMIT_COUNT, n->conn_max);
                nftnl_expr_set_u32(e, NFTNL_EXPR_CONNLIMIT_FLAGS, NFT_CONNLIMIT_F_INV);
        }
        x_verdict(&B, r, NF_DROP, NULL);
        rule_put(&B, r);
        /* jump sbp_<s> */
        r = rule_new(&B, sb);
        x_verdict(&B, r, NFT_JUMP, sbp);
        rule_put(&B, r);
        policy_rules_put(&B, s, rules, nrules, default_allow, 1);
        pair_put(&B, NFT_MSG_NEWSETELEM, "pairs", ifname, addr, NULL);
        pair_put(&B, NFT_MSG_NEWSETELEM, "out", ifname, addr, sb);
        pair_put(&B, NFT_MSG_NEWSETELEM, "in", ifname, addr, sb);
        if (B.oom) {
                mnl_nlmsg_batch_stop(B.b);
                return -ENOMEM;
        }
        nftnl_batch_end(mnl_nlmsg_batch_current(B.b), ++n->seq);
        mnl_nlmsg_batch_next(B.b);
        ret = batch_talk(n, B.b, first, B.count, which);
        mnl_nlmsg_batch_stop(B.b);
        return ret;
}

int sh_egress_nft_allow_addrs(sh_egress_nft *n, uint32_t s, const struct in_addr *addrs,
                              const uint32_t *ttls, size_t k, sh_error **err)
{
        _Alignas(struct nlmsghdr) char buf[2 * NL_BUF];
        static const char *const step[] = {"putting", "taking out", "putting back"};
        static const uint64_t short_ms = 1000;
        uint64_t timeout_ms[SH_EGRESS_NFT_ADDRS_MAX];
        char set[32], a[INET_ADDRSTRLEN];
        struct mnl_nlmsg_batch *b;
        uint32_t first, which = 0;
        size_t i;
        int r;

        if (!find(n, s))
                return sh_error_make(err, ENOENT, "nft: slot %u is not in the table", s);
        if (k > SH_EGRESS_NFT_ADDRS_MAX)
                return sh_error_new(err, SH_E_INVALID, "nft: more than %d addresses at once",
                                    SH_EGRESS_NFT_ADDRS_MAX);
        for (i = 0; i < k; i++) {
                if (ttls[i] < 1)
                        return sh_error_new(err, SH_E_INVALID, "nft: a TTL of 0");
                timeout_ms[i] = (uint64_t)ttls[i] * 1000;
        }
        if (k == 0)
                return 0;
        snprintf(set, sizeof(set), "dns_%u", s);
        b = mnl_nlmsg_batch_start(buf, NL_BUF);
        if (!b)
                return sh_error_make(err, ENOMEM, "nft: allocating");
        nftnl_batch_begin(mnl_nlmsg_batch_current(b), ++n->seq);
        mnl_nlmsg_batch_next(b);
        first = n->seq + 1;
        /* As libnftables' "add element" (NLM_F_CREATE, no NLM_F_EXCL): put in with a short
         * timeout (there already: no error) so that the delete is valid, taken out, put back
         * with the TTL: its timeout is the new TTL on any kernel; a full set refuses only an
         * address it does not hold (-ENFILE at the first). All of one answer's addresses in
         * each of the three messages, one transaction. */
        r = put_elems(n, b, NFT_MSG_NEWSETELEM, NLM_F_CREATE, set, addrs, k, &short_ms, true);
        if (r == 0)
                r = put_elems(n, b, NFT_MSG_DELSETELEM, 0, set, addrs, k, NULL, false);
        if (r == 0)
                r = put_elems(n, b, NFT_MSG_NEWSETELEM, NLM_F_CREATE, set, addrs, k, timeout_ms,
                              false);
        if (r == 0) {
                nftnl_batch_end(mnl_nlmsg_batch_current(b), ++n->seq);
                mnl_nlmsg_batch_next(b);
                r = batch_talk(n, b, first, 3, &which);
        }
        mnl_nlmsg_batch_stop(b);
        if (r < 0) {
                inet_ntop(AF_INET, &addrs[0], a, sizeof(a));
                return sh_error_make(err, -r,
                                     "nft: opening %zu address(es) (%s%s) to slot %u: %s them in "
                                     "set %s: %s",
                                     k, a, k > 1 ? ", ..." : "", s,
                                     which >= 1 && which <= 3 ? step[which - 1] : "opening", set,
                                     strerror(-r));
        }
        return 0;
}

int sh_egress_nft_allow_addr(sh_egress_nft *n, uint32_t s, struct in_addr addr, uint32_t ttl_s,
                             sh_error **err)
{
        return sh_egress_nft_allow_addrs(n, s, &addr, &ttl_s, 1, err);
}
