/* test_router.c: the transport's routing mechanics (sh_route_match, sh_method_from_string,
 * sh_surface_for) over the native surface's table (contract routes, 404 vs 405 + Allow) and
 * over tables of the shapes later surfaces use (several methods, several parameters, a free
 * tail). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/http.h"
#include "sh/native.h"
#include "unit.h"

#define RID "0123456789abcdef0123456789abcdef"

typedef struct route_case {
        const char *method;
        const char *path;
        sh_handler_fn fn;
        bool has_id;
        bool needs_sandbox;
        const sh_body_sink *body;
} route_case;

/* Every route of CONTRACT.md section 2 and its handler. */
static const route_case contract_routes[] = {
        {"POST", "/sandboxes", sh_api_create, false, false, &sh_body_buffer},
        {"DELETE", "/sandboxes/" RID, sh_api_delete, true, true, NULL},
        {"POST", "/sandboxes/" RID "/exec", sh_api_exec, true, true, &sh_body_buffer},
        {"POST", "/sandboxes/" RID "/persist", sh_api_persist, true, true, &sh_body_buffer},
        {"PUT", "/sandboxes/" RID "/file", sh_api_upload, true, true, &sh_native_upload_sink},
        {"GET", "/sandboxes/" RID "/file", sh_api_download, true, true, NULL},
        {"GET", "/sandboxes/" RID "/exists", sh_api_exists, true, true, NULL},
        {"GET", "/sandboxes/" RID "/disk-usage", sh_api_disk_usage, true, true, NULL},
        {"GET", "/sandboxes/" RID "/size", sh_api_size, true, true, NULL},
        {"POST", "/sandboxes/" RID "/mark-ready", sh_api_mark_ready, true, true, NULL},
        {"GET", "/sandboxes/" RID "/ready", sh_api_ready, true, true, NULL},
        {"GET", "/sandboxes/" RID "/walk", sh_api_walk, true, true, NULL},
        {"DELETE", "/sandboxes/" RID "/file", sh_api_delete_file, true, true, NULL},
        {"POST", "/sandboxes/" RID "/mkdir", sh_api_mkdir, true, true, &sh_body_buffer},
        {"DELETE", "/sandboxes/" RID "/dir", sh_api_delete_dir, true, true, NULL},
        {"POST", "/sandboxes/" RID "/rename", sh_api_rename, true, true, &sh_body_buffer},
        {"POST", "/tools/resolve", sh_api_tools_resolve, false, false, &sh_body_buffer},
        {"GET", "/healthz", sh_api_healthz, false, false, NULL},
        {"GET", "/readyz", sh_api_readyz, false, false, NULL},
        {"POST", "/drain", sh_api_drain, false, false, NULL},
};
#define N_ROUTES ((int)(sizeof(contract_routes) / sizeof(contract_routes[0])))

typedef struct match_result {
        const sh_route *route;
        const char *id;
        size_t id_len;
        int status;
        const char *allow;
        char allow_buf[SH_ALLOW_MAX];
        sh_route_params params;
} match_result;

static match_result match_in(const sh_route *routes, size_t n, const char *path, unsigned method)
{
        match_result m = {.route = NULL, .id = NULL, .id_len = 999, .status = -1};
        sh_error_kind kind = SH_E_INTERNAL;

        m.route = sh_route_match(routes, n, path, method, &m.params, &kind, m.allow_buf);
        if (m.route) {
                m.id = m.params.n ? m.params.p[0] : NULL;
                m.id_len = m.params.n ? m.params.len[0] : 0;
        } else {
                m.status = kind == SH_E_NO_ROUTE ? 404 : kind == SH_E_METHOD_NOT_ALLOWED ? 405 : 0;
        }
        return m;
}

static match_result do_match(const char *path, unsigned method)
{
        return match_in(sh_native_routes, sh_native_n_routes, path, method);
}

static void assert_404(const char *path, unsigned method)
{
        match_result m = do_match(path, method);

        ck_assert_msg(m.route == NULL, "'%s' (method %u) matched a route", path, method);
        ck_assert_msg(m.status == 404, "'%s' (method %u): status %d, want 404", path, method,
                      m.status);
}

