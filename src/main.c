/* main.c: process entry: configuration, logging, signals, the daemon, exit codes
 * (0 after a graceful shutdown, 1 on a start-up failure, 2 on an invalid setting). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "sh/config.h"
#include "sh/daemon.h"
#include "sh/log.h"
#include "sh/proctitle.h"

extern char **environ;

/* SIGPIPE gets a no-op handler, not SIG_IGN: an ignored disposition would be inherited by
 * every process exec'd from here, a handler is reset by execve. */
static void on_sigpipe(int sig)
{
        (void)sig;
}

int main(int argc, char **argv)
{
        struct sigaction sa = {.sa_handler = on_sigpipe};
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
        sh_proctitle_init(argc, argv);
        sh_log_set_level(STREQ(cfg.log_level, "debug")   ? SH_LOG_DEBUG
                         : STREQ(cfg.log_level, "warn")  ? SH_LOG_WARN
                         : STREQ(cfg.log_level, "error") ? SH_LOG_ERROR
                                                         : SH_LOG_INFO);
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGPIPE, &sa, NULL) < 0) {
                perror("sandbox-host: sigaction");
                return 1;
        }
        if (sh_daemon_new(&cfg, true, &d, &err) < 0) {
                fprintf(stderr, "sandbox-host: %s\n", err && err->msg ? err->msg : "start failed");
                log_error("start-failed", NULL, "%s", err && err->msg ? err->msg : "");
                sh_error_release(&err);
                sh_config_done(&cfg);
                return 1;
        }
        fprintf(stderr, "listening on %s\n", sh_daemon_url(d));
        fflush(stderr);
        r = sh_daemon_run(d);
        sh_daemon_free(d);
        log_info("stopped", NULL, "%s", r < 0 ? strerror(-r) : "");
        sh_config_done(&cfg);
        return r < 0 ? 1 : 0;
}
