/* test_proto.c: the daemon <-> sandbox-init protocol: the spec round-trips, and the decoder
 * refuses every malformed, truncated, oversized or dangerous spec without reading past it; the
 * control messages, the fds they carry and the step names. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sh/proto.h"
#include "sh/volquota.h"
#include "sh/worker.h" /* sh_worker_spec_limits: the daemon fills the sample */
#include "unit.h"

/* ---- a spec and a hand-made encoding of it ---------------------------------------------- */

static struct sock_filter filter[3] = {
        {0x20, 0, 0, 4}, {0x15, 1, 0, 0xc000003e}, {0x06, 0, 0, 0x7fff0000}};

static sh_worker_spec *sample(void)
{
        sh_worker_spec *s = calloc(1, sizeof(*s));

        ck_assert_ptr_nonnull(s);
        snprintf(s->hostname, sizeof(s->hostname), "sandbox");
        snprintf(s->rootfs, sizeof(s->rootfs), "/var/lib/sh/0123/.rootfs");
        snprintf(s->workspace, sizeof(s->workspace), "/var/lib/sh/0123/workspace");
        snprintf(s->tools, sizeof(s->tools), "/var/lib/sh/tools");
        snprintf(s->entries[0].name, sizeof(s->entries[0].name), "usr");
        snprintf(s->entries[0].src, sizeof(s->entries[0].src), "/usr");
        snprintf(s->entries[1].name, sizeof(s->entries[1].name), "bin");
        snprintf(s->entries[1].target, sizeof(s->entries[1].target), "usr/bin");
        s->entries[1].is_link = true;
        s->n_entries = 2;
        s->tmp_size = 256 << 20;
        s->ptys_max = 16;
        s->nameserver = 0x01007f64U; /* 100.127.0.1, network byte order */
        s->uid = 200001;
        s->gid = 200001;
        s->nprocs = 2;
        sh_worker_spec_limits(s, 512);
        s->seccomp.filter = filter;
        s->seccomp.len = 3;
        return s;
}

/* The format as docs say (proto.c), written by hand, so that the tests can break one field. */
typedef struct bld {
        unsigned char b[8192];
        size_t n;
} bld;

static void raw(bld *b, const void *p, size_t n)
{
        ck_assert_uint_le(b->n + n, sizeof(b->b));
        memcpy(b->b + b->n, p, n);
        b->n += n;
}

static void u8(bld *b, uint8_t v)
{
        raw(b, &v, 1);
}

static void u16(bld *b, uint16_t v)
{
        raw(b, &v, 2);
}

static void u32(bld *b, uint32_t v)
{
        raw(b, &v, 4);
}

static void u64(bld *b, uint64_t v)
{
        raw(b, &v, 8);
}

static void str(bld *b, const char *s)
{
        u32(b, (uint32_t)strlen(s));
        raw(b, s, strlen(s));
}

/* Which field to break, and how. */
typedef struct breaks {
        const char *hostname, *rootfs, *entry_name, *entry2_name;
        int uid /* -2: (uid_t)-1 */, gid, nprocs, n_entries, kind, n_rlimits, rl_resource, rl_swap,
                n_filter;
        uint64_t tmp_size;
        uint32_t ptys_max;
        bool trailing, bad_magic;
        /* one volume (its fields "" or 0 take the defaults: /vol, data, "", /mnt/data, 0) */
        bool volume;
        const char *vbase, *vpath, *vsub, *vtarget;
        uint32_t vflags, volume_project;
        uint64_t vquota;
        int n_volumes /* as sent; -1: how many there are */,
                volume_gid /* -1: 150000 or 0; -2: (gid_t)-1 */;
} breaks;

static void build(bld *b, const breaks *k)
{
        b->n = 0;
        raw(b, k->bad_magic ? "SHSPEC2\n" : "SHSPEC1\n", 8);
        str(b, k->hostname ? k->hostname : "sandbox");
        str(b, k->rootfs ? k->rootfs : "/r/.rootfs");
        str(b, "/r/workspace");
        str(b, "/r/tools");
        u32(b, k->n_entries >= 0 ? (uint32_t)k->n_entries : 2);
        u8(b, k->kind >= 0 ? (uint8_t)k->kind : 0);
        str(b, k->entry_name ? k->entry_name : "usr");
        str(b, "/usr");
        u8(b, 1);
        str(b, k->entry2_name ? k->entry2_name : "bin");
        str(b, "usr/bin");
        u64(b, k->tmp_size ? k->tmp_size : 1 << 20);
        u32(b, k->ptys_max ? k->ptys_max : 16);
        u32(b, 0x0100007fU); /* nameserver */
        u32(b, k->uid >= 0 ? (uint32_t)k->uid : k->uid == -2 ? 0xffffffffU : 200001);
        u32(b, k->gid >= 0 ? (uint32_t)k->gid : 200001);
        u32(b, k->nprocs >= 0 ? (uint32_t)k->nprocs : 1);
        u32(b, k->n_rlimits >= 0 ? (uint32_t)k->n_rlimits : 2);
        u32(b, k->rl_resource >= 0 ? (uint32_t)k->rl_resource : RLIMIT_NOFILE);
        u64(b, k->rl_swap ? 2048 : 1024);
        u64(b, k->rl_swap ? 1024 : 1024);
        u32(b, RLIMIT_CORE);
        u64(b, 0);
        u64(b, 0);
        u32(b, k->n_filter >= 0 ? (uint32_t)k->n_filter : 1);
        u16(b, 0x06);
        u8(b, 0);
        u8(b, 0);
        u32(b, 0x7fff0000);
        u32(b, k->volume_gid >= 0    ? (uint32_t)k->volume_gid
               : k->volume_gid == -2 ? 0xffffffffU
               : k->volume           ? 150000
                                     : 0);
        u32(b, k->volume_project);
        u32(b, k->n_volumes >= 0 ? (uint32_t)k->n_volumes : k->volume ? 1 : 0);
        if (k->volume) {
                u32(b, k->vflags);
                u64(b, k->vquota);
                str(b, k->vbase ? k->vbase : "/vol");
                str(b, k->vpath ? k->vpath : "data");
                str(b, k->vsub ? k->vsub : "");
                str(b, k->vtarget ? k->vtarget : "/mnt/data");
        }
        if (k->trailing)
                u8(b, 0);
}

/* Defaults first, then the test's own fields: overriding them is the point. */
#pragma GCC diagnostic ignored "-Woverride-init"
#define BREAKS(...)                                                                                \
        (&(breaks){.uid = -1,                                                                      \
                   .gid = -1,                                                                      \
                   .nprocs = -1,                                                                   \
                   .n_entries = -1,                                                                \
                   .kind = -1,                                                                     \
                   .n_rlimits = -1,                                                                \
                   .rl_resource = -1,                                                              \
                   .n_filter = -1,                                                                 \
                   .n_volumes = -1,                                                                \
                   .volume_gid = -1,                                                               \
                   __VA_ARGS__})

