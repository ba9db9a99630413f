/* server.c: libmicrohttpd in external-epoll mode inside our loop (STYLE.md section 3.3): MHD's
 * epoll fd is one of our fds, MHD_run runs before every sleep when its fd fired, its deadline
 * passed or a connection was resumed, and the wait is bounded by MHD_get_timeout. Also the
 * accept loop and its admission policy (conntrack.c), and the per-request lifecycle: first
 * call (framing, surface, route, query, the surface's admission, the body sink), body,
 * dispatch, suspend/resume, completion. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "http-internal.h"
#include "sh/log.h"

#define ACCEPT_BATCH    32  /* accepts per loop iteration: MHD reads in between */
#define ACCEPT_PAUSE_MS 100 /* out of fds or memory: accept again after this */
#define SWEEP_MS        1000
#define FILE_WATCH_MS   100 /* how often the files being sent are looked at */
#define EVICT_LOG_MS    10000
/* MHD's own bound, above ours: probes answered past SH_HTTP_ACTIVE_MAX need a socket too. */
#define MHD_CONN_LIMIT (SH_HTTP_ACTIVE_MAX + SH_HTTP_WAITING_MAX + 64)
/* Two MHD daemons, by what a connection's first request is (MHD 0.9.75 has one pool size per
 * daemon, and MHD_pool_reset zeroes the whole pool after every request of a keep-alive
 * connection: 31% of the daemon's CPU under small requests with 128 KiB). The small pool
 * holds the request header (up to about the pool's size) and a short answer; the bulk pool
 * is the read buffer of an upload (half of it) and the write buffer of a stream (the rest).
 * The bulk daemon takes at most BULK_CONN_MAX connections, the others go to the small one:
 * MHD's memory stays within BULK_CONN_MAX * BULK_POOL + MHD_CONN_LIMIT * SMALL_POOL. */
#define SMALL_POOL     (32 * 1024)
#define BULK_POOL      (256 * 1024)
#define BULK_CONN_MAX  256
#define RUN_SMALL      1u
#define RUN_BULK       2u
#define RUN_ALL        (RUN_SMALL | RUN_BULK)
#define SMALL_HEAD_MAX 8192 /* a first request header up to this long: the small pool */

struct sh_server {
        const sh_config *cfg;
        sh_loop *loop;
        sh_surface surfaces[SH_SURFACES_MAX]; /* [0] answers what matches no prefix */
        size_t n_surfaces;
        struct MHD_Daemon *d;    /* small pools: most connections */
        struct MHD_Daemon *bulk; /* large pools: connections that began with PUT or POST */
        unsigned n_bulk;
        int listen_fd; /* ours: we accept, MHD gets each connection with MHD_add_connection */
        sh_io *listen_io;
        sh_timer *accept_t; /* accepting paused (EMFILE and the like) until it fires */
        bool quiesced;
        sh_conntrack ct;
        sh_conn *adding; /* handed to MHD_add_connection, claimed by on_connection */
        sh_timer *sweep_t;
        unsigned evicted_unlogged;
        uint64_t evict_log_ms;
        uint64_t accept_log_ms;
        sh_io *mhd_io, *bulk_io;
        unsigned need_run;        /* RUN_*: which daemons must run before the loop sleeps */
        uint64_t mhd_deadline_ms; /* 0: none */
        uint16_t port;
        char url[128];
        char *pod_url;
        sh_request *requests;
        unsigned connections;
        unsigned n_files;  /* requests answering with a file, watched (sh_http_watch_file) */
        sh_timer *files_t; /* their next look */
};

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
        char buf[512];

        vsnprintf(buf, sizeof(buf), fmt, ap);
        buf[strcspn(buf, "\n")] = '\0';
        log_debug("mhd", NULL, "%s", buf);
}

/* ---- connections ------------------------------------------------------------------------ */

/* Our side of a connection: its book entry (first, so that free(c) frees it all) and, until
 * its first bytes say which daemon gets it, its watch and address. */
typedef struct srv_conn {
        sh_conn c;
        sh_server *s;
        sh_io *peek_io; /* not yet handed to MHD while set */
        bool bulk;      /* in the bulk daemon */
        socklen_t sl;
        struct sockaddr_storage ss;
} srv_conn;

static sh_conn *conn_of(struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *info =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return info ? info->socket_context : NULL;
}

static void sweep_arm(sh_server *s);

/* Close a waiting connection under MHD: shutdown(2) makes its socket readable at EOF, MHD
 * reads that and drops the connection (and closes the fd) in its next run. */
