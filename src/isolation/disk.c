/* disk.c: the kernel-held disk limit of every workspace: the mechanism chosen at start (project
 * quota, an ext4 image on a loop device, a tmpfs), the per-sandbox setup in a child process,
 * detaching mounts in a child, and the mountinfo parsing that finds what a killed daemon left.
 *
 * Why the kernel: a sum over the files a client can see (disk-usage) is no limit. Preallocated
 * extents (fallocate), a file unlinked but kept open, symlink targets, directories and inodes
 * all take space no walk counts. Only the filesystem's own accounting sees every block.
 *
 * Why a child for every mount, loop device and quota change: each can take milliseconds or
 * more (image copy, LOOP_CONFIGURE, the ext4 mount, a quota write that waits for the journal),
 * and the daemon's one thread must keep answering. The same goes for the last reference of a
 * mounted filesystem: whoever drops it pays for the unmount (writeback of dirty data, the loop
 * device's release, freeing the image), so the daemon closes its own fds first and detaches
 * in a child (see sh_disk_detach). */
#include "sh/disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/quota.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sh/capability.h"
#include "sh/spawn.h"
#include "sh/syscalls.h"
#include "sh/volquota.h"

#define IMG_DIR       ".disk" /* {root}/.disk: images (unnamed) and start-up probes */
#define MAX_EXTENTS   4096    /* data extents of the template image (mke2fs writes tens) */
#define MKFS_WAIT_MS  60000
#define ROOT_INODES   3  /* tmpfs: its root, .trash and .logs, besides the workspace's own */
#define OVL_INODES    3  /* tmpfs: an overlay root's root/, root/upper and root/work */
#define EXT4_RESERVED 13 /* ext4: inodes 1-11 (root, lost+found...), .trash and .logs */

/* What /healthz reports: the mechanism in use, "none" when no limit is configured. */
static sh_disk_mode cap_mode = SH_DISK_NONE;
static bool cap_none(void)
{
        return cap_mode == SH_DISK_NONE;
}
static bool cap_project(void)
{
        return cap_mode == SH_DISK_PROJECT;
}
static bool cap_loop(void)
{
        return cap_mode == SH_DISK_LOOP;
}
static bool cap_tmpfs(void)
{
        return cap_mode == SH_DISK_TMPFS;
}
SH_CAPABILITY_IF(disk_quota_none, "disk-quota.none", cap_none)
SH_CAPABILITY_IF(disk_quota_project, "disk-quota.project", cap_project)
SH_CAPABILITY_IF(disk_quota_loop, "disk-quota.loop", cap_loop)
SH_CAPABILITY_IF(disk_quota_tmpfs, "disk-quota.tmpfs", cap_tmpfs)

typedef struct extent {
        off_t off, len;
} extent;

struct sh_disk {
        sh_disk_mode mode;
        uint64_t size;   /* bytes of one workspace */
        uint64_t inodes; /* inodes of one workspace */
        uint32_t proj_base;
        unsigned max_sandboxes;
        int imgdirfd; /* loop: {root}/.disk */
        int templfd;  /* loop: the template image (unnamed), ext4 with workspace/ and .trash/ */
        extent *ext;  /* loop: the template's data extents, all a copy needs */
        size_t n_ext;
        char *why_none; /* DISK_MAX=auto and nothing held it: why */
};

const char *sh_disk_mode_name(sh_disk_mode m)
{
        switch (m) {
        case SH_DISK_PROJECT:
                return "project";
        case SH_DISK_LOOP:
                return "loop";
        case SH_DISK_TMPFS:
                return "tmpfs";
        case SH_DISK_NONE:
                break;
        }
        return "none";
}

sh_disk_mode sh_disk_get_mode(const sh_disk *d)
{
        return d ? d->mode : SH_DISK_NONE;
}

uint64_t sh_disk_size(const sh_disk *d)
{
        return d && d->mode != SH_DISK_NONE ? d->size : 0;
}

uint64_t sh_disk_inodes(const sh_disk *d)
{
        return d && d->mode != SH_DISK_NONE ? d->inodes : 0;
}

const char *sh_disk_why_none(const sh_disk *d)
{
        return d ? d->why_none : NULL;
}

bool sh_disk_mounted(const sh_disk *d)
{
        return d && (d->mode == SH_DISK_LOOP || d->mode == SH_DISK_TMPFS);
}

/* ---- mountinfo ------------------------------------------------------------------------- */

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static char *unescape(const char *s, size_t n)
{
        char *out = malloc(n + 1), *o = out;
        size_t i;

        if (!out)
                return NULL;
        for (i = 0; i < n; i++) {
                if (s[i] == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3' &&
                    s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
                        *o++ = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 +
                                      (s[i + 3] - '0'));
                        i += 3;
                } else {
                        *o++ = s[i];
                }
        }
        *o = '\0';
        return out;
}

static int by_length_desc(const void *a, const void *b)
{
        size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);

        return la < lb ? 1 : la > lb ? -1 : strcmp(*(char *const *)a, *(char *const *)b);
}

