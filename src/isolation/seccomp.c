/* seccomp.c: the sandbox syscall filter: a guard and libseccomp rules, loaded by the child. */
#include "sh/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/fs.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sh/syscalls.h"

/*
 * Policy. One BPF program in two parts, run in order by the kernel for every syscall:
 *
 * 1. The guard: unknown syscalls answer ENOSYS. Generated here from libseccomp's syscall
 *    table (enumerated per ABI with seccomp_syscall_resolve_num_arch): for each ABI, the
 *    ranges of numbers libseccomp knows, up to SH_SECCOMP_LAST_REVIEWED_NR. A number outside
 *    them (a syscall newer than the table, one above the reviewed number even after a
 *    libseccomp upgrade, one no kernel has) never reaches the kernel. ENOSYS is what an
 *    older kernel answers, and every libc fallback (clone3 -> clone, faccessat2 ->
 *    faccessat, close_range -> a loop ...) keys on it, so ordinary programs keep working.
 *    The guard is ranges rather than one libseccomp rule per allowed syscall because the
 *    kernel converts and JITs the program again at every exec: libseccomp's allow list of
 *    the same table was 2,256 instructions and took 510 us to load, 4x this program.
 *
 * 2. libseccomp's filter, default allow, refusing what the guard let through: a deny list
 *    modelled on Docker's default profile (moby/profiles/seccomp/default.json) for an
 *    unprivileged container, plus the interfaces that have been the entry point of most
 *    recent kernel privilege escalations (EPERM); arguments of clone/unshare (namespace
 *    flags), ioctl (terminal injection, project quota), personality; and socket families
 *    as an allow list (every family but four answers EAFNOSUPPORT).
 *
 * The process also has no capabilities, no new user namespace and no_new_privs (caps.c),
 * so the filter shrinks the kernel attack surface; it is not the only wall.
 *
 * Both parts cover three ABIs: x86_64, i386 (int $0x80 from a 64-bit process reaches the
 * 32-bit syscall table, with other numbers) and x32 (native numbers | 0x40000000). Any
 * other architecture token passes the guard and is killed by libseccomp's filter (its
 * default bad-arch action), so no ABI bypasses either part.
 */

/* Syscalls pass the guard up to this number (x86_64 numbering; since Linux 5.1 a new
 * syscall has the same number on every ABI). 456 is futex_requeue (Linux 6.7), the last
 * one in Debian 12's libseccomp 2.5.4 table and the last one reviewed for this filter.
 * Above it (statmount, listmount, lsm_*_self_attr, mseal, *xattrat, open_tree_attr,
 * file_getattr, file_setattr ...) everything answers ENOSYS. Before raising it, review each
 * new syscall: file_setattr (469) must stay refused like ioctl(FS_IOC_FSSETXATTR) (it sets
 * the project id that holds the disk quota), open_tree_attr (467) like open_tree. */
#define SH_SECCOMP_LAST_REVIEWED_NR 456

/* Numbers probed per ABI when reading libseccomp's table (x32 adds its 0x40000000 bit;
 * its own calls end at 547). */
#define SH_SECCOMP_PROBE_NR 1024

/* Most ranges of known numbers one guard block may hold (x32 has 34 today: the calls
 * only the 64-bit ABI has are holes in it); two instructions each, so every conditional
 * jump of a block stays within cBPF's 255. */
#define SH_SECCOMP_MAX_RANGES 100

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

/* ioctl requests refused with EPERM. TIOCSTI pushes input into a terminal shared with the
 * host (CVE-2017-5226, bubblewrap); TIOCLINUX can do the same through the console selection
 * (CVE-2023-1523). FS_IOC_FSSETXATTR sets a file's project id, and FS_IOC_SETFLAGS (and its
 * 32-bit spelling, which the compat handler maps to it) can clear a directory's
 * PROJINHERIT flag so that new files fall into project 0: a file's owner may do both from
 * the initial user namespace, where sandbox processes live, and so leave the per-sandbox
 * project quota. FS_IOC_FSGETXATTR and FS_IOC_GETFLAGS stay allowed. Each number is the
 * same for the native and the compat handlers (struct fsxattr has no pointer or long). */
static const uint32_t ioctl_refused[] = {
        TIOCSTI, TIOCLINUX, FS_IOC_FSSETXATTR, FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS,
};

