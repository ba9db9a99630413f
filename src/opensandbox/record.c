/* record.c: the records of the sandboxes created through /v1: attached to their sandboxes in
 * the manager's registry (found by its look-up, listed oldest first), their state machine
 * (state, reason, message, lastTransitionAt), the entrypoint's output ring, their Sandbox JSON
 * (expiresAt is the sandbox's expiry), and the end of a record when its sandbox is deleted (a
 * /v1 or native delete, its expiry, shutdown: the manager's delete observer). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "os-internal.h"
#include "sh/random.h"

/* ---- states --------------------------------------------------------------------------------- */

static const char *const state_names[OS_STATE_COUNT] = {
        [OS_PENDING] = "Pending",       [OS_RUNNING] = "Running",   [OS_PAUSING] = "Pausing",
        [OS_PAUSED] = "Paused",         [OS_RESUMING] = "Resuming", [OS_STOPPING] = "Stopping",
        [OS_TERMINATED] = "Terminated", [OS_FAILED] = "Failed",
};

const char *os_state_name(os_state s)
{
        return (unsigned)s < OS_STATE_COUNT ? state_names[s] : "Failed";
}

int os_state_parse(const char *s, size_t len)
{
        int i;

        for (i = 0; i < OS_STATE_COUNT; i++)
                if (strlen(state_names[i]) == len && memcmp(state_names[i], s, len) == 0)
                        return i;
        return -1;
}

/* ---- the registry: the manager's, the record attached to its sandbox ---------------------------- */

/* The key of a /v1 record on its sandbox (sh_sandbox_attach). */
static const char record_key;

os_record *os_record_ref(os_record *rec)
{
        if (rec)
                rec->refs++;
        return rec;
}

static void record_free(os_record *rec)
{
        sh_bgexec_free(rec->entry);
        sh_sandbox_unref(rec->sb);
        free(rec->reason);
        free(rec->message);
        cJSON_Delete(rec->metadata);
        cJSON_Delete(rec->entrypoint);
        free(rec->image_uri);
        free(rec->snapshot_id);
        /* The token stays a secret after the record: no copy of it left in freed memory. */
        sodium_memzero(rec->token, sizeof(rec->token));
        free(rec);
}

void os_record_unref(os_record *rec)
{
        if (rec && --rec->refs == 0)
                record_free(rec);
}

static void record_unref_attached(void *rec)
{
        os_record_unref(rec);
}

os_record *os_record_of(const sh_sandbox *sb)
{
        return sh_sandbox_attached(sb, &record_key);
}

os_record *os_record_find(os_ctx *ctx, const char *id, size_t len)
{
        /* The registry's look-up (hash chains): a live sandbox, and a reference dropped at
         * once (the registry holds its own: never the last). */
        sh_sandbox *sb = sh_manager_get(ctx->mgr, id, len);
        os_record *rec = sb ? os_record_of(sb) : NULL;

        sh_sandbox_unref(sb);
        return rec;
}

int os_record_link(os_record *rec, sh_sandbox *sb, sh_error **err)
{
        /* its journal (the diagnostics' lifecycle lines and events) from now on */
        if (sh_sandbox_journal_keep(sb, err) < 0)
                return -1;
        if (sh_sandbox_attach(sb, &record_key, os_record_ref(rec), record_unref_attached, err) <
            0) {
                os_record_unref(rec);
                return -1;
        }
        memcpy(rec->id, sh_sandbox_id(sb), SH_ID_LEN + 1);
        rec->sb = sh_sandbox_ref(sb);
        return 0;
}

/* Out of the registry (its sandbox is being deleted): no look-up finds it from now on, the
 * other files drop what they keep, the entrypoint's session is let go (its processes die with
 * the sandbox), the attachment's reference goes. */
