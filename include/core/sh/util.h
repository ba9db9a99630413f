/* util.h: pure helpers with no side effects beyond memory: checked number parsing, Kubernetes
 * quantities, RFC 3339 times, URL decoding, query strings, workspace path normalisation, id
 * validation. Unit-tested with
 * canned input (tests/unit/test_util.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/macro.h"

#define SH_PATH_MAX      4096 /* longest workspace path a client may send (CONTRACT.md 3) */
#define SH_POD_TOKEN_LEN 8    /* an id's first hex digits: the pod that minted it (cluster.h) */
#define SH_ID_LEN        40   /* remote_id: the pod token, then 128 random bits, lower-case hex */

/* Parse a non-negative decimal integer, whole string, no sign. 0, -EINVAL, or -ERANGE past
 * UINT64_MAX. */
int sh_parse_u64(const char *s, uint64_t *ret);

/* Parse a byte size with optional binary suffix K/M/G/T (either case, `K` = 1024),
 * optionally followed by `B`/`iB`. 0 or -EINVAL / -ERANGE. */
int sh_parse_size(const char *s, uint64_t *ret);

/* Parse a CPU amount in cores ("0.5", "2", up to 3 decimals) into milli-cores (> 0). */
int sh_parse_millicores(const char *s, uint64_t *ret);
/* Parse a duration in seconds: digits with an optional suffix s, m, h or d (either case).
 * 0, -EINVAL or -ERANGE. */
int sh_parse_seconds(const char *s, uint64_t *ret);

/* Parse an IPv4 network "a.b.c.d" (a /32) or "a.b.c.d/n": a dotted quad, a prefix of 0..32
 * without a leading zero, host bits zero ("10.0.0.1/8" is refused, so that a rule means what
 * it says). The address in network byte order. 0 or -EINVAL. */
int sh_parse_ipv4_net(const char *s, uint32_t *ret_addr, unsigned *ret_prefix);

/* A Kubernetes quantity ("500m", "1.5", "2Gi", "1G", "262144Ki", "1e3": apimachinery's
 * resource.Quantity) times `scale` (1000: CPU in milli-cores; 1: bytes), rounded up, saturating
 * at UINT64_MAX. 0 or -EINVAL. */
int sh_quantity_parse(const char *s, uint64_t scale, uint64_t *ret);

/* RFC 3339 in UTC with milliseconds ("2026-01-02T03:04:05.678Z") of Unix ms; years past 9999
 * are the latest instant it can write. */
void sh_rfc3339_format(uint64_t ms, char out[32]);
/* The same of a time in seconds and nanoseconds (a file's: statx), cut to the millisecond; before
 * 1970 is 1970. */
void sh_rfc3339_format_ts(int64_t sec, uint32_t nsec, char out[32]);
/* An RFC 3339 date-time (any offset, any fraction) as Unix ms. 0 or -EINVAL. */
int sh_rfc3339_parse(const char *s, uint64_t *ret_ms);

/* Percent-decode `len` bytes of `in` into a new NUL-terminated buffer (the decoded data may
 * itself hold NUL bytes; *ret_len is its true length). With `plus_is_space`, '+' becomes ' '
 * (application/x-www-form-urlencoded). An invalid `%` escape is -EINVAL. */
int sh_url_decode(const char *in, size_t len, bool plus_is_space, char **ret, size_t *ret_len);

/* A new NUL-terminated copy of exactly the n bytes at p (which need no NUL: unlike strndup,
 * whose source is a string, nothing past p + n is read; p may be NULL when n is 0), or NULL
 * when out of memory. */
char *sh_memdup0(const char *p, size_t n);

typedef struct sh_query_param {
        char *key;
        size_t key_len;
        char *val;
        size_t val_len;
} sh_query_param;

typedef struct sh_query {
        sh_query_param *v;
        size_t n;
} sh_query;

/* Decode a whole query string (without the '?') as an HTML form. Any invalid escape anywhere
 * is -EINVAL; on error *ret is left empty. */
int sh_query_parse(const char *qs, sh_query *ret);
/* First parameter named `key` (keys compared bytewise), or NULL. */
const sh_query_param *sh_query_find(const sh_query *q, const char *key);
/* The next parameter named `key` from index *i on (*i moves past it), or NULL at the end: each of
 * a repeated key in turn. */
const sh_query_param *sh_query_next(const sh_query *q, const char *key, size_t *i);
/* The first parameter named `key` as a whole number: 1 and *ret; absent 0 (*ret 0); -EINVAL or
 * -ERANGE when it is not one (sh_parse_u64). */
int sh_query_u64(const sh_query *q, const char *key, uint64_t *ret);
void sh_query_done(sh_query *q);

/* Normalise a client workspace path (CONTRACT.md 3): `len` bytes, may be anything. A leading
 * '/' means the root; empty and `.` components are dropped; `..` pops. Returns 0 and a new
 * string that is "" for the root or "a/b/c" (no leading, trailing or double '/'), or
 * -EINVAL for an empty path, a NUL byte, more than SH_PATH_MAX bytes, or a `..` that climbs
 * above the root. */
