/* seccomp.h: the sandbox's system call filter, built once in the daemon and exported as one
 * BPF program; a sandbox child only loads it, as the last step before execve. A guard
 * generated from libseccomp's syscall table answers ENOSYS for every number libseccomp does
 * not know (or newer than the reviewed one), then libseccomp's filter refuses what Docker's
 * default profile refuses plus new user namespaces, mount, keyctl, bpf, perf_event_open,
 * io_uring_*, userfaultfd, ptrace, the TIOCSTI/TIOCLINUX and project-quota ioctls, and every
 * socket family but AF_UNIX, AF_INET, AF_INET6 and NETLINK_ROUTE, through the native,
 * 32-bit and x32 ABIs (clone3 answers ENOSYS so libc falls back to the filtered clone).
 * The root helpers' filters (the unpacker's and removers' allow-lists, rsync's AF_UNIX-only)
 * are built here too. */
#pragma once

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/error.h"

typedef struct sh_seccomp sh_seccomp;

/* Build and export the filter. */
int sh_seccomp_build(sh_seccomp **ret, sh_error **err);
void sh_seccomp_free(sh_seccomp *s);

/* One system call an allow-list filter lets through: always when `arg` < 0, else when its
 * argument number `arg` (0..5), masked with `mask`, equals `value`. Several rules of one name
 * are alternatives. */
typedef struct sh_seccomp_allow {
        const char *name;
        int arg;
        uint64_t mask;
        uint64_t value;
} sh_seccomp_allow;

/* An allow-list filter for a helper child (the tool unpacker, the tree removers): only
 * `rules` pass; every other system call fails with `deny_errno`, so that a refusal is visible
 * as an error; calls through any other ABI than the native one kill the process. */
int sh_seccomp_build_allowlist(const sh_seccomp_allow *rules, size_t n, int deny_errno,
                               sh_seccomp **ret, sh_error **err);

/* A filter stacked on the sandbox's own for rsync's helper: sockets of AF_UNIX only (rsync's
 * processes talk over socketpairs: any other family answers EAFNOSUPPORT), and no other ABI
 * than the native one (killed). */
int sh_seccomp_build_unix_only(sh_seccomp **ret, sh_error **err);

/* The exported program; valid while s lives (and in a forked child). */
const struct sock_fprog *sh_seccomp_prog(const sh_seccomp *s);

/* Child side, after fork, async-signal-safe: load `prog` (no_new_privs must already be set).
 * 0 or -errno. */
int sh_seccomp_load(const struct sock_fprog *prog);
