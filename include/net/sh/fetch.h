/* fetch.h: HTTP(S) GETs driven by the daemon's loop (libcurl multi): the one HTTP client of
 * the tool resolver (tools/) and the image registry client (images/). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/error.h"
#include "sh/loop.h"

#define SH_FETCH_REASON_MAX         512u
#define SH_FETCH_CONNECT_TIMEOUT_MS 5000u  /* default: reaching the server */
#define SH_FETCH_TOTAL_TIMEOUT_MS   60000u /* default: the whole fetch, redirects included */
#define SH_FETCH_MAX_REDIRECTS      5u     /* followed by the fetch itself (not raw fetches) */
#define SH_FETCH_ERROR_BODY_MAX     65536u /* kept of a raw fetch's answer that is no 2xx */
#define SH_FETCH_HEADER_MAX         8192u  /* bytes of one request header line */

typedef struct sh_fetcher sh_fetcher;
typedef struct sh_fetch sh_fetch;

typedef enum {
        SH_FETCH_OK,          /* a 2xx answer with its whole body */
        SH_FETCH_UNREACHABLE, /* connection error, timeout, HTTP 5xx/408/429: try later */
        SH_FETCH_REFUSED,     /* the server answered no, or the answer breaks a rule */
        SH_FETCH_HTTP,        /* a raw fetch's answer other than 2xx: see `status` */
} sh_fetch_kind;

/* Where plain http may go (https goes anywhere, with the rule's CAs). */
typedef enum {
        SH_FETCH_HTTP_LOOPBACK, /* to a loopback host only (127.0.0.0/8, [::1], localhost) */
        SH_FETCH_HTTP_ANY,      /* to any host */
        SH_FETCH_HTTP_LISTED,   /* to the rule's listed hosts only */
} sh_fetch_http;

/* The certificate authorities TLS trusts: the system's (libcurl's default bundle) and one
 * extra PEM file of the operator's, loaded once (at start: it reads files). */
typedef struct sh_fetch_ca sh_fetch_ca;

/* Load the system's bundle plus `extra_pem` (a file of one or more PEM certificates; it must
 * hold at least one). -errno with *err naming the file. */
int sh_fetch_ca_load(const char *extra_pem, sh_fetch_ca **ret, sh_error **err);
void sh_fetch_ca_free(sh_fetch_ca *ca); /* accepts NULL */

/* A transport rule, checked before anything connects: for the first URL and for every
 * redirect the fetch follows, http and https only, plain http only where `http` says.
 * The caller keeps it (and what it points to) alive while fetches use it. */
typedef struct sh_fetch_rule {
        sh_fetch_http http;
        char *const *http_hosts; /* LISTED: NULL-terminated "host" (any port) or "host:port"
                                  * ("[v6]:port"), compared without case */
        const sh_fetch_ca *ca;   /* NULL: the system's CAs */
        const char *http_hint;   /* ends a refusal of plain http: what would allow it */
} sh_fetch_rule;

/* Whether `url` passes `rule`: 0, or -1 with a reason that names `what` (the artifact). */
int sh_fetch_rule_check(const sh_fetch_rule *rule, const char *url, const char *what, char *reason,
                        size_t reason_len);
/* The redirect rule, the n-th redirect (from 1) of a fetch of `from` to `to`: 0 when it may be
 * followed, with *keep_headers whether the caller's headers (credentials) may go along (only
 * to the same origin: scheme, host and port); -1 with a reason when it may not (more than
 * SH_FETCH_MAX_REDIRECTS, or `to` breaks the transport rule). Pure. */
int sh_fetch_redirect_check(const sh_fetch_rule *rule, const char *from, const char *to, unsigned n,
                            const char *what, bool *keep_headers, char *reason, size_t reason_len);

/* One fetch. Zero-initialise, then set what applies. */
typedef struct sh_fetch_opts {
        const char *url;
        const char *what;            /* the artifact, in reasons ("manifest", "bundle") */
        const char *peer;            /* who answers, in reasons (NULL: "the artifact store") */
        const char *const *headers;  /* more request headers, "Name: value" each, NULL-terminated
                                     * (no CR, LF or NUL; each < SH_FETCH_HEADER_MAX); NULL:
                                     * none. Dropped when the fetch follows a redirect to
                                     * another origin (they may be credentials) */
        uint64_t max;                /* the body's bytes at most (more: refused) */
        int fd;                      /* >= 0: the 2xx body is written there (not owned);
                                     * -1: kept in memory */
        uint64_t timeout_ms;         /* the whole fetch; 0: SH_FETCH_TOTAL_TIMEOUT_MS */
        uint64_t connect_timeout_ms; /* 0: SH_FETCH_CONNECT_TIMEOUT_MS */
        uint64_t low_speed_bytes;    /* with low_speed_ms: fewer than this many bytes a second
                                     * for that long ends the fetch, unreachable (a server
                                     * that stops sending) */
        uint64_t low_speed_ms;       /* rounded up to whole seconds */
        const sh_fetch_rule *rule;   /* NULL: the fetcher's */
        bool raw;                    /* every answer is a result with its status and headers:
                                     * a 3xx is not followed (`location` says where; the caller
                                     * follows it or not), another non-2xx keeps at most
                                     * SH_FETCH_ERROR_BODY_MAX of its body in memory (never in
                                     * fd); kind SH_FETCH_HTTP for all of them */
        bool follow;                 /* with raw: a 3xx is followed as a plain fetch follows it
                                     * (the rule, the count, headers dropped at another
                                     * origin); the other answers stay raw */
} sh_fetch_opts;

