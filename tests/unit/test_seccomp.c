/* test_seccomp.c: the filter refuses dangerous calls on every ABI; ordinary programs still run. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sh/seccomp.h"

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Built once in main(); every test's forked children inherit it. */
static sh_seccomp *filter;

/* What a probe observed: the raw return value and errno (0 on success). */
struct outcome {
        long ret;
        int err;
};

typedef struct outcome (*probe_fn)(void);

static struct outcome result(long ret)
{
        struct outcome o = {ret, ret < 0 ? errno : 0};
        return o;
}

/* Fork a child, optionally load the filter (after no_new_privs, as the sandbox child does),
 * run the probe and send its outcome back over a pipe. The child leaves its session first
 * so that nothing a probe does can reach the terminal of whoever runs the tests. */
static struct outcome run_probe(probe_fn fn, bool filtered)
{
        struct outcome o = {0, 0};
        int p[2], status = 0;
        pid_t pid;
        ssize_t n;

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                struct outcome c;

                close(p[0]);
                (void)setsid();
                if (filtered) {
                        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                                _exit(90);
                        if (sh_seccomp_load(sh_seccomp_prog(filter)) < 0)
                                _exit(91);
                }
                c = fn();
                if (write(p[1], &c, sizeof(c)) != (ssize_t)sizeof(c))
                        _exit(92);
                _exit(0);
        }
        close(p[1]);
        n = read(p[0], &o, sizeof(o));
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status), "probe child killed by signal %d",
                      WIFSIGNALED(status) ? WTERMSIG(status) : -1);
        ck_assert_msg(WEXITSTATUS(status) == 0, "probe child failed setup (exit %d)",
                      WEXITSTATUS(status));
        ck_assert_int_eq(n, (ssize_t)sizeof(o));
        return o;
}

/* The filtered call fails with `err`, and the same call without the filter does not: the
 * refusal comes from the filter, not from missing privilege or bad arguments. */
static void expect_refused(probe_fn fn, int err, const char *what)
{
        struct outcome with = run_probe(fn, true);
        struct outcome without = run_probe(fn, false);

        ck_assert_msg(with.ret == -1 && with.err == err,
                      "%s under the filter: ret %ld errno %d (%s), wanted errno %d", what, with.ret,
                      with.err, strerror(with.err), err);
        ck_assert_msg(!(without.ret == -1 && without.err == err),
                      "%s fails with errno %d even without the filter: the test proves nothing",
                      what, err);
}

static void expect_works(probe_fn fn, const char *what)
{
        struct outcome o = run_probe(fn, true);

        ck_assert_msg(o.ret >= 0 && o.err == 0, "%s under the filter: ret %ld errno %d (%s)", what,
                      o.ret, o.err, strerror(o.err));
}

/* ---- native (x86_64) refusals ---- */

static struct outcome probe_unshare_newuser(void)
{
        return result(unshare(CLONE_NEWUSER));
}

START_TEST(test_unshare_newuser_refused_with_eperm)
{
        expect_refused(probe_unshare_newuser, EPERM, "unshare(CLONE_NEWUSER)");
}
END_TEST

static const int all_ns_flags[] = {CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                   CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET, CLONE_NEWTIME};

static struct outcome probe_unshare_each_ns_flag(void)
{
        for (size_t i = 0; i < sizeof(all_ns_flags) / sizeof(all_ns_flags[0]); i++) {
                if (unshare(all_ns_flags[i]) == 0 || errno != EPERM) {
                        struct outcome o = {(long)i, errno ? errno : -1};
                        return o;
                }
        }
        return result(0);
}

START_TEST(test_unshare_with_any_namespace_flag_refused)
{
        expect_works(probe_unshare_each_ns_flag, "every unshare(CLONE_NEW*) refused");
}
END_TEST

/* A raw clone that would create a user namespace; high bits set to show they cannot hide
 * the flag (the kernel ignores them). If the filter let it through, the new child exits. */
static struct outcome probe_clone_newuser_high_bits(void)
{
        long r = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD) | (1ul << 40), 0, 0, 0,
                         0);
        int e = errno;

        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        errno = e;
        return result(r);
}

START_TEST(test_clone_with_newuser_refused_even_with_high_bits)
{
        expect_refused(probe_clone_newuser_high_bits, EPERM, "clone(CLONE_NEWUSER|1<<40)");
}
END_TEST

