/* files.c: a sandbox's execd files and directories (OPENSANDBOX.md section 3.2) over the
 * sandbox's whole filesystem: every path is the sandbox's own absolute path, resolved below its
 * root (sh_sandbox_open_root: its PID 1's root, through the mounts of its mount namespace) by
 * fs/safe_open.c, so that no link, however it changes during a call, leaves that root. The
 * daemon acts as root there, so every route checks what the sandbox's own uid may do
 * (docs/security.md "The OpenSandbox file API"): kernel filesystems (/proc, /dev/pts, ...) are
 * never served, a file the sandbox does not own is read or changed only as its mode and ACL allow
 * the sandbox's uid, FIFOs and devices are refused without being opened, new entries are the
 * sandbox's, and the read-only image refuses every write (EROFS). These rules are the policy its
 * fs operations take (sh_fs_ctx). This file: that policy, execd's errors, paths, ids, modes and
 * FileInfo, the jobs of the loop and those of many paths, the route table. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "files.h"
#include "sh/capability.h"
#include "sh/safe_open.h"

SH_CAPABILITY(os_files, "opensandbox.files")

/* ---- the uid rules ---------------------------------------------------------------------------- */

/* Its own entries are wholly its own (it could chmod them); anyone else's as the kernel would
 * judge its uid and gid, the entry's POSIX ACL included (access.c). An ACL that cannot be read or
 * is not valid: no. */
bool f_may(const fctx *f, int fd, const struct statx *s, unsigned want)
{
        const uint32_t gids[] = {f->gid, f->vol_gid};
        const os_who who = {f->uid, gids, f->vol_gid ? 2 : 1};
        const os_inode ino = {s->stx_uid, s->stx_gid, s->stx_mode};
        unsigned char buf[OS_ACL_BYTES_MAX];
        os_acl acl;
        ssize_t n;

        if (!os_access_acl_matters(&ino, &who) || S_ISLNK(s->stx_mode))
                return os_access_allowed(&ino, NULL, &who, want);
        n = sh_fs_acl_access(fd, buf, sizeof(buf));
        if (n == -ENODATA)
                return os_access_allowed(&ino, NULL, &who, want);
        if (n < 0 || os_acl_parse(buf, (size_t)n, &acl) < 0)
                return false;
        return os_access_allowed(&ino, &acl, &who, want);
}

/* The policy's guard: every directory a lookup passes through, before anything in it is looked
 * at, must be one the sandbox's uid may search, and on no kernel filesystem (the daemon acts as
 * root in the init user namespace: a sysctl, a cgroup or a sysfs attribute written through the
 * sandbox's /proc would change the host). So a file the sandbox could not reach itself, a
 * world-readable one below a 0700 directory of root's in the image (the default image is the
 * host's /etc and /usr), is never reached for it either, by its path or through any link it
 * plants: the guarded lookup is the walker of fs/safe_open.c, which sees each directory, links'
 * targets included (openat2 walks in the kernel, as root). */
static int dir_guard(void *data, int dirfd)
{
        fctx *f = data;
        struct statx s;
        int r;

        if (sh_fs_on_kernel_fs(dirfd)) {
                f->kfs = true;
                return -EACCES;
        }
        if ((r = sh_fs_statx(dirfd, &s)) < 0)
                return r;
        if (!S_ISDIR(s.stx_mode))
                return -ENOTDIR;
        return f_may(f, dirfd, &s, OS_MAY_EXEC) ? 0 : -EACCES;
}

/* may_change: an entry is made in or removed from a directory the guard passes and the sandbox's
 * uid may write; refused by a read-only mount (the image) whatever its bits (EROFS), else by
 * the bits (EACCES). */
static int may_change(void *data, int dirfd)
{
        struct statvfs v;
        struct statx s;
        int r;

        if ((r = dir_guard(data, dirfd)) < 0 || (r = sh_fs_statx(dirfd, &s)) < 0)
                return r;
        if (f_may(data, dirfd, &s, OS_MAY_WRITE | OS_MAY_EXEC))
                return 0;
        return fstatvfs(dirfd, &v) == 0 && (v.f_flag & ST_RDONLY) ? -EROFS : -EACCES;
}

