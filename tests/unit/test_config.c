/* test_config.c: sh_config_parse (CONTRACT.md section 10): defaults, variables, flags, errors. */
#include <check.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/config.h"
#include "unit.h"

#define MAXARGS 16

/* Parse with a NULL-terminated list of environment entries and argv[1..] (after "--"). Usage:
 * parse(&c, &msg, "SANDBOX_HOST_X=1", NULL, "--flag", NULL). */
static sh_config_result parse(sh_config *c, char **msg, ...)
{
        char *envp[MAXARGS + 1], *argv[MAXARGS + 1];
        int nenv = 0, argc = 0;
        const char *s;
        va_list ap;

        argv[argc++] = (char *)"sandbox-host";
        va_start(ap, msg);
        while ((s = va_arg(ap, const char *)) && nenv < MAXARGS)
                envp[nenv++] = (char *)s;
        envp[nenv] = NULL;
        while ((s = va_arg(ap, const char *)) && argc < MAXARGS)
                argv[argc++] = (char *)s;
        argv[argc] = NULL;
        va_end(ap);
        return sh_config_parse(c, argc, argv, envp, msg);
}

/* Expect SH_CONFIG_INVALID with a one-line message that contains `name`. */
static void expect_invalid(sh_config_result r, sh_config *c, char **msgp, const char *name)
{
        char *msg = *msgp;

        *msgp = NULL;
        ck_assert_msg(r == SH_CONFIG_INVALID, "expected invalid (%s), got %d", name, (int)r);
        ck_assert_ptr_nonnull(msg);
        ck_assert_msg(strstr(msg, name) != NULL, "message '%s' does not name '%s'", msg, name);
        ck_assert_ptr_null(strchr(msg, '\n'));
        free(msg);
        sh_config_done(c);
}

static void expect_ok(sh_config_result r, char **msgp)
{
        char *msg = *msgp;

        ck_assert_msg(r == SH_CONFIG_OK, "parse failed (%d): %s", (int)r, msg ? msg : "");
        ck_assert_ptr_null(msg);
}

/* ---- defaults ---------------------------------------------------------------------------- */

START_TEST(test_defaults_match_contract_table)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, NULL, NULL), &msg);
        ck_assert_str_eq(c.listen, "127.0.0.1:8080");
        ck_assert_ptr_null(c.pod_url);
        ck_assert_str_eq(c.root, "/var/lib/sandbox-host");
        ck_assert_ptr_null(c.nfs_root);
        ck_assert_ptr_null(c.images);
        ck_assert_uint_eq(c.max_sandboxes, 256);
        ck_assert_uint_eq(c.memory_max, 1ULL << 30);
        ck_assert_uint_eq(c.pids_max, 512);
        ck_assert_uint_eq(c.cpu_max_milli, 1000);
        ck_assert_uint_eq(c.exec_output_max, 16ULL << 20);
        ck_assert_uint_eq(c.upload_max, 1ULL << 30);
        ck_assert_uint_eq(c.exec_grace_ms, 1000);
        ck_assert_str_eq(c.log_level, "info");
        sh_config_done(&c);
}
END_TEST

START_TEST(test_null_envp_gives_defaults)
{
        char *argv[] = {(char *)"sandbox-host", NULL};
        sh_config c;
        char *msg = NULL;

        expect_ok(sh_config_parse(&c, 1, argv, NULL, &msg), &msg);
        ck_assert_uint_eq(c.max_sandboxes, 256);
        sh_config_done(&c);
}
END_TEST

/* ---- every setting, as a variable and as a flag ----------------------------------------- */

typedef enum { K_STR, K_U64 } kind;

typedef struct setting {
        const char *env;  /* SANDBOX_HOST_... */
        const char *flag; /* --... */
        const char *value;
        kind k;
        size_t off;
        const char *want_str;
        uint64_t want_u64;
} setting;