static struct outcome probe_setns(void)
{
        int fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
        long r = syscall(SYS_setns, fd, 0);
        struct outcome o = result(r);

        close(fd);
        return o;
}

START_TEST(test_setns_refused)
{
        expect_refused(probe_setns, EPERM, "setns(own uts ns)");
}
END_TEST

/* The target does not exist, so without the filter mount fails with ENOENT and nothing is
 * mounted whatever happens. */
static struct outcome probe_mount(void)
{
        return result(mount("none", "/nonexistent-sh-test", "tmpfs", 0, NULL));
}

START_TEST(test_mount_refused_with_eperm)
{
        expect_refused(probe_mount, EPERM, "mount");
}
END_TEST

static struct outcome probe_keyctl(void)
{
        return result(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
}

START_TEST(test_keyctl_refused_with_eperm)
{
        expect_refused(probe_keyctl, EPERM, "keyctl(GET_KEYRING_ID)");
}
END_TEST

static struct outcome probe_bpf(void)
{
        return result(syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, NULL, 0));
}

START_TEST(test_bpf_refused_with_eperm)
{
        expect_refused(probe_bpf, EPERM, "bpf");
}
END_TEST

/* PEEKUSER on a process we do not trace: ESRCH without the filter. */
static struct outcome probe_ptrace(void)
{
        return result(ptrace(PTRACE_PEEKUSER, getppid(), 0, 0));
}

START_TEST(test_ptrace_refused_with_eperm)
{
        expect_refused(probe_ptrace, EPERM, "ptrace(PEEKUSER)");
}
END_TEST

static struct outcome probe_io_uring_setup(void)
{
        return result(syscall(SYS_io_uring_setup, 0, NULL));
}

START_TEST(test_io_uring_setup_refused_with_eperm)
{
        expect_refused(probe_io_uring_setup, EPERM, "io_uring_setup");
}
END_TEST

static struct outcome probe_userfaultfd(void)
{
        return result(syscall(SYS_userfaultfd, O_CLOEXEC));
}

START_TEST(test_userfaultfd_refused_with_eperm)
{
        expect_refused(probe_userfaultfd, EPERM, "userfaultfd");
}
END_TEST

static struct outcome probe_perf_event_open(void)
{
        return result(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
}

START_TEST(test_perf_event_open_refused_with_eperm)
{
        expect_refused(probe_perf_event_open, EPERM, "perf_event_open");
}
END_TEST

/* /dev/null is not a terminal: without the filter TIOCSTI is ENOTTY. */
static struct outcome ioctl_on_null(unsigned long request)
{
        char c = 'x';
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        struct outcome o = result(syscall(SYS_ioctl, fd, request, &c));

        close(fd);
        return o;
}

static struct outcome probe_tiocsti(void)
{
        return ioctl_on_null(TIOCSTI);
}

static struct outcome probe_tiocsti_high_bits(void)
{
        return ioctl_on_null(TIOCSTI | (1ul << 32));
}

static struct outcome probe_tioclinux(void)
{
        return ioctl_on_null(TIOCLINUX);
}

START_TEST(test_ioctl_tiocsti_refused_with_eperm)
{
        expect_refused(probe_tiocsti, EPERM, "ioctl(TIOCSTI)");
}
END_TEST

START_TEST(test_ioctl_tiocsti_with_high_bits_still_refused)
{
        expect_refused(probe_tiocsti_high_bits, EPERM, "ioctl(TIOCSTI | 1<<32)");
}
END_TEST

START_TEST(test_ioctl_tioclinux_refused_with_eperm)
{
        expect_refused(probe_tioclinux, EPERM, "ioctl(TIOCLINUX)");
}
END_TEST

static struct outcome probe_clone3(void)
{
        return result(syscall(SYS_clone3, NULL, 0));
}

START_TEST(test_clone3_answers_enosys)
{
        expect_refused(probe_clone3, ENOSYS, "clone3");
}
END_TEST

static struct outcome probe_personality_no_randomize(void)
{
        return result(personality(ADDR_NO_RANDOMIZE));
}

static struct outcome probe_personality_read_implies_exec_high(void)
{
        return result(syscall(SYS_personality, READ_IMPLIES_EXEC | (1ul << 33)));
}

/* Every bit set except one allowed bit: only the rules that point at the allowed bits
 * catch these two. */
static struct outcome probe_personality_all_but_linux32(void)
{
        return result(syscall(SYS_personality, 0xfffffffful & ~(unsigned long)PER_LINUX32));
}

static struct outcome probe_personality_all_but_uname26(void)
{
        return result(syscall(SYS_personality, 0xfffffffful & ~(unsigned long)UNAME26));
}

START_TEST(test_personality_disabling_aslr_refused)
{
        expect_refused(probe_personality_no_randomize, EPERM, "personality(ADDR_NO_RANDOMIZE)");
        expect_refused(probe_personality_read_implies_exec_high, EPERM,
                       "personality(READ_IMPLIES_EXEC | 1<<33)");
        expect_refused(probe_personality_all_but_linux32, EPERM, "personality(~PER_LINUX32)");
        expect_refused(probe_personality_all_but_uname26, EPERM, "personality(~UNAME26)");
}
END_TEST

static struct outcome probe_personality_allowed(void)
{
        static const unsigned long ok[] = {0xffffffffu, PER_LINUX, PER_LINUX32, UNAME26,
                                           PER_LINUX32 | UNAME26};

        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                if (syscall(SYS_personality, ok[i]) < 0) {
                        struct outcome o = {-(long)i - 1, errno};
                        return o;
                }
        }
        return result(syscall(SYS_personality, PER_LINUX));
}

