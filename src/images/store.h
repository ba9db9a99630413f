/* store.h: the image store's pure parts (internal to images/; tests): paths of blobs and
 * layers by digest, the image record's JSON, the eviction choice. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/oci.h"

/* "blobs/sha256/<hex>", "layers/sha256/<hex>" of a valid digest (sh_oci_digest_valid), relative
 * to the store's directory: 0, -EINVAL (not a digest: never a path), -ENOBUFS. */
int sh_store_blob_path(const char *digest, char *buf, size_t n);
int sh_store_layer_path(const char *digest, char *buf, size_t n);

/* images/<sha256 of name>.json */
typedef struct sh_store_record {
        char *name; /* the canonical reference */
        char digest[SH_OCI_DIGEST_MAX];
        char config_digest[SH_OCI_DIGEST_MAX];
        char **layers; /* digests, lowest first */
        size_t n_layers;
        char **env;
        size_t n_env;
        char *workdir;
        uint64_t size, last_used;
} sh_store_record;

char *sh_store_record_json(const sh_store_record *r); /* malloc'd; NULL on ENOMEM */
/* A record as written by sh_store_record_json; -EINVAL for anything else (digests checked,
 * at most SH_OCI_LAYERS_MAX layers, env entries "K=V", workdir absolute). */
int sh_store_record_parse(const char *text, size_t len, sh_store_record *r);
void sh_store_record_done(sh_store_record *r);

typedef struct sh_store_lru_entry {
        uint64_t size, last_used;
        bool in_use;
} sh_store_lru_entry;
/* Which image to evict: while the unused ones together are above `max`, the least recently
 * used of them; n when none must go. */
size_t sh_store_lru_pick(const sh_store_lru_entry *e, size_t n, uint64_t max);
