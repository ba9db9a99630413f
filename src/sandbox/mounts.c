/* mounts.c: a sandbox's volumes to and from its worker (sandbox-internal.h): the spec's
 * volumes, and a volume step's failure told as the request's fault, naming the volume. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-internal.h"
#include "sh/macro.h"
#include "sh/volume.h"

_Static_assert(SH_VOLUMES_MAX == SH_WORKER_VOLUMES_MAX, "a create's volumes fit a worker spec");
_Static_assert(SH_VOLUME_PATH_MAX <= SH_ENTRY_PATH_MAX, "a volume's paths fit a worker spec");
_Static_assert(SH_VOLUME_BASE_MAX <= SH_WORKER_PATH_MAX, "a volume's base fits a worker spec");

int sh_volumes_spec(const sh_volume *v, size_t n, const sh_config *cfg, sh_worker_spec *spec,
                    sh_error **err)
{
        size_t i;

        spec->volumes = NULL;
        spec->n_volumes = 0;
        spec->volume_gid = 0;
        spec->volume_project = 0;
        if (!n)
                return 0;
        spec->volumes = calloc(n, sizeof(*spec->volumes));
        if (!spec->volumes)
                return sh_error_make(err, ENOMEM, "out of memory");
        for (i = 0; i < n; i++) {
                sh_volume_spec *s = &spec->volumes[i];
                const char *base = v[i].kind == SH_VOLUME_PVC ? cfg->volume_root : v[i].base;
                int k = snprintf(s->base, sizeof(s->base), "%s", base);

                if (k < 0 || (size_t)k >= sizeof(s->base)) {
                        free(TAKE_PTR(spec->volumes));
                        return sh_error_new(err, SH_E_INTERNAL, "the volume root is too long");
                }
                snprintf(s->path, sizeof(s->path), "%s", v[i].path);
                snprintf(s->sub, sizeof(s->sub), "%s", v[i].sub);
                snprintf(s->target, sizeof(s->target), "%s", v[i].target);
                s->flags = (v[i].read_only ? SH_VOL_RDONLY : 0) |
                           (v[i].kind == SH_VOLUME_PVC ? SH_VOL_NAMED : 0) |
                           (v[i].kind == SH_VOLUME_PVC && v[i].create ? SH_VOL_CREATE : 0);
                /* pvc.storage on the claim this worker makes, where the volume root holds it:
                 * ids above every workspace's (base + slot, base + max + slot; disk.c). */
                if (v[i].kind == SH_VOLUME_PVC && v[i].create && v[i].storage &&
                    sh_volume_storage_held()) {
                        s->quota = v[i].storage;
                        spec->volume_project = (uint32_t)(cfg->disk_project_base +
                                                          2ULL * (uint64_t)cfg->max_sandboxes);
                }
        }
        spec->n_volumes = (int)n;
        /* No sandbox has it: sandbox n is uid and gid uid_base + n (uid_base is at least
         * 1000), and every pod configured alike gives the same. */
        spec->volume_gid = (gid_t)(cfg->uid_base - 1);
        return 0;
}

/* What the volume's source is, for a message: "host.path '/data/x'" or "claim 'c'", with its
 * subPath. */
static void source_name(const sh_volume *v, char *out, size_t size)
{
        const char *sep = v->sub[0] ? "', subPath '" : "";

        if (v->kind == SH_VOLUME_PVC)
                snprintf(out, size, "claim '%.253s%s%.300s'", v->path, sep, v->sub);
        else
                snprintf(out, size, "host.path '%.1000s%s%.1000s%s%.300s'", v->base,
                         STREQ(v->path, ".") ? "" : "/", STREQ(v->path, ".") ? "" : v->path, sep,
                         v->sub);
}

int sh_volume_failure(const sh_volume *v, size_t n, uint32_t i, int step, int errnum,
                      sh_error **err)
{
        char src[2700];
        const sh_volume *a;

        if ((step != SH_STEP_VOLUME_SOURCE && step != SH_STEP_VOLUME_TARGET &&
             step != SH_STEP_VOLUME_QUOTA) ||
            i >= n)
                return 0;
        a = &v[i];
        source_name(a, src, sizeof(src));
        if (step == SH_STEP_VOLUME_QUOTA)
                return sh_error_new(err, SH_E_INTERNAL,
                                    "volume '%s': %s: its pvc.storage limit (a project quota on "
                                    "the directory this create made, which is removed again) "
                                    "could not be set: %s",
                                    a->name, src, strerror(errnum));
        if (step == SH_STEP_VOLUME_SOURCE)
                switch (errnum) {
                case ENOENT:
                        return sh_error_new(
                                err, SH_E_INVALID, "volume '%s': %s does not exist%s", a->name, src,
                                a->kind == SH_VOLUME_PVC ? " (createIfNotExists is false)" : "");
                case ENOTDIR:
                        return sh_error_new(err, SH_E_INVALID, "volume '%s': %s is not a directory",
                                            a->name, src);
                case EXDEV:
                case ELOOP:
                        return sh_error_new(err, SH_E_INVALID,
                                            "volume '%s': %s leads through a link or out of "
                                            "what this host allows",
                                            a->name, src);
                case EEXIST:
                        return sh_error_new(err, SH_E_INVALID,
                                            "volume '%s': %s exists and is not a directory",
                                            a->name, src);
                default:
                        return 0;
                }
        switch (errnum) {
        case ENOENT:
        case ENOTDIR:
        case EEXIST:
        case EXDEV:
        case ELOOP:
                return sh_error_new(err, SH_E_INVALID,
                                    "volume '%s': mountPath '%s' cannot be made in the sandbox's "
                                    "root: a part of it is no directory, or a link",
                                    a->name, a->target);
        case EROFS:
        case EACCES:
                return sh_error_new(err, SH_E_INVALID,
                                    "volume '%s': mountPath '%s' cannot be made in the sandbox's "
                                    "root: that part of the image is read-only",
                                    a->name, a->target);
        default:
                return 0;
        }
}
