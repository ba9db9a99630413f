/* fetch.c: libcurl multi transfers driven by our epoll loop; a slow store never stalls us. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sh/list.h"
#include "sh/loop.h"
#include "sh/tools.h"

#define MAX_REDIRECTS 5

struct sh_fetcher {
        sh_loop *loop;
        CURLM *multi;
        sh_timer *timer;
        bool loop_alive;
        bool plain_http;   /* plain http to any host; else to loopback hosts only */
        sh_fetch *fetches; /* in flight */
};

struct sh_fetch {
        sh_fetcher *f;
        CURL *easy;
        char what[16];
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

/* One watched socket of curl's; the loop handle lives as long as curl keeps the socket. */
typedef struct sock {
        sh_io *io;
} sock;

static void check_done(sh_fetcher *f);

static void on_timer(sh_loop *l, sh_timer *t, void *data)
{
        sh_fetcher *f = data;
        int running;

        f->timer = NULL; /* the loop frees a fired timer */
        curl_multi_socket_action(f->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        check_done(f);
}

/* CURLMOPT_TIMERFUNCTION: must not call back into curl, only (re)arm our timer. */
static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
        sh_fetcher *f = userp;

        if (!f->loop_alive)
                return 0;
        sh_loop_cancel_timer(f->loop, f->timer);
        f->timer = NULL;
        if (timeout_ms < 0)
                return 0;
        f->timer = sh_loop_add_timer(f->loop, (uint64_t)timeout_ms, on_timer, f);
        return f->timer ? 0 : -1;
}

static void on_io(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_fetcher *f = data;
        int flags = 0, running;

        if (events & EPOLLIN)
                flags |= CURL_CSELECT_IN;
        if (events & EPOLLOUT)
                flags |= CURL_CSELECT_OUT;
        if (events & (EPOLLERR | EPOLLHUP))
                flags |= CURL_CSELECT_ERR;
        curl_multi_socket_action(f->multi, fd, flags, &running);
        check_done(f);
}

/* CURLMOPT_SOCKETFUNCTION: curl tells which sockets to watch for what. REMOVE comes before
 * curl closes the socket, so the epoll registration never outlives the fd. */
static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
        sh_fetcher *f = userp;
        sock *k = socketp;
        uint32_t ev = 0;

        if (what == CURL_POLL_REMOVE) {
                if (k) {
                        if (f->loop_alive)
                                sh_loop_del_io(f->loop, k->io);
                        free(k);
                        curl_multi_assign(f->multi, s, NULL);
                }
                return 0;
        }
        if (!f->loop_alive)
                return 0;
        if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
                ev |= EPOLLIN;
        if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
                ev |= EPOLLOUT;
        if (!k) {
                k = calloc(1, sizeof(*k));
                if (!k)
                        return -1;
                k->io = sh_loop_add_io(f->loop, s, ev, on_io, f);
                if (!k->io) {
                        free(k);
                        return -1;
                }
                curl_multi_assign(f->multi, s, k);
                return 0;
        }
        return sh_loop_mod_io(f->loop, k->io, ev) < 0 ? -1 : 0;
}

int sh_fetcher_new(sh_loop *loop, bool plain_http, sh_fetcher **ret, sh_error **err)
{
        static bool global_done;
        sh_fetcher *f;

        if (!global_done) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return sh_error_make(err, EIO, "initialising libcurl");
                global_done = true;
        }
        f = calloc(1, sizeof(*f));
        if (!f)
                return sh_error_make(err, ENOMEM, "out of memory");
        f->loop = loop;
        f->loop_alive = true;
        f->plain_http = plain_http;
        f->multi = curl_multi_init();
        if (!f->multi) {
                free(f);
                return sh_error_make(err, ENOMEM, "creating a libcurl multi handle");
        }
        if (curl_multi_setopt(f->multi, CURLMOPT_SOCKETFUNCTION, socket_cb) != CURLM_OK ||
            curl_multi_setopt(f->multi, CURLMOPT_SOCKETDATA, f) != CURLM_OK ||
            curl_multi_setopt(f->multi, CURLMOPT_TIMERFUNCTION, timer_cb) != CURLM_OK ||
            curl_multi_setopt(f->multi, CURLMOPT_TIMERDATA, f) != CURLM_OK ||
            /* Many tools at once queue inside curl instead of opening unbounded sockets. */
            curl_multi_setopt(f->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 64L) != CURLM_OK) {
                curl_multi_cleanup(f->multi);
                free(f);
                return sh_error_make(err, EINVAL, "configuring libcurl");
        }
        *ret = f;
        return 0;
}

