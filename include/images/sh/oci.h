/* oci.h: the image service's pure decoders (docs/images.md): Docker's image reference grammar
 * and Docker Hub's normalisation (ref.c); OCI and Docker schema 2 manifests, indexes and
 * manifest lists with the host's platform chosen, and the image config (oci.c); the
 * registry's WWW-Authenticate challenge, Docker's config.json credentials and the token
 * endpoint's answer (auth.c). No I/O: each takes bytes and gives a value or a reason naming
 * what is wrong (every failure fills `reason` when it is not NULL). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SH_OCI_DIGEST_MAX  72           /* "sha256:" + 64 hex + NUL */
#define SH_OCI_DOC_MAX     (4u << 20)   /* manifest or index body (the caller bounds it) */
#define SH_OCI_CONFIG_MAX  (4u << 20)   /* image config body */
#define SH_OCI_LAYERS_MAX  128u         /* layers of one manifest */
#define SH_OCI_INDEX_MAX   1024u        /* entries of one index or manifest list */
#define SH_OCI_SIZE_MAX    (1ull << 53) /* a descriptor's size (JSON numbers are doubles) */
#define SH_IMAGE_NAME_MAX  255u         /* domain + "/" + path */
#define SH_AUTH_TOKEN_MAX  (64u << 10)  /* a registry token's bytes */
#define SH_AUTH_HEADER_MAX (16u << 10)  /* a WWW-Authenticate header's bytes */

/* ---- ref.c: image references ----------------------------------------------------------- */

typedef struct sh_image_ref {
        char *domain; /* "docker.io", "127.0.0.1:5000", "ghcr.io" (lowercase host kept as given) */
        char *path;   /* "library/python" (docker.io single component gets "library/") */
        char *tag;    /* "latest" when neither tag nor digest was given; NULL when only a digest */
        char *digest; /* "sha256:<64 lowercase hex>" or NULL (only sha256 accepted) */
} sh_image_ref;

/* Docker's reference grammar; name ≤ 255; first component is a domain when it has '.' or
 * ':' or is "localhost"; uppercase in the path refused. 0, -EINVAL (reason says why), -ENOMEM.
 * On failure *ret is all NULL. */
int sh_image_ref_parse(const char *s, sh_image_ref *ret, char *reason, size_t reason_len);
void sh_image_ref_done(sh_image_ref *r);
/* "docker.io/library/python:3.12" / "...@sha256:..." / "host/p:tag@sha256:.." malloc'd
 * (NULL: out of memory). */
char *sh_image_ref_canonical(const sh_image_ref *r);
/* The API host: "registry-1.docker.io" for docker.io, else the domain. */
const char *sh_image_ref_api_host(const sh_image_ref *r);
bool sh_oci_digest_valid(const char *d); /* "sha256:" + 64 lowercase hex */

/* ---- oci.c: manifests, indexes, image configs ------------------------------------- */

typedef struct sh_oci_descriptor {
        char *media_type;
        char digest[SH_OCI_DIGEST_MAX];
        uint64_t size;
        char *os, *arch, *variant; /* index/list entries only, else NULL */
} sh_oci_descriptor;

typedef enum { SH_OCI_MANIFEST, SH_OCI_INDEX } sh_oci_doc_kind;

typedef struct sh_oci_doc {
        sh_oci_doc_kind kind;
        sh_oci_descriptor config; /* MANIFEST */
        sh_oci_descriptor *items; /* MANIFEST: layers (lowest first); INDEX: manifests */
        size_t n_items;
} sh_oci_doc;

/* content_type: the response's Content-Type (may be NULL: then the body's mediaType, then
 * the shape). OCI image manifest/index, Docker schema 2 manifest/list; schema 1 refused
 * with its name. Bounds: body ≤ 4 MiB (caller), items ≤ 128 (SH_OCI_LAYERS_MAX) for a
 * manifest, 1024 for an index; every digest valid; sizes ≥ 0 and ≤ 2^53. 0, -EINVAL, -ENOMEM;
 * on failure *ret holds nothing to free. */
int sh_oci_doc_parse(const char *content_type, const char *body, size_t len, sh_oci_doc *ret,
                     char *reason, size_t reason_len);
void sh_oci_doc_done(sh_oci_doc *d);
/* The index entry for os/arch/variant (variant NULL: any; "arm64" prefers "v8"); -ENOENT
 * with a reason listing the platforms there are. */
int sh_oci_index_pick(const sh_oci_doc *idx, const char *os, const char *arch, const char *variant,
                      const sh_oci_descriptor **ret, char *reason, size_t n);
/* The host's platform: "linux", uname's machine mapped (x86_64→amd64, aarch64→arm64+v8 …).
 * Static strings; *variant may be NULL. */
void sh_oci_host_platform(const char **os, const char **arch, const char **variant);

typedef struct sh_oci_config {
        char **env; /* "K=V" entries kept in order, each checked (no NUL, has '=') */
        size_t n_env;
        char *workdir; /* NULL when absent/empty; must be absolute else refused */
        char *user;    /* kept for the docs' "ignored"; may be NULL */
        char **diff_ids;
        size_t n_diff_ids;
        char *os, *arch;
} sh_oci_config;

int sh_oci_config_parse(const char *body, size_t len, sh_oci_config *ret, char *reason, size_t n);
void sh_oci_config_done(sh_oci_config *c);

/* ---- auth.c: registry authentication --------------------------------------------------- */

typedef enum { SH_AUTH_NONE, SH_AUTH_BASIC, SH_AUTH_BEARER } sh_auth_scheme;

typedef struct sh_auth_challenge {
        sh_auth_scheme scheme;
        char *realm, *service, *scope;
} sh_auth_challenge;

/* RFC 7235 WWW-Authenticate (quoted strings, escapes, several challenges: Bearer wins; a
 * token68 passed over). 0; -EINVAL malformed (or a Bearer without realm); -ENOTSUP when no
 * challenge is Basic or Bearer (the reason names the schemes asked for); -ENOMEM. */
int sh_auth_challenge_parse(const char *header, sh_auth_challenge *ret, char *reason, size_t n);
void sh_auth_challenge_done(sh_auth_challenge *c);
/* Docker config.json ("auths": {key: {"auth": base64(user:pass)} | {"username","password"}});
 * keys matched by host (with/without scheme and path; docker.io also as
 * "https://index.docker.io/v1/", "index.docker.io", "registry-1.docker.io"). 0 found,
 * -ENOENT none, -EINVAL malformed. */
int sh_docker_config_lookup(const char *json, size_t len, const char *domain, char **user,
                            char **password, char *reason, size_t n);
/* Token endpoint answer: {"token"} or {"access_token"}; ≤ 64 KiB token; printable only. */
int sh_auth_token_parse(const char *body, size_t len, char **token, char *reason, size_t n);
