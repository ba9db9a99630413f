/* persist.h: restore and persist of a sandbox's workspace through rsync (CONTRACT.md section
 * 5): {nfs_root}/{item_id}/ <-> {root}/{id}/workspace/. rsync runs as confined child processes
 * (never blocking the loop); persists of one sandbox are serialized, persists of different
 * sandboxes run in parallel up to a limit, the rest queue. */
#pragma once

#include <stdbool.h>

#include "sh/config.h"
#include "sh/error.h"
#include "sh/loop.h"
#include "sh/sandbox.h"

typedef struct sh_persister sh_persister;

/* Called from the loop when the operation has ended: err NULL on success. */
typedef sh_sandbox_done_fn sh_persist_done_fn;

/* The daemon's persister (daemon.c builds one), working for m's sandboxes: it observes m's
 * deletes (sh_persist_forget) and buries its helpers' cgroups through m. cfg, loop and m must
 * outlive it. */
int sh_persister_new(const sh_config *cfg, sh_loop *loop, sh_manager *m, sh_persister **ret,
                     sh_error **err);
/* Kills running rsyncs and ends every job: each callback runs now with an unavailable error.
 * Before the manager goes. Accepts NULL. */
void sh_persister_free(sh_persister *p);

/* Restore the item's archive into sb's (empty) workspace and re-own everything to sb->owner.
 * No archive directory yet: success, nothing copied. An archive path that is not a
 * directory, or an rsync failure: err set. */
int sh_persist_restore(sh_persister *p, sh_sandbox *sb, sh_persist_done_fn done, void *data,
                       sh_error **err);

/* Persist sb's workspace to its item's archive: additive (delete false) or reconciling
 * (delete true: the archive ends equal to the workspace). The sandbox is frozen for the
 * duration through a freeze hold (sh_sandbox_freeze_hold), always released: a sandbox paused
 * before or meanwhile stays frozen. Failures are SH_E_PERSIST_FAILED with the tail of rsync's
 * stderr in the message. */
int sh_persist_save(sh_persister *p, sh_sandbox *sb, bool delete_extra, sh_persist_done_fn done,
                    void *data, sh_error **err);

/* The same jobs against a directory of the caller's: {root}/{item}/ instead of the sandbox's
 * archive item (snapshots: the snapshot root and the snapshot's id). root is absolute, item
 * one name of the item-id syntax ([A-Za-z0-9][A-Za-z0-9._-]{0,127}), else invalid. Jobs of
 * one sandbox, and of one root and item, never overlap.
 *
 * save_to: reconciling (the directory ends equal to the workspace), frozen like every
 * persist, and with no readiness rule: the workspace is copied whether or not it carries the
 * marker (the rule guards the sandbox's own archive item, which this is not). The helper makes
 * root (with its parents) when it is missing: the daemon never touches it from the loop. */
int sh_persist_save_to(sh_persister *p, sh_sandbox *sb, const char *root, const char *item,
                       sh_persist_done_fn done, void *data, sh_error **err);
/* restore_from: as sh_persist_restore (re-owned to the sandbox), but a missing directory is a
 * failure, not an empty restore. */
int sh_persist_restore_from(sh_persister *p, sh_sandbox *sb, const char *root, const char *item,
                            sh_persist_done_fn done, void *data, sh_error **err);

/* Every callback runs from the loop, never inside these calls. A sandbox deleted while its job
 * waits or runs ends that job with SH_E_SANDBOX_NOT_FOUND (noticed within 200 ms even when
 * nobody calls sh_persist_forget). */

/* sb is going away: cancel its queued work and stop its running rsync (SIGTERM to every rsync
 * process, so rsync removes its temporary file; SIGKILL to its PID namespace 3 s later). The
 * callbacks still run, later, from the loop, with SH_E_SANDBOX_NOT_FOUND, so that a suspended
 * request is always answered. p may be NULL. */
void sh_persist_forget(sh_persister *p, sh_sandbox *sb);
