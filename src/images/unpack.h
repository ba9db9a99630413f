/* unpack.h: the image store's layer unpacker (internal to images/; the store calls it). One
 * OCI layer blob, already verified, becomes a directory tree fit to be an overlayfs lower: the
 * image's numeric owners, modes (setuid/setgid kept: every sandbox mount is nosuid) and mtimes,
 * OCI whiteouts in overlayfs form, refused with the entry named when it breaks a rule
 * (layerpolicy.h). The parsing happens in a confined child (unpack-child.c). */
#pragma once

#include <stdint.h>

#include "sh/cgroup.h"
#include "sh/config.h"
#include "sh/error.h"
#include "sh/loop.h"

typedef enum { SH_LAYER_PLAIN, SH_LAYER_GZIP, SH_LAYER_ZSTD } sh_layer_compression;

/* From a layer's media type (OCI and Docker names, "+gzip"/"+zstd"/none, the
 * "nondistributable" ones too); -EINVAL for a type that is not a layer. Pure. */
int sh_layer_compression_of(const char *media_type, sh_layer_compression *ret);

typedef struct sh_layer_unpacker sh_layer_unpacker; /* the queue, its cgroups */
typedef struct sh_layer_unpack sh_layer_unpack;

typedef struct sh_layer_unpack_result {
        uint64_t bytes; /* regular files' sizes, summed */
        uint64_t entries;
} sh_layer_unpack_result;

/* err NULL on success; on failure its kind is SH_E_INVALID for a layer that breaks a rule
 * (the message names the entry and the rule), SH_E_INTERNAL/UNAVAILABLE otherwise. Called
 * once from the loop, never before start returns. */
typedef void (*sh_layer_unpack_done_fn)(const sh_error *err, const sh_layer_unpack_result *res,
                                        void *data);

/* The unpacker of one daemon: its children run in cgroups below `parent` (the images'
 * cgroup of the daemon's subtree; it must outlive the unpacker), as the uid below the
 * sandbox range (cfg->uid_base - 1). */
int sh_layer_unpacker_new(sh_loop *loop, const sh_config *cfg, const sh_cgroup *parent,
                          sh_layer_unpacker **ret, sh_error **err);
/* Running unpacks are killed (their done never runs); freed once the last child is reaped. */
void sh_layer_unpacker_free(sh_layer_unpacker *u);

/* Unpack the verified blob (blob_fd, read from offset 0; not owned) into dest_dirfd (an
 * empty directory of the store's tmp/, not owned), under the bounds (max_bytes of regular
 * files, max_entries). The child: its own namespaces, an empty root with only the blob and
 * the destination, seccomp allow-list, libarchive with the policy asked about every entry.
 * NULL with *err when it cannot even be queued. */
sh_layer_unpack *sh_layer_unpack_start(sh_layer_unpacker *u, int blob_fd, sh_layer_compression c,
                                       int dest_dirfd, uint64_t max_bytes, uint64_t max_entries,
                                       sh_layer_unpack_done_fn done, void *data, sh_error **err);
/* The child killed, done never runs. */
void sh_layer_unpack_cancel(sh_layer_unpack *x);
