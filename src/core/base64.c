/* base64.c: base64 encoding. On x86-64 CPUs with AVX2, 24 input bytes become 32 characters
 * per step in vector registers (the reshuffle-and-multiply method of W. Mula and D. Lemire,
 * "Faster Base64 Encoding and Decoding using AVX2 Instructions", 2018, written here from the
 * paper); everywhere else, and for the tail, a table of character pairs: each 12 bits of
 * input become two characters in one lookup. The table alone is about as fast as OpenSSL's
 * EVP_EncodeBlock and ~10x faster than libsodium's constant-time sodium_bin2base64
 * (docs/performance.md), which the exec stream does not need; both paths give the same bytes
 * (tests/unit/test_base64.c). */
#include "sh/base64.h"

#include <stdbool.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SH_BASE64_AVX2 1
#endif

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

#ifdef SH_BASE64_AVX2
/* The 6-bit values of 24 bytes, in output order: each 32-bit lane of the shuffled input holds
 * three source bytes (as b1 b0 b2 b1), and two multiplies move the four 6-bit fields of each
 * lane to the low bits of its four bytes. */
__attribute__((target("avx2"))) static inline __m256i avx2_reshuffle(__m256i in)
{
        const __m256i shuf = _mm256_set_epi8(10, 11, 9, 10, 7, 8, 6, 7, 4, 5, 3, 4, 1, 2, 0, 1, 14,
                                             15, 13, 14, 11, 12, 10, 11, 8, 9, 7, 8, 5, 6, 4, 5);
        __m256i t0, t1, t2, t3;

        in = _mm256_shuffle_epi8(in, shuf);
        t0 = _mm256_and_si256(in, _mm256_set1_epi32(0x0fc0fc00));
        t1 = _mm256_mulhi_epu16(t0, _mm256_set1_epi32(0x04000040));
        t2 = _mm256_and_si256(in, _mm256_set1_epi32(0x003f03f0));
        t3 = _mm256_mullo_epi16(t2, _mm256_set1_epi32(0x01000010));
        return _mm256_or_si256(t1, t3);
}

/* 6-bit values to characters: an offset per range (A-Z, a-z, 0-9, '+', '/') from a 16-entry
 * table indexed by the range. */
__attribute__((target("avx2"))) static inline __m256i avx2_translate(__m256i v)
{
        const __m256i lut =
                _mm256_setr_epi8(65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0, 65,
                                 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0);
        __m256i idx = _mm256_subs_epu8(v, _mm256_set1_epi8(51));
        __m256i gt25 = _mm256_cmpgt_epi8(v, _mm256_set1_epi8(25));

        idx = _mm256_sub_epi8(idx, gt25);
        return _mm256_add_epi8(v, _mm256_shuffle_epi8(lut, idx));
}

/* Whole 24-byte blocks while a 32-byte load stays inside the input: returns the input bytes
 * done (a multiple of 3; the caller encodes the rest). Each load is 4 bytes before the block
 * so that both 128-bit lanes find their 12 bytes where the shuffle wants them; the first
 * block, which has nothing before it, is loaded at its start and its dwords moved instead. */
__attribute__((target("avx2"))) static size_t encode_avx2(char *out, const unsigned char *in,
                                                          size_t n)
{
        size_t i = 0;

        if (n < 32)
                return 0;
        {
                __m256i v = _mm256_loadu_si256((const __m256i *)in);

                v = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6));
                _mm256_storeu_si256((__m256i *)out, avx2_translate(avx2_reshuffle(v)));
                i = 24;
        }
        for (; n - i >= 28; i += 24) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(in + i - 4));

                _mm256_storeu_si256((__m256i *)(out + i / 3 * 4),
                                    avx2_translate(avx2_reshuffle(v)));
        }
        return i;
}

static bool use_avx2;

__attribute__((constructor)) static void avx2_probe(void)
{
        use_avx2 = __builtin_cpu_supports("avx2");
}
#endif

void sh_base64_force_scalar(bool on)
{
#ifdef SH_BASE64_AVX2
        use_avx2 = on ? false : __builtin_cpu_supports("avx2");
#else
        (void)on;
#endif
}

size_t sh_base64_encode(char *out, const void *in, size_t n)
{
        const unsigned char *p = in;
        char *o = out;
        size_t i = 0;

#ifdef SH_BASE64_AVX2
        if (use_avx2) {
                i = encode_avx2(out, p, n);
                o += i / 3 * 4;
        }
#endif
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

/* The 6-bit value of a character of the alphabet, -1 for any other. */
static int b64_value(char c)
{
        const char *p = c ? memchr(alphabet, c, 64) : NULL;

        return p ? (int)(p - alphabet) : -1;
}

long sh_base64_decode(void *out, const char *in, size_t n)
{
        unsigned char *o = out;
        size_t len = 0;

        if (n % 4 != 0)
                goto bad;
        for (size_t i = 0; i < n; i += 4) {
                bool last = i + 4 == n;
                int v[4];
                size_t pad = 0;

                for (int k = 0; k < 4; k++) {
                        v[k] = b64_value(in[i + k]);
                        if (v[k] < 0) {
                                /* '=' only as the last one or two characters of the text */
                                if (in[i + k] != '=' || !last || k < 2 ||
                                    (k == 2 && in[i + 3] != '='))
                                        goto bad;
                                v[k] = 0;
                                pad++;
                        }
                }
                o[len++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
                if (pad < 2)
                        o[len++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
                if (pad < 1)
                        o[len++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
                /* the bits no byte takes must be zero (one text per byte string) */
                if ((pad == 2 && (v[1] & 15)) || (pad == 1 && (v[2] & 3)))
                        goto bad;
        }
        return (long)len;
bad:
        errno = EINVAL;
        return -1;
}
