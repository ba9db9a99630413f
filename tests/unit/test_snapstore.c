/* test_snapstore.c: the snapshot store (src/persist/snapstore.c): records parsed as hostile
 * input, the load at start (what is skipped and why), and the writer child; the end of a
 * snapshot's copy (src/persist/snapshot.c): Ready, or Failed with why and its tree dropped. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sh/snapstore.h"
#include "sh/log.h"
#include "sh/loop.h"
#include "sh/waiter.h"
#include "unit.h"

#define ID1   "snap-012345670123456789abcdef0123456789abcdef"
#define ID2   "snap-fedcba98fedcba9876543210fedcba9876543210"
#define TOKEN "00112233"
#define SB    "0011223300112233445566778899aabbccddeeff"

static char dir[256];

static void run_until_idle(sh_loop *loop, sh_snapstore *st);
static int told; /* waiters told */

static void setup(void)
{
        ck_assert_int_eq(ut_mkdtemp(dir, sizeof(dir), "snapstore"), 0);
}

static void teardown(void)
{
        ut_rm_rf(dir);
}

static const char *record(const char *id, const char *state, uint64_t created)
{
        static char buf[1024];

        snprintf(buf, sizeof(buf),
                 "{\"version\":1,\"id\":\"%s\",\"sandboxId\":\"" SB "\",\"name\":\"n-%s\","
                 "\"state\":\"%s\",\"reason\":\"r\",\"createdAtMs\":%llu,"
                 "\"lastTransitionAtMs\":%llu}",
                 id, state, state, (unsigned long long)created, (unsigned long long)created);
        return buf;
}

static int parse(const char *text, const char *file_id, sh_snapshot **ret)
{
        sh_error *err = NULL;
        int r = sh_snap_parse_record(text, strlen(text), file_id, ret, &err);

        sh_error_release(&err);
        return r;
}

START_TEST(test_ids_are_snap_and_128_bits_of_lower_hex)
{
        ck_assert(sh_snap_id_valid(ID1, strlen(ID1)));
        ck_assert(!sh_snap_id_valid(SB, strlen(SB)));
        ck_assert(!sh_snap_id_valid("snap-012345670123456789ABCDEF0123456789abcdef", 45));
        ck_assert(!sh_snap_id_valid("snap-../34567../3456789abcdef0123456789abcdef", 45));
        ck_assert(!sh_snap_id_valid(ID1, strlen(ID1) - 1));
}
END_TEST

START_TEST(test_a_valid_record_round_trips)
{
        sh_snapshot *s = NULL, *t = NULL;
        cJSON *o;
        char *text;

        ck_assert_int_eq(parse(record(ID1, "Ready", 1700000000123ULL), ID1, &s), 0);
        ck_assert_str_eq(s->id, ID1);
        ck_assert_str_eq(s->sandbox_id, SB);
        ck_assert_str_eq(s->name, "n-Ready");
        ck_assert_int_eq(s->state, SH_SNAP_READY);
        ck_assert_uint_eq(s->created_ms, 1700000000123ULL);
        o = sh_snap_record(s);
        text = cJSON_PrintUnformatted(o);
        ck_assert_int_eq(parse(text, ID1, &t), 0);
        ck_assert_str_eq(t->name, s->name);
        ck_assert_uint_eq(t->created_ms, s->created_ms);
        ck_assert_int_eq(t->state, s->state);
        free(text);
        cJSON_Delete(o);
        sh_snapshot_free(s);
        sh_snapshot_free(t);
}
END_TEST

START_TEST(test_a_creating_record_loads_as_failed)
{
        sh_snapshot *s = NULL;

        ck_assert_int_eq(parse(record(ID1, "Creating", 5), ID1, &s), 0);
        ck_assert_int_eq(s->state, SH_SNAP_FAILED);
        ck_assert_str_eq(s->reason, "snapshot_interrupted");
        sh_snapshot_free(s);
}
END_TEST

