/* test_egress_policy.c: a sandbox's egress policy (src/egress/policy.c, OPENSANDBOX.md sections
 * 2 and 4, egress-api.yaml): targets made canonical or refused with their reason, wildcards
 * below but never at their apex, CIDRs, first match then the default, the operator's lists
 * (deny wins, allow granted, DNS answers that rebind to a denied address), PATCH merges and
 * DELETEs as the YAML says, the bounds, hostile strings, and the two settings. */
#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/config.h"
#include "sh/error.h"
#include "sh/policy.h"

#define IP(a, b, c, d)                                                                             \
        ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

/* The canonical text of a target, or NULL with the reason in why (static buffer). */
static const char *canon(const char *s)
{
        static char out[300];
        sh_egress_target t;
        const char *why = NULL;

        if (sh_egress_target_parse(s, strlen(s), &t, &why) < 0)
                return NULL;
        snprintf(out, sizeof(out), "%s", t.text);
        sh_egress_target_done(&t);
        return out;
}

static const char *refusal(const char *s)
{
        sh_egress_target t;
        const char *why = NULL;

        if (sh_egress_target_parse(s, strlen(s), &t, &why) == 0) {
                sh_egress_target_done(&t);
                return NULL;
        }
        return why;
}

/* A policy from JSON text (the create's networkPolicy member); fails the test on a refusal. */
static sh_egress_policy policy(const char *json)
{
        cJSON *j = json ? cJSON_Parse(json) : NULL;
        sh_egress_policy p;
        sh_error *err = NULL;

        ck_assert_msg(!json || j, "bad test JSON %s", json);
        ck_assert_msg(sh_egress_policy_from_json(j, &p, &err) == 0, "refused %s: %s", json,
                      err ? err->msg : "?");
        cJSON_Delete(j);
        return p;
}

/* The message of the refusal of a create's networkPolicy, "" when it was taken. */
static char *policy_refusal(const char *json)
{
        static char msg[512];
        cJSON *j = cJSON_Parse(json);
        sh_egress_policy p;
        sh_error *err = NULL;

        ck_assert_ptr_nonnull(j);
        msg[0] = '\0';
        if (sh_egress_policy_from_json(j, &p, &err) == 0) {
                sh_egress_policy_done(&p);
        } else {
                ck_assert_ptr_nonnull(err);
                ck_assert_int_eq(err->kind, SH_E_INVALID);
                snprintf(msg, sizeof(msg), "%s", err->msg);
                sh_error_release(&err);
        }
        cJSON_Delete(j);
        return msg;
}

static sh_egress_rules rules(const char *json)
{
        cJSON *j = cJSON_Parse(json);
        sh_egress_rules r;
        sh_error *err = NULL;

        ck_assert_ptr_nonnull(j);
        ck_assert_msg(sh_egress_rules_from_json(j, &r, &err) == 0, "refused %s: %s", json,
                      err ? err->msg : "?");
        cJSON_Delete(j);
        return r;
}

/* The policy as compact JSON, to compare whole. */
static char *json_of(const sh_egress_policy *p)
{
        static char out[4096];
        cJSON *j = sh_egress_policy_to_json(p);
        char *s;

        ck_assert_ptr_nonnull(j);
        s = cJSON_PrintUnformatted(j);
        ck_assert_ptr_nonnull(s);
        snprintf(out, sizeof(out), "%s", s);
        free(s);
        cJSON_Delete(j);
        return out;
}

static sh_egress_action name_action(const sh_egress_policy *p, const sh_egress_operator *op,
                                    const char *name)
{
        return sh_egress_judge_name(p, op, name, strlen(name)).action;
}

static sh_egress_operator operator(const char *deny, const char *allow)
{
        sh_egress_operator op;
        sh_error *err = NULL;

        ck_assert_msg(sh_egress_operator_parse(&op, deny, allow, &err) == 0, "refused: %s",
                      err ? err->msg : "?");
        return op;
}

static void verdict_is(sh_egress_verdict v, sh_egress_action action, sh_egress_by by)
{
        ck_assert_int_eq(v.action, action);
        ck_assert_int_eq(v.by, by);
}

/* ---- targets ------------------------------------------------------------------------------- */

START_TEST(test_a_name_is_lower_cased_and_its_trailing_dot_dropped)
{
        ck_assert_str_eq(canon("PyPI.org."), "pypi.org");
        ck_assert_str_eq(canon("a-b.C0M"), "a-b.c0m");
        ck_assert_str_eq(canon("localhost"), "localhost");
        ck_assert_str_eq(canon("*.Example.COM."), "*.example.com");
}
END_TEST

START_TEST(test_a_name_breaking_rfc_1123_is_refused_with_its_reason)
{
        char label64[80], long_name[300];

        ck_assert_str_eq(refusal(""), "is empty");
        ck_assert_str_eq(refusal("*."), "is not a name: it is empty");
        ck_assert_ptr_nonnull(refusal("."));
        ck_assert_str_eq(refusal("a..b"), "is not a name: a label is empty");
        ck_assert_str_eq(refusal(".a"), "is not a name: a label is empty");
        ck_assert_str_eq(refusal("a.b.."), "is not a name: a label is empty");
        ck_assert_str_eq(refusal("-a.com"), "is not a name: a label starts with a hyphen");
        ck_assert_str_eq(refusal("a-.com"), "is not a name: a label ends with a hyphen");
        ck_assert_str_eq(refusal("a.com-"), "is not a name: a label ends with a hyphen");
        ck_assert_str_eq(refusal("a_b.com"),
                         "is not a name: a label holds only letters, digits and hyphens");
        ck_assert_str_eq(refusal("a b.com"),
                         "is not a name: a label holds only letters, digits and hyphens");
        ck_assert_str_eq(refusal("b\xc3\xa4r.de"),
                         "is not a name: a label holds only letters, digits and hyphens");
        ck_assert_str_eq(refusal("example.123"), "is not a name: its last label is all digits");
        memset(label64, 'a', 64);
        strcpy(label64 + 64, ".com");
        ck_assert_str_eq(refusal(label64), "is not a name: a label is longer than 63 bytes");
        label64[1] = '.'; /* "a." + 62 + ".com": fine */
        ck_assert_ptr_nonnull(canon(label64));
        /* 253 bytes is the longest name; 254 with a trailing dot is the same name */
        for (int i = 0; i < 253; i++)
                long_name[i] = i % 2 ? '.' : 'a';
        long_name[253] = '\0';
        ck_assert_ptr_nonnull(canon(long_name));
        strcpy(long_name + 253, ".");
        ck_assert_ptr_nonnull(canon(long_name));
        strcpy(long_name + 253, "a");
        ck_assert_str_eq(refusal(long_name), "is not a name: it is longer than 253 bytes");
}
END_TEST

