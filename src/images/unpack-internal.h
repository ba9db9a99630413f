/* unpack-internal.h: what unpack.c (the daemon's side) and unpack-child.c (the children) of the
 * layer unpacker share. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "sh/error.h"
#include "sh/seccomp.h"
#include "unpack.h"

/* The parser's fds: the blob, the destination, the record, the reason pipe, then the
 * cgroup.procs fds. The applier's: the destination, the record, the reason pipe, then
 * cgroup.procs. */
enum { FD_BLOB = 3, FD_DEST = 4, FD_RECORD = 5, FD_REASON = 6, FD_PROCS = 7 };
enum { AP_DEST = 3, AP_RECORD = 4, AP_REASON = 5, AP_PROCS = 6 };

#define SH_LAYER_REASON_MAX 512u

/* One layer's unpack: at most this long (the parser's CPU limit too), in a cgroup of its own
 * with these limits, below the unpacker's (all unpacks together); so many at once. */
#define SH_LAYER_UNPACK_TIMEOUT_MS (20u * 60u * 1000u)
#define SH_LAYER_APPLY_TIMEOUT_MS  (5u * 60u * 1000u)
#define SH_LAYER_UNPACK_MEMORY_MAX (512ull << 20)
#define SH_LAYER_UNPACK_PIDS_MAX   8u
#define SH_LAYER_UNPACK_CPU_MILLI  1000u
#define SH_LAYER_CG_MEMORY_MAX     (1ull << 30)
#define SH_LAYER_CG_PIDS_MAX       32u
#define SH_LAYER_CG_CPU_MILLI      2000u
#define SH_LAYER_UNPACK_PARALLEL   2u

/* One record of the parser for the applier: the entry's owner and mode (kind 'E') or a
 * directory to make opaque ('O'), followed by `len` bytes of its normalised path (no NUL). */
typedef struct sh_layer_record {
        uint32_t kind;
        uint32_t uid, gid, mode;
        uint32_t len;
} sh_layer_record;

typedef struct sh_layer_child_arg {
        uid_t uid;
        const struct sock_fprog *filter;
        int nprocs;
        sh_layer_compression c;
        uint64_t max_bytes, max_entries;
} sh_layer_child_arg;

typedef struct sh_layer_apply_arg {
        int nprocs;
        const struct sock_fprog *filter;
        uint64_t max_bytes, max_entries;
} sh_layer_apply_arg;

/* The parser's and the applier's allow-lists, built once by the daemon. */
int sh_layer_filters_build(sh_seccomp **parser, sh_seccomp **applier, sh_error **err);
/* The parser, started in SH_UNPACKER_NS: confinement, then libarchive over FD_BLOB into
 * FD_DEST, FD_RECORD written. Exit 0, or 1 with the reason in FD_REASON. */
int sh_layer_parser_main(void *arg);
/* The applier (a fork, root with CAP_CHOWN, CAP_FOWNER, CAP_FSETID, CAP_DAC_READ_SEARCH and
 * CAP_SYS_ADMIN only, in the unpack's cgroup): owners, modes and opaque directories from the record.
 * Exit 0 with "<bytes> <entries>" in AP_REASON, or 1 with the reason there. */
int sh_layer_applier_main(void *arg);
