/* sandbox.h: the sandbox registry (id -> sandbox), its limits and lifecycle. A sandbox is
 * {root}/{id}/ holding `workspace/` (the agent's files) and `.ready` (the readiness marker,
 * outside the workspace so no sandbox process can forge it). {root}/{id} is a link to the
 * directory's real place, {root}/.sandboxes/{n}, a name with nothing of the id in it: the
 * workspace's mount inside the sandbox shows that path, and the id is the API's only
 * credential. Sandbox objects are opaque (sandbox.c) and refcounted: requests and execs
 * hold references across suspensions. The registry is manager.c's. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "sh/config.h"
#include "sh/error.h"
#include "sh/exec.h"
#include "sh/fsops.h"
#include "sh/list.h"
#include "sh/loop.h"
#include "sh/ring.h"
#include "sh/util.h"
#include "sh/volume.h"
#include "sh/waiter.h"

/* The sandbox object is sandbox.c's alone: everything else uses the functions below. */
typedef struct sh_sandbox sh_sandbox;
typedef struct sh_manager sh_manager;

/* A sandbox's root made of read-only image layers (the image store fills it; the sandbox layer
 * does not know the store): an overlay of `lowers` with an upper of the sandbox's own inside its
 * disk limit, mounted nosuid,nodev at its root, the workspace, /tmp, /proc, /dev and tools
 * mounted on top as on a host image. */
#define SH_ROOT_LAYERS_MAX 128 /* lowers of one root (the images' layer bound) */
typedef struct sh_root_layers {
        /* Absolute: the store's layers directory (PID 1 chdirs here). */
        char *dir;
        /* Relative to dir, the LOWEST layer first ("<hex>/root"): components of
         * [A-Za-z0-9._-], none "." or "..", at most SH_ROOT_LAYERS_MAX of them. */
        char **lowers;
        size_t n_lowers;
        /* The image config's Env, "K=V": the base of every command's env. */
        char **env;
        size_t n_env;
        /* Absolute: the default cwd of /v1 commands; NULL: none. */
        char *workdir;
        /* Held for the sandbox's life: unpin(pin) once it is gone (unpin NULL: nothing). */
        void *pin;
        void (*unpin)(void *pin);
} sh_root_layers;

/* SH_E_INVALID (the reason said) when l is not a plan a create takes: dir absolute, 1 to
 * SH_ROOT_LAYERS_MAX lowers of plain relative names, workdir absolute, env "NAME=value"
 * entries within SH_SANDBOX_ENV_MAX and SH_SANDBOX_ENV_BYTES (defined below). */
int sh_root_layers_check(const sh_root_layers *l, sh_error **err);

