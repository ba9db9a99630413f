/* test_helper_confine.c: the root helpers' confinement seen from inside: the persist helper
 * with a probe in place of rsync (sockets, network namespace, seccomp, capabilities, the
 * byte cap) and the remover's allow-list; needs root, else exits 77. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/persist/persist-internal.h"
#include "sh/fsops.h"
#include "sh/helper.h"
#include "sh/jail.h"
#include "sh/seccomp.h"
#include "unit.h"

#ifndef SH_CONFINE_PROBE
#error "SH_CONFINE_PROBE: path of the probe binary (tests/CMakeLists.txt)"
#endif

#define PROBE_ABSTRACT "sh-confine-probe" /* as in tests/helpers/confine_probe.c */
#define OUT_MAX        (64 * 1024)

static char tmp[200]; /* $TMPDIR/sh-test-confine-XXXXXX */
static char ws[256], arch[256];
static sh_seccomp *sandbox_filter;
static const sh_persist_libs *test_libs;          /* the helper's a.libs */
static const char *test_rsync = SH_CONFINE_PROBE; /* the helper's a.rsync */

/* Read fd until EOF within `ms` (the output of the helper), then reap pid with a bound. */
static int collect(pid_t pid, int fd, char *out, size_t size, unsigned ms)
{
        uint64_t deadline = ut_now_ms() + ms;
        size_t len = 0;

        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int64_t left = (int64_t)(deadline - ut_now_ms());
                ssize_t n;

                if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                        break;
                n = read(fd, out + len, size - 1 - len);
                if (n <= 0)
                        break;
                len += (size_t)n;
                if (len == size - 1)
                        break;
        }
        out[len] = '\0';
        close(fd);
        return ut_wait_pid(pid, (unsigned)(deadline + 5000 - ut_now_ms()));
}

/* The capabilities of the Kubernetes manifest (contrib/k8s/deployment.yaml). */
static const cap_value_t pod_caps[] = {CAP_SYS_ADMIN, CAP_SETUID,       CAP_SETGID,
                                       CAP_SETPCAP,   CAP_NET_ADMIN,    CAP_KILL,
                                       CAP_CHOWN,     CAP_DAC_OVERRIDE, CAP_FOWNER};

static void become_pod(void)
{
        cap_t c = cap_init();

        for (cap_value_t cap = 0; cap <= CAP_LAST_CAP; cap++) {
                bool keep = false;

                for (size_t i = 0; i < sizeof(pod_caps) / sizeof(pod_caps[0]); i++)
                        keep = keep || pod_caps[i] == cap;
                if (!keep && cap_drop_bound(cap) < 0)
                        _exit(90);
        }
        if (!c ||
            cap_set_flag(c, CAP_EFFECTIVE, sizeof(pod_caps) / sizeof(pod_caps[0]), pod_caps,
                         CAP_SET) < 0 ||
            cap_set_flag(c, CAP_PERMITTED, sizeof(pod_caps) / sizeof(pod_caps[0]), pod_caps,
                         CAP_SET) < 0 ||
            cap_set_proc(c) < 0)
                _exit(91);
        cap_free(c);
}

/* Run the persist helper (the daemon's child main) with the probe in place of rsync; its
 * output in out, its wait status returned. */
static int run_helper(bool restore, uint64_t max_bytes, bool pod, char *out, size_t size)
{
        sh_error *err = NULL;
        sh_persist_child_arg a = {
                .restore = restore,
                .uid = 0,
                .gid = 0,
                .rsync = test_rsync,
                .nfs_root = arch,
                .item_id = "item",
                .max_bytes = max_bytes,
                .io_timeout_s = 7,
                .nprocs = 0,
                .sandbox_filter = sh_seccomp_prog(sandbox_filter),
                .socket_filter = sh_helper_rsync_filter(&err),
                .libs = test_libs,
        };
        int p[2], wsfd;
        pid_t pid;

        ck_assert_ptr_nonnull(a.socket_filter);
        wsfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(wsfd, 0);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                sigset_t none;

                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                if (pod)
                        become_pod();
                if (dup2(wsfd, 3) < 0 || dup2(p[1], 4) < 0)
                        _exit(92);
                syscall(SYS_close_range, 5U, ~0U, 0);
                _exit(sh_persist_child_main(&a) & 0xff);
        }
        close(wsfd);
        close(p[1]);
        return collect(pid, p[0], out, size, 30000);
}

