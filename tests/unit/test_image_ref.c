/* test_image_ref.c: image references (images/ref.c): Docker's grammar rule by rule, each
 * refusal with its reason, Docker Hub's normalisation, the canonical form and the API host. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sh/oci.h"
#include "unit.h"

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void assert_ref(const char *s, const char *domain, const char *path, const char *tag,
                       const char *digest)
{
        char reason[256] = "";
        sh_image_ref r;

        ck_assert_msg(sh_image_ref_parse(s, &r, reason, sizeof(reason)) == 0, "%s: %s", s, reason);
        ck_assert_str_eq(r.domain, domain);
        ck_assert_str_eq(r.path, path);
        if (tag)
                ck_assert_str_eq(r.tag, tag);
        else
                ck_assert_ptr_null(r.tag);
        if (digest)
                ck_assert_str_eq(r.digest, digest);
        else
                ck_assert_ptr_null(r.digest);
        sh_image_ref_done(&r);
}

/* s refused with a reason holding `part`; *ret all NULL. */
static void assert_refused(const char *s, const char *part)
{
        char reason[256] = "";
        sh_image_ref r;

        ck_assert_int_eq(sh_image_ref_parse(s, &r, reason, sizeof(reason)), -EINVAL);
        ck_assert_msg(strstr(reason, part), "%s: reason \"%s\" lacks \"%s\"", s, reason, part);
        ck_assert(!r.domain && !r.path && !r.tag && !r.digest);
}

START_TEST(test_a_single_name_is_an_official_docker_hub_image_at_latest)
{
        assert_ref("python", "docker.io", "library/python", "latest", NULL);
}
END_TEST

START_TEST(test_a_user_image_without_domain_is_on_docker_hub)
{
        assert_ref("user/img", "docker.io", "user/img", "latest", NULL);
        assert_ref("user/img:1.0", "docker.io", "user/img", "1.0", NULL);
}
END_TEST

START_TEST(test_docker_io_and_index_docker_io_are_docker_hub)
{
        assert_ref("docker.io/python:3.12", "docker.io", "library/python", "3.12", NULL);
        assert_ref("index.docker.io/python", "docker.io", "library/python", "latest", NULL);
        assert_ref("index.docker.io/user/img", "docker.io", "user/img", "latest", NULL);
}
END_TEST

START_TEST(test_a_first_component_with_a_dot_a_colon_or_localhost_is_a_domain)
{
        assert_ref("ghcr.io/org/app:v1", "ghcr.io", "org/app", "v1", NULL);
        assert_ref("127.0.0.1:5000/busybox", "127.0.0.1:5000", "busybox", "latest", NULL);
        assert_ref("localhost/busybox", "localhost", "busybox", "latest", NULL);
        assert_ref("localhost:5000/a/b/c:t", "localhost:5000", "a/b/c", "t", NULL);
        assert_ref("[::1]:5000/busybox", "[::1]:5000", "busybox", "latest", NULL);
        /* no dot, colon or localhost: a path component, and not "library/" */
        assert_ref("registry/busybox", "docker.io", "registry/busybox", "latest", NULL);
}
END_TEST

START_TEST(test_a_domain_keeps_its_case)
{
        assert_ref("Registry.Example.COM/app", "Registry.Example.COM", "app", "latest", NULL);
}
END_TEST

START_TEST(test_a_digest_alone_leaves_no_tag)
{
        assert_ref("busybox@sha256:" D64, "docker.io", "library/busybox", NULL, "sha256:" D64);
}
END_TEST

START_TEST(test_a_tag_and_a_digest_are_both_kept)
{
        assert_ref("host:5000/p:tag@sha256:" D64, "host:5000", "p", "tag", "sha256:" D64);
}
END_TEST

START_TEST(test_path_separators_are_dot_underscore_double_underscore_and_dashes)
{
        assert_ref("g/a.b_c__d-e---f", "docker.io", "g/a.b_c__d-e---f", "latest", NULL);
}
END_TEST

