/* peers.c: the peers of this pod (cluster.h). Every cfg->peers_interval_ms: the addresses of
 * SANDBOX_HOST_PEERS (a static list, or the A and AAAA records of a name, resolved with c-ares
 * on the loop), each probed with GET {url}/healthz (hop-marked, cfg->peer_timeout_ms): its
 * `cluster` object says its token, instance, whether it accepts creates and its room. The answer
 * whose instance is ours is this pod. A peer whose probe fails, or that the name no longer
 * lists, is dropped at once; a new one is used as soon as its probe answers. And asking every
 * live peer the same GET (listings). */
#include <ares.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "sh/cluster.h"
#include "sh/fetch.h"
#include "sh/list.h"
#include "sh/log.h"
#include "sh/random.h"
#include "sh/util.h"

#define PROBE_MAX    65536u /* bytes of a peer's /healthz answer */
#define DNS_TRIES    2
#define DNS_TIMEOUT  2000 /* ms, one try (at most the peer timeout) */
#define INSTANCE_LEN 32   /* hex digits of this process's instance */
#define WHY_MAX      1024u

struct sh_peer {
        SH_LIST_FIELDS(sh_peer, peers);
        sh_cluster *c;
        char *url;   /* "http://host:port" */
        bool listed; /* in the last discovery */
        bool self;   /* its instance is ours: this pod */
        bool live;   /* its last probe answered with its cluster object */
        bool clash;  /* another live peer has its token (logged once) */
        sh_fetch *probe;
        sh_peer_health h;
};

typedef struct ares_sock {
        SH_LIST_FIELDS(struct ares_sock, socks);
        int fd;
        sh_io *io;
} ares_sock;

/* One peer's part of an ask. */
typedef struct ask_part {
        sh_cluster_ask *ask;
        sh_fetch *fetch;
        char *url;
        char token[SH_POD_TOKEN_LEN + 1];
        char why[WHY_MAX];
        char *body;
        size_t len;
        long status;
        bool done;
} ask_part;

struct sh_cluster_ask {
        SH_LIST_FIELDS(sh_cluster_ask, asks);
        sh_cluster *c;
        ask_part *parts;
        size_t n, pending;
        sh_timer *zero; /* no peer: the callback from the loop */
        sh_cluster_ask_done_fn done;
        void *data;
};

struct sh_cluster {
        const sh_config *cfg;
        sh_loop *loop;
        char token[SH_POD_TOKEN_LEN + 1];
        char instance[INSTANCE_LEN + 1];
        char hop[sizeof(SH_HOP_HEADER) + 2 + SH_POD_TOKEN_LEN]; /* "X-...: token" */
        uint16_t listen_port;
        sh_cluster_room_fn room_fn;
        void *room_data;
        sh_peers_spec spec;
        bool enabled;
        sh_fetcher *fetcher;
        sh_peer *peers;
        sh_timer *round; /* the next discovery */
        /* dns: */
        ares_channel ares;
        ares_sock *socks;
        sh_timer *ares_timer;
        bool resolving;
        bool dns_failing; /* logged once until it answers again */
        bool closing;
        sh_cluster_ask *asks;
};

static void ares_rearm(sh_cluster *c);

/* ---- the peers ------------------------------------------------------------------------------- */

static sh_peer *peer_find(sh_cluster *c, const char *url)
{
        sh_peer *p;

        SH_LIST_FOREACH(peers, p, c->peers)
                if (strcmp(p->url, url) == 0)
                        return p;
        return NULL;
}

static sh_peer *peer_add(sh_cluster *c, const char *url)
{
        sh_peer *p = calloc(1, sizeof(*p));

        if (!p || !(p->url = strdup(url))) {
                free(p);
                log_warn("peer-discovery", NULL, "out of memory");
                return NULL;
        }
        p->c = c;
        SH_LIST_INIT(peers, p);
        SH_LIST_APPEND(peers, c->peers, p);
        return p;
}

static bool usable(const sh_peer *p)
{
        return p->live && !p->self && !p->clash;
}

