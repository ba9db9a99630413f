/* resolve.c: POST /tools/resolve per tool: fetch, verify, install, stale-fallback cache. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/list.h"
#include "sh/log.h"
#include "sh/tools.h"
#include "sh/util.h"

#define KEYS_FILE_MAX  (64u << 10)
#define CACHE_FILE_MAX (SH_TOOLS_MANIFEST_MAX + 16384u)
/* Ends the refusal of a plain-http tool URL: what would allow it. */
#define TOOLS_HTTP_HINT                                                                            \
        "without trusted publisher keys (SANDBOX_HOST_TOOL_KEYS) this host fetches tools over "    \
        "https only (SANDBOX_HOST_TOOL_INSECURE_HTTP=on allows plain http)"

typedef struct job job;
typedef struct install install;

struct sh_tools {
        const sh_config *cfg;
        sh_loop *loop;
        sh_cgroup_root *cgroot; /* the manager's: the store's cgroup goes below it */
        bool opened;            /* fetcher, store and keys are open (tools_open) */
        sh_fetcher *fetcher;
        sh_store *store;
        bool keys_on; /* a manifest must carry a valid signature */
        char keys_error
                [SH_TOOLS_REASON_MAX]; /* non-empty: the key setting is unusable: refuse all */
        sh_tool_keys keys;
        install *installs; /* bundles being fetched or unpacked, one per sha */
        unsigned cache_counter;
};

/* One bundle on its way into the store, shared by every tool (of any request) naming its sha:
 * two resolves of the same bundle at once fetch and unpack it once. */
struct install {
        sh_tools *t;
        char sha[65];
        char *url;
        int fd;
        sh_fetch *fetch;
        sh_unpack *unpack;
        job *waiters;
        SH_LIST_FIELDS(install, installs);
};

struct job {
        sh_resolve *res;
        const char *name; /* borrowed from the request's copy */
        char *url, *sig_url;
        sh_fetch *mf, *sf;
        bool m_done, s_done;
        char *mbody, *sbody;
        size_t mlen, slen;
        sh_manifest m;
        char *bundle_url;
        install *inst;
        SH_LIST_FIELDS(job, waiters); /* on inst's */
        bool settled;
        cJSON *result; /* success (fresh or stale); NULL: refused with `reason` */
        char reason[SH_TOOLS_REASON_MAX];
};

struct sh_resolve {
        sh_tools *t;
        job *jobs;
        char **names;
        size_t n, pending;
        sh_resolve_done_fn done;
        void *data;
};

/* ---- the stale-fallback cache: {root}/tools/.cache/<sha256(url)>.json ---------------- */

static void cache_name(const char *url, char out[70])
{
        uint8_t h[32];

        crypto_hash_sha256(h, (const unsigned char *)url, strlen(url));
        sodium_bin2hex(out, 65, h, sizeof(h));
        strcat(out, ".json");
}

/* Atomic replace (write a new file, fsync, rename over): a crash leaves the old or the new
 * result, never half of one. Best effort: a failed write only costs a future stale fallback. */
static void cache_store(sh_tools *t, const char *url, const sh_manifest *m)
{
        int dfd = sh_store_cache_fd(t->store);
        _cleanup_close_ int fd = -1;
        char file[70], tmp[96];
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();
        _cleanup_free_ char *text = NULL;
        size_t len, off = 0;

        cache_name(url, file);
        snprintf(tmp, sizeof(tmp), ".tmp-%u-%s", ++t->cache_counter, file);
        if (!o || !cJSON_AddStringToObject(o, "url", url) ||
            !cJSON_AddStringToObject(o, "name", m->name) ||
            !cJSON_AddStringToObject(o, "version", m->version) ||
            !cJSON_AddStringToObject(o, "sha", m->sha256) ||
            !cJSON_AddItemToObject(o, "commands", cJSON_Duplicate(m->commands, true)) ||
            !(text = cJSON_PrintUnformatted(o)))
                return;
        len = strlen(text);
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return;
        while (off < len) {
                ssize_t w = write(fd, text + off, len - off);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        break;
                off += (size_t)w;
        }
        if (off != len || fsync(fd) < 0 || close(TAKE_FD(fd)) < 0 ||
            renameat(dfd, tmp, dfd, file) < 0) {
                (void)unlinkat(dfd, tmp, 0);
                log_debug("tools-cache", NULL, "cannot store the result for %s: %s", url,
                          strerror(errno));
        }
}

