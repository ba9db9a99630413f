/* unpack.c: the tool store and bundle unpacking in a chrooted, unprivileged child. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sh/spawn.h"
#include "sh/tools.h"

#define STAGE_DIR ".stage"
#define CACHE_DIR ".cache"
#define MAX_DEPTH 64 /* path components of one entry */

struct sh_store {
        sh_loop *loop;
        uid_t uid;
        int toolsfd; /* {root}/tools */
        int stagefd; /* {root}/tools/.stage: root-only, private staging */
        int cachefd; /* {root}/tools/.cache: root-only, the stale-fallback results */
        unsigned counter;
        unsigned busy; /* unpacks running: they need the fds until they report */
        bool closing;  /* freed once the last unpack reported */
};

struct sh_unpack {
        sh_store *s;
        char sha[65];
        char stage[64]; /* name under .stage */
        int dirfd;      /* the staging dir; the child's future / */
        int errfd;      /* read end of the child's reason pipe */
        sh_child *child;
        sh_timer *timer;
        bool starting; /* inside sh_child_fork_fds: a synchronous reap must wait */
        int status;    /* the exit status of such a synchronous reap */
        sh_unpack_done_fn done;
        void *data;
};

/* ---- removing a tree (in a child: it may be big) ------------------------------------- */

/* Remove `name` under dirfd and everything below it, never following links. */
static void rm_rf_at(int parent, const char *name, unsigned depth)
{
        int fd;
        DIR *d;
        struct dirent *de;

        if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
                return;
        if (depth > MAX_DEPTH + 4)
                return;
        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, ".."))
                        rm_rf_at(dirfd(d), de->d_name, depth + 1);
        closedir(d);
        (void)unlinkat(parent, name, AT_REMOVEDIR); /* best effort: a child, nobody to tell */
}

#define OLD_PREFIX ".stage-old-"

typedef struct rm_arg {
        char name[64]; /* "": every OLD_PREFIX entry of the directory */
} rm_arg;

static int remover_main(void *arg)
{
        rm_arg *a = arg;
        DIR *d;
        struct dirent *de;

        if (a->name[0]) {
                rm_rf_at(3, a->name, 0);
                return 0;
        }
        d = fdopendir(3);
        if (!d)
                return 1;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, OLD_PREFIX, strlen(OLD_PREFIX)) == 0)
                        rm_rf_at(dirfd(d), de->d_name, 0);
        closedir(d);
        return 0;
}

/* Fire and forget: the loop reaps the child. `name` "" sweeps old staging areas of {root}/tools
 * (dirfd), otherwise removes dirfd/name. */
static void remove_later(sh_store *s, int dirfd, const char *name)
{
        rm_arg a = {{0}};

        snprintf(a.name, sizeof(a.name), "%s", name);
        (void)sh_child_fork(s->loop, dirfd, remover_main, &a, NULL, NULL);
}

/* ---- the store ---------------------------------------------------------------------- */