typedef struct sh_create_opts {
        const char *image; /* NULL or "default": the default image */
        /* NULL: `image` names the root. Else the root is these layers (image is then only
         * reported): the create copies the strings and takes the pin, whatever it returns
         * (unpin is called once the sandbox is gone, or at once when the create fails). */
        const sh_root_layers *root_layers;
        const char *item_id; /* NULL: none (validated by the caller) */
        const cJSON *env;    /* NULL or an object of strings (validated by the caller) */
        /* This sandbox's own cgroup limits, lowered to the host's SANDBOX_HOST_MEMORY_MAX and
         * SANDBOX_HOST_CPU_MAX; 0: the host's. */
        uint64_t memory_max;    /* bytes */
        uint64_t cpu_max_milli; /* cores x 1000 */
        /* The surface that makes it, a static name ("opensandbox"); NULL: the native contract.
         * The sandbox layer only keeps it (sh_sandbox_surface): what a sandbox made through one
         * surface may do on another is that surface's decision (native.c's admission). */
        const char *surface;
        /* A directory of the creator's whose tree is restored into the new workspace instead of
         * an item's archive, {restore_root}/{restore_name} (a snapshot's: the /v1 surface's);
         * a missing one fails the create. NULL: none. The creator keeps it until done. */
        const char *restore_root;
        const char *restore_name;
        /* An image that is an OCI reference (sh_manager_image_kind) is pulled first: these are
         * that pull's credentials (/v1's image.auth), copied for the pull only, never kept past
         * it nor logged; NULL: the host's (SANDBOX_HOST_REGISTRY_AUTH). */
        const char *pull_username;
        const char *pull_password;
        /* A create whose pull fails keeps its sandbox, failed (sh_sandbox_failed), until it is
         * deleted; done still gets the error. false: the sandbox goes (the native create). */
        bool keep_failed;
        /* The pull's progress, told from the loop with the create's data: a layer's digest, its
         * bytes so far and its size (0: not known). NULL: nothing. */
        void (*pull_progress)(void *data, const char *layer, uint64_t done, uint64_t total);
        /* Network (sh/network.h): NULL, loopback only (the native surface's); else the sandbox
         * gets its link under this policy (copied) once its worker serves, before its create
         * ends; a host without network support fails the create (SH_E_INVALID). */
        const struct sh_egress_policy *egress;
        /* Volumes (sh/volume.h: the surface judged each field; sh_volumes_check holds, host
         * bases are SANDBOX_HOST_VOLUME_HOST_ALLOW's prefixes, at most SANDBOX_HOST_VOLUME_MAX:
         * else SH_E_INVALID), copied. The worker mounts them, parents first, before its root
         * is pivoted to; their processes get the volumes' group (SANDBOX_HOST_UID_BASE - 1).
         * A create with volumes never takes a pooled sandbox. NULL/0: none. */
        const sh_volume *volumes;
        size_t n_volumes;
} sh_create_opts;

/* The daemon's fds an idle sandbox holds: its worker's control socket. Nothing else is held
 * between requests: its directories and cgroups are opened on demand, its worker is reaped by
 * pid (sh_child_adopt), and running commands hold their pipes only while they run. */
#define SH_SANDBOX_FDS 1

/* A create's env (sh_create_opts.env), which the sandbox keeps and every command carries: at
 * most this many variables, and this many bytes ("NAME=value\0" each), half of what one
 * exec's argv and env may take together (SH_EXEC_MSG_MAX): a larger one could run nothing. */
#define SH_SANDBOX_ENV_MAX   1024
#define SH_SANDBOX_ENV_BYTES (64 * 1024)
/* SH_E_INVALID when env (NULL: none) is over those bounds; sh_manager_create checks it. */
int sh_sandbox_env_check(const cJSON *env, sh_error **err);
/* Why env (NULL: none) is not an env a command takes, an object of strings whose names are
 * non-empty and hold no '=' (the reason, to follow the field's name), or NULL. */
const char *sh_env_shape_why(const cJSON *env);

/* Open (creating) the state root, remove leftovers of an earlier run. */
int sh_manager_new(const sh_config *cfg, sh_loop *loop, sh_manager **ret, sh_error **err);
/* Deletes every sandbox, waits for background removals. */
void sh_manager_free(sh_manager *m);

/* The end of a create (or of a restore): err NULL on success. */
typedef void (*sh_sandbox_done_fn)(sh_sandbox *sb, const sh_error *err, void *data);

/* The restore step of a create, between its worker's ready and its answer (the persister's,
 * given by daemon.c): the item's archive (start: NULL when there is no archive root, and an
 * item is then not restored), then the readiness marker; or a directory of the creator's
 * (start_dir, sh_create_opts.restore_root). Each calls done once, from the loop, never before
 * it returns. */
typedef struct sh_restorer {
        int (*start)(void *impl, sh_sandbox *sb, sh_sandbox_done_fn done, void *data,
                     sh_error **err);
        int (*start_dir)(void *impl, sh_sandbox *sb, const char *root, const char *name,
                         sh_sandbox_done_fn done, void *data, sh_error **err);
        void *impl;
} sh_restorer;
void sh_manager_set_restorer(sh_manager *m, const sh_restorer *r);