static bool is_sha(const char *s)
{
        size_t i;

        for (i = 0; i < 64; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return s[64] == '\0';
}

/* The last good result for `url` as a response entry with stale: true, or NULL. */
static cJSON *cache_load(sh_tools *t, const char *url)
{
        int dfd = sh_store_cache_fd(t->store);
        _cleanup_close_ int fd = -1;
        char file[70];
        struct stat st;
        _cleanup_free_ char *buf = NULL;
        _cleanup_cjson_ cJSON *o = NULL, *out = NULL;
        cJSON *u, *sha, *version, *commands;
        ssize_t n;

        cache_name(url, file);
        fd = openat(dfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
            (uint64_t)st.st_size > CACHE_FILE_MAX || !(buf = malloc((size_t)st.st_size + 1)))
                return NULL;
        n = pread(fd, buf, (size_t)st.st_size, 0);
        if (n != (ssize_t)st.st_size)
                return NULL;
        o = cJSON_ParseWithLength(buf, (size_t)n);
        u = cJSON_GetObjectItemCaseSensitive(o, "url");
        sha = cJSON_GetObjectItemCaseSensitive(o, "sha");
        version = cJSON_GetObjectItemCaseSensitive(o, "version");
        commands = cJSON_GetObjectItemCaseSensitive(o, "commands");
        /* The file name is a hash of the URL: check it really is this URL's entry, and that
         * its bundle is still in the store (the result is useless without it). */
        if (!cJSON_IsString(u) || strcmp(u->valuestring, url) != 0 || !cJSON_IsString(sha) ||
            !is_sha(sha->valuestring) || !cJSON_IsString(version) || !cJSON_IsArray(commands) ||
            !sh_store_has(t->store, sha->valuestring))
                return NULL;
        out = cJSON_CreateObject();
        if (!out || !cJSON_AddStringToObject(out, "sha", sha->valuestring) ||
            !cJSON_AddStringToObject(out, "version", version->valuestring) ||
            !cJSON_AddBoolToObject(out, "stale", true) ||
            !cJSON_AddItemToObject(out, "commands", cJSON_DetachItemViaPointer(o, commands)))
                return NULL;
        return TAKE_PTR(out);
}

/* ---- settling one tool -------------------------------------------------------------- */

static void resolve_finish(sh_resolve *res);

static void install_unwait(job *j)
{
        install *in = j->inst;

        if (!in)
                return;
        SH_LIST_REMOVE(waiters, in->waiters, j);
        j->inst = NULL;
}

static void job_stop(job *j)
{
        sh_fetch_cancel(j->mf);
        sh_fetch_cancel(j->sf);
        j->mf = j->sf = NULL;
        install_unwait(j);
}

/* The one place a tool's outcome is decided. `unreachable`: the store could not be reached,
 * so the last good result stands in (stale); anything else refused is refused for good. */
static void settle(job *j, cJSON *result, bool unreachable, const char *fmt, ...) _printf_(4, 5);
static void settle(job *j, cJSON *result, bool unreachable, const char *fmt, ...)
{
        sh_resolve *res = j->res;

        if (j->settled) {
                cJSON_Delete(result);
                return;
        }
        job_stop(j);
        j->settled = true;
        if (!result) {
                va_list ap;

                va_start(ap, fmt);
                vsnprintf(j->reason, sizeof(j->reason), fmt, ap);
                va_end(ap);
        }
        if (!result && unreachable) {
                result = cache_load(res->t, j->url);
                if (!result) {
                        size_t n = strlen(j->reason);

                        snprintf(j->reason + n, sizeof(j->reason) - n,
                                 " (and no earlier successful resolve of this manifest URL to "
                                 "fall back on)");
                }
        }
        if (!result && !j->reason[0])
                snprintf(j->reason, sizeof(j->reason), "this host is out of memory");
        j->result = result;
        if (--res->pending == 0)
                resolve_finish(res);
}

static void succeed(job *j)
{
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddStringToObject(o, "sha", j->m.sha256) ||
            !cJSON_AddStringToObject(o, "version", j->m.version) ||
            !cJSON_AddBoolToObject(o, "stale", false) ||
            !cJSON_AddItemToObject(o, "commands", cJSON_Duplicate(j->m.commands, true))) {
                cJSON_Delete(o);
                settle(j, NULL, false, "this host is out of memory");
                return;
        }
        cache_store(j->res->t, j->url, &j->m);
        settle(j, o, false, "%s", "");
}