#define S(f) offsetof(sh_config, f)
static const setting settings[] = {
        {"SANDBOX_HOST_LISTEN", "--listen", "0.0.0.0:9000", K_STR, S(listen), "0.0.0.0:9000", 0},
        {"SANDBOX_HOST_POD_URL", "--pod-url", "http://10.1.2.3:8080", K_STR, S(pod_url),
         "http://10.1.2.3:8080", 0},
        {"SANDBOX_HOST_ROOT", "--root", "/srv/sh", K_STR, S(root), "/srv/sh", 0},
        {"SANDBOX_HOST_NFS_ROOT", "--nfs-root", "/mnt/nfs", K_STR, S(nfs_root), "/mnt/nfs", 0},
        {"SANDBOX_HOST_IMAGES", "--images", "/srv/images", K_STR, S(images), "/srv/images", 0},
        {"SANDBOX_HOST_MAX_SANDBOXES", "--max-sandboxes", "3", K_U64, S(max_sandboxes), NULL, 3},
        {"SANDBOX_HOST_MEMORY_MAX", "--memory-max", "512M", K_U64, S(memory_max), NULL,
         512ULL << 20},
        {"SANDBOX_HOST_PIDS_MAX", "--pids-max", "64", K_U64, S(pids_max), NULL, 64},
        {"SANDBOX_HOST_CPU_MAX", "--cpu-max", "0.5", K_U64, S(cpu_max_milli), NULL, 500},
        {"SANDBOX_HOST_EXEC_OUTPUT_MAX", "--exec-output-max", "4K", K_U64, S(exec_output_max), NULL,
         4096},
        {"SANDBOX_HOST_UPLOAD_MAX", "--upload-max", "2m", K_U64, S(upload_max), NULL, 2ULL << 20},
        {"SANDBOX_HOST_EXEC_GRACE_MS", "--exec-grace-ms", "250", K_U64, S(exec_grace_ms), NULL,
         250},
        {"SANDBOX_HOST_UID_BASE", "--uid-base", "300000", K_U64, S(uid_base), NULL, 300000},
        {"SANDBOX_HOST_LOG_LEVEL", "--log-level", "debug", K_STR, S(log_level), "debug", 0},
        {"SANDBOX_HOST_DISK_MAX", "--disk-max", "2G", K_U64, S(disk_max), NULL, 2ULL << 30},
        {"SANDBOX_HOST_DISK_PROJECT_BASE", "--disk-project-base", "70000", K_U64,
         S(disk_project_base), NULL, 70000},
        {"SANDBOX_HOST_EGRESS_CIDR", "--egress-cidr", "10.200.0.0/20", K_STR, S(egress_cidr),
         "10.200.0.0/20", 0},
        {"SANDBOX_HOST_VOLUME_ROOT", "--volume-root", "/srv/volumes", K_STR, S(volume_root),
         "/srv/volumes", 0},
        {"SANDBOX_HOST_VOLUME_HOST_ALLOW", "--volume-host-allow", "/data:/srv/x", K_STR,
         S(volume_host_allow), "/data:/srv/x", 0},
        {"SANDBOX_HOST_VOLUME_MAX", "--volume-max", "64", K_U64, S(volume_max), NULL, 64},
        {"SANDBOX_HOST_CODE_CONTEXTS_MAX", "--code-contexts-max", "4", K_U64, S(code_contexts_max),
         NULL, 4},
        {"SANDBOX_HOST_CODE_CONTEXT_IDLE", "--code-context-idle", "2h", K_U64,
         S(code_context_idle_s), NULL, 7200},
        {"SANDBOX_HOST_CODE_RESULT_MAX", "--code-result-max", "64K", K_U64, S(code_result_max),
         NULL, 65536},
};

static void check_setting(const sh_config *c, const setting *s, const char *how)
{
        const char *base = (const char *)c;

        if (s->k == K_STR) {
                const char *v = *(char *const *)(base + s->off);

                ck_assert_msg(v && strcmp(v, s->want_str) == 0, "%s %s: got '%s', want '%s'", how,
                              s->env, v ? v : "(null)", s->want_str);
        } else {
                uint64_t v = *(const uint64_t *)(base + s->off);

                ck_assert_msg(v == s->want_u64, "%s %s: got %llu, want %llu", how, s->env,
                              (unsigned long long)v, (unsigned long long)s->want_u64);
        }
}

START_TEST(test_each_variable_sets_its_setting)
{
        const setting *s = &settings[_i];
        char env[256];
        sh_config c;
        char *msg = NULL;

        snprintf(env, sizeof(env), "%s=%s", s->env, s->value);
        expect_ok(parse(&c, &msg, "PATH=/usr/bin", env, NULL, NULL), &msg);
        check_setting(&c, s, "variable");
        sh_config_done(&c);
}
END_TEST

START_TEST(test_each_flag_with_equals_sets_its_setting)
{
        const setting *s = &settings[_i];
        char flag[256];
        sh_config c;
        char *msg = NULL;

        snprintf(flag, sizeof(flag), "%s=%s", s->flag, s->value);
        expect_ok(parse(&c, &msg, NULL, flag, NULL), &msg);
        check_setting(&c, s, "flag=");
        sh_config_done(&c);
}
END_TEST

