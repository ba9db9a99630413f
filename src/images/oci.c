/* oci.c: manifests, indexes and image configs (sh/oci.h), as a registry serves them: the OCI
 * image manifest and index, Docker's schema 2 manifest and manifest list (the same shapes
 * under other media types). Docker's schema 1 is refused by name; a manifest whose config is
 * not an image config (an artifact) or whose layers are not tar layers is refused naming the
 * type. The choice of an index's entry for a platform follows containerd's: os and
 * architecture equal, the variant exact, else none given (arm64's v8, amd64's v1), else an
 * older arm variant the host also runs. */
#include "sh/oci.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>

#include "pure.h"
#include "sh/util.h"

#define MT_OCI_MANIFEST    "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_INDEX       "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST     "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_SCHEMA1         "application/vnd.docker.distribution.manifest.v1+json"
#define MT_SCHEMA1_SIGNED  "application/vnd.docker.distribution.manifest.v1+prettyjws"
#define MT_OCI_CONFIG      "application/vnd.oci.image.config.v1+json"
#define MT_DOCKER_CONFIG   "application/vnd.docker.container.image.v1+json"
#define MEDIA_TYPE_MAX     255u /* RFC 6838: type "/" subtype, 127 each */
#define PLATFORM_FIELD_MAX 64u  /* os, architecture, variant */
#define ENV_MAX            4096u
#define STRING_MAX         (64u << 10) /* one Env entry, WorkingDir, User */

static const char *const layer_types[] = {
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.oci.image.layer.nondistributable.v1.tar",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
};

static bool in_list(const char *s, const char *const *list, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(s, list[i]) == 0)
                        return true;
        return false;
}

static bool is_manifest_type(const char *t)
{
        return strcmp(t, MT_OCI_MANIFEST) == 0 || strcmp(t, MT_DOCKER_MANIFEST) == 0;
}

static bool is_index_type(const char *t)
{
        return strcmp(t, MT_OCI_INDEX) == 0 || strcmp(t, MT_DOCKER_LIST) == 0;
}

static bool is_schema1_type(const char *t)
{
        return strcmp(t, MT_SCHEMA1) == 0 || strcmp(t, MT_SCHEMA1_SIGNED) == 0;
}

static bool printable(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return false;
        return true;
}

/* A string member `key` of o of 1..max printable characters (absent: *ret NULL, unless
 * required). */
static int string_member(const cJSON *o, const char *key, const char *where, bool required,
                         size_t max, char **ret, char *reason, size_t n)
{
        const cJSON *v = sh_json_opt(o, key);

        *ret = NULL;
        if (!v) {
                if (!required)
                        return 0;
                sh_why(reason, n, "%s has no \"%s\"", where, key);
                return -EINVAL;
        }
        if (!cJSON_IsString(v) || !v->valuestring || !*v->valuestring ||
            strlen(v->valuestring) > max || !printable(v->valuestring)) {
                sh_why(reason, n, "%s: \"%s\" must be a string of 1 to %zu printable characters",
                       where, key, max);
                return -EINVAL;
        }
        *ret = strdup(v->valuestring);
        if (!*ret) {
                sh_why(reason, n, "this host is out of memory");
                return -ENOMEM;
        }
        return 0;
}

static void descriptor_done(sh_oci_descriptor *d)
{
        free(d->media_type);
        free(d->os);
        free(d->arch);
        free(d->variant);
        *d = (sh_oci_descriptor){0};
}

