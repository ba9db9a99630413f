/* test_linesplit.c: a stream cut into lines as it comes (src/core/linesplit.c), as OpenSandbox's
 * execd splits a command's output: "\n", "\r" and "\r\n" end a line, across reads too; a line
 * longer than max is cut, never inside a UTF-8 character. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "sh/linesplit.h"
#include "unit.h"

#define MAX (64u * 1024) /* the /v1 surface's */

typedef struct got {
        char *v[64];
        size_t len[64];
        unsigned n;
} got;

static int collect(void *data, const char *line, size_t len)
{
        got *g = data;

        ck_assert_uint_lt(g->n, 64);
        g->v[g->n] = malloc(len + 1);
        memcpy(g->v[g->n], line, len);
        g->v[g->n][len] = '\0';
        g->len[g->n++] = len;
        return 0;
}

static void got_free(got *g)
{
        for (unsigned i = 0; i < g->n; i++)
                free(g->v[i]);
        g->n = 0;
}

static void feed_all(sh_linesplit *l, got *g, const char *s)
{
        ck_assert_int_eq(sh_linesplit_feed(l, s, strlen(s), collect, g), (ssize_t)strlen(s));
}

START_TEST(test_lines_end_at_lf_cr_and_crlf)
{
        sh_linesplit l = {.max = MAX};
        got g = {0};

        feed_all(&l, &g, "a\nb\rc\r\nd\n\ne");
        ck_assert_uint_eq(g.n, 5);
        ck_assert_str_eq(g.v[0], "a");
        ck_assert_str_eq(g.v[1], "b");
        ck_assert_str_eq(g.v[2], "c");
        ck_assert_str_eq(g.v[3], "d");
        ck_assert_uint_eq(g.len[4], 0); /* the empty line between the two "\n" */
        ck_assert_int_eq(sh_linesplit_flush(&l, collect, &g), 0);
        ck_assert_uint_eq(g.n, 6);
        ck_assert_str_eq(g.v[5], "e"); /* the last unterminated line, at the end */
        got_free(&g);
        sh_linesplit_done(&l);
}
END_TEST

START_TEST(test_crlf_split_between_two_reads_is_one_terminator)
{
        sh_linesplit l = {.max = MAX};
        got g = {0};

        feed_all(&l, &g, "x\r");
        feed_all(&l, &g, "\ny\n");
        ck_assert_uint_eq(g.n, 2);
        ck_assert_str_eq(g.v[0], "x");
        ck_assert_str_eq(g.v[1], "y");
        got_free(&g);
        /* but a lone "\r" then "\r" is an empty line, as is "\n" right after "\n" */
        feed_all(&l, &g, "\r\r\n\n");
        ck_assert_uint_eq(g.n, 3);
        ck_assert_uint_eq(g.len[0], 0);
        ck_assert_uint_eq(g.len[1], 0);
        ck_assert_uint_eq(g.len[2], 0);
        got_free(&g);
        sh_linesplit_done(&l);
}
END_TEST

START_TEST(test_a_line_of_exactly_max_bytes_is_one_and_longer_ones_are_cut)
{
        sh_linesplit l = {.max = MAX};
        got g = {0};
        size_t n = MAX;
        char *big = malloc(2 * n + 2);

        memset(big, 'a', 2 * n + 1);
        big[n] = '\n';
        ck_assert_int_eq(sh_linesplit_feed(&l, big, n + 1, collect, &g), (ssize_t)(n + 1));
        ck_assert_uint_eq(g.n, 1);
        ck_assert_uint_eq(g.len[0], n);
        got_free(&g);
        /* 2n + 1 bytes and no terminator: two full cuts once more comes, then the rest */
        memset(big, 'b', 2 * n + 1);
        ck_assert_int_eq(sh_linesplit_feed(&l, big, 2 * n + 1, collect, &g), (ssize_t)(2 * n + 1));
        ck_assert_uint_eq(g.n, 2);
        ck_assert_uint_eq(g.len[0], n);
        ck_assert_uint_eq(g.len[1], n);
        ck_assert_int_eq(sh_linesplit_flush(&l, collect, &g), 0);
        ck_assert_uint_eq(g.n, 3);
        ck_assert_uint_eq(g.len[2], 1);
        got_free(&g);
        free(big);
        sh_linesplit_done(&l);
}
END_TEST

