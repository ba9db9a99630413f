/* vmtest.c: the end-to-end test of sandbox-host on cgroup v2, run inside the test VM
 * (tests/vm/README.md), and the helper commands it runs inside the sandboxes. Static, libc
 * only (the VM has no Python, no curl).
 *
 *   vmtest e2e DAEMON CGDIR   start DAEMON in cgroup CGDIR (empty, of its own), drive it over
 *                             HTTP/1.1 and print "RESULT <name> ok|fail <detail>" per check
 *   vmtest egress DAEMON CGDIR  the same with egress on (issue 24): a /v1 sandbox's policy
 *                             against listeners in a network namespace the test makes
 *   vmtest volumes DAEMON CGDIR  the same with host and named volumes (issue 25): /v1
 *                             sandboxes mounting them, the VM's directories behind them
 *   vmtest connect ADDR PORT MS  connect within MS ms, print what the listener said
 *   vmtest memhog MIB         touch MIB MiB of anonymous memory; "survived" if not killed
 *   vmtest forkloop N [MS]    fork up to N children (each pauses, fds closed), print
 *                             "forked=K errno=E", hold them MS ms, kill them, exit 0
 *
 * Every wait is bounded. Checks that need an earlier step that failed report fail, so the
 * host always sees every name. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HTTP_TIMEOUT_MS 60000 /* TCG is slow; the daemon answers in milliseconds normally */
#define PIDS_MAX        32

/* ---- helpers run inside a sandbox ------------------------------------------------------- */

static int cmd_memhog(int mib)
{
        size_t len = (size_t)mib << 20;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        if (p == MAP_FAILED) {
                perror("mmap");
                return 2;
        }
        for (size_t i = 0; i < len; i += 4096)
                p[i] = 1;
        puts("survived");
        return 0;
}

static int cmd_forkloop(int n, int hold_ms)
{
        pid_t *kids = calloc((size_t)n, sizeof(pid_t));
        int forked = 0, err = 0;

        if (!kids)
                return 2;
        for (int i = 0; i < n; i++) {
                pid_t p = fork();

                if (p == 0) {
                        /* hold a pid, nothing else: the exec must not wait for our pipes */
                        for (int fd = 0; fd < 3; fd++)
                                close(fd);
                        for (;;)
                                pause();
                }
                if (p < 0) {
                        err = errno;
                        break;
                }
                kids[forked++] = p;
        }
        printf("forked=%d errno=%d\n", forked, err);
        fflush(stdout);
        if (hold_ms > 0)
                usleep((useconds_t)hold_ms * 1000);
        for (int i = 0; i < forked; i++)
                kill(kids[i], SIGKILL);
        for (int i = 0; i < forked; i++)
                waitpid(kids[i], NULL, 0);
        return 0;
}

/* The disk-limit attacks (issue 10, item 6), each printing one "key=value ..." line: they run
 * inside a sandbox whose workspace has a project quota. */
static int cmd_fill(const char *path, int mib)
{
        static char buf[1 << 20];
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644), err = 0;
        long long n = 0;
        struct stat st;

        memset(buf, 'x', sizeof(buf));
        for (int i = 0; fd >= 0 && i < mib; i++) {
                ssize_t w = write(fd, buf, sizeof(buf));

                if (w < 0) {
                        err = errno;
                        break;
                }
                n += w;
        }
        if (fd < 0)
                err = errno;
        if (fd >= 0 && fsync(fd) < 0 && !err)
                err = errno;
        if (fd < 0 || fstat(fd, &st) < 0)
                st.st_blocks = -1;
        printf("written=%lld errno=%d allocated=%lld\n", n, err, (long long)st.st_blocks * 512);
        return 0;
}

static int cmd_falloc(const char *path, int mib)
{
        int fd = open(path, O_WRONLY | O_CREAT, 0644);
        int err = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)mib << 20);
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0)
                st.st_blocks = -1;
        printf("errno=%d allocated=%lld\n", err, (long long)st.st_blocks * 512);
        return 0;
}

/* A file unlinked but kept open: no walk sees it. */
static int cmd_ghost(int mib)
{
        static char buf[1 << 20];
        int fd = open("ghost", O_RDWR | O_CREAT, 0644), err = 0;
        long long n = 0;

        if (fd < 0 || unlink("ghost") < 0)
                err = errno;
        memset(buf, 'x', sizeof(buf));
        for (int i = 0; !err && i < mib; i++) {
                ssize_t w = write(fd, buf, sizeof(buf));

                if (w < 0) {
                        err = errno;
                        break;
                }
                n += w;
        }
        printf("written=%lld errno=%d\n", n, err);
        return 0;
}

static int cmd_symlinks(int max)
{
        char target[4001], name[32];
        int n = 0, err = 0;

        memset(target, 't', 4000);
        target[4000] = '\0';
        for (; n < max; n++) {
                snprintf(name, sizeof(name), "l%d", n);
                if (symlink(target, name) < 0) {
                        err = errno;
                        break;
                }
        }
        printf("links=%d errno=%d\n", n, err);
        return 0;
}

static int cmd_files(int max)
{
        char name[32];
        int n = 0, err = 0;

        for (; n < max; n++) {
                int fd;

                snprintf(name, sizeof(name), "e%d", n);
                fd = open(name, O_WRONLY | O_CREAT, 0644);
                if (fd < 0) {
                        err = errno;
                        break;
                }
                close(fd);
        }
        printf("files=%d errno=%d\n", n, err);
        return 0;
}

/* Leave the quota: give a file of ours the default project (0, no limit) with
 * FS_IOC_FSSETXATTR, which the owner may call from the initial user namespace. */
static int cmd_projid(const char *path, int mib)
{
        struct fsxattr fx;
        int fd = open(path, O_RDWR | O_CREAT, 0644), e = 0;

        if (fd < 0 || ioctl(fd, FS_IOC_FSGETXATTR, &fx) < 0) {
                e = errno;
        } else {
                fx.fsx_projid = 0;
                if (ioctl(fd, FS_IOC_FSSETXATTR, &fx) < 0)
                        e = errno;
        }
        if (fd >= 0)
                close(fd);
        printf("setxattr=%d ", e);
        return cmd_fill(path, mib);
}

/* Leave the quota another way: clear PROJINHERIT on a directory of ours (FS_IOC_SETFLAGS, the
 * owner may), so what is created in it gets the default project. */
static int cmd_noinherit(const char *dir, int mib)
{
        char f[512];
        int fd, flags = 0, e = 0;

        snprintf(f, sizeof(f), "%s/f", dir);
        if (mkdir(dir, 0755) < 0 || (fd = open(dir, O_RDONLY | O_DIRECTORY)) < 0) {
                e = errno;
        } else {
                if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0) {
                        e = errno;
                } else {
                        flags &= ~FS_PROJINHERIT_FL;
                        if (ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0)
                                e = errno;
                }
                close(fd);
        }
        printf("setflags=%d ", e);
        return cmd_fill(f, mib);
}

/* Connect to addr:tcp_port within ms and read what the listener says (one line) into out:
 * 0, or the errno (ETIMEDOUT when nothing answered in time: a dropped SYN). */
static int connect_read(const char *addr, int tcp_port, int ms, char *out, size_t outsz)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tcp_port)};
        int fd, e = 0;
        socklen_t el = sizeof(e);
        struct pollfd p;
        ssize_t n;

        out[0] = '\0';
        if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
                return EINVAL;
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return errno;
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
                e = errno;
                close(fd);
                return e;
        }
        p = (struct pollfd){.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, ms) <= 0) {
                close(fd);
                return ETIMEDOUT;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e) {
                e = e ? e : errno;
                close(fd);
                return e;
        }
        p = (struct pollfd){.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ms) > 0 && (n = read(fd, out, outsz - 1)) > 0) {
                out[n] = '\0';
                out[strcspn(out, "\n")] = '\0';
        }
        close(fd);
        return 0;
}

/* `vmtest connect ADDR PORT MS` inside a sandbox: "connected=1 errno=0 read=[...]". */
static int cmd_connect(const char *addr, int tcp_port, int ms)
{
        char got[256];
        int e = connect_read(addr, tcp_port, ms, got, sizeof(got));

        printf("connected=%d errno=%d (%s) read=[%s]\n", e == 0, e, strerror(e), got);
        return 0;
}

/* ---- small utilities -------------------------------------------------------------------- */

static uint64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

        nanosleep(&ts, NULL);
}

static int n_fail;

/* One RESULT line; the detail is flattened to a single line. */
__attribute__((format(printf, 3, 4))) static void result(const char *name, bool ok, const char *fmt,
                                                         ...)
{
        char d[1500];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(d, sizeof(d), fmt, ap);
        va_end(ap);
        for (char *p = d; *p; p++)
                if (*p == '\n' || *p == '\r' || (unsigned char)*p < 0x20)
                        *p = ' ';
        printf("RESULT %s %s %s\n", name, ok ? "ok" : "fail", d);
        fflush(stdout);
        if (!ok)
                n_fail++;
}

/* Whole file into a static buffer (trailing newline kept); NULL if it cannot be read. */
static char *slurp(const char *path)
{
        static char bufs[16][65536];
        static unsigned k;
        char *b = bufs[k++ % 16];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t len = 0;
        ssize_t n;

        if (fd < 0)
                return NULL;
        while (len < sizeof(bufs[0]) - 1 && (n = read(fd, b + len, sizeof(bufs[0]) - 1 - len)) > 0)
                len += (size_t)n;
        close(fd);
        b[len] = '\0';
        return b;
}

static const char *slurp_or(const char *path, const char *dflt)
{
        const char *s = slurp(path);

        return s ? s : dflt;
}

__attribute__((format(printf, 1, 2))) static const char *pathf(const char *fmt, ...)
{
        static char bufs[8][4096];
        static unsigned k;
        char *b = bufs[k++ % 8];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(b, sizeof(bufs[0]), fmt, ap);
        va_end(ap);
        return b;
}

static bool exists(const char *p)
{
        struct stat st;

        return lstat(p, &st) == 0;
}

/* Value of `key` in a flat keyed file ("key value" lines), or -1. */
static long long keyed(const char *path, const char *key)
{
        const char *t = slurp(path);
        size_t kl = strlen(key);

        for (const char *l = t; l && *l;) {
                if (strncmp(l, key, kl) == 0 && l[kl] == ' ')
                        return atoll(l + kl + 1);
                l = strchr(l, '\n');
                if (l)
                        l++;
        }
        return -1;
}

/* Subdirectories of dir, space separated, sorted as readdir gives them. */
static const char *subdirs(const char *dir)
{
        static char b[4096];
        DIR *d = opendir(dir);
        struct dirent *de;
        size_t off = 0;

        b[0] = '\0';
        if (!d)
                return "(none: cannot open)";
        while ((de = readdir(d)) && off < sizeof(b) - 80) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                off += (size_t)snprintf(b + off, sizeof(b) - off, "%s%s", off ? " " : "",
                                        de->d_name);
        }
        closedir(d);
        return b;
}

static size_t b64dec(const char *in, size_t inlen, char *out, size_t outmax)
{
        uint32_t acc = 0;
        int bits = 0;
        size_t n = 0;

        for (size_t i = 0; i < inlen; i++) {
                int c = (unsigned char)in[i], v;

                if (c >= 'A' && c <= 'Z')
                        v = c - 'A';
                else if (c >= 'a' && c <= 'z')
                        v = c - 'a' + 26;
                else if (c >= '0' && c <= '9')
                        v = c - '0' + 52;
                else if (c == '+')
                        v = 62;
                else if (c == '/')
                        v = 63;
                else
                        continue;
                acc = (acc << 6) | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        if (n + 1 < outmax)
                                out[n++] = (char)((acc >> bits) & 0xff);
                }
        }
        out[n] = '\0';
        return n;
}

/* ---- a minimal HTTP/1.1 client ---------------------------------------------------------- */

static int port;

typedef struct {
        int status;
        char *body; /* de-chunked, NUL-terminated */
        size_t len;
        char err[200]; /* why the request failed (status 0) */
} resp;

static void resp_free(resp *r)
{
        free(r->body);
        memset(r, 0, sizeof(*r));
}

