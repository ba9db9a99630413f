/* network.h: the sandboxes' network, a service of the sandbox layer (issue 24,
 * OPENSANDBOX.md sections 2 and 4). One per manager, opened with it in the daemon's (the
 * pod's) network namespace: the DNS proxy on the range's gateway (egress/dns.c), the links
 * (egress/link.c) and the daemon's nftables table (egress/nft.c), the operator's lists
 * (egress/policy.c) with the pod's own addresses and the sandboxes' range added to the deny
 * list. A sandbox created with a policy (sh_create_opts.egress: the /v1 surface's) gets its
 * link and its place in the table once its worker serves, before its create ends; one created
 * without (the native surface's) has loopback only. Its policy is read and replaced here (the
 * egress API); its delete takes its link and table entries away (sh_manager_delete).
 *
 * A host that cannot (no CAP_NET_ADMIN, no nftables, the gateway's port taken, or
 * SANDBOX_HOST_EGRESS=off) runs without: sh_network_supported is false and
 * sh_network_why says why (/healthz `egress`); sandboxes then have loopback only. */
#pragma once

#include <stdbool.h>

#include "sh/error.h"
#include "sh/policy.h"

struct cJSON;
typedef struct sh_sandbox sh_sandbox;
typedef struct sh_manager sh_manager;
typedef struct sh_network sh_network;

/* The network of m's sandboxes (never NULL once the manager is made). */
sh_network *sh_manager_network(const sh_manager *m);

/* Whether sandboxes get network here; else the reason (static or the network's own). */
bool sh_network_supported(const sh_network *n);
const char *sh_network_why(const sh_network *n);
/* "dns+nft", or "none" without support: the egress API's enforcementMode. */
const char *sh_network_enforcement(const sh_network *n);
/* The operator's lists (for the policy's verdicts and the egress API's checks). */
const sh_egress_operator *sh_network_operator(const sh_network *n);

/* /healthz's `egress` object: {supported, enforcement, reason | range, gateway, sandboxes}.
 * NULL when out of memory. */
struct cJSON *sh_network_health_json(const sh_network *n);

/* sb's policy, or NULL when sb has no network (a native sandbox, a host without support). */
const sh_egress_policy *sh_network_policy(const sh_network *n, const sh_sandbox *sb);

/* Replace sb's policy by *p (taken: *p is emptied whatever this returns), effective for the
 * next connection; an open connection the new policy denies is cut (net.h). SH_E_INVALID when
 * sb has no network. */
int sh_network_set_policy(sh_network *n, sh_sandbox *sb, sh_egress_policy *p, sh_error **err);
