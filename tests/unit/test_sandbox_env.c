/* test_sandbox_env.c: a sandbox object (src/sandbox/sandbox.c) lives on what it is made with
 * (sh_sandbox_env: the settings, the loop, the owner's calls) and reaches nothing else: made
 * here with no manager at all, its ids and limits come from the env's settings, its create
 * ends from the env's loop, and a create that must go asks the env's owner to remove the
 * sandbox, once, and only while nobody else deleted it. Its expiry is a timer of the env's
 * loop that asks the owner to remove it, once, never later than the settings' ceiling; a pause
 * needs its cgroup, a resume a pause; its journal keeps what is noted once it is kept. */
#include <check.h>
#include <stdbool.h>
#include <string.h>

#include "../../src/sandbox/sandbox-internal.h"
#include "sh/loop.h"
#include "unit.h"

#define SAFETY_MS 2000 /* every loop run is bounded by a timer that fails the test */

/* What the owner and the creator were told. */
typedef struct record {
        sh_sandbox *removed; /* the last sandbox the owner was asked to remove */
        unsigned removes, releases, buried;
        unsigned dones;
        bool done_failed;        /* the done came with an error */
        sh_error_kind done_kind; /* ...of this kind */
} record;

static sh_loop *loop;
static sh_ws_cache *cache;
static sh_config cfg;
static const sh_restorer no_restorer;
static record rec;
static sh_sandbox_env env;

/* The owner: removing marks the sandbox deleted, as the manager's delete does first. */
static int owner_remove(void *owner, sh_sandbox *sb, sh_error **err)
{
        record *r = owner;

        (void)err;
        r->removed = sb;
        r->removes++;
        sh_sandbox_set_deleted(sb);
        sh_loop_stop(loop); /* a run waiting for it ends */
        return 0;
}

static void owner_release_dir(void *owner, const char *dirname, char *trash_name)
{
        (void)dirname;
        ((record *)owner)->releases++;
        free(trash_name);
}

static void reaper_bury(void *reaper, struct sh_cgroup *cg)
{
        (void)cg;
        ((record *)reaper)->buried++;
}

static const sh_sandbox_owner_ops owner_ops = {
        .remove = owner_remove,
        .release_dir = owner_release_dir,
};

static void setup(void)
{
        memset(&rec, 0, sizeof(rec));
        ck_assert_int_eq(sh_loop_new(&loop), 0);
        cache = sh_ws_cache_new(loop);
        ck_assert_ptr_nonnull(cache);
        cfg = (sh_config){
                .uid_base = 200000,
                .memory_max = 1ULL << 30,
                .cpu_max_milli = 2000,
        };
        env = (sh_sandbox_env){
                .exec = {.loop = loop, .cgroot = NULL, .bury = reaper_bury, .reaper = &rec},
                .cfg = &cfg,
                .init_image = -1,
                .sandboxes_fd = -1,
                .ws_cache = cache,
                .restorer = &no_restorer,
                .owner = &owner_ops,
                .owner_data = &rec,
                .pod_token = "0123abcd",
        };
}

static void teardown(void)
{
        sh_ws_cache_free(cache);
        sh_loop_free(loop);
}

static void on_safety(sh_loop *l, sh_timer *t, void *data)
{
        (void)t;
        *(bool *)data = true;
        sh_loop_stop(l);
}

static void on_next_turn(sh_loop *l, sh_timer *t, void *data)
{
        (void)t;
        (void)data;
        sh_loop_stop(l);
}

/* Run the env's loop through the timers due now (a 0 ms timer's turn), bounded. */
static void run_one_turn(void)
{
        bool hit = false;
        sh_timer *safety = sh_loop_add_timer(loop, SAFETY_MS, on_safety, &hit);

        ck_assert_ptr_nonnull(safety);
        ck_assert_ptr_nonnull(sh_loop_add_timer(loop, 1, on_next_turn, NULL));
        ck_assert_int_eq(sh_loop_run(loop), 0);
        ck_assert_msg(!hit, "the loop ran into the %u ms safety timer", SAFETY_MS);
        sh_loop_cancel_timer(loop, safety);
}

static void on_done(sh_sandbox *sb, const sh_error *err, void *data)
{
        record *r = data;

        (void)sb;
        r->dones++;
        r->done_failed = err != NULL;
        if (err)
                r->done_kind = sh_error_kind_of(err);
}

