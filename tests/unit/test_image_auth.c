/* test_image_auth.c: registry authentication (images/auth.c): WWW-Authenticate challenges in
 * each form RFC 7235 allows and the malformed ones, Docker config.json lookups by registry
 * (Docker Hub's names too), and the token endpoint's answer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/oci.h"
#include "unit.h"

static char reason[512];

/* ---- WWW-Authenticate ---- */

static sh_auth_challenge challenge_ok(const char *header)
{
        sh_auth_challenge c;

        reason[0] = '\0';
        ck_assert_msg(sh_auth_challenge_parse(header, &c, reason, sizeof(reason)) == 0, "%s: %s",
                      header, reason);
        return c;
}

static void assert_challenge_refused(const char *header, int err, const char *part)
{
        sh_auth_challenge c;

        reason[0] = '\0';
        ck_assert_int_eq(sh_auth_challenge_parse(header, &c, reason, sizeof(reason)), err);
        ck_assert_msg(strstr(reason, part), "%s: reason \"%s\" lacks \"%s\"", header, reason, part);
        ck_assert(c.scheme == SH_AUTH_NONE && !c.realm && !c.service && !c.scope);
}

START_TEST(test_a_bearer_challenge_gives_realm_service_and_scope)
{
        sh_auth_challenge c = challenge_ok(
                "Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\","
                "scope=\"repository:library/python:pull\"");

        ck_assert_int_eq(c.scheme, SH_AUTH_BEARER);
        ck_assert_str_eq(c.realm, "https://auth.docker.io/token");
        ck_assert_str_eq(c.service, "registry.docker.io");
        ck_assert_str_eq(c.scope, "repository:library/python:pull");
        sh_auth_challenge_done(&c);
}
END_TEST

START_TEST(test_a_basic_challenge_gives_its_realm)
{
        sh_auth_challenge c = challenge_ok("Basic realm=\"Registry Realm\"");

        ck_assert_int_eq(c.scheme, SH_AUTH_BASIC);
        ck_assert_str_eq(c.realm, "Registry Realm");
        ck_assert_ptr_null(c.service);
        sh_auth_challenge_done(&c);
}
END_TEST

START_TEST(test_scheme_and_parameter_names_are_case_insensitive_with_spaces_around_equals)
{
        sh_auth_challenge c = challenge_ok("bEaReR  REALM = \"https://a/t\" , Service=reg");

        ck_assert_int_eq(c.scheme, SH_AUTH_BEARER);
        ck_assert_str_eq(c.realm, "https://a/t");
        ck_assert_str_eq(c.service, "reg");
        sh_auth_challenge_done(&c);
}
END_TEST

START_TEST(test_a_quoted_string_unescapes_backslashes)
{
        sh_auth_challenge c = challenge_ok("Basic realm=\"a \\\"quoted\\\" \\\\ realm\\x\"");

        ck_assert_str_eq(c.realm, "a \"quoted\" \\ realmx");
        sh_auth_challenge_done(&c);
}
END_TEST

START_TEST(test_a_quoted_string_may_hold_commas_and_equals)
{
        sh_auth_challenge c = challenge_ok(
                "Bearer realm=\"https://a/t?x=1,y=2\",scope=\"repository:a:pull,push\"");

        ck_assert_str_eq(c.realm, "https://a/t?x=1,y=2");
        ck_assert_str_eq(c.scope, "repository:a:pull,push");
        sh_auth_challenge_done(&c);
}
END_TEST

START_TEST(test_bearer_is_preferred_to_basic_in_either_order)
{
        sh_auth_challenge c = challenge_ok("Basic realm=\"b\", Bearer realm=\"https://t\"");

        ck_assert_int_eq(c.scheme, SH_AUTH_BEARER);
        ck_assert_str_eq(c.realm, "https://t");
        sh_auth_challenge_done(&c);
        c = challenge_ok("Bearer realm=\"https://t\",service=s, Basic realm=\"b\"");
        ck_assert_int_eq(c.scheme, SH_AUTH_BEARER);
        ck_assert_str_eq(c.realm, "https://t");
        ck_assert_str_eq(c.service, "s");
        sh_auth_challenge_done(&c);
}
END_TEST

START_TEST(test_unknown_schemes_and_token68_are_passed_over)
{
        sh_auth_challenge c = challenge_ok("Negotiate, NTLM abc+/de==, Basic realm=\"r\"");

        ck_assert_int_eq(c.scheme, SH_AUTH_BASIC);
        ck_assert_str_eq(c.realm, "r");
        sh_auth_challenge_done(&c);
}
END_TEST

