/* remover.c: the background removals of trashed trees, each by a confined child (cgroup, netns,
 * seccomp), retried with backoff when it fails; a sandbox's trash emptied by one removal at a
 * time; the account of what is pending, which a clean shutdown waits for, bounded. */
#include "remover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "sh/cgroup.h"
#include "sh/helper.h"
#include "sh/jail.h"
#include "sh/list.h"
#include "sh/log.h"
#include "sh/spawn.h"

#include "sandbox-internal.h"

/* A removal that fails (an entry still busy or immutable, a file a dying process wrote into the
 * tree after its listing) is tried again after RETRY_FIRST_MS, doubling up to RETRY_MAX_MS,
 * RETRY_TRIES times in all (about four minutes); then it is given up and stays in the trash
 * until the next start empties it (a sandbox's: until its sandbox goes). */
#define RETRY_FIRST_MS    250
#define RETRY_MAX_MS      60000
#define RETRY_TRIES       10
#define RETRY_SHUTDOWN_MS 100 /* while a clean shutdown waits */

/* Exit codes of the child: which step failed (logged by the daemon). */
enum {
        RM_EXIT_OK = 0,
        RM_EXIT_REMOVE = 1,  /* a part of the tree could not be removed */
        RM_EXIT_CGROUP = 2,  /* joining its cgroup */
        RM_EXIT_CONFINE = 3, /* its network namespace, no_new_privs or the filter */
};

typedef enum {
        RM_STATE_ROOT, /* {root}/.trash: deleted sandboxes, leftovers */
        RM_AT_PATH,    /* a trash of a caller's, by its path (snapshots) */
        RM_SANDBOX,    /* a sandbox's own trash, all of it (sh_sandbox_open_trash) */
} rm_where;

typedef struct removal {
        SH_LIST_FIELDS(struct removal, all);
        sh_removals *rs;
        rm_where where;
        sh_sandbox *sb;       /* RM_SANDBOX: whose trash (a reference) */
        char *name;           /* below the trash; NULL: everything in it */
        char *dir;            /* RM_AT_PATH */
        sh_child *child;      /* a try running */
        sh_timer *retry;      /* waiting for the next try */
        unsigned tries;       /* failed so far */
        bool again;           /* RM_SANDBOX: more came into the trash while a try ran */
        bool shutdown_logged; /* a failure logged while a shutdown waits */
        sh_waiter *waiting;   /* told when the try running (or the next) ends */
        sh_waiter *later;     /* told when the try after the one running ends */
        /* the try running: its cgroup, and what its child reads (a copy of this memory) */
        sh_cgroup *cg;
        int nprocs, procs_at;
        const struct sock_fprog *filter;
} removal;

struct sh_removals {
        sh_manager *m;
        removal *all;
        unsigned n;
        bool hurry;  /* a clean shutdown waits: retries soon */
        bool closed; /* the loop has stopped: nothing starts any more */
};

sh_removals *sh_removals_new(sh_manager *m)
{
        sh_removals *rs = calloc(1, sizeof(*rs));

        if (rs)
                rs->m = m;
        return rs;
}

static const char *what_of(const removal *rm)
{
        if (rm->name)
                return rm->name;
        return rm->where == RM_SANDBOX ? "the sandbox's trash" : "the trash";
}

static const char *id_of(const removal *rm)
{
        return rm->sb ? sh_sandbox_id(rm->sb) : NULL;
}

/* A try ended: its waiters are told; those of the next one wait for the next. */
static void tried(removal *rm)
{
        sh_waiters_wake(&rm->waiting);
        sh_waiters_move(&rm->later, &rm->waiting);
}

/* A try that could not start ended too. */
static removal *tried_now(removal *rm)
{
        tried(rm);
        return rm;
}

static void removal_free(removal *rm)
{
        sh_removals *rs = rm->rs;

        /* nothing more runs for them: told now */
        sh_waiters_wake(&rm->waiting);
        sh_waiters_wake(&rm->later);
        SH_LIST_REMOVE(all, rs->all, rm);
        rs->n--;
        sh_loop_cancel_timer(sh_manager_loop(rs->m), rm->retry);
        if (rm->sb && sh_sandbox_trash_job(rm->sb) == rm)
                sh_sandbox_set_trash_job(rm->sb, NULL);
        sh_sandbox_unref(rm->sb);
        free(rm->name);
        free(rm->dir);
        free(rm);
}