/* One descriptor {mediaType, digest, size[, platform]} at `where`. */
static int descriptor_parse(const cJSON *o, const char *where, bool platform, sh_oci_descriptor *d,
                            char *reason, size_t n)
{
        const cJSON *digest, *size, *p;
        char q[SH_QUOTE_MAX + 4];
        int k;

        *d = (sh_oci_descriptor){0};
        if (!cJSON_IsObject(o)) {
                sh_why(reason, n, "%s is not an object", where);
                return -EINVAL;
        }
        if ((k = string_member(o, "mediaType", where, true, MEDIA_TYPE_MAX, &d->media_type, reason,
                               n)) < 0)
                return k;
        digest = sh_json_opt(o, "digest");
        if (!cJSON_IsString(digest) || !sh_oci_digest_valid(digest->valuestring)) {
                sh_why(reason, n, "%s: the digest %s%s%s is not sha256:<64 lowercase hex>", where,
                       cJSON_IsString(digest) ? "\"" : "",
                       cJSON_IsString(digest)
                               ? sh_quote(digest->valuestring, strlen(digest->valuestring), q)
                               : "(missing)",
                       cJSON_IsString(digest) ? "\"" : "");
                goto fail;
        }
        memcpy(d->digest, digest->valuestring, SH_OCI_DIGEST_MAX - 1);
        size = sh_json_opt(o, "size");
        if (!cJSON_IsNumber(size) || !(size->valuedouble >= 0) ||
            size->valuedouble > (double)SH_OCI_SIZE_MAX ||
            size->valuedouble != (double)(uint64_t)size->valuedouble) {
                sh_why(reason, n, "%s: the size must be a whole number from 0 to 2^53", where);
                goto fail;
        }
        d->size = (uint64_t)size->valuedouble;
        p = platform ? sh_json_opt(o, "platform") : NULL;
        if (p) {
                if (!cJSON_IsObject(p)) {
                        sh_why(reason, n, "%s: the platform is not an object", where);
                        goto fail;
                }
                if ((k = string_member(p, "os", where, true, PLATFORM_FIELD_MAX, &d->os, reason,
                                       n)) < 0 ||
                    (k = string_member(p, "architecture", where, true, PLATFORM_FIELD_MAX, &d->arch,
                                       reason, n)) < 0 ||
                    (k = string_member(p, "variant", where, false, PLATFORM_FIELD_MAX, &d->variant,
                                       reason, n)) < 0) {
                        descriptor_done(d);
                        return k;
                }
        }
        return 0;
fail:
        descriptor_done(d);
        return -EINVAL;
}

void sh_oci_doc_done(sh_oci_doc *d)
{
        if (!d)
                return;
        descriptor_done(&d->config);
        for (size_t i = 0; i < d->n_items; i++)
                descriptor_done(&d->items[i]);
        free(d->items);
        *d = (sh_oci_doc){0};
}

/* The media type a Content-Type names: its type/subtype, lowercase, without parameters, in out
 * (""  for a generic one that says nothing: JSON, text, octet-stream). */
static void content_type_of(const char *ct, char out[MEDIA_TYPE_MAX + 1])
{
        size_t k = 0;

        out[0] = '\0';
        if (!ct)
                return;
        while (*ct == ' ' || *ct == '\t')
                ct++;
        for (; *ct && *ct != ';' && *ct != ' ' && *ct != '\t' && k < MEDIA_TYPE_MAX; ct++)
                out[k++] = (char)(*ct >= 'A' && *ct <= 'Z' ? *ct + 32 : *ct);
        out[k] = '\0';
        if (strcmp(out, "application/json") == 0 || strcmp(out, "text/plain") == 0 ||
            strcmp(out, "application/octet-stream") == 0 || strcmp(out, "binary/octet-stream") == 0)
                out[0] = '\0';
}