static void assert_405(const char *path, unsigned method, const char *allow)
{
        match_result m = do_match(path, method);

        ck_assert_msg(m.route == NULL, "'%s' (method %u) matched a route", path, method);
        ck_assert_msg(m.status == 405, "'%s' (method %u): status %d, want 405", path, method,
                      m.status);
        ck_assert_str_eq(m.allow_buf, allow);
}

static const unsigned all_methods[] = {SH_M_GET, SH_M_HEAD,   SH_M_POST,
                                       SH_M_PUT, SH_M_DELETE, SH_M_PATCH};

/* ---- sh_method_from_string -------------------------------------------------------------- */

START_TEST(test_method_names_map_to_bits)
{
        ck_assert_uint_eq(sh_method_from_string("GET"), SH_M_GET);
        ck_assert_uint_eq(sh_method_from_string("HEAD"), SH_M_HEAD);
        ck_assert_uint_eq(sh_method_from_string("POST"), SH_M_POST);
        ck_assert_uint_eq(sh_method_from_string("PUT"), SH_M_PUT);
        ck_assert_uint_eq(sh_method_from_string("DELETE"), SH_M_DELETE);
        ck_assert_uint_eq(sh_method_from_string("PATCH"), SH_M_PATCH);
}
END_TEST

START_TEST(test_unknown_methods_are_zero)
{
        ck_assert_uint_eq(sh_method_from_string("get"), 0);
        ck_assert_uint_eq(sh_method_from_string("patch"), 0);
        ck_assert_uint_eq(sh_method_from_string("OPTIONS"), 0);
        ck_assert_uint_eq(sh_method_from_string(""), 0);
        ck_assert_uint_eq(sh_method_from_string("GETX"), 0);
        ck_assert_uint_eq(sh_method_from_string(NULL), 0);
}
END_TEST

/* ---- matching --------------------------------------------------------------------------- */

START_TEST(test_every_contract_route_matches_its_method)
{
        const route_case *rc = &contract_routes[_i];
        match_result m = do_match(rc->path, sh_method_from_string(rc->method));

        ck_assert_msg(m.route != NULL, "%s %s: no route (status %d)", rc->method, rc->path,
                      m.status);
        ck_assert_msg(m.route->fn == rc->fn, "%s %s: wrong handler", rc->method, rc->path);
        ck_assert_uint_eq(m.route->methods, sh_method_from_string(rc->method));
        ck_assert_int_eq((m.route->flags & SH_NATIVE_SANDBOX) != 0, rc->needs_sandbox);
        ck_assert_ptr_eq(m.route->body, rc->body);
        if (rc->has_id) {
                ck_assert_ptr_eq(m.id, rc->path + strlen("/sandboxes/"));
                ck_assert_uint_eq(m.id_len, strlen(RID));
        } else {
                ck_assert_ptr_null(m.id);
                ck_assert_uint_eq(m.id_len, 0);
        }
}
END_TEST

START_TEST(test_head_matches_every_get_route)
{
        const route_case *rc = &contract_routes[_i];
        match_result m;

        if (strcmp(rc->method, "GET") != 0)
                return;
        m = do_match(rc->path, SH_M_HEAD);
        ck_assert_msg(m.route != NULL, "HEAD %s: status %d", rc->path, m.status);
        ck_assert_msg(m.route->fn == rc->fn, "HEAD %s: wrong handler", rc->path);
}
END_TEST

START_TEST(test_head_on_route_without_get_is_405)
{
        assert_405("/drain", SH_M_HEAD, "POST");
        assert_405("/sandboxes/" RID "/mkdir", SH_M_HEAD, "POST");
}
END_TEST

START_TEST(test_id_segment_is_any_nonempty_segment)
{
        match_result m = do_match("/sandboxes/not-a-hex-id/exists", SH_M_GET);

        /* the router does not judge ids: the lookup answers SandboxNotFound later */
        ck_assert_ptr_nonnull(m.route);
        ck_assert_uint_eq(m.id_len, strlen("not-a-hex-id"));
        ck_assert_int_eq(memcmp(m.id, "not-a-hex-id", m.id_len), 0);
        m = do_match("/sandboxes/x", SH_M_DELETE);
        ck_assert_ptr_nonnull(m.route);
        ck_assert_uint_eq(m.id_len, 1);
}
END_TEST

