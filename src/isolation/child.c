/* child.c: sandbox-init, the program every sandbox worker runs (static, embedded in the daemon
 * and exec'd from a sealed memfd: initimage.c), as ordered lists of small steps: the
 * intermediate (read the spec, join the sandbox cgroup, unshare the namespaces, fork PID 1),
 * the worker (PID 1: hostname, root filesystem, loopback, resource limits, privileges reduced
 * to three capabilities, then serve execs and reap orphans) and the exec child (exec cgroup,
 * session, stdio, privileges dropped, execve under the seccomp filter PID 1 loaded last of
 * its setup). No logging here: failures travel
 * to the daemon as (step, errno) records. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "sh/caps.h"
#include "sh/jail.h"
#include "sh/macro.h"
#include "sh/proto.h"
#include "sh/seccomp.h"
#include "sh/syscalls.h"
#include "sh/volquota.h"

#define CTL_FD SH_WORKER_CTL_FD /* the control socket, placed by the daemon */

/* Write a short string to a file (procfs knobs). 0 or -1 with errno. */
static int write_file(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        ssize_t n;
        int saved;

        if (fd < 0)
                return -1;
        n = write(fd, text, strlen(text));
        saved = errno;
        close(fd);
        errno = saved;
        return n == (ssize_t)strlen(text) ? 0 : -1;
}

static void send_msg(uint32_t type, uint32_t id, int a, int b)
{
        sh_msg m = sh_proto_msg(type, id, a, b);

        /* Nothing to do if the daemon is gone: the worker then exits on EOF. */
        (void)!send(CTL_FD, &m, sizeof(m), MSG_NOSIGNAL);
}

/* The PID message with an fd of the sandbox's network namespace (ours: unshared already) when
 * the sandboxes have network: the daemon makes the sandbox's link in it. PID 1 is not dumpable
 * once set up (sh_caps_limit_init), so the daemon could not open it by /proc without
 * CAP_SYS_PTRACE; handed over, it needs nothing. */
static void send_pid(const sh_worker_spec *s, pid_t pid)
{
        sh_msg m = sh_proto_msg(SH_MSG_PID, 0, pid, 0);
        union {
                char b[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } cbuf;
        struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        int fd = s->nameserver ? open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC) : -1;

        if (fd >= 0) {
                struct cmsghdr *c;

                memset(&cbuf, 0, sizeof(cbuf));
                mh.msg_control = cbuf.b;
                mh.msg_controllen = sizeof(cbuf.b);
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(fd));
        }
        /* Nothing to do if the daemon is gone: the worker then exits on EOF. Without the fd
         * the daemon fails a create that needs the sandbox's network, saying so. */
        (void)!sendmsg(CTL_FD, &mh, MSG_NOSIGNAL);
        if (fd >= 0)
                close(fd);
}

static _Noreturn void fail(int step)
{
        send_msg(SH_MSG_SETUP_FAILED, 0, step, errno);
        _exit(1);
}

/* ---- the root filesystem --------------------------------------------------------------- */

static int path_join(char *out, size_t size, const char *a, const char *b)
{
        int n = snprintf(out, size, "%s/%s", a, b);

        if (n < 0 || (size_t)n >= size) {
                errno = ENAMETOOLONG;
                return -1;
        }
        return 0;
}

static int make_dir(const char *root, const char *name, mode_t mode, char *out, size_t size)
{
        if (path_join(out, size, root, name) < 0)
                return -1;
        if (mkdir(out, mode) < 0 && errno != EEXIST)
                return -1;
        return 0;
}

static int setup_image(const sh_worker_spec *s)
{
        char p[SH_WORKER_PATH_MAX + 300];
        int i;

        for (i = 0; i < s->n_entries; i++) {
                const sh_root_entry *e = &s->entries[i];

                if (e->is_link) {
                        if (path_join(p, sizeof(p), s->rootfs, e->name) < 0 ||
                            symlink(e->target, p) < 0)
                                return -1;
                        continue;
                }
                if (make_dir(s->rootfs, e->name, 0755, p, sizeof(p)) < 0 ||
                    sh_jail_bind(e->src, p, SH_JAIL_RDONLY | SH_JAIL_RECURSIVE) < 0)
                        return -1;
        }
        return 0;
}

/* ---- an overlay root (an OCI image's layers) ---- */

/* fsopen(2) and friends, Linux 5.2, by number: glibc 2.36's <sys/mount.h> declares them but
 * clashes with the kernel's mount headers, and `lowerdir+` (one layer per call) needs 6.8. */
#define OVL_FSCONFIG_SET_FLAG   0
#define OVL_FSCONFIG_SET_STRING 1
#define OVL_FSCONFIG_CMD_CREATE 6
#define OVL_FSOPEN_CLOEXEC      1
#define OVL_FSMOUNT_CLOEXEC     1
#define OVL_MOVE_MOUNT_F_EMPTY  4

/* The options every overlay root gets, as key and value. The layers are hostile (a registry's
 * image): they may carry trusted.overlay.* xattrs of their own (the unpacker writes only the
 * opaque one, but a layer store is data), and these features make the kernel follow such
 * xattrs, so none is on: index=off (no inode index of the upper: an origin xattr could tie a
 * lower inode to another), nfs_export=off (the same, for file handles; a kernel may default it
 * on), redirect_dir=nofollow (trusted.overlay.redirect in a lower would send a directory's
 * lookup to another path of the layers; "off" still follows them where the kernel was built
 * with redirect_always_follow, its default), metacopy=off (a lower's trusted.overlay.metacopy
 * is then refused, EPERM, instead of taking a file's data from the path its redirect names),
 * xino=off (no inode numbers composed across layers: st_ino is the real one). userxattr is not
 * used: PID 1 has the daemon's privilege here (no user namespace, before sh_caps_limit_init),
 * so whiteouts and opaque dirs are the trusted.* ones the unpacker writes, which no sandbox
 * process can set. */
static const char *const ovl_features[][2] = {
        {"index", "off"},    {"nfs_export", "off"}, {"redirect_dir", "nofollow"},
        {"metacopy", "off"}, {"xino", "off"},
};

/* The option string of the legacy mount(2), relative lowers (the caller is in s->layers):
 * -1 with E2BIG when it does not fit one page of mount data. */
static int overlay_data(const sh_worker_spec *s, char *out, size_t size)
{
        size_t off = 0;
        int n, i;

        n = snprintf(out, size, "lowerdir=");
        if (n < 0 || (size_t)n >= size)
                goto big;
        off = (size_t)n;
        for (i = s->n_lowers - 1; i >= 0; i--) { /* the option names the top layer first */
                n = snprintf(out + off, size - off, "%s%s", s->lowers[i], i ? ":" : "");
                if (n < 0 || (size_t)n >= size - off)
                        goto big;
                off += (size_t)n;
        }
        n = snprintf(out + off, size - off, ",upperdir=%s,workdir=%s", s->upper, s->work);
        if (n < 0 || (size_t)n >= size - off)
                goto big;
        off += (size_t)n;
        for (size_t k = 0; k < ARRAY_SIZE(ovl_features); k++) {
                n = snprintf(out + off, size - off, ",%s=%s", ovl_features[k][0],
                             ovl_features[k][1]);
                if (n < 0 || (size_t)n >= size - off)
                        goto big;
                off += (size_t)n;
        }
        return 0;
big:
        errno = E2BIG;
        return -1;
}

