/* registry.c: the pull's downloads over the distribution API v2, one request at a time on the
 * loop: the manifest by tag or digest (an index: the host platform's manifest), the config, the
 * layer blobs; each verified (sha256) as it streams into the store's tmp/ and renamed into
 * blobs/ only then. Auth on a 401 (Bearer token or Basic), mirrors first, retries with backoff
 * on 429/5xx/connection errors, then the next endpoint. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry.h"
#include "sh/base64.h"
#include "sh/fetch.h"
#include "sh/log.h"
#include "sh/random.h"
#include "sh/util.h"

#define AUTH_FILE_MAX      (1u << 20)
#define TOKEN_BODY_MAX     (128u << 10)
#define PROGRESS_PERIOD_MS 250u

#define ACCEPT_MANIFESTS                                                                           \
        "Accept: application/vnd.oci.image.manifest.v1+json, "                                     \
        "application/vnd.oci.image.index.v1+json, "                                                \
        "application/vnd.docker.distribution.manifest.v2+json, "                                   \
        "application/vnd.docker.distribution.manifest.list.v2+json"

struct sh_registry {
        sh_loop *loop;
        const sh_config *cfg;
        sh_fetcher *fetcher;
        sh_fetch_ca *ca;
        char **insecure; /* NULL-terminated */
        sh_fetch_rule rule;
};

typedef enum { ST_MANIFEST, ST_CONFIG, ST_LAYER, ST_TOKEN } step;

struct sh_reg_pull {
        sh_registry *r;
        int storefd;
        char *domain, *path, *want; /* want: the tag or digest asked for the manifest */
        bool want_digest;           /* the manifest is asked by digest: checked */
        char **endpoints;
        size_t ep;
        char *user, *password; /* the pull's credentials or the file's; zeroed when freed */
        bool own_auth;         /* the caller's (then the file is never read) */
        char *authz;           /* "Authorization: ..." once the registry asked */
        bool authed;           /* the current request was sent with fresh auth */
        uint64_t max_bytes, deadline_ms;
        sh_reg_hooks hooks;
        void *data;

        step st, after_token;
        unsigned tries;
        sh_fetch *fetch;
        sh_timer *retry_timer, *progress_timer;
        int fd; /* the blob being written */
        char tmpname[48];
        size_t layer; /* ST_LAYER: the one being fetched */
        char last_error[SH_FETCH_REASON_MAX];
        sh_reg_image *img;
        bool index_seen;
};

void sh_strv_free(char **v)
{
        if (!v)
                return;
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}

static char **strv_add(char **v, size_t *n, const char *s, size_t len)
{
        char **nv;

        if (!v && *n)
                return NULL;
        nv = realloc(v, (*n + 2) * sizeof(*v));
        if (!nv) {
                sh_strv_free(v);
                return NULL;
        }
        nv[*n] = strndup(s, len);
        if (!nv[*n]) {
                nv[*n] = NULL;
                sh_strv_free(nv);
                return NULL;
        }
        nv[++*n] = NULL;
        return nv;
}

/* "a, b,c" into a NULL-terminated list of trimmed non-empty items. */
static char **split_list(const char *s)
{
        char **v = calloc(1, sizeof(*v));
        size_t n = 0;

        while (v && s && *s) {
                const char *e = strchr(s, ',');
                size_t len = e ? (size_t)(e - s) : strlen(s);
                const char *b = s;

                while (len && (*b == ' ' || *b == '\t'))
                        b++, len--;
                while (len && (b[len - 1] == ' ' || b[len - 1] == '\t'))
                        len--;
                if (len)
                        v = strv_add(v, &n, b, len);
                s = e ? e + 1 : s + strlen(s);
        }
        return v;
}

/* api_host ("host", "host:port", "[v6]:port") is in the insecure list: "host" matches any
 * port, "host:port" that port only. */
static bool insecure_listed(char *const *list, const char *api_host)
{
        const char *colon = api_host[0] == '[' ? strstr(api_host, "]:") : strrchr(api_host, ':');
        size_t hlen;

        if (colon && api_host[0] == '[')
                colon++;
        hlen = colon ? (size_t)(colon - api_host) : strlen(api_host);
        for (; list && *list; list++) {
                if (strcasecmp(*list, api_host) == 0)
                        return true;
                if (strlen(*list) == hlen && strncasecmp(*list, api_host, hlen) == 0)
                        return true;
        }
        return false;
}