START_TEST(test_each_flag_with_separate_value_sets_its_setting)
{
        const setting *s = &settings[_i];
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, NULL, s->flag, s->value, NULL), &msg);
        check_setting(&c, s, "flag value");
        sh_config_done(&c);
}
END_TEST

START_TEST(test_max_sandboxes_both_flag_forms)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, NULL, "--max-sandboxes=3", NULL), &msg);
        ck_assert_uint_eq(c.max_sandboxes, 3);
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, NULL, "--max-sandboxes", "3", NULL), &msg);
        ck_assert_uint_eq(c.max_sandboxes, 3);
        sh_config_done(&c);
}
END_TEST

START_TEST(test_several_flags_together)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, NULL, "--listen", ":0", "--root=/tmp/x", "--pids-max", "7",
                        "--cpu-max=2", NULL),
                  &msg);
        ck_assert_str_eq(c.listen, ":0");
        ck_assert_str_eq(c.root, "/tmp/x");
        ck_assert_uint_eq(c.pids_max, 7);
        ck_assert_uint_eq(c.cpu_max_milli, 2000);
        ck_assert_uint_eq(c.max_sandboxes, 256);
        sh_config_done(&c);
}
END_TEST

START_TEST(test_flag_wins_over_variable)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, "SANDBOX_HOST_MAX_SANDBOXES=5", "SANDBOX_HOST_ROOT=/env/root",
                        NULL, "--max-sandboxes=7", "--root", "/flag/root", NULL),
                  &msg);
        ck_assert_uint_eq(c.max_sandboxes, 7);
        ck_assert_str_eq(c.root, "/flag/root");
        sh_config_done(&c);
}
END_TEST

START_TEST(test_variable_wins_over_default_when_no_flag)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, "SANDBOX_HOST_MAX_SANDBOXES=5", NULL, "--pids-max=9", NULL),
                  &msg);
        ck_assert_uint_eq(c.max_sandboxes, 5);
        ck_assert_uint_eq(c.pids_max, 9);
        sh_config_done(&c);
}
END_TEST

START_TEST(test_other_environment_variables_ignored)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, "HOME=/root", "NOEQUALS", "SANDBOX_HOSTX=1",
                        "MY_SANDBOX_HOST_ROOT=relative", NULL, NULL),
                  &msg);
        ck_assert_str_eq(c.root, "/var/lib/sandbox-host");
        sh_config_done(&c);
}
END_TEST

/* ---- invalid values --------------------------------------------------------------------- */

typedef struct bad_value {
        const char *env;
        const char *flag;
        const char *value;
} bad_value;

