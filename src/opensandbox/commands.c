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

/* The fields /command and a session's run share (command, cwd, timeout) into o. */
static int run_fields(const cJSON *body, os_run_opts *o, os_err *e)
{
        const cJSON *cmd = sh_json_opt(body, "command"), *cwd = sh_json_opt(body, "cwd");
        const cJSON *t = sh_json_opt(body, "timeout");

        if (!cJSON_IsObject(body))
                return os_err_code(e, OS_E_BAD_BODY, "the body is a JSON object");
        if (!cJSON_IsString(cmd) || !*cmd->valuestring)
                return os_err_code(e, OS_E_BAD_BODY, "'command' is a non-empty string");
        /* One argv string of the kernel's (MAX_ARG_STRLEN): a longer one could not be run. */
        if (strlen(cmd->valuestring) > OS_COMMAND_TEXT_MAX)
                return os_err_code(e, OS_E_BAD_BODY, "'command' is longer than %u bytes",
                                   OS_COMMAND_TEXT_MAX);
        if (cwd && (!cJSON_IsString(cwd) || strlen(cwd->valuestring) > 4096))
                return os_err_code(e, OS_E_BAD_BODY, "'cwd' is a path of at most 4096 bytes");
        if (t && (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble > 9.2e18 ||
                  t->valuedouble != (double)(uint64_t)t->valuedouble))
                return os_err_code(e, OS_E_BAD_BODY, "'timeout' is a number of milliseconds");
        o->text = cmd->valuestring;
        o->cwd = cwd && *cwd->valuestring ? cwd->valuestring : NULL;
        o->timeout_ms = t ? (uint64_t)t->valuedouble : 0;
        return 0;
}

cJSON *os_run_body(sh_request *r, os_run_opts *o)
{
        bool empty;
        cJSON *body = os_json_body(r, os_code_name(OS_E_BAD_BODY), &empty);
        os_err e;

        if (!body && !empty)
                return NULL; /* answered */
        if (run_fields(body, o, &e) < 0) {
                os_reply_err(r, &e);
                cJSON_Delete(body);
                return NULL;
        }
        return body;
}

static bool is_id(const cJSON *v)
{
        return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 4294967295.0;
}

/* The fields only /command has (background, uid and gid, envs) into o. */
static int command_fields(const cJSON *body, const sh_sandbox *sb, os_run_opts *o, os_err *e)
{
        const cJSON *bg = sh_json_opt(body, "background"), *envs = sh_json_opt(body, "envs");
        const cJSON *uid = sh_json_opt(body, "uid"), *gid = sh_json_opt(body, "gid");
        const sh_fs_owner *own;
        const char *why;

        if (bg && !cJSON_IsBool(bg))
                return os_err_code(e, OS_E_BAD_BODY, "'background' is a boolean");
        if (!sb)
                return os_err_code(e, OS_E_SANDBOX_NOT_FOUND, "the sandbox was deleted");
        if ((uid && !is_id(uid)) || (gid && !is_id(gid)))
                return os_err_code(e, OS_E_BAD_BODY, "'uid' and 'gid' are non-negative integers");
        if (gid && !uid)
                return os_err_code(e, OS_E_BAD_BODY, "uid is required when gid is provided");
        /* A sandbox's processes have its one uid and gid: another would need privileges the
         * sandbox never has. */
        own = sh_sandbox_owner(sb);
        if ((uid && (uid_t)uid->valuedouble != own->uid) ||
            (gid && (gid_t)gid->valuedouble != own->gid))
                return os_err_code(e, OS_E_NOT_SUPPORTED,
                                   "commands here run as the sandbox's own uid %u and gid %u only",
                                   (unsigned)own->uid, (unsigned)own->gid);
        if ((why = sh_env_shape_why(envs)))
                return os_err_code(e, OS_E_BAD_BODY, "'envs' %s", why);
        o->background = bg && cJSON_IsTrue(bg);
        o->envs = envs;
        return 0;
}

static void api_run(sh_request *r)
{
        os_record *rec = os_request_record(r);
        os_run_opts o = {0};
        _cleanup_cjson_ cJSON *body = os_run_body(r, &o);
        os_err e;

        if (!body)
                return;
        if (command_fields(body, os_record_sandbox(rec), &o, &e) < 0)
                os_reply_err(r, &e);
        else
                os_run_start(r, rec, &o);
}

/* The command the path names, or NULL having answered 404. */
static os_cmd *cmd_of(sh_request *r)
{
        size_t len;
        const char *id = sh_request_param(r, 1, &len);
        os_cmd *c = os_cmd_find(os_request_record(r)->execd, id, len);

        if (!c)
                os_reply_code(r, OS_E_NO_SUCH_COMMAND, "command not found: %.*s",
                              (int)(len > 64 ? 64 : len), id);
        return c;
}

static void add_time(cJSON *o, const char *name, uint64_t ms)
{
        char t[32];

        os_time_format(ms, t);
        cJSON_AddStringToObject(o, name, t);
}

static void api_status(sh_request *r)
{
        os_cmd *c = cmd_of(r);
        cJSON *o;

        if (!c)
                return;
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

/* A logs answer: the bytes [cursor, end) of a command's log, read from its file as the client
 * takes them (sh_response_read_at); `end` is the log's end when the answer starts (its header
 * names it). Bytes overwritten before they were sent (a client slower than the command's output
 * past COMMAND_LOG_MAX), or a sandbox deleted meanwhile, cut the connection. */
static ssize_t log_read_at(void *data, uint64_t off, char *out, size_t n)
{
        const os_cmd *c = data;
        ssize_t k = sh_bgexec_read(c->bg, off, out, n);

        if (k <= 0)
                log_info("command-logs-cut", c->log_id, "a logs answer ends at %" PRIu64 ": %s",
                         off,
                         k == -ESTALE ? "overwritten before it was read"
                                      : strerror(k < 0 ? (int)-k : EIO));
        return k;
}

static void log_release(void *data)
{
        os_cmd_unref(data);
}

static const sh_read_at_ops log_ops = {.read_at = log_read_at, .release = log_release};

static void api_logs(sh_request *r)
{
        const sh_query_param *cur = sh_query_find(sh_request_query(r), "cursor");
        os_cmd *c = cmd_of(r);
        const sh_ringlog *g;
        uint64_t from = 0, end;
        char hdr[32];
        sh_response *resp;

        if (!c)
                return;
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
        c->refs++;
        resp = sh_response_read_at(r, from < end ? from : end, end, OS_LOG_STEP, &log_ops, c);
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

/* A command's id: it is killed (or it ended already); a session's: it is deleted. */
static void api_interrupt(sh_request *r)
{
        const sh_query_param *id = sh_query_find(sh_request_query(r), "id");
        os_execd *x = os_execd_of(os_request_record(r));
        os_cmd *c;

        if (!id || !id->val_len)
                os_reply_code(r, OS_E_MISSING_QUERY, "missing query parameter 'id'");
        else if (x && (c = os_cmd_find(x, id->val, id->val_len))) {
                os_cmd_kill(c, "interrupted");
                os_reply_empty(r, 200);
        } else if (x && os_session_interrupt(x, id->val, id->val_len))
                os_reply_empty(r, 200);
        else
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
