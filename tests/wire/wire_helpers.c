/* wire_helpers.c: the real daemon in a thread on a temp root, and a small libcurl client. */
#include "wire_helpers.h"

#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "sh/cgroup.h"
#include "sh/config.h"
#include "sh/daemon.h"
#include "sh/log.h"
#include "sh/macro.h"

#define MAX_FLAGS      32
#define JOIN_TIMEOUT_S 20

static struct {
        bool running;
        char root[256];
        char url[128];
        uint16_t port;
        sh_config cfg;
        sh_daemon *d;
        sh_loop *loop; /* wire_services_start's */
        sh_manager *mgr;
        pthread_t thread;
        int run_rc;
} W;

/* ---- daemon ----------------------------------------------------------------------------- */

static void *daemon_thread(void *arg)
{
        W.run_rc = sh_daemon_run(arg);
        return NULL;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
        (void)st;
        (void)f;
        if (flag == FTW_DP)
                rmdir(p);
        else
                unlink(p);
        return 0;
}

static void rm_rf(const char *p)
{
        nftw(p, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static pid_t runner_pid; /* the Check runner process (parent of the forked tests) */

static const char *tmp_dir(void)
{
        const char *tmp = getenv("TMPDIR");

        return tmp && *tmp ? tmp : "/tmp";
}

/* A fresh state root (its name carries the runner's pid: remove_leftovers) and the settings
 * on it: no disk limit unless a test's flags set one (a later flag wins), the wire tests run
 * their workspaces on the state root itself, as they were written. */
static void config_on_fresh_root(const char *const *flags)
{
        char *argv[MAX_FLAGS + 5];
        char listen_arg[] = "--listen=127.0.0.1:0";
        char disk_arg[] = "--disk-max=0";
        /* Nothing of the host's network namespace is changed by a test (egress: the tests that
         * turn it on make their own namespaces). */
        char egress_arg[] = "--egress=off";
        char root_arg[300];
        char *envp[] = {NULL};
        char *msg = NULL;
        const char *lvl = getenv("WIRE_LOG");
        int argc = 0, r;

        sh_log_set_level(lvl && !strcmp(lvl, "debug")  ? SH_LOG_DEBUG
                         : lvl && !strcmp(lvl, "info") ? SH_LOG_INFO
                                                       : SH_LOG_ERROR);
        snprintf(W.root, sizeof(W.root), "%s/sh-wire-%ld-XXXXXX", tmp_dir(),
                 (long)(runner_pid ? runner_pid : getpid()));
        ck_assert_msg(mkdtemp(W.root) != NULL, "mkdtemp: %s", strerror(errno));
        snprintf(root_arg, sizeof(root_arg), "--root=%s/state", W.root);

        argv[argc++] = (char *)"sandbox-host";
        argv[argc++] = listen_arg;
        argv[argc++] = root_arg;
        argv[argc++] = disk_arg;
        argv[argc++] = egress_arg;
        for (int i = 0; flags && flags[i] && argc < MAX_FLAGS + 4; i++)
                argv[argc++] = (char *)flags[i];
        argv[argc] = NULL;
        r = sh_config_parse(&W.cfg, argc, argv, envp, &msg);
        if (r != SH_CONFIG_OK) {
                rm_rf(W.root);
                ck_abort_msg("sh_config_parse: %d: %s", r, msg ? msg : "");
        }
}

void wire_start(const char *const *flags)
{
        sh_error *err = NULL;

        ck_assert_msg(!W.running, "wire_start: a daemon is already running");
        signal(SIGPIPE, SIG_IGN);
        ck_assert_int_eq(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
        config_on_fresh_root(flags);
        if (sh_daemon_new(&W.cfg, false, &W.d, &err) < 0) {
                rm_rf(W.root);
                ck_abort_msg("sh_daemon_new: %s", err && err->msg ? err->msg : "?");
        }
        snprintf(W.url, sizeof(W.url), "%s", sh_daemon_url(W.d));
        {
                const char *colon = strrchr(W.url, ':');

                W.port = (uint16_t)atoi(colon + 1);
        }
        ck_assert_int_eq(pthread_create(&W.thread, NULL, daemon_thread, W.d), 0);
        W.running = true;
}

/* ---- the services without the transport ------------------------------------------------- */

sh_manager *wire_services_start(const char *const *flags, sh_loop **ret_loop)
{
        sh_error *err = NULL;

        config_on_fresh_root(flags);
        ck_assert_int_eq(sh_loop_new(&W.loop), 0);
        if (sh_manager_new(&W.cfg, W.loop, &W.mgr, &err) < 0) {
                rm_rf(W.root);
                ck_abort_msg("sh_manager_new: %s", err && err->msg ? err->msg : "?");
        }
        *ret_loop = W.loop;
        return W.mgr;
}

void wire_services_stop(void)
{
        sh_manager_free(TAKE_PTR(W.mgr));
        sh_loop_free(TAKE_PTR(W.loop));
        sh_config_done(&W.cfg);
        rm_rf(W.root);
}

static void on_limit(sh_loop *l, sh_timer *t, void *data)
{
        (void)t;
        *(bool *)data = true;
        sh_loop_stop(l);
}

typedef struct until {
        bool (*cond)(void *data);
        void *data;
        sh_timer *t;
} until;

static void on_check(sh_loop *l, sh_timer *t, void *data)
{
        until *u = data;

        u->t = NULL;
        if (u->cond(u->data))
                sh_loop_stop(l);
        else
                u->t = sh_loop_add_timer(l, 5, on_check, u);
}

void wire_loop_until(bool (*cond)(void *data), void *data, unsigned ms, const char *what)
{
        bool hit = false;
        sh_timer *limit = sh_loop_add_timer(W.loop, ms, on_limit, &hit);
        until u = {.cond = cond, .data = data};

        ck_assert_ptr_nonnull(limit);
        u.t = sh_loop_add_timer(W.loop, 0, on_check, &u);
        ck_assert_ptr_nonnull(u.t);
        ck_assert_int_eq(sh_loop_run(W.loop), 0);
        sh_loop_cancel_timer(W.loop, u.t);
        ck_assert_msg(!hit, "%s: not within %u ms", what, ms);
        sh_loop_cancel_timer(W.loop, limit);
}

static bool is_set(void *data)
{
        return *(bool *)data;
}

static void on_created(sh_sandbox *sb, const sh_error *err, void *data)
{
        (void)sb;
        ck_assert_msg(!err, "the create failed: %s", err && err->msg ? err->msg : "");
        *(bool *)data = true;
}

sh_sandbox *wire_sandbox(void)
{
        sh_sandbox *sb = NULL;
        sh_error *err = NULL;
        bool done = false;

        if (sh_manager_create(W.mgr, &(sh_create_opts){0}, on_created, &done, &sb, &err) < 0)
                ck_abort_msg("sh_manager_create: %s", err && err->msg ? err->msg : "?");
        wire_loop_until(is_set, &done, 20000, "the create");
        return sb;
}

static void on_exec_event(sh_exec *e, const sh_exec_event *ev, void *data)
{
        wire_seen *s = data;
        size_t room = sizeof(s->out) - 1 - s->out_len;

        (void)e;
        if (ev->type == SH_EXEC_EV_CHUNK) {
                size_t n = ev->chunk.len < room ? ev->chunk.len : room;

                memcpy(s->out + s->out_len, ev->chunk.data, n);
                s->out_len += n;
                return;
        }
        if (ev->type == SH_EXEC_EV_HEARTBEAT)
                return;
        s->ended = true;
        s->end = ev->type;
        s->code = ev->type == SH_EXEC_EV_EXIT ? ev->exit.code : -1;
        snprintf(s->why, sizeof(s->why), "%s", ev->why ? ev->why : "");
        sh_exec_detach(TAKE_PTR(s->e));
}

bool wire_exec_ended(void *data)
{
        return ((wire_seen *)data)->ended;
}

void wire_exec_sh(sh_sandbox *sb, wire_seen *s, const char *script, const cJSON *env,
                  const sh_exec_opts *o)
{
        char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
        sh_error *err = NULL;

        memset(s, 0, sizeof(*s));
        if (sh_sandbox_exec(sb, argv, env, o, on_exec_event, s, &s->e, &err) < 0)
                ck_abort_msg("sh_sandbox_exec: %s", err && err->msg ? err->msg : "?");
}

/* The cgroup subtree the daemon of state root `root` made (src/sandbox/manager.c names it
 * for the root, FNV-1a of the path): opening it again kills what runs there and removes its
 * children, destroying it removes the rest. */
static void remove_cgroups_of(const char *root)
{
        char state[PATH_MAX + 16], instance[32];
        uint64_t h = 1469598103934665603ULL;
        sh_cgroup_root *r = NULL;
        sh_error *err = NULL;

        snprintf(state, sizeof(state), "%s/state", root);
        for (const char *p = state; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        snprintf(instance, sizeof(instance), "%016llx", (unsigned long long)h);
        if (sh_cgroup_root_open(instance, &r, &err) < 0 || sh_cgroup_root_destroy(r, &err) < 0)
                fprintf(stderr, "wire: removing the cgroups of %s: %s\n", state,
                        err && err->msg ? err->msg : "?");
        sh_error_release(&err);
        sh_cgroup_root_free(r);
}

/* A failed assertion ends the forked test with _exit(): its state root stays behind, and
 * the cgroups and processes of its daemon. The runner removes what its children left (their
 * roots carry its pid in their name). */
static void remove_leftovers(void)
{
        char prefix[64];
        struct dirent *de;
        DIR *d = opendir(tmp_dir());

        if (!d)
                return;
        snprintf(prefix, sizeof(prefix), "sh-wire-%ld-", (long)runner_pid);
        while ((de = readdir(d))) {
                char path[PATH_MAX];

                if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
                        continue;
                snprintf(path, sizeof(path), "%s/%s", tmp_dir(), de->d_name);
                remove_cgroups_of(path);
                rm_rf(path);
        }
        closedir(d);
}

int wire_main(Suite *s)
{
        SRunner *sr = srunner_create(s);
        int failed;

        runner_pid = getpid();
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        remove_leftovers();
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

void wire_stop(void)
{
        wire_stop_within(JOIN_TIMEOUT_S);
}

void wire_stop_within(unsigned timeout_s)
{
        struct timespec ts;

        if (!W.running)
                return;
        W.running = false;
        sh_daemon_request_stop(W.d);
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_s;
        if (pthread_timedjoin_np(W.thread, NULL, &ts) != 0) {
                /* A daemon that does not stop is a failure; leave it, but clean the disk
                 * (the runner removes its cgroups: remove_leftovers). */
                rm_rf(W.root);
                ck_abort_msg("the daemon did not stop within %u s", timeout_s);
        }
        sh_daemon_free(W.d);
        W.d = NULL;
        sh_config_done(&W.cfg);
        rm_rf(W.root);
        curl_global_cleanup();
        ck_assert_msg(W.run_rc == 0, "sh_daemon_run returned %d", W.run_rc);
}

const char *wire_url(void)
{
        return W.url;
}

uint16_t wire_port(void)
{
        return W.port;
}

const char *wire_root(void)
{
        static char buf[320];

        snprintf(buf, sizeof(buf), "%s/state", W.root);
        return buf;
}

const char *wire_workspace(const char *id)
{
        static char buf[400];

        snprintf(buf, sizeof(buf), "%s/state/%s/workspace", W.root, id);
        return buf;
}

/* ---- HTTP client ------------------------------------------------------------------------ */

typedef struct buf {
        char *p;
        size_t len;
} buf;

static size_t append(buf *b, const char *data, size_t n)
{
        char *np = realloc(b->p, b->len + n + 1);

        if (!np)
                return 0;
        memcpy(np + b->len, data, n);
        b->p = np;
        b->len += n;
        b->p[b->len] = '\0';
        return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
        return append(userdata, data, size * nmemb);
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata)
{
        buf *b = userdata;
        size_t n = size * nmemb;

        /* A new status line (after 100 Continue) starts the block afresh. */
        if (n >= 5 && memcmp(data, "HTTP/", 5) == 0)
                b->len = 0;
        return append(b, data, n);
}

void wire_http_ex(const char *method, const char *path, const void *body, size_t body_len,
                  const char *content_type, const char *const *extra_headers, long timeout_ms,
                  wire_resp *resp)
{
        CURL *c = curl_easy_init();
        struct curl_slist *hdrs = NULL;
        buf b = {0}, h = {0};
        char url[8192], ct[256];
        CURLcode rc;

        memset(resp, 0, sizeof(*resp));
        ck_assert_ptr_nonnull(c);
        snprintf(url, sizeof(url), "%s%s", W.url, path);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : WIRE_TIMEOUT_MS);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
        curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
        if (strcmp(method, "HEAD") == 0)
                curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        else
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        if (body || body_len) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
                snprintf(ct, sizeof(ct), "Content-Type: %s",
                         content_type ? content_type : "application/json");
                hdrs = curl_slist_append(hdrs, ct);
        }
        hdrs = curl_slist_append(hdrs, "Expect:"); /* no 100-continue unless asked for */
        for (int i = 0; extra_headers && extra_headers[i]; i++)
                hdrs = curl_slist_append(hdrs, extra_headers[i]);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);

        rc = curl_easy_perform(c);
        resp->curl_rc = (int)rc;
        if (rc == CURLE_OK)
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
        curl_easy_getinfo(c, CURLINFO_TOTAL_TIME, &resp->seconds);
        resp->body = b.p ? b.p : calloc(1, 1);
        resp->body_len = b.len;
        resp->headers = h.p ? h.p : calloc(1, 1);
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(c);
}

void wire_http(const char *method, const char *path, const char *json_body, wire_resp *resp)
{
        wire_http_ex(method, path, json_body, json_body ? strlen(json_body) : 0, NULL, NULL, 0,
                     resp);
}

void wire_resp_free(wire_resp *resp)
{
        free(resp->body);
        free(resp->headers);
        memset(resp, 0, sizeof(*resp));
}

bool wire_header(const wire_resp *resp, const char *name, char *out, size_t size)
{
        size_t nl = strlen(name);
        const char *p = resp->headers;

        while (p && *p) {
                const char *eol = strstr(p, "\r\n");
                size_t ll = eol ? (size_t)(eol - p) : strlen(p);

                if (ll > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
                        const char *v = p + nl + 1;
                        size_t vl;

                        while (*v == ' ' || *v == '\t')
                                v++;
                        vl = (size_t)(p + ll - v);
                        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                                vl--;
                        if (out && size) {
                                if (vl >= size)
                                        vl = size - 1;
                                memcpy(out, v, vl);
                                out[vl] = '\0';
                        }
                        return true;
                }
                p = eol ? eol + 2 : NULL;
        }
        return false;
}

cJSON *wire_json(const wire_resp *resp)
{
        cJSON *j = cJSON_ParseWithLength(resp->body, resp->body_len);

        ck_assert_msg(j != NULL, "status %ld: body is not JSON: '%.300s'", resp->status,
                      resp->body);
        return j;
}

void wire_assert_error(const wire_resp *resp, long status, const char *type)
{
        char ct[128] = "";
        cJSON *j, *e, *d;

        ck_assert_msg(resp->status == status, "status %ld (curl %d), want %ld; body '%.300s'",
                      resp->status, resp->curl_rc, status, resp->body);
        ck_assert_msg(wire_header(resp, "Content-Type", ct, sizeof(ct)),
                      "error without Content-Type");
        ck_assert_msg(strncmp(ct, "application/json", 16) == 0, "Content-Type '%s'", ct);
        j = wire_json(resp);
        e = cJSON_GetObjectItemCaseSensitive(j, "error");
        d = cJSON_GetObjectItemCaseSensitive(j, "detail");
        ck_assert_msg(cJSON_IsString(e), "no \"error\" string in '%s'", resp->body);
        ck_assert_msg(strcmp(e->valuestring, type) == 0, "error '%s', want '%s'", e->valuestring,
                      type);
        ck_assert_msg(cJSON_IsString(d), "no \"detail\" string in '%s'", resp->body);
        cJSON_Delete(j);
}

void wire_create(char id[SH_ID_LEN + 1])
{
        wire_resp r;
        cJSON *j, *rid;

        wire_http("POST", "/sandboxes", "{}", &r);
        ck_assert_msg(r.status == 200, "create: status %ld (curl %d): %s", r.status, r.curl_rc,
                      r.body);
        j = wire_json(&r);
        rid = cJSON_GetObjectItemCaseSensitive(j, "remote_id");
        ck_assert_msg(cJSON_IsString(rid) && strlen(rid->valuestring) == SH_ID_LEN,
                      "remote_id in '%s'", r.body);
        memcpy(id, rid->valuestring, SH_ID_LEN + 1);
        cJSON_Delete(j);
        wire_resp_free(&r);
}

long wire_upload(const char *id, const char *path, const void *data, size_t len)
{
        char p[4096];
        wire_resp r;
        long status;

        snprintf(p, sizeof(p), "/sandboxes/%s/file?path=%s", id, path);
        wire_http_ex("PUT", p, data ? data : "", len, "application/octet-stream", NULL, 0, &r);
        status = r.status;
        wire_resp_free(&r);
        return status;
}

cJSON *wire_get_json(const char *id, const char *what, const char *query)
{
        char p[4096];
        wire_resp r;
        cJSON *j;

        snprintf(p, sizeof(p), "/sandboxes/%s/%s%s%s", id, what, query ? "?" : "",
                 query ? query : "");
        wire_http("GET", p, NULL, &r);
        ck_assert_msg(r.status == 200, "GET %s: status %ld: %s", p, r.status, r.body);
        j = wire_json(&r);
        wire_resp_free(&r);
        return j;
}

/* ---- raw sockets ------------------------------------------------------------------------ */

int wire_connect_raw(void)
{
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(W.port)};
        struct timeval tv = {.tv_sec = 5};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect: %s",
                      strerror(errno));
        return fd;
}

