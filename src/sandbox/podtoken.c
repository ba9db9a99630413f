/* podtoken.c: this pod's token (cluster.h): SH_POD_TOKEN_LEN lower-case hex digits of 32
 * random bits, the first digits of every sandbox and snapshot id the pod mints. Made once per
 * state root and kept in {root}/pod-token, so that ids made before a restart (snapshots on a
 * shared root) still name this pod. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sh/log.h"
#include "sh/random.h"
#include "sh/util.h"

#include "sandbox-internal.h"

#define TOKEN_FILE "pod-token"
#define TOKEN_TEMP "pod-token.new"

/* The token kept in rootfd's TOKEN_FILE: 1 with it in out, 0 when there is none, -1 when the
 * file is there but no token (logged). */
static int token_read(int rootfd, const char *root, char out[SH_POD_TOKEN_LEN + 1])
{
        char buf[SH_POD_TOKEN_LEN + 2];
        ssize_t n;
        size_t len;
        int fd = openat(rootfd, TOKEN_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                log_warn("pod-token-unreadable", NULL, "'%s/%s': %s: making a new token", root,
                         TOKEN_FILE, strerror(errno));
                return -1;
        }
        n = read(fd, buf, sizeof(buf));
        if (n < 0)
                log_warn("pod-token-unreadable", NULL, "'%s/%s': %s: making a new token", root,
                         TOKEN_FILE, strerror(errno));
        close(fd);
        if (n < 0)
                return -1;
        len = (size_t)n;
        if (len == SH_POD_TOKEN_LEN + 1 && buf[SH_POD_TOKEN_LEN] == '\n')
                len--;
        if (!sh_pod_token_valid(buf, len)) {
                log_warn("pod-token-malformed", NULL,
                         "'%s/%s' holds no token (%u lower-case hex digits): making a new one",
                         root, TOKEN_FILE, SH_POD_TOKEN_LEN);
                return -1;
        }
        memcpy(out, buf, SH_POD_TOKEN_LEN);
        out[SH_POD_TOKEN_LEN] = '\0';
        return 1;
}

/* Write all of buf to fd: 0 or -errno. */
static int write_all(int fd, const char *buf, size_t len)
{
        while (len) {
                ssize_t n = write(fd, buf, len);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                buf += n;
                len -= (size_t)n;
        }
        return 0;
}

/* out written to TOKEN_FILE atomically (a temporary file synced, renamed over it, the
 * directory synced): 0 or -errno. */
static int token_write(int rootfd, const char out[SH_POD_TOKEN_LEN + 1])
{
        char line[SH_POD_TOKEN_LEN + 1];
        int fd, r;

        memcpy(line, out, SH_POD_TOKEN_LEN);
        line[SH_POD_TOKEN_LEN] = '\n';
        fd = openat(rootfd, TOKEN_TEMP, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                    0644);
        if (fd < 0)
                return -errno;
        r = write_all(fd, line, sizeof(line));
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && renameat(rootfd, TOKEN_TEMP, rootfd, TOKEN_FILE) < 0)
                r = -errno;
        if (r < 0) {
                (void)unlinkat(rootfd, TOKEN_TEMP, 0);
                return r;
        }
        if (fsync(rootfd) < 0)
                return -errno;
        return 0;
}

int sh_pod_token_load(int rootfd, const char *root, char out[SH_POD_TOKEN_LEN + 1], sh_error **err)
{
        int r = token_read(rootfd, root, out);

        if (r > 0)
                return 0;
        r = sh_random_hex(out, SH_POD_TOKEN_LEN / 2);
        if (r < 0)
                return sh_error_make(err, -r, "getrandom");
        r = token_write(rootfd, out);
        if (r < 0)
                return sh_error_make(err, -r, "writing the pod token '%s/%s'", root, TOKEN_FILE);
        log_info("pod-token", NULL, "%s: new, kept in '%s/%s'", out, root, TOKEN_FILE);
        return 0;
}
