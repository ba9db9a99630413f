/* benchtool.c: the benchmark's C client and C peers, so that neither side of a figure is
 * measured through a Python interpreter. Built by tests/bench/run.sh (cc -O2), never linked
 * into the daemon. Subcommands (times in nanoseconds, one number per line unless stated):
 *
 *   forkloop N                       fork+execve+waitpid of /bin/true N times: N latencies
 *   execloop HOST PORT RID N [ARG...]  N execs of `true` (or of ARG...) on one keep-alive
 *                                    connection: latencies
 *   forkpar K N                      K forkloops of N at once, started together: the first
 *                                    line is the wall time from the start to the last loop's
 *                                    end, then the K*N latencies
 *   execpar HOST PORT N RID...       one execloop of N per RID at once (each on its own
 *                                    connection, opened before the start): as forkpar
 *   lifeloop HOST PORT N E [MS [IMAGE]]  N times: create a sandbox, E execs of `true` in it,
 *                                    delete it (then MS milliseconds of pause, not timed:
 *                                    default 0), on one connection: per line "CREATE
 *                                    EXEC1..EXECE DELETE", each call's time; IMAGE: the
 *                                    creates' "image" (a host image or an OCI reference)
 *   batchloop HOST PORT N            N creates in a row, then the N deletes in a row: per line
 *                                    "CREATE DELETE"
 *   stream HOST PORT RID ARG...      one exec of ARG...: decodes every NDJSON "o" frame
 *                                    (base64, a table decoder) and prints
 *                                    "BYTES SECONDS EXIT"
 *   pipecat FILE                     `cat FILE` into a pipe read by us: "BYTES SECONDS"
 *   oscmdloop HOST PORT ID N         N OpenSandbox `POST /command {"command": "true"}` on one
 *                                    keep-alive connection (a /v1 sandbox's execd): latencies
 *   osstream HOST PORT ID TEXT       one OpenSandbox command: decodes every SSE stdout event
 *                                    (its JSON string, plus its line's newline) and prints
 *                                    "BYTES SECONDS EXIT"
 *
 * The HTTP client is minimal on purpose: HTTP/1.1, keep-alive, Content-Length or chunked
 * bodies, nothing else. Every loop is bounded by its count; a read that stalls 120 s fails.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
        fprintf(stderr, "benchtool: %s: %s\n", what, errno ? strerror(errno) : "failed");
        exit(1);
}

/* ---- a buffered reader over a socket ---------------------------------------------------- */

typedef struct rd {
        int fd;
        char *b;
        size_t len, off, cap;
} rd;

static int rd_fill(rd *r)
{
        ssize_t n;

        if (r->off > 0) {
                memmove(r->b, r->b + r->off, r->len - r->off);
                r->len -= r->off;
                r->off = 0;
        }
        if (r->len == r->cap) {
                r->cap = r->cap ? r->cap * 2 : (1 << 20);
                r->b = realloc(r->b, r->cap);
                if (!r->b)
                        die("realloc");
        }
        for (;;) {
                n = read(r->fd, r->b + r->len, r->cap - r->len);
                if (n > 0) {
                        r->len += (size_t)n;
                        return 1;
                }
                if (n == 0)
                        return 0;
                if (errno == EINTR)
                        continue;
                die(errno == EAGAIN ? "read timed out (120 s)" : "read");
        }
}

/* The next line (without CRLF) into *line; the pointer stays valid until the next call. */
static char *rd_line(rd *r)
{
        for (;;) {
                char *nl = memchr(r->b + r->off, '\n', r->len - r->off);

                if (nl) {
                        char *s = r->b + r->off;

                        *nl = '\0';
                        if (nl > s && nl[-1] == '\r')
                                nl[-1] = '\0';
                        r->off = (size_t)(nl - r->b) + 1;
                        return s;
                }
                if (!rd_fill(r))
                        die("connection closed in the headers");
        }
}

/* ---- NDJSON exec frames ----------------------------------------------------------------- */

static signed char b64[256];
/* b64q[k][c]: the character c in place k of a quad, shifted to its 6 bits of the 24; an
 * invalid character sets bit 24 (B64_BAD), so one OR of four lookups decodes and checks a
 * whole quad (the usual table decoder: ~3x the rate of one lookup and one test a byte). */
#define B64_BAD 0x01000000u
static uint32_t b64q[4][256];

static void b64_init(void)
{
        const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

        memset(b64, -1, sizeof(b64));
        for (int k = 0; k < 4; k++)
                for (int c = 0; c < 256; c++)
                        b64q[k][c] = B64_BAD;
        for (int i = 0; i < 64; i++) {
                unsigned char c = (unsigned char)a[i];

                b64[c] = (signed char)i;
                for (int k = 0; k < 4; k++)
                        b64q[k][c] = (uint32_t)i << (18 - 6 * k);
        }
}

