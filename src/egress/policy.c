/* policy.c: a sandbox's egress policy and the operator's lists: targets parsed and made
 * canonical, policies from and to JSON, PATCH merges and DELETEs, verdicts on names and
 * addresses (pure). */
#include "sh/policy.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/util.h"

/* ---- targets ------------------------------------------------------------------------------- */

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

static uint32_t mask_of(unsigned prefix)
{
        return prefix == 0 ? 0 : (uint32_t)0xffffffffu << (32 - prefix);
}

/* A decimal number of 1 to `digits` digits without a leading zero (but "0") at *s, at most
 * max; *s moves past it. */
static bool take_number(const char **s, const char *end, unsigned digits, unsigned max,
                        unsigned *ret)
{
        const char *p = *s;
        unsigned v = 0, n = 0;

        while (p < end && is_digit(*p) && n < digits + 1) {
                v = v * 10 + (unsigned)(*p - '0');
                p++;
                n++;
        }
        if (n == 0 || n > digits || (n > 1 && **s == '0') || v > max)
                return false;
        *s = p;
        *ret = v;
        return true;
}

/* "a.b.c.d" or "a.b.c.d/n" (only digits, dots and a slash: checked by the caller). */
static int parse_cidr(const char *s, size_t len, uint32_t *ret_net, uint8_t *ret_prefix,
                      const char **ret_why)
{
        const char *p = s, *end = s + len;
        uint32_t a = 0;
        unsigned v, prefix = 32;

        for (int i = 0; i < 4; i++) {
                if (i > 0 && (p >= end || *p++ != '.')) {
                        *ret_why = "is not an IPv4 address or CIDR: it needs four octets";
                        return -EINVAL;
                }
                if (!take_number(&p, end, 3, 255, &v)) {
                        *ret_why = "is not an IPv4 address or CIDR: an octet is 0 to 255, "
                                   "without leading zeros";
                        return -EINVAL;
                }
                a = a << 8 | v;
        }
        if (p < end && *p == '/') {
                p++;
                if (!take_number(&p, end, 2, 32, &prefix)) {
                        *ret_why = "is not an IPv4 CIDR: the prefix is 0 to 32, without "
                                   "leading zeros";
                        return -EINVAL;
                }
        }
        if (p != end) {
                *ret_why = "is not an IPv4 address or CIDR: it needs four octets";
                return -EINVAL;
        }
        *ret_net = a & mask_of(prefix);
        *ret_prefix = (uint8_t)prefix;
        return 0;
}

static char *cidr_text(uint32_t net, unsigned prefix)
{
        char *t = NULL;
        int r;

        if (prefix == 32)
                r = asprintf(&t, "%u.%u.%u.%u", net >> 24, (net >> 16) & 255, (net >> 8) & 255,
                             net & 255);
        else
                r = asprintf(&t, "%u.%u.%u.%u/%u", net >> 24, (net >> 16) & 255, (net >> 8) & 255,
                             net & 255, prefix);
        return r < 0 ? NULL : t;
}

/* A name of `len` bytes (a trailing dot allowed) lower-cased into out (room for
 * SH_EGRESS_NAME_MAX + 1). With `lenient`, labels may hold underscores (a DNS question's
 * name, "_http._tcp.x", which no rule can name but a wildcard may hold). */
