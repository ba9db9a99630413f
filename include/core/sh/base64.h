/* base64.h: standard base64 (RFC 4648 section 4, with padding), table-driven, for the exec
 * stream's frames (pure; tests/unit/test_base64.c checks it against libsodium). Not
 * constant-time: exec output is the sandbox's own data, not a secret of the host. */
#pragma once

#include <stddef.h>

/* Characters the encoding of n bytes takes (no terminator). */
static inline size_t sh_base64_len(size_t n)
{
        return 4 * ((n + 2) / 3);
}

/* Encode n bytes of in into out, which has room for sh_base64_len(n); returns that length
 * (no terminator written). */
size_t sh_base64_encode(char *out, const void *in, size_t n);
