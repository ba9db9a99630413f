/* snapshots.c: snapshots of a sandbox's workspace (OPENSANDBOX.md section 2.1): POST
 * /v1/sandboxes/{id}/snapshots (a frozen, confined rsync of the workspace into {snapshot
 * root}/{snapshot id}/ through the persister), GET /v1/snapshots (filters, pages), GET and
 * DELETE /v1/snapshots/{sid}, and the restore of a create with `snapshotId`. The records are
 * the snapshot store's (persist/snapstore.c); their shape here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os-internal.h"
#include "sh/persist.h"
#include "sh/snapstore.h"

#define SB OS_R_SANDBOX
/* Copies of one sandbox waiting or running at once: the persister serializes them anyway, and
 * one sandbox must not fill the host's snapshot slots with queued copies. */
#define CREATING_PER_SANDBOX 4

/* The surface's snapshots (ctx->snapshots). */
typedef struct os_snapshots {
        os_ctx *ctx;
        sh_snapstore *store;
} os_snapshots;

/* What a record keeps (rec->snap): its copies in progress. */
typedef struct snap_rec {
        unsigned creating;
} snap_rec;

/* One copy in progress (sh_snapshot.job): it knows its snapshot by id, which a Creating
 * snapshot keeps (its delete is refused). */
typedef struct copy_job {
        os_snapshots *ss;
        char snap_id[SH_SNAP_ID_LEN + 1];
        char sandbox_id[SH_ID_LEN + 1];
} copy_job;

static os_snapshots *of(os_ctx *ctx)
{
        return ctx->snapshots;
}

/* ---- the tree remover ---- */

/* A deleted (or failed) snapshot's tree is in {root}/.trash: the manager's confined remover
 * takes it from there (a sandbox wrote it: never walked by the daemon itself). */
static void tree_moved(sh_snapstore *st, const char *trash_name, void *data)
{
        os_snapshots *ss = data;
        sh_error *err = NULL;

        if (sh_manager_remove_trashed(ss->ctx->mgr, sh_snapstore_trash_dir(st), trash_name, &err) <
            0)
                log_warn("snapshot-remove-failed", NULL, "'%s/%s/%s': %s, ignoring",
                         sh_snapstore_root(st), SH_SNAP_TRASH, trash_name,
                         err && err->msg ? err->msg : "");
        sh_error_release(&err);
}

/* ---- create ---- */

static snap_rec *rec_snap(os_record *rec)
{
        if (!rec->snap)
                rec->snap = calloc(1, sizeof(snap_rec));
        return rec->snap;
}

static void copy_done(sh_sandbox *sb, const sh_error *err, void *data)
{
        copy_job *j = data;
        os_snapshots *ss = j->ss;
        sh_snapshot *s = sh_snapstore_get(ss->store, j->snap_id, SH_SNAP_ID_LEN);
        os_record *rec = os_record_find(ss->ctx, j->sandbox_id, SH_ID_LEN);
        sh_error *werr = NULL;
        int r;

        if (rec && rec->snap && ((snap_rec *)rec->snap)->creating)
                ((snap_rec *)rec->snap)->creating--;
        if (!s) { /* cannot happen: a Creating snapshot is never deleted */
                free(j);
                return;
        }
        s->job = NULL;
        if (!err) {
                r = sh_snapstore_set_state(ss->store, s, SH_SNAP_READY, "snapshot_ready",
                                           "the workspace is copied", &werr);
                if (rec)
                        os_record_log(rec, SH_LOG_INFO, "snapshot-ready", "snapshot %s is ready",
                                      s->id);
        } else {
                sh_error_kind kind = sh_error_kind_of(err);
                /* the sandbox deleted meanwhile; the daemon shutting down; the copy itself */
                const char *why = kind == SH_E_SANDBOX_NOT_FOUND ? "sandbox_deleted"
                                  : kind == SH_E_UNAVAILABLE     ? "snapshot_interrupted"
                                                                 : "snapshot_capture_failed";

                r = sh_snapstore_set_state(ss->store, s, SH_SNAP_FAILED, why,
                                           err->msg ? err->msg : "the copy failed", &werr);
                log_warn("snapshot-failed", rec ? rec->id : NULL, "snapshot %s: %s", s->id,
                         err->msg ? err->msg : "the copy failed");
                /* What the copy left is no snapshot: its tree goes, its record says why. */
                if (r == 0)
                        r = sh_snapstore_drop_tree(ss->store, s, tree_moved, ss, &werr);
        }
        if (r < 0)
                log_warn("snapshot-store-failed", NULL, "snapshot %s: %s", j->snap_id,
                         werr && werr->msg ? werr->msg : "out of memory");
        sh_error_release(&werr);
        free(j);
}