static int name_normalize(const char *s, size_t len, bool lenient, char *out, size_t *ret_len,
                          const char **ret_why)
{
        size_t label = 0, i;
        bool digits_only = true;

        if (len > 0 && s[len - 1] == '.')
                len--;
        if (len == 0) {
                *ret_why = "is not a name: it is empty";
                return -EINVAL;
        }
        if (len > SH_EGRESS_NAME_MAX) {
                *ret_why = "is not a name: it is longer than 253 bytes";
                return -EINVAL;
        }
        for (i = 0; i <= len; i++) {
                char c = i < len ? s[i] : '.';

                if (c == '.') {
                        if (label == 0) {
                                *ret_why = "is not a name: a label is empty";
                                return -EINVAL;
                        }
                        if (out[i - 1] == '-') {
                                *ret_why = "is not a name: a label ends with a hyphen";
                                return -EINVAL;
                        }
                        if (i < len) {
                                label = 0;
                                digits_only = true;
                        }
                        out[i] = '.';
                        continue;
                }
                if (c >= 'A' && c <= 'Z')
                        c = (char)(c - 'A' + 'a');
                if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || (lenient && c == '_'))) {
                        *ret_why = "is not a name: a label holds only letters, digits and "
                                   "hyphens";
                        return -EINVAL;
                }
                if (c == '-' && label == 0) {
                        *ret_why = "is not a name: a label starts with a hyphen";
                        return -EINVAL;
                }
                if (++label > 63) {
                        *ret_why = "is not a name: a label is longer than 63 bytes";
                        return -EINVAL;
                }
                digits_only = digits_only && is_digit(c);
                out[i] = c;
        }
        /* "1.2.3.999" or "a.123": no host name ends in a number (RFC 1123 2.1, WHATWG's URL
         * host parser reads such a host as an address). */
        if (digits_only) {
                *ret_why = "is not a name: its last label is all digits";
                return -EINVAL;
        }
        out[len] = '\0';
        *ret_len = len;
        return 0;
}

int sh_egress_target_parse(const char *s, size_t len, sh_egress_target *ret, const char **ret_why)
{
        char name[SH_EGRESS_NAME_MAX + 3];
        sh_egress_target t = {0};
        size_t n, i;
        int r;

        if (!s || len == 0) {
                *ret_why = "is empty";
                return -EINVAL;
        }
        if (len > SH_EGRESS_TARGET_MAX) {
                *ret_why = "is longer than 255 bytes";
                return -EINVAL;
        }
        for (i = 0; i < len && (is_digit(s[i]) || s[i] == '.' || s[i] == '/'); i++)
                ;
        if (i == len) {
                t.kind = SH_EGRESS_CIDR;
                r = parse_cidr(s, len, &t.net, &t.prefix, ret_why);
                if (r < 0)
                        return r;
                t.text = cidr_text(t.net, t.prefix);
                if (!t.text)
                        return -ENOMEM;
                *ret = t;
                return 0;
        }
        if (len >= 2 && s[0] == '*' && s[1] == '.') {
                t.kind = SH_EGRESS_WILDCARD;
                r = name_normalize(s + 2, len - 2, false, name + 2, &n, ret_why);
                if (r < 0)
                        return r;
                /* a name strictly below it must fit: "x." + the base */
                if (n > SH_EGRESS_NAME_MAX - 2) {
                        *ret_why = "is not a wildcard: nothing below a name of more than 251 "
                                   "bytes fits in 253";
                        return -EINVAL;
                }
                name[0] = '*';
                name[1] = '.';
        } else {
                t.kind = SH_EGRESS_NAME;
                if (memchr(s, '*', len)) {
                        *ret_why = "is not a wildcard: '*' is only a first label of its own "
                                   "(\"*.example.com\")";
                        return -EINVAL;
                }
                r = name_normalize(s, len, false, name, &n, ret_why);
                if (r < 0)
                        return r;
        }
        t.text = strdup(name);
        if (!t.text)
                return -ENOMEM;
        *ret = t;
        return 0;
}

void sh_egress_target_done(sh_egress_target *t)
{
        if (!t)
                return;
        free(t->text);
        t->text = NULL;
}

static int target_copy(const sh_egress_target *t, sh_egress_target *ret)
{
        *ret = *t;
        ret->text = strdup(t->text);
        return ret->text ? 0 : -ENOMEM;
}

static bool target_same(const sh_egress_target *a, const sh_egress_target *b)
{
        return a->kind == b->kind && STREQ(a->text, b->text);
}

/* Whether the normalised name (n bytes) is t or below t. */
static bool name_matches(const sh_egress_target *t, const char *name, size_t n)
{
        size_t bl;

        if (t->kind == SH_EGRESS_NAME)
                return STREQ(t->text, name);
        if (t->kind != SH_EGRESS_WILDCARD)
                return false;
        bl = strlen(t->text + 2);
        return n > bl + 1 && name[n - bl - 1] == '.' && memcmp(name + n - bl, t->text + 2, bl) == 0;
}

static bool addr_matches(const sh_egress_target *t, uint32_t addr)
{
        return t->kind == SH_EGRESS_CIDR && (addr & mask_of(t->prefix)) == t->net;
}

