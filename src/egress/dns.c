/* dns.c: the sandboxes' DNS proxy on the loop (dns.h): the UDP socket and TCP listener the
 * sandboxes' resolv.conf names, the bounds of each sandbox (queries in flight, a rate, TCP
 * clients), and the queries forwarded upstream, each over a socket of its own (a fresh random
 * source port and id; connected, so that the kernel drops datagrams of any other source) with
 * a timeout and retries, over TCP when the UDP answer is truncated; and each sandbox's cache of
 * the A answers whose addresses the caller opened, served until their least TTL runs out.
 *
 * What each question gets (docs/architecture.md, ../shared/OPENSANDBOX.md section 4):
 *   - garbage, an unknown source, over the sandbox's rate: nothing (dropped);
 *   - a name that is not a host name, a class other than IN, ANY/AXFR/IXFR/MAILA/MAILB: REFUSED;
 *   - a name the caller denies: NXDOMAIN, whatever the type;
 *   - AAAA of an allowed name: NOERROR without records (IPv4 only);
 *   - A of an allowed name: the sandbox's cached answer while its least TTL lasts (its TTLs
 *     lowered by its age, the client's id and question case), else the upstream's answer, its
 *     A records (along the CNAME chain) reported to ops->resolved first, and the answer kept
 *     when the caller says they are open for their TTL; any other type of an allowed name (CNAME, MX, TXT,
 *     SRV, ...): the upstream's answer, nothing reported (only A queries open addresses);
 *   - the sandbox's or the proxy's queries in flight at their bound, the upstream silent or
 *     failing after every try: SERVFAIL (the client's resolver tries again or gives up). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sh/bucket.h"
#include "sh/dns.h"
#include "sh/list.h"
#include "sh/log.h"
#include "sh/macro.h"
#include "sh/random.h"

#define SBX_BUCKETS  256
#define UDP_BATCH    64 /* datagrams read in one wake: the loop serves the rest in turn */
#define ACCEPT_BATCH 16
#define TCP_BATCH    64 /* reads and queries of one TCP client in one wake */
#define ADDRS_MAX    64 /* A records of one answer reported (more are relayed, not opened) */
#define REPLY_MAX    (12 + SH_DNS_WIRE_MAX + 4)

typedef struct query query;
typedef struct conn conn;

/* One cached answer of a sandbox: the upstream's message for an A question of `name`. */
typedef struct centry {
        uint64_t filled_ms, expires_ms;
        char name[SH_DNS_TEXT_MAX + 1];
        size_t len;
        SH_LIST_FIELDS(struct centry, entries);
        uint8_t msg[];
} centry;

typedef struct sbx {
        uint64_t key;
        unsigned inflight, tcp;
        sh_bucket rate;
        query *queries;
        conn *conns;
        centry *cache; /* the newest first */
        unsigned n_cache;
        SH_LIST_FIELDS(struct sbx, bucket);
} sbx;

struct conn {
        sh_dns *d;
        sbx *s;
        int fd;
        sh_io *io;
        sh_timer *idle;
        bool dead; /* closing at the next turn (its idle timer, 0 ms) */
        uint8_t in[2 + SH_DNS_QUERY_MAX];
        size_t in_len;
        uint8_t *out;
        size_t out_len, out_off;
        SH_LIST_FIELDS(conn, conns);
};

struct query {
        sh_dns *d;
        sbx *s;
        conn *c;                 /* NULL: a UDP client at `from` */
        struct sockaddr_in from; /* the UDP client */
        sh_dns_query q;
        uint16_t id; /* ours, upstream */
        unsigned tries;
        bool tcp; /* upstream over TCP (the UDP answer was truncated) */
        int fd;
        sh_io *io;
        sh_timer *timer;
        uint8_t out[2 + REPLY_MAX];
        size_t out_len, out_off;
        uint8_t len[2]; /* the TCP answer's length prefix ... */
        size_t len_got;
        uint8_t *in; /* ... and the answer */
        size_t in_len, in_got;
        SH_LIST_FIELDS(query, queries);
};