/* ---- bundles ------------------------------------------------------------------------ */

static void install_free(install *in)
{
        sh_tools *t = in->t;

        sh_fetch_cancel(in->fetch);
        sh_unpack_forget(in->unpack);
        sh_close(in->fd);
        free(in->url);
        SH_LIST_REMOVE(installs, t->installs, in);
        free(in);
}

/* Pop each waiter before settling it: settling may finish (and free) its whole request. */
static void install_done(install *in, bool ok, bool unreachable, const char *reason)
{
        job *j;

        while ((j = in->waiters)) {
                install_unwait(j);
                if (ok)
                        succeed(j);
                else
                        settle(j, NULL, unreachable, "%s", reason);
        }
        install_free(in);
}

static void on_unpacked(bool ok, const char *reason, void *data)
{
        install *in = data;

        in->unpack = NULL;
        install_done(in, ok, false, reason);
}

static void on_bundle(sh_fetch *f, const sh_fetch_result *r, void *data)
{
        install *in = data;
        char hex[65], reason[SH_TOOLS_REASON_MAX];
        sh_error *err = NULL;

        in->fetch = NULL;
        if (r->kind != SH_FETCH_OK) {
                install_done(in, false, r->kind == SH_FETCH_UNREACHABLE, r->reason);
                return;
        }
        sodium_bin2hex(hex, sizeof(hex), r->sha256, sizeof(r->sha256));
        if (sodium_memcmp(hex, in->sha, 64) != 0) {
                snprintf(reason, sizeof(reason),
                         "bundle checksum mismatch: the manifest says sha256 %s, the bundle "
                         "downloaded has %s (republish the manifest with the right sha256)",
                         in->sha, hex);
                install_done(in, false, false, reason);
                return;
        }
        /* The child unpacks these very bytes through the same open file: no path in between
         * that anyone could swap. */
        in->unpack = sh_unpack_start(in->t->store, in->fd, in->sha, on_unpacked, in, &err);
        if (!in->unpack) {
                snprintf(reason, sizeof(reason), "this host could not unpack the bundle: %s",
                         err && err->msg ? err->msg : "unknown error");
                sh_error_release(&err);
                install_done(in, false, false, reason);
        }
}

static void install_join(job *j)
{
        sh_tools *t = j->res->t;
        install *in;
        sh_error *err = NULL;
        int fd;

        SH_LIST_FOREACH(installs, in, t->installs) {
                if (strcmp(in->sha, j->m.sha256) == 0)
                        break;
        }
        if (!in) {
                fd = sh_store_tmpfile(t->store);
                if (fd < 0) {
                        settle(j, NULL, false, "this host cannot store the bundle: %s",
                               strerror(-fd));
                        return;
                }
                in = calloc(1, sizeof(*in));
                if (!in || !(in->url = strdup(j->bundle_url))) {
                        free(in);
                        close(fd);
                        settle(j, NULL, false, "this host is out of memory");
                        return;
                }
                in->t = t;
                in->fd = fd;
                snprintf(in->sha, sizeof(in->sha), "%s", j->m.sha256);
                in->fetch = sh_fetch_start(t->fetcher, in->url, "bundle", SH_TOOLS_BUNDLE_MAX, fd,
                                           on_bundle, in, &err);
                if (!in->fetch) {
                        close(fd);
                        free(in->url);
                        free(in);
                        settle(j, NULL, false, "this host cannot fetch the bundle: %s",
                               err && err->msg ? err->msg : "unknown error");
                        sh_error_release(&err);
                        return;
                }
                SH_LIST_PREPEND(installs, t->installs, in);
        }
        j->inst = in;
        SH_LIST_PREPEND(waiters, in->waiters, j);
}

