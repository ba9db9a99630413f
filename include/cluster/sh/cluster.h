/* cluster.h: many pods as one service (OPENSANDBOX.md section 1, docs/deployment.md): this
 * pod's token (the first SH_POD_TOKEN_LEN hex digits of every id it mints), the peers it
 * discovered (SANDBOX_HOST_PEERS: the A/AAAA records of a headless Service, or a static list),
 * what each said of itself in its /healthz, and asking every peer the local-only form of a
 * listing. A token is resolved only against peers discovered this way: no byte a client sends
 * ever picks the address this pod connects to. Without SANDBOX_HOST_PEERS there are no peers
 * and every lookup finds none. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/config.h"
#include "sh/error.h"
#include "sh/loop.h"
#include "sh/util.h"

/* The header every request a pod sends a peer carries (relays, listings, probes), valued with
 * the sender's token. A request that carries it is never relayed again, and a listing that
 * carries it is the local-only form. It grants nothing: keys and tokens are checked as ever. */
#define SH_HOP_HEADER "X-Sandbox-Host-Hop"

typedef struct sh_cluster sh_cluster;
typedef struct sh_peer sh_peer;

/* What this pod says of its room for creates (its /healthz, the create hand-off). */
typedef struct sh_cluster_room {
        bool accepting;  /* ready for a create: not draining, not full, images ready */
        uint64_t room;   /* sandboxes it can still take */
        uint64_t in_use; /* sandboxes it holds */
} sh_cluster_room;
typedef void (*sh_cluster_room_fn)(void *data, sh_cluster_room *ret);

/* The cluster of this pod: `token` (SH_POD_TOKEN_LEN hex digits, the manager's), `listen_port`
 * (a dns: peer without a port is reached on it), room_fn telling this pod's room. Discovery
 * starts at once when cfg->peers is set; a bad setting is an error here. */
int sh_cluster_new(const sh_config *cfg, sh_loop *loop, const char *token, uint16_t listen_port,
                   sh_cluster_room_fn room_fn, void *room_data, sh_cluster **ret, sh_error **err);
void sh_cluster_free(sh_cluster *c); /* accepts NULL; cancels everything in flight */

const char *sh_cluster_token(const sh_cluster *c);
/* Whether SANDBOX_HOST_PEERS is set. */
bool sh_cluster_enabled(const sh_cluster *c);
/* The `cluster` object of this pod's /healthz: {token, instance, accepting, room, in_use,
 * peers: n live peers}. NULL when out of memory. */
cJSON *sh_cluster_health_json(sh_cluster *c);

/* The live peer (not this pod) whose token begins `id` (a sandbox id, or a snapshot id whose
 * "snap-" prefix is skipped: its first SH_POD_TOKEN_LEN hex digits after it), or NULL: an id of
 * this pod, of no peer discovered, of a token two live peers claim (logged), too short. A peer
 * is valid until control returns to the loop (a probe may drop it then): copy its URL and
 * token to keep them. */
const sh_peer *sh_cluster_owner(const sh_cluster *c, const char *id, size_t len);
/* The live peer other than this pod that is accepting and has the most room, or NULL. */
const sh_peer *sh_cluster_roomiest(const sh_cluster *c);
/* The peer's base URL ("http://10.1.2.3:8080", no trailing slash) and token. */
const char *sh_peer_url(const sh_peer *p);
const char *sh_peer_token(const sh_peer *p);
/* A create was handed to the peer: one less of its room until its next probe says again (a
 * burst of creates spreads over the peers by their room, and none is sent more than it said it
 * could take). `p` may be gone since it was handed out (only its address is compared): then
 * nothing happens. */
void sh_peer_took_create(sh_cluster *c, const sh_peer *p);

/* ---- asking every live peer (listings) ------------------------------------------------------ */

/* One peer's answer: its token, and the body of a 2xx answer (NUL-terminated, valid during the
 * callback), or NULL with `why` when it did not answer within SANDBOX_HOST_PEER_TIMEOUT_MS, or
 * not 2xx, or more than `max` bytes (it is then left out, and logged by the caller). */
typedef struct sh_cluster_answer {
        const char *token;
        long status;
        const char *body;
        size_t len;
        const char *why;
} sh_cluster_answer;
typedef struct sh_cluster_ask sh_cluster_ask;
/* Called once, from the loop (never before sh_cluster_ask_all returns), with every live
 * peer's answer (n may be 0; 0 also when out of memory, logged). The ask is freed when the
 * callback returns: do not cancel it from there. */
typedef void (*sh_cluster_ask_done_fn)(const sh_cluster_answer *a, size_t n, void *data);

/* GET `target` (origin form: "/v1/sandboxes?state=Running", as this pod's client sent it) of
 * every live peer, hop-marked, with the request headers `headers` ("Name: value",
 * NULL-terminated: the API key), each answer at most `max` bytes. NULL with *err when it
 * cannot start (out of memory). */
sh_cluster_ask *sh_cluster_ask_all(sh_cluster *c, const char *target, const char *const *headers,
                                   uint64_t max, sh_cluster_ask_done_fn done, void *data,
                                   sh_error **err);
void sh_cluster_ask_cancel(sh_cluster_ask *a); /* the callback never runs; accepts NULL */

/* ---- pure (peers-pure.c): unit-tested and fuzzed ------------------------------------------- */

/* A SANDBOX_HOST_PEERS value: `dns:<name>[:port]` or `static:<url>[,<url>...]` (http URLs,
 * host and optional port, no path other than "/", at most SH_CLUSTER_STATIC_MAX).
 * 0, or -EINVAL with a reason. */
#define SH_CLUSTER_STATIC_MAX 64
typedef struct sh_peers_spec {
        bool dns;
        char *name;    /* dns: the name (malloc'd) */
        unsigned port; /* dns: 0 = this pod's listen port */
        char **urls;   /* static: NULL-terminated, normalised "http://host:port" (malloc'd) */
} sh_peers_spec;
int sh_peers_spec_parse(const char *s, sh_peers_spec *ret, char *reason, size_t reason_len);
void sh_peers_spec_done(sh_peers_spec *s);

/* A peer's /healthz body: its `cluster` object's token (SH_POD_TOKEN_LEN lower-case hex),
 * instance, accepting and room. -EINVAL when it has none or it is malformed. */
typedef struct sh_peer_health {
        char token[SH_POD_TOKEN_LEN + 1];
        char instance[33];
        bool accepting;
        uint64_t room;
} sh_peer_health;
int sh_peer_health_parse(const char *body, size_t len, sh_peer_health *ret);
