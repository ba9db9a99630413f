/* auth.c: registry authentication (sh/oci.h): the registry's challenge (RFC 7235's
 * WWW-Authenticate: challenges of auth-params, token or quoted-string values, a token68 passed
 * over), the credentials of Docker's config.json for a registry, and a token endpoint's
 * answer (Docker's token authentication). */
#include "sh/oci.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pure.h"
#include "sh/base64.h"
#include "sh/util.h"

#define PARAM_MAX       (8u << 10) /* one auth-param's value */
#define CREDENTIAL_MAX  (4u << 10) /* a user name or password */
#define TOKEN_BODY_MAX  (1u << 20) /* a token endpoint's answer */
#define DOCKER_HUB_AUTH "https://index.docker.io/v1/"

/* ---- WWW-Authenticate ----------------------------------------------------------------- */

/* RFC 7230 tchar. */
static bool is_tchar(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* RFC 7235 token68 characters (less the trailing '='s). */
static bool is_t68char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr("-._~+/", c));
}

static const char *skip_ows(const char *p)
{
        while (*p == ' ' || *p == '\t')
                p++;
        return p;
}

static const char *skip_token(const char *p)
{
        while (is_tchar(*p))
                p++;
        return p;
}

/* A quoted-string at p (at its '"'): its value unescaped, malloc'd in *ret; the position after
 * it, or NULL (reason written) for a malformed one. */
static const char *quoted_string(const char *p, char **ret, char *reason, size_t n)
{
        size_t len = 0;
        char *v;

        *ret = NULL;
        v = malloc(PARAM_MAX + 1);
        if (!v) {
                sh_why(reason, n, "this host is out of memory");
                return NULL;
        }
        for (p++; *p != '"'; p++) {
                unsigned char c = (unsigned char)*p;

                if (c == '\\') {
                        c = (unsigned char)*++p;
                        if (!c) {
                                sh_why(reason, n, "a quoted string ends in a backslash");
                                goto bad;
                        }
                } else if (!c) {
                        sh_why(reason, n, "a quoted string has no closing quote");
                        goto bad;
                }
                /* qdtext and quoted-pair: HTAB, SP, VCHAR, obs-text; no other control */
                if ((c < 0x20 && c != '\t') || c == 0x7f) {
                        sh_why(reason, n, "a quoted string holds a control character");
                        goto bad;
                }
                if (len == PARAM_MAX) {
                        sh_why(reason, n, "a parameter is longer than %u bytes", PARAM_MAX);
                        goto bad;
                }
                v[len++] = (char)c;
        }
        v[len] = '\0';
        *ret = v;
        return p + 1;
bad:
        free(v);
        return NULL;
}

typedef struct challenge {
        sh_auth_scheme scheme;
        char *realm, *service, *scope;
} challenge;

static void challenge_clear(challenge *c)
{
        free(c->realm);
        free(c->service);
        free(c->scope);
        *c = (challenge){0};
}

/* A token68 at p ("dXNlcjpwYXNz==", Basic's or Negotiate's credentials): the position after
 * it and its spaces when one is there, alone up to a ',' or the end; else NULL. */
static const char *token68(const char *p)
{
        const char *t = p;

        while (is_t68char(*t))
                t++;
        if (t == p)
                return NULL;
        while (*t == '=')
                t++;
        t = skip_ows(t);
        return *t == ',' || !*t ? t : NULL;
}

/* The parameters of one challenge, from p (after its scheme) up to the next challenge or the
 * end: the position of the next challenge's scheme (or the end), or NULL (reason written). */
