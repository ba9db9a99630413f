/* test_util.c: util.h helpers: paths, URL and query decoding, numbers, Kubernetes quantities,
 * RFC 3339 times, ids, UTF-8 made text, JSON quoting, the intake of JSON text (no NUL in any string), the cleanup
 * of a cJSON variable. */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sh/buf.h"
#include "sh/random.h"
#include "sh/util.h"
#include "unit.h"

/* ---- helpers ---------------------------------------------------------------------------- */

/* Normalise a C string; returns the errno result, *out the new string (or NULL). */
static int norm(const char *in, char **out)
{
        *out = NULL;
        return sh_path_normalize(in, strlen(in), out);
}

static void assert_norm(const char *in, const char *want)
{
        char *out = NULL;
        int r = norm(in, &out);

        ck_assert_msg(r == 0, "normalize('%s') = %d, want 0", in, r);
        ck_assert_str_eq(out, want);
        free(out);
}

static void assert_norm_invalid(const char *in, size_t len)
{
        char *out = NULL;
        int r = sh_path_normalize(in, len, &out);

        ck_assert_msg(r == -EINVAL, "normalize(%zu bytes) = %d, want -EINVAL", len, r);
        ck_assert_ptr_null(out);
}

/* JSON-quote `n` bytes into a static buffer (NUL-terminated for comparison). */
static const char *quote(const char *s, size_t n)
{
        static char buf[1024];
        size_t w;

        ck_assert_uint_le(6 * n + 3, sizeof(buf));
        w = sh_json_quote_bytes(s, n, buf);
        ck_assert_uint_lt(w, sizeof(buf));
        buf[w] = '\0';
        return buf;
}

/* ---- sh_path_normalize ------------------------------------------------------------------ */

START_TEST(test_path_plain_relative_path_is_unchanged)
{
        assert_norm("a", "a");
        assert_norm("a/b/c", "a/b/c");
}
END_TEST

START_TEST(test_path_leading_slash_means_root)
{
        assert_norm("/a/b", "a/b");
        assert_norm("///a", "a");
}
END_TEST

START_TEST(test_path_double_slash_collapses)
{
        assert_norm("a//b", "a/b");
        assert_norm("a////b//c", "a/b/c");
}
END_TEST

START_TEST(test_path_dot_components_are_dropped)
{
        assert_norm("a/./b", "a/b");
        assert_norm("./a", "a");
        assert_norm("a/.", "a");
        assert_norm(".", "");
}
END_TEST

START_TEST(test_path_dotdot_pops_one_component)
{
        assert_norm("a/b/../c", "a/c");
        assert_norm("a/b/c/../../d", "a/d");
        assert_norm("a/..", "");
        assert_norm("ab/cd/..", "ab");
        assert_norm("a/../b/../c", "c");
}
END_TEST

START_TEST(test_path_dotdot_above_root_is_invalid)
{
        const char *bad[] = {"..", "/..", "../a", "a/../..", "a/b/../../../c", "./..", "a/../../a"};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_norm_invalid(bad[i], strlen(bad[i]));
}
END_TEST

START_TEST(test_path_dots_in_names_are_not_special)
{
        assert_norm("...", "...");
        assert_norm("a/..b/.c", "a/..b/.c");
        assert_norm("a../b", "a../b");
}
END_TEST

START_TEST(test_path_empty_is_invalid)
{
        assert_norm_invalid("", 0);
}
END_TEST

START_TEST(test_path_nul_byte_inside_is_invalid)
{
        assert_norm_invalid("a\0b", 3);
        assert_norm_invalid("\0", 1);
        assert_norm_invalid("abc\0", 4);
}
END_TEST

START_TEST(test_path_4096_bytes_ok_4097_invalid)
{
        char *buf = malloc(SH_PATH_MAX + 2);
        char *out = NULL;

        ck_assert_int_eq(SH_PATH_MAX, 4096);
        memset(buf, 'x', SH_PATH_MAX + 1);
        /* "x/x/x/..." keeps every component short */
        for (size_t i = 1; i < SH_PATH_MAX + 1; i += 2)
                buf[i] = '/';
        buf[SH_PATH_MAX - 1] = 'x'; /* no trailing slash at 4096 */
        ck_assert_int_eq(sh_path_normalize(buf, SH_PATH_MAX, &out), 0);
        ck_assert_uint_eq(strlen(out), SH_PATH_MAX);
        ck_assert_int_eq(memcmp(out, buf, SH_PATH_MAX), 0);
        free(out);
        out = NULL;
        assert_norm_invalid(buf, SH_PATH_MAX + 1);
        /* a 4097-byte path that would normalise to something short is still too long */
        memset(buf, '/', SH_PATH_MAX + 1);
        buf[SH_PATH_MAX] = 'a';
        assert_norm_invalid(buf, SH_PATH_MAX + 1);
        free(buf);
}
END_TEST

START_TEST(test_path_root_forms_normalise_to_empty)
{
        assert_norm("/", "");
        assert_norm("//", "");
        assert_norm("/./", "");
}
END_TEST

START_TEST(test_path_trailing_slash_is_dropped)
{
        assert_norm("a/b/", "a/b");
        assert_norm("a/", "a");
        assert_norm("/a/b//", "a/b");
}
END_TEST

START_TEST(test_path_non_utf8_bytes_pass_through)
{
        assert_norm("a/\xff\xfe/b", "a/\xff\xfe/b");
}
END_TEST

START_TEST(test_path_length_counts_not_strlen)
{
        char *out = NULL;

        /* Only the first 3 bytes are the path. */
        ck_assert_int_eq(sh_path_normalize("a/bXYZ", 3, &out), 0);
        ck_assert_str_eq(out, "a/b");
        free(out);
}
END_TEST

/* ---- sh_path_split ---------------------------------------------------------------------- */

START_TEST(test_split_top_level_has_empty_parent)
{
        char *parent = NULL;
        const char *base = NULL;
        const char *p = "file.txt";

        ck_assert_int_eq(sh_path_split(p, &parent, &base), 0);
        ck_assert_str_eq(parent, "");
        ck_assert_str_eq(base, "file.txt");
        ck_assert_ptr_eq(base, p);
        free(parent);
}
END_TEST

START_TEST(test_split_nested_path)
{
        char *parent = NULL;
        const char *base = NULL;
        const char *p = "a/b/c";

        ck_assert_int_eq(sh_path_split(p, &parent, &base), 0);
        ck_assert_str_eq(parent, "a/b");
        ck_assert_str_eq(base, "c");
        ck_assert_ptr_eq(base, p + 4);
        free(parent);
}
END_TEST