START_TEST(test_unknown_parameters_are_ignored)
{
        sh_auth_challenge c = challenge_ok(
                "Bearer realm=\"https://t\",error=\"insufficient_scope\",charset=UTF-8");

        ck_assert_str_eq(c.realm, "https://t");
        sh_auth_challenge_done(&c);
}
END_TEST

START_TEST(test_only_unsupported_schemes_are_refused_naming_them)
{
        assert_challenge_refused("Negotiate, Digest realm=\"x\", nonce=\"y\"", -ENOTSUP,
                                 "Negotiate, Digest");
}
END_TEST

START_TEST(test_a_bearer_challenge_without_realm_is_refused)
{
        assert_challenge_refused("Bearer service=\"s\"", -EINVAL, "no realm");
        assert_challenge_refused("Bearer", -EINVAL, "no realm");
}
END_TEST

START_TEST(test_malformed_challenges_are_refused)
{
        assert_challenge_refused("Bearer realm=\"unterminated", -EINVAL, "no closing quote");
        assert_challenge_refused("Bearer realm=\"x\\", -EINVAL, "ends in a backslash");
        assert_challenge_refused("Bearer realm=\"a\tb\x01\"", -EINVAL, "control character");
        assert_challenge_refused("Bearer realm=\"x\" junk", -EINVAL, "after a parameter's value");
        assert_challenge_refused("Bearer realm=\"x\",realm=\"y\"", -EINVAL, "given twice");
        assert_challenge_refused("Bearer service=x, realm=", -EINVAL, "has no value");
        assert_challenge_refused("=x", -EINVAL, "scheme");
        assert_challenge_refused("\"Bearer\"", -EINVAL, "scheme");
        assert_challenge_refused("", -ENOTSUP, "no known authentication");
        assert_challenge_refused(NULL, -EINVAL, "missing");
}
END_TEST

START_TEST(test_a_header_longer_than_its_bound_is_refused)
{
        char *h = malloc(SH_AUTH_HEADER_MAX + 2);

        ck_assert_ptr_nonnull(h);
        memcpy(h, "Basic realm=", 12);
        memset(h + 12, 'a', SH_AUTH_HEADER_MAX + 1 - 12);
        h[SH_AUTH_HEADER_MAX + 1] = '\0';
        assert_challenge_refused(h, -EINVAL, "too long");
        free(h);
}
END_TEST

/* ---- config.json ---- */

static int lookup(const char *json, const char *domain, char **user, char **password)
{
        reason[0] = '\0';
        return sh_docker_config_lookup(json, strlen(json), domain, user, password, reason,
                                       sizeof(reason));
}

static void assert_creds(const char *json, const char *domain, const char *user,
                         const char *password)
{
        char *u, *p;

        ck_assert_msg(lookup(json, domain, &u, &p) == 0, "%s: %s", domain, reason);
        ck_assert_str_eq(u, user);
        ck_assert_str_eq(p, password);
        free(u);
        free(p);
}

static void assert_lookup_fails(const char *json, const char *domain, int err, const char *part)
{
        char *u, *p;

        ck_assert_int_eq(lookup(json, domain, &u, &p), err);
        ck_assert_ptr_null(u);
        ck_assert_ptr_null(p);
        ck_assert_msg(strstr(reason, part), "reason \"%s\" lacks \"%s\"", reason, part);
}

/* "alice:s3cr:et" and "bob:pw" */
#define ALICE "YWxpY2U6czNjcjpldA=="
#define BOB   "Ym9iOnB3"

START_TEST(test_an_auth_entry_is_base64_of_user_colon_password)
{
        assert_creds("{\"auths\":{\"127.0.0.1:5000\":{\"auth\":\"" ALICE "\"}}}", "127.0.0.1:5000",
                     "alice", "s3cr:et");
}
END_TEST

START_TEST(test_username_and_password_fields_are_credentials)
{
        assert_creds("{\"auths\":{\"ghcr.io\":{\"username\":\"u\",\"password\":\"p w\"}}}",
                     "ghcr.io", "u", "p w");
}
END_TEST

START_TEST(test_a_key_matches_with_scheme_path_or_another_case)
{
        assert_creds("{\"auths\":{\"https://ghcr.io/v2/\":{\"auth\":\"" BOB "\"}}}", "ghcr.io",
                     "bob", "pw");
        assert_creds("{\"auths\":{\"http://ghcr.io\":{\"auth\":\"" BOB "\"}}}", "ghcr.io", "bob",
                     "pw");
        assert_creds("{\"auths\":{\"GHCR.io\":{\"auth\":\"" BOB "\"}}}", "ghcr.io", "bob", "pw");
}
END_TEST

