/* test_overlay_root.c: a sandbox whose root is an image's layers (sh_root_layers), on real
 * sandboxes through the sandbox layer (wire_services_start): two layers made by hand (a
 * busybox, a whiteout, an opaque directory) show merged; the root is writable where the image
 * lets the sandbox's uid write, never where root owns it; sandboxes of the same layers do not
 * see each other's writes and the layers stay as they were; the upper counts against the disk
 * limit (tmpfs, loop) and is gone with the sandbox; the image's env and workdir; the pin held
 * for the sandbox's life; a plan with a lower outside the layers refused; more layers than one
 * page of mount options holds. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "sh/exec.h"
#include "sh/sandbox.h"
#include "unit.h"
#include "wire_helpers.h"

#define WAIT_MS  20000 /* a bound on every wait, never a speed */
#define N_LOWERS 2
#define MANY     100 /* layers whose lowerdir= would pass a page of mount data */

static sh_loop *loop;
static sh_manager *mgr;
static char layers[PATH_MAX];
static int unpins;

static const char *const applets[] = {"sh", "cat", "ls",  "echo", "touch", "dd",  "stat",
                                      "id", "rm",  "pwd", "test", "mkdir", "head"};

static void mk(const char *path, mode_t mode)
{
        ck_assert_msg(mkdir(path, mode) == 0 || errno == EEXIST, "mkdir %s: %s", path,
                      strerror(errno));
        ck_assert_int_eq(chmod(path, mode), 0);
}

/* The lowest layer: a busybox and its applets in /bin, /usr root's, /scratch for anyone
 * (01777), /etc/gone and /opq/old (the top layer hides both). The top layer: a whiteout of
 * /etc/gone (a 0/0 character device), /opq opaque with /opq/new, /usr/share/b. */