struct sh_dns {
        sh_loop *loop;
        sh_dns_config cfg;
        sh_dns_ops ops;
        void *data;
        int udp, tcp;
        sh_io *udp_io, *tcp_io;
        uint16_t port;
        unsigned inflight, conns;
        size_t cache_bytes; /* every sandbox's cached answers */
        sbx *sbxs[SBX_BUCKETS];
        uint8_t buf[SH_DNS_MSG_MAX + 1]; /* one datagram at a time (one thread) */
};

static void conn_free(conn *c);
static void conn_on_idle(sh_loop *l, sh_timer *t, void *data);
static void query_attempt(query *q);

/* ---- sandboxes ---- */

static sbx **sbx_head(sh_dns *d, uint64_t key)
{
        return &d->sbxs[(key ^ (key >> 17)) % SBX_BUCKETS];
}

static sbx *sbx_find(sh_dns *d, uint64_t key)
{
        for (sbx *s = *sbx_head(d, key); s; s = s->bucket_next)
                if (s->key == key)
                        return s;
        return NULL;
}

static sbx *sbx_get(sh_dns *d, uint64_t key)
{
        sbx *s = sbx_find(d, key);

        if (s)
                return s;
        s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->key = key;
        sh_bucket_init(&s->rate, d->cfg.sandbox_rate, d->cfg.sandbox_burst, sh_now_ms());
        SH_LIST_PREPEND(bucket, *sbx_head(d, key), s);
        return s;
}

/* ---- each sandbox's cache ---- */

static void cache_drop(sh_dns *d, sbx *s, centry *e)
{
        SH_LIST_REMOVE(entries, s->cache, e);
        s->n_cache--;
        d->cache_bytes -= e->len;
        free(e);
}

static void cache_flush(sh_dns *d, sbx *s)
{
        while (s->cache)
                cache_drop(d, s, s->cache);
}

/* The live entry of `name`, NULL; expired entries met on the way go. */
static centry *cache_find(sh_dns *d, sbx *s, const char *name, uint64_t now)
{
        centry *e = s->cache, *next;

        for (; e; e = next) {
                next = e->entries_next;
                if (now >= e->expires_ms)
                        cache_drop(d, s, e);
                else if (strcmp(e->name, name) == 0)
                        return e;
        }
        return NULL;
}

/* Keep the answer p (n bytes) to s's A question q: until its least TTL (at most
 * SH_DNS_TTL_MAX, never past what the caller opened), within the bounds; one without records,
 * a TTL of 0, a large one or one past the bounds is not kept. */
static void cache_put(sh_dns *d, sbx *s, const sh_dns_query *q, const uint8_t *p, size_t n)
{
        uint64_t now = sh_now_ms();
        uint32_t least;
        centry *e, *old;

        if (n > SH_DNS_CACHE_MSG_MAX || d->cache_bytes + n > SH_DNS_CACHE_BYTES)
                return;
        e = malloc(sizeof(*e) + n);
        if (!e)
                return;
        memcpy(e->msg, p, n);
        if (sh_dns_ttls(e->msg, n, 0, &least) < 0 || least == 0 || least == UINT32_MAX) {
                free(e);
                return;
        }
        if ((old = cache_find(d, s, q->name, now)))
                cache_drop(d, s, old);
        if (s->n_cache >= SH_DNS_CACHE_ENTRIES) {
                for (old = s->cache; old->entries_next;)
                        old = old->entries_next;
                cache_drop(d, s, old);
        }
        e->filled_ms = now;
        e->expires_ms = now + (uint64_t)(least < SH_DNS_TTL_MAX ? least : SH_DNS_TTL_MAX) * 1000;
        memcpy(e->name, q->name, sizeof(e->name));
        e->len = n;
        SH_LIST_PREPEND(entries, s->cache, e);
        s->n_cache++;
        d->cache_bytes += n;
}