static bool has_line(const char *out, const char *line)
{
        size_t n = strlen(line);

        for (const char *s = out; (s = strstr(s, line)); s += n)
                if ((s == out || s[-1] == '\n') && (s[n] == '\n' || s[n] == '\0'))
                        return true;
        return false;
}

#define ck_line(out, line) ck_assert_msg(has_line(out, line), "no '%s' in:\n%s", line, out)

/* A persist's --temp-dir is ".sh-rsync.<16 hex>", relative (to the destination). */
static void e_tempdir(const char *out)
{
        const char *t = strstr(out, "tempdir=");

        ck_assert_msg(t, "no --temp-dir:\n%s", out);
        ck_assert_msg(strncmp(t + 8, ".sh-rsync.", 10) == 0 &&
                              strspn(t + 18, "0123456789abcdef") == 16 && t[34] == '\n',
                      "%s", out);
}

/* The signal a confined helper dies of at its first syscall through the i386 ABI: the
 * filter's SIGSYS, or, on a kernel that takes no int $0x80 at all, the fault that comes before
 * any filter (the ABI is then out of every process's reach). */
static int i386_death(void)
{
        return ut_ia32_available() ? SIGSYS : SIGSEGV;
}

/* rsync's stand-in sees sockets of AF_UNIX only, a network namespace without the host's
 * abstract sockets, the sandbox's own filter (no mount, no user namespace), no_new_privs, no
 * CAP_DAC_READ_SEARCH or CAP_SYS_ADMIN, and dies at its first syscall through the i386 ABI. */
START_TEST(rsync_stand_in_is_confined)
{
        static char out[OUT_MAX];
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        socklen_t sl =
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(PROBE_ABSTRACT));
        int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), c, st;
        unsigned long long eff = 0;
        const char *e;

        /* the host's abstract socket, which the probe must not reach */
        memcpy(sa.sun_path + 1, PROBE_ABSTRACT, strlen(PROBE_ABSTRACT));
        ck_assert_int_ge(l, 0);
        if (bind(l, (struct sockaddr *)&sa, sl) == 0)
                ck_assert_int_eq(listen(l, 4), 0);
        else
                ck_assert_int_eq(errno, EADDRINUSE); /* another run's: just as reachable */
        c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(connect(c, (struct sockaddr *)&sa, sl), 0);
        close(c);

        st = run_helper(false, 1 << 30, false, out, sizeof(out));
        close(l);
        ck_line(out, "timeout=7");
        ck_line(out, "inet=97"); /* EAFNOSUPPORT */
        ck_line(out, "inet6=97");
        ck_line(out, "netlink=97");
        ck_line(out, "packet=97");
        ck_line(out, "socketpair_inet=97");
        ck_line(out, "unix=0");
        ck_line(out, "socketpair=0");
        ck_line(out, "abstract=111"); /* ECONNREFUSED: no such name in its namespace */
        ck_line(out, "mount=1");
        ck_line(out, "unshare_user=1"); /* the sandbox's filter: an unprivileged process may */
        ck_line(out, "seccomp=2");
        ck_line(out, "nnp=1");
        e = strstr(out, "capeff=");
        ck_assert_ptr_nonnull(e);
        eff = strtoull(e + 7, NULL, 16);
        ck_assert_msg(
                !(eff & (1ULL << CAP_DAC_READ_SEARCH | 1ULL << CAP_SYS_ADMIN | 1ULL << CAP_CHOWN)),
                "capeff %llx", eff);
        ck_assert_msg(eff & (1ULL << CAP_DAC_OVERRIDE), "capeff %llx", eff);
        ck_line(out, "i386=next");
        ck_assert_msg(!strstr(out, "i386=alive"), "%s", out);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 128 + i386_death(), "status 0x%x:\n%s",
                      st, out);
}
END_TEST

/* With the manifest's capabilities only (no FSETID, no DAC_READ_SEARCH), a restore runs with
 * what it needs and the daemon has: CHOWN, DAC_OVERRIDE, FOWNER. */
START_TEST(rsync_keeps_the_capabilities_the_pod_has)
{
        static char out[OUT_MAX];
        char item[300];
        const char *e;
        unsigned long long want = 1ULL << CAP_CHOWN | 1ULL << CAP_DAC_OVERRIDE | 1ULL << CAP_FOWNER;

        snprintf(item, sizeof(item), "%s/item", arch);
        ck_assert(mkdir(item, 0755) == 0 || errno == EEXIST);
        run_helper(true, 1 << 30, true, out, sizeof(out));
        e = strstr(out, "capeff=");
        ck_assert_msg(e, "the probe did not run:\n%s", out);
        ck_assert_msg(strtoull(e + 7, NULL, 16) == want, "capeff %s, want %llx", e + 7, want);
}
END_TEST

