/* test_spawn.c: children of the daemon (src/core/spawn.c): done runs from the loop and never
 * inside the fork, a child keeps exactly the fds it is handed, a start that cannot get the
 * child's pidfd fails cleanly with no child left, adopted orphans are reaped from the loop
 * and report their exit, signals go by pidfd, and namespace flags make the child PID 1 of its own namespace. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sh/loop.h"
#include "sh/spawn.h"
#include "unit.h"

static sh_loop *loop;

typedef struct outcome {
        bool done;
        int status;
} outcome;

static void setup(void)
{
        ck_assert_int_eq(sh_loop_new(&loop), 0);
}

static void teardown(void)
{
        sh_child_wait_all(loop);
        sh_loop_free(loop);
}

static void on_done(sh_child *c, pid_t pid, int status, void *data)
{
        outcome *o = data;

        (void)c;
        (void)pid;
        o->done = true;
        o->status = status;
        sh_loop_stop(loop);
}

static void give_up(sh_loop *l, sh_timer *t, void *data)
{
        (void)t;
        *(bool *)data = true;
        sh_loop_stop(l);
}

/* Run the loop until o's done callback has run; a hung child fails the test. The wait is on
 * the event: a done that already ran (an adopted child reaped at its poke, before the loop
 * ever ran, so its sh_loop_stop came too early to stop anything) ends it at once. */
static void run_until_done(const outcome *o)
{
        bool timed_out = false;
        sh_timer *t;

        if (o->done)
                return;
        t = sh_loop_add_timer(loop, 10000, give_up, &timed_out);
        ck_assert_int_eq(sh_loop_run(loop), 0);
        ck_assert_msg(!timed_out, "the child was never reaped");
        sh_loop_cancel_timer(loop, t);
}

static int exit_seven(void *arg)
{
        (void)arg;
        return 7;
}

START_TEST(test_done_runs_from_the_loop_never_inside_the_fork)
{
        outcome o = {0};
        sh_child *c = sh_child_fork(loop, -1, exit_seven, NULL, on_done, &o);

        ck_assert_ptr_nonnull(c);
        /* the child is long gone (a zombie) by now: still nobody is told before the loop runs */
        usleep(100 * 1000);
        ck_assert(!o.done);
        run_until_done(&o);
        ck_assert(o.done);
        ck_assert(WIFEXITED(o.status));
        ck_assert_int_eq(WEXITSTATUS(o.status), 7);
}
END_TEST

/* 0 when fd 3 is the pipe's write end (it accepts a byte) and nothing above it is open. */
static int check_fds(void *arg)
{
        (void)arg;
        if (write(3, "x", 1) != 1)
                return 1;
        for (int fd = 4; fd < 1024; fd++)
                if (fcntl(fd, F_GETFD) >= 0)
                        return 2;
        return 0;
}

START_TEST(test_a_child_keeps_exactly_the_fds_it_is_handed)
{
        outcome o = {0};
        int p[2], other = open("/dev/null", O_RDONLY | O_CLOEXEC), inherited;
        char b;

        ck_assert_int_ge(other, 0);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        /* an fd without O_CLOEXEC must not reach the child either */
        inherited = dup(other);
        ck_assert_int_ge(inherited, 0);
        ck_assert_ptr_nonnull(sh_child_fork(loop, p[1], check_fds, NULL, on_done, &o));
        close(p[1]);
        run_until_done(&o);
        ck_assert_int_eq(WEXITSTATUS(o.status), 0);
        ck_assert_int_eq(read(p[0], &b, 1), 1);
        close(p[0]);
        close(other);
        close(inherited);
}
END_TEST

START_TEST(test_a_start_without_a_pidfd_fails_cleanly_with_no_child_left)
{
        struct rlimit old, low;
        outcome o = {0};
        int fills[256], n = 0;
        sh_child *c;

        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
        low = old;
        low.rlim_cur = 64;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
        /* every fd number below the limit taken: the pidfd has nowhere to go */
        while (n < (int)(sizeof(fills) / sizeof(fills[0]))) {
                int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

                if (fd < 0)
                        break;
                fills[n++] = fd;
        }
        ck_assert_int_eq(errno, EMFILE);
        errno = 0;
        c = sh_child_fork(loop, -1, exit_seven, NULL, on_done, &o);
        ck_assert_ptr_null(c);
        ck_assert_int_eq(errno, EMFILE);
        while (n > 0)
                close(fills[--n]);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
        /* no child was made at all: nothing to reap, nobody told */
        ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
        ck_assert_int_eq(errno, ECHILD);
        ck_assert(!o.done);
}
END_TEST

static void check_reaped(sh_loop *l, sh_timer *t, void *data)
{
        pid_t pid = *(pid_t *)data;

        (void)t;
        /* ours until the loop reaps it: then it is nobody's child any more */
        if (waitpid(pid, NULL, WNOHANG | __WNOTHREAD) < 0 && errno == ECHILD) {
                sh_loop_stop(l);
                return;
        }
        ck_assert_ptr_nonnull(sh_loop_add_timer(l, 5, check_reaped, data));
}

