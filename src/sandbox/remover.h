/* remover.h: the background removals of trees moved into a trash (manager.c): the state root's,
 * a sandbox's own, or a caller's by its path. */
#pragma once

#include "sh/sandbox.h"

/* Each removal runs in a background child confined as every root helper (sh/helper.h): its own
 * cgroup (below its sandbox's when it works for one, billed to it; else below the daemon's
 * subtree with limits of its own), network namespace and a seccomp allow-list. The loop never
 * waits for it and never removes anything inline. A removal that fails, or whose child cannot
 * be started, is tried again with backoff (250 ms, doubling, up to 10 tries), then given up
 * with an error log line; what is left stays in the trash (the next start empties the state
 * root's; a sandbox's goes with its directory). */
typedef struct sh_removals sh_removals;

/* The removals of manager m (NULL when out of memory). _free: after sh_removals_stop and
 * sh_child_wait_all; logs whatever is left. */
sh_removals *sh_removals_new(sh_manager *m);
void sh_removals_free(sh_removals *rs);

/* Remove {root}/.trash/{name} (name NULL: everything in it): a deleted sandbox's tree or a
 * leftover, for no sandbox. Returns 0 (or -1 with err when out of memory). */
int sh_remover_start(sh_manager *m, const char *name, sh_error **err);
/* The same for the trash at the path `dir`, which the child opens (never the daemon: it may be
 * on NFS); absent, there is nothing to do. For no sandbox. */
int sh_remover_start_at(sh_manager *m, const char *dir, const char *name, sh_error **err);
/* Empty sb's trash (sh_sandbox_open_trash), billed to sb: one removal at a time per sandbox;
 * asked again while one runs, it runs once more when it ends. Nothing once sb is deleted. */
void sh_remover_sandbox(sh_manager *m, sh_sandbox *sb);
/* The same, and w told once a try that began after now has ended (sh_manager_trash_wait).
 * false: nothing runs for sb's trash (deleted, stopping, out of memory). */
bool sh_remover_sandbox_wait(sh_manager *m, sh_sandbox *sb, sh_waiter *w);

/* Close fd, an unnamed file's whose blocks must not be freed on the loop, through a child: the
 * child holds it until the daemon's own copy is closed, and its exit drops the last reference.
 * For a file no trash can take (its sandbox is gone). */
void sh_remover_close(sh_manager *m, int fd);

/* Removals not finished (a try running, or waiting for the next). */
unsigned sh_removals_pending(const sh_removals *rs);
/* Shutdown: the tries waiting start now; a failure is retried after 100 ms. */
void sh_removals_hurry(sh_removals *rs);
/* No more tries (the loop has stopped): removals waiting for one are logged as left (and what
 * starts later too); the children running finish (sh_child_wait_all waits for them). */
void sh_removals_close(sh_removals *rs);
/* The same, and the running children are killed: waiting removals logged as left (and what
 * starts later too); the killed ones are logged as left when they are reaped. */
void sh_removals_stop(sh_removals *rs);