int sh_oci_doc_parse(const char *content_type, const char *body, size_t len, sh_oci_doc *ret,
                     char *reason, size_t reason_len)
{
        _cleanup_cjson_ cJSON *root = NULL;
        const cJSON *mt, *schema, *list;
        char ct[MEDIA_TYPE_MAX + 1], q[SH_QUOTE_MAX + 4], where[64];
        const char *type;
        sh_oci_doc d = {0};
        size_t count, max;
        int k;

        *ret = (sh_oci_doc){0};
        if (len > SH_OCI_DOC_MAX) {
                sh_why(reason, reason_len, "the manifest is %zu bytes, more than %u", len,
                       SH_OCI_DOC_MAX);
                return -EINVAL;
        }
        content_type_of(content_type, ct);
        if (is_schema1_type(ct)) {
                sh_why(reason, reason_len,
                       "the registry serves this image as Docker schema 1 (%s), which is not "
                       "supported",
                       ct);
                return -EINVAL;
        }
        root = sh_json_object_of(body, len, "the manifest", reason, reason_len);
        if (!root)
                return -EINVAL;
        mt = sh_json_opt(root, "mediaType");
        schema = sh_json_opt(root, "schemaVersion");
        if (mt && (!cJSON_IsString(mt) || strlen(mt->valuestring) > MEDIA_TYPE_MAX)) {
                sh_why(reason, reason_len, "the manifest's mediaType is not a media type");
                return -EINVAL;
        }
        if ((mt && is_schema1_type(mt->valuestring)) ||
            (cJSON_IsNumber(schema) && schema->valuedouble == 1)) {
                sh_why(reason, reason_len,
                       "the registry serves this image as Docker schema 1 (%s), which is not "
                       "supported",
                       MT_SCHEMA1);
                return -EINVAL;
        }
        if (ct[0] && mt && strcmp(ct, mt->valuestring) != 0) {
                sh_why(reason, reason_len, "the manifest says it is %s but was served as %s",
                       sh_quote(mt->valuestring, strlen(mt->valuestring), q), ct);
                return -EINVAL;
        }
        /* The type: the Content-Type, else the body's mediaType, else the shape. */
        type = ct[0] ? ct : mt ? mt->valuestring : NULL;
        if (!type)
                type = sh_json_opt(root, "manifests") ? MT_OCI_INDEX
                       : sh_json_opt(root, "layers")  ? MT_OCI_MANIFEST
                                                      : "";
        if (!is_manifest_type(type) && !is_index_type(type)) {
                sh_why(reason, reason_len, "%s%s%s is not an image manifest or index",
                       type[0] ? "the media type \"" : "the document",
                       type[0] ? sh_quote(type, strlen(type), q) : "", type[0] ? "\"" : "");
                return -EINVAL;
        }
        if (!cJSON_IsNumber(schema) || schema->valuedouble != 2) {
                sh_why(reason, reason_len, "the manifest's schemaVersion is not 2");
                return -EINVAL;
        }
        d.kind = is_index_type(type) ? SH_OCI_INDEX : SH_OCI_MANIFEST;
        if (d.kind == SH_OCI_MANIFEST) {
                k = descriptor_parse(sh_json_opt(root, "config"), "the manifest's config", false,
                                     &d.config, reason, reason_len);
                if (k < 0)
                        return k;
                if (strcmp(d.config.media_type, MT_OCI_CONFIG) != 0 &&
                    strcmp(d.config.media_type, MT_DOCKER_CONFIG) != 0) {
                        sh_why(reason, reason_len,
                               "this is not a container image: its config is \"%s\"",
                               sh_quote(d.config.media_type, strlen(d.config.media_type), q));
                        k = -EINVAL;
                        goto fail;
                }
        }
        list = sh_json_opt(root, d.kind == SH_OCI_MANIFEST ? "layers" : "manifests");
        max = d.kind == SH_OCI_MANIFEST ? SH_OCI_LAYERS_MAX : SH_OCI_INDEX_MAX;
        if (!cJSON_IsArray(list)) {
                sh_why(reason, reason_len, "the %s has no \"%s\" array",
                       d.kind == SH_OCI_MANIFEST ? "manifest" : "index",
                       d.kind == SH_OCI_MANIFEST ? "layers" : "manifests");
                k = -EINVAL;
                goto fail;
        }
        count = (size_t)cJSON_GetArraySize(list);
        if (count > max) {
                sh_why(reason, reason_len, "the %s has %zu %s, more than %zu",
                       d.kind == SH_OCI_MANIFEST ? "manifest" : "index", count,
                       d.kind == SH_OCI_MANIFEST ? "layers" : "entries", max);
                k = -EINVAL;
                goto fail;
        }
        d.items = calloc(count ? count : 1, sizeof(*d.items));
        if (!d.items) {
                sh_why(reason, reason_len, "this host is out of memory");
                k = -ENOMEM;
                goto fail;
        }
        for (const cJSON *it = list->child; it; it = it->next) {
                sh_oci_descriptor *item = &d.items[d.n_items];

                snprintf(where, sizeof(where), "%s %zu",
                         d.kind == SH_OCI_MANIFEST ? "layer" : "index entry", d.n_items);
                k = descriptor_parse(it, where, d.kind == SH_OCI_INDEX, item, reason, reason_len);
                if (k < 0)
                        goto fail;
                d.n_items++;
                if (d.kind == SH_OCI_MANIFEST &&
                    !in_list(item->media_type, layer_types, ARRAY_SIZE(layer_types))) {
                        sh_why(reason, reason_len,
                               "layer %zu has the media type \"%s\", which is not a tar layer",
                               d.n_items - 1,
                               sh_quote(item->media_type, strlen(item->media_type), q));
                        k = -EINVAL;
                        goto fail;
                }
        }
        *ret = d;
        return 0;
fail:
        sh_oci_doc_done(&d);
        return k;
}

