/* test_waiter.c: sh/waiter.h, the parties told once that something is over (a sandbox's trash
 * emptied): woken, cancelled, moved, freed from their own done. */
#include <check.h>
#include <stdlib.h>

#include "sh/waiter.h"
#include "unit.h"

typedef struct counted {
        sh_waiter w; /* first */
        int told;
} counted;

static void count(sh_waiter *w)
{
        ((counted *)w)->told++;
}

START_TEST(test_a_woken_waiter_is_told_once_and_left_on_no_list)
{
        counted a = {.w.done = count}, b = {.w.done = count};
        sh_waiter *head = NULL;

        sh_waiter_add(&head, &a.w);
        sh_waiter_add(&head, &b.w);
        sh_waiters_wake(&head);
        ck_assert_ptr_null(head);
        ck_assert_int_eq(a.told, 1);
        ck_assert_int_eq(b.told, 1);
        ck_assert_ptr_null(a.w.head);
        sh_waiters_wake(&head);
        ck_assert_int_eq(a.told, 1);
}
END_TEST

START_TEST(test_a_cancelled_waiter_is_never_told)
{
        counted a = {.w.done = count}, b = {.w.done = count};
        sh_waiter *head = NULL;

        sh_waiter_add(&head, &a.w);
        sh_waiter_add(&head, &b.w);
        sh_waiter_cancel(&a.w);
        sh_waiter_cancel(&a.w); /* again: on no list now */
        sh_waiter_cancel(NULL);
        sh_waiters_wake(&head);
        ck_assert_int_eq(a.told, 0);
        ck_assert_int_eq(b.told, 1);
}
END_TEST

static void free_self(sh_waiter *w)
{
        free(w);
}

START_TEST(test_a_waiter_may_free_itself_when_told)
{
        sh_waiter *head = NULL;

        for (int i = 0; i < 3; i++) {
                sh_waiter *w = calloc(1, sizeof(*w));

                ck_assert_ptr_nonnull(w);
                w->done = free_self;
                sh_waiter_add(&head, w);
        }
        sh_waiters_wake(&head); /* ASan: nothing read after its free, nothing leaked */
        ck_assert_ptr_null(head);
}
END_TEST

START_TEST(test_moved_waiters_are_told_from_their_new_list_only)
{
        counted a = {.w.done = count}, b = {.w.done = count};
        sh_waiter *from = NULL, *to = NULL;

        sh_waiter_add(&from, &a.w);
        sh_waiter_add(&from, &b.w);
        sh_waiters_move(&from, &to);
        ck_assert_ptr_null(from);
        ck_assert_ptr_eq(a.w.head, &to);
        sh_waiters_wake(&from);
        ck_assert_int_eq(a.told + b.told, 0);
        sh_waiter_cancel(&b.w);
        sh_waiters_wake(&to);
        ck_assert_int_eq(a.told, 1);
        ck_assert_int_eq(b.told, 0);
}
END_TEST

static Suite *waiter_suite(void)
{
        Suite *s = suite_create("waiter");
        TCase *tc = tcase_create("waiter");

        tcase_add_test(tc, test_a_woken_waiter_is_told_once_and_left_on_no_list);
        tcase_add_test(tc, test_a_cancelled_waiter_is_never_told);
        tcase_add_test(tc, test_a_waiter_may_free_itself_when_told);
        tcase_add_test(tc, test_moved_waiters_are_told_from_their_new_list_only);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(waiter_suite());
}
