/* record.c: the records of the sandboxes created through /v1: their registry (oldest first),
 * their state machine (state, reason, message, lastTransitionAt), expiry (a min-heap and one
 * loop timer armed for the soonest: no scan per request), the entrypoint's output ring, their
 * Sandbox JSON, and the end of a record when its sandbox is deleted (a /v1 or native delete,
 * its expiry, shutdown: the manager's delete observer). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "os-internal.h"

/* ---- times ---------------------------------------------------------------------------------- */

uint64_t os_now_wall_ms(void)
{
        struct timespec ts;

        if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
                return 0;
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

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

/* ---- the output ring ------------------------------------------------------------------------ */

void os_ring_append(os_ring *g, const char *p, size_t n)
{
        size_t end, first;

        g->total += n;
        if (!g->cap || !n)
                return;
        /* Below the bound the bytes sit from 0 on (the ring only wraps once it is full):
         * growing is a realloc. */
        if (g->alloc < g->cap && g->len + n > g->alloc) {
                size_t want = g->alloc ? 2 * g->alloc : 4096;
                char *q;

                while (want < g->len + n && want < g->cap)
                        want *= 2;
                if (want > g->cap)
                        want = g->cap;
                q = realloc(g->p, want);
                if (!q)
                        return;
                g->p = q;
                g->alloc = want;
        }
        if (g->alloc < g->cap) {
                memcpy(g->p + g->len, p, n);
                g->len += n;
                return;
        }
        /* Only the last cap bytes of a long append can stay. */
        if (n >= g->cap) {
                p += n - g->cap;
                memcpy(g->p, p, g->cap);
                g->start = 0;
                g->len = g->cap;
                return;
        }
        end = (g->start + g->len) % g->cap;
        first = g->cap - end < n ? g->cap - end : n;
        memcpy(g->p + end, p, first);
        memcpy(g->p, p + first, n - first);
        if (g->len + n > g->cap) {
                g->start = (g->start + g->len + n - g->cap) % g->cap;
                g->len = g->cap;
        } else {
                g->len += n;
        }
}

void os_ring_copy(const os_ring *g, char *out)
{
        size_t first;

        if (!g->len)
                return;
        first = g->cap - g->start < g->len ? g->cap - g->start : g->len;
        memcpy(out, g->p + g->start, first);
        memcpy(out + first, g->p, g->len - first);
}

void os_ring_done(os_ring *g)
{
        free(g->p);
        *g = (os_ring){0};
}

/* ---- the expiry heap and its timer ------------------------------------------------------------ */

static void heap_swap(os_heap *h, size_t a, size_t b)
{
        os_record *t = h->v[a];

        h->v[a] = h->v[b];
        h->v[b] = t;
        h->v[a]->heap_idx = a;
        h->v[b]->heap_idx = b;
}

static void heap_fix(os_heap *h, size_t i)
{
        while (i > 0 && h->v[(i - 1) / 2]->expires_ms > h->v[i]->expires_ms) {
                heap_swap(h, i, (i - 1) / 2);
                i = (i - 1) / 2;
        }
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, m = i;

                if (l < h->n && h->v[l]->expires_ms < h->v[m]->expires_ms)
                        m = l;
                if (r < h->n && h->v[r]->expires_ms < h->v[m]->expires_ms)
                        m = r;
                if (m == i)
                        return;
                heap_swap(h, i, m);
                i = m;
        }
}

static void heap_remove(os_heap *h, os_record *rec)
{
        size_t i = rec->heap_idx;

        if (i == SIZE_MAX)
                return;
        rec->heap_idx = SIZE_MAX;
        if (i != --h->n) {
                h->v[i] = h->v[h->n];
                h->v[i]->heap_idx = i;
                heap_fix(h, i);
        }
}

/* The heap holds at most one entry per live record, and records are bounded by the host's
 * capacity: its array never grows past SANDBOX_HOST_MAX_SANDBOXES. */
static int heap_insert(os_heap *h, os_record *rec)
{
        if (h->n == h->cap) {
                size_t cap = h->cap ? 2 * h->cap : 16;
                os_record **v = realloc(h->v, cap * sizeof(*v));

                if (!v)
                        return -ENOMEM;
                h->v = v;
                h->cap = cap;
        }
        rec->heap_idx = h->n;
        h->v[h->n++] = rec;
        heap_fix(h, rec->heap_idx);
        return 0;
}

static void reaper_arm(os_ctx *ctx);

