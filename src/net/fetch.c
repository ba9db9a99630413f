/* fetch.c: libcurl multi transfers driven by our epoll loop; a slow server never stalls us. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/fetch.h"
#include "sh/list.h"
#include "sh/loop.h"
#include "net-internal.h"

#define CA_FILE_MAX (4u << 20) /* one PEM file of CAs, or the system's bundle */

struct sh_fetch_ca {
        char *pem; /* the system's bundle, then the extra file */
        size_t len;
};

struct sh_fetcher {
        sh_multi m;
        sh_fetch_rule rule; /* the default one */
        sh_fetch *fetches;  /* in flight */
};

struct sh_fetch {
        sh_fetcher *f;
        CURL *easy;
        char what[96];
        char peer[96];
        char *url; /* the one asked now (the first, or a redirect's target) */
        const sh_fetch_rule *rule;
        struct curl_slist *headers;
        bool raw;
        bool follow; /* raw, but 3xx followed here */
        uint64_t max;
        int fd;
        bool too_big;
        bool write_failed;
        int write_errno;
        char *buf;
        size_t len, cap;
        crypto_hash_sha256_state sha;
        unsigned redirects;
        uint64_t deadline_ms; /* the total timeout covers every redirect */
        sh_fetch_done_fn done;
        void *data;
        SH_LIST_FIELDS(sh_fetch, fetches);
};

static void check_done(void *owner);

/* ---- certificate authorities --------------------------------------------------------- */

/* Append the file at `path` to *buf. -errno; -EFBIG past CA_FILE_MAX. */
static int append_file(const char *path, char **buf, size_t *len)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat st;
        char *p;
        size_t off = 0;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if ((uint64_t)st.st_size > CA_FILE_MAX)
                return -EFBIG;
        p = realloc(*buf, *len + (size_t)st.st_size + 2);
        if (!p)
                return -ENOMEM;
        *buf = p;
        while (off < (size_t)st.st_size) {
                ssize_t n = read(fd, p + *len + off, (size_t)st.st_size - off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break; /* it shrank: what we have */
                off += (size_t)n;
        }
        *len += off;
        p[(*len)++] = '\n'; /* a file without a last newline must not glue two PEM blocks */
        p[*len] = '\0';
        return 0;
}

int sh_fetch_ca_load(const char *extra_pem, sh_fetch_ca **ret, sh_error **err)
{
        sh_fetch_ca *ca = calloc(1, sizeof(*ca));
        CURL *easy;
        char *sys = NULL;
        size_t before;
        int r;

        if (!ca)
                return sh_error_make(err, ENOMEM, "out of memory");
        /* libcurl's own default bundle (a build-time path): TLS must still trust what it
         * trusts without the extra file, and a CA blob replaces the default. */
        easy = curl_easy_init();
        if (easy && curl_easy_getinfo(easy, CURLINFO_CAINFO, &sys) == CURLE_OK && sys) {
                r = append_file(sys, &ca->pem, &ca->len);
                if (r < 0 && r != -ENOENT) {
                        curl_easy_cleanup(easy);
                        sh_fetch_ca_free(ca);
                        return sh_error_make(err, -r, "reading the system's CA bundle '%s'", sys);
                }
        }
        curl_easy_cleanup(easy);
        before = ca->len;
        r = append_file(extra_pem, &ca->pem, &ca->len);
        if (r < 0) {
                sh_fetch_ca_free(ca);
                return sh_error_make(err, -r, "reading the CA file '%s'", extra_pem);
        }
        if (!ca->pem || !strstr(ca->pem + before, "-----BEGIN CERTIFICATE-----")) {
                sh_fetch_ca_free(ca);
                return sh_error_new(err, SH_E_INVALID, "the CA file '%s' holds no PEM certificate",
                                    extra_pem);
        }
        *ret = ca;
        return 0;
}

void sh_fetch_ca_free(sh_fetch_ca *ca)
{
        if (!ca)
                return;
        free(ca->pem);
        free(ca);
}

int sh_fetcher_new(sh_loop *loop, bool plain_http, const char *http_hint, sh_fetcher **ret,
                   sh_error **err)
{
        sh_fetcher *f = calloc(1, sizeof(*f));

        if (!f)
                return sh_error_make(err, ENOMEM, "out of memory");
        f->rule.http = plain_http ? SH_FETCH_HTTP_ANY : SH_FETCH_HTTP_LOOPBACK;
        f->rule.http_hint = http_hint;
        if (sh_multi_init(&f->m, loop, 64L, check_done, f, err) < 0) {
                free(f);
                return -1;
        }
        *ret = f;
        return 0;
}

