/* test_replace.c: a text replaced in a file in two bounded passes (src/fs/replace.c): the count,
 * the writing, a match across two reads, each bound refused in the pass that sees it; one file's
 * replacement under a policy, from its open to its commit (sh_fs_replace_file). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/replace.h"
#include "unit.h"

static int memfd_with(const char *text, size_t n)
{
        int fd = memfd_create("replace", MFD_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, n), (ssize_t)n);
        return fd;
}

/* Every step of the pass; its last result. */
static int run_pass(sh_fs_replace *x, int out)
{
        int k;

        ck_assert_int_eq(sh_fs_replace_pass(x, out), 0);
        while ((k = sh_fs_replace_step(x)) > 0)
                ;
        return k;
}

/* What the output fd holds. */
static char *contents(int fd, size_t *n)
{
        off_t end = lseek(fd, 0, SEEK_END);
        char *p = malloc((size_t)end + 1);

        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(pread(fd, p, (size_t)end, 0), end);
        p[end] = '\0';
        *n = (size_t)end;
        return p;
}

/* Replace old by new in text: the count of the first pass, the text the second writes. */
static char *replace(const char *text, size_t n, const char *old, const char *new, uint64_t *count,
                     size_t *outn)
{
        int in = memfd_with(text, n), out = memfd_create("out", MFD_CLOEXEC);
        sh_fs_replace x;
        char *got;

        ck_assert_int_ge(out, 0);
        ck_assert_int_eq(
                sh_fs_replace_init(&x, in, old, strlen(old), new, strlen(new), 64u << 20, 1u << 20),
                0);
        ck_assert_int_eq(run_pass(&x, -1), 0);
        *count = x.count;
        ck_assert_int_eq(run_pass(&x, out), 0);
        ck_assert_uint_eq(x.count, *count);
        got = contents(out, outn);
        sh_fs_replace_done(&x);
        close(in);
        close(out);
        return got;
}

START_TEST(test_the_first_pass_counts_and_the_second_writes_the_new_text)
{
        uint64_t count;
        size_t n;
        char *got = replace("one two one two one", 19, "one", "1", &count, &n);

        ck_assert_uint_eq(count, 3);
        ck_assert_str_eq(got, "1 two 1 two 1");
        free(got);
}
END_TEST

START_TEST(test_a_counting_pass_writes_nothing)
{
        int in = memfd_with("aaa", 3);
        sh_fs_replace x;

        ck_assert_int_eq(sh_fs_replace_init(&x, in, "a", 1, "b", 1, 100, 100), 0);
        ck_assert_int_eq(run_pass(&x, -1), 0);
        ck_assert_uint_eq(x.count, 3);
        ck_assert_uint_eq(x.written, 0);
        sh_fs_replace_done(&x);
        close(in);
}
END_TEST

START_TEST(test_a_match_across_two_reads_is_replaced)
{
        size_t n = SH_FS_REPLACE_CHUNK + 64, outn;
        char *text = malloc(n);
        uint64_t count;
        char *got;

        ck_assert_ptr_nonnull(text);
        memset(text, '.', n);
        memcpy(text + SH_FS_REPLACE_CHUNK + 4 - 3, "NEEDLE", 6); /* across the first read's end */
        got = replace(text, n, "NEEDLE", "pin", &count, &outn);
        ck_assert_uint_eq(count, 1);
        ck_assert_uint_eq(outn, n - 3);
        ck_assert(memcmp(got + SH_FS_REPLACE_CHUNK + 1, "pin", 3) == 0);
        free(got);
        free(text);
}
END_TEST

START_TEST(test_an_empty_new_text_removes_the_matches)
{
        uint64_t count;
        size_t n;
        char *got = replace("a-b-c", 5, "-", "", &count, &n);

        ck_assert_uint_eq(count, 2);
        ck_assert_str_eq(got, "abc");
        free(got);
}
END_TEST

/* Why the counting pass of old -> new in text, bounded by max and max_matches, refuses it. */
static sh_fs_replace_refusal counting_refusal(const char *text, const char *old, const char *new,
                                              uint64_t max, uint64_t max_matches)
{
        int in = memfd_with(text, strlen(text));
        sh_fs_replace x;
        sh_fs_replace_refusal why;

        ck_assert_int_eq(
                sh_fs_replace_init(&x, in, old, strlen(old), new, strlen(new), max, max_matches),
                0);
        ck_assert_int_lt(run_pass(&x, -1), 0);
        why = x.refused;
        sh_fs_replace_done(&x);
        close(in);
        return why;
}

