/* mode.c: the execd API's `mode` (octal digits written as a decimal number), both ways. */
#include "mode.h"

#include <cjson/cJSON.h>
#include <errno.h>

#define MODE_DECIMAL_MAX 7777u /* the largest number with 4 octal digits */

int os_mode_from_decimal(uint64_t v, unsigned *ret)
{
        unsigned mode = 0, shift = 0;

        /* Bounded first: at most 4 digits, so the loop below runs at most 4 times and the
         * result fits the 12 permission bits. */
        if (v > MODE_DECIMAL_MAX)
                return -EINVAL;
        for (; v > 0; v /= 10, shift += 3) {
                unsigned d = (unsigned)(v % 10);

                if (d > 7)
                        return -EINVAL;
                mode |= d << shift;
        }
        /* setuid, setgid and sticky are refused, not dropped: a silent 0755 for 4755 would
         * let a client believe it holds a setuid file (OPENSANDBOX.md 3.2). */
        if (mode & 07000)
                return -EPERM;
        *ret = mode;
        return 0;
}

int os_mode_from_json(const cJSON *item, unsigned *ret)
{
        double d;

        if (!item || cJSON_IsNull(item)) {
                *ret = 0;
                return 0;
        }
        if (!cJSON_IsNumber(item))
                return -EINVAL;
        d = item->valuedouble;
        /* Range before the conversion: casting a NaN or a double beyond the target type is
         * undefined behaviour. Written so that NaN fails it (every comparison with NaN is
         * false) and infinities too; -0.0 passes as 0. Then integrality: 644.5 is refused. */
        if (!(d >= 0 && d <= MODE_DECIMAL_MAX))
                return -EINVAL;
        if ((double)(unsigned)d != d)
                return -EINVAL;
        return os_mode_from_decimal((unsigned)d, ret);
}

unsigned os_mode_to_decimal(unsigned mode)
{
        unsigned out = 0, scale = 1;

        mode &= 07777;
        for (; mode > 0; mode >>= 3, scale *= 10)
                out += (mode & 7) * scale;
        return out;
}