static void fetch_free(sh_fetch *x)
{
        sh_fetcher *f = x->f;

        SH_LIST_REMOVE(fetches, f->fetches, x);
        curl_multi_remove_handle(f->m.multi, x->easy);
        curl_easy_cleanup(x->easy);
        curl_slist_free_all(x->headers);
        free(x->url);
        free(x->buf);
        free(x);
}

void sh_fetcher_free(sh_fetcher *f, bool loop_alive)
{
        if (!f)
                return;
        f->m.loop_alive = loop_alive;
        while (f->fetches)
                fetch_free(f->fetches);
        sh_multi_done(&f->m);
        free(f);
}

/* ---- the body ------------------------------------------------------------------------ */

static bool keep(sh_fetch *x, const char *ptr, size_t n)
{
        if (x->len + n + 1 > x->cap) {
                size_t cap = x->cap ? x->cap : 16384;
                char *p;

                while (cap < x->len + n + 1)
                        cap *= 2;
                p = realloc(x->buf, cap);
                if (!p) {
                        x->write_failed = true;
                        x->write_errno = ENOMEM;
                        return false;
                }
                x->buf = p;
                x->cap = cap;
        }
        memcpy(x->buf + x->len, ptr, n);
        x->len += n;
        x->buf[x->len] = '\0';
        return true;
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        sh_fetch *x = userdata;
        size_t n = size * nmemb, done = 0;
        long code = 0;

        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
        /* The body of a redirect is not the artifact: dropped (it is followed, or the raw
         * caller gets the Location). */
        if (code >= 300 && code < 400)
                return n;
        /* A raw fetch's error page: its start, in memory, for the caller's message. */
        if (x->raw && (code < 200 || code >= 300)) {
                size_t room =
                        x->len < SH_FETCH_ERROR_BODY_MAX ? SH_FETCH_ERROR_BODY_MAX - x->len : 0;

                if (room && !keep(x, ptr, n < room ? n : room))
                        return 0;
                return n;
        }
        if (n > x->max || x->len > x->max - n) {
                x->too_big = true;
                return 0; /* CURLE_WRITE_ERROR: stop the transfer now */
        }
        crypto_hash_sha256_update(&x->sha, (const unsigned char *)ptr, n);
        if (x->fd >= 0) {
                while (done < n) {
                        ssize_t w = write(x->fd, ptr + done, n - done);

                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w <= 0) {
                                x->write_failed = true;
                                x->write_errno = w < 0 ? errno : EIO;
                                return 0;
                        }
                        done += (size_t)w;
                }
                x->len += n;
                return n;
        }
        return keep(x, ptr, n) ? n : 0;
}

/* ---- the transport rule -------------------------------------------------------------- */

/* Sets *ret_loopback_http when the URL is plain http to a loopback host that the rule allows
 * as such: nothing but this machine carries it, so never through a proxy. */
static int rule_check(const sh_fetch_rule *rule, const char *url, const char *what, char *reason,
                      size_t reason_len, bool *ret_loopback_http)
{
        _cleanup_free_ char *scheme = NULL, *host = NULL;
        unsigned port;
        int r = sh_url_split(url, &scheme, &host, &port);

        *ret_loopback_http = false;
        if (r == -ENOMEM) {
                snprintf(reason, reason_len, "this host is out of memory");
                return -1;
        }
        if (r < 0) {
                snprintf(reason, reason_len,
                         "bad %s URL: not a valid URL (only http and https URLs are fetched)",
                         what);
                return -1;
        }
        if (strcmp(scheme, "https") == 0)
                return 0;
        if (strcmp(scheme, "http") != 0) {
                snprintf(reason, reason_len,
                         "bad %s URL: scheme '%.16s' (only http and https URLs are fetched)", what,
                         scheme);
                return -1;
        }
        if (rule->http == SH_FETCH_HTTP_ANY)
                return 0;
        if (rule->http == SH_FETCH_HTTP_LOOPBACK && sh_url_host_is_loopback(host)) {
                *ret_loopback_http = true;
                return 0;
        }
        if (rule->http == SH_FETCH_HTTP_LISTED &&
            sh_url_host_listed(rule->http_hosts, host, port)) {
                *ret_loopback_http = sh_url_host_is_loopback(host);
                return 0;
        }
        snprintf(reason, reason_len, "refusing plain http for the %s at %.200s%s%s", what, url,
                 rule->http_hint ? ": " : "", rule->http_hint ? rule->http_hint : "");
        return -1;
}

int sh_fetch_rule_check(const sh_fetch_rule *rule, const char *url, const char *what, char *reason,
                        size_t reason_len)
{
        bool loopback_http;

        return rule_check(rule, url, what, reason, reason_len, &loopback_http);
}

