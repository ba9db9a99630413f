/* worker.c: the daemon's side of a sandbox worker: preparing its spec (the image's top-level
 * entries, the resource limits), starting sandbox-init with it, the SEQPACKET control
 * protocol (exec requests out with their fds, events in), and its death. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sh/macro.h"
#include "sh/spawn.h"
#include "sh/syscalls.h"
#include "sh/worker.h"

struct sh_worker {
        sh_loop *loop;
        int sock; /* our end of the control socketpair */
        sh_io *sock_io;
        pid_t pid;       /* the worker, once the intermediate told us */
        sh_child *pid1;  /* the worker, adopted (we are its reaper) and watched */
        sh_child *inter; /* the intermediate while it runs */
        int nprocs;
        sh_worker_fn fn;
        void *data;
        bool dead;
        bool reported_dead;
        bool in_callback; /* fn may free us (sandbox deleted): defer the free */
        bool free_pending;
};

static void worker_free_now(sh_worker *w);

/* Call the owner; it may call sh_worker_free on us, which is deferred until we return. */
static bool call(sh_worker *w, sh_worker_ev ev, uint32_t id, int value, int value2)
{
        bool was = w->in_callback;

        w->in_callback = true;
        w->fn(w, ev, id, value, value2, w->data);
        w->in_callback = was;
        if (!was && w->free_pending) {
                worker_free_now(w);
                return false;
        }
        return true;
}

/* ---- spec ------------------------------------------------------------------------------ */