START_TEST(test_a_path_component_with_a_bad_separator_is_refused)
{
        assert_refused("a___b", "separator");
        assert_refused("a..b", "separator");
        assert_refused("a._b", "separator");
        assert_refused("-ab", "begin and end");
        assert_refused("ab-", "begin and end");
        assert_refused("a/.b", "begin and end");
}
END_TEST

START_TEST(test_uppercase_in_the_path_is_refused)
{
        assert_refused("Python", "uppercase");
        assert_refused("ghcr.io/Org/app", "uppercase");
}
END_TEST

START_TEST(test_a_character_outside_the_grammar_is_refused_by_name)
{
        assert_refused("py thon", "holds ' '");
        assert_refused("py$thon", "holds '$'");
}
END_TEST

START_TEST(test_an_empty_path_component_is_refused)
{
        assert_refused("a//b", "empty path component");
        assert_refused("ghcr.io/", "empty path component");
        assert_refused("a/", "empty path component");
}
END_TEST

START_TEST(test_an_empty_reference_or_name_is_refused)
{
        assert_refused("", "empty");
        assert_refused(":tag", "no repository name");
        assert_refused("@sha256:" D64, "no repository name");
}
END_TEST

START_TEST(test_a_bad_tag_is_refused)
{
        char long_tag[200] = "a:";

        assert_refused("a:", "tag after ':' is empty");
        assert_refused("a:-x", "must begin with");
        assert_refused("a:.x", "must begin with");
        assert_refused("a:x+y", "holds '+'");
        memset(long_tag + 2, 'x', 129);
        assert_refused(long_tag, "longer than 128");
        memset(long_tag + 2, 'x', 128);
        long_tag[130] = '\0';
        assert_ref(long_tag, "docker.io", "library/a", long_tag + 2, NULL);
}
END_TEST

START_TEST(test_a_tag_may_begin_with_an_underscore_and_hold_dots_and_dashes)
{
        assert_ref("a:_1.2-rc", "docker.io", "library/a", "_1.2-rc", NULL);
}
END_TEST

START_TEST(test_only_sha256_digests_of_64_lowercase_hex_are_accepted)
{
        assert_refused("a@sha512:" D64 D64, "only sha256");
        assert_refused("a@sha256:abc", "64 hex digits");
        assert_refused("a@sha256:" D64 "0", "64 hex digits");
        assert_refused("a@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
                       "not a lowercase hex digit");
        assert_refused("a@" D64, "not algorithm:hex");
        assert_refused("a@sha256:" D64 "@sha256:" D64, "64 hex digits");
}
END_TEST

START_TEST(test_a_bad_domain_is_refused)
{
        assert_refused("-bad.io/app", "not a host name");
        assert_refused("bad-.io/app", "not a host name");
        assert_refused("a..io/app", "not a host name");
        assert_refused("a_b.io/app", "not a host name");
        assert_refused("host.io:/app", "port");
        assert_refused("host.io:50x/app", "port");
        assert_refused("host.io:123456/app", "port");
        assert_refused("[::1/app", "not a host name");
        assert_refused("[zz]:5000/app", "not a host name");
}
END_TEST

START_TEST(test_a_name_longer_than_255_is_refused)
{
        char s[300];

        /* "docker.io/library/" (18) + 237 = 255: accepted; 238: refused */
        char path[300] = "library/";

        memset(s, 'a', 237);
        s[237] = '\0';
        strcat(path, s);
        assert_ref(s, "docker.io", path, "latest", NULL);
        strcat(s, "a");
        assert_refused(s, "more than 255");
}
END_TEST

START_TEST(test_a_name_of_64_hex_digits_is_refused)
{
        assert_refused(D64, "64 hex digits");
}
END_TEST