/* ---- answering clients ---- */

static void conn_close_later(conn *c)
{
        if (c->dead)
                return;
        c->dead = true;
        sh_loop_cancel_timer(c->d->loop, c->idle);
        /* Freed at the next turn, never under a caller that still holds it. */
        c->idle = sh_loop_add_timer(c->d->loop, 0, conn_on_idle, c);
        if (!c->idle)
                sh_log(SH_LOG_DEBUG, "dns", NULL, "no timer to cut a client: %s", strerror(errno));
        if (sh_loop_mod_io(c->d->loop, c->io, 0) < 0)
                sh_log(SH_LOG_DEBUG, "dns", NULL, "epoll_ctl: %s", strerror(errno));
}

static void conn_flush(conn *c)
{
        while (c->out_off < c->out_len) {
                ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        break;
                if (w <= 0) {
                        conn_close_later(c);
                        return;
                }
                c->out_off += (size_t)w;
        }
        if (c->out_off == c->out_len)
                c->out_off = c->out_len = 0;
        if (sh_loop_mod_io(c->d->loop, c->io, EPOLLIN | (c->out_len ? EPOLLOUT : 0)) < 0)
                conn_close_later(c);
}

/* One answer to a TCP client: queued behind what it has not read, at most
 * SH_DNS_TCP_OUT_MAX bytes; a client that reads no more is cut. */
static void conn_send(conn *c, const uint8_t *p, size_t n)
{
        uint8_t *out;

        if (c->dead)
                return;
        if (c->out_len + 2 + n > SH_DNS_TCP_OUT_MAX) {
                conn_close_later(c);
                return;
        }
        if (c->out_off) {
                memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
                c->out_len -= c->out_off;
                c->out_off = 0;
        }
        out = realloc(c->out, c->out_len + 2 + n);
        if (!out) {
                conn_close_later(c);
                return;
        }
        c->out = out;
        out[c->out_len] = (uint8_t)(n >> 8);
        out[c->out_len + 1] = (uint8_t)n;
        memcpy(out + c->out_len + 2, p, n);
        c->out_len += 2 + n;
        conn_flush(c);
}

/* The message p (n bytes) to a client: over TCP as it is; over UDP as it is when it fits the
 * client's size, else the question alone with TC set (it asks again over TCP). */
static void deliver(sh_dns *d, conn *c, const struct sockaddr_in *from, const sh_dns_query *q,
                    const uint8_t *p, size_t n)
{
        uint8_t tc[REPLY_MAX];

        if (c) {
                conn_send(c, p, n);
                return;
        }
        if (n > q->udp_size) {
                n = sh_dns_reply(q, p[3] & 0xF, true, tc, sizeof(tc));
                p = tc;
        }
        /* UDP: a datagram the socket cannot take now is lost like any other; the client's
         * resolver asks again. */
        if (sendto(d->udp, p, n, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)from,
                   sizeof(*from)) < 0)
                sh_log(SH_LOG_DEBUG, "dns", NULL, "sendto: %s, ignoring", strerror(errno));
}

static void reply(sh_dns *d, conn *c, const struct sockaddr_in *from, const sh_dns_query *q,
                  uint8_t rcode)
{
        uint8_t out[REPLY_MAX];
        size_t n = sh_dns_reply(q, rcode, false, out, sizeof(out));

        deliver(d, c, from, q, out, n);
}

