/* cgroup-parse.c: the pure cgroup parsers: /proc/self/cgroup, mountinfo, the path of a cgroup
 * on a mount, keyed control files, token lists, a process's CPU times. Strings in, strings out, no system calls
 * (unit-tested with canned v1, v2 and hybrid fixtures in tests/unit/test_cgroup_parse.c). */
#include "cgroup-internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sh_cg_parse_u64_span(const char *s, size_t len, uint64_t *ret)
{
        uint64_t v = 0;

        if (len == 0 || len > 20)
                return -EBADMSG;
        for (size_t i = 0; i < len; i++) {
                unsigned d;

                if (s[i] < '0' || s[i] > '9')
                        return -EBADMSG;
                d = (unsigned)(s[i] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -EBADMSG;
                v = v * 10 + d;
        }
        *ret = v;
        return 0;
}

/* Is `tok` one of the `sep`-separated items of the span [s, s+len)? */
static bool span_has_item(const char *s, size_t len, char sep, const char *tok)
{
        size_t tl = strlen(tok);
        const char *end = s + len;

        while (s < end) {
                const char *e = memchr(s, sep, (size_t)(end - s));
                size_t il;

                if (!e)
                        e = end;
                il = (size_t)(e - s);
                if (il == tl && memcmp(s, tok, tl) == 0)
                        return true;
                s = e + 1;
        }
        return false;
}

bool sh_cg_has_token(const char *text, const char *token)
{
        const char *s = text;

        /* cgroup.controllers: "cpuset cpu io memory pids\n" */
        while (*s) {
                size_t n;

                while (*s == ' ' || *s == '\n' || *s == '\t')
                        s++;
                n = strcspn(s, " \n\t");
                if (n == 0)
                        break;
                if (n == strlen(token) && memcmp(s, token, n) == 0)
                        return true;
                s += n;
        }
        return false;
}

int sh_cg_parse_proc_self(const char *text, const char *controller, char **ret_path)
{
        const char *line = text;

        if (!text || !ret_path)
                return -EINVAL;
        while (*line) {
                const char *nl = strchrnul(line, '\n');
                const char *c1 = memchr(line, ':', (size_t)(nl - line));
                const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(nl - c1 - 1)) : NULL;

                /* "hierarchy-ID:controller-list:cgroup-path"; the path is the rest of the
                 * line and may itself hold ':' */
                if (c2) {
                        const char *list = c1 + 1, *path = c2 + 1;
                        size_t list_len = (size_t)(c2 - list), path_len = (size_t)(nl - path);
                        bool match;

                        if (controller)
                                match = list_len > 0 &&
                                        span_has_item(list, list_len, ',', controller);
                        else
                                match = list_len == 0 && c1 - line == 1 && line[0] == '0';
                        if (match && path_len > 0 && path_len < PATH_MAX && path[0] == '/') {
                                char *p = strndup(path, path_len);

                                if (!p)
                                        return -ENOMEM;
                                *ret_path = p;
                                return 0;
                        }
                }
                line = *nl ? nl + 1 : nl;
        }
        return -ENOENT;
}

/* Decode mountinfo's octal escapes ("\040" for a space) of a field into a new string. */
static char *mountinfo_unescape(const char *s, size_t len)
{
        char *out = malloc(len + 1), *o = out;

        if (!out)
                return NULL;
        for (size_t i = 0; i < len; i++) {
                if (s[i] == '\\' && i + 3 < len && s[i + 1] >= '0' && s[i + 1] <= '3' &&
                    s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
                        *o++ = (char)(((s[i + 1] - '0') << 6) | ((s[i + 2] - '0') << 3) |
                                      (s[i + 3] - '0'));
                        i += 3;
                } else {
                        *o++ = s[i];
                }
        }
        *o = '\0';
        return out;
}