/* Whether a live peer other than p has p's token; marks and logs a clash once. */
static void clash_check(sh_cluster *c)
{
        sh_peer *p, *q;

        SH_LIST_FOREACH(peers, p, c->peers) {
                bool clash = false;

                if (!p->live || p->self)
                        continue;
                if (strcmp(p->h.token, c->token) == 0)
                        clash = true;
                SH_LIST_FOREACH(peers, q, c->peers)
                        if (q != p && q->live && !q->self && strcmp(q->h.token, p->h.token) == 0)
                                clash = true;
                if (clash && !p->clash)
                        log_error("peer-token-clash", NULL,
                                  "peer %s has token %s, as another pod has: neither is used for "
                                  "it (each pod needs a state root of its own)",
                                  p->url, p->h.token);
                p->clash = clash;
        }
}

static void peer_lost(sh_peer *p, const char *why)
{
        if (p->live)
                log_info("peer-removed", NULL, "token %s at %s: %s", p->h.token, p->url, why);
        p->live = false;
        p->clash = false;
}

static void peer_free(sh_peer *p)
{
        sh_cluster *c = p->c;

        peer_lost(p, "no longer listed");
        sh_fetch_cancel(p->probe);
        SH_LIST_REMOVE(peers, c->peers, p);
        free(p->url);
        free(p);
        clash_check(c);
}

static void probe_done(sh_fetch *f, const sh_fetch_result *res, void *data)
{
        sh_peer *p = data;
        sh_cluster *c = p->c;
        sh_peer_health h;

        (void)f;
        p->probe = NULL;
        /* A draining or full pod may answer /healthz with an error status: its cluster object
         * still says what it is. */
        if ((res->kind == SH_FETCH_OK || res->kind == SH_FETCH_HTTP) && res->body &&
            sh_peer_health_parse(res->body, res->len, &h) == 0) {
                if (strcmp(h.instance, c->instance) == 0) {
                        if (!p->self)
                                log_debug("peer-self", NULL, "%s is this pod", p->url);
                        peer_lost(p, "this pod");
                        p->self = true;
                        return;
                }
                if (p->live && strcmp(p->h.token, h.token) != 0)
                        peer_lost(p, "its token changed");
                if (!p->live)
                        log_info("peer-added", NULL, "token %s at %s (%s, room %llu)", h.token,
                                 p->url, h.accepting ? "accepting" : "not accepting",
                                 (unsigned long long)h.room);
                p->h = h;
                p->live = true;
                clash_check(c);
                return;
        }
        if (res->kind == SH_FETCH_OK || res->kind == SH_FETCH_HTTP)
                peer_lost(p, "its /healthz has no cluster object");
        else
                peer_lost(p, res->reason);
        clash_check(c);
}

static void probe(sh_cluster *c, sh_peer *p)
{
        const char *headers[] = {c->hop, NULL};
        sh_error *err = NULL;
        char *url;

        if (p->probe || p->self)
                return;
        if (asprintf(&url, "%s/healthz", p->url) < 0) {
                log_warn("peer-probe", NULL, "out of memory");
                return;
        }
        p->probe =
                sh_fetch_start_opts(c->fetcher,
                                    &(sh_fetch_opts){.url = url,
                                                     .what = "health",
                                                     .peer = "the peer",
                                                     .headers = headers,
                                                     .max = PROBE_MAX,
                                                     .fd = -1,
                                                     .timeout_ms = c->cfg->peer_timeout_ms,
                                                     .connect_timeout_ms = c->cfg->peer_timeout_ms,
                                                     .raw = true},
                                    probe_done, p, &err);
        free(url);
        if (!p->probe) {
                peer_lost(p, err && err->msg ? err->msg : "the probe did not start");
                clash_check(c);
        }
        sh_error_release(&err);
}

/* The addresses of this round (NULL-terminated urls): every peer not among them goes, every new
 * one comes, and all are probed. */
