/* fuzz_json.c: both surfaces' JSON intake. '0': the /v1 one (sh_json_parse_text, core/util.c)
 * and the pure rules its handlers judge fields with: metadata (labels and their bound),
 * resourceLimits (quantities), image.uri (host image names), a file `mode`, an RFC 3339
 * `expiresAt`. '1': the native one (sh_native_json_text: empty is {}, byte-string paths through
 * surrogate escapes, an object) and the create body's rules (sh_native_create_opts, then the
 * sandbox layer's env bound). The /v1 create's own judge (create.c) is not here: it looks for
 * the host's image directories on disk and fills a record, so it is not pure. Properties:
 * a reason for every refusal; the text only shrinks; the native rules' answer is an object
 * and what they accept is valid for the create. */
#include "fuzz.h"

#include <cjson/cJSON.h>

#include "mode.h"
#include "os-internal.h"
#include "sh/native.h"
#include "sh/sandbox.h"

/* Every member of an object has its key; every string its value. */
static void walk(const cJSON *j, bool member)
{
        const cJSON *c;

        FZ_CHECK(!member || j->string);
        if (cJSON_IsString(j))
                FZ_CHECK(j->valuestring != NULL);
        cJSON_ArrayForEach(c, j) walk(c, cJSON_IsObject(j));
}

static void v1_rules(const cJSON *body)
{
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(body, "metadata"), *v;
        const cJSON *lim = cJSON_GetObjectItemCaseSensitive(body, "resourceLimits");
        const cJSON *image = cJSON_GetObjectItemCaseSensitive(body, "image");
        const cJSON *uri = cJSON_GetObjectItemCaseSensitive(image, "uri");
        const cJSON *at = cJSON_GetObjectItemCaseSensitive(body, "expiresAt");
        char cand[3][256];
        unsigned mode;
        uint64_t q;
        os_err e;

        if (cJSON_IsObject(md) && os_metadata_check(md, 0, &e) < 0)
                FZ_CHECK(e.status == 400 && STREQ(e.code, "INVALID_METADATA_FORMAT"));
        cJSON_ArrayForEach(v, lim) if (cJSON_IsString(v))(void)
                sh_quantity_parse(v->valuestring, 1000, &q);
        if (cJSON_IsString(uri))
                FZ_CHECK(os_image_candidates(uri->valuestring, cand) <= 3);
        if (cJSON_IsString(at))
                (void)sh_rfc3339_parse(at->valuestring, &q);
        (void)os_mode_from_json(cJSON_GetObjectItemCaseSensitive(body, "mode"), &mode);
}

static void native_rules(const cJSON *body)
{
        sh_create_opts o = {0};
        const char *why = NULL;
        sh_error *err = NULL;

        if (sh_native_create_opts(body, &o, &why) < 0) {
                FZ_CHECK(why != NULL);
                return;
        }
        if (o.item_id)
                FZ_CHECK(sh_item_id_valid(o.item_id));
        if (o.env)
                FZ_CHECK(cJSON_IsObject(o.env));
        if (sh_sandbox_env_check(o.env, &err) < 0)
                FZ_CHECK(err && err->kind == SH_E_INVALID);
        sh_error_release(&err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        unsigned m = fz_mode(&f, 2);
        size_t len = f.n;
        char *text = fz_dup(f.p, f.n), why[128];
        const char *reason = NULL;
        cJSON *j;

        if (m == 0) {
                j = sh_json_parse_text(text, &len, 0, &reason);
                FZ_CHECK(j ? reason == NULL : reason != NULL);
                FZ_CHECK(len <= f.n);
                if (j) {
                        walk(j, false);
                        if (cJSON_IsObject(j))
                                v1_rules(j);
                }
        } else {
                j = sh_native_json_text(text, len, why, sizeof(why));
                FZ_CHECK(j ? cJSON_IsObject(j) : why[0] != '\0');
                if (j) {
                        walk(j, false);
                        native_rules(j);
                }
        }
        cJSON_Delete(j);
        free(text);
        return 0;
}
