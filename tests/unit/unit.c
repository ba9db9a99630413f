/* unit.c: the helpers every unit test links (unit.h). */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int ut_mkdtemp(char *buf, size_t size, const char *tag)
{
        const char *tmp = getenv("TMPDIR");
        int n = snprintf(buf, size, "%s/sh-test-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);

        if (n < 0 || (size_t)n >= size) {
                errno = ENAMETOOLONG;
                return -1;
        }
        return mkdtemp(buf) ? 0 : -1;
}

static int spawn_wait(char *const argv[])
{
        pid_t pid;
        int status;

        if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
                return -1;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -1;
        return status;
}

int ut_rm_rf(const char *path)
{
        /* GNU rm walks any depth with a few fds (fts); nftw stops at PATH_MAX. Busybox rm
         * (the cgroup v2 VM) knows no --one-file-system: then plainly. */
        char *gnu[] = {(char *)"rm", (char *)"-rf", (char *)"--one-file-system",
                       (char *)"--", (char *)path,  NULL};
        char *plain[] = {(char *)"rm", (char *)"-rf", (char *)"--", (char *)path, NULL};
        struct stat st;

        if (!path || !*path)
                return -1;
        if (spawn_wait(gnu) != 0 && lstat(path, &st) == 0)
                (void)spawn_wait(plain);
        return lstat(path, &st) < 0 && errno == ENOENT ? 0 : -1;
}

int ut_workspace(const char *base, char *tdir, size_t size)
{
        int fd;

        ck_assert_int_lt(snprintf(tdir, size, "%s/tXXXXXX", base), (int)size);
        ck_assert_ptr_nonnull(mkdtemp(tdir));
        ck_assert_int_eq(mkdir(ut_path(tdir, "ws"), 0755), 0);
        ck_assert_int_eq(mkdir(ut_path(tdir, "outside"), 0755), 0);
        ut_write_file(ut_path(tdir, "outside/secret"), "SECRET");
        fd = open(ut_path(tdir, "ws"), O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        return fd;
}

const char *ut_path(const char *dir, const char *fmt, ...)
{
        static char bufs[8][2048];
        static unsigned k;
        char *b = bufs[k++ % 8], rel[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(rel, sizeof(rel), fmt, ap);
        va_end(ap);
        snprintf(b, sizeof(bufs[0]), "%s/%s", dir, rel);
        return b;
}

void ut_write_file(const char *path, const char *content)
{
        FILE *f = fopen(path, "we");

        ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
        fputs(content, f);
        ck_assert_int_eq(fclose(f), 0);
}

uint64_t ut_now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void ut_sleep_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

int ut_wait_pid(pid_t pid, unsigned ms)
{
        uint64_t deadline = ut_now_ms() + ms;
        int st;

        for (;;) {
                pid_t w = waitpid(pid, &st, WNOHANG);

                if (w == pid)
                        return st;
                if (w < 0 || ut_now_ms() >= deadline)
                        break;
                ut_sleep_ms(5);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return -1;
}

int ut_count_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while (readdir(d))
                n++;
        closedir(d);
        return n - 3; /* ".", ".." and the fd opendir holds */
}

int ut_need_root(const char *why)
{
        if (geteuid() == 0)
                return 0;
        printf("SKIP: %s\n", why);
        return UT_SKIP;
}

bool ut_ia32_available(void)
{
#if defined(__x86_64__)
        int status = 0;
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                long r = 20; /* i386 getpid */

                /* the fault kills, as it would any process (no sanitizer's report) */
                signal(SIGSEGV, SIG_DFL);

                __asm__ volatile("int $0x80" : "+a"(r) : : "memory", "r8", "r9", "r10", "r11");
                _exit(r == getpid() ? 0 : 1);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
#else
        return false;
#endif
}

static int run(Suite *s, bool always_fork)
{
        SRunner *sr = srunner_create(s);
        int failed;

        if (always_fork)
                srunner_set_fork_status(sr, CK_FORK);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

int ut_run(Suite *s)
{
        return run(s, false);
}

int ut_run_forked(Suite *s)
{
        return run(s, true);
}
