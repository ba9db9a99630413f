/* manager.c: the sandbox registry (id -> sandbox), its limits (capacity, draining), the
 * resources every sandbox shares (cgroup subtree, seccomp filter, sandbox-init image, disk
 * mode), create and delete around the sandbox object (sandbox.c), the state root's directories
 * and trash, leftover cleanup, the background removal of deleted trees, and the cgroups
 * waiting to be empty. */
#include "sh/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/capability.h"
#include "sh/cgroup.h"
#include "sh/disk.h"
#include "sh/images.h"
#include "sh/log.h"
#include "sh/network.h"
#include "sh/seccomp.h"
#include "sh/spawn.h"
#include "sh/volquota.h"
#include "sh/worker.h"

#include "remover.h"
#include "sandbox-internal.h"

#define TRASH_DIR ".trash"

struct sh_manager {
        const sh_config *cfg;
        sh_loop *loop;
        int rootfd;         /* {root}, O_DIRECTORY */
        int trashfd;        /* {root}/.trash, O_DIRECTORY */
        int sbfd;           /* {root}/.sandboxes, O_DIRECTORY */
        char *root_real;    /* {root} with every link resolved: as mountinfo shows it */
        uint64_t sb_seq;    /* names below .sandboxes */
        sh_disk *disk;      /* how workspaces are limited */
        sh_sandbox **slots; /* cfg->max_sandboxes entries, NULL = free */
        unsigned count;
        /* Found by id without a scan (every request names its sandbox): buckets[hash & mask]
         * is the first slot + 1 of a chain through next[] (0 ends it). */
        unsigned *buckets, *next, mask;
        /* The free slots, oldest freed first (a ring): a create takes one in O(1), and a
         * slot (a uid, a directory name) comes back as late as it can. */
        unsigned *free_ring, free_head, free_n;
        bool draining;
        uint64_t trash_seq;
        char pod_token[SH_POD_TOKEN_LEN + 1]; /* {root}/pod-token: the first digits of ids */
        sh_cgroup_root *cgroot;
        sh_seccomp *filter;
        int init_image;   /* sandbox-init's sealed memfd: every worker is exec'd from it */
        char tools[4096]; /* {root}/tools: the tool store, read-only in every sandbox */
        sh_sandbox_observer *observers; /* told of every delete */
        sh_log_tap journal_tap;         /* lines naming a sandbox into its journal */
        sh_ws_cache *ws_cache;          /* the workspaces in use (sandbox.c) */
        sh_restorer restorer;           /* start NULL: no restore step */
        sh_sandbox_env sbenv;           /* what every sandbox is made with (sh_sandbox_new) */
        /* the warm pool (SANDBOX_HOST_WARM_POOL): ready sandboxes, one being started for it,
         * the timer that starts the next; each holds a reference */
        sh_sandbox **pool;
        unsigned pool_n;
        sh_sandbox *pool_filling;
        sh_timer *pool_t;
        sh_removals *removals; /* the removals in the background (remover.c) */
        unsigned teardowns;    /* filesystems being detached, whose removal follows */
        sh_images *images;     /* the image store ({root}/images); NULL: pulls are off */
        sh_cgroup *images_cg;  /* {subtree}/images: its unpackers' cgroups are below it */
        sh_network *network;   /* the sandboxes' network (network.c) */
};

/* Every layer unpack of the daemon together (each has its own, smaller limits below). */
#define IMAGES_CG_MEMORY_MAX (2ULL << 30)
#define IMAGES_CG_PIDS_MAX   256
#define IMAGES_CG_CPU_MILLI  2000

/* /healthz: this host pulls images by reference (SANDBOX_HOST_IMAGE_PULL, docs/images.md). */
static bool images_on;
static bool cap_images(void)
{
        return images_on;
}
SH_CAPABILITY_IF(images_pull, "images.pull", cap_images)

/* pvc.storage is held (a project quota on a named volume's directory): the volume root's file
 * system enforces project quota, asked once at start (volumes_open). */
static bool volume_quota_on;
bool sh_volume_storage_held(void)
{
        return volume_quota_on;
}

static void pool_schedule(sh_manager *m, uint64_t ms);
static void pool_stop(sh_manager *m);

void sh_manager_set_restorer(sh_manager *m, const sh_restorer *r)
{
        m->restorer = *r;
}

int sh_manager_trash_fd(const sh_manager *m)
{
        return m->trashfd;
}

sh_removals *sh_manager_removals(const sh_manager *m)
{
        return m->removals;
}

void sh_manager_observe(sh_manager *m, sh_sandbox_observer *o)
{
        SH_LIST_APPEND(observers, m->observers, o);
}

void sh_manager_unobserve(sh_manager *m, sh_sandbox_observer *o)
{
        if (SH_LIST_LINKED(observers, m->observers, o))
                SH_LIST_REMOVE(observers, m->observers, o);
}

/* Which cgroup hierarchy this daemon drives, for /healthz. */
static sh_cg_mode cg_mode;
static bool cap_cgroup_v1(void)
{
        return cg_mode == SH_CG_V1;
}
static bool cap_cgroup_v2(void)
{
        return cg_mode == SH_CG_V2;
}
SH_CAPABILITY_IF(cgroup_v1, "cgroup.v1", cap_cgroup_v1)
SH_CAPABILITY_IF(cgroup_v2, "cgroup.v2", cap_cgroup_v2)
SH_CAPABILITY(isolation, "isolation.namespaces")
SH_CAPABILITY(seccomp, "isolation.seccomp")

sh_cgroup_root *sh_manager_cgroups(sh_manager *m)
{
        return m->cgroot;
}

const sh_config *sh_manager_config(const sh_manager *m)
{
        return m->cfg;
}

sh_loop *sh_manager_loop(const sh_manager *m)
{
        return m->loop;
}

sh_network *sh_manager_network(const sh_manager *m)
{
        return m->network;
}

const char *sh_manager_pod_token(const sh_manager *m)
{
        return m->pod_token;
}

/* A clean stop leaves no cgroup behind (a killed daemon's are removed by the next start with
 * the same state root). */
static void root_destroy(sh_manager *m)
{
        sh_error *cerr = NULL;

        if (!m->cgroot)
                return;
        if (sh_cgroup_root_destroy(m->cgroot, &cerr) < 0)
                log_warn("cgroup-remove-failed", NULL, "%s, ignoring",
                         cerr && cerr->msg ? cerr->msg : "");
        sh_error_release(&cerr);
        sh_cgroup_root_free(m->cgroot);
        m->cgroot = NULL;
}

/* A buried cgroup that could not be removed (sh_cgroup_bury): a real leftover, still there a
 * minute later (one removed meanwhile by another path is never reported). */
static void cgroup_lost(const char *relpath, const char *why, void *data)
{
        (void)data;
        log_warn("cgroup-remove-failed", NULL, "'%s': %s, giving up", relpath, why);
}

void sh_manager_bury_cgroup(sh_manager *m, sh_cgroup *cg)
{
        (void)m;
        sh_cgroup_bury(cg, false);
}