START_TEST(test_a_star_is_only_a_first_label_of_its_own)
{
        const char *bad[] = {"*", "*.", "a.*.com", "*a.com", "a*.com", "**.com", "*.*.com"};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(refusal(bad[i]), "'%s' taken", bad[i]);
        ck_assert_str_eq(refusal("a.*.com"),
                         "is not a wildcard: '*' is only a first label of its own "
                         "(\"*.example.com\")");
        ck_assert_str_eq(canon("*.com"), "*.com");
}
END_TEST

START_TEST(test_a_wildcard_matches_names_below_never_its_apex)
{
        sh_egress_policy p = policy("{\"defaultAction\":\"deny\",\"egress\":"
                                    "[{\"action\":\"allow\",\"target\":\"*.example.com\"}]}");

        ck_assert_int_eq(name_action(&p, NULL, "a.example.com"), SH_EGRESS_ALLOW);
        ck_assert_int_eq(name_action(&p, NULL, "A.B.Example.Com."), SH_EGRESS_ALLOW);
        ck_assert_int_eq(name_action(&p, NULL, "example.com"), SH_EGRESS_DENY);
        ck_assert_int_eq(name_action(&p, NULL, "badexample.com"), SH_EGRESS_DENY);
        ck_assert_int_eq(name_action(&p, NULL, "example.com.evil.org"), SH_EGRESS_DENY);
        ck_assert_int_eq(name_action(&p, NULL, ".example.com"), SH_EGRESS_DENY);
        sh_egress_policy_done(&p);
}
END_TEST

START_TEST(test_a_wildcard_needs_room_for_a_name_below_it)
{
        char w[300] = "*.";

        for (int i = 0; i < 252; i++) /* a base of 252 bytes: nothing below fits in 253 */
                w[2 + i] = i % 2 ? '.' : 'a';
        w[254] = '\0';
        w[253] = 'a';
        ck_assert_str_eq(refusal(w),
                         "is not a wildcard: nothing below a name of more than 251 bytes fits in "
                         "253");
        w[253] = '\0'; /* base of 251 */
        ck_assert_ptr_nonnull(canon(w));
}
END_TEST

START_TEST(test_a_cidr_is_made_canonical_its_host_bits_cleared)
{
        ck_assert_str_eq(canon("10.1.2.3/8"), "10.0.0.0/8");
        ck_assert_str_eq(canon("1.2.3.4/32"), "1.2.3.4");
        ck_assert_str_eq(canon("1.2.3.4"), "1.2.3.4");
        ck_assert_str_eq(canon("0.0.0.0/0"), "0.0.0.0/0");
        ck_assert_str_eq(canon("255.255.255.255/0"), "0.0.0.0/0");
        ck_assert_str_eq(canon("192.168.7.130/25"), "192.168.7.128/25");
        ck_assert_str_eq(canon("0.0.0.0"), "0.0.0.0");
}
END_TEST

START_TEST(test_a_malformed_cidr_is_refused_with_its_reason)
{
        const char *octets = "is not an IPv4 address or CIDR: an octet is 0 to 255, without "
                             "leading zeros";
        const char *four = "is not an IPv4 address or CIDR: it needs four octets";
        const char *prefix = "is not an IPv4 CIDR: the prefix is 0 to 32, without leading zeros";

        ck_assert_str_eq(refusal("1.2.3"), four);
        ck_assert_str_eq(refusal("1.2.3.4.5"), four);
        ck_assert_str_eq(refusal("1.2.3.4."), four);
        ck_assert_str_eq(refusal("1.2.3.4/8/8"), four);
        ck_assert_str_eq(refusal("256.0.0.1"), octets);
        ck_assert_str_eq(refusal("01.2.3.4"), octets);
        ck_assert_str_eq(refusal("1..2.3"), octets);
        ck_assert_str_eq(refusal("1234.1.1.1"), octets);
        ck_assert_str_eq(refusal("/8"), octets);
        ck_assert_str_eq(refusal("1.2.3.4/33"), prefix);
        ck_assert_str_eq(refusal("1.2.3.4/"), prefix);
        ck_assert_str_eq(refusal("1.2.3.4/08"), prefix);
        ck_assert_str_eq(refusal("1.2.3.4/100"), prefix);
        /* what is not digits, dots and a slash is judged as a name */
        ck_assert_str_eq(refusal("1.2.3.4/8a"),
                         "is not a name: a label holds only letters, digits and hyphens");
        ck_assert_str_eq(refusal("0x7f.0.0.1"), "is not a name: its last label is all digits");
}
END_TEST

START_TEST(test_a_cidr_matches_its_addresses_only)
{
        sh_egress_policy p = policy("{\"egress\":[{\"action\":\"allow\",\"target\":"
                                    "\"203.0.113.0/25\"},{\"action\":\"allow\",\"target\":"
                                    "\"198.51.100.7\"}]}");

        ck_assert_int_eq(sh_egress_judge_addr(&p, NULL, IP(203, 0, 113, 0)).action,
                         SH_EGRESS_ALLOW);
        ck_assert_int_eq(sh_egress_judge_addr(&p, NULL, IP(203, 0, 113, 127)).action,
                         SH_EGRESS_ALLOW);
        ck_assert_int_eq(sh_egress_judge_addr(&p, NULL, IP(203, 0, 113, 128)).action,
                         SH_EGRESS_DENY);
        ck_assert_int_eq(sh_egress_judge_addr(&p, NULL, IP(198, 51, 100, 7)).action,
                         SH_EGRESS_ALLOW);
        ck_assert_int_eq(sh_egress_judge_addr(&p, NULL, IP(198, 51, 100, 8)).action,
                         SH_EGRESS_DENY);
        /* CIDR rules judge no name, name rules no address */
        ck_assert_int_eq(name_action(&p, NULL, "example.com"), SH_EGRESS_DENY);
        sh_egress_policy_done(&p);

        p = policy("{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\",\"target\":"
                   "\"0.0.0.0/0\"}]}");
        ck_assert_int_eq(sh_egress_judge_addr(&p, NULL, IP(255, 255, 255, 255)).action,
                         SH_EGRESS_ALLOW);
        ck_assert_int_eq(sh_egress_judge_addr(&p, NULL, 0).action, SH_EGRESS_ALLOW);
        sh_egress_policy_done(&p);
}
END_TEST

