/* test_image_store.c: the image store's and registry client's pure parts (src/images/store.c,
 * registry.c): paths by digest (never a path from anything else), the record written and read
 * back, hostile records refused, the eviction choice (least recently used, never one in use,
 * only above the bound), the endpoints (mirrors first, plain http only for listed hosts), the
 * registry's error body, which answers are retried. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/images/registry.h"
#include "../../src/images/store.h"
#include "unit.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"

START_TEST(test_paths_are_made_only_from_valid_digests)
{
        char b[128];

        ck_assert_int_eq(sh_store_blob_path(D1, b, sizeof(b)), 0);
        ck_assert_str_eq(
                b, "blobs/sha256/1111111111111111111111111111111111111111111111111111111111111111");
        ck_assert_int_eq(sh_store_layer_path(D2, b, sizeof(b)), 0);
        ck_assert_str_eq(
                b,
                "layers/sha256/2222222222222222222222222222222222222222222222222222222222222222");
        ck_assert_int_eq(sh_store_blob_path("sha256:../../etc/passwd", b, sizeof(b)), -EINVAL);
        ck_assert_int_eq(sh_store_layer_path("sha512:11", b, sizeof(b)), -EINVAL);
        ck_assert_int_eq(sh_store_layer_path(D1, b, 20), -ENOBUFS);
}
END_TEST

START_TEST(test_a_record_reads_back_as_written)
{
        char *layers[] = {D1, D2}, *env[] = {"PATH=/bin", "LANG=C.UTF-8"};
        sh_store_record r = {.name = "127.0.0.1:5000/test/busybox:1",
                             .layers = layers,
                             .n_layers = 2,
                             .env = env,
                             .n_env = 2,
                             .workdir = "/app",
                             .size = 12345,
                             .last_used = 1700000000000ull};
        sh_store_record back;
        char *text;

        strcpy(r.digest, D1);
        strcpy(r.config_digest, D2);
        text = sh_store_record_json(&r);
        ck_assert_ptr_nonnull(text);
        ck_assert_int_eq(sh_store_record_parse(text, strlen(text), &back), 0);
        ck_assert_str_eq(back.name, r.name);
        ck_assert_str_eq(back.digest, D1);
        ck_assert_str_eq(back.config_digest, D2);
        ck_assert_uint_eq(back.n_layers, 2);
        ck_assert_str_eq(back.layers[1], D2);
        ck_assert_uint_eq(back.n_env, 2);
        ck_assert_str_eq(back.env[1], "LANG=C.UTF-8");
        ck_assert_str_eq(back.workdir, "/app");
        ck_assert_uint_eq(back.size, 12345);
        ck_assert_uint_eq(back.last_used, 1700000000000ull);
        sh_store_record_done(&back);
        free(text);
}
END_TEST

START_TEST(test_a_hostile_record_is_refused)
{
        static const char *bad[] = {
                "",
                "not json",
                "{}",
                /* a layer that is not a digest: it would become a path */
                "{\"name\":\"x\",\"digest\":\"" D1 "\",\"config\":\"" D2 "\",\"size\":1,"
                "\"lastUsed\":1,\"layers\":[\"sha256:../../x\"],\"env\":[]}",
                /* an env entry without '=' */
                "{\"name\":\"x\",\"digest\":\"" D1 "\",\"config\":\"" D2 "\",\"size\":1,"
                "\"lastUsed\":1,\"layers\":[],\"env\":[\"PATH\"]}",
                /* a relative workdir */
                "{\"name\":\"x\",\"digest\":\"" D1 "\",\"config\":\"" D2 "\",\"size\":1,"
                "\"lastUsed\":1,\"layers\":[],\"env\":[],\"workdir\":\"app\"}",
                /* a negative size */
                "{\"name\":\"x\",\"digest\":\"" D1 "\",\"config\":\"" D2 "\",\"size\":-1,"
                "\"lastUsed\":1,\"layers\":[],\"env\":[]}",
                /* no layers array */
                "{\"name\":\"x\",\"digest\":\"" D1 "\",\"config\":\"" D2 "\",\"size\":1,"
                "\"lastUsed\":1,\"env\":[]}",
        };
        sh_store_record r;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(sh_store_record_parse(bad[i], strlen(bad[i]), &r) == -EINVAL,
                              "accepted: %s", bad[i]);
}
END_TEST

START_TEST(test_eviction_picks_the_least_recently_used_unused_image_above_the_bound)
{
        sh_store_lru_entry e[] = {
                {.size = 100, .last_used = 10, .in_use = true}, /* oldest, but in use */
                {.size = 100, .last_used = 20},
                {.size = 100, .last_used = 30},
        };

        /* the unused ones are 200 bytes: under 300 nothing goes */
        ck_assert_uint_eq(sh_store_lru_pick(e, 3, 300), 3);
        ck_assert_uint_eq(sh_store_lru_pick(e, 3, 200), 3);
        /* above: the oldest unused one */
        ck_assert_uint_eq(sh_store_lru_pick(e, 3, 199), 1);
        /* a bound of 0 keeps none unused */
        ck_assert_uint_eq(sh_store_lru_pick(e, 3, 0), 1);
}
END_TEST