static void evict(sh_server *s, sh_conn *c, const char *why)
{
        uint64_t now = sh_now_ms();

        sh_conntrack_unwait(&s->ct, c);
        c->evicted = true;
        if (shutdown(c->fd, SHUT_RDWR) < 0 && errno != ENOTCONN)
                log_warn("evict-failed", NULL, "shutdown of a waiting connection: %s, ignoring",
                         strerror(errno));
        s->need_run = RUN_ALL;
        /* One line per interval, not per connection: a flood must not flood the log too. */
        s->evicted_unlogged++;
        if (now - s->evict_log_ms >= EVICT_LOG_MS || s->evict_log_ms == 0) {
                log_warn("slow-clients", NULL,
                         "closed %u connection(s) that had not sent their request headers "
                         "(last: %s)",
                         s->evicted_unlogged, why);
                s->evicted_unlogged = 0;
                s->evict_log_ms = now;
        }
}

static void on_sweep(sh_loop *l, sh_timer *t, void *data)
{
        sh_server *s = data;
        uint64_t now = sh_now_ms();
        sh_conn *c;

        s->sweep_t = NULL;
        /* The deadline runs from the accept, not from the last byte: a client that sends a
         * byte now and then (slowloris) is not idle to MHD's timeout but is cut here. */
        while ((c = sh_conntrack_expired(&s->ct, now)))
                evict(s, c, "header deadline");
        sweep_arm(s);
}

static void sweep_arm(sh_server *s)
{
        if (s->sweep_t || !sh_conntrack_any_due(&s->ct))
                return;
        s->sweep_t = sh_loop_add_timer(s->loop, SWEEP_MS, on_sweep, s);
        if (!s->sweep_t)
                log_warn("sweep-timer", NULL, "cannot arm the header deadline timer: %s",
                         strerror(errno));
}

static void addr_key(const struct sockaddr_storage *ss, unsigned char key[16])
{
        memset(key, 0, 16);
        if (ss->ss_family == AF_INET) {
                const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

                key[10] = key[11] = 0xff;
                memcpy(key + 12, &s4->sin_addr, 4);
        } else if (ss->ss_family == AF_INET6) {
                const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

                memcpy(key, &s6->sin6_addr, 16);
        }
}

static void accept_resume(sh_loop *l, sh_timer *t, void *data);

static void accept_pause(sh_server *s, int e)
{
        uint64_t now = sh_now_ms();

        if (now - s->accept_log_ms >= EVICT_LOG_MS || s->accept_log_ms == 0) {
                log_warn("accept-failed", NULL, "accept: %s; pausing new connections %d ms",
                         strerror(e), ACCEPT_PAUSE_MS);
                s->accept_log_ms = now;
        }
        /* Level-triggered: a listen socket left watched would spin the loop. */
        sh_loop_del_io(s->loop, s->listen_io);
        s->listen_io = NULL;
        s->accept_t = sh_loop_add_timer(s->loop, ACCEPT_PAUSE_MS, accept_resume, s);
}

static void on_listen(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data);

static void accept_resume(sh_loop *l, sh_timer *t, void *data)
{
        sh_server *s = data;

        s->accept_t = NULL;
        if (s->quiesced || s->listen_fd < 0 || s->listen_io)
                return;
        s->listen_io = sh_loop_add_io(l, s->listen_fd, EPOLLIN, on_listen, s);
        if (!s->listen_io)
                accept_pause(s, errno);
}

/* Hand the connection to one of the daemons (the small one if the bulk one is full). */
static void hand_over(sh_server *s, srv_conn *sc, bool bulk)
{
        sh_conn *c = &sc->c;

        sh_loop_del_io(s->loop, TAKE_PTR(sc->peek_io));
        sc->bulk = bulk = bulk && s->n_bulk < BULK_CONN_MAX;
        if (bulk)
                s->n_bulk++;
        s->adding = c;
        /* MHD takes the socket in any case: on failure it has closed it. */
        if (MHD_add_connection(sc->bulk ? s->bulk : s->d, c->fd, (const struct sockaddr *)&sc->ss,
                               sc->sl) != MHD_YES)
                log_debug("add-connection", NULL, "MHD refused a connection: %s", strerror(errno));
        if (s->adding == c) { /* never started: MHD closed the socket */
                if (sc->bulk)
                        s->n_bulk--;
                sh_conntrack_remove(&s->ct, c);
                free(sc);
        }
        s->adding = NULL;
        s->need_run |= bulk ? RUN_BULK : RUN_SMALL; /* sc may be gone */
}

/* The first bytes are in (or the end, or an error: MHD then finds that itself). Only a
 * MSG_PEEK: MHD reads them. Decided at once whatever came, so that a level-triggered watch
 * on unread bytes never spins. The small pool takes a first request that is not PUT or POST
 * and whose whole header came within SMALL_HEAD_MAX bytes; an upload, a stream, a long
 * header (a 70000-byte path still gets its 400) or one sent in pieces gets a large pool. */
