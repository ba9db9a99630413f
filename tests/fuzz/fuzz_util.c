/* fuzz_util.c: the core's decoders of client text (core/util.c): numbers, sizes and durations of
 * the settings, percent-decoding, query strings, workspace paths, ids, the JSON string quoting
 * of raw bytes and the UTF-8 checks. Modes (first byte) '0'..'9', in that order. Properties:
 * a number parses back from its own digits; a decoded text is no longer than its source; the
 * first query parameter of a key is the one found; a normalised path is normal (no empty, "."
 * or ".." component) and normalises to itself; a quoted byte string parses back to the very
 * bytes (surrogate escapes); a sanitised string is UTF-8. */
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>

#include "sh/util.h"

static void numbers(unsigned which, fz *f)
{
        char *s = fz_rest_str(f), back[32];
        uint64_t v;
        int r;

        switch (which) {
        case 0:
                r = sh_parse_u64(s, &v);
                FZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
                if (r == 0) {
                        uint64_t again;

                        snprintf(back, sizeof(back), "%" PRIu64, v);
                        FZ_CHECK(sh_parse_u64(back, &again) == 0 && again == v);
                }
                break;
        case 1:
                r = sh_parse_size(s, &v);
                FZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
                break;
        case 2:
                if (sh_parse_millicores(s, &v) == 0)
                        FZ_CHECK(v > 0);
                break;
        default:
                r = sh_parse_seconds(s, &v);
                FZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
                break;
        }
        free(s);
}

static void url_decode(fz *f)
{
        bool plus = fz_u8(f) & 1;
        char *in = fz_dup(f->p, f->n), *out = NULL;
        size_t len = 0;

        if (sh_url_decode(in, f->n, plus, &out, &len) == 0) {
                FZ_CHECK(len <= f->n && out[len] == '\0');
                free(out);
        }
        free(in);
}

static void query(fz *f)
{
        char *qs = fz_rest_str(f);
        sh_query q = {0};
        size_t i, j;

        if (sh_query_parse(qs, &q) == 0) {
                for (i = 0; i < q.n; i++) {
                        const sh_query_param *p = &q.v[i];

                        FZ_CHECK(p->key[p->key_len] == '\0' && p->val[p->val_len] == '\0');
                        if (strlen(p->key) != p->key_len)
                                continue; /* a key holding a NUL cannot be asked for */
                        for (j = 0; q.v[j].key_len != p->key_len ||
                                    memcmp(q.v[j].key, p->key, p->key_len) != 0;
                             j++)
                                ;
                        FZ_CHECK(sh_query_find(&q, p->key) == &q.v[j]);
                }
        } else {
                FZ_CHECK(q.n == 0 && q.v == NULL);
        }
        sh_query_done(&q);
        free(qs);
}

static void path(fz *f)
{
        char *in = fz_dup(f->p, f->n), *out = NULL, *again = NULL, *parent = NULL;
        const char *base = NULL, *c;

        if (sh_path_normalize(in, f->n, &out) == 0) {
                size_t n = strlen(out);

                FZ_CHECK(n <= SH_PATH_MAX);
                if (n) {
                        FZ_CHECK(out[0] != '/' && out[n - 1] != '/' && !strstr(out, "//"));
                        for (c = out; c; c = strchr(c, '/')) {
                                c += *c == '/';
                                FZ_CHECK(strncmp(c, "./", 2) && strcmp(c, ".") &&
                                         strncmp(c, "../", 3) && strcmp(c, ".."));
                        }
                        FZ_CHECK(sh_path_normalize(out, n, &again) == 0 && STREQ(again, out));
                        FZ_CHECK(sh_path_split(out, &parent, &base) == 0);
                        FZ_CHECK(base >= out && base < out + n && !strchr(base, '/'));
                        FZ_CHECK(strlen(parent) < n);
                        free(again);
                        free(parent);
                }
                free(out);
        }
        free(in);
}

static void ids(fz *f)
{
        char *s = fz_rest_str(f);
        size_t n = strlen(s);
        char tok[SH_POD_TOKEN_LEN + 1];

        if (sh_item_id_valid(s))
                FZ_CHECK(n >= 1 && n <= 128);
        if (sh_remote_id_valid(s, n)) {
                FZ_CHECK(n == SH_ID_LEN);
                (void)sh_remote_id_hash(s);
                FZ_CHECK(sh_id_token(s, n, tok) == 0 && memcmp(tok, s, SH_POD_TOKEN_LEN) == 0 &&
                         sh_pod_token_valid(tok, strlen(tok)));
        } else {
                FZ_CHECK(sh_id_token(s, n, tok) == -EINVAL);
        }
        free(s);
}

/* Bytes as a JSON string and back: the same bytes (a NUL cannot come back: \u0000 is refused). */
static void quote(fz *f)
{
        char *in = fz_dup(f->p, f->n), *out = malloc(6 * f->n + 3);
        size_t n, len;
        const char *why = NULL;
        cJSON *j;

        if (!out)
                abort();
        n = sh_json_quote_bytes(in, f->n, out);
        FZ_CHECK(n <= 6 * f->n + 2);
        len = n;
        j = sh_json_parse_text(out, &len, SH_JSON_SURROGATE_BYTES, &why);
        if (!memchr(in, '\0', f->n)) {
                FZ_CHECK(cJSON_IsString(j));
                FZ_CHECK(strlen(j->valuestring) == f->n && memcmp(j->valuestring, in, f->n) == 0);
        } else {
                FZ_CHECK(j == NULL && why);
        }
        cJSON_Delete(j);
        free(out);
        free(in);
}

static void utf8(fz *f)
{
        char *s = fz_rest_str(f);
        size_t n = strlen(s), i = 0, k;
        bool valid = true;

        for (i = 0; i < n; i += k ? k : 1)
                if (!(k = sh_utf8_seq_len((const unsigned char *)s + i, n - i)))
                        valid = false;
        FZ_CHECK(sh_utf8_valid(s, n) == valid);
        sh_utf8_sanitize(s);
        FZ_CHECK(strlen(s) == n && sh_utf8_valid(s, n));
        free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        unsigned m = fz_mode(&f, 10);

        switch (m) {
        case 0:
        case 1:
        case 2:
        case 3:
                numbers(m, &f);
                break;
        case 4:
                url_decode(&f);
                break;
        case 5:
                query(&f);
                break;
        case 6:
                path(&f);
                break;
        case 7:
                ids(&f);
                break;
        case 8:
                quote(&f);
                break;
        default:
                utf8(&f);
                break;
        }
        return 0;
}
