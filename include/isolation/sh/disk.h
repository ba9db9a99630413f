/* disk.h: the disk limit of every workspace (SANDBOX_HOST_DISK_MAX, SANDBOX_HOST_DISK_INODES_MAX),
 * held by the kernel with one mechanism chosen at start: project quota on the state root's
 * filesystem, an ext4 image per sandbox on a loop device, or a tmpfs per sandbox. A limit no
 * mechanism here can hold stops the start (an sh_error of kind SH_E_SETTING: exit 2).
 *
 * A sandbox directory `dir` ({root}/.sandboxes/N) holds:
 *   dir/workspace   the workspace: a directory (none, project), or a bind mount of
 *                   dir/disk/workspace (loop, tmpfs)
 *   dir/disk        loop, tmpfs: the sandbox's own filesystem, mounted nosuid,nodev; its root
 *                   holds `workspace`, `.trash` (trees that DELETE /dir removes in the
 *                   background, on the same filesystem, out of the sandbox's sight) and
 *                   `.logs` (the daemon's files of the sandbox: its command logs)
 *   dir/logs        project: the command logs, in the workspace's project (charged to its
 *                   limit); none: the same directory, made on first use, with no limit
 *   dir/disk/root   loop, tmpfs, for a sandbox whose root is an image's layers: `upper` and
 *   dir/root        `work` of its overlay root (root's; inside its limit: on its filesystem,
 *                   or in the workspace's project); none: dir/root, made by the sandbox
 * Every mount, loop device and image is made in a child process, never on the loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sh/config.h"
#include "sh/error.h"
#include "sh/loop.h"

typedef enum {
        SH_DISK_NONE,    /* no limit (configured so, or DISK_MAX=auto found nothing to hold one) */
        SH_DISK_PROJECT, /* project quota of the state root's filesystem */
        SH_DISK_LOOP,    /* an ext4 image per sandbox, on a loop device */
        SH_DISK_TMPFS,   /* a tmpfs per sandbox (memory) */
} sh_disk_mode;

typedef struct sh_disk sh_disk;

/* Choose and prepare the mechanism for cfg's limit on the state root (rootfd, at `root`).
 * Loop: makes the template image (once) and tries it; project: checks enforcement, tries a
 * quota, drops CAP_SYS_RESOURCE (it ignores quota limits) from the daemon for good. Blocking:
 * for start-up only. A configured limit nothing can hold: -1, err of kind SH_E_SETTING.
 * DISK_MAX=auto: the limit is sh_config_disk_auto of the state root's filesystem, and where
 * nothing can hold it (DISK_QUOTA=auto, neither project quota nor loop devices), no limit:
 * 0, mode SH_DISK_NONE and sh_disk_why_none says why. */
int sh_disk_open(const sh_config *cfg, int rootfd, const char *root, sh_disk **ret, sh_error **err);
void sh_disk_free(sh_disk *d);

sh_disk_mode sh_disk_get_mode(const sh_disk *d);
/* The limit held (bytes, whole 4 KiB blocks; inodes): 0 with SH_DISK_NONE. */
uint64_t sh_disk_size(const sh_disk *d);
uint64_t sh_disk_inodes(const sh_disk *d);
/* With SH_DISK_NONE after DISK_MAX=auto found nothing to hold a limit: why (one line, with
 * each mechanism's reason), else NULL. */
const char *sh_disk_why_none(const sh_disk *d);
/* CAP_SYS_RESOURCE ignores quota limits: dropped for good (the bounding set too) by a daemon
 * that holds any by project quota (a workspace's, a named volume's). 0 or -1 with errno. */
int sh_disk_drop_sys_resource(void);
/* "none", "project", "loop", "tmpfs" */
const char *sh_disk_mode_name(sh_disk_mode m);
/* loop and tmpfs: the workspace is a filesystem of its own, mounted below the sandbox dir. */
bool sh_disk_mounted(const sh_disk *d);

/* One setup: in a child (loop, project), or done inline and its end still to be told (tmpfs). */
typedef struct sh_disk_job sh_disk_job;
/* err NULL on success; projid is the project id given (project mode), else 0. */
typedef void (*sh_disk_done_fn)(const sh_error *err, uint32_t projid, void *data);

/* Give the workspace of the sandbox directory `dirfd` (O_PATH) its limit, in a child (tmpfs:
 * right here, a mount and a few directories, no child's fork and exit): loop and tmpfs mount
 * dir/disk and bind dir/disk/workspace (owned by uid:gid) at dir/workspace;
 * project picks the first of base + slot, base + max + slot that holds nothing (a removed
 * sandbox's tree may still be charged to the other), sets its limits and gives it to
 * dir/workspace (inherited) and to dir/logs (made). root: also an overlay root's upper and
 * work (dir/disk/root/, or dir/root/ in the project). `done` runs from the loop when the
 * child has ended (tmpfs: from the loop's next turn), never before this returns. */
int sh_disk_setup(sh_disk *d, sh_loop *l, int dirfd, uid_t uid, gid_t gid, unsigned slot, bool root,
                  sh_disk_done_fn done, void *data, sh_disk_job **ret, sh_error **err);
/* SIGKILL the child (tmpfs: nothing left to stop); `done` still runs, with an error. */
void sh_disk_job_cancel(sh_disk_job *j);

/* Unmount every mount at each of `paths` (absolute, in the daemon's namespace), in a child
 * that waits (bounded) until nothing of this namespace uses it: whatever the kernel then
 * frees (writeback, the loop device, the image) is freed there or by the last other process
 * that still uses the filesystem (a dying worker's namespace), never on the loop. The paths
 * are copied. `done` runs from the loop when the child has ended (ok: every mount is gone). */
int sh_disk_detach(sh_loop *l, char *const *paths, size_t n, void (*done)(bool ok, void *data),
                   void *data, sh_error **err);

/* Pure: the mount points of /proc/self/mountinfo text that lie strictly below `prefix` (an
 * absolute path ending in '/'), unescaped, deepest first. A new array of new strings; free
 * with sh_disk_strv_free. 0 or -ENOMEM. */
int sh_disk_mounts_below(const char *mountinfo, const char *prefix, char ***ret, size_t *ret_n);
/* The same over this process's /proc/self/mountinfo. */
int sh_disk_mounts_below_self(const char *prefix, char ***ret, size_t *ret_n, sh_error **err);
void sh_disk_strv_free(char **v, size_t n);
