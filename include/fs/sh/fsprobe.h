/* fsprobe.h: what the daemon asks of an fd before it acts there for a sandbox: whether it is on
 * one of the kernel's own filesystems, and its access ACL. Both work on O_PATH fds. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Whether fd is on one of the kernel's own filesystems (proc, sysfs, cgroup v1 and v2, debugfs,
 * tracefs, securityfs, bpf, devpts, nsfs, pstore, efivarfs, selinuxfs, smackfs, binfmt_misc,
 * configfs, fusectl): a write there as root changes the host, a read can show it. True also
 * when fstatfs fails: what cannot be told is refused. */
bool sh_fs_on_kernel_fs(int fd);

/* The `system.posix_acl_access` xattr of fd's inode (an O_PATH fd too, through
 * /proc/self/fd/N) into buf (at most size bytes): its length; -ENODATA when it has none (or
 * its filesystem has no ACLs: -EOPNOTSUPP is reported as -ENODATA); -ERANGE when longer than
 * size; another -errno when it could not be read. */
ssize_t sh_fs_acl_access(int fd, void *buf, size_t size);
