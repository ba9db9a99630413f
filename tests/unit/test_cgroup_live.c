/* test_cgroup_live.c: the cgroup layer on this machine's live hierarchy (v1 here, v2 in the VM): subtree placement, limits, attach, OOM, pids, kill, freeze (also of a sandbox's processes beside its helpers), destroy, leftovers; needs root, else exits 77. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sh/cgroup.h"
#include "sh/loop.h"
#include "unit.h"

#define MAXH 4

/* Computed once in main(), before anything moves us (v2 moves the daemon into a leaf). */
static char instance[64];
static char subtree[96];
static sh_cg_mode mode;
static size_t nh;
static const char *ctl[MAXH];       /* controller per hierarchy, NULL for v2 */
static char mnt[MAXH][512];         /* mount point */
static char own[MAXH][1024];        /* our own cgroup directory */
static char own_cgpath[MAXH][1024]; /* our own cgroup as /proc/self/cgroup shows it */

static char *read_all(const char *path)
{
        static char buf[1 << 20];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t len = 0;
        ssize_t n;

        if (fd < 0)
                return NULL;
        while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
                len += (size_t)n;
        close(fd);
        buf[len] = '\0';
        return buf;
}

/* Path of cgroup `rel` ("" for the subtree itself) in hierarchy h. */
static const char *cgdir(size_t h, const char *rel)
{
        static char bufs[8][4096];
        static unsigned k;
        char *b = bufs[k++ % 8];

        if (snprintf(b, sizeof(bufs[0]), "%s/%s%s%s", own[h], subtree, *rel ? "/" : "", rel) >=
            (int)sizeof(bufs[0]))
                abort();
        return b;
}

static const char *cgfile(size_t h, const char *rel, const char *file)
{
        static char bufs[8][8192];
        static unsigned k;
        char *b = bufs[k++ % 8];

        if (snprintf(b, sizeof(bufs[0]), "%s/%s", cgdir(h, rel), file) >= (int)sizeof(bufs[0]))
                abort();
        return b;
}

static bool exists(const char *p)
{
        struct stat st;

        return stat(p, &st) == 0;
}

static sh_cgroup_root *open_root(void)
{
        sh_cgroup_root *r = NULL;
        sh_error *err = NULL;
        int k = sh_cgroup_root_open(instance, &r, &err);

        ck_assert_msg(k == 0, "root_open: %s", err && err->msg ? err->msg : "?");
        return r;
}

static void destroy_root(sh_cgroup_root *r)
{
        sh_error *err = NULL;
        int k = sh_cgroup_root_destroy(r, &err);

        ck_assert_msg(k == 0, "root_destroy: %s", err && err->msg ? err->msg : "?");
        sh_cgroup_root_free(r);
        for (size_t h = 0; h < nh; h++)
                ck_assert_msg(!exists(cgdir(h, "")), "%s left behind", cgdir(h, ""));
}

static sh_cgroup *create(sh_cgroup_root *r, sh_cgroup *parent, const char *name,
                         const sh_cg_limits *lim)
{
        sh_cgroup *cg = NULL;
        sh_error *err = NULL;
        int k = sh_cgroup_create(r, parent, name, lim, &cg, &err);

        ck_assert_msg(k == 0, "create %s: %s", name, err && err->msg ? err->msg : "?");
        return cg;
}

/* Fork a child that waits until we release it (after attaching it), then runs fn. */
typedef void (*child_fn)(int wfd);

static pid_t spawn_held(int *release_fd, int *out_fd, child_fn fn)
{
        int go[2], out[2];
        pid_t pid;

        ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char c;

                close(go[1]);
                close(out[0]);
                if (read(go[0], &c, 1) != 1)
                        _exit(99);
                fn(out[1]);
                _exit(0);
        }
        close(go[0]);
        close(out[1]);
        *release_fd = go[1];
        *out_fd = out[0];
        return pid;
}

static void release(int fd)
{
        ck_assert_int_eq(write(fd, "x", 1), 1);
        close(fd);
}

static void attach(sh_cgroup *cg, pid_t pid)
{
        sh_error *err = NULL;
        int k = sh_cgroup_attach(cg, pid, &err);

        ck_assert_msg(k == 0, "attach: %s", err && err->msg ? err->msg : "?");
}

/* Read exactly `len` bytes from fd within `ms`. */
static bool read_timeout(int fd, void *buf, size_t len, unsigned ms)
{
        uint64_t deadline = ut_now_ms() + ms;
        size_t got = 0;

        while (got < len) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int64_t left = (int64_t)(deadline - ut_now_ms());
                ssize_t n;

                if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                        return false;
                n = read(fd, (char *)buf + got, len - got);
                if (n <= 0)
                        return false;
                got += (size_t)n;
        }
        return true;
}

static bool wait_empty(sh_cgroup *cg, unsigned ms)
{
        uint64_t deadline = ut_now_ms() + ms;

        for (;;) {
                sh_error *err = NULL;
                bool empty = false;

                ck_assert_int_eq(sh_cgroup_is_empty(cg, &empty, &err), 0);
                if (empty)
                        return true;
                if (ut_now_ms() >= deadline)
                        return false;
                ut_sleep_ms(5);
        }
}

static void kill_and_destroy(sh_cgroup *cg)
{
        sh_error *err = NULL;

        ck_assert_int_eq(sh_cgroup_kill(cg, &err), 0);
        ck_assert(wait_empty(cg, 5000));
        ck_assert_int_eq(sh_cgroup_destroy(cg, &err), 0);
        sh_cgroup_free(cg);
}

static void child_pause(int wfd)
{
        pid_t me = getpid();

        if (write(wfd, &me, sizeof(me)) != sizeof(me))
                _exit(98);
        for (;;)
                pause();
}

/* --------------------------------------------------------------------------------------- */

