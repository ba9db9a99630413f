/* layerpolicy.c: the rules an image layer's entries must follow (pure). */
#include "layerpolicy.h"
#include "unpack.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sh/util.h"

/* What each path of the layer is so far, by a hash of its normalised form in an
 * open-addressing table. A collision can refuse an entry below a "link" that is none, or
 * take a hard link to a path the layer did not have: then the kernel's link fails, in the
 * unpacker's own directory, with nothing of the host in reach (unpack-child.c). */
enum kind { K_EMPTY = 0, K_FILE, K_LINK, K_DIR, K_WHITEOUT };

typedef struct slot {
        uint64_t h;
        unsigned char kind;
} slot;

struct sh_layer_policy {
        uint64_t max_bytes, max_entries;
        uint64_t entries, bytes;
        slot *slots;
        size_t cap, n; /* cap: 0 or a power of two */
};

sh_layer_policy *sh_layer_policy_new(uint64_t max_bytes, uint64_t max_entries)
{
        sh_layer_policy *p = calloc(1, sizeof(*p));

        if (p) {
                p->max_bytes = max_bytes;
                p->max_entries = max_entries;
        }
        return p;
}

void sh_layer_policy_free(sh_layer_policy *p)
{
        if (!p)
                return;
        free(p->slots);
        free(p);
}

uint64_t sh_layer_policy_entries(const sh_layer_policy *p)
{
        return p->entries;
}

uint64_t sh_layer_policy_bytes(const sh_layer_policy *p)
{
        return p->bytes;
}

#define HASH_START 1469598103934665603ULL

static uint64_t hash_add(uint64_t h, const char *comp, size_t n, bool first)
{
        if (!first)
                h = (h ^ '/') * 1099511628211ULL;
        for (size_t i = 0; i < n; i++)
                h = (h ^ (unsigned char)comp[i]) * 1099511628211ULL;
        return h;
}

static slot *find(const sh_layer_policy *p, uint64_t h)
{
        size_t i = (size_t)(h ^ (h >> 29)) & (p->cap - 1);

        while (p->slots[i].kind != K_EMPTY && p->slots[i].h != h)
                i = (i + 1) & (p->cap - 1);
        return &p->slots[i];
}

static enum kind kind_of(const sh_layer_policy *p, uint64_t h)
{
        return p->cap ? (enum kind)find(p, h)->kind : K_EMPTY;
}

static int grow(sh_layer_policy *p)
{
        size_t cap = p->cap ? p->cap * 2 : 64, oldcap = p->cap;
        slot *old = p->slots, *ns = calloc(cap, sizeof(*ns));

        if (!ns)
                return -ENOMEM;
        p->slots = ns;
        p->cap = cap;
        for (size_t i = 0; i < oldcap; i++)
                if (old[i].kind != K_EMPTY)
                        *find(p, old[i].h) = old[i];
        free(old);
        return 0;
}

/* A later entry of the same name replaces an earlier one: the name is what it is now. */
static int set_kind(sh_layer_policy *p, uint64_t h, enum kind k)
{
        slot *s;

        if ((p->n + 1) * 2 > p->cap && grow(p) < 0)
                return -ENOMEM;
        s = find(p, h);
        if (s->kind == K_EMPTY)
                p->n++;
        s->h = h;
        s->kind = (unsigned char)k;
        return 0;
}

/* One normalised path: `s` (len bytes) without "." and empty components into `out` (size
 * bytes), its hash, its component count, where its last component starts, and whether a
 * proper prefix is a symbolic link of the layer. */
typedef struct norm {
        uint64_t h, parent_h;
        unsigned comps;
        size_t last; /* offset of the last component in out */
        bool below_link;
} norm;

