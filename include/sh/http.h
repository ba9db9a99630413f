/* http.h: the HTTP front end: libmicrohttpd in external-epoll mode inside our loop, the route
 * table, per-request state, and the response helpers that map sh_error to the contract's
 * error body (CONTRACT.md section 8). */
#pragma once

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#include "sh/buf.h"
#include "sh/capability.h"
#include "sh/config.h"
#include "sh/error.h"
#include "sh/fsops.h"
#include "sh/list.h"
#include "sh/loop.h"
#include "sh/sandbox.h"
#include "sh/util.h"

#define SH_JSON_BODY_MAX (1u << 20) /* largest JSON request body */

typedef struct sh_server sh_server;

/* Client connections (conntrack.c; docs/configuration.md "Limits that are not settings"). A
 * connection is *waiting* from its accept until its headers are complete, and again between
 * two requests of a keep-alive connection; *active* while a request is past its headers. */
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
        sh_conn *waiting; /* oldest first */
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
typedef struct sh_request sh_request;

enum {
        SH_M_GET = 1 << 0,
        SH_M_HEAD = 1 << 1,
        SH_M_POST = 1 << 2,
        SH_M_PUT = 1 << 3,
        SH_M_DELETE = 1 << 4,
};

typedef enum { SH_BODY_NONE, SH_BODY_JSON, SH_BODY_UPLOAD } sh_body_kind;

typedef void (*sh_handler_fn)(sh_request *r);

typedef struct sh_route {
        const char *pattern; /* e.g. "/sandboxes/{}/file"; "{}" is one non-empty segment */
        unsigned method;     /* one SH_M_* (GET routes also serve HEAD) */
        sh_body_kind body;
        bool needs_sandbox; /* look up the id before the handler runs: 404 SandboxNotFound */
        sh_handler_fn fn;
        bool probe; /* a kubelet probe: answered even past SH_HTTP_ACTIVE_MAX */
} sh_route;

/* Route lookup (pure). On a match returns the route and points *ret_id and *ret_id_len at the
 * id segment in `path` (if the pattern has one). Otherwise NULL and *ret_status is 404, or
 * 405 with *ret_allow the methods the path serves ("GET, HEAD"; static). */
const sh_route *sh_route_match(const char *path, unsigned method, const char **ret_id,
                               size_t *ret_id_len, int *ret_status, const char **ret_allow);
unsigned sh_method_from_string(const char *m);

struct sh_request {
        sh_server *srv;
        struct MHD_Connection *conn;
        char *uri; /* the raw request target */
        const char *method;
        unsigned m; /* SH_M_* */
        char *path; /* the decoded path part of uri */
        sh_query query;
        const sh_route *route;
        sh_sandbox *sb;     /* a reference when route->needs_sandbox */
        const char *log_id; /* sandbox id for the access log, or NULL */

        /* body */
        sh_buf body; /* JSON bodies (NUL-terminated past len) */
        bool body_too_large;
        bool body_failed; /* upload write failed: err holds why */
        sh_error *body_err;
        sh_fs_upload *upload;
        char *upload_path; /* normalised target */

        /* lifecycle */
        bool started;    /* first access-handler call done */
        bool in_handler; /* inside the access handler (responses queue directly) */
        bool suspended;
        bool responded;
        bool no_response; /* out of memory making the response: the connection is dropped */
        bool close;       /* the answer says "Connection: close" (the framing is not trusted) */
        struct MHD_Response *pending; /* queued at the next handler call after resume */
        unsigned pending_status;
        int status;
        uint64_t start_ns;

        /* handler state, freed when the request ends */
        void *hstate;
        void (*hstate_free)(sh_request *r, bool aborted);

        sh_request *prev, *next;
};

/* The services the handlers work with, built by the daemon (its composition root). */
typedef struct sh_services {
        sh_manager *mgr;
        struct sh_persister *persister;
        struct sh_tools *tools;
} sh_services;

