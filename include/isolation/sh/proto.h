/* proto.h: the daemon <-> sandbox-init protocol, shared by both sides (pure, no syscalls):
 * the fds a starting worker gets, the control messages over the SOCK_SEQPACKET socket and the
 * fds they carry, the worker's spec (read once from a sealed memfd), the exec request, and
 * the setup steps a failure names. The daemon (sandbox/worker.c) encodes what the init decodes
 * and the other way round; sandbox-init (isolation/child.c) links proto.c statically, so
 * nothing here may need more than libc. Every decoder treats its bytes as hostile. */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

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
#define SH_WORKER_LOWERS_MAX  128       /* image layers of an overlay root */
#define SH_LOWER_NAME_MAX     128       /* bytes of a lower's name, NUL included */
#define SH_WORKER_VOLUMES_MAX 64        /* volumes of one sandbox (SANDBOX_HOST_VOLUME_MAX <= it) */

/* fds of a starting worker (sandbox-init): the control socket, the spec memfd, then the
 * spec's nprocs cgroup.procs fds of the sandbox's init cgroup. */
#define SH_WORKER_CTL_FD   3
#define SH_WORKER_SPEC_FD  4
#define SH_WORKER_PROCS_FD 5

/* Messages. Worker -> daemon messages are sh_msg; EXEC carries a payload and fds. */
enum {
        SH_MSG_PID = 1,      /* intermediate -> daemon: a = the worker's pid (daemon's view) */
        SH_MSG_READY,        /* worker is set up and serving */
        SH_MSG_SETUP_FAILED, /* a = step (SH_STEP_*, below), b = errno */
        SH_MSG_STARTED,      /* id, a = pid inside the sandbox */
        SH_MSG_EXITED,       /* id, a = wait status */
        SH_MSG_EXEC,         /* daemon -> worker: id + flags + argv/env payload; fds: out, err, the
                      * flags' extra fds (input, frames), procs... */
        SH_MSG_VOLUME_CREATED, /* a = index of a volume whose directory the worker made (a pvc) */
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

/* One volume: a directory of the host mounted into the sandbox (issue 25). sandbox-init opens
 * `base` (an operator's path, trusted), resolves `path` from it and `sub` from that without
 * leaving them (openat2 RESOLVE_BENEATH; no link at all in `sub`), and mounts the result, not
 * recursively, nosuid and nodev (read-only with SH_VOL_RDONLY), at `target` in the new root,
 * walked from the root without following any link. */
enum {
        SH_VOL_RDONLY = 1u << 0, /* mounted read-only */
        SH_VOL_CREATE = 1u << 1, /* `path` (one component: a claim) made if absent */
        SH_VOL_NAMED = 1u << 2,  /* a named volume (pvc): the shared scheme (setgid, default ACL) */
};
#define SH_VOL_FLAGS (SH_VOL_RDONLY | SH_VOL_CREATE | SH_VOL_NAMED)

typedef struct sh_volume_spec {
        char base[SH_WORKER_PATH_MAX];  /* absolute: an allowed host prefix or the volume root */
        char path[SH_ENTRY_PATH_MAX];   /* relative to base: plain components, or "." for base */
        char sub[SH_ENTRY_PATH_MAX];    /* subPath: plain relative components, "" for none */
        char target[SH_ENTRY_PATH_MAX]; /* mountPath: absolute, plain components, not "/" */
        uint32_t flags;                 /* SH_VOL_* */
        /* pvc.storage in bytes (0: none): a block limit on the claim's directory when this
         * worker makes it (SH_VOL_NAMED and SH_VOL_CREATE only), a project quota of its own. */
        uint64_t quota;
} sh_volume_spec;

/* A volume as the decoder takes it (the daemon may check its own with it): base absolute;
 * path "." or components joined by single '/', none empty, "." or ".." (one component with
 * SH_VOL_CREATE); sub "" or the same; target '/' then such components; flags known; every
 * string NUL-terminated inside its field. */
bool sh_worker_volume_valid(const sh_volume_spec *v);

/* Everything the worker needs, prepared in the daemon and sent to sandbox-init encoded
 * (sh_worker_spec_encode); the init trusts nothing in it it has not checked. */
typedef struct sh_worker_spec {
        char hostname[64];
        char rootfs[SH_WORKER_PATH_MAX];    /* empty directory: mount point of the new root */
        char workspace[SH_WORKER_PATH_MAX]; /* host path of the workspace */
        char tools[SH_WORKER_PATH_MAX];     /* host path of the tool store */
        sh_root_entry entries[SH_WORKER_MAX_ENTRIES];
        int n_entries;
        /* An overlay root (an OCI image's layers) instead of the entries: n_lowers > 0 (and
         * n_entries 0). The lowers are names relative to `layers` (the init chdirs there, so
         * the mount's option string stays short), lowest first, each one or more components
         * of [A-Za-z0-9._-] ("<hex>/root"), none "." or ".."; upper and work are the
         * sandbox's own directories inside its disk limit. */
        char layers[SH_WORKER_PATH_MAX];
        char upper[SH_WORKER_PATH_MAX];
        char work[SH_WORKER_PATH_MAX];
        char lowers[SH_WORKER_LOWERS_MAX][SH_LOWER_NAME_MAX];
        int n_lowers;
        uint64_t tmp_size; /* bytes of /tmp */
        uint32_t ptys_max; /* ptys of the sandbox's devpts */
        /* The sandboxes' DNS proxy (network byte order): /etc/resolv.conf is a read-only file
         * naming it, bound over the image's; 0: the image's own (a host without egress). */
        uint32_t nameserver;
        uid_t uid; /* the sandbox's; never 0 */
        gid_t gid;
        int nprocs; /* cgroup.procs fds the init gets (sh_worker_start fills it) */
        sh_rlimit_spec rlimits[SH_WORKER_MAX_RLIMITS];
        int n_rlimits;
        /* The daemon points this at its filter's program; a decoded spec owns its copy
         * (sh_worker_spec_done frees it). */
        struct sock_fprog seccomp;
        /* Volumes, mounted in this order (a parent's mountPath before its children's) after
         * the root is assembled. The daemon points this at its array; a decoded spec owns its
         * copy (sh_worker_spec_done frees it). */
        sh_volume_spec *volumes;
        int n_volumes;
        /* The one supplementary group of every process of the sandbox (0: none): the group
         * of the named volumes' directories. Never the sandbox's gid, never 0 with volumes. */
        gid_t volume_gid;
        /* The first of the SH_VOLQUOTA_IDS project ids a named volume's quota may take (0:
         * none; never 0 when a volume has a quota; the range fits below 2^32 - 1). */
        uint32_t volume_project;
} sh_worker_spec;

/* A lower's name as the decoder takes it: relative, components of [A-Za-z0-9._-] joined by
 * single '/', none empty, "." or "..", shorter than SH_LOWER_NAME_MAX. */
bool sh_worker_lower_valid(const char *name);

/* Spec codec (pure). encode: *ret_buf is malloc'd; -E2BIG, -ENAMETOOLONG or -EINVAL for a spec
 * the decoder would refuse, -ENOMEM. decode: every length, count and value is checked
 * (strings fit their fields and hold no NUL, names are single components, paths absolute,
 * lowers relative and plain, uid and gid not 0, limits, lowers, filter and volumes bounded,
 * each volume sh_worker_volume_valid, no trailing bytes); 0 or -EBADMSG / -ENOMEM, *ret
 * untouched but for the filter and the volumes (freed, NULL) on failure. */
int sh_worker_spec_encode(const sh_worker_spec *spec, char **ret_buf, size_t *ret_len);
int sh_worker_spec_decode(const void *buf, size_t len, sh_worker_spec *ret);
/* Free what decode allocated (the filter, the volumes). */
void sh_worker_spec_done(sh_worker_spec *spec);

/* The extra fds an EXEC carries after out and err, in this order, each when its flag is set:
 * the read end of the command's input (its fd 0, else /dev/null), the write end of its frames
 * pipe (its fd 3, else no fd 3). */
enum {
        SH_PROTO_EXEC_INPUT = 1u << 0,
        SH_PROTO_EXEC_FRAMES = 1u << 1,
        /* no fd: argv is exactly NONCE CWD TEXT, run as the /v1 surface's shell wrapper
         * (sandbox-init's exec_shell: enter CWD, say "<nonce> ok", become `bash -c TEXT`) */
        SH_PROTO_EXEC_SHELL = 1u << 2,
};
#define SH_PROTO_EXEC_FLAGS (SH_PROTO_EXEC_INPUT | SH_PROTO_EXEC_FRAMES | SH_PROTO_EXEC_SHELL)
/* The stdio fds (out, err and the flags' extra ones) an EXEC with these flags carries before
 * its procs fds. */
int sh_proto_exec_stdio_fds(uint32_t flags);

/* Exec payload codec (pure): id, flags (SH_PROTO_EXEC_*), argv, envp. encode: -EINVAL for an
 * unknown flag, -E2BIG past SH_EXEC_MSG_MAX, -ENOMEM. */
int sh_proto_encode_exec(uint32_t id, uint32_t flags, char *const *argv, char *const *envp,
                         char **ret_buf, size_t *ret_len);
/* Decodes in place: the arrays are allocated, the strings point into buf. -EBADMSG for a
 * wrong type, no argv, an unknown flag, a count past the bytes, a string without its NUL. */
int sh_proto_decode_exec(char *buf, size_t len, uint32_t *ret_id, uint32_t *ret_flags,
                         char ***ret_argv, char ***ret_envp);

/* Control messages (pure). A fixed-size message as a datagram: build one, or check one that
 * arrived (`len` bytes): 0 with *ret filled, -EBADMSG for a wrong size or a type this side
 * does not take (an EXEC is never a sh_msg: it carries a payload). */
sh_msg sh_proto_msg(uint32_t type, uint32_t id, int32_t a, int32_t b);
int sh_proto_decode_msg(const void *buf, size_t len, sh_msg *ret);
/* The type of any datagram: its first u32, or 0 when it is too short to hold one. */
uint32_t sh_proto_msg_type(const void *buf, size_t len);

/* The fds an EXEC carries (SCM_RIGHTS): out, err, input and frames when its flags say so, then
 * the exec cgroup's cgroup.procs fds. */
#define SH_PROTO_EXEC_FDS (4 + SH_EXEC_MAX_PROCS_FDS)
typedef union sh_proto_cmsg {
        char buf[CMSG_SPACE(sizeof(int) * SH_PROTO_EXEC_FDS)];
        struct cmsghdr align;
} sh_proto_cmsg;

/* Attach `n` fds (at most SH_PROTO_EXEC_FDS) to mh as one SCM_RIGHTS record in cbuf. 0 or
 * -EINVAL. */
int sh_proto_put_fds(struct msghdr *mh, sh_proto_cmsg *cbuf, int n, const int *fds);
/* Point mh's control buffer at cbuf for a recvmsg. */
void sh_proto_recv_fds(struct msghdr *mh, sh_proto_cmsg *cbuf);
/* The fds a received message carries (its SCM_RIGHTS records), into fds[SH_PROTO_EXEC_FDS]:
 * how many. A sh_proto_cmsg holds no more than that: the kernel closes what does not fit and
 * sets MSG_CTRUNC. */
int sh_proto_take_fds(const struct msghdr *mh, int fds[SH_PROTO_EXEC_FDS]);

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
        SH_STEP_SECCOMP,
        SH_STEP_OVERLAY, /* mount the image's layers at the root */
        SH_STEP_RESOLV,  /* /etc/resolv.conf naming the DNS proxy */
        /* A volume (SETUP_FAILED's id = its index in the spec): its source (base, path, sub,
         * a named volume's directory) or its target (mountPath in the root, the mount). */
        SH_STEP_VOLUME_SOURCE,
        SH_STEP_VOLUME_TARGET,
        /* A named volume's quota (pvc.storage) on the directory the worker just made (which
         * it removed again): the volume root has project quota, so a host fault. */
        SH_STEP_VOLUME_QUOTA,
};
/* Names of setup steps for SH_MSG_SETUP_FAILED (a static string; "?" for a number no step
 * has: the number came from the other side). */
const char *sh_worker_step_name(int step);