/* A hostile string for a message: printable ASCII, cut. */
static void quoted(const char *s, char out[72])
{
        sh_quote_printable(s, out, 72);
}

static int oom(sh_error **err)
{
        sh_error_make(err, ENOMEM, "out of memory");
        return -1;
}

/* ---- lists of rules and of targets --------------------------------------------------------- */

void sh_egress_rules_done(sh_egress_rules *r)
{
        if (!r)
                return;
        for (size_t i = 0; i < r->n; i++)
                sh_egress_target_done(&r->v[i].target);
        free(r->v);
        r->v = NULL;
        r->n = 0;
}

void sh_egress_list_done(sh_egress_list *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++)
                sh_egress_target_done(&l->v[i]);
        free(l->v);
        l->v = NULL;
        l->n = 0;
}

static bool rules_hold(const sh_egress_rules *r, size_t upto, const sh_egress_target *t)
{
        for (size_t i = 0; i < upto; i++)
                if (target_same(&r->v[i].target, t))
                        return true;
        return false;
}

static bool list_holds(const sh_egress_list *l, const sh_egress_target *t)
{
        for (size_t i = 0; i < l->n; i++)
                if (target_same(&l->v[i], t))
                        return true;
        return false;
}

/* A string member of a JSON object, or NULL. */
static const char *str_member(const cJSON *o, const char *name)
{
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, name);

        return cJSON_IsString(m) ? m->valuestring : NULL;
}

/* One {"action", "target"} at `where` ("networkPolicy.egress[2]", "[2]") into *ret. */
static int rule_from_json(const cJSON *o, const char *where, sh_egress_rule *ret, sh_error **err)
{
        const char *a, *t, *why = NULL;
        char q[72];
        int r;

        if (!cJSON_IsObject(o))
                return sh_error_new(err, SH_E_INVALID,
                                    "%s is not a rule: {\"action\": \"allow\" | \"deny\", "
                                    "\"target\": <name, *.name or IPv4 CIDR>}",
                                    where);
        a = str_member(o, "action");
        if (!a || (!STREQ(a, "allow") && !STREQ(a, "deny")))
                return sh_error_new(err, SH_E_INVALID, "%s.action is \"allow\" or \"deny\"", where);
        t = str_member(o, "target");
        if (!t)
                return sh_error_new(err, SH_E_INVALID,
                                    "%s.target is a string: a name, *.name or IPv4 CIDR", where);
        r = sh_egress_target_parse(t, strnlen(t, SH_EGRESS_TARGET_MAX + 1), &ret->target, &why);
        if (r == -ENOMEM)
                return oom(err);
        if (r < 0) {
                quoted(t, q);
                return sh_error_new(err, SH_E_INVALID, "%s.target '%s' %s", where, q, why);
        }
        ret->action = STREQ(a, "allow") ? SH_EGRESS_ALLOW : SH_EGRESS_DENY;
        return 0;
}

/* A JSON list of rules (`where` prefixes each item's place) into *ret, the first of
 * duplicate targets kept. */
static int rules_from_array(const cJSON *arr, const char *where, sh_egress_rules *ret,
                            sh_error **err)
{
        sh_egress_rules out = {0};
        const cJSON *it;
        int n = cJSON_GetArraySize(arr), i = 0;

        if (n > SH_EGRESS_RULES_MAX)
                return sh_error_new(err, SH_E_INVALID, "%s holds %d rules, at most %d",
                                    where[0] ? where : "the list", n, SH_EGRESS_RULES_MAX);
        if (n > 0) {
                out.v = calloc((size_t)n, sizeof(*out.v));
                if (!out.v)
                        return oom(err);
        }
        cJSON_ArrayForEach(it, arr)
        {
                char place[64];
                sh_egress_rule rule;

                snprintf(place, sizeof(place), "%s[%d]", where, i++);
                if (rule_from_json(it, place, &rule, err) < 0) {
                        sh_egress_rules_done(&out);
                        return -1;
                }
                /* a later rule of the same target could never match: the first wins */
                if (rules_hold(&out, out.n, &rule.target))
                        sh_egress_target_done(&rule.target);
                else
                        out.v[out.n++] = rule;
        }
        *ret = out;
        return 0;
}

