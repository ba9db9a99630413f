/* registry.h: the registry client (internal to images/; the store calls it): one image's
 * manifest, config and layer blobs downloaded over the distribution API v2 on the loop
 * (net/fetch), verified while they stream, into the store's blobs/. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sh/config.h"
#include "sh/error.h"
#include "sh/images.h"
#include "sh/loop.h"
#include "sh/oci.h"

typedef struct sh_registry sh_registry;
typedef struct sh_reg_pull sh_reg_pull;

/* What a download produced: every blob named here is in blobs/sha256/ (or was already). */
typedef struct sh_reg_image {
        char manifest_digest[SH_OCI_DIGEST_MAX]; /* the platform's manifest */
        char config_digest[SH_OCI_DIGEST_MAX];
        sh_oci_config config;
        sh_oci_descriptor *layers; /* lowest first */
        size_t n_layers;
        uint64_t blob_bytes; /* config and layers, summed */
} sh_reg_image;
void sh_reg_image_free(sh_reg_image *img); /* accepts NULL */

typedef struct sh_reg_hooks {
        /* Whether the store already holds what this blob is for (the blob verified in blobs/,
         * or a layer already unpacked): it is not downloaded. */
        bool (*have)(void *data, const char *digest, bool layer);
        /* The manifest is in: its layers (lowest first), before any is fetched. 0 or -errno
         * (the pull fails). */
        int (*manifest)(void *data, const sh_oci_descriptor *layers, size_t n);
        /* The phase ("manifest", "config", "layers") or bytes of layer i moved on. */
        void (*progress)(void *data, const char *phase, size_t layer, uint64_t done);
        /* Once, from the loop: img (the callee's) or err. */
        void (*done)(void *data, const sh_error *err, sh_reg_image *img);
} sh_reg_hooks;

/* The settings' transport (REGISTRY_CA, INSECURE_REGISTRIES), mirrors and credentials file. */
int sh_registry_new(sh_loop *loop, const sh_config *cfg, sh_registry **ret, sh_error **err);
void sh_registry_free(sh_registry *r); /* every pull must be gone */

/* Download `ref` into the store whose directory is `storefd` (its tmp/ and blobs/sha256/).
 * max_bytes bounds the blobs summed; deadline_ms (sh_now_ms) every request. NULL with *err when
 * it cannot start. hooks->done is never called before this returns. */
sh_reg_pull *sh_reg_pull_start(sh_registry *r, const sh_image_ref *ref,
                               const sh_registry_auth *auth, int storefd, uint64_t max_bytes,
                               uint64_t deadline_ms, const sh_reg_hooks *hooks, void *data,
                               sh_error **err);
void sh_reg_pull_cancel(sh_reg_pull *p); /* its temporary files removed; done never runs */

/* ---- pure helpers (tests) ------------------------------------------------------------- */

/* The base URLs to try for `domain` in order: the mirrors given for it in `mirrors`
 * ("docker.io=https://m1,docker.io=https://m2,ghcr.io=https://m3"), then the registry itself
 * ("https://<api_host>", or "http://" when api_host is listed in `insecure`). NULL-terminated,
 * malloc'd (free with sh_strv_free); NULL on ENOMEM. */
char **sh_reg_endpoints(const char *domain, const char *api_host, const char *mirrors,
                        const char *insecure);
void sh_strv_free(char **v);
/* The first error of a distribution API error body ({"errors":[{"code","message"}]}) as
 * "CODE: message" (printable, at most n-1 bytes) into buf; "" when there is none. */
void sh_reg_error_text(const char *body, size_t len, char *buf, size_t n);
/* Whether a request that ended with HTTP `status` (0: no answer) is worth another try. */
bool sh_reg_retryable(long status);