static const char *challenge_params(const char *p, challenge *c, char *reason, size_t n)
{
        const char *t = token68(skip_ows(p));

        if (t)
                return t; /* a token68 is all a challenge holds: passed over */
        for (;;) {
                const char *name, *name_end, *q;
                char **slot = NULL, *value = NULL;
                size_t len;

                p = skip_ows(p);
                if (!*p)
                        return p;
                if (*p == ',') {
                        p++;
                        continue;
                }
                name = p;
                name_end = skip_token(p);
                len = (size_t)(name_end - name);
                if (len == 0) {
                        sh_why(reason, n, "'%c' where a parameter was expected",
                               *p >= 0x20 && *p < 0x7f ? *p : '?');
                        return NULL;
                }
                q = skip_ows(name_end);
                if (*q != '=')
                        return name; /* the next challenge's scheme */
                q = skip_ows(q + 1);
                if (*q == '"') {
                        q = quoted_string(q, &value, reason, n);
                        if (!q)
                                return NULL;
                } else {
                        const char *v_end = skip_token(q);

                        if (v_end == q) {
                                sh_why(reason, n, "the parameter \"%.*s\" has no value",
                                       (int)(len > 32 ? 32 : len), name);
                                return NULL;
                        }
                        if ((size_t)(v_end - q) > PARAM_MAX) {
                                sh_why(reason, n, "a parameter is longer than %u bytes", PARAM_MAX);
                                return NULL;
                        }
                        value = strndup(q, (size_t)(v_end - q));
                        if (!value) {
                                sh_why(reason, n, "this host is out of memory");
                                return NULL;
                        }
                        q = v_end;
                }
                if (len == 5 && strncasecmp(name, "realm", 5) == 0)
                        slot = &c->realm;
                else if (len == 7 && strncasecmp(name, "service", 7) == 0)
                        slot = &c->service;
                else if (len == 5 && strncasecmp(name, "scope", 5) == 0)
                        slot = &c->scope;
                if (slot && *slot) {
                        sh_why(reason, n, "the parameter \"%.*s\" is given twice", (int)len, name);
                        free(value);
                        return NULL;
                }
                if (slot)
                        *slot = value;
                else
                        free(value);
                p = skip_ows(q);
                if (*p && *p != ',') {
                        sh_why(reason, n, "'%c' after a parameter's value",
                               *p >= 0x20 && *p < 0x7f ? *p : '?');
                        return NULL;
                }
        }
}

void sh_auth_challenge_done(sh_auth_challenge *c)
{
        if (!c)
                return;
        free(c->realm);
        free(c->service);
        free(c->scope);
        *c = (sh_auth_challenge){0};
}

int sh_auth_challenge_parse(const char *header, sh_auth_challenge *ret, char *reason, size_t n)
{
        challenge best = {0}, cur = {0};
        char others[128] = "";
        const char *p = header;

        *ret = (sh_auth_challenge){0};
        if (!header || strnlen(header, SH_AUTH_HEADER_MAX + 1) > SH_AUTH_HEADER_MAX) {
                sh_why(reason, n, "the WWW-Authenticate header is %s",
                       header ? "too long" : "missing");
                return -EINVAL;
        }
        for (;;) {
                const char *scheme, *scheme_end;

                while (*p == ' ' || *p == '\t' || *p == ',')
                        p++;
                if (!*p)
                        break;
                scheme = p;
                scheme_end = skip_token(p);
                if (scheme_end == scheme || (*scheme_end && *scheme_end != ' ' &&
                                             *scheme_end != '\t' && *scheme_end != ',')) {
                        sh_why(reason, n,
                               "the WWW-Authenticate header does not begin a "
                               "challenge with a scheme");
                        goto bad;
                }
                if ((size_t)(scheme_end - scheme) == 6 && strncasecmp(scheme, "Bearer", 6) == 0)
                        cur.scheme = SH_AUTH_BEARER;
                else if ((size_t)(scheme_end - scheme) == 5 && strncasecmp(scheme, "Basic", 5) == 0)
                        cur.scheme = SH_AUTH_BASIC;
                else {
                        size_t used = strlen(others);

                        cur.scheme = SH_AUTH_NONE;
                        snprintf(others + used, sizeof(others) - used, "%s%.*s", used ? ", " : "",
                                 (int)(scheme_end - scheme > 32 ? 32 : scheme_end - scheme),
                                 scheme);
                }
                p = challenge_params(scheme_end, &cur, reason, n);
                if (!p)
                        goto bad;
                /* Bearer over Basic; the first of a kind */
                if (cur.scheme > best.scheme) {
                        challenge_clear(&best);
                        best = cur;
                        cur = (challenge){0};
                } else {
                        challenge_clear(&cur);
                }
        }
        if (best.scheme == SH_AUTH_NONE) {
                sh_why(reason, n, "the registry asks for %s; only Basic and Bearer are supported",
                       others[0] ? others : "no known authentication");
                challenge_clear(&best);
                return -ENOTSUP;
        }
        if (best.scheme == SH_AUTH_BEARER && (!best.realm || !*best.realm)) {
                sh_why(reason, n, "the registry's Bearer challenge has no realm");
                challenge_clear(&best);
                return -EINVAL;
        }
        ret->scheme = best.scheme;
        ret->realm = best.realm;
        ret->service = best.service;
        ret->scope = best.scope;
        return 0;
bad:
        challenge_clear(&cur);
        challenge_clear(&best);
        return -EINVAL;
}

