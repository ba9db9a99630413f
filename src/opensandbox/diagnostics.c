/* diagnostics.c: GET /v1/sandboxes/{id}/diagnostics/logs and …/events (OPENSANDBOX.md section
 * 2.2), inline, the last 1 MiB: `lifecycle` logs are the daemon's log lines about the sandbox
 * (every line naming it, through a tap on the logger, kept in a bounded ring per record),
 * `container` its entrypoint's output (the record's log file), `all` both; events are its state
 * transitions, one line each with its time, in a bounded ring. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os-internal.h"

#define SB         OS_R_SANDBOX
#define INLINE_MAX (1u << 20)   /* the most one answer's content holds */
#define LIFE_MAX   (128u << 10) /* the lifecycle lines kept per sandbox */
#define EVENTS_MAX (32u << 10)  /* the event lines kept per sandbox */
#define LINE_SKIP  512          /* a cut line is dropped up to here to start on a whole one */

/* The surface's diagnostics (ctx->diag): the tap on the daemon's log. */
typedef struct os_diag {
        os_ctx *ctx;
        sh_log_tap tap;
} os_diag;

/* What a record keeps (rec->diag), allocated on its first line. */
typedef struct diag_rec {
        os_ring life;
        os_ring events;
} diag_rec;

static diag_rec *diag_of(os_record *rec)
{
        diag_rec *d = rec->diag;

        if (d)
                return d;
        d = calloc(1, sizeof(*d));
        if (!d)
                return NULL;
        /* The rings grow with what they hold, up to their bound. */
        d->life.cap = LIFE_MAX;
        d->events.cap = EVENTS_MAX;
        rec->diag = d;
        return d;
}

/* ---- what goes in ---- */

/* Every line of the daemon's log that names a /v1 sandbox: into its record's ring. A line
 * about a native sandbox (no record) is not kept. */
static void on_line(const char *sandbox, const char *line, size_t len, void *data)
{
        os_diag *dg = data;
        os_record *rec = os_record_find(dg->ctx, sandbox, strlen(sandbox));
        diag_rec *d;

        if (!rec || !(d = diag_of(rec)))
                return;
        os_ring_append(&d->life, line, len);
        os_ring_append(&d->life, "\n", 1);
}

/* Only OpenSandbox's sandboxes keep a log: the native surface's lines are never built for it. */
static bool wants_line(const char *sandbox, void *data)
{
        os_diag *dg = data;

        return os_record_find(dg->ctx, sandbox, strlen(sandbox)) != NULL;
}

/* Every state change of rec: a line in its events ring. */
static void on_transition(os_record *rec, os_state from, os_state to)
{
        diag_rec *d = diag_of(rec);
        char t[32], line[1400];
        int n;

        if (!d)
                return;
        sh_rfc3339_format(rec->transition_ms, t);
        n = snprintf(line, sizeof(line), "%s %s -> %s (%s): %s\n", t, os_state_name(from),
                     os_state_name(to), rec->reason ? rec->reason : "",
                     rec->message ? rec->message : "");
        if (n < 0)
                return;
        if ((size_t)n >= sizeof(line)) {
                n = sizeof(line) - 1;
                line[n - 1] = '\n';
        }
        os_ring_append(&d->events, line, (size_t)n);
}

/* ---- what comes out ---- */

/* Text for a JSON string, in place: every byte that is not part of valid UTF-8, and NUL (a
 * cJSON string ends there), becomes '?' (one byte for one: the size stays what was kept). */
static void clean_text(char *s, size_t n)
{
        size_t i = 0;

        while (i < n) {
                size_t k = s[i] ? sh_utf8_seq_len((const unsigned char *)s + i, n - i) : 0;

                if (k == 0) {
                        s[i++] = '?';
                        continue;
                }
                i += k;
        }
}

/* One part of a content: the last `budget` bytes of a ring. `cut` says whether anything older
 * is missing (dropped by the ring or by the budget). */
typedef struct part {
        char *p;
        size_t len;
        bool cut;
} part;

/* The last `budget` bytes of `all` (len bytes, taken), `cut` when older ones are missing. */
static int shape(char *all, size_t len, bool cut, size_t budget, part *ret)
{
        size_t skip = 0;

        ret->cut = cut;
        if (len > budget) {
                skip = len - budget;
                ret->cut = true;
        }
        /* Cut inside a line: start at the next whole one, when it is near. */
        if (ret->cut && skip < len) {
                char *nl =
                        memchr(all + skip, '\n', len - skip < LINE_SKIP ? len - skip : LINE_SKIP);

                if (skip == 0 || all[skip - 1] != '\n') {
                        if (nl && (size_t)(nl + 1 - all) < len)
                                skip = (size_t)(nl + 1 - all);
                }
        }
        ret->len = len - skip;
        ret->p = malloc(ret->len + 1);
        if (!ret->p) {
                free(all);
                return -ENOMEM;
        }
        memcpy(ret->p, all + skip, ret->len);
        ret->p[ret->len] = '\0';
        free(all);
        clean_text(ret->p, ret->len);
        return 0;
}

