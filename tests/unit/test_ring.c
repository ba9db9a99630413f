/* test_ring.c: the bounded byte ring (src/core/ring.c): the last `cap` bytes kept, its buffer
 * grown only with what it holds; the tail of a text to show: within its budget, from a whole
 * line where it was cut (when one starts near), and whether anything older is missing. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "sh/ring.h"
#include "unit.h"

/* ---- the output ring --------------------------------------------------------------------- */

static char *ring_text(const sh_ring *g)
{
        char *s = calloc(1, g->len + 1);

        ck_assert_ptr_nonnull(s);
        sh_ring_copy(g, s);
        return s;
}

START_TEST(test_ring_keeps_the_last_cap_bytes)
{
        sh_ring g = {.cap = 8};
        char *s;

        sh_ring_append(&g, "abc", 3);
        s = ring_text(&g);
        ck_assert_str_eq(s, "abc");
        free(s);
        sh_ring_append(&g, "defghij", 7);
        s = ring_text(&g);
        ck_assert_str_eq(s, "cdefghij");
        free(s);
        sh_ring_append(&g, "0123456789", 10);
        s = ring_text(&g);
        ck_assert_str_eq(s, "23456789");
        free(s);
        ck_assert_uint_eq(g.total, 20);
        ck_assert_uint_eq(g.alloc, 8);
        sh_ring_done(&g);
}
END_TEST

START_TEST(test_ring_grows_only_with_what_it_holds)
{
        sh_ring g = {.cap = 1u << 20};
        char block[1000];
        unsigned i;

        memset(block, 'x', sizeof(block));
        sh_ring_append(&g, block, 10);
        ck_assert_uint_le(g.alloc, 4096);
        for (i = 0; i < 3000; i++)
                sh_ring_append(&g, block, sizeof(block));
        ck_assert_uint_eq(g.alloc, 1u << 20);
        ck_assert_uint_eq(g.len, 1u << 20);
        ck_assert_uint_eq(g.total, 3000 * 1000 + 10);
        sh_ring_done(&g);
}
END_TEST

/* ---- the tail of a text ------------------------------------------------------------------- */

/* The tail of s within budget, as a string (freed by the caller); *cut in and out. */
static char *tail(const char *s, size_t budget, bool *cut)
{
        size_t n = strlen(s);
        char *t = malloc(n + 1);

        ck_assert_ptr_nonnull(t);
        memcpy(t, s, n + 1);
        ck_assert_uint_eq(sh_text_tail(t, n, budget, cut), strlen(t));
        return t;
}

START_TEST(test_a_text_within_its_budget_is_whole)
{
        bool cut = false;
        char *t = tail("one\ntwo\n", 100, &cut);

        ck_assert_str_eq(t, "one\ntwo\n");
        ck_assert(!cut);
        free(t);
}
END_TEST

START_TEST(test_a_cut_text_starts_at_the_next_whole_line)
{
        bool cut = false;
        char *t = tail("first line\nsecond\nthird\n", 15, &cut);

        /* its last 15 bytes start inside "first line": from the next line on */
        ck_assert_str_eq(t, "second\nthird\n");
        ck_assert(cut);
        free(t);
}
END_TEST

START_TEST(test_a_text_cut_on_a_line_boundary_keeps_that_line)
{
        bool cut = false;
        char *t = tail("aaaa\nbbbb\n", 5, &cut);

        ck_assert_str_eq(t, "bbbb\n");
        ck_assert(cut);
        free(t);
}
END_TEST

START_TEST(test_older_bytes_gone_already_count_as_a_cut)
{
        bool cut = true; /* the ring dropped some: the first line kept is a piece */
        char *t = tail("iece\nwhole\n", 100, &cut);

        ck_assert_str_eq(t, "whole\n");
        ck_assert(cut);
        free(t);
}
END_TEST

START_TEST(test_a_far_or_last_line_start_is_not_looked_for)
{
        char big[2048];
        bool cut = false;
        char *t;

        /* no line starts within SH_TAIL_LINE_SKIP bytes: the tail is the budget's bytes */
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        big[1100] = '\n'; /* 553 bytes past where the budget cuts */
        t = tail(big, 1500, &cut);
        ck_assert_uint_eq(strlen(t), 1500);
        free(t);
        /* the only line start is the end: kept as it is */
        cut = false;
        t = tail("abcdef\n", 4, &cut);
        ck_assert_str_eq(t, "def\n");
        free(t);
}
END_TEST

START_TEST(test_a_rings_tail_says_what_it_dropped)
{
        sh_ring g = {.cap = 16};
        size_t len = 0;
        bool cut = false;
        char *t = NULL;

        ck_assert_int_eq(sh_ring_tail(&g, 100, &t, &len, &cut), 0);
        ck_assert_str_eq(t, "");
        ck_assert(!cut);
        free(t);
        sh_ring_append(&g, "line one\nline two\nend\n", 22);
        ck_assert_int_eq(sh_ring_tail(&g, 100, &t, &len, &cut), 0);
        /* it kept "ne\nline two\nend\n": older bytes are gone, "ne" is a piece */
        ck_assert_str_eq(t, "line two\nend\n");
        ck_assert_uint_eq(len, 13);
        ck_assert(cut);
        free(t);
        sh_ring_done(&g);
}
END_TEST

static Suite *ring_suite(void)
{
        Suite *s = suite_create("ring");
        TCase *tc = tcase_create("ring");

        tcase_add_test(tc, test_ring_keeps_the_last_cap_bytes);
        tcase_add_test(tc, test_ring_grows_only_with_what_it_holds);
        suite_add_tcase(s, tc);
        tc = tcase_create("tail");
        tcase_add_test(tc, test_a_text_within_its_budget_is_whole);
        tcase_add_test(tc, test_a_cut_text_starts_at_the_next_whole_line);
        tcase_add_test(tc, test_a_text_cut_on_a_line_boundary_keeps_that_line);
        tcase_add_test(tc, test_older_bytes_gone_already_count_as_a_cut);
        tcase_add_test(tc, test_a_far_or_last_line_start_is_not_looked_for);
        tcase_add_test(tc, test_a_rings_tail_says_what_it_dropped);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(ring_suite());
}
