/* unpacker.h: the confinement every archive unpacker's child takes before it reads a hostile
 * byte (the tool unpacker, tools/unpack-child.c; the image layer unpacker,
 * images/unpack-child.c), and what their daemon sides share. Why each step is there: the
 * header comment of tools/unpack-child.c. */
#pragma once

#include <linux/filter.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sh/macro.h"
#include "sh/seccomp.h"

/* The unpackers' namespaces. No user namespace: none is needed (we are root and drop to an
 * unprivileged uid), and creating one would expose more kernel code. */
#define SH_UNPACKER_NS (CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)

/* The system calls both unpackers make to read an archive from an fd and write its entries
 * below the working directory with libarchive (never PROT_EXEC memory); each adds its own. */
extern const sh_seccomp_allow sh_unpacker_syscalls[];
extern const size_t sh_unpacker_n_syscalls;

typedef struct sh_unpacker_confinement {
        int procs, nprocs;  /* the cgroup.procs fds: procs, procs + 1, ... */
        int stage;          /* the directory the tree is written into: bound at /out, the cwd */
        int reason;         /* where the one-line reason (and stderr) goes */
        uid_t uid;          /* the unprivileged uid the child becomes */
        uint64_t fsize_max; /* RLIMIT_FSIZE */
        unsigned cpu_s;     /* RLIMIT_CPU */
        const struct sock_fprog *filter;
} sh_unpacker_confinement;

/* Child side, in new SH_UNPACKER_NS namespaces: the cgroup joined, parent death signal,
 * stdio, libc's lazily loaded files read from the host, the root an empty read-only tmpfs
 * with only `stage` (closed) at /out (noexec, nosuid, nodev), rlimits, every privilege
 * dropped, not dumpable, umask 022, the filter. 0, or 1 once the reason was written. */
int sh_unpacker_confine(const sh_unpacker_confinement *c);

/* Child side: the reason (one small write into an empty pipe: it cannot block or split);
 * returns 1 (the child's exit code). */
int sh_unpacker_fail(int fd, const char *fmt, ...) _printf_(2, 3);

/* Child side: setrlimit of both soft and hard limits to v. */
int sh_unpacker_limit(int res, uint64_t v);

/* Daemon side: the child's one-line reason from the pipe `fd` (closed) into buf,
 * printable ASCII only ('?' for any other byte): it goes into JSON and logs, and a child is
 * not trusted to keep to that. Returns -1 (the closed fd). */
int sh_unpacker_read_reason(int fd, char *buf, size_t size);
