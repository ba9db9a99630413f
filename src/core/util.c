/* util.c: pure parsing and path helpers (no syscalls): numbers, Kubernetes quantities, RFC 3339
 * times, URL and query decoding, paths, ids, JSON intake, UTF-8. */
#include "sh/util.h"
#include "sh/buf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <cjson/cJSON.h>

int sh_parse_u64(const char *s, uint64_t *ret)
{
        uint64_t v = 0;

        if (!s || !*s)
                return -EINVAL;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t)(*s - '0');
        }
        *ret = v;
        return 0;
}

int sh_parse_size(const char *s, uint64_t *ret)
{
        char digits[32];
        size_t n = 0;
        unsigned shift = 0;
        uint64_t v;
        int r;

        if (!s)
                return -EINVAL;
        while (s[n] >= '0' && s[n] <= '9')
                n++;
        if (n == 0 || n >= sizeof(digits))
                return -EINVAL;
        memcpy(digits, s, n);
        digits[n] = '\0';
        s += n;
        switch (*s) {
        case '\0':
                break;
        case 'k':
        case 'K':
                shift = 10;
                break;
        case 'm':
        case 'M':
                shift = 20;
                break;
        case 'g':
        case 'G':
                shift = 30;
                break;
        case 't':
        case 'T':
                shift = 40;
                break;
        default:
                return -EINVAL;
        }
        if (shift) {
                s++;
                if (*s == 'i')
                        s++;
                if (*s == 'b' || *s == 'B')
                        s++;
        }
        if (*s)
                return -EINVAL;
        r = sh_parse_u64(digits, &v);
        if (r < 0)
                return r;
        if (shift && v > (UINT64_MAX >> shift))
                return -ERANGE;
        *ret = v << shift;
        return 0;
}

int sh_parse_ipv4_net(const char *s, uint32_t *ret_addr, unsigned *ret_prefix)
{
        char a[INET_ADDRSTRLEN];
        const char *slash = strchr(s, '/');
        size_t alen = slash ? (size_t)(slash - s) : strlen(s);
        unsigned prefix = 32;
        struct in_addr addr;
        uint32_t host;

        if (alen == 0 || alen >= sizeof(a))
                return -EINVAL;
        memcpy(a, s, alen);
        a[alen] = '\0';
        if (inet_pton(AF_INET, a, &addr) != 1) /* dotted quad only: no "10.1", no octal */
                return -EINVAL;
        if (slash) {
                const char *p = slash + 1;

                if (!*p || strlen(p) > 2 || (p[0] == '0' && p[1]))
                        return -EINVAL;
                prefix = 0;
                for (; *p; p++) {
                        if (*p < '0' || *p > '9')
                                return -EINVAL;
                        prefix = prefix * 10 + (unsigned)(*p - '0');
                }
                if (prefix > 32)
                        return -EINVAL;
        }
        host = prefix == 32 ? 0 : (0xffffffffu >> prefix);
        if (ntohl(addr.s_addr) & host)
                return -EINVAL;
        *ret_addr = addr.s_addr;
        *ret_prefix = prefix;
        return 0;
}

int sh_parse_seconds(const char *s, uint64_t *ret)
{
        uint64_t v = 0, unit = 1;
        const char *p = s;

        if (!s || *p < '0' || *p > '9')
                return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
                if (v > (UINT64_MAX - 9) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t)(*p - '0');
        }
        switch (*p) {
        case '\0':
                break;
        case 's':
        case 'S':
                break;
        case 'm':
        case 'M':
                unit = 60;
                break;
        case 'h':
        case 'H':
                unit = 3600;
                break;
        case 'd':
        case 'D':
                unit = 86400;
                break;
        default:
                return -EINVAL;
        }
        if (*p && p[1])
                return -EINVAL;
        if (v > UINT64_MAX / unit)
                return -ERANGE;
        *ret = v * unit;
        return 0;
}

