/* commands.c: a sandbox's execd commands (OPENSANDBOX.md section 3.1), the routes: POST
 * /command (its fields judged, then a run: run.c), GET /command/status/{id}, GET
 * /command/{id}/logs (a background command's log streamed from its file in bounded steps, from
 * a byte offset), DELETE /command?id= (a command's or a session's). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "execd.h"
#include "sh/capability.h"

SH_CAPABILITY(os_command, "opensandbox.command")
SH_CAPABILITY(os_command_background, "opensandbox.command-background")

/* `field` of body: absent or null is NULL. */
static const cJSON *opt(const cJSON *body, const char *name)
{
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(body, name);

        return f && !cJSON_IsNull(f) ? f : NULL;
}

/* Validates the fields /command and a session's run share. 0, or -1 having answered. */
int os_run_fields(sh_request *r, const cJSON *body, os_run_opts *o)
{
        const cJSON *cmd = opt(body, "command"), *cwd = opt(body, "cwd");
        const cJSON *t = opt(body, "timeout");

        if (!cJSON_IsObject(body)) {
                os_reply_code(r, OS_E_BAD_BODY, "the body is a JSON object");
                return -1;
        }
        if (!cJSON_IsString(cmd) || !*cmd->valuestring) {
                os_reply_code(r, OS_E_BAD_BODY, "'command' is a non-empty string");
                return -1;
        }
        /* One argv string of the kernel's (MAX_ARG_STRLEN): a longer one could not be run. */
        if (strlen(cmd->valuestring) > OS_COMMAND_TEXT_MAX) {
                os_reply_code(r, OS_E_BAD_BODY, "'command' is longer than %u bytes",
                              OS_COMMAND_TEXT_MAX);
                return -1;
        }
        if (cwd && (!cJSON_IsString(cwd) || strlen(cwd->valuestring) > 4096)) {
                os_reply_code(r, OS_E_BAD_BODY, "'cwd' is a path of at most 4096 bytes");
                return -1;
        }
        if (t && (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble > 9.2e18 ||
                  t->valuedouble != (double)(uint64_t)t->valuedouble)) {
                os_reply_code(r, OS_E_BAD_BODY, "'timeout' is a number of milliseconds");
                return -1;
        }
        o->text = cmd->valuestring;
        o->cwd = cwd && *cwd->valuestring ? cwd->valuestring : NULL;
        o->timeout_ms = t ? (uint64_t)t->valuedouble : 0;
        return 0;
}

static int judge_ids(sh_request *r, const cJSON *body, const sh_sandbox *sb)
{
        const cJSON *uid = opt(body, "uid"), *gid = opt(body, "gid");
        const sh_fs_owner *own = sh_sandbox_owner(sb);

        if ((uid && !cJSON_IsNumber(uid)) || (gid && !cJSON_IsNumber(gid)) ||
            (uid && (uid->valuedouble < 0 || uid->valuedouble > 4294967295.0)) ||
            (gid && (gid->valuedouble < 0 || gid->valuedouble > 4294967295.0))) {
                os_reply_code(r, OS_E_BAD_BODY, "'uid' and 'gid' are non-negative integers");
                return -1;
        }
        if (gid && !uid) {
                os_reply_code(r, OS_E_BAD_BODY, "uid is required when gid is provided");
                return -1;
        }
        /* A sandbox's processes have its one uid and gid: another would need privileges the
         * sandbox never has. */
        if ((uid && (uid_t)uid->valuedouble != own->uid) ||
            (gid && (gid_t)gid->valuedouble != own->gid)) {
                os_reply_code(r, OS_E_NOT_SUPPORTED,
                              "commands here run as the sandbox's own uid %u and gid %u only",
                              (unsigned)own->uid, (unsigned)own->gid);
                return -1;
        }
        return 0;
}

static int judge_envs(sh_request *r, const cJSON *envs)
{
        const cJSON *v;

        if (!envs)
                return 0;
        if (!cJSON_IsObject(envs)) {
                os_reply_code(r, OS_E_BAD_BODY, "'envs' is an object of strings");
                return -1;
        }
        cJSON_ArrayForEach(v, envs)
        {
                if (!cJSON_IsString(v)) {
                        os_reply_code(r, OS_E_BAD_BODY, "'envs' is an object of strings");
                        return -1;
                }
                if (!*v->string || strchr(v->string, '=')) {
                        os_reply_code(r, OS_E_BAD_BODY,
                                      "'envs' names are non-empty and hold no '='");
                        return -1;
                }
        }
        return 0;
}