/* Point the transfer at `url` (the first one, or a redirect's target) with what is left of
 * the total timeout. */
static bool aim(sh_fetch *x, const char *url, bool loopback_http, uint64_t left_ms)
{
        char *copy = strdup(url);

        if (!copy)
                return false;
        free(x->url);
        x->url = copy;
        return curl_easy_setopt(x->easy, CURLOPT_URL, x->url) == CURLE_OK &&
               curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)left_ms) == CURLE_OK &&
               /* allowed because nothing but this machine carries it: not through a proxy */
               curl_easy_setopt(x->easy, CURLOPT_NOPROXY, loopback_http ? "*" : NULL) == CURLE_OK;
}

static void easy_cleanupp(CURL **easy)
{
        curl_easy_cleanup(*easy); /* accepts NULL */
}

static void slist_freep(struct curl_slist **l)
{
        curl_slist_free_all(*l); /* accepts NULL */
}

/* The caller's headers as curl's list; NULL with *err for one that would split the request. */
static int header_list(const char *const *headers, struct curl_slist **ret, sh_error **err)
{
        _cleanup_(slist_freep) struct curl_slist *l = NULL;

        for (; headers && *headers; headers++) {
                struct curl_slist *n;
                size_t len = strlen(*headers);

                if (len >= SH_FETCH_HEADER_MAX || strpbrk(*headers, "\r\n") ||
                    !strchr(*headers, ':'))
                        return sh_error_new(err, SH_E_INVALID, "a request header is malformed");
                n = curl_slist_append(l, *headers);
                if (!n)
                        return sh_error_make(err, ENOMEM, "out of memory");
                l = n;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

sh_fetch *sh_fetch_start_opts(sh_fetcher *f, const sh_fetch_opts *o, sh_fetch_done_fn done,
                              void *data, sh_error **err)
{
        _cleanup_free_ sh_fetch *x = NULL;
        _cleanup_(easy_cleanupp) CURL *easy = NULL;
        _cleanup_(slist_freep) struct curl_slist *headers = NULL;
        const sh_fetch_rule *rule = o->rule ? o->rule : &f->rule;
        char reason[SH_FETCH_REASON_MAX];
        uint64_t total = o->timeout_ms ? o->timeout_ms : SH_FETCH_TOTAL_TIMEOUT_MS;
        uint64_t connect =
                o->connect_timeout_ms ? o->connect_timeout_ms : SH_FETCH_CONNECT_TIMEOUT_MS;
        bool ok, loopback_http;

        if (rule_check(rule, o->url, o->what, reason, sizeof(reason), &loopback_http) < 0) {
                sh_error_make(err, EPERM, "%s", reason);
                return NULL;
        }
        if (header_list(o->headers, &headers, err) < 0)
                return NULL;
        x = calloc(1, sizeof(*x));
        if (!x) {
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        x->f = f;
        x->fd = o->fd;
        x->max = o->max;
        x->raw = o->raw;
        x->follow = !o->raw || o->follow;
        x->rule = rule;
        x->done = done;
        x->data = data;
        x->deadline_ms = sh_now_ms() + total;
        snprintf(x->what, sizeof(x->what), "%s", o->what);
        snprintf(x->peer, sizeof(x->peer), "%s", o->peer ? o->peer : "the artifact store");
        crypto_hash_sha256_init(&x->sha);
        x->easy = easy = curl_easy_init();
        if (!easy) {
                sh_error_make(err, ENOMEM, "creating a libcurl handle");
                return NULL;
        }
        /* http and https only: no file://, no gopher:// and friends reaching host files or
         * internal services by other means. Redirects are never followed by libcurl: here
         * (each target checked by rule_check before anything connects to it) or, raw, by the
         * caller. */
        ok = aim(x, o->url, loopback_http, total) &&
             curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
             curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
             curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)connect) == CURLE_OK &&
             /* A single-threaded daemon: no SIGALRM games inside libcurl. */
             curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
             /* >= 400 ends the transfer without reading an error page into our buffer (a raw
              * fetch reads the start of it: a registry says there why it refused). */
             curl_easy_setopt(easy, CURLOPT_FAILONERROR, o->raw ? 0L : 1L) == CURLE_OK &&
             /* Refuse early when Content-Length already says too big. */
             curl_easy_setopt(easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)o->max) == CURLE_OK &&
             curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, write_cb) == CURLE_OK &&
             curl_easy_setopt(easy, CURLOPT_WRITEDATA, x) == CURLE_OK &&
             curl_easy_setopt(easy, CURLOPT_PRIVATE, x) == CURLE_OK &&
             curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers) == CURLE_OK &&
             curl_easy_setopt(easy, CURLOPT_USERAGENT, "sandbox-host/" SH_VERSION) == CURLE_OK;
        if (ok && o->low_speed_bytes && o->low_speed_ms)
                ok = curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, (long)o->low_speed_bytes) ==
                             CURLE_OK &&
                     curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME,
                                      (long)((o->low_speed_ms + 999) / 1000)) == CURLE_OK;
        if (ok && rule->ca) {
                struct curl_blob blob = {
                        .data = rule->ca->pem, .len = rule->ca->len, .flags = CURL_BLOB_NOCOPY};

                ok = curl_easy_setopt(easy, CURLOPT_CAINFO_BLOB, &blob) == CURLE_OK;
        }
        if (!ok) {
                sh_error_make(err, EINVAL, "configuring libcurl for the %s", o->what);
                return NULL;
        }
        if (curl_multi_add_handle(f->m.multi, easy) != CURLM_OK) {
                sh_error_make(err, ENOMEM, "starting the %s fetch", o->what);
                return NULL;
        }
        easy = NULL; /* x's now, freed with it (fetch_free) */
        x->headers = TAKE_PTR(headers);
        SH_LIST_PREPEND(fetches, f->fetches, x);
        return TAKE_PTR(x);
}

