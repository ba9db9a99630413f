/* confine.c: persist/restore child: rsync confined to a root of rsync, workspace, archive item. */
#include "persist-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sh/caps.h"
#include "sh/jail.h"
#include "sh/macro.h"
#include "sh/seccomp.h"

/*
 * Why a minimal root and not just "everything read-only": rsync runs as root and reads (persist)
 * or writes (restore) a tree that hostile code rewrites while rsync walks it. rsync copies links
 * as links, but between its lstat of "d" and its open of "d/x" the sandbox can turn "d" into a
 * link to "/" or to any host directory, and rsync then opens "/x" — with the host's root that
 * could be /etc/shadow read into the archive, or a host file overwritten on restore. Here "/" is
 * a read-only tmpfs holding nothing but rsync, the libraries it loads, and two bind mounts:
 * /workspace and /archive, the source of the transfer read-only. Whatever a link points at
 * resolves inside that root, and the only writable place in it is the destination of this
 * very transfer. Neither /proc nor /dev exist, so no magic link leads out.
 *
 * The steps run top to bottom; a failure writes "persist setup: <step>: <error>" to fd 2 (the
 * pipe the daemon reads) and exits SH_PERSIST_EXIT_SETUP.
 */

/* The new root: shadowed by our tmpfs in our own mount namespace only. What the host has below
 * it is hidden from then on, so whatever the new root binds is opened before (build_root). */
#define NEWROOT   "/tmp"
#define WS_FD     3
#define OUT_FD    4
#define PROCS_FD  5 /* and up: cgroup.procs of the helper's cgroup */
#define MAX_LIBS  SH_PERSIST_LIBS_MAX
#define TRACE_MAX (64 * 1024)

static _Noreturn void die(const char *step, int e)
{
        dprintf(2, "persist setup: %s: %s\n", step, strerror(e));
        _exit(SH_PERSIST_EXIT_SETUP);
}

static _Noreturn void die_msg(const char *step, const char *msg)
{
        dprintf(2, "persist setup: %s: %s\n", step, msg);
        _exit(SH_PERSIST_EXIT_SETUP);
}

/* ---- the libraries rsync loads ---------------------------------------------------------- */

typedef struct libset {
        char *path[MAX_LIBS];
        int n;
} libset;

/* Add the absolute path at s (up to the first space or end) to *ls. Only plain absolute paths
 * without ".." are taken: they name host files we bind read-only into the new root. */
static void libs_add(libset *ls, const char *s)
{
        size_t n = strcspn(s, " \t\n");

        if (n == 0 || s[0] != '/' || n >= PATH_MAX - sizeof(NEWROOT))
                die_msg("trace libraries", "unexpected loader output");
        if (ls->n >= MAX_LIBS)
                die_msg("trace libraries", "too many libraries");
        ls->path[ls->n] = strndup(s, n);
        if (!ls->path[ls->n])
                die("trace libraries", ENOMEM);
        if (strstr(ls->path[ls->n], "/../") || strstr(ls->path[ls->n], "/./"))
                die_msg("trace libraries", "unexpected library path");
        ls->n++;
}

/* The dynamic loader's own listing (what ldd prints): "name => /path (addr)" for each library
 * and "/path (addr)" for the loader itself; the vDSO has no path. */
static void libs_parse(libset *ls, char *text)
{
        char *line, *save = NULL;

        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *arrow = strstr(line, "=> ");

                line += strspn(line, " \t");
                if (arrow) {
                        if (strncmp(arrow + 3, "not found", 9) == 0)
                                die_msg("trace libraries", line);
                        libs_add(ls, arrow + 3);
                } else if (line[0] == '/') {
                        libs_add(ls, line);
                }
        }
}

/* Ask the loader which libraries rsync needs (LD_TRACE_LOADED_OBJECTS: it maps them, prints
 * and exits without running rsync). Once at the daemon's start (sh_persist_libs_discover),
 * again in a job that finds rsync or a library changed since (find_libraries). */