START_TEST(test_hostile_records_are_refused)
{
        static const char *const bad[] = {
                "",
                "[]",
                "{\"version\":1}",
                "not json",
                /* an id that is not the file's name (a path elsewhere) */
                "{\"version\":1,\"id\":\"../../etc\",\"sandboxId\":\"" SB "\",\"state\":"
                "\"Ready\",\"reason\":\"\",\"createdAtMs\":1,\"lastTransitionAtMs\":1}",
                "{\"version\":1,\"id\":\"" ID2 "\",\"sandboxId\":\"" SB "\",\"state\":"
                "\"Ready\",\"reason\":\"\",\"createdAtMs\":1,\"lastTransitionAtMs\":1}",
                "{\"version\":2,\"id\":\"" ID1 "\",\"sandboxId\":\"" SB "\",\"state\":"
                "\"Ready\",\"reason\":\"\",\"createdAtMs\":1,\"lastTransitionAtMs\":1}",
                "{\"version\":1,\"id\":\"" ID1 "\",\"sandboxId\":\"/etc\",\"state\":"
                "\"Ready\",\"reason\":\"\",\"createdAtMs\":1,\"lastTransitionAtMs\":1}",
                "{\"version\":1,\"id\":\"" ID1 "\",\"sandboxId\":\"" SB "\",\"state\":"
                "\"Gone\",\"reason\":\"\",\"createdAtMs\":1,\"lastTransitionAtMs\":1}",
                "{\"version\":1,\"id\":\"" ID1 "\",\"sandboxId\":\"" SB "\",\"state\":"
                "\"Ready\",\"reason\":\"\",\"createdAtMs\":-1,\"lastTransitionAtMs\":1}",
                "{\"version\":1,\"id\":\"" ID1 "\",\"sandboxId\":\"" SB "\",\"state\":"
                "\"Ready\",\"reason\":\"\",\"createdAtMs\":1.5,\"lastTransitionAtMs\":1}",
                "{\"version\":1,\"id\":\"" ID1 "\",\"sandboxId\":\"" SB "\",\"name\":\"a\\nb\","
                "\"state\":\"Ready\",\"reason\":\"\",\"createdAtMs\":1,\"lastTransitionAtMs\":1}",
                "{\"version\":1,\"id\":\"" ID1 "\",\"sandboxId\":\"" SB "\",\"name\":7,"
                "\"state\":\"Ready\",\"reason\":\"\",\"createdAtMs\":1,\"lastTransitionAtMs\":1}",
        };
        sh_snapshot *s = NULL;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_msg(parse(bad[i], ID1, &s) < 0, "accepted: %s", bad[i]);
                ck_assert_ptr_null(s);
        }
}
END_TEST

START_TEST(test_a_huge_record_is_refused)
{
        size_t n = SH_SNAP_RECORD_MAX + 10;
        char *text = malloc(n + 1);
        sh_snapshot *s = NULL;
        sh_error *err = NULL;

        memset(text, ' ', n);
        text[n] = '\0';
        ck_assert_int_lt(sh_snap_parse_record(text, n, ID1, &s, &err), 0);
        sh_error_release(&err);
        free(text);
}
END_TEST

START_TEST(test_names_are_short_clean_utf8)
{
        char big[SH_SNAP_NAME_MAX + 2];

        ck_assert(sh_snap_name_valid("checkpoint-before-import", 24));
        ck_assert(sh_snap_name_valid("d\xc3\xa9j\xc3\xa0", 6));
        ck_assert(!sh_snap_name_valid("", 0));
        ck_assert(!sh_snap_name_valid("a\tb", 3));
        ck_assert(!sh_snap_name_valid("\xff", 1));
        memset(big, 'a', sizeof(big));
        ck_assert(sh_snap_name_valid(big, SH_SNAP_NAME_MAX));
        ck_assert(!sh_snap_name_valid(big, SH_SNAP_NAME_MAX + 1));
}
END_TEST

static void put(const char *name, const char *content)
{
        ut_write_file(ut_path(dir, "%s", name), content);
}

static int open_store(sh_snapstore **st, sh_loop *loop)
{
        sh_error *err = NULL;
        int r = sh_snapstore_open(dir, loop, TOKEN, st, &err);

        sh_error_release(&err);
        return r;
}

