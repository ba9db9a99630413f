/* policy.c: the rules a tool bundle's entries must follow, and the modes they get (pure). */
#include "policy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sh/tools.h"
#include "sh/util.h"

/* The symbolic links of the bundle so far, as hashes of their canonical paths ("a/b": no ".",
 * no empty component) in an open-addressing set. A collision can only refuse a bundle, never
 * let one through. */
#define SLOT_EMPTY 0
#define SLOT_GONE  1

struct sh_bundle_policy {
        unsigned count;
        uint64_t total;
        uint64_t *links;
        size_t cap, n, used; /* cap: 0 or a power of two; used: n plus tombstones */
};

sh_bundle_policy *sh_bundle_policy_new(void)
{
        return calloc(1, sizeof(sh_bundle_policy));
}

void sh_bundle_policy_free(sh_bundle_policy *p)
{
        if (!p)
                return;
        free(p->links);
        free(p);
}

/* FNV-1a over the canonical path, one component at a time; never SLOT_EMPTY or SLOT_GONE. */
#define HASH_START 1469598103934665603ULL

static uint64_t hash_add(uint64_t h, const char *comp, size_t n, bool first)
{
        if (!first)
                h = (h ^ '/') * 1099511628211ULL;
        for (size_t i = 0; i < n; i++)
                h = (h ^ (unsigned char)comp[i]) * 1099511628211ULL;
        return h;
}

static uint64_t slot_value(uint64_t h)
{
        return h < 2 ? h + 2 : h;
}

static size_t find(const sh_bundle_policy *p, uint64_t v, bool *ret_found)
{
        size_t i = (size_t)(v ^ (v >> 29)) & (p->cap - 1), gone = SIZE_MAX;

        for (;;) {
                if (p->links[i] == v) {
                        *ret_found = true;
                        return i;
                }
                if (p->links[i] == SLOT_EMPTY) {
                        *ret_found = false;
                        return gone != SIZE_MAX ? gone : i;
                }
                if (p->links[i] == SLOT_GONE && gone == SIZE_MAX)
                        gone = i;
                i = (i + 1) & (p->cap - 1);
        }
}

static bool is_link(const sh_bundle_policy *p, uint64_t h)
{
        bool found = false;

        if (p->cap)
                (void)find(p, slot_value(h), &found);
        return found;
}

static int grow(sh_bundle_policy *p)
{
        size_t cap = p->cap ? p->cap * 2 : 64;
        uint64_t *old = p->links, *nl = calloc(cap, sizeof(*nl));
        size_t oldcap = p->cap;

        if (!nl)
                return -ENOMEM;
        p->links = nl;
        p->cap = cap;
        p->used = p->n;
        for (size_t i = 0; i < oldcap; i++) {
                bool found;

                if (old[i] > SLOT_GONE)
                        p->links[find(p, old[i], &found)] = old[i];
        }
        free(old);
        return 0;
}

static int link_add(sh_bundle_policy *p, uint64_t h)
{
        uint64_t v = slot_value(h);
        bool found;
        size_t i;

        /* Load at most one half, tombstones included: every probe ends at an empty slot. */
        if ((p->used + 1) * 2 > p->cap && grow(p) < 0)
                return -ENOMEM;
        i = find(p, v, &found);
        if (found)
                return 0;
        if (p->links[i] == SLOT_EMPTY)
                p->used++;
        p->links[i] = v;
        p->n++;
        return 0;
}

static void link_del(sh_bundle_policy *p, uint64_t h)
{
        bool found = false;
        size_t i;

        if (!p->cap)
                return;
        i = find(p, slot_value(h), &found);
        if (found) {
                p->links[i] = SLOT_GONE;
                p->n--;
        }
}

/* A path as the rules see it: relative, no ".." component, at most SH_BUNDLE_DEPTH_MAX
 * components once "." and empty ones are dropped. The number of components into *ret_comps
 * (0: the bundle's root, "." or "./"), the hash of the whole into *ret_hash; false when no
 * proper prefix may be a symbolic link of the bundle but one is (*ret_below). */
static bool walk_path(const sh_bundle_policy *p, const char *s, unsigned *ret_comps,
                      uint64_t *ret_hash, bool *ret_below)
{
        uint64_t h = HASH_START;
        unsigned comps = 0;

        *ret_below = false;
        if (!s || strnlen(s, SH_BUNDLE_PATH_MAX) >= SH_BUNDLE_PATH_MAX || s[0] == '/')
                return false;
        while (*s) {
                const char *e = strchr(s, '/');
                size_t n = e ? (size_t)(e - s) : strlen(s);

                if (n == 2 && s[0] == '.' && s[1] == '.')
                        return false;
                if (n > 0 && !(n == 1 && s[0] == '.')) {
                        /* the components so far are a proper prefix: a link there would be
                         * followed to write this entry */
                        if (comps > 0 && is_link(p, h))
                                *ret_below = true;
                        h = hash_add(h, s, n, comps == 0);
                        if (++comps > SH_BUNDLE_DEPTH_MAX)
                                return false;
                }
                s += n + (e ? 1 : 0);
        }
        *ret_comps = comps;
        *ret_hash = h;
        return true;
}