START_TEST(test_unknown_paths_are_404_whatever_the_method)
{
        static const char *const paths[] = {
                "/",
                "",
                "/nope",
                "/sandboxes/",
                "/sandboxes//file",
                "/sandboxes//",
                "/sandboxes/" RID "/",
                "/sandboxes/" RID "/file/",
                "/sandboxes/" RID "/file/extra",
                "/sandboxes/" RID "/nope",
                "/sandboxes/" RID "/exec/x",
                "/sandboxes/a/b/file",
                "/sandboxes/" RID "//file",
                "//sandboxes",
                "/sandboxes//",
                "/healthz/",
                "/healthz/x",
                "/HEALTHZ",
                "/healthzz",
                "/health",
                "/tools",
                "/tools/",
                "/tools/resolve/",
                "/drain/",
                "sandboxes",
                "/sandboxesx",
                "/sandboxes/" RID "/filex",
                "/sandboxes/" RID "/fil",
        };

        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
                for (size_t k = 0; k < sizeof(all_methods) / sizeof(all_methods[0]); k++)
                        assert_404(paths[i], all_methods[k]);
                assert_404(paths[i], 0); /* unknown method */
        }
}
END_TEST

START_TEST(test_wrong_method_on_file_is_405_with_allow)
{
        assert_405("/sandboxes/" RID "/file", SH_M_POST, "GET, HEAD, PUT, DELETE");
}
END_TEST

START_TEST(test_wrong_method_allow_lists)
{
        assert_405("/sandboxes", SH_M_GET, "POST");
        assert_405("/sandboxes", SH_M_HEAD, "POST");
        assert_405("/sandboxes", SH_M_DELETE, "POST");
        assert_405("/sandboxes/" RID, SH_M_GET, "DELETE");
        assert_405("/sandboxes/" RID, SH_M_POST, "DELETE");
        assert_405("/sandboxes/" RID "/exec", SH_M_GET, "POST");
        assert_405("/sandboxes/" RID "/persist", SH_M_PUT, "POST");
        assert_405("/sandboxes/" RID "/exists", SH_M_POST, "GET, HEAD");
        assert_405("/sandboxes/" RID "/disk-usage", SH_M_DELETE, "GET, HEAD");
        assert_405("/sandboxes/" RID "/size", SH_M_PUT, "GET, HEAD");
        assert_405("/sandboxes/" RID "/mark-ready", SH_M_GET, "POST");
        assert_405("/sandboxes/" RID "/ready", SH_M_POST, "GET, HEAD");
        assert_405("/sandboxes/" RID "/walk", SH_M_POST, "GET, HEAD");
        assert_405("/sandboxes/" RID "/mkdir", SH_M_PUT, "POST");
        assert_405("/sandboxes/" RID "/dir", SH_M_GET, "DELETE");
        assert_405("/sandboxes/" RID "/rename", SH_M_GET, "POST");
        assert_405("/tools/resolve", SH_M_GET, "POST");
        assert_405("/healthz", SH_M_POST, "GET, HEAD");
        assert_405("/readyz", SH_M_DELETE, "GET, HEAD");
        assert_405("/drain", SH_M_GET, "POST");
}
END_TEST

START_TEST(test_patch_on_native_routes_is_405_with_their_allow)
{
        assert_405("/sandboxes/" RID "/file", SH_M_PATCH, "GET, HEAD, PUT, DELETE");
        assert_405("/sandboxes", SH_M_PATCH, "POST");
}
END_TEST

START_TEST(test_only_probes_carry_the_probe_flag)
{
        for (size_t i = 0; i < sh_native_n_routes; i++) {
                const sh_route *rt = &sh_native_routes[i];
                bool probe =
                        strcmp(rt->pattern, "/healthz") == 0 || strcmp(rt->pattern, "/readyz") == 0;

                ck_assert_msg(((rt->flags & SH_ROUTE_PROBE) != 0) == probe, "%s", rt->pattern);
        }
}
END_TEST

START_TEST(test_unknown_method_on_known_path_is_405)
{
        assert_405("/sandboxes/" RID "/file", 0, "GET, HEAD, PUT, DELETE");
        assert_405("/healthz", 0, "GET, HEAD");
}
END_TEST

START_TEST(test_405_decided_whatever_the_id)
{
        /* decided before any lookup: an id that names no sandbox still gets 405 */
        assert_405("/sandboxes/unknown/file", SH_M_POST, "GET, HEAD, PUT, DELETE");
}
END_TEST