static const bad_value bad_values[] = {
        {"SANDBOX_HOST_LISTEN", "--listen", "8080"},
        {"SANDBOX_HOST_LISTEN", "--listen", "127.0.0.1:99999"},
        {"SANDBOX_HOST_POD_URL", "--pod-url", "ftp://x"},
        {"SANDBOX_HOST_POD_URL", "--pod-url", "10.0.0.1:8080"},
        {"SANDBOX_HOST_ROOT", "--root", "relative/dir"},
        {"SANDBOX_HOST_NFS_ROOT", "--nfs-root", "nfs"},
        {"SANDBOX_HOST_IMAGES", "--images", "images"},
        {"SANDBOX_HOST_MAX_SANDBOXES", "--max-sandboxes", "abc"},
        {"SANDBOX_HOST_MAX_SANDBOXES", "--max-sandboxes", "-1"},
        {"SANDBOX_HOST_MAX_SANDBOXES", "--max-sandboxes", "0"},
        {"SANDBOX_HOST_MEMORY_MAX", "--memory-max", "lots"},
        {"SANDBOX_HOST_MEMORY_MAX", "--memory-max", "1X"},
        {"SANDBOX_HOST_PIDS_MAX", "--pids-max", "many"},
        {"SANDBOX_HOST_PIDS_MAX", "--pids-max", "0"},
        {"SANDBOX_HOST_CPU_MAX", "--cpu-max", "0"},
        {"SANDBOX_HOST_CPU_MAX", "--cpu-max", "1.2345"},
        {"SANDBOX_HOST_CPU_MAX", "--cpu-max", ".5"},
        {"SANDBOX_HOST_EXEC_OUTPUT_MAX", "--exec-output-max", "16Q"},
        {"SANDBOX_HOST_UPLOAD_MAX", "--upload-max", "-5"},
        {"SANDBOX_HOST_UPLOAD_MAX", "--upload-max", "1.5G"},
        {"SANDBOX_HOST_EXEC_GRACE_MS", "--exec-grace-ms", "-1"},
        {"SANDBOX_HOST_EXEC_GRACE_MS", "--exec-grace-ms", "1.5"},
        {"SANDBOX_HOST_EXEC_GRACE_MS", "--exec-grace-ms", "1s"},
        {"SANDBOX_HOST_UID_BASE", "--uid-base", "x"},
        {"SANDBOX_HOST_LOG_LEVEL", "--log-level", "loud"},
        {"SANDBOX_HOST_DISK_MAX", "--disk-max", "lots"},
        {"SANDBOX_HOST_DISK_MAX", "--disk-max", "512K"},
        {"SANDBOX_HOST_DISK_INODES_MAX", "--disk-inodes-max", "many"},
        {"SANDBOX_HOST_DISK_QUOTA", "--disk-quota", "xfs"},
        {"SANDBOX_HOST_DISK_PROJECT_BASE", "--disk-project-base", "0"},
        {"SANDBOX_HOST_DISK_PROJECT_BASE", "--disk-project-base", "4294967295"},
        {"SANDBOX_HOST_EGRESS_CIDR", "--egress-cidr", "10.0.0.1/16"},
        {"SANDBOX_HOST_EGRESS_CIDR", "--egress-cidr", "10.0.0.0/31"},
        {"SANDBOX_HOST_EGRESS_CIDR", "--egress-cidr", "10.0.0.0/7"},
        {"SANDBOX_HOST_EGRESS_CIDR", "--egress-cidr", "10.0.0.0"},
        {"SANDBOX_HOST_EGRESS_CIDR", "--egress-cidr", "ten/16"},
        {"SANDBOX_HOST_VOLUME_ROOT", "--volume-root", "volumes"},
        {"SANDBOX_HOST_VOLUME_HOST_ALLOW", "--volume-host-allow", "data"},
        {"SANDBOX_HOST_VOLUME_HOST_ALLOW", "--volume-host-allow", "/data::/srv"},
        {"SANDBOX_HOST_VOLUME_HOST_ALLOW", "--volume-host-allow", "/data:"},
        {"SANDBOX_HOST_VOLUME_HOST_ALLOW", "--volume-host-allow", "/data/../etc"},
        {"SANDBOX_HOST_VOLUME_HOST_ALLOW", "--volume-host-allow", "/srv:/.."},
        {"SANDBOX_HOST_VOLUME_MAX", "--volume-max", "65"},
        {"SANDBOX_HOST_CODE_CONTEXTS_MAX", "--code-contexts-max", "0"},
        {"SANDBOX_HOST_CODE_CONTEXTS_MAX", "--code-contexts-max", "1025"},
        {"SANDBOX_HOST_CODE_CONTEXT_IDLE", "--code-context-idle", "0"},
        {"SANDBOX_HOST_CODE_CONTEXT_IDLE", "--code-context-idle", "5x"},
        {"SANDBOX_HOST_CODE_RESULT_MAX", "--code-result-max", "1000"},
        {"SANDBOX_HOST_CODE_RESULT_MAX", "--code-result-max", "2G"},
};

/* Named volumes live below the state root unless put elsewhere; no host volume is allowed
 * unless the operator names where; 16 volumes a sandbox. */
START_TEST(test_volume_defaults_follow_the_state_root)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, NULL, NULL), &msg);
        ck_assert_str_eq(c.volume_root, "/var/lib/sandbox-host/volumes");
        ck_assert_ptr_null(c.volume_host_allow);
        ck_assert_uint_eq(c.volume_max, 16);
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, "SANDBOX_HOST_ROOT=/srv/sh",
                        "SANDBOX_HOST_VOLUME_HOST_ALLOW=", NULL, NULL),
                  &msg);
        ck_assert_str_eq(c.volume_root, "/srv/sh/volumes");
        ck_assert_ptr_null(c.volume_host_allow);
        sh_config_done(&c);
        expect_ok(
                parse(&c, &msg, "SANDBOX_HOST_ROOT=/srv/sh", NULL, "--volume-root=/nfs/vols", NULL),
                &msg);
        ck_assert_str_eq(c.volume_root, "/nfs/vols");
        sh_config_done(&c);
}
END_TEST

/* A sandbox holds 16 code contexts, each ended after 30 idle minutes, a result 8 MiB. */
START_TEST(test_code_interpreter_defaults)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, NULL, NULL), &msg);
        ck_assert_uint_eq(c.code_contexts_max, 16);
        ck_assert_uint_eq(c.code_context_idle_s, 30 * 60);
        ck_assert_uint_eq(c.code_result_max, 8ULL << 20);
        sh_config_done(&c);
}
END_TEST

