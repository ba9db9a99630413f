/* unpack-child.c: the tool unpacker's children: confinement steps, extraction, the tree handed to root. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/caps.h"
#include "sh/macro.h"
#include "sh/tree.h"
#include "sh/util.h"
#include "sh/jail.h"
#include "sh/unpacker.h"
#include "policy.h"
#include "unpack-internal.h"

/*
 * A bundle is hostile data. The unpacker parses it with libarchive, and whatever a parser
 * bug or a libc quirk could make of it must stay inside a process that can do nothing but
 * write into its own staging directory. Each of these stops one way out:
 *
 *  - Nothing of the bundle is ever a system path of the process. glibc reads files at fixed
 *    paths on first use (iconv's gconv-modules and the modules it names, locales, time
 *    zones); once the root was the staging directory, a bundle shipping
 *    usr/lib/x86_64-linux-gnu/gconv/ had glibc dlopen its code (issue 10). The unpacker's
 *    root is an empty read-only tmpfs; the staging directory is mounted at /out, noexec,
 *    nosuid, nodev. The libc machinery that loads files lazily is started before the root
 *    changes, from the host's own files, in a UTF-8 locale (so that non-ASCII names are a
 *    plain copy and iconv is never needed for them).
 *  - New PID, network, IPC and UTS namespaces: no process of the host to signal or trace,
 *    no network at all (a fresh namespace has only a loopback device, down), no SysV IPC
 *    of the host. The unpacker is PID 1 of its namespace: when it exits the kernel kills
 *    whatever is left in it, and once the daemon has reaped it nothing of it is alive.
 *  - Its own cgroup below {subtree}/tools, with memory, pids and CPU limits.
 *  - No privilege: the uid below the sandbox range (SANDBOX_HOST_UID_BASE - 1) that owns
 *    nothing but the staging directory, no capabilities, no_new_privs, not dumpable,
 *    rlimits on file size, CPU time, fds and cores.
 *  - A seccomp allow-list of what libarchive and zlib call to read a stream and write a
 *    tree; everything else fails with EPERM (visible in the reason), and no memory can be
 *    mapped executable, so no code can be loaded even if something tried.
 *
 * After the unpacker is gone, a second child hands every entry of the tree to root (never
 * following a link) before the tree is renamed into the store.
 */

int sh_unpack_filter_build(sh_seccomp **ret, sh_error **err)
{
        return sh_seccomp_build_allowlist(sh_unpacker_syscalls, sh_unpacker_n_syscalls, EPERM, ret,
                                          err);
}

/* ---- the unpacker ------------------------------------------------------------------ */

static int reason_fd = FD_REASON;

_printf_(1, 2) static int child_fail(const char *fmt, ...)
{
        char buf[SH_TOOLS_REASON_MAX];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        return sh_unpacker_fail(reason_fd, "%s", buf);
}

static int step_fail(const char *step)
{
        return child_fail("this host could not confine the unpacker: %s: %s", step,
                          strerror(errno));
}

/* The shared steps (sh/unpacker.h), with the tool unpacker's limits. */
static int confine(const sh_unpack_child_arg *a)
{
        const sh_unpacker_confinement c = {
                .procs = FD_PROCS,
                .nprocs = a->nprocs,
                .stage = FD_STAGE,
                .reason = FD_REASON,
                .uid = a->uid,
                .fsize_max = SH_TOOLS_UNPACKED_MAX,
                .cpu_s = SH_TOOLS_UNPACK_TIMEOUT_MS / 1000,
                .filter = a->filter,
        };

        return sh_unpacker_confine(&c);
}

static int copy_data(struct archive *in, struct archive *out)
{
        const void *buf;
        size_t size;
        la_int64_t off;
        int r;

        for (;;) {
                r = archive_read_data_block(in, &buf, &size, &off);
                if (r == ARCHIVE_EOF)
                        return ARCHIVE_OK;
                if (r < ARCHIVE_OK)
                        return r;
                if (archive_write_data_block(out, buf, size, off) < ARCHIVE_OK)
                        return ARCHIVE_FAILED;
        }
}