int sh_parse_millicores(const char *s, uint64_t *ret)
{
        uint64_t whole = 0, frac = 0;
        unsigned frac_digits = 0;
        const char *p = s;

        if (!s || !*s)
                return -EINVAL;
        if (*p < '0' || *p > '9')
                return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
                whole = whole * 10 + (uint64_t)(*p - '0');
                if (whole > 1000000)
                        return -ERANGE;
        }
        if (*p == '.') {
                p++;
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                for (; *p >= '0' && *p <= '9'; p++) {
                        if (frac_digits == 3)
                                return -EINVAL; /* finer than a milli-core */
                        frac = frac * 10 + (uint64_t)(*p - '0');
                        frac_digits++;
                }
        }
        if (*p)
                return -EINVAL;
        while (frac_digits < 3) {
                frac *= 10;
                frac_digits++;
        }
        if (whole * 1000 + frac == 0)
                return -EINVAL;
        *ret = whole * 1000 + frac;
        return 0;
}

/* ---- Kubernetes quantities ------------------------------------------------------------------ */

typedef struct suffix {
        const char *s;
        unsigned base; /* 2 or 10 */
        int exp;       /* power of base */
} suffix;

/* Kubernetes' suffixes (apimachinery resource.Quantity): binary Ki..Ei, decimal n..E. */
static const suffix suffixes[] = {
        {"Ki", 2, 10}, {"Mi", 2, 20}, {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60},
        {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"", 10, 0},   {"k", 10, 3},  {"M", 10, 6},
        {"G", 10, 9},  {"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18},
};

int sh_quantity_parse(const char *s, uint64_t scale, uint64_t *ret)
{
        unsigned __int128 num = 0, den = 1, q;
        unsigned digits = 0;
        const char *p = s;
        const suffix *sx = NULL;
        int exp10 = 0, exp2 = 0, e;
        size_t i;

        if (!s)
                return -EINVAL;
        if (*p == '+')
                p++;
        /* digits [. digits] | . digits: at most 30 significant digits keep num in 128 bits */
        for (; *p >= '0' && *p <= '9'; p++, digits++) {
                if (digits >= 30)
                        return -EINVAL;
                num = num * 10 + (unsigned)(*p - '0');
        }
        if (*p == '.') {
                unsigned frac = 0;

                for (p++; *p >= '0' && *p <= '9'; p++, frac++) {
                        if (digits + frac >= 30)
                                return -EINVAL;
                        num = num * 10 + (unsigned)(*p - '0');
                        den *= 10;
                }
                digits += frac;
        }
        if (digits == 0)
                return -EINVAL;
        if (*p == 'e' || *p == 'E') {
                /* a decimal exponent ("1e3"), unless it is the suffix E (exa) alone */
                const char *x = p + 1;
                int sign = 1, v = 0, n = 0;

                if (*x == '+' || *x == '-')
                        sign = *x++ == '-' ? -1 : 1;
                for (; *x >= '0' && *x <= '9' && n < 3; x++, n++)
                        v = v * 10 + (*x - '0');
                if (n > 0 && !*x) {
                        exp10 = sign * v;
                        p = x;
                        sx = &suffixes[9]; /* none */
                }
        }
        if (!sx)
                for (i = 0; i < ARRAY_SIZE(suffixes); i++)
                        if (STREQ(p, suffixes[i].s)) {
                                sx = &suffixes[i];
                                break;
                        }
        if (!sx)
                return -EINVAL;
        if (sx->base == 2)
                exp2 = sx->exp;
        else
                exp10 += sx->exp;
        if (exp10 > 30 || exp10 < -30)
                return -EINVAL;
        /* value = num / den * 2^exp2 * 10^exp10 * scale, rounded up, saturating */
        for (e = 0; e < exp10; e++) {
                if (num > ((unsigned __int128)UINT64_MAX << 32))
                        goto saturate;
                num *= 10;
        }
        for (e = 0; e > exp10; e--)
                den *= 10;
        for (e = 0; e < exp2; e++) {
                if (num > ((unsigned __int128)UINT64_MAX << 32))
                        goto saturate;
                num *= 2;
        }
        if (num > ((unsigned __int128)UINT64_MAX << 32) / (scale ? scale : 1))
                goto saturate;
        num *= scale;
        q = (num + den - 1) / den;
        if (q > UINT64_MAX)
                goto saturate;
        *ret = (uint64_t)q;
        return 0;
saturate:
        *ret = UINT64_MAX;
        return 0;
}

/* ---- RFC 3339 ------------------------------------------------------------------------------- */

void sh_rfc3339_format(uint64_t ms, char out[32])
{
        time_t t = (time_t)(ms / 1000);
        struct tm tm;

        if (!gmtime_r(&t, &tm)) {
                snprintf(out, 32, "1970-01-01T00:00:00.000Z");
                return;
        }
        /* Years past 9999 do not fit RFC 3339: the latest representable instant instead. */
        if (tm.tm_year + 1900 > 9999 || tm.tm_year < 0) {
                snprintf(out, 32, "9999-12-31T23:59:59.999Z");
                return;
        }
        snprintf(out, 32, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ",
                 (unsigned)(tm.tm_year + 1900) % 10000, (unsigned)(tm.tm_mon + 1) % 100,
                 (unsigned)tm.tm_mday % 100, (unsigned)tm.tm_hour % 100, (unsigned)tm.tm_min % 100,
                 (unsigned)tm.tm_sec % 100, (unsigned)(ms % 1000));
}

void sh_rfc3339_format_ts(int64_t sec, uint32_t nsec, char out[32])
{
        sh_rfc3339_format(sec < 0 ? 0 : (uint64_t)sec * 1000 + nsec / 1000000, out);
}

static bool digits_at(const char *s, int n, int *ret)
{
        int i, v = 0;

        for (i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                v = v * 10 + (s[i] - '0');
        }
        *ret = v;
        return true;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
        int64_t era;
        unsigned yoe, doy, doe;

        y -= m <= 2;
        era = (y >= 0 ? y : y - 399) / 400;
        yoe = (unsigned)(y - era * 400);
        doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + (int64_t)doe - 719468;
}

int sh_rfc3339_parse(const char *s, uint64_t *ret_ms)
{
        static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
        unsigned ms = 0, scale = 100;
        const char *p;
        int64_t t;

        if (!s || strlen(s) < 20 || !digits_at(s, 4, &y) || s[4] != '-' ||
            !digits_at(s + 5, 2, &mo) || s[7] != '-' || !digits_at(s + 8, 2, &d) ||
            (s[10] != 'T' && s[10] != 't') || !digits_at(s + 11, 2, &h) || s[13] != ':' ||
            !digits_at(s + 14, 2, &mi) || s[16] != ':' || !digits_at(s + 17, 2, &sec))
                return -EINVAL;
        if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || sec > 60)
                return -EINVAL;
        if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
                return -EINVAL;
        p = s + 19;
        if (*p == '.') {
                if (p[1] < '0' || p[1] > '9')
                        return -EINVAL;
                for (p++; *p >= '0' && *p <= '9'; p++) {
                        ms += (unsigned)(*p - '0') * scale;
                        scale /= 10;
                }
        }
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                sign = *p == '-' ? -1 : 1;
                if (!digits_at(p + 1, 2, &oh) || p[3] != ':' || !digits_at(p + 4, 2, &om) ||
                    oh > 23 || om > 59)
                        return -EINVAL;
                p += 6;
        } else {
                return -EINVAL;
        }
        if (*p)
                return -EINVAL;
        if (sec == 60)
                sec = 59; /* a leap second is the last second of its minute here */
        t = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + sec;
        t -= sign * (oh * 3600 + om * 60);
        if (t < 0)
                return -EINVAL;
        *ret_ms = (uint64_t)t * 1000 + ms;
        return 0;
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