/* ---- manifests ---------------------------------------------------------------------- */

static void manifest_ready(job *j)
{
        sh_tools *t = j->res->t;
        char reason[SH_TOOLS_REASON_MAX];

        if (!j->m_done || (t->keys_on && !j->s_done) || j->settled)
                return;
        /* The signature covers the exact manifest bytes, and so the bundle's sha256 in them. */
        if (t->keys_on && !sh_tool_sig_verify(&t->keys, j->mbody, j->mlen, j->sbody, j->slen)) {
                settle(j, NULL, false,
                       "manifest signature does not verify against any of this host's trusted "
                       "publisher keys (sign the exact manifest bytes with ed25519 and publish "
                       "the base64 signature at %s)",
                       j->sig_url);
                return;
        }
        if (sh_manifest_parse(j->mbody, j->mlen, &j->m, reason, sizeof(reason)) < 0) {
                settle(j, NULL, false, "%s", reason);
                return;
        }
        j->bundle_url = sh_url_resolve(j->url, j->m.bundle_url);
        if (!j->bundle_url || strlen(j->bundle_url) > SH_TOOLS_URL_MAX) {
                settle(j, NULL, false, "bad manifest: 'bundle.url' is not a valid URL");
                return;
        }
        /* Content-addressed: a tree named by this sha was verified when it was installed. */
        if (sh_store_has(t->store, j->m.sha256)) {
                succeed(j);
                return;
        }
        install_join(j);
}

static void on_manifest(sh_fetch *f, const sh_fetch_result *r, void *data)
{
        job *j = data;

        j->mf = NULL;
        if (r->kind != SH_FETCH_OK) {
                settle(j, NULL, r->kind == SH_FETCH_UNREACHABLE, "%s", r->reason);
                return;
        }
        j->mbody = sh_memdup0(r->body, r->len);
        j->mlen = r->len;
        if (!j->mbody) {
                settle(j, NULL, false, "this host is out of memory");
                return;
        }
        j->m_done = true;
        manifest_ready(j);
}

static void on_signature(sh_fetch *f, const sh_fetch_result *r, void *data)
{
        job *j = data;

        j->sf = NULL;
        if (r->kind != SH_FETCH_OK) {
                settle(j, NULL, r->kind == SH_FETCH_UNREACHABLE,
                       "this host requires signed manifests; fetching the signature %s: %s",
                       j->sig_url, r->reason);
                return;
        }
        j->sbody = sh_memdup0(r->body, r->len);
        j->slen = r->len;
        if (!j->sbody) {
                settle(j, NULL, false, "this host is out of memory");
                return;
        }
        j->s_done = true;
        manifest_ready(j);
}

