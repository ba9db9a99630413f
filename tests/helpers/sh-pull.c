/* sh-pull.c: the image store driven alone, for the image tests (tests/images/test_pull.py):
 *   sh-pull STORE_DIR [REF...]
 * opens the store in STORE_DIR with the settings of the environment (SANDBOX_HOST_*), gets
 * every REF at once on its own loop (the same REF twice: two waiters of one pull), prints one
 * JSON line per answer ({"ref", "ok", "kind", "error", "name", "digest", "layers", "env",
 * "workdir", "size"}) and, last, {"ready": bool, "cached": [names]} once every answer is in.
 * SH_PULL_AUTH="user:password" gives every get these credentials (the /v1 image.auth);
 * SH_PULL_CANCEL=N cancels the N-th get (from 0) right after it starts; SH_PULL_INSTANCE names
 * its cgroup subtree. Exit 0 when every get
 * answered (whatever the answer), 1 on a setup failure. Root: the unpacker needs cgroups. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sh/cgroup.h"
#include "sh/config.h"
#include "sh/images.h"
#include "sh/log.h"
#include "sh/loop.h"

extern char **environ;

typedef struct get {
        const char *ref;
        sh_image_pull *pull;
} get;

static sh_loop *loop;
static int pending;

static void on_done(sh_image *img, const sh_error *err, void *data)
{
        get *g = data;
        cJSON *j = cJSON_CreateObject(), *a;
        char *s;

        g->pull = NULL;
        cJSON_AddStringToObject(j, "ref", g->ref);
        cJSON_AddBoolToObject(j, "ok", img != NULL);
        if (err) {
                cJSON_AddStringToObject(j, "kind", sh_error_kind_name(err->kind));
                cJSON_AddStringToObject(j, "error", err->msg ? err->msg : "");
        }
        if (img) {
                cJSON_AddStringToObject(j, "name", sh_image_name(img));
                cJSON_AddStringToObject(j, "digest", sh_image_digest(img));
                a = cJSON_AddArrayToObject(j, "layers");
                for (size_t i = 0; i < sh_image_n_layers(img); i++)
                        cJSON_AddItemToArray(a, cJSON_CreateString(sh_image_layer_dir(img, i)));
                a = cJSON_AddArrayToObject(j, "env");
                for (size_t i = 0; i < sh_image_n_env(img); i++)
                        cJSON_AddItemToArray(a, cJSON_CreateString(sh_image_env(img)[i]));
                if (sh_image_workdir(img))
                        cJSON_AddStringToObject(j, "workdir", sh_image_workdir(img));
                cJSON_AddNumberToObject(j, "size", (double)sh_image_size(img));
                sh_image_unref(img);
        }
        s = cJSON_PrintUnformatted(j);
        printf("%s\n", s);
        fflush(stdout);
        free(s);
        cJSON_Delete(j);
        if (--pending == 0)
                sh_loop_stop(loop);
}

static void on_progress(const sh_image_progress *p, void *data)
{
        get *g = data;

        for (size_t i = 0; i < p->n_layers; i++)
                fprintf(stderr, "progress %s %s layer %zu %llu/%llu\n", g->ref, p->phase, i,
                        (unsigned long long)p->layers[i].done,
                        (unsigned long long)p->layers[i].size);
}

static void on_ready_poll(sh_loop *l, sh_timer *t, void *data)
{
        sh_images *s = data;

        if (sh_images_ready(s))
                sh_loop_stop(l);
        else if (!sh_loop_add_timer(l, 50, on_ready_poll, s))
                sh_loop_stop(l);
}

int main(int argc, char **argv)
{
        static char *args[] = {"sh-pull", NULL};
        sh_config cfg;
        char *msg = NULL, instance[64];
        sh_cgroup_root *cgroot = NULL;
        sh_cgroup *cg = NULL;
        sh_images *s = NULL;
        sh_error *err = NULL;
        const char *cancel = getenv("SH_PULL_CANCEL"), *authenv = getenv("SH_PULL_AUTH");
        sh_registry_auth auth = {0};
        char *user = NULL;
        get *gets;
        int n = argc - 2, rc = 1;

        if (argc < 2) {
                fprintf(stderr, "usage: sh-pull STORE_DIR [REF...]\n");
                return 2;
        }
        if (sh_config_parse(&cfg, 1, args, environ, &msg) != SH_CONFIG_OK) {
                fprintf(stderr, "sh-pull: %s\n", msg ? msg : "bad settings");
                return 2;
        }
        if (authenv && strchr(authenv, ':')) {
                user = strdup(authenv);
                *strchr(user, ':') = '\0';
                auth.username = user;
                auth.password = user + strlen(user) + 1;
        }
        gets = calloc((size_t)(n > 0 ? n : 1), sizeof(*gets));
        /* SH_PULL_INSTANCE: the cgroup subtree's name; a run of the same name removes what a
         * killed one left */
        if (getenv("SH_PULL_INSTANCE"))
                snprintf(instance, sizeof(instance), "%s", getenv("SH_PULL_INSTANCE"));
        else
                snprintf(instance, sizeof(instance), "sh-pull-%d", (int)getpid());
        if (!gets || sh_loop_new(&loop) < 0 || sh_cgroup_root_open(instance, &cgroot, &err) < 0 ||
            sh_cgroup_create(cgroot, NULL, "images", NULL, &cg, &err) < 0 ||
            sh_images_open(&cfg, loop, argv[1], cg, &s, &err) < 0) {
                fprintf(stderr, "sh-pull: %s\n", err && err->msg ? err->msg : "setup failed");
                goto out;
        }
        for (int i = 0; i < n; i++) {
                gets[i].ref = argv[i + 2];
                gets[i].pull = sh_images_get(s, gets[i].ref, user ? &auth : NULL, on_done,
                                             on_progress, &gets[i], &err);
                if (!gets[i].pull) {
                        printf("{\"ref\":\"%s\",\"ok\":false,\"kind\":\"%s\",\"start\":true}\n",
                               gets[i].ref, sh_error_kind_name(sh_error_kind_of(err)));
                        fprintf(stderr, "sh-pull: %s: %s\n", gets[i].ref, err ? err->msg : "");
                        sh_error_release(&err);
                        continue;
                }
                pending++;
                if (cancel && atoi(cancel) == i) {
                        sh_image_pull_cancel(gets[i].pull);
                        gets[i].pull = NULL;
                        pending--;
                        printf("{\"ref\":\"%s\",\"cancelled\":true}\n", gets[i].ref);
                }
        }
        fflush(stdout);
        if (pending)
                sh_loop_run(loop);
        if (!sh_images_ready(s) && sh_loop_add_timer(loop, 0, on_ready_poll, s))
                sh_loop_run(loop);
        printf("{\"ready\":%s}\n", sh_images_ready(s) ? "true" : "false");
        rc = 0;
out:
        sh_error_release(&err);
        sh_images_free(s);
        if (cg)
                sh_cgroup_free(cg);
        if (cgroot) {
                /* the unpacks' children are reaped by now; their cgroups go with the subtree */
                if (sh_cgroup_root_destroy(cgroot, &err) < 0) {
                        fprintf(stderr, "sh-pull: %s\n", err ? err->msg : "cgroup cleanup");
                        sh_error_release(&err);
                }
                sh_cgroup_root_free(cgroot);
        }
        if (loop)
                sh_loop_free(loop);
        free(gets);
        free(user);
        sh_config_done(&cfg);
        return rc;
}