/* The images a create may ask (sh_create_opts.image): "default" (also NULL), or one path
 * component naming a directory below SANDBOX_HOST_IMAGES. _names: theirs, "default" first,
 * ", " between them, into out (bounded: "..." when cut), for a refusal's message. */
bool sh_manager_image_exists(const sh_manager *m, const char *image);
/* What a create's image name is: SH_IMAGE_HOST (also NULL and "default"), SH_IMAGE_PULLED (an
 * OCI reference, pulled into the image store unless there; docs/images.md), or -1 with an
 * SH_E_INVALID error saying why it is neither (not a reference, pulls off). */
enum { SH_IMAGE_HOST = 0, SH_IMAGE_PULLED = 1 };
int sh_manager_image_kind(const sh_manager *m, const char *image, sh_error **err);
/* Every image named in SANDBOX_HOST_PREPULL is in the store (/readyz waits for it). */
bool sh_manager_images_ready(const sh_manager *m);
void sh_manager_image_names(const sh_manager *m, char *out, size_t size);

/* Create a sandbox and bring it up: its workspace's disk limit (in a child), its worker, and
 * the restore step (a directory's, or with an item and an archive the item's, then the
 * readiness marker). Unavailable when
 * draining or full; invalid for an unknown image. On success *ret holds a reference and `done`
 * runs once, from the loop (never before this returns): err NULL once the sandbox serves, or
 * err set when it could not be made (the sandbox is then deleted already; deleted by someone
 * else meanwhile: unavailable). */
int sh_manager_create(sh_manager *m, const sh_create_opts *o, sh_sandbox_done_fn done, void *data,
                      sh_sandbox **ret, sh_error **err);
/* The creator is gone before done: the sandbox is deleted, and done will not be called. */
void sh_sandbox_create_cancel(sh_sandbox *sb);

/* The manager's shared state, for what works beside the sandboxes (the persister, the
 * removers, daemon.c); a sandbox and its exec sessions get theirs at their making. */
struct sh_cgroup_root *sh_manager_cgroups(sh_manager *m);
const sh_config *sh_manager_config(const sh_manager *m);
sh_loop *sh_manager_loop(const sh_manager *m);
/* This pod's token (cluster.h): SH_POD_TOKEN_LEN lower-case hex digits, made once per state
 * root and kept in {root}/pod-token; the first digits of every sandbox and snapshot id. */
const char *sh_manager_pod_token(const sh_manager *m);
/* Queue a cgroup for removal once it is empty (retried from the loop). Takes ownership. */
void sh_manager_bury_cgroup(sh_manager *m, struct sh_cgroup *cg);

/* Look up a live sandbox by id bytes; a new reference or NULL. */
sh_sandbox *sh_manager_get(sh_manager *m, const char *id, size_t len);

/* Delete: marker first, then the tree (moved out at once, removed in the background). */
int sh_manager_delete(sh_manager *m, sh_sandbox *sb, sh_error **err);
void sh_manager_delete_all(sh_manager *m);

/* DELETE /dir: move the directory at workspace path `path` out of the workspace at once (into
 * the sandbox's trash, same filesystem: sh_sandbox_open_trash) and remove it in the
 * background. */
int sh_manager_remove_dir(sh_manager *m, sh_sandbox *sb, const char *path, sh_error **err);

/* Something was moved into sb's trash (sh/trash.h) and waits for a remover: one empties it, in
 * the background (a confined child billed to sb, one at a time per sandbox: more entries
 * meanwhile make it run once more), retried with backoff if it fails. Nothing to do once sb is
 * deleted: its trash goes with its directory. */
void sh_manager_trash_kick(sh_manager *m, sh_sandbox *sb);

