/* test_passwd.c: name <-> id lookups in an image's /etc/passwd and /etc/group
 * (src/fs/passwd.c): every rule, and hostile files (huge lines, binary, NULs, no
 * final newline, missing fields, bad or overflowing ids, duplicates, more lines than are kept),
 * with a loop over random and mutated files that must never read past the buffer (the ASan
 * build checks it), and a listing's worth of lookups in the largest table. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/passwd.h"
#include "unit.h"

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
                             "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
                             "# a comment:x:5:5:::\n"
                             "_apt:x:42:65534::/nonexistent:/usr/sbin/nologin\n"
                             "\n"
                             "systemd-network:x:998:998:systemd Network:/:/usr/sbin/nologin\n"
                             "alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n"
                             "Debian-exim:x:101:103::/var/spool/exim4:/usr/sbin/nologin\n"
                             "host$:x:1001:1001::/:/bin/false";

static const char group[] = "root:x:0:\n"
                            "wheel:x:10:root,alice\n"
                            "alice:x:1000:\n"
                            "nogroup:x:65534:";

/* A heap copy of exactly `len` bytes (no terminator), so that ASan sees any read past it. */
static char *exact(const char *s, size_t len)
{
        char *p = malloc(len ? len : 1);

        ck_assert_ptr_nonnull(p);
        if (len)
                memcpy(p, s, len);
        return p;
}

/* The table of `len` bytes of db, parsed from an exact copy. */
static void table(sh_idmap *m, sh_iddb_kind k, const char *db, size_t len)
{
        char *copy = exact(db, len);

        ck_assert_int_eq(sh_idmap_parse(m, k, copy, len), 0);
        free(copy);
}

/* fn (sh_idmap_lookup_name or sh_idmap_resolve) of s in the table of db. */
static int look_up(int (*fn)(const sh_idmap *, const char *, uint32_t *), sh_iddb_kind k,
                   const char *db, size_t len, const char *s, uint32_t *id)
{
        sh_idmap m;
        int r;

        table(&m, k, db, len);
        r = fn(&m, s, id);
        sh_idmap_done(&m);
        return r;
}

static int name2id(sh_iddb_kind k, const char *db, size_t len, const char *name, uint32_t *id)
{
        *id = 0xdeadbeef;
        return look_up(sh_idmap_lookup_name, k, db, len, name, id);
}

static int id2name(sh_iddb_kind k, const char *db, size_t len, uint32_t id,
                   char name[SH_IDDB_NAME_MAX + 1])
{
        sh_idmap m;
        const char *found;

        table(&m, k, db, len);
        strcpy(name, "untouched");
        found = sh_idmap_name(&m, id);
        if (found) {
                ck_assert_uint_le(strlen(found), SH_IDDB_NAME_MAX);
                strcpy(name, found);
        }
        sh_idmap_done(&m);
        return found ? 0 : -ENOENT;
}

static int resolve(sh_iddb_kind k, const char *db, size_t len, const char *spec, uint32_t *id)
{
        return look_up(sh_idmap_resolve, k, db, len, spec, id);
}

#define P(name, id) name2id(SH_IDDB_PASSWD, passwd, sizeof(passwd) - 1, name, id)

START_TEST(test_names_give_their_uid)
{
        uint32_t id;

        ck_assert_int_eq(P("root", &id), 0);
        ck_assert_uint_eq(id, 0);
        ck_assert_int_eq(P("daemon", &id), 0);
        ck_assert_uint_eq(id, 1);
        ck_assert_int_eq(P("_apt", &id), 0);
        ck_assert_uint_eq(id, 42);
        ck_assert_int_eq(P("systemd-network", &id), 0);
        ck_assert_uint_eq(id, 998);
        ck_assert_int_eq(P("alice", &id), 0);
        ck_assert_uint_eq(id, 1000);
        ck_assert_int_eq(P("Debian-exim", &id), 0);
        ck_assert_uint_eq(id, 101);
        /* the last line has no final newline */
        ck_assert_int_eq(P("host$", &id), 0);
        ck_assert_uint_eq(id, 1001);
}
END_TEST