int sh_egress_rules_from_json(const cJSON *body, sh_egress_rules *ret, sh_error **err)
{
        if (!cJSON_IsArray(body) || cJSON_GetArraySize(body) == 0)
                return sh_error_new(err, SH_E_INVALID,
                                    "the body is a non-empty list of {\"action\": \"allow\" | "
                                    "\"deny\", \"target\"} rules");
        return rules_from_array(body, "", ret, err);
}

int sh_egress_targets_from_json(const cJSON *body, sh_egress_list *ret, sh_error **err)
{
        sh_egress_list out = {0};
        const cJSON *it;
        int n, i = 0;

        if (!cJSON_IsArray(body) || (n = cJSON_GetArraySize(body)) == 0)
                return sh_error_new(err, SH_E_INVALID,
                                    "the body is a non-empty list of targets (names, *.names or "
                                    "IPv4 CIDRs)");
        if (n > SH_EGRESS_RULES_MAX)
                return sh_error_new(err, SH_E_INVALID, "the list holds %d targets, at most %d", n,
                                    SH_EGRESS_RULES_MAX);
        out.v = calloc((size_t)n, sizeof(*out.v));
        if (!out.v)
                return oom(err);
        cJSON_ArrayForEach(it, body)
        {
                const char *why = NULL;
                char q[72];
                int r;

                if (!cJSON_IsString(it)) {
                        sh_egress_list_done(&out);
                        return sh_error_new(err, SH_E_INVALID,
                                            "[%d] is not a string: a name, *.name or IPv4 CIDR", i);
                }
                r = sh_egress_target_parse(it->valuestring,
                                           strnlen(it->valuestring, SH_EGRESS_TARGET_MAX + 1),
                                           &out.v[out.n], &why);
                if (r < 0) {
                        sh_egress_list_done(&out);
                        if (r == -ENOMEM)
                                return oom(err);
                        quoted(it->valuestring, q);
                        return sh_error_new(err, SH_E_INVALID, "[%d] '%s' %s", i, q, why);
                }
                out.n++;
                i++;
        }
        *ret = out;
        return 0;
}

/* ---- policies ------------------------------------------------------------------------------ */

void sh_egress_policy_init(sh_egress_policy *ret, sh_egress_action default_action)
{
        *ret = (sh_egress_policy){.default_action = default_action};
}

void sh_egress_policy_done(sh_egress_policy *p)
{
        if (p)
                sh_egress_rules_done(&p->rules);
}

int sh_egress_policy_copy(const sh_egress_policy *p, sh_egress_policy *ret)
{
        sh_egress_policy c = {.default_action = p->default_action};

        if (p->rules.n && !(c.rules.v = calloc(p->rules.n, sizeof(*c.rules.v))))
                return -ENOMEM;
        for (; c.rules.n < p->rules.n; c.rules.n++) {
                c.rules.v[c.rules.n].action = p->rules.v[c.rules.n].action;
                if (target_copy(&p->rules.v[c.rules.n].target, &c.rules.v[c.rules.n].target) < 0) {
                        sh_egress_policy_done(&c);
                        return -ENOMEM;
                }
        }
        *ret = c;
        return 0;
}

bool sh_egress_policy_json_empty(const cJSON *np)
{
        return !np || cJSON_IsNull(np) ||
               (cJSON_IsObject(np) && !sh_json_opt(np, "defaultAction") &&
                !sh_json_opt(np, "egress"));
}

int sh_egress_policy_from_json(const cJSON *np, sh_egress_policy *ret, sh_error **err)
{
        const cJSON *def, *egress;
        sh_egress_policy p;

        /* OpenSandbox: an empty policy starts allow-all; an absent defaultAction is deny */
        if (sh_egress_policy_json_empty(np)) {
                sh_egress_policy_init(ret, SH_EGRESS_ALLOW);
                return 0;
        }
        if (!cJSON_IsObject(np))
                return sh_error_new(err, SH_E_INVALID,
                                    "networkPolicy is an object: {\"defaultAction\", \"egress\"}");
        def = sh_json_opt(np, "defaultAction");
        egress = sh_json_opt(np, "egress");
        sh_egress_policy_init(&p, SH_EGRESS_DENY);
        if (def) {
                if (!cJSON_IsString(def) ||
                    (!STREQ(def->valuestring, "allow") && !STREQ(def->valuestring, "deny")))
                        return sh_error_new(err, SH_E_INVALID,
                                            "networkPolicy.defaultAction is \"allow\" or \"deny\"");
                if (STREQ(def->valuestring, "allow"))
                        p.default_action = SH_EGRESS_ALLOW;
        }
        if (egress) {
                if (!cJSON_IsArray(egress))
                        return sh_error_new(err, SH_E_INVALID,
                                            "networkPolicy.egress is a list of rules");
                if (rules_from_array(egress, "networkPolicy.egress", &p.rules, err) < 0)
                        return -1;
        }
        *ret = p;
        return 0;
}

