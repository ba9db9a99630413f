/* store.c: the image store under {root}/images (docs/images.md "Store layout"):
 *   blobs/sha256/<hex>        verified blobs (manifests, configs; a compressed layer only
 *                             until its tree is unpacked)
 *   layers/sha256/<hex>/root/ one unpacked layer per compressed blob digest; complete when the
 *                             directory has its final name (unpacked in tmp/, renamed at the end)
 *   images/<sha256 of the canonical reference>.json   the record, written last, atomically
 *   tmp/                      partial downloads and unpacks; emptied at start
 * One pull per image however many callers wait; images in use (a reference beyond the store's
 * own) are never evicted; unused ones go least-recently-used above the cache bound. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry.h"
#include "sh/images.h"
#include "sh/list.h"
#include "sh/log.h"
#include "sh/random.h"
#include "sh/remove.h"
#include "sh/spawn.h"
#include "sh/util.h"
#include "store.h"
#include "unpack.h"

#define RECORD_MAX (1u << 20)

typedef struct pull pull;

struct sh_image {
        unsigned refs; /* the store's own (while it is in the table) and each user's */
        sh_images *s;  /* NULL once out of the table */
        char key[65];  /* sha256 hex of the name: images/<key>.json (private: see key_private) */
        bool private;  /* pulled with a caller's own credentials: that caller's, never recorded */
        char *name;
        char digest[SH_OCI_DIGEST_MAX];
        char config_digest[SH_OCI_DIGEST_MAX];
        char **layers; /* "sha256:<hex>" of each compressed blob, lowest first */
        char **rel;    /* "<hex>/root" */
        char **abs;    /* "{dir}/layers/sha256/<hex>/root" */
        size_t n_layers;
        char *layers_dir;
        char **env; /* NULL-terminated */
        size_t n_env;
        char *workdir;
        uint64_t size, last_used;
        bool used_unsaved; /* last_used moved since its record was written (saved at close) */
        SH_LIST_FIELDS(sh_image, images);
};

struct sh_image_pull {
        sh_images *s;
        pull *p;       /* NULL: an image already in the store, told from a timer */
        sh_image *img; /* that image */
        sh_timer *t;
        sh_image_done_fn done;
        sh_image_progress_fn progress;
        void *data;
        SH_LIST_FIELDS(sh_image_pull, waiters);
};

struct pull {
        sh_images *s;
        char key[65];
        char *name;
        sh_image_ref ref;
        sh_reg_pull *reg;
        sh_reg_image *img;
        sh_layer_unpack *unpack;
        size_t next_unpack;
        char unpack_tmp[64];
        uint64_t unpacked_bytes;
        sh_timer *deadline, *progress_timer;
        sh_image_pull *waiters;
        const char *phase;
        sh_image_layer_progress *layers;
        size_t n_layers;
        bool prepull;
        bool private; /* with a caller's own credentials (key_private) */
        SH_LIST_FIELDS(pull, pulls);
};

struct sh_images {
        const sh_config *cfg;
        sh_loop *loop;
        int dirfd;
        char *dir;
        const sh_cgroup *cgparent;
        sh_registry *reg;
        sh_layer_unpacker *unpacker;
        sh_image *images; /* the table (few: a list) */
        pull *pulls;
        sh_image_pull *ready; /* cached images being told */
        size_t prepull_left;
        uint64_t removals;
        /* keys the names of images pulled with a caller's own credentials (key_private); made
         * at open, never written: such images are forgotten at a restart */
        unsigned char cred_key[crypto_auth_hmacsha256_KEYBYTES];
};

/* ---- names ---------------------------------------------------------------------------- */

static void key_of(const char *name, char out[65])
{
        unsigned char h[crypto_hash_sha256_BYTES];

        crypto_hash_sha256(h, (const unsigned char *)name, strlen(name));
        sh_hex_encode(h, sizeof(h), out);
}

/* An image pulled with a caller's own credentials (/v1's image.auth) is that caller's: the
 * registry gave it to those credentials, and another caller (without them, or with others)
 * must ask the registry itself, never be served it from the store. Its key is a MAC of the
 * name and the credentials under a key of this run: the same credentials find it again, and
 * nothing derived from a password is ever written (its record is not: after a restart it is
 * pulled again; its layers, shared by digest, stay). */
static void key_private(const sh_images *s, const char *name, const sh_registry_auth *a,
                        char out[65])
{
        unsigned char h[crypto_auth_hmacsha256_BYTES];
        crypto_auth_hmacsha256_state st;

        crypto_auth_hmacsha256_init(&st, s->cred_key, sizeof(s->cred_key));
        crypto_auth_hmacsha256_update(&st, (const unsigned char *)name, strlen(name) + 1);
        crypto_auth_hmacsha256_update(&st, (const unsigned char *)a->username,
                                      strlen(a->username) + 1);
        crypto_auth_hmacsha256_update(&st, (const unsigned char *)a->password,
                                      strlen(a->password) + 1);
        crypto_auth_hmacsha256_final(&st, h);
        sodium_memzero(&st, sizeof(st));
        sh_hex_encode(h, sizeof(h), out);
}

int sh_store_layer_path(const char *digest, char *buf, size_t n)
{
        int k;

        if (!sh_oci_digest_valid(digest))
                return -EINVAL;
        k = snprintf(buf, n, "layers/sha256/%s", digest + 7);
        return k < 0 || (size_t)k >= n ? -ENOBUFS : 0;
}