START_TEST(test_unknown_names_are_not_found)
{
        uint32_t id;

        ck_assert_int_eq(P("bob", &id), -ENOENT);
        ck_assert_int_eq(P("ali", &id), -ENOENT);    /* a prefix is no match */
        ck_assert_int_eq(P("alicex", &id), -ENOENT); /* nor a longer name */
        ck_assert_int_eq(P("Root", &id), -ENOENT);   /* names are case-sensitive */
        ck_assert_uint_eq(id, 0xdeadbeef);
        /* comment lines are no entries even when they look like one */
        ck_assert_int_eq(P("#", &id), -EINVAL);
}
END_TEST

START_TEST(test_ids_give_their_name)
{
        char name[SH_IDDB_NAME_MAX + 1];

        ck_assert_int_eq(id2name(SH_IDDB_PASSWD, passwd, sizeof(passwd) - 1, 0, name), 0);
        ck_assert_str_eq(name, "root");
        ck_assert_int_eq(id2name(SH_IDDB_PASSWD, passwd, sizeof(passwd) - 1, 1000, name), 0);
        ck_assert_str_eq(name, "alice");
        ck_assert_int_eq(id2name(SH_IDDB_PASSWD, passwd, sizeof(passwd) - 1, 1001, name), 0);
        ck_assert_str_eq(name, "host$");
        ck_assert_int_eq(id2name(SH_IDDB_PASSWD, passwd, sizeof(passwd) - 1, 5, name), -ENOENT);
        ck_assert_str_eq(name, "untouched");
        ck_assert_int_eq(id2name(SH_IDDB_GROUP, group, sizeof(group) - 1, 10, name), 0);
        ck_assert_str_eq(name, "wheel");
        ck_assert_int_eq(id2name(SH_IDDB_GROUP, group, sizeof(group) - 1, 65534, name), 0);
        ck_assert_str_eq(name, "nogroup");
}
END_TEST

START_TEST(test_groups_have_four_fields_and_passwd_seven)
{
        uint32_t id;

        ck_assert_int_eq(name2id(SH_IDDB_GROUP, group, sizeof(group) - 1, "wheel", &id), 0);
        ck_assert_uint_eq(id, 10);
        ck_assert_int_eq(name2id(SH_IDDB_GROUP, group, sizeof(group) - 1, "nogroup", &id), 0);
        ck_assert_uint_eq(id, 65534);
        /* a group file read as passwd has no well-formed line, and the other way round */
        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, group, sizeof(group) - 1, "root", &id), -ENOENT);
        ck_assert_int_eq(name2id(SH_IDDB_GROUP, passwd, sizeof(passwd) - 1, "root", &id), -ENOENT);
}
END_TEST

START_TEST(test_the_first_of_duplicate_names_wins)
{
        static const char db[] = "dup:x:5:5::/:/bin/sh\ndup:x:0:0::/:/bin/sh\n";
        static const char ids[] = "first:x:7:7::/:/bin/sh\nsecond:x:7:7::/:/bin/sh\n";
        char name[SH_IDDB_NAME_MAX + 1];
        uint32_t id;

        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, db, sizeof(db) - 1, "dup", &id), 0);
        ck_assert_uint_eq(id, 5);
        ck_assert_int_eq(id2name(SH_IDDB_PASSWD, ids, sizeof(ids) - 1, 7, name), 0);
        ck_assert_str_eq(name, "first");
}
END_TEST

