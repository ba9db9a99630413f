/* test_safe_open.c: path resolution confined to a root fd, with openat2 and with the fallback
 * walker (every test runs in both modes): links, "..", loops, O_NOFOLLOW, O_CREAT. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/safe_open.h"
#include "unit.h"

static char base_dir[256];
static char tdir[512];
static int rootfd = -1;

/* A path below the test dir (unit.h: rotating buffers, several per call). */
#define tp(...) ut_path(tdir, __VA_ARGS__)

static const char *read_fd(int fd)
{
        static char buf[256];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        ck_assert_int_ge(n, 0);
        buf[n] = '\0';
        return buf;
}

static void base_setup(void)
{
        if (ut_mkdtemp(base_dir, sizeof(base_dir), "safe-open") < 0)
                abort();
}

static void base_teardown(void)
{
        ut_rm_rf(base_dir);
}

/* Layout: tdir/ws is the root, tdir/outside holds a "secret" that must stay unreachable. */
static void setup(void)
{
        rootfd = ut_workspace(base_dir, tdir, sizeof(tdir));
        ut_write_file(tp("ws/f"), "INSIDE");
        ck_assert_int_eq(mkdir(tp("ws/sub"), 0755), 0);
}

static void setup_fallback(void)
{
        setup();
        sh_safe_force_fallback(true);
}

static void teardown(void)
{
        close(rootfd);
        sh_safe_force_fallback(false);
}