static int decode_bld(const bld *b, sh_worker_spec *out)
{
        /* An exact-size heap copy: ASan sees any read past the end. */
        unsigned char *copy = malloc(b->n ? b->n : 1);
        int r;

        ck_assert_ptr_nonnull(copy);
        memcpy(copy, b->b, b->n);
        r = sh_worker_spec_decode(copy, b->n, out);
        free(copy);
        return r;
}

static void assert_refused(const breaks *k, const char *what)
{
        sh_worker_spec *out = calloc(1, sizeof(*out));
        bld b;
        int r;

        build(&b, k);
        r = decode_bld(&b, out);
        ck_assert_msg(r == -EBADMSG, "%s: decode = %d, want -EBADMSG", what, r);
        ck_assert_ptr_null(out->seccomp.filter);
        free(out);
}

/* ---- round trip ------------------------------------------------------------------------ */

START_TEST(test_spec_round_trips)
{
        sh_worker_spec *s = sample(), *d = calloc(1, sizeof(*d));
        char *buf = NULL;
        size_t len = 0;
        int i;

        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), 0);
        ck_assert_int_eq(sh_worker_spec_decode(buf, len, d), 0);
        ck_assert_str_eq(d->hostname, s->hostname);
        ck_assert_str_eq(d->rootfs, s->rootfs);
        ck_assert_str_eq(d->workspace, s->workspace);
        ck_assert_str_eq(d->tools, s->tools);
        ck_assert_int_eq(d->n_entries, 2);
        ck_assert_str_eq(d->entries[0].name, "usr");
        ck_assert_str_eq(d->entries[0].src, "/usr");
        ck_assert(!d->entries[0].is_link);
        ck_assert_str_eq(d->entries[1].name, "bin");
        ck_assert_str_eq(d->entries[1].target, "usr/bin");
        ck_assert(d->entries[1].is_link);
        ck_assert_uint_eq(d->tmp_size, s->tmp_size);
        ck_assert_uint_eq(d->ptys_max, 16);
        ck_assert_uint_eq(d->nameserver, s->nameserver);
        ck_assert_uint_eq(d->uid, 200001);
        ck_assert_uint_eq(d->gid, 200001);
        ck_assert_int_eq(d->nprocs, 2);
        ck_assert_int_eq(d->n_rlimits, s->n_rlimits);
        for (i = 0; i < s->n_rlimits; i++) {
                ck_assert_uint_eq(d->rlimits[i].resource, s->rlimits[i].resource);
                ck_assert_uint_eq(d->rlimits[i].cur, s->rlimits[i].cur);
                ck_assert_uint_eq(d->rlimits[i].max, s->rlimits[i].max);
        }
        ck_assert_uint_eq(d->seccomp.len, 3);
        ck_assert_ptr_ne(d->seccomp.filter, filter);
        ck_assert_mem_eq(d->seccomp.filter, filter, sizeof(filter));
        sh_worker_spec_done(d);
        ck_assert_ptr_null(d->seccomp.filter);
        free(buf);
        free(d);
        free(s);
}
END_TEST

START_TEST(test_hand_made_spec_decodes)
{
        sh_worker_spec *d = calloc(1, sizeof(*d));
        bld b;

        build(&b, BREAKS());
        ck_assert_int_eq(decode_bld(&b, d), 0);
        ck_assert_str_eq(d->entries[1].target, "usr/bin");
        ck_assert_int_eq(d->n_rlimits, 2);
        ck_assert_uint_eq(d->seccomp.len, 1);
        sh_worker_spec_done(d);
        free(d);
}
END_TEST

START_TEST(test_limits_bound_every_resource_once)
{
        sh_worker_spec *s = sample();
        unsigned seen = 0;
        int i;

        ck_assert_int_eq(s->n_rlimits, RLIMIT_NLIMITS);
        for (i = 0; i < s->n_rlimits; i++) {
                ck_assert_uint_lt(s->rlimits[i].resource, RLIMIT_NLIMITS);
                ck_assert(!(seen & (1U << s->rlimits[i].resource)));
                seen |= 1U << s->rlimits[i].resource;
                ck_assert_uint_le(s->rlimits[i].cur, s->rlimits[i].max);
                if (s->rlimits[i].resource == RLIMIT_NOFILE)
                        ck_assert_uint_eq(s->rlimits[i].max, SH_WORKER_NOFILE);
                if (s->rlimits[i].resource == RLIMIT_NPROC)
                        ck_assert_uint_eq(s->rlimits[i].max, 512);
                if (s->rlimits[i].resource == RLIMIT_CORE)
                        ck_assert_uint_eq(s->rlimits[i].max, 0);
        }
        free(s);
}
END_TEST

/* ---- the decoder refuses ----------------------------------------------------------------- */

START_TEST(test_every_truncation_is_refused)
{
        sh_worker_spec *s = sample(), *d = calloc(1, sizeof(*d));
        char *buf = NULL;
        size_t len = 0, cut;

        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), 0);
        for (cut = 0; cut < len; cut++) {
                char *copy = malloc(cut ? cut : 1);

                memcpy(copy, buf, cut);
                ck_assert_msg(sh_worker_spec_decode(copy, cut, d) == -EBADMSG,
                              "a spec cut at %zu of %zu bytes was accepted", cut, len);
                ck_assert_ptr_null(d->seccomp.filter);
                free(copy);
        }
        free(buf);
        free(d);
        free(s);
}
END_TEST

START_TEST(test_trailing_bytes_and_bad_magic_are_refused)
{
        assert_refused(BREAKS(.trailing = true), "trailing byte");
        assert_refused(BREAKS(.bad_magic = true), "other magic");
}
END_TEST

START_TEST(test_strings_that_do_not_fit_or_hold_nul_are_refused)
{
        char big[300];

        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        assert_refused(BREAKS(.entry_name = big), "entry name longer than its field");
        big[64] = '\0';
        assert_refused(BREAKS(.hostname = big), "hostname of 64 bytes");
        assert_refused(BREAKS(.hostname = ""), "empty hostname");
        assert_refused(BREAKS(.hostname = "a b"), "hostname with a space");
        assert_refused(BREAKS(.rootfs = "relative/path"), "relative rootfs");
}
END_TEST

START_TEST(test_string_length_beyond_the_message_is_refused)
{
        sh_worker_spec *d = calloc(1, sizeof(*d));
        bld b;

        build(&b, BREAKS());
        /* the hostname's length field, right after the magic */
        memcpy(b.b + 8, &(uint32_t){0xffffffffU}, 4);
        ck_assert_int_eq(decode_bld(&b, d), -EBADMSG);
        memcpy(b.b + 8, &(uint32_t){40}, 4);
        ck_assert_int_eq(decode_bld(&b, d), -EBADMSG);
        /* a NUL inside: "sandbox" -> "sand\0ox" */
        memcpy(b.b + 8, &(uint32_t){7}, 4);
        b.b[16] = '\0';
        ck_assert_int_eq(decode_bld(&b, d), -EBADMSG);
        free(d);
}
END_TEST

