/* test_worker_volumes.c: sandbox-init mounts a spec's volumes (issue 25), driven alone: the
 * test plays the daemon (a spec in a sealed memfd, the control socket, execs over it) around
 * the real sandbox-init, a root of the host's /usr and the real seccomp filter, no cgroups.
 * Inside the sandbox: a marker is read and a write shows on the host; a read-only volume
 * refuses writes; the mount is nosuid and nodev: a setuid binary in it gains nothing, a device
 * node opens nothing; a named volume is made shared (root:group 02770, a default ACL, the
 * group the execs'); and
 * every source or target that leads through a link, out of its base, to a FIFO or into a
 * read-only part of the root fails the create, naming the volume, the step and the errno.
 * Beside the volumes, the exec request's own check: an EXEC carrying fewer fds than its flags
 * name is refused (exit 125, never started). Needs root. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "sh/proto.h"
#include "sh/seccomp.h"
#include "sh/syscalls.h"
#include "sh/volquota.h"
#include "sh/worker.h" /* sh_worker_spec_limits */
#include "unit.h"

#define UID         200071
#define GID         200071
#define VOL_GID     199999
#define VOL_PROJECT 3000000512U /* the named volumes' first project id */
#define WAIT_MS     20000

static char tdir[256];
static sh_seccomp *filter;

/* ---- the daemon's part ------------------------------------------------------------------- */

typedef struct worker {
        pid_t inter;
        int sock;
        bool ready;
        int failed_id, failed_step, failed_errno; /* SETUP_FAILED, or failed_step 0 */
        int created[SH_WORKER_VOLUMES_MAX];       /* VOLUME_CREATED per index */
} worker;

static void setup(void)
{
        sh_error *err = NULL;

        ck_assert_int_eq(ut_mkdtemp(tdir, sizeof(tdir), "volumes"), 0);
        ck_assert_int_eq(chmod(tdir, 0755), 0);
        ck_assert_int_eq(mkdir(ut_path(tdir, "sb"), 0755), 0);
        ck_assert_int_eq(mkdir(ut_path(tdir, "sb/.rootfs"), 0755), 0);
        ck_assert_int_eq(mkdir(ut_path(tdir, "sb/.tmpfs"), 0700), 0);
        ck_assert_int_eq(mkdir(ut_path(tdir, "sb/workspace"), 0755), 0);
        ck_assert_int_eq(chown(ut_path(tdir, "sb/workspace"), UID, GID), 0);
        ck_assert_int_eq(mkdir(ut_path(tdir, "tools"), 0755), 0);
        ck_assert_int_eq(mkdir(ut_path(tdir, "host"), 0755), 0);
        ck_assert_int_eq(mkdir(ut_path(tdir, "host/data"), 0777), 0);
        ck_assert_int_eq(chmod(ut_path(tdir, "host/data"), 0777), 0);
        ut_write_file(ut_path(tdir, "host/data/marker"), "hello\n");
        ck_assert_int_eq(mkdir(ut_path(tdir, "vols"), 0755), 0);
        ck_assert_int_eq(mkdir(ut_path(tdir, "qvols"), 0755), 0);
        ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
        ck_assert_int_eq(sh_seccomp_build(&filter, &err), 0);
}

static void teardown(void)
{
        sh_seccomp_free(filter);
        ut_rm_rf(tdir);
}

/* The test's spec: a root of the host's /usr (bin, lib, lib64, sbin links to it, as on
 * Debian), no network, and the volumes given. */
