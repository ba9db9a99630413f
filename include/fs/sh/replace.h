/* replace.h: every occurrence of a text in a file replaced by another, in bounded steps over the
 * file's fd (the /v1 `files/replace`, OPENSANDBOX.md section 3.2), in two passes: the first counts
 * the matches and what the file would grow to, so that no match or a bound passed writes nothing
 * at all; the second writes the new text, buffered, into the caller's output fd (an unnamed file
 * beside the file, put in its place at the end: sh_fs_upload). A step reads SH_FS_REPLACE_CHUNK
 * bytes at most and writes about SH_FS_REPLACE_OUT; a match may straddle two reads. Memory: one
 * chunk and one output buffer, whatever the file. The caller runs the steps as a job of the loop
 * (sh/job.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/buf.h"
#include "sh/fsops.h"

#define SH_FS_REPLACE_CHUNK (256u << 10)
#define SH_FS_REPLACE_OUT   (256u << 10)

/* Why a step refused the file (sh_fs_replace.refused). */
typedef enum sh_fs_replace_refusal {
        SH_FS_REPLACE_OK = 0,
        SH_FS_REPLACE_OVER,    /* the file is over `max` bytes */
        SH_FS_REPLACE_GROWS,   /* what it becomes would be */
        SH_FS_REPLACE_MATCHES, /* it holds more than `max_matches` matches */
} sh_fs_replace_refusal;

typedef struct sh_fs_replace {
        int in; /* the file, read from its start each pass (borrowed) */
        const char *old, *new;
        size_t olen, nlen; /* olen >= 1 */
        uint64_t max, max_matches;
        /* the pass */
        int out;       /* the writing pass's output (borrowed); -1: the counting pass */
        char *buf;     /* SH_FS_REPLACE_CHUNK + olen bytes: read and not scanned yet */
        size_t have;   /* bytes in buf */
        size_t pos;    /* scanned up to here */
        uint64_t read; /* bytes read in this pass */
        bool eof;
        uint64_t count;   /* matches in this pass */
        uint64_t written; /* bytes written in this pass */
        sh_buf outb;      /* the new text not yet written */
        sh_fs_replace_refusal refused;
} sh_fs_replace;

/* Replace old (olen >= 1 bytes; the strings outlive x) by new in the file `in`, bounded by max
 * bytes (the file and what it becomes) and max_matches. 0, or -ENOMEM. */
int sh_fs_replace_init(sh_fs_replace *x, int in, const char *old, size_t olen, const char *new,
                       size_t nlen, uint64_t max, uint64_t max_matches);

/* A pass from the start of the file: counting (out < 0) or writing into out. 0 or -errno. */
int sh_fs_replace_pass(sh_fs_replace *x, int out);

/* One step of the pass: 1 while there is more; 0 when the pass is over (the writing pass's text
 * all written); < 0 when it failed: x->refused says which bound (the pass wrote or will write
 * nothing more), else -errno of a read or a write (or -ENOMEM). x->count: the matches so far. */
int sh_fs_replace_step(sh_fs_replace *x);

/* Free what x holds (accepts a zeroed x). */
void sh_fs_replace_done(sh_fs_replace *x);

/* One file's text replaced under a surface's policy (sh_fs_ctx), in steps: the file opened for
 * reading (sh_fs_open_read_at: its may_read), refused past `max` bytes; its matches counted;
 * when there are any, an unnamed file staged beside it (its directory checked by may_change,
 * the directory's trash: sh_fs_stage), the new text written there; then the caller checks what it
 * must (its sandbox lives) and commits: the new file in over the old one, its owner and mode kept
 * (never a setuid, setgid or sticky bit), unless the file was replaced meanwhile (EAGAIN: nothing
 * changes). Nothing partial is ever visible: a refusal, a failure or the caller giving up drops
 * the unnamed file. */
typedef struct sh_fs_replace_file {
        const sh_fs_ctx *c;
        char *path;       /* below c->root */
        const char *base; /* its last component, once staged */
        int in;           /* the file, read */
        struct statx st;
        sh_fs_replace x;
        sh_fs_staged s;
        /* where it is: 0 opened, 1 counting, 2 writing, 3 written (sh_fs_replace_file_commit) */
        int pass;
} sh_fs_replace_file;

/* The file at `path` opened (old and new as sh_fs_replace_init takes them). 0, or -1 with err
 * (past max: x.refused is SH_FS_REPLACE_OVER). */
int sh_fs_replace_file_open(sh_fs_replace_file *f, const sh_fs_ctx *c, const char *path,
                            const char *old, size_t olen, const char *new, size_t nlen,
                            uint64_t max, uint64_t max_matches, sh_error **err);
/* One step: 1 while there is more; 0 when the file holds no match (nothing is written: done);
 * SH_FS_REPLACE_WRITTEN when the new text is written and waits for the commit; -1 with err
 * (x.refused: a bound passed). f->x.count: the matches. */
#define SH_FS_REPLACE_WRITTEN 2
int sh_fs_replace_file_step(sh_fs_replace_file *f, sh_error **err);
/* The written file in over the old one: 1 (the trash holds the old one for a remover), 0, or -1
 * with err. */
int sh_fs_replace_file_commit(sh_fs_replace_file *f, sh_error **err);
/* Done with it (committed or given up; accepts a zeroed f with `in` -1): the unnamed file's fd
 * when one was not committed, for the caller to free off the loop when it is big, else -1. */
int sh_fs_replace_file_done(sh_fs_replace_file *f);