/* may_read: never on a kernel filesystem; a regular file as the sandbox's uid may read it. */
static int may_read(void *data, int fd, const struct statx *s)
{
        fctx *f = data;

        if (sh_fs_on_kernel_fs(fd)) {
                f->kfs = true;
                return -EACCES;
        }
        return !S_ISREG(s->stx_mode) || f_may(f, fd, s, OS_MAY_READ) ? 0 : -EACCES;
}

/* ---- the request's view of its sandbox -------------------------------------------------------- */

int fctx_init(sh_request *r, fctx *f)
{
        os_record *rec = os_request_record(r);
        sh_sandbox *sb = rec ? os_record_sandbox(rec) : NULL;
        const sh_fs_owner *own;

        memset(f, 0, sizeof(*f));
        f->tv = (sh_sandbox_trash_view){.sb = sb, .trash = -1};
        f->root = sb ? sh_sandbox_open_root(sb) : -1;
        if (f->root < 0) {
                os_reply_code(r, OS_E_RUNTIME_RETRY, "the sandbox's filesystem is not available");
                return -1;
        }
        own = sh_sandbox_owner(sb);
        f->uid = own->uid;
        f->gid = own->gid;
        f->vol_gid = sh_sandbox_volume_gid(sb);
        f->mgr = os_ctx_of(r)->mgr;
        f->sb = sh_sandbox_ref(sb);
        f->id_base = os_ctx_of(r)->cfg->uid_base;
        /* a request done in one turn of the loop spends at most a turn's steps; the jobs that
         * take their lookups in slices (f_pjob_run, the replace) give themselves a request's */
        f->budget.left = SH_SAFE_TURN_STEPS;
        f->guard = (sh_safe_guard){dir_guard, f, &f->budget};
        /* the parents mkdir -p makes are the sandbox's own, 0755 (a parent given away first
         * would refuse the next level) */
        f->fs = (sh_fs_ctx){.root = f->root,
                            .guard = &f->guard,
                            .may_change = may_change,
                            .may_read = may_read,
                            .trash = sh_sandbox_trash_of_view,
                            .data = f,
                            .trash_data = &f->tv,
                            .trashfd = -1,
                            .own = own};
        return 0;
}

void fctx_done(fctx *f)
{
        f->root = sh_close(f->root);
        sh_idmap_done(&f->users);
        sh_idmap_done(&f->groups);
        if (f->sb)
                sh_sandbox_trash_view_done(&f->tv);
        /* not answered after its removal (refused, the client gone): removed anyway */
        if (f->trashed)
                sh_manager_trash_kick(f->mgr, f->sb);
        f->trashed = false;
        sh_sandbox_unref(TAKE_PTR(f->sb));
}

/* ---- errors ------------------------------------------------------------------------------------ */

/* errno of a file operation as execd's answer (codes.c: os_code_of_file_errno), in words the
 * client can act on; `shown` is the path as asked. */
int f_error(os_err *e, int errnum, const char *shown, const char *what)
{
        char steps[200];
        const char *words =
                errnum == ENOENT ? " does not exist"
                : errnum == EROFS
                        ? " is on a read-only filesystem (the image, or a read-only volume)"
                : errnum == EACCES || errnum == EPERM ? ": permission denied to the sandbox's user"
                : errnum == ELOOP                     ? ": too many levels of links"
                : errnum == EAGAIN                    ? " kept changing; try again"
                                                      : NULL;

        if (errnum == E2BIG) {
                snprintf(steps, sizeof(steps),
                         ": resolving it looks up too many components (at most %u for one path; "
                         "%u for one request done in slices, %u for one done at once; the "
                         "targets of its links included)",
                         SH_SAFE_LOOKUP_STEPS, SH_SAFE_REQUEST_STEPS, SH_SAFE_TURN_STEPS);
                words = steps;
        }
        return os_err_code(e, os_code_of_file_errno(errnum), "%s: '%s'%s%s", what, shown,
                           words ? "" : ": ", words ? words : strerror(errnum));
}

int f_refused_kfs(os_err *e, const char *shown)
{
        return os_err_code(e, OS_E_BAD_BODY,
                           "'%s' is on a kernel filesystem (/proc, /dev/pts, ...): not served",
                           shown);
}

int f_gone(os_err *e)
{
        return os_err_code(e, OS_E_SANDBOX_NOT_FOUND, "the sandbox was deleted");
}

/* A kernel filesystem met on the way, a file that is no regular file where one is read, the
 * trash view's refusal (ECANCELED: the sandbox deleted, or its workspace not available), else
 * the errno. */
