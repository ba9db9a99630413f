/* rules.c: the pure rules of the /v1 surface: label rules (metadata), image uri -> host image
 * names. No syscalls (unit-tested in tests/unit/test_os_rules.c). */
#include <string.h>

#include "os-internal.h"

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