/* A sandbox claimed for a create (its create in flight, ending from the loop). */
static sh_sandbox *claimed(void)
{
        const sh_create_opts o = {0};
        sh_sandbox *sb = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(sh_sandbox_new(&env, 3, &o, &sb, &err), 0);
        ck_assert_int_eq(sh_sandbox_claim(sb, &o, on_done, &rec, &err), 0);
        return sb;
}

START_TEST(a_sandbox_takes_its_ids_and_limits_from_the_settings_of_its_env)
{
        const sh_create_opts o = {.memory_max = 256ULL << 20, .cpu_max_milli = 4000};
        sh_sandbox *sb = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(sh_sandbox_new(&env, 7, &o, &sb, &err), 0);
        ck_assert_uint_eq(sh_sandbox_owner(sb)->uid, 200007);
        ck_assert_uint_eq(sh_sandbox_owner(sb)->gid, 200007);
        ck_assert_uint_eq(sh_sandbox_memory_max(sb), 256ULL << 20); /* lower: the create's */
        ck_assert_uint_eq(sh_sandbox_cpu_max_milli(sb), 2000);      /* higher: the host's */
        sh_sandbox_unref(sb);
        ck_assert_uint_eq(rec.removes + rec.releases + rec.buried, 0);
}
END_TEST

START_TEST(a_sandbox_id_is_the_pod_token_of_its_env_then_random)
{
        sh_sandbox *a = NULL, *b = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(sh_sandbox_new(&env, 1, &(sh_create_opts){0}, &a, &err), 0);
        ck_assert_int_eq(sh_sandbox_new(&env, 2, &(sh_create_opts){0}, &b, &err), 0);
        ck_assert(sh_remote_id_valid(sh_sandbox_id(a), strlen(sh_sandbox_id(a))));
        ck_assert_int_eq(strncmp(sh_sandbox_id(a), "0123abcd", SH_POD_TOKEN_LEN), 0);
        ck_assert_int_eq(strncmp(sh_sandbox_id(b), "0123abcd", SH_POD_TOKEN_LEN), 0);
        ck_assert_str_ne(sh_sandbox_id(a), sh_sandbox_id(b));
        sh_sandbox_unref(a);
        sh_sandbox_unref(b);
}
END_TEST

START_TEST(a_create_ends_once_from_the_loop_of_its_env)
{
        sh_sandbox *sb = claimed();

        ck_assert_uint_eq(rec.dones, 0); /* never before the create returns */
        run_one_turn();
        ck_assert_uint_eq(rec.dones, 1);
        ck_assert(!rec.done_failed);
        run_one_turn();
        ck_assert_uint_eq(rec.dones, 1);
        ck_assert_uint_eq(rec.removes, 0);
        sh_sandbox_unref(sb);
}
END_TEST

START_TEST(a_cancelled_create_asks_its_owner_to_remove_the_sandbox_once)
{
        sh_sandbox *sb = claimed();

        sh_sandbox_create_cancel(sb);
        ck_assert_uint_eq(rec.removes, 1);
        ck_assert_ptr_eq(rec.removed, sb);
        ck_assert(sh_sandbox_deleted(sb));
        sh_sandbox_create_cancel(sb); /* nothing in flight any more */
        run_one_turn();
        ck_assert_uint_eq(rec.removes, 1);
        ck_assert_uint_eq(rec.dones, 0); /* the creator is gone: never told */
        sh_sandbox_unref(sb);
}
END_TEST

START_TEST(a_create_ended_by_a_delete_tells_the_creator_and_asks_the_owner_nothing)
{
        sh_sandbox *sb = claimed();

        sh_sandbox_set_deleted(sb); /* deleted by someone else (a shutdown) meanwhile */
        run_one_turn();
        ck_assert_uint_eq(rec.dones, 1);
        ck_assert(rec.done_failed);
        ck_assert_int_eq(rec.done_kind, SH_E_UNAVAILABLE);
        ck_assert_uint_eq(rec.removes, 0);
        sh_sandbox_unref(sb);
}
END_TEST

static void on_time_up(sh_loop *l, sh_timer *t, void *data)
{
        (void)t;
        *(bool *)data = true;
        sh_loop_stop(l);
}