#if defined(__x86_64__)
#include <immintrin.h>

/* 32 characters to 24 bytes a step with AVX2: the vectorised decoder of W. Mula and D. Lemire,
 * "Faster Base64 Encoding and Decoding Using AVX2 Instructions" (ACM TWEB 2018), as real
 * clients use (a table decoder, above, is what the C client used before: it, not the daemon,
 * was then the busiest process of the stream figure). Each character's high nibble picks a
 * class bit and its low nibble the classes it may be in: a character in none of its own is
 * not base64 (`=` and everything outside A-Z a-z 0-9 + /), and the block is left to the table
 * decoder, which says where. The six-bit values come from one per-class offset ('/' has its
 * own), then two multiply-adds pack them and a shuffle and a permute put the 24 bytes in
 * order. Stops before the last quad (its padding) and before any bad block; writes 8 bytes
 * past the 24 of each step: `out` must hold the decoded length + 8. Returns the characters
 * used (a multiple of 32). */
__attribute__((target("avx2"))) static size_t b64_decode_avx2(const unsigned char *s, size_t n,
                                                              unsigned char *out)
{
        const __m256i lut_lo =
                _mm256_setr_epi8(0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13,
                                 0x1A, 0x1B, 0x1B, 0x1B, 0x1A, 0x15, 0x11, 0x11, 0x11, 0x11, 0x11,
                                 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A);
        const __m256i lut_hi =
                _mm256_setr_epi8(0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10,
                                 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x01, 0x02, 0x04, 0x08,
                                 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10);
        const __m256i lut_roll =
                _mm256_setr_epi8(0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16,
                                 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m256i mask_2f = _mm256_set1_epi8(0x2f);
        const __m256i pack =
                _mm256_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1, 2, 1, 0, 6,
                                 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
        const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
        size_t i = 0;

        for (; i + 32 + 4 <= n; i += 32, out += 24) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(s + i));
                __m256i hi_n = _mm256_and_si256(_mm256_srli_epi32(v, 4), mask_2f);
                __m256i lo_n = _mm256_and_si256(v, mask_2f);
                __m256i hi = _mm256_shuffle_epi8(lut_hi, hi_n);
                __m256i lo = _mm256_shuffle_epi8(lut_lo, lo_n);
                __m256i roll;

                if (!_mm256_testz_si256(lo, hi))
                        break;
                roll = _mm256_shuffle_epi8(lut_roll,
                                           _mm256_add_epi8(_mm256_cmpeq_epi8(v, mask_2f), hi_n));
                v = _mm256_add_epi8(v, roll);
                v = _mm256_maddubs_epi16(v, _mm256_set1_epi32(0x01400140));
                v = _mm256_madd_epi16(v, _mm256_set1_epi32(0x00011000));
                v = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, pack), lanes);
                _mm256_storeu_si256((__m256i *)out, v);
        }
        return i;
}

static int b64_avx2 = -1; /* unknown yet; 0 with BENCHTOOL_SCALAR set (b64check) */
#endif

/* Decode base64 text s[0..n) into out (room for the decoded length + 8); returns the decoded
 * length or -1. Padding only in the last quad. */
static long b64_decode(const unsigned char *s, size_t n, unsigned char *out)
{
        size_t i = 0, o = 0;

        if (n % 4)
                return -1;
#if defined(__x86_64__)
        if (b64_avx2 < 0)
                b64_avx2 = __builtin_cpu_supports("avx2") && !getenv("BENCHTOOL_SCALAR");
        if (b64_avx2) {
                i = b64_decode_avx2(s, n, out);
                o = i / 4 * 3;
        }
#endif
        for (; i + 4 < n; i += 4) {
                uint32_t v =
                        b64q[0][s[i]] | b64q[1][s[i + 1]] | b64q[2][s[i + 2]] | b64q[3][s[i + 3]];

                if (v & B64_BAD)
                        return -1;
                out[o] = (unsigned char)(v >> 16);
                out[o + 1] = (unsigned char)(v >> 8);
                out[o + 2] = (unsigned char)v;
                o += 3;
        }
        if (i < n) { /* the last quad, which may end in padding */
                int a = b64[s[i]], b = b64[s[i + 1]], c, d;

                if (a < 0 || b < 0)
                        return -1;
                out[o++] = (unsigned char)(a << 2 | b >> 4);
                if (s[i + 2] == '=')
                        return s[i + 3] == '=' ? (long)o : -1;
                c = b64[s[i + 2]];
                if (c < 0)
                        return -1;
                out[o++] = (unsigned char)(b << 4 | c >> 2);
                if (s[i + 3] == '=')
                        return (long)o;
                d = b64[s[i + 3]];
                if (d < 0)
                        return -1;
                out[o++] = (unsigned char)(c << 6 | d);
        }
        return (long)o;
}