static bool persona_allowed(uint32_t v)
{
        return v == 0xffffffffu || (v & ~(uint32_t)(PER_LINUX32 | UNAME26)) == 0;
}

/* One value: refused exactly when outside Docker's set. */
static bool persona_checked(uint32_t v)
{
        long r = syscall(SYS_personality, (unsigned long)v);
        bool refused = r == -1 && errno == EPERM;

        if (!refused)
                syscall(SYS_personality, PER_LINUX);
        return refused != persona_allowed(v);
}

/* Single bits, all-but-one bits, their neighbours and 200000 pseudo-random values: the
 * 32 masked compares of the filter refuse exactly the complement of the allowed set. */
static struct outcome probe_personality_sweep(void)
{
        uint32_t x = 0x9e3779b9u;

        for (unsigned b = 0; b < 32; b++) {
                uint32_t one = 1u << b;
                if (!persona_checked(one) || !persona_checked(~one) ||
                    !persona_checked(one | PER_LINUX32) || !persona_checked(~one & ~UNAME26)) {
                        struct outcome o = {b, -1};
                        return o;
                }
        }
        for (unsigned i = 0; i < 200000; i++) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if (!persona_checked(x) || !persona_checked(x & (PER_LINUX32 | UNAME26 | 0x1))) {
                        struct outcome o = {(long)x, -1};
                        return o;
                }
        }
        return result(0);
}

START_TEST(test_personality_refuses_exactly_values_outside_docker_set)
{
        expect_works(probe_personality_sweep, "personality sweep");
}
END_TEST

START_TEST(test_personality_default_values_and_query_allowed)
{
        expect_works(probe_personality_allowed, "personality(query / Docker's values)");
}
END_TEST

static struct outcome probe_vsock(void)
{
        return result(socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0));
}

/* The kernel reads the family as an int, so high bits must not hide AF_VSOCK. */
static struct outcome probe_vsock_high_bits(void)
{
        return result(syscall(SYS_socket, AF_VSOCK | (1ul << 32), SOCK_STREAM | SOCK_CLOEXEC, 0));
}

START_TEST(test_vsock_socket_refused)
{
        struct outcome o = run_probe(probe_vsock, true);

        /* Without the filter the answer depends on the machine having vsock, so only the
         * filtered result is checked. */
        ck_assert_int_eq(o.ret, -1);
        ck_assert_int_eq(o.err, EAFNOSUPPORT);
        o = run_probe(probe_vsock_high_bits, true);
        ck_assert_int_eq(o.ret, -1);
        ck_assert_int_eq(o.err, EAFNOSUPPORT);
}
END_TEST

/* The rest of the deny list, each with arguments that would be harmless (bad fd, NULL,
 * missing path, bad magic) if the filter failed to refuse it. */
struct denied_call {
        const char *name;
        long nr;
        long a[6];
        unsigned path_args; /* bit i set: argument i is NONEXISTENT (a path that is absent) */
};

#define NONEXISTENT "/nonexistent-sh-test"

