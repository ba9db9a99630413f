/* cgroup-v2.c: the cgroup v2 (unified hierarchy) backend: controller delegation, the daemon's own leaf, limits, cgroup.kill/freeze, events. */
#include "cgroup-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CPU_PERIOD_US    100000
#define CPU_MIN_QUOTA_US 1000

static const struct {
        unsigned bit;
        const char *name;
} controllers[] = {
        {SH_CG_C_MEMORY, "memory"},
        {SH_CG_C_PIDS, "pids"},
        {SH_CG_C_CPU, "cpu"},
};

/* Which of our controllers the list file `file` of dirfd (cgroup.controllers or
 * cgroup.subtree_control) holds, as SH_CG_C_* bits; -errno on a read error. */
static int controller_bits(int dirfd, const char *file)
{
        _cleanup_free_ char *text = NULL;
        int k = sh_cg_read_file(dirfd, file, SH_CG_SMALL_MAX, &text, NULL);
        int bits = 0;

        if (k < 0)
                return k;
        for (size_t i = 0; i < ARRAY_SIZE(controllers); i++)
                if (sh_cg_has_token(text, controllers[i].name))
                        bits |= (int)controllers[i].bit;
        return bits;
}

/* Enable the controllers of `want` missing from dirfd's cgroup.subtree_control, one at a
 * time (a refused one must not hide the others). Returns the bits newly enabled, or -errno
 * of the first refusal (after trying all). */
static int enable_controllers(int dirfd, unsigned want, unsigned *ret_enabled)
{
        int have = controller_bits(dirfd, "cgroup.subtree_control");
        int first = 0;

        *ret_enabled = 0;
        if (have < 0)
                return have;
        for (size_t i = 0; i < ARRAY_SIZE(controllers); i++) {
                char buf[32];
                int k;

                if (!(want & controllers[i].bit) || ((unsigned)have & controllers[i].bit))
                        continue;
                snprintf(buf, sizeof(buf), "+%s", controllers[i].name);
                k = sh_cg_write_file(dirfd, "cgroup.subtree_control", buf);
                if (k < 0) {
                        if (first == 0)
                                first = k;
                } else {
                        *ret_enabled |= controllers[i].bit;
                }
        }
        return first;
}

static void disable_controllers(int dirfd, unsigned bits)
{
        for (size_t i = 0; i < ARRAY_SIZE(controllers); i++) {
                char buf[32];

                if (!(bits & controllers[i].bit))
                        continue;
                snprintf(buf, sizeof(buf), "-%s", controllers[i].name);
                (void)sh_cg_write_file(dirfd, "cgroup.subtree_control", buf);
        }
}

/* Our own cgroup can only offer a controller to the subtree if its parent offers it to us,
 * and so on up to the mount's root. Walk down from the root and enable what is missing on
 * the way, best effort: an ancestor holding processes refuses (no internal processes), and a
 * delegated container may not write above its own cgroup. What stays missing is reported by
 * the caller. Only the ancestors' subtree_control is touched, and only to add. */
static void enable_parent_chain(sh_cg_hier *hi)
{
        const char *rel = hi->own_dir + strlen(hi->mountpoint);
        _cleanup_close_ int fd = open(hi->mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *copy = strdup(rel);
        char *save = NULL;

        if (fd < 0 || !copy)
                return;
        for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                int next = sh_cg_open_dir(fd, c);
                int have;
                unsigned dummy;

                if (next < 0)
                        return;
                have = controller_bits(next, "cgroup.controllers");
                if (have >= 0 && (unsigned)have != (SH_CG_C_MEMORY | SH_CG_C_PIDS | SH_CG_C_CPU))
                        (void)enable_controllers(fd, ~(unsigned)have & 7u, &dummy);
                sh_close(fd);
                fd = next;
        }
}

