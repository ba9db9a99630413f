/* native.h: the native API surface (CONTRACT.md): its routes and handlers, its error body
 * {"error", "detail"} and the kinds it maps to statuses, the input rules its handlers share
 * (JSON bodies, workspace path parameters), and its NDJSON encoding of exec events. It sits on
 * the transport (sh/http.h) and calls the services below it. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "sh/buf.h"
#include "sh/cluster.h"
#include "sh/error.h"
#include "sh/exec.h"
#include "sh/http.h"
#include "sh/sandbox.h"

struct sh_persister;
struct sh_tools;

/* What the native handlers work with, built by daemon.c (the composition root). */
typedef struct sh_native_ctx {
        const sh_config *cfg;
        sh_loop *loop;
        sh_manager *mgr;
        struct sh_persister *persister;
        struct sh_tools *tools;
        sh_server *srv;      /* its pod_url */
        sh_cluster *cluster; /* this pod's peers: /healthz's `cluster` object */
} sh_native_ctx;

/* The native surface over ctx, for sh_server_add_surface: every path ("/" prefix), the route
 * table below (SANDBOX_HOST_NATIVE off: /healthz, /readyz and /drain only), the sandbox lookup
 * of SH_NATIVE_SANDBOX routes (with SANDBOX_HOST_API_KEY set, a sandbox another surface made is
 * 404 SandboxNotFound here), the error body. */
void sh_native_surface(sh_native_ctx *ctx, sh_surface *ret);

/* A route flag of the native surface: the first path parameter is a sandbox id, looked up
 * before any body byte is read (404 SandboxNotFound; after 404 NotFound and 405). */
#define SH_NATIVE_SANDBOX SH_ROUTE_SURFACE

/* The route table (CONTRACT.md section 2). */
extern const sh_route sh_native_routes[];
extern const size_t sh_native_n_routes;

/* The contract's status and error type of a kind (section 8; pure). */
unsigned sh_native_status(sh_error_kind kind);
const char *sh_native_type(sh_error_kind kind);

/* ---- what handlers share (native/input.c, native.c) ------------------------------------- */

/* The request's native context and its sandbox (SH_NATIVE_SANDBOX routes; borrowed). */
sh_native_ctx *sh_native(const sh_request *r);
sh_sandbox *sh_native_sandbox(const sh_request *r);
/* The request's sandbox's workspace, opened now (sh_sandbox_open_workspace): a new O_PATH fd
 * the caller closes before the request ends, or -1 after the error answer (404
 * SandboxNotFound once deleted, 503 when out of fds). */
int sh_native_workspace(sh_request *r);
/* Parse the JSON body (empty/whitespace = {}); must be an object. NULL after a 400. */
cJSON *sh_native_json(sh_request *r);
/* The same rules on `len` bytes of text (pure; the text may change in place): the object, or
 * NULL with why (at most why_size bytes) the 400's detail, or empty when out of memory. */
cJSON *sh_native_json_text(char *body, size_t len, char *why, size_t why_size);
/* The query parameter `name` normalised as a workspace path; NULL after a 400. `optional`:
 * absent or empty means the root (""). */
char *sh_native_path_param(sh_request *r, const char *name, bool optional);

/* The raw upload body of PUT /file: streamed into an unnamed file in the workspace (api_files.c). */
extern const sh_body_sink sh_native_upload_sink;

/* ---- exec events as NDJSON (ndjson.c, pure) -------------------------------------------- */

/* Append the event's frame, one line ending in "\n", to q: a chunk (of either stream) is
 * {"o":"<base64>"}, a heartbeat {"o":""}, the exit {"exit":N,"out":"<base64>",
 * "err":"<base64>"} with ,"signal":N ,"oom":true ,"truncated":true when they apply, an error
 * {"error":"<type>","detail":"<text>"}. 0, or -ENOMEM with q as it was. */
int sh_ndjson_event(sh_buf *q, const sh_exec_event *ev);

/* ---- handlers (api_*.c) ----------------------------------------------------------------- */

/* The create body's fields (CONTRACT.md 2.1; pure): image a string, env an object of strings,
 * exposed_ports a list (ignored), item_id an item id; absent and null are the same. 0 with o's
 * image, env and item_id pointing into body, or -1 with *ret_why the 400's detail. */
int sh_native_create_opts(const cJSON *body, sh_create_opts *o, const char **ret_why);

void sh_api_create(sh_request *r);
void sh_api_delete(sh_request *r);
void sh_api_exec(sh_request *r);
void sh_api_persist(sh_request *r);
void sh_api_upload(sh_request *r);
void sh_api_download(sh_request *r);
void sh_api_exists(sh_request *r);
void sh_api_disk_usage(sh_request *r);
void sh_api_size(sh_request *r);
void sh_api_mark_ready(sh_request *r);
void sh_api_ready(sh_request *r);
void sh_api_walk(sh_request *r);
void sh_api_delete_file(sh_request *r);
void sh_api_mkdir(sh_request *r);
void sh_api_delete_dir(sh_request *r);
void sh_api_rename(sh_request *r);
void sh_api_tools_resolve(sh_request *r);
void sh_api_healthz(sh_request *r);
void sh_api_readyz(sh_request *r);
void sh_api_drain(sh_request *r);
