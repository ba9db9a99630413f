/* fuzz_mode.c: the `mode` of the /v1 file API (opensandbox/mode.c, through mode.h): octal digits
 * written as a decimal number. Modes: '0' a number (8 bytes), '1' a JSON value (the rest), '2'
 * permission bits (4 bytes). Properties: what is accepted is 12 bits without setuid, setgid or
 * sticky and reads back as the number it came from; every mode's decimal form reads back. */
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <errno.h>

#include "mode.h"

static void check_decimal(uint64_t v)
{
        unsigned mode = 12345;
        int r = os_mode_from_decimal(v, &mode);

        FZ_CHECK(r == 0 || r == -EINVAL || r == -EPERM);
        if (r == 0) {
                FZ_CHECK(mode <= 0777);
                FZ_CHECK(os_mode_to_decimal(mode) == v);
        } else {
                FZ_CHECK(mode == 12345); /* written only on success */
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        unsigned m, mode;
        cJSON *j;
        int r;

        switch (fz_mode(&f, 3)) {
        case 0:
                check_decimal(fz_u64(&f));
                /* small numbers are the interesting ones */
                check_decimal(fz_u64(&f) % 100000);
                break;
        case 1:
                j = cJSON_ParseWithLength((const char *)f.p, f.n);
                r = os_mode_from_json(j, &mode);
                FZ_CHECK(r == 0 || r == -EINVAL || r == -EPERM);
                if (r == 0)
                        FZ_CHECK(mode <= 0777);
                cJSON_Delete(j);
                break;
        default:
                m = fz_u32(&f);
                r = os_mode_from_decimal(os_mode_to_decimal(m), &mode);
                FZ_CHECK(r == ((m & 07000) ? -EPERM : 0));
                if (r == 0)
                        FZ_CHECK(mode == (m & 0777));
                break;
        }
        return 0;
}