START_TEST(test_split_root_is_invalid)
{
        char *parent = NULL;
        const char *base = NULL;

        ck_assert_int_eq(sh_path_split("", &parent, &base), -EINVAL);
        ck_assert_ptr_null(parent);
}
END_TEST

/* ---- sh_url_decode ---------------------------------------------------------------------- */

static void assert_decode(const char *in, bool plus, const char *want, size_t want_len)
{
        char *out = NULL;
        size_t n = 12345;
        int r = sh_url_decode(in, strlen(in), plus, &out, &n);

        ck_assert_msg(r == 0, "decode('%s') = %d", in, r);
        ck_assert_uint_eq(n, want_len);
        ck_assert_mem_eq(out, want, want_len);
        ck_assert_int_eq(out[n], '\0');
        free(out);
}

static void assert_decode_invalid(const char *in)
{
        char *out = NULL;
        size_t n = 0;

        ck_assert_int_eq(sh_url_decode(in, strlen(in), true, &out, &n), -EINVAL);
        ck_assert_ptr_null(out);
        ck_assert_int_eq(sh_url_decode(in, strlen(in), false, &out, &n), -EINVAL);
        ck_assert_ptr_null(out);
}

START_TEST(test_decode_plain_text_unchanged)
{
        assert_decode("abc/def", false, "abc/def", 7);
        assert_decode("", false, "", 0);
}
END_TEST

START_TEST(test_decode_percent_escapes_either_case)
{
        assert_decode("a%20b", false, "a b", 3);
        assert_decode("%2f%2F", false, "//", 2);
        assert_decode("%e4%B8%AD", false, "\xe4\xb8\xad", 3);
        assert_decode("%41", false, "A", 1);
        assert_decode("x%41", false, "xA", 2);
}
END_TEST

START_TEST(test_decode_plus_is_space_only_in_form_mode)
{
        assert_decode("a+b", true, "a b", 3);
        assert_decode("a+b", false, "a+b", 3);
        assert_decode("%2B", true, "+", 1); /* an escaped plus stays a plus */
}
END_TEST

START_TEST(test_decode_invalid_escapes_rejected)
{
        assert_decode_invalid("%");
        assert_decode_invalid("%4");
        assert_decode_invalid("%zz");
        assert_decode_invalid("%%");
        assert_decode_invalid("%4g");
        assert_decode_invalid("%g4");
        assert_decode_invalid("abc%");
        assert_decode_invalid("abc%2");
        assert_decode_invalid("%%41");
}
END_TEST

START_TEST(test_decode_embedded_nul_keeps_length)
{
        assert_decode("a%00b", false, "a\0b", 3);
        assert_decode("%00", true, "\0", 1);
}
END_TEST

START_TEST(test_decode_respects_len_argument)
{
        char *out = NULL;
        size_t n = 0;

        /* "%4" cut from "%41" must be invalid, not read past len */
        ck_assert_int_eq(sh_url_decode("%41", 2, false, &out, &n), -EINVAL);
        ck_assert_int_eq(sh_url_decode("ab%41", 2, false, &out, &n), 0);
        ck_assert_uint_eq(n, 2);
        ck_assert_str_eq(out, "ab");
        free(out);
}
END_TEST

/* ---- sh_query_parse / sh_query_find ----------------------------------------------------- */

START_TEST(test_query_simple_pairs)
{
        sh_query q;
        const sh_query_param *p;

        ck_assert_int_eq(sh_query_parse("path=a/b&root=x", &q), 0);
        ck_assert_uint_eq(q.n, 2);
        p = sh_query_find(&q, "path");
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq(p->val_len, 3);
        ck_assert_str_eq(p->val, "a/b");
        p = sh_query_find(&q, "root");
        ck_assert_ptr_nonnull(p);
        ck_assert_str_eq(p->val, "x");
        ck_assert_ptr_null(sh_query_find(&q, "missing"));
        ck_assert_ptr_null(sh_query_find(&q, "pat"));
        sh_query_done(&q);
        ck_assert_uint_eq(q.n, 0);
}
END_TEST

START_TEST(test_query_null_and_empty_string_are_empty)
{
        sh_query q;

        ck_assert_int_eq(sh_query_parse(NULL, &q), 0);
        ck_assert_uint_eq(q.n, 0);
        ck_assert_ptr_null(sh_query_find(&q, "path"));
        sh_query_done(&q);
        ck_assert_int_eq(sh_query_parse("", &q), 0);
        ck_assert_uint_eq(q.n, 0);
        sh_query_done(&q);
}
END_TEST

START_TEST(test_query_repeated_key_first_wins)
{
        sh_query q;
        const sh_query_param *p;

        ck_assert_int_eq(sh_query_parse("path=first&path=second", &q), 0);
        p = sh_query_find(&q, "path");
        ck_assert_ptr_nonnull(p);
        ck_assert_str_eq(p->val, "first");
        sh_query_done(&q);
}
END_TEST

START_TEST(test_query_empty_fields_skipped)
{
        sh_query q;

        ck_assert_int_eq(sh_query_parse("&&a=1&&b=2&", &q), 0);
        ck_assert_uint_eq(q.n, 2);
        ck_assert_str_eq(sh_query_find(&q, "a")->val, "1");
        ck_assert_str_eq(sh_query_find(&q, "b")->val, "2");
        sh_query_done(&q);
}
END_TEST

START_TEST(test_query_key_without_equals_has_empty_value)
{
        sh_query q;
        const sh_query_param *p;

        ck_assert_int_eq(sh_query_parse("flag&path=", &q), 0);
        p = sh_query_find(&q, "flag");
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq(p->val_len, 0);
        ck_assert_str_eq(p->val, "");
        p = sh_query_find(&q, "path");
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq(p->val_len, 0);
        sh_query_done(&q);
}
END_TEST

START_TEST(test_query_values_form_decoded)
{
        sh_query q;
        const sh_query_param *p;

        ck_assert_int_eq(sh_query_parse("path=a+b%2Bc%00d&k%61y=v=w", &q), 0);
        p = sh_query_find(&q, "path");
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq(p->val_len, 7);
        ck_assert_mem_eq(p->val, "a b+c\0d", 7);
        /* keys are decoded too, and only the first '=' separates */
        p = sh_query_find(&q, "kay");
        ck_assert_ptr_nonnull(p);
        ck_assert_str_eq(p->val, "v=w");
        sh_query_done(&q);
}
END_TEST

