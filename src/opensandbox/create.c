/* create.c: POST /v1/sandboxes (OPENSANDBOX.md section 2): every field of the request judged
 * before anything is made (image name mapping, resourceLimits as Kubernetes quantities lowered
 * to the host's maxima, timeout, env, metadata, entrypoint, networkPolicy, platform,
 * secureAccess, extensions, the volumes (volumes.c), the fields this host refuses), then the
 * sandbox's create on the native lifecycle, the restore of a snapshot (snapshots.c), the
 * entrypoint started as a background command whose output the record keeps, and the 202 once
 * it runs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "os-internal.h"
#include "sh/network.h"
#include "sh/policy.h"

#define ENTRYPOINT_MAX 256        /* arguments of an entrypoint */
#define CONTAINER_LOG  (1u << 20) /* the entrypoint's output kept (diagnostics `container`) */

static const char *const default_entrypoint[] = {"tail", "-f", "/dev/null"};

/* What the create asks of the sandbox layer, judged from the body. */
typedef struct create_req {
        char *image;             /* a host image's name, or an OCI reference (o.image; owned) */
        sh_create_opts o;        /* env, limits (0: the host's), the restore of a snapshot */
        uint64_t expires_ms;     /* createdAt + timeout; 0: none */
        sh_network *net;         /* the host's (sh/network.h) */
        sh_egress_policy egress; /* the sandbox's network policy, when has_egress */
        bool has_egress;         /* false: loopback only (a host without network) */
        sh_volume *volumes;      /* o.volumes, owned (volumes.c) */
} create_req;

/* ---- judging the body ---------------------------------------------------------------------- */

static bool strings_only(const cJSON *o)
{
        const cJSON *v;

        cJSON_ArrayForEach(v, o) if (!cJSON_IsString(v)) return false;
        return true;
}

/* image.auth {username, password}: that pull's credentials, borrowed from the body for the
 * create (the sandbox layer copies them for the pull alone); never kept in the record, never
 * logged (a GET never hands a password back). */
static int judge_image_auth(const cJSON *auth, create_req *cr, os_err *e)
{
        const cJSON *u = sh_json_opt(auth, "username"), *p = sh_json_opt(auth, "password");

        if (!auth)
                return 0;
        if (!cJSON_IsObject(auth) || (u && !cJSON_IsString(u)) || (p && !cJSON_IsString(p)))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "'image.auth' is {\"username\": ..., \"password\": ...}");
        if (!u && !p)
                return 0;
        if (!u || !p || !*u->valuestring)
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "'image.auth' needs both a username and a password");
        cr->o.pull_username = u->valuestring;
        cr->o.pull_password = p->valuestring;
        return 0;
}

static int judge_image(const sh_manager *m, const cJSON *image, os_record *rec, create_req *cr,
                       os_err *e)
{
        const cJSON *uri = cJSON_GetObjectItemCaseSensitive(image, "uri");
        char cand[3][256], names[1024];
        sh_error *err = NULL;
        size_t n, i;

        if (!cJSON_IsObject(image) || !cJSON_IsString(uri))
                return os_err_code(e, OS_E_INVALID_REQUEST, "'image' is {\"uri\": \"<image>\"}");
        if (!*uri->valuestring)
                return os_err_code(e, OS_E_INVALID_IMAGE, "'image.uri' is empty");
        if (!(rec->image_uri = strdup(uri->valuestring)))
                return os_err_code(e, OS_E_INTERNAL, "out of memory");
        /* A host image wins, first match of the uri's names; otherwise an OCI reference, which
         * the create pulls (OPENSANDBOX.md section 2). */
        n = os_image_candidates(uri->valuestring, cand);
        for (i = 0; i < n; i++)
                if (sh_manager_image_exists(m, cand[i])) {
                        if (!(cr->image = strdup(cand[i])))
                                return os_err_code(e, OS_E_INTERNAL, "out of memory");
                        return 0;
                }
        if (sh_manager_image_kind(m, uri->valuestring, &err) == SH_IMAGE_PULLED) {
                if (!(cr->image = strdup(uri->valuestring)))
                        return os_err_code(e, OS_E_INTERNAL, "out of memory");
                return judge_image_auth(sh_json_opt(image, "auth"), cr, e);
        }
        sh_manager_image_names(m, names, sizeof(names));
        os_err_code(e, OS_E_INVALID_IMAGE,
                    "no host image for '%.200s', and %.200s; the host's images are: %s",
                    uri->valuestring, err && err->msg ? err->msg : "it cannot be pulled", names);
        sh_error_release(&err);
        return -1;
}

