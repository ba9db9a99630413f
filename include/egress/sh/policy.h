/* policy.h: a /v1 sandbox's egress policy and the operator's lists that bound every policy
 * (OPENSANDBOX.md section 2 `networkPolicy`, section 4; egress-api.yaml): the rules, parsed from
 * a create's `networkPolicy` and the egress API's PATCH and DELETE bodies with a precise reason
 * for each refusal, written back for GET /policy, merged and deleted as the YAML says, and the
 * verdict on a name (the DNS proxy's question) and on an IPv4 address (the filter's). Pure: no
 * I/O; every string and count bounded (tests/unit/test_egress_policy.c,
 * tests/fuzz/fuzz_egress_policy.c).
 *
 * A target is one of
 *  - a name: RFC 1123 labels (1 to 63 letters, digits or hyphens, no hyphen first or last),
 *    at most 253 bytes, lower-cased, a trailing dot dropped ("PyPI.org." is "pypi.org"); its
 *    last label is not all digits (that is an address, or a mistake);
 *  - a wildcard "*.<name>": any name strictly below <name>, never <name> itself;
 *  - an IPv4 CIDR "a.b.c.d" or "a.b.c.d/n" (0 <= n <= 32; decimal octets without leading
 *    zeros, which some parsers read as octal): host bits are cleared ("10.1.2.3/8" is
 *    "10.0.0.0/8"), and a /32 is written without its suffix ("1.2.3.4/32" is "1.2.3.4").
 * Targets are compared in that canonical form: a PATCH of "PyPI.org" replaces "pypi.org", a
 * DELETE of "10.1.2.3/8" removes "10.0.0.0/8".
 *
 * Evaluation: a name is judged by the operator's deny list (wins), then the operator's allow
 * list, then the policy's name and wildcard rules in order (first match wins), then its
 * defaultAction. An address is judged by the operator's deny list, then its allow list, then
 * the policy's CIDR rules in order, then: allowed when the defaultAction allows, else only when
 * a DNS answer for an allowed name opened it (sh_egress_judge_answer). The operator's deny
 * list wins over everything, its allow list over every policy (an operator's allowed name
 * answered with a denied address stays denied: DNS rebinding). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sh/error.h"

struct cJSON;

#define SH_EGRESS_RULES_MAX    256  /* rules of a policy; items of one PATCH or DELETE body */
#define SH_EGRESS_NAME_MAX     253  /* a name's bytes, without a trailing dot */
#define SH_EGRESS_TARGET_MAX   255  /* a target's bytes as sent ("*." + a name + "."), at most */
#define SH_EGRESS_OPERATOR_MAX 1024 /* entries of one operator list, run-time additions too */

/* The operator's default deny list (SANDBOX_HOST_EGRESS_DENY unset): "this network",
 * loopback, link-local (cloud metadata at 169.254.169.254), RFC 1918, shared address space
 * (100.64.0.0/10: the default range of the sandboxes' links, and carrier NAT), multicast,
 * reserved and the limited broadcast. The pod's own addresses and the sandboxes' range are
 * added at run time by the caller (sh_egress_list_add_cidr). core/config.c holds the same
 * text as the setting's default (core cannot see this header); test_egress_policy.c checks
 * that they agree. */
#define SH_EGRESS_DENY_DEFAULT                                                                     \
        "0.0.0.0/8,127.0.0.0/8,169.254.0.0/16,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,"            \
        "100.64.0.0/10,224.0.0.0/4,240.0.0.0/4,255.255.255.255"

typedef enum sh_egress_action {
        SH_EGRESS_DENY = 0,
        SH_EGRESS_ALLOW = 1,
} sh_egress_action;

typedef enum sh_egress_kind {
        SH_EGRESS_NAME,     /* "pypi.org" */
        SH_EGRESS_WILDCARD, /* "*.example.com" */
        SH_EGRESS_CIDR,     /* "10.0.0.0/8", "1.2.3.4" */
} sh_egress_kind;

typedef struct sh_egress_target {
        sh_egress_kind kind;
        char *text;     /* canonical form (owned): what GET shows and what targets compare by */
        uint32_t net;   /* CIDR: the network, host byte order, host bits clear */
        uint8_t prefix; /* CIDR: 0..32 */
} sh_egress_target;

typedef struct sh_egress_rule {
        sh_egress_action action;
        sh_egress_target target;
} sh_egress_rule;

/* Rules in order, their targets distinct (the first of duplicates kept). */
typedef struct sh_egress_rules {
        sh_egress_rule *v;
        size_t n;
} sh_egress_rules;

/* A sandbox's policy. Read its fields freely (the filter builds its chains from them); change
 * it only through the functions below. */
