/* exec.h: one exec session, the engine behind every surface's command runs: the command's
 * pipes read from the loop, typed events for its consumer (output chunks with their stream,
 * heartbeats while silent, then one exit or one error), the output kept for the exit event up
 * to a bound, the grace for descendants holding the pipes, backpressure (the consumer says
 * when it is full and when it has room), and the kill of the exec's whole cgroup when the
 * consumer goes away. A session knows nothing of HTTP or of any wire format: the native
 * surface encodes its events as NDJSON (native/ndjson.c), another surface may encode them
 * otherwise. Sessions are started by the sandbox layer (sh_sandbox_exec), which forwards the
 * worker's events to them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sh/error.h"
#include "sh/loop.h"

struct sh_cgroup;
struct sh_cgroup_root;
struct sh_worker;

typedef struct sh_exec sh_exec;

/* A read rate exec sessions share (a sandbox's output that no client waits for): a token
 * bucket refilled at `bytes_per_s`, holding at most an eighth of a second's worth. Each read
 * of a session billed to it costs its bytes (at least the session's rate_charge_min: a read's
 * syscalls cost whatever its size); a read that takes the bucket below zero stops the
 * session's reads (its full pipe then stops its writer) until a loop timer has refilled the
 * bucket, so the daemon's one thread spends at most that on one bucket's sessions. Refcounted:
 * the maker's reference, and each session's billed to it. */
typedef struct sh_exec_rate sh_exec_rate;
/* NULL when out of memory. */
sh_exec_rate *sh_exec_rate_new(sh_loop *loop, uint64_t bytes_per_s);
void sh_exec_rate_unref(sh_exec_rate *r); /* accepts NULL */

/* A chunk's stream: the command's fd 1, fd 2, or its fd 3 (frames: only for a spec with
 * `frames`). */
typedef enum { SH_EXEC_STDOUT = 0, SH_EXEC_STDERR = 1, SH_EXEC_FRAMES = 2 } sh_exec_stream;

/* The most bytes of input queued at once (sh_exec_write). */
#define SH_EXEC_INPUT_MAX (4u << 20)

typedef enum {
        SH_EXEC_EV_CHUNK,     /* output as it was read */
        SH_EXEC_EV_HEARTBEAT, /* nothing happened for heartbeat_ms */
        SH_EXEC_EV_EXIT, /* the end: the command exited (and its pipes closed or the grace passed) */
        SH_EXEC_EV_ERROR, /* the end: the session failed after it started */
} sh_exec_event_type;

/* How the command ended. */
typedef struct sh_exec_exit {
        int code;              /* its exit code, or 128 + signal */
        int signal;            /* the signal that killed it, 0 if it exited */
        bool oom;              /* the OOM killer ended a process of the exec */
        bool truncated;        /* more output came than capture_max: out/err hold its first bytes */
        const char *out, *err; /* the captured stdout and stderr (valid during the event) */
        size_t out_len, err_len;
} sh_exec_exit;

typedef struct sh_exec_event {
        sh_exec_event_type type;
        const char *why; /* the end: why it was killed (sh_exec_kill, its timeout); NULL: not */
        union {
                struct {
                        sh_exec_stream stream;
                        const char *data; /* valid during the event */
                        size_t len;
                } chunk;
                sh_exec_exit exit;
                struct {
                        sh_error_kind kind; /* sandbox-not-found, cancelled, ... */
                        const char *text;
                } error;
        };
} sh_exec_event;

/* The consumer: called from the loop (never inside sh_exec_start), in order; after an EXIT or
 * ERROR event nothing more comes. It may call sh_exec_pause, sh_exec_resume and
 * sh_exec_detach. */
typedef void (*sh_exec_event_fn)(sh_exec *e, const sh_exec_event *ev, void *data);

/* What a session needs of the daemon, handed at start (it keeps no reference to the sandbox
 * or the manager). */
typedef struct sh_exec_env {
        sh_loop *loop;
        struct sh_cgroup_root *cgroot;
        /* The reaper: removes a cgroup (taken) once it is empty. */
        void (*bury)(void *reaper, struct sh_cgroup *cg);
        void *reaper;
} sh_exec_env;

/* What to run, where, and the per-consumer choices. */
typedef struct sh_exec_spec {
        struct sh_worker *worker; /* the sandbox's PID 1, which forks the command */
        struct sh_cgroup *parent; /* the sandbox's cgroup: the exec's own goes below */
        struct sh_cgroup *cg;     /* an empty cgroup for the exec (made ahead, or an earlier
                                   * exec's given back: recycle), taken also on failure; NULL:
                                   * exec-<id> is made now */
        uint64_t cg_ooms;         /* the OOM kills cg had counted before (its earlier execs') */
        uint32_t id;              /* unique within the worker */
        const char *log_id;       /* the sandbox id, for log lines (copied) */
        char *const *argv;        /* NULL-terminated, non-empty (copied) */
        char *const *envp;        /* NULL-terminated (copied) */
        uint64_t capture_max;     /* bytes of each stream kept for the exit event */
        uint64_t heartbeat_ms;    /* silence before a heartbeat event; 0: none */
        uint64_t timeout_ms;      /* killed this long after its start ("timed out"); 0: never */
        uint64_t grace_ms;        /* after the exit, how long descendants may hold the pipes */
        bool merge_output;        /* stderr into stdout's pipe: one pipe (one daemon fd), every
                                   * chunk SH_EXEC_STDOUT, both streams in the order written */
        size_t read_max;          /* the most one chunk event carries (0: the engine's 256 KiB):
                                   * a consumer whose encoding multiplies bytes (one event per
                                   * line) bounds what one chunk makes it queue */
        sh_exec_rate *rate;       /* its reads billed to this rate (a reference taken); NULL:
                                   * unbilled */
        size_t rate_charge_min;   /* the least one read costs of the rate */
        /* The command's fd 0 is the read end of a pipe the session writes what it is given
         * into (sh_exec_write); false: /dev/null. */
        bool input;
        /* The command's fd 3 is the write end of a third pipe, read as stdout and stderr are
         * and delivered as chunks of SH_EXEC_FRAMES (not captured: capture_max is stdout's
         * and stderr's). Every byte the command wrote to fd 1 or 2 before it wrote a byte to
         * fd 3 is delivered before that byte (unless the session ended meanwhile): a frame
         * can say "that was the output of this". false: no fd 3. */
        bool frames;
        /* argv is exactly NONCE CWD TEXT, run by sandbox-init as the /v1 surface's shell
         * wrapper: CWD entered, "<nonce> ok" (or why not) on stdout, then `bash -c TEXT`
         * (SH_PROTO_EXEC_SHELL). */
        bool shell;
        /* The command's uid and gid: its input and frames pipes are given to them (the daemon
         * made them: root's, mode 0600), so it can open them again by their /proc/self/fd
         * paths (node has no dup: its driver moves its cells off fd 0 that way). A daemon
         * that cannot (no CAP_CHOWN) logs it and the pipes stay root's. */
        uid_t uid;
        gid_t gid;
} sh_exec_spec;