START_TEST(test_entry_names_must_be_single_new_components)
{
        assert_refused(BREAKS(.entry_name = ".."), "entry ..");
        assert_refused(BREAKS(.entry_name = "."), "entry .");
        assert_refused(BREAKS(.entry_name = "a/b"), "entry with a slash");
        assert_refused(BREAKS(.entry_name = ""), "empty entry name");
        assert_refused(BREAKS(.entry2_name = "usr"), "the same entry twice");
        assert_refused(BREAKS(.kind = 2), "unknown entry kind");
        assert_refused(BREAKS(.n_entries = SH_WORKER_MAX_ENTRIES + 1), "too many entries");
        assert_refused(BREAKS(.n_entries = 3), "more entries than sent");
}
END_TEST

START_TEST(test_root_ids_are_refused)
{
        assert_refused(BREAKS(.uid = 0), "uid 0");
        assert_refused(BREAKS(.gid = 0), "gid 0");
        assert_refused(BREAKS(.uid = -2), "uid -1");
}
END_TEST

START_TEST(test_counts_and_values_out_of_range_are_refused)
{
        assert_refused(BREAKS(.nprocs = SH_EXEC_MAX_PROCS_FDS + 1), "too many procs fds");
        assert_refused(BREAKS(.n_rlimits = SH_WORKER_MAX_RLIMITS + 1), "too many limits");
        assert_refused(BREAKS(.n_rlimits = 3), "more limits than sent");
        assert_refused(BREAKS(.rl_resource = RLIMIT_NLIMITS), "unknown resource");
        assert_refused(BREAKS(.rl_resource = RLIMIT_CORE), "one resource twice");
        assert_refused(BREAKS(.rl_swap = true), "soft limit above hard");
        assert_refused(BREAKS(.n_filter = 0), "empty filter");
        assert_refused(BREAKS(.n_filter = SH_WORKER_FILTER_MAX + 1), "filter too long");
        assert_refused(BREAKS(.n_filter = 2), "more instructions than sent");
        assert_refused(BREAKS(.ptys_max = 70000), "ptys_max too large");
}
END_TEST

/* 20,000 copies of s's encoding, 1 to 4 random bytes changed in each (xorshift from `seed`):
 * each decodes or is refused, never read past (ASan), and what decodes holds to the
 * decoder's rules. How many decoded. */
static int corrupt_and_decode(const sh_worker_spec *s, uint32_t seed)
{
        sh_worker_spec *d = calloc(1, sizeof(*d));
        char *buf = NULL;
        size_t len = 0;
        uint32_t x = seed;
        int round, accepted = 0;

        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), 0);
        for (round = 0; round < 20000; round++) {
                char *copy = malloc(len);
                int flips = 1 + round % 4, r;

                memcpy(copy, buf, len);
                while (flips--) {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        copy[x % len] = (char)(x >> 8);
                }
                r = sh_worker_spec_decode(copy, len, d);
                ck_assert(r == 0 || r == -EBADMSG);
                if (r == 0) {
                        accepted++;
                        ck_assert_uint_lt(strlen(d->hostname), sizeof(d->hostname));
                        ck_assert_int_le(d->n_entries, SH_WORKER_MAX_ENTRIES);
                        ck_assert_int_le(d->n_rlimits, SH_WORKER_MAX_RLIMITS);
                        ck_assert_uint_ne(d->uid, 0);
                        ck_assert_uint_ne(d->gid, 0);
                        ck_assert_int_le(d->n_volumes, SH_WORKER_VOLUMES_MAX);
                        for (int i = 0; i < d->n_volumes; i++)
                                ck_assert(sh_worker_volume_valid(&d->volumes[i]));
                        sh_worker_spec_done(d);
                } else {
                        ck_assert_ptr_null(d->seccomp.filter);
                        ck_assert_ptr_null(d->volumes);
                }
                free(copy);
        }
        free(buf);
        free(d);
        return accepted;
}

START_TEST(test_random_corruption_never_reads_past_the_message)
{
        sh_worker_spec *s = sample();

        /* flips inside the path bytes stay valid specs: the loop did reach the end */
        ck_assert_int_gt(corrupt_and_decode(s, 2463534242U), 0);
        free(s);
}
END_TEST

/* ---- the encoder refuses what the decoder would ------------------------------------------ */

START_TEST(test_encoder_refuses_unencodable_specs)
{
        sh_worker_spec *s = sample();
        char *buf = NULL;
        size_t len = 0;

        memset(s->hostname, 'h', sizeof(s->hostname)); /* no NUL in the field */
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -ENAMETOOLONG);
        snprintf(s->hostname, sizeof(s->hostname), "sandbox");
        s->n_entries = SH_WORKER_MAX_ENTRIES + 1;
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -EINVAL);
        s->n_entries = 2;
        s->seccomp.filter = NULL;
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -EINVAL);
        ck_assert_ptr_null(buf);
        free(s);
}
END_TEST

/* ---- an overlay root --------------------------------------------------------------------- */

/* The sample with an overlay root of n layers ("<64 hex>/root", the store's names) instead of
 * its entries. */
static sh_worker_spec *overlay_sample(int n)
{
        sh_worker_spec *s = sample();

        s->n_entries = 0;
        snprintf(s->layers, sizeof(s->layers), "/var/lib/sh/images/layers/sha256");
        snprintf(s->upper, sizeof(s->upper), "/var/lib/sh/.sandboxes/1/disk/root/upper");
        snprintf(s->work, sizeof(s->work), "/var/lib/sh/.sandboxes/1/disk/root/work");
        for (int i = 0; i < n; i++)
                snprintf(s->lowers[i], sizeof(s->lowers[i]), "%064x/root", i);
        s->n_lowers = n;
        return s;
}

/* A spec without entries, then an overlay part written by hand: `count` as sent, the lowers
 * given. The decoder's answer. */
static int decode_overlay_part(uint32_t count, const char *layers, const char *const *lowers,
                               size_t n, bool entries)
{
        sh_worker_spec *s = sample(), *d = calloc(1, sizeof(*d));
        char *buf = NULL;
        size_t len = 0;
        bld *b = calloc(1, sizeof(*b));
        int r;

        if (!entries)
                s->n_entries = 0;
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), 0);
        raw(b, buf, len);
        u32(b, count);
        str(b, layers);
        str(b, "/u/upper");
        str(b, "/u/work");
        for (size_t i = 0; i < n; i++)
                str(b, lowers[i]);
        r = decode_bld(b, d);
        if (r == 0)
                sh_worker_spec_done(d);
        free(buf);
        free(b);
        free(d);
        free(s);
        return r;
}