/* `{}` or `{"name": "..."}` (the YAML's CreateSnapshotRequest: nothing else), or no body. */
static int snapshot_name(sh_request *r, char **ret)
{
        cJSON *body, *v;
        bool empty;
        int rc = -1;

        *ret = NULL;
        body = os_json_body(r, "INVALID_REQUEST", &empty);
        if (!body)
                return empty ? 0 : -1;
        if (!cJSON_IsObject(body)) {
                os_reply_code(r, OS_E_INVALID_REQUEST, "the body is a JSON object {name?}");
                goto out;
        }
        cJSON_ArrayForEach(v, body)
        {
                if (!STREQ(v->string, "name")) {
                        os_reply_code(r, OS_E_INVALID_REQUEST,
                                      "unknown field '%.64s' (a snapshot takes only 'name')",
                                      v->string);
                        goto out;
                }
        }
        v = cJSON_GetObjectItemCaseSensitive(body, "name");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v) ||
                    !sh_snap_name_valid(v->valuestring, strlen(v->valuestring))) {
                        os_reply_code(r, OS_E_INVALID_REQUEST,
                                      "'name' is a string of 1 to %d bytes of text without "
                                      "control characters",
                                      SH_SNAP_NAME_MAX);
                        goto out;
                }
                *ret = strdup(v->valuestring);
                if (!*ret) {
                        os_reply_code(r, OS_E_INTERNAL, "out of memory");
                        goto out;
                }
        }
        rc = 0;
out:
        cJSON_Delete(body);
        return rc;
}

/* ---- the API's Snapshot object ---- */

