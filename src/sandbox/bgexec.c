/* bgexec.c: a sandbox's background commands (sh/bgexec.h): each an exec session whose
 * consumer is its log, and what the sandbox keeps for them together (its book, attached to it):
 * the rate their reads are billed to, the commands running under SANDBOX_HOST_BACKGROUND_MAX,
 * and the budget of their logs. */
#include "sh/bgexec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "sandbox-internal.h"
#include "sh/list.h"

/* What a sandbox keeps for its background commands, attached to it under book_key: freed
 * with the sandbox object, which each command holds a reference of. */
typedef struct book {
        sh_exec_rate *rate;          /* the reads of every one of them (an entrypoint's too) */
        sh_bgexec *logs, *logs_tail; /* the commands' (not an entrypoint's), oldest first */
        unsigned running;            /* of them, under background_max */
        uint64_t log_bytes;          /* kept by their logs together */
        uint64_t next_log;           /* the next log file's number */
        uint64_t background_max, log_budget;
} book;

static const char book_key;

struct sh_bgexec {
        sh_sandbox *sb; /* a reference */
        book *bk;
        bool counted; /* a command's: under the book's bounds, on its list */
        bool running, held, shell;
        uint64_t timeout_ms;
        sh_exec *e; /* until its end */
        sh_ringlog log;
        sh_bgexec_fn fn;
        void *data;
        SH_LIST_FIELDS(sh_bgexec, logs);
};

static void book_free(void *p)
{
        book *bk = p;

        sh_exec_rate_unref(bk->rate);
        free(bk);
}

static book *book_of(sh_sandbox *sb, sh_error **err)
{
        const sh_sandbox_env *env = sh_sandbox_host(sb);
        book *bk = sh_sandbox_attached(sb, &book_key);

        if (bk)
                return bk;
        bk = calloc(1, sizeof(*bk));
        if (!bk || !(bk->rate = sh_exec_rate_new(env->exec.loop, SH_BG_RATE))) {
                free(bk);
                sh_error_make(err, ENOMEM, "out of memory");
                return NULL;
        }
        bk->background_max = env->cfg->background_max;
        bk->log_budget = SH_BG_LOG_BUDGET_TIMES * env->cfg->command_log_max;
        if (sh_sandbox_attach(sb, &book_key, bk, book_free, err) < 0) {
                book_free(bk);
                return NULL;
        }
        return bk;
}

sh_exec_rate *sh_bgexec_rate(sh_sandbox *sb, sh_error **err)
{
        book *bk = book_of(sb, err);

        return bk ? bk->rate : NULL;
}

int sh_bgexec_new(sh_sandbox *sb, const sh_bgexec_opts *o, sh_bgexec **ret, sh_error **err)
{
        book *bk = book_of(sb, err);
        sh_bgexec *b;
        char name[24];

        if (!bk)
                return -1;
        if (!o->log_name && bk->running >= bk->background_max)
                return sh_error_new(err, SH_E_UNAVAILABLE,
                                    "the sandbox runs %" PRIu64 " background commands already "
                                    "(SANDBOX_HOST_BACKGROUND_MAX): wait for one to end",
                                    bk->background_max);
        b = calloc(1, sizeof(*b));
        if (!b)
                return sh_error_make(err, ENOMEM, "out of memory");
        b->bk = bk;
        b->counted = !o->log_name;
        b->held = o->hold;
        b->shell = o->shell;
        b->timeout_ms = o->timeout_ms;
        if (b->counted) {
                snprintf(name, sizeof(name), "c-%" PRIu64, bk->next_log++);
                if (sh_ringlog_create(&b->log, sb, name, sh_sandbox_host(sb)->cfg->command_log_max,
                                      err) < 0) {
                        free(b);
                        return -1;
                }
                SH_LIST_INSERT_AFTER(logs, bk->logs, bk->logs_tail, b);
                bk->logs_tail = b;
        } else {
                sh_ringlog_init(&b->log, o->log_name, o->log_max);
        }
        b->sb = sh_sandbox_ref(sb);
        *ret = b;
        return 0;
}