/* sh_manager_trash_kick, and w (sh/waiter.h: a request's answer, which waits until what it
 * moved into sb's trash is gone, as when the daemon freed it itself) told once a removal of sb's
 * trash that began after now has ended (whether or not it removed everything: one that fails is
 * retried, nobody waits for that), or sb's trash is no longer the manager's to empty (deleted,
 * shutdown). false: there is nothing to wait for (w is not told). w NULL: the kick alone. */
bool sh_manager_trash_wait(sh_manager *m, sh_sandbox *sb, sh_waiter *w);

/* fd (taken) is an unnamed file given up (a cut or refused upload, a refused replace). Its
 * blocks are freed when its last fd closes, so a big one (sh/trash.h) is linked into sb's trash
 * for its remover, or, when there is none (sb deleted, NULL), closed through a child that holds
 * it last; a small one is closed here. */
void sh_manager_discard_unnamed(sh_manager *m, sh_sandbox *sb, int fd);

/* Removals not finished yet (running, or waiting for a retry), and the disk teardowns that
 * will start some: a clean shutdown waits for them, bounded (daemon.c). */
bool sh_manager_removing(const sh_manager *m);
/* Shutdown begins: removals waiting for a retry start now, and one that fails again is retried
 * after a short pause, not its backoff, while the daemon waits. */
void sh_manager_removals_hurry(sh_manager *m);
/* The shutdown's bound passed: removers still at work are killed, and what is left is logged
 * (it stays in the trash: the next start with this state root removes it). */
void sh_manager_removals_stop(sh_manager *m);

/* Remove the tree `name` below the directory `trash_dir` (a trash of the caller's, such as the
 * snapshot root's: names in it are the caller's to give) in the background, by the same
 * confined child as the state root's trash (its own cgroup, network namespace and seccomp
 * allow-list: the tree is hostile, a sandbox wrote it); NULL: everything in it. The child
 * opens trash_dir (it may be on NFS: never the loop); absent, nothing is done. A tree no child
 * could be started for stays there. */
int sh_manager_remove_trashed(sh_manager *m, const char *trash_dir, const char *name,
                              sh_error **err);

/* Something that wants to know of every delete (the persister cancels the sandbox's rsync
 * work; later surfaces keep records of their sandboxes). The observer is the caller's memory,
 * linked into the manager's list until sh_manager_unobserve. */
typedef struct sh_sandbox_observer {
        /* Called by sh_manager_delete for every sandbox deleted, before its processes are
         * killed. Must not delete sandboxes or (un)register observers. */
        void (*deleted)(sh_sandbox *sb, void *data);
        void *data;
        SH_LIST_FIELDS(struct sh_sandbox_observer, observers);
} sh_sandbox_observer;

void sh_manager_observe(sh_manager *m, sh_sandbox_observer *o);
void sh_manager_unobserve(sh_manager *m, sh_sandbox_observer *o);

unsigned sh_manager_count(const sh_manager *m);
bool sh_manager_full(const sh_manager *m);
bool sh_manager_draining(const sh_manager *m);
void sh_manager_set_draining(sh_manager *m, bool on);
/* Every live sandbox, oldest create first (a pooled sandbox's create is its claim): *ret an
 * array of *ret_n borrowed sandboxes the caller frees. 0, or -ENOMEM. */
int sh_manager_list(sh_manager *m, sh_sandbox ***ret, size_t *ret_n);
/* Visit every live sandbox. */
void sh_manager_foreach(sh_manager *m, void (*fn)(sh_sandbox *sb, void *data), void *data);

sh_sandbox *sh_sandbox_ref(sh_sandbox *sb);
/* Accepts NULL. */
void sh_sandbox_unref(sh_sandbox *sb);

/* Accessors. */
const char *sh_sandbox_id(const sh_sandbox *sb);      /* the remote_id */
const char *sh_sandbox_item_id(const sh_sandbox *sb); /* NULL: none */
const char *sh_sandbox_surface(const sh_sandbox *sb); /* sh_create_opts.surface */
/* The default cwd of its /v1 commands that name none: its root layers' workdir; NULL: none (a
 * host image, or an image without one). Native exec keeps its contract's default. */