START_TEST(test_query_next_gives_each_of_a_repeated_key_in_turn)
{
        sh_query q;
        size_t i = 0;

        ck_assert_int_eq(sh_query_parse("path=a&x=1&path=b&pathx=c&path=", &q), 0);
        ck_assert_str_eq(sh_query_next(&q, "path", &i)->val, "a");
        ck_assert_str_eq(sh_query_next(&q, "path", &i)->val, "b");
        ck_assert_uint_eq(sh_query_next(&q, "path", &i)->val_len, 0);
        ck_assert_ptr_null(sh_query_next(&q, "path", &i));
        ck_assert_ptr_null(sh_query_next(&q, "path", &i));
        sh_query_done(&q);
}
END_TEST

START_TEST(test_query_u64_tells_absent_from_a_number_and_refuses_other_text)
{
        sh_query q;
        uint64_t v = 7;

        ck_assert_int_eq(sh_query_parse("depth=12&limit=1x&big=18446744073709551616", &q), 0);
        ck_assert_int_eq(sh_query_u64(&q, "depth", &v), 1);
        ck_assert_uint_eq(v, 12);
        ck_assert_int_eq(sh_query_u64(&q, "offset", &v), 0);
        ck_assert_uint_eq(v, 0);
        ck_assert_int_eq(sh_query_u64(&q, "limit", &v), -EINVAL);
        ck_assert_int_eq(sh_query_u64(&q, "big", &v), -ERANGE);
        sh_query_done(&q);
}
END_TEST

START_TEST(test_query_invalid_escape_anywhere_rejected)
{
        const char *bad[] = {"path=%zz", "a=1&b=%4", "%zz=1", "a=1&%=2", "a=1&path=ok&x=%", "a=%%"};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                sh_query q = {(sh_query_param *)1, 99};

                ck_assert_msg(sh_query_parse(bad[i], &q) == -EINVAL, "'%s' accepted", bad[i]);
                ck_assert_uint_eq(q.n, 0);
                ck_assert_ptr_null(q.v);
        }
}
END_TEST

/* ---- sh_parse_u64 ----------------------------------------------------------------------- */

START_TEST(test_u64_valid_numbers)
{
        uint64_t v = 1;

        ck_assert_int_eq(sh_parse_u64("0", &v), 0);
        ck_assert_uint_eq(v, 0);
        ck_assert_int_eq(sh_parse_u64("12345", &v), 0);
        ck_assert_uint_eq(v, 12345);
        ck_assert_int_eq(sh_parse_u64("18446744073709551615", &v), 0);
        ck_assert_uint_eq(v, UINT64_MAX);
}
END_TEST

START_TEST(test_u64_overflow_is_erange)
{
        uint64_t v = 7;

        ck_assert_int_eq(sh_parse_u64("18446744073709551616", &v), -ERANGE);
        ck_assert_int_eq(sh_parse_u64("99999999999999999999999", &v), -ERANGE);
        ck_assert_uint_eq(v, 7);
}
END_TEST

START_TEST(test_u64_garbage_is_einval)
{
        const char *bad[] = {"", "-1", "+1", " 1", "1 ", "1a", "0x10", "1.0"};
        uint64_t v = 7;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(sh_parse_u64(bad[i], &v) == -EINVAL, "'%s' accepted", bad[i]);
        ck_assert_int_eq(sh_parse_u64(NULL, &v), -EINVAL);
        ck_assert_uint_eq(v, 7);
}
END_TEST

/* ---- sh_parse_size ---------------------------------------------------------------------- */

static uint64_t size_ok(const char *s)
{
        uint64_t v = 0;
        int r = sh_parse_size(s, &v);

        ck_assert_msg(r == 0, "parse_size('%s') = %d", s, r);
        return v;
}

START_TEST(test_size_plain_bytes)
{
        ck_assert_uint_eq(size_ok("0"), 0);
        ck_assert_uint_eq(size_ok("1"), 1);
        ck_assert_uint_eq(size_ok("1000"), 1000);
}
END_TEST

START_TEST(test_size_binary_suffixes_either_case)
{
        ck_assert_uint_eq(size_ok("1K"), 1024ULL);
        ck_assert_uint_eq(size_ok("1k"), 1024ULL);
        ck_assert_uint_eq(size_ok("3M"), 3ULL << 20);
        ck_assert_uint_eq(size_ok("3m"), 3ULL << 20);
        ck_assert_uint_eq(size_ok("1G"), 1ULL << 30);
        ck_assert_uint_eq(size_ok("1g"), 1ULL << 30);
        ck_assert_uint_eq(size_ok("2T"), 2ULL << 40);
        ck_assert_uint_eq(size_ok("2t"), 2ULL << 40);
        ck_assert_uint_eq(size_ok("16M"), 16ULL << 20);
}
END_TEST

START_TEST(test_size_i_and_b_forms)
{
        ck_assert_uint_eq(size_ok("1Ki"), 1024ULL);
        ck_assert_uint_eq(size_ok("1KiB"), 1024ULL);
        ck_assert_uint_eq(size_ok("1KB"), 1024ULL);
        ck_assert_uint_eq(size_ok("4MiB"), 4ULL << 20);
        ck_assert_uint_eq(size_ok("1gb"), 1ULL << 30);
}
END_TEST

START_TEST(test_size_overflow_rejected)
{
        uint64_t v = 7;

        ck_assert_uint_eq(size_ok("16777215T"), 16777215ULL << 40);
        ck_assert_int_eq(sh_parse_size("16777216T", &v), -ERANGE);
        ck_assert_int_eq(sh_parse_size("17179869184G", &v), -ERANGE);
        ck_assert_int_eq(sh_parse_size("18446744073709551616", &v), -ERANGE);
        ck_assert_int_lt(sh_parse_size("99999999999999999999999999999999999K", &v), 0);
        ck_assert_uint_eq(v, 7);
}
END_TEST

START_TEST(test_size_garbage_rejected)
{
        const char *bad[] = {"",    "K",   "-1",   "1X",  "1KK",  "1KBB", "1 K",
                             " 1K", "1K ", "1.5G", "1iB", "1Kb2", "0x10", "1Bi"};
        uint64_t v = 7;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(sh_parse_size(bad[i], &v) == -EINVAL, "'%s' accepted", bad[i]);
        ck_assert_int_eq(sh_parse_size(NULL, &v), -EINVAL);
        ck_assert_uint_eq(v, 7);
}
END_TEST

/* ---- sh_parse_millicores ---------------------------------------------------------------- */

static uint64_t milli_ok(const char *s)
{
        uint64_t v = 0;
        int r = sh_parse_millicores(s, &v);

        ck_assert_msg(r == 0, "parse_millicores('%s') = %d", s, r);
        return v;
}

