/* fuzz_rules.c: the pure rules of the /v1 create and metadata (opensandbox/rules.c; the
 * quantity and the time are core/util.c's). Modes: '0' a Kubernetes quantity, '1' a label key
 * and value, '2' an image uri's host names, '3' an RFC 3339 time. Properties: a valid label key and value are what Kubernetes allows (bounded,
 * alphanumeric ends); a quantity in milli-units is no less than in units; image names are single path components, distinct, at most 3; a time that
 * parses formats back to the same instant. */
#include "fuzz.h"

#include <errno.h>

#include "os-internal.h"

static bool alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static void labels(fz *f)
{
        char *k = fz_line(f), *v = fz_rest_str(f);
        size_t n;

        if (!os_label_key_invalid(k)) {
                const char *name = strrchr(k, '/');

                name = name ? name + 1 : k;
                n = strlen(name);
                FZ_CHECK(n >= 1 && n <= 63 && alnum(name[0]) && alnum(name[n - 1]));
                FZ_CHECK(strncmp(k, "opensandbox.io/", 15) != 0);
        }
        if (!os_label_value_invalid(v)) {
                n = strlen(v);
                FZ_CHECK(n == 0 || (n <= 63 && alnum(v[0]) && alnum(v[n - 1])));
        }
        free(k);
        free(v);
}

static void images(fz *f)
{
        char *uri = fz_rest_str(f), out[3][256];
        size_t n = os_image_candidates(uri, out), i, j;

        FZ_CHECK(n <= 3);
        for (i = 0; i < n; i++) {
                size_t len = strnlen(out[i], sizeof(out[i]));

                FZ_CHECK(len > 0 && len < 256 && !strchr(out[i], '/'));
                FZ_CHECK(!STREQ(out[i], ".") && !STREQ(out[i], ".."));
                for (j = 0; j < i; j++)
                        FZ_CHECK(!STREQ(out[i], out[j]));
        }
        free(uri);
}

static void times(fz *f)
{
        char *s = fz_rest_str(f), back[32];
        uint64_t ms, again;

        if (sh_rfc3339_parse(s, &ms) == 0) {
                sh_rfc3339_format(ms, back);
                /* years past 9999 are shown as the latest instant there is */
                if (!STREQ(back, "9999-12-31T23:59:59.999Z"))
                        FZ_CHECK(sh_rfc3339_parse(back, &again) == 0 && again == ms);
        }
        free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        uint64_t q, q1;
        char *s;
        int r;

        switch (fz_mode(&f, 4)) {
        case 0:
                s = fz_rest_str(&f);
                r = sh_quantity_parse(s, 1000, &q);
                FZ_CHECK(r == 0 || r == -EINVAL);
                FZ_CHECK((sh_quantity_parse(s, 1, &q1) == 0) == (r == 0));
                if (r == 0)
                        FZ_CHECK(q >= q1); /* milli-units round up no lower than units */
                free(s);
                break;
        case 1:
                labels(&f);
                break;
        case 2:
                images(&f);
                break;
        default:
                times(&f);
                break;
        }
        return 0;
}
