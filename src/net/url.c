/* url.c: URL helpers on libcurl's URL parser: resolution, origins, host rules (no I/O). */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sh/fetch.h"
#include "sh/util.h"

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

int sh_url_split(const char *url, char **scheme, char **host, unsigned *port)
{
        CURLU *u = curl_url();
        char *sc = NULL, *h = NULL, *p = NULL;
        uint64_t n = 0;
        int r = -EINVAL;

        *scheme = *host = NULL;
        if (!u)
                return -ENOMEM;
        if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_SCHEME, &sc, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) != CURLUE_OK ||
            sh_parse_u64(p, &n) < 0 || n > 65535)
                goto out;
        for (char *c = sc; *c; c++)
                *c = (char)(*c >= 'A' && *c <= 'Z' ? *c | 0x20 : *c);
        for (char *c = h; *c; c++)
                *c = (char)(*c >= 'A' && *c <= 'Z' ? *c | 0x20 : *c);
        *scheme = strdup(sc);
        *host = strdup(h);
        *port = (unsigned)n;
        r = *scheme && *host ? 0 : -ENOMEM;
        if (r < 0) {
                free(*scheme);
                free(*host);
                *scheme = *host = NULL;
        }
out:
        curl_free(sc);
        curl_free(h);
        curl_free(p);
        curl_url_cleanup(u);
        return r;
}

int sh_url_origin(const char *url, char *buf, size_t size)
{
        _cleanup_free_ char *scheme = NULL, *host = NULL;
        unsigned port;
        int r = sh_url_split(url, &scheme, &host, &port), n;

        if (r < 0)
                return r;
        if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
                return -EINVAL;
        n = snprintf(buf, size, "%s://%s:%u", scheme, host, port);
        return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

/* No network path carries a fetch to such a host, so plain http cannot be tampered with on
 * the way ("localhost" libcurl resolves to loopback itself, never through DNS). */
bool sh_url_host_is_loopback(const char *host)
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

bool sh_url_host_listed(char *const *list, const char *host, unsigned port)
{
        size_t hn = strlen(host);

        for (; list && *list; list++) {
                const char *e = *list, *colon;
                size_t en;
                uint64_t p;

                /* "host", "host:port", "[v6]" or "[v6]:port" */
                colon = e[0] == '[' ? strstr(e, "]:") : strrchr(e, ':');
                if (colon && e[0] == '[')
                        colon++;
                en = colon ? (size_t)(colon - e) : strlen(e);
                if (en != hn || strncasecmp(e, host, hn) != 0)
                        continue;
                if (!colon)
                        return true;
                if (sh_parse_u64(colon + 1, &p) == 0 && p == port)
                        return true;
        }
        return false;
}

char *sh_url_with_query(const char *base, const char *const *kv)
{
        CURLU *u = curl_url();
        char *s = NULL, *out = NULL;
        bool ok;

        if (!u)
                return NULL;
        ok = curl_url_set(u, CURLUPART_URL, base, 0) == CURLUE_OK;
        for (; ok && kv && kv[0]; kv += 2) {
                char *pair;

                if (!kv[1])
                        continue;
                if (asprintf(&pair, "%s=%s", kv[0], kv[1]) < 0) {
                        ok = false;
                        break;
                }
                ok = curl_url_set(u, CURLUPART_QUERY, pair, CURLU_APPENDQUERY | CURLU_URLENCODE) ==
                     CURLUE_OK;
                free(pair);
        }
        if (ok && curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK)
                out = strdup(s);
        curl_free(s);
        curl_url_cleanup(u);
        return out;
}
