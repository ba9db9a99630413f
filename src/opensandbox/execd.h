/* execd.h: what the execd files of the /v1 surface share (issue 13; OPENSANDBOX.md section
 * 3.1): the SSE encoder of the exec engine's events and the wrapper's handshake (sse.c,
 * pure), each sandbox's execd state (rec->execd, execd.c) with its registry
 * of commands, a command and its runs (run.c), the routes of commands (commands.c), sessions
 * (sessions.c) and metrics (metrics.c). Nothing outside src/opensandbox/ includes it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "os-internal.h"
#include "sh/buf.h"
#include "sh/linesplit.h"

/* ---- bounds (docs/opensandbox.md "Limits") ------------------------------------------------ */

#define OS_SSE_LINE_MAX (64u * 1024) /* a longer line is cut into events of this size */
#define OS_PING_MS      3000         /* silence before a `ping` event */
#define OS_STREAM_HIGH  (1u << 20)   /* unread SSE bytes that pause the command */
/* A streamed command's reads (run.c: cmd_start, on_event): OS_STREAM_READ_MIN bytes at first
 * and after a read whose events came to more than OS_STREAM_GROWTH times its bytes (empty
 * lines: ~60 bytes an event), else OS_STREAM_READ. One read then adds at most ~1 MiB to the
 * queue for output of such lines, ~4 MiB once when it changes to them, ~100 KiB for text. */
#define OS_STREAM_READ       (64u * 1024)
#define OS_STREAM_READ_MIN   (16u * 1024)
#define OS_STREAM_GROWTH     16
#define OS_COMMANDS_MAX      1024              /* commands a sandbox remembers */
#define OS_COMMAND_TEXTS_MAX (4u << 20)        /* their texts (command, cwd, error) together */
#define OS_SESSIONS_MAX      64                /* sessions of a sandbox */
#define OS_COMMAND_TEXT_MAX  (128u * 1024 - 1) /* the kernel's bound on one argv string */
#define OS_SESSION_STATE_MAX (64u * 1024)      /* a session's carried state (cwd + exports) */
#define OS_LOG_STEP          (64u * 1024) /* a logs answer reads its file by this much a step */
#define OS_CAPTURE           4096         /* stderr kept to explain a command that never ran */
#define OS_NONCE_LEN         32           /* hex digits of a run's handshake nonce */

/* ---- sse.c: events -------------------------------------------------------------------------- */

/* Each appends one whole event ({...}\n\n) to q, or nothing (-ENOMEM). Text is any bytes:
 * valid UTF-8 passes unchanged, each byte of an invalid sequence becomes the code point
 * U+DCxx (a lone surrogate, Python's surrogateescape), control characters are escaped. */
int os_sse_text(sh_buf *q, const char *type, const char *text, size_t n, uint64_t ts_ms);
int os_sse_complete(sh_buf *q, uint64_t exec_ms, uint64_t ts_ms);
int os_sse_error(sh_buf *q, const char *evalue, const char *traceback, uint64_t ts_ms);

/* The engine's typed events of one command as OpenSandbox's SSE stream (section 3.1): output
 * chunks split into `stdout` / `stderr` events per line (an empty line is "\n"), the
 * heartbeat as `ping`, the exit as `execution_complete` (code 0) or `error` (the code as text,
 * 128 + N for a signal; the kill's reason, the event's `why`, its traceback), an engine error
 * as `error` with its text (or its `why`). The `init` event is the
 * caller's (it comes before anything reaches the encoder). Pure: the time is the caller's.
 *
 * A session run (session set) carries its shell's state after the command: the wrapper
 * prints "\n<nonce>\n", the state, "<nonce>.\n" on stdout; the encoder shows none of it (nor
 * the empty line the first "\n" may make) and keeps the state (os_sse_session_state). */
typedef struct os_sse {
        sh_linesplit lines[2]; /* stdout's, stderr's (OS_SSE_LINE_MAX) */
        uint64_t start_ms;     /* wall ms of the request: execution_time counts from it */
        bool session;
        char nonce[OS_NONCE_LEN + 1];
        bool in_state, held_empty, ended;
        sh_buf state;
        bool state_over;
} os_sse;