static void on_first_bytes(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        srv_conn *sc = data;
        char head[SMALL_HEAD_MAX];
        ssize_t n = recv(fd, head, sizeof(head), MSG_PEEK | MSG_DONTWAIT);
        bool bulk;

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0)
                bulk = false;
        else if (n >= 4 && (memcmp(head, "PUT ", 4) == 0 || memcmp(head, "POST", 4) == 0))
                bulk = true;
        else
                bulk = !memmem(head, (size_t)n, "\r\n\r\n", 4) &&
                       !memmem(head, (size_t)n, "\n\n", 2);
        hand_over(sc->s, sc, bulk);
}

/* Accept it, make room among the waiting connections (closing the oldest if needed: a new
 * connection, such as a probe, always gets in), book it, watch it for its first bytes. */
static void take_connection(sh_server *s, int fd, const struct sockaddr_storage *ss, socklen_t sl)
{
        srv_conn *sc = calloc(1, sizeof(*sc));
        sh_conn *c, *v;

        if (!sc) {
                close(fd);
                return;
        }
        c = &sc->c;
        c->fd = fd;
        sc->s = s;
        sc->ss = *ss;
        sc->sl = sl;
        addr_key(ss, c->addr);
        while ((v = sh_conntrack_victim(&s->ct, c->addr)))
                evict(s, v, "too many waiting connections");
        sh_conntrack_add(&s->ct, c, sh_now_ms());
        /* Booked from now (its header deadline runs from the accept), handed to MHD once its
         * first bytes show whether it wants a large pool. */
        sc->peek_io = sh_loop_add_io(s->loop, fd, EPOLLIN, on_first_bytes, sc);
        if (!sc->peek_io)
                hand_over(s, sc, false);
        sweep_arm(s);
}

static void on_listen(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_server *s = data;
        int i;

        /* A bounded batch: the level-triggered listen socket brings us back, and MHD reads
         * what these sent before the next batch can push them out of the waiting set. */
        for (i = 0; i < ACCEPT_BATCH; i++) {
                struct sockaddr_storage ss;
                socklen_t sl = sizeof(ss);
                int c = accept4(fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);

                if (c >= 0) {
                        take_connection(s, c, &ss, sl);
                        continue;
                }
                switch (errno) {
                case EAGAIN:
                        return;
                case EINTR:
                case ECONNABORTED:
                case EPROTO:
                case ENETDOWN:
                case ENOPROTOOPT:
                case EHOSTDOWN:
                case ENONET:
                case EHOSTUNREACH:
                case EOPNOTSUPP:
                case ENETUNREACH:
                case EPERM:
                        continue; /* that connection's trouble (accept(2) "Error handling") */
                default:
                        accept_pause(s, errno); /* EMFILE, ENFILE, ENOBUFS, ENOMEM */
                        return;
                }
        }
}

/* ---- file answers -------------------------------------------------------------------- */

/* A file answer promised its Content-Length; a file that got shorter meanwhile can never give
 * it: MHD's sendfile(2) reads nothing there, and the connection would wait for bytes that
 * never come until its idle timeout (holding a shutdown for its whole grace). So every
 * FILE_WATCH_MS while files are being sent, each one's size is looked at, and the connection
 * of one that is shorter than its answer's end is closed (shutdown(2), as evict: MHD sees the
 * end and drops it); its client sees a short body. */
static void files_arm(sh_server *s);

static void on_files(sh_loop *l, sh_timer *t, void *data)
{
        sh_server *s = data;
        sh_request *r;

        s->files_t = NULL;
        SH_LIST_FOREACH(requests, r, s->requests) {
                const union MHD_ConnectionInfo *info;
                struct stat st;

                if (!r->file.watched ||
                    (fstat(r->file.fd, &st) == 0 && (uint64_t)st.st_size >= r->file.end))
                        continue;
                r->file.watched = false;
                s->n_files--;
                log_warn("download-cut", r->log_id,
                         "'%s': the file shrank below the %" PRIu64
                         " bytes its answer promised: connection closed",
                         r->path ? r->path : "", r->file.end);
                info = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
                if (info && shutdown(info->connect_fd, SHUT_RDWR) < 0 && errno != ENOTCONN)
                        log_warn("download-cut", r->log_id, "shutdown: %s, ignoring",
                                 strerror(errno));
                s->need_run = RUN_ALL;
        }
        files_arm(s);
}

static void files_arm(sh_server *s)
{
        if (s->files_t || s->n_files == 0)
                return;
        s->files_t = sh_loop_add_timer(s->loop, FILE_WATCH_MS, on_files, s);
        if (!s->files_t)
                log_warn("files-timer", NULL, "cannot arm the timer of file answers: %s",
                         strerror(errno));
}

void sh_http_watch_file(sh_request *r)
{
        r->file.watched = true;
        r->srv->n_files++;
        files_arm(r->srv);
}