sh_fetch *sh_fetch_start(sh_fetcher *f, const char *url, const char *what, uint64_t max, int fd,
                         sh_fetch_done_fn done, void *data, sh_error **err)
{
        const sh_fetch_opts o = {.url = url, .what = what, .max = max, .fd = fd};

        return sh_fetch_start_opts(f, &o, done, data, err);
}

int sh_fetch_redirect_check(const sh_fetch_rule *rule, const char *from, const char *to, unsigned n,
                            const char *what, bool *keep_headers, char *reason, size_t reason_len)
{
        char a[512], b[512];
        bool loopback_http;

        *keep_headers = false;
        if (n > SH_FETCH_MAX_REDIRECTS) {
                snprintf(reason, reason_len,
                         "bad %s URL: more than %u redirects (only http and https URLs are "
                         "fetched, at most %u redirects)",
                         what, SH_FETCH_MAX_REDIRECTS, SH_FETCH_MAX_REDIRECTS);
                return -1;
        }
        if (rule_check(rule, to, what, reason, reason_len, &loopback_http) < 0) {
                size_t len = strlen(reason);

                snprintf(reason + len, reason_len - len, " (a redirect)");
                return -1;
        }
        /* The caller's headers may be credentials: they go to the origin they were given
         * for, never to another one a redirect names. */
        *keep_headers = sh_url_origin(from, a, sizeof(a)) == 0 &&
                        sh_url_origin(to, b, sizeof(b)) == 0 && strcmp(a, b) == 0;
        return 0;
}

/* A 3xx answer: follow it if the rules allow (sh_fetch_redirect_check, before anything
 * connects to the target). True when the transfer goes on; false with *res set. */
static bool follow(sh_fetch *x, long code, sh_fetch_result *res)
{
        char *target = NULL;
        bool loopback_http, keep;
        uint64_t now = sh_now_ms();

        res->kind = SH_FETCH_REFUSED;
        if (code != 301 && code != 302 && code != 303 && code != 307 && code != 308) {
                snprintf(res->reason, sizeof(res->reason), "%s answered HTTP %ld for the %s",
                         x->peer, code, x->what);
                return false;
        }
        if (curl_easy_getinfo(x->easy, CURLINFO_REDIRECT_URL, &target) != CURLE_OK || !target) {
                snprintf(res->reason, sizeof(res->reason),
                         "%s answered HTTP %ld for the %s without a usable Location", x->peer, code,
                         x->what);
                return false;
        }
        if (sh_fetch_redirect_check(x->rule, x->url, target, ++x->redirects, x->what, &keep,
                                    res->reason, sizeof(res->reason)) < 0)
                return false;
        (void)rule_check(x->rule, target, x->what, res->reason, sizeof(res->reason),
                         &loopback_http);
        if (now >= x->deadline_ms) {
                res->kind = SH_FETCH_UNREACHABLE;
                res->timed_out = true;
                snprintf(res->reason, sizeof(res->reason),
                         "cannot reach %s for the %s: timed out across redirects", x->peer,
                         x->what);
                return false;
        }
        if (!keep && x->headers) {
                curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, NULL);
                curl_slist_free_all(x->headers);
                x->headers = NULL;
        }
        /* curl owns `target` until the handle changes: aim() copies it first */
        curl_multi_remove_handle(x->f->m.multi, x->easy);
        if (!aim(x, target, loopback_http, x->deadline_ms - now) ||
            curl_multi_add_handle(x->f->m.multi, x->easy) != CURLM_OK) {
                snprintf(res->reason, sizeof(res->reason),
                         "this host could not follow the redirect for the %s", x->what);
                return false;
        }
        res->reason[0] = '\0';
        return true;
}

