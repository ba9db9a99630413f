/* relay.h: a request of this pod's client relayed to a peer, and the peer's answer relayed
 * back as it comes (OPENSANDBOX.md section 1): the body both ways with backpressure (the
 * daemon holds a bounded buffer whatever the body's size), status and headers kept except
 * hop-by-hop ones, the hop mark added. It sits on the transport (sh/http.h: a diverted body
 * sink that pauses the upload, a queued stream whose marks pause the download) and the loop's
 * streamed HTTP exchange (sh/exchange.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/cluster.h" /* SH_HOP_HEADER */
#include "sh/config.h"
#include "sh/error.h"
#include "sh/exchange.h"
#include "sh/http.h"
#include "sh/loop.h"

typedef struct sh_relayer sh_relayer;

/* The relays of this pod: at most cfg->peer_relay_max in flight (a relay is in flight from
 * its start until both its request and its exchange ended), each failed when the peer is
 * silent cfg->peer_timeout_ms before the head of its answer (to connect, to take the next
 * piece of the client's body, to answer after its end; the client's own slowness does not
 * count). `token` is the hop mark's value. Connections to each peer are kept and reused (at
 * most peer_relay_max + 8 at once). Free it before the loop. */
int sh_relayer_new(const sh_config *cfg, sh_loop *loop, const char *token, sh_relayer **ret,
                   sh_error **err);
void sh_relayer_free(sh_relayer *rl); /* accepts NULL; cuts every relay in flight */
unsigned sh_relayer_in_flight(const sh_relayer *rl);
/* The most bytes of a client's body a relay held at once so far (tests: the bound). */
size_t sh_relayer_body_held_max(const sh_relayer *rl);

/* Whether r carries the hop mark (SH_HOP_HEADER). */
bool sh_request_hop_marked(const sh_request *r);

/* What the surface says when the peer cannot answer: called at most once, from the loop, while
 * r still waits and before any byte of an answer went (connect refused, the peer silent past
 * the timeout, an answer that breaks HTTP, this relayer freed), once the client's body is in
 * (what is left of it is read and dropped first): the surface answers r (404
 * SANDBOX_NOT_FOUND). After the head went, a failure only cuts the client's stream (it sees a
 * short body). Not called when the client left. */
typedef void (*sh_relay_failed_fn)(sh_request *r, const char *why, void *data);

/* Relay r to `base_url` (a peer's "http://host:port", never from the client) + r's own target
 * (its path and query as the client sent them). Called from the surface's admit hook, before
 * any body byte: the request's body and answer are the relay's from now on (the route's sink
 * and handler never run; sh_request_divert). 0 having taken r over (admit then returns 0), or
 * < 0 having answered it (admit returns < 0): 503 (sh_reply_errorf SH_E_UNAVAILABLE: the
 * surface's error shape, its Retry-After) at the bound, 500 out of memory. `failed`'s data
 * must outlive the request. The answer keeps the peer's status and headers but its
 * X-Request-ID: the surface's decorate adds the one of r. One log line per relay that fails. */
int sh_relay_request(sh_relayer *rl, sh_request *r, const char *base_url, sh_relay_failed_fn failed,
                     void *data);

/* The same from r's handler, once its whole body is in memory (`body`, `len`: copied; a route
 * with sh_body_buffer): what only the body tells (a create from another pod's snapshot) is
 * relayed with it. The handler then returns without answering: the relay answers. */
int sh_relay_request_body(sh_relayer *rl, sh_request *r, const char *base_url, const char *body,
                          size_t len, sh_relay_failed_fn failed, void *data);

/* ---- pure: unit-tested ---------------------------------------------------------------------- */

/* Whether a request header field goes to the peer: not a hop-by-hop one (Connection,
 * Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding, Upgrade, nor one the request's
 * `connection` header names), not Host, Content-Length (the relay sets its own), Expect or
 * SH_HOP_HEADER. `connection` may be NULL. */
bool sh_relay_request_field_kept(const char *name, const char *connection);
/* Whether an answer's header field comes back to the client: not a hop-by-hop one (nor one
 * the answer's `connection` names), not Content-Length (the transport sends its own from the
 * length), not X-Request-ID (the surface's decorate adds r's). */
bool sh_relay_answer_field_kept(const char *name, const char *connection);
