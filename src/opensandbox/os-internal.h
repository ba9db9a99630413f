/* os-internal.h: what the files of the OpenSandbox surface share: the surface's context, the
 * sandbox records (state machine, times, metadata, token, the entrypoint's output log), the
 * replies in OpenSandbox's shape ({code, message}, X-Request-ID, Content-Length: 0), the route
 * flags and each file's route table, and the hooks between the files (pause.c, snapshots.c and
 * diagnostics.c fill theirs). Nothing outside src/opensandbox/ includes it.
 *
 * Ownership: record.c owns the records and their fields; other files read them and change a
 * record only through the functions here (os_record_set_state, os_record_set_expiry, ...),
 * except the three pointers kept for pause.c, snapshots.c and diagnostics.c (`pause`, `snap`,
 * `diag`), which are theirs alone. */
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
#include "sh/sandbox.h"
#include "sh/util.h"

struct sh_persister;

/* ---- bounds (docs/opensandbox.md "Limits") ------------------------------------------------ */

#define OS_METADATA_MAX   128        /* pairs in one sandbox's metadata */
#define OS_ENTRYPOINT_MAX 256        /* arguments of an entrypoint */
#define OS_CONTAINER_LOG  (1u << 20) /* the entrypoint's output kept (diagnostics `container`) */
#define OS_TOKEN_BYTES    24         /* random bytes of an access token (192 bits) */
#define OS_TOKEN_LEN      (2 * OS_TOKEN_BYTES) /* as hex */
#define OS_REQUEST_ID_MAX 128 /* a client's X-Request-ID longer than this is replaced */
#define OS_RETRY_AFTER    "5" /* seconds, with every 503 */
#define OS_PAGE_SIZE_MAX  200
#define OS_PAGE_SIZE_DEF  20
#define OS_EXECD_PORT     44772
#define OS_EGRESS_PORT    18080
#define OS_SURFACE        "opensandbox" /* its name, also the tag of the sandboxes it makes */

/* ---- the context -------------------------------------------------------------------------- */

typedef struct os_record os_record;
typedef struct os_heap {
        os_record **v; /* a binary min-heap by expires_ms */
        size_t n, cap;
} os_heap;

/* The surface's state (sh_opensandbox): what every handler works with (os_ctx_of). */
typedef struct sh_opensandbox {
        const sh_config *cfg;
        sh_loop *loop;
        sh_manager *mgr;
        struct sh_persister *persister;
        sh_server *srv;               /* its pod_url */
        sh_sandbox_observer observer; /* the manager's deletes end records */
        os_record *records;           /* every record, oldest first (SH_LIST, tail insert) */
        os_record *records_tail;
        unsigned n_records;
        os_record **buckets; /* by id: a power of two, at least twice the host's capacity */
        size_t n_buckets;
        os_heap expiry;     /* records with an expiry, soonest first */
        sh_timer *reaper;   /* armed for the soonest expiry, NULL when none */
        uint64_t reaper_at; /* wall ms the reaper is armed for */
        sh_route *routes;   /* every file's table, one array (the surface's) */
        size_t n_routes;
        unsigned char api_key_hash[32]; /* BLAKE2b of SANDBOX_HOST_API_KEY; never the key */
        bool api_key;                   /* a key is set */
        bool freeing;
        void *snapshots; /* snapshots.c's: the snapshot store */
        void *diag;      /* diagnostics.c's: the tap on the daemon's log */
} os_ctx;

os_ctx *os_ctx_of(const sh_request *r);

/* Wall-clock time (CLOCK_REALTIME) in Unix ms: what createdAt and expiresAt speak. */
uint64_t os_now_wall_ms(void);

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

/* A bounded byte ring: the last `cap` bytes appended; `total` counts every byte ever. Its
 * buffer grows with what it holds (a quiet entrypoint costs nothing), up to cap. */
typedef struct os_ring {
        char *p;
        size_t cap;   /* the bound */
        size_t alloc; /* bytes of p */
        size_t start, len;
        uint64_t total;
} os_ring;
/* Append n bytes (the oldest go past cap). Out of memory: the bytes are counted, not kept. */
void os_ring_append(os_ring *g, const char *p, size_t n);
/* Copy the kept bytes, oldest first, to out (g->len bytes). */
void os_ring_copy(const os_ring *g, char *out);
void os_ring_done(os_ring *g);

/* cmdlog.c: the bounded log of a background command's or an entrypoint's output, in a file
 * of the sandbox's (sh_sandbox_open_log: outside its view, inside its disk limit): the last
 * `max` bytes, the file a ring of max bytes (offset o at o % max). The daemon holds none of
 * its bytes, and no fd of it between uses. Offsets count every byte kept. */