int f_fail(fctx *f, sh_error **err, const char *shown, const char *what, os_err *e)
{
        int errnum = *err ? (*err)->errnum : ENOMEM;
        bool special = *err && (*err)->kind == SH_E_INVALID && !errnum; /* sh_fs_reopen_read's */
        _cleanup_error_ sh_error *refused = TAKE_PTR(f->tv.refused);
        bool kfs = f->kfs;

        sh_error_release(err);
        f->kfs = false;
        if (kfs)
                return f_refused_kfs(e, shown);
        if (special)
                return os_err_code(e, OS_E_BAD_BODY,
                                   "'%s' is not a regular file (FIFOs, devices and sockets are not "
                                   "read)",
                                   shown);
        if (errnum == ECANCELED && sh_error_kind_of(refused) == SH_E_SANDBOX_NOT_FOUND)
                return f_gone(e);
        if (errnum == ECANCELED)
                return os_err_code(e, OS_E_RUNTIME_RETRY, "%s: the sandbox's workspace: %s", what,
                                   refused && refused->msg ? refused->msg : "not available");
        return f_error(e, errnum, shown, what);
}

int f_fail_mkdir(fctx *f, sh_error **err, const char *shown, const char *what, os_err *e)
{
        if (f->kfs || !*err || (*err)->errnum != ENOTDIR)
                return f_fail(f, err, shown, what, e);
        sh_error_release(err);
        return os_err_code(e, OS_E_BAD_BODY, "mkdir: '%s': a component is not a directory", shown);
}

/* ---- paths ------------------------------------------------------------------------------------- */

/* `~` or `~/...` is HOME, the workspace; a relative path is relative to it. */
char *f_path(const char *raw, size_t n, os_err *e)
{
        char *full = NULL, *norm = NULL;
        int r;

        if (!raw || n == 0) {
                os_err_code(e, OS_E_MISSING_QUERY, "a path is empty");
                return NULL;
        }
        if (memchr(raw, '\0', n)) {
                os_err_code(e, OS_E_BAD_BODY, "a path holds a NUL byte");
                return NULL;
        }
        if (raw[0] == '/')
                r = asprintf(&full, "%.*s", (int)n, raw);
        else if (raw[0] == '~' && (n == 1 || raw[1] == '/'))
                r = asprintf(&full, "/workspace%.*s", (int)(n - 1), raw + 1);
        else
                r = asprintf(&full, "/workspace/%.*s", (int)n, raw);
        if (r < 0) {
                os_err_code(e, OS_E_RUNTIME, "out of memory");
                return NULL;
        }
        r = sh_path_normalize(full, strlen(full), &norm);
        free(full);
        if (r < 0)
                os_err_code(e, OS_E_BAD_BODY, "'%.*s' is not a valid path",
                            (int)(n > 200 ? 200 : n), raw);
        return r < 0 ? NULL : norm;
}

int f_open(fctx *f, const char *path, int flags, struct statx *s, const char *shown,
           const char *what, os_err *e)
{
        _cleanup_close_ int fd = -1;
        int r;

        f->kfs = false;
        fd = sh_safe_openat_guarded(f->root, path, flags, 0, &f->guard);
        if (fd < 0)
                return f->kfs ? f_refused_kfs(e, shown) : f_error(e, -fd, shown, what);
        if (sh_fs_on_kernel_fs(fd))
                return f_refused_kfs(e, shown);
        if ((r = sh_fs_statx(fd, s)) < 0)
                return f_error(e, -r, shown, what);
        return TAKE_FD(fd);
}

int f_parent(fctx *f, const char *path, bool make, const char **base, const char *shown,
             const char *what, os_err *e)
{
        sh_error *err = NULL;
        int fd;

        if (!*path)
                return os_err_code(e, OS_E_BAD_BODY, "%s: '/' itself cannot be changed", what);
        fd = make ? sh_fs_open_parent_p(&f->fs, path, base, &err)
                  : sh_fs_open_parent(&f->fs, path, base, &err);
        if (fd < 0)
                return make ? f_fail_mkdir(f, &err, shown, what, e)
                            : f_fail(f, &err, shown, what, e);
        return fd;
}

/* ---- ids, modes, FileInfo ---------------------------------------------------------------------- */