static int judge_entrypoint(const cJSON *ep, os_record *rec, os_err *e)
{
        const cJSON *v;
        int n = cJSON_GetArraySize(ep);

        if (!cJSON_IsArray(ep) || n == 0 || n > ENTRYPOINT_MAX || !strings_only(ep))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "'entrypoint' is a non-empty list of at most %d strings",
                                   ENTRYPOINT_MAX);
        v = cJSON_GetArrayItem(ep, 0);
        if (!*v->valuestring)
                return os_err_code(e, OS_E_INVALID_REQUEST, "'entrypoint' names no program");
        rec->entrypoint = cJSON_Duplicate(ep, true);
        return rec->entrypoint ? 0 : os_err_code(e, OS_E_INTERNAL, "out of memory");
}

/* The sandbox's own limits (0: the host's); above the host's maxima the sandbox layer lowers
 * them (the SDK's default asks 2Gi). */
static int judge_limits(const cJSON *lim, create_req *cr, os_err *e)
{
        const cJSON *v;
        uint64_t q;

        if (!lim)
                return 0;
        if (!cJSON_IsObject(lim) || !strings_only(lim))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "'resourceLimits' is an object of quantity strings");
        /* A GPU cannot be given: anything but none is refused rather than ignored. */
        v = cJSON_GetObjectItemCaseSensitive(lim, "gpu");
        if (v && (sh_quantity_parse(v->valuestring, 1000, &q) < 0 || q != 0))
                return os_err_code(e, OS_E_NOT_SUPPORTED, "this host has no GPU to give");
        v = cJSON_GetObjectItemCaseSensitive(lim, "cpu");
        if (v) {
                if (sh_quantity_parse(v->valuestring, 1000, &q) < 0)
                        return os_err_code(e, OS_E_INVALID_REQUEST,
                                           "'resourceLimits.cpu' is not a quantity: '%.64s'",
                                           v->valuestring);
                /* cgroup v1's shortest CFS quota is 1 ms of a 100 ms period: 10 milli-cores. */
                cr->o.cpu_max_milli = q && q < 10 ? 10 : q;
        }
        v = cJSON_GetObjectItemCaseSensitive(lim, "memory");
        if (v) {
                if (sh_quantity_parse(v->valuestring, 1, &q) < 0)
                        return os_err_code(e, OS_E_INVALID_REQUEST,
                                           "'resourceLimits.memory' is not a quantity: '%.64s'",
                                           v->valuestring);
                if (q && q < (4u << 20))
                        return os_err_code(e, OS_E_INVALID_REQUEST,
                                           "'resourceLimits.memory' below 4Mi cannot hold a "
                                           "sandbox");
                cr->o.memory_max = q;
        }
        return 0;
}