int sh_unpack_extract(void)
{
        struct archive *in = archive_read_new(), *out = archive_write_disk_new();
        sh_bundle_policy *pol = sh_bundle_policy_new();
        struct archive_entry *e;
        mode_t perm;
        int r, rc = 1;
        char q[160];

        if (!in || !out || !pol) {
                child_fail("this host is out of memory");
                goto out;
        }
        /* A bundle is tar, gzip-compressed: nothing else is even tried. ARCHIVE_WARN would
         * mean "through an external gzip program": not in here. */
        if (archive_read_support_filter_gzip(in) != ARCHIVE_OK ||
            archive_read_support_format_tar(in) != ARCHIVE_OK) {
                child_fail("this host's libarchive cannot read gzip-compressed tar by itself");
                goto out;
        }
        /* libarchive's own guards on top of ours; no owners, ACLs, xattrs or flags restored. */
        archive_write_disk_set_options(out, ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                    ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
                                                    ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME);
        if (lseek(FD_BUNDLE, 0, SEEK_SET) < 0) {
                child_fail("this host could not read the bundle: %s", strerror(errno));
                goto out;
        }
        if (archive_read_open_fd(in, FD_BUNDLE, 65536) != ARCHIVE_OK) {
                child_fail("unsafe bundle: not a gzip-compressed tar archive (%s)",
                           archive_error_string(in) ? archive_error_string(in) : "unreadable");
                goto out;
        }
        /* libarchive's gzip support passes data that is not gzip through unchanged: a plain
         * tar would unpack. The filter chain actually used must be exactly gzip (then the
         * raw file, "none"), as CONTRACT.md section 6 says. */
        if (archive_filter_count(in) != 2 || archive_filter_code(in, 0) != ARCHIVE_FILTER_GZIP) {
                child_fail("unsafe bundle: not gzip-compressed (a bundle is a .tar.gz; this one "
                           "is read through '%s')",
                           archive_filter_name(in, 0) ? archive_filter_name(in, 0) : "?");
                goto out;
        }
        while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
                const sh_bundle_entry be = {
                        .path = archive_entry_pathname(e),
                        .hardlink = archive_entry_hardlink(e),
                        .symlink = archive_entry_filetype(e) == AE_IFLNK ? archive_entry_symlink(e)
                                                                         : NULL,
                        .type = archive_entry_filetype(e),
                        .size = archive_entry_size(e),
                        .perm = archive_entry_perm(e),
                };
                sh_bundle_verdict v = sh_bundle_check(pol, &be, &perm);

                sh_quote_printable(be.path, q, sizeof(q));
                if (v == SH_BUNDLE_SKIP)
                        continue; /* "./": the bundle root itself */
                if (v != SH_BUNDLE_TAKE) {
                        char why[SH_TOOLS_REASON_MAX];

                        sh_bundle_reason(v, be.path, why, sizeof(why));
                        child_fail("%s", why);
                        goto out;
                }
                archive_entry_set_perm(e, perm);
                if (archive_write_header(out, e) < ARCHIVE_OK) {
                        child_fail("unsafe bundle: entry '%s' refused: %s", q,
                                   archive_error_string(out) ? archive_error_string(out) : "");
                        goto out;
                }
                if (archive_entry_size(e) > 0 && copy_data(in, out) != ARCHIVE_OK) {
                        child_fail("unsafe bundle: entry '%s' could not be unpacked: %s", q,
                                   archive_error_string(in) ? archive_error_string(in) : "");
                        goto out;
                }
                if (archive_write_finish_entry(out) < ARCHIVE_OK) {
                        child_fail("unsafe bundle: entry '%s' could not be finished: %s", q,
                                   archive_error_string(out) ? archive_error_string(out) : "");
                        goto out;
                }
        }
        if (r != ARCHIVE_EOF) {
                child_fail("unsafe bundle: corrupt or not a gzip-compressed tar archive (%s)",
                           archive_error_string(in) ? archive_error_string(in) : "unreadable");
                goto out;
        }
        if (archive_write_close(out) < ARCHIVE_OK) {
                child_fail("unsafe bundle: finishing the unpack failed: %s",
                           archive_error_string(out) ? archive_error_string(out) : "");
                goto out;
        }
        rc = 0;
