/* snapstore.c: the snapshot records (sh/snapstore.h): in memory, read from {root} at start,
 * written by a child. */
#include "sh/snapstore.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sh/log.h"
#include "sh/macro.h"
#include "sh/random.h"
#include "sh/spawn.h"
#include "sh/waiter.h"
#include "sh/syscalls.h"

#define RECORD_VERSION 1
#define BATCH_MAX      256  /* writes one child makes: its results always fit the pipe */
#define WRITER_WAIT_MS 3000 /* at shutdown, how long the running writer is waited for */
#define MAX_SAFE_MS    ((uint64_t)1 << 53) /* a time a JSON number holds exactly */

/* ---- pure: ids, states, names -------------------------------------------------- */

static const char *const state_names[] = {"Creating", "Ready", "Failed"};

bool sh_snap_id_valid(const char *s, size_t len)
{
        size_t p = sizeof(SH_SNAP_PREFIX) - 1;

        return len == SH_SNAP_ID_LEN && memcmp(s, SH_SNAP_PREFIX, p) == 0 &&
               sh_remote_id_valid(s + p, len - p);
}

const char *sh_snap_state_name(sh_snap_state s)
{
        return (unsigned)s < ARRAY_SIZE(state_names) ? state_names[s] : "Failed";
}

int sh_snap_state_parse(const char *s)
{
        for (size_t i = 0; i < ARRAY_SIZE(state_names); i++)
                if (STREQ(s, state_names[i]))
                        return (int)i;
        return -1;
}

/* Valid UTF-8 of 1..max bytes without control characters (a name or a message is shown to
 * people and written into JSON files). */
static bool text_valid(const char *s, size_t len, size_t max)
{
        if (len == 0 || len > max || !sh_utf8_valid(s, len))
                return false;
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        return false;
        return true;
}

bool sh_snap_name_valid(const char *s, size_t len)
{
        return text_valid(s, len, SH_SNAP_NAME_MAX);
}

void sh_snapshot_free(sh_snapshot *s)
{
        if (!s)
                return;
        free(s->name);
        free(s->reason);
        free(s->message);
        cJSON_Delete(s->entrypoint);
        free(s);
}

/* ---- pure: records -------------------------------------------------------------------- */

static void json_freep(cJSON **o)
{
        cJSON_Delete(*o);
}

cJSON *sh_snap_record(const sh_snapshot *s)
{
        cJSON *o = cJSON_CreateObject();

        if (!o)
                return NULL;
        if (!cJSON_AddNumberToObject(o, "version", RECORD_VERSION) ||
            !cJSON_AddStringToObject(o, "id", s->id) ||
            !cJSON_AddStringToObject(o, "sandboxId", s->sandbox_id) ||
            (s->name && !cJSON_AddStringToObject(o, "name", s->name)) ||
            !cJSON_AddStringToObject(o, "state", sh_snap_state_name(s->state)) ||
            !cJSON_AddStringToObject(o, "reason", s->reason ? s->reason : "") ||
            (s->message && !cJSON_AddStringToObject(o, "message", s->message)) ||
            !cJSON_AddNumberToObject(o, "createdAtMs", (double)s->created_ms) ||
            !cJSON_AddNumberToObject(o, "lastTransitionAtMs", (double)s->transition_ms)) {
                cJSON_Delete(o);
                return NULL;
        }
        if (s->entrypoint) {
                cJSON *ep = cJSON_Duplicate(s->entrypoint, true);

                if (!ep || !cJSON_AddItemToObject(o, "entrypoint", ep)) {
                        cJSON_Delete(ep);
                        cJSON_Delete(o);
                        return NULL;
                }
        }
        return o;
}

/* An entrypoint worth keeping: 1..SH_SNAP_ENTRY_ARGS strings of UTF-8, at most
 * SH_SNAP_ENTRY_MAX bytes as JSON (counted at their worst escaping). */