void sh_fetch_cancel(sh_fetch *x)
{
        if (x)
                fetch_free(x);
}

uint64_t sh_fetch_received(const sh_fetch *x)
{
        return x->len;
}

const char *sh_fetch_header(sh_fetch *x, const char *name, size_t i)
{
        struct curl_header *h = NULL;

        if (curl_easy_header(x->easy, name, i, CURLH_HEADER, -1, &h) != CURLHE_OK || !h)
                return NULL;
        return h->value;
}

/* The contract's split: the server could not be reached (try later) vs. it answered no. */
static void classify(sh_fetch *x, CURLcode rc, sh_fetch_result *res)
{
        long code = 0;

        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
        res->status = code;
        if (x->too_big || rc == CURLE_FILESIZE_EXCEEDED) {
                res->kind = SH_FETCH_REFUSED;
                res->too_big = true;
                snprintf(res->reason, sizeof(res->reason),
                         "the %s is larger than this host's limit of %llu bytes", x->what,
                         (unsigned long long)x->max);
                return;
        }
        if (x->write_failed) {
                res->kind = SH_FETCH_REFUSED;
                snprintf(res->reason, sizeof(res->reason), "this host could not store the %s: %s",
                         x->what, strerror(x->write_errno));
                return;
        }
        if (rc == CURLE_OK && code >= 200 && code < 300) {
                res->kind = SH_FETCH_OK;
                return;
        }
        if (x->raw && rc == CURLE_OK) {
                char *target = NULL;

                res->kind = SH_FETCH_HTTP;
                if (code >= 300 && code < 400 &&
                    curl_easy_getinfo(x->easy, CURLINFO_REDIRECT_URL, &target) == CURLE_OK)
                        res->location = target;
                snprintf(res->reason, sizeof(res->reason), "%s answered HTTP %ld for the %s",
                         x->peer, code, x->what);
                return;
        }
        if (rc == CURLE_OK || rc == CURLE_HTTP_RETURNED_ERROR) {
                bool busy = code >= 500 || code == 408 || code == 429;

                res->kind = busy ? SH_FETCH_UNREACHABLE : SH_FETCH_REFUSED;
                snprintf(res->reason, sizeof(res->reason), "%s answered HTTP %ld for the %s%s",
                         x->peer, code, x->what,
                         busy          ? " (store unavailable)"
                         : code == 404 ? " (it is gone: check the URL)"
                         : code >= 400 ? " (forbidden or invalid: check the URL and access)"
                                       : "");
                return;
        }
        switch (rc) {
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_URL_MALFORMAT:
        case CURLE_TOO_MANY_REDIRECTS:
                res->kind = SH_FETCH_REFUSED;
                snprintf(res->reason, sizeof(res->reason),
                         "bad %s URL: %s (only http and https URLs are fetched, at most 5 "
                         "redirects)",
                         x->what, curl_easy_strerror(rc));
                return;
        default:
                /* Connection errors, timeouts, resets, TLS failures: unreachable. */
                res->kind = SH_FETCH_UNREACHABLE;
                res->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
                snprintf(res->reason, sizeof(res->reason), "cannot reach %s for the %s: %s",
                         x->peer, x->what, curl_easy_strerror(rc));
                return;
        }
}

/* Hand every finished transfer to its owner. A callback may start or cancel other fetches:
 * we are outside every curl callback here, so that is allowed. */
static void check_done(void *owner)
{
        sh_fetcher *f = owner;
        CURLMsg *msg;
        int left;

        while ((msg = curl_multi_info_read(f->m.multi, &left))) {
                sh_fetch *x = NULL;
                sh_fetch_result res = {0};
                long code = 0;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
                if (!x)
                        continue;
                curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
                if (x->follow && msg->data.result == CURLE_OK && code >= 300 && code < 400) {
                        res.status = code;
                        if (follow(x, code, &res))
                                continue; /* the same fetch, aimed at the target */
                } else {
                        classify(x, msg->data.result, &res);
                }
                res.body = x->buf ? x->buf : (char *)"";
                res.len = x->len;
                crypto_hash_sha256_final(&x->sha, res.sha256);
                x->done(x, &res, x->data);
                fetch_free(x);
        }
}