/* ---- request lifecycle ---------------------------------------------------------------- */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
        sh_server *s = cls;
        sh_request *r = calloc(1, sizeof(*r));
        sh_conn *c = conn_of(conn);

        if (c) { /* a keep-alive connection's next request line: headers due from now */
                sh_conntrack_headers_due(&s->ct, c, sh_now_ms());
                sweep_arm(s);
        }
        if (!r)
                return NULL;
        r->uri = strdup(uri ? uri : "");
        if (!r->uri) {
                free(r);
                return NULL; /* on_access then drops the connection */
        }
        r->srv = s;
        r->conn = conn;
        r->start_ns = sh_now_ns();
        SH_LIST_PREPEND(requests, s->requests, r);
        return r;
}

static void request_free(sh_request *r)
{
        sh_server *s = r->srv;

        /* The job waiting on it learns first, while everything of the request still lives. */
        sh_pending_request_ended(r);
        if (r->file.watched)
                s->n_files--;
        if (r->sink && r->sink->abort)
                r->sink->abort(r, r->sink_state);
        if (r->surface && r->surface->finish)
                r->surface->finish(r);
        if (r->pending)
                MHD_destroy_response(r->pending);
        sh_query_done(&r->query);
        SH_LIST_REMOVE(requests, s->requests, r);
        free(r->path);
        free(r->uri);
        free(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        sh_server *s = cls;
        sh_request *r = *con_cls;
        sh_conn *c = conn_of(conn);

        /* Kept alive, the connection waits for its next request (closed, it leaves the book
         * in on_connection). */
        if (c)
                sh_conntrack_idle(&s->ct, c, sh_now_ms());
        if (!r)
                return;
        if (r->started)
                sh_log_request(r->method, r->path ? r->path : r->uri,
                               toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? r->status : 499,
                               (double)(sh_now_ns() - r->start_ns) / 1e6, r->log_id);
        request_free(r);
        *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
        sh_server *s = cls;
        sh_conn *c;

        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                s->connections++;
                /* Called from inside MHD_add_connection for the socket we are adding. */
                *socket_context = TAKE_PTR(s->adding);
                return;
        }
        if (s->connections > 0)
                s->connections--;
        /* MHD closes the socket after this call: the fd is never shut down once reused. */
        c = *socket_context;
        *socket_context = NULL;
        if (c) {
                if (((srv_conn *)c)->bulk && s->n_bulk > 0)
                        s->n_bulk--;
                sh_conntrack_remove(&s->ct, c);
                free(c);
        }
}

void sh_http_suspend(sh_request *r)
{
        if (r->suspended)
                return;
        r->suspended = true;
        MHD_suspend_connection(r->conn);
}

void sh_http_resume(sh_request *r)
{
        sh_conn *c;

        /* A body paused by its sink waits for its owner (sh_request_body_resume): a stream's
         * push or an answer given meanwhile does not let more of it in. */
        if (!r->suspended || r->body_paused)
                return;
        r->suspended = false;
        MHD_resume_connection(r->conn);
        c = conn_of(r->conn);
        r->srv->need_run |= !c ? RUN_ALL : ((srv_conn *)c)->bulk ? RUN_BULK : RUN_SMALL;
}

/* An error answered by the transport itself, in the shape of the request's surface. */
static void reply_kind(sh_request *r, sh_error_kind kind, const char *msg, const char *allow)
{
        sh_error err = {.kind = kind, .msg = (char *)msg};

        sh_http_reply_error(r, &err, false, allow);
}

static enum MHD_Result count_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
        size_t *n = cls;

        (*n)++;
        return MHD_YES;
}

struct field_list {
        sh_http_field *f;
        size_t n, cap;
};

static enum MHD_Result collect_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
        struct field_list *l = cls;

        if (l->n == l->cap)
                return MHD_NO;
        l->f[l->n].name = key ? key : "";
        l->f[l->n].value = value ? value : "";
        l->n++;
        return MHD_YES;
}

#if MHD_VERSION < 0x01000000
/* libmicrohttpd before 1.0 hands out the request line's parts and the header fields as C
 * strings cut at the first NUL byte: "GET /file?path=a\0b HTTP/1.1" reaches us as the target
 * "/file?path=a", a shorter path than the client sent, and "X: a\0b" as the value "a". It
 * parses the header block in place in one buffer, replacing CR and LF by NUL: request line,
 * then each field as name NUL [OWS] value, each line ending in one or two NULs. So a string
 * that ends earlier than the next one begins (by more than a line end) had bytes hidden
 * behind a NUL. Only pointers are compared; the one read is within the request line. A
 * folded (obs-fold) line also breaks the layout: refused too, as RFC 9112 section 5.2
 * allows. MHD 1.0 refuses NUL bytes itself. */
struct layout_walk {
        uintptr_t end; /* where the previous string of the block ended */
        bool ok;
};

