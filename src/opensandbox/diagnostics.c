/* diagnostics.c: GET /v1/sandboxes/{id}/diagnostics/logs and …/events (OPENSANDBOX.md section
 * 2.2), inline, the last 1 MiB: `lifecycle` logs are the daemon's log lines about the sandbox
 * (its journal's, sh_sandbox_journal_keep), `container` its entrypoint's output (the record's
 * log file), `all` both; events are its state transitions, one line each with its time, noted
 * in its journal. The descriptors' shape here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os-internal.h"
#include "sh/ring.h"

#define SB         OS_R_SANDBOX
#define INLINE_MAX (1u << 20) /* the most one answer's content holds */

/* Every state change of rec: a line in its journal's events. */
static void on_transition(os_record *rec, os_state from, os_state to)
{
        char t[32], line[1400];
        int n;

        if (!rec->sb)
                return;
        sh_rfc3339_format(rec->transition_ms, t);
        n = snprintf(line, sizeof(line), "%s %s -> %s (%s): %s", t, os_state_name(from),
                     os_state_name(to), rec->reason ? rec->reason : "",
                     rec->message ? rec->message : "");
        if (n > 0)
                sh_sandbox_journal_note(rec->sb, line, strnlen(line, sizeof(line)));
}

/* One part of a content: the tail of a log, made valid text for a JSON string (every byte
 * that is not valid UTF-8, and NUL, becomes '?'), and whether anything older is missing. */
typedef struct part {
        char *p;
        size_t len;
        bool cut;
} part;

static int take(const os_record *rec, sh_journal_part which, size_t budget, part *ret)
{
        const sh_ring *g = rec->sb ? sh_sandbox_journal(rec->sb, which) : NULL;
        int k = g ? sh_ring_tail(g, budget, &ret->p, &ret->len, &ret->cut) : 0;

        if (k == 0 && ret->p)
                sh_utf8_scrub(ret->p, ret->len);
        return k;
}

static int take_log(os_record *rec, size_t budget, part *ret)
{
        int k = sh_ringlog_tail(os_record_container_log(rec), rec->sb, budget, &ret->p, &ret->len,
                                &ret->cut);

        if (k == 0)
                sh_utf8_scrub(ret->p, ret->len);
        return k;
}

/* The scope of the request: 0 lifecycle, 1 container, 2 all; -1 after a 400. */
static int scope_of(sh_request *r, bool logs, const char **ret_name)
{
        static const char *const names[] = {"lifecycle", "container", "all"};
        const sh_query_param *p = sh_query_find(sh_request_query(r), "scope");
        const char *supported = logs ? "lifecycle, container, all" : "lifecycle, all";

        if (!p || p->val_len == 0) {
                os_reply_code(r, OS_E_INVALID_REQUEST,
                              "'scope' is required; this host supports: %s", supported);
                return -1;
        }
        for (int i = 0; i < 3; i++) {
                if (!logs && i == 1)
                        continue;
                if (p->val_len == strlen(names[i]) && memcmp(p->val, names[i], p->val_len) == 0) {
                        *ret_name = names[i];
                        return i;
                }
        }
        os_reply_code(r, OS_E_INVALID_REQUEST,
                      "scope '%.*s' is not supported; this host supports: %s",
                      (int)(p->val_len < 64 ? p->val_len : 64), p->val, supported);
        return -1;
}

static void reply_content(sh_request *r, const os_record *rec, const char *kind, const char *scope,
                          const char *content, bool truncated)
{
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddStringToObject(o, "sandboxId", rec->id) ||
            !cJSON_AddStringToObject(o, "kind", kind) ||
            !cJSON_AddStringToObject(o, "scope", scope) ||
            !cJSON_AddStringToObject(o, "delivery", "inline") ||
            !cJSON_AddStringToObject(o, "contentType", "text/plain; charset=utf-8") ||
            !cJSON_AddStringToObject(o, "content", content) ||
            !cJSON_AddNumberToObject(o, "contentLength", (double)strlen(content)) ||
            !cJSON_AddBoolToObject(o, "truncated", truncated)) {
                cJSON_Delete(o);
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        os_reply_json(r, 200, o);
}

#define LIFE_HEAD "--- lifecycle ---\n"
#define CONT_HEAD "--- container ---\n"

static void api_logs(sh_request *r)
{
        os_record *rec = os_request_record(r);
        const char *name = NULL;
        part life = {0}, cont = {0};
        char *all = NULL;
        int scope = scope_of(r, true, &name), e = 0;

        if (scope < 0)
                return;
        if (scope == 0) {
                if ((e = take(rec, SH_JOURNAL_LOG, INLINE_MAX, &life)) < 0)
                        goto fail;
                reply_content(r, rec, "logs", name, life.p ? life.p : "", life.cut);
        } else if (scope == 1) {
                if ((e = take_log(rec, INLINE_MAX, &cont)) < 0)
                        goto fail;
                reply_content(r, rec, "logs", name, cont.p, cont.cut);
        } else {
                /* Both, each under a heading: the lifecycle lines (at most SH_JOURNAL_LOG_MAX)
                 * first, the container's last bytes in what is left of the 1 MiB. */
                size_t room = INLINE_MAX - strlen(LIFE_HEAD) - strlen(CONT_HEAD);

                if ((e = take(rec, SH_JOURNAL_LOG, room, &life)) < 0 ||
                    (e = take_log(rec, room - life.len, &cont)) < 0)
                        goto fail;
                if (asprintf(&all, "%s%s%s%s", LIFE_HEAD, life.p ? life.p : "", CONT_HEAD, cont.p) <
                    0) {
                        all = NULL;
                        e = -ENOMEM;
                        goto fail;
                }
                reply_content(r, rec, "logs", name, all, life.cut || cont.cut);
        }
        free(all);
        free(life.p);
        free(cont.p);
        return;
fail:
        free(life.p);
        free(cont.p);
        os_reply_code(r, OS_E_INTERNAL, "cannot read the sandbox's logs: %s", strerror(-e));
}

static void api_events(sh_request *r)
{
        os_record *rec = os_request_record(r);
        const char *name = NULL;
        part ev = {0};

        if (scope_of(r, false, &name) < 0)
                return;
        /* `all` is `lifecycle`: the transitions are the only events this host has. */
        if (take(rec, SH_JOURNAL_EVENTS, INLINE_MAX, &ev) < 0) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        reply_content(r, rec, "events", name, ev.p ? ev.p : "", ev.cut);
        free(ev.p);
}

void os_diag_init(os_ctx *ctx)
{
        static const os_record_observer observer = {.transition = on_transition};

        os_record_observe(ctx, &observer);
}

const sh_route os_diag_routes[] = {
        {"/v1/sandboxes/{}/diagnostics/logs", SH_M_GET, NULL, api_logs, SB},
        {"/v1/sandboxes/{}/diagnostics/events", SH_M_GET, NULL, api_events, SB},
};
const size_t os_diag_n_routes = ARRAY_SIZE(os_diag_routes);