typedef struct sh_fetch_result {
        sh_fetch_kind kind;
        char reason[SH_FETCH_REASON_MAX]; /* UNREACHABLE, REFUSED, HTTP: what happened */
        long status;                      /* HTTP status of the last answer; 0: none */
        bool timed_out;                   /* UNREACHABLE because a timeout ran out */
        bool too_big;                     /* REFUSED because the body passed `max` */
        char *body; /* memory (or an error body of a raw fetch): NUL-terminated; owned by the
                     * fetch, valid during the callback only; "" in fd mode */
        size_t len; /* bytes received of the body (for fd mode: written) */
        uint8_t sha256[32];   /* SHA-256 of the 2xx body, either mode */
        const char *location; /* a raw fetch's 3xx: its target, absolute; else NULL. Valid
                               * during the callback only */
} sh_fetch_result;

/* Called once from the loop; the fetch is freed after it returns. */
typedef void (*sh_fetch_done_fn)(sh_fetch *f, const sh_fetch_result *res, void *data);

/* A fetcher, its default rule: `plain_http` SH_FETCH_HTTP_ANY, else SH_FETCH_HTTP_LOOPBACK,
 * with the system's CAs and `http_hint` (static or outliving the fetcher) in refusals. */
int sh_fetcher_new(sh_loop *loop, bool plain_http, const char *http_hint, sh_fetcher **ret,
                   sh_error **err);
/* Cancels every fetch in flight without calling their callbacks. `loop_alive` false: the
 * loop is already gone, so do not touch it. */
void sh_fetcher_free(sh_fetcher *f, bool loop_alive);

/* Start a GET as `o` says. Returns NULL with *err on failure to start, or when the URL
 * breaks the rule (EPERM: the message says why, before any connection). Redirects (not raw):
 * at most SH_FETCH_MAX_REDIRECTS, each target checked before it is connected to; the total
 * timeout covers them all. `done` is never called before this returns. */
sh_fetch *sh_fetch_start_opts(sh_fetcher *f, const sh_fetch_opts *o, sh_fetch_done_fn done,
                              void *data, sh_error **err);
/* The same with the defaults: `max` bytes, body to `fd` (or memory with -1). */
sh_fetch *sh_fetch_start(sh_fetcher *f, const char *url, const char *what, uint64_t max, int fd,
                         sh_fetch_done_fn done, void *data, sh_error **err);
/* Abort a fetch whose callback has not run yet; the callback never runs. Accepts NULL. */
void sh_fetch_cancel(sh_fetch *x);

/* Bytes of the body received so far (progress). */
uint64_t sh_fetch_received(const sh_fetch *x);

/* During the callback only: the value of the i-th header `name` (any case) of the last
 * answer, NULL when there is none. */
const char *sh_fetch_header(sh_fetch *x, const char *name, size_t i);

/* ---- url.c: URLs (libcurl's parser; no I/O) ----------------------------------------- */

/* Resolve `ref` against `base` (relative bundle URLs) into a new string; NULL if either is
 * not a valid URL. The scheme is checked by the fetch. */
char *sh_url_resolve(const char *base, const char *ref);
/* `url` with ".sig" appended to its path (query and fragment kept). NULL if invalid. */
char *sh_url_sig(const char *url);
/* A valid URL's scheme and host (lower-case, malloc'd; a v6 host "[..]") and port (the
 * scheme's default when none is written). 0, -EINVAL, -ENOMEM. */
int sh_url_split(const char *url, char **scheme, char **host, unsigned *port);
/* The origin of `url`, "scheme://host:port" (lower-case scheme and host, the port always
 * written), into buf; -EINVAL when not a valid http or https URL, -ENOBUFS when too long. */
int sh_url_origin(const char *url, char *buf, size_t size);
/* `base` with each key=value of `kv` (NULL-terminated pairs; a NULL value skips its key)
 * appended to its query, URL-encoded. NULL when `base` is not a valid URL, or out of memory. */
char *sh_url_with_query(const char *base, const char *const *kv);
/* Whether `host` (as libcurl's parser gives it: "[v6]" bracketed) is this machine's loopback:
 * 127.0.0.0/8, [::1] or "localhost". */
bool sh_url_host_is_loopback(const char *host);
/* Whether `host` with `port` is in `list` (NULL-terminated "host" or "host:port", any case). */
bool sh_url_host_listed(char *const *list, const char *host, unsigned port);
