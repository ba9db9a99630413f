/* unpacker.c: the confinement steps every archive unpacker's child takes (sh/unpacker.h). */
#include "sh/unpacker.h"

#include <errno.h>
#include <fcntl.h>
#include <iconv.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/caps.h"
#include "sh/jail.h"
#include "sh/util.h"

#define NEWROOT "/tmp" /* shadowed by the unpacker's tmpfs, in its own mount namespace only */
#define OUT_DIR "out"  /* where the staging directory appears in the unpacker's root */

/* Fitted to what libarchive 3.6, zlib and libzstd call to read a compressed tar from an fd
 * and write its entries below the working directory (traced with strace over the contract
 * tests, sanitizer build included), plus the calls of the entry kinds the rules allow that
 * those archives do not reach (rmdir and unlink when a later entry replaces an earlier one,
 * ftruncate for a sparse file's tail, chmod for a directory's mode fixed up at the end). Not
 * there, among others: socket and every network call, execve, fork and clone, kill, ptrace,
 * mount, chown, ioctl, setxattr, prctl, and any mapping with PROT_EXEC: no code can be loaded,
 * whatever libc tries. */
const sh_seccomp_allow sh_unpacker_syscalls[] = {
        /* the archive, and the tree it becomes */
        {"read", -1, 0, 0},
        {"write", -1, 0, 0},
        {"lseek", -1, 0, 0},
        {"close", -1, 0, 0},
        {"openat", -1, 0, 0},
        {"fcntl", -1, 0, 0},
        {"newfstatat", -1, 0, 0},
        {"mkdir", -1, 0, 0},
        {"symlink", -1, 0, 0},
        {"linkat", -1, 0, 0},
        {"unlink", -1, 0, 0},
        {"rmdir", -1, 0, 0},
        {"ftruncate", -1, 0, 0},
        {"fchmod", -1, 0, 0},
        {"chmod", -1, 0, 0},
        {"utimensat", -1, 0, 0},
        {"umask", -1, 0, 0},
        {"geteuid", -1, 0, 0},
        /* memory for libarchive and the decompressors, never executable */
        {"brk", -1, 0, 0},
        {"mmap", 2, PROT_EXEC, 0},
        {"mprotect", 2, PROT_EXEC, 0},
        {"munmap", -1, 0, 0},
        {"mremap", -1, 0, 0},
        /* libc (a once-initialiser's wake-up, abort's first steps), the sanitizer build's
         * no-return hook (a query of the signal stack), and the end */
        {"futex", -1, 0, 0},
        {"getpid", -1, 0, 0},
        {"gettid", -1, 0, 0},
        {"rt_sigprocmask", -1, 0, 0},
        {"sigaltstack", 0, ~0ull, 0},
        {"exit_group", -1, 0, 0},
};
const size_t sh_unpacker_n_syscalls = ARRAY_SIZE(sh_unpacker_syscalls);

int sh_unpacker_fail(int fd, const char *fmt, ...)
{
        char buf[512];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (n > 0)
                (void)!write(fd, buf, strlen(buf));
        return 1;
}

static int step_fail(int fd, const char *step)
{
        return sh_unpacker_fail(fd, "this host could not confine the unpacker: %s: %s", step,
                                strerror(errno));
}

int sh_unpacker_limit(int res, uint64_t v)
{
        struct rlimit rl = {(rlim_t)v, (rlim_t)v};

        return setrlimit(res, &rl);
}

int sh_unpacker_read_reason(int fd, char *buf, size_t size)
{
        ssize_t n = read(fd, buf, size - 1);

        buf[n > 0 ? n : 0] = '\0';
        for (ssize_t i = 0; i < n; i++)
                if (buf[i] < 0x20 || buf[i] > 0x7e)
                        buf[i] = '?';
        return sh_close(fd);
}

/* stdin and stdout lead nowhere; stderr (where libc, and the sanitizer build, report
 * trouble) goes into the reason pipe. Nothing of the unpacker reaches the daemon's log
 * directly. */
static int quiet_stdio(int reason)
{
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

        if (fd < 0)
                return -1;
        if (dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(reason, 2) < 0) {
                close(fd);
                return -1;
        }
        close(fd);
        return 0;
}