out:
        archive_read_free(in);
        archive_write_free(out);
        sh_bundle_policy_free(pol);
        return rc;
}

int sh_unpack_child_main(void *arg)
{
        const sh_unpack_child_arg *a = arg;

        if (confine(a) != 0)
                return 1;
        return a->payload();
}

/* ---- the finisher: the tree handed to root ----------------------------------------- */

/* Runs as root in the daemon's namespaces, in the unpack's cgroup, once nothing of the
 * unpacker is alive (nothing can change the tree under it). Every entry, the top directory
 * included, is re-owned with fchownat(AT_SYMLINK_NOFOLLOW) relative to its directory, opened
 * O_NOFOLLOW (sh/tree.h): no link is ever followed, and the tree cannot hold a link to the
 * host anyway (the unpacker could name nothing else). A directory deeper than an entry may be,
 * or a special file that the unpacker could not have made, refuses the bundle. One fd per
 * level, at most SH_UNPACK_MAX_DEPTH + 1 levels. */
/* Stop the walk after child_fail wrote why (its 1 as the walk's -1). */
static int refuse(bool *told, int rc)
{
        *told = true;
        return -rc;
}

static int chown_visit(const sh_tree_ev *ev, void *data)
{
        bool *told = data; /* the reason went to the pipe already */

        switch (ev->kind) {
        case SH_TREE_ENTRY:
                if (fchownat(ev->dirfd, ev->name, 0, 0, AT_SYMLINK_NOFOLLOW) < 0)
                        return refuse(told, child_fail("this host could not hand the bundle to "
                                                       "root: %s",
                                                       strerror(errno)));
                if (ev->type == DT_REG || ev->type == DT_LNK)
                        return 0;
                if (ev->type != DT_DIR)
                        return refuse(told, child_fail("unsafe bundle: the unpacked tree holds "
                                                       "a special file"));
                if (ev->depth > SH_UNPACK_MAX_DEPTH)
                        return refuse(told, child_fail("unsafe bundle: directories nested "
                                                       "deeper than %u levels",
                                                       SH_UNPACK_MAX_DEPTH));
                return SH_TREE_DESCEND;
        case SH_TREE_ERROR:
                return refuse(told, child_fail("this host could not read the unpacked tree: %s",
                                               strerror(ev->err)));
        case SH_TREE_DIR:
        case SH_TREE_LEAVE:
                return 0;
        }
        return 0;
}

int sh_unpack_finisher_main(void *arg)
{
        const sh_unpack_fin_arg *a = arg;
        bool told = false;
        int r;

        reason_fd = FIN_REASON;
        r = sh_jail_join_cgroup(FIN_PROCS, a->nprocs);
        if (r < 0) {
                errno = -r;
                return step_fail("join the unpacker's cgroup");
        }
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return step_fail("parent death signal");
        if (sh_unpacker_limit(RLIMIT_NOFILE, SH_UNPACK_MAX_DEPTH + 32) < 0 ||
            sh_unpacker_limit(RLIMIT_CORE, 0) < 0)
                return step_fail("set limits");
        /* The top directory, then everything below it; readable by every sandbox uid. */
        if (fchown(FIN_STAGE, 0, 0) < 0 || fchmod(FIN_STAGE, 0755) < 0)
                return child_fail("this host could not hand the bundle to root: %s",
                                  strerror(errno));
        r = sh_tree_walk(FIN_STAGE, SH_UNPACK_MAX_DEPTH + 1, chown_visit, &told);
        if (r < 0 && !told)
                return child_fail("this host could not read the unpacked tree: %s", strerror(-r));
        return r < 0 ? 1 : 0;
}
