/* ref.c: image references (sh/oci.h): Docker's grammar (distribution/reference) and Docker
 * Hub's normalisation, as `docker pull` reads a name:
 *
 *   reference := name [ ":" tag ] [ "@" digest ]
 *   name      := [ domain "/" ] path            (≤ 255 bytes once normalised)
 *   domain    := host [ ":" port ]              (the first component, when it holds '.' or ':'
 *                                                or is "localhost")
 *   host      := component ( "." component )* | "[" IPv6 "]"
 *                component := [A-Za-z0-9] | [A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9]
 *   path      := path-component ( "/" path-component )*
 *                path-component := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
 *   tag       := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
 *   digest    := "sha256:" 64 lowercase hex     (the only algorithm accepted)
 *
 * No domain means docker.io; a docker.io path of one component is an official image
 * ("library/"); "index.docker.io" is docker.io; neither tag nor digest means ":latest". */
#include "sh/oci.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pure.h"

#define DOCKER_HUB     "docker.io"
#define DOCKER_HUB_API "registry-1.docker.io"
#define TAG_MAX        128u
#define REF_MAX        1024u /* the whole reference: more cannot be a valid one */

static bool is_lower_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
        return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static bool is_hex_lower(char c)
{
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool sh_oci_digest_valid(const char *d)
{
        if (!d || strncmp(d, "sha256:", 7) != 0)
                return false;
        for (size_t i = 0; i < 64; i++)
                if (!is_hex_lower(d[7 + i]))
                        return false;
        return d[7 + 64] == '\0';
}

/* A digest d[0..n): 0, or -EINVAL with the reason. */
static int check_digest(const char *d, size_t n, char *reason, size_t rn)
{
        const char *colon = memchr(d, ':', n);
        char q[SH_QUOTE_MAX + 4];

        if (!colon || colon == d) {
                sh_why(reason, rn, "the digest \"%s\" is not algorithm:hex", sh_quote(d, n, q));
                return -EINVAL;
        }
        if ((size_t)(colon - d) != 6 || memcmp(d, "sha256", 6) != 0) {
                sh_why(reason, rn, "the digest's algorithm \"%s\" is not supported (only sha256)",
                       sh_quote(d, (size_t)(colon - d), q));
                return -EINVAL;
        }
        if (n != 7 + 64) {
                sh_why(reason, rn, "a sha256 digest has 64 hex digits, \"%s\" has %zu",
                       sh_quote(d, n, q), n - 7);
                return -EINVAL;
        }
        for (size_t i = 7; i < n; i++)
                if (!is_hex_lower(d[i])) {
                        sh_why(reason, rn,
                               "the digest \"%s\" holds '%c', not a lowercase hex digit",
                               sh_quote(d, n, q), d[i] >= 0x20 && d[i] < 0x7f ? d[i] : '?');
                        return -EINVAL;
                }
        return 0;
}

/* A tag t[0..n). */
static int check_tag(const char *t, size_t n, char *reason, size_t rn)
{
        char q[SH_QUOTE_MAX + 4];

        if (n == 0) {
                sh_why(reason, rn, "the tag after ':' is empty");
                return -EINVAL;
        }
        if (n > TAG_MAX) {
                sh_why(reason, rn, "the tag \"%s\" is longer than %u characters", sh_quote(t, n, q),
                       TAG_MAX);
                return -EINVAL;
        }
        if (!is_alnum(t[0]) && t[0] != '_') {
                sh_why(reason, rn, "the tag \"%s\" must begin with a letter, digit or '_'",
                       sh_quote(t, n, q));
                return -EINVAL;
        }
        for (size_t i = 1; i < n; i++)
                if (!is_alnum(t[i]) && !strchr("_.-", t[i])) {
                        sh_why(reason, rn,
                               "the tag \"%s\" holds '%c' (letters, digits, '_', '.', '-' only)",
                               sh_quote(t, n, q), t[i] >= 0x20 && t[i] < 0x7f ? t[i] : '?');
                        return -EINVAL;
                }
        return 0;
}

/* One host name component: [A-Za-z0-9] | [A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9]. */
static bool host_component_ok(const char *s, size_t n)
{
        if (n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
                return false;
        for (size_t i = 1; i + 1 < n; i++)
                if (!is_alnum(s[i]) && s[i] != '-')
                        return false;
        return true;
}

/* The domain d[0..n): host [":" port]. */
static int check_domain(const char *d, size_t n, char *reason, size_t rn)
{
        char q[SH_QUOTE_MAX + 4];
        size_t hn = n;
        const char *colon;

        if (n > 0 && d[0] == '[') {
                const char *close = memchr(d, ']', n);

                if (!close || close - d < 2)
                        goto bad;
                for (const char *p = d + 1; p < close; p++)
                        if (!strchr("0123456789abcdefABCDEF:", *p))
                                goto bad;
                hn = (size_t)(close - d) + 1;
                if (hn != n && d[hn] != ':')
                        goto bad;
        } else {
                colon = memchr(d, ':', n);
                if (colon)
                        hn = (size_t)(colon - d);
                for (size_t i = 0, start = 0; i <= hn; i++)
                        if (i == hn || d[i] == '.') {
                                if (!host_component_ok(d + start, i - start))
                                        goto bad;
                                start = i + 1;
                        }
        }
        if (hn < n) {
                size_t digits = n - hn - 1;

                if (digits == 0 || digits > 5 || strspn(d + hn + 1, "0123456789") < digits) {
                        sh_why(reason, rn, "the registry \"%s\" has a port that is not a number",
                               sh_quote(d, n, q));
                        return -EINVAL;
                }
        }
        return 0;
bad:
        sh_why(reason, rn, "the registry \"%s\" is not a host name, IPv4 or [IPv6] address",
               sh_quote(d, n, q));
        return -EINVAL;
}

/* One path component c[0..n): [a-z0-9]+ ((. | _ | __ | -+) [a-z0-9]+)*. */
static int check_path_component(const char *c, size_t n, char *reason, size_t rn)
{
        char q[SH_QUOTE_MAX + 4];
        size_t i = 0;

        if (n == 0) {
                sh_why(reason, rn, "the repository name has an empty path component");
                return -EINVAL;
        }
        for (size_t k = 0; k < n; k++)
                if (c[k] >= 'A' && c[k] <= 'Z') {
                        sh_why(reason, rn,
                               "the repository name \"%s\" holds uppercase letters (it must be "
                               "lowercase)",
                               sh_quote(c, n, q));
                        return -EINVAL;
                }
        for (;;) {
                size_t run = 0;

                while (i < n && is_lower_alnum(c[i]))
                        i++, run++;
                if (run == 0)
                        break;
                if (i == n)
                        return 0;
                if (c[i] == '.' || (c[i] == '_' && (i + 1 == n || c[i + 1] != '_')))
                        i++;
                else if (c[i] == '_')
                        i += 2;
                else if (c[i] == '-')
                        while (i < n && c[i] == '-')
                                i++;
                else
                        break;
        }
        if (i < n && !is_lower_alnum(c[i]) && !strchr("._-", c[i]))
                sh_why(reason, rn,
                       "the repository name \"%s\" holds '%c' (lowercase letters, digits "
                       "and the separators '.', '_', '__', '-' only)",
                       sh_quote(c, n, q), c[i] >= 0x20 && c[i] < 0x7f ? c[i] : '?');
        else
                sh_why(reason, rn,
                       "the repository name \"%s\" must begin and end with a letter or digit and "
                       "have one separator ('.', '_', '__' or dashes) between them",
                       sh_quote(c, n, q));
        return -EINVAL;
}

void sh_image_ref_done(sh_image_ref *r)
{
        if (!r)
                return;
        free(r->domain);
        free(r->path);
        free(r->tag);
        free(r->digest);
        *r = (sh_image_ref){0};
}

int sh_image_ref_parse(const char *s, sh_image_ref *ret, char *reason, size_t reason_len)
{
        const char *at, *name_end, *slash, *first_end, *tag = NULL, *path;
        size_t len, name_len, tag_len = 0, dlen, plen, total;
        bool has_domain, library = false;
        const char *domain;
        sh_image_ref r = {0};
        int k;

        *ret = (sh_image_ref){0};
        if (!s || !*s) {
                sh_why(reason, reason_len, "the image reference is empty");
                return -EINVAL;
        }
        len = strnlen(s, REF_MAX + 1);
        if (len > REF_MAX) {
                sh_why(reason, reason_len, "the image reference is longer than %u bytes", REF_MAX);
                return -EINVAL;
        }
        /* name[:tag][@digest]: the digest after the '@', the tag after a ':' past the last '/'. */
        at = strchr(s, '@');
        name_end = at ? at : s + len;
        if (at) {
                k = check_digest(at + 1, len - (size_t)(at + 1 - s), reason, reason_len);
                if (k < 0)
                        return k;
        }
        name_len = (size_t)(name_end - s);
        for (const char *p = name_end; p > s; p--)
                if (p[-1] == '/')
                        break;
                else if (p[-1] == ':') {
                        tag = p;
                        tag_len = (size_t)(name_end - p);
                        name_len = (size_t)(p - 1 - s);
                        break;
                }
        if (tag && (k = check_tag(tag, tag_len, reason, reason_len)) < 0)
                return k;
        if (name_len == 0) {
                sh_why(reason, reason_len, "the image reference has no repository name");
                return -EINVAL;
        }
        /* The domain: the first component, when it looks like a host. */
        slash = memchr(s, '/', name_len);
        first_end = slash ? slash : s + name_len;
        has_domain = slash && (memchr(s, '.', (size_t)(first_end - s)) ||
                               memchr(s, ':', (size_t)(first_end - s)) ||
                               ((size_t)(first_end - s) == 9 && memcmp(s, "localhost", 9) == 0));
        if (has_domain) {
                dlen = (size_t)(first_end - s);
                if ((k = check_domain(s, dlen, reason, reason_len)) < 0)
                        return k;
                domain = s;
                path = first_end + 1;
                if (dlen == 15 && memcmp(s, "index.docker.io", 15) == 0) {
                        domain = DOCKER_HUB;
                        dlen = strlen(DOCKER_HUB);
                }
        } else {
                domain = DOCKER_HUB;
                dlen = strlen(DOCKER_HUB);
                path = s;
        }
        plen = (size_t)(s + name_len - path);
        for (size_t i = 0, start = 0; i <= plen; i++)
                if (i == plen || path[i] == '/') {
                        k = check_path_component(path + start, i - start, reason, reason_len);
                        if (k < 0)
                                return k;
                        start = i + 1;
                }
        if (!has_domain && !tag && !at && plen == 64 && strspn(path, "0123456789abcdef") >= 64) {
                sh_why(reason, reason_len,
                       "a repository name cannot be 64 hex digits (it would read as an image id)");
                return -EINVAL;
        }
        library = dlen == strlen(DOCKER_HUB) && memcmp(domain, DOCKER_HUB, dlen) == 0 &&
                  !memchr(path, '/', plen);
        total = dlen + 1 + (library ? 8 : 0) + plen;
        if (total > SH_IMAGE_NAME_MAX) {
                sh_why(reason, reason_len, "the repository name is %zu bytes, more than %u", total,
                       SH_IMAGE_NAME_MAX);
                return -EINVAL;
        }
        r.domain = strndup(domain, dlen);
        r.path = malloc((library ? 8 : 0) + plen + 1);
        if (r.path) {
                memcpy(r.path, "library/", library ? 8 : 0);
                memcpy(r.path + (library ? 8 : 0), path, plen);
                r.path[(library ? 8 : 0) + plen] = '\0';
        }
        if (tag)
                r.tag = strndup(tag, tag_len);
        else if (!at)
                r.tag = strdup("latest");
        if (at)
                r.digest = strdup(at + 1);
        if (!r.domain || !r.path || ((tag || !at) && !r.tag) || (at && !r.digest)) {
                sh_image_ref_done(&r);
                sh_why(reason, reason_len, "this host is out of memory");
                return -ENOMEM;
        }
        *ret = r;
        return 0;
}

char *sh_image_ref_canonical(const sh_image_ref *r)
{
        char *out = NULL;

        if (asprintf(&out, "%s/%s%s%s%s%s", r->domain, r->path, r->tag ? ":" : "",
                     r->tag ? r->tag : "", r->digest ? "@" : "", r->digest ? r->digest : "") < 0)
                return NULL;
        return out;
}

const char *sh_image_ref_api_host(const sh_image_ref *r)
{
        return strcmp(r->domain, DOCKER_HUB) == 0 ? DOCKER_HUB_API : r->domain;
}
