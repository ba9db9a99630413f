/* remover.h: background removal of trees moved into the state root's trash (manager.c). */
#pragma once

#include "sh/sandbox.h"

/* Remove {trash}/{name} (name NULL: everything in the trash) in a background child confined
 * as every root helper (sh/helper.h): its own cgroup, network namespace and a seccomp
 * allow-list. sb: the sandbox the work is for (DELETE /dir): the child's cgroup is a helper
 * cgroup below the sandbox's, billed to it, and sb is referenced until the child ends. NULL:
 * the sandbox is gone (or the tree is a leftover): a helper cgroup below the daemon's subtree
 * with limits of its own. If no child can be started, a named tree stays in the trash (the
 * next start empties it) and 0 is returned: never removed inline. The loop never waits for
 * the child. */
int sh_remover_start(sh_manager *m, int trashfd, sh_sandbox *sb, const char *name, sh_error **err);
/* The same for the trash at the path `dir`, which the child opens (never the daemon: it may be
 * on NFS); absent, there is nothing to do. For no sandbox. */
int sh_remover_start_at(sh_manager *m, const char *dir, const char *name, sh_error **err);
