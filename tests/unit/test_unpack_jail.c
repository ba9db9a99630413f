/* test_unpack_jail.c: the tool unpacker's confinement, observed from outside and probed from inside with a test payload in place of the extractor (namespaces, empty root, uid, capabilities, seccomp, cgroup, no network, nothing alive at install, the queue); needs root, else exits 77. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/tools/unpack-internal.h"
#include "sh/cgroup.h"
#include "sh/loop.h"
#include "sh/spawn.h"
#include "unit.h"

#define UNPACK_UID 199999u
#define SHA        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* One daemon-like world per test (each test runs in its own forked process). */
typedef struct world {
        char root[96];
        sh_loop *loop;
        sh_cgroup_root *cgroot;
        sh_store *store;
} world;

typedef struct outcome {
        bool done, ok;
        char reason[SH_TOOLS_REASON_MAX];
        unsigned reports;
} outcome;

static world W;

/* Set in main(), shared by every test (they run one after the other, each in a fork): a
 * test that fails half-way leaves its cgroups and files to the next open of the same
 * instance, and main() removes whatever is left at the end. */
static char instance[32];
static char base[80];

static void world_up(void)
{
        sh_error *err = NULL;

        snprintf(W.root, sizeof(W.root), "%s/root-XXXXXX", base);
        ck_assert_ptr_nonnull(mkdtemp(W.root));
        ck_assert_int_eq(chmod(W.root, 0711), 0);
        ck_assert_int_eq(sh_loop_new(&W.loop), 0);
        if (sh_cgroup_root_open(instance, &W.cgroot, &err) < 0)
                ck_abort_msg("cgroup root: %s", err->msg);
        if (sh_store_open(W.root, W.loop, UNPACK_UID, W.cgroot, &W.store, &err) < 0)
                ck_abort_msg("store: %s", err->msg);
}

static void kill_intruder(void);

static void world_down(void)
{
        sh_error *err = NULL;

        kill_intruder(); /* a failed test must not leave its process behind */

        sh_store_free(W.store);    /* accepts NULL */
        sh_child_wait_all(W.loop); /* the store goes with its last child's report */
        if (sh_cgroup_root_destroy(W.cgroot, &err) < 0)
                fprintf(stderr, "cgroup cleanup: %s\n", err->msg);
        sh_error_release(&err);
        sh_cgroup_root_free(W.cgroot);
        sh_loop_free(W.loop);
        if (ut_rm_rf(W.root) < 0)
                fprintf(stderr, "left behind: %s\n", W.root);
}

static void on_done(bool ok, const char *reason, void *data)
{
        outcome *o = data;

        o->done = true;
        o->ok = ok;
        o->reports++;
        snprintf(o->reason, sizeof(o->reason), "%s", reason ? reason : "");
}

/* ---- payloads: they run in the confined child, under its seccomp filter ------------------- */

/* Block until the test has looked from outside (one byte on the "bundle", a pipe). */
static void wait_for_test(void)
{
        char c;

        while (read(FD_BUNDLE, &c, 1) < 0 && errno == EINTR)
                ;
}

static void say(const char *what, long v, int e)
{
        char buf[128];
        int n = snprintf(buf, sizeof(buf), "%s=%ld/%d;", what, v, v < 0 ? e : 0);

        (void)!write(FD_REASON, buf, (size_t)n);
}

/* Tries what a compromised unpacker would try and reports each result. */
static int probe_payload(void)
{
        char *const argv[] = {"/bin/sh", "-c", "true", NULL};
        void *p;
        long r;
        int fd;

        wait_for_test();
        r = socket(AF_INET, SOCK_STREAM, 0);
        say("socket", r, errno);
        r = socket(AF_UNIX, SOCK_STREAM, 0);
        say("unix", r, errno);
        r = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
        say("passwd", r, errno);
        r = execve("/bin/sh", argv, argv + 3);
        say("execve", r, errno);
        p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        say("mmapexec", p == MAP_FAILED ? -1 : 0, errno);
        r = kill(-1, SIGKILL);
        say("killall", r, errno);
        r = mkdir("/escape", 0755);
        say("mkdirroot", r, errno);
        r = getpid();
        say("pid", r, 0);
        fd = open("written", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        say("write", fd, errno);
        return 1; /* never install a probe's tree */
}

/* Writes one file and succeeds: the tree is finished and installed. */
static int install_payload(void)
{
        int fd;

        wait_for_test();
        fd = open("installed-file", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, "x", 1) != 1)
                return 1;
        close(fd);
        return 0;
}