/* glibc sets up some machinery on first use by reading files at fixed paths: the locale
 * (LC_CTYPE decides which charset libarchive converts names to) and iconv's configuration
 * (gconv-modules, read once per process). Both are loaded here, from the host's files,
 * before the root changes. In a UTF-8 locale libarchive copies UTF-8 names without calling
 * iconv at all (and glibc's UTF-8 conversions are built in): legitimate non-ASCII names
 * unpack byte for byte. Afterwards the paths glibc would look at do not exist. Nothing else
 * is needed: no NSS (owners are never looked up by name), no time zone. */
static int prepare_libc(int reason)
{
        iconv_t cd;

        if (!setlocale(LC_CTYPE, "C.UTF-8"))
                return sh_unpacker_fail(reason,
                                        "this host has no C.UTF-8 locale (glibc's libc-bin): the "
                                        "unpacker needs it for non-ASCII names");
        if (strcmp(nl_langinfo(CODESET), "UTF-8") != 0)
                return sh_unpacker_fail(reason, "this host's C.UTF-8 locale is not UTF-8 ('%s')",
                                        nl_langinfo(CODESET));
        cd = iconv_open("UTF-8", "UTF-8");
        if (cd == (iconv_t)-1)
                return step_fail(reason, "initialise iconv");
        iconv_close(cd);
        return 0;
}

/* The unpacker's root: an empty tmpfs, read-only once set up, with the staging directory
 * bound at /out (writable by the unpacker's uid, but noexec, nosuid, nodev). No /proc, no
 * /dev, no /usr: not one path of the host, and not one file of the archive at a system path.
 * The staging directory is opened again by its path in our namespace (the daemon owns every
 * component of it; the inode is checked) before the tmpfs may hide it. */
static int build_root(const sh_unpacker_confinement *c)
{
        _cleanup_close_ int fd = -1;

        if (sh_jail_private() < 0)
                return step_fail(c->reason, "make mounts private");
        fd = sh_jail_reopen_dir(c->stage);
        if (fd < 0)
                return step_fail(c->reason, "open the staging directory");
        if (sh_jail_tmpfs_root(NEWROOT) < 0)
                return step_fail(c->reason, "mount the root tmpfs");
        if (sh_jail_bind_fd(fd, NEWROOT "/" OUT_DIR, SH_JAIL_NOEXEC) < 0)
                return step_fail(c->reason, "bind the staging directory");
        fd = sh_close(fd);
        close(c->stage);
        if (sh_jail_enter(NEWROOT) < 0)
                return step_fail(c->reason, "pivot_root");
        if (chdir("/" OUT_DIR) < 0)
                return step_fail(c->reason, "enter the staging directory");
        return 0;
}

/* The steps, in order; the filter last, since every step before needs calls it forbids.
 * RLIMIT_CPU's SIGXCPU is ignored by a namespace's PID 1, but the hard limit's SIGKILL is
 * not; a decompression bomb or a looping archive dies on these instead of filling the disk
 * or spinning. */
int sh_unpacker_confine(const sh_unpacker_confinement *c)
{
        const char *step = NULL;
        int r;

        r = sh_jail_join_cgroup(c->procs, c->nprocs);
        if (r < 0) {
                errno = -r;
                return step_fail(c->reason, "join the unpacker's cgroup");
        }
        /* The daemon gone, the unpacker goes too (and with PID 1, its namespace). */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return step_fail(c->reason, "parent death signal");
        if (quiet_stdio(c->reason) < 0)
                return step_fail(c->reason, "redirect stdio");
        if (prepare_libc(c->reason) != 0)
                return 1;
        if (build_root(c) != 0)
                return 1;
        if (sh_unpacker_limit(RLIMIT_FSIZE, c->fsize_max) < 0 ||
            sh_unpacker_limit(RLIMIT_CPU, c->cpu_s) < 0 || sh_unpacker_limit(RLIMIT_CORE, 0) < 0 ||
            sh_unpacker_limit(RLIMIT_NOFILE, 64) < 0)
                return step_fail(c->reason, "set limits");
        /* Bounding set, securebits, groups, uid and gid, every capability set, no_new_privs. */
        r = sh_caps_drop_to(c->uid, c->uid, &step);
        if (r < 0) {
                errno = -r;
                return step_fail(c->reason, step ? step : "drop privileges");
        }
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return step_fail(c->reason, "prctl");
        umask(022);
        r = sh_seccomp_load(c->filter);
        if (r < 0) {
                errno = -r;
                return step_fail(c->reason, "load the system call filter");
        }
        return 0;
}