int sh_store_blob_path(const char *digest, char *buf, size_t n)
{
        int k;

        if (!sh_oci_digest_valid(digest))
                return -EINVAL;
        k = snprintf(buf, n, "blobs/sha256/%s", digest + 7);
        return k < 0 || (size_t)k >= n ? -ENOBUFS : 0;
}

static bool exists_at(int dirfd, const char *path, mode_t type)
{
        struct stat st;

        return fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & S_IFMT) == type;
}

/* ---- images --------------------------------------------------------------------------- */

static void strv_free(char **v, size_t n)
{
        if (!v)
                return;
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

static void image_free(sh_image *img)
{
        free(img->name);
        strv_free(img->layers, img->n_layers);
        strv_free(img->rel, img->n_layers);
        strv_free(img->abs, img->n_layers);
        free(img->layers_dir);
        strv_free(img->env, img->n_env);
        free(img->workdir);
        free(img);
}

sh_image *sh_image_addref(sh_image *img)
{
        img->refs++;
        return img;
}

static void enforce_cache_max(sh_images *s);

void sh_image_unref(sh_image *img)
{
        if (!img)
                return;
        if (--img->refs == 1 && img->s) {
                enforce_cache_max(img->s); /* unused now: it may have to go */
                return;
        }
        if (img->refs == 0)
                image_free(img);
}

const char *sh_image_name(const sh_image *img)
{
        return img->name;
}
const char *sh_image_digest(const sh_image *img)
{
        return img->digest;
}
const char *sh_image_layers_dir(const sh_image *img)
{
        return img->layers_dir;
}
size_t sh_image_n_layers(const sh_image *img)
{
        return img->n_layers;
}
const char *sh_image_layer_rel(const sh_image *img, size_t i)
{
        return i < img->n_layers ? img->rel[i] : NULL;
}
const char *sh_image_layer_dir(const sh_image *img, size_t i)
{
        return i < img->n_layers ? img->abs[i] : NULL;
}
char *const *sh_image_env(const sh_image *img)
{
        return img->env;
}
size_t sh_image_n_env(const sh_image *img)
{
        return img->n_env;
}
const char *sh_image_workdir(const sh_image *img)
{
        return img->workdir;
}
uint64_t sh_image_size(const sh_image *img)
{
        return img->size;
}

/* The layer paths of an image whose layers are set. */
static int image_paths(sh_images *s, sh_image *img)
{
        if (asprintf(&img->layers_dir, "%s/layers/sha256", s->dir) < 0) {
                img->layers_dir = NULL;
                return -ENOMEM;
        }
        img->rel = calloc(img->n_layers + 1, sizeof(char *));
        img->abs = calloc(img->n_layers + 1, sizeof(char *));
        if (!img->rel || !img->abs)
                return -ENOMEM;
        for (size_t i = 0; i < img->n_layers; i++) {
                if (asprintf(&img->rel[i], "%s/root", img->layers[i] + 7) < 0) {
                        img->rel[i] = NULL;
                        return -ENOMEM;
                }
                if (asprintf(&img->abs[i], "%s/%s", img->layers_dir, img->rel[i]) < 0) {
                        img->abs[i] = NULL;
                        return -ENOMEM;
                }
        }
        return 0;
}

static sh_image *find_image(sh_images *s, const char *key)
{
        sh_image *i;

        SH_LIST_FOREACH(images, i, s->images)
                if (strcmp(i->key, key) == 0)
                        return i;
        return NULL;
}

/* ---- records -------------------------------------------------------------------------- */

char *sh_store_record_json(const sh_store_record *r)
{
        cJSON *j = cJSON_CreateObject(), *a;
        char *out = NULL;
        bool ok = j != NULL;

        ok = ok && cJSON_AddStringToObject(j, "name", r->name) &&
             cJSON_AddStringToObject(j, "digest", r->digest) &&
             cJSON_AddStringToObject(j, "config", r->config_digest) &&
             cJSON_AddNumberToObject(j, "size", (double)r->size) &&
             cJSON_AddNumberToObject(j, "lastUsed", (double)r->last_used);
        if (ok && r->workdir)
                ok = cJSON_AddStringToObject(j, "workdir", r->workdir) != NULL;
        a = ok ? cJSON_AddArrayToObject(j, "layers") : NULL;
        for (size_t i = 0; a && i < r->n_layers; i++)
                ok = ok && cJSON_AddItemToArray(a, cJSON_CreateString(r->layers[i]));
        a = ok && a ? cJSON_AddArrayToObject(j, "env") : NULL;
        for (size_t i = 0; a && i < r->n_env; i++)
                ok = ok && cJSON_AddItemToArray(a, cJSON_CreateString(r->env[i]));
        if (ok && a)
                out = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        return out;
}

static char **json_strv(const cJSON *a, size_t max, size_t *n, bool (*ok)(const char *))
{
        char **v;
        size_t k = 0;
        const cJSON *e;

        if (!cJSON_IsArray(a) || (size_t)cJSON_GetArraySize(a) > max)
                return NULL;
        v = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(*v));
        if (!v)
                return NULL;
        cJSON_ArrayForEach(e, a)
        {
                if (!cJSON_IsString(e) || (ok && !ok(e->valuestring)) ||
                    !(v[k] = strdup(e->valuestring))) {
                        strv_free(v, k);
                        return NULL;
                }
                k++;
        }
        *n = k;
        return v;
}

static bool env_ok(const char *e)
{
        return strchr(e, '=') != NULL && e[0] != '=';
}