static void discovered(sh_cluster *c, char *const *urls)
{
        sh_peer *p, *n;

        SH_LIST_FOREACH(peers, p, c->peers)
                p->listed = false;
        for (; *urls; urls++) {
                p = peer_find(c, *urls);
                if (!p)
                        p = peer_add(c, *urls);
                if (p)
                        p->listed = true;
        }
        SH_LIST_FOREACH_SAFE(peers, p, n, c->peers) {
                if (!p->listed)
                        peer_free(p);
        }
        SH_LIST_FOREACH_SAFE(peers, p, n, c->peers)
                probe(c, p);
}

/* No news of the addresses this round: the peers known are probed again. */
static void discovered_keep(sh_cluster *c)
{
        sh_peer *p, *n;

        SH_LIST_FOREACH_SAFE(peers, p, n, c->peers)
                probe(c, p);
}

static bool url_among(char *const *urls, size_t n, const char *url)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(urls[i], url) == 0)
                        return true;
        return false;
}

/* ---- dns: c-ares on the loop ------------------------------------------------------------------ */

static void ares_on_io(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_cluster *c = data;

        (void)l;
        (void)io;
        ares_process_fd(c->ares, (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) ? fd : ARES_SOCKET_BAD,
                        (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) ? fd : ARES_SOCKET_BAD);
        ares_rearm(c);
}

static void ares_on_timer(sh_loop *l, sh_timer *t, void *data)
{
        sh_cluster *c = data;

        (void)l;
        (void)t;
        c->ares_timer = NULL;
        ares_process_fd(c->ares, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
        ares_rearm(c);
}

/* c-ares's next timeout on a loop timer, while a query is pending. */
static void ares_rearm(sh_cluster *c)
{
        struct timeval tv, *tvp;
        uint64_t ms;

        if (c->closing)
                return;
        sh_loop_cancel_timer(c->loop, c->ares_timer);
        c->ares_timer = NULL;
        if (!c->resolving)
                return;
        tvp = ares_timeout(c->ares, NULL, &tv);
        ms = tvp ? (uint64_t)tvp->tv_sec * 1000 + (uint64_t)tvp->tv_usec / 1000 + 1 : DNS_TIMEOUT;
        c->ares_timer = sh_loop_add_timer(c->loop, ms, ares_on_timer, c);
        if (!c->ares_timer)
                log_warn("peer-discovery", NULL, "adding a timer: %s", strerror(errno));
}

/* ARES_OPT_SOCK_STATE_CB: which of c-ares's sockets to watch for what. */
static void ares_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
        sh_cluster *c = data;
        ares_sock *k;
        uint32_t ev = (readable ? EPOLLIN : 0) | (writable ? EPOLLOUT : 0);

        SH_LIST_FOREACH(socks, k, c->socks)
                if (k->fd == fd)
                        break;
        if (!readable && !writable) {
                if (k) {
                        sh_loop_del_io(c->loop, k->io);
                        SH_LIST_REMOVE(socks, c->socks, k);
                        free(k);
                }
                return;
        }
        if (c->closing)
                return;
        if (k) {
                if (sh_loop_mod_io(c->loop, k->io, ev) < 0)
                        log_warn("peer-discovery", NULL, "watching a DNS socket: %s",
                                 strerror(errno));
                return;
        }
        k = calloc(1, sizeof(*k));
        if (!k || !(k->io = sh_loop_add_io(c->loop, fd, ev, ares_on_io, c))) {
                log_warn("peer-discovery", NULL, "watching a DNS socket: %s", strerror(errno));
                free(k);
                return;
        }
        k->fd = fd;
        SH_LIST_INIT(socks, k);
        SH_LIST_APPEND(socks, c->socks, k);
}