char *sh_memdup0(const char *p, size_t n)
{
        char *s = malloc(n + 1);

        if (s) {
                if (n)
                        memcpy(s, p, n); /* p may be NULL when n is 0 */
                s[n] = '\0';
        }
        return s;
}

int sh_url_decode(const char *in, size_t len, bool plus_is_space, char **ret, size_t *ret_len)
{
        char *out = malloc(len + 1);
        size_t i, o = 0;

        if (!out)
                return -ENOMEM;
        for (i = 0; i < len; i++) {
                if (in[i] == '%') {
                        int hi, lo;

                        if (i + 2 >= len) {
                                free(out);
                                return -EINVAL;
                        }
                        hi = hexval(in[i + 1]);
                        lo = hexval(in[i + 2]);
                        if (hi < 0 || lo < 0) {
                                free(out);
                                return -EINVAL;
                        }
                        out[o++] = (char)(hi << 4 | lo);
                        i += 2;
                } else if (plus_is_space && in[i] == '+') {
                        out[o++] = ' ';
                } else {
                        out[o++] = in[i];
                }
        }
        out[o] = '\0';
        *ret = out;
        if (ret_len)
                *ret_len = o;
        return 0;
}

void sh_query_done(sh_query *q)
{
        size_t i;

        if (!q)
                return;
        for (i = 0; i < q->n; i++) {
                free(q->v[i].key);
                free(q->v[i].val);
        }
        free(q->v);
        q->v = NULL;
        q->n = 0;
}

