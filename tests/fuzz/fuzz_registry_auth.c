/* fuzz_registry_auth.c: what a registry and a credentials file say about authentication
 * (images/auth.c) and the base64 they hold (core/base64.c). Modes: '0' a WWW-Authenticate
 * header (up to a NUL); '1' a Docker config.json lookup: the registry on the first line, the
 * file after it; '2' a token endpoint's answer; '3' base64 text to decode. Properties: a
 * parsed challenge is Basic or Bearer, a Bearer one has a realm; a lookup that finds gives a
 * user and a password, one that does not gives neither and a reason; a token is 1..64 KiB of
 * printable ASCII without spaces; decoded base64 encodes back to the same text. */
#include "fuzz.h"

#include "sh/base64.h"
#include "sh/oci.h"

static void challenge(fz *f)
{
        char *h = fz_rest_str(f), reason[256] = "";
        sh_auth_challenge c;

        if (sh_auth_challenge_parse(h, &c, reason, sizeof(reason)) == 0) {
                FZ_CHECK(c.scheme == SH_AUTH_BASIC || c.scheme == SH_AUTH_BEARER);
                FZ_CHECK(c.scheme != SH_AUTH_BEARER || (c.realm && *c.realm));
                sh_auth_challenge_done(&c);
        } else {
                FZ_CHECK(reason[0] != '\0');
                FZ_CHECK(c.scheme == SH_AUTH_NONE && !c.realm && !c.service && !c.scope);
        }
        free(h);
}

static void lookup(fz *f)
{
        char *domain = fz_line(f), *json = fz_dup(f->p, f->n), *user, *password, reason[256] = "";

        if (sh_docker_config_lookup(json, f->n, domain, &user, &password, reason, sizeof(reason)) ==
            0) {
                FZ_CHECK(user && password);
                free(user);
                free(password);
        } else {
                FZ_CHECK(!user && !password && reason[0] != '\0');
        }
        free(json);
        free(domain);
}

static void token(fz *f)
{
        char *body = fz_dup(f->p, f->n), *t, reason[256] = "";

        if (sh_auth_token_parse(body, f->n, &t, reason, sizeof(reason)) == 0) {
                size_t n = strlen(t);

                FZ_CHECK(n >= 1 && n <= SH_AUTH_TOKEN_MAX);
                for (size_t i = 0; i < n; i++)
                        FZ_CHECK(t[i] > 0x20 && t[i] < 0x7f);
                free(t);
        } else {
                FZ_CHECK(!t && reason[0] != '\0');
        }
        free(body);
}

static void base64(fz *f)
{
        const char *text = (const char *)f->p;
        unsigned char *out = malloc(sh_base64_decoded_max(f->n) + 1);
        char *back;
        long n;

        if (!out)
                abort();
        n = sh_base64_decode(out, text, f->n);
        if (n >= 0) {
                FZ_CHECK((size_t)n <= sh_base64_decoded_max(f->n));
                back = malloc(sh_base64_len((size_t)n) + 1);
                if (!back)
                        abort();
                FZ_CHECK(sh_base64_encode(back, out, (size_t)n) == f->n);
                FZ_CHECK(memcmp(back, text, f->n) == 0);
                free(back);
        }
        free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);

        switch (fz_mode(&f, 4)) {
        case 0:
                challenge(&f);
                break;
        case 1:
                lookup(&f);
                break;
        case 2:
                token(&f);
                break;
        default:
                base64(&f);
                break;
        }
        return 0;
}