static void resolved(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
        sh_cluster *c = arg;
        char **urls = NULL;
        size_t n = 0, i;
        unsigned port = c->spec.port ? c->spec.port : c->listen_port;
        struct ares_addrinfo_node *a;

        (void)timeouts;
        if (c->closing) {
                ares_freeaddrinfo(res);
                return;
        }
        c->resolving = false;
        if (status != ARES_SUCCESS && status != ARES_ENOTFOUND && status != ARES_ENODATA) {
                /* No answer is no news: the peers known stay, and their probes go on. */
                if (!c->dns_failing)
                        log_warn("peer-discovery", NULL,
                                 "resolving '%s': %s (the peers known are kept and probed)",
                                 c->spec.name, ares_strerror(status));
                c->dns_failing = true;
                ares_freeaddrinfo(res);
                discovered_keep(c);
                return;
        }
        if (c->dns_failing)
                log_info("peer-discovery", NULL, "resolving '%s': answered again", c->spec.name);
        c->dns_failing = false;
        for (a = res ? res->nodes : NULL; a; a = a->ai_next)
                n++;
        urls = calloc(n + 1, sizeof(*urls));
        if (!urls) {
                log_warn("peer-discovery", NULL, "out of memory");
                ares_freeaddrinfo(res);
                return;
        }
        n = 0;
        for (a = res ? res->nodes : NULL; a; a = a->ai_next) {
                char ip[INET6_ADDRSTRLEN];
                int k = -1;

                if (a->ai_family == AF_INET &&
                    inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)a->ai_addr)->sin_addr, ip,
                              sizeof(ip)))
                        k = asprintf(&urls[n], "http://%s:%u", ip, port);
                else if (a->ai_family == AF_INET6 &&
                         inet_ntop(AF_INET6,
                                   &((struct sockaddr_in6 *)(void *)a->ai_addr)->sin6_addr, ip,
                                   sizeof(ip)))
                        k = asprintf(&urls[n], "http://[%s]:%u", ip, port);
                if (k < 0)
                        urls[n] = NULL;
                else if (!url_among(urls, n, urls[n]))
                        n++;
                else {
                        free(urls[n]);
                        urls[n] = NULL;
                }
        }
        ares_freeaddrinfo(res);
        discovered(c, urls);
        for (i = 0; i < n; i++)
                free(urls[i]);
        free(urls);
}

/* ---- the rounds ------------------------------------------------------------------------------ */

static void round_start(sh_loop *l, sh_timer *t, void *data)
{
        sh_cluster *c = data;

        (void)l;
        (void)t;
        c->round = sh_loop_add_timer(c->loop, c->cfg->peers_interval_ms, round_start, c);
        if (!c->round)
                log_warn("peer-discovery", NULL, "adding a timer: %s: discovery stops",
                         strerror(errno));
        if (!c->spec.dns) {
                discovered(c, c->spec.urls);
                return;
        }
        if (c->resolving) /* the last one has not answered yet */
                return;
        c->resolving = true;
        ares_getaddrinfo(c->ares, c->spec.name, NULL,
                         &(struct ares_addrinfo_hints){.ai_family = AF_UNSPEC}, resolved, c);
        ares_rearm(c);
}

