/* worker.h: the daemon's side of a sandbox's worker, the init (PID 1) of its namespaces. The
 * worker is `sandbox-init`, a small static executable embedded in the daemon (initimage.c) and
 * exec'd from a sealed memfd: it reads its spec (the protocol is sh/proto.h), joins the
 * sandbox cgroup, makes the namespaces and the root filesystem, keeps only
 * the capabilities it needs, then starts execs on request over a SOCK_SEQPACKET socketpair:
 * each exec child moves itself into its exec cgroup, drops every privilege, loads the seccomp
 * filter last and execs. The worker reaps orphans and reports exec exits. */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sh/error.h"
#include "sh/initimage.h"
#include "sh/loop.h"
#include "sh/proto.h"

/* Fill spec->entries from an image directory (NULL: the host's own /usr, /bin, /sbin, /lib*,
 * /etc). */
int sh_worker_spec_image(sh_worker_spec *spec, const char *image_dir, sh_error **err);

/* The resource limits of every sandbox (the table and its reasons are in worker.c). */
void sh_worker_spec_limits(sh_worker_spec *spec, uint64_t pids_max);

/* Parent side. */
typedef struct sh_worker sh_worker;
typedef enum {
        SH_WORKER_EV_PID, /* its namespaces exist (value: its pid; value2: an fd of its network
                           * namespace when the spec named a nameserver, else -1: borrowed
                           * for the callback); its setup goes on */
        SH_WORKER_EV_READY,
        SH_WORKER_EV_FAILED,
        SH_WORKER_EV_STARTED,
        SH_WORKER_EV_EXITED,
        SH_WORKER_EV_DEAD,
        SH_WORKER_EV_VOLUME_CREATED, /* id: the spec's volume whose directory it made */
} sh_worker_ev;
/* id and value: STARTED (exec id, pid), EXITED (exec id, wait status), FAILED (the spec's
 * volume for a volume step, step, errno). */
typedef void (*sh_worker_fn)(sh_worker *w, sh_worker_ev ev, uint32_t id, int value, int value2,
                             void *data);

/* Start the worker: a child execs sandbox-init from `init_image` (sh_init_image_open) with the
 * encoded spec; as the intermediate it moves itself into the sandbox cgroup (writes "0" to
 * each of `procs`), unshares mount, UTS, IPC, network, cgroup and PID namespaces, and forks
 * the worker, which becomes PID 1. The spec is copied: the caller may free it on return.
 * Events arrive through fn. */
int sh_worker_start(sh_loop *l, int init_image, const sh_worker_spec *spec, const int *procs,
                    int nprocs, sh_worker_fn fn, void *data, sh_worker **ret, sh_error **err);
/* The command's standard fds, as the daemon hands them to the worker. */
typedef struct sh_worker_stdio {
        int out, err; /* its fds 1 and 2 (the same fd for both: merged) */
        int in;       /* its fd 0 (a pipe's read end); -1: /dev/null */
        int frames;   /* its fd 3 (a pipe's write end); -1: no fd 3 */
        bool shell;   /* argv is NONCE CWD TEXT: the /v1 shell wrapper (SH_PROTO_EXEC_SHELL) */
} sh_worker_stdio;
/* Ask the worker to start an exec. The fds are sent, not kept (the caller closes its own). */
int sh_worker_exec(sh_worker *w, uint32_t id, char *const *argv, char *const *envp,
                   const sh_worker_stdio *io, const int *procs, int nprocs, sh_error **err);
/* SIGKILL the worker: every process of its PID namespace dies with it. */
void sh_worker_kill(sh_worker *w);
bool sh_worker_alive(const sh_worker *w);
/* The worker's pid (in the daemon's PID namespace) once the intermediate told it, else -1. */
pid_t sh_worker_pid(const sh_worker *w);
/* Stop watching and free; kills the worker if still alive. */
void sh_worker_free(sh_worker *w);