static void trace_libraries(const char *rsync, libset *ls)
{
        char *const argv[] = {(char *)rsync, NULL};
        char *const envp[] = {"LD_TRACE_LOADED_OBJECTS=1", NULL};
        char *buf = malloc(TRACE_MAX + 1);
        size_t len = 0;
        int p[2], status;
        pid_t pid;

        if (!buf)
                die("trace libraries", ENOMEM);
        if (pipe2(p, O_CLOEXEC) < 0)
                die("trace libraries: pipe", errno);
        pid = fork();
        if (pid < 0)
                die("trace libraries: fork", errno);
        if (pid == 0) {
                if (dup2(p[1], 1) < 0)
                        _exit(127);
                execve(rsync, argv, envp);
                _exit(127);
        }
        close(p[1]);
        for (;;) {
                ssize_t n = read(p[0], buf + len, TRACE_MAX - len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        die("trace libraries: read", errno);
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len == TRACE_MAX)
                        die_msg("trace libraries", "loader output too long");
        }
        close(p[0]);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        die("trace libraries: wait", errno);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                die_msg("trace libraries", "the loader failed (is rsync a dynamic executable?)");
        buf[len] = '\0';
        libs_parse(ls, buf);
        free(buf);
}

/* The same file as when it was recorded: device, inode, size, modification and change
 * times (an upgrade replaces the file or changes it). stat follows links: the loader named
 * some libraries by a link (/lib64/ld-linux-x86-64.so.2), the bind follows it too. */
static bool same_file(const char *path, const struct stat *was)
{
        struct stat st;

        return stat(path, &st) == 0 && st.st_dev == was->st_dev && st.st_ino == was->st_ino &&
               st.st_size == was->st_size && st.st_mtim.tv_sec == was->st_mtim.tv_sec &&
               st.st_mtim.tv_nsec == was->st_mtim.tv_nsec &&
               st.st_ctim.tv_sec == was->st_ctim.tv_sec &&
               st.st_ctim.tv_nsec == was->st_ctim.tv_nsec;
}

/* The daemon's list if rsync and every library are still the files it recorded (copied into
 * *ls), else the loader's answer now: an upgraded rsync or library is picked up, at the cost
 * of one more fork and exec in that job. */
static void find_libraries(const sh_persist_child_arg *a, libset *ls)
{
        const sh_persist_libs *l = a->libs;
        bool valid = l && same_file(a->rsync, &l->rsync_st);

        for (int i = 0; valid && i < l->n; i++)
                valid = same_file(l->path[i], &l->st[i]);
        if (!valid) {
                trace_libraries(a->rsync, ls);
                return;
        }
        for (int i = 0; i < l->n; i++)
                ls->path[i] = l->path[i];
        ls->n = l->n;
}

void sh_persist_libs_free(sh_persist_libs *l)
{
        if (!l)
                return;
        for (int i = 0; i < l->n; i++)
                free(l->path[i]);
        free(l);
}

/* Read the NUL-separated paths from the discovery child into l (each stat'ed now). */
static int libs_read(int fd, sh_persist_libs *l)
{
        _cleanup_free_ char *buf = malloc(TRACE_MAX + 1);
        size_t len = 0;
        int r = 0;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n = read(fd, buf + len, TRACE_MAX - len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0 || (len += (size_t)n) == TRACE_MAX)
                        break;
        }
        if (len == 0 || len == TRACE_MAX || buf[len - 1] != '\0')
                r = -EIO;
        for (size_t off = 0; r == 0 && off < len; off += strlen(buf + off) + 1) {
                if (l->n == SH_PERSIST_LIBS_MAX || buf[off] != '/') {
                        r = -EIO;
                } else if (!(l->path[l->n] = strdup(buf + off))) {
                        r = -ENOMEM;
                } else if (stat(l->path[l->n], &l->st[l->n]) < 0) {
                        r = -errno;
                        free(l->path[l->n]);
                } else {
                        l->n++;
                }
        }
        return r;
}

static void libs_freep(sh_persist_libs **l)
{
        sh_persist_libs_free(*l);
}

int sh_persist_libs_discover(const char *rsync, sh_persist_libs **ret)
{
        _cleanup_(libs_freep) sh_persist_libs *l = calloc(1, sizeof(*l));
        _cleanup_close_ int rd = -1, wr = -1;
        int p[2], status, r;
        pid_t pid;

        if (!l)
                return -ENOMEM;
        if (stat(rsync, &l->rsync_st) < 0 || pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        rd = p[0];
        wr = p[1];
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                /* The child's own steps die on any surprise (exit status != 0): the daemon
                 * then keeps no list. The paths go back NUL-separated. */
                libset ls = {.n = 0};
                int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);

                rd = sh_close(rd);
                if (devnull < 0 || dup2(devnull, 2) < 0)
                        _exit(SH_PERSIST_EXIT_SETUP);
                trace_libraries(rsync, &ls);
                for (int i = 0; i < ls.n; i++) {
                        size_t n = strlen(ls.path[i]) + 1;

                        if (write(wr, ls.path[i], n) != (ssize_t)n)
                                _exit(SH_PERSIST_EXIT_SETUP);
                }
                _exit(0);
        }
        wr = sh_close(wr);
        r = libs_read(rd, l);
        rd = sh_close(rd);
        /* An answer too long: the child may be blocked writing the rest. */
        if (r < 0)
                (void)kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR) {
                        status = -1;
                        break;
                }
        if (r == 0 && status != 0)
                r = -EIO;
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}

