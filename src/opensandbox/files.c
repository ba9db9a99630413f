/* files.c: a sandbox's execd files and directories (OPENSANDBOX.md section 3.2) over the
 * sandbox's whole filesystem: every path is the sandbox's own absolute path, resolved below the
 * sandbox's root (sh_sandbox_open_root: its PID 1's root, opened per request, through the
 * mounts of its mount namespace) by fs/safe_open.c, so that no link, however it changes during a call, leaves that
 * root. The daemon acts as root there, so every route checks what the sandbox's own uid may do
 * (docs/security.md "The OpenSandbox file API"): kernel filesystems (/proc, /dev/pts, ...) are
 * never served, a file the sandbox does not own is read or changed only as its mode allows the
 * sandbox's uid, FIFOs and devices are refused without being opened, new entries belong to the
 * sandbox's uid/gid, and the read-only image refuses every write (EROFS). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <sodium.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "access.h"
#include "execd.h"
#include "mode.h"
#include "passwd.h"
#include "sh/capability.h"
#include "sh/fsops.h"
#include "sh/fsprobe.h"
#include "sh/job.h"
#include "sh/lines.h"
#include "sh/multipart.h"
#include "sh/range.h"
#include "sh/remove.h"
#include "sh/replace.h"
#include "sh/safe_open.h"

SH_CAPABILITY(os_files, "opensandbox.files")

#define WALK_DEPTH_MAX   64          /* directory levels a listing or search descends */
#define WALK_ENTRIES_MAX 200000      /* entries one listing or search answers */
#define REPLACE_MAX      (64u << 20) /* a file /files/replace rewrites */
#define PATHS_MAX        1024        /* paths of one request (query or body) */
#define METADATA_MAX     (64u << 10) /* one metadata part of an upload */

/* ---- the sandbox's side --------------------------------------------------------------------- */

typedef struct fctx {
        sh_request *r;
        int root; /* the sandbox's root (sh_sandbox_open_root: ours, closed by fctx_done) */
        uid_t uid;
        gid_t gid;
        uint64_t id_base; /* ids from here up are the sandboxes' own: only its own may be given */
        sh_safe_guard guard;   /* every directory a lookup passes through (dir_guard) */
        sh_safe_budget budget; /* the steps all the request's lookups draw from (the guard's) */
        sh_fs_ctx fs;          /* the policy of the fs operations: guard, may_create, f_trash */
        bool kfs;              /* the last lookup was refused at a kernel filesystem */
        /* the last trash view (f_trash) refused: 404 the sandbox was deleted, 503 its
         * workspace is not available (why in view_msg) */
        unsigned view;
        char view_msg[200];
        bool maps_read;
        os_idmap users, groups;
        sh_manager *mgr;
        sh_sandbox *sb;  /* a reference: the request's record lets its sandbox go on a delete */
        int trash;       /* the sandbox's trash, once opened (f_trash) */
        bool trash_open; /* trash is an fd of ours */
        bool trashed;    /* something waits in the trash: the answer waits for its removal */
} fctx;

static void fctx_done(fctx *f)
{
        sh_close(f->root);
        f->root = -1;
        os_idmap_done(&f->users);
        os_idmap_done(&f->groups);
        if (f->trash_open)
                sh_close(f->trash);
        f->trash_open = false;
        /* not answered after its removal (refused, the client gone): removed anyway */
        if (f->trashed)
                sh_manager_trash_kick(f->mgr, f->sb);
        f->trashed = false;
        sh_sandbox_unref(f->sb);
        f->sb = NULL;
}

/* The request's sandbox and its root, or a reply. */
static int dir_guard(void *data, int dirfd);
static int may_create(void *data, int dirfd);
static int f_trash(void *data, int *pfd, int *ret_trashfd);

static int fctx_init(sh_request *r, fctx *f)
{
        os_record *rec = os_request_record(r);
        sh_sandbox *sb = rec ? os_record_sandbox(rec) : NULL;
        const sh_fs_owner *own;

        memset(f, 0, sizeof(*f));
        f->r = r;
        f->root = sb ? sh_sandbox_open_root(sb) : -1;
        if (f->root < 0) {
                os_reply_error(r, 503, OS_RUNTIME, "the sandbox's filesystem is not available");
                return -1;
        }
        own = sh_sandbox_owner(sb);
        f->uid = own->uid;
        f->gid = own->gid;
        f->mgr = os_ctx_of(r)->mgr;
        f->sb = sh_sandbox_ref(sb);
        f->id_base = os_ctx_of(r)->cfg->uid_base;
        /* a request done in one turn of the loop spends at most a turn's steps; the jobs that
         * take their lookups in slices (pjob_run, the replace) give themselves a request's */
        f->budget.left = SH_SAFE_TURN_STEPS;
        f->guard = (sh_safe_guard){dir_guard, f, &f->budget};
        /* the parents mkdir -p makes are the sandbox's own, 0755 (a parent given away first
         * would refuse the next level) */
        f->fs = (sh_fs_ctx){.root = f->root,
                            .guard = &f->guard,
                            .may_change = may_create,
                            .trash = f_trash,
                            .data = f,
                            .trashfd = -1,
                            .own = own};
        return 0;
}

/* The kernel's own filesystems are refused whatever the sandbox mounted where: the daemon
 * acts as root in the init user namespace, and a sysctl, a cgroup or a sysfs attribute written
 * through the sandbox's /proc would change the host (fs/fsprobe.c). */
static bool kernel_fs(int fd)
{
        return sh_fs_on_kernel_fs(fd);
}

/* May the sandbox's uid have every access of `want` (OS_MAY_*: 4 read, 2 write, 1 search) on
 * the entry of fd, whose statx is *s? Its own entries are wholly its own (it could chmod
 * them); anyone else's as the kernel would judge its uid and gid, the entry's POSIX ACL
 * included (access.c). An ACL that cannot be read or is not valid: no. */
static bool may(const fctx *f, int fd, const struct statx *s, unsigned want)
{
        const uint32_t gids[] = {f->gid};
        const os_who who = {f->uid, gids, ARRAY_SIZE(gids)};
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

/* Why the sandbox may not write in directory fd: a read-only mount (the image) says so,
 * whatever its bits; else the bits (EACCES). */
static int denied(int fd)
{
        struct statvfs v;

        return fstatvfs(fd, &v) == 0 && (v.f_flag & ST_RDONLY) ? EROFS : EACCES;
}

static int fstatx(int fd, struct statx *s)
{
        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, s) <
            0)
                return -errno;
        return 0;
}

/* Every directory a lookup passes through, before anything in it is looked at: the sandbox's
 * uid must be allowed to search it (its own directories are its own: may), and it is
 * never on a kernel filesystem. So a file the sandbox could not reach itself, a world-readable
 * one below a 0700 directory of root's in the image (the default image is the host's /etc and
 * /usr), is never reached for it either, by its path or through any link it plants: the
 * guarded lookup is the walker of fs/safe_open.c, which sees each directory, links' targets
 * included (openat2 does the whole walk in the kernel, as root, and cannot be asked). */
static int dir_guard(void *data, int dirfd)
{
        fctx *f = data;
        struct statx s;
        int r;

        if (kernel_fs(dirfd)) {
                f->kfs = true;
                return -EACCES;
        }
        if ((r = fstatx(dirfd, &s)) < 0)
                return r;
        if (!S_ISDIR(s.stx_mode))
                return -ENOTDIR;
        return may(f, dirfd, &s, OS_MAY_EXEC) ? 0 : -EACCES;
}

/* ---- errors ------------------------------------------------------------------------------------ */

/* errno of a file operation as execd's answer; `shown` is the path as asked. Returns -1. */
static int fail(os_err *e, int errnum, const char *shown, const char *what)
{
        switch (errnum) {
        case ENOENT:
                return os_err_set(e, 404, "FILE_NOT_FOUND", "%s: '%s' does not exist", what, shown);
        case EROFS:
                return os_err_set(e, 400, OS_BAD_BODY,
                                  "%s: '%s' is on a read-only filesystem (the image is read-only)",
                                  what, shown);
        case EACCES:
        case EPERM:
                return os_err_set(e, 400, OS_BAD_BODY,
                                  "%s: '%s': permission denied to the sandbox's user", what, shown);
        case ELOOP:
                return os_err_set(e, 400, OS_BAD_BODY, "%s: '%s': too many levels of links", what,
                                  shown);
        case ENOTDIR:
        case EISDIR:
        case EEXIST:
        case ENOTEMPTY:
        case EINVAL:
        case ENAMETOOLONG:
        case EXDEV:
        case ENOSPC:
        case EDQUOT:
        case EFBIG:
        case EBUSY:
        case EMLINK:
                return os_err_set(e, 400, OS_BAD_BODY, "%s: '%s': %s", what, shown,
                                  strerror(errnum));
        case E2BIG:
                return os_err_set(e, 400, OS_BAD_BODY,
                                  "%s: '%s': resolving it looks up too many components (at most "
                                  "%u for one path; %u for one request done in slices, %u for "
                                  "one done at once; the targets of its links included)",
                                  what, shown, SH_SAFE_LOOKUP_STEPS, SH_SAFE_REQUEST_STEPS,
                                  SH_SAFE_TURN_STEPS);
        case EAGAIN:
                return os_err_set(e, 503, OS_RUNTIME, "%s: '%s' kept changing; try again", what,
                                  shown);
        default:
                return os_err_set(e, 500, OS_RUNTIME, "%s: '%s': %s", what, shown,
                                  strerror(errnum));
        }
}

static int refused_kernel_fs(os_err *e, const char *shown)
{
        return os_err_set(e, 400, OS_BAD_BODY,
                          "'%s' is on a kernel filesystem (/proc, /dev/pts, ...): not served",
                          shown);
}

/* ---- paths ------------------------------------------------------------------------------------- */

/* The sandbox's path `raw` (n bytes: absolute, `~` or `~/...` for HOME, the workspace, or
 * relative to it) as a path below its root ("" for "/"), or NULL and e filled. */
static char *sb_path(const char *raw, size_t n, os_err *e)
{
        char *full = NULL, *norm = NULL;
        int r;

        if (!raw || n == 0) {
                os_err_set(e, 400, OS_MISSING, "a path is empty");
                return NULL;
        }
        if (memchr(raw, '\0', n)) {
                os_err_set(e, 400, OS_BAD_BODY, "a path holds a NUL byte");
                return NULL;
        }
        if (raw[0] == '/')
                r = asprintf(&full, "%.*s", (int)n, raw);
        else if (raw[0] == '~' && (n == 1 || raw[1] == '/'))
                r = asprintf(&full, "/workspace%.*s", (int)(n - 1), raw + 1);
        else
                r = asprintf(&full, "/workspace/%.*s", (int)n, raw);
        if (r < 0) {
                os_err_set(e, 500, OS_RUNTIME, "out of memory");
                return NULL;
        }
        r = sh_path_normalize(full, strlen(full), &norm);
        free(full);
        if (r < 0) {
                os_err_set(e, 400, OS_BAD_BODY, "'%.*s' is not a valid path",
                           (int)(n > 200 ? 200 : n), raw);
                return NULL;
        }
        return norm;
}

/* Resolve `path` below the root with open(2) `flags` (O_PATH, O_NOFOLLOW...), never on a kernel
 * filesystem; *s its statx. The fd, or -1 with e filled. */
static int f_open(fctx *f, const char *path, int flags, struct statx *s, const char *shown,
                  const char *what, os_err *e)
{
        _cleanup_close_ int fd = -1;
        int r;

        f->kfs = false;
        fd = sh_safe_openat_guarded(f->root, path, flags, 0, &f->guard);
        if (fd < 0)
                return f->kfs ? refused_kernel_fs(e, shown) : fail(e, -fd, shown, what);
        if (kernel_fs(fd))
                return refused_kernel_fs(e, shown);
        if ((r = fstatx(fd, s)) < 0)
                return fail(e, -r, shown, what);
        return TAKE_FD(fd);
}

