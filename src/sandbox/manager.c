/* manager.c: sandbox registry, limits (capacity, draining), create/delete, leftover cleanup,
 * the workspace's disk limit around its lifetime, and the background removal of deleted
 * trees. */
#include "sh/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/capability.h"
#include "sh/cgroup.h"
#include "sh/disk.h"
#include "sh/exec.h"
#include "sh/log.h"
#include "sh/seccomp.h"
#include "sh/spawn.h"
#include "sh/worker.h"

#include "remover.h"

#define TRASH_DIR ".trash"
#define SB_DIR    ".sandboxes" /* the sandbox directories, by neutral names */

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
        bool draining;
        uint64_t trash_seq;
        sh_cgroup_root *cgroot;
        sh_seccomp *filter;
        int init_image;   /* sandbox-init's sealed memfd: every worker is exec'd from it */
        char tools[4096]; /* {root}/tools: the tool store, read-only in every sandbox */
        /* cgroups waiting to be empty before rmdir */
        struct grave {
                sh_cgroup *cg;
                uint64_t since_ms;
        } * graves;
        size_t n_graves, cap_graves;
        sh_timer *grave_t;
        sh_sandbox_observer *observers; /* told of every delete */
        sh_restorer restorer;           /* start NULL: no restore step */
};

void sh_manager_set_restorer(sh_manager *m, const sh_restorer *r)
{
        m->restorer = *r;
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

static void graves_sweep(sh_loop *l, sh_timer *t, void *data)
{
        sh_manager *m = data;
        size_t i = 0;
        uint64_t now = sh_now_ms();

        m->grave_t = NULL;
        while (i < m->n_graves) {
                sh_error *err = NULL;
                struct grave *g = &m->graves[i];

                if (sh_cgroup_destroy(g->cg, &err) == 0 || now - g->since_ms > 60000) {
                        if (err)
                                log_warn("cgroup-remove-failed", NULL, "%s, giving up",
                                         err->msg ? err->msg : "");
                        sh_cgroup_free(g->cg);
                        *g = m->graves[--m->n_graves];
                } else {
                        i++;
                }
                sh_error_release(&err);
        }
        if (m->n_graves)
                m->grave_t = sh_loop_add_timer(l, 100, graves_sweep, m);
}

void sh_manager_bury_cgroup(sh_manager *m, sh_cgroup *cg)
{
        sh_error *err = NULL;

        if (!cg)
                return;
        if (sh_cgroup_destroy(cg, &err) == 0) {
                sh_cgroup_free(cg);
                return;
        }
        sh_error_release(&err);
        if (m->n_graves == m->cap_graves) {
                size_t nc = m->cap_graves ? m->cap_graves * 2 : 16;
                struct grave *ng = realloc(m->graves, nc * sizeof(*ng));

                if (!ng) {
                        log_warn("cgroup-leak", NULL, "out of memory: a cgroup stays behind");
                        sh_cgroup_free(cg);
                        return;
                }
                m->graves = ng;
                m->cap_graves = nc;
        }
        m->graves[m->n_graves].cg = cg;
        m->graves[m->n_graves].since_ms = sh_now_ms();
        m->n_graves++;
        if (!m->grave_t)
                m->grave_t = sh_loop_add_timer(m->loop, 20, graves_sweep, m);
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
        return sh_remover_start(m, m->trashfd, NULL, tname, err);
}

static int trash_and_remove(sh_manager *m, int fromfd, const char *name, sh_error **err)
{
        char tname[96];

        if (move_to_trash(m, fromfd, name, "sb", tname, sizeof(tname), err) < 0)
                return -1;
        return remove_trash(m, tname, err);
}

/* Whatever an earlier run left in the trash goes, in a confined child of its own. */
static void empty_trash(sh_manager *m)
{
        sh_error *err = NULL;

        if (sh_remover_start(m, m->trashfd, NULL, NULL, &err) < 0)
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

int sh_manager_new(const sh_config *cfg, sh_loop *loop, sh_manager **ret, sh_error **err)
{
        sh_manager *m = calloc(1, sizeof(*m));
        int r;

        if (!m)
                return sh_error_make(err, ENOMEM, "out of memory");
        m->cfg = cfg;
        m->loop = loop;
        m->rootfd = m->trashfd = m->sbfd = m->init_image = -1;
        m->slots = calloc(cfg->max_sandboxes, sizeof(*m->slots));
        if (!m->slots) {
                free(m);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
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
        if (mkdirat(m->rootfd, TRASH_DIR, 0700) < 0 && errno != EEXIST) {
                sh_error_make(err, errno, "creating '%s/%s'", cfg->root, TRASH_DIR);
                goto fail;
        }
        m->trashfd = openat(m->rootfd, TRASH_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (m->trashfd < 0) {
                sh_error_make(err, errno, "opening '%s/%s'", cfg->root, TRASH_DIR);
                goto fail;
        }
        if (mkdirat(m->rootfd, SB_DIR, 0711) < 0 && errno != EEXIST) {
                sh_error_make(err, errno, "creating '%s/%s'", cfg->root, SB_DIR);
                goto fail;
        }
        m->sbfd = openat(m->rootfd, SB_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (m->sbfd < 0) {
                sh_error_make(err, errno, "opening '%s/%s'", cfg->root, SB_DIR);
                goto fail;
        }
        m->root_real = realpath(cfg->root, NULL);
        if (!m->root_real) {
                sh_error_make(err, errno, "resolving the state root '%s'", cfg->root);
                goto fail;
        }
        /* The workspace's disk limit: chosen now, refused now if it cannot be held. */
        if (sh_disk_open(cfg, m->rootfd, m->root_real, &m->disk, err) < 0)
                goto fail;
        if (sh_disk_get_mode(m->disk) == SH_DISK_NONE)
                log_info("disk-limit", NULL,
                         "none: SANDBOX_HOST_DISK_MAX is unset, workspaces have no disk limit");
        else
                log_info("disk-limit", NULL, "%s: %llu bytes, %llu inodes per workspace",
                         sh_disk_mode_name(sh_disk_get_mode(m->disk)),
                         (unsigned long long)cfg->disk_max,
                         (unsigned long long)cfg->disk_inodes_max);
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
                cg_mode = sh_cgroup_mode(m->cgroot);
        }
        cleanup_leftovers(m);
        *ret = m;
        return 0;
fail:
        sh_seccomp_free(m->filter);
        sh_close(m->init_image);
        root_destroy(m);
        sh_disk_free(m->disk);
        sh_close(m->rootfd);
        sh_close(m->trashfd);
        sh_close(m->sbfd);
        free(m->root_real);
        free(m->slots);
        free(m);
        return -1;
}

void sh_manager_free(sh_manager *m)
{
        if (!m)
                return;
        sh_manager_delete_all(m);
        sh_child_wait_all(m->loop);
        /* Last chance for the sandbox cgroups: their processes died with their workers. */
        for (int tries = 0; m->n_graves && tries < 100; tries++) {
                sh_loop_cancel_timer(m->loop, m->grave_t);
                m->grave_t = NULL;
                graves_sweep(m->loop, NULL, m);
                if (m->n_graves)
                        usleep(10000);
        }
        sh_loop_cancel_timer(m->loop, m->grave_t);
        for (size_t i = 0; i < m->n_graves; i++)
                sh_cgroup_free(m->graves[i].cg);
        free(m->graves);
        sh_seccomp_free(m->filter);
        sh_close(m->init_image);
        root_destroy(m);
        sh_disk_free(m->disk);
        sh_close(m->rootfd);
        sh_close(m->trashfd);
        sh_close(m->sbfd);
        free(m->root_real);
        free(m->slots);
        free(m);
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
 * dying worker's namespace) drops the last reference, and with it the unmount's cost. */
static void disk_teardown(sh_manager *m, sh_sandbox *sb)
{
        teardown *t = calloc(1, sizeof(*t));
        char ws[4300], disk[4300];
        char *paths[] = {ws, disk};
        sh_error *err = NULL;

        if (!t) {
                log_warn("unmount-failed", NULL, "out of memory: a workspace stays mounted");
                return;
        }
        t->m = m;
        t->tname = TAKE_PTR(sb->trash_name);
        snprintf(t->dirname, sizeof(t->dirname), "%s", sb->dirname);
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
        }
}

static void sandbox_free(sh_sandbox *sb)
{
        sh_worker_free(sb->worker);
        if (sb->cg)
                sh_manager_bury_cgroup(sb->mgr, sb->cg);
        sh_close(sb->dirfd);
        sh_close(sb->wsfd);
        if (sb->disk_mounted)
                disk_teardown(sb->mgr, sb);
        free(sb->trash_name);
        free(sb->item_id);
        free(sb->image);
        cJSON_Delete(sb->env);
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

int sh_sandbox_workspace_fd(const sh_sandbox *sb)
{
        return sb->wsfd;
}

const sh_fs_owner *sh_sandbox_owner(const sh_sandbox *sb)
{
        return &sb->owner;
}

bool sh_sandbox_deleted(const sh_sandbox *sb)
{
        return sb->deleted;
}

/* An image name is one path component naming a directory below SANDBOX_HOST_IMAGES. */
static int check_image(sh_manager *m, const char *image, sh_error **err)
{
        struct stat st;
        char path[4200];

        if (!image || STREQ(image, "default"))
                return 0;
        if (!m->cfg->images || !*image || strchr(image, '/') || STREQ(image, ".") ||
            STREQ(image, "..") || strlen(image) > 255)
                return sh_error_new(err, SH_E_INVALID, "unknown image '%s'", image);
        snprintf(path, sizeof(path), "%s/%s", m->cfg->images, image);
        if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
                return sh_error_new(err, SH_E_INVALID, "unknown image '%s'", image);
        return 0;
}

static int random_id(char out[SH_ID_LEN + 1])
{
        static const char hex[] = "0123456789abcdef";
        unsigned char b[SH_ID_LEN / 2];
        size_t got = 0;
        unsigned i;

        while (got < sizeof(b)) {
                ssize_t n = getrandom(b + got, sizeof(b) - got, 0);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                got += (size_t)n;
        }
        for (i = 0; i < sizeof(b); i++) {
                out[2 * i] = hex[b[i] >> 4];
                out[2 * i + 1] = hex[b[i] & 15];
        }
        out[SH_ID_LEN] = '\0';
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

        SH_LIST_FOREACH(execs, l, sb->execs)
        {
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

        SH_LIST_FOREACH_SAFE(execs, l, next, sb->execs)
        {
                sh_exec_abandon(l->e, SH_E_SANDBOX_NOT_FOUND, why);
        }
}

static void bury(void *reaper, sh_cgroup *cg)
{
        sh_manager_bury_cgroup(reaper, cg);
}

/* environment = base variables, then the sandbox's create env, then the exec's env; a later
 * value of a name replaces the earlier one. */
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
        size_t n = ARRAY_SIZE(base), cap, i, k;
        char **out;

        cap = n + (size_t)cJSON_GetArraySize(sb->env) +
              (env ? (size_t)cJSON_GetArraySize(env) : 0) + 1;
        out = calloc(cap, sizeof(char *));
        if (!out)
                return sh_error_make(err, ENOMEM, "out of memory");
        for (i = 0; i < n; i++)
                out[i] = strdup(base[i]);
        for (k = 0; k < 2; k++) {
                if (!layers[k])
                        continue;
                cJSON_ArrayForEach(v, layers[k])
                {
                        size_t nl = strlen(v->string);
                        char *kv;

                        if (nl == 0 || strchr(v->string, '=')) {
                                for (i = 0; i < n; i++)
                                        free(out[i]);
                                free(out);
                                return sh_error_new(err, SH_E_INVALID,
                                                    "env names must be non-empty and hold no '='");
                        }
                        if (asprintf(&kv, "%s=%s", v->string, v->valuestring) < 0)
                                kv = NULL;
                        for (i = 0; i < n; i++)
                                if (out[i] && strncmp(out[i], kv ? kv : "", nl + 1) == 0)
                                        break;
                        if (i < n) {
                                free(out[i]);
                                out[i] = kv;
                        } else {
                                out[n++] = kv;
                        }
                }
        }
        for (i = 0; i < n; i++)
                if (!out[i]) {
                        for (k = 0; k < n; k++)
                                free(out[k]);
                        free(out);
                        return sh_error_make(err, ENOMEM, "out of memory");
                }
        *ret = out;
        return 0;
}

static void free_strv(char **v)
{
        size_t i;

        if (!v)
                return;
        for (i = 0; v[i]; i++)
                free(v[i]);
        free(v);
}

int sh_sandbox_exec(sh_sandbox *sb, char *const *argv, const cJSON *env, const sh_exec_opts *o,
                    sh_exec_event_fn fn, void *data, sh_exec **ret, sh_error **err)
{
        sh_manager *m = sb->mgr;
        const sh_exec_env xenv = {
                .loop = m->loop,
                .cgroot = m->cgroot,
                .bury = bury,
                .reaper = m,
        };
        char **envp = NULL;
        sh_exec_link *l;
        int r;

        if (sb->worker_dead || !sb->worker_ready || !sb->worker)
                return sh_error_new(err, SH_E_SANDBOX_NOT_FOUND, "the sandbox's worker is gone");
        if (build_env(sb, env, &envp, err) < 0)
                return -1;
        l = calloc(1, sizeof(*l));
        if (!l) {
                free_strv(envp);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        l->id = ++sb->next_exec_id;
        r = sh_exec_start(&xenv,
                          &(sh_exec_spec){
                                  .worker = sb->worker,
                                  .parent = sb->cg,
                                  .id = l->id,
                                  .log_id = sb->id,
                                  .argv = argv,
                                  .envp = envp,
                                  .capture_max = o->capture_max,
                                  .heartbeat_ms = o->heartbeat_ms,
                                  .grace_ms = m->cfg->exec_grace_ms,
                          },
                          fn, data,
                          &(sh_exec_owner){.ended = exec_ended, .freed = exec_freed, .data = l},
                          &l->e, err);
        free_strv(envp);
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
        if (!sb->deleted && sh_manager_delete(sb->mgr, sb, &ignored) < 0)
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
        if (sh_sandbox_mark_ready(sb, &own) < 0) {
                create_fail(sb, own);
                sh_error_release(&own);
                return;
        }
        create_end(sb, NULL);
}

/* The worker serves. With an item and a restorer (CONTRACT.md 2.1): restore {nfs_root}/
 * {item_id}/, re-own, mark ready, then the create ends; else it ends now. */
static void create_worker_ready(sh_sandbox *sb)
{
        const sh_restorer *rs = &sb->mgr->restorer;
        sh_error *err = NULL;

        if (!rs->start || !sb->item_id) {
                create_end(sb, NULL);
                return;
        }
        sb->restoring = true;
        if (rs->start(rs->impl, sb, restore_done, NULL, &err) < 0) {
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
        if (!sb->deleted && sh_manager_delete(sb->mgr, sb, &err) < 0)
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
        case SH_WORKER_EV_READY:
                sb->worker_ready = true;
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
        case SH_WORKER_EV_FAILED:
                log_error("worker-setup-failed", sb->id, "%s: %s", sh_worker_step_name(value),
                          strerror(value2));
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

static int start_worker(sh_manager *m, sh_sandbox *sb, sh_error **err)
{
        _cleanup_free_ sh_worker_spec *spec = calloc(1, sizeof(*spec));
        sh_cgroup *init_cg = NULL;
        char image_dir[4200];
        sh_cg_limits lim = {
                .memory_max = m->cfg->memory_max,
                .pids_max = m->cfg->pids_max,
                .cpu_max_milli = m->cfg->cpu_max_milli,
        };
        int procs[SH_EXEC_MAX_PROCS_FDS], n, i, r;

        if (!spec)
                return sh_error_make(err, ENOMEM, "out of memory");
        if (sh_cgroup_create(m->cgroot, NULL, sb->id, &lim, &sb->cg, err) < 0)
                return -1; /* cppcheck-suppress memleak ; spec is _cleanup_free_ */
        /* Not the id: it is the API's only credential, and uname is readable by all. */
        snprintf(spec->hostname, sizeof(spec->hostname), "%s", SH_WORKER_HOSTNAME);
        /* By the directory's neutral name: the sandbox sees the workspace's path in its
         * mountinfo (a bind mount's root), and must not see its own id there. */
        snprintf(spec->rootfs, sizeof(spec->rootfs), "%s/%s/%s/.rootfs", m->cfg->root, SB_DIR,
                 sb->dirname);
        snprintf(spec->workspace, sizeof(spec->workspace), "%s/%s/%s/workspace", m->cfg->root,
                 SB_DIR, sb->dirname);
        snprintf(spec->tools, sizeof(spec->tools), "%s", m->tools);
        /* tmpfs pages count against the sandbox's memory: a full /tmp must leave room for
         * the commands themselves. */
        spec->tmp_size = 256ULL << 20;
        if (spec->tmp_size > m->cfg->memory_max / 2)
                spec->tmp_size = m->cfg->memory_max / 2;
        spec->uid = sb->owner.uid;
        spec->gid = sb->owner.gid;
        spec->seccomp = *sh_seccomp_prog(m->filter);
        spec->ptys_max = SH_WORKER_PTYS_MAX;
        sh_worker_spec_limits(spec, m->cfg->pids_max);
        if (STREQ(sb->image, "default")) {
                snprintf(image_dir, sizeof(image_dir), "%s/default",
                         m->cfg->images ? m->cfg->images : "");
                r = sh_worker_spec_image(
                        spec, m->cfg->images && access(image_dir, F_OK) == 0 ? image_dir : NULL,
                        err);
        } else {
                snprintf(image_dir, sizeof(image_dir), "%s/%s", m->cfg->images, sb->image);
                r = sh_worker_spec_image(spec, image_dir, err);
        }
        if (r < 0)
                return -1;
        if (mkdirat(sb->dirfd, ".rootfs", 0700) < 0 && errno != EEXIST)
                return sh_error_make(err, errno, "creating the rootfs mount point");
        /* The worker lives in a leaf beside the exec cgroups: on v2 a cgroup holding
         * processes cannot hand controllers to its children. */
        if (sh_cgroup_create(m->cgroot, sb->cg, "init", NULL, &init_cg, err) < 0)
                return -1;
        n = sh_cgroup_open_procs(init_cg, procs, SH_EXEC_MAX_PROCS_FDS);
        sh_cgroup_free(init_cg); /* removed with the sandbox's cgroup (destroy is recursive) */
        init_cg = NULL;
        if (n < 0)
                return sh_error_make(err, -n, "opening the sandbox cgroup");
        r = sh_worker_start(m->loop, m->init_image, spec, procs, n, worker_event, sb, &sb->worker,
                            err);
        for (i = 0; i < n; i++)
                close(procs[i]);
        return r;
}

/* {root}/.sandboxes/{n} with `workspace` (and `disk`, the mount point of a filesystem of its
 * own), then {root}/{id} as a link to it, last: the id's path exists only once complete. */
static int sandbox_dir_create(sh_manager *m, sh_sandbox *sb, sh_error **err)
{
        bool mounted = sh_disk_mounted(m->disk);
        char target[64];
        int r;

        /* Named for the slot, which the sandbox knows anyway (its uid is uid_base + slot):
         * the name says nothing of the id nor of other tenants. A slot's old directory is
         * normally in the trash by now; should it still be here, a second name. */
        snprintf(sb->dirname, sizeof(sb->dirname), "%u", sb->slot);
        r = mkdirat(m->sbfd, sb->dirname, 0711);
        if (r < 0 && errno == EEXIST) {
                snprintf(sb->dirname, sizeof(sb->dirname), "%u.%llu", sb->slot,
                         (unsigned long long)++m->sb_seq);
                r = mkdirat(m->sbfd, sb->dirname, 0711);
        }
        if (r < 0)
                return sh_error_make(err, errno, "creating the sandbox directory");
        snprintf(target, sizeof(target), "%s/%s", SB_DIR, sb->dirname);
        sb->dirfd = openat(m->sbfd, sb->dirname, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* With a filesystem of its own, this workspace directory is only the bind's mount
         * point, and stays root's. */
        if (sb->dirfd < 0 || mkdirat(sb->dirfd, "workspace", 0755) < 0 ||
            (mounted && mkdirat(sb->dirfd, "disk", 0700) < 0) ||
            (!mounted && fchownat(sb->dirfd, "workspace", sb->owner.uid, sb->owner.gid,
                                  AT_SYMLINK_NOFOLLOW) < 0) ||
            (!mounted && (sb->wsfd = openat(sb->dirfd, "workspace",
                                            O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) ||
            symlinkat(target, m->rootfd, sb->id) < 0) {
                sh_error *ignored = NULL;

                r = sh_error_make(err, errno, "creating the workspace");
                (void)unlinkat(m->rootfd, sb->id, 0);
                trash_and_remove(m, m->sbfd, sb->dirname, &ignored);
                sh_error_release(&ignored);
                return r;
        }
        return 0;
}

/* The create cannot complete: the sandbox goes, and the waiting create learns why. */
static void setup_failed(sh_sandbox *sb, const sh_error *err)
{
        log_error("sandbox-setup-failed", sb->id, "%s", err && err->msg ? err->msg : "");
        create_fail(sb, err);
}

static void disk_ready(const sh_error *err, uint32_t projid, void *data)
{
        sh_sandbox *sb = data;
        /* With a filesystem of its own, the daemon works through the mount of that filesystem,
         * not the bind at dir/workspace: DELETE /dir renames into disk/.trash, and rename(2)
         * never crosses mounts, even of one filesystem. */
        const char *ws = sb->disk_mounted ? "disk/workspace" : "workspace";
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
        } else if ((sb->wsfd = openat(sb->dirfd, ws,
                                      O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                sh_error_make(&own, errno, "opening the workspace");
                setup_failed(sb, own);
        } else if (start_worker(sb->mgr, sb, &own) < 0) {
                setup_failed(sb, own);
        } else if (projid) {
                log_debug("disk-limit", sb->id, "project id %u", (unsigned)projid);
        }
        sh_error_release(&own);
        sh_sandbox_unref(sb);
}

/* The workspace's limit is set up in a child (mkfs-free image copy, loop device, mounts,
 * quota writes all take time); the create stays suspended until disk_ready. */
static int start_disk(sh_manager *m, sh_sandbox *sb, sh_error **err)
{
        sb->disk_mounted = sh_disk_mounted(m->disk);
        if (sh_disk_setup(m->disk, m->loop, sb->dirfd, sb->owner.uid, sb->owner.gid, sb->slot,
                          disk_ready, sh_sandbox_ref(sb), &sb->disk_job, err) < 0) {
                sh_sandbox_unref(sb);
                return -1;
        }
        return 0;
}

int sh_manager_create(sh_manager *m, const sh_create_opts *o, sh_sandbox_done_fn done, void *data,
                      sh_sandbox **ret, sh_error **err)
{
        sh_sandbox *sb;
        unsigned slot;
        int r;

        if (m->draining)
                return sh_error_new(err, SH_E_UNAVAILABLE, "the host is draining");
        if (m->count >= m->cfg->max_sandboxes)
                return sh_error_new(err, SH_E_UNAVAILABLE, "the host holds %u sandboxes", m->count);
        if (check_image(m, o->image, err) < 0)
                return -1;
        for (slot = 0; slot < m->cfg->max_sandboxes && m->slots[slot]; slot++)
                ;
        sb = calloc(1, sizeof(*sb));
        if (!sb)
                return sh_error_make(err, ENOMEM, "out of memory");
        sb->refs = 1;
        sb->mgr = m;
        sb->dirfd = sb->wsfd = -1;
        sb->slot = slot;
        sb->owner.uid = (uid_t)(m->cfg->uid_base + slot);
        sb->owner.gid = (gid_t)(m->cfg->uid_base + slot);
        sb->created_ms = sh_now_ms();
        sb->image = strdup(o->image ? o->image : "default");
        sb->item_id = o->item_id ? strdup(o->item_id) : NULL;
        sb->env = o->env ? cJSON_Duplicate(o->env, true) : cJSON_CreateObject();
        if (!sb->image || (o->item_id && !sb->item_id) || !sb->env) {
                sandbox_free(sb);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        r = random_id(sb->id);
        if (r < 0) {
                sandbox_free(sb);
                return sh_error_make(err, -r, "getrandom");
        }
        if (sandbox_dir_create(m, sb, err) < 0) {
                sandbox_free(sb);
                return -1;
        }
        m->slots[slot] = sb;
        m->count++;
        sb->create_done = done;
        sb->create_data = data;
        /* No limit: the worker starts at once, as it always did. A limit: a child sets it up
         * first (disk_ready starts the worker). */
        r = sh_disk_get_mode(m->disk) == SH_DISK_NONE ? start_worker(m, sb, err)
                                                      : start_disk(m, sb, err);
        if (r < 0) {
                sh_error *ignored = NULL;

                sb->create_done = NULL;
                r = -1;
                sh_manager_delete(m, sb, &ignored);
                sh_error_release(&ignored);
                return r;
        }
        *ret = sh_sandbox_ref(sb);
        return 0;
}

sh_sandbox *sh_manager_get(sh_manager *m, const char *id, size_t len)
{
        unsigned i;

        if (!sh_remote_id_valid(id, len))
                return NULL;
        for (i = 0; i < m->cfg->max_sandboxes; i++)
                if (m->slots[i] && memcmp(m->slots[i]->id, id, SH_ID_LEN) == 0)
                        return sh_sandbox_ref(m->slots[i]);
        return NULL;
}

int sh_manager_delete(sh_manager *m, sh_sandbox *sb, sh_error **err)
{
        int r = 0;

        if (sb->deleted)
                return sh_error_new(err, SH_E_SANDBOX_NOT_FOUND, "no such sandbox");
        sb->deleted = true;
        m->slots[sb->slot] = NULL;
        m->count--;
        {
                sh_sandbox_observer *o;

                SH_LIST_FOREACH(observers, o, m->observers)
                {
                        o->deleted(sb, o->data);
                }
        }
        /* Running execs end with an in-band error; then the worker dies, and with PID 1 every
         * process of the namespace; the cgroup kill catches anything that raced. */
        execs_abandon(sb, "the sandbox was deleted");
        if (sb->disk_job)
                sh_disk_job_cancel(sb->disk_job); /* its end frees what it made */
        if (sb->worker)
                sh_worker_kill(sb->worker);
        if (sb->cg) {
                sh_error *kerr = NULL;

                /* Not the helpers working for it: the persist hook above has told rsync to
                 * stop (it removes its temporary file first), a remover may finish. */
                if (sh_cgroup_kill_procs(sb->cg, &kerr) < 0)
                        log_warn("sandbox-kill-failed", sb->id, "%s", kerr ? kerr->msg : "");
                sh_error_release(&kerr);
        }
        /* The marker goes first: a reader of `ready` must never see a half-removed sandbox as
         * trusted. */
        if (unlinkat(sb->dirfd, ".ready", 0) < 0 && errno != ENOENT)
                log_warn("marker-remove-failed", sb->id, "%s, ignoring", strerror(errno));
        if (unlinkat(m->rootfd, sb->id, 0) < 0 && errno != ENOENT)
                log_warn("remove-failed", sb->id, "%s, ignoring", strerror(errno));
        if (sb->disk_mounted) {
                /* Its filesystem is detached when the last reference goes (sandbox_free):
                 * until then requests in flight may still hold files of it. */
                char tname[96];

                r = move_to_trash(m, m->sbfd, sb->dirname, "sb", tname, sizeof(tname), err);
                if (r == 0 && !(sb->trash_name = strdup(tname)))
                        r = sh_error_make(err, ENOMEM, "out of memory");
        } else {
                r = trash_and_remove(m, m->sbfd, sb->dirname, err);
        }
        log_info("sandbox-deleted", sb->id, "%s", "");
        sh_sandbox_unref(sb); /* the registry's reference */
        return r;
}

int sh_manager_remove_dir(sh_manager *m, sh_sandbox *sb, const char *path, sh_error **err)
{
        _cleanup_close_ int own_trash = -1;
        int trashfd = m->trashfd;
        char tname[96];

        /* A workspace on a filesystem of its own has its trash there (rename(2) never leaves a
         * filesystem), beside the workspace, out of the sandbox's sight. */
        if (sb->disk_mounted) {
                own_trash = openat(sb->dirfd, "disk/.trash",
                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (own_trash < 0)
                        return sh_error_make(err, errno, "opening the workspace's trash");
                trashfd = own_trash;
        }
        snprintf(tname, sizeof(tname), "dir.%llu.%llu", (unsigned long long)getpid(),
                 (unsigned long long)++m->trash_seq);
        if (sh_fs_detach_dir(sb->wsfd, path, trashfd, tname, err) < 0)
                return -1;
        /* The sandbox pays for removing its own tree. */
        return sh_remover_start(m, trashfd, sb, tname, err);
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
        return m->count;
}

bool sh_manager_full(const sh_manager *m)
{
        return m->count >= m->cfg->max_sandboxes;
}

bool sh_manager_draining(const sh_manager *m)
{
        return m->draining;
}

void sh_manager_set_draining(sh_manager *m, bool on)
{
        m->draining = on;
}

void sh_manager_foreach(sh_manager *m, void (*fn)(sh_sandbox *sb, void *data), void *data)
{
        unsigned i;

        for (i = 0; i < m->cfg->max_sandboxes; i++)
                if (m->slots[i])
                        fn(m->slots[i], data);
}

int sh_sandbox_mark_ready(sh_sandbox *sb, sh_error **err)
{
        int fd = openat(sb->dirfd, ".ready", O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

        if (fd < 0)
                return sh_error_make(err, errno, "creating the readiness marker");
        close(fd);
        return 0;
}

int sh_sandbox_clear_ready(sh_sandbox *sb, sh_error **err)
{
        if (unlinkat(sb->dirfd, ".ready", 0) < 0 && errno != ENOENT)
                return sh_error_make(err, errno, "removing the readiness marker");
        return 0;
}

int sh_sandbox_is_ready(sh_sandbox *sb, bool *ret, sh_error **err)
{
        struct stat st;

        if (fstatat(sb->dirfd, ".ready", &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return sh_error_make(err, errno, "reading the readiness marker");
                *ret = false;
                return 0;
        }
        *ret = S_ISREG(st.st_mode);
        return 0;
}