/* ---- platforms --------------------------------------------------------------------------- */

/* Architecture names as OCI spells them (Go's GOARCH). */
static const char *arch_normal(const char *a)
{
        if (strcmp(a, "x86_64") == 0 || strcmp(a, "x86-64") == 0)
                return "amd64";
        if (strcmp(a, "aarch64") == 0)
                return "arm64";
        return a;
}

/* Variants as OCI spells them: "8" is "v8"; NULL for the architecture's default (arm64's v8,
 * amd64's v1). */
static const char *variant_normal(const char *arch, const char *v, char buf[PLATFORM_FIELD_MAX + 2])
{
        if (!v || !*v)
                return NULL;
        if (v[0] >= '0' && v[0] <= '9') {
                snprintf(buf, PLATFORM_FIELD_MAX + 2, "v%s", v);
                v = buf;
        }
        if ((strcmp(arch, "arm64") == 0 && strcmp(v, "v8") == 0) ||
            (strcmp(arch, "amd64") == 0 && strcmp(v, "v1") == 0))
                return NULL;
        return v;
}

/* How well an entry of variant `have` fits a host of variant `want` (both normalised): 0
 * exact, 1 an older arm variant (the farther, the worse), -1 not at all. */
static int variant_rank(const char *arch, const char *want, const char *have)
{
        if (!want && !have)
                return 0;
        if (!want)
                return 1; /* any variant will do, the default one best */
        if (have && strcmp(want, have) == 0)
                return 0;
        if (!have)
                return 1; /* no variant given: it runs on the architecture's every variant */
        if (strcmp(arch, "arm") == 0 && want[0] == 'v' && have[0] == 'v') {
                int w = atoi(want + 1), h = atoi(have + 1);

                if (h >= 5 && h < w)
                        return 1 + (w - h);
        }
        return -1;
}

int sh_oci_index_pick(const sh_oci_doc *idx, const char *os, const char *arch, const char *variant,
                      const sh_oci_descriptor **ret, char *reason, size_t n)
{
        char vb[PLATFORM_FIELD_MAX + 2], hb[PLATFORM_FIELD_MAX + 2];
        const sh_oci_descriptor *best = NULL;
        const char *want, *a = arch_normal(arch);
        int best_rank = -1;
        size_t used, listed = 0;

        *ret = NULL;
        want = variant_normal(a, variant, vb);
        for (size_t i = 0; i < idx->n_items; i++) {
                const sh_oci_descriptor *e = &idx->items[i];
                int rank;

                if (!e->os || !e->arch || !is_manifest_type(e->media_type) ||
                    strcmp(e->os, os) != 0 || strcmp(arch_normal(e->arch), a) != 0)
                        continue;
                rank = variant_rank(a, want, variant_normal(a, e->variant, hb));
                if (rank >= 0 && (!best || rank < best_rank)) {
                        best = e;
                        best_rank = rank;
                }
        }
        if (best) {
                *ret = best;
                return 0;
        }
        /* The reason: what was asked, what there is. */
        if (!reason || !n)
                return -ENOENT;
        sh_why(reason, n, "the image has no manifest for %s/%s%s%s; it has:", os, arch,
               variant ? "/" : "", variant ? variant : "");
        used = strlen(reason);
        for (size_t i = 0; i < idx->n_items && used + 1 < n; i++) {
                const sh_oci_descriptor *e = &idx->items[i];
                int k;

                if (!e->os || !e->arch || !is_manifest_type(e->media_type))
                        continue;
                k = snprintf(reason + used, n - used, "%s %s/%s%s%s", listed ? "," : "", e->os,
                             e->arch, e->variant ? "/" : "", e->variant ? e->variant : "");
                if (k < 0 || (size_t)k >= n - used) {
                        used = n - 1; /* cut: "..." below */
                        break;
                }
                used += (size_t)k;
                listed++;
        }
        if (used + 1 >= n && n > 4)
                memcpy(reason + n - 4, "...", 4);
        else if (listed == 0)
                snprintf(reason + used, n - used, " no platform at all");
        return -ENOENT;
}