/* Density: an adopted orphan costs no fd (a worker per sandbox, ten thousand of them); it is
 * reaped once its owner pokes it, also when it is not a zombie yet at the poke. */
START_TEST(test_an_adopted_process_holds_no_fd_and_is_reaped_from_the_loop_once_poked)
{
        bool timed_out = false;
        int go[2], before;
        pid_t pid;
        sh_child *c;

        ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char b;

                _exit(read(go[0], &b, 1) == 1 ? 0 : 1);
        }
        close(go[0]);
        before = ut_count_fds();
        c = sh_child_adopt(loop, pid, NULL, NULL);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(ut_count_fds(), before);
        sh_child_poke(loop, c); /* alive still: looked at from the sweep */
        ck_assert_int_eq(write(go[1], "x", 1), 1);
        close(go[1]);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 5, check_reaped, &pid));
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 10000, give_up, &timed_out));
        ck_assert_int_eq(sh_loop_run(loop), 0);
        ck_assert(!timed_out);
}
END_TEST

START_TEST(test_an_adopted_process_reports_its_exit)
{
        outcome o = {0};
        pid_t pid = fork();
        sh_child *c;

        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(3);
        c = sh_child_adopt(loop, pid, on_done, &o);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(waitid(P_PID, pid, &(siginfo_t){0}, WEXITED | WNOWAIT), 0);
        sh_child_poke(loop, c); /* a zombie: reaped at once, told from here */
        ck_assert(o.done);
        ck_assert(WIFEXITED(o.status));
        ck_assert_int_eq(WEXITSTATUS(o.status), 3);
        /* and a pid that does not exist cannot be adopted */
        errno = 0;
        ck_assert_ptr_null(sh_child_adopt(loop, 1 << 30, NULL, NULL));
        ck_assert_int_ne(errno, 0);
}
END_TEST

static int wait_forever(void *arg)
{
        (void)arg;
        for (;;)
                pause();
        return 0;
}

/* An adopted orphan is signalled by its pid: it is ours until reaped, so the pid is its own. */
START_TEST(test_a_signal_reaches_an_adopted_process_by_its_pid)
{
        outcome o = {0};
        pid_t pid = fork();
        sh_child *c;

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                for (;;)
                        pause();
        }
        c = sh_child_adopt(loop, pid, on_done, &o);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(sh_child_kill(c, SIGKILL), 0);
        sh_child_poke(loop, c);
        run_until_done(&o);
        ck_assert(WIFSIGNALED(o.status));
        ck_assert_int_eq(WTERMSIG(o.status), SIGKILL);
}
END_TEST

START_TEST(test_a_signal_goes_to_the_child_by_its_pidfd)
{
        outcome o = {0};
        sh_child *c = sh_child_fork(loop, -1, wait_forever, NULL, on_done, &o);

        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(sh_child_kill(c, SIGKILL), 0);
        run_until_done(&o);
        ck_assert(WIFSIGNALED(o.status));
        ck_assert_int_eq(WTERMSIG(o.status), SIGKILL);
}
END_TEST

static int am_i_pid_1(void *arg)
{
        (void)arg;
        return getpid() == 1 ? 0 : 1;
}

START_TEST(test_a_child_in_a_new_pid_namespace_is_its_pid_1)
{
        outcome o = {0};
        sh_child *c;

        if (geteuid() != 0)
                return; /* new namespaces need root here */
        c = sh_child_clone_fds(loop, CLONE_NEWPID, NULL, 0, am_i_pid_1, NULL, on_done, &o);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_gt(sh_child_pid(c), 1); /* the daemon's view */
        run_until_done(&o);
        ck_assert_int_eq(WEXITSTATUS(o.status), 0);
        /* and flags beyond the namespaces are refused */
        errno = 0;
        ck_assert_ptr_null(
                sh_child_clone_fds(loop, CLONE_VM, NULL, 0, am_i_pid_1, NULL, on_done, &o));
        ck_assert_int_eq(errno, EINVAL);
}
END_TEST

static Suite *spawn_suite(void)
{
        Suite *s = suite_create("spawn");
        TCase *tc = tcase_create("spawn");

        tcase_add_checked_fixture(tc, setup, teardown);
        /* Above the tests' own bounds (10 s for an event that never came, with a message that
         * says which): Check's default 4 s would end a slow run first, saying nothing. */
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_done_runs_from_the_loop_never_inside_the_fork);
        tcase_add_test(tc, test_a_child_keeps_exactly_the_fds_it_is_handed);
        tcase_add_test(tc, test_a_start_without_a_pidfd_fails_cleanly_with_no_child_left);
        tcase_add_test(tc,
                       test_an_adopted_process_holds_no_fd_and_is_reaped_from_the_loop_once_poked);
        tcase_add_test(tc, test_a_signal_reaches_an_adopted_process_by_its_pid);
        tcase_add_test(tc, test_an_adopted_process_reports_its_exit);
        tcase_add_test(tc, test_a_signal_goes_to_the_child_by_its_pidfd);
        tcase_add_test(tc, test_a_child_in_a_new_pid_namespace_is_its_pid_1);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(spawn_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
