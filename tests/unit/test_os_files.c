/* test_os_files.c: the pure parts of the /v1 file routes: the streaming multipart parser of
 * uploads (src/opensandbox/multipart.c) fed in every split, with its edge cases (quotes and
 * CRLF in a part name, huge headers, a cut body), and the bounded parser of an image's
 * /etc/passwd and /etc/group (idmap.c) on hostile bytes (huge, binary, no newline). */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/opensandbox/files.h"
#include "unit.h"

/* ---- multipart ------------------------------------------------------------------------------ */

typedef struct parts {
        unsigned n;
        char name[8][64];
        char filename[8][64];
        char data[8][256];
        size_t len[8];
        unsigned ended;
} parts;

static int on_event(void *data, os_mp_event ev, const char *p, size_t n)
{
        parts *ps = data;

        switch (ev) {
        case OS_MP_PART:
                ck_assert_uint_lt(ps->n, 8);
                ps->n++;
                break;
        case OS_MP_DATA:
                ck_assert_uint_gt(ps->n, 0);
                ck_assert_uint_le(ps->len[ps->n - 1] + n, 255);
                memcpy(ps->data[ps->n - 1] + ps->len[ps->n - 1], p, n);
                ps->len[ps->n - 1] += n;
                break;
        case OS_MP_PART_END:
                ps->ended++;
                break;
        }
        return 0;
}

typedef struct ctx {
        parts ps;
        os_mp *m;
} ctx;

static int on_event_ctx(void *data, os_mp_event ev, const char *p, size_t n)
{
        ctx *c = data;

        if (ev == OS_MP_PART) {
                snprintf(c->ps.name[c->ps.n], 64, "%.63s", c->m->name);
                snprintf(c->ps.filename[c->ps.n], 64, "%.63s",
                         c->m->has_filename ? c->m->filename : "-");
        }
        return on_event(&c->ps, ev, p, n);
}

/* Feed body in pieces of `step` bytes; the parse's result. */
static int feed(os_mp *m, ctx *c, const char *body, size_t len, size_t step)
{
        os_mp_init(m, "XyZ");
        memset(&c->ps, 0, sizeof(c->ps));
        c->m = m;
        for (size_t off = 0; off < len; off += step) {
                size_t n = len - off < step ? len - off : step;
                int r = os_mp_feed(m, body + off, n, on_event_ctx, c);
                if (r < 0)
                        return r;
        }
        return 0;
}

static const char two_parts[] =
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
        "Content-Type: application/json\r\n\r\n"
        "{\"path\":\"/tmp/a\"}\r\n"
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n"
        "line1\r\n--XyNot\r\n\r\n-\r\n"
        "--XyZ--\r\nepilogue";

START_TEST(test_parts_come_out_whole_whatever_the_split)
{
        os_mp *m = malloc(sizeof(*m));
        ctx c;
        const char *want = "line1\r\n--XyNot\r\n\r\n-";

        for (size_t step = 1; step <= sizeof(two_parts); step++) {
                ck_assert_int_eq(feed(m, &c, two_parts, sizeof(two_parts) - 1, step), 0);
                ck_assert(os_mp_done(m));
                ck_assert_uint_eq(c.ps.n, 2);
                ck_assert_uint_eq(c.ps.ended, 2);
                ck_assert_str_eq(c.ps.name[0], "metadata");
                ck_assert_str_eq(c.ps.filename[0], "metadata");
                ck_assert_str_eq(c.ps.name[1], "file");
                ck_assert_uint_eq(c.ps.len[0], 17);
                ck_assert(memcmp(c.ps.data[0], "{\"path\":\"/tmp/a\"}", 17) == 0);
                ck_assert_uint_eq(c.ps.len[1], strlen(want));
                ck_assert(memcmp(c.ps.data[1], want, strlen(want)) == 0);
        }
        free(m);
}
END_TEST

