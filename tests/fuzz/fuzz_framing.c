/* fuzz_framing.c: the request framing rules libmicrohttpd leaves to the transport
 * (http/framing.c): header names, control characters, Transfer-Encoding and Content-Length.
 * Input: one byte (bit 0: HTTP/1.0), then header fields, one a line, "name:value" (no colon:
 * all name). Property: the answer is an error of the invalid kind or none. */
#include "fuzz.h"

#include "sh/http.h"

#define FIELDS_MAX 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        bool http10 = fz_u8(&f) & 1;
        sh_http_field fields[FIELDS_MAX];
        char *lines[FIELDS_MAX];
        sh_error *err = NULL;
        size_t n = 0, i;
        int r;

        while (f.n && n < FIELDS_MAX) {
                char *line = fz_line(&f), *colon = strchr(line, ':');

                lines[n] = line;
                if (colon)
                        *colon = '\0';
                fields[n].name = line;
                fields[n].value = colon ? colon + 1 : "";
                n++;
        }
        r = sh_http_check_framing(fields, n, http10, &err);
        FZ_CHECK(r == 0 ? err == NULL : err && err->kind == SH_E_INVALID);
        sh_error_release(&err);
        for (i = 0; i < n; i++)
                free(lines[i]);
        return 0;
}
