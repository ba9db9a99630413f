/* sandbox-internal.h: what the sandbox layer's two owners share: manager.c (the registry, the
 * state root's directories and trash, the resources every sandbox uses) and sandbox.c (the
 * sandbox object: its fields, its lifecycle, its worker and exec sessions), and remover.c,
 * bgexec.c and usage.c.
 * Nothing outside src/sandbox/ includes it but the unit test of the sandbox object on an env
 * of its own (tests/unit/test_sandbox_env.c). */
#pragma once

#include <sys/stat.h>

#include "sh/cgroup.h"
#include "sh/disk.h"
#include "sh/log.h"
#include "sh/sandbox.h"
#include "sh/proto.h"
#include "sh/seccomp.h"

#define SB_DIR ".sandboxes" /* {root}/.sandboxes: the sandbox directories, by neutral names */

/* ---- manager.c, for sandbox.c ----------------------------------------------------------- */

/* The workspaces in use (sandbox.c), one per manager. */
typedef struct sh_ws_cache sh_ws_cache;

/* The calls a sandbox makes up to whoever made it (the manager): the only two it makes. */
typedef struct sh_sandbox_owner_ops {
        /* A create that cannot complete (or is cancelled) deletes its sandbox, which the owner
         * does (sh_manager_delete): sb is live (not deleted yet). */
        int (*remove)(void *owner, sh_sandbox *sb, sh_error **err);
        /* The last reference to a sandbox whose workspace has a filesystem of its own went:
         * detach it (in a child) and remove the directory, named `dirname` below .sandboxes or
         * `trash_name` (taken; NULL: not moved yet) in the trash. */
        void (*release_dir)(void *owner, const char *dirname, char *trash_name);
} sh_sandbox_owner_ops;

/* What a sandbox needs of the daemon, built once by the manager (sh_manager_new) and handed to
 * every sandbox it makes (sh_sandbox_new), the shape of sh_exec_env: passed in, never reached
 * back for. The manager's memory: it outlives every sandbox. */
typedef struct sh_sandbox_env {
        /* The loop, the cgroup root and the reaper of emptied cgroups: what the sandbox uses
         * itself, and what each of its exec sessions is started with. */
        sh_exec_env exec;
        const sh_config *cfg;
        sh_seccomp *filter;       /* every worker's filter */
        int init_image;           /* sandbox-init's sealed memfd: every worker is exec'd from it */
        const char *tools_dir;    /* {root}/tools: the tool store, read-only in every sandbox */
        sh_disk *disk;            /* how workspaces are limited */
        struct sh_images *images; /* the image store (sh/images.h); NULL: pulls are off */
        /* {root}/.sandboxes (O_DIRECTORY): every sandbox's directory is opened below it by name
         * when it is used. */
        int sandboxes_fd;
        sh_ws_cache *ws_cache;
        /* The step of a create with an item (sh_manager_set_restorer, before any create);
         * start NULL: none. */
        const sh_restorer *restorer;
        const sh_sandbox_owner_ops *owner;
        void *owner_data;
        const char *pod_token; /* SH_POD_TOKEN_LEN hex: the first digits of every id */
        /* The sandboxes' network (network.c): a create with a policy is attached to it once
         * its worker serves; every worker's resolv.conf names its DNS proxy. */
        struct sh_network *network;
} sh_sandbox_env;

/* ---- network.c, for manager.c and sandbox.c ------------------------------------------------- */

/* The network of the manager's sandboxes: always made (0) unless out of memory or a setting is
 * malformed (SANDBOX_HOST_EGRESS_DENY, _ALLOW, _CIDR: -1, the start stops); a host that cannot
 * give sandboxes network gets one that says why (sh_network_supported). */
int sh_network_open(const sh_config *cfg, sh_loop *loop, const char *pod_token,
                    struct sh_network **ret, sh_error **err);
