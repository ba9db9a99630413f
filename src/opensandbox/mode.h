/* mode.h: the `mode` of the execd file API (OPENSANDBOX.md 3.2): permission bits written as
 * octal digits in a decimal number (`644` means 0644), both ways. Pure: no syscalls. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct cJSON;

/* The permission bits of `v`, a decimal number whose digits are octal digits (644 -> 0644,
 * 7 -> 0007, 1777 -> refused). *ret is 0 for v == 0: "leave the mode as it is".
 * Returns 0; -EINVAL when a digit is 8 or 9 or v has more than 4 digits; -EPERM when v asks
 * for setuid, setgid or sticky (a fourth digit other than 0): a sandbox process must not get
 * a setuid file from the daemon (docs/security.md). *ret is written only on success. */
int os_mode_from_decimal(uint64_t v, unsigned *ret);

/* The same for a JSON value of a request: NULL (absent) and null are 0 ("leave as is"); a
 * number must be an integer in 0..7777 written as above (no fraction, sign, NaN or infinity;
 * checked before any conversion, so a huge double is no undefined behaviour); anything else
 * (a string "644", true, an object) is -EINVAL. Returns 0, -EINVAL or -EPERM as above. */
int os_mode_from_json(const struct cJSON *item, unsigned *ret);

/* The API's form of permission bits (FileInfo.mode): 0644 -> 644, 04755 -> 4755 (a file
 * found with setuid is shown as it is). Only the 12 permission bits of `mode` are used. */
unsigned os_mode_to_decimal(unsigned mode);
