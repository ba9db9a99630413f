/* sandbox.c: the sandbox object, owned here alone: its fields (behind accessors), its
 * references, its readiness marker, its create lifecycle (the workspace's disk limit, the
 * worker, the restore step, the marker, then one done), its worker's events, forwarded to its
 * exec sessions, and what a delete does to it. The registry and the state root's directories
 * are manager.c's: a sandbox knows the manager only through what it was made with
 * (sh_sandbox_env, built once by the manager) and its owner's two calls (remove, release_dir). */
#include "sh/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox-internal.h"
#include "sh/attach.h"
#include "sh/cgroup.h"
#include "sh/disk.h"
#include "sh/exec.h"
#include "sh/images.h"
#include "sh/job.h"
#include "sh/list.h"
#include "sh/log.h"
#include "sh/network.h"
#include "sh/policy.h"
#include "sh/random.h"
#include "sh/safe_open.h"
#include "sh/seccomp.h"
#include "sh/worker.h"

_Static_assert(SH_ROOT_LAYERS_MAX == SH_WORKER_LOWERS_MAX, "a root plan fits a worker spec");

typedef struct sh_exec_link sh_exec_link;

/* A directory by identity: what fstat said when it was made. */
typedef struct dir_id {
        dev_t dev;
        ino_t ino; /* 0: not known yet */
} dir_id;

struct sh_sandbox {
        unsigned refs;
        const sh_sandbox_env *host; /* what the host gives every sandbox: the manager's, built
                                     * once, never reached back for */
        char id[SH_ID_LEN + 1];
        unsigned slot; /* index in the uid range */
        /* Its network's policy until its worker serves and the network takes it (network.c);
         * NULL: no network (loopback only). */
        sh_egress_policy *egress;
        sh_fs_owner owner; /* uid/gid of the sandbox's processes and files */
        char dirname[24];  /* below {root}/.sandboxes: its slot, nothing of the id */
        /* {root}/.sandboxes/{dirname} (= {root}/{id}) and its workspace. No fd of them is
         * held between uses (ten thousand idle sandboxes would hold twenty thousand): each
         * use opens them by name and checks they are these very directories (open_checked). */
        dir_id dir;
        dir_id ws;           /* ino 0 until the disk limit is set up */
        int ws_kept;         /* the workspace's checked fd while in use (sh_ws_cache), or -1 */
        uint64_t ws_used_ms; /* its last use */
        SH_LIST_FIELDS(sh_sandbox, ws_kept_list);
        char *item_id;          /* NULL: none */
        char *image;            /* image name, "default" for the default */
        sh_root_layers *layers; /* its root's image layers (a copy, the pin its own), NULL: none */
        cJSON *env;             /* create-time env: object of strings (owned) */
        const char *surface;    /* the surface that made it (a static name); NULL: native */
        bool deleted;
        uint64_t created;    /* its create's place in the order of the creates */
        uint64_t memory_max; /* its cgroup's limits: the create's, at most the host's */
        uint64_t cpu_max_milli;

        /* isolation */
        sh_cgroup *cg;     /* the sandbox's cgroup */
        sh_worker *worker; /* PID 1 of its namespaces */
        bool worker_ready;
        bool worker_dead;
        sh_exec_link *execs; /* live exec sessions */
        uint32_t next_exec_id;
        sh_cgroup *spare_cg; /* an empty cgroup for the next exec (see spare_make), or NULL */
        uint64_t spare_ooms; /* the OOM kills it counted for earlier execs */
        sh_timer *spare_t;   /* makes the spare (0 ms) or lets it go (SPARE_IDLE_MS) */
        /* disk limit (src/isolation/disk.c) */
        sh_disk_job *disk_job; /* the limit being set up, in a child */
        uint32_t projid;       /* project quota id (project mode), else 0 */
        bool disk_mounted;     /* loop, tmpfs: its filesystem may be mounted */
        char *trash_name;      /* where delete moved the directory (mounted modes) */
        void *trash_job;       /* the removal emptying its trash (remover.c), NULL: none */
        /* the create, until done has been called */
        sh_sandbox_done_fn create_done;
        void *create_data;
        bool restoring;        /* the restorer is at work */
        bool pooled;           /* started for the warm pool, handed to no client yet */
        sh_timer *claim_t;     /* a claimed pooled sandbox's create ends from the loop */
        unsigned freeze_holds; /* sh_sandbox_freeze_hold minus releases */
        /* a pause: its own hold (paused), the freeze waited for (pause_wait.t set) or the
         * resume's step (resume_t), and their one done */
        bool paused;
        sh_loop_poll pause_wait;
        sh_timer *resume_t;
        sh_sandbox_done_fn pause_done;
        void *pause_data;
        /* its expiry (wall ms, 0: none) and the timer armed no later (for expiry_at) */
        uint64_t expires_ms, expiry_at;
        sh_timer *expiry_t;
        bool expired;
        /* what the layers above keep for it (sh_sandbox_attach) */
        sh_attachments attached;
        /* a directory of the creator's restored instead of an item ({root}/{name}), NULL: none */
        char *restore_root, *restore_name;
        /* an OCI image (sh_sandbox_pull_prepare): its pull, the create's first step */
        bool oci;
        sh_image_pull *pull; /* under way (holds a reference), NULL: none */
        char *pull_username; /* that pull's credentials (wiped and freed after it) */
        char *pull_password;
        bool keep_failed; /* a failed pull keeps the sandbox, failed */
        char *failed;     /* why its create failed, when kept failed */
        void (*pull_progress)(void *data, const char *layer, uint64_t done, uint64_t total);
        uint64_t *pull_told; /* each layer's bytes last told */
        /* its volumes, sorted parents first (the spec's order), and which of them go with it:
         * a pvc with deleteOnSandboxTermination whose directory its worker made
         * (SH_MSG_VOLUME_CREATED), or that another sandbox's delete handed over */
        sh_volume *volumes;
        size_t n_volumes;
        bool vol_remove[SH_VOLUMES_MAX];
};

/* ---- the object ------------------------------------------------------------------------- */

/* The order of the creates (sh_manager_list): a count, not the clock (two in one ms). */
static uint64_t creates;

uint64_t sh_sandbox_created(const sh_sandbox *sb)
{
        return sb->created;
}

/* A cgroup (taken) removed once it is empty, by the reaper every exec session uses too. */
static void cg_bury(const sh_sandbox *sb, sh_cgroup *cg)
{
        sb->host->exec.bury(sb->host->exec.reaper, cg);
}

/* The sandbox deleted by its owner (a create that cannot complete). */
static int owner_remove(sh_sandbox *sb, sh_error **err)
{
        return sb->host->owner->remove(sb->host->owner_data, sb, err);
}

static void create_worker_ready(sh_sandbox *sb);
static void create_fail(sh_sandbox *sb, const sh_error *err);
static void create_deleted(sh_sandbox *sb);
static void execs_abandon(sh_sandbox *sb, const char *why);

static void spare_drop(sh_sandbox *sb);
static void ws_drop(sh_sandbox *sb);

static void timers_stop(sh_sandbox *sb);

void sh_root_layers_free(sh_root_layers *l)
{
        if (!l)
                return;
        if (l->unpin)
                l->unpin(l->pin);
        free(l->dir);
        for (size_t i = 0; i < l->n_lowers; i++)
                free(l->lowers[i]);
        free(l->lowers);
        for (size_t i = 0; i < l->n_env; i++)
                free(l->env[i]);
        free(l->env);
        free(l->workdir);
        free(l);
}

/* A copy of the plan's strings, without its pin (sh_sandbox_hold_pin, once the create is
 * under way). */
static sh_root_layers *root_layers_copy(const sh_root_layers *o)
{
        sh_root_layers *l = calloc(1, sizeof(*l));
        bool bad = !l;

        if (l) {
                l->dir = strdup(o->dir);
                l->lowers = calloc(o->n_lowers, sizeof(char *));
                l->env = calloc(o->n_env + 1, sizeof(char *));
                l->workdir = o->workdir ? strdup(o->workdir) : NULL;
                bad = !l->dir || !l->lowers || !l->env || (o->workdir && !l->workdir);
                for (; !bad && l->n_lowers < o->n_lowers; l->n_lowers++)
                        bad = !(l->lowers[l->n_lowers] = strdup(o->lowers[l->n_lowers]));
                for (; !bad && l->n_env < o->n_env; l->n_env++)
                        bad = !(l->env[l->n_env] = strdup(o->env[l->n_env]));
        }
        if (bad) {
                sh_root_layers_free(l);
                return NULL;
        }
        return l;
}

void sh_sandbox_hold_pin(sh_sandbox *sb, void *pin, void (*unpin)(void *pin))
{
        sb->layers->pin = pin;
        sb->layers->unpin = unpin;
}

int sh_root_layers_check(const sh_root_layers *l, sh_error **err)
{
        size_t bytes = 0;

        if (!l->dir || l->dir[0] != '/' || strlen(l->dir) >= SH_WORKER_PATH_MAX)
                return sh_error_new(err, SH_E_INVALID,
                                    "the layers' directory is not an absolute "
                                    "path of fewer than %d bytes",
                                    SH_WORKER_PATH_MAX);
        if (l->n_lowers == 0 || l->n_lowers > SH_ROOT_LAYERS_MAX)
                return sh_error_new(err, SH_E_INVALID, "a root has 1 to %d layers, not %zu",
                                    SH_ROOT_LAYERS_MAX, l->n_lowers);
        for (size_t i = 0; i < l->n_lowers; i++)
                if (!sh_worker_lower_valid(l->lowers[i]))
                        return sh_error_new(err, SH_E_INVALID,
                                            "layer %zu is not a plain relative path", i);
        if (l->workdir && (l->workdir[0] != '/' || strlen(l->workdir) > 4096))
                return sh_error_new(err, SH_E_INVALID,
                                    "the image's workdir is not an absolute path");
        if (l->n_env > SH_SANDBOX_ENV_MAX)
                return sh_error_new(err, SH_E_INVALID,
                                    "the image's env has %zu variables: at "
                                    "most %d",
                                    l->n_env, SH_SANDBOX_ENV_MAX);
        for (size_t i = 0; i < l->n_env; i++) {
                const char *eq = strchr(l->env[i], '=');

                if (!eq || eq == l->env[i])
                        return sh_error_new(err, SH_E_INVALID,
                                            "the image's env entry %zu is not NAME=value", i);
                bytes += strlen(l->env[i]) + 1;
        }
        if (bytes > SH_SANDBOX_ENV_BYTES)
                return sh_error_new(err, SH_E_INVALID, "the image's env has %zu bytes: at most %d",
                                    bytes, SH_SANDBOX_ENV_BYTES);
        return 0;
}