/* Encode ev into q (whole events only). 0 or -ENOMEM. */
int os_sse_event(os_sse *s, sh_buf *q, const sh_exec_event *ev, uint64_t now_ms);
/* The last unterminated line of each stream, as at an exit (a code cell's end): 0 or -ENOMEM
 * (nothing queued). */
int os_sse_flush(os_sse *s, sh_buf *q, uint64_t now_ms);
/* One event of any shape: o (the caller's, `type` and `timestamp` added) as one line. */
int os_sse_object(sh_buf *q, const char *type, cJSON *o, uint64_t ts_ms);
/* A session run's state, complete (the end marker seen, within the bound), or NULL. */
const char *os_sse_session_state(os_sse *s, size_t *ret_len);
void os_sse_done(os_sse *s);

/* ---- sse.c: the wrapper's handshake ----------------------------------------------------------- */

/* Every command runs through a fixed shell wrapper (run.c) that enters the working
 * directory and then, before any byte of the command's own, prints "<nonce> <word>\n" on
 * stdout: `ok`, or why the directory could not be entered. */
typedef enum {
        OS_HS_WAIT = 0, /* not yet complete */
        OS_HS_OK,
        OS_HS_NODIR,    /* the working directory does not exist */
        OS_HS_NOTDIR,   /* it is not a directory */
        OS_HS_NOACCESS, /* it cannot be entered */
        OS_HS_BAD,      /* not the handshake: the wrapper did not run as written */
} os_hs_result;

typedef struct os_handshake {
        char nonce[OS_NONCE_LEN + 1];
        char line[OS_NONCE_LEN + 16];
        size_t len;
        bool skip; /* merged: the current line is not the handshake's, to its end */
        os_hs_result result;
} os_handshake;

/* Feed stdout bytes while result is OS_HS_WAIT: returns how many of them were consumed (the
 * rest, once the result is set, is the command's output). `noise` NULL: stdout alone, where a
 * line other than the handshake's is OS_HS_BAD. Else stderr shares the stream (a background
 * command's one pipe): lines before the handshake's are the shell's own, their bytes appended
 * to noise (its first OS_CAPTURE bytes), and the wait goes on. */
size_t os_handshake_feed(os_handshake *h, const char *p, size_t n, sh_buf *noise);

/* ---- a sandbox's execd state (execd.c owns it; rec->execd) ----------------------------------- */

typedef struct os_cmd os_cmd;
typedef struct os_session os_session;
typedef struct os_metrics os_metrics;

typedef struct os_execd {
        os_record *rec; /* borrowed: the record owns this */
        os_cmd *cmds;   /* every remembered command, oldest first */
        os_cmd *cmds_tail;
        unsigned n_cmds;
        os_session *sessions;
        unsigned n_sessions;
        os_metrics *metrics; /* metrics.c's, NULL until asked */
        uint64_t text_bytes; /* the remembered commands' texts together (OS_COMMAND_TEXTS_MAX) */
        struct sh_code_set *code; /* its code contexts (code.c), NULL until asked */
} os_execd;

/* The sandbox's execd state, made on first use; NULL when out of memory or gone. */
os_execd *os_execd_of(os_record *rec);

/* ---- a command (run.c; its registry execd.c) ------------------------------------------------- */

/* A command's life, written only by run.c's transitions (cmd_broken, cmd_finish, the
 * handshake's):
 *
 *   STARTING --the wrapper said ok--------------------> RUNNING ---------the end--> FINISHED
 *      |-----the directory cannot be entered (400)----> REFUSED ---------the end--> FINISHED
 *      |-----not the wrapper's line (killed)----------> BROKEN ----------the end--> FINISHED
 *      '-----the end before the wrapper said anything (a start failure)-----------> FINISHED
 *
 * A command the engine could not start at all is FINISHED at once. */
typedef enum {
        CMD_STARTING, /* running its wrapper, which has not yet said it entered the directory */
        CMD_RUNNING,  /* the wrapper said ok: what comes is the command's own output */
        CMD_REFUSED,  /* the directory cannot be entered: answered 400, out of the registry */
        CMD_BROKEN,   /* the image's /bin/sh did not run the wrapper: killed */
        CMD_FINISHED, /* ended: its exit code, error and finish time are set */
} cmd_state;