int sh_store_record_parse(const char *text, size_t len, sh_store_record *r)
{
        cJSON *j = sh_json_parse_exact(text, len);
        const cJSON *name, *digest, *config, *size, *used, *workdir;
        int ret = -EINVAL;

        memset(r, 0, sizeof(*r));
        if (!j)
                return -EINVAL;
        name = cJSON_GetObjectItemCaseSensitive(j, "name");
        digest = cJSON_GetObjectItemCaseSensitive(j, "digest");
        config = cJSON_GetObjectItemCaseSensitive(j, "config");
        size = cJSON_GetObjectItemCaseSensitive(j, "size");
        used = cJSON_GetObjectItemCaseSensitive(j, "lastUsed");
        workdir = cJSON_GetObjectItemCaseSensitive(j, "workdir");
        if (!cJSON_IsString(name) || strlen(name->valuestring) > 4096 || !cJSON_IsString(digest) ||
            !sh_oci_digest_valid(digest->valuestring) || !cJSON_IsString(config) ||
            !sh_oci_digest_valid(config->valuestring) || !cJSON_IsNumber(size) ||
            size->valuedouble < 0 || !cJSON_IsNumber(used) || used->valuedouble < 0 ||
            (workdir && (!cJSON_IsString(workdir) || workdir->valuestring[0] != '/')))
                goto out;
        r->layers = json_strv(cJSON_GetObjectItemCaseSensitive(j, "layers"), SH_OCI_LAYERS_MAX,
                              &r->n_layers, sh_oci_digest_valid);
        r->env = json_strv(cJSON_GetObjectItemCaseSensitive(j, "env"), 65536, &r->n_env, env_ok);
        r->name = strdup(name->valuestring);
        r->workdir = workdir ? strdup(workdir->valuestring) : NULL;
        if (!r->layers || !r->env || !r->name || (workdir && !r->workdir)) {
                sh_store_record_done(r);
                goto out;
        }
        memcpy(r->digest, digest->valuestring, strlen(digest->valuestring) + 1);
        memcpy(r->config_digest, config->valuestring, strlen(config->valuestring) + 1);
        r->size = (uint64_t)size->valuedouble;
        r->last_used = (uint64_t)used->valuedouble;
        ret = 0;
out:
        cJSON_Delete(j);
        return ret;
}

void sh_store_record_done(sh_store_record *r)
{
        free(r->name);
        strv_free(r->layers, r->n_layers);
        strv_free(r->env, r->n_env);
        free(r->workdir);
        memset(r, 0, sizeof(*r));
}

int sh_store_put(int dirfd, const char *dest, const void *buf, size_t len)
{
        char tmp[64], hex[17];
        _cleanup_close_ int fd = -1;
        size_t off = 0;
        int r;

        if (sh_random_hex(hex, 8) < 0)
                return -EIO;
        snprintf(tmp, sizeof(tmp), "tmp/put-%s", hex);
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        while (off < len) {
                ssize_t n = write(fd, (const char *)buf + off, len - off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = n < 0 ? -errno : -EIO;
                        (void)unlinkat(dirfd, tmp, 0);
                        return r;
                }
                off += (size_t)n;
        }
        if (fdatasync(fd) < 0 || renameat(dirfd, tmp, dirfd, dest) < 0) {
                r = -errno;
                (void)unlinkat(dirfd, tmp, 0);
                return r;
        }
        return 0;
}

/* images/<key>.json written whole through tmp/ and a rename: never half a record. */
static int write_record(sh_images *s, const sh_image *img)
{
        sh_store_record r = {.name = img->name,
                             .layers = img->layers,
                             .n_layers = img->n_layers,
                             .env = img->env,
                             .n_env = img->n_env,
                             .workdir = img->workdir,
                             .size = img->size,
                             .last_used = img->last_used};
        char dest[96];
        _cleanup_free_ char *text = NULL;

        memcpy(r.digest, img->digest, sizeof(r.digest));
        memcpy(r.config_digest, img->config_digest, sizeof(r.config_digest));
        text = sh_store_record_json(&r);
        if (!text)
                return -ENOMEM;
        snprintf(dest, sizeof(dest), "images/%s.json", img->key);
        return sh_store_put(s->dirfd, dest, text, strlen(text));
}

static sh_image *image_from_record(sh_images *s, sh_store_record *r)
{
        sh_image *img = calloc(1, sizeof(*img));

        if (!img)
                return NULL;
        img->refs = 1;
        img->s = s;
        img->name = TAKE_PTR(r->name);
        key_of(img->name, img->key);
        memcpy(img->digest, r->digest, sizeof(img->digest));
        memcpy(img->config_digest, r->config_digest, sizeof(img->config_digest));
        img->layers = TAKE_PTR(r->layers);
        img->n_layers = r->n_layers;
        img->env = TAKE_PTR(r->env);
        img->n_env = r->n_env;
        img->workdir = TAKE_PTR(r->workdir);
        img->size = r->size;
        img->last_used = r->last_used;
        r->n_layers = r->n_env = 0;
        if (image_paths(s, img) < 0) {
                image_free(img);
                return NULL;
        }
        return img;
}

