/* base64_ab.c: the exec stream's base64 (src/core/base64.c) against OpenSSL's EVP_EncodeBlock
 * and libsodium's sodium_bin2base64, interleaved in one process so that the machine's load
 * hits all three alike (docs/performance.md, "base64"). Not built by CMake:
 *   cc -O2 -Iinclude -o /tmp/base64_ab tests/bench/base64_ab.c src/core/base64.c -lcrypto -lsodium
 */
#include <openssl/evp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "sh/base64.h"
static double now(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return t.tv_sec + t.tv_nsec / 1e9;
}
int main(void)
{
        size_t n = 256 * 1024, reps = 200;
        unsigned char *in = malloc(n);
        char *out = malloc(n * 2);
        double best_evp = 0, best_ours = 0, best_sod = 0;
        if (sodium_init() < 0)
                return 1;
        randombytes_buf(in, n);
        for (int round = 0; round < 60; round++) {
                double t = now();
                for (size_t r = 0; r < reps; r++)
                        EVP_EncodeBlock((unsigned char *)out, in, (int)n);
                double evp = n * reps / (now() - t) / 1e6;
                t = now();
                for (size_t r = 0; r < reps; r++)
                        sh_base64_encode(out, in, n);
                double ours = n * reps / (now() - t) / 1e6;
                t = now();
                for (size_t r = 0; r < reps / 10; r++)
                        sodium_bin2base64(out, n * 2, in, n, sodium_base64_VARIANT_ORIGINAL);
                double sod = n * reps / 10 / (now() - t) / 1e6;
                if (evp > best_evp)
                        best_evp = evp;
                if (ours > best_ours)
                        best_ours = ours;
                if (sod > best_sod)
                        best_sod = sod;
        }
        printf("best of 60 interleaved rounds, 256 KiB blocks: EVP_EncodeBlock %.0f MB/s, "
               "sh_base64_encode %.0f MB/s, sodium_bin2base64 %.0f MB/s\n",
               best_evp, best_ours, best_sod);
        return 0;
}
