/* tools.h: third-party tools (CONTRACT.md section 6): fetch (over net/, sh/fetch.h), verify,
 * unpack, store, cache. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/cgroup.h"
#include "sh/config.h"
#include "sh/error.h"
#include "sh/fetch.h"
#include "sh/loop.h"

/* Limits. Every one of them bounds something a manifest author or a store controls. */
#define SH_TOOLS_MANIFEST_MAX      (1u << 20)     /* manifest body */
#define SH_TOOLS_SIG_MAX           4096u          /* detached signature body */
#define SH_TOOLS_BUNDLE_MAX        (256ull << 20) /* compressed bundle */
#define SH_TOOLS_UNPACKED_MAX      (1ull << 30)   /* sum of regular file sizes after unpacking */
#define SH_TOOLS_FILES_MAX         20000u         /* entries in one bundle */
#define SH_TOOLS_PER_REQUEST_MAX   256u           /* tools in one resolve request (more: invalid) */
#define SH_TOOLS_NAME_MAX          256u           /* bytes of a tool name (longer: refused) */
#define SH_TOOLS_URL_MAX           4096u          /* bytes of a manifest or bundle URL */
#define SH_TOOLS_KEYS_MAX          64u            /* trusted publisher keys */
#define SH_TOOLS_UNPACK_TIMEOUT_MS 120000u
#define SH_TOOLS_REASON_MAX        512u
/* Unpacking's share of the node (docs/tools.md): at most this many unpackers at once (the
 * rest queue), all of them together in the cgroup {subtree}/tools, each in its own child
 * cgroup tools/u<n>. */
#define SH_TOOLS_UNPACK_PARALLEL   4u
#define SH_TOOLS_CG_MEMORY_MAX     (1ull << 30)
#define SH_TOOLS_CG_PIDS_MAX       64u
#define SH_TOOLS_CG_CPU_MILLI      2000u
#define SH_TOOLS_UNPACK_MEMORY_MAX (256ull << 20)
#define SH_TOOLS_UNPACK_PIDS_MAX   8u
#define SH_TOOLS_UNPACK_CPU_MILLI  1000u

/* ---- manifest.c: manifest and signature checks (pure) -------------------------------- */

typedef struct sh_manifest {
        char *name;
        char *version;
        char *bundle_url;
        char sha256[65]; /* lower-case hex */
        cJSON *commands; /* passed through unchanged */
} sh_manifest;

/* Parse and check a manifest body. On failure returns -1 with a reason a person can act on. */
int sh_manifest_parse(const char *body, size_t len, sh_manifest *ret, char *reason,
                      size_t reason_len);
void sh_manifest_done(sh_manifest *m);

typedef struct sh_tool_keys {
        unsigned n;
        uint8_t pk[SH_TOOLS_KEYS_MAX][32];
} sh_tool_keys;

/* Parse a key file: one base64 ed25519 public key (32 bytes) per line; blank lines and lines
 * starting with '#' are ignored. -1 with a reason on any bad line or more than the maximum. */
int sh_tool_keys_parse(const char *text, size_t len, sh_tool_keys *ret, char *reason,
                       size_t reason_len);
/* True when `sig_text` (base64 of a 64-byte detached ed25519 signature, whitespace allowed)
 * verifies `msg` under one of the keys. */
bool sh_tool_sig_verify(const sh_tool_keys *k, const char *msg, size_t len, const char *sig_text,
                        size_t sig_len);

/* ---- unpack.c: the store and confined unpacking -------------------------------------- */

typedef struct sh_store sh_store;
typedef struct sh_unpack sh_unpack;

/* Open {root}/tools (created by the manager) and its private .stage and .cache directories;
 * clears staging leftovers of an earlier run in a child; creates the cgroup "tools" below
 * the daemon's subtree `cgroot` (which must outlive the store). `uid` is the unprivileged
 * owner the unpacking child runs as. */
int sh_store_open(const char *root, sh_loop *loop, uid_t uid, sh_cgroup_root *cgroot,
                  sh_store **ret, sh_error **err);
/* Queued unpacks are dropped, running ones killed; the store goes once they have reported. */
void sh_store_free(sh_store *s);
/* The directory fd of {root}/tools/.cache (owned by the store). */
int sh_store_cache_fd(const sh_store *s);
/* Whether {root}/tools/{sha} is installed. */
bool sh_store_has(const sh_store *s, const char *sha);
/* A new anonymous file for a download (O_TMPFILE in .stage, else a memfd); -errno. */
int sh_store_tmpfile(const sh_store *s);

/* Called once from the loop: ok, or a reason (an unsafe bundle or a host failure). */
typedef void (*sh_unpack_done_fn)(bool ok, const char *reason, void *data);
/* Unpack the bundle in `fd` (not owned, duplicated; its bytes are the verified ones) in a
 * confined child, hand the tree to root and move it to {root}/tools/{sha}. Queued behind
 * SH_TOOLS_UNPACK_PARALLEL others at most; `done` is never called before this returns. If
 * another install of `sha` won the race, that one stands and this still reports ok. Returns
 * NULL with *err if it cannot start. */
sh_unpack *sh_unpack_start(sh_store *s, int fd, const char *sha, sh_unpack_done_fn done, void *data,
                           sh_error **err);
/* Forget the callback (the child still finishes and the tree is installed or removed). */
void sh_unpack_forget(sh_unpack *u);

/* ---- resolve.c: POST /tools/resolve ------------------------------------------------- */

typedef struct sh_tools sh_tools;
typedef struct sh_resolve sh_resolve;

/* The daemon's resolver (daemon.c builds one). Cheap: its store (below {root}/tools, with its
 * cgroup below `cgroot`, the manager's), fetcher and trusted keys are opened by the first
 * resolve, and again by the next one after a failure to open them. cfg, loop and cgroot must
 * outlive it. */
int sh_tools_new(const sh_config *cfg, sh_loop *loop, sh_cgroup_root *cgroot, sh_tools **ret,
                 sh_error **err);
/* Free the resolver (at shutdown, while the loop still lives). Accepts NULL. */
void sh_tools_free(sh_tools *t);

/* `out` is the complete response body {"tools": {...}, "refused": {...}}; owned by the
 * callee. Called exactly once, possibly before sh_tools_resolve_start returns. */
typedef void (*sh_resolve_done_fn)(cJSON *out, void *data);

/* Resolve n tools in parallel. *ret is the handle while it runs, NULL if it already finished
 * (done has run). Fails when the resolver cannot open its store or fetcher. */
int sh_tools_resolve_start(sh_tools *t, const char *const *names, const char *const *urls, size_t n,
                           sh_resolve_done_fn done, void *data, sh_resolve **ret, sh_error **err);
/* The requester is gone: stop, never call done. Installs already running still finish. */
void sh_tools_resolve_cancel(sh_resolve *res);