START_TEST(test_a_cut_never_splits_a_utf8_character)
{
        sh_linesplit l = {.max = MAX};
        got g = {0};
        size_t n = MAX;
        char *big = malloc(n + 8);

        /* n - 1 ASCII bytes, then a 3-byte character across the boundary of max */
        memset(big, 'a', n - 1);
        memcpy(big + n - 1, "\xe2\x82\xac", 3); /* U+20AC */
        big[n + 2] = '\n';
        ck_assert_int_eq(sh_linesplit_feed(&l, big, n + 3, collect, &g), (ssize_t)(n + 3));
        ck_assert_uint_eq(g.n, 2);
        ck_assert_uint_eq(g.len[0], n - 1);
        ck_assert_uint_eq(g.len[1], 3);
        ck_assert_str_eq(g.v[1], "\xe2\x82\xac");
        got_free(&g);
        free(big);
        sh_linesplit_done(&l);
}
END_TEST

/* The line ends of s[0..n) as a byte-at-a-time splitter finds them (the rules above, no max):
 * the lengths of the lines, -1 after the last one. */
static void reference_lines(const char *s, size_t n, long *out, size_t cap)
{
        size_t k = 0, len = 0;
        bool cr = false;

        for (size_t i = 0; i < n; i++) {
                if (s[i] == '\n' || s[i] == '\r') {
                        if (!(s[i] == '\n' && cr && len == 0)) {
                                ck_assert_uint_lt(k, cap);
                                out[k++] = (long)len;
                        }
                        len = 0;
                        cr = s[i] == '\r';
                        continue;
                }
                cr = false;
                len++;
        }
        ck_assert_uint_lt(k, cap);
        out[k] = -1;
}

typedef struct counted {
        long *want;
        size_t n;
} counted;

static int count_line(void *data, const char *line, size_t len)
{
        counted *c = data;

        (void)line;
        ck_assert_int_eq(c->want[c->n], (long)len);
        c->n++;
        return 0;
}

/* The scan for the next terminator is vectorized (16 bytes at a time for either of the two):
 * the same lines as a byte-at-a-time splitter for any mix of them, in any chunks, and a
 * megabyte of '\r' without a '\n' is a megabyte of empty lines (a feed looks at a byte once:
 * a quadratic scan would not end within ctest's timeout). */
START_TEST(test_any_mix_of_terminators_in_any_chunks_splits_as_byte_by_byte)
{
        static const char alphabet[] = {'a', 'b', '\r', '\n'};
        size_t n = 1 << 20, cap = n + 2;
        char *s = malloc(n);
        long *want = malloc(cap * sizeof(long));
        unsigned seed = 27;

        for (int round = 0; round < 3; round++) {
                sh_linesplit l = {.max = MAX};
                counted c = {.want = want};
                size_t at = 0, lines = 0;

                /* a megabyte of '\r' first, then 128 KiB of each mix */
                n = round == 0 ? (size_t)1 << 20 : (size_t)128 << 10;
                for (size_t i = 0; i < n; i++)
                        s[i] = round == 0 ? '\r' : alphabet[rand_r(&seed) % (round == 1 ? 4 : 3)];
                reference_lines(s, n, want, cap);
                while (want[lines] >= 0)
                        lines++;
                while (at < n) {
                        size_t chunk = 1 + (size_t)rand_r(&seed) % 70000;

                        if (chunk > n - at)
                                chunk = n - at;
                        ck_assert_int_eq(sh_linesplit_feed(&l, s + at, chunk, count_line, &c),
                                         (ssize_t)chunk);
                        at += chunk;
                }
                ck_assert_uint_eq(c.n, lines);
                sh_linesplit_done(&l);
        }
        free(s);
        free(want);
}
END_TEST

static Suite *linesplit_suite(void)
{
        Suite *s = suite_create("linesplit");
        TCase *tc = tcase_create("lines");

        tcase_add_test(tc, test_lines_end_at_lf_cr_and_crlf);
        tcase_add_test(tc, test_crlf_split_between_two_reads_is_one_terminator);
        tcase_add_test(tc, test_a_line_of_exactly_max_bytes_is_one_and_longer_ones_are_cut);
        tcase_add_test(tc, test_a_cut_never_splits_a_utf8_character);
        tcase_add_test(tc, test_any_mix_of_terminators_in_any_chunks_splits_as_byte_by_byte);
        tcase_set_timeout(tc, 60); /* a million lines under the sanitizers' -O0 */
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(linesplit_suite());
}
