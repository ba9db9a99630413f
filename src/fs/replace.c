/* replace.c: a text replaced by another in a file, in two bounded passes over its fd (sh/replace.h):
 * the count, then the writing; and one file's replacement under a policy, from its open to its
 * commit. */
#include "sh/replace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sh_fs_replace_init(sh_fs_replace *x, int in, const char *old, size_t olen, const char *new,
                       size_t nlen, uint64_t max, uint64_t max_matches)
{
        memset(x, 0, sizeof(*x));
        x->in = in;
        x->out = -1;
        x->old = old;
        x->olen = olen;
        x->new = new;
        x->nlen = nlen;
        x->max = max;
        x->max_matches = max_matches;
        if (olen == 0)
                return -EINVAL;
        x->buf = malloc(SH_FS_REPLACE_CHUNK + olen);
        return x->buf ? 0 : -ENOMEM;
}

int sh_fs_replace_pass(sh_fs_replace *x, int out)
{
        if (lseek(x->in, 0, SEEK_SET) < 0)
                return -errno;
        x->out = out;
        x->have = x->pos = 0;
        x->read = x->count = x->written = 0;
        x->eof = false;
        x->outb.len = x->outb.off = 0;
        x->refused = SH_FS_REPLACE_OK;
        return 0;
}

void sh_fs_replace_done(sh_fs_replace *x)
{
        free(x->buf);
        x->buf = NULL;
        sh_buf_done(&x->outb);
}

static int refuse(sh_fs_replace *x, sh_fs_replace_refusal why)
{
        x->refused = why;
        return -EFBIG;
}

static int out(sh_fs_replace *x, const char *p, size_t n)
{
        return n && sh_buf_append(&x->outb, p, n) < 0 ? -ENOMEM : 0;
}

/* What waits, written out. */
static int flush(sh_fs_replace *x)
{
        const char *p = x->outb.p;
        size_t n = x->outb.len;

        x->written += n;
        if (x->written > x->max)
                return refuse(x, SH_FS_REPLACE_GROWS);
        while (n > 0) {
                ssize_t w = write(x->out, p, n);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                if (w == 0)
                        return -EIO;
                p += w;
                n -= (size_t)w;
        }
        x->outb.len = x->outb.off = 0;
        return 0;
}

/* One read (at most SH_FS_REPLACE_CHUNK), its matches (counted; in the writing pass, the text
 * with each replaced, until about SH_FS_REPLACE_OUT of it is waiting), what waits written out.
 * The last olen - 1 bytes wait for the next read: a match may straddle two. */
int sh_fs_replace_step(sh_fs_replace *x)
{
        const bool writing = x->out >= 0;
        const size_t room = SH_FS_REPLACE_CHUNK + x->olen;
        const char *hit;
        bool full = false;
        size_t keep, upto;
        int r;

        if (!x->eof && x->have < room) {
                ssize_t n = read(x->in, x->buf + x->have, room - x->have);

                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n == 0)
                        x->eof = true;
                if (n > 0) {
                        x->have += (size_t)n;
                        x->read += (uint64_t)n;
                }
                if (x->read > x->max)
                        return refuse(x, SH_FS_REPLACE_OVER);
        }
        while ((hit = memmem(x->buf + x->pos, x->have - x->pos, x->old, x->olen))) {
                if (++x->count > x->max_matches)
                        return refuse(x, SH_FS_REPLACE_MATCHES);
                if (writing &&
                    ((r = out(x, x->buf + x->pos, (size_t)(hit - x->buf) - x->pos)) < 0 ||
                     (r = out(x, x->new, x->nlen)) < 0))
                        return r;
                x->pos = (size_t)(hit - x->buf) + x->olen;
                if (writing && x->outb.len >= SH_FS_REPLACE_OUT) {
                        full = true;
                        break;
                }
        }
        if (!full) {
                /* no match in what is left: all but a possible beginning of one is done */
                keep = x->eof ? 0 : x->have - x->pos < x->olen - 1 ? x->have - x->pos : x->olen - 1;
                upto = x->have - keep;
                if (writing && (r = out(x, x->buf + x->pos, upto - x->pos)) < 0)
                        return r;
                memmove(x->buf, x->buf + upto, keep);
                x->have = keep;
                x->pos = 0;
        }
        if (!writing && x->nlen > x->olen &&
            x->read + x->count * (uint64_t)(x->nlen - x->olen) > x->max)
                return refuse(x, SH_FS_REPLACE_GROWS);
        if (writing && (full || x->eof) && (r = flush(x)) < 0)
                return r;
        return x->eof && !full && x->have == 0 ? 0 : 1;
}

