/* test_fsops.c: workspace operations (CONTRACT.md section 3): mkdir -p, atomic upload, read,
 * exists/size, unlink/rename/detach, remove_tree, walk order, disk usage, the trash (what a
 * replace or a delete leaves: small entries freed at once, big ones kept for a remover, nothing
 * dropped where a sandbox could swap it, the daemon's view of another mount's directory, an
 * unnamed file staged beside an entry, a directory's removal into it or in place a step at a
 * time), a policy's hooks (guard, may_change, may_read, trash), and
 * a race where a process swaps a directory for escaping links while the API works through it. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sh/fsops.h"
#include "sh/native.h"
#include "sh/safe_open.h"
#include "sh/trash.h"
#include "unit.h"

static char base_dir[256];
static char tdir[512];
static int rootfd = -1;
static sh_fs_owner own;
static bool kept; /* sh_fs_upload_commit: whether a trash holds something (none here) */

/* The native surface's policy over root (sh_fs_ctx): no guard, owner, trash (-1: none). */
#define FS(dirfd, owner, trash)                                                                    \
        (&(sh_fs_ctx){.root = (dirfd), .own = (owner), .trashfd = (trash), .loop_absent = true})

/* A path below the test dir (unit.h: rotating buffers, several per call). */
#define tp(...) ut_path(tdir, __VA_ARGS__)

static const char *read_path(const char *path)
{
        static char buf[256];
        ssize_t n;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return NULL;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n < 0)
                return NULL;
        buf[n] = '\0';
        return buf;
}

static bool lexists(const char *path)
{
        struct stat st;
        return lstat(path, &st) == 0;
}

/* Number of entries in a directory (without . and ..). */
static int count_entries(const char *path)
{
        DIR *d = opendir(path);
        struct dirent *de;
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

static void base_setup(void)
{
        if (ut_mkdtemp(base_dir, sizeof(base_dir), "fsops") < 0)
                abort();
}

static void base_teardown(void)
{
        ut_rm_rf(base_dir);
}

/* Layout: tdir/ws is the workspace root, tdir/outside a sibling the tests must never
 * touch through the API, tdir/trash the detach target. */
static void setup(void)
{
        rootfd = ut_workspace(base_dir, tdir, sizeof(tdir));
        ck_assert_int_eq(mkdir(tp("trash"), 0700), 0);
        /* a foreign owner proves the chown; without root, keep our own ids */
        own = geteuid() == 0 ? (sh_fs_owner){.uid = 12345, .gid = 23456}
                             : (sh_fs_owner){.uid = getuid(), .gid = getgid()};
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

/* Upload `content` to `path`; returns the commit's result, error released. */
static int upload(const char *path, const char *content)
{
        sh_fs_upload *u = NULL;
        sh_error *err = NULL;
        int r;

        r = sh_fs_upload_begin(rootfd, &u, &err);
        if (r < 0)
                goto out;
        r = sh_fs_upload_write(u, content, strlen(content), &err);
        if (r < 0) {
                (void)sh_fs_upload_abort(u, -1);
                goto out;
        }
        r = sh_fs_upload_commit(u, FS(rootfd, &own, -1), path, &kept, &err);
out:
        sh_error_release(&err);
        return r;
}

static int err_errno(int r, sh_error **err)
{
        int e = *err ? (*err)->errnum : 0;
        ck_assert_int_lt(r, 0);
        sh_error_release(err);
        return e;
}

/* ---- mkdir -------------------------------------------------------------------------- */

START_TEST(test_mkdir_p_creates_parents_0755_owned)
{
        sh_error *err = NULL;
        struct stat st;

        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, &own, -1), "a/b/c", &err), 0);
        ck_assert_ptr_null(err);
        for (int i = 0; i < 3; i++) {
                const char *p = i == 0 ? tp("ws/a") : i == 1 ? tp("ws/a/b") : tp("ws/a/b/c");
                ck_assert_int_eq(lstat(p, &st), 0);
                ck_assert(S_ISDIR(st.st_mode));
                ck_assert_int_eq(st.st_mode & 07777, 0755);
                ck_assert_int_eq(st.st_uid, own.uid);
                ck_assert_int_eq(st.st_gid, own.gid);
        }
}
END_TEST

START_TEST(test_mkdir_p_existing_directory_is_fine)
{
        sh_error *err = NULL;
        ck_assert_int_eq(mkdir(tp("ws/d"), 0700), 0);
        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, &own, -1), "d", &err), 0);
        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, &own, -1), "", &err), 0);
        ck_assert_ptr_null(err);
}
END_TEST

START_TEST(test_mkdir_p_existing_file_is_eexist)
{
        sh_error *err = NULL;
        ut_write_file(tp("ws/f"), "x");
        ck_assert_int_eq(err_errno(sh_fs_mkdir_p(FS(rootfd, &own, -1), "f", &err), &err), EEXIST);
}
END_TEST

START_TEST(test_mkdir_p_file_in_middle_is_enotdir)
{
        sh_error *err = NULL;
        ut_write_file(tp("ws/f"), "x");
        ck_assert_int_eq(err_errno(sh_fs_mkdir_p(FS(rootfd, &own, -1), "f/x/y", &err), &err),
                         ENOTDIR);
}
END_TEST

START_TEST(test_mkdir_p_through_escaping_link_stays_inside)
{
        sh_error *err = NULL;

        /* the link names tdir/outside on the host, ws/<tdir>/outside inside the root */
        ck_assert_int_eq(symlink(tp("outside"), tp("ws/l")), 0);
        ck_assert_int_eq(err_errno(sh_fs_mkdir_p(FS(rootfd, &own, -1), "l/newdir", &err), &err),
                         ENOTDIR); /* dangling inside the root, like mkdir -p */
        ck_assert(!lexists(tp("outside/newdir")));
        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, NULL, -1), tp("outside") + 1, &err), 0);
        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, &own, -1), "l/newdir", &err), 0);
        ck_assert(!lexists(tp("outside/newdir")));
        ck_assert(lexists(tp("ws%s/newdir", tp("outside"))));
}
END_TEST

START_TEST(test_mkdir_p_dangling_link_at_end_is_eexist)
{
        sh_error *err = NULL;
        ck_assert_int_eq(symlink("../../nowhere", tp("ws/dl")), 0);
        ck_assert_int_eq(err_errno(sh_fs_mkdir_p(FS(rootfd, &own, -1), "dl", &err), &err), EEXIST);
}
END_TEST

/* ---- upload ------------------------------------------------------------------------- */