const char *sh_sandbox_workdir(const sh_sandbox *sb);
/* Its create waits for its image's pull (the sandbox has no worker yet). */
bool sh_sandbox_pulling(const sh_sandbox *sb);
/* Why its create failed, when it was kept failed (sh_create_opts.keep_failed); else NULL. */
const char *sh_sandbox_failed(const sh_sandbox *sb);
/* What a layer above keeps for a sandbox (the /v1 surface's record), found through the
 * registry's look-up (sh_manager_get) rather than a second registry of the surface's: ptr
 * under key (the address of a static object of the attacher's), replacing what the key held
 * (freed with its own free_fn); free_fn (NULL: none) runs when the sandbox object is freed
 * with ptr still attached. sh_sandbox_attached: the data (borrowed), NULL: none.
 * sh_sandbox_detach: the data is the caller's again (not freed), NULL: there was none. */
int sh_sandbox_attach(sh_sandbox *sb, const void *key, void *ptr, void (*free_fn)(void *),
                      sh_error **err);
void *sh_sandbox_attached(const sh_sandbox *sb, const void *key);
void *sh_sandbox_detach(sh_sandbox *sb, const void *key);
/* The workspace: every client path resolves below it (fs/safe_open.c). A new O_PATH fd,
 * opened now by name below the state root and checked to be the directory made for this
 * sandbox (the caller closes it, before it drops its reference): the daemon holds no fd of an
 * idle sandbox's workspace. SH_E_SANDBOX_NOT_FOUND once deleted, SH_E_UNAVAILABLE before its
 * disk limit is set up or when out of fds, SH_E_INTERNAL when the directory is not the one. */
int sh_sandbox_open_workspace(sh_sandbox *sb, sh_error **err);
/* The sandbox's root as its PID 1 sees it: a new O_PATH fd the caller closes, opened now. The
 * OpenSandbox file API resolves the sandbox's own absolute paths below it, through the mounts
 * of its namespace. -1 (errno set) before ready, once its worker is dead, or once deleted. */
int sh_sandbox_open_root(const sh_sandbox *sb);
/* The files the daemon keeps for a sandbox (the /v1 surface's command logs): in a directory
 * of the sandbox's that its view never shows, on the filesystem of its disk limit, so that
 * what they hold is charged to that limit (none: no limit, the caller bounds them). `name` is
 * one component of [A-Za-z0-9._-] not starting with '.'; `flags` are open(2)'s (O_CREAT makes
 * it, mode 0600, root's). A new fd the caller closes, opened now through fs/safe_open.c (no
 * link followed): nothing is held between uses. SH_E_SANDBOX_NOT_FOUND once deleted. */
int sh_sandbox_open_log(sh_sandbox *sb, const char *name, int flags, sh_error **err);
/* Remove it (absent is fine). */
int sh_sandbox_remove_log(sh_sandbox *sb, const char *name, sh_error **err);
/* uid/gid of the sandbox's processes and files. */
const sh_fs_owner *sh_sandbox_owner(const sh_sandbox *sb);
/* The volumes' group (SANDBOX_HOST_UID_BASE - 1), its processes' one supplementary group, when
 * it mounts a volume; else 0. */
gid_t sh_sandbox_volume_gid(const sh_sandbox *sb);
/* The sandbox's trash (a new O_RDONLY|O_DIRECTORY fd; the caller closes it): a directory of its
 * workspace's filesystem, on the mount sh_sandbox_open_workspace's fd is on, outside the
 * workspace (no sandbox process reaches it) and inside the workspace's disk limit (or charged
 * to its project). SH_E_SANDBOX_NOT_FOUND once deleted. Entries moved there are freed by
 * sh_manager_trash_kick's remover. */