START_TEST(test_overlay_plan_round_trips)
{
        sh_worker_spec *s = overlay_sample(SH_WORKER_LOWERS_MAX), *d = calloc(1, sizeof(*d));
        char *buf = NULL;
        size_t len = 0;

        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), 0);
        ck_assert_int_eq(sh_worker_spec_decode(buf, len, d), 0);
        ck_assert_int_eq(d->n_entries, 0);
        ck_assert_int_eq(d->n_lowers, SH_WORKER_LOWERS_MAX);
        ck_assert_str_eq(d->layers, s->layers);
        ck_assert_str_eq(d->upper, s->upper);
        ck_assert_str_eq(d->work, s->work);
        for (int i = 0; i < SH_WORKER_LOWERS_MAX; i++)
                ck_assert_str_eq(d->lowers[i], s->lowers[i]);
        ck_assert_uint_eq(d->seccomp.len, 3);
        sh_worker_spec_done(d);
        free(buf);
        free(d);
        free(s);
}
END_TEST

START_TEST(test_a_spec_without_overlay_decodes_none)
{
        sh_worker_spec *s = sample(), *d = calloc(1, sizeof(*d));
        char *buf = NULL;
        size_t len = 0;

        d->n_lowers = 7; /* whatever was there */
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), 0);
        ck_assert_int_eq(sh_worker_spec_decode(buf, len, d), 0);
        ck_assert_int_eq(d->n_lowers, 0);
        sh_worker_spec_done(d);
        free(buf);
        free(d);
        free(s);
}
END_TEST

START_TEST(test_every_truncation_of_an_overlay_plan_is_refused)
{
        sh_worker_spec *s = overlay_sample(3), *base = sample(), *d = calloc(1, sizeof(*d));
        char *buf = NULL, *bbuf = NULL;
        size_t len = 0, blen = 0;

        base->n_entries = 0;
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), 0);
        ck_assert_int_eq(sh_worker_spec_encode(base, &bbuf, &blen), 0);
        /* Cut inside the overlay part: never a spec with part of a plan. */
        for (size_t cut = blen + 1; cut < len; cut++) {
                char *copy = malloc(cut);

                memcpy(copy, buf, cut);
                ck_assert_msg(sh_worker_spec_decode(copy, cut, d) == -EBADMSG,
                              "a plan cut at %zu of %zu bytes was accepted", cut, len);
                free(copy);
        }
        free(buf);
        free(bbuf);
        free(base);
        free(d);
        free(s);
}
END_TEST

START_TEST(test_a_hand_made_overlay_part_decodes)
{
        const char *lowers[] = {"abc/root", "d-e_f.1/root"};

        ck_assert_int_eq(decode_overlay_part(2, "/layers", lowers, 2, false), 0);
}
END_TEST

START_TEST(test_too_many_lowers_are_refused)
{
        static const char *lowers[SH_WORKER_LOWERS_MAX + 1];
        sh_worker_spec *s = overlay_sample(1);
        char *buf = NULL;
        size_t len = 0;

        for (size_t i = 0; i < ARRAY_SIZE(lowers); i++)
                lowers[i] = "a/root";
        ck_assert_int_eq(decode_overlay_part(SH_WORKER_LOWERS_MAX + 1, "/l", lowers,
                                             ARRAY_SIZE(lowers), false),
                         -EBADMSG);
        ck_assert_int_eq(decode_overlay_part(0, "/l", lowers, 0, false), -EBADMSG);
        ck_assert_int_eq(decode_overlay_part(3, "/l", lowers, 2, false), -EBADMSG);
        s->n_lowers = SH_WORKER_LOWERS_MAX + 1;
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -EINVAL);
        ck_assert_ptr_null(buf);
        free(s);
}
END_TEST

START_TEST(test_lowers_that_leave_the_layers_dir_are_refused)
{
        static const char *const bad[] = {
                "..",       "../root",       "a/../../b", "a/..",     "/abs/root",
                ".",        "./a",           "a//root",   "a/root/",  "",
                "a:b/root", "a,upperdir=/x", "a\\,b",     "a b/root", "a=b",
        };
        sh_worker_spec *s = overlay_sample(1);
        char *buf = NULL;
        size_t len = 0;

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                const char *one[] = {bad[i]};

                ck_assert_msg(!sh_worker_lower_valid(bad[i]), "'%s' taken", bad[i]);
                ck_assert_msg(decode_overlay_part(1, "/l", one, 1, false) == -EBADMSG,
                              "'%s' decoded", bad[i]);
                snprintf(s->lowers[0], sizeof(s->lowers[0]), "%s", bad[i]);
                ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -EINVAL);
        }
        ck_assert(sh_worker_lower_valid("..a/root"));
        ck_assert(sh_worker_lower_valid("a.."));
        free(s);
}
END_TEST

START_TEST(test_a_lower_too_long_is_refused)
{
        char name[SH_LOWER_NAME_MAX + 1];
        const char *one[] = {name};

        memset(name, 'a', sizeof(name));
        name[SH_LOWER_NAME_MAX - 1] = '\0'; /* fits: 127 bytes */
        ck_assert(sh_worker_lower_valid(name));
        ck_assert_int_eq(decode_overlay_part(1, "/l", one, 1, false), 0);
        name[SH_LOWER_NAME_MAX - 1] = 'a';
        name[SH_LOWER_NAME_MAX] = '\0'; /* 128 bytes: no room for the NUL */
        ck_assert(!sh_worker_lower_valid(name));
        ck_assert_int_eq(decode_overlay_part(1, "/l", one, 1, false), -EBADMSG);
}
END_TEST

START_TEST(test_relative_dirs_and_entries_beside_an_overlay_are_refused)
{
        const char *one[] = {"a/root"};
        sh_worker_spec *s = overlay_sample(1);
        char *buf = NULL;
        size_t len = 0;

        ck_assert_int_eq(decode_overlay_part(1, "layers", one, 1, false), -EBADMSG);
        ck_assert_int_eq(decode_overlay_part(1, "/layers", one, 1, true), -EBADMSG);
        s->n_entries = 1;
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -EINVAL);
        s->n_entries = 0;
        s->upper[0] = 'u';
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -EINVAL);
        ck_assert_ptr_null(buf);
        free(s);
}
END_TEST

/* ---- volumes ----------------------------------------------------------------------------- */

static sh_volume_spec volumes[2];

/* The sample with two volumes: a host directory read-only with a subPath, a named one. */
static sh_worker_spec *volume_sample(void)
{
        sh_worker_spec *s = sample();

        memset(volumes, 0, sizeof(volumes));
        snprintf(volumes[0].base, sizeof(volumes[0].base), "/data");
        snprintf(volumes[0].path, sizeof(volumes[0].path), "proj/x");
        snprintf(volumes[0].sub, sizeof(volumes[0].sub), "a/b");
        snprintf(volumes[0].target, sizeof(volumes[0].target), "/mnt/x");
        volumes[0].flags = SH_VOL_RDONLY;
        snprintf(volumes[1].base, sizeof(volumes[1].base), "/var/lib/sh/volumes");
        snprintf(volumes[1].path, sizeof(volumes[1].path), "claim-1");
        snprintf(volumes[1].target, sizeof(volumes[1].target), "/workspace/c");
        volumes[1].flags = SH_VOL_CREATE | SH_VOL_NAMED;
        s->volumes = volumes;
        s->n_volumes = 2;
        s->volume_gid = 199999;
        return s;
}