static bool gap_ok(uintptr_t from, uintptr_t to, uintptr_t min, uintptr_t max)
{
        return to >= from && to - from >= min && to - from <= max;
}

static enum MHD_Result walk_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
        struct layout_walk *w = cls;

        /* one line end (LF or CRLF) between the previous string and this name */
        if (!key || !value || !gap_ok(w->end, (uintptr_t)key, 1, 2) ||
            (uintptr_t)value <= (uintptr_t)key + strlen(key)) {
                w->ok = false;
                return MHD_NO;
        }
        w->end = (uintptr_t)value + strlen(value);
        return MHD_YES;
}

static bool header_block_intact(const sh_request *r, const char *url, const char *method,
                                const char *version)
{
        const union MHD_ConnectionInfo *info;
        size_t ml = strlen(method);
        struct layout_walk w = {.ok = true};
        const char *p;

        /* method NUL(the space MHD cut at) [spaces it skipped] target */
        if ((uintptr_t)url <= (uintptr_t)method + ml || (uintptr_t)url - (uintptr_t)method > 4096)
                return false;
        for (p = method + ml + 1; p < url; p++)
                if (*p != ' ')
                        return false;
        /* target NUL version: r->uri is the raw target copied before MHD unescaped it */
        if ((uintptr_t)version != (uintptr_t)url + strlen(r->uri) + 1 || strlen(version) != 8)
                return false;
        w.end = (uintptr_t)version + 8;
        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, walk_field, &w);
        if (!w.ok)
                return false;
        /* the last line's end and the empty line's end close the block */
        info = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
        return info && gap_ok(w.end, (uintptr_t)method + info->header_size, 2, 4);
}
#endif

/* Before anything else: a request whose framing or bytes MHD would read otherwise than the
 * client (or a proxy in front) meant is refused, and its connection closed after the answer,
 * since where its body ends cannot be trusted. */
static bool request_framing_ok(sh_request *r, const char *url, const char *version)
{
        _cleanup_free_ sh_http_field *f = NULL;
        struct field_list l = {0};
        sh_error *err = NULL;
        size_t n = 0;

#if MHD_VERSION < 0x01000000
        if (!header_block_intact(r, url, r->method, version)) {
                r->close = true;
                sh_reply_errorf(r, SH_E_INVALID,
                                "a NUL byte or a folded line in the request header");
                return false;
        }
#endif
        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_field, &n);
        f = calloc(n ? n : 1, sizeof(*f));
        if (!f) {
                r->close = true;
                sh_reply_errorf(r, SH_E_INTERNAL, "out of memory");
                return false;
        }
        l.f = f;
        l.cap = n;
        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, collect_field, &l);
        if (sh_http_check_framing(f, l.n, strcmp(version, MHD_HTTP_VERSION_1_0) == 0, &err) < 0) {
                r->close = true;
                sh_reply_error(r, err);
                sh_error_release(&err);
                return false;
        }
        return true;
}

/* First call: headers are in. Route, decode, hand the request to its surface, start the body
 * sink. The order is the contract's: framing, path, route (404 / 405 before anything of the
 * surface runs), the active bound, the query, the surface's admission (a sandbox lookup), the
 * body. */
static void request_start(sh_request *r)
{
        sh_server *s = r->srv;
        const char *target = sh_request_target(r), *q;
        char allow[SH_ALLOW_MAX] = "";
        sh_error_kind kind = SH_E_NO_ROUTE;
        const sh_body_sink *sink;
        size_t plen;
        char *qs;

        r->m = sh_method_from_string(r->method);
        q = strchr(target, '?');
        plen = q ? (size_t)(q - target) : strlen(target);
        if (sh_url_decode(target, plen, false, &r->path, NULL) < 0) {
                r->path = strndup(target, plen);
                sh_reply_errorf(r, SH_E_INVALID, "invalid %% escape in the path");
                return;
        }
        /* The decoded path decides the surface (the raw one was only a first guess, for the
         * framing errors above). */
        r->surface = sh_surface_for(s->surfaces, s->n_surfaces, r->path);
        if (!r->surface) {
                r->surface = s->n_surfaces ? &s->surfaces[0] : NULL;
                reply_kind(r, SH_E_NO_ROUTE, "no such route", NULL);
                return;
        }
        r->route = sh_route_match(r->surface->routes, r->surface->n_routes, r->path, r->m,
                                  &r->params, &kind, allow);
        if (!r->route) {
                if (kind == SH_E_METHOD_NOT_ALLOWED)
                        reply_kind(r, kind, "method not allowed", allow);
                else
                        reply_kind(r, SH_E_NO_ROUTE, "no such route", NULL);
                return;
        }
        /* Past the bound on requests in progress, only probes are served: they end at once,
         * and the kubelet must never take a full host for a dead one. */
        if (s->ct.n_active > SH_HTTP_ACTIVE_MAX && !(r->route->flags & SH_ROUTE_PROBE)) {
                r->close = true;
                sh_reply_errorf(r, SH_E_UNAVAILABLE, "too many requests in progress");
                return;
        }
        qs = q ? (char *)q + 1 : NULL;
        if (sh_query_parse(qs, &r->query) < 0) {
                sh_reply_errorf(r, SH_E_INVALID, "invalid %% escape in the query string");
                return;
        }
        if (r->surface->admit && r->surface->admit(r) < 0)
                return;
        sink = r->divert_sink ? r->divert_sink : r->route->body;
        if (sink) {
                void *state = r->divert_sink ? r->divert_state : NULL;

                if (sink->begin(r, &state) < 0)
                        return;
                r->sink = sink;
                r->sink_state = state;
        }
}