/* ---- the archive side ------------------------------------------------------------------ */

/* The archive root with its parents, when a job is asked to make it (a snapshot root appears
 * with its first snapshot, never at the daemon's start): components the operator named. */
static void make_root(const char *root)
{
        char buf[PATH_MAX];

        if (snprintf(buf, sizeof(buf), "%s", root) >= (int)sizeof(buf))
                die("create the archive root", ENAMETOOLONG);
        for (char *s = buf + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        die("create the archive root", errno);
                *s = '/';
        }
        if (mkdir(buf, 0700) < 0 && errno != EEXIST)
                die("create the archive root", errno);
}

/* {nfs_root}/{item_id}, never through a link: the item component is opened O_NOFOLLOW, so a
 * link planted there (by anyone) fails instead of redirecting the transfer. rsync keeps its
 * temporary files beside their targets inside the item (a temporary directory elsewhere would
 * be another mount: rename(2) across mounts fails, and rsync then copies non-atomically and
 * loses sparseness). */
static int open_item(const sh_persist_child_arg *a)
{
        int rootfd, fd;

        if (a->make_root && !a->restore)
                make_root(a->nfs_root);
        rootfd = open(a->nfs_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
                die("open the archive root", errno);
        if (!a->restore && mkdirat(rootfd, a->item_id, 0700) < 0 && errno != EEXIST)
                die("create the archive directory", errno);
        fd = openat(rootfd, a->item_id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT && a->restore)
                        _exit(SH_PERSIST_EXIT_NO_ARCHIVE);
                if (errno == ENOTDIR || errno == ELOOP)
                        die_msg("open the archive directory", "it exists and is not a directory");
                die("open the archive directory", errno);
        }
        close(rootfd);
        return fd;
}

/* ---- the new root ---------------------------------------------------------------------- */

static void mkdir_p(char *path)
{
        char *s;

        for (s = path + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(path, 0755) < 0 && errno != EEXIST)
                        die("create a mount point", errno);
                *s = '/';
        }
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                die("create a mount point", errno);
}

/* The host file at `host` (rsync or a library), opened now: before the root tmpfs goes over
 * NEWROOT, which hides whatever the host has below it (a build under /tmp, a library there).
 * Host paths come from the loader and name system files: following their links is intended
 * (/lib64/ld-linux is one). An O_PATH fd of our own namespace, which the kernel binds. */
static int open_host_file(const char *host)
{
        int fd = open(host, O_PATH | O_CLOEXEC);

        if (fd < 0)
                die("open a library", errno);
        return fd;
}

/* Bind the host file behind fd (open_host_file's, closed here) read-only to the same path
 * `host` inside the new root. */
static void bind_host_file(int fd, const char *host)
{
        char dst[PATH_MAX], src[64], *slash;
        int mp;

        if (snprintf(dst, sizeof(dst), "%s%s", NEWROOT, host) >= (int)sizeof(dst))
                die("bind a library", ENAMETOOLONG);
        slash = strrchr(dst, '/');
        *slash = '\0';
        mkdir_p(dst);
        *slash = '/';
        mp = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (mp < 0)
                die("create a mount point", errno);
        close(mp);
        snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
        if (sh_jail_bind(src, dst, SH_JAIL_RDONLY) < 0)
                die("bind a library", errno);
        close(fd);
}

/* Bind the directory behind fd at NEWROOT/name. noexec: rsync never runs anything from the
 * trees it copies. */
static void bind_dir_fd(int fd, const char *name, bool readonly)
{
        char dst[PATH_MAX];

        snprintf(dst, sizeof(dst), "%s/%s", NEWROOT, name);
        if (sh_jail_bind_fd(fd, dst, SH_JAIL_NOEXEC | (readonly ? SH_JAIL_RDONLY : 0)) < 0)
                die("bind a directory", errno);
}