/* The create's network policy, copied (sh_create_opts.egress); egress_free: gone. */
static int egress_set(sh_sandbox *sb, const sh_create_opts *o)
{
        if (!o->egress)
                return 0;
        sb->egress = calloc(1, sizeof(*sb->egress));
        if (!sb->egress || sh_egress_policy_copy(o->egress, sb->egress) < 0) {
                free(TAKE_PTR(sb->egress));
                return -ENOMEM;
        }
        return 0;
}

static void egress_free(sh_sandbox *sb)
{
        if (sb->egress)
                sh_egress_policy_done(sb->egress);
        free(TAKE_PTR(sb->egress));
}

static void sandbox_free(sh_sandbox *sb)
{
        sh_loop_cancel_timer(sb->host->exec.loop, TAKE_PTR(sb->claim_t));
        timers_stop(sb);
        sh_attach_done(&sb->attached);
        spare_drop(sb);
        ws_drop(sb);
        sh_worker_free(sb->worker);
        if (sb->cg)
                cg_bury(sb, sb->cg);
        /* The sandbox held no fd into its filesystem, and every request that opened one held
         * a reference until it closed it: whoever drops the last reference pays for the
         * unmount (a child of the manager's). */
        if (sb->disk_mounted)
                sb->host->owner->release_dir(sb->host->owner_data, sb->dirname,
                                             TAKE_PTR(sb->trash_name));
        free(sb->trash_name);
        free(sb->item_id);
        free(sb->restore_root);
        free(sb->restore_name);
        free(sb->image);
        sh_root_layers_free(sb->layers);
        free(sb->failed);
        free(sb->pull_told);
        free(sb->pull_username);
        free(sb->pull_password);
        cJSON_Delete(sb->env);
        egress_free(sb);
        free(sb->volumes);
        free(sb);
}

sh_sandbox *sh_sandbox_ref(sh_sandbox *sb)
{
        if (sb)
                sb->refs++;
        return sb;
}

void sh_sandbox_unref(sh_sandbox *sb)
{
        if (sb && --sb->refs == 0)
                sandbox_free(sb);
}

const char *sh_sandbox_id(const sh_sandbox *sb)
{
        return sb->id;
}

const char *sh_sandbox_item_id(const sh_sandbox *sb)
{
        return sb->item_id;
}

const char *sh_sandbox_workdir(const sh_sandbox *sb)
{
        return sb->layers ? sb->layers->workdir : NULL;
}

const char *sh_sandbox_surface(const sh_sandbox *sb)
{
        return sb->surface;
}

int sh_sandbox_attach(sh_sandbox *sb, const void *key, void *ptr, void (*free_fn)(void *),
                      sh_error **err)
{
        if (sh_attach_set(&sb->attached, key, ptr, free_fn) < 0)
                return sh_error_make(err, ENOMEM, "out of memory");
        return 0;
}

void *sh_sandbox_attached(const sh_sandbox *sb, const void *key)
{
        return sh_attach_get(&sb->attached, key);
}

void *sh_sandbox_detach(sh_sandbox *sb, const void *key)
{
        return sh_attach_take(&sb->attached, key);
}

/* The directory `path` below .sandboxes, opened now (O_PATH), if it is the one made for sb:
 * a new fd, or -1. Only the daemon (root) makes, renames or removes entries of .sandboxes and
 * of a sandbox's directory (modes 0711; a sandbox's own uid owns nothing above its workspace,
 * and sees the workspace only as a bind mount, whose mount point it cannot move), so while
 * the sandbox lives its names lead to its directories; the identity check turns any breach
 * of that (a slot's directory made again, a tree moved by hand) into an error, never into
 * another sandbox's files. Links are not followed. A local lookup of two names: it never
 * waits on the network (the state root is the pod's own volume, docs/deployment.md). */
static int open_checked(sh_sandbox *sb, const char *path, const dir_id *id, const char *what,
                        sh_error **err)
{
        _cleanup_close_ int fd =
                openat(sb->host->sandboxes_fd, path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0) {
                int e = errno;

                /* Out of fds is "try again later"; anything else is the host's failure (a
                 * missing directory of a live sandbox is not a missing file of the client's). */
                if (e == EMFILE || e == ENFILE || e == ENOMEM)
                        return sh_error_make(err, e, "opening the sandbox's %s", what);
                return sh_error_new(err, SH_E_INTERNAL, "opening the sandbox's %s: %s", what,
                                    strerror(e));
        }
        if (st.st_dev != id->dev || st.st_ino != id->ino) {
                log_error("sandbox-dir-changed", sb->id,
                          "its %s below the state root is not the one made for it", what);
                return sh_error_new(err, SH_E_INTERNAL,
                                    "the sandbox's %s is not the one made for it", what);
        }
        return TAKE_FD(fd);
}

/* Its directory, also while a delete runs (the marker goes before the tree moves). */
static int dir_open(sh_sandbox *sb, sh_error **err)
{
        return open_checked(sb, sb->dirname, &sb->dir, "directory", err);
}

int sh_sandbox_open_dir(sh_sandbox *sb, sh_error **err)
{
        if (sb->deleted)
                return sh_error_new(err, SH_E_SANDBOX_NOT_FOUND, "the sandbox was deleted");
        return dir_open(sb, err);
}

/* 0 while the sandbox lives and its workspace is set up, what its workspace, its trash and
 * its logs are opened from; else -1 with err set. */
static int ws_ready(const sh_sandbox *sb, sh_error **err)
{
        if (sb->deleted)
                return sh_error_new(err, SH_E_SANDBOX_NOT_FOUND, "the sandbox was deleted");
        if (!sb->ws.ino)
                return sh_error_new(err, SH_E_UNAVAILABLE,
                                    "the sandbox's workspace is not set up yet");
        return 0;
}

/* With a filesystem of its own, the daemon works through the mount of that filesystem, not
 * the bind at dir/workspace: DELETE /dir renames into disk/.trash, and rename(2) never crosses
 * mounts, even of one filesystem. */
static const char *workspace_name(const sh_sandbox *sb)
{
        return sb->disk_mounted ? "disk/workspace" : "workspace";
}

/* The trash beside the workspace, on its filesystem and mount (the daemon's): disk/.trash
 * inside a filesystem of its own (in its limit), else .trash in the sandbox's directory (under
 * project quota its entries keep the sandbox's project id, so they stay charged to it). Root's,
 * 0700, outside the workspace: no sandbox reaches it. */