static int gone(os_err *e)
{
        return os_err_set(e, 404, "SANDBOX_NOT_FOUND", "the sandbox was deleted");
}

/* A failed fs operation (err, taken) as execd's answer: a kernel filesystem met on the way, the
 * trash view's refusal (f_trash), else its errno. -1. */
static int f_fail(fctx *f, sh_error **err, const char *shown, const char *what, os_err *e)
{
        int errnum = *err ? (*err)->errnum : ENOMEM;
        unsigned view = f->view;
        bool kfs = f->kfs;

        sh_error_release(err);
        f->kfs = false;
        f->view = 0;
        if (kfs)
                return refused_kernel_fs(e, shown);
        if (view == 404)
                return gone(e);
        if (view == 503)
                return os_err_set(e, 503, OS_RUNTIME, "%s: the sandbox's workspace: %s", what,
                                  f->view_msg);
        return fail(e, errnum, shown, what);
}

/* The parent directory of non-root `path` (O_PATH), checked: the sandbox may create and remove
 * entries in it (write and search: may_create). *base: the last component. The fd, or -1 with e
 * filled. */
static int f_parent(fctx *f, const char *path, const char **base, const char *shown,
                    const char *what, os_err *e)
{
        sh_error *err = NULL;
        int fd;

        if (!*path)
                return os_err_set(e, 400, OS_BAD_BODY, "%s: '/' itself cannot be changed", what);
        if ((fd = sh_fs_open_parent(&f->fs, path, base, &err)) < 0)
                return f_fail(f, &err, shown, what, e);
        return fd;
}

/* The same, the missing parents made first (the sandbox's own, 0755: sh_fs_open_parent_p). */
static int f_parent_p(fctx *f, const char *path, const char **base, const char *shown,
                      const char *what, os_err *e)
{
        sh_error *err = NULL;
        int fd = sh_fs_open_parent_p(&f->fs, path, base, &err);

        if (fd < 0 && !f->kfs && err && err->errnum == ENOTDIR) {
                sh_error_release(&err);
                return os_err_set(e, 400, OS_BAD_BODY,
                                  "mkdir: '%s': a component is not a directory", shown);
        }
        return fd < 0 ? f_fail(f, &err, shown, what, e) : fd;
}

/* ---- ids and modes ---------------------------------------------------------------------------- */

/* Read one of the image's files through the sandbox root, bounded, never blocking (a FIFO or a
 * device there is not read). Absent or unreadable: no names. */