typedef struct sink {
        char *line;
        size_t len, cap;
        unsigned char *dec;
        size_t dec_cap;
        uint64_t bytes;
        int exit_code; /* -1: no exit frame yet */
        int frames;
        int sse; /* OpenSandbox's SSE events instead of NDJSON frames */
        int raw; /* keep the body as it is (in line/len) instead of parsing frames */
} sink;

/* The bytes a JSON string's text stands for, s at its first character: counted up to the
 * closing quote (escapes decoded as their UTF-8 length). */
static uint64_t json_text_bytes(const char *s, size_t n)
{
        uint64_t b = 0;
        size_t i = 0;

        for (;;) {
                /* the plain run up to the next quote or backslash, found with memchr (the
                 * daemon's side is vectorized too: the client must not be the bound) */
                const char *q = memchr(s + i, '"', n - i), *bs;

                if (!q)
                        die("bad text");
                bs = memchr(s + i, '\\', (size_t)(q - s) - i);
                if (!bs)
                        return b + (uint64_t)(q - s) - i;
                b += (uint64_t)(bs - s) - i;
                i = (size_t)(bs - s);
                if (++i < n && s[i] == 'u') {
                        char hex[5] = {0};
                        unsigned cp;

                        if (i + 4 >= n)
                                die("bad escape");
                        memcpy(hex, s + i + 1, 4);
                        cp = (unsigned)strtoul(hex, NULL, 16);
                        /* U+DCxx is one raw byte (surrogateescape) */
                        b += (cp >= 0xdc80 && cp <= 0xdcff) || cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
                        i += 5;
                } else if (i < n) {
                        b++;
                        i++;
                } else {
                        die("bad text");
                }
        }
}

#define STARTS(s, n, lit) ((n) >= sizeof(lit) - 1 && memcmp((s), (lit), sizeof(lit) - 1) == 0)

/* One line of an SSE stream: an event, or the blank line after it. */
static void sse_line(sink *k, char *s, size_t n)
{
        static const char out[] = "{\"type\":\"stdout\",\"text\":\"";

        if (n == 0)
                return;
        k->frames++;
        if (STARTS(s, n, out)) {
                const char *t = s + sizeof(out) - 1;

                /* an empty line is sent as "\n": no bytes but its newline */
                if (!STARTS(t, n - (size_t)(t - s), "\\u000a\"") &&
                    !STARTS(t, n - (size_t)(t - s), "\\n\""))
                        k->bytes += json_text_bytes(t, n - (size_t)(t - s));
                k->bytes++;
        } else if (STARTS(s, n, "{\"type\":\"execution_complete\"")) {
                k->exit_code = 0;
        } else if (STARTS(s, n, "{\"type\":\"error\"")) {
                const char *v = memmem(s, n, "\"evalue\":\"", 10);

                k->exit_code = v ? atoi(v + 10) : 1000;
                if (k->exit_code == 0)
                        k->exit_code = 1000;
        } else if (!STARTS(s, n, "{\"type\":\"init\"") && !STARTS(s, n, "{\"type\":\"ping\"") &&
                   !STARTS(s, n, "{\"type\":\"stderr\"")) {
                fprintf(stderr, "benchtool: event: %.*s\n", (int)(n > 200 ? 200 : n), s);
                k->exit_code = 1000;
        }
}

static void sink_line(sink *k, char *s, size_t n)
{
        if (k->sse) {
                sse_line(k, s, n);
                return;
        }
        k->frames++;
        if (n >= 8 && memcmp(s, "{\"o\":\"", 6) == 0) {
                char *end = memchr(s + 6, '"', n - 6);
                long d;

                if (!end)
                        die("bad o frame");
                if ((size_t)(end - s) + 32 > k->dec_cap) {
                        k->dec_cap = (size_t)(end - s) * 2 + 32;
                        k->dec = realloc(k->dec, k->dec_cap);
                        if (!k->dec)
                                die("realloc");
                }
                d = b64_decode((unsigned char *)s + 6, (size_t)(end - s - 6), k->dec);
                if (d < 0)
                        die("bad base64");
                k->bytes += (uint64_t)d;
        } else if (n >= 8 && memcmp(s, "{\"exit\":", 8) == 0) {
                k->exit_code = atoi(s + 8);
        } else {
                fprintf(stderr, "benchtool: frame: %.*s\n", (int)(n > 200 ? 200 : n), s);
                k->exit_code = 1000;
        }
}

