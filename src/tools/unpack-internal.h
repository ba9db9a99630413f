/* unpack-internal.h: what unpack.c (the daemon's side) and unpack-child.c (the children) share,
 * and the seam tests/unit/test_unpack_jail.c uses. */
#pragma once

#include <linux/filter.h>
#include <sched.h>
#include <sys/types.h>

#include "sh/error.h"
#include "sh/seccomp.h"
#include "sh/tools.h"
#include "sh/unpacker.h"

#include "policy.h"

#define SH_UNPACK_MAX_DEPTH SH_BUNDLE_DEPTH_MAX /* path components of one entry */

/* The unpacker's namespaces (sh/unpacker.h). */
#define SH_UNPACK_NS SH_UNPACKER_NS

/* The unpacker's fds: the bundle, the staging directory, the reason pipe, then the
 * cgroup.procs fds. The finisher's: the staging directory, the reason pipe, cgroup.procs. */
enum { FD_BUNDLE = 3, FD_STAGE = 4, FD_REASON = 5, FD_PROCS = 6 };
enum { FIN_STAGE = 3, FIN_REASON = 4, FIN_PROCS = 5 };

/* What runs in the confined child once every confinement step is done (the extractor in
 * production); its return value is the child's exit code, and what it writes to FD_REASON the
 * reason reported. FD_BUNDLE is the bundle, the working directory the staging directory. */
typedef int (*sh_unpack_payload_fn)(void);

typedef struct sh_unpack_child_arg {
        uid_t uid;
        const struct sock_fprog *filter;
        int nprocs; /* cgroup.procs fds at FD_PROCS... */
        sh_unpack_payload_fn payload;
} sh_unpack_child_arg;

typedef struct sh_unpack_fin_arg {
        int nprocs; /* cgroup.procs fds at FIN_PROCS... */
} sh_unpack_fin_arg;

/* The unpacker's allow-list filter, built once by the daemon. */
int sh_unpack_filter_build(sh_seccomp **ret, sh_error **err);
/* The child started with SH_UNPACK_NS: every confinement step, then a->payload(). */
int sh_unpack_child_main(void *arg);
/* The production payload: libarchive unpacks FD_BUNDLE into the working directory. */
int sh_unpack_extract(void);
/* The finisher (a fork, root, in the unpack's cgroup): every entry of FIN_STAGE to root. */
int sh_unpack_finisher_main(void *arg);

/* sh_unpack_start with `payload` in place of the extractor: the same namespaces, root,
 * cgroup, privileges and filter, the same finishing and install. */
sh_unpack *sh_unpack_start_with(sh_store *s, int fd, const char *sha, sh_unpack_payload_fn payload,
                                sh_unpack_done_fn done, void *data, sh_error **err);

/* The pid of the unpack's running child (in the daemon's PID namespace), or -1. */
pid_t sh_unpack_pid(const sh_unpack *u);