int sh_query_parse(const char *qs, sh_query *ret)
{
        sh_query q = {0};
        const char *p = qs;

        *ret = q;
        if (!qs)
                return 0;
        while (*p) {
                const char *amp = strchr(p, '&');
                const char *end = amp ? amp : p + strlen(p);
                const char *eq = memchr(p, '=', (size_t)(end - p));
                sh_query_param prm = {0};
                sh_query_param *nv;
                int r;

                if (end == p) { /* empty field ("a=1&&b=2") */
                        p = amp ? amp + 1 : end;
                        continue;
                }
                r = sh_url_decode(p, (size_t)((eq ? eq : end) - p), true, &prm.key, &prm.key_len);
                if (r == 0 && eq)
                        r = sh_url_decode(eq + 1, (size_t)(end - eq - 1), true, &prm.val,
                                          &prm.val_len);
                else if (r == 0)
                        r = sh_url_decode("", 0, true, &prm.val, &prm.val_len);
                if (r == 0) {
                        nv = realloc(q.v, (q.n + 1) * sizeof(*q.v));
                        if (!nv)
                                r = -ENOMEM;
                        else
                                q.v = nv;
                }
                if (r < 0) {
                        free(prm.key);
                        free(prm.val);
                        sh_query_done(&q);
                        return r;
                }
                q.v[q.n++] = prm;
                p = amp ? amp + 1 : end;
        }
        *ret = q;
        return 0;
}

const sh_query_param *sh_query_next(const sh_query *q, const char *key, size_t *i)
{
        size_t kl = strlen(key);

        while (*i < q->n) {
                const sh_query_param *p = &q->v[(*i)++];

                if (p->key_len == kl && memcmp(p->key, key, kl) == 0)
                        return p;
        }
        return NULL;
}

const sh_query_param *sh_query_find(const sh_query *q, const char *key)
{
        size_t i = 0;

        return sh_query_next(q, key, &i);
}

int sh_query_u64(const sh_query *q, const char *key, uint64_t *ret)
{
        const sh_query_param *p = sh_query_find(q, key);
        int r;

        *ret = 0;
        if (!p)
                return 0;
        return (r = sh_parse_u64(p->val, ret)) < 0 ? r : 1;
}

int sh_path_normalize(const char *in, size_t len, char **ret)
{
        char *out;
        size_t i = 0, o = 0;

        if (len == 0 || len > SH_PATH_MAX || memchr(in, '\0', len))
                return -EINVAL;
        out = malloc(len + 1);
        if (!out)
                return -ENOMEM;
        while (i < len) {
                size_t start, clen;

                while (i < len && in[i] == '/')
                        i++;
                start = i;
                while (i < len && in[i] != '/')
                        i++;
                clen = i - start;
                if (clen == 0 || (clen == 1 && in[start] == '.'))
                        continue;
                if (clen == 2 && in[start] == '.' && in[start + 1] == '.') {
                        if (o == 0) {
                                free(out);
                                return -EINVAL; /* climbs above the root */
                        }
                        while (o > 0 && out[o - 1] != '/')
                                o--;
                        if (o > 0)
                                o--; /* drop the separator too */
                        continue;
                }
                if (o > 0)
                        out[o++] = '/';
                memcpy(out + o, in + start, clen);
                o += clen;
        }
        out[o] = '\0';
        *ret = out;
        return 0;
}