START_TEST(test_upload_creates_file_0644_owned_with_parents)
{
        struct stat st;

        ck_assert_int_eq(upload("x/y/z.txt", "hello"), 0);
        ck_assert_str_eq(read_path(tp("ws/x/y/z.txt")), "hello");
        ck_assert_int_eq(lstat(tp("ws/x/y/z.txt"), &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0644);
        ck_assert_int_eq(st.st_uid, own.uid);
        ck_assert_int_eq(st.st_gid, own.gid);
        ck_assert_int_eq(lstat(tp("ws/x/y"), &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0755);
        ck_assert_int_eq(st.st_uid, own.uid);
        ck_assert_int_eq(count_entries(tp("ws/x/y")), 1); /* no temporary left */
}
END_TEST

START_TEST(test_upload_replaces_existing_file)
{
        ut_write_file(tp("ws/f"), "old");
        ck_assert_int_eq(upload("f", "new"), 0);
        ck_assert_str_eq(read_path(tp("ws/f")), "new");
        ck_assert_int_eq(count_entries(tp("ws")), 1);
}
END_TEST

START_TEST(test_upload_size_counts_written_bytes)
{
        sh_fs_upload *u = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(sh_fs_upload_begin(rootfd, &u, &err), 0);
        ck_assert_int_eq(sh_fs_upload_write(u, "abc", 3, &err), 0);
        ck_assert_int_eq(sh_fs_upload_write(u, "de", 2, &err), 0);
        ck_assert_uint_eq(sh_fs_upload_size(u), 5);
        (void)sh_fs_upload_abort(u, -1);
}
END_TEST

START_TEST(test_upload_invisible_until_commit_old_content_kept)
{
        sh_fs_upload *u = NULL;
        sh_error *err = NULL;

        ut_write_file(tp("ws/f"), "old");
        ck_assert_int_eq(sh_fs_upload_begin(rootfd, &u, &err), 0);
        ck_assert_int_eq(sh_fs_upload_write(u, "new", 3, &err), 0);
        ck_assert_str_eq(read_path(tp("ws/f")), "old");
        ck_assert_int_eq(count_entries(tp("ws")), 1);
        ck_assert_int_eq(sh_fs_upload_commit(u, FS(rootfd, &own, -1), "f", &kept, &err), 0);
        ck_assert_str_eq(read_path(tp("ws/f")), "new");
}
END_TEST

START_TEST(test_upload_abort_leaves_no_trace)
{
        sh_fs_upload *u = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(sh_fs_upload_begin(rootfd, &u, &err), 0);
        ck_assert_int_eq(sh_fs_upload_write(u, "data", 4, &err), 0);
        (void)sh_fs_upload_abort(u, -1);
        (void)sh_fs_upload_abort(NULL, -1);
        ck_assert_int_eq(count_entries(tp("ws")), 0);
}
END_TEST

START_TEST(test_upload_over_directory_is_eisdir_nothing_changed)
{
        sh_fs_upload *u = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ut_write_file(tp("ws/d/keep"), "k");
        ck_assert_int_eq(sh_fs_upload_begin(rootfd, &u, &err), 0);
        ck_assert_int_eq(
                err_errno(sh_fs_upload_commit(u, FS(rootfd, &own, -1), "d", &kept, &err), &err),
                EISDIR);
        ck_assert_int_eq(count_entries(tp("ws")), 1);
        ck_assert_str_eq(read_path(tp("ws/d/keep")), "k");
}
END_TEST

START_TEST(test_upload_to_root_is_eisdir)
{
        sh_fs_upload *u = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(sh_fs_upload_begin(rootfd, &u, &err), 0);
        ck_assert_int_eq(
                err_errno(sh_fs_upload_commit(u, FS(rootfd, &own, -1), "", &kept, &err), &err),
                EISDIR);
}
END_TEST

START_TEST(test_upload_replaces_link_not_its_target)
{
        struct stat st;

        ck_assert_int_eq(symlink(tp("outside/secret"), tp("ws/l")), 0);
        ck_assert_int_eq(upload("l", "PWNED"), 0);
        ck_assert_str_eq(read_path(tp("outside/secret")), "SECRET");
        ck_assert_int_eq(lstat(tp("ws/l"), &st), 0);
        ck_assert(S_ISREG(st.st_mode));
}
END_TEST

START_TEST(test_upload_through_escaping_parent_link_stays_inside)
{
        ck_assert_int_eq(symlink("../outside", tp("ws/up")), 0);
        /* dangling inside the root: the parent is not a directory */
        ck_assert_int_eq(upload("up/secret", "PWNED"), -ENOTDIR);
        ck_assert_str_eq(read_path(tp("outside/secret")), "SECRET");
        ck_assert_int_eq(mkdir(tp("ws/outside"), 0755), 0);
        ck_assert_int_eq(upload("up/secret", "PWNED"), 0);
        ck_assert_str_eq(read_path(tp("outside/secret")), "SECRET");
        ck_assert_str_eq(read_path(tp("ws/outside/secret")), "PWNED");
}
END_TEST

START_TEST(test_upload_replaces_fifo)
{
        ck_assert_int_eq(mkfifo(tp("ws/p"), 0644), 0);
        ck_assert_int_eq(upload("p", "now a file"), 0);
        ck_assert_str_eq(read_path(tp("ws/p")), "now a file");
}
END_TEST

/* ---- read and queries --------------------------------------------------------------- */

START_TEST(test_open_read_returns_content_and_size)
{
        sh_error *err = NULL;
        uint64_t size = 0;
        char buf[16] = {0};
        int fd = -1;

        ut_write_file(tp("ws/f"), "hello");
        ck_assert_int_eq(sh_fs_open_read(rootfd, "f", &fd, &size, &err), 0);
        ck_assert_uint_eq(size, 5);
        ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
        ck_assert_int_eq(read(fd, buf, sizeof(buf) - 1), 5);
        ck_assert_str_eq(buf, "hello");
        close(fd);
}
END_TEST

START_TEST(test_open_read_directory_is_eisdir)
{
        sh_error *err = NULL;
        uint64_t size;
        int fd;

        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ck_assert_int_eq(err_errno(sh_fs_open_read(rootfd, "d", &fd, &size, &err), &err), EISDIR);
        ck_assert_int_eq(err_errno(sh_fs_open_read(rootfd, "", &fd, &size, &err), &err), EISDIR);
}
END_TEST

START_TEST(test_open_read_fifo_is_400_without_blocking)
{
        sh_error *err = NULL;
        uint64_t size;
        int fd;

        /* no writer ever opens it: a plain open(O_RDONLY) would hang until the timeout */
        ck_assert_int_eq(mkfifo(tp("ws/p"), 0644), 0);
        ck_assert_int_lt(sh_fs_open_read(rootfd, "p", &fd, &size, &err), 0);
        ck_assert_ptr_nonnull(err);
        ck_assert_int_eq(sh_error_kind_of(err), SH_E_INVALID);
        ck_assert_int_eq(sh_native_status(sh_error_kind_of(err)), 400);
        ck_assert_str_eq(sh_native_type(sh_error_kind_of(err)), "BadRequest");
        sh_error_release(&err);
}
END_TEST

START_TEST(test_open_read_absent_is_enoent)
{
        sh_error *err = NULL;
        uint64_t size;
        int fd;

        ck_assert_int_eq(err_errno(sh_fs_open_read(rootfd, "nope", &fd, &size, &err), &err),
                         ENOENT);
}
END_TEST

START_TEST(test_open_read_escaping_link_is_enoent)
{
        sh_error *err = NULL;
        uint64_t size;
        int fd;

        ck_assert_int_eq(symlink(tp("outside/secret"), tp("ws/abs")), 0);
        ck_assert_int_eq(symlink("../outside/secret", tp("ws/rel")), 0);
        ck_assert_int_eq(err_errno(sh_fs_open_read(rootfd, "abs", &fd, &size, &err), &err), ENOENT);
        ck_assert_int_eq(err_errno(sh_fs_open_read(rootfd, "rel", &fd, &size, &err), &err), ENOENT);
}
END_TEST

START_TEST(test_open_read_follows_link_inside_root)
{
        sh_error *err = NULL;
        uint64_t size = 0;
        int fd = -1;

        ut_write_file(tp("ws/f"), "hello");
        ck_assert_int_eq(symlink("/f", tp("ws/l")), 0);
        ck_assert_int_eq(sh_fs_open_read(rootfd, "l", &fd, &size, &err), 0);
        ck_assert_uint_eq(size, 5);
        close(fd);
}
END_TEST

START_TEST(test_read_bounded_reads_at_most_its_bound)
{
        _cleanup_free_ char *buf = NULL, *all = NULL;
        sh_error *err = NULL;
        size_t len = 0;

        ut_write_file(tp("ws/f"), "hello world");
        ck_assert_int_eq(sh_fs_read_bounded(rootfd, "f", 5, &buf, &len, &err), 0);
        ck_assert_uint_eq(len, 5);
        ck_assert_mem_eq(buf, "hello", 5);
        ck_assert_int_eq(sh_fs_read_bounded(rootfd, "f", 64, &all, &len, &err), 0);
        ck_assert_uint_eq(len, 11);
        ck_assert_mem_eq(all, "hello world", 11);
}
END_TEST

START_TEST(test_read_bounded_refuses_a_fifo_without_blocking_and_an_absent_file)
{
        char *buf = NULL;
        sh_error *err = NULL;
        size_t len;

        ck_assert_int_eq(mkfifo(tp("ws/p"), 0644), 0);
        ck_assert_int_lt(sh_fs_read_bounded(rootfd, "p", 64, &buf, &len, &err), 0);
        ck_assert_int_eq(sh_error_kind_of(err), SH_E_INVALID);
        sh_error_release(&err);
        ck_assert_int_eq(err_errno(sh_fs_read_bounded(rootfd, "nope", 64, &buf, &len, &err), &err),
                         ENOENT);
        ck_assert_ptr_null(buf);
}
END_TEST

START_TEST(test_read_bounded_refuses_a_kernel_filesystems_file)
{
        _cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        char *buf = NULL;
        sh_error *err = NULL;
        size_t len;

        ck_assert_int_ge(root, 0);
        ck_assert_int_eq(
                err_errno(sh_fs_read_bounded(root, "proc/self/status", 64, &buf, &len, &err), &err),
                EACCES);
        ck_assert_ptr_null(buf);
}
END_TEST

START_TEST(test_exists_for_file_dir_fifo_and_root)
{
        sh_error *err = NULL;
        bool e = false;

        ut_write_file(tp("ws/f"), "x");
        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ck_assert_int_eq(mkfifo(tp("ws/p"), 0644), 0);
        ck_assert_int_eq(sh_fs_exists(rootfd, "f", &e, &err), 0);
        ck_assert(e);
        e = false;
        ck_assert_int_eq(sh_fs_exists(rootfd, "d", &e, &err), 0);
        ck_assert(e);
        e = false;
        ck_assert_int_eq(sh_fs_exists(rootfd, "p", &e, &err), 0);
        ck_assert(e);
        e = false;
        ck_assert_int_eq(sh_fs_exists(rootfd, "", &e, &err), 0);
        ck_assert(e);
}
END_TEST

START_TEST(test_exists_false_for_absent_dangling_and_escaping)
{
        sh_error *err = NULL;
        bool e = true;

        ut_write_file(tp("ws/f"), "x");
        ck_assert_int_eq(symlink("nowhere", tp("ws/dl")), 0);
        ck_assert_int_eq(symlink(tp("outside/secret"), tp("ws/esc")), 0);
        ck_assert_int_eq(sh_fs_exists(rootfd, "nope", &e, &err), 0);
        ck_assert(!e);
        e = true;
        ck_assert_int_eq(sh_fs_exists(rootfd, "dl", &e, &err), 0);
        ck_assert(!e);
        e = true;
        ck_assert_int_eq(sh_fs_exists(rootfd, "esc", &e, &err), 0);
        ck_assert(!e);
        e = true;
        ck_assert_int_eq(sh_fs_exists(rootfd, "f/x", &e, &err), 0);
        ck_assert(!e);
}
END_TEST

START_TEST(test_size_of_regular_file_else_minus_one)
{
        sh_error *err = NULL;
        int64_t sz = 0;

        ut_write_file(tp("ws/f"), "12345");
        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ck_assert_int_eq(mkfifo(tp("ws/p"), 0644), 0);
        ck_assert_int_eq(sh_fs_size(rootfd, "f", &sz, &err), 0);
        ck_assert_int_eq(sz, 5);
        ck_assert_int_eq(sh_fs_size(rootfd, "d", &sz, &err), 0);
        ck_assert_int_eq(sz, -1);
        ck_assert_int_eq(sh_fs_size(rootfd, "p", &sz, &err), 0);
        ck_assert_int_eq(sz, -1);
        ck_assert_int_eq(sh_fs_size(rootfd, "nope", &sz, &err), 0);
        ck_assert_int_eq(sz, -1);
}
END_TEST

/* ---- unlink, rename, detach --------------------------------------------------------- */

START_TEST(test_unlink_removes_link_not_target)
{
        sh_error *err = NULL;

        ut_write_file(tp("ws/f"), "x");
        ck_assert_int_eq(symlink("/f", tp("ws/l")), 0);
        ck_assert_int_eq(sh_fs_unlink_file(FS(rootfd, NULL, -1), "l", &err), 0);
        ck_assert(!lexists(tp("ws/l")));
        ck_assert(lexists(tp("ws/f")));
        ck_assert_int_eq(sh_fs_unlink_file(FS(rootfd, NULL, -1), "f", &err), 0);
        ck_assert(!lexists(tp("ws/f")));
}
END_TEST

START_TEST(test_unlink_directory_is_eisdir_absent_is_enoent)
{
        sh_error *err = NULL;

        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ck_assert_int_eq(err_errno(sh_fs_unlink_file(FS(rootfd, NULL, -1), "d", &err), &err),
                         EISDIR);
        ck_assert_int_eq(err_errno(sh_fs_unlink_file(FS(rootfd, NULL, -1), "", &err), &err),
                         EISDIR);
        ck_assert_int_eq(err_errno(sh_fs_unlink_file(FS(rootfd, NULL, -1), "nope", &err), &err),
                         ENOENT);
        ck_assert_int_eq(err_errno(sh_fs_unlink_file(FS(rootfd, NULL, -1), "nope/x", &err), &err),
                         ENOENT);
        ck_assert(lexists(tp("ws/d")));
}
END_TEST

START_TEST(test_unlink_through_escaping_link_touches_nothing_outside)
{
        sh_error *err = NULL;

        ck_assert_int_eq(symlink("../outside", tp("ws/up")), 0);
        ck_assert_int_eq(
                err_errno(sh_fs_unlink_file(FS(rootfd, NULL, -1), "up/secret", &err), &err),
                ENOENT);
        ck_assert(lexists(tp("outside/secret")));
}
END_TEST

START_TEST(test_rename_moves_and_creates_dst_parents)
{
        sh_error *err = NULL;
        struct stat st;

        ut_write_file(tp("ws/f"), "x");
        ck_assert_int_eq(sh_fs_rename(FS(rootfd, &own, -1), "f", "n/m/g", 0, NULL, &err), 0);
        ck_assert(!lexists(tp("ws/f")));
        ck_assert_str_eq(read_path(tp("ws/n/m/g")), "x");
        ck_assert_int_eq(lstat(tp("ws/n/m"), &st), 0);
        ck_assert_int_eq(st.st_uid, own.uid);
}
END_TEST

START_TEST(test_rename_replaces_existing_dst_file)
{
        sh_error *err = NULL;

        ut_write_file(tp("ws/a"), "A");
        ut_write_file(tp("ws/b"), "B");
        ck_assert_int_eq(sh_fs_rename(FS(rootfd, &own, -1), "a", "b", 0, NULL, &err), 0);
        ck_assert_str_eq(read_path(tp("ws/b")), "A");
        ck_assert_int_eq(count_entries(tp("ws")), 1);
}
END_TEST

START_TEST(test_rename_absent_src_is_enoent_and_creates_nothing)
{
        sh_error *err = NULL;

        ck_assert_int_eq(
                err_errno(sh_fs_rename(FS(rootfd, &own, -1), "nope", "x/y", 0, NULL, &err), &err),
                ENOENT);
        ck_assert_int_eq(count_entries(tp("ws")), 0);
}
END_TEST

START_TEST(test_rename_root_is_einval)
{
        sh_error *err = NULL;

        ut_write_file(tp("ws/f"), "x");
        ck_assert_int_eq(
                err_errno(sh_fs_rename(FS(rootfd, &own, -1), "", "x", 0, NULL, &err), &err),
                EINVAL);
        ck_assert_int_eq(
                err_errno(sh_fs_rename(FS(rootfd, &own, -1), "f", "", 0, NULL, &err), &err),
                EINVAL);
}
END_TEST

START_TEST(test_detach_dir_moves_it_to_trash)
{
        sh_error *err = NULL;
        int trashfd = open(tp("trash"), O_PATH | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(trashfd, 0);
        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ut_write_file(tp("ws/d/f"), "x");
        ck_assert_int_eq(sh_fs_detach_dir(FS(rootfd, NULL, trashfd), "d", "t1", &err), 0);
        ck_assert(!lexists(tp("ws/d")));
        ck_assert_str_eq(read_path(tp("trash/t1/f")), "x");
        close(trashfd);
}
END_TEST

START_TEST(test_detach_dir_link_or_file_is_enotdir)
{
        sh_error *err = NULL;
        int trashfd = open(tp("trash"), O_PATH | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(trashfd, 0);
        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ck_assert_int_eq(symlink("d", tp("ws/l")), 0);
        ut_write_file(tp("ws/f"), "x");
        ck_assert_int_eq(
                err_errno(sh_fs_detach_dir(FS(rootfd, NULL, trashfd), "l", "t", &err), &err),
                ENOTDIR);
        ck_assert_int_eq(
                err_errno(sh_fs_detach_dir(FS(rootfd, NULL, trashfd), "f", "t", &err), &err),
                ENOTDIR);
        ck_assert(lexists(tp("ws/l")) && lexists(tp("ws/d")));
        close(trashfd);
}
END_TEST

START_TEST(test_detach_dir_absent_enoent_root_einval)
{
        sh_error *err = NULL;
        int trashfd = open(tp("trash"), O_PATH | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(trashfd, 0);
        ck_assert_int_eq(
                err_errno(sh_fs_detach_dir(FS(rootfd, NULL, trashfd), "nope", "t", &err), &err),
                ENOENT);
        ck_assert_int_eq(
                err_errno(sh_fs_detach_dir(FS(rootfd, NULL, trashfd), "", "t", &err), &err),
                EINVAL);
        close(trashfd);
}
END_TEST

/* ---- remove_tree -------------------------------------------------------------------- */

START_TEST(test_remove_tree_removes_nested_tree)
{
        sh_error *err = NULL;
        int dfd = open(tp("ws"), O_PATH | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, NULL, -1), "t/a/b/c", &err), 0);
        ut_write_file(tp("ws/t/a/f"), "x");
        ut_write_file(tp("ws/t/a/b/c/g"), "y");
        ck_assert_int_eq(mkfifo(tp("ws/t/p"), 0644), 0);
        ck_assert_int_eq(sh_fs_remove_tree(dfd, "t", &err), 0);
        ck_assert_ptr_null(err);
        ck_assert(!lexists(tp("ws/t")));
        close(dfd);
}
END_TEST

START_TEST(test_remove_tree_never_follows_links)
{
        sh_error *err = NULL;
        int dfd = open(tp("ws"), O_PATH | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_eq(mkdir(tp("ws/t"), 0755), 0);
        ck_assert_int_eq(symlink(tp("outside"), tp("ws/t/dirlink")), 0);
        ck_assert_int_eq(symlink(tp("outside/secret"), tp("ws/t/filelink")), 0);
        ck_assert_int_eq(symlink(tp("outside"), tp("ws/top")), 0);
        ck_assert_int_eq(sh_fs_remove_tree(dfd, "t", &err), 0);
        ck_assert_int_eq(sh_fs_remove_tree(dfd, "top", &err), 0);
        ck_assert(!lexists(tp("ws/t")) && !lexists(tp("ws/top")));
        ck_assert_str_eq(read_path(tp("outside/secret")), "SECRET");
        close(dfd);
}
END_TEST

START_TEST(test_remove_tree_absent_is_success)
{
        sh_error *err = NULL;
        int dfd = open(tp("ws"), O_PATH | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_eq(sh_fs_remove_tree(dfd, "nope", &err), 0);
        ck_assert_ptr_null(err);
        close(dfd);
}
END_TEST

START_TEST(test_remove_tree_deeper_than_open_limit)
{
        sh_error *err = NULL;
        int dfd = open(tp("ws"), O_PATH | O_DIRECTORY | O_CLOEXEC);
        int cur = open(tp("ws"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        /* 300 levels, built relative to fds (the full path exceeds what paths allow) */
        for (int i = 0; i < 300; i++) {
                int next;
                ck_assert_int_eq(mkdirat(cur, i == 0 ? "deep" : "dddddddddddddddd", 0755), 0);
                next = openat(cur, i == 0 ? "deep" : "dddddddddddddddd",
                              O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ck_assert_int_ge(next, 0);
                close(cur);
                cur = next;
                if (i % 50 == 0) {
                        int f = openat(cur, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                        ck_assert_int_ge(f, 0);
                        close(f);
                }
        }
        close(cur);
        ck_assert_int_eq(sh_fs_remove_tree(dfd, "deep", &err), 0);
        ck_assert_ptr_null(err);
        ck_assert_int_eq(count_entries(tp("ws")), 0);
        close(dfd);
}
END_TEST

/* ---- walk and disk usage ------------------------------------------------------------ */

/* The next file of the walk, over the bounded steps that found none (SH_FS_WALK_AGAIN). */
static int walk_next(sh_fs_walker *w, sh_fs_entry *e, sh_error **err)
{
        int r;

        while ((r = sh_fs_walk_next(w, e, err)) == SH_FS_WALK_AGAIN)
                ;
        return r;
}

static int walk_all(const char *root, char out[][64], int max)
{
        sh_fs_walker *w = NULL;
        sh_error *err = NULL;
        sh_fs_entry e;
        int n = 0, r;

        ck_assert_int_eq(sh_fs_walk_open(rootfd, root, &w, &err), 0);
        while ((r = walk_next(w, &e, &err)) == 1) {
                ck_assert_int_lt(n, max);
                snprintf(out[n++], 64, "%s", e.path);
        }
        ck_assert_int_eq(r, 0);
        sh_fs_walk_free(w);
        return n;
}

START_TEST(test_walk_yields_bytewise_sorted_full_paths)
{
        /* '-' (0x2d) < '/' (0x2f) < '0' (0x30): "a-c" and "a.d" sort before the files below
         * directory "a", and "a0" after them; 'A' < 'a' bytewise */
        static const char *const want[] = {"A", "a-c", "a.d", "a/b-x", "a/b/c", "a/b0", "a0", "z"};
        char got[16][64];
        int n;

        ck_assert_int_eq(mkdir(tp("ws/a"), 0755), 0);
        ck_assert_int_eq(mkdir(tp("ws/a/b"), 0755), 0);
        ut_write_file(tp("ws/z"), "");
        ut_write_file(tp("ws/a0"), "");
        ut_write_file(tp("ws/a-c"), "");
        ut_write_file(tp("ws/a.d"), "");
        ut_write_file(tp("ws/A"), "");
        ut_write_file(tp("ws/a/b/c"), "");
        ut_write_file(tp("ws/a/b-x"), "");
        ut_write_file(tp("ws/a/b0"), "");
        n = walk_all("", got, 16);
        ck_assert_int_eq(n, (int)(sizeof(want) / sizeof(want[0])));
        for (int i = 0; i < n; i++)
                ck_assert_str_eq(got[i], want[i]);
}
END_TEST

START_TEST(test_walk_skips_links_fifos_and_empty_dirs)
{
        char got[16][64];

        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ck_assert_int_eq(mkdir(tp("ws/empty"), 0755), 0);
        ut_write_file(tp("ws/d/f"), "x");
        ck_assert_int_eq(symlink("d", tp("ws/dirlink")), 0);
        ck_assert_int_eq(symlink("d/f", tp("ws/filelink")), 0);
        ck_assert_int_eq(symlink(tp("outside"), tp("ws/outlink")), 0);
        ck_assert_int_eq(mkfifo(tp("ws/p"), 0644), 0);
        ck_assert_int_eq(walk_all("", got, 16), 1);
        ck_assert_str_eq(got[0], "d/f");
}
END_TEST

START_TEST(test_walk_subdir_root_gives_paths_from_workspace_root)
{
        char got[16][64];

        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, NULL, -1), "x/y", &(sh_error *){NULL}), 0);
        ut_write_file(tp("ws/x/y/f"), "x");
        ut_write_file(tp("ws/top"), "x");
        ck_assert_int_eq(walk_all("x", got, 16), 1);
        ck_assert_str_eq(got[0], "x/y/f");
}
END_TEST

START_TEST(test_walk_absent_file_or_link_root_yields_nothing)
{
        char got[4][64];

        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ut_write_file(tp("ws/d/f"), "x");
        ut_write_file(tp("ws/file"), "x");
        ck_assert_int_eq(symlink("d", tp("ws/dl")), 0);
        ck_assert_int_eq(walk_all("nope", got, 4), 0);
        ck_assert_int_eq(walk_all("file", got, 4), 0);
        ck_assert_int_eq(walk_all("dl", got, 4), 0);
}
END_TEST

START_TEST(test_walk_empty_root_yields_nothing)
{
        char got[4][64];
        ck_assert_int_eq(walk_all("", got, 4), 0);
}
END_TEST

START_TEST(test_walk_reports_size_and_mtime_ns)
{
        sh_fs_walker *w = NULL;
        sh_error *err = NULL;
        struct timespec ts[2] = {{.tv_sec = 1700000000, .tv_nsec = 123456789},
                                 {.tv_sec = 1700000000, .tv_nsec = 123456789}};
        sh_fs_entry e;

        ut_write_file(tp("ws/f"), "12345");
        ck_assert_int_eq(utimensat(AT_FDCWD, tp("ws/f"), ts, 0), 0);
        ck_assert_int_eq(sh_fs_walk_open(rootfd, "", &w, &err), 0);
        ck_assert_int_eq(walk_next(w, &e, &err), 1);
        ck_assert_str_eq(e.path, "f");
        ck_assert_uint_eq(e.size, 5);
        ck_assert_int_eq(e.mtime_ns, 1700000000123456789LL);
        ck_assert_uint_eq(e.nlink, 1);
        ck_assert_int_eq(walk_next(w, &e, &err), 0);
        sh_fs_walk_free(w);
}
END_TEST

START_TEST(test_walk_skips_entries_removed_mid_walk)
{
        sh_fs_walker *w = NULL;
        sh_error *err = NULL;
        sh_fs_entry e;

        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ut_write_file(tp("ws/a"), "");
        ut_write_file(tp("ws/b"), "");
        ut_write_file(tp("ws/d/c"), "");
        ut_write_file(tp("ws/e"), "");
        ck_assert_int_eq(sh_fs_walk_open(rootfd, "", &w, &err), 0);
        ck_assert_int_eq(walk_next(w, &e, &err), 1);
        ck_assert_str_eq(e.path, "a");
        ck_assert_int_eq(unlink(tp("ws/b")), 0);
        ck_assert_int_eq(unlink(tp("ws/d/c")), 0);
        ck_assert_int_eq(rmdir(tp("ws/d")), 0);
        ck_assert_int_eq(walk_next(w, &e, &err), 1);
        ck_assert_str_eq(e.path, "e");
        ck_assert_int_eq(walk_next(w, &e, &err), 0);
        sh_fs_walk_free(w);
}
END_TEST

START_TEST(test_walk_many_files_in_order)
{
        sh_fs_walker *w = NULL;
        sh_error *err = NULL;
        char prev[64] = "";
        sh_fs_entry e;
        int n = 0, r;

        for (int d = 0; d < 10; d++) {
                ck_assert_int_eq(mkdir(tp("ws/d%d", d), 0755), 0);
                for (int f = 0; f < 30; f++)
                        ut_write_file(tp("ws/d%d/f%d", d, f), "x");
        }
        ck_assert_int_eq(sh_fs_walk_open(rootfd, "", &w, &err), 0);
        while ((r = walk_next(w, &e, &err)) == 1) {
                ck_assert_int_lt(strcmp(prev, e.path), 0);
                snprintf(prev, sizeof(prev), "%s", e.path);
                n++;
        }
        ck_assert_int_eq(r, 0);
        ck_assert_int_eq(n, 300);
        sh_fs_walk_free(w);
}
END_TEST

START_TEST(test_usage_counts_hard_linked_inode_once)
{
        sh_fs_usage *u = sh_fs_usage_new();
        sh_fs_walker *w = NULL;
        sh_error *err = NULL;
        sh_fs_entry e;
        int r;

        ck_assert_ptr_nonnull(u);
        ut_write_file(tp("ws/a"), "1234567890");
        ut_write_file(tp("ws/b"), "123");
        ck_assert_int_eq(link(tp("ws/a"), tp("ws/a2")), 0);
        ck_assert_int_eq(link(tp("ws/a"), tp("ws/a3")), 0);
        ck_assert_int_eq(sh_fs_walk_open(rootfd, "", &w, &err), 0);
        while ((r = walk_next(w, &e, &err)) == 1)
                ck_assert_int_eq(sh_fs_usage_add(u, &e), 0);
        ck_assert_int_eq(r, 0);
        ck_assert_uint_eq(sh_fs_usage_bytes(u), 13);
        sh_fs_walk_free(w);
        sh_fs_usage_free(u);
}
END_TEST

START_TEST(test_usage_set_grows_past_many_linked_inodes)
{
        sh_fs_usage *u = sh_fs_usage_new();

        for (uint64_t i = 0; i < 5000; i++) {
                sh_fs_entry e = {.path = "x", .size = 1, .dev = 1, .ino = i + 1, .nlink = 2};
                ck_assert_int_eq(sh_fs_usage_add(u, &e), 0);
                ck_assert_int_eq(sh_fs_usage_add(u, &e), 0);
        }
        ck_assert_uint_eq(sh_fs_usage_bytes(u), 5000);
        sh_fs_usage_free(u);
}
END_TEST

/* ---- walk: bounded fds and steps, identity checks when climbing back ---------------- */

/* A chain below ws/`top`: `depth` levels, each one a directory `name` in the level above,
 * made relative to fds (the full path outgrows PATH_MAX). Level k holds a file "z" of k + 1
 * bytes when `every` divides k, and the bottom level always does. */
static void make_chain(const char *top, int depth, const char *name, int every)
{
        int cur = open(tp("ws"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(cur, 0);
        for (int k = 0; k <= depth; k++) {
                const char *nm = k == 0 ? top : name;
                int next;

                ck_assert_int_eq(mkdirat(cur, nm, 0755), 0);
                next = openat(cur, nm, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ck_assert_int_ge(next, 0);
                close(cur);
                cur = next;
                if (k % every == 0 || k == depth) {
                        char data[64] = {0};
                        int f = openat(cur, "z", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

                        ck_assert_int_ge(f, 0);
                        ck_assert_int_eq(write(f, data, (size_t)(k % 64) + 1), (k % 64) + 1);
                        close(f);
                }
        }
        close(cur);
}

/* "c" followed by k times "/n": level k of a chain made by make_chain("c", ..., "n", ...) */
static const char *chain_path(int k, const char *leaf)
{
        static char buf[2][512];
        static unsigned i;
        char *b = buf[i++ % 2];
        int n = snprintf(b, sizeof(buf[0]), "c");

        for (int j = 0; j < k; j++)
                n += snprintf(b + n, sizeof(buf[0]) - (size_t)n, "/n");
        if (leaf)
                snprintf(b + n, sizeof(buf[0]) - (size_t)n, "/%s", leaf);
        return b;
}

START_TEST(test_walk_chain_deeper_than_the_fd_limit_uses_few_fds)
{
        /* 3000 levels under a limit of 64 fds: a walker holding a level per fd would die of
         * EMFILE at depth ~60; this one holds the root and SH_FS_WALK_OPEN levels. */
        struct rlimit old, low;
        sh_fs_walker *w = NULL;
        sh_error *err = NULL;
        static char prev[8192];
        int base, n = 0, r, most = 0;
        sh_fs_entry e;

        make_chain("deep", 3000, "d", 100);
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
        low = (struct rlimit){.rlim_cur = 64, .rlim_max = old.rlim_max};
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
        base = ut_count_fds();
        prev[0] = '\0';
        ck_assert_int_eq(sh_fs_walk_open(rootfd, "deep", &w, &err), 0);
        while ((r = walk_next(w, &e, &err)) == 1) {
                int fds = ut_count_fds();

                most = fds > most ? fds : most;
                /* "d/" < "z": the deepest file first, then one per 100 levels upwards */
                ck_assert_int_lt(strcmp(prev, e.path), 0);
                ck_assert_uint_lt(strlen(e.path), sizeof(prev));
                snprintf(prev, sizeof(prev), "%s", e.path);
                n++;
        }
        ck_assert_msg(r == 0, "walk failed: %s", err ? err->msg : "?");
        sh_fs_walk_free(w);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
        ck_assert_int_eq(n, 31); /* levels 0, 100, ..., 3000 */
        ck_assert_str_eq(prev, "deep/z");
        ck_assert_int_le(most - base, SH_FS_WALK_OPEN + 1);
}
END_TEST

START_TEST(test_walk_charges_empty_dirs_and_skipped_entries_to_its_steps)
{
        /* Nothing to yield for 3000 empty directories and 3000 links: the walker must still
         * come back to its caller now and then (SH_FS_WALK_AGAIN), not grind through them
         * in one call. */
        sh_fs_walker *w = NULL;
        sh_error *err = NULL;
        int again = 0, r;
        sh_fs_entry e;

        ck_assert_int_eq(mkdir(tp("ws/e"), 0755), 0);
        ck_assert_int_eq(mkdir(tp("ws/l"), 0755), 0);
        for (int i = 0; i < 3000; i++) {
                ck_assert_int_eq(mkdir(tp("ws/e/%04d", i), 0755), 0);
                ck_assert_int_eq(symlink("x", tp("ws/l/%04d", i)), 0);
        }
        ut_write_file(tp("ws/z"), "x");
        ck_assert_int_eq(sh_fs_walk_open(rootfd, "", &w, &err), 0);
        while ((r = sh_fs_walk_next(w, &e, &err)) == SH_FS_WALK_AGAIN)
                again++;
        ck_assert_int_eq(r, 1);
        ck_assert_str_eq(e.path, "z");
        ck_assert_int_eq(walk_next(w, &e, &err), 0);
        sh_fs_walk_free(w);
        /* 3000 directories cost at least 4 steps each (enter, read, end, leave) */
        ck_assert_int_ge(again, 3000 * 4 / 256);
}
END_TEST

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

START_TEST(test_walk_wide_directory_is_merged_in_bytewise_order)
{
        /* 20,000 names made in a scrambled order fill many getdents64 buffers: each one is
         * sorted on its own and the level merges them. Files "NNNNN", "NNNNN-y" and
         * directories "NNNNN" holding "x" interleave as "NNNNN-y" < "NNNNN/x" < "NNNNN0". */
        enum { N = 20000 };
        static char *want[2 * N];
        sh_fs_walker *w = NULL;
        sh_error *err = NULL;
        int nw = 0, n = 0, r;
        sh_fs_entry e;

        ck_assert_int_eq(mkdir(tp("ws/w"), 0755), 0);
        for (int k = 0; k < N; k++) {
                int i = (int)(((long)k * 7919) % N); /* 7919 is prime: a permutation */
                char rel[64];

                if (i % 7 == 0) {
                        ck_assert_int_eq(mkdir(tp("ws/w/%05d", i), 0755), 0);
                        ut_write_file(tp("ws/w/%05d/x", i), "");
                        snprintf(rel, sizeof(rel), "w/%05d/x", i);
                } else {
                        ut_write_file(tp("ws/w/%05d", i), "");
                        snprintf(rel, sizeof(rel), "w/%05d", i);
                }
                want[nw++] = strdup(rel);
                if (i % 11 == 0) {
                        ut_write_file(tp("ws/w/%05d-y", i), "");
                        snprintf(rel, sizeof(rel), "w/%05d-y", i);
                        want[nw++] = strdup(rel);
                }
        }
        qsort(want, (size_t)nw, sizeof(want[0]), cmp_str);
        ck_assert_int_eq(sh_fs_walk_open(rootfd, "", &w, &err), 0);
        while ((r = walk_next(w, &e, &err)) == 1) {
                ck_assert_int_lt(n, nw);
                ck_assert_str_eq(e.path, want[n]);
                n++;
        }
        ck_assert_int_eq(r, 0);
        ck_assert_int_eq(n, nw);
        sh_fs_walk_free(w);
        for (int i = 0; i < nw; i++)
                free(want[i]);
}
END_TEST

/* The swap tests below use a chain c/n/n/... of SWAP_DEPTH levels, level k holding "z" of
 * k + 1 bytes, walked from "c". "n/" < "z", so the first file is the deepest: then the walker
 * sits at the bottom with only the root and the last SH_FS_WALK_OPEN levels open. A sandbox
 * process then moves levels around; every "z" the walk reports afterwards must be the one
 * of its own level (its size says which), never one from a replacement or from outside. */
#define SWAP_DEPTH (4 * SH_FS_WALK_OPEN)
#define SWAP_MOVED (SWAP_DEPTH - SH_FS_WALK_OPEN - 4) /* closed when the walk is at the bottom */
#define SWAP_LEVEL (SWAP_MOVED - 5)                   /* closed as well, above it */

static sh_fs_walker *swap_walk_to_bottom(void)
{
        sh_fs_walker *w = NULL;
        sh_error *err = NULL;
        sh_fs_entry e;

        make_chain("c", SWAP_DEPTH, "n", 1);
        ck_assert_int_eq(sh_fs_walk_open(rootfd, "c", &w, &err), 0);
        ck_assert_int_eq(walk_next(w, &e, &err), 1);
        ck_assert_str_eq(e.path, chain_path(SWAP_DEPTH, "z"));
        ck_assert_uint_eq(e.size, SWAP_DEPTH % 64 + 1);
        return w;
}

/* Walk on; the levels reported must be exactly `want` (deepest first), -1 terminated. */
static void swap_expect(sh_fs_walker *w, const int *want)
{
        sh_error *err = NULL;
        sh_fs_entry e;
        int i = 0, r;

        while ((r = walk_next(w, &e, &err)) == 1) {
                ck_assert_msg(want[i] >= 0, "unexpected '%s' (%llu bytes)", e.path,
                              (unsigned long long)e.size);
                ck_assert_str_eq(e.path, chain_path(want[i], "z"));
                ck_assert_uint_eq(e.size, want[i] % 64 + 1);
                i++;
        }
        ck_assert_int_eq(r, 0);
        ck_assert_msg(want[i] < 0, "level %d missing", want[i]);
        sh_fs_walk_free(w);
}

/* A decoy "z" of 999 bytes, and a "n/z" below it, in directory `dir` (below tdir). */
static void plant_decoy(const char *dir)
{
        char big[1000];

        memset(big, 'X', 999);
        big[999] = '\0';
        ut_write_file(tp("%s/z", dir), big);
        ck_assert_int_eq(mkdir(tp("%s/n", dir), 0755), 0);
        ut_write_file(tp("%s/n/z", dir), big);
}

START_TEST(test_walk_climbing_back_checks_the_identity_of_the_parent)
{
        /* Level SWAP_MOVED (and everything below it, where the walker is) moves to ws/away:
         * ".." of it is now ws, which holds a decoy "z". The walker must notice that ws is
         * not the level it left, reopen that level by name from the root and go on there. */
        sh_fs_walker *w = swap_walk_to_bottom();
        int want[SWAP_DEPTH + 2], n = 0;

        ck_assert_int_eq(rename(tp("ws/%s", chain_path(SWAP_MOVED, NULL)), tp("ws/away")), 0);
        plant_decoy("ws");
        for (int k = SWAP_DEPTH - 1; k >= 0; k--)
                want[n++] = k;
        want[n] = -1;
        swap_expect(w, want);
}
END_TEST

/* Levels SWAP_MOVED..bottom move to ws/away, and level SWAP_LEVEL (with the levels down to
 * SWAP_MOVED - 1) to ws/old, and `replace` puts something else at the name of SWAP_LEVEL.
 * Climbing back, the walker reaches SWAP_MOVED through ".." (the very directories it
 * entered, moved), then must reopen SWAP_MOVED - 1 by name and finds the replacement at
 * SWAP_LEVEL: levels SWAP_LEVEL..SWAP_MOVED - 1 count as vanished, and the walk goes on
 * above them, never inside the replacement. */
static void swap_level_then_expect(void (*replace)(const char *at))
{
        sh_fs_walker *w = swap_walk_to_bottom();
        int want[SWAP_DEPTH + 2], n = 0;

        ck_assert_int_eq(rename(tp("ws/%s", chain_path(SWAP_MOVED, NULL)), tp("ws/away")), 0);
        ck_assert_int_eq(rename(tp("ws/%s", chain_path(SWAP_LEVEL, NULL)), tp("ws/old")), 0);
        plant_decoy("ws");
        replace(tp("ws/%s", chain_path(SWAP_LEVEL, NULL)));
        for (int k = SWAP_DEPTH - 1; k >= SWAP_MOVED; k--)
                want[n++] = k;
        for (int k = SWAP_LEVEL - 1; k >= 0; k--)
                want[n++] = k;
        want[n] = -1;
        swap_expect(w, want);
}

static void replace_with_dir(const char *at)
{
        char rel[600];

        ck_assert_int_eq(mkdir(at, 0755), 0);
        snprintf(rel, sizeof(rel), "%s", at + strlen(tdir) + 1);
        plant_decoy(rel);
}

static void replace_with_link_outside(const char *at)
{
        plant_decoy("outside");
        ck_assert_int_eq(symlink(tp("outside"), at), 0);
}

static void replace_with_link_to_the_level_itself(const char *at)
{
        /* the very directory the walk entered, now at ws/old: still a link, not followed */
        ck_assert_int_eq(symlink(tp("ws/old"), at), 0);
}

START_TEST(test_walk_never_enters_a_directory_swapped_in_for_a_closed_level)
{
        swap_level_then_expect(replace_with_dir);
}
END_TEST

START_TEST(test_walk_never_follows_a_link_swapped_in_for_a_closed_level)
{
        swap_level_then_expect(replace_with_link_outside);
}
END_TEST

START_TEST(test_walk_never_follows_a_link_even_to_the_level_itself)
{
        swap_level_then_expect(replace_with_link_to_the_level_itself);
}
END_TEST

START_TEST(test_remove_tree_of_a_chain_deeper_than_the_fd_limit)
{
        /* 3000 levels under a limit of 80 fds: the remover keeps RM_MAX_OPEN (64) at most. */
        struct rlimit old, low = {.rlim_cur = 80};
        sh_error *err = NULL;
        int dfd = open(tp("ws"), O_PATH | O_DIRECTORY | O_CLOEXEC);

        make_chain("deep", 3000, "d", 100);
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
        low.rlim_max = old.rlim_max;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
        ck_assert_int_eq(sh_fs_remove_tree(dfd, "deep", &err), 0);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
        ck_assert_ptr_null(err);
        ck_assert_int_eq(count_entries(tp("ws")), 0);
        close(dfd);
}
END_TEST

/* ---- the race ----------------------------------------------------------------------- */

/* A child swaps ws/d between a real directory and links that point out of the workspace
 * (absolute host path, "../" chains, /etc, the parent of the root) as fast as it can, while
 * the parent drives every API call through ws/d. Afterwards nothing outside the workspace
 * may have appeared, changed or vanished. */
static void race_child(void)
{
        char out[1024], deep[1100], d[1024], real[1024];
        const char *targets[] = {
                out, "../outside", "../../../../../../../../../../..", "/etc", "..", "/", deep};
        struct timespec start, now;
        unsigned i = 0;

        /* own copies: tp() hands out rotating buffers */
        snprintf(out, sizeof(out), "%s", tp("outside"));
        snprintf(deep, sizeof(deep), "../../../../../../../..%s", out);
        snprintf(d, sizeof(d), "%s", tp("ws/d"));
        snprintf(real, sizeof(real), "%s", tp("ws/d.real"));
        clock_gettime(CLOCK_MONOTONIC, &start);
        do {
                /* errors are expected whenever the parent moved or removed something */
                if (rename(d, real) == 0 || errno == ENOENT) {
                        if (symlink(targets[i % 7], d) == 0 && unlink(d) < 0)
                                _exit(1);
                }
                if (rename(real, d) < 0 && mkdir(d, 0755) < 0 && errno != EEXIST)
                        _exit(2);
                i++;
                clock_gettime(CLOCK_MONOTONIC, &now);
        } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) <
                 1000000000L);
        _exit(0);
}

static void run_race(void)
{
        char victim[64], vpath[128], etcpath[160];
        int trashfd = open(tp("trash"), O_PATH | O_DIRECTORY | O_CLOEXEC);
        int status, ops = 0;
        bool read_outside = false;
        pid_t pid;

        ck_assert_int_ge(trashfd, 0);
        snprintf(victim, sizeof(victim), "sh-race-victim-%d", (int)getpid());
        snprintf(vpath, sizeof(vpath), "d/%s", victim);
        snprintf(etcpath, sizeof(etcpath), "/etc/%s", victim);
        ut_write_file(tp("outside/%s", victim), "ORIGINAL");
        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ut_write_file(tp("ws/d/%s", victim), "INSIDE");

        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                race_child();

        while (waitpid(pid, &status, WNOHANG) == 0) {
                sh_error *err = NULL;
                uint64_t size;
                bool ex;
                int64_t sz;
                int fd;
                char sub[160], tname[32];

                (void)upload(vpath, "PWNED");
                if (sh_fs_open_read(rootfd, vpath, &fd, &size, &err) == 0) {
                        char buf[16] = {0};
                        /* never the outside file (checked after the clean-up below) */
                        if (read(fd, buf, sizeof(buf) - 1) > 0 && !strcmp(buf, "ORIGINAL"))
                                read_outside = true;
                        close(fd);
                }
                sh_error_release(&err);
                (void)sh_fs_exists(rootfd, vpath, &ex, &err);
                sh_error_release(&err);
                (void)sh_fs_size(rootfd, vpath, &sz, &err);
                sh_error_release(&err);
                snprintf(sub, sizeof(sub), "d/%s-dir/x", victim);
                (void)sh_fs_mkdir_p(FS(rootfd, &own, -1), sub, &err);
                sh_error_release(&err);
                snprintf(sub, sizeof(sub), "d/%s-dir", victim);
                snprintf(tname, sizeof(tname), "t%d", ops);
                (void)sh_fs_detach_dir(FS(rootfd, NULL, trashfd), sub, tname, &err);
                sh_error_release(&err);
                (void)sh_fs_remove_tree(trashfd, tname, &err);
                sh_error_release(&err);
                snprintf(sub, sizeof(sub), "d/%s-moved", victim);
                (void)sh_fs_rename(FS(rootfd, &own, -1), vpath, sub, 0, NULL, &err);
                sh_error_release(&err);
                (void)sh_fs_unlink_file(FS(rootfd, NULL, -1), sub, &err);
                sh_error_release(&err);
                (void)sh_fs_unlink_file(FS(rootfd, NULL, -1), vpath, &err);
                sh_error_release(&err);
                {
                        sh_fs_walker *w = NULL;
                        sh_fs_entry e;
                        if (sh_fs_walk_open(rootfd, "d", &w, &err) == 0) {
                                while (walk_next(w, &e, &err) == 1)
                                        ;
                                sh_fs_walk_free(w);
                        }
                        sh_error_release(&err);
                }
                ops++;
        }
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        close(trashfd);

        /* nothing appeared in /etc (removed again before failing: never leave debris) */
        {
                char etcdir[192];
                bool escaped_etc;

                snprintf(etcdir, sizeof(etcdir), "%s-dir", etcpath);
                escaped_etc = lexists(etcpath) || lexists(etcdir);
                unlink(etcpath);
                ut_rm_rf(etcdir);
                ck_assert_msg(!escaped_etc, "an entry was created in /etc");
        }
        ck_assert_msg(!read_outside, "a download read a file outside the workspace");
        /* the outside dir holds exactly what it held, unchanged */
        ck_assert_int_eq(count_entries(tp("outside")), 2);
        ck_assert_str_eq(read_path(tp("outside/secret")), "SECRET");
        ck_assert_str_eq(read_path(tp("outside/%s", victim)), "ORIGINAL");
        /* nothing appeared next to the workspace */
        ck_assert_int_eq(count_entries(tdir), 3);
        ck_assert_int_gt(ops, 10);
}

START_TEST(test_race_swapping_dir_for_escaping_links_never_escapes)
{
        run_race();
}
END_TEST

START_TEST(test_race_fallback_walker_never_escapes)
{
        sh_safe_force_fallback(true);
        run_race();
}
END_TEST

/* ---- the listing and search mode (the /v1 file API) ---------------------------------- */

/* Every entry of a listing (its path), over the bounded steps; the walk's result (0 or <0)
 * and its error's errno in *errnum. */
/* A listing of ws/`dir`, its paths starting with `prefix`. */
static sh_fs_walker *open_listing(const char *dir, const char *prefix, const sh_fs_walk_opts *o)
{
        int dfd = open(tp("ws/%s", dir), O_PATH | O_DIRECTORY | O_CLOEXEC);
        sh_fs_walker *w = NULL;
        sh_error *err = NULL;

        ck_assert_int_ge(dfd, 0);
        ck_assert_int_eq(sh_fs_walk_open_at(dfd, prefix, o, &w, &err), 0);
        close(dfd); /* the walker has its own */
        return w;
}

static int list_all(const char *dir, const char *prefix, const sh_fs_walk_opts *o, char out[][64],
                    int max, int *errnum)
{
        sh_fs_walker *w = open_listing(dir, prefix, o);
        sh_error *err = NULL;
        sh_fs_entry e;
        int n = 0, r;

        while ((r = walk_next(w, &e, &err)) == 1) {
                ck_assert_int_lt(n, max);
                /* the parts of the entry agree with its path and its statx */
                ck_assert_str_eq(e.path + strlen(e.path) - strlen(e.name), e.name);
                ck_assert_str_eq(e.path + strlen(e.path) - strlen(e.rel), e.rel);
                ck_assert_ptr_nonnull(e.stx);
                snprintf(out[n++], 64, "%s", e.path);
        }
        *errnum = r < 0 && err ? err->errnum : 0;
        sh_error_release(&err);
        sh_fs_walk_free(w);
        return r < 0 ? r : n;
}

static void assert_listed(char got[][64], int n, const char *const *want)
{
        int i = 0;

        for (; want[i]; i++) {
                ck_assert_int_lt(i, n);
                ck_assert_str_eq(got[i], want[i]);
        }
        ck_assert_int_eq(n, i);
}

START_TEST(test_listing_yields_each_directory_by_name_with_its_entries_after_it)
{
        /* by name within each directory ("a" < "a-c", whatever a is), a directory's entries
         * right after it: the order of execd's YAML, not the walk's "a-c" < "a/x" */
        static const char *const want[] = {"/t/a",  "/t/a/b",  "/t/a/b/y", "/t/a/x", "/t/a-c",
                                           "/t/dl", "/t/fifo", "/t/fl",    "/t/z",   NULL};
        sh_fs_walk_opts o = {.all = true};
        char got[16][64];
        int errnum, n;

        ck_assert_int_eq(mkdir(tp("ws/t"), 0755), 0);
        ck_assert_int_eq(mkdir(tp("ws/t/a"), 0755), 0);
        ck_assert_int_eq(mkdir(tp("ws/t/a/b"), 0755), 0);
        ut_write_file(tp("ws/t/a/b/y"), "");
        ut_write_file(tp("ws/t/a/x"), "");
        ut_write_file(tp("ws/t/a-c"), "");
        ut_write_file(tp("ws/t/z"), "");
        ck_assert_int_eq(symlink("a", tp("ws/t/dl")), 0);
        ck_assert_int_eq(symlink("z", tp("ws/t/fl")), 0);
        ck_assert_int_eq(mkfifo(tp("ws/t/fifo"), 0644), 0);
        n = list_all("t", "/t", &o, got, 16, &errnum);
        assert_listed(got, n, want);
}
END_TEST

START_TEST(test_listing_shows_links_as_links_and_never_enters_them)
{
        sh_fs_walk_opts o = {.all = true};
        sh_fs_walker *w;
        sh_error *err = NULL;
        sh_fs_entry e;

        ck_assert_int_eq(mkdir(tp("ws/t"), 0755), 0);
        ck_assert_int_eq(mkdir(tp("ws/t/d"), 0755), 0);
        ut_write_file(tp("ws/t/d/f"), "");
        ck_assert_int_eq(symlink("/", tp("ws/t/root")), 0);
        w = open_listing("t", "/", &o);
        ck_assert_int_eq(walk_next(w, &e, &err), 1);
        ck_assert_str_eq(e.path, "/d"); /* a "/" prefix takes no second slash */
        ck_assert(S_ISDIR(e.stx->stx_mode));
        ck_assert_int_eq(walk_next(w, &e, &err), 1);
        ck_assert_str_eq(e.path, "/d/f");
        ck_assert(S_ISREG(e.stx->stx_mode));
        ck_assert_int_eq(walk_next(w, &e, &err), 1);
        ck_assert_str_eq(e.path, "/root");
        ck_assert(S_ISLNK(e.stx->stx_mode));
        ck_assert_int_eq(walk_next(w, &e, &err), 0);
        sh_fs_walk_free(w);
}
END_TEST

START_TEST(test_listing_stops_at_its_depth)
{
        static const char *const one[] = {"t/a", "t/f", NULL};
        static const char *const two[] = {"t/a", "t/a/b", "t/f", NULL};
        sh_fs_walk_opts o = {.all = true, .max_depth = 1};
        char got[16][64];
        int errnum, n;

        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, NULL, -1), "t/a/b/c", &(sh_error *){NULL}), 0);
        ut_write_file(tp("ws/t/f"), "");
        n = list_all("t", "t", &o, got, 16, &errnum);
        assert_listed(got, n, one);
        o.max_depth = 2;
        n = list_all("t", "t", &o, got, 16, &errnum);
        assert_listed(got, n, two);
}
END_TEST

static bool refuse_named_no(void *data, int fd)
{
        struct stat st, no;

        (void)data;
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert(S_ISDIR(st.st_mode));
        return stat(tp("ws/t/no"), &no) < 0 || no.st_ino != st.st_ino;
}

START_TEST(test_listing_enters_only_the_directories_its_caller_allows)
{
        /* the caller's rule (the sandbox's permissions, kernel filesystems): "no" is shown,
         * its entries are not */
        static const char *const want[] = {"t/no", "t/yes", "t/yes/f", NULL};
        sh_fs_walk_opts o = {.all = true, .may_enter = refuse_named_no};
        char got[16][64];
        int errnum, n;

        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, NULL, -1), "t/no", &(sh_error *){NULL}), 0);
        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, NULL, -1), "t/yes", &(sh_error *){NULL}), 0);
        ut_write_file(tp("ws/t/no/secret"), "");
        ut_write_file(tp("ws/t/yes/f"), "");
        n = list_all("t", "t", &o, got, 16, &errnum);
        assert_listed(got, n, want);
}
END_TEST