char **sh_reg_endpoints(const char *domain, const char *api_host, const char *mirrors,
                        const char *insecure)
{
        char **list = split_list(mirrors), **ins = split_list(insecure);
        char **v = calloc(1, sizeof(*v)), *origin = NULL;
        size_t n = 0, dlen = strlen(domain);

        if (!list || !ins || !v)
                goto fail;
        for (char **m = list; *m && v; m++) {
                const char *eq = strchr(*m, '=');
                size_t ulen;

                if (!eq || (size_t)(eq - *m) != dlen || strncasecmp(*m, domain, dlen) != 0)
                        continue;
                ulen = strlen(eq + 1);
                while (ulen && eq[ulen] == '/')
                        ulen--;
                v = strv_add(v, &n, eq + 1, ulen);
        }
        if (!v)
                goto fail;
        if (asprintf(&origin, "%s://%s", insecure_listed(ins, api_host) ? "http" : "https",
                     api_host) < 0)
                goto fail;
        v = strv_add(v, &n, origin, strlen(origin));
        free(origin);
        sh_strv_free(list);
        sh_strv_free(ins);
        return v;
fail:
        sh_strv_free(list);
        sh_strv_free(ins);
        sh_strv_free(v);
        return NULL;
}

void sh_reg_error_text(const char *body, size_t len, char *buf, size_t n)
{
        cJSON *j = body && len ? sh_json_parse_exact(body, len) : NULL;
        const cJSON *errs = j ? cJSON_GetObjectItemCaseSensitive(j, "errors") : NULL;
        const cJSON *e = cJSON_IsArray(errs) ? cJSON_GetArrayItem(errs, 0) : NULL;
        const cJSON *code = e ? cJSON_GetObjectItemCaseSensitive(e, "code") : NULL;
        const cJSON *msg = e ? cJSON_GetObjectItemCaseSensitive(e, "message") : NULL;

        buf[0] = '\0';
        if (n && cJSON_IsString(code) && cJSON_IsString(msg))
                snprintf(buf, n, "%.64s: %.200s", code->valuestring, msg->valuestring);
        else if (n && cJSON_IsString(code))
                snprintf(buf, n, "%.64s", code->valuestring);
        cJSON_Delete(j);
        for (char *p = buf; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f)
                        *p = '?';
}

bool sh_reg_retryable(long status)
{
        return status == 0 || status == 408 || status == 429 || status >= 500;
}