START_TEST(test_malformed_lines_are_skipped_not_fatal)
{
        static const char db[] = "short:x:5\n"                   /* missing fields */
                                 "long:x:5:5::/:/bin/sh:extra\n" /* too many */
                                 "neg:x:-1:5::/:/bin/sh\n"       /* not a number */
                                 "plus:x:+7:5::/:/bin/sh\n"
                                 "space:x: 7:5::/:/bin/sh\n"
                                 "empty:x::5::/:/bin/sh\n"
                                 "hex:x:0x10:5::/:/bin/sh\n"
                                 "big:x:4294967296:5::/:/bin/sh\n"    /* overflows 32 bits */
                                 "minus1:x:4294967295:5::/:/bin/sh\n" /* (uid_t)-1 */
                                 "huge:x:99999999999999999999999:5::/:/bin/sh\n"
                                 "-dash:x:8:5::/:/bin/sh\n"
                                 "+nis:x:9:5::/:/bin/sh\n"
                                 "bad name:x:10:5::/:/bin/sh\n"
                                 "1234:x:11:5::/:/bin/sh\n" /* all digits: never a name */
                                 "0123456789abcdef0123456789abcdef0:x:12:5::/:/bin/sh\n"
                                 "ok:x:13:5::/:/bin/sh\n";
        char name[SH_IDDB_NAME_MAX + 1];
        uint32_t id;

        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, db, sizeof(db) - 1, "ok", &id), 0);
        ck_assert_uint_eq(id, 13);
        static const char *const gone[] = {"short", "long", "neg", "plus",   "space",
                                           "empty", "hex",  "big", "minus1", "huge"};
        for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
                ck_assert_msg(name2id(SH_IDDB_PASSWD, db, sizeof(db) - 1, gone[i], &id) == -ENOENT,
                              "found %s", gone[i]);
        for (uint32_t u = 5; u <= 12; u++)
                ck_assert_int_eq(id2name(SH_IDDB_PASSWD, db, sizeof(db) - 1, u, name), -ENOENT);
        ck_assert_int_eq(id2name(SH_IDDB_PASSWD, db, sizeof(db) - 1, 0, name), -ENOENT);
        ck_assert_int_eq(id2name(SH_IDDB_PASSWD, db, sizeof(db) - 1, UINT32_MAX, name), -ENOENT);
}
END_TEST

START_TEST(test_a_line_with_a_nul_is_skipped)
{
        static const char db[] = "evil\0:x:0:0::/:/bin/sh\nev\0il:x:3:3::/:/bin/sh\n"
                                 "root:x:0:0::/:/bin/s\0h\nroot:x:4:4::/:/bin/sh\n";
        char name[SH_IDDB_NAME_MAX + 1];
        uint32_t id;

        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, db, sizeof(db) - 1, "evil", &id), -ENOENT);
        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, db, sizeof(db) - 1, "ev", &id), -ENOENT);
        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, db, sizeof(db) - 1, "root", &id), 0);
        ck_assert_uint_eq(id, 4);
        ck_assert_int_eq(id2name(SH_IDDB_PASSWD, db, sizeof(db) - 1, 3, name), -ENOENT);
}
END_TEST

START_TEST(test_crlf_files_and_binary_lines)
{
        static const char db[] = "\xff\xfe\x01\x02:x:1:1\r\nwin:x:7:7::/:/bin/sh\r\n"
                                 "\x80:x:8:8::/:/bin/sh\n:x:9:9::/:/bin/sh\n";
        char name[SH_IDDB_NAME_MAX + 1];
        uint32_t id;

        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, db, sizeof(db) - 1, "win", &id), 0);
        ck_assert_uint_eq(id, 7);
        ck_assert_int_eq(id2name(SH_IDDB_PASSWD, db, sizeof(db) - 1, 8, name), -ENOENT);
        ck_assert_int_eq(id2name(SH_IDDB_PASSWD, db, sizeof(db) - 1, 9, name), -ENOENT);
        /* a group line ending in \r keeps its id: the \r is part of the members field */
        ck_assert_int_eq(name2id(SH_IDDB_GROUP, "g:x:5:\r\n", 8, "g", &id), 0);
        ck_assert_uint_eq(id, 5);
}
END_TEST