static int v2_open(sh_cgroup_root *r, sh_error **err)
{
        sh_cg_hier *hi = &r->h[0];
        const unsigned all = SH_CG_C_MEMORY | SH_CG_C_PIDS | SH_CG_C_CPU;
        bool made_subtree = false, made_leaf = false, moved = false;
        unsigned enabled;
        int k, have;

        hi->own_fd = open(hi->own_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (hi->own_fd < 0)
                return sh_error_make(err, errno, "cannot open our cgroup '%s'", hi->own_dir);
        k = sh_cg_check_magic(hi->own_fd, CGROUP2_SUPER_MAGIC);
        if (k < 0)
                return sh_error_make(err, -k, "'%s' is not a cgroup2 file system", hi->own_dir);

        have = controller_bits(hi->own_fd, "cgroup.controllers");
        if (have >= 0 && (unsigned)have != all) {
                enable_parent_chain(hi);
                have = controller_bits(hi->own_fd, "cgroup.controllers");
        }
        if (have < 0)
                return sh_error_make(err, -have, "cannot read cgroup.controllers of '%s'",
                                     hi->own_dir);
        if ((unsigned)have != all)
                return sh_error_make(err, EOPNOTSUPP,
                                     "cgroup '%s' lacks the%s%s%s controller(s) and they could "
                                     "not be enabled in its parents",
                                     hi->own_dir, have & SH_CG_C_MEMORY ? "" : " memory",
                                     have & SH_CG_C_PIDS ? "" : " pids",
                                     have & SH_CG_C_CPU ? "" : " cpu");

        if (mkdirat(hi->own_fd, r->subtree_name, 0755) == 0)
                made_subtree = true;
        else if (errno != EEXIST)
                return sh_error_make(err, errno, "cannot create cgroup '%s/%s'", hi->own_dir,
                                     r->subtree_name);
        hi->subtree_fd = sh_cg_open_dir(hi->own_fd, r->subtree_name);
        if (hi->subtree_fd < 0) {
                k = sh_error_make(err, -hi->subtree_fd, "cannot open cgroup '%s/%s'", hi->own_dir,
                                  r->subtree_name);
                goto fail;
        }
        if (mkdirat(hi->subtree_fd, "daemon", 0755) == 0)
                made_leaf = true;
        else if (errno != EEXIST) {
                k = sh_error_make(err, errno, "cannot create cgroup '%s/%s/daemon'", hi->own_dir,
                                  r->subtree_name);
                goto fail;
        }
        r->v2_daemon_fd = sh_cg_open_dir(hi->subtree_fd, "daemon");
        if (r->v2_daemon_fd < 0) {
                k = sh_error_make(err, -r->v2_daemon_fd, "cannot open our leaf cgroup");
                goto fail;
        }
        /* No internal processes: a cgroup that hands controllers to its children may hold no
         * process itself (the root excepted). So the daemon first leaves its own cgroup for a
         * leaf of the subtree ("0" is the writer itself, all its threads), and only then are
         * controllers enabled in its former cgroup and in the subtree. */
        k = sh_cg_write_file(r->v2_daemon_fd, "cgroup.procs", "0");
        if (k < 0) {
                k = sh_error_make(err, -k, "cannot move the daemon into '%s/%s/daemon'",
                                  hi->own_dir, r->subtree_name);
                goto fail;
        }
        moved = true;
        k = enable_controllers(hi->own_fd, all, &enabled);
        r->v2_own_enabled |= enabled;
        if (k < 0) {
                k = sh_error_make(err, -k,
                                  "cannot enable controllers in '%s/cgroup.subtree_control'%s",
                                  hi->own_dir,
                                  k == -EBUSY ? " (other processes share our cgroup: give the "
                                                "daemon a cgroup of its own)"
                                              : "");
                goto fail;
        }
        k = enable_controllers(hi->subtree_fd, all, &enabled);
        if (k < 0) {
                k = sh_error_make(err, -k, "cannot enable controllers in '%s/%s'", hi->own_dir,
                                  r->subtree_name);
                goto fail;
        }
        /* cgroup.kill (Linux 5.14) kills a whole subtree atomically; older kernels freeze */
        r->v2_kill = faccessat(hi->subtree_fd, "cgroup.kill", F_OK, 0) == 0;
        return 0;
fail:
        if (hi->subtree_fd >= 0)
                disable_controllers(hi->subtree_fd, all);
        disable_controllers(hi->own_fd, r->v2_own_enabled);
        if (moved && sh_cg_write_file(hi->own_fd, "cgroup.procs", "0") < 0)
                return k; /* still inside: leave the directories */
        if (made_leaf)
                (void)unlinkat(hi->subtree_fd, "daemon", AT_REMOVEDIR);
        if (made_subtree)
                (void)unlinkat(hi->own_fd, r->subtree_name, AT_REMOVEDIR);
        return k;
}

/* A child cgroup gets the memory, pids and cpu controllers only if its parent enables them in
 * cgroup.subtree_control, which the kernel refuses (EBUSY) while the parent holds processes
 * itself. A sandbox's worker therefore belongs in a leaf of its own beside the exec cgroups.
 * Without limits the child does not need them (cgroup.kill, freeze and events are core). */
static int v2_prepare_parent(sh_cgroup *parent, bool need, sh_error **err)
{
        _cleanup_close_ int fd = sh_cg_open(parent, 0);
        unsigned enabled;
        int k;

        if (fd < 0)
                return sh_error_make(err, -fd, "cgroup '%s' is gone", parent->relpath);
        k = enable_controllers(fd, SH_CG_C_MEMORY | SH_CG_C_PIDS | SH_CG_C_CPU, &enabled);
        if (k < 0 && need)
                return sh_error_make(err, -k, "cannot enable controllers below cgroup '%s'%s",
                                     parent->relpath,
                                     k == -EBUSY ? " (it holds processes itself)" : "");
        return 0;
}

static int write_str(int fd, sh_cgroup *cg, const char *file, const char *val, sh_error **err)
{
        int k = sh_cg_write_file(fd, file, val);

        if (k < 0)
                return sh_error_make(err, -k, "cannot write %s='%s' of cgroup '%s'", file, val,
                                     cg->relpath);
        return 0;
}

static int v2_set_limits(sh_cgroup *cg, const sh_cg_limits *lim, sh_error **err)
{
        _cleanup_close_ int fd = sh_cg_open(cg, 0);
        char buf[64];
        int k;

        if (fd < 0)
                return sh_error_make(err, -fd, "cgroup '%s' is gone", cg->relpath);
        if (lim->memory_max) {
                snprintf(buf, sizeof(buf), "%" PRIu64, lim->memory_max);
                k = write_str(fd, cg, "memory.max", buf, err);
                if (k < 0)
                        return k;
                /* like v1's memsw cap: the sandbox must not spill past its limit into swap;
                 * the file is absent without swap support */
                k = sh_cg_write_file(fd, "memory.swap.max", "0");
                if (k < 0 && k != -ENOENT)
                        return sh_error_make(err, -k, "cannot write memory.swap.max of '%s'",
                                             cg->relpath);
        }
        if (lim->pids_max) {
                snprintf(buf, sizeof(buf), "%" PRIu64, lim->pids_max);
                k = write_str(fd, cg, "pids.max", buf, err);
                if (k < 0)
                        return k;
        }
        if (lim->cpu_max_milli) {
                uint64_t quota;

                if (lim->cpu_max_milli > UINT64_MAX / 100)
                        return sh_error_make(err, ERANGE, "cpu limit too large");
                quota = lim->cpu_max_milli * 100;
                if (quota < CPU_MIN_QUOTA_US)
                        quota = CPU_MIN_QUOTA_US;
                snprintf(buf, sizeof(buf), "%" PRIu64 " %d", quota, CPU_PERIOD_US);
                k = write_str(fd, cg, "cpu.max", buf, err);
                if (k < 0)
                        return k;
        }
        return 0;
}

static int events_value(int fd, const char *key, uint64_t *ret)
{
        _cleanup_free_ char *text = NULL;
        int k = sh_cg_read_file(fd, "cgroup.events", SH_CG_SMALL_MAX, &text, NULL);

        if (k < 0)
                return k;
        return sh_cg_parse_keyed(text, key, ret);
}

static int v2_freeze_start(int fd)
{
        return sh_cg_write_file(fd, "cgroup.freeze", "1");
}

/* "frozen 1" in cgroup.events once every task below has stopped. Asking again is harmless
 * (and freezes a cgroup that was never asked). */
static int v2_frozen(int fd)
{
        uint64_t frozen = 0;
        int k = events_value(fd, "frozen", &frozen);

        return k < 0 ? k : frozen == 1;
}

static int v2_thaw(int fd)
{
        return sh_cg_write_file(fd, "cgroup.freeze", "0");
}

/* cgroup.kill (Linux 5.14): the kernel kills the whole subtree, forks in flight included. 1
 * when it did, 0 when the kernel has none (the caller freezes, kills each, thaws). */
static int v2_kill_direct(sh_cgroup *cg, sh_error **err)
{
        _cleanup_close_ int fd = -1;
        int k;

        if (!cg->root->v2_kill)
                return 0;
        fd = sh_cg_open(cg, 0);
        if (fd == -ENOENT)
                return 0; /* gone: the freezer way finds nothing either */
        if (fd < 0)
                return sh_error_make(err, -fd, "cannot open cgroup '%s'", cg->relpath);
        k = sh_cg_write_file(fd, "cgroup.kill", "1");
        if (k == 0) {
                /* A frozen cgroup stays frozen after cgroup.kill: thaw it, so the killed
                 * tasks can run their exit and the cgroup can empty. */
                (void)sh_cg_write_file(fd, "cgroup.freeze", "0");
                return 1;
        }
        if (k != -ENOENT)
                return sh_error_make(err, -k, "cannot kill cgroup '%s'", cg->relpath);
        return 0;
}

static int v2_is_empty(sh_cgroup *cg, bool *ret, sh_error **err)
{
        _cleanup_close_ int fd = sh_cg_open(cg, 0);
        uint64_t populated = 1;
        int k;

        if (fd == -ENOENT) {
                *ret = true;
                return 0;
        }
        /* "populated" covers the descendants too, and is cleared as tasks exit (zombies do
         * not count) */
        k = fd < 0 ? fd : events_value(fd, "populated", &populated);
        if (k < 0)
                return sh_error_make(err, -k, "cannot read cgroup.events of '%s'", cg->relpath);
        *ret = populated == 0;
        return 0;
}

static int v2_oom_kills(sh_cgroup *cg, uint64_t *ret, sh_error **err)
{
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = sh_cg_open(cg, 0);
        int k;

        if (fd < 0)
                return sh_error_make(err, -fd, "cgroup '%s' is gone", cg->relpath);
        /* memory.events is hierarchical (unless mounted with memory_localevents) */
        k = sh_cg_read_file(fd, "memory.events", SH_CG_SMALL_MAX, &text, NULL);
        if (k == -ENOENT)
                return sh_error_make(err, EOPNOTSUPP,
                                     "cgroup '%s' has no memory controller (a parent that holds "
                                     "processes cannot delegate one: put them in a leaf)",
                                     cg->relpath);
        if (k >= 0)
                k = sh_cg_parse_keyed(text, "oom_kill", ret);
        if (k < 0)
                return sh_error_make(err, -k, "cannot read oom_kill of memory.events of '%s'",
                                     cg->relpath);
        return 0;
}

static int v2_usage(sh_cgroup *cg, sh_cg_usage *ret, sh_error **err)
{
        _cleanup_free_ char *cpu = NULL, *mem = NULL;
        _cleanup_close_ int fd = sh_cg_open(cg, 0);
        uint64_t usec = 0;
        size_t ml = 0;
        int k;

        if (fd < 0)
                return sh_error_make(err, -fd, "cgroup '%s' is gone", cg->relpath);
        /* both hierarchical: cg and everything below it */
        k = sh_cg_read_file(fd, "cpu.stat", SH_CG_SMALL_MAX, &cpu, NULL);
        if (k >= 0)
                k = sh_cg_parse_keyed(cpu, "usage_usec", &usec);
        if (k < 0)
                return sh_error_make(err, -k, "cannot read usage_usec of cpu.stat of '%s'",
                                     cg->relpath);
        k = sh_cg_read_file(fd, "memory.current", SH_CG_SMALL_MAX, &mem, &ml);
        while (k >= 0 && ml && (mem[ml - 1] == '\n' || mem[ml - 1] == ' '))
                ml--;
        if (k >= 0)
                k = sh_cg_parse_u64_span(mem, ml, &ret->mem_bytes);
        if (k < 0)
                return sh_error_make(err, -k, "cannot read memory.current of '%s'", cg->relpath);
        ret->cpu_ns = usec > UINT64_MAX / 1000 ? UINT64_MAX : usec * 1000;
        return 0;
}

static int has_other_child(int dirfd, const char *name, void *userdata)
{
        const char *ours = userdata;

        (void)dirfd;
        return STREQ(name, ours) ? 0 : -EEXIST;
}

static int v2_destroy_root(sh_cgroup_root *r, sh_error **err)
{
        sh_cg_hier *hi = &r->h[0];
        int k;

        if (hi->own_fd < 0 || hi->subtree_fd < 0)
                return 0;
        /* Undo what open did, in reverse: the subtree stops handing out controllers, then our
         * former cgroup (below), then the daemon moves back and the directories go. */
        disable_controllers(hi->subtree_fd, SH_CG_C_MEMORY | SH_CG_C_PIDS | SH_CG_C_CPU);
        /* Below the root, a cgroup with controllers enabled for its children cannot take the
         * daemon back. Whoever enabled them (this open, or the same daemon's earlier run
         * that a crash cut short), they were enabled for our subtree alone when no other
         * child cgroup exists. The root may hold processes: leave it as it is. */
        if (!STREQ(hi->own_dir, hi->mountpoint) &&
            sh_cg_for_each_child(hi->own_fd, has_other_child, r->subtree_name) == 0) {
                disable_controllers(hi->own_fd, SH_CG_C_MEMORY | SH_CG_C_PIDS | SH_CG_C_CPU);
                r->v2_own_enabled = 0;
        }
        k = sh_cg_write_file(hi->own_fd, "cgroup.procs", "0");
        if (k < 0)
                return sh_error_make(err, -k, "cannot move the daemon back to '%s'", hi->own_dir);
        if (unlinkat(hi->subtree_fd, "daemon", AT_REMOVEDIR) < 0 && errno != ENOENT)
                return sh_error_make(err, errno, "cannot remove '%s/%s/daemon'", hi->own_dir,
                                     r->subtree_name);
        r->v2_daemon_fd = sh_close(r->v2_daemon_fd);
        if (unlinkat(hi->own_fd, r->subtree_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return sh_error_make(err, errno, "cannot remove '%s/%s'", hi->own_dir,
                                     r->subtree_name);
        return 0;
}

const sh_cg_ops sh_cg_v2_ops = {
        .open = v2_open,
        .prepare_parent = v2_prepare_parent,
        .set_limits = v2_set_limits,
        .kill_direct = v2_kill_direct,
        /* Before 5.14: freeze so nothing forks or exits under us, SIGKILL each (a fatal
         * signal ends even a frozen v2 task), always thaw. */
        .kill_freeze_ms = SH_CG_FREEZE_TIMEOUT_MS,
        .kill_passes = 4,
        .freeze_start = v2_freeze_start,
        .frozen = v2_frozen,
        .thaw = v2_thaw,
        .is_empty = v2_is_empty,
        .oom_kills = v2_oom_kills,
        .usage = v2_usage,
        .destroy_root = v2_destroy_root,
};