static int judge_timeout(const sh_config *cfg, const cJSON *t, const os_record *rec, create_req *cr,
                         os_err *e)
{
        double d;

        /* With a ceiling every sandbox has an expiry within it: "never" is past any ceiling. */
        if (!t && cfg->max_timeout_s)
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "'timeout' is needed on this host: at most %llu seconds "
                                   "(no sandbox here lives without an expiry)",
                                   (unsigned long long)cfg->max_timeout_s);
        if (!t)
                return 0; /* no expiry: manual cleanup */
        d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        /* an integer (no fraction), exactly representable (2^53) */
        if (!cJSON_IsNumber(t) || d < 1 || d > 9007199254740991.0 || d != (double)(uint64_t)d)
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "'timeout' is an integer number of seconds, or null");
        if ((uint64_t)d < cfg->min_timeout_s)
                return os_err_code(e, OS_E_INVALID_REQUEST, "'timeout' is at least %llu seconds",
                                   (unsigned long long)cfg->min_timeout_s);
        if (cfg->max_timeout_s && (uint64_t)d > cfg->max_timeout_s)
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "'timeout' is at most %llu seconds on this host",
                                   (unsigned long long)cfg->max_timeout_s);
        cr->expires_ms = rec->created_ms + (uint64_t)d * 1000;
        return 0;
}

static const char *host_arch(void)
{
        static struct utsname u;

        if (!u.machine[0] && uname(&u) < 0)
                return "unknown";
        if (STREQ(u.machine, "x86_64"))
                return "amd64";
        if (STREQ(u.machine, "aarch64"))
                return "arm64";
        return u.machine;
}

static int judge_platform(const cJSON *p, os_record *rec, os_err *e)
{
        const cJSON *os, *arch;

        if (!p)
                return 0;
        os = cJSON_GetObjectItemCaseSensitive(p, "os");
        arch = cJSON_GetObjectItemCaseSensitive(p, "arch");
        if (!cJSON_IsObject(p) || !cJSON_IsString(os) || !cJSON_IsString(arch))
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "'platform' is {\"os\": ..., \"arch\": ...}");
        if (!STREQ(os->valuestring, "linux") || !STREQ(arch->valuestring, host_arch()))
                return os_err_code(e, OS_E_NOT_SUPPORTED, "this host runs linux/%s only",
                                   host_arch());
        rec->has_platform = true;
        snprintf(rec->platform_os, sizeof(rec->platform_os), "linux");
        /* uname's machine is at most 64 bytes; every architecture name is far shorter */
        if (snprintf(rec->platform_arch, sizeof(rec->platform_arch), "%s", host_arch()) >=
            (int)sizeof(rec->platform_arch))
                return os_err_code(e, OS_E_NOT_SUPPORTED,
                                   "this host's architecture name is "
                                   "too long to report");
        return 0;
}

/* Its network (sh/network.h): the policy (absent or empty: allow-all, OpenSandbox's start),
 * bounded by the operator's lists. A host without network support gives loopback only: a
 * policy that allows nothing is true there and accepted; one that would allow traffic could
 * not be honoured. */
static int judge_network(const cJSON *np, create_req *cr, os_err *e)
{
        sh_error *err = NULL;
        int r;

        if (np && !cJSON_IsObject(np) && !cJSON_IsNull(np))
                return os_err_code(e, OS_E_INVALID_REQUEST, "'networkPolicy' is an object");
        if (sh_egress_policy_from_json(np, &cr->egress, &err) < 0) {
                r = os_err_code(e,
                                sh_error_kind_of(err) == SH_E_INVALID ? OS_E_INVALID_REQUEST
                                                                      : OS_E_INTERNAL,
                                "%s", err && err->msg ? err->msg : "out of memory");
                sh_error_release(&err);
                return r;
        }
        cr->has_egress = true;
        if (sh_network_supported(cr->net))
                return 0;
        if (!sh_egress_policy_json_empty(np) && sh_egress_policy_allows_any(&cr->egress))
                return os_err_code(e, OS_E_NOT_SUPPORTED,
                                   "sandboxes here have no network (%s): a policy can allow "
                                   "nothing",
                                   sh_network_why(cr->net));
        sh_egress_policy_done(&cr->egress);
        cr->has_egress = false;
        return 0;
}

