/* test_seccomp.c: the filter refuses dangerous calls on every ABI; ordinary programs still run. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <stddef.h>
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
#include "unit.h"

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

/* A witness: a filter of the test's own, loaded before the sandbox filter, answering
 * WITNESS_ERRNO for the syscall numbers [lo, hi] of one ABI (but `skip`) and allowing
 * everything else. When two filters both answer ERRNO the kernel returns the errno of the
 * newer one, and an ERRNO answer means the syscall never runs. So under both filters the
 * witness errno says the sandbox filter allowed the call, any other errno came from the
 * sandbox filter (never from the kernel, which did not see the call), and with the witness
 * alone the witness errno shows that the probe made exactly the call it meant to. This
 * makes a refusal visible even where the kernel lacks the syscall or socket family and
 * would have failed the same way. */
#define WITNESS_ERRNO EHWPOISON

struct witness {
        uint32_t arch; /* AUDIT_ARCH_* */
        uint32_t lo, hi;
        const uint32_t *skip;
        size_t n_skip;
};

/* Runs in the probe child: build and load the witness (no_new_privs is set). */
static int load_witness(const struct witness *w)
{
        struct sock_filter f[24];
        struct sock_fprog prog = {0, f};
        unsigned n = 0, allow;

        if (w->n_skip > 16)
                return -E2BIG;
        allow = 3 + (unsigned)w->n_skip + 3;
        f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                              offsetof(struct seccomp_data, arch));
        f[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, w->arch, 0, allow - n - 1);
        n++;
        f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                              offsetof(struct seccomp_data, nr));
        for (size_t i = 0; i < w->n_skip; i++, n++)
                f[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, w->skip[i],
                                                    allow - n - 1, 0);
        f[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, w->lo, 0, allow - n - 1);
        n++;
        f[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, w->hi, allow - n - 1, 0);
        n++;
        f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
                                              SECCOMP_RET_ERRNO | (WITNESS_ERRNO & 0xffff));
        f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        prog.len = (unsigned short)n;
        return sh_seccomp_load(&prog);
}

/* Fork a child, optionally load a witness, optionally load the filter (after
 * no_new_privs, as the sandbox child does), run the probe and send its outcome back over a
 * pipe. The child leaves its session first so that nothing a probe does can reach the
 * terminal of whoever runs the tests. */
static struct outcome run_probe_witnessed(probe_fn fn, bool filtered, const struct witness *w)
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
                if (filtered || w) {
                        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                                _exit(90);
                }
                if (w && load_witness(w) < 0)
                        _exit(93);
                if (filtered && sh_seccomp_load(sh_seccomp_prog(filter)) < 0)
                        _exit(91);
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

static struct outcome run_probe(probe_fn fn, bool filtered)
{
        return run_probe_witnessed(fn, filtered, NULL);
}

/* The call, made once, gets `err` from the filter; with the witness alone it reaches the
 * witness (so the kernel never saw it in either run). */