START_TEST(test_a_cut_body_is_not_done_and_its_last_part_never_ends)
{
        os_mp *m = malloc(sizeof(*m));
        ctx c;
        size_t cut = strstr(two_parts, "line1") - two_parts + 3;

        ck_assert_int_eq(feed(m, &c, two_parts, cut, 7), 0);
        ck_assert(!os_mp_done(m));
        ck_assert_uint_eq(c.ps.n, 2);
        ck_assert_uint_eq(c.ps.ended, 1); /* the file part never ended: never committed */
        free(m);
}
END_TEST

START_TEST(test_quotes_and_crlf_in_a_part_name_are_refused_or_unescaped)
{
        os_mp *m = malloc(sizeof(*m));
        ctx c;
        static const char crlf[] = "--XyZ\r\nContent-Disposition: form-data; name=\"meta\r\n"
                                   "data\"\r\n\r\nx\r\n--XyZ--\r\n";
        static const char esc[] = "--XyZ\r\nContent-Disposition: form-data; name=\"a\\\"b\"; "
                                  "filename=\"c\\\\d\"\r\n\r\nx\r\n--XyZ--\r\n";
        static const char noname[] = "--XyZ\r\nContent-Disposition: form-data\r\n\r\nx\r\n"
                                     "--XyZ--\r\n";
        static const char nodisp[] = "--XyZ\r\nContent-Type: text/plain\r\n\r\nx\r\n--XyZ--\r\n";
        static const char nohdr[] = "--XyZ\r\n\r\nx\r\n--XyZ--\r\n";
        static const char junk[] = "--XyZ junk\r\n";

        ck_assert_int_eq(feed(m, &c, crlf, sizeof(crlf) - 1, 5), -EINVAL);
        ck_assert_int_eq(feed(m, &c, esc, sizeof(esc) - 1, 3), 0);
        ck_assert_str_eq(c.ps.name[0], "a\"b");
        ck_assert_str_eq(c.ps.filename[0], "c\\d");
        ck_assert_int_eq(feed(m, &c, noname, sizeof(noname) - 1, 64), -EINVAL);
        ck_assert_int_eq(feed(m, &c, nodisp, sizeof(nodisp) - 1, 64), -EINVAL);
        ck_assert_int_eq(feed(m, &c, nohdr, sizeof(nohdr) - 1, 64), -EINVAL);
        ck_assert_int_eq(feed(m, &c, junk, sizeof(junk) - 1, 64), -EINVAL);
        free(m);
}
END_TEST

START_TEST(test_headers_over_the_bound_are_e2big_and_a_nul_in_them_is_refused)
{
        os_mp *m = malloc(sizeof(*m));
        ctx c;
        size_t n = OS_MP_HEADERS_MAX + 64;
        char *b = malloc(n + 16);
        static const char nul[] = "--XyZ\r\nContent-Disposition: form-data; name=\"a\0\"\r\n\r\n";

        memcpy(b, "--XyZ\r\nX: ", 10);
        memset(b + 10, 'a', n);
        ck_assert_int_eq(feed(m, &c, b, n + 10, 4096), -E2BIG);
        ck_assert_int_eq(feed(m, &c, nul, sizeof(nul) - 1, 64), -EINVAL);
        free(b);
        free(m);
}
END_TEST

START_TEST(test_the_boundary_is_read_from_the_content_type)
{
        char b[OS_MP_BOUNDARY_MAX + 1];
        char longb[200];

        ck_assert_int_eq(os_mp_boundary("multipart/form-data; boundary=abc", b), 0);
        ck_assert_str_eq(b, "abc");
        ck_assert_int_eq(os_mp_boundary("Multipart/Form-Data; charset=x; boundary=\"a b\"", b), 0);
        ck_assert_str_eq(b, "a b");
        ck_assert_int_eq(os_mp_boundary("application/json", b), -EINVAL);
        ck_assert_int_eq(os_mp_boundary("multipart/form-data", b), -EINVAL);
        ck_assert_int_eq(os_mp_boundary(NULL, b), -EINVAL);
        snprintf(longb, sizeof(longb), "multipart/form-data; boundary=%0100d", 1);
        ck_assert_int_eq(os_mp_boundary(longb, b), -EINVAL);
}
END_TEST

/* ---- idmap ---------------------------------------------------------------------------------- */

