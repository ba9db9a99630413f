/* test_layer_unpack.c: the image layer unpacker (src/images/unpack.c, unpack-child.c) live, on
 * layers the test writes with libarchive: plain, gzip and zstd; owners, modes, setuid and
 * mtimes kept; whiteouts and opaque directories in overlayfs' form; hard links; and each
 * attack refused with the entry named, nothing written outside the destination: "../" and
 * absolute paths, a file through a symbolic link, a hard link outside, a device node, a FIFO,
 * a decompression bomb, too many entries, and an image whose files a host program would load
 * (gconv, ld.so.preload) unpacked as plain data and never loaded. Needs root, else exits 77. */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../../src/images/unpack.h"
#include "sh/cgroup.h"
#include "sh/config.h"
#include "sh/loop.h"
#include "sh/spawn.h"
#include "unit.h"

#define UID_BASE 200000u /* the unpacker runs as 199999 */

typedef struct world {
        char root[96];
        sh_loop *loop;
        sh_cgroup_root *cgroot;
        sh_cgroup *images;
        sh_layer_unpacker *u;
} world;

typedef struct outcome {
        bool done;
        sh_error_kind kind;
        char reason[512];
        sh_layer_unpack_result res;
        unsigned reports;
} outcome;

static world W;
static char instance[32];
static char base[80];

static void world_up(void)
{
        sh_error *err = NULL;
        sh_config cfg = {.uid_base = UID_BASE};

        snprintf(W.root, sizeof(W.root), "%s/root-XXXXXX", base);
        ck_assert_ptr_nonnull(mkdtemp(W.root));
        ck_assert_int_eq(sh_loop_new(&W.loop), 0);
        if (sh_cgroup_root_open(instance, &W.cgroot, &err) < 0)
                ck_abort_msg("cgroup root: %s", err->msg);
        if (sh_cgroup_create(W.cgroot, NULL, "images", NULL, &W.images, &err) < 0)
                ck_abort_msg("cgroup: %s", err->msg);
        if (sh_layer_unpacker_new(W.loop, &cfg, W.images, &W.u, &err) < 0)
                ck_abort_msg("unpacker: %s", err->msg);
}

static void world_down(void)
{
        sh_error *err = NULL;

        sh_layer_unpacker_free(W.u);
        sh_child_wait_all(W.loop);
        sh_cgroup_free(W.images);
        if (sh_cgroup_root_destroy(W.cgroot, &err) < 0)
                fprintf(stderr, "cgroup cleanup: %s\n", err->msg);
        sh_error_release(&err);
        sh_cgroup_root_free(W.cgroot);
        sh_loop_free(W.loop);
        if (ut_rm_rf(W.root) < 0)
                fprintf(stderr, "left behind: %s\n", W.root);
}

/* ---- layers written by the test ------------------------------------------------------ */

typedef struct layer {
        struct archive *a;
        int fd;
} layer;

