/* os-internal.h: what the files of the OpenSandbox surface share: the surface's context, the
 * sandbox records (state machine, times, metadata, token, the entrypoint's output log) and
 * their observers, the error codes and the replies in OpenSandbox's shape ({code, message},
 * X-Request-ID, Content-Length: 0), the route flags and each file's route table. Nothing
 * outside src/opensandbox/ includes it but the tests of its pure parts.
 *
 * Ownership: record.c owns the records and their fields; other files read them and change a
 * record only through the functions here (os_record_set_state, os_record_set_metadata, ...;
 * create.c fills a new record before it is linked), except `execd`, the execd files' alone. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sh/config.h"
#include "sh/error.h"
#include "sh/exec.h"
#include "sh/http.h"
#include "sh/list.h"
#include "sh/log.h"
#include "sh/loop.h"
#include "sh/opensandbox.h"
#include "sh/bgexec.h"
#include "sh/sandbox.h"
#include "sh/util.h"

struct sh_persister;

#define OS_TOKEN_LEN     48            /* an access token: 192 random bits as hex */
#define OS_SURFACE       "opensandbox" /* its name, also the tag of the sandboxes it makes */
#define OS_OBSERVERS_MAX 8             /* the files that keep something per record */

/* ---- the context -------------------------------------------------------------------------- */

typedef struct os_record os_record;

/* The surface's state (sh_opensandbox): what every handler works with (os_ctx_of). */
typedef struct sh_opensandbox {
        const sh_config *cfg;
        sh_loop *loop;
        sh_manager *mgr;
        struct sh_persister *persister;
        sh_server *srv;               /* its pod_url */
        sh_cluster *cluster;          /* this pod's peers (cluster.h) */
        sh_sandbox_observer observer; /* the manager's deletes end records */
        sh_route *routes;             /* every file's table, one array (the surface's) */
        size_t n_routes;
        unsigned char api_key_hash[32]; /* BLAKE2b of SANDBOX_HOST_API_KEY; never the key */
        bool api_key;                   /* a key is set */
        /* told of every record's changes, in order of registration (os_record_observe) */
        const struct os_record_observer *observers[OS_OBSERVERS_MAX];
        unsigned n_observers;
        struct sh_snapstore *snapshots; /* the snapshot store (sh_snapshots_open) */
        struct sh_relayer *relayer;     /* relays to the peers; NULL: none (SANDBOX_HOST_PEERS) */
} os_ctx;

os_ctx *os_ctx_of(const sh_request *r);

/* The core's clock and RFC 3339 (sh/loop.h, sh/util.h), by the names the execd and file
 * routes still call. */
#define os_now_wall_ms sh_now_wall_ms
#define os_time_format sh_rfc3339_format

/* ---- records (record.c) --------------------------------------------------------------------- */

typedef enum {
        OS_PENDING = 0,
        OS_RUNNING,
        OS_PAUSING,
        OS_PAUSED,
        OS_RESUMING,
        OS_STOPPING,
        OS_TERMINATED,
        OS_FAILED,
        OS_STATE_COUNT
} os_state;

/* "Pending", "Running", ... (the YAML's SandboxState) */
const char *os_state_name(os_state s);
/* The state named by `len` bytes of s (case-sensitive); -1 when none. */
int os_state_parse(const char *s, size_t len);

/* One sandbox created through /v1. Lives from the create until its sandbox is deleted (a
 * /v1 or native delete, its expiry, a failed create, shutdown). The registry is the manager's:
 * a record is attached to its sandbox (sh_sandbox_attach), found through the manager's look-up
 * by id, until the delete detaches it (os_record_find no longer finds it); it is freed when
 * its last reference goes. */
struct os_record {
        unsigned refs;
        os_ctx *ctx;
        char id[SH_ID_LEN + 1]; /* its sandbox's remote_id */
        sh_sandbox *sb;         /* a reference; NULL once its sandbox is deleted */
        bool gone;              /* detached: its sandbox is deleted */