int sh_sandbox_open_trash(sh_sandbox *sb, sh_error **err)
{
        _cleanup_close_ int dirfd = -1;
        int fd;

        if (ws_ready(sb, err) < 0)
                return -1;
        if ((dirfd = dir_open(sb, err)) < 0)
                return -1;
        fd = openat(dirfd, sb->disk_mounted ? "disk/.trash" : ".trash",
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return sh_error_make(err, errno, "opening the sandbox's trash");
        return fd;
}

void *sh_sandbox_trash_job(const sh_sandbox *sb)
{
        return sb->trash_job;
}

void sh_sandbox_set_trash_job(sh_sandbox *sb, void *job)
{
        sb->trash_job = job;
}

/* ---- the workspaces in use ---------------------------------------------------------- */

/* Every request on a sandbox begins with its workspace's open: two names and an fstat, about
 * 1.3 us, a few percent of a small request. So a sandbox in use keeps its checked fd until it
 * has been idle for WS_KEEP_MS, at most WS_KEPT_MAX sandboxes at once (the oldest is let go
 * for a newcomer): requests dup it. Idle sandboxes hold nothing; a delete lets go at once
 * (the name is not its any more, and a filesystem of its own must be free to detach). */
#define WS_KEEP_MS  1000
#define WS_KEPT_MAX 64

struct sh_ws_cache {
        sh_loop *loop;
        sh_sandbox *kept; /* the sandboxes with ws_kept >= 0 */
        unsigned n;
        sh_timer *sweep;
};

sh_ws_cache *sh_ws_cache_new(sh_loop *loop)
{
        sh_ws_cache *c = calloc(1, sizeof(*c));

        if (c)
                c->loop = loop;
        return c;
}

static void ws_drop(sh_sandbox *sb)
{
        sh_ws_cache *c;

        if (sb->ws_kept < 0)
                return;
        c = sb->host->ws_cache;
        SH_LIST_REMOVE(ws_kept_list, c->kept, sb);
        c->n--;
        sb->ws_kept = sh_close(sb->ws_kept);
}

void sh_ws_cache_free(sh_ws_cache *c)
{
        if (!c)
                return;
        while (c->kept)
                ws_drop(c->kept);
        sh_loop_cancel_timer(c->loop, c->sweep);
        free(c);
}

static void ws_sweep(sh_loop *l, sh_timer *t, void *data)
{
        sh_ws_cache *c = data;
        uint64_t now = sh_now_ms();
        sh_sandbox *sb, *next;

        c->sweep = NULL;
        SH_LIST_FOREACH_SAFE(ws_kept_list, sb, next, c->kept) {
                if (now - sb->ws_used_ms >= WS_KEEP_MS)
                        ws_drop(sb);
        }
        if (c->kept && !(c->sweep = sh_loop_add_timer(l, WS_KEEP_MS, ws_sweep, c)))
                while (c->kept) /* nothing would let them go: keep none */
                        ws_drop(c->kept);
}

/* Keep fd (taken) as sb's workspace; a full cache lets its oldest go (a walk of at most
 * WS_KEPT_MAX: never of all sandboxes). */
static void ws_keep(sh_sandbox *sb, int fd)
{
        sh_ws_cache *c = sb->host->ws_cache;

        if (!c->sweep && !(c->sweep = sh_loop_add_timer(c->loop, WS_KEEP_MS, ws_sweep, c))) {
                close(fd);
                return;
        }
        if (c->n >= WS_KEPT_MAX) {
                sh_sandbox *i, *oldest = c->kept;

                SH_LIST_FOREACH(ws_kept_list, i, c->kept) {
                        if (i->ws_used_ms < oldest->ws_used_ms)
                                oldest = i;
                }
                ws_drop(oldest);
        }
        sb->ws_kept = fd;
        SH_LIST_PREPEND(ws_kept_list, c->kept, sb);
        c->n++;
}

int sh_sandbox_open_workspace(sh_sandbox *sb, sh_error **err)
{
        char path[64];
        int fd, kept;

        if (ws_ready(sb, err) < 0)
                return -1;
        sb->ws_used_ms = sh_now_ms();
        if (sb->ws_kept >= 0) {
                fd = fcntl(sb->ws_kept, F_DUPFD_CLOEXEC, 3);
                return fd >= 0 ? fd : sh_error_make(err, errno, "opening the sandbox's workspace");
        }
        snprintf(path, sizeof(path), "%s/%s", sb->dirname, workspace_name(sb));
        fd = open_checked(sb, path, &sb->ws, "workspace", err);
        if (fd >= 0 && (kept = fcntl(fd, F_DUPFD_CLOEXEC, 3)) >= 0)
                ws_keep(sb, kept);
        return fd;
}

/* ---- the daemon's files of a sandbox (its command logs) --------------------------------- */

/* Where they live: a directory of the sandbox's filesystem that its view never shows. With a
 * filesystem of its own (loop, tmpfs) its root's .logs, beside the workspace; with project
 * quota dir/logs, given the workspace's project id by the disk limit's child (sh_disk_setup),
 * so what they hold is charged to the same limit; without a limit dir/logs, made on first
 * use. Only the daemon (root) makes entries in any of them (mode 0700). */
static const char *logs_name(const sh_sandbox *sb)
{
        return sb->disk_mounted ? "disk/.logs" : "logs";
}

static int logs_open(sh_sandbox *sb, bool create, sh_error **err)
{
        _cleanup_close_ int dirfd = -1;
        bool none = sh_disk_get_mode(sb->host->disk) == SH_DISK_NONE;
        int fd;

        if (ws_ready(sb, err) < 0)
                return -1;
        dirfd = dir_open(sb, err);
        if (dirfd < 0)
                return -1;
        fd = sh_safe_openat(dirfd, logs_name(sb), O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
        /* Never made here under a limit: a directory the limit's child did not make would be
         * charged to nobody. */
        if (fd == -ENOENT && none && create) {
                if (mkdirat(dirfd, "logs", 0700) < 0 && errno != EEXIST)
                        return sh_error_make(err, errno, "making the sandbox's log directory");
                fd = sh_safe_openat(dirfd, "logs", O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
        }
        if (fd < 0)
                return sh_error_make(err, -fd, "opening the sandbox's log directory");
        return fd;
}

/* A name of the caller's: one component, no dot first (never "." or ".."). */
static bool log_name_ok(const char *name)
{
        return name[0] && name[0] != '.' && strlen(name) <= 64 &&
               strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
                       strlen(name);
}

int sh_sandbox_open_log(sh_sandbox *sb, const char *name, int flags, sh_error **err)
{
        _cleanup_close_ int logs = -1;
        int fd;

        if (!log_name_ok(name))
                return sh_error_new(err, SH_E_INVALID, "'%s' is no log name", name);
        logs = logs_open(sb, flags & O_CREAT, err);
        if (logs < 0)
                return -1;
        fd = sh_safe_openat(logs, name, flags | O_NOFOLLOW, 0600);
        if (fd < 0)
                return sh_error_make(err, -fd, "opening the sandbox's log '%s'", name);
        return fd;
}

int sh_sandbox_remove_log(sh_sandbox *sb, const char *name, sh_error **err)
{
        _cleanup_close_ int logs = -1;

        if (!log_name_ok(name))
                return sh_error_new(err, SH_E_INVALID, "'%s' is no log name", name);
        logs = logs_open(sb, false, err);
        if (logs < 0)
                return -1;
        if (unlinkat(logs, name, 0) < 0 && errno != ENOENT)
                return sh_error_make(err, errno, "removing the sandbox's log '%s'", name);
        return 0;
}

/* The root as the sandbox's PID 1 sees it (after its pivot_root: READY comes once the root
 * filesystem is built), opened now from /proc/<pid>/root. The pid cannot name another process
 * meanwhile: the daemon is the worker's reaper (spawn.c's sh_child_adopt), so the pid stays the
 * worker's, a zombie at worst, until the daemon reaps it, and sh_worker_pid says -1 from then
 * on. Lookups below that fd cross the mounts of the sandbox's mount namespace as the sandbox
 * sees them (its /tmp, /workspace, /tools, the read-only image); confined by fs/safe_open.c,
 * they never leave that root. Held by nobody while the sandbox is idle. */
int sh_sandbox_open_root(const sh_sandbox *sb)
{
        char proc[64];
        pid_t pid;
        int fd;

        if (!sb->worker_ready || sb->worker_dead || sb->deleted ||
            (pid = sh_worker_pid(sb->worker)) <= 0) {
                errno = ESRCH;
                return -1;
        }
        snprintf(proc, sizeof(proc), "/proc/%d/root", (int)pid);
        fd = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                log_error("open-root-failed", sb->id, "open %s: %s", proc, strerror(errno));
        return fd;
}

const sh_fs_owner *sh_sandbox_owner(const sh_sandbox *sb)
{
        return &sb->owner;
}

bool sh_sandbox_deleted(const sh_sandbox *sb)
{
        return sb->deleted;
}

sh_cgroup *sh_sandbox_cgroup(const sh_sandbox *sb)
{
        return sb->cg;
}

uint64_t sh_sandbox_memory_max(const sh_sandbox *sb)
{
        return sb->memory_max;
}

uint64_t sh_sandbox_cpu_max_milli(const sh_sandbox *sb)
{
        return sb->cpu_max_milli;
}

unsigned sh_sandbox_slot(const sh_sandbox *sb)
{
        return sb->slot;
}

const sh_sandbox_env *sh_sandbox_host(const sh_sandbox *sb)
{
        return sb->host;
}

void sh_sandbox_set_dir(sh_sandbox *sb, const char *dirname, const struct stat *dir,
                        const struct stat *ws)
{
        snprintf(sb->dirname, sizeof(sb->dirname), "%s", dirname);
        sb->dir = (dir_id){.dev = dir->st_dev, .ino = dir->st_ino};
        if (ws)
                sb->ws = (dir_id){.dev = ws->st_dev, .ino = ws->st_ino};
}

const char *sh_sandbox_dirname(const sh_sandbox *sb)
{
        return sb->dirname;
}

bool sh_sandbox_disk_mounted(const sh_sandbox *sb)
{
        return sb->disk_mounted;
}

void sh_sandbox_set_trash_name(sh_sandbox *sb, char *name)
{
        free(sb->trash_name);
        sb->trash_name = name;
}

int sh_sandbox_env_check(const cJSON *env, sh_error **err)
{
        const cJSON *v;
        size_t n = 0, bytes = 0;

        cJSON_ArrayForEach(v, env)
        {
                n++;
                bytes += strlen(v->string) + (cJSON_IsString(v) ? strlen(v->valuestring) : 0) + 2;
        }
        if (n > SH_SANDBOX_ENV_MAX || bytes > SH_SANDBOX_ENV_BYTES)
                return sh_error_new(err, SH_E_INVALID,
                                    "'env' holds %zu variables of %zu bytes: at most %d of %d "
                                    "bytes (every command carries them)",
                                    n, bytes, SH_SANDBOX_ENV_MAX, SH_SANDBOX_ENV_BYTES);
        return 0;
}

const char *sh_env_shape_why(const cJSON *env)
{
        const cJSON *v;

        if (env && !cJSON_IsObject(env))
                return "is an object of strings";
        cJSON_ArrayForEach(v, env)
        {
                if (!cJSON_IsString(v))
                        return "is an object of strings";
                if (!*v->string || strchr(v->string, '='))
                        return "names are non-empty and hold no '='";
        }
        return NULL;
}

/* The create's volumes, judged again and copied in the order they are mounted. */
static int volumes_set(sh_sandbox *sb, const sh_config *cfg, const sh_create_opts *o,
                       sh_error **err)
{
        char why[256];

        if (!o->n_volumes)
                return 0;
        if (sh_volumes_check(o->volumes, o->n_volumes, cfg->volume_max, why, sizeof(why)) < 0 ||
            sh_volumes_allowed(o->volumes, o->n_volumes, cfg->volume_host_allow, why, sizeof(why)) <
                    0)
                return sh_error_new(err, SH_E_INVALID, "%s", why);
        sb->volumes = malloc(o->n_volumes * sizeof(*sb->volumes));
        if (!sb->volumes)
                return sh_error_make(err, ENOMEM, "out of memory");
        memcpy(sb->volumes, o->volumes, o->n_volumes * sizeof(*sb->volumes));
        sb->n_volumes = o->n_volumes;
        sh_volumes_sort(sb->volumes, sb->n_volumes);
        return 0;
}

const sh_volume *sh_sandbox_volumes(const sh_sandbox *sb, size_t *ret_n)
{
        *ret_n = sb->n_volumes;
        return sb->volumes;
}

gid_t sh_sandbox_volume_gid(const sh_sandbox *sb)
{
        return sb->n_volumes ? (gid_t)(sb->host->cfg->uid_base - 1) : 0;
}

bool sh_sandbox_volume_removes(const sh_sandbox *sb, size_t i)
{
        return i < sb->n_volumes && sb->vol_remove[i];
}

bool sh_sandbox_volume_take_over(sh_sandbox *sb, const char *claim)
{
        for (size_t i = 0; i < sb->n_volumes; i++)
                if (sb->volumes[i].kind == SH_VOLUME_PVC && STREQ(sb->volumes[i].path, claim)) {
                        sb->vol_remove[i] = true;
                        return true;
                }
        return false;
}

/* The create's directory to restore (sh_create_opts.restore_root), copied. -ENOMEM. */
static int restore_dir_set(sh_sandbox *sb, const sh_create_opts *o)
{
        if (!o->restore_root)
                return 0;
        sb->restore_root = strdup(o->restore_root);
        sb->restore_name = o->restore_name ? strdup(o->restore_name) : NULL;
        return sb->restore_root && sb->restore_name ? 0 : -ENOMEM;
}

int sh_sandbox_new(const sh_sandbox_env *env, unsigned slot, const sh_create_opts *o,
                   sh_sandbox **ret, sh_error **err)
{
        const sh_config *cfg = env->cfg;
        sh_sandbox *sb = calloc(1, sizeof(*sb));
        int r;

        if (!sb)
                return sh_error_make(err, ENOMEM, "out of memory");
        sb->refs = 1;
        sb->host = env;
        sb->ws_kept = -1;
        sb->slot = slot;
        sb->owner.uid = (uid_t)(cfg->uid_base + slot);
        sb->owner.gid = (gid_t)(cfg->uid_base + slot);
        sb->created = ++creates;
        /* A sandbox may ask for less than the host gives one sandbox, never more: the host's
         * maxima are what its operator sized the node for. */
        sb->memory_max =
                o->memory_max && o->memory_max < cfg->memory_max ? o->memory_max : cfg->memory_max;
        sb->cpu_max_milli = o->cpu_max_milli && o->cpu_max_milli < cfg->cpu_max_milli
                                    ? o->cpu_max_milli
                                    : cfg->cpu_max_milli;
        sb->image = strdup(o->image ? o->image : "default");
        sb->item_id = o->item_id ? strdup(o->item_id) : NULL;
        sb->env = o->env ? cJSON_Duplicate(o->env, true) : cJSON_CreateObject();
        sb->surface = o->surface;
        if (o->root_layers)
                sb->layers = root_layers_copy(o->root_layers);
        if (volumes_set(sb, cfg, o, err) < 0) {
                sandbox_free(sb);
                return -1;
        }
        if (!sb->image || (o->item_id && !sb->item_id) || !sb->env || restore_dir_set(sb, o) < 0 ||
            egress_set(sb, o) < 0 || (o->root_layers && !sb->layers)) {
                sandbox_free(sb);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        /* The pod's token, then 128 random bits (cluster.h: the id names its pod). */
        memcpy(sb->id, env->pod_token, SH_POD_TOKEN_LEN);
        r = sh_random_hex(sb->id + SH_POD_TOKEN_LEN, (SH_ID_LEN - SH_POD_TOKEN_LEN) / 2);
        if (r < 0) {
                sandbox_free(sb);
                return sh_error_make(err, -r, "getrandom");
        }
        *ret = sb;
        return 0;
}

/* ---- freeze holds: a persist's copy, a pause ------------------------------------------- */

/* One count for every reason to keep the sandbox frozen, so that no holder thaws what another
 * still needs frozen: a persist that ends must not thaw a paused sandbox, and a resume must
 * not thaw a sandbox whose copy is still being read. The helpers working for the sandbox are
 * never frozen (sh_cgroup_freeze_procs_*): rsync runs beside a frozen sandbox. */
int sh_sandbox_freeze_hold(sh_sandbox *sb, sh_error **err)
{
        if (!sb->cg)
                return sh_error_new(err, SH_E_INVALID, "the sandbox has no cgroup yet");
        /* Asked again even when held already: the kernel call is idempotent, and a hold
         * always starts a fresh freeze of exec cgroups made since the last one. */
        if (sh_cgroup_freeze_procs_begin(sb->cg, err) < 0) {
                if (sb->freeze_holds == 0) {
                        sh_error *ignored = NULL;

                        (void)sh_cgroup_thaw_procs(sb->cg, &ignored);
                        sh_error_release(&ignored);
                }
                return -1;
        }
        sb->freeze_holds++;
        return 0;
}

int sh_sandbox_freeze_poll(sh_sandbox *sb, bool *ret_frozen, sh_error **err)
{
        if (!sb->cg || sb->freeze_holds == 0)
                return sh_error_new(err, SH_E_INVALID, "the sandbox is not being frozen");
        return sh_cgroup_freeze_procs_poll(sb->cg, ret_frozen, err);
}

int sh_sandbox_freeze_release(sh_sandbox *sb, sh_error **err)
{
        if (sb->freeze_holds == 0)
                return 0;
        if (--sb->freeze_holds > 0 || !sb->cg)
                return 0;
        return sh_cgroup_thaw_procs(sb->cg, err);
}

unsigned sh_sandbox_freeze_holds(const sh_sandbox *sb)
{
        return sb->freeze_holds;
}

/* ---- pause and resume: a freeze hold of their own ------------------------------------- */

/* How long a pause may take to freeze (a task in an uninterruptible sleep delays it), and the
 * longest gap between two looks at the freezer. */
#define PAUSE_TIMEOUT_MS 5000
#define PAUSE_GAP_MAX_MS 16

static int pause_look(void *data, sh_error **err)
{
        bool frozen = false;

        return sh_sandbox_freeze_poll(data, &frozen, err) < 0 ? -1 : frozen;
}

/* The pause's hold given back: the sandbox thaws unless another holder keeps it frozen. */
static void pause_release(sh_sandbox *sb)
{
        sh_error *err = NULL;

        sb->paused = false;
        if (sh_sandbox_freeze_release(sb, &err) < 0)
                log_warn("resume-failed", sb->id, "thawing: %s", err && err->msg ? err->msg : "");
        sh_error_release(&err);
}

static void pause_end(sh_sandbox *sb, const sh_error *err)
{
        sh_sandbox_done_fn done = TAKE_PTR(sb->pause_done);

        done(sb, err, sb->pause_data);
}

static void pause_waited(void *data, int result, const sh_error *perr)
{
        sh_sandbox *sb = data;
        sh_error *err = NULL;

        if (result == 0)
                sh_error_new(&err, SH_E_INTERNAL,
                             "the sandbox did not freeze within 5 s (a process in an "
                             "uninterruptible sleep?)");
        else if (result < 0 && perr)
                sh_error_new(&err, SH_E_INTERNAL, "reading the freezer: %s",
                             perr->msg ? perr->msg : "");
        else if (result < 0)
                sh_error_make(&err, ENOMEM, "out of memory");
        if (err)
                pause_release(sb);
        pause_end(sb, err);
        sh_error_release(&err);
}

int sh_sandbox_pause(sh_sandbox *sb, sh_sandbox_done_fn done, void *data, sh_error **err)
{
        if (sb->paused || sb->pause_done || sb->deleted)
                return sh_error_new(err, SH_E_INVALID, "the sandbox is paused or resuming");
        /* Asks the kernel to freeze every process of the sandbox (not the helpers working for
         * it); never waits: the loop's timers look at the freezer. */
        if (sh_sandbox_freeze_hold(sb, err) < 0)
                return -1;
        sb->paused = true;
        sb->pause_wait = (sh_loop_poll){.loop = sb->host->exec.loop,
                                        .check = pause_look,
                                        .end = pause_waited,
                                        .data = sb,
                                        .timeout_ms = PAUSE_TIMEOUT_MS,
                                        .gap_max_ms = PAUSE_GAP_MAX_MS};
        if (sh_loop_poll_start(&sb->pause_wait) < 0) {
                pause_release(sb);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        sb->pause_done = done;
        sb->pause_data = data;
        return 0;
}

static void resumed(sh_loop *l, sh_timer *t, void *data)
{
        sh_sandbox *sb = data;

        (void)l;
        (void)t;
        sb->resume_t = NULL;
        pause_end(sb, NULL);
}

int sh_sandbox_resume(sh_sandbox *sb, sh_sandbox_done_fn done, void *data, sh_error **err)
{
        if (!sb->paused || sb->pause_done)
                return sh_error_new(err, SH_E_INVALID, "the sandbox is not paused");
        sb->resume_t = sh_loop_add_timer(sb->host->exec.loop, 0, resumed, sb);
        if (!sb->resume_t)
                return sh_error_make(err, ENOMEM, "out of memory");
        sb->pause_done = done;
        sb->pause_data = data;
        pause_release(sb);
        return 0;
}

/* ---- expiry: one loop timer ------------------------------------------------------------ */

static void expiry_arm(sh_sandbox *sb);

/* Its expiry has come, unless it was moved later meanwhile (or the wall clock stepped back):
 * then the timer waits again. */
static void expiry_fire(sh_loop *l, sh_timer *t, void *data)
{
        sh_sandbox *sb = data;
        sh_error *err = NULL;

        (void)l;
        (void)t;
        sb->expiry_t = NULL; /* the loop frees a fired timer */
        if (sb->expires_ms > sh_now_wall_ms()) {
                expiry_arm(sb);
                return;
        }
        log_info("sandbox-expired", sb->id, "expired at its expiry time");
        sb->expired = true;
        if (owner_remove(sb, &err) < 0)
                log_warn("expiry-delete-failed", sb->id, "%s, ignoring",
                         err && err->msg ? err->msg : "");
        sh_error_release(&err);
}

/* Armed for the expiry, never later. A renew that moves it later (every request may: renew on
 * access) leaves the timer where it is: it fires, finds the later time and waits again, so a
 * busy sandbox costs one timer per extension, not one per request. */
static void expiry_arm(sh_sandbox *sb)
{
        sh_loop *loop = sb->host->exec.loop;
        uint64_t now;

        if (sb->deleted || (sb->expiry_t && sb->expiry_at <= sb->expires_ms))
                return;
        sh_loop_cancel_timer(loop, TAKE_PTR(sb->expiry_t));
        if (!sb->expires_ms)
                return;
        now = sh_now_wall_ms();
        sb->expiry_at = sb->expires_ms;
        sb->expiry_t = sh_loop_add_timer(loop, sb->expires_ms > now ? sb->expires_ms - now : 0,
                                         expiry_fire, sb);
        if (!sb->expiry_t)
                log_error("expiry-timer", sb->id,
                          "cannot arm the expiry timer: the sandbox may outlive its expiry");
}

void sh_sandbox_set_expiry(sh_sandbox *sb, uint64_t wall_ms)
{
        uint64_t ceiling = sb->host->cfg->max_timeout_s * 1000, now = sh_now_wall_ms();

        /* SANDBOX_HOST_MAX_TIMEOUT is at most 100 years: no overflow. */
        if (ceiling && wall_ms > now + ceiling)
                wall_ms = now + ceiling;
        sb->expires_ms = wall_ms;
        expiry_arm(sb);
}

void sh_sandbox_renew(sh_sandbox *sb, uint64_t extend_ms)
{
        uint64_t want = sh_now_wall_ms() + extend_ms;

        if (sb->expires_ms && want > sb->expires_ms)
                sh_sandbox_set_expiry(sb, want);
}

uint64_t sh_sandbox_expiry(const sh_sandbox *sb)
{
        return sb->expires_ms;
}

bool sh_sandbox_expired(const sh_sandbox *sb)
{
        return sb->expired;
}

/* A delete (or the object's end): no pause's or resume's done, no expiry any more. */
static void timers_stop(sh_sandbox *sb)
{
        sh_loop *loop = sb->host->exec.loop;

        sh_loop_cancel_timer(loop, TAKE_PTR(sb->expiry_t));
        sh_loop_cancel_timer(loop, TAKE_PTR(sb->resume_t));
        sh_loop_poll_stop(&sb->pause_wait);
        sb->pause_done = NULL;
}

/* ---- the readiness marker (CONTRACT.md 3.1) --------------------------------------------- */

int sh_sandbox_mark_ready(sh_sandbox *sb, sh_error **err)
{
        _cleanup_close_ int dirfd = sh_sandbox_open_dir(sb, err);
        int fd;

        if (dirfd < 0)
                return -1;
        fd = openat(dirfd, ".ready", O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return sh_error_make(err, errno, "creating the readiness marker");
        close(fd);
        return 0;
}

int sh_sandbox_clear_ready(sh_sandbox *sb, sh_error **err)
{
        _cleanup_close_ int dirfd = -1;

        if (sb->deleted)
                return 0; /* its marker went first */
        dirfd = dir_open(sb, err);
        if (dirfd < 0)
                return -1;
        if (unlinkat(dirfd, ".ready", 0) < 0 && errno != ENOENT)
                return sh_error_make(err, errno, "removing the readiness marker");
        return 0;
}

int sh_sandbox_is_ready(sh_sandbox *sb, bool *ret, sh_error **err)
{
        _cleanup_close_ int dirfd = -1;
        struct stat st;

        /* A deleted sandbox is never trusted (its marker went first, its tree after). */
        if (sb->deleted) {
                *ret = false;
                return 0;
        }
        dirfd = dir_open(sb, err);
        if (dirfd < 0)
                return -1;
        if (fstatat(dirfd, ".ready", &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return sh_error_make(err, errno, "reading the readiness marker");
                *ret = false;
                return 0;
        }
        *ret = S_ISREG(st.st_mode);
        return 0;
}

/* ---- exec sessions: started here, the worker's events forwarded to them ---------------- */

/* One session on the sandbox's list; lives as long as the session. */
struct sh_exec_link {
        sh_sandbox *sb; /* a reference: the sandbox outlives its sessions */
        sh_exec *e;
        uint32_t id;
        bool linked;
        SH_LIST_FIELDS(sh_exec_link, execs);
};

static sh_exec_link *exec_find(sh_sandbox *sb, uint32_t id)
{
        sh_exec_link *l;

        SH_LIST_FOREACH(execs, l, sb->execs) {
                if (l->id == id)
                        return l;
        }
        return NULL;
}

/* The session is over: off the list (the worker has nothing more to tell it). */
static void exec_ended(sh_exec *e, void *data)
{
        sh_exec_link *l = data;

        if (l->linked)
                SH_LIST_REMOVE(execs, l->sb->execs, l);
        l->linked = false;
}

static void exec_freed(void *data)
{
        sh_exec_link *l = data;

        sh_sandbox_unref(l->sb);
        free(l);
}

/* Every session of sb ends with an in-band error: the sandbox is gone, or its worker. */
static void execs_abandon(sh_sandbox *sb, const char *why)
{
        sh_exec_link *l, *next;

        SH_LIST_FOREACH_SAFE(execs, l, next, sb->execs) {
                sh_exec_abandon(l->e, SH_E_SANDBOX_NOT_FOUND, why);
        }
}

static void strv_free(char **v)
{
        size_t i;

        if (!v)
                return;
        for (i = 0; v[i]; i++)
                free(v[i]);
        free(v);
}

static inline void strv_freep(char ***v)
{
        strv_free(*v);
}
#define _cleanup_strv_ _cleanup_(strv_freep)

/* Put "NAME=value" kv (taken) into out[0..*n): replacing the value of its name, or added. */
static void env_put(char **out, size_t *n, char *kv, size_t nl)
{
        size_t i;

        for (i = 0; i < *n; i++)
                if (strncmp(out[i], kv, nl + 1) == 0)
                        break;
        if (i < *n) {
                free(out[i]);
                out[i] = kv;
        } else {
                out[(*n)++] = kv;
        }
}

/* environment = base variables, then the image's Env (its root layers'), then the sandbox's
 * create env, then the exec's env; a later value of a name replaces the earlier one. */
static int build_env(sh_sandbox *sb, const cJSON *env, char ***ret, sh_error **err)
{
        static const char *const base[] = {
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME=/workspace",
                "LANG=C.UTF-8",
                "PWD=/workspace",
                "TMPDIR=/tmp",
                "USER=sandbox",
                "SHELL=/bin/sh"};
        const cJSON *layers[2] = {sb->env, env}, *v;
        _cleanup_strv_ char **out = NULL; /* filled from the front, NULL-terminated */
        size_t n, cap, i, k;

        cap = ARRAY_SIZE(base) + (sb->layers ? sb->layers->n_env : 0) +
              (size_t)cJSON_GetArraySize(sb->env) + (env ? (size_t)cJSON_GetArraySize(env) : 0) + 1;
        out = calloc(cap, sizeof(char *));
        if (!out)
                return sh_error_make(err, ENOMEM, "out of memory");
        for (n = 0; n < ARRAY_SIZE(base); n++)
                if (!(out[n] = strdup(base[n])))
                        return sh_error_make(err, ENOMEM, "out of memory");
        for (i = 0; sb->layers && i < sb->layers->n_env; i++) {
                const char *e = sb->layers->env[i];
                char *kv = strdup(e);

                if (!kv)
                        return sh_error_make(err, ENOMEM, "out of memory");
                env_put(out, &n, kv, (size_t)(strchr(e, '=') - e)); /* checked at the create */
        }
        for (k = 0; k < 2; k++) {
                if (!layers[k])
                        continue;
                cJSON_ArrayForEach(v, layers[k])
                {
                        size_t nl = strlen(v->string);
                        char *kv;

                        if (nl == 0 || strchr(v->string, '='))
                                return sh_error_new(err, SH_E_INVALID,
                                                    "env names must be non-empty and hold no '='");
                        if (asprintf(&kv, "%s=%s", v->string, v->valuestring) < 0)
                                return sh_error_make(err, ENOMEM, "out of memory");
                        env_put(out, &n, kv, nl);
                }
        }
        *ret = TAKE_PTR(out);
        return 0;
}

/* ---- an empty cgroup for the next exec ---------------------------------------------------- */

/* An exec's cgroup costs a mkdir in each hierarchy (v1: four, ~0.35 ms of the daemon's CPU,
 * most of it the memory controller's) on the request's path, and an rmdir plus the kernel's
 * deferred teardown of a memory cgroup after it. So a sandbox keeps one empty exec cgroup in
 * hand: made from a timer just after its worker is ready (once the create is answered), then
 * the cgroup of each exec that exited cleanly is given back (exec_recycle: only if it holds no
 * process, so nothing a command left running ever shares a cgroup with the next command), and
 * taken by the next exec. One at most (a second is removed), let go after SPARE_IDLE_MS
 * without an exec, so an idle sandbox holds nothing more than it did. A spare is an empty
 * child cgroup: freezes and kills of the sandbox's processes go over it harmlessly. */
#define SPARE_IDLE_MS        10000
#define SPARE_AFTER_READY_MS 1

static void spare_drop(sh_sandbox *sb)
{
        sh_loop_cancel_timer(sb->host->exec.loop, TAKE_PTR(sb->spare_t));
        if (sb->spare_cg)
                cg_bury(sb, TAKE_PTR(sb->spare_cg));
}

static void spare_idle(sh_loop *l, sh_timer *t, void *data)
{
        sh_sandbox *sb = data;

        sb->spare_t = NULL; /* the loop frees a fired timer */
        spare_drop(sb);
}

/* With a spare in hand: it goes after SPARE_IDLE_MS without an exec (never a spare that
 * nothing lets go). A sandbox of the warm pool keeps its spare until it is handed out (the
 * pool is at most 64, so 64 spares at most): the first exec of a claimed sandbox is then an
 * exec like any later one; the claim arms the idle timer (spare_arm). */
static void spare_arm(sh_sandbox *sb)
{
        sh_loop *l = sb->host->exec.loop;

        sh_loop_cancel_timer(l, TAKE_PTR(sb->spare_t));
        if (sb->pooled || !sb->spare_cg)
                return;
        sb->spare_t = sh_loop_add_timer(l, SPARE_IDLE_MS, spare_idle, sb);
        if (!sb->spare_t)
                spare_drop(sb);
}

static void spare_keep(sh_sandbox *sb, sh_cgroup *cg, uint64_t ooms)
{
        sb->spare_cg = cg;
        sb->spare_ooms = ooms;
        spare_arm(sb);
}

static void spare_make(sh_loop *l, sh_timer *t, void *data)
{
        sh_sandbox *sb = data;
        sh_cgroup *cg = NULL;
        sh_error *err = NULL;
        char name[32];

        sb->spare_t = NULL;
        if (sb->spare_cg || sb->deleted || sb->worker_dead || !sb->worker_ready || !sb->cg)
                return;
        snprintf(name, sizeof(name), "exec-%u", ++sb->next_exec_id);
        if (sh_cgroup_create(sb->host->exec.cgroot, sb->cg, name, NULL, &cg, &err) < 0) {
                /* nobody's request: the next exec makes its own, and says so if it cannot */
                log_warn("exec-cgroup-ahead-failed", sb->id, "%s", err && err->msg ? err->msg : "");
                sh_error_release(&err);
                return;
        }
        spare_keep(sb, cg, 0);
}

static bool exec_recycle(sh_cgroup *cg, uint64_t ooms, void *data)
{
        sh_exec_link *l = data;
        sh_sandbox *sb = l->sb;
        sh_error *err = NULL;
        bool empty = false;

        if (sb->spare_cg || sb->deleted || sb->worker_dead || !sb->cg)
                return false;
        /* a command that left a process behind (`sleep 1000 &`, its pipes closed) keeps its
         * cgroup until that process ends: removed later, never handed on */
        if (sh_cgroup_exec_is_empty(cg, &empty, &err) < 0 || !empty) {
                sh_error_release(&err);
                return false;
        }
        spare_keep(sb, cg, ooms);
        return true;
}

int sh_sandbox_exec(sh_sandbox *sb, char *const *argv, const cJSON *env, const sh_exec_opts *o,
                    sh_exec_event_fn fn, void *data, sh_exec **ret, sh_error **err)
{
        _cleanup_strv_ char **envp = NULL;
        sh_cgroup *cg = NULL;
        uint64_t ooms = 0;
        sh_exec_link *l;
        int r;

        if (sb->worker_dead || !sb->worker_ready || !sb->worker)
                return sh_error_new(err, SH_E_SANDBOX_NOT_FOUND, "the sandbox's worker is gone");
        if (build_env(sb, env, &envp, err) < 0)
                return -1;
        l = calloc(1, sizeof(*l));
        if (!l)
                return sh_error_make(err, ENOMEM, "out of memory");
        l->id = ++sb->next_exec_id;
        /* The spare, if there is one; else a spare still to be made (an exec right after the
         * create) is not: this exec makes its own cgroup, and hands it on when it ends. */
        sh_loop_cancel_timer(sb->host->exec.loop, TAKE_PTR(sb->spare_t));
        if (sb->spare_cg) {
                cg = TAKE_PTR(sb->spare_cg);
                ooms = sb->spare_ooms;
        }
        r = sh_exec_start(&sb->host->exec,
                          &(sh_exec_spec){
                                  .worker = sb->worker,
                                  .parent = sb->cg,
                                  .cg = cg,
                                  .cg_ooms = ooms,
                                  .id = l->id,
                                  .log_id = sb->id,
                                  .argv = argv,
                                  .envp = envp,
                                  .capture_max = o->capture_max,
                                  .heartbeat_ms = o->heartbeat_ms,
                                  .timeout_ms = o->timeout_ms,
                                  .grace_ms = sb->host->cfg->exec_grace_ms,
                                  .merge_output = o->merge_output,
                                  .read_max = o->read_max,
                                  .rate = o->rate,
                                  .rate_charge_min = o->rate_charge_min,
                                  .input = o->input,
                                  .frames = o->frames,
                                  .shell = o->shell,
                                  .uid = sb->owner.uid,
                                  .gid = sb->owner.gid,
                          },
                          fn, data,
                          &(sh_exec_owner){.ended = exec_ended,
                                           .recycle = exec_recycle,
                                           .freed = exec_freed,
                                           .data = l},
                          &l->e, err);
        if (r < 0) {
                free(l);
                return -1;
        }
        l->sb = sh_sandbox_ref(sb);
        l->linked = true;
        SH_LIST_PREPEND(execs, sb->execs, l);
        *ret = l->e;
        return 0;
}

/* ---- the create lifecycle: disk limit, worker, restore, marker, then one done ----------- */

/* The create ends: done runs once (taken first, so that nothing calls it twice). */
static void create_end(sh_sandbox *sb, const sh_error *err)
{
        sh_sandbox_done_fn done = TAKE_PTR(sb->create_done);

        if (done)
                done(sb, err, sb->create_data);
}

/* A create that cannot complete: the half-made sandbox goes (marker first, so it is never
 * seen as trusted), then the creator learns why. */
static void create_fail(sh_sandbox *sb, const sh_error *err)
{
        sh_error *ignored = NULL;

        sh_sandbox_ref(sb);
        if (!sb->deleted && owner_remove(sb, &ignored) < 0)
                log_warn("delete-failed", sb->id, "%s",
                         ignored && ignored->msg ? ignored->msg : "");
        sh_error_release(&ignored);
        create_end(sb, err);
        sh_sandbox_unref(sb);
}

/* Deleted by someone else (shutdown) before its create ended. */
static void create_deleted(sh_sandbox *sb)
{
        sh_error *err = NULL;

        sh_error_new(&err, SH_E_UNAVAILABLE, "the sandbox was deleted during its create");
        create_fail(sb, err);
        sh_error_release(&err);
}

static void restore_done(sh_sandbox *sb, const sh_error *err, void *data)
{
        sh_error *own = NULL;

        sb->restoring = false;
        if (!sb->create_done)
                return; /* cancelled: the creator is gone, the sandbox deleted */
        if (err) {
                if (sb->restore_root)
                        log_warn("restore-failed", sb->id, "directory '%s/%s': %s",
                                 sb->restore_root, sb->restore_name, err->msg ? err->msg : "");
                else
                        log_warn("restore-failed", sb->id, "item %s: %s", sb->item_id,
                                 err->msg ? err->msg : "");
                if (sh_error_kind_of(err) == SH_E_SANDBOX_NOT_FOUND) {
                        sh_error_new(&own, SH_E_UNAVAILABLE,
                                     "the sandbox was deleted during its restore");
                        create_fail(sb, own);
                } else {
                        create_fail(sb, err);
                }
                sh_error_release(&own);
                return;
        }
        /* Only a complete, re-owned workspace of a live sandbox is marked trusted. */
        if (sb->deleted) {
                sh_error_new(&own, SH_E_UNAVAILABLE, "the sandbox was deleted during its restore");
                create_fail(sb, own);
                sh_error_release(&own);
                return;
        }
        /* The marker says the workspace is its item's archive, complete: a directory's restore
         * (a snapshot's) has no item to persist back to, and sets none. */
        if (!sb->restore_root && sh_sandbox_mark_ready(sb, &own) < 0) {
                create_fail(sb, own);
                sh_error_release(&own);
                return;
        }
        create_end(sb, NULL);
}

/* The worker serves. The restore step, then the create ends: with a directory of the
 * creator's, its tree copied in and re-owned; with an item and an archive root (CONTRACT.md
 * 2.1), {nfs_root}/{item_id}/ restored, re-owned and marked ready; else nothing. */
/* sb's network under the create's policy (taken): its link made, or, a pooled sandbox's made
 * at its start already, its policy replaced. A failure fails the create. 0 or -1. */
static int network_attach(sh_sandbox *sb, int netns_fd)
{
        struct sh_network *net = sb->host->network;
        sh_error *err = NULL;
        int r = sh_network_policy(net, sb) ? sh_network_set_policy(net, sb, sb->egress, &err)
                                           : sh_network_attach(net, sb, netns_fd, sb->egress, &err);

        egress_free(sb);
        if (r < 0) {
                create_fail(sb, err);
                sh_error_release(&err);
        }
        return r;
}

/* A pooled sandbox gets its link now, denying everything until a create with a policy
 * claims it (network_attach) or one without takes it away (sh_sandbox_claim): made with the
 * network namespace its worker handed over as it started, as every sandbox's. A failure
 * leaves it without; its claim by a create with a policy then tries by /proc (which needs
 * CAP_SYS_PTRACE) and that create is answered with the reason if it fails. */
static void pool_network(sh_sandbox *sb, int netns_fd)
{
        sh_egress_policy deny;
        sh_error *err = NULL;

        if (!sh_network_nameserver(sb->host->network))
                return; /* the host gives no network */
        sh_egress_policy_init(&deny, SH_EGRESS_DENY);
        if (sh_network_attach(sb->host->network, sb, netns_fd, &deny, &err) < 0) {
                log_warn("pool-network-failed", sb->id, "%s", err && err->msg ? err->msg : "");
                sh_error_release(&err);
        }
}

static void create_worker_ready(sh_sandbox *sb)
{
        const sh_restorer *rs = sb->host->restorer;
        sh_error *err = NULL;
        int r;

        /* Its network, before anything of the creator's runs in it (network.c): attached as
         * its worker started (a pooled sandbox's: now). */
        if (sb->egress && network_attach(sb, -1) < 0)
                return;

        if (sb->restore_root && !rs->start_dir) {
                sh_error_new(&err, SH_E_INTERNAL, "this host restores no directory");
                create_fail(sb, err);
                sh_error_release(&err);
                return;
        }
        if (!sb->restore_root && (!rs->start || !sb->item_id)) {
                create_end(sb, NULL);
                return;
        }
        sb->restoring = true;
        r = sb->restore_root ? rs->start_dir(rs->impl, sb, sb->restore_root, sb->restore_name,
                                             restore_done, NULL, &err)
                             : rs->start(rs->impl, sb, restore_done, NULL, &err);
        if (r < 0) {
                sb->restoring = false;
                create_fail(sb, err);
                sh_error_release(&err);
        }
}

void sh_sandbox_create_cancel(sh_sandbox *sb)
{
        sh_error *err = NULL;

        if (!sb || !sb->create_done)
                return;
        /* A create that was never answered (shutdown) must not leave a sandbox nobody knows:
         * neither while its worker starts nor while its restore runs. */
        sb->create_done = NULL;
        if (!sb->deleted && owner_remove(sb, &err) < 0)
                log_warn("delete-failed", sb->id, "%s", err && err->msg ? err->msg : "");
        sh_error_release(&err);
}

static void worker_event(sh_worker *w, sh_worker_ev ev, uint32_t id, int value, int value2,
                         void *data)
{
        sh_sandbox *sb = data;
        sh_error *err = NULL;
        sh_exec_link *l;

        switch (ev) {
        case SH_WORKER_EV_PID:
                /* Its network while its worker sets up its root (the namespace exists): the
                 * link and the table's transaction overlap the worker's mounts. */
                if (sb->deleted)
                        return;
                if (sb->egress && sb->create_done)
                        (void)network_attach(sb, value2); /* a failure failed the create */
                else if (sb->pooled)
                        pool_network(sb, value2);
                return;
        case SH_WORKER_EV_READY:
                sb->worker_ready = true;
                /* The first exec's cgroup, made once the create is answered: a 0 ms timer
                 * runs in this loop turn, before the transport sends the answer, and its
                 * mkdirs (four on v1, ~0.35 ms) made every create that much slower. */
                sh_loop_cancel_timer(sb->host->exec.loop, TAKE_PTR(sb->spare_t));
                sb->spare_t = sh_loop_add_timer(sb->host->exec.loop, SPARE_AFTER_READY_MS,
                                                spare_make, sb);
                if (sb->create_done)
                        create_worker_ready(sb);
                return;
        case SH_WORKER_EV_STARTED:
                if ((l = exec_find(sb, id)))
                        sh_exec_on_started(l->e, value);
                return;
        case SH_WORKER_EV_EXITED:
                if ((l = exec_find(sb, id)))
                        sh_exec_on_exited(l->e, value);
                return;
        case SH_WORKER_EV_VOLUME_CREATED:
                if (id < sb->n_volumes && sb->volumes[id].kind == SH_VOLUME_PVC &&
                    sb->volumes[id].delete_on_end)
                        sb->vol_remove[id] = true;
                return;
        case SH_WORKER_EV_FAILED:
                log_error("worker-setup-failed", sb->id, "%s: %s", sh_worker_step_name(value),
                          strerror(value2));
                /* A volume the request named wrongly is the request's fault, said by name. */
                if (sh_volume_failure(sb->volumes, sb->n_volumes, id, value, value2, &err) < 0)
                        break;
                sh_error_make(&err, value2 ? value2 : EIO, "sandbox setup failed: %s: %s",
                              sh_worker_step_name(value), strerror(value2));
                break;
        case SH_WORKER_EV_DEAD:
                if (sb->deleted) {
                        /* Deleted while its worker started: the create learns it now. */
                        if (sb->create_done && !sb->restoring)
                                create_deleted(sb);
                        return;
                }
                log_error("worker-died", sb->id, "the sandbox's worker died");
                sh_error_make(&err, EIO, "the sandbox's worker died");
                break;
        }
        sb->worker_dead = true;
        execs_abandon(sb, "the sandbox's worker died");
        /* Setup failed before the create was answered: the sandbox goes. */
        if (sb->create_done && !sb->restoring)
                create_fail(sb, err);
        sh_error_release(&err);
}

/* An overlay root: the layers (checked at the create) and the upper and work its disk limit
 * holds (sh_disk_setup's dir/disk/root, dir/root; without a limit made here). */
static int spec_layers(sh_sandbox *sb, sh_worker_spec *spec, sh_error **err)
{
        const sh_root_layers *l = sb->layers;
        const char *root = sb->disk_mounted ? "disk/root" : "root";
        const sh_config *cfg = sb->host->cfg;
        int n;

        if (sh_disk_get_mode(sb->host->disk) == SH_DISK_NONE) {
                _cleanup_close_ int dirfd = sh_sandbox_open_dir(sb, err), fd = -1;

                if (dirfd < 0)
                        return -1;
                if (mkdirat(dirfd, "root", 0700) < 0 && errno != EEXIST)
                        return sh_error_make(err, errno, "creating the root's upper");
                fd = openat(dirfd, "root", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || (mkdirat(fd, "upper", 0755) < 0 && errno != EEXIST) ||
                    (mkdirat(fd, "work", 0700) < 0 && errno != EEXIST))
                        return sh_error_make(err, errno, "creating the root's upper");
        }
        n = snprintf(spec->layers, sizeof(spec->layers), "%s", l->dir);
        if (n < 0 || (size_t)n >= sizeof(spec->layers))
                return sh_error_make(err, ENAMETOOLONG, "the layers' directory is too long");
        snprintf(spec->upper, sizeof(spec->upper), "%s/%s/%s/%s/upper", cfg->root, SB_DIR,
                 sb->dirname, root);
        n = snprintf(spec->work, sizeof(spec->work), "%s/%s/%s/%s/work", cfg->root, SB_DIR,
                     sb->dirname, root);
        if (n < 0 || (size_t)n >= sizeof(spec->work))
                return sh_error_make(err, ENAMETOOLONG, "the state root's path is too long");
        for (size_t i = 0; i < l->n_lowers; i++)
                snprintf(spec->lowers[i], sizeof(spec->lowers[i]), "%s", l->lowers[i]);
        spec->n_lowers = (int)l->n_lowers;
        spec->n_entries = 0;
        return 0;
}

static int start_worker(sh_sandbox *sb, sh_error **err)
{
        const sh_sandbox_env *env = sb->host;
        const sh_config *cfg = env->cfg;
        sh_cgroup_root *cgroot = env->exec.cgroot;
        _cleanup_free_ sh_worker_spec *spec = calloc(1, sizeof(*spec));
        sh_cgroup *init_cg = NULL;
        char image_dir[4200];
        sh_cg_limits lim = {
                .memory_max = sb->memory_max,
                .pids_max = cfg->pids_max,
                .cpu_max_milli = sb->cpu_max_milli,
        };
        int procs[SH_EXEC_MAX_PROCS_FDS], n, i, r;
        _cleanup_close_ int dirfd = -1;

        if (!spec)
                return sh_error_make(err, ENOMEM, "out of memory");
        if (sh_cgroup_create(cgroot, NULL, sb->id, &lim, &sb->cg, err) < 0)
                return -1; /* cppcheck-suppress memleak ; spec is _cleanup_free_ */
        /* Not the id: it is the API's only credential, and uname is readable by all. */
        snprintf(spec->hostname, sizeof(spec->hostname), "%s", SH_WORKER_HOSTNAME);
        /* By the directory's neutral name: the sandbox sees the workspace's path in its
         * mountinfo (a bind mount's root), and must not see its own id there. */
        snprintf(spec->rootfs, sizeof(spec->rootfs), "%s/%s/%s/.rootfs", cfg->root, SB_DIR,
                 sb->dirname);
        snprintf(spec->workspace, sizeof(spec->workspace), "%s/%s/%s/workspace", cfg->root, SB_DIR,
                 sb->dirname);
        snprintf(spec->tools, sizeof(spec->tools), "%s", env->tools_dir);
        /* tmpfs pages count against the sandbox's memory: a full /tmp must leave room for
         * the commands themselves. */
        spec->tmp_size = 256ULL << 20;
        if (spec->tmp_size > sb->memory_max / 2)
                spec->tmp_size = sb->memory_max / 2;
        spec->uid = sb->owner.uid;
        spec->gid = sb->owner.gid;
        spec->seccomp = *sh_seccomp_prog(env->filter);
        spec->ptys_max = SH_WORKER_PTYS_MAX;
        spec->nameserver = sh_network_nameserver(env->network);
        sh_worker_spec_limits(spec, cfg->pids_max);
        if (sb->layers) {
                r = spec_layers(sb, spec, err);
        } else if (STREQ(sb->image, "default")) {
                snprintf(image_dir, sizeof(image_dir), "%s/default",
                         cfg->images ? cfg->images : "");
                r = sh_worker_spec_image(
                        spec, cfg->images && access(image_dir, F_OK) == 0 ? image_dir : NULL, err);
        } else {
                snprintf(image_dir, sizeof(image_dir), "%s/%s", cfg->images, sb->image);
                r = sh_worker_spec_image(spec, image_dir, err);
        }
        if (r < 0)
                return -1;
        dirfd = sh_sandbox_open_dir(sb, err);
        if (dirfd < 0)
                return -1;
        /* The mount points of the sandbox's root and of its one tmpfs (/tmp, /var/tmp and
         * /dev/shm), outside the workspace: only root writes here. */
        if ((mkdirat(dirfd, ".rootfs", 0700) < 0 && errno != EEXIST) ||
            (mkdirat(dirfd, ".tmpfs", 0700) < 0 && errno != EEXIST))
                return sh_error_make(err, errno, "creating the rootfs mount points");
        /* The worker lives in a leaf beside the exec cgroups: on v2 a cgroup holding
         * processes cannot hand controllers to its children. On v1 the leaf has no memory
         * cgroup of its own (the sandbox's holds the worker): each memory cgroup costs the
         * kernel memory in proportion to the machine's superblocks (sh_cgroup_create_leaf). */
        if (sh_cgroup_create_leaf(cgroot, sb->cg, "init", &init_cg, err) < 0)
                return -1;
        n = sh_cgroup_open_procs(init_cg, procs, SH_EXEC_MAX_PROCS_FDS);
        sh_cgroup_free(init_cg); /* removed with the sandbox's cgroup (destroy is recursive) */
        init_cg = NULL;
        if (n < 0)
                return sh_error_make(err, -n, "opening the sandbox cgroup");
        r = sh_volumes_spec(sb->volumes, sb->n_volumes, cfg, spec, err);
        if (r >= 0)
                r = sh_worker_start(env->exec.loop, env->init_image, spec, procs, n, worker_event,
                                    sb, &sb->worker, err);
        for (i = 0; i < n; i++)
                close(procs[i]);
        free(spec->volumes); /* the worker took its copy */
        return r;
}

/* The create cannot complete: the sandbox goes, and the waiting create learns why. */
static void setup_failed(sh_sandbox *sb, const sh_error *err)
{
        log_error("sandbox-setup-failed", sb->id, "%s", err && err->msg ? err->msg : "");
        create_fail(sb, err);
}

/* The workspace the disk limit's child made (or limited), taken by identity: the sandbox's
 * uid cannot have touched it yet (no worker runs), and from now on every use opens it by name
 * and checks it is this one. */
static int workspace_learn(sh_sandbox *sb, sh_error **err)
{
        _cleanup_close_ int dirfd = dir_open(sb, err), fd = -1;
        struct stat st;

        if (dirfd < 0)
                return -1;
        fd = openat(dirfd, workspace_name(sb), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return sh_error_make(err, errno, "opening the workspace");
        sb->ws = (dir_id){.dev = st.st_dev, .ino = st.st_ino};
        return 0;
}

static void disk_ready(const sh_error *err, uint32_t projid, void *data)
{
        sh_sandbox *sb = data;
        sh_error *own = NULL;

        sb->disk_job = NULL;
        if (sb->deleted) {
                /* deleted meanwhile: sandbox_free detaches whatever the child mounted */
                if (sb->create_done)
                        create_deleted(sb);
                sh_sandbox_unref(sb);
                return;
        }
        sb->projid = projid;
        if (err) {
                setup_failed(sb, err);
        } else if (workspace_learn(sb, &own) < 0) {
                setup_failed(sb, own);
        } else if (start_worker(sb, &own) < 0) {
                setup_failed(sb, own);
        } else if (projid) {
                log_debug("disk-limit", sb->id, "project id %u", (unsigned)projid);
        }
        sh_error_release(&own);
        sh_sandbox_unref(sb);
}

/* The workspace's limit is set up in a child (mkfs-free image copy, loop device, mounts,
 * quota writes all take time); the create stays suspended until disk_ready. */
static int start_disk(sh_sandbox *sb, sh_error **err)
{
        sh_disk *disk = sb->host->disk;
        _cleanup_close_ int dirfd = dir_open(sb, err);

        if (dirfd < 0)
                return -1;
        sb->disk_mounted = sh_disk_mounted(disk);
        /* The child gets its own copy of dirfd; ours closes on return. */
        if (sh_disk_setup(disk, sb->host->exec.loop, dirfd, sb->owner.uid, sb->owner.gid, sb->slot,
                          sb->layers != NULL, disk_ready, sh_sandbox_ref(sb), &sb->disk_job,
                          err) < 0) {
                sh_sandbox_unref(sb);
                return -1;
        }
        return 0;
}

/* No limit: the worker starts at once, as it always did. A limit: a child sets it up first
 * (disk_ready starts the worker). */
static int start_steps(sh_sandbox *sb, sh_error **err)
{
        return sh_disk_get_mode(sb->host->disk) == SH_DISK_NONE ? start_worker(sb, err)
                                                                : start_disk(sb, err);
}

/* ---- an OCI image: its pull, the create's first step (images/, docs/images.md) ----------- */

int sh_sandbox_pull_prepare(sh_sandbox *sb, const sh_create_opts *o)
{
        sb->oci = true;
        sb->keep_failed = o->keep_failed;
        sb->pull_progress = o->pull_progress;
        if (o->pull_username && o->pull_password) {
                sb->pull_username = strdup(o->pull_username);
                sb->pull_password = strdup(o->pull_password);
                if (!sb->pull_username || !sb->pull_password)
                        return -ENOMEM;
        }
        return 0;
}

/* The pull's credentials go as soon as it has ended: nothing of them stays in the daemon. */
static void pull_forget_creds(sh_sandbox *sb)
{
        if (sb->pull_password)
                explicit_bzero(sb->pull_password, strlen(sb->pull_password));
        free(TAKE_PTR(sb->pull_password));
        free(TAKE_PTR(sb->pull_username));
}

static void image_unpin(void *pin)
{
        sh_image_unref(pin);
}

/* The image's layers as the sandbox's root plan, its reference the plan's pin. */
static int layers_of_image(sh_sandbox *sb, sh_image *img, sh_error **err)
{
        size_t n = sh_image_n_layers(img), i;
        sh_root_layers plan = {
                .dir = (char *)sh_image_layers_dir(img),
                .n_lowers = n,
                .env = (char **)sh_image_env(img),
                .n_env = sh_image_n_env(img),
                .workdir = (char *)sh_image_workdir(img),
        };
        _cleanup_free_ char **lowers = calloc(n ? n : 1, sizeof(char *));

        if (!lowers) {
                sh_image_unref(img);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        for (i = 0; i < n; i++)
                lowers[i] = (char *)sh_image_layer_rel(img, i);
        plan.lowers = lowers;
        if (sh_root_layers_check(&plan, err) < 0) {
                sh_image_unref(img);
                return -1;
        }
        sb->layers = root_layers_copy(&plan);
        if (!sb->layers) {
                sh_image_unref(img);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        sh_sandbox_hold_pin(sb, img, image_unpin);
        return 0;
}

static void pull_done(sh_image *img, const sh_error *err, void *data)
{
        sh_sandbox *sb = data;
        sh_error *own = NULL;

        sb->pull = NULL;
        pull_forget_creds(sb);
        if (err) {
                log_warn("image-pull-failed", sb->id, "%s: %s", sb->image,
                         err->msg ? err->msg : "failed");
                if (sb->keep_failed) {
                        /* Kept, failed, until it is deleted: its creator shows why. */
                        sb->failed = strdup(err->msg ? err->msg : "the image's pull failed");
                        create_end(sb, err);
                } else {
                        create_fail(sb, err);
                }
        } else if (layers_of_image(sb, img, &own) < 0 || start_steps(sb, &own) < 0) {
                create_fail(sb, own);
        }
        sh_error_release(&own);
        sh_sandbox_unref(sb); /* the pull's */
}

/* Each layer's bytes as they change, to the creator (its pull_progress). */
static void pull_progressed(const sh_image_progress *p, void *data)
{
        sh_sandbox *sb = data;

        if (!sb->pull_progress || !sb->create_done || !p->n_layers)
                return;
        if (!sb->pull_told && !(sb->pull_told = calloc(SH_IMAGE_PROGRESS_LAYERS, sizeof(uint64_t))))
                return;
        for (size_t i = 0; i < p->n_layers && i < SH_IMAGE_PROGRESS_LAYERS; i++) {
                const sh_image_layer_progress *l = &p->layers[i];

                if (l->done == sb->pull_told[i])
                        continue;
                sb->pull_told[i] = l->done;
                sb->pull_progress(sb->create_data, l->digest, l->done, l->size);
        }
}

static int start_pull(sh_sandbox *sb, sh_error **err)
{
        const sh_registry_auth auth = {.username = sb->pull_username,
                                       .password = sb->pull_password};

        if (!sb->host->images)
                return sh_error_new(err, SH_E_INVALID, "this host pulls no images");
        sb->pull = sh_images_get(sb->host->images, sb->image, sb->pull_username ? &auth : NULL,
                                 pull_done, pull_progressed, sh_sandbox_ref(sb), err);
        if (!sb->pull) {
                pull_forget_creds(sb);
                sh_sandbox_unref(sb);
                return -1;
        }
        log_info("image-pull", sb->id, "%s", sb->image);
        return 0;
}

bool sh_sandbox_pulling(const sh_sandbox *sb)
{
        return sb->pull != NULL;
}

const char *sh_sandbox_failed(const sh_sandbox *sb)
{
        return sb->failed;
}

int sh_sandbox_start(sh_sandbox *sb, sh_sandbox_done_fn done, void *data, sh_error **err)
{
        /* An OCI image is pulled first (pull_done goes on with the steps). */
        if ((sb->oci ? start_pull(sb, err) : start_steps(sb, err)) < 0)
                return -1;
        sb->create_done = done;
        sb->create_data = data;
        return 0;
}

/* ---- the warm pool's side (manager.c keeps the pool) --------------------------------------- */

void sh_sandbox_set_pooled(sh_sandbox *sb, bool on)
{
        sb->pooled = on;
}

bool sh_sandbox_pooled(const sh_sandbox *sb)
{
        return sb->pooled;
}

bool sh_sandbox_idle_ready(const sh_sandbox *sb)
{
        return sb->worker_ready && !sb->worker_dead && !sb->deleted && !sb->create_done &&
               !sb->restoring && !sb->execs && !sb->disk_job;
}

static void claim_end(sh_loop *l, sh_timer *t, void *data)
{
        sh_sandbox *sb = data;

        sb->claim_t = NULL; /* the loop frees a fired timer */
        if (sb->create_done && sb->deleted)
                create_deleted(sb);
        else if (sb->create_done)
                create_worker_ready(sb); /* its restore step, if it has one */
}

int sh_sandbox_claim(sh_sandbox *sb, const sh_create_opts *o, sh_sandbox_done_fn done, void *data,
                     sh_error **err)
{
        cJSON *copy = o->env ? cJSON_Duplicate(o->env, true) : cJSON_CreateObject();

        if (!copy)
                return sh_error_make(err, ENOMEM, "out of memory");
        cJSON_Delete(sb->env);
        sb->env = copy;
        sb->surface = o->surface;
        if (restore_dir_set(sb, o) < 0 || egress_set(sb, o) < 0)
                return sh_error_make(err, ENOMEM, "out of memory");
        /* Its link, made at its start, goes with a create that gives it none (the native
         * surface's): loopback only. */
        if (!sb->egress)
                sh_network_detach(sb->host->network, sb);
        sb->created = ++creates;
        sb->pooled = false;
        if (sb->spare_cg)
                spare_arm(sb); /* kept while pooled: from now on, as every sandbox's */
        /* As every create: done once, from the loop, never before the create returns (a
         * delete meanwhile ends it with an error instead: create_deleted). */
        sb->claim_t = sh_loop_add_timer(sb->host->exec.loop, 0, claim_end, sb);
        if (!sb->claim_t)
                return sh_error_make(err, ENOMEM, "cannot schedule the create's end");
        sb->create_done = done;
        sb->create_data = data;
        log_info("sandbox-created", sb->id, "from the warm pool");
        return 0;
}

void sh_sandbox_set_deleted(sh_sandbox *sb)
{
        sb->deleted = true;
        /* A pause or resume under way ends without its done; the pause's hold stays (the kill
         * thaws). No expiry any more. */
        timers_stop(sb);
        ws_drop(sb);
}

void sh_sandbox_kill(sh_sandbox *sb)
{
        /* Running execs end with an in-band error; then the worker dies, and with PID 1 every
         * process of the namespace; the cgroup kill catches anything that raced. */
        execs_abandon(sb, "the sandbox was deleted");
        spare_drop(sb);
        /* Deleted while its image is pulled: this sandbox stops waiting (the pull goes on for
         * other waiters), and its create ends from the loop (claim_end: create_deleted). */
        if (sb->pull) {
                sh_image_pull_cancel(TAKE_PTR(sb->pull));
                pull_forget_creds(sb);
                if (sb->create_done && !sb->claim_t)
                        sb->claim_t = sh_loop_add_timer(sb->host->exec.loop, 0, claim_end, sb);
                sh_sandbox_unref(sb); /* the pull's: the caller holds its own */
        }
        if (sb->disk_job)
                sh_disk_job_cancel(sb->disk_job); /* its end frees what it made */
        if (sb->worker)
                sh_worker_kill(sb->worker);
        if (sb->cg) {
                sh_error *kerr = NULL;

                /* Not the helpers working for it: the delete observers have told rsync to
                 * stop (it removes its temporary file first), a remover may finish. */
                if (sh_cgroup_kill_procs(sb->cg, &kerr) < 0)
                        log_warn("sandbox-kill-failed", sb->id, "%s", kerr ? kerr->msg : "");
                sh_error_release(&kerr);
        }
        /* The marker goes first: a reader of `ready` must never see a half-removed sandbox as
         * trusted. (Its directory is still where it was made: the tree moves after.) */
        {
                sh_error *derr = NULL;
                _cleanup_close_ int dirfd = dir_open(sb, &derr);

                if (dirfd < 0)
                        log_warn("marker-remove-failed", sb->id, "%s, ignoring",
                                 derr && derr->msg ? derr->msg : "");
                else if (unlinkat(dirfd, ".ready", 0) < 0 && errno != ENOENT)
                        log_warn("marker-remove-failed", sb->id, "%s, ignoring", strerror(errno));
                sh_error_release(&derr);
        }
}

pid_t sh_sandbox_worker_pid(const sh_sandbox *sb)
{
        return sb->worker ? sh_worker_pid(sb->worker) : -1;
}