static void fetch_free(sh_fetch *x)
{
        sh_fetcher *f = x->f;

        SH_LIST_REMOVE(fetches, f->fetches, x);
        curl_multi_remove_handle(f->multi, x->easy);
        curl_easy_cleanup(x->easy);
        free(x->buf);
        free(x);
}

void sh_fetcher_free(sh_fetcher *f, bool loop_alive)
{
        if (!f)
                return;
        f->loop_alive = loop_alive;
        while (f->fetches)
                fetch_free(f->fetches);
        if (loop_alive)
                sh_loop_cancel_timer(f->loop, f->timer);
        curl_multi_cleanup(f->multi);
        free(f);
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        sh_fetch *x = userdata;
        size_t n = size * nmemb, done = 0;
        long code = 0;

        /* The body of a redirect is not the artifact: dropped (we follow it ourselves). */
        if (curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code >= 300 &&
            code < 400)
                return n;

        if (n > x->max || x->len > x->max - n) {
                x->too_big = true;
                return 0; /* CURLE_WRITE_ERROR: stop the transfer now */
        }
        if (x->fd >= 0) {
                crypto_hash_sha256_update(&x->sha, (const unsigned char *)ptr, n);
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
        if (x->len + n + 1 > x->cap) {
                size_t cap = x->cap ? x->cap : 16384;
                char *p;

                while (cap < x->len + n + 1)
                        cap *= 2;
                p = realloc(x->buf, cap);
                if (!p) {
                        x->write_failed = true;
                        x->write_errno = ENOMEM;
                        return 0;
                }
                x->buf = p;
                x->cap = cap;
        }
        memcpy(x->buf + x->len, ptr, n);
        x->len += n;
        x->buf[x->len] = '\0';
        return n;
}

/* Whether `host` (as curl's URL parser gives it) names this machine's loopback: 127.0.0.0/8,
 * [::1] or "localhost" (which libcurl resolves to loopback itself, never through DNS). No
 * network path carries such a fetch, so plain http cannot be tampered with on the way. */
static bool host_is_loopback(const char *host)
{
        struct in_addr a4;
        struct in6_addr a6;
        char buf[64];
        size_t n = strlen(host);

        if (strcasecmp(host, "localhost") == 0)
                return true;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (n > 2 && n < sizeof(buf) && host[0] == '[' && host[n - 1] == ']') {
                memcpy(buf, host + 1, n - 2);
                buf[n - 2] = '\0';
                return inet_pton(AF_INET6, buf, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
        }
        return false;
}

/* The transport rule, checked before any connection for the first URL and for every redirect:
 * http or https; plain http only to a loopback host unless the fetcher allows it (trusted keys
 * make the signature, not the transport, the proof; or SANDBOX_HOST_TOOL_INSECURE_HTTP).
 * Sets *ret_loopback_http when the URL is plain http allowed only as loopback. */
static int check_url(const sh_fetcher *f, const char *url, const char *what, char *reason,
                     size_t reason_len, bool *ret_loopback_http)
{
        CURLU *u = curl_url();
        char *scheme = NULL, *host = NULL;
        int r = -1;

        *ret_loopback_http = false;
        if (!u) {
                snprintf(reason, reason_len, "this host is out of memory");
                return -1;
        }
        if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
                snprintf(reason, reason_len,
                         "bad %s URL: not a valid URL (only http and https URLs are fetched)",
                         what);
                goto out;
        }
        if (strcasecmp(scheme, "https") == 0) {
                r = 0;
        } else if (strcasecmp(scheme, "http") != 0) {
                snprintf(reason, reason_len,
                         "bad %s URL: scheme '%.16s' (only http and https URLs are fetched)", what,
                         scheme);
        } else if (f->plain_http) {
                r = 0;
        } else if (host_is_loopback(host)) {
                *ret_loopback_http = true;
                r = 0;
        } else {
                snprintf(reason, reason_len,
                         "refusing plain http for the %s at %.200s: without trusted publisher "
                         "keys (SANDBOX_HOST_TOOL_KEYS) this host fetches tools over https only "
                         "(SANDBOX_HOST_TOOL_INSECURE_HTTP=on allows plain http)",
                         what, url);
        }
out:
        curl_free(scheme);
        curl_free(host);
        curl_url_cleanup(u);
        return r;
}

/* Point the transfer at `url` (the first one, or a redirect's target) with what is left of
 * the total timeout. */
static bool aim(sh_fetch *x, const char *url, bool loopback_http, uint64_t left_ms)
{
        return curl_easy_setopt(x->easy, CURLOPT_URL, url) == CURLE_OK &&
               curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)left_ms) == CURLE_OK &&
               /* allowed because nothing but this machine carries it: not through a proxy */
               curl_easy_setopt(x->easy, CURLOPT_NOPROXY, loopback_http ? "*" : NULL) == CURLE_OK;
}