START_TEST(test_a_huge_line_and_a_cut_file)
{
        size_t n = 8u << 20;
        char *db = malloc(n);
        uint32_t id;

        ck_assert_ptr_nonnull(db);
        memset(db, 'a', n);
        memcpy(db, "x:x:1:1::/:", 11); /* one line of 8 MiB, no newline */
        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, db, n, "x", &id), 0);
        ck_assert_uint_eq(id, 1);
        memset(db, ':', n); /* millions of fields */
        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, db, n, "x", &id), -ENOENT);
        memset(db, '\n', n); /* millions of empty lines */
        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, db, n, "x", &id), -ENOENT);
        free(db);
        /* a file cut by the caller's read bound mid-line: a line cut in its last field keeps its
         * id; cut earlier, it has too few fields and is skipped */
        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, "root:x:0:0:root:/root:/bin/ba", 29, "root", &id),
                         0);
        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, "roo", 3, "roo", &id), -ENOENT);
        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, "root:x:1", 8, "root", &id), -ENOENT);
        ck_assert_int_eq(name2id(SH_IDDB_PASSWD, "", 0, "root", &id), -ENOENT);
        {
                sh_idmap m;

                ck_assert_int_eq(sh_idmap_parse(&m, SH_IDDB_PASSWD, NULL, 0), 0);
                ck_assert_int_eq(sh_idmap_lookup_name(&m, "root", &id), -ENOENT);
                ck_assert_ptr_null(sh_idmap_name(&m, 0));
                sh_idmap_done(&m);
                sh_idmap_done(&m); /* done twice, and a zeroed table, are fine */
                m = (sh_idmap){0};
                ck_assert_ptr_null(sh_idmap_name(&m, 0));
                sh_idmap_done(&m);
        }
}
END_TEST

/* From i14-impl's idmap tests: whatever the bytes, at most SH_IDDB_ENTRIES_MAX lines are kept,
 * the first ones; a file of pseudo-random bytes or of colons keeps none. */
START_TEST(test_a_huge_file_keeps_at_most_its_first_entries)
{
        size_t n = 8u << 20, lines = 0;
        char *b = malloc(n);
        char name[SH_IDDB_NAME_MAX + 1];
        sh_idmap m;
        uint32_t id;

        ck_assert_ptr_nonnull(b);
        for (size_t i = 0; i < n; i++)
                b[i] = (char)(i * 7919 % 251);
        ck_assert_int_eq(sh_idmap_parse(&m, SH_IDDB_PASSWD, b, n), 0);
        ck_assert_uint_le(m.n, SH_IDDB_ENTRIES_MAX);
        sh_idmap_done(&m);
        /* many valid lines: the first SH_IDDB_ENTRIES_MAX are kept, the next ones never seen */
        for (size_t off = 0; off + 64 < n; lines++)
                off += (size_t)snprintf(b + off, n - off, "u%zu:x:%zu:1::/:\n", lines, 100 + lines);
        ck_assert_uint_gt(lines, SH_IDDB_ENTRIES_MAX + 1);
        ck_assert_int_eq(sh_idmap_parse(&m, SH_IDDB_PASSWD, b, n), 0);
        ck_assert_uint_eq(m.n, SH_IDDB_ENTRIES_MAX);
        ck_assert_int_eq(sh_idmap_lookup_name(&m, "u0", &id), 0);
        ck_assert_uint_eq(id, 100);
        snprintf(name, sizeof(name), "u%d", SH_IDDB_ENTRIES_MAX - 1);
        ck_assert_int_eq(sh_idmap_lookup_name(&m, name, &id), 0);
        ck_assert_uint_eq(id, 100 + SH_IDDB_ENTRIES_MAX - 1);
        snprintf(name, sizeof(name), "u%d", SH_IDDB_ENTRIES_MAX);
        ck_assert_int_eq(sh_idmap_lookup_name(&m, name, &id), -ENOENT);
        ck_assert_ptr_null(sh_idmap_name(&m, 100 + SH_IDDB_ENTRIES_MAX));
        sh_idmap_done(&m);
        memset(b, ':', n);
        ck_assert_int_eq(sh_idmap_parse(&m, SH_IDDB_PASSWD, b, n), 0);
        ck_assert_uint_eq(m.n, 0);
        sh_idmap_done(&m);
        free(b);
}
END_TEST

