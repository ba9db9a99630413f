/* http.h: the HTTP transport: libmicrohttpd in external-epoll mode inside our loop, the book
 * of client connections (slow clients), the framing checks, routing mechanics, per-request
 * state, body sinks, and answers given later or streamed. It knows no endpoint: each API
 * surface (src/native/ today) registers its routes and decides what a path parameter means,
 * what its error bodies look like and which headers each of its responses carries. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sh/buf.h"
#include "sh/config.h"
#include "sh/error.h"
#include "sh/job.h"
#include "sh/list.h"
#include "sh/loop.h"
#include "sh/util.h"
#include "sh/waiter.h"

typedef struct sh_server sh_server;
typedef struct sh_request sh_request;
/* A response being built: libmicrohttpd's own object, which a surface only ever passes to
 * the functions below. */
typedef struct MHD_Response sh_response;
/* A request answered later, or streamed: see "Answers that come later" below. */
typedef struct sh_pending sh_pending;

/* ---- client connections (conntrack.c, pure) --------------------------------------------- */

/* docs/configuration.md "Limits that are not settings". A connection is *waiting* from its
 * accept until its headers are complete, and again between two requests of a keep-alive
 * connection; *active* while a request is past its headers. */
#define SH_HTTP_ACTIVE_MAX         1000  /* active at once; past it non-probes get 503 */
#define SH_HTTP_WAITING_MAX        1024  /* waiting at once; a newcomer closes the oldest */
#define SH_HTTP_WAITING_PER_CLIENT 256   /* waiting from one client address */
#define SH_HTTP_HEADER_TIMEOUT_MS  10000 /* accept (or a keep-alive request line) to headers */

typedef struct sh_conn sh_conn;
struct sh_conn {
        unsigned char addr[16]; /* the client's address, IPv4 as v4-mapped IPv6 */
        int fd;                 /* the socket (MHD's once added: only shut down, never closed) */
        uint64_t since_ms;      /* when it began waiting */
        uint64_t deadline_ms;   /* its headers are due by then; 0: idle between requests */
        bool waiting, active;
        bool evicted;                  /* shut down by us: MHD drops it */
        SH_LIST_FIELDS(sh_conn, wait); /* the waiting list, oldest first */
        SH_LIST_FIELDS(sh_conn, all);  /* every connection */
};

typedef struct sh_conntrack {
        sh_conn *all;
        sh_conn *waiting;      /* oldest first */
        sh_conn *waiting_last; /* its newest: a keep-alive request's end appends in O(1) */
        unsigned n_waiting, n_active;
} sh_conntrack;

/* A new connection: booked, waiting, headers due in SH_HTTP_HEADER_TIMEOUT_MS. */
void sh_conntrack_add(sh_conntrack *t, sh_conn *c, uint64_t now_ms);
/* Closed: out of the book (the caller frees it). */
void sh_conntrack_remove(sh_conntrack *t, sh_conn *c);
void sh_conntrack_wait(sh_conntrack *t, sh_conn *c, uint64_t now_ms, uint64_t deadline_ms);
void sh_conntrack_unwait(sh_conntrack *t, sh_conn *c);
/* A keep-alive connection's next request line arrived: its headers are due from now. */
void sh_conntrack_headers_due(sh_conntrack *t, sh_conn *c, uint64_t now_ms);
/* Headers complete: waiting -> active. */
void sh_conntrack_activate(sh_conntrack *t, sh_conn *c);
/* Request done, connection kept: active -> waiting, idle. */
void sh_conntrack_idle(sh_conntrack *t, sh_conn *c, uint64_t now_ms);
/* The waiting connection to close before a new one from `addr` is let in, or NULL if there
 * is room: over the per-client share that client's oldest, over the total the oldest of
 * all; connections still sending headers go before idle ones. */
sh_conn *sh_conntrack_victim(const sh_conntrack *t, const unsigned char addr[16]);
/* A waiting connection whose header deadline has passed, or NULL. */
sh_conn *sh_conntrack_expired(const sh_conntrack *t, uint64_t now_ms);
bool sh_conntrack_any_due(const sh_conntrack *t);