/* The soonest expiry has come: delete every sandbox whose time is past, then re-arm. */
static void reaper_fire(sh_loop *l, sh_timer *t, void *data)
{
        os_ctx *ctx = data;
        uint64_t now = os_now_wall_ms();

        ctx->reaper = NULL;
        while (ctx->expiry.n && ctx->expiry.v[0]->expires_ms <= now) {
                os_record *rec = ctx->expiry.v[0];
                sh_error *err = NULL;

                heap_remove(&ctx->expiry, rec);
                os_record_log(rec, SH_LOG_INFO, "sandbox-expired", "expired at its expiresAt");
                if (os_record_delete(rec, "ttl_expiry", &err) < 0)
                        log_warn("expiry-delete-failed", rec->id, "%s, ignoring",
                                 err && err->msg ? err->msg : "");
                sh_error_release(&err);
        }
        reaper_arm(ctx);
}

/* One timer for all records, armed for the soonest expiry (re-armed when that changes). */
static void reaper_arm(os_ctx *ctx)
{
        uint64_t now, at;

        if (ctx->freeing)
                return;
        if (!ctx->expiry.n) {
                if (ctx->reaper)
                        sh_loop_cancel_timer(ctx->loop, ctx->reaper);
                ctx->reaper = NULL;
                return;
        }
        at = ctx->expiry.v[0]->expires_ms;
        if (ctx->reaper && ctx->reaper_at == at)
                return;
        if (ctx->reaper)
                sh_loop_cancel_timer(ctx->loop, ctx->reaper);
        now = os_now_wall_ms();
        ctx->reaper_at = at;
        ctx->reaper = sh_loop_add_timer(ctx->loop, at > now ? at - now : 0, reaper_fire, ctx);
        if (!ctx->reaper)
                log_error("expiry-timer", NULL,
                          "cannot arm the expiry timer: sandboxes may "
                          "outlive their expiresAt");
}

void os_record_set_expiry(os_record *rec, uint64_t expires_ms)
{
        os_ctx *ctx = rec->ctx;
        uint64_t ceiling = ctx->cfg->max_timeout_s * 1000, now = os_now_wall_ms();

        /* No expiry the daemon sets is later than now + SANDBOX_HOST_MAX_TIMEOUT (at most 100
         * years: no overflow): renew on access stops there; create and renew-expiration refuse
         * anything beyond it before. */
        if (ceiling && expires_ms > now + ceiling)
                expires_ms = now + ceiling;
        rec->expires_ms = expires_ms;
        if (rec->gone)
                return;
        if (!expires_ms) {
                heap_remove(&ctx->expiry, rec);
        } else if (rec->heap_idx != SIZE_MAX) {
                heap_fix(&ctx->expiry, rec->heap_idx);
        } else if (heap_insert(&ctx->expiry, rec) < 0) {
                log_error("expiry-timer", rec->id, "out of memory: the sandbox will not expire");
        }
        reaper_arm(ctx);
}

/* ---- the registry ----------------------------------------------------------------------------- */

os_record *os_record_ref(os_record *rec)
{
        if (rec)
                rec->refs++;
        return rec;
}