static int fsconfig_str(int fd, const char *key, const char *value)
{
        return (int)syscall(SYS_fsconfig, fd, OVL_FSCONFIG_SET_STRING, key, value, 0);
}

/* The new mount API, a layer per `lowerdir+` (Linux 6.8): no bound but the layers'. */
static int overlay_fsconfig(const sh_worker_spec *s)
{
        _cleanup_close_ int fd = (int)syscall(SYS_fsopen, "overlay", OVL_FSOPEN_CLOEXEC), mfd = -1;
        size_t k;
        int i;

        if (fd < 0)
                return -1;
        for (i = s->n_lowers - 1; i >= 0; i--)
                if (fsconfig_str(fd, "lowerdir+", s->lowers[i]) < 0) {
                        if (errno == EINVAL) /* before 6.8: the list does not fit a mount */
                                errno = E2BIG;
                        return -1;
                }
        if (fsconfig_str(fd, "upperdir", s->upper) < 0 || fsconfig_str(fd, "workdir", s->work) < 0)
                return -1;
        for (k = 0; k < ARRAY_SIZE(ovl_features); k++)
                if (fsconfig_str(fd, ovl_features[k][0], ovl_features[k][1]) < 0)
                        return -1;
        if (syscall(SYS_fsconfig, fd, OVL_FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -1;
        mfd = (int)syscall(SYS_fsmount, fd, OVL_FSMOUNT_CLOEXEC,
                           MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (mfd < 0)
                return -1;
        return (int)syscall(SYS_move_mount, mfd, "", AT_FDCWD, s->rootfs, OVL_MOVE_MOUNT_F_EMPTY);
}

/* A directory of the upper, made before the mount: a mount point the root must have whatever
 * the image holds there (missing, a file, a link: never followed by a mount). opaque: the
 * image's own content is hidden (/dev: the sandbox's nodes only). */
static int upper_dir(int upper, const char *name, mode_t mode, bool opaque)
{
        struct stat st;

        if (mkdirat(upper, name, mode) < 0 && errno != EEXIST)
                return -1;
        if (fstatat(upper, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -1;
        if (!S_ISDIR(st.st_mode)) {
                errno = ENOTDIR;
                return -1;
        }
        if (opaque) {
                _cleanup_close_ int fd =
                        openat(upper, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                if (fd < 0 || fsetxattr(fd, "trusted.overlay.opaque", "y", 1, 0) < 0)
                        return -1;
        }
        return 0;
}

/* The sandbox's root: overlayfs of the image's layers (read-only, shared by every sandbox of
 * the image) and the upper of its own (inside its disk limit: the daemon made upper and work
 * there), nosuid and nodev. The lowers are short relative names: PID 1 works in the layers
 * directory, so some 50 layers of 69 bytes ("<hex>/root") fit the page of mount data mount(2)
 * takes; a longer list goes through fsconfig, a layer a call, where the kernel has
 * `lowerdir+` (6.8; before it: E2BIG). */
static int setup_overlay(const sh_worker_spec *s)
{
        static char data[4096]; /* one page: the legacy mount's bound */
        _cleanup_close_ int upper = open(s->upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r;

        if (upper < 0 || fchmod(upper, 0755) < 0 || upper_dir(upper, "dev", 0755, true) < 0 ||
            upper_dir(upper, "proc", 0555, false) < 0 ||
            upper_dir(upper, "workspace", 0755, false) < 0 ||
            upper_dir(upper, "tmp", 01777, false) < 0 || upper_dir(upper, "tools", 0755, false) < 0)
                return -1;
        if (chdir(s->layers) < 0)
                return -1;
        if (overlay_data(s, data, sizeof(data)) == 0)
                r = mount("overlay", s->rootfs, "overlay", MS_NOSUID | MS_NODEV, data);
        else
                r = overlay_fsconfig(s);
        explicit_bzero(data, sizeof(data));
        if (r < 0)
                return -1;
        return chdir("/");
}

/* /tmp, /var/tmp and /dev/shm are directories of one tmpfs, of /tmp's size together, its
 * pages charged to the sandbox's memory: one superblock, not three (every superblock costs the
 * kernel memory in every memory cgroup of the machine: docs/performance.md, "Density"). It is
 * mounted at `.tmpfs` beside the root's mount point (the daemon's, in the sandbox's directory:
 * outside the new root, so no image entry can be in its way), each directory bound in place
 * (nosuid, nodev, as the tmpfs), then the scratch mount is detached: the sandbox sees only the
 * three binds, whose roots are "/tmp", "/var-tmp" and "/shm" of the tmpfs. Our mount namespace
 * is private: nothing of this reaches the host's. */
static int setup_tmpfs(const sh_worker_spec *s, char *scratch, size_t size)
{
        static const char *const dirs[] = {"tmp", "var-tmp", "shm"};
        const char *slash = strrchr(s->rootfs, '/');
        char opts[64], p[SH_WORKER_PATH_MAX + 64];
        size_t i;
        int n;

        if (!slash) {
                errno = EINVAL;
                return -1;
        }
        n = snprintf(scratch, size, "%.*s/.tmpfs", (int)(slash - s->rootfs), s->rootfs);
        if (n < 0 || (size_t)n >= size) {
                errno = ENAMETOOLONG;
                return -1;
        }
        snprintf(opts, sizeof(opts), "mode=0700,size=%llu", (unsigned long long)s->tmp_size);
        if (mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return -1;
        for (i = 0; i < ARRAY_SIZE(dirs); i++)
                if (make_dir(scratch, dirs[i], 01777, p, sizeof(p)) < 0 || chmod(p, 01777) < 0)
                        return -1;
        return 0;
}

/* /var/tmp, writable like /tmp (programs, and OpenSandbox's clients, cd there): the tmpfs's
 * var-tmp. An image without /var gets an empty one on the root tmpfs; an image's own /var
 * keeps its content (read-only) and gets the bind over its var/tmp when it has that
 * directory. A /var or var/tmp that is not a directory (a link: lstat, never followed) is
 * left as the image has it, so a mount never lands where a link points. */
static int setup_var_tmp(const sh_worker_spec *s, const char *scratch)
{
        char var[SH_WORKER_PATH_MAX + 16], p[SH_WORKER_PATH_MAX + 32];
        struct stat st;

        if (path_join(var, sizeof(var), s->rootfs, "var") < 0)
                return -1;
        if (lstat(var, &st) < 0) {
                if (errno != ENOENT || mkdir(var, 0755) < 0)
                        return -1;
        } else if (!S_ISDIR(st.st_mode)) {
                return 0;
        }
        if (path_join(p, sizeof(p), var, "tmp") < 0)
                return -1;
        if (lstat(p, &st) < 0) {
                if (errno != ENOENT)
                        return -1;
                if (mkdir(p, 01777) < 0)
                        return errno == EROFS ? 0 : -1; /* the image's /var has no tmp */
        } else if (!S_ISDIR(st.st_mode)) {
                return 0;
        }
        if (path_join(var, sizeof(var), scratch, "var-tmp") < 0)
                return -1;
        return sh_jail_bind(var, p, 0);
}

/* /etc/resolv.conf names the sandboxes' DNS proxy, the only resolver a sandbox's network
 * reaches (OPENSANDBOX.md section 4): a file of the tmpfs (root's, 0644: the sandbox cannot
 * change it, and it sits outside the root, no image entry in its way) bound over the image's.
 * As for /var/tmp, nothing is followed: an /etc that is not a directory (lstat) is left as the
 * image has it; a resolv.conf that is a link or absent is replaced by an empty file first on
 * an overlay root (the sandbox's upper) and left alone on a host image's read-only /etc. */
static int setup_resolv(const sh_worker_spec *s, const char *scratch)
{
        char etc[SH_WORKER_PATH_MAX + 16], p[SH_WORKER_PATH_MAX + 32], src[SH_WORKER_PATH_MAX + 48];
        char text[80];
        struct in_addr ns = {.s_addr = s->nameserver};
        struct stat st;
        int fd;

        if (!s->nameserver)
                return 0;
        if (path_join(src, sizeof(src), scratch, "resolv.conf") < 0)
                return -1;
        snprintf(text, sizeof(text), "nameserver %s\noptions timeout:2 attempts:2\n",
                 inet_ntoa(ns));
        fd = open(src, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -1;
        close(fd);
        if (write_file(src, text) < 0)
                return -1;
        if (path_join(etc, sizeof(etc), s->rootfs, "etc") < 0)
                return -1;
        if (lstat(etc, &st) < 0) {
                if (errno != ENOENT || s->n_lowers == 0 || mkdir(etc, 0755) < 0)
                        return errno == ENOENT ? 0 : -1;
        } else if (!S_ISDIR(st.st_mode)) {
                return 0;
        }
        if (path_join(p, sizeof(p), etc, "resolv.conf") < 0)
                return -1;
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
                return sh_jail_bind(src, p, 0);
        if (s->n_lowers == 0)
                return 0;
        if (unlink(p) < 0 && errno != ENOENT)
                return -1;
        fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -1;
        close(fd);
        return sh_jail_bind(src, p, 0);
}

static int setup_dev(const sh_worker_spec *s, const char *scratch)
{
        static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
        char dev[SH_WORKER_PATH_MAX + 16], p[SH_WORKER_PATH_MAX + 64], src[SH_WORKER_PATH_MAX + 32],
                opts[96];
        size_t i;
        int fd;

        /* A directory of the root tmpfs, read-only once the root is entered: nothing in it but
         * mount points and links, as in the root itself. Not a tmpfs of its own: every
         * superblock costs the kernel memory in every memory cgroup of the machine
         * (docs/performance.md, "Density"). */
        if (make_dir(s->rootfs, "dev", 0755, dev, sizeof(dev)) < 0)
                return -1;
        /* Only these device nodes exist; each is a bind of the host's node, so no mknod (and
         * no CAP_MKNOD) is ever needed, and nothing else of the host's /dev is reachable. */
        for (i = 0; i < ARRAY_SIZE(nodes); i++) {
                if (path_join(p, sizeof(p), dev, nodes[i]) < 0)
                        return -1;
                fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
                if (fd < 0)
                        return -1;
                close(fd);
                snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
                if (mount(src, p, NULL, MS_BIND, NULL) < 0)
                        return -1;
        }
        if (make_dir(dev, "shm", 01777, p, sizeof(p)) < 0 ||
            path_join(src, sizeof(src), scratch, "shm") < 0 || sh_jail_bind(src, p, 0) < 0)
                return -1;
        /* A private devpts instance: the sandbox's ptys are its own. `max` bounds them: every
         * devpts instance but the host's draws from one node-wide pool (kernel.pty.max minus
         * kernel.pty.reserve, 3072 by default), which one sandbox could otherwise empty for
         * every other sandbox and container on the node (openpty: ENOSPC). */
        snprintf(opts, sizeof(opts), "newinstance,ptmxmode=0666,mode=0620,max=%u", s->ptys_max);
        if (make_dir(dev, "pts", 0755, p, sizeof(p)) < 0 ||
            mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC, opts) < 0)
                return -1;
        if (path_join(p, sizeof(p), dev, "ptmx") < 0 || symlink("pts/ptmx", p) < 0 ||
            path_join(p, sizeof(p), dev, "fd") < 0 || symlink("/proc/self/fd", p) < 0 ||
            path_join(p, sizeof(p), dev, "stdin") < 0 || symlink("/proc/self/fd/0", p) < 0 ||
            path_join(p, sizeof(p), dev, "stdout") < 0 || symlink("/proc/self/fd/1", p) < 0 ||
            path_join(p, sizeof(p), dev, "stderr") < 0 || symlink("/proc/self/fd/2", p) < 0)
                return -1;
        return 0;
}

/* ---- volumes (issue 25) ---- */

/* Links are followed inside a volume's base, never out of it, never through /proc's. */
#define VOL_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
/* subPath and mountPath components: no link at all (ELOOP). */
#define VOL_RESOLVE_STRICT (VOL_RESOLVE | RESOLVE_NO_SYMLINKS)

static _Noreturn void fail_volume(int index, int step)
{
        send_msg(SH_MSG_SETUP_FAILED, (uint32_t)index, step, errno);
        _exit(1);
}

/* A directory below dirfd by openat2 (`flags`: O_PATH or O_RDONLY). A file, a FIFO: ENOTDIR;
 * a way out of dirfd: EXDEV; a link where `resolve` refuses one: ELOOP. EAGAIN (a rename
 * somewhere on the host raced the walk) is tried again a few times. */
static int open_dir_beneath(int dirfd, const char *path, uint64_t resolve, int flags)
{
        struct sh_open_how how = {.flags = (uint64_t)(flags | O_DIRECTORY | O_CLOEXEC),
                                  .resolve = resolve};
        int fd, tries = 0;

        do
                fd = sh_openat2(dirfd, path, &how, sizeof(how));
        while (fd < 0 && errno == EAGAIN && ++tries < 16);
        return fd;
}

/* The default ACL of the directories sandbox-init makes for volumes, user::rwx group::rwx
 * other::---, in the kernel's xattr format (struct posix_acl_xattr_header and _entry, little
 * endian: version 2, then tag, perm, id per entry, sorted by tag): whatever a sandbox creates
 * below is read- and writable by the volume's group, whatever its umask. */
static const unsigned char volume_acl[] = {
        2,    0, 0, 0,                         /* POSIX_ACL_XATTR_VERSION */
        0x01, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, /* ACL_USER_OBJ rwx */
        0x04, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, /* ACL_GROUP_OBJ rwx */
        0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, /* ACL_OTHER --- */
};

/* A named volume's project id is looked for from here in its range (FNV-1a of the claim):
 * claims seldom start their search on the same id. */
static uint32_t claim_hint(const char *name)
{
        uint32_t h = 2166136261u;

        for (; *name; name++)
                h = (h ^ (unsigned char)*name) * 16777619u;
        return h;
}

/* `name` below parent, a directory, made if absent: root:gid, 02770 (setgid: what is created
 * below belongs to the group), the default ACL above where the file system has ACLs (NFS
 * without them: EOPNOTSUPP, the setgid bit alone), and when `quota` (bytes) a project of its
 * own from `project`'s range with that block limit; a failure of the quota removes the
 * directory again and sets *quota_failed. *made says whether it was made here; a directory
 * that was there is left as it is (its limit too). An O_PATH fd of it, opened with
 * `resolve`. */
static int volume_dir(int parent, const char *name, uint64_t resolve, gid_t gid, bool create,
                      uint64_t quota, uint32_t project, bool *made, bool *quota_failed)
{
        _cleanup_close_ int fd = -1;
        uint32_t id;

        *made = false;
        if (create) {
                if (mkdirat(parent, name, 02770) == 0)
                        *made = true;
                else if (errno != EEXIST)
                        return -1;
        }
        if (!*made)
                return open_dir_beneath(parent, name, resolve, O_PATH);
        fd = open_dir_beneath(parent, name, VOL_RESOLVE_STRICT, O_RDONLY);
        if (fd < 0 || fchown(fd, 0, gid) < 0)
                return -1;
        if (fsetxattr(fd, "system.posix_acl_default", volume_acl, sizeof(volume_acl), 0) < 0 &&
            errno != EOPNOTSUPP)
                return -1;
        if (fchmod(fd, 02770) < 0) /* after the chown, which clears setgid */
                return -1;
        if (quota && sh_volquota_set(fd, project, claim_hint(name), quota, &id) < 0) {
                int saved = errno;

                *quota_failed = true;
                close(TAKE_FD(fd));
                /* Empty: nothing ran in it yet. The daemon's message says it was removed. */
                (void)unlinkat(parent, name, AT_REMOVEDIR);
                errno = saved;
                return -1;
        }
        return open_dir_beneath(fd, ".", VOL_RESOLVE_STRICT, O_PATH);
}

/* The directory a volume mounts, resolved from its base's fd and never looked up by path
 * again: `path` (links followed beneath the base only; a claim made first with
 * SH_VOL_CREATE, and reported; with a quota, under a lock on the base, so one project id is
 * chosen at a time and a create racing for the same claim finds it limited), then `sub` a
 * component at a time without any link, each missing one made (not in a read-only volume:
 * ENOENT). An O_PATH fd, or -1 with errno and *step (the source, or its quota). */
static int volume_source(const sh_worker_spec *s, int i, int *step)
{
        const sh_volume_spec *v = &s->volumes[i];
        const bool quota = v->quota && (v->flags & SH_VOL_CREATE);
        _cleanup_close_ int base = open(v->base,
                                        (quota ? O_RDONLY : O_PATH) | O_DIRECTORY | O_CLOEXEC),
                            fd = -1;
        char sub[SH_ENTRY_PATH_MAX], *comp, *save = NULL;
        bool made, quota_failed = false;

        *step = SH_STEP_VOLUME_SOURCE;
        if (base < 0)
                return -1;
        if (quota && flock(base, LOCK_EX) < 0) {
                *step = SH_STEP_VOLUME_QUOTA;
                return -1;
        }
        fd = volume_dir(base, v->path, VOL_RESOLVE, s->volume_gid, v->flags & SH_VOL_CREATE,
                        quota ? v->quota : 0, s->volume_project, &made, &quota_failed);
        if (quota_failed)
                *step = SH_STEP_VOLUME_QUOTA;
        if (quota)
                (void)flock(base, LOCK_UN); /* closing it would too; the subPath needs no lock */
        if (fd < 0)
                return -1;
        if (made)
                send_msg(SH_MSG_VOLUME_CREATED, 0, i, 0);
        snprintf(sub, sizeof(sub), "%s", v->sub);
        for (comp = strtok_r(sub, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
                int next = volume_dir(fd, comp, VOL_RESOLVE_STRICT, s->volume_gid,
                                      !(v->flags & SH_VOL_RDONLY), 0, 0, &made, &quota_failed);

                if (next < 0)
                        return -1;
                close(fd);
                fd = next;
        }
        return TAKE_FD(fd);
}

/* The mount point of a volume in the new root (root: an fd of it), walked a component at a
 * time without following any link (the image's, a lower volume's: ELOOP), crossing the mounts
 * already there (the workspace, another volume); a missing component is made, 0755 (in a
 * read-only part of the root: EROFS). An O_PATH fd, or -1 with errno. */
static int volume_target(int root, const char *target)
{
        _cleanup_close_ int fd = fcntl(root, F_DUPFD_CLOEXEC, 3);
        char path[SH_ENTRY_PATH_MAX], *comp, *save = NULL;

        if (fd < 0)
                return -1;
        snprintf(path, sizeof(path), "%s", target);
        for (comp = strtok_r(path, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
                int next = open_dir_beneath(fd, comp, VOL_RESOLVE_STRICT, O_PATH);

                if (next < 0 && errno == ENOENT) {
                        if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST)
                                return -1;
                        next = open_dir_beneath(fd, comp, VOL_RESOLVE_STRICT, O_PATH);
                }
                if (next < 0)
                        return -1;
                close(fd);
                fd = next;
        }
        return TAKE_FD(fd);
}

/* A copy of the source's mount, that directory only (not recursive: nothing mounted below it
 * on the host comes along), nosuid, nodev, read-only if asked, private, attached at dst. */
static int volume_mount(int src, int dst, bool rdonly)
{
        struct sh_mount_attr attr = {
                .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (rdonly ? MOUNT_ATTR_RDONLY : 0),
                .propagation = MS_PRIVATE,
        };
        _cleanup_close_ int mfd =
                sh_open_tree(src, "", OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH);

        if (mfd < 0 || sh_mount_setattr(mfd, "", AT_EMPTY_PATH, &attr) < 0)
                return -1;
        return sh_move_mount(mfd, "", dst, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

/* The spec's volumes, in its order (a parent mountPath before its children), once the root is
 * whole and before it is entered. A failure names the volume (the message's id) and whether
 * its source or its target failed. */
static void setup_volumes(const sh_worker_spec *s)
{
        _cleanup_close_ int root = -1;

        if (s->n_volumes == 0)
                return;
        root = open(s->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                fail_volume(0, SH_STEP_VOLUME_TARGET);
        for (int i = 0; i < s->n_volumes; i++) {
                int step;
                _cleanup_close_ int src = volume_source(s, i, &step), dst = -1;

                if (src < 0)
                        fail_volume(i, step);
                dst = volume_target(root, s->volumes[i].target);
                if (dst < 0 || volume_mount(src, dst, s->volumes[i].flags & SH_VOL_RDONLY) < 0)
                        fail_volume(i, SH_STEP_VOLUME_TARGET);
        }
}

static int loopback_up(void)
{
        struct ifreq ifr = {0};
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = -1;

        if (fd < 0)
                return -1;
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
                ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
                r = ioctl(fd, SIOCSIFFLAGS, &ifr);
        }
        close(fd);
        return r;
}

static void setup_sandbox(const sh_worker_spec *s)
{
        char p[SH_WORKER_PATH_MAX + 64], scratch[SH_WORKER_PATH_MAX + 32],
                src[SH_WORKER_PATH_MAX + 64];

        /* Nothing we mount may propagate back to the host's namespace. */
        if (sh_jail_private() < 0)
                fail(SH_STEP_MOUNT_PRIVATE);
        if (sethostname(s->hostname, strlen(s->hostname)) < 0)
                fail(SH_STEP_HOSTNAME);
        if (s->n_lowers > 0) {
                if (setup_overlay(s) < 0)
                        fail(SH_STEP_OVERLAY);
        } else {
                if (sh_jail_tmpfs_root(s->rootfs) < 0)
                        fail(SH_STEP_ROOT_TMPFS);
                if (setup_image(s) < 0)
                        fail(SH_STEP_IMAGE);
        }
        if (make_dir(s->rootfs, "workspace", 0755, p, sizeof(p)) < 0 ||
            sh_jail_bind(s->workspace, p, SH_JAIL_RECURSIVE) < 0)
                fail(SH_STEP_WORKSPACE);
        if (setup_tmpfs(s, scratch, sizeof(scratch)) < 0 ||
            make_dir(s->rootfs, "tmp", 01777, p, sizeof(p)) < 0 ||
            path_join(src, sizeof(src), scratch, "tmp") < 0 || sh_jail_bind(src, p, 0) < 0)
                fail(SH_STEP_TMP);
        if (setup_var_tmp(s, scratch) < 0)
                fail(SH_STEP_TMP);
        if (setup_resolv(s, scratch) < 0)
                fail(SH_STEP_RESOLV);
        /* A /proc of the sandbox's own PID namespace: it shows the sandbox's processes only. */
        if (make_dir(s->rootfs, "proc", 0555, p, sizeof(p)) < 0 ||
            mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                fail(SH_STEP_PROC);
        if (setup_dev(s, scratch) < 0)
                fail(SH_STEP_DEV);
        /* The binds keep the tmpfs: its scratch mount goes. */
        if (umount2(scratch, MNT_DETACH) < 0)
                fail(SH_STEP_TMP);
        if (make_dir(s->rootfs, "tools", 0755, p, sizeof(p)) < 0 ||
            sh_jail_bind(s->tools, p, SH_JAIL_RDONLY | SH_JAIL_RECURSIVE) < 0)
                fail(SH_STEP_TOOLS);
        setup_volumes(s);
        /* Afterwards no path leads to the host's filesystem, not even "..". An overlay root
         * stays writable: its upper is the sandbox's, inside its disk limit. */
        if ((s->n_lowers > 0 ? sh_jail_pivot(s->rootfs) : sh_jail_enter(s->rootfs)) < 0)
                fail(SH_STEP_PIVOT);
        /* Without CAP_NET_ADMIN (a pod that does not grant it) the kernel lets nobody bring
         * a new namespace's lo up: the sandbox runs without any network, not even loopback
         * (/healthz says the host gives none), rather than not at all. */
        if (loopback_up() < 0 && errno != EPERM)
                fail(SH_STEP_LOOPBACK);
}

/* ---- exec children ------------------------------------------------------------------- */

static void write_err(const char *a, const char *b, const char *c)
{
        (void)!write(2, a, strlen(a));
        (void)!write(2, b, strlen(b));
        (void)!write(2, c, strlen(c));
}

/* The value of `name` in envp, or NULL. */
static const char *env_value(char *const *envp, const char *name)
{
        size_t n = strlen(name);

        for (; *envp; envp++)
                if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
                        return *envp + n + 1;
        return NULL;
}

/* The next candidate for `name` in a PATH, as a shell tries them: *p the rest of the PATH (NULL
 * once it is used up), the candidate into out. false when none is left; a candidate that does
 * not fit `size` is skipped. */
static bool path_next(const char **p, const char *name, char *out, size_t size)
{
        while (*p) {
                const char *colon = strchr(*p, ':');
                size_t dl = colon ? (size_t)(colon - *p) : strlen(*p);
                int n = snprintf(out, size, "%.*s%s%s", (int)dl, *p, dl ? "/" : "", name);

                *p = colon ? colon + 1 : NULL;
                if (n > 0 && (size_t)n < size)
                        return true;
        }
        return false;
}

/* envp's PATH (execvpe() would search the caller's, not the command's), or the default. */
static const char *path_of(char **envp)
{
        const char *path = env_value(envp, "PATH");

        return path ? path : "/usr/local/bin:/usr/bin:/bin";
}

/* execve() of `name` as a shell finds it, through envp's PATH. Returns only when it could not:
 * the errno to report, EACCES when a match was found but could not be run. */
static int exec_search(const char *name, char **argv, char **envp)
{
        const char *p = path_of(envp);
        char buf[4096];
        bool denied = false;
        int e = ENOENT;

        if (strchr(name, '/')) {
                execve(name, argv, envp);
                return errno;
        }
        while (path_next(&p, name, buf, sizeof(buf))) {
                execve(buf, argv, envp);
                if (errno == EACCES)
                        denied = true;
                else if (errno != ENOENT && errno != ENOTDIR)
                        e = errno;
        }
        return denied && e == ENOENT ? EACCES : e;
}

static _Noreturn void exec_path(char **argv, char **envp)
{
        int e = exec_search(argv[0], argv, envp);

        /* As a shell would: 127 when it cannot be found, 126 when it cannot be executed. */
        if (e == ENOENT || e == ENOTDIR) {
                write_err("sandbox-host: ", argv[0], ": command not found\n");
                _exit(127);
        }
        write_err("sandbox-host: ", argv[0], ": ");
        write_err(strerror(e), "", "\n");
        _exit(126);
}

/* ---- a /v1 command's shell (SH_PROTO_EXEC_SHELL) ---------------------------------------- */

/* `path` made logical as a shell's `cd` (-L) makes it: a relative one joined to `base`, then
 * empty and "." components dropped and each ".." dropping the component before it, as text.
 * -1 when it does not fit. */
static int logical_path(const char *base, const char *path, char *out, size_t size)
{
        char in[PATH_MAX * 2];
        size_t len = 0;
        char *c, *save = NULL;
        int n;

        n = path[0] == '/' ? snprintf(in, sizeof(in), "%s", path)
                           : snprintf(in, sizeof(in), "%s/%s", base, path);
        if (n < 0 || (size_t)n >= sizeof(in) || size < 2)
                return -1;
        out[0] = '\0';
        for (c = strtok_r(in, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                size_t cl = strlen(c);

                if (STREQ(c, "."))
                        continue;
                if (STREQ(c, "..")) {
                        while (len > 0 && out[len - 1] != '/')
                                len--;
                        if (len > 0)
                                len--; /* the slash before it */
                        out[len] = '\0';
                        continue;
                }
                if (len + 1 + cl + 1 > size)
                        return -1;
                out[len++] = '/';
                memcpy(out + len, c, cl);
                len += cl;
                out[len] = '\0';
        }
        if (len == 0) {
                out[0] = '/';
                out[1] = '\0';
        }
        return 0;
}

/* The first executable regular file `name` in envp's PATH, as `command -v` finds it, into
 * out. -1: none. */
static int find_in_path(const char *name, char **envp, char *out, size_t size)
{
        const char *p = path_of(envp);
        struct stat st;

        while (path_next(&p, name, out, size))
                if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
                        return 0;
        return -1;
}

/* The handshake line the daemon reads first on stdout: "<nonce> <word>\n". */
static void say(const char *nonce, const char *word)
{
        char line[160];
        int n = snprintf(line, sizeof(line), "%s %s\n", nonce, word);

        if (n > 0 && (size_t)n < sizeof(line))
                (void)!write(1, line, (size_t)n);
}

/* envp with PWD (and OLDPWD when `old` is set) as `pwd` and `old`, as the shell that entered
 * the directory would export them. NULL without memory. */
static char **env_with_pwd(char **envp, const char *pwd, const char *old)
{
        size_t n = 0, k = 0;
        char **out;

        while (envp[n])
                n++;
        out = calloc(n + 3, sizeof(char *));
        if (!out || asprintf(&out[k++], "PWD=%s", pwd) < 0 ||
            (old && asprintf(&out[k++], "OLDPWD=%s", old) < 0))
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (strncmp(envp[i], "PWD=", 4) != 0 &&
                    !(old && strncmp(envp[i], "OLDPWD=", 7) == 0))
                        out[k++] = envp[i];
        return out;
}

/* argv is NONCE CWD TEXT: what the /v1 surface's shell wrapper did, done here without a shell
 * of its own (one execve less per command, run.c). Enter CWD (`~` and `~/` are HOME; relative
 * to /workspace; entered as a shell's `cd` enters it, logically) or say why not ("<nonce>
 * nodir" when it cannot be stat'ed, "notdir", "noaccess" when it cannot be entered) and exit
 * 125; find the shell, `bash` in envp's PATH, else `sh` (neither: say so on stderr and exit
 * 127, before the handshake: the command never ran); say "<nonce> ok"; become `bash -c TEXT`
 * with PWD (and OLDPWD after a change of directory) as the shell that entered it would
 * export them. */
static _Noreturn void exec_shell(char **argv, char **envp)
{
        const char *nonce = argv[0], *cwd = argv[1], *home = env_value(envp, "HOME");
        const char *pwd = env_value(envp, "PWD");
        char dir[PATH_MAX + 2], here[PATH_MAX], logical[PATH_MAX];
        char shell[4096], *bash[] = {"bash", "-c", argv[2], NULL};
        char *const sh[] = {"sh"};
        char **env;
        struct stat st, dot;
        int n;

        /* the directory it starts in, as a shell finds it: PWD when that names "." */
        if (!pwd || pwd[0] != '/' || stat(pwd, &st) < 0 || stat(".", &dot) < 0 ||
            st.st_dev != dot.st_dev || st.st_ino != dot.st_ino)
                pwd = getcwd(here, sizeof(here)) ? here : "/workspace";
        if (cwd[0] == '\0') {
                env = env_with_pwd(envp, pwd, NULL);
        } else {
                if (STREQ(cwd, "~"))
                        n = snprintf(dir, sizeof(dir), "%s", home ? home : "");
                else if (strncmp(cwd, "~/", 2) == 0)
                        n = snprintf(dir, sizeof(dir), "%s/%s", home ? home : "", cwd + 2);
                else
                        n = snprintf(dir, sizeof(dir), "%s", cwd);
                if (n < 0 || (size_t)n >= sizeof(dir) || stat(dir, &st) < 0) {
                        say(nonce, "nodir");
                        _exit(125);
                }
                if (!S_ISDIR(st.st_mode)) {
                        say(nonce, "notdir");
                        _exit(125);
                }
                if (logical_path(pwd, dir, logical, sizeof(logical)) < 0 || chdir(logical) < 0) {
                        say(nonce, "noaccess");
                        _exit(125);
                }
                env = env_with_pwd(envp, logical, pwd);
        }
        if (!env) {
                write_err("sandbox-host: ", "out of memory", "\n");
                _exit(125);
        }
        /* the shell is found before the handshake: without one the command never ran (its
         * start failed, the stream's error says why) */
        if (find_in_path("bash", env, shell, sizeof(shell)) < 0) {
                bash[0] = sh[0];
                if (find_in_path("sh", env, shell, sizeof(shell)) < 0) {
                        write_err("sandbox-host: no shell: neither bash nor sh is in PATH ",
                                  env_value(env, "PATH") ? env_value(env, "PATH") : "", "\n");
                        _exit(127);
                }
        }
        say(nonce, "ok");
        execve(shell, bash, env);
        write_err("sandbox-host: ", shell, ": ");
        write_err(strerror(errno), "", "\n");
        _exit(126);
}

/* The command's standard fds as the EXEC carried them: out, err, and in (its fd 0, -1: /dev/null)
 * and frames (its fd 3, -1: none) when its flags said so. */
typedef struct exec_stdio {
        int out, err, in, frames;
        bool shell; /* SH_PROTO_EXEC_SHELL: argv is NONCE CWD TEXT (exec_shell) */
} exec_stdio;

/* fd onto `to`, inheritable: dup2 clears FD_CLOEXEC on the copy, but does nothing when fd is
 * `to` already (the fds arrived close-on-exec: MSG_CMSG_CLOEXEC). */
static int dup_onto(int fd, int to)
{
        if (fd == to)
                return fcntl(fd, F_SETFD, 0);
        return dup2(fd, to) < 0 ? -1 : 0;
}

static _Noreturn void exec_child(const sh_worker_spec *s, char **argv, char **envp,
                                 const exec_stdio *io, const int *procs, int nprocs)
{
        sigset_t none;
        const char *step = "?";
        int i, devnull, r;

        /* Into its own exec cgroup first, so that whatever it starts, however it detaches
         * (setsid, double fork), can be found and killed with the exec. */
        for (i = 0; i < nprocs; i++)
                if (write(procs[i], "0", 1) != 1) {
                        dup2(io->err, 2);
                        write_err("sandbox-host: cannot join the exec cgroup: ", strerror(errno),
                                  "\n");
                        _exit(125);
                }
        setsid();
        /* Every fd received is above 3 (0 to 2 are PID 1's /dev/null, 3 its control socket),
         * so none is overwritten before it is dup'd. */
        devnull = io->in >= 0 ? io->in : open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull < 0 || dup_onto(devnull, 0) < 0 || dup_onto(io->out, 1) < 0 ||
            dup_onto(io->err, 2) < 0 || (io->frames >= 0 && dup_onto(io->frames, 3) < 0))
                _exit(125);
        /* Every disposition is already the default: PID 1 reset them all when it started
         * (worker_main) and never sets one again, and execve resets handlers. Only the mask
         * it blocks SIGCHLD with is left to clear. */
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        umask(022);
        /* The worker shares the sandbox's memory cgroup: the OOM killer must pick one of the
         * sandbox's commands, never its PID 1 (whose death would end the whole sandbox). Every
         * command is the first choice (raising the score needs no privilege; lowering the
         * worker's would need CAP_SYS_RESOURCE, which pods rarely have). */
        if (write_file("/proc/self/oom_score_adj", "1000") < 0) {
                write_err("sandbox-host: resetting oom_score_adj: ", strerror(errno), "\n");
                _exit(125);
        }
        /* The resource limits (hard ones too) were set in PID 1 and are inherited. */
        /* Only fds 0, 1 and 2 (and 3, its frames pipe, when the exec has one) reach the
         * command: no socket, epoll or directory fd of the daemon or the worker. */
        sh_close_from(io->frames >= 0 ? 4 : 3);
        /* The volumes' group, the only supplementary one, for a sandbox with volumes. */
        r = sh_caps_drop_to_group(s->uid, s->gid, s->volume_gid, &step);
        if (r < 0) {
                write_err("sandbox-host: dropping privileges failed at ", step, "\n");
                _exit(125);
        }
        /* As the sandbox uid, the workspace's owner: PID 1 has no CAP_DAC_* to pass its
         * modes with, whatever the sandbox set them to. */
        if (chdir("/workspace") < 0) {
                write_err("sandbox-host: chdir /workspace: ", strerror(errno), "\n");
                _exit(125);
        }
        /* The seccomp filter is PID 1's, inherited through fork (worker_main): nothing here
         * needs a call it refuses, and the kernel does not convert and JIT it again for
         * every exec. */
        if (io->shell)
                exec_shell(argv, envp);
        exec_path(argv, envp);
}

/* ---- the worker (PID 1) ---------------------------------------------------------------- */

typedef struct running {
        uint32_t id;
        pid_t pid;
} running;

static running *execs;
static size_t n_execs, cap_execs;

static void start_exec(const sh_worker_spec *s, char *buf, size_t len, int *fds, int nfds)
{
        char **argv = NULL, **envp = NULL;
        uint32_t id = 0, flags = 0;
        exec_stdio io;
        pid_t pid;
        int i, k;

        /* the fds its flags say, then at most the procs fds a cgroup has */
        if (nfds < 2 || sh_proto_decode_exec(buf, len, &id, &flags, &argv, &envp) < 0 ||
            nfds < sh_proto_exec_stdio_fds(flags) ||
            nfds - sh_proto_exec_stdio_fds(flags) > SH_EXEC_MAX_PROCS_FDS ||
            ((flags & SH_PROTO_EXEC_SHELL) && !(argv[0] && argv[1] && argv[2] && !argv[3]))) {
                send_msg(SH_MSG_EXITED, id, W_EXITCODE(125, 0), 0);
                goto out;
        }
        /* out, err, then the flags' extra fds in their order (sh/proto.h), then procs */
        k = 2;
        io.out = fds[0];
        io.err = fds[1];
        io.in = flags & SH_PROTO_EXEC_INPUT ? fds[k++] : -1;
        io.frames = flags & SH_PROTO_EXEC_FRAMES ? fds[k++] : -1;
        io.shell = flags & SH_PROTO_EXEC_SHELL;
        if (n_execs == cap_execs) {
                size_t nc = cap_execs ? cap_execs * 2 : 16;
                running *nr = realloc(execs, nc * sizeof(*nr));

                if (!nr) {
                        send_msg(SH_MSG_EXITED, id, W_EXITCODE(125, 0), 0);
                        goto out;
                }
                execs = nr;
                cap_execs = nc;
        }
        pid = fork();
        if (pid < 0) {
                send_msg(SH_MSG_EXITED, id, W_EXITCODE(125, 0), errno);
                goto out;
        }
        if (pid == 0)
                exec_child(s, argv, envp, &io, fds + k, nfds - k);
        execs[n_execs].id = id;
        execs[n_execs].pid = pid;
        n_execs++;
        send_msg(SH_MSG_STARTED, id, pid, 0);
out:
        for (i = 0; i < nfds; i++)
                close(fds[i]);
        free(argv);
        free(envp);
}

/* PID 1 of the namespace: every orphan is ours to reap; execs we started are reported. */
static void reap_all(void)
{
        int status;
        pid_t pid;
        size_t i;

        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                for (i = 0; i < n_execs; i++) {
                        if (execs[i].pid != pid)
                                continue;
                        send_msg(SH_MSG_EXITED, execs[i].id, status, 0);
                        execs[i] = execs[--n_execs];
                        break;
                }
        }
}

/* The resource limits of the spec (worker.c says why each), on PID 1 itself so that every
 * exec inherits them, hard limits included. Never above what the daemon had: raising a hard
 * limit is not ours to do. */
static int set_limits(const sh_worker_spec *s)
{
        for (int i = 0; i < s->n_rlimits; i++) {
                const sh_rlimit_spec *l = &s->rlimits[i];
                struct rlimit now, want;

                if (getrlimit((int)l->resource, &now) < 0)
                        return -1;
                want.rlim_max = l->max < now.rlim_max ? l->max : now.rlim_max;
                want.rlim_cur = l->cur < want.rlim_max ? l->cur : want.rlim_max;
                if (setrlimit((int)l->resource, &want) < 0)
                        return -1;
        }
        return 0;
}

/* Burn the stack the setup used: its path buffers held the state root and the sandbox's
 * directory names. noinline so that the buffer lies below the caller's frame. */
static __attribute__((noinline)) void wipe_stack(void)
{
        char junk[128 * 1024];

        explicit_bzero(junk, sizeof(junk));
        __asm__ volatile("" : : "r"(junk) : "memory");
}

/* After setup PID 1 needs the ids and the filter of the spec, nothing else: no host path stays
 * in its memory. */
static void forget_setup(sh_worker_spec *s)
{
        explicit_bzero(s->hostname, sizeof(s->hostname));
        explicit_bzero(s->rootfs, sizeof(s->rootfs));
        explicit_bzero(s->workspace, sizeof(s->workspace));
        explicit_bzero(s->tools, sizeof(s->tools));
        explicit_bzero(s->entries, sizeof(s->entries));
        s->n_entries = 0;
        explicit_bzero(s->layers, sizeof(s->layers));
        explicit_bzero(s->upper, sizeof(s->upper));
        explicit_bzero(s->work, sizeof(s->work));
        explicit_bzero(s->lowers, sizeof(s->lowers));
        if (s->n_volumes == 0)
                s->volume_gid = 0; /* a group without volumes: nobody gets it */
        if (s->volumes)
                explicit_bzero(s->volumes, sizeof(*s->volumes) * (size_t)s->n_volumes);
        free(s->volumes);
        s->volumes = NULL;
        s->n_volumes = 0;
        wipe_stack();
}

static _Noreturn void worker_main(sh_worker_spec *s)
{
        static char buf[SH_EXEC_MSG_MAX];
        const char *step = NULL;
        sigset_t mask;
        int sfd, r;

        setup_sandbox(s);
        if (set_limits(s) < 0)
                fail(SH_STEP_LIMITS);
        r = sh_caps_limit_init(&step);
        if (r < 0) {
                errno = -r;
                fail(SH_STEP_PRIVILEGES);
        }
        forget_setup(s);
        /* Every disposition to its default, once for every command: an ignored signal (the
         * daemon ignores SIGPIPE) would stay ignored across execve in each of them. PID 1
         * never sets one again (SIGCHLD comes through the signalfd), so an exec child,
         * a fork of it, needs no reset of its own. (PID 1 of a PID namespace gets no signal
         * of its namespace's processes it has no handler for, defaults or not.) */
        for (int i = 1; i < NSIG; i++)
                (void)signal(i, SIG_DFL); /* SIGKILL, SIGSTOP, libc's own: refused, fine */
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
            (sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
                fail(SH_STEP_SIGNALS);
        /* The sandbox's seccomp filter, once, last of the setup: PID 1 itself runs under it
         * from here on (its loop needs poll, recvmsg, fork, wait4 and sendto, none of which
         * it refuses), and every exec child inherits it through fork, so no command ever
         * runs without it and the kernel converts and JITs it once per sandbox instead of
         * once per exec. no_new_privs is set (sh_caps_limit_init). */
        r = sh_seccomp_load(&s->seccomp);
        if (r < 0) {
                errno = -r;
                fail(SH_STEP_SECCOMP);
        }
        send_msg(SH_MSG_READY, 0, 0, 0);

        for (;;) {
                struct pollfd pfd[2] = {{.fd = CTL_FD, .events = POLLIN},
                                        {.fd = sfd, .events = POLLIN}};

                if (poll(pfd, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        _exit(1);
                }
                if (pfd[1].revents) {
                        struct signalfd_siginfo si;

                        while (read(sfd, &si, sizeof(si)) > 0)
                                ;
                        reap_all();
                }
                if (pfd[0].revents) {
                        sh_proto_cmsg cbuf;
                        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
                        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
                        int fds[SH_PROTO_EXEC_FDS], nfds;
                        ssize_t n;

                        sh_proto_recv_fds(&mh, &cbuf);
                        n = recvmsg(CTL_FD, &mh, MSG_CMSG_CLOEXEC);
                        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        /* EOF: the daemon is gone. PID 1 exits, and the kernel kills every
                         * process of the namespace with it. */
                        if (n <= 0)
                                _exit(0);
                        nfds = sh_proto_take_fds(&mh, fds);
                        if (sh_proto_msg_type(buf, (size_t)n) == SH_MSG_EXEC &&
                            !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
                                start_exec(s, buf, (size_t)n, fds, nfds);
                        } else {
                                for (int i = 0; i < nfds; i++)
                                        close(fds[i]);
                        }
                }
        }
}

/* ---- the intermediate ------------------------------------------------------------------ */

static sh_worker_spec spec;

/* Standard streams: the daemon's (its log) are no business of the sandbox. */
static int stdio_null(void)
{
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC), i;

        if (fd < 0)
                return -1;
        for (i = 0; i < 3; i++)
                if (fd != i && dup2(fd, i) < 0)
                        return -1;
        if (fd > 2)
                close(fd);
        else if (fcntl(fd, F_SETFD, 0) < 0)
                return -1;
        return 0;
}

/* The spec, from the sealed memfd the daemon wrote; bounded, and decoded defensively. */
static int read_spec(sh_worker_spec *s)
{
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t len, off = 0;
        int r;

        if (fstat(SH_WORKER_SPEC_FD, &st) < 0)
                return -1;
        if (st.st_size <= 0 || st.st_size > SH_WORKER_SPEC_MAX) {
                errno = EMSGSIZE;
                return -1;
        }
        len = (size_t)st.st_size;
        buf = malloc(len);
        if (!buf)
                return -1;
        while (off < len) {
                ssize_t n = pread(SH_WORKER_SPEC_FD, buf + off, len - off, (off_t)off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        errno = n < 0 ? errno : EBADMSG;
                        return -1;
                }
                off += (size_t)n;
        }
        r = sh_worker_spec_decode(buf, len, s);
        explicit_bzero(buf, len);
        close(SH_WORKER_SPEC_FD);
        if (r < 0) {
                errno = -r;
                return -1;
        }
        return 0;
}

/* fd 3: control socket; fd 4: the spec; fds 5...: cgroup.procs of the sandbox's init cgroup.
 * Started by the daemon; its only job is to give the worker its cgroup and namespaces, then
 * leave (the daemon is a child subreaper, so the worker becomes the daemon's child). */
int main(void)
{
        pid_t pid;
        int r;

        /* An execveat'd program is named after its fd; the daemon's tests and operators look
         * for this name. */
        (void)prctl(PR_SET_NAME, "sandbox-init", 0, 0, 0);
        if (stdio_null() < 0)
                fail(SH_STEP_STDIO);
        if (read_spec(&spec) < 0)
                fail(SH_STEP_SPEC);
        /* Nothing but the fds named above, whatever the daemon's child left open. */
        sh_close_from((unsigned)(SH_WORKER_PROCS_FD + spec.nprocs));
        r = sh_jail_join_cgroup(SH_WORKER_PROCS_FD, spec.nprocs);
        if (r < 0) {
                errno = -r;
                fail(SH_STEP_CGROUP_JOIN);
        }
        /* The cgroup namespace is unshared after joining, so the sandbox sees its own cgroup
         * as its root and nothing above it. */
        if (unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWCGROUP |
                    CLONE_NEWPID) < 0)
                fail(SH_STEP_UNSHARE);
        pid = fork();
        if (pid < 0)
                fail(SH_STEP_FORK);
        if (pid == 0)
                worker_main(&spec);
        send_pid(&spec, pid);
        return 0;
}