/* The table is sorted, and duplicates must still resolve to their first line: ids and names
 * repeated many times, each first seen at a known line. */
START_TEST(test_the_first_of_many_duplicates_wins_both_ways)
{
        enum { LINES = 5000, IDS = 7, NAMES = 5 };
        char *db = malloc(LINES * 48);
        size_t len = 0;
        sh_idmap m;
        uint32_t id;

        ck_assert_ptr_nonnull(db);
        /* line i: name d(i % NAMES), id i % IDS (so name dj is first at line j, id j; id k is
         * first at line k, name d(k % NAMES)) */
        for (int i = 0; i < LINES; i++)
                len += (size_t)sprintf(db + len, "d%d:x:%d:0::/:/bin/sh\n", i % NAMES, i % IDS);
        table(&m, SH_IDDB_PASSWD, db, len);
        for (int j = 0; j < NAMES; j++) {
                char name[8];

                snprintf(name, sizeof(name), "d%d", j);
                ck_assert_int_eq(sh_idmap_lookup_name(&m, name, &id), 0);
                ck_assert_uint_eq(id, (uint32_t)j);
        }
        for (int k = 0; k < IDS; k++) {
                char want[8];

                snprintf(want, sizeof(want), "d%d", k % NAMES);
                ck_assert_str_eq(sh_idmap_name(&m, (uint32_t)k), want);
        }
        ck_assert_ptr_null(sh_idmap_name(&m, IDS));
        sh_idmap_done(&m);
        free(db);
}
END_TEST

/* What a listing of 200,000 entries asks (an owner and a group name each, the sandbox's own ids
 * being in no line) of the largest table: answered within the test's timeout only if a lookup
 * does not read the file again (a scan of 1 MiB per lookup is 400 GB of work). */
START_TEST(test_a_listings_worth_of_lookups_does_not_rescan_the_file)
{
        size_t n = SH_IDDB_READ_MAX, len = 0;
        char *db = malloc(n);
        sh_idmap m;
        uint32_t found = 0;

        ck_assert_ptr_nonnull(db);
        for (unsigned i = 0; len + 64 < n; i++)
                len += (size_t)snprintf(db + len, n - len, "user%u:x:%u:%u::/home:/bin/sh\n", i,
                                        1000 + i, 1000 + i);
        table(&m, SH_IDDB_PASSWD, db, len);
        ck_assert_uint_eq(m.n, SH_IDDB_ENTRIES_MAX);
        for (uint32_t i = 0; i < 200000; i++) {
                found += sh_idmap_name(&m, 100000 + i) != NULL;       /* the sandbox's: absent */
                found += sh_idmap_name(&m, 1000 + i % 20000) != NULL; /* the image's */
        }
        ck_assert_uint_eq(found, 200000 / 20000 * SH_IDDB_ENTRIES_MAX);
        sh_idmap_done(&m);
        free(db);
}
END_TEST

