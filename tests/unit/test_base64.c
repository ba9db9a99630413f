/* test_base64.c: sh_base64_encode against libsodium's encoder (the reference), for every
 * length mod 3, every byte value in every position of a triple and of the vector path's
 * blocks, unaligned inputs and random data; every test runs twice, on the vector path where
 * the CPU has AVX2 and on the table path alone. */
#include <check.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "sh/base64.h"

static void assert_like_sodium(const unsigned char *in, size_t n)
{
        size_t want_len = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
        char *want = malloc(want_len), *got = malloc(sh_base64_len(n) + 1);
        size_t len;

        ck_assert_ptr_nonnull(want);
        ck_assert_ptr_nonnull(got);
        sodium_bin2base64(want, want_len, in, n, sodium_base64_VARIANT_ORIGINAL);
        memset(got, 0x55, sh_base64_len(n) + 1);
        len = sh_base64_encode(got, in, n);
        ck_assert_uint_eq(len, sh_base64_len(n));
        ck_assert_uint_eq(len, strlen(want));
        ck_assert_msg(memcmp(got, want, len) == 0, "length %zu: '%.*s' != '%s'", n, (int)len, got,
                      want);
        /* exactly len bytes written: nothing past them */
        ck_assert_int_eq((unsigned char)got[len], 0x55);
        free(want);
        free(got);
}

START_TEST(test_lengths_are_four_per_started_triple)
{
        ck_assert_uint_eq(sh_base64_len(0), 0);
        ck_assert_uint_eq(sh_base64_len(1), 4);
        ck_assert_uint_eq(sh_base64_len(2), 4);
        ck_assert_uint_eq(sh_base64_len(3), 4);
        ck_assert_uint_eq(sh_base64_len(4), 8);
        ck_assert_uint_eq(sh_base64_len(256 * 1024), 4 * ((256 * 1024 + 2) / 3));
}
END_TEST

START_TEST(test_rfc4648_vectors)
{
        static const char *const vec[][2] = {
                {"", ""},
                {"f", "Zg=="},
                {"fo", "Zm8="},
                {"foo", "Zm9v"},
                {"foob", "Zm9vYg=="},
                {"fooba", "Zm9vYmE="},
                {"foobar", "Zm9vYmFy"},
        };
        char out[16];

        for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
                size_t n = sh_base64_encode(out, vec[i][0], strlen(vec[i][0]));

                ck_assert_uint_eq(n, strlen(vec[i][1]));
                ck_assert_int_eq(memcmp(out, vec[i][1], n), 0);
        }
}
END_TEST

START_TEST(test_every_length_up_to_300_like_sodium)
{
        unsigned char in[300];

        for (size_t i = 0; i < sizeof(in); i++)
                in[i] = (unsigned char)(i * 37 + 11);
        for (size_t n = 0; n <= sizeof(in); n++)
                assert_like_sodium(in, n);
}
END_TEST

START_TEST(test_every_byte_in_every_position_like_sodium)
{
        unsigned char in[3];

        /* each byte value alone (n = 1), as the second byte (n = 2), as the third (n = 3):
         * every tail and every 6-bit group */
        for (unsigned v = 0; v < 256; v++) {
                for (size_t pos = 0; pos < 3; pos++) {
                        memset(in, 0xa5, sizeof(in));
                        in[pos] = (unsigned char)v;
                        assert_like_sodium(in, pos + 1);
                        assert_like_sodium(in, 3);
                }
        }
}
END_TEST

START_TEST(test_every_byte_in_every_position_of_the_vector_blocks_like_sodium)
{
        unsigned char in[96];

        /* 96 bytes: four 24-byte blocks, the first loaded differently from the others */
        for (unsigned v = 0; v < 256; v += 3) {
                for (size_t pos = 0; pos < sizeof(in); pos++) {
                        memset(in, 0x5a, sizeof(in));
                        in[pos] = (unsigned char)v;
                        assert_like_sodium(in, sizeof(in));
                }
        }
}
END_TEST

START_TEST(test_unaligned_inputs_like_sodium)
{
        static unsigned char buf[4096 + 64];

        randombytes_buf(buf, sizeof(buf));
        for (size_t off = 0; off < 33; off++)
                for (size_t n = 4000; n < 4010; n++)
                        assert_like_sodium(buf + off, n);
}
END_TEST

START_TEST(test_random_data_like_sodium)
{
        static unsigned char in[65537];

        randombytes_buf(in, sizeof(in));
        assert_like_sodium(in, sizeof(in));
        assert_like_sodium(in, sizeof(in) - 1);
        assert_like_sodium(in, sizeof(in) - 2);
}
END_TEST

START_TEST(test_decode_gives_back_what_encode_gave)
{
        unsigned char in[64], out[64];
        char text[4 * ((64 + 2) / 3)];

        for (size_t i = 0; i < sizeof(in); i++)
                in[i] = (unsigned char)(i * 37 + 11);
        for (size_t n = 0; n <= sizeof(in); n++) {
                size_t len = sh_base64_encode(text, in, n);

                ck_assert_int_eq(sh_base64_decode(out, text, len), (long)n);
                ck_assert(memcmp(out, in, n) == 0);
        }
}
END_TEST

START_TEST(test_decode_refuses_text_that_is_not_strict_base64)
{
        static const char *const bad[] = {
                "Zg",       /* length not a multiple of 4 */
                "Zg=a",     /* '=' before the end */
                "Z===",     /* three '=' */
                "=Zg=",     /* '=' first */
                "Zm9v\n",   /* whitespace */
                "Zh==",     /* unused bits not zero */
                "Zm9=",     /* unused bits not zero */
                "Zm9v!A==", /* a character outside the alphabet */
                "Zg==Zg==", /* padding inside */
        };
        unsigned char out[16];

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(sh_base64_decode(out, bad[i], strlen(bad[i])) == -1, "%s", bad[i]);
}
END_TEST

static void scalar_on(void)
{
        sh_base64_force_scalar(true);
}

static void scalar_off(void)
{
        sh_base64_force_scalar(false);
}

static void add_tests(TCase *tc)
{
        tcase_add_test(tc, test_lengths_are_four_per_started_triple);
        tcase_add_test(tc, test_rfc4648_vectors);
        tcase_add_test(tc, test_every_length_up_to_300_like_sodium);
        tcase_add_test(tc, test_every_byte_in_every_position_like_sodium);
        tcase_add_test(tc, test_every_byte_in_every_position_of_the_vector_blocks_like_sodium);
        tcase_add_test(tc, test_unaligned_inputs_like_sodium);
        tcase_add_test(tc, test_random_data_like_sodium);
        tcase_add_test(tc, test_decode_gives_back_what_encode_gave);
        tcase_add_test(tc, test_decode_refuses_text_that_is_not_strict_base64);
}

static Suite *base64_suite(void)
{
        Suite *s = suite_create("base64");
        TCase *tc = tcase_create("fastest");
        TCase *table = tcase_create("table");

        add_tests(tc);
        suite_add_tcase(s, tc);
        tcase_add_checked_fixture(table, scalar_on, scalar_off);
        add_tests(table);
        suite_add_tcase(s, table);
        return s;
}

int main(void)
{
        SRunner *sr;
        int failed;

        if (sodium_init() < 0)
                return 1;
        sr = srunner_create(base64_suite());
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
