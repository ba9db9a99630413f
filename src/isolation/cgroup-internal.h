/* cgroup-internal.h: private structures, the backend ops table and shared file helpers of cgroup.c, cgroup-v1.c and cgroup-v2.c. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include "sh/cgroup.h"
#include "sh/loop.h"
#include "sh/syscalls.h"

/* v1 uses four hierarchies, v2 one. */
#define SH_CG_MAX_HIER 4
enum { SH_CG_V1_MEMORY = 0, SH_CG_V1_PIDS, SH_CG_V1_CPU, SH_CG_V1_FREEZER };

/* Bounds on what we read from the kernel: small control files, /proc/<pid>/cgroup, and the
 * daemon's mountinfo (a Kubernetes node can have thousands of mounts). */
#define SH_CG_SMALL_MAX     (64 * 1024)
#define SH_CG_MOUNTINFO_MAX (4 * 1024 * 1024)
#define SH_CG_NAME_MAX      64 /* a cgroup name we create (one path component) */
#define SH_CG_DEPTH_MAX     16 /* how deep below the subtree we ever walk */
/* How long a v2 kill without cgroup.kill waits for the freeze (from timers, never blocking). */
#define SH_CG_FREEZE_TIMEOUT_MS 1000
/* A v1 kill waits for a freeze this long at most (from timers), then falls back to repeated
 * SIGKILL passes (a task with SIGKILL pending cannot fork, so they converge). */
#define SH_CG_KILL_FREEZE_MS 50
/* How long root_open waits for a killed leftover cgroup to empty. */
#define SH_CG_LEFTOVER_TIMEOUT_MS 5000

/* v2 controllers we need, as bits (also used to remember what we enabled ourselves). */
enum { SH_CG_C_MEMORY = 1 << 0, SH_CG_C_PIDS = 1 << 1, SH_CG_C_CPU = 1 << 2 };

typedef struct sh_cg_hier {
        const char *controller; /* v1: "memory", "pids", "cpu", "freezer"; v2: NULL */
        char *mountpoint;       /* where the hierarchy is mounted */
        char *own_dir;          /* file-system path of the daemon's cgroup in this hierarchy */
        char *base_cgpath;      /* the subtree's path as /proc/<pid>/cgroup shows it */
        int own_fd;             /* O_DIRECTORY fd of own_dir */
        int subtree_fd;         /* O_DIRECTORY fd of own_dir/sandbox-host.<instance> */
} sh_cg_hier;

typedef struct sh_cg_ops sh_cg_ops;

struct sh_cgroup_root {
        sh_cg_mode mode;
        const sh_cg_ops *ops;
        char *subtree_name; /* "sandbox-host.<instance>" */
        size_t nhier;
        sh_cg_hier h[SH_CG_MAX_HIER];
        /* v1 */
        bool v1_memsw;   /* memory.memsw.limit_in_bytes exists (swap accounting on) */
        int v1_favor_fd; /* a detached mount of the favordynmods hierarchy, or -1 */
        /* v2 */
        int v2_daemon_fd;        /* <subtree>/daemon, the leaf the daemon moved itself into */
        bool v2_kill;            /* cgroup.kill exists (Linux >= 5.14) */
        unsigned v2_own_enabled; /* SH_CG_C_* this open enabled in own_dir's subtree_control */
        /* kills waiting for a freeze, and cgroups waiting to be empty for their removal,
         * driven by timers of `loop` */
        sh_loop *loop;
        struct sh_cg_kill *kills;
        struct sh_cg_grave *graves;
        sh_timer *graves_t;
        sh_cgroup_lost_fn lost;
        void *lost_data;
};

/* A cgroup below the subtree: its path and the hierarchies it exists in (all of them but for
 * leftovers of a crashed daemon). It holds no fd: each operation opens the directories it
 * needs below the subtree's fd and closes them before it returns (sh_cg_open), so a daemon
 * holding ten thousand sandboxes holds no fd for their cgroups. A path names one cgroup for
 * the handle's whole life: names are never reused while a handle lives (a sandbox's is its
 * random id, an exec's "exec-N" counts up for the sandbox's life, a helper's counts up for the
 * daemon's), and only the daemon, root, makes or removes directories of its subtree. */
struct sh_cgroup {
        sh_cgroup_root *root;
        char *relpath;    /* relative to the subtree: "sb", "sb/exec-3" */
        unsigned present; /* bit h: the directory exists in hierarchy h */
        unsigned up;      /* bit h: in hierarchy h it is its parent's directory (a leaf's
                           * memory cgroup on v1, sh_cgroup_create_leaf) */
};

/* An O_RDONLY|O_DIRECTORY fd of cg in hierarchy h, opened now below the subtree's fd (the
 * caller closes it): a cgroupfs lookup, which never waits on anything. -ENOENT where cg does
 * not exist (or no more), else -errno of the open. cgroupfs has no symbolic links, and every
 * component of relpath is a name we checked (valid_name), so the path cannot lead elsewhere. */