static bool entry_valid(const cJSON *ep)
{
        const cJSON *v;
        size_t bytes = 2;
        int n = 0;

        if (!cJSON_IsArray(ep))
                return false;
        cJSON_ArrayForEach(v, ep)
        {
                if (!cJSON_IsString(v) || !v->valuestring || ++n > SH_SNAP_ENTRY_ARGS)
                        return false;
                bytes += 6 * strlen(v->valuestring) + 3;
                if (bytes > SH_SNAP_ENTRY_MAX ||
                    !sh_utf8_valid(v->valuestring, strlen(v->valuestring)))
                        return false;
        }
        return n > 0;
}

/* A string member of at most max bytes of clean text; absent is NULL when optional. */
static int get_text(const cJSON *o, const char *key, size_t max, bool optional, const char **ret,
                    sh_error **err)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        *ret = NULL;
        if (!v && optional)
                return 0;
        if (!cJSON_IsString(v) || !v->valuestring)
                return sh_error_new(err, SH_E_INVALID, "'%s' is not a string", key);
        /* an empty reason is allowed (text_valid wants one byte at least) */
        if (v->valuestring[0] && !text_valid(v->valuestring, strlen(v->valuestring), max))
                return sh_error_new(err, SH_E_INVALID, "'%s' is not valid text", key);
        *ret = v->valuestring;
        return 0;
}

static int get_ms(const cJSON *o, const char *key, uint64_t *ret, sh_error **err)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        double d;

        if (!cJSON_IsNumber(v))
                return sh_error_new(err, SH_E_INVALID, "'%s' is not a number", key);
        d = v->valuedouble;
        if (!(d >= 0) || d > (double)MAX_SAFE_MS || d != (double)(uint64_t)d)
                return sh_error_new(err, SH_E_INVALID, "'%s' is not a time", key);
        *ret = (uint64_t)d;
        return 0;
}

