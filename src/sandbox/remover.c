/* remover.c: background removal of trashed trees by a confined child (cgroup, netns, seccomp). */
#include "remover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "sh/cgroup.h"
#include "sh/helper.h"
#include "sh/jail.h"
#include "sh/log.h"
#include "sh/spawn.h"

/* Exit codes of the child: which step failed (logged by the daemon). */
enum {
        RM_EXIT_OK = 0,
        RM_EXIT_REMOVE = 1,  /* a part of the tree could not be removed */
        RM_EXIT_CGROUP = 2,  /* joining its cgroup */
        RM_EXIT_CONFINE = 3, /* its network namespace, no_new_privs or the filter */
};

typedef struct remover {
        sh_manager *m;
        sh_sandbox *sb; /* a reference, NULL: none */
        sh_cgroup *cg;  /* its helper cgroup, NULL: none could be made */
        char *name;     /* below the trash, NULL: everything in it */
        char *dir;      /* the trash by its path (opened by the child), NULL: fd 3 */
        int nprocs;     /* cgroup.procs fds at procs_at.. in the child */
        int procs_at;
        const struct sock_fprog *filter;
} remover;

static void remover_free(remover *rm)
{
        if (!rm)
                return;
        if (rm->cg)
                sh_manager_bury_cgroup(rm->m, rm->cg);
        sh_sandbox_unref(rm->sb);
        free(rm->name);
        free(rm->dir);
        free(rm);
}

static int remove_all(int dirfd)
{
        sh_error *err = NULL;
        DIR *d = fdopendir(dup(dirfd));
        struct dirent *de;
        int r = 0;

        if (!d)
                return -1;
        while ((de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                if (sh_fs_remove_tree(dirfd, de->d_name, &err) < 0)
                        r = -1;
                sh_error_release(&err);
        }
        closedir(d);
        return r;
}

/* fd 3: the trash directory (or rm->dir, opened here), then the cgroup.procs fds of the helper
 * cgroup. The tree is hostile (a sandbox wrote it), so before reading a name of it the child
 * is in the cgroup that pays for the work, has no network, and can make no system call beyond
 * those of removing files. */
static int remover_main(void *arg)
{
        const remover *rm = arg;
        sh_error *err = NULL;
        int r, trash = 3;

        if (sh_jail_join_cgroup(rm->procs_at, rm->nprocs) < 0)
                return RM_EXIT_CGROUP;
        /* a name for ps and the tests; the trash fd says what it works on */
        (void)prctl(PR_SET_NAME, "sh-remove", 0, 0, 0);
        if (rm->dir) {
                /* Opened here, not by the daemon: the trash may be on NFS. Its last component
                 * is ours and never a link. Absent: nothing to remove. */
                trash = open(rm->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (trash < 0)
                        return errno == ENOENT ? RM_EXIT_OK : RM_EXIT_REMOVE;
        }
        if (sh_jail_confine(rm->filter) < 0)
                return RM_EXIT_CONFINE;
        if (!rm->name)
                return remove_all(trash) < 0 ? RM_EXIT_REMOVE : RM_EXIT_OK;
        r = sh_fs_remove_tree(trash, rm->name, &err);
        sh_error_release(&err);
        return r < 0 ? RM_EXIT_REMOVE : RM_EXIT_OK;
}

static void remover_done(sh_child *c, pid_t pid, int status, void *data)
{
        static const char *const step[] = {"", "removing the tree", "joining its cgroup",
                                           "its network namespace or seccomp filter"};
        remover *rm = data;
        const char *what = rm->name ? rm->name : "the trash";

        if (WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
            WEXITSTATUS(status) < (int)ARRAY_SIZE(step))
                log_warn("remove-failed", rm->sb ? sh_sandbox_id(rm->sb) : NULL,
                         "background removal of '%s' failed: %s", what, step[WEXITSTATUS(status)]);
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                log_warn("remove-failed", rm->sb ? sh_sandbox_id(rm->sb) : NULL,
                         "background removal of '%s' ended with status %d", what, status);
        remover_free(rm);
}

static int remover_start(sh_manager *m, int trashfd, const char *dir, sh_sandbox *sb,
                         const char *name, sh_error **err)
{
        remover *rm = calloc(1, sizeof(*rm));
        int keep[1 + SH_HELPER_PROCS_MAX];
        sh_error *cerr = NULL;
        sh_child *c;
        int n = 0, saved;

        if (!rm || (name && !(rm->name = strdup(name))) || (dir && !(rm->dir = strdup(dir)))) {
                if (rm)
                        free(rm->name);
                free(rm);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        rm->m = m;
        rm->filter = sh_helper_remover_filter(err);
        if (!rm->filter) {
                remover_free(rm);
                return name ? sh_error_wrap(err, "removing '%s'", name) : -1;
        }
        if (sb && sh_sandbox_cgroup(sb))
                rm->sb = sh_sandbox_ref(sb);
        /* Without a cgroup of its own the work would be the daemon's again: say so. */
        if (sh_helper_cgroup_new(sh_manager_cgroups(m), rm->sb ? sh_sandbox_cgroup(sb) : NULL, 'r',
                                 sh_manager_config(m)->cpu_max_milli, &rm->cg, keep + 1,
                                 SH_HELPER_PROCS_MAX, &n, &cerr) < 0) {
                log_warn("remove-cgroup-failed", sb ? sh_sandbox_id(sb) : NULL,
                         "%s, removing '%s' in the daemon's cgroup",
                         cerr && cerr->msg ? cerr->msg : "", name ? name : "the trash");
                sh_error_release(&cerr);
                n = 0;
        }
        rm->nprocs = n;
        /* By path: only the cgroup.procs fds, from 3. */
        rm->procs_at = dir ? 3 : 4;
        keep[0] = trashfd;
        c = sh_child_fork_fds(sh_manager_loop(m), dir ? keep + 1 : keep, dir ? n : 1 + n,
                              remover_main, rm, remover_done, rm);
        saved = errno;
        for (int i = 1; i <= n; i++)
                close(keep[i]);
        if (c)
                return 0; /* remover_done runs from the loop, never before the fork returns */
        remover_free(rm);
        if (!name)
                return sh_error_make(err, saved, "cannot fork the trash remover");
        /* Never removed inline: a tree costs what a sandbox made it cost, and the loop must
         * not pay that. It waits in the trash: the next start empties the state root's trash,
         * and a workspace filesystem's trash goes with its sandbox. */
        log_warn("remove-deferred", sb ? sh_sandbox_id(sb) : NULL,
                 "cannot fork the remover (%s): '%s' stays in the trash until it is emptied",
                 strerror(saved), name);
        return 0;
}

int sh_remover_start(sh_manager *m, int trashfd, sh_sandbox *sb, const char *name, sh_error **err)
{
        return remover_start(m, trashfd, NULL, sb, name, err);
}

int sh_remover_start_at(sh_manager *m, const char *dir, const char *name, sh_error **err)
{
        return remover_start(m, -1, dir, NULL, name, err);
}