/* ---- framing (framing.c, pure) ---------------------------------------------------------- */

/* One request header field as libmicrohttpd parsed it. */
typedef struct sh_http_field {
        const char *name;
        const char *value;
} sh_http_field;

/* The framing rules MHD 0.9.75 leaves to us (RFC 9112 section 6): header names are tokens,
 * values hold no control character, at most one Transfer-Encoding and only "chunked" (never
 * in HTTP/1.0), Content-Length all digits and every copy the same, never both. Returns 0, or
 * < 0 with an invalid-kind error in *err. */
int sh_http_check_framing(const sh_http_field *f, size_t n, bool http10, sh_error **err);

/* ---- methods and routes (router.c, pure) ------------------------------------------------ */

enum {
        SH_M_GET = 1 << 0,
        SH_M_HEAD = 1 << 1,
        SH_M_POST = 1 << 2,
        SH_M_PUT = 1 << 3,
        SH_M_DELETE = 1 << 4,
        SH_M_PATCH = 1 << 5,
};
/* The SH_M_* bit of a method name (case-sensitive), 0 for any other method. */
unsigned sh_method_from_string(const char *m);

/* Route flags: the transport's own below SH_ROUTE_SURFACE; a surface gives the bits from
 * SH_ROUTE_SURFACE up meanings of its own (read them in its admit hook). */
enum {
        SH_ROUTE_PROBE = 1u << 0, /* a kubelet probe: answered even past SH_HTTP_ACTIVE_MAX */
        SH_ROUTE_SURFACE = 1u << 16,
};

typedef void (*sh_handler_fn)(sh_request *r);
typedef struct sh_body_sink sh_body_sink;

typedef struct sh_route {
        /* "/sandboxes/{}/file": "{}" is one non-empty segment; "{*}", last, is the rest of the
         * path, empty or not ("/v1/sandboxes/{}/proxy/44772/{*}"). Each is a parameter, in
         * order (sh_request_param). */
        const char *pattern;
        unsigned methods;         /* a set of SH_M_*; GET also serves HEAD */
        const sh_body_sink *body; /* where the body goes; NULL: read and dropped */
        sh_handler_fn fn;         /* runs once the body is in */
        unsigned flags;           /* SH_ROUTE_* and the surface's own */
} sh_route;

#define SH_ROUTE_PARAMS_MAX 4
typedef struct sh_route_params {
        unsigned n;
        const char *p[SH_ROUTE_PARAMS_MAX]; /* into the matched path, not NUL-terminated */
        size_t len[SH_ROUTE_PARAMS_MAX];
} sh_route_params;

#define SH_ALLOW_MAX 64 /* "GET, HEAD, POST, PUT, DELETE, PATCH" fits */

/* Match `path` against a route table. On a match returns the first route whose pattern
 * matches and whose methods hold `method`, its parameters in *params. Otherwise NULL and
 * *ret_kind is SH_E_NO_ROUTE when no pattern matches (whatever the method), or
 * SH_E_METHOD_NOT_ALLOWED with `allow` the methods the path serves ("GET, HEAD, DELETE"). */
const sh_route *sh_route_match(const sh_route *routes, size_t n, const char *path, unsigned method,
                               sh_route_params *params, sh_error_kind *ret_kind,
                               char allow[SH_ALLOW_MAX]);

/* ---- surfaces --------------------------------------------------------------------------- */

/* An API surface: a set of routes under a path prefix, with its own error body and its own
 * headers. The server serves several at once; each request belongs to one. */