void sh_oci_host_platform(const char **os, const char **arch, const char **variant)
{
        static const struct {
                const char *machine, *arch, *variant;
        } map[] = {
                {"x86_64", "amd64", NULL},
                {"amd64", "amd64", NULL},
                {"aarch64", "arm64", "v8"},
                {"arm64", "arm64", "v8"},
                {"armv8l", "arm", "v7"},
                {"armv7l", "arm", "v7"},
                {"armv7", "arm", "v7"},
                {"armv6l", "arm", "v6"},
                {"armv5tel", "arm", "v5"},
                {"i386", "386", NULL},
                {"i686", "386", NULL},
                {"ppc64le", "ppc64le", NULL},
                {"s390x", "s390x", NULL},
                {"riscv64", "riscv64", NULL},
                {"loongarch64", "loong64", NULL},
                {"mips64", "mips64", NULL},
        };
        static char machine[sizeof(((struct utsname *)0)->machine)];
        struct utsname u;

        *os = "linux";
        *variant = NULL;
        if (uname(&u) < 0) {
                /* Cannot happen on Linux; the architecture this was built for then. */
#if defined(__x86_64__)
                *arch = "amd64";
#elif defined(__aarch64__)
                *arch = "arm64";
                *variant = "v8";
#else
                *arch = "unknown";
#endif
                return;
        }
        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                if (strcmp(u.machine, map[i].machine) == 0) {
                        *arch = map[i].arch;
                        *variant = map[i].variant;
                        return;
                }
        snprintf(machine, sizeof(machine), "%s", u.machine);
        *arch = machine;
}

/* ---- image config ------------------------------------------------------------------------- */

void sh_oci_config_done(sh_oci_config *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n_env; i++)
                free(c->env[i]);
        free(c->env);
        for (size_t i = 0; i < c->n_diff_ids; i++)
                free(c->diff_ids[i]);
        free(c->diff_ids);
        free(c->workdir);
        free(c->user);
        free(c->os);
        free(c->arch);
        *c = (sh_oci_config){0};
}

/* An array member of strings into a NULL-terminated vector (*ret NULL when absent or null),
 * each judged by ok (NULL: the reason in bad). */
static int string_array(const cJSON *o, const char *key, size_t max,
                        const char *(*ok)(const char *s), char ***ret, size_t *ret_n, char *reason,
                        size_t n)
{
        const cJSON *a = sh_json_opt(o, key);
        char q[SH_QUOTE_MAX + 4];
        size_t count, i = 0;
        char **v;

        *ret = NULL;
        *ret_n = 0;
        if (!a)
                return 0;
        if (!cJSON_IsArray(a)) {
                sh_why(reason, n, "the image config's %s is not an array", key);
                return -EINVAL;
        }
        count = (size_t)cJSON_GetArraySize(a);
        if (count > max) {
                sh_why(reason, n, "the image config's %s has %zu entries, more than %zu", key,
                       count, max);
                return -EINVAL;
        }
        v = calloc(count + 1, sizeof(*v));
        if (!v) {
                sh_why(reason, n, "this host is out of memory");
                return -ENOMEM;
        }
        *ret = v;
        for (const cJSON *it = a->child; it; it = it->next) {
                const char *bad;

                if (!cJSON_IsString(it) || !it->valuestring) {
                        sh_why(reason, n, "the image config's %s[%zu] is not a string", key, i);
                        return -EINVAL;
                }
                if (strlen(it->valuestring) > STRING_MAX) {
                        sh_why(reason, n, "the image config's %s[%zu] is longer than %u bytes", key,
                               i, STRING_MAX);
                        return -EINVAL;
                }
                if ((bad = ok(it->valuestring))) {
                        sh_why(reason, n, "the image config's %s[%zu] \"%s\" %s", key, i,
                               sh_quote(it->valuestring, strlen(it->valuestring), q), bad);
                        return -EINVAL;
                }
                v[i] = strdup(it->valuestring);
                if (!v[i]) {
                        sh_why(reason, n, "this host is out of memory");
                        return -ENOMEM;
                }
                *ret_n = ++i;
        }
        return 0;
}

