/* caps.c: privileges in a sandbox: PID 1 keeps only what starting execs needs; each exec child
 * drops every privilege (bounding set to no_new_privs) before execve. */
#include "sh/caps.h"

#include <errno.h>
#include <grp.h>
#include <stdbool.h>
#include <stddef.h>
#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

/*
 * Securebits set while we still hold CAP_SETPCAP, each with its lock bit so that nothing
 * the sandbox runs can ever clear them again (they are inherited over fork and execve):
 *
 *  - NOROOT: uid 0 (or a setuid-root binary) does not get the full permitted set at
 *    execve. Should a sandbox ever regain uid 0 (a misconfigured uid map, a kernel bug in
 *    setuid handling), exec'ing as root still yields no capabilities.
 *  - NO_SETUID_FIXUP locked *off*: the kernel keeps clearing capabilities whenever the
 *    process leaves uid 0, and the sandbox cannot switch that off.
 *  - KEEP_CAPS locked off: setuid away from 0 can never be made to keep capabilities.
 *  - NO_CAP_AMBIENT_RAISE: ambient capabilities (which survive execve of ordinary,
 *    non-file-capability binaries) can never be raised again.
 *
 * With an empty bounding set and no_new_privs these are defence in depth: each closes a
 * way back to privilege that the other layers already close for a different reason.
 */
#define SANDBOX_SECUREBITS                                                                         \
        (SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |                    \
         SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |                                   \
         SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

/* Record the failing step and return -errno (EPERM if errno was somehow left 0). */
static int fail(const char **ret_step, const char *step)
{
        int e = errno ? errno : EPERM;

        if (ret_step)
                *ret_step = step;
        return -e;
}

/* What PID 1 keeps: exactly what sh_caps_drop_to needs in an exec child (CAP_SETPCAP for
 * the bounding set and the securebits, CAP_SETGID for setgroups and setresgid, CAP_SETUID for
 * setresuid). Joining the exec cgroup needs none: the daemon opened cgroup.procs, and the
 * kernel checks the opener's credentials (and PID 1 keeps uid 0 for kernels before 5.16,
 * which check the writer's euid). */
static const cap_value_t init_caps[] = {CAP_SETPCAP, CAP_SETGID, CAP_SETUID};

static bool is_init_cap(cap_value_t cap)
{
        for (size_t i = 0; i < sizeof(init_caps) / sizeof(init_caps[0]); i++)
                if (init_caps[i] == cap)
                        return true;
        return false;
}

/* The bounding set limits what any later execve can ever add to the permitted set (file
 * capabilities, setuid-root). Dropping a bit needs CAP_SETPCAP, so this is the first step.
 * cap_max_bits() is libcap's count of the running kernel's capabilities; the loop goes on
 * while the kernel still knows the next bit, in case the kernel is newer than libcap.
 * `keep`: leave PID 1's own capabilities in. */
static int drop_bounding_set(bool keep)
{
        for (cap_value_t cap = 0; cap < 64; cap++) {
                if (cap >= (cap_value_t)cap_max_bits() &&
                    prctl(PR_CAPBSET_READ, (unsigned long)cap, 0, 0, 0) < 0)
                        break;
                if (keep && is_init_cap(cap))
                        continue;
                if (cap_drop_bound(cap) < 0)
                        return -1;
        }
        return 0;
}

/* Clear the effective, permitted and inheritable sets in one capset(2). */
static int clear_capability_sets(void)
{
        cap_t empty = cap_init(); /* cap_init() returns a fully cleared set */
        int r, saved;

        if (!empty)
                return -1;
        r = cap_set_proc(empty);
        saved = errno;
        cap_free(empty);
        errno = saved;
        return r;
}

int sh_caps_drop_to(uid_t uid, gid_t gid, const char **ret_step)
{
        if (ret_step)
                *ret_step = NULL;
        errno = 0;

        if (drop_bounding_set(false) < 0)
                return fail(ret_step, "drop bounding set");
        /* Needs CAP_SETPCAP too, so before the sets are cleared. */
        if (cap_set_secbits(SANDBOX_SECUREBITS) < 0)
                return fail(ret_step, "set securebits");
        /* Supplementary groups first (needs CAP_SETGID): the daemon's groups (root, disk,
         * ...) would otherwise follow the sandbox and grant file access. */
        if (setgroups(0, NULL) < 0)
                return fail(ret_step, "setgroups");
        /* gid before uid: once the uid is not 0, CAP_SETGID is gone. All three ids (real,
         * effective, saved) so that no saved id lets the process switch back. */
        if (setresgid(gid, gid, gid) < 0)
                return fail(ret_step, "setresgid");
        if (setresuid(uid, uid, uid) < 0)
                return fail(ret_step, "setresuid");
        /* Leaving uid 0 already cleared the permitted and effective sets (securebits keep
         * that fixup locked on); clear explicitly anyway, including the inheritable set,
         * which the uid change leaves alone, and for the case uid is 0 in a user namespace. */
        if (clear_capability_sets() < 0)
                return fail(ret_step, "clear capability sets");
        if (cap_reset_ambient() < 0)
                return fail(ret_step, "clear ambient set");
        /* no_new_privs: execve can never grant privileges again (setuid/setgid bits and
         * file capabilities are ignored), and it is the precondition for an unprivileged
         * process to load the seccomp filter, which the child does next. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return fail(ret_step, "set no_new_privs");
        return 0;
}

/* Permitted and effective: PID 1's three; inheritable: none. */
static int keep_init_caps(void)
{
        cap_t c = cap_init();
        int r = -1, saved;

        if (!c)
                return -1;
        if (cap_set_flag(c, CAP_PERMITTED, 3, init_caps, CAP_SET) == 0 &&
            cap_set_flag(c, CAP_EFFECTIVE, 3, init_caps, CAP_SET) == 0)
                r = cap_set_proc(c);
        saved = errno;
        cap_free(c);
        errno = saved;
        return r;
}

int sh_caps_limit_init(const char **ret_step)
{
        if (ret_step)
                *ret_step = NULL;
        errno = 0;

        /* PID 1 runs no hostile code, but it is root in the sandbox's namespaces, and its
         * capabilities are what a way into it (a kernel bug, a flaw in its few hundred
         * lines) would hand over: keep only what starting an exec needs, in every set. */
        if (drop_bounding_set(true) < 0)
                return fail(ret_step, "reduce bounding set");
        /* The same locked securebits as every exec child gets (see SANDBOX_SECUREBITS):
         * set here they are inherited, and setting them again there is a no-op. */
        if (cap_set_secbits(SANDBOX_SECUREBITS) < 0)
                return fail(ret_step, "set securebits");
        if (keep_init_caps() < 0)
                return fail(ret_step, "reduce capability sets");
        if (cap_reset_ambient() < 0)
                return fail(ret_step, "clear ambient set");
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return fail(ret_step, "set no_new_privs");
        /* Not dumpable: no core of PID 1, no ptrace or /proc/1/mem, maps, environ for
         * anyone but a privileged host process, even of the same uid. */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return fail(ret_step, "set not dumpable");
        return 0;
}