/* ---- driving the loop ---------------------------------------------------------------- */

typedef struct watch {
        sh_unpack *u;
        outcome *o;
        void (*look)(pid_t pid, void *arg); /* once, while the payload waits */
        void *arg;
        int release_fd;
        bool looked;
        uint64_t deadline;
} watch;

static char *read_file(const char *path, char *buf, size_t size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return NULL;
        n = read(fd, buf, size - 1);
        close(fd);
        if (n < 0)
                return NULL;
        buf[n] = '\0';
        return buf;
}

/* The child has reached its payload once it waits in read(FD_BUNDLE) (every confinement step
 * is done by then). /proc/PID/syscall: the number, then the arguments. */
static bool in_payload(pid_t pid)
{
        char path[64], buf[512];

        snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
        return read_file(path, buf, sizeof(buf)) && strncmp(buf, "0 0x3 ", 6) == 0;
}

static void tick(sh_loop *l, sh_timer *t, void *data)
{
        watch *w = data;
        pid_t pid = w->o->done ? -1 : sh_unpack_pid(w->u);

        if (w->o->done) {
                sh_loop_stop(l);
                return;
        }
        if (sh_now_ms() > w->deadline) {
                fprintf(stderr, "the unpack did not finish in time\n");
                sh_loop_stop(l);
                return;
        }
        if (!w->looked && pid > 0 && in_payload(pid)) {
                w->looked = true;
                if (w->look)
                        w->look(pid, w->arg);
                ck_assert_int_eq(write(w->release_fd, "g", 1), 1);
        }
        ck_assert_ptr_nonnull(sh_loop_add_timer(l, 5, tick, w));
}

static void run(sh_unpack_payload_fn payload, outcome *o, void (*look)(pid_t, void *), void *arg)
{
        sh_error *err = NULL;
        int p[2];
        watch w = {.o = o, .look = look, .arg = arg};

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        w.release_fd = p[1];
        w.deadline = sh_now_ms() + 20000;
        w.u = sh_unpack_start_with(W.store, p[0], SHA, payload, on_done, o, &err);
        if (!w.u)
                ck_abort_msg("start: %s", err->msg);
        close(p[0]);
        ck_assert_ptr_nonnull(sh_loop_add_timer(W.loop, 5, tick, &w));
        ck_assert_int_eq(sh_loop_run(W.loop), 0);
        close(p[1]);
        ck_assert_msg(o->done, "no report");
        ck_assert_msg(w.looked, "the payload was never reached: %s", o->reason);
}

/* ---- looking from outside -------------------------------------------------------------- */

typedef struct seen {
        bool ns_differ[5];
        char netdev[4096];
        char status[4096];
        char cgroup[4096];
        char mountinfo[8192];
        char root_entries[256];
        unsigned long long memory_limit; /* of the cgroup it runs in */
} seen;

/* The memory limit of the cgroup a /proc/PID/cgroup text names (v1: the memory hierarchy's
 * memory.limit_in_bytes; v2: memory.max), found through our own mountinfo. 0 if unknown. */
static unsigned long long memory_limit_of(const char *cgroup_text)
{
        static char mi[1 << 20];
        char text[4096], path[1024] = "", file[4096], buf[64], *line, *save = NULL;
        char *mp = NULL, *mroot = NULL, *dir = NULL;
        bool v1 = strstr(cgroup_text, ":memory:") != NULL;
        unsigned long long v = 0;

        snprintf(text, sizeof(text), "%s", cgroup_text);
        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

                if (!c2)
                        continue;
                *c2 = '\0';
                if ((v1 && strcmp(c1 + 1, "memory") == 0) || (!v1 && c1[1] == '\0'))
                        snprintf(path, sizeof(path), "%s", c2 + 1);
        }
        if (!path[0] || !read_file("/proc/self/mountinfo", mi, sizeof(mi)))
                return 0;
        if (sh_cg_parse_mountinfo_ex(mi, v1 ? "memory" : NULL, &mp, &mroot) == 0 &&
            sh_cg_path_join(mp, mroot, path, &dir) == 0) {
                snprintf(file, sizeof(file), "%s/%s", dir,
                         v1 ? "memory.limit_in_bytes" : "memory.max");
                if (read_file(file, buf, sizeof(buf)))
                        v = strtoull(buf, NULL, 10);
                else
                        fprintf(stderr, "cannot read %s\n", file);
        }
        free(mp);
        free(mroot);
        free(dir);
        return v;
}

