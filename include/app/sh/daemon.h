/* daemon.h: the whole daemon as an object: loop + sandbox manager + HTTP server, and the
 * graceful shutdown (stop listening, answer or cut in-flight requests, delete every sandbox).
 * main.c runs one; the in-process wire tests run one in a thread. */
#pragma once

#include <stdbool.h>

#include "sh/config.h"
#include "sh/error.h"

typedef struct sh_daemon sh_daemon;

/* Build everything and bind the socket. With `signals`, SIGTERM/SIGINT go through a signalfd
 * (the calling thread must be the only one that could take them). */
int sh_daemon_new(const sh_config *cfg, bool signals, sh_daemon **ret, sh_error **err);
/* The open files a daemon with cfg may need at once (its RLIMIT_NOFILE must allow them): every
 * sandbox's worst case (sh_daemon_fds_per_sandbox: SH_SANDBOX_FDS, and with the /v1 surface
 * SH_OS_SANDBOX_FDS more and SH_OS_BACKGROUND_FDS for each of SANDBOX_HOST_BACKGROUND_MAX
 * background commands) and SH_DAEMON_FD_RESERVE for the requests and the daemon's own. */
#define SH_DAEMON_FD_RESERVE 8192
uint64_t sh_daemon_fds_needed(const sh_config *cfg);
uint64_t sh_daemon_fds_per_sandbox(const sh_config *cfg);
/* The bound URL, "http://ADDRESS:PORT". */
const char *sh_daemon_url(const sh_daemon *d);
/* Run the loop until a shutdown has completed. 0 or -errno. */
int sh_daemon_run(sh_daemon *d);
/* Ask for a graceful shutdown; safe from any thread. */
void sh_daemon_request_stop(sh_daemon *d);
void sh_daemon_free(sh_daemon *d);
