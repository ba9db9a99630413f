/* sessions.c: a sandbox's bash sessions (OPENSANDBOX.md section 3.1): POST /session,
 * POST /session/{sid}/run, DELETE /session/{sid}; at most 64 per sandbox. A session is no
 * process: each run is a fresh shell (bash, sh without) through the same engine as every
 * command, that starts from the session's state (its directory and exported environment,
 * shell text its previous run printed) and prints its new state after the command, which
 * the daemon keeps for the next run (run.c runs its script, sse.c takes the state out of the
 * stream). The state is the sandbox's own text run only inside that sandbox, as its uid: it
 * crosses no privilege boundary, and it is bounded (OS_SESSION_STATE_MAX). */
#include <stdlib.h>
#include <string.h>

#include "execd.h"
#include "sh/random.h"
#include "sh/capability.h"

SH_CAPABILITY(os_sessions, "opensandbox.sessions")

#define RUNS_MAX 16 /* runs of one session at once */

struct os_session {
        os_execd *x;
        char id[SH_UUID_LEN + 1];
        char *cwd;    /* the create's, NULL: none (the workspace) */
        char *state;  /* the last run's state (shell text), NULL before any */
        os_cmd *runs; /* running now (their `session` is this one) */
        unsigned n_runs;
        SH_LIST_FIELDS(os_session, all);
};

static os_session *find_session(os_execd *x, const char *id, size_t len)
{
        os_session *s;

        if (!x || len != SH_UUID_LEN)
                return NULL;
        for (s = x->sessions; s; s = s->all_next)
                if (memcmp(s->id, id, SH_UUID_LEN) == 0)
                        return s;
        return NULL;
}

void os_session_run_started(os_session *s, os_cmd *c)
{
        SH_LIST_PREPEND(runs, s->runs, c);
        s->n_runs++;
}

void os_session_run_ended(os_session *s, os_cmd *c, const char *state, size_t len)
{
        char *st = state ? sh_memdup0(state, len) : NULL;

        if (st) {
                free(s->state);
                s->state = st;
        }
        SH_LIST_REMOVE(runs, s->runs, c);
        s->n_runs--;
}

/* The session goes: its running commands die with their trees (`why`: their traceback), and
 * no longer tell it of their end. */
static void session_free(os_session *s, const char *why)
{
        os_cmd *c;

        SH_LIST_REMOVE(all, s->x->sessions, s);
        s->x->n_sessions--;
        while ((c = s->runs)) {
                SH_LIST_REMOVE(runs, s->runs, c);
                c->session = NULL;
                os_cmd_kill(c, why);
        }
        free(s->cwd);
        free(s->state);
        free(s);
}

void os_sessions_gone(os_execd *x)
{
        while (x->sessions)
                session_free(x->sessions, "the sandbox was deleted");
}

int os_session_interrupt(os_execd *x, const char *id, size_t len)
{
        os_session *s = find_session(x, id, len);

        if (!s)
                return 0;
        session_free(s, "the session was deleted");
        return 1;
}

static void api_create(sh_request *r)
{
        os_record *rec = os_request_record(r);
        os_execd *x = os_execd_of(rec);
        bool empty;
        cJSON *body = os_json_body(r, os_code_name(OS_E_BAD_BODY), &empty), *o;
        const cJSON *cwd = NULL;
        os_session *s;

        if (!body && !empty)
                return;
        if (body && !cJSON_IsObject(body)) {
                os_reply_code(r, OS_E_BAD_BODY, "the body is a JSON object");
                goto out;
        }
        cwd = sh_json_opt(body, "cwd");
        if (cwd && (!cJSON_IsString(cwd) || strlen(cwd->valuestring) > 4096)) {
                os_reply_code(r, OS_E_BAD_BODY, "'cwd' is a path of at most 4096 bytes");
                goto out;
        }
        if (!x) {
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                goto out;
        }
        if (x->n_sessions >= OS_SESSIONS_MAX) {
                os_reply_code(r, OS_E_UNAVAILABLE,
                              "the sandbox has %d sessions already: delete one first",
                              OS_SESSIONS_MAX);
                goto out;
        }
        s = calloc(1, sizeof(*s));
        if (!s || (cwd && *cwd->valuestring && !(s->cwd = strdup(cwd->valuestring)))) {
                free(s);
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                goto out;
        }
        s->x = x;
        if (sh_random_uuid(s->id) < 0) {
                free(s->cwd);
                free(s);
                os_reply_code(r, OS_E_RUNTIME, "cannot draw the session's id");
                goto out;
        }
        SH_LIST_PREPEND(all, x->sessions, s);
        x->n_sessions++;
        o = cJSON_CreateObject();
        if (o && !cJSON_AddStringToObject(o, "session_id", s->id)) {
                cJSON_Delete(o);
                o = NULL;
        }
        os_reply_json(r, 200, o);
out:
        cJSON_Delete(body);
}

/* The session the path names, or NULL having answered 404. */
static os_session *session_of(sh_request *r)
{
        size_t len;
        const char *id = sh_request_param(r, 1, &len);
        os_session *s = find_session(os_request_record(r)->execd, id, len);

        if (!s)
                os_reply_code(r, OS_E_CONTEXT_NOT_FOUND, "session %.*s not found",
                              (int)(len > 64 ? 64 : len), id);
        return s;
}

static void api_run(sh_request *r)
{
        os_session *s = session_of(r);
        os_run_opts o = {0};
        _cleanup_cjson_ cJSON *body = s ? os_run_body(r, &o) : NULL;

        if (!body)
                return;
        if (s->n_runs >= RUNS_MAX) {
                os_reply_code(r, OS_E_UNAVAILABLE,
                              "the session runs %d commands already: wait for one to end",
                              RUNS_MAX);
                return;
        }
        o.session = s;
        o.state = s->state;
        o.first_cwd = s->state ? NULL : s->cwd;
        o.init_id = s->id;
        os_run_start(r, os_request_record(r), &o);
}

static void api_delete(sh_request *r)
{
        os_session *s = session_of(r);

        if (!s)
                return;
        session_free(s, "the session was deleted");
        os_reply_empty(r, 200);
}

const sh_route os_session_routes[] = {
        {OS_EXECD_PATH "/session", SH_M_POST, &sh_body_buffer, api_create, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/session", OS_EXECD_METHODS, NULL, os_execd_wrong_method, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/session/{}/run", SH_M_POST, &sh_body_buffer, api_run, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/session/{}/run", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/session/{}", SH_M_DELETE, NULL, api_delete, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/session/{}", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
};
const size_t os_session_n_routes = ARRAY_SIZE(os_session_routes);