START_TEST(test_the_load_keeps_valid_records_oldest_first_and_skips_the_rest)
{
        sh_snapstore *st = NULL;
        sh_snapshot *s;

        sh_log_set_level(SH_LOG_ERROR); /* the skips are logged: not looked at here */
        /* two good ones (trees present), newest first on disk */
        put(ID2 ".json", record(ID2, "Ready", 2000));
        ck_assert_int_eq(mkdir(ut_path(dir, ID2), 0700), 0);
        put(ID1 ".json", record(ID1, "Failed", 1000));
        /* Ready without its tree */
        put("snap-1111111111111111111111111111111111111111.json",
            record("snap-1111111111111111111111111111111111111111", "Ready", 3000));
        /* Ready whose "tree" is a link to the host */
        put("snap-2222222222222222222222222222222222222222.json",
            record("snap-2222222222222222222222222222222222222222", "Ready", 3000));
        ck_assert_int_eq(
                symlink("/etc", ut_path(dir, "snap-2222222222222222222222222222222222222222")), 0);
        /* a record that is a link, a FIFO (must not block the load), a directory */
        ck_assert_int_eq(
                symlink(ut_path(dir, ID1 ".json"),
                        ut_path(dir, "snap-3333333333333333333333333333333333333333.json")),
                0);
        ck_assert_int_eq(
                mkfifo(ut_path(dir, "snap-4444444444444444444444444444444444444444.json"), 0600),
                0);
        ck_assert_int_eq(
                mkdir(ut_path(dir, "snap-5555555555555555555555555555555555555555.json"), 0700), 0);
        /* garbage, a temporary file, other names */
        put("snap-6666666666666666666666666666666666666666.json", "{\"version\":1,");
        put("." ID1 ".1.2.tmp", record(ID1, "Ready", 1));
        put("README", "hello");
        ck_assert_int_eq(open_store(&st, NULL), 0);
        ck_assert_uint_eq(sh_snapstore_count(st), 2);
        s = sh_snapstore_first(st);
        ck_assert_str_eq(s->id, ID1);
        ck_assert_int_eq(s->state, SH_SNAP_FAILED);
        s = sh_snapstore_next(s);
        ck_assert_str_eq(s->id, ID2);
        ck_assert_ptr_null(sh_snapstore_next(s));
        ck_assert_ptr_nonnull(sh_snapstore_get(st, ID2, strlen(ID2)));
        ck_assert_ptr_null(
                sh_snapstore_get(st, "snap-1111111111111111111111111111111111111111", 45));
        ck_assert_ptr_null(sh_snapstore_get(st, "../x", 4));
        sh_snapstore_free(st);
        sh_log_set_level(SH_LOG_INFO);
}
END_TEST

START_TEST(test_a_missing_root_is_made_by_the_first_write_not_at_start)
{
        sh_snapstore *st = NULL;
        sh_snapshot *s = NULL;
        sh_error *err = NULL;
        sh_loop *loop = NULL;
        char sub[512];
        struct stat sb;

        snprintf(sub, sizeof(sub), "%s/a/b/snaps", dir);
        ck_assert_int_eq(sh_loop_new(&loop), 0);
        ck_assert_int_eq(sh_snapstore_open(sub, loop, TOKEN, &st, &err), 0);
        ck_assert_uint_eq(sh_snapstore_count(st), 0);
        ck_assert_int_eq(access(ut_path(dir, "a"), F_OK), -1);
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &s, &err), 0);
        run_until_idle(loop, st);
        ck_assert_int_eq(stat(ut_path(sub, ".trash"), &sb), 0);
        ck_assert(S_ISDIR(sb.st_mode));
        ck_assert_int_eq(stat(sub, &sb), 0);
        ck_assert_uint_eq(sb.st_mode & 0777, 0700);
        ck_assert_int_eq(access(ut_path(sub, "%s.json", s->id), F_OK), 0);
        sh_snapstore_free(st);
        sh_loop_free(loop);
}
END_TEST

START_TEST(test_a_new_id_is_snap_then_the_pod_token_then_random)
{
        sh_snapstore *st = NULL;
        sh_snapshot *a = NULL, *b = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(sh_snapstore_open(dir, NULL, TOKEN, &st, &err), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &a, &err), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &b, &err), 0);
        ck_assert(sh_snap_id_valid(a->id, strlen(a->id)));
        ck_assert_int_eq(strncmp(a->id, "snap-" TOKEN, 13), 0);
        ck_assert_int_eq(strncmp(b->id, "snap-" TOKEN, 13), 0);
        ck_assert_str_ne(a->id + 13, b->id + 13);
        sh_snapstore_free(st);
}
END_TEST

