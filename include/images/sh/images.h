/* images.h: the image store (docs/images.md): OCI images by reference, pulled from registries
 * on the loop (images/registry.c), kept under the state root content-addressed and shared by
 * every image that has a blob or layer (images/store.c), one pull per image however many wait,
 * unused images evicted least-recently-used above SANDBOX_HOST_IMAGE_CACHE_MAX. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/cgroup.h"
#include "sh/config.h"
#include "sh/error.h"
#include "sh/loop.h"
#include "sh/oci.h"

#define SH_IMAGE_RETRIES         3u       /* one request's retries on 429/5xx/connection errors */
#define SH_IMAGE_RETRY_BASE_MS   250u     /* then 500, 1000 ms */
#define SH_IMAGE_IDLE_MS         30000u   /* a registry that sends nothing for this long: gone */
#define SH_IMAGE_LAYER_ENTRIES   1000000u /* entries of one layer, unpacked */
#define SH_IMAGE_PROGRESS_LAYERS SH_OCI_LAYERS_MAX

typedef struct sh_images sh_images;
typedef struct sh_image sh_image;           /* refcounted; a reference pins it (no eviction) */
typedef struct sh_image_pull sh_image_pull; /* one caller's wait for an image */

/* Credentials for one pull (the /v1 image.auth): never written, never logged. */
typedef struct sh_registry_auth {
        const char *username;
        const char *password;
} sh_registry_auth;

/* What a pull has done so far (diagnostics): its phase and each layer's bytes. */
typedef struct sh_image_layer_progress {
        char digest[SH_OCI_DIGEST_MAX];
        uint64_t size; /* from the manifest */
        uint64_t done; /* bytes received (size once the blob is in the store) */
        bool unpacked;
} sh_image_layer_progress;

typedef struct sh_image_progress {
        const char *phase; /* "manifest", "config", "layers", "unpack", "done" */
        size_t n_layers;
        const sh_image_layer_progress *layers;
} sh_image_progress;

/* img: a new reference, the callee's (sh_image_unref it), NULL on failure; err: NULL on success,
 * else its kind SH_E_INVALID (bad reference, refused, unauthorized, manifest unknown, digest
 * mismatch, too large: a 400) or SH_E_UNAVAILABLE (unreachable, timed out, 5xx/429 after the
 * retries: a 503), its message naming the registry's answer. Called once, from the loop, never
 * before sh_images_get returns; the pull handle is gone after it. */
typedef void (*sh_image_done_fn)(sh_image *img, const sh_error *err, void *data);
/* Called from the loop as the pull moves on (phases, every layer's end; bytes at most every
 * 250 ms); valid during the call. */
typedef void (*sh_image_progress_fn)(const sh_image_progress *p, void *data);

/* Open the store in `dir` (absolute; made 0700 when missing; its tmp/ emptied: a pull cut by a
 * crash never looks complete), read the complete images' records, start the prepull list
 * (cfg->prepull). Layer unpacks run in cgroups below `cgparent` (may be NULL: the unpacker's
 * default). */
int sh_images_open(const sh_config *cfg, sh_loop *loop, const char *dir, const sh_cgroup *cgparent,
                   sh_images **ret, sh_error **err);
/* Every pull cancelled (their callbacks never run); images still referenced stay valid until
 * their last unref. */
void sh_images_free(sh_images *s);
/* The prepull list is done (each pulled, or failed and logged): /readyz. */
bool sh_images_ready(const sh_images *s);

/* Resolve `ref` (an OCI reference): in the store, done runs from the loop with it; else it is
 * pulled (once however many wait). auth NULL: the credentials of SANDBOX_HOST_REGISTRY_AUTH (read
 * at each pull). progress may be NULL. NULL with *err when it cannot even start (a bad
 * reference: SH_E_INVALID). */
sh_image_pull *sh_images_get(sh_images *s, const char *ref, const sh_registry_auth *auth,
                             sh_image_done_fn done, sh_image_progress_fn progress, void *data,
                             sh_error **err);
/* This caller stops waiting (its done never runs); the pull goes on while others wait, else it
 * is stopped and what it wrote is dropped. */
void sh_image_pull_cancel(sh_image_pull *p);
/* The pull's progress now (valid until the loop turns). */
sh_image_progress sh_image_pull_progress(const sh_image_pull *p);

/* (sh_image_ref is the name of oci.h's reference type: hence addref) */
sh_image *sh_image_addref(sh_image *img);
void sh_image_unref(sh_image *img);               /* accepts NULL */
const char *sh_image_name(const sh_image *img);   /* the canonical reference */
const char *sh_image_digest(const sh_image *img); /* the manifest's digest */
/* The store's layers directory (absolute: "{dir}/layers/sha256") and each layer's tree
 * relative to it ("<hex>/root"), lowest first; its absolute path too. */
const char *sh_image_layers_dir(const sh_image *img);
size_t sh_image_n_layers(const sh_image *img);
const char *sh_image_layer_rel(const sh_image *img, size_t i);
const char *sh_image_layer_dir(const sh_image *img, size_t i);
char *const *sh_image_env(const sh_image *img); /* NULL-terminated "K=V" */
size_t sh_image_n_env(const sh_image *img);
const char *sh_image_workdir(const sh_image *img); /* NULL: none */
uint64_t sh_image_size(const sh_image *img);       /* blobs and unpacked bytes */