cJSON *os_snapshot_json(const sh_snapshot *s)
{
        cJSON *o = cJSON_CreateObject(), *st;
        char created[32], changed[32];

        if (!o)
                return NULL;
        sh_rfc3339_format(s->created_ms, created);
        sh_rfc3339_format(s->transition_ms, changed);
        st = cJSON_CreateObject();
        if (!st || !cJSON_AddItemToObject(o, "status", st)) {
                cJSON_Delete(st);
                cJSON_Delete(o);
                return NULL;
        }
        if (!cJSON_AddStringToObject(o, "id", s->id) ||
            !cJSON_AddStringToObject(o, "sandboxId", s->sandbox_id) ||
            (s->name && !cJSON_AddStringToObject(o, "name", s->name)) ||
            !cJSON_AddStringToObject(o, "createdAt", created) ||
            !cJSON_AddStringToObject(st, "state", sh_snap_state_name(s->state)) ||
            (s->reason && s->reason[0] && !cJSON_AddStringToObject(st, "reason", s->reason)) ||
            (s->message && !cJSON_AddStringToObject(st, "message", s->message)) ||
            !cJSON_AddStringToObject(st, "lastTransitionAt", changed)) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

static void reply_snapshot(sh_request *r, unsigned status, const sh_snapshot *s)
{
        cJSON *o = os_snapshot_json(s);
        sh_response *resp = o ? sh_response_json(o) : NULL;
        char loc[64];

        if (!resp) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        snprintf(loc, sizeof(loc), "/v1/snapshots/%s", s->id);
        if (status == 202)
                sh_response_header(resp, "Location", loc);
        sh_reply(r, status, resp);
}

static void api_create(sh_request *r)
{
        os_ctx *ctx = os_ctx_of(r);
        os_snapshots *ss = of(ctx);
        os_record *rec = os_request_record(r);
        _cleanup_free_ char *name = NULL;
        sh_error *err = NULL;
        sh_snapshot *s = NULL;
        snap_rec *sr;
        copy_job *j;

        if (snapshot_name(r, &name) < 0)
                return;
        /* A sandbox whose worker serves: running, or paused (the copy freezes it anyway, and
         * a paused one stays paused: the freeze is a hold, sh_sandbox_freeze_hold). */
        if (!rec->sb || (rec->state != OS_RUNNING && rec->state != OS_PAUSING &&
                         rec->state != OS_PAUSED && rec->state != OS_RESUMING)) {
                os_reply_code(r, OS_E_INVALID_STATE, "a snapshot needs a running sandbox, not %s",
                              os_state_name(rec->state));
                return;
        }
        sr = rec_snap(rec);
        if (!sr) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        if (sr->creating >= CREATING_PER_SANDBOX) {
                os_reply_code(r, OS_E_INVALID_STATE,
                              "%d snapshots of this sandbox are being made already: wait for one",
                              CREATING_PER_SANDBOX);
                return;
        }
        j = calloc(1, sizeof(*j));
        if (!j) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        if (sh_snapstore_add(ss->store, rec->id, name, rec->entrypoint, &s, &err) < 0) {
                free(j);
                os_reply_sh_error(r, err);
                sh_error_release(&err);
                return;
        }
        j->ss = ss;
        memcpy(j->snap_id, s->id, sizeof(j->snap_id));
        memcpy(j->sandbox_id, rec->id, sizeof(j->sandbox_id));
        /* The workspace only (not /tmp, not the image), frozen while it is read, by the same
         * confined rsync as a persist: {snapshot root}/{snapshot id}/. */
        if (sh_persist_save_to(ctx->persister, rec->sb, sh_snapstore_root(ss->store), s->id,
                               copy_done, j, &err) < 0) {
                os_reply_code(r, OS_E_INTERNAL, "cannot start the copy: %s",
                              err && err->msg ? err->msg : "");
                sh_error_release(&err);
                free(j);
                (void)sh_snapstore_remove(ss->store, s, tree_moved, ss, &err);
                sh_error_release(&err);
                return;
        }
        s->job = j;
        sr->creating++;
        os_record_log(rec, SH_LOG_INFO, "snapshot-create", "snapshot %s is being made", s->id);
        reply_snapshot(r, 202, s);
}

/* ---- list, get, delete ---- */

static bool param_is(const sh_query_param *p, const char *key)
{
        return p->key_len == strlen(key) && memcmp(p->key, key, p->key_len) == 0;
}

static bool value_is(const sh_query_param *p, const char *s)
{
        return s && p->val_len == strlen(s) && memcmp(p->val, s, p->val_len) == 0;
}

static void api_list(sh_request *r)
{
        const sh_query *q = sh_request_query(r);
        os_snapshots *ss = of(os_ctx_of(r));
        const sh_query_param *sbid = sh_query_find(q, "sandboxId"),
                             *name = sh_query_find(q, "name");
        unsigned states = 0; /* a bit per sh_snap_state; 0: any */
        os_pager pg;
        sh_snapshot *s;

        if (os_pager_parse(r, &pg) < 0)
                return;
        for (size_t i = 0; i < q->n; i++) {
                char st[16];
                int k;

                if (!param_is(&q->v[i], "state"))
                        continue;
                k = -1;
                if (q->v[i].val_len < sizeof(st) && !memchr(q->v[i].val, '\0', q->v[i].val_len)) {
                        memcpy(st, q->v[i].val, q->v[i].val_len);
                        st[q->v[i].val_len] = '\0';
                        k = sh_snap_state_parse(st);
                }
                if (k < 0) {
                        os_reply_code(r, OS_E_INVALID_REQUEST,
                                      "'state' must be one of Creating, Ready, Failed");
                        return;
                }
                states |= 1u << k;
        }
        /* One walk of the records (at most SH_SNAP_MAX), oldest first; only the page's items
         * are built. */
        if (os_pager_open(r, &pg) < 0)
                return;
        for (s = sh_snapstore_first(ss->store); s; s = sh_snapstore_next(s)) {
                if ((states && !(states & (1u << s->state))) ||
                    (sbid && !value_is(sbid, s->sandbox_id)) || (name && !value_is(name, s->name)))
                        continue;
                if (os_pager_take(&pg) && os_pager_add(r, &pg, os_snapshot_json(s)) < 0)
                        return;
        }
        os_pager_reply(r, &pg);
}

static sh_snapshot *param_snapshot(sh_request *r)
{
        os_snapshots *ss = of(os_ctx_of(r));
        size_t len = 0;
        const char *id = sh_request_param(r, 0, &len);
        sh_snapshot *s = id ? sh_snapstore_get(ss->store, id, len) : NULL;

        if (!s)
                os_reply_code(r, OS_E_SNAPSHOT_NOT_FOUND, "no snapshot with this id on this host");
        return s;
}

static void api_one(sh_request *r)
{
        os_snapshots *ss = of(os_ctx_of(r));
        sh_snapshot *s = param_snapshot(r);
        sh_error *err = NULL;
        os_record *rec;

        if (!s)
                return;
        if (sh_request_method_id(r) != SH_M_DELETE) {
                reply_snapshot(r, 200, s);
                return;
        }
        if (s->state == SH_SNAP_CREATING) {
                os_reply_code(r, OS_E_INVALID_STATE,
                              "the snapshot is still Creating: delete it once Ready or Failed");
                return;
        }
        if (s->restoring) {
                os_reply_code(r, OS_E_INVALID_STATE,
                              "a sandbox is being created from this snapshot");
                return;
        }
        rec = os_record_find(ss->ctx, s->sandbox_id, SH_ID_LEN);
        if (rec)
                os_record_log(rec, SH_LOG_INFO, "snapshot-delete", "snapshot %s is deleted", s->id);
        if (sh_snapstore_remove(ss->store, s, tree_moved, ss, &err) < 0) {
                os_reply_sh_error(r, err);
                sh_error_release(&err);
                return;
        }
        os_reply_empty(r, 204);
}

/* ---- a create with snapshotId: its snapshot, held while its tree is restored ---- */

struct os_snapshot_source {
        os_ctx *ctx;
        os_snapshots *ss; /* compared with ctx->snapshots before any use at the end */
        char id[SH_SNAP_ID_LEN + 1];
        cJSON *entrypoint; /* a copy, NULL: none kept */
};

int os_snapshot_restore_source(os_ctx *ctx, const char *snapshot_id, os_snapshot_source **ret,
                               os_err *e)
{
        os_snapshots *ss = of(ctx);
        sh_snapshot *s = sh_snapstore_get(ss->store, snapshot_id, strlen(snapshot_id));
        os_snapshot_source *src;

        *ret = NULL;
        if (!s)
                return os_err_code(e, OS_E_SNAPSHOT_NOT_FOUND,
                                   "no snapshot with this id on this host");
        if (s->state != SH_SNAP_READY)
                return os_err_code(e, OS_E_INVALID_STATE, "the snapshot is %s, not Ready",
                                   sh_snap_state_name(s->state));
        src = calloc(1, sizeof(*src));
        if (!src || (s->entrypoint && !(src->entrypoint = cJSON_Duplicate(s->entrypoint, true)))) {
                free(src);
                return os_err_code(e, OS_E_INTERNAL, "out of memory");
        }
        src->ctx = ctx;
        src->ss = ss;
        memcpy(src->id, s->id, sizeof(src->id));
        /* Held until the create ends: its tree must not go while it is copied. */
        s->restoring++;
        *ret = src;
        return 0;
}

const cJSON *os_snapshot_source_entrypoint(const os_snapshot_source *src)
{
        return src ? src->entrypoint : NULL;
}

void os_snapshot_source_restore(const os_snapshot_source *src, sh_create_opts *o)
{
        if (!src)
                return;
        /* The snapshot's tree into the new (empty) workspace, re-owned to the new sandbox's
         * uid, by the persister's confined rsync (the manager's restore step); a tree that is
         * gone is a failure. */
        o->restore_root = sh_snapstore_root(src->ss->store);
        o->restore_name = src->id;
}

void os_snapshot_source_free(os_snapshot_source *src)
{
        sh_snapshot *s;

        if (!src)
                return;
        /* The store may be gone first at shutdown. */
        if (src->ctx->snapshots == src->ss &&
            (s = sh_snapstore_get(src->ss->store, src->id, SH_SNAP_ID_LEN)) && s->restoring)
                s->restoring--;
        cJSON_Delete(src->entrypoint);
        free(src);
}

/* ---- the surface's start and end ---- */

static void record_gone(os_record *rec);

int os_snapshot_init(os_ctx *ctx, sh_error **err)
{
        static const os_record_observer observer = {.gone = record_gone};
        const sh_config *cfg = ctx->cfg;
        os_snapshots *ss = calloc(1, sizeof(*ss));
        _cleanup_free_ char *root = NULL;
        sh_error *rerr = NULL;
        int k;

        if (!ss)
                return sh_error_make(err, ENOMEM, "out of memory");
        ss->ctx = ctx;
        /* OPENSANDBOX.md 2.1: the setting, else beside the archives (.snapshots is no item
         * id: items start with a letter or digit), else in the state root. */
        if (cfg->snapshot_root)
                k = asprintf(&root, "%s", cfg->snapshot_root);
        else if (cfg->nfs_root)
                k = asprintf(&root, "%s/.snapshots", cfg->nfs_root);
        else
                k = asprintf(&root, "%s/snapshots", cfg->root);
        if (k < 0) {
                root = NULL;
                free(ss);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        if (sh_snapstore_open(root, ctx->loop, &ss->store, err) < 0) {
                free(ss);
                return -1;
        }
        ctx->snapshots = ss;
        os_record_observe(ctx, &observer);
        if (sh_snapstore_count(ss->store))
                log_info("snapshots", NULL, "%u snapshot(s) in '%s'", sh_snapstore_count(ss->store),
                         root);
        /* What deletes of an earlier run left in the trash goes, in a confined child (which
         * opens the trash itself; none yet: nothing to do). */
        if (sh_manager_remove_trashed(ctx->mgr, sh_snapstore_trash_dir(ss->store), NULL, &rerr) < 0)
                log_warn("snapshot-remove-failed", NULL, "'%s/%s': %s, ignoring", root,
                         SH_SNAP_TRASH, rerr && rerr->msg ? rerr->msg : "");
        sh_error_release(&rerr);
        return 0;
}

static void record_gone(os_record *rec)
{
        /* A copy in progress ends through the persister (the sandbox's delete cancels it);
         * the count goes with the record. */
        free(rec->snap);
        rec->snap = NULL;
}

void os_snapshot_free_all(os_ctx *ctx)
{
        os_snapshots *ss = of(ctx);
        sh_snapshot *s;

        if (!ss)
                return;
        ctx->snapshots = NULL;
        /* The persister has ended every copy already (daemon.c frees it first); a job still
         * linked would be a leak, not a use after free. */
        for (s = sh_snapstore_first(ss->store); s; s = sh_snapstore_next(s))
                if (s->job) {
                        free(s->job);
                        s->job = NULL;
                }
        sh_snapstore_free(ss->store);
        free(ss);
}

const sh_route os_snapshot_routes[] = {
        {"/v1/sandboxes/{}/snapshots", SH_M_POST, &sh_body_buffer, api_create, SB},
        {"/v1/snapshots", SH_M_GET, NULL, api_list, 0},
        {"/v1/snapshots/{}", SH_M_GET | SH_M_DELETE, NULL, api_one, 0},
};
const size_t os_snapshot_n_routes = ARRAY_SIZE(os_snapshot_routes);
