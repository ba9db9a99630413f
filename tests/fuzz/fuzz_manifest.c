/* fuzz_manifest.c: what a tool's publisher or its server sends (tools/manifest.c, fetch.c's URL
 * helpers). Modes: '0' a manifest body, '1' a key file, '2' a signature check (a key file up to
 * the first "\n\n", the base64 signature on the next line, the message after it), '3' a bundle
 * URL resolved against the manifest's (the base on the first line, the reference after it)
 * and its ".sig" URL. Properties: a parsed manifest holds 1..256 printable characters of name
 * and version, 64 lower-case hex digits of sha256 and a commands array; a failure has a
 * reason; a key file holds at most SH_TOOLS_KEYS_MAX keys. */
#include "fuzz.h"

#include <cjson/cJSON.h>

#include "sh/tools.h"

static bool printable(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return false;
        return true;
}

static void manifest(fz *f)
{
        char *body = fz_dup(f->p, f->n), reason[256] = "";
        sh_manifest m;

        if (sh_manifest_parse(body, f->n, &m, reason, sizeof(reason)) == 0) {
                FZ_CHECK(strlen(m.name) >= 1 && strlen(m.name) <= 256 && printable(m.name));
                FZ_CHECK(strlen(m.version) >= 1 && strlen(m.version) <= 256 &&
                         printable(m.version));
                FZ_CHECK(m.bundle_url && strlen(m.bundle_url) <= SH_TOOLS_URL_MAX);
                FZ_CHECK(strlen(m.sha256) == 64 && strspn(m.sha256, "0123456789abcdef") == 64);
                FZ_CHECK(cJSON_IsArray(m.commands));
                sh_manifest_done(&m);
        } else {
                FZ_CHECK(reason[0] != '\0');
                FZ_CHECK(!m.name && !m.version && !m.bundle_url && !m.commands);
        }
        free(body);
}

static void keys(fz *f, bool verify)
{
        const uint8_t *cut = verify ? memmem(f->p, f->n, "\n\n", 2) : NULL;
        size_t klen = cut ? (size_t)(cut - f->p) : f->n;
        char *text = fz_dup(f->p, klen), reason[256] = "";
        sh_tool_keys k;

        f->p += klen;
        f->n -= klen;
        if (sh_tool_keys_parse(text, klen, &k, reason, sizeof(reason)) == 0) {
                FZ_CHECK(k.n <= SH_TOOLS_KEYS_MAX);
                if (verify) {
                        char *sig, *msg;

                        if (f->n >= 2) { /* the "\n\n" */
                                f->p += 2;
                                f->n -= 2;
                        }
                        sig = fz_line(f);
                        msg = fz_dup(f->p, f->n);
                        (void)sh_tool_sig_verify(&k, msg, f->n, sig, strlen(sig));
                        free(msg);
                        free(sig);
                }
        } else {
                FZ_CHECK(reason[0] != '\0');
        }
        free(text);
}

static void urls(fz *f)
{
        char *base = fz_line(f), *ref = fz_rest_str(f), *u, *sig;

        u = sh_url_resolve(base, ref);
        if (u) {
                sig = sh_url_sig(u);
                free(sig);
                free(u);
        }
        free(base);
        free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);

        switch (fz_mode(&f, 4)) {
        case 0:
                manifest(&f);
                break;
        case 1:
                keys(&f, false);
                break;
        case 2:
                keys(&f, true);
                break;
        default:
                urls(&f);
                break;
        }
        return 0;
}
