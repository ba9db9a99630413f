/* fuzz_volume.c: the lexical rules of a create's volumes (sandbox/volume.c). Input: lines of
 * "<kind><field>": 'm' a mountPath, 's' a subPath, 'h' a host.path judged against the allow
 * list of the first line ("a/data:/srv"), 'n' a name, 'c' a claimName, 'q' a storage quantity.
 * Each taken mountPath, subPath and host path becomes a volume of one set. Properties: what is
 * taken is normalised (judged again it is itself), holds no ".." component, no empty or "."
 * component; a mountPath is absolute, never "/", /proc, /dev, /sys or below them, nor the
 * workspace root; a host path's base is one of the allowed prefixes and the rest lies below
 * it; a set built of taken fields passes sh_volumes_check, and sorted its parents come first. */
#include "fuzz.h"

#include "sh/volume.h"

static char allow[512];

static void check_plain(const char *s, bool abs)
{
        const char *c = s;

        FZ_CHECK((s[0] == '/') == abs);
        if (abs && !s[1])
                return;
        for (c = s + abs; *c; c += *c == '/') {
                size_t n = strcspn(c, "/");

                FZ_CHECK(n > 0);
                FZ_CHECK(!(n == 1 && c[0] == '.'));
                FZ_CHECK(!(n == 2 && c[0] == '.' && c[1] == '.'));
                c += n;
        }
}

static bool beneath(const char *p, const char *dir)
{
        size_t n = strlen(dir);

        return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static sh_volume set[SH_VOLUMES_MAX];
        char again[SH_VOLUME_BASE_MAX], why[256];
        size_t n = 0, i;
        fz f = fz_init(data, size);
        char *first = fz_line(&f);

        snprintf(allow, sizeof(allow), "%s", first[0] == 'a' ? first + 1 : "/data");
        free(first);
        while (f.n) {
                char *line = fz_line(&f), *in = line + (line[0] ? 1 : 0);
                sh_volume *v = n < SH_VOLUMES_MAX ? &set[n] : NULL;
                char out[SH_VOLUME_PATH_MAX], base[SH_VOLUME_BASE_MAX], rel[SH_VOLUME_PATH_MAX];

                switch (line[0]) {
                case 'm':
                        if (sh_volume_target(in, out, sizeof(out)))
                                break;
                        check_plain(out, true);
                        FZ_CHECK(strcmp(out, "/") != 0 && strcmp(out, SH_VOLUME_WORKSPACE) != 0);
                        FZ_CHECK(!beneath(out, "/proc") && !beneath(out, "/dev") &&
                                 !beneath(out, "/sys"));
                        FZ_CHECK(!sh_volume_target(out, again, sizeof(again)) &&
                                 !strcmp(out, again));
                        if (v) {
                                memset(v, 0, sizeof(*v));
                                snprintf(v->name, sizeof(v->name), "v%zu", n);
                                v->kind = SH_VOLUME_PVC;
                                snprintf(v->path, sizeof(v->path), "c");
                                memcpy(v->target, out, sizeof(out));
                                n++;
                        }
                        break;
                case 's':
                        if (sh_volume_sub(in, out, sizeof(out)))
                                break;
                        if (out[0])
                                check_plain(out, false);
                        FZ_CHECK(!sh_volume_sub(out, again, sizeof(again)) && !strcmp(out, again));
                        if (n > 0)
                                memcpy(set[n - 1].sub, out, sizeof(out));
                        break;
                case 'h':
                        if (sh_volume_host(in, allow, base, sizeof(base), rel, sizeof(rel)))
                                break;
                        check_plain(base, true);
                        if (strcmp(rel, "."))
                                check_plain(rel, false);
                        FZ_CHECK(base[0] == '/');
                        if (n > 0 && strlen(base) < sizeof(set[0].base)) {
                                sh_volume *h = &set[n - 1];

                                h->kind = SH_VOLUME_HOST;
                                memcpy(h->base, base, strlen(base) + 1);
                                memcpy(h->path, rel, strlen(rel) + 1);
                                FZ_CHECK(sh_volumes_allowed(h, 1, allow, why, sizeof(why)) == 0);
                        }
                        break;
                case 'n':
                        if (sh_volume_name_valid(in))
                                FZ_CHECK(strlen(in) <= SH_VOLUME_NAME_MAX);
                        break;
                case 'c':
                        if (sh_volume_claim_valid(in))
                                FZ_CHECK(strlen(in) <= SH_VOLUME_CLAIM_MAX && !strchr(in, '/') &&
                                         strcmp(in, "..") && strcmp(in, "."));
                        break;
                default:
                        (void)sh_volume_storage_valid(in);
                        break;
                }
                free(line);
        }
        /* Unique targets make a valid set; sorted, nothing precedes its parent. */
        for (i = 1; i < n; i++)
                for (size_t j = 0; j < i; j++)
                        if (!strcmp(set[i].target, set[j].target))
                                snprintf(set[i].target, sizeof(set[i].target), "/u/%zu", i);
        if (sh_volumes_check(set, n, SH_VOLUMES_MAX, why, sizeof(why)) == 0) {
                sh_volumes_sort(set, n);
                for (i = 0; i < n; i++)
                        for (size_t j = i + 1; j < n; j++)
                                FZ_CHECK(!beneath(set[i].target, set[j].target) ||
                                         !strcmp(set[i].target, set[j].target));
        }
        return 0;
}
