/* wire_helpers.h: the real daemon in-process (one per test, in a thread), a libcurl client. */
#pragma once

#include <check.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/config.h"
#include "sh/loop.h"
#include "sh/sandbox.h"
#include "sh/util.h"

#define WIRE_TIMEOUT_MS 10000 /* bound on every HTTP exchange */

typedef struct wire_resp {
        long status; /* 0 when the transfer failed (see curl_rc) */
        int curl_rc; /* CURLcode */
        char *body;  /* NUL-terminated, body_len bytes */
        size_t body_len;
        char *headers;  /* raw header block of the final response, NUL-terminated */
        double seconds; /* total time of the exchange */
} wire_resp;

/* Start the daemon on 127.0.0.1:0 with a fresh state root under $TMPDIR and these extra
 * flags (NULL-terminated list, may be NULL), e.g. {"--max-sandboxes=1", NULL}. Must be
 * called inside the test (the forked child). Fails the test on error. */
void wire_start(const char *const *flags);
/* Graceful stop, join (bounded: 20 s), free, remove the state root. Idempotent. */
void wire_stop(void);
/* The same with the join bounded by `timeout_s`: a daemon that has not stopped by then fails
 * the test (a call timeout, for tests that the stop is prompt). */
void wire_stop_within(unsigned timeout_s);

/* The services without the transport, in this thread: a loop and a manager on a fresh state
 * root as wire_start's (flags alike), for tests of the sandbox layer on real sandboxes; the
 * runner removes what a failed test left as it does a daemon's. _stop frees them (the
 * manager deletes its sandboxes first) and removes the root. */
sh_manager *wire_services_start(const char *const *flags, sh_loop **ret_loop);
void wire_services_stop(void);
/* Run the services' loop until cond(data) holds (asked every 5 ms); a test failure, naming
 * `what`, when it does not within ms. */
void wire_loop_until(bool (*cond)(void *data), void *data, unsigned ms, const char *what);
/* A sandbox of the services' manager, made with the default options and ready (a reference). */
sh_sandbox *wire_sandbox(void);

/* One command of a services' sandbox (wire_exec_sh): its output (at most sizeof(out) - 1
 * bytes kept) and its end. */
typedef struct wire_seen {
        sh_exec *e; /* the consumer's reference until the end (then detached) */
        bool ended;
        sh_exec_event_type end; /* EXIT or ERROR */
        int code;               /* the exit code; -1 for ERROR */
        char why[128];          /* the end's `why`, "" when none */
        char out[4096];
        size_t out_len;
} wire_seen;
/* Start /bin/sh -c script in sb with env (NULL: none) and o, its events into *s (zeroed
 * first); a start that fails fails the test. wire_exec_ended: a wire_loop_until condition. */
void wire_exec_sh(sh_sandbox *sb, wire_seen *s, const char *script, const cJSON *env,
                  const sh_exec_opts *o);
bool wire_exec_ended(void *data);

/* Run the suite (fork mode) and afterwards remove the state roots that failed tests left
 * behind. Returns the process exit code. */
int wire_main(Suite *s);

const char *wire_url(void); /* "http://127.0.0.1:PORT" */
uint16_t wire_port(void);
const char *wire_root(void); /* the state root */

/* One HTTP exchange on a fresh connection (closed afterwards). `body` may be NULL (then no
 * body is sent unless body_len > 0); `content_type` NULL means application/json when a body
 * is given. Extra request headers: NULL-terminated list or NULL. Never fails the test by
 * itself (resp->status is 0 on transport failure). */
void wire_http_ex(const char *method, const char *path, const void *body, size_t body_len,
                  const char *content_type, const char *const *extra_headers, long timeout_ms,
                  wire_resp *resp);
void wire_http(const char *method, const char *path, const char *json_body, wire_resp *resp);
void wire_resp_free(wire_resp *resp);

/* Value of response header `name` (case-insensitive) into out; false if absent. */
bool wire_header(const wire_resp *resp, const char *name, char *out, size_t size);

/* Parse the body as JSON (fails the test if it is not). Free with cJSON_Delete. */
cJSON *wire_json(const wire_resp *resp);
/* Assert an error response: this status, Content-Type application/json and a body
 * {"error": type, "detail": string}. */
void wire_assert_error(const wire_resp *resp, long status, const char *type);

/* Create a sandbox (asserting 200) and return its remote_id in id[SH_ID_LEN + 1]. */
void wire_create(char id[SH_ID_LEN + 1]);
/* PUT a file; returns the status. `path` is put in the query as given (percent-encode it). */
long wire_upload(const char *id, const char *path, const void *data, size_t len);
/* GET /sandboxes/{id}/{what}?{query} and parse the 200 JSON answer (fails otherwise). */
cJSON *wire_get_json(const char *id, const char *what, const char *query);

/* The workspace directory of a sandbox on disk: {root}/{id}/workspace (static buffer). */
const char *wire_workspace(const char *id);

/* A raw TCP connection to the daemon (blocking, with 5 s send/receive timeouts). */
int wire_connect_raw(void);
/* Write all of `s` to fd (MSG_NOSIGNAL); fails the test on error. */
void wire_send_all(int fd, const void *s, size_t len);

/* ---- the transport alone (tests of sh/http.h's seams, no daemon) --------------------------- */

/* The settings of a server on 127.0.0.1:0 (no state root), logs at errors only, libcurl set up. */
void wire_transport_config(sh_config *cfg);
/* Run `loop` in a thread until wire_loop_thread_stop (the join bounded: 10 s, a test failure). */
void wire_loop_thread_start(sh_loop *loop);
void wire_loop_thread_stop(void);
/* Append the k bytes at p to buf (size bytes, *len used), as many as fit, NUL-terminated: a
 * libcurl write or header callback's body. Returns k. */
size_t wire_keep(char *buf, size_t size, size_t *len, const char *p, size_t k);
/* A libcurl handle for one exchange of `method` ("HEAD": no body) with `url`, bounded by
 * WIRE_TIMEOUT_MS on a fresh connection, its body and header to these callbacks (with data). */
CURL *wire_curl(const char *url, const char *method, curl_write_callback body,
                curl_write_callback head, void *data);
