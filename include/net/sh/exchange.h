/* exchange.h: one HTTP exchange streamed both ways on the loop (libcurl multi, as sh/fetch.h's
 * fetches): any method, the caller's request headers, the request body pulled from the caller
 * as it comes (a pull may say "nothing yet": the upload waits until the caller resumes it), the
 * answer's head delivered once, its body pushed to the caller as it comes (the caller may stop
 * the receiving: backpressure reaches the peer through TCP), and an end. Nothing is followed
 * (no redirect), nothing decoded (no content decoding; chunked framing is undone), no
 * "Expect: 100-continue". TCP keepalive is on (a peer that vanishes without a FIN is noticed),
 * connections to a peer are kept and reused. The relay of a request to a peer pod
 * (sh/relay.h) is its user. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sh/error.h"
#include "sh/loop.h"

typedef struct sh_exchanger sh_exchanger;
typedef struct sh_exchange sh_exchange;

#define SH_EXCHANGE_HEAD_MAX   65536u /* bytes of the answer's head at most */
#define SH_EXCHANGE_REASON_MAX 256u

/* The answer's head, valid during the head callback only. */
typedef struct sh_exchange_field {
        const char *name, *value;
} sh_exchange_field;
typedef struct sh_exchange_head {
        long status;
        const sh_exchange_field *fields; /* in the order they came, n of them */
        size_t n;
        int64_t length; /* its Content-Length, -1 when none (chunked, or until the close) */
} sh_exchange_head;

typedef enum {
        SH_EXCHANGE_OK,      /* the whole answer came */
        SH_EXCHANGE_NO_HEAD, /* failed before its head (connect, timeout, a broken answer) */
        SH_EXCHANGE_CUT,     /* failed after its head: the body is short */
} sh_exchange_end;

typedef struct sh_exchange_result {
        sh_exchange_end end;
        bool timed_out; /* NO_HEAD because the connect or the head's timeout ran out */
        char reason[SH_EXCHANGE_REASON_MAX];
} sh_exchange_result;

#define SH_EXCHANGE_PAUSE ((ssize_t)-1) /* send: nothing now, sh_exchange_send_resume later */
#define SH_EXCHANGE_ABORT ((ssize_t)-2) /* send: the body cannot be had: the exchange fails */

/* The caller's side. Each runs from the loop, inside libcurl's callbacks except `done`: they
 * must not cancel the exchange (return an abort instead) nor free what it uses. */
typedef struct sh_exchange_ops {
        /* The next bytes of the request body into buf (at most max): > 0, 0 at its end, or
         * SH_EXCHANGE_PAUSE / SH_EXCHANGE_ABORT. NULL: no body. */
        ssize_t (*send)(void *data, char *buf, size_t max);
        /* The answer's head (a 1xx is not one): 0, or < 0 to abort the exchange. */
        int (*head)(void *data, const sh_exchange_head *h);
        /* The next bytes of its body: 0, or < 0 to abort. To stop receiving, call
         * sh_exchange_recv_pause (from here too). */
        int (*body)(void *data, const char *p, size_t n);
        /* The end, once (never before sh_exchange_start returned, never after a cancel); the
         * exchange is freed after it returns. */
        void (*done)(void *data, const sh_exchange_result *res);
} sh_exchange_ops;

typedef struct sh_exchange_opts {
        const char *url;            /* "http://host:port/path?query" */
        const char *method;         /* as sent: "GET", "HEAD" (no body read), "PATCH", ... */
        const char *const *headers; /* "Name: value", NULL-terminated (no CR, LF); NULL: none.
                                     * Host and Content-Length are libcurl's; no Accept or
                                     * Content-Type is added when the caller gives none */
        bool body;                  /* a request body is sent (ops->send) */
        int64_t body_length;        /* its length, -1: unknown (sent chunked) */
        uint64_t connect_timeout_ms;
        uint64_t head_timeout_ms; /* the peer's silence before the answer's head: counted from
                                   * the start, from each piece of the request body it took,
                                   * from the body's end (never while the body waits on the
                                   * caller); 0: none */
} sh_exchange_opts;

/* An exchanger on the loop: at most `max_conns` connections at once (more exchanges wait for
 * one inside libcurl). */
int sh_exchanger_new(sh_loop *loop, unsigned max_conns, sh_exchanger **ret, sh_error **err);
/* Cancels every exchange in flight without their done; `loop_alive` false: the loop is already
 * gone. Accepts NULL. */
void sh_exchanger_free(sh_exchanger *e, bool loop_alive);

/* Start one; NULL with *err when it cannot (out of memory, a header that would split the
 * request). */
sh_exchange *sh_exchange_start(sh_exchanger *e, const sh_exchange_opts *o,
                               const sh_exchange_ops *ops, void *data, sh_error **err);
/* Stop it now, done never called: from the loop, never from inside its callbacks. Accepts
 * NULL. */
void sh_exchange_cancel(sh_exchange *x);
/* The request body has bytes again after a SH_EXCHANGE_PAUSE: pulled from the loop, soon. */
void sh_exchange_send_resume(sh_exchange *x);
/* Stop (true) or go on (false) receiving the answer's body; going on takes effect from the
 * loop, soon (never inside this call). Allowed inside its callbacks. */
void sh_exchange_recv_pause(sh_exchange *x, bool pause);