START_TEST(test_docker_hub_is_found_under_each_of_its_names)
{
        static const char *const keys[] = {"https://index.docker.io/v1/", "index.docker.io",
                                           "registry-1.docker.io", "docker.io",
                                           "https://registry-1.docker.io"};
        char json[256];

        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                snprintf(json, sizeof(json), "{\"auths\":{\"%s\":{\"auth\":\"" BOB "\"}}}",
                         keys[i]);
                assert_creds(json, "docker.io", "bob", "pw");
        }
}
END_TEST

START_TEST(test_an_exact_key_is_preferred_to_one_matched_by_host)
{
        assert_creds("{\"auths\":{\"https://ghcr.io\":{\"auth\":\"" BOB "\"},"
                     "\"ghcr.io\":{\"auth\":\"" ALICE "\"}}}",
                     "ghcr.io", "alice", "s3cr:et");
        assert_creds("{\"auths\":{\"docker.io\":{\"auth\":\"" ALICE "\"},"
                     "\"https://index.docker.io/v1/\":{\"auth\":\"" BOB "\"}}}",
                     "docker.io", "alice", "s3cr:et");
}
END_TEST

START_TEST(test_another_registry_s_credentials_are_not_found)
{
        assert_lookup_fails("{\"auths\":{\"ghcr.io\":{\"auth\":\"" BOB "\"}}}", "quay.io", -ENOENT,
                            "nothing for quay.io");
        assert_lookup_fails("{\"auths\":{\"ghcr.io.evil\":{\"auth\":\"" BOB "\"}}}", "ghcr.io",
                            -ENOENT, "nothing");
        assert_lookup_fails("{\"auths\":{\"docker.io\":{\"auth\":\"" BOB "\"}}}", "ghcr.io",
                            -ENOENT, "nothing");
        assert_lookup_fails("{\"credsStore\":\"desktop\"}", "ghcr.io", -ENOENT, "nothing");
}
END_TEST

START_TEST(test_malformed_base64_is_refused)
{
        assert_lookup_fails("{\"auths\":{\"ghcr.io\":{\"auth\":\"Ym9iOnB3=\"}}}", "ghcr.io",
                            -EINVAL, "not the base64 of user:password");
        assert_lookup_fails("{\"auths\":{\"ghcr.io\":{\"auth\":\"!!!!\"}}}", "ghcr.io", -EINVAL,
                            "not the base64");
        assert_lookup_fails("{\"auths\":{\"ghcr.io\":{\"auth\":5}}}", "ghcr.io", -EINVAL,
                            "not the base64");
}
END_TEST

START_TEST(test_base64_without_a_colon_or_with_a_nul_is_refused)
{
        /* "bobpw", "bob\0:pw" */
        assert_lookup_fails("{\"auths\":{\"ghcr.io\":{\"auth\":\"Ym9icHc=\"}}}", "ghcr.io", -EINVAL,
                            "user:password");
        assert_lookup_fails("{\"auths\":{\"ghcr.io\":{\"auth\":\"Ym9iADpwdw==\"}}}", "ghcr.io",
                            -EINVAL, "user:password");
}
END_TEST

START_TEST(test_an_entry_without_credentials_is_not_found)
{
        assert_lookup_fails("{\"auths\":{\"ghcr.io\":{}}}", "ghcr.io", -ENOENT,
                            "neither \"auth\" nor");
        assert_lookup_fails("{\"auths\":{\"ghcr.io\":{\"auth\":\"\"}}}", "ghcr.io", -ENOENT,
                            "neither");
}
END_TEST

START_TEST(test_a_malformed_config_file_is_refused)
{
        assert_lookup_fails("{\"auths\":[]}", "ghcr.io", -EINVAL, "\"auths\" is not an object");
        assert_lookup_fails("{\"auths\":{\"ghcr.io\":\"x\"}}", "ghcr.io", -EINVAL, "not an object");
        assert_lookup_fails("{\"auths\":", "ghcr.io", -EINVAL, "not valid JSON");
}
END_TEST

/* ---- token answer ---- */

static int token(const char *body, char **t)
{
        reason[0] = '\0';
        return sh_auth_token_parse(body, strlen(body), t, reason, sizeof(reason));
}

START_TEST(test_a_token_answer_gives_token_or_access_token)
{
        char *t;

        ck_assert_int_eq(token("{\"token\":\"abc.def-ghi\",\"expires_in\":300}", &t), 0);
        ck_assert_str_eq(t, "abc.def-ghi");
        free(t);
        ck_assert_int_eq(token("{\"access_token\":\"xyz\"}", &t), 0);
        ck_assert_str_eq(t, "xyz");
        free(t);
        ck_assert_int_eq(token("{\"token\":\"one\",\"access_token\":\"two\"}", &t), 0);
        ck_assert_str_eq(t, "one");
        free(t);
}
END_TEST