static void api_run(sh_request *r)
{
        os_record *rec = os_request_record(r);
        bool empty;
        cJSON *body = os_json_body(r, os_code_name(OS_E_BAD_BODY), &empty);
        const cJSON *bg, *envs;
        os_run_opts o = {0};

        if (!body) {
                if (empty)
                        os_reply_code(r, OS_E_BAD_BODY, "the body is a JSON object");
                return;
        }
        if (os_run_fields(r, body, &o) < 0)
                goto out;
        bg = opt(body, "background");
        envs = opt(body, "envs");
        if (bg && !cJSON_IsBool(bg)) {
                os_reply_code(r, OS_E_BAD_BODY, "'background' is a boolean");
                goto out;
        }
        if (!os_record_sandbox(rec)) {
                os_reply_code(r, OS_E_SANDBOX_NOT_FOUND, "the sandbox was deleted");
                goto out;
        }
        if (judge_ids(r, body, os_record_sandbox(rec)) < 0 || judge_envs(r, envs) < 0)
                goto out;
        o.background = bg && cJSON_IsTrue(bg);
        o.envs = envs;
        os_run_start(r, rec, &o);
out:
        cJSON_Delete(body);
}

static void add_time(cJSON *o, const char *name, uint64_t ms)
{
        char t[32];

        os_time_format(ms, t);
        cJSON_AddStringToObject(o, name, t);
}

static void api_status(sh_request *r)
{
        os_record *rec = os_request_record(r);
        size_t len;
        const char *id = sh_request_param(r, 1, &len);
        os_cmd *c = os_cmd_find(rec->execd, id, len);
        cJSON *o;

        if (!c) {
                os_reply_code(r, OS_E_NO_SUCH_COMMAND, "command not found: %.*s",
                              (int)(len > 64 ? 64 : len), id);
                return;
        }
        o = cJSON_CreateObject();
        if (o) {
                cJSON_AddStringToObject(o, "id", c->id);
                cJSON_AddStringToObject(o, "content", c->content);
                cJSON_AddBoolToObject(o, "running", c->state != CMD_FINISHED);
                if (c->state == CMD_FINISHED)
                        cJSON_AddNumberToObject(o, "exit_code", c->exit_code);
                if (c->error)
                        cJSON_AddStringToObject(o, "error", c->error);
                add_time(o, "started_at", c->start_ms);
                if (c->state == CMD_FINISHED)
                        add_time(o, "finished_at", c->finished_ms);
        }
        os_reply_json(r, 200, o);
}

/* A logs answer: the bytes [pos, end) of a command's log, read from its file OS_LOG_STEP at a
 * time as the client takes them (the daemon holds one step, never the log). `end` is decided
 * when the answer starts (its header names it): the log may grow meanwhile, the body stops
 * there. Bytes overwritten before they were sent (a client slower than the command's output
 * past COMMAND_LOG_MAX), or a sandbox deleted meanwhile, cut the connection: a short body,
 * never a wrong one. */
typedef struct log_reader {
        os_cmd *c; /* a reference */
        uint64_t pos, end;
} log_reader;

static ssize_t log_read(void *data, char *out, size_t max)
{
        log_reader *lr = data;
        ssize_t n;

        if (lr->pos >= lr->end)
                return SH_STREAM_END;
        if (max > OS_LOG_STEP)
                max = OS_LOG_STEP;
        if (max > lr->end - lr->pos)
                max = (size_t)(lr->end - lr->pos);
        n = sh_bgexec_read(lr->c->bg, lr->pos, out, max);
        if (n <= 0) {
                log_info("command-logs-cut", lr->c->log_id,
                         "a logs answer ends at %" PRIu64 " of %" PRIu64 ": %s", lr->pos, lr->end,
                         n == -ESTALE ? "overwritten before it was read"
                                      : strerror(n < 0 ? (int)-n : EIO));
                return SH_STREAM_CUT;
        }
        lr->pos += (uint64_t)n;
        return n;
}