START_TEST(test_search_matches_regular_files_by_base_name_or_by_path)
{
        static const char *const by_name[] = {"s/a.txt", "s/sub/c.txt", NULL};
        static const char *const by_path[] = {"s/sub/c.txt", NULL};
        sh_fs_walk_opts o = {.pattern = "*.txt"};
        char got[16][64];
        int errnum, n;

        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, NULL, -1), "s/sub/d.txt", &(sh_error *){NULL}),
                         0);
        ut_write_file(tp("ws/s/a.txt"), "");
        ut_write_file(tp("ws/s/b.py"), "");
        ut_write_file(tp("ws/s/sub/c.txt"), "");
        ck_assert_int_eq(symlink("a.txt", tp("ws/s/l.txt")), 0);
        n = list_all("s", "s", &o, got, 16, &errnum);
        assert_listed(got, n, by_name); /* the directory d.txt and the link l.txt are no files */
        o = (sh_fs_walk_opts){.pattern = "sub/*", .pattern_path = true};
        n = list_all("s", "s", &o, got, 16, &errnum);
        assert_listed(got, n, by_path);
}
END_TEST

START_TEST(test_listing_fails_with_e2big_past_the_names_it_may_hold)
{
        /* 2,000 names of 200 bytes in one directory: ~400 KiB of listing, past a bound of
         * 64 KiB; the same under a bound of 1 MiB */
        sh_fs_walk_opts o = {.all = true, .held_max = 64 << 10};
        static char got[2048][64];
        char name[201];
        int errnum, n;

        ck_assert_int_eq(mkdir(tp("ws/w"), 0755), 0);
        memset(name, 'n', 200);
        name[200] = '\0';
        for (int i = 0; i < 2000; i++) {
                snprintf(name, 5, "%04d", i);
                name[4] = 'n';
                ut_write_file(tp("ws/w/%s", name), "");
        }
        ck_assert_int_lt(list_all("w", "w", &o, got, 2048, &errnum), 0);
        ck_assert_int_eq(errnum, E2BIG);
        o.held_max = 1 << 20;
        n = list_all("w", "w", &o, got, 2048, &errnum);
        ck_assert_int_eq(n, 2000);
}
END_TEST

