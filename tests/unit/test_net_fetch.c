/* test_net_fetch.c: the HTTP client's rules that need no server (src/net/fetch.c, url.c): the
 * transport rule (schemes, plain http to loopback, to listed hosts, to any), the redirect rule
 * (count, targets, the caller's headers only to the same origin), origins, listed hosts, and a
 * request header that would split the request refused before anything connects. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "sh/fetch.h"
#include "unit.h"

static char reason[SH_FETCH_REASON_MAX];

static int check(const sh_fetch_rule *r, const char *url)
{
        reason[0] = '\0';
        return sh_fetch_rule_check(r, url, "manifest", reason, sizeof(reason));
}

START_TEST(test_only_http_and_https_pass_any_rule)
{
        sh_fetch_rule any = {.http = SH_FETCH_HTTP_ANY};

        ck_assert_int_eq(check(&any, "https://example.org/x"), 0);
        ck_assert_int_eq(check(&any, "http://example.org/x"), 0);
        ck_assert_int_eq(check(&any, "file:///etc/passwd"), -1);
        ck_assert_ptr_nonnull(strstr(reason, "only http and https"));
        ck_assert_int_eq(check(&any, "gopher://example.org/"), -1);
        ck_assert_int_eq(check(&any, "not a url"), -1);
}
END_TEST

START_TEST(test_plain_http_goes_to_loopback_only_by_default)
{
        sh_fetch_rule lo = {.http = SH_FETCH_HTTP_LOOPBACK, .http_hint = "set X"};

        ck_assert_int_eq(check(&lo, "http://127.0.0.1:5000/v2/"), 0);
        ck_assert_int_eq(check(&lo, "http://127.3.4.5/v2/"), 0);
        ck_assert_int_eq(check(&lo, "http://localhost:80/"), 0);
        ck_assert_int_eq(check(&lo, "http://[::1]:8080/"), 0);
        ck_assert_int_eq(check(&lo, "http://10.0.0.1/"), -1);
        ck_assert_ptr_nonnull(strstr(reason, "refusing plain http"));
        ck_assert_ptr_nonnull(strstr(reason, "set X"));
        ck_assert_int_eq(check(&lo, "https://10.0.0.1/"), 0);
}
END_TEST

START_TEST(test_plain_http_goes_to_listed_hosts_only)
{
        char *hosts[] = {"registry.local", "10.0.0.2:5000", "[fd00::1]:80", NULL};
        sh_fetch_rule listed = {.http = SH_FETCH_HTTP_LISTED, .http_hosts = hosts};

        ck_assert_int_eq(check(&listed, "http://registry.local/v2/"), 0);
        ck_assert_int_eq(check(&listed, "http://REGISTRY.local:8080/v2/"), 0);
        ck_assert_int_eq(check(&listed, "http://10.0.0.2:5000/v2/"), 0);
        ck_assert_int_eq(check(&listed, "http://10.0.0.2:5001/v2/"), -1);
        ck_assert_int_eq(check(&listed, "http://10.0.0.2/v2/"), -1);
        ck_assert_int_eq(check(&listed, "http://[fd00::1]/v2/"), 0);
        ck_assert_int_eq(check(&listed, "http://other.local/v2/"), -1);
        /* not even loopback, when it is not listed */
        ck_assert_int_eq(check(&listed, "http://127.0.0.1:5000/v2/"), -1);
        ck_assert_int_eq(check(&listed, "https://other.local/v2/"), 0);
}
END_TEST

START_TEST(test_a_host_list_matches_host_and_port_without_case)
{
        char *list[] = {"a.example", "B.example:5000", "[::1]:443", NULL};

        ck_assert(sh_url_host_listed(list, "A.EXAMPLE", 1));
        ck_assert(sh_url_host_listed(list, "b.example", 5000));
        ck_assert(!sh_url_host_listed(list, "b.example", 5001));
        ck_assert(sh_url_host_listed(list, "[::1]", 443));
        ck_assert(!sh_url_host_listed(list, "[::1]", 80));
        ck_assert(!sh_url_host_listed(list, "a.example.evil", 1));
        ck_assert(!sh_url_host_listed(NULL, "a.example", 1));
}
END_TEST

START_TEST(test_an_origin_is_scheme_host_and_port)
{
        char b[256];

        ck_assert_int_eq(sh_url_origin("HTTPS://Reg.Example/v2/x?y", b, sizeof(b)), 0);
        ck_assert_str_eq(b, "https://reg.example:443");
        ck_assert_int_eq(sh_url_origin("http://127.0.0.1:5000/v2/", b, sizeof(b)), 0);
        ck_assert_str_eq(b, "http://127.0.0.1:5000");
        ck_assert_int_eq(sh_url_origin("ftp://x/", b, sizeof(b)), -EINVAL);
        ck_assert_int_eq(sh_url_origin("https://reg.example/", b, 8), -ENOBUFS);
}
END_TEST

