/* nft.c: the daemon's nftables table (net.h): created at start, a sandbox's chains and set
 * added and removed with it, its policy replaced and its DNS answers opened, each change one
 * transaction: of libnftables (the kernel's own rule language; sets with timeouts; atomic
 * batches; no `nft` program spawned per change), except an address opened, the hot path (every
 * A record of a DNS answer), which is one batch of libnftnl messages on a netfilter socket of
 * its own: libnftables reads the whole table into its cache before every command, which costs
 * more with every sandbox in the table. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <libnftnl/set.h>
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

#define NL_BUF 8192 /* one batch of ours (an address opened), or one read of its answers */

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
        addf(&t, "  chain input {\n    type filter hook input priority filter; policy accept;\n");
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
        txn t;
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
        r = txn_begin(&t);
        if (r < 0)
                return sh_error_make(err, -r, "nft: building a transaction");
        addf(&t, "add set inet %s dns_%u { type ipv4_addr; flags timeout; size %u; }\n", T, s,
             n->dns_max);
        addf(&t, "add chain inet %s sb_%u\nadd chain inet %s sbp_%u\n", T, s, T, s);
        /* The bound sits in the chain a policy change leaves alone: its count survives. */
        addf(&t, "add rule inet %s sb_%u ct state new ct count over %u drop\n", T, s, n->conn_max);
        addf(&t, "add rule inet %s sb_%u jump sbp_%u\n", T, s, s);
        put_policy(n, &t, s, rules, nrules, default_allow);
        addf(&t, "add element inet %s pairs { \"%s\" . ", T, ifname);
        put_addr(&t, addr);
        addf(&t, " }\nadd element inet %s out { \"%s\" . ", T, ifname);
        put_addr(&t, addr);
        addf(&t, " : jump sb_%u }\nadd element inet %s in { \"%s\" . ", s, T, ifname);
        put_addr(&t, addr);
        addf(&t, " : jump sb_%u }\n", s);
        r = txn_run(n, &t, err);
        if (r < 0)
                return sh_error_wrap(err, "adding slot %u to table %s", s, T);
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