/* ---- evaluation ---------------------------------------------------------------------------- */

START_TEST(test_the_first_matching_rule_wins)
{
        sh_egress_policy p = policy("{\"defaultAction\":\"allow\",\"egress\":["
                                    "{\"action\":\"allow\",\"target\":\"ok.example.com\"},"
                                    "{\"action\":\"deny\",\"target\":\"*.example.com\"},"
                                    "{\"action\":\"allow\",\"target\":\"bad.example.com\"},"
                                    "{\"action\":\"allow\",\"target\":\"10.1.2.3\"},"
                                    "{\"action\":\"deny\",\"target\":\"10.0.0.0/8\"}]}");
        sh_egress_verdict v;

        v = sh_egress_judge_name(&p, NULL, "ok.example.com", 14);
        verdict_is(v, SH_EGRESS_ALLOW, SH_EGRESS_BY_RULE);
        ck_assert_uint_eq(v.rule, 0);
        v = sh_egress_judge_name(&p, NULL, "bad.example.com", 15);
        ck_assert_int_eq(v.action, SH_EGRESS_DENY);
        ck_assert_uint_eq(v.rule, 1);
        v = sh_egress_judge_addr(&p, NULL, IP(10, 1, 2, 3));
        ck_assert_int_eq(v.action, SH_EGRESS_ALLOW);
        ck_assert_uint_eq(v.rule, 3);
        v = sh_egress_judge_addr(&p, NULL, IP(10, 1, 2, 4));
        ck_assert_int_eq(v.action, SH_EGRESS_DENY);
        ck_assert_uint_eq(v.rule, 4);
        sh_egress_policy_done(&p);
}
END_TEST

START_TEST(test_no_matching_rule_means_the_default_action)
{
        sh_egress_policy p = policy("{\"defaultAction\":\"deny\",\"egress\":"
                                    "[{\"action\":\"allow\",\"target\":\"pypi.org\"}]}");
        sh_egress_verdict v = sh_egress_judge_name(&p, NULL, "www.github.com", 14);

        verdict_is(v, SH_EGRESS_DENY, SH_EGRESS_BY_DEFAULT);
        ck_assert_int_eq(name_action(&p, NULL, "PYPI.ORG."), SH_EGRESS_ALLOW);
        v = sh_egress_judge_addr(&p, NULL, IP(192, 0, 2, 1));
        verdict_is(v, SH_EGRESS_DENY, SH_EGRESS_BY_DEFAULT);
        sh_egress_policy_done(&p);

        p = policy("{\"defaultAction\":\"allow\",\"egress\":"
                   "[{\"action\":\"deny\",\"target\":\"bad.example.com\"}]}");
        ck_assert_int_eq(name_action(&p, NULL, "www.github.com"), SH_EGRESS_ALLOW);
        ck_assert_int_eq(name_action(&p, NULL, "bad.example.com"), SH_EGRESS_DENY);
        ck_assert_int_eq(sh_egress_judge_addr(&p, NULL, IP(192, 0, 2, 1)).action, SH_EGRESS_ALLOW);
        sh_egress_policy_done(&p);
}
END_TEST

START_TEST(test_no_or_an_empty_network_policy_is_allow_all_else_the_default_is_deny)
{
        const char *allow_all[] = {NULL, "null", "{}", "{\"defaultAction\":null,\"egress\":null}",
                                   "{\"other\":1}"};

        for (size_t i = 0; i < sizeof(allow_all) / sizeof(allow_all[0]); i++) {
                sh_egress_policy p = policy(allow_all[i]);
                cJSON *j = allow_all[i] ? cJSON_Parse(allow_all[i]) : NULL;

                ck_assert(sh_egress_policy_json_empty(j));
                cJSON_Delete(j);

                ck_assert_msg(p.default_action == SH_EGRESS_ALLOW && p.rules.n == 0, "%s",
                              allow_all[i] ? allow_all[i] : "absent");
                ck_assert_str_eq(sh_egress_policy_mode(&p), "allow_all");
                sh_egress_policy_done(&p);
        }
        sh_egress_policy p = policy("{\"egress\":[]}");
        cJSON *j = cJSON_Parse("{\"egress\":[]}");

        ck_assert(!sh_egress_policy_json_empty(j));
        cJSON_Delete(j);
        ck_assert_int_eq(p.default_action, SH_EGRESS_DENY);
        ck_assert_str_eq(sh_egress_policy_mode(&p), "deny_all");
        sh_egress_policy_done(&p);
}
END_TEST

START_TEST(test_a_refused_network_policy_names_the_member_and_why)
{
        ck_assert_str_eq(policy_refusal("[]"),
                         "networkPolicy is an object: {\"defaultAction\", \"egress\"}");
        ck_assert_str_eq(policy_refusal("{\"defaultAction\":\"Allow\"}"),
                         "networkPolicy.defaultAction is \"allow\" or \"deny\"");
        ck_assert_str_eq(policy_refusal("{\"defaultAction\":true}"),
                         "networkPolicy.defaultAction is \"allow\" or \"deny\"");
        ck_assert_str_eq(policy_refusal("{\"egress\":{}}"),
                         "networkPolicy.egress is a list of rules");
        ck_assert_str_eq(policy_refusal("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.b\"},"
                                        "{\"action\":\"permit\",\"target\":\"a.b\"}]}"),
                         "networkPolicy.egress[1].action is \"allow\" or \"deny\"");
        ck_assert_str_eq(policy_refusal("{\"egress\":[{\"action\":\"deny\"}]}"),
                         "networkPolicy.egress[0].target is a string: a name, *.name or IPv4 "
                         "CIDR");
        ck_assert_str_eq(policy_refusal("{\"egress\":[{\"action\":\"deny\",\"target\":7}]}"),
                         "networkPolicy.egress[0].target is a string: a name, *.name or IPv4 "
                         "CIDR");
        ck_assert_str_eq(policy_refusal("{\"egress\":[\"pypi.org\"]}"),
                         "networkPolicy.egress[0] is not a rule: {\"action\": \"allow\" | "
                         "\"deny\", \"target\": <name, *.name or IPv4 CIDR>}");
        ck_assert_str_eq(policy_refusal("{\"egress\":[{\"action\":\"deny\",\"target\":\"a..b\"}]}"),
                         "networkPolicy.egress[0].target 'a..b' is not a name: a label is empty");
        ck_assert_str_eq(policy_refusal("{\"egress\":[{\"action\":\"deny\",\"target\":\"1.2.3.4/"
                                        "40\"}]}"),
                         "networkPolicy.egress[0].target '1.2.3.4/40' is not an IPv4 CIDR: the "
                         "prefix is 0 to 32, without leading zeros");
}
END_TEST