static const struct denied_call denied_calls[] = {
        {"umount2", SYS_umount2, {0, 0}, 0x1},
        {"pivot_root", SYS_pivot_root, {0, 0}, 0x3},
        {"chroot", SYS_chroot, {0}, 0x1},
        {"move_mount", SYS_move_mount, {-1, 0, -1, 0, 0}, 0},
        {"open_tree", SYS_open_tree, {-1, 0, 0}, 0x2},
        {"fsopen", SYS_fsopen, {0, 0}, 0},
        {"fsconfig", SYS_fsconfig, {-1, 0, 0, 0, 0}, 0},
        {"fsmount", SYS_fsmount, {-1, 0, 0}, 0},
        {"fspick", SYS_fspick, {-1, 0, 0}, 0x2},
        {"mount_setattr", SYS_mount_setattr, {-1, 0, 0, 0, 0}, 0},
        {"add_key", SYS_add_key, {0, 0, 0, 0, 0}, 0},
        {"request_key", SYS_request_key, {0, 0, 0, 0}, 0},
        {"io_uring_enter", SYS_io_uring_enter, {-1, 0, 0, 0, 0, 0}, 0},
        {"io_uring_register", SYS_io_uring_register, {-1, 0, 0, 0}, 0},
        {"process_vm_readv", SYS_process_vm_readv, {1, 0, 0, 0, 0, 0}, 0},
        {"process_vm_writev", SYS_process_vm_writev, {1, 0, 0, 0, 0, 0}, 0},
        {"pidfd_getfd", SYS_pidfd_getfd, {-1, -1, 0}, 0},
        {"kcmp", SYS_kcmp, {0, 0, 99, 0, 0}, 0},
        {"kexec_load", SYS_kexec_load, {0, 0, 0, 0xdead0000L}, 0},
        {"kexec_file_load", SYS_kexec_file_load, {-1, -1, 0, 0, 0xdead0000L}, 0},
        {"init_module", SYS_init_module, {0, 0, 0}, 0},
        {"finit_module", SYS_finit_module, {-1, 0, 0}, 0},
        {"delete_module", SYS_delete_module, {0, 0}, 0},
        {"reboot", SYS_reboot, {0, 0, 0, 0}, 0},
        {"swapon", SYS_swapon, {0, 0}, 0},
        {"swapoff", SYS_swapoff, {0}, 0},
        {"acct", SYS_acct, {0}, 0x1},
        {"quotactl", SYS_quotactl, {0, 0, 0, 0}, 0},
        {"syslog", SYS_syslog, {10 /* SIZE_BUFFER: read-only */, 0, 0}, 0},
        {"settimeofday", SYS_settimeofday, {0, 0}, 0},
        {"clock_settime", SYS_clock_settime, {-1, 0}, 0},
        {"adjtimex", SYS_adjtimex, {0}, 0},
        {"clock_adjtime", SYS_clock_adjtime, {-1, 0}, 0},
        {"open_by_handle_at", SYS_open_by_handle_at, {-1, 0, 0}, 0},
        {"name_to_handle_at", SYS_name_to_handle_at, {-1, 0, 0, 0, 0}, 0},
        {"iopl", SYS_iopl, {0}, 0},
        {"ioperm", SYS_ioperm, {0, 0, 0}, 0},
        {"lookup_dcookie", SYS_lookup_dcookie, {0, 0, 0}, 0},
        {"vhangup", SYS_vhangup, {0}, 0},
        {"fanotify_init", SYS_fanotify_init, {0xffffffffL, 0}, 0},
        {"move_pages", SYS_move_pages, {0, 0, 0, 0, 0, 0}, 0},
        {"migrate_pages", SYS_migrate_pages, {0, 0, 0, 0}, 0},
        {"ustat", SYS_ustat, {0, 0}, 0},
        {"sysfs", SYS_sysfs, {99}, 0},
};

static struct outcome probe_denied_table(void)
{
        for (size_t i = 0; i < sizeof(denied_calls) / sizeof(denied_calls[0]); i++) {
                const struct denied_call *c = &denied_calls[i];
                long a[6];
                long r;

                for (unsigned k = 0; k < 6; k++)
                        a[k] = (c->path_args & (1u << k)) ? (long)NONEXISTENT : c->a[k];
                r = syscall(c->nr, a[0], a[1], a[2], a[3], a[4], a[5]);

                if (r != -1 || errno != EPERM) {
                        struct outcome o = {(long)i, errno ? errno : -1};
                        return o;
                }
        }
        return result(0);
}