START_TEST(test_open_regular_file_inside_root)
{
        int fd = sh_safe_openat(rootfd, "f", O_RDONLY, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(read_fd(fd), "INSIDE");
        close(fd);
}
END_TEST

START_TEST(test_empty_path_opens_root_itself)
{
        struct stat a, b;
        int fd = sh_safe_openat(rootfd, "", O_RDONLY | O_DIRECTORY, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstat(fd, &a), 0);
        ck_assert_int_eq(fstat(rootfd, &b), 0);
        ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
        close(fd);
}
END_TEST

START_TEST(test_every_returned_fd_is_cloexec)
{
        int fd = sh_safe_openat(rootfd, "sub", O_PATH, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
        close(fd);
        fd = sh_safe_openat(rootfd, "f", O_RDONLY, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
        close(fd);
}
END_TEST

START_TEST(test_absolute_link_resolves_from_root)
{
        int fd;
        ck_assert_int_eq(symlink("/f", tp("ws/sub/abs")), 0);
        fd = sh_safe_openat(rootfd, "sub/abs", O_RDONLY, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(read_fd(fd), "INSIDE");
        close(fd);
}
END_TEST

START_TEST(test_absolute_link_to_host_path_stays_inside)
{
        /* On the host this names the real secret; inside the root it names nothing. */
        ck_assert_int_eq(symlink(tp("outside/secret"), tp("ws/l")), 0);
        ck_assert_int_eq(sh_safe_openat(rootfd, "l", O_RDONLY, 0), -ENOENT);
        ck_assert_int_eq(symlink("/etc/passwd", tp("ws/p")), 0);
        ck_assert_int_eq(sh_safe_openat(rootfd, "p", O_RDONLY, 0), -ENOENT);
}
END_TEST

START_TEST(test_dotdot_link_cannot_climb_above_root)
{
        int fd;
        ck_assert_int_eq(symlink("../outside/secret", tp("ws/up")), 0);
        ck_assert_int_eq(sh_safe_openat(rootfd, "up", O_RDONLY, 0), -ENOENT);
        ck_assert_int_eq(symlink("../../../../../../../../f", tp("ws/sub/up")), 0);
        fd = sh_safe_openat(rootfd, "sub/up", O_RDONLY, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(read_fd(fd), "INSIDE"); /* ".." stopped at the root */
        close(fd);
}
END_TEST

START_TEST(test_dir_link_to_parent_of_root_is_root)
{
        struct stat a, b;
        int fd;
        ck_assert_int_eq(symlink("..", tp("ws/sub/dd")), 0);
        ck_assert_int_eq(symlink("../..", tp("ws/dd")), 0);
        fd = sh_safe_openat(rootfd, "dd/sub/dd/dd", O_PATH | O_DIRECTORY, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstat(fd, &a), 0);
        ck_assert_int_eq(fstat(rootfd, &b), 0);
        ck_assert(a.st_ino == b.st_ino);
        close(fd);
        ck_assert_int_eq(sh_safe_openat(rootfd, "dd/outside/secret", O_RDONLY, 0), -ENOENT);
}
END_TEST

START_TEST(test_relative_link_resolves_from_its_directory)
{
        int fd;
        ut_write_file(tp("ws/sub/g"), "G");
        ck_assert_int_eq(symlink("g", tp("ws/sub/rel")), 0);
        ck_assert_int_eq(symlink("sub/rel", tp("ws/rel2")), 0);
        fd = sh_safe_openat(rootfd, "rel2", O_RDONLY, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(read_fd(fd), "G");
        close(fd);
}
END_TEST

START_TEST(test_link_loop_is_eloop)
{
        ck_assert_int_eq(symlink("b", tp("ws/a")), 0);
        ck_assert_int_eq(symlink("a", tp("ws/b")), 0);
        ck_assert_int_eq(sh_safe_openat(rootfd, "a", O_RDONLY, 0), -ELOOP);
        ck_assert_int_eq(sh_safe_openat(rootfd, "a/x", O_PATH, 0), -ELOOP);
}
END_TEST

START_TEST(test_chain_of_40_links_resolves_41_is_eloop)
{
        int fd;
        for (int i = 1; i <= 41; i++) {
                char target[32];
                snprintf(target, sizeof(target), i == 1 ? "f" : "l%d", i - 1);
                ck_assert_int_eq(symlink(target, tp("ws/l%d", i)), 0);
        }
        fd = sh_safe_openat(rootfd, "l40", O_RDONLY, 0);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(sh_safe_openat(rootfd, "l41", O_RDONLY, 0), -ELOOP);
}
END_TEST

START_TEST(test_opath_nofollow_opens_the_link_itself)
{
        struct stat st;
        int fd;
        ck_assert_int_eq(symlink("f", tp("ws/l")), 0);
        fd = sh_safe_openat(rootfd, "l", O_PATH | O_NOFOLLOW, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        close(fd);
}
END_TEST

START_TEST(test_nofollow_read_of_link_is_eloop)
{
        ck_assert_int_eq(symlink("f", tp("ws/l")), 0);
        ck_assert_int_eq(sh_safe_openat(rootfd, "l", O_RDONLY | O_NOFOLLOW, 0), -ELOOP);
}
END_TEST

START_TEST(test_nofollow_directory_open_of_link_fails)
{
        int r;
        ck_assert_int_eq(symlink("sub", tp("ws/l")), 0);
        r = sh_safe_openat(rootfd, "l", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        ck_assert(r == -ENOTDIR || r == -ELOOP);
}
END_TEST

START_TEST(test_intermediate_links_followed_with_nofollow)
{
        int fd;
        ut_write_file(tp("ws/sub/g"), "G");
        ck_assert_int_eq(symlink("/sub", tp("ws/ls")), 0);
        fd = sh_safe_openat(rootfd, "ls/g", O_RDONLY | O_NOFOLLOW, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(read_fd(fd), "G");
        close(fd);
}
END_TEST

START_TEST(test_file_as_intermediate_component_is_enotdir)
{
        ck_assert_int_eq(sh_safe_openat(rootfd, "f/x", O_RDONLY, 0), -ENOTDIR);
}
END_TEST

START_TEST(test_missing_component_is_enoent)
{
        ck_assert_int_eq(sh_safe_openat(rootfd, "nope/x", O_RDONLY, 0), -ENOENT);
        ck_assert_int_eq(sh_safe_openat(rootfd, "nope", O_RDONLY, 0), -ENOENT);
}
END_TEST

START_TEST(test_overlong_component_is_enametoolong)
{
        char name[NAME_MAX + 2];
        memset(name, 'x', sizeof(name) - 1);
        name[sizeof(name) - 1] = '\0';
        ck_assert_int_eq(sh_safe_openat(rootfd, name, O_RDONLY, 0), -ENAMETOOLONG);
}
END_TEST

START_TEST(test_creat_creates_inside_root)
{
        struct stat st;
        int fd = sh_safe_openat(rootfd, "sub/new", O_WRONLY | O_CREAT, 0600);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(lstat(tp("ws/sub/new"), &st), 0);
        ck_assert(S_ISREG(st.st_mode));
}
END_TEST

START_TEST(test_creat_through_dangling_link_stays_inside)
{
        struct stat st;
        int fd;
        /* on the host this link would create outside/created */
        ck_assert_int_eq(symlink(tp("outside/created"), tp("ws/dl")), 0);
        ck_assert_int_eq(sh_safe_openat(rootfd, "dl", O_WRONLY | O_CREAT, 0600), -ENOENT);
        ck_assert_int_eq(symlink("/made", tp("ws/dl2")), 0);
        fd = sh_safe_openat(rootfd, "dl2", O_WRONLY | O_CREAT, 0600);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(lstat(tp("ws/made"), &st), 0);
        ck_assert_int_eq(lstat(tp("outside/created"), &st), -1);
}
END_TEST

START_TEST(test_creat_excl_on_link_is_eexist)
{
        struct stat st;
        ck_assert_int_eq(symlink("/made", tp("ws/dl")), 0);
        ck_assert_int_eq(sh_safe_openat(rootfd, "dl", O_WRONLY | O_CREAT | O_EXCL, 0600), -EEXIST);
        ck_assert_int_eq(lstat(tp("ws/made"), &st), -1);
}
END_TEST

START_TEST(test_trailing_slash_in_link_target_requires_directory)
{
        int fd;
        ck_assert_int_eq(symlink("f/", tp("ws/fs")), 0);
        ck_assert_int_eq(sh_safe_openat(rootfd, "fs", O_RDONLY, 0), -ENOTDIR);
        ck_assert_int_eq(symlink("sub/", tp("ws/ds")), 0);
        fd = sh_safe_openat(rootfd, "ds", O_PATH, 0);
        ck_assert_int_ge(fd, 0);
        close(fd);
}
END_TEST

START_TEST(test_dotdot_in_link_target_pops_one_level)
{
        int fd;
        ck_assert_int_eq(symlink("../sub/../f", tp("ws/sub/back")), 0);
        fd = sh_safe_openat(rootfd, "sub/back", O_RDONLY, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(read_fd(fd), "INSIDE");
        close(fd);
}
END_TEST

START_TEST(test_open_parent_returns_parent_and_base)
{
        struct stat a, b;
        const char *base = NULL;
        int fd = sh_safe_open_parent(rootfd, "sub/x", &base);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(base, "x");
        ck_assert_int_eq(fstat(fd, &a), 0);
        ck_assert_int_eq(stat(tp("ws/sub"), &b), 0);
        ck_assert(a.st_ino == b.st_ino);
        close(fd);
        fd = sh_safe_open_parent(rootfd, "top", &base);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(base, "top");
        close(fd);
}
END_TEST

START_TEST(test_open_parent_of_root_is_einval)
{
        const char *base = NULL;
        ck_assert_int_eq(sh_safe_open_parent(rootfd, "", &base), -EINVAL);
        ck_assert_ptr_null(base);
}
END_TEST

START_TEST(test_open_parent_missing_or_not_dir)
{
        const char *base = NULL;
        ck_assert_int_eq(sh_safe_open_parent(rootfd, "nope/x", &base), -ENOENT);
        ck_assert_int_eq(sh_safe_open_parent(rootfd, "f/x", &base), -ENOTDIR);
}
END_TEST

START_TEST(test_open_parent_follows_links_inside_root)
{
        struct stat a, b;
        const char *base;
        int fd;
        ck_assert_int_eq(symlink("/sub", tp("ws/ls")), 0);
        fd = sh_safe_open_parent(rootfd, "ls/x", &base);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstat(fd, &a), 0);
        ck_assert_int_eq(stat(tp("ws/sub"), &b), 0);
        ck_assert(a.st_ino == b.st_ino);
        close(fd);
}
END_TEST

/* ---- guarded lookups: every directory passed is shown to the guard ---------------------- */

/* Refuses the directory whose inode is `closed` and counts the calls. */
typedef struct guard_state {
        ino_t closed;
        int calls;
} guard_state;

static int refuse_one(void *data, int dirfd)
{
        guard_state *g = data;
        struct stat st;

        g->calls++;
        if (fstat(dirfd, &st) < 0)
                return -errno;
        return st.st_ino == g->closed ? -EACCES : 0;
}

static ino_t ino_of(const char *path)
{
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        return st.st_ino;
}

START_TEST(test_guard_refuses_a_path_through_a_refused_directory)
{
        guard_state g = {.closed = ino_of(tp("ws/sub"))};
        sh_safe_guard guard = {refuse_one, &g};

        ut_write_file(tp("ws/sub/f"), "BELOW");
        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, "sub/f", O_RDONLY, 0, &guard), -EACCES);
        /* the directory itself is the last component: opened, not entered */
        int fd = sh_safe_openat_guarded(rootfd, "sub", O_PATH | O_DIRECTORY, 0, &guard);
        ck_assert_int_ge(fd, 0);
        close(fd);
}
END_TEST

START_TEST(test_guard_sees_the_directories_a_link_leads_through)
{
        guard_state g = {.closed = ino_of(tp("ws/sub"))};
        sh_safe_guard guard = {refuse_one, &g};

        ut_write_file(tp("ws/sub/f"), "BELOW");
        ck_assert_int_eq(mkdir(tp("ws/open"), 0755), 0);
        ck_assert_int_eq(symlink("/sub/f", tp("ws/open/abs")), 0);
        ck_assert_int_eq(symlink("../sub", tp("ws/open/rel")), 0);
        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, "open/abs", O_RDONLY, 0, &guard), -EACCES);
        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, "open/rel/f", O_RDONLY, 0, &guard),
                         -EACCES);
        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, "sub/../sub/f", O_RDONLY, 0, &guard),
                         -EACCES);
}
END_TEST

START_TEST(test_guard_sees_the_root_first)
{
        guard_state g = {.closed = ino_of(tp("ws"))};
        sh_safe_guard guard = {refuse_one, &g};
        const char *base;

        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, "f", O_RDONLY, 0, &guard), -EACCES);
        ck_assert_int_eq(sh_safe_open_parent_guarded(rootfd, "f", &base, &guard), -EACCES);
        ck_assert_int_eq(g.calls, 2);
}
END_TEST