typedef struct sh_surface {
        const char *name;   /* for logs */
        const char *prefix; /* the paths it serves ("/", "/v1/"): the longest matching wins */
        const sh_route *routes;
        size_t n_routes;
        void *ctx; /* what its handlers work with (sh_request_ctx) */
        /* Once the route is known, the active bound passed and the query decoded, before
         * any body byte: give the path parameters their meaning (a sandbox lookup), check
         * credentials. 0 to go on, or < 0 having answered. NULL: nothing to do. */
        int (*admit)(sh_request *r);
        /* The response for an error, in this surface's shape (body, extra headers), and its
         * status in *ret_status. Used for every error answered on the surface's paths, the
         * transport's own too (400 framing, 404, 405, 413, 503, ...). NULL return: out of
         * memory (the connection is dropped). Required. */
        sh_response *(*error)(sh_request *r, const sh_error *err, unsigned *ret_status);
        /* Called with every response of the surface before it is queued: per-response
         * headers (a request id). NULL: none. */
        void (*decorate)(sh_request *r, sh_response *resp);
        /* The request has ended: drop what admit kept (sh_request_local). NULL: none. */
        void (*finish)(sh_request *r);
} sh_surface;

#define SH_SURFACES_MAX 4

/* The surface whose prefix is the longest one starting `path`, or NULL (pure). */
const sh_surface *sh_surface_for(const sh_surface *s, size_t n, const char *path);

/* ---- the server ------------------------------------------------------------------------- */

/* Bind the listen socket (cfg->listen) and register in the loop. cfg and loop outlive it. */
int sh_server_new(const sh_config *cfg, sh_loop *loop, sh_server **ret, sh_error **err);
/* Serve a surface too (copied; its routes and ctx must outlive the server). Before the loop
 * runs; at most SH_SURFACES_MAX. */
int sh_server_add_surface(sh_server *s, const sh_surface *surface, sh_error **err);
/* Stop accepting new connections (close the listen socket). Idempotent. */
void sh_server_quiesce(sh_server *s);
/* Answer every request still waiting for its answer with an unavailable error (shutdown). */
void sh_server_abort_waiting(sh_server *s);
unsigned sh_server_connections(const sh_server *s);
/* Whether any request is in flight (idle keep-alive connections and requests still sending
 * their headers do not count). */
bool sh_server_busy(const sh_server *s);
void sh_server_free(sh_server *s);
const char *sh_server_url(const sh_server *s); /* "http://127.0.0.1:PORT" */
const char *sh_server_pod_url(const sh_server *s);
uint16_t sh_server_port(const sh_server *s);

/* ---- one request ------------------------------------------------------------------------ */

sh_server *sh_request_server(const sh_request *r);
/* The ctx of the request's surface. */
void *sh_request_ctx(const sh_request *r);
const sh_route *sh_request_route(const sh_request *r);
const char *sh_request_method(const sh_request *r); /* as the client sent it */
unsigned sh_request_method_id(const sh_request *r); /* its SH_M_* bit, 0: another */
/* The decoded path (may hold any byte but NUL). */
const char *sh_request_path(const sh_request *r);
const sh_query *sh_request_query(const sh_request *r);
/* Route parameter i ("{}" or "{*}" in the pattern), its length in *len; NULL if none. */
const char *sh_request_param(const sh_request *r, unsigned i, size_t *len);
/* A request header's value, or NULL. */
const char *sh_request_header(const sh_request *r, const char *name);
/* Whether the request declared (Content-Length) a body longer than max. */
bool sh_request_declared_over(const sh_request *r, uint64_t max);
/* The raw request target, origin form: the path and query exactly as the client sent them
 * (an absolute-form target's path). */
const char *sh_request_target(const sh_request *r);
/* Each request header field in the order it came, until fn returns false. */
typedef bool (*sh_request_field_fn)(void *data, const char *name, const char *value);
void sh_request_fields(const sh_request *r, sh_request_field_fn fn, void *data);
/* Whether the request has a body: SH_BODY_NONE, SH_BODY_LENGTH (its Content-Length in *len)
 * or SH_BODY_CHUNKED (its length unknown). The framing was checked before any surface ran. */
typedef enum { SH_BODY_NONE, SH_BODY_LENGTH, SH_BODY_CHUNKED } sh_body_kind;
sh_body_kind sh_request_body_kind(const sh_request *r, uint64_t *len);
/* The sandbox id of the access log line (a string that outlives the request), or NULL. */
void sh_request_set_log_id(sh_request *r, const char *id);
const char *sh_request_log_id(const sh_request *r);
/* One pointer of the surface's own for this request (set by admit, dropped by finish). */
void sh_request_set_local(sh_request *r, void *p);
void *sh_request_local(const sh_request *r);

