/* snapshot.c: the snapshots' jobs on the persister (sh/snapstore.h): a snapshot taken (a new
 * Creating record, then the persister's frozen, confined copy of the sandbox's workspace into
 * {root}/{id}/; at its end Ready, or Failed with why and its partial tree dropped), a snapshot
 * removed (its record, then its tree), every tree moved into {root}/.trash removed by the
 * manager's confined remover (a sandbox wrote it: the daemon never walks it itself), and the
 * store opened where the settings say. */
#include "sh/snapstore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "persist-internal.h"
#include "sh/log.h"
#include "sh/persist.h"

/* One copy in progress (sh_snapshot.job): it knows its snapshot by id, which a Creating
 * snapshot keeps (its delete is refused). */
typedef struct copy_job {
        sh_persister *p;
        sh_snapstore *st;
        char id[SH_SNAP_ID_LEN + 1];
} copy_job;

static void tree_moved(sh_snapstore *st, const char *trash_name, void *data)
{
        sh_error *err = NULL;

        if (sh_manager_remove_trashed(data, sh_snapstore_trash_dir(st), trash_name, &err) < 0)
                log_warn("snapshot-remove-failed", NULL, "'%s/%s/%s': %s, ignoring",
                         sh_snapstore_root(st), SH_SNAP_TRASH, trash_name,
                         err && err->msg ? err->msg : "");
        sh_error_release(&err);
}

int sh_snapstore_copy_end(sh_snapstore *st, sh_snapshot *s, const sh_error *cerr,
                          sh_snap_moved_fn moved, void *data, sh_error **err)
{
        const char *msg = cerr && cerr->msg ? cerr->msg : "the copy failed";
        sh_error_kind kind = sh_error_kind_of(cerr);

        s->job = NULL;
        if (!cerr) {
                log_info("snapshot-ready", s->sandbox_id, "snapshot %s is ready", s->id);
                return sh_snapstore_set_state(st, s, SH_SNAP_READY, "snapshot_ready",
                                              "the workspace is copied", err);
        }
        log_warn("snapshot-failed", s->sandbox_id, "snapshot %s: %s", s->id, msg);
        /* the sandbox deleted meanwhile; the daemon shutting down; the copy itself */
        if (sh_snapstore_set_state(st, s, SH_SNAP_FAILED,
                                   kind == SH_E_SANDBOX_NOT_FOUND ? "sandbox_deleted"
                                   : kind == SH_E_UNAVAILABLE     ? "snapshot_interrupted"
                                                                  : "snapshot_capture_failed",
                                   msg, err) < 0)
                return -1;
        /* What the copy left is no snapshot: its tree goes, its record says why. */
        return sh_snapstore_drop_tree(st, s, moved, data, err);
}

static void copy_done(sh_sandbox *sb, const sh_error *err, void *data)
{
        copy_job *j = data;
        sh_snapshot *s = sh_snapstore_get(j->st, j->id, SH_SNAP_ID_LEN);
        sh_error *werr = NULL;

        (void)sb;
        /* s is there: a Creating snapshot is never deleted */
        if (s &&
            sh_snapstore_copy_end(j->st, s, err, tree_moved, sh_persister_manager(j->p), &werr) < 0)
                log_warn("snapshot-store-failed", NULL, "snapshot %s: %s", j->id,
                         werr && werr->msg ? werr->msg : "out of memory");
        sh_error_release(&werr);
        free(j);
}

int sh_snapshot_take(sh_persister *p, sh_snapstore *st, sh_sandbox *sb, const char *name,
                     const cJSON *entrypoint, sh_snapshot **ret, sh_error **err)
{
        copy_job *j = calloc(1, sizeof(*j));
        sh_error *cerr = NULL;
        sh_snapshot *s;

        if (!j)
                return sh_error_make(err, ENOMEM, "out of memory");
        if (sh_snapstore_add(st, sh_sandbox_id(sb), name, entrypoint, &s, err) < 0) {
                free(j);
                return -1;
        }
        j->p = p;
        j->st = st;
        memcpy(j->id, s->id, sizeof(j->id));
        /* The workspace only (not /tmp, not the image), frozen while it is read, by the same
         * confined rsync as a persist. */
        if (sh_persist_save_to(p, sb, sh_snapstore_root(st), s->id, copy_done, j, &cerr) < 0) {
                sh_error_new(err, SH_E_INTERNAL, "cannot start the copy: %s",
                             cerr && cerr->msg ? cerr->msg : "");
                sh_error_release(&cerr);
                free(j);
                (void)sh_snapshot_remove(p, st, s, &cerr);
                sh_error_release(&cerr);
                return -1;
        }
        s->job = j;
        *ret = s;
        return 0;
}

int sh_snapshot_remove(sh_persister *p, sh_snapstore *st, sh_snapshot *s, sh_error **err)
{
        return sh_snapstore_remove(st, s, tree_moved, sh_persister_manager(p), err);
}

int sh_snapshots_open(sh_persister *p, sh_snapstore **ret, sh_error **err)
{
        sh_manager *m = sh_persister_manager(p);
        const sh_config *cfg = sh_manager_config(m);
        _cleanup_free_ char *root = NULL;
        sh_error *rerr = NULL;
        int k;

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
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        if (sh_snapstore_open(root, sh_manager_loop(m), sh_manager_pod_token(m), ret, err) < 0)
                return -1;
        if (sh_snapstore_count(*ret))
                log_info("snapshots", NULL, "%u snapshot(s) in '%s'", sh_snapstore_count(*ret),
                         root);
        /* What deletes of an earlier run left in the trash goes, in a confined child (which
         * opens the trash itself; none yet: nothing to do). */
        if (sh_manager_remove_trashed(m, sh_snapstore_trash_dir(*ret), NULL, &rerr) < 0)
                log_warn("snapshot-remove-failed", NULL, "'%s/%s': %s, ignoring", root,
                         SH_SNAP_TRASH, rerr && rerr->msg ? rerr->msg : "");
        sh_error_release(&rerr);
        return 0;
}
