/* test_safe_open.c: path resolution confined to a root fd, with openat2 and with the fallback
 * walker (every test runs in both modes): links, "..", loops, O_NOFOLLOW, O_CREAT. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
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
        sh_safe_guard guard = {refuse_one, &g, NULL};

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
        sh_safe_guard guard = {refuse_one, &g, NULL};

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
        sh_safe_guard guard = {refuse_one, &g, NULL};
        const char *base;

        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, "f", O_RDONLY, 0, &guard), -EACCES);
        ck_assert_int_eq(sh_safe_open_parent_guarded(rootfd, "f", &base, &guard), -EACCES);
        ck_assert_int_eq(g.calls, 2);
}
END_TEST

START_TEST(test_guarded_parent_checks_the_parent_itself)
{
        guard_state g = {.closed = ino_of(tp("ws/sub"))};
        sh_safe_guard guard = {refuse_one, &g, NULL};
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
        sh_safe_guard guard = {refuse_one, &g, NULL};
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

/* ---- the steps of a lookup: one bound per lookup, a budget per caller ------------------- */

/* A link `name` in the root whose target is `dots` "./" components and then `tail`: it
 * costs 1 + dots + the components of `tail` to follow, for little text and no directory. */
static void dots_link(const char *name, int dots, const char *tail)
{
        char target[PATH_MAX];
        size_t n = 0;

        for (int i = 0; i < dots; i++) {
                target[n++] = '.';
                target[n++] = '/';
        }
        ck_assert_uint_lt(n + strlen(tail), sizeof(target));
        strcpy(target + n, tail);
        ck_assert_int_eq(symlinkat(target, rootfd, name), 0);
}

/* a -> 2047 components -> b -> 2048 components -> f: a lookup of "a" costs exactly
 * 1 + 2047 + 2048 = SH_SAFE_LOOKUP_STEPS */
static void plant_a_lookup_of_exactly_the_bound(void)
{
        dots_link("a", 2046, "b");
        dots_link("b", 2047, "f");
}

START_TEST(test_a_lookup_of_exactly_the_steps_bound_resolves_one_more_is_e2big)
{
        sh_safe_budget b = {.left = UINT64_MAX};
        sh_safe_guard only_budget = {NULL, NULL, &b};
        int fd;

        plant_a_lookup_of_exactly_the_bound();
        fd = sh_safe_openat(rootfd, "a", O_RDONLY, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(read_fd(fd), "INSIDE");
        close(fd);
        ck_assert_int_eq(sh_safe_openat(rootfd, "./a", O_RDONLY, 0), -E2BIG);
        ck_assert_int_eq(sh_safe_openat(rootfd, "sub/../a", O_RDONLY, 0), -E2BIG);
        /* the same with a budget, which is charged exactly the steps taken up */
        fd = sh_safe_openat_guarded(rootfd, "a", O_RDONLY, 0, &only_budget);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_uint_eq(UINT64_MAX - b.left, SH_SAFE_LOOKUP_STEPS);
        ck_assert(!b.exhausted); /* the lookup's own bound, not the budget */
        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, "./a", O_RDONLY, 0, &only_budget), -E2BIG);
        ck_assert(!b.exhausted);
}
END_TEST

START_TEST(test_a_path_costs_its_components_and_each_link_its_targets_in_both_resolvers)
{
        sh_safe_budget b = {.left = 1000};
        sh_safe_guard only_budget = {NULL, NULL, &b};
        const char *base;
        int fd;

        ut_write_file(tp("ws/sub/g"), "G");
        fd = sh_safe_openat_guarded(rootfd, "sub/g", O_RDONLY, 0, &only_budget);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_uint_eq(b.left, 998);
        /* a failed lookup costs what it was asked, whichever resolver gave up where */
        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, "nope/x/y", O_RDONLY, 0, &only_budget),
                         -ENOENT);
        ck_assert_uint_eq(b.left, 995);
        /* a link costs its target's components: "l" + "/sub/./g" */
        ck_assert_int_eq(symlink("/sub/./g", tp("ws/l")), 0);
        fd = sh_safe_openat_guarded(rootfd, "l", O_RDONLY, 0, &only_budget);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(read_fd(fd), "G");
        close(fd);
        ck_assert_uint_eq(b.left, 991);
        /* a final link not followed costs nothing more */
        fd = sh_safe_openat_guarded(rootfd, "l", O_PATH | O_NOFOLLOW, 0, &only_budget);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_uint_eq(b.left, 990);
        /* the parent of a path: the parent's components */
        fd = sh_safe_open_parent_guarded(rootfd, "sub/new", &base, &only_budget);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_uint_eq(b.left, 989);
        ck_assert(!b.exhausted);
}
END_TEST

