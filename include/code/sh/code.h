/* code.h: the code interpreter's service (OPENSANDBOX.md section 3.3): a sandbox's contexts,
 * each one long-lived exec session (sh/exec.h, started through sh_sandbox_exec: the sandbox's
 * uid, namespaces, an exec cgroup of its own under the sandbox's) running the daemon's driver
 * of its language (sh/codedrivers.h), which reads cells on its fd 0 and writes frames on its
 * fd 3 (sh/codeframe.h); and the cells run in them, as typed events like an exec's: output
 * chunks, results, then one end (complete, the interpreter's error, or the context's death).
 * Nothing here knows HTTP: the /v1 surface encodes the events (opensandbox/code.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/codedrivers.h"
#include "sh/error.h"
#include "sh/loop.h"

struct sh_sandbox;
typedef struct cJSON cJSON;

typedef struct sh_code_set sh_code_set; /* one sandbox's contexts */
typedef struct sh_code_ctx sh_code_ctx; /* one context */

#define SH_CODE_GRACE_MS    2000        /* a cell's SIGINT, then its context killed after this */
#define SH_CODE_FRAME_SLACK (64u << 10) /* a frame line may exceed result_max by this much */
#define SH_CODE_CELL_MAX    (2u << 20) /* the bytes of one cell's code (within the input's bound) */
#define SH_CODE_CWD_MAX     4096

/* What the service needs of the daemon (copied). */
typedef struct sh_code_env {
        sh_loop *loop;
        uint64_t contexts_max; /* contexts of one sandbox (SANDBOX_HOST_CODE_CONTEXTS_MAX) */
        uint64_t idle_ms;    /* an idle context ends after this (SANDBOX_HOST_CODE_CONTEXT_IDLE) */
        uint64_t result_max; /* bytes of one result's bundle (SANDBOX_HOST_CODE_RESULT_MAX) */
} sh_code_env;

/* A sandbox's contexts (none yet), for sb (a reference is taken). NULL when out of memory. */
sh_code_set *sh_code_set_new(const sh_code_env *env, struct sh_sandbox *sb);
/* The sandbox goes: every context is killed, a running cell ends with its death, a waiting
 * create fails. Accepts NULL. */
void sh_code_set_free(sh_code_set *s);

/* ---- contexts ---------------------------------------------------------------------------- */

/* The create's answer, once: err NULL: c is ready (IDLE, in the set); else the context is gone
 * (err: SH_E_INVALID naming the interpreter the image lacks or the cwd it could not enter,
 * SH_E_INTERNAL otherwise; c must not be used). Never called from inside sh_code_context_new. */
typedef void (*sh_code_ready_fn)(sh_code_ctx *c, const sh_error *err, void *data);

/* Start a context of lang in the sandbox, in cwd (NULL or "": the workspace): the driver runs,
 * ready comes when it says so. Errors at once (the set full: SH_E_INVALID naming
 * SANDBOX_HOST_CODE_CONTEXTS_MAX; the exec not started) come back here. *ret is the set's
 * (never freed while the ready call is pending but by sh_code_context_cancel). */
int sh_code_context_new(sh_code_set *s, sh_code_lang lang, const char *cwd, sh_code_ready_fn fn,
                        void *data, sh_code_ctx **ret, sh_error **err);
/* A create whose asker went away: the context is deleted, ready never comes. */
void sh_code_context_cancel(sh_code_ctx *c);

sh_code_ctx *sh_code_context_find(sh_code_set *s, const char *id, size_t len);
/* The contexts of lang (or of every language, all), in the order made: fn for each ready one
 * (starting ones are not listed). */
void sh_code_context_list(sh_code_set *s, bool all, sh_code_lang lang,
                          void (*fn)(sh_code_ctx *c, void *data), void *data);
/* Delete one (its process killed, a running cell ends with its death), or every one of lang:
 * the number deleted. */
void sh_code_context_delete(sh_code_ctx *c);
unsigned sh_code_context_delete_lang(sh_code_set *s, sh_code_lang lang);

const char *sh_code_context_id(const sh_code_ctx *c);
sh_code_lang sh_code_context_lang(const sh_code_ctx *c);

/* ---- cells ------------------------------------------------------------------------------- */

typedef enum {
        SH_CODE_EV_OUTPUT, /* stdout (stream 0) or stderr (1) bytes, as read */
        SH_CODE_EV_RESULT, /* a MIME bundle (a cJSON object of strings, valid during the event) */
        SH_CODE_EV_END,    /* the last: complete, the interpreter's error, or the death */
} sh_code_event_type;

typedef enum {
        SH_CODE_END_OK,    /* the cell completed */
        SH_CODE_END_ERROR, /* the interpreter's error: ename, evalue, traceback */
        SH_CODE_END_DEATH, /* the context died (or was killed): ename "ContextDied", evalue why */
} sh_code_end;

typedef struct sh_code_event {
        sh_code_event_type type;
        uint64_t execution_count; /* the cell's number in its context (1, 2, ...) */
        union {
                struct {
                        int stream; /* 0 stdout, 1 stderr */
                        const char *data;
                        size_t len;
                } output;
                const cJSON *bundle;
                struct {
                        sh_code_end how;
                        uint64_t time_ms;       /* since the cell was sent */
                        const char *ename;      /* ERROR, DEATH */
                        const char *evalue;     /* ERROR, DEATH */
                        const cJSON *traceback; /* ERROR: an array of strings, or NULL */
                } end;
        };
} sh_code_event;

/* The cell's consumer: called from the loop, never inside sh_code_run; after END nothing more
 * comes. */
typedef void (*sh_code_event_fn)(sh_code_ctx *c, const sh_code_event *ev, void *data);

/* Run a cell of n bytes in c (IDLE): its events to fn; timeout_ms (0: none) -> an interrupt,
 * then the kill after the grace. Busy: SH_E_BUSY; dead or starting: SH_E_INVALID. The running
 * cell holds a reference to c until its END. */
int sh_code_run(sh_code_ctx *c, const char *code, size_t n, uint64_t timeout_ms,
                sh_code_event_fn fn, void *data, sh_error **err);
/* Backpressure of the cell's consumer: stop reading its output, and go on. */
void sh_code_pause(sh_code_ctx *c);
void sh_code_resume(sh_code_ctx *c);
/* The running cell's consumer is gone (a client left): no more events; the cell is
 * interrupted, and its context killed after the grace unless it ended. */
void sh_code_detach(sh_code_ctx *c);
/* Interrupt the running cell (SIGINT to the context's processes); nothing when idle. */
void sh_code_interrupt(sh_code_ctx *c);
/* A context made for one cell only (the stateless form): deleted once that cell ends. */
void sh_code_context_once(sh_code_ctx *c);
