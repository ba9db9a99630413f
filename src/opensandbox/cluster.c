/* cluster.c: the /v1 surface across pods (OPENSANDBOX.md section 1): a call for a sandbox or a
 * snapshot another pod minted is relayed to that pod (the id's token, resolved only against
 * the peers this pod discovered: sh/cluster.h); a create this pod cannot take (draining or
 * full) is handed to the peer with the most room; a listing merges every peer's local-only
 * list with this pod's, then filters and pages them as one. A hop-marked request is always
 * this pod's alone. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os-internal.h"
#include "sh/cluster.h"
#include "sh/relay.h"
#include "sh/snapstore.h"

#define API_KEY_HEADER "OPEN-SANDBOX-API-KEY"

bool os_cluster_local_only(const sh_request *r)
{
        const os_ctx *ctx = os_ctx_of(r);

        return !ctx->relayer || sh_request_hop_marked(r);
}

/* ---- relays --------------------------------------------------------------------------------- */

static void relay_failed_sandbox(sh_request *r, const char *why, void *data)
{
        (void)data;
        os_reply_code(r, OS_E_SANDBOX_NOT_FOUND,
                      "no sandbox with this id: the pod that holds it does not answer (%s)", why);
}

static void relay_failed_snapshot(sh_request *r, const char *why, void *data)
{
        (void)data;
        os_reply_code(r, OS_E_SNAPSHOT_NOT_FOUND,
                      "no snapshot with this id: the pod that made it does not answer (%s)", why);
}

static void relay_failed_create(sh_request *r, const char *why, void *data)
{
        (void)data;
        os_reply_code(r, OS_E_UNAVAILABLE, "no pod can take this sandbox now (%s)", why);
}

int os_cluster_relay_owner(sh_request *r, const char *id, size_t len, bool snapshot)
{
        os_ctx *ctx = os_ctx_of(r);
        const sh_peer *p;

        /* Only a well-formed id is another pod's: its token is its first hex digits, the
         * rest 128 random bits; anything else (junk after a peer's token, a bare token) is
         * this pod's 404, never a connection. */
        if (os_cluster_local_only(r) ||
            !(snapshot ? sh_snap_id_valid(id, len) : sh_remote_id_valid(id, len)))
                return 0;
        p = sh_cluster_owner(ctx->cluster, id, len);
        if (!p)
                return 0;
        if (sh_relay_request(ctx->relayer, r, sh_peer_url(p),
                             snapshot ? relay_failed_snapshot : relay_failed_sandbox, ctx) < 0)
                return -1;
        return 1;
}

int os_snapshot_relay_owner(sh_request *r, const char *id, size_t len)
{
        /* The pod that made a snapshot answers for it while it lives (its record is the one
         * that changes); a dead pod's, on a shared root, any pod that read it. */
        return id ? os_cluster_relay_owner(r, id, len, true) : 0;
}

bool os_snapshot_peer_owned(os_ctx *ctx, const char *id)
{
        return ctx->relayer && sh_cluster_owner(ctx->cluster, id, strlen(id)) != NULL;
}

int os_cluster_hand_create(sh_request *r)
{
        os_ctx *ctx = os_ctx_of(r);
        const sh_peer *p;

        if (os_cluster_local_only(r) ||
            (!sh_manager_draining(ctx->mgr) && !sh_manager_full(ctx->mgr)))
                return 0;
        p = sh_cluster_roomiest(ctx->cluster);
        if (!p)
                return 0; /* the create itself answers 503 UNAVAILABLE */
        log_info("create-handed", NULL, "this pod is %s: the create goes to pod %s (%s)",
                 sh_manager_draining(ctx->mgr) ? "draining" : "full", sh_peer_token(p),
                 sh_peer_url(p));
        /* One less of its room until its next probe: a burst spreads over the peers. */
        sh_peer_took_create(ctx->cluster, p);
        if (sh_relay_request(ctx->relayer, r, sh_peer_url(p), relay_failed_create, ctx) < 0)
                return -1;
        return 1;
}

