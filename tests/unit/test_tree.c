/* test_tree.c: the one tree walker (sh/tree.h) and the cgroupfs flavour of the remover: every
 * entry once with its depth, directories announced when entered and left after their
 * contents, links never followed, the open-directory bound held, a stop honoured with
 * nothing left open, an event a step when stepped; sh_fs_remove_dirs removes empty directories
 * deepest first and nothing else; the remover in steps (one entry a step, passes for a deep tree,
 * directories its caller refuses left alone). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/remove.h"
#include "sh/tree.h"
#include "unit.h"

static char base[64], dir[128];
static int dfd = -1;

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
        (void)st;
        (void)flag;
        (void)f;
        remove(p);
        return 0;
}

/* One directory for the whole suite, removed by the runner's process even when a test fails
 * (an unchecked fixture); each test works in a fresh directory below it. */
static void base_setup(void)
{
        snprintf(base, sizeof(base), "/tmp/sh-test-tree-XXXXXX");
        if (!mkdtemp(base))
                abort();
}

static void base_teardown(void)
{
        nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static void setup(void)
{
        snprintf(dir, sizeof(dir), "%s/tXXXXXX", base);
        ck_assert_ptr_nonnull(mkdtemp(dir));
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dfd, 0);
}

static void teardown(void)
{
        close(dfd);
}

static void mk(const char *path)
{
        ck_assert_int_eq(mkdirat(dfd, path, 0755), 0);
}

