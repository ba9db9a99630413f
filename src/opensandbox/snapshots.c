/* snapshots.c: snapshots of a sandbox's workspace (OPENSANDBOX.md section 2.1): POST
 * /v1/sandboxes/{id}/snapshots, GET /v1/snapshots (filters, pages), GET and DELETE
 * /v1/snapshots/{sid}, and the restore of a create with `snapshotId`. The records and their
 * copies are the persist layer's (sh/snapstore.h: the store, the persister's copy into
 * {snapshot root}/{snapshot id}/, its end); their shape here. */
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
        os_record *rec = os_request_record(r);
        _cleanup_free_ char *name = NULL;
        sh_error *err = NULL;
        sh_snapshot *s = NULL;

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
        if (sh_snapstore_creating(ctx->snapshots, rec->id) >= CREATING_PER_SANDBOX) {
                os_reply_code(r, OS_E_INVALID_STATE,
                              "%d snapshots of this sandbox are being made already: wait for one",
                              CREATING_PER_SANDBOX);
                return;
        }
        if (sh_snapshot_take(ctx->persister, ctx->snapshots, rec->sb, name, rec->entrypoint, &s,
                             &err) < 0) {
                os_reply_sh_error(r, err);
                sh_error_release(&err);
                return;
        }
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

static bool snapshot_matches(const sh_snapshot *s, unsigned states, const sh_query_param *sbid,
                             const sh_query_param *name)
{
        return !(states && !(states & (1u << s->state))) &&
               !(sbid && !value_is(sbid, s->sandbox_id)) && !(name && !value_is(name, s->name));
}

static void api_list(sh_request *r)
{
        const sh_query *q = sh_request_query(r);
        sh_snapstore *store = os_ctx_of(r)->snapshots;
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
        /* Across pods (or a peer asking for this pod's own): every match, merged or sent. */
        if (os_ctx_of(r)->relayer) {
                os_list l;

                os_list_open(&l, &pg);
                for (s = sh_snapstore_first(store); l.items && s; s = sh_snapstore_next(s)) {
                        /* a live peer's own is its to list (this store's copy may be old) */
                        if (!snapshot_matches(s, states, sbid, name) ||
                            os_snapshot_peer_owned(os_ctx_of(r), s->id))
                                continue;
                        if (os_list_want(&l))
                                os_list_push(&l, os_snapshot_json(s));
                }
                os_cluster_list(r, &l, &pg, true, "snapshots");
                return;
        }
        /* One walk of the records (at most SH_SNAP_MAX), oldest first; only the page's items
         * are built. */
        if (os_pager_open(r, &pg) < 0)
                return;
        for (s = sh_snapstore_first(store); s; s = sh_snapstore_next(s)) {
                if (!snapshot_matches(s, states, sbid, name))
                        continue;
                if (os_pager_take(&pg) && os_pager_add(r, &pg, os_snapshot_json(s)) < 0)
                        return;
        }
        os_pager_reply(r, &pg);
}

static sh_snapshot *param_snapshot(sh_request *r)
{
        sh_snapstore *st = os_ctx_of(r)->snapshots;
        size_t len = 0;
        const char *id = sh_request_param(r, 0, &len);
        sh_snapshot *s = id ? sh_snapstore_get(st, id, len) : NULL;

        if (!s)
                os_reply_code(r, OS_E_SNAPSHOT_NOT_FOUND, "no snapshot with this id on this host");
        return s;
}

static void api_one(sh_request *r)
{
        sh_snapstore *st = os_ctx_of(r)->snapshots;
        sh_snapshot *s = param_snapshot(r);
        sh_error *err = NULL;
        sh_waiter *w;
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
        rec = os_record_find(os_ctx_of(r), s->sandbox_id, SH_ID_LEN);
        if (rec)
                os_record_log(rec, SH_LOG_INFO, "snapshot-delete", "snapshot %s is deleted", s->id);
        if (sh_snapshot_remove(os_ctx_of(r)->persister, st, s, &err) < 0) {
                os_reply_sh_error(r, err);
                sh_error_release(&err);
                return;
        }
        /* answered once its tree is out of the store (the writer's queued move done) */
        w = sh_request_hold(r, 204, sh_response_empty_sized(204));
        if (w && !sh_snapstore_wait(st, w))
                w->done(w);
}

/* ---- a create with snapshotId: its snapshot, held while its tree is restored ---- */

struct os_snapshot_source {
        os_ctx *ctx;
        char id[SH_SNAP_ID_LEN + 1];
        cJSON *entrypoint; /* a copy, NULL: none kept */
};

int os_snapshot_restore_source(os_ctx *ctx, const char *snapshot_id, sh_create_opts *o,
                               os_snapshot_source **ret, os_err *e)
{
        sh_snapshot *s = sh_snapstore_get(ctx->snapshots, snapshot_id, strlen(snapshot_id));
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
        memcpy(src->id, s->id, sizeof(src->id));
        /* Held until the create ends: its tree must not go while it is copied into the new
         * (empty) workspace, re-owned to the new sandbox's uid, by the persister's confined
         * rsync (the manager's restore step; a tree that is gone is a failure). */
        s->restoring++;
        o->restore_root = sh_snapstore_root(ctx->snapshots);
        o->restore_name = src->id;
        *ret = src;
        return 0;
}

const cJSON *os_snapshot_source_entrypoint(const os_snapshot_source *src)
{
        return src ? src->entrypoint : NULL;
}

void os_snapshot_source_free(os_snapshot_source *src)
{
        sh_snapshot *s;

        if (!src)
                return;
        /* The store may be gone first at shutdown. */
        if (src->ctx->snapshots &&
            (s = sh_snapstore_get(src->ctx->snapshots, src->id, SH_SNAP_ID_LEN)) && s->restoring)
                s->restoring--;
        cJSON_Delete(src->entrypoint);
        free(src);
}

const sh_route os_snapshot_routes[] = {
        {"/v1/sandboxes/{}/snapshots", SH_M_POST, &sh_body_buffer, api_create, SB},
        {"/v1/snapshots", SH_M_GET, NULL, api_list, 0},
        {"/v1/snapshots/{}", SH_M_GET | SH_M_DELETE, NULL, api_one, OS_R_SNAPSHOT},
};
const size_t os_snapshot_n_routes = ARRAY_SIZE(os_snapshot_routes);