START_TEST(test_a_budget_bounds_the_lookups_drawing_from_it_together)
{
        guard_state g = {0};
        sh_safe_budget b = {.left = SH_SAFE_LOOKUP_STEPS + 1};
        sh_safe_guard only_budget = {NULL, NULL, &b};
        sh_safe_guard guarded = {refuse_one, &g, &b};
        int fd;

        plant_a_lookup_of_exactly_the_bound();
        fd = sh_safe_openat_guarded(rootfd, "a", O_RDONLY, 0, &only_budget);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_uint_eq(b.left, 1);
        fd = sh_safe_openat_guarded(rootfd, "f", O_RDONLY, 0, &guarded);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert(!b.exhausted);
        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, "f", O_RDONLY, 0, &only_budget), -E2BIG);
        ck_assert(b.exhausted);
        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, "f", O_RDONLY, 0, &guarded), -E2BIG);
}
END_TEST

/* The attack of issue 20: a chain of 40 absolute links, each through a deep directory path,
 * so that a lookup re-walks the deep path 40 times (~80,000 components). */
static void plant_deep_chain(int depth, int links)
{
        char *dir = malloc((size_t)depth * 2 + 2), target[PATH_MAX], name[16];
        int fd = dup(rootfd);

        ck_assert_ptr_nonnull(dir);
        dir[0] = '\0';
        for (int i = 0; i < depth; i++) {
                int next;

                strcat(dir, "/d");
                ck_assert_int_eq(mkdirat(fd, "d", 0755), 0);
                next = openat(fd, "d", O_PATH | O_DIRECTORY | O_CLOEXEC);
                ck_assert_int_ge(next, 0);
                close(fd);
                fd = next;
        }
        for (int i = 0; i < links; i++) {
                snprintf(name, sizeof(name), "l%d", i);
                if (i + 1 < links)
                        snprintf(target, sizeof(target), "%s/l%d", dir, i + 1);
                else
                        snprintf(target, sizeof(target), "%s", dir);
                ck_assert_int_eq(symlinkat(target, i == 0 ? rootfd : fd, name), 0);
        }
        close(fd);
        free(dir);
}

START_TEST(test_forty_links_through_a_deep_path_are_refused_within_the_bound)
{
        guard_state g = {0};
        sh_safe_guard guard = {refuse_one, &g, NULL};
        char path[2 * 2000 + 16] = "d";

        plant_deep_chain(2000, 40);
        ck_assert_int_eq(sh_safe_openat(rootfd, "l0/x", O_PATH, 0), -E2BIG);
        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, "l0/x", O_PATH, 0, &guard), -E2BIG);
        /* every directory the walk entered was shown to the guard: the work was bounded */
        ck_assert_int_le(g.calls, SH_SAFE_LOOKUP_STEPS);
        ck_assert_int_ge(g.calls, 2000);
        /* the deep path and the last link of the chain (4,003 steps) are within the bound */
        for (int i = 1; i < 2000; i++)
                strcat(path, "/d");
        strcat(path, "/l39/x");
        ck_assert_int_eq(sh_safe_openat_guarded(rootfd, path, O_PATH, 0, &guard), -ENOENT);
}
END_TEST

START_TEST(test_a_path_of_path_max_bytes_is_enametoolong)
{
        char path[PATH_MAX + 1];
        int fd;

        memset(path, '/', PATH_MAX - 1);
        strcpy(path + PATH_MAX - 1, "f"); /* PATH_MAX bytes */
        ck_assert_int_eq(sh_safe_openat(rootfd, path, O_RDONLY, 0), -ENAMETOOLONG);
        fd = sh_safe_openat(rootfd, path + 1, O_RDONLY, 0); /* one less */
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(read_fd(fd), "INSIDE");
        close(fd);
}
END_TEST