static int add_entry(sh_worker_spec *spec, const char *dir, const char *name, sh_error **err)
{
        sh_root_entry *e;
        struct stat st;
        char path[SH_ENTRY_PATH_MAX];
        ssize_t n;

        if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
                return sh_error_make(err, ENAMETOOLONG, "image path too long");
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : sh_error_make(err, errno, "stat '%s'", path);
        if (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
                return 0; /* only directories and links make a root */
        if (spec->n_entries >= SH_WORKER_MAX_ENTRIES)
                return sh_error_make(err, E2BIG, "image '%s' has too many top-level entries", dir);
        if (strlen(name) >= sizeof(e->name))
                return 0;
        e = &spec->entries[spec->n_entries];
        memset(e, 0, sizeof(*e));
        snprintf(e->name, sizeof(e->name), "%s", name);
        if (S_ISLNK(st.st_mode)) {
                n = readlink(path, e->target, sizeof(e->target) - 1);
                if (n < 0)
                        return sh_error_make(err, errno, "readlink '%s'", path);
                e->target[n] = '\0';
                e->is_link = true;
        } else {
                memcpy(e->src, path, strlen(path) + 1);
        }
        spec->n_entries++;
        return 0;
}

int sh_worker_spec_image(sh_worker_spec *spec, const char *image_dir, sh_error **err)
{
        /* The default image: the host's own system directories, read-only. */
        static const char *const host[] = {"usr",   "bin",   "sbin",   "lib",
                                           "lib32", "lib64", "libx32", "etc"};
        size_t i;

        spec->n_entries = 0;
        if (!image_dir) {
                for (i = 0; i < ARRAY_SIZE(host); i++)
                        if (add_entry(spec, "", host[i], err) < 0)
                                return -1;
                return 0;
        }
        {
                DIR *d = opendir(image_dir);
                struct dirent *de;

                if (!d)
                        return sh_error_make(err, errno, "opening image '%s'", image_dir);
                while ((de = readdir(d))) {
                        /* These are the sandbox's own: never taken from an image. */
                        static const char *const own[] = {".",    "..",  "workspace", "tmp",
                                                          "proc", "dev", "tools"};
                        bool skip = false;

                        for (i = 0; i < ARRAY_SIZE(own); i++)
                                skip |= STREQ(de->d_name, own[i]);
                        if (!skip && add_entry(spec, image_dir, de->d_name, err) < 0) {
                                closedir(d);
                                return -1;
                        }
                }
                closedir(d);
        }
        return 0;
}

/*
 * The resource limits of every sandbox process, soft and hard. PID 1 sets them on itself
 * before it gives up CAP_SYS_RESOURCE, so every exec inherits them and nothing in the
 * sandbox can raise a hard limit again; a value above the daemon's own hard limit is lowered
 * to it (PID 1 never raises one). Nothing of the daemon's own limits reaches a sandbox: it
 * raised its soft RLIMIT_NOFILE, and a pod may hand it unlimited memlock or core sizes.
 *
 * What a limit cannot bound the cgroup does (memory.max, pids.max, cpu.max), so address
 * space, data, stack, CPU time and file size stay unlimited: bounding them would only break
 * programs (runtimes reserve address space; long jobs are legitimate; a file's size is the
 * disk's business). What the cgroup does not bound, or bounds per node, is limited here:
 */
#define INF RLIM_INFINITY
static const struct {
        int resource;
        uint64_t cur, max;
} sandbox_limits[] = {
        /* Files held through fds: SH_WORKER_NOFILE per process, so pids_max x 1024 per
         * sandbox (524,288 with the defaults: a fifth of a 2.4M fs.file-max, what a 24 GiB
         * node gets). The daemon's hard limit is far higher, and one sandbox filled the
         * node's file table with it (ENFILE for every other sandbox). */
        {RLIMIT_NOFILE, SH_WORKER_NOFILE, SH_WORKER_NOFILE},
        /* No core dumps: core_pattern is the node's, often a pipe to a host program that
         * runs as root outside every namespace, or a file that fills the disk. */
        {RLIMIT_CORE, 0, 0},
        /* Locked memory cannot be reclaimed or swapped under node pressure: the kernel's
         * default since 5.16. */
        {RLIMIT_MEMLOCK, 8 << 20, 8 << 20},
        /* POSIX message queue bytes per uid, kernel memory: the kernel's default. */
        {RLIMIT_MSGQUEUE, 819200, 819200},
        /* Queued signals per uid, kernel memory. Standard signals are delivered beyond it
         * (without their siginfo); only real-time signal queueing is bounded. */
        {RLIMIT_SIGPENDING, 4096, 4096},
        /* No real-time scheduling (an RT task can take a CPU from the node) and no
         * priority above normal (nice below 0). */
        {RLIMIT_RTPRIO, 0, 0},
        {RLIMIT_NICE, 0, 0},
        /* With RTPRIO 0 no sandbox task is real-time, so there is nothing to bound; and 0
         * would SIGKILL ordinary tasks whenever a CPU timer of theirs fires (the kernel
         * checks it on that path too). */
        {RLIMIT_RTTIME, INF, INF},
        /* Not enforced by Linux (file lock memory is charged to the memory cgroup). */
        {RLIMIT_LOCKS, INF, INF},
        /* Not enforced since Linux 2.6. */
        {RLIMIT_RSS, INF, INF},
        {RLIMIT_AS, INF, INF},
        {RLIMIT_DATA, INF, INF},
        {RLIMIT_CPU, INF, INF},
        {RLIMIT_FSIZE, INF, INF},
        /* The usual 8 MiB soft stack; the pages count against memory.max. */
        {RLIMIT_STACK, 8 << 20, INF},
        /* RLIMIT_NPROC: set below to pids_max. It counts the processes of a uid on the
         * whole node, and each sandbox has a uid of its own (SANDBOX_HOST_UID_BASE + slot),
         * so it repeats the pids cgroup's bound per uid (PID 1, uid 0, is not counted). */
};
#undef INF

void sh_worker_spec_limits(sh_worker_spec *spec, uint64_t pids_max)
{
        size_t i;

        spec->n_rlimits = 0;
        for (i = 0; i < ARRAY_SIZE(sandbox_limits); i++)
                spec->rlimits[spec->n_rlimits++] = (sh_rlimit_spec){
                        .resource = (uint32_t)sandbox_limits[i].resource,
                        .cur = sandbox_limits[i].cur,
                        .max = sandbox_limits[i].max,
                };
        spec->rlimits[spec->n_rlimits++] = (sh_rlimit_spec){
                .resource = RLIMIT_NPROC,
                .cur = pids_max,
                .max = pids_max,
        };
}

/* ---- parent side ----------------------------------------------------------------------- */

/* Returns false when w was freed. */
static bool report_dead(sh_worker *w)
{
        if (w->reported_dead)
                return true;
        w->reported_dead = true;
        return call(w, SH_WORKER_EV_DEAD, 0, 0, 0);
}

/* PID 1 has exited and been reaped: its whole namespace is gone with it. */
static void pid1_done(sh_child *c, pid_t pid, int status, void *data)
{
        sh_worker *w = data;

        w->pid1 = NULL;
        w->dead = true;
        report_dead(w);
}

/* The fd a message carried (SCM_RIGHTS), or -1. */
static int msg_fd(struct msghdr *mh)
{
        struct cmsghdr *c = CMSG_FIRSTHDR(mh);
        int fd = -1;

        if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(sizeof(int)))
                memcpy(&fd, CMSG_DATA(c), sizeof(fd));
        return fd;
}