static void layer_begin(layer *l, sh_layer_compression c)
{
        l->fd = open(W.root, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        ck_assert_int_ge(l->fd, 0);
        l->a = archive_write_new();
        ck_assert_int_eq(archive_write_set_format_pax_restricted(l->a), ARCHIVE_OK);
        if (c == SH_LAYER_GZIP)
                ck_assert_int_eq(archive_write_add_filter_gzip(l->a), ARCHIVE_OK);
        else if (c == SH_LAYER_ZSTD)
                ck_assert_int_eq(archive_write_add_filter_zstd(l->a), ARCHIVE_OK);
        ck_assert_int_eq(archive_write_open_fd(l->a, l->fd), ARCHIVE_OK);
}

static void add(layer *l, const char *path, mode_t type, mode_t perm, int64_t uid, int64_t gid,
                const char *data, const char *link, const char *hardlink)
{
        struct archive_entry *e = archive_entry_new();
        size_t n = data ? strlen(data) : 0;

        archive_entry_set_pathname(e, path);
        archive_entry_set_filetype(e, type);
        archive_entry_set_perm(e, perm);
        archive_entry_set_uid(e, uid);
        archive_entry_set_gid(e, gid);
        archive_entry_set_mtime(e, 1234567890, 0);
        if (link)
                archive_entry_set_symlink(e, link);
        if (hardlink)
                archive_entry_set_hardlink(e, hardlink);
        archive_entry_set_size(e, type == AE_IFREG && !hardlink ? (la_int64_t)n : 0);
        ck_assert_int_eq(archive_write_header(l->a, e), ARCHIVE_OK);
        if (n && !hardlink)
                ck_assert_int_eq(archive_write_data(l->a, data, n), (la_ssize_t)n);
        archive_entry_free(e);
}

static void file(layer *l, const char *path, const char *data)
{
        add(l, path, AE_IFREG, 0644, 0, 0, data, NULL, NULL);
}

static void dir(layer *l, const char *path)
{
        add(l, path, AE_IFDIR, 0755, 0, 0, NULL, NULL, NULL);
}

static int layer_end(layer *l)
{
        ck_assert_int_eq(archive_write_close(l->a), ARCHIVE_OK);
        archive_write_free(l->a);
        return l->fd;
}

/* ---- running an unpack ---------------------------------------------------------------- */

static void on_done(const sh_error *err, const sh_layer_unpack_result *res, void *data)
{
        outcome *o = data;

        o->done = true;
        o->reports++;
        o->kind = err ? err->kind : SH_E_KIND_COUNT;
        snprintf(o->reason, sizeof(o->reason), "%s", err && err->msg ? err->msg : "");
        if (res)
                o->res = *res;
}

static void tick(sh_loop *l, sh_timer *t, void *data)
{
        outcome *o = data;

        if (o->done)
                sh_loop_stop(l);
        else
                ck_assert_ptr_nonnull(sh_loop_add_timer(l, 5, tick, o));
}

static char dest[160];

/* Unpack the blob into a fresh W.root/tmp/d; returns the outcome (ok: kind SH_E_KIND_COUNT). */
static outcome unpack(int blob, sh_layer_compression c, uint64_t max_bytes, uint64_t max_entries)
{
        outcome o = {0};
        sh_error *err = NULL;
        sh_layer_unpack *x;
        char tmp[128];
        int dfd;

        snprintf(tmp, sizeof(tmp), "%s/tmp", W.root);
        ck_assert_int_eq(mkdir(tmp, 0700), 0);
        snprintf(dest, sizeof(dest), "%s/d", tmp);
        ck_assert_int_eq(mkdir(dest, 0755), 0);
        dfd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dfd, 0);
        x = sh_layer_unpack_start(W.u, blob, c, dfd, max_bytes, max_entries, on_done, &o, &err);
        if (!x)
                ck_abort_msg("start: %s", err->msg);
        close(dfd);
        close(blob);
        ck_assert(!o.done); /* never before start returns */
        ck_assert_ptr_nonnull(sh_loop_add_timer(W.loop, 5, tick, &o));
        ck_assert_int_eq(sh_loop_run(W.loop), 0);
        ck_assert_uint_eq(o.reports, 1);
        return o;
}

static const char *at(const char *rel)
{
        static char p[4][512];
        static int i;

        i = (i + 1) % 4;
        snprintf(p[i], sizeof(p[i]), "%s/%s", dest, rel);
        return p[i];
}

static void assert_ok(const outcome *o)
{
        ck_assert_msg(o->kind == SH_E_KIND_COUNT, "refused: %s", o->reason);
}

static void assert_refused(const outcome *o, const char *entry)
{
        ck_assert_msg(o->kind == SH_E_INVALID, "kind %d: %s", o->kind, o->reason);
        ck_assert_msg(strstr(o->reason, "layer refused") && strstr(o->reason, entry),
                      "reason '%s' does not name '%s'", o->reason, entry);
}