static void record_free(os_record *rec)
{
        sh_exec_detach(rec->entry);
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

static size_t bucket_of(const os_ctx *ctx, const char *id)
{
        return sh_remote_id_hash(id) & (ctx->n_buckets - 1);
}

os_record *os_record_find(os_ctx *ctx, const char *id, size_t len)
{
        os_record *rec;

        if (len != SH_ID_LEN || !sh_remote_id_valid(id, len))
                return NULL;
        for (rec = ctx->buckets[bucket_of(ctx, id)]; rec; rec = rec->hash_next)
                if (memcmp(rec->id, id, SH_ID_LEN) == 0)
                        return rec;
        return NULL;
}

/* Into the registry: found by id, listed last (the newest). Takes a reference. */
void os_record_link(os_record *rec)
{
        os_ctx *ctx = rec->ctx;
        size_t b = bucket_of(ctx, rec->id);

        os_record_ref(rec);
        rec->hash_next = ctx->buckets[b];
        ctx->buckets[b] = rec;
        SH_LIST_INSERT_AFTER(all, ctx->records, ctx->records_tail, rec);
        ctx->records_tail = rec;
        ctx->n_records++;
        if (rec->expires_ms)
                os_record_set_expiry(rec, rec->expires_ms);
}

/* Out of the registry (its sandbox is being deleted): the other files drop what they keep,
 * the entrypoint's session is let go (its processes die with the sandbox), the registry's
 * reference goes. */
static void record_unlink(os_record *rec)
{
        os_ctx *ctx = rec->ctx;
        os_record **pp;

        if (rec->gone)
                return;
        rec->gone = true;
        for (pp = &ctx->buckets[bucket_of(ctx, rec->id)]; *pp; pp = &(*pp)->hash_next)
                if (*pp == rec) {
                        *pp = rec->hash_next;
                        break;
                }
        if (ctx->records_tail == rec)
                ctx->records_tail = rec->all_prev;
        SH_LIST_REMOVE(all, ctx->records, rec);
        ctx->n_records--;
        heap_remove(&ctx->expiry, rec);
        reaper_arm(ctx);
        os_pause_record_gone(rec);
        os_snapshot_record_gone(rec);
        os_diag_record_gone(rec);
        os_execd_record_gone(rec);
        sh_exec_detach(TAKE_PTR(rec->entry));
        sh_sandbox_unref(TAKE_PTR(rec->sb));
        os_record_unref(rec);
}

os_record *os_record_first(os_ctx *ctx)
{
        return ctx->records;
}

os_record *os_record_next(os_record *rec)
{
        return rec->all_next;
}

sh_sandbox *os_record_sandbox(const os_record *rec)
{
        return rec->sb;
}

const sh_ringlog *os_record_container_log(const os_record *rec)
{
        return &rec->container;
}

/* A new record for a create (state Pending, not yet in the registry); one reference. */
int os_record_new(os_ctx *ctx, os_record **ret, sh_error **err)
{
        os_record *rec = calloc(1, sizeof(*rec));
        static const char hex[] = "0123456789abcdef";
        unsigned char raw[OS_TOKEN_BYTES];
        unsigned i;

        if (!rec)
                return sh_error_make(err, ENOMEM, "out of memory");
        rec->refs = 1;
        rec->ctx = ctx;
        rec->heap_idx = SIZE_MAX;
        rec->created_ms = rec->transition_ms = os_now_wall_ms();
        rec->metadata = cJSON_CreateObject();
        rec->reason = strdup("creating");
        rec->message = strdup("the sandbox is being created");
        if (!rec->metadata || !rec->reason || !rec->message) {
                record_free(rec);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        /* The sandbox's access token (OPENSANDBOX.md section 1): 192 random bits from the
         * kernel's CSPRNG, compared only through its hash, in constant time. */
        randombytes_buf(raw, sizeof(raw));
        for (i = 0; i < sizeof(raw); i++) {
                rec->token[2 * i] = hex[raw[i] >> 4];
                rec->token[2 * i + 1] = hex[raw[i] & 15];
        }
        rec->token[OS_TOKEN_LEN] = '\0';
        sodium_memzero(raw, sizeof(raw));
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
        rec->transition_ms = os_now_wall_ms();
        log_debug("sandbox-state", rec->id, "%s -> %s (%s)", os_state_name(from),
                  os_state_name(state), rec->reason);
        os_diag_on_transition(rec, from, state);
}

void os_record_log(os_record *rec, sh_log_level level, const char *event, const char *fmt, ...)
{
        char line[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        sh_log(level, event, rec->id, "%s", line);
        os_diag_on_log(rec, level, event, line);
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
        os_ctx *ctx = data;
        os_record *rec = os_record_find(ctx, sh_sandbox_id(sb), SH_ID_LEN);

        if (!rec || rec->sb != sb)
                return;
        os_record_set_state(rec, OS_TERMINATED, rec->state == OS_STOPPING ? rec->reason : "deleted",
                            "the sandbox was deleted");
        os_record_log(rec, SH_LOG_DEBUG, "sandbox-record-gone", "the record leaves");
        record_unlink(rec);
}

void os_records_init(os_ctx *ctx)
{
        ctx->observer = (sh_sandbox_observer){.deleted = on_deleted, .data = ctx};
        sh_manager_observe(ctx->mgr, &ctx->observer);
}

/* Shutdown: the records of the sandboxes still there go (their sandboxes are deleted by the
 * manager right after; their entrypoints die with them). */
void os_records_done(os_ctx *ctx)
{
        sh_manager_unobserve(ctx->mgr, &ctx->observer);
        while (ctx->records)
                record_unlink(ctx->records);
        ctx->freeing = true;
        if (ctx->reaper)
                sh_loop_cancel_timer(ctx->loop, ctx->reaper);
        ctx->reaper = NULL;
        free(ctx->expiry.v);
        ctx->expiry = (os_heap){0};
}

/* ---- the Sandbox JSON ------------------------------------------------------------------------- */

static bool add_time(cJSON *o, const char *name, uint64_t ms)
{
        char t[32];

        os_time_format(ms, t);
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
        if (ok && rec->expires_ms)
                ok = add_time(o, "expiresAt", rec->expires_ms);
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
