/* test_lines.c: a range of a file's lines read in bounded steps (src/fs/lines.c): which lines,
 * how they are joined, a line cut across two reads, the bound of one step. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sh/lines.h"
#include "unit.h"

/* A memfd holding n bytes of text. */
static int text_fd(const char *text, size_t n)
{
        int fd = memfd_create("lines", MFD_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, n), (ssize_t)n);
        ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
        return fd;
}

/* Every step until the end; the steps taken in *steps. */
static void read_all(sh_fs_lines *l, sh_buf *b, unsigned *steps)
{
        int k;

        *steps = 0;
        while ((k = sh_fs_lines_step(l, b)) > 0)
                (*steps)++;
        ck_assert_int_eq(k, 0);
}

static void check_range(const char *text, uint64_t offset, uint64_t limit, const char *want)
{
        int fd = text_fd(text, strlen(text));
        sh_fs_lines *l = malloc(sizeof(*l));
        sh_buf b = {0};
        unsigned steps;

        ck_assert_ptr_nonnull(l);
        sh_fs_lines_init(l, fd, offset, limit);
        read_all(l, &b, &steps);
        ck_assert_uint_eq(b.len, strlen(want));
        ck_assert(memcmp(b.p ? b.p : "", want, b.len) == 0);
        sh_buf_done(&b);
        free(l);
        close(fd);
}

START_TEST(test_the_lines_asked_are_joined_by_newlines)
{
        check_range("a\nb\nc\nd\n", 2, 2, "b\nc");
}
END_TEST

START_TEST(test_a_last_line_without_its_newline_is_a_line)
{
        check_range("a\nb\nc", 3, 0, "c");
        check_range("a\nb\nc", 1, 0, "a\nb\nc");
}
END_TEST

START_TEST(test_nothing_after_a_final_newline_is_a_line)
{
        check_range("a\nb\n", 3, 0, "");
        check_range("a\nb\n", 1, 0, "a\nb");
}
END_TEST

START_TEST(test_empty_lines_are_lines)
{
        check_range("a\n\n\nb\n", 2, 2, "\n");
        check_range("a\n\n\nb\n", 1, 4, "a\n\n\nb");
}
END_TEST

START_TEST(test_a_limit_that_would_overflow_reads_to_the_last_line)
{
        check_range("a\nb\nc\n", 2, UINT64_MAX, "b\nc");
}
END_TEST

START_TEST(test_a_line_cut_across_two_reads_is_one_line)
{
        size_t n = SH_FS_LINES_READ + 10;
        char *text = malloc(n + 1);
        char *want;

        ck_assert_ptr_nonnull(text);
        memset(text, 'x', n);
        text[0] = 'a';
        text[1] = '\n';
        text[n - 3] = '\n';
        text[n - 2] = 'z';
        text[n - 1] = '\n';
        text[n] = '\0';
        want = strndup(text + 2, n - 5);
        ck_assert_ptr_nonnull(want);
        check_range(text, 2, 1, want); /* the long line alone, whole */
        free(want);
        free(text);
}
END_TEST

/* Lines offset..offset+limit-1 of 3 * SH_FS_LINES_READ empty lines: the steps taken, the bytes
 * of the answer. */
static void steps_over_empty_lines(uint64_t offset, uint64_t limit, unsigned *steps, size_t *len)
{
        size_t n = 3 * SH_FS_LINES_READ;
        char *text = malloc(n);
        sh_fs_lines *l = malloc(sizeof(*l));
        sh_buf b = {0};
        int fd;

        ck_assert_ptr_nonnull(text);
        ck_assert_ptr_nonnull(l);
        memset(text, '\n', n);
        fd = text_fd(text, n);
        sh_fs_lines_init(l, fd, offset, limit);
        read_all(l, &b, steps);
        *len = b.len;
        sh_buf_done(&b);
        free(l);
        free(text);
        close(fd);
}

START_TEST(test_a_step_reads_one_buffer_at_most)
{
        unsigned steps;
        size_t len;

        steps_over_empty_lines(3 * SH_FS_LINES_READ, 0, &steps, &len); /* the last line only */
        ck_assert_uint_eq(steps, 3);
        ck_assert_uint_eq(len, 0);
}
END_TEST

START_TEST(test_the_range_ends_without_reading_the_rest)
{
        unsigned steps;
        size_t len;

        steps_over_empty_lines(1, 2, &steps, &len);
        ck_assert_uint_eq(steps, 1); /* the first buffer holds both: the rest is not read */
        ck_assert_uint_eq(len, 1);
}
END_TEST

START_TEST(test_a_failed_read_is_its_errno)
{
        sh_fs_lines *l = malloc(sizeof(*l));
        sh_buf b = {0};
        int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        ck_assert_ptr_nonnull(l);
        ck_assert_int_ge(fd, 0);
        sh_fs_lines_init(l, fd, 1, 0);
        ck_assert_int_eq(sh_fs_lines_step(l, &b), -EISDIR);
        sh_buf_done(&b);
        free(l);
        close(fd);
}
END_TEST

static Suite *lines_suite(void)
{
        Suite *s = suite_create("fs_lines");
        TCase *tc = tcase_create("lines");

        tcase_add_test(tc, test_the_lines_asked_are_joined_by_newlines);
        tcase_add_test(tc, test_a_last_line_without_its_newline_is_a_line);
        tcase_add_test(tc, test_nothing_after_a_final_newline_is_a_line);
        tcase_add_test(tc, test_empty_lines_are_lines);
        tcase_add_test(tc, test_a_limit_that_would_overflow_reads_to_the_last_line);
        tcase_add_test(tc, test_a_line_cut_across_two_reads_is_one_line);
        tcase_add_test(tc, test_a_step_reads_one_buffer_at_most);
        tcase_add_test(tc, test_the_range_ends_without_reading_the_rest);
        tcase_add_test(tc, test_a_failed_read_is_its_errno);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(lines_suite());
}