static int judge_extensions(const cJSON *x, os_record *rec, os_err *e)
{
        const cJSON *v;
        uint64_t s;

        if (!x)
                return 0;
        if (!cJSON_IsObject(x))
                return os_err_code(e, OS_E_INVALID_REQUEST, "'extensions' is an object");
        if (cJSON_GetObjectItemCaseSensitive(x, "poolRef"))
                return os_err_code(e, OS_E_NOT_SUPPORTED, "this host has no sandbox pools");
        v = cJSON_GetObjectItemCaseSensitive(x, "access.renew.extend.seconds");
        if (!v)
                return 0;
        if (!cJSON_IsString(v) || sh_parse_u64(v->valuestring, &s) < 0 || s < 300 || s > 86400)
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "'access.renew.extend.seconds' is a decimal string from 300 to "
                                   "86400");
        rec->renew_extend_s = s;
        return 0;
}

/* Every field of the body, before anything is made. */
static int judge(const sh_config *cfg, const cJSON *body, os_record *rec, create_req *cr, os_err *e)
{
        const cJSON *image = sh_json_opt(body, "image"), *snap = sh_json_opt(body, "snapshotId");
        const cJSON *ep = sh_json_opt(body, "entrypoint"), *env = sh_json_opt(body, "env");
        const cJSON *md = sh_json_opt(body, "metadata"), *sa = sh_json_opt(body, "secureAccess");
        const cJSON *vol = sh_json_opt(body, "volumes");
        static const char *const refused[] = {"credentialProxy", "templateId"};
        const char *why;
        size_t i;

        /* The volumes first: a thousand of them is refused before anything else is read. */
        if (os_judge_volumes(cfg, vol, rec, &cr->volumes, &cr->o.n_volumes, e) < 0)
                return -1;
        cr->o.volumes = cr->volumes;
        /* What this host cannot honour is refused, never silently dropped. */
        for (i = 0; i < ARRAY_SIZE(refused); i++)
                if (sh_json_opt(body, refused[i]))
                        return os_err_code(e, OS_E_NOT_SUPPORTED, "'%s' is not supported here",
                                           refused[i]);
        if (image && snap)
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "'image' and 'snapshotId' exclude each other");
        if (!image && !snap)
                return os_err_code(e, OS_E_INVALID_REQUEST, "'image' or 'snapshotId' is needed");
        if (image && judge_image(rec->ctx->mgr, image, rec, cr, e) < 0)
                return -1;
        if (snap) {
                if (!cJSON_IsString(snap) || !*snap->valuestring)
                        return os_err_code(e, OS_E_INVALID_REQUEST, "'snapshotId' is a string");
                free(cr->image);
                if (!(cr->image = strdup("default")) ||
                    !(rec->snapshot_id = strdup(snap->valuestring)))
                        return os_err_code(e, OS_E_INTERNAL, "out of memory");
        }
        if (image && !ep)
                return os_err_code(e, OS_E_INVALID_REQUEST,
                                   "'entrypoint' is required with 'image'");
        if (ep && judge_entrypoint(ep, rec, e) < 0)
                return -1;
        if (judge_limits(sh_json_opt(body, "resourceLimits"), cr, e) < 0 ||
            judge_timeout(cfg, sh_json_opt(body, "timeout"), rec, cr, e) < 0)
                return -1;
        if ((why = sh_env_shape_why(env)))
                return os_err_code(e, OS_E_INVALID_REQUEST, "'env' %s", why);
        cr->o.env = env;
        if (md) {
                if (!cJSON_IsObject(md))
                        return os_err_code(e, OS_E_INVALID_METADATA,
                                           "'metadata' is an object of strings");
                if (os_metadata_check(md, 0, e) < 0)
                        return -1;
                cJSON_Delete(rec->metadata);
                if (!(rec->metadata = cJSON_Duplicate(md, true)))
                        return os_err_code(e, OS_E_INTERNAL, "out of memory");
        }
        if (judge_network(sh_json_opt(body, "networkPolicy"), cr, e) < 0 ||
            judge_platform(sh_json_opt(body, "platform"), rec, e) < 0 ||
            judge_extensions(sh_json_opt(body, "extensions"), rec, e) < 0)
                return -1;
        if (sa && !cJSON_IsBool(sa))
                return os_err_code(e, OS_E_INVALID_REQUEST, "'secureAccess' is a boolean");
        rec->secure_access = sa && cJSON_IsTrue(sa);
        /* Without a key the endpoint look-up hands the token to anyone who asks, and the
         * native surface runs anything on the sandbox: a token would protect nothing. */
        if (rec->secure_access && !rec->ctx->api_key)
                return os_err_code(e, OS_E_NOT_SUPPORTED,
                                   "'secureAccess' needs an API key on this host "
                                   "(SANDBOX_HOST_API_KEY): without one its token is anyone's");
        return 0;
}

