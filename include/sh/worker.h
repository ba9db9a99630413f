/* worker.h: a sandbox's worker, the init (PID 1) of its namespaces, and the daemon <-> worker
 * protocol over a SOCK_SEQPACKET socketpair. The worker assembles the sandbox's root
 * filesystem, then starts execs on request: each exec child moves itself into its exec
 * cgroup, drops every privilege, loads the seccomp filter last and execs. The worker reaps
 * orphans and reports exec exits. */
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

/* Everything the worker needs, prepared in the daemon before fork (the child allocates
 * nothing to learn it). */
typedef struct sh_worker_spec {
        char hostname[64];
        char rootfs[SH_WORKER_PATH_MAX];    /* empty directory: mount point of the new root */
        char workspace[SH_WORKER_PATH_MAX]; /* host path of the workspace */
        char tools[SH_WORKER_PATH_MAX];     /* host path of the tool store */
        sh_root_entry entries[SH_WORKER_MAX_ENTRIES];
        int n_entries;
        uint64_t tmp_size; /* bytes of /tmp */
        uid_t uid;
        gid_t gid;
        const struct sock_fprog *seccomp;
} sh_worker_spec;

/* Fill spec->entries from an image directory (NULL: the host's own /usr, /bin, /sbin, /lib*,
 * /etc). */
int sh_worker_spec_image(sh_worker_spec *spec, const char *image_dir, sh_error **err);

/* Exec payload codec (pure). */
int sh_proto_encode_exec(uint32_t id, char *const *argv, char *const *envp, char **ret_buf,
                         size_t *ret_len);
/* Decodes in place: the arrays are allocated, the strings point into buf. */
int sh_proto_decode_exec(char *buf, size_t len, uint32_t *ret_id, char ***ret_argv,
                         char ***ret_envp);

/* Child side: the worker's whole life (after the namespaces exist), fd 3 the control
 * socket. Never returns. */
_Noreturn void sh_worker_main(const sh_worker_spec *spec);

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

/* Fork the worker: the intermediate child moves itself into the sandbox cgroup (writes "0" to
 * each of `procs`), unshares mount, UTS, IPC, network, cgroup and PID namespaces, and forks
 * the worker, which becomes PID 1. Events arrive through fn. */
int sh_worker_start(sh_loop *l, const sh_worker_spec *spec, const int *procs, int nprocs,
                    sh_worker_fn fn, void *data, sh_worker **ret, sh_error **err);
/* Ask the worker to start an exec. The fds are sent, not kept (the caller closes its own). */
int sh_worker_exec(sh_worker *w, uint32_t id, char *const *argv, char *const *envp, int out_w,
                   int err_w, const int *procs, int nprocs, sh_error **err);
/* SIGKILL the worker: every process of its PID namespace dies with it. */
void sh_worker_kill(sh_worker *w);
bool sh_worker_alive(const sh_worker *w);
/* Stop watching and free; kills the worker if still alive. */
void sh_worker_free(sh_worker *w);

/* Names of setup steps for SH_MSG_SETUP_FAILED. */
const char *sh_worker_step_name(int step);