/* A mount namespace of our own, every mount private: nothing we mount may propagate to the
 * host, and nothing the host mounts later may appear here. */
static void own_mount_namespace(void)
{
        if (unshare(CLONE_NEWNS) < 0)
                die("unshare the mount namespace", errno);
        if (sh_jail_private() < 0)
                die("make mounts private", errno);
}

/* Everything the new root holds is opened first, as fds of our namespace: the tmpfs over
 * NEWROOT may hide the paths they were opened by (a state root, rsync or a library below
 * /tmp), not the fds. */
static void build_root(const sh_persist_child_arg *a, const libset *ls, int wsfd, int itemfd)
{
        int rsync_fd = open_host_file(a->rsync), lib_fd[MAX_LIBS];
        int i;

        for (i = 0; i < ls->n; i++)
                lib_fd[i] = open_host_file(ls->path[i]);
        if (sh_jail_tmpfs_root(NEWROOT) < 0)
                die("mount the root tmpfs", errno);
        bind_host_file(rsync_fd, a->rsync);
        for (i = 0; i < ls->n; i++)
                bind_host_file(lib_fd[i], ls->path[i]);
        /* The source of the transfer is read-only: rsync can never change what it copies. */
        bind_dir_fd(wsfd, "workspace", !a->restore);
        bind_dir_fd(itemfd, "archive", a->restore);
}

/* ---- what the job may read ------------------------------------------------------------ */

/* What the walk below learnt of the source, for rsync's command line. */
typedef struct tree_info {
        bool sparse; /* a regular file may hold holes: rsync needs -S */
        bool links;  /* a non-directory has more than one name: rsync needs -H */
} tree_info;

/* The source of the transfer (the workspace, frozen; or the archive item) is measured before
 * rsync runs: the apparent sizes of its regular files, which is what rsync reads. A sparse
 * file counts with its holes: 15 TiB of holes cost no disk but 15 TiB of reading (hours of
 * CPU). Above the cap the job fails, naming the cause, rather than copying part of the tree
 * (a silently skipped file would be a user's lost work). A hard link counts once per name.
 * Walked without following links and without leaving the bind mount; fts descends by
 * fchdir, so depth is not bounded by PATH_MAX. Unreadable entries are left to rsync, which
 * reports them. The tree cannot change meanwhile: a persist froze the sandbox, and nobody
 * writes an archive item during its restore (jobs of one item never overlap).
 *
 * The same walk says whether rsync's -S and -H are needed, because both are costly when they
 * are not: -S makes rsync's receiver write in 1 KiB pieces to find runs of zeros (a 256 MiB
 * file took twice as long as with -a), -H makes it index every file by inode. A file is taken
 * as sparse when it occupies less than its size (st_blocks x 512 < st_size: the test GNU cp
 * and tar use); one such file turns -S on for the whole transfer, so holes are still written
 * as holes. Any non-directory with st_nlink > 1 turns -H on. An entry the walk cannot stat or
 * a directory it cannot read turns both on: what it holds is unknown. */
static tree_info check_size(const sh_persist_child_arg *a)
{
        const char *what = a->restore ? "archive" : "workspace";
        char *roots[] = {a->restore ? "/archive" : "/workspace", NULL};
        tree_info ti = {false, false};
        uint64_t sum = 0;
        FTSENT *e;
        FTS *fts;

        fts = fts_open(roots, FTS_PHYSICAL | FTS_XDEV, NULL);
        if (!fts)
                die("measure the tree", errno);
        while ((errno = 0, e = fts_read(fts))) {
                const struct stat *st = e->fts_statp;
                uint64_t size;

                switch (e->fts_info) {
                case FTS_ERR:
                        die("measure the tree", e->fts_errno);
                case FTS_DNR:
                case FTS_NS:
                        ti.sparse = ti.links = true;
                        continue;
                case FTS_D:
                case FTS_DP:
                case FTS_DC:
                case FTS_DOT:
                        continue;
                case FTS_F:
                        break;
                default: /* links, devices, FIFOs, sockets: only their names matter */
                        if (st->st_nlink > 1)
                                ti.links = true;
                        continue;
                }
                if (st->st_nlink > 1)
                        ti.links = true;
                size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
                if ((uint64_t)st->st_blocks * 512 < size)
                        ti.sparse = true;
                if (size > a->max_bytes - sum) {
                        dprintf(2,
                                "the %s's files add up to more than %" PRIu64
                                " bytes (apparent sizes: the holes of sparse files count, "
                                "rsync reads them), the limit of one job "
                                "(SANDBOX_HOST_PERSIST_MAX_BYTES)\n",
                                what, a->max_bytes);
                        _exit(SH_PERSIST_EXIT_TOO_BIG);
                }
                sum += size;
        }
        if (errno)
                die("measure the tree", errno);
        fts_close(fts);
        return ti;
}

