/* fuzz_egress_policy.c: a sandbox's egress policy (egress/policy.c). Modes: '0' + bytes: a
 * target; '1' + a networkPolicy JSON line + a PATCH body JSON line; '2' + a networkPolicy JSON
 * line + a DELETE body JSON line; '3' + an operator deny line + an allow line + a networkPolicy
 * JSON line + a queried name line + 4 bytes of an address. Properties: a target that parses is
 * canonical (its text parses again to itself, a name at most 253 bytes of lower-case letters,
 * digits, hyphens and dots, a CIDR without host bits); a refusal has a reason and leaves
 * nothing allocated; a policy holds at most SH_EGRESS_RULES_MAX rules of distinct targets and
 * survives its JSON (to_json then from_json is the same policy); a PATCH puts its rules first
 * and keeps the old ones it does not name; after a DELETE no rule has a deleted target and a
 * second DELETE removes nothing; the operator's deny list wins every verdict, an answer is
 * opened only for a name that is allowed and an address the deny list does not hold. */
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <errno.h>

#include "sh/error.h"
#include "sh/policy.h"

static cJSON *json_line(fz *f)
{
        char *l = fz_line(f);
        cJSON *j = cJSON_ParseWithLength(l, strlen(l));

        free(l);
        return j;
}

static void check_target(const sh_egress_target *t)
{
        sh_egress_target again;
        const char *why = NULL;
        size_t n = strlen(t->text);

        FZ_CHECK(n > 0 && n <= SH_EGRESS_NAME_MAX);
        FZ_CHECK(sh_egress_target_parse(t->text, n, &again, &why) == 0);
        FZ_CHECK(strcmp(again.text, t->text) == 0 && again.kind == t->kind);
        if (t->kind == SH_EGRESS_CIDR) {
                FZ_CHECK(t->prefix <= 32 && again.net == t->net && again.prefix == t->prefix);
                FZ_CHECK(t->prefix == 32 || (t->net & (0xffffffffu >> t->prefix)) == 0);
        } else {
                for (const char *c = t->text + (t->kind == SH_EGRESS_WILDCARD ? 2 : 0); *c; c++)
                        FZ_CHECK((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
                                 *c == '-' || *c == '.');
        }
        sh_egress_target_done(&again);
}

static void check_policy(const sh_egress_policy *p)
{
        sh_egress_policy again;
        sh_error *err = NULL;
        cJSON *j;
        char *a, *b;

        FZ_CHECK(p->rules.n <= SH_EGRESS_RULES_MAX);
        for (size_t i = 0; i < p->rules.n; i++) {
                check_target(&p->rules.v[i].target);
                for (size_t k = 0; k < i; k++)
                        FZ_CHECK(strcmp(p->rules.v[k].target.text, p->rules.v[i].target.text));
        }
        j = sh_egress_policy_to_json(p);
        FZ_CHECK(j);
        FZ_CHECK(sh_egress_policy_from_json(j, &again, &err) == 0);
        cJSON_Delete(j);
        j = sh_egress_policy_to_json(&again);
        a = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        j = sh_egress_policy_to_json(p);
        b = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        /* an allow-all policy writes {"defaultAction":"allow","egress":[]}: the same */
        FZ_CHECK(a && b && strcmp(a, b) == 0);
        free(a);
        free(b);
        sh_egress_policy_done(&again);
}

/* A policy from a JSON line, or NULL when it is refused (then with a reason). */
static bool policy_line(fz *f, sh_egress_policy *ret)
{
        cJSON *j = json_line(f);
        sh_error *err = NULL;
        int r = sh_egress_policy_from_json(j, ret, &err);

        cJSON_Delete(j);
        if (r < 0) {
                FZ_CHECK(err && err->msg && err->msg[0]);
                sh_error_release(&err);
                return false;
        }
        check_policy(ret);
        return true;
}

static void target(fz *f)
{
        sh_egress_target t = {0};
        const char *s, *why = NULL;
        size_t n = fz_take(f, f->n, &s);
        char *copy = fz_dup(s, n);

        if (sh_egress_target_parse(copy, n, &t, &why) == 0) {
                check_target(&t);
                sh_egress_target_done(&t);
        } else {
                FZ_CHECK(why && why[0] && !t.text);
        }
        free(copy);
}

static void patch(fz *f)
{
        sh_egress_policy p;
        sh_egress_rules in = {0};
        sh_error *err = NULL;
        char **before;
        size_t n;
        cJSON *j;

        if (!policy_line(f, &p))
                return;
        j = json_line(f);
        if (sh_egress_rules_from_json(j, &in, &err) < 0) {
                FZ_CHECK(err && err->msg[0] && !in.v);
                sh_error_release(&err);
                goto out;
        }
        FZ_CHECK(in.n >= 1 && in.n <= SH_EGRESS_RULES_MAX);
        n = p.rules.n;
        before = calloc(n + 1, sizeof(*before));
        FZ_CHECK(before);
        /* copies: a successful patch frees the old rules */
        for (size_t i = 0; i < n; i++)
                FZ_CHECK((before[i] = strdup(p.rules.v[i].target.text)));
        if (sh_egress_policy_patch(&p, &in, &err) == 0) {
                check_policy(&p);
                for (size_t i = 0; i < in.n; i++)
                        FZ_CHECK(strcmp(p.rules.v[i].target.text, in.v[i].target.text) == 0 &&
                                 p.rules.v[i].action == in.v[i].action);
                for (size_t i = 0; i < n; i++) {
                        bool found = false;

                        for (size_t k = 0; k < p.rules.n && !found; k++)
                                found = strcmp(p.rules.v[k].target.text, before[i]) == 0;
                        FZ_CHECK(found);
                }
        } else {
                FZ_CHECK(err && err->kind == SH_E_INVALID && p.rules.n == n);
                sh_error_release(&err);
        }
        for (size_t i = 0; i < n; i++)
                free(before[i]);
        free(before);
out:
        cJSON_Delete(j);
        sh_egress_rules_done(&in);
        sh_egress_policy_done(&p);
}

static void delete (fz *f)
{
        sh_egress_policy p;
        sh_egress_list t = {0};
        sh_error *err = NULL;
        cJSON *j;

        if (!policy_line(f, &p))
                return;
        j = json_line(f);
        if (sh_egress_targets_from_json(j, &t, &err) < 0) {
                FZ_CHECK(err && err->msg[0] && !t.v);
                sh_error_release(&err);
        } else {
                size_t n = p.rules.n, gone = sh_egress_policy_delete(&p, &t);

                FZ_CHECK(gone <= n && p.rules.n == n - gone);
                for (size_t i = 0; i < p.rules.n; i++)
                        for (size_t k = 0; k < t.n; k++)
                                FZ_CHECK(strcmp(p.rules.v[i].target.text, t.v[k].text) != 0);
                FZ_CHECK(sh_egress_policy_delete(&p, &t) == 0);
                check_policy(&p);
        }
        cJSON_Delete(j);
        sh_egress_list_done(&t);
        sh_egress_policy_done(&p);
}

static void judge(fz *f)
{
        char *deny = fz_line(f), *allow = fz_line(f), *name;
        sh_egress_operator op;
        sh_egress_policy p;
        sh_egress_verdict vn, va, vs;
        sh_error *err = NULL;
        uint32_t addr;

        if (sh_egress_operator_parse(&op, deny, allow, &err) < 0) {
                FZ_CHECK(err && err->kind == SH_E_SETTING && !op.deny.v && !op.allow.v);
                sh_error_release(&err);
                free(deny);
                free(allow);
                return;
        }
        free(deny);
        free(allow);
        if (!policy_line(f, &p)) {
                sh_egress_operator_done(&op);
                return;
        }
        name = fz_line(f);
        addr = fz_u32(f);
        vn = sh_egress_judge_name(&p, &op, name, strlen(name));
        va = sh_egress_judge_addr(&p, &op, addr);
        vs = sh_egress_judge_answer(&p, &op, name, strlen(name), addr);
        for (size_t i = 0; i < op.deny.n; i++)
                if (op.deny.v[i].kind == SH_EGRESS_CIDR &&
                    (addr & (op.deny.v[i].prefix ? 0xffffffffu << (32 - op.deny.v[i].prefix)
                                                 : 0)) == op.deny.v[i].net)
                        FZ_CHECK(va.action == SH_EGRESS_DENY && vs.action == SH_EGRESS_DENY);
        if (vs.action == SH_EGRESS_ALLOW)
                FZ_CHECK(vn.action == SH_EGRESS_ALLOW && va.by != SH_EGRESS_BY_OPERATOR_DENY);
        if (vn.by == SH_EGRESS_BY_RULE)
                FZ_CHECK(vn.rule < p.rules.n && p.rules.v[vn.rule].target.kind != SH_EGRESS_CIDR);
        if (va.by == SH_EGRESS_BY_RULE)
                FZ_CHECK(va.rule < p.rules.n && p.rules.v[va.rule].target.kind == SH_EGRESS_CIDR);
        free(name);
        sh_egress_policy_done(&p);
        sh_egress_operator_done(&op);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);

        switch (fz_mode(&f, 4)) {
        case 0:
                target(&f);
                break;
        case 1:
                patch(&f);
                break;
        case 2:
                delete (&f);
                break;
        default:
                judge(&f);
                break;
        }
        return 0;
}