/* The range holds the gateway and one address per sandbox: a /24 (254) is too small for the
 * default 256 sandboxes, right for 254. */
START_TEST(test_egress_range_must_hold_every_sandbox)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, NULL, NULL), &msg);
        ck_assert_str_eq(c.egress_cidr, "100.127.0.0/16");
        sh_config_done(&c);
        expect_invalid(parse(&c, &msg, NULL, "--egress-cidr=10.0.0.0/24", NULL), &c, &msg,
                       "SANDBOX_HOST_EGRESS_CIDR");
        expect_ok(parse(&c, &msg, NULL, "--egress-cidr=10.0.0.0/24", "--max-sandboxes=254", NULL),
                  &msg);
        sh_config_done(&c);
}
END_TEST

START_TEST(test_invalid_variable_names_the_setting)
{
        const bad_value *b = &bad_values[_i];
        char env[256];
        sh_config c;
        char *msg = NULL;

        snprintf(env, sizeof(env), "%s=%s", b->env, b->value);
        expect_invalid(parse(&c, &msg, env, NULL, NULL), &c, &msg, b->env);
}
END_TEST

START_TEST(test_invalid_flag_value_names_the_setting)
{
        const bad_value *b = &bad_values[_i];
        char flag[256];
        sh_config c;
        char *msg = NULL;

        snprintf(flag, sizeof(flag), "%s=%s", b->flag, b->value);
        expect_invalid(parse(&c, &msg, NULL, flag, NULL), &c, &msg, b->flag);
        expect_invalid(parse(&c, &msg, NULL, b->flag, b->value, NULL), &c, &msg, b->flag);
}
END_TEST

START_TEST(test_flag_overrides_invalid_variable)
{
        sh_config c;
        char *msg = NULL;

        /* The flag wins: the variable it replaces is not judged, so a bad leftover in the
         * environment cannot stop a corrected flag; an unrelated bad variable still does. */
        expect_ok(
                parse(&c, &msg, "SANDBOX_HOST_MAX_SANDBOXES=abc", NULL, "--max-sandboxes=3", NULL),
                &msg);
        ck_assert_uint_eq(c.max_sandboxes, 3);
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, "SANDBOX_HOST_MAX_SANDBOXES=abc", NULL, "--max-sandboxes", "4",
                        NULL),
                  &msg);
        ck_assert_uint_eq(c.max_sandboxes, 4);
        sh_config_done(&c);
        expect_invalid(
                parse(&c, &msg, "SANDBOX_HOST_PIDS_MAX=abc", NULL, "--max-sandboxes=3", NULL), &c,
                &msg, "SANDBOX_HOST_PIDS_MAX");
}
END_TEST

START_TEST(test_unknown_flag_is_invalid)
{
        sh_config c;
        char *msg = NULL;

        expect_invalid(parse(&c, &msg, NULL, "--no-such-flag=1", NULL), &c, &msg, "--no-such-flag");
        expect_invalid(parse(&c, &msg, NULL, "--max_sandboxes=3", NULL), &c, &msg,
                       "--max_sandboxes");
        expect_invalid(parse(&c, &msg, NULL, "--MAX-SANDBOXES=3", NULL), &c, &msg,
                       "--MAX-SANDBOXES");
        expect_invalid(parse(&c, &msg, NULL, "--max-sandbox=3", NULL), &c, &msg, "--max-sandbox");
}
END_TEST

START_TEST(test_positional_argument_is_invalid)
{
        sh_config c;
        char *msg = NULL;

        expect_invalid(parse(&c, &msg, NULL, "serve", NULL), &c, &msg, "serve");
}
END_TEST

START_TEST(test_flag_without_value_is_invalid)
{
        sh_config c;
        char *msg = NULL;

        expect_invalid(parse(&c, &msg, NULL, "--max-sandboxes", NULL), &c, &msg, "--max-sandboxes");
}
END_TEST

/* ---- help, version ---------------------------------------------------------------------- */

START_TEST(test_help_flag)
{
        sh_config c;
        char *msg = NULL;

        ck_assert_int_eq(parse(&c, &msg, NULL, "--help", NULL), SH_CONFIG_HELP);
        ck_assert_ptr_null(msg);
        sh_config_done(&c);
        /* --help wins even after other flags */
        ck_assert_int_eq(parse(&c, &msg, NULL, "--max-sandboxes=3", "--help", NULL),
                         SH_CONFIG_HELP);
        sh_config_done(&c);
}
END_TEST