START_TEST(test_listing_never_enters_a_directory_swapped_after_it_was_shown)
{
        /* "d" is shown, then moved away and another directory put in its place before the
         * next step: the entries shown below "d" can only be the shown directory's */
        sh_fs_walk_opts o = {.all = true};
        sh_fs_walker *w;
        sh_error *err = NULL;
        sh_fs_entry e;

        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, NULL, -1), "t/d", &(sh_error *){NULL}), 0);
        ck_assert_int_eq(sh_fs_mkdir_p(FS(rootfd, NULL, -1), "t/other", &(sh_error *){NULL}), 0);
        ut_write_file(tp("ws/t/d/mine"), "");
        ut_write_file(tp("ws/t/other/decoy"), "");
        w = open_listing("t", "t", &o);
        ck_assert_int_eq(walk_next(w, &e, &err), 1);
        ck_assert_str_eq(e.path, "t/d");
        ck_assert_int_eq(rename(tp("ws/t/d"), tp("ws/t/moved")), 0);
        ck_assert_int_eq(rename(tp("ws/t/other"), tp("ws/t/d")), 0);
        while (walk_next(w, &e, &err) == 1)
                ck_assert_msg(strcmp(e.path, "t/d/decoy") != 0, "entered the swapped directory");
        sh_fs_walk_free(w);
}
END_TEST