typedef struct os_log {
        uint64_t total; /* the offset after the newest byte kept */
        uint64_t first; /* the offset of the oldest byte kept (total: none) */
        uint64_t max;   /* the bound (> 0) */
        char name[24];  /* its file; "" once dropped */
        bool made;      /* the file exists */
        bool warned;    /* a write fell short, and the log said so */
} os_log;

uint64_t os_log_first(const os_log *g);
uint64_t os_log_kept(const os_log *g); /* total - first */
/* Write n bytes (the last max of them) at the end of the log into fd, its file opened for
 * writing. Returns the bytes kept (fewer than n when the file could not grow: its filesystem
 * is full; what was not written is not counted), or -errno when none could be. */
ssize_t os_log_write(os_log *g, int fd, const char *p, size_t n);
/* Up to n bytes from offset off into out, read from fd (its file): the count, 0 at or past
 * the end, -ESTALE when off is no longer kept (overwritten or dropped), -errno. */
ssize_t os_log_pread(const os_log *g, int fd, uint64_t off, char *out, size_t n);
/* A log of max bytes in the file `name` of the sandbox's log directory, made by its first
 * append (a log that never gets a byte leaves no file). */
void os_log_init(os_log *g, const char *name, uint64_t max);
/* The same, its file made now (empty, new): 0, or -1 with err (the sandbox's disk is full). */
int os_log_create(os_log *g, sh_sandbox *sb, const char *name, uint64_t max, sh_error **err);
/* Append n bytes through sb: the change in bytes kept (what was dropped to make room counts
 * negative). A write that falls short is logged once per log (log_id: the sandbox). */
int64_t os_log_append(os_log *g, sh_sandbox *sb, const char *p, size_t n, const char *log_id);
/* os_log_pread through sb (the file opened and closed in the call). */
ssize_t os_log_read(const os_log *g, sh_sandbox *sb, uint64_t off, char *out, size_t n);
/* Keep nothing more, and remove its file (sb NULL or deleted: the file goes with the
 * sandbox's tree). Returns the bytes it kept. */
uint64_t os_log_drop(os_log *g, sh_sandbox *sb, const char *log_id);

/* One sandbox created through /v1. Lives from the create until its sandbox is deleted (a
 * /v1 or native delete, its expiry, a failed create, shutdown), then leaves the registry
 * (os_record_find no longer finds it) and is freed when its last reference goes. */
struct os_record {
        unsigned refs;
        os_ctx *ctx;
        char id[SH_ID_LEN + 1]; /* its sandbox's remote_id */
        sh_sandbox *sb;         /* a reference; NULL once its sandbox is deleted */
        bool gone;              /* out of the registry */

        /* status */
        os_state state;
        char *reason;           /* machine-readable ("created", "user_delete", ...) */
        char *message;          /* for people */
        uint64_t transition_ms; /* wall ms of the last state change */

        /* what the create asked (kept as given, shown by GET) */
        uint64_t created_ms; /* wall ms */
        uint64_t expires_ms; /* wall ms; 0: no expiry */
        cJSON *metadata;     /* object of strings (owned) */
        char *image_uri;     /* as given; NULL with a snapshot */
        char *snapshot_id;   /* NULL with an image */
        cJSON *entrypoint;   /* array of strings (owned) */
        bool has_platform;
        char platform_os[16], platform_arch[16];
        uint64_t memory_max;    /* its cgroup limit, bytes (lowered to the host's) */
        uint64_t cpu_max_milli; /* its cgroup limit, milli-cores */
        bool secure_access;
        uint64_t renew_extend_s;      /* access.renew.extend.seconds; 0: unset */
        char token[OS_TOKEN_LEN + 1]; /* the access token (never logged) */
        unsigned char token_hash[32]; /* BLAKE2b of it, compared in constant time */

        /* the entrypoint: a background command, its output (stdout + stderr) in a log file */
        sh_exec *entry;
        os_log container;
        bool entry_ended;
        bool entry_throttled; /* paused by the sandbox's read rate (commands.c) */
        int entry_exit;       /* its exit code (128 + signal) once entry_ended */

        /* the expiry heap */
        size_t heap_idx; /* position in ctx->expiry, SIZE_MAX when not in it */

        /* owned by pause.c, snapshots.c and diagnostics.c, each its own (NULL at first) */
        void *pause;
        void *snap;
        void *diag;
        void *execd; /* commands.c's (execd.h: commands, sessions, metrics) */