/* ---- mkdir -p in one walk ----------------------------------------------------------------- */

static const sh_safe_mkdir daemon_ids = {.mode = 0777,
                                         .uid = (uid_t)-1,
                                         .gid = (gid_t)-1,
                                         .parents_mode = 0751,
                                         .parents_uid = (uid_t)-1,
                                         .parents_gid = (gid_t)-1};

static mode_t mode_of(const char *path)
{
        struct stat st;
        ck_assert_int_eq(lstat(path, &st), 0);
        return st.st_mode;
}

static bool exists(const char *path)
{
        struct stat st;
        return lstat(path, &st) == 0;
}

START_TEST(test_mkdir_p_makes_each_missing_level_with_its_mode_and_returns_the_last)
{
        struct stat a, b;
        int fd = sh_safe_mkdir_p(rootfd, "sub/a/b/c", &daemon_ids, NULL);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstat(fd, &a), 0);
        ck_assert_int_eq(stat(tp("ws/sub/a/b/c"), &b), 0);
        ck_assert(a.st_ino == b.st_ino && S_ISDIR(a.st_mode));
        close(fd);
        /* exactly the modes asked, whatever the umask */
        ck_assert_uint_eq(mode_of(tp("ws/sub/a")) & 07777, 0751);
        ck_assert_uint_eq(mode_of(tp("ws/sub/a/b")) & 07777, 0751);
        ck_assert_uint_eq(mode_of(tp("ws/sub/a/b/c")) & 07777, 0777);
        ck_assert_uint_eq(mode_of(tp("ws/sub")) & 07777, 0755); /* there already: kept */
        /* all there: nothing changes, the same directory */
        fd = sh_safe_mkdir_p(rootfd, "sub/a/b/c", &daemon_ids, NULL);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstat(fd, &a), 0);
        ck_assert(a.st_ino == b.st_ino);
        close(fd);
        fd = sh_safe_mkdir_p(rootfd, "", &daemon_ids, NULL);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstat(fd, &a), 0);
        ck_assert_int_eq(fstat(rootfd, &b), 0);
        ck_assert(a.st_ino == b.st_ino);
        close(fd);
}
END_TEST

START_TEST(test_mkdir_p_walks_the_path_once_never_again_from_the_root)
{
        guard_state g = {0};
        sh_safe_budget b = {.left = UINT64_MAX};
        sh_safe_guard guard = {refuse_one, &g, &b};
        char path[2 * 300 + 8] = "sub";
        int fd;

        for (int i = 0; i < 300; i++)
                strcat(path, "/n");
        fd = sh_safe_mkdir_p(rootfd, path, &daemon_ids, &guard);
        ck_assert_int_ge(fd, 0);
        close(fd);
        /* the root and each level entered once (the last is the result, not entered):
         * resolving every prefix from the root again would show the guard ~45,000 */
        ck_assert_int_eq(g.calls, 1 + 300);
        ck_assert_uint_eq(UINT64_MAX - b.left, 301);
}
END_TEST

START_TEST(test_mkdir_p_follows_links_inside_the_root)
{
        int fd;

        ck_assert_int_eq(symlink("/sub", tp("ws/ls")), 0);
        ck_assert_int_eq(symlink("../../../..", tp("ws/sub/up")), 0);
        fd = sh_safe_mkdir_p(rootfd, "ls/new", &daemon_ids, NULL);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert(S_ISDIR(mode_of(tp("ws/sub/new"))));
        fd = sh_safe_mkdir_p(rootfd, "ls/up/top", &daemon_ids, NULL);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert(S_ISDIR(mode_of(tp("ws/top")))); /* ".." stopped at the root */
        ck_assert_uint_eq(mode_of(tp("ws/top")) & 07777, 0777);
        ck_assert(S_ISLNK(mode_of(tp("ws/ls"))));
}
END_TEST

