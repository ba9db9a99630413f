/* seccomp.h: the sandbox's system call filter. Built once in the daemon with libseccomp
 * (modelled on Docker's default profile, plus refusals for new user namespaces, mount,
 * keyctl, bpf, perf_event_open, io_uring_*, userfaultfd, ptrace, TIOCSTI/TIOCLINUX, through
 * the native, 32-bit and x32 ABIs; clone3 answers ENOSYS so libc falls back to the filtered
 * clone) and exported as a BPF program; a sandbox child only loads it, as the last step
 * before execve. */
#pragma once

#include <linux/filter.h>

#include "sh/error.h"

typedef struct sh_seccomp sh_seccomp;

/* Build and export the filter. */
int sh_seccomp_build(sh_seccomp **ret, sh_error **err);
void sh_seccomp_free(sh_seccomp *s);

/* Export a filter built elsewhere with libseccomp (`ctx` is a scmp_filter_ctx: the root
 * helpers' own filters, src/isolation/helper.c) into a new sh_seccomp. ctx stays the
 * caller's. */
int sh_seccomp_export(void *ctx, sh_seccomp **ret, sh_error **err);

/* The exported program; valid while s lives (and in a forked child). */
const struct sock_fprog *sh_seccomp_prog(const sh_seccomp *s);

/* Child side, after fork, async-signal-safe: load `prog` (no_new_privs must already be set).
 * 0 or -errno. */
int sh_seccomp_load(const struct sock_fprog *prog);
