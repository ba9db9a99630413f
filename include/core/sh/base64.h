/* base64.h: standard base64 (RFC 4648 section 4, with padding), AVX2 where the CPU has it,
 * table-driven otherwise, for the exec stream's frames (pure; tests/unit/test_base64.c checks
 * both paths against libsodium). Not constant-time: exec output is the sandbox's own data, not
 * a secret of the host. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Characters the encoding of n bytes takes (no terminator). */
static inline size_t sh_base64_len(size_t n)
{
        return 4 * ((n + 2) / 3);
}

/* Encode n bytes of in into out, which has room for sh_base64_len(n); returns that length
 * (no terminator written). */
size_t sh_base64_encode(char *out, const void *in, size_t n);

/* Bytes decoding n characters can give at most (room for sh_base64_decode's out). */
static inline size_t sh_base64_decoded_max(size_t n)
{
        return n / 4 * 3;
}

/* Decode in[0..n), standard alphabet with its padding, strictly (RFC 4648 section 3.5: length
 * a multiple of 4, '=' only at the end, the unused bits of the last character zero; no
 * whitespace) into out, which has room for sh_base64_decoded_max(n). Returns the number of
 * bytes, or -1 (EINVAL) for text that is not such base64. For credentials, not a hot path. */
long sh_base64_decode(void *out, const char *in, size_t n);

/* Tests: the table-driven path only, even on a CPU with AVX2 (false: back to the probe). */
void sh_base64_force_scalar(bool on);