START_TEST(test_version_flag)
{
        sh_config c;
        char *msg = NULL;

        ck_assert_int_eq(parse(&c, &msg, NULL, "--version", NULL), SH_CONFIG_VERSION);
        ck_assert_ptr_null(msg);
        sh_config_done(&c);
}
END_TEST

START_TEST(test_help_text_lists_every_setting)
{
        const char *help = sh_config_help();

        ck_assert_ptr_nonnull(help);
        for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
                ck_assert_msg(strstr(help, settings[i].flag), "help lacks %s", settings[i].flag);
                ck_assert_msg(strstr(help, settings[i].env), "help lacks %s", settings[i].env);
        }
        ck_assert_ptr_nonnull(strstr(help, "--help"));
        ck_assert_ptr_nonnull(strstr(help, "--version")); /* not truncated */
        ck_assert_ptr_eq(sh_config_help(), help);
}
END_TEST

/* ---- the disk settings go together ------------------------------------------------------ */

START_TEST(test_disk_defaults_are_a_limit_sized_at_start)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, NULL, NULL), &msg);
        ck_assert(c.disk_max_auto);
        ck_assert_uint_eq(c.disk_max, 0);
        ck_assert_uint_eq(c.disk_inodes_max, 0); /* derived from the size found at start */
        ck_assert_str_eq(c.disk_quota, "auto");
        ck_assert_uint_eq(c.disk_project_base, 3000000000ULL);
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, "SANDBOX_HOST_DISK_MAX=0", NULL, NULL), &msg);
        ck_assert(!c.disk_max_auto);
        ck_assert_uint_eq(c.disk_max, 0);
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, "SANDBOX_HOST_DISK_MAX=0", NULL, "--disk-max=auto", NULL), &msg);
        ck_assert(c.disk_max_auto);
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, NULL, "--disk-max=2G", NULL), &msg);
        ck_assert(!c.disk_max_auto);
        ck_assert_uint_eq(c.disk_max, 2ULL << 30);
        sh_config_done(&c);
}
END_TEST

/* auto: 10 GiB, or a quarter of the state volume when that is less, in whole MiB, >= 1 MiB */
START_TEST(test_the_automatic_disk_limit_is_a_share_of_the_volume)
{
        ck_assert_uint_eq(sh_config_disk_auto(1ULL << 40), 10ULL << 30);
        ck_assert_uint_eq(sh_config_disk_auto(40ULL << 30), 10ULL << 30);
        ck_assert_uint_eq(sh_config_disk_auto(20ULL << 30), 5ULL << 30);
        ck_assert_uint_eq(sh_config_disk_auto(256ULL << 20), 64ULL << 20);
        ck_assert_uint_eq(sh_config_disk_auto((256ULL << 20) + 12345), 64ULL << 20);
        ck_assert_uint_eq(sh_config_disk_auto(1ULL << 20), 1ULL << 20);
        ck_assert_uint_eq(sh_config_disk_auto(0), 1ULL << 20);
        ck_assert_uint_eq(sh_config_disk_inodes(10ULL << 30), (10ULL << 30) / 8192);
        ck_assert_uint_eq(sh_config_disk_inodes(1ULL << 20), 1024);
}
END_TEST

START_TEST(test_disk_inode_limit_is_derived_when_unset)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, "SANDBOX_HOST_DISK_MAX=1G", NULL, NULL), &msg);
        ck_assert_uint_eq(c.disk_inodes_max, (1ULL << 30) / 8192);
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, NULL, "--disk-max=1M", NULL), &msg);
        ck_assert_uint_eq(c.disk_inodes_max, 1024); /* the floor */
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, NULL, "--disk-max=1G", "--disk-inodes-max=77", "--disk-quota",
                        "tmpfs", NULL),
                  &msg);
        ck_assert_uint_eq(c.disk_inodes_max, 77);
        ck_assert_str_eq(c.disk_quota, "tmpfs");
        sh_config_done(&c);
}
END_TEST