static const char *env_bad(const char *s)
{
        /* JSON text carries no NUL here (sh_json_object_of refuses \u0000). */
        const char *eq = strchr(s, '=');

        if (!eq)
                return "has no '=' (an entry is NAME=value)";
        if (eq == s)
                return "has an empty name";
        return NULL;
}

static const char *diff_id_bad(const char *s)
{
        return sh_oci_digest_valid(s) ? NULL : "is not sha256:<64 lowercase hex>";
}

/* A string member of any length up to STRING_MAX, "" as NULL. */
static int plain_string(const cJSON *o, const char *key, char **ret, char *reason, size_t n)
{
        const cJSON *v = sh_json_opt(o, key);

        *ret = NULL;
        if (!v)
                return 0;
        if (!cJSON_IsString(v) || strlen(v->valuestring) > STRING_MAX) {
                sh_why(reason, n, "the image config's %s is not a string of at most %u bytes", key,
                       STRING_MAX);
                return -EINVAL;
        }
        if (!*v->valuestring)
                return 0;
        *ret = strdup(v->valuestring);
        if (!*ret) {
                sh_why(reason, n, "this host is out of memory");
                return -ENOMEM;
        }
        return 0;
}

int sh_oci_config_parse(const char *body, size_t len, sh_oci_config *ret, char *reason, size_t n)
{
        _cleanup_cjson_ cJSON *root = NULL;
        const cJSON *cfg, *rootfs, *type;
        char q[SH_QUOTE_MAX + 4];
        sh_oci_config c = {0};
        int k;

        *ret = (sh_oci_config){0};
        if (len > SH_OCI_CONFIG_MAX) {
                sh_why(reason, n, "the image config is %zu bytes, more than %u", len,
                       SH_OCI_CONFIG_MAX);
                return -EINVAL;
        }
        root = sh_json_object_of(body, len, "the image config", reason, n);
        if (!root)
                return -EINVAL;
        if ((k = plain_string(root, "os", &c.os, reason, n)) < 0 ||
            (k = plain_string(root, "architecture", &c.arch, reason, n)) < 0)
                goto fail;
        cfg = sh_json_opt(root, "config");
        if (cfg && !cJSON_IsObject(cfg)) {
                sh_why(reason, n, "the image config's config is not an object");
                k = -EINVAL;
                goto fail;
        }
        if (cfg) {
                if ((k = string_array(cfg, "Env", ENV_MAX, env_bad, &c.env, &c.n_env, reason, n)) <
                            0 ||
                    (k = plain_string(cfg, "WorkingDir", &c.workdir, reason, n)) < 0 ||
                    (k = plain_string(cfg, "User", &c.user, reason, n)) < 0)
                        goto fail;
                if (c.workdir && c.workdir[0] != '/') {
                        sh_why(reason, n,
                               "the image config's WorkingDir \"%s\" is not an absolute path",
                               sh_quote(c.workdir, strlen(c.workdir), q));
                        k = -EINVAL;
                        goto fail;
                }
        }
        rootfs = sh_json_opt(root, "rootfs");
        type = rootfs ? sh_json_opt(rootfs, "type") : NULL;
        if (!cJSON_IsObject(rootfs) || !cJSON_IsString(type) ||
            strcmp(type->valuestring, "layers") != 0) {
                sh_why(reason, n, "the image config has no rootfs of type \"layers\"");
                k = -EINVAL;
                goto fail;
        }
        k = string_array(rootfs, "diff_ids", SH_OCI_LAYERS_MAX, diff_id_bad, &c.diff_ids,
                         &c.n_diff_ids, reason, n);
        if (k < 0)
                goto fail;
        *ret = c;
        return 0;
fail:
        sh_oci_config_done(&c);
        return k;
}