START_TEST(test_name_rules)
{
        static const char *const ok[] = {"a",
                                         "root",
                                         "_apt",
                                         "systemd-network",
                                         "A.b_c-9",
                                         "ws$",
                                         "x1",
                                         "1x",
                                         "0123456789abcdef0123456789abcde$"};
        static const char *const bad[] = {
                "",  "-a",  "a b", "a:b", "a/b",
                "$", "a$$", "a$b", "123", "0",
                "é", "a\n", "a\t", "1$",  "0123456789abcdef0123456789abcdef0"};

        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
                ck_assert_msg(sh_iddb_name_valid(ok[i], strlen(ok[i])), "refused %s", ok[i]);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(!sh_iddb_name_valid(bad[i], strlen(bad[i])), "accepted %s", bad[i]);
        ck_assert(sh_iddb_name_valid("0123456789abcdef0123456789abcdef", 32));
}
END_TEST

START_TEST(test_id_rules)
{
        uint32_t id = 7;

        ck_assert_int_eq(sh_iddb_parse_id("0", 1, &id), 0);
        ck_assert_uint_eq(id, 0);
        ck_assert_int_eq(sh_iddb_parse_id("4294967294", 10, &id), 0);
        ck_assert_uint_eq(id, 4294967294u);
        ck_assert_int_eq(sh_iddb_parse_id("0001000", 7, &id), 0);
        ck_assert_uint_eq(id, 1000);
        ck_assert_int_eq(sh_iddb_parse_id("4294967295", 10, &id), -ERANGE);
        ck_assert_int_eq(sh_iddb_parse_id("9999999999", 10, &id), -ERANGE);
        ck_assert_int_eq(sh_iddb_parse_id("00000000001", 11, &id), -ERANGE);
        ck_assert_int_eq(sh_iddb_parse_id("", 0, &id), -EINVAL);
        ck_assert_int_eq(sh_iddb_parse_id("-1", 2, &id), -EINVAL);
        ck_assert_int_eq(sh_iddb_parse_id("1 ", 2, &id), -EINVAL);
        ck_assert_int_eq(sh_iddb_parse_id("1e3", 3, &id), -EINVAL);
        ck_assert_uint_eq(id, 1000);
}
END_TEST

START_TEST(test_numbers_resolve_as_numbers_and_names_through_the_file)
{
        uint32_t id = 7;

        ck_assert_int_eq(resolve(SH_IDDB_PASSWD, NULL, 0, "1000", &id), 0);
        ck_assert_uint_eq(id, 1000);
        ck_assert_int_eq(resolve(SH_IDDB_PASSWD, NULL, 0, "0", &id), 0);
        ck_assert_uint_eq(id, 0);
        /* a number not in the file is still that number */
        ck_assert_int_eq(resolve(SH_IDDB_PASSWD, passwd, sizeof(passwd) - 1, "4242", &id), 0);
        ck_assert_uint_eq(id, 4242);
        ck_assert_int_eq(resolve(SH_IDDB_PASSWD, passwd, sizeof(passwd) - 1, "alice", &id), 0);
        ck_assert_uint_eq(id, 1000);
        ck_assert_int_eq(resolve(SH_IDDB_GROUP, group, sizeof(group) - 1, "wheel", &id), 0);
        ck_assert_uint_eq(id, 10);
        ck_assert_int_eq(resolve(SH_IDDB_PASSWD, passwd, sizeof(passwd) - 1, "bob", &id), -ENOENT);
        ck_assert_int_eq(resolve(SH_IDDB_PASSWD, NULL, 0, "4294967295", &id), -ERANGE);
        ck_assert_int_eq(
                resolve(SH_IDDB_PASSWD, NULL, 0, "000000000000000000000000000000000000001", &id),
                -ERANGE);
        ck_assert_int_eq(resolve(SH_IDDB_PASSWD, NULL, 0, "", &id), -EINVAL);
        ck_assert_int_eq(resolve(SH_IDDB_PASSWD, NULL, 0, "-1", &id), -EINVAL);
        ck_assert_int_eq(resolve(SH_IDDB_PASSWD, NULL, 0, "a:b", &id), -EINVAL);
        ck_assert_int_eq(resolve(SH_IDDB_PASSWD, NULL, 0, NULL, &id), -EINVAL);
        ck_assert_int_eq(resolve(SH_IDDB_PASSWD, NULL, 0,
                                 "a-name-far-longer-than-thirty-two-bytes-is-never-looked-up", &id),
                         -EINVAL);
        ck_assert_uint_eq(id, 10);
}
END_TEST

