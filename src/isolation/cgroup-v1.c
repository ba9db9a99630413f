/* cgroup-v1.c: the cgroup v1 backend: memory, pids, cpu and freezer hierarchies, one directory per hierarchy for each cgroup. */
#include "cgroup-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

#define CFS_PERIOD_US    100000
#define CFS_MIN_QUOTA_US 1000 /* the kernel refuses quotas below 1 ms */

static const char *hname(size_t h)
{
        static const char *const names[] = {"memory", "pids", "cpu", "freezer"};

        return h < 4 ? names[h] : "?";
}

static int v1_open(sh_cgroup_root *r, sh_error **err)
{
        bool made[SH_CG_MAX_HIER] = {false};
        int k;

        for (size_t h = 0; h < r->nhier; h++) {
                sh_cg_hier *hi = &r->h[h];

                hi->own_fd = open(hi->own_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (hi->own_fd < 0) {
                        k = sh_error_make(err, errno, "cannot open our %s cgroup '%s'", hname(h),
                                          hi->own_dir);
                        goto fail;
                }
                /* a tmpfs or a bind-mounted look-alike is not a cgroup: writing "limits" there
                 * would confine nothing */
                k = sh_cg_check_magic(hi->own_fd, CGROUP_SUPER_MAGIC);
                if (k < 0) {
                        k = sh_error_make(err, -k, "'%s' is not a cgroup v1 file system",
                                          hi->own_dir);
                        goto fail;
                }
                if (mkdirat(hi->own_fd, r->subtree_name, 0755) == 0)
                        made[h] = true;
                else if (errno != EEXIST) {
                        k = sh_error_make(err, errno, "cannot create cgroup '%s/%s'", hi->own_dir,
                                          r->subtree_name);
                        goto fail;
                }
                hi->subtree_fd = sh_cg_open_dir(hi->own_fd, r->subtree_name);
                if (hi->subtree_fd < 0) {
                        k = sh_error_make(err, -hi->subtree_fd, "cannot open cgroup '%s/%s'",
                                          hi->own_dir, r->subtree_name);
                        goto fail;
                }
        }
        if (faccessat(r->h[SH_CG_V1_FREEZER].subtree_fd, "freezer.state", F_OK, 0) < 0) {
                k = sh_error_make(err, errno, "freezer.state missing below '%s'",
                                  r->h[SH_CG_V1_FREEZER].own_dir);
                goto fail;
        }
        /* Without swap accounting (swapaccount=0) only memory.limit_in_bytes exists, and a
         * sandbox could push its excess to swap; with it we cap memory+swap at the same
         * value. */
        r->v1_memsw = faccessat(r->h[SH_CG_V1_MEMORY].subtree_fd, "memory.memsw.limit_in_bytes",
                                F_OK, 0) == 0;
        return 0;
fail:
        for (size_t h = 0; h < r->nhier; h++)
                if (made[h])
                        (void)unlinkat(r->h[h].own_fd, r->subtree_name, AT_REMOVEDIR);
        return k;
}

static int write_u64(sh_cgroup *cg, size_t h, const char *file, uint64_t v, sh_error **err)
{
        _cleanup_close_ int fd = sh_cg_open(cg, h);
        char buf[32];
        int k;

        snprintf(buf, sizeof(buf), "%" PRIu64, v);
        k = fd < 0 ? fd : sh_cg_write_file(fd, file, buf);
        if (k < 0)
                return sh_error_make(err, -k, "cannot write %s='%s' of cgroup '%s'", file, buf,
                                     cg->relpath);
        return 0;
}

static int v1_set_limits(sh_cgroup *cg, const sh_cg_limits *lim, sh_error **err)
{
        int k;

        if (lim->memory_max) {
                /* memsw must never be below the memory limit: a fresh cgroup has both
                 * unlimited, so memory goes first */
                k = write_u64(cg, SH_CG_V1_MEMORY, "memory.limit_in_bytes", lim->memory_max, err);
                if (k < 0)
                        return k;
                if (cg->root->v1_memsw) {
                        k = write_u64(cg, SH_CG_V1_MEMORY, "memory.memsw.limit_in_bytes",
                                      lim->memory_max, err);
                        if (k < 0)
                                return k;
                }
        }
        if (lim->pids_max) {
                k = write_u64(cg, SH_CG_V1_PIDS, "pids.max", lim->pids_max, err);
                if (k < 0)
                        return k;
        }
        if (lim->cpu_max_milli) {
                uint64_t quota;

                if (lim->cpu_max_milli > UINT64_MAX / 100)
                        return sh_error_make(err, ERANGE, "cpu limit too large");
                quota = lim->cpu_max_milli * 100; /* milli-cores of a 100 ms period, in us */
                if (quota < CFS_MIN_QUOTA_US)
                        quota = CFS_MIN_QUOTA_US;
                k = write_u64(cg, SH_CG_V1_CPU, "cpu.cfs_period_us", CFS_PERIOD_US, err);
                if (k < 0)
                        return k;
                k = write_u64(cg, SH_CG_V1_CPU, "cpu.cfs_quota_us", quota, err);
                if (k < 0)
                        return k;
        }
        return 0;
}

static int v1_freeze_start(int fd)
{
        return sh_cg_write_file(fd, "freezer.state", "FROZEN");
}

/* The kernel says FREEZING while a task has not reached the refrigerator yet (e.g. in an
 * uninterruptible sleep); asking again (cgroup.c) retries the tasks that were busy. */
static int v1_frozen(int fd)
{
        _cleanup_free_ char *state = NULL;
        int k = sh_cg_read_file(fd, "freezer.state", SH_CG_SMALL_MAX, &state, NULL);

        if (k < 0)
                return k;
        return strncmp(state, "FROZEN", 6) == 0 && (state[6] == '\n' || !state[6]);
}

static int v1_thaw(int fd)
{
        return sh_cg_write_file(fd, "freezer.state", "THAWED");
}

static int found_pid(pid_t pid, void *userdata)
{
        (void)pid;
        (void)userdata;
        return -EEXIST; /* stop at the first one */
}

static int v1_is_empty(sh_cgroup *cg, bool *ret, sh_error **err)
{
        for (size_t h = 0; h < cg->root->nhier; h++) {
                _cleanup_close_ int fd = sh_cg_open(cg, h);
                int k;

                if (fd == -ENOENT)
                        continue;
                k = fd < 0 ? fd : sh_cg_for_each_pid(fd, true, found_pid, NULL);
                if (k == -EEXIST) {
                        *ret = false;
                        return 0;
                }
                if (k < 0)
                        return sh_error_make(err, -k, "cannot read processes of cgroup '%s'",
                                             cg->relpath);
        }
        *ret = true;
        return 0;
}

static int v1_oom_kills(sh_cgroup *cg, uint64_t *ret, sh_error **err)
{
        _cleanup_close_ int fd = sh_cg_open(cg, SH_CG_V1_MEMORY);
        int k;

        if (fd < 0)
                return sh_error_make(err, -fd, "cgroup '%s' has no memory cgroup", cg->relpath);
        /* v1 counts an OOM kill only in the victim's own memcg, not its ancestors: sum the
         * whole subtree so a kill in an exec's child cgroup shows in its sandbox too. The
         * "oom_kill" line exists since Linux 4.13. */
        k = sh_cg_sum_keyed(fd, "memory.oom_control", "oom_kill", ret);
        if (k == -ENOENT)
                return sh_error_make(err, EOPNOTSUPP,
                                     "memory.oom_control of cgroup '%s' has no oom_kill counter",
                                     cg->relpath);
        if (k < 0)
                return sh_error_make(err, -k, "cannot read memory.oom_control of cgroup '%s'",
                                     cg->relpath);
        return 0;
}

static int read_u64(int dirfd, const char *name, uint64_t *ret)
{
        _cleanup_free_ char *text = NULL;
        size_t n = 0;
        int k = sh_cg_read_file(dirfd, name, SH_CG_SMALL_MAX, &text, &n);

        while (k >= 0 && n && (text[n - 1] == '\n' || text[n - 1] == ' '))
                n--;
        return k < 0 ? k : sh_cg_parse_u64_span(text, n, ret);
}

/* The CPU ticks of one process of the cgroup (its reaped children's included). */
static int add_ticks(pid_t pid, void *userdata)
{
        _cleanup_free_ char *text = NULL;
        uint64_t *sum = userdata, t;
        char proc[64];

        snprintf(proc, sizeof(proc), "/proc/%d/stat", (int)pid);
        /* gone meanwhile, or its line unreadable: it adds nothing to this reading */
        if (sh_cg_read_file(AT_FDCWD, proc, SH_CG_SMALL_MAX, &text, NULL) >= 0 &&
            sh_cg_parse_proc_stat_ticks(text, &t) == 0)
                *sum += t;
        return 0;
}

static int v1_usage(sh_cgroup *cg, sh_cg_usage *ret, sh_error **err)
{
        _cleanup_close_ int mem = sh_cg_open(cg, SH_CG_V1_MEMORY),
                            cpu = sh_cg_open(cg, SH_CG_V1_CPU),
                            pids = sh_cg_open(cg, SH_CG_V1_PIDS);
        uint64_t ticks = 0;
        long hz;
        int k;

        if (mem < 0 || cpu < 0 || pids < 0)
                return sh_error_make(err,
                                     mem < 0   ? -mem
                                     : cpu < 0 ? -cpu
                                               : -pids,
                                     "cgroup '%s' is gone", cg->relpath);
        k = read_u64(mem, "memory.usage_in_bytes", &ret->mem_bytes);
        if (k < 0)
                return sh_error_make(err, -k, "cannot read memory.usage_in_bytes of '%s'",
                                     cg->relpath);
        /* cpuacct mounted with cpu ("cpu,cpuacct"): the kernel's own hierarchical counter */
        k = read_u64(cpu, "cpuacct.usage", &ret->cpu_ns);
        if (k == 0)
                return 0;
        if (k != -ENOENT)
                return sh_error_make(err, -k, "cannot read cpuacct.usage of '%s'", cg->relpath);
        /* cpuacct apart (we make no cgroups there): the times of the processes, found through
         * the pids hierarchy (bounded by the cgroup's pids limit). */
        k = sh_cg_for_each_pid(pids, true, add_ticks, &ticks);
        if (k < 0)
                return sh_error_make(err, -k, "cannot list the processes of '%s'", cg->relpath);
        hz = sysconf(_SC_CLK_TCK);
        if (hz <= 0)
                hz = 100;
        ret->cpu_ns = ticks > UINT64_MAX / 1000000000u ? UINT64_MAX
                                                       : ticks * (1000000000u / (uint64_t)hz);
        return 0;
}

static int v1_destroy_root(sh_cgroup_root *r, sh_error **err)
{
        int first = 0;

        for (size_t h = 0; h < r->nhier; h++) {
                if (r->h[h].own_fd < 0)
                        continue;
                if (unlinkat(r->h[h].own_fd, r->subtree_name, AT_REMOVEDIR) < 0 &&
                    errno != ENOENT && first == 0)
                        first = -errno;
        }
        if (first < 0)
                return sh_error_make(err, -first, "cannot remove cgroup subtree '%s'",
                                     r->subtree_name);
        return 0;
}

const sh_cg_ops sh_cg_v1_ops = {
        .open = v1_open,
        .set_limits = v1_set_limits,
        /* A kill waits at most this long for a freeze (from timers), then falls back to
         * repeated SIGKILL passes: a task with SIGKILL pending cannot fork, so they
         * converge. */
        .kill_freeze_ms = SH_CG_KILL_FREEZE_MS,
        .kill_passes = 16,
        .freeze_start = v1_freeze_start,
        .frozen = v1_frozen,
        .thaw = v1_thaw,
        .is_empty = v1_is_empty,
        .oom_kills = v1_oom_kills,
        .usage = v1_usage,
        .destroy_root = v1_destroy_root,
};