/* One of the image's files, through the sandbox's root. Absent or unreadable: no names. */
static void read_idmap(fctx *f, const char *path, sh_iddb_kind kind, sh_idmap *m)
{
        _cleanup_free_ char *buf = NULL;
        sh_error *err = NULL;
        size_t len;

        if (sh_fs_read_bounded(f->root, path, SH_IDDB_READ_MAX, &buf, &len, &err) < 0)
                sh_error_release(&err);
        else if (sh_idmap_parse(m, kind, buf, len) < 0)
                log_warn("idmap-oom", NULL, "%s not read: out of memory", path);
}

void f_read_maps(fctx *f)
{
        if (f->maps_read)
                return;
        f->maps_read = true;
        read_idmap(f, "etc/passwd", SH_IDDB_PASSWD, &f->users);
        read_idmap(f, "etc/group", SH_IDDB_GROUP, &f->groups);
}

/* A name (or decimal number) of the image's passwd/group as an id the sandbox may give: its
 * own, or one below the sandboxes' uid range (never another sandbox's). */
static int resolve_id(fctx *f, const cJSON *v, bool group, uint32_t *ret, os_err *e)
{
        const char *what = group ? "group" : "owner";
        int r;

        *ret = group ? f->gid : f->uid;
        if (!v || cJSON_IsNull(v))
                return 0;
        if (!cJSON_IsString(v))
                return os_err_code(e, OS_E_BAD_BODY, "%s is a name", what);
        if (!*v->valuestring)
                return 0;
        f_read_maps(f);
        r = sh_idmap_resolve(group ? &f->groups : &f->users, v->valuestring, ret);
        if (r == -ENOENT)
                return os_err_code(e, OS_E_BAD_BODY, "%s '%.64s' is not in the image's %s", what,
                                   v->valuestring, group ? "/etc/group" : "/etc/passwd");
        if (r < 0)
                return os_err_code(e, OS_E_BAD_BODY,
                                   "%s '%.64s' is neither a name nor an id below 4294967295", what,
                                   v->valuestring);
        if (*ret != (group ? f->gid : f->uid) && *ret >= f->id_base)
                return os_err_code(e, OS_E_BAD_BODY,
                                   "%s '%.64s' is in the sandboxes' own id range: not given", what,
                                   v->valuestring);
        return 0;
}

/* `mode` (os_mode_from_json: octal digits written as a decimal number, 644); 0 or absent keeps
 * (-> *ret 0). setuid, setgid and sticky are refused. */
int f_parse_mode(const cJSON *v, mode_t *ret, os_err *e)
{
        unsigned m;
        int r = os_mode_from_json(v, &m);

        *ret = r < 0 ? 0 : (mode_t)m;
        if (r == -EPERM)
                return os_err_code(e, OS_E_BAD_BODY,
                                   "mode %g: setuid, setgid and sticky bits are not given",
                                   v->valuedouble);
        if (r < 0 && cJSON_IsNumber(v))
                return os_err_code(e, OS_E_BAD_BODY, "mode %g is not up to 4 octal digits",
                                   v->valuedouble);
        if (r < 0)
                return os_err_code(e, OS_E_BAD_BODY, "mode is a number such as 644");
        return 0;
}

int f_perms(fctx *f, const cJSON *o, sh_fs_owner *own, mode_t *mode, os_err *e)
{
        if ((mode && f_parse_mode(cJSON_GetObjectItemCaseSensitive(o, "mode"), mode, e) < 0) ||
            resolve_id(f, cJSON_GetObjectItemCaseSensitive(o, "owner"), false, &own->uid, e) < 0 ||
            resolve_id(f, cJSON_GetObjectItemCaseSensitive(o, "group"), true, &own->gid, e) < 0)
                return -1;
        return 0;
}

static bool add_id(cJSON *o, const char *key, const sh_idmap *m, uint32_t id)
{
        const char *name = sh_idmap_name(m, id);
        char num[16];

        snprintf(num, sizeof(num), "%u", id);
        return cJSON_AddStringToObject(o, key, name ? name : num);
}

