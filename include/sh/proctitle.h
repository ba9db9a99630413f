/* proctitle.h: overwrite the process's command line (/proc/PID/cmdline) in place. The sandbox
 * worker inherits the daemon's argv, which names the state root and other settings; a sandbox
 * can read PID 1's cmdline, so the worker replaces it. */
#pragma once

/* Remember the argv area (call once from main). */
void sh_proctitle_init(int argc, char **argv);

/* Replace the command line and the thread name. No-op if init was not called. */
void sh_proctitle_set(const char *title);