        SH_LIST_FIELDS(os_record, all);
        os_record *hash_next; /* its bucket's chain */
};

/* A new record (state Pending, its token made, not yet in the registry); one reference. */
int os_record_new(os_ctx *ctx, os_record **ret, sh_error **err);
/* Into the registry (found by id, listed newest last, its expiry armed); takes a reference. */
void os_record_link(os_record *rec);
/* The surface's start and end: observe the manager's deletes; at the end every record goes. */
void os_records_init(os_ctx *ctx);
void os_records_done(os_ctx *ctx);
os_record *os_record_ref(os_record *rec);
void os_record_unref(os_record *rec); /* accepts NULL */
/* The live record of id (`len` bytes), borrowed, or NULL (unknown, native, deleted). */
os_record *os_record_find(os_ctx *ctx, const char *id, size_t len);
/* Every live record, oldest first: `for (rec = os_record_first(ctx); rec; rec =
 * os_record_next(rec))`. The callback must not delete records while iterating. */
os_record *os_record_first(os_ctx *ctx);
os_record *os_record_next(os_record *rec);
/* Its sandbox (borrowed; NULL once deleted): its cgroup, workspace, exec. */
sh_sandbox *os_record_sandbox(const os_record *rec);
/* The entrypoint's output log (diagnostics scope `container`). */
const os_log *os_record_container_log(const os_record *rec);

/* Change the state: reason (static or copied) and a message (printf). Every change, also one
 * to the same state, is logged at debug and told to os_diag_on_transition. */
void os_record_set_state(os_record *rec, os_state state, const char *reason, const char *fmt, ...)
        _printf_(4, 5);
/* Set expiresAt (wall ms; 0: none), at most now + SANDBOX_HOST_MAX_TIMEOUT when that is set,
 * and re-arm the reaper. */
void os_record_set_expiry(os_record *rec, uint64_t expires_ms);
/* A lifecycle log line about rec: to the daemon's log (level, event), and to
 * os_diag_on_log (the `lifecycle` scope of diagnostics). */
void os_record_log(os_record *rec, sh_log_level level, const char *event, const char *fmt, ...)
        _printf_(4, 5);
/* Delete rec's sandbox as DELETE does (state Terminated, reason given); the record then
 * leaves. 0, or < 0 with err. */
int os_record_delete(os_record *rec, const char *reason, sh_error **err);

/* The record as the YAML's Sandbox (full: image or snapshotId too; else the create's
 * CreateSandboxResponse). NULL when out of memory. */
cJSON *os_record_json(const os_record *rec, bool full);

/* ---- requests and replies (surface.c) ------------------------------------------------------- */

/* Route flags (the surface's bits of sh_route.flags). */
#define OS_R_SANDBOX SH_ROUTE_SURFACE        /* param 0 is a sandbox id: its record, or 404 */
#define OS_R_EXECD   (SH_ROUTE_SURFACE << 1) /* a sandbox's execd: its token, the paused rule */
#define OS_R_EGRESS  (SH_ROUTE_SURFACE << 2) /* a sandbox's egress API: its token */

/* The execd routes' tables (commands.c, files.c, metrics.c, sessions.c): the prefix every
 * route of a sandbox's execd has, its flags, and the methods its wrong-method twin takes. */
#define OS_EXECD_PATH    "/v1/sandboxes/{}/proxy/44772"
#define OS_EXECD_FLAGS   (OS_R_SANDBOX | OS_R_EXECD)
#define OS_EXECD_METHODS (SH_M_GET | SH_M_POST | SH_M_PUT | SH_M_DELETE | SH_M_PATCH)

/* The record of an OS_R_SANDBOX route's request (admitted: a reference held until the
 * request ends), or NULL. */
os_record *os_request_record(const sh_request *r);

/* An OpenSandbox error to hand back: status, code and message (the services' functions that
 * fail with an OpenSandbox code fill one; os_reply_err answers with it). */
typedef struct os_err {
        unsigned status;
        const char *code; /* static */
        char message[512];
} os_err;
/* Fill e; returns -1 (for `return os_err_set(...)`). */
int os_err_set(os_err *e, unsigned status, const char *code, const char *fmt, ...) _printf_(4, 5);

/* Answer {code, message} (a 503 also gets Retry-After). 5xx are logged. */
void os_reply_error(sh_request *r, unsigned status, const char *code, const char *fmt, ...)
        _printf_(4, 5);
void os_reply_err(sh_request *r, const os_err *e);
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