START_TEST(test_a_file_over_the_bound_is_refused)
{
        ck_assert_int_eq(counting_refusal("0123456789", "5", "x", 9, 100), SH_FS_REPLACE_OVER);
}
END_TEST

START_TEST(test_a_file_that_would_grow_past_the_bound_is_refused_while_counting)
{
        /* 4 + 4 * 2 = 12 > 10 */
        ck_assert_int_eq(counting_refusal("aaaa", "a", "bbb", 10, 100), SH_FS_REPLACE_GROWS);
}
END_TEST

START_TEST(test_more_matches_than_the_bound_are_refused)
{
        ck_assert_int_eq(counting_refusal("aaaa", "a", "a", 100, 3), SH_FS_REPLACE_MATCHES);
}
END_TEST

START_TEST(test_a_file_grown_between_the_passes_is_refused_while_writing)
{
        int in = memfd_with("ab", 2), out = memfd_create("out", MFD_CLOEXEC);
        sh_fs_replace x;

        ck_assert_int_ge(out, 0);
        ck_assert_int_eq(sh_fs_replace_init(&x, in, "a", 1, "aaaa", 4, 6, 100), 0);
        ck_assert_int_eq(run_pass(&x, -1), 0);      /* 2 + 3 = 5 <= 6 */
        ck_assert_int_eq(pwrite(in, "a", 1, 2), 1); /* "aba": 3 + 6 = 9 */
        ck_assert_int_lt(run_pass(&x, out), 0);
        ck_assert_int_eq(x.refused, SH_FS_REPLACE_GROWS);
        sh_fs_replace_done(&x);
        close(in);
        close(out);
}
END_TEST

START_TEST(test_a_failed_write_is_its_errno)
{
        int in = memfd_with("aaa", 3), p[2];
        sh_fs_replace x;

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        close(p[1]);
        ck_assert_int_eq(sh_fs_replace_init(&x, in, "a", 1, "b", 1, 100, 100), 0);
        /* a pipe's read end is no output */
        ck_assert_int_eq(run_pass(&x, p[0]), -EBADF);
        ck_assert_int_eq(x.refused, SH_FS_REPLACE_OK);
        sh_fs_replace_done(&x);
        close(p[0]);
        close(in);
}
END_TEST

/* ---- one file under a policy ------------------------------------------------------------- */

static char base_dir[256], tdir[512];
static int rootfd = -1;

#define tp(...) ut_path(tdir, __VA_ARGS__)

static void file_setup(void)
{
        ck_assert_int_eq(ut_mkdtemp(base_dir, sizeof(base_dir), "replace"), 0);
        rootfd = ut_workspace(base_dir, tdir, sizeof(tdir));
}

static void file_teardown(void)
{
        close(rootfd);
        ut_rm_rf(base_dir);
}

