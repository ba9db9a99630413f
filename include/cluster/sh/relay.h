/* relay.h: a request of this pod's client relayed to a peer, and the peer's answer relayed
 * back as it comes (OPENSANDBOX.md section 1): the body both ways with backpressure (the
 * daemon holds a bounded buffer whatever the body's size), status and headers kept except
 * hop-by-hop ones, the hop mark added. It sits on the transport (sh/http.h) and the loop's
 * HTTP client (sh/fetch.h's fetcher). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sh/config.h"
#include "sh/error.h"
#include "sh/fetch.h"
#include "sh/http.h"
#include "sh/loop.h"

typedef struct sh_relayer sh_relayer;

/* The relays of this pod: at most cfg->peer_relay_max in flight, each bounded by
 * cfg->peer_timeout_ms from its start to the head of the peer's answer (after the client's
 * whole body went). `token` is the hop mark's value. */
int sh_relayer_new(const sh_config *cfg, sh_loop *loop, const char *token, sh_relayer **ret,
                   sh_error **err);
void sh_relayer_free(sh_relayer *rl); /* accepts NULL; cuts every relay in flight */
unsigned sh_relayer_in_flight(const sh_relayer *rl);

/* Whether r carries the hop mark (SH_HOP_HEADER). */
bool sh_request_hop_marked(const sh_request *r);

/* What the surface says when the peer cannot answer: called at most once, from the loop, while
 * r still waits and before any byte of an answer went (connect refused, the peer silent past
 * the timeout, an answer that breaks HTTP): the surface answers r (404 SANDBOX_NOT_FOUND).
 * After the head went, a failure only cuts the client's stream (it sees a short body). */
typedef void (*sh_relay_failed_fn)(sh_request *r, const char *why, void *data);

/* Relay r to `base_url` (a peer's "http://host:port", never from the client) + r's own target
 * (its path and query as the client sent them). Called from the surface's admit hook, before
 * any body byte: the request's body and answer are the relay's from now on (the route's sink
 * and handler never run). 0 having taken r over, or < 0 having answered it: 503 (with
 * Retry-After, in the surface's error shape) at the bound, 500 out of memory. `failed`'s data
 * must outlive the request. */
int sh_relay_request(sh_relayer *rl, sh_request *r, const char *base_url, sh_relay_failed_fn failed,
                     void *data);
