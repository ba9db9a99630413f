/* journal.c: what a sandbox's journal keeps (sh_sandbox_journal_keep: the /v1 diagnostics):
 * every line of the daemon's log that names it (a tap on the logger, the manager's: a line
 * about a sandbox without a journal is never even built for it) and the events its surface
 * notes (its state changes), each in a bounded ring (sh/ring.h) attached to the sandbox, gone
 * with it. */
#include "sh/sandbox.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-internal.h"

/* The key of a journal on its sandbox (sh_sandbox_attach). */
static const char journal_key;

typedef struct journal {
        sh_ring part[2]; /* SH_JOURNAL_LOG, SH_JOURNAL_EVENTS */
} journal;

static void journal_free(void *data)
{
        journal *j = data;

        sh_ring_done(&j->part[SH_JOURNAL_LOG]);
        sh_ring_done(&j->part[SH_JOURNAL_EVENTS]);
        free(j);
}

int sh_sandbox_journal_keep(sh_sandbox *sb, sh_error **err)
{
        journal *j;

        if (sh_sandbox_attached(sb, &journal_key))
                return 0;
        j = calloc(1, sizeof(*j));
        if (!j)
                return sh_error_make(err, ENOMEM, "out of memory");
        /* The rings grow with what they hold, up to their bound. */
        j->part[SH_JOURNAL_LOG].cap = SH_JOURNAL_LOG_MAX;
        j->part[SH_JOURNAL_EVENTS].cap = SH_JOURNAL_EVENTS_MAX;
        if (sh_sandbox_attach(sb, &journal_key, j, journal_free, err) < 0) {
                journal_free(j);
                return -1;
        }
        return 0;
}

const sh_ring *sh_sandbox_journal(const sh_sandbox *sb, sh_journal_part part)
{
        journal *j = sh_sandbox_attached(sb, &journal_key);

        return j ? &j->part[part] : NULL;
}

void sh_sandbox_journal_note(sh_sandbox *sb, const char *line, size_t len)
{
        journal *j = sh_sandbox_attached(sb, &journal_key);

        if (!j)
                return;
        sh_ring_append(&j->part[SH_JOURNAL_EVENTS], line, len);
        sh_ring_append(&j->part[SH_JOURNAL_EVENTS], "\n", 1);
}

/* The journal of the live sandbox a log line names, or NULL. */
static journal *journal_of(sh_manager *m, const char *sandbox)
{
        /* The registry's look-up; the reference dropped at once (the registry holds one). */
        sh_sandbox *sb = sh_manager_get(m, sandbox, strlen(sandbox));
        journal *j = sb ? sh_sandbox_attached(sb, &journal_key) : NULL;

        sh_sandbox_unref(sb);
        return j;
}

static void journal_line(const char *sandbox, const char *line, size_t len, void *data)
{
        journal *j = journal_of(data, sandbox);

        if (!j)
                return;
        sh_ring_append(&j->part[SH_JOURNAL_LOG], line, len);
        sh_ring_append(&j->part[SH_JOURNAL_LOG], "\n", 1);
}

static bool journal_wants(const char *sandbox, void *data)
{
        return journal_of(data, sandbox) != NULL;
}

void sh_journal_tap_init(sh_log_tap *t, sh_manager *m)
{
        *t = (sh_log_tap){.fn = journal_line, .wants = journal_wants, .data = m};
}
