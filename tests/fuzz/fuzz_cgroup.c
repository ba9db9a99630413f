/* fuzz_cgroup.c: the parsers of the kernel's cgroup text (isolation/cgroup-parse.c): in a
 * container the daemon reads what its host, or a process of a sandbox (/proc/<pid>/stat),
 * wrote. Modes: '0' /proc/self/cgroup, '1' mountinfo, '2' a path join (mount point, mount
 * root, cgroup path, a line each), '3' a keyed file (the key on the first line), '4'
 * /proc/<pid>/stat, '5' a controller list (the token on the first line), '6' digits.
 * Properties: a found path is absolute and a joined one has no ".." component. */
#include "fuzz.h"

#include <errno.h>

#include "cgroup-internal.h"

static const char *const controllers[] = {NULL, "memory", "pids", "cpu", "freezer", "cpuacct"};

static void proc_self(fz *f)
{
        const char *c = controllers[fz_u8(f) % ARRAY_SIZE(controllers)];
        char *text = fz_rest_str(f), *path = NULL;

        if (sh_cg_parse_proc_self(text, c, &path) == 0) {
                FZ_CHECK(path[0] == '/');
                free(path);
        }
        free(text);
}

static void mountinfo(fz *f)
{
        const char *c = controllers[fz_u8(f) % ARRAY_SIZE(controllers)];
        char *text = fz_rest_str(f), *mp = NULL, *root = NULL;
        int r = sh_cg_parse_mountinfo_ex(text, c, &mp, &root);

        FZ_CHECK(r == 0 || r == -ENOENT);
        if (r == 0) {
                FZ_CHECK(mp && root);
                free(mp);
                free(root);
                FZ_CHECK(sh_cg_parse_mountinfo(text, c, &mp) == 0);
                free(mp);
        }
        free(text);
}

static void join(fz *f)
{
        char *mp = fz_line(f), *root = fz_line(f), *cg = fz_rest_str(f), *out = NULL;

        if (sh_cg_path_join(mp, root, cg, &out) == 0) {
                size_t ml = strlen(mp) < strlen(out) ? strlen(mp) : strlen(out);
                const char *rest = out + ml, *end = out + strlen(out);

                /* the mount point, then what of the cgroup path is below the mount's root */
                FZ_CHECK(strncmp(out, mp, ml) == 0);
                FZ_CHECK(!strstr(rest, "/../") && (end - rest < 3 || strcmp(end - 3, "/..")));
                free(out);
        }
        free(mp);
        free(root);
        free(cg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        char *a, *b;
        uint64_t v;

        switch (fz_mode(&f, 7)) {
        case 0:
                proc_self(&f);
                break;
        case 1:
                mountinfo(&f);
                break;
        case 2:
                join(&f);
                break;
        case 3:
                a = fz_line(&f);
                b = fz_rest_str(&f);
                (void)sh_cg_parse_keyed(b, a, &v);
                free(a);
                free(b);
                break;
        case 4:
                a = fz_rest_str(&f);
                (void)sh_cg_parse_proc_stat_ticks(a, &v);
                free(a);
                break;
        case 5:
                a = fz_line(&f);
                b = fz_rest_str(&f);
                (void)sh_cg_has_token(b, a);
                free(a);
                free(b);
                break;
        default:
                a = fz_dup(f.p, f.n);
                if (sh_cg_parse_u64_span(a, f.n, &v) == 0)
                        FZ_CHECK(f.n > 0 && f.n <= 20);
                free(a);
                break;
        }
        return 0;
}