/* Count the directories named like our subtree below `dir` (up to `depth` levels). */
static int count_named(const char *dir, const char *name, int depth, char *found, size_t fsz)
{
        DIR *d;
        struct dirent *de;
        int n = 0;

        if (depth < 0 || !(d = opendir(dir)))
                return 0;
        while ((de = readdir(d))) {
                char p[2048];

                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                if (snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) >= (int)sizeof(p))
                        continue; /* deeper than any cgroup of ours */
                if (strcmp(de->d_name, name) == 0) {
                        n++;
                        if (snprintf(found, fsz, "%s", p) >= (int)fsz)
                                found[0] = '\0';
                        continue;
                }
                n += count_named(p, name, depth - 1, found, fsz);
        }
        closedir(d);
        return n;
}

START_TEST(root_open_places_subtree_below_own_cgroup)
{
        sh_cgroup_root *r = open_root();

        ck_assert_int_eq(sh_cgroup_mode(r), mode);
        for (size_t h = 0; h < nh; h++) {
                char found[2048] = "";

                /* exactly one, and it is where our own cgroup is */
                ck_assert_int_eq(count_named(mnt[h], subtree, 6, found, sizeof(found)), 1);
                ck_assert_str_eq(found, cgdir(h, ""));
        }
        if (mode == SH_CG_V2) {
                /* the daemon moved into its leaf */
                char want[1200];

                snprintf(want, sizeof(want), "0::%s/%s/daemon\n",
                         strcmp(own_cgpath[0], "/") == 0 ? "" : own_cgpath[0], subtree);
                ck_assert_str_eq(read_all("/proc/self/cgroup"), want);
        }
        destroy_root(r);
}
END_TEST

START_TEST(create_writes_limits)
{
        sh_cgroup_root *r = open_root();
        sh_cg_limits lim = {.memory_max = 32u << 20, .pids_max = 16, .cpu_max_milli = 500};
        sh_cgroup *cg = create(r, NULL, "lim", &lim), *sub, *dup = NULL;
        sh_error *err = NULL;

        if (mode == SH_CG_V1) {
                const char *memsw = cgfile(0, "lim", "memory.memsw.limit_in_bytes");

                ck_assert_str_eq(read_all(cgfile(0, "lim", "memory.limit_in_bytes")), "33554432\n");
                if (exists(memsw))
                        ck_assert_str_eq(read_all(memsw), "33554432\n");
                ck_assert_str_eq(read_all(cgfile(1, "lim", "pids.max")), "16\n");
                ck_assert_str_eq(read_all(cgfile(2, "lim", "cpu.cfs_period_us")), "100000\n");
                ck_assert_str_eq(read_all(cgfile(2, "lim", "cpu.cfs_quota_us")), "50000\n");
                ck_assert(exists(cgfile(3, "lim", "freezer.state")));
                ck_assert_int_eq(sh_cgroup_open_dir(cg), -EOPNOTSUPP);
        } else {
                ck_assert_str_eq(read_all(cgfile(0, "lim", "memory.max")), "33554432\n");
                ck_assert_str_eq(read_all(cgfile(0, "lim", "pids.max")), "16\n");
                ck_assert_str_eq(read_all(cgfile(0, "lim", "cpu.max")), "50000 100000\n");
                int dfd = sh_cgroup_open_dir(cg);

                ck_assert_int_ge(dfd, 0);
                close(dfd);
        }
        /* a child below it, inheriting */
        sub = create(r, cg, "sub", NULL);
        for (size_t h = 0; h < nh; h++)
                ck_assert(exists(cgdir(h, "lim/sub")));
        /* names are single safe components, and unique */
        ck_assert_int_eq(sh_cgroup_create(r, NULL, "lim", NULL, &dup, &err), -EEXIST);
        sh_error_release(&err);
        static const char *const bad[] = {"", ".", "..", "../x", "a/b", ".hidden", "a b", "x\n"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_int_eq(sh_cgroup_create(r, NULL, bad[i], NULL, &dup, &err), -EINVAL);
                sh_error_release(&err);
        }
        ck_assert_ptr_null(dup);
        /* destroying the parent removes the empty child too */
        ck_assert_int_eq(sh_cgroup_destroy(cg, &err), 0);
        for (size_t h = 0; h < nh; h++)
                ck_assert(!exists(cgdir(h, "lim")));
        sh_cgroup_free(sub);
        sh_cgroup_free(cg);
        destroy_root(r);
}
END_TEST

/* Is pid in cgroup `rel` in every hierarchy, per /proc/<pid>/cgroup? */
static bool pid_in(pid_t pid, const char *rel)
{
        char p[64];
        const char *text;

        snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
        text = read_all(p);
        if (!text)
                return false;
        for (size_t h = 0; h < nh; h++) {
                char *path = NULL;
                char want[1400];
                bool ok;

                if (sh_cg_parse_proc_self(text, ctl[h], &path) < 0)
                        return false;
                snprintf(want, sizeof(want), "%s/%s/%s",
                         strcmp(own_cgpath[h], "/") == 0 ? "" : own_cgpath[h], subtree, rel);
                ok = strcmp(path, want) == 0;
                free(path);
                if (!ok)
                        return false;
        }
        return true;
}

static int procs_fds[MAXH];
static int nprocs_fds;

static void child_join_self(int wfd)
{
        /* what a sandbox child does before exec: write "0" to each cgroup.procs fd */
        for (int i = 0; i < nprocs_fds; i++)
                if (write(procs_fds[i], "0", 1) != 1)
                        _exit(97);
        child_pause(wfd);
}