static void body_data(sh_request *r, const char *data, size_t len)
{
        int k;

        /* Endpoints that take no body ignore one; a sink that said no more drops the rest. */
        if (!r->sink || r->sink_refused)
                return;
        k = r->sink->data(r, r->sink_state, data, len);
        if (k < 0) {
                r->sink_refused = true;
        } else if (k == SH_SINK_PAUSE) {
                /* Taken, but no more now: MHD reads nothing until the sink's owner resumes
                 * it (no other resume does: sh_http_resume). The end of the body (the
                 * handler's last call) comes after the resume. */
                r->body_paused = true;
                sh_http_suspend(r);
        }
}

void sh_request_body_resume(sh_request *r)
{
        if (!r->body_paused)
                return;
        r->body_paused = false;
        sh_http_resume(r);
}

void sh_request_divert(sh_request *r, const sh_body_sink *sink, sh_handler_fn fn, void *state)
{
        r->divert_sink = sink;
        r->divert_fn = fn;
        r->divert_state = state;
}

static void dispatch(sh_request *r)
{
        if (r->sink && r->sink->end && r->sink->end(r, r->sink_state) < 0)
                return;
        (r->divert_fn ? r->divert_fn : r->route->fn)(r);
        if (r->responded)
                return;
        if (r->token) { /* answered later, from the loop */
                sh_http_suspend(r);
                return;
        }
        log_error("handler-bug", r->log_id, "handler for %s answered nothing", r->path);
        sh_reply_errorf(r, SH_E_INTERNAL, "the handler did not answer");
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
        sh_request *r = *con_cls;
        enum MHD_Result ret = MHD_YES;

        if (!r)
                return MHD_NO; /* out of memory in on_uri */
        r->in_handler = true;
        if (!r->started) {
                sh_conn *c = conn_of(conn);

                /* Evicted while MHD still held its bytes: its answer could not be sent, so
                 * it must not run either. */
                if (c && c->evicted) {
                        r->in_handler = false;
                        return MHD_NO;
                }
                if (c)
                        sh_conntrack_activate(&r->srv->ct, c);
                r->started = true;
                r->conn = conn;
                r->method = method;
                /* A first guess of the surface, from the raw target, for errors found before
                 * the path is decoded. */
                r->surface =
                        sh_surface_for(r->srv->surfaces, r->srv->n_surfaces, sh_request_target(r));
                if (!r->surface && r->srv->n_surfaces)
                        r->surface = &r->srv->surfaces[0];
                if (request_framing_ok(r, url, version))
                        request_start(r);
                /* A response queued now is sent without reading the body (MHD then closes the
                 * connection): right for early errors such as 413 on Content-Length. */
        } else if (r->pending) {
                struct MHD_Response *resp = TAKE_PTR(r->pending);

                if (MHD_queue_response(conn, r->pending_status, resp) != MHD_YES)
                        ret = MHD_NO;
                MHD_destroy_response(resp);
        } else if (*upload_data_size) {
                if (!r->responded)
                        body_data(r, upload_data, *upload_data_size);
                *upload_data_size = 0;
        } else if (!r->responded && !r->suspended) {
                dispatch(r);
        }
        if (r->no_response)
                ret = MHD_NO; /* no response object could be made: MHD closes the connection */
        r->in_handler = false;
        return ret;
}

/* ---- the loop side --------------------------------------------------------------------- */

static void mhd_readable(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_server *s = data;

        s->need_run |= RUN_SMALL;
}

static void bulk_readable(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_server *s = data;

        s->need_run |= RUN_BULK;
}

