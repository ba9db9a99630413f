/* test_list.c: sh/list.h, the intrusive list every module uses. */
#include <check.h>
#include <stdlib.h>

#include "sh/list.h"
#include "unit.h"

typedef struct item item;
struct item {
        int v;
        SH_LIST_FIELDS(item, a);
        SH_LIST_FIELDS(item, b);
};

/* The values of the list in order, as a small number (digits), and the back links checked. */
static long values(item *head)
{
        long out = 0;
        item *i, *prev = NULL;

        SH_LIST_FOREACH(a, i, head) {
                ck_assert_ptr_eq(i->a_prev, prev);
                out = out * 10 + i->v;
                prev = i;
        }
        return out;
}

START_TEST(test_prepend_puts_items_first_in_reverse_order)
{
        item x[3] = {{.v = 1}, {.v = 2}, {.v = 3}};
        item *head = NULL;

        for (int k = 0; k < 3; k++)
                SH_LIST_PREPEND(a, head, &x[k]);
        ck_assert_int_eq(values(head), 321);
}
END_TEST

START_TEST(test_append_keeps_arrival_order)
{
        item x[3] = {{.v = 1}, {.v = 2}, {.v = 3}};
        item *head = NULL;

        for (int k = 0; k < 3; k++)
                SH_LIST_APPEND(a, head, &x[k]);
        ck_assert_int_eq(values(head), 123);
}
END_TEST

START_TEST(test_remove_first_middle_last_and_only)
{
        item x[4] = {{.v = 1}, {.v = 2}, {.v = 3}, {.v = 4}};
        item *head = NULL;

        for (int k = 0; k < 4; k++)
                SH_LIST_APPEND(a, head, &x[k]);
        SH_LIST_REMOVE(a, head, &x[1]);
        ck_assert_int_eq(values(head), 134);
        ck_assert_ptr_null(x[1].a_next);
        ck_assert_ptr_null(x[1].a_prev);
        SH_LIST_REMOVE(a, head, &x[0]);
        ck_assert_int_eq(values(head), 34);
        SH_LIST_REMOVE(a, head, &x[3]);
        ck_assert_int_eq(values(head), 3);
        ck_assert(SH_LIST_LINKED(a, head, &x[2]));
        SH_LIST_REMOVE(a, head, &x[2]);
        ck_assert_ptr_null(head);
        ck_assert(!SH_LIST_LINKED(a, head, &x[2]));
}
END_TEST

START_TEST(test_foreach_safe_allows_freeing_the_current_item)
{
        item *head = NULL, *i, *n;
        int seen = 0;

        for (int k = 0; k < 5; k++) {
                item *x = calloc(1, sizeof(*x));

                ck_assert_ptr_nonnull(x);
                x->v = k;
                SH_LIST_PREPEND(a, head, x);
        }
        SH_LIST_FOREACH_SAFE(a, i, n, head) {
                SH_LIST_REMOVE(a, head, i);
                free(i);
                seen++;
        }
        ck_assert_int_eq(seen, 5);
        ck_assert_ptr_null(head);
}
END_TEST

START_TEST(test_insert_after_puts_items_where_asked)
{
        item x[5] = {{.v = 1}, {.v = 2}, {.v = 3}, {.v = 4}, {.v = 5}};
        item *head = NULL;

        SH_LIST_INSERT_AFTER(a, head, NULL, &x[1]); /* into the empty list */
        ck_assert_int_eq(values(head), 2);
        SH_LIST_INSERT_AFTER(a, head, NULL, &x[0]); /* first */
        ck_assert_int_eq(values(head), 12);
        SH_LIST_INSERT_AFTER(a, head, &x[1], &x[3]); /* last */
        ck_assert_int_eq(values(head), 124);
        SH_LIST_INSERT_AFTER(a, head, &x[1], &x[2]); /* in the middle */
        ck_assert_int_eq(values(head), 1234);
        SH_LIST_INSERT_AFTER(a, head, &x[3], &x[4]);
        ck_assert_int_eq(values(head), 12345);
        ck_assert_ptr_null(x[4].a_next);
        SH_LIST_REMOVE(a, head, &x[2]);
        ck_assert_int_eq(values(head), 1245);
}
END_TEST

START_TEST(test_one_item_on_two_lists)
{
        item x[2] = {{.v = 1}, {.v = 2}};
        item *ha = NULL, *hb = NULL, *i;
        long b = 0;

        SH_LIST_APPEND(a, ha, &x[0]);
        SH_LIST_APPEND(a, ha, &x[1]);
        SH_LIST_PREPEND(b, hb, &x[0]);
        SH_LIST_PREPEND(b, hb, &x[1]);
        SH_LIST_REMOVE(a, ha, &x[0]);
        ck_assert_int_eq(values(ha), 2);
        SH_LIST_FOREACH(b, i, hb)
                b = b * 10 + i->v;
        ck_assert_int_eq(b, 21);
}
END_TEST

static Suite *list_suite(void)
{
        Suite *s = suite_create("list");
        TCase *tc = tcase_create("list");

        tcase_add_test(tc, test_prepend_puts_items_first_in_reverse_order);
        tcase_add_test(tc, test_append_keeps_arrival_order);
        tcase_add_test(tc, test_remove_first_middle_last_and_only);
        tcase_add_test(tc, test_foreach_safe_allows_freeing_the_current_item);
        tcase_add_test(tc, test_insert_after_puts_items_where_asked);
        tcase_add_test(tc, test_one_item_on_two_lists);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(list_suite());
}
