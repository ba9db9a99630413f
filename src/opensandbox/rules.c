/* rules.c: the pure rules of the /v1 surface: Kubernetes quantities (resourceLimits), label
 * rules (metadata), image uri -> host image names, RFC 3339 times. No syscalls (unit-tested in
 * tests/unit/test_os_rules.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "os-internal.h"

/* ---- quantities ------------------------------------------------------------------------------- */

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

int os_quantity_parse(const char *s, uint64_t scale, uint64_t *ret)
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

/* ---- labels ------------------------------------------------------------------------------------ */

static bool alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, 1..63 */
static bool label_name(const char *s, size_t n)
{
        size_t i;

        if (n == 0 || n > 63 || !alnum(s[0]) || !alnum(s[n - 1]))
                return false;
        for (i = 1; i + 1 < n; i++)
                if (!alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
                        return false;
        return true;
}

/* A DNS subdomain (RFC 1123, as Kubernetes checks it): lower-case labels of [a-z0-9-] that
 * start and end alphanumeric, joined by dots, 253 at most. */
static bool dns_subdomain(const char *s, size_t n)
{
        size_t i, start = 0;

        if (n == 0 || n > 253)
                return false;
        for (i = 0; i <= n; i++) {
                if (i == n || s[i] == '.') {
                        size_t len = i - start;

                        if (len == 0 || len > 63 || s[start] == '-' || s[i - 1] == '-')
                                return false;
                        start = i + 1;
                        continue;
                }
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return false;
        }
        return true;
}

const char *os_label_key_invalid(const char *k)
{
        const char *slash = strchr(k, '/');

        if (!slash)
                return label_name(k, strlen(k))
                               ? NULL
                               : "a key's name is 1-63 characters of [A-Za-z0-9-_.], "
                                 "alphanumeric at both ends";
        if (strchr(slash + 1, '/'))
                return "a key holds at most one '/'";
        if (!dns_subdomain(k, (size_t)(slash - k)))
                return "a key's prefix is a DNS subdomain (lower case, at most 253 characters)";
        if (!label_name(slash + 1, strlen(slash + 1)))
                return "a key's name is 1-63 characters of [A-Za-z0-9-_.], alphanumeric at both "
                       "ends";
        /* OpenSandbox keeps the prefix for its own labels: a user's must not pose as one. */
        if ((size_t)(slash - k) == strlen("opensandbox.io") &&
            strncmp(k, "opensandbox.io", (size_t)(slash - k)) == 0)
                return "the prefix opensandbox.io/ is reserved";
        return NULL;
}

const char *os_label_value_invalid(const char *v)
{
        size_t n = strlen(v);

        if (n == 0 || label_name(v, n))
                return NULL;
        return "a value is empty or 1-63 characters of [A-Za-z0-9-_.], alphanumeric at both ends";
}

/* ---- images ------------------------------------------------------------------------------------ */

/* One path component that can name a directory below SANDBOX_HOST_IMAGES. */
static bool component_ok(const char *s, size_t n)
{
        return n > 0 && n < 256 && memchr(s, '/', n) == NULL && memchr(s, '\0', n) == NULL &&
               !(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.');
}

static size_t add_candidate(char out[3][256], size_t k, const char *s, size_t n)
{
        size_t i;

        if (!component_ok(s, n))
                return k;
        for (i = 0; i < k; i++)
                if (strlen(out[i]) == n && memcmp(out[i], s, n) == 0)
                        return k;
        memcpy(out[k], s, n);
        out[k][n] = '\0';
        return k + 1;
}

size_t os_image_candidates(const char *uri, char out[3][256])
{
        size_t n = strlen(uri), k = 0, i;
        const char *last = strrchr(uri, '/'), *at, *colon;
        char whole[256];

        /* 1. the whole uri, each '/' replaced by '_' */
        if (n > 0 && n < sizeof(whole)) {
                for (i = 0; i < n; i++)
                        whole[i] = uri[i] == '/' ? '_' : uri[i];
                k = add_candidate(out, k, whole, n);
        }
        /* 2. its last component */
        last = last ? last + 1 : uri;
        k = add_candidate(out, k, last, strlen(last));
        /* 3. that without @digest, then without :tag */
        n = strlen(last);
        at = memchr(last, '@', n);
        if (at)
                n = (size_t)(at - last);
        colon = memchr(last, ':', n);
        if (colon)
                n = (size_t)(colon - last);
        return add_candidate(out, k, last, n);
}

/* ---- RFC 3339 ---------------------------------------------------------------------------------- */

void os_time_format(uint64_t ms, char out[32])
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

int os_time_parse(const char *s, uint64_t *ret_ms)
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
