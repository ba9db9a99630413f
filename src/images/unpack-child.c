/* unpack-child.c: the layer unpacker's children: the confined parser that writes the tree, and
 * the applier that gives it the image's owners, modes and opaque directories. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "layerpolicy.h"
#include "sh/caps.h"
#include "sh/jail.h"
#include "sh/macro.h"
#include "sh/tree.h"
#include "sh/unpacker.h"
#include "sh/util.h"
#include "unpack-internal.h"

/*
 * A layer is hostile data, like a tool bundle, and is parsed by the same confinement
 * (sh/unpacker.h; why each step is there: tools/unpack-child.c's header): its own PID,
 * mount, network, IPC and UTS namespaces, an empty read-only root holding only the
 * destination (at /out, noexec, nosuid, nodev), the blob and the record as fds, no file of
 * the host loaded after the root changed (glibc's locale and iconv set up from the host
 * first: a layer shipping usr/lib/x86_64-linux-gnu/gconv/ or etc/ld.so.preload is only
 * ever data), a seccomp allow-list with no executable mapping, rlimits (file size, CPU,
 * fds, no core) and its own cgroup below the daemon's.
 *
 * Layers differ from bundles: they keep the image's numeric owners and modes, setuid and
 * setgid included (every sandbox mount is nosuid), and their whiteouts become overlayfs'
 * (a 0/0 character device; the opaque xattr trusted.overlay.opaque=y). Owners and trusted.*
 * xattrs need privilege, and the parser must have none: it is the process that runs
 * libarchive and the decompressors over hostile bytes. So the work is split:
 *
 *  1. The parser (unprivileged uid, every capability dropped) asks the policy
 *     (layerpolicy.h) about every entry before anything is written, writes the tree with the
 *     modes' permission bits, mknods whiteouts (a 0/0 character device needs no privilege
 *     since Linux 5.8; its filter allows mknodat of character devices only, and the kernel
 *     refuses any other number without CAP_MKNOD), and appends to the record (a memfd of
 *     the daemon's, never part of the tree) each entry's owner and full mode, and each
 *     opaque directory.
 *  2. Once the parser and its whole PID namespace are gone and its cgroup is empty (nothing
 *     can change the tree any more), the applier, a fork of the daemon keeping only
 *     CAP_CHOWN, CAP_FOWNER, CAP_FSETID (a setgid bit for a group root is not in),
 *     CAP_DAC_READ_SEARCH (to walk directories the layer made unreadable) and CAP_SYS_ADMIN
 *     (trusted.* xattrs), under no_new_privs and its own
 *     allow-list, first hands every entry of the tree to root (fchownat, never following
 *     a link; anything but a file, directory, link or 0/0 character device refuses the layer,
 *     so a subverted parser cannot smuggle a FIFO or device in), then applies the record.
 *     The record is the parser's, so it is hostile too: each path is checked again and
 *     resolved with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), the entry itself looked
 *     at without following it; owners are set with fchownat(AT_SYMLINK_NOFOLLOW), and the
 *     mode after the owner (chown clears setuid and setgid), only on what is not a link.
 *     It counts the tree's entries and bytes itself: the sizes reported never come from the
 *     parser.
 *
 * What libarchive would restore beyond that is not: no xattrs (file capabilities are inert
 * under nosuid anyway), no ACLs, no flags.
 */

/* ---- the parser -------------------------------------------------------------------- */

/* The shared base (sh/unpacker.h) plus what a layer needs: parents made for whiteouts and
 * opaque markers, and whiteouts themselves (character devices only). */
static const sh_seccomp_allow parser_extra[] = {
        {"mkdirat", -1, 0, 0},
        {"mknodat", 2, S_IFMT, S_IFCHR},
};