/* A limit nothing would hold, or a mechanism for no limit: refused, naming the setting. */
START_TEST(test_disk_settings_that_contradict_are_invalid)
{
        sh_config c;
        char *msg = NULL;

        expect_invalid(parse(&c, &msg, NULL, "--disk-max=1G", "--disk-quota=none", NULL), &c, &msg,
                       "SANDBOX_HOST_DISK_QUOTA");
        expect_invalid(parse(&c, &msg, NULL, "--disk-max=0", "--disk-inodes-max=100", NULL), &c,
                       &msg, "SANDBOX_HOST_DISK_INODES_MAX");
        expect_invalid(parse(&c, &msg, "SANDBOX_HOST_DISK_QUOTA=loop", NULL, "--disk-max=0", NULL),
                       &c, &msg, "SANDBOX_HOST_DISK_QUOTA");
        /* the automatic size is a share of a disk: never a tmpfs's, which is memory */
        expect_invalid(parse(&c, &msg, "SANDBOX_HOST_DISK_QUOTA=tmpfs", NULL, NULL), &c, &msg,
                       "SANDBOX_HOST_DISK_QUOTA");
        /* with it, a mechanism or an inode limit alone is fine: the size comes at start */
        expect_ok(parse(&c, &msg, NULL, "--disk-inodes-max=100", "--disk-quota=loop", NULL), &msg);
        ck_assert_uint_eq(c.disk_inodes_max, 100);
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, NULL, "--disk-quota=none", NULL), &msg);
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, NULL, "--disk-max=0", "--disk-quota=auto", NULL), &msg);
        ck_assert_uint_eq(c.disk_inodes_max, 0);
        sh_config_done(&c);
}
END_TEST

/* ---- value rules ------------------------------------------------------------------------ */

START_TEST(test_sizes_are_binary)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, "SANDBOX_HOST_UPLOAD_MAX=1K", NULL, "--memory-max=2G",
                        "--exec-output-max", "3k", NULL),
                  &msg);
        ck_assert_uint_eq(c.upload_max, 1024);
        ck_assert_uint_eq(c.memory_max, 2ULL << 30);
        ck_assert_uint_eq(c.exec_output_max, 3072);
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, NULL, "--upload-max=1t", "--memory-max=64m", NULL), &msg);
        ck_assert_uint_eq(c.upload_max, 1ULL << 40);
        ck_assert_uint_eq(c.memory_max, 64ULL << 20);
        sh_config_done(&c);
}
END_TEST

START_TEST(test_plain_byte_count_accepted)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, NULL, "--upload-max=100", NULL), &msg);
        ck_assert_uint_eq(c.upload_max, 100);
        sh_config_done(&c);
}
END_TEST

START_TEST(test_millisecond_setting_accepts_zero)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, NULL, "--exec-grace-ms=0", NULL), &msg);
        ck_assert_uint_eq(c.exec_grace_ms, 0);
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, "SANDBOX_HOST_EXEC_GRACE_MS=0", NULL, NULL), &msg);
        ck_assert_uint_eq(c.exec_grace_ms, 0);
        sh_config_done(&c);
}
END_TEST

START_TEST(test_pod_url_trailing_slash_stripped)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, "SANDBOX_HOST_POD_URL=http://10.0.0.5:8080/", NULL, NULL), &msg);
        ck_assert_str_eq(c.pod_url, "http://10.0.0.5:8080");
        sh_config_done(&c);
        expect_ok(parse(&c, &msg, NULL, "--pod-url", "https://pod.example//", NULL), &msg);
        ck_assert_str_eq(c.pod_url, "https://pod.example");
        sh_config_done(&c);
}
END_TEST

START_TEST(test_empty_optional_variable_is_unset)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, "SANDBOX_HOST_NFS_ROOT=", "SANDBOX_HOST_IMAGES=",
                        "SANDBOX_HOST_POD_URL=", NULL, NULL),
                  &msg);
        ck_assert_ptr_null(c.nfs_root);
        ck_assert_ptr_null(c.images);
        ck_assert_ptr_null(c.pod_url);
        sh_config_done(&c);
}
END_TEST

START_TEST(test_empty_optional_flag_unsets_variable)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, "SANDBOX_HOST_NFS_ROOT=/mnt/nfs", NULL, "--nfs-root=", NULL),
                  &msg);
        ck_assert_ptr_null(c.nfs_root);
        sh_config_done(&c);
}
END_TEST

START_TEST(test_done_is_idempotent)
{
        sh_config c;
        char *msg = NULL;

        expect_ok(parse(&c, &msg, NULL, "--nfs-root=/x", NULL), &msg);
        sh_config_done(&c);
        ck_assert_ptr_null(c.listen);
        ck_assert_ptr_null(c.nfs_root);
        sh_config_done(&c);
}
END_TEST

/* ---- sh_config_split_listen ------------------------------------------------------------- */

static void assert_split(const char *listen, const char *host, uint16_t port)
{
        char *h = NULL;
        uint16_t p = 1;

        ck_assert_msg(sh_config_split_listen(listen, &h, &p) == 0, "'%s' rejected", listen);
        ck_assert_str_eq(h, host);
        ck_assert_uint_eq(p, port);
        free(h);
}

