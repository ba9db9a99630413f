/* cgroup.h: per-sandbox and per-exec cgroups behind one interface, with a cgroup v2 backend
 * (unified hierarchy) and a v1 backend (memory, pids, cpu, freezer hierarchies), detected once
 * at start. Everything lives below the daemon's own cgroup, in a subtree named for this
 * daemon instance ("sandbox-host.<instance>"), so that a restarted daemon with the same
 * state root finds and removes what a killed one left, and the cgroups around it are never
 * touched. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sh/error.h"
#include "sh/loop.h"

typedef enum { SH_CG_NONE = 0, SH_CG_V1, SH_CG_V2 } sh_cg_mode;

typedef struct sh_cg_limits {
        uint64_t memory_max;    /* bytes, 0: none */
        uint64_t pids_max;      /* 0: none */
        uint64_t cpu_max_milli; /* milli-cores, 0: none */
} sh_cg_limits;

typedef struct sh_cgroup_root sh_cgroup_root;
typedef struct sh_cgroup sh_cgroup;

/* --- pure parsers (unit-tested with fixtures) --- */

/* From /proc/self/cgroup text: the v2 path ("0::/a/b") and, for v1, the path of a named
 * controller ("4:memory:/a/b" or a comma list "2:cpu,cpuacct:/x"). 0 and a new string, or
 * -ENOENT. */
int sh_cg_parse_proc_self(const char *text, const char *controller /* NULL: v2 */, char **ret_path);

/* From /proc/self/mountinfo text: where the v2 hierarchy is mounted (controller NULL) or the
 * v1 hierarchy holding `controller`. 0 and a new string, or -ENOENT. */
int sh_cg_parse_mountinfo(const char *text, const char *controller, char **ret_mountpoint);

/* The same, also returning the mount's root inside the hierarchy (mountinfo field 4, "/" unless
 * only a sub-tree is mounted, as in a container without a cgroup namespace). Either out
 * pointer may be NULL. Octal escapes (\040) are decoded. 0, -ENOENT or -ENOMEM. */
int sh_cg_parse_mountinfo_ex(const char *text, const char *controller, char **ret_mountpoint,
                             char **ret_root);

/* The directory of cgroup `cgpath` (as /proc/self/cgroup shows it) on a mount of its hierarchy
 * at `mountpoint` whose root is `mount_root`. -ENOENT when the mount does not show that
 * cgroup (cgpath not below mount_root), -EINVAL for a relative path or a ".." component. */
int sh_cg_path_join(const char *mountpoint, const char *mount_root, const char *cgpath, char **ret);

/* From a flat keyed cgroup file ("key value" lines: memory.events, cgroup.events,
 * memory.oom_control), the unsigned value of `key`. 0, -ENOENT, or -EBADMSG (not a number,
 * overflow). */
int sh_cg_parse_keyed(const char *text, const char *key, uint64_t *ret);

/* --- the daemon's subtree --- */

/* Detect the mode (v2 when /sys/fs/cgroup is cgroup2 with the memory, pids and cpu
 * controllers available to us; v1 when the memory, pids, cpu and freezer v1 hierarchies are
 * mounted), create our subtree below our own cgroup, and kill and remove whatever an earlier
 * daemon with the same `instance` left there. v2: the daemon moves itself into a leaf
 * ("<subtree>/daemon") before enabling controllers (no internal processes). */
int sh_cgroup_root_open(const char *instance, sh_cgroup_root **ret, sh_error **err);
/* Kill and remove every cgroup below the subtree, then the subtree itself (v2: the daemon
 * first moves back to its own cgroup, and the controllers it enabled there are disabled again
 * when no other child cgroup is left). For a clean shutdown and for tests. Does not free r. */
int sh_cgroup_root_destroy(sh_cgroup_root *r, sh_error **err);
/* Free the handle (closing its fds) without touching any cgroup but to finish a kill that
 * was waiting for its freeze; buried cgroups are let go. Accepts NULL. Every sh_cgroup
 * created from r must be freed (or buried) first. */
void sh_cgroup_root_free(sh_cgroup_root *r);
sh_cg_mode sh_cgroup_mode(const sh_cgroup_root *r);
/* The name of the controller-less cgroup v1 hierarchy that sh_cgroup_root_favor_dynmods holds. */
#define SH_CG_FAVOR_NAME "sandbox-host-favordynmods"
/* Moving a process into a cgroup (every exec's, every create's) takes the kernel's
 * cgroup_threadgroup_rwsem for writing, which waits for an RCU grace period (~14 ms on a KVM
 * guest) unless a writer was there within the last one; `favordynmods` keeps the semaphore in
 * its writer-friendly mode (forks and exits pay an atomic operation instead). It is a flag of
 * a hierarchy's root, and the semaphore is global. v1: r holds a controller-less hierarchy
 * name=SH_CG_FAVOR_NAME with that flag as a detached mount (fsopen + fsmount: mounted
 * nowhere), shared by every daemon of the node, gone when the last one closes it. v2: the
 * node's own mount decides (its options are never changed here). 1: in effect (v1: held; v2:
 * the cgroup2 mount has it), 0: not (v2 without it), -1: the hierarchy cannot be made. */