static void touch(const char *path)
{
        int fd = openat(dfd, path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

        ck_assert_int_ge(fd, 0);
        close(fd);
}

/* A log of the events, one line each: "E name depth type", "D name depth", "L name depth",
 * "X what err". */
typedef struct rec {
        char log[8192];
        int descend_links; /* ask to enter links too */
        int stop_at;       /* return -ECANCELED at this event (1-based); 0: never */
        int events;
        int most_fds;
} rec;

static void add(rec *r, char kind, const char *name, unsigned depth, const int *x)
{
        size_t n = strlen(r->log);

        if (x)
                snprintf(r->log + n, sizeof(r->log) - n, "%c %s %u %d\n", kind, name, depth, *x);
        else
                snprintf(r->log + n, sizeof(r->log) - n, "%c %s %u\n", kind, name, depth);
}

static int record(const sh_tree_ev *ev, void *data)
{
        rec *r = data;
        int fds = ut_count_fds();

        if (fds > r->most_fds)
                r->most_fds = fds;
        if (r->stop_at && ++r->events == r->stop_at)
                return -ECANCELED;
        switch (ev->kind) {
        case SH_TREE_ENTRY:
                add(r, 'E', ev->name, ev->depth, &(int){ev->type});
                if (ev->type == DT_DIR || (r->descend_links && ev->type == DT_LNK))
                        return SH_TREE_DESCEND;
                return 0;
        case SH_TREE_DIR:
                add(r, 'D', ev->name, ev->depth, NULL);
                return 0;
        case SH_TREE_LEAVE:
                add(r, 'L', ev->name, ev->depth, NULL);
                return 0;
        case SH_TREE_ERROR:
                add(r, 'X', ev->what, ev->depth, &ev->err);
                return 0;
        }
        return 0;
}

START_TEST(test_every_entry_once_with_its_depth_and_directories_left_after_their_contents)
{
        rec r = {0};

        mk("a");
        mk("a/b");
        touch("a/b/f");
        ck_assert_int_eq(sh_tree_walk(dfd, 8, record, &r), 0);
        ck_assert_str_eq(r.log, "D  0\n"
                                "E a 1 4\n"
                                "D a 1\n"
                                "E b 2 4\n"
                                "D b 2\n"
                                "E f 3 8\n"
                                "L b 2\n"
                                "L a 1\n");
}
END_TEST

START_TEST(test_a_link_is_never_followed_even_when_asked)
{
        rec r = {.descend_links = 1};

        mk("outside");
        touch("outside/secret");
        mk("t");
        ck_assert_int_eq(symlinkat("../outside", dfd, "t/l"), 0);
        ck_assert_int_eq(sh_tree_walk(dfd, 8, record, &r), 0);
        /* the link itself is an entry, of type link; entering it fails as no directory */
        ck_assert_ptr_nonnull(strstr(r.log, "E l 2 10\n"));
        ck_assert(strstr(r.log, "X open 2 20\n") ||
                  strstr(r.log, "X open 2 40\n")); /* ENOTDIR, ELOOP */
        /* "secret" is met once, through "outside" itself, never through the link */
        ck_assert_ptr_nonnull(strstr(r.log, "E secret 2 8\n"));
        ck_assert_ptr_null(strstr(strstr(r.log, "E secret") + 1, "E secret"));
        ck_assert_ptr_null(strstr(r.log, "D l"));
}
END_TEST

START_TEST(test_descending_past_the_open_bound_stops_with_eloop_and_closes_everything)
{
        rec r = {0};
        char p[64] = "d";
        int before;

        for (int i = 0; i < 10; i++) {
                mk(p);
                strcat(p, "/d");
        }
        before = ut_count_fds();
        ck_assert_int_eq(sh_tree_walk(dfd, 4, record, &r), -ELOOP);
        /* the top and three levels below it, never more */
        ck_assert_int_le(r.most_fds, before + 4);
        ck_assert_ptr_nonnull(strstr(r.log, "E d 4 4\n"));
        ck_assert_ptr_null(strstr(r.log, "D d 4"));
        ck_assert_int_eq(ut_count_fds(), before);
}
END_TEST

START_TEST(test_a_callback_stop_is_returned_with_nothing_left_open)
{
        rec r = {.stop_at = 4};
        int before;

        mk("a");
        mk("a/b");
        touch("a/b/f");
        before = ut_count_fds();
        ck_assert_int_eq(sh_tree_walk(dfd, 8, record, &r), -ECANCELED);
        ck_assert_int_eq(ut_count_fds(), before);
}
END_TEST

START_TEST(test_an_o_path_top_works_and_keeps_its_offset_untouched)
{
        rec r = {0};
        int top;

        touch("f");
        top = openat(dfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(top, 0);
        ck_assert_int_eq(sh_tree_walk(top, 2, record, &r), 0);
        ck_assert_str_eq(r.log, "D  0\nE f 1 8\n");
        close(top);
        ck_assert_int_eq(lseek(dfd, 0, SEEK_CUR), 0);
}
END_TEST

START_TEST(test_remove_dirs_removes_empty_directories_deepest_first)
{
        struct stat st;

        mk("cg");
        mk("cg/a");
        mk("cg/a/b");
        mk("cg/c");
        ck_assert_int_eq(sh_fs_remove_dirs(dfd, "cg", NULL), 0);
        ck_assert_int_eq(fstatat(dfd, "cg", &st, AT_SYMLINK_NOFOLLOW), -1);
        ck_assert_int_eq(errno, ENOENT);
        /* absent is fine */
        ck_assert_int_eq(sh_fs_remove_dirs(dfd, "cg", NULL), 0);
}
END_TEST

START_TEST(test_remove_dirs_leaves_files_and_their_directories_alone)
{
        sh_error *err = NULL;
        struct stat st;

        mk("cg");
        mk("cg/a");
        touch("cg/a/cgroup.procs");
        mk("cg/b");
        ck_assert_int_eq(sh_fs_remove_dirs(dfd, "cg", &err), -ENOTEMPTY);
        ck_assert_ptr_nonnull(err);
        sh_error_release(&err);
        ck_assert_int_eq(fstatat(dfd, "cg/a/cgroup.procs", &st, AT_SYMLINK_NOFOLLOW), 0);
        /* the empty sibling went */
        ck_assert_int_eq(fstatat(dfd, "cg/b", &st, AT_SYMLINK_NOFOLLOW), -1);
        /* and a file is no tree of directories */
        ck_assert_int_eq(sh_fs_remove_dirs(dfd, "cg/a/cgroup.procs", NULL), -ENOTDIR);
}
END_TEST

START_TEST(test_a_walk_stepped_tells_one_entry_a_step_and_the_same_events)
{
        rec whole = {0}, stepped = {0};
        sh_tree_walker *w;
        int k, steps = 0;

        mk("a");
        mk("a/b");
        touch("a/b/f");
        touch("g");
        ck_assert_int_eq(sh_tree_walk(dfd, 8, record, &whole), 0);
        ck_assert_int_eq(sh_tree_open(dfd, 8, &w), 0);
        while ((k = sh_tree_step(w, record, &stepped)) > 0) {
                int entries = 0;

                steps++;
                for (const char *c = stepped.log; *c; c++)
                        entries += *c == 'E' && (c == stepped.log || c[-1] == '\n');
                ck_assert_int_le(entries, steps);
        }
        ck_assert_int_eq(k, 0);
        sh_tree_free(w);
        ck_assert_str_eq(stepped.log, whole.log);
}
END_TEST

/* SKIP at a directory's SH_TREE_DIR: its entries are not read, and it is left at once. */
static int skip_b(const sh_tree_ev *ev, void *data)
{
        int r = record(ev, data);

        return ev->kind == SH_TREE_DIR && strcmp(ev->name, "b") == 0 ? SH_TREE_SKIP : r;
}

START_TEST(test_a_directory_skipped_when_entered_is_left_unread)
{
        rec r = {0};

        mk("b");
        touch("b/hidden");
        ck_assert_int_eq(sh_tree_walk(dfd, 8, skip_b, &r), 0);
        ck_assert_str_eq(r.log, "D  0\nE b 1 4\nD b 1\nL b 1\n");
}
END_TEST

static unsigned entries_below(const char *path)
{
        DIR *d = opendir(ut_path(dir, "%s", path));
        struct dirent *de;
        unsigned n = 0;

        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
        closedir(d);
        return n;
}

START_TEST(test_the_remover_in_steps_removes_one_entry_a_step)
{
        sh_fs_remover *rm;
        struct stat st;

        mk("t");
        for (int i = 0; i < 5; i++)
                touch(ut_path("t", "f%d", i));
        ck_assert_int_eq(sh_fs_remover_new(dfd, "t", NULL, NULL, &rm), 0);
        ck_assert_int_eq(sh_fs_remover_step(rm), 1); /* the entry looked at, opened */
        ck_assert_int_eq(sh_fs_remover_step(rm), 1); /* its walk begun */
        for (unsigned left = 5; left > 0; left--) {
                ck_assert_uint_eq(entries_below("t"), left);
                ck_assert_int_eq(sh_fs_remover_step(rm), 1);
        }
        ck_assert_uint_eq(entries_below("t"), 0);
        while (sh_fs_remover_step(rm))
                ;
        ck_assert_int_eq(sh_fs_remover_errno(rm), 0);
        sh_fs_remover_free(rm);
        ck_assert_int_eq(fstatat(dfd, "t", &st, AT_SYMLINK_NOFOLLOW), -1);
        ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(test_the_remover_removes_a_tree_deeper_than_it_keeps_open_in_passes)
{
        char path[1024] = "deep";
        sh_fs_remover *rm;
        struct stat st;

        mk(path);
        for (int i = 0; i < 150; i++) {
                strcat(path, "/d");
                mk(path);
        }
        touch(ut_path(path, "f"));
        ck_assert_int_eq(sh_fs_remover_new(dfd, "deep", NULL, NULL, &rm), 0);
        while (sh_fs_remover_step(rm))
                ;
        ck_assert_int_eq(sh_fs_remover_errno(rm), 0);
        sh_fs_remover_free(rm);
        ck_assert_int_eq(fstatat(dfd, "deep", &st, AT_SYMLINK_NOFOLLOW), -1);
}
END_TEST

static bool refuse_inner(void *data, int fd)
{
        struct stat st;

        return fstat(fd, &st) == 0 && st.st_ino != *(ino_t *)data;
}

START_TEST(test_the_remover_leaves_a_directory_its_caller_refuses_and_says_eperm)
{
        sh_fs_remover *rm;
        struct stat st;
        ino_t inner;

        mk("t");
        touch("t/x");
        mk("t/inner");
        touch("t/inner/kept");
        ck_assert_int_eq(fstatat(dfd, "t/inner", &st, 0), 0);
        inner = st.st_ino;
        ck_assert_int_eq(sh_fs_remover_new(dfd, "t", refuse_inner, &inner, &rm), 0);
        while (sh_fs_remover_step(rm))
                ;
        ck_assert_int_eq(sh_fs_remover_errno(rm), EPERM);
        sh_fs_remover_free(rm);
        ck_assert_int_eq(fstatat(dfd, "t/inner/kept", &st, AT_SYMLINK_NOFOLLOW), 0);
        ck_assert_int_eq(fstatat(dfd, "t/x", &st, AT_SYMLINK_NOFOLLOW), -1);
}
END_TEST

START_TEST(test_the_remover_unlinks_a_file_or_a_link_itself)
{
        sh_fs_remover *rm;
        struct stat st;

        touch("f");
        ck_assert_int_eq(symlinkat("f", dfd, "l"), 0);
        ck_assert_int_eq(sh_fs_remover_new(dfd, "l", NULL, NULL, &rm), 0);
        while (sh_fs_remover_step(rm))
                ;
        ck_assert_int_eq(sh_fs_remover_errno(rm), 0);
        sh_fs_remover_free(rm);
        ck_assert_int_eq(fstatat(dfd, "l", &st, AT_SYMLINK_NOFOLLOW), -1);
        ck_assert_int_eq(fstatat(dfd, "f", &st, AT_SYMLINK_NOFOLLOW), 0);
}
END_TEST

static Suite *tree_suite(void)
{
        Suite *s = suite_create("tree");
        TCase *tc = tcase_create("tree");

        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(
                tc, test_every_entry_once_with_its_depth_and_directories_left_after_their_contents);
        tcase_add_test(tc, test_a_link_is_never_followed_even_when_asked);
        tcase_add_test(tc,
                       test_descending_past_the_open_bound_stops_with_eloop_and_closes_everything);
        tcase_add_test(tc, test_a_callback_stop_is_returned_with_nothing_left_open);
        tcase_add_test(tc, test_an_o_path_top_works_and_keeps_its_offset_untouched);
        tcase_add_test(tc, test_remove_dirs_removes_empty_directories_deepest_first);
        tcase_add_test(tc, test_remove_dirs_leaves_files_and_their_directories_alone);
        tcase_add_test(tc, test_a_walk_stepped_tells_one_entry_a_step_and_the_same_events);
        tcase_add_test(tc, test_a_directory_skipped_when_entered_is_left_unread);
        tcase_add_test(tc, test_the_remover_in_steps_removes_one_entry_a_step);
        tcase_add_test(tc, test_the_remover_removes_a_tree_deeper_than_it_keeps_open_in_passes);
        tcase_add_test(tc, test_the_remover_leaves_a_directory_its_caller_refuses_and_says_eperm);
        tcase_add_test(tc, test_the_remover_unlinks_a_file_or_a_link_itself);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(tree_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