/* The request's JSON body (sh_body_buffer routes). Empty or whitespace: NULL with *empty
 * true, nothing answered. Not JSON (not UTF-8, a control character or a \u0000 in any string:
 * sh_json_parse_text): NULL after a 400 INVALID_REQUEST. `code`: the code of that 400
 * (INVALID_REQUEST, execd's INVALID_REQUEST_BODY). */
cJSON *os_json_body(sh_request *r, const char *code, bool *empty);

/* RFC 3339 in UTC with milliseconds ("2026-01-02T03:04:05.678Z") of wall ms. */
void os_time_format(uint64_t ms, char out[32]);
/* An RFC 3339 date-time (any offset, any fraction) as Unix ms. 0 or -EINVAL. */
int os_time_parse(const char *s, uint64_t *ret_ms);

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
extern const sh_route os_files_routes[]; /* files.c */
extern const size_t os_files_n_routes;
extern const sh_route os_proxy_routes[]; /* proxy.c: execd and egress */
extern const size_t os_proxy_n_routes;

void os_api_create(sh_request *r); /* create.c */
/* Metadata (an object) under the label rules and the bound, `have` pairs already held: 0, or
 * -1 with e (400 INVALID_METADATA_FORMAT). lifecycle.c */
int os_metadata_check(const cJSON *md, unsigned have, os_err *e);

/* ---- hooks between the files ----------------------------------------------------------------- */

/* diagnostics.c: every state change of rec (from -> to, with its reason and message set). */
void os_diag_on_transition(os_record *rec, os_state from, os_state to);
/* diagnostics.c: every lifecycle log line about rec (os_record_log), without its newline. */
void os_diag_on_log(os_record *rec, sh_log_level level, const char *event, const char *line);

/* Each of pause.c, snapshots.c and diagnostics.c: rec leaves the registry (its sandbox is
 * being deleted; rec->sb is still set during the call): drop or finish what the file keeps for
 * it (rec->pause, rec->snap, rec->diag); the record itself is freed later. */
void os_pause_record_gone(os_record *rec);
void os_snapshot_record_gone(os_record *rec);
void os_diag_record_gone(os_record *rec);
/* snapshots.c and diagnostics.c: the surface starts (before any record): the snapshot store
 * opened (its records read), the log tap set. 0, or -1 with err. */
int os_snapshot_init(os_ctx *ctx, sh_error **err);
int os_diag_init(os_ctx *ctx, sh_error **err);
/* Each: the surface goes (shutdown, after every record has gone). */
void os_pause_free_all(os_ctx *ctx);
void os_snapshot_free_all(os_ctx *ctx);
void os_diag_free_all(os_ctx *ctx);
/* commands.c (issue 13): the same for a sandbox's commands, sessions and metrics. */
void os_execd_record_gone(os_record *rec);
void os_execd_free_all(os_ctx *ctx);

/* snapshots.c: a create with `snapshotId`. Before the sandbox is made: find the snapshot
 * (`Ready`), or fill e (404 SNAPSHOT_NOT_FOUND, 409 INVALID_STATE, ...) and return -1. The
 * source (snapshots.c's) is kept by the create until os_snapshot_source_free. */
typedef struct os_snapshot_source os_snapshot_source;
int os_snapshot_restore_source(os_ctx *ctx, const char *snapshot_id, os_snapshot_source **ret,
                               os_err *e);
/* The snapshot's entrypoint (an array of strings, borrowed), or NULL: the create's default. */
const cJSON *os_snapshot_source_entrypoint(const os_snapshot_source *src);
/* Once the new sandbox runs (default image, state Pending): copy the snapshot's workspace
 * into rec's workspace; `done` once, from the loop, never before this returns (e NULL on
 * success). 0, or -1 with e filled (done is then not called). */
typedef void (*os_restore_done_fn)(os_record *rec, const os_err *e, void *data);
int os_snapshot_restore_start(os_snapshot_source *src, os_record *rec, os_restore_done_fn done,
                              void *data, os_err *e);
void os_snapshot_source_free(os_snapshot_source *src); /* accepts NULL */

/* ---- pure rules (rules.c) -------------------------------------------------------------------- */

/* A Kubernetes quantity ("500m", "1.5", "2Gi", "1G", "262144Ki", "1e3") times `scale` (1000:
 * CPU in milli-cores; 1: bytes), rounded up, saturating at UINT64_MAX. 0 or -EINVAL. */
int os_quantity_parse(const char *s, uint64_t scale, uint64_t *ret);
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