START_TEST(test_passwd_names_and_ids_are_read_and_bad_lines_skipped)
{
        static const char pw[] = "root:x:0:0:root:/root:/bin/bash\n"
                                 "nobody:x:65534:65534::/:/usr/sbin/nologin\n"
                                 "bad name:x:5:5::/:\n"
                                 "neg:x:-1:1::/:\n"
                                 "big:x:99999999999:1::/:\n"
                                 "\xff\xfe:x:7:7\n"
                                 "short:x\n"
                                 "grp:x:100\n"
                                 "last:x:1000:1000::/:/bin/sh"; /* no final newline */
        os_idmap m;
        uint32_t id;

        ck_assert_int_eq(os_idmap_parse(&m, pw, sizeof(pw) - 1), 0);
        ck_assert_uint_eq(m.n, 4);
        ck_assert_int_eq(os_idmap_lookup(&m, "nobody", &id), 0);
        ck_assert_uint_eq(id, 65534);
        ck_assert_int_eq(os_idmap_lookup(&m, "grp", &id), 0); /* /etc/group's 3 fields */
        ck_assert_uint_eq(id, 100);
        ck_assert_int_eq(os_idmap_lookup(&m, "last", &id), 0);
        ck_assert_uint_eq(id, 1000);
        ck_assert_int_eq(os_idmap_lookup(&m, "bad name", &id), -ENOENT);
        ck_assert_int_eq(os_idmap_lookup(&m, "neg", &id), -ENOENT);
        ck_assert_int_eq(os_idmap_lookup(&m, "1234", &id), 0); /* a number is an id */
        ck_assert_uint_eq(id, 1234);
        ck_assert_int_eq(os_idmap_lookup(&m, "-5", &id), -ENOENT);
        ck_assert_str_eq(os_idmap_name(&m, 0), "root");
        ck_assert_ptr_null(os_idmap_name(&m, 5));
        os_idmap_done(&m);
}
END_TEST

START_TEST(test_a_huge_binary_passwd_without_newline_is_bounded)
{
        size_t n = 8u << 20;
        char *b = malloc(n);
        os_idmap m;

        for (size_t i = 0; i < n; i++)
                b[i] = (char)(i * 7919 % 251);
        ck_assert_int_eq(os_idmap_parse(&m, b, n), 0);
        ck_assert_uint_le(m.n, OS_IDMAP_ENTRIES);
        os_idmap_done(&m);
        /* many valid lines: at most OS_IDMAP_ENTRIES kept, within the bytes bound */
        for (size_t off = 0, i = 0; off + 32 < n; i++)
                off += (size_t)snprintf(b + off, n - off, "u%zu:x:%zu:1\n", i, i);
        ck_assert_int_eq(os_idmap_parse(&m, b, n), 0);
        ck_assert_uint_eq(m.n, OS_IDMAP_ENTRIES);
        os_idmap_done(&m);
        memset(b, ':', n);
        ck_assert_int_eq(os_idmap_parse(&m, b, n), 0);
        ck_assert_uint_eq(m.n, 0);
        os_idmap_done(&m);
        free(b);
}
END_TEST

static Suite *os_files_suite(void)
{
        Suite *s = suite_create("os_files");
        TCase *tc = tcase_create("multipart");

        tcase_add_test(tc, test_parts_come_out_whole_whatever_the_split);
        tcase_add_test(tc, test_a_cut_body_is_not_done_and_its_last_part_never_ends);
        tcase_add_test(tc, test_quotes_and_crlf_in_a_part_name_are_refused_or_unescaped);
        tcase_add_test(tc, test_headers_over_the_bound_are_e2big_and_a_nul_in_them_is_refused);
        tcase_add_test(tc, test_the_boundary_is_read_from_the_content_type);
        suite_add_tcase(s, tc);
        tc = tcase_create("idmap");
        tcase_add_test(tc, test_passwd_names_and_ids_are_read_and_bad_lines_skipped);
        tcase_add_test(tc, test_a_huge_binary_passwd_without_newline_is_bounded);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(os_files_suite());
}
