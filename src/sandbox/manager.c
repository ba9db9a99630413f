/* manager.c: sandbox registry, limits (capacity, draining), create/delete, leftover cleanup,
 * and the background removal of deleted trees. */
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
#include "sh/exec.h"
#include "sh/log.h"
#include "sh/seccomp.h"
#include "sh/spawn.h"
#include "sh/worker.h"

#include "remover.h"

#define TRASH_DIR ".trash"

struct sh_manager {
        const sh_config *cfg;
        sh_loop *loop;
        int rootfd;         /* {root}, O_DIRECTORY */
        int trashfd;        /* {root}/.trash, O_DIRECTORY */
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
        void (*delete_hook)(sh_sandbox *sb, void *data);
        void *delete_hook_data;
};

void sh_manager_set_delete_hook(sh_manager *m, void (*fn)(sh_sandbox *sb, void *data), void *data)
{
        m->delete_hook = fn;
        m->delete_hook_data = data;
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

/* Move {root}/{name} into the trash under a unique name and remove it in the background. */
static int trash_and_remove(sh_manager *m, const char *name, sh_error **err)
{
        char tname[96];

        snprintf(tname, sizeof(tname), "%s.%llu.%llu", name, (unsigned long long)getpid(),
                 (unsigned long long)++m->trash_seq);
        if (renameat(m->rootfd, name, m->trashfd, tname) < 0)
                return sh_error_make(err, errno, "moving '%s' to the trash", name);
        /* The sandbox is gone (or never ran): the remover gets a cgroup of its own. */
        return sh_remover_start(m, m->trashfd, NULL, tname, err);
}

static void cleanup_leftovers(sh_manager *m)
{
        DIR *d;
        struct dirent *de;
        int fd = openat(m->rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        unsigned found = 0;

        if (fd < 0 || !(d = fdopendir(fd))) {
                sh_close(fd);
                log_warn("cleanup-failed", NULL, "cannot list the state root: %s, ignoring",
                         strerror(errno));
                return;
        }
        while ((de = readdir(d))) {
                sh_error *err = NULL;
                char name[sizeof(de->d_name)];

                if (!sh_remote_id_valid(de->d_name, strlen(de->d_name)))
                        continue;
                snprintf(name, sizeof(name), "%s", de->d_name);
                if (trash_and_remove(m, name, &err) < 0)
                        log_warn("cleanup-failed", name, "%s, ignoring", err ? err->msg : "");
                else
                        found++;
                sh_error_release(&err);
        }
        closedir(d);
        if (found)
                log_info("cleanup", NULL, "removing %u sandbox(es) left by an earlier run", found);
        /* Whatever an earlier run left in the trash goes too. */
        {
                sh_error *err = NULL;

                if (sh_remover_start(m, m->trashfd, NULL, NULL, &err) < 0)
                        log_warn("cleanup-failed", NULL, "%s, ignoring",
                                 err && err->msg ? err->msg : "");
                sh_error_release(&err);
        }
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
        m->rootfd = m->trashfd = m->init_image = -1;
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
        sh_close(m->rootfd);
        sh_close(m->trashfd);
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
        sh_close(m->rootfd);
        sh_close(m->trashfd);
        free(m->slots);
        free(m);
}

static void sandbox_free(sh_sandbox *sb)
{
        sh_worker_free(sb->worker);
        if (sb->cg)
                sh_manager_bury_cgroup(sb->mgr, sb->cg);
        sh_close(sb->dirfd);
        sh_close(sb->wsfd);
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

/* An image name is one path component naming a directory below SANDBOX_HOST_IMAGES. */
static int check_image(sh_manager *m, const char *image, sh_error **err)
{
        struct stat st;
        char path[4200];

        if (!image || STREQ(image, "default"))
                return 0;
        if (!m->cfg->images || !*image || strchr(image, '/') || STREQ(image, ".") ||
            STREQ(image, "..") || strlen(image) > 255)
                return sh_error_http(err, 400, "BadRequest", "unknown image '%s'", image);
        snprintf(path, sizeof(path), "%s/%s", m->cfg->images, image);
        if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
                return sh_error_http(err, 400, "BadRequest", "unknown image '%s'", image);
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

static void worker_event(sh_worker *w, sh_worker_ev ev, uint32_t id, int value, int value2,
                         void *data)
{
        sh_sandbox *sb = data;
        void (*cb)(sh_sandbox *, const sh_error *, void *) = sb->on_ready;
        sh_error *err = NULL;

        switch (ev) {
        case SH_WORKER_EV_READY:
                sb->worker_ready = true;
                sb->on_ready = NULL;
                if (cb)
                        cb(sb, NULL, sb->on_ready_data);
                return;
        case SH_WORKER_EV_STARTED:
                sh_exec_on_started(sb, id, value);
                return;
        case SH_WORKER_EV_EXITED:
                sh_exec_on_exited(sb, id, value);
                return;
        case SH_WORKER_EV_FAILED:
                log_error("worker-setup-failed", sb->id, "%s: %s", sh_worker_step_name(value),
                          strerror(value2));
                sh_error_make(&err, value2 ? value2 : EIO, "sandbox setup failed: %s: %s",
                              sh_worker_step_name(value), strerror(value2));
                break;
        case SH_WORKER_EV_DEAD:
                if (sb->deleted)
                        return;
                log_error("worker-died", sb->id, "the sandbox's worker died");
                sh_error_make(&err, EIO, "the sandbox's worker died");
                break;
        }
        sb->worker_dead = true;
        sh_exec_fail_all(sb, "SandboxNotFound", "the sandbox's worker died");
        if (cb) {
                /* Setup failed before the create was answered: the sandbox goes. */
                sh_error *ignored = NULL;

                sb->on_ready = NULL;
                sh_sandbox_ref(sb);
                if (!sb->deleted)
                        sh_manager_delete(sb->mgr, sb, &ignored);
                sh_error_release(&ignored);
                cb(sb, err, sb->on_ready_data);
                sh_sandbox_unref(sb);
        }
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
        snprintf(spec->rootfs, sizeof(spec->rootfs), "%s/%s/.rootfs", m->cfg->root, sb->id);
        snprintf(spec->workspace, sizeof(spec->workspace), "%s/%s/workspace", m->cfg->root, sb->id);
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

int sh_manager_create(sh_manager *m, const sh_create_opts *o,
                      void (*on_ready)(sh_sandbox *sb, const sh_error *err, void *data), void *data,
                      sh_sandbox **ret, sh_error **err)
{
        sh_sandbox *sb;
        unsigned slot;
        int r;

        if (m->draining)
                return sh_error_http(err, 503, "Unavailable", "the host is draining");
        if (m->count >= m->cfg->max_sandboxes)
                return sh_error_http(err, 503, "Unavailable", "the host holds %u sandboxes",
                                     m->count);
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
        if (mkdirat(m->rootfd, sb->id, 0711) < 0) {
                r = sh_error_make(err, errno, "creating the sandbox directory");
                sandbox_free(sb);
                return r;
        }
        sb->dirfd = openat(m->rootfd, sb->id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sb->dirfd < 0 || mkdirat(sb->dirfd, "workspace", 0755) < 0 ||
            fchownat(sb->dirfd, "workspace", sb->owner.uid, sb->owner.gid, AT_SYMLINK_NOFOLLOW) <
                    0 ||
            (sb->wsfd = openat(sb->dirfd, "workspace",
                               O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                sh_error *ignored = NULL;

                r = sh_error_make(err, errno, "creating the workspace");
                trash_and_remove(m, sb->id, &ignored);
                sh_error_release(&ignored);
                sandbox_free(sb);
                return r;
        }
        m->slots[slot] = sb;
        m->count++;
        sb->on_ready = on_ready;
        sb->on_ready_data = data;
        if (start_worker(m, sb, err) < 0) {
                sh_error *ignored = NULL;

                sb->on_ready = NULL;
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
                return sh_error_http(err, 404, "SandboxNotFound", "no such sandbox");
        sb->deleted = true;
        m->slots[sb->slot] = NULL;
        m->count--;
        if (m->delete_hook)
                m->delete_hook(sb, m->delete_hook_data);
        /* Running execs end with an in-band error; then the worker dies, and with PID 1 every
         * process of the namespace; the cgroup kill catches anything that raced. */
        sh_exec_fail_all(sb, "SandboxNotFound", "the sandbox was deleted");
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
        r = trash_and_remove(m, sb->id, err);
        log_info("sandbox-deleted", sb->id, "%s", "");
        sh_sandbox_unref(sb); /* the registry's reference */
        return r;
}

int sh_manager_remove_dir(sh_manager *m, sh_sandbox *sb, const char *path, sh_error **err)
{
        char tname[96];

        snprintf(tname, sizeof(tname), "dir.%s.%llu", sb->id, (unsigned long long)++m->trash_seq);
        if (sh_fs_detach_dir(sb->wsfd, path, m->trashfd, tname, err) < 0)
                return -1;
        /* The sandbox pays for removing its own tree. */
        return sh_remover_start(m, m->trashfd, sb, tname, err);
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