START_TEST(test_an_image_in_use_is_never_evicted)
{
        sh_store_lru_entry e[] = {
                {.size = 1000, .last_used = 1, .in_use = true},
                {.size = 1000, .last_used = 2, .in_use = true},
        };

        ck_assert_uint_eq(sh_store_lru_pick(e, 2, 0), 2);
}
END_TEST

START_TEST(test_mirrors_come_first_then_the_registry)
{
        char **v = sh_reg_endpoints("docker.io", "registry-1.docker.io",
                                    "ghcr.io=https://g.example, docker.io=https://m1.example/,"
                                    "docker.io=http://m2.local:5000",
                                    NULL);

        ck_assert_ptr_nonnull(v);
        ck_assert_str_eq(v[0], "https://m1.example");
        ck_assert_str_eq(v[1], "http://m2.local:5000");
        ck_assert_str_eq(v[2], "https://registry-1.docker.io");
        ck_assert_ptr_null(v[3]);
        sh_strv_free(v);
}
END_TEST

START_TEST(test_a_registry_is_reached_over_plain_http_only_when_listed)
{
        char **v = sh_reg_endpoints("127.0.0.1:5000", "127.0.0.1:5000", NULL,
                                    "10.0.0.1,127.0.0.1:5000");

        ck_assert_str_eq(v[0], "http://127.0.0.1:5000");
        sh_strv_free(v);
        v = sh_reg_endpoints("127.0.0.1:5001", "127.0.0.1:5001", NULL, "127.0.0.1:5000");
        ck_assert_str_eq(v[0], "https://127.0.0.1:5001");
        sh_strv_free(v);
        /* a host without a port lists every port */
        v = sh_reg_endpoints("reg.local:8080", "reg.local:8080", "", "REG.local");
        ck_assert_str_eq(v[0], "http://reg.local:8080");
        sh_strv_free(v);
        v = sh_reg_endpoints("ghcr.io", "ghcr.io", NULL, NULL);
        ck_assert_str_eq(v[0], "https://ghcr.io");
        ck_assert_ptr_null(v[1]);
        sh_strv_free(v);
}
END_TEST

START_TEST(test_the_registry_error_body_is_quoted_printable_and_bounded)
{
        const char *body = "{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\",\"message\":\"manifest "
                           "unknown\\n\\u001b[31m\"}]}";
        char b[64];

        sh_reg_error_text(body, strlen(body), b, sizeof(b));
        ck_assert_str_eq(b, "MANIFEST_UNKNOWN: manifest unknown??[31m");
        sh_reg_error_text("<html>", 6, b, sizeof(b));
        ck_assert_str_eq(b, "");
        sh_reg_error_text(NULL, 0, b, sizeof(b));
        ck_assert_str_eq(b, "");
        sh_reg_error_text(body, strlen(body), b, 10);
        ck_assert_uint_eq(strlen(b), 9);
}
END_TEST

START_TEST(test_busy_and_failed_answers_are_retried_refusals_are_not)
{
        ck_assert(sh_reg_retryable(0));
        ck_assert(sh_reg_retryable(429));
        ck_assert(sh_reg_retryable(500));
        ck_assert(sh_reg_retryable(503));
        ck_assert(sh_reg_retryable(408));
        ck_assert(!sh_reg_retryable(401));
        ck_assert(!sh_reg_retryable(403));
        ck_assert(!sh_reg_retryable(404));
        ck_assert(!sh_reg_retryable(400));
}
END_TEST

static Suite *store_suite(void)
{
        Suite *s = suite_create("image_store");
        TCase *tc = tcase_create("pure");

        tcase_add_test(tc, test_paths_are_made_only_from_valid_digests);
        tcase_add_test(tc, test_a_record_reads_back_as_written);
        tcase_add_test(tc, test_a_hostile_record_is_refused);
        tcase_add_test(tc,
                       test_eviction_picks_the_least_recently_used_unused_image_above_the_bound);
        tcase_add_test(tc, test_an_image_in_use_is_never_evicted);
        tcase_add_test(tc, test_mirrors_come_first_then_the_registry);
        tcase_add_test(tc, test_a_registry_is_reached_over_plain_http_only_when_listed);
        tcase_add_test(tc, test_the_registry_error_body_is_quoted_printable_and_bounded);
        tcase_add_test(tc, test_busy_and_failed_answers_are_retried_refusals_are_not);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(store_suite());
}