static void easy_cleanupp(CURL **easy)
{
        curl_easy_cleanup(*easy); /* accepts NULL */
}

sh_fetch *sh_fetch_start(sh_fetcher *f, const char *url, const char *what, uint64_t max, int fd,
                         sh_fetch_done_fn done, void *data, sh_error **err)
{
        _cleanup_free_ sh_fetch *x = NULL;
        _cleanup_(easy_cleanupp) CURL *easy = NULL;
        char reason[SH_TOOLS_REASON_MAX];
        bool ok, loopback_http;

        if (check_url(f, url, what, reason, sizeof(reason), &loopback_http) < 0) {
                sh_error_make(err, EPERM, "%s", reason);
                return NULL;
        }
        x = calloc(1, sizeof(*x));
        if (!x) {
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        x->f = f;
        x->fd = fd;
        x->max = max;
        x->done = done;
        x->data = data;
        x->deadline_ms = sh_now_ms() + SH_TOOLS_TOTAL_TIMEOUT_MS;
        snprintf(x->what, sizeof(x->what), "%s", what);
        crypto_hash_sha256_init(&x->sha);
        x->easy = easy = curl_easy_init();
        if (!easy) {
                sh_error_make(err, ENOMEM, "creating a libcurl handle");
                return NULL;
        }
        /* http and https only: no file://, no gopher:// and friends reaching host files or
         * internal services by other means. Redirects are followed here, not by libcurl, so
         * that each target passes check_url before anything connects to it. */
        ok = aim(x, url, loopback_http, SH_TOOLS_TOTAL_TIMEOUT_MS) &&
             curl_easy_setopt(x->easy, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
             curl_easy_setopt(x->easy, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
             curl_easy_setopt(x->easy, CURLOPT_CONNECTTIMEOUT_MS, SH_TOOLS_CONNECT_TIMEOUT_MS) ==
                     CURLE_OK &&
             /* A single-threaded daemon: no SIGALRM games inside libcurl. */
             curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
             /* >= 400 ends the transfer without reading an error page into our buffer. */
             curl_easy_setopt(x->easy, CURLOPT_FAILONERROR, 1L) == CURLE_OK &&
             /* Refuse early when Content-Length already says too big. */
             curl_easy_setopt(x->easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max) == CURLE_OK &&
             curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, write_cb) == CURLE_OK &&
             curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x) == CURLE_OK &&
             curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x) == CURLE_OK &&
             curl_easy_setopt(x->easy, CURLOPT_USERAGENT, "sandbox-host/" SH_VERSION) == CURLE_OK;
        if (!ok) {
                sh_error_make(err, EINVAL, "configuring libcurl for the %s", what);
                return NULL;
        }
        if (curl_multi_add_handle(f->multi, x->easy) != CURLM_OK) {
                sh_error_make(err, ENOMEM, "starting the %s fetch", what);
                return NULL;
        }
        easy = NULL; /* x's now, freed with it (fetch_free) */
        SH_LIST_PREPEND(fetches, f->fetches, x);
        return TAKE_PTR(x);
}

/* A 3xx answer: follow it if the rules allow (at most MAX_REDIRECTS, every target checked
 * before it is connected to). True when the transfer goes on; false with *res set. */