int sh_cgroup_root_favor_dynmods(sh_cgroup_root *r, sh_error **err);
/* The root a cgroup handle refers to (for a service given only its parent cgroup). */
sh_cgroup_root *sh_cgroup_root_of(const sh_cgroup *cg);

/* --- one cgroup (a sandbox, or an exec inside a sandbox) --- */

/* Create `name` below `parent` (NULL: the subtree root) with `lim` (NULL: inherit). `name` is
 * one component of [A-Za-z0-9._-], not starting with '.', at most 64 bytes; an existing
 * cgroup of that name is -EEXIST. The handle refers to r, which must outlive it, and holds no
 * fd: every operation on it opens what it needs and closes it before returning. v1: a
 * memory limit also caps memory+swap when swap accounting exists; v2: memory.swap.max = 0
 * when it exists (a sandbox never swaps past its limit). cpu: quota = milli * 100 us per
 * 100 ms period (at least the kernel's 1 ms). */
int sh_cgroup_create(sh_cgroup_root *r, sh_cgroup *parent, const char *name,
                     const sh_cg_limits *lim, sh_cgroup **ret, sh_error **err);

/* A leaf below `parent` (limits inherited) for processes that need no memory cgroup of their
 * own, a sandbox's worker: on v1 it is not made in the memory hierarchy, where its processes
 * join the parent's memory cgroup (its procs fds hold the parent's there); on v2, where a
 * cgroup with children holds no processes, it is sh_cgroup_create(r, parent, name, NULL, ...).
 * The kernel keeps, for every memory cgroup, a 1 KiB unit per 64 superblocks of the whole
 * machine (mm/shrinker.c, shrinker_info): with thousands of sandboxes that dominates their
 * memory, quadratically, and one memory cgroup less per sandbox halves it. */
int sh_cgroup_create_leaf(sh_cgroup_root *r, sh_cgroup *parent, const char *name, sh_cgroup **ret,
                          sh_error **err);

/* fds of cgroup.procs, one per hierarchy (O_WRONLY|O_CLOEXEC), for a child to move itself in
 * by writing "0" to each before it execs. Returns how many (<= max) or -errno. */
int sh_cgroup_open_procs(sh_cgroup *cg, int *fds, int max);

/* v2: a new O_DIRECTORY fd of cg (the caller closes it), for clone3(CLONE_INTO_CGROUP); v1:
 * -EOPNOTSUPP. */
int sh_cgroup_open_dir(sh_cgroup *cg);

/* Move process `pid` (in the caller's pid namespace) into cg. */
int sh_cgroup_attach(sh_cgroup *cg, pid_t pid, sh_error **err);

/* Kill every process in cg and below, however many it forked (v2: cgroup.kill; before 5.14
 * and on v1 with the freezer: freeze, SIGKILL each, SIGKILL each again once the freeze is
 * complete, always thaw). Never waits: a freeze that is not complete at once is looked at from
 * timers of the root's loop (sh_cgroup_root_set_loop; at most 50 ms on v1, 1 s on v2), and
 * without a loop the kill ends at once with repeated SIGKILL passes. The caller may free cg
 * right away; the processes are gone soon after (sh_cgroup_is_empty, sh_cgroup_destroy). */
int sh_cgroup_kill(sh_cgroup *cg, sh_error **err);

/* The loop whose timers finish kills that wait for a freeze (NULL: none); kills still waiting
 * on the previous one are finished first. The daemon sets it once after sh_cgroup_root_open. */
void sh_cgroup_root_set_loop(sh_cgroup_root *r, sh_loop *l);

/* Freeze cg and everything below it without waiting: _begin asks the kernel, _poll tells
 * whether the freeze is complete (and asks again: v1 retries tasks that were busy), _thaw
 * thaws (always safe, also twice). */
int sh_cgroup_freeze_begin(sh_cgroup *cg, sh_error **err);
int sh_cgroup_freeze_poll(sh_cgroup *cg, bool *ret_frozen, sh_error **err);
int sh_cgroup_thaw(sh_cgroup *cg, sh_error **err);

/* --- a sandbox's own processes beside the root helpers working for it --- */

/* A child cgroup whose name starts with this holds a root helper working for the cgroup's
 * sandbox (rsync, a tree remover): its CPU, memory and pids count against the sandbox's
 * limits, but it is no process of the sandbox. The freeze and kill of the sandbox's
 * processes below spare it, so that a persist can freeze the sandbox and still run, and a
 * deleted sandbox's rsync can still end gracefully (removing its temporary file). */
