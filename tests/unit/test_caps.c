/* test_caps.c: a dropped child has no capability or group, only the sandbox ids, and no root;
 * PID 1's reduced set holds three capabilities, and they are all a drop needs. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/securebits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sh/caps.h"
#include "unit.h"

#define SANDBOX_UID 200123
#define SANDBOX_GID 200124

/* A child reports a failure as an exit code and a line on the pipe. */
struct report {
        int code; /* 0: every check passed */
        char msg[240];
};

typedef void (*child_fn)(struct report *rep);

static struct report run_child(child_fn fn)
{
        struct report rep = {-1, "child wrote nothing"};
        int p[2], status = 0;
        pid_t pid;

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                struct report r = {0, ""};

                close(p[0]);
                fn(&r);
                if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
                        _exit(2);
                _exit(0);
        }
        close(p[1]);
        if (read(p[0], &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
                rep.code = -1;
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child died: status 0x%x",
                      status);
        return rep;
}

static void failf(struct report *rep, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void failf(struct report *rep, int code, const char *fmt, ...)
{
        va_list ap;

        if (rep->code != 0)
                return; /* keep the first failure */
        rep->code = code;
        va_start(ap, fmt);
        vsnprintf(rep->msg, sizeof(rep->msg), fmt, ap);
        va_end(ap);
}

/* The value of one "Key:\t..." line of /proc/self/status, whitespace-trimmed. */
static bool status_field(const char *key, char *out, size_t outsz)
{
        char line[512];
        size_t klen = strlen(key);
        bool found = false;
        FILE *f = fopen("/proc/self/status", "re");

        if (!f)
                return false;
        while (fgets(line, sizeof(line), f)) {
                char *v, *end;

                if (strncmp(line, key, klen) != 0 || line[klen] != ':')
                        continue;
                v = line + klen + 1;
                while (*v == ' ' || *v == '\t')
                        v++;
                end = v + strlen(v);
                while (end > v && (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
                        *--end = '\0';
                snprintf(out, outsz, "%s", v);
                found = true;
                break;
        }
        fclose(f);
        return found;
}

static void expect_field(struct report *rep, const char *key, const char *want)
{
        char v[256];

        if (!status_field(key, v, sizeof(v))) {
                failf(rep, 10, "no %s line in /proc/self/status", key);
                return;
        }
        if (strcmp(v, want) != 0)
                failf(rep, 11, "%s is \"%s\", wanted \"%s\"", key, v, want);
}

static void drop_or_report(struct report *rep)
{
        const char *step = NULL;
        int r = sh_caps_drop_to(SANDBOX_UID, SANDBOX_GID, &step);

        if (r < 0)
                failf(rep, 1, "sh_caps_drop_to failed at \"%s\": errno %d", step ? step : "?", -r);
}

static void child_check_status(struct report *rep)
{
        drop_or_report(rep);
        if (rep->code)
                return;
        expect_field(rep, "CapInh", "0000000000000000");
        expect_field(rep, "CapPrm", "0000000000000000");
        expect_field(rep, "CapEff", "0000000000000000");
        expect_field(rep, "CapBnd", "0000000000000000");
        expect_field(rep, "CapAmb", "0000000000000000");
        expect_field(rep, "NoNewPrivs", "1");
        expect_field(rep, "Uid", "200123\t200123\t200123\t200123");
        expect_field(rep, "Gid", "200124\t200124\t200124\t200124");
        expect_field(rep, "Groups", "");
}

START_TEST(test_drop_clears_every_capability_set_and_group)
{
        struct report rep = run_child(child_check_status);

        ck_assert_msg(rep.code == 0, "%s", rep.msg);
}
END_TEST

static void child_try_regain_root(struct report *rep)
{
        drop_or_report(rep);
        if (rep->code)
                return;
        if (setuid(0) == 0 || errno != EPERM)
                failf(rep, 20, "setuid(0) after drop: not EPERM (errno %d)", errno);
        else if (setresuid(SANDBOX_UID, 0, SANDBOX_UID) == 0)
                failf(rep, 21, "setresuid to euid 0 succeeded");
        else if (setgid(0) == 0)
                failf(rep, 22, "setgid(0) succeeded");
        else if (setgroups(0, NULL) == 0)
                failf(rep, 23, "setgroups succeeded without CAP_SETGID");
        else if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, 0 /* CAP_CHOWN */, 0, 0) == 0)
                failf(rep, 24, "raising an ambient capability succeeded");
}

START_TEST(test_dropped_child_cannot_regain_root)
{
        struct report rep = run_child(child_try_regain_root);

        ck_assert_msg(rep.code == 0, "%s", rep.msg);
}
END_TEST

static void child_check_securebits(struct report *rep)
{
        const long want = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                          SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                          SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        long bits;

        drop_or_report(rep);
        if (rep->code)
                return;
        bits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
        if (bits != want)
                failf(rep, 30, "securebits are 0x%lx, wanted 0x%lx", bits, want);
        else if (prctl(PR_SET_SECUREBITS, 0, 0, 0, 0) == 0)
                failf(rep, 31, "securebits could be cleared after the drop");
}

START_TEST(test_drop_locks_securebits)
{
        struct report rep = run_child(child_check_securebits);

        ck_assert_msg(rep.code == 0, "%s", rep.msg);
}
END_TEST

/* Having already given up root, the child cannot drop the bounding set: the error names
 * that step and carries EPERM. */
static void child_drop_without_privilege(struct report *rep)
{
        const char *step = NULL;
        int r;

        if (setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) < 0) {
                failf(rep, 40, "setresuid in the setup: errno %d", errno);
                return;
        }
        r = sh_caps_drop_to(SANDBOX_UID, SANDBOX_GID, &step);
        if (r != -EPERM)
                failf(rep, 41, "unprivileged drop returned %d, not -EPERM", r);
        else if (!step || strcmp(step, "drop bounding set") != 0)
                failf(rep, 42, "failing step named \"%s\"", step ? step : "(null)");
}

