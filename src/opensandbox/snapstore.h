/* snapstore.h: the snapshot store of the /v1 surface (OPENSANDBOX.md 2.1): every snapshot's
 * record in memory, and on disk as {root}/{id}.json beside its tree {root}/{id}/. The records
 * are read once at start (a hostile or corrupt file is skipped with a log line, and nothing
 * in one is ever used as a path: a record's file name is its validated id); every later write
 * (a record, the removal of one, the move of a tree into {root}/.trash, the root itself) is
 * made by a child process, in order, because the root may be on NFS and the loop never waits
 * for NFS. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/error.h"
#include "sh/list.h"
#include "sh/loop.h"
#include "sh/util.h"

#define OS_SNAP_PREFIX     "snap-"
#define OS_SNAP_ID_LEN     (sizeof(OS_SNAP_PREFIX) - 1 + SH_ID_LEN) /* snap- + 128 bits in hex */
#define OS_SNAP_MAX        1024 /* records one store holds; more on disk are skipped at load */
#define OS_SNAP_NAME_MAX   256  /* bytes of a name */
#define OS_SNAP_TEXT_MAX   1024 /* bytes of a reason or a message */
#define OS_SNAP_ENTRY_MAX  (8 * 1024)  /* bytes of an entrypoint kept (as JSON), else none */
#define OS_SNAP_ENTRY_ARGS 256         /* its arguments */
#define OS_SNAP_RECORD_MAX (16 * 1024) /* bytes of a record file; a larger one is skipped */
#define OS_SNAP_TRASH      ".trash" /* {root}/.trash: trees of deleted snapshots, removed later */
#define OS_SNAP_TIME_LEN   80       /* room for os_snap_time() whatever the year */

typedef enum { OS_SNAP_CREATING = 0, OS_SNAP_READY, OS_SNAP_FAILED } os_snap_state;

typedef struct os_snapshot {
        char id[OS_SNAP_ID_LEN + 1];
        char sandbox_id[SH_ID_LEN + 1];
        char *name; /* NULL: none */
        os_snap_state state;
        char *reason;           /* machine-readable reason of the state */
        char *message;          /* NULL: none */
        uint64_t created_ms;    /* Unix time in ms */
        uint64_t transition_ms; /* the last change of state */
        cJSON *entrypoint;      /* the source's entrypoint (strings), NULL: not kept */
        unsigned restoring;     /* sandboxes being made from it: it cannot be deleted */
        void *job;              /* Creating: the caller's copy in progress */
        SH_LIST_FIELDS(struct os_snapshot, snaps);
} os_snapshot;

typedef struct os_snapstore os_snapstore;

/* ---- pure: ids, states, records ------------------------------------------------------ */

/* "snap-" + SH_ID_LEN lower-case hex digits. */
bool os_snap_id_valid(const char *s, size_t len);
const char *os_snap_state_name(os_snap_state s);
/* The state of a name ("Creating", "Ready", "Failed"); -1 for any other. */
int os_snap_state_parse(const char *s);
/* A name a client may give: 1..OS_SNAP_NAME_MAX bytes of UTF-8 without control characters. */
bool os_snap_name_valid(const char *s, size_t len);

/* The record file's JSON: {"version": 1, "id", "sandboxId", "name"?, "state", "reason",
 * "message"?, "createdAtMs", "lastTransitionAtMs", "entrypoint"?}. NULL: out of memory. */
cJSON *os_snap_record(const os_snapshot *s);
/* A record file's text (`len` bytes, not trusted: any bytes) read under the name `file_id`
 * ("<id>.json" without ".json"): a new snapshot, or invalid with why. The id must be the file's
 * name, every field valid; a record of a copy that was still Creating comes back Failed (the
 * daemon that made it stopped before the copy ended). */
int os_snap_parse_record(const char *text, size_t len, const char *file_id, os_snapshot **ret,
                         sh_error **err);
/* The API's Snapshot object (sandbox-lifecycle.yml), times as RFC 3339. NULL: out of memory. */
cJSON *os_snap_json(const os_snapshot *s);
/* A Unix time in ms as RFC 3339 UTC with milliseconds ("2026-03-25T10:01:13.042Z"). */
void os_snap_time(uint64_t ms, char buf[OS_SNAP_TIME_LEN]);
void os_snapshot_free(os_snapshot *s);

/* ---- the store ------------------------------------------------------------------------ */

/* Open the store at `root` (absolute): its records read (at most OS_SNAP_MAX, oldest first),
 * the only time the daemon itself touches the root, so it blocks on the root's file system:
 * call it at start, before serving. A root that does not exist holds none (the first write
 * makes it, with its .trash, 0700); one that cannot be read is logged, not an error. `loop`
 * runs the writers (NULL: the writes wait for os_snapstore_free). */
int os_snapstore_open(const char *root, sh_loop *loop, os_snapstore **ret, sh_error **err);
/* Waits (bounded) for the writer running and makes the writes still queued itself: for the
 * shutdown, after the loop has stopped. Accepts NULL. */
void os_snapstore_free(os_snapstore *st);

const char *os_snapstore_root(const os_snapstore *st);
/* {root}/.trash (for the tree remover, which opens it itself). */
const char *os_snapstore_trash_dir(const os_snapstore *st);
unsigned os_snapstore_count(const os_snapstore *st);
/* All records, oldest first (created_ms, then id). */
os_snapshot *os_snapstore_first(os_snapstore *st);
os_snapshot *os_snapstore_next(os_snapshot *s);
os_snapshot *os_snapstore_get(os_snapstore *st, const char *id, size_t len);

/* A new Creating snapshot of sandbox `sandbox_id` with `name` (NULL: none) and the sandbox's
 * entrypoint (NULL, or one longer than OS_SNAP_ENTRY_MAX as JSON: not kept), its record
 * queued for writing. Unavailable above OS_SNAP_MAX. */
int os_snapstore_add(os_snapstore *st, const char *sandbox_id, const char *name,
                     const cJSON *entrypoint, os_snapshot **ret, sh_error **err);
/* A new state (Ready or Failed) with its reason and message (NULL: none); the record queued
 * for writing. */
int os_snapstore_set_state(os_snapstore *st, os_snapshot *s, os_snap_state state,
                           const char *reason, const char *message, sh_error **err);
/* Forget s now (freed) and queue, in order: its tree moved into {root}/.trash/{id}, its record
 * removed. `moved` runs from the loop once the tree is in the trash (not when there was
 * none), with the trash's name for it, so that the caller can remove it in the background. */
typedef void (*os_snap_moved_fn)(os_snapstore *st, const char *trash_name, void *data);
int os_snapstore_remove(os_snapstore *st, os_snapshot *s, os_snap_moved_fn moved, void *data,
                        sh_error **err);
/* Queue the move of s's tree into the trash (a Failed copy's partial tree), as for remove,
 * keeping the record. */
int os_snapstore_drop_tree(os_snapstore *st, os_snapshot *s, os_snap_moved_fn moved, void *data,
                           sh_error **err);
/* Every write queued so far is on disk (or failed, logged): for tests. */
bool os_snapstore_idle(const os_snapstore *st);
