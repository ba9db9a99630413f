/* minroot.c: minimal-root steps for helper children: private mounts, tmpfs root, binds by fd, pivot. */
#include "sh/minroot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/syscalls.h"

int sh_minroot_private(void)
{
        return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

int sh_minroot_reopen_dir(int fd)
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

int sh_minroot_tmpfs(const char *dir)
{
        return mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1048576");
}

int sh_minroot_lock(const char *path, unsigned flags)
{
        struct sh_mount_attr attr = {
                .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                            (flags & SH_MINROOT_RDONLY ? MOUNT_ATTR_RDONLY : 0) |
                            (flags & SH_MINROOT_NOEXEC ? MOUNT_ATTR_NOEXEC : 0),
        };
        unsigned long mflags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV |
                               (flags & SH_MINROOT_RDONLY ? MS_RDONLY : 0) |
                               (flags & SH_MINROOT_NOEXEC ? MS_NOEXEC : 0);

        if (sh_mount_setattr(AT_FDCWD, path, 0, &attr) == 0)
                return 0;
        if (errno != ENOSYS && errno != EINVAL)
                return -1;
        /* Before Linux 5.12: the remount spelling of the same. */
        return mount(NULL, path, NULL, mflags, NULL);
}

int sh_minroot_bind_fd(int fd, const char *dst, unsigned flags)
{
        char src[64];

        snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
        if (mkdir(dst, 0755) < 0)
                return -1;
        /* Not MS_REC: mounts below the source (none are expected) stay outside. */
        if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
                return -1;
        return sh_minroot_lock(dst, flags);
}

int sh_minroot_enter(const char *dir)
{
        if (chdir(dir) < 0)
                return -1;
        /* pivot_root(".", ".") stacks the old root on top of the new one; detaching it
         * leaves the new root alone in the namespace. */
        if (sh_pivot_root(".", ".") < 0)
                return -1;
        if (umount2(".", MNT_DETACH) < 0)
                return -1;
        if (chdir("/") < 0)
                return -1;
        /* The root tmpfs only holds mount points: read-only from now on. */
        return mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}
