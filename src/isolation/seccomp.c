/* seccomp.c: the sandbox syscall filter: built by libseccomp in the daemon, loaded by the child. */
#include "sh/seccomp.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

/*
 * Policy: default allow, with a deny list modelled on Docker's default profile
 * (moby/profiles/seccomp/default.json) for an unprivileged container, plus the
 * interfaces that have been the entry point of most recent kernel privilege
 * escalations. A deny list (rather than an allow list) keeps every ordinary program
 * working (bash, python3, coreutils, gcc, git, node) without chasing each new
 * syscall glibc learns; the price is that syscalls newer than libseccomp's table are
 * allowed, which is acceptable because the process also has no capabilities, no
 * new user namespace and no_new_privs (see caps.c), so the filter is a layer that
 * shrinks the kernel attack surface, not the only wall.
 *
 * Every rule is added for three ABIs: x86_64, i386 (int $0x80 from a 64-bit
 * process reaches the 32-bit syscall table, with other numbers) and x32 (native
 * numbers | 0x40000000). Any other architecture token is killed (libseccomp's
 * default bad-arch action), so no ABI bypasses the list.
 */

/* Syscalls refused outright with EPERM. The comment says what each one would give an
 * attacker. Names unknown on one ABI (umount, vm86 ...) are skipped for that ABI by
 * libseccomp. */
static const char *const deny_always[] = {
        /* Filesystem namespace surgery: remounting, hiding or exposing host mounts, and
         * the new mount API that does the same from file descriptors. */
        "mount",
        "umount",
        "umount2",
        "pivot_root",
        "chroot",
        "move_mount",
        "open_tree",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
        /* Joining another namespace with an fd (nstype 0 means "any type", so no
         * argument filter can make it safe). */
        "setns",
        /* The kernel keyring is not namespaced: keys leak across sandboxes, and it has a
         * history of use-after-free bugs (CVE-2016-0728). */
        "keyctl",
        "add_key",
        "request_key",
        /* Unprivileged eBPF: verifier bugs give arbitrary kernel read/write
         * (CVE-2021-3490, CVE-2021-31440, CVE-2023-2163). */
        "bpf",
        /* perf: side channels on other tenants and a long CVE list (CVE-2023-2235). */
        "perf_event_open",
        /* io_uring: bypasses per-syscall filtering (its operations are not seccomp'd)
         * and has been the most productive LPE source (CVE-2022-29582, CVE-2023-2598). */
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        /* userfaultfd stalls the kernel inside copy_from_user, turning narrow races into
         * reliable exploits. */
        "userfaultfd",
        /* Reading or writing another process's memory, fds or kernel-object identity
         * (PTRACE_TRACEME LPE CVE-2019-13272; pidfd_getfd steals fds). */
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "pidfd_getfd",
        "kcmp",
        /* Moving another process's pages between NUMA nodes (Docker: CAP_SYS_NICE). */
        "move_pages",
        "migrate_pages",
        /* Loading a new kernel or kernel code. */
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "create_module",
        "get_kernel_syms",
        "query_module",
        /* Host-wide state: power, swap, process accounting, quotas, the kernel log
         * (leaks kernel addresses that defeat KASLR), the clock. */
        "reboot",
        "swapon",
        "swapoff",
        "acct",
        "quotactl",
        "quotactl_fd",
        "syslog",
        "settimeofday",
        "stime",
        "clock_settime",
        "clock_settime64",
        "adjtimex",
        "clock_adjtime",
        "clock_adjtime64",
        /* File handles: open_by_handle_at opens any inode of a mounted filesystem,
         * ignoring the mount tree (the "shocker" container escape, 2014). */
        "open_by_handle_at",
        "name_to_handle_at",
        /* Raw I/O port access and vm86 mode on x86. */
        "iopl",
        "ioperm",
        "vm86",
        "vm86old",
        /* Obsolete or host-wide interfaces Docker also refuses. */
        "lookup_dcookie",
        "uselib",
        "ustat",
        "sysfs",
        "_sysctl",
        "nfsservctl",
        /* Terminal hangup of a tty shared with the host, and filesystem-wide event
         * monitoring. */
        "vhangup",
        "fanotify_init",
};

/* Every namespace flag. New namespaces (above all CLONE_NEWUSER, which gives back a full
 * capability set inside it and exposes namespaced-root kernel code to the sandbox:
 * CVE-2022-0185, CVE-2023-32233) are the daemon's business, never the sandbox's. */
static const uint64_t ns_flags[] = {
        CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
        CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET, CLONE_NEWTIME,
};

/* personality(2) values Docker allows: PER_LINUX, PER_LINUX32, UNAME26 and their
 * combination, plus 0xffffffff (query only). Everything else (READ_IMPLIES_EXEC,
 * ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO ...) weakens exploit mitigations for the children. */
#define PERSONA_ALLOWED_BITS ((uint32_t)(PER_LINUX32 | UNAME26))

struct sh_seccomp {
        struct sock_fprog prog;
};

