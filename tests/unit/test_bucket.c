/* test_bucket.c: the token bucket (src/core/bucket.c): full at first, refilled with the time
 * up to its cap, in debt past it with the wait that pays the debt. The time is the test's. */
#include <check.h>

#include "sh/bucket.h"
#include "unit.h"

START_TEST(test_a_new_bucket_is_full_and_takes_up_to_its_cap_without_a_wait)
{
        sh_bucket b;

        sh_bucket_init(&b, 8000, 1000, 100);
        ck_assert_uint_eq(sh_bucket_take(&b, 600, 100), 0);
        ck_assert_uint_eq(sh_bucket_take(&b, 400, 100), 0); /* exactly empty: no debt */
        ck_assert_int_eq(b.tokens, 0);
}
END_TEST

START_TEST(test_past_its_tokens_it_is_in_debt_until_the_refill_pays_it)
{
        sh_bucket b;

        sh_bucket_init(&b, 8000, 1000, 0);                  /* 8 tokens a ms */
        ck_assert_uint_eq(sh_bucket_take(&b, 1080, 0), 11); /* 80 in debt: 10 ms, and 1 more */
        ck_assert_int_eq(b.tokens, -80);
        sh_bucket_refill(&b, 10);
        ck_assert_int_eq(b.tokens, 0); /* paid after the wait */
}
END_TEST

START_TEST(test_the_refill_follows_the_time_and_stops_at_the_cap)
{
        sh_bucket b;

        sh_bucket_init(&b, 8000, 1000, 0);
        ck_assert_uint_eq(sh_bucket_take(&b, 1000, 0), 0);
        sh_bucket_refill(&b, 50); /* 400 earned */
        ck_assert_int_eq(b.tokens, 400);
        sh_bucket_refill(&b, 50); /* no time, nothing earned */
        ck_assert_int_eq(b.tokens, 400);
        sh_bucket_refill(&b, 10000); /* a long silence: the cap, no more */
        ck_assert_int_eq(b.tokens, 1000);
}
END_TEST

START_TEST(test_a_take_counts_the_time_since_the_last_one)
{
        sh_bucket b;

        sh_bucket_init(&b, 1000, 100, 0); /* 1 token a ms */
        ck_assert_uint_eq(sh_bucket_take(&b, 100, 0), 0);
        ck_assert_uint_eq(sh_bucket_take(&b, 30, 20), 11); /* 20 earned, 10 in debt */
        ck_assert_uint_eq(sh_bucket_take(&b, 0, 40), 0);   /* 20 more: 10 held */
        ck_assert_int_eq(b.tokens, 10);
}
END_TEST

static Suite *bucket_suite(void)
{
        Suite *s = suite_create("bucket");
        TCase *tc = tcase_create("bucket");

        tcase_add_test(tc, test_a_new_bucket_is_full_and_takes_up_to_its_cap_without_a_wait);
        tcase_add_test(tc, test_past_its_tokens_it_is_in_debt_until_the_refill_pays_it);
        tcase_add_test(tc, test_the_refill_follows_the_time_and_stops_at_the_cap);
        tcase_add_test(tc, test_a_take_counts_the_time_since_the_last_one);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(bucket_suite());
}
