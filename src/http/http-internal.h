/* http-internal.h: what the transport's files (server.c, request.c, pending.c) share: the
 * request, the token, and the server's entry points for them. Surfaces see none of it. */
#pragma once

#include <microhttpd.h>

#include "sh/buf.h"
#include "sh/http.h"

struct sh_pending {
        unsigned refs; /* the request's (until it ends), the caller's, each stream's */
        sh_request *r; /* NULL once the request has ended */
        const sh_pending_ops *ops;
        void *data;
};

/* A file answer being sent (sh_response_fd): its fd (MHD's, alive as long as the request)
 * and the offset its promised bytes end at. */
typedef struct sh_http_file {
        struct MHD_Response *resp; /* made for the request, until it answers */
        int fd;
        uint64_t end;
        bool watched; /* the answer: looked at until the request ends */
} sh_http_file;

struct sh_request {
        sh_server *srv;
        struct MHD_Connection *conn;
        char *uri; /* the raw request target */
        const char *method;
        unsigned m; /* SH_M_* */
        char *path; /* the decoded path part of uri */
        sh_query query;
        const sh_surface *surface; /* the surface the path belongs to */
        const sh_route *route;
        sh_route_params params;
        const char *log_id; /* sandbox id for the access log, or NULL */
        void *local;        /* the surface's (sh_request_set_local) */

        /* body */
        const sh_body_sink *sink; /* the route's (or the diverted one), once begun */
        void *sink_state;
        bool sink_refused;               /* data said no more: the rest is dropped */
        bool body_paused;                /* data said SH_SINK_PAUSE: suspended until resumed */
        const sh_body_sink *divert_sink; /* sh_request_divert: instead of the route's */
        sh_handler_fn divert_fn;
        void *divert_state;

        /* lifecycle */
        bool started;    /* first access-handler call done */
        bool in_handler; /* inside the access handler (responses queue directly) */
        bool suspended;  /* MHD_suspend_connection'd */
        bool responded;
        bool no_response;  /* out of memory making the response: the connection is dropped */
        bool close;        /* the answer says "Connection: close" (the framing is not trusted) */
        sh_pending *token; /* the request's reference to its token, if any */
        struct MHD_Response *pending; /* queued at the next handler call after resume */
        unsigned pending_status;
        sh_http_file file; /* a file answer */
        int status;
        uint64_t start_ns;

        SH_LIST_FIELDS(sh_request, requests); /* the server's requests */
};

/* Suspend the connection until sh_http_resume (a stream with nothing to send, a request
 * waiting for its answer). Idempotent. */
void sh_http_suspend(sh_request *r);
/* Resume it and have MHD run before the loop sleeps. No-op unless suspended, and while its
 * body is paused by its sink (sh_request_body_resume resumes that). */
void sh_http_resume(sh_request *r);

/* r answers with its file (r->file): close its connection when the file gets shorter than
 * the answer promised. */
void sh_http_watch_file(sh_request *r);

/* Answer err through the request's surface; `log`: a 5xx is logged; `allow`: the Allow
 * header of a 405. */
void sh_http_reply_error(sh_request *r, const sh_error *err, bool log, const char *allow);

/* pending.c: the request has ended: its token learns it (gone), and the request's reference
 * goes. */
void sh_pending_request_ended(sh_request *r);