/* ---- bodies: sinks ---------------------------------------------------------------------- */

/* Where a route's body goes as it arrives, instead of special cases in the server: the
 * in-memory buffer below, a file being uploaded, later the parts of a multipart upload. */
struct sh_body_sink {
        /* After admit, before any body byte (also when there is none): set up, *state is the
         * sink's own. 0, or < 0 having answered and freed what it made (the body is then
         * never read and the connection closed after the answer). */
        int (*begin)(sh_request *r, void **state);
        /* The next bytes (all taken). 0; SH_SINK_PAUSE: read no more for now (the connection
         * waits until the sink's owner calls sh_request_body_resume: the bytes a sink holds stay
         * bounded by one call's, whatever the body's size); or < 0 to take no more: the rest of
         * the body is read and dropped, and end decides the answer. */
        int (*data)(sh_request *r, void *state, const char *p, size_t n);
        /* The whole body is in: 0 to run the handler, or < 0 having answered. */
        int (*end)(sh_request *r, void *state);
        /* The request is over (whether end ran or not): free whatever state still holds. */
        void (*abort)(sh_request *r, void *state);
};
#define SH_SINK_PAUSE 1
/* The state of the request's sink (begin's *state), NULL if none. */
void *sh_request_sink_state(const sh_request *r);
/* The body of a sink that paused it (SH_SINK_PAUSE) is read again. No-op otherwise. */
void sh_request_body_resume(sh_request *r);
/* From the surface's admit hook: the request's body goes to `sink` (its begin finds *state
 * set to `state`) and its answer comes from `fn` instead of its route's (a request relayed to
 * another pod). */
void sh_request_divert(sh_request *r, const sh_body_sink *sink, sh_handler_fn fn, void *state);

/* The body kept in memory, at most SH_BODY_BUFFER_MAX bytes: a larger declared body is
 * answered 413 before it is read, a larger chunked one once it is all read. */
#define SH_BODY_BUFFER_MAX (1u << 20)
extern const sh_body_sink sh_body_buffer;
/* The buffered body of a route with sh_body_buffer, NUL-terminated past *len, writable (a
 * parser may rewrite it in place); NULL without. */
char *sh_request_body(sh_request *r, size_t *len);

/* ---- answering -------------------------------------------------------------------------- */

/* Responses. Each returns NULL when out of memory; the reply functions accept NULL (the
 * connection is then dropped). */
sh_response *sh_response_json(cJSON *body); /* consumes body */
sh_response *sh_response_empty(void);
/* `n` bytes of memory (p taken: freed with free(), also when this fails; NULL with n 0). */
sh_response *sh_response_buffer(char *p, size_t n);
/* A file's `size` bytes from fd (taken), sent with sendfile(2), as r's answer. A file that
 * shrinks below what the answer promised (its Content-Length) would leave the connection
 * waiting for bytes that never come: the transport looks at the file while it is sent and
 * closes the connection as soon as it is shorter (the client sees a short body). */
sh_response *sh_response_fd(sh_request *r, int fd, uint64_t size);
/* `size` bytes of fd (taken) from `offset` (a Range), the same way. */
sh_response *sh_response_fd_at(sh_request *r, int fd, uint64_t offset, uint64_t size);
/* 0, or -1 when the header could not be added. */
int sh_response_header(sh_response *resp, const char *name, const char *value);
/* A response that will not be given after all (accepts NULL). */
void sh_response_free(sh_response *resp);
/* A download as r's answer: fd's `size` bytes (fd taken), as the request's Range asks (one range,
 * sh/range.h): 200 the whole file, 206 the range with its Content-Range; both with Accept-Ranges,
 * `type` and the Content-Disposition of `name` (sh_content_disposition). -1 when no byte of the
 * file is in the range: fd is closed, nothing is answered, and cr (SH_RANGE_HEADER_MAX bytes)
 * holds the Content-Range of the caller's 416. */
int sh_reply_file(sh_request *r, int fd, uint64_t size, const char *type, const char *name,
                  char *cr);