/* ---- the entrypoint ------------------------------------------------------------------------- */

/* Its end (its output goes to its log: sh/bgexec.h). */
static void entry_event(sh_exec *e, const sh_exec_event *ev, void *data)
{
        os_record *rec = data;

        if (ev->type == SH_EXEC_EV_EXIT) {
                os_record_entry_ended(rec, ev->exit.code);
                os_record_log(rec, SH_LOG_INFO, "entrypoint-exited", "the entrypoint exited (%d)",
                              ev->exit.code);
        } else {
                os_record_entry_ended(rec, -1);
                os_record_log(rec, SH_LOG_INFO, "entrypoint-ended", "the entrypoint ended: %s",
                              ev->error.text ? ev->error.text : "");
        }
}

/* Started as a background command of the sandbox's (as its uid, in its namespaces and cgroup,
 * with its env, in the workspace; its reads billed with its background commands'), outside
 * their bounds; its exit does not end the sandbox. Its output's log (the last 1 MiB) is made by
 * its first byte: a quiet entrypoint leaves the sandbox's directory empty, and its delete needs
 * no remover. */
static int start_entrypoint(os_record *rec, sh_error **err)
{
        const sh_bgexec_opts o = {.log_name = "entrypoint", .log_max = CONTAINER_LOG};
        int n = cJSON_GetArraySize(rec->entrypoint), i = 0;
        char **argv = calloc((size_t)n + 1, sizeof(char *));
        const cJSON *v;
        int k;

        if (!argv)
                return sh_error_make(err, ENOMEM, "out of memory");
        cJSON_ArrayForEach(v, rec->entrypoint) argv[i++] = v->valuestring; /* copied by exec */
        k = sh_bgexec_new(rec->sb, &o, &rec->entry, err);
        if (k >= 0)
                k = sh_bgexec_start(rec->entry, argv, NULL, entry_event, rec, err);
        free(argv);
        return k;
}

/* ---- the create's job ------------------------------------------------------------------------ */

typedef struct create_job {
        sh_pending *tok;         /* the job's reference, until it answers */
        os_record *rec;          /* a reference */
        sh_sandbox *sb;          /* a reference, from sh_manager_create */
        os_snapshot_source *src; /* with a snapshotId: held (not deleted) until the end */
        bool ended;              /* answered, or the request is gone */
        bool pending;            /* answered 202 Pending: its image is pulled, the job runs on */
        uint64_t progress_ms;    /* the last progress line in the record's log */
} create_job;

static void job_end(create_job *j)
{
        j->ended = true;
        sh_pending_release(TAKE_PTR(j->tok));
}

/* The create cannot complete after its sandbox was made: the sandbox goes. */
static void job_fail(create_job *j, const os_err *e)
{
        sh_request *r = sh_pending_request(j->tok);
        sh_error *ignored = NULL;

        os_record_log(j->rec, SH_LOG_WARN, "sandbox-create-failed", "%s", e->message);
        if (!j->rec->gone)
                os_record_set_state(j->rec, OS_FAILED, "create_failed", "%s", e->message);
        if (!j->rec->gone && os_record_delete(j->rec, "create_failed", &ignored) < 0)
                sh_error_release(&ignored);
        if (r)
                os_reply_err(r, e);
        job_end(j);
}

