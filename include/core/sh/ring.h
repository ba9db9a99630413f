/* ring.h: a bounded byte ring (the last `cap` bytes appended, a count of every byte ever) and
 * the tail of a text to show (its last bytes within a budget, from a whole line where it was
 * cut): a sandbox's journal (its log lines, its events), the /v1 diagnostics. Pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A cut text starts at the next whole line when one starts within this many bytes. */
#define SH_TAIL_LINE_SKIP 512

/* Its buffer grows with what it holds (a quiet sandbox costs nothing), up to cap. Zeroed with
 * a cap set is empty. */
typedef struct sh_ring {
        char *p;
        size_t cap;   /* the bound */
        size_t alloc; /* bytes of p */
        size_t start, len;
        uint64_t total; /* every byte ever appended */
} sh_ring;

/* Append n bytes (the oldest go past cap). Out of memory: the bytes are counted, not kept. */
void sh_ring_append(sh_ring *g, const char *p, size_t n);
/* Copy the kept bytes, oldest first, to out (g->len bytes). */
void sh_ring_copy(const sh_ring *g, char *out);
void sh_ring_done(sh_ring *g);

/* The tail of text[0..len) to show, moved to its front and NUL-terminated (text holds len + 1
 * bytes): its last `budget` bytes at most, and, when anything before is left out (or *cut says
 * older bytes were gone already), from the next whole line if one starts within
 * SH_TAIL_LINE_SKIP bytes and before the end. Returns its length; *cut: whether anything
 * before it is left out. */
size_t sh_text_tail(char *text, size_t len, size_t budget, bool *cut);
/* The tail of g's text (sh_text_tail) as a new string the caller frees, its length, whether
 * anything older is left out (by the ring or the budget). 0 or -ENOMEM. */
int sh_ring_tail(const sh_ring *g, size_t budget, char **ret, size_t *ret_len, bool *ret_cut);
