/* test_code_service.c: the code service (src/code/code.c) on real sandboxes, with the services
 * in this thread and no transport (wire_services_start): a context made ready by its driver,
 * its cells' events in order, its bound, busy refusal, an interrupt that leaves it alive, a
 * timeout whose grace kills a context deaf to it, a malformed frame that breaks it, its delete
 * and its set's end ending a running cell with its death, and its idle end. Python's driver on
 * the sandbox's python3 (the host's). The surface's shapes are test_os_code*.py's. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sh/code.h"
#include "sh/sandbox.h"
#include "unit.h"
#include "wire_helpers.h"

#define WAIT_MS 30000 /* a bound on every wait, never a speed */

static sh_loop *loop;
static sh_sandbox *sb;
static sh_code_set *set;

static void start(uint64_t contexts_max, uint64_t idle_ms)
{
        const sh_code_env env = {.loop = loop,
                                 .contexts_max = contexts_max,
                                 .idle_ms = idle_ms,
                                 .result_max = 1 << 20};

        set = sh_code_set_new(&env, sb);
        ck_assert_ptr_nonnull(set);
}

static void setup(void)
{
        signal(SIGPIPE, SIG_IGN);
        wire_services_start(NULL, &loop);
        sb = wire_sandbox();
        start(4, 600000);
}

static void teardown(void)
{
        sh_code_set_free(set);
        sh_sandbox_unref(sb);
        wire_services_stop();
}

/* ---- a context made ready -------------------------------------------------------------------- */

typedef struct made {
        bool answered;
        bool failed;
        sh_error_kind kind;
        char msg[256];
} made;

static void on_ready(sh_code_ctx *c, const sh_error *err, void *data)
{
        made *m = data;

        m->answered = true;
        m->failed = err != NULL;
        if (err) {
                m->kind = err->kind;
                snprintf(m->msg, sizeof(m->msg), "%s", err->msg ? err->msg : "");
        }
}

static bool answered(void *data)
{
        return ((made *)data)->answered;
}

static sh_code_ctx *ready_context(sh_code_lang lang, const char *cwd)
{
        made m = {0};
        sh_code_ctx *c = NULL;
        sh_error *err = NULL;

        ck_assert_int_eq(sh_code_context_new(set, lang, cwd, on_ready, &m, &c, &err), 0);
        wire_loop_until(answered, &m, WAIT_MS, "the context's ready");
        ck_assert_msg(!m.failed, "the context failed: %s", m.msg);
        return c;
}

/* ---- a cell's events ------------------------------------------------------------------------- */

typedef struct cell {
        char out[4096];
        size_t out_len;
        char types[32]; /* O(utput) R(esult) E(nd), in order (the first ones) */
        size_t n_types;
        char result[256]; /* the last result's text/plain */
        bool ended;
        sh_code_end how;
        uint64_t count;
        char ename[64], evalue[256];
} cell;

static void on_cell(sh_code_ctx *c, const sh_code_event *ev, void *data)
{
        cell *k = data;
        const char t = ev->type == SH_CODE_EV_OUTPUT   ? 'O'
                       : ev->type == SH_CODE_EV_RESULT ? 'R'
                                                       : 'E';

        ck_assert_msg(!k->ended, "an event after the end");
        if (k->n_types < sizeof(k->types) - 1 && (!k->n_types || k->types[k->n_types - 1] != t))
                k->types[k->n_types++] = t;
        k->count = ev->execution_count;
        if (ev->type == SH_CODE_EV_OUTPUT) {
                size_t n = ev->output.len;

                if (n > sizeof(k->out) - 1 - k->out_len)
                        n = sizeof(k->out) - 1 - k->out_len;
                memcpy(k->out + k->out_len, ev->output.data, n);
                k->out_len += n;
        } else if (ev->type == SH_CODE_EV_RESULT) {
                const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(ev->bundle, "text/plain"));

                snprintf(k->result, sizeof(k->result), "%s", p ? p : "");
        } else {
                k->ended = true;
                k->how = ev->end.how;
                snprintf(k->ename, sizeof(k->ename), "%s", ev->end.ename ? ev->end.ename : "");
                snprintf(k->evalue, sizeof(k->evalue), "%s", ev->end.evalue ? ev->end.evalue : "");
        }
}

static bool ended(void *data)
{
        return ((cell *)data)->ended;
}

static void run(sh_code_ctx *c, const char *code, uint64_t timeout_ms, cell *k)
{
        sh_error *err = NULL;

        memset(k, 0, sizeof(*k));
        ck_assert_msg(sh_code_run(c, code, strlen(code), timeout_ms, on_cell, k, &err) == 0, "%s",
                      err && err->msg ? err->msg : "");
}

