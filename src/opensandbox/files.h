/* files.h: what the files of the execd file routes share (files.c: the sandbox's side and its uid
 * rules, errors, paths, ids, modes and FileInfo, the jobs of the loop; files_read.c: download,
 * listings and searches, info; files_write.c: the upload; files_change.c: deletes, permissions,
 * mv, replace, directories). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "access.h"
#include "execd.h"
#include "mode.h"
#include "sh/passwd.h"
#include "sh/fsops.h"
#include "sh/fsprobe.h"
#include "sh/replace.h"

#define WALK_DEPTH_MAX   64          /* directory levels a listing or search descends */
#define WALK_ENTRIES_MAX 200000      /* entries one listing or search answers */
#define REPLACE_MAX      (64u << 20) /* a file /files/replace rewrites */
#define PATHS_MAX        1024        /* paths of one request (query or body) */
#define METADATA_MAX     (64u << 10) /* one metadata part of an upload */

/* A request's view of its sandbox: its root, its uid, the policy its fs operations take (the
 * guard of every lookup and the uid rules, the trash view), the image's names. */
typedef struct fctx {
        int root; /* the sandbox's root (sh_sandbox_open_root: ours, closed by fctx_done) */
        uid_t uid;
        gid_t gid;
        gid_t vol_gid;    /* the volumes' group, its processes' one supplementary group; 0: none */
        uint64_t id_base; /* ids from here up are the sandboxes' own: only its own may be given */
        sh_safe_guard guard;   /* every directory a lookup passes through */
        sh_safe_budget budget; /* the steps all the request's lookups draw from (the guard's) */
        sh_fs_ctx fs;
        bool kfs;                 /* the last lookup was refused at a kernel filesystem */
        sh_sandbox_trash_view tv; /* the sandbox's trash, reached from its view */
        bool maps_read;
        sh_idmap users, groups;
        sh_manager *mgr;
        sh_sandbox *sb; /* a reference: the request's record lets its sandbox go on a delete */
        bool trashed;   /* something waits in the trash: the answer waits for its removal */
} fctx;

/* The request's sandbox and its root, or a reply (-1). */
int fctx_init(sh_request *r, fctx *f);
void fctx_done(fctx *f);

/* The uid rules (docs/security.md "The OpenSandbox file API"): may the sandbox's uid have `want`
 * (OS_MAY_*) on the entry of fd, whose statx is *s. */
bool f_may(const fctx *f, int fd, const struct statx *s, unsigned want);

/* execd's answer (e filled) for an errno of `what` on the path as shown; a kernel filesystem
 * refused; the sandbox deleted; a failed fs operation (err taken); the same where a missing
 * parent was to be made (a non-directory on the way is named so). Each returns -1. */
int f_error(os_err *e, int errnum, const char *shown, const char *what);
int f_refused_kfs(os_err *e, const char *shown);
int f_gone(os_err *e);
int f_fail(fctx *f, sh_error **err, const char *shown, const char *what, os_err *e);
int f_fail_mkdir(fctx *f, sh_error **err, const char *shown, const char *what, os_err *e);

/* The sandbox's path `raw` (n bytes: absolute, `~`, or relative to the workspace) below its root
 * ("" for "/"), or NULL with e filled. */
char *f_path(const char *raw, size_t n, os_err *e);
/* `path` opened with `flags`, never on a kernel filesystem, *s its statx; its parent (O_PATH;
 * missing ones made first when `make`, the sandbox's own, 0755), checked writable by the sandbox
 * (may_change), *base its last component. An fd, or -1 with e filled. */
int f_open(fctx *f, const char *path, int flags, struct statx *s, const char *shown,
           const char *what, os_err *e);
int f_parent(fctx *f, const char *path, bool make, const char **base, const char *shown,
             const char *what, os_err *e);

/* The image's names (read once a request); {owner?, group?, mode?} of `o` as what the sandbox
 * may give (an owner or a group absent: its own; a mode absent or 0: *mode 0; mode NULL: not
 * looked at); a mode; an entry's FileInfo. */
void f_read_maps(fctx *f);
int f_perms(fctx *f, const cJSON *o, sh_fs_owner *own, mode_t *mode, os_err *e);
int f_parse_mode(const cJSON *v, mode_t *ret, os_err *e);
cJSON *f_file_info(fctx *f, const char *shown, const struct statx *s);

/* The query's first `path=` (or NULL and a 400 MISSING_QUERY), a whole number (a reply when
 * not). */
const sh_query_param *f_query_path(sh_request *r);
int f_query_uint(sh_request *r, const char *key, uint64_t *ret, bool *present);

/* k > 0 (sh/trash.h): the trash holds something of the request's, which its answer waits for.
 * The answer (status, body taken: NULL is empty) of a handler (rj NULL) or of a job's step (the
 * job is then done: the step returns SH_LOOP_JOB_DONE), now or once that is removed. */
void f_trashed(fctx *f, int k);
void f_answer(fctx *f, sh_request *r, sh_request_job *rj, unsigned status, cJSON *body);

/* A request of many paths: its entries done one a step, each step charged its lookup steps. */
typedef struct f_pjob f_pjob;
struct f_pjob {
        sh_request_job rj; /* first */
        fctx f;
        cJSON *body;       /* permissions, mv, directories: the body, done entry by entry */
        const cJSON *next; /* its next entry */
        size_t qi, taken;  /* info, delete: the next query parameter looked at, the paths taken */
        cJSON *out;        /* info, replace: the answer so far (NULL: an empty 200 at the end) */
        sh_fs_replace_file x; /* replace: the entry's file in work (x_open) */
        bool x_open;
        /* One entry: 1 done (more may follow), 0 none left, -1 refused with e filled. */
        int (*entry)(f_pjob *j);
        os_err e;
};

/* Run `entry` over the body's entries (body and out taken; both NULL for none) from the loop; the
 * same for a request's body of entries ({path: entry}, or a list), each of which `ok` passes
 * (NULL: each is checked as it is done), else a 400 (`shape`, the bound, or `each`; out freed);
 * such an entry's next (f_pjob_next: NULL at the end, j->body when its path is refused, *p its
 * path below the root). A replace's file in work done with: f_pjob_file_done. */
void f_pjob_run(sh_request *r, cJSON *body, cJSON *out, int (*entry)(f_pjob *));
void f_pjob_body(sh_request *r, bool list, const char *shape, const char *each,
                 bool (*ok)(const cJSON *), cJSON *out, int (*entry)(f_pjob *));
const cJSON *f_pjob_next(f_pjob *j, char **p);
/* info, DELETE /files: the query's next `path=` (of its first PATHS_MAX), NULL at the end. */
const sh_query_param *f_pjob_next_path(f_pjob *j);
void f_pjob_file_done(f_pjob *j);

/* ---- the handlers ------------------------------------------------------------------------- */

void os_files_download(sh_request *r); /* files_read.c */
void os_files_list(sh_request *r);
void os_files_search(sh_request *r);
void os_files_info(sh_request *r);
extern const sh_body_sink os_files_upload_sink; /* files_write.c */
void os_files_upload(sh_request *r);
void os_files_delete(sh_request *r); /* files_change.c */
void os_files_permissions(sh_request *r);
void os_files_move(sh_request *r);
void os_files_replace(sh_request *r);
void os_files_mkdirs(sh_request *r);
void os_files_rmdirs(sh_request *r);