START_TEST(test_failure_names_the_step_and_returns_errno)
{
        struct report rep = run_child(child_drop_without_privilege);

        ck_assert_msg(rep.code == 0, "%s", rep.msg);
}
END_TEST

/* A setuid-root copy of id(1): run after a plain uid change it prints euid 0 (the control:
 * the file system honours setuid here); run after sh_caps_drop_to it prints the sandbox
 * uid, because no_new_privs makes execve ignore the setuid bit. */
static char suid_dir[] = "/tmp/sh-caps-XXXXXX";
static char suid_id[sizeof(suid_dir) + 8];

static bool make_setuid_id(void)
{
        char buf[65536];
        ssize_t n;
        int in, out;
        bool ok = true;

        if (!mkdtemp(suid_dir))
                return false;
        if (chmod(suid_dir, 0755) < 0)
                return false;
        snprintf(suid_id, sizeof(suid_id), "%s/id", suid_dir);
        in = open("/usr/bin/id", O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return false;
        out = open(suid_id, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
        if (out < 0) {
                close(in);
                return false;
        }
        while ((n = read(in, buf, sizeof(buf))) > 0)
                if (write(out, buf, (size_t)n) != n)
                        ok = false;
        close(in);
        if (close(out) < 0 || n < 0)
                ok = false;
        return ok && chmod(suid_id, 04755) == 0;
}

static long exec_id_euid(void)
{
        int p[2], status = 0;
        char out[64] = {0};
        ssize_t n;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                dup2(p[1], 1);
                execl(suid_id, "id", "-u", (char *)NULL);
                _exit(127);
        }
        close(p[1]);
        n = read(p[0], out, sizeof(out) - 1);
        close(p[0]);
        waitpid(pid, &status, 0);
        if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -1;
        return strtol(out, NULL, 10);
}

static void child_plain_setuid_exec(struct report *rep)
{
        long euid;

        if (setgroups(0, NULL) < 0 || setresgid(SANDBOX_GID, SANDBOX_GID, SANDBOX_GID) < 0 ||
            setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) < 0) {
                failf(rep, 50, "plain id change failed: errno %d", errno);
                return;
        }
        euid = exec_id_euid();
        /* Report the euid through the message, the parent decides. */
        snprintf(rep->msg, sizeof(rep->msg), "%ld", euid);
}

static void child_dropped_setuid_exec(struct report *rep)
{
        drop_or_report(rep);
        if (rep->code)
                return;
        snprintf(rep->msg, sizeof(rep->msg), "%ld", exec_id_euid());
}

START_TEST(test_setuid_root_binary_gives_nothing_after_drop)
{
        struct report control, rep;

        ck_assert_msg(make_setuid_id(), "cannot prepare a setuid copy of /usr/bin/id");
        control = run_child(child_plain_setuid_exec);
        rep = run_child(child_dropped_setuid_exec);
        unlink(suid_id);
        rmdir(suid_dir);
        ck_assert_msg(control.code == 0, "%s", control.msg);
        if (strcmp(control.msg, "0") != 0) {
                fprintf(stderr,
                        "setuid is not honoured for %s (nosuid mount?): the "
                        "no_new_privs half of this test proves nothing here\n",
                        suid_id);
        }
        ck_assert_msg(rep.code == 0, "%s", rep.msg);
        ck_assert_str_eq(rep.msg, "200123");
}
END_TEST