/* ---- rsync itself ----------------------------------------------------------------------- */

/* What rsync as root needs and no more: read any file of the workspace (DAC_OVERRIDE: it
 * covers reading and searching directories too, so DAC_READ_SEARCH, which would also allow
 * open_by_handle_at, is not asked for), set modes and times on files it does not own
 * (FOWNER), keep set-group-id directories whose group is not root's (FSETID), and on restore
 * set owners (CHOWN). Of those, only what the daemon itself holds (its permitted set: a
 * Kubernetes pod grants a list, without FSETID for one): a missing FSETID only means that a
 * restored set-group-id directory loses the bit. Gone: SYS_ADMIN (no unmounting our root
 * away), SYS_CHROOT, SYS_PTRACE, MKNOD, NET_*, and the rest. */
static const cap_value_t want_restore[] = {CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID};
static const cap_value_t want_persist[] = {CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID};

/* The wanted capabilities the process holds (permitted): *ret_n of them in ret. */
static int kept_caps(const sh_persist_child_arg *a, cap_value_t *ret, int *ret_n)
{
        const cap_value_t *want = a->restore ? want_restore : want_persist;
        size_t n = a->restore ? ARRAY_SIZE(want_restore) : ARRAY_SIZE(want_persist);
        cap_t cur = cap_get_proc();

        if (!cur)
                return -1;
        *ret_n = 0;
        for (size_t i = 0; i < n; i++) {
                cap_flag_value_t v = CAP_CLEAR;

                if (cap_get_flag(cur, want[i], CAP_PERMITTED, &v) < 0) {
                        cap_free(cur);
                        return -1;
                }
                if (v == CAP_SET)
                        ret[(*ret_n)++] = want[i];
        }
        cap_free(cur);
        return 0;
}

/* The wanted capabilities the daemon gave us and nothing else, in every set (the bounding set
 * too), no_new_privs. */
static void drop_privileges(const sh_persist_child_arg *a)
{
        cap_value_t keep[ARRAY_SIZE(want_restore)];
        const char *step = NULL;
        int n, r;

        if (kept_caps(a, keep, &n) < 0)
                die("drop privileges", errno);
        r = sh_caps_keep_only(keep, n, &step);
        if (r < 0) {
                char what[96];

                snprintf(what, sizeof(what), "drop privileges: %s", step ? step : "?");
                die(what, -r);
        }
}

/* Whether the directory of ls->path[i] is that of an earlier library (exact comparison). */
static bool dir_seen(const libset *ls, int i)
{
        size_t dl = (size_t)(strrchr(ls->path[i], '/') - ls->path[i]);

        for (int k = 0; k < i; k++) {
                size_t kl = (size_t)(strrchr(ls->path[k], '/') - ls->path[k]);

                if (kl == dl && memcmp(ls->path[k], ls->path[i], dl) == 0)
                        return true;
        }
        return false;
}

/* LD_LIBRARY_PATH: the directories of the bound libraries (there is no ld.so.cache in the new
 * root). The buffer is sized from the paths themselves. */
static char *library_path(const libset *ls)
{
        size_t cap = sizeof("LD_LIBRARY_PATH="), len;
        char *s;
        int i;

        for (i = 0; i < ls->n; i++)
                cap += strlen(ls->path[i]) + 1;
        s = calloc(1, cap);
        if (!s)
                die("environment", ENOMEM); /* does not return */
        /* cppcheck-suppress nullPointerRedundantCheck */
        len = (size_t)snprintf(s, cap, "LD_LIBRARY_PATH=");
        for (i = 0; i < ls->n; i++) {
                size_t dl = (size_t)(strrchr(ls->path[i], '/') - ls->path[i]);

                if (dl == 0 || dir_seen(ls, i))
                        continue;
                len += (size_t)snprintf(s + len, cap - len, "%s%.*s", s[16] ? ":" : "", (int)dl,
                                        ls->path[i]);
        }
        return s;
}