void wire_send_all(int fd, const void *s, size_t len)
{
        const char *p = s;

        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

                if (n < 0 && errno == EINTR)
                        continue;
                ck_assert_msg(n > 0, "send: %s", strerror(errno));
                p += n;
                len -= (size_t)n;
        }
}

/* ---- the transport alone ------------------------------------------------------------------ */

static struct {
        int stopfd;
        pthread_t thread;
} L = {.stopfd = -1};

void wire_transport_config(sh_config *cfg)
{
        char *argv[] = {"sandbox-host", "--listen=127.0.0.1:0", "--root=/nonexistent", NULL};
        char *envp[] = {NULL};
        char *msg = NULL;

        sh_log_set_level(SH_LOG_ERROR);
        ck_assert_int_eq(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
        ck_assert_int_eq(sh_config_parse(cfg, 3, argv, envp, &msg), SH_CONFIG_OK);
}

static void on_loop_stop(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_loop_stop(l);
}

static void *loop_thread(void *arg)
{
        sh_loop_run(arg);
        return NULL;
}

void wire_loop_thread_start(sh_loop *loop)
{
        L.stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        ck_assert_int_ge(L.stopfd, 0);
        ck_assert_ptr_nonnull(sh_loop_add_io(loop, L.stopfd, EPOLLIN, on_loop_stop, NULL));
        ck_assert_int_eq(pthread_create(&L.thread, NULL, loop_thread, loop), 0);
}

void wire_loop_thread_stop(void)
{
        uint64_t one = 1;
        struct timespec ts;

        ck_assert_int_eq(write(L.stopfd, &one, sizeof(one)), (int)sizeof(one));
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 10;
        ck_assert_int_eq(pthread_timedjoin_np(L.thread, NULL, &ts), 0);
        close(L.stopfd);
        L.stopfd = -1;
}

size_t wire_keep(char *out, size_t size, size_t *len, const char *p, size_t k)
{
        size_t room = size - 1 - *len;

        memcpy(out + *len, p, k < room ? k : room);
        *len += k < room ? k : room;
        out[*len] = '\0';
        return k;
}

CURL *wire_curl(const char *url, const char *method, curl_write_callback body,
                curl_write_callback head, void *data)
{
        CURL *c = curl_easy_init();

        ck_assert_ptr_nonnull(c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)WIRE_TIMEOUT_MS);
        curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
        if (strcmp(method, "HEAD") == 0)
                curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        else
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, data);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, head);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, data);
        return c;
}
