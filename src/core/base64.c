/* base64.c: base64 encoding with a table of character pairs: each 12 bits of input become two
 * characters in one lookup, so 3 input bytes cost two loads and two 2-byte stores. About as
 * fast as OpenSSL's EVP_EncodeBlock or faster, and ~10x faster than libsodium's constant-time
 * sodium_bin2base64 (docs/performance.md), which the exec stream does not need. */
#include "sh/base64.h"

#include <stdint.h>
#include <string.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* pairs[v] for a 12-bit v: the two characters of its high and low 6 bits. */
static char pairs[4096][2];

__attribute__((constructor)) static void pairs_init(void)
{
        for (unsigned v = 0; v < 4096; v++) {
                pairs[v][0] = alphabet[v >> 6];
                pairs[v][1] = alphabet[v & 63];
        }
}

size_t sh_base64_encode(char *out, const void *in, size_t n)
{
        const unsigned char *p = in;
        char *o = out;
        size_t i = 0;

        for (; n - i >= 3; i += 3, o += 4) {
                uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

                memcpy(o, pairs[v >> 12], 2);
                memcpy(o + 2, pairs[v & 4095], 2);
        }
        if (n - i == 1) {
                uint32_t v = (uint32_t)p[i] << 4; /* 8 bits, then 4 zero bits */

                memcpy(o, pairs[v], 2);
                o[2] = o[3] = '=';
                o += 4;
        } else if (n - i == 2) {
                uint32_t v = (uint32_t)p[i] << 10 | (uint32_t)p[i + 1] << 2; /* 16 + 2 zero bits */

                memcpy(o, pairs[v >> 6], 2);
                o[2] = alphabet[v & 63];
                o[3] = '=';
                o += 4;
        }
        return (size_t)(o - out);
}