/* The session's owner (the sandbox): told when the session leaves it, so it can unlink it. */
typedef struct sh_exec_owner {
        /* The command has exited and the session has ended: the owner's reference goes (it
         * must drop its pointer). */
        void (*ended)(sh_exec *e, void *data);
        /* The session is about to be freed and its command exited cleanly (not killed): its
         * cgroup, with `ooms` OOM kills counted so far, is offered back for another exec.
         * True: taken (the owner checks it holds no process); false: it is removed. NULL:
         * always removed. */
        bool (*recycle)(struct sh_cgroup *cg, uint64_t ooms, void *data);
        /* The session is freed (after its consumer detached). */
        void (*freed)(void *data);
        void *data;
} sh_exec_owner;

/* Start the command: its cgroup, its pipes, the request to the worker. Errors come back here
 * (no event is ever sent for them). On success the session has two references: the owner's
 * (until `ended`) and the consumer's (until sh_exec_detach). */
int sh_exec_start(const sh_exec_env *env, const sh_exec_spec *spec, sh_exec_event_fn fn, void *data,
                  const sh_exec_owner *owner, sh_exec **ret, sh_error **err);

/* Backpressure: the consumer has too much queued: stop reading the pipes (a full pipe then
 * stops the command; heartbeats still come). Resume when it has room again (the reads then
 * go on unless the session's rate is spent: they do once it is refilled). */
void sh_exec_pause(sh_exec *e);
void sh_exec_resume(sh_exec *e);
/* The bytes of each next read of stdout and stderr: n, at most the spec's read_max (the
 * engine's chunk without one), at least 1. For a consumer whose queue grows by a varying
 * multiple of what it is given. */
void sh_exec_set_read_max(sh_exec *e, size_t n);

/* Input (a spec with `input`): n bytes for the command's fd 0, queued and written from the loop
 * as the pipe takes them, in order. At most SH_EXEC_INPUT_MAX bytes are queued at once: past
 * it, SH_E_UNAVAILABLE (nothing of p queued). After the end, after sh_exec_close_input or
 * without input: SH_E_INVALID. A command that closed its fd 0 or exited (EPIPE) is no error
 * here: what is queued is dropped, and its exit comes as usual. */
int sh_exec_write(sh_exec *e, const void *p, size_t n, sh_error **err);
/* The command's fd 0 reaches EOF once what is queued has been written (a command gone: at
 * once). No-op without input, or again. */
void sh_exec_close_input(sh_exec *e);

/* Send sig to every process of the exec's cgroup (an interrupt: SIGINT), the session going
 * on: whatever they do about it, its end comes as usual. No-op after the end. */
void sh_exec_signal(sh_exec *e, int sig);

/* Kill the command and everything it started (found through the exec's cgroup), the consumer
 * staying attached: the session then ends as usual, with an exit event (signal 9) once the
 * processes are gone, whose `why` says `why` (copied, the first one given; logged): an interrupt, a client gone, a shell that did not start. No-op after the
 * end. */
void sh_exec_kill(sh_exec *e, const char *why);

/* The consumer is gone. If the session has not ended, its command and everything it started
 * are killed (found through the exec's cgroup). No event comes after this. Accepts NULL. */
void sh_exec_detach(sh_exec *e);

/* The owner's side: the worker's events for this exec, and its end. */
void sh_exec_on_started(sh_exec *e, int pid);
void sh_exec_on_exited(sh_exec *e, int status);
/* The worker is gone (the sandbox deleted, the worker died): the session ends with an error
 * event of that kind; no exit will be reported. */
void sh_exec_abandon(sh_exec *e, sh_error_kind kind, const char *text);
uint32_t sh_exec_id(const sh_exec *e);

/* How an exec ended, in words (a traceback, a command's error): its kill's `why`, else the OOM
 * killer, else the signal and its name, else its exit status. */
void sh_exec_exit_text(const sh_exec_exit *x, const char *why, char *out, size_t size);
/* Why an exec that never ran its command ended (ev: its end): its kill's `why`, else what it
 * wrote on stderr before (err, n: trailing newlines dropped, control characters as spaces),
 * else the engine's error, else its exit code. */
void sh_exec_failure_text(const sh_exec_event *ev, const char *err, size_t n, char *out,
                          size_t size);