/* ---- rsync's temporary files (persist) ---------------------------------------------------
 *
 * rsync writes each file to a temporary ".name.XXXXXX" and renames it into place. It removes
 * the one it is writing when a signal ends it, but not always: a signal between its mkstemp
 * and its bookkeeping, a receiver still blocked in writeback when the grace below ends in
 * SIGKILL, or a SIGKILL from outside leave one behind, a half-written stray in the user's
 * archive. So a persist gives rsync a temporary directory of its own, inside the item (the
 * same mount: the rename into place stays atomic and keeps sparseness), with a random name
 * no workspace can know in advance (the sandbox is frozen, and never sees the archive), kept
 * out of the transfer and of --delete by a filter rule; whatever rsync left in it is removed
 * once rsync's namespace is empty, however rsync ended. */
static char temp_dir_name[32];   /* ".sh-rsync.<16 hex>", in /archive */
static char temp_dir_path[64];   /* /archive/<name> */
static char temp_dir_opt[64];    /* --temp-dir=<name> */
static char temp_dir_filter[64]; /* --filter=P /<name>/ */

static void make_temp_dir(void)
{
        uint8_t rnd[8];
        int i;

        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                die("temporary directory: random name", errno);
        i = snprintf(temp_dir_name, sizeof(temp_dir_name), ".sh-rsync.");
        for (size_t k = 0; k < sizeof(rnd); k++)
                i += snprintf(temp_dir_name + i, sizeof(temp_dir_name) - (size_t)i, "%02x", rnd[k]);
        snprintf(temp_dir_path, sizeof(temp_dir_path), "/archive/%s", temp_dir_name);
        /* Relative: rsync resolves it from the destination, /archive/, where its receiver
         * works. rsync opens every path of its temporary files one component at a time
         * without following links; an absolute /archive/<name> cost it three more opens and
         * stats per step from "/", four steps a file: persisting 5000 small files took 1.5x
         * as long as with a relative one. */
        snprintf(temp_dir_opt, sizeof(temp_dir_opt), "--temp-dir=%s", temp_dir_name);
        snprintf(temp_dir_filter, sizeof(temp_dir_filter), "--filter=P /%s/", temp_dir_name);
        /* An archive that cannot take a directory (read-only, full) cannot take rsync's
         * files either: rsync runs without one and reports its own error, naming the cause. */
        if (mkdir(temp_dir_path, 0700) < 0)
                temp_dir_name[0] = temp_dir_opt[0] = temp_dir_filter[0] = '\0';
}

/* Every entry rsync left in the temporary directory, then the directory. rsync is gone (its
 * namespace is empty) and the sandbox never reaches the archive: the directory holds only
 * rsync's own flat temporary files. A failure is reported and does not change the job's
 * result (the next persist's --delete-after removes a directory left over). */
static void remove_temp_dir(void)
{
        _cleanup_close_ int dfd = -1;
        DIR *d;
        struct dirent *e;

        if (!temp_dir_name[0])
                return;
        dfd = open(temp_dir_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0) {
                dprintf(2, "persist: open the temporary directory: %s\n", strerror(errno));
                return;
        }
        d = fdopendir(dfd);
        if (!d) {
                dprintf(2, "persist: read the temporary directory: %s\n", strerror(errno));
                return;
        }
        dfd = -1; /* owned by d now */
        while ((errno = 0, e = readdir(d))) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                if (unlinkat(dirfd(d), e->d_name, 0) < 0)
                        dprintf(2, "persist: remove a temporary file: %s\n", strerror(errno));
        }
        closedir(d);
        if (rmdir(temp_dir_path) < 0)
                dprintf(2, "persist: remove the temporary directory: %s\n", strerror(errno));
}

/* The rsync command line. Nothing in it comes from a client: the paths are fixed names in the
 * new root, the owner is a number.
 *  -r -l -p -t   recursive, links as links (never -L/-k/-K), modes, times; no -o/-g on persist
 *                (the archive's owner is whoever writes it; restore re-owns with --chown)
 *  -H -S         hard links stay hard links, sparse files stay sparse; each only when the
 *                source has one (check_size: both cost rsync time when there is none)
 *  --no-D        no device or special files; no -A/-X: no ACLs, no extended attributes
 *  --modify-window=-1  compare times to the nanosecond: a file rewritten within the same
 *                second with the same size is still copied
 *  --chmod=Fug-s no set-user/group-id file ever lands in the archive as root's, nor back
 *  --timeout=N   rsync gives up after N s without I/O (a stalled archive), before the job's
 *                own timeout; it cannot end a blocking open(2): the freeze prevents those
 *  --temp-dir    (persist) rsync's temporary files go to a directory of this job inside the
 *                item (see make_temp_dir), protected by a filter rule; named relative to
 *                the destination /archive/ */