cJSON *f_file_info(fctx *f, const char *shown, const struct statx *s)
{
        const mode_t m = s->stx_mode;
        /* created: the birth time where the filesystem keeps one, else the last status change */
        const struct statx_timestamp *b = s->stx_mask & STATX_BTIME ? &s->stx_btime : &s->stx_ctime;
        cJSON *o = cJSON_CreateObject();
        char mt[32], ct[32];

        f_read_maps(f);
        sh_rfc3339_format_ts(s->stx_mtime.tv_sec, s->stx_mtime.tv_nsec, mt);
        sh_rfc3339_format_ts(b->tv_sec, b->tv_nsec, ct);
        if (o && cJSON_AddStringToObject(o, "path", shown) &&
            cJSON_AddStringToObject(o, "type",
                                    S_ISREG(m)   ? "file"
                                    : S_ISDIR(m) ? "directory"
                                    : S_ISLNK(m) ? "symlink"
                                                 : "other") &&
            cJSON_AddNumberToObject(o, "size", (double)s->stx_size) &&
            cJSON_AddStringToObject(o, "modified_at", mt) &&
            cJSON_AddStringToObject(o, "created_at", ct) &&
            add_id(o, "owner", &f->users, s->stx_uid) &&
            add_id(o, "group", &f->groups, s->stx_gid) &&
            cJSON_AddNumberToObject(o, "mode", (double)os_mode_to_decimal(m)))
                return o;
        cJSON_Delete(o);
        return NULL;
}

/* ---- the query, bodies ---------------------------------------------------------------------- */

const sh_query_param *f_query_path(sh_request *r)
{
        const sh_query_param *p = sh_query_find(sh_request_query(r), "path");

        if (!p)
                os_reply_code(r, OS_E_MISSING_QUERY, "missing query parameter 'path'");
        return p;
}

int f_query_uint(sh_request *r, const char *key, uint64_t *ret, bool *present)
{
        int k = sh_query_u64(sh_request_query(r), key, ret);

        *present = k > 0;
        if (k < 0)
                os_reply_code(r, OS_E_BAD_BODY, "'%s' is a whole number", key);
        return k < 0 ? -1 : 0;
}

/* ---- jobs of the loop, the answers that wait for the trash ------------------------------------ */

/* A delete or a replace is answered once the space it freed is free again, as when the daemon
 * freed it itself (sh_request_hold, its waiter handed to sh_manager_trash_wait), and the
 * sandbox's remover runs once for the request. */
void f_trashed(fctx *f, int k)
{
        if (k > 0)
                f->trashed = true;
}

void f_answer(fctx *f, sh_request *r, sh_request_job *rj, unsigned status, cJSON *body)
{
        sh_response *resp = body ? sh_response_json(body) : sh_response_empty();
        sh_waiter *w;

        if (!f->trashed) {
                sh_reply(rj ? sh_request_job_request(rj) : r, status, resp);
                if (rj)
                        sh_request_job_done(rj);
                return;
        }
        f->trashed = false;
        w = rj ? sh_request_job_hold(rj, status, resp) : sh_request_hold(r, status, resp);
        if (!sh_manager_trash_wait(f->mgr, f->sb, w) && w)
                w->done(w);
}

/* ---- many-path requests: info, permissions, mv, directories ---------------------------------- */

/* A request of many paths is a job of the loop too: its entries are done in order, one a step,
 * each step charged the lookup steps its entry used, so a slice takes them up until it has used
 * SH_LOOP_JOB_STEPS lookup steps or SH_LOOP_JOB_NS, then the loop serves everyone else. All its
 * lookups together draw from a request's budget (SH_SAFE_REQUEST_STEPS) and each lookup from its
 * own bound (SH_SAFE_LOOKUP_STEPS), so one slice costs at most the steps of one slice and one
 * entry, and the whole request at most its budget. The first entry refused is the answer. */

static void pjob_release(void *data)
{
        f_pjob *j = data;

        f_pjob_file_done(j);
        cJSON_Delete(j->body);
        cJSON_Delete(j->out);
        fctx_done(&j->f);
        free(j);
}

/* committed, or given up: its unnamed file freed off the loop */
void f_pjob_file_done(f_pjob *j)
{
        if (j->x_open)
                sh_manager_discard_unnamed(j->f.mgr, j->f.sb, sh_fs_replace_file_done(&j->x));
        j->x_open = false;
}

static const sh_pending_ops pjob_ops = {.gone = sh_request_job_op_gone, .release = pjob_release};

static int pjob_step(void *data)
{
        f_pjob *j = data;
        sh_request *r = sh_request_job_request(&j->rj);
        uint64_t left = j->f.budget.left;
        int more = j->entry(j);

        if (more > 0)
                return left - j->f.budget.left > 1 ? (int)(left - j->f.budget.left) : 1;
        if (more < 0) {
                os_reply_err(r, &j->e);
                return sh_request_job_done(&j->rj);
        }
        f_answer(&j->f, NULL, &j->rj, 200, TAKE_PTR(j->out)); /* a delete's waits for its trash */
        return SH_LOOP_JOB_DONE;
}

