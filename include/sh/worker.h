/* worker.h: a sandbox's worker, the init (PID 1) of its namespaces, and the daemon <-> init
 * wire formats. The worker is `sandbox-init`, a small static executable embedded in the daemon
 * (initimage.c) and exec'd from a sealed memfd: it reads its spec (serialized here, the codec
 * is pure), joins the sandbox cgroup, makes the namespaces and the root filesystem, keeps only
 * the capabilities it needs, then starts execs on request over a SOCK_SEQPACKET socketpair:
 * each exec child moves itself into its exec cgroup, drops every privilege, loads the seccomp
 * filter last and execs. The worker reaps orphans and reports exec exits. */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sh/error.h"
#include "sh/loop.h"

#define SH_WORKER_PATH_MAX    4096
#define SH_WORKER_MAX_ENTRIES 32
#define SH_ENTRY_PATH_MAX     1024
#define SH_EXEC_MSG_MAX       (128 * 1024) /* argv + env of one exec, encoded */
#define SH_EXEC_MAX_PROCS_FDS 4
#define SH_WORKER_MAX_RLIMITS 16        /* RLIMIT_NLIMITS on Linux */
#define SH_WORKER_SPEC_MAX    (1 << 20) /* bytes of an encoded spec */
#define SH_WORKER_FILTER_MAX  4096      /* BPF_MAXINSNS */
#define SH_WORKER_HOSTNAME    "sandbox" /* never the remote_id: that is the API's credential */
#define SH_WORKER_PTYS_MAX    16        /* ptys of one sandbox's private devpts */
#define SH_WORKER_NOFILE      1024      /* RLIMIT_NOFILE, soft and hard (worker.c) */

/* fds of a starting worker (sandbox-init): the control socket, the spec memfd, then the
 * spec's nprocs cgroup.procs fds of the sandbox's init cgroup. */
#define SH_WORKER_CTL_FD   3
#define SH_WORKER_SPEC_FD  4
#define SH_WORKER_PROCS_FD 5

/* Messages. Worker -> daemon messages are sh_msg; EXEC carries a payload and fds. */
enum {
        SH_MSG_PID = 1,      /* intermediate -> daemon: a = the worker's pid (daemon's view) */
        SH_MSG_READY,        /* worker is set up and serving */
        SH_MSG_SETUP_FAILED, /* a = step (sh_worker_step), b = errno */
        SH_MSG_STARTED,      /* id, a = pid inside the sandbox */
        SH_MSG_EXITED,       /* id, a = wait status */
        SH_MSG_EXEC,         /* daemon -> worker: id + argv/env payload; fds: out, err, procs... */
};

typedef struct sh_msg {
        uint32_t type;
        uint32_t id;
        int32_t a;
        int32_t b;
} sh_msg;

/* One top-level entry of the sandbox's root filesystem (an image directory). */
typedef struct sh_root_entry {
        char name[256];                 /* "usr", "bin", ... */
        char src[SH_ENTRY_PATH_MAX];    /* host path to bind (directories) */
        char target[SH_ENTRY_PATH_MAX]; /* link target (symlinks) */
        bool is_link;
} sh_root_entry;

/* One resource limit, soft and hard, set in PID 1 and so inherited by every exec. */
typedef struct sh_rlimit_spec {
        uint32_t resource; /* RLIMIT_* */
        uint64_t cur, max; /* RLIM_INFINITY for none */
} sh_rlimit_spec;

/* Everything the worker needs, prepared in the daemon and sent to sandbox-init encoded
 * (sh_worker_spec_encode); the init trusts nothing in it it has not checked. */
typedef struct sh_worker_spec {
        char hostname[64];
        char rootfs[SH_WORKER_PATH_MAX];    /* empty directory: mount point of the new root */
        char workspace[SH_WORKER_PATH_MAX]; /* host path of the workspace */
        char tools[SH_WORKER_PATH_MAX];     /* host path of the tool store */
        sh_root_entry entries[SH_WORKER_MAX_ENTRIES];
        int n_entries;
        uint64_t tmp_size; /* bytes of /tmp */
        uint32_t ptys_max; /* ptys of the sandbox's devpts */
        uid_t uid;         /* the sandbox's; never 0 */
        gid_t gid;
        int nprocs; /* cgroup.procs fds the init gets (sh_worker_start fills it) */
        sh_rlimit_spec rlimits[SH_WORKER_MAX_RLIMITS];
        int n_rlimits;
        /* The daemon points this at its filter's program; a decoded spec owns its copy
         * (sh_worker_spec_done frees it). */
        struct sock_fprog seccomp;
} sh_worker_spec;