/* Each request is answered exactly once, in its handler or later from the loop (the waiting
 * connection is then resumed); a second answer is dropped. resp and body are consumed. */
void sh_reply(sh_request *r, unsigned status, sh_response *resp);
void sh_reply_json(sh_request *r, unsigned status, cJSON *body);
void sh_reply_empty(sh_request *r, unsigned status);
/* An empty answer with exactly one "Content-Length: 0", whatever the status: libmicrohttpd
 * adds the header itself to an empty 200 or 202 but leaves it out of a 204 (RFC 9110 allows
 * either), and some clients (llhttp, behind OpenSandbox's SDK) need it there too. */
void sh_reply_empty_sized(sh_request *r, unsigned status);
sh_response *sh_response_empty_sized(unsigned status); /* its response, to hold or give */
/* An error in the shape of the request's surface (its error hook); errors of the internal
 * kinds are logged. */
void sh_reply_error(sh_request *r, const sh_error *err);
void sh_reply_errorf(sh_request *r, sh_error_kind kind, const char *fmt, ...) _printf_(3, 4);
bool sh_request_answered(const sh_request *r);

/* ---- answers that come later, or in pieces: the pending token --------------------------- */

/* The one way a handler answers after it returns. A job (a persist, a create, an exec
 * stream) holds a token; the request holds it too until it ends. The job answers through
 * sh_pending_request when it completes; if the request has ended first (the client left, or
 * the host shut down), that is NULL, completing is a no-op, and `gone` has already told the
 * job it can stop. Either order works; nothing else of the job needs to know. */
typedef struct sh_pending_ops {
        /* The request ended while the token lived: stop what is no longer wanted. NULL:
         * nothing to do. */
        void (*gone)(void *data);
        /* The token's last reference went (the request's, the job's, a stream's). NULL:
         * nothing to free. */
        void (*release)(void *data);
        /* A streamed body (sh_response_stream): up to max bytes into out. Returns the number
         * written (> 0); 0 when there is nothing yet (the connection waits for
         * sh_pending_wake); SH_STREAM_END at the end; SH_STREAM_CUT to cut the connection (a
         * client then sees a short body, never a well-formed wrong one). */
        ssize_t (*read)(void *data, char *out, size_t max);
} sh_pending_ops;
#define SH_STREAM_END (-1)
#define SH_STREAM_CUT (-2)

/* A token for r (at most one per request), with one reference for the caller. If the
 * handler returns without answering, the connection waits (suspended) for the answer. ops
 * must outlive the token; data is the job's. NULL when out of memory. */
sh_pending *sh_request_wait(sh_request *r, const sh_pending_ops *ops, void *data);
/* The request still waiting, or NULL once it has ended. */
sh_request *sh_pending_request(const sh_pending *p);
sh_pending *sh_pending_ref(sh_pending *p);
/* Drop a reference (accepts NULL). */
void sh_pending_release(sh_pending *p);
/* A stream has something again (bytes or its end): resume the connection if it waits. */
void sh_pending_wake(sh_pending *p);
/* A response whose body comes from the token's ops->read, up to `block` bytes a call; it
 * holds a reference to the token. */
sh_response *sh_response_stream(sh_pending *p, size_t block);
/* The same with a known length (its Content-Length; SH_SIZE_UNKNOWN: none, as above). A HEAD
 * request gets the head alone. */
#define SH_SIZE_UNKNOWN UINT64_MAX
sh_response *sh_response_stream_sized(sh_pending *p, size_t block, uint64_t size);

/* A body of the bytes [from, end) of something read by offset (a log in its file), read at
 * most `step` bytes at a time as the client takes them: the daemon holds one step (none and a
 * Content-Length of 0 when the range is empty). A read that
 * gives nothing (<= 0: the bytes are gone) cuts the connection: a short body, never a wrong
 * one. ops->release(data) once it is no longer read, also when this fails (NULL: out of
 * memory). */
typedef struct sh_read_at_ops {
        ssize_t (*read_at)(void *data, uint64_t off, char *out, size_t n);
        void (*release)(void *data);
} sh_read_at_ops;
sh_response *sh_response_read_at(sh_request *r, uint64_t from, uint64_t end, size_t step,
                                 const sh_read_at_ops *ops, void *data);

