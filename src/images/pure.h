/* pure.h: what the image service's pure decoders (ref.c, oci.c, auth.c) share: a reason
 * written when there is a buffer for it, untrusted bytes quoted in one, and a registry's JSON
 * document parsed strictly. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "sh/macro.h"

struct cJSON;

#define SH_QUOTE_MAX 64u /* bytes of untrusted input quoted in a reason */

/* snprintf into reason[0..n) when reason is not NULL. */
void sh_why(char *reason, size_t n, const char *fmt, ...) _printf_(3, 4);

/* s[0..n) for a reason: at most SH_QUOTE_MAX bytes, anything but printable ASCII as '?', "..."
 * when cut; in out, which it returns. */
const char *sh_quote(const char *s, size_t n, char out[SH_QUOTE_MAX + 4]);

/* body[0..len) as one JSON object (UTF-8, no NUL or \u0000 in any string, nothing after it):
 * the parsed object, or NULL with "<what> is not ..." in reason (out of memory too). */
struct cJSON *sh_json_object_of(const char *body, size_t len, const char *what, char *reason,
                                size_t n);