START_TEST(test_duplicate_targets_at_create_keep_the_first)
{
        sh_egress_policy p = policy("{\"defaultAction\":\"deny\",\"egress\":["
                                    "{\"action\":\"allow\",\"target\":\"PyPI.org\"},"
                                    "{\"action\":\"deny\",\"target\":\"pypi.org.\"}]}");

        ck_assert_str_eq(json_of(&p), "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":"
                                      "\"allow\",\"target\":\"pypi.org\"}]}");
        sh_egress_policy_done(&p);
}
END_TEST

/* ---- the operator's lists ------------------------------------------------------------------ */

START_TEST(test_the_operator_deny_list_wins_over_an_allowing_rule)
{
        sh_egress_operator op = operator(NULL, "*.internal.example");
        sh_egress_policy p = policy("{\"defaultAction\":\"allow\",\"egress\":["
                                    "{\"action\":\"allow\",\"target\":\"169.254.169.254\"},"
                                    "{\"action\":\"allow\",\"target\":\"10.0.0.0/8\"}]}");
        sh_egress_verdict v = sh_egress_judge_addr(&p, &op, IP(169, 254, 169, 254));

        verdict_is(v, SH_EGRESS_DENY, SH_EGRESS_BY_OPERATOR_DENY);
        ck_assert_int_eq(sh_egress_judge_addr(&p, &op, IP(10, 9, 8, 7)).action, SH_EGRESS_DENY);
        ck_assert_int_eq(sh_egress_judge_addr(&p, &op, IP(127, 0, 0, 1)).action, SH_EGRESS_DENY);
        ck_assert_int_eq(sh_egress_judge_addr(&p, &op, IP(203, 0, 113, 9)).action, SH_EGRESS_ALLOW);
        sh_egress_policy_done(&p);
        sh_egress_operator_done(&op);

        /* a name on the deny list */
        op = operator("*.corp.example,metadata.google.internal", NULL);
        p = policy("{\"defaultAction\":\"allow\",\"egress\":"
                   "[{\"action\":\"allow\",\"target\":\"git.corp.example\"}]}");
        v = sh_egress_judge_name(&p, &op, "git.corp.example", 16);
        verdict_is(v, SH_EGRESS_DENY, SH_EGRESS_BY_OPERATOR_DENY);
        ck_assert_int_eq(name_action(&p, &op, "Metadata.Google.Internal."), SH_EGRESS_DENY);
        sh_egress_policy_done(&p);
        sh_egress_operator_done(&op);
}
END_TEST

START_TEST(test_the_operator_allow_list_is_granted_over_a_denying_policy)
{
        sh_egress_operator op = operator(NULL, "mirror.example.org, 198.51.100.0/24");
        sh_egress_policy p = policy("{\"defaultAction\":\"deny\",\"egress\":"
                                    "[{\"action\":\"deny\",\"target\":\"mirror.example.org\"},"
                                    "{\"action\":\"deny\",\"target\":\"198.51.100.0/24\"}]}");
        sh_egress_verdict v = sh_egress_judge_name(&p, &op, "mirror.example.org", 18);

        verdict_is(v, SH_EGRESS_ALLOW, SH_EGRESS_BY_OPERATOR_ALLOW);
        v = sh_egress_judge_addr(&p, &op, IP(198, 51, 100, 20));
        verdict_is(v, SH_EGRESS_ALLOW, SH_EGRESS_BY_OPERATOR_ALLOW);
        /* the answers of an operator-allowed name: granted, a sandbox rule cannot take them */
        v = sh_egress_judge_answer(&p, &op, "mirror.example.org", 18, IP(203, 0, 113, 5));
        verdict_is(v, SH_EGRESS_ALLOW, SH_EGRESS_BY_OPERATOR_ALLOW);
        sh_egress_policy_done(&p);
        sh_egress_operator_done(&op);
}
END_TEST

START_TEST(test_an_allowed_name_answered_with_a_denied_address_stays_denied)
{
        sh_egress_operator op = operator(NULL, "mirror.example.org");
        sh_egress_policy p = policy("{\"defaultAction\":\"deny\",\"egress\":"
                                    "[{\"action\":\"allow\",\"target\":\"pypi.org\"}]}");
        const uint32_t rebinds[] = {IP(169, 254, 169, 254), IP(127, 0, 0, 1),      IP(10, 0, 0, 1),
                                    IP(192, 168, 1, 1),     IP(100, 64, 0, 2),     IP(0, 0, 0, 0),
                                    IP(224, 0, 0, 1),       IP(255, 255, 255, 255)};

        for (size_t i = 0; i < sizeof(rebinds) / sizeof(rebinds[0]); i++) {
                sh_egress_verdict v = sh_egress_judge_answer(&p, &op, "pypi.org", 8, rebinds[i]);

                verdict_is(v, SH_EGRESS_DENY, SH_EGRESS_BY_OPERATOR_DENY);
                v = sh_egress_judge_answer(&p, &op, "mirror.example.org", 18, rebinds[i]);
                ck_assert_int_eq(v.action, SH_EGRESS_DENY);
        }
        /* the pod's own address, added at run time */
        ck_assert_int_eq(sh_egress_list_add_cidr(&op.deny, IP(198, 51, 100, 77), 32, NULL), 0);
        ck_assert_int_eq(
                sh_egress_judge_answer(&p, &op, "pypi.org", 8, IP(198, 51, 100, 77)).action,
                SH_EGRESS_DENY);
        ck_assert_int_eq(
                sh_egress_judge_answer(&p, &op, "pypi.org", 8, IP(151, 101, 0, 223)).action,
                SH_EGRESS_ALLOW);
        sh_egress_policy_done(&p);
        sh_egress_operator_done(&op);
}
END_TEST

