/* snapstore.h: the snapshot store: records of copies of sandboxes' workspaces kept in a
 * directory of the caller's (the /v1 surface's snapshots, OPENSANDBOX.md 2.1; the copies are
 * the persister's jobs against that directory, sh_persist_save_to and the create's restore
 * step). Every snapshot's record is in memory, and on disk as {root}/{id}.json beside its tree
 * {root}/{id}/. The records are read once at start (a hostile or corrupt file is skipped with
 * a log line, and nothing in one is ever used as a path: a record's file name is its validated
 * id); every later write (a record, the removal of one, the move of a tree into {root}/.trash,
 * the root itself) is made by a child process, in order, because the root may be on NFS and
 * the loop never waits for NFS. The copies are the persister's (snapshot.c, at the end). What a
 * snapshot looks like to a client is the surface's. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/error.h"
#include "sh/list.h"
#include "sh/loop.h"
#include "sh/persist.h"
#include "sh/util.h"

#define SH_SNAP_PREFIX     "snap-"
#define SH_SNAP_ID_LEN     (sizeof(SH_SNAP_PREFIX) - 1 + SH_ID_LEN) /* snap- + 128 bits in hex */
#define SH_SNAP_MAX        1024 /* records one store holds; more on disk are skipped at load */
#define SH_SNAP_NAME_MAX   256  /* bytes of a name */
#define SH_SNAP_TEXT_MAX   1024 /* bytes of a reason or a message */
#define SH_SNAP_ENTRY_MAX  (8 * 1024)  /* bytes of an entrypoint kept (as JSON), else none */
#define SH_SNAP_ENTRY_ARGS 256         /* its arguments */
#define SH_SNAP_RECORD_MAX (16 * 1024) /* bytes of a record file; a larger one is skipped */
#define SH_SNAP_TRASH      ".trash" /* {root}/.trash: trees of deleted snapshots, removed later */

typedef enum { SH_SNAP_CREATING = 0, SH_SNAP_READY, SH_SNAP_FAILED } sh_snap_state;

typedef struct sh_snapshot {
        char id[SH_SNAP_ID_LEN + 1];
        char sandbox_id[SH_ID_LEN + 1];
        char *name; /* NULL: none */
        sh_snap_state state;
        char *reason;           /* machine-readable reason of the state */
        char *message;          /* NULL: none */
        uint64_t created_ms;    /* Unix time in ms */
        uint64_t transition_ms; /* the last change of state */
        cJSON *entrypoint;      /* the source's entrypoint (strings), NULL: not kept */
        unsigned restoring;     /* sandboxes being made from it: it cannot be deleted */
        void *job;              /* Creating: the caller's copy in progress */
        SH_LIST_FIELDS(struct sh_snapshot, snaps);
} sh_snapshot;

typedef struct sh_snapstore sh_snapstore;
struct sh_waiter;

/* ---- pure: ids, states, records ------------------------------------------------------ */

/* "snap-" + SH_ID_LEN lower-case hex digits. */
bool sh_snap_id_valid(const char *s, size_t len);
const char *sh_snap_state_name(sh_snap_state s);
/* The state of a name ("Creating", "Ready", "Failed"); -1 for any other. */
int sh_snap_state_parse(const char *s);
/* A name a client may give: 1..SH_SNAP_NAME_MAX bytes of UTF-8 without control characters. */
bool sh_snap_name_valid(const char *s, size_t len);

/* The record file's JSON: {"version": 1, "id", "sandboxId", "name"?, "state", "reason",
 * "message"?, "createdAtMs", "lastTransitionAtMs", "entrypoint"?}. NULL: out of memory. */
cJSON *sh_snap_record(const sh_snapshot *s);
/* A record file's text (`len` bytes, not trusted: any bytes) read under the name `file_id`
 * ("<id>.json" without ".json"): a new snapshot, or invalid with why. The id must be the file's
 * name, every field valid; a record of a copy that was still Creating comes back Failed (the
 * daemon that made it stopped before the copy ended). */
int sh_snap_parse_record(const char *text, size_t len, const char *file_id, sh_snapshot **ret,
                         sh_error **err);
void sh_snapshot_free(sh_snapshot *s);

/* ---- the store ------------------------------------------------------------------------ */

/* Open the store at `root` (absolute): its records read (at most SH_SNAP_MAX, oldest first),
 * the only time the daemon itself touches the root, so it blocks on the root's file system:
 * call it at start, before serving. A root that does not exist holds none (the first write
 * makes it, with its .trash, 0700); one that cannot be read is logged, not an error. `loop`
 * runs the writers (NULL: the writes wait for sh_snapstore_free). `token` (SH_POD_TOKEN_LEN
 * lower-case hex, copied: the manager's pod token) begins every id this store mints. */