static int64_t server_hook(sh_loop *l, void *data)
{
        sh_server *s = data;
        MHD_UNSIGNED_LONG_LONG to;
        int spins = 0;

        if (!s->d)
                return -1;
        if (s->mhd_deadline_ms && sh_now_ms() >= s->mhd_deadline_ms)
                s->need_run = RUN_ALL;
        /* A resume during MHD_run (from a callback) sets need_run again: run until quiet, as
         * GNU Taler's mhd_run does, so no resumed connection waits for unrelated traffic. */
        while (s->need_run && spins++ < 16) {
                unsigned run = s->need_run;

                s->need_run = 0;
                if (run & RUN_SMALL)
                        MHD_run(s->d);
                if (run & RUN_BULK)
                        MHD_run(s->bulk);
        }
        if (s->need_run)
                return 0;
        if (MHD_get_timeout(s->d, &to) == MHD_YES) {
                MHD_UNSIGNED_LONG_LONG to2;

                if (MHD_get_timeout(s->bulk, &to2) == MHD_YES && to2 < to)
                        to = to2;
        } else if (MHD_get_timeout(s->bulk, &to) != MHD_YES) {
                s->mhd_deadline_ms = 0;
                return -1;
        }
        if (to > 3600000)
                to = 3600000;
        s->mhd_deadline_ms = sh_now_ms() + to;
        return (int64_t)to;
}

static int bind_listen(const char *listen_addr, int *ret_fd, char *url, size_t url_size,
                       uint16_t *ret_port, sh_error **err)
{
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
        struct addrinfo *ai = NULL;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        char host_txt[INET6_ADDRSTRLEN], portbuf[8];
        _cleanup_free_ char *host = NULL;
        uint16_t port;
        int fd, one = 1, r;

        if (sh_config_split_listen(listen_addr, &host, &port) < 0)
                return sh_error_make(err, EINVAL, "invalid listen address '%s'", listen_addr);
        snprintf(portbuf, sizeof(portbuf), "%u", port);
        if (!*host)
                hints.ai_family = AF_INET;
        r = getaddrinfo(*host ? host : NULL, portbuf, &hints, &ai);
        if (r != 0)
                return sh_error_make(err, EINVAL, "cannot resolve '%s': %s", host, gai_strerror(r));
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                r = sh_error_make(err, errno, "socket");
                freeaddrinfo(ai);
                return r;
        }
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
                r = sh_error_make(err, errno, "cannot listen on %s", listen_addr);
                freeaddrinfo(ai);
                close(fd);
                return r;
        }
        freeaddrinfo(ai);
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
                r = sh_error_make(err, errno, "getsockname");
                close(fd);
                return r;
        }
        if (ss.ss_family == AF_INET6) {
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

                inet_ntop(AF_INET6, &s6->sin6_addr, host_txt, sizeof(host_txt));
                *ret_port = ntohs(s6->sin6_port);
                snprintf(url, url_size, "http://[%s]:%u", host_txt, *ret_port);
        } else {
                struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

                inet_ntop(AF_INET, &s4->sin_addr, host_txt, sizeof(host_txt));
                *ret_port = ntohs(s4->sin_port);
                snprintf(url, url_size, "http://%s:%u", host_txt, *ret_port);
        }
        *ret_fd = fd;
        return 0;
}

static void on_sigpipe(int sig)
{
        (void)sig;
}

static int install_sigpipe_handler(void)
{
        struct sigaction sa = {.sa_handler = on_sigpipe};

        sigemptyset(&sa.sa_mask);
        return sigaction(SIGPIPE, &sa, NULL);
}

static struct MHD_Daemon *start_mhd(sh_server *s, size_t pool, unsigned conn_limit)
{
        return MHD_start_daemon(
                MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                        MHD_USE_NO_LISTEN_SOCKET,
                0, NULL, NULL, on_access, s, MHD_OPTION_SIGPIPE_HANDLED_BY_APP, (int)1,
                MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_EXTERNAL_LOGGER,
                mhd_logger, s, MHD_OPTION_CONNECTION_LIMIT, conn_limit,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                pool, MHD_OPTION_END);
}