START_TEST(test_millicores_valid)
{
        ck_assert_uint_eq(milli_ok("0.5"), 500);
        ck_assert_uint_eq(milli_ok("2"), 2000);
        ck_assert_uint_eq(milli_ok("1"), 1000);
        ck_assert_uint_eq(milli_ok("0.001"), 1);
        ck_assert_uint_eq(milli_ok("1.25"), 1250);
        ck_assert_uint_eq(milli_ok("1.234"), 1234);
        ck_assert_uint_eq(milli_ok("16.0"), 16000);
}
END_TEST

START_TEST(test_millicores_invalid)
{
        const char *bad[] = {"0",  "0.0", "0.000", "1.2345", ".5", "1.",    "",
                             "-1", "1,5", "1.5x",  "abc",    " 1", "0.0001"};
        uint64_t v = 7;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(sh_parse_millicores(bad[i], &v) < 0, "'%s' accepted", bad[i]);
        ck_assert_int_lt(sh_parse_millicores(NULL, &v), 0);
        ck_assert_int_lt(sh_parse_millicores("99999999999999999999999", &v), 0);
        ck_assert_uint_eq(v, 7);
}
END_TEST

/* ---- ids -------------------------------------------------------------------------------- */

START_TEST(test_item_id_lengths)
{
        char id[200];

        memset(id, 'a', sizeof(id));
        id[128] = '\0';
        ck_assert(sh_item_id_valid(id));
        id[128] = 'a';
        id[129] = '\0';
        ck_assert(!sh_item_id_valid(id));
        ck_assert(sh_item_id_valid("a"));
        ck_assert(!sh_item_id_valid(""));
        ck_assert(!sh_item_id_valid(NULL));
}
END_TEST

START_TEST(test_item_id_first_char_rules)
{
        ck_assert(sh_item_id_valid("A"));
        ck_assert(sh_item_id_valid("Z9"));
        ck_assert(sh_item_id_valid("0abc"));
        ck_assert(!sh_item_id_valid(".a"));
        ck_assert(!sh_item_id_valid("_a"));
        ck_assert(!sh_item_id_valid("-a"));
        ck_assert(!sh_item_id_valid(".."));
        ck_assert(!sh_item_id_valid("/a"));
}
END_TEST

START_TEST(test_item_id_later_chars)
{
        ck_assert(sh_item_id_valid("a.b_c-d"));
        ck_assert(sh_item_id_valid("a.."));
        ck_assert(!sh_item_id_valid("a/b"));
        ck_assert(!sh_item_id_valid("a b"));
        ck_assert(!sh_item_id_valid("a\xc3\xa9"));
        ck_assert(!sh_item_id_valid("a~"));
        ck_assert(!sh_item_id_valid("a\n"));
}
END_TEST

START_TEST(test_remote_id_exactly_40_lower_hex)
{
        const char *good = "0123abcd0123456789abcdef0123456789abcdef";

        ck_assert_int_eq(SH_ID_LEN, 40);
        ck_assert(sh_remote_id_valid(good, 40));
        ck_assert(!sh_remote_id_valid(good, 39));
        ck_assert(!sh_remote_id_valid("0123abcd0123456789abcdef0123456789abcdef0", 41));
        ck_assert(!sh_remote_id_valid("0123456789abcdef0123456789abcdef", 32));
        ck_assert(!sh_remote_id_valid("0123abcd0123456789ABCDEF0123456789abcdef", 40));
        ck_assert(!sh_remote_id_valid("0123abcd0123456789abcdeg0123456789abcdef", 40));
        ck_assert(!sh_remote_id_valid("0123abcd0123456789abcdef\0"
                                      "123456789abcdef",
                                      40));
        ck_assert(!sh_remote_id_valid("", 0));
}
END_TEST

START_TEST(test_id_token_is_the_first_8_hex_of_a_valid_id)
{
        char tok[SH_POD_TOKEN_LEN + 1];

        ck_assert_int_eq(sh_id_token("0123abcd0123456789abcdef0123456789abcdef", 40, tok), 0);
        ck_assert_str_eq(tok, "0123abcd");
}
END_TEST

START_TEST(test_id_token_of_an_invalid_id_is_einval)
{
        char tok[SH_POD_TOKEN_LEN + 1];

        ck_assert_int_eq(sh_id_token("0123abcd", 8, tok), -EINVAL);
        ck_assert_int_eq(sh_id_token("0123ABCD0123456789abcdef0123456789abcdef", 40, tok), -EINVAL);
}
END_TEST

START_TEST(test_pod_token_exactly_8_lower_hex)
{
        ck_assert(sh_pod_token_valid("0123abcd", 8));
        ck_assert(!sh_pod_token_valid("0123abc", 7));
        ck_assert(!sh_pod_token_valid("0123abcde", 9));
        ck_assert(!sh_pod_token_valid("0123ABCD", 8));
        ck_assert(!sh_pod_token_valid("0123abcg", 8));
}
END_TEST

START_TEST(test_remote_id_hash_skips_the_pod_token)
{
        /* two ids of one pod differ only after the token: so must their hashes */
        ck_assert_uint_ne(sh_remote_id_hash("0123abcd0000000089abcdef0123456789abcdef"),
                          sh_remote_id_hash("0123abcd1111111189abcdef0123456789abcdef"));
}
END_TEST

/* The registry's hash of an id is the 8 hex digits after its token, whatever the rest. */
START_TEST(test_remote_id_hash_is_the_32_bits_after_the_token)
{
        ck_assert_uint_eq(sh_remote_id_hash("000000000123abcd89abcdef0123456789abcdef"),
                          0x0123abcdu);
        ck_assert_uint_eq(sh_remote_id_hash("00000000ffffffff00000000000000000000000f"),
                          0xffffffffu);
        ck_assert_uint_eq(sh_remote_id_hash("ffffffff00000000ffffffffffffffffffffffff"), 0);
}
END_TEST

/* ---- hex, UUIDs ------------------------------------------------------------------------ */