/* ---- PID 1's reduced set ---------------------------------------------------------------- */

static void limit_or_report(struct report *rep)
{
        const char *step = NULL;
        int r = sh_caps_limit_init(&step);

        if (r < 0)
                failf(rep, 60, "sh_caps_limit_init failed at \"%s\": errno %d", step ? step : "?",
                      -r);
}

static void child_check_init_status(struct report *rep)
{
        limit_or_report(rep);
        if (rep->code)
                return;
        /* CAP_SETGID (6), CAP_SETUID (7), CAP_SETPCAP (8) */
        expect_field(rep, "CapInh", "0000000000000000");
        expect_field(rep, "CapPrm", "00000000000001c0");
        expect_field(rep, "CapEff", "00000000000001c0");
        expect_field(rep, "CapBnd", "00000000000001c0");
        expect_field(rep, "CapAmb", "0000000000000000");
        expect_field(rep, "NoNewPrivs", "1");
        expect_field(rep, "Uid", "0\t0\t0\t0");
        if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
                failf(rep, 61, "PID 1 is dumpable");
}

START_TEST(test_init_keeps_only_setuid_setgid_setpcap)
{
        struct report rep = run_child(child_check_init_status);

        ck_assert_msg(rep.code == 0, "%s", rep.msg);
}
END_TEST

static void child_init_cannot_use_other_capabilities(struct report *rep)
{
        struct rlimit rl;

        limit_or_report(rep);
        if (rep->code)
                return;
        /* uid 0 alone is nothing: no CAP_SYS_ADMIN, CAP_SYS_NICE or CAP_SYS_RESOURCE (each
         * attempt only affects this child, should it succeed). */
        if (unshare(CLONE_NEWNS) == 0 || errno != EPERM)
                failf(rep, 62, "unshare without CAP_SYS_ADMIN: not EPERM (errno %d)", errno);
        else if (setpriority(PRIO_PROCESS, 0, -5) == 0)
                failf(rep, 63, "raising the priority without CAP_SYS_NICE succeeded");
        else if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_max == RLIM_INFINITY ||
                 (rl.rlim_max++, setrlimit(RLIMIT_NOFILE, &rl) == 0))
                failf(rep, 64, "raising a hard limit without CAP_SYS_RESOURCE succeeded");
        else if (prctl(PR_CAPBSET_READ, 21 /* CAP_SYS_ADMIN */, 0, 0, 0) != 0)
                failf(rep, 65, "CAP_SYS_ADMIN still in the bounding set");
}

START_TEST(test_init_cannot_use_other_capabilities)
{
        struct report rep = run_child(child_init_cannot_use_other_capabilities);

        ck_assert_msg(rep.code == 0, "%s", rep.msg);
}
END_TEST

/* What an exec child does: from PID 1's three capabilities, the full drop succeeds. */
static void child_init_then_drop(struct report *rep)
{
        limit_or_report(rep);
        if (rep->code)
                return;
        child_check_status(rep);
}

START_TEST(test_init_capabilities_suffice_for_a_drop)
{
        struct report rep = run_child(child_init_then_drop);

        ck_assert_msg(rep.code == 0, "%s", rep.msg);
}
END_TEST

static Suite *caps_suite(void)
{
        Suite *s = suite_create("caps");
        TCase *tc = tcase_create("drop");

        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_drop_clears_every_capability_set_and_group);
        tcase_add_test(tc, test_dropped_child_cannot_regain_root);
        tcase_add_test(tc, test_drop_locks_securebits);
        tcase_add_test(tc, test_failure_names_the_step_and_returns_errno);
        tcase_add_test(tc, test_setuid_root_binary_gives_nothing_after_drop);
        suite_add_tcase(s, tc);

        tc = tcase_create("init");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_init_keeps_only_setuid_setgid_setpcap);
        tcase_add_test(tc, test_init_cannot_use_other_capabilities);
        tcase_add_test(tc, test_init_capabilities_suffice_for_a_drop);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        int k = ut_need_root("needs root (the test drops root's full capability set to an "
                             "unprivileged uid and checks nothing is left)");

        return k ? k : ut_run(caps_suite());
}