static void on_sock(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_worker *w = data;
        sh_msg m;

        for (;;) {
                char buf[sizeof(m) + 1]; /* one byte more: a longer datagram is not a sh_msg */
                /* One fd at most rides along (the PID message's network namespace); more are
                 * not installed (MSG_CTRUNC), and any not taken is closed below. */
                union {
                        char b[CMSG_SPACE(sizeof(int))];
                        struct cmsghdr align;
                } cbuf;
                struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
                struct msghdr mh = {.msg_iov = &iov,
                                    .msg_iovlen = 1,
                                    .msg_control = cbuf.b,
                                    .msg_controllen = sizeof(cbuf.b)};
                ssize_t n = recvmsg(w->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                _cleanup_close_ int nsfd = -1;
                bool alive = true;

                if (n >= 0)
                        nsfd = msg_fd(&mh);

                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n <= 0) { /* EOF: the worker is gone (or going) */
                        sh_loop_del_io(l, w->sock_io);
                        w->sock_io = NULL;
                        if (!report_dead(w))
                                return; /* freed: its free poked PID 1 */
                        /* PID 1 closed its end: reap it now, or once it is a zombie (its
                         * death is reported already: pid1_done tells nobody again). */
                        if (w->pid1)
                                sh_child_poke(l, w->pid1);
                        return;
                }
                if (sh_proto_decode_msg(buf, (size_t)n, &m) < 0)
                        continue; /* not ours: a sandbox cannot reach this socket, but be strict */
                switch (m.type) {
                case SH_MSG_PID:
                        if (w->pid > 0 || m.a <= 0)
                                break;
                        w->pid = m.a;
                        /* The daemon is the worker's reaper (child subreaper): no pidfd is
                         * held (sh_child_adopt); its socket's end says when it is gone. */
                        w->pid1 = sh_child_adopt(l, w->pid, pid1_done, w);
                        if (!w->pid1)
                                sh_worker_kill(w); /* gone already: EOF follows */
                        else
                                alive = call(w, SH_WORKER_EV_PID, 0, w->pid, nsfd);
                        break;
                case SH_MSG_READY:
                        alive = call(w, SH_WORKER_EV_READY, 0, 0, 0);
                        break;
                case SH_MSG_SETUP_FAILED:
                        alive = call(w, SH_WORKER_EV_FAILED, m.id, m.a, m.b);
                        break;
                case SH_MSG_VOLUME_CREATED:
                        if (m.a >= 0)
                                alive = call(w, SH_WORKER_EV_VOLUME_CREATED, (uint32_t)m.a, 0, 0);
                        break;
                case SH_MSG_STARTED:
                        alive = call(w, SH_WORKER_EV_STARTED, m.id, m.a, 0);
                        break;
                case SH_MSG_EXITED:
                        alive = call(w, SH_WORKER_EV_EXITED, m.id, m.a, m.b);
                        break;
                default:
                        break;
                }
                if (!alive || w->reported_dead)
                        return;
        }
}