static void job_running(create_job *j)
{
        sh_request *r = sh_pending_request(j->tok);
        os_record *rec = j->rec;
        sh_error *err = NULL;
        os_err e;

        if (rec->gone) {
                os_err_code(&e, OS_E_UNAVAILABLE, "the sandbox was deleted during its create");
                job_fail(j, &e);
                return;
        }
        if (start_entrypoint(rec, &err) < 0) {
                os_err_code(&e, OS_E_INTERNAL, "cannot start the entrypoint: %.300s",
                            err && err->msg ? err->msg : "");
                sh_error_release(&err);
                job_fail(j, &e);
                return;
        }
        os_record_set_state(rec, OS_RUNNING, "created", "the sandbox runs");
        os_record_log(rec, SH_LOG_INFO, "sandbox-created", "created through /v1 (image %s)",
                      rec->image_uri ? "given" : "from a snapshot");
        if (r)
                os_reply_json(r, 202, os_record_json(rec, false));
        job_end(j);
}

/* The sandbox layer's done: the worker serves and a snapshot's workspace is in (or the create
 * failed, and the sandbox is gone already, its record with it). */
static void create_done(sh_sandbox *sb, const sh_error *err, void *data)
{
        create_job *j = data;
        sh_request *r = sh_pending_request(j->tok);

        if (!err) {
                job_running(j);
                return;
        }
        if (j->pending) {
                /* Answered already: what the client sees is the record's state. A failed pull
                 * keeps the sandbox, Failed, until it is deleted (or expires). */
                const char *why = sh_sandbox_failed(sb);

                os_record_log(j->rec, SH_LOG_WARN, "sandbox-create-failed", "%s",
                              err->msg ? err->msg : "failed");
                if (why && !j->rec->gone)
                        os_record_set_state(j->rec, OS_FAILED, "IMAGE_PULL_FAILED", "%s", why);
                job_end(j);
                return;
        }
        if (j->src && sh_error_kind_of(err) == SH_E_PERSIST_FAILED) {
                os_record_log(j->rec, SH_LOG_WARN, "sandbox-create-failed",
                              "restoring the snapshot: %s", err->msg ? err->msg : "failed");
                if (r)
                        os_reply_code(r, OS_E_INTERNAL, "restoring the snapshot: %s",
                                      err->msg ? err->msg : "failed");
        } else if (r) {
                os_reply_sh_error(r, err);
        }
        job_end(j);
}

/* The request ended unanswered (the client left, shutdown): the sandbox must not stay behind
 * unknown. */
static void create_gone(void *data)
{
        create_job *j = data;

        /* while its worker starts or its restore runs (sh_sandbox_create_cancel); a create
         * answered Pending runs on without its request */
        if (!j->ended && !j->pending) {
                sh_sandbox_create_cancel(j->sb);
                job_end(j);
        }
}

static void create_release(void *data)
{
        create_job *j = data;

        os_snapshot_source_free(j->src);
        sh_sandbox_unref(j->sb);
        os_record_unref(j->rec);
        free(j);
}

static const sh_pending_ops create_ops = {.gone = create_gone, .release = create_release};

/* The pull's progress, in diagnostics `lifecycle`: each layer's bytes, at most a line a second
 * and one as each layer completes. */
#define PROGRESS_EVERY_MS 1000
static void create_progress(void *data, const char *layer, uint64_t done, uint64_t total)
{
        create_job *j = data;
        uint64_t now = sh_now_ms();

        if (done != total && now - j->progress_ms < PROGRESS_EVERY_MS)
                return;
        j->progress_ms = now;
        if (total)
                os_record_log(j->rec, SH_LOG_INFO, "image-pull-progress",
                              "layer %.80s: %llu of %llu bytes", layer, (unsigned long long)done,
                              (unsigned long long)total);
        else
                os_record_log(j->rec, SH_LOG_INFO, "image-pull-progress", "layer %.80s: %llu bytes",
                              layer, (unsigned long long)done);
}