int sh_path_split(const char *path, char **ret_parent, const char **ret_base)
{
        const char *slash = strrchr(path, '/');
        char *parent;

        if (!*path)
                return -EINVAL;
        if (!slash) {
                parent = strdup("");
                *ret_base = path;
        } else {
                parent = strndup(path, (size_t)(slash - path));
                *ret_base = slash + 1;
        }
        if (!parent)
                return -ENOMEM;
        *ret_parent = parent;
        return 0;
}

static bool id_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool sh_item_id_valid(const char *s)
{
        size_t n;

        if (!s || !id_char(s[0]))
                return false;
        for (n = 1; s[n]; n++) {
                if (n > 127)
                        return false;
                if (!id_char(s[n]) && s[n] != '.' && s[n] != '_' && s[n] != '-')
                        return false;
        }
        return true;
}

static bool lower_hex(const char *s, size_t len)
{
        size_t i;

        for (i = 0; i < len; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

bool sh_remote_id_valid(const char *s, size_t len)
{
        return len == SH_ID_LEN && lower_hex(s, len);
}

bool sh_pod_token_valid(const char *s, size_t len)
{
        return len == SH_POD_TOKEN_LEN && lower_hex(s, len);
}

int sh_id_token(const char *id, size_t len, char out[SH_POD_TOKEN_LEN + 1])
{
        if (!sh_remote_id_valid(id, len))
                return -EINVAL;
        memcpy(out, id, SH_POD_TOKEN_LEN);
        out[SH_POD_TOKEN_LEN] = '\0';
        return 0;
}

uint32_t sh_remote_id_hash(const char *id)
{
        uint32_t h = 0;
        unsigned i;

        for (i = SH_POD_TOKEN_LEN; i < SH_POD_TOKEN_LEN + 8; i++)
                h = (h << 4) | (uint32_t)((id[i] >= 'a' ? id[i] - 'a' + 10 : id[i] - '0') & 15);
        return h;
}

size_t sh_utf8_seq_len(const unsigned char *s, size_t n)
{
        unsigned c = s[0];
        size_t len, i;
        unsigned cp;

        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf) {
                len = 2;
                cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
                len = 3;
                cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
                len = 4;
                cp = c & 0x07;
        } else {
                return 0;
        }
        if (len > n)
                return 0;
        for (i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        /* overlong forms, surrogates, beyond U+10FFFF */
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return len;
}

struct cJSON *sh_json_parse_exact(const char *text, size_t len)
{
        const char *end = NULL;
        cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, false);

        if (!j || !end)
                return j;
        while ((size_t)(end - text) < len && *end && strchr(" \t\r\n", *end))
                end++;
        if ((size_t)(end - text) != len) {
                cJSON_Delete(j);
                return NULL;
        }
        return j;
}

/* The scan of sh_json_parse_text, before cJSON sees the text: false for a raw control character
 * or a \u0000 escape inside a string (keys are strings too); with `bytes`, \udc80..\udcff
 * becomes the raw byte it stands for (the text only shrinks). */
static bool json_prepass(char *text, size_t *len, bool bytes)
{
        size_t i = 0, o = 0, n = *len;
        bool in_string = false;

        while (i < n) {
                char c = text[i];

                if (!in_string) {
                        if (c == '"')
                                in_string = true;
                        text[o++] = text[i++];
                        continue;
                }
                if (c == '"') {
                        in_string = false;
                        text[o++] = text[i++];
                        continue;
                }
                if ((unsigned char)c < 0x20)
                        return false; /* JSON forbids raw control characters in strings */
                if (c == '\\' && i + 1 < n) {
                        if (text[i + 1] == 'u' && i + 5 < n) {
                                char hex[5] = {text[i + 2], text[i + 3], text[i + 4], text[i + 5],
                                               0};
                                unsigned long v = strtoul(hex, NULL, 16);
                                bool all_hex = strspn(hex, "0123456789abcdefABCDEF") == 4;

                                if (all_hex && v == 0)
                                        return false;
                                if (bytes && all_hex && v >= 0xdc80 && v <= 0xdcff) {
                                        text[o++] = (char)(v & 0xff);
                                        i += 6;
                                        continue;
                                }
                        }
                        text[o++] = text[i++];
                        text[o++] = text[i++];
                        continue;
                }
                text[o++] = text[i++];
        }
        if (o < n)
                text[o] = '\0';
        *len = o;
        return true;
}

struct cJSON *sh_json_parse_text(char *text, size_t *len, unsigned flags, const char **ret_why)
{
        cJSON *j;

        *ret_why = "not valid JSON";
        if (memchr(text, '\0', *len) || !sh_utf8_valid(text, *len))
                return NULL;
        if (!json_prepass(text, len, flags & SH_JSON_SURROGATE_BYTES)) {
                *ret_why = "not valid JSON (a control character or \\u0000 in a string)";
                return NULL;
        }
        j = sh_json_parse_exact(text, *len);
        if (j)
                *ret_why = NULL;
        return j;
}

void sh_json_freep(struct cJSON **p)
{
        cJSON_Delete(*p);
}

static const char hex_digits[] = "0123456789abcdef";

void sh_hex_encode(const void *p, size_t n, char *out)
{
        const unsigned char *b = p;

        for (size_t i = 0; i < n; i++) {
                out[2 * i] = hex_digits[b[i] >> 4];
                out[2 * i + 1] = hex_digits[b[i] & 15];
        }
        out[2 * n] = '\0';
}

void sh_uuid_format(const unsigned char b[16], char out[SH_UUID_LEN + 1])
{
        unsigned char v[16];
        size_t k = 0;

        memcpy(v, b, sizeof(v));
        v[6] = (unsigned char)((v[6] & 0x0f) | 0x40); /* version 4 */
        v[8] = (unsigned char)((v[8] & 0x3f) | 0x80); /* variant 10 */
        for (size_t i = 0; i < 16; i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10)
                        out[k++] = '-';
                sh_hex_encode(v + i, 1, out + k);
                k += 2;
        }
}

