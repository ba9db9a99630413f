/* test_ringlog.c: a sandbox's bounded log (src/sandbox/ringlog.c): the ring of its last max
 * bytes with byte offsets over everything kept, on a file of the test's own. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/ringlog.h"
#include "unit.h"

/* A log's file: a fresh file of the test's own. */
static int log_file(char *dir, size_t size)
{
        char path[4200];
        int fd;

        ck_assert_int_eq(ut_mkdtemp(dir, size, "ringlog"), 0);
        snprintf(path, sizeof(path), "%s/log", dir);
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        return fd;
}

static void check_read(const sh_ringlog *g, int fd, uint64_t from, const char *want)
{
        char buf[256];
        ssize_t n = sh_ringlog_pread(g, fd, from, buf, sizeof(buf));

        ck_assert_int_eq(n, (ssize_t)strlen(want));
        ck_assert(n == 0 || memcmp(buf, want, (size_t)n) == 0);
}

START_TEST(test_the_log_reads_from_any_offset)
{
        sh_ringlog g = {.max = 1 << 20};
        char dir[4096];
        int fd = log_file(dir, sizeof(dir));

        ck_assert_int_eq(sh_ringlog_write(&g, fd, "hello ", 6), 6);
        ck_assert_int_eq(sh_ringlog_write(&g, fd, "world", 5), 5);
        ck_assert_uint_eq(g.total, 11);
        ck_assert_uint_eq(sh_ringlog_first(&g), 0);
        check_read(&g, fd, 0, "hello world");
        check_read(&g, fd, 6, "world");
        check_read(&g, fd, 11, "");
        check_read(&g, fd, 999, ""); /* past the end: nothing */
        close(fd);
        ut_rm_rf(dir);
}
END_TEST

START_TEST(test_the_log_keeps_the_last_max_bytes_in_a_file_of_max_bytes)
{
        sh_ringlog g = {.max = 10};
        char dir[4096], buf[64];
        int fd = log_file(dir, sizeof(dir));
        struct stat st;

        ck_assert_int_eq(sh_ringlog_write(&g, fd, "0123456789", 10), 10);
        ck_assert_int_eq(sh_ringlog_write(&g, fd, "abcd", 4), 4); /* wraps */
        ck_assert_uint_eq(g.total, 14);
        ck_assert_uint_eq(sh_ringlog_first(&g), 4);
        ck_assert_uint_eq(sh_ringlog_kept(&g), 10);
        check_read(&g, fd, 4, "456789abcd");
        check_read(&g, fd, 12, "cd");
        /* an offset overwritten since: not a wrong byte, an error */
        ck_assert_int_eq(sh_ringlog_pread(&g, fd, 3, buf, sizeof(buf)), -ESTALE);
        /* a read of a few bytes across the wrap */
        ck_assert_int_eq(sh_ringlog_pread(&g, fd, 8, buf, 4), 4);
        ck_assert_int_eq(memcmp(buf, "89ab", 4), 0);
        /* an append longer than the log: its last max bytes, the ones before counted */
        ck_assert_int_eq(sh_ringlog_write(&g, fd, "ABCDEFGHIJKLMNOPQRST", 20), 10);
        ck_assert_uint_eq(g.total, 34);
        ck_assert_uint_eq(sh_ringlog_first(&g), 24);
        ck_assert_int_eq(sh_ringlog_pread(&g, fd, 0, buf, sizeof(buf)), -ESTALE);
        check_read(&g, fd, 24, "KLMNOPQRST");
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert_int_eq(st.st_size, 10); /* the file never holds more than max */
        close(fd);
        ut_rm_rf(dir);
}
END_TEST

START_TEST(test_a_log_whose_file_cannot_grow_stops_at_the_bytes_it_holds)
{
        sh_ringlog g = {.max = 1 << 20};
        char dir[4096], path[4200];
        int fd = log_file(dir, sizeof(dir)), ro;
        struct rlimit old, lim = {.rlim_cur = 6, .rlim_max = RLIM_INFINITY};
        struct sigaction ign = {.sa_handler = SIG_IGN}, prev;

        /* RLIMIT_FSIZE is the cheapest full filesystem: writes past it fall short */
        ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
        lim.rlim_max = old.rlim_max;
        ck_assert_int_eq(sigaction(SIGXFSZ, &ign, &prev), 0);
        ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
        ck_assert_int_eq(sh_ringlog_write(&g, fd, "hello world", 11), 6);
        ck_assert_int_eq(sh_ringlog_write(&g, fd, "more", 4), -EFBIG);
        ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
        ck_assert_int_eq(sigaction(SIGXFSZ, &prev, NULL), 0);
        ck_assert_uint_eq(g.total, 6);
        check_read(&g, fd, 0, "hello ");
        /* once it can grow again, it goes on from there */
        ck_assert_int_eq(sh_ringlog_write(&g, fd, "again", 5), 5);
        check_read(&g, fd, 0, "hello again");
        /* a file shorter than what the log says it holds is not read as the log */
        snprintf(path, sizeof(path), "%s/log", dir);
        ck_assert_int_eq(truncate(path, 3), 0);
        ro = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_eq(sh_ringlog_pread(&g, ro, 0, path, 11), -EIO);
        close(ro);
        close(fd);
        ut_rm_rf(dir);
}
END_TEST

static Suite *ringlog_suite(void)
{
        Suite *s = suite_create("ringlog");
        TCase *tc = tcase_create("log");

        tcase_add_test(tc, test_the_log_reads_from_any_offset);
        tcase_add_test(tc, test_the_log_keeps_the_last_max_bytes_in_a_file_of_max_bytes);
        tcase_add_test(tc, test_a_log_whose_file_cannot_grow_stops_at_the_bytes_it_holds);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(ringlog_suite());
}