        /* status */
        os_state state;
        char *reason;           /* machine-readable ("created", "user_delete", ...) */
        char *message;          /* for people */
        uint64_t transition_ms; /* wall ms of the last state change */

        /* what the create asked (kept as given, shown by GET) */
        uint64_t created_ms; /* wall ms */
        cJSON *metadata;     /* object of strings (owned) */
        char *image_uri;     /* as given; NULL with a snapshot */
        char *snapshot_id;   /* NULL with an image */
        cJSON *entrypoint;   /* array of strings (owned) */
        bool has_platform;
        char platform_os[16], platform_arch[16];
        bool secure_access;
        uint64_t renew_extend_s;      /* access.renew.extend.seconds; 0: unset */
        char token[OS_TOKEN_LEN + 1]; /* the access token (never logged) */
        unsigned char token_hash[32]; /* BLAKE2b of it, compared in constant time */

        /* the entrypoint: a background command, its output (stdout + stderr) in its log */
        sh_bgexec *entry;
        bool entry_ended;
        int entry_exit; /* its exit code (128 + signal) once entry_ended */

        void *execd; /* the execd files' (execd.h: commands, sessions, metrics), NULL at first */
};

/* A new record (state Pending, its token made, not yet in the registry); one reference. */
int os_record_new(os_ctx *ctx, os_record **ret, sh_error **err);
/* Into the registry: rec becomes sb's record (its id, a reference of sb), attached to it
 * (found by id, listed newest last; the attachment takes a reference of rec), its sandbox's
 * journal kept (the diagnostics). 0, or -1 with err (out of memory: nothing changed). */
int os_record_link(os_record *rec, sh_sandbox *sb, sh_error **err);
/* The surface's start and end: observe the manager's deletes; at the end every record goes. */
void os_records_init(os_ctx *ctx);
void os_records_done(os_ctx *ctx);
os_record *os_record_ref(os_record *rec);
void os_record_unref(os_record *rec); /* accepts NULL */
/* The live record of id (`len` bytes), borrowed, or NULL (unknown, native, deleted). */
os_record *os_record_find(os_ctx *ctx, const char *id, size_t len);
/* The record of a live sandbox (borrowed), NULL: none (native, or its record has gone). */
os_record *os_record_of(const sh_sandbox *sb);
/* Its sandbox (borrowed; NULL once deleted): its cgroup, workspace, exec. */
sh_sandbox *os_record_sandbox(const os_record *rec);
/* The entrypoint's output log (diagnostics scope `container`). */
const sh_ringlog *os_record_container_log(const os_record *rec);

/* A file that keeps something per record (diagnostics.c, the execd files) is told of its
 * changes through an observer: record.c calls nobody by name. A static table, registered once
 * at the surface's start (os_record_observe, before any record); a NULL member is not called. */
typedef struct os_record_observer {
        /* rec changed state (from -> to; its reason, message and time already set). */
        void (*transition)(os_record *rec, os_state from, os_state to);
        /* rec leaves the registry (its sandbox is being deleted; rec->sb is still set during
         * the call): drop or finish what the file keeps for it; the record is freed later. */
        void (*gone)(os_record *rec);
} os_record_observer;
/* Register o (static memory): told of every record from now on. At most
 * OS_OBSERVERS_MAX; one more is a bug of the surface's, said in the log and ignored. */
void os_record_observe(os_ctx *ctx, const os_record_observer *o);

/* Change the state: reason (static or copied) and a message (printf). Every change, also one
 * to the same state, is logged at debug and told to the observers. */
void os_record_set_state(os_record *rec, os_state state, const char *reason, const char *fmt, ...)
        _printf_(4, 5);
/* The fields other files change after the create. The metadata (an object of strings, taken)
 * replaces the old; the entrypoint ended with its exit code (128 + signal, -1: an error). */