/* A byte JSON carries as itself: printable ASCII but the quote and the backslash. */
static inline bool json_plain(unsigned char c)
{
        return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

uint64_t sh_fnv1a(uint64_t h, const void *p, size_t n)
{
        const unsigned char *c = p;

        for (size_t i = 0; i < n; i++)
                h = (h ^ c[i]) * 1099511628211ULL;
        return h;
}

void sh_quote_printable(const char *in, char *out, size_t size)
{
        size_t i = 0;

        for (; in && *in && i + 4 < size; in++)
                out[i++] = (*in >= 0x20 && *in < 0x7f) ? *in : '?';
        if (in && *in && i + 4 <= size) {
                memcpy(out + i, "...", 3);
                i += 3;
        }
        out[i] = '\0';
}

/* The length of the run of json_plain bytes at the start of u[0..n): 16 bytes at a time with
 * SSE2 (a signed compare below 0x20 also finds the bytes 0x80 and above; the first byte that
 * is not plain is the mask's lowest bit), else 8 at a time (a word is plain unless a byte of
 * it is below 0x20, 0x7f or above, '"' or '\\': the exact "has a byte below N" and "has a
 * zero byte" word tests; a word that has one is finished byte by byte). */
static size_t json_plain_run(const unsigned char *u, size_t n)
{
        const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
        size_t i = 0;

#ifdef __SSE2__
        const __m128i lo = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f), quo = _mm_set1_epi8('"'),
                      bsl = _mm_set1_epi8('\\');

        for (; i + 16 <= n; i += 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(u + i));
                __m128i bad =
                        _mm_or_si128(_mm_or_si128(_mm_cmplt_epi8(v, lo), _mm_cmpeq_epi8(v, del)),
                                     _mm_or_si128(_mm_cmpeq_epi8(v, quo), _mm_cmpeq_epi8(v, bsl)));
                unsigned m = (unsigned)_mm_movemask_epi8(bad);

                if (m)
                        return i + (size_t)__builtin_ctz(m);
        }
