/* main.c: process entry: configuration, logging, signals, the daemon, exit codes
 * (0 after a graceful shutdown, 1 on a start-up failure, 2 on an invalid setting). */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <stdio.h>
#include <string.h>

#include "sh/config.h"
#include "sh/daemon.h"
#include "sh/log.h"

extern char **environ;

/* Each sandbox holds a few fds (its directories, its worker's socket and pidfd, cgroup
 * directories): raise the soft limit to the hard one so capacity is set by
 * SANDBOX_HOST_MAX_SANDBOXES, not by a default of 1024. */
static void raise_fd_limit(void)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        log_warn("rlimit", NULL, "cannot raise RLIMIT_NOFILE: %s, ignoring",
                                 strerror(errno));
        }
}

int main(int argc, char **argv)
{
        sh_config cfg;
        sh_daemon *d = NULL;
        sh_error *err = NULL;
        char *msg = NULL;
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
        raise_fd_limit();
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
        fprintf(stderr, "listening on %s\n", sh_daemon_url(d));
        fflush(stderr);
        r = sh_daemon_run(d);
        sh_daemon_free(d);
        log_info("stopped", NULL, "%s", r < 0 ? strerror(-r) : "");
        sh_config_done(&cfg);
        return r < 0 ? 1 : 0;
}
