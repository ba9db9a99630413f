/* test_request_job.c: a job of the loop that answers a request (src/http/pending.c): started, its
 * first slice runs at once; its pending ops as sh_request_job_op_gone and _op_read: the client's
 * end stops its slices, a read runs one slice. The request is a bare one (no connection). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/http/http-internal.h"
#include "sh/http.h"
#include "unit.h"

typedef struct job {
        sh_request_job rj; /* first */
        int steps, released;
} job;

static sh_loop *loop;
static sh_request *req;
static job jb;

static void job_release(void *data)
{
        job *j = data;

        sh_request_job_free(&j->rj);
        j->released++;
}

static const sh_pending_ops job_ops = {
        .gone = sh_request_job_op_gone, .release = job_release, .read = sh_request_job_op_read};

/* One "x" a step; a slice is one step. */
static int job_step(void *data)
{
        job *j = data;

        j->steps++;
        return sh_buf_append(&j->rj.ss.b, "x", 1) < 0 ? SH_LOOP_JOB_DONE : 1;
}

static int job_answer_at_once(void *data)
{
        job *j = data;

        j->steps++;
        return sh_request_job_done(&j->rj);
}

static void setup(void)
{
        memset(&jb, 0, sizeof(jb));
        jb.rj.job.steps = 1;
        ck_assert_int_eq(sh_loop_new(&loop), 0);
        req = calloc(1, sizeof(*req));
        ck_assert_ptr_nonnull(req);
}

static void teardown(void)
{
        free(req);
        sh_loop_free(loop);
}

static void on_stop(sh_loop *l, sh_timer *t, void *data)
{
        sh_loop_stop(l);
}

/* The loop runs its due work for a while, then stops. */
static void run_a_while(void)
{
        sh_timer *t = sh_loop_add_timer(loop, 50, on_stop, NULL);

        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(sh_loop_run(loop), 0);
}

START_TEST(test_a_started_job_runs_its_first_slice_before_start_returns)
{
        ck_assert(sh_request_job_start(&jb.rj, req, loop, &job_ops, job_answer_at_once, "test"));
        ck_assert_int_eq(jb.steps, 1);
        sh_pending_request_ended(req);
        ck_assert_int_eq(jb.released, 1);
}
END_TEST

START_TEST(test_the_clients_end_stops_the_slices_through_op_gone)
{
        ck_assert(sh_request_job_start(&jb.rj, req, loop, &job_ops, job_step, "test"));
        ck_assert_int_eq(jb.steps, 1);
        sh_pending_request_ended(req);
        run_a_while();
        ck_assert_int_eq(jb.steps, 1);
        ck_assert_int_eq(jb.released, 1);
}
END_TEST

START_TEST(test_a_read_through_op_read_runs_one_slice_for_the_reader)
{
        char out[16];
        sh_pending *tok;

        ck_assert(sh_request_job_start(&jb.rj, req, loop, &job_ops, job_step, "test"));
        sh_loop_job_stop(&jb.rj.job); /* only the reads slice it now */
        tok = jb.rj.tok;
        ck_assert_int_eq(tok->ops->read(tok->data, out, sizeof(out)), 2);
        ck_assert_mem_eq(out, "xx", 2); /* the first slice's, and the read's own */
        ck_assert_int_eq(jb.steps, 2);
        sh_pending_request_ended(req);
        ck_assert_int_eq(jb.released, 1);
}
END_TEST

static Suite *request_job_suite(void)
{
        Suite *s = suite_create("request_job");
        TCase *tc = tcase_create("job");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_a_started_job_runs_its_first_slice_before_start_returns);
        tcase_add_test(tc, test_the_clients_end_stops_the_slices_through_op_gone);
        tcase_add_test(tc, test_a_read_through_op_read_runs_one_slice_for_the_reader);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(request_job_suite());
}