/* Every link and the table go (accepts NULL). */
void sh_network_close(struct sh_network *n);
/* The DNS proxy's address for the workers' resolv.conf (network byte order), 0: none. */
uint32_t sh_network_nameserver(const struct sh_network *n);
/* Give sb its link and place in the table under *p (taken whatever this returns), its network
 * namespace `netns_fd` (borrowed; -1: its worker's, opened by /proc). -1 with *err
 * (SH_E_INVALID: the host has no network). */
int sh_network_attach(struct sh_network *n, sh_sandbox *sb, int netns_fd,
                      struct sh_egress_policy *p, sh_error **err);
/* sb is deleted: its link and its table entries go (nothing when it had none). */
void sh_network_detach(struct sh_network *n, sh_sandbox *sb);
/* Its worker's pid (the daemon's child), or -1. */
pid_t sh_sandbox_worker_pid(const sh_sandbox *sb);

/* ---- podtoken.c, for manager.c ----------------------------------------------------------- */

/* This pod's token, kept in {root}/pod-token (rootfd): read, or made and written atomically
 * when there is none or it is malformed (logged). 0, or -1 with *err. */
int sh_pod_token_load(int rootfd, const char *root, char out[SH_POD_TOKEN_LEN + 1], sh_error **err);

/* ---- journal.c, for manager.c ------------------------------------------------------------ */

/* The manager's tap on the logger (journal.c): each line naming a live sandbox of m that keeps
 * a journal goes into it. */
void sh_journal_tap_init(sh_log_tap *t, sh_manager *m);

/* ---- manager.c, for remover.c ----------------------------------------------------------- */

/* {root}/.trash (O_DIRECTORY, the manager's): deleted sandboxes' trees, leftovers. */
int sh_manager_trash_fd(const sh_manager *m);
/* The removals in the background (remover.c), one set per manager. */
struct sh_removals *sh_manager_removals(const sh_manager *m);

/* ---- sandbox.c, for manager.c ----------------------------------------------------------- */

/* The workspace fds of the sandboxes in use, kept a second after their last use (at most 64;
 * sh_sandbox_open_workspace). NULL when out of memory. _free closes what is kept (accepts
 * NULL). */
sh_ws_cache *sh_ws_cache_new(sh_loop *loop);
void sh_ws_cache_free(sh_ws_cache *c);

/* A new sandbox object for slot (uid and gid from it), with a fresh id; one reference. env
 * (kept, not copied) must outlive it. */
/* An image root's plan held by the sandbox: the copy's strings and pin freed, unpin called
 * (NULL: nothing). _hold_pin: sb (made with root_layers) now holds the create's pin. */
void sh_root_layers_free(sh_root_layers *l);
void sh_sandbox_hold_pin(sh_sandbox *sb, void *pin, void (*unpin)(void *pin));
int sh_sandbox_new(const sh_sandbox_env *env, unsigned slot, const sh_create_opts *o,
                   sh_sandbox **ret, sh_error **err);
/* sb (just made) is of an OCI image: its create pulls it first, with o's credentials (copied
 * until the pull ends), keep_failed and progress. -ENOMEM. */
int sh_sandbox_pull_prepare(sh_sandbox *sb, const sh_create_opts *o);
unsigned sh_sandbox_slot(const sh_sandbox *sb);
/* Its create's place in the order of the creates (a claimed pooled sandbox's: its claim). */
uint64_t sh_sandbox_created(const sh_sandbox *sb);
/* What it was made with: the loop, the settings (bgexec.c, usage.c). */
const sh_sandbox_env *sh_sandbox_host(const sh_sandbox *sb);
/* Its directory, made by the manager: its name below .sandboxes and the identities (st_dev,
 * st_ino) of it and of its workspace (NULL until the disk limit is set up). No fd is kept. */
void sh_sandbox_set_dir(sh_sandbox *sb, const char *dirname, const struct stat *dir,
                        const struct stat *ws);