START_TEST(test_volumes_round_trip)
{
        sh_worker_spec *s = volume_sample(), *d = calloc(1, sizeof(*d));
        char *buf = NULL;
        size_t len = 0;

        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), 0);
        ck_assert_int_eq(sh_worker_spec_decode(buf, len, d), 0);
        ck_assert_int_eq(d->n_volumes, 2);
        ck_assert_ptr_nonnull(d->volumes);
        ck_assert_ptr_ne(d->volumes, volumes);
        ck_assert_uint_eq(d->volume_gid, 199999);
        for (int i = 0; i < 2; i++) {
                ck_assert_str_eq(d->volumes[i].base, volumes[i].base);
                ck_assert_str_eq(d->volumes[i].path, volumes[i].path);
                ck_assert_str_eq(d->volumes[i].sub, volumes[i].sub);
                ck_assert_str_eq(d->volumes[i].target, volumes[i].target);
                ck_assert_uint_eq(d->volumes[i].flags, volumes[i].flags);
        }
        sh_worker_spec_done(d);
        ck_assert_ptr_null(d->volumes);
        ck_assert_int_eq(d->n_volumes, 0);
        free(buf);
        free(d);
        free(s);
}
END_TEST

START_TEST(test_a_spec_without_volumes_decodes_none)
{
        sh_worker_spec *s = sample(), *d = calloc(1, sizeof(*d));
        char *buf = NULL;
        size_t len = 0;

        d->n_volumes = 5; /* whatever was there */
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), 0);
        ck_assert_int_eq(sh_worker_spec_decode(buf, len, d), 0);
        ck_assert_int_eq(d->n_volumes, 0);
        ck_assert_ptr_null(d->volumes);
        sh_worker_spec_done(d);
        free(buf);
        free(d);
        free(s);
}
END_TEST

START_TEST(test_every_truncation_of_volumes_is_refused)
{
        sh_worker_spec *s = volume_sample(), *d = calloc(1, sizeof(*d));
        char *buf = NULL;
        size_t len = 0;

        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), 0);
        for (size_t cut = 0; cut < len; cut++) {
                char *copy = malloc(cut ? cut : 1);

                memcpy(copy, buf, cut);
                ck_assert_msg(sh_worker_spec_decode(copy, cut, d) == -EBADMSG,
                              "a spec cut at %zu of %zu bytes was accepted", cut, len);
                ck_assert_ptr_null(d->volumes);
                free(copy);
        }
        free(buf);
        free(d);
        free(s);
}
END_TEST

START_TEST(test_a_hand_made_volume_decodes)
{
        sh_worker_spec *d = calloc(1, sizeof(*d));
        bld b;

        build(&b, BREAKS(.volume = true, .vpath = ".", .vsub = "x/y", .vflags = SH_VOL_RDONLY));
        ck_assert_int_eq(decode_bld(&b, d), 0);
        ck_assert_int_eq(d->n_volumes, 1);
        ck_assert_str_eq(d->volumes[0].base, "/vol");
        ck_assert_str_eq(d->volumes[0].path, ".");
        ck_assert_str_eq(d->volumes[0].sub, "x/y");
        ck_assert_str_eq(d->volumes[0].target, "/mnt/data");
        ck_assert_uint_eq(d->volumes[0].flags, SH_VOL_RDONLY);
        ck_assert_uint_eq(d->volume_gid, 150000);
        sh_worker_spec_done(d);
        free(d);
}
END_TEST

START_TEST(test_a_named_volume_quota_round_trips)
{
        sh_worker_spec *s = volume_sample(), *d = calloc(1, sizeof(*d));
        char *buf = NULL;
        size_t len = 0;

        volumes[1].quota = 2ULL << 20;
        s->volume_project = 3000000512U;
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), 0);
        ck_assert_int_eq(sh_worker_spec_decode(buf, len, d), 0);
        ck_assert_uint_eq(d->volumes[0].quota, 0);
        ck_assert_uint_eq(d->volumes[1].quota, 2ULL << 20);
        ck_assert_uint_eq(d->volume_project, 3000000512U);
        sh_worker_spec_done(d);
        free(buf);
        free(d);
        free(s);
}
END_TEST

START_TEST(test_a_quota_without_a_made_named_volume_is_refused)
{
        static const uint32_t flags[] = {0, SH_VOL_NAMED, SH_VOL_CREATE, SH_VOL_RDONLY};
        sh_worker_spec *d = calloc(1, sizeof(*d));
        bld b;

        for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
                build(&b, BREAKS(.volume = true, .vflags = flags[i], .vquota = 4096,
                                 .volume_project = 5000));
                ck_assert_int_eq(decode_bld(&b, d), -EBADMSG);
        }
        build(&b, BREAKS(.volume = true, .vflags = SH_VOL_NAMED | SH_VOL_CREATE, .vquota = 4096,
                         .volume_project = 5000));
        ck_assert_int_eq(decode_bld(&b, d), 0);
        sh_worker_spec_done(d);
        free(d);
}
END_TEST

START_TEST(test_a_quota_needs_a_project_range_below_the_last_id)
{
        static const uint32_t bad[] = {0, UINT32_MAX, UINT32_MAX - SH_VOLQUOTA_IDS + 1};
        sh_worker_spec *d = calloc(1, sizeof(*d)), *s = volume_sample();
        char *buf = NULL;
        size_t len = 0;
        bld b;

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                build(&b, BREAKS(.volume = true, .vflags = SH_VOL_NAMED | SH_VOL_CREATE,
                                 .vquota = 4096, .volume_project = bad[i]));
                ck_assert_int_eq(decode_bld(&b, d), -EBADMSG);
        }
        build(&b, BREAKS(.volume = true, .vflags = SH_VOL_NAMED | SH_VOL_CREATE, .vquota = 4096,
                         .volume_project = UINT32_MAX - SH_VOLQUOTA_IDS));
        ck_assert_int_eq(decode_bld(&b, d), 0);
        sh_worker_spec_done(d);
        volumes[1].quota = 1; /* and the encoder will not send one without a range */
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -EINVAL);
        free(d);
        free(s);
}
END_TEST