int os_cluster_create_at_snapshot(sh_request *r, const char *snapshot_id, const cJSON *body)
{
        os_ctx *ctx = os_ctx_of(r);
        const sh_peer *p;
        char *text;
        int k;

        if (os_cluster_local_only(r) || !sh_snap_id_valid(snapshot_id, strlen(snapshot_id)) ||
            !(p = sh_cluster_owner(ctx->cluster, snapshot_id, strlen(snapshot_id))))
                return 0;
        /* The body as judged (the buffer it came in may have been parsed in place). */
        text = cJSON_PrintUnformatted(body);
        if (!text) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return -1;
        }
        log_info("create-handed", NULL,
                 "a create from snapshot %s goes to the pod that made it (%s)", snapshot_id,
                 sh_peer_url(p));
        k = sh_relay_request_body(ctx->relayer, r, sh_peer_url(p), text, strlen(text),
                                  relay_failed_snapshot, ctx);
        free(text);
        return k < 0 ? -1 : 1;
}

/* ---- listings across pods ----------------------------------------------------------------- */

/* One item of a merged list, its order keys read once. */
typedef struct merge_item {
        cJSON *item;
        uint64_t created_ms;
        const char *id;
} merge_item;

static int item_cmp(const void *a, const void *b)
{
        const merge_item *x = a, *y = b;

        if (x->created_ms != y->created_ms)
                return x->created_ms < y->created_ms ? -1 : 1;
        return strcmp(x->id, y->id);
}

typedef struct merge_job {
        os_ctx *ctx;
        sh_pending *tok;
        sh_cluster_ask *ask;
        cJSON *local;   /* this pod's first matching items, an array */
        uint64_t total; /* every pod's matches: this pod's, then each peer's added */
        os_pager pg;
        bool dedupe;
        const char *what; /* "sandboxes", "snapshots" */
} merge_job;

static void merge_gone(void *data)
{
        merge_job *j = data;

        sh_cluster_ask_cancel(TAKE_PTR(j->ask));
}

static void merge_release(void *data)
{
        merge_job *j = data;

        sh_cluster_ask_cancel(j->ask);
        cJSON_Delete(j->local);
        free(j);
}

static const sh_pending_ops merge_ops = {.gone = merge_gone, .release = merge_release};

/* Append the well-formed items of `arr` (objects with a string id and an RFC 3339 createdAt)
 * to v, detached from it. A peer is one of this service's pods, but what it sends is read as
 * any input is: an item without its keys is left out. */
static int take_items(cJSON *arr, merge_item **v, size_t *n, size_t *cap)
{
        cJSON *it;

        while ((it = cJSON_DetachItemFromArray(arr, 0))) {
                const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
                const cJSON *at = cJSON_GetObjectItemCaseSensitive(it, "createdAt");
                uint64_t ms;

                if (!cJSON_IsObject(it) || !cJSON_IsString(id) || !cJSON_IsString(at) ||
                    sh_rfc3339_parse(at->valuestring, &ms) < 0) {
                        cJSON_Delete(it);
                        continue;
                }
                if (*n == *cap) {
                        size_t nc = *cap ? *cap * 2 : 64;
                        merge_item *nv = realloc(*v, nc * sizeof(**v));

                        if (!nv) {
                                cJSON_Delete(it);
                                return -ENOMEM;
                        }
                        *v = nv;
                        *cap = nc;
                }
                (*v)[(*n)++] = (merge_item){.item = it, .created_ms = ms, .id = id->valuestring};
        }
        return 0;
}

/* How many items a peer's part stands for: its totalItems, when that is a whole number no
 * smaller than the items it sent (else those). */
static uint64_t peer_total(const cJSON *body, const cJSON *items)
{
        const cJSON *pg = cJSON_GetObjectItemCaseSensitive(body, "pagination");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(pg, "totalItems");
        uint64_t n = (uint64_t)cJSON_GetArraySize(items);

        if (cJSON_IsNumber(t) && t->valuedouble >= (double)n && t->valuedouble < 1e15 &&
            t->valuedouble == (double)(uint64_t)t->valuedouble)
                return (uint64_t)t->valuedouble;
        return n;
}

