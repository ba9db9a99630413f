/* test_router.c: sh_route_match and sh_method_from_string: contract routes, 404 vs 405 + Allow. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "sh/http.h"
#include "unit.h"

#define RID "0123456789abcdef0123456789abcdef"

typedef struct route_case {
        const char *method;
        const char *path;
        sh_handler_fn fn;
        bool has_id;
        bool needs_sandbox;
        sh_body_kind body;
} route_case;

/* Every route of CONTRACT.md section 2 and its handler. */
static const route_case contract_routes[] = {
        {"POST", "/sandboxes", sh_api_create, false, false, SH_BODY_JSON},
        {"DELETE", "/sandboxes/" RID, sh_api_delete, true, true, SH_BODY_NONE},
        {"POST", "/sandboxes/" RID "/exec", sh_api_exec, true, true, SH_BODY_JSON},
        {"POST", "/sandboxes/" RID "/persist", sh_api_persist, true, true, SH_BODY_JSON},
        {"PUT", "/sandboxes/" RID "/file", sh_api_upload, true, true, SH_BODY_UPLOAD},
        {"GET", "/sandboxes/" RID "/file", sh_api_download, true, true, SH_BODY_NONE},
        {"GET", "/sandboxes/" RID "/exists", sh_api_exists, true, true, SH_BODY_NONE},
        {"GET", "/sandboxes/" RID "/disk-usage", sh_api_disk_usage, true, true, SH_BODY_NONE},
        {"GET", "/sandboxes/" RID "/size", sh_api_size, true, true, SH_BODY_NONE},
        {"POST", "/sandboxes/" RID "/mark-ready", sh_api_mark_ready, true, true, SH_BODY_NONE},
        {"GET", "/sandboxes/" RID "/ready", sh_api_ready, true, true, SH_BODY_NONE},
        {"GET", "/sandboxes/" RID "/walk", sh_api_walk, true, true, SH_BODY_NONE},
        {"DELETE", "/sandboxes/" RID "/file", sh_api_delete_file, true, true, SH_BODY_NONE},
        {"POST", "/sandboxes/" RID "/mkdir", sh_api_mkdir, true, true, SH_BODY_JSON},
        {"DELETE", "/sandboxes/" RID "/dir", sh_api_delete_dir, true, true, SH_BODY_NONE},
        {"POST", "/sandboxes/" RID "/rename", sh_api_rename, true, true, SH_BODY_JSON},
        {"POST", "/tools/resolve", sh_api_tools_resolve, false, false, SH_BODY_JSON},
        {"GET", "/healthz", sh_api_healthz, false, false, SH_BODY_NONE},
        {"GET", "/readyz", sh_api_readyz, false, false, SH_BODY_NONE},
        {"POST", "/drain", sh_api_drain, false, false, SH_BODY_NONE},
};
#define N_ROUTES ((int)(sizeof(contract_routes) / sizeof(contract_routes[0])))

typedef struct match_result {
        const sh_route *route;
        const char *id;
        size_t id_len;
        int status;
        const char *allow;
} match_result;

static match_result do_match(const char *path, unsigned method)
{
        match_result m = {NULL, NULL, 999, -1, NULL};

        m.route = sh_route_match(path, method, &m.id, &m.id_len, &m.status, &m.allow);
        return m;
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
        ck_assert_ptr_nonnull(m.allow);
        ck_assert_str_eq(m.allow, allow);
}

static const unsigned all_methods[] = {SH_M_GET, SH_M_HEAD, SH_M_POST, SH_M_PUT, SH_M_DELETE};

/* ---- sh_method_from_string -------------------------------------------------------------- */

START_TEST(test_method_names_map_to_bits)
{
        ck_assert_uint_eq(sh_method_from_string("GET"), SH_M_GET);
        ck_assert_uint_eq(sh_method_from_string("HEAD"), SH_M_HEAD);
        ck_assert_uint_eq(sh_method_from_string("POST"), SH_M_POST);
        ck_assert_uint_eq(sh_method_from_string("PUT"), SH_M_PUT);
        ck_assert_uint_eq(sh_method_from_string("DELETE"), SH_M_DELETE);
}
END_TEST

START_TEST(test_unknown_methods_are_zero)
{
        ck_assert_uint_eq(sh_method_from_string("get"), 0);
        ck_assert_uint_eq(sh_method_from_string("PATCH"), 0);
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
        ck_assert_uint_eq(m.route->method, sh_method_from_string(rc->method));
        ck_assert_int_eq(m.route->needs_sandbox, rc->needs_sandbox);
        ck_assert_int_eq(m.route->body, rc->body);
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
                        ck_assert_ptr_nonnull(r.allow);
                }
        }
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
        tcase_add_loop_test(tc, test_every_known_path_405s_for_unserved_methods, 0, N_ROUTES);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(router_suite());
}