static bool follow(sh_fetch *x, long code, sh_fetch_result *res)
{
        char *target = NULL;
        bool loopback_http;
        uint64_t now = sh_now_ms();

        res->kind = SH_FETCH_REFUSED;
        if (code != 301 && code != 302 && code != 303 && code != 307 && code != 308) {
                snprintf(res->reason, sizeof(res->reason),
                         "the artifact store answered HTTP %ld for the %s", code, x->what);
                return false;
        }
        if (curl_easy_getinfo(x->easy, CURLINFO_REDIRECT_URL, &target) != CURLE_OK || !target) {
                snprintf(res->reason, sizeof(res->reason),
                         "the artifact store answered HTTP %ld for the %s without a usable "
                         "Location",
                         code, x->what);
                return false;
        }
        if (++x->redirects > MAX_REDIRECTS) {
                snprintf(res->reason, sizeof(res->reason),
                         "bad %s URL: more than %d redirects (only http and https URLs are "
                         "fetched, at most %d redirects)",
                         x->what, MAX_REDIRECTS, MAX_REDIRECTS);
                return false;
        }
        if (check_url(x->f, target, x->what, res->reason, sizeof(res->reason), &loopback_http) <
            0) {
                size_t n = strlen(res->reason);

                snprintf(res->reason + n, sizeof(res->reason) - n, " (a redirect)");
                return false;
        }
        if (now >= x->deadline_ms) {
                res->kind = SH_FETCH_UNREACHABLE;
                snprintf(res->reason, sizeof(res->reason),
                         "cannot reach the artifact store for the %s: timed out across redirects",
                         x->what);
                return false;
        }
        /* curl owns `target` until the handle changes: copy before re-aiming */
        {
                char *copy = strdup(target);
                bool ok;

                if (!copy) {
                        snprintf(res->reason, sizeof(res->reason), "this host is out of memory");
                        return false;
                }
                curl_multi_remove_handle(x->f->multi, x->easy);
                ok = aim(x, copy, loopback_http, x->deadline_ms - now) &&
                     curl_multi_add_handle(x->f->multi, x->easy) == CURLM_OK;
                free(copy);
                if (!ok) {
                        snprintf(res->reason, sizeof(res->reason),
                                 "this host could not follow the redirect for the %s", x->what);
                        return false;
                }
        }
        return true;
}

void sh_fetch_cancel(sh_fetch *x)
{
        if (x)
                fetch_free(x);
}

/* The contract's split: the store could not be reached (stale allowed) vs. it answered no. */
static void classify(sh_fetch *x, CURLcode rc, sh_fetch_result *res)
{
        long code = 0;

        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
        if (x->too_big || rc == CURLE_FILESIZE_EXCEEDED) {
                res->kind = SH_FETCH_REFUSED;
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
        if (rc == CURLE_OK || rc == CURLE_HTTP_RETURNED_ERROR) {
                bool busy = code >= 500 || code == 408 || code == 429;

                res->kind = busy ? SH_FETCH_UNREACHABLE : SH_FETCH_REFUSED;
                snprintf(res->reason, sizeof(res->reason),
                         "the artifact store answered HTTP %ld for the %s%s", code, x->what,
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
                /* Connection errors, timeouts, resets, TLS failures: the store is unreachable. */
                res->kind = SH_FETCH_UNREACHABLE;
                snprintf(res->reason, sizeof(res->reason),
                         "cannot reach the artifact store for the %s: %s", x->what,
                         curl_easy_strerror(rc));
                return;
        }
}

/* Hand every finished transfer to its owner. A callback may start or cancel other fetches:
 * we are outside every curl callback here, so that is allowed. */
static void check_done(sh_fetcher *f)
{
        CURLMsg *msg;
        int left;

        while ((msg = curl_multi_info_read(f->multi, &left))) {
                sh_fetch *x = NULL;
                sh_fetch_result res = {0};

                if (msg->msg != CURLMSG_DONE)
                        continue;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
                if (!x)
                        continue;
                {
                        long code = 0;

                        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
                        if (msg->data.result == CURLE_OK && code >= 300 && code < 400) {
                                if (follow(x, code, &res))
                                        continue; /* the same fetch, aimed at the target */
                        } else {
                                classify(x, msg->data.result, &res);
                        }
                }
                res.body = x->buf ? x->buf : (char *)"";
                res.len = x->len;
                if (x->fd >= 0)
                        crypto_hash_sha256_final(&x->sha, res.sha256);
                x->done(x, &res, x->data);
                fetch_free(x);
        }
}

char *sh_url_resolve(const char *base, const char *ref)
{
        CURLU *u = curl_url();
        char *out = NULL, *s = NULL;

        if (!u)
                return NULL;
        if (curl_url_set(u, CURLUPART_URL, base, 0) == CURLUE_OK &&
            curl_url_set(u, CURLUPART_URL, ref, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK) {
                out = strdup(s);
        }
        curl_free(s);
        curl_url_cleanup(u);
        return out;
}

char *sh_url_sig(const char *url)
{
        CURLU *u = curl_url();
        char *path = NULL, *s = NULL, *out = NULL, *np = NULL;

        if (!u)
                return NULL;
        if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK)
                goto out;
        if (asprintf(&np, "%s.sig", path) < 0) {
                np = NULL;
                goto out;
        }
        if (curl_url_set(u, CURLUPART_PATH, np, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK)
                out = strdup(s);
out:
        free(np);
        curl_free(path);
        curl_free(s);
        curl_url_cleanup(u);
        return out;
}
