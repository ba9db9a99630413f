/* random.h: random bytes from the kernel (getrandom(2), blocking only until its pool is first
 * ready at boot), and the random ids made of them: one generator for the daemon's own names
 * (sandbox ids, snapshot ids). */
#pragma once

#include <stddef.h>

/* n random bytes into p. 0, or -errno. */
int sh_random_bytes(void *p, size_t n);
/* n random bytes as 2n lowercase hex digits and a NUL into out. 0, or -errno. */
int sh_random_hex(char *out, size_t n);
