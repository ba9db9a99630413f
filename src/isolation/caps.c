/* caps.c: the capability steps of confined children: PID 1 keeps only what starting execs
 * needs; an exec child drops every privilege (bounding set to no_new_privs) before execve; a
 * helper keeps exactly its list. */
#include "sh/caps.h"

#include <errno.h>
#include <grp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sh/macro.h"

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

static bool kept(const cap_value_t *keep, int n, cap_value_t cap)
{
        for (int i = 0; i < n; i++)
                if (keep[i] == cap)
                        return true;
        return false;
}

/* The bounding set limits what any later execve can ever add to the permitted set (file
 * capabilities, setuid-root). Dropping a bit needs CAP_SETPCAP, so this is the first step; a
 * bit already out needs no dropping (and a helper of a daemon without CAP_SETPCAP may have
 * nothing left to drop). The loop goes on while the kernel knows the next bit
 * (PR_CAPBSET_READ fails past the last one), in case the kernel is newer than libcap. */
static int drop_bounding_set(const cap_value_t *keep, int n)
{
        for (cap_value_t cap = 0; cap < 64; cap++) {
                int in = prctl(PR_CAPBSET_READ, (unsigned long)cap, 0, 0, 0);

                if (in < 0)
                        break;
                if (in == 1 && !kept(keep, n, cap) && cap_drop_bound(cap) < 0)
                        return -1;
        }
        return 0;
}

/* PID 1's bounding set once sh_caps_limit_init reduced it (bit i: capability i), read there
 * once; 0 and unknown elsewhere. A bounding set never grows again (no call adds a bit), so in
 * a fork of PID 1 (an exec child, which has this copy of the variable) it is a superset of
 * what is left: dropping each of its bits empties the set without reading the other ~40
 * (one prctl each, on the path of every exec). */
static uint64_t init_bset;
static bool init_bset_known;

static int read_bounding_set(uint64_t *ret)
{
        uint64_t m = 0;

        for (cap_value_t cap = 0; cap < 64; cap++) {
                int in = prctl(PR_CAPBSET_READ, (unsigned long)cap, 0, 0, 0);

                if (in < 0)
                        break;
                if (in == 1)
                        m |= UINT64_C(1) << cap;
        }
        *ret = m;
        return 0;
}

static int drop_known_bounding_set(void)
{
        if (!init_bset_known)
                return drop_bounding_set(NULL, 0);
        for (cap_value_t cap = 0; cap < 64; cap++)
                if ((init_bset & (UINT64_C(1) << cap)) && cap_drop_bound(cap) < 0)
                        return -1;
        return 0;
}

/* The ambient set, cleared in one call (libcap's cap_reset_ambient first asks the kernel
 * about every capability, one prctl each). */
static int clear_ambient(void)
{
        return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

/* Effective and permitted: exactly `keep`; inheritable: none; in one capset(2). */
static int set_capability_sets(const cap_value_t *keep, int n)
{
        cap_t c = cap_init(); /* cap_init() returns a fully cleared set */
        int r = -1, saved;

        if (!c)
                return -1;
        if (n == 0 || (cap_set_flag(c, CAP_PERMITTED, n, keep, CAP_SET) == 0 &&
                       cap_set_flag(c, CAP_EFFECTIVE, n, keep, CAP_SET) == 0))
                r = cap_set_proc(c);
        saved = errno;
        cap_free(c);
        errno = saved;
        return r;
}

int sh_caps_drop_to(uid_t uid, gid_t gid, const char **ret_step)
{
        return sh_caps_drop_to_group(uid, gid, 0, ret_step);
}

int sh_caps_drop_to_group(uid_t uid, gid_t gid, gid_t group, const char **ret_step)
{
        if (ret_step)
                *ret_step = NULL;
        errno = 0;

        if (drop_known_bounding_set() < 0)
                return fail(ret_step, "drop bounding set");
        /* Needs CAP_SETPCAP too, so before the sets are cleared. */
        if (cap_set_secbits(SANDBOX_SECUREBITS) < 0)
                return fail(ret_step, "set securebits");
        /* Supplementary groups first (needs CAP_SETGID): the daemon's groups (root, disk,
         * ...) would otherwise follow the sandbox and grant file access. `group` alone, if
         * any (a sandbox's volumes). */
        if (setgroups(group ? 1 : 0, group ? &group : NULL) < 0)
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
        if (set_capability_sets(NULL, 0) < 0)
                return fail(ret_step, "clear capability sets");
        if (clear_ambient() < 0)
                return fail(ret_step, "clear ambient set");
        /* no_new_privs: execve can never grant privileges again (setuid/setgid bits and
         * file capabilities are ignored), and it is the precondition for an unprivileged
         * process to load the seccomp filter, which the child does next. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return fail(ret_step, "set no_new_privs");
        return 0;
}

int sh_caps_keep_only(const cap_value_t *keep, int n, const char **ret_step)
{
        if (ret_step)
                *ret_step = NULL;
        errno = 0;

        if (n < 0 || n > 64) {
                errno = EINVAL;
                return fail(ret_step, "capability list");
        }
        if (drop_bounding_set(keep, n) < 0)
                return fail(ret_step, "reduce bounding set");
        if (set_capability_sets(keep, n) < 0)
                return fail(ret_step, "reduce capability sets");
        if (clear_ambient() < 0)
                return fail(ret_step, "clear ambient set");
        /* no_new_privs: no execve can ever add to what is left (setuid bits and file
         * capabilities are ignored). */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return fail(ret_step, "set no_new_privs");
        return 0;
}

int sh_caps_limit_init(const char **ret_step)
{
        int r;

        /* PID 1 runs no hostile code, but it is root in the sandbox's namespaces, and its
         * capabilities are what a way into it (a kernel bug, a flaw in its few hundred
         * lines) would hand over: keep only what starting an exec needs, in every set. */
        r = sh_caps_keep_only(init_caps, (int)ARRAY_SIZE(init_caps), ret_step);
        if (r < 0)
                return r;
        /* The same locked securebits as every exec child gets (see SANDBOX_SECUREBITS):
         * set here they are inherited, and setting them again there is a no-op. PID 1 kept
         * CAP_SETPCAP, which this needs. */
        if (cap_set_secbits(SANDBOX_SECUREBITS) < 0)
                return fail(ret_step, "set securebits");
        /* Not dumpable: no core of PID 1, no ptrace or /proc/1/mem, maps, environ for
         * anyone but a privileged host process, even of the same uid. */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return fail(ret_step, "set not dumpable");
        /* what every exec child will have to drop (drop_known_bounding_set) */
        if (read_bounding_set(&init_bset) < 0)
                return fail(ret_step, "read bounding set");
        init_bset_known = true;
        return 0;
}