/* ---- Docker's config.json --------------------------------------------------------------- */

/* The host a config.json key names: without "http(s)://" and anything from the first '/'
 * (Docker's ConvertToHostname). */
static void key_host(const char *key, const char **ret, size_t *ret_len)
{
        const char *slash;

        if (strncasecmp(key, "https://", 8) == 0)
                key += 8;
        else if (strncasecmp(key, "http://", 7) == 0)
                key += 7;
        slash = strchr(key, '/');
        *ret = key;
        *ret_len = slash ? (size_t)(slash - key) : strlen(key);
}

static bool is_docker_hub(const char *h, size_t n)
{
        static const char *const names[] = {"docker.io", "index.docker.io", "registry-1.docker.io"};

        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (n == strlen(names[i]) && strncasecmp(h, names[i], n) == 0)
                        return true;
        return false;
}

/* Whether a config.json key is for `domain`: its host is the domain (any case), or both are
 * Docker Hub under one of its names. */
static bool key_matches(const char *key, const char *domain)
{
        const char *h;
        size_t n;

        key_host(key, &h, &n);
        if (n == strlen(domain) && strncasecmp(h, domain, n) == 0)
                return true;
        return is_docker_hub(h, n) && is_docker_hub(domain, strlen(domain));
}

static bool credential_ok(const char *s, size_t n)
{
        return n <= CREDENTIAL_MAX && !memchr(s, '\0', n);
}

/* One auths entry's credentials. */
static int entry_credentials(const cJSON *e, const char *key, char **user, char **password,
                             char *reason, size_t n)
{
        const cJSON *auth = sh_json_opt(e, "auth"), *u = sh_json_opt(e, "username"),
                    *pw = sh_json_opt(e, "password");
        char q[SH_QUOTE_MAX + 4];

        if (!cJSON_IsObject(e)) {
                sh_why(reason, n,
                       "the entry for \"%s\" in the registry credentials is not an object",
                       sh_quote(key, strlen(key), q));
                return -EINVAL;
        }
        if (auth && (!cJSON_IsString(auth) || *auth->valuestring)) {
                size_t len = cJSON_IsString(auth) ? strlen(auth->valuestring) : 0;
                char *plain = len ? malloc(sh_base64_decoded_max(len) + 1) : NULL;
                long got;
                char *colon;

                if (len > 2 * CREDENTIAL_MAX + 8) {
                        free(plain);
                        goto bad_auth;
                }
                if (len && !plain) {
                        sh_why(reason, n, "this host is out of memory");
                        return -ENOMEM;
                }
                got = plain ? sh_base64_decode(plain, auth->valuestring, len) : -1;
                if (got < 0 || memchr(plain, '\0', (size_t)got) ||
                    !(colon = memchr(plain, ':', (size_t)got))) {
                        free(plain);
                        goto bad_auth;
                }
                plain[got] = '\0';
                *colon = '\0';
                *user = strdup(plain);
                *password = strdup(colon + 1);
                explicit_bzero(plain, (size_t)got);
                free(plain);
                goto done;
        }
        if (cJSON_IsString(u) && *u->valuestring && cJSON_IsString(pw)) {
                if (!credential_ok(u->valuestring, strlen(u->valuestring)) ||
                    !credential_ok(pw->valuestring, strlen(pw->valuestring))) {
                        sh_why(reason, n,
                               "the user name or password for \"%s\" in the registry credentials "
                               "is longer than %u bytes",
                               sh_quote(key, strlen(key), q), CREDENTIAL_MAX);
                        return -EINVAL;
                }
                *user = strdup(u->valuestring);
                *password = strdup(pw->valuestring);
                goto done;
        }
        sh_why(reason, n,
               "the entry for \"%s\" in the registry credentials has neither \"auth\" nor "
               "\"username\" and \"password\"",
               sh_quote(key, strlen(key), q));
        return -ENOENT;
done:
        if (!*user || !*password) {
                free(*user);
                free(*password);
                *user = *password = NULL;
                sh_why(reason, n, "this host is out of memory");
                return -ENOMEM;
        }
        return 0;
bad_auth:
        sh_why(reason, n,
               "the \"auth\" for \"%s\" in the registry credentials is not the base64 of "
               "user:password",
               sh_quote(key, strlen(key), q));
        return -EINVAL;
}