static void look_around(pid_t pid, void *arg)
{
        static const char *const ns[] = {"net", "pid", "mnt", "ipc", "uts"};
        seen *s = arg;
        char path[96], a[128], b[128];
        DIR *d;
        struct dirent *de;

        for (size_t i = 0; i < 5; i++) {
                ssize_t n, m;

                snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, ns[i]);
                n = readlink(path, a, sizeof(a) - 1);
                snprintf(path, sizeof(path), "/proc/self/ns/%s", ns[i]);
                m = readlink(path, b, sizeof(b) - 1);
                ck_assert(n > 0 && m > 0);
                a[n] = b[m] = '\0';
                s->ns_differ[i] = strcmp(a, b) != 0;
        }
        snprintf(path, sizeof(path), "/proc/%d/net/dev", (int)pid);
        ck_assert_ptr_nonnull(read_file(path, s->netdev, sizeof(s->netdev)));
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        ck_assert_ptr_nonnull(read_file(path, s->status, sizeof(s->status)));
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        ck_assert_ptr_nonnull(read_file(path, s->cgroup, sizeof(s->cgroup)));
        snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
        ck_assert_ptr_nonnull(read_file(path, s->mountinfo, sizeof(s->mountinfo)));
        s->memory_limit = memory_limit_of(s->cgroup);
        snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
        d = opendir(path);
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        snprintf(s->root_entries + strlen(s->root_entries),
                                 sizeof(s->root_entries) - strlen(s->root_entries), "%s;",
                                 de->d_name);
        closedir(d);
}

static const char *status_field(const char *status, const char *name, char *out, size_t size)
{
        const char *p = strstr(status, name);
        size_t n;

        if (!p)
                return "";
        p += strlen(name);
        p += strspn(p, " \t");
        n = strcspn(p, "\n");
        snprintf(out, size, "%.*s", (int)n, p);
        return out;
}

START_TEST(jail_has_own_namespaces_and_no_network)
{
        outcome o = {0};
        seen s = {0};
        char *line;
        unsigned ifaces = 0;

        run(probe_payload, &o, look_around, &s);
        for (size_t i = 0; i < 5; i++)
                ck_assert_msg(s.ns_differ[i], "namespace %zu is the host's", i);
        /* /proc/net/dev: two header lines, then one line per interface: only lo */
        line = strtok(s.netdev, "\n");
        for (int k = 0; line; line = strtok(NULL, "\n"), k++)
                if (k >= 2) {
                        ck_assert_msg(strstr(line, "lo:") != NULL, "interface: %s", line);
                        ifaces++;
                }
        ck_assert_uint_eq(ifaces, 1);
        /* from inside: PID 1, no socket of any family (the filter), no host to reach */
        ck_assert_msg(strstr(o.reason, "pid=1/0;"), "%s", o.reason);
        ck_assert_msg(strstr(o.reason, "socket=-1/1;"), "%s", o.reason); /* EPERM */
        ck_assert_msg(strstr(o.reason, "unix=-1/1;"), "%s", o.reason);
        ck_assert_msg(strstr(o.reason, "killall=-1/1;"), "%s", o.reason);
}
END_TEST

START_TEST(jail_root_holds_only_the_staging_directory)
{
        outcome o = {0};
        seen s = {0};
        char *line;
        bool found_out = false;

        run(probe_payload, &o, look_around, &s);
        ck_assert_str_eq(s.root_entries, "out;");
        for (line = strtok(s.mountinfo, "\n"); line; line = strtok(NULL, "\n")) {
                char *f = line;

                /* id parent dev root mountpoint options ... */
                for (int k = 0; k < 4 && f; k++)
                        f = strchr(f + 1, ' ');
                ck_assert_ptr_nonnull(f);
                if (strncmp(f, " / ", 3) == 0)
                        ck_assert_msg(strstr(f, " ro,") || strstr(f, " ro "), "root: %s", line);
                if (strncmp(f, " /out ", 6) == 0) {
                        found_out = true;
                        ck_assert_msg(strstr(f, "nosuid") && strstr(f, "nodev") &&
                                              strstr(f, "noexec"),
                                      "/out: %s", line);
                }
        }
        ck_assert(found_out);
        ck_assert_msg(strstr(o.reason, "passwd=-1/2;"), "%s", o.reason); /* ENOENT */
        /* the root is read-only (and not the unpacker's) */
        ck_assert_msg(strstr(o.reason, "mkdirroot=-1/30;") || strstr(o.reason, "mkdirroot=-1/13;"),
                      "%s", o.reason);
        ck_assert_msg(strstr(o.reason, "write=") && !strstr(o.reason, "write=-1"), "%s", o.reason);
}
END_TEST