/* Move fromfd/name into the trash under a new name ("label.pid.n"), returned in tname. */
static int move_to_trash(sh_manager *m, int fromfd, const char *name, const char *label,
                         char *tname, size_t tsize, sh_error **err)
{
        snprintf(tname, tsize, "%s.%llu.%llu", label, (unsigned long long)getpid(),
                 (unsigned long long)++m->trash_seq);
        if (renameat(fromfd, name, m->trashfd, tname) < 0)
                return sh_error_make(err, errno, "moving '%s' to the trash", name);
        return 0;
}

/* Remove {root}/.trash/{tname} in the background: the sandbox is gone (or never ran), so the
 * remover gets a cgroup of its own (remover.c). */
static int remove_trash(sh_manager *m, const char *tname, sh_error **err)
{
        return sh_remover_start(m, tname, err);
}

/* A sandbox that left nothing behind needs no remover: its directory then holds only its
 * workspace, its trash, its log directory (sh_sandbox_open_log) and the mount points of its
 * root and its /tmp tmpfs (.rootfs, .tmpfs: mounted in the worker's namespace only), all empty. rmdir never follows a link and fails on a directory with anything in it
 * (ENOTEMPTY), so nothing of a sandbox's tree is ever read here: whatever it left goes to
 * the remover as before. Spares a delete the remover's fork, cgroup and network namespace,
 * whose cost the next create paid (churn). True when the whole directory is gone. */
static bool remove_if_empty(int fromfd, const char *name)
{
        static const char *const parts[] = {"workspace", ".trash", "logs", ".rootfs", ".tmpfs"};
        _cleanup_close_ int fd =
                openat(fromfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0)
                return false;
        for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
                if (unlinkat(fd, parts[i], AT_REMOVEDIR) < 0 && errno != ENOENT)
                        return false;
        return unlinkat(fromfd, name, AT_REMOVEDIR) == 0;
}

static int trash_and_remove(sh_manager *m, int fromfd, const char *name, sh_error **err)
{
        char tname[96];

        if (remove_if_empty(fromfd, name))
                return 0;
        if (move_to_trash(m, fromfd, name, "sb", tname, sizeof(tname), err) < 0)
                return -1;
        return remove_trash(m, tname, err);
}

int sh_manager_remove_trashed(sh_manager *m, const char *trash_dir, const char *name,
                              sh_error **err)
{
        return sh_remover_start_at(m, trash_dir, name, err);
}

void sh_manager_trash_kick(sh_manager *m, sh_sandbox *sb)
{
        sh_remover_sandbox(m, sb);
}

bool sh_manager_trash_wait(sh_manager *m, sh_sandbox *sb, sh_waiter *w)
{
        return sh_remover_sandbox_wait(m, sb, w);
}

void sh_manager_discard_unnamed(sh_manager *m, sh_sandbox *sb, int fd)
{
        _cleanup_close_ int trashfd = -1;
        sh_error *err = NULL;
        struct stat st;

        if (fd < 0)
                return;
        if (fstat(fd, &st) < 0 || (uint64_t)st.st_blocks * 512 <= SH_FS_TRASH_INLINE_MAX) {
                close(fd);
                return;
        }
        if (sb && (trashfd = sh_sandbox_open_trash(sb, &err)) >= 0 &&
            sh_fs_trash_unnamed(fd, trashfd) > 0) {
                close(fd);
                sh_manager_trash_kick(m, sb);
                return;
        }
        sh_error_release(&err);
        sh_remover_close(m, fd);
}

bool sh_manager_removing(const sh_manager *m)
{
        return sh_removals_pending(m->removals) > 0 || m->teardowns > 0;
}

void sh_manager_removals_hurry(sh_manager *m)
{
        sh_removals_hurry(m->removals);
}

void sh_manager_removals_stop(sh_manager *m)
{
        if (m->teardowns)
                log_warn("remove-left", NULL,
                         "%u workspace filesystem(s) still being detached: their trees stay in "
                         "the trash (the next start removes them)",
                         m->teardowns);
        sh_removals_stop(m->removals);
}

/* Whatever an earlier run left in the trash goes, in a confined child of its own. */
static void empty_trash(sh_manager *m)
{
        sh_error *err = NULL;

        if (sh_remover_start(m, NULL, &err) < 0)
                log_warn("cleanup-failed", NULL, "%s, ignoring", err && err->msg ? err->msg : "");
        sh_error_release(&err);
}

/* The mounts a killed daemon left (the workspace filesystems of loop and tmpfs) are detached
 * first: removing the tree would otherwise empty each one file by file and then fail. */
static void leftovers_detached(bool ok, void *data)
{
        sh_manager *m = data;

        if (!ok)
                log_warn("cleanup-failed", NULL,
                         "some workspace mounts left by an earlier run "
                         "could not be detached, ignoring");
        empty_trash(m);
}

static unsigned trash_entries(sh_manager *m, int dirfd, bool ids_only)
{
        DIR *d;
        struct dirent *de;
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        unsigned found = 0;

        if (fd < 0 || !(d = fdopendir(fd))) {
                sh_close(fd);
                log_warn("cleanup-failed", NULL, "cannot list the state root: %s, ignoring",
                         strerror(errno));
                return 0;
        }
        while ((de = readdir(d))) {
                sh_error *err = NULL;
                char name[sizeof(de->d_name)], tname[300];
                struct stat st;

                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                if (ids_only && !sh_remote_id_valid(de->d_name, strlen(de->d_name)))
                        continue;
                snprintf(name, sizeof(name), "%s", de->d_name);
                /* {root}/{id} is a link to the real directory, which goes with .sandboxes. */
                if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
                        if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
                                log_warn("cleanup-failed", name, "%s, ignoring", strerror(errno));
                        continue;
                }
                if (move_to_trash(m, dirfd, name, "sb", tname, sizeof(tname), &err) < 0)
                        log_warn("cleanup-failed", NULL, "%s, ignoring", err ? err->msg : "");
                else
                        found++;
                sh_error_release(&err);
        }
        closedir(d);
        return found;
}

static void cleanup_leftovers(sh_manager *m)
{
        char prefix[4200], **mps = NULL;
        size_t n = 0;
        sh_error *err = NULL;
        unsigned found;

        found = trash_entries(m, m->rootfd, true) + trash_entries(m, m->sbfd, false);
        if (found)
                log_info("cleanup", NULL, "removing %u sandbox(es) left by an earlier run", found);
        /* Whatever an earlier run left in the trash goes too, its mounts first. The list is
         * taken now: what this run's deletes move there later is detached by them. */
        snprintf(prefix, sizeof(prefix), "%s/%s/", m->root_real, TRASH_DIR);
        if (sh_disk_mounts_below_self(prefix, &mps, &n, &err) < 0) {
                log_warn("cleanup-failed", NULL, "%s, ignoring", err ? err->msg : "");
                sh_error_release(&err);
        }
        if (n) {
                log_info("cleanup", NULL, "detaching %zu workspace mount(s) left by an earlier run",
                         n);
                if (sh_disk_detach(m->loop, mps, n, leftovers_detached, m, &err) < 0) {
                        log_warn("cleanup-failed", NULL, "%s, ignoring", err ? err->msg : "");
                        sh_error_release(&err);
                        empty_trash(m);
                }
        } else {
                empty_trash(m);
        }
        sh_disk_strv_free(mps, n);
}

/* ---- what every sandbox is made with (sh_sandbox_env) ----------------------------------- */