typedef struct sh_egress_policy {
        sh_egress_action default_action;
        sh_egress_rules rules;
} sh_egress_policy;

/* A list of targets: an operator list, or a DELETE body's targets. */
typedef struct sh_egress_list {
        sh_egress_target *v;
        size_t n;
} sh_egress_list;

/* The operator's lists (SANDBOX_HOST_EGRESS_DENY, SANDBOX_HOST_EGRESS_ALLOW): names, wildcards
 * and CIDRs. */
typedef struct sh_egress_operator {
        sh_egress_list deny;
        sh_egress_list allow;
} sh_egress_operator;

/* ---- targets ------------------------------------------------------------------------------- */

/* Parse `len` bytes of `s` (may be anything) as a target into *ret (its text owned by it:
 * sh_egress_target_done). 0; or -EINVAL with *ret_why a static reason ("is empty", "is not a
 * name: a label is empty", ...), *ret untouched; or -ENOMEM. */
int sh_egress_target_parse(const char *s, size_t len, sh_egress_target *ret, const char **ret_why);
void sh_egress_target_done(sh_egress_target *t);

/* ---- policies ------------------------------------------------------------------------------ */

/* *ret as a policy without rules and with `default_action`: SH_EGRESS_ALLOW is OpenSandbox's
 * start without a `networkPolicy`; SH_EGRESS_DENY what a host without egress support holds
 * (loopback only). */
void sh_egress_policy_init(sh_egress_policy *ret, sh_egress_action default_action);
void sh_egress_policy_done(sh_egress_policy *p);
/* A deep copy of p into *ret. 0 or -ENOMEM (*ret untouched). */
int sh_egress_policy_copy(const sh_egress_policy *p, sh_egress_policy *ret);

/* A create's `networkPolicy` member (`np`: NULL when absent) into *ret. Absent, null or {} (no
 * member but nulls) is allow-all; otherwise `defaultAction` ("allow" | "deny"; absent or null:
 * deny) and `egress` (absent or null: no rule; else a list of at most SH_EGRESS_RULES_MAX
 * {"action": "allow" | "deny", "target": <target>} objects; a later rule of an earlier one's
 * target is dropped, as it could never match). Other members are ignored. 0; or -1 with *err
 * of kind SH_E_INVALID, its message naming the member ("networkPolicy.egress[2].target
 * 'a..b' is not a name: a label is empty"); or an ENOMEM error. *ret is untouched on failure. */
int sh_egress_policy_from_json(const struct cJSON *np, sh_egress_policy *ret, sh_error **err);
/* Whether a create's `networkPolicy` member is absent or empty (NULL, null, or no member but
 * nulls): OpenSandbox's allow-all start, which a host without egress support honours as
 * loopback only (sh_egress_policy_init(..., SH_EGRESS_DENY)) instead of refusing it. */
bool sh_egress_policy_json_empty(const struct cJSON *np);

/* A PATCH /policy body: a non-empty list of at most SH_EGRESS_RULES_MAX rules as above (the
 * first of duplicate targets kept). 0, or -1 and *err (SH_E_INVALID, naming the item:
 * "[1].action ..."; or ENOMEM). */
int sh_egress_rules_from_json(const struct cJSON *body, sh_egress_rules *ret, sh_error **err);
void sh_egress_rules_done(sh_egress_rules *r);

/* A DELETE /policy body: a non-empty list of at most SH_EGRESS_RULES_MAX target strings, each
 * a target as above. 0, or -1 and *err (SH_E_INVALID naming the item; or ENOMEM). */
int sh_egress_targets_from_json(const struct cJSON *body, sh_egress_list *ret, sh_error **err);

/* Merge `in` into p as egress-api.yaml's PATCH says: the incoming rules first, in their order,
 * then p's rules whose target none of them names, in theirs (an incoming rule replaces the
 * rule of its target); defaultAction unchanged. 0; or -1 and *err (SH_E_INVALID when the
 * result would hold more than SH_EGRESS_RULES_MAX rules; or ENOMEM), p unchanged. */
int sh_egress_policy_patch(sh_egress_policy *p, const sh_egress_rules *in, sh_error **err);

/* Remove p's rules whose target is one of `targets` (a target p does not hold is ignored:
 * idempotent); defaultAction unchanged. How many rules went. */
size_t sh_egress_policy_delete(sh_egress_policy *p, const sh_egress_list *targets);

/* Whether p lets anything out: its defaultAction allows or one of its rules does (a host
 * without egress support refuses such a policy with 400 NOT_SUPPORTED). */
bool sh_egress_policy_allows_any(const sh_egress_policy *p);
/* The same of a PATCH's rules: one of them allows. */
bool sh_egress_rules_allow_any(const sh_egress_rules *r);

