/* random.h: random names from the kernel's CSPRNG (getrandom(2), retried when interrupted): the
 * ids of sandboxes and snapshots, access tokens, request ids. One generator for the daemon. */
#pragma once

#include <stddef.h>

#include "sh/util.h" /* SH_UUID_LEN */

#define SH_RANDOM_HEX_MAX 64 /* bytes one sh_random_hex may take */

/* n random bytes into buf. 0, or -errno (getrandom failed). */
int sh_random_bytes(void *buf, size_t n);
/* `bytes` random bytes (at most SH_RANDOM_HEX_MAX) as 2 * bytes lower-case hex digits and a
 * NUL into out. 0, -EINVAL past the bound, or -errno. */
int sh_random_hex(char *out, size_t bytes);
/* A random (version 4, RFC 9562) UUID in lower-case hex with its dashes, and a NUL. 0 or
 * -errno. */
int sh_random_uuid(char out[SH_UUID_LEN + 1]);