START_TEST(jail_is_unprivileged_and_filtered)
{
        outcome o = {0};
        seen s = {0};
        char f[256];

        run(probe_payload, &o, look_around, &s);
        ck_assert_str_eq(status_field(s.status, "\nUid:", f, sizeof(f)),
                         "199999\t199999\t199999\t199999");
        ck_assert_str_eq(status_field(s.status, "\nGid:", f, sizeof(f)),
                         "199999\t199999\t199999\t199999");
        ck_assert_str_eq(status_field(s.status, "\nGroups:", f, sizeof(f)), "");
        ck_assert_str_eq(status_field(s.status, "\nCapEff:", f, sizeof(f)), "0000000000000000");
        ck_assert_str_eq(status_field(s.status, "\nCapPrm:", f, sizeof(f)), "0000000000000000");
        ck_assert_str_eq(status_field(s.status, "\nCapBnd:", f, sizeof(f)), "0000000000000000");
        ck_assert_str_eq(status_field(s.status, "\nNoNewPrivs:", f, sizeof(f)), "1");
        ck_assert_str_eq(status_field(s.status, "\nSeccomp:", f, sizeof(f)), "2");
        /* the filter: no program, no executable memory */
        ck_assert_msg(strstr(o.reason, "execve=-1/1;"), "%s", o.reason);
        ck_assert_msg(strstr(o.reason, "mmapexec=-1/1;"), "%s", o.reason);
        ck_assert(!o.ok);
}
END_TEST

START_TEST(jail_runs_in_its_own_limited_cgroup)
{
        outcome o = {0};
        seen s = {0};
        char *line;
        unsigned n = 0;
        bool v1;

        run(probe_payload, &o, look_around, &s);
        v1 = strstr(s.cgroup, ":memory:") != NULL; /* hybrid: the empty cgroup2 is not ours */
        /* every hierarchy (v1: memory, pids, cpu, freezer; v2: one) places it in tools/u<n>
         * of this instance's subtree */
        for (line = strtok(s.cgroup, "\n"); line; line = strtok(NULL, "\n")) {
                char ctl[128] = "", *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                bool ours;

                ck_assert_ptr_nonnull(c2);
                snprintf(ctl, sizeof(ctl), ",%.*s,", (int)(c2 - c1 - 1), c1 + 1);
                ours = strstr(ctl, ",memory,") || strstr(ctl, ",pids,") || strstr(ctl, ",cpu,") ||
                       strstr(ctl, ",freezer,") || (!v1 && strcmp(ctl, ",,") == 0);
                if (!ours)
                        continue;
                ck_assert_msg(strstr(c2, "/sandbox-host.unpack-test-") && strstr(c2, "/tools/u"),
                              "cgroup: %s", line);
                n++;
        }
        /* and that cgroup carries the unpack's own memory limit */
        ck_assert_uint_eq(s.memory_limit, SH_TOOLS_UNPACK_MEMORY_MAX);
        ck_assert_uint_ge(n, 1);
}
END_TEST

/* ---- nothing alive at install ---------------------------------------------------------- */

typedef struct intruder {
        pid_t helper;    /* ours: joined the unpacker's PID namespace, then forked */
        pid_t in_ns;     /* the helper's child: a process of the unpacker's namespace */
        char stage[512]; /* where it keeps writing */
} intruder;

/* What "the unpacker spawned something that lives on" would look like (the filter forbids the
 * unpacker to fork, so the test plays that process): a process inside the unpacker's PID
 * namespace that keeps writing into the staging tree. */