static int open_private_dir(int parent, const char *name)
{
        int fd;
        struct stat st;

        if (mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* Sandboxes see {root}/tools read-only at /tools: keep what is ours unreadable there. */
        if (fstat(fd, &st) < 0 || (st.st_mode & 077 && fchmod(fd, 0700) < 0)) {
                int r = -errno;

                close(fd);
                return r;
        }
        return fd;
}

int sh_store_open(const char *root, sh_loop *loop, uid_t uid, sh_store **ret, sh_error **err)
{
        sh_store *s = calloc(1, sizeof(*s));
        int rootfd, r;

        if (!s)
                return sh_error_make(err, ENOMEM, "out of memory");
        s->loop = loop;
        s->uid = uid;
        s->toolsfd = s->stagefd = s->cachefd = -1;
        rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0) {
                r = sh_error_make(err, errno, "opening the state root '%s'", root);
                goto fail;
        }
        if (mkdirat(rootfd, "tools", 0755) < 0 && errno != EEXIST) {
                r = sh_error_make(err, errno, "creating '%s/tools'", root);
                close(rootfd);
                goto fail;
        }
        s->toolsfd = openat(rootfd, "tools", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(rootfd);
        if (s->toolsfd < 0) {
                r = sh_error_make(err, errno, "opening '%s/tools'", root);
                goto fail;
        }
        /* Half-unpacked trees of an earlier run: the whole staging area is renamed away and
         * removed in a child, so nothing can sweep a staging dir of this run by mistake. */
        {
                char old[64];
                uint8_t rnd[8];

                randombytes_buf(rnd, sizeof(rnd));
                snprintf(old, sizeof(old), OLD_PREFIX "%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
                         rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
                if (renameat(s->toolsfd, STAGE_DIR, s->toolsfd, old) < 0 && errno != ENOENT) {
                        r = sh_error_make(err, errno, "moving '%s/tools/" STAGE_DIR "' aside",
                                          root);
                        goto fail;
                }
        }
        s->stagefd = open_private_dir(s->toolsfd, STAGE_DIR);
        if (s->stagefd < 0) {
                r = sh_error_make(err, -s->stagefd, "opening '%s/tools/" STAGE_DIR "'", root);
                goto fail;
        }
        s->cachefd = open_private_dir(s->toolsfd, CACHE_DIR);
        if (s->cachefd < 0) {
                r = sh_error_make(err, -s->cachefd, "opening '%s/tools/" CACHE_DIR "'", root);
                goto fail;
        }
        remove_later(s, s->toolsfd, "");
        *ret = s;
        return 0;
fail:
        sh_store_free(s);
        return r;
}

void sh_store_free(sh_store *s)
{
        if (!s)
                return;
        if (s->busy) {
                s->closing = true;
                return;
        }
        sh_close(s->toolsfd);
        sh_close(s->stagefd);
        sh_close(s->cachefd);
        free(s);
}

int sh_store_cache_fd(const sh_store *s)
{
        return s->cachefd;
}

bool sh_store_has(const sh_store *s, const char *sha)
{
        struct stat st;

        return fstatat(s->toolsfd, sha, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

int sh_store_tmpfile(const sh_store *s)
{
        /* On disk (not in memory) when the filesystem can: bundles may be 256 MiB each. */
        int fd = openat(s->stagefd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

        if (fd >= 0)
                return fd;
        if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
                return -errno;
        fd = memfd_create("sh-bundle", MFD_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* ---- the child ---------------------------------------------------------------------- */

typedef struct child_arg {
        uid_t uid;
        bool drop; /* we are root: chroot and become `uid` */
} child_arg;

enum { FD_BUNDLE = 3, FD_STAGE = 4, FD_REASON = 5 };

/* Printable ASCII only, bounded: entry names are hostile and end up in JSON and logs. */
static void quote_name(const char *in, char *out, size_t out_len)
{
        size_t i = 0;

        for (; in && *in && i + 4 < out_len; in++)
                out[i++] = (*in >= 0x20 && *in < 0x7f) ? *in : '?';
        if (in && *in && i + 4 <= out_len) {
                memcpy(out + i, "...", 3);
                i += 3;
        }
        out[i] = '\0';
}

_printf_(1, 2) static int child_fail(const char *fmt, ...)
{
        char buf[SH_TOOLS_REASON_MAX];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (n > 0) /* one small write into an empty pipe: cannot block or split */
                (void)!write(FD_REASON, buf, strlen(buf));
        return 1;
}

/* Strip "./" prefixes; refuse absolute paths and "..". Returns the depth of the parent
 * directory (components before the last) or -1. Empty or "." gives 0 with *skip. */
static int check_path(const char *p, bool *skip)
{
        int depth = 0, comps = 0;
        size_t n;

        *skip = false;
        if (!p || strlen(p) >= 4096 || p[0] == '/')
                return -1;
        while (*p) {
                const char *e = strchr(p, '/');

                n = e ? (size_t)(e - p) : strlen(p);
                if (n == 2 && p[0] == '.' && p[1] == '.')
                        return -1;
                if (n > 0 && !(n == 1 && p[0] == '.'))
                        comps++;
                p += n + (e ? 1 : 0);
        }
        if (comps == 0) {
                *skip = true;
                return 0;
        }
        if (comps > MAX_DEPTH)
                return -1;
        depth = comps - 1;
        return depth;
}

/* A symlink target must stay inside the bundle when resolved from the link's directory.
 * Every ".." must come first: "l/.." through a link l is not what it looks like lexically
 * (l may point anywhere inside), while leading ".."s climb real directories (libarchive's
 * SECURE_SYMLINKS never writes an entry through a link), and each link is checked in turn. */
static bool symlink_stays_inside(int depth, const char *t)
{
        bool descended = false;

        if (!t || !*t || t[0] == '/' || strlen(t) >= 4096)
                return false;
        while (*t) {
                const char *e = strchr(t, '/');
                size_t n = e ? (size_t)(e - t) : strlen(t);

                if (n == 2 && t[0] == '.' && t[1] == '.') {
                        if (descended || --depth < 0)
                                return false;
                } else if (n > 0 && !(n == 1 && t[0] == '.')) {
                        descended = true;
                }
                t += n + (e ? 1 : 0);
        }
        return true;
}

static int set_limit(int res, rlim_t v)
{
        struct rlimit rl = {v, v};

        return setrlimit(res, &rl);
}

/* The confinement, in order. Everything before chroot is about the fd table and limits; after
 * chroot(".") the staging dir is all the filesystem the child can name, and after dropping to
 * an unprivileged uid it cannot chroot out again (no CAP_SYS_CHROOT), create device nodes (no
 * CAP_MKNOD) or write anything it does not own. */
static int confine(const child_arg *a)
{
        if (fchdir(FD_STAGE) < 0)
                return child_fail("this host could not enter the staging directory: %s",
                                  strerror(errno));
        if (a->drop) {
                if (chroot(".") < 0 || chdir("/") < 0)
                        return child_fail("this host could not confine the unpacker: chroot: %s",
                                          strerror(errno));
                if (setgroups(0, NULL) < 0 || setresgid(a->uid, a->uid, a->uid) < 0 ||
                    setresuid(a->uid, a->uid, a->uid) < 0)
                        return child_fail("this host could not drop privileges: %s",
                                          strerror(errno));
        }
        close(FD_STAGE);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return child_fail("this host could not confine the unpacker: prctl: %s",
                                  strerror(errno));
        /* A gzip bomb or a looping archive dies on these instead of filling the disk or
         * spinning: the per-file size is bounded by the total, CPU by the deadline. */
        if (set_limit(RLIMIT_FSIZE, (rlim_t)SH_TOOLS_UNPACKED_MAX) < 0 ||
            set_limit(RLIMIT_CPU, SH_TOOLS_UNPACK_TIMEOUT_MS / 1000) < 0 ||
            set_limit(RLIMIT_CORE, 0) < 0 || set_limit(RLIMIT_NOFILE, 64) < 0)
                return child_fail("this host could not set unpacker limits: %s", strerror(errno));
        umask(022);
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

static int extract(void)
{
        struct archive *in = archive_read_new(), *out = archive_write_disk_new();
        struct archive_entry *e;
        uint64_t total = 0;
        unsigned count = 0;
        int r, rc = 1;
        char q[160];

        if (!in || !out)
                return child_fail("this host is out of memory");
        /* A bundle is tar, gzip-compressed: nothing else is even tried. */
        archive_read_support_filter_gzip(in);
        archive_read_support_format_tar(in);
        /* libarchive's own guards on top of ours; no owners, ACLs, xattrs or flags restored. */
        archive_write_disk_set_options(out, ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                    ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
                                                    ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME);
        if (lseek(FD_BUNDLE, 0, SEEK_SET) < 0) {
                child_fail("this host could not read the bundle: %s", strerror(errno));
                goto out;
        }
        if (archive_read_open_fd(in, FD_BUNDLE, 65536) != ARCHIVE_OK) {
                child_fail("unsafe bundle: not a gzip-compressed tar archive (%s)",
                           archive_error_string(in) ? archive_error_string(in) : "unreadable");
                goto out;
        }
        while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
                const char *path = archive_entry_pathname(e);
                const char *hl = archive_entry_hardlink(e);
                mode_t type = archive_entry_filetype(e);
                bool skip, hskip;
                int depth = check_path(path, &skip);

                quote_name(path, q, sizeof(q));
                if (++count > SH_TOOLS_FILES_MAX) {
                        child_fail("unsafe bundle: more than %u entries", SH_TOOLS_FILES_MAX);
                        goto out;
                }
                if (depth < 0) {
                        child_fail("unsafe bundle: entry '%s' is absolute, contains '..' or is "
                                   "too deep",
                                   q);
                        goto out;
                }
                if (skip)
                        continue; /* "./": the bundle root itself */
                if (hl) {
                        if (check_path(hl, &hskip) < 0 || hskip) {
                                child_fail("unsafe bundle: hard link '%s' points outside the "
                                           "bundle",
                                           q);
                                goto out;
                        }
                } else if (type == AE_IFLNK) {
                        if (!symlink_stays_inside(depth, archive_entry_symlink(e))) {
                                child_fail("unsafe bundle: symbolic link '%s' points outside "
                                           "the bundle",
                                           q);
                                goto out;
                        }
                } else if (type != AE_IFDIR && type != AE_IFREG) {
                        child_fail("unsafe bundle: entry '%s' is a device node, FIFO or socket "
                                   "(only files, directories and links are allowed)",
                                   q);
                        goto out;
                }
                if (archive_entry_size(e) < 0 ||
                    (uint64_t)archive_entry_size(e) > SH_TOOLS_UNPACKED_MAX - total) {
                        child_fail("unsafe bundle: unpacks to more than %llu bytes",
                                   (unsigned long long)SH_TOOLS_UNPACKED_MAX);
                        goto out;
                }
                total += (uint64_t)archive_entry_size(e);
                /* Normalised modes: readable by every sandbox uid, executable where the author
                 * said so, never setuid/setgid/sticky or world-writable. */
                if (type == AE_IFDIR)
                        archive_entry_set_perm(e, 0755);
                else if (type == AE_IFREG)
                        archive_entry_set_perm(e, (archive_entry_perm(e) & 0111) ? 0755 : 0644);
                if (archive_write_header(out, e) < ARCHIVE_OK) {
                        child_fail("unsafe bundle: entry '%s' refused: %s", q,
                                   archive_error_string(out) ? archive_error_string(out) : "");
                        goto out;
                }
                if (archive_entry_size(e) > 0 && copy_data(in, out) != ARCHIVE_OK) {
                        child_fail("unsafe bundle: entry '%s' could not be unpacked: %s", q,
                                   archive_error_string(in) ? archive_error_string(in) : "");
                        goto out;
                }
                if (archive_write_finish_entry(out) < ARCHIVE_OK) {
                        child_fail("unsafe bundle: entry '%s' could not be finished: %s", q,
                                   archive_error_string(out) ? archive_error_string(out) : "");
                        goto out;
                }
        }
        if (r != ARCHIVE_EOF) {
                child_fail("unsafe bundle: corrupt or not a gzip-compressed tar archive (%s)",
                           archive_error_string(in) ? archive_error_string(in) : "unreadable");
                goto out;
        }
        if (archive_write_close(out) < ARCHIVE_OK) {
                child_fail("unsafe bundle: finishing the unpack failed: %s",
                           archive_error_string(out) ? archive_error_string(out) : "");
                goto out;
        }
        rc = 0;
out:
        archive_read_free(in);
        archive_write_free(out);
        return rc;
}

static int unpack_main(void *arg)
{
        if (confine(arg) != 0)
                return 1;
        return extract();
}

/* ---- the parent side ---------------------------------------------------------------- */

static void unpack_free(sh_unpack *u)
{
        sh_store *s = u->s;

        sh_loop_cancel_timer(s->loop, u->timer);
        sh_close(u->dirfd);
        sh_close(u->errfd);
        free(u);
        if (--s->busy == 0 && s->closing) {
                s->closing = false;
                sh_store_free(s);
        }
}

static void finish(sh_unpack *u, bool ok, const char *reason)
{
        if (u->done)
                u->done(ok, reason, u->data);
        unpack_free(u);
}

static void complete(sh_unpack *u, int status)
{
        char reason[SH_TOOLS_REASON_MAX] = "";
        ssize_t n;

        n = read(u->errfd, reason, sizeof(reason) - 1);
        if (n > 0)
                reason[n] = '\0';
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                if (!reason[0] && WIFSIGNALED(status))
                        snprintf(reason, sizeof(reason),
                                 "unsafe bundle: unpacking exceeded this host's limits (%llu "
                                 "bytes, %u s; signal %d)",
                                 (unsigned long long)SH_TOOLS_UNPACKED_MAX,
                                 SH_TOOLS_UNPACK_TIMEOUT_MS / 1000, WTERMSIG(status));
                else if (!reason[0])
                        snprintf(reason, sizeof(reason), "unpacking failed (exit %d)",
                                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
                remove_later(u->s, u->s->stagefd, u->stage);
                finish(u, false, reason);
                return;
        }
        /* The tree is complete: hand it to root and make it readable before anyone sees it. */
        if (geteuid() == 0 && fchown(u->dirfd, 0, 0) < 0) {
                snprintf(reason, sizeof(reason), "this host could not install the bundle: %s",
                         strerror(errno));
                remove_later(u->s, u->s->stagefd, u->stage);
                finish(u, false, reason);
                return;
        }
        if (fchmod(u->dirfd, 0755) < 0) {
                snprintf(reason, sizeof(reason), "this host could not install the bundle: %s",
                         strerror(errno));
                remove_later(u->s, u->s->stagefd, u->stage);
                finish(u, false, reason);
                return;
        }
        /* One atomic step into the store; the name is the content's hash, so if another
         * install of the same sha got there first, its tree is ours byte for byte: keep it. */
        if (renameat2(u->s->stagefd, u->stage, u->s->toolsfd, u->sha, RENAME_NOREPLACE) < 0) {
                if (errno != EEXIST && errno != ENOTEMPTY) {
                        snprintf(reason, sizeof(reason),
                                 "this host could not install the bundle: %s", strerror(errno));
                        remove_later(u->s, u->s->stagefd, u->stage);
                        finish(u, false, reason);
                        return;
                }
                remove_later(u->s, u->s->stagefd, u->stage);
        }
        finish(u, true, NULL);
}

static void child_done(sh_child *c, pid_t pid, int status, void *data)
{
        sh_unpack *u = data;

        u->child = NULL;
        if (u->starting) {
                u->status = status;
                return;
        }
        complete(u, status);
}

static void on_deadline(sh_loop *l, sh_timer *t, void *data)
{
        sh_unpack *u = data;

        u->timer = NULL;
        if (u->starting) { /* reaped during the fork: report from the loop, as promised */
                u->starting = false;
                complete(u, u->status);
                return;
        }
        if (u->child)
                (void)sh_child_kill(u->child, SIGKILL); /* child_done reports it */
}

sh_unpack *sh_unpack_start(sh_store *s, int fd, const char *sha, sh_unpack_done_fn done, void *data,
                           sh_error **err)
{
        sh_unpack *u = calloc(1, sizeof(*u));
        child_arg a = {.uid = s->uid, .drop = geteuid() == 0};
        int p[2] = {-1, -1}, keep[3];
        uint8_t rnd[8];

        if (!u) {
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        u->s = s;
        u->dirfd = u->errfd = -1;
        u->done = done;
        u->data = data;
        snprintf(u->sha, sizeof(u->sha), "%s", sha);
        randombytes_buf(rnd, sizeof(rnd));
        snprintf(u->stage, sizeof(u->stage), "%u-%u-%02x%02x%02x%02x%02x%02x%02x%02x",
                 (unsigned)getpid(), ++s->counter, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5],
                 rnd[6], rnd[7]);
        if (mkdirat(s->stagefd, u->stage, 0700) < 0) {
                sh_error_make(err, errno, "creating a staging directory");
                goto fail;
        }
        u->dirfd = openat(s->stagefd, u->stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (u->dirfd < 0) {
                sh_error_make(err, errno, "opening the staging directory");
                goto fail_rm;
        }
        /* The unprivileged unpacker owns its staging dir and nothing else on the host. */
        if (a.drop && fchown(u->dirfd, a.uid, a.uid) < 0) {
                sh_error_make(err, errno, "handing the staging directory to the unpacker");
                goto fail_rm;
        }
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
                sh_error_make(err, errno, "pipe");
                goto fail_rm;
        }
        u->errfd = p[0];
        keep[0] = fd;
        keep[1] = u->dirfd;
        keep[2] = p[1];
        u->starting = true;
        u->status = -1;
        s->busy++; /* from here on unpack_free accounts for it */
        u->child = sh_child_fork_fds(s->loop, keep, 3, unpack_main, &a, child_done, u);
        sh_close(p[1]);
        if (!u->child && u->status == -1) {
                sh_error_make(err, errno, "starting the unpacker");
                s->busy--;
                goto fail_rm;
        }
        if (!u->child) { /* no pidfd: it was waited for at once; report from the loop */
                u->timer = sh_loop_add_timer(s->loop, 0, on_deadline, u);
                if (!u->timer) {
                        sh_error_make(err, ENOMEM, "scheduling the unpacker's report");
                        s->busy--;
                        goto fail_rm;
                }
                return u;
        }
        u->starting = false;
        u->timer = sh_loop_add_timer(s->loop, SH_TOOLS_UNPACK_TIMEOUT_MS + 5000, on_deadline, u);
        /* Without the timer the child's RLIMIT_CPU still ends it; not worth failing for. */
        return u;
fail_rm:
        remove_later(s, s->stagefd, u->stage);
fail:
        sh_close(u->dirfd);
        sh_close(u->errfd);
        free(u);
        return NULL;
}

void sh_unpack_forget(sh_unpack *u)
{
        if (u)
                u->done = NULL;
}
