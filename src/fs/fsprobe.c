/* fsprobe.c: an fd's filesystem kind and its access ACL, asked before the daemon, root in the
 * init user namespace, acts for a sandbox on what the fd names (sh/fsprobe.h). */
#include "sh/fsprobe.h"

#include <errno.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/statfs.h>
#include <sys/xattr.h>

#define CONFIGFS_MAGIC 0x62656570 /* not in <linux/magic.h> */
#define FUSECTL_MAGIC  0x65735543

bool sh_fs_on_kernel_fs(int fd)
{
        struct statfs s;

        if (fstatfs(fd, &s) < 0)
                return true; /* cannot tell: refuse */
        switch ((unsigned long)s.f_type) {
        case PROC_SUPER_MAGIC:
        case SYSFS_MAGIC:
        case CGROUP_SUPER_MAGIC:
        case CGROUP2_SUPER_MAGIC:
        case DEBUGFS_MAGIC:
        case SECURITYFS_MAGIC:
        case TRACEFS_MAGIC:
        case BPF_FS_MAGIC:
        case DEVPTS_SUPER_MAGIC:
        case NSFS_MAGIC:
        case PSTOREFS_MAGIC:
        case EFIVARFS_MAGIC:
        case SELINUX_MAGIC:
        case SMACK_MAGIC:
        case BINFMTFS_MAGIC:
        case CONFIGFS_MAGIC:
        case FUSECTL_MAGIC:
                return true;
        default:
                return false;
        }
}

ssize_t sh_fs_acl_access(int fd, void *buf, size_t size)
{
        static const char name[] = "system.posix_acl_access";
        char proc[40];
        ssize_t n;

        n = fgetxattr(fd, name, buf, size);
        if (n < 0 && errno == EBADF) {
                /* An O_PATH fd: fgetxattr refuses it (before Linux 6.13's getxattrat), the
                 * magic link of /proc/self/fd names that very inode (never a path lookup
                 * the sandbox could redirect). */
                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
                n = getxattr(proc, name, buf, size);
        }
        if (n >= 0)
                return n;
        if (errno == ENODATA || errno == EOPNOTSUPP)
                return -ENODATA;
        return -errno;
}