/* Run the env's loop until `ms` have passed (or the owner removes a sandbox), bounded. */
static void run_for(unsigned ms)
{
        bool hit = false, up = false;
        sh_timer *safety = sh_loop_add_timer(loop, SAFETY_MS, on_safety, &hit);
        sh_timer *stop = sh_loop_add_timer(loop, ms, on_time_up, &up);

        ck_assert_ptr_nonnull(safety);
        ck_assert_ptr_nonnull(stop);
        ck_assert_int_eq(sh_loop_run(loop), 0);
        ck_assert_msg(!hit, "the loop ran into the %u ms safety timer", SAFETY_MS);
        sh_loop_cancel_timer(loop, safety);
        if (!up)
                sh_loop_cancel_timer(loop, stop);
}

static sh_sandbox *made(void)
{
        const sh_create_opts o = {0};
        sh_sandbox *sb = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(sh_sandbox_new(&env, 5, &o, &sb, &err), 0);
        return sb;
}

START_TEST(an_expiry_asks_the_owner_to_remove_the_sandbox_once)
{
        sh_sandbox *sb = made();

        sh_sandbox_set_expiry(sb, sh_now_wall_ms() + 20);
        ck_assert(!sh_sandbox_expired(sb));
        run_for(SAFETY_MS / 2);
        ck_assert_uint_eq(rec.removes, 1);
        ck_assert_ptr_eq(rec.removed, sb);
        ck_assert(sh_sandbox_expired(sb));
        run_for(30);
        ck_assert_uint_eq(rec.removes, 1);
        sh_sandbox_unref(sb);
}
END_TEST

START_TEST(an_expiry_moved_later_is_the_one_kept)
{
        sh_sandbox *sb = made();

        sh_sandbox_set_expiry(sb, sh_now_wall_ms() + 10);
        sh_sandbox_set_expiry(sb, sh_now_wall_ms() + 60000);
        run_for(100); /* past the first: its timer fires, finds the later one and waits */
        ck_assert_uint_eq(rec.removes, 0);
        ck_assert(!sh_sandbox_expired(sb));
        sh_sandbox_unref(sb); /* its timer goes with it */
}
END_TEST

START_TEST(a_renew_moves_an_expiry_later_never_earlier)
{
        sh_sandbox *sb = made();
        uint64_t before, now;

        sh_sandbox_renew(sb, 1000); /* no expiry: none made */
        ck_assert_uint_eq(sh_sandbox_expiry(sb), 0);
        sh_sandbox_set_expiry(sb, sh_now_wall_ms() + 60000);
        before = sh_sandbox_expiry(sb);
        sh_sandbox_renew(sb, 1000);
        ck_assert_uint_eq(sh_sandbox_expiry(sb), before);
        now = sh_now_wall_ms();
        sh_sandbox_renew(sb, 120000);
        ck_assert_uint_ge(sh_sandbox_expiry(sb), now + 120000);
        sh_sandbox_unref(sb);
}
END_TEST

START_TEST(no_expiry_is_later_than_now_plus_the_ceiling)
{
        sh_sandbox *sb;
        uint64_t after;

        cfg.max_timeout_s = 60;
        sb = made();
        sh_sandbox_set_expiry(sb, sh_now_wall_ms() + 36000000);
        after = sh_now_wall_ms();
        ck_assert_uint_le(sh_sandbox_expiry(sb), after + 60000);
        ck_assert_uint_ge(sh_sandbox_expiry(sb), after + 59000);
        sh_sandbox_renew(sb, 36000000); /* renew too */
        ck_assert_uint_le(sh_sandbox_expiry(sb), sh_now_wall_ms() + 60000);
        sh_sandbox_unref(sb);
}
END_TEST

START_TEST(a_deleted_sandbox_does_not_expire)
{
        sh_sandbox *sb = made();

        sh_sandbox_set_expiry(sb, sh_now_wall_ms() + 5);
        sh_sandbox_set_deleted(sb);
        run_for(50);
        ck_assert_uint_eq(rec.removes, 0);
        ck_assert(!sh_sandbox_expired(sb));
        sh_sandbox_unref(sb);
}
END_TEST

