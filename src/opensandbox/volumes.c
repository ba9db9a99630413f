/* volumes.c: a create's `volumes` (OPENSANDBOX.md section 2, the YAML's Volume, Host, PVC,
 * OSSFS), judged before anything is made: the list bounded by SANDBOX_HOST_VOLUME_MAX first
 * (a thousand volumes cost nothing but their refusal), then each volume's fields by the
 * lexical rules of sh/volume.h. Nothing is looked up: the worker resolves the paths from the
 * operator's base and says what it could not (sandbox/mounts.c names the volume then). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os-internal.h"
#include "sh/volume.h"

/* o is an object whose members are all among `keys` (additionalProperties: false). */
static const char *unknown_key(const cJSON *o, const char *const *keys, size_t n)
{
        const cJSON *v;

        cJSON_ArrayForEach(v, o)
        {
                size_t i;

                for (i = 0; i < n && strcmp(v->string, keys[i]) != 0; i++)
                        ;
                if (i == n)
                        return v->string;
        }
        return NULL;
}

/* A boolean member, `def` when absent or null; -1 when it is another type. */
static int opt_bool(const cJSON *o, const char *name, bool def, bool *ret)
{
        const cJSON *v = sh_json_opt(o, name);

        if (!v) {
                *ret = def;
                return 0;
        }
        if (!cJSON_IsBool(v))
                return -1;
        *ret = cJSON_IsTrue(v);
        return 0;
}

static int judge_host(const sh_config *cfg, const cJSON *h, sh_volume *v, os_err *e)
{
        static const char *const keys[] = {"path"};
        const cJSON *p = sh_json_opt(h, "path");
        const char *bad, *why;

        if (!cJSON_IsObject(h) || !cJSON_IsString(p))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "volume '%s': 'host' is {\"path\": \"/...\"}", v->name);
        if ((bad = unknown_key(h, keys, ARRAY_SIZE(keys))))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "volume '%s': 'host' has no field '%.100s'", v->name, bad);
        if (!cfg->volume_host_allow)
                return os_err_code(e, OS_E_NOT_SUPPORTED,
                                   "volume '%s': host volumes are not supported on this host "
                                   "(SANDBOX_HOST_VOLUME_HOST_ALLOW is unset)",
                                   v->name);
        why = sh_volume_host(p->valuestring, cfg->volume_host_allow, v->base, sizeof(v->base),
                             v->path, sizeof(v->path));
        if (why)
                return os_err_code(e, OS_E_INVALID_REQUEST, "volume '%s': host.path '%.300s' %s",
                                   v->name, p->valuestring, why);
        v->kind = SH_VOLUME_HOST;
        return 0;
}

static int judge_pvc(const cJSON *c, os_record *rec, sh_volume *v, os_err *e)
{
        static const char *const keys[] = {
                "claimName",    "createIfNotExists", "deleteOnSandboxTermination",
                "storageClass", "storage",           "accessModes"};
        const cJSON *name = sh_json_opt(c, "claimName"), *sc = sh_json_opt(c, "storageClass");
        const cJSON *st = sh_json_opt(c, "storage"), *am = sh_json_opt(c, "accessModes"), *x;
        const char *bad;

        if (!cJSON_IsObject(c) || !cJSON_IsString(name))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "volume '%s': 'pvc' is {\"claimName\": ...}", v->name);
        if ((bad = unknown_key(c, keys, ARRAY_SIZE(keys))))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "volume '%s': 'pvc' has no field '%.100s'", v->name, bad);
        if (!sh_volume_claim_valid(name->valuestring))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "volume '%s': pvc.claimName '%.300s' is not a DNS label "
                                   "([a-z0-9]([-a-z0-9]*[a-z0-9])?, at most %d bytes)",
                                   v->name, name->valuestring, SH_VOLUME_CLAIM_MAX);
        if (opt_bool(c, "createIfNotExists", true, &v->create) < 0 ||
            opt_bool(c, "deleteOnSandboxTermination", false, &v->delete_on_end) < 0)
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "volume '%s': pvc.createIfNotExists and "
                                   "pvc.deleteOnSandboxTermination are booleans",
                                   v->name);
        if (sc && !cJSON_IsString(sc))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "volume '%s': pvc.storageClass is a string", v->name);
        if (st && (!cJSON_IsString(st) || !sh_volume_storage_bytes(st->valuestring, &v->storage)))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "volume '%s': pvc.storage is a quantity such as \"1Gi\"",
                                   v->name);
        if (am && !cJSON_IsArray(am))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "volume '%s': pvc.accessModes is a list of strings", v->name);
        cJSON_ArrayForEach(x, am) if (!cJSON_IsString(x)) return os_err_code(
                e, OS_E_INVALID_REQUEST, "volume '%s': pvc.accessModes is a list of strings",
                v->name);
        if (st && !v->storage)
                v->storage = 1; /* "0": as small as a limit can be */
        /* Held by a project quota on the directory this create makes, where the volume root
         * has one (never on NFS): else said, not refused (docs/opensandbox.md). */
        if (st && !sh_volume_storage_held())
                os_record_log(rec, SH_LOG_INFO, "volume-storage-ignored",
                              "volume '%s': pvc.storage '%.40s' is not enforced on this host",
                              v->name, st->valuestring);
        snprintf(v->path, sizeof(v->path), "%s", name->valuestring);
        v->kind = SH_VOLUME_PVC;
        return 0;
}