/* What the applier calls: the walk (open, stat, getdents), owners, modes, one xattr. */
static const sh_seccomp_allow applier_syscalls[] = {
        {"read", -1, 0, 0},           {"write", -1, 0, 0},
        {"lseek", -1, 0, 0},          {"close", -1, 0, 0},
        {"openat", -1, 0, 0},         {"openat2", -1, 0, 0},
        {"fcntl", -1, 0, 0},          {"newfstatat", -1, 0, 0},
        {"fstat", -1, 0, 0},          {"getdents64", -1, 0, 0},
        {"fchown", -1, 0, 0},         {"fchownat", -1, 0, 0},
        {"fchmod", -1, 0, 0},         {"fchmodat", -1, 0, 0},
        {"fsetxattr", -1, 0, 0},      {"brk", -1, 0, 0},
        {"mmap", 2, PROT_EXEC, 0},    {"mprotect", 2, PROT_EXEC, 0},
        {"munmap", -1, 0, 0},         {"mremap", -1, 0, 0},
        {"futex", -1, 0, 0},          {"getpid", -1, 0, 0},
        {"gettid", -1, 0, 0},         {"rt_sigprocmask", -1, 0, 0},
        {"sigaltstack", 0, ~0ull, 0}, {"exit_group", -1, 0, 0},
};

int sh_layer_filters_build(sh_seccomp **parser, sh_seccomp **applier, sh_error **err)
{
        size_t n = sh_unpacker_n_syscalls + ARRAY_SIZE(parser_extra);
        sh_seccomp_allow *all = calloc(n, sizeof(*all));
        int r;

        if (!all)
                return sh_error_make(err, ENOMEM, "out of memory");
        memcpy(all, sh_unpacker_syscalls, sh_unpacker_n_syscalls * sizeof(*all));
        memcpy(all + sh_unpacker_n_syscalls, parser_extra, sizeof(parser_extra));
        r = sh_seccomp_build_allowlist(all, n, EPERM, parser, err);
        free(all);
        if (r < 0)
                return r;
        return sh_seccomp_build_allowlist(applier_syscalls, ARRAY_SIZE(applier_syscalls), EPERM,
                                          applier, err);
}

static int reason_fd = FD_REASON;

_printf_(1, 2) static int child_fail(const char *fmt, ...)
{
        char buf[SH_LAYER_REASON_MAX];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        return sh_unpacker_fail(reason_fd, "%s", buf);
}

static int write_all(int fd, const void *p, size_t n)
{
        const char *c = p;

        while (n) {
                ssize_t w = write(fd, c, n);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return -1;
                c += w;
                n -= (size_t)w;
        }
        return 0;
}

static int record(uint32_t kind, uint32_t uid, uint32_t gid, uint32_t mode, const char *path)
{
        char buf[sizeof(sh_layer_record) + SH_LAYER_PATH_MAX];
        sh_layer_record r = {kind, uid, gid, mode, (uint32_t)strlen(path)};

        memcpy(buf, &r, sizeof(r));
        memcpy(buf + sizeof(r), path, r.len);
        return write_all(FD_RECORD, buf, sizeof(r) + r.len);
}

/* The directory `path` (normalised, "" the root; with `last` its last component too, else
 * only its parent) opened below the working directory, each missing component made (0755),
 * never following a link: a link or a file on the way refuses the layer. Returns the fd or
 * -1 with the reason written; *ret_base the last component when !last. */
static int open_dirs(char *path, bool last, const char **ret_base, const char *q)
{
        int fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char *c = path, *slash;

        if (fd < 0) {
                child_fail("this host could not open the layer's directory: %s", strerror(errno));
                return -1;
        }
        for (; *c; c = slash + 1) {
                int nfd;

                slash = strchr(c, '/');
                if (!slash && !last) {
                        *ret_base = c;
                        return fd;
                }
                if (slash)
                        *slash = '\0';
                nfd = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (nfd < 0 && errno == ENOENT && mkdirat(fd, c, 0755) == 0)
                        nfd = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (slash)
                        *slash = '/';
                close(fd);
                if (nfd < 0) {
                        child_fail("layer refused: entry '%s' lies below a symbolic link or a "
                                   "file of the layer (%s)",
                                   q, strerror(errno));
                        return -1;
                }
                fd = nfd;
                if (!slash)
                        break;
        }
        *ret_base = NULL;
        return fd;
}