/* Above the byte cap (a sparse file counts with its holes) the helper fails, naming the
 * setting, and never starts rsync. */
START_TEST(sparse_tree_above_the_cap_never_reaches_rsync)
{
        static char out[OUT_MAX];
        char p[300];
        int fd, st;

        snprintf(p, sizeof(p), "%s/sparse", ws);
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, 2 << 20), 0);
        close(fd);
        st = run_helper(false, 1 << 20, false, out, sizeof(out));
        unlink(p);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == SH_PERSIST_EXIT_TOO_BIG,
                      "status 0x%x:\n%s", st, out);
        ck_assert_msg(strstr(out, "SANDBOX_HOST_PERSIST_MAX_BYTES") && strstr(out, "workspace"),
                      "%s", out);
        ck_assert_msg(!strstr(out, "argc="), "rsync ran:\n%s", out);
}
END_TEST

/* rsync's -S (which makes its receiver write in 1 KiB pieces) and -H (which indexes every file
 * by inode) only when the source has a sparse file or a file of several names, on both
 * directions; a dense file full of zeros is no sparse file. The temporary directory is named
 * relative to the destination. */
START_TEST(rsync_gets_sparse_and_hard_links_only_when_the_tree_has_them)
{
        static char out[OUT_MAX];
        char zeros[300], sparse[300], a[300], b[300], item[300], isparse[320];
        static char buf[64 << 10];
        int fd;

        snprintf(zeros, sizeof(zeros), "%s/zeros", ws);
        fd = open(zeros, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
        ck_assert_int_eq(fsync(fd), 0);
        close(fd);
        run_helper(false, 1 << 30, false, out, sizeof(out));
        ck_line(out, "opts=-rlpt");
        e_tempdir(out);

        snprintf(sparse, sizeof(sparse), "%s/sub/sparse", ws);
        ck_assert_int_eq(mkdir(ut_path(ws, "sub"), 0755), 0);
        fd = open(sparse, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pwrite(fd, "x", 1, 1 << 20), 1);
        close(fd);
        run_helper(false, 1 << 30, false, out, sizeof(out));
        ck_line(out, "opts=-rlptS");

        snprintf(a, sizeof(a), "%s/sub/a", ws);
        snprintf(b, sizeof(b), "%s/b", ws);
        ut_write_file(a, "linked");
        ck_assert_int_eq(link(a, b), 0);
        run_helper(false, 1 << 30, false, out, sizeof(out));
        ck_line(out, "opts=-rlptHS");
        ck_assert_int_eq(unlink(sparse), 0);
        run_helper(false, 1 << 30, false, out, sizeof(out));
        ck_line(out, "opts=-rlptH");

        /* restore: what the archive item holds decides */
        snprintf(item, sizeof(item), "%s/item", arch);
        ck_assert(mkdir(item, 0755) == 0 || errno == EEXIST);
        ut_write_file(ut_path(item, "plain"), "plain");
        run_helper(true, 1 << 30, false, out, sizeof(out));
        ck_line(out, "opts=-rlpt");
        ck_assert_msg(!strstr(out, "tempdir="), "%s", out);
        snprintf(isparse, sizeof(isparse), "%s/sparse", item);
        fd = open(isparse, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
        close(fd);
        run_helper(true, 1 << 30, false, out, sizeof(out));
        ck_line(out, "opts=-rlptS");
        unlink(isparse);
        unlink(ut_path(item, "plain"));
        unlink(a);
        unlink(b);
        unlink(zeros);
        rmdir(ut_path(ws, "sub"));
}
END_TEST

/* A file at `lib` (not a library, never loaded) added to l's list, as the loader named it. */
static void add_fake_library(sh_persist_libs *l, const char *lib)
{
        ut_write_file(lib, "not a library, never loaded");
        l->path[l->n] = strdup(lib);
        ck_assert_ptr_nonnull(l->path[l->n]);
        ck_assert_int_eq(stat(lib, &l->st[l->n]), 0);
        l->n++;
}

/* The libraries found once (at the daemon's start) are what a helper binds while rsync and
 * each library are the same files; one changed since, the helper asks the loader again. A
 * host file added to the list shows which: its directory is in rsync's LD_LIBRARY_PATH only
 * when the list was used. */
START_TEST(library_list_found_once_is_used_until_a_file_changes)
{
        static char out[OUT_MAX];
        sh_persist_libs *l = NULL;
        char dir[300], lib[320], want[330];

        ck_assert_int_eq(sh_persist_libs_discover(SH_CONFINE_PROBE, &l), 0);
        ck_assert_int_ge(l->n, 1);
        ck_assert_int_lt(l->n, SH_PERSIST_LIBS_MAX);
        for (int i = 0; i < l->n; i++)
                ck_assert_msg(l->path[i][0] == '/', "%s", l->path[i]);
        snprintf(dir, sizeof(dir), "%s/fakelib", tmp);
        ck_assert_int_eq(mkdir(dir, 0755), 0);
        snprintf(lib, sizeof(lib), "%s/libfake.so.1", dir);
        snprintf(want, sizeof(want), "%s", dir);
        add_fake_library(l, lib);
        test_libs = l;

        run_helper(false, 1 << 30, false, out, sizeof(out));
        ck_assert_msg(strstr(out, "argc=") && strstr(out, want), "the list was not used:\n%s", out);

        /* the "library" replaced (an upgrade): asked again, the probe still runs */
        ck_assert_int_eq(unlink(lib), 0);
        ut_write_file(lib, "upgraded");
        run_helper(false, 1 << 30, false, out, sizeof(out));
        ck_assert_msg(strstr(out, "argc=") && !strstr(out, want), "a stale list was used:\n%s",
                      out);
        test_libs = NULL;
        sh_persist_libs_free(l);
        unlink(lib);
        rmdir(dir);
}
END_TEST

/* Copy the file at `from` to `to` (mode 0755). */
static void copy_exe(const char *from, const char *to)
{
        int in = open(from, O_RDONLY | O_CLOEXEC);
        int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
        ssize_t n;

        ck_assert_int_ge(in, 0);
        ck_assert_int_ge(out, 0);
        while ((n = copy_file_range(in, NULL, out, NULL, 1 << 20, 0)) > 0)
                ;
        ck_assert_int_eq(n, 0);
        close(in);
        close(out);
}

/* rsync and its libraries are bound wherever they live on the host: below /tmp too, where the
 * helper's new root (a tmpfs) goes, hiding what the host has there (an rsync built under /tmp,
 * a checkout there: the probe itself). */
START_TEST(rsync_and_its_libraries_below_tmp_are_bound)
{
        static char out[OUT_MAX];
        sh_persist_libs *l = NULL;
        char dir[64], bin[96], lib[96];

        snprintf(dir, sizeof(dir), "/tmp/sh-test-confine-bin-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(bin, sizeof(bin), "%s/rsync", dir);
        snprintf(lib, sizeof(lib), "%s/libfake.so.1", dir);
        copy_exe(SH_CONFINE_PROBE, bin);
        ck_assert_int_eq(sh_persist_libs_discover(bin, &l), 0);
        ck_assert_int_lt(l->n, SH_PERSIST_LIBS_MAX);
        add_fake_library(l, lib);
        test_libs = l;
        test_rsync = bin;

        run_helper(false, 1 << 30, false, out, sizeof(out));
        test_libs = NULL;
        test_rsync = SH_CONFINE_PROBE;
        sh_persist_libs_free(l);
        unlink(lib);
        unlink(bin);
        rmdir(dir);
        ck_assert_msg(strstr(out, "argc="), "the probe below /tmp did not run:\n%s", out);
        ck_assert_msg(strstr(out, dir), "the library below /tmp was not bound:\n%s", out);
}
END_TEST

/* The remover: a network namespace of its own and an allow-list that removes trees and
 * nothing else (no socket, no exec, no fork, no mount, no ptrace, no other ABI). */
START_TEST(remover_allow_list_removes_trees_and_nothing_else)
{
        sh_error *err = NULL;
        const struct sock_fprog *f = sh_helper_remover_filter(&err);
        struct stat host_ns;
        char tree[300];
        pid_t pid;
        int st, p[2];
        struct {
                int rm, ns_differs, sock, exec, fork, mount, ptrace;
        } rep = {-1, -1, -1, -1, -1, -1, -1};

        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(stat("/proc/self/ns/net", &host_ns), 0);
        snprintf(tree, sizeof(tree), "%s/doomed", tmp);
        ck_assert_int_eq(mkdir(tree, 0755), 0);
        ut_write_file(ut_path(tree, "a"), "A");
        snprintf(tree, sizeof(tree), "%s/doomed/sub", tmp);
        ck_assert_int_eq(mkdir(tree, 0700), 0);
        ut_write_file(ut_path(tree, "b"), "B");
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                struct stat ns;
                int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                char *const argv[] = {"/bin/true", NULL};

                /* a fault (no i386 ABI at all) kills, as it would the remover: no sanitizer
                 * handles it (set now: the filter refuses sigaction) */
                signal(SIGSEGV, SIG_DFL);
                if (dfd < 0 || sh_jail_confine(f) < 0)
                        _exit(80);
                rep.rm = sh_fs_remove_tree(dfd, "doomed", &err) == 0 &&
                         faccessat(dfd, "doomed", F_OK, AT_SYMLINK_NOFOLLOW) < 0;
                rep.ns_differs = stat("/proc/self/ns/net", &ns) == 0 && ns.st_ino != host_ns.st_ino;
                rep.sock = socket(AF_UNIX, SOCK_STREAM, 0) < 0 ? errno : 0;
                rep.exec = (execve(argv[0], argv, NULL), errno);
                rep.fork = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0) < 0 ? errno : 0;
                rep.mount = mount("none", "/", "tmpfs", 0, NULL) < 0 ? errno : 0;
                rep.ptrace = ptrace(PTRACE_TRACEME, 0, 0, 0) < 0 ? errno : 0;
                if (write(p[1], &rep, sizeof(rep)) != sizeof(rep))
                        _exit(81);
                {
                        long r;

                        __asm__ volatile("int $0x80" : "=a"(r) : "a"(20) : "memory");
                }
                _exit(82);
        }
        close(p[1]);
        ck_assert_int_eq(read(p[0], &rep, sizeof(rep)), (ssize_t)sizeof(rep));
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_int_eq(rep.rm, 1);
        ck_assert_int_eq(rep.ns_differs, 1);
        ck_assert_int_eq(rep.sock, ENOSYS);
        ck_assert_int_eq(rep.exec, ENOSYS);
        ck_assert_int_eq(rep.fork, ENOSYS);
        ck_assert_int_eq(rep.mount, ENOSYS);
        ck_assert_int_eq(rep.ptrace, ENOSYS);
        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == i386_death(), "status 0x%x", st);
}
END_TEST