static sh_worker_spec *make_spec(sh_volume_spec *vols, int n)
{
        static const char *const links[][2] = {{"bin", "usr/bin"},
                                               {"lib", "usr/lib"},
                                               {"lib64", "usr/lib64"},
                                               {"sbin", "usr/sbin"}};
        sh_worker_spec *s = calloc(1, sizeof(*s));

        ck_assert_ptr_nonnull(s);
        snprintf(s->hostname, sizeof(s->hostname), "sandbox");
        snprintf(s->rootfs, sizeof(s->rootfs), "%s", ut_path(tdir, "sb/.rootfs"));
        snprintf(s->workspace, sizeof(s->workspace), "%s", ut_path(tdir, "sb/workspace"));
        snprintf(s->tools, sizeof(s->tools), "%s", ut_path(tdir, "tools"));
        snprintf(s->entries[0].name, sizeof(s->entries[0].name), "usr");
        snprintf(s->entries[0].src, sizeof(s->entries[0].src), "/usr");
        s->n_entries = 1;
        for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
                sh_root_entry *e = &s->entries[s->n_entries++];

                snprintf(e->name, sizeof(e->name), "%s", links[i][0]);
                snprintf(e->target, sizeof(e->target), "%s", links[i][1]);
                e->is_link = true;
        }
        s->tmp_size = 1 << 20;
        s->ptys_max = 4;
        s->uid = UID;
        s->gid = GID;
        sh_worker_spec_limits(s, 64);
        s->seccomp = *sh_seccomp_prog(filter);
        s->volumes = vols;
        s->n_volumes = n;
        s->volume_gid = n ? VOL_GID : 0;
        s->volume_project = n ? VOL_PROJECT : 0;
        return s;
}

/* A volume of the host directory base/path at target. */
static sh_volume_spec vol(const char *base, const char *path, const char *sub, const char *target,
                          uint32_t flags)
{
        sh_volume_spec v = {.flags = flags};

        snprintf(v.base, sizeof(v.base), "%s", base);
        snprintf(v.path, sizeof(v.path), "%s", path);
        snprintf(v.sub, sizeof(v.sub), "%s", sub);
        snprintf(v.target, sizeof(v.target), "%s", target);
        return v;
}

/* One message from the worker within the bound: 0, or -1 when none came (EOF, timeout). */
static int recv_msg(worker *w, sh_msg *m)
{
        struct pollfd p = {.fd = w->sock, .events = POLLIN};
        char buf[64];
        ssize_t n;

        if (poll(&p, 1, WAIT_MS) != 1)
                return -1;
        n = recv(w->sock, buf, sizeof(buf), 0);
        if (n <= 0 || sh_proto_decode_msg(buf, (size_t)n, m) < 0)
                return -1;
        return 0;
}

/* Start sandbox-init on the spec and wait until it serves or fails. */
static void start(worker *w, sh_volume_spec *vols, int n)
{
        sh_worker_spec *s = make_spec(vols, n);
        char *buf = NULL;
        size_t len = 0;
        int sv[2], mfd;
        sh_msg m;

        memset(w, 0, sizeof(*w));
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), 0);
        free(s);
        mfd = memfd_create("spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        ck_assert_int_ge(mfd, 0);
        ck_assert_int_eq(write(mfd, buf, len), (ssize_t)len);
        free(buf);
        ck_assert_int_eq(
                fcntl(mfd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE),
                0);
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        w->inter = fork();
        ck_assert_int_ge(w->inter, 0);
        if (w->inter == 0) {
                char *argv[] = {"sandbox-init", NULL}, *envp[] = {NULL};
                /* above the fds they go to first: either may be 3 or 4 now */
                int ctl = fcntl(sv[1], F_DUPFD_CLOEXEC, 64), spec = fcntl(mfd, F_DUPFD_CLOEXEC, 64);

                if (ctl < 0 || spec < 0 || dup2(ctl, SH_WORKER_CTL_FD) < 0 ||
                    dup2(spec, SH_WORKER_SPEC_FD) < 0)
                        _exit(126);
                sh_close_from(SH_WORKER_PROCS_FD);
                execve(SH_INIT_PATH, argv, envp);
                _exit(127);
        }
        close(sv[1]);
        close(mfd);
        w->sock = sv[0];
        while (recv_msg(w, &m) == 0) {
                if (m.type == SH_MSG_READY) {
                        w->ready = true;
                        return;
                }
                if (m.type == SH_MSG_SETUP_FAILED) {
                        w->failed_id = (int)m.id;
                        w->failed_step = m.a;
                        w->failed_errno = m.b;
                        return;
                }
                if (m.type == SH_MSG_VOLUME_CREATED && m.a >= 0 && m.a < SH_WORKER_VOLUMES_MAX)
                        w->created[m.a]++;
        }
        ck_abort_msg("sandbox-init neither served nor failed");
}