void os_record_set_metadata(os_record *rec, cJSON *metadata);
void os_record_entry_ended(os_record *rec, int exit_code);

/* A lifecycle log line about rec, to the daemon's log (level, event, printf), naming the
 * sandbox: its journal keeps it (the diagnostics' `lifecycle` scope). */
#define os_record_log(rec, level, event, ...) sh_log(level, event, (rec)->id, __VA_ARGS__)
/* Delete rec's sandbox as DELETE does (state Terminated, reason given); the record then
 * leaves. 0, or < 0 with err. */
int os_record_delete(os_record *rec, const char *reason, sh_error **err);

/* The record as the YAML's Sandbox (full: image or snapshotId too; else the create's
 * CreateSandboxResponse). NULL when out of memory. */
cJSON *os_record_json(const os_record *rec, bool full);

/* ---- requests and replies (surface.c) ------------------------------------------------------- */

/* Route flags (the surface's bits of sh_route.flags). */
#define OS_R_SANDBOX  SH_ROUTE_SURFACE        /* param 0 is a sandbox id: its record, or 404 */
#define OS_R_EXECD    (SH_ROUTE_SURFACE << 1) /* a sandbox's execd: its token, the paused rule */
#define OS_R_EGRESS   (SH_ROUTE_SURFACE << 2) /* a sandbox's egress API: its token */
#define OS_R_SNAPSHOT (SH_ROUTE_SURFACE << 3) /* param 0 is a snapshot id: another pod's relayed */
#define OS_R_CREATE   (SH_ROUTE_SURFACE << 4) /* a create: handed to a peer when this pod can't */

/* The execd routes' tables (commands.c, files.c, metrics.c, sessions.c): the prefix every
 * route of a sandbox's execd has, its flags, and the methods its wrong-method twin takes. */
#define OS_EXECD_PATH    "/v1/sandboxes/{}/proxy/44772"
#define OS_EXECD_FLAGS   (OS_R_SANDBOX | OS_R_EXECD)
#define OS_EXECD_METHODS (SH_M_GET | SH_M_POST | SH_M_PUT | SH_M_DELETE | SH_M_PATCH)

/* The record of an OS_R_SANDBOX route's request (admitted: a reference held until the
 * request ends), or NULL. */
os_record *os_request_record(const sh_request *r);

/* ---- OpenSandbox's error codes (codes.c, pure) ---------------------------------------------- */

/* Every error the surface answers is one of these: its status and code come from one table
 * (codes.c), with a word on each that OpenSandbox's own servers answer in a way one would not
 * guess. Lifecycle routes speak the lifecycle API's codes, execd and egress routes execd's. */