START_TEST(attach_moves_process)
{
        sh_cgroup_root *r = open_root();
        sh_cgroup *cg = create(r, NULL, "att", NULL);
        int go, out;
        pid_t pid, got = 0;

        pid = spawn_held(&go, &out, child_pause);
        attach(cg, pid);
        release(go);
        ck_assert(read_timeout(out, &got, sizeof(got), 5000));
        ck_assert_int_eq(got, pid);
        ck_assert(pid_in(pid, "att"));
        close(out);

        /* the child moves itself through fds opened before fork */
        nprocs_fds = sh_cgroup_open_procs(cg, procs_fds, MAXH);
        ck_assert_int_eq(nprocs_fds, (int)nh);
        pid_t pid2 = spawn_held(&go, &out, child_join_self);
        release(go);
        ck_assert(read_timeout(out, &got, sizeof(got), 5000));
        for (int i = 0; i < nprocs_fds; i++)
                close(procs_fds[i]);
        ck_assert(pid_in(pid2, "att"));
        close(out);

        bool empty = true;
        sh_error *err = NULL;
        ck_assert_int_eq(sh_cgroup_is_empty(cg, &empty, &err), 0);
        ck_assert(!empty);
        /* the one-hierarchy look an exec's cgroup gets says the same */
        empty = true;
        ck_assert_int_eq(sh_cgroup_exec_is_empty(cg, &empty, &err), 0);
        ck_assert(!empty);
        /* not empty: destroy refuses with EBUSY and leaves everything */
        ck_assert_int_eq(sh_cgroup_destroy(cg, &err), -EBUSY);
        sh_error_release(&err);
        for (size_t h = 0; h < nh; h++)
                ck_assert(exists(cgdir(h, "att")));
        ck_assert_int_eq(sh_cgroup_kill(cg, &err), 0);
        ck_assert(WIFSIGNALED(ut_wait_pid(pid, 5000)));
        ck_assert(WIFSIGNALED(ut_wait_pid(pid2, 5000)));
        ck_assert_int_eq(sh_cgroup_exec_is_empty(cg, &empty, &err), 0);
        ck_assert(empty);
        kill_and_destroy(cg);
        destroy_root(r);
}
END_TEST

static void child_hog(int wfd)
{
        size_t len = 128u << 20;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        (void)wfd;
        if (p == MAP_FAILED)
                _exit(96);
        for (size_t i = 0; i < len; i += 4096)
                p[i] = 1;
        _exit(0); /* survived: the limit did not hold */
}

START_TEST(memory_limit_oom_kills)
{
        sh_cgroup_root *r = open_root();
        sh_cg_limits lim = {.memory_max = 32u << 20};
        sh_cgroup *cg = create(r, NULL, "oom", &lim);
        sh_error *err = NULL;
        uint64_t kills = 99;
        int go, out, st;
        pid_t pid;

        ck_assert_int_eq(sh_cgroup_oom_kills(cg, &kills, &err), 0);
        ck_assert_uint_eq(kills, 0);
        pid = spawn_held(&go, &out, child_hog);
        attach(cg, pid);
        release(go);
        st = ut_wait_pid(pid, 30000);
        close(out);
        ck_assert_msg(st != -1, "hog did not end");
        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "hog status 0x%x", st);
        ck_assert_int_eq(sh_cgroup_oom_kills(cg, &kills, &err), 0);
        ck_assert_uint_ge(kills, 1);
        kill_and_destroy(cg);
        destroy_root(r);
}
END_TEST

static void child_fork_loop(int wfd)
{
        int res[2] = {0, 0};

        for (int i = 0; i < 32; i++) {
                pid_t p = fork();

                if (p == 0) {
                        for (;;)
                                pause();
                }
                if (p < 0) {
                        res[1] = errno;
                        break;
                }
                res[0]++;
        }
        if (write(wfd, res, sizeof(res)) != sizeof(res))
                _exit(95);
        for (;;)
                pause();
}

START_TEST(pids_limit_stops_fork_loop)
{
        sh_cgroup_root *r = open_root();
        sh_cg_limits lim = {.pids_max = 8};
        sh_cgroup *cg = create(r, NULL, "pids", &lim);
        int go, out, res[2] = {-1, -1};
        pid_t pid;

        prctl(PR_SET_CHILD_SUBREAPER, 1);
        pid = spawn_held(&go, &out, child_fork_loop);
        attach(cg, pid);
        release(go);
        ck_assert(read_timeout(out, res, sizeof(res), 10000));
        close(out);
        /* the loop's own process counts: 7 children, then EAGAIN */
        ck_assert_int_eq(res[0], 7);
        ck_assert_int_eq(res[1], EAGAIN);
        kill_and_destroy(cg);
        /* reap the child and its orphans (we are their subreaper) */
        ck_assert(WIFSIGNALED(ut_wait_pid(pid, 5000)));
        for (uint64_t end = ut_now_ms() + 5000; ut_now_ms() < end;) {
                if (waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
                        break;
                ut_sleep_ms(5);
        }
        destroy_root(r);
}
END_TEST

static void spawn_sleeper(int wfd)
{
        pid_t p = fork();

        if (p == 0)
                child_pause(wfd);
}

static void child_tree(int wfd)
{
        pid_t me = getpid();

        for (int i = 0; i < 3; i++)
                spawn_sleeper(wfd);
        /* a daemon's escape: setsid and double fork, the middle one exits */
        if (fork() == 0) {
                setsid();
                spawn_sleeper(wfd);
                _exit(0);
        }
        if (write(wfd, &me, sizeof(me)) != sizeof(me))
                _exit(94);
        for (;;)
                pause();
}

/* child_tree's five processes started in cg (named rel below the subtree), their pids. */
static void start_tree(sh_cgroup *cg, const char *rel, pid_t pids[5])
{
        int go, out;
        pid_t pid;

        ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
        pid = spawn_held(&go, &out, child_tree);
        attach(cg, pid);
        release(go);
        ck_assert(read_timeout(out, pids, 5 * sizeof(pid_t), 5000));
        close(out);
        for (int i = 0; i < 5; i++)
                ck_assert(pid_in(pids[i], rel));
}

/* As subreaper we inherit the orphans: reap until every one of the five is seen, each ended by
 * sig. */
static void reap_tree(const pid_t pids[5], int sig)
{
        int ended = 0;

        for (uint64_t end = ut_now_ms() + 5000; ended < 5 && ut_now_ms() < end;) {
                int st;
                pid_t w = waitpid(-1, &st, WNOHANG);

                if (w <= 0) {
                        ut_sleep_ms(5);
                        continue;
                }
                for (int i = 0; i < 5; i++)
                        if (pids[i] == w) {
                                ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == sig,
                                              "pid %d status 0x%x", (int)w, st);
                                ended++;
                        }
        }
        ck_assert_int_eq(ended, 5);
}

