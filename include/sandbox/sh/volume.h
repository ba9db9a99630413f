/* volume.h: the volumes of a create (OPENSANDBOX.md section 2 `volumes`, issue 25), judged by
 * their text alone: nothing here looks a path up (a volume's source may be on NFS, and the
 * daemon's loop never waits for it). sandbox-init's worker resolves and mounts what these
 * rules let through, from an fd of the operator's base, never following a link out of it
 * (isolation/child.c); the daemon only names the base, the path below it, the subPath and the
 * mountPath. Every byte is hostile. Pure: no system calls (tests/unit/test_volume.c,
 * tests/fuzz/fuzz_volume.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SH_VOLUMES_MAX      64   /* SANDBOX_HOST_VOLUME_MAX's ceiling (the worker spec's bound) */
#define SH_VOLUME_NAME_MAX  63   /* a DNS label */
#define SH_VOLUME_CLAIM_MAX 253  /* pvc.claimName */
#define SH_VOLUME_PATH_MAX  1024 /* bytes of a mountPath, subPath or path below a base, NUL in */
#define SH_VOLUME_BASE_MAX  4096 /* bytes of a base (an operator's prefix), NUL included */
#define SH_VOLUME_WORKSPACE "/workspace" /* the workspace's mount: never a mountPath itself */

typedef enum { SH_VOLUME_HOST = 1, SH_VOLUME_PVC = 2 } sh_volume_kind;

/* One volume as the sandbox layer takes it (sh_create_opts.volumes), every field judged. */
typedef struct sh_volume {
        char name[SH_VOLUME_NAME_MAX + 1]; /* a DNS label, unique in the create */
        sh_volume_kind kind;
        /* host: the allowed prefix host.path lies under (absolute, normalised); pvc: "" (the
         * daemon's SANDBOX_HOST_VOLUME_ROOT). */
        char base[SH_VOLUME_BASE_MAX];
        /* host: host.path below base ("." base itself); pvc: the claimName. Relative, no "."
         * "..", or empty component. */
        char path[SH_VOLUME_PATH_MAX];
        char sub[SH_VOLUME_PATH_MAX];    /* subPath, the same form; "": none */
        char target[SH_VOLUME_PATH_MAX]; /* mountPath: absolute, normalised, unique */
        bool read_only;
        bool create;        /* pvc: createIfNotExists (made if absent) */
        bool delete_on_end; /* pvc: deleteOnSandboxTermination */
        /* pvc: pvc.storage in bytes, 0 none ("0" is held as 1 byte): the limit of the claim's
         * directory when this create makes it, where the volume root has project quota. */
        uint64_t storage;
} sh_volume;

/* name: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 bytes (the YAML's Volume.name). */
bool sh_volume_name_valid(const char *s);
/* claimName: the same pattern, at most 253 bytes (the YAML's PVC.claimName): never "." or "..",
 * never a '/', so {VOLUME_ROOT}/{claimName} is one directory of the root. */
bool sh_volume_claim_valid(const char *s);
/* storage: \d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|Ei)? (the YAML's PVC.storage). */
bool sh_volume_storage_valid(const char *s);
/* The same quantity in bytes (the units binary: Ki = 1024 ... Ei = 2^60), a fraction rounded
 * up to a whole byte (counted to 9 decimals; a nonzero digit past them adds one byte). False
 * when not such a quantity or when it exceeds 2^64 - 1 bytes. */
bool sh_volume_storage_bytes(const char *s, uint64_t *bytes);

/* mountPath `in` normalised into out (size bytes): absolute, "//" and "/./" collapsed, a
 * trailing '/' dropped. NULL, or why it is refused (a static phrase to follow the field's name):
 * not absolute, a ".." component, "/" itself, /proc, /dev or /sys or below them, the workspace
 * root itself (below it is fine), too long. */
const char *sh_volume_target(const char *in, char *out, size_t size);
/* subPath `in` normalised into out: relative, "." and empty components dropped ("" when
 * nothing is left). NULL, or why it is refused: absolute, a ".." component, too long. */
const char *sh_volume_sub(const char *in, char *out, size_t size);
/* host.path `in` under one of `allow`'s prefixes (colon-separated absolute paths; NULL or "":
 * none), component-wise (/data allows /data and /data/x, not /database), the longest prefix
 * that holds it: that prefix, normalised, into base, and the rest into rel ("." for the prefix
 * itself). NULL, or why it is refused: not absolute, a ".." component, under no prefix,
 * /proc, /dev or /sys or below them (even under an allowed "/"), too long. */
const char *sh_volume_host(const char *in, const char *allow, char *base, size_t base_size,
                           char *rel, size_t rel_size);

/* The set as the sandbox layer takes it: at most `max` volumes, each field in the form above
 * (kind known, base absolute and normalised for a host volume, empty for a pvc; path relative
 * and plain; target a valid mountPath), names and targets unique. 0, or -1 with why (naming
 * the volume) in why[size]. */
int sh_volumes_check(const sh_volume *v, size_t n, size_t max, char *why, size_t size);

/* Every host volume's base is one of `allow`'s prefixes (as sh_volume_host gives it); none is
 * allowed when allow is NULL or "". 0, or -1 with why. */
int sh_volumes_allowed(const sh_volume *v, size_t n, const char *allow, char *why, size_t size);

/* Sort so that a parent mountPath comes before any below it (fewer components first, the
 * create's order kept among equals): the mounts are made in this order. */
void sh_volumes_sort(sh_volume *v, size_t n);
