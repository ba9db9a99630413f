/* manifest.c: tool manifest and publisher signature checks (pure; hostile input). */
#include <ctype.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/tools.h"
#include "sh/util.h"

#define FIELD_MAX 256 /* name and version */

static bool printable_utf8ish(const char *s)
{
        /* Control characters in a name or version end up in logs and UIs: refuse them. */
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return false;
        return true;
}

static int field_string(const cJSON *o, const char *key, size_t max, char **ret, char *reason,
                        size_t reason_len)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        size_t n;

        if (!cJSON_IsString(v) || !v->valuestring) {
                snprintf(reason, reason_len, "bad manifest: '%s' must be a string", key);
                return -1;
        }
        n = strlen(v->valuestring);
        if (n == 0 || n > max || !printable_utf8ish(v->valuestring)) {
                snprintf(reason, reason_len,
                         "bad manifest: '%s' must be 1 to %zu printable characters", key, max);
                return -1;
        }
        *ret = strdup(v->valuestring);
        if (!*ret) {
                snprintf(reason, reason_len, "this host is out of memory");
                return -1;
        }
        return 0;
}

int sh_manifest_parse(const char *body, size_t len, sh_manifest *m, char *reason, size_t reason_len)
{
        _cleanup_cjson_ cJSON *root = NULL;
        cJSON *bundle, *sha, *commands;
        size_t i;

        memset(m, 0, sizeof(*m));
        root = cJSON_ParseWithLength(body, len);
        if (!cJSON_IsObject(root)) {
                snprintf(reason, reason_len, "bad manifest: not a JSON object");
                return -1;
        }
        if (field_string(root, "name", FIELD_MAX, &m->name, reason, reason_len) < 0 ||
            field_string(root, "version", FIELD_MAX, &m->version, reason, reason_len) < 0)
                goto fail;
        bundle = cJSON_GetObjectItemCaseSensitive(root, "bundle");
        if (!cJSON_IsObject(bundle)) {
                snprintf(reason, reason_len,
                         "bad manifest: 'bundle' must be an object {\"url\", \"sha256\"}");
                goto fail;
        }
        if (field_string(bundle, "url", SH_TOOLS_URL_MAX, &m->bundle_url, reason, reason_len) < 0) {
                snprintf(reason, reason_len, "bad manifest: 'bundle.url' must be a URL string");
                goto fail;
        }
        sha = cJSON_GetObjectItemCaseSensitive(bundle, "sha256");
        if (!cJSON_IsString(sha) || !sha->valuestring || strlen(sha->valuestring) != 64) {
                snprintf(reason, reason_len,
                         "bad manifest: 'bundle.sha256' must be 64 hexadecimal digits");
                goto fail;
        }
        for (i = 0; i < 64; i++) {
                unsigned char c = (unsigned char)sha->valuestring[i];

                if (!isxdigit(c)) {
                        snprintf(reason, reason_len,
                                 "bad manifest: 'bundle.sha256' must be 64 hexadecimal digits");
                        goto fail;
                }
                m->sha256[i] = (char)tolower(c);
        }
        m->sha256[64] = '\0';
        commands = cJSON_GetObjectItemCaseSensitive(root, "commands");
        if (!cJSON_IsArray(commands)) {
                snprintf(reason, reason_len, "bad manifest: 'commands' must be an array");
                goto fail;
        }
        /* Detach: the commands travel to the response byte-for-byte as parsed. */
        m->commands = cJSON_DetachItemViaPointer(root, commands);
        return 0;
fail:
        sh_manifest_done(m);
        return -1;
}

void sh_manifest_done(sh_manifest *m)
{
        free(m->name);
        free(m->version);
        free(m->bundle_url);
        cJSON_Delete(m->commands);
        memset(m, 0, sizeof(*m));
}

int sh_tool_keys_parse(const char *text, size_t len, sh_tool_keys *k, char *reason,
                       size_t reason_len)
{
        size_t pos = 0;
        unsigned line = 0;

        memset(k, 0, sizeof(*k));
        while (pos < len) {
                const char *s = text + pos, *nl = memchr(s, '\n', len - pos);
                size_t n = nl ? (size_t)(nl - s) : len - pos, bin_len = 0;
                uint8_t key[64];

                pos += n + (nl ? 1 : 0);
                line++;
                while (n && isspace((unsigned char)*s)) {
                        s++;
                        n--;
                }
                while (n && isspace((unsigned char)s[n - 1]))
                        n--;
                if (n == 0 || *s == '#')
                        continue;
                if (k->n >= SH_TOOLS_KEYS_MAX) {
                        snprintf(reason, reason_len, "more than %u keys", SH_TOOLS_KEYS_MAX);
                        return -1;
                }
                if (sodium_base642bin(key, sizeof(key), s, n, NULL, &bin_len, NULL,
                                      sodium_base64_VARIANT_ORIGINAL) != 0 ||
                    bin_len != crypto_sign_PUBLICKEYBYTES) {
                        snprintf(reason, reason_len,
                                 "line %u is not the base64 of a 32-byte ed25519 public key", line);
                        return -1;
                }
                memcpy(k->pk[k->n++], key, crypto_sign_PUBLICKEYBYTES);
        }
        return 0;
}

bool sh_tool_sig_verify(const sh_tool_keys *k, const char *msg, size_t len, const char *sig_text,
                        size_t sig_len)
{
        uint8_t sig[crypto_sign_BYTES + 1];
        size_t bin_len = 0;
        unsigned i;

        if (sodium_base642bin(sig, sizeof(sig), sig_text, sig_len, " \t\r\n", &bin_len, NULL,
                              sodium_base64_VARIANT_ORIGINAL) != 0 ||
            bin_len != crypto_sign_BYTES)
                return false;
        for (i = 0; i < k->n; i++)
                if (crypto_sign_verify_detached(sig, (const unsigned char *)msg, len, k->pk[i]) ==
                    0)
                        return true;
        return false;
}