START_TEST(test_an_answer_opens_an_allowed_names_address_unless_a_cidr_rule_denies_it)
{
        sh_egress_policy p = policy("{\"defaultAction\":\"deny\",\"egress\":["
                                    "{\"action\":\"deny\",\"target\":\"203.0.113.0/24\"},"
                                    "{\"action\":\"allow\",\"target\":\"pypi.org\"}]}");
        sh_egress_verdict v = sh_egress_judge_answer(&p, NULL, "pypi.org", 8, IP(192, 0, 2, 10));

        verdict_is(v, SH_EGRESS_ALLOW, SH_EGRESS_BY_RULE);
        ck_assert_uint_eq(v.rule, 1);
        v = sh_egress_judge_answer(&p, NULL, "pypi.org", 8, IP(203, 0, 113, 10));
        ck_assert_int_eq(v.action, SH_EGRESS_DENY);
        ck_assert_uint_eq(v.rule, 0);
        v = sh_egress_judge_answer(&p, NULL, "www.github.com", 14, IP(192, 0, 2, 10));
        verdict_is(v, SH_EGRESS_DENY, SH_EGRESS_BY_DEFAULT);
        sh_egress_policy_done(&p);
}
END_TEST

START_TEST(test_a_queried_name_may_hold_underscores_but_garbage_is_denied)
{
        sh_egress_policy p = policy(NULL);
        const char bad[] = {'a', '\0', 'b', '.', 'c', 'o', 'm'};
        sh_egress_verdict v;

        ck_assert_int_eq(name_action(&p, NULL, "_http._tcp.example.com"), SH_EGRESS_ALLOW);
        v = sh_egress_judge_name(&p, NULL, bad, sizeof(bad));
        verdict_is(v, SH_EGRESS_DENY, SH_EGRESS_BY_INVALID);
        ck_assert_int_eq(sh_egress_judge_name(&p, NULL, "a b.com", 7).by, SH_EGRESS_BY_INVALID);
        ck_assert_int_eq(sh_egress_judge_name(&p, NULL, "1.2.3.4", 7).by, SH_EGRESS_BY_INVALID);
        ck_assert_int_eq(sh_egress_judge_name(&p, NULL, "", 0).by, SH_EGRESS_BY_INVALID);
        ck_assert_int_eq(sh_egress_judge_name(&p, NULL, NULL, 3).by, SH_EGRESS_BY_INVALID);
        sh_egress_policy_done(&p);
}
END_TEST

START_TEST(test_operator_lists_are_read_from_their_settings)
{
        sh_egress_list l = {0};
        sh_error *err = NULL;

        ck_assert_int_eq(sh_egress_list_parse(&l, "SANDBOX_HOST_EGRESS_ALLOW",
                                              " Mirror.Example.org ,,\t10.1.2.3/16, *.ok.test,",
                                              &err),
                         0);
        ck_assert_uint_eq(l.n, 3);
        ck_assert_str_eq(l.v[0].text, "mirror.example.org");
        ck_assert_str_eq(l.v[1].text, "10.1.0.0/16");
        ck_assert_str_eq(l.v[2].text, "*.ok.test");
        /* a refusal names the setting and the entry, and leaves the list as it was */
        ck_assert_int_lt(sh_egress_list_parse(&l, "SANDBOX_HOST_EGRESS_ALLOW", "a.b,c..d", &err),
                         0);
        ck_assert_int_eq(err->kind, SH_E_SETTING);
        ck_assert_str_eq(err->msg, "invalid SANDBOX_HOST_EGRESS_ALLOW: 'c..d' is not a name: a "
                                   "label is empty");
        sh_error_release(&err);
        ck_assert_uint_eq(l.n, 3);
        sh_egress_list_done(&l);
        ck_assert_int_eq(sh_egress_list_parse(&l, "X", "", NULL), 0);
        ck_assert_uint_eq(l.n, 0);
        ck_assert_int_eq(sh_egress_list_parse(&l, "X", NULL, NULL), 0);
        ck_assert_uint_eq(l.n, 0);
}
END_TEST

START_TEST(test_the_default_deny_list_is_the_settings_default_and_covers_the_private_ranges)
{
        char *argv[] = {(char *)"sandbox-host", NULL};
        sh_egress_operator op = operator(NULL, NULL);
        sh_egress_policy p = policy(NULL);
        const uint32_t denied[] = {IP(0, 1, 2, 3),        IP(127, 0, 0, 1),  IP(169, 254, 169, 254),
                                   IP(10, 255, 0, 1),     IP(172, 16, 0, 1), IP(172, 31, 255, 255),
                                   IP(192, 168, 0, 1),    IP(100, 64, 0, 1), IP(100, 127, 255, 254),
                                   IP(224, 0, 0, 251),    IP(239, 1, 1, 1),  IP(240, 0, 0, 1),
                                   IP(255, 255, 255, 255)};
        const uint32_t allowed[] = {IP(1, 1, 1, 1), IP(172, 32, 0, 1), IP(100, 128, 0, 1),
                                    IP(192, 0, 2, 1), IP(223, 255, 255, 255)};
        sh_config c;
        char *msg = NULL;

        for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
                ck_assert_msg(sh_egress_judge_addr(&p, &op, denied[i]).action == SH_EGRESS_DENY,
                              "%08x allowed", denied[i]);
        for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
                ck_assert_msg(sh_egress_judge_addr(&p, &op, allowed[i]).action == SH_EGRESS_ALLOW,
                              "%08x denied", allowed[i]);
        ck_assert_uint_eq(op.allow.n, 0);
        /* core/config.c's default is this module's */
        ck_assert_int_eq(sh_config_parse(&c, 1, argv, NULL, &msg), SH_CONFIG_OK);
        ck_assert_str_eq(c.egress_deny, SH_EGRESS_DENY_DEFAULT);
        ck_assert_ptr_null(c.egress_allow);
        sh_config_done(&c);
        sh_egress_policy_done(&p);
        sh_egress_operator_done(&op);
}
END_TEST

START_TEST(test_the_egress_settings_are_read_from_variables_and_flags)
{
        char *argv[] = {(char *)"sandbox-host", (char *)"--egress-allow=pypi.org", NULL};
        char *envp[] = {
                (char *)"SANDBOX_HOST_EGRESS_DENY=", (char *)"SANDBOX_HOST_EGRESS_ALLOW=x.y", NULL};
        sh_config c;
        char *msg = NULL;
        const char *help = sh_config_help();

        ck_assert_int_eq(sh_config_parse(&c, 2, argv, envp, &msg), SH_CONFIG_OK);
        ck_assert_str_eq(c.egress_deny, "");
        ck_assert_str_eq(c.egress_allow, "pypi.org");
        sh_config_done(&c);
        ck_assert_ptr_nonnull(strstr(help, "--egress-deny"));
        ck_assert_ptr_nonnull(strstr(help, "SANDBOX_HOST_EGRESS_ALLOW"));
        ck_assert_ptr_nonnull(strstr(help, "--version"));
}
END_TEST

