/* opensandbox.h: the OpenSandbox surface (/v1, ../shared/OPENSANDBOX.md, docs/opensandbox.md):
 * OpenSandbox's lifecycle, snapshot and diagnostics API and every sandbox's execd and egress
 * routes, served by the daemon itself beside the native contract, over the same registry. It
 * sits on the transport (sh/http.h) and calls the services below it; daemon.c builds it. */
#pragma once

#include "sh/cluster.h"
#include "sh/config.h"
#include "sh/error.h"
#include "sh/http.h"
#include "sh/loop.h"
#include "sh/sandbox.h"

struct sh_persister;

typedef struct sh_opensandbox sh_opensandbox;

/* The daemon's fds an idle /v1 sandbox holds beyond SH_SANDBOX_FDS: its entrypoint's pipe
 * (stdout and stderr together) while the entrypoint runs. */
#define SH_OS_SANDBOX_FDS 1
/* ... and each of its running background commands (at most SANDBOX_HOST_BACKGROUND_MAX): its
 * one pipe, stdout and stderr together (its log file is opened only while it is written). */
#define SH_OS_BACKGROUND_FDS 1

/* The surface's state: its sandbox records, the expiry timer, its route table. cfg, loop,
 * mgr, persister, srv and cluster (this pod's peers) outlive it. It observes the manager's deletes (a native delete or
 * the expiry of a /v1 sandbox ends its record). */
int sh_opensandbox_new(const sh_config *cfg, sh_loop *loop, sh_manager *mgr,
                       struct sh_persister *persister, sh_server *srv, sh_cluster *cluster,
                       sh_opensandbox **ret, sh_error **err);
/* The surface for sh_server_add_surface: prefix "/v1/", its routes, auth, its error body
 * {"code", "message"} and X-Request-ID on every answer. */
void sh_opensandbox_surface(sh_opensandbox *os, sh_surface *ret);
/* Before the manager is freed: stops observing it, ends every record (the entrypoints of the
 * sandboxes still there are killed with them). Accepts NULL. */
void sh_opensandbox_free(sh_opensandbox *os);
