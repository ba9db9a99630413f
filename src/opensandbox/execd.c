/* execd.c: a sandbox's execd state (rec->execd, execd.h), which commands, sessions and metrics
 * share (and code contexts): made on first use, ended with its record; the registry of its last 1024 commands
 * (their texts bounded together, the oldest finished ones forgotten first). */
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
        rec->execd = x;
        return x;
}

/* Into the registry, newest last: its reference, its text's share. Room was made
 * (os_cmd_room). */
void os_cmd_link(os_execd *x, os_cmd *c)
{
        c->x = x;
        c->refs++;
        SH_LIST_INSERT_AFTER(all, x->cmds, x->cmds_tail, c);
        x->cmds_tail = c;
        x->n_cmds++;
        x->text_bytes += c->text_len;
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

        if (!x || len != SH_UUID_LEN)
                return NULL;
        for (c = x->cmds; c; c = c->all_next)
                if (memcmp(c->id, id, SH_UUID_LEN) == 0)
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
        os_code_gone(x);
        /* Their processes die with the sandbox; the engine then ends each session with an
         * error event ("the sandbox was deleted"), which a foreground stream shows. */
        while (x->cmds)
                os_cmd_unlink(x->cmds);
        rec->execd = NULL;
        free(x);
}

/* A served execd path asked with another method: 405 (else proxy.c's catch-all, which knows
 * no method, would say the route is not served yet). */
void os_execd_wrong_method(sh_request *r)
{
        os_reply_code(r, OS_E_METHOD_NOT_ALLOWED, "%s is not a method of this route",
                      sh_request_method(r));
}

void os_reply_event_stream(sh_queued_stream *qs)
{
        static const sh_header headers[] = {{"Content-Type", "text/event-stream"},
                                            {"Cache-Control", "no-cache"},
                                            {"X-Accel-Buffering", "no"},
                                            {"X-Content-Type-Options", "nosniff"},
                                            {NULL, NULL}};

        if (sh_queued_stream_reply(qs, headers) < 0)
                os_reply_code(sh_queued_stream_request(qs), OS_E_RUNTIME,
                              "cannot create the response");
}