int sh_registry_new(sh_loop *loop, const sh_config *cfg, sh_registry **ret, sh_error **err)
{
        sh_registry *r = calloc(1, sizeof(*r));

        if (!r)
                return sh_error_make(err, ENOMEM, "out of memory");
        r->loop = loop;
        r->cfg = cfg;
        r->insecure = split_list(cfg->insecure_registries);
        if (!r->insecure) {
                free(r);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        if (cfg->registry_ca && sh_fetch_ca_load(cfg->registry_ca, &r->ca, err) < 0) {
                sh_strv_free(r->insecure);
                free(r);
                return sh_error_wrap(err, "SANDBOX_HOST_REGISTRY_CA");
        }
        r->rule.http = SH_FETCH_HTTP_LISTED;
        r->rule.http_hosts = r->insecure;
        r->rule.ca = r->ca;
        r->rule.http_hint = "plain http goes only to the hosts of SANDBOX_HOST_INSECURE_REGISTRIES";
        if (sh_fetcher_new(loop, false, r->rule.http_hint, &r->fetcher, err) < 0) {
                sh_fetch_ca_free(r->ca);
                sh_strv_free(r->insecure);
                free(r);
                return -1;
        }
        *ret = r;
        return 0;
}

void sh_registry_free(sh_registry *r)
{
        if (!r)
                return;
        sh_fetcher_free(r->fetcher, true);
        sh_fetch_ca_free(r->ca);
        sh_strv_free(r->insecure);
        free(r);
}

void sh_reg_image_free(sh_reg_image *img)
{
        if (!img)
                return;
        sh_oci_config_done(&img->config);
        for (size_t i = 0; i < img->n_layers; i++) {
                free(img->layers[i].media_type);
                free(img->layers[i].os);
                free(img->layers[i].arch);
                free(img->layers[i].variant);
        }
        free(img->layers);
        free(img);
}

static void secret_free(char *s)
{
        if (s) {
                sodium_memzero(s, strlen(s));
                free(s);
        }
}

static void drop_tmp(sh_reg_pull *p)
{
        if (p->fd >= 0)
                close(p->fd);
        p->fd = -1;
        if (p->tmpname[0])
                (void)unlinkat(p->storefd, p->tmpname, 0);
        p->tmpname[0] = '\0';
}

static void pull_free(sh_reg_pull *p)
{
        sh_fetch_cancel(p->fetch);
        sh_loop_cancel_timer(p->r->loop, p->retry_timer);
        sh_loop_cancel_timer(p->r->loop, p->progress_timer);
        drop_tmp(p);
        free(p->domain);
        free(p->path);
        free(p->want);
        sh_strv_free(p->endpoints);
        secret_free(p->user);
        secret_free(p->password);
        secret_free(p->authz);
        sh_reg_image_free(p->img);
        free(p);
}

void sh_reg_pull_cancel(sh_reg_pull *p)
{
        if (p)
                pull_free(p);
}

/* The end: done told once, the pull freed after. */
static void succeed(sh_reg_pull *p)
{
        sh_reg_image *img = TAKE_PTR(p->img);

        p->hooks.done(p->data, NULL, img);
        pull_free(p);
}

static void finish(sh_reg_pull *p, sh_error_kind kind, const char *fmt, ...) _printf_(3, 4);
static void finish(sh_reg_pull *p, sh_error_kind kind, const char *fmt, ...)
{
        sh_error e = {.kind = kind};
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        e.msg = msg;
        p->hooks.done(p->data, &e, NULL);
        pull_free(p);
}

static const char *what_of(const sh_reg_pull *p)
{
        switch (p->st) {
        case ST_MANIFEST:
                return "manifest";
        case ST_CONFIG:
                return "config";
        case ST_LAYER:
                return "layer";
        case ST_TOKEN:
                return "token";
        }
        return "blob";
}

/* ---- credentials ---------------------------------------------------------------------- */

/* The host part of an endpoint URL ("https://h:p/x" -> "h:p"), for the credentials file. */
static char *endpoint_host(const char *url)
{
        const char *s = strstr(url, "://");
        size_t n;

        s = s ? s + 3 : url;
        n = strcspn(s, "/");
        return strndup(s, n);
}

/* The file's credentials for this endpoint (read at each pull: a mounted secret may change). */
static void load_file_credentials(sh_reg_pull *p)
{
        const char *file = p->r->cfg->registry_auth;
        _cleanup_close_ int fd = -1;
        struct stat st;
        char *buf = NULL, reason[256], *host;
        size_t off = 0;
        bool is_origin = !p->endpoints[p->ep + 1];

        secret_free(p->user);
        secret_free(p->password);
        p->user = p->password = NULL;
        if (!file)
                return;
        fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            (uint64_t)st.st_size > AUTH_FILE_MAX) {
                sh_log(SH_LOG_WARN, "image-auth", NULL,
                       "cannot read the credentials file SANDBOX_HOST_REGISTRY_AUTH (%s): pulling "
                       "without credentials",
                       fd < 0 ? strerror(errno) : "not a regular file of at most 1 MiB");
                return;
        }
        buf = malloc((size_t)st.st_size + 1);
        if (!buf)
                return;
        while (off < (size_t)st.st_size) {
                ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                off += (size_t)n;
        }
        buf[off] = '\0';
        host = is_origin ? strdup(p->domain) : endpoint_host(p->endpoints[p->ep]);
        if (host && sh_docker_config_lookup(buf, off, host, &p->user, &p->password, reason,
                                            sizeof(reason)) == -EINVAL)
                sh_log(SH_LOG_WARN, "image-auth", NULL,
                       "the credentials file SANDBOX_HOST_REGISTRY_AUTH is malformed: %s", reason);
        free(host);
        sodium_memzero(buf, off);
        free(buf);
}

/* "Authorization: Basic base64(user:pass)", or NULL without credentials or memory. */
static char *basic_header(const sh_reg_pull *p)
{
        char *plain = NULL, *out;
        size_t n;

        if (!p->user || !p->password || asprintf(&plain, "%s:%s", p->user, p->password) < 0)
                return NULL;
        n = strlen(plain);
        out = malloc(strlen("Authorization: Basic ") + sh_base64_len(n) + 1);
        if (out) {
                size_t k = strlen("Authorization: Basic ");

                memcpy(out, "Authorization: Basic ", k);
                k += sh_base64_encode(out + k, plain, n);
                out[k] = '\0';
        }
        sodium_memzero(plain, n);
        free(plain);
        return out;
}

