/* fuzz.h: what the fuzz targets share (tests/fuzz, docs/hacking.md): libFuzzer's entry point,
 * a reader that takes typed values off the front of the input (what is missing reads as
 * zero), exact-size copies (so that ASan sees a read one byte past the end), and the check
 * that stops the run on a broken property. Every target is one LLVMFuzzerTestOneInput. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Strict string checks, as scripts/test.sh runs the ASan build: a str* call on bytes that no
 * NUL ends is a read past them. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
        return "strict_string_checks=1";
}

/* A property the decoder promises: a broken one is a finding, like a crash. */
#define FZ_CHECK(cond)                                                                             \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "%s:%d: property broken: %s\n", __FILE__, __LINE__,        \
                                #cond);                                                            \
                        abort();                                                                   \
                }                                                                                  \
        } while (0)

typedef struct fz {
        const uint8_t *p;
        size_t n;
} fz;

static inline fz fz_init(const uint8_t *data, size_t size)
{
        return (fz){.p = data, .n = size};
}

/* The next n bytes into out (zeros for what the input lacks). */
static inline void fz_bytes(fz *f, void *out, size_t n)
{
        size_t k = n < f->n ? n : f->n;

        memcpy(out, f->p, k);
        memset((char *)out + k, 0, n - k);
        f->p += k;
        f->n -= k;
}

static inline uint8_t fz_u8(fz *f)
{
        uint8_t v;

        fz_bytes(f, &v, sizeof(v));
        return v;
}

static inline uint32_t fz_u32(fz *f)
{
        uint32_t v;

        fz_bytes(f, &v, sizeof(v));
        return v;
}

static inline uint64_t fz_u64(fz *f)
{
        uint64_t v;

        fz_bytes(f, &v, sizeof(v));
        return v;
}

/* The next n bytes (fewer at the end of the input), consumed: *ret points at them; how many. */
static inline size_t fz_take(fz *f, size_t n, const char **ret)
{
        size_t k = n < f->n ? n : f->n;

        *ret = (const char *)f->p;
        f->p += k;
        f->n -= k;
        return k;
}

/* Which of n modes the input asks for: its first byte, '0' being mode 0, '1' mode 1 and so on
 * (so text seeds stay readable), any other byte some mode. */
static inline unsigned fz_mode(fz *f, unsigned n)
{
        return (unsigned)(uint8_t)(fz_u8(f) - '0') % n;
}

/* A malloc'd copy of exactly n bytes (no terminator: a read past them is ASan's). */
static inline char *fz_dup(const void *p, size_t n)
{
        char *s = malloc(n ? n : 1);

        if (!s)
                abort();
        memcpy(s, p, n);
        return s;
}

/* A malloc'd NUL-terminated copy of n bytes (which may hold NULs: a C string stops there). */
static inline char *fz_str(const void *p, size_t n)
{
        char *s = malloc(n + 1);

        if (!s)
                abort();
        memcpy(s, p, n);
        s[n] = '\0';
        return s;
}

/* The rest of the input as a NUL-terminated string (consumes it). */
static inline char *fz_rest_str(fz *f)
{
        char *s = fz_str(f->p, f->n);

        f->p += f->n;
        f->n = 0;
        return s;
}

/* The input up to the next '\n' (not included; all of it without one) as a NUL-terminated
 * string (consumes it and the '\n'). */
static inline char *fz_line(fz *f)
{
        const uint8_t *nl = memchr(f->p, '\n', f->n);
        size_t k = nl ? (size_t)(nl - f->p) : f->n;
        char *s = fz_str(f->p, k);

        f->p += k + (nl ? 1 : 0);
        f->n -= k + (nl ? 1 : 0);
        return s;
}

/* FNV-1a, to compare what two runs over the same input produced. */
static inline uint64_t fz_hash(uint64_t h, const void *p, size_t n)
{
        const unsigned char *c = p;

        if (!h)
                h = 14695981039346656037ull;
        for (size_t i = 0; i < n; i++)
                h = (h ^ c[i]) * 1099511628211ull;
        return h;
}