static void run_to_end(sh_code_ctx *c, const char *code, uint64_t timeout_ms, cell *k)
{
        run(c, code, timeout_ms, k);
        wire_loop_until(ended, k, WAIT_MS, "the cell's end");
}

static bool passed(void *data)
{
        return sh_now_ms() >= *(uint64_t *)data;
}

/* The loop runs for ms (the cell gets going). */
static void pump(unsigned ms)
{
        uint64_t until = sh_now_ms() + ms;

        wire_loop_until(passed, &until, ms + WAIT_MS, "the time passing");
}

/* A cell that sleeps long, running (its context busy past the write). */
static void run_sleeping(sh_code_ctx *c, cell *k)
{
        run(c, "import time\ntime.sleep(30)", 0, k);
        pump(300);
}

static bool some_output(void *data)
{
        return ((cell *)data)->out_len > 0;
}

/* ---- the tests ------------------------------------------------------------------------------- */

START_TEST(a_cell_gives_its_output_then_its_result_then_its_end_in_order)
{
        sh_code_ctx *c = ready_context(SH_CODE_PYTHON, NULL);
        cell k;

        run_to_end(c, "print('hi')\n6 * 7", 0, &k);
        ck_assert_str_eq(k.types, "ORE");
        ck_assert_str_eq(k.out, "hi\n");
        ck_assert_str_eq(k.result, "42");
        ck_assert_int_eq(k.how, SH_CODE_END_OK);
        ck_assert_uint_eq(k.count, 1);
        run_to_end(c, "x = 1", 0, &k);
        ck_assert_str_eq(k.types, "E");
        ck_assert_uint_eq(k.count, 2);
}
END_TEST

START_TEST(an_exception_ends_the_cell_with_the_interpreters_error)
{
        sh_code_ctx *c = ready_context(SH_CODE_PYTHON, NULL);
        cell k;

        run_to_end(c, "raise ValueError('nope')", 0, &k);
        ck_assert_int_eq(k.how, SH_CODE_END_ERROR);
        ck_assert_str_eq(k.ename, "ValueError");
        ck_assert_str_eq(k.evalue, "nope");
}
END_TEST

START_TEST(a_second_cell_while_one_runs_is_refused_busy)
{
        sh_code_ctx *c = ready_context(SH_CODE_PYTHON, NULL);
        sh_error *err = NULL;
        cell k;

        run(c, "import time\ntime.sleep(1)", 0, &k);
        ck_assert_int_eq(sh_code_run(c, "1", 1, 0, on_cell, &k, &err), -1);
        ck_assert_int_eq(err->kind, SH_E_BUSY);
        sh_error_release(&err);
        wire_loop_until(ended, &k, WAIT_MS, "the first cell's end");
        ck_assert_int_eq(k.how, SH_CODE_END_OK);
}
END_TEST

START_TEST(an_interrupt_ends_the_cell_and_the_context_lives)
{
        sh_code_ctx *c = ready_context(SH_CODE_PYTHON, NULL);
        cell k;

        run(c, "print('go', flush=True)\nwhile True:\n    pass", 0, &k);
        wire_loop_until(some_output, &k, WAIT_MS, "the cell's first output");
        sh_code_interrupt(c);
        wire_loop_until(ended, &k, WAIT_MS, "the interrupted cell's end");
        ck_assert_str_eq(k.ename, "KeyboardInterrupt");
        run_to_end(c, "'alive'", 0, &k);
        ck_assert_str_eq(k.result, "'alive'");
}
END_TEST

START_TEST(a_timeout_deaf_to_its_interrupt_kills_the_context_after_the_grace)
{
        sh_code_ctx *c = ready_context(SH_CODE_PYTHON, NULL);
        sh_error *err = NULL;
        cell k;

        run_to_end(c,
                   "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                   "while True:\n    time.sleep(0.05)",
                   200, &k);
        ck_assert_int_eq(k.how, SH_CODE_END_DEATH);
        ck_assert_ptr_nonnull(strstr(k.evalue, "timed out"));
        ck_assert_int_eq(sh_code_run(c, "1", 1, 0, on_cell, &k, &err), -1);
        ck_assert_int_eq(err->kind, SH_E_INVALID);
        sh_error_release(&err);
}
END_TEST