static sh_layer_verdict normalise(const sh_layer_policy *p, const char *s, size_t len, char *out,
                                  size_t size, norm *ret)
{
        size_t o = 0, i = 0;

        *ret = (norm){.h = HASH_START, .parent_h = HASH_START};
        if (!s || memchr(s, '\0', len))
                return SH_LAYER_BAD_PATH;
        if (len >= SH_LAYER_PATH_MAX || len >= size)
                return SH_LAYER_TOO_LONG;
        if (len > 0 && s[0] == '/')
                return SH_LAYER_BAD_PATH;
        while (i < len) {
                const char *c = s + i, *e = memchr(c, '/', len - i);
                size_t n = e ? (size_t)(e - c) : len - i;

                i += n + (e ? 1 : 0);
                if (n == 0 || (n == 1 && c[0] == '.'))
                        continue;
                if (n == 2 && c[0] == '.' && c[1] == '.')
                        return SH_LAYER_BAD_PATH;
                /* the components so far are a proper prefix: a link there would be followed to
                 * write this entry */
                if (ret->comps > 0 && kind_of(p, ret->h) == K_LINK)
                        ret->below_link = true;
                if (++ret->comps > SH_LAYER_DEPTH_MAX)
                        return SH_LAYER_TOO_DEEP;
                ret->parent_h = ret->h;
                ret->h = hash_add(ret->h, c, n, ret->comps == 1);
                if (o)
                        out[o++] = '/';
                ret->last = o;
                memcpy(out + o, c, n);
                o += n;
        }
        out[o] = '\0';
        return SH_LAYER_TAKE;
}

