/* test_image_oci.c: manifests, indexes and image configs (images/oci.c): each kind of document
 * by its Content-Type, its mediaType and its shape; schema 1 and what is not an image refused
 * by name; the bounds; the platform chosen from an index; the image config's checks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/oci.h"
#include "unit.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

#define OCI_MANIFEST    "application/vnd.oci.image.manifest.v1+json"
#define OCI_INDEX       "application/vnd.oci.image.index.v1+json"
#define DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define DOCKER_LIST     "application/vnd.docker.distribution.manifest.list.v2+json"
#define OCI_CONFIG      "application/vnd.oci.image.config.v1+json"
#define DOCKER_CONFIG   "application/vnd.docker.container.image.v1+json"
#define OCI_LAYER_GZ    "application/vnd.oci.image.layer.v1.tar+gzip"
#define DOCKER_LAYER    "application/vnd.docker.image.rootfs.diff.tar.gzip"

static char reason[512];

/* A manifest of mediaType mt (NULL: none), config type ct, the layers' types in layers. */
static char *manifest(const char *mt, const char *ct, const char *const *layers, size_t n)
{
        size_t cap = 512 + n * 160, len;
        char *s = malloc(cap);

        ck_assert_ptr_nonnull(s);
        len = (size_t)snprintf(s, cap,
                               "{\"schemaVersion\":2,%s%s%s\"config\":{\"mediaType\":\"%s\","
                               "\"digest\":\"" D1 "\",\"size\":1234},\"layers\":[",
                               mt ? "\"mediaType\":\"" : "", mt ? mt : "", mt ? "\"," : "", ct);
        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(s + len, cap - len,
                                        "%s{\"mediaType\":\"%s\",\"digest\":\"" D2
                                        "\",\"size\":%zu}",
                                        i ? "," : "", layers[i], i + 10);
        snprintf(s + len, cap - len, "]}");
        return s;
}

static int parse(const char *ctype, const char *body, sh_oci_doc *d)
{
        reason[0] = '\0';
        return sh_oci_doc_parse(ctype, body, strlen(body), d, reason, sizeof(reason));
}

static void assert_refused(const char *ctype, const char *body, const char *part)
{
        sh_oci_doc d;

        ck_assert_int_eq(parse(ctype, body, &d), -EINVAL);
        ck_assert_msg(strstr(reason, part), "reason \"%s\" lacks \"%s\"", reason, part);
        ck_assert(d.items == NULL && d.n_items == 0 && d.config.media_type == NULL);
}

START_TEST(test_an_oci_manifest_gives_its_config_and_layers_lowest_first)
{
        static const char *const layers[] = {OCI_LAYER_GZ, "application/vnd.oci.image.layer.v1.tar",
                                             "application/vnd.oci.image.layer.v1.tar+zstd"};
        char *body = manifest(OCI_MANIFEST, OCI_CONFIG, layers, 3);
        sh_oci_doc d;

        ck_assert_int_eq(parse(OCI_MANIFEST, body, &d), 0);
        ck_assert_int_eq(d.kind, SH_OCI_MANIFEST);
        ck_assert_str_eq(d.config.media_type, OCI_CONFIG);
        ck_assert_str_eq(d.config.digest, D1);
        ck_assert_uint_eq(d.config.size, 1234);
        ck_assert_uint_eq(d.n_items, 3);
        for (size_t i = 0; i < 3; i++) {
                ck_assert_str_eq(d.items[i].media_type, layers[i]);
                ck_assert_str_eq(d.items[i].digest, D2);
                ck_assert_uint_eq(d.items[i].size, i + 10);
                ck_assert_ptr_null(d.items[i].os);
        }
        sh_oci_doc_done(&d);
        free(body);
}
END_TEST

START_TEST(test_a_docker_schema2_manifest_is_a_manifest)
{
        static const char *const layers[] = {
                DOCKER_LAYER, "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"};
        char *body = manifest(DOCKER_MANIFEST, DOCKER_CONFIG, layers, 2);
        sh_oci_doc d;

        ck_assert_int_eq(parse(DOCKER_MANIFEST "; charset=utf-8", body, &d), 0);
        ck_assert_int_eq(d.kind, SH_OCI_MANIFEST);
        ck_assert_uint_eq(d.n_items, 2);
        sh_oci_doc_done(&d);
        free(body);
}
END_TEST