START_TEST(test_volume_paths_that_leave_their_base_are_refused)
{
        static const char *const bad_rel[] = {"..",   "../x", "a/../b", "a/..",  "/abs", "",
                                              "a//b", "a/",   "./a",    "a/./b", "."};
        static const char *const bad_target[] = {"",    "/",   "rel", "/a/../b", "/a/.",
                                                 "/..", "//a", "/a/", "/a//b",   "/./a"};

        for (size_t i = 0; i < ARRAY_SIZE(bad_rel); i++) {
                if (!STREQ(bad_rel[i], ".")) /* "." is the base itself */
                        assert_refused(BREAKS(.volume = true, .vpath = bad_rel[i]), bad_rel[i]);
                if (bad_rel[i][0]) /* "": no subPath */
                        assert_refused(BREAKS(.volume = true, .vsub = bad_rel[i]), bad_rel[i]);
        }
        for (size_t i = 0; i < ARRAY_SIZE(bad_target); i++)
                assert_refused(BREAKS(.volume = true, .vtarget = bad_target[i]), bad_target[i]);
        assert_refused(BREAKS(.volume = true, .vbase = "vol"), "relative base");
        assert_refused(BREAKS(.volume = true, .vbase = ""), "empty base");
}
END_TEST

START_TEST(test_volume_counts_flags_and_group_are_checked)
{
        assert_refused(BREAKS(.volume = true, .n_volumes = SH_WORKER_VOLUMES_MAX + 1),
                       "too many volumes");
        assert_refused(BREAKS(.volume = true, .n_volumes = 2), "more volumes than sent");
        assert_refused(BREAKS(.n_volumes = SH_WORKER_VOLUMES_MAX), "volumes counted, none sent");
        assert_refused(BREAKS(.volume = true, .vflags = 1u << 3), "an unknown flag");
        assert_refused(BREAKS(.volume = true, .vflags = SH_VOL_CREATE, .vpath = "a/b"),
                       "a claim of two components");
        assert_refused(BREAKS(.volume = true, .vflags = SH_VOL_CREATE, .vpath = "."),
                       "the base itself as a claim");
        assert_refused(BREAKS(.volume = true, .volume_gid = 0), "volumes without a group");
        assert_refused(BREAKS(.volume = true, .volume_gid = 200001), "the sandbox's gid");
        assert_refused(BREAKS(.volume = true, .volume_gid = -2), "group -1");
        assert_refused(BREAKS(.volume_gid = -2), "group -1 without volumes");
        assert_refused(BREAKS(.volume = true, .trailing = true), "trailing byte after volumes");
}
END_TEST

START_TEST(test_a_claim_and_a_group_decode)
{
        sh_worker_spec *d = calloc(1, sizeof(*d));
        bld b;

        build(&b, BREAKS(.volume = true, .vflags = SH_VOL_CREATE | SH_VOL_NAMED, .vpath = "c-1"));
        ck_assert_int_eq(decode_bld(&b, d), 0);
        ck_assert_uint_eq(d->volumes[0].flags, SH_VOL_CREATE | SH_VOL_NAMED);
        sh_worker_spec_done(d);
        /* a group without volumes: nobody gets it, but it is no error */
        build(&b, BREAKS(.volume_gid = 150000));
        ck_assert_int_eq(decode_bld(&b, d), 0);
        ck_assert_int_eq(d->n_volumes, 0);
        sh_worker_spec_done(d);
        free(d);
}
END_TEST

START_TEST(test_encoder_refuses_volumes_the_decoder_would)
{
        sh_worker_spec *s = volume_sample();
        char *buf = NULL;
        size_t len = 0;

        snprintf(volumes[0].sub, sizeof(volumes[0].sub), "../etc");
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -EINVAL);
        ck_assert(!sh_worker_volume_valid(&volumes[0]));
        volumes[0].sub[0] = '\0';
        ck_assert(sh_worker_volume_valid(&volumes[0]));
        memset(volumes[0].target, 'a', sizeof(volumes[0].target)); /* no NUL in the field */
        volumes[0].target[0] = '/';
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -EINVAL);
        snprintf(volumes[0].target, sizeof(volumes[0].target), "/mnt/x");
        s->n_volumes = SH_WORKER_VOLUMES_MAX + 1;
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -EINVAL);
        s->n_volumes = 2;
        s->volume_gid = 0;
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -EINVAL);
        s->volume_gid = 199999;
        s->volumes = NULL;
        ck_assert_int_eq(sh_worker_spec_encode(s, &buf, &len), -EINVAL);
        ck_assert_ptr_null(buf);
        free(s);
}
END_TEST

START_TEST(test_random_corruption_of_volumes_never_reads_past_the_message)
{
        sh_worker_spec *s = volume_sample();

        ck_assert_int_gt(corrupt_and_decode(s, 88172645U), 0);
        free(s);
}
END_TEST

/* ---- exec requests ----------------------------------------------------------------------- */

START_TEST(test_exec_request_round_trips)
{
        char *argv[] = {"sh", "-c", "echo hi", NULL}, *envp[] = {"A=1", NULL};
        char *buf = NULL, **av = NULL, **ev = NULL;
        size_t len = 0;
        uint32_t id = 0, flags = 9;

        ck_assert_int_eq(sh_proto_encode_exec(7, 0, argv, envp, &buf, &len), 0);
        ck_assert_int_eq(sh_proto_decode_exec(buf, len, &id, &flags, &av, &ev), 0);
        ck_assert_uint_eq(id, 7);
        ck_assert_uint_eq(flags, 0);
        ck_assert_str_eq(av[2], "echo hi");
        ck_assert_ptr_null(av[3]);
        ck_assert_str_eq(ev[0], "A=1");
        ck_assert_ptr_null(ev[1]);
        free(av);
        free(ev);
        /* cut before the last string's NUL */
        ck_assert_int_eq(sh_proto_decode_exec(buf, len - 1, &id, &flags, &av, &ev), -EBADMSG);
        free(buf);
}
END_TEST

START_TEST(test_exec_request_carries_which_extra_fds_it_has)
{
        char *argv[] = {"python3", NULL}, *envp[] = {NULL};
        const uint32_t each[] = {SH_PROTO_EXEC_INPUT, SH_PROTO_EXEC_FRAMES,
                                 SH_PROTO_EXEC_INPUT | SH_PROTO_EXEC_FRAMES};
        char *buf = NULL, **av = NULL, **ev = NULL;
        size_t len = 0;
        uint32_t id = 0, flags = 0;

        for (size_t i = 0; i < ARRAY_SIZE(each); i++) {
                ck_assert_int_eq(sh_proto_encode_exec(3, each[i], argv, envp, &buf, &len), 0);
                ck_assert_int_eq(sh_proto_decode_exec(buf, len, &id, &flags, &av, &ev), 0);
                ck_assert_uint_eq(flags, each[i]);
                ck_assert_str_eq(av[0], "python3");
                free(av);
                free(ev);
                free(buf);
        }
        ck_assert_int_eq(sh_proto_exec_stdio_fds(0), 2);
        ck_assert_int_eq(sh_proto_exec_stdio_fds(SH_PROTO_EXEC_INPUT), 3);
        ck_assert_int_eq(sh_proto_exec_stdio_fds(SH_PROTO_EXEC_FRAMES), 3);
        ck_assert_int_eq(sh_proto_exec_stdio_fds(SH_PROTO_EXEC_SHELL), 2); /* no fd of its own */
        ck_assert_int_eq(sh_proto_exec_stdio_fds(SH_PROTO_EXEC_FLAGS), 4);
        /* every fd of the most an EXEC carries fits one message */
        ck_assert_int_ge(SH_PROTO_EXEC_FDS,
                         sh_proto_exec_stdio_fds(SH_PROTO_EXEC_FLAGS) + SH_EXEC_MAX_PROCS_FDS);
}
END_TEST