int sh_egress_policy_patch(sh_egress_policy *p, const sh_egress_rules *in, sh_error **err)
{
        sh_egress_rules out = {0};
        size_t n = 0, i;

        /* incoming rules first (the first of duplicates), then the kept ones */
        for (i = 0; i < in->n; i++)
                n += !rules_hold(in, i, &in->v[i].target);
        for (i = 0; i < p->rules.n; i++)
                n += !rules_hold(in, in->n, &p->rules.v[i].target);
        if (n > SH_EGRESS_RULES_MAX)
                return sh_error_new(err, SH_E_INVALID,
                                    "the policy would hold %zu rules, at most %d", n,
                                    SH_EGRESS_RULES_MAX);
        if (n > 0) {
                out.v = calloc(n, sizeof(*out.v));
                if (!out.v)
                        return oom(err);
        }
        for (i = 0; i < in->n; i++) {
                if (rules_hold(in, i, &in->v[i].target))
                        continue;
                out.v[out.n].action = in->v[i].action;
                if (target_copy(&in->v[i].target, &out.v[out.n].target) < 0)
                        goto nomem;
                out.n++;
        }
        for (i = 0; i < p->rules.n; i++) {
                if (rules_hold(in, in->n, &p->rules.v[i].target))
                        continue;
                out.v[out.n].action = p->rules.v[i].action;
                if (target_copy(&p->rules.v[i].target, &out.v[out.n].target) < 0)
                        goto nomem;
                out.n++;
        }
        sh_egress_rules_done(&p->rules);
        p->rules = out;
        return 0;
nomem:
        sh_egress_rules_done(&out);
        return oom(err);
}

size_t sh_egress_policy_delete(sh_egress_policy *p, const sh_egress_list *targets)
{
        size_t k = 0, gone;

        for (size_t i = 0; i < p->rules.n; i++) {
                if (list_holds(targets, &p->rules.v[i].target))
                        sh_egress_target_done(&p->rules.v[i].target);
                else
                        p->rules.v[k++] = p->rules.v[i];
        }
        gone = p->rules.n - k;
        p->rules.n = k;
        if (k == 0) {
                free(p->rules.v);
                p->rules.v = NULL;
        }
        return gone;
}

bool sh_egress_rules_allow_any(const sh_egress_rules *r)
{
        for (size_t i = 0; i < r->n; i++)
                if (r->v[i].action == SH_EGRESS_ALLOW)
                        return true;
        return false;
}

bool sh_egress_policy_allows_any(const sh_egress_policy *p)
{
        return p->default_action == SH_EGRESS_ALLOW || sh_egress_rules_allow_any(&p->rules);
}

const char *sh_egress_policy_mode(const sh_egress_policy *p)
{
        if (p->default_action == SH_EGRESS_DENY)
                return "deny_all";
        return p->rules.n == 0 ? "allow_all" : "rules";
}

static const char *action_name(sh_egress_action a)
{
        return a == SH_EGRESS_ALLOW ? "allow" : "deny";
}

cJSON *sh_egress_policy_to_json(const sh_egress_policy *p)
{
        cJSON *o = cJSON_CreateObject(), *arr;

        if (!o || !cJSON_AddStringToObject(o, "defaultAction", action_name(p->default_action)) ||
            !(arr = cJSON_AddArrayToObject(o, "egress")))
                goto nomem;
        for (size_t i = 0; i < p->rules.n; i++) {
                cJSON *r = cJSON_CreateObject();

                if (!r)
                        goto nomem;
                cJSON_AddItemToArray(arr, r);
                if (!cJSON_AddStringToObject(r, "action", action_name(p->rules.v[i].action)) ||
                    !cJSON_AddStringToObject(r, "target", p->rules.v[i].target.text))
                        goto nomem;
        }
        return o;
nomem:
        cJSON_Delete(o);
        return NULL;
}

