/* ringlog.c: a bounded log in a file of a sandbox's (sh/ringlog.h): the last `max` bytes,
 * written as a ring (byte offset o at o % max), byte offsets over everything kept, reads from
 * an offset. The /v1 surface keeps its background commands' and entrypoints' output in them.
 * sh_ringlog_write and sh_ringlog_pread work on a given fd (pure but for that I/O:
 * unit-tested on a file of their own); the rest opens the file per call. */
#include "sh/ringlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sh/log.h"

uint64_t sh_ringlog_first(const sh_ringlog *g)
{
        return g->first;
}

uint64_t sh_ringlog_kept(const sh_ringlog *g)
{
        return g->total - g->first;
}

ssize_t sh_ringlog_write(sh_ringlog *g, int fd, const char *p, size_t n)
{
        uint64_t max = g->max ? g->max : 1;
        size_t done = 0;
        int e = 0;

        /* Only the last max bytes of a long append can stay: the ones before it are counted
         * (the offsets say they were there) and the kept range starts after them. */
        if (n > max) {
                g->total += n - max;
                g->first = g->total;
                p += n - max;
                n = (size_t)max;
        }
        while (done < n) {
                uint64_t at = g->total % max;
                size_t run = n - done < max - at ? n - done : (size_t)(max - at);
                ssize_t w = pwrite(fd, p + done, run, (off_t)at);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        e = w < 0 ? errno : ENOSPC;
                        break;
                }
                /* These bytes took the places of the oldest ones once the ring is full. */
                g->total += (uint64_t)w;
                if (g->total - g->first > max)
                        g->first = g->total - max;
                done += (size_t)w;
                if ((size_t)w < run) {
                        e = ENOSPC; /* the file could not grow: its filesystem is full */
                        break;
                }
        }
        /* What could not be written is not counted: a log on a full filesystem stops growing
         * (its offsets stay those of the bytes it holds). */
        return done || !e ? (ssize_t)done : -e;
}

ssize_t sh_ringlog_pread(const sh_ringlog *g, int fd, uint64_t off, char *out, size_t n)
{
        uint64_t max = g->max ? g->max : 1;
        size_t got = 0;

        if (off < g->first)
                return -ESTALE; /* overwritten or dropped since it was promised */
        if (off >= g->total)
                return 0;
        if (n > g->total - off)
                n = (size_t)(g->total - off);
        while (got < n) {
                uint64_t at = (off + got) % max;
                size_t run = n - got < max - at ? n - got : (size_t)(max - at);
                ssize_t r = pread(fd, out + got, run, (off_t)at);

                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r == 0)
                        return -EIO; /* shorter than what it holds: not our file any more */
                got += (size_t)r;
        }
        return (ssize_t)got;
}

/* ---- with the sandbox's files ------------------------------------------------------------- */

void sh_ringlog_init(sh_ringlog *g, const char *name, uint64_t max)
{
        *g = (sh_ringlog){.max = max ? max : 1};
        snprintf(g->name, sizeof(g->name), "%s", name);
}

int sh_ringlog_create(sh_ringlog *g, sh_sandbox *sb, const char *name, uint64_t max, sh_error **err)
{
        int fd;

        sh_ringlog_init(g, name, max);
        fd = sh_sandbox_open_log(sb, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, err);
        if (fd < 0) {
                g->name[0] = '\0';
                return -1;
        }
        close(fd);
        g->made = true;
        return 0;
}

int64_t sh_ringlog_append(sh_ringlog *g, sh_sandbox *sb, const char *p, size_t n,
                          const char *log_id)
{
        uint64_t before = sh_ringlog_kept(g);
        sh_error *err = NULL;
        ssize_t w = -ENOENT;
        int fd;

        if (!g->name[0] || !sb || sh_sandbox_deleted(sb))
                return 0; /* its file goes with the sandbox's tree */
        fd = sh_sandbox_open_log(sb, g->name, O_WRONLY | O_CLOEXEC | (g->made ? 0 : O_CREAT), &err);
        if (fd >= 0) {
                g->made = true;
                w = sh_ringlog_write(g, fd, p, n);
                if (close(fd) < 0 && w >= 0)
                        w = -errno;
        }
        if ((fd < 0 || w < 0 || (size_t)w < n) && !g->warned) {
                /* Once per log: a full disk limit repeats itself at every chunk. */
                g->warned = true;
                log_warn("command-log-short", log_id,
                         "log '%s' lost output (said once per log): %s, ignoring", g->name,
                         fd < 0 ? (err && err->msg ? err->msg : "")
                                : strerror(w < 0 ? (int)-w : ENOSPC));
        }
        sh_error_release(&err);
        return (int64_t)sh_ringlog_kept(g) - (int64_t)before;
}

ssize_t sh_ringlog_read(const sh_ringlog *g, sh_sandbox *sb, uint64_t off, char *out, size_t n)
{
        sh_error *err = NULL;
        ssize_t r;
        int fd;

        if (off < g->first)
                return -ESTALE;
        if (off >= g->total)
                return 0;
        if (!g->name[0] || !sb)
                return -ENOENT;
        fd = sh_sandbox_open_log(sb, g->name, O_RDONLY | O_CLOEXEC, &err);
        if (fd < 0) {
                r = err && err->errnum ? -err->errnum : -EIO;
                sh_error_release(&err);
                return r;
        }
        r = sh_ringlog_pread(g, fd, off, out, n);
        close(fd);
        return r;
}

int sh_ringlog_tail(const sh_ringlog *g, sh_sandbox *sb, size_t budget, char **ret, size_t *ret_len,
                    bool *ret_cut)
{
        uint64_t n = sh_ringlog_kept(g) < budget ? sh_ringlog_kept(g) : budget;
        char *all = malloc((size_t)n + 1);
        ssize_t r = 0;

        if (!all)
                return -ENOMEM;
        if (n && (r = sh_ringlog_read(g, sb, g->total - n, all, (size_t)n)) < 0) {
                free(all);
                return (int)r;
        }
        *ret_cut = g->total - n > 0;
        *ret_len = sh_text_tail(all, (size_t)r, budget, ret_cut);
        *ret = all;
        return 0;
}

uint64_t sh_ringlog_drop(sh_ringlog *g, sh_sandbox *sb, const char *log_id)
{
        uint64_t kept = sh_ringlog_kept(g);
        sh_error *err = NULL;

        g->first = g->total;
        if (g->made && sb && !sh_sandbox_deleted(sb) &&
            sh_sandbox_remove_log(sb, g->name, &err) < 0) {
                log_warn("command-log-remove", log_id, "%s, ignoring", err ? err->msg : "");
                sh_error_release(&err);
        }
        g->name[0] = '\0';
        g->made = false;
        return kept;
}