START_TEST(test_nondistributable_layers_are_layers)
{
        static const char *const layers[] = {
                "application/vnd.oci.image.layer.nondistributable.v1.tar",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd"};
        char *body = manifest(OCI_MANIFEST, OCI_CONFIG, layers, 3);
        sh_oci_doc d;

        ck_assert_int_eq(parse(NULL, body, &d), 0);
        sh_oci_doc_done(&d);
        free(body);
}
END_TEST

START_TEST(test_without_content_type_the_body_media_type_decides)
{
        char *body =
                manifest(DOCKER_MANIFEST, DOCKER_CONFIG, (const char *const[]){DOCKER_LAYER}, 1);
        sh_oci_doc d;

        ck_assert_int_eq(parse(NULL, body, &d), 0);
        ck_assert_int_eq(d.kind, SH_OCI_MANIFEST);
        sh_oci_doc_done(&d);
        /* a generic Content-Type says nothing either */
        ck_assert_int_eq(parse("application/json", body, &d), 0);
        sh_oci_doc_done(&d);
        free(body);
}
END_TEST

START_TEST(test_without_content_type_or_media_type_the_shape_decides)
{
        char *body = manifest(NULL, OCI_CONFIG, (const char *const[]){OCI_LAYER_GZ}, 1);
        sh_oci_doc d;

        ck_assert_int_eq(parse(NULL, body, &d), 0);
        ck_assert_int_eq(d.kind, SH_OCI_MANIFEST);
        sh_oci_doc_done(&d);
        free(body);
        ck_assert_int_eq(parse(NULL, "{\"schemaVersion\":2,\"manifests\":[]}", &d), 0);
        ck_assert_int_eq(d.kind, SH_OCI_INDEX);
        sh_oci_doc_done(&d);
}
END_TEST

START_TEST(test_a_media_type_other_than_the_content_type_is_refused)
{
        char *body = manifest(OCI_MANIFEST, OCI_CONFIG, (const char *const[]){OCI_LAYER_GZ}, 1);

        assert_refused(DOCKER_MANIFEST, body, "served as");
        free(body);
}
END_TEST

static const char index_body[] =
        "{\"schemaVersion\":2,\"mediaType\":\"" OCI_INDEX "\",\"manifests\":["
        "{\"mediaType\":\"" OCI_MANIFEST "\",\"digest\":\"" D1 "\",\"size\":10,"
        "\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}},"
        "{\"mediaType\":\"" OCI_MANIFEST "\",\"digest\":\"" D2 "\",\"size\":11,"
        "\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\",\"variant\":\"v8\"}},"
        "{\"mediaType\":\"" OCI_MANIFEST "\",\"digest\":\"" D3 "\",\"size\":12,"
        "\"platform\":{\"os\":\"linux\",\"architecture\":\"arm\",\"variant\":\"v6\"}},"
        "{\"mediaType\":\"" OCI_MANIFEST "\",\"digest\":\"" D3 "\",\"size\":13,"
        "\"platform\":{\"os\":\"unknown\",\"architecture\":\"unknown\"}}]}";

START_TEST(test_an_oci_index_gives_its_entries_and_platforms)
{
        sh_oci_doc d;

        ck_assert_int_eq(parse(OCI_INDEX, index_body, &d), 0);
        ck_assert_int_eq(d.kind, SH_OCI_INDEX);
        ck_assert_uint_eq(d.n_items, 4);
        ck_assert_str_eq(d.items[1].digest, D2);
        ck_assert_str_eq(d.items[1].os, "linux");
        ck_assert_str_eq(d.items[1].arch, "arm64");
        ck_assert_str_eq(d.items[1].variant, "v8");
        ck_assert_ptr_null(d.items[0].variant);
        ck_assert_ptr_null(d.config.media_type);
        sh_oci_doc_done(&d);
}
END_TEST

START_TEST(test_a_docker_manifest_list_is_an_index)
{
        const char body[] =
                "{\"schemaVersion\":2,\"mediaType\":\"" DOCKER_LIST "\",\"manifests\":["
                "{\"mediaType\":\"" DOCKER_MANIFEST "\",\"digest\":\"" D1 "\",\"size\":10,"
                "\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}";
        sh_oci_doc d;

        ck_assert_int_eq(parse(DOCKER_LIST, body, &d), 0);
        ck_assert_int_eq(d.kind, SH_OCI_INDEX);
        ck_assert_uint_eq(d.n_items, 1);
        sh_oci_doc_done(&d);
}
END_TEST

START_TEST(test_schema1_is_refused_by_name)
{
        assert_refused("application/vnd.docker.distribution.manifest.v1+prettyjws",
                       "{\"schemaVersion\":1}", "schema 1");
        assert_refused("application/vnd.docker.distribution.manifest.v1+json",
                       "{\"schemaVersion\":1}", "schema 1");
        assert_refused(NULL, "{\"schemaVersion\":1,\"name\":\"x\",\"fsLayers\":[]}",
                       "application/vnd.docker.distribution.manifest.v1+json");
}
END_TEST

START_TEST(test_a_layer_that_is_not_a_tar_is_refused_naming_its_type)
{
        char *body =
                manifest(OCI_MANIFEST, OCI_CONFIG,
                         (const char *const[]){OCI_LAYER_GZ, "application/vnd.in-toto+json"}, 2);

        assert_refused(NULL, body, "layer 1 has the media type \"application/vnd.in-toto+json\"");
        free(body);
}
END_TEST

START_TEST(test_a_manifest_whose_config_is_not_an_image_config_is_refused)
{
        char *body = manifest(OCI_MANIFEST, "application/vnd.cncf.helm.config.v1+json",
                              (const char *const[]){OCI_LAYER_GZ}, 1);

        assert_refused(NULL, body, "not a container image");
        free(body);
}
END_TEST

START_TEST(test_a_document_that_is_not_a_manifest_is_refused)
{
        assert_refused("application/vnd.oci.image.layer.v1.tar", "{}", "not an image manifest");
        assert_refused(NULL, "{\"schemaVersion\":2}", "not an image manifest");
        assert_refused(NULL, "[]", "not a JSON object");
        assert_refused(NULL, "{\"schemaVersion\":2,", "not valid JSON");
}
END_TEST

START_TEST(test_a_schema_version_other_than_2_is_refused)
{
        assert_refused(OCI_INDEX, "{\"schemaVersion\":3,\"manifests\":[]}", "schemaVersion");
        assert_refused(OCI_INDEX, "{\"manifests\":[]}", "schemaVersion");
}
END_TEST

START_TEST(test_more_than_128_layers_are_refused)
{
        const char *layers[129];
        char *body;
        sh_oci_doc d;

        for (size_t i = 0; i < 129; i++)
                layers[i] = OCI_LAYER_GZ;
        body = manifest(OCI_MANIFEST, OCI_CONFIG, layers, 128);
        ck_assert_int_eq(parse(NULL, body, &d), 0);
        ck_assert_uint_eq(d.n_items, 128);
        sh_oci_doc_done(&d);
        free(body);
        body = manifest(OCI_MANIFEST, OCI_CONFIG, layers, 129);
        assert_refused(NULL, body, "129 layers, more than 128");
        free(body);
}
END_TEST

START_TEST(test_more_than_1024_index_entries_are_refused)
{
        const char entry[] =
                "{\"mediaType\":\"" OCI_MANIFEST "\",\"digest\":\"" D1 "\",\"size\":1},";
        size_t cap = 64 + 1025 * sizeof(entry), len = 0;
        char *body = malloc(cap);

        ck_assert_ptr_nonnull(body);
        len += (size_t)snprintf(body, cap, "{\"schemaVersion\":2,\"manifests\":[");
        for (size_t i = 0; i < 1025; i++)
                len += (size_t)snprintf(body + len, cap - len, "%s", entry);
        snprintf(body + len - 1, cap - len + 1, "]}");
        assert_refused(OCI_INDEX, body, "1025 entries, more than 1024");
        free(body);
}
END_TEST

START_TEST(test_a_bad_digest_or_size_is_refused)
{
        assert_refused(OCI_INDEX,
                       "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MANIFEST
                       "\",\"digest\":\"sha256:abc\",\"size\":1}]}",
                       "index entry 0: the digest \"sha256:abc\"");
        assert_refused(OCI_INDEX,
                       "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MANIFEST
                       "\",\"size\":1}]}",
                       "(missing)");
        assert_refused(OCI_INDEX,
                       "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MANIFEST
                       "\",\"digest\":\"" D1 "\",\"size\":-1}]}",
                       "size");
        assert_refused(OCI_INDEX,
                       "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MANIFEST
                       "\",\"digest\":\"" D1 "\",\"size\":1.5}]}",
                       "size");
        assert_refused(OCI_INDEX,
                       "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MANIFEST
                       "\",\"digest\":\"" D1 "\",\"size\":18014398509481984}]}",
                       "size");
        assert_refused(OCI_INDEX,
                       "{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"" D1 "\",\"size\":1}]}",
                       "no \"mediaType\"");
}
END_TEST

START_TEST(test_a_manifest_bigger_than_4_mib_is_refused)
{
        sh_oci_doc d;

        ck_assert_int_eq(
                sh_oci_doc_parse(NULL, "{}", SH_OCI_DOC_MAX + 1, &d, reason, sizeof(reason)),
                -EINVAL);
        ck_assert_ptr_nonnull(strstr(reason, "more than"));
}
END_TEST

/* ---- platforms ---- */

static const char *pick(const char *body, const char *os, const char *arch, const char *variant)
{
        static char digest[SH_OCI_DIGEST_MAX];
        const sh_oci_descriptor *e;
        sh_oci_doc d;
        int k;

        ck_assert_int_eq(parse(NULL, body, &d), 0);
        k = sh_oci_index_pick(&d, os, arch, variant, &e, reason, sizeof(reason));
        snprintf(digest, sizeof(digest), "%s", k == 0 ? e->digest : "none");
        sh_oci_doc_done(&d);
        return digest;
}

START_TEST(test_the_index_entry_of_the_platform_is_picked)
{
        ck_assert_str_eq(pick(index_body, "linux", "amd64", NULL), D1);
        ck_assert_str_eq(pick(index_body, "linux", "arm64", "v8"), D2);
        ck_assert_str_eq(pick(index_body, "linux", "aarch64", NULL), D2);
}
END_TEST

START_TEST(test_an_arm64_entry_without_variant_serves_v8)
{
        const char body[] = "{\"schemaVersion\":2,\"manifests\":["
                            "{\"mediaType\":\"" OCI_MANIFEST "\",\"digest\":\"" D1
                            "\",\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":"
                            "\"arm64\",\"variant\":\"v9\"}},"
                            "{\"mediaType\":\"" OCI_MANIFEST "\",\"digest\":\"" D2
                            "\",\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":"
                            "\"arm64\"}}]}";

        ck_assert_str_eq(pick(body, "linux", "arm64", "v8"), D2);
}
END_TEST

START_TEST(test_an_exact_variant_is_preferred_to_none)
{
        const char body[] = "{\"schemaVersion\":2,\"manifests\":["
                            "{\"mediaType\":\"" OCI_MANIFEST "\",\"digest\":\"" D1
                            "\",\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":"
                            "\"arm\"}},"
                            "{\"mediaType\":\"" OCI_MANIFEST "\",\"digest\":\"" D2
                            "\",\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":"
                            "\"arm\",\"variant\":\"v7\"}}]}";

        ck_assert_str_eq(pick(body, "linux", "arm", "v7"), D2);
}
END_TEST

START_TEST(test_an_arm_host_runs_an_older_arm_variant)
{
        ck_assert_str_eq(pick(index_body, "linux", "arm", "v7"), D3);
        ck_assert_str_eq(pick(index_body, "linux", "arm", "v5"), "none");
}
END_TEST

START_TEST(test_no_entry_for_the_platform_lists_those_there_are)
{
        ck_assert_str_eq(pick(index_body, "linux", "s390x", NULL), "none");
        ck_assert_str_eq(reason, "the image has no manifest for linux/s390x; it has: linux/amd64, "
                                 "linux/arm64/v8, linux/arm/v6, unknown/unknown");
        ck_assert_str_eq(pick(index_body, "windows", "amd64", NULL), "none");
}
END_TEST

START_TEST(test_an_entry_that_is_not_an_image_manifest_is_never_picked)
{
        const char body[] = "{\"schemaVersion\":2,\"manifests\":["
                            "{\"mediaType\":\"" OCI_INDEX "\",\"digest\":\"" D1
                            "\",\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":"
                            "\"amd64\"}}]}";

        ck_assert_str_eq(pick(body, "linux", "amd64", NULL), "none");
        ck_assert_ptr_nonnull(strstr(reason, "no platform at all"));
}
END_TEST

START_TEST(test_a_long_platform_list_is_cut_within_the_reason)
{
        const sh_oci_descriptor *e;
        char small[48];
        sh_oci_doc d;

        ck_assert_int_eq(parse(NULL, index_body, &d), 0);
        ck_assert_int_eq(sh_oci_index_pick(&d, "linux", "s390x", NULL, &e, small, sizeof(small)),
                         -ENOENT);
        ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
        ck_assert_str_eq(small + sizeof(small) - 4, "...");
        sh_oci_doc_done(&d);
}
END_TEST

START_TEST(test_the_host_platform_is_linux_and_an_oci_architecture)
{
        const char *os, *arch, *variant;

        sh_oci_host_platform(&os, &arch, &variant);
        ck_assert_str_eq(os, "linux");
#if defined(__x86_64__)
        ck_assert_str_eq(arch, "amd64");
        ck_assert_ptr_null(variant);
#elif defined(__aarch64__)
        ck_assert_str_eq(arch, "arm64");
        ck_assert_str_eq(variant, "v8");
#endif
}
END_TEST

/* ---- image config ---- */

static int config(const char *body, sh_oci_config *c)
{
        reason[0] = '\0';
        return sh_oci_config_parse(body, strlen(body), c, reason, sizeof(reason));
}

static void assert_config_refused(const char *body, const char *part)
{
        sh_oci_config c;

        ck_assert_int_eq(config(body, &c), -EINVAL);
        ck_assert_msg(strstr(reason, part), "reason \"%s\" lacks \"%s\"", reason, part);
        ck_assert(!c.env && !c.workdir && !c.user && !c.diff_ids && !c.os && !c.arch);
}

#define ROOTFS "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" D1 "\",\"" D2 "\"]}"

START_TEST(test_an_image_config_gives_env_workdir_user_and_diff_ids)
{
        sh_oci_config c;

        ck_assert_int_eq(config("{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{"
                                "\"Env\":[\"PATH=/usr/bin:/bin\",\"LANG=C.UTF-8\",\"EMPTY=\"],"
                                "\"WorkingDir\":\"/app\",\"User\":\"1000:1000\"}," ROOTFS "}",
                                &c),
                         0);
        ck_assert_uint_eq(c.n_env, 3);
        ck_assert_str_eq(c.env[0], "PATH=/usr/bin:/bin");
        ck_assert_str_eq(c.env[1], "LANG=C.UTF-8");
        ck_assert_str_eq(c.env[2], "EMPTY=");
        ck_assert_ptr_null(c.env[3]);
        ck_assert_str_eq(c.workdir, "/app");
        ck_assert_str_eq(c.user, "1000:1000");
        ck_assert_uint_eq(c.n_diff_ids, 2);
        ck_assert_str_eq(c.diff_ids[0], D1);
        ck_assert_str_eq(c.diff_ids[1], D2);
        ck_assert_str_eq(c.os, "linux");
        ck_assert_str_eq(c.arch, "amd64");
        sh_oci_config_done(&c);
}
END_TEST

START_TEST(test_an_image_config_without_config_has_no_env_workdir_or_user)
{
        sh_oci_config c;

        ck_assert_int_eq(config("{" ROOTFS "}", &c), 0);
        ck_assert_ptr_null(c.env);
        ck_assert_uint_eq(c.n_env, 0);
        ck_assert_ptr_null(c.workdir);
        ck_assert_ptr_null(c.user);
        sh_oci_config_done(&c);
        ck_assert_int_eq(config("{\"config\":{\"WorkingDir\":\"\",\"User\":\"\"}," ROOTFS "}", &c),
                         0);
        ck_assert_ptr_null(c.workdir);
        ck_assert_ptr_null(c.user);
        sh_oci_config_done(&c);
}
END_TEST

START_TEST(test_an_env_entry_without_equals_or_name_is_refused)
{
        assert_config_refused("{\"config\":{\"Env\":[\"A=1\",\"NOEQUALS\"]}," ROOTFS "}",
                              "Env[1] \"NOEQUALS\" has no '='");
        assert_config_refused("{\"config\":{\"Env\":[\"=1\"]}," ROOTFS "}", "empty name");
        assert_config_refused("{\"config\":{\"Env\":[1]}," ROOTFS "}", "Env[0] is not a string");
        assert_config_refused("{\"config\":{\"Env\":\"A=1\"}," ROOTFS "}", "not an array");
}
END_TEST

START_TEST(test_an_env_entry_with_a_nul_is_refused)
{
        assert_config_refused("{\"config\":{\"Env\":[\"A=1\\u0000B=2\"]}," ROOTFS "}", "\\u0000");
}
END_TEST

START_TEST(test_a_relative_working_dir_is_refused)
{
        assert_config_refused("{\"config\":{\"WorkingDir\":\"app\"}," ROOTFS "}",
                              "WorkingDir \"app\" is not an absolute path");
}
END_TEST

START_TEST(test_a_config_without_layers_rootfs_or_with_bad_diff_ids_is_refused)
{
        assert_config_refused("{}", "rootfs");
        assert_config_refused("{\"rootfs\":{\"type\":\"other\"}}", "rootfs");
        assert_config_refused("{\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:x\"]}}",
                              "diff_ids[0] \"sha256:x\" is not sha256");
        assert_config_refused("[1]", "not a JSON object");
}
END_TEST

static Suite *image_oci_suite(void)
{
        Suite *s = suite_create("image_oci");
        TCase *m = tcase_create("manifest"), *p = tcase_create("platform"),
              *c = tcase_create("config");

        tcase_add_test(m, test_an_oci_manifest_gives_its_config_and_layers_lowest_first);
        tcase_add_test(m, test_a_docker_schema2_manifest_is_a_manifest);
        tcase_add_test(m, test_nondistributable_layers_are_layers);
        tcase_add_test(m, test_without_content_type_the_body_media_type_decides);
        tcase_add_test(m, test_without_content_type_or_media_type_the_shape_decides);
        tcase_add_test(m, test_a_media_type_other_than_the_content_type_is_refused);
        tcase_add_test(m, test_an_oci_index_gives_its_entries_and_platforms);
        tcase_add_test(m, test_a_docker_manifest_list_is_an_index);
        tcase_add_test(m, test_schema1_is_refused_by_name);
        tcase_add_test(m, test_a_layer_that_is_not_a_tar_is_refused_naming_its_type);
        tcase_add_test(m, test_a_manifest_whose_config_is_not_an_image_config_is_refused);
        tcase_add_test(m, test_a_document_that_is_not_a_manifest_is_refused);
        tcase_add_test(m, test_a_schema_version_other_than_2_is_refused);
        tcase_add_test(m, test_more_than_128_layers_are_refused);
        tcase_add_test(m, test_more_than_1024_index_entries_are_refused);
        tcase_add_test(m, test_a_bad_digest_or_size_is_refused);
        tcase_add_test(m, test_a_manifest_bigger_than_4_mib_is_refused);
        suite_add_tcase(s, m);
        tcase_add_test(p, test_the_index_entry_of_the_platform_is_picked);
        tcase_add_test(p, test_an_arm64_entry_without_variant_serves_v8);
        tcase_add_test(p, test_an_exact_variant_is_preferred_to_none);
        tcase_add_test(p, test_an_arm_host_runs_an_older_arm_variant);
        tcase_add_test(p, test_no_entry_for_the_platform_lists_those_there_are);
        tcase_add_test(p, test_an_entry_that_is_not_an_image_manifest_is_never_picked);
        tcase_add_test(p, test_a_long_platform_list_is_cut_within_the_reason);
        tcase_add_test(p, test_the_host_platform_is_linux_and_an_oci_architecture);
        suite_add_tcase(s, p);
        tcase_add_test(c, test_an_image_config_gives_env_workdir_user_and_diff_ids);
        tcase_add_test(c, test_an_image_config_without_config_has_no_env_workdir_or_user);
        tcase_add_test(c, test_an_env_entry_without_equals_or_name_is_refused);
        tcase_add_test(c, test_an_env_entry_with_a_nul_is_refused);
        tcase_add_test(c, test_a_relative_working_dir_is_refused);
        tcase_add_test(c, test_a_config_without_layers_rootfs_or_with_bad_diff_ids_is_refused);
        suite_add_tcase(s, c);
        return s;
}

int main(void)
{
        return ut_run(image_oci_suite());
}