/* ---- the trash (sh/trash.h) ------------------------------------------------------------- */

#define BIG (2u << 20) /* over SH_FS_TRASH_INLINE_MAX */

static int wdir = -1;    /* tdir/ws, O_RDONLY */
static int trashfd = -1; /* tdir/trash */

static void trash_setup(void)
{
        setup();
        wdir = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        trashfd = open(tp("trash"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(wdir, 0);
        ck_assert_int_ge(trashfd, 0);
}

static void trash_teardown(void)
{
        close(wdir);
        close(trashfd);
        teardown();
}

/* A file of `size` bytes really written (its blocks allocated), every byte `c`. */
static void write_big(const char *path, size_t size, char c)
{
        static char chunk[64 << 10];
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        ck_assert_int_ge(fd, 0);
        memset(chunk, c, sizeof(chunk));
        for (size_t done = 0; done < size; done += sizeof(chunk))
                ck_assert_int_eq(write(fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
        close(fd);
}

static off_t size_of(const char *path)
{
        struct stat st;

        ck_assert_int_eq(lstat(path, &st), 0);
        return st.st_size;
}

/* The one entry of the trash, by path. */
static const char *trash_entry(void)
{
        static char name[1024];
        DIR *d = opendir(tp("trash"));
        struct dirent *de;

        ck_assert_ptr_nonnull(d);
        name[0] = '\0';
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        snprintf(name, sizeof(name), "%s/trash/%s", tdir, de->d_name);
        closedir(d);
        ck_assert_str_ne(name, "");
        return name;
}

/* An unnamed file in the workspace holding `content`. */
static int unnamed(const char *content)
{
        int fd = openat(rootfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
        return fd;
}

START_TEST(test_a_small_deleted_file_is_freed_at_once)
{
        sh_error *err = NULL;

        ut_write_file(tp("ws/small"), "x");
        ck_assert_int_eq(sh_fs_trash_entry(wdir, "small", false, trashfd, &err), 0);
        ck_assert_int_eq(count_entries(tp("ws")), 0);
        ck_assert_int_eq(count_entries(tp("trash")), 0);
}
END_TEST

START_TEST(test_a_big_deleted_file_waits_in_the_trash)
{
        sh_error *err = NULL;

        write_big(tp("ws/big"), BIG, 'b');
        ck_assert_int_eq(sh_fs_trash_entry(wdir, "big", false, trashfd, &err), 1);
        ck_assert_int_eq(count_entries(tp("ws")), 0);
        ck_assert_int_eq(size_of(trash_entry()), BIG);
}
END_TEST

START_TEST(test_a_sparse_file_counts_only_its_blocks)
{
        sh_error *err = NULL;
        int fd = open(tp("ws/sparse"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t)1 << 34), 0); /* 16 GiB of holes */
        close(fd);
        ck_assert_int_eq(sh_fs_trash_entry(wdir, "sparse", false, trashfd, &err), 0);
        ck_assert_int_eq(count_entries(tp("trash")), 0);
}
END_TEST

START_TEST(test_delete_of_a_file_refuses_a_directory_and_the_reverse)
{
        sh_error *err = NULL;

        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ut_write_file(tp("ws/f"), "x");
        ck_assert_int_lt(sh_fs_trash_entry(wdir, "d", false, trashfd, &err), 0);
        ck_assert_int_eq(err->errnum, EISDIR);
        sh_error_release(&err);
        ck_assert_int_lt(sh_fs_trash_entry(wdir, "f", true, trashfd, &err), 0);
        ck_assert_int_eq(err->errnum, ENOTDIR);
        sh_error_release(&err);
        ck_assert_int_lt(sh_fs_trash_entry(wdir, "nope", false, trashfd, &err), 0);
        ck_assert_int_eq(err->errnum, ENOENT);
        sh_error_release(&err);
        ck_assert_int_eq(count_entries(tp("ws")), 2);
        ck_assert_int_eq(count_entries(tp("trash")), 0);
}
END_TEST

START_TEST(test_a_directory_goes_whole_and_waits_unless_empty)
{
        sh_error *err = NULL;

        ck_assert_int_eq(mkdir(tp("ws/empty"), 0755), 0);
        ck_assert_int_eq(mkdir(tp("ws/tree"), 0755), 0);
        ut_write_file(tp("ws/tree/f"), "x");
        ck_assert_int_eq(sh_fs_trash_entry(wdir, "empty", true, trashfd, &err), 0);
        ck_assert_int_eq(sh_fs_trash_entry(wdir, "tree", true, trashfd, &err), 1);
        ck_assert_int_eq(count_entries(tp("ws")), 0);
        ck_assert_int_eq(count_entries(trash_entry()), 1);
}
END_TEST

START_TEST(test_a_deleted_link_goes_itself_never_its_target)
{
        sh_error *err = NULL;

        ck_assert_int_eq(symlink("../outside/secret", tp("ws/l")), 0);
        ck_assert_int_eq(sh_fs_trash_entry(wdir, "l", false, trashfd, &err), 0);
        ck_assert_int_eq(size_of(tp("outside/secret")), 6);
        ck_assert_int_eq(count_entries(tp("trash")), 0);
}
END_TEST

/* An unnamed file holding "new" committed at `base` (sh_fs_trash_commit's result; its error's
 * errno, negated, on failure). */
static int commit_new(const char *base, int trash)
{
        sh_error *err = NULL;
        int fd = unnamed("new"), r = sh_fs_trash_commit(fd, wdir, base, trash, &err);

        if (r < 0)
                r = -err->errnum;
        sh_error_release(&err);
        close(fd);
        return r;
}

START_TEST(test_commit_puts_the_new_file_in_and_the_big_old_one_in_the_trash)
{
        sh_error *err = NULL;
        int fd = unnamed("new");
        struct stat mine, at;

        write_big(tp("ws/f"), BIG, 'o');
        ck_assert_int_eq(fstat(fd, &mine), 0);
        ck_assert_int_eq(sh_fs_trash_commit(fd, wdir, "f", trashfd, &err), 1);
        ck_assert_int_eq(lstat(tp("ws/f"), &at), 0);
        ck_assert(at.st_ino == mine.st_ino);
        ck_assert_int_eq(count_entries(tp("ws")), 1); /* no temporary name left */
        ck_assert_int_eq(size_of(trash_entry()), BIG);
        close(fd);
}
END_TEST

START_TEST(test_commit_frees_a_small_old_file_at_once_and_makes_a_new_one)
{
        sh_error *err = NULL;
        int a = unnamed("A"), b = unnamed("B");

        ck_assert_int_eq(sh_fs_trash_commit(a, wdir, "f", trashfd, &err), 0);
        ck_assert_int_eq(size_of(tp("ws/f")), 1);
        ut_write_file(tp("ws/g"), "old");
        ck_assert_int_eq(sh_fs_trash_commit(b, wdir, "g", trashfd, &err), 0);
        ck_assert_int_eq(size_of(tp("ws/g")), 1);
        ck_assert_int_eq(count_entries(tp("ws")), 2);
        ck_assert_int_eq(count_entries(tp("trash")), 0);
        close(a);
        close(b);
}
END_TEST

START_TEST(test_commit_over_a_directory_is_eisdir_and_changes_nothing)
{
        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ut_write_file(tp("ws/d/keep"), "k");
        ck_assert_int_eq(commit_new("d", trashfd), -EISDIR);
        ck_assert_int_eq(count_entries(tp("ws")), 1);
        ck_assert_int_eq(count_entries(tp("ws/d")), 1);
        ck_assert_int_eq(count_entries(tp("trash")), 0);
}
END_TEST

START_TEST(test_commit_over_a_file_with_other_links_keeps_them)
{
        write_big(tp("ws/f"), BIG, 'o');
        ck_assert_int_eq(link(tp("ws/f"), tp("ws/other")), 0);
        ck_assert_int_eq(commit_new("f", trashfd), 1);
        ck_assert_int_eq(size_of(tp("ws/f")), 3);
        ck_assert_int_eq(size_of(tp("ws/other")), BIG);
}
END_TEST

START_TEST(test_commit_replaces_a_link_never_its_target)
{
        ck_assert_int_eq(symlink("../outside/secret", tp("ws/l")), 0);
        ck_assert_int_eq(commit_new("l", trashfd), 0);
        ck_assert_int_eq(size_of(tp("ws/l")), 3);
        ck_assert_int_eq(size_of(tp("outside/secret")), 6);
}
END_TEST

START_TEST(test_commit_without_a_trash_replaces_in_place)
{
        write_big(tp("ws/f"), BIG, 'o');
        ck_assert_int_eq(commit_new("f", -1), 0);
        ck_assert_int_eq(size_of(tp("ws/f")), 3);
        ck_assert_int_eq(count_entries(tp("ws")), 1);
        ck_assert_int_eq(count_entries(tp("trash")), 0);
}
END_TEST

START_TEST(test_rename_over_a_big_file_puts_it_in_the_trash)
{
        sh_error *err = NULL;

        ut_write_file(tp("ws/a"), "A");
        write_big(tp("ws/b"), BIG, 'b');
        ck_assert_int_eq(sh_fs_rename(FS(rootfd, &own, trashfd), "a", "b", 0, NULL, &err), 1);
        ck_assert_str_eq(read_path(tp("ws/b")), "A");
        ck_assert(!lexists(tp("ws/a")));
        ck_assert_int_eq(size_of(trash_entry()), BIG);
        ut_write_file(tp("ws/c"), "C");
        ck_assert_int_eq(sh_fs_rename(FS(rootfd, &own, trashfd), "c", "b", 0, NULL, &err), 0);
        ck_assert_str_eq(read_path(tp("ws/b")), "C");
        ck_assert_int_eq(count_entries(tp("ws")), 1);
        /* two names of one file: nothing happens, as rename(2) */
        ck_assert_int_eq(link(tp("ws/b"), tp("ws/b2")), 0);
        ck_assert_int_eq(sh_fs_rename(FS(rootfd, &own, trashfd), "b", "b2", 0, NULL, &err), 0);
        ck_assert_int_eq(sh_fs_rename(FS(rootfd, &own, trashfd), "b", "b", 0, NULL, &err), 0);
        ck_assert_int_eq(count_entries(tp("ws")), 2);
}
END_TEST

START_TEST(test_rename_with_a_directory_keeps_the_rules_of_rename)
{
        sh_error *err = NULL;

        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ck_assert_int_eq(mkdir(tp("ws/e"), 0755), 0);
        ut_write_file(tp("ws/d/keep"), "k");
        ut_write_file(tp("ws/f"), "f");
        ck_assert_int_lt(sh_fs_rename(FS(rootfd, &own, trashfd), "d", "f", 0, NULL, &err), 0);
        ck_assert_int_eq(err->errnum, ENOTDIR);
        sh_error_release(&err);
        ck_assert_int_lt(sh_fs_rename(FS(rootfd, &own, trashfd), "f", "d", 0, NULL, &err), 0);
        ck_assert_int_eq(err->errnum, EISDIR);
        sh_error_release(&err);
        ck_assert_int_eq(sh_fs_rename(FS(rootfd, &own, trashfd), "d", "e", 0, NULL, &err), 0);
        ck_assert_str_eq(read_path(tp("ws/e/keep")), "k");
        ck_assert_str_eq(read_path(tp("ws/f")), "f");
        ck_assert_int_eq(count_entries(tp("trash")), 0);
}
END_TEST

START_TEST(test_an_unnamed_file_given_up_goes_to_the_trash_only_when_big)
{
        int small = unnamed("x"), big = openat(rootfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        static char chunk[BIG];

        ck_assert_int_ge(big, 0);
        memset(chunk, 'z', sizeof(chunk));
        ck_assert_int_eq(write(big, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
        ck_assert_int_eq(sh_fs_trash_unnamed(small, trashfd), 0);
        ck_assert_int_eq(sh_fs_trash_unnamed(big, -1), 0);
        ck_assert_int_eq(count_entries(tp("trash")), 0);
        ck_assert_int_eq(sh_fs_trash_unnamed(big, trashfd), 1);
        ck_assert_int_eq(size_of(trash_entry()), BIG);
        ck_assert_int_eq(count_entries(tp("ws")), 0);
        close(small);
        close(big);
}
END_TEST

/* A staged file beside ws/f: the directory opened, the policy's trash. */
static int stage_beside_f(sh_fs_staged *st, const char *content)
{
        sh_fs_ctx c = {.root = rootfd, .trashfd = trashfd};
        sh_error *err = NULL;
        int pfd = openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(pfd, 0);
        ck_assert_int_eq(sh_fs_stage(&c, pfd, st, &err), 0);
        ck_assert_int_eq(st->trashfd, trashfd);
        return sh_fs_upload_write(st->u, content, strlen(content), &err);
}

START_TEST(test_a_staged_file_goes_in_over_its_entry_and_the_old_one_into_the_trash)
{
        sh_fs_staged st;
        sh_error *err = NULL;
        struct stat sb;

        write_big(tp("ws/f"), BIG, 'o');
        ck_assert_int_eq(stage_beside_f(&st, "new"), 0);
        ck_assert_int_eq(count_entries(tp("ws")), 1); /* unnamed until the commit */
        ck_assert_int_eq(sh_fs_stage_commit(&st, "f", &own, 0640, &err), 1);
        ck_assert_str_eq(read_path(tp("ws/f")), "new");
        ck_assert_int_eq(stat(tp("ws/f"), &sb), 0);
        ck_assert_uint_eq(sb.st_mode & 07777, 0640);
        ck_assert_int_eq(size_of(trash_entry()), BIG);
        /* committed: nothing to hand back */
        ck_assert_int_eq(sh_fs_stage_drop(&st), -1);
}
END_TEST

START_TEST(test_a_staged_file_dropped_leaves_nothing_and_is_handed_back)
{
        sh_fs_staged st;
        int fd;

        ut_write_file(tp("ws/f"), "old");
        ck_assert_int_eq(stage_beside_f(&st, "new"), 0);
        fd = sh_fs_stage_drop(&st);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(st.pfd, -1);
        ck_assert_str_eq(read_path(tp("ws/f")), "old");
        ck_assert_int_eq(count_entries(tp("ws")), 1);
        ck_assert_int_eq(count_entries(tp("trash")), 0);
        close(fd);
}
END_TEST

START_TEST(test_a_directory_removed_with_a_trash_moves_there_at_once)
{
        sh_fs_ctx c = {.root = rootfd, .trashfd = trashfd};
        sh_error *err = NULL;
        sh_fs_rmdir d;
        struct stat st;

        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        write_big(tp("ws/d/big"), BIG, 'b');
        ck_assert_int_eq(sh_fs_rmdir_open(&d, &c, "d", &st, &err), 0);
        ck_assert_int_eq(sh_fs_rmdir_step(&d, NULL, NULL), 0);
        ck_assert(d.kept);
        ck_assert_int_eq(d.errnum, 0);
        ck_assert(!lexists(tp("ws/d")));
        ck_assert_int_eq(count_entries(tp("trash")), 1);
        sh_fs_rmdir_done(&d);
}
END_TEST

START_TEST(test_a_directory_removed_without_a_trash_goes_in_place_a_step_at_a_time)
{
        sh_fs_ctx c = {.root = rootfd, .trashfd = -1};
        sh_error *err = NULL;
        sh_fs_rmdir d;
        struct stat st;
        int steps = 0;

        ck_assert_int_eq(mkdir(tp("ws/d"), 0755), 0);
        ck_assert_int_eq(mkdir(tp("ws/d/e"), 0755), 0);
        ut_write_file(tp("ws/d/e/f"), "x");
        ut_write_file(tp("ws/d/g"), "y");
        ck_assert_int_eq(sh_fs_rmdir_open(&d, &c, "d", &st, &err), 0);
        while (sh_fs_rmdir_step(&d, NULL, NULL) > 0)
                steps++;
        ck_assert_int_gt(steps, 4); /* the entries one at a time */
        ck_assert(!d.kept);
        ck_assert_int_eq(d.errnum, 0);
        ck_assert(!lexists(tp("ws/d")));
        ck_assert_int_eq(count_entries(tp("trash")), 0);
        sh_fs_rmdir_done(&d);
}
END_TEST

START_TEST(test_a_directory_removal_refuses_what_is_not_one)
{
        sh_fs_ctx c = {.root = rootfd, .trashfd = trashfd};
        sh_error *err = NULL;
        sh_fs_rmdir d;
        struct stat st;

        ut_write_file(tp("ws/f"), "x");
        ck_assert_int_eq(err_errno(sh_fs_rmdir_open(&d, &c, "f", &st, &err), &err), ENOTDIR);
        ck_assert(S_ISREG(st.st_mode)); /* the entry's own type, not a lookup's ENOTDIR */
        sh_fs_rmdir_done(&d);
        ck_assert_int_eq(err_errno(sh_fs_rmdir_open(&d, &c, "f/x", &st, &err), &err), ENOTDIR);
        ck_assert_uint_eq(st.st_mode, 0);
        sh_fs_rmdir_done(&d);
        ck_assert(lexists(tp("ws/f")));
}
END_TEST

/* ---- the daemon's view of another mount's directory (root: bind mounts) ----------------- */

/* tdir/mnt: a bind mount of ws, as a sandbox's /workspace is; in a mount namespace of this
 * test's own (Check forks each test), so nothing outlives it. */
static void bind_setup(void)
{
        trash_setup();
        if (geteuid() != 0)
                return;
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        ck_assert_int_eq(mkdir(tp("mnt"), 0755), 0);
        ck_assert_int_eq(mount(tp("ws"), tp("mnt"), NULL, MS_BIND, NULL), 0);
}

static int view(const char *below)
{
        int fd = open(tp("mnt/%s", below), O_PATH | O_DIRECTORY | O_CLOEXEC);
        int r;

        ck_assert_int_ge(fd, 0);
        r = sh_fs_view_dir(rootfd, tp("mnt"), fd);
        close(fd);
        return r;
}

START_TEST(test_view_of_a_directory_through_another_mount_is_that_directory)
{
        struct stat want, got;
        int fd;

        if (geteuid() != 0)
                return; /* bind mounts need root */
        ck_assert_int_eq(mkdir(tp("ws/a"), 0755), 0);
        ck_assert_int_eq(mkdir(tp("ws/a/b c"), 0755), 0);
        fd = view("a/b c");
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstat(fd, &got), 0);
        ck_assert_int_eq(stat(tp("ws/a/b c"), &want), 0);
        ck_assert(got.st_ino == want.st_ino && got.st_dev == want.st_dev);
        close(fd);
        fd = view("");
        ck_assert_int_ge(fd, 0);
        close(fd);
}
END_TEST

START_TEST(test_view_refuses_what_is_not_the_workspace_or_no_longer_in_it)
{
        int fd;

        if (geteuid() != 0)
                return;
        /* moved out of the workspace while held: no path below it leads there */
        ck_assert_int_eq(mkdir(tp("ws/gone"), 0755), 0);
        fd = open(tp("mnt/gone"), O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(rename(tp("ws/gone"), tp("trash/gone")), 0);
        ck_assert_int_eq(sh_fs_view_dir(rootfd, tp("mnt"), fd), -ESTALE);
        ck_assert_int_eq(rmdir(tp("trash/gone")), 0);
        ck_assert_int_eq(sh_fs_view_dir(rootfd, tp("mnt"), fd), -ENOENT);
        close(fd);
        /* another filesystem (a sandbox's /tmp) */
        ck_assert_int_eq(mkdir(tp("ws/tmp"), 0755), 0);
        ck_assert_int_eq(mount("tmpfs", tp("mnt/tmp"), "tmpfs", 0, "size=1m"), 0);
        ck_assert_int_eq(view("tmp"), -EXDEV);
        /* a read-only mount of the same filesystem */
        ck_assert_int_eq(mkdir(tp("ro"), 0755), 0);
        ck_assert_int_eq(mount(tp("ws"), tp("ro"), NULL, MS_BIND, NULL), 0);
        ck_assert_int_eq(mount(NULL, tp("ro"), NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL), 0);
        fd = open(tp("ro"), O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(sh_fs_view_dir(rootfd, tp("ro"), fd), -EXDEV);
        close(fd);
        /* a path outside the mount point given */
        fd = open(tp("mnt"), O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_eq(sh_fs_view_dir(rootfd, tp("mntx"), fd), -ESTALE);
        close(fd);
}
END_TEST

/* ---- the policy (sh_fs_ctx): guard, may_change, trash, loop_absent --------------------- */

/* What the test's policy callbacks see and say. */
typedef struct policy {
        ino_t refuse;     /* a directory refused (guard or may_change), by inode; 0: none */
        int refuse_errno; /* with this -errno */
        unsigned guarded, asked, trashed;
        int trash_r;  /* what the trash view returns */
        int trash_to; /* the trash it gives */
} policy;

static bool is_refused(const policy *p, int fd)
{
        struct stat st;

        return p->refuse && fstat(fd, &st) == 0 && st.st_ino == p->refuse;
}

static int policy_guard(void *data, int dirfd)
{
        policy *p = data;

        p->guarded++;
        return is_refused(p, dirfd) ? p->refuse_errno : 0;
}

static int policy_may_change(void *data, int dirfd)
{
        policy *p = data;

        p->asked++;
        return is_refused(p, dirfd) ? p->refuse_errno : 0;
}

static int policy_trash(void *data, int *pfd, int *ret_trashfd)
{
        policy *p = data;

        (void)pfd;
        p->trashed++;
        *ret_trashfd = p->trash_to;
        return p->trash_r;
}

static ino_t ino_of(const char *path)
{
        struct stat st;

        ck_assert_int_eq(lstat(path, &st), 0);
        return st.st_ino;
}

START_TEST(test_a_policy_may_change_refuses_every_change_in_a_directory)
{
        policy p = {.refuse_errno = -EACCES, .trash_to = -1};
        sh_fs_ctx c = {.root = rootfd, .may_change = policy_may_change, .data = &p, .trashfd = -1};
        sh_fs_upload *u = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(mkdir(tp("ws/ro"), 0755), 0);
        ut_write_file(tp("ws/ro/f"), "x");
        ut_write_file(tp("ws/g"), "y");
        p.refuse = ino_of(tp("ws/ro"));
        ck_assert_int_eq(err_errno(sh_fs_unlink_file(&c, "ro/f", &err), &err), EACCES);
        ck_assert_int_eq(err_errno(sh_fs_mkdir_p(&c, "ro/new/deeper", &err), &err), EACCES);
        ck_assert_int_eq(err_errno(sh_fs_rename(&c, "g", "ro/g", 0, NULL, &err), &err), EACCES);
        ck_assert_int_eq(err_errno(sh_fs_rename(&c, "ro/f", "h", 0, NULL, &err), &err), EACCES);
        ck_assert_int_eq(sh_fs_upload_begin(rootfd, &u, &err), 0);
        ck_assert_int_eq(err_errno(sh_fs_upload_commit(u, &c, "ro/up", &kept, &err), &err), EACCES);
        ck_assert(lexists(tp("ws/ro/f")) && lexists(tp("ws/g")));
        ck_assert(!lexists(tp("ws/ro/new")) && !lexists(tp("ws/ro/up")) && !lexists(tp("ws/h")));
        /* elsewhere it is asked and says yes */
        p.asked = 0;
        ck_assert_int_eq(sh_fs_mkdir_p(&c, "ok/a", &err), 0);
        ck_assert_uint_eq(p.asked, 2); /* each level made: in the root, then in ok */
}
END_TEST

START_TEST(test_a_policys_guard_sees_every_directory_a_lookup_passes)
{
        policy p = {.refuse_errno = -EPERM, .trash_to = -1};
        sh_safe_guard g = {policy_guard, &p, NULL};
        sh_fs_ctx c = {.root = rootfd, .guard = &g, .data = &p, .trashfd = -1};
        sh_error *err = NULL;

        ck_assert_int_eq(mkdir(tp("ws/a"), 0755), 0);
        ck_assert_int_eq(mkdir(tp("ws/a/b"), 0755), 0);
        ut_write_file(tp("ws/a/b/f"), "x");
        ck_assert_int_eq(sh_fs_unlink_file(&c, "a/b/f", &err), 0);
        ck_assert_uint_eq(p.guarded, 3); /* the root, a and b */
        ut_write_file(tp("ws/a/b/f"), "x");
        p.refuse = ino_of(tp("ws/a"));
        ck_assert_int_eq(err_errno(sh_fs_unlink_file(&c, "a/b/f", &err), &err), EPERM);
        ck_assert_int_eq(err_errno(sh_fs_mkdir_p(&c, "a/b/c", &err), &err), EPERM);
        ck_assert(lexists(tp("ws/a/b/f")) && !lexists(tp("ws/a/b/c")));
}
END_TEST

START_TEST(test_a_policys_trash_view_is_asked_for_what_a_change_leaves)
{
        policy p = {.trash_r = -EAGAIN, .trash_to = -1};
        sh_fs_ctx c = {.root = rootfd, .trash = policy_trash, .data = &p, .trashfd = -1};
        sh_error *err = NULL;

        ut_write_file(tp("ws/f"), "x");
        ck_assert_int_eq(err_errno(sh_fs_unlink_file(&c, "f", &err), &err), EAGAIN);
        ck_assert(lexists(tp("ws/f")));
        p.trash_r = 0; /* no trash here: in place */
        ck_assert_int_eq(sh_fs_unlink_file(&c, "f", &err), 0);
        ck_assert(!lexists(tp("ws/f")));
        ck_assert_uint_eq(p.trashed, 2);
}
END_TEST

/* A may_read hook that counts its calls, refuses a file named "no", and tells an O_PATH fd. */
typedef struct reader {
        unsigned asked, asked_opened;
} reader;

static int reader_may_read(void *data, int fd, const struct statx *s)
{
        reader *rd = data;
        char proc[64], name[PATH_MAX];
        ssize_t n;

        rd->asked++;
        if (!(fcntl(fd, F_GETFL) & O_PATH))
                rd->asked_opened++;
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        n = readlink(proc, name, sizeof(name) - 1);
        ck_assert_int_gt(n, 0);
        name[n] = '\0';
        ck_assert(S_ISREG(s->stx_mode) || S_ISFIFO(s->stx_mode));
        return strcmp(strrchr(name, '/'), "/no") == 0 ? -EACCES : 0;
}

START_TEST(test_a_policys_may_read_is_asked_before_the_open_and_of_what_was_opened)
{
        reader rd = {0};
        sh_fs_ctx c = {.root = rootfd, .may_read = reader_may_read, .data = &rd, .trashfd = -1};
        sh_error *err = NULL;
        struct statx s;
        int fd = -1;

        ut_write_file(tp("ws/yes"), "hello");
        ut_write_file(tp("ws/no"), "secret");
        ck_assert_int_eq(mkfifo(tp("ws/p"), 0644), 0);
        ck_assert_int_eq(sh_fs_open_read_at(&c, "yes", &fd, &s, &err), 0);
        ck_assert_uint_eq(s.stx_size, 5);
        ck_assert_uint_eq(rd.asked, 2);
        ck_assert_uint_eq(rd.asked_opened, 1);
        close(fd);
        /* refused before anything is opened */
        rd = (reader){0};
        ck_assert_int_eq(err_errno(sh_fs_open_read_at(&c, "no", &fd, &s, &err), &err), EACCES);
        ck_assert_uint_eq(rd.asked, 1);
        ck_assert_uint_eq(rd.asked_opened, 0);
        /* a FIFO is asked about, never opened */
        rd = (reader){0};
        ck_assert_int_lt(sh_fs_open_read_at(&c, "p", &fd, &s, &err), 0);
        ck_assert_int_eq(sh_error_kind_of(err), SH_E_INVALID);
        sh_error_release(&err);
        ck_assert_uint_eq(rd.asked_opened, 0);
}
END_TEST

START_TEST(test_rename_noreplace_refuses_an_existing_destination_and_says_which_side)
{
        sh_fs_ctx c = {.root = rootfd, .trashfd = -1};
        sh_error *err = NULL;
        bool at_src = true;

        ut_write_file(tp("ws/a"), "A");
        ut_write_file(tp("ws/b"), "B");
        ck_assert_int_eq(
                err_errno(sh_fs_rename(&c, "a", "b", SH_FS_NOREPLACE, &at_src, &err), &err),
                EEXIST);
        ck_assert(!at_src);
        ck_assert_str_eq(read_path(tp("ws/b")), "B");
        ck_assert_int_eq(err_errno(sh_fs_rename(&c, "a", "", SH_FS_NOREPLACE, &at_src, &err), &err),
                         EEXIST);
        ck_assert(!at_src);
        ck_assert_int_eq(
                err_errno(sh_fs_rename(&c, "nope", "", SH_FS_NOREPLACE, &at_src, &err), &err),
                ENOENT);
        ck_assert(at_src);
        ck_assert_int_eq(sh_fs_rename(&c, "a", "n/c", SH_FS_NOREPLACE, &at_src, &err), 0);
        ck_assert(!at_src);
        ck_assert_str_eq(read_path(tp("ws/n/c")), "A");
}
END_TEST

START_TEST(test_too_many_links_is_absence_only_where_the_policy_says)
{
        sh_fs_ctx native = {.root = rootfd, .trashfd = -1, .loop_absent = true};
        sh_fs_ctx strict = {.root = rootfd, .trashfd = -1};
        sh_error *err = NULL;

        ck_assert_int_eq(symlink("l2", tp("ws/l1")), 0);
        ck_assert_int_eq(symlink("l1", tp("ws/l2")), 0);
        ck_assert_int_eq(err_errno(sh_fs_unlink_file(&native, "l1/f", &err), &err), ENOENT);
        ck_assert_int_eq(err_errno(sh_fs_unlink_file(&strict, "l1/f", &err), &err), ELOOP);
}
END_TEST

static Suite *fsops_suite(void)
{
        Suite *s = suite_create("fsops");
        TCase *tc = tcase_create("ops");
        TCase *fb = tcase_create("ops_fallback");
        TCase *race = tcase_create("race");
        TCase *trash = tcase_create("trash");
        TCase *tv = tcase_create("trash_view");
        TCase *both[] = {tc, fb};

        for (size_t i = 0; i < 2; i++) {
                TCase *t = both[i];
                tcase_set_timeout(t, 30);
                tcase_add_unchecked_fixture(t, base_setup, base_teardown);
                tcase_add_checked_fixture(t, i == 0 ? setup : setup_fallback, teardown);
                tcase_add_test(t, test_mkdir_p_creates_parents_0755_owned);
                tcase_add_test(t, test_mkdir_p_existing_directory_is_fine);
                tcase_add_test(t, test_mkdir_p_existing_file_is_eexist);
                tcase_add_test(t, test_mkdir_p_file_in_middle_is_enotdir);
                tcase_add_test(t, test_mkdir_p_through_escaping_link_stays_inside);
                tcase_add_test(t, test_mkdir_p_dangling_link_at_end_is_eexist);
                tcase_add_test(t, test_upload_creates_file_0644_owned_with_parents);
                tcase_add_test(t, test_upload_replaces_existing_file);
                tcase_add_test(t, test_upload_size_counts_written_bytes);
                tcase_add_test(t, test_upload_invisible_until_commit_old_content_kept);
                tcase_add_test(t, test_upload_abort_leaves_no_trace);
                tcase_add_test(t, test_upload_over_directory_is_eisdir_nothing_changed);
                tcase_add_test(t, test_upload_to_root_is_eisdir);
                tcase_add_test(t, test_upload_replaces_link_not_its_target);
                tcase_add_test(t, test_upload_through_escaping_parent_link_stays_inside);
                tcase_add_test(t, test_upload_replaces_fifo);
                tcase_add_test(t, test_open_read_returns_content_and_size);
                tcase_add_test(t, test_open_read_directory_is_eisdir);
                tcase_add_test(t, test_open_read_fifo_is_400_without_blocking);
                tcase_add_test(t, test_open_read_absent_is_enoent);
                tcase_add_test(t, test_open_read_escaping_link_is_enoent);
                tcase_add_test(t, test_open_read_follows_link_inside_root);
                tcase_add_test(t, test_read_bounded_reads_at_most_its_bound);
                tcase_add_test(
                        t, test_read_bounded_refuses_a_fifo_without_blocking_and_an_absent_file);
                tcase_add_test(t, test_read_bounded_refuses_a_kernel_filesystems_file);
                tcase_add_test(t, test_exists_for_file_dir_fifo_and_root);
                tcase_add_test(t, test_exists_false_for_absent_dangling_and_escaping);
                tcase_add_test(t, test_size_of_regular_file_else_minus_one);
                tcase_add_test(t, test_unlink_removes_link_not_target);
                tcase_add_test(t, test_unlink_directory_is_eisdir_absent_is_enoent);
                tcase_add_test(t, test_unlink_through_escaping_link_touches_nothing_outside);
                tcase_add_test(t, test_rename_moves_and_creates_dst_parents);
                tcase_add_test(t, test_rename_replaces_existing_dst_file);
                tcase_add_test(t, test_rename_absent_src_is_enoent_and_creates_nothing);
                tcase_add_test(t, test_rename_root_is_einval);
                tcase_add_test(t, test_a_policy_may_change_refuses_every_change_in_a_directory);
                tcase_add_test(t, test_a_policys_guard_sees_every_directory_a_lookup_passes);
                tcase_add_test(t, test_a_policys_trash_view_is_asked_for_what_a_change_leaves);
                tcase_add_test(
                        t, test_a_policys_may_read_is_asked_before_the_open_and_of_what_was_opened);
                tcase_add_test(
                        t,
                        test_rename_noreplace_refuses_an_existing_destination_and_says_which_side);
                tcase_add_test(t, test_too_many_links_is_absence_only_where_the_policy_says);
                tcase_add_test(t, test_detach_dir_moves_it_to_trash);
                tcase_add_test(t, test_detach_dir_link_or_file_is_enotdir);
                tcase_add_test(t, test_detach_dir_absent_enoent_root_einval);
                tcase_add_test(t, test_remove_tree_removes_nested_tree);
                tcase_add_test(t, test_remove_tree_never_follows_links);
                tcase_add_test(t, test_remove_tree_absent_is_success);
                tcase_add_test(t, test_remove_tree_deeper_than_open_limit);
                tcase_add_test(t, test_walk_yields_bytewise_sorted_full_paths);
                tcase_add_test(t, test_walk_skips_links_fifos_and_empty_dirs);
                tcase_add_test(t, test_walk_subdir_root_gives_paths_from_workspace_root);
                tcase_add_test(t, test_walk_absent_file_or_link_root_yields_nothing);
                tcase_add_test(t, test_walk_empty_root_yields_nothing);
                tcase_add_test(t, test_walk_reports_size_and_mtime_ns);
                tcase_add_test(t, test_walk_skips_entries_removed_mid_walk);
                tcase_add_test(t, test_walk_many_files_in_order);
                tcase_add_test(t, test_usage_counts_hard_linked_inode_once);
                tcase_add_test(t, test_usage_set_grows_past_many_linked_inodes);
                tcase_add_test(t, test_walk_chain_deeper_than_the_fd_limit_uses_few_fds);
                tcase_add_test(t, test_walk_charges_empty_dirs_and_skipped_entries_to_its_steps);
                tcase_add_test(t, test_walk_wide_directory_is_merged_in_bytewise_order);
                tcase_add_test(t, test_walk_climbing_back_checks_the_identity_of_the_parent);
                tcase_add_test(t, test_walk_never_enters_a_directory_swapped_in_for_a_closed_level);
                tcase_add_test(t, test_walk_never_follows_a_link_swapped_in_for_a_closed_level);
                tcase_add_test(t, test_walk_never_follows_a_link_even_to_the_level_itself);
                tcase_add_test(t, test_remove_tree_of_a_chain_deeper_than_the_fd_limit);
                tcase_add_test(
                        t, test_listing_yields_each_directory_by_name_with_its_entries_after_it);
                tcase_add_test(t, test_listing_shows_links_as_links_and_never_enters_them);
                tcase_add_test(t, test_listing_stops_at_its_depth);
                tcase_add_test(t, test_listing_enters_only_the_directories_its_caller_allows);
                tcase_add_test(t, test_search_matches_regular_files_by_base_name_or_by_path);
                tcase_add_test(t, test_listing_fails_with_e2big_past_the_names_it_may_hold);
                tcase_add_test(t, test_listing_never_enters_a_directory_swapped_after_it_was_shown);
                suite_add_tcase(s, t);
        }

        tcase_set_timeout(race, 60);
        tcase_add_unchecked_fixture(race, base_setup, base_teardown);
        tcase_add_checked_fixture(race, setup, teardown);
        tcase_add_test(race, test_race_swapping_dir_for_escaping_links_never_escapes);
        tcase_add_test(race, test_race_fallback_walker_never_escapes);
        suite_add_tcase(s, race);
        tcase_add_unchecked_fixture(trash, base_setup, base_teardown);
        tcase_add_checked_fixture(trash, trash_setup, trash_teardown);
        tcase_add_unchecked_fixture(tv, base_setup, base_teardown);
        tcase_add_checked_fixture(tv, bind_setup, trash_teardown);
        tcase_add_test(trash, test_a_small_deleted_file_is_freed_at_once);
        tcase_add_test(trash, test_a_big_deleted_file_waits_in_the_trash);
        tcase_add_test(trash, test_a_sparse_file_counts_only_its_blocks);
        tcase_add_test(trash, test_delete_of_a_file_refuses_a_directory_and_the_reverse);
        tcase_add_test(trash, test_a_directory_goes_whole_and_waits_unless_empty);
        tcase_add_test(trash, test_a_deleted_link_goes_itself_never_its_target);
        tcase_add_test(trash, test_commit_puts_the_new_file_in_and_the_big_old_one_in_the_trash);
        tcase_add_test(trash, test_commit_frees_a_small_old_file_at_once_and_makes_a_new_one);
        tcase_add_test(trash, test_commit_over_a_directory_is_eisdir_and_changes_nothing);
        tcase_add_test(trash, test_commit_over_a_file_with_other_links_keeps_them);
        tcase_add_test(trash, test_commit_replaces_a_link_never_its_target);
        tcase_add_test(trash, test_commit_without_a_trash_replaces_in_place);
        tcase_add_test(trash, test_rename_over_a_big_file_puts_it_in_the_trash);
        tcase_add_test(trash, test_rename_with_a_directory_keeps_the_rules_of_rename);
        tcase_add_test(trash, test_an_unnamed_file_given_up_goes_to_the_trash_only_when_big);
        tcase_add_test(trash,
                       test_a_staged_file_goes_in_over_its_entry_and_the_old_one_into_the_trash);
        tcase_add_test(trash, test_a_staged_file_dropped_leaves_nothing_and_is_handed_back);
        tcase_add_test(trash, test_a_directory_removed_with_a_trash_moves_there_at_once);
        tcase_add_test(trash,
                       test_a_directory_removed_without_a_trash_goes_in_place_a_step_at_a_time);
        tcase_add_test(trash, test_a_directory_removal_refuses_what_is_not_one);
        tcase_add_test(tv, test_view_of_a_directory_through_another_mount_is_that_directory);
        tcase_add_test(tv, test_view_refuses_what_is_not_the_workspace_or_no_longer_in_it);
        suite_add_tcase(s, trash);
        suite_add_tcase(s, tv);

        return s;
}

int main(void)
{
        return ut_run(fsops_suite());
}