static int whiteout(char *norm, const char *q)
{
        const char *base = NULL;
        struct stat st;
        int fd = open_dirs(norm, false, &base, q), r = 0;

        if (fd < 0)
                return 1;
        if (mknodat(fd, base, S_IFCHR | 0, makedev(0, 0)) < 0 &&
            !(errno == EEXIST && fstatat(fd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
              S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)))
                r = child_fail("layer refused: whiteout '%s' could not be made: %s", q,
                               strerror(errno));
        close(fd);
        if (r == 0 && record('E', 0, 0, 0, norm) < 0)
                r = child_fail("this host could not write the layer's record: %s", strerror(errno));
        return r;
}

static int opaque(char *norm, const char *q)
{
        const char *base;
        int fd = open_dirs(norm, true, &base, q);

        if (fd < 0)
                return 1;
        close(fd);
        if (record('O', 0, 0, 0, norm) < 0)
                return child_fail("this host could not write the layer's record: %s",
                                  strerror(errno));
        return 0;
}

static int copy_data(struct archive *in, struct archive *out)
{
        const void *buf;
        size_t size;
        la_int64_t off;
        int r;

        for (;;) {
                r = archive_read_data_block(in, &buf, &size, &off);
                if (r == ARCHIVE_EOF)
                        return ARCHIVE_OK;
                if (r < ARCHIVE_OK)
                        return r;
                if (archive_write_data_block(out, buf, size, off) < ARCHIVE_OK)
                        return ARCHIVE_FAILED;
        }
}

static const char *aerr(struct archive *a)
{
        return archive_error_string(a) ? archive_error_string(a) : "unreadable";
}

/* One entry the policy took: written by libarchive at its normalised path, its owner and
 * full mode recorded for the applier (a hard link shares its target's inode). */
static int take(struct archive *in, struct archive *out, struct archive_entry *e, const char *norm,
                const char *norm_link, const char *q)
{
        la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
        mode_t mode = archive_entry_perm(e) & 07777;
        bool hard = archive_entry_hardlink(e) != NULL;

        if (uid < 0 || uid >= UINT32_MAX || gid < 0 || gid >= UINT32_MAX)
                return child_fail("layer refused: entry '%s' has an owner out of range", q);
        archive_entry_set_pathname(e, norm);
        if (hard)
                archive_entry_set_hardlink(e, norm_link);
        /* The parser owns what it writes; the applier sets the rest. */
        archive_entry_set_perm(e, mode & 0777);
        if (archive_write_header(out, e) < ARCHIVE_OK)
                return child_fail("layer refused: entry '%s' could not be written: %s", q,
                                  aerr(out));
        if (archive_entry_size(e) > 0 && copy_data(in, out) != ARCHIVE_OK)
                return child_fail("layer refused: entry '%s' could not be unpacked: %s", q,
                                  aerr(in));
        if (archive_write_finish_entry(out) < ARCHIVE_OK)
                return child_fail("layer refused: entry '%s' could not be finished: %s", q,
                                  aerr(out));
        if (!hard && record('E', (uint32_t)uid, (uint32_t)gid, mode, norm) < 0)
                return child_fail("this host could not write the layer's record: %s",
                                  strerror(errno));
        return 0;
}