START_TEST(test_exec_request_with_an_unknown_flag_is_refused)
{
        char *argv[] = {"sh", NULL}, *envp[] = {NULL};
        char *buf = NULL, **av = NULL, **ev = NULL;
        size_t len = 0;
        uint32_t id = 0, flags = 0, bad = SH_PROTO_EXEC_SHELL << 1;

        ck_assert_int_eq(sh_proto_encode_exec(3, bad, argv, envp, &buf, &len), -EINVAL);
        ck_assert_int_eq(sh_proto_encode_exec(3, SH_PROTO_EXEC_INPUT, argv, envp, &buf, &len), 0);
        /* the flags are the header's fifth u32 */
        memcpy(buf + 4 * sizeof(uint32_t), &bad, sizeof(bad));
        ck_assert_int_eq(sh_proto_decode_exec(buf, len, &id, &flags, &av, &ev), -EBADMSG);
        bad = UINT32_MAX;
        memcpy(buf + 4 * sizeof(uint32_t), &bad, sizeof(bad));
        ck_assert_int_eq(sh_proto_decode_exec(buf, len, &id, &flags, &av, &ev), -EBADMSG);
        /* a header cut before its flags */
        ck_assert_int_eq(sh_proto_decode_exec(buf, 4 * sizeof(uint32_t), &id, &flags, &av, &ev),
                         -EBADMSG);
        ck_assert_uint_eq(flags, 0); /* untouched */
        free(buf);
}
END_TEST

/* ---- control messages ------------------------------------------------------------------ */

START_TEST(test_messages_round_trip)
{
        sh_msg m = sh_proto_msg(SH_MSG_EXITED, 9, 256, -3), got = {0};

        ck_assert_int_eq(sh_proto_decode_msg(&m, sizeof(m), &got), 0);
        ck_assert_uint_eq(got.type, SH_MSG_EXITED);
        ck_assert_uint_eq(got.id, 9);
        ck_assert_int_eq(got.a, 256);
        ck_assert_int_eq(got.b, -3);
        ck_assert_uint_eq(sh_proto_msg_type(&m, sizeof(m)), SH_MSG_EXITED);
}
END_TEST

START_TEST(test_volume_created_is_a_message)
{
        sh_msg m = sh_proto_msg(SH_MSG_VOLUME_CREATED, 0, 3, 0), got = {0};

        ck_assert_int_eq(sh_proto_decode_msg(&m, sizeof(m), &got), 0);
        ck_assert_uint_eq(got.type, SH_MSG_VOLUME_CREATED);
        ck_assert_int_eq(got.a, 3);
        m.type = SH_MSG_VOLUME_CREATED + 1;
        ck_assert_int_eq(sh_proto_decode_msg(&m, sizeof(m), &got), -EBADMSG);
}
END_TEST

START_TEST(test_messages_of_a_wrong_size_or_type_are_refused)
{
        char big[sizeof(sh_msg) + 1] = {0};
        sh_msg m = sh_proto_msg(SH_MSG_READY, 0, 0, 0), got = sh_proto_msg(77, 1, 2, 3);

        ck_assert_int_eq(sh_proto_decode_msg(&m, sizeof(m) - 1, &got), -EBADMSG);
        memcpy(big, &m, sizeof(m));
        ck_assert_int_eq(sh_proto_decode_msg(big, sizeof(big), &got), -EBADMSG);
        /* EXEC carries a payload: never a sh_msg; 0 and unknown numbers are nobody's */
        m.type = SH_MSG_EXEC;
        ck_assert_int_eq(sh_proto_decode_msg(&m, sizeof(m), &got), -EBADMSG);
        m.type = 0;
        ck_assert_int_eq(sh_proto_decode_msg(&m, sizeof(m), &got), -EBADMSG);
        m.type = 1000;
        ck_assert_int_eq(sh_proto_decode_msg(&m, sizeof(m), &got), -EBADMSG);
        /* a refused message leaves *ret alone */
        ck_assert_uint_eq(got.type, 77);
        ck_assert_uint_eq(sh_proto_msg_type(&m, 3), 0);
}
END_TEST

START_TEST(test_fds_travel_in_one_record)
{
        int fds[SH_PROTO_EXEC_FDS] = {10, 11, 12, 13, 14, 15, 16, 17}, got[SH_PROTO_EXEC_FDS] = {0};
        sh_proto_cmsg cbuf;
        struct msghdr mh = {0};

        ck_assert_int_eq(sh_proto_put_fds(&mh, &cbuf, 3, fds), 0);
        ck_assert_int_eq(sh_proto_take_fds(&mh, got), 3);
        ck_assert_int_eq(got[0], 10);
        ck_assert_int_eq(got[2], 12);
        ck_assert_int_eq(sh_proto_put_fds(&mh, &cbuf, SH_PROTO_EXEC_FDS, fds), 0);
        ck_assert_int_eq(sh_proto_take_fds(&mh, got), SH_PROTO_EXEC_FDS);
        ck_assert_int_eq(got[SH_PROTO_EXEC_FDS - 1], 10 + SH_PROTO_EXEC_FDS - 1);
        ck_assert_int_eq(sh_proto_put_fds(&mh, &cbuf, SH_PROTO_EXEC_FDS + 1, fds), -EINVAL);
        ck_assert_int_eq(sh_proto_put_fds(&mh, &cbuf, 0, fds), -EINVAL);
}
END_TEST

START_TEST(test_records_that_are_not_fds_are_ignored)
{
        sh_proto_cmsg cbuf;
        struct msghdr mh = {0};
        struct cmsghdr *c;
        int got[SH_PROTO_EXEC_FDS], fd = 5;

        ck_assert_int_eq(sh_proto_put_fds(&mh, &cbuf, 1, &fd), 0);
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_type = SCM_CREDENTIALS;
        ck_assert_int_eq(sh_proto_take_fds(&mh, got), 0);
        /* no control data at all */
        mh.msg_control = NULL;
        mh.msg_controllen = 0;
        ck_assert_int_eq(sh_proto_take_fds(&mh, got), 0);
        /* an empty buffer to receive into holds exactly the exec's fds */
        sh_proto_recv_fds(&mh, &cbuf);
        ck_assert_uint_eq(mh.msg_controllen, CMSG_SPACE(sizeof(int) * SH_PROTO_EXEC_FDS));
}
END_TEST