START_TEST(test_the_canonical_form_names_domain_path_tag_and_digest)
{
        static const char *const cases[][2] = {
                {"python", "docker.io/library/python:latest"},
                {"python:3.12", "docker.io/library/python:3.12"},
                {"busybox@sha256:" D64, "docker.io/library/busybox@sha256:" D64},
                {"host:5000/p:tag@sha256:" D64, "host:5000/p:tag@sha256:" D64},
                {"index.docker.io/user/img", "docker.io/user/img:latest"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                sh_image_ref r;
                char *c;

                ck_assert_int_eq(sh_image_ref_parse(cases[i][0], &r, NULL, 0), 0);
                c = sh_image_ref_canonical(&r);
                ck_assert_str_eq(c, cases[i][1]);
                free(c);
                sh_image_ref_done(&r);
        }
}
END_TEST

START_TEST(test_docker_hub_is_reached_at_registry_1_docker_io)
{
        sh_image_ref r;

        ck_assert_int_eq(sh_image_ref_parse("python", &r, NULL, 0), 0);
        ck_assert_str_eq(sh_image_ref_api_host(&r), "registry-1.docker.io");
        sh_image_ref_done(&r);
        ck_assert_int_eq(sh_image_ref_parse("127.0.0.1:5000/x", &r, NULL, 0), 0);
        ck_assert_str_eq(sh_image_ref_api_host(&r), "127.0.0.1:5000");
        sh_image_ref_done(&r);
}
END_TEST

START_TEST(test_a_digest_is_valid_only_as_sha256_and_64_lowercase_hex)
{
        ck_assert(sh_oci_digest_valid("sha256:" D64));
        ck_assert(!sh_oci_digest_valid("sha256:" D64 "0"));
        ck_assert(!sh_oci_digest_valid("sha256:" D64 + 1));
        ck_assert(!sh_oci_digest_valid("sha512:" D64));
        ck_assert(!sh_oci_digest_valid("SHA256:" D64));
        ck_assert(!sh_oci_digest_valid(NULL));
}
END_TEST

static Suite *image_ref_suite(void)
{
        Suite *s = suite_create("image_ref");
        TCase *tc = tcase_create("ref");

        tcase_add_test(tc, test_a_single_name_is_an_official_docker_hub_image_at_latest);
        tcase_add_test(tc, test_a_user_image_without_domain_is_on_docker_hub);
        tcase_add_test(tc, test_docker_io_and_index_docker_io_are_docker_hub);
        tcase_add_test(tc, test_a_first_component_with_a_dot_a_colon_or_localhost_is_a_domain);
        tcase_add_test(tc, test_a_domain_keeps_its_case);
        tcase_add_test(tc, test_a_digest_alone_leaves_no_tag);
        tcase_add_test(tc, test_a_tag_and_a_digest_are_both_kept);
        tcase_add_test(tc, test_path_separators_are_dot_underscore_double_underscore_and_dashes);
        tcase_add_test(tc, test_a_path_component_with_a_bad_separator_is_refused);
        tcase_add_test(tc, test_uppercase_in_the_path_is_refused);
        tcase_add_test(tc, test_a_character_outside_the_grammar_is_refused_by_name);
        tcase_add_test(tc, test_an_empty_path_component_is_refused);
        tcase_add_test(tc, test_an_empty_reference_or_name_is_refused);
        tcase_add_test(tc, test_a_bad_tag_is_refused);
        tcase_add_test(tc, test_a_tag_may_begin_with_an_underscore_and_hold_dots_and_dashes);
        tcase_add_test(tc, test_only_sha256_digests_of_64_lowercase_hex_are_accepted);
        tcase_add_test(tc, test_a_bad_domain_is_refused);
        tcase_add_test(tc, test_a_name_longer_than_255_is_refused);
        tcase_add_test(tc, test_a_name_of_64_hex_digits_is_refused);
        tcase_add_test(tc, test_the_canonical_form_names_domain_path_tag_and_digest);
        tcase_add_test(tc, test_docker_hub_is_reached_at_registry_1_docker_io);
        tcase_add_test(tc, test_a_digest_is_valid_only_as_sha256_and_64_lowercase_hex);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(image_ref_suite());
}