START_TEST(test_an_unreadable_root_is_no_reason_not_to_start)
{
        sh_snapstore *st = NULL;
        sh_error *err = NULL;

        sh_log_set_level(SH_LOG_ERROR);
        put("file", "not a directory");
        ck_assert_int_eq(sh_snapstore_open(ut_path(dir, "file"), NULL, TOKEN, &st, &err), 0);
        ck_assert_uint_eq(sh_snapstore_count(st), 0);
        sh_snapstore_free(st);
        sh_log_set_level(SH_LOG_INFO);
}
END_TEST

/* ---- the writer ---- */

static void idle_tick(sh_loop *l, sh_timer *t, void *data)
{
        if (sh_snapstore_idle(data)) {
                sh_loop_stop(l);
                return;
        }
        ck_assert_ptr_nonnull(sh_loop_add_timer(l, 5, idle_tick, data));
}

static void give_up(sh_loop *l, sh_timer *t, void *data)
{
        ck_abort_msg("the writer did not finish in time");
}

static void run_until_idle(sh_loop *loop, sh_snapstore *st)
{
        sh_timer *t = sh_loop_add_timer(loop, 10000, give_up, NULL);

        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 0, idle_tick, st));
        ck_assert_int_eq(sh_loop_run(loop), 0);
        sh_loop_cancel_timer(loop, t);
}

static char moved_name[128];

static void on_moved(sh_snapstore *st, const char *trash_name, void *data)
{
        snprintf(moved_name, sizeof(moved_name), "%s", trash_name);
        (*(int *)data)++;
}

START_TEST(test_records_are_written_by_the_writer_and_survive_a_reopen)
{
        sh_snapstore *st = NULL, *again = NULL;
        sh_snapshot *s = NULL, *t;
        sh_error *err = NULL;
        sh_loop *loop = NULL;
        char id[SH_SNAP_ID_LEN + 1];
        struct stat sb;
        uint64_t created;
        const char *args[] = {"sleep", "1000"};
        cJSON *ep = cJSON_CreateStringArray(args, 2);

        ck_assert_int_eq(sh_loop_new(&loop), 0);
        ck_assert_int_eq(open_store(&st, loop), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, "first", ep, &s, &err), 0);
        ck_assert(sh_snap_id_valid(s->id, strlen(s->id)));
        ck_assert_int_eq(s->state, SH_SNAP_CREATING);
        memcpy(id, s->id, sizeof(id));
        created = s->created_ms;
        run_until_idle(loop, st);
        ck_assert_int_eq(stat(ut_path(dir, "%s.json", id), &sb), 0);
        ck_assert_uint_eq(sb.st_mode & 0777, 0600);
        /* the tree the copy makes, then Ready */
        ck_assert_int_eq(mkdir(ut_path(dir, "%s", id), 0700), 0);
        ck_assert_int_eq(sh_snapstore_set_state(st, s, SH_SNAP_READY, "snapshot_ready", NULL, &err),
                         0);
        run_until_idle(loop, st);
        sh_snapstore_free(st);
        ck_assert_int_eq(open_store(&again, NULL), 0);
        t = sh_snapstore_get(again, id, strlen(id));
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->state, SH_SNAP_READY);
        ck_assert_str_eq(t->name, "first");
        ck_assert_uint_eq(t->created_ms, created);
        ck_assert(cJSON_Compare(t->entrypoint, ep, true));
        cJSON_Delete(ep);
        sh_snapstore_free(again);
        sh_loop_free(loop);
}
END_TEST

START_TEST(test_remove_moves_the_tree_to_the_trash_then_drops_the_record)
{
        sh_snapstore *st = NULL;
        sh_snapshot *s = NULL;
        sh_error *err = NULL;
        sh_loop *loop = NULL;
        char id[SH_SNAP_ID_LEN + 1];
        int moved = 0;

        ck_assert_int_eq(sh_loop_new(&loop), 0);
        ck_assert_int_eq(open_store(&st, loop), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &s, &err), 0);
        memcpy(id, s->id, sizeof(id));
        ck_assert_int_eq(mkdir(ut_path(dir, "%s", id), 0700), 0);
        put("x", "");
        ut_write_file(ut_path(dir, "%s/file", id), "payload");
        ck_assert_int_eq(sh_snapstore_remove(st, s, on_moved, &moved, &err), 0);
        ck_assert_uint_eq(sh_snapstore_count(st), 0);
        ck_assert_ptr_null(sh_snapstore_get(st, id, strlen(id)));
        run_until_idle(loop, st);
        ck_assert_int_eq(moved, 1);
        ck_assert_int_eq(access(ut_path(dir, "%s", id), F_OK), -1);
        ck_assert_int_eq(access(ut_path(dir, "%s.json", id), F_OK), -1);
        ck_assert_int_eq(access(ut_path(dir, ".trash/%s/file", moved_name), F_OK), 0);
        sh_snapstore_free(st);
        sh_loop_free(loop);
}
END_TEST