static void plant_intruder(pid_t pid, void *arg)
{
        intruder *in = arg;
        char path[64];
        int p[2], nsfd;
        DIR *d;
        struct dirent *de;
        char stagedir[256];

        snprintf(stagedir, sizeof(stagedir), "%s/tools/.stage", W.root);
        d = opendir(stagedir);
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        snprintf(in->stage, sizeof(in->stage), "%s/%s", stagedir, de->d_name);
        closedir(d);
        ck_assert(in->stage[0]);
        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
        nsfd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(nsfd, 0);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        in->helper = fork();
        ck_assert_int_ge(in->helper, 0);
        if (in->helper == 0) {
                pid_t child;

                if (setns(nsfd, CLONE_NEWPID) < 0)
                        _exit(2);
                child = fork();
                if (child == 0) {
                        char f[600];

                        for (unsigned i = 0;; i++) {
                                snprintf(f, sizeof(f), "%s/late-%u", in->stage, i % 1000);
                                close(open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
                                usleep(2000);
                        }
                }
                (void)!write(p[1], &child, sizeof(child));
                /* reap it at once when it is killed: a zombie of the namespace would hold
                 * the namespace's init in its exit */
                while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
                        ;
                _exit(0);
        }
        close(nsfd);
        close(p[1]);
        ck_assert_int_eq(read(p[0], &in->in_ns, sizeof(in->in_ns)), (ssize_t)sizeof(in->in_ns));
        close(p[0]);
        ck_assert_int_gt(in->in_ns, 0);
        usleep(20000); /* it has written into the tree */
}

static outcome *install_outcome;
static intruder *install_intruder;
static bool intruder_dead_at_report;

static void kill_intruder(void)
{
        if (!install_intruder)
                return;
        if (install_intruder->in_ns > 0)
                (void)kill(install_intruder->in_ns, SIGKILL);
        if (install_intruder->helper > 0) {
                (void)kill(install_intruder->helper, SIGKILL);
                (void)waitpid(install_intruder->helper, NULL, 0);
        }
        install_intruder = NULL;
}

static void on_install_done(bool ok, const char *reason, void *data)
{
        /* at the report the tree is already in the store: nothing may be left to touch it */
        intruder_dead_at_report = kill(install_intruder->in_ns, 0) < 0 && errno == ESRCH;
        on_done(ok, reason, data);
}

START_TEST(jail_leaves_nothing_alive_at_install)
{
        static intruder in; /* static: the teardown may still need it */
        outcome o = {0};
        sh_error *err = NULL;
        int p[2], status;
        watch w = {.o = &o, .look = plant_intruder, .arg = &in};
        char path[512];
        struct stat st;

        memset(&in, 0, sizeof(in));
        install_outcome = &o;
        install_intruder = &in;
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        w.release_fd = p[1];
        w.deadline = sh_now_ms() + 20000;
        w.u = sh_unpack_start_with(W.store, p[0], SHA, install_payload, on_install_done, &o, &err);
        ck_assert_ptr_nonnull(w.u);
        close(p[0]);
        ck_assert_ptr_nonnull(sh_loop_add_timer(W.loop, 5, tick, &w));
        ck_assert_int_eq(sh_loop_run(W.loop), 0);
        close(p[1]);
        ck_assert_msg(o.done && o.ok, "%s", o.reason);
        ck_assert_msg(intruder_dead_at_report,
                      "a process of the unpacker's namespace outlived the install");
        ck_assert_int_eq(waitpid(in.helper, &status, 0), in.helper);
        in.helper = in.in_ns = 0; /* gone: nothing for the teardown to kill */
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        snprintf(path, sizeof(path), "%s/tools/%s/installed-file", W.root, SHA);
        ck_assert_int_eq(lstat(path, &st), 0);
        ck_assert_uint_eq(st.st_uid, 0);
}
END_TEST

/* ---- the queue ------------------------------------------------------------------------- */

static void stop_loop(sh_loop *l, sh_timer *t, void *data)
{
        sh_loop_stop(l);
}

START_TEST(at_most_parallel_unpackers_at_once)
{
        enum { N = SH_TOOLS_UNPACK_PARALLEL + 2 };
        outcome o[N];
        sh_unpack *u[N];
        int rel[N][2];
        sh_error *err = NULL;
        unsigned running, max_running = 0, done;
        uint64_t deadline = sh_now_ms() + 30000;

        memset(o, 0, sizeof(o));
        for (int i = 0; i < N; i++) {
                ck_assert_int_eq(pipe2(rel[i], O_CLOEXEC), 0);
                u[i] = sh_unpack_start_with(W.store, rel[i][0], SHA, probe_payload, on_done, &o[i],
                                            &err);
                ck_assert_ptr_nonnull(u[i]);
                close(rel[i][0]);
        }
        /* release them one at a time, oldest first, while counting those that run */
        for (int next = 0;;) {
                sh_timer *t;

                running = done = 0;
                for (int i = 0; i < N; i++) {
                        if (o[i].done)
                                done++;
                        else if (sh_unpack_pid(u[i]) > 0)
                                running++;
                }
                if (running > max_running)
                        max_running = running;
                if (done == N || sh_now_ms() > deadline)
                        break;
                if (next < N && !o[next].done && sh_unpack_pid(u[next]) > 0 &&
                    in_payload(sh_unpack_pid(u[next]))) {
                        ck_assert_int_eq(write(rel[next][1], "g", 1), 1);
                        next++;
                }
                /* one pass of the loop: a short timer stops it */
                t = sh_loop_add_timer(W.loop, 5, stop_loop, NULL);
                ck_assert_ptr_nonnull(t);
                ck_assert_int_eq(sh_loop_run(W.loop), 0);
        }
        for (int i = 0; i < N; i++) {
                close(rel[i][1]);
                ck_assert_msg(o[i].done && o[i].reports == 1, "unpack %d: %s", i, o[i].reason);
        }
        ck_assert_uint_eq(max_running, SH_TOOLS_UNPACK_PARALLEL);
}
END_TEST

/* ---- shutdown --------------------------------------------------------------------------- */

START_TEST(store_free_kills_running_unpackers)
{
        outcome o[2];
        sh_unpack *u[2];
        int rel[2][2];
        sh_error *err = NULL;
        pid_t pid[2] = {-1, -1};
        uint64_t deadline = sh_now_ms() + 20000;

        memset(o, 0, sizeof(o));
        for (int i = 0; i < 2; i++) {
                ck_assert_int_eq(pipe2(rel[i], O_CLOEXEC), 0);
                u[i] = sh_unpack_start_with(W.store, rel[i][0], SHA, install_payload, on_done,
                                            &o[i], &err);
                ck_assert_ptr_nonnull(u[i]);
                close(rel[i][0]);
        }
        while ((pid[0] < 0 || pid[1] < 0) && sh_now_ms() < deadline) {
                ck_assert_ptr_nonnull(sh_loop_add_timer(W.loop, 5, stop_loop, NULL));
                ck_assert_int_eq(sh_loop_run(W.loop), 0);
                for (int i = 0; i < 2; i++)
                        if (pid[i] < 0 && sh_unpack_pid(u[i]) > 0 &&
                            in_payload(sh_unpack_pid(u[i])))
                                pid[i] = sh_unpack_pid(u[i]);
        }
        ck_assert(pid[0] > 0 && pid[1] > 0);
        /* the daemon shuts down with both waiting forever on their "bundles" */
        for (int i = 0; i < 2; i++)
                sh_unpack_forget(u[i]);
        sh_store_free(W.store);
        sh_child_wait_all(W.loop); /* returns: they were killed */
        W.store = NULL;
        for (int i = 0; i < 2; i++) {
                ck_assert(kill(pid[i], 0) < 0 && errno == ESRCH);
                ck_assert(!o[i].done); /* forgotten: nobody is told */
                close(rel[i][1]);
        }
}
END_TEST

int main(void)
{
        Suite *s = suite_create("unpack_jail");
        TCase *tc = tcase_create("jail");
        int failed = ut_need_root("the unpacker's confinement needs root");

        if (failed)
                return failed;
        snprintf(instance, sizeof(instance), "unpack-test-%d", (int)getpid());
        if (ut_mkdtemp(base, sizeof(base), "unpack-jail") < 0 || chmod(base, 0711) < 0) {
                perror("mkdtemp");
                return 1;
        }
        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, world_up, world_down);
        tcase_add_test(tc, jail_has_own_namespaces_and_no_network);
        tcase_add_test(tc, jail_root_holds_only_the_staging_directory);
        tcase_add_test(tc, jail_is_unprivileged_and_filtered);
        tcase_add_test(tc, jail_runs_in_its_own_limited_cgroup);
        tcase_add_test(tc, jail_leaves_nothing_alive_at_install);
        tcase_add_test(tc, at_most_parallel_unpackers_at_once);
        tcase_add_test(tc, store_free_kills_running_unpackers);
        suite_add_tcase(s, tc);
        failed = ut_run_forked(s) != EXIT_SUCCESS;
        /* whatever a failed test left: its cgroups (killing what runs there) and files */
        {
                sh_cgroup_root *r = NULL;
                sh_error *err = NULL;

                if (sh_cgroup_root_open(instance, &r, &err) < 0 ||
                    sh_cgroup_root_destroy(r, &err) < 0) {
                        fprintf(stderr, "cleanup: %s\n", err && err->msg ? err->msg : "?");
                        failed++;
                }
                sh_error_release(&err);
                sh_cgroup_root_free(r);
                if (ut_rm_rf(base) < 0) {
                        fprintf(stderr, "left behind: %s\n", base);
                        failed++;
                }
        }
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