/* A record whose length claims more fds than the control buffer holds (glibc before 2.37 hands
 * such a last record out: CMSG_NXTHDR checks that its header fits, not its data): only the fds
 * inside the buffer are taken, nothing is read past it (found by tests/fuzz/fuzz_proto.c). */
START_TEST(test_a_record_longer_than_the_buffer_gives_only_the_fds_inside_it)
{
        size_t len = sizeof(((sh_proto_cmsg *)0)->buf); /* 48: a record of 4 fds, a header */
        unsigned char *buf = calloc(1, len);            /* exactly: ASan sees a read past it */
        struct msghdr mh = {.msg_control = buf, .msg_controllen = len};
        struct cmsghdr first = {.cmsg_len = CMSG_LEN(4 * sizeof(int)),
                                .cmsg_level = SOL_SOCKET,
                                .cmsg_type = SCM_RIGHTS};
        struct cmsghdr h = {.cmsg_len = CMSG_LEN(2 * sizeof(int)),
                            .cmsg_level = SOL_SOCKET,
                            .cmsg_type = SCM_RIGHTS};
        int fds[4] = {5, 6, 7, 8}, got[SH_PROTO_EXEC_FDS] = {0};

        ck_assert_ptr_nonnull(buf);
        ck_assert_uint_eq(len, CMSG_SPACE(4 * sizeof(int)) + sizeof(h));
        memcpy(buf, &first, sizeof(first));
        memcpy(buf + CMSG_LEN(0), fds, sizeof(fds));
        /* the second record's header fills the buffer; its 2 fds would lie past it */
        memcpy(buf + CMSG_SPACE(4 * sizeof(int)), &h, sizeof(h));
        ck_assert_int_eq(sh_proto_take_fds(&mh, got), 4);
        ck_assert_int_eq(got[0], 5);
        ck_assert_int_eq(got[3], 8);
        free(buf);
}
END_TEST

START_TEST(test_every_step_has_a_name)
{
        for (int step = SH_STEP_CGROUP_JOIN; step <= SH_STEP_VOLUME_QUOTA; step++)
                ck_assert_str_ne(sh_worker_step_name(step), "?");
        ck_assert_str_eq(sh_worker_step_name(SH_STEP_PIVOT), "pivot_root");
        ck_assert_str_eq(sh_worker_step_name(SH_STEP_VOLUME_SOURCE), "volume source");
        ck_assert_str_eq(sh_worker_step_name(SH_STEP_VOLUME_TARGET), "volume target");
        /* numbers from the other side that no step has */
        ck_assert_str_eq(sh_worker_step_name(0), "?");
        ck_assert_str_eq(sh_worker_step_name(-1), "?");
        ck_assert_str_eq(sh_worker_step_name(SH_STEP_VOLUME_QUOTA), "volume quota");
        ck_assert_str_eq(sh_worker_step_name(SH_STEP_VOLUME_QUOTA + 1), "?");
        ck_assert_str_eq(sh_worker_step_name(1 << 30), "?");
}
END_TEST

static Suite *proto_suite(void)
{
        Suite *s = suite_create("proto");
        TCase *tc = tcase_create("spec");

        tcase_add_test(tc, test_spec_round_trips);
        tcase_add_test(tc, test_hand_made_spec_decodes);
        tcase_add_test(tc, test_limits_bound_every_resource_once);
        tcase_add_test(tc, test_every_truncation_is_refused);
        tcase_add_test(tc, test_trailing_bytes_and_bad_magic_are_refused);
        tcase_add_test(tc, test_strings_that_do_not_fit_or_hold_nul_are_refused);
        tcase_add_test(tc, test_string_length_beyond_the_message_is_refused);
        tcase_add_test(tc, test_entry_names_must_be_single_new_components);
        tcase_add_test(tc, test_root_ids_are_refused);
        tcase_add_test(tc, test_counts_and_values_out_of_range_are_refused);
        tcase_add_test(tc, test_random_corruption_never_reads_past_the_message);
        tcase_add_test(tc, test_encoder_refuses_unencodable_specs);
        suite_add_tcase(s, tc);

        tc = tcase_create("overlay");
        tcase_add_test(tc, test_overlay_plan_round_trips);
        tcase_add_test(tc, test_a_spec_without_overlay_decodes_none);
        tcase_add_test(tc, test_every_truncation_of_an_overlay_plan_is_refused);
        tcase_add_test(tc, test_a_hand_made_overlay_part_decodes);
        tcase_add_test(tc, test_too_many_lowers_are_refused);
        tcase_add_test(tc, test_lowers_that_leave_the_layers_dir_are_refused);
        tcase_add_test(tc, test_a_lower_too_long_is_refused);
        tcase_add_test(tc, test_relative_dirs_and_entries_beside_an_overlay_are_refused);
        suite_add_tcase(s, tc);

        tc = tcase_create("volumes");
        tcase_add_test(tc, test_volumes_round_trip);
        tcase_add_test(tc, test_a_spec_without_volumes_decodes_none);
        tcase_add_test(tc, test_every_truncation_of_volumes_is_refused);
        tcase_add_test(tc, test_a_hand_made_volume_decodes);
        tcase_add_test(tc, test_a_named_volume_quota_round_trips);
        tcase_add_test(tc, test_a_quota_without_a_made_named_volume_is_refused);
        tcase_add_test(tc, test_a_quota_needs_a_project_range_below_the_last_id);
        tcase_add_test(tc, test_volume_paths_that_leave_their_base_are_refused);
        tcase_add_test(tc, test_volume_counts_flags_and_group_are_checked);
        tcase_add_test(tc, test_a_claim_and_a_group_decode);
        tcase_add_test(tc, test_encoder_refuses_volumes_the_decoder_would);
        tcase_add_test(tc, test_random_corruption_of_volumes_never_reads_past_the_message);
        suite_add_tcase(s, tc);

        tc = tcase_create("exec");
        tcase_add_test(tc, test_exec_request_round_trips);
        tcase_add_test(tc, test_exec_request_carries_which_extra_fds_it_has);
        tcase_add_test(tc, test_exec_request_with_an_unknown_flag_is_refused);
        suite_add_tcase(s, tc);

        tc = tcase_create("messages");
        tcase_add_test(tc, test_messages_round_trip);
        tcase_add_test(tc, test_volume_created_is_a_message);
        tcase_add_test(tc, test_messages_of_a_wrong_size_or_type_are_refused);
        tcase_add_test(tc, test_fds_travel_in_one_record);
        tcase_add_test(tc, test_records_that_are_not_fds_are_ignored);
        tcase_add_test(tc, test_a_record_longer_than_the_buffer_gives_only_the_fds_inside_it);
        tcase_add_test(tc, test_every_step_has_a_name);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(proto_suite());
}
