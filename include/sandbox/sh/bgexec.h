/* bgexec.h: a sandbox's background commands (the /v1 surface's background commands and its
 * entrypoints): a command that runs on with nobody attached, its stdout and stderr (one pipe:
 * one daemon fd while it runs) appended as they come to a bounded log of the sandbox's
 * (sh/ringlog.h: the daemon holds none of it), its reads billed to the sandbox's one rate of
 * unattended output (SH_BG_RATE a second: past it the command waits on its full pipe, so one
 * sandbox's output never takes the daemon's one thread from the others), its timeout and its
 * kill (the whole tree, with a reason: sh/exec.h). A command's log counts under the sandbox's
 * bounds: SANDBOX_HOST_BACKGROUND_MAX such commands running at once, and their logs together
 * at most SH_BG_LOG_BUDGET_TIMES x SANDBOX_HOST_COMMAND_LOG_MAX bytes, past which the logs of
 * finished ones are dropped, oldest first. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sh/exec.h"
#include "sh/ringlog.h"
#include "sh/sandbox.h"

#define SH_BG_RATE             (8u << 20) /* unattended output read a second, per sandbox */
#define SH_BG_CHARGE_MIN       4096       /* a read of less is billed this much (its syscalls) */
#define SH_BG_LOG_BUDGET_TIMES 4          /* a sandbox's command logs together, in full logs */

typedef struct sh_bgexec sh_bgexec;

typedef struct sh_bgexec_opts {
        /* NULL: a command's log, "c-<n>" of SANDBOX_HOST_COMMAND_LOG_MAX bytes, its file made
         * now (a sandbox whose disk is full is told at once), under the sandbox's bounds.
         * Else the log of this name and log_max bytes, its file made by its first byte (a quiet
         * command leaves none), outside the bounds (an entrypoint). */
        const char *log_name;
        uint64_t log_max;
        uint64_t timeout_ms; /* killed this long after its start; 0: never */
        /* Its output goes to the owner's fn instead of the log until sh_bgexec_unhold (the
         * owner reads a line of its own first: the /v1 wrapper's handshake). */
        bool hold;
        bool shell; /* its argv is NONCE CWD TEXT: the /v1 shell wrapper (sh_exec_opts) */
} sh_bgexec_opts;

/* The owner's: the output while held, then the end (exit or error, with its `why`), once,
 * from the loop, as a streamed exec's consumer is told (e: the command's session). It may
 * free b. */
typedef sh_exec_event_fn sh_bgexec_fn;

/* The sandbox's one rate of unattended output (SH_BG_RATE a second; borrowed: an exec spec takes
 * its own reference), made on first use: what any long-lived exec of the sandbox whose output
 * may come with nobody reading it (a code context between cells) is billed to. NULL: out of
 * memory (err). */
sh_exec_rate *sh_bgexec_rate(sh_sandbox *sb, sh_error **err);

/* A background command of sb, its log made: nothing runs yet. SH_E_UNAVAILABLE when sb runs
 * SANDBOX_HOST_BACKGROUND_MAX commands already; the log's error (its disk full). */
int sh_bgexec_new(sh_sandbox *sb, const sh_bgexec_opts *o, sh_bgexec **ret, sh_error **err);
/* Run argv as sh_sandbox_exec does (its environment, its cgroup). An error comes back here and
 * the command never runs (b is still the owner's to free). */
int sh_bgexec_start(sh_bgexec *b, char *const *argv, const cJSON *env, sh_bgexec_fn fn, void *data,
                    sh_error **err);
/* Bytes into its log (what the owner held), as its output is. */
void sh_bgexec_append(sh_bgexec *b, const char *p, size_t n);
/* Its output goes to its log from now on. */
void sh_bgexec_unhold(sh_bgexec *b);
/* sh_exec_kill: the whole tree, its end saying why. Nothing once it ended. */
void sh_bgexec_kill(sh_bgexec *b, const char *why);
/* Started and not ended. */
bool sh_bgexec_running(const sh_bgexec *b);
/* Its log (offsets: sh_ringlog_first, total), and up to n bytes of it from off, read from its
 * file (sh_ringlog_read's results; an error once its sandbox is deleted). */
const sh_ringlog *sh_bgexec_log(const sh_bgexec *b);
ssize_t sh_bgexec_read(const sh_bgexec *b, uint64_t off, char *out, size_t n);
/* The owner lets it go (accepts NULL): a command still running is killed and its end told to
 * nobody; its log is removed. */
void sh_bgexec_free(sh_bgexec *b);