/* What is left when the daemon stops before it is removed: logged, for the next start. */
static void removal_left(removal *rm)
{
        log_warn("remove-left", id_of(rm),
                 "'%s' stays in the trash: the daemon stops before its removal ended "
                 "(the next start removes it)",
                 what_of(rm));
        removal_free(rm);
}

void sh_removals_free(sh_removals *rs)
{
        if (!rs)
                return;
        while (rs->all)
                removal_left(rs->all);
        free(rs);
}

unsigned sh_removals_pending(const sh_removals *rs)
{
        return rs ? rs->n : 0;
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
        const removal *rm = arg;
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

static void try_start(removal *rm);

static void retry_fire(sh_loop *l, sh_timer *t, void *data)
{
        removal *rm = data;

        (void)l;
        (void)t;
        rm->retry = NULL; /* the loop frees a fired timer */
        try_start(rm);
}

/* A try failed (`why`): the next one after the backoff, or given up. */
static void try_failed(removal *rm, const char *why)
{
        sh_removals *rs = rm->rs;
        uint64_t ms = RETRY_FIRST_MS;

        /* A sandbox's trash goes with its sandbox's directory once it is deleted. */
        if (rm->where == RM_SANDBOX && sh_sandbox_deleted(rm->sb)) {
                removal_free(rm);
                return;
        }
        if (rs->closed) {
                log_warn("remove-failed", id_of(rm), "background removal of '%s' failed: %s",
                         what_of(rm), why);
                removal_left(rm);
                return;
        }
        /* A clean shutdown waits for it, bounded: it is tried until then (and left after). */
        if (!rs->hurry && ++rm->tries >= RETRY_TRIES) {
                log_error("remove-failed", id_of(rm),
                          "background removal of '%s' failed %u times (last: %s), giving up: "
                          "it stays in the trash until %s",
                          what_of(rm), rm->tries, why,
                          rm->where == RM_SANDBOX ? "the sandbox is deleted" : "the next start");
                removal_free(rm);
                return;
        }
        for (unsigned i = 1; i < rm->tries && ms < RETRY_MAX_MS; i++)
                ms *= 2;
        if (ms > RETRY_MAX_MS)
                ms = RETRY_MAX_MS;
        if (rs->hurry)
                ms = RETRY_SHUTDOWN_MS;
        /* while a shutdown waits, once: its end says what is left */
        sh_log(rs->hurry && rm->shutdown_logged ? SH_LOG_DEBUG : SH_LOG_WARN, "remove-failed",
               id_of(rm), "background removal of '%s' failed: %s; trying again in %llu ms",
               what_of(rm), why, (unsigned long long)ms);
        rm->shutdown_logged = rs->hurry;
        rm->retry = sh_loop_add_timer(sh_manager_loop(rs->m), ms, retry_fire, rm);
        if (!rm->retry) {
                log_error("remove-failed", id_of(rm),
                          "cannot schedule the next removal of '%s': it stays in the trash",
                          what_of(rm));
                removal_free(rm);
        }
}

static void remover_done(sh_child *c, pid_t pid, int status, void *data)
{
        static const char *const step[] = {"", "removing the tree", "joining its cgroup",
                                           "its network namespace or seccomp filter"};
        removal *rm = data;
        char why[64];

        (void)c;
        (void)pid;
        rm->child = NULL;
        if (rm->cg)
                sh_manager_bury_cgroup(rm->rs->m, TAKE_PTR(rm->cg));
        tried(rm);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                if (rm->again && !rm->rs->closed && rm->sb && !sh_sandbox_deleted(rm->sb)) {
                        /* entries came while it ran: once more, from the start */
                        rm->again = false;
                        rm->tries = 0;
                        try_start(rm);
                        return;
                }
                removal_free(rm);
                return;
        }
        if (rm->rs->closed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
                removal_left(rm); /* stopped by sh_removals_stop */
                return;
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) < (int)ARRAY_SIZE(step))
                snprintf(why, sizeof(why), "%s", step[WEXITSTATUS(status)]);
        else if (WIFSIGNALED(status))
                snprintf(why, sizeof(why), "killed by signal %d", WTERMSIG(status));
        else
                snprintf(why, sizeof(why), "status %d", status);
        try_failed(rm, why);
}

