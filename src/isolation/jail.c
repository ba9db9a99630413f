/* jail.c: the confinement steps of every child over hostile bytes: private mounts, a tmpfs
 * root, binds by path or fd, mount flags, pivot_root, the cgroup join, its own network. */
#include "sh/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/seccomp.h"
#include "sh/syscalls.h"

int sh_jail_private(void)
{
        return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

int sh_jail_reopen_dir(int fd)
{
        char link[64], path[4096];
        struct stat want, got;
        ssize_t n;
        int nfd;

        if (fstat(fd, &want) < 0)
                return -1;
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        n = readlink(link, path, sizeof(path) - 1);
        if (n < 0)
                return -1;
        if (n == (ssize_t)sizeof(path) - 1) {
                errno = ENAMETOOLONG;
                return -1;
        }
        path[n] = '\0';
        if (path[0] != '/') { /* "(deleted)" or not a path at all */
                errno = ESTALE;
                return -1;
        }
        nfd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0)
                return -1;
        if (fstat(nfd, &got) < 0 || got.st_dev != want.st_dev || got.st_ino != want.st_ino) {
                close(nfd);
                errno = ESTALE;
                return -1;
        }
        return nfd;
}

int sh_jail_tmpfs_root(const char *dir)
{
        return mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1048576");
}

int sh_jail_lock(const char *path, unsigned flags)
{
        struct sh_mount_attr attr = {
                .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                            (flags & SH_JAIL_RDONLY ? MOUNT_ATTR_RDONLY : 0) |
                            (flags & SH_JAIL_NOEXEC ? MOUNT_ATTR_NOEXEC : 0),
        };
        unsigned long mflags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV |
                               (flags & SH_JAIL_RDONLY ? MS_RDONLY : 0) |
                               (flags & SH_JAIL_NOEXEC ? MS_NOEXEC : 0);

        /* Recursive matters in a pod: kubelet bind-mounts /etc/hosts and friends into /etc,
         * and a lock of the top mount alone would leave those writable. */
        if (sh_mount_setattr(AT_FDCWD, path, flags & SH_JAIL_RECURSIVE ? AT_RECURSIVE : 0, &attr) ==
            0)
                return 0;
        if (errno != ENOSYS && errno != EINVAL)
                return -1;
        /* Before Linux 5.12: the remount spelling of the same (of the top mount only). */
        return mount(NULL, path, NULL, mflags, NULL);
}

int sh_jail_bind(const char *src, const char *dst, unsigned flags)
{
        if (mount(src, dst, NULL, MS_BIND | (flags & SH_JAIL_RECURSIVE ? MS_REC : 0), NULL) < 0)
                return -1;
        return sh_jail_lock(dst, flags);
}

int sh_jail_bind_fd(int fd, const char *dst, unsigned flags)
{
        char src[64];

        snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
        if (mkdir(dst, 0755) < 0)
                return -1;
        /* Not MS_REC: mounts below the source (none are expected) stay outside. */
        return sh_jail_bind(src, dst, flags & ~SH_JAIL_RECURSIVE);
}

int sh_jail_pivot(const char *dir)
{
        if (chdir(dir) < 0)
                return -1;
        /* pivot_root(".", ".") stacks the old root on top of the new one; detaching it
         * leaves the new root alone in the namespace. */
        if (sh_pivot_root(".", ".") < 0)
                return -1;
        if (umount2(".", MNT_DETACH) < 0)
                return -1;
        return chdir("/");
}

int sh_jail_enter(const char *dir)
{
        if (sh_jail_pivot(dir) < 0)
                return -1;
        /* The root tmpfs only holds mount points: read-only from now on. */
        return mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

int sh_jail_join_cgroup(int first, int n)
{
        int r = 0;

        for (int i = 0; i < n; i++) {
                /* "0" is the writer itself; one write per hierarchy (v1 has several) */
                ssize_t w = write(first + i, "0", 1);

                if (w != 1 && r == 0)
                        r = w < 0 ? -errno : -EIO;
                close(first + i);
        }
        return r;
}

int sh_jail_own_network(void)
{
        return unshare(CLONE_NEWNET) < 0 ? -errno : 0;
}

int sh_jail_confine(const struct sock_fprog *filter)
{
        int r = sh_jail_own_network();

        if (r < 0)
                return r;
        /* a filter without CAP_SYS_ADMIN needs it; it also keeps exec from granting anything */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        return sh_seccomp_load(filter);
}
