/* random.c: random bytes from the kernel and the hex ids made of them (sh/random.h). */
#include "sh/random.h"

#include <errno.h>
#include <sys/random.h>

#include "sh/util.h"

int sh_random_bytes(void *p, size_t n)
{
        size_t got = 0;

        while (got < n) {
                ssize_t k = getrandom((char *)p + got, n - got, 0);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                got += (size_t)k;
        }
        return 0;
}

int sh_random_hex(char *out, size_t n)
{
        unsigned char b[64];
        int r;

        for (size_t at = 0; at < n; at += sizeof(b)) {
                size_t k = n - at < sizeof(b) ? n - at : sizeof(b);

                if ((r = sh_random_bytes(b, k)) < 0)
                        return r;
                sh_hex_encode(b, k, out + 2 * at);
        }
        out[2 * n] = '\0';
        return 0;
}