int sh_sandbox_open_trash(sh_sandbox *sb, sh_error **err);
bool sh_sandbox_deleted(const sh_sandbox *sb);
/* The same, or -1, logged: what would go there is then freed in place (a live sandbox always
 * has one; should it fail to open, the operation goes on as it did before there was one). */
int sh_sandbox_trash_or_none(sh_sandbox *sb);

/* sb's trash reached from its processes' view of a directory, an sh_fs_ctx's `trash` hook (data:
 * the view; trash -1 before the first call). Paths resolved below the sandbox's root (the /v1
 * surface's) pass its /workspace, a bind mount of its own on which no trash is: what a replace or
 * a delete in directory *pfd leaves goes through the daemon's own view of that directory (the
 * same inode, below its fd of the workspace: sh_fs_view_dir), on whose mount sb's trash is
 * (opened once): *pfd becomes that view and *ret_trashfd the trash. *ret_trashfd -1 when *pfd is
 * not in the workspace (its /tmp, a tmpfs of at most min(256 MiB, memory/2): 256 MiB frees in
 * 36-52 ms here, in place). -ECANCELED: sb deleted (refused's kind SH_E_SANDBOX_NOT_FOUND) or
 * its workspace not available (refused says why); -EAGAIN: the directory kept moving. */
typedef struct sh_sandbox_trash_view {
        sh_sandbox *sb;    /* borrowed */
        int trash;         /* sb's trash once opened, else -1 */
        sh_error *refused; /* why the last call was -ECANCELED (NULL: out of memory) */
} sh_sandbox_trash_view;
int sh_sandbox_trash_of_view(void *data, int *pfd, int *ret_trashfd);
void sh_sandbox_trash_view_done(sh_sandbox_trash_view *v);
/* Its cgroup (NULL until its worker is being started): persist freezes it, helpers go below. */
struct sh_cgroup *sh_sandbox_cgroup(const sh_sandbox *sb);
/* Its own limits as its cgroup holds them (the create's, lowered to the host's maxima). */
uint64_t sh_sandbox_memory_max(const sh_sandbox *sb);
uint64_t sh_sandbox_cpu_max_milli(const sh_sandbox *sb);

/* Freeze holds: while at least one is held (a persist reading the workspace, a pause), the
 * sandbox's processes are frozen; its helpers (rsync working for it) are not. The first hold
 * asks the kernel to freeze and never waits; _poll tells whether the freeze is complete (and
 * asks again for exec cgroups made meanwhile); the last release thaws, never an earlier one.
 * A hold needs the sandbox's cgroup (its worker started). A delete kills frozen processes as
 * any others (the kill thaws); the holders still release their holds. */
int sh_sandbox_freeze_hold(sh_sandbox *sb, sh_error **err);
int sh_sandbox_freeze_poll(sh_sandbox *sb, bool *ret_frozen, sh_error **err);
/* Releasing a hold not taken does nothing. */
int sh_sandbox_freeze_release(sh_sandbox *sb, sh_error **err);
/* How many holds are taken. */
unsigned sh_sandbox_freeze_holds(const sh_sandbox *sb);

/* Pause: a freeze hold of its own, and `done` once every process is frozen (err NULL), or
 * once the freeze failed or did not complete within 5 s (err set; the hold given back then).
 * Resume: that hold given back (the sandbox thaws unless another holder keeps it frozen: a
 * persist's copy thaws it when it ends), `done` from the next turn of the loop. Each calls
 * done once, from the loop; invalid while paused (pause) or not paused (resume, a pause still
 * freezing included). A delete ends either without its done; the kill thaws. */
int sh_sandbox_pause(sh_sandbox *sb, sh_sandbox_done_fn done, void *data, sh_error **err);
int sh_sandbox_resume(sh_sandbox *sb, sh_sandbox_done_fn done, void *data, sh_error **err);