/* ---- requests ------------------------------------------------------------------------- */

static void send_request(sh_reg_pull *p);
static void on_answer(sh_fetch *x, const sh_fetch_result *res, void *data);

static void on_progress_timer(sh_loop *l, sh_timer *t, void *data)
{
        sh_reg_pull *p = data;

        p->progress_timer = NULL;
        if (p->st != ST_LAYER || !p->fetch)
                return;
        p->hooks.progress(p->data, "layers", p->layer, sh_fetch_received(p->fetch));
        p->progress_timer = sh_loop_add_timer(l, PROGRESS_PERIOD_MS, on_progress_timer, p);
}

/* A fresh temporary file for a blob under tmp/. */
static int open_tmp(sh_reg_pull *p)
{
        char hex[17];

        drop_tmp(p);
        if (sh_random_hex(hex, 8) < 0)
                return -EIO;
        snprintf(p->tmpname, sizeof(p->tmpname), "tmp/blob-%s", hex);
        p->fd = openat(p->storefd, p->tmpname, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (p->fd < 0) {
                int r = -errno;

                p->tmpname[0] = '\0';
                return r;
        }
        return 0;
}

static const sh_oci_descriptor *cur_blob(const sh_reg_pull *p)
{
        return p->st == ST_LAYER ? &p->img->layers[p->layer] : NULL;
}

static void send_request(sh_reg_pull *p)
{
        const char *headers[3] = {NULL};
        char *url = NULL;
        sh_error *err = NULL;
        uint64_t now = sh_now_ms();
        size_t h = 0;
        sh_fetch_opts o = {.fd = -1,
                           .raw = true,
                           .follow = true,
                           .low_speed_bytes = 1,
                           .low_speed_ms = SH_IMAGE_IDLE_MS};
        const char *what = what_of(p);
        char peer[300];

        if (now >= p->deadline_ms) {
                finish(p, SH_E_UNAVAILABLE, "timed out pulling %s/%s from %s", p->domain, p->path,
                       p->domain);
                return;
        }
        if (p->st == ST_MANIFEST) {
                headers[h++] = ACCEPT_MANIFESTS;
                if (asprintf(&url, "%s/v2/%s/manifests/%s", p->endpoints[p->ep], p->path, p->want) <
                    0)
                        url = NULL;
                o.max = SH_OCI_DOC_MAX;
        } else if (p->st == ST_CONFIG) {
                if (asprintf(&url, "%s/v2/%s/blobs/%s", p->endpoints[p->ep], p->path,
                             p->img->config_digest) < 0)
                        url = NULL;
                o.max = SH_OCI_CONFIG_MAX;
        } else {
                const sh_oci_descriptor *d = cur_blob(p);
                int r = open_tmp(p);

                if (r < 0) {
                        finish(p, SH_E_INTERNAL, "this host cannot store the layer %s: %s",
                               d->digest, strerror(-r));
                        return;
                }
                if (asprintf(&url, "%s/v2/%s/blobs/%s", p->endpoints[p->ep], p->path, d->digest) <
                    0)
                        url = NULL;
                o.max = d->size;
                o.fd = p->fd;
        }
        if (!url) {
                finish(p, SH_E_INTERNAL, "out of memory");
                return;
        }
        if (p->authz)
                headers[h++] = p->authz;
        snprintf(peer, sizeof(peer), "the registry %.200s", p->domain);
        o.url = url;
        o.what = what;
        o.peer = peer;
        o.headers = headers;
        o.timeout_ms = p->deadline_ms - now;
        o.rule = &p->r->rule;
        p->fetch = sh_fetch_start_opts(p->r->fetcher, &o, on_answer, p, &err);
        free(url);
        if (!p->fetch) {
                finish(p, SH_E_INVALID, "refused: %s", err ? err->msg : "cannot start a fetch");
                sh_error_release(&err);
                return;
        }
        if (p->st == ST_LAYER && !p->progress_timer)
                p->progress_timer =
                        sh_loop_add_timer(p->r->loop, PROGRESS_PERIOD_MS, on_progress_timer, p);
}

static void on_retry_timer(sh_loop *l, sh_timer *t, void *data)
{
        sh_reg_pull *p = data;

        p->retry_timer = NULL;
        send_request(p);
}

/* Another try of the same request (backoff), else the next endpoint, else unavailable. */
static void retry(sh_reg_pull *p, const char *why)
{
        snprintf(p->last_error, sizeof(p->last_error), "%s", why);
        if (p->tries < SH_IMAGE_RETRIES) {
                uint64_t ms = (uint64_t)SH_IMAGE_RETRY_BASE_MS << p->tries;

                p->tries++;
                if (sh_now_ms() + ms < p->deadline_ms) {
                        p->retry_timer = sh_loop_add_timer(p->r->loop, ms, on_retry_timer, p);
                        if (p->retry_timer)
                                return;
                }
        }
        if (p->endpoints[p->ep + 1]) {
                sh_log(SH_LOG_WARN, "image-pull", NULL, "%s/%s: %s: %s; trying %s", p->domain,
                       p->path, p->endpoints[p->ep], why, p->endpoints[p->ep + 1]);
                p->ep++;
                p->tries = 0;
                secret_free(p->authz);
                p->authz = NULL;
                p->authed = false;
                if (!p->own_auth)
                        load_file_credentials(p);
                send_request(p);
                return;
        }
        finish(p, SH_E_UNAVAILABLE, "unavailable: %s", why);
}

/* ---- auth ----------------------------------------------------------------------------- */

static void on_token(sh_fetch *x, const sh_fetch_result *res, void *data);

/* A 401 with its challenge: Basic answered with the credentials, Bearer with a token. */
static void authenticate(sh_reg_pull *p, const char *challenge, const char *regmsg)
{
        sh_auth_challenge c = {0};
        char reason[256];

        if (!challenge || sh_auth_challenge_parse(challenge, &c, reason, sizeof(reason)) < 0) {
                finish(p, SH_E_INVALID, "unauthorized: %s answered 401 for %s/%s%s%s", p->domain,
                       p->domain, p->path, regmsg[0] ? " " : "", regmsg);
                return;
        }
        secret_free(p->authz);
        p->authz = NULL;
        p->authed = true;
        if (c.scheme == SH_AUTH_BASIC) {
                p->authz = basic_header(p);
                sh_auth_challenge_done(&c);
                if (!p->authz) {
                        finish(p, SH_E_INVALID,
                               "unauthorized: %s asks for credentials for %s/%s and none were "
                               "given",
                               p->domain, p->domain, p->path);
                        return;
                }
                send_request(p);
                return;
        }
        if (c.scheme == SH_AUTH_BEARER && c.realm) {
                char scope[600], *url, *basic = basic_header(p);
                const char *kv[] = {"service", c.service, "scope", NULL, NULL};
                const char *headers[2] = {basic, NULL};
                sh_error *err = NULL;
                sh_fetch_opts o = {.fd = -1,
                                   .raw = true,
                                   .follow = true,
                                   .max = TOKEN_BODY_MAX,
                                   .what = "token",
                                   .peer = "the token service",
                                   .low_speed_bytes = 1,
                                   .low_speed_ms = SH_IMAGE_IDLE_MS};

                snprintf(scope, sizeof(scope), "repository:%s:pull", p->path);
                kv[3] = c.scope ? c.scope : scope;
                url = sh_url_with_query(c.realm, kv);
                sh_auth_challenge_done(&c);
                if (!url) {
                        secret_free(basic);
                        finish(p, SH_E_INVALID, "refused: the token realm of %s is not a URL",
                               p->domain);
                        return;
                }
                o.url = url;
                o.headers = headers;
                o.timeout_ms = p->deadline_ms > sh_now_ms() ? p->deadline_ms - sh_now_ms() : 1;
                o.rule = &p->r->rule;
                p->after_token = p->st;
                p->st = ST_TOKEN;
                p->fetch = sh_fetch_start_opts(p->r->fetcher, &o, on_token, p, &err);
                free(url);
                secret_free(basic);
                if (!p->fetch) {
                        finish(p, SH_E_INVALID, "refused: the token service of %s: %s", p->domain,
                               err ? err->msg : "cannot start a fetch");
                        sh_error_release(&err);
                }
                return;
        }
        sh_auth_challenge_done(&c);
        finish(p, SH_E_INVALID,
               "unauthorized: %s asks for an authentication this host does not "
               "speak",
               p->domain);
}

static void on_token(sh_fetch *x, const sh_fetch_result *res, void *data)
{
        sh_reg_pull *p = data;
        char reason[256], *token = NULL;

        p->fetch = NULL;
        p->st = p->after_token;
        if (res->kind == SH_FETCH_UNREACHABLE) {
                finish(p, SH_E_UNAVAILABLE, "unavailable: %s", res->reason);
                return;
        }
        if (res->kind != SH_FETCH_OK) {
                bool busy = res->kind == SH_FETCH_HTTP && sh_reg_retryable(res->status);

                finish(p, busy ? SH_E_UNAVAILABLE : SH_E_INVALID, "%s: %s",
                       busy ? "unavailable" : "unauthorized", res->reason);
                return;
        }
        if (sh_auth_token_parse(res->body, res->len, &token, reason, sizeof(reason)) < 0) {
                finish(p, SH_E_INVALID, "unauthorized: the token service of %s: %s", p->domain,
                       reason);
                return;
        }
        if (asprintf(&p->authz, "Authorization: Bearer %s", token) < 0)
                p->authz = NULL;
        secret_free(token);
        if (!p->authz) {
                finish(p, SH_E_INTERNAL, "out of memory");
                return;
        }
        send_request(p);
}

/* ---- the steps ------------------------------------------------------------------------ */

static void digest_of(const uint8_t sha[32], char out[SH_OCI_DIGEST_MAX])
{
        memcpy(out, "sha256:", 7);
        sh_hex_encode(sha, 32, out + 7);
}

/* `len` bytes of memory into blobs/sha256/<hex> (a manifest, a config): tmp, then rename. */
static int store_mem_blob(sh_reg_pull *p, const char *digest, const char *buf, size_t len)
{
        char dest[128];
        size_t off = 0;
        int r = open_tmp(p);

        if (r < 0)
                return r;
        while (off < len) {
                ssize_t n = write(p->fd, buf + off, len - off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = n < 0 ? -errno : -EIO;
                        drop_tmp(p);
                        return r;
                }
                off += (size_t)n;
        }
        snprintf(dest, sizeof(dest), "blobs/sha256/%s", digest + 7);
        if (fdatasync(p->fd) < 0 || renameat(p->storefd, p->tmpname, p->storefd, dest) < 0) {
                r = -errno;
                drop_tmp(p);
                return r;
        }
        p->tmpname[0] = '\0';
        drop_tmp(p);
        return 0;
}

static void next_layer(sh_reg_pull *p);

static void got_manifest(sh_reg_pull *p, const sh_fetch_result *res, sh_fetch *x)
{
        char digest[SH_OCI_DIGEST_MAX], reason[512];
        const char *ctype = sh_fetch_header(x, "Content-Type", 0);
        const char *said = sh_fetch_header(x, "Docker-Content-Digest", 0);
        sh_oci_doc doc = {0};
        uint64_t total = 0, config_size;
        int r;

        digest_of(res->sha256, digest);
        if (p->want_digest && strcmp(digest, p->want) != 0) {
                finish(p, SH_E_INVALID,
                       "digest mismatch: the manifest %s of %s/%s from %s hashes to %s", p->want,
                       p->domain, p->path, p->domain, digest);
                return;
        }
        /* the registry's own word for it, when it gives one, must be what arrived */
        if (said && sh_oci_digest_valid(said) && strcmp(said, digest) != 0) {
                finish(p, SH_E_INVALID,
                       "digest mismatch: the manifest of %s/%s from %s hashes to %s, not the %s "
                       "its Docker-Content-Digest says",
                       p->domain, p->path, p->domain, digest, said);
                return;
        }
        if (sh_oci_doc_parse(ctype, res->body, res->len, &doc, reason, sizeof(reason)) < 0) {
                finish(p, SH_E_INVALID, "refused: the manifest of %s/%s: %s", p->domain, p->path,
                       reason);
                return;
        }
        if (doc.kind == SH_OCI_INDEX) {
                const sh_oci_descriptor *d;
                const char *os, *arch, *variant;

                sh_oci_host_platform(&os, &arch, &variant);
                if (p->index_seen ||
                    sh_oci_index_pick(&doc, os, arch, variant, &d, reason, sizeof(reason)) < 0) {
                        finish(p, SH_E_INVALID, "manifest unknown: %s/%s: %s", p->domain, p->path,
                               p->index_seen ? "an index that names another index" : reason);
                        sh_oci_doc_done(&doc);
                        return;
                }
                p->index_seen = true;
                free(p->want);
                p->want = strdup(d->digest);
                p->want_digest = true;
                sh_oci_doc_done(&doc);
                if (!p->want) {
                        finish(p, SH_E_INTERNAL, "out of memory");
                        return;
                }
                p->tries = 0;
                p->authed = false;
                send_request(p);
                return;
        }
        p->img = calloc(1, sizeof(*p->img));
        if (!p->img) {
                sh_oci_doc_done(&doc);
                finish(p, SH_E_INTERNAL, "out of memory");
                return;
        }
        memcpy(p->img->manifest_digest, digest, sizeof(digest));
        memcpy(p->img->config_digest, doc.config.digest, sizeof(doc.config.digest));
        config_size = doc.config.size;
        total = doc.config.size;
        for (size_t i = 0; i < doc.n_items; i++)
                total += doc.items[i].size;
        p->img->layers = TAKE_PTR(doc.items);
        p->img->n_layers = doc.n_items;
        doc.n_items = 0;
        p->img->blob_bytes = total;
        sh_oci_doc_done(&doc);
        if (total > p->max_bytes) {
                finish(p, SH_E_INVALID,
                       "too large: %s/%s is %llu bytes of blobs, more than this host's limit of "
                       "%llu (SANDBOX_HOST_IMAGE_MAX)",
                       p->domain, p->path, (unsigned long long)total,
                       (unsigned long long)p->max_bytes);
                return;
        }
        if (config_size > SH_OCI_CONFIG_MAX) {
                finish(p, SH_E_INVALID, "too large: the config of %s/%s is %llu bytes", p->domain,
                       p->path, (unsigned long long)config_size);
                return;
        }
        r = store_mem_blob(p, digest, res->body, res->len);
        if (r == 0)
                r = p->hooks.manifest(p->data, p->img->layers, p->img->n_layers);
        if (r < 0) {
                finish(p, SH_E_INTERNAL, "this host cannot store the manifest: %s", strerror(-r));
                return;
        }
        p->st = ST_CONFIG;
        p->tries = 0;
        p->authed = false;
        p->hooks.progress(p->data, "config", 0, 0);
        send_request(p);
}

static void got_config(sh_reg_pull *p, const sh_fetch_result *res)
{
        char digest[SH_OCI_DIGEST_MAX], reason[512];
        int r;

        digest_of(res->sha256, digest);
        if (strcmp(digest, p->img->config_digest) != 0) {
                finish(p, SH_E_INVALID, "digest mismatch: the config %s of %s/%s hashes to %s",
                       p->img->config_digest, p->domain, p->path, digest);
                return;
        }
        if (sh_oci_config_parse(res->body, res->len, &p->img->config, reason, sizeof(reason)) < 0) {
                finish(p, SH_E_INVALID, "refused: the config of %s/%s: %s", p->domain, p->path,
                       reason);
                return;
        }
        r = store_mem_blob(p, digest, res->body, res->len);
        if (r < 0) {
                finish(p, SH_E_INTERNAL, "this host cannot store the config: %s", strerror(-r));
                return;
        }
        p->st = ST_LAYER;
        p->layer = 0;
        p->hooks.progress(p->data, "layers", 0, 0);
        next_layer(p);
}

/* The next layer the store does not have yet, or the end. */
static void next_layer(sh_reg_pull *p)
{
        while (p->layer < p->img->n_layers &&
               p->hooks.have(p->data, p->img->layers[p->layer].digest, true)) {
                p->hooks.progress(p->data, "layers", p->layer, p->img->layers[p->layer].size);
                p->layer++;
        }
        if (p->layer == p->img->n_layers) {
                succeed(p);
                return;
        }
        p->tries = 0;
        p->authed = false;
        send_request(p);
}

static void got_layer(sh_reg_pull *p, const sh_fetch_result *res)
{
        const sh_oci_descriptor *d = cur_blob(p);
        char digest[SH_OCI_DIGEST_MAX], dest[128];

        digest_of(res->sha256, digest);
        if (strcmp(digest, d->digest) != 0 || res->len != d->size) {
                finish(p, SH_E_INVALID,
                       "digest mismatch: the layer %s of %s/%s from %s is %zu bytes hashing to "
                       "%s (the manifest says %llu bytes)",
                       d->digest, p->domain, p->path, p->domain, res->len, digest,
                       (unsigned long long)d->size);
                return;
        }
        snprintf(dest, sizeof(dest), "blobs/sha256/%s", d->digest + 7);
        if (fdatasync(p->fd) < 0 || renameat(p->storefd, p->tmpname, p->storefd, dest) < 0) {
                finish(p, SH_E_INTERNAL, "this host cannot store the layer %s: %s", d->digest,
                       strerror(errno));
                return;
        }
        p->tmpname[0] = '\0';
        drop_tmp(p);
        p->hooks.progress(p->data, "layers", p->layer, d->size);
        p->layer++;
        next_layer(p);
}

static void on_answer(sh_fetch *x, const sh_fetch_result *res, void *data)
{
        sh_reg_pull *p = data;
        char regmsg[300], why[SH_FETCH_REASON_MAX + 320];

        p->fetch = NULL;
        if (res->kind == SH_FETCH_OK) {
                if (p->st == ST_MANIFEST)
                        got_manifest(p, res, x);
                else if (p->st == ST_CONFIG)
                        got_config(p, res);
                else
                        got_layer(p, res);
                return;
        }
        if (res->kind == SH_FETCH_UNREACHABLE) {
                if (res->timed_out && sh_now_ms() >= p->deadline_ms) {
                        finish(p, SH_E_UNAVAILABLE, "timed out: %s", res->reason);
                        return;
                }
                retry(p, res->reason);
                return;
        }
        if (res->kind == SH_FETCH_REFUSED) {
                finish(p, SH_E_INVALID, "%s%s",
                       res->too_big ? "too large: " : "refused: ", res->reason);
                return;
        }
        /* SH_FETCH_HTTP: the registry's answer, with its own words */
        sh_reg_error_text(res->body, res->len, regmsg, sizeof(regmsg));
        snprintf(why, sizeof(why), "%s%s%s%s", res->reason, regmsg[0] ? " (" : "", regmsg,
                 regmsg[0] ? ")" : "");
        if (res->status == 401 && !p->authed) {
                authenticate(p, sh_fetch_header(x, "WWW-Authenticate", 0), regmsg);
                return;
        }
        if (sh_reg_retryable(res->status)) {
                retry(p, why);
                return;
        }
        if (res->status == 404 && p->endpoints[p->ep + 1]) {
                retry(p, why); /* a mirror that lacks it: the next endpoint */
                return;
        }
        if (res->status == 401 || res->status == 403)
                finish(p, SH_E_INVALID, "unauthorized: %s", why);
        else if (res->status == 404)
                finish(p, SH_E_INVALID, "%s unknown: %s",
                       p->st == ST_MANIFEST ? "manifest" : "blob", why);
        else
                finish(p, SH_E_INVALID, "refused: %s", why);
}

sh_reg_pull *sh_reg_pull_start(sh_registry *r, const sh_image_ref *ref,
                               const sh_registry_auth *auth, int storefd, uint64_t max_bytes,
                               uint64_t deadline_ms, const sh_reg_hooks *hooks, void *data,
                               sh_error **err)
{
        sh_reg_pull *p = calloc(1, sizeof(*p));

        if (!p) {
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        p->r = r;
        p->fd = -1;
        p->storefd = storefd;
        p->max_bytes = max_bytes;
        p->deadline_ms = deadline_ms;
        p->hooks = *hooks;
        p->data = data;
        p->st = ST_MANIFEST;
        p->domain = strdup(ref->domain);
        p->path = strdup(ref->path);
        p->want = strdup(ref->digest ? ref->digest : ref->tag);
        p->want_digest = ref->digest != NULL;
        p->endpoints = sh_reg_endpoints(ref->domain, sh_image_ref_api_host(ref),
                                        r->cfg->registry_mirrors, r->cfg->insecure_registries);
        if (!p->domain || !p->path || !p->want || !p->endpoints) {
                pull_free(p);
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        if (auth && auth->username && auth->password) {
                p->own_auth = true;
                p->user = strdup(auth->username);
                p->password = strdup(auth->password);
                if (!p->user || !p->password) {
                        pull_free(p);
                        sh_error_make(err, ENOMEM, "out of memory");
                        return NULL;
                }
        } else {
                load_file_credentials(p);
        }
        /* the first request from the next turn: done never runs before this returns */
        p->retry_timer = sh_loop_add_timer(r->loop, 0, on_retry_timer, p);
        if (!p->retry_timer) {
                pull_free(p);
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        return p;
}