START_TEST(test_every_known_path_405s_for_unserved_methods)
{
        const route_case *rc = &contract_routes[_i];

        for (size_t k = 0; k < sizeof(all_methods) / sizeof(all_methods[0]); k++) {
                unsigned m = all_methods[k];
                match_result r = do_match(rc->path, m);
                bool served = false;

                for (int j = 0; j < N_ROUTES; j++) {
                        unsigned jm = sh_method_from_string(contract_routes[j].method);

                        if (strcmp(contract_routes[j].path, rc->path) == 0 &&
                            (jm == m || (m == SH_M_HEAD && jm == SH_M_GET)))
                                served = true;
                }
                if (served) {
                        ck_assert_msg(r.route != NULL, "%s method %u: not served", rc->path, m);
                } else {
                        ck_assert_msg(r.route == NULL && r.status == 405,
                                      "%s method %u: status %d, want 405", rc->path, m, r.status);
                        ck_assert_msg(r.allow_buf[0], "%s method %u: no Allow", rc->path, m);
                }
        }
}
END_TEST

/* ---- the mechanics a second surface needs ---------------------------------------------- */

static void h_a(sh_request *r)
{
        (void)r;
}

static void h_b(sh_request *r)
{
        (void)r;
}

static const sh_route shaped[] = {
        {"/v1/sandboxes", SH_M_GET | SH_M_POST, NULL, h_a, 0},
        {"/v1/sandboxes/{}/metadata", SH_M_PATCH, NULL, h_b, 0},
        {"/v1/sandboxes/{}/proxy/44772/{*}", SH_M_GET | SH_M_POST | SH_M_DELETE, NULL, h_a, 0},
        {"/v1/snapshots/{}/of/{}", SH_M_DELETE, NULL, h_b, 0},
};

START_TEST(test_one_route_serves_several_methods)
{
        match_result m = match_in(shaped, ARRAY_SIZE(shaped), "/v1/sandboxes", SH_M_GET);

        ck_assert_ptr_eq(m.route, &shaped[0]);
        m = match_in(shaped, ARRAY_SIZE(shaped), "/v1/sandboxes", SH_M_POST);
        ck_assert_ptr_eq(m.route, &shaped[0]);
        m = match_in(shaped, ARRAY_SIZE(shaped), "/v1/sandboxes", SH_M_HEAD);
        ck_assert_ptr_eq(m.route, &shaped[0]);
        m = match_in(shaped, ARRAY_SIZE(shaped), "/v1/sandboxes", SH_M_DELETE);
        ck_assert_int_eq(m.status, 405);
        ck_assert_str_eq(m.allow_buf, "GET, HEAD, POST");
}
END_TEST

START_TEST(test_patch_routes_match_and_list_in_allow)
{
        match_result m =
                match_in(shaped, ARRAY_SIZE(shaped), "/v1/sandboxes/abc/metadata", SH_M_PATCH);

        ck_assert_ptr_eq(m.route, &shaped[1]);
        ck_assert_uint_eq(m.params.n, 1);
        ck_assert_uint_eq(m.params.len[0], 3);
        ck_assert_int_eq(memcmp(m.params.p[0], "abc", 3), 0);
        m = match_in(shaped, ARRAY_SIZE(shaped), "/v1/sandboxes/abc/metadata", SH_M_PUT);
        ck_assert_int_eq(m.status, 405);
        ck_assert_str_eq(m.allow_buf, "PATCH");
}
END_TEST

START_TEST(test_free_tail_takes_the_rest_of_the_path)
{
        static const char *const tails[] = {"", "ping", "files/a/b/c", "command/status/x/", "a//b"};

        for (size_t i = 0; i < ARRAY_SIZE(tails); i++) {
                char path[128];
                match_result m;

                snprintf(path, sizeof(path), "/v1/sandboxes/sb1/proxy/44772/%s", tails[i]);
                m = match_in(shaped, ARRAY_SIZE(shaped), path, SH_M_POST);
                ck_assert_msg(m.route == &shaped[2], "%s: no match", path);
                ck_assert_uint_eq(m.params.n, 2);
                ck_assert_uint_eq(m.params.len[0], 3);
                ck_assert_int_eq(memcmp(m.params.p[0], "sb1", 3), 0);
                ck_assert_uint_eq(m.params.len[1], strlen(tails[i]));
                ck_assert_int_eq(memcmp(m.params.p[1], tails[i], m.params.len[1]), 0);
        }
        /* the literal part still has to match in full */
        ck_assert_int_eq(
                match_in(shaped, ARRAY_SIZE(shaped), "/v1/sandboxes/sb1/proxy/44772", SH_M_GET)
                        .status,
                404);
        ck_assert_int_eq(
                match_in(shaped, ARRAY_SIZE(shaped), "/v1/sandboxes/sb1/proxy/4477/x", SH_M_GET)
                        .status,
                404);
        ck_assert_int_eq(
                match_in(shaped, ARRAY_SIZE(shaped), "/v1/sandboxes//proxy/44772/x", SH_M_GET)
                        .status,
                404);
}
END_TEST