/* GET /policy's `mode`: "deny_all" (defaultAction deny), "allow_all" (allow and no rule) or
 * "rules" (allow and rules). Static. */
const char *sh_egress_policy_mode(const sh_egress_policy *p);

/* p as the YAML's NetworkPolicy: {"defaultAction": ..., "egress": [{"action", "target"}...]}
 * (targets canonical, `egress` always present). NULL when out of memory. */
struct cJSON *sh_egress_policy_to_json(const sh_egress_policy *p);

/* The egress API's PolicyStatusResponse: {"status": "ok", "mode", "enforcementMode":
 * `enforcement` ("dns+nft", or "none" without egress support), "policy" when `with_policy`}.
 * NULL when out of memory. */
struct cJSON *sh_egress_status_to_json(const sh_egress_policy *p, const char *enforcement,
                                       bool with_policy);

/* ---- the operator's lists ------------------------------------------------------------------ */

/* A setting's value: targets separated by commas, blanks around each ignored, empty items
 * skipped ("" is the empty list), at most SH_EGRESS_OPERATOR_MAX. Appended to *l (start from
 * a zeroed list). 0; or -1 with *err (SH_E_SETTING naming `setting` and the entry; or ENOMEM),
 * *l unchanged. */
int sh_egress_list_parse(sh_egress_list *l, const char *setting, const char *value, sh_error **err);
/* Append the CIDR net/prefix (host byte order; host bits cleared here): the run-time entries
 * of the deny list (the pod's own addresses, the sandboxes' range). 0; or -1 with *err
 * (SH_E_INVALID past SH_EGRESS_OPERATOR_MAX entries or a prefix past 32; or ENOMEM). */
int sh_egress_list_add_cidr(sh_egress_list *l, uint32_t net, unsigned prefix, sh_error **err);
void sh_egress_list_done(sh_egress_list *l);

/* Both settings into *ret (zeroed first): `deny` NULL is SH_EGRESS_DENY_DEFAULT, `allow` NULL
 * the empty list. 0 or -1 and *err as sh_egress_list_parse; *ret empty on failure. */
int sh_egress_operator_parse(sh_egress_operator *ret, const char *deny, const char *allow,
                             sh_error **err);
void sh_egress_operator_done(sh_egress_operator *o);

/* ---- verdicts ------------------------------------------------------------------------------ */

/* What decided a verdict. */
typedef enum sh_egress_by {
        SH_EGRESS_BY_OPERATOR_DENY,  /* the operator's deny list */
        SH_EGRESS_BY_OPERATOR_ALLOW, /* the operator's allow list (granted to every sandbox) */
        SH_EGRESS_BY_RULE,           /* the policy's rule number `rule` */
        SH_EGRESS_BY_DEFAULT,        /* the policy's defaultAction (see sh_egress_judge_addr) */
        SH_EGRESS_BY_INVALID,        /* the name is no name (denied) */
} sh_egress_by;

typedef struct sh_egress_verdict {
        sh_egress_action action;
        sh_egress_by by;
        size_t rule; /* SH_EGRESS_BY_RULE: the index of the rule in p->rules; else 0 */
} sh_egress_verdict;

/* A name a sandbox asks about (the DNS proxy's question: `len` bytes, any case, a trailing dot
 * allowed; labels of letters, digits, hyphens and underscores; anything else is
 * SH_EGRESS_BY_INVALID, denied). `op` may be NULL (no operator lists). */
sh_egress_verdict sh_egress_judge_name(const sh_egress_policy *p, const sh_egress_operator *op,
                                       const char *name, size_t len);

/* An IPv4 address (host byte order) a sandbox connects to, by the CIDR entries only: the
 * operator's deny list, its allow list, the policy's CIDR rules in order, then the
 * defaultAction. A SH_EGRESS_BY_DEFAULT deny means "unless a DNS answer opened it": under a
 * deny default an address no CIDR names is reachable only through an allowed name. */
sh_egress_verdict sh_egress_judge_addr(const sh_egress_policy *p, const sh_egress_operator *op,
                                       uint32_t addr);

/* Whether the address `addr` (host byte order) of a DNS answer for `name` is opened for the
 * sandbox: the name's verdict when it denies; else denied by the operator's deny list (an
 * allowed name resolving to the metadata address, the pod or a private range: rebinding); an
 * operator-allowed name's addresses are allowed (SH_EGRESS_BY_OPERATOR_ALLOW: granted to every
 * sandbox, so one set may hold them for all); else a CIDR rule or the operator's allow list
 * that names the address decides; else the name's verdict (allowed: open it). */
sh_egress_verdict sh_egress_judge_answer(const sh_egress_policy *p, const sh_egress_operator *op,
                                         const char *name, size_t len, uint32_t addr);
