/* fuzz_range.c: the Range header of a /v1 download (opensandbox/range.c). Input: the file's size
 * (8 bytes: its low 16 bits, or all 64 when the byte after says so), then the header. Property:
 * a range served lies inside the file. */
#include "fuzz.h"

#include "sh/range.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        uint64_t fsize = fz_u64(&f), from = 1, to = 0;
        char *h;
        int r;

        if (!(fz_u8(&f) & 1))
                fsize &= 0xffff;
        h = fz_rest_str(&f);
        r = sh_range_parse(h, fsize, &from, &to);
        FZ_CHECK(r >= -1 && r <= 1);
        if (r == 1)
                FZ_CHECK(from <= to && to < fsize);
        if (r == -1)
                FZ_CHECK(from == 1 && to == 0); /* nothing written */
        free(h);
        return 0;
}