START_TEST(a_malformed_frame_breaks_the_context)
{
        sh_code_ctx *c = ready_context(SH_CODE_PYTHON, NULL);
        cell k;

        run_to_end(c, "import os, time\nos.write(3, b'{\"t\":1}\\n')\ntime.sleep(5)", 0, &k);
        ck_assert_int_eq(k.how, SH_CODE_END_DEATH);
        ck_assert_ptr_nonnull(strstr(k.evalue, "malformed"));
}
END_TEST

START_TEST(a_delete_ends_the_running_cell_with_its_death)
{
        sh_code_ctx *c = ready_context(SH_CODE_PYTHON, NULL);
        cell k;

        run_sleeping(c, &k);
        sh_code_context_delete(c);
        wire_loop_until(ended, &k, WAIT_MS, "the deleted context's cell's end");
        ck_assert_int_eq(k.how, SH_CODE_END_DEATH);
        ck_assert_ptr_nonnull(strstr(k.evalue, "deleted"));
}
END_TEST

START_TEST(the_sets_end_ends_a_running_cell_with_its_death)
{
        sh_code_ctx *c = ready_context(SH_CODE_PYTHON, NULL);
        cell k;

        run_sleeping(c, &k);
        sh_code_set_free(set);
        set = NULL;
        wire_loop_until(ended, &k, WAIT_MS, "the cell's end with its set");
        ck_assert_int_eq(k.how, SH_CODE_END_DEATH);
}
END_TEST

START_TEST(contexts_past_the_bound_are_refused)
{
        sh_code_ctx *c = NULL;
        sh_error *err = NULL;
        made m = {0};

        sh_code_set_free(set);
        start(1, 600000);
        ready_context(SH_CODE_PYTHON, NULL);
        ck_assert_int_eq(sh_code_context_new(set, SH_CODE_PYTHON, NULL, on_ready, &m, &c, &err),
                         -1);
        ck_assert_int_eq(err->kind, SH_E_INVALID);
        ck_assert_ptr_nonnull(strstr(err->msg, "SANDBOX_HOST_CODE_CONTEXTS_MAX"));
        sh_error_release(&err);
}
END_TEST

static bool gone_from_set(void *data)
{
        return !sh_code_context_find(set, data, SH_UUID_LEN);
}

START_TEST(an_idle_context_ends_after_the_idle_time)
{
        char id[SH_UUID_LEN + 1];

        sh_code_set_free(set);
        start(4, 300);
        snprintf(id, sizeof(id), "%s", sh_code_context_id(ready_context(SH_CODE_PYTHON, NULL)));
        ck_assert_ptr_nonnull(sh_code_context_find(set, id, SH_UUID_LEN));
        wire_loop_until(gone_from_set, id, WAIT_MS, "the idle context's end");
}
END_TEST

START_TEST(a_cwd_that_cannot_be_entered_fails_the_create_naming_it)
{
        sh_code_ctx *c = NULL;
        sh_error *err = NULL;
        made m = {0};

        ck_assert_int_eq(
                sh_code_context_new(set, SH_CODE_PYTHON, "/no/such/dir", on_ready, &m, &c, &err),
                0);
        wire_loop_until(answered, &m, WAIT_MS, "the create's answer");
        ck_assert(m.failed);
        ck_assert_int_eq(m.kind, SH_E_INVALID);
        ck_assert_ptr_nonnull(strstr(m.msg, "/no/such/dir"));
}
END_TEST

static Suite *code_service_suite(void)
{
        Suite *s = suite_create("code_service");
        TCase *tc = tcase_create("cells");

        tcase_set_timeout(tc, 120);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, a_cell_gives_its_output_then_its_result_then_its_end_in_order);
        tcase_add_test(tc, an_exception_ends_the_cell_with_the_interpreters_error);
        tcase_add_test(tc, a_second_cell_while_one_runs_is_refused_busy);
        tcase_add_test(tc, an_interrupt_ends_the_cell_and_the_context_lives);
        tcase_add_test(tc, a_timeout_deaf_to_its_interrupt_kills_the_context_after_the_grace);
        tcase_add_test(tc, a_malformed_frame_breaks_the_context);
        suite_add_tcase(s, tc);

        tc = tcase_create("contexts");
        tcase_set_timeout(tc, 120);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, a_delete_ends_the_running_cell_with_its_death);
        tcase_add_test(tc, the_sets_end_ends_a_running_cell_with_its_death);
        tcase_add_test(tc, contexts_past_the_bound_are_refused);
        tcase_add_test(tc, an_idle_context_ends_after_the_idle_time);
        tcase_add_test(tc, a_cwd_that_cannot_be_entered_fails_the_create_naming_it);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        int k = ut_need_root("sandboxes need root (their cgroups and namespaces)");

        return k ? k : wire_main(code_service_suite());
}
