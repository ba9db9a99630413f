/* helper.h: the confinement of the root helpers that work on a sandbox's trees (rsync of
 * persist, restore and drain; the tree removers): a cgroup billed to the sandbox they serve,
 * a network namespace of their own, seccomp filters. The daemon makes the cgroup and the
 * filters; the child takes the steps of sh/jail.h before it touches a hostile byte. */
#pragma once

#include <linux/filter.h>
#include <stdint.h>

#include "sh/cgroup.h"
#include "sh/error.h"

/* Limits of a helper's own cgroup. Below a sandbox's cgroup its limits apply on top (memory
 * and CPU are the sandbox's budget); a helper without a sandbox (the removal of a deleted
 * one's tree, leftovers of an earlier run) gets these and the CPU of one sandbox. */
#define SH_HELPER_PIDS_MAX   32
#define SH_HELPER_MEMORY_MAX (256ULL << 20)
/* cgroup.procs fds of one helper cgroup (one per hierarchy: v1 has four). */
#define SH_HELPER_PROCS_MAX 4

/* Create the cgroup of one helper run: "<sandbox>/helper-<tag><n>" (`sandbox` non-NULL:
 * billed to it, frozen and killed never with it: SH_CG_HELPER_PREFIX), or
 * "<subtree>/helper-<tag><n>" with `cpu_milli` as its CPU limit. n is unique in this process.
 * Opens its cgroup.procs fds (at most `max`) for the child: *ret_n of them in procs. */
int sh_helper_cgroup_new(sh_cgroup_root *r, sh_cgroup *sandbox, char tag, uint64_t cpu_milli,
                         sh_cgroup **ret, int *procs, int max, int *ret_n, sh_error **err);

/* The filters, built on first use and kept for the life of the process (immutable; a forked
 * child only reads them). NULL with *err on failure.
 *  - rsync: stacked on the sandbox's own filter (which refuses the kernel attack surface a
 *    sandbox may not reach), sockets of AF_UNIX only (rsync's processes talk over
 *    socketpairs) and no other ABI than the native one.
 *  - remover: an allow-list of what removing a tree takes (open, stat, getdents, unlink,
 *    rename, memory), the native ABI only; everything else fails with ENOSYS. */
const struct sock_fprog *sh_helper_rsync_filter(sh_error **err);
const struct sock_fprog *sh_helper_remover_filter(sh_error **err);
