/* random.c: random names from the kernel's CSPRNG (sh/random.h). */
#include "sh/random.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "sh/util.h"

int sh_random_bytes(void *buf, size_t n)
{
        unsigned char *b = buf;
        size_t got = 0;

        while (got < n) {
                ssize_t k = getrandom(b + got, n - got, 0);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                got += (size_t)k;
        }
        return 0;
}

int sh_random_hex(char *out, size_t bytes)
{
        unsigned char b[SH_RANDOM_HEX_MAX];
        int k;

        if (bytes > sizeof(b))
                return -EINVAL;
        k = sh_random_bytes(b, bytes);
        if (k == 0)
                sh_hex_encode(b, bytes, out);
        /* a token's bytes leave no copy behind */
        explicit_bzero(b, sizeof(b));
        return k;
}

int sh_random_uuid(char out[SH_UUID_LEN + 1])
{
        unsigned char b[16];
        int k = sh_random_bytes(b, sizeof(b));

        if (k == 0)
                sh_uuid_format(b, out);
        return k;
}
