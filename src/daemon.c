/* daemon.c: the composition root: builds the loop, the services (manager, persister, tool
 * resolver), the transport and the surfaces on it, hands each what it needs; runs the graceful
 * shutdown. */
#include "sh/daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sh/cluster.h"
#include "sh/http.h"
#include "sh/log.h"
#include "sh/loop.h"
#include "sh/native.h"
#include "sh/opensandbox.h"
#include "sh/persist.h"
#include "sh/sandbox.h"
#include "sh/tools.h"

#define SHUTDOWN_GRACE_MS 10000 /* in-flight requests and removals get this long to finish */

struct sh_daemon {
        sh_loop *loop;
        sh_manager *mgr;
        sh_persister *persister;
        sh_tools *tools;
        sh_server *srv;
        sh_cluster *cluster;  /* this pod's peers */
        sh_native_ctx native; /* what the native surface's handlers work with */
        sh_opensandbox *os;   /* the /v1 surface's state (NULL: SANDBOX_HOST_OPENSANDBOX off) */
        int stopfd;           /* eventfd: sh_daemon_request_stop from any thread */
        bool stopping;
        uint64_t stop_deadline_ms;
};

/* The reserve: the transport's connections (1,024 waiting, 1,000 active), the files an active
 * request holds beside its socket (an upload's, a download's, an exec's pipes; a walk up to
 * ten), the persist, unpack and fetch jobs, the daemon's own (~100). Past it the daemon still
 * degrades gracefully: creates and file requests answer 503, accepting pauses. */
uint64_t sh_daemon_fds_needed(const sh_config *cfg)
{
        return cfg->max_sandboxes * sh_daemon_fds_per_sandbox(cfg) + SH_DAEMON_FD_RESERVE;
}

/* What one sandbox can make the daemon hold with no request open, at most: its worker's
 * socket; through /v1 its entrypoint's pipe and one pipe per background command, at most
 * SANDBOX_HOST_BACKGROUND_MAX of them (their logs are opened per use; sessions and
 * everything else of a sandbox hold none between requests). */
uint64_t sh_daemon_fds_per_sandbox(const sh_config *cfg)
{
        return SH_SANDBOX_FDS +
               (cfg->opensandbox ? SH_OS_SANDBOX_FDS + cfg->background_max * SH_OS_BACKGROUND_FDS
                                 : 0);
}

/* What this pod says of its room (cluster.h): accepting creates when not draining, not full
 * and its images ready. */
static void cluster_room(void *data, sh_cluster_room *ret)
{
        sh_manager *m = data;
        const sh_config *cfg = sh_manager_config(m);
        unsigned n = sh_manager_count(m);

        ret->accepting =
                !sh_manager_draining(m) && !sh_manager_full(m) && sh_manager_images_ready(m);
        ret->in_use = n;
        ret->room = cfg->max_sandboxes > n ? cfg->max_sandboxes - n : 0;
}

static void shutdown_poll(sh_loop *l, sh_timer *t, void *data)
{
        sh_daemon *d = data;

        /* Idle keep-alive connections are not waited for: MHD closes them at stop. The
         * removals of what the deletes left are (a clean stop leaves no trash), within the
         * same bound: what is still at work then is stopped and logged, and the next start
         * with this state root removes it. */
        if (sh_now_ms() >= d->stop_deadline_ms) {
                if (sh_manager_removing(d->mgr))
                        sh_manager_removals_stop(d->mgr);
                sh_loop_stop(l);
                return;
        }
        if (!sh_server_busy(d->srv) && !sh_manager_removing(d->mgr)) {
                sh_loop_stop(l);
                return;
        }
        if (!sh_loop_add_timer(l, 20, shutdown_poll, d))
                sh_loop_stop(l);
}

static void begin_shutdown(sh_daemon *d, const char *why)
{
        if (d->stopping)
                return;
        d->stopping = true;
        log_info("shutdown", NULL, "%s: no new connections; deleting every sandbox", why);
        sh_server_quiesce(d->srv);
        sh_manager_set_draining(d->mgr, true);
        sh_server_abort_waiting(d->srv);
        sh_manager_delete_all(d->mgr);
        sh_manager_removals_hurry(d->mgr);
        d->stop_deadline_ms = sh_now_ms() + SHUTDOWN_GRACE_MS;
        if (!sh_loop_add_timer(d->loop, 0, shutdown_poll, d))
                sh_loop_stop(d->loop);
}

/* The restore step of a create (sh_restorer), done by the persister: the item's archive, or a
 * directory of the creator's (a snapshot's tree). */
static int restore_step(void *impl, sh_sandbox *sb, sh_sandbox_done_fn done, void *data,
                        sh_error **err)
{
        return sh_persist_restore(impl, sb, done, data, err);
}

static int restore_dir_step(void *impl, sh_sandbox *sb, const char *root, const char *name,
                            sh_sandbox_done_fn done, void *data, sh_error **err)
{
        return sh_persist_restore_from(impl, sb, root, name, done, data, err);
}

