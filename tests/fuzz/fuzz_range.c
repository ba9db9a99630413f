/* fuzz_range.c: the Range header of a /v1 download (http/range.c). Input: the file's size
 * (8 bytes: its low 16 bits, or all 64 when the byte after says so), then the header. Properties:
 * a range served lies inside the file; the header taken as a file's name makes a
 * Content-Disposition without a line break or a quote of its own in its plain name. */
#include "fuzz.h"

#include "sh/range.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        uint64_t fsize = fz_u64(&f), from = 1, to = 0;
        char *h, *d;
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
        d = sh_content_disposition(h);
        if (d) {
                const char *plain = d + strlen("attachment; filename=\"");
                const char *end = strstr(plain, "\"; filename*=UTF-8''");

                FZ_CHECK(!strpbrk(d, "\r\n") && end && !memchr(plain, '"', (size_t)(end - plain)));
                free(d);
        }
        free(h);
        return 0;
}