/* ---- one file, under a policy ----------------------------------------------------------- */

int sh_fs_replace_file_open(sh_fs_replace_file *f, const sh_fs_ctx *c, const char *path,
                            const char *old, size_t olen, const char *new, size_t nlen,
                            uint64_t max, uint64_t max_matches, sh_error **err)
{
        *f = (sh_fs_replace_file){.c = c, .in = -1, .s = {.pfd = -1, .trashfd = -1}};
        if (!(f->path = strdup(path)))
                return sh_error_make(err, ENOMEM, "out of memory");
        if (sh_fs_open_read_at(c, path, &f->in, &f->st, err) < 0)
                return -1;
        if (f->st.stx_size > max) {
                f->x.refused = SH_FS_REPLACE_OVER;
                return sh_error_make(err, EFBIG, "'%s' is over %llu bytes", path,
                                     (unsigned long long)max);
        }
        if (sh_fs_replace_init(&f->x, f->in, old, olen, new, nlen, max, max_matches) < 0)
                return sh_error_make(err, ENOMEM, "out of memory");
        return 0;
}

/* A pass from the start of the file (2: into the unnamed file). */
static int file_pass(sh_fs_replace_file *f, int pass, sh_error **err)
{
        int k = sh_fs_replace_pass(&f->x, pass == 2 ? sh_fs_upload_fd(f->s.u) : -1);

        if (k < 0)
                return sh_error_make(err, -k, "'%s'", f->path);
        f->pass = pass;
        return 1;
}

/* Counted matches: the unnamed file staged beside the file, for the second pass. */
static int file_stage(sh_fs_replace_file *f, sh_error **err)
{
        int pfd = sh_fs_open_parent(f->c, f->path, &f->base, err);

        if (pfd < 0 || sh_fs_stage(f->c, pfd, &f->s, err) < 0)
                return -1;
        return file_pass(f, 2, err);
}

int sh_fs_replace_file_step(sh_fs_replace_file *f, sh_error **err)
{
        int k;

        if (f->pass == 0)
                return file_pass(f, 1, err);
        if ((k = sh_fs_replace_step(&f->x)) > 0)
                return 1;
        if (k < 0)
                return sh_error_make(err, -k, "'%s'", f->path);
        if (f->pass == 1)
                return f->x.count == 0 ? 0 : file_stage(f, err);
        f->pass = 3;
        return SH_FS_REPLACE_WRITTEN;
}

int sh_fs_replace_file_commit(sh_fs_replace_file *f, sh_error **err)
{
        struct stat now, was;

        if (fstat(f->in, &was) < 0 || fstatat(f->s.pfd, f->base, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
            now.st_ino != was.st_ino || now.st_dev != was.st_dev)
                return sh_error_make(err, EAGAIN, "'%s' was replaced meanwhile", f->path);
        return sh_fs_stage_commit(&f->s, f->base, &(sh_fs_owner){f->st.stx_uid, f->st.stx_gid},
                                  f->st.stx_mode & 0777, err);
}

int sh_fs_replace_file_done(sh_fs_replace_file *f)
{
        f->in = sh_close(f->in);
        sh_fs_replace_done(&f->x);
        free(TAKE_PTR(f->path));
        return sh_fs_stage_drop(&f->s);
}