int sh_path_normalize(const char *in, size_t len, char **ret);

/* Split a normalised non-root path into a newly allocated parent ("" for the root) and a
 * pointer to its last component inside `path`. */
int sh_path_split(const char *path, char **ret_parent, const char **ret_base);

/* item_id syntax: [A-Za-z0-9][A-Za-z0-9._-]{0,127} */
bool sh_item_id_valid(const char *s);

/* remote_id syntax: exactly SH_ID_LEN lower-case hex digits */
bool sh_remote_id_valid(const char *s, size_t len);
/* A hash of a valid remote_id for a table of ids: 8 hex digits of its random part (the first
 * SH_POD_TOKEN_LEN are this pod's, the same in every id; the rest are random, so they are a
 * uniform hash already). */
uint32_t sh_remote_id_hash(const char *id);
/* Whether `s` is a pod token: exactly SH_POD_TOKEN_LEN lower-case hex digits. */
bool sh_pod_token_valid(const char *s, size_t len);
/* The pod token of a valid remote_id (`id`, `len`) into out: 0, or -EINVAL when the id is
 * not one (so it names no pod). */
int sh_id_token(const char *id, size_t len, char out[SH_POD_TOKEN_LEN + 1]);

/* n bytes as 2n lowercase hex digits and a NUL into out (pure). */
void sh_hex_encode(const void *p, size_t n, char *out);
/* 16 (random) bytes as a version 4 UUID, "xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx", and a NUL
 * into out: its version and variant bits set, the rest the bytes' (pure). */
#define SH_UUID_LEN 36
void sh_uuid_format(const unsigned char b[16], char out[SH_UUID_LEN + 1]);

/* FNV-1a over n bytes, continuing from h (SH_FNV_START to begin); not for hostile keys that
 * must never collide (pure). */
#define SH_FNV_START 1469598103934665603ULL
uint64_t sh_fnv1a(uint64_t h, const void *p, size_t n);

/* A hostile name for a reason, JSON or a log: printable ASCII only ('?' for any other byte),
 * cut with "..." to fit `size` (>= 8); NULL is "" (pure). */
void sh_quote_printable(const char *in, char *out, size_t size);

/* Append `n` bytes of `s` to `out` as a JSON string (with quotes). Valid UTF-8 passes through;
 * each byte of an invalid sequence becomes \udcXX (Python's surrogateescape, so a client's
 * os.fsencode gets the original bytes back); control characters are escaped. `out` must have
 * room for 6 * n + 3 bytes. Returns the number of bytes written (no terminator). */
size_t sh_json_quote_bytes(const char *s, size_t n, char *out);
/* The same appended to b, or nothing (-ENOMEM). */
struct sh_buf;
int sh_buf_append_json(struct sh_buf *b, const char *s, size_t n);
/* obj's member `name`, NULL when it is absent or null. */
const struct cJSON *sh_json_opt(const struct cJSON *obj, const char *name);
/* The whole of text[0..len) as one JSON value with nothing but whitespace after it, or NULL
 * (cJSON alone stops at the end of the first value and ignores what follows). */
struct cJSON *sh_json_parse_exact(const char *text, size_t len);
/* A request's JSON text, judged and parsed: UTF-8 without NUL bytes (RFC 8259), no raw control
 * character and no \u0000 escape inside any string, key or value, at any depth (cJSON would
 * cut the string at the NUL: "/tmp/a\u0000b" would name /tmp/a), then one JSON value with
 * nothing but whitespace after it (sh_json_parse_exact). With SH_JSON_SURROGATE_BYTES, each
 * \udc80..\udcff (how Python's surrogateescape spells a byte that is not UTF-8) becomes that
 * raw byte first, so byte-string paths survive (text and *len change in place). NULL on
 * failure, with *ret_why a static reason for the client. */
#define SH_JSON_SURROGATE_BYTES 1u
struct cJSON *sh_json_parse_text(char *text, size_t *len, unsigned flags, const char **ret_why);
/* cJSON_Delete of a cleanup-managed variable (`_cleanup_cjson_ cJSON *o = NULL;`, handed out
 * with TAKE_PTR). */
void sh_json_freep(struct cJSON **p);
#define _cleanup_cjson_ _cleanup_(sh_json_freep)

/* Replace, in place, every byte of `s` that is not part of valid UTF-8 (and every control
 * character) with '?', so a message quoting client bytes is always valid JSON text. */
void sh_utf8_sanitize(char *s);
/* The same of n bytes kept as text (a log to show): every byte that is not part of valid UTF-8,
 * and NUL (a JSON string built with cJSON ends there), becomes '?', one byte for one. */
void sh_utf8_scrub(char *s, size_t n);

/* True when the n bytes at s are valid UTF-8 (no overlong forms, no surrogates). */
bool sh_utf8_valid(const char *s, size_t n);
/* Length of the valid UTF-8 sequence at s (at most n bytes, n >= 1), 0 if there is none
 * (overlong forms, surrogates and code points past U+10FFFF are not valid). */
size_t sh_utf8_seq_len(const unsigned char *s, size_t n);