START_TEST(test_mkdir_p_never_makes_a_level_through_a_dangling_link)
{
        /* on the host this names `outside`; inside the root it names nothing */
        ck_assert_int_eq(symlink(tp("outside/made"), tp("ws/host")), 0);
        ck_assert_int_eq(symlink("/made", tp("ws/dl")), 0);
        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "dl", &daemon_ids, NULL), -EEXIST);
        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "dl/x", &daemon_ids, NULL), -ENOTDIR);
        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "host/x", &daemon_ids, NULL), -ENOTDIR);
        ck_assert(!exists(tp("ws/made")));
        ck_assert(!exists(tp("outside/made")));
}
END_TEST

START_TEST(test_mkdir_p_with_a_non_directory_in_the_way)
{
        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "f", &daemon_ids, NULL), -EEXIST);
        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "f/x/y", &daemon_ids, NULL), -ENOTDIR);
        ck_assert_int_eq(symlink("/f", tp("ws/lf")), 0);
        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "lf", &daemon_ids, NULL), -EEXIST);
        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "lf/x", &daemon_ids, NULL), -ENOTDIR);
        ck_assert(!exists(tp("ws/f/x")));
}
END_TEST

START_TEST(test_mkdir_p_refused_by_the_guard_at_a_level_makes_nothing_below_it)
{
        guard_state g = {.closed = ino_of(tp("ws/sub"))};
        sh_safe_guard guard = {refuse_one, &g, NULL};

        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "sub/a/b", &daemon_ids, &guard), -EACCES);
        ck_assert(!exists(tp("ws/sub/a")));
        ck_assert_int_eq(symlink("/sub", tp("ws/ls")), 0);
        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "ls/a", &daemon_ids, &guard), -EACCES);
        ck_assert(!exists(tp("ws/sub/a")));
        /* the last level is the result, not entered: not checked (as a lookup's) */
        int fd = sh_safe_mkdir_p(rootfd, "sub", &daemon_ids, &guard);
        ck_assert_int_ge(fd, 0);
        close(fd);
}
END_TEST

/* may_create: refuses to make anything in the directory of inode `closed`, and plants what
 * `plant` says in the one of inode `swap_in` (once), as a racing sandbox process would. */
typedef struct creator {
        ino_t closed, swap_in;
        char plant_at[1024], plant_target[1024]; /* a link planted at plant_at (host path) */
        char move_from[1024], move_to[1024];     /* after this directory is renamed away */
        int calls;
} creator;

static int on_create(void *data, int dirfd)
{
        creator *c = data;
        struct stat st;

        c->calls++;
        if (fstat(dirfd, &st) < 0)
                return -errno;
        if (st.st_ino == c->closed)
                return -EROFS;
        if (st.st_ino == c->swap_in) {
                c->swap_in = 0;
                if (*c->move_from)
                        ck_assert_int_eq(rename(c->move_from, c->move_to), 0);
                if (*c->plant_at)
                        ck_assert_int_eq(symlink(c->plant_target, c->plant_at), 0);
        }
        return 0;
}

START_TEST(test_mkdir_p_refused_by_may_create_makes_nothing_there)
{
        creator c = {.closed = ino_of(tp("ws/sub"))};
        sh_safe_mkdir how = daemon_ids;

        how.may_create = on_create;
        how.data = &c;
        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "sub/a/b", &how, NULL), -EROFS);
        ck_assert(!exists(tp("ws/sub/a")));
        ck_assert_int_eq(c.calls, 1);
        /* nothing to make: never asked */
        c.calls = 0;
        int fd = sh_safe_mkdir_p(rootfd, "sub", &how, NULL);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(c.calls, 0);
}
END_TEST

/* How to make directories with a racer that acts once, when the walk is about to make
 * something in ws/m (made here): it plants a link at `at` (a host path) to `target`. */
static sh_safe_mkdir racing_in_m(creator *c, const char *at, const char *target)
{
        sh_safe_mkdir how = daemon_ids;

        how.may_create = on_create;
        how.data = c;
        ck_assert_int_eq(mkdir(tp("ws/m"), 0755), 0);
        c->swap_in = ino_of(tp("ws/m"));
        snprintf(c->plant_at, sizeof(c->plant_at), "%s", at);
        snprintf(c->plant_target, sizeof(c->plant_target), "%s", target);
        return how;
}