/* Its expiry: deleted at this wall time (Unix ms; 0: never), as sh_manager_delete deletes
 * (sh_sandbox_expired then says why), by one loop timer of its own. No expiry is later than
 * now + SANDBOX_HOST_MAX_TIMEOUT when that is set. _renew moves an expiry to at least
 * now + extend_ms (never earlier; a sandbox without one keeps none). */
void sh_sandbox_set_expiry(sh_sandbox *sb, uint64_t wall_ms);
void sh_sandbox_renew(sh_sandbox *sb, uint64_t extend_ms);
uint64_t sh_sandbox_expiry(const sh_sandbox *sb);
bool sh_sandbox_expired(const sh_sandbox *sb);

/* A sandbox's journal (journal.c; the /v1 diagnostics): from sh_sandbox_journal_keep on,
 * every line of the daemon's log that names it, and the events its surface notes
 * (sh_sandbox_journal_note: a line, its newline added), each kept in a bounded ring (the last
 * SH_JOURNAL_LOG_MAX and SH_JOURNAL_EVENTS_MAX bytes) until the sandbox goes. Keeping it
 * twice is keeping it once. sh_sandbox_journal: the part's ring (borrowed), NULL: none kept. */
#define SH_JOURNAL_LOG_MAX    (128u << 10)
#define SH_JOURNAL_EVENTS_MAX (32u << 10)
typedef enum { SH_JOURNAL_LOG = 0, SH_JOURNAL_EVENTS } sh_journal_part;
int sh_sandbox_journal_keep(sh_sandbox *sb, sh_error **err);
void sh_sandbox_journal_note(sh_sandbox *sb, const char *line, size_t len);
const sh_ring *sh_sandbox_journal(const sh_sandbox *sb, sh_journal_part part);

/* What a surface chooses for its exec sessions. */
typedef struct sh_exec_opts {
        uint64_t capture_max;   /* bytes of each stream kept for the exit event */
        uint64_t heartbeat_ms;  /* silence before a heartbeat event; 0: none */
        uint64_t timeout_ms;    /* killed this long after its start (sh_exec_spec); 0: never */
        bool merge_output;      /* one pipe for stdout and stderr (sh_exec_spec) */
        size_t read_max;        /* bytes of one chunk at most (sh_exec_spec); 0: the engine's */
        sh_exec_rate *rate;     /* its reads billed to this rate (sh_exec_spec); NULL: none */
        size_t rate_charge_min; /* the least one read costs of it */
        bool input;             /* fd 0 a pipe fed by sh_exec_write (sh_exec_spec) */
        bool frames;            /* fd 3 a pipe read as SH_EXEC_FRAMES chunks (sh_exec_spec) */
        bool shell;             /* argv NONCE CWD TEXT, the /v1 shell wrapper (sh_exec_spec) */
} sh_exec_opts;

/* Run argv (NULL-terminated, non-empty) in sb with the environment: base variables, then the
 * sandbox's create env, then `env` (an object of strings, or NULL; later names win). Events go
 * to fn; the worker's events for it are forwarded by the sandbox. Errors before the start
 * (sandbox-not-found when its worker is gone, invalid env names) come back here. *ret is the
 * consumer's reference (sh_exec_detach). */
int sh_sandbox_exec(sh_sandbox *sb, char *const *argv, const cJSON *env, const sh_exec_opts *o,
                    sh_exec_event_fn fn, void *data, sh_exec **ret, sh_error **err);

int sh_sandbox_mark_ready(sh_sandbox *sb, sh_error **err);
int sh_sandbox_clear_ready(sh_sandbox *sb, sh_error **err);
int sh_sandbox_is_ready(sh_sandbox *sb, bool *ret, sh_error **err);

/* Whether a named volume's pvc.storage is held here: the volume root's file system enforces
 * project quota (asked once, when the manager started). Else it is ignored, and said. */
bool sh_volume_storage_held(void);