static void record_unlink(os_record *rec)
{
        os_record *attached;

        if (rec->gone)
                return;
        rec->gone = true;
        attached = rec->sb ? sh_sandbox_detach(rec->sb, &record_key) : NULL;
        for (unsigned i = 0; i < rec->ctx->n_observers; i++)
                if (rec->ctx->observers[i]->gone)
                        rec->ctx->observers[i]->gone(rec);
        sh_bgexec_free(TAKE_PTR(rec->entry));
        sh_sandbox_unref(TAKE_PTR(rec->sb));
        os_record_unref(attached);
}

sh_sandbox *os_record_sandbox(const os_record *rec)
{
        return rec->sb;
}

const sh_ringlog *os_record_container_log(const os_record *rec)
{
        static const sh_ringlog none;

        return rec->entry ? sh_bgexec_log(rec->entry) : &none;
}

/* A new record for a create (state Pending, not yet in the registry); one reference. */
int os_record_new(os_ctx *ctx, os_record **ret, sh_error **err)
{
        os_record *rec = calloc(1, sizeof(*rec));
        int k;

        if (!rec)
                return sh_error_make(err, ENOMEM, "out of memory");
        rec->refs = 1;
        rec->ctx = ctx;
        rec->created_ms = rec->transition_ms = sh_now_wall_ms();
        rec->metadata = cJSON_CreateObject();
        rec->reason = strdup("creating");
        rec->message = strdup("the sandbox is being created");
        if (!rec->metadata || !rec->reason || !rec->message) {
                record_free(rec);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        /* The sandbox's access token (OPENSANDBOX.md section 1): 192 random bits from the
         * kernel's CSPRNG, compared only through its hash, in constant time. */
        k = sh_random_hex(rec->token, OS_TOKEN_LEN / 2);
        if (k < 0) {
                record_free(rec);
                return sh_error_make(err, -k, "no random bytes for a token");
        }
        crypto_generichash(rec->token_hash, sizeof(rec->token_hash),
                           (const unsigned char *)rec->token, OS_TOKEN_LEN, NULL, 0);
        *ret = rec;
        return 0;
}

void os_record_set_state(os_record *rec, os_state state, const char *reason, const char *fmt, ...)
{
        os_state from = rec->state;
        char *msg = NULL, *why = strdup(reason ? reason : "");
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        /* Out of memory keeps the old texts: the state itself always changes. */
        if (why) {
                free(rec->reason);
                rec->reason = why;
        }
        if (msg) {
                free(rec->message);
                rec->message = msg;
        }
        rec->state = state;
        rec->transition_ms = sh_now_wall_ms();
        log_debug("sandbox-state", rec->id, "%s -> %s (%s)", os_state_name(from),
                  os_state_name(state), rec->reason);
        for (unsigned i = 0; i < rec->ctx->n_observers; i++)
                if (rec->ctx->observers[i]->transition)
                        rec->ctx->observers[i]->transition(rec, from, state);
}

void os_record_set_metadata(os_record *rec, cJSON *metadata)
{
        cJSON_Delete(rec->metadata);
        rec->metadata = metadata;
}

void os_record_entry_ended(os_record *rec, int exit_code)
{
        rec->entry_ended = true;
        rec->entry_exit = exit_code;
}

int os_record_delete(os_record *rec, const char *reason, sh_error **err)
{
        sh_sandbox *sb = rec->sb;
        int r;

        if (rec->gone || !sb)
                return sh_error_new(err, SH_E_SANDBOX_NOT_FOUND, "no such sandbox");
        os_record_ref(rec);
        os_record_set_state(rec, OS_STOPPING, reason, "the sandbox is being deleted");
        /* The manager tells its observers (ours ends the record: on_deleted) and deletes. */
        sh_sandbox_ref(sb);
        r = sh_manager_delete(rec->ctx->mgr, sb, err);
        sh_sandbox_unref(sb);
        os_record_unref(rec);
        return r;
}

/* The manager deletes a sandbox (whoever asked): a /v1 one's record ends. */
static void on_deleted(sh_sandbox *sb, void *data)
{
        os_record *rec = os_record_of(sb);

        if (!rec)
                return;
        os_record_set_state(rec, OS_TERMINATED,
                            rec->state == OS_STOPPING ? rec->reason
                            : sh_sandbox_expired(sb)  ? "ttl_expiry"
                                                      : "deleted",
                            "the sandbox was deleted");
        os_record_log(rec, SH_LOG_DEBUG, "sandbox-record-gone", "the record leaves");
        record_unlink(rec);
}

void os_record_observe(os_ctx *ctx, const os_record_observer *o)
{
        if (ctx->n_observers == OS_OBSERVERS_MAX) {
                log_error("record-observers", NULL, "more than %d record observers, ignoring",
                          OS_OBSERVERS_MAX);
                return;
        }
        ctx->observers[ctx->n_observers++] = o;
}

void os_records_init(os_ctx *ctx)
{
        ctx->observer = (sh_sandbox_observer){.deleted = on_deleted, .data = ctx};
        sh_manager_observe(ctx->mgr, &ctx->observer);
}

static void unlink_one(sh_sandbox *sb, void *data)
{
        os_record *rec = os_record_of(sb);

        if (rec)
                record_unlink(rec);
}

/* Shutdown: the records of the sandboxes still there go (their sandboxes are deleted by the
 * manager right after; their entrypoints die with them). */
void os_records_done(os_ctx *ctx)
{
        sh_manager_unobserve(ctx->mgr, &ctx->observer);
        /* record_unlink deletes no sandbox: the walk stays valid */
        sh_manager_foreach(ctx->mgr, unlink_one, ctx);
}

/* ---- the Sandbox JSON ------------------------------------------------------------------------- */

static bool add_time(cJSON *o, const char *name, uint64_t ms)
{
        char t[32];

        sh_rfc3339_format(ms, t);
        return cJSON_AddStringToObject(o, name, t) != NULL;
}

cJSON *os_record_json(const os_record *rec, bool full)
{
        cJSON *o = cJSON_CreateObject(), *st = cJSON_CreateObject(), *v;
        bool ok = o && st;

        if (ok) {
                cJSON_AddItemToObject(o, "status", st);
                ok = cJSON_AddStringToObject(o, "id", rec->id) &&
                     cJSON_AddStringToObject(st, "state", os_state_name(rec->state)) &&
                     cJSON_AddStringToObject(st, "reason", rec->reason) &&
                     cJSON_AddStringToObject(st, "message", rec->message) &&
                     add_time(st, "lastTransitionAt", rec->transition_ms) &&
                     add_time(o, "createdAt", rec->created_ms);
        } else {
                cJSON_Delete(st);
        }
        if (ok && rec->sb && sh_sandbox_expiry(rec->sb))
                ok = add_time(o, "expiresAt", sh_sandbox_expiry(rec->sb));
        if (ok) {
                v = cJSON_Duplicate(rec->metadata, true);
                ok = v && cJSON_AddItemToObject(o, "metadata", v);
        }
        if (ok) {
                v = cJSON_Duplicate(rec->entrypoint, true);
                ok = v && cJSON_AddItemToObject(o, "entrypoint", v);
        }
        if (ok && rec->has_platform) {
                v = cJSON_AddObjectToObject(o, "platform");
                ok = v && cJSON_AddStringToObject(v, "os", rec->platform_os) &&
                     cJSON_AddStringToObject(v, "arch", rec->platform_arch);
        }
        /* The YAML: image or snapshotId are "not returned in createSandbox response". */
        if (ok && full && rec->image_uri) {
                v = cJSON_AddObjectToObject(o, "image");
                ok = v && cJSON_AddStringToObject(v, "uri", rec->image_uri);
        }
        if (ok && full && rec->snapshot_id)
                ok = cJSON_AddStringToObject(o, "snapshotId", rec->snapshot_id) != NULL;
        if (!ok) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}
