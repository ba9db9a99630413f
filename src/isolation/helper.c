/* helper.c: the daemon's side of the root helpers' confinement (rsync, tree removers): their
 * cgroups and their seccomp filters (the child's steps are jail.c's). */
#include "sh/helper.h"

#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <sys/socket.h>

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

static void ctx_releasep(scmp_filter_ctx *ctx)
{
        if (*ctx)
                seccomp_release(*ctx);
}

/* A context for the native ABI only: a syscall through another one (i386's int $0x80, x32)
 * kills the process, whatever the rules say. The filter is loaded by our own code in the
 * child, never by libseccomp: no no_new_privs behind our back. */
static scmp_filter_ctx new_ctx(uint32_t def, sh_error **err)
{
        scmp_filter_ctx ctx = seccomp_init(def);
        int r;

        if (!ctx) {
                sh_error_make(err, ENOMEM, "seccomp: seccomp_init");
                return NULL;
        }
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r >= 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r < 0) {
                seccomp_release(ctx);
                sh_error_make(err, -r, "seccomp: filter attributes");
                return NULL;
        }
        return ctx;
}

static int rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
                const struct scmp_arg_cmp *args, sh_error **err)
{
        int nr = seccomp_syscall_resolve_name(name);
        int r;

        if (nr == __NR_SCMP_ERROR)
                return sh_error_make(err, EINVAL, "seccomp: syscall %s unknown to libseccomp",
                                     name);
        r = seccomp_rule_add_array(ctx, action, nr, n, args);
        if (r < 0)
                return sh_error_make(err, -r, "seccomp: adding rule for %s", name);
        return 0;
}

static int build_rsync(sh_seccomp **ret, sh_error **err)
{
        __attribute__((cleanup(ctx_releasep))) scmp_filter_ctx ctx = new_ctx(SCMP_ACT_ALLOW, err);
        /* Any family but AF_UNIX: the full 64-bit register is compared, so a family with
         * high bits set is refused too (the kernel would read the low 32 bits). */
        struct scmp_arg_cmp not_unix = SCMP_A0(SCMP_CMP_NE, AF_UNIX);
        int r;

        if (!ctx)
                return -1;
        r = rule(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 1, &not_unix, err);
        if (r >= 0)
                r = rule(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socketpair", 1, &not_unix, err);
        if (r < 0)
                return r;
        return sh_seccomp_export(ctx, ret, err);
}

/* What sh_fs_remove_tree, readdir and malloc need (and the sanitizers' runtime, in the test
 * build), nothing more: no socket, no exec, no mount, no process or namespace call. */
static const char *const remover_allowed[] = {
        /* the tree */
        "openat",
        "close",
        "getdents64",
        "newfstatat",
        "fstat",
        "statx",
        "lseek",
        "fcntl",
        "dup",
        "unlinkat",
        "renameat",
        "renameat2",
        "getrandom",
        /* memory */
        "brk",
        "mmap",
        "munmap",
        "mremap",
        "mprotect",
        "madvise",
        /* errors and the end */
        "write",
        "writev",
        "exit",
        "exit_group",
        "rt_sigreturn",
        "rt_sigprocmask",
        "sigaltstack",
        "getpid",
        "gettid",
        "tgkill",
        "futex",
        "sched_yield",
        "clock_gettime",
};

static int build_remover(sh_seccomp **ret, sh_error **err)
{
        __attribute__((cleanup(ctx_releasep))) scmp_filter_ctx ctx =
                new_ctx(SCMP_ACT_ERRNO(ENOSYS), err);

        if (!ctx)
                return -1;
        for (size_t i = 0; i < ARRAY_SIZE(remover_allowed); i++)
                if (rule(ctx, SCMP_ACT_ALLOW, remover_allowed[i], 0, NULL, err) < 0)
                        return -1;
        return sh_seccomp_export(ctx, ret, err);
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