#define SH_CG_HELPER_PREFIX "helper-"

/* The sandbox's processes are those in cg itself and in every child cgroup of cg but the
 * helpers'. Freezing them never blocks: _begin asks the kernel to freeze each such child,
 * _poll tells whether all are frozen yet (and asks again: v1 retries tasks that were busy,
 * and a child made since _begin is frozen too), _thaw thaws them (always safe, also after a
 * failed _begin). cg itself must hold no process (a sandbox's never does: its worker is in
 * "init"); else _begin fails with EBUSY. */
int sh_cgroup_freeze_procs_begin(sh_cgroup *cg, sh_error **err);
int sh_cgroup_freeze_procs_poll(sh_cgroup *cg, bool *ret_frozen, sh_error **err);
int sh_cgroup_thaw_procs(sh_cgroup *cg, sh_error **err);

/* Kill the sandbox's processes (as sh_cgroup_kill, per child cgroup), sparing the helpers.
 * Does not wait. */
int sh_cgroup_kill_procs(sh_cgroup *cg, sh_error **err);

/* True when no process is left in cg or below. */
int sh_cgroup_is_empty(sh_cgroup *cg, bool *ret, sh_error **err);
/* The same for an exec's cgroup, from one hierarchy (the freezer's; v2's only one): an exec
 * child joins its cgroup in every hierarchy before it runs anything (it exits if a join
 * fails), and nothing in a sandbox can move a process between cgroups (no write access to any
 * cgroupfs), so its processes are in it in all of them or in none. One read of its processes
 * instead of one per v1 hierarchy, when each exec ends. Not for other cgroups: a sandbox's
 * worker is in some hierarchies' leaves and not others'. */
int sh_cgroup_exec_is_empty(sh_cgroup *cg, bool *ret, sh_error **err);

/* Send sig once to every process of an exec's cgroup and below, found in one hierarchy as
 * sh_cgroup_exec_is_empty finds them (the pids of the daemon's view; each checked to be in cg
 * when signalled, so a recycled pid is never hit). No freeze: a process forked meanwhile may
 * miss it. How many were signalled, or -1 with *err. */
int sh_cgroup_exec_signal(sh_cgroup *cg, int sig, sh_error **err);

/* How many times the OOM killer has killed a process in cg (v2 memory.events oom_kill; v1
 * memory.oom_control oom_kill). */
int sh_cgroup_oom_kills(sh_cgroup *cg, uint64_t *ret, sh_error **err);

/* What cg and everything below it use now. */
typedef struct sh_cg_usage {
        uint64_t cpu_ns;    /* CPU time consumed (a counter: compare two readings) */
        uint64_t mem_bytes; /* memory charged now */
} sh_cg_usage;
/* v2: cpu.stat usage_usec and memory.current. v1: memory.usage_in_bytes, and cpuacct.usage
 * where cpuacct shares the cpu hierarchy, else the CPU times of cg's processes (utime,
 * stime and those of their reaped children, /proc/<pid>/stat): a sandbox's PID 1 reaps every
 * orphan, so the sum only grows while the processes live and die inside. Small kernel files
 * only: never waits. */
int sh_cgroup_usage(sh_cgroup *cg, sh_cg_usage *ret, sh_error **err);
/* /proc/<pid>/stat: utime + stime + cutime + cstime, in clock ticks (pure; the name in the
 * second field may hold spaces and parentheses). 0 or -EBADMSG. */
int sh_cg_parse_proc_stat_ticks(const char *text, uint64_t *ret);

/* Remove cg (and empty child cgroups). -EBUSY while processes remain: kill, then retry. A
 * cgroup that is not there (removed with its parent's subtree) is removed: 0. */
int sh_cgroup_destroy(sh_cgroup *cg, sh_error **err);

/* Remove cg once it is empty and free the handle (the caller's is gone on return): at once if
 * it can be, else from timers of the root's loop (every 100 ms, the first after 20 ms) while
 * its last processes exit, `kill`ing them first when asked. One still busy after a minute,
 * or that cannot wait (out of memory), is reported to the root's `lost` callback and left to
 * the subtree's removal (shutdown, the next start); without a loop it waits for that. */
void sh_cgroup_bury(sh_cgroup *cg, bool kill);

/* Who hears of a buried cgroup that could not be removed (the daemon logs it): one that is
 * still there, never one already gone. */
typedef void (*sh_cgroup_lost_fn)(const char *relpath, const char *why, void *data);
void sh_cgroup_root_on_lost(sh_cgroup_root *r, sh_cgroup_lost_fn fn, void *data);
/* Free the handle without touching the cgroup. */
void sh_cgroup_free(sh_cgroup *cg);