/* The worker gone: its socket closed (PID 1 exits on EOF, and its namespace with it), every
 * child of ours reaped (the worker is ours: subreaper). */
static void stop(worker *w)
{
        close(w->sock);
        ck_assert_int_ge(ut_wait_pid(w->inter, WAIT_MS), 0);
        for (;;) {
                pid_t pid = waitpid(-1, NULL, WNOHANG);

                if (pid > 0)
                        continue;
                if (pid < 0)
                        break;
                ut_sleep_ms(20); /* the worker still exiting */
        }
}

/* Run `sh -c script` in the sandbox: its output and error together in out, the exit code. */
static int run(worker *w, const char *script, char *out, size_t size)
{
        static uint32_t next_id = 1;
        char *argv[] = {"/bin/sh", "-c", (char *)script, NULL}, *envp[] = {"PATH=/usr/bin", NULL};
        char *buf = NULL;
        size_t len = 0, off = 0;
        int pipefd[2], fds[2];
        sh_proto_cmsg cbuf;
        struct iovec iov;
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        uint32_t id = next_id++;
        sh_msg m;

        ck_assert(w->ready);
        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        ck_assert_int_eq(sh_proto_encode_exec(id, 0, argv, envp, &buf, &len), 0);
        iov.iov_base = buf;
        iov.iov_len = len;
        fds[0] = fds[1] = pipefd[1];
        ck_assert_int_eq(sh_proto_put_fds(&mh, &cbuf, 2, fds), 0);
        ck_assert_int_eq(sendmsg(w->sock, &mh, 0), (ssize_t)len);
        free(buf);
        close(pipefd[1]);
        for (;;) {
                struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
                ssize_t n;

                ck_assert_int_eq(poll(&p, 1, WAIT_MS), 1);
                n = read(pipefd[0], out + off, size - 1 - off);
                ck_assert_int_ge(n, 0);
                if (n == 0)
                        break;
                off += (size_t)n;
                ck_assert_uint_lt(off, size - 1);
        }
        out[off] = '\0';
        close(pipefd[0]);
        do
                ck_assert_int_eq(recv_msg(w, &m), 0);
        while (!(m.type == SH_MSG_EXITED && m.id == id));
        ck_assert(WIFEXITED(m.a));
        return WEXITSTATUS(m.a);
}

/* The volume fails to start: which one, at which step, with which errno. */
static void assert_fails(sh_volume_spec *vols, int n, int index, int step, int err)
{
        worker w;

        start(&w, vols, n);
        ck_assert_msg(!w.ready, "the sandbox started");
        ck_assert_int_eq(w.failed_id, index);
        ck_assert_msg(w.failed_step == step, "step %d (%s), want %d", w.failed_step,
                      sh_worker_step_name(w.failed_step), step);
        ck_assert_msg(w.failed_errno == err, "errno %d (%s), want %d (%s)", w.failed_errno,
                      strerror(w.failed_errno), err, strerror(err));
        stop(&w);
}

/* ---- what a volume gives -------------------------------------------------------------- */

/* The worker takes an EXEC's fds by its flags (out, err, input, frames, procs): one short of
 * them is refused before any fork, as a malformed request. */
START_TEST(test_an_exec_short_of_the_fds_its_flags_name_is_refused)
{
        char *argv[] = {"/bin/true", NULL}, *envp[] = {NULL};
        char *buf = NULL;
        size_t len = 0;
        int pipefd[2], fds[3];
        sh_proto_cmsg cbuf;
        struct iovec iov;
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        worker w;
        sh_msg m;

        start(&w, NULL, 0);
        ck_assert(w.ready);
        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        ck_assert_int_eq(sh_proto_encode_exec(41, SH_PROTO_EXEC_INPUT | SH_PROTO_EXEC_FRAMES, argv,
                                              envp, &buf, &len),
                         0);
        iov.iov_base = buf;
        iov.iov_len = len;
        fds[0] = fds[1] = fds[2] = pipefd[1];
        /* three fds where out, err, input and frames make four */
        ck_assert_int_eq(sh_proto_put_fds(&mh, &cbuf, 3, fds), 0);
        ck_assert_int_eq(sendmsg(w.sock, &mh, 0), (ssize_t)len);
        free(buf);
        close(pipefd[1]);
        ck_assert_int_eq(recv_msg(&w, &m), 0);
        ck_assert_uint_eq(m.type, SH_MSG_EXITED);
        ck_assert_uint_eq(m.id, 41);
        ck_assert(WIFEXITED(m.a) && WEXITSTATUS(m.a) == 125);
        /* the worker closed what it got: nothing holds the pipe's write end */
        ck_assert_int_eq(read(pipefd[0], fds, 1), 0);
        close(pipefd[0]);
        stop(&w);
}
END_TEST