START_TEST(test_every_other_denied_syscall_refused_with_eperm)
{
        struct outcome o = run_probe(probe_denied_table, true);

        ck_assert_msg(o.ret == 0 && o.err == 0, "%s not refused with EPERM (errno %d)",
                      o.ret >= 0 && (size_t)o.ret < sizeof(denied_calls) / sizeof(denied_calls[0])
                              ? denied_calls[o.ret].name
                              : "?",
                      o.err);
}
END_TEST

/* ---- the i386 ABI (int $0x80 from a 64-bit process) ---- */

#if defined(__x86_64__)
/* i386 syscall numbers (arch/x86/entry/syscalls/syscall_32.tbl). */
enum {
        I386_getpid = 20,
        I386_mount = 21,
        I386_ptrace = 26,
        I386_ioctl = 54,
        I386_socketcall = 102,
        I386_clone = 120,
        I386_personality = 136,
        I386_keyctl = 288,
        I386_unshare = 310,
        I386_socket = 359,
        I386_clone3 = 435,
};

/* int $0x80 enters the 32-bit syscall table with 32-bit arguments in ebx, ecx, edx. The
 * kernel preserves every register but eax; r8-r11 are listed for older kernels. */
static long int80(long nr, long a1, long a2, long a3)
{
        long ret = nr;

        __asm__ volatile("int $0x80"
                         : "+a"(ret)
                         : "b"(a1), "c"(a2), "d"(a3)
                         : "memory", "r8", "r9", "r10", "r11");
        return (int)ret; /* the compat result is a 32-bit int */
}

static struct outcome int80_result(long r)
{
        struct outcome o = {r, 0};

        if (r < 0 && r > -4096) {
                o.ret = -1;
                o.err = (int)-r;
        }
        return o;
}

static struct outcome probe_int80_getpid(void)
{
        long r = int80(I386_getpid, 0, 0, 0);
        struct outcome o = int80_result(r);

        if (o.ret >= 0 && o.ret != getpid())
                o.err = -2;
        return o;
}

