/* persist-internal.h: what persist.c (the loop side) and confine.c (the child side) share. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Exit codes of the confined helper besides rsync's own (0..35) and 128 + signal. */
#define SH_PERSIST_EXIT_NO_ARCHIVE 124 /* restore: no archive directory yet (not an error) */
#define SH_PERSIST_EXIT_SETUP      125 /* the helper failed before rsync ran; why is on fd 2 */

typedef struct sh_persist_child_arg {
        bool restore;      /* archive -> workspace; else workspace -> archive */
        bool delete_extra; /* persist only: reconcile (--delete-after) */
        uid_t uid;         /* restore: the sandbox's owner */
        gid_t gid;
        const char *rsync;    /* absolute host path of the rsync binary */
        const char *nfs_root; /* the archive root */
        const char *item_id;  /* validated: [A-Za-z0-9][A-Za-z0-9._-]{0,127} */
} sh_persist_child_arg;

/* The helper child: fd 3 is the workspace (O_PATH), fd 4 the output pipe (moved to 1 and 2). Builds a
 * minimal root in its own mount namespace, runs rsync as PID 1 of a new PID namespace and
 * exits with rsync's exit code (128 + N when rsync died of signal N), or one of the codes
 * above. SIGTERM kills rsync and everything it forked. */
int sh_persist_child_main(void *arg);
