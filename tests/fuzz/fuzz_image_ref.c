/* fuzz_image_ref.c: an image reference as a client names it (images/ref.c). The input is the
 * reference (up to a NUL). Properties: a parsed reference has a domain and a lowercase path
 * whose name is at most 255 bytes, a tag of 1..128 characters or none, a valid digest or none,
 * at least one of tag and digest; its canonical form parses back to the same reference; a
 * refusal has a reason and leaves nothing allocated. */
#include "fuzz.h"

#include "sh/oci.h"

static void same(const char *a, const char *b)
{
        FZ_CHECK((!a && !b) || (a && b && strcmp(a, b) == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *s = fz_str(data, size), reason[256] = "";
        sh_image_ref r, again;
        char *canon;

        if (sh_image_ref_parse(s, &r, reason, sizeof(reason)) == 0) {
                FZ_CHECK(r.domain && *r.domain && r.path && *r.path);
                FZ_CHECK(strlen(r.domain) + 1 + strlen(r.path) <= SH_IMAGE_NAME_MAX);
                for (const char *p = r.path; *p; p++)
                        FZ_CHECK(!(*p >= 'A' && *p <= 'Z'));
                FZ_CHECK(!r.tag || (strlen(r.tag) >= 1 && strlen(r.tag) <= 128));
                FZ_CHECK(!r.digest || sh_oci_digest_valid(r.digest));
                FZ_CHECK(r.tag || r.digest);
                FZ_CHECK(sh_image_ref_api_host(&r) != NULL);
                canon = sh_image_ref_canonical(&r);
                FZ_CHECK(canon);
                FZ_CHECK(sh_image_ref_parse(canon, &again, reason, sizeof(reason)) == 0);
                same(r.domain, again.domain);
                same(r.path, again.path);
                same(r.tag, again.tag);
                same(r.digest, again.digest);
                sh_image_ref_done(&again);
                free(canon);
                sh_image_ref_done(&r);
        } else {
                FZ_CHECK(reason[0] != '\0');
                FZ_CHECK(!r.domain && !r.path && !r.tag && !r.digest);
        }
        free(s);
        return 0;
}