START_TEST(a_pause_needs_the_sandbox_cgroup_and_a_resume_a_pause)
{
        sh_sandbox *sb = made();
        sh_error *err = NULL;

        ck_assert_int_lt(sh_sandbox_resume(sb, on_done, &rec, &err), 0);
        ck_assert_int_eq(sh_error_kind_of(err), SH_E_INVALID);
        sh_error_release(&err);
        ck_assert_int_lt(sh_sandbox_pause(sb, on_done, &rec, &err), 0); /* no worker yet */
        sh_error_release(&err);
        ck_assert_uint_eq(sh_sandbox_freeze_holds(sb), 0);
        ck_assert_int_lt(sh_sandbox_resume(sb, on_done, &rec, &err), 0); /* nothing paused */
        sh_error_release(&err);
        run_for(20);
        ck_assert_uint_eq(rec.dones, 0);
        sh_sandbox_unref(sb);
}
END_TEST

START_TEST(a_journal_keeps_the_events_noted_once_it_is_kept)
{
        sh_sandbox *sb = made();
        sh_error *err = NULL;
        const sh_ring *g;

        sh_sandbox_journal_note(sb, "before", 6); /* no journal yet: not kept */
        ck_assert_ptr_null(sh_sandbox_journal(sb, SH_JOURNAL_EVENTS));
        ck_assert_int_eq(sh_sandbox_journal_keep(sb, &err), 0);
        ck_assert_int_eq(sh_sandbox_journal_keep(sb, &err), 0); /* twice is once */
        sh_sandbox_journal_note(sb, "Pending -> Running", 18);
        g = sh_sandbox_journal(sb, SH_JOURNAL_EVENTS);
        ck_assert_ptr_nonnull(g);
        ck_assert_uint_eq(g->len, 19);
        ck_assert_int_eq(memcmp(g->p, "Pending -> Running\n", 19), 0);
        ck_assert_uint_eq(g->cap, SH_JOURNAL_EVENTS_MAX);
        ck_assert_uint_eq(sh_sandbox_journal(sb, SH_JOURNAL_LOG)->cap, SH_JOURNAL_LOG_MAX);
        ck_assert_uint_eq(sh_sandbox_journal(sb, SH_JOURNAL_LOG)->total, 0);
        sh_sandbox_unref(sb); /* the journal goes with it (ASan: no leak) */
}
END_TEST

START_TEST(a_claim_takes_its_place_in_the_order_of_the_creates)
{
        sh_sandbox *pooled = made(), *later = made(), *claim;
        sh_error *err = NULL;

        ck_assert_uint_gt(sh_sandbox_created(later), sh_sandbox_created(pooled));
        claim = pooled; /* started ahead for the pool, handed out now: newer than `later` */
        ck_assert_int_eq(sh_sandbox_claim(claim, &(sh_create_opts){0}, on_done, &rec, &err), 0);
        ck_assert_uint_gt(sh_sandbox_created(claim), sh_sandbox_created(later));
        run_one_turn();
        sh_sandbox_unref(later);
        sh_sandbox_unref(claim);
}
END_TEST

static Suite *sandbox_env_suite(void)
{
        Suite *s = suite_create("sandbox_env");
        TCase *tc = tcase_create("env");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, a_sandbox_takes_its_ids_and_limits_from_the_settings_of_its_env);
        tcase_add_test(tc, a_sandbox_id_is_the_pod_token_of_its_env_then_random);
        tcase_add_test(tc, a_create_ends_once_from_the_loop_of_its_env);
        tcase_add_test(tc, a_cancelled_create_asks_its_owner_to_remove_the_sandbox_once);
        tcase_add_test(tc, a_create_ended_by_a_delete_tells_the_creator_and_asks_the_owner_nothing);
        tcase_add_test(tc, a_claim_takes_its_place_in_the_order_of_the_creates);
        suite_add_tcase(s, tc);
        tc = tcase_create("expiry, pause, journal");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, an_expiry_asks_the_owner_to_remove_the_sandbox_once);
        tcase_add_test(tc, an_expiry_moved_later_is_the_one_kept);
        tcase_add_test(tc, a_renew_moves_an_expiry_later_never_earlier);
        tcase_add_test(tc, no_expiry_is_later_than_now_plus_the_ceiling);
        tcase_add_test(tc, a_deleted_sandbox_does_not_expire);
        tcase_add_test(tc, a_pause_needs_the_sandbox_cgroup_and_a_resume_a_pause);
        tcase_add_test(tc, a_journal_keeps_the_events_noted_once_it_is_kept);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(sandbox_env_suite());
}