static void on_signal(sh_loop *l, sh_io *io, int fd, uint32_t signo, void *data)
{
        begin_shutdown(data, signo == SIGINT ? "SIGINT" : "SIGTERM");
}

static void on_stopfd(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        uint64_t v;

        if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                log_warn("stopfd", NULL, "read: %s, ignoring", strerror(errno));
        begin_shutdown(data, "stop requested");
}

int sh_daemon_new(const sh_config *cfg, bool signals, sh_daemon **ret, sh_error **err)
{
        static const int sigs[] = {SIGTERM, SIGINT};
        sh_daemon *d = calloc(1, sizeof(*d));
        sh_surface native, os;
        int r;

        if (!d)
                return sh_error_make(err, ENOMEM, "out of memory");
        d->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (d->stopfd < 0) {
                r = sh_error_make(err, errno, "eventfd");
                free(d);
                return r;
        }
        r = sh_loop_new(&d->loop);
        if (r < 0) {
                sh_error_make(err, -r, "creating the event loop");
                goto fail;
        }
        if (!sh_loop_add_io(d->loop, d->stopfd, EPOLLIN, on_stopfd, d)) {
                r = sh_error_make(err, errno, "registering the stop fd");
                goto fail;
        }
        if (signals && (r = sh_loop_add_signals(d->loop, sigs, 2, on_signal, d)) < 0) {
                sh_error_make(err, -r, "signalfd");
                goto fail;
        }
        /* The composition root: every service is built here and handed to what uses it. */
        if (sh_manager_new(cfg, d->loop, &d->mgr, err) < 0)
                goto fail;
        if (sh_persister_new(cfg, d->loop, d->mgr, &d->persister, err) < 0)
                goto fail;
        if (sh_tools_new(cfg, d->loop, sh_manager_cgroups(d->mgr), &d->tools, err) < 0)
                goto fail;
        /* With an archive root, every create with an item restores it before it is answered;
         * a create with a directory (a snapshot's) restores that. */
        sh_manager_set_restorer(d->mgr, &(sh_restorer){.start = cfg->nfs_root ? restore_step : NULL,
                                                       .start_dir = restore_dir_step,
                                                       .impl = d->persister});
        if (sh_server_new(cfg, d->loop, &d->srv, err) < 0)
                goto fail;
        if (sh_cluster_new(cfg, d->loop, sh_manager_pod_token(d->mgr), sh_server_port(d->srv),
                           cluster_room, d->mgr, &d->cluster, err) < 0)
                goto fail;
        d->native = (sh_native_ctx){
                .cfg = cfg,
                .loop = d->loop,
                .mgr = d->mgr,
                .persister = d->persister,
                .tools = d->tools,
                .srv = d->srv,
                .cluster = d->cluster,
        };
        sh_native_surface(&d->native, &native);
        if (sh_server_add_surface(d->srv, &native, err) < 0)
                goto fail;
        /* OpenSandbox's API under /v1/, over the same registry; off, /v1 paths are the native
         * surface's (404 NotFound). */
        if (cfg->opensandbox) {
                if (sh_opensandbox_new(cfg, d->loop, d->mgr, d->persister, d->srv, d->cluster,
                                       &d->os, err) < 0)
                        goto fail;
                sh_opensandbox_surface(d->os, &os);
                if (sh_server_add_surface(d->srv, &os, err) < 0)
                        goto fail;
        }
        *ret = d;
        return 0;
fail:
        sh_daemon_free(d);
        return -1;
}

const char *sh_daemon_url(const sh_daemon *d)
{
        return sh_server_url(d->srv);
}

int sh_daemon_run(sh_daemon *d)
{
        return sh_loop_run(d->loop);
}

void sh_daemon_request_stop(sh_daemon *d)
{
        uint64_t one = 1;

        if (write(d->stopfd, &one, sizeof(one)) < 0)
                log_warn("stopfd", NULL, "write: %s", strerror(errno));
}

void sh_daemon_free(sh_daemon *d)
{
        if (!d)
                return;
        sh_server_free(d->srv);
        /* Persist jobs first (each thaws its sandbox and buries its helper cgroup through the
         * manager, which must still exist); then the tool store, whose cgroups live in the
         * manager's subtree (running unpacks are killed and report while the manager waits
         * for every child); then the sandboxes. */
        sh_persister_free(d->persister);
        /* The /v1 records after the persister (snapshot jobs report to them), before the
         * manager (whose observer they are). */
        sh_opensandbox_free(d->os);
        /* After the surfaces, which may hold its asks: its probes and asks are cancelled. */
        sh_cluster_free(d->cluster);
        sh_tools_free(d->tools);
        sh_manager_free(d->mgr); /* deletes what is left and waits for removals */
        sh_loop_free(d->loop);
        sh_close(d->stopfd);
        free(d);
}