static int add_rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n_args,
                    const struct scmp_arg_cmp *args, sh_error **err)
{
        int nr = seccomp_syscall_resolve_name(name);
        int r;

        if (nr == __NR_SCMP_ERROR)
                return sh_error_make(err, EINVAL, "seccomp: syscall %s unknown to libseccomp",
                                     name);
        /* seccomp_rule_add (not _exact) tolerates a syscall absent on one of the ABIs. */
        r = seccomp_rule_add_array(ctx, action, nr, n_args, args);
        if (r < 0)
                return sh_error_make(err, -r, "seccomp: adding rule for %s", name);
        return 0;
}

static int add_deny_always(scmp_filter_ctx ctx, sh_error **err)
{
        for (size_t i = 0; i < ARRAY_SIZE(deny_always); i++) {
                int r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), deny_always[i], 0, NULL, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* clone/unshare with any CLONE_NEW* flag. One rule per flag, since the rules of one
 * syscall are OR'd and a masked compare tests one bit pattern. clone(2) reads only the
 * low 32 bits of its flags (the kernel applies lower_32_bits()), and these masks sit in
 * the low 32 bits, so setting high bits cannot hide a flag. CLONE_NEWTIME (0x80) lies in
 * clone's exit-signal byte and is only a namespace flag for unshare and clone3. */
static int add_namespace_rules(scmp_filter_ctx ctx, sh_error **err)
{
        for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
                struct scmp_arg_cmp a = SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]);
                int r;

                if (ns_flags[i] != CLONE_NEWTIME) {
                        r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "clone", 1, &a, err);
                        if (r < 0)
                                return r;
                }
                r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "unshare", 1, &a, err);
                if (r < 0)
                        return r;
        }
        /* clone3 passes its flags in a struct in memory, which seccomp cannot read. ENOSYS
         * makes glibc (2.34+) fall back to clone(2), whose flags the rules above see. */
        return add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, err);
}

/* ioctl's request is an unsigned int in the kernel but a 64-bit register on x86_64: the
 * compare must mask to 32 bits, or TIOCSTI | (1 << 32) would slip past an equality test
 * and still reach the TIOCSTI handler (CVE-2019-10063, flatpak). TIOCSTI pushes input
 * into a terminal shared with the host (CVE-2017-5226, bubblewrap); TIOCLINUX can do the
 * same through the console selection (CVE-2023-1523). */
static int add_ioctl_rules(scmp_filter_ctx ctx, sh_error **err)
{
        static const uint64_t requests[] = {TIOCSTI, TIOCLINUX};

        for (size_t i = 0; i < ARRAY_SIZE(requests); i++) {
                struct scmp_arg_cmp a = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, requests[i]);
                int r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &a, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* personality(2) outside the allowed values. A deny list can only OR single compares, so
 * the refused set is covered by rules "bit b set and bit c clear" (one masked compare
 * each): b runs over every bit outside PERSONA_ALLOWED_BITS and points to the next such
 * bit in a cycle, and the first one also points to each allowed bit. If a value has any
 * bit outside the allowed ones set and is not 0xffffffff, following the cycle from that
 * bit must reach a clear bit, so some rule matches; the allowed values match none. 32
 * rules instead of one per pair. The kernel reads an unsigned int, and every mask stays
 * in the low 32 bits, so high bits change nothing. */
static int add_personality_rules(scmp_filter_ctx ctx, sh_error **err)
{
        unsigned other[32] = {0}, n_other = 0;

        for (unsigned bit = 0; bit < 32; bit++)
                if (!(PERSONA_ALLOWED_BITS & (1u << bit)))
                        other[n_other++] = bit;

        for (unsigned i = 0; i < n_other; i++) {
                uint32_t set = 1u << other[i];
                uint32_t clear = 1u << other[(i + 1) % n_other];
                struct scmp_arg_cmp a = SCMP_A0(SCMP_CMP_MASKED_EQ, set | clear, set);
                int r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "personality", 1, &a, err);
                if (r < 0)
                        return r;
        }
        for (unsigned bit = 0; bit < 32; bit++) {
                uint32_t set = 1u << other[0], clear = 1u << bit;
                struct scmp_arg_cmp a;
                int r;

                if (!(PERSONA_ALLOWED_BITS & clear))
                        continue;
                a = SCMP_A0(SCMP_CMP_MASKED_EQ, set | clear, set);
                r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "personality", 1, &a, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* AF_VSOCK is not confined by the network namespace: in a VM (Firecracker, Kata, cloud
 * nodes) it reaches the hypervisor host's services although the sandbox has loopback only.
 * EAFNOSUPPORT is what a kernel without vsock answers, so programs degrade normally. The
 * kernel reads the family as an int: the compare masks to 32 bits so that high bits set
 * in the register cannot dodge it. On i386, socket(2) can also be reached through
 * socketcall(2), whose arguments are in memory and invisible to seccomp; libseccomp
 * therefore turns this rule into "socketcall(SYS_SOCKET, ...) refused" for that ABI
 * (32-bit programs using socketcall cannot create sockets; the direct i386 socket syscall
 * is filtered by family like the 64-bit one). */
static int add_socket_rules(scmp_filter_ctx ctx, sh_error **err)
{
        struct scmp_arg_cmp vsock = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, AF_VSOCK);

        return add_rule(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 1, &vsock, err);
}

/* Serialise the filter through a memfd (libseccomp 2.5 can only export to an fd) into a
 * buffer we own, so the child needs nothing but a pointer. */
static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *prog, sh_error **err)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ struct sock_filter *buf = NULL;
        struct stat st;
        size_t size, done = 0;
        int r;

        fd = memfd_create("sh-seccomp", MFD_CLOEXEC);
        if (fd < 0)
                return sh_error_make(err, errno, "seccomp: memfd_create");
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return sh_error_make(err, -r, "seccomp: exporting BPF");
        if (fstat(fd, &st) < 0)
                return sh_error_make(err, errno, "seccomp: fstat of exported BPF");
        size = (size_t)st.st_size;
        if (size == 0 || size % sizeof(struct sock_filter) != 0 ||
            size / sizeof(struct sock_filter) > BPF_MAXINSNS)
                return sh_error_make(err, EINVAL, "seccomp: exported BPF has bad size %zu", size);
        buf = malloc(size);
        if (!buf)
                return sh_error_make(err, ENOMEM, "seccomp: allocating BPF buffer");
        while (done < size) {
                ssize_t n = pread(fd, (char *)buf + done, size - done, (off_t)done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return sh_error_make(err, errno, "seccomp: reading exported BPF");
                if (n == 0)
                        return sh_error_make(err, EIO, "seccomp: exported BPF truncated");
                done += (size_t)n;
        }
        prog->len = (unsigned short)(size / sizeof(struct sock_filter));
        prog->filter = TAKE_PTR(buf);
        return 0;
}