static int count_entries(const char *path)
{
        DIR *d = opendir(path);
        struct dirent *de;
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        closedir(d);
        return n;
}

/* Nothing but the destination in its parent, and nothing below the destination the layer
 * could have escaped to (the test's own root holds only tmp/). */
static void assert_nothing_outside(void)
{
        char tmp[128];
        struct stat st;

        snprintf(tmp, sizeof(tmp), "%s/tmp", W.root);
        ck_assert_int_eq(count_entries(tmp), 1);
        ck_assert_int_eq(count_entries(W.root), 1);
        ck_assert_int_ne(lstat("/escaped", &st), 0);
}

static void read_into(const char *path, char *buf, size_t n)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t r;

        ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
        r = read(fd, buf, n - 1);
        ck_assert_int_ge(r, 0);
        buf[r] = '\0';
        close(fd);
}

/* ---- an ordinary layer --------------------------------------------------------------- */

static int ordinary(sh_layer_compression c)
{
        layer l;

        layer_begin(&l, c);
        dir(&l, "./");
        dir(&l, "./usr/");
        dir(&l, "./usr/bin/");
        add(&l, "./usr/bin/su", AE_IFREG, 04755, 0, 0, "#!/bin/true\n", NULL, NULL);
        add(&l, "./usr/bin/wall", AE_IFREG, 02755, 0, 5, "wall", NULL, NULL);
        dir(&l, "./home/");
        add(&l, "./home/app/", AE_IFDIR, 0700, 1000, 1000, NULL, NULL, NULL);
        add(&l, "./home/app/notes", AE_IFREG, 0600, 1000, 1001, "mine", NULL, NULL);
        add(&l, "./tmp/", AE_IFDIR, 01777, 0, 0, NULL, NULL, NULL);
        add(&l, "./bin", AE_IFLNK, 0777, 0, 0, NULL, "usr/bin", NULL);
        add(&l, "./etc/mtab", AE_IFLNK, 0777, 0, 0, NULL, "/proc/self/mounts", NULL);
        add(&l, "./usr/bin/su2", AE_IFREG, 04755, 0, 0, NULL, NULL, "./usr/bin/su");
        return layer_end(&l);
}