static int dup_opt(const char *s, char **ret)
{
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int sh_snap_parse_record(const char *text, size_t len, const char *file_id, sh_snapshot **ret,
                         sh_error **err)
{
        _cleanup_(json_freep) cJSON *o = NULL;
        const char *id, *sbid, *name, *state, *reason, *message;
        const cJSON *ver, *ep;
        sh_snapshot *s;
        int st;

        if (len > SH_SNAP_RECORD_MAX)
                return sh_error_new(err, SH_E_INVALID, "larger than %d bytes", SH_SNAP_RECORD_MAX);
        o = cJSON_ParseWithLength(text, len);
        if (!cJSON_IsObject(o))
                return sh_error_new(err, SH_E_INVALID, "not a JSON object");
        ver = cJSON_GetObjectItemCaseSensitive(o, "version");
        if (!cJSON_IsNumber(ver) || ver->valuedouble != RECORD_VERSION)
                return sh_error_new(err, SH_E_INVALID, "unknown record version");
        if (get_text(o, "id", SH_SNAP_ID_LEN, false, &id, err) < 0 ||
            get_text(o, "sandboxId", SH_ID_LEN, false, &sbid, err) < 0 ||
            get_text(o, "name", SH_SNAP_NAME_MAX, true, &name, err) < 0 ||
            get_text(o, "state", 16, false, &state, err) < 0 ||
            get_text(o, "reason", SH_SNAP_TEXT_MAX, false, &reason, err) < 0 ||
            get_text(o, "message", SH_SNAP_TEXT_MAX, true, &message, err) < 0)
                return -1;
        /* The file's name is the only place a path comes from, and it must be the id. */
        if (!sh_snap_id_valid(id, strlen(id)) || !STREQ(id, file_id))
                return sh_error_new(err, SH_E_INVALID, "the id is not the file's name");
        if (!sh_remote_id_valid(sbid, strlen(sbid)))
                return sh_error_new(err, SH_E_INVALID, "invalid sandboxId");
        if (name && !sh_snap_name_valid(name, strlen(name)))
                return sh_error_new(err, SH_E_INVALID, "invalid name");
        st = sh_snap_state_parse(state);
        if (st < 0)
                return sh_error_new(err, SH_E_INVALID, "unknown state");
        ep = cJSON_GetObjectItemCaseSensitive(o, "entrypoint");
        if (ep && !entry_valid(ep))
                return sh_error_new(err, SH_E_INVALID, "invalid entrypoint");
        s = calloc(1, sizeof(*s));
        if (!s)
                return sh_error_make(err, ENOMEM, "out of memory");
        memcpy(s->id, id, SH_SNAP_ID_LEN + 1);
        memcpy(s->sandbox_id, sbid, SH_ID_LEN + 1);
        s->state = (sh_snap_state)st;
        if (get_ms(o, "createdAtMs", &s->created_ms, err) < 0 ||
            get_ms(o, "lastTransitionAtMs", &s->transition_ms, err) < 0) {
                sh_snapshot_free(s);
                return -1;
        }
        if (s->state == SH_SNAP_CREATING) {
                /* Its copy ended with the daemon that made it: what the tree holds is partial. */
                s->state = SH_SNAP_FAILED;
                reason = "snapshot_interrupted";
                message = "the daemon stopped before the copy ended";
        }
        if (dup_opt(name, &s->name) < 0 || dup_opt(reason, &s->reason) < 0 ||
            dup_opt(message, &s->message) < 0 ||
            (ep && !(s->entrypoint = cJSON_Duplicate(ep, true)))) {
                sh_snapshot_free(s);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        *ret = s;
        return 0;
}

/* ---- the store ------------------------------------------------------------------------ */

typedef enum { OP_WRITE, OP_TREE_TO_TRASH, OP_UNLINK } op_kind;

/* One write on disk, made by the writer child in queue order. */
typedef struct op {
        op_kind kind;
        char id[SH_SNAP_ID_LEN + 1];
        char aux[SH_SNAP_ID_LEN + 48]; /* OP_WRITE: the temporary name; TREE: the trash name */
        char *text;                    /* OP_WRITE: the record */
        size_t len;
        sh_snap_moved_fn moved;
        void *data;
        SH_LIST_FIELDS(struct op, ops);
} op;

struct sh_snapstore {
        char *root;  /* never opened by the loop after the start: the writers open it */
        char *trash; /* {root}/.trash */
        sh_loop *loop;
        sh_snapshot *snaps; /* oldest first */
        unsigned count;
        op *queue;    /* not started yet, in order */
        op *inflight; /* the running writer's */
        unsigned ninflight;
        sh_child *writer;
        int resfd; /* the writer's results: one byte per op, 0 or an errno */
        uint64_t seq;
        sh_waiter *waiters; /* told once no op is queued or running (sh_snapstore_wait) */
        char token[SH_POD_TOKEN_LEN + 1]; /* begins every id minted here */
};

static void op_free(op *o)
{
        if (!o)
                return;
        free(o->text);
        free(o);
}

/* ---- the writer (a child: the root may be NFS) ---- */

/* Make one op against rootfd and trashfd: 0 or an errno. A missing tree or record is ENOENT
 * (nothing to move or remove). */
static int op_do(const op *o, int rootfd, int trashfd)
{
        char file[SH_SNAP_ID_LEN + 8];
        size_t off = 0;
        int fd, e;

        snprintf(file, sizeof(file), "%s.json", o->id);
        switch (o->kind) {
        case OP_WRITE:
                /* A temporary file of our own (O_EXCL, never through a link), then one rename:
                 * a reader never sees half a record, a crash leaves the old one. */
                fd = openat(rootfd, o->aux, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                            0600);
                if (fd < 0)
                        return errno;
                while (off < o->len) {
                        ssize_t n = write(fd, o->text + off, o->len - off);

                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0) {
                                e = n < 0 ? errno : EIO;
                                close(fd);
                                (void)unlinkat(rootfd, o->aux, 0);
                                return e;
                        }
                        off += (size_t)n;
                }
                if (fsync(fd) < 0 || close(fd) < 0) {
                        e = errno;
                        (void)unlinkat(rootfd, o->aux, 0);
                        return e;
                }
                if (renameat(rootfd, o->aux, rootfd, file) < 0) {
                        e = errno;
                        (void)unlinkat(rootfd, o->aux, 0);
                        return e;
                }
                return 0;
        case OP_TREE_TO_TRASH:
                /* rename(2) moves the name only: nothing of the (hostile) tree is read. */
                if (trashfd < 0)
                        return EIO;
                return renameat(rootfd, o->id, trashfd, o->aux) < 0 ? errno : 0;
        case OP_UNLINK:
                return unlinkat(rootfd, file, 0) < 0 ? errno : 0;
        }
        return EINVAL;
}

/* mkdir -p of an absolute path: the components the operator named are trusted; the last one
 * is made 0700 (the snapshots are the tenants' files). */
static int mkdir_parents(const char *path, mode_t mode)
{
        _cleanup_free_ char *buf = strdup(path);

        if (!buf)
                return -ENOMEM;
        for (char *s = buf + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* The root and its trash, made when missing (the first snapshot makes them: a daemon that never
 * takes one leaves no trace in the archive root), then the ops in order; each op's result
 * through `report`. Runs in the writer child, or inline at shutdown. */
static void run_ops(const char *root, const op *ops, void (*report)(int e, void *data), void *data)
{
        int rootfd = -1, trashfd = -1, k = mkdir_parents(root, 0700);
        const op *o;

        if (k == 0) {
                rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                k = rootfd < 0 ? -errno : 0;
        }
        if (rootfd >= 0 && (mkdirat(rootfd, SH_SNAP_TRASH, 0700) == 0 || errno == EEXIST))
                trashfd = openat(rootfd, SH_SNAP_TRASH,
                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        SH_LIST_FOREACH(ops, o, ops)
                report(rootfd < 0 ? -k : op_do(o, rootfd, trashfd), data);
        sh_close(trashfd);
        sh_close(rootfd);
}

typedef struct writer_arg {
        const char *root;
        op *ops;
} writer_arg;

static void report_byte(int e, void *data)
{
        unsigned char b = (unsigned char)(e > 255 ? EIO : e);

        (void)data;
        while (write(3, &b, 1) < 0 && errno == EINTR)
                ;
}

/* fd 3: the results pipe, one byte per op. */
static int writer_main(void *arg)
{
        const writer_arg *a = arg;

        run_ops(a->root, a->ops, report_byte, NULL);
        return 0;
}

static void writer_next(sh_snapstore *st);

static void op_report(sh_snapstore *st, op *o, int e)
{
        static const char *const what[] = {"writing the record of", "moving the tree of",
                                           "removing the record of"};

        if (e == 0) {
                if (o->kind == OP_TREE_TO_TRASH && o->moved)
                        o->moved(st, o->aux, o->data);
                return;
        }
        if (e == ENOENT && o->kind != OP_WRITE)
                return; /* nothing there: nothing to do */
        log_warn("snapshot-store-failed", NULL, "%s snapshot %s in '%s': %s", what[o->kind], o->id,
                 st->root, strerror(e));
}

static void writer_done(sh_child *c, pid_t pid, int status, void *data)
{
        sh_snapstore *st = data;
        unsigned char res[BATCH_MAX];
        ssize_t n;
        size_t got = 0;
        op *o;

        st->writer = NULL;
        /* The child has exited: whatever it wrote is in the pipe (at most BATCH_MAX bytes). */
        while ((n = read(st->resfd, res + got, sizeof(res) - got)) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        break; /* EAGAIN: nothing more (a writer killed half-way) */
                got += (size_t)n;
                if (got == sizeof(res))
                        break;
        }
        st->resfd = sh_close(st->resfd);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                log_warn("snapshot-store-failed", NULL, "the record writer ended with status %d",
                         status);
        for (size_t i = 0; (o = st->inflight); i++) {
                SH_LIST_REMOVE(ops, st->inflight, o);
                op_report(st, o, i < got ? res[i] : EIO);
                op_free(o);
        }
        st->ninflight = 0;
        writer_next(st);
}

/* The batch handed to a writer that could not start: each op is told errno e. */
static void fail_inflight(sh_snapstore *st, int e)
{
        op *o;

        while ((o = st->inflight)) {
                SH_LIST_REMOVE(ops, st->inflight, o);
                op_report(st, o, e);
                op_free(o);
        }
        st->ninflight = 0;
}

/* Hand the queue (up to BATCH_MAX ops) to a new writer, unless one runs. */
static void writer_start(sh_snapstore *st);

/* The next batch's writer; none needed (or none could start): the waiters are told. */
static void writer_next(sh_snapstore *st)
{
        writer_start(st);
        if (!st->writer)
                sh_waiters_wake(&st->waiters);
}

static void writer_start(sh_snapstore *st)
{
        int fds[2] = {-1, -1};
        writer_arg a;
        op *o;

        if (st->writer || !st->queue || !st->loop)
                return;
        while ((o = st->queue) && st->ninflight < BATCH_MAX) {
                SH_LIST_REMOVE(ops, st->queue, o);
                SH_LIST_APPEND(ops, st->inflight, o);
                st->ninflight++;
        }
        /* Non-blocking: the child's few bytes always fit, and the loop never waits on it. */
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
                int e = errno;

                fail_inflight(st, e);
                return;
        }
        a.root = st->root;
        a.ops = st->inflight; /* the child's copy of our memory holds the list */
        st->writer = sh_child_fork(st->loop, fds[1], writer_main, &a, writer_done, st);
        close(fds[1]);
        if (!st->writer) {
                int e = errno;

                close(fds[0]);
                fail_inflight(st, e);
                return;
        }
        st->resfd = fds[0];
}

static int queue_op(sh_snapstore *st, op_kind kind, const sh_snapshot *s, sh_snap_moved_fn moved,
                    void *data, sh_error **err)
{
        op *o = calloc(1, sizeof(*o));

        if (!o)
                return sh_error_make(err, ENOMEM, "out of memory");
        o->kind = kind;
        memcpy(o->id, s->id, sizeof(o->id));
        o->moved = moved;
        o->data = data;
        st->seq++;
        if (kind == OP_WRITE) {
                cJSON *rec = sh_snap_record(s);

                o->text = rec ? cJSON_PrintUnformatted(rec) : NULL;
                cJSON_Delete(rec);
                if (!o->text) {
                        free(o);
                        return sh_error_make(err, ENOMEM, "out of memory");
                }
                o->len = strlen(o->text);
                /* hidden: the load skips names starting with '.' */
                snprintf(o->aux, sizeof(o->aux), ".%s.%ld.%llu.tmp", s->id, (long)getpid(),
                         (unsigned long long)st->seq);
        } else if (kind == OP_TREE_TO_TRASH) {
                /* unique among pods sharing the root: the id is random, pid and seq ours */
                snprintf(o->aux, sizeof(o->aux), "%s.%ld.%llu", s->id, (long)getpid(),
                         (unsigned long long)st->seq);
        }
        SH_LIST_APPEND(ops, st->queue, o);
        writer_next(st);
        return 0;
}

/* ---- load at start ---- */

/* Insert s keeping the list ordered by (created_ms, id); the load is the only caller that
 * inserts out of order. */
static void insert_sorted(sh_snapstore *st, sh_snapshot *s)
{
        sh_snapshot *at = NULL, *i;

        SH_LIST_FOREACH(snaps, i, st->snaps) {
                if (i->created_ms > s->created_ms ||
                    (i->created_ms == s->created_ms && strcmp(i->id, s->id) > 0))
                        break;
                at = i;
        }
        SH_LIST_INSERT_AFTER(snaps, st->snaps, at, s);
        st->count++;
}

/* Read {root}/{name} (a record file): a regular file, never through a link, never a FIFO
 * (O_NONBLOCK), at most SH_SNAP_RECORD_MAX bytes. */
static int read_record(int rootfd, const char *name, char **ret, size_t *ret_len, sh_error **err)
{
        _cleanup_close_ int fd =
                openat(rootfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        struct stat sb;
        size_t len = 0;

        if (fd < 0)
                return sh_error_make(err, errno, "open");
        if (fstat(fd, &sb) < 0)
                return sh_error_make(err, errno, "stat");
        if (!S_ISREG(sb.st_mode))
                return sh_error_new(err, SH_E_INVALID, "not a regular file");
        if (sb.st_size > SH_SNAP_RECORD_MAX)
                return sh_error_new(err, SH_E_INVALID, "larger than %d bytes", SH_SNAP_RECORD_MAX);
        buf = malloc(SH_SNAP_RECORD_MAX + 1);
        if (!buf)
                return sh_error_make(err, ENOMEM, "out of memory");
        for (;;) {
                ssize_t n = read(fd, buf + len, SH_SNAP_RECORD_MAX + 1 - len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return sh_error_make(err, errno, "read");
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len > SH_SNAP_RECORD_MAX)
                        return sh_error_new(err, SH_E_INVALID, "larger than %d bytes",
                                            SH_SNAP_RECORD_MAX);
        }
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

/* One directory entry: a record ("<id>.json") is loaded, anything else left alone. */
static void load_one(sh_snapstore *st, int rootfd, const char *name)
{
        size_t n = strlen(name);
        char id[SH_SNAP_ID_LEN + 1];
        _cleanup_free_ char *text = NULL;
        sh_error *err = NULL;
        sh_snapshot *s = NULL;
        struct stat sb;
        size_t len = 0;

        if (n != SH_SNAP_ID_LEN + 5 || !STREQ(name + SH_SNAP_ID_LEN, ".json") ||
            !sh_snap_id_valid(name, SH_SNAP_ID_LEN))
                return;
        memcpy(id, name, SH_SNAP_ID_LEN);
        id[SH_SNAP_ID_LEN] = '\0';
        if (read_record(rootfd, name, &text, &len, &err) < 0 ||
            sh_snap_parse_record(text, len, id, &s, &err) < 0) {
                log_warn("snapshot-record-skipped", NULL, "'%s/%s': %s, ignoring", st->root, name,
                         err && err->msg ? err->msg : "invalid");
                sh_error_release(&err);
                return;
        }
        /* A Ready snapshot is its tree: one that is gone (or is not a directory) cannot be
         * restored, and is not shown. */
        if (s->state == SH_SNAP_READY &&
            (fstatat(rootfd, id, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(sb.st_mode))) {
                log_warn("snapshot-record-skipped", NULL,
                         "'%s/%s': its tree '%s' is missing or not a directory, ignoring", st->root,
                         name, id);
                sh_snapshot_free(s);
                return;
        }
        if (st->count >= SH_SNAP_MAX) {
                log_warn("snapshot-record-skipped", NULL,
                         "'%s/%s': more than %d snapshots, ignoring", st->root, name, SH_SNAP_MAX);
                sh_snapshot_free(s);
                return;
        }
        insert_sorted(st, s);
}

/* Read the records of the root (blocking: at start only). A root that does not exist yet
 * holds none. */
static int load(sh_snapstore *st, sh_error **err)
{
        int rootfd = open(st->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;
        struct dirent *de;
        DIR *d;

        if (rootfd < 0 && errno == ENOENT)
                return 0;
        if (rootfd < 0)
                return sh_error_make(err, errno, "opening the snapshot root '%s'", st->root);
        fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || !(d = fdopendir(fd))) {
                int e = errno;

                sh_close(fd);
                close(rootfd);
                return sh_error_make(err, e, "listing the snapshot root '%s'", st->root);
        }
        while ((errno = 0, de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue; /* ., .., .trash and temporary files */
                load_one(st, rootfd, de->d_name);
        }
        if (errno) {
                int e = errno;

                closedir(d);
                close(rootfd);
                return sh_error_make(err, e, "listing the snapshot root '%s'", st->root);
        }
        closedir(d);
        close(rootfd);
        return 0;
}

int sh_snapstore_open(const char *root, sh_loop *loop, const char *token, sh_snapstore **ret,
                      sh_error **err)
{
        sh_snapstore *st;
        sh_error *lerr = NULL;

        if (!root || root[0] != '/')
                return sh_error_new(err, SH_E_INVALID, "the snapshot root must be absolute");
        if (!token || !sh_pod_token_valid(token, strlen(token)))
                return sh_error_new(err, SH_E_INVALID, "the pod token is not valid");
        st = calloc(1, sizeof(*st));
        if (!st)
                return sh_error_make(err, ENOMEM, "out of memory");
        st->resfd = -1;
        st->loop = loop;
        memcpy(st->token, token, SH_POD_TOKEN_LEN + 1);
        st->root = strdup(root);
        if (!st->root || asprintf(&st->trash, "%s/%s", root, SH_SNAP_TRASH) < 0) {
                st->trash = NULL;
                sh_snapstore_free(st);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        /* Snapshots are one feature of the daemon: a root it cannot read (a read-only or
         * unreachable archive) is said, not a reason not to start; its copies will fail. */
        if (load(st, &lerr) < 0)
                log_warn("snapshot-root-unreadable", NULL, "%s: no snapshot read, ignoring",
                         lerr && lerr->msg ? lerr->msg : "");
        sh_error_release(&lerr);
        *ret = st;
        return 0;
}

/* Inline at shutdown: each result goes to its op, in order. */
typedef struct inline_ctx {
        sh_snapstore *st;
        op *next;
} inline_ctx;

static void report_inline(int e, void *data)
{
        inline_ctx *c = data;

        if (!c->next)
                return;
        op_report(c->st, c->next, e);
        c->next = c->next->ops_next;
}

/* The writer that runs at shutdown is waited for (bounded), without reaping it: the loop's
 * child bookkeeping does that. */
static void wait_writer(sh_snapstore *st)
{
        pid_t pid = sh_child_pid(st->writer);
        int fd;

        sh_child_forget(st->writer);
        st->writer = NULL;
        fd = sh_pidfd_open(pid, 0);
        if (fd >= 0) {
                struct pollfd p = {.fd = fd, .events = POLLIN};

                while (poll(&p, 1, WRITER_WAIT_MS) < 0 && errno == EINTR)
                        ;
                close(fd);
        }
}

void sh_snapstore_free(sh_snapstore *st)
{
        sh_snapshot *s;
        op *o;

        if (!st)
                return;
        while (st->waiters) /* the loop has stopped: nobody is told */
                sh_waiter_cancel(st->waiters);
        if (st->writer)
                wait_writer(st);
        while ((o = st->inflight)) {
                SH_LIST_REMOVE(ops, st->inflight, o);
                op_free(o);
        }
        /* What was still queued is made now, in order (the loop has stopped: nobody waits);
         * the trash is emptied at the next start. */
        if (st->queue) {
                inline_ctx c = {.st = st, .next = st->queue};

                for (o = st->queue; o; o = o->ops_next)
                        o->moved = NULL;
                run_ops(st->root, st->queue, report_inline, &c);
        }
        while ((o = st->queue)) {
                SH_LIST_REMOVE(ops, st->queue, o);
                op_free(o);
        }
        while ((s = st->snaps)) {
                SH_LIST_REMOVE(snaps, st->snaps, s);
                sh_snapshot_free(s);
        }
        sh_close(st->resfd);
        free(st->root);
        free(st->trash);
        free(st);
}

const char *sh_snapstore_root(const sh_snapstore *st)
{
        return st->root;
}

const char *sh_snapstore_trash_dir(const sh_snapstore *st)
{
        return st->trash;
}

unsigned sh_snapstore_count(const sh_snapstore *st)
{
        return st->count;
}

sh_snapshot *sh_snapstore_first(sh_snapstore *st)
{
        return st->snaps;
}

sh_snapshot *sh_snapstore_next(sh_snapshot *s)
{
        return s->snaps_next;
}

unsigned sh_snapstore_creating(sh_snapstore *st, const char *sandbox_id)
{
        unsigned n = 0;
        sh_snapshot *s;

        SH_LIST_FOREACH(snaps, s, st->snaps) {
                n += s->state == SH_SNAP_CREATING && STREQ(s->sandbox_id, sandbox_id);
        }
        return n;
}

sh_snapshot *sh_snapstore_get(sh_snapstore *st, const char *id, size_t len)
{
        sh_snapshot *s;

        if (!sh_snap_id_valid(id, len))
                return NULL;
        SH_LIST_FOREACH(snaps, s, st->snaps) {
                if (memcmp(s->id, id, SH_SNAP_ID_LEN) == 0)
                        return s;
        }
        return NULL;
}

/* A fresh id: the pod's token, then 128 random bits (cluster.h: the id names its pod). */
static int new_id(const sh_snapstore *st, char out[SH_SNAP_ID_LEN + 1])
{
        char *p = out + sizeof(SH_SNAP_PREFIX) - 1;

        memcpy(out, SH_SNAP_PREFIX, sizeof(SH_SNAP_PREFIX) - 1);
        memcpy(p, st->token, SH_POD_TOKEN_LEN);
        return sh_random_hex(p + SH_POD_TOKEN_LEN, (SH_ID_LEN - SH_POD_TOKEN_LEN) / 2);
}

int sh_snapstore_add(sh_snapstore *st, const char *sandbox_id, const char *name,
                     const cJSON *entrypoint, sh_snapshot **ret, sh_error **err)
{
        sh_snapshot *s;
        int k;

        if (st->count >= SH_SNAP_MAX)
                return sh_error_new(err, SH_E_UNAVAILABLE,
                                    "this host keeps at most %d snapshots: delete some first",
                                    SH_SNAP_MAX);
        if (!sh_remote_id_valid(sandbox_id, strlen(sandbox_id)) ||
            (name && !sh_snap_name_valid(name, strlen(name))))
                return sh_error_new(err, SH_E_INVALID, "invalid snapshot name");
        s = calloc(1, sizeof(*s));
        if (!s)
                return sh_error_make(err, ENOMEM, "out of memory");
        k = new_id(st, s->id);
        if (k < 0) {
                free(s);
                return sh_error_make(err, -k, "getrandom");
        }
        memcpy(s->sandbox_id, sandbox_id, SH_ID_LEN + 1);
        s->state = SH_SNAP_CREATING;
        s->created_ms = s->transition_ms = sh_now_wall_ms();
        if (dup_opt(name, &s->name) < 0 || dup_opt("snapshot_accepted", &s->reason) < 0 ||
            (entrypoint && entry_valid(entrypoint) &&
             !(s->entrypoint = cJSON_Duplicate(entrypoint, true)))) {
                sh_snapshot_free(s);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        /* Appended: created now, it is the newest (a clock step back only bends the order). */
        if (queue_op(st, OP_WRITE, s, NULL, NULL, err) < 0) {
                sh_snapshot_free(s);
                return -1;
        }
        SH_LIST_APPEND(snaps, st->snaps, s);
        st->count++;
        *ret = s;
        return 0;
}

int sh_snapstore_set_state(sh_snapstore *st, sh_snapshot *s, sh_snap_state state,
                           const char *reason, const char *message, sh_error **err)
{
        char *r = NULL, *m = NULL;

        if (dup_opt(reason, &r) < 0 || dup_opt(message, &m) < 0) {
                free(r);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        /* A message may quote rsync's output: kept printable and bounded. */
        if (m) {
                sh_utf8_sanitize(m);
                if (strlen(m) > SH_SNAP_TEXT_MAX)
                        m[SH_SNAP_TEXT_MAX] = '\0';
                if (!sh_utf8_valid(m, strlen(m))) /* cut inside a sequence */
                        sh_utf8_sanitize(m);
        }
        free(s->reason);
        free(s->message);
        s->reason = r;
        s->message = m;
        s->state = state;
        s->transition_ms = sh_now_wall_ms();
        return queue_op(st, OP_WRITE, s, NULL, NULL, err);
}

int sh_snapstore_drop_tree(sh_snapstore *st, sh_snapshot *s, sh_snap_moved_fn moved, void *data,
                           sh_error **err)
{
        return queue_op(st, OP_TREE_TO_TRASH, s, moved, data, err);
}

int sh_snapstore_remove(sh_snapstore *st, sh_snapshot *s, sh_snap_moved_fn moved, void *data,
                        sh_error **err)
{
        /* The tree first: a crash between the two leaves a record whose tree is gone, which
         * the next load skips, never a tree nobody knows. */
        if (queue_op(st, OP_TREE_TO_TRASH, s, moved, data, err) < 0 ||
            queue_op(st, OP_UNLINK, s, NULL, NULL, err) < 0)
                return -1;
        SH_LIST_REMOVE(snaps, st->snaps, s);
        st->count--;
        sh_snapshot_free(s);
        return 0;
}

bool sh_snapstore_idle(const sh_snapstore *st)
{
        return !st->writer && !st->queue && !st->inflight;
}

bool sh_snapstore_wait(sh_snapstore *st, sh_waiter *w)
{
        if (sh_snapstore_idle(st))
                return false;
        sh_waiter_add(&st->waiters, w);
        return true;
}