START_TEST(test_hex_is_two_lowercase_digits_a_byte)
{
        char out[16];

        sh_hex_encode("\x00\x0f\xa5\xff", 4, out);
        ck_assert_str_eq(out, "000fa5ff");
        sh_hex_encode("", 0, out);
        ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_a_uuid_is_its_bytes_with_version_4_and_variant_10)
{
        unsigned char b[16];
        char out[SH_UUID_LEN + 1];

        memset(b, 0xff, sizeof(b));
        sh_uuid_format(b, out);
        ck_assert_str_eq(out, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        memset(b, 0, sizeof(b));
        sh_uuid_format(b, out);
        ck_assert_str_eq(out, "00000000-0000-4000-8000-000000000000");
}
END_TEST

/* ---- sh_json_quote_bytes ---------------------------------------------------------------- */

START_TEST(test_quote_ascii)
{
        ck_assert_str_eq(quote("hello world", 11), "\"hello world\"");
        ck_assert_str_eq(quote("", 0), "\"\"");
        ck_assert_uint_eq(sh_json_quote_bytes("ab", 2, (char[16]){0}), 4);
}
END_TEST

START_TEST(test_quote_quotes_and_backslash)
{
        ck_assert_str_eq(quote("a\"b\\c", 5), "\"a\\\"b\\\\c\"");
        ck_assert_str_eq(quote("/", 1), "\"/\"");
}
END_TEST

START_TEST(test_quote_control_chars_escaped)
{
        ck_assert_str_eq(quote("\n", 1), "\"\\u000a\"");
        ck_assert_str_eq(quote("\t\x01\x1f", 3), "\"\\u0009\\u0001\\u001f\"");
        ck_assert_str_eq(quote("\0", 1), "\"\\u0000\"");
        ck_assert_str_eq(quote("\x7f", 1), "\"\\u007f\"");
}
END_TEST

START_TEST(test_quote_valid_utf8_passes_through)
{
        const char *s2 = "\xc3\xa9";           /* é */
        const char *s3 = "\xe4\xb8\xad";       /* 中 */
        const char *s4 = "\xf0\x9f\x98\x80";   /* 😀 */
        const char *smax = "\xf4\x8f\xbf\xbf"; /* U+10FFFF */

        ck_assert_str_eq(quote(s2, 2), "\"\xc3\xa9\"");
        ck_assert_str_eq(quote(s3, 3), "\"\xe4\xb8\xad\"");
        ck_assert_str_eq(quote(s4, 4), "\"\xf0\x9f\x98\x80\"");
        ck_assert_str_eq(quote(smax, 4), "\"\xf4\x8f\xbf\xbf\"");
        ck_assert_str_eq(quote("a\xc3\xa9z", 4), "\"a\xc3\xa9z\"");
}
END_TEST

/* Every byte value at every place of a run of plain text: escaped or kept exactly as one byte
 * alone is. The runs are scanned 16 bytes at a time (SSE2), then 8, then one: 28 bytes, the
 * first byte taken on its own, are 16 + 8 + 3, each way. */
#define RUN 28
START_TEST(test_quote_any_byte_at_any_offset_of_a_plain_run)
{
        char s[RUN], want[2 * RUN + 32], head[RUN], tail[RUN];

        for (int c = 0; c < 256; c++) {
                char alone[2] = {(char)c, 0};
                char one[16];

                snprintf(one, sizeof(one), "%s", quote(alone, 1));
                one[strlen(one) - 1] = '\0'; /* without its quotes */
                for (size_t at = 0; at < RUN; at++) {
                        memset(s, 'x', sizeof(s));
                        s[at] = (char)c;
                        memset(head, 'x', at);
                        head[at] = '\0';
                        memset(tail, 'x', RUN - at - 1);
                        tail[RUN - at - 1] = '\0';
                        snprintf(want, sizeof(want), "\"%s%s%s\"", head, one + 1, tail);
                        ck_assert_msg(strcmp(quote(s, RUN), want) == 0, "byte 0x%02x at %zu: %s", c,
                                      at, quote(s, RUN));
                }
        }
}
END_TEST
#undef RUN

START_TEST(test_quote_invalid_bytes_become_surrogate_escapes)
{
        ck_assert_str_eq(quote("\xff", 1), "\"\\udcff\"");
        ck_assert_str_eq(quote("a\x80z", 3), "\"a\\udc80z\"");
        /* a lead byte without its continuation: each byte on its own */
        ck_assert_str_eq(quote("\xe4\xb8", 2), "\"\\udce4\\udcb8\"");
        ck_assert_str_eq(quote("\xc3(", 2), "\"\\udcc3(\"");
        ck_assert_str_eq(quote("\xf5\x80\x80\x80", 4), "\"\\udcf5\\udc80\\udc80\\udc80\"");
}
END_TEST

START_TEST(test_quote_overlong_forms_are_invalid)
{
        /* "/" as 2, 3 and 4 bytes */
        ck_assert_str_eq(quote("\xc0\xaf", 2), "\"\\udcc0\\udcaf\"");
        ck_assert_str_eq(quote("\xc1\xbf", 2), "\"\\udcc1\\udcbf\"");
        ck_assert_str_eq(quote("\xe0\x80\xaf", 3), "\"\\udce0\\udc80\\udcaf\"");
        ck_assert_str_eq(quote("\xf0\x80\x80\xaf", 4), "\"\\udcf0\\udc80\\udc80\\udcaf\"");
        /* the smallest valid 3-byte form is fine */
        ck_assert_str_eq(quote("\xe0\xa0\x80", 3), "\"\xe0\xa0\x80\"");
}
END_TEST

START_TEST(test_quote_surrogate_encodings_are_invalid)
{
        ck_assert_str_eq(quote("\xed\xa0\x80", 3), "\"\\udced\\udca0\\udc80\"");
        ck_assert_str_eq(quote("\xed\xbf\xbf", 3), "\"\\udced\\udcbf\\udcbf\"");
        /* just below the surrogates is valid */
        ck_assert_str_eq(quote("\xed\x9f\xbf", 3), "\"\xed\x9f\xbf\"");
        /* beyond U+10FFFF */
        ck_assert_str_eq(quote("\xf4\x90\x80\x80", 4), "\"\\udcf4\\udc90\\udc80\\udc80\"");
}
END_TEST

START_TEST(test_quote_worst_case_fits_bound)
{
        char in[64], out[6 * 64 + 3];

        memset(in, '\xff', sizeof(in));
        ck_assert_uint_eq(sh_json_quote_bytes(in, sizeof(in), out), 6 * sizeof(in) + 2);
}
END_TEST

START_TEST(test_memdup0_copies_exactly_n_bytes_and_terminates)
{
        char *src = malloc(5), *d; /* no NUL in it: ASan sees any read past its 5 bytes */

        ck_assert_ptr_nonnull(src);
        memcpy(src, "ab\0cd", 5);
        d = sh_memdup0(src, 5);
        ck_assert_ptr_nonnull(d);
        ck_assert_mem_eq(d, "ab\0cd", 6);
        free(d);
        d = sh_memdup0(NULL, 0);
        ck_assert_ptr_nonnull(d);
        ck_assert_str_eq(d, "");
        free(d);
        free(src);
}
END_TEST

/* ---- JSON text intake (sh_json_parse_text) ---------------------------------------------- */

/* Parse a copy of the n bytes at text (the intake rewrites in place) with flags; the cJSON or
 * NULL, and a reason exactly when NULL. *ret_len: the text's length after the intake. */
static cJSON *intake_n(const char *text, size_t n, unsigned flags, size_t *ret_len)
{
        char *copy = malloc(n + 1);
        const char *why = "unset";
        cJSON *j;

        ck_assert_ptr_nonnull(copy);
        memcpy(copy, text, n);
        copy[n] = '\0';
        j = sh_json_parse_text(copy, &n, flags, &why);
        ck_assert_msg(j ? why == NULL : why && *why, "'%s': reason %s", text, why);
        free(copy);
        if (ret_len)
                *ret_len = n;
        return j;
}

static cJSON *intake(const char *text, unsigned flags)
{
        return intake_n(text, strlen(text), flags, NULL);
}

static void refused(const char *text)
{
        ck_assert_msg(!intake(text, 0), "'%s' accepted", text);
        ck_assert_msg(!intake(text, SH_JSON_SURROGATE_BYTES), "'%s' accepted (bytes)", text);
}

START_TEST(test_json_a_nul_escape_in_any_string_is_refused)
{
        refused("{\"/tmp/a\\u0000b\": {\"mode\": 600}}");        /* a key */
        refused("{\"k\": \"a\\u0000\"}");                        /* a value */
        refused("{\"a\": {\"b\": [1, {\"c\": \"x\\u0000\"}]}}"); /* deep */
        refused("[\"ok\", \"x\\u0000y\"]");                      /* a list item */
        refused("\"\\u0000\"");                                  /* a lone string */
        refused("{\"a\": \"\\\\\", \"b\": \"\\u0000\"}");        /* after an escaped \ */
        refused("{\"a\": \"\\\"\", \"b\": \"\\u0000\"}");        /* after an escaped " */
}
END_TEST

START_TEST(test_json_a_literal_backslash_u0000_is_no_nul)
{
        cJSON *j = intake("{\"k\": \"a\\\\u0000b\"}", 0);

        ck_assert_ptr_nonnull(j);
        ck_assert_str_eq(cJSON_GetObjectItem(j, "k")->valuestring, "a\\u0000b");
        cJSON_Delete(j);
        /* other escapes, \u0001 included, are cJSON's as ever */
        j = intake("{\"k\": \"\\u0001\\u00e9\\n\"}", 0);
        ck_assert_ptr_nonnull(j);
        ck_assert_str_eq(cJSON_GetObjectItem(j, "k")->valuestring, "\x01\xc3\xa9\n");
        cJSON_Delete(j);
}
END_TEST

START_TEST(test_json_raw_controls_nul_bytes_and_bad_utf8_are_refused)
{
        refused("{\"k\": \"a\x01\"}");
        refused("{\"k\x1f\": 1}");
        refused("{\"k\": \"\xff\"}");
        refused("{\"k\": \"\xc0\xaf\"}"); /* overlong */
        ck_assert_ptr_null(intake_n("{\"k\": \"a\0b\"}", 12, 0, NULL));
        ck_assert_ptr_null(intake_n("{} \0", 4, 0, NULL));
}
END_TEST

START_TEST(test_json_one_value_and_only_whitespace_after_it)
{
        cJSON *j = intake(" {\"a\": 1} \r\n\t", 0);

        ck_assert_ptr_nonnull(j);
        cJSON_Delete(j);
        refused("{\"a\": 1} x");
        refused("{\"a\": 1}{}");
        refused("{\"a\": ");
        refused("");
}
END_TEST

START_TEST(test_json_surrogate_bytes_only_when_asked)
{
        size_t n = 0;
        cJSON *j = intake_n("{\"p\": \"a\\udcffb\"}", 17, SH_JSON_SURROGATE_BYTES, &n);

        ck_assert_ptr_nonnull(j);
        ck_assert_str_eq(cJSON_GetObjectItem(j, "p")->valuestring, "a\xff"
                                                                   "b");
        ck_assert_uint_eq(n, 12); /* the escape became one byte, in place */
        cJSON_Delete(j);
        /* without the flag it is a lone surrogate: not JSON to cJSON */
        ck_assert_ptr_null(intake("{\"p\": \"a\\udcffb\"}", 0));
        /* the flag never lets a NUL through: \udc00 is no byte escape, \u0000 none at all */
        ck_assert_ptr_null(intake("{\"p\": \"\\udc00\"}", SH_JSON_SURROGATE_BYTES));
}
END_TEST

/* ---- _cleanup_cjson_ -------------------------------------------------------------------- */

static unsigned json_live; /* cJSON allocations not freed yet */

static void *counting_malloc(size_t n)
{
        void *p = malloc(n);

        if (p)
                json_live++;
        return p;
}

static void counting_free(void *p)
{
        if (p)
                json_live--;
        free(p);
}

static cJSON *made_in_a_scope(bool hand_out)
{
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();

        ck_assert_ptr_nonnull(cJSON_AddStringToObject(o, "k", "v"));
        ck_assert_uint_gt(json_live, 0);
        return hand_out ? TAKE_PTR(o) : NULL;
}

START_TEST(test_json_cleanup_deletes_at_scope_end_unless_handed_out)
{
        cJSON_Hooks hooks = {.malloc_fn = counting_malloc, .free_fn = counting_free};
        cJSON *kept;

        cJSON_InitHooks(&hooks);
        json_live = 0;
        ck_assert_ptr_null(made_in_a_scope(false));
        ck_assert_uint_eq(json_live, 0);
        kept = made_in_a_scope(true);
        ck_assert_ptr_nonnull(kept);
        ck_assert_str_eq(cJSON_GetObjectItem(kept, "k")->valuestring, "v");
        ck_assert_uint_gt(json_live, 0);
        cJSON_Delete(kept);
        ck_assert_uint_eq(json_live, 0);
        cJSON_InitHooks(NULL);
}
END_TEST

/* ---- Kubernetes quantities -------------------------------------------------------------- */

static uint64_t q(const char *s, uint64_t scale)
{
        uint64_t v = 0;
        int r = sh_quantity_parse(s, scale, &v);

        ck_assert_msg(r == 0, "quantity '%s' refused (%d)", s, r);
        return v;
}

START_TEST(test_cpu_quantities_in_millicores)
{
        ck_assert_uint_eq(q("500m", 1000), 500);
        ck_assert_uint_eq(q("1", 1000), 1000);
        ck_assert_uint_eq(q("1.5", 1000), 1500);
        ck_assert_uint_eq(q("0.75", 1000), 750);
        ck_assert_uint_eq(q("250m", 1000), 250);
        ck_assert_uint_eq(q("0.0001", 1000), 1); /* rounded up, never to 0 */
        ck_assert_uint_eq(q("0", 1000), 0);
}
END_TEST

START_TEST(test_memory_quantities_binary_and_decimal)
{
        ck_assert_uint_eq(q("512Mi", 1), 512ULL << 20);
        ck_assert_uint_eq(q("2Gi", 1), 2ULL << 30);
        ck_assert_uint_eq(q("1.5Gi", 1), 1536ULL << 20);
        ck_assert_uint_eq(q("262144Ki", 1), 256ULL << 20);
        ck_assert_uint_eq(q("314572800", 1), 300ULL << 20);
        ck_assert_uint_eq(q("1G", 1), 1000000000ULL);
        ck_assert_uint_eq(q("300M", 1), 300000000ULL);
        ck_assert_uint_eq(q("1k", 1), 1000);
        ck_assert_uint_eq(q("1E", 1), 1000000000000000000ULL);
        ck_assert_uint_eq(q("2e3", 1), 2000);
        ck_assert_uint_eq(q("+5", 1), 5);
}
END_TEST

START_TEST(test_huge_quantities_saturate)
{
        ck_assert_uint_eq(q("100Ei", 1), UINT64_MAX);
        ck_assert_uint_eq(q("99999999999999999999", 1000), UINT64_MAX);
}
END_TEST

START_TEST(test_unparsable_quantities_are_refused)
{
        static const char *const bad[] = {
                "",    "lots",   "1.5.5",  "1,5", "12Qi", "Gi",
                "abc", "1..5Gi", "512 Mi", "-1",  "m",    ".",
                "1e",  "1Mib",   "0x10",   " 1",  "1 ",   "1234567890123456789012345678901"};
        uint64_t v;
        size_t i;

        for (i = 0; i < ARRAY_SIZE(bad); i++)
                ck_assert_msg(sh_quantity_parse(bad[i], 1, &v) == -EINVAL, "'%s' accepted", bad[i]);
}
END_TEST

/* ---- RFC 3339 --------------------------------------------------------------------------- */

START_TEST(test_time_round_trip)
{
        char t[32];
        uint64_t ms;

        sh_rfc3339_format(1767323045678ULL, t);
        ck_assert_str_eq(t, "2026-01-02T03:04:05.678Z");
        ck_assert_int_eq(sh_rfc3339_parse(t, &ms), 0);
        ck_assert_uint_eq(ms, 1767323045678ULL);
        ck_assert_int_eq(sh_rfc3339_parse("2026-01-02T05:04:05+02:00", &ms), 0);
        ck_assert_uint_eq(ms, 1767323045000ULL);
        ck_assert_int_eq(sh_rfc3339_parse("2026-01-02t03:04:05.123456789z", &ms), 0);
        ck_assert_uint_eq(ms, 1767323045123ULL);
        ck_assert_int_eq(sh_rfc3339_parse("2024-02-29T00:00:00Z", &ms), 0);
}
END_TEST

START_TEST(test_a_file_time_is_cut_to_the_millisecond_and_never_before_1970)
{
        char t[32];

        sh_rfc3339_format_ts(1767323045, 678999999, t);
        ck_assert_str_eq(t, "2026-01-02T03:04:05.678Z");
        sh_rfc3339_format_ts(-5, 500000000, t);
        ck_assert_str_eq(t, "1970-01-01T00:00:00.000Z");
}
END_TEST

START_TEST(test_time_refuses_what_is_not_rfc_3339)
{
        static const char *const bad[] = {"tomorrow",
                                          "2026-01-02 03:04:05Z",
                                          "2026-01-02T03:04:05",
                                          "1700000000",
                                          "",
                                          "2026-13-02T03:04:05Z",
                                          "2025-02-29T00:00:00Z",
                                          "2026-01-02T03:04:05.Z",
                                          "2026-01-02T03:04:05+0200",
                                          "2026-01-02T03:04:05Zx"};
        uint64_t ms;
        size_t i;

        for (i = 0; i < ARRAY_SIZE(bad); i++)
                ck_assert_msg(sh_rfc3339_parse(bad[i], &ms) == -EINVAL, "'%s' accepted", bad[i]);
}
END_TEST

/* ---- UTF-8 made text ---------------------------------------------------------------------- */

START_TEST(test_scrub_makes_invalid_bytes_and_nul_a_question_mark_one_for_one)
{
        char s[] = "ok \xc3\xa9 \xff\xfe\x00tab\there\n";
        size_t n = sizeof(s) - 1;

        sh_utf8_scrub(s, n);
        ck_assert_int_eq(memcmp(s, "ok \xc3\xa9 ???tab\there\n", n), 0);
}
END_TEST

START_TEST(test_sanitize_also_makes_controls_a_question_mark)
{
        char s[] = "a\tb\nc\x7f\xc3\xa9\xc3";

        sh_utf8_sanitize(s);
        ck_assert_str_eq(s, "a?b?c?\xc3\xa9?");
}
END_TEST

START_TEST(test_append_json_adds_one_quoted_string_after_what_is_there)
{
        sh_buf b = {0};

        ck_assert_int_eq(sh_buf_append_str(&b, "x="), 0);
        ck_assert_int_eq(sh_buf_append_json(&b, "a\"\n\xff", 4), 0);
        ck_assert_int_eq(sh_buf_append_json(&b, "", 0), 0);
        ck_assert_uint_eq(b.len, strlen("x=\"a\\\"\\u000a\\udcff\"\"\""));
        ck_assert_mem_eq(b.p, "x=\"a\\\"\\u000a\\udcff\"\"\"", b.len);
        sh_buf_done(&b);
}
END_TEST

START_TEST(test_json_opt_is_null_for_an_absent_or_null_member)
{
        _cleanup_cjson_ cJSON *o = cJSON_Parse("{\"a\":null,\"b\":0,\"c\":\"\"}");

        ck_assert_ptr_nonnull(o);
        ck_assert_ptr_null(sh_json_opt(o, "a"));
        ck_assert_ptr_null(sh_json_opt(o, "z"));
        ck_assert_ptr_null(sh_json_opt(NULL, "b"));
        ck_assert(cJSON_IsNumber(sh_json_opt(o, "b")));
        ck_assert(cJSON_IsString(sh_json_opt(o, "c")));
        ck_assert_ptr_null(sh_json_opt(o, "B")); /* names are case-sensitive */
}
END_TEST

static Suite *util_suite(void)
{
        Suite *s = suite_create("util");
        TCase *tc;

        tc = tcase_create("path_normalize");
        tcase_add_test(tc, test_path_plain_relative_path_is_unchanged);
        tcase_add_test(tc, test_path_leading_slash_means_root);
        tcase_add_test(tc, test_path_double_slash_collapses);
        tcase_add_test(tc, test_path_dot_components_are_dropped);
        tcase_add_test(tc, test_path_dotdot_pops_one_component);
        tcase_add_test(tc, test_path_dotdot_above_root_is_invalid);
        tcase_add_test(tc, test_path_dots_in_names_are_not_special);
        tcase_add_test(tc, test_path_empty_is_invalid);
        tcase_add_test(tc, test_path_nul_byte_inside_is_invalid);
        tcase_add_test(tc, test_path_4096_bytes_ok_4097_invalid);
        tcase_add_test(tc, test_path_root_forms_normalise_to_empty);
        tcase_add_test(tc, test_path_trailing_slash_is_dropped);
        tcase_add_test(tc, test_path_non_utf8_bytes_pass_through);
        tcase_add_test(tc, test_path_length_counts_not_strlen);
        suite_add_tcase(s, tc);

        tc = tcase_create("path_split");
        tcase_add_test(tc, test_split_top_level_has_empty_parent);
        tcase_add_test(tc, test_split_nested_path);
        tcase_add_test(tc, test_split_root_is_invalid);
        suite_add_tcase(s, tc);

        tc = tcase_create("url_decode");
        tcase_add_test(tc, test_decode_plain_text_unchanged);
        tcase_add_test(tc, test_decode_percent_escapes_either_case);
        tcase_add_test(tc, test_decode_plus_is_space_only_in_form_mode);
        tcase_add_test(tc, test_decode_invalid_escapes_rejected);
        tcase_add_test(tc, test_decode_embedded_nul_keeps_length);
        tcase_add_test(tc, test_decode_respects_len_argument);
        tcase_add_test(tc, test_memdup0_copies_exactly_n_bytes_and_terminates);
        suite_add_tcase(s, tc);

        tc = tcase_create("query");
        tcase_add_test(tc, test_query_simple_pairs);
        tcase_add_test(tc, test_query_null_and_empty_string_are_empty);
        tcase_add_test(tc, test_query_repeated_key_first_wins);
        tcase_add_test(tc, test_query_empty_fields_skipped);
        tcase_add_test(tc, test_query_key_without_equals_has_empty_value);
        tcase_add_test(tc, test_query_values_form_decoded);
        tcase_add_test(tc, test_query_invalid_escape_anywhere_rejected);
        tcase_add_test(tc, test_query_next_gives_each_of_a_repeated_key_in_turn);
        tcase_add_test(tc, test_query_u64_tells_absent_from_a_number_and_refuses_other_text);
        suite_add_tcase(s, tc);

        tc = tcase_create("numbers");
        tcase_add_test(tc, test_u64_valid_numbers);
        tcase_add_test(tc, test_u64_overflow_is_erange);
        tcase_add_test(tc, test_u64_garbage_is_einval);
        tcase_add_test(tc, test_size_plain_bytes);
        tcase_add_test(tc, test_size_binary_suffixes_either_case);
        tcase_add_test(tc, test_size_i_and_b_forms);
        tcase_add_test(tc, test_size_overflow_rejected);
        tcase_add_test(tc, test_size_garbage_rejected);
        tcase_add_test(tc, test_millicores_valid);
        tcase_add_test(tc, test_millicores_invalid);
        tcase_add_test(tc, test_cpu_quantities_in_millicores);
        tcase_add_test(tc, test_memory_quantities_binary_and_decimal);
        tcase_add_test(tc, test_huge_quantities_saturate);
        tcase_add_test(tc, test_unparsable_quantities_are_refused);
        suite_add_tcase(s, tc);

        tc = tcase_create("times");
        tcase_add_test(tc, test_time_round_trip);
        tcase_add_test(tc, test_time_refuses_what_is_not_rfc_3339);
        tcase_add_test(tc, test_a_file_time_is_cut_to_the_millisecond_and_never_before_1970);
        suite_add_tcase(s, tc);

        tc = tcase_create("ids");
        tcase_add_test(tc, test_item_id_lengths);
        tcase_add_test(tc, test_item_id_first_char_rules);
        tcase_add_test(tc, test_item_id_later_chars);
        tcase_add_test(tc, test_remote_id_exactly_40_lower_hex);
        tcase_add_test(tc, test_id_token_is_the_first_8_hex_of_a_valid_id);
        tcase_add_test(tc, test_id_token_of_an_invalid_id_is_einval);
        tcase_add_test(tc, test_pod_token_exactly_8_lower_hex);
        tcase_add_test(tc, test_remote_id_hash_skips_the_pod_token);
        tcase_add_test(tc, test_remote_id_hash_is_the_32_bits_after_the_token);
        suite_add_tcase(s, tc);

        tc = tcase_create("ids");
        tcase_add_test(tc, test_hex_is_two_lowercase_digits_a_byte);
        tcase_add_test(tc, test_a_uuid_is_its_bytes_with_version_4_and_variant_10);
        suite_add_tcase(s, tc);

        tc = tcase_create("json_quote");
        tcase_add_test(tc, test_quote_ascii);
        tcase_add_test(tc, test_quote_quotes_and_backslash);
        tcase_add_test(tc, test_quote_control_chars_escaped);
        tcase_add_test(tc, test_quote_valid_utf8_passes_through);
        tcase_add_test(tc, test_quote_any_byte_at_any_offset_of_a_plain_run);
        tcase_add_test(tc, test_quote_invalid_bytes_become_surrogate_escapes);
        tcase_add_test(tc, test_quote_overlong_forms_are_invalid);
        tcase_add_test(tc, test_quote_surrogate_encodings_are_invalid);
        tcase_add_test(tc, test_quote_worst_case_fits_bound);
        suite_add_tcase(s, tc);

        tc = tcase_create("utf8");
        tcase_add_test(tc, test_scrub_makes_invalid_bytes_and_nul_a_question_mark_one_for_one);
        tcase_add_test(tc, test_sanitize_also_makes_controls_a_question_mark);
        suite_add_tcase(s, tc);

        tc = tcase_create("json_intake");
        tcase_add_test(tc, test_json_a_nul_escape_in_any_string_is_refused);
        tcase_add_test(tc, test_json_a_literal_backslash_u0000_is_no_nul);
        tcase_add_test(tc, test_json_raw_controls_nul_bytes_and_bad_utf8_are_refused);
        tcase_add_test(tc, test_json_one_value_and_only_whitespace_after_it);
        tcase_add_test(tc, test_json_surrogate_bytes_only_when_asked);
        tcase_add_test(tc, test_json_cleanup_deletes_at_scope_end_unless_handed_out);
        tcase_add_test(tc, test_append_json_adds_one_quoted_string_after_what_is_there);
        tcase_add_test(tc, test_json_opt_is_null_for_an_absent_or_null_member);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(util_suite());
}