/* IA32 emulation can be off at boot (ia32_emulation=0): then int $0x80 raises SIGSEGV. */
static bool ia32_available(void)
{
        int status = 0;
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(int80(I386_getpid, 0, 0, 0) == getpid() ? 0 : 1);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static struct outcome probe_int80_unshare_newuser(void)
{
        return int80_result(int80(I386_unshare, CLONE_NEWUSER, 0, 0));
}

static struct outcome probe_int80_clone_newuser(void)
{
        long r = int80(I386_clone, CLONE_NEWUSER | SIGCHLD, 0, 0);

        if (r == 0)
                syscall(SYS_exit, 0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        return int80_result(r);
}

static struct outcome probe_int80_mount(void)
{
        return int80_result(int80(I386_mount, 0, 0, 0));
}

static struct outcome probe_int80_keyctl(void)
{
        return int80_result(int80(I386_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
}

static struct outcome probe_int80_ptrace(void)
{
        return int80_result(int80(I386_ptrace, PTRACE_PEEKUSER, getppid(), 0));
}

static struct outcome probe_int80_tiocsti(void)
{
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        struct outcome o = int80_result(int80(I386_ioctl, fd, TIOCSTI, 0));

        close(fd);
        return o;
}

static struct outcome probe_int80_personality(void)
{
        return int80_result(int80(I386_personality, ADDR_NO_RANDOMIZE, 0, 0));
}

static struct outcome probe_int80_clone3(void)
{
        return int80_result(int80(I386_clone3, 0, 0, 0));
}

static struct outcome probe_int80_socket_vsock(void)
{
        return int80_result(int80(I386_socket, AF_VSOCK, SOCK_STREAM, 0));
}

/* socketcall hides socket's arguments in memory, so its SYS_SOCKET call is refused whole. */
static struct outcome probe_int80_socketcall_socket(void)
{
        return int80_result(int80(I386_socketcall, 1 /* SYS_SOCKET */, 0, 0));
}

START_TEST(test_i386_unshare_newuser_refused_with_eperm)
{
        if (!ia32_available()) {
                fprintf(stderr, "IA32 emulation disabled in this kernel: nothing to test\n");
                return;
        }
        ck_assert_int_eq(run_probe(probe_int80_getpid, true).err, 0);
        expect_refused(probe_int80_unshare_newuser, EPERM, "int80 unshare(CLONE_NEWUSER)");
}
END_TEST

START_TEST(test_i386_abi_refuses_the_same_calls)
{
        if (!ia32_available())
                return;
        expect_refused(probe_int80_clone_newuser, EPERM, "int80 clone(CLONE_NEWUSER)");
        expect_refused(probe_int80_mount, EPERM, "int80 mount");
        expect_refused(probe_int80_keyctl, EPERM, "int80 keyctl");
        expect_refused(probe_int80_ptrace, EPERM, "int80 ptrace");
        expect_refused(probe_int80_tiocsti, EPERM, "int80 ioctl(TIOCSTI)");
        expect_refused(probe_int80_personality, EPERM, "int80 personality(ADDR_NO_RANDOMIZE)");
        expect_refused(probe_int80_clone3, ENOSYS, "int80 clone3");
        expect_refused(probe_int80_socket_vsock, EAFNOSUPPORT, "int80 socket(AF_VSOCK)");
        expect_refused(probe_int80_socketcall_socket, EAFNOSUPPORT, "int80 socketcall(SOCKET)");
}
END_TEST
#endif

/* ---- the x32 ABI (native numbers | 0x40000000) ---- */

/* Without the filter these give ENOSYS on kernels built without CONFIG_X86_X32_ABI and
 * succeed on kernels with it; the filter answers EPERM on both because seccomp runs before
 * the syscall table is chosen. */
static struct outcome probe_x32_unshare_newuser(void)
{
        return result(syscall(__X32_SYSCALL_BIT | SYS_unshare, CLONE_NEWUSER));
}

static struct outcome probe_x32_mount(void)
{
        return result(syscall(__X32_SYSCALL_BIT | SYS_mount, 0, 0, 0, 0, 0));
}

static struct outcome probe_x32_keyctl(void)
{
        return result(syscall(__X32_SYSCALL_BIT | SYS_keyctl, KEYCTL_GET_KEYRING_ID,
                              KEY_SPEC_SESSION_KEYRING, 0));
}

/* x32 has its own ioctl entry (514, the compat handler). */
static struct outcome probe_x32_tiocsti(void)
{
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        struct outcome o = result(syscall(__X32_SYSCALL_BIT | 514, fd, TIOCSTI, 0));

        close(fd);
        return o;
}

START_TEST(test_x32_unshare_newuser_refused)
{
        expect_refused(probe_x32_unshare_newuser, EPERM, "x32 unshare(CLONE_NEWUSER)");
}
END_TEST

START_TEST(test_x32_abi_refuses_the_same_calls)
{
        expect_refused(probe_x32_mount, EPERM, "x32 mount");
        expect_refused(probe_x32_keyctl, EPERM, "x32 keyctl");
        expect_refused(probe_x32_tiocsti, EPERM, "x32 ioctl(TIOCSTI)");
}
END_TEST

/* ---- ordinary programs keep working ---- */

static struct outcome probe_fork_and_wait(void)
{
        int status = 0;
        pid_t pid = fork();

        if (pid < 0)
                return result(-1);
        if (pid == 0)
                _exit(7);
        if (waitpid(pid, &status, 0) != pid)
                return result(-1);
        return result(WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : -1);
}

START_TEST(test_fork_without_namespace_flags_works)
{
        expect_works(probe_fork_and_wait, "fork + waitpid");
}
END_TEST

static struct outcome probe_unshare_non_ns_flags(void)
{
        return result(unshare(CLONE_FILES | CLONE_FS));
}

START_TEST(test_unshare_without_namespace_flags_works)
{
        expect_works(probe_unshare_non_ns_flags, "unshare(CLONE_FILES|CLONE_FS)");
}
END_TEST

static void *thread_main(void *arg)
{
        return arg;
}

/* glibc tries clone3 first; ENOSYS must make it fall back to clone. */
static struct outcome probe_pthread(void)
{
        pthread_t t;
        void *back = NULL;
        int r = pthread_create(&t, NULL, thread_main, (void *)0x5);

        if (r != 0) {
                errno = r;
                return result(-1);
        }
        if (pthread_join(t, &back) != 0 || back != (void *)0x5)
                return result(-1);
        return result(0);
}

START_TEST(test_thread_creation_falls_back_from_clone3)
{
        expect_works(probe_pthread, "pthread_create");
}
END_TEST

static long run_argv(char *const argv[])
{
        int status = 0;
        pid_t pid = fork();

        if (pid < 0)
                return -1;
        if (pid == 0) {
                int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
                dup2(fd, 1);
                execv(argv[0], argv);
                _exit(127);
        }
        if (waitpid(pid, &status, 0) != pid)
                return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static struct outcome probe_exec_true(void)
{
        char *argv[] = {"/bin/true", NULL};
        long r = run_argv(argv);
        struct outcome o = {r, r == 0 ? 0 : -1};
        return o;
}

START_TEST(test_execve_of_bin_true_works)
{
        expect_works(probe_exec_true, "execve(/bin/true)");
}
END_TEST

/* A shell pipeline and, when installed, python3 spawning a subprocess (posix_spawn uses
 * clone3 first) and node: the filter must not break the programs sandboxes run. */
static struct outcome probe_interpreters(void)
{
        char *sh[] = {"/bin/sh", "-c",
                      "set -e; ls / | grep -q usr; echo hi > /dev/null; "
                      "grep -q '^Seccomp:.2' /proc/self/status",
                      NULL};
        char *py[] = {"/usr/bin/python3", "-c",
                      "import subprocess, os, threading; "
                      "subprocess.run(['/bin/true'], check=True); "
                      "t = threading.Thread(target=os.getpid); t.start(); t.join()",
                      NULL};
        char *node[] = {"/usr/bin/node", "-e", "require('child_process').execFileSync('/bin/true')",
                        NULL};
        long r = run_argv(sh);

        if (r == 0 && access(py[0], X_OK) == 0)
                r = run_argv(py) == 0 ? 0 : 200;
        if (r == 0 && access(node[0], X_OK) == 0)
                r = run_argv(node) == 0 ? 0 : 201;
        struct outcome o = {r, r == 0 ? 0 : -1};
        return o;
}

START_TEST(test_shell_python_and_node_run_under_filter)
{
        expect_works(probe_interpreters, "sh / python3 / node");
}
END_TEST

static struct outcome probe_file_io(void)
{
        char path[] = "/tmp/sh-seccomp-XXXXXX", buf[8] = {0};
        int fd = mkstemp(path);
        long r;

        if (fd < 0)
                return result(-1);
        unlink(path);
        r = write(fd, "sandbox", 7) == 7 && pread(fd, buf, 7, 0) == 7 &&
                            memcmp(buf, "sandbox", 7) == 0
                    ? 0
                    : -1;
        close(fd);
        return result(r);
}

START_TEST(test_open_read_write_work)
{
        expect_works(probe_file_io, "open/write/read");
}
END_TEST

static struct outcome probe_mmap(void)
{
        char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        if (p == MAP_FAILED)
                return result(-1);
        p[4096] = 1;
        return result(munmap(p, 1 << 20));
}

START_TEST(test_mmap_works)
{
        expect_works(probe_mmap, "mmap");
}
END_TEST

static struct outcome probe_unix_socket(void)
{
        int sv[2];
        char c = 0;
        long r;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return result(-1);
        r = write(sv[0], "k", 1) == 1 && read(sv[1], &c, 1) == 1 && c == 'k' ? 0 : -1;
        close(sv[0]);
        close(sv[1]);
        if (r == 0) {
                int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        return result(-1);
                close(fd);
        }
        return result(r);
}

START_TEST(test_unix_sockets_work)
{
        expect_works(probe_unix_socket, "socket(AF_UNIX)");
}
END_TEST

static struct outcome probe_getrandom(void)
{
        char buf[16];

        return result(getrandom(buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) ? 0 : -1);
}

START_TEST(test_getrandom_works)
{
        expect_works(probe_getrandom, "getrandom");
}
END_TEST

/* Ordinary ioctls still reach the kernel (the rule matches TIOCSTI/TIOCLINUX only). */
static struct outcome probe_ordinary_ioctls(void)
{
        int p[2], avail = -1;
        struct winsize ws;
        int fd;
        long r;

        if (pipe(p) < 0)
                return result(-1);
        r = ioctl(p[0], FIONREAD, &avail) == 0 && avail == 0 ? 0 : -1;
        close(p[0]);
        close(p[1]);
        fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (r == 0 && (ioctl(fd, TIOCGWINSZ, &ws) == 0 || errno != ENOTTY))
                r = -1;
        close(fd);
        errno = 0;
        return result(r);
}

START_TEST(test_ordinary_ioctls_work)
{
        expect_works(probe_ordinary_ioctls, "ioctl(FIONREAD), ioctl(TIOCGWINSZ)=ENOTTY");
}
END_TEST

START_TEST(test_exported_program_is_nonempty)
{
        const struct sock_fprog *p = sh_seccomp_prog(filter);

        ck_assert_ptr_nonnull(p);
        ck_assert_ptr_nonnull(p->filter);
        ck_assert_uint_gt(p->len, 0);
        ck_assert_uint_le(p->len, BPF_MAXINSNS);
        ck_assert_int_eq(sh_seccomp_load(NULL), -EINVAL);
}
END_TEST

static Suite *seccomp_suite(void)
{
        Suite *s = suite_create("seccomp");
        TCase *tc;

        tc = tcase_create("native");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_exported_program_is_nonempty);
        tcase_add_test(tc, test_unshare_newuser_refused_with_eperm);
        tcase_add_test(tc, test_unshare_with_any_namespace_flag_refused);
        tcase_add_test(tc, test_clone_with_newuser_refused_even_with_high_bits);
        tcase_add_test(tc, test_setns_refused);
        tcase_add_test(tc, test_mount_refused_with_eperm);
        tcase_add_test(tc, test_keyctl_refused_with_eperm);
        tcase_add_test(tc, test_bpf_refused_with_eperm);
        tcase_add_test(tc, test_ptrace_refused_with_eperm);
        tcase_add_test(tc, test_io_uring_setup_refused_with_eperm);
        tcase_add_test(tc, test_userfaultfd_refused_with_eperm);
        tcase_add_test(tc, test_perf_event_open_refused_with_eperm);
        tcase_add_test(tc, test_ioctl_tiocsti_refused_with_eperm);
        tcase_add_test(tc, test_ioctl_tiocsti_with_high_bits_still_refused);
        tcase_add_test(tc, test_ioctl_tioclinux_refused_with_eperm);
        tcase_add_test(tc, test_clone3_answers_enosys);
        tcase_add_test(tc, test_personality_disabling_aslr_refused);
        tcase_add_test(tc, test_personality_default_values_and_query_allowed);
        tcase_add_test(tc, test_personality_refuses_exactly_values_outside_docker_set);
        tcase_add_test(tc, test_vsock_socket_refused);
        tcase_add_test(tc, test_every_other_denied_syscall_refused_with_eperm);
        suite_add_tcase(s, tc);

        tc = tcase_create("compat_abis");
        tcase_set_timeout(tc, 30);
#if defined(__x86_64__)
        tcase_add_test(tc, test_i386_unshare_newuser_refused_with_eperm);
        tcase_add_test(tc, test_i386_abi_refuses_the_same_calls);
#endif
        tcase_add_test(tc, test_x32_unshare_newuser_refused);
        tcase_add_test(tc, test_x32_abi_refuses_the_same_calls);
        suite_add_tcase(s, tc);

        tc = tcase_create("still_works");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_fork_without_namespace_flags_works);
        tcase_add_test(tc, test_unshare_without_namespace_flags_works);
        tcase_add_test(tc, test_thread_creation_falls_back_from_clone3);
        tcase_add_test(tc, test_execve_of_bin_true_works);
        tcase_add_test(tc, test_shell_python_and_node_run_under_filter);
        tcase_add_test(tc, test_open_read_write_work);
        tcase_add_test(tc, test_mmap_works);
        tcase_add_test(tc, test_unix_sockets_work);
        tcase_add_test(tc, test_getrandom_works);
        tcase_add_test(tc, test_ordinary_ioctls_work);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        sh_error *err = NULL;
        SRunner *sr;
        int failed;

        /* The control runs compare each refused call with what root gets without the
         * filter (mount, keyctl, unshare succeed or fail differently for root); as another
         * user the comparison would prove nothing. */
        if (geteuid() != 0) {
                fprintf(stderr, "test_seccomp: SKIP: needs root (each refusal is checked "
                                "against the same call made by root without the filter)\n");
                return 77;
        }
        if (sh_seccomp_build(&filter, &err) < 0) {
                fprintf(stderr, "test_seccomp: building the filter failed: %s\n",
                        err && err->msg ? err->msg : "?");
                sh_error_release(&err);
                return 1;
        }
        sr = srunner_create(seccomp_suite());
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        sh_seccomp_free(filter);
        return failed ? 1 : 0;
}
