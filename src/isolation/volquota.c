/* volquota.c: project quota on named volumes (sh/volquota.h). Built into the daemon (the
 * probe) and into sandbox-init (the limit): uses only the core's headers. */
#include "sh/volquota.h"

#include <errno.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/quota.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/quota.h>

#include "sh/syscalls.h"

int sh_volquota_probe(int dirfd, const char *where, char *why, size_t size)
{
        struct fs_quota_statv sv;

        memset(&sv, 0, sizeof(sv));
        sv.qs_version = FS_QSTATV_VERSION1;
        if (sh_quotactl_fd(dirfd, QCMD(Q_XGETQSTATV, PRJQUOTA), 0, &sv) < 0) {
                snprintf(why, size, "no project quota on %s (quotactl_fd: %s)", where,
                         strerror(errno));
                return -1;
        }
        if (!(sv.qs_flags & FS_QUOTA_PDQ_ENFD)) {
                snprintf(why, size,
                         "project quota is not enforced on %s (ext4: the project and quota "
                         "features, mounted prjquota; XFS: mounted pquota)",
                         where);
                return -1;
        }
        return 0;
}

/* Whether project `id` is unused: nothing charged to it (a quota the kernel does not have yet
 * reads as ESRCH or ENOENT, or as zeros). A claim's directory is charged to its id from the
 * moment it has it (its own block and inode), so an id with a limit and no usage is one whose
 * claim was removed: taken again, with the new limit (the range is never used up). The lock
 * the caller holds covers the moment between a limit set and the id given. */
static int id_free(int dirfd, uint32_t id)
{
        struct if_dqblk q;

        memset(&q, 0, sizeof(q));
        if (sh_quotactl_fd(dirfd, QCMD(Q_GETQUOTA, PRJQUOTA), id, &q) < 0)
                return errno == ESRCH || errno == ENOENT ? 1 : -1;
        return !q.dqb_curspace && !q.dqb_curinodes;
}

int sh_volquota_set(int dirfd, uint32_t first, uint32_t hint, uint64_t bytes, uint32_t *id)
{
        struct if_dqblk q;
        struct fsxattr fx;
        uint32_t i, cand = 0;
        int r = 0, saved;

        for (i = 0; i < SH_VOLQUOTA_IDS; i++) {
                cand = first + (hint + i) % SH_VOLQUOTA_IDS;
                if ((r = id_free(dirfd, cand)) != 0)
                        break;
        }
        if (r < 0)
                return -1;
        if (r == 0) {
                errno = ENOSPC;
                return -1;
        }
        /* The limit first, then the id: the directory is never in an unlimited project. */
        memset(&q, 0, sizeof(q));
        q.dqb_bhardlimit = bytes / 1024 + (bytes % 1024 || !bytes ? 1 : 0);
        q.dqb_valid = QIF_BLIMITS;
        if (sh_quotactl_fd(dirfd, QCMD(Q_SETQUOTA, PRJQUOTA), cand, &q) < 0)
                return -1;
        if (ioctl(dirfd, FS_IOC_FSGETXATTR, &fx) == 0) {
                fx.fsx_projid = cand;
                fx.fsx_xflags |= FS_XFLAG_PROJINHERIT;
                if (ioctl(dirfd, FS_IOC_FSSETXATTR, &fx) == 0) {
                        *id = cand;
                        return 0;
                }
        }
        saved = errno;
        q.dqb_bhardlimit = 0; /* the id free again */
        (void)sh_quotactl_fd(dirfd, QCMD(Q_SETQUOTA, PRJQUOTA), cand, &q);
        errno = saved;
        return -1;
}