START_TEST(test_split_listen_valid)
{
        assert_split("127.0.0.1:8080", "127.0.0.1", 8080);
        assert_split("[::1]:0", "::1", 0);
        assert_split(":0", "", 0);
        assert_split("0.0.0.0:65535", "0.0.0.0", 65535);
        assert_split("localhost:80", "localhost", 80);
        assert_split("[::]:8080", "::", 8080);
}
END_TEST

START_TEST(test_split_listen_invalid)
{
        const char *bad[] = {"",          "8080",
                             "127.0.0.1", "127.0.0.1:",
                             "host:-1",   "host:65536",
                             "host:80x",  "::1:80",
                             "[::1]",     "[::1]:",
                             "[::1]80",   "[::1:80",
                             ":",         "host:99999999999999999999999"};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *h = NULL;
                uint16_t p = 0;

                ck_assert_msg(sh_config_split_listen(bad[i], &h, &p) < 0, "'%s' accepted", bad[i]);
                ck_assert_ptr_null(h);
        }
        {
                char *h = NULL;
                uint16_t p = 0;

                ck_assert_int_lt(sh_config_split_listen(NULL, &h, &p), 0);
        }
}
END_TEST

static Suite *config_suite(void)
{
        Suite *s = suite_create("config");
        int ns = (int)(sizeof(settings) / sizeof(settings[0]));
        int nb = (int)(sizeof(bad_values) / sizeof(bad_values[0]));
        TCase *tc;

        tc = tcase_create("defaults");
        tcase_add_test(tc, test_defaults_match_contract_table);
        tcase_add_test(tc, test_null_envp_gives_defaults);
        suite_add_tcase(s, tc);

        tc = tcase_create("settings");
        tcase_add_loop_test(tc, test_each_variable_sets_its_setting, 0, ns);
        tcase_add_loop_test(tc, test_each_flag_with_equals_sets_its_setting, 0, ns);
        tcase_add_loop_test(tc, test_each_flag_with_separate_value_sets_its_setting, 0, ns);
        tcase_add_test(tc, test_max_sandboxes_both_flag_forms);
        tcase_add_test(tc, test_several_flags_together);
        tcase_add_test(tc, test_flag_wins_over_variable);
        tcase_add_test(tc, test_variable_wins_over_default_when_no_flag);
        tcase_add_test(tc, test_other_environment_variables_ignored);
        suite_add_tcase(s, tc);

        tc = tcase_create("invalid");
        tcase_add_loop_test(tc, test_invalid_variable_names_the_setting, 0, nb);
        tcase_add_loop_test(tc, test_invalid_flag_value_names_the_setting, 0, nb);
        tcase_add_test(tc, test_flag_overrides_invalid_variable);
        tcase_add_test(tc, test_unknown_flag_is_invalid);
        tcase_add_test(tc, test_positional_argument_is_invalid);
        tcase_add_test(tc, test_flag_without_value_is_invalid);
        suite_add_tcase(s, tc);

        tc = tcase_create("help");
        tcase_add_test(tc, test_help_flag);
        tcase_add_test(tc, test_version_flag);
        tcase_add_test(tc, test_help_text_lists_every_setting);
        suite_add_tcase(s, tc);

        tc = tcase_create("disk");
        tcase_add_test(tc, test_disk_defaults_are_a_limit_sized_at_start);
        tcase_add_test(tc, test_volume_defaults_follow_the_state_root);
        tcase_add_test(tc, test_code_interpreter_defaults);
        tcase_add_test(tc, test_the_automatic_disk_limit_is_a_share_of_the_volume);
        tcase_add_test(tc, test_disk_inode_limit_is_derived_when_unset);
        tcase_add_test(tc, test_disk_settings_that_contradict_are_invalid);
        tcase_add_test(tc, test_egress_range_must_hold_every_sandbox);
        suite_add_tcase(s, tc);

        tc = tcase_create("values");
        tcase_add_test(tc, test_sizes_are_binary);
        tcase_add_test(tc, test_plain_byte_count_accepted);
        tcase_add_test(tc, test_millisecond_setting_accepts_zero);
        tcase_add_test(tc, test_pod_url_trailing_slash_stripped);
        tcase_add_test(tc, test_empty_optional_variable_is_unset);
        tcase_add_test(tc, test_empty_optional_flag_unsets_variable);
        tcase_add_test(tc, test_done_is_idempotent);
        suite_add_tcase(s, tc);

        tc = tcase_create("split_listen");
        tcase_add_test(tc, test_split_listen_valid);
        tcase_add_test(tc, test_split_listen_invalid);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(config_suite());
}