int sh_snapstore_open(const char *root, sh_loop *loop, const char *token, sh_snapstore **ret,
                      sh_error **err);
/* Waits (bounded) for the writer running and makes the writes still queued itself: for the
 * shutdown, after the loop has stopped. Accepts NULL. */
void sh_snapstore_free(sh_snapstore *st);

const char *sh_snapstore_root(const sh_snapstore *st);
/* {root}/.trash (for the tree remover, which opens it itself). */
const char *sh_snapstore_trash_dir(const sh_snapstore *st);
unsigned sh_snapstore_count(const sh_snapstore *st);
/* All records, oldest first (created_ms, then id). */
sh_snapshot *sh_snapstore_first(sh_snapstore *st);
sh_snapshot *sh_snapstore_next(sh_snapshot *s);
sh_snapshot *sh_snapstore_get(sh_snapstore *st, const char *id, size_t len);
/* The snapshots of sandbox `sandbox_id` still Creating (their copies in progress). */
unsigned sh_snapstore_creating(sh_snapstore *st, const char *sandbox_id);

/* A new Creating snapshot of sandbox `sandbox_id` with `name` (NULL: none) and the sandbox's
 * entrypoint (NULL, or one longer than SH_SNAP_ENTRY_MAX as JSON: not kept), its record
 * queued for writing. Unavailable above SH_SNAP_MAX. */
int sh_snapstore_add(sh_snapstore *st, const char *sandbox_id, const char *name,
                     const cJSON *entrypoint, sh_snapshot **ret, sh_error **err);
/* A new state (Ready or Failed) with its reason and message (NULL: none); the record queued
 * for writing. */
int sh_snapstore_set_state(sh_snapstore *st, sh_snapshot *s, sh_snap_state state,
                           const char *reason, const char *message, sh_error **err);
/* Forget s now (freed) and queue, in order: its tree moved into {root}/.trash/{id}, its record
 * removed. `moved` runs from the loop once the tree is in the trash (not when there was
 * none), with the trash's name for it, so that the caller can remove it in the background. */
typedef void (*sh_snap_moved_fn)(sh_snapstore *st, const char *trash_name, void *data);
int sh_snapstore_remove(sh_snapstore *st, sh_snapshot *s, sh_snap_moved_fn moved, void *data,
                        sh_error **err);
/* Queue the move of s's tree into the trash (a Failed copy's partial tree), as for remove,
 * keeping the record. */
int sh_snapstore_drop_tree(sh_snapstore *st, sh_snapshot *s, sh_snap_moved_fn moved, void *data,
                           sh_error **err);
/* Every write queued so far is on disk (or failed, logged): for tests. */
bool sh_snapstore_idle(const sh_snapstore *st);
/* w told from the loop once every op queued so far is done (a removal's tree in the trash):
 * true; false when none is queued (the caller tells w itself). */
bool sh_snapstore_wait(sh_snapstore *st, struct sh_waiter *w);

/* ---- the copies, on the persister (snapshot.c) --------------------------------------- */

/* The store of the daemon's snapshots, where the settings say (SANDBOX_HOST_SNAPSHOT_ROOT, else
 * {nfs_root}/.snapshots, else {root}/snapshots), opened with p's loop (sh_snapstore_open: call
 * it at start); what deletes of an earlier run left in its trash is removed by p's manager. */
int sh_snapshots_open(sh_persister *p, sh_snapstore **ret, sh_error **err);
/* Take a snapshot of sb: a new Creating record (sh_snapstore_add: name, the entrypoint to
 * restore with), then p's frozen copy of sb's workspace into {root}/{id}/ (sh_persist_save_to);
 * its end is sh_snapstore_copy_end's. A copy that cannot start: internal, the record gone. */
int sh_snapshot_take(sh_persister *p, sh_snapstore *st, sh_sandbox *sb, const char *name,
                     const cJSON *entrypoint, sh_snapshot **ret, sh_error **err);
/* The end of s's copy (cerr NULL: it worked): Ready; or Failed, its reason why (sandbox_deleted,
 * snapshot_interrupted at shutdown, else snapshot_capture_failed) and its partial tree dropped
 * (sh_snapstore_drop_tree: `moved` told). Logged, naming the sandbox. */
int sh_snapstore_copy_end(sh_snapstore *st, sh_snapshot *s, const sh_error *cerr,
                          sh_snap_moved_fn moved, void *data, sh_error **err);
/* sh_snapstore_remove, its tree removed in the background by p's manager's confined remover. */
int sh_snapshot_remove(sh_persister *p, sh_snapstore *st, sh_snapshot *s, sh_error **err);