START_TEST(kill_reaches_every_descendant)
{
        sh_cgroup_root *r = open_root();
        sh_cgroup *cg = create(r, NULL, "tree", NULL);
        sh_error *err = NULL;
        pid_t pids[5];

        start_tree(cg, "tree", pids);
        ck_assert_int_eq(sh_cgroup_kill(cg, &err), 0);
        reap_tree(pids, SIGKILL);
        ck_assert(wait_empty(cg, 5000));
        ck_assert_int_eq(sh_cgroup_destroy(cg, &err), 0);
        sh_cgroup_free(cg);
        destroy_root(r);
}
END_TEST

/* An exec's interrupt (sh_exec_signal): the signal once to each process of the cgroup and
 * below, however it detached, from one hierarchy (one signal each, not one per v1 hierarchy).
 * SIGUSR1: its default ends them, and Check's runner has no handler for it (its SIGTERM
 * handler, inherited by the children, would pass the signal on to the runner's group). */
START_TEST(a_signal_reaches_every_process_of_an_exec_cgroup_once)
{
        sh_cgroup_root *r = open_root();
        sh_cgroup *cg = create(r, NULL, "exec-sig", NULL);
        sh_error *err = NULL;
        pid_t pids[5];

        start_tree(cg, "exec-sig", pids);
        ck_assert_int_eq(sh_cgroup_exec_signal(cg, SIGUSR1, &err), 5);
        reap_tree(pids, SIGUSR1);
        ck_assert(wait_empty(cg, 5000));
        /* nothing left to signal */
        ck_assert_int_eq(sh_cgroup_exec_signal(cg, SIGUSR1, &err), 0);
        ck_assert_int_eq(sh_cgroup_destroy(cg, &err), 0);
        sh_cgroup_free(cg);
        destroy_root(r);
}
END_TEST

/* Every process forks as fast as it can, forever (bounded by pids.max): the case a kill
 * without a freeze cannot win by passes alone. */
static void child_churn(int wfd)
{
        pid_t me = getpid();

        if (write(wfd, &me, sizeof(me)) != sizeof(me))
                _exit(95);
        close(wfd);
        for (;;)
                (void)fork();
}

typedef struct empty_watch {
        sh_cgroup *cg;
        bool empty, gave_up;
} empty_watch;

static void watch_empty(sh_loop *l, sh_timer *t, void *data)
{
        empty_watch *w = data;
        sh_error *err = NULL;

        (void)t;
        ck_assert_int_eq(sh_cgroup_is_empty(w->cg, &w->empty, &err), 0);
        if (w->empty)
                sh_loop_stop(l);
        else
                ck_assert_ptr_nonnull(sh_loop_add_timer(l, 5, watch_empty, w));
}

static void watch_give_up(sh_loop *l, sh_timer *t, void *data)
{
        (void)t;
        ((empty_watch *)data)->gave_up = true;
        sh_loop_stop(l);
}