static void log_reader_release(void *data)
{
        log_reader *lr = data;

        os_cmd_unref(lr->c);
        free(lr);
}

static const sh_pending_ops log_ops = {
        .release = log_reader_release,
        .read = log_read,
};

static void api_logs(sh_request *r)
{
        os_record *rec = os_request_record(r);
        size_t len;
        const char *id = sh_request_param(r, 1, &len);
        const sh_query_param *cur = sh_query_find(sh_request_query(r), "cursor");
        os_cmd *c = os_cmd_find(rec->execd, id, len);
        const sh_ringlog *g;
        uint64_t from = 0, end;
        char hdr[32];
        sh_response *resp;
        sh_pending *tok;
        log_reader *lr;

        if (!c) {
                os_reply_code(r, OS_E_NO_SUCH_COMMAND, "command not found: %.*s",
                              (int)(len > 64 ? 64 : len), id);
                return;
        }
        if (!c->bg) {
                os_reply_code(r, OS_E_BAD_BODY,
                              "command %s is not running in background: its output was its "
                              "stream",
                              c->id);
                return;
        }
        if (cur && cur->val_len &&
            (memchr(cur->val, '\0', cur->val_len) || sh_parse_u64(cur->val, &from) < 0)) {
                os_reply_code(r, OS_E_BAD_BODY, "'cursor' is a byte offset (an integer >= 0)");
                return;
        }
        /* From the oldest kept byte when the cursor is older; to the end as it is now. */
        g = sh_bgexec_log(c->bg);
        end = g->total;
        if (from < sh_ringlog_first(g))
                from = sh_ringlog_first(g);
        if (from > end)
                from = end;
        if (from == end) {
                resp = sh_response_buffer(NULL, 0);
        } else {
                lr = calloc(1, sizeof(*lr));
                if (!lr) {
                        os_reply_code(r, OS_E_RUNTIME, "out of memory");
                        return;
                }
                c->refs++;
                *lr = (log_reader){.c = c, .pos = from, .end = end};
                tok = sh_request_wait(r, &log_ops, lr);
                if (!tok) {
                        log_reader_release(lr);
                        os_reply_code(r, OS_E_RUNTIME, "out of memory");
                        return;
                }
                resp = sh_response_stream(tok, OS_LOG_STEP);
                sh_pending_release(tok); /* the request's and the response's remain */
        }
        if (!resp) {
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        /* The offset after what the body holds: the next poll's cursor. */
        snprintf(hdr, sizeof(hdr), "%" PRIu64, end);
        sh_response_header(resp, "EXECD-COMMANDS-TAIL-CURSOR", hdr);
        sh_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
        sh_response_header(resp, "X-Content-Type-Options", "nosniff");
        sh_reply(r, 200, resp);
}

static void api_interrupt(sh_request *r)
{
        os_record *rec = os_request_record(r);
        const sh_query_param *id = sh_query_find(sh_request_query(r), "id");
        os_execd *x = os_execd_of(rec);

        if (!id || !id->val_len) {
                os_reply_code(r, OS_E_MISSING_QUERY, "missing query parameter 'id'");
                return;
        }
        if (x && os_cmd_interrupt(x, id->val, id->val_len, "interrupted") == 1) {
                os_reply_empty(r, 200);
                return;
        }
        if (x && os_session_interrupt(x, id->val, id->val_len) == 1) {
                os_reply_empty(r, 200);
                return;
        }
        os_reply_code(r, OS_E_NO_SUCH_COMMAND, "no command or session with this id");
}

const sh_route os_command_routes[] = {
        {OS_EXECD_PATH "/command", SH_M_POST, &sh_body_buffer, api_run, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/command", SH_M_DELETE, NULL, api_interrupt, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/command", OS_EXECD_METHODS, NULL, os_execd_wrong_method, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/command/status/{}", SH_M_GET, NULL, api_status, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/command/status/{}", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/command/{}/logs", SH_M_GET, NULL, api_logs, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/command/{}/logs", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
};
const size_t os_command_n_routes = ARRAY_SIZE(os_command_routes);
