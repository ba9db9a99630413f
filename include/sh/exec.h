/* exec.h: one exec session (CONTRACT.md section 4): the command's pipes read from the loop,
 * NDJSON frames queued for the consumer (`{"o"}` chunks as output arrives, heartbeats while
 * silent, then one `{"exit"}` or `{"error"}` frame), the separate capped out/err buffers, the
 * grace for descendants holding the pipes, and the kill of the exec's whole cgroup when the
 * consumer goes away. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "sh/error.h"
#include "sh/sandbox.h"

typedef struct sh_exec sh_exec;

/* Called (from the loop) when frame bytes were queued or the stream has ended. */
typedef void (*sh_exec_notify_fn)(sh_exec *e, void *data);

/* Start `cmd` (array of strings, validated) with the exec's `env` (object of strings or NULL)
 * in sandbox sb. Errors are plain HTTP errors (no stream has opened). */
int sh_exec_start(sh_manager *m, sh_sandbox *sb, const cJSON *cmd, const cJSON *env,
                  sh_exec_notify_fn fn, void *data, sh_exec **ret, sh_error **err);

/* Take up to max bytes of queued NDJSON. 0 when nothing is queued. */
size_t sh_exec_read(sh_exec *e, char *out, size_t max);
/* True when the last frame is queued and every byte of it has been read. */
bool sh_exec_done(const sh_exec *e);

/* The consumer is gone. If the exec has not ended, its command and everything it started are
 * killed. The session frees itself when nothing refers to it any more. */
void sh_exec_detach(sh_exec *e);

/* Manager side: worker events and sandbox end. */
void sh_exec_on_started(sh_sandbox *sb, uint32_t id, int pid);
void sh_exec_on_exited(sh_sandbox *sb, uint32_t id, int status);
/* End every exec of sb with an in-band error frame (sandbox deleted, worker dead). */
void sh_exec_fail_all(sh_sandbox *sb, const char *type, const char *detail);