static void on_told(sh_waiter *w)
{
        (void)w;
        told++;
}

START_TEST(test_a_waiter_is_told_once_the_removals_tree_is_in_the_trash)
{
        sh_snapstore *st = NULL;
        sh_snapshot *s = NULL;
        sh_error *err = NULL;
        sh_loop *loop = NULL;
        sh_waiter w = {.done = on_told};
        char id[SH_SNAP_ID_LEN + 1];
        int moved = 0;

        told = 0;
        ck_assert_int_eq(sh_loop_new(&loop), 0);
        ck_assert_int_eq(open_store(&st, loop), 0);
        ck_assert(!sh_snapstore_wait(st, &w)); /* nothing queued: the caller tells it */
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &s, &err), 0);
        memcpy(id, s->id, sizeof(id));
        run_until_idle(loop, st);
        ck_assert_int_eq(mkdir(ut_path(dir, "%s", id), 0700), 0);
        ck_assert_int_eq(sh_snapstore_remove(st, s, on_moved, &moved, &err), 0);
        ck_assert(sh_snapstore_wait(st, &w));
        ck_assert_int_eq(told, 0);
        run_until_idle(loop, st);
        ck_assert_int_eq(told, 1);
        ck_assert_int_eq(moved, 1);
        ck_assert_int_eq(access(ut_path(dir, "%s", id), F_OK), -1);
        sh_snapstore_free(st);
        sh_loop_free(loop);
}
END_TEST

START_TEST(test_remove_without_a_tree_tells_nobody)
{
        sh_snapstore *st = NULL;
        sh_snapshot *s = NULL;
        sh_error *err = NULL;
        sh_loop *loop = NULL;
        int moved = 0;

        ck_assert_int_eq(sh_loop_new(&loop), 0);
        ck_assert_int_eq(open_store(&st, loop), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &s, &err), 0);
        ck_assert_int_eq(sh_snapstore_remove(st, s, on_moved, &moved, &err), 0);
        run_until_idle(loop, st);
        ck_assert_int_eq(moved, 0);
        sh_snapstore_free(st);
        sh_loop_free(loop);
}
END_TEST

START_TEST(test_writes_still_queued_at_free_are_made)
{
        sh_snapstore *st = NULL, *again = NULL;
        sh_snapshot *s = NULL;
        sh_error *err = NULL;
        sh_loop *loop = NULL;
        char id[SH_SNAP_ID_LEN + 1];

        ck_assert_int_eq(sh_loop_new(&loop), 0);
        ck_assert_int_eq(open_store(&st, loop), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, "a", NULL, &s, &err), 0);
        memcpy(id, s->id, sizeof(id));
        ck_assert_int_eq(mkdir(ut_path(dir, "%s", id), 0700), 0);
        ck_assert_int_eq(sh_snapstore_set_state(st, s, SH_SNAP_READY, "snapshot_ready", NULL, &err),
                         0);
        /* the loop never ran: the first write runs in a child, the second is queued */
        sh_snapstore_free(st);
        ck_assert_int_eq(open_store(&again, NULL), 0);
        ck_assert_ptr_nonnull(sh_snapstore_get(again, id, strlen(id)));
        ck_assert_int_eq(sh_snapstore_get(again, id, strlen(id))->state, SH_SNAP_READY);
        sh_snapstore_free(again);
        sh_loop_free(loop);
}
END_TEST

START_TEST(test_the_count_is_bounded)
{
        sh_snapstore *st = NULL;
        sh_snapshot *s = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(open_store(&st, NULL), 0);
        for (int i = 0; i < SH_SNAP_MAX; i++)
                ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &s, &err), 0);
        ck_assert_int_lt(sh_snapstore_add(st, SB, NULL, NULL, &s, &err), 0);
        ck_assert_int_eq(sh_error_kind_of(err), SH_E_UNAVAILABLE);
        sh_error_release(&err);
        sh_snapstore_free(st); /* writes them all inline: a loop-less store */
}
END_TEST