int sh_cg_open(const sh_cgroup *cg, size_t h);

struct sh_cg_ops {
        /* Open own_fd (checking the file-system magic), create the subtree, open subtree_fd;
         * v2 also moves the daemon into its leaf and enables controllers. */
        int (*open)(sh_cgroup_root *r, sh_error **err);
        /* Optional: make `parent` hand controllers to a new child (v2 subtree_control);
         * `need` when the child gets limits, else best effort. */
        int (*prepare_parent)(sh_cgroup *parent, bool need, sh_error **err);
        int (*set_limits)(sh_cgroup *cg, const sh_cg_limits *lim, sh_error **err);
        /* Optional: kill cg and below at once, by the kernel (v2 cgroup.kill): 1 done, 0
         * not possible here (the freezer way follows), or < 0. */
        int (*kill_direct)(sh_cgroup *cg, sh_error **err);
        /* The freezer way (cgroup.c): freeze, SIGKILL each, wait up to kill_freeze_ms for the
         * freeze (timers), SIGKILL each again, thaw; not frozen in time: thaw and up to
         * kill_passes more passes. */
        unsigned kill_freeze_ms;
        int kill_passes;
        /* The freezer of one directory of the freezer hierarchy (v1 "freezer", v2 the
         * unified one), without waiting: ask for a freeze; tell whether it is complete (1) or
         * not yet (0); thaw. 0/1 or -errno. */
        int (*freeze_start)(int fd);
        int (*frozen)(int fd);
        int (*thaw)(int fd);
        int (*is_empty)(sh_cgroup *cg, bool *ret, sh_error **err);
        int (*oom_kills)(sh_cgroup *cg, uint64_t *ret, sh_error **err);
        int (*usage)(sh_cgroup *cg, sh_cg_usage *ret, sh_error **err);
        /* Remove the (already emptied) subtree itself; v2 moves the daemon back first. */
        int (*destroy_root)(sh_cgroup_root *r, sh_error **err);
};

extern const sh_cg_ops sh_cg_v1_ops;
extern const sh_cg_ops sh_cg_v2_ops;

/* --- helpers shared by the backends (cgroup.c); all return 0/length or -errno --- */

/* Read file `name` below `dirfd` (AT_FDCWD for an absolute path) into a new NUL-terminated
 * buffer of at most `max` bytes; -EFBIG if it is longer. */
int sh_cg_read_file(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len);
/* Write `val` to file `name` below `dirfd` in one write(2), as cgroupfs wants. */
int sh_cg_write_file(int dirfd, const char *name, const char *val);
/* Open a directory below dirfd (no symlinks followed), O_RDONLY|O_DIRECTORY|O_CLOEXEC. */
int sh_cg_open_dir(int dirfd, const char *name);
/* 0 when dirfd is on a file system with statfs magic `magic`, else -EMEDIUMTYPE. */
int sh_cg_check_magic(int dirfd, unsigned long magic);

/* Call cb for every pid in cgroup.procs of dirfd (and, with `recursive`, of every descendant
 * cgroup, at most SH_CG_DEPTH_MAX deep). A cb result < 0 stops the walk and is returned. */
typedef int (*sh_cg_pid_cb)(pid_t pid, void *userdata);
int sh_cg_for_each_pid(int dirfd, bool recursive, sh_cg_pid_cb cb, void *userdata);
/* Call cb for every child cgroup (sub-directory) name of dirfd. */
typedef int (*sh_cg_dir_cb)(int dirfd, const char *name, void *userdata);
int sh_cg_for_each_child(int dirfd, sh_cg_dir_cb cb, void *userdata);

/* SIGKILL every process found in hierarchy `h` of cg and below, each one only after checking
 * (through a pidfd, so a recycled pid is never hit) that it still belongs to cg; never the
 * daemon itself. Returns how many were signalled, or -errno. */
int sh_cg_kill_all_in(sh_cgroup *cg, size_t h);
/* The same for the processes of cg's own directory in hierarchy h only (not below). */
int sh_cg_kill_own_in(sh_cgroup *cg, size_t h);
/* Sum of the `key` counter of file `name` over cg's directory in hierarchy h and below. */
int sh_cg_sum_keyed(int dirfd, const char *name, const char *key, uint64_t *ret);

/* --- pure (cgroup-parse.c) --- */

/* Parse `len` decimal digits at s into *ret, refusing overflow and empty input. 0 or
 * -EBADMSG. */
int sh_cg_parse_u64_span(const char *s, size_t len, uint64_t *ret);
/* Does the space-separated list `text` (cgroup.controllers) hold `token`? */
bool sh_cg_has_token(const char *text, const char *token);