START_TEST(kill_of_a_fork_churn_finishes_from_the_loop)
{
        sh_cgroup_root *r = open_root();
        sh_cg_limits lim = {.pids_max = 32};
        sh_cgroup *cg = create(r, NULL, "churn", &lim);
        sh_error *err = NULL;
        empty_watch w = {.cg = cg};
        sh_loop *l = NULL;
        int go, out;
        pid_t pid, got;
        const char *state;

        ck_assert_int_eq(sh_loop_new(&l), 0);
        sh_cgroup_root_set_loop(r, l);
        ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
        pid = spawn_held(&go, &out, child_churn);
        attach(cg, pid);
        release(go);
        ck_assert(read_timeout(out, &got, sizeof(got), 5000));
        close(out);
        ut_sleep_ms(50); /* let it fill pids.max */
        /* the kill returns without waiting for the freeze; the loop finishes it */
        ck_assert_int_eq(sh_cgroup_kill(cg, &err), 0);
        ck_assert_ptr_nonnull(sh_loop_add_timer(l, 0, watch_empty, &w));
        ck_assert_ptr_nonnull(sh_loop_add_timer(l, 10000, watch_give_up, &w));
        ck_assert_int_eq(sh_loop_run(l), 0);
        ck_assert_msg(w.empty && !w.gave_up, "the churn outlived its kill");
        /* and the cgroup is left thawed */
        state = mode == SH_CG_V1 ? read_all(cgfile(3, "churn", "freezer.state"))
                                 : read_all(cgfile(0, "churn", "cgroup.freeze"));
        ck_assert_ptr_nonnull(state);
        ck_assert_str_eq(state, mode == SH_CG_V1 ? "THAWED\n" : "0\n");
        ck_assert_int_eq(sh_cgroup_destroy(cg, &err), 0);
        sh_cgroup_free(cg);
        for (uint64_t end = ut_now_ms() + 5000; ut_now_ms() < end;) {
                if (waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
                        break;
                ut_sleep_ms(5);
        }
        sh_cgroup_root_set_loop(r, NULL);
        destroy_root(r);
        sh_loop_free(l);
}
END_TEST

typedef struct gone_watch {
        const char *dir;
        bool gone, gave_up;
} gone_watch;

static void watch_gone(sh_loop *l, sh_timer *t, void *data)
{
        gone_watch *w = data;

        (void)t;
        if (!exists(w->dir)) {
                w->gone = true;
                sh_loop_stop(l);
                return;
        }
        ck_assert_ptr_nonnull(sh_loop_add_timer(l, 5, watch_gone, w));
}

static void gone_give_up(sh_loop *l, sh_timer *t, void *data)
{
        (void)t;
        ((gone_watch *)data)->gave_up = true;
        sh_loop_stop(l);
}

/* Run l until `dir` is gone (true) or `ms` passed (false). */
static bool run_until_gone(sh_loop *l, const char *dir, unsigned ms)
{
        gone_watch w = {.dir = dir};
        sh_timer *t = sh_loop_add_timer(l, ms, gone_give_up, &w);

        ck_assert_ptr_nonnull(t);
        ck_assert_ptr_nonnull(sh_loop_add_timer(l, 0, watch_gone, &w));
        ck_assert_int_eq(sh_loop_run(l), 0);
        if (!w.gave_up)
                sh_loop_cancel_timer(l, t);
        return w.gone;
}

START_TEST(bury_removes_a_cgroup_once_its_last_process_is_gone)
{
        sh_cgroup_root *r = open_root();
        sh_cgroup *cg = create(r, NULL, "grave", NULL);
        sh_loop *l = NULL;
        int go, out;
        pid_t pid, got;
        char dir[4096];

        ck_assert_int_eq(sh_loop_new(&l), 0);
        sh_cgroup_root_set_loop(r, l);
        pid = spawn_held(&go, &out, child_pause);
        attach(cg, pid);
        release(go);
        ck_assert(read_timeout(out, &got, sizeof(got), 5000));
        close(out);
        snprintf(dir, sizeof(dir), "%s", cgdir(0, "grave"));
        /* buried without a kill: its process lives on, and so does the cgroup */
        sh_cgroup_bury(cg, false);
        ck_assert(!run_until_gone(l, dir, 300));
        ck_assert_int_eq(kill(pid, 0), 0);
        /* its last process gone, the loop removes it */
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        ck_assert(WIFSIGNALED(ut_wait_pid(pid, 5000)));
        ck_assert(run_until_gone(l, dir, 10000));
        sh_cgroup_root_set_loop(r, NULL);
        destroy_root(r);
        sh_loop_free(l);
}
END_TEST

START_TEST(bury_with_kill_ends_the_stragglers)
{
        sh_cgroup_root *r = open_root();
        sh_cgroup *cg = create(r, NULL, "grave2", NULL);
        sh_loop *l = NULL;
        int go, out;
        pid_t pid, got;
        char dir[4096];

        ck_assert_int_eq(sh_loop_new(&l), 0);
        sh_cgroup_root_set_loop(r, l);
        pid = spawn_held(&go, &out, child_pause);
        attach(cg, pid);
        release(go);
        ck_assert(read_timeout(out, &got, sizeof(got), 5000));
        close(out);
        snprintf(dir, sizeof(dir), "%s", cgdir(0, "grave2"));
        /* the kill may wait for its freeze, from the loop: run it first */
        sh_cgroup_bury(cg, true);
        ck_assert(run_until_gone(l, dir, 10000));
        ck_assert(WIFSIGNALED(ut_wait_pid(pid, 5000)));
        sh_cgroup_root_set_loop(r, NULL);
        destroy_root(r);
        sh_loop_free(l);
}
END_TEST

static volatile uint64_t *counter;

static void child_spin(int wfd)
{
        pid_t me = getpid();

        if (write(wfd, &me, sizeof(me)) != sizeof(me))
                _exit(93);
        for (;;)
                (*counter)++;
}

static bool is_frozen_file(void)
{
        const char *t;

        if (mode == SH_CG_V1)
                return (t = read_all(cgfile(3, "frz", "freezer.state"))) &&
                       strcmp(t, "FROZEN\n") == 0;
        return (t = read_all(cgfile(0, "frz", "cgroup.events"))) && strstr(t, "frozen 1");
}

/* Freeze cg and wait (bounded) for the freeze to complete: 0, or -1 after 1 s. */
static int freeze_wait(sh_cgroup *cg, sh_error **err)
{
        uint64_t deadline = ut_now_ms() + 1000;
        bool frozen = false;

        if (sh_cgroup_freeze_begin(cg, err) < 0)
                return -1;
        for (;;) {
                if (sh_cgroup_freeze_poll(cg, &frozen, err) < 0)
                        return -1;
                if (frozen)
                        return 0;
                if (ut_now_ms() >= deadline)
                        return -1;
                ut_sleep_ms(1);
        }
}

START_TEST(freeze_and_thaw)
{
        sh_cgroup_root *r = open_root();
        sh_cgroup *cg = create(r, NULL, "frz", NULL);
        sh_error *err = NULL;
        int go, out;
        pid_t pid, got;
        uint64_t a, b;

        counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ck_assert_ptr_ne((void *)counter, MAP_FAILED);
        pid = spawn_held(&go, &out, child_spin);
        attach(cg, pid);
        release(go);
        ck_assert(read_timeout(out, &got, sizeof(got), 5000));
        close(out);

        ck_assert_int_eq(freeze_wait(cg, &err), 0);
        ck_assert(is_frozen_file());
        a = *counter;
        ut_sleep_ms(100);
        b = *counter;
        ck_assert_uint_eq(a, b);

        ck_assert_int_eq(sh_cgroup_thaw(cg, &err), 0);
        ck_assert(!is_frozen_file());
        for (uint64_t end = ut_now_ms() + 2000; *counter == b && ut_now_ms() < end;)
                ut_sleep_ms(5);
        ck_assert_uint_gt(*counter, b);
        /* thaw is always safe, also twice */
        ck_assert_int_eq(sh_cgroup_thaw(cg, &err), 0);

        /* a frozen cgroup can be killed, and ends thawed */
        ck_assert_int_eq(freeze_wait(cg, &err), 0);
        ck_assert_int_eq(sh_cgroup_kill(cg, &err), 0);
        ck_assert(WIFSIGNALED(ut_wait_pid(pid, 5000)));
        ck_assert(!is_frozen_file());
        ck_assert(wait_empty(cg, 5000));
        ck_assert_int_eq(sh_cgroup_destroy(cg, &err), 0);
        sh_cgroup_free(cg);
        destroy_root(r);
}
END_TEST

/* Three spinners, each counting in its own slot of a shared page. */
static volatile uint64_t *spins;
static int spin_slot;

static void child_spin_slot(int wfd)
{
        pid_t me = getpid();

        if (write(wfd, &me, sizeof(me)) != sizeof(me))
                _exit(92);
        for (;;)
                spins[spin_slot]++;
}

static pid_t spin_in(sh_cgroup *cg, int slot)
{
        int go, out;
        pid_t pid, got;

        spin_slot = slot;
        pid = spawn_held(&go, &out, child_spin_slot);
        attach(cg, pid);
        release(go);
        ck_assert(read_timeout(out, &got, sizeof(got), 5000));
        close(out);
        return pid;
}

/* Whether slot i is still counting (over 100 ms). */
static bool spinning(int i)
{
        uint64_t a = spins[i];

        for (uint64_t end = ut_now_ms() + 2000; ut_now_ms() < end;) {
                ut_sleep_ms(20);
                if (spins[i] != a)
                        return true;
        }
        return false;
}

static bool stopped(int i)
{
        uint64_t a = spins[i];

        ut_sleep_ms(100);
        return spins[i] == a;
}

static void freeze_procs_wait(sh_cgroup *cg)
{
        sh_error *err = NULL;
        bool frozen = false;

        for (uint64_t end = ut_now_ms() + 5000; !frozen && ut_now_ms() < end; ut_sleep_ms(2))
                ck_assert_int_eq(sh_cgroup_freeze_procs_poll(cg, &frozen, &err), 0);
        ck_assert(frozen);
}

/* persist's quiet point: the sandbox's leaves freeze (one made after the start too), the
 * helper cgroup beside them keeps running, and the thaw restores all. */
START_TEST(freeze_procs_spares_helpers)
{
        sh_cgroup_root *r = open_root();
        sh_cgroup *sb = create(r, NULL, "fsb", NULL);
        sh_cgroup *init = create(r, sb, "init", NULL);
        sh_cgroup *helper = create(r, sb, SH_CG_HELPER_PREFIX "p1", NULL);
        sh_cgroup *late = NULL;
        sh_error *err = NULL;
        pid_t p0, p1, p2;

        spins = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ck_assert_ptr_ne((void *)spins, MAP_FAILED);
        p0 = spin_in(init, 0);
        p1 = spin_in(helper, 1);
        ck_assert_int_eq(sh_cgroup_freeze_procs_begin(sb, &err), 0);
        late = create(r, sb, "exec-1", NULL);
        p2 = spin_in(late, 2);
        freeze_procs_wait(sb);
        ck_assert(stopped(0));
        ck_assert(stopped(2));
        ck_assert(spinning(1));

        ck_assert_int_eq(sh_cgroup_thaw_procs(sb, &err), 0);
        ck_assert(spinning(0));
        ck_assert(spinning(2));
        /* thaw is always safe, also twice */
        ck_assert_int_eq(sh_cgroup_thaw_procs(sb, &err), 0);

        /* a process in the sandbox's own cgroup would escape: refused (v2 forbids it: a
         * cgroup with controllers for its children takes no process) */
        if (mode == SH_CG_V1) {
                attach(sb, p2);
                ck_assert_int_lt(sh_cgroup_freeze_procs_begin(sb, &err), 0);
                ck_assert_int_eq(err->errnum, EBUSY);
                sh_error_release(&err);
                ck_assert_int_eq(sh_cgroup_thaw_procs(sb, &err), 0);
        }
        ck_assert_int_eq(sh_cgroup_kill(sb, &err), 0);
        ck_assert(WIFSIGNALED(ut_wait_pid(p0, 5000)));
        ck_assert(WIFSIGNALED(ut_wait_pid(p1, 5000)));
        ck_assert(WIFSIGNALED(ut_wait_pid(p2, 5000)));
        ck_assert(wait_empty(sb, 5000));
        sh_cgroup_free(init);
        sh_cgroup_free(helper);
        sh_cgroup_free(late);
        ck_assert_int_eq(sh_cgroup_destroy(sb, &err), 0);
        sh_cgroup_free(sb);
        destroy_root(r);
}
END_TEST

/* A deleted sandbox's processes die at once, also frozen ones; its helpers are spared (a
 * cancelled rsync removes its temporary file before it exits). */
START_TEST(kill_procs_spares_helpers)
{
        sh_cgroup_root *r = open_root();
        sh_cgroup *sb = create(r, NULL, "ksb", NULL);
        sh_cgroup *init = create(r, sb, "init", NULL);
        sh_cgroup *ex = create(r, sb, "exec-1", NULL);
        sh_cgroup *helper = create(r, sb, SH_CG_HELPER_PREFIX "r1", NULL);
        sh_error *err = NULL;
        pid_t p0, p1, p2;

        spins = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ck_assert_ptr_ne((void *)spins, MAP_FAILED);
        p0 = spin_in(init, 0);
        p1 = spin_in(helper, 1);
        p2 = spin_in(ex, 2);
        ck_assert_int_eq(sh_cgroup_freeze_procs_begin(sb, &err), 0);
        freeze_procs_wait(sb);
        ck_assert_int_eq(sh_cgroup_kill_procs(sb, &err), 0);
        ck_assert(WIFSIGNALED(ut_wait_pid(p0, 5000)));
        ck_assert(WIFSIGNALED(ut_wait_pid(p2, 5000)));
        ck_assert(spinning(1));
        ck_assert_int_eq(kill(p1, 0), 0);
        ck_assert_int_eq(sh_cgroup_kill(helper, &err), 0);
        ck_assert(WIFSIGNALED(ut_wait_pid(p1, 5000)));
        ck_assert(wait_empty(sb, 5000));
        sh_cgroup_free(init);
        sh_cgroup_free(ex);
        sh_cgroup_free(helper);
        ck_assert_int_eq(sh_cgroup_destroy(sb, &err), 0);
        sh_cgroup_free(sb);
        destroy_root(r);
}
END_TEST

/* Density: a daemon holding ten thousand sandboxes must not hold fds for their cgroups. The
 * handles of a sandbox's layout (its cgroup with limits, its init leaf, an exec leaf, a helper)
 * hold none, and every operation on them (attach, usage, OOM count, freeze, thaw, kill,
 * emptiness, the procs fds handed out, destroy) works and closes what it opened. */
START_TEST(a_cgroup_handle_holds_no_fd_and_every_operation_closes_what_it_opens)
{
        sh_cgroup_root *r = open_root();
        sh_cg_limits lim = {.memory_max = 64u << 20, .pids_max = 32, .cpu_max_milli = 500};
        int base = ut_count_fds(), procs[8], n;
        sh_cgroup *sb = create(r, NULL, "nofd", &lim);
        sh_cgroup *init = create(r, sb, "init", NULL);
        sh_cgroup *ex = create(r, sb, "exec-1", NULL);
        sh_cgroup *helper = create(r, sb, SH_CG_HELPER_PREFIX "p1", NULL);
        sh_error *err = NULL;
        sh_cg_usage u;
        uint64_t ooms = 1;
        bool empty = true;
        pid_t p0, p1;

        ck_assert_int_eq(ut_count_fds(), base);
        spins = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ck_assert_ptr_ne((void *)spins, MAP_FAILED);
        p0 = spin_in(init, 0);
        p1 = spin_in(ex, 1);
        ck_assert_int_eq(ut_count_fds(), base);
        ck_assert_int_eq(sh_cgroup_usage(sb, &u, &err), 0);
        ck_assert_uint_gt(u.mem_bytes, 0);
        ck_assert_int_eq(sh_cgroup_oom_kills(sb, &ooms, &err), 0);
        ck_assert_uint_eq(ooms, 0);
        ck_assert_int_eq(sh_cgroup_is_empty(sb, &empty, &err), 0);
        ck_assert(!empty);
        n = sh_cgroup_open_procs(ex, procs, 8);
        ck_assert_int_eq(n, (int)nh);
        ck_assert_int_eq(ut_count_fds(), base + n);
        for (int i = 0; i < n; i++)
                close(procs[i]);
        ck_assert_int_eq(sh_cgroup_freeze_procs_begin(sb, &err), 0);
        freeze_procs_wait(sb);
        ck_assert(stopped(0));
        ck_assert(stopped(1));
        ck_assert_int_eq(ut_count_fds(), base);
        ck_assert_int_eq(sh_cgroup_thaw_procs(sb, &err), 0);
        ck_assert(spinning(0));
        ck_assert_int_eq(ut_count_fds(), base);
        ck_assert_int_eq(sh_cgroup_kill_procs(sb, &err), 0);
        ck_assert(WIFSIGNALED(ut_wait_pid(p0, 5000)));
        ck_assert(WIFSIGNALED(ut_wait_pid(p1, 5000)));
        ck_assert(wait_empty(sb, 5000));
        ck_assert_int_eq(ut_count_fds(), base);
        sh_cgroup_free(init);
        sh_cgroup_free(ex);
        sh_cgroup_free(helper);
        ck_assert_int_eq(sh_cgroup_destroy(sb, &err), 0);
        for (size_t h = 0; h < nh; h++)
                ck_assert(!exists(cgdir(h, "nofd")));
        /* a handle whose cgroup is gone answers ENOENT, it does not find another */
        ck_assert_int_lt(sh_cgroup_usage(sb, &u, &err), 0);
        ck_assert_int_eq(err->errnum, ENOENT);
        sh_error_release(&err);
        sh_cgroup_free(sb);
        ck_assert_int_eq(ut_count_fds(), base);
        destroy_root(r);
}
END_TEST

/* Density: a sandbox's worker needs no memory cgroup of its own. On v1 its leaf is not made in
 * the memory hierarchy and its processes land in the sandbox's memory cgroup (under its
 * limit); everywhere else it is a leaf of its own. */
START_TEST(a_leaf_has_no_memory_cgroup_of_its_own_on_v1)
{
        sh_cgroup_root *r = open_root();
        sh_cg_limits lim = {.memory_max = 64u << 20, .pids_max = 16};
        sh_cgroup *sb = create(r, NULL, "lsb", &lim), *leaf = NULL;
        sh_error *err = NULL;
        int procs[8], n, go, out;
        pid_t pid, got;
        char want[2048];
        const char *cg;

        ck_assert_int_eq(sh_cgroup_create_leaf(r, sb, "init", &leaf, &err), 0);
        for (size_t h = 0; h < nh; h++)
                ck_assert_int_eq(exists(cgdir(h, "lsb/init")), !(mode == SH_CG_V1 && h == 0));
        n = sh_cgroup_open_procs(leaf, procs, 8);
        ck_assert_int_eq(n, (int)nh);
        for (int i = 0; i < n; i++)
                close(procs[i]);
        pid = spawn_held(&go, &out, child_pause);
        attach(leaf, pid);
        release(go);
        ck_assert(read_timeout(out, &got, sizeof(got), 5000));
        close(out);
        snprintf(want, sizeof(want), "/proc/%d/cgroup", (int)pid);
        cg = read_all(want);
        for (size_t h = 0; h < nh; h++) {
                snprintf(want, sizeof(want), ":%s:%s/%s/%s\n", mode == SH_CG_V1 ? ctl[h] : "",
                         strcmp(own_cgpath[h], "/") == 0 ? "" : own_cgpath[h], subtree,
                         mode == SH_CG_V1 && h == 0 ? "lsb" : "lsb/init");
                ck_assert_msg(strstr(cg, want), "%s not in %s", want, cg);
        }
        /* a delete of a paused sandbox: its frozen leaf is found (in the freezer's hierarchy,
         * not the memory one it is missing from), killed and thawed */
        ck_assert_int_eq(sh_cgroup_freeze_procs_begin(sb, &err), 0);
        freeze_procs_wait(sb);
        ck_assert_int_eq(sh_cgroup_kill_procs(sb, &err), 0);
        ck_assert(WIFSIGNALED(ut_wait_pid(pid, 5000)));
        ck_assert(wait_empty(sb, 5000));
        sh_cgroup_free(leaf);
        ck_assert_int_eq(sh_cgroup_destroy(sb, &err), 0);
        sh_cgroup_free(sb);
        /* a leaf needs a parent */
        ck_assert_int_lt(sh_cgroup_create_leaf(r, NULL, "x", &leaf, &err), 0);
        sh_error_release(&err);
        destroy_root(r);
}
END_TEST

START_TEST(second_open_removes_leftovers)
{
        sh_cgroup_root *r = open_root();
        sh_cgroup *left = create(r, NULL, "left", NULL);
        sh_cgroup *inner = create(r, left, "inner", NULL);
        /* processes live in leaves, as the daemon lays them out (v2: no internal processes) */
        sh_cgroup *init = create(r, left, "init", NULL);
        int go, out;
        pid_t p1, p2, got;

        /* a daemon SIGKILLed with sandboxes running: processes in nested cgroups */
        p1 = spawn_held(&go, &out, child_pause);
        attach(init, p1);
        sh_cgroup_free(init);
        release(go);
        ck_assert(read_timeout(out, &got, sizeof(got), 5000));
        close(out);
        p2 = spawn_held(&go, &out, child_pause);
        attach(inner, p2);
        release(go);
        ck_assert(read_timeout(out, &got, sizeof(got), 5000));
        close(out);
        sh_cgroup_free(inner);
        sh_cgroup_free(left);
        sh_cgroup_root_free(r);
        for (size_t h = 0; h < nh; h++)
                ck_assert(exists(cgdir(h, "left/inner")));

        r = open_root();
        for (size_t h = 0; h < nh; h++)
                ck_assert(!exists(cgdir(h, "left")));
        ck_assert(WIFSIGNALED(ut_wait_pid(p1, 5000)));
        ck_assert(WIFSIGNALED(ut_wait_pid(p2, 5000)));
        destroy_root(r);
}
END_TEST

/* Runs in the runner process after every test, also a failed one: whatever the test left
 * (processes, cgroups) is killed and removed the way a restarted daemon would. */
static void cleanup(void)
{
        sh_cgroup_root *r = NULL;
        sh_error *err = NULL;

        if (sh_cgroup_root_open(instance, &r, &err) == 0) {
                if (sh_cgroup_root_destroy(r, &err) < 0)
                        fprintf(stderr, "cleanup: %s\n", err && err->msg ? err->msg : "?");
                sh_cgroup_root_free(r);
        } else {
                fprintf(stderr, "cleanup open: %s\n", err && err->msg ? err->msg : "?");
        }
        sh_error_release(&err);
}

static int probe(void)
{
        static char selfc[64 * 1024], mi[1 << 20];
        const char *self = read_all("/proc/self/cgroup"), *t;
        sh_cgroup_root *r = NULL;
        sh_error *err = NULL;
        static const char *const v1[] = {"memory", "pids", "cpu", "freezer"};
        int k = ut_need_root("needs root to create cgroups");

        if (k)
                return k;
        if (!self) {
                printf("SKIP: no /proc/self/cgroup\n");
                return UT_SKIP;
        }
        snprintf(selfc, sizeof(selfc), "%s", self);
        t = read_all("/proc/self/mountinfo");
        if (!t)
                return 1;
        snprintf(mi, sizeof(mi), "%s", t);
        snprintf(instance, sizeof(instance), "test-%d", (int)getpid());
        snprintf(subtree, sizeof(subtree), "sandbox-host.%s", instance);
        if (sh_cgroup_root_open(instance, &r, &err) < 0) {
                printf("SKIP: no usable cgroup hierarchy: %s\n", err && err->msg ? err->msg : "?");
                return UT_SKIP;
        }
        mode = sh_cgroup_mode(r);
        if (sh_cgroup_root_destroy(r, &err) < 0) {
                printf("FAIL: cannot remove the probe's subtree: %s\n", err->msg);
                return 1;
        }
        sh_cgroup_root_free(r);
        nh = mode == SH_CG_V1 ? 4 : 1;
        for (size_t h = 0; h < nh; h++) {
                _cleanup_free_ char *mp = NULL, *root = NULL, *path = NULL, *dir = NULL;

                ctl[h] = mode == SH_CG_V1 ? v1[h] : NULL;
                if (sh_cg_parse_mountinfo_ex(mi, ctl[h], &mp, &root) < 0 ||
                    sh_cg_parse_proc_self(selfc, ctl[h], &path) < 0 ||
                    sh_cg_path_join(mp, root, path, &dir) < 0)
                        return 1;
                snprintf(mnt[h], sizeof(mnt[h]), "%s", mp);
                snprintf(own[h], sizeof(own[h]), "%s", dir);
                snprintf(own_cgpath[h], sizeof(own_cgpath[h]), "%s", path);
        }
        printf("cgroup mode: %s, instance %s\n", mode == SH_CG_V1 ? "v1" : "v2", instance);
        return 0;
}

int main(void)
{
        Suite *s = suite_create("cgroup_live");
        TCase *tc = tcase_create("live");
        int failed, k = probe();

        if (k)
                return k;
        tcase_set_timeout(tc, 60);
        tcase_add_unchecked_fixture(tc, NULL, cleanup);
        tcase_add_test(tc, root_open_places_subtree_below_own_cgroup);
        tcase_add_test(tc, create_writes_limits);
        tcase_add_test(tc, attach_moves_process);
        tcase_add_test(tc, memory_limit_oom_kills);
        tcase_add_test(tc, pids_limit_stops_fork_loop);
        tcase_add_test(tc, kill_reaches_every_descendant);
        tcase_add_test(tc, a_signal_reaches_every_process_of_an_exec_cgroup_once);
        tcase_add_test(tc, kill_of_a_fork_churn_finishes_from_the_loop);
        tcase_add_test(tc, bury_removes_a_cgroup_once_its_last_process_is_gone);
        tcase_add_test(tc, bury_with_kill_ends_the_stragglers);
        tcase_add_test(tc, freeze_and_thaw);
        tcase_add_test(tc, freeze_procs_spares_helpers);
        tcase_add_test(tc, kill_procs_spares_helpers);
        tcase_add_test(tc, a_cgroup_handle_holds_no_fd_and_every_operation_closes_what_it_opens);
        tcase_add_test(tc, a_leaf_has_no_memory_cgroup_of_its_own_on_v1);
        tcase_add_test(tc, second_open_removes_leftovers);
        suite_add_tcase(s, tc);
        failed = ut_run_forked(s) != EXIT_SUCCESS;
        /* nothing of ours may remain anywhere */
        for (size_t h = 0; h < nh; h++)
                if (exists(cgdir(h, ""))) {
                        fprintf(stderr, "left behind: %s\n", cgdir(h, ""));
                        failed++;
                }
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