int sh_server_new(const sh_config *cfg, sh_loop *loop, sh_server **ret, sh_error **err)
{
        sh_server *s = calloc(1, sizeof(*s));
        const union MHD_DaemonInfo *info;

        if (!s)
                return sh_error_make(err, ENOMEM, "out of memory");
        s->cfg = cfg;
        s->loop = loop;
        s->listen_fd = -1;
        if (bind_listen(cfg->listen, &s->listen_fd, s->url, sizeof(s->url), &s->port, err) < 0)
                goto fail;
        s->pod_url = strdup(cfg->pod_url ? cfg->pod_url : s->url);
        if (!s->pod_url) {
                sh_error_make(err, ENOMEM, "out of memory");
                goto fail;
        }
        /* MHD uses sendfile(2) for file responses only when the application handles SIGPIPE
         * (sendfile has no MSG_NOSIGNAL): a no-op handler, not SIG_IGN, which exec'd
         * children would inherit. */
        if (install_sigpipe_handler() < 0) {
                sh_error_make(err, errno, "installing the SIGPIPE handler");
                goto fail;
        }
        /* We accept on the listen socket ourselves (on_listen), so that a flood of
         * connections that never finish their headers closes its own oldest instead of
         * locking everybody out (MHD's per-IP limit would refuse a kubelet probe sharing the
         * attacker's node address). */
        s->d = start_mhd(s, SMALL_POOL, MHD_CONN_LIMIT);
        s->bulk = s->d ? start_mhd(s, BULK_POOL, BULK_CONN_MAX) : NULL;
        if (!s->d || !s->bulk) {
                sh_error_make(err, EIO, "cannot start the HTTP server");
                goto fail;
        }
        info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info) {
                sh_error_make(err, EIO, "no epoll fd from the HTTP server");
                goto fail;
        }
        s->mhd_io = sh_loop_add_io(loop, info->epoll_fd, EPOLLIN, mhd_readable, s);
        info = MHD_get_daemon_info(s->bulk, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info) {
                sh_error_make(err, EIO, "no epoll fd from the HTTP server");
                goto fail;
        }
        s->bulk_io = sh_loop_add_io(loop, info->epoll_fd, EPOLLIN, bulk_readable, s);
        s->listen_io = sh_loop_add_io(loop, s->listen_fd, EPOLLIN, on_listen, s);
        if (!s->mhd_io || !s->bulk_io || !s->listen_io ||
            sh_loop_add_hook(loop, server_hook, s) < 0) {
                sh_error_make(err, errno, "registering the HTTP server in the loop");
                goto fail;
        }
        s->need_run = RUN_ALL;
        *ret = s;
        return 0;
fail:
        sh_server_free(s);
        return -1;
}

static void close_listen(sh_server *s)
{
        sh_loop_del_io(s->loop, s->listen_io);
        s->listen_io = NULL;
        sh_loop_cancel_timer(s->loop, s->accept_t);
        s->accept_t = NULL;
        sh_close(s->listen_fd);
        s->listen_fd = -1;
}

void sh_server_quiesce(sh_server *s)
{
        if (s->quiesced || !s->d)
                return;
        s->quiesced = true;
        close_listen(s);
}

int sh_server_add_surface(sh_server *s, const sh_surface *surface, sh_error **err)
{
        if (s->n_surfaces == SH_SURFACES_MAX)
                return sh_error_make(err, ENOSPC, "more than %d API surfaces", SH_SURFACES_MAX);
        if (!surface->prefix || !surface->error)
                return sh_error_make(err, EINVAL, "the surface '%s' has no prefix or error body",
                                     surface->name ? surface->name : "?");
        s->surfaces[s->n_surfaces++] = *surface;
        return 0;
}

void sh_server_abort_waiting(sh_server *s)
{
        sh_request *r, *next;

        SH_LIST_FOREACH_SAFE(requests, r, next, s->requests) {
                if (r->token && !r->responded)
                        sh_reply_errorf(r, SH_E_UNAVAILABLE, "the host is shutting down");
        }
}

unsigned sh_server_connections(const sh_server *s)
{
        return s->connections;
}

bool sh_server_busy(const sh_server *s)
{
        const sh_request *r;

        /* A request still sending its headers is not in flight: a slow client does not hold
         * up a shutdown (MHD_stop_daemon closes it). */
        SH_LIST_FOREACH(requests, r, s->requests) {
                if (r->started)
                        return true;
        }
        return false;
}

void sh_server_free(sh_server *s)
{
        if (!s)
                return;
        if (s->d) {
                sh_request *r;

                /* MHD_stop_daemon with suspended connections is an API violation: resume all. */
                SH_LIST_FOREACH(requests, r, s->requests) {
                        r->body_paused = false;
                        sh_http_resume(r);
                }
                if (s->bulk)
                        MHD_stop_daemon(s->bulk);
                MHD_stop_daemon(s->d);
        }
        sh_loop_del_io(s->loop, s->mhd_io);
        sh_loop_del_io(s->loop, s->bulk_io);
        close_listen(s);
        sh_loop_cancel_timer(s->loop, s->sweep_t);
        sh_loop_cancel_timer(s->loop, s->files_t);
        while (s->ct.all) { /* MHD_stop_daemon reported every close: only ours are left */
                srv_conn *sc = (srv_conn *)s->ct.all;

                if (sc->peek_io) { /* never handed to MHD: the socket is ours */
                        sh_loop_del_io(s->loop, sc->peek_io);
                        sh_close(sc->c.fd);
                }
                sh_conntrack_remove(&s->ct, &sc->c);
                free(sc);
        }
        free(s->pod_url);
        free(s);
}

const char *sh_server_url(const sh_server *s)
{
        return s->url;
}

const char *sh_server_pod_url(const sh_server *s)
{
        return s->pod_url;
}

uint16_t sh_server_port(const sh_server *s)
{
        return s->port;
}