/* Fill spec->entries from an image directory (NULL: the host's own /usr, /bin, /sbin, /lib*,
 * /etc). */
int sh_worker_spec_image(sh_worker_spec *spec, const char *image_dir, sh_error **err);

/* The resource limits of every sandbox (the table and its reasons are in worker.c). */
void sh_worker_spec_limits(sh_worker_spec *spec, uint64_t pids_max);

/* Spec codec (pure). encode: *ret_buf is malloc'd; -E2BIG, -ENAMETOOLONG or -EINVAL for a spec
 * the decoder would refuse, -ENOMEM. decode: every length, count and value is checked
 * (strings fit their fields and hold no NUL, names are single components, paths absolute,
 * uid and gid not 0, limits and filter bounded, no trailing bytes); 0 or -EBADMSG / -ENOMEM,
 * *ret untouched but for the filter on failure. */
int sh_worker_spec_encode(const sh_worker_spec *spec, char **ret_buf, size_t *ret_len);
int sh_worker_spec_decode(const void *buf, size_t len, sh_worker_spec *ret);
/* Free what decode allocated (the filter). */
void sh_worker_spec_done(sh_worker_spec *spec);

/* Exec payload codec (pure). */
int sh_proto_encode_exec(uint32_t id, char *const *argv, char *const *envp, char **ret_buf,
                         size_t *ret_len);
/* Decodes in place: the arrays are allocated, the strings point into buf. */
int sh_proto_decode_exec(char *buf, size_t len, uint32_t *ret_id, char ***ret_argv,
                         char ***ret_envp);

/* The embedded sandbox-init executable, written into a sealed memfd (initimage.c): one per
 * daemon, made at start; every worker is exec'd from it. Returns the fd (O_CLOEXEC). */
int sh_init_image_open(sh_error **err);

/* Parent side. */
typedef struct sh_worker sh_worker;
typedef enum {
        SH_WORKER_EV_READY,
        SH_WORKER_EV_FAILED,
        SH_WORKER_EV_STARTED,
        SH_WORKER_EV_EXITED,
        SH_WORKER_EV_DEAD
} sh_worker_ev;
/* id and value: STARTED (exec id, pid), EXITED (exec id, wait status), FAILED (step, errno). */
typedef void (*sh_worker_fn)(sh_worker *w, sh_worker_ev ev, uint32_t id, int value, int value2,
                             void *data);

/* Start the worker: a child execs sandbox-init from `init_image` (sh_init_image_open) with the
 * encoded spec; as the intermediate it moves itself into the sandbox cgroup (writes "0" to
 * each of `procs`), unshares mount, UTS, IPC, network, cgroup and PID namespaces, and forks
 * the worker, which becomes PID 1. The spec is copied: the caller may free it on return.
 * Events arrive through fn. */
int sh_worker_start(sh_loop *l, int init_image, const sh_worker_spec *spec, const int *procs,
                    int nprocs, sh_worker_fn fn, void *data, sh_worker **ret, sh_error **err);
/* Ask the worker to start an exec. The fds are sent, not kept (the caller closes its own). */
int sh_worker_exec(sh_worker *w, uint32_t id, char *const *argv, char *const *envp, int out_w,
                   int err_w, const int *procs, int nprocs, sh_error **err);
/* SIGKILL the worker: every process of its PID namespace dies with it. */
void sh_worker_kill(sh_worker *w);
bool sh_worker_alive(const sh_worker *w);
/* Stop watching and free; kills the worker if still alive. */
void sh_worker_free(sh_worker *w);

/* Setup steps, for SH_MSG_SETUP_FAILED (a = step, b = errno). Numbers only: child.c runs the
 * steps in its own order (the last five come first or last). */
enum {
        SH_STEP_CGROUP_JOIN = 1,
        SH_STEP_UNSHARE,
        SH_STEP_FORK,
        SH_STEP_MOUNT_PRIVATE,
        SH_STEP_HOSTNAME,
        SH_STEP_ROOT_TMPFS,
        SH_STEP_IMAGE,
        SH_STEP_WORKSPACE,
        SH_STEP_TMP,
        SH_STEP_PROC,
        SH_STEP_DEV,
        SH_STEP_TOOLS,
        SH_STEP_PIVOT,
        SH_STEP_LOOPBACK,
        SH_STEP_SIGNALS,
        SH_STEP_EXEC_INIT, /* the daemon's child could not exec sandbox-init */
        SH_STEP_SPEC,      /* sandbox-init could not read or decode its spec */
        SH_STEP_LIMITS,
        SH_STEP_PRIVILEGES,
        SH_STEP_STDIO,
};
/* Names of setup steps for SH_MSG_SETUP_FAILED. */
const char *sh_worker_step_name(int step);