/* One try: the child forked with its trash (an fd, or its path) and its cgroup. */
static void try_start(removal *rm)
{
        sh_removals *rs = rm->rs;
        sh_manager *m = rs->m;
        int keep[1 + SH_HELPER_PROCS_MAX];
        _cleanup_close_ int own = -1;
        sh_error *err = NULL;
        int n = 0, saved;

        if (rs->closed) {
                removal_left(rm);
                return;
        }
        rm->again = false;
        rm->filter = sh_helper_remover_filter(&err);
        if (!rm->filter) {
                try_failed(tried_now(rm), err && err->msg ? err->msg : "no filter");
                sh_error_release(&err);
                return;
        }
        keep[0] = -1;
        if (rm->where == RM_STATE_ROOT) {
                keep[0] = sh_manager_trash_fd(m);
        } else if (rm->where == RM_SANDBOX) {
                own = sh_sandbox_open_trash(rm->sb, &err);
                if (own < 0) {
                        /* deleted: nothing of its trash is ours to remove any more */
                        if (sh_sandbox_deleted(rm->sb))
                                removal_free(rm);
                        else
                                try_failed(tried_now(rm), err && err->msg ? err->msg : "no trash");
                        sh_error_release(&err);
                        return;
                }
                keep[0] = own;
        }
        /* Billed to the sandbox it works for, below its cgroup; else limits of its own. Without
         * a cgroup of its own the work would be the daemon's again: say so. */
        if (sh_helper_cgroup_new(sh_manager_cgroups(m), rm->sb ? sh_sandbox_cgroup(rm->sb) : NULL,
                                 'r', sh_manager_config(m)->cpu_max_milli, &rm->cg, keep + 1,
                                 SH_HELPER_PROCS_MAX, &n, &err) < 0) {
                log_warn("remove-cgroup-failed", id_of(rm),
                         "%s, removing '%s' in the daemon's cgroup",
                         err && err->msg ? err->msg : "", what_of(rm));
                sh_error_release(&err);
                rm->cg = NULL;
                n = 0;
        }
        rm->nprocs = n;
        /* By path: only the cgroup.procs fds, from 3. */
        rm->procs_at = keep[0] < 0 ? 3 : 4;
        rm->child = sh_child_fork_fds(sh_manager_loop(m), keep[0] < 0 ? keep + 1 : keep,
                                      keep[0] < 0 ? n : 1 + n, remover_main, rm, remover_done, rm);
        saved = errno;
        for (int i = 1; i <= n; i++)
                close(keep[i]);
        if (rm->child)
                return; /* remover_done runs from the loop, never before the fork returns */
        if (rm->cg)
                sh_manager_bury_cgroup(m, TAKE_PTR(rm->cg));
        /* Never removed inline: a tree costs what a sandbox made it cost, and the loop must not
         * pay that. It waits in the trash for the next try. */
        try_failed(tried_now(rm), strerror(saved));
}

static removal *removal_new(sh_removals *rs, rm_where where, sh_sandbox *sb, const char *dir,
                            const char *name)
{
        removal *rm = calloc(1, sizeof(*rm));

        if (!rm || (name && !(rm->name = strdup(name))) || (dir && !(rm->dir = strdup(dir)))) {
                if (rm)
                        free(rm->name);
                free(rm);
                return NULL;
        }
        rm->rs = rs;
        rm->where = where;
        rm->sb = sb ? sh_sandbox_ref(sb) : NULL;
        SH_LIST_PREPEND(all, rs->all, rm);
        rs->n++;
        return rm;
}

static int start(sh_manager *m, rm_where where, const char *dir, const char *name, sh_error **err)
{
        sh_removals *rs = sh_manager_removals(m);
        removal *rm;

        if (rs->closed) {
                log_warn("remove-left", NULL,
                         "'%s' stays in the trash: the daemon is stopping (the next start "
                         "removes it)",
                         name ? name : "the trash");
                return 0;
        }
        rm = removal_new(rs, where, NULL, dir, name);
        if (!rm)
                return sh_error_make(err, ENOMEM, "out of memory");
        try_start(rm);
        return 0;
}