/* A streamed body made in slices, for ops->read: the job adds bytes to a buffer one bounded
 * slice per read of the transport, so bytes are made only as fast as the client takes them
 * (a client that does not read stops the job; the daemon holds one block and about one
 * slice's bytes for it), and a slice that made nothing (a walk skipping entries) lets the
 * loop run before the next one. The job embeds one; its ops->read calls
 * sh_sliced_stream_read, its gone sh_sliced_stream_stop, its release sh_sliced_stream_done. */
typedef struct sh_sliced_stream {
        sh_buf b;        /* made, not yet handed out */
        bool ended;      /* the job made its last bytes */
        sh_loop *loop;   /* set by the job */
        sh_pending *tok; /* set by the job; borrowed: the request's and the response's
                          * references keep it */
        sh_timer *t;     /* the wake after a slice that made nothing */
} sh_sliced_stream;
/* One slice of the job: append about `want` bytes to b (one item more is fine), in bounded
 * time; at the end set *ended. 0, or SH_STREAM_CUT to cut the connection. */
typedef int (*sh_slice_fn)(void *data, sh_buf *b, size_t want, bool *ended);
ssize_t sh_sliced_stream_read(sh_sliced_stream *ss, char *out, size_t max, sh_slice_fn fn,
                              void *data);
void sh_sliced_stream_stop(sh_sliced_stream *ss); /* no more wakes */
void sh_sliced_stream_done(sh_sliced_stream *ss); /* and free the buffer */

/* A streamed body fed by a producer that does not wait for the client (an exec's output, a
 * sampler), http/stream.c: the producer queues whole frames as they come (push, or append to
 * the queue and say so: an encoder writes into it), the client takes them as fast as it
 * reads, the stream's end is read after its last byte. Backpressure: past `high` unread bytes
 * the producer is told to stop, back under `low` to go on, so memory never grows with a client
 * that does not read. An optional keepalive frame after `keepalive_ms` without a push (the
 * write that tells a vanished client is gone). The stream takes the request's pending token;
 * the producer gets one reference (sh_queued_stream_release), the request and the response
 * hold theirs, and the last one frees the stream (ops->release). */
typedef struct sh_queued_stream sh_queued_stream;
typedef struct sh_queued_stream_ops {
        /* Backpressure: `stop` when more than opts->high bytes are unread (the high mark);
         * then not `stop` once back under opts->low (the low mark), or the client gone
         * meanwhile: go on. NULL: no marks. */
        void (*backpressure)(void *data, bool stop);
        /* Append one keepalive frame to q: 0, or < 0 for none this time. NULL: none. */
        int (*keepalive)(void *data, sh_buf *q);
        /* The request ended (the client left, or it read the end): bytes pushed from now on
         * are dropped. Called once, before the backpressure that lets a stopped producer go.
         * NULL. */
        void (*gone)(void *data);
        /* The stream is freed (its last reference went). NULL: nothing to free. */
        void (*release)(void *data);
} sh_queued_stream_ops;
typedef struct sh_queued_stream_opts {
        size_t high, low;      /* the marks, in unread bytes (high 0: none) */
        uint64_t keepalive_ms; /* silence before a keepalive frame (0: none) */
        size_t block;          /* the most one read of the transport takes */
} sh_queued_stream_opts;

/* A stream for r (it takes r's token: at most one per request); the caller's reference. NULL
 * when out of memory or r has a token. ops must outlive the stream. */
sh_queued_stream *sh_queued_stream_new(sh_request *r, sh_loop *loop,
                                       const sh_queued_stream_ops *ops,
                                       const sh_queued_stream_opts *o, void *data);
/* The request, or NULL once it has ended: to answer otherwise (an error) before the stream's
 * response is made. */
sh_request *sh_queued_stream_request(const sh_queued_stream *s);
/* The streamed response (once; the caller adds its headers and sh_reply's it): from now on a
 * push wakes the connection, and the keepalive counts. NULL when out of memory. */