int sh_cg_parse_mountinfo_ex(const char *text, const char *controller, char **ret_mountpoint,
                             char **ret_root)
{
        const char *line = text;

        if (!text)
                return -EINVAL;
        while (*line) {
                const char *nl = strchrnul(line, '\n');
                const char *f[6] = {0};
                size_t fl[6] = {0};
                const char *p = line, *fstype = NULL, *opts = NULL;
                size_t fstype_len = 0, opts_len = 0;
                int n = 0;
                bool after_sep = false;

                /* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER" */
                while (p < nl) {
                        const char *e = memchr(p, ' ', (size_t)(nl - p));
                        size_t l;

                        if (!e)
                                e = nl;
                        l = (size_t)(e - p);
                        if (l > 0) {
                                if (!after_sep && n < 6) {
                                        f[n] = p;
                                        fl[n] = l;
                                        n++;
                                } else if (!after_sep && l == 1 && *p == '-') {
                                        after_sep = true;
                                        n = 0;
                                } else if (after_sep) {
                                        if (n == 0) {
                                                fstype = p;
                                                fstype_len = l;
                                        } else if (n == 2) {
                                                opts = p;
                                                opts_len = l;
                                        }
                                        n++;
                                }
                        }
                        p = e + 1;
                }
                if (after_sep && f[4] && fstype && opts) {
                        bool match;

                        if (!controller)
                                match = fstype_len == 7 && memcmp(fstype, "cgroup2", 7) == 0;
                        else
                                match = fstype_len == 6 && memcmp(fstype, "cgroup", 6) == 0 &&
                                        span_has_item(opts, opts_len, ',', controller);
                        if (match) {
                                _cleanup_free_ char *mp = mountinfo_unescape(f[4], fl[4]);
                                _cleanup_free_ char *root = mountinfo_unescape(f[3], fl[3]);

                                if (!mp || !root)
                                        return -ENOMEM;
                                if (ret_mountpoint)
                                        *ret_mountpoint = TAKE_PTR(mp);
                                if (ret_root)
                                        *ret_root = TAKE_PTR(root);
                                return 0;
                        }
                }
                line = *nl ? nl + 1 : nl;
        }
        return -ENOENT;
}

int sh_cg_parse_mountinfo(const char *text, const char *controller, char **ret_mountpoint)
{
        return sh_cg_parse_mountinfo_ex(text, controller, ret_mountpoint, NULL);
}

int sh_cg_path_join(const char *mountpoint, const char *mount_root, const char *cgpath, char **ret)
{
        size_t rl;
        const char *rest;
        char *out;

        if (!mountpoint || !mount_root || !cgpath || cgpath[0] != '/' || mount_root[0] != '/')
                return -EINVAL;
        /* a cgroup namespace shows cgroups outside it as "/..": never follow those */
        for (const char *s = cgpath; (s = strstr(s, "..")); s += 2)
                if ((s == cgpath || s[-1] == '/') && (s[2] == '/' || s[2] == '\0'))
                        return -EINVAL;
        rl = strlen(mount_root);
        while (rl > 1 && mount_root[rl - 1] == '/')
                rl--;
        if (rl == 1) {
                rest = cgpath;
        } else {
                if (strncmp(cgpath, mount_root, rl) != 0 || (cgpath[rl] != '/' && cgpath[rl]))
                        return -ENOENT;
                rest = cgpath + rl;
        }
        while (rest[0] == '/' && rest[1] == '/')
                rest++;
        if (STREQ(rest, "/"))
                rest = "";
        if (asprintf(&out, "%s%s", mountpoint, rest) < 0)
                return -ENOMEM;
        /* "/sys/fs/cgroup/" + "" stays as it is; strip one trailing '/' for tidiness */
        if (strlen(out) > 1 && out[strlen(out) - 1] == '/')
                out[strlen(out) - 1] = '\0';
        *ret = out;
        return 0;
}

int sh_cg_parse_keyed(const char *text, const char *key, uint64_t *ret)
{
        size_t kl = strlen(key);
        const char *line = text;

        while (*line) {
                const char *nl = strchrnul(line, '\n');

                if ((size_t)(nl - line) > kl && strncmp(line, key, kl) == 0 && line[kl] == ' ')
                        return sh_cg_parse_u64_span(line + kl + 1, (size_t)(nl - line - kl - 1),
                                                    ret);
                line = *nl ? nl + 1 : nl;
        }
        return -ENOENT;
}

int sh_cg_parse_proc_stat_ticks(const char *text, uint64_t *ret)
{
        const char *p = strrchr(text, ')'), *end;
        uint64_t sum = 0, v;
        int field = 2; /* the field the ')' ends */

        if (!p)
                return -EBADMSG;
        p++;
        /* fields 14-17: utime stime cutime cstime (proc(5)); cutime and cstime are signed in
         * the kernel's format but never negative */
        while (*p && field < 17) {
                while (*p == ' ')
                        p++;
                if (!*p)
                        break;
                field++;
                for (end = p; *end && *end != ' ' && *end != '\n'; end++)
                        ;
                if (field >= 14) {
                        if (sh_cg_parse_u64_span(p, (size_t)(end - p), &v) < 0 ||
                            v > UINT64_MAX - sum)
                                return -EBADMSG;
                        sum += v;
                }
                p = end;
        }
        if (field < 17)
                return -EBADMSG;
        *ret = sum;
        return 0;
}