static void assert_ordinary(const outcome *o)
{
        struct stat st;
        char buf[64];

        assert_ok(o);
        ck_assert_int_eq(lstat(dest, &st), 0);
        ck_assert_uint_eq(st.st_uid, 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0755);
        ck_assert_int_eq(lstat(at("usr/bin/su"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 04755);
        ck_assert_uint_eq(st.st_uid, 0);
        ck_assert_int_eq(st.st_mtime, 1234567890);
        ck_assert_uint_eq(st.st_nlink, 2); /* su2 */
        ck_assert_int_eq(lstat(at("usr/bin/wall"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 02755);
        ck_assert_uint_eq(st.st_gid, 5);
        ck_assert_int_eq(lstat(at("home/app"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0700);
        ck_assert_uint_eq(st.st_uid, 1000);
        ck_assert_int_eq(lstat(at("home/app/notes"), &st), 0);
        ck_assert_uint_eq(st.st_uid, 1000);
        ck_assert_uint_eq(st.st_gid, 1001);
        ck_assert_uint_eq(st.st_mode & 07777, 0600);
        read_into(at("home/app/notes"), buf, sizeof(buf));
        ck_assert_str_eq(buf, "mine");
        ck_assert_int_eq(lstat(at("tmp"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 01777);
        ck_assert_int_eq((int)readlink(at("etc/mtab"), buf, sizeof(buf)), 17);
        ck_assert_int_eq(lstat(at("etc/mtab"), &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        ck_assert_uint_eq(st.st_uid, 0);
        /* the implicit etc/ was made and handed to root too */
        ck_assert_int_eq(lstat(at("etc"), &st), 0);
        ck_assert_uint_eq(st.st_uid, 0);
        ck_assert_uint_eq(o->res.bytes, 12 + 4 + 4 + 12);
        ck_assert_uint_ge(o->res.entries, 11);
}

START_TEST(a_plain_layer_keeps_owners_modes_setuid_links_and_mtimes)
{
        outcome o = unpack(ordinary(SH_LAYER_PLAIN), SH_LAYER_PLAIN, 1 << 20, 1000);

        assert_ordinary(&o);
}
END_TEST

START_TEST(a_gzip_layer_unpacks)
{
        outcome o = unpack(ordinary(SH_LAYER_GZIP), SH_LAYER_GZIP, 1 << 20, 1000);

        assert_ordinary(&o);
}
END_TEST

START_TEST(a_zstd_layer_unpacks)
{
        outcome o = unpack(ordinary(SH_LAYER_ZSTD), SH_LAYER_ZSTD, 1 << 20, 1000);

        assert_ordinary(&o);
}
END_TEST

START_TEST(a_layer_not_compressed_as_its_media_type_says_is_refused)
{
        outcome o = unpack(ordinary(SH_LAYER_PLAIN), SH_LAYER_GZIP, 1 << 20, 1000);

        ck_assert_int_eq(o.kind, SH_E_INVALID);
        ck_assert_msg(strstr(o.reason, "not a gzip-compressed tar"), "%s", o.reason);
}
END_TEST

START_TEST(whiteouts_and_opaque_directories_take_overlayfs_form)
{
        layer l;
        outcome o;
        struct stat st;
        char v[8] = "";

        layer_begin(&l, SH_LAYER_GZIP);
        dir(&l, "etc/");
        file(&l, "etc/.wh.motd", "");
        file(&l, "opt/deep/.wh.gone", ""); /* its parents only implied */
        dir(&l, "var/");
        dir(&l, "var/cache/");
        file(&l, "var/cache/.wh..wh..opq", "");
        file(&l, "var/cache/kept", "k");
        o = unpack(layer_end(&l), SH_LAYER_GZIP, 1 << 20, 1000);
        assert_ok(&o);
        ck_assert_int_eq(lstat(at("etc/motd"), &st), 0);
        ck_assert(S_ISCHR(st.st_mode));
        ck_assert_uint_eq(st.st_rdev, makedev(0, 0));
        ck_assert_uint_eq(st.st_uid, 0);
        ck_assert_int_ne(lstat(at("etc/.wh.motd"), &st), 0);
        ck_assert_int_eq(lstat(at("opt/deep/gone"), &st), 0);
        ck_assert(S_ISCHR(st.st_mode));
        ck_assert_int_eq(lgetxattr(at("var/cache"), "trusted.overlay.opaque", v, sizeof(v)), 1);
        ck_assert_int_eq(v[0], 'y');
        ck_assert_int_ne(lstat(at("var/cache/.wh..wh..opq"), &st), 0);
        ck_assert_int_eq(lstat(at("var/cache/kept"), &st), 0);
}
END_TEST

START_TEST(hard_links_within_the_layer_share_the_file)
{
        layer l;
        outcome o;
        struct stat a, b;

        layer_begin(&l, SH_LAYER_PLAIN);
        add(&l, "a", AE_IFREG, 0640, 7, 8, "data", NULL, NULL);
        add(&l, "sub/b", AE_IFREG, 0640, 7, 8, NULL, NULL, "a");
        o = unpack(layer_end(&l), SH_LAYER_PLAIN, 1 << 20, 1000);
        assert_ok(&o);
        ck_assert_int_eq(lstat(at("a"), &a), 0);
        ck_assert_int_eq(lstat(at("sub/b"), &b), 0);
        ck_assert_uint_eq(a.st_ino, b.st_ino);
        ck_assert_uint_eq(a.st_uid, 7);
        ck_assert_uint_eq(a.st_mode & 07777, 0640);
}
END_TEST

/* ---- attacks ------------------------------------------------------------------------- */

START_TEST(a_dotdot_path_is_refused_and_named)
{
        layer l;
        outcome o;

        layer_begin(&l, SH_LAYER_PLAIN);
        file(&l, "ok", "x");
        file(&l, "a/../../escaped", "x");
        o = unpack(layer_end(&l), SH_LAYER_PLAIN, 1 << 20, 1000);
        assert_refused(&o, "a/../../escaped");
        assert_nothing_outside();
}
END_TEST

START_TEST(an_absolute_path_is_refused_and_named)
{
        layer l;
        outcome o;

        layer_begin(&l, SH_LAYER_PLAIN);
        file(&l, "/escaped", "x");
        o = unpack(layer_end(&l), SH_LAYER_PLAIN, 1 << 20, 1000);
        assert_refused(&o, "/escaped");
        assert_nothing_outside();
}
END_TEST

START_TEST(a_file_through_a_symbolic_link_is_refused)
{
        layer l;
        outcome o;
        char out[160];

        snprintf(out, sizeof(out), "%s", W.root);
        layer_begin(&l, SH_LAYER_PLAIN);
        add(&l, "lib", AE_IFLNK, 0777, 0, 0, NULL, out, NULL);
        file(&l, "lib/evil", "x");
        o = unpack(layer_end(&l), SH_LAYER_PLAIN, 1 << 20, 1000);
        assert_refused(&o, "lib/evil");
        assert_nothing_outside();
}
END_TEST

START_TEST(a_whiteout_through_a_symbolic_link_is_refused)
{
        layer l;
        outcome o;

        layer_begin(&l, SH_LAYER_PLAIN);
        add(&l, "lib", AE_IFLNK, 0777, 0, 0, NULL, "..", NULL);
        file(&l, "lib/.wh.tmp", "");
        o = unpack(layer_end(&l), SH_LAYER_PLAIN, 1 << 20, 1000);
        assert_refused(&o, "lib/.wh.tmp");
        assert_nothing_outside();
}
END_TEST

START_TEST(a_hard_link_outside_the_layer_is_refused)
{
        layer l;
        outcome o;

        layer_begin(&l, SH_LAYER_PLAIN);
        add(&l, "shadow", AE_IFREG, 0644, 0, 0, NULL, NULL, "/etc/shadow");
        o = unpack(layer_end(&l), SH_LAYER_PLAIN, 1 << 20, 1000);
        assert_refused(&o, "shadow");
        assert_nothing_outside();
}
END_TEST

START_TEST(a_hard_link_forward_is_refused)
{
        layer l;
        outcome o;

        layer_begin(&l, SH_LAYER_PLAIN);
        add(&l, "first", AE_IFREG, 0644, 0, 0, NULL, NULL, "later");
        file(&l, "later", "x");
        o = unpack(layer_end(&l), SH_LAYER_PLAIN, 1 << 20, 1000);
        assert_refused(&o, "first");
}
END_TEST

START_TEST(a_device_node_is_refused)
{
        layer l;
        outcome o;
        struct archive_entry *e = archive_entry_new();

        layer_begin(&l, SH_LAYER_PLAIN);
        archive_entry_set_pathname(e, "dev/sda");
        archive_entry_set_filetype(e, AE_IFBLK);
        archive_entry_set_perm(e, 0666);
        archive_entry_set_rdev(e, makedev(8, 0));
        ck_assert_int_eq(archive_write_header(l.a, e), ARCHIVE_OK);
        archive_entry_free(e);
        o = unpack(layer_end(&l), SH_LAYER_PLAIN, 1 << 20, 1000);
        assert_refused(&o, "dev/sda");
        ck_assert_int_ne(access(at("dev/sda"), F_OK), 0);
}
END_TEST

START_TEST(a_fifo_is_refused)
{
        layer l;
        outcome o;

        layer_begin(&l, SH_LAYER_PLAIN);
        add(&l, "pipe", AE_IFIFO, 0666, 0, 0, NULL, NULL, NULL);
        o = unpack(layer_end(&l), SH_LAYER_PLAIN, 1 << 20, 1000);
        assert_refused(&o, "pipe");
        ck_assert_int_ne(access(at("pipe"), F_OK), 0);
}
END_TEST

/* A hand-made ustar header: a file claiming `size` bytes. */
static void ustar_header(char h[512], const char *name, unsigned long long size /* < 8 GiB */)
{
        unsigned sum = 0;

        memset(h, 0, 512);
        snprintf(h, 100, "%s", name);
        snprintf(h + 100, 8, "%07o", 0644);
        snprintf(h + 108, 8, "%07o", 0);
        snprintf(h + 116, 8, "%07o", 0);
        snprintf(h + 124, 12, "%011llo", size & 077777777777ull);
        snprintf(h + 136, 12, "%011o", 0);
        h[156] = '0';
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        memset(h + 148, ' ', 8);
        for (int i = 0; i < 512; i++)
                sum += (unsigned char)h[i];
        snprintf(h + 148, 8, "%06o", sum);
}

START_TEST(a_decompression_bomb_is_refused_at_the_bound)
{
        /* A gzip stream of a tar whose one file claims 8 GiB of zeros: the first 64 MiB of
         * them compress to almost nothing. */
        struct archive *a = archive_write_new();
        struct archive_entry *e = archive_entry_new();
        static char zeros[1 << 20];
        char h[512];
        outcome o;
        struct stat st;
        int fd = open(W.root, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(archive_write_set_format_raw(a), ARCHIVE_OK);
        ck_assert_int_eq(archive_write_add_filter_gzip(a), ARCHIVE_OK);
        ck_assert_int_eq(archive_write_open_fd(a, fd), ARCHIVE_OK);
        archive_entry_set_pathname(e, "raw");
        archive_entry_set_filetype(e, AE_IFREG);
        ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
        ustar_header(h, "zeros", 077777777777ull); /* 8 GiB - 1: the most ustar says */
        ck_assert_int_eq(archive_write_data(a, h, sizeof(h)), (la_ssize_t)sizeof(h));
        for (int i = 0; i < 64; i++)
                ck_assert_int_eq(archive_write_data(a, zeros, sizeof(zeros)),
                                 (la_ssize_t)sizeof(zeros));
        archive_entry_free(e);
        ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert_int_lt(st.st_size, 1 << 20); /* small */
        o = unpack(fd, SH_LAYER_GZIP, 16 << 20, 1000);
        assert_refused(&o, "zeros");
        ck_assert_msg(strstr(o.reason, "more than 16777216 bytes"), "%s", o.reason);
        ck_assert_int_ne(access(at("zeros"), F_OK), 0);
        assert_nothing_outside();
}
END_TEST

START_TEST(a_layer_past_max_entries_is_refused_at_the_bound)
{
        layer l;
        outcome o;
        char name[32];

        layer_begin(&l, SH_LAYER_GZIP);
        for (int i = 0; i < 100000; i++) {
                snprintf(name, sizeof(name), "f%d", i);
                add(&l, name, AE_IFREG, 0644, 0, 0, NULL, NULL, NULL);
        }
        o = unpack(layer_end(&l), SH_LAYER_GZIP, 1 << 20, 5000);
        assert_refused(&o, "more than 5000 entries (at 'f5000')");
        ck_assert_int_le(count_entries(dest), 5000);
}
END_TEST

/* The gconv trick (issue 10): the image ships glibc's iconv configuration and a module at the
 * system path, and a non-ASCII name makes libarchive convert. Never loaded: the module's
 * constructor would leave a marker on the host. */
START_TEST(files_a_host_program_would_load_are_only_data)
{
        static const char modules[] = "alias UTF-8// PWN//\n"
                                      "alias ANSI_X3.4-1968// PWN//\n"
                                      "module PWN// INTERNAL pwn 1\n"
                                      "module INTERNAL PWN// pwn 1\n";
        char src[256], so[256], cmd[1024], marker[256], preload[300];
        static char blob[1 << 16];
        layer l;
        outcome o;
        FILE *f;
        size_t n;
        int fd;

        snprintf(marker, sizeof(marker), "%s/host-marker", base);
        snprintf(src, sizeof(src), "%s/pwn.c", W.root);
        snprintf(so, sizeof(so), "%s/pwn.so", W.root);
        f = fopen(src, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f,
                "#include <fcntl.h>\n#include <unistd.h>\n"
                "__attribute__((constructor)) static void pwn(void) {\n"
                "  close(open(\"%s\", O_WRONLY | O_CREAT, 0644));\n"
                "  close(open(\"/ctor-ran\", O_WRONLY | O_CREAT, 0644));\n"
                "  close(open(\"ctor-ran-cwd\", O_WRONLY | O_CREAT, 0644)); }\n"
                "int gconv_init(void *s) { return 1; }\n"
                "int gconv(void *a, void *b, void *c, void *d, void *e, int f) { return 1; }\n",
                marker);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "cc -shared -fPIC -o %s %s 2>/dev/null", so, src);
        if (system(cmd) != 0) {
                fprintf(stderr, "no C compiler: the module is a stand-in\n");
                ut_write_file(so, "\177ELF not really");
        }
        fd = open(so, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        n = (size_t)read(fd, blob, sizeof(blob) - 1);
        close(fd);
        ck_assert_uint_gt(n, 0);
        blob[n] = '\0'; /* the module's bytes are only compared by size below */
        snprintf(preload, sizeof(preload), "/usr/lib/x86_64-linux-gnu/gconv/pwn.so\n");

        layer_begin(&l, SH_LAYER_GZIP);
        file(&l, "usr/lib/x86_64-linux-gnu/gconv/gconv-modules", modules);
        {
                struct archive_entry *e = archive_entry_new();

                archive_entry_set_pathname(e, "usr/lib/x86_64-linux-gnu/gconv/pwn.so");
                archive_entry_set_filetype(e, AE_IFREG);
                archive_entry_set_perm(e, 0755);
                archive_entry_set_size(e, (la_int64_t)n);
                ck_assert_int_eq(archive_write_header(l.a, e), ARCHIVE_OK);
                ck_assert_int_eq(archive_write_data(l.a, blob, n), (la_ssize_t)n);
                archive_entry_free(e);
        }
        file(&l, "etc/ld.so.preload", preload);
        file(&l,
             "share/donn\xc3\xa9"
             "es-\xe2\x98\x83.txt",
             "unicode");
        o = unpack(layer_end(&l), SH_LAYER_GZIP, 16 << 20, 1000);
        assert_ok(&o);
        ck_assert_msg(access(marker, F_OK) != 0, "the image's module ran on the host");
        ck_assert_int_ne(access("/ctor-ran", F_OK), 0);
        ck_assert_int_ne(access(at("ctor-ran-cwd"), F_OK), 0);
        {
                struct stat st;

                ck_assert_int_eq(stat(at("usr/lib/x86_64-linux-gnu/gconv/pwn.so"), &st), 0);
                ck_assert_int_eq(st.st_size, (off_t)n);
        }
        read_into(at("etc/ld.so.preload"), cmd, sizeof(cmd));
        ck_assert_str_eq(cmd, preload);
        read_into(at("share/donn\xc3\xa9"
                     "es-\xe2\x98\x83.txt"),
                  cmd, sizeof(cmd));
        ck_assert_str_eq(cmd, "unicode");
        unlink(src);
        unlink(so);
}
END_TEST

/* ---- the queue ---------------------------------------------------------------------- */

static void stop_loop(sh_loop *l, sh_timer *t, void *data)
{
        sh_loop_stop(l);
}

START_TEST(a_cancelled_unpack_never_reports)
{
        outcome o = {0};
        sh_error *err = NULL;
        sh_layer_unpack *x;
        char tmp[128];
        int dfd;

        snprintf(tmp, sizeof(tmp), "%s/d", W.root);
        ck_assert_int_eq(mkdir(tmp, 0755), 0);
        dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        x = sh_layer_unpack_start(W.u, ordinary(SH_LAYER_PLAIN), SH_LAYER_PLAIN, dfd, 1 << 20, 1000,
                                  on_done, &o, &err);
        ck_assert_ptr_nonnull(x);
        close(dfd);
        sh_layer_unpack_cancel(x);
        ck_assert_ptr_nonnull(sh_loop_add_timer(W.loop, 300, stop_loop, NULL));
        ck_assert_int_eq(sh_loop_run(W.loop), 0);
        ck_assert(!o.done);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("layer_unpack");
        TCase *tc = tcase_create("layers");
        int failed = ut_need_root("the layer unpacker's confinement needs root");

        if (failed)
                return failed;
        /* the layers' non-ASCII names written as UTF-8, as an image builder does */
        if (!setlocale(LC_CTYPE, "C.UTF-8"))
                fprintf(stderr, "no C.UTF-8 locale\n");
        snprintf(instance, sizeof(instance), "layer-test-%d", (int)getpid());
        if (ut_mkdtemp(base, sizeof(base), "layer-unpack") < 0 || chmod(base, 0711) < 0) {
                perror("mkdtemp");
                return 1;
        }
        tcase_set_timeout(tc, 120);
        tcase_add_checked_fixture(tc, world_up, world_down);
        tcase_add_test(tc, a_plain_layer_keeps_owners_modes_setuid_links_and_mtimes);
        tcase_add_test(tc, a_gzip_layer_unpacks);
        tcase_add_test(tc, a_zstd_layer_unpacks);
        tcase_add_test(tc, a_layer_not_compressed_as_its_media_type_says_is_refused);
        tcase_add_test(tc, whiteouts_and_opaque_directories_take_overlayfs_form);
        tcase_add_test(tc, hard_links_within_the_layer_share_the_file);
        tcase_add_test(tc, a_dotdot_path_is_refused_and_named);
        tcase_add_test(tc, an_absolute_path_is_refused_and_named);
        tcase_add_test(tc, a_file_through_a_symbolic_link_is_refused);
        tcase_add_test(tc, a_whiteout_through_a_symbolic_link_is_refused);
        tcase_add_test(tc, a_hard_link_outside_the_layer_is_refused);
        tcase_add_test(tc, a_hard_link_forward_is_refused);
        tcase_add_test(tc, a_device_node_is_refused);
        tcase_add_test(tc, a_fifo_is_refused);
        tcase_add_test(tc, a_decompression_bomb_is_refused_at_the_bound);
        tcase_add_test(tc, a_layer_past_max_entries_is_refused_at_the_bound);
        tcase_add_test(tc, files_a_host_program_would_load_are_only_data);
        tcase_add_test(tc, a_cancelled_unpack_never_reports);
        suite_add_tcase(s, tc);
        failed = ut_run_forked(s) != EXIT_SUCCESS;
        {
                sh_cgroup_root *r = NULL;
                sh_error *err = NULL;

                if (sh_cgroup_root_open(instance, &r, &err) < 0 ||
                    sh_cgroup_root_destroy(r, &err) < 0) {
                        fprintf(stderr, "cleanup: %s\n", err && err->msg ? err->msg : "?");
                        failed++;
                }
                sh_error_release(&err);
                sh_cgroup_root_free(r);
                if (ut_rm_rf(base) < 0) {
                        fprintf(stderr, "left behind: %s\n", base);
                        failed++;
                }
        }
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
