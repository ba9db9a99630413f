/* volquota.h: a size limit on a named volume (pvc.storage, issue 25) as a project quota on
 * its directory, where the volume root's file system enforces project quota (ext4 mounted
 * prjquota, XFS pquota; never NFS). The daemon asks once, at start (sh_volquota_probe);
 * sandbox-init's worker, which made the claim's directory, puts it under a project of its
 * own (sh_volquota_set). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* How many project ids the named volumes may take, from the spec's first one: a range above
 * every workspace's (SANDBOX_HOST_DISK_PROJECT_BASE + 2 x MAX_SANDBOXES). */
#define SH_VOLQUOTA_IDS 65536u

/* 0 when the file system of dirfd (not O_PATH) enforces project quota (quotactl_fd
 * Q_XGETQSTATV PRJQUOTA, enforcement on); -1 with why in why[size], naming `where` ("the
 * state root"). The workspaces' probe (disk.c) asks it first too. */
int sh_volquota_probe(int dirfd, const char *where, char *why, size_t size);

/* dirfd (an O_RDONLY fd of a directory just made, nothing in it yet) under a project of its
 * own: the first id from first + hint % SH_VOLQUOTA_IDS on (wrapping in the range) with nothing
 * charged to it (a removed claim's id is free again, its old limit replaced), given a block hard limit of `bytes` (whole KiB, rounded
 * up; at least one), then set on the directory with FS_XFLAG_PROJINHERIT (what is made below
 * inherits it). The caller serialises the choice (a lock on the volume root). 0 and *id, or
 * -1 with errno (ENOSPC: every id of the range is taken); on failure no limit is left set. */
int sh_volquota_set(int dirfd, uint32_t first, uint32_t hint, uint64_t bytes, uint32_t *id);