static void inter_done(sh_child *c, pid_t pid, int status, void *data)
{
        sh_worker *w = data;

        w->inter = NULL;
        /* The intermediate failed before it could fork the worker. */
        if (w->pid <= 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
                if (call(w, SH_WORKER_EV_FAILED, 0, 0, 0))
                        report_dead(w);
        }
}

/* The daemon's child: exec sandbox-init at once, with nothing of the daemon but the fds it is
 * handed (sh_child_fork_fds closed the rest): 3 the control socket, 4 the spec, 5... the
 * cgroup.procs fds, then the init image, which the exec closes. No environment, a fixed
 * argv: PID 1's command line and environment are readable from inside the sandbox. */
static int inter_main(void *arg)
{
        sh_worker *w = arg;
        char *argv[] = {"sandbox-init", NULL}, *envp[] = {NULL};
        int image = SH_WORKER_PROCS_FD + w->nprocs;
        sh_msg m;

        if (fcntl(image, F_SETFD, FD_CLOEXEC) == 0)
                sh_execveat(image, "", argv, envp, AT_EMPTY_PATH);
        m = sh_proto_msg(SH_MSG_SETUP_FAILED, 0, SH_STEP_EXEC_INIT, errno);
        (void)!send(SH_WORKER_CTL_FD, &m, sizeof(m), MSG_NOSIGNAL);
        return 1;
}

/* The spec, encoded into a sealed memfd: the init reads it whole and cannot be handed a
 * changing one. */