static void build_argv(const sh_persist_child_arg *a, const tree_info *ti, const char **argv,
                       char *chown_buf, size_t chown_size, char *timeout_buf, size_t timeout_size)
{
        static const char *const short_opts[2][2] = {{"-rlpt", "-rlptS"}, {"-rlptH", "-rlptHS"}};
        int n = 0;

        argv[n++] = "rsync";
        argv[n++] = short_opts[ti->links][ti->sparse];
        argv[n++] = "--no-D";
        argv[n++] = "--numeric-ids";
        argv[n++] = "--modify-window=-1";
        argv[n++] = "--chmod=Fug-s";
        snprintf(timeout_buf, timeout_size, "--timeout=%u", a->io_timeout_s ? a->io_timeout_s : 1);
        argv[n++] = timeout_buf;
        if (a->restore) {
                snprintf(chown_buf, chown_size, "--chown=%u:%u", (unsigned)a->uid,
                         (unsigned)a->gid);
                argv[n++] = chown_buf;
                argv[n++] = "/archive/";
                argv[n++] = "/workspace/";
        } else {
                /* Deletions only after every transfer went through; rsync also skips them
                 * after an I/O error. */
                if (a->delete_extra)
                        argv[n++] = "--delete-after";
                if (temp_dir_name[0]) {
                        argv[n++] = temp_dir_opt;
                        argv[n++] = temp_dir_filter;
                }
                argv[n++] = "/workspace/";
                argv[n++] = "/archive/";
        }
        argv[n] = NULL;
}

static _Noreturn void exec_rsync(const sh_persist_child_arg *a, const libset *ls,
                                 const tree_info *ti)
{
        const char *argv[16];
        char chown_buf[64], timeout_buf[32];
        char *envp[] = {"PATH=/usr/bin:/bin", library_path(ls), "LC_ALL=C", NULL};
        sigset_t none;
        int r;

        /* When the namespace's init dies, rsync goes too. rsync stays in init's process
         * group, which the helper signals as a whole. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                die("parent death signal", errno);
        sigemptyset(&none);
        if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
                die("signal mask", errno);
        build_argv(a, ti, argv, chown_buf, sizeof(chown_buf), timeout_buf, sizeof(timeout_buf));
        drop_privileges(a);
        /* Last: the sandboxes' own deny list (the kernel attack surface a sandbox may not
         * reach), then the helpers' filter (no socket but AF_UNIX, the native ABI only). */
        if (!a->sandbox_filter || !a->socket_filter)
                die_msg("seccomp", "no filter");
        r = sh_seccomp_load(a->sandbox_filter);
        if (r == 0)
                r = sh_seccomp_load(a->socket_filter);
        if (r < 0)
                die("seccomp", -r);
        execve(a->rsync, (char *const *)argv, envp);
        die("execute rsync", errno);
}

/* PID 1 of rsync's PID namespace. rsync itself must not be PID 1: when PID 1 exits the
 * kernel kills every other process of the namespace at once, and rsync's receiver, still
 * removing the temporary file it was writing after a SIGTERM, would be killed first and leave
 * ".name.XXXXXX" in the archive. This init starts rsync, reaps every process of the
 * namespace until none is left, and exits with rsync's result. (A SIGTERM from the helper
 * does not touch it: a namespace init ignores signals it has no handler for.) */
static _Noreturn void ns_init(const sh_persist_child_arg *a, const libset *ls, const tree_info *ti)
{
        int status, code = SH_PERSIST_EXIT_SETUP;
        pid_t rsync_pid;

        if (setpgid(0, 0) < 0)
                die("process group", errno);
        rsync_pid = fork();
        if (rsync_pid < 0)
                die("fork rsync", errno);
        if (rsync_pid == 0)
                exec_rsync(a, ls, ti);
        for (;;) {
                pid_t r = waitpid(-1, &status, 0);

                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        break; /* ECHILD: the namespace is empty */
                }
                if (r == rsync_pid)
                        code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        }
        _exit(code);
}