START_TEST(test_an_entrypoint_too_long_to_keep_is_not_kept)
{
        sh_snapstore *st = NULL;
        sh_snapshot *s = NULL;
        sh_error *err = NULL;
        char *big = malloc(SH_SNAP_ENTRY_MAX + 1);
        const char *args[2] = {"sh", big};
        cJSON *ep;

        memset(big, 'x', SH_SNAP_ENTRY_MAX);
        big[SH_SNAP_ENTRY_MAX] = '\0';
        ep = cJSON_CreateStringArray(args, 2);
        ck_assert_int_eq(open_store(&st, NULL), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, ep, &s, &err), 0);
        ck_assert_ptr_null(s->entrypoint);
        cJSON_Delete(ep);
        free(big);
        sh_snapstore_free(st);
}
END_TEST

START_TEST(test_a_record_with_a_bad_entrypoint_is_refused)
{
        static const char *const bad[] = {"[1]", "[]", "\"sh\"", "{}"};
        sh_snapshot *s = NULL;
        char text[1024];

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                snprintf(text, sizeof(text),
                         "{\"version\":1,\"id\":\"" ID1 "\",\"sandboxId\":\"" SB "\","
                         "\"state\":\"Ready\",\"reason\":\"\",\"createdAtMs\":1,"
                         "\"lastTransitionAtMs\":1,\"entrypoint\":%s}",
                         bad[i]);
                ck_assert_msg(parse(text, ID1, &s) < 0, "accepted %s", bad[i]);
        }
}
END_TEST

/* ---- the end of a copy ---- */

/* s's copy ended with *cerr (released): its reason. */
static const char *copy_end(sh_snapstore *st, sh_snapshot *s, sh_error **cerr, int *moved)
{
        sh_error *err = NULL;

        ck_assert_int_eq(sh_snapstore_copy_end(st, s, *cerr, on_moved, moved, &err), 0);
        sh_error_release(cerr);
        return s->reason;
}

START_TEST(test_a_copy_that_ends_well_makes_its_snapshot_ready)
{
        sh_snapstore *st = NULL;
        sh_snapshot *s = NULL;
        sh_error *err = NULL;
        sh_loop *loop = NULL;
        int moved = 0;

        ck_assert_int_eq(sh_loop_new(&loop), 0);
        ck_assert_int_eq(open_store(&st, loop), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &s, &err), 0);
        ck_assert_int_eq(mkdir(ut_path(dir, "%s", s->id), 0700), 0);
        ck_assert_str_eq(copy_end(st, s, &err, &moved), "snapshot_ready");
        ck_assert_int_eq(s->state, SH_SNAP_READY);
        run_until_idle(loop, st);
        ck_assert_int_eq(moved, 0);
        ck_assert_int_eq(access(ut_path(dir, "%s", s->id), F_OK), 0);
        sh_snapstore_free(st);
        sh_loop_free(loop);
}
END_TEST

START_TEST(test_a_failed_copy_makes_its_snapshot_failed_and_drops_its_tree)
{
        sh_snapstore *st = NULL;
        sh_snapshot *s = NULL;
        sh_error *err = NULL, *cerr = NULL;
        sh_loop *loop = NULL;
        char id[SH_SNAP_ID_LEN + 1];
        int moved = 0;

        ck_assert_int_eq(sh_loop_new(&loop), 0);
        ck_assert_int_eq(open_store(&st, loop), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &s, &err), 0);
        memcpy(id, s->id, sizeof(id));
        ck_assert_int_eq(mkdir(ut_path(dir, "%s", id), 0700), 0);
        ut_write_file(ut_path(dir, "%s/part", id), "half a copy");
        sh_error_new(&cerr, SH_E_PERSIST_FAILED, "rsync: boom");
        ck_assert_str_eq(copy_end(st, s, &cerr, &moved), "snapshot_capture_failed");
        ck_assert_int_eq(s->state, SH_SNAP_FAILED);
        ck_assert_str_eq(s->message, "rsync: boom");
        run_until_idle(loop, st);
        ck_assert_int_eq(moved, 1);
        ck_assert_int_eq(access(ut_path(dir, "%s", id), F_OK), -1);
        ck_assert_int_eq(access(ut_path(dir, ".trash/%s/part", moved_name), F_OK), 0);
        ck_assert_ptr_nonnull(sh_snapstore_get(st, id, strlen(id))); /* the record says why */
        sh_snapstore_free(st);
        sh_loop_free(loop);
}
END_TEST