int sh_remover_start(sh_manager *m, const char *name, sh_error **err)
{
        return start(m, RM_STATE_ROOT, NULL, name, err);
}

int sh_remover_start_at(sh_manager *m, const char *dir, const char *name, sh_error **err)
{
        return start(m, RM_AT_PATH, dir, name, err);
}

void sh_remover_sandbox(sh_manager *m, sh_sandbox *sb)
{
        (void)sh_remover_sandbox_wait(m, sb, NULL);
}

bool sh_remover_sandbox_wait(sh_manager *m, sh_sandbox *sb, sh_waiter *w)
{
        sh_removals *rs = sh_manager_removals(m);
        removal *rm = sh_sandbox_trash_job(sb);

        if (sh_sandbox_deleted(sb) || rs->closed)
                return false;
        if (!rm) {
                rm = removal_new(rs, RM_SANDBOX, sb, NULL, NULL);
                if (!rm) {
                        log_warn("remove-deferred", sh_sandbox_id(sb),
                                 "out of memory: the sandbox's trash waits for its next removal");
                        return false;
                }
                sh_sandbox_set_trash_job(sb, rm);
                try_start(rm);
                /* started, or waiting for its retry (the next try takes the entry), or gone
                 * (its trash could not be opened: deleted) */
                if (!(rm = sh_sandbox_trash_job(sb)))
                        return false;
        } else if (rm->child) {
                /* running: it may have read the trash before the entry came: once more */
                rm->again = true;
                if (w)
                        sh_waiter_add(&rm->later, w);
                return true;
        }
        if (w)
                sh_waiter_add(&rm->waiting, w);
        return true;
}

void sh_removals_hurry(sh_removals *rs)
{
        removal *rm;

        rs->hurry = true;
        SH_LIST_FOREACH(all, rm, rs->all) {
                if (rm->retry) {
                        sh_loop_cancel_timer(sh_manager_loop(rs->m), TAKE_PTR(rm->retry));
                        /* no timer: it waits to be stopped, and is logged as left */
                        rm->retry = sh_loop_add_timer(sh_manager_loop(rs->m), 0, retry_fire, rm);
                }
        }
}

void sh_removals_close(sh_removals *rs)
{
        removal *rm, *next;

        rs->closed = true;
        SH_LIST_FOREACH_SAFE(all, rm, next, rs->all) {
                if (!rm->child)
                        removal_left(rm);
        }
}

void sh_removals_stop(sh_removals *rs)
{
        removal *rm, *next;

        rs->closed = true;
        SH_LIST_FOREACH_SAFE(all, rm, next, rs->all) {
                if (rm->child) {
                        /* its end (reaped by sh_child_wait_all) logs it as left */
                        int k = sh_child_kill(rm->child, SIGKILL);

                        if (k < 0)
                                log_warn("remove-left", id_of(rm),
                                         "cannot stop the removal of '%s': %s", what_of(rm),
                                         strerror(-k));
                } else {
                        removal_left(rm);
                }
        }
}

/* fd 3: the file; fd 4: a pipe's read end, at EOF once the daemon has closed its own copy of the
 * file. Then the child's exit drops the last reference, and pays for the blocks. */
static int closer_main(void *arg)
{
        char c;

        (void)arg;
        while (read(4, &c, 1) < 0 && errno == EINTR)
                ;
        return 0;
}

static void closer_done(sh_child *c, pid_t pid, int status, void *data)
{
        (void)c;
        (void)pid;
        (void)status;
        (void)data;
}

void sh_remover_close(sh_manager *m, int fd)
{
        int p[2], keep[2];
        sh_child *c;

        if (pipe2(p, O_CLOEXEC) < 0) {
                log_warn("discard-inline", NULL, "pipe: %s: a file is freed by the daemon itself",
                         strerror(errno));
                close(fd);
                return;
        }
        keep[0] = fd;
        keep[1] = p[0];
        c = sh_child_fork_fds(sh_manager_loop(m), keep, 2, closer_main, NULL, closer_done, NULL);
        if (!c)
                log_warn("discard-inline", NULL,
                         "cannot fork (%s): a file is freed by the daemon itself", strerror(errno));
        /* ours first, then the child's end of the pipe sees EOF */
        close(fd);
        close(p[0]);
        close(p[1]);
}