/* Wait for the namespace's init (rsync's result). A SIGTERM from the daemon (cancel,
 * timeout) goes on to every rsync process (one process group): on SIGTERM rsync removes the
 * temporary file it was writing, so a cancelled persist leaves no stray ".name.XXXXXX" in
 * the archive. Whatever still runs after KILL_GRACE_S gets SIGKILL (to PID 1: the kernel then
 * kills the whole namespace). Signals are blocked and taken with sigtimedwait: no handler
 * runs. */
#define KILL_GRACE_S 3

static int wait_rsync(pid_t pid, const sigset_t *set)
{
        struct timespec grace = {.tv_sec = KILL_GRACE_S};
        bool terminating = false;
        int status;

        for (;;) {
                pid_t r = waitpid(pid, &status, WNOHANG);
                int sig;

                if (r == pid)
                        break;
                if (r < 0 && errno != EINTR)
                        die("wait for rsync", errno);
                sig = terminating ? sigtimedwait(set, NULL, &grace) : sigwaitinfo(set, NULL);
                if (sig == SIGTERM && !terminating) {
                        terminating = true;
                        (void)kill(-pid, SIGTERM);
                } else if (sig < 0 && errno == EAGAIN) {
                        (void)kill(pid, SIGKILL);
                }
        }
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return WIFEXITED(status) ? WEXITSTATUS(status) : SH_PERSIST_EXIT_SETUP;
}

int sh_persist_child_main(void *arg)
{
        const sh_persist_child_arg *a = arg;
        libset ls = {.n = 0};
        tree_info ti;
        sigset_t set;
        int wsfd, itemfd, devnull, r;
        pid_t pid;

        /* SIGTERM waits until we can pass it on to rsync; SIGCHLD is taken synchronously. */
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                die("signal mask", errno);
        /* The daemon gone (killed), this helper and its rsync go too. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                die("parent death signal", errno);
        /* Everything rsync and the setup say goes to the daemon through the pipe. */
        if (dup2(OUT_FD, 1) < 0 || dup2(OUT_FD, 2) < 0)
                _exit(SH_PERSIST_EXIT_SETUP);
        close(OUT_FD);
        /* Into the helper's cgroup (below the sandbox's) before any real work: the CPU,
         * memory and pids of everything from here on, rsync's included, are the
         * sandbox's. */
        r = sh_jail_join_cgroup(PROCS_FD, a->nprocs);
        if (r < 0)
                die("join the helper's cgroup", -r);
        /* No network: only a loopback of its own (the archive's NFS I/O is the kernel's). */
        r = sh_jail_own_network();
        if (r < 0)
                die("unshare the network namespace", -r);
        devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull < 0 || dup2(devnull, 0) < 0)
                die("open /dev/null", errno);
        close(devnull);

        find_libraries(a, &ls);
        own_mount_namespace();
        /* fd 3 is the daemon's fd of the workspace, a mount of the host's namespace: the
         * kernel binds only mounts of our own, so it is opened again by its path (the daemon
         * owns every component; a swap anywhere in it fails instead of redirecting). */
        wsfd = sh_jail_reopen_dir(WS_FD);
        if (wsfd < 0)
                die("open the workspace", errno);
        itemfd = open_item(a);
        build_root(a, &ls, wsfd, itemfd);
        /* pivot_root and detach the old root: afterwards no path, not even "..", leads back
         * to the host's file system; the root tmpfs is read-only. */
        if (sh_jail_enter(NEWROOT) < 0)
                die("enter the new root", errno);
        close(wsfd);
        close(itemfd);
        close(WS_FD);
        ti = check_size(a);

        /* A cancel that arrived during the setup: do not start rsync at all. */
        {
                sigset_t pending;

                if (sigpending(&pending) == 0 && sigismember(&pending, SIGTERM))
                        _exit(128 + SIGTERM);
        }
        if (unshare(CLONE_NEWPID) < 0)
                die("unshare the PID namespace", errno);
        if (!a->restore)
                make_temp_dir();
        pid = fork();
        if (pid < 0) {
                int e = errno;

                if (!a->restore)
                        remove_temp_dir();
                die("fork the namespace's init", e);
        }
        if (pid == 0)
                ns_init(a, &ls, &ti);
        /* init and rsync's processes form one group (set on both sides of the fork: no
         * race). */
        (void)setpgid(pid, pid);
        r = wait_rsync(pid, &set);
        if (!a->restore)
                remove_temp_dir();
        return r;
}