/* It no longer runs: its room under the bound is free. */
static void stopped(sh_bgexec *b)
{
        if (b->running && b->counted)
                b->bk->running--;
        b->running = false;
}

static void on_event(sh_exec *e, const sh_exec_event *ev, void *data)
{
        sh_bgexec *b = data;

        if (ev->type == SH_EXEC_EV_HEARTBEAT)
                return;
        if (ev->type == SH_EXEC_EV_CHUNK) {
                if (b->held)
                        b->fn(e, ev, b->data);
                else
                        sh_bgexec_append(b, ev->chunk.data, ev->chunk.len);
                return;
        }
        /* The end: the owner may free b; our reference keeps e (and its `why`) until after. */
        b->e = NULL;
        stopped(b);
        b->fn(e, ev, b->data);
        sh_exec_detach(e);
}

int sh_bgexec_start(sh_bgexec *b, char *const *argv, const cJSON *env, sh_bgexec_fn fn, void *data,
                    sh_error **err)
{
        /* No heartbeat: nobody is there to keep alive. */
        const sh_exec_opts o = {.timeout_ms = b->timeout_ms,
                                .merge_output = true,
                                .rate = b->bk->rate,
                                .rate_charge_min = SH_BG_CHARGE_MIN,
                                .shell = b->shell};

        b->fn = fn;
        b->data = data;
        if (sh_sandbox_exec(b->sb, argv, env, &o, on_event, b, &b->e, err) < 0)
                return -1;
        b->running = true;
        if (b->counted)
                b->bk->running++;
        return 0;
}

/* Its log goes (its file removed), its bytes out of the budget. */
static void drop_log(sh_bgexec *b)
{
        uint64_t kept = sh_ringlog_drop(&b->log, b->sb, sh_sandbox_id(b->sb));

        if (b->counted)
                b->bk->log_bytes -= kept;
}

void sh_bgexec_append(sh_bgexec *b, const char *p, size_t n)
{
        int64_t grown = sh_ringlog_append(&b->log, b->sb, p, n, sh_sandbox_id(b->sb));
        book *bk = b->bk;
        sh_bgexec *c;

        if (!b->counted)
                return;
        bk->log_bytes += (uint64_t)grown;
        /* Over the budget: finished commands' logs go, oldest first (a running one's is bounded
         * by COMMAND_LOG_MAX, and they by the bound on running commands). */
        for (c = bk->logs; c && bk->log_bytes > bk->log_budget; c = c->logs_next)
                if (!c->running && sh_ringlog_kept(&c->log))
                        drop_log(c);
}

void sh_bgexec_unhold(sh_bgexec *b)
{
        b->held = false;
}

void sh_bgexec_kill(sh_bgexec *b, const char *why)
{
        sh_exec_kill(b->e, why);
}

bool sh_bgexec_running(const sh_bgexec *b)
{
        return b->running;
}

const sh_ringlog *sh_bgexec_log(const sh_bgexec *b)
{
        return &b->log;
}

ssize_t sh_bgexec_read(const sh_bgexec *b, uint64_t off, char *out, size_t n)
{
        return sh_ringlog_read(&b->log, b->sb, off, out, n);
}

void sh_bgexec_free(sh_bgexec *b)
{
        if (!b)
                return;
        sh_exec_detach(TAKE_PTR(b->e)); /* a running one is killed, its end told to nobody */
        stopped(b);
        drop_log(b);
        if (b->counted) {
                if (b->bk->logs_tail == b)
                        b->bk->logs_tail = b->logs_prev;
                SH_LIST_REMOVE(logs, b->bk->logs, b);
        }
        sh_sandbox_unref(b->sb);
        free(b);
}
