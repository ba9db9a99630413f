/* sandbox-internal.h: what the sandbox layer's two owners share: manager.c (the registry, the
 * state root's directories and trash, the resources every sandbox uses) and sandbox.c (the
 * sandbox object: its fields, its lifecycle, its worker and exec sessions). Nothing outside
 * src/sandbox/ includes it. */
#pragma once

#include "sh/cgroup.h"
#include "sh/disk.h"
#include "sh/sandbox.h"
#include "sh/seccomp.h"

#define SB_DIR ".sandboxes" /* {root}/.sandboxes: the sandbox directories, by neutral names */

/* ---- manager.c, for sandbox.c ----------------------------------------------------------- */

sh_seccomp *sh_manager_filter(const sh_manager *m);
int sh_manager_init_image(const sh_manager *m); /* sandbox-init's sealed memfd */
const char *sh_manager_tools_dir(const sh_manager *m);
sh_disk *sh_manager_disk(const sh_manager *m);
const sh_restorer *sh_manager_restorer(const sh_manager *m); /* start NULL: none */
/* The last reference to a sandbox whose workspace has a filesystem of its own went: detach it
 * (in a child) and remove the directory, named `dirname` below .sandboxes or `trash_name`
 * (taken; NULL: not moved yet) in the trash. */
void sh_manager_release_dir(sh_manager *m, const char *dirname, char *trash_name);

/* ---- sandbox.c, for manager.c ----------------------------------------------------------- */

/* A new sandbox object for slot (uid and gid from it), with a fresh id; one reference. */
int sh_sandbox_new(sh_manager *m, unsigned slot, const sh_create_opts *o, sh_sandbox **ret,
                   sh_error **err);
unsigned sh_sandbox_slot(const sh_sandbox *sb);
/* Its directory, made by the manager: its name below .sandboxes, an O_PATH fd, the workspace
 * (O_PATH, or -1 until the disk limit is set up). The fds are taken. */
void sh_sandbox_set_dir(sh_sandbox *sb, const char *dirname, int dirfd, int wsfd);
const char *sh_sandbox_dirname(const sh_sandbox *sb);
int sh_sandbox_dirfd(const sh_sandbox *sb);
/* loop, tmpfs: the workspace is a filesystem of its own (its trash is beside it). */
bool sh_sandbox_disk_mounted(const sh_sandbox *sb);
/* delete moved its directory to the trash under this name (taken). */
void sh_sandbox_set_trash_name(sh_sandbox *sb, char *name);

/* The create lifecycle: the disk limit (in a child), the worker, the restore, the marker, then
 * done once (sh_manager_create). On failure here nothing has started and done is not called. */
int sh_sandbox_start(sh_sandbox *sb, sh_sandbox_done_fn done, void *data, sh_error **err);
/* The warm pool (manager.c): a sandbox started with default options and handed to nobody
 * yet is marked pooled (never counted, listed or drained as a client's). idle_ready: its
 * worker is up and it does nothing (no create, restore, exec or disk job in flight), so it
 * can be handed out. claim: it becomes a client's create: the create-time env is set, its
 * creation time is now, and done runs once from the loop (as sh_sandbox_start's; an error if
 * the sandbox is deleted first). */
void sh_sandbox_set_pooled(sh_sandbox *sb, bool on);
bool sh_sandbox_pooled(const sh_sandbox *sb);
bool sh_sandbox_idle_ready(const sh_sandbox *sb);
int sh_sandbox_claim(sh_sandbox *sb, const cJSON *env, sh_sandbox_done_fn done, void *data,
                     sh_error **err);
/* A delete begins: from now on sb is deleted (sh_sandbox_deleted). */
void sh_sandbox_set_deleted(sh_sandbox *sb);
/* A delete, once its observers have been told: sb's execs end (in-band error), its disk job is
 * cancelled, its worker and every process of its cgroup killed (not its helpers), and its
 * readiness marker removed, before anything else of its directory. */
void sh_sandbox_kill(sh_sandbox *sb);