#endif

#define ZERO_BYTE(x) (((x)-ones) & ~(x))
        for (; i + 8 <= n; i += 8) {
                uint64_t v, q, b, d;

                memcpy(&v, u + i, 8);
                q = v ^ (ones * '"');
                b = v ^ (ones * '\\');
                d = v ^ (ones * 0x7f);
                if (((v | ((v - ones * 0x20) & ~v) | ZERO_BYTE(d) | ZERO_BYTE(q) | ZERO_BYTE(b)) &
                     high) != 0)
                        break;
        }
#undef ZERO_BYTE
        while (i < n && json_plain(u[i]))
                i++;
        return i;
}

size_t sh_json_quote_bytes(const char *s, size_t n, char *out)
{
        static const char hex[] = "0123456789abcdef";
        const unsigned char *u = (const unsigned char *)s;
        size_t i = 0, o = 0, j;

        out[o++] = '"';
        while (i < n) {
                unsigned char c = u[i];
                size_t vl;

                if (json_plain(c)) { /* a run of them at once: most text is */
                        j = i + 1 + json_plain_run(u + i + 1, n - i - 1);
                        memcpy(out + o, u + i, j - i);
                        o += j - i;
                        i = j;
                } else if (c == '"' || c == '\\') {
                        out[o++] = '\\';
                        out[o++] = (char)c;
                        i++;
                } else if (c < 0x20 || c == 0x7f) {
                        memcpy(out + o, "\\u00", 4);
                        out[o + 4] = hex[c >> 4];
                        out[o + 5] = hex[c & 15];
                        o += 6;
                        i++;
                } else if ((vl = sh_utf8_seq_len(u + i, n - i)) > 0) {
                        memcpy(out + o, u + i, vl);
                        o += vl;
                        i += vl;
                } else {
                        memcpy(out + o, "\\udc", 4);
                        out[o + 4] = hex[c >> 4];
                        out[o + 5] = hex[c & 15];
                        o += 6;
                        i++;
                }
        }
        out[o++] = '"';
        return o;
}

/* Every byte of s[0..n) not part of valid UTF-8, and NUL, and with `controls` every other
 * control character, becomes '?'. */
static void utf8_scrub(char *s, size_t n, bool controls)
{
        size_t i = 0;

        while (i < n) {
                size_t vl = s[i] ? sh_utf8_seq_len((const unsigned char *)s + i, n - i) : 0;

                if (vl == 0 || (controls && ((unsigned char)s[i] < 0x20 || s[i] == 0x7f))) {
                        s[i++] = '?';
                        continue;
                }
                i += vl;
        }
}

void sh_utf8_sanitize(char *s)
{
        utf8_scrub(s, strlen(s), true);
}

void sh_utf8_scrub(char *s, size_t n)
{
        utf8_scrub(s, n, false);
}

bool sh_utf8_valid(const char *s, size_t n)
{
        size_t i = 0;

        while (i < n) {
                size_t vl = sh_utf8_seq_len((const unsigned char *)s + i, n - i);

                if (vl == 0)
                        return false;
                i += vl;
        }
        return true;
}

int sh_buf_append_json(sh_buf *b, const char *s, size_t n)
{
        if (n > (SIZE_MAX - 16) / 6 || sh_buf_reserve(b, 6 * n + 3) < 0)
                return -ENOMEM;
        b->len += sh_json_quote_bytes(s, n, b->p + b->len);
        return 0;
}

const cJSON *sh_json_opt(const cJSON *obj, const char *name)
{
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, name);

        return f && !cJSON_IsNull(f) ? f : NULL;
}