START_TEST(test_a_copy_ended_by_a_delete_or_a_shutdown_says_so)
{
        sh_snapstore *st = NULL;
        sh_snapshot *a = NULL, *b = NULL;
        sh_error *err = NULL, *cerr = NULL;
        int moved = 0;

        ck_assert_int_eq(open_store(&st, NULL), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &a, &err), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &b, &err), 0);
        sh_error_new(&cerr, SH_E_SANDBOX_NOT_FOUND, "the sandbox was deleted");
        ck_assert_str_eq(copy_end(st, a, &cerr, &moved), "sandbox_deleted");
        sh_error_new(&cerr, SH_E_UNAVAILABLE, "the daemon is shutting down");
        ck_assert_str_eq(copy_end(st, b, &cerr, &moved), "snapshot_interrupted");
        sh_snapstore_free(st);
}
END_TEST

START_TEST(test_creating_counts_a_sandboxs_copies_in_progress)
{
        sh_snapstore *st = NULL;
        sh_snapshot *s = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(open_store(&st, NULL), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &s, &err), 0);
        ck_assert_int_eq(sh_snapstore_add(st, SB, NULL, NULL, &s, &err), 0);
        ck_assert_int_eq(sh_snapstore_add(st, "ffeeddccffeeddccbbaa99887766554433221100", NULL,
                                          NULL, &s, &err),
                         0);
        ck_assert_uint_eq(sh_snapstore_creating(st, SB), 2);
        s = sh_snapstore_first(st);
        ck_assert_int_eq(sh_snapstore_set_state(st, s, SH_SNAP_READY, "snapshot_ready", NULL, &err),
                         0);
        ck_assert_uint_eq(sh_snapstore_creating(st, SB), 1);
        sh_snapstore_free(st);
}
END_TEST

static Suite *snapstore_suite(void)
{
        Suite *s = suite_create("snapstore");
        TCase *pure = tcase_create("records");
        TCase *disk = tcase_create("store");

        tcase_add_test(pure, test_ids_are_snap_and_128_bits_of_lower_hex);
        tcase_add_test(pure, test_a_valid_record_round_trips);
        tcase_add_test(pure, test_a_creating_record_loads_as_failed);
        tcase_add_test(pure, test_hostile_records_are_refused);
        tcase_add_test(pure, test_a_huge_record_is_refused);
        tcase_add_test(pure, test_names_are_short_clean_utf8);
        tcase_add_test(pure, test_a_record_with_a_bad_entrypoint_is_refused);
        tcase_add_checked_fixture(disk, setup, teardown);
        tcase_set_timeout(disk, 60);
        tcase_add_test(disk, test_the_load_keeps_valid_records_oldest_first_and_skips_the_rest);
        tcase_add_test(disk, test_a_missing_root_is_made_by_the_first_write_not_at_start);
        tcase_add_test(disk, test_a_new_id_is_snap_then_the_pod_token_then_random);
        tcase_add_test(disk, test_an_unreadable_root_is_no_reason_not_to_start);
        tcase_add_test(disk, test_records_are_written_by_the_writer_and_survive_a_reopen);
        tcase_add_test(disk, test_remove_moves_the_tree_to_the_trash_then_drops_the_record);
        tcase_add_test(disk, test_remove_without_a_tree_tells_nobody);
        tcase_add_test(disk, test_a_waiter_is_told_once_the_removals_tree_is_in_the_trash);
        tcase_add_test(disk, test_writes_still_queued_at_free_are_made);
        tcase_add_test(disk, test_the_count_is_bounded);
        tcase_add_test(disk, test_an_entrypoint_too_long_to_keep_is_not_kept);
        tcase_add_test(disk, test_a_copy_that_ends_well_makes_its_snapshot_ready);
        tcase_add_test(disk, test_a_failed_copy_makes_its_snapshot_failed_and_drops_its_tree);
        tcase_add_test(disk, test_a_copy_ended_by_a_delete_or_a_shutdown_says_so);
        tcase_add_test(disk, test_creating_counts_a_sandboxs_copies_in_progress);
        suite_add_tcase(s, pure);
        suite_add_tcase(s, disk);
        return s;
}

int main(void)
{
        return ut_run(snapstore_suite());
}