sh_response *sh_queued_stream_response(sh_queued_stream *s);
/* The same with a known length (SH_SIZE_UNKNOWN: none): its Content-Length is sent, and the
 * producer pushes exactly that many bytes (fewer: cut the stream). */
sh_response *sh_queued_stream_response_sized(sh_queued_stream *s, uint64_t size);
/* Its request answered 200 with that response and these headers (to one whose name is NULL):
 * 0, also when the request has ended; -ENOMEM when the response cannot be made (the request
 * still waits for its answer). */
typedef struct sh_header {
        const char *name, *value;
} sh_header;
int sh_queued_stream_reply(sh_queued_stream *s, const sh_header *headers);
/* The queue, for an encoder that appends whole frames to it; then sh_queued_stream_pushed. */
sh_buf *sh_queued_stream_queue(sh_queued_stream *s);
/* Bytes were appended (maybe none: it still counts against the keepalive's silence): the
 * high mark is looked at, the connection woken. */
void sh_queued_stream_pushed(sh_queued_stream *s);
/* Append n bytes and say so: 0 or -ENOMEM. */
int sh_queued_stream_push(sh_queued_stream *s, const void *p, size_t n);
/* No more bytes: the client reads the end after what is queued. */
void sh_queued_stream_end(sh_queued_stream *s);
/* No more bytes, and the stream is cut after what is queued: the client sees a short body
 * (the producer failed), never a well-formed wrong one. */
void sh_queued_stream_cut(sh_queued_stream *s);
/* The end, and the caller's reference goes (accepts NULL). */
void sh_queued_stream_close(sh_queued_stream *s);
size_t sh_queued_stream_unread(const sh_queued_stream *s);
/* The caller's reference goes (accepts NULL); queued bytes are still read to the end. */
void sh_queued_stream_release(sh_queued_stream *s);

/* ---- an answer made by a job of the loop (sh/job.h) -------------------------------------------
 *
 * A job that answers a request (a walk, a listing, a removal, a request of many paths): the
 * request waits on the job's token while the job's slices run from the loop, and the job answers
 * from a step (sh_reply* on sh_request_job_request, then sh_request_job_done; or
 * sh_request_job_whole, sh_request_job_stream). A streamed answer goes on one slice of the same
 * job each time the transport wants bytes: the steps append to rj->ss.b, pause
 * (SH_LOOP_JOB_PAUSE) once rj->want bytes are there, set rj->ss.ended at the end, or rj->cut to
 * cut the stream. The owner embeds one as its first member (the job's steps are given it) and
 * sets rj->job.steps and .ns where it wants another budget than the default; its pending ops'
 * gone is sh_request_job_op_gone, read sh_request_job_op_read, release calls
 * sh_request_job_free. */
typedef struct sh_request_job {
        sh_loop_job job;
        sh_pending *tok;     /* the job's reference, until it answered */
        sh_sliced_stream ss; /* a streamed answer's */
        size_t want;         /* what the stream's slice is asked for */
        bool cut;            /* the stream is cut */
        const char *what;    /* "walk": for the 500 when a slice cannot be scheduled */
        sh_waiter held;      /* an answer that waits (sh_request_job_hold): told, it is given */
        unsigned held_status;
        sh_response *held_resp;
} sh_request_job;

/* The request waits on a token of ops for the job (data: rj; step: its steps). false: no token
 * could be had (answered 500): the caller frees the job. */
bool sh_request_job_wait(sh_request_job *rj, sh_request *r, sh_loop *loop,
                         const sh_pending_ops *ops, int (*step)(void *data), const char *what);
/* Its first slice now, the rest from the loop until a step says SH_LOOP_JOB_DONE. */
void sh_request_job_run(sh_request_job *rj);
/* sh_request_job_wait, then its first slice now. */
bool sh_request_job_start(sh_request_job *rj, sh_request *r, sh_loop *loop,
                          const sh_pending_ops *ops, int (*step)(void *data), const char *what);