static int judge_volume(const sh_config *cfg, const cJSON *o, size_t i, os_record *rec,
                        sh_volume *v, os_err *e)
{
        static const char *const keys[] = {"name",      "host",     "pvc",    "ossfs",
                                           "mountPath", "readOnly", "subPath"};
        const cJSON *name = sh_json_opt(o, "name"), *mp = sh_json_opt(o, "mountPath");
        const cJSON *sub = sh_json_opt(o, "subPath"), *host = sh_json_opt(o, "host");
        const cJSON *pvc = sh_json_opt(o, "pvc"), *oss = sh_json_opt(o, "ossfs");
        const char *bad, *why;

        if (!cJSON_IsObject(o))
                return os_err_code(e, OS_E_INVALID_REQUEST, "'volumes[%zu]' is an object", i);
        if (!cJSON_IsString(name) || !sh_volume_name_valid(name->valuestring))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "'volumes[%zu].name' is a DNS label "
                                   "([a-z0-9]([-a-z0-9]*[a-z0-9])?, at most %d bytes)",
                                   i, SH_VOLUME_NAME_MAX);
        snprintf(v->name, sizeof(v->name), "%s", name->valuestring);
        if ((bad = unknown_key(o, keys, ARRAY_SIZE(keys))))
                return os_err_code(e, OS_E_INVALID_REQUEST, "volume '%s' has no field '%.100s'",
                                   v->name, bad);
        if (!cJSON_IsString(mp))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "volume '%s': 'mountPath' is an absolute path", v->name);
        if ((why = sh_volume_target(mp->valuestring, v->target, sizeof(v->target))))
                return os_err_code(e, OS_E_INVALID_REQUEST, "volume '%s': mountPath '%.300s' %s",
                                   v->name, mp->valuestring, why);
        if (opt_bool(o, "readOnly", false, &v->read_only) < 0)
                return os_err_code(e, OS_E_INVALID_REQUEST, "volume '%s': 'readOnly' is a boolean",
                                   v->name);
        if (sub && !cJSON_IsString(sub))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "volume '%s': 'subPath' is a relative path", v->name);
        if (sub && (why = sh_volume_sub(sub->valuestring, v->sub, sizeof(v->sub))))
                return os_err_code(e, OS_E_INVALID_REQUEST, "volume '%s': subPath '%.300s' %s",
                                   v->name, sub->valuestring, why);
        if (!!host + !!pvc + !!oss != 1)
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "volume '%s' names exactly one backend: 'host', 'pvc' or "
                                   "'ossfs'",
                                   v->name);
        if (oss)
                return os_err_code(e, OS_E_NOT_SUPPORTED,
                                   "volume '%s': ossfs volumes are not supported here", v->name);
        return host ? judge_host(cfg, host, v, e) : judge_pvc(pvc, rec, v, e);
}

int os_judge_volumes(const sh_config *cfg, const cJSON *vol, os_record *rec, sh_volume **ret,
                     size_t *ret_n, os_err *e)
{
        size_t n = (size_t)cJSON_GetArraySize(vol), i = 0, j;
        char why[256];
        sh_volume *v;
        const cJSON *o;

        *ret = NULL;
        *ret_n = 0;
        if (!vol)
                return 0;
        if (!cJSON_IsArray(vol))
                return os_err_code(e, OS_E_INVALID_REQUEST, "'volumes' is a list of volumes");
        if (n > cfg->volume_max)
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "%zu volumes: at most %llu on this host "
                                   "(SANDBOX_HOST_VOLUME_MAX)",
                                   n, (unsigned long long)cfg->volume_max);
        if (!n)
                return 0;
        v = calloc(n, sizeof(*v));
        if (!v)
                return os_err_code(e, OS_E_INTERNAL, "out of memory");
        cJSON_ArrayForEach(o, vol)
        {
                if (judge_volume(cfg, o, i, rec, &v[i], e) < 0)
                        goto fail;
                for (j = 0; j < i; j++) {
                        if (STREQ(v[j].name, v[i].name)) {
                                os_err_code(e, OS_E_INVALID_REQUEST, "volume '%s' is named twice",
                                            v[i].name);
                                goto fail;
                        }
                        if (STREQ(v[j].target, v[i].target)) {
                                os_err_code(e, OS_E_INVALID_REQUEST,
                                            "volumes '%s' and '%s' have one mountPath '%s'",
                                            v[j].name, v[i].name, v[i].target);
                                goto fail;
                        }
                }
                i++;
        }
        /* What the sandbox layer will check again: a rule broken here is a bug of this file. */
        if (sh_volumes_check(v, n, cfg->volume_max, why, sizeof(why)) < 0) {
                os_err_code(e, OS_E_INTERNAL, "%s", why);
                goto fail;
        }
        *ret = v;
        *ret_n = n;
        return 0;
fail:
        free(v);
        return -1;
}