static void job_begin(job *j)
{
        sh_tools *t = j->res->t;
        sh_error *err = NULL;
        size_t n = strlen(j->name);

        if (t->keys_error[0]) {
                settle(j, NULL, false, "%s", t->keys_error);
                return;
        }
        if (n == 0 || n > SH_TOOLS_NAME_MAX) {
                settle(j, NULL, false, "the tool name must be 1 to %u bytes", SH_TOOLS_NAME_MAX);
                return;
        }
        n = strlen(j->url);
        if (n == 0 || n > SH_TOOLS_URL_MAX) {
                settle(j, NULL, false, "the manifest URL must be 1 to %u bytes", SH_TOOLS_URL_MAX);
                return;
        }
        j->mf = sh_fetch_start(t->fetcher, j->url, "manifest", SH_TOOLS_MANIFEST_MAX, -1,
                               on_manifest, j, &err);
        if (!j->mf) {
                settle(j, NULL, false, "cannot fetch the manifest: %s",
                       err && err->msg ? err->msg : "unknown error");
                sh_error_release(&err);
                return;
        }
        if (!t->keys_on)
                return;
        /* Signature and manifest are fetched in parallel. */
        j->sig_url = sh_url_sig(j->url);
        if (!j->sig_url) {
                settle(j, NULL, false, "bad manifest URL: only http and https URLs are fetched");
                return;
        }
        j->sf = sh_fetch_start(t->fetcher, j->sig_url, "signature", SH_TOOLS_SIG_MAX, -1,
                               on_signature, j, &err);
        if (!j->sf) {
                settle(j, NULL, false, "cannot fetch the manifest signature: %s",
                       err && err->msg ? err->msg : "unknown error");
                sh_error_release(&err);
        }
}

/* ---- requests ----------------------------------------------------------------------- */

static void resolve_free(sh_resolve *res)
{
        size_t i;

        for (i = 0; i < res->n; i++) {
                job *j = &res->jobs[i];

                job_stop(j);
                free(j->url);
                free(j->sig_url);
                free(j->mbody);
                free(j->sbody);
                free(j->bundle_url);
                sh_manifest_done(&j->m);
                cJSON_Delete(j->result);
                free(res->names[i]);
        }
        free(res->jobs);
        free(res->names);
        free(res);
}

static void resolve_freep(sh_resolve **res)
{
        if (*res)
                resolve_free(*res);
}

static void resolve_finish(sh_resolve *res)
{
        cJSON *out = cJSON_CreateObject(), *tools, *refused;
        size_t i;

        tools = out ? cJSON_AddObjectToObject(out, "tools") : NULL;
        refused = out ? cJSON_AddObjectToObject(out, "refused") : NULL;
        for (i = 0; tools && refused && i < res->n; i++) {
                job *j = &res->jobs[i];

                if (j->result)
                        cJSON_AddItemToObject(tools, j->name, TAKE_PTR(j->result));
                else
                        cJSON_AddStringToObject(refused, j->name, j->reason);
        }
        if (!tools || !refused) {
                cJSON_Delete(out);
                out = NULL; /* the caller answers an internal error */
        }
        res->done(out, res->data);
        resolve_free(res);
}

static int tools_open(sh_tools *t, sh_error **err);

int sh_tools_resolve_start(sh_tools *t, const char *const *names, const char *const *urls, size_t n,
                           sh_resolve_done_fn done, void *data, sh_resolve **ret, sh_error **err)
{
        _cleanup_(resolve_freep) sh_resolve *res = NULL;
        size_t i;

        *ret = NULL;
        if (tools_open(t, err) < 0)
                return -1;
        res = calloc(1, sizeof(*res));
        if (!res || !(res->jobs = calloc(n ? n : 1, sizeof(job))) ||
            !(res->names = calloc(n ? n : 1, sizeof(char *))))
                return sh_error_make(err, ENOMEM, "out of memory");
        res->t = t;
        res->done = done;
        res->data = data;
        res->n = n;
        for (i = 0; i < n; i++) {
                res->names[i] = strdup(names[i]);
                res->jobs[i].url = strdup(urls[i]);
                res->jobs[i].res = res;
                res->jobs[i].name = res->names[i];
                if (!res->names[i] || !res->jobs[i].url)
                        return sh_error_make(err, ENOMEM, "out of memory");
        }
        /* One extra count held while starting: a tool refused at once must not finish the
         * request before the others have even begun. */
        res->pending = n + 1;
        for (i = 0; i < n; i++)
                job_begin(&res->jobs[i]);
        if (--res->pending == 0) {
                resolve_finish(TAKE_PTR(res));
                return 0;
        }
        *ret = TAKE_PTR(res);
        return 0;
}