void f_pjob_run(sh_request *r, cJSON *body, cJSON *out, int (*entry)(f_pjob *))
{
        f_pjob *j = calloc(1, sizeof(*j));

        if (!j) {
                cJSON_Delete(body);
                cJSON_Delete(out);
                os_reply_code(r, OS_E_RUNTIME, "out of memory");
                return;
        }
        *j = (f_pjob){.body = body, .next = body ? body->child : NULL, .out = out, .entry = entry};
        if (fctx_init(r, &j->f) < 0) {
                pjob_release(j);
                return;
        }
        j->f.budget.left = SH_SAFE_REQUEST_STEPS;
        if (!sh_request_job_start(&j->rj, r, os_ctx_of(r)->loop, &pjob_ops, pjob_step, "request"))
                pjob_release(j);
}

void f_pjob_body(sh_request *r, bool list, const char *shape, const char *each,
                 bool (*ok)(const cJSON *), cJSON *out, int (*entry)(f_pjob *))
{
        bool empty;
        cJSON *body = os_json_body(r, os_code_name(OS_E_BAD_BODY), &empty), *it;
        const char *why = (list ? cJSON_IsArray(body) : cJSON_IsObject(body)) ? NULL : shape;
        bool over = !why && cJSON_GetArraySize(body) > PATHS_MAX;

        /* every entry's shape before any is done */
        cJSON_ArrayForEach(it, (why || over || !ok ? NULL : body))
        {
                if (!ok(it))
                        why = each;
        }
        if (body && !why && !over) {
                f_pjob_run(r, body, out, entry);
                return;
        }
        cJSON_Delete(body);
        cJSON_Delete(out);
        if (over)
                os_reply_code(r, OS_E_BAD_BODY, "a body holds at most %u entries", PATHS_MAX);
        else if (body || empty)
                os_reply_code(r, OS_E_BAD_BODY, "%s", why);
}

const sh_query_param *f_pjob_next_path(f_pjob *j)
{
        return j->taken++ < PATHS_MAX
                       ? sh_query_next(sh_request_query(sh_request_job_request(&j->rj)), "path",
                                       &j->qi)
                       : NULL;
}

const cJSON *f_pjob_next(f_pjob *j, char **p)
{
        const cJSON *it = j->next;

        if (!it)
                return NULL;
        j->next = it->next;
        return (*p = f_path(it->string, strlen(it->string), &j->e)) ? it : j->body;
}

/* ---- routes ----------------------------------------------------------------------------------- */

/* A route of the sandbox's execd, and its twin: every other method, refused in execd's shape. */
#define ROUTE(path, methods, sink, handler)                                                        \
        {                                                                                          \
                OS_EXECD_PATH path, methods, sink, handler, OS_EXECD_FLAGS                         \
        }
#define OTHERS(p)          ROUTE(p, OS_EXECD_METHODS, NULL, os_execd_wrong_method)
#define ROUTES(p, m, s, h) ROUTE(p, m, s, h), OTHERS(p)

const sh_route os_files_routes[] = {
        ROUTES("/files/info", SH_M_GET, NULL, os_files_info),
        ROUTES("/files", SH_M_DELETE, NULL, os_files_delete),
        ROUTES("/files/permissions", SH_M_POST, &sh_body_buffer, os_files_permissions),
        ROUTES("/files/mv", SH_M_POST, &sh_body_buffer, os_files_move),
        ROUTES("/files/search", SH_M_GET, NULL, os_files_search),
        ROUTES("/files/replace", SH_M_POST, &sh_body_buffer, os_files_replace),
        ROUTES("/files/upload", SH_M_POST, &os_files_upload_sink, os_files_upload),
        ROUTES("/files/download", SH_M_GET, NULL, os_files_download),
        ROUTES("/directories/list", SH_M_GET, NULL, os_files_list),
        ROUTE("/directories", SH_M_POST, &sh_body_buffer, os_files_mkdirs),
        ROUTES("/directories", SH_M_DELETE, NULL, os_files_rmdirs),
};
const size_t os_files_n_routes = ARRAY_SIZE(os_files_routes);
