/* peers-pure.c: the pure parts of the peers (cluster.h): a SANDBOX_HOST_PEERS value, and what
 * a peer's /healthz says of it. No I/O: unit-tested and fuzzed. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sh/cluster.h"
#include "sh/util.h"

#define DNS_NAME_MAX 253
#define HOST_MAX     255
#define MAX_SAFE     ((uint64_t)1 << 53) /* a JSON number held exactly */

static int refuse(char *reason, size_t reason_len, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int refuse(char *reason, size_t reason_len, const char *fmt, ...)
{
        va_list ap;

        if (reason && reason_len) {
                va_start(ap, fmt);
                vsnprintf(reason, reason_len, fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

static bool is_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A port: 1..65535 in decimal, no sign, no leading zero. 0 when it is none. */
static unsigned port_parse(const char *s, size_t len)
{
        unsigned v = 0;
        size_t i;

        if (len == 0 || len > 5 || s[0] == '0')
                return 0;
        for (i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return 0;
                v = v * 10 + (unsigned)(s[i] - '0');
        }
        return v <= 65535 ? v : 0;
}

/* A DNS name (or an IPv4 address): labels of letters, digits and '-', not starting or ending
 * with '-', at most 63 bytes each, joined by single dots (one trailing dot allowed). */
static bool dns_name_valid(const char *s, size_t len)
{
        size_t i, label = 0;

        if (len == 0 || len > DNS_NAME_MAX)
                return false;
        for (i = 0; i < len; i++) {
                char c = s[i];

                if (c == '.') {
                        if (label == 0 || s[i - 1] == '-')
                                return false;
                        label = 0;
                } else if (is_alnum(c) || c == '-') {
                        if (label == 0 && c == '-')
                                return false;
                        if (++label > 63)
                                return false;
                } else {
                        return false;
                }
        }
        return label == 0 ? len > 1 : s[len - 1] != '-';
}

/* An IPv6 address's text between brackets: hex digits, ':' and '.', at least one ':'. */
static bool v6_valid(const char *s, size_t len)
{
        size_t i, colons = 0;

        if (len < 2 || len > 45)
                return false;
        for (i = 0; i < len; i++) {
                char c = s[i];

                if (c == ':')
                        colons++;
                else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                           (c >= 'A' && c <= 'F') || c == '.'))
                        return false;
        }
        return colons >= 2;
}

/* One static: URL, "http://host[:port][/]", normalised into *ret ("http://host:port", host in
 * lower case). */
static int url_parse(const char *s, size_t len, char **ret, char *reason, size_t reason_len)
{
        static const char scheme[] = "http://";
        const char *h, *end = s + len, *colon = NULL;
        char host[HOST_MAX + 1];
        size_t hlen, i;
        unsigned port = 80;

        if (len < sizeof(scheme) - 1 || strncasecmp(s, scheme, sizeof(scheme) - 1) != 0)
                return refuse(reason, reason_len, "'%.*s' is no http:// URL",
                              (int)(len > 200 ? 200 : len), s);
        h = s + sizeof(scheme) - 1;
        if (end > h && end[-1] == '/')
                end--;
        if (h < end && *h == '[') {
                const char *close = memchr(h, ']', (size_t)(end - h));

                if (!close || !v6_valid(h + 1, (size_t)(close - h - 1)))
                        return refuse(reason, reason_len, "a static peer's IPv6 host is malformed");
                hlen = (size_t)(close - h) + 1;
                if (close + 1 < end) {
                        if (close[1] != ':')
                                return refuse(
                                        reason, reason_len,
                                        "a static peer's URL has a path: only http://host[:port]");
                        colon = close + 1;
                }
        } else {
                colon = memchr(h, ':', (size_t)(end - h));
                hlen = (size_t)((colon ? colon : end) - h);
                if (memchr(h, '/', hlen) || memchr(h, '?', hlen) || memchr(h, '#', hlen) ||
                    memchr(h, '@', hlen))
                        return refuse(reason, reason_len,
                                      "a static peer's URL has a path: only http://host[:port]");
                if (!dns_name_valid(h, hlen))
                        return refuse(reason, reason_len, "a static peer's host is malformed");
        }
        if (hlen > HOST_MAX)
                return refuse(reason, reason_len, "a static peer's host is too long");
        if (colon) {
                port = port_parse(colon + 1, (size_t)(end - colon - 1));
                if (!port)
                        return refuse(reason, reason_len,
                                      "a static peer's port is not 1..65535 (or it has a path)");
        }
        for (i = 0; i < hlen; i++)
                host[i] = (char)(h[i] >= 'A' && h[i] <= 'Z' ? h[i] - 'A' + 'a' : h[i]);
        host[hlen] = '\0';
        if (asprintf(ret, "http://%s:%u", host, port) < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

void sh_peers_spec_done(sh_peers_spec *s)
{
        if (!s)
                return;
        free(s->name);
        if (s->urls)
                for (char **u = s->urls; *u; u++)
                        free(*u);
        free(s->urls);
        memset(s, 0, sizeof(*s));
}

static int spec_dns(const char *v, sh_peers_spec *ret, char *reason, size_t reason_len)
{
        const char *colon = strrchr(v, ':');
        size_t nlen = colon ? (size_t)(colon - v) : strlen(v);

        if (colon) {
                ret->port = port_parse(colon + 1, strlen(colon + 1));
                if (!ret->port)
                        return refuse(
                                reason, reason_len,
                                "SANDBOX_HOST_PEERS=dns:<name>[:port]: the port is not 1..65535");
        }
        if (!dns_name_valid(v, nlen))
                return refuse(reason, reason_len,
                              "SANDBOX_HOST_PEERS=dns:<name>[:port]: the name is no DNS name");
        ret->dns = true;
        ret->name = strndup(v, nlen);
        return ret->name ? 0 : -ENOMEM;
}

static int spec_static(const char *v, sh_peers_spec *ret, char *reason, size_t reason_len)
{
        size_t n = 0;
        const char *p = v;

        ret->urls = calloc(SH_CLUSTER_STATIC_MAX + 1, sizeof(*ret->urls));
        if (!ret->urls)
                return -ENOMEM;
        for (;;) {
                const char *comma = strchr(p, ',');
                size_t len = comma ? (size_t)(comma - p) : strlen(p);
                int r;

                if (len == 0)
                        return refuse(reason, reason_len,
                                      "SANDBOX_HOST_PEERS=static:<url>,...: an empty URL");
                if (n == SH_CLUSTER_STATIC_MAX)
                        return refuse(reason, reason_len,
                                      "SANDBOX_HOST_PEERS=static: at most %d URLs",
                                      SH_CLUSTER_STATIC_MAX);
                r = url_parse(p, len, &ret->urls[n], reason, reason_len);
                if (r < 0)
                        return r;
                n++;
                if (!comma)
                        return 0;
                p = comma + 1;
        }
}

int sh_peers_spec_parse(const char *s, sh_peers_spec *ret, char *reason, size_t reason_len)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        if (reason && reason_len)
                reason[0] = '\0';
        if (!s)
                return refuse(reason, reason_len, "SANDBOX_HOST_PEERS is not set");
        if (strncmp(s, "dns:", 4) == 0)
                r = spec_dns(s + 4, ret, reason, reason_len);
        else if (strncmp(s, "static:", 7) == 0)
                r = spec_static(s + 7, ret, reason, reason_len);
        else
                r = refuse(reason, reason_len,
                           "SANDBOX_HOST_PEERS is dns:<name>[:port] or static:<url>,<url>...");
        if (r == -ENOMEM)
                refuse(reason, reason_len, "out of memory");
        if (r < 0)
                sh_peers_spec_done(ret);
        return r;
}

int sh_peer_health_parse(const char *body, size_t len, sh_peer_health *ret)
{
        cJSON *root = body ? cJSON_ParseWithLength(body, len) : NULL;
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "cluster");
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(c, "token");
        const cJSON *inst = cJSON_GetObjectItemCaseSensitive(c, "instance");
        const cJSON *acc = cJSON_GetObjectItemCaseSensitive(c, "accepting");
        const cJSON *room = cJSON_GetObjectItemCaseSensitive(c, "room");
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        if (!cJSON_IsObject(c) || !cJSON_IsString(tok) || !cJSON_IsString(inst) ||
            !cJSON_IsBool(acc) || !cJSON_IsNumber(room))
                goto out;
        if (!sh_pod_token_valid(tok->valuestring, strlen(tok->valuestring)))
                goto out;
        {
                size_t ilen = strlen(inst->valuestring);

                if (ilen == 0 || ilen >= sizeof(ret->instance))
                        goto out;
                for (size_t i = 0; i < ilen; i++)
                        if (!is_alnum(inst->valuestring[i]))
                                goto out;
                memcpy(ret->instance, inst->valuestring, ilen + 1);
        }
        if (!(room->valuedouble >= 0 && room->valuedouble < (double)MAX_SAFE) ||
            room->valuedouble != (double)(uint64_t)room->valuedouble)
                goto out;
        memcpy(ret->token, tok->valuestring, SH_POD_TOKEN_LEN + 1);
        ret->accepting = cJSON_IsTrue(acc);
        ret->room = (uint64_t)room->valuedouble;
        r = 0;
out:
        if (r < 0)
                memset(ret, 0, sizeof(*ret));
        cJSON_Delete(root);
        return r;
}