START_TEST(test_run_time_deny_entries_have_their_host_bits_cleared_and_are_bounded)
{
        sh_egress_list l = {0};
        sh_error *err = NULL;

        ck_assert_int_eq(sh_egress_list_add_cidr(&l, IP(100, 64, 3, 9), 16, &err), 0);
        ck_assert_str_eq(l.v[0].text, "100.64.0.0/16");
        ck_assert_int_lt(sh_egress_list_add_cidr(&l, 0, 33, &err), 0);
        ck_assert_int_eq(err->kind, SH_E_INVALID);
        sh_error_release(&err);
        for (int i = 1; i < SH_EGRESS_OPERATOR_MAX; i++)
                ck_assert_int_eq(sh_egress_list_add_cidr(&l, (uint32_t)i, 32, NULL), 0);
        ck_assert_int_lt(sh_egress_list_add_cidr(&l, 0, 32, &err), 0);
        sh_error_release(&err);
        ck_assert_int_lt(sh_egress_list_parse(&l, "SANDBOX_HOST_EGRESS_DENY", "a.b", &err), 0);
        ck_assert_str_eq(err->msg, "invalid SANDBOX_HOST_EGRESS_DENY: more than 1024 entries");
        sh_error_release(&err);
        ck_assert_uint_eq(l.n, SH_EGRESS_OPERATOR_MAX);
        sh_egress_list_done(&l);
}
END_TEST

/* ---- PATCH and DELETE ---------------------------------------------------------------------- */

START_TEST(test_a_patch_puts_incoming_rules_first_and_replaces_their_targets)
{
        sh_egress_policy p = policy("{\"defaultAction\":\"deny\",\"egress\":["
                                    "{\"action\":\"allow\",\"target\":\"a.test\"},"
                                    "{\"action\":\"allow\",\"target\":\"b.test\"},"
                                    "{\"action\":\"deny\",\"target\":\"c.test\"}]}");
        sh_egress_rules in = rules("[{\"action\":\"deny\",\"target\":\"B.test.\"},"
                                   "{\"action\":\"allow\",\"target\":\"d.test\"}]");

        ck_assert_int_eq(sh_egress_policy_patch(&p, &in, NULL), 0);
        ck_assert_str_eq(json_of(&p), "{\"defaultAction\":\"deny\",\"egress\":["
                                      "{\"action\":\"deny\",\"target\":\"b.test\"},"
                                      "{\"action\":\"allow\",\"target\":\"d.test\"},"
                                      "{\"action\":\"allow\",\"target\":\"a.test\"},"
                                      "{\"action\":\"deny\",\"target\":\"c.test\"}]}");
        ck_assert_int_eq(name_action(&p, NULL, "b.test"), SH_EGRESS_DENY);
        sh_egress_rules_done(&in);
        sh_egress_policy_done(&p);
}
END_TEST

START_TEST(test_the_first_of_duplicate_targets_in_a_patch_wins)
{
        sh_egress_policy p = policy(NULL);
        sh_egress_rules in = rules("[{\"action\":\"allow\",\"target\":\"example.com\"},"
                                   "{\"action\":\"deny\",\"target\":\"example.com\"}]");

        ck_assert_uint_eq(in.n, 1);
        ck_assert_int_eq(sh_egress_policy_patch(&p, &in, NULL), 0);
        ck_assert_str_eq(json_of(&p), "{\"defaultAction\":\"allow\",\"egress\":[{\"action\":"
                                      "\"allow\",\"target\":\"example.com\"}]}");
        ck_assert_str_eq(sh_egress_policy_mode(&p), "rules");
        sh_egress_rules_done(&in);
        sh_egress_policy_done(&p);
}
END_TEST

/* Rules "<prefix><i>.test" for i in [from, to), each with action a. */
static sh_egress_rules numbered(int from, int to, const char *prefix, sh_egress_action a)
{
        sh_egress_rules r = {.v = calloc((size_t)(to - from), sizeof(*r.v))};

        ck_assert_ptr_nonnull(r.v);
        for (int i = from; i < to; i++) {
                const char *why;
                char t[32];

                snprintf(t, sizeof(t), "%s%d.test", prefix, i);
                ck_assert_int_eq(sh_egress_target_parse(t, strlen(t), &r.v[r.n].target, &why), 0);
                r.v[r.n++].action = a;
        }
        return r;
}

START_TEST(test_a_patch_past_the_bound_is_refused_and_changes_nothing)
{
        sh_egress_policy p = policy(NULL);
        sh_egress_rules in = numbered(0, 200, "h", SH_EGRESS_DENY);
        sh_error *err = NULL;

        /* 200 rules, then 100 of which 50 replace old ones: 250, fine; then 7 new: 257 */
        ck_assert_int_eq(sh_egress_policy_patch(&p, &in, NULL), 0);
        sh_egress_rules_done(&in);
        in = numbered(150, 250, "h", SH_EGRESS_ALLOW);
        ck_assert_int_eq(sh_egress_policy_patch(&p, &in, NULL), 0);
        sh_egress_rules_done(&in);
        ck_assert_uint_eq(p.rules.n, 250);
        ck_assert_int_eq(name_action(&p, NULL, "h150.test"), SH_EGRESS_ALLOW);
        ck_assert_int_eq(name_action(&p, NULL, "h149.test"), SH_EGRESS_DENY);

        in = numbered(0, 7, "n", SH_EGRESS_DENY);
        ck_assert_int_lt(sh_egress_policy_patch(&p, &in, &err), 0);
        ck_assert_int_eq(err->kind, SH_E_INVALID);
        ck_assert_str_eq(err->msg, "the policy would hold 257 rules, at most 256");
        sh_error_release(&err);
        ck_assert_uint_eq(p.rules.n, 250);
        ck_assert_str_eq(p.rules.v[0].target.text, "h150.test");
        ck_assert_str_eq(p.rules.v[249].target.text, "h149.test");
        ck_assert_int_eq(name_action(&p, NULL, "n0.test"), SH_EGRESS_ALLOW);
        sh_egress_rules_done(&in);
        sh_egress_policy_done(&p);
}
END_TEST

