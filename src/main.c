/* main.c: process entry: configuration, logging, signals, the daemon, exit codes
 * (0 after a graceful shutdown, 1 on a start-up failure, 2 on an invalid setting). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "sh/config.h"
#include "sh/daemon.h"
#include "sh/log.h"

extern char **environ;

/* Every idle sandbox holds two or three fds of the daemon and every request a few: raise
 * RLIMIT_NOFILE as far as the system allows, both limits to fs.nr_open where the daemon may
 * (CAP_SYS_RESOURCE: root on a host; a pod is not given it), else the soft limit to the hard
 * one (the container runtime's, typically 524,288 or more). Before sh_daemon_new: project
 * quota mode drops CAP_SYS_RESOURCE there. Sandboxes never inherit it: their PID 1 sets
 * 1024/1024 (docs/security.md, "Resource limits"). Returns the soft limit now. */
static rlim_t raise_fd_limit(void)
{
        unsigned long long nr_open = 0;
        struct rlimit rl;
        FILE *f;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
                log_warn("rlimit", NULL, "getrlimit(RLIMIT_NOFILE): %s, not checked",
                         strerror(errno));
                return RLIM_INFINITY;
        }
        f = fopen("/proc/sys/fs/nr_open", "re");
        if (!f || fscanf(f, "%llu", &nr_open) != 1)
                nr_open = 0;
        if (f)
                fclose(f);
        if (nr_open > rl.rlim_max && rl.rlim_max != RLIM_INFINITY) {
                struct rlimit all = {.rlim_cur = nr_open, .rlim_max = nr_open};

                if (setrlimit(RLIMIT_NOFILE, &all) == 0)
                        return all.rlim_cur;
                if (errno != EPERM)
                        log_warn("rlimit", NULL, "cannot raise RLIMIT_NOFILE to %llu: %s", nr_open,
                                 strerror(errno));
        }
        if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
                        log_warn("rlimit", NULL, "cannot raise RLIMIT_NOFILE: %s, ignoring",
                                 strerror(errno));
                        (void)getrlimit(RLIMIT_NOFILE, &rl);
                }
        }
        return rl.rlim_cur;
}

int main(int argc, char **argv)
{
        sh_config cfg;
        sh_daemon *d = NULL;
        sh_error *err = NULL;
        char *msg = NULL;
        rlim_t fd_limit;
        uint64_t fd_need;
        int r;

        switch (sh_config_parse(&cfg, argc, argv, environ, &msg)) {
        case SH_CONFIG_OK:
                break;
        case SH_CONFIG_HELP:
                fputs(sh_config_help(), stdout);
                sh_config_done(&cfg);
                return 0;
        case SH_CONFIG_VERSION:
                printf("sandbox-host %s (%s)\n", SH_VERSION, SH_GIT_COMMIT);
                sh_config_done(&cfg);
                return 0;
        case SH_CONFIG_INVALID:
                fprintf(stderr, "sandbox-host: %s\n", msg ? msg : "invalid configuration");
                free(msg);
                sh_config_done(&cfg);
                return 2;
        }
        /* A capacity the fd limit cannot hold is a setting this host cannot honour: the start
         * stops (exit 2), rather than creates failing later. */
        fd_limit = raise_fd_limit();
        fd_need = sh_daemon_fds_needed(&cfg);
        if (fd_limit != RLIM_INFINITY && (uint64_t)fd_limit < fd_need) {
                fprintf(stderr,
                        "sandbox-host: SANDBOX_HOST_MAX_SANDBOXES=%" PRIu64 " needs %" PRIu64
                        " open files (%" PRIu64 " per sandbox at most, with "
                        "SANDBOX_HOST_BACKGROUND_MAX=%" PRIu64 " background commands each; %d "
                        "for requests) but RLIMIT_NOFILE is %llu and cannot be raised: give the "
                        "container a higher nofile limit or lower SANDBOX_HOST_MAX_SANDBOXES or "
                        "SANDBOX_HOST_BACKGROUND_MAX (docs/configuration.md)\n",
                        cfg.max_sandboxes, fd_need, sh_daemon_fds_per_sandbox(&cfg),
                        cfg.background_max, SH_DAEMON_FD_RESERVE, (unsigned long long)fd_limit);
                sh_config_done(&cfg);
                return 2;
        }
        sh_log_set_level(STREQ(cfg.log_level, "debug")   ? SH_LOG_DEBUG
                         : STREQ(cfg.log_level, "warn")  ? SH_LOG_WARN
                         : STREQ(cfg.log_level, "error") ? SH_LOG_ERROR
                                                         : SH_LOG_INFO);
        if (sh_daemon_new(&cfg, true, &d, &err) < 0) {
                /* A setting this host cannot honour (a disk limit nothing here can enforce)
                 * is an invalid setting: exit 2, as for a bad value. */
                bool setting = sh_error_kind_of(err) == SH_E_SETTING;

                fprintf(stderr, "sandbox-host: %s\n", err && err->msg ? err->msg : "start failed");
                log_error("start-failed", NULL, "%s", err && err->msg ? err->msg : "");
                sh_error_release(&err);
                sh_config_done(&cfg);
                return setting ? 2 : 1;
        }
        log_info("fd-limit", NULL, "RLIMIT_NOFILE %llu: %" PRIu64 " needed at most",
                 (unsigned long long)fd_limit, fd_need);
        fprintf(stderr, "listening on %s\n", sh_daemon_url(d));
        fflush(stderr);
        r = sh_daemon_run(d);
        sh_daemon_free(d);
        log_info("stopped", NULL, "%s", r < 0 ? strerror(-r) : "");
        sh_config_done(&cfg);
        return r < 0 ? 1 : 0;
}