/* A's question q answered from s's cache: true when it was. */
static bool cached(sh_dns *d, sbx *s, conn *c, const struct sockaddr_in *from,
                   const sh_dns_query *q)
{
        uint8_t out[SH_DNS_CACHE_MSG_MAX];
        uint64_t now = sh_now_ms();
        uint32_t least;
        centry *e = cache_find(d, s, q->name, now);

        if (!e)
                return false;
        memcpy(out, e->msg, e->len);
        if (sh_dns_ttls(out, e->len, (uint32_t)((now - e->filled_ms) / 1000), &least) < 0) {
                cache_drop(d, s, e);
                return false;
        }
        out[0] = (uint8_t)(q->id >> 8);
        out[1] = (uint8_t)q->id;
        /* The question as this client wrote it (its case: a resolver may check it, 0x20). */
        if (12 + q->wire_len <= e->len)
                memcpy(out + 12, q->wire, q->wire_len);
        deliver(d, c, from, q, out, e->len);
        return true;
}

/* ---- queries upstream ---- */

static void query_close_attempt(query *q)
{
        sh_loop_cancel_timer(q->d->loop, q->timer);
        q->timer = NULL;
        if (q->io)
                sh_loop_del_io(q->d->loop, q->io);
        q->io = NULL;
        if (q->fd >= 0)
                close(q->fd);
        q->fd = -1;
        free(q->in);
        q->in = NULL;
        q->in_len = q->in_got = q->len_got = q->out_off = 0;
}

static void query_free(query *q)
{
        if (!q)
                return;
        query_close_attempt(q);
        SH_LIST_REMOVE(queries, q->s->queries, q);
        q->s->inflight--;
        q->d->inflight--;
        free(q);
}

/* The query ends with the message p (n bytes, q's id already the client's) or, p NULL, with
 * SERVFAIL. The query is freed first: the client may be cut while it is answered. */
static void query_end(query *q, const uint8_t *p, size_t n)
{
        sh_dns *d = q->d;
        conn *c = q->c;
        struct sockaddr_in from = q->from;
        sh_dns_query cq = q->q;
        uint8_t *in = TAKE_PTR(q->in); /* p may point into it */

        query_free(q);
        if (p)
                deliver(d, c, &from, &cq, p, n);
        else
                reply(d, c, &from, &cq, SH_DNS_SERVFAIL);
        free(in);
}

/* An attempt failed or timed out: the next try, or SERVFAIL after the last. */
static void query_retry(query *q)
{
        if (++q->tries < q->d->cfg.tries)
                query_attempt(q);
        else
                query_end(q, NULL, 0);
}

/* A message from the upstream (p, n bytes, writable). True when it ended the query. */
static bool query_answer(query *q, uint8_t *p, size_t n)
{
        sh_dns_addr addrs[ADDRS_MAX];
        sh_dns_answer a;

        /* Not the answer to this id and question: a stray or spoofed datagram; keep waiting. */
        if (sh_dns_answer_parse(p, n, &q->q, q->id, addrs, ADDRS_MAX, &a) < 0)
                return false;
        if (a.tc && !q->tcp) {
                q->tcp = true;
                query_attempt(q);
                return true;
        }
        if (q->q.qtype == SH_DNS_TYPE_A && q->d->ops.resolved && a.n_addrs &&
            q->d->ops.resolved(q->d->data, q->s->key, q->q.name, addrs, a.n_addrs) &&
            a.rcode == SH_DNS_NOERROR && !a.tc)
                cache_put(q->d, q->s, &q->q, p, n);
        p[0] = (uint8_t)(q->q.id >> 8);
        p[1] = (uint8_t)q->q.id;
        query_end(q, p, n);
        return true;
}

static void query_on_timer(sh_loop *l, sh_timer *t, void *data)
{
        query *q = data;

        (void)l;
        (void)t;
        q->timer = NULL; /* freed after it fired */
        query_retry(q);
}

static void query_on_udp(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        query *q = data;
        sh_dns *d = q->d;

        (void)l;
        (void)io;
        (void)events;
        for (;;) {
                ssize_t r = recv(fd, d->buf, sizeof(d->buf), MSG_DONTWAIT | MSG_TRUNC);

                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return;
                if (r < 0) { /* ECONNREFUSED: nothing listens upstream */
                        query_retry(q);
                        return;
                }
                if ((size_t)r > SH_DNS_MSG_MAX)
                        continue;
                if (query_answer(q, d->buf, (size_t)r))
                        return;
        }
}