static int open_blob(struct archive *in, sh_layer_compression c)
{
        static const char *const names[] = {"plain tar", "gzip-compressed tar",
                                            "zstd-compressed tar"};
        int code = c == SH_LAYER_GZIP ? ARCHIVE_FILTER_GZIP : ARCHIVE_FILTER_ZSTD;

        /* Only the one filter the media type names, built into libarchive (ARCHIVE_WARN
         * would mean an external program: not in here). */
        if (archive_read_support_format_tar(in) != ARCHIVE_OK ||
            (c == SH_LAYER_GZIP && archive_read_support_filter_gzip(in) != ARCHIVE_OK) ||
            (c == SH_LAYER_ZSTD && archive_read_support_filter_zstd(in) != ARCHIVE_OK))
                return child_fail("this host's libarchive cannot read a %s by itself", names[c]);
        if (lseek(FD_BLOB, 0, SEEK_SET) < 0)
                return child_fail("this host could not read the layer: %s", strerror(errno));
        if (archive_read_open_fd(in, FD_BLOB, 65536) != ARCHIVE_OK)
                return child_fail("layer refused: not a %s (%s)", names[c], aerr(in));
        /* A filter passes data that is not in its format through unchanged: the chain used
         * must be exactly the one named (then the raw file, "none"). */
        if (c == SH_LAYER_PLAIN
                    ? archive_filter_count(in) != 1
                    : archive_filter_count(in) != 2 || archive_filter_code(in, 0) != code)
                return child_fail("layer refused: not a %s (read through '%s')", names[c],
                                  archive_filter_name(in, 0) ? archive_filter_name(in, 0) : "?");
        return 0;
}

static int extract(const sh_layer_child_arg *a)
{
        struct archive *in = archive_read_new(), *out = archive_write_disk_new();
        sh_layer_policy *pol = sh_layer_policy_new(a->max_bytes, a->max_entries);
        char *norm = malloc(SH_LAYER_PATH_MAX), *norm_link = malloc(SH_LAYER_PATH_MAX);
        struct archive_entry *e;
        int r, rc = 1;

        if (!in || !out || !pol || !norm || !norm_link) {
                child_fail("this host is out of memory");
                goto out;
        }
        /* libarchive's own guards on top of the policy's; no owners, ACLs, xattrs or flags. */
        archive_write_disk_set_options(out, ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                    ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
                                                    ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME);
        if (open_blob(in, a->c) != 0)
                goto out;
        while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
                const char *path = archive_entry_pathname(e);
                const sh_layer_entry le = {
                        .path = path,
                        .path_len = path ? strlen(path) : 0,
                        .hardlink = archive_entry_hardlink(e),
                        .type = archive_entry_filetype(e),
                        .size = archive_entry_size(e),
                };
                sh_layer_verdict v = sh_layer_check(pol, &le, norm, norm_link, SH_LAYER_PATH_MAX);
                char q[160];

                sh_quote_printable(path, q, sizeof(q));
                switch (v) {
                case SH_LAYER_SKIP:
                        continue;
                case SH_LAYER_TAKE:
                        if (take(in, out, e, norm, norm_link, q) != 0)
                                goto out;
                        continue;
                case SH_LAYER_WHITEOUT:
                        if (whiteout(norm, q) != 0)
                                goto out;
                        continue;
                case SH_LAYER_OPAQUE:
                        if (opaque(norm, q) != 0)
                                goto out;
                        continue;
                default: {
                        char why[SH_LAYER_REASON_MAX];

                        sh_layer_reason(pol, v, path, why, sizeof(why));
                        child_fail("%s", why);
                        goto out;
                }
                }
        }
        if (r != ARCHIVE_EOF) {
                child_fail("layer refused: corrupt or not a tar archive (%s)", aerr(in));
                goto out;
        }
        /* Directories' modes and times, fixed up last. */
        if (archive_write_close(out) < ARCHIVE_OK) {
                child_fail("layer refused: finishing the unpack failed: %s", aerr(out));
                goto out;
        }
        rc = 0;
out:
        archive_read_free(in);
        archive_write_free(out);
        sh_layer_policy_free(pol);
        free(norm);
        free(norm_link);
        return rc;
}

int sh_layer_parser_main(void *arg)
{
        const sh_layer_child_arg *a = arg;
        /* The file-size limit backs the policy's bound on each file (and the record's). */
        const uint64_t slack = 64ull << 20;
        const sh_unpacker_confinement c = {
                .procs = FD_PROCS,
                .nprocs = a->nprocs,
                .stage = FD_DEST,
                .reason = FD_REASON,
                .uid = a->uid,
                .fsize_max = a->max_bytes > UINT64_MAX / 2 ? UINT64_MAX / 2 : a->max_bytes + slack,
                .cpu_s = SH_LAYER_UNPACK_TIMEOUT_MS / 1000,
                .filter = a->filter,
        };

        if (sh_unpacker_confine(&c) != 0)
                return 1;
        return extract(a);
}