static int spec_memfd(const sh_worker_spec *spec, sh_error **err)
{
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = -1;
        size_t len, off = 0;
        int r = sh_worker_spec_encode(spec, &buf, &len);

        if (r < 0)
                return sh_error_make(err, -r, "encoding the worker's spec");
        fd = memfd_create("sandbox-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return sh_error_make(err, errno, "memfd_create");
        while (off < len) {
                ssize_t n = write(fd, buf + off, len - off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return sh_error_make(err, n < 0 ? errno : EIO, "writing the spec");
                off += (size_t)n;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
                return sh_error_make(err, errno, "sealing the spec");
        return TAKE_FD(fd);
}

int sh_worker_start(sh_loop *l, int init_image, const sh_worker_spec *spec, const int *procs,
                    int nprocs, sh_worker_fn fn, void *data, sh_worker **ret, sh_error **err)
{
        _cleanup_free_ sh_worker_spec *copy = NULL;
        _cleanup_close_ int spec_fd = -1;
        sh_worker *w;
        int sv[2], keep[3 + SH_EXEC_MAX_PROCS_FDS], i, n = 0;

        if (nprocs < 0 || nprocs > SH_EXEC_MAX_PROCS_FDS)
                return sh_error_make(err, EINVAL, "too many cgroup hierarchies");
        copy = malloc(sizeof(*copy));
        w = calloc(1, sizeof(*w));
        if (!copy || !w) {
                free(w);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        *copy = *spec;
        copy->nprocs = nprocs;
        spec_fd = spec_memfd(copy, err);
        if (spec_fd < 0) {
                free(w);
                return -1;
        }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                free(w);
                return sh_error_make(err, errno, "socketpair");
        }
        w->loop = l;
        w->sock = sv[0];
        w->nprocs = nprocs;
        w->fn = fn;
        w->data = data;
        keep[n++] = sv[1];
        keep[n++] = spec_fd;
        for (i = 0; i < nprocs; i++)
                keep[n++] = procs[i];
        keep[n++] = init_image;
        w->inter = sh_child_fork_fds(l, keep, n, inter_main, w, inter_done, w);
        close(sv[1]);
        if (!w->inter) {
                int r = sh_error_make(err, errno, "forking the sandbox worker");

                close(w->sock);
                free(w);
                return r;
        }
        w->sock_io = sh_loop_add_io(l, w->sock, EPOLLIN, on_sock, w);
        if (!w->sock_io) {
                int r = sh_error_make(err, errno, "watching the worker socket");

                sh_worker_free(w);
                return r;
        }
        *ret = w;
        return 0;
}

int sh_worker_exec(sh_worker *w, uint32_t id, char *const *argv, char *const *envp,
                   const sh_worker_stdio *io, const int *procs, int nprocs, sh_error **err)
{
        sh_proto_cmsg cbuf;
        struct iovec iov;
        struct msghdr mh = {0};
        int fds[SH_PROTO_EXEC_FDS], n = 0, i, r;
        uint32_t flags = (io->in >= 0 ? SH_PROTO_EXEC_INPUT : 0) |
                         (io->frames >= 0 ? SH_PROTO_EXEC_FRAMES : 0) |
                         (io->shell ? SH_PROTO_EXEC_SHELL : 0);
        _cleanup_free_ char *payload = NULL;
        size_t len;

        if (w->dead || w->reported_dead)
                return sh_error_new(err, SH_E_SANDBOX_NOT_FOUND, "the sandbox worker is gone");
        if (nprocs < 0 || nprocs > SH_EXEC_MAX_PROCS_FDS)
                return sh_error_make(err, EINVAL, "too many cgroup hierarchies");
        r = sh_proto_encode_exec(id, flags, argv, envp, &payload, &len);
        if (r == -E2BIG)
                return sh_error_new(err, SH_E_INVALID, "cmd and env together exceed %d bytes",
                                    SH_EXEC_MSG_MAX);
        if (r < 0)
                return sh_error_make(err, -r, "encoding the exec request");
        /* The order sandbox-init takes them in (sh/proto.h): out, err, the flags' extra fds,
         * the procs fds. */
        fds[n++] = io->out;
        fds[n++] = io->err;
        if (io->in >= 0)
                fds[n++] = io->in;
        if (io->frames >= 0)
                fds[n++] = io->frames;
        for (i = 0; i < nprocs; i++)
                fds[n++] = procs[i];
        iov.iov_base = payload;
        iov.iov_len = len;
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        r = sh_proto_put_fds(&mh, &cbuf, n, fds);
        if (r < 0)
                return sh_error_make(err, -r, "attaching the exec's fds");
        /* SEQPACKET keeps the request whole; the worker answers STARTED and later EXITED. */
        if (sendmsg(w->sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
                return sh_error_make(err, errno, "sending the exec request to the worker");
        return 0;
}

void sh_worker_kill(sh_worker *w)
{
        if (w->pid1)
                (void)sh_child_kill(w->pid1, SIGKILL);
        if (w->inter)
                sh_child_kill(w->inter, SIGKILL);
}

pid_t sh_worker_pid(const sh_worker *w)
{
        return w && !w->dead ? w->pid : -1;
}

bool sh_worker_alive(const sh_worker *w)
{
        return w && !w->dead && !w->reported_dead;
}

void sh_worker_free(sh_worker *w)
{
        if (!w)
                return;
        if (w->in_callback) {
                w->free_pending = true;
                sh_worker_kill(w);
                return;
        }
        worker_free_now(w);
}

static void worker_free_now(sh_worker *w)
{
        sh_worker_kill(w);
        /* SIGKILL is on its way; PID 1's exit waits for the namespace to empty, so it is
         * reaped from the loop, not waited for here, and nobody is told. */
        if (w->pid1) {
                sh_child_forget(w->pid1);
                sh_child_poke(w->loop, w->pid1);
        }
        sh_loop_del_io(w->loop, w->sock_io);
        sh_close(w->sock);
        if (w->inter)
                sh_child_forget(w->inter); /* its done callback must not see w */
        free(w);
}