static void query_on_tcp(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        query *q = data;

        (void)io;
        if (q->out_off < q->out_len) {
                int err = 0;
                socklen_t len = sizeof(err);
                ssize_t w;

                if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
                        return;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
                        query_retry(q);
                        return;
                }
                w = send(fd, q->out + q->out_off, q->out_len - q->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (w <= 0) {
                        query_retry(q);
                        return;
                }
                q->out_off += (size_t)w;
                if (q->out_off < q->out_len)
                        return;
                if (sh_loop_mod_io(l, q->io, EPOLLIN) < 0)
                        query_retry(q);
                return;
        }
        for (;;) {
                ssize_t r;

                if (q->len_got < 2)
                        r = recv(fd, q->len + q->len_got, 2 - q->len_got, MSG_DONTWAIT);
                else
                        r = recv(fd, q->in + q->in_got, q->in_len - q->in_got, MSG_DONTWAIT);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return;
                if (r <= 0) {
                        query_retry(q);
                        return;
                }
                if (q->len_got < 2) {
                        q->len_got += (size_t)r;
                        if (q->len_got < 2)
                                continue;
                        q->in_len = ((size_t)q->len[0] << 8) | q->len[1];
                        if (q->in_len == 0 || !(q->in = malloc(q->in_len))) {
                                query_retry(q);
                                return;
                        }
                        continue;
                }
                q->in_got += (size_t)r;
                if (q->in_got < q->in_len)
                        continue;
                /* One answer per connection: anything else ends this try. */
                if (!query_answer(q, q->in, q->in_len))
                        query_retry(q);
                return;
        }
}