/* The request waiting, or NULL once it has ended (or the job answered). */
sh_request *sh_request_job_request(const sh_request_job *rj);
/* The job answered: its reference goes. Returns SH_LOOP_JOB_DONE, for the step that answered. */
int sh_request_job_done(sh_request_job *rj);
/* Answer 200 with what rj->ss.b holds, whole (its Content-Length; `type` its Content-Type), and
 * done. Returns SH_LOOP_JOB_DONE. */
int sh_request_job_whole(sh_request_job *rj, const char *type);
/* Answer 200 with a stream of the job's slices (what rj->ss.b holds first), `block` bytes at a
 * time, and done (the request's and the response's references keep the token). Returns
 * SH_LOOP_JOB_DONE. */
int sh_request_job_stream(sh_request_job *rj, size_t block, const char *type);
/* ops->gone: no slice runs any more, no wake comes. */
void sh_request_job_gone(sh_request_job *rj);
/* ops->read of a streamed job: one slice of the job when what it made is handed out. */
ssize_t sh_request_job_read(sh_request_job *rj, char *out, size_t max);
/* The two as pending ops themselves (data: the job, the owner's first member). */
void sh_request_job_op_gone(void *data);
ssize_t sh_request_job_op_read(void *data, char *out, size_t max);
/* ops->release: what rj holds (the stream's buffer, an answer held). */
void sh_request_job_free(sh_request_job *rj);

/* An answer made as a body by a job's steps (sh_body_job: the /v1 listings, searches and
 * line-mode downloads). While the request waits, what the steps make is kept: a body that ends
 * within `head` bytes is sent whole (its Content-Length). Past the head, a body that cannot be
 * made again is streamed on from where it is (sh_request_job_stream, `block` bytes a read); one
 * that can (`again`) is first made to its end only counting, nothing kept (the steps check their
 * bounds and may still refuse, before a byte is sent), then made again from its start as the
 * stream. A failure before the answer is answered by `failed`; after it, the stream is cut (a
 * client sees a short body, never a well-formed wrong one) and `failed` only says why. The owner
 * embeds one as its first member; its pending ops are sh_request_job's (gone, read), its release
 * calls sh_body_job_free. */
typedef struct sh_body_job_ops {
        /* One step: what it makes appended to b (a bounded piece: an entry, a read's lines); 1
         * more, 0 the body is over, < 0 it failed. */
        int (*step)(void *data, sh_buf *b);
        /* The body again from its start, what opens it appended to b: 0, or < 0 failed. NULL: a
         * body that cannot be made again. */
        int (*again)(void *data, sh_buf *b);
        /* A step or `again` failed with k: answered on r when nothing was sent yet (sent false),
         * else only logged (the stream is cut). */
        void (*failed)(void *data, sh_request *r, bool sent, int k);
} sh_body_job_ops;
typedef struct sh_body_job {
        sh_request_job rj; /* first */
        const sh_body_job_ops *ops;
        size_t head, block;
        const char *type; /* the answer's Content-Type */
        unsigned phase;   /* private: kept, counted, streamed */
        sh_buf count;     /* private: the counting pass's piece */
} sh_body_job;

/* The request waits on a token of ops (data: bj) for the body of bops (what opens it may already
 * be in bj->rj.ss.b), and its first slice runs now. false: no token could be had (answered 500):
 * the caller frees bj. */
bool sh_body_job_start(sh_body_job *bj, sh_request *r, sh_loop *loop, const sh_pending_ops *ops,
                       const sh_body_job_ops *bops, const char *what);
void sh_body_job_free(sh_body_job *bj);

/* An answer that waits (sh/waiter.h): the job's answer (status, resp taken) held until the waiter
 * returned is told, then given, and the job done. The caller hands the waiter to what the answer
 * waits for (its sandbox's trash emptied: sh_manager_trash_wait), or tells it itself when there
 * is nothing to wait for; the token's gone (sh_request_job_gone) cancels the wait. The step that
 * holds its answer returns SH_LOOP_JOB_DONE. */
sh_waiter *sh_request_job_hold(sh_request_job *rj, unsigned status, sh_response *resp);
/* The same for a handler, its answer held by a job of no steps: NULL when none could be had
 * (the answer is given now). */
sh_waiter *sh_request_hold(sh_request *r, unsigned status, sh_response *resp);
