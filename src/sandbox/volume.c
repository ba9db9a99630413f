/* volume.c: the lexical rules of a create's volumes (sh/volume.h). Pure. */
#include "sh/volume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/macro.h"

static bool label_valid(const char *s, size_t max)
{
        size_t n = strlen(s), i;

        if (n == 0 || n > max || s[0] == '-' || s[n - 1] == '-')
                return false;
        for (i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return false;
        return true;
}

bool sh_volume_name_valid(const char *s)
{
        return s && label_valid(s, SH_VOLUME_NAME_MAX);
}

bool sh_volume_claim_valid(const char *s)
{
        return s && label_valid(s, SH_VOLUME_CLAIM_MAX);
}

static const char *digits(const char *s)
{
        const char *p = s;

        while (*p >= '0' && *p <= '9')
                p++;
        return p == s ? NULL : p;
}

/* The fraction's digits counted (at most 9: 10^9 * 10^9 stays below 2^64); more are only
 * checked to be zero or not. */
#define STORAGE_FRAC_DIGITS 9

bool sh_volume_storage_bytes(const char *s, uint64_t *bytes)
{
        static const char *const units[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
        const char *p = s ? digits(s) : NULL, *q;
        uint64_t whole = 0, frac = 0, scale = 1, mult, b, hi, part;
        bool rest = false; /* a nonzero fraction digit past the counted ones */
        size_t i;

        if (!p)
                return false;
        for (q = s; q < p; q++)
                if (__builtin_mul_overflow(whole, 10, &whole) ||
                    __builtin_add_overflow(whole, (uint64_t)(*q - '0'), &whole))
                        return false;
        if (*p == '.') {
                const char *f = p + 1;

                if (!(p = digits(f)))
                        return false;
                for (q = f; q < p; q++) {
                        if (q - f < STORAGE_FRAC_DIGITS) {
                                frac = frac * 10 + (uint64_t)(*q - '0');
                                scale *= 10;
                        } else if (*q != '0')
                                rest = true;
                }
        }
        for (i = 0; i < ARRAY_SIZE(units); i++)
                if (STREQ(p, units[i]))
                        break;
        if (i == ARRAY_SIZE(units))
                return false;
        mult = 1ULL << (10 * i);
        /* whole * mult + ceil(frac * mult / scale), mult = q * scale + r: no step overflows. */
        part = frac * (mult % scale);
        if (__builtin_mul_overflow(whole, mult, &b) ||
            __builtin_mul_overflow(frac, mult / scale, &hi) || __builtin_add_overflow(b, hi, &b) ||
            __builtin_add_overflow(b, part / scale + (part % scale || rest ? 1 : 0), &b))
                return false;
        if (bytes)
                *bytes = b;
        return true;
}

bool sh_volume_storage_valid(const char *s)
{
        return sh_volume_storage_bytes(s, NULL);
}

/* `in` as its components joined by single '/' ("." and empty ones dropped), a leading '/'
 * when abs; out holds at least "/" (abs) or "" (relative). NULL or why not. */
static const char *normalise(const char *in, bool abs, char *out, size_t size)
{
        size_t k = 0;
        const char *c = in;

        if (size < 2)
                return "is too long";
        if (abs)
                out[k++] = '/';
        out[k] = '\0';
        while (*c) {
                size_t n = strcspn(c, "/");

                if (n == 2 && c[0] == '.' && c[1] == '.')
                        return "has a '..' component";
                if (n > 0 && !(n == 1 && c[0] == '.')) {
                        bool sep = k > 0 && out[k - 1] != '/';

                        if (k + sep + n + 1 > size)
                                return "is too long";
                        if (sep)
                                out[k++] = '/';
                        memcpy(out + k, c, n);
                        k += n;
                        out[k] = '\0';
                }
                c += n;
                c += *c == '/';
        }
        return NULL;
}

/* path is `dir` or lies below it, component-wise (both normalised, absolute). */
static bool beneath(const char *path, const char *dir)
{
        size_t n = strlen(dir);

        if (STREQ(dir, "/"))
                return true;
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* path (absolute, normalised) is /proc, /dev or /sys or below them. */
static bool kernel_place(const char *path)
{
        static const char *const kernel[] = {"/proc", "/dev", "/sys"};
        size_t i;

        for (i = 0; i < ARRAY_SIZE(kernel); i++)
                if (beneath(path, kernel[i]))
                        return true;
        return false;
}

const char *sh_volume_target(const char *in, char *out, size_t size)
{
        const char *why;

        if (!in || in[0] != '/')
                return "is not an absolute path";
        if ((why = normalise(in, true, out, size)))
                return why;
        if (STREQ(out, "/"))
                return "is the root itself";
        if (kernel_place(out))
                return "is a kernel filesystem's place (/proc, /dev, /sys)";
        if (STREQ(out, SH_VOLUME_WORKSPACE))
                return "is the workspace's root (below it is fine)";
        return NULL;
}

const char *sh_volume_sub(const char *in, char *out, size_t size)
{
        if (!in)
                return "is not a string";
        if (in[0] == '/')
                return "is absolute (it is relative to the volume)";
        return normalise(in, false, out, size);
}

const char *sh_volume_host(const char *in, const char *allow, char *base, size_t base_size,
                           char *rel, size_t rel_size)
{
        char path[SH_VOLUME_BASE_MAX], prefix[SH_VOLUME_BASE_MAX];
        size_t best = 0;
        const char *why, *c = allow;
        bool found = false;

        if (!in || in[0] != '/')
                return "is not an absolute path";
        if ((why = normalise(in, true, path, sizeof(path))))
                return why;
        while (c && *c) {
                size_t n = strcspn(c, ":");
                char raw[SH_VOLUME_BASE_MAX];

                if (n > 0 && n < sizeof(raw)) {
                        memcpy(raw, c, n);
                        raw[n] = '\0';
                        /* The operator's: absolute and without ".." (config.c), normalised here. */
                        if (raw[0] == '/' && !normalise(raw, true, prefix, sizeof(prefix)) &&
                            beneath(path, prefix) && (!found || strlen(prefix) > best)) {
                                if (strlen(prefix) + 1 > base_size)
                                        return "is too long";
                                memcpy(base, prefix, strlen(prefix) + 1);
                                best = strlen(prefix);
                                found = true;
                        }
                }
                c += n;
                c += *c == ':';
        }
        if (!found)
                return "is under none of the host's allowed prefixes "
                       "(SANDBOX_HOST_VOLUME_HOST_ALLOW)";
        /* Even below an operator's "/": the host's kernel filesystems are never a volume. */
        if (kernel_place(path))
                return "is a kernel filesystem's place (/proc, /dev, /sys)";
        /* the rest below the prefix, "." for the prefix itself */
        c = path + (STREQ(base, "/") ? 1 : best + (path[best] == '/'));
        if (!*c)
                c = ".";
        if (strlen(c) + 1 > rel_size)
                return "is too long";
        memcpy(rel, c, strlen(c) + 1);
        return NULL;
}

/* s is relative and plain: components joined by single '/', none empty, "." or "..". */
static bool plain(const char *s, size_t size)
{
        char norm[SH_VOLUME_PATH_MAX];

        if (!memchr(s, '\0', size) || s[0] == '/' || normalise(s, false, norm, sizeof(norm)))
                return false;
        return STREQ(norm, s);
}

static int refuse(char *why, size_t size, const sh_volume *v, const char *what)
{
        snprintf(why, size, "volume '%.63s': %s", v->name, what);
        return -1;
}

int sh_volumes_check(const sh_volume *v, size_t n, size_t max, char *why, size_t size)
{
        char norm[SH_VOLUME_PATH_MAX];
        size_t i, j;

        if (n > max) {
                snprintf(why, size, "%zu volumes: at most %zu", n, max);
                return -1;
        }
        for (i = 0; i < n; i++) {
                const sh_volume *a = &v[i];

                if (!memchr(a->name, '\0', sizeof(a->name)) || !sh_volume_name_valid(a->name)) {
                        snprintf(why, size, "volume %zu: its name is not a DNS label", i);
                        return -1;
                }
                if (!memchr(a->target, '\0', sizeof(a->target)) ||
                    sh_volume_target(a->target, norm, sizeof(norm)) || !STREQ(norm, a->target))
                        return refuse(why, size, a, "its mountPath is not a valid one");
                if (!memchr(a->base, '\0', sizeof(a->base)) || !plain(a->sub, sizeof(a->sub)))
                        return refuse(why, size, a, "its subPath is not plain");
                if (a->storage && a->kind != SH_VOLUME_PVC)
                        return refuse(why, size, a, "a size is a named volume's only");
                switch (a->kind) {
                case SH_VOLUME_HOST:
                        if (a->base[0] != '/' || normalise(a->base, true, norm, sizeof(norm)) ||
                            !STREQ(norm, a->base) ||
                            (!STREQ(a->path, ".") && !plain(a->path, sizeof(a->path))) || !*a->path)
                                return refuse(why, size, a, "its host path is not plain");
                        break;
                case SH_VOLUME_PVC:
                        if (*a->base || !memchr(a->path, '\0', sizeof(a->path)) ||
                            !sh_volume_claim_valid(a->path))
                                return refuse(why, size, a, "its claimName is not valid");
                        break;
                default:
                        return refuse(why, size, a, "its backend is not known");
                }
                for (j = 0; j < i; j++) {
                        if (STREQ(v[j].name, a->name))
                                return refuse(why, size, a, "the name is given twice");
                        if (STREQ(v[j].target, a->target))
                                return refuse(why, size, a, "its mountPath is another's");
                }
        }
        return 0;
}

int sh_volumes_allowed(const sh_volume *v, size_t n, const char *allow, char *why, size_t size)
{
        char base[SH_VOLUME_BASE_MAX], rel[SH_VOLUME_PATH_MAX];
        size_t i;

        for (i = 0; i < n; i++) {
                if (v[i].kind != SH_VOLUME_HOST)
                        continue;
                if (!allow || !*allow)
                        return refuse(why, size, &v[i],
                                      "host volumes are not allowed on this host "
                                      "(SANDBOX_HOST_VOLUME_HOST_ALLOW is unset)");
                if (sh_volume_host(v[i].base, allow, base, sizeof(base), rel, sizeof(rel)) ||
                    !STREQ(base, v[i].base))
                        return refuse(why, size, &v[i],
                                      "its base is none of SANDBOX_HOST_VOLUME_HOST_ALLOW's");
        }
        return 0;
}

static size_t depth(const char *target)
{
        size_t d = 0;

        for (; *target; target++)
                d += *target == '/';
        return d;
}

void sh_volumes_sort(sh_volume *v, size_t n)
{
        size_t i, j;

        /* insertion sort: stable, and n is at most SH_VOLUMES_MAX */
        for (i = 1; i < n; i++) {
                sh_volume t;

                if (depth(v[i - 1].target) <= depth(v[i].target))
                        continue;
                t = v[i];
                for (j = i; j > 0 && depth(v[j - 1].target) > depth(t.target); j--)
                        v[j] = v[j - 1];
                v[j] = t;
        }
}