static void merge_done(const sh_cluster_answer *a, size_t n, void *data)
{
        merge_job *j = data;
        sh_request *r = sh_pending_request(j->tok);
        merge_item *v = NULL;
        size_t nv = 0, cap = 0, i = 0;
        uint64_t dupes = 0;
        int rc = 0;

        j->ask = NULL;
        if (!r)
                goto out;
        rc = take_items(j->local, &v, &nv, &cap);
        for (i = 0; i < n && rc == 0; i++) {
                cJSON *body, *items;

                if (!a[i].body) {
                        log_warn("peer-list-failed", NULL, "pod %s left out of a listing of %s: %s",
                                 a[i].token, j->what, a[i].why ? a[i].why : "no answer");
                        continue;
                }
                body = cJSON_ParseWithLength(a[i].body, a[i].len);
                items = cJSON_GetObjectItemCaseSensitive(body, "items");
                if (!cJSON_IsArray(items)) {
                        log_warn("peer-list-failed", NULL,
                                 "pod %s left out of a listing of %s: its answer has no items",
                                 a[i].token, j->what);
                } else {
                        j->total += peer_total(body, items);
                        rc = take_items(items, &v, &nv, &cap);
                }
                cJSON_Delete(body);
        }
        if (rc < 0) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                goto out;
        }
        qsort(v, nv, sizeof(*v), item_cmp);
        if (os_pager_open(r, &j->pg) < 0)
                goto out;
        for (i = 0; i < nv; i++) {
                /* A snapshot on a shared root is listed by every pod that knows it: once. */
                if (j->dedupe && i > 0 && strcmp(v[i].id, v[i - 1].id) == 0) {
                        dupes++;
                        continue;
                }
                if (os_pager_take(&j->pg) && os_pager_add(r, &j->pg, TAKE_PTR(v[i].item)) < 0)
                        goto out;
        }
        /* Every pod's matches, not only the items it sent (its first page × pageSize). */
        j->pg.total = j->total > dupes ? j->total - dupes : 0;
        if (j->pg.total < i - dupes)
                j->pg.total = i - dupes;
        os_pager_reply(r, &j->pg);
out:
        for (i = 0; i < nv; i++)
                cJSON_Delete(v[i].item);
        free(v);
        sh_pending_release(TAKE_PTR(j->tok));
}

void os_list_open(os_list *l, const os_pager *pg)
{
        l->items = cJSON_CreateArray();
        l->total = 0;
        l->limit = pg->page * pg->size; /* page <= UINT32_MAX, size <= 200: no overflow */
}

bool os_list_want(os_list *l)
{
        return l->total++ < l->limit;
}

void os_list_push(os_list *l, cJSON *it)
{
        if (!l->items || !it || !cJSON_AddItemToArray(l->items, it)) {
                cJSON_Delete(it);
                cJSON_Delete(TAKE_PTR(l->items));
        }
}

/* The local-only form's answer: this pod's part on one page, totalItems all its matches. */
static void list_local(sh_request *r, os_list *l)
{
        int n = cJSON_GetArraySize(l->items);
        os_pager pg = {.page = 1, .size = n > 0 ? (uint64_t)n : 1};
        cJSON *it;

        if (os_pager_open(r, &pg) < 0)
                return;
        while ((it = cJSON_DetachItemFromArray(l->items, 0)))
                if (os_pager_add(r, &pg, it) < 0)
                        return;
        pg.total = l->total;
        os_pager_reply(r, &pg);
}

void os_cluster_list(sh_request *r, os_list *l, const os_pager *pg, bool dedupe, const char *what)
{
        cJSON *local = TAKE_PTR(l->items);
        os_ctx *ctx = os_ctx_of(r);
        _cleanup_free_ char *key_line = NULL;
        const char *key = sh_request_header(r, API_KEY_HEADER);
        const char *headers[2] = {NULL, NULL};
        sh_error *err = NULL;
        merge_job *j;

        if (!local) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        if (os_cluster_local_only(r)) {
                l->items = local;
                list_local(r, l);
                cJSON_Delete(TAKE_PTR(l->items));
                return;
        }
        j = calloc(1, sizeof(*j));
        if (!j) {
                cJSON_Delete(local);
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        j->ctx = ctx;
        j->local = local;
        j->total = l->total;
        j->pg = *pg;
        j->dedupe = dedupe;
        j->what = what;
        /* The peers check the key as this pod did: it goes along (never logged). */
        if (key && asprintf(&key_line, "%s: %s", API_KEY_HEADER, key) < 0) {
                key_line = NULL;
                merge_release(j);
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        headers[0] = key_line;
        j->tok = sh_request_wait(r, &merge_ops, j);
        if (!j->tok) {
                merge_release(j);
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                return;
        }
        j->ask = sh_cluster_ask_all(ctx->cluster, sh_request_target(r), headers,
                                    ctx->cfg->listing_max, merge_done, j, &err);
        if (!j->ask) {
                os_reply_sh_error(r, err);
                sh_error_release(&err);
                sh_pending_release(TAKE_PTR(j->tok));
        }
}