/* A symbolic link's target must stay inside the bundle when resolved from the link's
 * directory (`depth` components below the root). Every ".." must come first: "l/.." through
 * a link l is not what it looks like lexically (l may point anywhere inside), while leading
 * ".."s climb real directories (no entry is ever written below a link), and each link is
 * checked in turn. */
static bool symlink_stays_inside(unsigned depth, const char *t)
{
        bool descended = false;
        long d = depth;

        if (!t || !*t || t[0] == '/' || strnlen(t, SH_BUNDLE_PATH_MAX) >= SH_BUNDLE_PATH_MAX)
                return false;
        while (*t) {
                const char *e = strchr(t, '/');
                size_t n = e ? (size_t)(e - t) : strlen(t);

                if (n == 2 && t[0] == '.' && t[1] == '.') {
                        if (descended || --d < 0)
                                return false;
                } else if (n > 0 && !(n == 1 && t[0] == '.')) {
                        descended = true;
                }
                t += n + (e ? 1 : 0);
        }
        return true;
}

sh_bundle_verdict sh_bundle_check(sh_bundle_policy *p, const sh_bundle_entry *e, mode_t *ret_perm)
{
        unsigned comps = 0, hcomps = 0;
        uint64_t h = 0, hh = 0;
        bool below = false, hbelow = false;

        /* Every header counts, the skipped root too: the bound is on what libarchive reads. */
        if (p->count >= SH_TOOLS_FILES_MAX)
                return SH_BUNDLE_TOO_MANY;
        p->count++;
        if (!walk_path(p, e->path, &comps, &h, &below))
                return SH_BUNDLE_BAD_PATH;
        if (comps == 0)
                return SH_BUNDLE_SKIP;
        if (below)
                return SH_BUNDLE_BELOW_LINK;
        if (e->hardlink) {
                /* A hard link names an entry of the bundle: relative, no "..", not the root,
                 * not below one of its links. */
                if (!walk_path(p, e->hardlink, &hcomps, &hh, &hbelow) || hcomps == 0)
                        return SH_BUNDLE_HARDLINK_OUTSIDE;
                if (hbelow)
                        return SH_BUNDLE_BELOW_LINK;
        } else if (e->type == S_IFLNK) {
                if (!symlink_stays_inside(comps - 1, e->symlink))
                        return SH_BUNDLE_SYMLINK_OUTSIDE;
        } else if (e->type != S_IFDIR && e->type != S_IFREG) {
                return SH_BUNDLE_BAD_TYPE;
        }
        if (e->size < 0 || (uint64_t)e->size > SH_TOOLS_UNPACKED_MAX - p->total)
                return SH_BUNDLE_TOO_BIG;
        /* A later entry of the same name replaces an earlier one: the name is a link from now
         * on exactly when this entry is one. */
        if (!e->hardlink && e->type == S_IFLNK) {
                if (link_add(p, h) < 0)
                        return SH_BUNDLE_NO_MEMORY;
        } else {
                link_del(p, h);
        }
        p->total += (uint64_t)e->size;
        /* Normalised modes: readable by every sandbox uid, executable where the author said
         * so, never setuid/setgid/sticky or world-writable. */
        if (e->type == S_IFDIR)
                *ret_perm = 0755;
        else if (e->type == S_IFREG)
                *ret_perm = (e->perm & 0111) ? 0755 : 0644;
        else
                *ret_perm = e->perm;
        return SH_BUNDLE_TAKE;
}

void sh_bundle_reason(sh_bundle_verdict v, const char *path, char *buf, size_t size)
{
        char q[160];

        sh_quote_printable(path, q, sizeof(q));
        switch (v) {
        case SH_BUNDLE_TAKE:
        case SH_BUNDLE_SKIP:
                snprintf(buf, size, "entry '%s' is allowed", q);
                return;
        case SH_BUNDLE_TOO_MANY:
                snprintf(buf, size, "unsafe bundle: more than %u entries", SH_TOOLS_FILES_MAX);
                return;
        case SH_BUNDLE_BAD_PATH:
                snprintf(buf, size,
                         "unsafe bundle: entry '%s' is absolute, contains '..' or is too deep", q);
                return;
        case SH_BUNDLE_BELOW_LINK:
                snprintf(
                        buf, size,
                        "unsafe bundle: entry '%s' lies, or links to a path, below a symbolic link "
                        "of the bundle",
                        q);
                return;
        case SH_BUNDLE_HARDLINK_OUTSIDE:
                snprintf(buf, size, "unsafe bundle: hard link '%s' points outside the bundle", q);
                return;
        case SH_BUNDLE_SYMLINK_OUTSIDE:
                snprintf(buf, size, "unsafe bundle: symbolic link '%s' points outside the bundle",
                         q);
                return;
        case SH_BUNDLE_BAD_TYPE:
                snprintf(buf, size,
                         "unsafe bundle: entry '%s' is a device node, FIFO or socket (only files, "
                         "directories and links are allowed)",
                         q);
                return;
        case SH_BUNDLE_TOO_BIG:
                snprintf(buf, size, "unsafe bundle: unpacks to more than %llu bytes",
                         (unsigned long long)SH_TOOLS_UNPACKED_MAX);
                return;
        case SH_BUNDLE_NO_MEMORY:
                snprintf(buf, size, "this host is out of memory");
                return;
        }
        snprintf(buf, size, "unsafe bundle: entry '%s' refused", q);
}