static void setup_ws(void)
{
        ut_write_file(ut_path(ws, "f"), "data");
}

static int cleanup(void)
{
        if (ut_rm_rf(tmp) < 0) {
                fprintf(stderr, "left behind: %s\n", tmp);
                return 1;
        }
        return 0;
}

int main(void)
{
        Suite *s = suite_create("helper_confine");
        TCase *tc = tcase_create("confine");
        sh_error *err = NULL;
        int k = ut_need_root("the helpers need root (namespaces, mounts)");

        if (k)
                return k;
        if (ut_mkdtemp(tmp, sizeof(tmp), "confine") < 0) {
                perror("mkdtemp");
                return 1;
        }
        snprintf(ws, sizeof(ws), "%s/ws", tmp);
        snprintf(arch, sizeof(arch), "%s/arch", tmp);
        if (mkdir(ws, 0755) < 0 || mkdir(arch, 0755) < 0 ||
            sh_seccomp_build(&sandbox_filter, &err) < 0) {
                perror("setup");
                sh_error_release(&err);
                cleanup();
                return 1;
        }
        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, setup_ws, NULL);
        tcase_add_test(tc, rsync_stand_in_is_confined);
        tcase_add_test(tc, rsync_keeps_the_capabilities_the_pod_has);
        tcase_add_test(tc, sparse_tree_above_the_cap_never_reaches_rsync);
        tcase_add_test(tc, rsync_gets_sparse_and_hard_links_only_when_the_tree_has_them);
        tcase_add_test(tc, library_list_found_once_is_used_until_a_file_changes);
        tcase_add_test(tc, rsync_and_its_libraries_below_tmp_are_bound);
        tcase_add_test(tc, remover_allow_list_removes_trees_and_nothing_else);
        suite_add_tcase(s, tc);
        k = ut_run_forked(s);
        if (cleanup())
                k = EXIT_FAILURE;
        sh_seccomp_free(sandbox_filter);
        return k;
}