const char *sh_sandbox_dirname(const sh_sandbox *sb);
/* A new O_PATH fd of its directory, opened now and checked to be the one made for it (the
 * caller closes it); SH_E_SANDBOX_NOT_FOUND once deleted. */
int sh_sandbox_open_dir(sh_sandbox *sb, sh_error **err);
/* loop, tmpfs: the workspace is a filesystem of its own (its trash is beside it). */
bool sh_sandbox_disk_mounted(const sh_sandbox *sb);
/* delete moved its directory to the trash under this name (taken). */
void sh_sandbox_set_trash_name(sh_sandbox *sb, char *name);
/* The removal emptying its trash (remover.c's; it holds a reference of sb), NULL: none. */
void *sh_sandbox_trash_job(const sh_sandbox *sb);
void sh_sandbox_set_trash_job(sh_sandbox *sb, void *job);

/* The create lifecycle: the disk limit (in a child), the worker, the restore, the marker, then
 * done once (sh_manager_create). On failure here nothing has started and done is not called. */
int sh_sandbox_start(sh_sandbox *sb, sh_sandbox_done_fn done, void *data, sh_error **err);
/* The warm pool (manager.c): a sandbox started with default options and handed to nobody
 * yet is marked pooled (never counted, listed or drained as a client's). idle_ready: its
 * worker is up and it does nothing (no create, restore, exec or disk job in flight), so it
 * can be handed out. claim: it becomes a client's create: the create-time env and surface are
 * set (o's; the rest of o is what pool_fits let through), its creation time is now, and done runs once from the loop (as sh_sandbox_start's; an error if
 * the sandbox is deleted first). */
void sh_sandbox_set_pooled(sh_sandbox *sb, bool on);
bool sh_sandbox_pooled(const sh_sandbox *sb);
bool sh_sandbox_idle_ready(const sh_sandbox *sb);
int sh_sandbox_claim(sh_sandbox *sb, const sh_create_opts *o, sh_sandbox_done_fn done, void *data,
                     sh_error **err);
/* A delete begins: from now on sb is deleted (sh_sandbox_deleted). */
void sh_sandbox_set_deleted(sh_sandbox *sb);
/* A delete, once its observers have been told: sb's execs end (in-band error), its disk job is
 * cancelled, its worker and every process of its cgroup killed (not its helpers), and its
 * readiness marker removed, before anything else of its directory. */
void sh_sandbox_kill(sh_sandbox *sb);
/* Its volumes as its worker mounts them (sorted: sh_volumes_sort), *ret_n of them. Whether
 * volume i goes with it: a pvc with deleteOnSandboxTermination whose directory its worker made
 * (SH_MSG_VOLUME_CREATED), or one handed over: _take_over makes its volume of `claim` (if it
 * mounts one) go with it, when the sandbox that made it was deleted first. */
const sh_volume *sh_sandbox_volumes(const sh_sandbox *sb, size_t *ret_n);
bool sh_sandbox_volume_removes(const sh_sandbox *sb, size_t i);
bool sh_sandbox_volume_take_over(sh_sandbox *sb, const char *claim);

/* mounts.c: the volumes (sorted) into the worker's spec: each a base (a host prefix, or
 * SANDBOX_HOST_VOLUME_ROOT for a pvc), the path below it, subPath, mountPath and flags, and the
 * volumes' group; spec->volumes is malloc'd (the caller frees it), NULL when there are none. */
int sh_volumes_spec(const sh_volume *v, size_t n, const sh_config *cfg, sh_worker_spec *spec,
                    sh_error **err);
/* The worker's SETUP_FAILED for volume `i` (step, errnum) as the request's fault: -1 with an
 * SH_E_INVALID error naming the volume and what is wrong with it; 0 (nothing set) when it is
 * not a volume's step, or the errno is a host's fault. */
int sh_volume_failure(const sh_volume *v, size_t n, uint32_t i, int step, int errnum,
                      sh_error **err);