START_TEST(test_mkdir_p_a_link_swapped_in_mid_way_resolves_inside_the_root)
{
        creator c = {0};
        /* just before "b" is made in m, a racer puts a link to the host's `outside` there */
        sh_safe_mkdir how = racing_in_m(&c, tp("ws/m/b"), tp("outside"));
        int fd;

        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "m/b/c", &how, NULL), -ENOTDIR);
        ck_assert(!exists(tp("outside/c")));
        ck_assert(S_ISLNK(mode_of(tp("ws/m/b"))));
        /* a link to a directory inside the root is followed there */
        ck_assert_int_eq(unlink(tp("ws/m/b")), 0);
        c.swap_in = ino_of(tp("ws/m"));
        snprintf(c.plant_target, sizeof(c.plant_target), "/sub");
        fd = sh_safe_mkdir_p(rootfd, "m/b/c", &how, NULL);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert(S_ISDIR(mode_of(tp("ws/sub/c"))));
        ck_assert(!exists(tp("outside/c")));
}
END_TEST

START_TEST(test_mkdir_p_goes_on_in_the_directory_it_entered_when_a_racer_swaps_it)
{
        creator c = {0};
        /* once the walk stands in m, m is moved away and a link to the host's `outside`
         * takes its name: the walk holds m's fd and never resolves "m" again */
        sh_safe_mkdir how = racing_in_m(&c, tp("ws/m"), tp("outside"));
        int fd;

        snprintf(c.move_from, sizeof(c.move_from), "%s", tp("ws/m"));
        snprintf(c.move_to, sizeof(c.move_to), "%s", tp("ws/moved"));
        fd = sh_safe_mkdir_p(rootfd, "m/b/c", &how, NULL);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert(S_ISDIR(mode_of(tp("ws/moved/b/c"))));
        ck_assert(!exists(tp("outside/b")));
}
END_TEST

START_TEST(test_mkdir_p_through_forty_links_of_a_deep_path_is_e2big)
{
        guard_state g = {0};
        sh_safe_guard guard = {refuse_one, &g, NULL};

        plant_deep_chain(2000, 40);
        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "l0/new/a", &daemon_ids, NULL), -E2BIG);
        ck_assert_int_eq(sh_safe_mkdir_p(rootfd, "l0/new/a", &daemon_ids, &guard), -E2BIG);
        ck_assert_int_le(g.calls, SH_SAFE_LOOKUP_STEPS);
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
        tcase_add_test(tc, test_a_lookup_of_exactly_the_steps_bound_resolves_one_more_is_e2big);
        tcase_add_test(
                tc, test_a_path_costs_its_components_and_each_link_its_targets_in_both_resolvers);
        tcase_add_test(tc, test_a_budget_bounds_the_lookups_drawing_from_it_together);
        tcase_add_test(tc, test_forty_links_through_a_deep_path_are_refused_within_the_bound);
        tcase_add_test(tc, test_a_path_of_path_max_bytes_is_enametoolong);
        tcase_add_test(tc,
                       test_mkdir_p_makes_each_missing_level_with_its_mode_and_returns_the_last);
        tcase_add_test(tc, test_mkdir_p_walks_the_path_once_never_again_from_the_root);
        tcase_add_test(tc, test_mkdir_p_follows_links_inside_the_root);
        tcase_add_test(tc, test_mkdir_p_never_makes_a_level_through_a_dangling_link);
        tcase_add_test(tc, test_mkdir_p_with_a_non_directory_in_the_way);
        tcase_add_test(tc, test_mkdir_p_refused_by_the_guard_at_a_level_makes_nothing_below_it);
        tcase_add_test(tc, test_mkdir_p_refused_by_may_create_makes_nothing_there);
        tcase_add_test(tc, test_mkdir_p_a_link_swapped_in_mid_way_resolves_inside_the_root);
        tcase_add_test(tc, test_mkdir_p_goes_on_in_the_directory_it_entered_when_a_racer_swaps_it);
        tcase_add_test(tc, test_mkdir_p_through_forty_links_of_a_deep_path_is_e2big);
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