void os_api_create(sh_request *r)
{
        os_ctx *ctx = os_ctx_of(r);
        create_req cr = {0};
        os_record *rec = NULL;
        sh_error *err = NULL;
        create_job *j = NULL;
        cJSON *body;
        bool empty;
        os_err e;

        /* A busy host says so whatever was asked. */
        if (sh_manager_draining(ctx->mgr) || sh_manager_full(ctx->mgr)) {
                os_reply_code(r, OS_E_UNAVAILABLE,
                              sh_manager_draining(ctx->mgr) ? "the host is draining"
                                                            : "the host is at capacity");
                return;
        }
        body = os_json_body(r, "INVALID_REQUEST", &empty);
        if (!body && !empty)
                return;
        if (!cJSON_IsObject(body)) {
                os_reply_code(r, OS_E_INVALID_REQUEST, "the body is a JSON object");
                goto out;
        }
        if (os_record_new(ctx, &rec, &err) < 0) {
                os_reply_sh_error(r, err);
                goto out;
        }
        cr.net = sh_manager_network(ctx->mgr);
        if (judge(ctx->cfg, body, rec, &cr, &e) < 0) {
                os_reply_err(r, &e);
                goto out;
        }
        /* Another live pod's snapshot: that pod makes the sandbox (section 1). */
        if (rec->snapshot_id && os_cluster_create_at_snapshot(r, rec->snapshot_id, body) != 0)
                goto out;
        cr.o.image = cr.image;
        cr.o.surface = OS_SURFACE;
        cr.o.keep_failed = true;
        cr.o.pull_progress = create_progress;
        cr.o.egress = cr.has_egress ? &cr.egress : NULL;
        j = calloc(1, sizeof(*j));
        if (!j) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                goto out;
        }
        /* With a snapshot its tree is the create's restore step (the persister's copy). */
        if (rec->snapshot_id &&
            os_snapshot_restore_source(ctx, rec->snapshot_id, &cr.o, &j->src, &e) < 0) {
                os_reply_err(r, &e);
                goto out;
        }
        if (!rec->entrypoint) {
                const cJSON *snap_ep = os_snapshot_source_entrypoint(j->src);

                rec->entrypoint = snap_ep ? cJSON_Duplicate(snap_ep, true)
                                          : cJSON_CreateStringArray(default_entrypoint, 3);
                if (!rec->entrypoint) {
                        os_reply_code(r, OS_E_INTERNAL, "out of memory");
                        goto out;
                }
        }
        j->rec = os_record_ref(rec);
        j->tok = sh_request_wait(r, &create_ops, j);
        if (!j->tok) {
                os_reply_code(r, OS_E_INTERNAL, "out of memory");
                goto out;
        }
        /* Answered once the worker serves and a snapshot's workspace is in. */
        if (sh_manager_create(ctx->mgr, &cr.o, create_done, j, &j->sb, &err) < 0) {
                os_reply_sh_error(r, err);
                goto out;
        }
        if (os_record_link(rec, j->sb, &err) < 0) {
                /* the sandbox goes at once: nobody would know it */
                sh_sandbox_create_cancel(j->sb);
                os_reply_sh_error(r, err);
                goto out;
        }
        /* expiresAt = createdAt + timeout, counted from the create (the record's birth) */
        sh_sandbox_set_expiry(j->sb, cr.expires_ms);
        /* Its image is pulled first: 202 Pending at once (the SDK waits for its health); the
         * record becomes Running, or Failed with IMAGE_PULL_FAILED, when the create ends. */
        if (sh_sandbox_pulling(j->sb)) {
                j->pending = true;
                os_record_log(rec, SH_LOG_INFO, "image-pull", "pulling %.300s", rec->image_uri);
                os_reply_json(r, 202, os_record_json(rec, false));
        }
        j = NULL; /* the token's now */
out:
        if (j && j->tok)
                job_end(j); /* j goes with the request */
        else if (j)
                create_release(j);
        sh_error_release(&err);
        os_record_unref(rec);
        free(cr.image);
        free(cr.volumes);
        sh_egress_policy_done(&cr.egress);
        cJSON_Delete(body);
}