typedef enum os_code {
        /* the lifecycle API's */
        OS_E_INVALID_REQUEST = 0, /* 400 INVALID_REQUEST */
        OS_E_TOO_LARGE,           /* 413 INVALID_REQUEST */
        OS_E_INVALID_IMAGE,       /* 400 INVALID_IMAGE */
        OS_E_INVALID_METADATA,    /* 400 INVALID_METADATA_FORMAT */
        OS_E_NOT_SUPPORTED,       /* 400 NOT_SUPPORTED */
        OS_E_NO_SUCH_PORT,        /* 404 NOT_SUPPORTED */
        OS_E_NOT_SERVED,          /* 501 NOT_SUPPORTED */
        OS_E_MISSING_API_KEY,     /* 401 MISSING_API_KEY */
        OS_E_INVALID_API_KEY,     /* 401 INVALID_API_KEY */
        OS_E_UNAUTHORIZED,        /* 401 UNAUTHORIZED */
        OS_E_NOT_FOUND,           /* 404 NOT_FOUND */
        OS_E_SANDBOX_NOT_FOUND,   /* 404 SANDBOX_NOT_FOUND */
        OS_E_SNAPSHOT_NOT_FOUND,  /* 404 SNAPSHOT_NOT_FOUND */
        OS_E_METHOD_NOT_ALLOWED,  /* 405 METHOD_NOT_ALLOWED */
        OS_E_INVALID_STATE,       /* 409 INVALID_STATE */
        OS_E_SANDBOX_PAUSED,      /* 409 SANDBOX_PAUSED */
        OS_E_INTERNAL,            /* 500 INTERNAL */
        OS_E_UNAVAILABLE,         /* 503 UNAVAILABLE (+ Retry-After) */
        /* execd's */
        OS_E_BAD_BODY,              /* 400 INVALID_REQUEST_BODY */
        OS_E_BODY_TOO_LARGE,        /* 413 INVALID_REQUEST_BODY */
        OS_E_RANGE_NOT_SATISFIABLE, /* 416 INVALID_REQUEST_BODY */
        OS_E_NO_SUCH_COMMAND,       /* 404 INVALID_REQUEST_BODY */
        OS_E_MISSING_QUERY,         /* 400 MISSING_QUERY */
        OS_E_FILE_NOT_FOUND,        /* 404 FILE_NOT_FOUND */
        OS_E_INVALID_FILE_METADATA, /* 400 INVALID_FILE_METADATA */
        OS_E_CONTEXT_NOT_FOUND,     /* 404 CONTEXT_NOT_FOUND */
        OS_E_RUNTIME,               /* 500 RUNTIME_ERROR */
        OS_E_RUNTIME_RETRY,         /* 503 RUNTIME_ERROR */
        OS_E_COUNT
} os_code;

unsigned os_code_status(os_code c);
const char *os_code_name(os_code c);
/* A kind of the services' errors as a code: the lifecycle API's, or execd's on its routes. */
os_code os_code_of_kind(sh_error_kind kind, bool execd);
/* An errno of a file operation on an execd route (ENOENT FILE_NOT_FOUND, what the kernel
 * refuses of the path INVALID_REQUEST_BODY, EAGAIN RUNTIME_ERROR 503, anything else
 * RUNTIME_ERROR 500). */
os_code os_code_of_file_errno(int errnum);

/* An OpenSandbox error to hand back: status, code and message (the services' functions that
 * fail with an OpenSandbox code fill one; os_reply_err answers with it). */
typedef struct os_err {
        unsigned status;
        const char *code; /* static */
        char message[512];
} os_err;
/* Fill e with code c and a message; returns -1 (for `return os_err_code(...)`). */
int os_err_code(os_err *e, os_code c, const char *fmt, ...) _printf_(3, 4);

/* Answer code c with {code, message} (a 503 also gets Retry-After). 5xx are logged. */
void os_reply_code(sh_request *r, os_code c, const char *fmt, ...) _printf_(3, 4);
void os_reply_err(sh_request *r, const os_err *e);
/* The same as os_err_code and os_reply_code, a status and a code picked by the caller: for the
 * files not moved to the table yet (files*.c). */
int os_err_set(os_err *e, unsigned status, const char *code, const char *fmt, ...) _printf_(4, 5);
void os_reply_error(sh_request *r, unsigned status, const char *code, const char *fmt, ...)
        _printf_(4, 5);
/* The same with one header more (a 416's Content-Range). */
void os_reply_error_header(sh_request *r, unsigned status, const char *code, const char *name,
                           const char *value, const char *msg);
/* An sh_error from a service, mapped by kind (invalid 400, unavailable 503, sandbox-not-found
 * 404, ...). */
void os_reply_sh_error(sh_request *r, const sh_error *err);
void os_reply_json(sh_request *r, unsigned status, cJSON *body);
/* An empty 2xx: exactly one Content-Length: 0 (204 included). */
void os_reply_empty(sh_request *r, unsigned status);

/* A page of a list answer {items, pagination}: os_pager_parse reads `page` (>= 1, default 1)
 * and `pageSize` (1-200, default 20), answering the 400 itself; os_pager_open makes the
 * answer; for every matching item, oldest first, os_pager_take says whether it falls on the
 * page (and counts it) and os_pager_add puts the item built for it in; os_pager_reply adds
 * `pagination` and answers (a failure, out of memory included, answers 500). */