void sh_tools_resolve_cancel(sh_resolve *res)
{
        if (res)
                resolve_free(res);
}

/* ---- the resolver ------------------------------------------------------------------- */

/* SANDBOX_HOST_TOOL_KEYS: a file of base64 ed25519 public keys, one per line. Unusable keys
 * fail closed: every tool is refused with the reason, never resolved unsigned. */
static void load_keys(sh_tools *t, const char *path)
{
        char buf[KEYS_FILE_MAX + 1], reason[200] = "";
        int fd;
        ssize_t n;

        if (!path || !*path)
                return;
        t->keys_on = true;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                snprintf(reason, sizeof(reason), "%s", strerror(errno));
        } else {
                n = read(fd, buf, sizeof(buf));
                if (n < 0)
                        snprintf(reason, sizeof(reason), "%s", strerror(errno));
                else if ((size_t)n > KEYS_FILE_MAX)
                        snprintf(reason, sizeof(reason), "larger than %u bytes", KEYS_FILE_MAX);
                else if (sh_tool_keys_parse(buf, (size_t)n, &t->keys, reason, sizeof(reason)) ==
                                 0 &&
                         t->keys.n == 0)
                        snprintf(reason, sizeof(reason), "no keys in the file");
                close(fd);
        }
        if (reason[0])
                snprintf(t->keys_error, sizeof(t->keys_error),
                         "this host's trusted publisher keys (SANDBOX_HOST_TOOL_KEYS=%.60s) are "
                         "unusable: %s",
                         path, reason);
}

int sh_tools_new(const sh_config *cfg, sh_loop *loop, sh_cgroup_root *cgroot, sh_tools **ret,
                 sh_error **err)
{
        sh_tools *t = calloc(1, sizeof(*t));

        if (!t)
                return sh_error_make(err, ENOMEM, "out of memory");
        t->cfg = cfg;
        t->loop = loop;
        t->cgroot = cgroot;
        *ret = t;
        return 0;
}

/* The first resolve opens the store (its directories, a child clearing an earlier run's
 * staging, the tools cgroup), the fetcher and the trusted keys; a failure is answered to that
 * resolve and tried again by the next one. */
static int tools_open(sh_tools *t, sh_error **err)
{
        const sh_config *cfg = t->cfg;

        if (t->opened)
                return 0;
        if (sodium_init() < 0)
                return sh_error_make(err, EIO, "initialising libsodium");
        t->keys_on = false;
        t->keys_error[0] = '\0';
        memset(&t->keys, 0, sizeof(t->keys));
        load_keys(t, cfg->tool_keys);
        if (t->keys_error[0])
                log_debug("tools-keys", NULL, "%s", t->keys_error);
        /* Verification is strong by default: a signature over the manifest (which holds the
         * bundle's sha256), or else https, which no one on the way can rewrite. */
        if (sh_fetcher_new(t->loop, t->keys_on || cfg->tool_insecure_http, TOOLS_HTTP_HINT,
                           &t->fetcher, err) < 0)
                return -1;
        /* The unpacker runs as the uid just below the sandbox range: no sandbox and no host
         * service has it, and it owns nothing but its staging directory. */
        if (sh_store_open(cfg->root, t->loop, (uid_t)(cfg->uid_base - 1), t->cgroot, &t->store,
                          err) < 0) {
                sh_fetcher_free(t->fetcher, true);
                t->fetcher = NULL;
                return -1;
        }
        t->opened = true;
        return 0;
}

void sh_tools_free(sh_tools *t)
{
        if (!t)
                return;
        /* In-flight installs are dropped (their unpack children are killed by the store and
         * report before it goes), every fetch is cancelled. */
        while (t->installs) {
                install *in = t->installs;

                while (in->waiters)
                        install_unwait(in->waiters);
                install_free(in);
        }
        sh_fetcher_free(t->fetcher, true);
        sh_store_free(t->store);
        free(t);
}
