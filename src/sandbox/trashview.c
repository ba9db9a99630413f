/* trashview.c: a sandbox's trash, or none (logged), and the trash reached from its processes' view
 * of its directories, the hook the /v1 file routes give the fs operations (sh/sandbox.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sandbox-internal.h"
#include "sh/log.h"
#include "sh/sandbox.h"

/* The sandbox's workspace as its processes see it: a bind mount of its own, on which no trash is
 * (the trash is beside the workspace, on the daemon's mount of the same filesystem). */
#define SANDBOX_WORKSPACE "/workspace"

int sh_sandbox_trash_or_none(sh_sandbox *sb)
{
        sh_error *err = NULL;
        int fd = sh_sandbox_open_trash(sb, &err);

        if (fd < 0) {
                log_warn("trash-unavailable", sh_sandbox_id(sb), "%s: freed in place",
                         err && err->msg ? err->msg : "");
                sh_error_release(&err);
        }
        return fd;
}

/* dirfd lies on one of sb's volumes: its path in the sandbox's view (d_path, in its mount
 * namespace) is a mountPath or below one. A volume may be on the workspace's filesystem (the
 * same device), never the workspace's trash's to take: what goes there is freed in place. The
 * sandbox cannot move a mount, so the path says where it is. */
static bool on_volume(const sh_sandbox *sb, int dirfd)
{
        char proc[64], path[PATH_MAX];
        const sh_volume *v = NULL;
        size_t n = 0, i;
        ssize_t k;

        v = sh_sandbox_volumes(sb, &n);
        if (!n)
                return false;
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
        k = readlink(proc, path, sizeof(path) - 1);
        if (k < 0)
                return true; /* cannot tell: no trash (freed in place) */
        path[k] = '\0';
        for (i = 0; i < n; i++) {
                size_t t = strlen(v[i].target);

                if (strncmp(path, v[i].target, t) == 0 && (path[t] == '\0' || path[t] == '/'))
                        return true;
        }
        return false;
}

int sh_sandbox_trash_of_view(void *data, int *pfd, int *ret_trashfd)
{
        sh_sandbox_trash_view *v = data;
        _cleanup_close_ int ws = -1;
        int fd = -ESTALE;

        *ret_trashfd = -1;
        sh_error_release(&v->refused);
        if (sh_sandbox_deleted(v->sb)) {
                sh_error_new(&v->refused, SH_E_SANDBOX_NOT_FOUND, "the sandbox was deleted");
                return -ECANCELED;
        }
        if (on_volume(v->sb, *pfd))
                return 0;
        if ((ws = sh_sandbox_open_workspace(v->sb, &v->refused)) < 0)
                return -ECANCELED;
        /* a rename of one of its parents between the look-up and the check: look again */
        for (int i = 0; i < 4 && fd == -ESTALE; i++)
                fd = sh_fs_view_dir(ws, SANDBOX_WORKSPACE, *pfd);
        if (fd == -EXDEV)
                return 0;
        if (fd < 0)
                return fd == -ESTALE ? -EAGAIN : fd;
        if (v->trash < 0 && (v->trash = sh_sandbox_trash_or_none(v->sb)) < 0) {
                sh_close(fd);
                return 0;
        }
        sh_close(*pfd);
        *pfd = fd;
        *ret_trashfd = v->trash;
        return 0;
}

void sh_sandbox_trash_view_done(sh_sandbox_trash_view *v)
{
        v->trash = sh_close(v->trash);
        sh_error_release(&v->refused);
}