static const char *file_text(const char *path)
{
        static char buf[256];
        FILE *f = fopen(path, "r");
        size_t n;

        ck_assert_ptr_nonnull(f);
        n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

/* "one" by "1" in ws/f under a policy of no hooks and no trash: the steps until they end. */
static int replace_file_steps(sh_fs_replace_file *f, const sh_fs_ctx *c, uint64_t max)
{
        sh_error *err = NULL;
        int k;

        ck_assert_int_eq(sh_fs_replace_file_open(f, c, "f", "one", 3, "1", 1, max, 100, &err), 0);
        while ((k = sh_fs_replace_file_step(f, &err)) == 1)
                ;
        ck_assert_ptr_null(err);
        return k;
}

START_TEST(test_a_files_text_is_replaced_in_place_with_its_mode_kept)
{
        const sh_fs_ctx c = {.root = rootfd, .trashfd = -1};
        sh_fs_replace_file f;
        sh_error *err = NULL;
        struct stat st;

        ut_write_file(tp("ws/f"), "one two one");
        ck_assert_int_eq(chmod(tp("ws/f"), 0640), 0);
        ck_assert_int_eq(replace_file_steps(&f, &c, 1024), SH_FS_REPLACE_WRITTEN);
        ck_assert_uint_eq(f.x.count, 2);
        ck_assert_str_eq(file_text(tp("ws/f")), "one two one"); /* nothing seen before the commit */
        ck_assert_int_eq(sh_fs_replace_file_commit(&f, &err), 0);
        ck_assert_int_eq(sh_fs_replace_file_done(&f), -1);
        ck_assert_str_eq(file_text(tp("ws/f")), "1 two 1");
        ck_assert_int_eq(stat(tp("ws/f"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0640);
}
END_TEST

START_TEST(test_a_file_without_a_match_is_left_untouched)
{
        const sh_fs_ctx c = {.root = rootfd, .trashfd = -1};
        sh_fs_replace_file f;
        struct stat before, after;

        ut_write_file(tp("ws/f"), "two three");
        ck_assert_int_eq(stat(tp("ws/f"), &before), 0);
        ck_assert_int_eq(replace_file_steps(&f, &c, 1024), 0);
        ck_assert_uint_eq(f.x.count, 0);
        ck_assert_int_eq(sh_fs_replace_file_done(&f), -1); /* no unnamed file was made */
        ck_assert_int_eq(stat(tp("ws/f"), &after), 0);
        ck_assert_uint_eq(after.st_ino, before.st_ino);
}
END_TEST

START_TEST(test_a_file_replaced_meanwhile_is_never_overwritten)
{
        const sh_fs_ctx c = {.root = rootfd, .trashfd = -1};
        sh_fs_replace_file f;
        sh_error *err = NULL;
        int fd;

        ut_write_file(tp("ws/f"), "one");
        ck_assert_int_eq(replace_file_steps(&f, &c, 1024), SH_FS_REPLACE_WRITTEN);
        ut_write_file(tp("ws/g"), "theirs");
        ck_assert_int_eq(rename(tp("ws/g"), tp("ws/f")), 0);
        ck_assert_int_lt(sh_fs_replace_file_commit(&f, &err), 0);
        ck_assert_int_eq(err->errnum, EAGAIN);
        sh_error_release(&err);
        ck_assert_str_eq(file_text(tp("ws/f")), "theirs");
        fd = sh_fs_replace_file_done(&f); /* the unnamed file, handed back */
        ck_assert_int_ge(fd, 0);
        close(fd);
}
END_TEST

START_TEST(test_a_file_over_the_bound_is_refused_at_its_open)
{
        const sh_fs_ctx c = {.root = rootfd, .trashfd = -1};
        sh_fs_replace_file f;
        sh_error *err = NULL;

        ut_write_file(tp("ws/f"), "one one one");
        ck_assert_int_lt(sh_fs_replace_file_open(&f, &c, "f", "one", 3, "1", 1, 4, 100, &err), 0);
        ck_assert_int_eq(f.x.refused, SH_FS_REPLACE_OVER);
        sh_error_release(&err);
        ck_assert_int_eq(sh_fs_replace_file_done(&f), -1);
        ck_assert_str_eq(file_text(tp("ws/f")), "one one one");
}
END_TEST

static Suite *replace_suite(void)
{
        Suite *s = suite_create("fs_replace");
        TCase *tc = tcase_create("replace");

        tcase_add_test(tc, test_the_first_pass_counts_and_the_second_writes_the_new_text);
        tcase_add_test(tc, test_a_counting_pass_writes_nothing);
        tcase_add_test(tc, test_a_match_across_two_reads_is_replaced);
        tcase_add_test(tc, test_an_empty_new_text_removes_the_matches);
        tcase_add_test(tc, test_a_file_over_the_bound_is_refused);
        tcase_add_test(tc, test_a_file_that_would_grow_past_the_bound_is_refused_while_counting);
        tcase_add_test(tc, test_more_matches_than_the_bound_are_refused);
        tcase_add_test(tc, test_a_file_grown_between_the_passes_is_refused_while_writing);
        tcase_add_test(tc, test_a_failed_write_is_its_errno);
        suite_add_tcase(s, tc);
        tc = tcase_create("file");
        tcase_add_checked_fixture(tc, file_setup, file_teardown);
        tcase_add_test(tc, test_a_files_text_is_replaced_in_place_with_its_mode_kept);
        tcase_add_test(tc, test_a_file_without_a_match_is_left_untouched);
        tcase_add_test(tc, test_a_file_replaced_meanwhile_is_never_overwritten);
        tcase_add_test(tc, test_a_file_over_the_bound_is_refused_at_its_open);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(replace_suite());
}