static int take(const os_ring *g, size_t budget, part *ret)
{
        char *all;

        *ret = (part){0};
        if (!g || !g->len) {
                ret->cut = g && g->total > 0;
                return 0;
        }
        all = malloc(g->len);
        if (!all)
                return -ENOMEM;
        os_ring_copy(g, all);
        return shape(all, g->len, g->total > g->len, budget, ret);
}

/* The same of the entrypoint's log, read from its file (at most `budget` bytes of it). */
static int take_log(os_record *rec, size_t budget, part *ret)
{
        const sh_ringlog *g = os_record_container_log(rec);
        uint64_t n = sh_ringlog_kept(g) < budget ? sh_ringlog_kept(g) : budget, off = g->total - n;
        char *all;
        ssize_t r;

        *ret = (part){.cut = off > 0};
        if (!n)
                return 0;
        all = malloc((size_t)n);
        if (!all)
                return -ENOMEM;
        r = sh_ringlog_read(g, os_record_sandbox(rec), off, all, (size_t)n);
        if (r < 0) {
                free(all);
                return (int)r;
        }
        return shape(all, (size_t)r, off > 0, budget, ret);
}

static const os_ring *life_ring(const os_record *rec)
{
        const diag_rec *d = rec->diag;

        return d ? &d->life : NULL;
}

static const os_ring *events_ring(const os_record *rec)
{
        const diag_rec *d = rec->diag;

        return d ? &d->events : NULL;
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
                if ((e = take(life_ring(rec), INLINE_MAX, &life)) < 0)
                        goto fail;
                reply_content(r, rec, "logs", name, life.p ? life.p : "", life.cut);
        } else if (scope == 1) {
                if ((e = take_log(rec, INLINE_MAX, &cont)) < 0)
                        goto fail;
                reply_content(r, rec, "logs", name, cont.p ? cont.p : "", cont.cut);
        } else {
                /* Both, each under a heading: the lifecycle lines (at most LIFE_MAX) first, the
                 * container's last bytes in what is left of the 1 MiB. */
                size_t room = INLINE_MAX - strlen(LIFE_HEAD) - strlen(CONT_HEAD);

                if ((e = take(life_ring(rec), room, &life)) < 0 ||
                    (e = take_log(rec, room - life.len, &cont)) < 0)
                        goto fail;
                if (asprintf(&all, "%s%s%s%s", LIFE_HEAD, life.p ? life.p : "", CONT_HEAD,
                             cont.p ? cont.p : "") < 0) {
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
        if (take(events_ring(rec), INLINE_MAX, &ev) < 0) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        reply_content(r, rec, "events", name, ev.p ? ev.p : "", ev.cut);
        free(ev.p);
}

/* ---- the surface's start and end ---- */

static void record_gone(os_record *rec);

int os_diag_init(os_ctx *ctx, sh_error **err)
{
        static const os_record_observer observer = {.transition = on_transition,
                                                    .gone = record_gone};
        os_diag *dg = calloc(1, sizeof(*dg));

        if (!dg)
                return sh_error_make(err, ENOMEM, "out of memory");
        dg->ctx = ctx;
        dg->tap = (sh_log_tap){.fn = on_line, .wants = wants_line, .data = dg};
        sh_log_tap_add(&dg->tap);
        ctx->diag = dg;
        os_record_observe(ctx, &observer);
        return 0;
}

static void record_gone(os_record *rec)
{
        diag_rec *d = rec->diag;

        if (!d)
                return;
        rec->diag = NULL;
        os_ring_done(&d->life);
        os_ring_done(&d->events);
        free(d);
}

void os_diag_free_all(os_ctx *ctx)
{
        os_diag *dg = ctx->diag;

        if (!dg)
                return;
        sh_log_tap_remove(&dg->tap);
        ctx->diag = NULL;
        free(dg);
}

const sh_route os_diag_routes[] = {
        {"/v1/sandboxes/{}/diagnostics/logs", SH_M_GET, NULL, api_logs, SB},
        {"/v1/sandboxes/{}/diagnostics/events", SH_M_GET, NULL, api_events, SB},
};
const size_t os_diag_n_routes = ARRAY_SIZE(os_diag_routes);