static int http_connect(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0)
                return -1;
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static int http_send(int fd, const char *method, const char *path, const char *body)
{
        char *req = NULL;
        size_t blen = body ? strlen(body) : 0;
        int n = asprintf(&req,
                         "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n"
                         "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                         method, path, port, blen, body ? body : "");
        size_t off = 0;

        if (n < 0)
                return -1;
        while (off < (size_t)n) {
                ssize_t w = write(fd, req + off, (size_t)n - off);

                if (w <= 0) {
                        free(req);
                        return -1;
                }
                off += (size_t)w;
        }
        free(req);
        return 0;
}

/* De-chunk in place; returns the new length, or -1 on a malformed body. */
static long dechunk(char *b, size_t len)
{
        size_t in = 0, out = 0;

        for (;;) {
                char *end;
                unsigned long sz;

                if (in >= len)
                        return -1; /* cut before the last chunk */
                sz = strtoul(b + in, &end, 16);
                end = strstr(end, "\r\n");
                if (!end)
                        return -1;
                in = (size_t)(end - b) + 2;
                if (sz == 0)
                        return (long)out;
                if (in + sz > len)
                        return -1;
                memmove(b + out, b + in, sz);
                out += sz;
                in += sz + 2;
        }
}

/* Read the whole response (the server closes: Connection: close) within timeout_ms. */
static void http_read(int fd, resp *r, unsigned timeout_ms)
{
        uint64_t deadline = now_ms() + timeout_ms;
        size_t cap = 65536, len = 0;
        char *buf = malloc(cap), *hend, *line;
        bool chunked;

        if (!buf) {
                snprintf(r->err, sizeof(r->err), "out of memory");
                return;
        }
        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int64_t left = (int64_t)(deadline - now_ms());
                ssize_t n;

                if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
                        snprintf(r->err, sizeof(r->err), "timeout after %u ms (%zu bytes read)",
                                 timeout_ms, len);
                        free(buf);
                        return;
                }
                if (len + 4096 > cap) {
                        char *nb = realloc(buf, cap * 2);

                        if (!nb) {
                                free(buf);
                                snprintf(r->err, sizeof(r->err), "out of memory");
                                return;
                        }
                        buf = nb;
                        cap *= 2;
                }
                n = read(fd, buf + len, cap - len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        hend = strstr(buf, "\r\n\r\n");
        if (len < 12 || strncmp(buf, "HTTP/1.", 7) != 0 || !hend) {
                snprintf(r->err, sizeof(r->err), "malformed response (%zu bytes)", len);
                free(buf);
                return;
        }
        r->status = atoi(buf + 9);
        *hend = '\0';
        chunked = false;
        for (line = strstr(buf, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
                char *eol = strstr(line + 2, "\r\n"), *c;

                if (strncasecmp(line + 2, "transfer-encoding:", 18) == 0 &&
                    (c = strcasestr(line + 2, "chunked")) && (!eol || c < eol))
                        chunked = true;
        }
        r->len = len - (size_t)(hend + 4 - buf);
        r->body = malloc(r->len + 1);
        if (!r->body) {
                r->status = 0;
                free(buf);
                return;
        }
        memcpy(r->body, hend + 4, r->len);
        r->body[r->len] = '\0';
        free(buf);
        if (chunked) {
                long k = dechunk(r->body, r->len);

                if (k < 0) {
                        snprintf(r->err, sizeof(r->err), "bad or cut chunked body (%d)", r->status);
                        r->status = 0;
                        return;
                }
                r->len = (size_t)k;
                r->body[r->len] = '\0';
        }
}

/* One exchange whose answer must come within timeout_ms: past it, status 0 and the reason
 * in err (a call timeout: "it answered in time" is never a measured duration). */
static resp http_within(const char *method, const char *path, const char *body, unsigned timeout_ms)
{
        resp r = {0};
        int fd = http_connect();

        if (fd < 0) {
                snprintf(r.err, sizeof(r.err), "connect: %s", strerror(errno));
                return r;
        }
        if (http_send(fd, method, path, body) < 0)
                snprintf(r.err, sizeof(r.err), "send: %s", strerror(errno));
        else
                http_read(fd, &r, timeout_ms);
        close(fd);
        return r;
}

static resp http(const char *method, const char *path, const char *body)
{
        return http_within(method, path, body, HTTP_TIMEOUT_MS);
}

/* ---- tiny JSON field extraction (the daemon's frames are flat objects) -------------------- */

static const char *json_field(const char *obj, const char *key)
{
        char pat[80];
        const char *p;

        snprintf(pat, sizeof(pat), "\"%s\"", key);
        p = strstr(obj, pat);
        if (!p)
                return NULL;
        p += strlen(pat);
        while (*p == ' ' || *p == ':')
                p++;
        return p;
}

static bool json_int(const char *obj, const char *key, long *ret)
{
        const char *p = json_field(obj, key);

        if (!p || !(isdigit((unsigned char)*p) || *p == '-'))
                return false;
        *ret = strtol(p, NULL, 10);
        return true;
}

static bool json_true(const char *obj, const char *key)
{
        const char *p = json_field(obj, key);

        return p && strncmp(p, "true", 4) == 0;
}

/* A string value without escapes (ids, base64) into out. */
static bool json_str(const char *obj, const char *key, char *out, size_t outsz)
{
        const char *p = json_field(obj, key), *e;

        if (!p || *p != '"')
                return false;
        e = strchr(p + 1, '"');
        if (!e || (size_t)(e - p - 1) >= outsz)
                return false;
        memcpy(out, p + 1, (size_t)(e - p - 1));
        out[e - p - 1] = '\0';
        return true;
}

/* ---- the exec API --------------------------------------------------------------------- */

typedef struct {
        bool ok;     /* an exit frame was read */
        long exit;   /* its code */
        long signal; /* 0 if absent */
        bool oom;
        char out[8192]; /* decoded */
        char err[8192];
        char frame[1024]; /* the last line, or why there is none */
} execres;

/* POST /sandboxes/{id}/exec with `cmd` (a JSON array) and read to the end. */
static execres run(const char *id, const char *cmd)
{
        execres x = {0};
        char body[2048], path[256], *last = NULL, *p;
        resp r;
        char b64[12000];

        snprintf(body, sizeof(body), "{\"cmd\":%s}", cmd);
        snprintf(path, sizeof(path), "/sandboxes/%s/exec", id);
        r = http("POST", path, body);
        if (r.status != 200) {
                snprintf(x.frame, sizeof(x.frame), "status %d %s %.300s", r.status, r.err,
                         r.body ? r.body : "");
                resp_free(&r);
                return x;
        }
        /* the last non-empty line */
        for (p = strtok(r.body, "\n"); p; p = strtok(NULL, "\n"))
                if (*p)
                        last = p;
        if (!last) {
                snprintf(x.frame, sizeof(x.frame), "empty stream");
                resp_free(&r);
                return x;
        }
        snprintf(x.frame, sizeof(x.frame), "%.1000s", last);
        if (json_int(last, "exit", &x.exit)) {
                x.ok = true;
                json_int(last, "signal", &x.signal);
                x.oom = json_true(last, "oom");
                if (json_str(last, "out", b64, sizeof(b64)))
                        b64dec(b64, strlen(b64), x.out, sizeof(x.out));
                if (json_str(last, "err", b64, sizeof(b64)))
                        b64dec(b64, strlen(b64), x.err, sizeof(x.err));
        }
        resp_free(&r);
        return x;
}

/* Start an exec and leave it streaming: the connected socket, or -1. */
static int run_open(const char *id, const char *cmd)
{
        char body[2048], path[256];
        int fd = http_connect();

        if (fd < 0)
                return -1;
        snprintf(body, sizeof(body), "{\"cmd\":%s}", cmd);
        snprintf(path, sizeof(path), "/sandboxes/%s/exec", id);
        if (http_send(fd, "POST", path, body) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

/* ---- processes seen from the VM (the initial pid namespace) ----------------------------- */

/* pid of the (first) process whose argv is exactly {a0, a1}, 0 if none. */
static pid_t find_proc(const char *a0, const char *a1)
{
        DIR *d = opendir("/proc");
        struct dirent *de;
        pid_t found = 0;

        if (!d)
                return 0;
        while (!found && (de = readdir(d))) {
                char p[300], buf[256];
                ssize_t n;
                int fd;

                if (!isdigit((unsigned char)de->d_name[0]))
                        continue;
                snprintf(p, sizeof(p), "/proc/%s/cmdline", de->d_name);
                fd = open(p, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (n <= 0)
                        continue;
                buf[n] = '\0';
                if (strcmp(buf, a0) == 0 && (size_t)n > strlen(a0) + 1 &&
                    strcmp(buf + strlen(a0) + 1, a1) == 0)
                        found = (pid_t)atoi(de->d_name);
        }
        closedir(d);
        return found;
}

static pid_t wait_proc(const char *a0, const char *a1, unsigned ms)
{
        uint64_t deadline = now_ms() + ms;
        pid_t p;

        while (!(p = find_proc(a0, a1)) && now_ms() < deadline)
                sleep_ms(20);
        return p;
}

/* Dead: gone, or a zombie (killed, not yet reaped by the sandbox's init). */
static bool proc_dead(pid_t pid)
{
        const char *st = slurp(pathf("/proc/%d/stat", (int)pid));
        const char *c;

        if (!st)
                return true;
        c = strrchr(st, ')');
        return c && (c[2] == 'Z' || c[2] == 'X');
}

static bool wait_dead(pid_t pid, unsigned ms)
{
        uint64_t deadline = now_ms() + ms;

        while (!proc_dead(pid)) {
                if (now_ms() >= deadline)
                        return false;
                sleep_ms(20);
        }
        return true;
}

static bool wait_gone(const char *path, unsigned ms)
{
        uint64_t deadline = now_ms() + ms;

        while (exists(path)) {
                if (now_ms() >= deadline)
                        return false;
                sleep_ms(20);
        }
        return true;
}

/* The v2 cgroup path of pid ("/a/b"), or "?" */
static const char *cg_of(pid_t pid)
{
        static char b[4][1024];
        static unsigned k;
        char *o = b[k++ % 4];
        const char *t = slurp(pid ? pathf("/proc/%d/cgroup", (int)pid) : "/proc/self/cgroup");

        if (!t || strncmp(t, "0::", 3) != 0)
                return "?";
        snprintf(o, sizeof(b[0]), "%s", t + 3);
        o[strcspn(o, "\n")] = '\0';
        return o;
}

/* ---- the daemon ------------------------------------------------------------------------- */

static pid_t daemon_pid;
static int daemon_err = -1; /* the daemon's stderr until it listens */
static const char *daemon_root = "/var/lib/sandbox-host";
static const char *const *daemon_env; /* extra NAME=value for the daemon, NULL-terminated */

/* Start the daemon in cgroup `cgdir` (it must be alone there, as v2 requires before it can
 * hand controllers down); wait for "listening on http://127.0.0.1:PORT". */
static bool start_daemon(const char *bin, const char *cgdir, char *why, size_t whysz)
{
        int pfd[2];
        char line[4096];
        size_t len = 0;
        uint64_t deadline;

        port = 0;
        if (pipe2(pfd, O_CLOEXEC) < 0) {
                snprintf(why, whysz, "pipe: %s", strerror(errno));
                return false;
        }
        daemon_pid = fork();
        if (daemon_pid < 0) {
                snprintf(why, whysz, "fork: %s", strerror(errno));
                return false;
        }
        if (daemon_pid == 0) {
                int fd = open(pathf("%s/cgroup.procs", cgdir), O_WRONLY | O_CLOEXEC);

                if (fd < 0 || write(fd, "0", 1) != 1) {
                        dprintf(pfd[1], "vmtest: cannot join %s: %s\n", cgdir, strerror(errno));
                        _exit(120);
                }
                close(fd);
                dup2(pfd[1], 1);
                dup2(pfd[1], 2);
                fd = open("/dev/null", O_RDONLY);
                dup2(fd, 0);
                for (const char *const *e = daemon_env; e && *e; e++)
                        putenv((char *)*e);
                execl(bin, bin, "--listen=127.0.0.1:0", pathf("--root=%s", daemon_root),
                      "--nfs-root=/var/lib/archive", "--memory-max=32M", "--pids-max=32",
                      "--cpu-max=0.5", "--log-level=debug", (char *)NULL);
                dprintf(2, "vmtest: exec %s: %s\n", bin, strerror(errno));
                _exit(127);
        }
        close(pfd[1]);
        daemon_err = pfd[0];
        deadline = now_ms() + 60000;
        line[0] = '\0';
        while (now_ms() < deadline) {
                struct pollfd p = {.fd = daemon_err, .events = POLLIN};
                ssize_t n;
                char *l;

                if (poll(&p, 1, 500) <= 0)
                        continue;
                n = read(daemon_err, line + len, sizeof(line) - 1 - len);
                if (n <= 0) {
                        snprintf(why, whysz, "daemon exited before listening: %.800s", line);
                        return false;
                }
                len += (size_t)n;
                line[len] = '\0';
                if ((l = strstr(line, "listening on http://127.0.0.1:"))) {
                        port = atoi(l + strlen("listening on http://127.0.0.1:"));
                        break;
                }
                if (len > sizeof(line) - 512) { /* keep the tail */
                        memmove(line, line + len - 256, 256);
                        len = 256;
                        line[len] = '\0';
                }
        }
        fputs(line, stderr);
        if (!port) {
                snprintf(why, whysz, "no 'listening on' within 60 s: %.800s", line);
                return false;
        }
        /* from now on copy its log to the console, in a child of ours */
        if (fork() == 0) {
                char b[4096];
                ssize_t n;

                while ((n = read(daemon_err, b, sizeof(b))) > 0)
                        if (write(2, b, (size_t)n) < 0)
                                break;
                _exit(0);
        }
        close(daemon_err);
        return true;
}

/* waitpid with a bound: the status, or -1 on timeout. */
static int wait_exit(pid_t pid, unsigned ms)
{
        uint64_t deadline = now_ms() + ms;
        int st;

        for (;;) {
                pid_t w = waitpid(pid, &st, WNOHANG);

                if (w == pid)
                        return st;
                if (w < 0 || now_ms() >= deadline)
                        return -1;
                sleep_ms(20);
        }
}

/* SIGTERM to the daemon and its exit status within 60 s; -1 (and SIGKILL) when it does not
 * exit. */
static int stop_daemon(void)
{
        int st;

        kill(daemon_pid, SIGTERM);
        st = wait_exit(daemon_pid, 60000);
        if (st == -1) {
                kill(daemon_pid, SIGKILL);
                wait_exit(daemon_pid, 5000);
        }
        return st;
}

/* ---- the checks ------------------------------------------------------------------------- */

static char svc[512];     /* the daemon's own cgroup (directory) */
static char svc_rel[512]; /* the same as /proc/<pid>/cgroup shows it */
static char sub[1024];    /* its subtree, svc/sandbox-host.<instance> */
static char sub_rel[1024];

static bool create_with(const char *body, char *id, size_t idsz, char *why, size_t whysz)
{
        resp r = http("POST", "/sandboxes", body);
        bool ok = r.status == 200 && r.body && json_str(r.body, "remote_id", id, idsz) && *id;

        if (!ok)
                snprintf(why, whysz, "POST /sandboxes: %d %s %.300s", r.status, r.err,
                         r.body ? r.body : "");
        resp_free(&r);
        return ok;
}

static bool create(char *id, size_t idsz, char *why, size_t whysz)
{
        return create_with("{}", id, idsz, why, whysz);
}

static uint64_t mtime_ns(const char *path)
{
        struct stat st;

        if (stat(path, &st) < 0)
                return 0;
        return (uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec;
}

/* The daemon's subtree, "<own cgroup>/sandbox-host.<instance>", from the leaf it moved
 * itself into ("<subtree>/daemon"), as a directory. */
static bool daemon_subtree(char *out, size_t outsz)
{
        const char *cg = cg_of(daemon_pid);
        size_t n = strlen(cg);

        if (n < 8 || strcmp(cg + n - 7, "/daemon") != 0)
                return false;
        snprintf(out, outsz, "/sys/fs/cgroup%.*s", (int)(n - 7), cg);
        return strstr(out, "/sandbox-host.") != NULL;
}

static bool healthz_ok(void)
{
        resp r = http("GET", "/healthz", NULL);
        bool ok = r.status == 200;

        resp_free(&r);
        return ok;
}

/* Crash safety, at the VM's root cgroup: on v2 a non-root cgroup whose controllers a killed
 * daemon had enabled for its subtree takes no process any more (no internal processes), so
 * a supervisor can restart a daemon into the very same cgroup only at the root. The next
 * start with the same state root must remove the killed one's sandbox processes, cgroups,
 * mounts and directories. */
static void crash_restart(const char *bin)
{
        char why[1200] = "", id[128] = "", subroot[1024] = "", sbcg[1200] = "";
        bool up, have, dead = false, cg_gone = false, dir_gone = false, mounts_gone = false;
        bool alive_after_kill = false, left_before = false, h = false;
        pid_t a, sl = 0;
        int fd = -1, st = -1;
        const char *m;

        up = start_daemon(bin, "/sys/fs/cgroup", why, sizeof(why));
        a = daemon_pid;
        have = up && daemon_subtree(subroot, sizeof(subroot)) &&
               create(id, sizeof(id), why, sizeof(why));
        if (have) {
                snprintf(sbcg, sizeof(sbcg), "%s/%s", subroot, id);
                fd = run_open(id, "[\"sleep\",\"1006\"]");
                sl = fd >= 0 ? wait_proc("sleep", "1006", 20000) : 0;
        }
        if (up) {
                kill(a, SIGKILL);
                wait_exit(a, 10000);
        }
        if (fd >= 0)
                close(fd);
        if (!sl) {
                result("e2e_crash_restart_cleans_leftovers", false,
                       "setup: daemon up=%d sandbox=%d sleep=%d %s", up, have, (int)sl, why);
                result("e2e_crash_restart_sigterm", false, "no restart");
                return;
        }
        sleep_ms(200);
        alive_after_kill = !proc_dead(sl);
        left_before = exists(sbcg); /* nobody removed it: the restart must */
        up = start_daemon(bin, "/sys/fs/cgroup", why, sizeof(why));
        if (up) {
                const char *mi;

                dead = wait_dead(sl, 10000);
                cg_gone = wait_gone(sbcg, 10000);
                dir_gone = wait_gone(pathf("/var/lib/sandbox-host/%s", id), 10000);
                mi = slurp_or("/proc/self/mountinfo", "?");
                mounts_gone = !strstr(mi, id);
                h = healthz_ok();
        }
        m = slurp_or("/proc/self/mountinfo", "");
        result("e2e_crash_restart_cleans_leftovers",
               left_before && up && dead && cg_gone && dir_gone && mounts_gone && h,
               "SIGKILLed daemon left sandbox %s (cgroup left=%d, 'sleep 1006' pid %d "
               "alive=%d); restart up=%d "
               "%s; then: sleep dead=%d, cgroup %s removed=%d, state dir removed=%d, mounts "
               "removed=%d%s%.300s, healthz=%d",
               id, left_before, (int)sl, alive_after_kill, up, up ? "" : why, dead, sbcg, cg_gone,
               dir_gone, mounts_gone, mounts_gone ? "" : " ",
               mounts_gone ? "" : (strstr(m, id) ?: ""), h);
        if (up)
                st = stop_daemon();
        result("e2e_crash_restart_sigterm",
               up && st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && wait_gone(subroot, 10000),
               "status=0x%x, %s removed=%d, root cgroup children now [%s]", st, subroot,
               !exists(subroot), subdirs("/sys/fs/cgroup"));
}

/* GET /v1/sandboxes/{id} until its state is `want` (at most ms): true when it was. */
static bool os_wait_state(const char *id, const char *want, unsigned ms, char *seen, size_t seensz)
{
        char path[256];
        uint64_t deadline = now_ms() + ms;

        snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
        for (;;) {
                resp r = http("GET", path, NULL);
                bool ok = r.status == 200 && r.body && json_str(r.body, "state", seen, seensz) &&
                          strcmp(seen, want) == 0;

                if (r.status != 200)
                        snprintf(seen, seensz, "GET %d", r.status);
                resp_free(&r);
                if (ok)
                        return true;
                if (now_ms() >= deadline)
                        return false;
                sleep_ms(20);
        }
}

/* Whether the mtime of `path` stays the same for `ms` (nothing writes it). */
static bool still(const char *path, unsigned ms)
{
        uint64_t t0 = mtime_ns(path), deadline = now_ms() + ms;

        while (now_ms() < deadline) {
                sleep_ms(50);
                if (mtime_ns(path) != t0)
                        return false;
        }
        return t0 != 0;
}

/* Whether the mtime of `path` changes within `ms`. */
static bool moves(const char *path, unsigned ms)
{
        uint64_t t0 = mtime_ns(path), deadline = now_ms() + ms;

        while (now_ms() < deadline) {
                sleep_ms(50);
                if (mtime_ns(path) != t0)
                        return true;
        }
        return false;
}

/* Every child cgroup of the sandbox but the helpers' has cgroup.freeze 1 and is frozen. */
static bool leaves_frozen(const char *sbdir, char *why, size_t whysz)
{
        DIR *d = opendir(sbdir);
        struct dirent *de;
        int n = 0;
        bool ok = d != NULL;

        snprintf(why, whysz, "%s", d ? "" : "no cgroup");
        while (d && (de = readdir(d))) {
                const char *dir, *fz;
                long long ev;

                if (de->d_type != DT_DIR || de->d_name[0] == '.' ||
                    strncmp(de->d_name, "helper-", 7) == 0)
                        continue;
                dir = pathf("%s/%s", sbdir, de->d_name);
                fz = slurp_or(pathf("%s/cgroup.freeze", dir), "?");
                ev = keyed(pathf("%s/cgroup.events", dir), "frozen");
                n++;
                if (strcmp(fz, "1\n") != 0 || ev != 1) {
                        ok = false;
                        snprintf(why + strlen(why), whysz - strlen(why),
                                 " %s freeze=%.3s frozen=%lld", de->d_name, fz, ev);
                }
        }
        if (d)
                closedir(d);
        return ok && n > 0;
}

/* A process of one of the sandbox's exec cgroups (not its init, not a helper), 0: none. */
static pid_t leaf_pid(const char *sbdir)
{
        DIR *d = opendir(sbdir);
        struct dirent *de;
        pid_t pid = 0;

        while (d && !pid && (de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.' ||
                    strcmp(de->d_name, "init") == 0 || strncmp(de->d_name, "helper-", 7) == 0)
                        continue;
                pid = (pid_t)atoi(slurp_or(pathf("%s/%s/cgroup.procs", sbdir, de->d_name), "0"));
        }
        if (d)
                closedir(d);
        return pid;
}

static void os_pause_v2(void)
{
        const char *body = "{\"image\":{\"uri\":\"default\"},\"entrypoint\":[\"sh\",\"-c\","
                           "\"while :; do date > /workspace/tick; done\"],\"timeout\":600}";
        char id[128] = "", path[256], seen[64] = "", why[600] = "", sid[128] = "";
        char sbdir[1200], tick[600]; /* copies: pathf's buffers rotate */
        bool made, paused, frozen, stopped, ready = false, kept = false, running, ran;
        pid_t sh_pid = 0;
        resp r;

        r = http("POST", "/v1/sandboxes", body);
        made = r.status == 202 && r.body && json_str(r.body, "id", id, sizeof(id));
        snprintf(why, sizeof(why), "create %d %s %.300s", r.status, r.err, r.body ? r.body : "");
        resp_free(&r);
        if (!made) {
                result("os_pause_v2_freezes", false, "%s", why);
                return;
        }
        snprintf(sbdir, sizeof(sbdir), "%s/%s", sub, id);
        snprintf(tick, sizeof(tick), "%s/%s/workspace/tick", daemon_root, id);
        for (uint64_t deadline = now_ms() + 20000; !exists(tick) && now_ms() < deadline;)
                sleep_ms(20);
        sh_pid = leaf_pid(sbdir);
        snprintf(path, sizeof(path), "/v1/sandboxes/%s/pause", id);
        r = http("POST", path, NULL);
        snprintf(why, sizeof(why), "pause %d %s", r.status, r.err);
        paused = r.status == 202 && os_wait_state(id, "Paused", 10000, seen, sizeof(seen));
        resp_free(&r);
        frozen = paused && leaves_frozen(sbdir, why + strlen(why), sizeof(why) - strlen(why));
        stopped = paused && still(tick, 1000);
        result("os_pause_v2_freezes", paused && frozen && stopped,
               "%s; state %s; leaves frozen=%d; tick still=%d", why, seen, frozen, stopped);

        /* a snapshot of the paused sandbox: the copy freezes and thaws what it froze only */
        snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshots", id);
        r = http("POST", path, "{}");
        if (r.status == 202 && r.body && json_str(r.body, "id", sid, sizeof(sid))) {
                char state[32] = "";

                snprintf(path, sizeof(path), "/v1/snapshots/%s", sid);
                for (uint64_t deadline = now_ms() + 30000; now_ms() < deadline; sleep_ms(50)) {
                        resp g = http("GET", path, NULL);
                        bool done = g.status == 200 && g.body &&
                                    json_str(g.body, "state", state, sizeof(state)) &&
                                    strcmp(state, "Creating") != 0;

                        resp_free(&g);
                        if (done)
                                break;
                }
                ready = strcmp(state, "Ready") == 0;
                kept = ready && leaves_frozen(sbdir, why, sizeof(why)) && still(tick, 1000);
                snprintf(why, sizeof(why), "snapshot %s %s", sid, state);
        } else {
                snprintf(why, sizeof(why), "snapshot %d %s %.200s", r.status, r.err,
                         r.body ? r.body : "");
        }
        resp_free(&r);
        result("os_pause_v2_snapshot_keeps_frozen", paused && ready && kept, "%s; frozen after=%d",
               why, kept);

        snprintf(path, sizeof(path), "/v1/sandboxes/%s/resume", id);
        r = http("POST", path, NULL);
        running = r.status == 202 && os_wait_state(id, "Running", 10000, seen, sizeof(seen));
        snprintf(why, sizeof(why), "resume %d %s; state %s", r.status, r.err, seen);
        resp_free(&r);
        ran = running && moves(tick, 5000);
        result("os_resume_v2_thaws", running && ran, "%s; tick moves=%d", why, ran);

        /* paused again, then deleted: the frozen processes die, the cgroup goes */
        snprintf(path, sizeof(path), "/v1/sandboxes/%s/pause", id);
        r = http("POST", path, NULL);
        paused = r.status == 202 && os_wait_state(id, "Paused", 10000, seen, sizeof(seen));
        resp_free(&r);
        snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
        r = http("DELETE", path, NULL);
        {
                bool dead = sh_pid > 0 && wait_dead(sh_pid, 20000);
                bool gone = wait_gone(sbdir, 20000);

                result("os_pause_v2_delete_kills", paused && r.status == 204 && dead && gone,
                       "paused=%d (%s) DELETE=%d %s; entrypoint pid %d dead=%d; %s removed=%d",
                       paused, seen, r.status, r.err, (int)sh_pid, dead, sbdir, gone);
        }
        resp_free(&r);
        if (sid[0]) {
                snprintf(path, sizeof(path), "/v1/snapshots/%s", sid);
                r = http("DELETE", path, NULL);
                resp_free(&r);
        }
}

static int e2e(const char *bin, const char *cgdir)
{
        char why[1200] = "", id[128] = "", id2[128] = "", exec_cg[256] = "";
        bool up, have_sb = false;
        execres x;
        resp r;

        snprintf(svc, sizeof(svc), "%s", cgdir);
        snprintf(svc_rel, sizeof(svc_rel), "%s", cgdir + strlen("/sys/fs/cgroup"));

        /* -- the daemon starts, alone in its cgroup, and moves itself into a leaf */
        up = start_daemon(bin, cgdir, why, sizeof(why));
        result("e2e_daemon_start", up, "port=%d pid=%d %s", port, (int)daemon_pid, why);
        if (up && daemon_subtree(sub, sizeof(sub)))
                snprintf(sub_rel, sizeof(sub_rel), "%s", sub + strlen("/sys/fs/cgroup"));
        else if (up)
                snprintf(sub, sizeof(sub), "%s/(no sandbox-host.* subtree: %s)", svc, subdirs(svc));
        {
                const char *cg = up ? cg_of(daemon_pid) : "?";
                char want[1200];
                const char *sc = slurp_or(pathf("%s/cgroup.subtree_control", svc), "?");
                const char *procs = slurp_or(pathf("%s/cgroup.procs", svc), "?");

                size_t sl = strlen(svc_rel);

                snprintf(want, sizeof(want), "%s/sandbox-host.<instance>/daemon", svc_rel);
                result("e2e_daemon_in_leaf",
                       up && strncmp(cg, svc_rel, sl) == 0 &&
                               strncmp(cg + sl, "/sandbox-host.", 14) == 0 &&
                               strchr(cg + sl + 14, '/') &&
                               strcmp(strchr(cg + sl + 14, '/'), "/daemon") == 0 && exists(sub) &&
                               strstr(sc, "memory") && strstr(sc, "pids") && strstr(sc, "cpu") &&
                               procs[0] == '\0',
                       "daemon cgroup=%s want=%s; %s: subtree_control=[%s] procs=[%s]", cg, want,
                       svc_rel, sc, procs);
        }
        r = up ? http("GET", "/healthz", NULL) : (resp){0};
        result("e2e_healthz_v2",
               r.status == 200 && r.body && strstr(r.body, "\"cgroup.v2\"") &&
                       !strstr(r.body, "\"cgroup.v1\""),
               "status=%d %s %.600s", r.status, r.err, r.body ? r.body : "");
        resp_free(&r);

        /* -- create: a cgroup of its own below the subtree, with the configured limits, the
         *    worker in a leaf ("init") beside the exec cgroups */
        why[0] = '\0';
        have_sb = up && create(id, sizeof(id), why, sizeof(why));
        if (have_sb) {
                const char *sb = pathf("%s/%s", sub, id);

                result("e2e_create", exists(sb), "id=%s cgroup %s exists=%d children=[%s]", id, sb,
                       exists(sb), subdirs(sb));
        } else {
                result("e2e_create", false, "%s", why);
        }
        {
                const char *sb = pathf("%s/%s", sub, id);
                const char *mem = slurp_or(pathf("%s/memory.max", sb), "?\n");
                const char *pids = slurp_or(pathf("%s/pids.max", sb), "?\n");
                const char *cpu = slurp_or(pathf("%s/cpu.max", sb), "?\n");
                const char *swp = slurp_or(pathf("%s/memory.swap.max", sb), "0\n");
                const char *iprocs = slurp_or(pathf("%s/init/cgroup.procs", sb), "");
                const char *sprocs = slurp_or(pathf("%s/cgroup.procs", sb), "?");

                result("e2e_sandbox_limits",
                       have_sb && strcmp(mem, "33554432\n") == 0 && strcmp(pids, "32\n") == 0 &&
                               strcmp(cpu, "50000 100000\n") == 0 && strcmp(swp, "0\n") == 0 &&
                               iprocs[0] && sprocs[0] == '\0',
                       "memory.max=%.20s pids.max=%.20s cpu.max=%.30s memory.swap.max=%.20s "
                       "init.procs=[%.60s] sandbox.procs=[%.60s]",
                       mem, pids, cpu, swp, iprocs, sprocs);
        }

        /* -- the /v1 surface (OPENSANDBOX.md section 2): resourceLimits become the
         *    sandbox's own cgroup v2 limits; above the host's maxima they are lowered */
        if (up) {
                static const struct {
                        const char *name, *limits, *mem, *cpu;
                } cases[] = {
                        {"os_limits_v2", "{\"cpu\":\"250m\",\"memory\":\"16Mi\"}", "16777216\n",
                         "25000 100000\n"},
                        {"os_limits_v2_lowered", "{\"cpu\":\"1\",\"memory\":\"2Gi\"}", "33554432\n",
                         "50000 100000\n"},
                };
                unsigned i;

                for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                        char body[512], vid[128] = "", path[256];
                        const char *sb, *mem = "?", *cpu = "?";
                        bool made, gone = false;
                        int del = 0;

                        snprintf(body, sizeof(body),
                                 "{\"image\":{\"uri\":\"default\"},\"entrypoint\":[\"true\"],"
                                 "\"resourceLimits\":%s,\"timeout\":600}",
                                 cases[i].limits);
                        r = http("POST", "/v1/sandboxes", body);
                        made = r.status == 202 && r.body &&
                               json_str(r.body, "id", vid, sizeof(vid));
                        snprintf(why, sizeof(why), "%d %s %.300s", r.status, r.err,
                                 r.body ? r.body : "");
                        resp_free(&r);
                        sb = pathf("%s/%s", sub, vid);
                        if (made) {
                                mem = slurp_or(pathf("%s/memory.max", sb), "?\n");
                                cpu = slurp_or(pathf("%s/cpu.max", sb), "?\n");
                                snprintf(path, sizeof(path), "/v1/sandboxes/%s", vid);
                                r = http("DELETE", path, NULL);
                                del = r.status;
                                resp_free(&r);
                                gone = wait_gone(sb, 10000);
                        }
                        result(cases[i].name,
                               made && strcmp(mem, cases[i].mem) == 0 &&
                                       strcmp(cpu, cases[i].cpu) == 0 && del == 204 && gone,
                               "create %s: memory.max=%.20s cpu.max=%.30s (want %.20s %.30s) "
                               "delete=%d cgroup gone=%d",
                               why, mem, cpu, cases[i].mem, cases[i].cpu, del, gone);
                }
        }

        /* -- the /v1 execd (OPENSANDBOX.md section 3.1) on cgroup v2: a command's SSE stream
         *    through `sh -c` (this image has no bash), and metrics from the sandbox's own
         *    cgroup (cpu.stat usage_usec, memory.current) under a CPU hog */
        if (up) {
                char vid[128] = "", path[256], detail[900] = "";
                double cores = -1, total = -1, used = -1, pct = -1, best = -1;
                bool made, cmd_ok = false, bg_ok = false;
                uint64_t t0;

                r = http("POST", "/v1/sandboxes",
                         "{\"image\":{\"uri\":\"default\"},\"entrypoint\":[\"sleep\",\"3600\"],"
                         "\"resourceLimits\":{\"cpu\":\"250m\",\"memory\":\"16Mi\"},"
                         "\"timeout\":600}");
                made = r.status == 202 && r.body && json_str(r.body, "id", vid, sizeof(vid));
                snprintf(why, sizeof(why), "create %d %s %.200s", r.status, r.err,
                         r.body ? r.body : "");
                resp_free(&r);
                if (made) {
                        snprintf(path, sizeof(path), "/v1/sandboxes/%s/proxy/44772/command", vid);
                        r = http("POST", path, "{\"command\":\"echo \\\"$0\\\"; exit 3\"}");
                        cmd_ok = r.status == 200 && r.body &&
                                 strstr(r.body, "{\"type\":\"stdout\",\"text\":\"sh\"") &&
                                 strstr(r.body, "\"evalue\":\"3\"") &&
                                 !strstr(r.body, "execution_complete");
                        snprintf(detail, sizeof(detail), "command %d %.300s; ", r.status,
                                 r.body ? r.body : r.err);
                        resp_free(&r);
                        r = http("POST", path,
                                 "{\"command\":\"while :; do :; done\",\"background\":true}");
                        bg_ok = r.status == 200 && r.body && strstr(r.body, "execution_complete");
                        resp_free(&r);
                        snprintf(path, sizeof(path), "/v1/sandboxes/%s/proxy/44772/metrics", vid);
                        for (t0 = now_ms(); now_ms() - t0 < 20000 && best <= 20;) {
                                r = http_within("GET", path, NULL, 5000);
                                if (r.status == 200 && r.body) {
                                        const char *f;

                                        if ((f = json_field(r.body, "cpu_count")))
                                                cores = strtod(f, NULL);
                                        if ((f = json_field(r.body, "mem_total_mib")))
                                                total = strtod(f, NULL);
                                        if ((f = json_field(r.body, "mem_used_mib")))
                                                used = strtod(f, NULL);
                                        if ((f = json_field(r.body, "cpu_used_pct")))
                                                pct = strtod(f, NULL);
                                        if (pct > 100)
                                                best = 1000; /* out of bounds: fails below */
                                        else if (pct > best)
                                                best = pct;
                                } else {
                                        snprintf(detail + strlen(detail),
                                                 sizeof(detail) - strlen(detail), "metrics %d %s; ",
                                                 r.status, r.err);
                                        resp_free(&r);
                                        break;
                                }
                                resp_free(&r);
                                usleep(300 * 1000);
                        }
                        snprintf(path, sizeof(path), "/v1/sandboxes/%s", vid);
                        r = http("DELETE", path, NULL);
                        resp_free(&r);
                }
                result("os_command_v2_sh", made && cmd_ok, "%s %s", why, detail);
                result("os_metrics_v2",
                       made && bg_ok && cores == 0.25 && total == 16 && used > 0 && used <= 16 &&
                               best > 20 && best <= 100,
                       "%s background=%d cpu_count=%g mem_total_mib=%g mem_used_mib=%g "
                       "cpu_used_pct best=%g %s",
                       why, bg_ok, cores, total, used, best, detail);
        }

        /* -- exit codes and output */
        {
                static const struct {
                        const char *cmd;
                        long code, sig;
                } cases[] = {
                        {"[\"true\"]", 0, 0},
                        {"[\"false\"]", 1, 0},
                        {"[\"sh\",\"-c\",\"exit 7\"]", 7, 0},
                        {"[\"/nonexistent/cmd\"]", 127, 0},
                        {"[\"/etc/passwd\"]", 126, 0},
                        {"[\"sh\",\"-c\",\"kill -9 $$\"]", 137, 9},
                        {"[\"sh\",\"-c\",\"kill -TERM $$\"]", 143, 15},
                };
                char d[1200] = "";
                size_t off = 0;
                bool ok = have_sb;

                for (size_t i = 0; have_sb && i < sizeof(cases) / sizeof(cases[0]); i++) {
                        bool c;

                        x = run(id, cases[i].cmd);
                        c = x.ok && x.exit == cases[i].code && x.signal == cases[i].sig && !x.oom;
                        ok &= c;
                        off += (size_t)snprintf(d + off, sizeof(d) - off, "%s=%ld%s ", cases[i].cmd,
                                                x.exit, c ? "" : " (WRONG)");
                        if (!c && off < sizeof(d))
                                off += (size_t)snprintf(d + off, sizeof(d) - off, "[%.200s] ",
                                                        x.frame);
                        if (off >= sizeof(d))
                                break;
                }
                result("e2e_exec_exit_codes", ok, "%s", have_sb ? d : "no sandbox");
        }
        x = have_sb ? run(id, "[\"sh\",\"-c\",\"echo out; echo err >&2; exit 3\"]") : (execres){0};
        result("e2e_exec_output",
               x.ok && x.exit == 3 && strcmp(x.out, "out\n") == 0 && strcmp(x.err, "err\n") == 0,
               "exit=%ld out=[%s] err=[%s] frame=%.300s", x.exit, x.out, x.err, x.frame);

        /* -- each exec in a cgroup of its own below the sandbox's, seen from inside (the
         *    sandbox's cgroup namespace is rooted at its worker's leaf "init"): one that left a
         *    process running keeps its cgroup, the next exec gets another; an exec that left
         *    nothing hands its empty cgroup to the next one */
        {
                execres a = have_sb ? run(id, "[\"sh\",\"-c\",\"sleep 3 </dev/null >/dev/null "
                                              "2>&1 & cat /proc/self/cgroup\"]")
                                    : (execres){0};
                execres b = have_sb ? run(id, "[\"cat\",\"/proc/self/cgroup\"]") : (execres){0};
                execres c = have_sb ? run(id, "[\"cat\",\"/proc/self/cgroup\"]") : (execres){0};
                unsigned na = 0, nb = 0, nc = 0;
                char ea[8] = "", eb[8] = "", ec[8] = "";
                bool ok = a.ok && b.ok && c.ok && a.exit == 0 && b.exit == 0 && c.exit == 0 &&
                          sscanf(a.out, "0::/../exec-%u%1[\n]", &na, ea) == 2 &&
                          sscanf(b.out, "0::/../exec-%u%1[\n]", &nb, eb) == 2 &&
                          sscanf(c.out, "0::/../exec-%u%1[\n]", &nc, ec) == 2 && na != nb &&
                          nb == nc && strchr(a.out, '\n') == a.out + strlen(a.out) - 1;

                result("e2e_exec_own_cgroup", ok, "inside: left a process=[%s] next=[%s] then=[%s]",
                       a.out, b.out, c.out);
        }

        /* -- PID 1 is sandbox-init holding CAP_SETGID, CAP_SETUID and CAP_SETPCAP only (the
         *    exec cgroup joins above needed no other on cgroup v2), and the hard fd limit of
         *    every command is 1024 */
        {
                execres p = have_sb ? run(id, "[\"cat\",\"/proc/1/status\"]") : (execres){0};
                execres n = have_sb ? run(id, "[\"sh\",\"-c\",\"ulimit -Hn\"]") : (execres){0};
                bool ok = p.ok && p.exit == 0 && strstr(p.out, "Name:\tsandbox-init\n") &&
                          strstr(p.out, "CapEff:\t00000000000001c0\n") &&
                          strstr(p.out, "CapBnd:\t00000000000001c0\n") &&
                          strstr(p.out, "NoNewPrivs:\t1\n") && n.ok && n.exit == 0 &&
                          strcmp(n.out, "1024\n") == 0;

                result("e2e_pid1_init", ok, "ulimit -Hn=[%s] status=[%.600s]", n.out, p.out);
        }

        /* -- ... and from outside, with the disconnect: the command, a background child and a
         *    setsid double-forked escapee all sit in the exec's cgroup; closing the connection
         *    kills all three and the exec cgroup goes */
        {
                int fd = have_sb ? run_open(id, "[\"sh\",\"-c\",\"sleep 1001 & setsid sh -c "
                                                "'sleep 1002 >/dev/null 2>&1 </dev/null &'; "
                                                "exec sleep 1003\"]")
                                 : -1;
                pid_t p1 = fd >= 0 ? wait_proc("sleep", "1001", 20000) : 0;
                pid_t p2 = fd >= 0 ? wait_proc("sleep", "1002", 20000) : 0;
                pid_t p3 = fd >= 0 ? wait_proc("sleep", "1003", 20000) : 0;
                const char *c1 = cg_of(p1), *c2 = cg_of(p2), *c3 = cg_of(p3);
                char want_prefix[1400];
                bool placed, dead, gone, alive_after;
                const char *leaf = strrchr(c3, '/');

                snprintf(want_prefix, sizeof(want_prefix), "%s/%s/exec-", sub_rel, id);
                placed = p1 && p2 && p3 && strcmp(c1, c3) == 0 && strcmp(c2, c3) == 0 &&
                         strncmp(c3, want_prefix, strlen(want_prefix)) == 0 && leaf &&
                         !strchr(c3 + strlen(want_prefix), '/');
                snprintf(exec_cg, sizeof(exec_cg), "%s", leaf ? leaf + 1 : "?");
                result("e2e_exec_cgroup_outside", placed,
                       "pids %d %d %d; cgroups %s | %s | %s; want %s<N>", (int)p1, (int)p2, (int)p3,
                       c1, c2, c3, want_prefix);
                if (fd >= 0)
                        close(fd);
                dead = p1 && p2 && p3 && wait_dead(p1, 20000) && wait_dead(p2, 5000) &&
                       wait_dead(p3, 5000);
                gone = placed && wait_gone(pathf("%s/%s/%s", sub, id, exec_cg), 20000);
                x = have_sb ? run(id, "[\"true\"]") : (execres){0};
                alive_after = x.ok && x.exit == 0;
                result("e2e_disconnect_kills", dead && gone && alive_after,
                       "after close: all three dead=%d (%d %d %d), cgroup %s removed=%d; sandbox "
                       "still runs execs=%d; sandbox children=[%s]",
                       dead, p1 && proc_dead(p1), p2 && proc_dead(p2), p3 && proc_dead(p3), exec_cg,
                       gone, alive_after, subdirs(pathf("%s/%s", sub, id)));
        }

        /* -- memory.max: the hog is OOM-killed, the frame says so */
        {
                long long before = keyed(pathf("%s/%s/memory.events", sub, id), "oom_kill");

                x = have_sb ? run(id, "[\"vmtest\",\"memhog\",\"64\"]") : (execres){0};
                long long after = keyed(pathf("%s/%s/memory.events", sub, id), "oom_kill");

                result("e2e_memory_oom_kill",
                       x.ok && x.exit == 137 && x.signal == 9 && x.oom && after > before &&
                               before >= 0,
                       "frame=%.300s; sandbox memory.events oom_kill %lld -> %lld", x.frame, before,
                       after);
        }
        x = have_sb ? run(id, "[\"sh\",\"-c\",\"vmtest memhog 64 | cat\"]") : (execres){0};
        result("e2e_memory_oom_pipeline", x.ok && x.exit == 0 && x.oom && x.signal == 0,
               "a pipeline whose first stage is OOM-killed, last stage exits 0: frame=%.300s",
               x.frame);
        r = have_sb ? http("GET", "/healthz", NULL) : (resp){0};
        result("e2e_healthz_after_oom", r.status == 200, "status=%d %s", r.status, r.err);
        resp_free(&r);

        /* -- pids.max: a fork loop stops at the limit, with EAGAIN */
        {
                long long before = keyed(pathf("%s/%s/pids.events", sub, id), "max");
                int forked = -1, e = -1;

                x = have_sb ? run(id, "[\"vmtest\",\"forkloop\",\"64\"]") : (execres){0};
                long long after = keyed(pathf("%s/%s/pids.events", sub, id), "max");

                sscanf(x.out, "forked=%d errno=%d", &forked, &e);
                /* (Linux 6.1 counts pids.events "max" in the forking task's cgroup, the
                 * exec's, which is gone by now: the sandbox's count is information only) */
                result("e2e_pids_limit",
                       x.ok && x.exit == 0 && forked > 0 && forked < PIDS_MAX && e == EAGAIN,
                       "forked=%d errno=%d (pids.max=%d) exit=%ld; sandbox pids.events max %lld "
                       "-> %lld; frame=%.200s",
                       forked, e, PIDS_MAX, x.exit, before, after, x.frame);
        }
        r = have_sb ? http("GET", "/healthz", NULL) : (resp){0};
        result("e2e_healthz_after_fork_loop", r.status == 200, "status=%d %s", r.status, r.err);
        resp_free(&r);

        /* -- the daemon keeps answering while a sandbox sits at its pids limit */
        {
                int fd = have_sb ? run_open(id, "[\"vmtest\",\"forkloop\",\"64\",\"3000\"]") : -1;
                const char *pc = pathf("%s/%s/pids.current", sub, id);
                uint64_t deadline = now_ms() + 20000;
                long cur = 0;
                resp rest = {0};

                while (fd >= 0 && (cur = atol(slurp_or(pc, "0"))) < PIDS_MAX && now_ms() < deadline)
                        sleep_ms(10);
                /* answered within 1 s, or the call fails */
                r = fd >= 0 ? http_within("GET", "/healthz", NULL, 1000) : (resp){0};
                if (fd >= 0) {
                        http_read(fd, &rest, HTTP_TIMEOUT_MS);
                        close(fd);
                }
                result("e2e_healthz_during_fork_bomb",
                       cur >= PIDS_MAX && r.status == 200 && rest.status == 200,
                       "sandbox pids.current=%ld (max %d); GET /healthz within 1 s: %d %s; exec "
                       "stream %d %.100s",
                       cur, PIDS_MAX, r.status, r.err, rest.status,
                       rest.body ? rest.body : rest.err);
                resp_free(&r);
                resp_free(&rest);
        }

        /* -- finished execs leave no cgroup behind: only the worker's leaf remains */
        {
                const char *sb = pathf("%s/%s", sub, id);
                uint64_t deadline = now_ms() + 20000;
                const char *kids = subdirs(sb);

                while (have_sb && strcmp(kids, "init") != 0 && now_ms() < deadline) {
                        sleep_ms(50);
                        kids = subdirs(sb);
                }
                result("e2e_exec_cgroups_removed", have_sb && strcmp(kids, "init") == 0,
                       "children of the sandbox cgroup: [%s]", kids);
        }

        /* -- persist: every persist freezes the sandbox's leaf cgroups while rsync runs in a
         *    helper cgroup beside them (below the sandbox's: billed to it, not frozen with
         *    it), then thaws them; the helper cgroup goes */
        {
                char id3[128] = "", why3[600] = "", path[256];
                bool have3 = up && create_with("{\"item_id\":\"vm-item\"}", id3, sizeof(id3), why3,
                                               sizeof(why3));
                const char *sb3 = pathf("%s/%s", sub, id3);
                const char *tick = pathf("/var/lib/sandbox-host/%s/workspace/tick", id3);
                const char *kids = "?";
                uint64_t t0 = 0, t1 = 0, deadline;
                int fd = -1;

                x = have3 ? run(id3, "[\"sh\",\"-c\",\"echo persisted > f\"]") : (execres){0};
                fd = have3 ? run_open(id3, "[\"sh\",\"-c\",\"while :; do date > tick; "
                                           "done\"]")
                           : -1;
                for (deadline = now_ms() + 20000; fd >= 0 && !exists(tick) && now_ms() < deadline;)
                        sleep_ms(20);
                snprintf(path, sizeof(path), "/sandboxes/%s/persist", id3);
                r = have3 ? http("POST", path, "{}") : (resp){0};
                result("e2e_persist",
                       r.status == 204 && strcmp(slurp_or("/var/lib/archive/vm-item/f", ""),
                                                 "persisted\n") == 0,
                       "%s POST persist=%d %s %.200s; archive f=[%s]", have3 ? id3 : why3, r.status,
                       r.err, r.body ? r.body : "",
                       slurp_or("/var/lib/archive/vm-item/f", "(none)"));
                resp_free(&r);
                t0 = mtime_ns(tick);
                for (deadline = now_ms() + 5000; now_ms() < deadline;) {
                        sleep_ms(50);
                        if ((t1 = mtime_ns(tick)) != t0)
                                break;
                }
                result("e2e_persist_thaws", have3 && t0 && t1 != t0, "tick mtime %llu then %llu",
                       (unsigned long long)t0, (unsigned long long)t1);
                for (deadline = now_ms() + 20000; have3 && now_ms() < deadline; sleep_ms(50))
                        if (!strstr(kids = subdirs(sb3), "helper-"))
                                break;
                result("e2e_persist_helper_cgroup_removed", have3 && !strstr(kids, "helper-"),
                       "children of %s: [%s]", sb3, kids);
                if (fd >= 0)
                        close(fd);
                if (have3) {
                        snprintf(path, sizeof(path), "/sandboxes/%s", id3);
                        r = http("DELETE", path, NULL);
                        resp_free(&r);
                }
        }

        /* -- the /v1 pause (OPENSANDBOX.md section 2) on cgroup v2: every leaf of the sandbox
         *    frozen (cgroup.freeze, cgroup.events frozen 1) and its entrypoint stopped; a
         *    snapshot of the paused sandbox leaves it frozen; resume thaws; a delete of a
         *    paused sandbox kills its frozen processes and removes its cgroup */
        if (up)
                os_pause_v2();

        /* -- delete: kills everything (an escapee that setsid'd and outlived its exec too) and
         *    removes the sandbox's cgroup */
        {
                pid_t esc;
                bool dead, gone;
                const char *sb = pathf("%s/%s", sub, id);

                x = have_sb ? run(id, "[\"sh\",\"-c\",\"setsid sleep 1004 >/dev/null 2>&1 "
                                      "</dev/null &\"]")
                            : (execres){0};
                esc = have_sb ? wait_proc("sleep", "1004", 20000) : 0;
                r = have_sb ? http("DELETE", pathf("/sandboxes/%s", id), NULL) : (resp){0};
                dead = esc && wait_dead(esc, 20000);
                gone = have_sb && wait_gone(sb, 20000);
                result("e2e_delete", r.status == 204 && dead && gone,
                       "DELETE=%d %s; escapee pid %d (cgroup %s) dead=%d; %s removed=%d "
                       "(subtree children now [%s])",
                       r.status, r.err, (int)esc, esc ? cg_of(esc) : "-", dead, sb, gone,
                       subdirs(sub));
                resp_free(&r);
                x = have_sb ? run(id, "[\"true\"]") : (execres){0};
                result("e2e_exec_after_delete_404", have_sb && strstr(x.frame, "status 404"),
                       "%.300s", x.frame);
        }

        /* -- SIGTERM with a sandbox running a command: exit 0, nothing of ours left, our
         *    cgroup as it was before (no process, no controllers enabled) */
        {
                bool have2 = up && create(id2, sizeof(id2), why, sizeof(why));
                int fd = have2 ? run_open(id2, "[\"sleep\",\"1005\"]") : -1;
                pid_t sl = fd >= 0 ? wait_proc("sleep", "1005", 20000) : 0;
                int st = -1;
                bool dead, gone;
                const char *sc, *procs;

                if (up)
                        st = stop_daemon();
                if (fd >= 0)
                        close(fd);
                dead = sl && wait_dead(sl, 10000);
                gone = up && wait_gone(sub, 10000);
                sc = slurp_or(pathf("%s/cgroup.subtree_control", svc), "?");
                procs = slurp_or(pathf("%s/cgroup.procs", svc), "?");
                result("e2e_sigterm_exit_0", st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                       "status=0x%x (%s) with sandbox %s running 'sleep 1005'", st,
                       st == -1        ? "did not exit in 60 s"
                       : WIFEXITED(st) ? "exited"
                                       : "signaled",
                       have2 ? id2 : why);
                result("e2e_sigterm_cleans_up",
                       sl && dead && gone && sc[0] == '\0' && procs[0] == '\0',
                       "sleep pid %d dead=%d; %s removed=%d; %s: children=[%s] "
                       "subtree_control=[%s] procs=[%s]",
                       (int)sl, dead, sub, gone, svc_rel, subdirs(svc), sc, procs);
        }
        crash_restart(bin);
        return n_fail ? 1 : 0;
}

/* ---- project quota (issue 10, item 6): the daemon on an ext4 state root with the project
 *      and quota features, mounted prjquota ------------------------------------------------- */

/* small, so that every attack ends in a second or two even under TCG */
#define QLIMIT  (4LL << 20)
#define QINODES 1024
#define QSLACK  (1LL << 20) /* directories, the quota files' own blocks */
#define QBASE   3000000000U /* SANDBOX_HOST_DISK_PROJECT_BASE's default */
#define QMAX    256U        /* SANDBOX_HOST_MAX_SANDBOXES's default */

static long long fs_used(const char *path)
{
        struct statvfs v;

        if (statvfs(path, &v) < 0)
                return -1;
        return (long long)(v.f_blocks - v.f_bfree) * (long long)v.f_frsize;
}

/* PUT `size` bytes to a workspace path; the daemon may answer early (413) and close. */
static resp http_put(const char *id, const char *wpath, size_t size)
{
        static char chunk[65536];
        resp r = {0};
        int fd = http_connect();
        size_t off = 0;

        memset(chunk, 'u', sizeof(chunk));
        if (fd < 0) {
                snprintf(r.err, sizeof(r.err), "connect: %s", strerror(errno));
                return r;
        }
        dprintf(fd,
                "PUT /sandboxes/%s/file?path=%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                "Connection: close\r\nContent-Type: application/octet-stream\r\n"
                "Content-Length: %zu\r\n\r\n",
                id, wpath, port, size);
        while (off < size) {
                size_t n = size - off < sizeof(chunk) ? size - off : sizeof(chunk);
                ssize_t w = send(fd, chunk, n, MSG_NOSIGNAL);

                if (w <= 0)
                        break;
                off += (size_t)w;
        }
        http_read(fd, &r, HTTP_TIMEOUT_MS);
        close(fd);
        return r;
}

static void drop(const char *id)
{
        resp r = http("DELETE", pathf("/sandboxes/%s", id), NULL);

        resp_free(&r);
}

/* RESULT `name`: the workspace of sandbox `id` (when `ok`) has one of this daemon's project
 * ids and PROJINHERIT. */
static void check_projid(const char *name, bool ok, const char *id)
{
        struct fsxattr fx = {0};
        int fd = ok ? open(pathf("%s/%s/workspace", daemon_root, id),
                           O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                    : -1;
        bool got = fd >= 0 && ioctl(fd, FS_IOC_FSGETXATTR, &fx) == 0;

        if (fd >= 0)
                close(fd);
        result(name,
               got && fx.fsx_projid >= QBASE && fx.fsx_projid < QBASE + 2 * QMAX &&
                       (fx.fsx_xflags & FS_XFLAG_PROJINHERIT),
               "workspace projid=%u xflags=0x%x", fx.fsx_projid, fx.fsx_xflags);
}

/* RESULT <prefix>_delete_frees: with every sandbox deleted, the volume at `mnt` comes back to
 * `base` (bounded wait); RESULT <prefix>_sigterm_exit_0: the daemon then exits 0 on SIGTERM. */
static void frees_and_stops(const char *prefix, const char *mnt, long long base, bool up)
{
        uint64_t deadline = now_ms() + 20000;
        long long used;
        int st = -1;

        while ((used = fs_used(mnt) - base) > QSLACK && now_ms() < deadline)
                sleep_ms(50);
        result(pathf("%s_delete_frees", prefix), up && used <= QSLACK,
               "%lld bytes still taken after every sandbox was deleted", used);
        if (up)
                st = stop_daemon();
        result(pathf("%s_sigterm_exit_0", prefix),
               st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status=0x%x", st);
}

static void quota_volume_storage(bool up);

static int quota(const char *bin, const char *cgdir, const char *mnt)
{
        static const char *const env[] = {"SANDBOX_HOST_DISK_MAX=4M",
                                          "SANDBOX_HOST_DISK_INODES_MAX=1024",
                                          "SANDBOX_HOST_DISK_QUOTA=project", NULL};
        static char root[4096]; /* the daemon's state root (not pathf's: its buffers rotate) */
        char why[1200] = "", a[128] = "", b[128] = "", c[128] = "";
        long long base = fs_used(mnt), n = -1, alloc = -1, used;
        int e = -1, e2 = -1, k = -1;
        bool up, ok;
        execres x;
        resp r;

        /* As variables: a daemon that does not know them ignores them, and every attack
         * below then succeeds (each check fails on the code before the limit). */
        snprintf(root, sizeof(root), "%s/root", mnt);
        daemon_root = root;
        daemon_env = env;
        up = start_daemon(bin, cgdir, why, sizeof(why));
        result("quota_daemon_start", up, "port=%d root=%s %s", port, daemon_root, why);
        r = up ? http("GET", "/healthz", NULL) : (resp){0};
        result("quota_healthz_project",
               r.status == 200 && r.body && strstr(r.body, "\"disk-quota.project\""), "%d %.600s",
               r.status, r.body ? r.body : r.err);
        resp_free(&r);

        /* a regular file: stops at the limit, and that is all the host's volume gives (it
         * asks for more than the whole disk: without a limit the neighbour below fails) */
        ok = up && create(a, sizeof(a), why, sizeof(why));
        x = ok ? run(a, "[\"vmtest\",\"fill\",\"big\",\"300\"]") : (execres){0};
        sscanf(x.out, "written=%lld errno=%d allocated=%lld", &n, &e, &alloc);
        used = fs_used(mnt) - base;
        result("quota_fill", x.ok && e == EDQUOT && n <= QLIMIT && alloc <= QLIMIT,
               "written=%lld errno=%d allocated=%lld (limit %lld) %s %.200s", n, e, alloc, QLIMIT,
               why, x.frame);
        result("quota_host_volume", x.ok && used <= QLIMIT + QSLACK,
               "the state root's filesystem gave %lld bytes (limit %lld)", used, QLIMIT);
        check_projid("quota_workspace_project_id", ok, a);

        /* ... and a neighbour keeps writing */
        ok = up && create(b, sizeof(b), why, sizeof(why));
        x = ok ? run(b, "[\"vmtest\",\"fill\",\"f\",\"2\"]") : (execres){0};
        n = -1, e = -1;
        sscanf(x.out, "written=%lld errno=%d", &n, &e);
        result("quota_neighbour_writes", x.ok && e == 0 && n == 2LL << 20,
               "with a full neighbour: written=%lld errno=%d %.200s", n, e, x.frame);
        drop(a);
        drop(b);

        /* preallocation */
        ok = up && create(a, sizeof(a), why, sizeof(why));
        x = ok ? run(a, "[\"vmtest\",\"falloc\",\"pre\",\"16\"]") : (execres){0};
        e = -1, alloc = -1;
        sscanf(x.out, "errno=%d allocated=%lld", &e, &alloc);
        result("quota_fallocate", x.ok && e == EDQUOT && alloc <= QLIMIT,
               "posix_fallocate 16M: errno=%d allocated=%lld %.200s", e, alloc, x.frame);
        drop(a);

        /* an unlinked file kept open */
        ok = up && create(a, sizeof(a), why, sizeof(why));
        x = ok ? run(a, "[\"vmtest\",\"ghost\",\"16\"]") : (execres){0};
        n = -1, e = -1;
        sscanf(x.out, "written=%lld errno=%d", &n, &e);
        result("quota_unlinked_file", x.ok && e == EDQUOT && n <= QLIMIT,
               "written=%lld errno=%d %.200s", n, e, x.frame);
        drop(a);

        /* symlink targets, empty files */
        ok = up && create(a, sizeof(a), why, sizeof(why));
        x = ok ? run(a, "[\"vmtest\",\"symlinks\",\"2048\"]") : (execres){0};
        k = -1, e = -1;
        sscanf(x.out, "links=%d errno=%d", &k, &e);
        result("quota_symlinks", x.ok && e == EDQUOT && (long long)k * 4096 <= QLIMIT,
               "links=%d errno=%d %.200s", k, e, x.frame);
        drop(a);
        ok = up && create(a, sizeof(a), why, sizeof(why));
        x = ok ? run(a, "[\"vmtest\",\"files\",\"2048\"]") : (execres){0};
        k = -1, e = -1;
        sscanf(x.out, "files=%d errno=%d", &k, &e);
        result("quota_inodes", x.ok && e == EDQUOT && k <= QINODES,
               "files=%d errno=%d (limit %d) %.200s", k, e, QINODES, x.frame);
        drop(a);

        /* a slot reused twice at once: both of its project ids are still charged with a
         * deleted sandbox's full tree while their removers work; the next create waits for
         * one to empty instead of failing with EDQUOT on its own workspace */
        {
                bool made = true;

                for (int round = 0; round < 2 && made; round++) {
                        made = up && create(a, sizeof(a), why, sizeof(why));
                        x = made ? run(a, "[\"vmtest\",\"files\",\"2048\"]") : (execres){0};
                        if (made)
                                drop(a);
                }
                ok = made && up && create(a, sizeof(a), why, sizeof(why));
                result("quota_slot_reused_at_once", ok, "%s", ok ? "" : why);
                if (ok)
                        drop(a);
        }

        /* an upload past the limit: 413 PayloadTooLarge */
        ok = up && create(c, sizeof(c), why, sizeof(why));
        x = ok ? run(c, "[\"vmtest\",\"fill\",\"big\",\"3\"]") : (execres){0};
        r = ok ? http_put(c, "up", 2u << 20) : (resp){0};
        result("quota_upload_413",
               r.status == 413 && r.body && strstr(r.body, "\"PayloadTooLarge\""),
               "PUT 2M into a workspace holding 3M of 4M: %d %.300s", r.status,
               r.body ? r.body : r.err);
        resp_free(&r);

        /* item 14: the workspace's mount shows no id */
        x = ok ? run(c, "[\"cat\",\"/proc/self/mountinfo\",\"/proc/1/mountinfo\"]") : (execres){0};
        result("quota_mountinfo_no_id", x.ok && x.exit == 0 && ok && !strstr(x.out, c), "%.600s",
               strstr(x.out, "/workspace") ?: x.out);
        drop(c);

        /* A sandbox process must not leave its project: these depend on the seccomp filter
         * refusing FS_IOC_FSSETXATTR and FS_IOC_SETFLAGS (src/isolation/seccomp.c). */
        ok = up && create(a, sizeof(a), why, sizeof(why));
        x = ok ? run(a, "[\"vmtest\",\"projid\",\"big\",\"16\"]") : (execres){0};
        e2 = -1, n = -1, e = -1;
        sscanf(x.out, "setxattr=%d written=%lld errno=%d", &e2, &n, &e);
        result("quota_projid_change_refused", x.ok && e == EDQUOT && n <= QLIMIT,
               "FS_IOC_FSSETXATTR projid=0: errno %d; then written=%lld errno=%d %.200s", e2, n, e,
               x.frame);
        drop(a);
        ok = up && create(a, sizeof(a), why, sizeof(why));
        x = ok ? run(a, "[\"vmtest\",\"noinherit\",\"d\",\"16\"]") : (execres){0};
        e2 = -1, n = -1, e = -1;
        sscanf(x.out, "setflags=%d written=%lld errno=%d", &e2, &n, &e);
        result("quota_projinherit_clear_refused", x.ok && e == EDQUOT && n <= QLIMIT,
               "FS_IOC_SETFLAGS -PROJINHERIT: errno %d; then written=%lld errno=%d %.200s", e2, n,
               e, x.frame);
        drop(a);

        /* a /v1 background command's log (issue 20): a file in {dir}/logs, in the workspace's
         * project, so it stops at the limit with the workspace's own files, and the sandbox's
         * writes then find it full */
        if (up) {
                char vid[128] = "", cid[64] = "", path[512], detail[600] = "";
                struct fsxattr wfx = {0}, lfx = {0}, ffx = {0};
                const char *const names[] = {"workspace", "logs", "logs/c-0"};
                struct fsxattr *fxs[] = {&wfx, &lfx, &ffx};
                bool made, done = false;
                long long got = -1;
                uint64_t t0;

                r = http("POST", "/v1/sandboxes",
                         "{\"image\":{\"uri\":\"default\"},\"entrypoint\":[\"sleep\",\"3600\"],"
                         "\"timeout\":600}");
                made = r.status == 202 && r.body && json_str(r.body, "id", vid, sizeof(vid));
                snprintf(detail, sizeof(detail), "create %d %.200s; ", r.status,
                         r.body ? r.body : r.err);
                resp_free(&r);
                if (made) {
                        snprintf(path, sizeof(path), "/v1/sandboxes/%s/proxy/44772/command", vid);
                        r = http("POST", path,
                                 "{\"command\":\"yes 0123456789abcdef | head -c 8388608\","
                                 "\"background\":true}");
                        made = r.status == 200 && r.body &&
                               json_str(r.body, "text", cid, sizeof(cid));
                        resp_free(&r);
                }
                for (t0 = now_ms(); made && !done && now_ms() - t0 < 30000; sleep_ms(100)) {
                        snprintf(path, sizeof(path),
                                 "/v1/sandboxes/%s/proxy/44772/command/status/%s", vid, cid);
                        r = http("GET", path, NULL);
                        done = r.status == 200 && r.body && strstr(r.body, "\"running\":false");
                        resp_free(&r);
                }
                if (done) {
                        snprintf(path, sizeof(path),
                                 "/v1/sandboxes/%s/proxy/44772/command/%s/logs?cursor=0", vid, cid);
                        r = http("GET", path, NULL);
                        if (r.status == 200)
                                got = (long long)r.len;
                        resp_free(&r);
                }
                for (size_t i = 0; made && i < sizeof(names) / sizeof(names[0]); i++) {
                        int fd = open(pathf("%s/%s/%s", daemon_root, vid, names[i]),
                                      O_RDONLY | O_CLOEXEC);

                        if (fd < 0 || ioctl(fd, FS_IOC_FSGETXATTR, fxs[i]) < 0)
                                snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
                                         "%s: %s; ", names[i], strerror(errno));
                        if (fd >= 0)
                                close(fd);
                }
                x = made ? run(vid, "[\"vmtest\",\"fill\",\"f\",\"2\"]") : (execres){0};
                e = -1;
                sscanf(x.out, "written=%*d errno=%d", &e);
                result("quota_os_command_log",
                       done && got > 0 && got <= QLIMIT && e == EDQUOT && wfx.fsx_projid &&
                               lfx.fsx_projid == wfx.fsx_projid &&
                               ffx.fsx_projid == wfx.fsx_projid &&
                               (lfx.fsx_xflags & FS_XFLAG_PROJINHERIT),
                       "done=%d log=%lld bytes (limit %lld) then errno=%d; projid workspace=%u "
                       "logs=%u (xflags 0x%x) log=%u; %s",
                       done, got, QLIMIT, e, wfx.fsx_projid, lfx.fsx_projid, lfx.fsx_xflags,
                       ffx.fsx_projid, detail);
                if (vid[0]) {
                        snprintf(path, sizeof(path), "/v1/sandboxes/%s", vid);
                        r = http("DELETE", path, NULL);
                        resp_free(&r);
                }
        }

        /* a named volume's pvc.storage on the same disk (the volume root is {root}/volumes) */
        quota_volume_storage(up);

        /* everything deleted: the filesystem is as before; SIGTERM exits 0 */
        frees_and_stops("quota", mnt, base, up);
        return n_fail ? 1 : 0;
}

/* ---- the embedded disk default on XFS with project quota (issue 20, finding 14): the
 *      daemon started with no SANDBOX_HOST_DISK_* setting at all, its state root on an XFS
 *      disk mounted prjquota, as the Kubernetes manifest's state volume is ------------------ */

/* Run `helper` (a JSON argv of vmtest) in a fresh sandbox: its output line in x, the sandbox
 * deleted after. False when no sandbox could be had (why says so). */
static bool in_fresh_sandbox(const char *helper, execres *x, char *why, size_t whysz)
{
        char id[128];

        if (!create(id, sizeof(id), why, whysz)) {
                *x = (execres){0};
                return false;
        }
        *x = run(id, helper);
        drop(id);
        return true;
}

static bool full(int e)
{
        return e == ENOSPC || e == EDQUOT; /* XFS answers ENOSPC for a project quota */
}

static int xfs(const char *bin, const char *cgdir, const char *mnt)
{
        char why[1200] = "", a[128] = "", cmd[128];
        long long base = fs_used(mnt), n = -1, alloc = -1, used, lim, total;
        struct statvfs v;
        int e = -1;
        bool up, ok;
        execres x;
        resp r;

        /* what SANDBOX_HOST_DISK_MAX=auto means here: 10 GiB or a quarter of the volume */
        total = statvfs(mnt, &v) == 0 ? (long long)v.f_blocks * (long long)v.f_frsize : 0;
        lim = total / 4 < (10LL << 30) ? total / 4 : (10LL << 30);
        lim &= ~((1LL << 20) - 1);
        daemon_root = pathf("%s/root", mnt);
        daemon_env = NULL;
        up = start_daemon(bin, cgdir, why, sizeof(why));
        result("xfs_daemon_start", up && lim > 0, "port=%d root=%s volume=%lld %s", port,
               daemon_root, total, why);
        r = up ? http("GET", "/healthz", NULL) : (resp){0};
        result("xfs_healthz_project",
               r.status == 200 && r.body && strstr(r.body, "\"disk-quota.project\""), "%d %.600s",
               r.status, r.body ? r.body : r.err);
        resp_free(&r);

        /* writes without end stop at the default's limit, and the volume gives no more */
        ok = up && create(a, sizeof(a), why, sizeof(why));
        snprintf(cmd, sizeof(cmd), "[\"vmtest\",\"fill\",\"big\",\"%lld\"]", (lim >> 20) + 32);
        x = ok ? run(a, cmd) : (execres){0};
        sscanf(x.out, "written=%lld errno=%d allocated=%lld", &n, &e, &alloc);
        used = fs_used(mnt) - base;
        result("xfs_fill", x.ok && full(e) && n <= lim && alloc <= lim,
               "written=%lld errno=%d allocated=%lld (limit %lld) %s %.200s", n, e, alloc, lim, why,
               x.frame);
        result("xfs_host_volume", x.ok && used <= lim + QSLACK,
               "the state root's filesystem gave %lld bytes (limit %lld)", used, lim);
        check_projid("xfs_workspace_project_id", ok, a);
        /* a full sandbox's upload: 413 */
        r = ok ? http_put(a, "up", 2u << 20) : (resp){0};
        result("xfs_upload_413", r.status == 413 && r.body && strstr(r.body, "\"PayloadTooLarge\""),
               "PUT 2M into a full workspace: %d %.300s", r.status, r.body ? r.body : r.err);
        resp_free(&r);
        if (ok)
                drop(a);

        /* preallocation and a file unlinked but kept open */
        snprintf(cmd, sizeof(cmd), "[\"vmtest\",\"falloc\",\"pre\",\"%lld\"]", (lim >> 20) + 32);
        ok = up && in_fresh_sandbox(cmd, &x, why, sizeof(why));
        e = -1, alloc = -1;
        sscanf(x.out, "errno=%d allocated=%lld", &e, &alloc);
        result("xfs_fallocate", ok && x.ok && full(e) && alloc <= lim,
               "posix_fallocate past the limit: errno=%d allocated=%lld (limit %lld) %s %.200s", e,
               alloc, lim, why, x.frame);
        snprintf(cmd, sizeof(cmd), "[\"vmtest\",\"ghost\",\"%lld\"]", (lim >> 20) + 32);
        ok = up && in_fresh_sandbox(cmd, &x, why, sizeof(why));
        n = -1, e = -1;
        sscanf(x.out, "written=%lld errno=%d", &n, &e);
        result("xfs_unlinked_file", ok && x.ok && full(e) && n <= lim,
               "written=%lld errno=%d (limit %lld) %s %.200s", n, e, lim, why, x.frame);

        /* everything deleted: the volume is as before; SIGTERM exits 0 */
        frees_and_stops("xfs", mnt, base, up);
        return n_fail ? 1 : 0;
}

/* ---- egress (issue 24): a /v1 sandbox on the network under its policy, enforced from the
 *      daemon's side, on cgroup v2. The daemon runs in the VM's own network namespace (the
 *      pod's); the test's "internet" is a network namespace it makes, linked to the VM's by a
 *      veth, with TEST-NET addresses only (the VM has no network card: nothing leaves it) ---- */

#define INET_POD     "198.51.100.1" /* the VM's (the pod's) end of the internet's link */
#define INET_ALLOWED "198.51.100.2" /* the internet's address the sandbox's policy allows */
#define INET_OTHER   "192.0.2.1"    /* another of its addresses, which the policy does not */
#define INET_PORT    8080
#define INET_LOG     "/tmp/egress-internet.log" /* "<listener> from <peer>" per connection */

static pid_t inet_pid; /* holds the internet's namespace and serves its listeners */

/* A command line through the VM's sh (busybox's ip); false and the reason in why when it
 * fails. */
static bool shell(const char *cmd, char *why, size_t whysz)
{
        int st;

        fflush(stdout);
        fflush(stderr);
        st = system(cmd);
        if (st == 0)
                return true;
        snprintf(why + strlen(why), whysz - strlen(why), "`%s`: status 0x%x; ", cmd, st);
        return false;
}

static int listen_on(const char *addr)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(INET_PORT)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

        inet_pton(AF_INET, addr, &a.sin_addr);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0) {
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        return fd;
}

/* The internet's listeners: each connection is told "hello from <listener>" and logged with
 * its peer, then closed. Runs until killed (or its parent dies). */
static _Noreturn void inet_serve(int l1, int l2)
{
        int log = open(INET_LOG, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (;;) {
                struct pollfd p[2] = {{.fd = l1, .events = POLLIN}, {.fd = l2, .events = POLLIN}};

                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        _exit(1);
                }
                for (int i = 0; i < 2; i++) {
                        struct sockaddr_in me, peer;
                        socklen_t ml = sizeof(me), pl = sizeof(peer);
                        char a[INET_ADDRSTRLEN] = "?", b[INET_ADDRSTRLEN] = "?";
                        int c;

                        if (!(p[i].revents & POLLIN))
                                continue;
                        c = accept4(p[i].fd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
                        if (c < 0)
                                continue;
                        if (getsockname(c, (struct sockaddr *)&me, &ml) == 0)
                                inet_ntop(AF_INET, &me.sin_addr, a, sizeof(a));
                        inet_ntop(AF_INET, &peer.sin_addr, b, sizeof(b));
                        dprintf(c, "hello from %s\n", a);
                        if (log >= 0)
                                dprintf(log, "%s from %s\n", a, b);
                        close(c);
                }
        }
}

/* Connections the internet's listener at `addr` took from `peer` (NULL: from anyone). */
static int inet_count(const char *addr, const char *peer)
{
        const char *t = slurp_or(INET_LOG, "");
        char l[128];
        int n = 0;

        while (*t) {
                size_t k = strcspn(t, "\n");
                char a[64] = "", b[64] = "";

                snprintf(l, sizeof(l), "%.*s", (int)(k < sizeof(l) - 1 ? k : sizeof(l) - 1), t);
                if (sscanf(l, "%63s from %63s", a, b) == 2 && strcmp(a, addr) == 0 &&
                    (!peer || strcmp(b, peer) == 0))
                        n++;
                t += k + (t[k] == '\n');
        }
        return n;
}

/* Make the internet: a new network namespace with INET_ALLOWED/24 and INET_OTHER/24 on its
 * end of a veth whose other end, vmi0 in the VM's namespace, has INET_POD/24 (and a route to
 * INET_OTHER's net via the internet), and a TCP listener on each of its two addresses. This
 * process enters the namespace only while it sets it up (single-threaded). */
static bool inet_up(char *why, size_t whysz)
{
        int root = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), l1 = -1, l2 = -1;
        bool ok;

        if (root < 0 || unshare(CLONE_NEWNET) < 0) {
                snprintf(why, whysz, "unshare(CLONE_NEWNET): %s", strerror(errno));
                if (root >= 0)
                        close(root);
                return false;
        }
        /* busybox's ip names the peer veth0 (a fresh namespace has none) and moves it to the
         * namespace of pid 1, the VM's */
        ok = shell("ip link set lo up && ip link add name inet0 type veth && "
                   "ip link set veth0 netns 1 && ip addr add " INET_ALLOWED "/24 dev inet0 && "
                   "ip addr add " INET_OTHER "/24 dev inet0 && ip link set inet0 up",
                   why, whysz);
        if (ok && ((l1 = listen_on(INET_ALLOWED)) < 0 || (l2 = listen_on(INET_OTHER)) < 0)) {
                snprintf(why + strlen(why), whysz - strlen(why), "listen: %s; ", strerror(errno));
                ok = false;
        }
        if (ok) {
                unlink(INET_LOG);
                inet_pid = fork();
                if (inet_pid == 0)
                        inet_serve(l1, l2);
                if (inet_pid < 0) {
                        snprintf(why + strlen(why), whysz - strlen(why), "fork: %s; ",
                                 strerror(errno));
                        inet_pid = 0;
                        ok = false;
                }
        }
        if (l1 >= 0)
                close(l1);
        if (l2 >= 0)
                close(l2);
        if (setns(root, CLONE_NEWNET) < 0) {
                /* nothing of the rest can be trusted in the wrong namespace */
                snprintf(why + strlen(why), whysz - strlen(why), "setns back: %s", strerror(errno));
                close(root);
                return false;
        }
        close(root);
        return ok && shell("ip link set veth0 name vmi0 && ip addr add " INET_POD "/24 dev vmi0 && "
                           "ip link set vmi0 up && ip route add 192.0.2.0/24 via " INET_ALLOWED,
                           why, whysz);
}

/* The internet goes with its last process: the namespace, and the veth pair with it. */
static bool inet_down(void)
{
        if (inet_pid > 0) {
                kill(inet_pid, SIGKILL);
                wait_exit(inet_pid, 10000);
                inet_pid = 0;
        }
        return wait_gone("/sys/class/net/vmi0", 10000);
}

/* The VM namespace's interfaces, " a b c " (names between blanks). */
static const char *links_now(void)
{
        static char b[2][2048];
        static unsigned k;
        char *o = b[k++ % 2];
        DIR *d = opendir("/sys/class/net");
        struct dirent *de;
        size_t off = 1;

        snprintf(o, sizeof(b[0]), " ");
        while (d && (de = readdir(d)) && off < sizeof(b[0]) - IFNAMSIZ - 2)
                if (de->d_name[0] != '.')
                        off += (size_t)snprintf(o + off, sizeof(b[0]) - off, "%s ", de->d_name);
        if (d)
                closedir(d);
        return o;
}

/* The one name in `now` that `before` lacks, into out; false when there is not exactly one. */
static bool new_link(const char *before, const char *now, char *out, size_t outsz)
{
        char name[IFNAMSIZ + 2];
        int n = 0;

        for (const char *p = now; *p;) {
                size_t k;

                p += strspn(p, " ");
                k = strcspn(p, " ");
                if (k && k < IFNAMSIZ) {
                        snprintf(name, sizeof(name), " %.*s ", (int)k, p);
                        if (!strstr(before, name) && n++ == 0)
                                snprintf(out, outsz, "%.*s", (int)k, p);
                }
                p += k;
        }
        return n == 1;
}

/* Whether `addr` is on an interface of this namespace. */
static bool have_addr(const char *addr)
{
        struct ifaddrs *all, *i;
        struct in_addr want;
        bool found = false;

        if (inet_pton(AF_INET, addr, &want) != 1 || getifaddrs(&all) < 0)
                return false;
        for (i = all; i; i = i->ifa_next)
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
                    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == want.s_addr)
                        found = true;
        freeifaddrs(all);
        return found;
}

/* A /v1 command in sandbox vid (foreground): its SSE stream into out. The HTTP status. */
static int os_command(const char *vid, const char *command, char *out, size_t outsz)
{
        char path[256], body[512];
        resp r;
        int st;

        snprintf(path, sizeof(path), "/v1/sandboxes/%s/proxy/44772/command", vid);
        snprintf(body, sizeof(body), "{\"command\":\"%s\"}", command);
        r = http("POST", path, body);
        snprintf(out, outsz, "%.*s", (int)(outsz - 1), r.body ? r.body : r.err);
        st = r.status;
        resp_free(&r);
        return st;
}

static int egress(const char *bin, const char *cgdir)
{
        static const char *const env[] = {
                "SANDBOX_HOST_EGRESS=on",
                /* needed to turn egress on; nothing answers there (CIDR rules need no DNS) */
                "SANDBOX_HOST_DNS_UPSTREAM=" INET_ALLOWED ":53",
                /* the disk limits have their parts; the loop module is loaded by now */
                "SANDBOX_HOST_DISK_MAX=0",
                NULL,
        };
        char why[1500] = "", vid[128] = "", link[IFNAMSIZ + 1] = "", state[64] = "";
        char before[2048], out[2000], ctl[600] = "", *eg;
        bool internet, up, made = false, running = false, have_link = false;
        int a0, a1, o0, o1, st;
        resp r;

        /* the internet answers the VM itself on both addresses (so that "not reached" below
         * means the policy, not a missing route or listener) */
        internet = inet_up(why, sizeof(why));
        if (internet) {
                char g1[128], g2[128];
                int e1 = connect_read(INET_ALLOWED, INET_PORT, 5000, g1, sizeof(g1));
                int e2 = connect_read(INET_OTHER, INET_PORT, 5000, g2, sizeof(g2));

                internet = e1 == 0 && e2 == 0 && strstr(g1, INET_ALLOWED) && strstr(g2, INET_OTHER);
                snprintf(ctl, sizeof(ctl), "from the VM: %s:%d errno=%d [%s], %s:%d errno=%d [%s]",
                         INET_ALLOWED, INET_PORT, e1, g1, INET_OTHER, INET_PORT, e2, g2);
        }
        result("egress_internet", internet, "%s %s", ctl, why);

        daemon_root = "/var/lib/sandbox-host-egress";
        daemon_env = env;
        why[0] = '\0';
        up = start_daemon(bin, cgdir, why, sizeof(why));
        result("egress_daemon_start", up, "port=%d pid=%d %s", port, (int)daemon_pid, why);

        /* /healthz: egress supported (else its reason) */
        r = up ? http("GET", "/healthz", NULL) : (resp){0};
        eg = r.body ? strstr(r.body, "\"egress\"") : NULL;
        result("egress_healthz_supported", r.status == 200 && eg && json_true(eg, "supported"),
               "status=%d %s egress=%.500s", r.status, r.err, eg ? eg : "(none)");
        resp_free(&r);

        /* a /v1 sandbox whose policy allows one address of the internet: it gets a link */
        snprintf(before, sizeof(before), "%s", links_now());
        if (up) {
                r = http("POST", "/v1/sandboxes",
                         "{\"image\":{\"uri\":\"default\"},\"entrypoint\":[\"sleep\",\"3600\"],"
                         "\"timeout\":600,\"networkPolicy\":{\"defaultAction\":\"deny\","
                         "\"egress\":[{\"action\":\"allow\",\"target\":\"" INET_ALLOWED
                         "/32\"}]}}");
                made = r.status == 202 && r.body && json_str(r.body, "id", vid, sizeof(vid));
                snprintf(why, sizeof(why), "create %d %s %.300s", r.status, r.err,
                         r.body ? r.body : "");
                resp_free(&r);
        }
        running = made && os_wait_state(vid, "Running", 20000, state, sizeof(state));
        have_link = running && new_link(before, links_now(), link, sizeof(link));
        result("egress_create_link", made && running && have_link,
               "%s; state %s; links before [%s] now [%s]; its link %s operstate %.10s", why, state,
               before, links_now(), link,
               have_link ? slurp_or(pathf("/sys/class/net/%s/operstate", link), "?") : "-");

        /* from inside: the allowed address answers, masqueraded to the VM's address; the other
         * one (which answered the VM itself above) is never reached */
        a0 = inet_count(INET_ALLOWED, INET_POD);
        st = running ? os_command(vid, "vmtest connect " INET_ALLOWED " 8080 5000", out,
                                  sizeof(out))
                     : 0;
        a1 = inet_count(INET_ALLOWED, INET_POD);
        result("egress_allowed_cidr_reached",
               internet && st == 200 && strstr(out, "connected=1") &&
                       strstr(out, "hello from " INET_ALLOWED) && a1 == a0 + 1,
               "policy allows %s/32: command %d %.600s; the listener's connections from %s "
               "%d -> %d",
               INET_ALLOWED, st, out, INET_POD, a0, a1);
        o0 = inet_count(INET_OTHER, NULL);
        st = running ? os_command(vid, "vmtest connect " INET_OTHER " 8080 3000", out, sizeof(out))
                     : 0;
        o1 = inet_count(INET_OTHER, NULL);
        result("egress_other_address_not_reached",
               internet && st == 200 && strstr(out, "connected=0") && o1 == o0,
               "default deny, %s not allowed: command %d %.600s; the listener's connections %d "
               "-> %d",
               INET_OTHER, st, out, o0, o1);

        /* its deletion removes its link */
        if (made) {
                char path[256];
                bool gone;

                snprintf(path, sizeof(path), "/v1/sandboxes/%s", vid);
                r = http("DELETE", path, NULL);
                gone = have_link && wait_gone(pathf("/sys/class/net/%s", link), 20000);
                result("egress_delete_removes_link", r.status == 204 && gone,
                       "DELETE %d %s; link %s removed=%d; links now [%s]", r.status, r.err,
                       link[0] ? link : "(none)", gone, links_now());
                resp_free(&r);
        } else {
                result("egress_delete_removes_link", false, "no sandbox: %s", why);
        }

        /* SIGTERM: exit 0, the gateway off the VM's lo */
        st = up ? stop_daemon() : -1;
        result("egress_sigterm_exit_0",
               st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && !have_addr("100.127.0.1"),
               "status=0x%x; gateway 100.127.0.1 still on an interface=%d; links now [%s]", st,
               have_addr("100.127.0.1"), links_now());
        if (!inet_down())
                result("egress_internet_removed", false, "vmi0 still there: [%s]", links_now());
        return n_fail ? 1 : 0;
}

/* ---- volumes (issue 25): /v1 sandboxes with host and named volumes, the daemon on cgroup v2.
 *      The VM's own directories stand for the host's; the named volumes' root is the VM's too
 *      (a PersistentVolume or an NFS share in a pod). */

#define VOL_ALLOW "/var/lib/vmtest-host"    /* SANDBOX_HOST_VOLUME_HOST_ALLOW */
#define VOL_ROOT  "/var/lib/vmtest-volumes" /* SANDBOX_HOST_VOLUME_ROOT */

/* A /v1 sandbox (sleeping) with `volumes` (a JSON array), Running within 20 s: its id in vid.
 * False and the reason in why otherwise. */
static bool os_create_volumes(const char *volumes, char *vid, size_t vidsz, char *why, size_t whysz)
{
        char body[2048], state[64] = "";
        bool made;
        resp r;

        snprintf(body, sizeof(body),
                 "{\"image\":{\"uri\":\"default\"},\"entrypoint\":[\"sleep\",\"3600\"],"
                 "\"timeout\":600,\"volumes\":%s}",
                 volumes);
        r = http("POST", "/v1/sandboxes", body);
        made = r.status == 202 && r.body && json_str(r.body, "id", vid, vidsz);
        snprintf(why, whysz, "create %d %s %.300s", r.status, r.err, r.body ? r.body : "");
        resp_free(&r);
        if (made && !os_wait_state(vid, "Running", 20000, state, sizeof(state))) {
                snprintf(why + strlen(why), whysz - strlen(why), "; state %s", state);
                return false;
        }
        return made;
}

/* DELETE /v1/sandboxes/{vid}: the HTTP status. */
static int os_delete(const char *vid)
{
        char path[256];
        resp r;
        int st;

        snprintf(path, sizeof(path), "/v1/sandboxes/%s", vid);
        r = http("DELETE", path, NULL);
        st = r.status;
        resp_free(&r);
        return st;
}

/* Whether a command's SSE stream `out` has a stdout line that is exactly `line`. */
static bool has_line(const char *out, const char *line)
{
        char want[256];

        snprintf(want, sizeof(want), "\"type\":\"stdout\",\"text\":\"%s\"", line);
        return strstr(out, want) != NULL;
}

/* The n of the first "0::/../exec-<n>" stdout line of a command's stream, or -1. */
static long exec_cgroup_of(const char *out)
{
        const char *p = strstr(out, "\"text\":\"0::/../exec-");
        char *end;
        long n;

        if (!p)
                return -1;
        n = strtol(p + strlen("\"text\":\"0::/../exec-"), &end, 10);
        return *end == '"' ? n : -1;
}

/* The first stdout line of a command's stream that is a number (`id -u`), or -1. */
static long number_line(const char *out)
{
        for (const char *p = out; (p = strstr(p, "\"type\":\"stdout\",\"text\":\"")); p++) {
                const char *t = p + strlen("\"type\":\"stdout\",\"text\":\"");
                char *end;
                long n = strtol(t, &end, 10);

                if (end > t && isdigit((unsigned char)*t) && *end == '"')
                        return n;
        }
        return -1;
}

/* Part of `vmtest quota` (issue 25, pvc.storage): the daemon's volume root is on the ext4
 * disk mounted prjquota, so a named volume a create makes with `storage: "2Mi"` is held to it:
 * a write from inside stops at about 2 MiB with EDQUOT, the claim's directory has a project id
 * of its own above every workspace's, with PROJINHERIT; a second sandbox mounting the same
 * claim (its own `storage` larger) is held by the same limit; both deleted, the claim goes
 * with the last (deleteOnSandboxTermination), so the disk is as before. */
/* A /v1 sandbox mounting the claim "vmsized" at `mount` with `storage` (made by the first,
 * deleteOnSandboxTermination), then `vmtest fill <mount>/<file> <mib>` in it: whether it ran,
 * the bytes written and the errno in *n, *e; its id in vid (deleted by the caller). */
static bool sized_fill(const char *storage, const char *mount, const char *file, int mib, char *vid,
                       size_t vidsz, char *why, size_t whysz, execres *x, long long *n, int *e)
{
        char vols[400], cmd[200];

        snprintf(vols, sizeof(vols),
                 "[{\"name\":\"sized\",\"pvc\":{\"claimName\":\"vmsized\",\"storage\":\"%s\","
                 "\"deleteOnSandboxTermination\":true},\"mountPath\":\"%s\"}]",
                 storage, mount);
        if (!os_create_volumes(vols, vid, vidsz, why, whysz))
                return false;
        snprintf(cmd, sizeof(cmd), "[\"vmtest\",\"fill\",\"%s/%s\",\"%d\"]", mount, file, mib);
        *x = run(vid, cmd);
        sscanf(x->out, "written=%lld errno=%d", n, e);
        return x->ok;
}

/* The claim gone with its last sandbox (deleteOnSandboxTermination), the same claim made
 * again (a smaller storage) takes its id again, with the new limit: a removed claim's id
 * (a limit, nothing charged) is free, so the range is never used up. */
static void quota_volume_reused(uint32_t old_id)
{
        char why[1500] = "", vc[128] = "", detail[300] = "";
        uint64_t t0 = now_ms();
        struct fsxattr fx = {0};
        long long n = -1;
        int e = -1, fd = -1;
        bool ok;
        execres x = {0};

        while (old_id && exists(pathf("%s/volumes/vmsized", daemon_root)) && now_ms() - t0 < 20000)
                sleep_ms(50);
        ok = old_id && !exists(pathf("%s/volumes/vmsized", daemon_root)) &&
             sized_fill("1Mi", "/v", "again", 8, vc, sizeof(vc), why, sizeof(why), &x, &n, &e);
        fd = vc[0] ? open(pathf("%s/volumes/vmsized", daemon_root),
                          O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                   : -1;
        if (fd < 0 || ioctl(fd, FS_IOC_FSGETXATTR, &fx) < 0)
                snprintf(detail, sizeof(detail), "the claim's directory: %s", strerror(errno));
        if (fd >= 0)
                close(fd);
        result("quota_named_volume_id_reused",
               ok && fx.fsx_projid == old_id && e == EDQUOT && n <= (1LL << 20),
               "first id %u, again %u; written=%lld errno=%d (storage 1Mi) %s %s %.300s", old_id,
               fx.fsx_projid, n, e, detail, why, x.frame);
        if (vc[0])
                (void)os_delete(vc);
}

static void quota_volume_storage(bool up)
{
        char why[1500] = "", va[128] = "", vb[128] = "", detail[300] = "";
        long long n = -1, n2 = -1;
        int e = -1, e2 = -1, fd;
        struct fsxattr fx = {0};
        bool a_ok, b_ok, got = false;
        execres x = {0}, x2 = {0};

        a_ok = up &&
               sized_fill("2Mi", "/v", "big", 8, va, sizeof(va), why, sizeof(why), &x, &n, &e);
        fd = va[0] ? open(pathf("%s/volumes/vmsized", daemon_root),
                          O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                   : -1;
        got = fd >= 0 && ioctl(fd, FS_IOC_FSGETXATTR, &fx) == 0;
        if (!got)
                snprintf(detail, sizeof(detail), "the claim's directory: %s", strerror(errno));
        if (fd >= 0)
                close(fd);
        result("quota_named_volume_storage_held",
               a_ok && e == EDQUOT && n >= (1LL << 20) && n <= (2LL << 20),
               "written=%lld errno=%d (storage 2Mi) %s %.300s", n, e, why, x.frame);
        result("quota_named_volume_project_id",
               got && fx.fsx_projid >= QBASE + 2 * QMAX &&
                       fx.fsx_projid < QBASE + 2 * QMAX + 65536 &&
                       (fx.fsx_xflags & FS_XFLAG_PROJINHERIT),
               "claim projid=%u xflags=0x%x (workspaces below %u) %s", fx.fsx_projid, fx.fsx_xflags,
               QBASE + 2 * QMAX, detail);
        b_ok = va[0] &&
               sized_fill("64Mi", "/w", "more", 4, vb, sizeof(vb), why, sizeof(why), &x2, &n2, &e2);
        result("quota_named_volume_shared_limit", b_ok && e2 == EDQUOT && n2 < (1LL << 20),
               "second sandbox (storage 64Mi, the claim existing): written=%lld errno=%d %s %.300s",
               n2, e2, why, x2.frame);
        if (va[0])
                (void)os_delete(va);
        if (vb[0])
                (void)os_delete(vb);
        quota_volume_reused(got ? fx.fsx_projid : 0);
}

static int volumes(const char *bin, const char *cgdir)
{
        static const char *const env[] = {
                "SANDBOX_HOST_VOLUME_HOST_ALLOW=" VOL_ALLOW,
                "SANDBOX_HOST_VOLUME_ROOT=" VOL_ROOT,
                NULL,
        };
        char why[1500] = "", vh[128] = "", va[128] = "", vb[128] = "", vd[128] = "";
        char out[2000], out2[2000], sbdir[1200];
        bool up, host_ok, a_ok, b_ok, d_ok;
        const char *s;
        int st, st2;

        /* the host's side: a marker in a directory the sandbox mounts read-only, and a
         * directory it may write (a host directory's permissions are the operator's) */
        up = shell("rm -rf " VOL_ALLOW " " VOL_ROOT " && mkdir -p " VOL_ALLOW "/ro " VOL_ALLOW
                   "/rw " VOL_ROOT " && echo host-marker-vm > " VOL_ALLOW
                   "/ro/marker.txt && chmod 0777 " VOL_ALLOW "/rw",
                   why, sizeof(why));
        daemon_root = "/var/lib/sandbox-host-volumes";
        daemon_env = env;
        up = up && start_daemon(bin, cgdir, why, sizeof(why));
        result("volumes_daemon_start", up, "port=%d pid=%d %s", port, (int)daemon_pid, why);
        if (up && !daemon_subtree(sub, sizeof(sub)))
                snprintf(sub, sizeof(sub), "(no subtree: %s)", cg_of(daemon_pid));

        /* host volumes: a marker read through a read-only mount, a write there refused; a
         * write into a read-write one shows on the VM's file system */
        host_ok = up && os_create_volumes("[{\"name\":\"ro\",\"host\":{\"path\":\"" VOL_ALLOW
                                          "/ro\"},\"mountPath\":\"/data\",\"readOnly\":true},"
                                          "{\"name\":\"rw\",\"host\":{\"path\":\"" VOL_ALLOW
                                          "/rw\"},\"mountPath\":\"/out\",\"readOnly\":false}]",
                                          vh, sizeof(vh), why, sizeof(why));
        st = host_ok ? os_command(vh, "cat /data/marker.txt; echo x > /data/new 2>&1; echo rc=$?",
                                  out, sizeof(out))
                     : 0;
        result("volumes_host_read_only_marker_read_write_refused",
               st == 200 && has_line(out, "host-marker-vm") &&
                       strstr(out, "Read-only file system") && !has_line(out, "rc=0") &&
                       !exists(VOL_ALLOW "/ro/new"),
               "%s; command %d %.900s; on the VM: new=%d", why, st, out,
               exists(VOL_ALLOW "/ro/new"));
        st = host_ok ? os_command(vh, "echo written-inside > /out/w.txt && echo wrote", out,
                                  sizeof(out))
                     : 0;
        s = slurp_or(VOL_ALLOW "/rw/w.txt", "(none)");
        result("volumes_host_read_write_shows_on_the_vm",
               st == 200 && has_line(out, "wrote") && strcmp(s, "written-inside\n") == 0,
               "%s; command %d %.900s; on the VM: w.txt=[%.100s]", why, st, out, s);

        /* a named volume shared by two sandboxes (each its own uid): one writes a file, the
         * other reads it and changes it, the first sees the change */
        a_ok = up && os_create_volumes("[{\"name\":\"shared\",\"pvc\":{\"claimName\":\"vmshared\"},"
                                       "\"mountPath\":\"/shared\"}]",
                                       va, sizeof(va), why, sizeof(why));
        b_ok = a_ok && os_create_volumes("[{\"name\":\"shared\",\"pvc\":{\"claimName\":"
                                         "\"vmshared\"},\"mountPath\":\"/shared\"}]",
                                         vb, sizeof(vb), why, sizeof(why));
        st = b_ok ? os_command(va, "echo from-a > /shared/a.txt && id -u", out, sizeof(out)) : 0;
        st2 = b_ok ? os_command(vb, "cat /shared/a.txt && echo from-b >> /shared/a.txt && id -u",
                                out2, sizeof(out2))
                   : 0;
        {
                char o3[2000] = "";
                int st3 = b_ok ? os_command(va, "cat /shared/a.txt", o3, sizeof(o3)) : 0;

                s = slurp_or(VOL_ROOT "/vmshared/a.txt", "(none)");
                result("volumes_named_volume_shared_by_two_sandboxes",
                       st == 200 && st2 == 200 && st3 == 200 && has_line(out2, "from-a") &&
                               has_line(o3, "from-a") && has_line(o3, "from-b") &&
                               number_line(out) > 0 && number_line(out2) > 0 &&
                               number_line(out) != number_line(out2) &&
                               strcmp(s, "from-a\nfrom-b\n") == 0,
                       "uids %ld and %ld; a writes %d %.500s; b reads, appends %d %.500s; a reads "
                       "%d %.400s; on the VM: [%.100s]; %s",
                       number_line(out), number_line(out2), st, out, st2, out2, st3, o3, s, why);
        }

        /* commands in a sandbox with volumes still run each in a v2 cgroup of its own below
         * the sandbox's: one that left a process keeps its cgroup (seen from outside with the
         * process in it), the next gets another */
        {
                long n1 = -1, n2 = -1;
                const char *procs = "?";

                st = a_ok ? os_command(va,
                                       "sleep 5 </dev/null >/dev/null 2>&1 & cat /proc/self/cgroup",
                                       out, sizeof(out))
                          : 0;
                n1 = exec_cgroup_of(out);
                if (n1 >= 0) {
                        snprintf(sbdir, sizeof(sbdir), "%s/%s/exec-%ld", sub, va, n1);
                        procs = slurp_or(pathf("%s/cgroup.procs", sbdir), "(none)");
                }
                st2 = a_ok ? os_command(va, "cat /proc/self/cgroup", out2, sizeof(out2)) : 0;
                n2 = exec_cgroup_of(out2);
                result("volumes_commands_in_own_v2_cgroups",
                       st == 200 && st2 == 200 && n1 >= 0 && n2 >= 0 && n1 != n2 && *procs &&
                               strcmp(procs, "(none)") != 0,
                       "first %d %.300s; second %d %.300s; %s/cgroup.procs=[%.100s]", st, out, st2,
                       out2, n1 >= 0 ? sbdir : "-", procs);
        }
        if (a_ok)
                os_delete(va);
        if (b_ok)
                os_delete(vb);

        /* deleteOnSandboxTermination: the volume this sandbox's create made goes with it */
        d_ok = up && os_create_volumes("[{\"name\":\"tmp\",\"pvc\":{\"claimName\":\"vmtmp\","
                                       "\"deleteOnSandboxTermination\":true},\"mountPath\":"
                                       "\"/t\"}]",
                                       vd, sizeof(vd), why, sizeof(why));
        {
                bool made = d_ok && exists(VOL_ROOT "/vmtmp");
                int wr = d_ok ? os_command(vd, "echo t > /t/f && echo wrote", out, sizeof(out)) : 0;
                int del = d_ok ? os_delete(vd) : 0;
                bool gone = del == 204 && wait_gone(VOL_ROOT "/vmtmp", 20000);

                result("volumes_delete_on_termination_removes_the_volume",
                       made && wr == 200 && has_line(out, "wrote") && gone,
                       "%s; made=%d; write %d %.300s; DELETE %d; %s gone=%d", why, made, wr, out,
                       del, VOL_ROOT "/vmtmp", gone);
        }

        /* SIGTERM: exit 0; then the VM's directories go */
        st = up ? stop_daemon() : -1;
        result("volumes_sigterm_exit_0", st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
               "status=0x%x", st);
        why[0] = '\0';
        if (!shell("rm -rf " VOL_ALLOW " " VOL_ROOT " /var/lib/sandbox-host-volumes", why,
                   sizeof(why)))
                result("volumes_cleanup", false, "%s", why);
        return n_fail ? 1 : 0;
}

int main(int argc, char **argv)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (argc == 3 && strcmp(argv[1], "memhog") == 0)
                return cmd_memhog(atoi(argv[2]));
        if ((argc == 3 || argc == 4) && strcmp(argv[1], "forkloop") == 0)
                return cmd_forkloop(atoi(argv[2]), argc == 4 ? atoi(argv[3]) : 0);
        if (argc == 4 && strcmp(argv[1], "e2e") == 0) {
                signal(SIGPIPE, SIG_IGN);
                return e2e(argv[2], argv[3]);
        }
        if (argc == 5 && strcmp(argv[1], "xfs") == 0) {
                signal(SIGPIPE, SIG_IGN);
                return xfs(argv[2], argv[3], argv[4]);
        }
        if (argc == 5 && strcmp(argv[1], "quota") == 0) {
                signal(SIGPIPE, SIG_IGN);
                return quota(argv[2], argv[3], argv[4]);
        }
        if (argc == 4 && strcmp(argv[1], "egress") == 0) {
                signal(SIGPIPE, SIG_IGN);
                return egress(argv[2], argv[3]);
        }
        if (argc == 4 && strcmp(argv[1], "volumes") == 0) {
                signal(SIGPIPE, SIG_IGN);
                return volumes(argv[2], argv[3]);
        }
        if (argc == 5 && strcmp(argv[1], "connect") == 0)
                return cmd_connect(argv[2], atoi(argv[3]), atoi(argv[4]));
        if (argc == 4 && strcmp(argv[1], "fill") == 0)
                return cmd_fill(argv[2], atoi(argv[3]));
        if (argc == 4 && strcmp(argv[1], "falloc") == 0)
                return cmd_falloc(argv[2], atoi(argv[3]));
        if (argc == 3 && strcmp(argv[1], "ghost") == 0)
                return cmd_ghost(atoi(argv[2]));
        if (argc == 3 && strcmp(argv[1], "symlinks") == 0)
                return cmd_symlinks(atoi(argv[2]));
        if (argc == 3 && strcmp(argv[1], "files") == 0)
                return cmd_files(atoi(argv[2]));
        if (argc == 4 && strcmp(argv[1], "projid") == 0)
                return cmd_projid(argv[2], atoi(argv[3]));
        if (argc == 4 && strcmp(argv[1], "noinherit") == 0)
                return cmd_noinherit(argv[2], atoi(argv[3]));
        fprintf(stderr,
                "usage: vmtest e2e|egress|volumes DAEMON CGDIR | quota|xfs DAEMON CGDIR MOUNT | "
                "memhog MIB | forkloop N | connect ADDR PORT MS | fill FILE MIB | "
                "falloc FILE MIB | ghost MIB | symlinks N | files N | projid FILE MIB | "
                "noinherit DIR MIB\n");
        return 2;
}