typedef struct os_pager {
        uint64_t page, size, first, total;
        cJSON *out, *items;
} os_pager;
int os_pager_parse(sh_request *r, os_pager *pg);
int os_pager_open(sh_request *r, os_pager *pg);
bool os_pager_take(os_pager *pg);
int os_pager_add(sh_request *r, os_pager *pg, cJSON *item);
void os_pager_reply(sh_request *r, os_pager *pg);

/* ---- across pods (cluster.c) --------------------------------------------------------------- */

/* Whether r is this pod's alone: no peers, or r is hop-marked (a peer's relay or listing). */
bool os_cluster_local_only(const sh_request *r);
/* From admit: relay r to the live peer whose token begins `id` (a sandbox's, or with
 * `snapshot` a snapshot's: its 404 then says so). 1 relayed (admit goes on: the relay has r),
 * 0 not another live pod's (or r is local-only), -1 answered (503 at the relays' bound). */
int os_cluster_relay_owner(sh_request *r, const char *id, size_t len, bool snapshot);
/* The same for a snapshot id ("snap-" + token + ...) of an OS_R_SNAPSHOT route. */
int os_snapshot_relay_owner(sh_request *r, const char *id, size_t len);
/* Whether snapshot `id` was made by a live peer (which then lists and answers for it). */
bool os_snapshot_peer_owned(os_ctx *ctx, const char *id);
/* From the create's handler: a create from a snapshot a live peer made goes to that peer (its
 * store has the snapshot; `body` the create's, as judged). 1 relayed, 0 this pod's, -1
 * answered. */
int os_cluster_create_at_snapshot(sh_request *r, const char *snapshot_id, const cJSON *body);
/* From admit of a create: a draining or full pod hands it to the peer with the most room. 1
 * relayed, 0 this pod answers it (no peer has room: the create's own 503), -1 answered. */
int os_cluster_hand_create(sh_request *r);
/* This pod's part of a list across pods: its first `limit` matching items (page × pageSize: no
 * page of the merged list needs more of any one pod), oldest first, and how many match in all.
 * os_list_want counts a match and says whether to build its item; os_list_push adds it (taken;
 * out of memory, it NULL or no room, the array goes and `items` is NULL: os_cluster_list then
 * answers 500). */
typedef struct os_list {
        cJSON *items;
        uint64_t total, limit;
} os_list;
void os_list_open(os_list *l, const os_pager *pg);
bool os_list_want(os_list *l);
void os_list_push(os_list *l, cJSON *it);
/* Answer a list request with l (its items taken): a local-only request (a peer's) gets them
 * with totalItems l->total; otherwise they are merged with every live peer's local-only part
 * (the same query, hop-marked), ordered by createdAt then id, once per id with `dedupe`, and
 * the page of pg (parsed) answered with totalItems the sum of every pod's. `what` names the
 * list in logs. */
void os_cluster_list(sh_request *r, os_list *l, const os_pager *pg, bool dedupe, const char *what);

/* The request's JSON body (sh_body_buffer routes). Empty or whitespace: NULL with *empty
 * true, nothing answered. Not JSON (not UTF-8, a control character or a \u0000 in any string:
 * sh_json_parse_text): NULL after a 400 INVALID_REQUEST. `code`: the code of that 400
 * (INVALID_REQUEST, execd's INVALID_REQUEST_BODY). */
cJSON *os_json_body(sh_request *r, const char *code, bool *empty);

/* ---- each file's routes (the surface joins them in this order) ------------------------------ */