static bool has_prefix(const char *s, const char *prefix)
{
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ".wh.NAME" in DIR: DIR/NAME in place of the entry's path, or why not. */
static sh_layer_verdict whiteout(sh_layer_policy *p, const sh_layer_entry *e, char *out, norm *n)
{
        char *name = out + n->last;
        const char *target = name + strlen(SH_LAYER_WHITEOUT_PREFIX);
        uint64_t h;

        if (strcmp(name, SH_LAYER_OPAQUE_NAME) == 0) {
                if (e->type != S_IFREG || e->hardlink)
                        return SH_LAYER_BAD_WHITEOUT;
                out[n->last ? n->last - 1 : 0] = '\0';
                return SH_LAYER_OPAQUE;
        }
        /* aufs' own bookkeeping (".wh..wh.plnk", ".wh..wh.aufs"): not content, as in Docker */
        if (has_prefix(name, SH_LAYER_WHITEOUT_PREFIX SH_LAYER_WHITEOUT_PREFIX))
                return SH_LAYER_SKIP;
        if (e->type != S_IFREG || e->hardlink || !*target || strcmp(target, ".") == 0 ||
            strcmp(target, "..") == 0)
                return SH_LAYER_BAD_WHITEOUT;
        h = hash_add(n->parent_h, target, strlen(target), n->comps == 1);
        /* A whiteout hides what the layers below have; one of an entry of this very layer
         * would stand on it. */
        if (kind_of(p, h) != K_EMPTY && kind_of(p, h) != K_WHITEOUT)
                return SH_LAYER_BAD_WHITEOUT;
        if (set_kind(p, h, K_WHITEOUT) < 0)
                return SH_LAYER_NO_MEMORY;
        memmove(name, target, strlen(target) + 1);
        return SH_LAYER_WHITEOUT;
}

sh_layer_verdict sh_layer_check(sh_layer_policy *p, const sh_layer_entry *e, char *out,
                                char *out_link, size_t size)
{
        sh_layer_verdict v;
        norm n, hn;
        enum kind k;

        /* Every header counts, a skipped one too: the bound is on what libarchive reads. */
        if (p->entries >= p->max_entries)
                return SH_LAYER_TOO_MANY;
        p->entries++;
        v = normalise(p, e->path, e->path_len, out, size, &n);
        if (v != SH_LAYER_TAKE)
                return v;
        if (n.comps == 0)
                return e->type == S_IFDIR && !e->hardlink ? SH_LAYER_SKIP : SH_LAYER_BAD_PATH;
        if (n.below_link)
                return SH_LAYER_BELOW_LINK;
        if (has_prefix(out + n.last, SH_LAYER_WHITEOUT_PREFIX))
                return whiteout(p, e, out, &n);
        if (e->hardlink) {
                v = normalise(p, e->hardlink, strlen(e->hardlink), out_link, size, &hn);
                if (v != SH_LAYER_TAKE || hn.comps == 0)
                        return SH_LAYER_HARDLINK_OUTSIDE;
                if (hn.below_link)
                        return SH_LAYER_BELOW_LINK;
                k = kind_of(p, hn.h);
                if (k != K_FILE && k != K_LINK)
                        return SH_LAYER_HARDLINK_FORWARD;
        } else if (e->type == S_IFREG) {
                k = K_FILE;
                if (e->size < 0 || (uint64_t)e->size > p->max_bytes - p->bytes)
                        return SH_LAYER_TOO_BIG;
                p->bytes += (uint64_t)e->size;
        } else if (e->type == S_IFLNK) {
                k = K_LINK;
        } else if (e->type == S_IFDIR) {
                k = K_DIR;
        } else {
                return SH_LAYER_BAD_TYPE;
        }
        if (set_kind(p, n.h, k) < 0)
                return SH_LAYER_NO_MEMORY;
        return SH_LAYER_TAKE;
}

void sh_layer_reason(const sh_layer_policy *p, sh_layer_verdict v, const char *path, char *buf,
                     size_t size)
{
        char q[160];

        sh_quote_printable(path, q, sizeof(q));
        switch (v) {
        case SH_LAYER_TAKE:
        case SH_LAYER_SKIP:
        case SH_LAYER_WHITEOUT:
        case SH_LAYER_OPAQUE:
                snprintf(buf, size, "entry '%s' is allowed", q);
                return;
        case SH_LAYER_TOO_MANY:
                snprintf(buf, size, "layer refused: more than %llu entries (at '%s')",
                         (unsigned long long)p->max_entries, q);
                return;
        case SH_LAYER_TOO_BIG:
                snprintf(buf, size,
                         "layer refused: its files add up to more than %llu bytes (at '%s')",
                         (unsigned long long)p->max_bytes, q);
                return;
        case SH_LAYER_BAD_PATH:
                snprintf(buf, size,
                         "layer refused: entry '%s' is absolute, empty, or has a '..' component or "
                         "a "
                         "NUL byte",
                         q);
                return;
        case SH_LAYER_TOO_DEEP:
                snprintf(buf, size, "layer refused: entry '%s' is more than %u levels deep", q,
                         SH_LAYER_DEPTH_MAX);
                return;
        case SH_LAYER_TOO_LONG:
                snprintf(buf, size, "layer refused: entry '%s' has a path of %u bytes or more", q,
                         SH_LAYER_PATH_MAX);
                return;
        case SH_LAYER_BELOW_LINK:
                snprintf(
                        buf, size,
                        "layer refused: entry '%s' lies, or links to a path, below a symbolic link "
                        "of the layer",
                        q);
                return;
        case SH_LAYER_HARDLINK_OUTSIDE:
                snprintf(buf, size, "layer refused: hard link '%s' points outside the layer", q);
                return;
        case SH_LAYER_HARDLINK_FORWARD:
                snprintf(buf, size,
                         "layer refused: hard link '%s' points to no file or link of the layer "
                         "before it",
                         q);
                return;
        case SH_LAYER_BAD_TYPE:
                snprintf(buf, size,
                         "layer refused: entry '%s' is a device node, FIFO or socket (only files, "
                         "directories, links and whiteouts are allowed)",
                         q);
                return;
        case SH_LAYER_BAD_WHITEOUT:
                snprintf(
                        buf, size,
                        "layer refused: whiteout '%s' names nothing, an entry of the layer itself, "
                        "or is not a plain file",
                        q);
                return;
        case SH_LAYER_NO_MEMORY:
                snprintf(buf, size, "this host is out of memory");
                return;
        }
        snprintf(buf, size, "layer refused: entry '%s' refused", q);
}

int sh_layer_compression_of(const char *media_type, sh_layer_compression *ret)
{
        static const struct {
                const char *type;
                sh_layer_compression c;
        } types[] = {
                {"application/vnd.oci.image.layer.v1.tar", SH_LAYER_PLAIN},
                {"application/vnd.oci.image.layer.v1.tar+gzip", SH_LAYER_GZIP},
                {"application/vnd.oci.image.layer.v1.tar+zstd", SH_LAYER_ZSTD},
                {"application/vnd.oci.image.layer.nondistributable.v1.tar", SH_LAYER_PLAIN},
                {"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", SH_LAYER_GZIP},
                {"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", SH_LAYER_ZSTD},
                {"application/vnd.docker.image.rootfs.diff.tar", SH_LAYER_PLAIN},
                {"application/vnd.docker.image.rootfs.diff.tar.gzip", SH_LAYER_GZIP},
                {"application/vnd.docker.image.rootfs.diff.tar.zstd", SH_LAYER_ZSTD},
                {"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", SH_LAYER_GZIP},
        };

        for (size_t i = 0; media_type && i < sizeof(types) / sizeof(types[0]); i++)
                if (strcmp(media_type, types[i].type) == 0) {
                        *ret = types[i].c;
                        return 0;
                }
        return -EINVAL;
}