/* One try upstream: a new socket (a new source port) and a new random id. */
static void query_attempt(query *q)
{
        sh_dns *d = q->d;
        int type = q->tcp ? SOCK_STREAM : SOCK_DGRAM;
        size_t n;

        query_close_attempt(q);
        if (sh_random_bytes(&q->id, sizeof(q->id)) < 0)
                goto fail;
        n = sh_dns_upstream_query(&q->q, q->id, q->out + 2, sizeof(q->out) - 2);
        q->out[0] = (uint8_t)(n >> 8);
        q->out[1] = (uint8_t)n;
        q->out_len = n + 2;
        q->out_off = q->tcp ? 0 : q->out_len;
        q->fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (q->fd < 0)
                goto fail;
        if (connect(q->fd, (const struct sockaddr *)&d->cfg.upstream, sizeof(d->cfg.upstream)) <
                    0 &&
            errno != EINPROGRESS)
                goto fail;
        if (!q->tcp && send(q->fd, q->out + 2, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
                goto fail;
        q->io = sh_loop_add_io(d->loop, q->fd, q->tcp ? EPOLLOUT : EPOLLIN,
                               q->tcp ? query_on_tcp : query_on_udp, q);
        if (!q->io)
                goto fail;
        q->timer = sh_loop_add_timer(d->loop, d->cfg.timeout_ms, query_on_timer, q);
        if (!q->timer)
                goto fail;
        return;
fail:
        sh_log(SH_LOG_DEBUG, "dns", NULL, "upstream try for '%s': %s", q->q.name, strerror(errno));
        query_close_attempt(q);
        query_end(q, NULL, 0);
}

/* ---- questions ---- */

static bool refused_type(uint16_t t)
{
        return t == 255 /* ANY */ || t == 252 /* AXFR */ || t == 251 /* IXFR */ ||
               t == 253 /* MAILB */ || t == 254 /* MAILA */;
}

/* A client's message (p, n bytes) from sandbox s: over TCP from c, else over UDP from *from. */
static void question(sh_dns *d, sbx *s, conn *c, const struct sockaddr_in *from, const uint8_t *p,
                     size_t n)
{
        sh_dns_query q;
        query *fq;

        if (sh_dns_query_parse(p, n, &q) < 0)
                return;
        sh_bucket_refill(&s->rate, sh_now_ms());
        if (s->rate.tokens <= 0)
                return;
        s->rate.tokens--;
        if (!q.name[0] || q.qclass != SH_DNS_CLASS_IN || refused_type(q.qtype)) {
                reply(d, c, from, &q, SH_DNS_REFUSED);
                return;
        }
        if (!d->ops.allowed(d->data, s->key, q.name)) {
                reply(d, c, from, &q, SH_DNS_NXDOMAIN);
                return;
        }
        if (q.qtype == SH_DNS_TYPE_AAAA) {
                reply(d, c, from, &q, SH_DNS_NOERROR);
                return;
        }
        if (q.qtype == SH_DNS_TYPE_A && cached(d, s, c, from, &q))
                return;
        if (s->inflight >= d->cfg.sandbox_inflight || d->inflight >= d->cfg.inflight ||
            !(fq = calloc(1, sizeof(*fq)))) {
                reply(d, c, from, &q, SH_DNS_SERVFAIL);
                return;
        }
        fq->d = d;
        fq->s = s;
        fq->c = c;
        if (from)
                fq->from = *from;
        fq->q = q;
        fq->fd = -1;
        s->inflight++;
        d->inflight++;
        SH_LIST_PREPEND(queries, s->queries, fq);
        query_attempt(fq);
}

static void on_udp(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_dns *d = data;

        (void)l;
        (void)io;
        (void)events;
        for (int i = 0; i < UDP_BATCH; i++) {
                struct sockaddr_in from;
                socklen_t flen = sizeof(from);
                ssize_t r = recvfrom(fd, d->buf, sizeof(d->buf), MSG_DONTWAIT | MSG_TRUNC,
                                     (struct sockaddr *)&from, &flen);
                uint64_t key;
                sbx *s;

                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        if (errno != EAGAIN && errno != EWOULDBLOCK)
                                sh_log(SH_LOG_DEBUG, "dns", NULL, "recvfrom: %s, ignoring",
                                       strerror(errno));
                        return;
                }
                if ((size_t)r > SH_DNS_QUERY_MAX || flen != sizeof(from) ||
                    from.sin_family != AF_INET)
                        continue;
                key = d->ops.sandbox_of(d->data, &from);
                if (!key || !(s = sbx_get(d, key)))
                        continue;
                question(d, s, NULL, &from, d->buf, (size_t)r);
        }
}

/* ---- TCP clients ---- */

static void conn_on_idle(sh_loop *l, sh_timer *t, void *data)
{
        conn *c = data;

        (void)l;
        (void)t;
        c->idle = NULL; /* freed after it fired */
        conn_free(c);
}

static void conn_on_io(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        conn *c = data;

        (void)l;
        (void)io;
        if (c->dead)
                return;
        if ((events & EPOLLOUT) && c->out_len) {
                conn_flush(c);
                if (c->dead)
                        return;
        }
        if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                return;
        /* At most TCP_BATCH queries a wake: the loop comes back for the rest (level-triggered)
         * after serving the others. */
        for (int batch = 0; batch < TCP_BATCH; batch++) {
                ssize_t r = recv(fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);
                size_t need;

                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return;
                if (r <= 0) {
                        conn_close_later(c);
                        return;
                }
                c->in_len += (size_t)r;
                /* Every whole query in the buffer; a length past the bound cuts the client. */
                while (c->in_len >= 2 && !c->dead) {
                        need = ((size_t)c->in[0] << 8) | c->in[1];
                        if (need == 0 || need > SH_DNS_QUERY_MAX) {
                                conn_close_later(c);
                                return;
                        }
                        if (c->in_len < 2 + need)
                                break;
                        /* A whole query: the client is not idle. */
                        sh_loop_cancel_timer(c->d->loop, c->idle);
                        c->idle = sh_loop_add_timer(c->d->loop, c->d->cfg.tcp_idle_ms, conn_on_idle,
                                                    c);
                        if (!c->idle) {
                                conn_close_later(c);
                                return;
                        }
                        question(c->d, c->s, c, NULL, c->in + 2, need);
                        batch++;
                        memmove(c->in, c->in + 2 + need, c->in_len - 2 - need);
                        c->in_len -= 2 + need;
                }
                if (c->dead)
                        return;
        }
}

static void conn_free(conn *c)
{
        sh_dns *d = c->d;

        for (query *q = c->s->queries, *next; q; q = next) {
                next = q->queries_next;
                if (q->c == c)
                        query_free(q);
        }
        sh_loop_cancel_timer(d->loop, c->idle);
        sh_loop_del_io(d->loop, c->io);
        close(c->fd);
        SH_LIST_REMOVE(conns, c->s->conns, c);
        c->s->tcp--;
        d->conns--;
        free(c->out);
        free(c);
}

static void on_accept(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_dns *d = data;

        (void)io;
        (void)events;
        for (int i = 0; i < ACCEPT_BATCH; i++) {
                struct sockaddr_in from;
                socklen_t flen = sizeof(from);
                int cfd =
                        accept4(fd, (struct sockaddr *)&from, &flen, SOCK_NONBLOCK | SOCK_CLOEXEC);
                uint64_t key;
                sbx *s;
                conn *c;

                if (cfd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno != EAGAIN && errno != EWOULDBLOCK)
                                sh_log(SH_LOG_DEBUG, "dns", NULL, "accept: %s, ignoring",
                                       strerror(errno));
                        return;
                }
                key = flen == sizeof(from) && from.sin_family == AF_INET
                              ? d->ops.sandbox_of(d->data, &from)
                              : 0;
                if (!key || !(s = sbx_get(d, key)) || s->tcp >= d->cfg.sandbox_tcp ||
                    d->conns >= d->cfg.tcp || !(c = calloc(1, sizeof(*c)))) {
                        close(cfd);
                        continue;
                }
                c->d = d;
                c->s = s;
                c->fd = cfd;
                c->io = sh_loop_add_io(l, cfd, EPOLLIN, conn_on_io, c);
                c->idle = sh_loop_add_timer(l, d->cfg.tcp_idle_ms, conn_on_idle, c);
                if (!c->io || !c->idle) {
                        if (c->io)
                                sh_loop_del_io(l, c->io);
                        sh_loop_cancel_timer(l, c->idle);
                        close(cfd);
                        free(c);
                        continue;
                }
                s->tcp++;
                d->conns++;
                SH_LIST_PREPEND(conns, s->conns, c);
        }
}