/* Random files and mutations of the real one: whatever comes back must be consistent with the
 * rules (a found name is valid, a found id round-trips), and nothing is read past the buffer
 * (each input is an exact heap copy: ASan would stop at the first byte beyond). */
START_TEST(test_random_and_mutated_files_never_crash)
{
        static const char alphabet[] = "root:x0123456789\n\r\0-+#$_ab:";
        unsigned seed = 4242;
        char name[SH_IDDB_NAME_MAX + 1];

        for (int round = 0; round < 20000; round++) {
                size_t len = (size_t)rand_r(&seed) % 300;
                char *db = malloc(len ? len : 1);
                uint32_t id, id2;

                ck_assert_ptr_nonnull(db);
                if (round & 1 && len < sizeof(passwd) - 1) {
                        memcpy(db, passwd, len);
                        for (int m = rand_r(&seed) % 6; m >= 0 && len; m--)
                                db[(size_t)rand_r(&seed) % len] = (char)rand_r(&seed);
                } else {
                        for (size_t i = 0; i < len; i++)
                                db[i] = (round & 2) ? (char)rand_r(&seed)
                                                    : alphabet[(size_t)rand_r(&seed) %
                                                               (sizeof(alphabet) - 1)];
                }
                for (int kind = 0; kind < 2; kind++) {
                        sh_iddb_kind k = kind ? SH_IDDB_GROUP : SH_IDDB_PASSWD;
                        sh_idmap m;

                        ck_assert_int_eq(sh_idmap_parse(&m, k, db, len), 0);
                        for (uint32_t u = 0; u < 12; u++) {
                                const char *found = sh_idmap_name(&m, u);

                                if (!found)
                                        continue;
                                ck_assert(sh_iddb_name_valid(found, strlen(found)));
                                strcpy(name, found);
                                ck_assert_int_eq(sh_idmap_lookup_name(&m, name, &id), 0);
                                /* the first line of that name may carry another id */
                                ck_assert_ptr_nonnull(sh_idmap_name(&m, id));
                        }
                        (void)sh_idmap_lookup_name(&m, kind ? "r" : "root", &id2);
                        sh_idmap_done(&m);
                }
                free(db);
        }
}
END_TEST

static Suite *passwd_suite(void)
{
        Suite *s = suite_create("passwd");
        TCase *tc = tcase_create("passwd");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_names_give_their_uid);
        tcase_add_test(tc, test_unknown_names_are_not_found);
        tcase_add_test(tc, test_ids_give_their_name);
        tcase_add_test(tc, test_groups_have_four_fields_and_passwd_seven);
        tcase_add_test(tc, test_the_first_of_duplicate_names_wins);
        tcase_add_test(tc, test_malformed_lines_are_skipped_not_fatal);
        tcase_add_test(tc, test_a_line_with_a_nul_is_skipped);
        tcase_add_test(tc, test_crlf_files_and_binary_lines);
        tcase_add_test(tc, test_a_huge_line_and_a_cut_file);
        tcase_add_test(tc, test_a_huge_file_keeps_at_most_its_first_entries);
        tcase_add_test(tc, test_the_first_of_many_duplicates_wins_both_ways);
        tcase_add_test(tc, test_a_listings_worth_of_lookups_does_not_rescan_the_file);
        tcase_add_test(tc, test_name_rules);
        tcase_add_test(tc, test_id_rules);
        tcase_add_test(tc, test_numbers_resolve_as_numbers_and_names_through_the_file);
        tcase_add_test(tc, test_random_and_mutated_files_never_crash);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(passwd_suite());
}