static void make_layers(void)
{
        int in, out;
        ssize_t n;
        char buf[65536];

        /* Beside the state root (wire_root: {tmp}/state), removed with it. */
        snprintf(layers, sizeof(layers), "%s", wire_root());
        *strrchr(layers, '/') = '\0';
        snprintf(layers + strlen(layers), sizeof(layers) - strlen(layers), "/layers");
        mk(layers, 0700);
        mk(ut_path(layers, "l0"), 0755);
        mk(ut_path(layers, "l0/root"), 0755);
        mk(ut_path(layers, "l0/root/bin"), 0755);
        in = open("/bin/busybox", O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(in, 0);
        out = open(ut_path(layers, "l0/root/bin/busybox"), O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
        ck_assert_int_ge(out, 0);
        while ((n = read(in, buf, sizeof(buf))) > 0)
                ck_assert_int_eq(write(out, buf, (size_t)n), n);
        close(in);
        close(out);
        for (size_t i = 0; i < sizeof(applets) / sizeof(applets[0]); i++) {
                ck_assert_int_eq(symlink("busybox", ut_path(layers, "l0/root/bin/%s", applets[i])),
                                 0);
        }
        mk(ut_path(layers, "l0/root/usr"), 0755);
        mk(ut_path(layers, "l0/root/usr/share"), 0755);
        ut_write_file(ut_path(layers, "l0/root/usr/share/a"), "lower-a\n");
        mk(ut_path(layers, "l0/root/scratch"), 01777);
        ut_write_file(ut_path(layers, "l0/root/scratch/shared"), "image\n");
        ck_assert_int_eq(chmod(ut_path(layers, "l0/root/scratch/shared"), 0666), 0);
        mk(ut_path(layers, "l0/root/etc"), 0755);
        ut_write_file(ut_path(layers, "l0/root/etc/gone"), "gone\n");
        ut_write_file(ut_path(layers, "l0/root/etc/keep"), "keep\n");
        mk(ut_path(layers, "l0/root/opq"), 0755);
        ut_write_file(ut_path(layers, "l0/root/opq/old"), "old\n");

        mk(ut_path(layers, "l1"), 0755);
        mk(ut_path(layers, "l1/root"), 0755);
        mk(ut_path(layers, "l1/root/etc"), 0755);
        ck_assert_int_eq(mknod(ut_path(layers, "l1/root/etc/gone"), S_IFCHR | 0000, makedev(0, 0)),
                         0);
        mk(ut_path(layers, "l1/root/opq"), 0755);
        ck_assert_int_eq(
                setxattr(ut_path(layers, "l1/root/opq"), "trusted.overlay.opaque", "y", 1, 0), 0);
        ut_write_file(ut_path(layers, "l1/root/opq/new"), "new\n");
        mk(ut_path(layers, "l1/root/usr"), 0755);
        mk(ut_path(layers, "l1/root/usr/share"), 0755);
        ut_write_file(ut_path(layers, "l1/root/usr/share/b"), "upper-b\n");
        /* Hostile xattrs of overlayfs's own in the top layer: a directory redirected to /usr of
         * the layers below, a file whose data would come from /usr/share/a (metacopy). */
        mk(ut_path(layers, "l1/root/redir"), 0755);
        ck_assert_int_eq(setxattr(ut_path(layers, "l1/root/redir"), "trusted.overlay.redirect",
                                  "/usr", 4, 0),
                         0);
        ut_write_file(ut_path(layers, "l1/root/mc"), "");
        ck_assert_int_eq(setxattr(ut_path(layers, "l1/root/mc"), "trusted.overlay.redirect",
                                  "/usr/share/a", 12, 0),
                         0);
        ck_assert_int_eq(
                setxattr(ut_path(layers, "l1/root/mc"), "trusted.overlay.metacopy", "", 0, 0), 0);
}

static void unpin(void *pin)
{
        ck_assert_ptr_eq(pin, &unpins);
        unpins++;
}

static void setup_with(const char *const *flags)
{
        mgr = wire_services_start(flags, &loop);
        make_layers();
        unpins = 0;
}

static void setup(void)
{
        setup_with(NULL);
}

static void setup_tmpfs(void)
{
        static const char *const flags[] = {"--disk-max=8M", "--disk-quota=tmpfs", NULL};

        setup_with(flags);
}

static void setup_loop(void)
{
        static const char *const flags[] = {"--disk-max=16M", "--disk-quota=loop", NULL};

        setup_with(flags);
}

/* Project quota: only where the state root's filesystem holds it, the VM tier's ext4 prjquota
 * disk (TMPDIR there and SH_TEST_PROJECT_QUOTA=1, which runs this part alone: init.sh). */
static void setup_project(void)
{
        static const char *const flags[] = {"--disk-max=8M", "--disk-quota=project", NULL};

        setup_with(flags);
}

static void teardown(void)
{
        wire_services_stop();
}

static void on_created(sh_sandbox *sb, const sh_error *err, void *data)
{
        (void)sb;
        ck_assert_msg(!err, "the create failed: %s", err && err->msg ? err->msg : "");
        *(bool *)data = true;
}

/* A create expected to fail: its message. */
typedef struct failed {
        bool done;
        char msg[512];
} failed;

static void on_failed(sh_sandbox *sb, const sh_error *err, void *data)
{
        failed *f = data;

        (void)sb;
        ck_assert_msg(err != NULL, "the create succeeded");
        snprintf(f->msg, sizeof(f->msg), "%s", err->msg ? err->msg : "");
        f->done = true;
}

/* Linux 6.8 has fsconfig's lowerdir+ (a layer a call). */
static bool has_lowerdir_plus(void)
{
        struct utsname u;
        int major = 0, minor = 0;

        ck_assert_int_eq(uname(&u), 0);
        ck_assert_int_eq(sscanf(u.release, "%d.%d", &major, &minor), 2);
        return major > 6 || (major == 6 && minor >= 8);
}

static bool is_set(void *data)
{
        return *(bool *)data;
}

/* A sandbox on the layers lowers[0..n) (lowest first), ready (a reference); with f, a create
 * that fails (NULL). */
static sh_sandbox *create_on_or_fail(char **lowers, size_t n, failed *f)
{
        char *env[] = {"PATH=/bin", "IMG=image", "HOME=/scratch"};
        sh_root_layers l = {.dir = layers,
                            .lowers = lowers,
                            .n_lowers = n,
                            .env = env,
                            .n_env = 3,
                            .workdir = "/opq",
                            .pin = &unpins,
                            .unpin = unpin};
        sh_sandbox *sb = NULL;
        sh_error *err = NULL;
        bool done = false;

        if (sh_manager_create(mgr, &(sh_create_opts){.root_layers = &l}, f ? on_failed : on_created,
                              f ? (void *)f : &done, &sb, &err) < 0)
                ck_abort_msg("sh_manager_create: %s", err && err->msg ? err->msg : "?");
        wire_loop_until(is_set, f ? &f->done : &done, WAIT_MS, "the create");
        if (f) {
                sh_sandbox_unref(sb);
                return NULL;
        }
        return sb;
}

static sh_sandbox *create_on(char **lowers, size_t n)
{
        return create_on_or_fail(lowers, n, NULL);
}

static sh_sandbox *create_two(void)
{
        static char *lowers[N_LOWERS] = {"l0/root", "l1/root"};

        return create_on(lowers, N_LOWERS);
}

/* Run script with /bin/sh in sb (output merged): its exit code, its output in s. */
static int run(sh_sandbox *sb, wire_seen *s, const char *script)
{
        wire_exec_sh(sb, s, script, NULL, &(sh_exec_opts){.merge_output = true});
        wire_loop_until(wire_exec_ended, s, WAIT_MS, script);
        return s->code;
}

static void expect(sh_sandbox *sb, const char *script, int code, const char *out)
{
        wire_seen s;

        ck_assert_msg(run(sb, &s, script) == code, "'%s' exited %d, want %d: %s", script, s.code,
                      code, s.out);
        if (out)
                ck_assert_msg(strcmp(s.out, out) == 0, "'%s' said '%s', want '%s'", script, s.out,
                              out);
}

/* The sandbox's directory below the state root (a link's target: .sandboxes/N). */
static void sandbox_dir(sh_sandbox *sb, char *out, size_t size)
{
        char link[PATH_MAX], target[PATH_MAX];
        ssize_t n;

        snprintf(link, sizeof(link), "%s/%s", wire_root(), sh_sandbox_id(sb));
        n = readlink(link, target, sizeof(target) - 1);
        ck_assert_int_gt(n, 0);
        target[n] = '\0';
        snprintf(out, size, "%s", target[0] == '/' ? target : ut_path(wire_root(), "%s", target));
}

static bool gone(void *data)
{
        return access((const char *)data, F_OK) < 0 && errno == ENOENT;
}

/* Delete sb (the caller's reference dropped): its directory, upper included, goes. */
static void delete_and_wait(sh_sandbox *sb)
{
        char dir[PATH_MAX];
        sh_error *err = NULL;

        sandbox_dir(sb, dir, sizeof(dir));
        ck_assert_int_eq(sh_manager_delete(mgr, sb, &err), 0);
        sh_sandbox_unref(sb);
        wire_loop_until(gone, dir, WAIT_MS, "the sandbox's directory's removal");
}

START_TEST(the_root_shows_the_layers_merged_and_whiteouts_hide)
{
        sh_sandbox *sb = create_two();

        expect(sb, "cat /usr/share/a /usr/share/b /etc/keep", 0, "lower-a\nupper-b\nkeep\n");
        expect(sb, "test -e /etc/gone || echo hidden", 0, "hidden\n");
        expect(sb, "ls /opq", 0, "new\n");
        /* the sandbox's own mounts on top, as on a host image */
        expect(sb,
               "test -d /workspace && test -d /tmp && test -d /proc/self && test -c "
               "/dev/null && test -d /var/tmp && echo ok",
               0, "ok\n");
        sh_sandbox_unref(sb);
}
END_TEST

START_TEST(a_layers_redirect_and_metacopy_xattrs_are_not_followed)
{
        sh_sandbox *sb = create_two();
        wire_seen s;

        /* followed, /redir would list /usr's "share" and /mc print "lower-a"; refused (EPERM),
         * or shown as the layer has them, they do neither */
        run(sb, &s, "ls /redir");
        ck_assert_msg(!strstr(s.out, "share"), "%s", s.out);
        run(sb, &s, "cat /mc");
        ck_assert_msg(!strstr(s.out, "lower-a"), "%s", s.out);
        sh_sandbox_unref(sb);
}
END_TEST

START_TEST(the_sandbox_uid_writes_where_the_image_lets_it_never_where_root_owns)
{
        sh_sandbox *sb = create_two();
        wire_seen s;

        ck_assert_int_ne(run(sb, &s, "echo x > /usr/x"), 0);
        ck_assert_msg(strstr(s.out, "Permission denied"), "%s", s.out);
        ck_assert_int_ne(run(sb, &s, "echo x > /newfile"), 0);
        expect(sb, "stat -c %u /usr/share/a", 0, "0\n");
        expect(sb, "test $(id -u) != 0 && echo mine > /scratch/f && cat /scratch/f", 0, "mine\n");
        expect(sb, "echo w > /tmp/w && echo w > /workspace/w && cat /tmp/w /workspace/w", 0,
               "w\nw\n");
        /* the layers on the host are as they were */
        ck_assert_int_eq(access(ut_path(layers, "l0/root/scratch/f"), F_OK), -1);
        ck_assert_int_eq(access(ut_path(layers, "l0/root/usr/x"), F_OK), -1);
        sh_sandbox_unref(sb);
}
END_TEST

START_TEST(two_sandboxes_of_one_image_do_not_see_each_others_writes)
{
        sh_sandbox *a = create_two(), *b = create_two();
        struct stat st;

        expect(a, "echo a > /scratch/a && echo a > /scratch/shared && echo done", 0, "done\n");
        expect(b, "test -e /scratch/a || cat /scratch/shared", 0, "image\n");
        expect(a, "cat /scratch/a /scratch/shared", 0, "a\na\n");
        /* the lower is untouched: a's change is a copy in a's upper */
        ck_assert_int_eq(stat(ut_path(layers, "l0/root/scratch/shared"), &st), 0);
        ck_assert_int_eq(st.st_size, 6);
        sh_sandbox_unref(a);
        sh_sandbox_unref(b);
}
END_TEST

START_TEST(the_images_env_is_the_base_and_its_workdir_is_kept)
{
        sh_sandbox *sb = create_two();
        cJSON *env = cJSON_CreateObject();
        wire_seen s;

        expect(sb, "echo $IMG $HOME $PATH", 0, "image /scratch /bin\n");
        ck_assert_str_eq(sh_sandbox_workdir(sb), "/opq");
        /* a command's env above the image's */
        cJSON_AddStringToObject(env, "IMG", "command");
        wire_exec_sh(sb, &s, "echo $IMG $HOME $PATH", env, &(sh_exec_opts){0});
        wire_loop_until(wire_exec_ended, &s, WAIT_MS, "the exec");
        ck_assert_str_eq(s.out, "command /scratch /bin\n");
        cJSON_Delete(env);
        sh_sandbox_unref(sb);
}
END_TEST

START_TEST(the_pin_is_held_for_the_sandboxs_life)
{
        sh_sandbox *sb = create_two();

        ck_assert_int_eq(unpins, 0);
        delete_and_wait(sb);
        ck_assert_int_eq(unpins, 1);
}
END_TEST

START_TEST(a_plan_with_a_lower_outside_the_layers_is_refused_and_unpinned)
{
        char *bad[] = {"l0/root", "../l1/root"}, *env[] = {"NOEQUALS"};
        sh_root_layers l = {
                .dir = layers, .lowers = bad, .n_lowers = 2, .pin = &unpins, .unpin = unpin};
        sh_sandbox *sb = NULL;
        sh_error *err = NULL;
        bool done = false;

        ck_assert_int_eq(sh_manager_create(mgr, &(sh_create_opts){.root_layers = &l}, on_created,
                                           &done, &sb, &err),
                         -1);
        ck_assert_int_eq(err->kind, SH_E_INVALID);
        sh_error_release(&err);
        ck_assert_int_eq(unpins, 1);
        bad[1] = "l1/root";
        l.env = env;
        l.n_env = 1;
        ck_assert_int_eq(sh_manager_create(mgr, &(sh_create_opts){.root_layers = &l}, on_created,
                                           &done, &sb, &err),
                         -1);
        ck_assert_int_eq(err->kind, SH_E_INVALID);
        sh_error_release(&err);
        ck_assert_int_eq(unpins, 2);
        ck_assert_int_eq(sh_manager_count(mgr), 0);
}
END_TEST

START_TEST(more_layers_than_a_page_of_mount_options_holds_are_mounted)
{
        static char *lowers[MANY + 1], names[MANY][16];

        lowers[0] = "l0/root";
        for (int i = 0; i < MANY; i++) {
                char d[PATH_MAX];

                /* "<64 chars>/root", as long as the store's "<64 hex>/root" */
                snprintf(names[i], sizeof(names[i]), "m%03d", i);
                snprintf(d, sizeof(d), "%s", ut_path(layers, "%s%060d", names[i], 0));
                mk(d, 0755);
                mk(ut_path(d, "root"), 0755);
                ut_write_file(ut_path(d, "root/f%03d", i), "x");
                lowers[i + 1] =
                        strdup(ut_path(layers, "%s%060d/root", names[i], 0) + strlen(layers) + 1);
        }
        if (has_lowerdir_plus()) {
                sh_sandbox *sb = create_on(lowers, MANY + 1);

                expect(sb, "cat /f000 /f099 && test -x /bin/sh && echo", 0, "xx\n");
                sh_sandbox_unref(sb);
        } else {
                /* Before 6.8 such a list fits no mount: the create says so. */
                failed f = {0};

                create_on_or_fail(lowers, MANY + 1, &f);
                ck_assert_msg(strstr(f.msg, "mount the image's layers") &&
                                      strstr(f.msg, strerror(E2BIG)),
                              "%s", f.msg);
        }
        for (int i = 1; i <= MANY; i++)
                free(lowers[i]);
}
END_TEST

/* ---- the disk limit holds the upper ------------------------------------------------------ */

/* upper: where the disk limit keeps it, below the sandbox's directory */
static void fills_at_the_limit_and_goes_with_the_sandbox(const char *upper)
{
        sh_sandbox *sb = create_two();
        char dir[PATH_MAX];
        wire_seen s;

        sandbox_dir(sb, dir, sizeof(dir));
        ck_assert_int_eq(access(ut_path(dir, "%s", upper), F_OK), 0);
        ck_assert_int_ne(run(sb, &s, "dd if=/dev/zero of=/scratch/big bs=1M count=64 2>&1"), 0);
        ck_assert_msg(strstr(s.out, "No space left") || strstr(s.out, "quota exceeded"), "%s",
                      s.out);
        /* what the root holds is the workspace's room too: nothing left for it */
        ck_assert_int_ne(run(sb, &s, "dd if=/dev/zero of=/workspace/w bs=1M count=1 2>&1"), 0);
        expect(sb, "rm /scratch/big && echo ok > /workspace/w && cat /workspace/w", 0, "ok\n");
        delete_and_wait(sb);
}

START_TEST(tmpfs_the_upper_counts_against_the_disk_limit_and_goes_with_the_sandbox)
{
        fills_at_the_limit_and_goes_with_the_sandbox("disk/root/upper");
}
END_TEST

START_TEST(loop_the_upper_counts_against_the_disk_limit_and_goes_with_the_sandbox)
{
        fills_at_the_limit_and_goes_with_the_sandbox("disk/root/upper");
}
END_TEST

START_TEST(project_the_upper_counts_against_the_disk_limit_and_goes_with_the_sandbox)
{
        fills_at_the_limit_and_goes_with_the_sandbox("root/upper");
}
END_TEST

START_TEST(no_limit_the_upper_goes_with_the_sandbox)
{
        sh_sandbox *sb = create_two();
        char dir[PATH_MAX];

        sandbox_dir(sb, dir, sizeof(dir));
        expect(sb, "echo a > /scratch/a && echo ok", 0, "ok\n");
        ck_assert_int_eq(access(ut_path(dir, "root/upper/scratch/a"), F_OK), 0);
        delete_and_wait(sb);
}
END_TEST

static Suite *overlay_suite(void)
{
        Suite *s = suite_create("overlay_root");
        TCase *tc;

        if (getenv("SH_TEST_PROJECT_QUOTA")) {
                tc = tcase_create("project");
                tcase_set_timeout(tc, 120);
                tcase_add_checked_fixture(tc, setup_project, teardown);
                tcase_add_test(
                        tc,
                        project_the_upper_counts_against_the_disk_limit_and_goes_with_the_sandbox);
                suite_add_tcase(s, tc);
                return s;
        }
        tc = tcase_create("root");

        tcase_set_timeout(tc, 120);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, the_root_shows_the_layers_merged_and_whiteouts_hide);
        tcase_add_test(tc, a_layers_redirect_and_metacopy_xattrs_are_not_followed);
        tcase_add_test(tc, the_sandbox_uid_writes_where_the_image_lets_it_never_where_root_owns);
        tcase_add_test(tc, two_sandboxes_of_one_image_do_not_see_each_others_writes);
        tcase_add_test(tc, the_images_env_is_the_base_and_its_workdir_is_kept);
        tcase_add_test(tc, the_pin_is_held_for_the_sandboxs_life);
        tcase_add_test(tc, a_plan_with_a_lower_outside_the_layers_is_refused_and_unpinned);
        tcase_add_test(tc, more_layers_than_a_page_of_mount_options_holds_are_mounted);
        tcase_add_test(tc, no_limit_the_upper_goes_with_the_sandbox);
        suite_add_tcase(s, tc);

        tc = tcase_create("tmpfs");
        tcase_set_timeout(tc, 120);
        tcase_add_checked_fixture(tc, setup_tmpfs, teardown);
        tcase_add_test(tc, tmpfs_the_upper_counts_against_the_disk_limit_and_goes_with_the_sandbox);
        suite_add_tcase(s, tc);

        tc = tcase_create("loop");
        tcase_set_timeout(tc, 120);
        tcase_add_checked_fixture(tc, setup_loop, teardown);
        tcase_add_test(tc, loop_the_upper_counts_against_the_disk_limit_and_goes_with_the_sandbox);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        int k = ut_need_root("sandboxes need root (their cgroups, namespaces and mounts)");

        return k ? k : wire_main(overlay_suite());
}