START_TEST(test_a_volume_is_read_and_written_through)
{
        sh_volume_spec v[] = {vol(ut_path(tdir, "host"), "data", "", "/mnt/data", 0)};
        char out[4096], line[64] = "";
        worker w;
        FILE *f;

        start(&w, v, 1);
        ck_assert_int_eq(
                run(&w, "cat /mnt/data/marker && echo written >/mnt/data/new", out, sizeof(out)),
                0);
        ck_assert_str_eq(out, "hello\n");
        stop(&w);
        f = fopen(ut_path(tdir, "host/data/new"), "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
        fclose(f);
        ck_assert_str_eq(line, "written\n");
}
END_TEST

START_TEST(test_a_read_only_volume_refuses_writes)
{
        sh_volume_spec v[] = {vol(ut_path(tdir, "host"), "data", "", "/mnt/data", SH_VOL_RDONLY)};
        char out[4096];
        worker w;

        start(&w, v, 1);
        ck_assert_int_ne(run(&w, "cat /mnt/data/marker; echo x >/mnt/data/new", out, sizeof(out)),
                         0);
        ck_assert_msg(strstr(out, "hello\n") && strstr(out, "Read-only file system"), "%s", out);
        stop(&w);
        ck_assert_int_eq(access(ut_path(tdir, "host/data/new"), F_OK), -1);
}
END_TEST

/* The mount's flags as the sandbox's mountinfo has them, and a setuid-root copy of id(1) in
 * the volume runs as the sandbox's uid. */
START_TEST(test_a_volume_is_nosuid_and_nodev)
{
        sh_volume_spec v[] = {vol(ut_path(tdir, "host"), "data", "", "/mnt/data", SH_VOL_RDONLY)};
        char out[4096], cmd[512];
        worker w;

        snprintf(cmd, sizeof(cmd), "cp /usr/bin/id %s && chmod 4755 %s",
                 ut_path(tdir, "host/data/id"), ut_path(tdir, "host/data/id"));
        ck_assert_int_eq(system(cmd), 0);
        ck_assert_int_eq(mknod(ut_path(tdir, "host/data/null"), S_IFCHR | 0666, makedev(1, 3)), 0);
        start(&w, v, 1);
        ck_assert_int_eq(run(&w, "grep ' /mnt/data ' /proc/self/mountinfo", out, sizeof(out)), 0);
        ck_assert_msg(strstr(out, "nosuid") && strstr(out, "nodev") && strstr(out, " ro,"), "%s",
                      out);
        ck_assert_int_eq(run(&w, "/mnt/data/id -u", out, sizeof(out)), 0);
        ck_assert_str_eq(out, "200071\n");
        /* a device node written into it opens nothing */
        ck_assert_int_ne(run(&w, "cat /mnt/data/null", out, sizeof(out)), 0);
        ck_assert_msg(strstr(out, "Permission denied"), "%s", out);
        /* and the sandbox cannot take the mount away */
        ck_assert_int_ne(run(&w, "umount /mnt/data", out, sizeof(out)), 0);
        ck_assert_int_eq(run(&w, "cat /mnt/data/marker", out, sizeof(out)), 0);
        ck_assert_str_eq(out, "hello\n");
        stop(&w);
}
END_TEST

START_TEST(test_a_named_volume_is_made_shared_and_reported)
{
        sh_volume_spec v[] = {
                vol(ut_path(tdir, "vols"), "claim", "", "/workspace/shared",
                    SH_VOL_CREATE | SH_VOL_NAMED),
                vol(ut_path(tdir, "vols"), "claim", "sub/dir", "/mnt/sub", SH_VOL_NAMED)};
        char out[4096];
        struct stat st;
        worker w;

        start(&w, v, 2);
        ck_assert(w.ready);
        ck_assert_int_eq(w.created[0], 1);
        ck_assert_int_eq(w.created[1], 0);
        ck_assert_int_eq(stat(ut_path(tdir, "vols/claim"), &st), 0);
        ck_assert_uint_eq(st.st_uid, 0);
        ck_assert_uint_eq(st.st_gid, VOL_GID);
        ck_assert_uint_eq(st.st_mode & 07777, 02770);
        /* a subPath made inside it inherits the group */
        ck_assert_int_eq(stat(ut_path(tdir, "vols/claim/sub/dir"), &st), 0);
        ck_assert_uint_eq(st.st_gid, VOL_GID);
        ck_assert_uint_eq(st.st_mode & 07777, 02770);
        if (getxattr(ut_path(tdir, "vols/claim"), "system.posix_acl_default", NULL, 0) < 0)
                ck_assert_int_eq(errno, EOPNOTSUPP);
        /* the execs have the group, and what they write is the group's, read-write */
        ck_assert_int_eq(run(&w, "id -G", out, sizeof(out)), 0);
        ck_assert_str_eq(out, "200071 199999\n");
        ck_assert_int_eq(run(&w, "umask 077; echo x >/workspace/shared/f && echo y >/mnt/sub/g",
                             out, sizeof(out)),
                         0);
        stop(&w);
        ck_assert_int_eq(stat(ut_path(tdir, "vols/claim/f"), &st), 0);
        ck_assert_uint_eq(st.st_uid, UID);
        ck_assert_uint_eq(st.st_gid, VOL_GID);
        if (getxattr(ut_path(tdir, "vols/claim"), "system.posix_acl_default", NULL, 0) > 0)
                ck_assert_uint_eq(st.st_mode & 070, 060); /* the default ACL, not the umask */
        ck_assert_int_eq(access(ut_path(tdir, "vols/claim/sub/dir/g"), F_OK), 0);
        /* a second sandbox finds it there: nothing made, nothing reported */
        start(&w, v, 1);
        ck_assert(w.ready);
        ck_assert_int_eq(w.created[0], 0);
        stop(&w);
}
END_TEST

/* pvc.storage on a claim the worker makes: where the test's directory has no project quota
 * (this machine: tests/vm has the case where it has), the volume fails at its quota step and
 * the directory just made is gone; where it has, the claim has a project id of the range. */
START_TEST(test_a_claim_whose_quota_cannot_be_set_fails_and_is_removed)
{
        sh_volume_spec v[] = {vol(ut_path(tdir, "qvols"), "sized", "", "/mnt/sized",
                                  SH_VOL_CREATE | SH_VOL_NAMED)};
        char why[300];
        int fd = open(ut_path(tdir, "qvols"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        bool held = fd >= 0 && sh_volquota_probe(fd, "the test's directory", why, sizeof(why)) == 0;
        struct fsxattr fx = {0};
        worker w;

        ck_assert_int_ge(fd, 0);
        v[0].quota = 2 << 20;
        start(&w, v, 1);
        if (held) {
                ck_assert(w.ready);
                stop(&w);
                close(fd);
                fd = open(ut_path(tdir, "qvols/sized"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ck_assert_int_eq(ioctl(fd, FS_IOC_FSGETXATTR, &fx), 0);
                ck_assert_uint_ge(fx.fsx_projid, VOL_PROJECT);
                ck_assert_uint_lt(fx.fsx_projid, VOL_PROJECT + SH_VOLQUOTA_IDS);
        } else {
                ck_assert_msg(!w.ready, "the sandbox started");
                ck_assert_int_eq(w.failed_id, 0);
                ck_assert_msg(w.failed_step == SH_STEP_VOLUME_QUOTA, "step %s",
                              sh_worker_step_name(w.failed_step));
                ck_assert_int_ne(w.failed_errno, 0);
                ck_assert_int_eq(w.created[0], 0);
                stop(&w);
                ck_assert_int_eq(access(ut_path(tdir, "qvols/sized"), F_OK), -1);
                ck_assert_int_eq(errno, ENOENT);
        }
        close(fd);
}
END_TEST

START_TEST(test_volumes_nest_in_their_order)
{
        sh_volume_spec v[] = {vol(ut_path(tdir, "host"), "data", "", "/mnt/a", 0),
                              vol(ut_path(tdir, "vols"), "c", "", "/mnt/a/inner/b",
                                  SH_VOL_CREATE | SH_VOL_NAMED)};
        char out[4096];
        worker w;

        start(&w, v, 2);
        ck_assert_int_eq(run(&w, "echo z >/mnt/a/inner/b/z && cat /mnt/a/marker", out, sizeof(out)),
                         0);
        ck_assert_str_eq(out, "hello\n");
        stop(&w);
        /* the inner mount point was made in the outer volume, the file in the inner one */
        ck_assert_int_eq(access(ut_path(tdir, "host/data/inner/b"), F_OK), 0);
        ck_assert_int_eq(access(ut_path(tdir, "vols/c/z"), F_OK), 0);
        ck_assert_int_eq(access(ut_path(tdir, "host/data/inner/b/z"), F_OK), -1);
}
END_TEST

/* ---- what is refused ------------------------------------------------------------------ */

START_TEST(test_a_missing_source_is_enoent)
{
        sh_volume_spec v[] = {vol(ut_path(tdir, "host"), "data", "", "/mnt/a", 0),
                              vol(ut_path(tdir, "host"), "absent", "", "/mnt/b", 0)};
        sh_volume_spec claim[] = {vol(ut_path(tdir, "vols"), "absent", "", "/mnt/c", SH_VOL_NAMED)};
        sh_volume_spec ro_sub[] = {
                vol(ut_path(tdir, "host"), "data", "new", "/mnt/d", SH_VOL_RDONLY)};

        assert_fails(v, 2, 1, SH_STEP_VOLUME_SOURCE, ENOENT);
        /* a claim without createIfNotExists */
        assert_fails(claim, 1, 0, SH_STEP_VOLUME_SOURCE, ENOENT);
        ck_assert_int_eq(access(ut_path(tdir, "vols/absent"), F_OK), -1);
        /* a read-only volume's missing subPath is not made */
        assert_fails(ro_sub, 1, 0, SH_STEP_VOLUME_SOURCE, ENOENT);
        ck_assert_int_eq(access(ut_path(tdir, "host/data/new"), F_OK), -1);
}
END_TEST

START_TEST(test_a_host_path_linking_out_of_its_base_is_refused)
{
        sh_volume_spec abs[] = {vol(ut_path(tdir, "host"), "etc", "", "/mnt/a", 0)};
        sh_volume_spec rel[] = {vol(ut_path(tdir, "host"), "up/x", "", "/mnt/a", 0)};

        ck_assert_int_eq(symlink("/etc", ut_path(tdir, "host/etc")), 0);
        ck_assert_int_eq(mkdir(ut_path(tdir, "host/up"), 0755), 0);
        ck_assert_int_eq(symlink("../../vols", ut_path(tdir, "host/up/x")), 0);
        assert_fails(abs, 1, 0, SH_STEP_VOLUME_SOURCE, EXDEV);
        assert_fails(rel, 1, 0, SH_STEP_VOLUME_SOURCE, EXDEV);
}
END_TEST

START_TEST(test_a_link_inside_the_base_is_followed_but_not_as_subpath)
{
        sh_volume_spec path[] = {vol(ut_path(tdir, "host"), "alias", "", "/mnt/a", 0)};
        sh_volume_spec sub[] = {vol(ut_path(tdir, "host"), ".", "alias", "/mnt/a", 0)};
        sh_volume_spec deep[] = {vol(ut_path(tdir, "host"), "data", "in/link/x", "/mnt/a", 0)};
        char out[4096];
        worker w;

        ck_assert_int_eq(symlink("data", ut_path(tdir, "host/alias")), 0);
        ck_assert_int_eq(mkdir(ut_path(tdir, "host/data/in"), 0755), 0);
        ck_assert_int_eq(symlink("/etc", ut_path(tdir, "host/data/in/link")), 0);
        start(&w, path, 1);
        ck_assert_int_eq(run(&w, "cat /mnt/a/marker", out, sizeof(out)), 0);
        ck_assert_str_eq(out, "hello\n");
        stop(&w);
        assert_fails(sub, 1, 0, SH_STEP_VOLUME_SOURCE, ELOOP);
        assert_fails(deep, 1, 0, SH_STEP_VOLUME_SOURCE, ELOOP);
        ck_assert_int_eq(access("/etc/x", F_OK), -1);
}
END_TEST

START_TEST(test_a_fifo_or_a_file_is_not_a_volume)
{
        sh_volume_spec fifo[] = {vol(ut_path(tdir, "host"), "fifo", "", "/mnt/a", 0)};
        sh_volume_spec file[] = {vol(ut_path(tdir, "host"), "data", "marker", "/mnt/a", 0)};

        ck_assert_int_eq(mkfifo(ut_path(tdir, "host/fifo"), 0666), 0);
        assert_fails(fifo, 1, 0, SH_STEP_VOLUME_SOURCE, ENOTDIR);
        assert_fails(file, 1, 0, SH_STEP_VOLUME_SOURCE, ENOTDIR);
}
END_TEST

START_TEST(test_a_mount_path_through_a_link_or_a_read_only_part_is_refused)
{
        /* bin is a link of the root (to usr/bin) */
        sh_volume_spec link[] = {vol(ut_path(tdir, "host"), "data", "", "/bin/x", 0)};
        sh_volume_spec ro[] = {vol(ut_path(tdir, "host"), "data", "", "/usr/volume", 0)};
        /* a link in a volume mounted before: the first volume's directory has one to / */
        sh_volume_spec nested[] = {vol(ut_path(tdir, "host"), "data", "", "/mnt/a", 0),
                                   vol(ut_path(tdir, "host"), "data", "", "/mnt/a/root/etc", 0)};

        ck_assert_int_eq(symlink("/", ut_path(tdir, "host/data/root")), 0);
        assert_fails(link, 1, 0, SH_STEP_VOLUME_TARGET, ELOOP);
        assert_fails(ro, 1, 0, SH_STEP_VOLUME_TARGET, EROFS);
        assert_fails(nested, 2, 1, SH_STEP_VOLUME_TARGET, ELOOP);
}
END_TEST

static Suite *volumes_suite(void)
{
        Suite *s = suite_create("worker_volumes");
        TCase *tc = tcase_create("mounts");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_a_volume_is_read_and_written_through);
        tcase_add_test(tc, test_a_read_only_volume_refuses_writes);
        tcase_add_test(tc, test_a_volume_is_nosuid_and_nodev);
        tcase_add_test(tc, test_a_named_volume_is_made_shared_and_reported);
        tcase_add_test(tc, test_volumes_nest_in_their_order);
        suite_add_tcase(s, tc);

        tc = tcase_create("refused");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_a_missing_source_is_enoent);
        tcase_add_test(tc, test_a_host_path_linking_out_of_its_base_is_refused);
        tcase_add_test(tc, test_a_link_inside_the_base_is_followed_but_not_as_subpath);
        tcase_add_test(tc, test_a_fifo_or_a_file_is_not_a_volume);
        tcase_add_test(tc, test_a_mount_path_through_a_link_or_a_read_only_part_is_refused);
        tcase_add_test(tc, test_a_claim_whose_quota_cannot_be_set_fails_and_is_removed);
        suite_add_tcase(s, tc);

        tc = tcase_create("exec");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_an_exec_short_of_the_fds_its_flags_name_is_refused);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        int r = ut_need_root("sandbox-init mounts, unshares namespaces and pivots");

        if (r)
                return r;
        return ut_run_forked(volumes_suite());
}
