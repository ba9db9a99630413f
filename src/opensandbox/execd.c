/* execd.c: a sandbox's execd state (rec->execd, execd.h), which commands, sessions and metrics
 * share: made on first use with the sandbox's read rate of unattended output, ended with its
 * record; the registry of its last 1024 commands (their texts bounded together, the oldest
 * finished ones forgotten first), the count of its running background commands
 * (SANDBOX_HOST_BACKGROUND_MAX), and its background logs' budget (OS_LOG_BUDGET_TIMES full
 * logs, finished commands' logs dropped oldest first past it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execd.h"

os_execd *os_execd_of(os_record *rec)
{
        os_execd *x;

        if (rec->gone)
                return NULL;
        if (rec->execd)
                return rec->execd;
        x = calloc(1, sizeof(*x));
        if (!x)
                return NULL;
        x->rec = rec;
        x->rate = sh_exec_rate_new(rec->ctx->loop, OS_LOG_RATE);
        if (!x->rate) {
                free(x);
                return NULL;
        }
        rec->execd = x;
        return x;
}

/* The bytes a sandbox's background logs may keep together: OS_LOG_BUDGET_TIMES full logs. */
static uint64_t log_budget(const os_execd *x)
{
        return OS_LOG_BUDGET_TIMES * x->rec->ctx->cfg->command_log_max;
}

void os_cmd_bg_stopped(os_cmd *c)
{
        if (c->background && c->x && c->state != CMD_FINISHED)
                c->x->n_running_bg--;
}

/* Its log goes (its file removed): a finished command's, over the budget, or one that leaves
 * the registry. */
static void drop_log(os_cmd *c)
{
        os_execd *x = c->x;

        x->log_bytes -= sh_ringlog_drop(&c->log, os_record_sandbox(x->rec), c->log_id);
}

/* Over the sandbox's budget for logs: finished commands' logs go, oldest first (a running
 * command's log is bounded by COMMAND_LOG_MAX, and they by SANDBOX_HOST_BACKGROUND_MAX). */
static void enforce_budget(os_execd *x)
{
        uint64_t budget = log_budget(x);
        os_cmd *c;

        for (c = x->cmds; c && x->log_bytes > budget; c = c->all_next)
                if (c->state == CMD_FINISHED && sh_ringlog_kept(&c->log))
                        drop_log(c);
}

/* Into its log file (the daemon keeps none of it); a command out of the registry (its
 * sandbox going) keeps nothing more. */
void os_cmd_log(os_cmd *c, const char *p, size_t n)
{
        if (!c->x)
                return;
        c->x->log_bytes +=
                sh_ringlog_append(&c->log, os_record_sandbox(c->x->rec), p, n, c->log_id);
        enforce_budget(c->x);
}

/* Into the registry, newest last: its reference, its text's share, and a background one's
 * room among the running ones (until os_cmd_bg_stopped). Room was made (os_cmd_room). */
void os_cmd_link(os_execd *x, os_cmd *c)
{
        c->x = x;
        c->refs++;
        SH_LIST_INSERT_AFTER(all, x->cmds, x->cmds_tail, c);
        x->cmds_tail = c;
        x->n_cmds++;
        x->text_bytes += c->text_len;
        if (c->background)
                x->n_running_bg++;
}

void os_cmd_unlink(os_cmd *c)
{
        os_execd *x = c->x;

        if (!x)
                return;
        if (x->cmds_tail == c)
                x->cmds_tail = c->all_prev;
        SH_LIST_REMOVE(all, x->cmds, c);
        x->n_cmds--;
        x->text_bytes -= c->text_len;
        os_cmd_bg_stopped(c);
        drop_log(c);
        c->x = NULL;
        os_cmd_unref(c);
}

bool os_cmd_room(os_execd *x, size_t need)
{
        os_cmd *c, *next;

        for (c = x->cmds;
             c && (x->n_cmds >= OS_COMMANDS_MAX || x->text_bytes + need > OS_COMMAND_TEXTS_MAX);
             c = next) {
                next = c->all_next;
                if (c->state == CMD_FINISHED)
                        os_cmd_unlink(c);
        }
        return x->n_cmds < OS_COMMANDS_MAX && x->text_bytes + need <= OS_COMMAND_TEXTS_MAX;
}

os_cmd *os_cmd_find(os_execd *x, const char *id, size_t len)
{
        os_cmd *c;

        if (!x || len != OS_UUID_LEN)
                return NULL;
        for (c = x->cmds; c; c = c->all_next)
                if (memcmp(c->id, id, OS_UUID_LEN) == 0)
                        return c;
        return NULL;
}

void os_execd_record_gone(os_record *rec)
{
        os_execd *x = rec->execd;

        if (!x)
                return;
        os_metrics_gone(x);
        os_sessions_gone(x);
        /* Their processes die with the sandbox; the engine then ends each session with an
         * error event ("the sandbox was deleted"), which a foreground stream shows. */
        while (x->cmds)
                os_cmd_unlink(x->cmds);
        /* the sessions billed to it (the entrypoint's too) keep it until they end */
        sh_exec_rate_unref(x->rate);
        rec->execd = NULL;
        free(x);
}

void os_execd_free_all(os_ctx *ctx)
{
        /* Every record has gone (os_execd_record_gone): nothing is left here. */
}

/* A served execd path asked with another method: 405 (else proxy.c's catch-all, which knows
 * no method, would say the route is not served yet). */
void os_execd_wrong_method(sh_request *r)
{
        os_reply_error(r, 405, "METHOD_NOT_ALLOWED", "%s is not a method of this route",
                       sh_request_method(r));
}
