/* helper.c: the daemon's side of the root helpers' confinement (rsync, tree removers): their
 * cgroups and their seccomp filters (the child's steps are jail.c's). */
#include "sh/helper.h"

#include <errno.h>
#include <stdio.h>

#include "sh/macro.h"
#include "sh/seccomp.h"

int sh_helper_cgroup_new(sh_cgroup_root *r, sh_cgroup *sandbox, char tag, uint64_t cpu_milli,
                         sh_cgroup **ret, int *procs, int max, int *ret_n, sh_error **err)
{
        static uint64_t seq;
        sh_cg_limits lim = {.pids_max = SH_HELPER_PIDS_MAX};
        sh_cgroup *cg = NULL;
        char name[48];
        int n;

        /* Below a sandbox, its memory and CPU limits are the helper's too (hierarchical):
         * the work is the sandbox's, and so is the budget. Outside one, the helper gets
         * limits of its own. pids: rsync needs six processes, a remover one. */
        if (!sandbox) {
                lim.memory_max = SH_HELPER_MEMORY_MAX;
                lim.cpu_max_milli = cpu_milli;
        }
        snprintf(name, sizeof(name), SH_CG_HELPER_PREFIX "%c%llu", tag, (unsigned long long)++seq);
        if (sh_cgroup_create(r, sandbox, name, &lim, &cg, err) < 0)
                return -1;
        n = sh_cgroup_open_procs(cg, procs, max);
        if (n < 0) {
                sh_error *ignored = NULL;

                (void)sh_cgroup_destroy(cg, &ignored);
                sh_error_release(&ignored);
                sh_cgroup_free(cg);
                return sh_error_make(err, -n, "opening the helper cgroup '%s'", name);
        }
        *ret = cg;
        *ret_n = n;
        return 0;
}

/* ---- filters -------------------------------------------------------------------------- */

static int build_rsync(sh_seccomp **ret, sh_error **err)
{
        return sh_seccomp_build_unix_only(ret, err);
}

/* What sh_fs_remove_tree, readdir and malloc need (and the sanitizers' runtime, in the test
 * build), nothing more: no socket, no exec, no mount, no process or namespace call. Anything
 * else fails with ENOSYS. */
static const sh_seccomp_allow remover_allowed[] = {
        /* the tree */
        {"openat", -1, 0, 0},
        {"close", -1, 0, 0},
        {"getdents64", -1, 0, 0},
        {"newfstatat", -1, 0, 0},
        {"fstat", -1, 0, 0},
        {"statx", -1, 0, 0},
        {"lseek", -1, 0, 0},
        {"fcntl", -1, 0, 0},
        {"dup", -1, 0, 0},
        {"unlinkat", -1, 0, 0},
        {"renameat", -1, 0, 0},
        {"renameat2", -1, 0, 0},
        {"getrandom", -1, 0, 0},
        /* memory */
        {"brk", -1, 0, 0},
        {"mmap", -1, 0, 0},
        {"munmap", -1, 0, 0},
        {"mremap", -1, 0, 0},
        {"mprotect", -1, 0, 0},
        {"madvise", -1, 0, 0},
        /* errors and the end */
        {"write", -1, 0, 0},
        {"writev", -1, 0, 0},
        {"exit", -1, 0, 0},
        {"exit_group", -1, 0, 0},
        {"rt_sigreturn", -1, 0, 0},
        {"rt_sigprocmask", -1, 0, 0},
        {"sigaltstack", -1, 0, 0},
        {"getpid", -1, 0, 0},
        {"gettid", -1, 0, 0},
        {"tgkill", -1, 0, 0},
        {"futex", -1, 0, 0},
        {"sched_yield", -1, 0, 0},
        {"clock_gettime", -1, 0, 0},
};

static int build_remover(sh_seccomp **ret, sh_error **err)
{
        return sh_seccomp_build_allowlist(remover_allowed, ARRAY_SIZE(remover_allowed), ENOSYS, ret,
                                          err);
}

static const struct sock_fprog *cached(sh_seccomp **slot, int (*build)(sh_seccomp **, sh_error **),
                                       sh_error **err)
{
        if (!*slot && build(slot, err) < 0)
                return NULL;
        return sh_seccomp_prog(*slot);
}

const struct sock_fprog *sh_helper_rsync_filter(sh_error **err)
{
        static sh_seccomp *f;

        return cached(&f, build_rsync, err);
}

const struct sock_fprog *sh_helper_remover_filter(sh_error **err)
{
        static sh_seccomp *f;

        return cached(&f, build_remover, err);
}