static void expect_filter_answers(probe_fn fn, const struct witness *w, int err, const char *what)
{
        struct outcome with = run_probe_witnessed(fn, true, w);
        struct outcome without = run_probe_witnessed(fn, false, w);

        ck_assert_msg(with.ret == -1 && with.err == err,
                      "%s under the filter: ret %ld errno %d (%s), wanted errno %d (%s)", what,
                      with.ret, with.err, strerror(with.err), err, strerror(err));
        ck_assert_msg(without.ret == -1 && without.err == WITNESS_ERRNO,
                      "%s with the witness alone: ret %ld errno %d, wanted the witness", what,
                      without.ret, without.err);
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

/* ---- socket families: an allow list ---- */

/* Globals a probe reads (set by the test before run_probe forks). */
static long sweep_nr;  /* syscall to call */
static int sweep_want; /* errno every call must get */
static const unsigned long *sweep_values;
static size_t sweep_n;

static struct outcome sweep_mismatch(size_t i, int err)
{
        struct outcome o = {(long)i, err ? err : -1};
        return o;
}

/* socket(v, SOCK_DGRAM, 0) or socketpair(v, SOCK_DGRAM, 0, sv) for each v of sweep_values:
 * the index of the first one that does not fail with sweep_want. */
static struct outcome probe_family_sweep(void)
{
        for (size_t i = 0; i < sweep_n; i++) {
                int sv[2];
                long r = syscall(sweep_nr, sweep_values[i], SOCK_DGRAM | SOCK_CLOEXEC, 0, sv);

                if (r != -1 || errno != sweep_want)
                        return sweep_mismatch(i, r == -1 ? errno : 0);
        }
        return result(0);
}

/* Every family number the kernel has (AF_MAX is 46 in 6.x: AF_PACKET, AF_ALG, AF_KEY,
 * AF_XDP, AF_VSOCK, AF_BLUETOOTH, AF_CAN, AF_TIPC, AF_RDS, AF_LLC, AF_SMC, AF_QIPCRTR,
 * AF_NFC, AF_MCTP ...) but the four allowed, numbers beyond it, negative ones, and refused
 * families with high bits set (the kernel reads an int). */
static unsigned long refused_families[80];
static size_t n_refused_families;

static void fill_refused_families(void)
{
        static const unsigned long extra[] = {
                255,
                1000,
                0x7fffffff,
                0xffffffff,
                0xfffffffffffffffful,
                AF_ALG | (1ul << 32),
                AF_PACKET | (1ul << 40),
                AF_KEY | (0xfffffffful << 32),
                (unsigned long)AF_UNIX << 16, /* not AF_UNIX: the trie must see every bit */
                AF_UNIX | 0x80000000ul,
                AF_INET6 | 0x100,
        };
        size_t n = 0;

        for (unsigned long f = 0; f < 64; f++)
                if (f != AF_UNIX && f != AF_INET && f != AF_INET6 && f != AF_NETLINK)
                        refused_families[n++] = f;
        for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
                refused_families[n++] = extra[i];
        n_refused_families = n;
}

static const struct witness socket_witness = {AUDIT_ARCH_X86_64, SYS_socket, SYS_socket, NULL, 0};
static const struct witness socketpair_witness = {AUDIT_ARCH_X86_64, SYS_socketpair, SYS_socketpair,
                                                  NULL, 0};

static void expect_family_sweep(long nr, const struct witness *w, const unsigned long *v, size_t n,
                                int err, const char *what)
{
        struct outcome o;

        sweep_nr = nr;
        sweep_values = v;
        sweep_n = n;
        sweep_want = err;
        o = run_probe_witnessed(probe_family_sweep, true, w);
        ck_assert_msg(o.ret == 0 && o.err == 0, "%s(%#lx) under the filter: errno %d, wanted %d",
                      what, o.ret >= 0 && (size_t)o.ret < n ? v[o.ret] : 0ul, o.err, err);
        sweep_want = WITNESS_ERRNO;
        o = run_probe_witnessed(probe_family_sweep, false, w);
        ck_assert_msg(o.ret == 0 && o.err == 0, "%s(%#lx) with the witness alone: errno %d", what,
                      o.ret >= 0 && (size_t)o.ret < n ? v[o.ret] : 0ul, o.err);
}

START_TEST(test_socket_of_every_family_outside_the_allow_list_answers_eafnosupport)
{
        fill_refused_families();
        expect_family_sweep(SYS_socket, &socket_witness, refused_families, n_refused_families,
                            EAFNOSUPPORT, "socket");
}
END_TEST

START_TEST(test_socketpair_of_a_refused_family_answers_eafnosupport)
{
        fill_refused_families();
        expect_family_sweep(SYS_socketpair, &socketpair_witness, refused_families,
                            n_refused_families, EAFNOSUPPORT, "socketpair");
}
END_TEST

/* The allowed families reach the kernel, also with high bits the kernel ignores. */
START_TEST(test_allowed_families_reach_the_kernel)
{
        static const unsigned long ok[] = {
                AF_UNIX, AF_INET, AF_INET6, AF_UNIX | (1ul << 32), AF_INET | (0xfffffffful << 32),
        };

        expect_family_sweep(SYS_socket, &socket_witness, ok, sizeof(ok) / sizeof(ok[0]),
                            WITNESS_ERRNO, "socket");
        expect_family_sweep(SYS_socketpair, &socketpair_witness, ok, sizeof(ok) / sizeof(ok[0]),
                            WITNESS_ERRNO, "socketpair");
}
END_TEST

/* AF_ALG, AF_PACKET and AF_KEY one by one: the kernel here may lack AF_ALG and AF_KEY, so
 * only the witness can show that the filter refuses them. */
static int one_family;

static struct outcome probe_socket_one_family(void)
{
        return result(socket(one_family, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
}

START_TEST(test_socket_af_alg_af_packet_af_key_refused)
{
        one_family = AF_ALG;
        expect_filter_answers(probe_socket_one_family, &socket_witness, EAFNOSUPPORT,
                              "socket(AF_ALG)");
        one_family = AF_PACKET;
        expect_filter_answers(probe_socket_one_family, &socket_witness, EAFNOSUPPORT,
                              "socket(AF_PACKET)");
        one_family = AF_KEY;
        expect_filter_answers(probe_socket_one_family, &socket_witness, EAFNOSUPPORT,
                              "socket(AF_KEY)");
}
END_TEST

/* As an unprivileged user the kernel answers EPERM for AF_PACKET and AF_XDP (they need
 * CAP_NET_RAW); the filter answers first, so their code is never reached. */
static struct outcome probe_unprivileged_raw_families(void)
{
        static const int fams[] = {AF_PACKET, AF_XDP};

        if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                return result(-1);
        for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
                int fd = socket(fams[i], SOCK_RAW | SOCK_CLOEXEC, 0);

                if (fd >= 0 || errno != EAFNOSUPPORT) {
                        struct outcome o = {fd >= 0 ? 100 + (long)i : -1, fd >= 0 ? 0 : errno};

                        if (fd >= 0)
                                close(fd);
                        return o;
                }
        }
        errno = EAFNOSUPPORT;
        return result(-1);
}

START_TEST(test_af_packet_refused_before_the_capability_check)
{
        struct outcome with = run_probe(probe_unprivileged_raw_families, true);
        struct outcome without = run_probe(probe_unprivileged_raw_families, false);

        ck_assert_msg(with.ret == -1 && with.err == EAFNOSUPPORT, "under the filter: %ld errno %d",
                      with.ret, with.err);
        ck_assert_msg(without.ret == -1 && without.err == EPERM,
                      "without the filter AF_PACKET should fail the capability check: %ld "
                      "errno %d",
                      without.ret, without.err);
}
END_TEST

/* Netlink: NETLINK_ROUTE only. */
static struct outcome probe_netlink_protocol_sweep(void)
{
        for (size_t i = 0; i < sweep_n; i++) {
                long r = syscall(SYS_socket, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, sweep_values[i]);

                if (r != -1 || errno != sweep_want)
                        return sweep_mismatch(i, r == -1 ? errno : 0);
        }
        return result(0);
}

START_TEST(test_netlink_protocols_other_than_route_refused)
{
        static unsigned long protos[40];
        static const unsigned long route[] = {NETLINK_ROUTE, NETLINK_ROUTE | (1ul << 32)};
        size_t n = 0;
        struct outcome o;

        for (unsigned long p = 1; p < 32; p++) /* SOCK_DIAG, AUDIT, GENERIC, NETFILTER ... */
                protos[n++] = p;
        protos[n++] = 1000;
        protos[n++] = 0xffffffff;
        protos[n++] = NETLINK_GENERIC | (1ul << 32);
        sweep_values = protos;
        sweep_n = n;
        sweep_want = EPROTONOSUPPORT;
        o = run_probe_witnessed(probe_netlink_protocol_sweep, true, &socket_witness);
        ck_assert_msg(o.ret == 0 && o.err == 0, "netlink protocol %#lx: errno %d",
                      o.ret >= 0 && (size_t)o.ret < n ? protos[o.ret] : 0ul, o.err);
        sweep_want = WITNESS_ERRNO;
        o = run_probe_witnessed(probe_netlink_protocol_sweep, false, &socket_witness);
        ck_assert_msg(o.ret == 0 && o.err == 0, "witness alone: errno %d", o.err);
        sweep_values = route;
        sweep_n = 2;
        o = run_probe_witnessed(probe_netlink_protocol_sweep, true, &socket_witness);
        ck_assert_msg(o.ret == 0 && o.err == 0, "NETLINK_ROUTE did not reach the kernel: errno %d",
                      o.err);
}
END_TEST

/* ---- ioctls that change a file's project quota ---- */

/* linux/fs.h clashes with sys/mount.h in glibc 2.36, so the layout is spelled here. */
struct test_fsxattr {
        uint32_t fsx_xflags, fsx_extsize, fsx_nextents, fsx_projid, fsx_cowextsize;
        unsigned char fsx_pad[8];
};
#define T_FS_IOC_FSGETXATTR _IOR('X', 31, struct test_fsxattr)
#define T_FS_IOC_FSSETXATTR _IOW('X', 32, struct test_fsxattr)
#define T_FS_IOC_GETFLAGS   _IOR('f', 1, long)
#define T_FS_IOC_SETFLAGS   _IOW('f', 2, long)
#define T_FS_IOC32_SETFLAGS _IOW('f', 2, int)
_Static_assert(T_FS_IOC_FSSETXATTR == 0x401c5820, "FS_IOC_FSSETXATTR");
_Static_assert(T_FS_IOC_SETFLAGS == 0x40086602, "FS_IOC_SETFLAGS");

static unsigned long fs_request;

/* On a real file of /tmp (ext4 here): read the attributes, then write the same ones back
 * (or the flags). Without the filter root succeeds (or the filesystem answers ENOTTY /
 * EOPNOTSUPP); under it the write is EPERM whatever the filesystem. */
static struct outcome probe_fs_attr_write(void)
{
        char path[] = "/tmp/sh-seccomp-XXXXXX";
        struct test_fsxattr fa;
        long flags = 0;
        int fd = mkstemp(path);
        struct outcome o;

        if (fd < 0)
                return result(-1);
        unlink(path);
        memset(&fa, 0, sizeof(fa));
        (void)ioctl(fd, T_FS_IOC_FSGETXATTR, &fa);
        (void)ioctl(fd, T_FS_IOC_GETFLAGS, &flags);
        o = result(syscall(SYS_ioctl, fd, fs_request,
                           (fs_request & 0xffffffffu) == T_FS_IOC_FSSETXATTR ? (void *)&fa
                                                                             : (void *)&flags));
        close(fd);
        return o;
}

START_TEST(test_ioctl_fs_ioc_fssetxattr_refused_with_eperm)
{
        fs_request = T_FS_IOC_FSSETXATTR;
        expect_refused(probe_fs_attr_write, EPERM, "ioctl(FS_IOC_FSSETXATTR)");
        fs_request = T_FS_IOC_FSSETXATTR | (1ul << 32);
        expect_refused(probe_fs_attr_write, EPERM, "ioctl(FS_IOC_FSSETXATTR | 1<<32)");
}
END_TEST

/* FS_IOC_SETFLAGS can clear FS_PROJINHERIT_FL on a directory: new files then get project 0. */
START_TEST(test_ioctl_fs_ioc_setflags_refused_with_eperm)
{
        fs_request = T_FS_IOC_SETFLAGS;
        expect_refused(probe_fs_attr_write, EPERM, "ioctl(FS_IOC_SETFLAGS)");
        fs_request = T_FS_IOC32_SETFLAGS;
        expect_refused(probe_fs_attr_write, EPERM, "ioctl(FS_IOC32_SETFLAGS)");
}
END_TEST

static unsigned long lease_cmd;

static struct outcome probe_setlease(void)
{
        char path[] = "/tmp/sh-seccomp-XXXXXX";
        int fd = mkstemp(path), rd;
        struct outcome o;

        if (fd < 0)
                return result(-1);
        close(fd);
        /* A read lease needs an fd opened read-only and no writer. */
        rd = open(path, O_RDONLY | O_CLOEXEC);
        unlink(path);
        if (rd < 0)
                return result(-1);
        o = result(syscall(SYS_fcntl, rd, lease_cmd, F_RDLCK));
        close(rd);
        return o;
}

START_TEST(test_fcntl_setlease_refused_with_eperm)
{
        lease_cmd = F_SETLEASE;
        expect_refused(probe_setlease, EPERM, "fcntl(F_SETLEASE)");
        lease_cmd = F_SETLEASE | (1ul << 32);
        expect_refused(probe_setlease, EPERM, "fcntl(F_SETLEASE | 1 << 32)");
}
END_TEST

static struct outcome probe_fs_attr_read(void)
{
        char path[] = "/tmp/sh-seccomp-XXXXXX";
        struct test_fsxattr fa;
        long flags = 0;
        int fd = mkstemp(path);
        struct outcome o;

        if (fd < 0)
                return result(-1);
        unlink(path);
        o = result(ioctl(fd, T_FS_IOC_FSGETXATTR, &fa));
        if (o.ret == 0)
                o = result(ioctl(fd, T_FS_IOC_GETFLAGS, &flags));
        close(fd);
        return o;
}

START_TEST(test_ioctl_fs_ioc_fsgetxattr_and_getflags_allowed)
{
        struct outcome with = run_probe(probe_fs_attr_read, true);
        struct outcome without = run_probe(probe_fs_attr_read, false);

        ck_assert_msg(with.ret == without.ret && with.err == without.err,
                      "FS_IOC_FSGETXATTR/GETFLAGS: %ld/%d under the filter, %ld/%d without",
                      with.ret, with.err, without.ret, without.err);
}
END_TEST

/* ---- syscalls libseccomp does not know ---- */

/* Real syscalls of Linux 6.10-6.17 that libseccomp 2.5.4 (Debian 12) has no name for:
 * statmount (457), mseal (462), file_setattr (469; it sets the project id like
 * FS_IOC_FSSETXATTR). Arguments that would be harmless if one got through. */
static long new_syscall_nr;

static struct outcome probe_new_syscall(void)
{
        return result(syscall(new_syscall_nr, new_syscall_nr == 462 ? 0L : -1L, 0L, 0L, 0L, 0L));
}

START_TEST(test_new_kernel_syscalls_unknown_to_libseccomp_answer_enosys)
{
        static const long nrs[] = {457, 462, 469};
        unsigned implemented = 0;

        for (size_t i = 0; i < sizeof(nrs) / sizeof(nrs[0]); i++) {
                _cleanup_free_ char *name =
                        seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, (int)nrs[i]);
                struct outcome with, without;

                ck_assert_msg(!name, "libseccomp knows %ld as %s: pick another number", nrs[i],
                              name);
                new_syscall_nr = nrs[i];
                with = run_probe(probe_new_syscall, true);
                without = run_probe(probe_new_syscall, false);
                ck_assert_msg(with.ret == -1 && with.err == ENOSYS,
                              "syscall %ld under the filter: %ld errno %d", nrs[i], with.ret,
                              with.err);
                if (!(without.ret == -1 && without.err == ENOSYS))
                        implemented++;
        }
        /* This kernel (6.18) has all three; the sweep below covers the numbers anyway. */
        ck_assert_msg(implemented > 0, "the kernel has none of them: the test proves nothing");
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
        I386_socketpair = 360,
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
        if (!ut_ia32_available()) {
                fprintf(stderr, "IA32 emulation disabled in this kernel: nothing to test\n");
                return;
        }
        ck_assert_int_eq(run_probe(probe_int80_getpid, true).err, 0);
        expect_refused(probe_int80_unshare_newuser, EPERM, "int80 unshare(CLONE_NEWUSER)");
}
END_TEST

START_TEST(test_i386_abi_refuses_the_same_calls)
{
        if (!ut_ia32_available())
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

static struct outcome probe_int80_family_sweep(void)
{
        for (size_t i = 0; i < sweep_n; i++) {
                long r = int80(sweep_nr, (long)(uint32_t)sweep_values[i], SOCK_DGRAM, 0);

                if (r != -sweep_want)
                        return sweep_mismatch(i, r < 0 && r > -4096 ? (int)-r : 0);
        }
        return result(0);
}

static const struct witness i386_socket_witness = {AUDIT_ARCH_I386, I386_socket, I386_socket, NULL,
                                                   0};
static const struct witness i386_socketpair_witness = {AUDIT_ARCH_I386, I386_socketpair,
                                                       I386_socketpair, NULL, 0};
static const struct witness i386_socketcall_witness = {AUDIT_ARCH_I386, I386_socketcall,
                                                       I386_socketcall, NULL, 0};

static void expect_int80_sweep(long nr, const struct witness *w, const unsigned long *v, size_t n,
                               int err, const char *what)
{
        struct outcome o;

        sweep_nr = nr;
        sweep_values = v;
        sweep_n = n;
        sweep_want = err;
        o = run_probe_witnessed(probe_int80_family_sweep, true, w);
        ck_assert_msg(o.ret == 0 && o.err == 0, "%s(%#lx) under the filter: errno %d, wanted %d",
                      what, o.ret >= 0 && (size_t)o.ret < n ? v[o.ret] : 0ul, o.err, err);
        sweep_want = WITNESS_ERRNO;
        o = run_probe_witnessed(probe_int80_family_sweep, false, w);
        ck_assert_msg(o.ret == 0 && o.err == 0, "%s(%#lx) with the witness alone: errno %d", what,
                      o.ret >= 0 && (size_t)o.ret < n ? v[o.ret] : 0ul, o.err);
}

/* The direct i386 socket calls are filtered by family like the native ones. */
START_TEST(test_i386_socket_of_a_refused_family_answers_eafnosupport)
{
        static const unsigned long ok[] = {AF_UNIX, AF_INET, AF_INET6};

        if (!ut_ia32_available())
                return;
        fill_refused_families();
        expect_int80_sweep(I386_socket, &i386_socket_witness, refused_families, n_refused_families,
                           EAFNOSUPPORT, "int80 socket");
        expect_int80_sweep(I386_socketpair, &i386_socketpair_witness, refused_families,
                           n_refused_families, EAFNOSUPPORT, "int80 socketpair");
        expect_int80_sweep(I386_socket, &i386_socket_witness, ok, sizeof(ok) / sizeof(ok[0]),
                           WITNESS_ERRNO, "int80 socket");
}
END_TEST

/* socketcall hides its arguments in memory: its SOCKET and SOCKETPAIR calls are refused
 * whole; the others (connect, send ... on a socket that exists) pass. */
START_TEST(test_i386_socketcall_socket_and_socketpair_refused)
{
        static const unsigned long create[] = {1 /* SOCKET */, 8 /* SOCKETPAIR */};
        static const unsigned long use[] = {3 /* CONNECT */, 9 /* SEND */, 20 /* SENDMMSG */, 0,
                                            21};

        if (!ut_ia32_available())
                return;
        expect_int80_sweep(I386_socketcall, &i386_socketcall_witness, create,
                           sizeof(create) / sizeof(create[0]), EAFNOSUPPORT, "int80 socketcall");
        expect_int80_sweep(I386_socketcall, &i386_socketcall_witness, use,
                           sizeof(use) / sizeof(use[0]), WITNESS_ERRNO, "int80 socketcall");
}
END_TEST

static struct outcome probe_int80_socket_unix(void)
{
        struct outcome o = int80_result(int80(I386_socket, AF_UNIX, SOCK_STREAM, 0));

        if (o.ret >= 0)
                close((int)o.ret);
        return o;
}

static struct outcome probe_int80_fssetxattr(void)
{
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        struct outcome o = int80_result(int80(I386_ioctl, fd, T_FS_IOC_FSSETXATTR, 0));

        close(fd);
        return o;
}

START_TEST(test_i386_unix_socket_works_and_fssetxattr_refused)
{
        if (!ut_ia32_available())
                return;
        expect_works(probe_int80_socket_unix, "int80 socket(AF_UNIX)");
        expect_refused(probe_int80_fssetxattr, EPERM, "int80 ioctl(FS_IOC_FSSETXATTR)");
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

static struct outcome probe_x32_socket_packet(void)
{
        return result(syscall(__X32_SYSCALL_BIT | SYS_socket, AF_PACKET, SOCK_RAW, 0));
}

static struct outcome probe_x32_socket_alg(void)
{
        return result(syscall(__X32_SYSCALL_BIT | SYS_socket, AF_ALG, SOCK_SEQPACKET, 0));
}

static struct outcome probe_x32_fssetxattr(void)
{
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        struct outcome o = result(syscall(__X32_SYSCALL_BIT | 514, fd, T_FS_IOC_FSSETXATTR, 0));

        close(fd);
        return o;
}

START_TEST(test_x32_refused_families_and_fssetxattr)
{
        static const struct witness x32_socket = {AUDIT_ARCH_X86_64, __X32_SYSCALL_BIT | SYS_socket,
                                                  __X32_SYSCALL_BIT | SYS_socket, NULL, 0};

        expect_refused(probe_x32_socket_packet, EAFNOSUPPORT, "x32 socket(AF_PACKET)");
        expect_filter_answers(probe_x32_socket_alg, &x32_socket, EAFNOSUPPORT,
                              "x32 socket(AF_ALG)");
        expect_refused(probe_x32_fssetxattr, EPERM, "x32 ioctl(FS_IOC_FSSETXATTR)");
}
END_TEST

/* ---- every syscall number gets the policy's answer ---- */

/* The policy, spelled independently of seccomp.c: every syscall libseccomp knows (up to
 * the last reviewed number) is allowed but these, which answer EPERM; clone3 answers
 * ENOSYS; socket and socketpair with a zero family EAFNOSUPPORT; anything libseccomp does
 * not know, or numbered above the last reviewed one, ENOSYS. */
#define LAST_REVIEWED_NR 456

static const char *const expected_eperm[] = {
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
        "setns",
        "keyctl",
        "add_key",
        "request_key",
        "bpf",
        "perf_event_open",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "userfaultfd",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "pidfd_getfd",
        "kcmp",
        "move_pages",
        "migrate_pages",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "create_module",
        "get_kernel_syms",
        "query_module",
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
        "open_by_handle_at",
        "name_to_handle_at",
        "iopl",
        "ioperm",
        "vm86",
        "vm86old",
        "lookup_dcookie",
        "uselib",
        "ustat",
        "sysfs",
        "_sysctl",
        "nfsservctl",
        "vhangup",
        "fanotify_init",
};

#define SWEEP_N 1024

enum sweep_abi { SWEEP_NATIVE, SWEEP_I386, SWEEP_X32 };

static int sweep_expect[SWEEP_N]; /* errno per number; 0: not called */
static uint32_t sweep_base;
static enum sweep_abi sweep_abi;
static bool sweep_filtered;

static int expected_answer(uint32_t arch, int nr)
{
        _cleanup_free_ char *name = seccomp_syscall_resolve_num_arch(arch, nr);

        if (!name)
                return ENOSYS;
        for (size_t i = 0; i < sizeof(expected_eperm) / sizeof(expected_eperm[0]); i++)
                if (strcmp(name, expected_eperm[i]) == 0)
                        return EPERM;
        if (strcmp(name, "clone3") == 0)
                return ENOSYS;
        if (strcmp(name, "socket") == 0 || strcmp(name, "socketpair") == 0)
                return EAFNOSUPPORT;
        if (seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name) > LAST_REVIEWED_NR)
                return ENOSYS;
        return WITNESS_ERRNO;
}

/* Every number with all-zero arguments (clone, unshare, ioctl, personality and socketcall
 * are then allowed); the witness answers whatever the filter lets through, so nothing
 * runs. */
static struct outcome probe_sweep(void)
{
        for (uint32_t i = 0; i < SWEEP_N; i++) {
                long nr = (long)(sweep_base + i), r;
                int got, want = sweep_filtered ? sweep_expect[i] : WITNESS_ERRNO;

                if (!sweep_expect[i])
                        continue;
#if defined(__x86_64__)
                if (sweep_abi == SWEEP_I386) {
                        r = int80(nr, 0, 0, 0);
                        got = r < 0 && r > -4096 ? (int)-r : 0;
                } else
#endif
                {
                        r = syscall(nr, 0L, 0L, 0L, 0L, 0L, 0L);
                        got = r == -1 ? errno : 0;
                }
                if (got != want) {
                        struct outcome o = {nr, got ? got : -1};
                        return o;
                }
        }
        return result(0);
}

static void expect_sweep(enum sweep_abi abi)
{
        /* What the child needs after the witness (load the filter, report, exit; and what
         * the sanitizer runtime calls on the way out: sigaltstack, mmap, munmap), and
         * uretprobe (335) and uprobe (336), which the kernel runs without consulting seccomp
         * (outside the kernel's own trampoline they do nothing: SIGILL, ENXIO). */
        static const uint32_t native_skip[] = {
                SYS_seccomp,     SYS_prctl, SYS_write,  SYS_exit, SYS_exit_group,
                SYS_sigaltstack, SYS_mmap,  SYS_munmap, 335,      336,
        };
        static const uint32_t arches[] = {SCMP_ARCH_X86_64, SCMP_ARCH_X86, SCMP_ARCH_X32};
        struct witness w = {abi == SWEEP_I386 ? AUDIT_ARCH_I386 : AUDIT_ARCH_X86_64, 0, 0, NULL, 0};
        unsigned counts[3] = {0, 0, 0}; /* allowed, refused by the filter, unknown */
        struct outcome o;

        sweep_abi = abi;
        sweep_base = abi == SWEEP_X32 ? __X32_SYSCALL_BIT : 0;
        w.lo = sweep_base;
        w.hi = sweep_base + SWEEP_N - 1;
        if (abi == SWEEP_NATIVE) {
                w.skip = native_skip;
                w.n_skip = sizeof(native_skip) / sizeof(native_skip[0]);
        }
        for (uint32_t i = 0; i < SWEEP_N; i++) {
                bool skip = false;

                for (size_t k = 0; k < w.n_skip; k++)
                        skip = skip || w.skip[k] == sweep_base + i;
                sweep_expect[i] = skip ? 0 : expected_answer(arches[abi], (int)(sweep_base + i));
                if (sweep_expect[i])
                        counts[sweep_expect[i] == WITNESS_ERRNO ? 0
                               : sweep_expect[i] == ENOSYS      ? 2
                                                                : 1]++;
        }
        /* Sanity: libseccomp's table is there, and most of it is allowed. */
        ck_assert_uint_gt(counts[0], 250);
        ck_assert_uint_gt(counts[1], 20);
        sweep_filtered = true;
        o = run_probe_witnessed(probe_sweep, true, &w);
        if (o.ret != 0 || o.err != 0) {
                uint32_t i = (uint32_t)o.ret - sweep_base;
                _cleanup_free_ char *name =
                        seccomp_syscall_resolve_num_arch(arches[abi], (int)o.ret);

                ck_abort_msg("ABI %d syscall %#lx (%s): errno %d, wanted %d", abi, o.ret,
                             name ? name : "unknown to libseccomp", o.err,
                             i < SWEEP_N ? sweep_expect[i] : -1);
        }
        sweep_filtered = false;
        o = run_probe_witnessed(probe_sweep, false, &w);
        ck_assert_msg(o.ret == 0 && o.err == 0, "witness alone: syscall %#lx errno %d", o.ret,
                      o.err);
}

START_TEST(test_every_native_syscall_number_gets_the_policy_answer)
{
        expect_sweep(SWEEP_NATIVE);
}
END_TEST

#if defined(__x86_64__)
START_TEST(test_every_i386_syscall_number_gets_the_policy_answer)
{
        if (!ut_ia32_available())
                return;
        expect_sweep(SWEEP_I386);
}
END_TEST
#endif

START_TEST(test_every_x32_syscall_number_gets_the_policy_answer)
{
        expect_sweep(SWEEP_X32);
}
END_TEST

/* Numbers beyond every table (and negative ones) never reach the kernel either. */
static const uint32_t beyond[] = {SWEEP_N,    2000,       0x3fffffff, 0x40000000 | SWEEP_N,
                                  0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff};

static struct outcome probe_beyond(void)
{
        for (size_t i = 0; i < sizeof(beyond) / sizeof(beyond[0]); i++) {
                long r = syscall((long)(int)beyond[i], 0L, 0L, 0L, 0L, 0L, 0L);

                if (r != -1 || errno != sweep_want)
                        return sweep_mismatch(i, r == -1 ? errno : 0);
        }
        return result(0);
}

START_TEST(test_numbers_beyond_every_table_answer_enosys)
{
        static const struct witness w = {AUDIT_ARCH_X86_64, SWEEP_N, 0xffffffff, NULL, 0};
        struct outcome o;

        sweep_want = ENOSYS;
        o = run_probe_witnessed(probe_beyond, true, &w);
        ck_assert_msg(o.ret == 0 && o.err == 0, "syscall %#x under the filter: errno %d",
                      o.ret >= 0 ? beyond[o.ret] : 0, o.err);
        sweep_want = WITNESS_ERRNO;
        o = run_probe_witnessed(probe_beyond, false, &w);
        ck_assert_msg(o.ret == 0 && o.err == 0, "syscall %#x with the witness alone: errno %d",
                      o.ret >= 0 ? beyond[o.ret] : 0, o.err);
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

/* The tools sandboxes run most: coreutils, a compiler and git (each part runs only when the
 * tool is installed), in a scratch directory removed at the end. */
static struct outcome probe_toolchain(void)
{
        char *sh[] = {
                "/bin/bash", "-c",
                "set -e; d=$(mktemp -d /tmp/sh-seccomp-XXXXXX); trap 'rm -rf \"$d\"' EXIT; "
                "cd \"$d\"; printf 'int main(void){return 42;}\\n' > t.c; "
                "cp t.c u.c; mv u.c v.c; ln -s v.c w.c; chmod 600 v.c; touch -d @0 v.c; "
                "stat -c %s v.c > /dev/null; sha256sum v.c | cut -c1-8 > /dev/null; "
                "ls -la | sort | head -n 3 | wc -l > /dev/null; date -u > /dev/null; "
                "find . -name '*.c' | xargs wc -c > /dev/null; tar czf x.tgz t.c; tar tzf x.tgz; "
                "seq 1 1000 | sort -rn | uniq | tail -n 1 > /dev/null; timeout 5 sleep 0.01; "
                "du -s . > /dev/null; df . > /dev/null; id -u > /dev/null; nproc > /dev/null; "
                "if command -v gcc > /dev/null; then gcc -O1 t.c -o t; ./t || test $? = 42; fi; "
                "if command -v git > /dev/null; then git init -q r; cd r; cp ../t.c .; "
                "git add t.c; git -c user.email=a@b -c user.name=n commit -qm one; "
                "git log --oneline | grep -q one; git status --porcelain; cd ..; fi",
                NULL};
        long r = run_argv(sh);
        struct outcome o = {r, r == 0 ? 0 : -1};
        return o;
}

START_TEST(test_coreutils_gcc_and_git_run_under_filter)
{
        expect_works(probe_toolchain, "coreutils / gcc / git");
}
END_TEST

/* Networking as programs use it: TCP over IPv4 loopback (port 0), an IPv6 socket,
 * getaddrinfo with AI_ADDRCONFIG and getifaddrs / if_nameindex (both NETLINK_ROUTE), in C
 * and in python3. */
static struct outcome probe_networking(void)
{
        struct addrinfo hints = {.ai_flags = AI_ADDRCONFIG, .ai_socktype = SOCK_STREAM}, *ai = NULL;
        struct ifaddrs *ifa = NULL;
        struct if_nameindex *ni;
        char *py[] = {"/usr/bin/python3", "-c",
                      "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
                      "c = socket.create_connection(s.getsockname(), timeout=5); "
                      "a, _ = s.accept(); c.sendall(b'x'); assert a.recv(1) == b'x'; "
                      "socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close(); "
                      "socket.socketpair(); assert socket.if_nameindex(); "
                      "socket.getaddrinfo('localhost', 80, flags=socket.AI_ADDRCONFIG)",
                      NULL};
        int fd;

        if (getaddrinfo("localhost", "80", &hints, &ai) != 0)
                return result(-1);
        freeaddrinfo(ai);
        if (getifaddrs(&ifa) < 0)
                return result(-1);
        freeifaddrs(ifa);
        ni = if_nameindex();
        if (!ni)
                return result(-1);
        if_freenameindex(ni);
        fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
        if (fd < 0)
                return result(-1);
        close(fd);
        fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (fd < 0)
                return result(-1);
        close(fd);
        if (access(py[0], X_OK) == 0 && run_argv(py) != 0) {
                errno = EPROTO;
                return result(-1);
        }
        return result(0);
}

START_TEST(test_ordinary_networking_works)
{
        expect_works(probe_networking, "getaddrinfo / getifaddrs / TCP / python sockets");
}
END_TEST

/* glibc's fallbacks key on ENOSYS, so the recent calls libseccomp knows must reach the
 * kernel (EBADF / EINVAL / EFAULT for these arguments): close_range, faccessat2,
 * epoll_pwait2, futex_waitv, cachestat, fchmodat2. */
static struct outcome probe_recent_known_syscalls(void)
{
        static const long nrs[] = {436, 439, 441, 449, 451, 452};

        for (size_t i = 0; i < sizeof(nrs) / sizeof(nrs[0]); i++) {
                long r = syscall(nrs[i], -1L, 0L, 0L, 0L, 0L, 0L);

                if (r == -1 && errno == ENOSYS) {
                        struct outcome o = {-1 - (long)i, ENOSYS};
                        return o;
                }
        }
        return result(0);
}

START_TEST(test_recent_syscalls_libseccomp_knows_reach_the_kernel)
{
        expect_works(probe_recent_known_syscalls, "close_range ... fchmodat2");
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

        tc = tcase_create("socket_families");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_socket_of_every_family_outside_the_allow_list_answers_eafnosupport);
        tcase_add_test(tc, test_socketpair_of_a_refused_family_answers_eafnosupport);
        tcase_add_test(tc, test_allowed_families_reach_the_kernel);
        tcase_add_test(tc, test_socket_af_alg_af_packet_af_key_refused);
        tcase_add_test(tc, test_af_packet_refused_before_the_capability_check);
        tcase_add_test(tc, test_netlink_protocols_other_than_route_refused);
        suite_add_tcase(s, tc);

        tc = tcase_create("project_quota_ioctls");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_ioctl_fs_ioc_fssetxattr_refused_with_eperm);
        tcase_add_test(tc, test_ioctl_fs_ioc_setflags_refused_with_eperm);
        tcase_add_test(tc, test_ioctl_fs_ioc_fsgetxattr_and_getflags_allowed);
        tcase_add_test(tc, test_fcntl_setlease_refused_with_eperm);
        suite_add_tcase(s, tc);

        tc = tcase_create("unknown_syscalls");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_new_kernel_syscalls_unknown_to_libseccomp_answer_enosys);
        tcase_add_test(tc, test_every_native_syscall_number_gets_the_policy_answer);
#if defined(__x86_64__)
        tcase_add_test(tc, test_every_i386_syscall_number_gets_the_policy_answer);
#endif
        tcase_add_test(tc, test_every_x32_syscall_number_gets_the_policy_answer);
        tcase_add_test(tc, test_numbers_beyond_every_table_answer_enosys);
        suite_add_tcase(s, tc);

        tc = tcase_create("compat_abis");
        tcase_set_timeout(tc, 30);
#if defined(__x86_64__)
        tcase_add_test(tc, test_i386_unshare_newuser_refused_with_eperm);
        tcase_add_test(tc, test_i386_abi_refuses_the_same_calls);
        tcase_add_test(tc, test_i386_socket_of_a_refused_family_answers_eafnosupport);
        tcase_add_test(tc, test_i386_socketcall_socket_and_socketpair_refused);
        tcase_add_test(tc, test_i386_unix_socket_works_and_fssetxattr_refused);
#endif
        tcase_add_test(tc, test_x32_unshare_newuser_refused);
        tcase_add_test(tc, test_x32_abi_refuses_the_same_calls);
        tcase_add_test(tc, test_x32_refused_families_and_fssetxattr);
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
        tcase_add_test(tc, test_coreutils_gcc_and_git_run_under_filter);
        tcase_add_test(tc, test_ordinary_networking_works);
        tcase_add_test(tc, test_recent_syscalls_libseccomp_knows_reach_the_kernel);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        sh_error *err = NULL;
        int k;

        /* The control runs compare each refused call with what root gets without the
         * filter (mount, keyctl, unshare succeed or fail differently for root); as another
         * user the comparison would prove nothing. */
        k = ut_need_root("needs root (each refusal is checked against the same call made by "
                         "root without the filter)");
        if (k)
                return k;
        if (sh_seccomp_build(&filter, &err) < 0) {
                fprintf(stderr, "test_seccomp: building the filter failed: %s\n",
                        err && err->msg ? err->msg : "?");
                sh_error_release(&err);
                return 1;
        }
        k = ut_run(seccomp_suite());
        sh_seccomp_free(filter);
        return k;
}