/* ---- the proxy ---- */

static void config_defaults(sh_dns_config *c)
{
#define DEF(f, v)                                                                                  \
        do {                                                                                       \
                if (!c->f)                                                                         \
                        c->f = (v);                                                                \
        } while (0)
        DEF(timeout_ms, SH_DNS_TIMEOUT_MS);
        DEF(tries, SH_DNS_TRIES);
        DEF(sandbox_inflight, SH_DNS_SANDBOX_INFLIGHT);
        DEF(inflight, SH_DNS_INFLIGHT);
        DEF(sandbox_rate, SH_DNS_SANDBOX_RATE);
        DEF(sandbox_burst, SH_DNS_SANDBOX_BURST);
        DEF(sandbox_tcp, SH_DNS_SANDBOX_TCP);
        DEF(tcp, SH_DNS_TCP);
        DEF(tcp_idle_ms, SH_DNS_TCP_IDLE_MS);
#undef DEF
}

int sh_dns_new(sh_loop *l, const sh_dns_config *cfg, const sh_dns_ops *ops, void *data,
               sh_dns **ret)
{
        sh_dns *d = calloc(1, sizeof(*d));
        struct sockaddr_in a;
        socklen_t alen = sizeof(a);
        int one = 1, r;

        if (!d)
                return -ENOMEM;
        d->loop = l;
        d->cfg = *cfg;
        config_defaults(&d->cfg);
        d->ops = *ops;
        d->data = data;
        d->tcp = -1;
        d->udp = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (d->udp < 0 ||
            bind(d->udp, (const struct sockaddr *)&cfg->listen, sizeof(cfg->listen)) < 0 ||
            getsockname(d->udp, (struct sockaddr *)&a, &alen) < 0)
                goto fail;
        /* Room for bursts: a flood over its rate is dropped after it is read, so the reading
         * must not lose the others' queries to a full socket first (capped by rmem_max). */
        if (setsockopt(d->udp, SOL_SOCKET, SO_RCVBUF, &(int){1 << 20}, sizeof(int)) < 0)
                sh_log(SH_LOG_DEBUG, "dns", NULL, "SO_RCVBUF: %s, ignoring", strerror(errno));
        d->port = ntohs(a.sin_port);
        a = cfg->listen;
        a.sin_port = htons(d->port);
        d->tcp = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (d->tcp < 0 || setsockopt(d->tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(d->tcp, (const struct sockaddr *)&a, sizeof(a)) < 0 || listen(d->tcp, 128) < 0)
                goto fail;
        d->udp_io = sh_loop_add_io(l, d->udp, EPOLLIN, on_udp, d);
        if (!d->udp_io)
                goto fail;
        d->tcp_io = sh_loop_add_io(l, d->tcp, EPOLLIN, on_accept, d);
        if (!d->tcp_io)
                goto fail;
        *ret = d;
        return 0;
fail:
        r = -errno;
        sh_dns_free(d);
        return r;
}

uint16_t sh_dns_port(const sh_dns *d)
{
        return d->port;
}

static void sbx_free(sh_dns *d, sbx *s)
{
        while (s->conns)
                conn_free(s->conns);
        while (s->queries)
                query_free(s->queries);
        cache_flush(d, s);
        SH_LIST_REMOVE(bucket, *sbx_head(d, s->key), s);
        free(s);
}

void sh_dns_forget(sh_dns *d, uint64_t sandbox)
{
        sbx *s = sbx_find(d, sandbox);

        if (s)
                sbx_free(d, s);
}

void sh_dns_flush(sh_dns *d, uint64_t sandbox)
{
        sbx *s = d ? sbx_find(d, sandbox) : NULL;

        if (s)
                cache_flush(d, s);
}

void sh_dns_free(sh_dns *d)
{
        if (!d)
                return;
        for (size_t i = 0; i < SBX_BUCKETS; i++)
                while (d->sbxs[i])
                        sbx_free(d, d->sbxs[i]);
        if (d->udp_io)
                sh_loop_del_io(d->loop, d->udp_io);
        if (d->tcp_io)
                sh_loop_del_io(d->loop, d->tcp_io);
        if (d->udp >= 0)
                close(d->udp);
        if (d->tcp >= 0)
                close(d->tcp);
        free(d);
}

int sh_dns_upstream_pick(const char *setting, const char *resolv_path, struct sockaddr_in *ret)
{
        char text[8192];
        ssize_t n;
        int fd;

        if (setting)
                return sh_dns_upstream_parse(setting, ret);
        fd = open(resolv_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        /* The first 8 KiB: a nameserver line comes early, and a bigger file is not read. */
        do
                n = read(fd, text, sizeof(text) - 1);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                int r = -errno;

                close(fd);
                return r;
        }
        close(fd);
        text[n] = '\0';
        return sh_dns_resolv_conf_first(text, ret);
}