START_TEST(test_a_token_answer_without_token_is_refused)
{
        char *t;

        ck_assert_int_eq(token("{\"token\":\"\"}", &t), -EINVAL);
        ck_assert_ptr_null(t);
        ck_assert_int_eq(token("{\"token\":5}", &t), -EINVAL);
        ck_assert_int_eq(token("{}", &t), -EINVAL);
        ck_assert_ptr_nonnull(strstr(reason, "no \"token\""));
        ck_assert_int_eq(token("nope", &t), -EINVAL);
}
END_TEST

START_TEST(test_a_token_that_cannot_go_in_a_header_is_refused)
{
        char *t;

        ck_assert_int_eq(token("{\"token\":\"a b\"}", &t), -EINVAL);
        ck_assert_int_eq(token("{\"token\":\"a\\r\\nX-Evil: 1\"}", &t), -EINVAL);
        ck_assert_int_eq(token("{\"token\":\"caf\xc3\xa9\"}", &t), -EINVAL);
        ck_assert_ptr_nonnull(strstr(reason, "printable ASCII"));
        ck_assert_ptr_null(t);
}
END_TEST

START_TEST(test_a_token_longer_than_64_kib_is_refused)
{
        size_t n = SH_AUTH_TOKEN_MAX + 1;
        char *body = malloc(n + 32), *t;

        ck_assert_ptr_nonnull(body);
        strcpy(body, "{\"token\":\"");
        memset(body + 10, 'a', n);
        strcpy(body + 10 + n, "\"}");
        ck_assert_int_eq(token(body, &t), -EINVAL);
        ck_assert_ptr_nonnull(strstr(reason, "more than"));
        body[10 + n - 1] = '"';
        body[10 + n] = '}';
        body[10 + n + 1] = '\0';
        ck_assert_int_eq(token(body, &t), 0);
        ck_assert_uint_eq(strlen(t), SH_AUTH_TOKEN_MAX);
        free(t);
        free(body);
}
END_TEST

static Suite *image_auth_suite(void)
{
        Suite *s = suite_create("image_auth");
        TCase *h = tcase_create("challenge"), *c = tcase_create("config"),
              *t = tcase_create("token");

        tcase_add_test(h, test_a_bearer_challenge_gives_realm_service_and_scope);
        tcase_add_test(h, test_a_basic_challenge_gives_its_realm);
        tcase_add_test(
                h, test_scheme_and_parameter_names_are_case_insensitive_with_spaces_around_equals);
        tcase_add_test(h, test_a_quoted_string_unescapes_backslashes);
        tcase_add_test(h, test_a_quoted_string_may_hold_commas_and_equals);
        tcase_add_test(h, test_bearer_is_preferred_to_basic_in_either_order);
        tcase_add_test(h, test_unknown_schemes_and_token68_are_passed_over);
        tcase_add_test(h, test_unknown_parameters_are_ignored);
        tcase_add_test(h, test_only_unsupported_schemes_are_refused_naming_them);
        tcase_add_test(h, test_a_bearer_challenge_without_realm_is_refused);
        tcase_add_test(h, test_malformed_challenges_are_refused);
        tcase_add_test(h, test_a_header_longer_than_its_bound_is_refused);
        suite_add_tcase(s, h);
        tcase_add_test(c, test_an_auth_entry_is_base64_of_user_colon_password);
        tcase_add_test(c, test_username_and_password_fields_are_credentials);
        tcase_add_test(c, test_a_key_matches_with_scheme_path_or_another_case);
        tcase_add_test(c, test_docker_hub_is_found_under_each_of_its_names);
        tcase_add_test(c, test_an_exact_key_is_preferred_to_one_matched_by_host);
        tcase_add_test(c, test_another_registry_s_credentials_are_not_found);
        tcase_add_test(c, test_malformed_base64_is_refused);
        tcase_add_test(c, test_base64_without_a_colon_or_with_a_nul_is_refused);
        tcase_add_test(c, test_an_entry_without_credentials_is_not_found);
        tcase_add_test(c, test_a_malformed_config_file_is_refused);
        suite_add_tcase(s, c);
        tcase_add_test(t, test_a_token_answer_gives_token_or_access_token);
        tcase_add_test(t, test_a_token_answer_without_token_is_refused);
        tcase_add_test(t, test_a_token_that_cannot_go_in_a_header_is_refused);
        tcase_add_test(t, test_a_token_longer_than_64_kib_is_refused);
        suite_add_tcase(s, t);
        return s;
}

int main(void)
{
        return ut_run(image_auth_suite());
}
