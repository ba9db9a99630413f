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
/* The bound URL, "http://ADDRESS:PORT". */
const char *sh_daemon_url(const sh_daemon *d);
/* Run the loop until a shutdown has completed. 0 or -errno. */
int sh_daemon_run(sh_daemon *d);
/* Ask for a graceful shutdown; safe from any thread. */
void sh_daemon_request_stop(sh_daemon *d);
void sh_daemon_free(sh_daemon *d);