void sh_disk_strv_free(char **v, size_t n)
{
        size_t i;

        if (!v)
                return;
        for (i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

int sh_disk_mounts_below(const char *mountinfo, const char *prefix, char ***ret, size_t *ret_n)
{
        char **v = NULL;
        size_t n = 0, cap = 0, plen = strlen(prefix);
        const char *line = mountinfo;

        while (line && *line) {
                const char *end = strchr(line, '\n'), *f = line, *mp, *mpend;
                size_t len = end ? (size_t)(end - line) : strlen(line);
                int field;

                /* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ...": the fifth field. */
                for (field = 0; field < 4 && f; field++) {
                        f = memchr(f, ' ', len - (size_t)(f - line));
                        if (f)
                                f++;
                }
                if (f && (size_t)(f - line) < len) {
                        mp = f;
                        mpend = memchr(mp, ' ', len - (size_t)(mp - line));
                        if (!mpend)
                                mpend = line + len;
                        char *path = unescape(mp, (size_t)(mpend - mp));

                        if (!path) {
                                sh_disk_strv_free(v, n);
                                return -ENOMEM;
                        }
                        if (strlen(path) > plen && strncmp(path, prefix, plen) == 0) {
                                if (n == cap) {
                                        size_t nc = cap ? cap * 2 : 8;
                                        char **nv = realloc(v, nc * sizeof(*nv));

                                        if (!nv) {
                                                free(path);
                                                sh_disk_strv_free(v, n);
                                                return -ENOMEM;
                                        }
                                        v = nv;
                                        cap = nc;
                                }
                                v[n++] = path;
                        } else {
                                free(path);
                        }
                }
                line = end ? end + 1 : NULL;
        }
        if (n)
                qsort(v, n, sizeof(*v), by_length_desc);
        *ret = v;
        *ret_n = n;
        return 0;
}

int sh_disk_mounts_below_self(const char *prefix, char ***ret, size_t *ret_n, sh_error **err)
{
        _cleanup_close_ int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, cap = 0;
        int r;

        if (fd < 0)
                return sh_error_make(err, errno, "opening /proc/self/mountinfo");
        for (;;) {
                ssize_t k;

                if (cap - len < 4096) {
                        size_t nc = cap ? cap * 2 : 65536;
                        char *nb = realloc(buf, nc + 1);

                        if (!nb)
                                return sh_error_make(err, ENOMEM, "out of memory");
                        buf = nb;
                        cap = nc;
                }
                k = read(fd, buf + len, cap - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return sh_error_make(err, errno, "reading /proc/self/mountinfo");
                if (k == 0)
                        break;
                len += (size_t)k;
        }
        buf[len] = '\0';
        r = sh_disk_mounts_below(buf, prefix, ret, ret_n);
        if (r < 0)
                return sh_error_make(err, -r, "parsing /proc/self/mountinfo");
        return 0;
}

/* ---- children -------------------------------------------------------------------------- */

/* In a child that must not outlive the daemon (a setup finishing after a SIGKILL would mount
 * into a tree the next start is removing): die with the parent. */
static void die_with_parent(pid_t daemon_pid)
{
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != daemon_pid)
                _exit(1);
}

typedef struct detach_arg {
        char **paths;
        size_t n;
        void (*done)(bool ok, void *data);
        void *data;
} detach_arg;

/* A plain unmount fails with EBUSY while anything in this namespace still uses the mount (the
 * daemon closing its last fds into it: a download's file, say). Wait for that rather than
 * detach under it, so that the last reference, and with it the unmount's work, is ours and
 * never the daemon's. Bounded: after 10 s (a long-running remover inside it) detach anyway. */
static int umount_patiently(const char *path)
{
        struct timespec ts = {0, 20 * 1000000L};

        for (int waited = 0; waited < 10000; waited += 20) {
                if (umount2(path, UMOUNT_NOFOLLOW) == 0)
                        return 0;
                if (errno != EBUSY)
                        return -1;
                nanosleep(&ts, NULL);
        }
        return umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
}

static int detach_main(void *p)
{
        detach_arg *a = p;
        int bad = 0;

        for (size_t i = 0; i < a->n; i++) {
                /* Stacked mounts come off one by one; EINVAL: nothing (more) is mounted. */
                for (int k = 0; k < 16; k++) {
                        if (umount_patiently(a->paths[i]) == 0)
                                continue;
                        if (errno != EINVAL && errno != ENOENT)
                                bad = 1;
                        break;
                }
        }
        return bad;
}

static void detach_done(sh_child *c, pid_t pid, int status, void *data)
{
        detach_arg *a = data;

        if (a->done)
                a->done(WIFEXITED(status) && WEXITSTATUS(status) == 0, a->data);
        sh_disk_strv_free(a->paths, a->n);
        free(a);
}

int sh_disk_detach(sh_loop *l, char *const *paths, size_t n, void (*done)(bool ok, void *data),
                   void *data, sh_error **err)
{
        detach_arg *a = calloc(1, sizeof(*a));
        size_t i;

        if (!a || !(a->paths = calloc(n ? n : 1, sizeof(char *)))) {
                free(a);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        for (i = 0; i < n; i++) {
                a->paths[i] = strdup(paths[i]);
                if (!a->paths[i]) {
                        sh_disk_strv_free(a->paths, i);
                        free(a);
                        return sh_error_make(err, ENOMEM, "out of memory");
                }
        }
        a->n = n;
        a->done = done;
        a->data = data;
        /* done runs from the loop, never before sh_child_fork returns. */
        if (!sh_child_fork(l, -1, detach_main, a, detach_done, a)) {
                int r = sh_error_make(err, errno, "starting the unmount helper");

                sh_disk_strv_free(a->paths, a->n);
                free(a);
                return r;
        }
        return 0;
}

/* ---- images and loop devices ----------------------------------------------------------- */

/* An image nobody can name: O_TMPFILE, so no image file outlives its last user, whatever
 * kills whom. Filesystems without O_TMPFILE: a name, unlinked at once. */
static int new_image(int dirfd, uint64_t size)
{
        static unsigned seq;
        int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

        if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
                char name[64];

                snprintf(name, sizeof(name), "img.%ld.%u", (long)getpid(), ++seq);
                fd = openat(dirfd, name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd >= 0 && unlinkat(dirfd, name, 0) < 0) {
                        int e = errno;

                        close(fd);
                        errno = e;
                        return -1;
                }
        }
        if (fd < 0)
                return -1;
        /* Sparse: the host's blocks are taken as the sandbox writes, never beyond size. */
        if (ftruncate(fd, (off_t)size) < 0) {
                int e = errno;

                close(fd);
                errno = e;
                return -1;
        }
        return fd;
}

/* Attach imgfd to a free loop device. AUTOCLEAR: the device lets go of the image (and the
 * image is freed) when its last user (the mount) goes, also when the daemon was killed.
 * Returns the device's fd (and its path), -1 with errno. */
static int loop_attach(int imgfd, char *dev, size_t devsz)
{
        _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        bool dio = true;

        if (ctl < 0)
                return -1;
        for (int tries = 0; tries < 16; tries++) {
                struct loop_config lc;
                int n = ioctl(ctl, LOOP_CTL_GET_FREE), lfd, r, e;

                if (n < 0)
                        return -1;
                snprintf(dev, devsz, "/dev/loop%d", n);
                lfd = open(dev, O_RDWR | O_CLOEXEC);
                if (lfd < 0)
                        return -1;
                memset(&lc, 0, sizeof(lc));
                lc.fd = (uint32_t)imgfd;
                /* Direct I/O keeps one copy of the data in the page cache, not two; kernels
                 * that cannot do it for this file refuse it (newer) or ignore it (older). */
                lc.info.lo_flags = LO_FLAGS_AUTOCLEAR | (dio ? LO_FLAGS_DIRECT_IO : 0);
                r = ioctl(lfd, LOOP_CONFIGURE, &lc);
                if (r < 0 && errno == EINVAL && dio) {
                        dio = false;
                        lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
                        r = ioctl(lfd, LOOP_CONFIGURE, &lc);
                }
                if (r == 0)
                        return lfd;
                e = errno;
                close(lfd);
                errno = e;
                /* EBUSY: another process took the device between GET_FREE and CONFIGURE. */
                if (e != EBUSY)
                        return -1;
        }
        errno = EBUSY;
        return -1;
}

static int copy_range(int in, int out, off_t off, off_t len)
{
        static char buf[65536];

        while (len > 0) {
                off_t o_in = off, o_out = off;
                ssize_t k = copy_file_range(in, &o_in, out, &o_out, (size_t)len, 0);

                if (k < 0 &&
                    (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
                        size_t want = len < (off_t)sizeof(buf) ? (size_t)len : sizeof(buf);

                        k = pread(in, buf, want, off);
                        if (k > 0 && pwrite(out, buf, (size_t)k, off) != k)
                                return -1;
                }
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -1;
                if (k == 0) {
                        errno = EIO;
                        return -1;
                }
                off += k;
                len -= k;
        }
        return 0;
}

/* ---- per-sandbox setup, in a child ------------------------------------------------------ */

enum {
        STEP_OK,
        STEP_IMAGE,
        STEP_COPY,
        STEP_LOOP,
        STEP_MOUNT,
        STEP_POPULATE,
        STEP_BIND,
        STEP_OPEN,
        STEP_QUOTA_GET,
        STEP_QUOTA_SET,
        STEP_PROJID,
};

static const char *step_name(int step)
{
        static const char *const names[] = {
                "?",
                "create the workspace image",
                "copy the template image",
                "attach a loop device",
                "mount the workspace filesystem",
                "prepare the workspace filesystem",
                "bind the workspace",
                "open the workspace",
                "read a project quota",
                "set the project quota",
                "give the workspace its project id",
        };

        return step > 0 && step < (int)ARRAY_SIZE(names) ? names[step] : "?";
}

/* The child's answer, one write on a pipe (atomic below PIPE_BUF). */
typedef struct setup_result {
        int32_t step; /* STEP_OK or the failed step */
        int32_t errnum;
        uint32_t projid;
        uint32_t pad;
} setup_result;

/* The child's fds (sh_child_fork_fds places them in this order). */
#define FD_DIR      3 /* O_PATH: the sandbox directory */
#define FD_RESULT   4 /* write end of the answer pipe */
#define FD_TEMPLATE 5 /* loop: the template image */
#define FD_IMGDIR   6 /* loop: {root}/.disk */

/* Paths through the directory fd: the child resolves nothing the sandbox can reach (the
 * sandbox directory and everything above it belong to root). */
#define P_DISK      "/proc/self/fd/3/disk"
#define P_DISK_WS   "/proc/self/fd/3/disk/workspace"
#define P_WORKSPACE "/proc/self/fd/3/workspace"

/* ext4 in the image: no inode table zeroing in the background (it would write, and so take
 * host blocks for, every inode table); discard: blocks a sandbox frees are given back to the
 * host (the loop device punches holes in the image). */
#define EXT4_OPTS "noinit_itable,discard"

struct sh_disk_job {
        sh_disk *d;
        sh_child *child;
        int rfd; /* read end of the answer pipe */
        pid_t daemon;
        uid_t uid;
        gid_t gid;
        bool root;        /* dirs for an overlay root's upper and work (sh_disk_setup) */
        uint32_t cand[2]; /* project ids to choose from */
        sh_disk_done_fn done;
        void *data;
        /* tmpfs: set up inline (sh_disk_setup), its end told from the loop */
        int step, errnum; /* its result: STEP_OK, or the failed step and its errno */
        bool cancelled;
};

/* The paths of a setup through the sandbox directory's fd (in the child: FD_DIR, the P_*
 * names; inline: the daemon's own fd of it). */
typedef struct setup_paths {
        int dir;
        char disk[40], disk_ws[56], workspace[48];
} setup_paths;

static void paths_of(setup_paths *p, int dirfd)
{
        p->dir = dirfd;
        snprintf(p->disk, sizeof(p->disk), "/proc/self/fd/%d/disk", dirfd);
        snprintf(p->disk_ws, sizeof(p->disk_ws), "/proc/self/fd/%d/disk/workspace", dirfd);
        snprintf(p->workspace, sizeof(p->workspace), "/proc/self/fd/%d/workspace", dirfd);
}

static _Noreturn void setup_answer(int step, int errnum, uint32_t projid)
{
        setup_result res = {.step = step, .errnum = errnum ? errnum : EIO, .projid = projid};

        if (step == STEP_OK)
                res.errnum = 0;
        (void)!write(FD_RESULT, &res, sizeof(res));
        _exit(step == STEP_OK ? 0 : 1);
}

static _Noreturn void setup_fail(int step)
{
        setup_answer(step, errno, 0);
}

/* An overlay root's upper and work, root's, beside the workspace on the filesystem (or in
 * the project) of its limit: what the sandbox writes to its root counts against that limit,
 * and goes with the sandbox's directory. `at` below the sandbox directory. */
static int make_root_dirs(int dir, const char *at)
{
        _cleanup_close_ int fd = -1;

        if (mkdirat(dir, at, 0700) < 0 && errno != EEXIST)
                return -1;
        fd = openat(dir, at, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || (mkdirat(fd, "upper", 0755) < 0 && errno != EEXIST) ||
            (mkdirat(fd, "work", 0700) < 0 && errno != EEXIST))
                return -1;
        return 0;
}

/* loop, tmpfs: the workspace inside the sandbox's filesystem goes to the sandbox's uid and is
 * bound at dir/workspace, nosuid and nodev like the filesystem itself (a setuid binary or a
 * device node planted there must stay inert on the host too). Beside it, .logs: the daemon's
 * files of the sandbox (sh_sandbox_open_log), on its filesystem but out of its sight. */
static int finish_mounted_at(const setup_paths *p, const sh_disk_job *j)
{
        _cleanup_close_ int ws =
                openat(p->dir, "disk/workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (ws < 0 || fchown(ws, j->uid, j->gid) < 0 || fchmod(ws, 0755) < 0 ||
            (mkdirat(p->dir, "disk/.logs", 0700) < 0 && errno != EEXIST) ||
            (j->root && make_root_dirs(p->dir, "disk/root") < 0))
                return STEP_POPULATE;
        if (mount(p->disk_ws, p->workspace, NULL, MS_BIND, NULL) < 0 ||
            mount(NULL, p->workspace, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) < 0)
                return STEP_BIND;
        return STEP_OK;
}

static _Noreturn void finish_mounted(const sh_disk_job *j)
{
        setup_paths p;
        int step;

        paths_of(&p, FD_DIR);
        step = finish_mounted_at(&p, j);
        if (step != STEP_OK)
                setup_fail(step);
        setup_answer(STEP_OK, 0, 0);
}

static _Noreturn void setup_loop(const sh_disk_job *j)
{
        const sh_disk *d = j->d;
        char dev[32];
        int img, lfd;

        img = new_image(FD_IMGDIR, d->size);
        if (img < 0)
                setup_fail(STEP_IMAGE);
        /* A few metadata extents of the template (workspace/ and .trash/ already made): a
         * copy costs a fraction of a millisecond where mke2fs costs several. */
        for (size_t i = 0; i < d->n_ext; i++)
                if (copy_range(FD_TEMPLATE, img, d->ext[i].off, d->ext[i].len) < 0)
                        setup_fail(STEP_COPY);
        lfd = loop_attach(img, dev, sizeof(dev));
        if (lfd < 0)
                setup_fail(STEP_LOOP);
        close(img); /* the loop device holds it now */
        if (mount(dev, P_DISK, "ext4", MS_NOSUID | MS_NODEV, EXT4_OPTS) < 0)
                setup_fail(STEP_MOUNT);
        close(lfd); /* with AUTOCLEAR, the unmount now detaches the device */
        finish_mounted(j);
}

/* tmpfs: a mount and a few directories, no I/O to wait for (the kernel's memory): done inline
 * by the daemon (sh_disk_setup), no child. STEP_OK, or the failed step with errno set. */
static int setup_tmpfs_at(const setup_paths *p, const sh_disk_job *j)
{
        const sh_disk *d = j->d;
        _cleanup_close_ int root = -1;
        char opts[128];

        /* size= bounds the data, nr_inodes= the files (the root and .trash count too). */
        snprintf(opts, sizeof(opts), "size=%llu,nr_inodes=%llu,mode=0711",
                 (unsigned long long)d->size,
                 (unsigned long long)(d->inodes + ROOT_INODES + (j->root ? OVL_INODES : 0)));
        if (mount("tmpfs", p->disk, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return STEP_MOUNT;
        root = openat(p->dir, "disk", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0 || mkdirat(root, "workspace", 0755) < 0 || mkdirat(root, ".trash", 0700) < 0)
                return STEP_POPULATE;
        return finish_mounted_at(p, j);
}

/* project: dir/<name> (made, root's), outside the workspace but in its project, inherited by
 * what is made below it, so that it is charged to the same limit: dir/logs, the daemon's files
 * of the sandbox (sh_sandbox_open_log); dir/root, an overlay root's upper and work (the
 * overlay's renames from work into upper stay in the project: no EXDEV). */
static void set_dir_project(const char *name, uint32_t id)
{
        _cleanup_close_ int fd = -1;
        struct fsxattr fx;

        if (mkdirat(FD_DIR, name, 0700) < 0 && errno != EEXIST)
                setup_fail(STEP_POPULATE);
        fd = openat(FD_DIR, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || ioctl(fd, FS_IOC_FSGETXATTR, &fx) < 0)
                setup_fail(STEP_PROJID);
        fx.fsx_projid = id;
        fx.fsx_xflags |= FS_XFLAG_PROJINHERIT;
        if (ioctl(fd, FS_IOC_FSSETXATTR, &fx) < 0)
                setup_fail(STEP_PROJID);
}

#define PROJECT_FREE_POLL_MS 20
#define PROJECT_FREE_WAIT_MS 3000

static _Noreturn void setup_project(const sh_disk_job *j)
{
        const sh_disk *d = j->d;
        _cleanup_close_ int ws =
                openat(FD_DIR, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        uint64_t best = UINT64_MAX;
        uint32_t id = j->cand[0];
        struct if_dqblk q;
        struct fsxattr fx;

        if (ws < 0)
                setup_fail(STEP_OPEN);
        /* A deleted sandbox's tree stays charged to its id until its removal ends: take the
         * id of this slot that holds nothing, so a new sandbox never starts with someone
         * else's usage (and never more than its limit: at worst, less). When a slot is reused
         * twice in quick succession both ids may still be charged for a moment (their
         * removers are at work): this is a child, so it waits for one to empty, bounded
         * (PROJECT_FREE_WAIT_MS), then takes the emptier. */
        for (unsigned waited = 0;; waited += PROJECT_FREE_POLL_MS) {
                const struct timespec ts = {0, PROJECT_FREE_POLL_MS * 1000000L};

                best = UINT64_MAX;
                for (int i = 0; i < 2; i++) {
                        uint64_t use;

                        memset(&q, 0, sizeof(q));
                        if (sh_quotactl_fd(ws, QCMD(Q_GETQUOTA, PRJQUOTA), j->cand[i], &q) < 0) {
                                if (errno != ENOENT && errno != ESRCH)
                                        setup_fail(STEP_QUOTA_GET);
                                q.dqb_curspace = q.dqb_curinodes = 0;
                        }
                        use = q.dqb_curspace + q.dqb_curinodes;
                        if (use < best) {
                                best = use;
                                id = j->cand[i];
                        }
                        if (use == 0)
                                break;
                }
                if (best == 0 || waited >= PROJECT_FREE_WAIT_MS)
                        break;
                nanosleep(&ts, NULL);
        }
        /* The limits first, then the id: the workspace is never in an unlimited project. */
        memset(&q, 0, sizeof(q));
        q.dqb_bhardlimit = d->size / 1024; /* in 1 KiB quota blocks */
        q.dqb_ihardlimit = d->inodes;
        q.dqb_valid = QIF_LIMITS;
        if (sh_quotactl_fd(ws, QCMD(Q_SETQUOTA, PRJQUOTA), id, &q) < 0)
                setup_fail(STEP_QUOTA_SET);
        /* PROJINHERIT: everything created below inherits the id; rename(2) into the tree
         * from another project fails with EXDEV, so nothing enters uncharged. */
        if (ioctl(ws, FS_IOC_FSGETXATTR, &fx) < 0)
                setup_fail(STEP_PROJID);
        fx.fsx_projid = id;
        fx.fsx_xflags |= FS_XFLAG_PROJINHERIT;
        if (ioctl(ws, FS_IOC_FSSETXATTR, &fx) < 0)
                setup_fail(STEP_PROJID);
        set_dir_project("logs", id);
        if (j->root) {
                set_dir_project("root", id);
                if (make_root_dirs(FD_DIR, "root") < 0)
                        setup_fail(STEP_POPULATE);
        }
        setup_answer(STEP_OK, 0, id);
}

static int setup_main(void *p)
{
        const sh_disk_job *j = p;

        die_with_parent(j->daemon);
        switch (j->d->mode) {
        case SH_DISK_LOOP:
                setup_loop(j);
        case SH_DISK_TMPFS: /* set up inline (sh_disk_setup), never by a child */
                setup_answer(STEP_MOUNT, EINVAL, 0);
        case SH_DISK_PROJECT:
                setup_project(j);
        case SH_DISK_NONE:
                break;
        }
        setup_answer(STEP_OK, 0, 0);
}

static void setup_done(sh_child *c, pid_t pid, int status, void *data)
{
        sh_disk_job *j = data;
        setup_result res = {0};
        sh_error *err = NULL;
        ssize_t n;

        n = read(j->rfd, &res, sizeof(res));
        if (n == (ssize_t)sizeof(res) && res.step == STEP_OK && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0) {
                /* done */
        } else if (n == (ssize_t)sizeof(res) && res.step != STEP_OK) {
                sh_error_make(&err, res.errnum, "setting up the workspace's disk limit: %s: %s",
                              step_name(res.step), strerror(res.errnum));
                res.projid = 0;
        } else {
                sh_error_make(&err, WIFSIGNALED(status) ? EINTR : EIO,
                              "setting up the workspace's disk limit: the helper %s %d",
                              WIFSIGNALED(status) ? "was killed by signal" : "exited with",
                              WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
                res.projid = 0;
        }
        sh_close(j->rfd);
        j->done(err, res.projid, j->data);
        sh_error_release(&err);
        free(j);
}

/* An inline setup's end, from the loop (as a child's would come). */
static void inline_done(sh_loop *l, sh_timer *t, void *data)
{
        sh_disk_job *j = data;
        sh_error *err = NULL;

        if (j->step != STEP_OK)
                sh_error_make(&err, j->errnum, "setting up the workspace's disk limit: %s: %s",
                              step_name(j->step), strerror(j->errnum));
        else if (j->cancelled)
                sh_error_make(&err, ECANCELED, "setting up the workspace's disk limit: cancelled");
        j->done(err, 0, j->data);
        sh_error_release(&err);
        free(j);
}

/* tmpfs: the mount and its directories right here (~0.2 ms of the loop; a child's fork and
 * exit cost the create ~2.5 ms more), the end told from the loop. */
static int setup_inline(sh_disk_job *j, sh_loop *l, int dirfd, sh_disk_job **ret, sh_error **err)
{
        setup_paths p;

        paths_of(&p, dirfd);
        j->step = setup_tmpfs_at(&p, j);
        j->errnum = j->step == STEP_OK ? 0 : errno ? errno : EIO;
        if (!sh_loop_add_timer(l, 0, inline_done, j)) {
                free(j);
                return sh_error_make(err, ENOMEM, "scheduling the disk limit's end");
        }
        *ret = j;
        return 0;
}

int sh_disk_setup(sh_disk *d, sh_loop *l, int dirfd, uid_t uid, gid_t gid, unsigned slot, bool root,
                  sh_disk_done_fn done, void *data, sh_disk_job **ret, sh_error **err)
{
        sh_disk_job *j;
        int p[2], keep[4], n = 2;

        if (!d || d->mode == SH_DISK_NONE)
                return sh_error_make(err, EINVAL, "no disk limit to set up");
        j = calloc(1, sizeof(*j));
        if (!j)
                return sh_error_make(err, ENOMEM, "out of memory");
        if (d->mode == SH_DISK_TMPFS) {
                *j = (sh_disk_job){.d = d,
                                   .rfd = -1,
                                   .uid = uid,
                                   .gid = gid,
                                   .root = root,
                                   .done = done,
                                   .data = data};
                return setup_inline(j, l, dirfd, ret, err);
        }
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
                free(j);
                return sh_error_make(err, errno, "pipe");
        }
        j->d = d;
        j->rfd = p[0];
        j->daemon = getpid();
        j->uid = uid;
        j->gid = gid;
        j->root = root;
        j->cand[0] = d->proj_base + slot;
        j->cand[1] = d->proj_base + d->max_sandboxes + slot;
        j->done = done;
        j->data = data;
        keep[0] = dirfd;
        keep[1] = p[1];
        if (d->mode == SH_DISK_LOOP) {
                keep[n++] = d->templfd;
                keep[n++] = d->imgdirfd;
        }
        /* setup_done runs from the loop, never before sh_child_fork_fds returns. */
        j->child = sh_child_fork_fds(l, keep, n, setup_main, j, setup_done, j);
        close(p[1]);
        if (!j->child) {
                int e = errno;

                close(p[0]);
                free(j);
                return sh_error_make(err, e, "starting the disk limit helper");
        }
        *ret = j;
        return 0;
}

void sh_disk_job_cancel(sh_disk_job *j)
{
        if (j && j->child)
                (void)sh_child_kill(j->child, SIGKILL);
        else if (j)
                j->cancelled = true; /* inline: done, its end says cancelled */
}

/* ---- choosing the mechanism, at start --------------------------------------------------- */

/* CAP_SYS_RESOURCE lets a process ignore quota hard limits, and the daemon (uploads, restores
 * by rsync, everything it forks) writes into workspaces as root: drop it for good, from the
 * bounding set too, so that no helper it execs gets it back. */
int sh_disk_drop_sys_resource(void)
{
        cap_value_t v = CAP_SYS_RESOURCE;
        cap_flag_value_t on = CAP_CLEAR;
        cap_t c;
        int r = 0;

        if (prctl(PR_CAPBSET_READ, (unsigned long)CAP_SYS_RESOURCE, 0, 0, 0) == 1 &&
            cap_drop_bound(CAP_SYS_RESOURCE) < 0)
                return -1;
        (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, (unsigned long)CAP_SYS_RESOURCE, 0, 0);
        c = cap_get_proc();
        if (!c)
                return -1;
        if (cap_set_flag(c, CAP_EFFECTIVE, 1, &v, CAP_CLEAR) < 0 ||
            cap_set_flag(c, CAP_PERMITTED, 1, &v, CAP_CLEAR) < 0 ||
            cap_set_flag(c, CAP_INHERITABLE, 1, &v, CAP_CLEAR) < 0 || cap_set_proc(c) < 0)
                r = -1;
        cap_free(c);
        if (r < 0)
                return -1;
        c = cap_get_proc();
        if (!c || cap_get_flag(c, CAP_SYS_RESOURCE, CAP_EFFECTIVE, &on) < 0 || on != CAP_CLEAR) {
                if (c)
                        cap_free(c);
                errno = EPERM;
                return -1;
        }
        cap_free(c);
        return 0;
}

/* A fresh directory for a start-up trial (in {root}/.disk). */
static int probe_dir(sh_disk *d, char *path, size_t size, const char *root, char *name,
                     size_t namesz)
{
        snprintf(name, namesz, "probe.%ld", (long)getpid());
        if (snprintf(path, size, "%s/%s/%s", root, IMG_DIR, name) >= (int)size) {
                errno = ENAMETOOLONG;
                return -1;
        }
        if (mkdirat(d->imgdirfd, name, 0700) < 0 && errno != EEXIST)
                return -1;
        return 0;
}

static int probe_project(sh_disk *d, int rootfd, const char *root, char *why, size_t whysz)
{
        struct if_dqblk q;
        struct fsxattr fx;
        char path[4200], name[64];
        _cleanup_close_ int fd = -1;
        int r = -1;

        if (sh_volquota_probe(rootfd, "the state root", why, whysz) < 0)
                return -1;
        /* Try what every create will do: a quota for the first id, that id on a directory. */
        if (probe_dir(d, path, sizeof(path), root, name, sizeof(name)) < 0) {
                snprintf(why, whysz, "creating a probe directory: %s", strerror(errno));
                return -1;
        }
        fd = openat(d->imgdirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        memset(&q, 0, sizeof(q));
        q.dqb_bhardlimit = d->size / 1024;
        q.dqb_ihardlimit = d->inodes;
        q.dqb_valid = QIF_LIMITS;
        if (fd < 0)
                snprintf(why, whysz, "opening a probe directory: %s", strerror(errno));
        else if (sh_quotactl_fd(fd, QCMD(Q_SETQUOTA, PRJQUOTA), d->proj_base, &q) < 0)
                snprintf(why, whysz, "setting a project quota (Q_SETQUOTA): %s", strerror(errno));
        else if (ioctl(fd, FS_IOC_FSGETXATTR, &fx) < 0)
                snprintf(why, whysz, "FS_IOC_FSGETXATTR: %s", strerror(errno));
        else if ((fx.fsx_projid = d->proj_base, fx.fsx_xflags |= FS_XFLAG_PROJINHERIT,
                  ioctl(fd, FS_IOC_FSSETXATTR, &fx)) < 0)
                snprintf(why, whysz, "setting a project id (FS_IOC_FSSETXATTR): %s",
                         strerror(errno));
        else if (ioctl(fd, FS_IOC_FSGETXATTR, &fx) < 0 || fx.fsx_projid != d->proj_base)
                snprintf(why, whysz, "the project id did not hold");
        else if (sh_disk_drop_sys_resource() < 0)
                snprintf(why, whysz, "cannot drop CAP_SYS_RESOURCE (it ignores quota limits): %s",
                         strerror(errno));
        else
                r = 0;
        fd = sh_close(fd);
        (void)unlinkat(d->imgdirfd, name, AT_REMOVEDIR);
        return r;
}

static const char *find_mke2fs(void)
{
        /* Trusted system directories only, never the PATH the daemon was started with. */
        static const char *const cand[] = {"/usr/sbin/mke2fs", "/sbin/mke2fs",
                                           "/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"};

        for (size_t i = 0; i < ARRAY_SIZE(cand); i++)
                if (access(cand[i], X_OK) == 0)
                        return cand[i];
        return NULL;
}

/* mke2fs on the template, at start: waited for here (nothing is served yet), bounded. */
static int run_mkfs(const char *mkfs, int imgfd, uint64_t inodes, char *why, size_t whysz)
{
        char nbuf[32], errbuf[512];
        char *const argv[] = {(char *)mkfs, "-q", "-F", "-t", "ext4", "-b", "4096", "-m",
                              "0", /* no blocks reserved for root: the daemon writes as root */
                              "-N", nbuf, "-I", "256",
                              /* a workspace never outlives the daemon: no journal to write */
                              "-O", "^has_journal,^resize_inode", "-E",
                              "lazy_itable_init=1,nodiscard,root_owner=0:0", "/proc/self/fd/3",
                              NULL};
        char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t at;
        sigset_t none, all;
        int ep[2], status = 0, src = imgfd, r;
        _cleanup_close_ int lifted = -1;
        pid_t pid;
        ssize_t n;

        snprintf(nbuf, sizeof(nbuf), "%llu", (unsigned long long)(inodes + EXT4_RESERVED));
        if (imgfd == 3) /* dup2(3, 3) would keep O_CLOEXEC */
                src = lifted = fcntl(imgfd, F_DUPFD_CLOEXEC, 10);
        if (src < 0 || pipe2(ep, O_CLOEXEC | O_NONBLOCK) < 0) {
                snprintf(why, whysz, "mke2fs: %s", strerror(errno));
                return -1;
        }
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, ep[1], 2);
        posix_spawn_file_actions_adddup2(&fa, src, 3);
        posix_spawnattr_init(&at);
        sigemptyset(&none);
        sigfillset(&all);
        /* The daemon blocks its signals for signalfd: the child must not inherit that. */
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setsigdefault(&at, &all);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        r = posix_spawn(&pid, mkfs, &fa, &at, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&at);
        close(ep[1]);
        if (r != 0) {
                close(ep[0]);
                snprintf(why, whysz, "running %s: %s", mkfs, strerror(r));
                return -1;
        }
        for (int waited = 0;; waited += 5) {
                pid_t w = waitpid(pid, &status, WNOHANG);
                struct timespec ts = {0, 5 * 1000000L};

                if (w == pid)
                        break;
                if (w < 0 && errno != EINTR) {
                        status = -1;
                        break;
                }
                if (waited >= MKFS_WAIT_MS) {
                        kill(pid, SIGKILL);
                        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                                ;
                        status = -1;
                        break;
                }
                nanosleep(&ts, NULL);
        }
        n = read(ep[0], errbuf, sizeof(errbuf) - 1);
        close(ep[0]);
        errbuf[n > 0 ? n : 0] = '\0';
        if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        errbuf[strcspn(errbuf, "\n")] = '\0';
        snprintf(why, whysz, "%s failed (status %d)%s%s", mkfs, status, *errbuf ? ": " : "",
                 errbuf);
        return -1;
}

/* The template's data extents: all a per-sandbox copy has to write. */
static int scan_extents(sh_disk *d)
{
        off_t off = 0, end = (off_t)d->size, total = 0;

        while (off < end) {
                off_t data = lseek(d->templfd, off, SEEK_DATA), hole;

                if (data < 0 && errno == ENXIO)
                        break;
                if (data < 0)
                        return -1;
                hole = lseek(d->templfd, data, SEEK_HOLE);
                if (hole < 0)
                        return -1;
                if (d->n_ext == MAX_EXTENTS) {
                        errno = E2BIG;
                        return -1;
                }
                if (!d->ext && !(d->ext = calloc(MAX_EXTENTS, sizeof(*d->ext))))
                        return -1;
                d->ext[d->n_ext].off = data;
                d->ext[d->n_ext].len = hole - data;
                d->n_ext++;
                total += hole - data;
                off = hole;
        }
        /* A filesystem that cannot tell holes from data would make every create copy the
         * whole image. */
        if (total > (off_t)(64ULL << 20)) {
                errno = EOPNOTSUPP;
                return -1;
        }
        return 0;
}

/* The template's first mount (dev at path: its workspace and .trash made), in a child of a
 * mount namespace of its own: a process that copies the daemon's mount table meanwhile
 * (another daemon's sandbox, `unshare -m`) would otherwise keep the filesystem alive past our
 * unmount, its last writes never reaching the template file the creates copy (seen: a copy's
 * inode table with bad checksums). In the child's private namespace nobody can. 0, or -1 with
 * why. Start-up only: the wait blocks. */
static int prepare_template(const char *dev, const char *path, char *why, size_t whysz)
{
        static const char *const steps[] = {"a mount namespace", "mounting ext4",
                                            "preparing the template", "unmounting the template"};
        int ep[2], res[2] = {0, 0}, status = 0, fd;
        pid_t pid;
        ssize_t n;

        if (pipe2(ep, O_CLOEXEC) < 0) {
                snprintf(why, whysz, "preparing the template: %s", strerror(errno));
                return -1;
        }
        pid = fork();
        if (pid < 0) {
                snprintf(why, whysz, "preparing the template: fork: %s", strerror(errno));
                close(ep[0]);
                close(ep[1]);
                return -1;
        }
        if (pid == 0) {
                int step = 0;

                close(ep[0]);
                if (unshare(CLONE_NEWNS) < 0 ||
                    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        goto child_fail;
                step = 1;
                if (mount(dev, path, "ext4", MS_NOSUID | MS_NODEV, EXT4_OPTS) < 0)
                        goto child_fail;
                step = 2;
                fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || mkdirat(fd, "workspace", 0755) < 0 || mkdirat(fd, ".trash", 0700) < 0)
                        goto child_fail;
                close(fd);
                step = 3;
                if (umount2(path, UMOUNT_NOFOLLOW) < 0)
                        goto child_fail;
                _exit(0);
        child_fail:
                res[0] = step;
                res[1] = errno;
                (void)!write(ep[1], res, sizeof(res));
                _exit(1);
        }
        close(ep[1]);
        n = read(ep[0], res, sizeof(res));
        close(ep[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        if (n == (ssize_t)sizeof(res) && res[0] >= 0 && res[0] < (int)ARRAY_SIZE(steps))
                snprintf(why, whysz, "%s (%s): %s", steps[res[0]], dev, strerror(res[1]));
        else
                snprintf(why, whysz, "preparing the template: its child ended (status %d)", status);
        return -1;
}

static int probe_loop(sh_disk *d, const char *root, char *why, size_t whysz)
{
        const char *mkfs = find_mke2fs();
        char path[4200], name[64], dev[32];
        _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        _cleanup_close_ int lfd = -1;
        int r = -1;

        if (ctl < 0) {
                snprintf(why, whysz, "no loop devices (/dev/loop-control: %s)", strerror(errno));
                return -1;
        }
        if (!mkfs) {
                snprintf(why, whysz, "mke2fs (e2fsprogs) not found in /usr/sbin or /sbin");
                return -1;
        }
        d->templfd = new_image(d->imgdirfd, d->size);
        if (d->templfd < 0) {
                snprintf(why, whysz, "creating the template image: %s", strerror(errno));
                return -1;
        }
        if (run_mkfs(mkfs, d->templfd, d->inodes, why, whysz) < 0)
                return -1;
        /* Try it, as every create will use it, and give it the workspace and .trash. */
        lfd = loop_attach(d->templfd, dev, sizeof(dev));
        if (lfd < 0) {
                snprintf(why, whysz, "attaching a loop device: %s", strerror(errno));
                return -1;
        }
        if (probe_dir(d, path, sizeof(path), root, name, sizeof(name)) < 0) {
                snprintf(why, whysz, "creating a probe directory: %s", strerror(errno));
                return -1;
        }
        r = prepare_template(dev, path, why, whysz);
        if (r == 0 && scan_extents(d) < 0) {
                snprintf(why, whysz, "reading the template's extents (SEEK_DATA): %s",
                         strerror(errno));
                r = -1;
        }
        (void)unlinkat(d->imgdirfd, name, AT_REMOVEDIR);
        return r;
}

static int probe_tmpfs(sh_disk *d, const char *root, char *why, size_t whysz)
{
        char path[4200], name[64], opts[128];
        int r = 0;

        if (probe_dir(d, path, sizeof(path), root, name, sizeof(name)) < 0) {
                snprintf(why, whysz, "creating a probe directory: %s", strerror(errno));
                return -1;
        }
        snprintf(opts, sizeof(opts), "size=%llu,nr_inodes=%llu,mode=0711",
                 (unsigned long long)d->size, (unsigned long long)(d->inodes + ROOT_INODES));
        if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
                snprintf(why, whysz, "mounting a tmpfs (%s): %s", opts, strerror(errno));
                r = -1;
        } else if (umount2(path, UMOUNT_NOFOLLOW) < 0) {
                (void)umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
        }
        (void)unlinkat(d->imgdirfd, name, AT_REMOVEDIR);
        return r;
}

/* {root}/.disk holds nothing by name between two runs except what a killed start left: a
 * probe mount (detached here: a probe holds nothing) and images of the fallback. */
static void clean_img_dir(sh_disk *d, const char *root)
{
        char prefix[4200], **mps = NULL;
        size_t n = 0;
        DIR *dir;
        struct dirent *de;
        int fd;

        snprintf(prefix, sizeof(prefix), "%s/%s/", root, IMG_DIR);
        if (sh_disk_mounts_below_self(prefix, &mps, &n, NULL) == 0) {
                for (size_t i = 0; i < n; i++)
                        (void)umount2(mps[i], MNT_DETACH | UMOUNT_NOFOLLOW);
                sh_disk_strv_free(mps, n);
        }
        fd = openat(d->imgdirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || !(dir = fdopendir(fd))) {
                sh_close(fd);
                return;
        }
        while ((de = readdir(dir)))
                if (!STREQ(de->d_name, ".") && !STREQ(de->d_name, "..") &&
                    unlinkat(d->imgdirfd, de->d_name, 0) < 0 && errno == EISDIR)
                        (void)unlinkat(d->imgdirfd, de->d_name, AT_REMOVEDIR);
        closedir(dir);
}

static int setting_error(sh_error **err, const char *fmt, ...) _printf_(2, 3);
static int setting_error(sh_error **err, const char *fmt, ...)
{
        char buf[2048];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        buf[strcspn(buf, "\n")] = '\0'; /* one line, like every invalid setting */
        return sh_error_new(err, SH_E_SETTING, "%s", buf);
}

int sh_disk_open(const sh_config *cfg, int rootfd, const char *root, sh_disk **ret, sh_error **err)
{
        sh_disk *d = calloc(1, sizeof(*d));
        char why1[600] = "", why2[600] = "";
        const char *q = cfg->disk_quota ? cfg->disk_quota : "auto";

        if (!d)
                return sh_error_make(err, ENOMEM, "out of memory");
        d->imgdirfd = d->templfd = -1;
        d->size = cfg->disk_max;
        d->inodes = cfg->disk_inodes_max;
        d->proj_base = (uint32_t)cfg->disk_project_base;
        d->max_sandboxes = (unsigned)cfg->max_sandboxes;
        cap_mode = SH_DISK_NONE;
        if (cfg->disk_max_auto && !STREQ(q, "none")) {
                /* A share of the volume every workspace is on: one sandbox never fills it. */
                struct statvfs v;

                if (fstatvfs(rootfd, &v) < 0) {
                        sh_error_make(err, errno, "statvfs of the state root '%s'", root);
                        goto fail;
                }
                d->size = sh_config_disk_auto((uint64_t)v.f_blocks * v.f_frsize);
                if (!d->inodes)
                        d->inodes = sh_config_disk_inodes(d->size);
        }
        /* Whole 4 KiB blocks, never more than asked. */
        d->size &= ~4095ULL;
        if (!d->size) {
                *ret = d;
                return 0;
        }
        if (mkdirat(rootfd, IMG_DIR, 0700) < 0 && errno != EEXIST) {
                sh_error_make(err, errno, "creating '%s/%s'", root, IMG_DIR);
                goto fail;
        }
        d->imgdirfd = openat(rootfd, IMG_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d->imgdirfd < 0) {
                sh_error_make(err, errno, "opening '%s/%s'", root, IMG_DIR);
                goto fail;
        }
        clean_img_dir(d, root);
        if (STREQ(q, "project") || STREQ(q, "auto")) {
                if (probe_project(d, rootfd, root, why1, sizeof(why1)) == 0)
                        d->mode = SH_DISK_PROJECT;
                else if (STREQ(q, "project")) {
                        setting_error(err,
                                      "SANDBOX_HOST_DISK_QUOTA=project cannot hold "
                                      "SANDBOX_HOST_DISK_MAX on '%s': %s",
                                      root, why1);
                        goto fail;
                }
        }
        if (d->mode == SH_DISK_NONE && (STREQ(q, "loop") || STREQ(q, "auto"))) {
                if (probe_loop(d, root, why2, sizeof(why2)) == 0)
                        d->mode = SH_DISK_LOOP;
                else if (STREQ(q, "loop")) {
                        setting_error(err,
                                      "SANDBOX_HOST_DISK_QUOTA=loop cannot hold "
                                      "SANDBOX_HOST_DISK_MAX on '%s': %s",
                                      root, why2);
                        goto fail;
                }
        }
        if (STREQ(q, "tmpfs")) {
                if (probe_tmpfs(d, root, why1, sizeof(why1)) < 0) {
                        setting_error(err,
                                      "SANDBOX_HOST_DISK_QUOTA=tmpfs cannot hold "
                                      "SANDBOX_HOST_DISK_MAX: %s",
                                      why1);
                        goto fail;
                }
                d->mode = SH_DISK_TMPFS;
        }
        if (d->mode == SH_DISK_NONE && cfg->disk_max_auto) {
                /* The default asked for a limit where the host can hold one: this one cannot.
                 * No limit, said at start (the manager logs it) and in /healthz. */
                if (asprintf(&d->why_none,
                             "nothing on this host can hold a disk limit on '%s': project "
                             "quota: %s; loop devices: %s",
                             root, why1, why2) < 0) {
                        d->why_none = NULL;
                        sh_error_make(err, ENOMEM, "out of memory");
                        goto fail;
                }
                d->imgdirfd = sh_close(d->imgdirfd);
                d->templfd = sh_close(d->templfd);
                free(d->ext);
                d->ext = NULL;
                d->n_ext = 0;
                *ret = d;
                return 0;
        }
        if (d->mode == SH_DISK_NONE) {
                /* Never a limit that is silently not held. */
                setting_error(err,
                              "SANDBOX_HOST_DISK_MAX is set, but nothing on this host can "
                              "enforce it on '%s': project quota: %s; loop devices: %s "
                              "(provide an ext4 or XFS volume with project quota, or set "
                              "SANDBOX_HOST_DISK_QUOTA=tmpfs; see docs/deployment.md)",
                              root, why1, why2);
                goto fail;
        }
        if (d->mode != SH_DISK_LOOP) {
                d->templfd = sh_close(d->templfd);
                free(d->ext);
                d->ext = NULL;
                d->n_ext = 0;
        }
        cap_mode = d->mode;
        *ret = d;
        return 0;
fail:
        sh_disk_free(d);
        return -1;
}

void sh_disk_free(sh_disk *d)
{
        if (!d)
                return;
        sh_close(d->imgdirfd);
        sh_close(d->templfd);
        free(d->ext);
        free(d->why_none);
        free(d);
}
