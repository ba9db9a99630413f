/* fuzz_layerpolicy.c: the image layer policy (images/layerpolicy.c), entry after entry as a
 * layer lists them, and the media types of layers. Input: one entry a line, "<type><path>" or
 * "<type><path>\t<target or size>" (the path's bytes as they are, NULs too): type 'f' a file
 * (size after the tab), 'd' a directory, 'l' a symbolic link, 'h' a hard link, 'c', 'b', 'p',
 * 's' a device, FIFO or socket, 'm' a media type. Bounds: 64 KiB, 200 entries. Properties: a
 * taken entry (and a whiteout or opaque directory) has a normalised path: relative, no ".",
 * "..", or empty component, no NUL, at most SH_LAYER_DEPTH_MAX components, shorter than
 * SH_LAYER_PATH_MAX; a taken entry is a file, directory, link or hard link; a hard link's
 * target is normalised too; the bytes and entries counted stay within the bounds; every
 * refusal has a printable reason. */
#include "fuzz.h"

#include <sys/stat.h>

#include "layerpolicy.h"
#include "unpack.h"

#define MAX_BYTES   4096u
#define MAX_ENTRIES 200u

static void check_norm(const char *p, bool may_be_root)
{
        size_t len = strlen(p);
        unsigned comps = 0;

        FZ_CHECK(len < SH_LAYER_PATH_MAX);
        FZ_CHECK(may_be_root || len > 0);
        if (!len)
                return;
        FZ_CHECK(p[0] != '/' && p[len - 1] != '/');
        for (const char *c = p;; c++) {
                const char *e = strchr(c, '/');
                size_t n = e ? (size_t)(e - c) : strlen(c);

                FZ_CHECK(n > 0);
                FZ_CHECK(!(n == 1 && c[0] == '.') && !(n == 2 && c[0] == '.' && c[1] == '.'));
                comps++;
                if (!e)
                        break;
                c = e;
        }
        FZ_CHECK(comps <= SH_LAYER_DEPTH_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        sh_layer_policy *p;
        fz f = fz_init(data, size);
        static char norm[SH_LAYER_PATH_MAX], norm_link[SH_LAYER_PATH_MAX];
        char reason[512];

        if (size > 65536)
                return 0;
        p = sh_layer_policy_new(MAX_BYTES, MAX_ENTRIES);
        if (!p)
                abort();
        while (f.n) {
                const uint8_t *nl = memchr(f.p, '\n', f.n);
                size_t k = nl ? (size_t)(nl - f.p) : f.n;
                const uint8_t *tab = memchr(f.p, '\t', k);
                size_t plen = tab ? (size_t)(tab - f.p) : k;
                char type = k ? (char)f.p[0] : 'f';
                /* exact-size copies: a read past them is ASan's */
                char *path = malloc(plen ? plen : 1), *arg = NULL;
                sh_layer_entry e = {.path = path, .path_len = plen ? plen - 1 : 0};
                sh_layer_verdict v;

                if (!path)
                        abort();
                if (plen > 1)
                        memcpy(path, f.p + 1, plen - 1);
                path[plen ? plen - 1 : 0] = '\0';
                if (tab)
                        arg = fz_str(tab + 1, k - plen - 1);
                f.p += k + (nl ? 1 : 0);
                f.n -= k + (nl ? 1 : 0);
                switch (type) {
                case 'm': {
                        sh_layer_compression c;

                        if (sh_layer_compression_of(path, &c) == 0)
                                FZ_CHECK(c == SH_LAYER_PLAIN || c == SH_LAYER_GZIP ||
                                         c == SH_LAYER_ZSTD);
                        free(path);
                        free(arg);
                        continue;
                }
                case 'd':
                        e.type = S_IFDIR;
                        break;
                case 'l':
                        e.type = S_IFLNK;
                        break;
                case 'h':
                        e.type = S_IFREG;
                        e.hardlink = arg ? arg : "";
                        break;
                case 'c':
                        e.type = S_IFCHR;
                        break;
                case 'b':
                        e.type = S_IFBLK;
                        break;
                case 'p':
                        e.type = S_IFIFO;
                        break;
                case 's':
                        e.type = S_IFSOCK;
                        break;
                default:
                        e.type = S_IFREG;
                        e.size = arg ? strtoll(arg, NULL, 10) : 0;
                        break;
                }
                v = sh_layer_check(p, &e, norm, norm_link, sizeof(norm));
                switch (v) {
                case SH_LAYER_TAKE:
                        check_norm(norm, false);
                        FZ_CHECK(!memchr(path, '\0', e.path_len));
                        FZ_CHECK(e.hardlink || e.type == S_IFREG || e.type == S_IFDIR ||
                                 e.type == S_IFLNK);
                        if (e.hardlink)
                                check_norm(norm_link, false);
                        break;
                case SH_LAYER_WHITEOUT:
                        check_norm(norm, false);
                        break;
                case SH_LAYER_OPAQUE:
                        check_norm(norm, true);
                        break;
                case SH_LAYER_SKIP:
                        break;
                default:
                        sh_layer_reason(p, v, path, reason, sizeof(reason));
                        FZ_CHECK(strlen(reason) > 0 && strlen(reason) < sizeof(reason));
                        for (const char *c = reason; *c; c++)
                                FZ_CHECK(*c >= 0x20 && *c < 0x7f);
                        break;
                }
                FZ_CHECK(sh_layer_policy_bytes(p) <= MAX_BYTES);
                FZ_CHECK(sh_layer_policy_entries(p) <= MAX_ENTRIES);
                free(path);
                free(arg);
        }
        sh_layer_policy_free(p);
        return 0;
}