static void read_idmap(fctx *f, const char *path, os_iddb_kind kind, os_idmap *m)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        sh_error *err = NULL;
        uint64_t size;
        size_t got = 0;

        if (sh_fs_open_read(f->root, path, &fd, &size, &err) < 0) {
                sh_error_release(&err);
                return;
        }
        if (kernel_fs(fd))
                return;
        buf = malloc(OS_IDDB_READ_MAX);
        if (!buf)
                return;
        while (got < OS_IDDB_READ_MAX) {
                ssize_t n = read(fd, buf + got, OS_IDDB_READ_MAX - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        if (os_idmap_parse(m, kind, buf, got) < 0)
                log_warn("idmap-oom", NULL, "%s not read: out of memory", path);
}

static void read_maps(fctx *f)
{
        if (f->maps_read)
                return;
        f->maps_read = true;
        read_idmap(f, "etc/passwd", OS_IDDB_PASSWD, &f->users);
        read_idmap(f, "etc/group", OS_IDDB_GROUP, &f->groups);
}

/* A name (or decimal number) of the image's passwd/group as an id the sandbox may give: its
 * own, or one below the sandboxes' uid range (never another sandbox's). -1 with e filled. */
static int resolve_id(fctx *f, const cJSON *v, bool group, uint32_t *ret, os_err *e)
{
        const char *what = group ? "group" : "owner";
        uint32_t own = group ? f->gid : f->uid;
        int r;

        if (!v || cJSON_IsNull(v)) {
                *ret = own;
                return 0;
        }
        if (!cJSON_IsString(v))
                return os_err_set(e, 400, OS_BAD_BODY, "%s is a name", what);
        if (!*v->valuestring) {
                *ret = own;
                return 0;
        }
        read_maps(f);
        r = os_idmap_resolve(group ? &f->groups : &f->users, v->valuestring, ret);
        if (r == -ENOENT)
                return os_err_set(e, 400, OS_BAD_BODY, "%s '%.64s' is not in the image's %s", what,
                                  v->valuestring, group ? "/etc/group" : "/etc/passwd");
        if (r < 0)
                return os_err_set(e, 400, OS_BAD_BODY,
                                  "%s '%.64s' is neither a name nor an id below 4294967295", what,
                                  v->valuestring);
        if (*ret != own && *ret >= f->id_base)
                return os_err_set(e, 400, OS_BAD_BODY,
                                  "%s '%.64s' is in the sandboxes' own id range: not given", what,
                                  v->valuestring);
        return 0;
}

/* `mode` (os_mode_from_json: octal digits written as a decimal number, 644); 0 or absent keeps
 * (-> *ret 0). setuid, setgid and sticky are refused. */
static int parse_mode(const cJSON *v, mode_t *ret, os_err *e)
{
        unsigned m;
        int r = os_mode_from_json(v, &m);

        *ret = 0;
        if (r == -EPERM)
                return os_err_set(e, 400, OS_BAD_BODY,
                                  "mode %g: setuid, setgid and sticky bits are not given",
                                  v->valuedouble);
        if (r < 0 && cJSON_IsNumber(v))
                return os_err_set(e, 400, OS_BAD_BODY, "mode %g is not up to 4 octal digits",
                                  v->valuedouble);
        if (r < 0)
                return os_err_set(e, 400, OS_BAD_BODY, "mode is a number such as 644");
        *ret = (mode_t)m;
        return 0;
}

/* ---- FileInfo ----------------------------------------------------------------------------------- */

static const char *type_name(mode_t m)
{
        if (S_ISREG(m))
                return "file";
        if (S_ISDIR(m))
                return "directory";
        if (S_ISLNK(m))
                return "symlink";
        return "other";
}

static uint64_t ts_ms(const struct statx_timestamp *t)
{
        return t->tv_sec < 0 ? 0 : (uint64_t)t->tv_sec * 1000 + t->tv_nsec / 1000000;
}

static cJSON *file_info(fctx *f, const char *shown, const struct statx *s)
{
        cJSON *o = cJSON_CreateObject();
        char t[32], num[16];
        const char *name;

        read_maps(f);
        if (!o || !cJSON_AddStringToObject(o, "path", shown) ||
            !cJSON_AddStringToObject(o, "type", type_name(s->stx_mode)) ||
            !cJSON_AddNumberToObject(o, "size", (double)s->stx_size))
                goto oom;
        os_time_format(ts_ms(&s->stx_mtime), t);
        if (!cJSON_AddStringToObject(o, "modified_at", t))
                goto oom;
        /* the birth time where the filesystem keeps one, else the last status change */
        os_time_format(ts_ms((s->stx_mask & STATX_BTIME) ? &s->stx_btime : &s->stx_ctime), t);
        if (!cJSON_AddStringToObject(o, "created_at", t))
                goto oom;
        name = os_idmap_name(&f->users, s->stx_uid);
        snprintf(num, sizeof(num), "%u", s->stx_uid);
        if (!cJSON_AddStringToObject(o, "owner", name ? name : num))
                goto oom;
        name = os_idmap_name(&f->groups, s->stx_gid);
        snprintf(num, sizeof(num), "%u", s->stx_gid);
        if (!cJSON_AddStringToObject(o, "group", name ? name : num) ||
            !cJSON_AddNumberToObject(o, "mode", (double)os_mode_to_decimal(s->stx_mode)))
                goto oom;
        return o;
oom:
        cJSON_Delete(o);
        return NULL;
}

/* Every `path=` of the query, in order; none -> 400 MISSING_QUERY. */
static size_t query_paths(sh_request *r, const sh_query_param **out, size_t max)
{
        const sh_query *q = sh_request_query(r);
        size_t n = 0;

        for (size_t i = 0; q && i < q->n && n < max; i++)
                if (STREQ(q->v[i].key, "path"))
                        out[n++] = &q->v[i];
        return n;
}

static const sh_query_param *query_one(sh_request *r, const char *key)
{
        return sh_query_find(sh_request_query(r), key);
}

/* ---- GET /files/download ------------------------------------------------------------------------ */

/* A regular file for reading, checked (readable by the sandbox's uid, not on a kernel
 * filesystem), opened without ever blocking (O_PATH first: a FIFO or a device is never opened).
 * The fd or -1 with e filled. */
static int f_open_read(fctx *f, const char *path, const char *shown, struct statx *s, os_err *e)
{
        _cleanup_close_ int pfd = -1, fd = -1;
        sh_error *err = NULL;
        uint64_t size;
        int r;

        f->kfs = false;
        pfd = sh_safe_openat_guarded(f->root, path, O_PATH, 0, &f->guard);
        if (pfd < 0)
                return f->kfs ? refused_kernel_fs(e, shown)
                              : fail(e, pfd == -ELOOP ? ENOENT : -pfd, shown, "read");
        if (kernel_fs(pfd))
                return refused_kernel_fs(e, shown);
        if ((r = fstatx(pfd, s)) < 0)
                return fail(e, -r, shown, "read");
        /* the bits before the open: a file the sandbox may not read is never opened */
        if (S_ISREG(s->stx_mode) && !may(f, pfd, s, OS_MAY_READ))
                return fail(e, EACCES, shown, "read");
        if (sh_fs_reopen_read(pfd, path, &fd, &size, &err) < 0) {
                int errnum = err ? err->errnum : EIO;
                bool special = err && err->kind == SH_E_INVALID;

                sh_error_release(&err);
                if (special)
                        return os_err_set(e, 400, OS_BAD_BODY,
                                          "'%s' is not a regular file (FIFOs, devices and sockets "
                                          "are not read)",
                                          shown);
                return fail(e, errnum, shown, "read");
        }
        if ((r = fstatx(fd, s)) < 0)
                return fail(e, -r, shown, "read");
        if (!may(f, fd, s, OS_MAY_READ))
                return fail(e, EACCES, shown, "read");
        return TAKE_FD(fd);
}

/* Content-Disposition with the base name: plain ASCII in `filename`, the exact name in
 * RFC 5987's `filename*` (a name with quotes, CR or LF never reaches a header as such). */
static void add_disposition(sh_response *resp, const char *path)
{
        const char *base = strrchr(path, '/');
        char plain[256], enc[3 * 255 + 1];
        size_t np = 0, ne = 0;
        char *h = NULL;

        base = base ? base + 1 : path;
        for (const unsigned char *c = (const unsigned char *)base; *c && np < 255; c++) {
                plain[np++] = (*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\') ? (char)*c : '_';
                if (ne + 3 < sizeof(enc)) {
                        if (isalnum(*c) || strchr("!#$&+-.^_`|~", *c))
                                enc[ne++] = (char)*c;
                        else
                                ne += (size_t)snprintf(enc + ne, 4, "%%%02X", *c);
                }
        }
        plain[np] = enc[ne] = '\0';
        if (asprintf(&h, "attachment; filename=\"%s\"; filename*=UTF-8''%s", plain, enc) >= 0) {
                sh_response_header(resp, "Content-Disposition", h);
                free(h);
        }
}

/* Line mode (below: a job of the loop). */
static void download_lines(sh_request *r, int fd, uint64_t offset, uint64_t limit,
                           const char *shown);

static int query_uint(sh_request *r, const char *key, uint64_t *ret, bool *present)
{
        const sh_query_param *q = query_one(r, key);
        char *end;

        *present = q != NULL;
        *ret = 0;
        if (!q)
                return 0;
        errno = 0;
        *ret = strtoull(q->val, &end, 10);
        if (!q->val_len || !isdigit((unsigned char)q->val[0]) || *end || errno) {
                os_reply_error(r, 400, OS_BAD_BODY, "'%s' is a whole number", key);
                return -1;
        }
        return 0;
}

static void api_download(sh_request *r)
{
        _cleanup_(fctx_done) fctx f = {.root = -1};
        const sh_query_param *q = query_one(r, "path");
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -1;
        uint64_t offset, limit, from = 0, to = 0;
        bool has_off, has_lim;
        const char *range;
        struct statx s;
        sh_response *resp;
        char cr[96];
        int rr = 0;
        os_err e;

        if (!q) {
                os_reply_error(r, 400, OS_MISSING, "missing query parameter 'path'");
                return;
        }
        if (query_uint(r, "offset", &offset, &has_off) < 0 ||
            query_uint(r, "limit", &limit, &has_lim) < 0)
                return;
        if ((has_off && offset < 1) || (has_lim && limit < 1)) {
                os_reply_error(r, 400, OS_BAD_BODY, "offset and limit are at least 1");
                return;
        }
        range = sh_request_header(r, "Range");
        if ((has_off || has_lim) && range) {
                os_reply_error(r, 400, OS_BAD_BODY, "offset/limit and Range exclude each other");
                return;
        }
        if (fctx_init(r, &f) < 0)
                return;
        if (!(p = sb_path(q->val, q->val_len, &e)) ||
            (fd = f_open_read(&f, p, q->val, &s, &e)) < 0) {
                os_reply_err(r, &e);
                return;
        }
        if (has_off || has_lim) {
                download_lines(r, TAKE_FD(fd), has_off ? offset : 1, limit, q->val);
                return;
        }
        if (range && (rr = sh_range_parse(range, s.stx_size, &from, &to)) < 0) {
                char msg[160];

                snprintf(cr, sizeof(cr), "bytes */%" PRIu64, (uint64_t)s.stx_size);
                snprintf(msg, sizeof(msg), "range '%.64s' is outside the file's %" PRIu64 " bytes",
                         range, (uint64_t)s.stx_size);
                os_reply_error_header(r, 416, OS_BAD_BODY, "Content-Range", cr, msg);
                return;
        }
        if (rr == 1) {
                resp = sh_response_fd_at(r, TAKE_FD(fd), from, to - from + 1);
                snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, from, to,
                         (uint64_t)s.stx_size);
                if (resp)
                        sh_response_header(resp, "Content-Range", cr);
        } else {
                /* sent from the very inode checked, with sendfile: memory does not grow */
                resp = sh_response_fd(r, TAKE_FD(fd), s.stx_size);
        }
        if (resp) {
                sh_response_header(resp, "Content-Type", "application/octet-stream");
                sh_response_header(resp, "Accept-Ranges", "bytes");
                add_disposition(resp, p);
        }
        sh_reply(r, rr == 1 ? 206 : 200, resp);
}

/* ---- walks: directories/list and files/search ------------------------------------------------- */

/* A job answered from the loop in slices (sh_request_job: a listing, a search, a line-mode
 * download, a replacement, a recursive delete, a request of many paths), whose answer may wait
 * for the trash (job_answer). A job embeds one as its first member; its steps are given the job,
 * and fjob_gone is its pending ops' gone. */
typedef struct fjob {
        sh_request_job rj; /* first */
        sh_trash_waiter w; /* the answer waiting for the trash (job_answer) */
        unsigned status;   /* that answer */
        cJSON *body;
} fjob;

/* The request went (its client left, or shutdown): no slice runs any more, no answer waits. */
static void fjob_gone(void *data)
{
        fjob *s = data;

        sh_request_job_gone(&s->rj);
        sh_manager_trash_unwait(&s->w);
        cJSON_Delete(TAKE_PTR(s->body));
}

static ssize_t fjob_read(void *data, char *out, size_t max)
{
        return sh_request_job_read(data, out, max);
}

/* The request waits on a token of ops for the job, whose steps are `step` (its budget
 * s->rj.job.steps and .ns as the caller set them: 0 the default): the first slice runs now, the
 * rest from the loop. false: no token could be had (answered 500): the caller frees the job. */
static bool fjob_start(fjob *s, sh_request *r, const sh_pending_ops *ops, int (*step)(void *),
                       const char *what)
{
        if (!sh_request_job_wait(&s->rj, r, os_ctx_of(r)->loop, ops, step, what))
                return false;
        sh_request_job_run(&s->rj);
        return true;
}

/* Line mode: the lines asked (sh/lines.h), read in slices: at most LINES_SLICE bytes of the
 * file (or SH_LOOP_JOB_NS) a slice, SH_FS_LINES_READ at a time. First from the loop while the
 * request waits: an answer that ends within LINES_HEAD bytes is sent whole, with its
 * Content-Length (an empty one too, as the surface's every empty answer); a longer one is
 * streamed from there, a slice each time the transport wants bytes. So the loop time of a step
 * and the memory are bounded whatever the file, and a client that does not read stops the
 * reading. A read that fails before the answer is a 500, after it cuts the stream. */
#define LINES_SLICE (1u << 20)
#define LINES_HEAD  (256u << 10)
#define LINES_TYPE  "text/plain; charset=utf-8"

typedef struct ljob {
        fjob s; /* first */
        char *shown;
        bool streaming;
        sh_fs_lines l;
} ljob;

static void ljob_release(void *data)
{
        ljob *j = data;

        sh_request_job_free(&j->s.rj);
        sh_close(j->l.fd);
        free(j->shown);
        free(j);
}

static const sh_pending_ops ljob_ops = {
        .gone = fjob_gone, .release = ljob_release, .read = fjob_read};

/* One read: in the head, answered once the lines end or pass LINES_HEAD; in the stream, a pause
 * once the slice made what the transport asked. */
static int ljob_step(void *data)
{
        ljob *j = data;
        sh_request_job *rj = &j->s.rj;
        int k = sh_fs_lines_step(&j->l, &rj->ss.b);

        if (k > 0 && j->streaming)
                return rj->ss.b.len >= rj->want ? SH_LOOP_JOB_PAUSE : 1;
        if (k > 0)
                return rj->ss.b.len < LINES_HEAD
                               ? 1
                               : (j->streaming = true,
                                  sh_request_job_stream(rj, SH_FS_LINES_READ, LINES_TYPE));
        if (k == 0 && j->streaming)
                rj->ss.ended = true;
        if (k == 0)
                return j->streaming ? SH_LOOP_JOB_DONE : sh_request_job_whole(rj, LINES_TYPE);
        if (!j->streaming) {
                os_reply_error(sh_request_job_request(rj), 500, OS_RUNTIME, "read '%s': %s",
                               j->shown, strerror(-k));
                return sh_request_job_done(rj);
        }
        log_warn("download-cut", sh_request_log_id(sh_pending_request(rj->ss.tok)),
                 "line mode of '%s': %s; the answer was cut", j->shown, strerror(-k));
        rj->cut = true;
        return SH_LOOP_JOB_DONE;
}

static void download_lines(sh_request *r, int fd, uint64_t offset, uint64_t limit,
                           const char *shown)
{
        ljob *j = calloc(1, sizeof(*j));

        if (!j || !(j->shown = strdup(shown))) {
                free(j);
                sh_close(fd);
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        sh_fs_lines_init(&j->l, fd, offset, limit);
        j->s.rj.job.steps = LINES_SLICE / SH_FS_LINES_READ; /* a step: one read */
        if (!fjob_start(&j->s, r, &ljob_ops, ljob_step, "download"))
                ljob_release(j);
}

/* A listing or a search: fs/walk.c's listing mode (each directory by name, a directory's
 * entries right after it, links never followed or entered, directories entered only as
 * walk_may_enter allows), its answer a JSON array of FileInfo made as the walk goes, with
 * bounded memory whatever the tree (docs/architecture.md "Listings and searches"):
 *
 * - head: the walk runs in slices from the loop while the request waits, and the answer is
 *   kept; one that ends within WALK_HEAD_MAX bytes is sent whole (with its Content-Length),
 *   and an error met meanwhile is answered as such;
 * - count: past WALK_HEAD_MAX, what is kept is dropped and the walk goes on only counting
 *   what it would send: past SANDBOX_HOST_LISTING_MAX bytes or WALK_ENTRIES_MAX entries the
 *   answer is 400 naming the bound, before a byte of it is sent;
 * - stream: within them, the walk starts again from the same top directory and the answer
 *   is streamed (chunked) as it is walked, one slice each time the transport wants bytes
 *   (sh_sliced_stream): a client that does not read stops the walk, and the daemon holds a
 *   block and about one slice's entries for it. The status is gone by then: if the tree
 *   grew past a bound, or the walk fails, the stream is cut where it is (the client sees an
 *   unfinished chunked body and an unclosed array, never a well-formed short list) and the
 *   cut is logged.
 *
 * So a big answer is walked twice; an answer that fits the head, the common one, once. */
#define WALK_HEAD_MAX (256u << 10)
#define WALK_HELD_MAX (16u << 20) /* directory listings a walk holds (its current path's) */
#define WALK_BLOCK    (64u << 10) /* the transport's block of a streamed answer */

typedef enum { WALK_HEAD, WALK_COUNT, WALK_STREAM } walk_phase;

typedef struct wjob {
        fjob s; /* first */
        fctx f;
        int top;       /* the directory walked (O_PATH, checked by walk_top): each pass's */
        char *shown;   /* the top as asked: every path shown starts with it */
        char *pattern; /* search: a glob; NULL: a listing */
        sh_fs_walk_opts o;
        sh_fs_walker *w;
        walk_phase phase;
        sh_buf out;            /* head: the answer so far; count: the entry being counted */
        uint64_t bytes, count; /* of the answer of this pass, the brackets included */
        uint64_t max;          /* SANDBOX_HOST_LISTING_MAX */
        os_err e;
} wjob;

static void wjob_release(void *data)
{
        wjob *j = data;

        sh_fs_walk_free(j->w);
        sh_request_job_free(&j->s.rj);
        sh_buf_done(&j->out);
        sh_close(j->top);
        free(j->shown);
        free(j->pattern);
        fctx_done(&j->f);
        free(j);
}

/* Kernel filesystems are never entered, nor a directory the sandbox's uid could not list
 * itself (read and search). */
static bool walk_may_enter(void *data, int fd)
{
        fctx *f = data;
        struct statx s;

        return !kernel_fs(fd) && fstatx(fd, &s) == 0 && may(f, fd, &s, OS_MAY_READ | OS_MAY_EXEC);
}

/* A new pass over the top directory. 0, or -1 with j->e filled. */
static int wjob_begin(wjob *j, walk_phase phase, sh_buf *b)
{
        sh_error *err = NULL;

        sh_fs_walk_free(TAKE_PTR(j->w));
        j->phase = phase;
        j->count = 0;
        j->bytes = 2; /* "[" and "]" */
        if (sh_fs_walk_open_at(j->top, j->shown, &j->o, &j->w, &err) < 0) {
                fail(&j->e, err ? err->errnum : ENOMEM, j->shown, "list");
                sh_error_release(&err);
                return -1;
        }
        if (sh_buf_append(b, "[", 1) < 0)
                return os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        return 0;
}

/* The FileInfo of entry e appended to b (after a comma but for the first), counted against
 * the bounds. 0, or -1 with j->e filled. */
static int wjob_add(wjob *j, sh_buf *b, const sh_fs_entry *e)
{
        cJSON *fi = file_info(&j->f, e->path, e->stx);
        char *text = fi ? cJSON_PrintUnformatted(fi) : NULL;
        bool comma = j->count > 0;
        int r = -1;

        cJSON_Delete(fi);
        if (!text)
                os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        else if (++j->count > WALK_ENTRIES_MAX)
                os_err_set(&j->e, 400, OS_BAD_BODY,
                           "more than %u entries: narrow the path or depth", WALK_ENTRIES_MAX);
        else if ((j->bytes += strlen(text) + comma) > j->max)
                os_err_set(&j->e, 400, OS_BAD_BODY,
                           "the answer would pass %" PRIu64
                           " bytes (SANDBOX_HOST_LISTING_MAX): narrow the path or depth",
                           j->max);
        else if ((comma && sh_buf_append(b, ",", 1) < 0) ||
                 sh_buf_append(b, text, strlen(text)) < 0)
                os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        else
                r = 0;
        free(text);
        return r;
}

/* A walk that failed: why, as execd's answer. */
static void wjob_failed(wjob *j, sh_error *err)
{
        if (err && err->errnum == E2BIG)
                os_err_set(&j->e, 400, OS_BAD_BODY,
                           "'%s': the directories on one path below it hold more than %u MiB "
                           "of names: narrow the path or depth",
                           j->shown, WALK_HELD_MAX >> 20);
        else
                fail(&j->e, err ? err->errnum : EIO, j->shown, "list");
}

/* Entry e into this pass's answer: the head keeps it (and past WALK_HEAD_MAX the pass turns to
 * counting), the count only counts it, the stream sends it. 0, or -1 with j->e filled. */
static int wjob_entry(wjob *j, const sh_fs_entry *e)
{
        sh_buf *b = j->phase == WALK_STREAM ? &j->s.rj.ss.b : &j->out;

        if (j->phase == WALK_COUNT)
                j->out.len = 0;
        if (wjob_add(j, b, e) < 0)
                return -1;
        if (j->phase == WALK_HEAD && j->out.len > WALK_HEAD_MAX) {
                j->phase = WALK_COUNT;
                sh_buf_done(&j->out);
        }
        return 0;
}

/* Counted within the bounds: answer with the stream, walked again from the top. */
static void wjob_stream(wjob *j, sh_request *r)
{
        sh_buf_done(&j->out);
        if (wjob_begin(j, WALK_STREAM, &j->s.rj.ss.b) < 0) {
                os_reply_err(r, &j->e);
                return;
        }
        sh_request_job_stream(&j->s.rj, WALK_BLOCK, "application/json");
}

/* The head's or the count's walk is over (k 0) or failed (k < 0, j->e filled): the answer. */
static int wjob_answer(wjob *j, int k)
{
        sh_request *r = sh_request_job_request(&j->s.rj);

        if (k == 0 && j->phase == WALK_COUNT) {
                wjob_stream(j, r);
        } else if (k == 0 && sh_buf_append(&j->out, "]", 1) == 0) {
                j->s.rj.ss.b = j->out; /* the answer, whole */
                j->out = (sh_buf){0};
                return sh_request_job_whole(&j->s.rj, "application/json");
        } else {
                if (k == 0)
                        os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
                os_reply_err(r, &j->e);
        }
        return sh_request_job_done(&j->s.rj);
}

/* The stream's walk is over (k 0) or failed (k < 0, j->e filled): its end, or its cut. */
static int wjob_stream_end(wjob *j, int k)
{
        if (k == 0 && sh_buf_append(&j->s.rj.ss.b, "]", 1) == 0) {
                j->s.rj.ss.ended = true;
                return SH_LOOP_JOB_DONE;
        }
        if (k == 0)
                os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        /* The 200 is gone: the client sees a cut stream, never a short list. */
        log_warn("listing-cut", sh_request_log_id(sh_pending_request(j->s.rj.ss.tok)),
                 "the answer below '%s' was cut after %" PRIu64 " entries: %s", j->shown, j->count,
                 j->e.message);
        j->s.rj.cut = true;
        return SH_LOOP_JOB_DONE;
}

/* One walker step of this pass, its entry into the answer: the head and the count answer once
 * the walk is over, from the loop; the stream pauses once the slice made what the transport
 * asked for. */
static int wjob_step(void *data)
{
        wjob *j = data;
        sh_error *err = NULL;
        sh_fs_entry e;
        int k = sh_fs_walk_next(j->w, &e, &err);

        if (k < 0)
                wjob_failed(j, err);
        else if (k == 1 && wjob_entry(j, &e) < 0)
                k = -1;
        sh_error_release(&err);
        if (k > 0)
                return j->phase == WALK_STREAM && j->s.rj.ss.b.len >= j->s.rj.want
                               ? SH_LOOP_JOB_PAUSE
                               : 1;
        return j->phase == WALK_STREAM ? wjob_stream_end(j, k) : wjob_answer(j, k);
}

static const sh_pending_ops wjob_ops = {
        .gone = fjob_gone, .release = wjob_release, .read = fjob_read};

/* The directory to walk: `path` itself must be a directory (a link there is a 400, as execd),
 * readable by the sandbox's uid. */
static int walk_top(fctx *f, const char *p, const char *shown, os_err *e)
{
        _cleanup_close_ int fd = -1;
        struct statx s;

        if ((fd = f_open(f, p, O_PATH | O_NOFOLLOW, &s, shown, "list", e)) < 0)
                return -1;
        if (S_ISLNK(s.stx_mode))
                return os_err_set(e, 400, OS_BAD_BODY,
                                  "'%s' is a link: pass the directory it names", shown);
        if (!S_ISDIR(s.stx_mode))
                return fail(e, ENOTDIR, shown, "list");
        if (!may(f, fd, &s, OS_MAY_READ | OS_MAY_EXEC))
                return fail(e, EACCES, shown, "list");
        return TAKE_FD(fd);
}

static void run_walk(sh_request *r, const char *pattern, unsigned depth)
{
        const sh_query_param *q = query_one(r, "path");
        _cleanup_free_ char *p = NULL;
        wjob *j;

        if (!q) {
                os_reply_error(r, 400, OS_MISSING, "missing query parameter 'path'");
                return;
        }
        j = calloc(1, sizeof(*j));
        if (!j || (pattern && !(j->pattern = strdup(pattern))) || !(j->shown = strdup(q->val))) {
                if (j)
                        free(j->pattern);
                free(j);
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        j->f.root = j->top = -1;
        if (fctx_init(r, &j->f) < 0) {
                wjob_release(j);
                return;
        }
        j->max = os_ctx_of(r)->cfg->listing_max;
        j->o = (sh_fs_walk_opts){
                .all = !pattern,
                .max_depth = depth,
                .pattern = j->pattern,
                .pattern_path = pattern && strchr(pattern, '/'),
                .may_enter = walk_may_enter,
                .data = &j->f,
                .held_max = WALK_HELD_MAX,
        };
        read_maps(&j->f); /* once, before the walk: the names of every entry */
        if (!(p = sb_path(q->val, q->val_len, &j->e)) ||
            (j->top = walk_top(&j->f, p, q->val, &j->e)) < 0 ||
            wjob_begin(j, WALK_HEAD, &j->out) < 0) {
                os_reply_err(r, &j->e);
                wjob_release(j);
                return;
        }
        /* the walk needs no more of the sandbox's root than the top directory */
        j->f.root = j->f.fs.root = sh_close(j->f.root);
        if (!fjob_start(&j->s, r, &wjob_ops, wjob_step, "walk"))
                wjob_release(j);
}

static void api_list(sh_request *r)
{
        uint64_t depth;
        bool has;

        if (query_uint(r, "depth", &depth, &has) < 0)
                return;
        if (!has || depth == 0)
                depth = 1;
        if (depth > WALK_DEPTH_MAX)
                depth = WALK_DEPTH_MAX;
        run_walk(r, NULL, (unsigned)depth);
}

static void api_search(sh_request *r)
{
        const sh_query_param *pat = query_one(r, "pattern");
        const char *pattern = pat && pat->val_len ? pat->val : "**";

        if (pat && memchr(pat->val, '\0', pat->val_len)) {
                os_reply_error(r, 400, OS_BAD_BODY, "the pattern holds a NUL byte");
                return;
        }
        run_walk(r, pattern, WALK_DEPTH_MAX);
}

/* ---- creating: mkdir -p, atomic files ------------------------------------------------------- */

/* May the sandbox's uid make an entry in directory fd (sh_safe_mkdir's may_create): what the
 * guard asks of a directory entered, and its bits allow writing it too. */
static int may_create(void *data, int dirfd)
{
        struct statx s;
        int r;

        if ((r = dir_guard(data, dirfd)) < 0 || (r = fstatx(dirfd, &s)) < 0)
                return r;
        return may(data, dirfd, &s, OS_MAY_WRITE | OS_MAY_EXEC) ? 0 : -denied(dirfd);
}

/* mkdir -p `path` below the root (sh_fs_mkdir_p_at: one walk, every directory entered checked
 * by dir_guard, each missing level made in a directory the sandbox's uid may write); `path`
 * itself (when made) owned by *own with `mode`, as mkdir -p -m. An fd of the directory, or -1
 * with e filled. */
static int f_mkdir_p(fctx *f, const char *path, mode_t mode, const sh_fs_owner *own,
                     const char *shown, os_err *e)
{
        _cleanup_close_ int fd = -1;
        sh_error *err = NULL;

        fd = sh_fs_mkdir_p_at(&f->fs, path, mode, own, &err);
        if (fd < 0 && !f->kfs && (err->errnum == ENOTDIR || err->errnum == EEXIST)) {
                sh_error_release(&err);
                return os_err_set(e, 400, OS_BAD_BODY,
                                  "mkdir: '%s': a component is not a directory", shown);
        }
        if (fd < 0)
                return f_fail(f, &err, shown, "mkdir", e);
        if (kernel_fs(fd))
                return refused_kernel_fs(e, shown);
        return TAKE_FD(fd);
}

/* ---- the trash: what a replace or a delete leaves (sh/trash.h) ----------------------------- */

/* The sandbox's workspace as its processes see it: a bind mount of its own, on which no trash is
 * (the trash is beside the workspace, on the daemon's mount of the same filesystem). */
#define OS_WORKSPACE "/workspace"

/* A replace or a delete in the sandbox's directory *pfd (checked by the caller) drops the last
 * reference to what it replaces or removes, and freeing a big file takes its filesystem a
 * while: on the daemon's loop, never. So the work goes through the daemon's own view of that
 * directory (the same inode, found through the daemon's fd of the workspace: sh_fs_view_dir),
 * on whose mount the sandbox's trash is (f->trash, opened once): what is left moves there, and
 * a remover frees it. f->fs's `trash`: *pfd that view now and *ret_trashfd the trash; or -1 when
 * *pfd is not in the workspace (its /tmp: a tmpfs of at most min(256 MiB, memory/2): 256 MiB
 * frees in 36-52 ms here, in place); or -errno: the sandbox is gone or its workspace not
 * available (f->view), or the directory kept moving (EAGAIN: 503). */
static int f_trash(void *data, int *pfd, int *ret_trashfd)
{
        fctx *f = data;
        _cleanup_close_ int ws = -1;
        sh_error *err = NULL;
        int fd = -ESTALE;

        *ret_trashfd = -1;
        if (sh_sandbox_deleted(f->sb)) {
                f->view = 404;
                return -ECANCELED;
        }
        ws = sh_sandbox_open_workspace(f->sb, &err);
        if (ws < 0) {
                f->view = sh_error_kind_of(err) == SH_E_SANDBOX_NOT_FOUND ? 404 : 503;
                snprintf(f->view_msg, sizeof(f->view_msg), "%s",
                         err && err->msg ? err->msg : "not available");
                sh_error_release(&err);
                return -ECANCELED;
        }
        /* a rename of one of its parents between the look-up and the check: look again */
        for (int i = 0; i < 4 && fd == -ESTALE; i++)
                fd = sh_fs_view_dir(ws, OS_WORKSPACE, *pfd);
        if (fd == -EXDEV)
                return 0;
        if (fd < 0)
                return fd == -ESTALE ? -EAGAIN : fd;
        if (!f->trash_open) {
                f->trash = sh_sandbox_open_trash(f->sb, &err);
                if (f->trash < 0) {
                        log_warn("trash-unavailable", sh_sandbox_id(f->sb), "%s: freed in place",
                                 err && err->msg ? err->msg : "");
                        sh_error_release(&err);
                        sh_close(fd);
                        return 0;
                }
                f->trash_open = true;
        }
        sh_close(*pfd);
        *pfd = fd;
        *ret_trashfd = f->trash;
        return 0;
}

/* k (sh/trash.h) > 0: the trash holds something for the sandbox's remover, which the answer
 * waits for (f_answer, job_answer): a delete or a replace is answered once the space is free
 * again, as when the daemon freed it itself, and its remover runs once for the request. */
static void f_trashed(fctx *f, int k)
{
        if (k > 0)
                f->trashed = true;
}

static void f_reply(sh_request *r, unsigned status, cJSON *body)
{
        if (body)
                os_reply_json(r, status, body);
        else
                os_reply_empty(r, status);
}

/* The answer of a handler (status, body taken: NULL is empty), given once what the request moved
 * into the trash is removed: through a token of its own. */
typedef struct tanswer {
        sh_trash_waiter w; /* first: done is given it */
        sh_pending *tok;
        unsigned status;
        cJSON *body;
} tanswer;

static void tanswer_done(sh_trash_waiter *w)
{
        tanswer *a = (tanswer *)w;
        sh_request *r = sh_pending_request(a->tok);

        if (r)
                f_reply(r, a->status, TAKE_PTR(a->body));
        sh_pending_release(TAKE_PTR(a->tok));
}

static void tanswer_gone(void *data)
{
        tanswer *a = data;

        sh_manager_trash_unwait(&a->w);
        sh_pending_release(TAKE_PTR(a->tok));
}

static void tanswer_release(void *data)
{
        tanswer *a = data;

        cJSON_Delete(a->body);
        free(a);
}

static const sh_pending_ops tanswer_ops = {.gone = tanswer_gone, .release = tanswer_release};

static void f_answer(fctx *f, sh_request *r, unsigned status, cJSON *body)
{
        tanswer *a = f->trashed ? calloc(1, sizeof(*a)) : NULL;

        if (a) {
                a->w.done = tanswer_done;
                a->status = status;
                a->body = TAKE_PTR(body);
                if (sh_manager_trash_wait(f->mgr, f->sb, &a->w)) {
                        f->trashed = false; /* its remover runs */
                        if ((a->tok = sh_request_wait(r, &tanswer_ops, a)))
                                return;
                        sh_manager_trash_unwait(&a->w);
                }
                body = TAKE_PTR(a->body);
                free(a);
        }
        f_reply(r, status, body);
}

static void job_answer_done(sh_trash_waiter *w)
{
        fjob *s = (fjob *)((char *)w - offsetof(fjob, w));
        sh_request *r = sh_request_job_request(&s->rj);

        if (r)
                f_reply(r, s->status, TAKE_PTR(s->body));
        sh_request_job_done(&s->rj);
}

/* The same for a job of the loop (fjob), through the job's own token: now, or once the trash
 * is removed (fjob_gone stops the wait). Returns SH_LOOP_JOB_DONE, for the step that answered. */
static int job_answer(fctx *f, fjob *s, unsigned status, cJSON *body)
{
        s->w.done = job_answer_done;
        s->status = status;
        s->body = body;
        if (f->trashed && sh_manager_trash_wait(f->mgr, f->sb, &s->w)) {
                f->trashed = false;
                return SH_LOOP_JOB_DONE;
        }
        f_reply(sh_request_job_request(&s->rj), status, TAKE_PTR(s->body));
        return sh_request_job_done(&s->rj);
}

/* An unnamed file (O_TMPFILE, sh_fs_upload) beside `base` in the checked directory, linked in
 * over it at commit, through the daemon's view of the directory when it is the workspace's
 * (f_trash): the old file goes into the trash. Given up, it is freed off the loop when big. */
typedef struct tmpf {
        fctx *f;
        sh_fs_upload *u;
        int pfd, trash; /* trash: f's, or -1 (in place) */
} tmpf;

static void tmpfile_done(tmpf *t)
{
        if (t->u)
                sh_manager_discard_unnamed(t->f->mgr, t->f->sb,
                                           sh_fs_upload_take_fd(TAKE_PTR(t->u)));
        t->pfd = sh_close(t->pfd);
}

/* pfd (taken): the directory, checked writable by the sandbox. */
static int tmpfile_begin(tmpf *t, fctx *f, int pfd, const char *shown, const char *what, os_err *e)
{
        sh_error *err = NULL;
        int r;

        *t = (tmpf){.f = f, .pfd = pfd, .trash = -1};
        if ((r = sh_fs_trash_of(&f->fs, &t->pfd, &t->trash)) < 0)
                sh_error_make(&err, -r, "view");
        else if (sh_fs_upload_begin(t->pfd, &t->u, &err) < 0)
                what = "create";
        if (!err)
                return 0;
        tmpfile_done(t);
        return f_fail(f, &err, shown, what, e);
}

/* Owner and mode while still unnamed, then in over base (sh_fs_upload_commit_at): readers see
 * the old file or the new one, never a mix; a link at base is replaced, never written through
 * (rename never follows). Only while the sandbox lives: the check and the rename run in one turn
 * of the loop, which no delete comes between, so nothing is ever written into a deleted
 * sandbox's tree (its trash, being removed). */
static int tmpfile_commit(tmpf *t, const char *base, const sh_fs_owner *own, mode_t mode,
                          const char *shown, os_err *e)
{
        sh_error *err = NULL;
        int k;

        if (sh_sandbox_deleted(t->f->sb))
                return gone(e);
        k = sh_fs_upload_commit_at(t->u, t->pfd, base, own, mode, t->trash, &err);
        if (k < 0)
                return f_fail(t->f, &err, shown, "write", e);
        f_trashed(t->f, k);
        sh_fs_upload_abort(TAKE_PTR(t->u), -1); /* named now: its blocks are the file's */
        return 0;
}

/* ---- POST /files/upload (multipart through a body sink) ---------------------------------------- */

typedef struct upload {
        fctx f;
        sh_mp *mp;
        uint64_t max, seen;
        os_err e;
        bool failed;
        enum { U_META_NEXT = 0, U_IN_META, U_FILE_NEXT, U_IN_FILE, U_OTHER } st;
        sh_buf meta;
        unsigned pairs;
        /* the pair being written */
        char *shown;
        char *path;
        const char *base;
        sh_fs_owner own;
        mode_t mode;
        tmpf t;
} upload;

static void upload_free(upload *u)
{
        if (!u)
                return;
        tmpfile_done(&u->t); /* an unnamed file: nothing is left behind */
        sh_buf_done(&u->meta);
        sh_mp_free(u->mp);
        free(u->shown);
        free(u->path);
        fctx_done(&u->f);
        free(u);
}

/* The metadata part is in: {path, owner?, group?, mode?}; the file's parents are made and its
 * unnamed file opened, ready for the file part. */
static int upload_meta(upload *u)
{
        cJSON *j, *path;
        _cleanup_close_ int pfd = -1;
        size_t mlen = u->meta.len;
        const char *why;
        int r = -1;

        if (sh_buf_append(&u->meta, "", 1) < 0)
                return os_err_set(&u->e, 500, OS_RUNTIME, "out of memory");
        /* as every /v1 JSON body: a NUL in the path would cut it */
        j = sh_json_parse_text(u->meta.p, &mlen, 0, &why);
        u->meta.len = 0;
        path = j ? cJSON_GetObjectItemCaseSensitive(j, "path") : NULL;
        if (!cJSON_IsObject(j) || !cJSON_IsString(path) || !*path->valuestring) {
                os_err_set(&u->e, 400, "INVALID_FILE_METADATA",
                           "the metadata part is JSON {path, owner?, group?, mode?}");
                goto out;
        }
        free(u->shown);
        free(u->path);
        u->path = NULL;
        if (!(u->shown = strdup(path->valuestring))) {
                os_err_set(&u->e, 500, OS_RUNTIME, "out of memory");
                goto out;
        }
        if (!(u->path = sb_path(u->shown, strlen(u->shown), &u->e)) ||
            resolve_id(&u->f, cJSON_GetObjectItemCaseSensitive(j, "owner"), false, &u->own.uid,
                       &u->e) < 0 ||
            resolve_id(&u->f, cJSON_GetObjectItemCaseSensitive(j, "group"), true, &u->own.gid,
                       &u->e) < 0 ||
            parse_mode(cJSON_GetObjectItemCaseSensitive(j, "mode"), &u->mode, &u->e) < 0)
                goto out;
        if (!u->mode)
                u->mode = 0644;
        if (!*u->path) {
                fail(&u->e, EISDIR, u->shown, "upload");
                goto out;
        }
        /* parents: the sandbox's own, 0755; the last checked writable by the sandbox */
        pfd = f_parent_p(&u->f, u->path, &u->base, u->shown, "upload", &u->e);
        if (pfd < 0)
                goto out;
        if (tmpfile_begin(&u->t, &u->f, TAKE_FD(pfd), u->shown, "upload", &u->e) < 0)
                goto out;
        r = 0;
out:
        cJSON_Delete(j);
        return r;
}

/* What the parser tells the upload, in order: a part begins (p: its name), some of its data, its
 * end. < 0 with u->e filled refuses the body. */
typedef enum { UP_BEGIN, UP_DATA, UP_END } upload_ev;

static int upload_event(void *data, upload_ev ev, const char *p, size_t n)
{
        upload *u = data;
        int r;

        switch (ev) {
        case UP_BEGIN:
                if (STREQ(p, "metadata")) {
                        if (u->st == U_FILE_NEXT)
                                return os_err_set(&u->e, 400, "INVALID_FILE_METADATA",
                                                  "two metadata parts in a row: each is followed "
                                                  "by its file part");
                        u->st = U_IN_META;
                        u->meta.len = 0;
                } else if (STREQ(p, "file")) {
                        if (u->st != U_FILE_NEXT)
                                return os_err_set(
                                        &u->e, 400, "INVALID_FILE_METADATA",
                                        "a file part without its metadata part before it");
                        u->st = U_IN_FILE;
                } else {
                        u->st = u->st == U_FILE_NEXT ? U_FILE_NEXT : U_OTHER;
                        if (u->st == U_FILE_NEXT)
                                return os_err_set(&u->e, 400, "INVALID_FILE_METADATA",
                                                  "the part after a metadata part is its file");
                }
                return 0;
        case UP_DATA:
                if (u->st == U_IN_META) {
                        if (u->meta.len + n > METADATA_MAX)
                                return os_err_set(&u->e, 400, "INVALID_FILE_METADATA",
                                                  "a metadata part is at most %u bytes",
                                                  METADATA_MAX);
                        if (sh_buf_append(&u->meta, p, n) < 0)
                                return os_err_set(&u->e, 500, OS_RUNTIME, "out of memory");
                } else if (u->st == U_IN_FILE) {
                        sh_error *err = NULL;

                        if (sh_fs_upload_write(u->t.u, p, n, &err) < 0)
                                return f_fail(&u->f, &err, u->shown, "upload", &u->e);
                }
                return 0;
        case UP_END:
                if (u->st == U_IN_META) {
                        if (upload_meta(u) < 0)
                                return -1;
                        u->st = U_FILE_NEXT;
                } else if (u->st == U_IN_FILE) {
                        r = tmpfile_commit(&u->t, u->base, &u->own, u->mode, u->shown, &u->e);
                        tmpfile_done(&u->t);
                        if (r < 0)
                                return -1;
                        u->pairs++;
                        u->st = U_META_NEXT;
                } else {
                        u->st = U_META_NEXT;
                }
                return 0;
        }
        return 0;
}

/* The parser's callbacks. A refusal of upload_event stops the parse: its answer is u->e, the
 * sh_error only carries the stop back through sh_mp_feed. */
static int upload_stop(const upload *u, sh_error **err)
{
        return sh_error_new(err, u->e.status >= 500 ? SH_E_INTERNAL : SH_E_INVALID, "%s",
                            u->e.message);
}

static int upload_part_begin(void *data, const sh_mp_part *part, sh_error **err)
{
        return upload_event(data, UP_BEGIN, part->name, strlen(part->name)) < 0
                       ? upload_stop(data, err)
                       : 0;
}

static int upload_part_data(void *data, const char *p, size_t n, sh_error **err)
{
        return upload_event(data, UP_DATA, p, n) < 0 ? upload_stop(data, err) : 0;
}

static int upload_part_end(void *data, sh_error **err)
{
        return upload_event(data, UP_END, NULL, 0) < 0 ? upload_stop(data, err) : 0;
}

static const sh_mp_callbacks upload_parts = {.part_begin = upload_part_begin,
                                             .part_data = upload_part_data,
                                             .part_end = upload_part_end};

static int upload_begin(sh_request *r, void **state)
{
        const char *ct = sh_request_header(r, "Content-Type");
        char boundary[SH_MP_BOUNDARY_MAX + 1];
        _cleanup_error_ sh_error *err = NULL;
        upload *u;

        *state = NULL;
        if (sh_mp_boundary(ct, boundary, &err) < 0) {
                os_reply_error(r, 400, OS_BAD_BODY, "%s",
                               err ? err->msg : "the body is multipart/form-data with a boundary");
                return -1;
        }
        u = calloc(1, sizeof(*u));
        if (!u) {
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return -1;
        }
        u->t.pfd = -1;
        u->max = os_ctx_of(r)->cfg->upload_max;
        /* a declared body over the bound is refused before any byte is read */
        if (sh_request_declared_over(r, u->max)) {
                free(u);
                os_reply_error(r, 413, OS_BAD_BODY, "the upload is over %" PRIu64 " bytes",
                               os_ctx_of(r)->cfg->upload_max);
                return -1;
        }
        if (fctx_init(r, &u->f) < 0) {
                free(u);
                return -1;
        }
        if (sh_mp_new(ct, &upload_parts, u, &u->mp, &err) < 0) {
                upload_free(u);
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return -1;
        }
        *state = u;
        return 0;
}

static int upload_data(sh_request *r, void *state, const char *p, size_t n)
{
        upload *u = state;
        _cleanup_error_ sh_error *err = NULL;

        if (u->failed)
                return -1;
        u->seen += n;
        if (u->seen > u->max) {
                os_err_set(&u->e, 413, OS_BAD_BODY, "the upload is over %" PRIu64 " bytes", u->max);
                u->failed = true;
                tmpfile_done(&u->t);
                return -1;
        }
        /* Deleted while the body comes: nothing more is written, nothing lands, 404. */
        if (sh_sandbox_deleted(u->f.sb)) {
                gone(&u->e);
                u->failed = true;
                tmpfile_done(&u->t);
                return -1;
        }
        if (sh_mp_feed(u->mp, p, n, &err) < 0) {
                /* the parser's own refusal (a refusal of upload_event is in u->e already) */
                if (!u->e.status)
                        os_err_set(&u->e, 400, OS_BAD_BODY, "%s",
                                   err ? err->msg : "the body is not multipart/form-data");
                u->failed = true;
                tmpfile_done(&u->t);
                return -1;
        }
        return 0;
}

static int upload_end(sh_request *r, void *state)
{
        upload *u = state;
        _cleanup_error_ sh_error *err = NULL;

        /* a cut body (no closing delimiter) or one without any boundary */
        if (!u->failed && sh_mp_finish(u->mp, &err) < 0)
                os_err_set(&u->e, 400, OS_BAD_BODY, "%s",
                           err ? err->msg : "the multipart body is cut");
        else if (!u->failed && u->st == U_FILE_NEXT)
                os_err_set(&u->e, 400, "INVALID_FILE_METADATA",
                           "a metadata part without its file part");
        else if (!u->failed && u->pairs == 0)
                os_err_set(&u->e, 400, "INVALID_FILE_METADATA", "no metadata and file parts");
        else if (!u->failed && sh_sandbox_deleted(u->f.sb))
                gone(&u->e); /* what it wrote before the delete went with the sandbox */
        else if (!u->failed)
                return 0;
        tmpfile_done(&u->t);
        os_reply_err(r, &u->e);
        return -1;
}

static void upload_abort(sh_request *r, void *state)
{
        upload_free(state);
}

static const sh_body_sink upload_sink = {
        .begin = upload_begin, .data = upload_data, .end = upload_end, .abort = upload_abort};

static void api_upload(sh_request *r)
{
        upload *u = sh_request_sink_state(r);

        f_answer(&u->f, r, 200, NULL);
}

/* ---- DELETE /files ------------------------------------------------------------------------------ */

static void api_delete_files(sh_request *r)
{
        _cleanup_(fctx_done) fctx f = {.root = -1};
        const sh_query_param *ps[PATHS_MAX];
        size_t n = query_paths(r, ps, PATHS_MAX);
        os_err e;

        if (n == 0) {
                os_reply_error(r, 400, OS_MISSING, "missing query parameter 'path'");
                return;
        }
        if (fctx_init(r, &f) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *p = sb_path(ps[i]->val, ps[i]->val_len, &e);
                sh_error *err = NULL;
                int k;

                if (p && !*p) {
                        f_parent(&f, p, NULL, ps[i]->val, "delete", &e);
                        os_reply_err(r, &e);
                        return;
                }
                /* the entry itself, never what a link names, into the trash (f_trash); a
                 * directory swapped in meanwhile is refused (put back) */
                k = p ? sh_fs_unlink_file(&f.fs, p, &err) : -1;
                if (k < 0 && err && err->errnum == EISDIR && !f.kfs && !f.view) {
                        sh_error_release(&err);
                        os_reply_error(r, 400, OS_BAD_BODY,
                                       "'%s' is a directory: DELETE /directories removes it",
                                       ps[i]->val);
                        return;
                }
                if (k < 0 && p)
                        f_fail(&f, &err, ps[i]->val, "delete", &e);
                if (k < 0 && e.status == 404 && !STREQ(e.code, "SANDBOX_NOT_FOUND"))
                        continue; /* absent is fine */
                if (k < 0) {
                        os_reply_err(r, &e);
                        return;
                }
                f_trashed(&f, k);
        }
        f_answer(&f, r, 200, NULL);
}

/* ---- many-path requests: info, permissions, mv, directories ---------------------------------- */

/* A request of many paths is a job of the loop too (fjob): its entries are done in order, one a
 * step, each step charged the lookup steps its entry used, so a slice takes them up until it
 * has used SH_LOOP_JOB_STEPS lookup steps or SH_LOOP_JOB_NS, then the loop serves everyone
 * else. All its lookups together draw from a request's budget (SH_SAFE_REQUEST_STEPS) and each
 * lookup from its own bound (SH_SAFE_LOOKUP_STEPS), so one slice costs at most the steps of one
 * slice and one entry, and the whole request at most its budget. The first entry refused is the
 * answer. */
typedef struct pjob pjob;
struct pjob {
        fjob s; /* first */
        fctx f;
        cJSON *body;       /* permissions, mv, directories: the body, done entry by entry */
        const cJSON *next; /* its next entry */
        size_t qi, taken;  /* info: the next query parameter looked at, the paths taken */
        cJSON *out;        /* info: the answer so far (NULL: an empty 200 at the end) */
        /* One entry: 1 done (more may follow), 0 none left, -1 refused with e filled. */
        int (*entry)(pjob *j, sh_request *r);
        os_err e;
};

static void pjob_gone(void *data)
{
        fjob_gone(data);
}

static void pjob_release(void *data)
{
        pjob *j = data;

        cJSON_Delete(j->body);
        cJSON_Delete(j->out);
        fctx_done(&j->f);
        free(j);
}

static const sh_pending_ops pjob_ops = {.gone = pjob_gone, .release = pjob_release};

/* One entry: charged the lookup steps it took (at least one). */
static int pjob_step(void *data)
{
        pjob *j = data;
        sh_request *r = sh_request_job_request(&j->s.rj);
        uint64_t left = j->f.budget.left;
        int more = j->entry(j, r);

        if (more > 0)
                return left - j->f.budget.left > 1 ? (int)(left - j->f.budget.left) : 1;
        if (more < 0)
                os_reply_err(r, &j->e);
        else if (j->out)
                os_reply_json(r, 200, TAKE_PTR(j->out));
        else
                os_reply_empty(r, 200);
        return sh_request_job_done(&j->s.rj);
}

/* Run `entry` over the body's entries (body and out taken; both NULL for none) from the loop. */
static void pjob_run(sh_request *r, cJSON *body, cJSON *out, int (*entry)(pjob *, sh_request *))
{
        pjob *j = calloc(1, sizeof(*j));

        if (!j) {
                cJSON_Delete(body);
                cJSON_Delete(out);
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        j->body = body;
        j->next = body ? body->child : NULL;
        j->out = out;
        j->entry = entry;
        if (fctx_init(r, &j->f) < 0) {
                pjob_release(j);
                return;
        }
        j->f.budget.left = SH_SAFE_REQUEST_STEPS;
        if (!fjob_start(&j->s, r, &pjob_ops, pjob_step, "request"))
                pjob_release(j);
}

/* A body of at most PATHS_MAX entries, or a 400 naming the bound (the body is then freed). */
static bool body_bounded(sh_request *r, cJSON *body)
{
        if (cJSON_GetArraySize(body) <= PATHS_MAX)
                return true;
        cJSON_Delete(body);
        os_reply_error(r, 400, OS_BAD_BODY, "a body holds at most %u entries", PATHS_MAX);
        return false;
}

/* ---- GET /files/info ---------------------------------------------------------------------------- */

/* The next `path=` of the query (the first PATHS_MAX of them), as info_entry takes them. */
static const sh_query_param *next_query_path(pjob *j, sh_request *r)
{
        const sh_query *q = sh_request_query(r);

        while (q && j->qi < q->n && j->taken < PATHS_MAX) {
                const sh_query_param *qp = &q->v[j->qi++];

                if (STREQ(qp->key, "path")) {
                        j->taken++;
                        return qp;
                }
        }
        return NULL;
}

static int info_entry(pjob *j, sh_request *r)
{
        const sh_query_param *qp = next_query_path(j, r);
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -1;
        struct statx s;
        cJSON *fi;

        if (!qp)
                return 0;
        /* the entry itself: a link is shown as a link, never followed */
        if (!(p = sb_path(qp->val, qp->val_len, &j->e)) ||
            (fd = f_open(&j->f, p, O_PATH | O_NOFOLLOW, &s, qp->val, "info", &j->e)) < 0)
                return -1;
        if (cJSON_GetObjectItemCaseSensitive(j->out, qp->val))
                return 1; /* asked twice: one answer */
        fi = file_info(&j->f, qp->val, &s);
        if (!fi || !cJSON_AddItemToObject(j->out, qp->val, fi)) {
                cJSON_Delete(fi);
                return os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        }
        return 1;
}

static void api_info(sh_request *r)
{
        const sh_query_param *ps[1];
        cJSON *out;

        if (query_paths(r, ps, 1) == 0) {
                os_reply_error(r, 400, OS_MISSING, "missing query parameter 'path'");
                return;
        }
        if (!(out = cJSON_CreateObject())) {
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        pjob_run(r, NULL, out, info_entry);
}

/* ---- POST /files/permissions -------------------------------------------------------------------- */

/* {owner?, group?, mode?} on the entry at p (links followed inside the root, as chmod(1)):
 * only on the sandbox's own entries. */
static int set_perm(fctx *f, const char *p, const char *shown, const cJSON *perm, os_err *e)
{
        _cleanup_close_ int fd = -1;
        const cJSON *owner = cJSON_GetObjectItemCaseSensitive(perm, "owner");
        const cJSON *group = cJSON_GetObjectItemCaseSensitive(perm, "group");
        struct statx s;
        uint32_t uid, gid;
        mode_t mode;
        char proc[64];

        if (!cJSON_IsObject(perm))
                return os_err_set(e, 400, OS_BAD_BODY,
                                  "'%s': permissions are {owner?, group?, mode}", shown);
        if (parse_mode(cJSON_GetObjectItemCaseSensitive(perm, "mode"), &mode, e) < 0)
                return -1;
        if ((fd = f_open(f, p, O_PATH, &s, shown, "chmod", e)) < 0)
                return -1;
        if (!S_ISREG(s.stx_mode) && !S_ISDIR(s.stx_mode))
                return os_err_set(e, 400, OS_BAD_BODY, "'%s' is not a file or a directory", shown);
        if (s.stx_uid != f->uid)
                return fail(e, EPERM, shown, "chmod");
        if (resolve_id(f, owner, false, &uid, e) < 0 || resolve_id(f, group, true, &gid, e) < 0)
                return -1;
        if (!owner || cJSON_IsNull(owner))
                uid = s.stx_uid;
        if (!group || cJSON_IsNull(group))
                gid = s.stx_gid;
        /* chown first (it would clear setuid bits, never set here anyway), then the mode */
        if ((uid != s.stx_uid || gid != s.stx_gid) && fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0)
                return fail(e, errno, shown, "chown");
        if (mode) {
                /* the very inode resolved (an O_PATH fd cannot fchmod): its magic link */
                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
                if (chmod(proc, mode) < 0)
                        return fail(e, errno, shown, "chmod");
        }
        return 0;
}

static int perm_entry(pjob *j, sh_request *r)
{
        const cJSON *it = j->next;
        _cleanup_free_ char *p = NULL;

        (void)r;
        if (!it)
                return 0;
        j->next = it->next;
        if (!(p = sb_path(it->string, strlen(it->string), &j->e)) ||
            set_perm(&j->f, p, it->string, it, &j->e) < 0)
                return -1;
        return 1;
}

static void api_permissions(sh_request *r)
{
        bool empty;
        cJSON *body = os_json_body(r, OS_BAD_BODY, &empty);

        if (!body && !empty)
                return;
        if (!cJSON_IsObject(body)) {
                cJSON_Delete(body);
                os_reply_error(r, 400, OS_BAD_BODY, "the body is {path: {owner?, group?, mode}}");
                return;
        }
        if (body_bounded(r, body))
                pjob_run(r, body, NULL, perm_entry);
}

/* ---- POST /files/mv ------------------------------------------------------------------------------ */

/* The names themselves (sh_fs_rename): links at either end are moved, never followed; the
 * destination's parents are made (the sandbox's own); an existing destination is an error
 * (NOREPLACE), never clobbered. */
static int move_one(fctx *f, const char *src_shown, const char *dst_shown, os_err *e)
{
        _cleanup_free_ char *src = sb_path(src_shown, strlen(src_shown), e), *dst = NULL;
        sh_error *err = NULL;
        bool at_src;

        if (!src || !(dst = sb_path(dst_shown, strlen(dst_shown), e)))
                return -1;
        if (!*src)
                return f_parent(f, src, NULL, src_shown, "move", e);
        if (sh_fs_rename(&f->fs, src, dst, SH_FS_NOREPLACE, &at_src, &err) == 0)
                return 0;
        if (!at_src && !f->kfs && err && err->errnum == ENOTDIR) {
                sh_error_release(&err);
                return os_err_set(e, 400, OS_BAD_BODY,
                                  "mkdir: '%s': a component is not a directory", dst_shown);
        }
        return f_fail(f, &err, at_src ? src_shown : dst_shown, "move", e);
}

static int move_entry(pjob *j, sh_request *r)
{
        const cJSON *it = j->next;

        (void)r;
        if (!it)
                return 0;
        j->next = it->next;
        return move_one(&j->f, cJSON_GetObjectItemCaseSensitive(it, "src")->valuestring,
                        cJSON_GetObjectItemCaseSensitive(it, "dest")->valuestring, &j->e) < 0
                       ? -1
                       : 1;
}

static void api_move(sh_request *r)
{
        bool empty;
        cJSON *body = os_json_body(r, OS_BAD_BODY, &empty), *it;

        if (!body && !empty)
                return;
        if (!cJSON_IsArray(body)) {
                cJSON_Delete(body);
                os_reply_error(r, 400, OS_BAD_BODY, "the body is a list of {src, dest}");
                return;
        }
        if (!body_bounded(r, body))
                return;
        /* every entry's shape before any is moved */
        cJSON_ArrayForEach(it, body)
        {
                const cJSON *s = cJSON_GetObjectItemCaseSensitive(it, "src");
                const cJSON *d = cJSON_GetObjectItemCaseSensitive(it, "dest");

                if (!cJSON_IsString(s) || !cJSON_IsString(d)) {
                        cJSON_Delete(body);
                        os_reply_error(r, 400, OS_BAD_BODY, "each move is {src, dest}");
                        return;
                }
        }
        pjob_run(r, body, NULL, move_entry);
}

/* ---- POST /files/replace ----------------------------------------------------------------------- */

/* POST /files/replace is a job of the loop, run in slices (fjob), each of its files rewritten by
 * fs/replace.c in two passes (counted first: no match, or a bound passed, and nothing is written
 * at all), the new text into an unnamed file beside it, which replaces the file at the end, its
 * owner and mode kept (tmpfile_commit: atomic, the old file into the trash). Nothing partial is
 * ever visible: a refusal, a failure or the client leaving drops the unnamed file. Bounded: the
 * file (REPLACE_MAX), what it becomes (REPLACE_MAX), its matches (REPLACE_MATCHES_MAX), the
 * paths of one request (PATHS_MAX), the memory of a job (one chunk and one output buffer beside
 * the body). */
#define REPLACE_MATCHES_MAX (1u << 20)

typedef struct xjob {
        fjob s; /* first */
        fctx f;
        cJSON *body; /* {path: {old, new}}, checked */
        cJSON *it;   /* the entry in work; NULL: every entry done */
        cJSON *out;  /* {path: {replacedCount}} so far */
        bool verbose;
        /* the file in work */
        char *path; /* below the root */
        int in;     /* the file, read */
        struct statx st;
        int pass; /* 0: not begun; 1: counting; 2: writing */
        sh_fs_replace x;
        tmpf t;
        char *base; /* its name in t.pfd */
        os_err e;
} xjob;

/* The file in work is done with (committed, or given up). */
static void xjob_file_done(xjob *j)
{
        j->in = sh_close(j->in);
        tmpfile_done(&j->t);
        sh_fs_replace_done(&j->x);
        free(TAKE_PTR(j->path));
        free(TAKE_PTR(j->base));
        j->pass = 0;
}

static void xjob_gone(void *data)
{
        fjob_gone(data);
}

static void xjob_release(void *data)
{
        xjob *j = data;

        xjob_file_done(j);
        cJSON_Delete(j->body);
        cJSON_Delete(j->out);
        fctx_done(&j->f);
        free(j);
}

static const sh_pending_ops xjob_ops = {.gone = xjob_gone, .release = xjob_release};

/* A step of fs/replace.c that failed (k < 0): why, as execd's answer. -1. */
static int xjob_failed(xjob *j, int k)
{
        const char *shown = j->it->string;

        switch (j->x.refused) {
        case SH_FS_REPLACE_OVER:
                return os_err_set(&j->e, 400, OS_BAD_BODY, "'%s' is over %u MiB: not rewritten",
                                  shown, REPLACE_MAX >> 20);
        case SH_FS_REPLACE_GROWS:
                return os_err_set(&j->e, 400, OS_BAD_BODY,
                                  "'%s' would grow over %u MiB: not rewritten", shown,
                                  REPLACE_MAX >> 20);
        case SH_FS_REPLACE_MATCHES:
                return os_err_set(&j->e, 400, OS_BAD_BODY,
                                  "'%s' holds more than %u matches: not rewritten", shown,
                                  REPLACE_MATCHES_MAX);
        case SH_FS_REPLACE_OK:
                break;
        }
        if (k == -ENOMEM)
                return os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        return fail(&j->e, -k, shown, "replace");
}

/* A pass begins: from the start of the file (2: into the unnamed file). */
static int xjob_pass(xjob *j, int pass)
{
        int k = sh_fs_replace_pass(&j->x, pass == 2 ? sh_fs_upload_fd(j->t.u) : -1);

        if (k < 0)
                return fail(&j->e, -k, j->it->string, "replace");
        j->pass = pass;
        return 0;
}

/* The next entry's file opened (readable by the sandbox, at most REPLACE_MAX) for its first
 * pass. -1 with j->e filled. */
static int xjob_open(xjob *j)
{
        const char *shown = j->it->string;
        const char *old = cJSON_GetObjectItemCaseSensitive(j->it, "old")->valuestring;
        const char *new = cJSON_GetObjectItemCaseSensitive(j->it, "new")->valuestring;

        j->t = (tmpf){.pfd = -1, .trash = -1};
        if (!(j->path = sb_path(shown, strlen(shown), &j->e)) ||
            (j->in = f_open_read(&j->f, j->path, shown, &j->st, &j->e)) < 0)
                return -1;
        if (!S_ISREG(j->st.stx_mode))
                return os_err_set(&j->e, 400, OS_BAD_BODY, "'%s' is not a regular file", shown);
        if (j->st.stx_size > REPLACE_MAX)
                return os_err_set(&j->e, 400, OS_BAD_BODY, "'%s' is over %u MiB: not rewritten",
                                  shown, REPLACE_MAX >> 20);
        if (sh_fs_replace_init(&j->x, j->in, old, strlen(old), new, strlen(new), REPLACE_MAX,
                               REPLACE_MATCHES_MAX) < 0)
                return os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        return xjob_pass(j, 1);
}

/* Counted matches: the second pass begins, into an unnamed file beside the file (its
 * directory checked writable by the sandbox). -1 with j->e filled. */
static int xjob_begin_writing(xjob *j)
{
        const char *shown = j->it->string, *base;
        int pfd;

        if ((pfd = f_parent(&j->f, j->path, &base, shown, "replace", &j->e)) < 0)
                return -1;
        if (!(j->base = strdup(base))) {
                sh_close(pfd);
                return os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        }
        if (tmpfile_begin(&j->t, &j->f, pfd, shown, "replace", &j->e) < 0)
                return -1;
        return xjob_pass(j, 2);
}

/* The file is rewritten: in over its old self, unless that was replaced meanwhile (then nothing
 * changes: 503, try again). -1 with j->e filled. */
static int xjob_commit(xjob *j)
{
        const char *shown = j->it->string;
        struct stat now, was;

        if (fstat(j->in, &was) < 0 || fstatat(j->t.pfd, j->base, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
            now.st_ino != was.st_ino || now.st_dev != was.st_dev)
                return fail(&j->e, EAGAIN, shown, "replace");
        /* its owner and mode kept (never a setuid, setgid or sticky bit) */
        return tmpfile_commit(&j->t, j->base, &(sh_fs_owner){j->st.stx_uid, j->st.stx_gid},
                              j->st.stx_mode & 0777, shown, &j->e);
}

/* The entry's result, and on to the next. -1 with j->e filled. */
static int xjob_next(xjob *j, uint64_t count)
{
        cJSON *res = cJSON_AddObjectToObject(j->out, j->it->string);

        xjob_file_done(j);
        if (!res || !cJSON_AddNumberToObject(res, "replacedCount", (double)count))
                return os_err_set(&j->e, 500, OS_RUNTIME, "out of memory");
        j->it = j->it->next;
        return 0;
}

/* The job's work between two looks at the clock: 1 while there is more; 0 when every entry is
 * done; -1 refused (j->e). */
static int xjob_work(xjob *j)
{
        uint64_t count;
        int k;

        if (!j->it)
                return 0;
        if (j->pass == 0)
                return xjob_open(j) < 0 ? -1 : 1;
        if ((k = sh_fs_replace_step(&j->x)) > 0)
                return 1;
        if (k < 0)
                return xjob_failed(j, k);
        if (j->pass == 1 && j->x.count == 0)
                return xjob_next(j, 0) < 0 ? -1 : 1; /* nothing to rewrite */
        if (j->pass == 1)
                return xjob_begin_writing(j) < 0 ? -1 : 1;
        count = j->x.count;
        k = xjob_commit(j);
        return k < 0 || xjob_next(j, count) < 0 ? -1 : 1;
}

static int xjob_job_step(void *data)
{
        xjob *j = data;
        int k = xjob_work(j);

        if (k > 0)
                return 1;
        if (k == 0)
                return job_answer(&j->f, &j->s, 200, j->verbose ? TAKE_PTR(j->out) : NULL);
        os_reply_err(sh_request_job_request(&j->s.rj), &j->e);
        return sh_request_job_done(&j->s.rj);
}

static void api_replace(sh_request *r)
{
        const sh_query_param *v = query_one(r, "verbose");
        bool empty;
        cJSON *body = os_json_body(r, OS_BAD_BODY, &empty), *it;
        size_t n = 0;
        xjob *j;

        if (!body && !empty)
                return;
        if (!cJSON_IsObject(body)) {
                cJSON_Delete(body);
                os_reply_error(r, 400, OS_BAD_BODY, "the body is {path: {old, new}}");
                return;
        }
        cJSON_ArrayForEach(it, body)
        {
                const cJSON *o = cJSON_GetObjectItemCaseSensitive(it, "old");
                const cJSON *nw = cJSON_GetObjectItemCaseSensitive(it, "new");

                if (!cJSON_IsString(o) || !*o->valuestring || !cJSON_IsString(nw)) {
                        cJSON_Delete(body);
                        os_reply_error(r, 400, OS_BAD_BODY,
                                       "each replacement is {old: non-empty text, new: text}");
                        return;
                }
                if (++n > PATHS_MAX) {
                        cJSON_Delete(body);
                        os_reply_error(r, 400, OS_BAD_BODY, "at most %u paths per request",
                                       PATHS_MAX);
                        return;
                }
        }
        j = calloc(1, sizeof(*j));
        if (!j || !(j->out = cJSON_CreateObject())) {
                free(j);
                cJSON_Delete(body);
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        j->body = body;
        j->it = body->child;
        j->in = -1;
        j->t = (tmpf){.pfd = -1, .trash = -1};
        j->verbose = v && (STREQ(v->val, "true") || STREQ(v->val, "1"));
        j->f.root = -1;
        if (fctx_init(r, &j->f) < 0) {
                xjob_release(j);
                return;
        }
        j->f.budget.left = SH_SAFE_REQUEST_STEPS; /* one file opened a slice */
        if (!fjob_start(&j->s, r, &xjob_ops, xjob_job_step, "replacement"))
                xjob_release(j);
}

/* ---- POST /directories, DELETE /directories --------------------------------------------------- */

static int mkdirs_entry(pjob *j, sh_request *r)
{
        const cJSON *it = j->next;
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -1;
        uint32_t uid, gid;
        mode_t mode;

        (void)r;
        if (!it)
                return 0;
        j->next = it->next;
        if (!(p = sb_path(it->string, strlen(it->string), &j->e)))
                return -1;
        if (!cJSON_IsObject(it))
                return os_err_set(&j->e, 400, OS_BAD_BODY,
                                  "'%s': permissions are {owner?, group?, mode}", it->string);
        if (parse_mode(cJSON_GetObjectItemCaseSensitive(it, "mode"), &mode, &j->e) < 0 ||
            resolve_id(&j->f, cJSON_GetObjectItemCaseSensitive(it, "owner"), false, &uid, &j->e) <
                    0 ||
            resolve_id(&j->f, cJSON_GetObjectItemCaseSensitive(it, "group"), true, &gid, &j->e) <
                    0 ||
            (fd = f_mkdir_p(&j->f, p, mode ? mode : 0755, &(sh_fs_owner){uid, gid}, it->string,
                            &j->e)) < 0)
                return -1;
        return 1;
}

static void api_mkdirs(sh_request *r)
{
        bool empty;
        cJSON *body = os_json_body(r, OS_BAD_BODY, &empty);

        if (!body && !empty)
                return;
        if (!cJSON_IsObject(body)) {
                cJSON_Delete(body);
                os_reply_error(r, 400, OS_BAD_BODY, "the body is {path: {owner?, group?, mode}}");
                return;
        }
        if (body_bounded(r, body))
                pjob_run(r, body, NULL, mkdirs_entry);
}

/* DELETE /directories: every path is checked before anything is removed. A directory of the
 * workspace is moved into the sandbox's trash at once (f_trash: through the daemon's view of its
 * parent) and removed there by the sandbox's remover, off the loop: none of its files is freed
 * here, however big. One elsewhere (its /tmp, a tmpfs) is a job of the loop (fjob): removed in
 * slices by the tree remover a step at a time (sh_fs_remover: depth first, never following a
 * link, a bounded number of directories open however deep the tree, kernel filesystems never
 * entered), keeping going past what cannot be removed and answering the first error. */
typedef struct rtop {
        int pfd; /* its parent, checked writable by the sandbox */
        char *base, *shown;
        bool trash; /* pfd is the daemon's view (f_trash): into the trash */
} rtop;

typedef struct rjob {
        fjob s; /* first */
        fctx f; /* its trash, and the sandbox its remover works for */
        rtop *tops;
        size_t ntops, itop; /* itop: the one being removed */
        sh_fs_remover *rm;  /* itop's, removed in place */
        int first_err;
        size_t err_top; /* the path first_err belongs to */
        os_err e;
} rjob;

static void rjob_gone(void *data)
{
        fjob_gone(data);
}

static void rjob_release(void *data)
{
        rjob *j = data;

        sh_fs_remover_free(j->rm);
        for (size_t i = 0; i < j->ntops; i++) {
                sh_close(j->tops[i].pfd);
                free(j->tops[i].base);
                free(j->tops[i].shown);
        }
        free(j->tops);
        fctx_done(&j->f);
        free(j);
}

static const sh_pending_ops rjob_ops = {.gone = rjob_gone, .release = rjob_release};

static void rjob_error(rjob *j, int errnum)
{
        if (!j->first_err && errnum && errnum != ENOENT) {
                j->first_err = errnum;
                j->err_top = j->itop;
        }
}

/* Kernel filesystems are never entered (never below a sandbox's writable directory; refused
 * anyway). */
static bool remove_may_enter(void *data, int fd)
{
        (void)data;
        return !kernel_fs(fd);
}

/* One step: a step of the path's remover, or the next path begun (into the trash at once, or
 * its remover made). Returns false when every path is done. */
static bool rjob_step(rjob *j)
{
        rtop *t = &j->tops[j->itop];
        sh_error *err = NULL;
        int k;

        if (j->rm) {
                if (sh_fs_remover_step(j->rm))
                        return true;
                rjob_error(j, sh_fs_remover_errno(j->rm));
                j->rm = sh_fs_remover_free(j->rm);
                j->itop++;
                return true;
        }
        if (j->itop == j->ntops)
                return false;
        if (t->trash) {
                k = sh_fs_trash_entry(t->pfd, t->base, true, j->f.trash, &err);
                if (k < 0)
                        rjob_error(j, err ? err->errnum : EIO);
                sh_error_release(&err);
                f_trashed(&j->f, k);
                j->itop++;
                return true;
        }
        if ((k = sh_fs_remover_new(t->pfd, t->base, remove_may_enter, NULL, &j->rm)) < 0) {
                rjob_error(j, -k);
                j->itop++;
        }
        return true;
}

static int rjob_job_step(void *data)
{
        rjob *j = data;

        if (rjob_step(j))
                return 1;
        if (!j->first_err)
                return job_answer(&j->f, &j->s, 200, NULL);
        fail(&j->e, j->first_err, j->tops[j->err_top].shown, "delete");
        os_reply_err(sh_request_job_request(&j->s.rj), &j->e);
        return sh_request_job_done(&j->s.rj);
}

static void api_rmdirs(sh_request *r)
{
        const sh_query_param *ps[PATHS_MAX];
        size_t n = query_paths(r, ps, PATHS_MAX);
        rjob *j;
        fctx *f;
        os_err e;

        if (n == 0) {
                os_reply_error(r, 400, OS_MISSING, "missing query parameter 'path'");
                return;
        }
        j = calloc(1, sizeof(*j));
        if (!j || !(j->tops = calloc(n, sizeof(*j->tops)))) {
                free(j);
                os_reply_error(r, 500, OS_RUNTIME, "out of memory");
                return;
        }
        f = &j->f;
        f->root = -1;
        if (fctx_init(r, f) < 0) {
                rjob_release(j);
                return;
        }
        /* every path checked before anything is removed */
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *p = sb_path(ps[i]->val, ps[i]->val_len, &e);
                _cleanup_close_ int pfd = -1;
                sh_error *err = NULL;
                const char *base;
                struct stat st;
                int trashfd, k;
                rtop *t;

                if (!p || (!*p && f_parent(f, p, NULL, ps[i]->val, "delete", &e) < 0))
                        goto refuse;
                if ((pfd = sh_fs_open_entry(&f->fs, p, &base, &st, &err)) < 0) {
                        if (f_fail(f, &err, ps[i]->val, "delete", &e) < 0 && e.status == 404)
                                continue; /* absent is fine */
                        goto refuse;
                }
                if (!S_ISDIR(st.st_mode)) {
                        os_err_set(&e, 400, OS_BAD_BODY,
                                   "'%s' is not a directory: DELETE /files removes it", ps[i]->val);
                        goto refuse;
                }
                if ((k = sh_fs_trash_of(&f->fs, &pfd, &trashfd)) < 0) {
                        sh_error_make(&err, -k, "view");
                        f_fail(f, &err, ps[i]->val, "delete", &e);
                        goto refuse;
                }
                t = &j->tops[j->ntops];
                t->trash = trashfd >= 0;
                if (!(t->base = strdup(base)) || !(t->shown = strdup(ps[i]->val))) {
                        free(t->base);
                        os_err_set(&e, 500, OS_RUNTIME, "out of memory");
                        goto refuse;
                }
                t->pfd = TAKE_FD(pfd);
                j->ntops++;
        }
        if (!fjob_start(&j->s, r, &rjob_ops, rjob_job_step, "removal"))
                rjob_release(j);
        return;
refuse:
        rjob_release(j);
        os_reply_err(r, &e);
}

/* ---- routes ----------------------------------------------------------------------------------- */

const sh_route os_files_routes[] = {
        {OS_EXECD_PATH "/files/info", SH_M_GET, NULL, api_info, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/info", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files", SH_M_DELETE, NULL, api_delete_files, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files", OS_EXECD_METHODS, NULL, os_execd_wrong_method, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/permissions", SH_M_POST, &sh_body_buffer, api_permissions,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/permissions", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/mv", SH_M_POST, &sh_body_buffer, api_move, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/mv", OS_EXECD_METHODS, NULL, os_execd_wrong_method, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/search", SH_M_GET, NULL, api_search, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/search", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/replace", SH_M_POST, &sh_body_buffer, api_replace, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/replace", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/upload", SH_M_POST, &upload_sink, api_upload, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/upload", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/download", SH_M_GET, NULL, api_download, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/files/download", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/directories/list", SH_M_GET, NULL, api_list, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/directories/list", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/directories", SH_M_POST, &sh_body_buffer, api_mkdirs, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/directories", SH_M_DELETE, NULL, api_rmdirs, OS_EXECD_FLAGS},
        {OS_EXECD_PATH "/directories", OS_EXECD_METHODS, NULL, os_execd_wrong_method,
         OS_EXECD_FLAGS},
};
const size_t os_files_n_routes = ARRAY_SIZE(os_files_routes);