static int ares_setup(sh_cluster *c, sh_error **err)
{
        static bool global_done;
        struct ares_options o = {
                .sock_state_cb = ares_sock_state,
                .sock_state_cb_data = c,
                .timeout = (int)(c->cfg->peer_timeout_ms < DNS_TIMEOUT ? c->cfg->peer_timeout_ms
                                                                       : DNS_TIMEOUT),
                .tries = DNS_TRIES,
        };
        int r;

        if (!global_done) {
                r = ares_library_init(ARES_LIB_INIT_ALL);
                if (r != ARES_SUCCESS)
                        return sh_error_new(err, SH_E_INTERNAL, "c-ares: %s", ares_strerror(r));
                global_done = true;
        }
        r = ares_init_options(&c->ares, &o,
                              ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
        if (r != ARES_SUCCESS) {
                c->ares = NULL;
                return sh_error_new(err, SH_E_INTERNAL, "c-ares: %s", ares_strerror(r));
        }
        if (c->cfg->peers_resolver) {
                r = ares_set_servers_ports_csv(c->ares, c->cfg->peers_resolver);
                if (r != ARES_SUCCESS)
                        return sh_error_new(err, SH_E_SETTING,
                                            "SANDBOX_HOST_PEERS_RESOLVER='%s': %s (ip[:port],...)",
                                            c->cfg->peers_resolver, ares_strerror(r));
        }
        return 0;
}

int sh_cluster_new(const sh_config *cfg, sh_loop *loop, const char *token, uint16_t listen_port,
                   sh_cluster_room_fn room_fn, void *room_data, sh_cluster **ret, sh_error **err)
{
        sh_cluster *c;
        char reason[256];
        int r;

        if (!token || !sh_pod_token_valid(token, strlen(token)))
                return sh_error_new(err, SH_E_INTERNAL, "the pod token is not valid");
        c = calloc(1, sizeof(*c));
        if (!c)
                return sh_error_make(err, ENOMEM, "out of memory");
        c->cfg = cfg;
        c->loop = loop;
        c->listen_port = listen_port;
        c->room_fn = room_fn;
        c->room_data = room_data;
        memcpy(c->token, token, SH_POD_TOKEN_LEN + 1);
        snprintf(c->hop, sizeof(c->hop), "%s: %s", SH_HOP_HEADER, token);
        r = sh_random_hex(c->instance, INSTANCE_LEN / 2);
        if (r < 0) {
                free(c);
                return sh_error_make(err, -r, "getrandom");
        }
        *ret = c;
        if (!cfg->peers)
                return 0;
        r = sh_peers_spec_parse(cfg->peers, &c->spec, reason, sizeof(reason));
        if (r < 0) {
                sh_cluster_free(c);
                *ret = NULL;
                if (r == -ENOMEM)
                        return sh_error_make(err, ENOMEM, "out of memory");
                return sh_error_new(err, SH_E_SETTING, "SANDBOX_HOST_PEERS='%s': %s", cfg->peers,
                                    reason);
        }
        c->enabled = true;
        if (sh_fetcher_new(loop, true, NULL, &c->fetcher, err) < 0 ||
            (c->spec.dns && ares_setup(c, err) < 0)) {
                sh_cluster_free(c);
                *ret = NULL;
                return -1;
        }
        c->round = sh_loop_add_timer(loop, 0, round_start, c);
        if (!c->round) {
                r = errno;
                sh_cluster_free(c);
                *ret = NULL;
                return sh_error_make(err, r, "adding a timer");
        }
        log_info("peers", NULL, "token %s, peers from %s, again every %llu ms", token, cfg->peers,
                 (unsigned long long)cfg->peers_interval_ms);
        return 0;
}

static void ask_free(sh_cluster_ask *a)
{
        for (size_t i = 0; i < a->n; i++) {
                sh_fetch_cancel(a->parts[i].fetch);
                free(a->parts[i].url);
                free(a->parts[i].body);
        }
        sh_loop_cancel_timer(a->c->loop, a->zero);
        SH_LIST_REMOVE(asks, a->c->asks, a);
        free(a->parts);
        free(a);
}

void sh_cluster_free(sh_cluster *c)
{
        sh_peer *p, *n;

        if (!c)
                return;
        while (c->asks)
                ask_free(c->asks);
        sh_loop_cancel_timer(c->loop, c->round);
        SH_LIST_FOREACH_SAFE(peers, p, n, c->peers) {
                sh_fetch_cancel(p->probe);
                SH_LIST_REMOVE(peers, c->peers, p);
                free(p->url);
                free(p);
        }
        if (c->ares) {
                sh_loop_cancel_timer(c->loop, c->ares_timer);
                c->ares_timer = NULL;
                c->closing = true;
                /* its pending query's callback runs (closing: ignored); its sockets close */
                ares_destroy(c->ares);
        }
        while (c->socks) {
                ares_sock *k = c->socks;

                sh_loop_del_io(c->loop, k->io);
                SH_LIST_REMOVE(socks, c->socks, k);
                free(k);
        }
        sh_fetcher_free(c->fetcher, true);
        sh_peers_spec_done(&c->spec);
        free(c);
}

/* ---- what the surfaces ask ------------------------------------------------------------------- */

const char *sh_cluster_token(const sh_cluster *c)
{
        return c->token;
}

bool sh_cluster_enabled(const sh_cluster *c)
{
        return c && c->enabled;
}

static unsigned live_count(const sh_cluster *c)
{
        const sh_peer *p;
        unsigned n = 0;

        SH_LIST_FOREACH(peers, p, c->peers)
                n += usable(p);
        return n;
}

cJSON *sh_cluster_health_json(sh_cluster *c)
{
        sh_cluster_room room = {.accepting = true};
        cJSON *o = cJSON_CreateObject();

        if (c->room_fn)
                c->room_fn(c->room_data, &room);
        if (!o || !cJSON_AddStringToObject(o, "token", c->token) ||
            !cJSON_AddStringToObject(o, "instance", c->instance) ||
            !cJSON_AddBoolToObject(o, "accepting", room.accepting) ||
            !cJSON_AddNumberToObject(o, "room", (double)room.room) ||
            !cJSON_AddNumberToObject(o, "in_use", (double)room.in_use) ||
            !cJSON_AddNumberToObject(o, "peers", live_count(c))) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

const sh_peer *sh_cluster_owner(const sh_cluster *c, const char *id, size_t len)
{
        const sh_peer *p, *found = NULL;

        if (!c || !id)
                return NULL;
        /* a snapshot id: its token follows the prefix */
        if (len >= 5 && memcmp(id, "snap-", 5) == 0) {
                id += 5;
                len -= 5;
        }
        if (len < SH_POD_TOKEN_LEN || !sh_pod_token_valid(id, SH_POD_TOKEN_LEN) ||
            memcmp(id, c->token, SH_POD_TOKEN_LEN) == 0)
                return NULL;
        SH_LIST_FOREACH(peers, p, c->peers) {
                if (usable(p) && memcmp(p->h.token, id, SH_POD_TOKEN_LEN) == 0) {
                        if (found) /* a clash not marked yet: neither */
                                return NULL;
                        found = p;
                }
        }
        return found;
}

const sh_peer *sh_cluster_roomiest(const sh_cluster *c)
{
        const sh_peer *p, *best = NULL;

        if (!c)
                return NULL;
        SH_LIST_FOREACH(peers, p, c->peers) {
                if (usable(p) && p->h.accepting && p->h.room > 0 &&
                    (!best || p->h.room > best->h.room))
                        best = p;
        }
        return best;
}

const char *sh_peer_url(const sh_peer *p)
{
        return p->url;
}

const char *sh_peer_token(const sh_peer *p)
{
        return p->h.token;
}

void sh_peer_took_create(sh_cluster *c, const sh_peer *p)
{
        sh_peer *q;

        /* p may be gone since it was handed out: only a peer still known is marked */
        SH_LIST_FOREACH(peers, q, c->peers)
                if (q == p && q->h.room > 0)
                        q->h.room--;
}

/* ---- asking every live peer ------------------------------------------------------------------- */

static void ask_finish(sh_cluster_ask *a)
{
        sh_cluster_answer *ans = calloc(a->n ? a->n : 1, sizeof(*ans));

        if (ans)
                for (size_t i = 0; i < a->n; i++) {
                        ask_part *pt = &a->parts[i];

                        ans[i] = (sh_cluster_answer){.token = pt->token,
                                                     .status = pt->status,
                                                     .body = pt->body,
                                                     .len = pt->body ? pt->len : 0,
                                                     .why = pt->body ? NULL : pt->why};
                }
        else
                log_warn("peer-ask", NULL, "out of memory: no peer's answer is used");
        a->done(ans, ans ? a->n : 0, a->data);
        free(ans);
        ask_free(a);
}

static void ask_part_done(sh_fetch *f, const sh_fetch_result *res, void *data)
{
        ask_part *pt = data;
        sh_cluster_ask *a = pt->ask;

        (void)f;
        pt->fetch = NULL;
        pt->done = true;
        pt->status = res->status;
        if (res->kind == SH_FETCH_OK && res->status >= 200 && res->status < 300) {
                pt->body = malloc(res->len + 1);
                if (pt->body) {
                        memcpy(pt->body, res->body, res->len);
                        pt->body[res->len] = '\0';
                        pt->len = res->len;
                } else {
                        snprintf(pt->why, sizeof(pt->why), "out of memory");
                }
        } else if (res->kind == SH_FETCH_HTTP) {
                snprintf(pt->why, sizeof(pt->why), "%.300s answered %ld", pt->url, res->status);
        } else {
                snprintf(pt->why, sizeof(pt->why), "%.300s: %.600s", pt->url,
                         res->too_big ? "the answer is too large" : res->reason);
        }
        if (--a->pending == 0)
                ask_finish(a);
}

static void ask_zero(sh_loop *l, sh_timer *t, void *data)
{
        sh_cluster_ask *a = data;

        (void)l;
        (void)t;
        a->zero = NULL;
        ask_finish(a);
}

sh_cluster_ask *sh_cluster_ask_all(sh_cluster *c, const char *target, const char *const *headers,
                                   uint64_t max, sh_cluster_ask_done_fn done, void *data,
                                   sh_error **err)
{
        sh_cluster_ask *a = calloc(1, sizeof(*a));
        const char **hdrs = NULL;
        size_t nh = 0, i;
        sh_peer *p;

        if (!a)
                goto oom;
        a->c = c;
        a->done = done;
        a->data = data;
        SH_LIST_INIT(asks, a);
        SH_LIST_APPEND(asks, c->asks, a);
        a->parts = calloc(live_count(c) + 1, sizeof(*a->parts));
        while (headers && headers[nh])
                nh++;
        hdrs = calloc(nh + 2, sizeof(*hdrs));
        if (!a->parts || !hdrs)
                goto oom;
        for (i = 0; i < nh; i++)
                hdrs[i] = headers[i];
        hdrs[nh] = c->hop;
        SH_LIST_FOREACH(peers, p, c->peers) {
                ask_part *pt;

                if (!usable(p))
                        continue;
                pt = &a->parts[a->n++];
                pt->ask = a;
                memcpy(pt->token, p->h.token, sizeof(pt->token));
                if (asprintf(&pt->url, "%s%s", p->url, target) < 0) {
                        pt->url = NULL;
                        goto oom;
                }
        }
        /* started once every part is set: a fetch that fails to start is a failed part */
        for (i = 0; i < a->n; i++) {
                ask_part *pt = &a->parts[i];
                sh_error *ferr = NULL;

                pt->fetch = sh_fetch_start_opts(
                        c->fetcher,
                        &(sh_fetch_opts){.url = pt->url,
                                         .what = "listing",
                                         .peer = "the peer",
                                         .headers = hdrs,
                                         .max = max,
                                         .fd = -1,
                                         .timeout_ms = c->cfg->peer_timeout_ms,
                                         .connect_timeout_ms = c->cfg->peer_timeout_ms,
                                         .raw = true},
                        ask_part_done, pt, &ferr);
                if (pt->fetch)
                        a->pending++;
                else
                        snprintf(pt->why, sizeof(pt->why), "%.300s: %.600s", pt->url,
                                 ferr && ferr->msg ? ferr->msg : "the request did not start");
                sh_error_release(&ferr);
        }
        free(hdrs);
        if (a->pending == 0) {
                a->zero = sh_loop_add_timer(c->loop, 0, ask_zero, a);
                if (!a->zero) {
                        int e = errno;

                        ask_free(a);
                        sh_error_make(err, e, "adding a timer");
                        return NULL;
                }
        }
        return a;
oom:
        free(hdrs);
        if (a)
                ask_free(a);
        sh_error_make(err, ENOMEM, "out of memory");
        return NULL;
}

void sh_cluster_ask_cancel(sh_cluster_ask *a)
{
        if (a)
                ask_free(a);
}