/* ---- the applier --------------------------------------------------------------------- */

typedef struct apply_state {
        uint64_t bytes, entries, max_bytes, max_entries;
        bool told;
} apply_state;

static int refuse(apply_state *st, int rc)
{
        st->told = true;
        return -rc;
}

/* Every entry to root first, never following a link; only what a layer may hold. */
static int own_visit(const sh_tree_ev *ev, void *data)
{
        apply_state *st = data;
        struct stat sb;

        switch (ev->kind) {
        case SH_TREE_ENTRY:
                if (fstatat(ev->dirfd, ev->name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
                    fchownat(ev->dirfd, ev->name, 0, 0, AT_SYMLINK_NOFOLLOW) < 0)
                        return refuse(st, child_fail("this host could not hand the layer to "
                                                     "root: %s",
                                                     strerror(errno)));
                if (++st->entries > st->max_entries)
                        return refuse(st, child_fail("layer refused: its tree holds more than "
                                                     "%llu entries",
                                                     (unsigned long long)st->max_entries));
                if (S_ISREG(sb.st_mode)) {
                        st->bytes += (uint64_t)sb.st_size;
                        if (st->bytes > st->max_bytes)
                                return refuse(st, child_fail("layer refused: its files add up "
                                                             "to more than %llu bytes",
                                                             (unsigned long long)st->max_bytes));
                        return 0;
                }
                if (S_ISLNK(sb.st_mode) || (S_ISCHR(sb.st_mode) && sb.st_rdev == makedev(0, 0)))
                        return 0;
                if (!S_ISDIR(sb.st_mode))
                        return refuse(st, child_fail("layer refused: the unpacked tree holds a "
                                                     "special file"));
                if (ev->depth > SH_LAYER_DEPTH_MAX)
                        return refuse(st, child_fail("layer refused: directories nested deeper "
                                                     "than %u levels",
                                                     SH_LAYER_DEPTH_MAX));
                return SH_TREE_DESCEND;
        case SH_TREE_ERROR:
                return refuse(st, child_fail("this host could not read the unpacked layer: %s",
                                             strerror(ev->err)));
        case SH_TREE_DIR:
        case SH_TREE_LEAVE:
                return 0;
        }
        return 0;
}

/* A record's path is the parser's word: checked again (relative, no NUL, no ".." or empty
 * component but for the root's "") before it is resolved beneath the destination. */
static bool path_ok(const char *p, size_t len)
{
        if (memchr(p, '\0', len) || (len > 0 && p[0] == '/'))
                return false;
        for (size_t i = 0; i < len;) {
                const char *c = p + i, *e = memchr(c, '/', len - i);
                size_t n = e ? (size_t)(e - c) : len - i;

                if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                i += n + (e ? 1 : 0);
        }
        return true;
}

static int beneath(const char *path, uint64_t flags)
{
        struct open_how how = {
                .flags = flags | O_CLOEXEC | O_NOFOLLOW,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                           RESOLVE_NO_XDEV,
        };

        return (int)syscall(SYS_openat2, AP_DEST, *path ? path : ".", &how, sizeof(how));
}

static int apply_one(const sh_layer_record *r, char *path)
{
        char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
        _cleanup_close_ int dfd = -1;
        struct stat sb;

        if (r->kind == 'O') {
                dfd = beneath(path, O_RDONLY | O_DIRECTORY);
                if (dfd < 0 || fsetxattr(dfd, "trusted.overlay.opaque", "y", 1, 0) < 0)
                        return -errno;
                return 0;
        }
        if (r->kind != 'E' || !*path)
                return -EINVAL;
        if (slash)
                *slash = '\0';
        dfd = beneath(slash ? path : "", O_PATH | O_DIRECTORY);
        if (slash)
                *slash = '/';
        if (dfd < 0 || fstatat(dfd, base, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
            fchownat(dfd, base, r->uid, r->gid, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        /* After the owner, which clears setuid and setgid; never on a link (the tree cannot
         * change under us: this is not one, and stays not one). */
        if (!S_ISLNK(sb.st_mode) && fchmodat(dfd, base, r->mode & 07777, 0) < 0)
                return -errno;
        return 0;
}

static int apply_record(void)
{
        char *path = malloc(SH_LAYER_PATH_MAX);
        sh_layer_record r;
        ssize_t n;
        int rc = 0;

        if (!path)
                return child_fail("this host is out of memory");
        if (lseek(AP_RECORD, 0, SEEK_SET) < 0)
                rc = child_fail("this host could not read the layer's record: %s", strerror(errno));
        while (rc == 0 && (n = read(AP_RECORD, &r, sizeof(r))) != 0) {
                int e;

                if (n != (ssize_t)sizeof(r) || r.len >= SH_LAYER_PATH_MAX ||
                    read(AP_RECORD, path, r.len) != (ssize_t)r.len || !path_ok(path, r.len)) {
                        rc = child_fail("layer refused: the unpacker's record is malformed");
                        break;
                }
                path[r.len] = '\0';
                e = apply_one(&r, path);
                if (e < 0) {
                        char q[160];

                        sh_quote_printable(path, q, sizeof(q));
                        rc = child_fail("this host could not give entry '%s' its owner, mode or "
                                        "opacity: %s",
                                        q, strerror(-e));
                }
        }
        free(path);
        return rc;
}

int sh_layer_applier_main(void *arg)
{
        const sh_layer_apply_arg *a = arg;
        static const cap_value_t keep[] = {CAP_CHOWN, CAP_FOWNER, CAP_FSETID, CAP_DAC_READ_SEARCH,
                                           CAP_SYS_ADMIN};
        apply_state st = {.max_bytes = a->max_bytes, .max_entries = a->max_entries};
        const char *step = NULL;
        int r;

        reason_fd = AP_REASON;
        r = sh_jail_join_cgroup(AP_PROCS, a->nprocs);
        if (r < 0)
                return child_fail("this host could not confine the applier: cgroup: %s",
                                  strerror(-r));
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 ||
            sh_unpacker_limit(RLIMIT_NOFILE, SH_LAYER_DEPTH_MAX + 32) < 0 ||
            sh_unpacker_limit(RLIMIT_CORE, 0) < 0)
                return child_fail("this host could not confine the applier: %s", strerror(errno));
        r = sh_caps_keep_only(keep, ARRAY_SIZE(keep), &step);
        if (r < 0)
                return child_fail("this host could not confine the applier: %s: %s",
                                  step ? step : "capabilities", strerror(-r));
        r = sh_seccomp_load(a->filter);
        if (r < 0)
                return child_fail("this host could not confine the applier: filter: %s",
                                  strerror(-r));
        /* The top directory, then everything below it; the layer's root readable by all. */
        if (fchown(AP_DEST, 0, 0) < 0 || fchmod(AP_DEST, 0755) < 0)
                return child_fail("this host could not hand the layer to root: %s",
                                  strerror(errno));
        r = sh_tree_walk(AP_DEST, SH_LAYER_DEPTH_MAX + 2, own_visit, &st);
        if (r < 0)
                return st.told ? 1
                               : child_fail("this host could not read the unpacked layer: %s",
                                            strerror(-r));
        if (apply_record() != 0)
                return 1;
        /* The counts, for the daemon (the only success output). */
        {
                char buf[64];

                snprintf(buf, sizeof(buf), "%llu %llu", (unsigned long long)st.bytes,
                         (unsigned long long)st.entries);
                (void)!write(AP_REASON, buf, strlen(buf));
        }
        return 0;
}
