/* codeframe.h: the frames a code driver writes on its fd 3 (sh/codedrivers.h), decoded (pure).
 *
 * One JSON object a line, key "t" its type:
 *   {"t":"ready"}                                     start-up done (after the chdir)
 *   {"t":"fail","msg":"..."}                          start-up failed (the driver exits 1)
 *   {"t":"result","data":{"<mime>":"<text>",...}}     a MIME bundle (zero or more a cell)
 *   {"t":"error","ename":"..","evalue":"..","traceback":["..",...]}   at most one a cell
 *   {"t":"done"}                                      the cell's end, exactly one
 * The cell's own code runs in the driver's process and can write to fd 3 too, so nothing here
 * trusts a line: anything but exactly these shapes (another key, a wrong type, a duplicate
 * key, text that is not UTF-8, a NUL, a bound passed) is malformed, and a malformed frame is
 * the end of its context for the caller. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "sh/buf.h"

struct cJSON;

typedef enum sh_code_frame_type {
        SH_CODE_FRAME_READY,
        SH_CODE_FRAME_FAIL,
        SH_CODE_FRAME_RESULT,
        SH_CODE_FRAME_ERROR,
        SH_CODE_FRAME_DONE,
} sh_code_frame_type;

/* Bounds of what a frame may hold (past any of them the frame is malformed). A result's bundle
 * is bounded by the caller (sh_code_frame_parse's bundle_max: SANDBOX_HOST_CODE_RESULT_MAX);
 * the drivers keep their error frames within 64 KiB of JSON, well inside these. */
#define SH_CODE_FAIL_MSG_MAX     4096u          /* bytes of a fail frame's msg */
#define SH_CODE_MIME_MAX         127u           /* bytes of a MIME type, a bundle's key */
#define SH_CODE_BUNDLE_ITEMS_MAX 64u            /* MIME types in one bundle */
#define SH_CODE_ENAME_MAX        1024u          /* bytes of an error's ename */
#define SH_CODE_TRACEBACK_MAX    1024u          /* lines of an error's traceback */
#define SH_CODE_ERROR_MAX        (1024u * 1024) /* bytes of ename, evalue and traceback together */

typedef struct sh_code_frame {
        sh_code_frame_type type;
        /* FAIL: the driver's message (NUL-free UTF-8). */
        char *msg;
        /* RESULT: a JSON object of 1..SH_CODE_BUNDLE_ITEMS_MAX members, each key a MIME type
         * (type "/" subtype, RFC 9110 token characters, no two alike ignoring case) and each
         * value a string (NUL-free UTF-8); keys and values together at most bundle_max
         * bytes. Owned by the frame: take it with TAKE_PTR to keep it. */
        struct cJSON *bundle;
        /* ERROR: the interpreter's exception name and value, its traceback lines. */
        char *ename;
        char *evalue;
        char **traceback;
        size_t traceback_n;
} sh_code_frame;

/* The frame in line[0..len) (without its '\n'; len may be anything, line need not be
 * NUL-terminated) into *ret: 0, or -1 when the line is not exactly one of the frames above
 * (nothing allocated then, *ret zeroed). bundle_max bounds a result's bundle (bytes of its
 * keys and values, decoded). Free with sh_code_frame_done. */
int sh_code_frame_parse(const char *line, size_t len, size_t bundle_max, sh_code_frame *ret);
/* Frees what a frame holds and zeroes it (a zeroed frame is fine). */
void sh_code_frame_done(sh_code_frame *f);
/* The frame type's name ("ready", ...). */
const char *sh_code_frame_type_name(sh_code_frame_type t);

/* The lines of the frames pipe as they come, each at most `max` bytes without its '\n'.
 * Append what a read gave, then take the complete lines one by one until there is none; a line
 * that grows past max (terminated or not) breaks the splitter for good: the context's frames
 * can no longer be trusted. Memory: at most one partial line of max bytes and what one append
 * brought; the caller takes every line after each append. */
typedef struct sh_code_framebuf {
        sh_buf buf;      /* the bytes not taken, from buf.off */
        size_t complete; /* of them, those of complete lines (the open line's start) */
        size_t max;
        bool broken;
} sh_code_framebuf;

/* An empty splitter of lines of at most max bytes. */
void sh_code_framebuf_init(sh_code_framebuf *b, size_t max);
/* n bytes of the pipe: 0, -1 when the splitter is (or now becomes) broken by a line over its
 * bound, -2 when out of memory (the splitter broken too). */
int sh_code_framebuf_append(sh_code_framebuf *b, const void *p, size_t n);
/* The next complete line (without its '\n', not NUL-terminated) in *ret_line, *ret_len: 1,
 * valid until the next append or done; 0 when no line is complete; -1 when broken. */
int sh_code_framebuf_take(sh_code_framebuf *b, const char **ret_line, size_t *ret_len);
/* Bytes held of a line not yet complete (0: the pipe ended on a line's end). */
size_t sh_code_framebuf_pending(const sh_code_framebuf *b);
/* Frees the splitter's memory (a zeroed or initialised splitter is fine). */
void sh_code_framebuf_done(sh_code_framebuf *b);