START_TEST(test_a_redirect_keeps_headers_only_to_the_same_origin)
{
        sh_fetch_rule any = {.http = SH_FETCH_HTTP_ANY};
        bool keep = true;

        ck_assert_int_eq(sh_fetch_redirect_check(&any, "https://reg.example/v2/a",
                                                 "https://reg.example:443/v2/b", 1, "blob", &keep,
                                                 reason, sizeof(reason)),
                         0);
        ck_assert(keep);
        ck_assert_int_eq(sh_fetch_redirect_check(&any, "https://reg.example/v2/a",
                                                 "https://blobs.example/b?sig=1", 1, "blob", &keep,
                                                 reason, sizeof(reason)),
                         0);
        ck_assert(!keep);
        /* another port, another scheme: another origin */
        ck_assert_int_eq(sh_fetch_redirect_check(&any, "https://reg.example/v2/a",
                                                 "https://reg.example:8443/b", 1, "blob", &keep,
                                                 reason, sizeof(reason)),
                         0);
        ck_assert(!keep);
        ck_assert_int_eq(sh_fetch_redirect_check(&any, "https://reg.example/v2/a",
                                                 "http://reg.example/b", 1, "blob", &keep, reason,
                                                 sizeof(reason)),
                         0);
        ck_assert(!keep);
}
END_TEST

START_TEST(test_a_redirect_to_another_scheme_is_refused)
{
        sh_fetch_rule any = {.http = SH_FETCH_HTTP_ANY};
        bool keep = true;

        ck_assert_int_eq(sh_fetch_redirect_check(&any, "https://reg.example/v2/a",
                                                 "file:///etc/shadow", 1, "blob", &keep, reason,
                                                 sizeof(reason)),
                         -1);
        ck_assert(!keep);
        ck_assert_ptr_nonnull(strstr(reason, "(a redirect)"));
}
END_TEST

START_TEST(test_a_redirect_to_plain_http_follows_the_transport_rule)
{
        char *hosts[] = {"127.0.0.1:5000", NULL};
        sh_fetch_rule listed = {.http = SH_FETCH_HTTP_LISTED, .http_hosts = hosts};
        bool keep;

        ck_assert_int_eq(sh_fetch_redirect_check(&listed, "http://127.0.0.1:5000/v2/a",
                                                 "http://127.0.0.1:5000/b", 1, "blob", &keep,
                                                 reason, sizeof(reason)),
                         0);
        ck_assert(keep);
        ck_assert_int_eq(sh_fetch_redirect_check(&listed, "http://127.0.0.1:5000/v2/a",
                                                 "http://evil.example/b", 1, "blob", &keep, reason,
                                                 sizeof(reason)),
                         -1);
}
END_TEST

START_TEST(test_redirects_are_bounded_at_five)
{
        sh_fetch_rule any = {.http = SH_FETCH_HTTP_ANY};
        bool keep;

        ck_assert_int_eq(sh_fetch_redirect_check(&any, "https://a.example/", "https://a.example/",
                                                 SH_FETCH_MAX_REDIRECTS, "blob", &keep, reason,
                                                 sizeof(reason)),
                         0);
        ck_assert_int_eq(sh_fetch_redirect_check(&any, "https://a.example/", "https://a.example/",
                                                 SH_FETCH_MAX_REDIRECTS + 1, "blob", &keep, reason,
                                                 sizeof(reason)),
                         -1);
        ck_assert_ptr_nonnull(strstr(reason, "redirects"));
}
END_TEST

START_TEST(test_a_header_that_would_split_the_request_is_refused_before_any_connection)
{
        sh_loop *loop = NULL;
        sh_fetcher *f = NULL;
        sh_error *err = NULL;
        const char *bad[] = {"Authorization: Basic x\r\nX-Evil: 1", NULL};
        const char *nocolon[] = {"Authorization", NULL};
        sh_fetch_opts o = {.url = "http://127.0.0.1:9/", .what = "manifest", .max = 10, .fd = -1};

        ck_assert_int_eq(sh_loop_new(&loop), 0);
        ck_assert_int_eq(sh_fetcher_new(loop, false, NULL, &f, &err), 0);
        o.headers = bad;
        ck_assert_ptr_null(sh_fetch_start_opts(f, &o, NULL, NULL, &err));
        ck_assert_ptr_nonnull(err);
        ck_assert_int_eq(err->kind, SH_E_INVALID);
        sh_error_release(&err);
        err = NULL;
        o.headers = nocolon;
        ck_assert_ptr_null(sh_fetch_start_opts(f, &o, NULL, NULL, &err));
        sh_error_release(&err);
        sh_fetcher_free(f, true);
        sh_loop_free(loop);
}
END_TEST

static Suite *net_suite(void)
{
        Suite *s = suite_create("net_fetch");
        TCase *tc = tcase_create("rules");

        tcase_add_test(tc, test_only_http_and_https_pass_any_rule);
        tcase_add_test(tc, test_plain_http_goes_to_loopback_only_by_default);
        tcase_add_test(tc, test_plain_http_goes_to_listed_hosts_only);
        tcase_add_test(tc, test_a_host_list_matches_host_and_port_without_case);
        tcase_add_test(tc, test_an_origin_is_scheme_host_and_port);
        tcase_add_test(tc, test_a_redirect_keeps_headers_only_to_the_same_origin);
        tcase_add_test(tc, test_a_redirect_to_another_scheme_is_refused);
        tcase_add_test(tc, test_a_redirect_to_plain_http_follows_the_transport_rule);
        tcase_add_test(tc, test_redirects_are_bounded_at_five);
        tcase_add_test(tc,
                       test_a_header_that_would_split_the_request_is_refused_before_any_connection);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(net_suite());
}