extern const sh_route os_lifecycle_routes[]; /* lifecycle.c */
extern const size_t os_lifecycle_n_routes;
extern const sh_route os_pause_routes[]; /* pause.c */
extern const size_t os_pause_n_routes;
extern const sh_route os_snapshot_routes[]; /* snapshots.c */
extern const size_t os_snapshot_n_routes;
extern const sh_route os_diag_routes[]; /* diagnostics.c */
extern const size_t os_diag_n_routes;
extern const sh_route os_command_routes[]; /* commands.c, sessions.c, metrics.c (execd.h) */
extern const size_t os_command_n_routes;
extern const sh_route os_session_routes[];
extern const size_t os_session_n_routes;
extern const sh_route os_metrics_routes[];
extern const size_t os_metrics_n_routes;
extern const sh_route os_code_routes[]; /* code.c */
extern const size_t os_code_n_routes;
extern const sh_route os_files_routes[]; /* files.c */
extern const size_t os_files_n_routes;
extern const sh_route os_proxy_routes[]; /* proxy.c: execd and egress */
extern const size_t os_proxy_n_routes;

/* volumes.c: a create's `volumes` (NULL: none) judged, into *ret (malloc'd, the caller frees
 * it; NULL when there are none) and *ret_n: 0, or -1 with e filled (400 INVALID_REQUEST, or
 * NOT_SUPPORTED for ossfs and for host volumes on a host that allows none). */
struct sh_volume;
int os_judge_volumes(const sh_config *cfg, const cJSON *vol, os_record *rec, struct sh_volume **ret,
                     size_t *ret_n, os_err *e);

void os_api_create(sh_request *r); /* create.c */
/* Metadata (an object) under the label rules and the bound, `have` pairs already held: 0, or
 * -1 with e (400 INVALID_METADATA_FORMAT). lifecycle.c */
int os_metadata_check(const cJSON *md, unsigned have, os_err *e);

/* ---- each file's start and end ------------------------------------------------------------- */

/* The surface starts (before any record): diagnostics.c registers its record observer. */
void os_diag_init(os_ctx *ctx);
/* execd.c: rec leaves (its commands, sessions and metrics go; surface.c registers it as an
 * observer's `gone`), and the surface's end. */
void os_execd_record_gone(os_record *rec);

/* snapshots.c: the API's Snapshot object of a snapshot of the store (sandbox-lifecycle.yml),
 * times as RFC 3339. NULL: out of memory. */
struct sh_snapshot;
cJSON *os_snapshot_json(const struct sh_snapshot *s);

/* snapshots.c: a create with `snapshotId`. Before the sandbox is made: find the snapshot
 * (`Ready`), held (not deleted) until os_snapshot_source_free, its tree the create's restore
 * step (o->restore_root and restore_name, the source's until it is freed); or fill e (404
 * SNAPSHOT_NOT_FOUND, 409 INVALID_STATE, ...) and return -1. */
typedef struct os_snapshot_source os_snapshot_source;
int os_snapshot_restore_source(os_ctx *ctx, const char *snapshot_id, sh_create_opts *o,
                               os_snapshot_source **ret, os_err *e);
/* The snapshot's entrypoint (an array of strings, borrowed), or NULL: the create's default. */
const cJSON *os_snapshot_source_entrypoint(const os_snapshot_source *src);
void os_snapshot_source_free(os_snapshot_source *src); /* accepts NULL */

/* ---- pure rules (rules.c) -------------------------------------------------------------------- */

/* Kubernetes label rules (OPENSANDBOX.md section 2): a key (optional DNS-subdomain prefix and
 * '/', a name of at most 63) and a value (empty or a name). The `opensandbox.io/` prefix is
 * reserved. NULL when valid, else why (static). */
const char *os_label_key_invalid(const char *k);
const char *os_label_value_invalid(const char *v);
/* The host image names an image uri maps to, in order (OPENSANDBOX.md section 2): the whole
 * uri with '/' as '_', its last component, that without :tag or @digest; each a valid single
 * path component, duplicates dropped. Writes up to 3 names (each < 256 bytes) into out; returns
 * how many. */
size_t os_image_candidates(const char *uri, char out[3][256]);