static void bury(void *reaper, sh_cgroup *cg)
{
        sh_manager_bury_cgroup(reaper, cg);
}

static void release_dir(void *owner, const char *dirname, char *trash_name);

static int remove_sandbox(void *owner, sh_sandbox *sb, sh_error **err)
{
        return sh_manager_delete(owner, sb, err);
}

/* The only calls a sandbox makes up to the manager. */
static const sh_sandbox_owner_ops sandbox_owner = {
        .remove = remove_sandbox,
        .release_dir = release_dir,
};

/* {root}/{name}, made if missing, opened without following a link: an O_DIRECTORY fd or -1. */
static int state_dir(int rootfd, const char *root, const char *name, mode_t mode, sh_error **err)
{
        int fd;

        if (mkdirat(rootfd, name, mode) < 0 && errno != EEXIST)
                return sh_error_make(err, errno, "creating '%s/%s'", root, name);
        fd = openat(rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return sh_error_make(err, errno, "opening '%s/%s'", root, name);
        return fd;
}

static int mkdir_p_abs(const char *path, mode_t mode)
{
        char buf[4096];
        size_t i, n = strlen(path);

        if (n >= sizeof(buf))
                return -ENAMETOOLONG;
        memcpy(buf, path, n + 1);
        for (i = 1; i <= n; i++) {
                if (buf[i] != '/' && buf[i] != '\0')
                        continue;
                buf[i] = '\0';
                if (mkdir(buf, mode) < 0 && errno != EEXIST)
                        return -errno;
                buf[i] = path[i];
        }
        return 0;
}

/* Whether a and b, absolute paths, are one directory or one lies below the other (by
 * components: "/data" and "/database" do not). */
static bool paths_overlap(const char *a, const char *b)
{
        size_t na = strlen(a), nb = strlen(b), n = na < nb ? na : nb;

        while (na > 1 && a[na - 1] == '/')
                na--;
        while (nb > 1 && b[nb - 1] == '/')
                nb--;
        n = na < nb ? na : nb;
        if (n == 1) /* "/" holds everything */
                return true;
        return strncmp(a, b, n) == 0 && (na == nb || (na < nb ? b[n] : a[n]) == '/');
}

/* An allowed host prefix must not hold, nor lie inside, a directory of the daemon's own: a host
 * volume there would hand one sandbox the others' workspaces, archives, snapshots or named
 * volumes. Both sides are compared with their links resolved (a missing daemon directory, an
 * archive not mounted yet: as written). */
static int prefix_check(const sh_config *cfg, const char *prefix, sh_error **err)
{
        const char *const own[] = {cfg->root, cfg->volume_root, cfg->nfs_root, cfg->snapshot_root,
                                   cfg->images};
        const char *const what[] = {"SANDBOX_HOST_ROOT", "SANDBOX_HOST_VOLUME_ROOT",
                                    "SANDBOX_HOST_NFS_ROOT", "SANDBOX_HOST_SNAPSHOT_ROOT",
                                    "SANDBOX_HOST_IMAGES"};
        _cleanup_free_ char *p = realpath(prefix, NULL);

        if (!p)
                return sh_error_make(err, errno, "SANDBOX_HOST_VOLUME_HOST_ALLOW's prefix '%s'",
                                     prefix);
        for (size_t i = 0; i < ARRAY_SIZE(own); i++) {
                _cleanup_free_ char *o = own[i] ? realpath(own[i], NULL) : NULL;
                const char *d = o ? o : own[i];

                if (d && (paths_overlap(p, d) || paths_overlap(prefix, own[i])))
                        return sh_error_new(err, SH_E_INVALID,
                                            "SANDBOX_HOST_VOLUME_HOST_ALLOW's prefix '%s' "
                                            "overlaps the daemon's own directory '%s' (%s): "
                                            "a host volume there would reach other sandboxes' "
                                            "data",
                                            prefix, own[i], what[i]);
        }
        return 0;
}

/* Whether the volume root holds project quota, said in the start log: a named volume's
 * pvc.storage is its limit, or it is ignored (and each create says so). */
static int volume_quota_probe(const sh_config *cfg, sh_error **err)
{
        _cleanup_close_ int fd = open(cfg->volume_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char why[300];

        if (fd < 0)
                return sh_error_make(err, errno, "opening the volume root '%s'", cfg->volume_root);
        volume_quota_on = sh_volquota_probe(fd, "the volume root", why, sizeof(why)) == 0;
        /* The daemon writes into volumes too (the file API): never past their limit. */
        if (volume_quota_on && sh_disk_drop_sys_resource() < 0) {
                snprintf(why, sizeof(why), "CAP_SYS_RESOURCE cannot be dropped: %s",
                         strerror(errno));
                volume_quota_on = false;
        }
        if (volume_quota_on)
                log_info("volume-storage", NULL,
                         "project quota on the volume root '%s': a named volume's pvc.storage "
                         "limits the directory a create makes",
                         cfg->volume_root);
        else
                log_info("volume-storage", NULL, "not enforced in '%s': %s; pvc.storage is ignored",
                         cfg->volume_root, why);
        return 0;
}

/* The volumes' places, at start (never on the loop later: either may be NFS): the named
 * volumes' root made if missing, every allowed host prefix an existing directory that shares
 * nothing with the daemon's own directories. */
static int volumes_open(const sh_config *cfg, sh_error **err)
{
        const char *c = cfg->volume_host_allow;
        struct stat st;
        int r = mkdir_p_abs(cfg->volume_root, 0711);

        if (r < 0)
                return sh_error_make(err, -r,
                                     "creating the volume root '%s' (SANDBOX_HOST_VOLUME_ROOT): %s",
                                     cfg->volume_root, strerror(-r));
        if (volume_quota_probe(cfg, err) < 0)
                return -1;
        while (c && *c) {
                size_t n = strcspn(c, ":");
                char prefix[4096];

                snprintf(prefix, sizeof(prefix), "%.*s", (int)n, c);
                if (stat(prefix, &st) < 0)
                        return sh_error_make(
                                err, errno, "SANDBOX_HOST_VOLUME_HOST_ALLOW's prefix '%s': %s",
                                prefix, errno == ENOENT ? "does not exist" : strerror(errno));
                if (!S_ISDIR(st.st_mode))
                        return sh_error_new(err, SH_E_INVALID,
                                            "SANDBOX_HOST_VOLUME_HOST_ALLOW's prefix '%s' is "
                                            "not a directory",
                                            prefix);
                if (prefix_check(cfg, prefix, err) < 0)
                        return -1;
                c += n;
                c += *c == ':';
        }
        return 0;
}

/* What sh_manager_new made, on its failure path and at the end of sh_manager_free: the
 * filter, the init image, the cgroup subtree, the disk, the directory fds. */
static void manager_release(sh_manager *m)
{
        sh_network_close(TAKE_PTR(m->network));
        sh_images_free(TAKE_PTR(m->images));
        if (m->images_cg) {
                sh_error *cerr = NULL;

                if (sh_cgroup_destroy(m->images_cg, &cerr) < 0)
                        sh_error_release(&cerr); /* removed with the daemon's subtree */
                sh_cgroup_free(m->images_cg);
        }
        sh_ws_cache_free(m->ws_cache);
        sh_seccomp_free(m->filter);
        sh_close(m->init_image);
        root_destroy(m);
        sh_disk_free(m->disk);
        sh_close(m->rootfd);
        sh_close(m->trashfd);
        sh_close(m->sbfd);
        free(m->root_real);
        free(m->slots);
        free(m->pool);
        free(m->buckets);
        free(m->next);
        free(m->free_ring);
        sh_removals_free(m->removals);
        free(m);
}

/* SANDBOX_HOST_CGROUP_FAVOR_DYNMODS (sh/cgroup.h): said in the start log either way; a
 * failure leaves every cgroup attach as it was, slower only. */
static void favor_dynmods(sh_manager *m)
{
        sh_error *err = NULL;
        int r;

        if (!m->cfg->cgroup_favor_dynmods) {
                log_info("cgroup-favordynmods", NULL, "off (SANDBOX_HOST_CGROUP_FAVOR_DYNMODS)");
                return;
        }
        r = sh_cgroup_root_favor_dynmods(m->cgroot, &err);
        if (r < 0)
                log_warn("cgroup-favordynmods", NULL,
                         "%s: a cgroup attach may wait for an RCU grace period",
                         err && err->msg ? err->msg : "");
        else if (r == 0)
                log_info("cgroup-favordynmods", NULL,
                         "the node's cgroup2 is mounted without favordynmods: a cgroup attach may "
                         "wait for an RCU grace period (docs/deployment.md)");
        else
                log_info("cgroup-favordynmods", NULL, "in effect (%s)",
                         sh_cgroup_mode(m->cgroot) == SH_CG_V1 ? "name=" SH_CG_FAVOR_NAME " held"
                                                               : "the node's cgroup2 mount");
        sh_error_release(&err);
}

int sh_manager_new(const sh_config *cfg, sh_loop *loop, sh_manager **ret, sh_error **err)
{
        sh_manager *m = calloc(1, sizeof(*m));
        int r;

        if (!m)
                return sh_error_make(err, ENOMEM, "out of memory");
        m->cfg = cfg;
        m->loop = loop;
        m->rootfd = m->trashfd = m->sbfd = m->init_image = -1;
        for (m->mask = 15; m->mask < cfg->max_sandboxes; m->mask = 2 * m->mask + 1)
                ;
        m->slots = calloc(cfg->max_sandboxes, sizeof(*m->slots));
        m->pool = cfg->warm_pool ? calloc(cfg->warm_pool, sizeof(*m->pool)) : NULL;
        m->buckets = calloc((size_t)m->mask + 1, sizeof(*m->buckets));
        m->next = calloc(cfg->max_sandboxes, sizeof(*m->next));
        m->free_ring = calloc(cfg->max_sandboxes, sizeof(*m->free_ring));
        m->ws_cache = sh_ws_cache_new(loop);
        m->removals = sh_removals_new(m);
        if (!m->slots || (cfg->warm_pool && !m->pool) || !m->buckets || !m->next || !m->free_ring ||
            !m->ws_cache || !m->removals) {
                manager_release(m);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        for (unsigned i = 0; i < cfg->max_sandboxes; i++)
                m->free_ring[i] = i;
        m->free_n = (unsigned)cfg->max_sandboxes;
        r = mkdir_p_abs(cfg->root, 0711);
        if (r < 0) {
                sh_error_make(err, -r, "creating the state root '%s'", cfg->root);
                goto fail;
        }
        m->rootfd = open(cfg->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (m->rootfd < 0) {
                sh_error_make(err, errno, "opening the state root '%s'", cfg->root);
                goto fail;
        }
        m->trashfd = state_dir(m->rootfd, cfg->root, TRASH_DIR, 0700, err);
        if (m->trashfd < 0)
                goto fail;
        m->sbfd = state_dir(m->rootfd, cfg->root, SB_DIR, 0711, err);
        if (m->sbfd < 0)
                goto fail;
        if (sh_pod_token_load(m->rootfd, cfg->root, m->pod_token, err) < 0)
                goto fail;
        m->root_real = realpath(cfg->root, NULL);
        if (!m->root_real) {
                sh_error_make(err, errno, "resolving the state root '%s'", cfg->root);
                goto fail;
        }
        /* The workspace's disk limit: chosen now, refused now if it cannot be held. */
        if (sh_disk_open(cfg, m->rootfd, m->root_real, &m->disk, err) < 0)
                goto fail;
        if (sh_disk_why_none(m->disk))
                log_warn("disk-limit", NULL,
                         "none: SANDBOX_HOST_DISK_MAX=auto, but %s; workspaces have no disk "
                         "limit, and one sandbox can fill the state root (docs/deployment.md, "
                         "\"Disk limits\")",
                         sh_disk_why_none(m->disk));
        else if (sh_disk_get_mode(m->disk) == SH_DISK_NONE)
                log_info("disk-limit", NULL, "none: %s, workspaces have no disk limit",
                         cfg->disk_max_auto ? "SANDBOX_HOST_DISK_QUOTA=none"
                                            : "SANDBOX_HOST_DISK_MAX=0");
        else
                log_info("disk-limit", NULL, "%s: %llu bytes, %llu inodes per workspace%s",
                         sh_disk_mode_name(sh_disk_get_mode(m->disk)),
                         (unsigned long long)sh_disk_size(m->disk),
                         (unsigned long long)sh_disk_inodes(m->disk),
                         cfg->disk_max_auto ? " (SANDBOX_HOST_DISK_MAX=auto)" : "");
        /* Workers are grandchildren (the intermediate that made their namespaces exits):
         * as child subreaper the daemon stays their parent, reaps them and sees them die. */
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
                sh_error_make(err, errno, "becoming a child subreaper");
                goto fail;
        }
        if (mkdirat(m->rootfd, "tools", 0755) < 0 && errno != EEXIST) {
                sh_error_make(err, errno, "creating '%s/tools'", cfg->root);
                goto fail;
        }
        snprintf(m->tools, sizeof(m->tools), "%s/tools", cfg->root);
        if (volumes_open(cfg, err) < 0)
                goto fail;
        if (sh_seccomp_build(&m->filter, err) < 0)
                goto fail;
        m->init_image = sh_init_image_open(err);
        if (m->init_image < 0)
                goto fail;
        {
                /* The cgroup subtree is named for the state root, so a restarted daemon with
                 * the same root finds what a killed one left behind (FNV-1a of the path). */
                char instance[32];
                uint64_t h = 1469598103934665603ULL;
                const char *p;

                for (p = cfg->root; *p; p++)
                        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
                snprintf(instance, sizeof(instance), "%016llx", (unsigned long long)h);
                if (sh_cgroup_root_open(instance, &m->cgroot, err) < 0)
                        goto fail;
                /* Kills that wait for a freeze, and removals that wait for a cgroup to
                 * empty, go on from the loop's timers. */
                sh_cgroup_root_set_loop(m->cgroot, m->loop);
                sh_cgroup_root_on_lost(m->cgroot, cgroup_lost, m);
                cg_mode = sh_cgroup_mode(m->cgroot);
                favor_dynmods(m);
        }
        if (cfg->image_pull) {
                const sh_cg_limits lim = {.memory_max = IMAGES_CG_MEMORY_MAX,
                                          .pids_max = IMAGES_CG_PIDS_MAX,
                                          .cpu_max_milli = IMAGES_CG_CPU_MILLI};
                char dir[4200];

                snprintf(dir, sizeof(dir), "%s/images", m->root_real);
                if (sh_cgroup_create(m->cgroot, NULL, "images", &lim, &m->images_cg, err) < 0) {
                        sh_error_wrap(err, "creating the image unpackers' cgroup");
                        goto fail;
                }
                if (sh_images_open(cfg, loop, dir, m->images_cg, &m->images, err) < 0) {
                        sh_error_wrap(err, "opening the image store");
                        goto fail;
                }
                images_on = true;
        }
        if (sh_network_open(cfg, loop, m->pod_token, &m->network, err) < 0)
                goto fail;
        m->sbenv = (sh_sandbox_env){
                .exec = {.loop = loop, .cgroot = m->cgroot, .bury = bury, .reaper = m},
                .cfg = cfg,
                .filter = m->filter,
                .init_image = m->init_image,
                .tools_dir = m->tools,
                .disk = m->disk,
                .images = m->images,
                .sandboxes_fd = m->sbfd,
                .ws_cache = m->ws_cache,
                .restorer = &m->restorer,
                .owner = &sandbox_owner,
                .owner_data = m,
                .pod_token = m->pod_token,
                .network = m->network,
        };
        sh_journal_tap_init(&m->journal_tap, m);
        sh_log_tap_add(&m->journal_tap);
        cleanup_leftovers(m);
        /* the pool fills from the loop, once it runs */
        pool_schedule(m, 0);
        *ret = m;
        return 0;
fail:
        manager_release(m);
        return -1;
}

void sh_manager_free(sh_manager *m)
{
        if (!m)
                return;
        pool_stop(m);
        sh_manager_delete_all(m);
        /* Every pull stops (its unpacker killed, reaped below); an image a sandbox still holds
         * stays valid until its last unref. */
        sh_images_free(TAKE_PTR(m->images));
        sh_log_tap_remove(&m->journal_tap);
        /* The loop has stopped: a kill still waiting for a freeze ends now (thawed). */
        if (m->cgroot)
                sh_cgroup_root_set_loop(m->cgroot, NULL);
        /* No more tries (they would need the loop): what waits for one is logged as left;
         * the removers running finish, and sh_child_wait_all waits for them. */
        sh_removals_close(m->removals);
        sh_child_wait_all(m->loop);
        /* The buried sandbox cgroups get a last try (their processes died with their
         * workers); what still holds a process goes with the subtree (root_destroy kills,
         * waits a bounded time and removes). */
        manager_release(m);
}

/* loop, tmpfs: the sandbox's filesystem is detached once nothing of the daemon holds it. */
typedef struct teardown {
        sh_manager *m;
        char *tname;      /* its directory in the trash; NULL: still below .sandboxes */
        char dirname[24]; /* ...as this name */
} teardown;

static void teardown_done(bool ok, void *data)
{
        teardown *t = data;
        sh_error *err = NULL;
        char tname[96];

        t->m->teardowns--;
        if (!ok)
                log_warn("unmount-failed", NULL,
                         "a workspace filesystem could not be detached, "
                         "ignoring");
        if (!t->tname) {
                if (move_to_trash(t->m, t->m->sbfd, t->dirname, "sb", tname, sizeof(tname), &err) ==
                    0)
                        (void)remove_trash(t->m, tname, &err);
        } else {
                (void)remove_trash(t->m, t->tname, &err);
        }
        if (err)
                log_warn("remove-failed", NULL, "%s, ignoring", err->msg ? err->msg : "");
        sh_error_release(&err);
        free(t->tname);
        free(t);
}

/* Called with every fd of the daemon into the filesystem closed: the detach child (or the
 * dying worker's namespace) drops the last reference, and with it the unmount's cost. The
 * sandbox's owner call (sh_sandbox_owner_ops.release_dir). */
static void release_dir(void *owner, const char *dirname, char *trash_name)
{
        sh_manager *m = owner;
        teardown *t = calloc(1, sizeof(*t));
        char ws[4300], disk[4300];
        char *paths[] = {ws, disk};
        sh_error *err = NULL;

        if (!t) {
                log_warn("unmount-failed", NULL, "out of memory: a workspace stays mounted");
                free(trash_name);
                return;
        }
        t->m = m;
        t->tname = trash_name;
        snprintf(t->dirname, sizeof(t->dirname), "%s", dirname);
        snprintf(ws, sizeof(ws), "%s/%s/%s/workspace", m->root_real, t->tname ? TRASH_DIR : SB_DIR,
                 t->tname ? t->tname : t->dirname);
        snprintf(disk, sizeof(disk), "%s/%s/%s/disk", m->root_real, t->tname ? TRASH_DIR : SB_DIR,
                 t->tname ? t->tname : t->dirname);
        if (sh_disk_detach(m->loop, paths, ARRAY_SIZE(paths), teardown_done, t, &err) < 0) {
                log_warn("unmount-failed", NULL, "%s: a workspace stays mounted",
                         err && err->msg ? err->msg : "");
                sh_error_release(&err);
                free(t->tname);
                free(t);
                return;
        }
        m->teardowns++;
}

bool sh_manager_image_exists(const sh_manager *m, const char *image)
{
        struct stat st;
        char path[4200];

        if (!image || STREQ(image, "default"))
                return true;
        if (!m->cfg->images || !*image || strchr(image, '/') || STREQ(image, ".") ||
            STREQ(image, "..") || strlen(image) > 255)
                return false;
        snprintf(path, sizeof(path), "%s/%s", m->cfg->images, image);
        return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int sh_manager_image_kind(const sh_manager *m, const char *image, sh_error **err)
{
        char reason[256] = "";
        sh_image_ref ref;

        if (sh_manager_image_exists(m, image))
                return SH_IMAGE_HOST;
        if (!m->images)
                return sh_error_new(err, SH_E_INVALID,
                                    "'%.200s' is no host image, and this host pulls no images "
                                    "(SANDBOX_HOST_IMAGE_PULL=off)",
                                    image);
        if (sh_image_ref_parse(image, &ref, reason, sizeof(reason)) < 0)
                return sh_error_new(err, SH_E_INVALID,
                                    "'%.200s' is no host image, nor an image reference: %s", image,
                                    reason[0] ? reason : "out of memory");
        sh_image_ref_done(&ref);
        return SH_IMAGE_PULLED;
}

bool sh_manager_images_ready(const sh_manager *m)
{
        return !m->images || sh_images_ready(m->images);
}

void sh_manager_image_names(const sh_manager *m, char *out, size_t size)
{
        size_t off = (size_t)snprintf(out, size, "default");
        struct dirent *de;
        DIR *d;

        if (!m->cfg->images || !(d = opendir(m->cfg->images)))
                return;
        while ((de = readdir(d)) && off + 4 < size) {
                if (de->d_name[0] == '.' || STREQ(de->d_name, "default"))
                        continue;
                if (de->d_type != DT_DIR && de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
                        continue;
                off += (size_t)snprintf(out + off, size - off, ", %s", de->d_name);
        }
        if (off >= size - 4)
                snprintf(out + size - 4, 4, "...");
        closedir(d);
}

/* {root}/.sandboxes/{n} with `workspace` (and `disk`, the mount point of a filesystem of its
 * own), then {root}/{id} as a link to it, last: the id's path exists only once complete. */
static int sandbox_dir_create(sh_manager *m, sh_sandbox *sb, sh_error **err)
{
        bool mounted = sh_disk_mounted(m->disk);
        const sh_fs_owner *owner = sh_sandbox_owner(sb);
        const char *id = sh_sandbox_id(sb);
        _cleanup_close_ int dirfd = -1, wsfd = -1;
        struct stat dst, wst;
        char dirname[24], target[64];
        int r;

        /* Named for the slot, which the sandbox knows anyway (its uid is uid_base + slot):
         * the name says nothing of the id nor of other tenants. A slot's old directory is
         * normally in the trash by now; should it still be here, a second name. */
        snprintf(dirname, sizeof(dirname), "%u", sh_sandbox_slot(sb));
        r = mkdirat(m->sbfd, dirname, 0711);
        if (r < 0 && errno == EEXIST) {
                snprintf(dirname, sizeof(dirname), "%u.%llu", sh_sandbox_slot(sb),
                         (unsigned long long)++m->sb_seq);
                r = mkdirat(m->sbfd, dirname, 0711);
        }
        if (r < 0)
                return sh_error_make(err, errno, "creating the sandbox directory");
        snprintf(target, sizeof(target), "%s/%s", SB_DIR, dirname);
        dirfd = openat(m->sbfd, dirname, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* With a filesystem of its own, this workspace directory is only the bind's mount
         * point, and stays root's. */
        if (dirfd < 0 || mkdirat(dirfd, "workspace", 0755) < 0 ||
            (mounted && mkdirat(dirfd, "disk", 0700) < 0) ||
            (!mounted && mkdirat(dirfd, ".trash", 0700) < 0) ||
            (!mounted &&
             fchownat(dirfd, "workspace", owner->uid, owner->gid, AT_SYMLINK_NOFOLLOW) < 0) ||
            (!mounted && (wsfd = openat(dirfd, "workspace",
                                        O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) ||
            fstat(dirfd, &dst) < 0 || (wsfd >= 0 && fstat(wsfd, &wst) < 0) ||
            symlinkat(target, m->rootfd, id) < 0) {
                sh_error *ignored = NULL;

                r = sh_error_make(err, errno, "creating the workspace");
                (void)unlinkat(m->rootfd, id, 0);
                trash_and_remove(m, m->sbfd, dirname, &ignored);
                sh_error_release(&ignored);
                return r;
        }
        /* By identity: the fds close here, each use opens the directories again. */
        sh_sandbox_set_dir(sb, dirname, &dst, wsfd >= 0 ? &wst : NULL);
        return 0;
}

/* The registry: a slot's sandbox, and its id in the hash chains. */
static void registry_add(sh_manager *m, unsigned slot, sh_sandbox *sb)
{
        unsigned b = sh_remote_id_hash(sh_sandbox_id(sb)) & m->mask;

        m->slots[slot] = sb;
        m->next[slot] = m->buckets[b];
        m->buckets[b] = slot + 1;
        m->count++;
}

static void registry_remove(sh_manager *m, unsigned slot)
{
        unsigned *p = &m->buckets[sh_remote_id_hash(sh_sandbox_id(m->slots[slot])) & m->mask];

        while (*p && *p != slot + 1)
                p = &m->next[*p - 1];
        if (*p)
                *p = m->next[slot];
        m->slots[slot] = NULL;
        m->count--;
        m->free_ring[(m->free_head + m->free_n++) % m->cfg->max_sandboxes] = slot;
}

static int create_new(sh_manager *m, const sh_create_opts *o, sh_sandbox_done_fn done, void *data,
                      sh_sandbox **ret, sh_error **err)
{
        sh_sandbox *sb = NULL;
        unsigned slot;
        int kind;

        if (m->draining)
                return sh_error_new(err, SH_E_UNAVAILABLE, "the host is draining");
        if (m->count >= m->cfg->max_sandboxes || !m->free_n)
                return sh_error_new(err, SH_E_UNAVAILABLE, "the host holds %u sandboxes", m->count);
        kind = o->root_layers ? SH_IMAGE_HOST : sh_manager_image_kind(m, o->image, err);
        if (kind < 0)
                return -1;
        slot = m->free_ring[m->free_head];
        if (sh_sandbox_new(&m->sbenv, slot, o, &sb, err) < 0)
                return -1;
        if (kind == SH_IMAGE_PULLED && sh_sandbox_pull_prepare(sb, o) < 0) {
                sh_sandbox_unref(sb);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        if (sandbox_dir_create(m, sb, err) < 0) {
                sh_sandbox_unref(sb);
                return -1;
        }
        m->free_head = (m->free_head + 1) % (unsigned)m->cfg->max_sandboxes;
        m->free_n--;
        registry_add(m, slot, sb); /* the registry's reference */
        if (sh_sandbox_start(sb, done, data, err) < 0) {
                sh_error *ignored = NULL;

                sh_manager_delete(m, sb, &ignored);
                sh_error_release(&ignored);
                return -1;
        }
        *ret = sh_sandbox_ref(sb);
        return 0;
}

/* ---- the warm pool -------------------------------------------------------------------------- */

/* SANDBOX_HOST_WARM_POOL sandboxes are kept started with the default options (no item, the
 * default image, the host's limits, no env), handed to nobody: a create with those options
 * takes one (sh_sandbox_claim) instead of starting a worker, and the pool starts the next
 * one from a timer, one at a time, off the request path. A pooled sandbox is a sandbox like
 * any other (its own slot, uid, cgroup, namespaces), never used before it is handed out, and
 * its id is known to no client until then. It counts in the slots, but not as a client's:
 * not in sh_manager_count, not for sh_manager_full (a full host still hands them out), not
 * in sh_manager_foreach (drain, persist). Draining or shutdown deletes them. */
#define POOL_RETRY_MS 1000
/* The refill after a hand-out waits this long: started at once, its synchronous part (the
 * directories, the cgroup, the worker's fork) ran in the same loop turn as the claimed
 * create's answer, before it was sent (+3 ms), and its worker's start shared the cores with
 * the client's first exec. A client's create and first commands come in these first
 * milliseconds; the pool holds up to 64 for the creates of a burst. */
#define POOL_AFTER_CLAIM_MS 25

static bool pool_member(sh_manager *m, sh_sandbox *sb, unsigned *ret_i)
{
        for (unsigned i = 0; i < m->pool_n; i++)
                if (m->pool[i] == sb) {
                        if (ret_i)
                                *ret_i = i;
                        return true;
                }
        return false;
}

static void pool_ready(sh_sandbox *sb, const sh_error *err, void *data)
{
        sh_manager *m = data;

        m->pool_filling = NULL;
        if (err || m->draining || m->pool_n >= m->cfg->warm_pool || !m->pool) {
                sh_error *ignored = NULL;

                if (err && !sh_sandbox_deleted(sb))
                        log_warn("pool-start-failed", sh_sandbox_id(sb), "%s",
                                 err->msg ? err->msg : "");
                else if (!sh_sandbox_deleted(sb) && sh_manager_delete(m, sb, &ignored) < 0)
                        log_warn("delete-failed", sh_sandbox_id(sb), "%s",
                                 ignored && ignored->msg ? ignored->msg : "");
                sh_error_release(&ignored);
                sh_sandbox_unref(sb);
                pool_schedule(m, err ? POOL_RETRY_MS : 0);
                return;
        }
        m->pool[m->pool_n++] = sb; /* create_new's reference, now the pool's */
        pool_schedule(m, 0);
}

static void pool_fill(sh_loop *l, sh_timer *t, void *data)
{
        sh_manager *m = data;
        const sh_create_opts o = {0};
        sh_sandbox *sb = NULL;
        sh_error *err = NULL;

        m->pool_t = NULL; /* the loop frees a fired timer */
        if (m->draining || m->pool_filling || m->pool_n >= m->cfg->warm_pool ||
            m->count >= m->cfg->max_sandboxes)
                return;
        if (create_new(m, &o, pool_ready, m, &sb, &err) < 0) {
                log_warn("pool-start-failed", NULL, "%s", err && err->msg ? err->msg : "");
                sh_error_release(&err);
                pool_schedule(m, POOL_RETRY_MS);
                return;
        }
        sh_sandbox_set_pooled(sb, true);
        m->pool_filling = sb; /* the reference create_new gave; pool_ready takes it */
}

static void pool_schedule(sh_manager *m, uint64_t ms)
{
        if (!m->pool || m->pool_t || m->pool_filling || m->draining ||
            m->pool_n >= m->cfg->warm_pool)
                return;
        m->pool_t = sh_loop_add_timer(m->loop, ms, pool_fill, m);
        if (!m->pool_t)
                log_warn("pool-start-failed", NULL, "cannot schedule the next start");
}

/* The options a pooled sandbox was started with: anything else starts a sandbox of its own. */
static bool pool_fits(const sh_create_opts *o)
{
        return (!o->image || STREQ(o->image, "default")) && !o->root_layers && !o->item_id &&
               !o->memory_max && !o->cpu_max_milli && !o->n_volumes;
}

/* A ready pooled sandbox, out of the pool (its reference the caller's), or NULL. One whose
 * worker died meanwhile is deleted and skipped. */
static sh_sandbox *pool_take(sh_manager *m)
{
        while (m->pool_n > 0) {
                sh_sandbox *sb = m->pool[--m->pool_n];
                sh_error *err = NULL;

                if (sh_sandbox_idle_ready(sb))
                        return sb;
                if (!sh_sandbox_deleted(sb) && sh_manager_delete(m, sb, &err) < 0)
                        log_warn("delete-failed", sh_sandbox_id(sb), "%s",
                                 err && err->msg ? err->msg : "");
                sh_error_release(&err);
                sh_sandbox_unref(sb);
        }
        return NULL;
}

/* Every pooled sandbox deleted (draining, shutdown); the pool starts no more until
 * pool_schedule. */
static void pool_empty(sh_manager *m)
{
        sh_loop_cancel_timer(m->loop, TAKE_PTR(m->pool_t));
        while (m->pool_n > 0) {
                sh_sandbox *sb = m->pool[--m->pool_n];
                sh_error *err = NULL;

                if (!sh_sandbox_deleted(sb) && sh_manager_delete(m, sb, &err) < 0)
                        log_warn("delete-failed", sh_sandbox_id(sb), "%s",
                                 err && err->msg ? err->msg : "");
                sh_error_release(&err);
                sh_sandbox_unref(sb);
        }
}

/* Shutdown: no more starts, every pooled sandbox deleted, the pool gone (a start in flight
 * ends in pool_ready, which then only drops it). */
static void pool_stop(sh_manager *m)
{
        pool_empty(m);
        free(TAKE_PTR(m->pool));
}

/* Pooled sandboxes, not clients': the one being started counts too. */
static unsigned pooled(const sh_manager *m)
{
        return m->pool_n + (m->pool_filling ? 1 : 0);
}

/* A create that a pooled sandbox cannot serve, on a host whose slots the pool fills: one
 * pooled sandbox (or the one being started) goes. */
static void pool_make_room(sh_manager *m)
{
        sh_sandbox *sb = m->pool_n > 0 ? m->pool[--m->pool_n] : NULL;
        sh_error *err = NULL;

        if (!sb && m->pool_filling) {
                /* its create ends in pool_ready with an error, which drops it */
                if (sh_manager_delete(m, m->pool_filling, &err) < 0)
                        sh_error_release(&err);
                return;
        }
        if (!sb)
                return;
        if (!sh_sandbox_deleted(sb) && sh_manager_delete(m, sb, &err) < 0)
                log_warn("delete-failed", sh_sandbox_id(sb), "%s", err && err->msg ? err->msg : "");
        sh_error_release(&err);
        sh_sandbox_unref(sb);
}

static int create(sh_manager *m, const sh_create_opts *o, sh_sandbox_done_fn done, void *data,
                  sh_sandbox **ret, sh_error **err)
{
        sh_sandbox *sb;

        if (m->draining)
                return sh_error_new(err, SH_E_UNAVAILABLE, "the host is draining");
        if (sh_sandbox_env_check(o->env, err) < 0)
                return -1;
        if (pool_fits(o) && (sb = pool_take(m))) {
                if (sh_sandbox_claim(sb, o, done, data, err) < 0) {
                        sh_error *ignored = NULL;

                        if (sh_manager_delete(m, sb, &ignored) < 0)
                                sh_error_release(&ignored);
                        sh_sandbox_unref(sb);
                        pool_schedule(m, 0);
                        return -1;
                }
                pool_schedule(m, POOL_AFTER_CLAIM_MS);
                *ret = sb; /* the pool's reference, now the caller's */
                return 0;
        }
        if (m->count >= m->cfg->max_sandboxes && pooled(m) > 0)
                pool_make_room(m);
        return create_new(m, o, done, data, ret, err);
}

int sh_manager_create(sh_manager *m, const sh_create_opts *o, sh_sandbox_done_fn done, void *data,
                      sh_sandbox **ret, sh_error **err)
{
        const sh_root_layers *l = o->root_layers;
        int r;

        r = l && sh_root_layers_check(l, err) < 0 ? -1 : create(m, o, done, data, ret, err);
        /* The pin is the sandbox's from now on, or given back at once. */
        if (l && l->unpin) {
                if (r < 0)
                        l->unpin(l->pin);
                else
                        sh_sandbox_hold_pin(*ret, l->pin, l->unpin);
        }
        return r;
}

sh_sandbox *sh_manager_get(sh_manager *m, const char *id, size_t len)
{
        unsigned i;

        if (!sh_remote_id_valid(id, len))
                return NULL;
        for (i = m->buckets[sh_remote_id_hash(id) & m->mask]; i; i = m->next[i - 1])
                if (memcmp(sh_sandbox_id(m->slots[i - 1]), id, SH_ID_LEN) == 0)
                        return sh_sandbox_ref(m->slots[i - 1]);
        return NULL;
}

/* Some live sandbox of this pod other than sb that mounts the named volume `claim`, or NULL. */
static sh_sandbox *claim_user(sh_manager *m, const sh_sandbox *sb, const char *claim)
{
        for (unsigned i = 0; i < m->cfg->max_sandboxes; i++) {
                sh_sandbox *o = m->slots[i];
                const sh_volume *v;
                size_t n, j;

                if (!o || o == sb || sh_sandbox_deleted(o))
                        continue;
                v = sh_sandbox_volumes(o, &n);
                for (j = 0; j < n; j++)
                        if (v[j].kind == SH_VOLUME_PVC && STREQ(v[j].path, claim))
                                return o;
        }
        return NULL;
}

/* The named volumes that go with sb (deleteOnSandboxTermination, made by this pod): removed in
 * the background by the confined remover (the tree is the sandboxes', and the volume root may
 * be NFS: never the loop), unless another live sandbox of this pod still mounts one: then that
 * one takes it over (it goes with the last of them), said in the log. Its processes are being
 * killed: what one writes after the remover passed stays. */
static void volumes_release(sh_manager *m, sh_sandbox *sb)
{
        const sh_volume *v;
        size_t n, i;

        v = sh_sandbox_volumes(sb, &n);
        for (i = 0; i < n; i++) {
                sh_sandbox *other;
                sh_error *err = NULL;

                if (!sh_sandbox_volume_removes(sb, i))
                        continue;
                if ((other = claim_user(m, sb, v[i].path))) {
                        sh_sandbox_volume_take_over(other, v[i].path);
                        log_info("volume-kept", sh_sandbox_id(sb),
                                 "volume '%s' (claim '%s') stays while another sandbox mounts "
                                 "it, and goes with the last of them",
                                 v[i].name, v[i].path);
                        continue;
                }
                if (sh_manager_remove_trashed(m, m->cfg->volume_root, v[i].path, &err) < 0)
                        log_warn("volume-remove-failed", sh_sandbox_id(sb), "claim '%s': %s",
                                 v[i].path, err && err->msg ? err->msg : "");
                else
                        log_info("volume-removed", sh_sandbox_id(sb),
                                 "volume '%s' (claim '%s') goes with the sandbox", v[i].name,
                                 v[i].path);
                sh_error_release(&err);
        }
}

int sh_manager_delete(sh_manager *m, sh_sandbox *sb, sh_error **err)
{
        const char *id = sh_sandbox_id(sb);
        sh_sandbox_observer *o;
        unsigned pi;
        int r = 0;

        if (sh_sandbox_deleted(sb))
                return sh_error_new(err, SH_E_SANDBOX_NOT_FOUND, "no such sandbox");
        if (pool_member(m, sb, &pi)) {
                /* out of the pool first (its worker died, or shutdown): the pool's reference
                 * goes once the delete is done */
                m->pool[pi] = m->pool[--m->pool_n];
                sh_sandbox_set_pooled(sb, false);
                r = sh_manager_delete(m, sb, err);
                sh_sandbox_unref(sb);
                pool_schedule(m, 0);
                return r;
        }
        sh_sandbox_set_deleted(sb);
        registry_remove(m, sh_sandbox_slot(sb));
        /* The observers first (persist stops the sandbox's rsync work), then its processes,
         * then its marker, then its files. */
        SH_LIST_FOREACH(observers, o, m->observers) {
                o->deleted(sb, o->data);
        }
        sh_network_detach(m->network, sb);
        sh_sandbox_kill(sb);
        volumes_release(m, sb);
        if (unlinkat(m->rootfd, id, 0) < 0 && errno != ENOENT)
                log_warn("remove-failed", id, "%s, ignoring", strerror(errno));
        if (sh_sandbox_disk_mounted(sb)) {
                /* Its filesystem is detached when the last reference goes (sandbox.c): until
                 * then requests in flight may still hold files of it. */
                char tname[96], *copy = NULL;

                r = move_to_trash(m, m->sbfd, sh_sandbox_dirname(sb), "sb", tname, sizeof(tname),
                                  err);
                if (r == 0 && !(copy = strdup(tname)))
                        r = sh_error_make(err, ENOMEM, "out of memory");
                if (copy)
                        sh_sandbox_set_trash_name(sb, copy);
        } else {
                r = trash_and_remove(m, m->sbfd, sh_sandbox_dirname(sb), err);
        }
        log_info("sandbox-deleted", id, "%s", "");
        sh_sandbox_unref(sb); /* the registry's reference */
        pool_schedule(m, 0);  /* a slot is free: the pool may fill it */
        return r;
}

int sh_manager_remove_dir(sh_manager *m, sh_sandbox *sb, const char *path, sh_error **err)
{
        _cleanup_close_ int trashfd = -1, wsfd = sh_sandbox_open_workspace(sb, err);
        char tname[96];

        if (wsfd < 0)
                return -1;
        /* The sandbox's trash: on the workspace's filesystem and mount (rename(2) never leaves
         * one), out of the sandbox's sight, inside its disk limit. */
        trashfd = sh_sandbox_open_trash(sb, err);
        if (trashfd < 0)
                return -1;
        snprintf(tname, sizeof(tname), "dir.%llu.%llu", (unsigned long long)getpid(),
                 (unsigned long long)++m->trash_seq);
        if (sh_fs_detach_dir(&(sh_fs_ctx){.root = wsfd, .trashfd = trashfd, .loop_absent = true},
                             path, tname, err) < 0)
                return -1;
        /* The sandbox pays for removing its own tree. */
        sh_manager_trash_kick(m, sb);
        return 0;
}

void sh_manager_delete_all(sh_manager *m)
{
        unsigned i;

        for (i = 0; i < m->cfg->max_sandboxes; i++) {
                sh_error *err = NULL;

                if (m->slots[i] && sh_manager_delete(m, m->slots[i], &err) < 0)
                        log_warn("delete-failed", NULL, "%s", err ? err->msg : "");
                sh_error_release(&err);
        }
}

unsigned sh_manager_count(const sh_manager *m)
{
        return m->count - pooled(m);
}

bool sh_manager_full(const sh_manager *m)
{
        return m->count - pooled(m) >= m->cfg->max_sandboxes;
}

bool sh_manager_draining(const sh_manager *m)
{
        return m->draining;
}

void sh_manager_set_draining(sh_manager *m, bool on)
{
        m->draining = on;
        /* a draining host hands out nothing more: its pool goes */
        if (on)
                pool_empty(m);
        else
                pool_schedule(m, 0);
}

static int by_create(const void *a, const void *b)
{
        uint64_t x = sh_sandbox_created(*(sh_sandbox *const *)a);
        uint64_t y = sh_sandbox_created(*(sh_sandbox *const *)b);

        return x < y ? -1 : x > y;
}

int sh_manager_list(sh_manager *m, sh_sandbox ***ret, size_t *ret_n)
{
        sh_sandbox **v = calloc(m->count ? m->count : 1, sizeof(*v));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        /* The slots' walk, then the sort: O(n log n) for a listing, nothing kept between. */
        for (unsigned i = 0; i < m->cfg->max_sandboxes; i++)
                if (m->slots[i] && !sh_sandbox_pooled(m->slots[i]))
                        v[n++] = m->slots[i];
        qsort(v, n, sizeof(*v), by_create);
        *ret = v;
        *ret_n = n;
        return 0;
}

void sh_manager_foreach(sh_manager *m, void (*fn)(sh_sandbox *sb, void *data), void *data)
{
        unsigned i;

        for (i = 0; i < m->cfg->max_sandboxes; i++)
                if (m->slots[i] && !sh_sandbox_pooled(m->slots[i]))
                        fn(m->slots[i], data);
}