/* Appends p[0..n) to the sink's line buffer. */
static void sink_append(sink *k, const char *p, size_t n)
{
        if (k->len + n > k->cap) {
                k->cap = (k->len + n) * 2;
                k->line = realloc(k->line, k->cap);
                if (!k->line)
                        die("realloc");
        }
        memcpy(k->line + k->len, p, n);
        k->len += n;
}

static void sink_data(sink *k, const char *p, size_t n)
{
        if (k->raw) {
                sink_append(k, p, n);
                return;
        }
        while (n > 0) {
                const char *nl = memchr(p, '\n', n);
                size_t take = nl ? (size_t)(nl - p) : n;

                if (k->len == 0 && nl) { /* a whole line in the input: no copy */
                        sink_line(k, (char *)p, take);
                } else {
                        sink_append(k, p, take);
                        if (nl) {
                                sink_line(k, k->line, k->len);
                                k->len = 0;
                        }
                }
                if (!nl)
                        break;
                p += take + 1;
                n -= take + 1;
        }
}

/* ---- HTTP ------------------------------------------------------------------------------- */

static int http_connect(const char *host, int port)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

        if (fd < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1)
                die("socket");
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
                die("connect");
        struct timeval tv = {.tv_sec = 120};

        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        return fd;
}

static void write_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, p, n);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        die("write");
                p += w;
                n -= (size_t)w;
        }
}