cJSON *sh_egress_status_to_json(const sh_egress_policy *p, const char *enforcement,
                                bool with_policy)
{
        cJSON *o = cJSON_CreateObject(), *pol;

        if (!o || !cJSON_AddStringToObject(o, "status", "ok") ||
            !cJSON_AddStringToObject(o, "mode", sh_egress_policy_mode(p)) ||
            !cJSON_AddStringToObject(o, "enforcementMode", enforcement))
                goto nomem;
        if (with_policy) {
                pol = sh_egress_policy_to_json(p);
                if (!pol)
                        goto nomem;
                cJSON_AddItemToObject(o, "policy", pol);
        }
        return o;
nomem:
        cJSON_Delete(o);
        return NULL;
}

/* ---- the operator's lists ------------------------------------------------------------------ */

static int list_push(sh_egress_list *l, sh_egress_target *t, size_t *cap)
{
        if (l->n == *cap) {
                size_t c = *cap ? *cap * 2 : 16;
                sh_egress_target *v = realloc(l->v, c * sizeof(*v));

                if (!v)
                        return -ENOMEM;
                l->v = v;
                *cap = c;
        }
        l->v[l->n++] = *t;
        return 0;
}

int sh_egress_list_parse(sh_egress_list *l, const char *setting, const char *value, sh_error **err)
{
        sh_egress_list out = *l;
        size_t first = l->n, cap = l->n;
        const char *s = value ? value : "";
        int r;

        while (*s) {
                const char *e = strchr(s, ','), *why = NULL;
                size_t n = e ? (size_t)(e - s) : strlen(s);
                const char *b = s;
                sh_egress_target t;
                char q[72];

                s += n + (e ? 1 : 0);
                while (n > 0 && (*b == ' ' || *b == '\t')) {
                        b++;
                        n--;
                }
                while (n > 0 && (b[n - 1] == ' ' || b[n - 1] == '\t'))
                        n--;
                if (n == 0)
                        continue;
                if (out.n >= SH_EGRESS_OPERATOR_MAX) {
                        r = sh_error_new(err, SH_E_SETTING, "invalid %s: more than %d entries",
                                         setting, SH_EGRESS_OPERATOR_MAX);
                        goto fail;
                }
                r = sh_egress_target_parse(b, n, &t, &why);
                if (r == -EINVAL) {
                        char *entry = sh_memdup0(b, n);

                        quoted(entry, q);
                        free(entry);
                        r = sh_error_new(err, SH_E_SETTING, "invalid %s: '%s' %s", setting, q, why);
                        goto fail;
                }
                if (r < 0 || list_push(&out, &t, &cap) < 0) {
                        if (r == 0)
                                sh_egress_target_done(&t);
                        r = oom(err);
                        goto fail;
                }
        }
        *l = out;
        return 0;
fail:
        /* what this call appended goes; what *l held stays */
        for (size_t i = first; i < out.n; i++)
                sh_egress_target_done(&out.v[i]);
        if (first == 0) {
                free(out.v);
                out.v = NULL;
        }
        l->v = out.v;
        l->n = first;
        return r;
}

int sh_egress_list_add_cidr(sh_egress_list *l, uint32_t net, unsigned prefix, sh_error **err)
{
        sh_egress_target t = {.kind = SH_EGRESS_CIDR};
        size_t cap = l->n;

        if (prefix > 32)
                return sh_error_new(err, SH_E_INVALID, "a prefix is 0 to 32, not %u", prefix);
        if (l->n >= SH_EGRESS_OPERATOR_MAX)
                return sh_error_new(err, SH_E_INVALID, "an operator list holds at most %d entries",
                                    SH_EGRESS_OPERATOR_MAX);
        t.net = net & mask_of(prefix);
        t.prefix = (uint8_t)prefix;
        t.text = cidr_text(t.net, prefix);
        if (!t.text || list_push(l, &t, &cap) < 0) {
                free(t.text);
                return oom(err);
        }
        return 0;
}