/* Socket families a sandbox may create: local sockets, IPv4 and IPv6 (its network
 * namespace has loopback only), and netlink for NETLINK_ROUTE (glibc's getifaddrs and
 * getaddrinfo with AI_ADDRCONFIG, if_nameindex, `ip addr`). Every other family answers
 * EAFNOSUPPORT, what a kernel without it says: AF_PACKET, AF_ALG (a large crypto attack
 * surface open to unprivileged users), AF_KEY, AF_XDP, AF_VSOCK (not confined by network
 * namespaces: it reaches the hypervisor host's services), AF_BLUETOOTH, AF_CAN, AF_TIPC,
 * AF_RDS, AF_LLC, AF_SMC, AF_QIPCRTR, AF_NFC, AF_MCTP and all the rest, most of which would
 * also autoload a kernel module. Refused before any capability check, so the code behind
 * them is never reached. Sorted (add_complement_rules needs it). */
static const uint32_t socket_families[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
static const uint32_t netlink_protocols[] = {NETLINK_ROUTE};

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

/* A masked compare of the low 32 bits of an argument. The kernel reads every argument
 * these rules look at (flags, request, family, protocol, persona) as a 32-bit int, while
 * the register is 64 bits wide on x86_64 and x32: comparing all 64 bits would let a value
 * with high bits set dodge an equality test (TIOCSTI | 1 << 32, CVE-2019-10063 in flatpak)
 * and still reach the same kernel code. */
static struct scmp_arg_cmp low32_masked(unsigned arg, uint32_t mask, uint32_t value)
{
        struct scmp_arg_cmp a = {arg, SCMP_CMP_MASKED_EQ, mask, value};
        return a;
}

/* Rules with `action` for every value of argument `arg` whose low 32 bits are not in `v`
 * (sorted, distinct), after the compare in `pre` (at most one, on another argument). A
 * libseccomp rule ANDs one compare per argument and rules OR, so the complement of a set
 * is written as the branches leaving its binary trie: below each prefix shared by members
 * of `v` whose next bit is c, every value with that prefix and the other bit is outside,
 * one masked compare (top bits) each. At most 32 rules per member, exact: a value in `v`
 * matches none, any other matches one. Recursion depth is the depth in bits, at most 32. */
static int add_complement_rules(scmp_filter_ctx ctx, uint32_t action, const char *name,
                                const struct scmp_arg_cmp *pre, unsigned arg, const uint32_t *v,
                                size_t n, uint32_t prefix, unsigned depth, sh_error **err)
{
        unsigned bit;
        uint32_t mask;
        size_t split = 0;

        if (depth == 0)
                for (size_t i = 1; i < n; i++)
                        if (v[i] <= v[i - 1])
                                return sh_error_make(err, EINVAL, "seccomp: %s values not sorted",
                                                     name);
        if (depth == 32)
                return 0; /* the prefix is a member of v */
        bit = 31 - depth;
        mask = (uint32_t)(0xffffffffu << bit);
        while (split < n && !(v[split] & (1u << bit)))
                split++;
        for (unsigned c = 0; c < 2; c++) {
                const uint32_t *sub = c ? v + split : v;
                size_t n_sub = c ? n - split : split;
                uint32_t p = prefix | (c ? 1u << bit : 0);
                int r;

                if (n_sub > 0) {
                        r = add_complement_rules(ctx, action, name, pre, arg, sub, n_sub, p,
                                                 depth + 1, err);
                } else {
                        struct scmp_arg_cmp args[2];
                        unsigned k = 0;

                        if (pre)
                                args[k++] = *pre;
                        args[k++] = low32_masked(arg, mask, p);
                        r = add_rule(ctx, action, name, k, args, err);
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

/* clone/unshare with any CLONE_NEW* flag. One rule per flag, since the rules of one
 * syscall are OR'd and a masked compare tests one bit pattern. clone(2) reads only the low
 * 32 bits of its flags (the kernel applies lower_32_bits()), and these masks sit in the
 * low 32 bits, so setting high bits cannot hide a flag. CLONE_NEWTIME (0x80) lies in
 * clone's exit-signal byte and is only a namespace flag for unshare and clone3. */
static int add_namespace_rules(scmp_filter_ctx ctx, sh_error **err)
{
        for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
                struct scmp_arg_cmp a =
                        low32_masked(0, (uint32_t)ns_flags[i], (uint32_t)ns_flags[i]);
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

/* ioctl: the requests of ioctl_refused answer EPERM, whatever the high 32 bits. */
static int add_ioctl_rules(scmp_filter_ctx ctx, sh_error **err)
{
        for (size_t i = 0; i < ARRAY_SIZE(ioctl_refused); i++) {
                struct scmp_arg_cmp a = low32_masked(1, 0xffffffffu, ioctl_refused[i]);
                int r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &a, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* fcntl(F_SETLEASE): a lease holder delays every other open(2) of its file by the lease break
 * time (45 s) unless it gives the lease back, which a sandbox frozen for a persist cannot do:
 * a sandbox holding leases on many of its files would keep rsync, and a persist slot, for
 * the job's whole timeout. Ordinary programs never need leases (Samba does). The command is
 * an unsigned int in the kernel: masked to 32 bits like ioctl's request. fcntl64 is the i386
 * spelling (absent on the other ABIs). */
static int add_fcntl_rules(scmp_filter_ctx ctx, sh_error **err)
{
        static const char *const calls[] = {"fcntl", "fcntl64"};
        struct scmp_arg_cmp a = low32_masked(1, 0xffffffffu, F_SETLEASE);

        for (size_t i = 0; i < ARRAY_SIZE(calls); i++) {
                int r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), calls[i], 1, &a, err);
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
                struct scmp_arg_cmp a = low32_masked(0, set | clear, set);
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
                a = low32_masked(0, set | clear, set);
                r = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), "personality", 1, &a, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* socket(2) and socketpair(2): every family outside socket_families answers EAFNOSUPPORT,
 * and netlink outside netlink_protocols EPROTONOSUPPORT. socketpair creates sockets of its
 * family like socket does (only AF_UNIX implements it among the allowed ones; the kernel
 * answers EOPNOTSUPP for the others), so it gets the same rules.
 *
 * On i386 both can also be reached through socketcall(2), whose arguments are in memory
 * and invisible to seccomp. libseccomp turns each socket rule into a rule for
 * socketcall(SYS_SOCKET, ...) too (and each socketpair rule into SYS_SOCKETPAIR), its
 * first compare replaced by the call number: the family rules thus refuse socketcall's
 * SOCKET and SOCKETPAIR calls whole (32-bit programs that create sockets through
 * socketcall, as Debian's i386 glibc does, have none), while its other calls (connect,
 * send ... on an existing socket) pass. The direct i386 socket calls (Linux 4.3+) are
 * filtered by family like the 64-bit ones. The family rules go in first: the netlink
 * rules' socketcall form then extends a refused chain and libseccomp drops it, where the
 * other order would be a conflict (-EEXIST). */
static int add_socket_rules(scmp_filter_ctx ctx, sh_error **err)
{
        static const char *const calls[] = {"socket", "socketpair"};
        struct scmp_arg_cmp netlink = low32_masked(0, 0xffffffffu, AF_NETLINK);
        int r = 0;

        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(calls); i++) {
                r = add_complement_rules(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), calls[i], NULL, 0,
                                         socket_families, ARRAY_SIZE(socket_families), 0, 0, err);
                if (r >= 0)
                        r = add_complement_rules(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), calls[i],
                                                 &netlink, 2, netlink_protocols,
                                                 ARRAY_SIZE(netlink_protocols), 0, 0, err);
        }
        return r;
}

/* A syscall number of `arch` passes the guard: libseccomp knows it, and it is not newer
 * than the review (names absent on x86_64 are old i386 calls: socketcall, _llseek, the
 * time64 family ...). */
static bool guard_passes(uint32_t arch, int nr)
{
        _cleanup_free_ char *name = seccomp_syscall_resolve_num_arch(arch, nr);

        return name && seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name) <=
                               SH_SECCOMP_LAST_REVIEWED_NR;
}

struct guard_block {
        uint32_t lo[SH_SECCOMP_MAX_RANGES], hi[SH_SECCOMP_MAX_RANGES];
        unsigned n;
};

/* Append the ranges of numbers of `arch` that pass the guard (ascending). */
static int guard_ranges(struct guard_block *b, uint32_t arch, sh_error **err)
{
        uint32_t base = arch == SCMP_ARCH_X32 ? 0x40000000u : 0;
        bool open = false;

        for (uint32_t i = 0; i <= SH_SECCOMP_PROBE_NR; i++) {
                bool pass = i < SH_SECCOMP_PROBE_NR && guard_passes(arch, (int)(base + i));

                if (pass && !open) {
                        if (b->n == SH_SECCOMP_MAX_RANGES)
                                return sh_error_make(err, E2BIG, "seccomp: too many ranges");
                        b->lo[b->n] = base + i;
                        open = true;
                } else if (!pass && open) {
                        b->hi[b->n++] = base + i - 1;
                        open = false;
                }
        }
        return 0;
}

#define GUARD_STMT(c, k)         ((struct sock_filter){(unsigned short)(c), 0, 0, (k)})
#define GUARD_JUMP(c, k, jt, jf) ((struct sock_filter){(unsigned short)(c), (jt), (jf), (k)})

/* One block at f[at]: load the number, then for each range "above it: next range; at or
 * above its start: pass, else ENOSYS"; after the last range ENOSYS. Passing jumps to
 * `next` (the start of libseccomp's program). Returns the block's length. */
static unsigned guard_emit_block(struct sock_filter *f, unsigned at, const struct guard_block *b,
                                 unsigned next)
{
        unsigned k = b->n, j = at;

        f[j++] = GUARD_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
        for (unsigned i = 0; i < k; i++) {
                unsigned char to_out = (unsigned char)(2 * (k - i) - 2);

                f[j++] = GUARD_JUMP(BPF_JMP | BPF_JGT | BPF_K, b->hi[i], 1, 0);
                f[j++] = GUARD_JUMP(BPF_JMP | BPF_JGE | BPF_K, b->lo[i], to_out + 1, to_out);
        }
        f[j++] = GUARD_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
        f[j] = GUARD_STMT(BPF_JMP | BPF_JA, next - j - 1);
        j++;
        return j - at;
}

/* The guard (part 1 of the policy). x86_64 and x32 share one audit arch token, and the x32
 * numbers sort after the native ones, so they form one block. */
static int build_guard(struct sock_filter **ret, unsigned *ret_len, sh_error **err)
{
        struct guard_block native = {.n = 0}, i386 = {.n = 0};
        _cleanup_free_ struct sock_filter *f = NULL;
        unsigned len, at_i386, next;
        int r;

        r = guard_ranges(&native, SCMP_ARCH_X86_64, err);
        if (r >= 0)
                r = guard_ranges(&native, SCMP_ARCH_X32, err);
        if (r >= 0)
                r = guard_ranges(&i386, SCMP_ARCH_X86, err);
        if (r < 0)
                return r;
        if (native.n == 0 || i386.n == 0)
                return sh_error_make(err, EINVAL, "seccomp: libseccomp's syscall table is empty");
        at_i386 = 3 + 3 + 2 * native.n;
        next = at_i386 + 3 + 2 * i386.n;
        /* cBPF conditional jumps reach 255 instructions ahead. */
        if (next - 3 > 255)
                return sh_error_make(err, E2BIG, "seccomp: guard too long (%u)", next);
        f = calloc(next, sizeof(*f));
        if (!f)
                return sh_error_make(err, ENOMEM, "seccomp: allocating the guard");
        f[0] = GUARD_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
        f[1] = GUARD_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
        /* Any other arch goes on to libseccomp's program, which kills it. */
        f[2] = GUARD_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_I386, (unsigned char)(at_i386 - 3),
                          (unsigned char)(next - 3));
        len = 3 + guard_emit_block(f, 3, &native, next);
        len += guard_emit_block(f, len, &i386, next);
        if (len != next)
                return sh_error_make(err, EFAULT, "seccomp: guard layout %u != %u", len, next);
        *ret = TAKE_PTR(f);
        *ret_len = len;
        return 0;
}

/* Serialise libseccomp's filter through a memfd (libseccomp 2.5 can only export to an fd)
 * into a buffer we own, after the guard, so the child needs nothing but a pointer. */
static int export_bpf(scmp_filter_ctx ctx, const struct sock_filter *guard, unsigned guard_len,
                      struct sock_fprog *prog, sh_error **err)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ struct sock_filter *buf = NULL;
        struct stat st;
        size_t size, done = 0, head = guard_len * sizeof(struct sock_filter);
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
            (size + head) / sizeof(struct sock_filter) > BPF_MAXINSNS)
                return sh_error_make(err, EINVAL, "seccomp: exported BPF has bad size %zu", size);
        buf = malloc(head + size);
        if (!buf)
                return sh_error_make(err, ENOMEM, "seccomp: allocating BPF buffer");
        if (head)
                memcpy(buf, guard, head);
        while (done < size) {
                ssize_t n = pread(fd, (char *)buf + head + done, size - done, (off_t)done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return sh_error_make(err, errno, "seccomp: reading exported BPF");
                if (n == 0)
                        return sh_error_make(err, EIO, "seccomp: exported BPF truncated");
                done += (size_t)n;
        }
        prog->len = (unsigned short)((head + size) / sizeof(struct sock_filter));
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
        _cleanup_free_ struct sock_filter *guard = NULL;
        static const uint32_t arches[] = {SCMP_ARCH_X86_64, SCMP_ARCH_X86, SCMP_ARCH_X32};
        unsigned guard_len = 0;
        int r;

        *ret = NULL;
        r = build_guard(&guard, &guard_len, err);
        if (r < 0)
                return r;
        /* Default allow: the guard in front already answers ENOSYS for unknown numbers. */
        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return sh_error_make(err, ENOMEM, "seccomp: seccomp_init");
        /* The native ABI is already in the filter; the others must be added explicitly or
         * a process could reach the same kernel code through another syscall table. */
        for (size_t i = 0; i < ARRAY_SIZE(arches); i++) {
                r = seccomp_arch_add(ctx, arches[i]);
                if (r < 0 && r != -EEXIST)
                        return sh_error_make(err, -r, "seccomp: adding arch 0x%x", arches[i]);
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
                r = add_fcntl_rules(ctx, err);
        if (r >= 0)
                r = add_personality_rules(ctx, err);
        if (r >= 0)
                r = add_socket_rules(ctx, err);
        if (r < 0)
                return r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return sh_error_make(err, ENOMEM, "seccomp: allocating filter");
        r = export_bpf(ctx, guard, guard_len, &s->prog, err);
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

/* ---- filters for helper children ------------------------------------------------------- */

/* A context for the native ABI only: a system call through another one (i386's int $0x80,
 * x32) kills the process, whatever the rules say. The filter is loaded by our own code in
 * the child, never by libseccomp: no no_new_privs behind our back. */
static scmp_filter_ctx helper_ctx(uint32_t def, sh_error **err)
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

static int export_new(scmp_filter_ctx ctx, sh_seccomp **ret, sh_error **err)
{
        _cleanup_free_ sh_seccomp *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return sh_error_make(err, ENOMEM, "seccomp: allocating filter");
        r = export_bpf(ctx, NULL, 0, &s->prog, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

int sh_seccomp_build_allowlist(const sh_seccomp_allow *rules, size_t n, int deny_errno,
                               sh_seccomp **ret, sh_error **err)
{
        __attribute__((cleanup(ctx_releasep))) scmp_filter_ctx ctx = NULL;
        int r;

        *ret = NULL;
        if (deny_errno <= 0 || deny_errno > 4095)
                return sh_error_make(err, EINVAL, "seccomp: bad errno %d", deny_errno);
        ctx = helper_ctx(SCMP_ACT_ERRNO((uint32_t)deny_errno), err);
        if (!ctx)
                return -1;
        for (size_t i = 0; i < n; i++) {
                struct scmp_arg_cmp a;

                if (rules[i].arg > 5)
                        return sh_error_make(err, EINVAL, "seccomp: %s: bad argument index",
                                             rules[i].name);
                a = (struct scmp_arg_cmp){.arg = rules[i].arg < 0 ? 0 : (unsigned)rules[i].arg,
                                          .op = SCMP_CMP_MASKED_EQ,
                                          .datum_a = rules[i].mask,
                                          .datum_b = rules[i].value};
                r = add_rule(ctx, SCMP_ACT_ALLOW, rules[i].name, rules[i].arg < 0 ? 0 : 1, &a, err);
                if (r < 0)
                        return r;
        }
        return export_new(ctx, ret, err);
}

int sh_seccomp_build_unix_only(sh_seccomp **ret, sh_error **err)
{
        __attribute__((cleanup(ctx_releasep))) scmp_filter_ctx ctx = NULL;
        /* Any family but AF_UNIX: the full 64-bit register is compared, so a family with
         * high bits set is refused too (the kernel would read the low 32 bits). */
        struct scmp_arg_cmp not_unix = SCMP_A0(SCMP_CMP_NE, AF_UNIX);
        int r;

        *ret = NULL;
        ctx = helper_ctx(SCMP_ACT_ALLOW, err);
        if (!ctx)
                return -1;
        r = add_rule(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 1, &not_unix, err);
        if (r >= 0)
                r = add_rule(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socketpair", 1, &not_unix, err);
        if (r < 0)
                return r;
        return export_new(ctx, ret, err);
}
