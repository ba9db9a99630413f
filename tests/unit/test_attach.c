/* test_attach.c: sh/attach.h, the data other layers hang on an object under their own key. */
#include <check.h>
#include <stdlib.h>

#include "sh/attach.h"
#include "unit.h"

static const char key_a, key_b;

/* What each free saw, in order, as digits. */
static long freed;

static void free_int(void *p)
{
        freed = freed * 10 + *(int *)p;
}

START_TEST(test_each_key_finds_its_own_data)
{
        sh_attachments a = {0};
        int one = 1, two = 2;

        ck_assert_int_eq(sh_attach_set(&a, &key_a, &one, NULL), 0);
        ck_assert_int_eq(sh_attach_set(&a, &key_b, &two, NULL), 0);
        ck_assert_ptr_eq(sh_attach_get(&a, &key_a), &one);
        ck_assert_ptr_eq(sh_attach_get(&a, &key_b), &two);
        sh_attach_done(&a);
}
END_TEST

START_TEST(test_an_unknown_key_finds_nothing)
{
        sh_attachments a = {0};
        int one = 1;

        ck_assert_ptr_null(sh_attach_get(&a, &key_a));
        ck_assert_int_eq(sh_attach_set(&a, &key_a, &one, NULL), 0);
        ck_assert_ptr_null(sh_attach_get(&a, &key_b));
        ck_assert_ptr_null(sh_attach_take(&a, &key_b));
        sh_attach_done(&a);
}
END_TEST

START_TEST(test_setting_a_key_again_frees_what_it_held)
{
        sh_attachments a = {0};
        int one = 1, two = 2;

        freed = 0;
        ck_assert_int_eq(sh_attach_set(&a, &key_a, &one, free_int), 0);
        ck_assert_int_eq(sh_attach_set(&a, &key_a, &two, free_int), 0);
        ck_assert_int_eq(freed, 1);
        ck_assert_ptr_eq(sh_attach_get(&a, &key_a), &two);
        sh_attach_done(&a);
        ck_assert_int_eq(freed, 12);
}
END_TEST

START_TEST(test_take_detaches_without_freeing)
{
        sh_attachments a = {0};
        int one = 1;

        freed = 0;
        ck_assert_int_eq(sh_attach_set(&a, &key_a, &one, free_int), 0);
        ck_assert_ptr_eq(sh_attach_take(&a, &key_a), &one);
        ck_assert_ptr_null(sh_attach_get(&a, &key_a));
        sh_attach_done(&a);
        ck_assert_int_eq(freed, 0);
}
END_TEST

START_TEST(test_done_frees_everything_newest_first)
{
        sh_attachments a = {0};
        int one = 1, two = 2;

        freed = 0;
        ck_assert_int_eq(sh_attach_set(&a, &key_a, &one, free_int), 0);
        ck_assert_int_eq(sh_attach_set(&a, &key_b, &two, free_int), 0);
        sh_attach_done(&a);
        ck_assert_int_eq(freed, 21);
        ck_assert_ptr_null(a.head);
}
END_TEST

static Suite *attach_suite(void)
{
        Suite *s = suite_create("attach");
        TCase *tc = tcase_create("attach");

        tcase_add_test(tc, test_each_key_finds_its_own_data);
        tcase_add_test(tc, test_an_unknown_key_finds_nothing);
        tcase_add_test(tc, test_setting_a_key_again_frees_what_it_held);
        tcase_add_test(tc, test_take_detaches_without_freeing);
        tcase_add_test(tc, test_done_frees_everything_newest_first);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(attach_suite());
}