START_TEST(test_every_segment_parameter_is_returned_in_order)
{
        match_result m =
                match_in(shaped, ARRAY_SIZE(shaped), "/v1/snapshots/s-1/of/sb22", SH_M_DELETE);

        ck_assert_ptr_eq(m.route, &shaped[3]);
        ck_assert_uint_eq(m.params.n, 2);
        ck_assert_int_eq(memcmp(m.params.p[0], "s-1", m.params.len[0]), 0);
        ck_assert_uint_eq(m.params.len[0], 3);
        ck_assert_int_eq(memcmp(m.params.p[1], "sb22", m.params.len[1]), 0);
        ck_assert_uint_eq(m.params.len[1], 4);
}
END_TEST

START_TEST(test_the_longest_surface_prefix_wins)
{
        sh_surface s[2] = {{.name = "native", .prefix = "/"}, {.name = "os", .prefix = "/v1/"}};

        ck_assert_ptr_eq(sh_surface_for(s, 2, "/v1/sandboxes"), &s[1]);
        ck_assert_ptr_eq(sh_surface_for(s, 2, "/v1/"), &s[1]);
        ck_assert_ptr_eq(sh_surface_for(s, 2, "/v1"), &s[0]);
        ck_assert_ptr_eq(sh_surface_for(s, 2, "/sandboxes"), &s[0]);
        ck_assert_ptr_eq(sh_surface_for(s, 2, "/v10/x"), &s[0]);
        ck_assert_ptr_eq(sh_surface_for(s + 1, 1, "/sandboxes"), NULL);
        ck_assert_ptr_eq(sh_surface_for(s, 0, "/"), NULL);
}
END_TEST

static Suite *router_suite(void)
{
        Suite *s = suite_create("router");
        TCase *tc;

        tc = tcase_create("methods");
        tcase_add_test(tc, test_method_names_map_to_bits);
        tcase_add_test(tc, test_unknown_methods_are_zero);
        suite_add_tcase(s, tc);

        tc = tcase_create("match");
        tcase_add_loop_test(tc, test_every_contract_route_matches_its_method, 0, N_ROUTES);
        tcase_add_loop_test(tc, test_head_matches_every_get_route, 0, N_ROUTES);
        tcase_add_test(tc, test_head_on_route_without_get_is_405);
        tcase_add_test(tc, test_id_segment_is_any_nonempty_segment);
        suite_add_tcase(s, tc);

        tc = tcase_create("errors");
        tcase_add_test(tc, test_unknown_paths_are_404_whatever_the_method);
        tcase_add_test(tc, test_wrong_method_on_file_is_405_with_allow);
        tcase_add_test(tc, test_wrong_method_allow_lists);
        tcase_add_test(tc, test_unknown_method_on_known_path_is_405);
        tcase_add_test(tc, test_405_decided_whatever_the_id);
        tcase_add_test(tc, test_patch_on_native_routes_is_405_with_their_allow);
        tcase_add_test(tc, test_only_probes_carry_the_probe_flag);
        tcase_add_loop_test(tc, test_every_known_path_405s_for_unserved_methods, 0, N_ROUTES);
        suite_add_tcase(s, tc);

        tc = tcase_create("mechanics");
        tcase_add_test(tc, test_one_route_serves_several_methods);
        tcase_add_test(tc, test_patch_routes_match_and_list_in_allow);
        tcase_add_test(tc, test_free_tail_takes_the_rest_of_the_path);
        tcase_add_test(tc, test_every_segment_parameter_is_returned_in_order);
        tcase_add_test(tc, test_the_longest_surface_prefix_wins);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(router_suite());
}