/* Every record whose layers are all complete; the others are dropped (their blobs stay). */
static void load_records(sh_images *s)
{
        _cleanup_close_ int dfd = openat(s->dirfd, "images", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;
        struct dirent *e;

        if (dfd < 0)
                return;
        d = fdopendir(dfd);
        if (!d)
                return;
        dfd = -1;
        _cleanup_free_ char *buf = malloc(RECORD_MAX);

        if (!buf) {
                closedir(d);
                return;
        }
        while ((e = readdir(d))) {
                char path[160];
                _cleanup_close_ int fd = -1;
                sh_store_record r;
                ssize_t n;
                bool complete = true;
                sh_image *img;

                if (strlen(e->d_name) != 69 || strcmp(e->d_name + 64, ".json") != 0)
                        continue;
                fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                n = fd < 0 ? -1 : read(fd, buf, RECORD_MAX);
                if (n <= 0 || (size_t)n >= RECORD_MAX ||
                    sh_store_record_parse(buf, (size_t)n, &r) < 0) {
                        sh_log(SH_LOG_WARN, "image-store", NULL,
                               "dropping the unreadable record %s", e->d_name);
                        (void)unlinkat(dirfd(d), e->d_name, 0);
                        continue;
                }
                for (size_t i = 0; i < r.n_layers && complete; i++)
                        complete = sh_store_layer_path(r.layers[i], path, sizeof(path)) == 0 &&
                                   exists_at(s->dirfd, path, S_IFDIR);
                img = complete ? image_from_record(s, &r) : NULL;
                sh_store_record_done(&r);
                if (!img || strncmp(e->d_name, img->key, 64) != 0) {
                        sh_log(SH_LOG_WARN, "image-store", NULL,
                               "dropping the record %s: a layer is missing", e->d_name);
                        (void)unlinkat(dirfd(d), e->d_name, 0);
                        if (img)
                                image_free(img);
                        continue;
                }
                SH_LIST_PREPEND(images, s->images, img);
        }
        closedir(d);
}

/* ---- eviction ------------------------------------------------------------------------- */

/* In a child (the trees may be big): the store's directory is its fd 3. */
static int remove_child(void *arg)
{
        sh_error *err = NULL;

        return sh_fs_remove_tree(3, arg, &err) < 0 ? 1 : 0;
}

static void on_removed(sh_child *c, pid_t pid, int status, void *data)
{
        if (status != 0)
                sh_log(SH_LOG_WARN, "image-store", NULL,
                       "removing %s failed (%d): tmp/ is emptied at the "
                       "next start",
                       (char *)data, status);
        free(data);
}

/* Whether anything but `except` (an image or a pull) still needs this digest. */
static bool digest_needed(sh_images *s, const sh_image *except, const char *digest)
{
        sh_image *i;
        pull *p;

        SH_LIST_FOREACH(images, i, s->images) {
                if (i == except)
                        continue;
                if (strcmp(i->digest, digest) == 0 || strcmp(i->config_digest, digest) == 0)
                        return true;
                for (size_t k = 0; k < i->n_layers; k++)
                        if (strcmp(i->layers[k], digest) == 0)
                                return true;
        }
        SH_LIST_FOREACH(pulls, p, s->pulls) {
                if (!p->img)
                        return true; /* its layers are not known yet: keep everything */
                if (strcmp(p->img->config_digest, digest) == 0 ||
                    strcmp(p->img->manifest_digest, digest) == 0)
                        return true;
                for (size_t k = 0; k < p->img->n_layers; k++)
                        if (strcmp(p->img->layers[k].digest, digest) == 0)
                                return true;
        }
        return false;
}

/* Move a path into `bin` (a directory of tmp/: off the store at once), removed later by a
 * child, or at the next start. */
static void trash(sh_images *s, const char *bin, const char *path)
{
        char dest[160], hex[17];

        if (sh_random_hex(hex, 8) < 0)
                return;
        snprintf(dest, sizeof(dest), "%s/%s", bin, hex);
        if (renameat(s->dirfd, path, s->dirfd, dest) < 0 && errno != ENOENT)
                sh_log(SH_LOG_WARN, "image-store", NULL, "cannot move %s out of the store: %s",
                       path, strerror(errno));
}

/* A tree of tmp/ removed by a child (it may be big); at the next start if that fails. */
static void discard(sh_images *s, const char *path)
{
        char *name = strdup(path);

        if (!name || !sh_child_fork(s->loop, s->dirfd, remove_child, name, on_removed, name)) {
                sh_log(SH_LOG_WARN, "image-store", NULL,
                       "cannot start the removal of %s: %s (tmp/ is emptied at the next start)",
                       path, strerror(errno));
                free(name);
        }
}

static void evict(sh_images *s, sh_image *img, const char *bin)
{
        char path[160];
        const char *digests[2] = {img->digest, img->config_digest};

        sh_log(SH_LOG_INFO, "image-evict", NULL, "evicting %s (%llu bytes, unused)", img->name,
               (unsigned long long)img->size);
        snprintf(path, sizeof(path), "images/%s.json", img->key);
        (void)unlinkat(s->dirfd, path, 0);
        SH_LIST_REMOVE(images, s->images, img);
        for (size_t k = 0; k < img->n_layers; k++) {
                if (digest_needed(s, img, img->layers[k]))
                        continue;
                if (sh_store_layer_path(img->layers[k], path, sizeof(path)) == 0)
                        trash(s, bin, path);
                if (sh_store_blob_path(img->layers[k], path, sizeof(path)) == 0)
                        (void)unlinkat(s->dirfd, path, 0);
        }
        for (size_t k = 0; k < 2; k++)
                if (!digest_needed(s, img, digests[k]) &&
                    sh_store_blob_path(digests[k], path, sizeof(path)) == 0)
                        (void)unlinkat(s->dirfd, path, 0);
        img->s = NULL;
        sh_image_unref(img);
}

size_t sh_store_lru_pick(const sh_store_lru_entry *e, size_t n, uint64_t max)
{
        uint64_t total = 0, best_used = UINT64_MAX;
        size_t best = n;

        for (size_t i = 0; i < n; i++)
                if (!e[i].in_use)
                        total += e[i].size;
        if (total <= max)
                return n;
        for (size_t i = 0; i < n; i++)
                if (!e[i].in_use && e[i].last_used < best_used) {
                        best = i;
                        best_used = e[i].last_used;
                }
        return best;
}

/* Unused images least-recently-used first while the store is above its bound. */
static void enforce_cache_max(sh_images *s)
{
        char bin[64], hex[17];
        bool trashed = false;

        if (sh_random_hex(hex, 8) < 0)
                return;
        snprintf(bin, sizeof(bin), "tmp/trash-%s", hex);

        for (;;) {
                sh_store_lru_entry e[512];
                sh_image *imgs[512], *i;
                size_t n = 0, pick;

                SH_LIST_FOREACH(images, i, s->images) {
                        if (n == 512)
                                break;
                        imgs[n] = i;
                        e[n].size = i->size;
                        e[n].last_used = i->last_used;
                        e[n].in_use = i->refs > 1;
                        n++;
                }
                pick = sh_store_lru_pick(e, n, s->cfg->image_cache_max);
                if (pick == n)
                        break;
                if (!trashed && mkdirat(s->dirfd, bin, 0700) < 0) {
                        sh_log(SH_LOG_WARN, "image-store", NULL, "cannot evict: %s",
                               strerror(errno));
                        return;
                }
                trashed = true;
                evict(s, imgs[pick], bin);
        }
        if (trashed)
                discard(s, bin);
}

/* ---- pulls ---------------------------------------------------------------------------- */

static sh_image_progress progress_of(const pull *p)
{
        return (sh_image_progress){.phase = p->phase, .n_layers = p->n_layers, .layers = p->layers};
}

static void tell_progress(pull *p)
{
        sh_image_progress pr = progress_of(p);
        sh_image_pull *w, *n;

        SH_LIST_FOREACH_SAFE(waiters, w, n, p->waiters)
                if (w->progress)
                        w->progress(&pr, w->data);
}

static void pull_free(pull *p)
{
        sh_images *s = p->s;

        SH_LIST_REMOVE(pulls, s->pulls, p);
        sh_reg_pull_cancel(p->reg);
        sh_layer_unpack_cancel(p->unpack);
        if (p->unpack_tmp[0])
                discard(s, p->unpack_tmp);
        sh_loop_cancel_timer(s->loop, p->deadline);
        sh_loop_cancel_timer(s->loop, p->progress_timer);
        sh_reg_image_free(p->img);
        sh_image_ref_done(&p->ref);
        free(p->layers);
        free(p->name);
        free(p);
}

static void prepull_one_done(sh_images *s)
{
        if (s->prepull_left && --s->prepull_left == 0)
                sh_log(SH_LOG_INFO, "image-prepull", NULL, "the prepull list is done");
}

/* Tell every waiter (img: each gets a reference of its own), then free the pull. */
static void pull_end(pull *p, sh_image *img, const sh_error *err)
{
        sh_image_pull *w;

        if (err)
                sh_log(SH_LOG_WARN, "image-pull", NULL, "pulling %s failed: %s", p->name, err->msg);
        else if (img)
                sh_log(SH_LOG_INFO, "image-pull", NULL, "pulled %s (%s, %zu layers)", p->name,
                       img->digest, img->n_layers);
        if (p->prepull)
                prepull_one_done(p->s);
        while ((w = p->waiters)) {
                SH_LIST_REMOVE(waiters, p->waiters, w);
                w->p = NULL;
                w->done(img ? sh_image_addref(img) : NULL, err, w->data);
                free(w);
        }
        pull_free(p);
}

static void pull_fail(pull *p, sh_error_kind kind, const char *fmt, ...) _printf_(3, 4);
static void pull_fail(pull *p, sh_error_kind kind, const char *fmt, ...)
{
        char msg[1200];
        sh_error e = {.kind = kind, .msg = msg};
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        pull_end(p, NULL, &e);
}

static void on_deadline(sh_loop *l, sh_timer *t, void *data)
{
        pull *p = data;

        p->deadline = NULL;
        pull_fail(
                p, SH_E_UNAVAILABLE,
                "timed out: pulling %s took more than %llu ms (SANDBOX_HOST_IMAGE_PULL_TIMEOUT_MS)",
                p->name, (unsigned long long)p->s->cfg->image_pull_timeout_ms);
}

/* The record, the image in the table, everyone told. */
static void complete(pull *p)
{
        sh_images *s = p->s;
        sh_image *img = calloc(1, sizeof(*img));
        sh_reg_image *ri = p->img;
        int r;

        if (!img) {
                pull_fail(p, SH_E_INTERNAL, "out of memory");
                return;
        }
        img->refs = 1;
        img->s = s;
        img->private = p->private;
        memcpy(img->key, p->key, sizeof(img->key));
        img->name = strdup(p->name);
        memcpy(img->digest, ri->manifest_digest, sizeof(img->digest));
        memcpy(img->config_digest, ri->config_digest, sizeof(img->config_digest));
        img->n_layers = ri->n_layers;
        img->layers = calloc(ri->n_layers + 1, sizeof(char *));
        img->env = calloc(ri->config.n_env + 1, sizeof(char *));
        img->size = ri->blob_bytes + p->unpacked_bytes;
        img->last_used = sh_now_wall_ms();
        r = img->name && img->layers && img->env ? 0 : -ENOMEM;
        for (size_t i = 0; r == 0 && i < ri->n_layers; i++)
                if (!(img->layers[i] = strdup(ri->layers[i].digest)))
                        r = -ENOMEM;
        for (size_t i = 0; r == 0 && i < ri->config.n_env; i++) {
                if (!(img->env[i] = strdup(ri->config.env[i])))
                        r = -ENOMEM;
                else
                        img->n_env = i + 1;
        }
        if (r == 0 && ri->config.workdir && !(img->workdir = strdup(ri->config.workdir)))
                r = -ENOMEM;
        if (r == 0)
                r = image_paths(s, img);
        if (r == 0 && !img->private)
                r = write_record(s, img);
        if (r < 0) {
                image_free(img);
                pull_fail(p, SH_E_INTERNAL, "this host cannot record the image %s: %s", p->name,
                          strerror(-r));
                return;
        }
        /* a pull by another name of the same image replaces nothing: one record per name */
        SH_LIST_PREPEND(images, s->images, img);
        p->phase = "done";
        sh_image_addref(img); /* alive through the waiters' callbacks, whatever they drop */
        pull_end(p, img, NULL);
        sh_image_unref(img);
}

static void unpack_next(pull *p);

static void on_unpacked(const sh_error *err, const sh_layer_unpack_result *res, void *data)
{
        pull *p = data;
        sh_images *s = p->s;
        const char *digest = p->img->layers[p->next_unpack].digest;
        char dest[160];

        p->unpack = NULL;
        if (err) {
                pull_fail(p, err->kind == SH_E_INVALID ? SH_E_INVALID : err->kind,
                          "refused: the layer %s of %s: %s", digest, p->name, err->msg);
                return;
        }
        p->unpacked_bytes += res->bytes;
        (void)sh_store_layer_path(digest, dest, sizeof(dest));
        if (renameat(s->dirfd, p->unpack_tmp, s->dirfd, dest) < 0) {
                if (errno != EEXIST && errno != ENOTEMPTY) {
                        pull_fail(p, SH_E_INTERNAL, "this host cannot store the layer %s: %s",
                                  digest, strerror(errno));
                        return;
                }
                /* another pull put the same layer in place first: ours goes */
                discard(s, p->unpack_tmp);
        }
        p->unpack_tmp[0] = '\0';
        /* The layer is kept once, unpacked: its compressed blob goes (a later pull of an image
         * that has it finds the tree and fetches nothing). */
        if (sh_store_blob_path(digest, dest, sizeof(dest)) == 0 &&
            unlinkat(s->dirfd, dest, 0) < 0 && errno != ENOENT)
                sh_log(SH_LOG_WARN, "image-store", NULL, "cannot remove the blob of %s: %s", digest,
                       strerror(errno));
        p->layers[p->next_unpack].unpacked = true;
        p->next_unpack++;
        tell_progress(p);
        unpack_next(p);
}

/* Each layer not yet in layers/: unpacked from its blob into tmp/, renamed into place. */
static void unpack_next(pull *p)
{
        sh_images *s = p->s;
        char path[160], hex[17];
        sh_layer_compression c;
        sh_error *err = NULL;
        _cleanup_close_ int blob = -1, dest = -1;
        uint64_t left;

        while (p->next_unpack < p->img->n_layers) {
                const char *digest = p->img->layers[p->next_unpack].digest;

                (void)sh_store_layer_path(digest, path, sizeof(path));
                if (!exists_at(s->dirfd, path, S_IFDIR))
                        break;
                p->layers[p->next_unpack].unpacked = true;
                p->next_unpack++;
        }
        if (p->next_unpack == p->img->n_layers) {
                complete(p);
                return;
        }
        {
                const sh_oci_descriptor *d = &p->img->layers[p->next_unpack];

                if (sh_layer_compression_of(d->media_type, &c) < 0) {
                        pull_fail(p, SH_E_INVALID,
                                  "refused: the layer %s of %s has the media type '%.100s', not "
                                  "a layer's",
                                  d->digest, p->name, d->media_type ? d->media_type : "");
                        return;
                }
                if (!s->unpacker &&
                    sh_layer_unpacker_new(s->loop, s->cfg, s->cgparent, &s->unpacker, &err) < 0) {
                        pull_fail(p, SH_E_INTERNAL, "this host cannot unpack layers: %s",
                                  err ? err->msg : "out of memory");
                        sh_error_release(&err);
                        return;
                }
                (void)sh_store_blob_path(d->digest, path, sizeof(path));
                blob = openat(s->dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (blob < 0 || sh_random_hex(hex, 8) < 0) {
                        pull_fail(p, SH_E_INTERNAL, "this host cannot read the layer %s: %s",
                                  d->digest, strerror(errno));
                        return;
                }
                snprintf(p->unpack_tmp, sizeof(p->unpack_tmp), "tmp/layer-%s", hex);
                snprintf(path, sizeof(path), "%s/root", p->unpack_tmp);
                if (mkdirat(s->dirfd, p->unpack_tmp, 0755) < 0) {
                        p->unpack_tmp[0] = '\0';
                        pull_fail(p, SH_E_INTERNAL, "this host cannot unpack: %s", strerror(errno));
                        return;
                }
                if (mkdirat(s->dirfd, path, 0755) < 0 ||
                    (dest = openat(s->dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                        pull_fail(p, SH_E_INTERNAL, "this host cannot unpack: %s", strerror(errno));
                        return;
                }
                left = s->cfg->image_max > p->unpacked_bytes ? s->cfg->image_max - p->unpacked_bytes
                                                             : 0;
                p->phase = "unpack";
                p->unpack = sh_layer_unpack_start(s->unpacker, blob, c, dest, left,
                                                  SH_IMAGE_LAYER_ENTRIES, on_unpacked, p, &err);
                if (!p->unpack) {
                        pull_fail(p, sh_error_kind_of(err), "cannot unpack the layer %s of %s: %s",
                                  d->digest, p->name, err ? err->msg : "out of memory");
                        sh_error_release(&err);
                }
        }
}

static bool reg_have(void *data, const char *digest, bool layer)
{
        pull *p = data;
        char path[160];

        if (sh_store_layer_path(digest, path, sizeof(path)) == 0 &&
            exists_at(p->s->dirfd, path, S_IFDIR))
                return true;
        return sh_store_blob_path(digest, path, sizeof(path)) == 0 &&
               exists_at(p->s->dirfd, path, S_IFREG);
}

static void reg_progress(void *data, const char *phase, size_t layer, uint64_t done)
{
        pull *p = data;

        p->phase = phase;
        if (p->layers && layer < p->n_layers)
                p->layers[layer].done = done;
        tell_progress(p);
}

/* The manifest is in: each layer's progress from now on. */
static int reg_manifest(void *data, const sh_oci_descriptor *layers, size_t n)
{
        pull *p = data;

        free(p->layers);
        p->n_layers = 0;
        p->layers = calloc(n ? n : 1, sizeof(*p->layers));
        if (!p->layers)
                return -ENOMEM;
        p->n_layers = n;
        for (size_t i = 0; i < n; i++) {
                memcpy(p->layers[i].digest, layers[i].digest, sizeof(p->layers[i].digest));
                p->layers[i].size = layers[i].size;
        }
        return 0;
}

static void reg_done(void *data, const sh_error *err, sh_reg_image *img)
{
        pull *p = data;

        p->reg = NULL;
        if (err) {
                pull_end(p, NULL, err);
                return;
        }
        p->img = img;
        if (p->n_layers != img->n_layers && reg_manifest(p, img->layers, img->n_layers) < 0) {
                pull_fail(p, SH_E_INTERNAL, "out of memory");
                return;
        }
        for (size_t i = 0; i < img->n_layers; i++)
                p->layers[i].done = img->layers[i].size;
        p->phase = "unpack";
        unpack_next(p);
}

static const sh_reg_hooks reg_hooks = {
        .have = reg_have, .manifest = reg_manifest, .progress = reg_progress, .done = reg_done};

static pull *pull_start(sh_images *s, sh_image_ref *ref, const char *name, const char *key,
                        const sh_registry_auth *auth, sh_error **err)
{
        pull *p = calloc(1, sizeof(*p));

        if (!p) {
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        p->s = s;
        p->ref = *ref;
        memset(ref, 0, sizeof(*ref));
        memcpy(p->key, key, sizeof(p->key));
        p->phase = "manifest";
        p->name = strdup(name);
        SH_LIST_PREPEND(pulls, s->pulls, p);
        if (!p->name) {
                pull_free(p);
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        p->reg = sh_reg_pull_start(s->reg, &p->ref, auth, s->dirfd, s->cfg->image_max,
                                   sh_now_ms() + s->cfg->image_pull_timeout_ms, &reg_hooks, p, err);
        if (!p->reg) {
                pull_free(p);
                return NULL;
        }
        p->deadline = sh_loop_add_timer(s->loop, s->cfg->image_pull_timeout_ms, on_deadline, p);
        if (!p->deadline) {
                pull_free(p);
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        sh_log(SH_LOG_INFO, "image-pull", NULL, "pulling %s", name);
        return p;
}

/* ---- the API -------------------------------------------------------------------------- */

static void on_ready(sh_loop *l, sh_timer *t, void *data)
{
        sh_image_pull *w = data;
        sh_images *s = w->s;
        sh_image *img = w->img;

        w->t = NULL;
        SH_LIST_REMOVE(waiters, s->ready, w);
        w->img = NULL;
        w->done(img, NULL, w->data); /* the reference taken in sh_images_get: the callee's */
        free(w);
}

sh_image_pull *sh_images_get(sh_images *s, const char *refstr, const sh_registry_auth *auth,
                             sh_image_done_fn done, sh_image_progress_fn progress, void *data,
                             sh_error **err)
{
        sh_image_ref ref = {0};
        char reason[256], key[65];
        _cleanup_free_ char *name = NULL;
        sh_image_pull *w;
        sh_image *img;
        pull *p;

        if (sh_image_ref_parse(refstr, &ref, reason, sizeof(reason)) < 0) {
                sh_error_new(err, SH_E_INVALID, "bad image reference '%.300s': %s", refstr, reason);
                return NULL;
        }
        name = sh_image_ref_canonical(&ref);
        w = calloc(1, sizeof(*w));
        if (!name || !w) {
                free(w);
                sh_image_ref_done(&ref);
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        if (auth && auth->username && auth->password)
                key_private(s, name, auth, key);
        else
                key_of(name, key);
        w->s = s;
        w->done = done;
        w->progress = progress;
        w->data = data;
        img = find_image(s, key);
        if (img) {
                sh_image_ref_done(&ref);
                /* In memory only: a record written (and synced) at every create of a cached image
                 * would put a disk flush on the loop's hot path. The LRU order is saved when the
                 * store closes (sh_images_free); a crash keeps the pull-time order. */
                img->last_used = sh_now_wall_ms();
                img->used_unsaved = !img->private;
                w->img = sh_image_addref(img);
                w->t = sh_loop_add_timer(s->loop, 0, on_ready, w);
                if (!w->t) {
                        sh_image_unref(w->img);
                        free(w);
                        sh_error_make(err, ENOMEM, "out of memory");
                        return NULL;
                }
                SH_LIST_PREPEND(waiters, s->ready, w);
                return w;
        }
        if (!s->cfg->image_pull) {
                sh_image_ref_done(&ref);
                free(w);
                sh_error_new(
                        err, SH_E_INVALID,
                        "refused: pulls are disabled on this host (SANDBOX_HOST_IMAGE_PULL=off)");
                return NULL;
        }
        SH_LIST_FOREACH(pulls, p, s->pulls)
                if (strcmp(p->key, key) == 0)
                        break;
        if (!p && (p = pull_start(s, &ref, name, key, auth, err)))
                p->private = auth && auth->username && auth->password;
        sh_image_ref_done(&ref);
        if (!p) {
                free(w);
                return NULL;
        }
        w->p = p;
        SH_LIST_APPEND(waiters, p->waiters, w);
        return w;
}

void sh_image_pull_cancel(sh_image_pull *w)
{
        pull *p;

        if (!w)
                return;
        p = w->p;
        if (!p) {
                SH_LIST_REMOVE(waiters, w->s->ready, w);
                sh_loop_cancel_timer(w->s->loop, w->t);
                sh_image_unref(w->img);
                free(w);
                return;
        }
        SH_LIST_REMOVE(waiters, p->waiters, w);
        free(w);
        if (!p->waiters && !p->prepull) {
                sh_log(SH_LOG_INFO, "image-pull", NULL, "pull of %s cancelled: nobody waits",
                       p->name);
                pull_free(p);
        }
}

sh_image_progress sh_image_pull_progress(const sh_image_pull *w)
{
        if (!w->p)
                return (sh_image_progress){.phase = "done"};
        return progress_of(w->p);
}

bool sh_images_ready(const sh_images *s)
{
        return s->prepull_left == 0;
}

static void on_prepulled(sh_image *img, const sh_error *err, void *data)
{
        sh_image_unref(img);
}

static void prepull(sh_images *s)
{
        const char *list = s->cfg->prepull;

        while (list && *list) {
                const char *e = strchr(list, ',');
                size_t n = e ? (size_t)(e - list) : strlen(list);
                char *one = strndup(list, n);
                sh_error *err = NULL;
                sh_image_pull *w;

                list = e ? e + 1 : list + n;
                if (!one)
                        break;
                if (!*one) {
                        free(one);
                        continue;
                }
                w = sh_images_get(s, one, NULL, on_prepulled, NULL, NULL, &err);
                if (!w) {
                        sh_log(SH_LOG_WARN, "image-prepull", NULL, "cannot prepull %s: %s", one,
                               err ? err->msg : "out of memory");
                        sh_error_release(&err);
                } else if (w->p && !w->p->prepull) {
                        w->p->prepull = true;
                        s->prepull_left++;
                }
                free(one);
        }
}

/* tmp/ emptied (a crash's partial pulls), the directories made. */
static int prepare(sh_images *s, sh_error **err)
{
        static const char *const dirs[] = {"blobs",         "blobs/sha256", "layers",
                                           "layers/sha256", "images",       "tmp"};

        if (sh_fs_remove_tree(s->dirfd, "tmp", err) < 0)
                return sh_error_wrap(err, "emptying the image store's tmp/");
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
                if (mkdirat(s->dirfd, dirs[i], 0700) < 0 && errno != EEXIST)
                        return sh_error_make(err, errno, "making the image store's %s/", dirs[i]);
        return 0;
}

int sh_images_open(const sh_config *cfg, sh_loop *loop, const char *dir, const sh_cgroup *cgparent,
                   sh_images **ret, sh_error **err)
{
        sh_images *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return sh_error_make(err, ENOMEM, "out of memory");
        s->cfg = cfg;
        s->loop = loop;
        s->cgparent = cgparent;
        s->dirfd = -1;
        s->dir = strdup(dir);
        if (!s->dir) {
                free(s);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        r = sh_random_bytes(s->cred_key, sizeof(s->cred_key));
        if (r < 0) {
                free(s->dir);
                free(s);
                return sh_error_make(err, -r, "getrandom");
        }
        if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
                sh_error_make(err, errno, "making the image store %s", dir);
                goto fail;
        }
        s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (s->dirfd < 0) {
                sh_error_make(err, errno, "opening the image store %s", dir);
                goto fail;
        }
        if (fchmod(s->dirfd, 0700) < 0) {
                sh_error_make(err, errno, "the image store %s", dir);
                goto fail;
        }
        if (prepare(s, err) < 0)
                goto fail;
        if (sh_registry_new(loop, cfg, &s->reg, err) < 0)
                goto fail;
        load_records(s);
        prepull(s);
        *ret = s;
        return 0;
fail:
        sh_images_free(s);
        return -1;
}

void sh_images_free(sh_images *s)
{
        sh_image *img;

        if (!s)
                return;
        while (s->ready)
                sh_image_pull_cancel(s->ready);
        while (s->pulls) {
                pull *p = s->pulls;

                while (p->waiters) {
                        sh_image_pull *w = p->waiters;

                        SH_LIST_REMOVE(waiters, p->waiters, w);
                        free(w);
                }
                pull_free(p);
        }
        sh_layer_unpacker_free(s->unpacker);
        sh_registry_free(s->reg);
        while ((img = s->images)) {
                if (img->used_unsaved)
                        (void)write_record(s, img); /* best effort: the LRU order after a restart */
                SH_LIST_REMOVE(images, s->images, img);
                img->s = NULL;
                sh_image_unref(img);
        }
        if (s->dirfd >= 0)
                close(s->dirfd);
        free(s->dir);
        sodium_memzero(s->cred_key, sizeof(s->cred_key));
        free(s);
}