struct os_cmd {
        unsigned refs;
        os_execd *x; /* NULL once out of the registry (or never in it: session runs) */
        cmd_state state;
        char id[SH_UUID_LEN + 1];
        char log_id[SH_ID_LEN + 1];
        char *content;       /* the shell text */
        char *cwd;           /* the directory asked for, NULL: the default */
        size_t text_len;     /* content and cwd: its share of x->text_bytes */
        os_session *session; /* a session's run: that session, until the end or its delete */
        SH_LIST_FIELDS(os_cmd, runs); /* in session->runs */

        sh_exec *e;    /* a streamed run: the consumer's reference, until the end */
        sh_bgexec *bg; /* a background command: the sandbox's (sh/bgexec.h), its output its log */
        os_handshake hs;
        sh_buf pre_err; /* stderr that came before the handshake line */
        os_sse sse;
        uint64_t start_ms, finished_ms; /* wall */
        int exit_code;
        char *error;

        /* its request's stream: ours until its last event is queued or the client left */
        sh_queued_stream *qs;

        SH_LIST_FIELDS(os_cmd, all);
};

/* execd.c, the registry: room for one more command whose texts take `need` bytes (the oldest
 * finished ones forgotten until fewer than OS_COMMANDS_MAX are remembered and the texts fit
 * OS_COMMAND_TEXTS_MAX), false when the running ones leave none; a command in (a reference
 * taken) and out (the reference let go); found by id (NULL: none). */
bool os_cmd_room(os_execd *x, size_t need);
void os_cmd_link(os_execd *x, os_cmd *c);
void os_cmd_unlink(os_cmd *c);
os_cmd *os_cmd_find(os_execd *x, const char *id, size_t len);

/* What a run is: a command of /command (foreground or background), or a session's run. */
typedef struct os_run_opts {
        const char *text;    /* the shell text */
        const char *cwd;     /* NULL: the default (the workspace, or the session's) */
        const cJSON *envs;   /* validated object of strings, or NULL */
        uint64_t timeout_ms; /* 0: none */
        bool background;
        os_session *session;   /* a session's run */
        const char *first_cwd; /* a session's first run: its cwd, created if missing */
        const char *state;     /* a session's state (shell text), or NULL */
        const char *init_id;   /* the init event's text (a session id), NULL: the command id */
} os_run_opts;

/* Start a run for request r (its answer: the SSE stream, or a 400 for a working directory
 * that cannot be entered). Answers r on every path. */
void os_run_start(sh_request *r, os_record *rec, const os_run_opts *o);

/* commands.c: the body of a run (/command, a session's run): its JSON, the fields they share
 * (command, cwd, timeout) judged into o; NULL having answered r (400). The caller frees it. */
cJSON *os_run_body(sh_request *r, os_run_opts *o);

/* run.c -> sessions.c: a session's run has started (into the session's runs), ended (out of
 * them; `state` its new state, NULL: unchanged). */
void os_session_run_started(os_session *s, os_cmd *c);
void os_session_run_ended(os_session *s, os_cmd *c, const char *state, size_t len);
/* sessions.c: the record goes: every session ends (their runs are killed with the sandbox). */
void os_sessions_gone(os_execd *x);
/* sessions.c: DELETE /command?id=<session id> deletes that session (as OpenSandbox's execd):
 * 1 done, 0 no such session. */
int os_session_interrupt(os_execd *x, const char *id, size_t len);
/* Kill a command's whole tree; `why` (NULL: keep) becomes its traceback. */
void os_cmd_kill(os_cmd *c, const char *why);
/* A reference to a command dropped (the registry's, a logs answer's). */
void os_cmd_unref(os_cmd *c);

/* code.c: the record goes: its code contexts end (their running cells with their death). */
void os_code_gone(os_execd *x);

/* metrics.c: the record goes: its sampler stops, its watchers end. */
void os_metrics_gone(os_execd *x);

/* The 200 text/event-stream answer of a queued stream (a command's, a metrics watch), with
 * what it has queued (500 when out of memory); nothing once its request has ended. */
void os_reply_event_stream(sh_queued_stream *qs);

/* 405 for a served execd path asked with a method it does not serve (every file's tables). */
void os_execd_wrong_method(sh_request *r);