static void post_exec(int fd, const char *rid, int argc, char **argv)
{
        char body[8192], req[9000];
        size_t bl = 0;
        int i, n;

        bl += (size_t)snprintf(body, sizeof(body), "{\"cmd\":[");
        for (i = 0; i < argc; i++) {
                const char *s = argv[i];

                if (strpbrk(s, "\"\\") || bl + strlen(s) + 8 > sizeof(body))
                        die("argument not supported");
                bl += (size_t)snprintf(body + bl, sizeof(body) - bl, "%s\"%s\"", i ? "," : "", s);
        }
        bl += (size_t)snprintf(body + bl, sizeof(body) - bl, "]}");
        n = snprintf(req, sizeof(req),
                     "POST /sandboxes/%s/exec HTTP/1.1\r\nHost: bench\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     rid, bl, body);
        write_all(fd, req, (size_t)n);
}

static void post_command(int fd, const char *id, const char *text)
{
        char req[9000];
        int n;

        if (strpbrk(text, "\"\\") || strlen(text) > 4000)
                die("command not supported");
        n = snprintf(req, sizeof(req),
                     "POST /v1/sandboxes/%s/proxy/44772/command HTTP/1.1\r\nHost: bench\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n"
                     "{\"command\":\"%s\"}",
                     id, strlen(text) + 14, text);
        write_all(fd, req, (size_t)n);
}

/* Read one response; its body goes to the sink. Returns the status. */
static int read_response(rd *r, sink *k)
{
        char *l = rd_line(r);
        int status = 0, chunked = 0;
        long long clen = -1;

        if (sscanf(l, "HTTP/1.%*d %d", &status) != 1)
                die("bad status line");
        while (*(l = rd_line(r))) {
                if (strncasecmp(l, "content-length:", 15) == 0)
                        clen = atoll(l + 15);
                else if (strncasecmp(l, "transfer-encoding:", 18) == 0 && strcasestr(l, "chunked"))
                        chunked = 1;
        }
        if (status == 204 || status == 304 || status < 200) {
                /* no body, whatever the headers say (RFC 9112, 6.3) */
        } else if (chunked) {
                for (;;) {
                        unsigned long long sz = strtoull(rd_line(r), NULL, 16);

                        if (sz == 0) {
                                while (*rd_line(r)) /* trailers */
                                        ;
                                break;
                        }
                        while (sz > 0) {
                                size_t have;

                                if (r->off == r->len && !rd_fill(r))
                                        die("cut chunk");
                                have = r->len - r->off;
                                if (have > sz)
                                        have = (size_t)sz;
                                sink_data(k, r->b + r->off, have);
                                r->off += have;
                                sz -= have;
                        }
                        rd_line(r); /* CRLF after the chunk */
                }
        } else if (clen >= 0) {
                while (clen > 0) {
                        size_t have;

                        if (r->off == r->len && !rd_fill(r))
                                die("cut body");
                        have = r->len - r->off;
                        if ((long long)have > clen)
                                have = (size_t)clen;
                        sink_data(k, r->b + r->off, have);
                        r->off += have;
                        clen -= (long long)have;
                }
        } else {
                die("response without a length");
        }
        if (k->len > 0 && !k->raw) /* a last line without its newline */
                sink_line(k, k->line, k->len), k->len = 0;
        return status;
}

/* ---- subcommands ------------------------------------------------------------------------ */

/* One fork+execve+waitpid of /bin/true; its time. */
static uint64_t fork_true(void)
{
        char *argv[] = {"/bin/true", NULL};
        uint64_t t0 = now_ns();
        int st;
        pid_t p = fork();

        if (p < 0)
                die("fork");
        if (p == 0) {
                execve(argv[0], argv, environ);
                _exit(127);
        }
        if (waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
                die("true failed");
        return now_ns() - t0;
}

/* One exec of argv on the connection; its time, or 0 when it did not answer 200 + exit 0. */
static uint64_t exec_argv(rd *r, sink *k, const char *rid, int argc, char **argv)
{
        uint64_t t0 = now_ns();
        int st;

        k->exit_code = -1;
        post_exec(r->fd, rid, argc, argv);
        st = read_response(r, k);
        if (st != 200 || k->exit_code != 0) {
                fprintf(stderr, "benchtool: exec answered %d, exit %d\n", st, k->exit_code);
                return 0;
        }
        return now_ns() - t0;
}

/* POST /sandboxes {} (or {"image": IMAGE}) on the connection: the remote_id into rid; the
 * call's time. */
static uint64_t create_sandbox(rd *r, char *rid, size_t cap, const char *image)
{
        char req[1024];
        sink k = {.raw = 1};
        uint64_t t0, dt;
        const char *v, *e;
        int st, n;

        if (image && (strpbrk(image, "\"\\") || strlen(image) > 512))
                die("image not supported");
        n = image ? snprintf(req, sizeof(req),
                             "POST /sandboxes HTTP/1.1\r\nHost: bench\r\n"
                             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n"
                             "{\"image\":\"%s\"}",
                             strlen(image) + 12, image)
                  : snprintf(req, sizeof(req),
                             "POST /sandboxes HTTP/1.1\r\nHost: bench\r\n"
                             "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
        t0 = now_ns();
        write_all(r->fd, req, (size_t)n);
        st = read_response(r, &k);
        dt = now_ns() - t0;
        v = k.len ? memmem(k.line, k.len, "\"remote_id\":\"", 13) : NULL;
        e = v ? memchr(v + 13, '"', k.len - (size_t)(v + 13 - k.line)) : NULL;
        if (st != 200 || !e || (size_t)(e - v - 13) >= cap) {
                fprintf(stderr, "benchtool: create answered %d: %.*s\n", st,
                        (int)(k.len > 200 ? 200 : k.len), k.line ? k.line : "");
                exit(1);
        }
        memcpy(rid, v + 13, (size_t)(e - v - 13));
        rid[e - v - 13] = '\0';
        free(k.line);
        return dt;
}

/* DELETE /sandboxes/RID on the connection; the call's time. */
static uint64_t delete_sandbox(rd *r, const char *rid)
{
        char req[512];
        sink k = {.raw = 1};
        uint64_t t0 = now_ns();
        int n = snprintf(req, sizeof(req), "DELETE /sandboxes/%s HTTP/1.1\r\nHost: bench\r\n\r\n",
                         rid);
        int st;

        write_all(r->fd, req, (size_t)n);
        st = read_response(r, &k);
        free(k.line);
        if (st != 204) {
                fprintf(stderr, "benchtool: delete answered %d\n", st);
                exit(1);
        }
        return now_ns() - t0;
}

/* b64check: the decoders against each other and against an encoder, on random bytes of every
 * length up to 300 and a few long ones, then every character of a text replaced in turn by
 * bytes that are not base64 (or padding where it may not be): both must refuse. Exit 0 when
 * all agree. */
static size_t b64_encode_ref(const unsigned char *in, size_t n, char *out)
{
        const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t o = 0, i = 0;

        for (; i + 3 <= n; i += 3) {
                uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

                out[o++] = a[v >> 18];
                out[o++] = a[v >> 12 & 63];
                out[o++] = a[v >> 6 & 63];
                out[o++] = a[v & 63];
        }
        if (i < n) {
                uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);

                out[o++] = a[v >> 18];
                out[o++] = a[v >> 12 & 63];
                out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
                out[o++] = '=';
        }
        return o;
}

static int b64_both(const unsigned char *t, size_t n, unsigned char *d1, unsigned char *d2,
                    long *r1, long *r2)
{
#if defined(__x86_64__)
        int was = b64_avx2;

        b64_avx2 = 0;
        *r1 = b64_decode(t, n, d1);
        b64_avx2 = __builtin_cpu_supports("avx2");
        *r2 = b64_decode(t, n, d2);
        b64_avx2 = was;
        return *r1 == *r2 && (*r1 < 0 || memcmp(d1, d2, (size_t)*r1) == 0);
#else
        *r1 = *r2 = b64_decode(t, n, d1);
        (void)d2;
        return 1;
#endif
}

static int cmd_b64check(void)
{
        static const size_t longs[] = {1000, 4096, 65536, 100003};
        static const unsigned char bad[] = {'=',  '-',  '_', '\0', '\n', ' ', '"', '.',
                                            0x80, 0xff, '@', '[',  '`',  '{', ':'};
        size_t cap = 140000, cases = 0;
        unsigned char *in = malloc(cap), *d1 = malloc(cap + 32), *d2 = malloc(cap + 32);
        char *t = malloc(cap * 2);
        long r1, r2;

        if (!in || !d1 || !d2 || !t)
                die("malloc");
        srand(1);
        for (size_t k = 0; k < 300 + sizeof(longs) / sizeof(longs[0]); k++) {
                size_t n = k < 300 ? k : longs[k - 300], m;

                for (size_t i = 0; i < n; i++)
                        in[i] = (unsigned char)rand();
                m = b64_encode_ref(in, n, t);
                cases++;
                if (!b64_both((unsigned char *)t, m, d1, d2, &r1, &r2) || r1 != (long)n ||
                    memcmp(d1, in, n) != 0) {
                        fprintf(stderr, "b64check: length %zu: %ld %ld\n", n, r1, r2);
                        return 1;
                }
                if (n > 200 && n != 4096)
                        continue; /* every position of the shorter ones, and of 4096 */
                for (size_t p = 0; p < m; p++)
                        for (size_t b = 0; b < sizeof(bad); b++) {
                                char keep = t[p];

                                if (bad[b] == '=' && p >= m - 2)
                                        continue; /* padding's own place */
                                t[p] = (char)bad[b];
                                cases++;
                                if (!b64_both((unsigned char *)t, m, d1, d2, &r1, &r2) ||
                                    r1 != -1) {
                                        fprintf(stderr,
                                                "b64check: length %zu, 0x%02x at %zu: %ld %ld\n", n,
                                                bad[b], p, r1, r2);
                                        return 1;
                                }
                                t[p] = keep;
                        }
        }
        printf("b64check: %zu cases agree\n", cases);
        free(in);
        free(d1);
        free(d2);
        free(t);
        return 0;
}

static int cmd_forkloop(long n)
{
        for (long i = 0; i < n; i++)
                printf("%llu\n", (unsigned long long)fork_true());
        return 0;
}

/* One exec of `true`. */
static uint64_t exec_true(rd *r, sink *k, const char *rid)
{
        char *argv[] = {"true"};

        return exec_argv(r, k, rid, 1, argv);
}

static int cmd_execloop(const char *host, int port, const char *rid, long n, int argc, char **argv)
{
        rd r = {.fd = http_connect(host, port)};
        sink k = {0};

        for (long i = 0; i < n; i++) {
                uint64_t t = argc ? exec_argv(&r, &k, rid, argc, argv) : exec_true(&r, &k, rid);

                if (!t)
                        return 1;
                printf("%llu\n", (unsigned long long)t);
        }
        return 0;
}

/* ---- K loops at once -------------------------------------------------------------------- */

typedef struct par {
        int ready_fd, go_fd; /* a child's ends of the two pipes */
} par;

/* In a child: tells the parent it is set up, waits for the start (the parent closes the pipe). */
static void par_start(par *p)
{
        char c = 1;

        if (write(p->ready_fd, &c, 1) != 1)
                die("ready");
        while (read(p->go_fd, &c, 1) < 0 && errno == EINTR)
                ;
}

/* Runs fn in k children at once: each sets up, calls par_start, runs n rounds into its lat[]
 * (shared memory: K*N latencies, then the K children's end times) and returns 0; prints the wall time from the start to the last child's end, then every
 * latency. A child that fails ends the run (every child is ended by its pid). */
static int par_run(int k, long n, int (*fn)(par *p, int i, long n, uint64_t *lat, void *arg),
                   void *arg)
{
        size_t cells = (size_t)k * (size_t)n + (size_t)k;
        uint64_t *lat = mmap(NULL, cells * sizeof(*lat), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        pid_t *pids = calloc((size_t)k, sizeof(*pids));
        int ready[2], go[2], got = 0, fail = 0;
        uint64_t t0, end = 0;

        if (lat == MAP_FAILED || !pids || pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0)
                die("par setup");
        fflush(stdout);
        for (int i = 0; i < k; i++) {
                pids[i] = fork();
                if (pids[i] < 0)
                        die("fork");
                if (pids[i] == 0) {
                        par p = {.ready_fd = ready[1], .go_fd = go[0]};
                        int rc;

                        close(ready[0]);
                        close(go[1]);
                        rc = fn(&p, i, n, lat + (size_t)i * (size_t)n, arg);
                        lat[(size_t)k * (size_t)n + (size_t)i] = now_ns();
                        _exit(rc);
                }
        }
        close(ready[1]);
        close(go[0]);
        while (got < k) {
                struct pollfd pf = {.fd = ready[0], .events = POLLIN};
                char c[64];
                ssize_t r;

                if (poll(&pf, 1, 120000) <= 0 || (r = read(ready[0], c, sizeof(c))) <= 0) {
                        fail = 1; /* a child died in its setup, or it hangs */
                        break;
                }
                got += (int)r;
        }
        for (int i = 0; fail && i < k; i++)
                kill(pids[i], SIGKILL); /* before the start: none runs its loop */
        t0 = now_ns();
        close(go[1]);
        for (int i = 0; i < k; i++) {
                int st;

                if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
                        fail = 1;
        }
        if (fail) {
                fprintf(stderr, "benchtool: a parallel loop failed\n");
                return 1;
        }
        for (int i = 0; i < k; i++)
                if (lat[(size_t)k * (size_t)n + (size_t)i] > end)
                        end = lat[(size_t)k * (size_t)n + (size_t)i];
        printf("%llu\n", (unsigned long long)(end - t0));
        for (size_t i = 0; i < (size_t)k * (size_t)n; i++)
                printf("%llu\n", (unsigned long long)lat[i]);
        return 0;
}

static int par_fork(par *p, int i, long n, uint64_t *lat, void *arg)
{
        (void)i;
        (void)arg;
        par_start(p);
        for (long j = 0; j < n; j++)
                lat[j] = fork_true();
        return 0;
}

typedef struct par_exec_arg {
        const char *host;
        int port;
        char **rids;
} par_exec_arg;

static int par_exec(par *p, int i, long n, uint64_t *lat, void *arg)
{
        par_exec_arg *a = arg;
        rd r = {.fd = http_connect(a->host, a->port)};
        sink k = {0};

        par_start(p);
        for (long j = 0; j < n; j++)
                if (!(lat[j] = exec_true(&r, &k, a->rids[i])))
                        return 1;
        return 0;
}

static int cmd_lifeloop(const char *host, int port, long n, long execs, long pause_ms,
                        const char *image)
{
        rd r = {.fd = http_connect(host, port)};
        sink k = {0};
        char rid[256];

        for (long i = 0; i < n; i++) {
                printf("%llu", (unsigned long long)create_sandbox(&r, rid, sizeof(rid), image));
                for (long j = 0; j < execs; j++) {
                        uint64_t t = exec_true(&r, &k, rid);

                        if (!t)
                                return 1;
                        printf(" %llu", (unsigned long long)t);
                }
                printf(" %llu\n", (unsigned long long)delete_sandbox(&r, rid));
                if (pause_ms > 0) {
                        struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};

                        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                                ;
                }
        }
        return 0;
}

static int cmd_batchloop(const char *host, int port, long n)
{
        rd r = {.fd = http_connect(host, port)};
        char(*rids)[256] = calloc((size_t)n, sizeof(*rids));
        uint64_t *ct = calloc((size_t)n, sizeof(*ct));

        if (!rids || !ct)
                die("calloc");
        for (long i = 0; i < n; i++)
                ct[i] = create_sandbox(&r, rids[i], sizeof(rids[i]), NULL);
        for (long i = 0; i < n; i++)
                printf("%llu %llu\n", (unsigned long long)ct[i],
                       (unsigned long long)delete_sandbox(&r, rids[i]));
        return 0;
}

static int cmd_stream(const char *host, int port, const char *rid, int argc, char **argv)
{
        int fd = http_connect(host, port), st;
        rd r = {.fd = fd};
        sink k = {.exit_code = -1};
        uint64_t t0 = now_ns();

        post_exec(fd, rid, argc, argv);
        st = read_response(&r, &k);
        printf("%llu %.6f %d\n", (unsigned long long)k.bytes, (double)(now_ns() - t0) / 1e9,
               st == 200 ? k.exit_code : -st);
        return st == 200 && k.exit_code == 0 ? 0 : 1;
}

static int cmd_oscmdloop(const char *host, int port, const char *id, long n)
{
        int fd = http_connect(host, port);
        rd r = {.fd = fd};
        sink k = {.sse = 1};

        for (long i = 0; i < n; i++) {
                uint64_t t0 = now_ns();
                int st;

                k.exit_code = -1;
                post_command(fd, id, "true");
                st = read_response(&r, &k);
                if (st != 200 || k.exit_code != 0) {
                        fprintf(stderr, "benchtool: command answered %d, exit %d\n", st,
                                k.exit_code);
                        return 1;
                }
                printf("%llu\n", (unsigned long long)(now_ns() - t0));
        }
        return 0;
}

static int cmd_osstream(const char *host, int port, const char *id, const char *text)
{
        int fd = http_connect(host, port), st;
        rd r = {.fd = fd};
        sink k = {.exit_code = -1, .sse = 1};
        uint64_t t0 = now_ns();

        post_command(fd, id, text);
        st = read_response(&r, &k);
        printf("%llu %.6f %d\n", (unsigned long long)k.bytes, (double)(now_ns() - t0) / 1e9,
               st == 200 ? k.exit_code : -st);
        return st == 200 && k.exit_code == 0 ? 0 : 1;
}

static int cmd_pipecat(const char *file)
{
        int p[2], st;
        pid_t pid;
        posix_spawn_file_actions_t fa;
        char *argv[] = {"cat", (char *)file, NULL};
        static char buf[1 << 16];
        uint64_t t0 = now_ns(), bytes = 0;
        ssize_t n;

        if (pipe2(p, O_CLOEXEC) < 0)
                die("pipe");
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, p[1], 1);
        if (posix_spawnp(&pid, "cat", &fa, NULL, argv, environ) != 0)
                die("spawn cat");
        close(p[1]);
        while ((n = read(p[0], buf, sizeof(buf))) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        die("read");
                bytes += (uint64_t)n;
        }
        if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
                die("cat failed");
        printf("%llu %.6f\n", (unsigned long long)bytes, (double)(now_ns() - t0) / 1e9);
        return 0;
}

int main(int argc, char **argv)
{
        b64_init();
        setvbuf(stdout, NULL, _IOFBF, 1 << 16);
        if (argc == 2 && strcmp(argv[1], "b64check") == 0)
                return cmd_b64check();
        if (argc == 3 && strcmp(argv[1], "forkloop") == 0)
                return cmd_forkloop(atol(argv[2]));
        if (argc >= 6 && strcmp(argv[1], "execloop") == 0)
                return cmd_execloop(argv[2], atoi(argv[3]), argv[4], atol(argv[5]), argc - 6,
                                    argv + 6);
        if (argc == 4 && strcmp(argv[1], "forkpar") == 0 && atoi(argv[2]) > 0 && atol(argv[3]) > 0)
                return par_run(atoi(argv[2]), atol(argv[3]), par_fork, NULL);
        if (argc >= 6 && strcmp(argv[1], "execpar") == 0 && atol(argv[4]) > 0) {
                par_exec_arg pa = {.host = argv[2], .port = atoi(argv[3]), .rids = argv + 5};

                return par_run(argc - 5, atol(argv[4]), par_exec, &pa);
        }
        if (argc >= 6 && argc <= 8 && strcmp(argv[1], "lifeloop") == 0)
                return cmd_lifeloop(argv[2], atoi(argv[3]), atol(argv[4]), atol(argv[5]),
                                    argc >= 7 ? atol(argv[6]) : 0, argc == 8 ? argv[7] : NULL);
        if (argc == 5 && strcmp(argv[1], "batchloop") == 0 && atol(argv[4]) > 0)
                return cmd_batchloop(argv[2], atoi(argv[3]), atol(argv[4]));
        if (argc >= 6 && strcmp(argv[1], "stream") == 0)
                return cmd_stream(argv[2], atoi(argv[3]), argv[4], argc - 5, argv + 5);
        if (argc == 3 && strcmp(argv[1], "pipecat") == 0)
                return cmd_pipecat(argv[2]);
        if (argc == 6 && strcmp(argv[1], "oscmdloop") == 0)
                return cmd_oscmdloop(argv[2], atoi(argv[3]), argv[4], atol(argv[5]));
        if (argc == 6 && strcmp(argv[1], "osstream") == 0)
                return cmd_osstream(argv[2], atoi(argv[3]), argv[4], argv[5]);
        fprintf(stderr,
                "usage: benchtool forkloop N | execloop HOST PORT RID N [ARG...] | forkpar K N | "
                "execpar HOST PORT N RID... | lifeloop HOST PORT N E [MS [IMAGE]] | "
                "batchloop HOST PORT N | stream HOST PORT RID ARG... | pipecat FILE | "
                "oscmdloop HOST PORT ID N | osstream HOST PORT ID TEXT\n");
        return 2;
}