int sh_egress_operator_parse(sh_egress_operator *ret, const char *deny, const char *allow,
                             sh_error **err)
{
        *ret = (sh_egress_operator){0};
        if (sh_egress_list_parse(&ret->deny, "SANDBOX_HOST_EGRESS_DENY",
                                 deny ? deny : SH_EGRESS_DENY_DEFAULT, err) < 0)
                return -1;
        if (sh_egress_list_parse(&ret->allow, "SANDBOX_HOST_EGRESS_ALLOW", allow, err) < 0) {
                sh_egress_list_done(&ret->deny);
                return -1;
        }
        return 0;
}

void sh_egress_operator_done(sh_egress_operator *o)
{
        if (!o)
                return;
        sh_egress_list_done(&o->deny);
        sh_egress_list_done(&o->allow);
}

/* ---- verdicts ------------------------------------------------------------------------------ */

static sh_egress_verdict verdict(sh_egress_action a, sh_egress_by by, size_t rule)
{
        return (sh_egress_verdict){.action = a, .by = by, .rule = rule};
}

static bool list_names(const sh_egress_list *l, const char *name, size_t n)
{
        for (size_t i = 0; i < l->n; i++)
                if (name_matches(&l->v[i], name, n))
                        return true;
        return false;
}

static bool list_addresses(const sh_egress_list *l, uint32_t addr)
{
        for (size_t i = 0; i < l->n; i++)
                if (addr_matches(&l->v[i], addr))
                        return true;
        return false;
}

sh_egress_verdict sh_egress_judge_name(const sh_egress_policy *p, const sh_egress_operator *op,
                                       const char *name, size_t len)
{
        char n[SH_EGRESS_NAME_MAX + 1];
        const char *why;
        size_t nl;

        if (!name || name_normalize(name, len, true, n, &nl, &why) < 0)
                return verdict(SH_EGRESS_DENY, SH_EGRESS_BY_INVALID, 0);
        if (op && list_names(&op->deny, n, nl))
                return verdict(SH_EGRESS_DENY, SH_EGRESS_BY_OPERATOR_DENY, 0);
        if (op && list_names(&op->allow, n, nl))
                return verdict(SH_EGRESS_ALLOW, SH_EGRESS_BY_OPERATOR_ALLOW, 0);
        for (size_t i = 0; i < p->rules.n; i++)
                if (name_matches(&p->rules.v[i].target, n, nl))
                        return verdict(p->rules.v[i].action, SH_EGRESS_BY_RULE, i);
        return verdict(p->default_action, SH_EGRESS_BY_DEFAULT, 0);
}

sh_egress_verdict sh_egress_judge_addr(const sh_egress_policy *p, const sh_egress_operator *op,
                                       uint32_t addr)
{
        if (op && list_addresses(&op->deny, addr))
                return verdict(SH_EGRESS_DENY, SH_EGRESS_BY_OPERATOR_DENY, 0);
        if (op && list_addresses(&op->allow, addr))
                return verdict(SH_EGRESS_ALLOW, SH_EGRESS_BY_OPERATOR_ALLOW, 0);
        for (size_t i = 0; i < p->rules.n; i++)
                if (addr_matches(&p->rules.v[i].target, addr))
                        return verdict(p->rules.v[i].action, SH_EGRESS_BY_RULE, i);
        return verdict(p->default_action, SH_EGRESS_BY_DEFAULT, 0);
}

sh_egress_verdict sh_egress_judge_answer(const sh_egress_policy *p, const sh_egress_operator *op,
                                         const char *name, size_t len, uint32_t addr)
{
        sh_egress_verdict v = sh_egress_judge_name(p, op, name, len), a;

        if (v.action == SH_EGRESS_DENY)
                return v;
        if (op && list_addresses(&op->deny, addr))
                return verdict(SH_EGRESS_DENY, SH_EGRESS_BY_OPERATOR_DENY, 0);
        if (v.by == SH_EGRESS_BY_OPERATOR_ALLOW)
                return v;
        a = sh_egress_judge_addr(p, op, addr);
        if (a.by == SH_EGRESS_BY_RULE || a.by == SH_EGRESS_BY_OPERATOR_ALLOW)
                return a;
        return v;
}