START_TEST(test_guarded_parent_checks_the_parent_itself)
{
        guard_state g = {.closed = ino_of(tp("ws/sub"))};
        sh_safe_guard guard = {refuse_one, &g};
        const char *base;
        int fd;

        ck_assert_int_eq(sh_safe_open_parent_guarded(rootfd, "sub/x", &base, &guard), -EACCES);
        g.closed = 0;
        fd = sh_safe_open_parent_guarded(rootfd, "sub/x", &base, &guard);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(base, "x");
        close(fd);
}
END_TEST

START_TEST(test_guarded_lookup_keeps_links_inside_the_root)
{
        guard_state g = {0};
        sh_safe_guard guard = {refuse_one, &g};
        int fd;

        ck_assert_int_eq(symlink("../../../../..", tp("ws/up")), 0);
        fd = sh_safe_openat_guarded(rootfd, "up/f", O_RDONLY, 0, &guard);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(read_fd(fd), "INSIDE");
        close(fd);
        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, "up/outside/secret", O_RDONLY, 0, &guard),
                         -ENOENT);
}
END_TEST

static void add_tests(TCase *tc)
{
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_open_regular_file_inside_root);
        tcase_add_test(tc, test_empty_path_opens_root_itself);
        tcase_add_test(tc, test_every_returned_fd_is_cloexec);
        tcase_add_test(tc, test_absolute_link_resolves_from_root);
        tcase_add_test(tc, test_absolute_link_to_host_path_stays_inside);
        tcase_add_test(tc, test_dotdot_link_cannot_climb_above_root);
        tcase_add_test(tc, test_dir_link_to_parent_of_root_is_root);
        tcase_add_test(tc, test_relative_link_resolves_from_its_directory);
        tcase_add_test(tc, test_link_loop_is_eloop);
        tcase_add_test(tc, test_chain_of_40_links_resolves_41_is_eloop);
        tcase_add_test(tc, test_opath_nofollow_opens_the_link_itself);
        tcase_add_test(tc, test_nofollow_read_of_link_is_eloop);
        tcase_add_test(tc, test_nofollow_directory_open_of_link_fails);
        tcase_add_test(tc, test_intermediate_links_followed_with_nofollow);
        tcase_add_test(tc, test_file_as_intermediate_component_is_enotdir);
        tcase_add_test(tc, test_missing_component_is_enoent);
        tcase_add_test(tc, test_overlong_component_is_enametoolong);
        tcase_add_test(tc, test_creat_creates_inside_root);
        tcase_add_test(tc, test_creat_through_dangling_link_stays_inside);
        tcase_add_test(tc, test_creat_excl_on_link_is_eexist);
        tcase_add_test(tc, test_trailing_slash_in_link_target_requires_directory);
        tcase_add_test(tc, test_dotdot_in_link_target_pops_one_level);
        tcase_add_test(tc, test_open_parent_returns_parent_and_base);
        tcase_add_test(tc, test_open_parent_of_root_is_einval);
        tcase_add_test(tc, test_open_parent_missing_or_not_dir);
        tcase_add_test(tc, test_open_parent_follows_links_inside_root);
        tcase_add_test(tc, test_guard_refuses_a_path_through_a_refused_directory);
        tcase_add_test(tc, test_guard_sees_the_directories_a_link_leads_through);
        tcase_add_test(tc, test_guard_sees_the_root_first);
        tcase_add_test(tc, test_guarded_parent_checks_the_parent_itself);
        tcase_add_test(tc, test_guarded_lookup_keeps_links_inside_the_root);
}

START_TEST(test_openat2_probe_is_cached_and_consistent)
{
        bool a = sh_safe_openat2_available();
        ck_assert(a == sh_safe_openat2_available());
}
END_TEST

static Suite *safe_open_suite(void)
{
        Suite *s = suite_create("safe_open");
        TCase *tc = tcase_create("openat2");
        TCase *fb = tcase_create("fallback");
        TCase *pr = tcase_create("probe");

        tcase_add_unchecked_fixture(tc, base_setup, base_teardown);
        tcase_add_checked_fixture(tc, setup, teardown);
        add_tests(tc);
        suite_add_tcase(s, tc);

        tcase_add_unchecked_fixture(fb, base_setup, base_teardown);
        tcase_add_checked_fixture(fb, setup_fallback, teardown);
        add_tests(fb);
        suite_add_tcase(s, fb);

        tcase_add_test(pr, test_openat2_probe_is_cached_and_consistent);
        suite_add_tcase(s, pr);
        return s;
}

int main(void)
{
        return ut_run(safe_open_suite());
}