/* Server life. `svc` must outlive the server. */
int sh_server_new(const sh_config *cfg, sh_loop *loop, const sh_services *svc, sh_server **ret,
                  sh_error **err);
/* Stop accepting new connections (close the listen socket). Idempotent. */
void sh_server_quiesce(sh_server *s);
/* Resume every suspended request with an error (shutdown). */
void sh_server_abort_suspended(sh_server *s);
unsigned sh_server_connections(const sh_server *s);
/* Whether any request is in flight (idle keep-alive connections and requests still sending
 * their headers do not count). */
bool sh_server_busy(const sh_server *s);
void sh_server_free(sh_server *s);
const char *sh_server_url(const sh_server *s); /* "http://127.0.0.1:PORT" */
const char *sh_server_pod_url(const sh_server *s);
uint16_t sh_server_port(const sh_server *s);
const sh_config *sh_server_config(const sh_server *s);
sh_manager *sh_server_manager(const sh_server *s);
struct sh_persister *sh_server_persister(const sh_server *s);
struct sh_tools *sh_server_tools(const sh_server *s);
sh_loop *sh_server_loop(const sh_server *s);
/* Ask the loop to run MHD before its next sleep (after a resume). */
void sh_server_kick(sh_server *s);

/* Responding (each request answers exactly once). Works in the handler or later (then the
 * connection is resumed). JSON bodies are consumed (cJSON_Delete) by the call. */
void sh_reply(sh_request *r, unsigned status, struct MHD_Response *resp);
void sh_reply_json(sh_request *r, unsigned status, cJSON *body);
void sh_reply_empty(sh_request *r, unsigned status);
void sh_reply_errorf(sh_request *r, sh_error_kind kind, const char *fmt, ...) _printf_(3, 4);
void sh_reply_error(sh_request *r, const sh_error *err);
/* Suspend the connection until the handler replies from the loop. */
void sh_request_suspend(sh_request *r);

/* One request header field as libmicrohttpd parsed it. */
typedef struct sh_http_field {
        const char *name;
        const char *value;
} sh_http_field;

/* The framing rules MHD 0.9.75 leaves to us (RFC 9112 section 6; framing.c, pure): header
 * names are tokens, values hold no control character, at most one Transfer-Encoding and only
 * "chunked" (never in HTTP/1.0), Content-Length all digits and every copy the same, never
 * both. Returns 0, or < 0 with a 400 BadRequest in *err. */
int sh_http_check_framing(const sh_http_field *f, size_t n, bool http10, sh_error **err);

/* Request helpers. */
/* Parse the JSON body (empty/whitespace = {}); must be an object. 400 replied on failure. */
cJSON *sh_request_json(sh_request *r);
/* The query parameter `name` normalised as a workspace path; NULL after replying 400.
 * `optional`: absent or empty means the root (""). */
char *sh_request_path_param(sh_request *r, const char *name, bool optional);

/* Route handlers (api_*.c). */
void sh_api_create(sh_request *r);
void sh_api_delete(sh_request *r);
void sh_api_exec(sh_request *r);
void sh_api_persist(sh_request *r);
void sh_api_upload(sh_request *r);
void sh_api_download(sh_request *r);
void sh_api_exists(sh_request *r);
void sh_api_disk_usage(sh_request *r);
void sh_api_size(sh_request *r);
void sh_api_mark_ready(sh_request *r);
void sh_api_ready(sh_request *r);
void sh_api_walk(sh_request *r);
void sh_api_delete_file(sh_request *r);
void sh_api_mkdir(sh_request *r);
void sh_api_delete_dir(sh_request *r);
void sh_api_rename(sh_request *r);
void sh_api_tools_resolve(sh_request *r);
void sh_api_healthz(sh_request *r);
void sh_api_readyz(sh_request *r);
void sh_api_drain(sh_request *r);

/* Upload streaming hooks (api_files.c), called by the request layer as the body arrives. */
int sh_api_upload_begin(sh_request *r); /* 0, or replied */
void sh_api_upload_data(sh_request *r, const char *data, size_t len);