int sh_docker_config_lookup(const char *json, size_t len, const char *domain, char **user,
                            char **password, char *reason, size_t n)
{
        _cleanup_cjson_ cJSON *root = NULL;
        const cJSON *auths, *found = NULL;
        char q[SH_QUOTE_MAX + 4];

        *user = *password = NULL;
        root = sh_json_object_of(json, len, "the registry credentials file", reason, n);
        if (!root)
                return -EINVAL;
        auths = sh_json_opt(root, "auths");
        if (auths && !cJSON_IsObject(auths)) {
                sh_why(reason, n, "the registry credentials' \"auths\" is not an object");
                return -EINVAL;
        }
        /* The key exactly as given first (Docker Hub's is its old URL), then by host. */
        for (const cJSON *e = auths ? auths->child : NULL; e && !found; e = e->next)
                if (strcmp(e->string, domain) == 0 || (is_docker_hub(domain, strlen(domain)) &&
                                                       strcmp(e->string, DOCKER_HUB_AUTH) == 0))
                        found = e;
        for (const cJSON *e = auths ? auths->child : NULL; e && !found; e = e->next)
                if (key_matches(e->string, domain))
                        found = e;
        if (!found) {
                sh_why(reason, n, "the registry credentials have nothing for %s",
                       sh_quote(domain, strlen(domain), q));
                return -ENOENT;
        }
        return entry_credentials(found, found->string, user, password, reason, n);
}

/* ---- the token endpoint's answer ---------------------------------------------------------- */

int sh_auth_token_parse(const char *body, size_t len, char **token, char *reason, size_t n)
{
        _cleanup_cjson_ cJSON *root = NULL;
        const cJSON *t;
        size_t tlen;

        *token = NULL;
        if (len > TOKEN_BODY_MAX) {
                sh_why(reason, n, "the token endpoint's answer is %zu bytes, more than %u", len,
                       TOKEN_BODY_MAX);
                return -EINVAL;
        }
        root = sh_json_object_of(body, len, "the token endpoint's answer", reason, n);
        if (!root)
                return -EINVAL;
        t = sh_json_opt(root, "token");
        if (!cJSON_IsString(t) || !*t->valuestring)
                t = sh_json_opt(root, "access_token");
        if (!cJSON_IsString(t) || !*t->valuestring) {
                sh_why(reason, n, "the token endpoint's answer has no \"token\"");
                return -EINVAL;
        }
        tlen = strlen(t->valuestring);
        if (tlen > SH_AUTH_TOKEN_MAX) {
                sh_why(reason, n, "the registry's token is %zu bytes, more than %u", tlen,
                       SH_AUTH_TOKEN_MAX);
                return -EINVAL;
        }
        for (size_t i = 0; i < tlen; i++)
                if (t->valuestring[i] < 0x21 || t->valuestring[i] > 0x7e) {
                        sh_why(reason, n,
                               "the registry's token holds a byte that cannot go in a header "
                               "(printable ASCII only)");
                        return -EINVAL;
                }
        *token = strdup(t->valuestring);
        if (!*token) {
                sh_why(reason, n, "this host is out of memory");
                return -ENOMEM;
        }
        return 0;
}