static void ctx_releasep(scmp_filter_ctx *ctx)
{
        if (*ctx)
                seccomp_release(*ctx);
}

int sh_seccomp_build(sh_seccomp **ret, sh_error **err)
{
        __attribute__((cleanup(ctx_releasep))) scmp_filter_ctx ctx = NULL;
        _cleanup_free_ sh_seccomp *s = NULL;
        static const uint32_t extra_arches[] = {SCMP_ARCH_X86_64, SCMP_ARCH_X86, SCMP_ARCH_X32};
        int r;

        *ret = NULL;
        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return sh_error_make(err, ENOMEM, "seccomp: seccomp_init");
        /* The native ABI is already in the filter; the others must be added explicitly or
         * a process could reach the same kernel code through another syscall table. */
        for (size_t i = 0; i < ARRAY_SIZE(extra_arches); i++) {
                r = seccomp_arch_add(ctx, extra_arches[i]);
                if (r < 0 && r != -EEXIST)
                        return sh_error_make(err, -r, "seccomp: adding arch 0x%x", extra_arches[i]);
        }
        /* The filter is loaded by our own code in the child, never by libseccomp; do not
         * let an accidental seccomp_load() set no_new_privs behind our back. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r < 0)
                return sh_error_make(err, -r, "seccomp: clearing CTL_NNP");
        /* A binary search over syscall numbers instead of a linear chain: every syscall
         * of every sandboxed process walks this filter. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
        if (r < 0)
                return sh_error_make(err, -r, "seccomp: enabling binary-tree optimisation");

        r = add_deny_always(ctx, err);
        if (r >= 0)
                r = add_namespace_rules(ctx, err);
        if (r >= 0)
                r = add_ioctl_rules(ctx, err);
        if (r >= 0)
                r = add_personality_rules(ctx, err);
        if (r >= 0)
                r = add_socket_rules(ctx, err);
        if (r < 0)
                return r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return sh_error_make(err, ENOMEM, "seccomp: allocating filter");
        r = export_bpf(ctx, &s->prog, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

int sh_seccomp_export(void *ctx, sh_seccomp **ret, sh_error **err)
{
        _cleanup_free_ sh_seccomp *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return sh_error_make(err, ENOMEM, "seccomp: allocating filter");
        r = export_bpf(ctx, &s->prog, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

void sh_seccomp_free(sh_seccomp *s)
{
        if (!s)
                return;
        free(s->prog.filter);
        free(s);
}

const struct sock_fprog *sh_seccomp_prog(const sh_seccomp *s)
{
        return s ? &s->prog : NULL;
}

int sh_seccomp_load(const struct sock_fprog *prog)
{
        /* Raw syscalls only: this runs in a forked child of the daemon (async-signal-safe
         * context). No TSYNC flag: the child is single-threaded. The seccomp(2) syscall
         * is preferred; prctl is the pre-3.17 spelling of the same operation. */
        if (!prog || !prog->filter || prog->len == 0)
                return -EINVAL;
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) == 0)
                return 0;
        if (errno != ENOSYS)
                return -errno;
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0) == 0)
                return 0;
        return -errno;
}