/* The reason a PATCH body (`targets` false) or a DELETE body is refused; it leaves nothing. */
static char *body_refusal(const char *json, bool targets)
{
        static char msg[512];
        cJSON *j = cJSON_Parse(json);
        sh_egress_rules r = {0};
        sh_egress_list l = {0};
        sh_error *err = NULL;

        ck_assert_ptr_nonnull(j);
        if (targets)
                ck_assert_int_lt(sh_egress_targets_from_json(j, &l, &err), 0);
        else
                ck_assert_int_lt(sh_egress_rules_from_json(j, &r, &err), 0);
        ck_assert_ptr_null(r.v);
        ck_assert_ptr_null(l.v);
        ck_assert_int_eq(err->kind, SH_E_INVALID);
        snprintf(msg, sizeof(msg), "%s", err->msg);
        sh_error_release(&err);
        cJSON_Delete(j);
        return msg;
}

START_TEST(test_a_patch_body_is_a_non_empty_list_of_rules)
{
        const char *bad[][2] = {
                {"{}", "the body is a non-empty list of {\"action\": \"allow\" | \"deny\", "
                       "\"target\"} rules"},
                {"[]", "the body is a non-empty list of {\"action\": \"allow\" | \"deny\", "
                       "\"target\"} rules"},
                {"[{\"action\":\"allow\",\"target\":\"a.b\"},{\"action\":\"deny\","
                 "\"target\":\"*\"}]",
                 "[1].target '*' is not a wildcard: '*' is only a first label of its own "
                 "(\"*.example.com\")"},
                {"[{\"target\":\"a.b\"}]", "[0].action is \"allow\" or \"deny\""},
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_str_eq(body_refusal(bad[i][0], false), bad[i][1]);
}
END_TEST

START_TEST(test_delete_removes_its_targets_and_is_idempotent)
{
        sh_egress_policy p = policy("{\"defaultAction\":\"allow\",\"egress\":["
                                    "{\"action\":\"deny\",\"target\":\"bad.example.com\"},"
                                    "{\"action\":\"deny\",\"target\":\"*.blocked.org\"},"
                                    "{\"action\":\"deny\",\"target\":\"10.0.0.0/8\"}]}");
        cJSON *j = cJSON_Parse("[\"BAD.example.com.\",\"*.blocked.org\",\"10.9.9.9/8\","
                               "\"never.there\"]");
        sh_egress_list t = {0};

        ck_assert_int_eq(sh_egress_targets_from_json(j, &t, NULL), 0);
        ck_assert_uint_eq(sh_egress_policy_delete(&p, &t), 3);
        ck_assert_str_eq(json_of(&p), "{\"defaultAction\":\"allow\",\"egress\":[]}");
        ck_assert_str_eq(sh_egress_policy_mode(&p), "allow_all");
        ck_assert_uint_eq(sh_egress_policy_delete(&p, &t), 0);
        ck_assert_str_eq(json_of(&p), "{\"defaultAction\":\"allow\",\"egress\":[]}");
        sh_egress_list_done(&t);
        cJSON_Delete(j);
        sh_egress_policy_done(&p);
}
END_TEST

START_TEST(test_a_delete_body_is_a_non_empty_list_of_targets)
{
        const char *bad[][2] = {
                {"\"a.b\"", "the body is a non-empty list of targets (names, *.names or IPv4 "
                            "CIDRs)"},
                {"[]", "the body is a non-empty list of targets (names, *.names or IPv4 CIDRs)"},
                {"[\"a.b\",3]", "[1] is not a string: a name, *.name or IPv4 CIDR"},
                {"[\"a.b\",\"300.1.1.1\"]",
                 "[1] '300.1.1.1' is not an IPv4 address or CIDR: an octet is 0 to 255, without "
                 "leading zeros"},
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_str_eq(body_refusal(bad[i][0], true), bad[i][1]);
}
END_TEST

/* ---- bounds and hostile strings ------------------------------------------------------------ */

static cJSON *many_rules(int n)
{
        cJSON *arr = cJSON_CreateArray();

        for (int i = 0; i < n; i++) {
                cJSON *r = cJSON_CreateObject();
                char t[32];

                snprintf(t, sizeof(t), "h%d.test", i);
                cJSON_AddStringToObject(r, "action", "deny");
                cJSON_AddStringToObject(r, "target", t);
                cJSON_AddItemToArray(arr, r);
        }
        return arr;
}

START_TEST(test_rule_counts_and_target_lengths_are_bounded)
{
        cJSON *arr = many_rules(SH_EGRESS_RULES_MAX), *np = cJSON_CreateObject();
        sh_egress_policy p;
        sh_egress_rules r;
        sh_error *err = NULL;
        char big[1100];

        cJSON_AddItemToObject(np, "egress", arr);
        ck_assert_int_eq(sh_egress_policy_from_json(np, &p, &err), 0);
        ck_assert_uint_eq(p.rules.n, SH_EGRESS_RULES_MAX);
        sh_egress_policy_done(&p);
        cJSON_AddItemToArray(arr, cJSON_CreateString("x"));
        ck_assert_int_lt(sh_egress_policy_from_json(np, &p, &err), 0);
        ck_assert_str_eq(err->msg, "networkPolicy.egress holds 257 rules, at most 256");
        sh_error_release(&err);
        ck_assert_int_lt(sh_egress_rules_from_json(arr, &r, &err), 0);
        ck_assert_str_eq(err->msg, "the list holds 257 rules, at most 256");
        sh_error_release(&err);
        cJSON_Delete(np);

        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        ck_assert_str_eq(refusal(big), "is longer than 255 bytes");
        big[255] = '\0';
        ck_assert_str_eq(refusal(big), "is not a name: it is longer than 253 bytes");
}
END_TEST

START_TEST(test_hostile_strings_are_refused_and_quoted_printable)
{
        char msg[600];
        char *long_json = NULL;
        char big[400];

        /* control bytes, invalid UTF-8, quotes: the reason holds printable ASCII only */
        snprintf(msg, sizeof(msg), "%s",
                 policy_refusal("{\"egress\":[{\"action\":\"deny\",\"target\":\"a\\u0001\\\"b"
                                "\\u00e9\"}]}"));
        ck_assert_str_eq(msg, "networkPolicy.egress[0].target 'a?\"b?"
                              "?' is not a name: a label "
                              "holds only letters, digits and hyphens");
        for (const char *c = msg; *c; c++)
                ck_assert(*c >= 0x20 && *c < 0x7f);
        /* a long target is cut in the reason */
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        ck_assert_int_gt(
                asprintf(&long_json, "{\"egress\":[{\"action\":\"deny\",\"target\":\"%s\"}]}", big),
                0);
        snprintf(msg, sizeof(msg), "%s", policy_refusal(long_json));
        ck_assert_ptr_nonnull(strstr(msg, "...' is longer than 255 bytes"));
        ck_assert_uint_lt(strlen(msg), 160);
        free(long_json);
}
END_TEST

/* ---- what GET /policy says ----------------------------------------------------------------- */

START_TEST(test_the_status_says_the_mode_and_the_policy)
{
        sh_egress_policy p = policy("{\"defaultAction\":\"deny\",\"egress\":"
                                    "[{\"action\":\"allow\",\"target\":\"pypi.org\"}]}");
        cJSON *s = sh_egress_status_to_json(&p, "dns+nft", true);
        char *text = cJSON_PrintUnformatted(s);

        ck_assert_str_eq(text, "{\"status\":\"ok\",\"mode\":\"deny_all\",\"enforcementMode\":"
                               "\"dns+nft\",\"policy\":{\"defaultAction\":\"deny\",\"egress\":"
                               "[{\"action\":\"allow\",\"target\":\"pypi.org\"}]}}");
        free(text);
        cJSON_Delete(s);
        s = sh_egress_status_to_json(&p, "none", false);
        text = cJSON_PrintUnformatted(s);
        ck_assert_str_eq(text,
                         "{\"status\":\"ok\",\"mode\":\"deny_all\",\"enforcementMode\":\"none\"}");
        free(text);
        cJSON_Delete(s);
        sh_egress_policy_done(&p);
}
END_TEST

START_TEST(test_a_policy_allows_something_when_its_default_or_a_rule_allows)
{
        sh_egress_policy p;

        sh_egress_policy_init(&p, SH_EGRESS_DENY);
        ck_assert(!sh_egress_policy_allows_any(&p));
        ck_assert_str_eq(sh_egress_policy_mode(&p), "deny_all");
        p = policy("{\"egress\":[{\"action\":\"deny\",\"target\":\"a.b\"}]}");
        ck_assert(!sh_egress_policy_allows_any(&p));
        sh_egress_policy_done(&p);
        p = policy("{\"egress\":[{\"action\":\"deny\",\"target\":\"a.b\"},"
                   "{\"action\":\"allow\",\"target\":\"c.d\"}]}");
        ck_assert(sh_egress_policy_allows_any(&p));
        ck_assert(sh_egress_rules_allow_any(&p.rules));
        sh_egress_policy_done(&p);
        p = policy(NULL);
        ck_assert(sh_egress_policy_allows_any(&p));
        ck_assert(!sh_egress_rules_allow_any(&p.rules));
        sh_egress_policy_done(&p);
}
END_TEST

static Suite *egress_policy_suite(void)
{
        Suite *s = suite_create("egress_policy");
        TCase *t = tcase_create("targets"), *e = tcase_create("evaluation"),
              *o = tcase_create("operator"), *m = tcase_create("patch and delete"),
              *b = tcase_create("bounds");

        tcase_add_test(t, test_a_name_is_lower_cased_and_its_trailing_dot_dropped);
        tcase_add_test(t, test_a_name_breaking_rfc_1123_is_refused_with_its_reason);
        tcase_add_test(t, test_a_star_is_only_a_first_label_of_its_own);
        tcase_add_test(t, test_a_wildcard_matches_names_below_never_its_apex);
        tcase_add_test(t, test_a_wildcard_needs_room_for_a_name_below_it);
        tcase_add_test(t, test_a_cidr_is_made_canonical_its_host_bits_cleared);
        tcase_add_test(t, test_a_malformed_cidr_is_refused_with_its_reason);
        tcase_add_test(t, test_a_cidr_matches_its_addresses_only);
        suite_add_tcase(s, t);
        tcase_add_test(e, test_the_first_matching_rule_wins);
        tcase_add_test(e, test_no_matching_rule_means_the_default_action);
        tcase_add_test(e, test_no_or_an_empty_network_policy_is_allow_all_else_the_default_is_deny);
        tcase_add_test(e, test_a_refused_network_policy_names_the_member_and_why);
        tcase_add_test(e, test_duplicate_targets_at_create_keep_the_first);
        tcase_add_test(e, test_a_queried_name_may_hold_underscores_but_garbage_is_denied);
        tcase_add_test(e, test_the_status_says_the_mode_and_the_policy);
        tcase_add_test(e, test_a_policy_allows_something_when_its_default_or_a_rule_allows);
        suite_add_tcase(s, e);
        tcase_add_test(o, test_the_operator_deny_list_wins_over_an_allowing_rule);
        tcase_add_test(o, test_the_operator_allow_list_is_granted_over_a_denying_policy);
        tcase_add_test(o, test_an_allowed_name_answered_with_a_denied_address_stays_denied);
        tcase_add_test(o,
                       test_an_answer_opens_an_allowed_names_address_unless_a_cidr_rule_denies_it);
        tcase_add_test(o, test_operator_lists_are_read_from_their_settings);
        tcase_add_test(
                o,
                test_the_default_deny_list_is_the_settings_default_and_covers_the_private_ranges);
        tcase_add_test(o, test_the_egress_settings_are_read_from_variables_and_flags);
        tcase_add_test(o, test_run_time_deny_entries_have_their_host_bits_cleared_and_are_bounded);
        suite_add_tcase(s, o);
        tcase_add_test(m, test_a_patch_puts_incoming_rules_first_and_replaces_their_targets);
        tcase_add_test(m, test_the_first_of_duplicate_targets_in_a_patch_wins);
        tcase_add_test(m, test_a_patch_past_the_bound_is_refused_and_changes_nothing);
        tcase_add_test(m, test_a_patch_body_is_a_non_empty_list_of_rules);
        tcase_add_test(m, test_delete_removes_its_targets_and_is_idempotent);
        tcase_add_test(m, test_a_delete_body_is_a_non_empty_list_of_targets);
        suite_add_tcase(s, m);
        tcase_add_test(b, test_rule_counts_and_target_lengths_are_bounded);
        tcase_add_test(b, test_hostile_strings_are_refused_and_quoted_printable);
        suite_add_tcase(s, b);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(egress_policy_suite());
        int failed;

        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
