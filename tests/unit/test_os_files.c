/* test_os_files.c: the bounded parser of an image's /etc/passwd and /etc/group
 * (src/opensandbox/idmap.c) on hostile bytes (huge, binary, no newline). */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/opensandbox/files.h"
#include "unit.h"

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
        TCase *tc = tcase_create("idmap");
        tcase_add_test(tc, test_passwd_names_and_ids_are_read_and_bad_lines_skipped);
        tcase_add_test(tc, test_a_huge_binary_passwd_without_newline_is_bounded);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(os_files_suite());
}
