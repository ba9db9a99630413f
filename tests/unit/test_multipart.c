/* test_multipart.c: the streaming multipart/form-data parser of an upload's body sink
 * (src/http/multipart.c): the SDK 0.1.11's exact bodies, every rule of the boundary,
 * the delimiters, the part headers and their quoted strings, the bounds, cut and garbage
 * bodies, and random and mutated bodies fed in random chunks, which must never crash and must
 * give the same parts however the body is cut. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/multipart.h"
#include "unit.h"

/* The ASan build checks string functions strictly here, as the contract tier runs the daemon
 * (ASAN_OPTIONS strict_string_checks=1): a strndup of bytes that no NUL ends is a read past
 * them, which the body's buffer is. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
        return "strict_string_checks=1";
}

/* ---- a recorder of the callbacks ------------------------------------------------------------ */

typedef struct rec {
        char *log; /* "[name|filename|type]" data "{end}" per part; NULLs as "-" */
        size_t n, cap;
        unsigned begins, ends, open;
        size_t max_chunk, data_total;
        int fail_begin; /* fail part_begin of this index (-1: never) */
        bool fail_data;
} rec;

static void put(rec *r, const char *p, size_t n)
{
        if (r->n + n + 1 > r->cap) {
                r->cap = (r->n + n + 1) * 2;
                r->log = realloc(r->log, r->cap);
                ck_assert_ptr_nonnull(r->log);
        }
        memcpy(r->log + r->n, p, n);
        r->n += n;
        r->log[r->n] = '\0';
}

static void puts_(rec *r, const char *s)
{
        put(r, s ? s : "-", strlen(s ? s : "-"));
}

static int on_begin(void *ctx, const sh_mp_part *part, sh_error **err)
{
        rec *r = ctx;

        ck_assert_uint_eq(r->open, 0);
        ck_assert_uint_eq(part->index, r->begins);
        ck_assert_ptr_nonnull(part->name);
        ck_assert(part->name[0] != '\0');
        if ((int)part->index == r->fail_begin)
                return sh_error_new(err, SH_E_INVALID, "refused by the caller");
        r->begins++;
        r->open = 1;
        put(r, "[", 1);
        puts_(r, part->name);
        put(r, "|", 1);
        puts_(r, part->filename);
        put(r, "|", 1);
        puts_(r, part->content_type);
        put(r, "]", 1);
        return 0;
}

static int on_data(void *ctx, const char *p, size_t n, sh_error **err)
{
        rec *r = ctx;

        ck_assert_uint_eq(r->open, 1);
        ck_assert_uint_gt(n, 0);
        if (r->fail_data)
                return sh_error_new(err, SH_E_NO_SPACE, "disk full");
        if (n > r->max_chunk)
                r->max_chunk = n;
        r->data_total += n;
        put(r, p, n);
        return 0;
}

static int on_end(void *ctx, sh_error **err)
{
        rec *r = ctx;

        (void)err;
        ck_assert_uint_eq(r->open, 1);
        r->open = 0;
        r->ends++;
        put(r, "{end}", 5);
        return 0;
}

static const sh_mp_callbacks cbs = {on_begin, on_data, on_end};

/* The result of parsing body (len bytes, fed in chunks of `chunk`, 0: all at once; each chunk
 * an exact heap copy, so ASan sees a read past it), its log in r, the error's text in why. */
static int parse(const char *ct, const char *body, size_t len, size_t chunk, rec *r, char *why,
                 size_t whylen)
{
        sh_mp *m = NULL;
        sh_error *err = NULL;
        int res;

        memset(r, 0, sizeof(*r));
        r->fail_begin = -1;
        put(r, "", 0);
        why[0] = '\0';
        res = sh_mp_new(ct, &cbs, r, &m, &err);
        for (size_t off = 0; res == 0 && off < len;) {
                size_t k = chunk && chunk < len - off ? chunk : len - off;
                char *copy = malloc(k);

                ck_assert_ptr_nonnull(copy);
                memcpy(copy, body + off, k);
                res = sh_mp_feed(m, copy, k, &err);
                free(copy);
                off += k;
        }
        if (res == 0)
                res = sh_mp_finish(m, &err);
        if (res < 0) {
                ck_assert_ptr_nonnull(err);
                snprintf(why, whylen, "%s", err->msg);
        } else {
                ck_assert_ptr_null(err);
        }
        sh_error_release(&err);
        sh_mp_free(m);
        return res;
}

static void rec_done(rec *r)
{
        free(r->log);
        r->log = NULL;
}

/* The body parses, fed whole and in chunks of 1, 2, 3, 7 and 64 bytes, to exactly `want`. */
static void parses_to(const char *ct, const char *body, size_t len, const char *want,
                      size_t want_len)
{
        static const size_t chunks[] = {0, 1, 2, 3, 7, 64};
        char why[512];

        for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
                rec r;
                int res = parse(ct, body, len, chunks[i], &r, why, sizeof(why));

                ck_assert_msg(res == 0, "refused in chunks of %zu: %s", chunks[i], why);
                ck_assert_msg(r.n == want_len && memcmp(r.log, want, want_len) == 0,
                              "chunks of %zu: got '%s'", chunks[i], r.log);
                ck_assert_uint_eq(r.open, 0);
                rec_done(&r);
        }
}

#define PARSES_TO(ct, body, want) parses_to(ct, body, sizeof(body) - 1, want, sizeof(want) - 1)

/* The body is refused, whole and byte by byte, with a message holding `needle`. */
static void refused(const char *ct, const char *body, size_t len, const char *needle)
{
        char why[512];

        for (size_t chunk = 0; chunk < 2; chunk++) {
                rec r;
                int res = parse(ct, body, len, chunk, &r, why, sizeof(why));

                ck_assert_msg(res < 0, "accepted (chunks of %zu): '%s'", chunk, r.log);
                ck_assert_msg(strstr(why, needle), "chunks of %zu: '%s' lacks '%s'", chunk, why,
                              needle);
                rec_done(&r);
        }
}

#define REFUSED(ct, body, needle) refused(ct, body, sizeof(body) - 1, needle)

#define CT "multipart/form-data; boundary=XyZ"

/* ---- what the SDK 0.1.11 sends (captured from node 20: FilesystemAdapter.writeFiles against
 * a local server; the undici FormData path for strings and bytes, the SDK's own writer for a
 * stream) ---------------------------------------------------------------------------------- */

START_TEST(test_the_sdk_text_upload_through_undici_formdata)
{
        static const char ct[] = "multipart/form-data; boundary=----formdata-undici-020895869531";
        static const char body[] =
                "------formdata-undici-020895869531\r\n"
                "Content-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
                "Content-Type: application/json\r\n"
                "\r\n"
                "{\"path\":\"/workspace/a.txt\",\"owner\":\"root\",\"group\":\"root\",\"mode\":644}"
                "\r\n"
                "------formdata-undici-020895869531\r\n"
                "Content-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n"
                "Content-Type: text/plain; charset=utf-8\r\n"
                "\r\n"
                "hello\r\n--x\r\n"
                "------formdata-undici-020895869531--\r\n";

        ck_assert_uint_eq(sizeof(body) - 1, 402); /* the captured Content-Length */
        PARSES_TO(
                ct, body,
                "[metadata|metadata|application/json]"
                "{\"path\":\"/workspace/a.txt\",\"owner\":\"root\",\"group\":\"root\",\"mode\":644}"
                "{end}"
                "[file|a.txt|text/plain; charset=utf-8]hello\r\n--x{end}");
}
END_TEST

START_TEST(test_the_sdk_binary_upload_through_undici_formdata)
{
        static const char ct[] = "multipart/form-data; boundary=----formdata-undici-061691172870";
        static const char body[] =
                "------formdata-undici-061691172870\r\n"
                "Content-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
                "Content-Type: application/json\r\n"
                "\r\n"
                "{\"path\":\"/tmp/b.bin\"}\r\n"
                "------formdata-undici-061691172870\r\n"
                "Content-Disposition: form-data; name=\"file\"; filename=\"b.bin\"\r\n"
                "Content-Type: application/octet-stream\r\n"
                "\r\n"
                "\x00\x01\x02\r\n--\r\n"
                "------formdata-undici-061691172870--\r\n";
        static const char want[] = "[metadata|metadata|application/json]{\"path\":\"/tmp/b.bin\"}"
                                   "{end}[file|b.bin|application/octet-stream]\x00\x01\x02\r\n--"
                                   "{end}";

        ck_assert_uint_eq(sizeof(body) - 1, 351);
        PARSES_TO(ct, body, want);
}
END_TEST

START_TEST(test_the_sdk_streamed_upload_through_its_own_writer)
{
        static const char ct[] =
                "multipart/form-data; boundary=opensandbox_83709d4519f9e_1796140295949";
        static const char body[] =
                "--opensandbox_83709d4519f9e_1796140295949\r\n"
                "Content-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
                "Content-Type: application/json\r\n"
                "\r\n"
                "{\"path\":\"/tmp/dir/c\"}\r\n"
                "--opensandbox_83709d4519f9e_1796140295949\r\n"
                "Content-Disposition: form-data; name=\"file\"; filename=\"c\"\r\n"
                "Content-Type: application/octet-stream\r\n"
                "\r\n"
                "hi!\r\n"
                "--opensandbox_83709d4519f9e_1796140295949--\r\n";

        PARSES_TO(ct, body,
                  "[metadata|metadata|application/json]{\"path\":\"/tmp/dir/c\"}{end}"
                  "[file|c|application/octet-stream]hi!{end}");
}
END_TEST

START_TEST(test_several_pairs_in_one_body)
{
        static const char body[] = "--XyZ\r\n"
                                   "Content-Disposition: form-data; name=metadata\r\n\r\n"
                                   "{\"path\":\"/a\"}\r\n"
                                   "--XyZ\r\n"
                                   "Content-Disposition: form-data; name=file; filename=a\r\n\r\n"
                                   "A\r\n"
                                   "--XyZ\r\n"
                                   "Content-Disposition: form-data; name=metadata\r\n\r\n"
                                   "{\"path\":\"/b\"}\r\n"
                                   "--XyZ\r\n"
                                   "Content-Disposition: form-data; name=file; filename=b\r\n\r\n"
                                   "BB\r\n"
                                   "--XyZ--";

        PARSES_TO(CT, body,
                  "[metadata|-|-]{\"path\":\"/a\"}{end}[file|a|-]A{end}"
                  "[metadata|-|-]{\"path\":\"/b\"}{end}[file|b|-]BB{end}");
}
END_TEST

/* ---- the boundary ------------------------------------------------------------------------- */

static void boundary_is(const char *ct, const char *want)
{
        char b[SH_MP_BOUNDARY_MAX + 1];
        sh_error *err = NULL;

        ck_assert_msg(sh_mp_boundary(ct, b, &err) == 0, "'%s' refused: %s", ct,
                      err ? err->msg : "?");
        ck_assert_str_eq(b, want);
}

static void boundary_refused(const char *ct)
{
        char b[SH_MP_BOUNDARY_MAX + 1];
        sh_error *err = NULL;

        ck_assert_msg(sh_mp_boundary(ct, b, &err) < 0, "'%s' accepted", ct ? ct : "(null)");
        ck_assert_ptr_nonnull(err);
        ck_assert_int_eq(err->kind, SH_E_INVALID);
        sh_error_release(&err);
}

START_TEST(test_boundaries_quoted_or_not)
{
        boundary_is("multipart/form-data; boundary=abc", "abc");
        boundary_is("multipart/form-data;boundary=abc", "abc");
        boundary_is("Multipart/Form-Data; BOUNDARY=abc", "abc");
        boundary_is("multipart/form-data; boundary=\"a b:c?d\"", "a b:c?d");
}
END_TEST

START_TEST(test_boundaries_among_other_parameters)
{
        boundary_is("multipart/form-data; charset=utf-8; boundary=abc", "abc");
        boundary_is("multipart/form-data; boundary=abc; charset=utf-8", "abc");
        boundary_is("  multipart/form-data ;  boundary = abc ; ", "abc");
        boundary_is("multipart/form-data; boundary='()+_,-./:=?", "'()+_,-./:=?");
        boundary_is("multipart/form-data; boundary=0123456789012345678901234567890123456789"
                    "012345678901234567890123456789",
                    "0123456789012345678901234567890123456789012345678901234567890123456789");
}
END_TEST

START_TEST(test_bad_boundaries_are_refused)
{
        char huge[SH_MP_CONTENT_TYPE_MAX + 64];

        boundary_refused(NULL);
        boundary_refused("");
        boundary_refused("text/plain; boundary=abc");
        boundary_refused("multipart/mixed; boundary=abc");
        boundary_refused("multipart/form-dataX; boundary=abc");
        boundary_refused("multipart/form-data");
        boundary_refused("multipart/form-data;");
        boundary_refused("multipart/form-data; boundary=");
        boundary_refused("multipart/form-data; boundary=\"\"");
        boundary_refused("multipart/form-data; boundary=\"abc \"");
        boundary_refused("multipart/form-data; boundary=\"abc");
        boundary_refused("multipart/form-data; boundary=a; boundary=b");
        boundary_refused("multipart/form-data; boundary=a;boundary=a");
        boundary_refused("multipart/form-data; boundary=ab\"c");
        boundary_refused("multipart/form-data; boundary=\"a\tb\"");
        boundary_refused("multipart/form-data; boundary=\"a\\\"\""); /* a quote is no bchar */
        boundary_refused("multipart/form-data; boundary=\"a\xc3\xa9\"");
        boundary_refused("multipart/form-data; boundary=abc garbage");
        boundary_refused("multipart/form-data boundary=abc");
        boundary_refused("multipart/form-data; =abc");
        boundary_refused("multipart/form-data; boundary=0123456789012345678901234567890123456789"
                         "0123456789012345678901234567890");
        memset(huge, ' ', sizeof(huge));
        memcpy(huge, "multipart/form-data; boundary=abc", 33);
        huge[sizeof(huge) - 1] = '\0';
        boundary_refused(huge);
}
END_TEST

START_TEST(test_a_body_without_the_boundary_is_refused)
{
        char why[256];
        rec r;

        /* no boundary at all, and a wrong one */
        REFUSED(CT, "just some bytes", "no multipart boundary");
        REFUSED(CT, "--XyY\r\nContent-Disposition: form-data; name=a\r\n\r\nA\r\n--XyY--\r\n",
                "no multipart boundary");
        REFUSED(CT, "", "no multipart boundary");
        /* the boundary must begin a line: after other bytes it is preamble */
        REFUSED(CT, "x--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nA",
                "no multipart boundary");
        /* a long body without the boundary is refused within its first 8 KiB */
        {
                size_t n = 1u << 20;
                char *big = malloc(n);
                sh_mp *m = NULL;
                sh_error *err = NULL;

                ck_assert_ptr_nonnull(big);
                memset(big, 'a', n);
                memset(&r, 0, sizeof(r));
                ck_assert_int_eq(sh_mp_new(CT, &cbs, &r, &m, &err), 0);
                ck_assert_int_lt(sh_mp_feed(m, big, SH_MP_PREAMBLE_MAX + 100, &err), 0);
                ck_assert_int_eq(err->kind, SH_E_INVALID);
                sh_error_release(&err);
                ck_assert_int_lt(sh_mp_feed(m, big, 10, &err), 0); /* and stays refused */
                sh_error_release(&err);
                sh_mp_free(m);
                free(big);
        }
        (void)why;
}
END_TEST

/* ---- preamble, epilogue, delimiters ------------------------------------------------------- */

START_TEST(test_preamble_and_epilogue_are_ignored)
{
        PARSES_TO(CT,
                  "This is a preamble.\r\n--XyZ\r\n"
                  "Content-Disposition: form-data; name=a\r\n\r\nA\r\n--XyZ--\r\n"
                  "This is an epilogue, --XyZ\r\n with a boundary in it.",
                  "[a|-|-]A{end}");
        PARSES_TO(CT,
                  "\r\n--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nA\r\n--XyZ--"
                  "garbage right after the close",
                  "[a|-|-]A{end}");
}
END_TEST

START_TEST(test_transport_padding_after_a_boundary)
{
        PARSES_TO(CT,
                  "--XyZ \t \r\nContent-Disposition: form-data; name=a\r\n\r\nA\r\n--XyZ\t\r\n"
                  "Content-Disposition: form-data; name=b\r\n\r\nB\r\n--XyZ--  \r\n",
                  "[a|-|-]A{end}[b|-|-]B{end}");
        REFUSED(CT, "--XyZ x\r\nContent-Disposition: form-data; name=a\r\n\r\nA\r\n--XyZ--",
                "garbage after a multipart boundary");
        REFUSED(CT, "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nA\r\n--XyZ \rx",
                "garbage after a multipart boundary");
}
END_TEST

START_TEST(test_boundary_lookalikes_in_data_are_data)
{
        PARSES_TO(CT,
                  "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n"
                  "1\r\n--XyZa 2\r\n--XyZ-x 3\r\n--XyZ\rx 4--XyZ\r\n 5\r\r\n--Xy 6\n--XyZ\r\n"
                  "7\r\n--XyZ--",
                  "[a|-|-]1\r\n--XyZa 2\r\n--XyZ-x 3\r\n--XyZ\rx 4--XyZ\r\n 5\r\r\n--Xy 6\n--XyZ"
                  "\r\n7{end}");
        /* right after the headers, "--XyZ" without its CRLF is data too */
        PARSES_TO(CT, "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n--XyZx\r\n--XyZ--",
                  "[a|-|-]--XyZx{end}");
}
END_TEST

START_TEST(test_empty_parts_and_an_empty_form)
{
        /* a data section that is empty, and none at all (RFC 2046: it is optional) */
        PARSES_TO(CT,
                  "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\n--XyZ\r\n"
                  "Content-Disposition: form-data; name=b\r\n\r\n--XyZ\r\n"
                  "Content-Disposition: form-data; name=c\r\n\r\n\r\n\r\n--XyZ--",
                  "[a|-|-]{end}[b|-|-]{end}[c|-|-]\r\n{end}");
        /* an empty form: the close delimiter alone */
        PARSES_TO(CT, "--XyZ--\r\n", "");
        PARSES_TO(CT, "--XyZ--", "");
}
END_TEST

START_TEST(test_a_cut_body_is_refused_and_its_part_never_ends)
{
        static const char *const cuts[] = {
                "--XyZ",
                "--XyZ\r",
                "--XyZ\r\n",
                "--XyZ\r\nContent-Disposition: form-data; name=a",
                "--XyZ\r\nContent-Disposition: form-data; name=a\r\n",
                "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n",
                "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nAAAA",
                "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nAAAA\r\n",
                "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nAAAA\r\n--XyZ",
                "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nAAAA\r\n--XyZ-",
                "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nAAAA\r\n--XyZ\r\n",
                "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nAAAA\r\n--XyZ  ",
        };
        char why[256];

        for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
                for (size_t chunk = 0; chunk < 2; chunk++) {
                        rec r;

                        ck_assert_msg(parse(CT, cuts[i], strlen(cuts[i]), chunk, &r, why,
                                            sizeof(why)) < 0,
                                      "cut body %zu accepted", i);
                        ck_assert_msg(strstr(why, "ends before its closing boundary"),
                                      "body %zu: %s", i, why);
                        /* whatever began was never told it ended well */
                        ck_assert_uint_eq(r.ends, i == 10 || i == 11 ? 1 : 0);
                        rec_done(&r);
                }
        }
}
END_TEST

/* ---- part headers ----------------------------------------------------------------------------- */

#define PART(headers) "--XyZ\r\n" headers "\r\n\r\nA\r\n--XyZ--\r\n"

START_TEST(test_header_names_and_values_are_read_leniently_where_safe)
{
        PARSES_TO(CT, PART("content-disposition:form-data;name=a"), "[a|-|-]A{end}");
        PARSES_TO(CT, PART("CONTENT-DISPOSITION: FORM-DATA; NAME=\"a\"; FILENAME=\"f\""),
                  "[a|f|-]A{end}");
        PARSES_TO(CT, PART("Content-Disposition: \tform-data ;\tname = \"a\" ; filename=\"\" ;"),
                  "[a||-]A{end}");
        PARSES_TO(CT,
                  PART("X-Other: whatever; \"odd\r\nContent-Disposition: form-data; name=a\r\n"
                       "Content-Type:  image/png  "),
                  "[a|-|image/png]A{end}");
        PARSES_TO(CT, PART("Content-Disposition: form-data; name=a; filename*=UTF-8''x; size=3"),
                  "[a|-|-]A{end}");
        PARSES_TO(CT, PART("Content-Disposition: form-data; name=a\r\nContent-Type:"),
                  "[a|-|]A{end}");
        PARSES_TO(CT,
                  PART("Content-Transfer-Encoding: binary\r\nContent-Disposition: form-data; "
                       "name=a"),
                  "[a|-|-]A{end}");
        PARSES_TO(CT, PART("Content-Disposition: form-data; name=\"caf\xc3\xa9\""),
                  "[caf\xc3\xa9|-|-]A{end}");
}
END_TEST

START_TEST(test_quoted_strings_are_decoded)
{
        /* a quote or a backslash in a name is decoded (RFC 822 quoted-pair) */
        PARSES_TO(CT, PART("Content-Disposition: form-data; name=\"a\\\"b\"; filename=\"c\\\\d\""),
                  "[a\"b|c\\d|-]A{end}");
        PARSES_TO(CT, PART("Content-Disposition: form-data; name=\"a;b=c\"; filename=\"x\\y\""),
                  "[a;b=c|xy|-]A{end}");
        /* percent escapes (what undici writes for a quote) stay as they are */
        PARSES_TO(CT, PART("Content-Disposition: form-data; name=\"a%22b\"; filename=\"%0D%0A\""),
                  "[a%22b|%0D%0A|-]A{end}");
}
END_TEST

START_TEST(test_a_quote_or_crlf_that_breaks_a_header_is_refused)
{
        /* a raw quote inside a quoted name (what the SDK's stream writer sends for a file named
         * a"b) leaves garbage after the string */
        REFUSED(CT, PART("Content-Disposition: form-data; name=\"file\"; filename=\"a\"b\""),
                "garbage where a ';' parameter was expected");
        /* a CRLF inside: the header line ends inside the quote */
        REFUSED(CT, PART("Content-Disposition: form-data; name=\"a\r\nb\""),
                "unterminated quoted string");
        REFUSED(CT, PART("Content-Disposition: form-data; name=\"a\r\n b\""),
                "unterminated quoted string");
        REFUSED(CT, PART("Content-Disposition: form-data; name=\"a\\"),
                "unterminated quoted string");
        /* bare CR and LF, NUL and other controls */
        REFUSED(CT, PART("Content-Disposition: form-data; name=\"a\rb\""), "bare CR");
        REFUSED(CT, PART("Content-Disposition: form-data; name=\"a\nb\""), "bare LF");
        REFUSED(CT, "--XyZ\r\nContent-Disposition: form-data; name=a\n\nA\r\n--XyZ--", "bare LF");
        refused(CT, "--XyZ\r\nContent-Disposition: form-data; name=\"a\0b\"\r\n\r\nA\r\n--XyZ--",
                59, "NUL");
        REFUSED(CT, PART("Content-Disposition: form-data; name=\"a\x01\""), "control character");
        REFUSED(CT, PART("Content-Disposition: form-data; name=\"a\x7f\""), "control character");
}
END_TEST

START_TEST(test_malformed_part_headers_are_refused)
{
        REFUSED(CT, PART("Content-Disposition form-data; name=a"), "not 'Name: value'");
        REFUSED(CT, PART("Content-Disposition : form-data; name=a"), "not 'Name: value'");
        REFUSED(CT, PART(": form-data; name=a"), "not 'Name: value'");
        REFUSED(CT, PART("garbage"), "not 'Name: value'");
        /* data right after the headers, without the blank line that ends them */
        REFUSED(CT,
                "--XyZ\r\nContent-Disposition: form-data; name=a\r\nraw data, no blank line\r\n"
                "--XyZ--",
                "not 'Name: value'");
        REFUSED(CT, "--XyZ\r\nContent-Disposition: form-data; name=a\r\n--XyZ--\r\n",
                "not 'Name: value'");
        REFUSED(CT, PART("Content-Disposition: form-data;\r\n name=a"), "folded");
        REFUSED(CT, PART("Content-Disposition: attachment; name=a"), "not form-data");
        REFUSED(CT, PART("Content-Disposition: form-data-x; name=a"), "not form-data");
        REFUSED(CT, PART("Content-Disposition: form-data name=a"), "garbage where a ';'");
        REFUSED(CT, PART("Content-Disposition: form-data; name"), "malformed parameter");
        REFUSED(CT, PART("Content-Disposition: form-data; name="), "without a value");
        REFUSED(CT, PART("Content-Disposition: form-data; =a"), "malformed parameter");
        REFUSED(CT, PART("Content-Disposition: form-data; name=a b"), "garbage where a ';'");
        REFUSED(CT,
                PART("Content-Transfer-Encoding: base64\r\nContent-Disposition: form-data; "
                     "name=a"),
                "not 7bit, 8bit or binary");
}
END_TEST

START_TEST(test_a_part_without_a_name_is_refused)
{
        REFUSED(CT, PART("Content-Type: text/plain"), "no Content-Disposition");
        REFUSED(CT, "--XyZ\r\n\r\nA\r\n--XyZ--", "no Content-Disposition");
        REFUSED(CT, PART("Content-Disposition: form-data"), "has no name");
        REFUSED(CT, PART("Content-Disposition: form-data; filename=a"), "has no name");
        REFUSED(CT, PART("Content-Disposition: form-data; name=\"\""), "has no name");
}
END_TEST

START_TEST(test_repeated_headers_and_parameters_are_refused)
{
        REFUSED(CT, PART("Content-Disposition: form-data; name=a; name=b"), "two 'name'");
        REFUSED(CT, PART("Content-Disposition: form-data; name=a; NAME=a"), "two 'NAME'");
        REFUSED(CT, PART("Content-Disposition: form-data; name=a; filename=b; filename=c"),
                "two 'filename'");
        REFUSED(CT,
                PART("Content-Disposition: form-data; name=a\r\n"
                     "Content-Disposition: form-data; name=b"),
                "two Content-Disposition");
        REFUSED(CT,
                PART("Content-Disposition: form-data; name=a\r\nContent-Type: a/b\r\n"
                     "content-type: c/d"),
                "two Content-Type");
        REFUSED(CT,
                PART("Content-Disposition: form-data; name=a\r\nContent-Transfer-Encoding: 8bit"
                     "\r\nContent-Transfer-Encoding: 8bit"),
                "two Content-Transfer-Encoding");
}
END_TEST

/* ---- bounds ----------------------------------------------------------------------------------- */

static char *headers_of(size_t total)
{
        /* "--XyZ\r\n" + a Content-Disposition line + X: lines, the block `total` bytes long
         * with its blank line, then "A" and the close */
        static const char cd[] = "Content-Disposition: form-data; name=a\r\n";
        char *b = malloc(total + 64);
        size_t n = 0, left;

        ck_assert_ptr_nonnull(b);
        n += (size_t)sprintf(b, "--XyZ\r\n%s", cd);
        left = total - (sizeof(cd) - 1) - 2;
        while (left > 0) {
                size_t line = left > 1000 ? 1000 : left; /* "X:" + pad + CRLF */

                ck_assert_uint_ge(line, 4);
                memcpy(b + n, "X:", 2);
                memset(b + n + 2, 'v', line - 4);
                memcpy(b + n + line - 2, "\r\n", 2);
                n += line;
                left -= line;
        }
        n += (size_t)sprintf(b + n, "\r\nA\r\n--XyZ--");
        b[n] = '\0';
        return b;
}

START_TEST(test_part_headers_are_bounded)
{
        char *ok = headers_of(SH_MP_HEADER_MAX), *over = headers_of(SH_MP_HEADER_MAX + 4);
        char *one = malloc(SH_MP_HEADER_MAX * 2 + 100);
        char why[256];
        rec r;

        parses_to(CT, ok, strlen(ok), "[a|-|-]A{end}", 13);
        refused(CT, over, strlen(over), "longer than 8192 bytes");
        /* one endless header line, without its CRLF */
        ck_assert_ptr_nonnull(one);
        memcpy(one, "--XyZ\r\nX: ", 10);
        memset(one + 10, 'v', SH_MP_HEADER_MAX * 2);
        ck_assert_int_lt(parse(CT, one, 10 + SH_MP_HEADER_MAX * 2, 0, &r, why, sizeof(why)), 0);
        ck_assert_ptr_nonnull(strstr(why, "longer than 8192 bytes"));
        rec_done(&r);
        ck_assert_int_lt(parse(CT, one, 10 + SH_MP_HEADER_MAX * 2, 1, &r, why, sizeof(why)), 0);
        ck_assert_ptr_nonnull(strstr(why, "longer than 8192 bytes"));
        rec_done(&r);
        free(ok);
        free(over);
        free(one);
}
END_TEST

START_TEST(test_the_number_of_parts_is_bounded)
{
        static const char part[] = "--XyZ\r\nContent-Disposition: form-data; name=p\r\n\r\nx\r\n";
        size_t plen = sizeof(part) - 1, n = 0;
        char *body = malloc(plen * (SH_MP_PARTS_MAX + 1) + 16);
        char why[256];
        rec r;

        ck_assert_ptr_nonnull(body);
        for (int i = 0; i < SH_MP_PARTS_MAX; i++, n += plen)
                memcpy(body + n, part, plen);
        memcpy(body + n, "--XyZ--", 7);
        ck_assert_int_eq(parse(CT, body, n + 7, 0, &r, why, sizeof(why)), 0);
        ck_assert_uint_eq(r.ends, SH_MP_PARTS_MAX);
        rec_done(&r);
        memcpy(body + n, part, plen);
        memcpy(body + n + plen, "--XyZ--", 7);
        ck_assert_int_lt(parse(CT, body, n + plen + 7, 0, &r, why, sizeof(why)), 0);
        ck_assert_ptr_nonnull(strstr(why, "more than 256 parts"));
        ck_assert_uint_eq(r.ends, SH_MP_PARTS_MAX);
        rec_done(&r);
        free(body);
}
END_TEST

/* A part's data reaches the callback as it arrives: after each feed, all but a delimiter's
 * length of it has been handed on, whatever the part's size (so memory cannot grow with it). */
START_TEST(test_data_is_handed_on_as_it_comes_not_kept)
{
        static const char head[] = "--XyZ\r\nContent-Disposition: form-data; name=f\r\n\r\n";
        size_t chunk = 100000, total = 0, rounds = 640; /* 64 MB of data */
        char *buf = malloc(chunk);
        sh_mp *m = NULL;
        sh_error *err = NULL;
        rec r;

        ck_assert_ptr_nonnull(buf);
        memset(&r, 0, sizeof(r));
        r.fail_begin = -1;
        ck_assert_int_eq(sh_mp_new(CT, &cbs, &r, &m, &err), 0);
        ck_assert_int_eq(sh_mp_feed(m, head, sizeof(head) - 1, &err), 0);
        for (size_t i = 0; i < chunk; i++)
                buf[i] = "\r\n-XyZ"[i % 6]; /* the delimiter's bytes, but never the delimiter */
        for (size_t i = 0; i < rounds; i++) {
                ck_assert_int_eq(sh_mp_feed(m, buf, chunk, &err), 0);
                total += chunk;
                ck_assert_uint_ge(r.data_total + 4 + 3 + 2, total); /* held back: < delim + 2 */
                r.n = 0; /* the log need not hold 64 MB */
        }
        ck_assert_uint_le(r.max_chunk, 2 * SH_MP_HEADER_MAX);
        ck_assert_int_eq(sh_mp_feed(m, "\r\n--XyZ--", 9, &err), 0);
        ck_assert_int_eq(sh_mp_finish(m, &err), 0);
        ck_assert_uint_eq(r.data_total, total);
        ck_assert_uint_eq(r.ends, 1);
        sh_mp_free(m);
        free(buf);
        rec_done(&r);
}
END_TEST

/* A part's header values are copied from the parser's buffer, which no NUL ends and which still
 * holds an earlier part's data past what is read: the copy must stop at the value's end (the
 * ASan build, with strict string checks, sees any string function reading on). */
START_TEST(test_header_values_after_a_large_part_are_copied_within_the_buffer)
{
        static const char head[] = "--XyZ\r\nContent-Disposition: form-data; name=big\r\n\r\n";
        static const char tail[] = "\r\n--XyZ\r\nContent-Disposition: form-data; name=meta; "
                                   "filename=m\r\nContent-Type: application/json\r\n\r\n{}"
                                   "\r\n--XyZ--";
        static const char want_head[] = "[big|-|-]";
        static const char want_tail[] = "{end}[meta|m|application/json]{}{end}";
        size_t data = 40000, len = sizeof(head) - 1 + data + sizeof(tail) - 1;
        size_t want_len = sizeof(want_head) - 1 + data + sizeof(want_tail) - 1;
        char *body = malloc(len), *want = malloc(want_len);

        ck_assert_ptr_nonnull(body);
        ck_assert_ptr_nonnull(want);
        memcpy(body, head, sizeof(head) - 1);
        memset(body + sizeof(head) - 1, 'x', data);
        memcpy(body + sizeof(head) - 1 + data, tail, sizeof(tail) - 1);
        memcpy(want, want_head, sizeof(want_head) - 1);
        memset(want + sizeof(want_head) - 1, 'x', data);
        memcpy(want + sizeof(want_head) - 1 + data, want_tail, sizeof(want_tail) - 1);
        parses_to(CT, body, len, want, want_len);
        free(body);
        free(want);
}
END_TEST

/* ---- the caller's errors ---------------------------------------------------------------------- */

START_TEST(test_a_callback_error_stops_the_parse)
{
        static const char body[] = PART("Content-Disposition: form-data; name=a");
        static const char two[] = "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nA\r\n"
                                  "--XyZ\r\nContent-Disposition: form-data; name=b\r\n\r\nB";
        sh_mp *m = NULL;
        sh_error *err = NULL;
        rec r;

        memset(&r, 0, sizeof(r));
        r.fail_begin = -1;
        r.fail_data = true;
        ck_assert_int_eq(sh_mp_new(CT, &cbs, &r, &m, &err), 0);
        ck_assert_int_lt(sh_mp_feed(m, body, sizeof(body) - 1, &err), 0);
        ck_assert_int_eq(err->kind, SH_E_NO_SPACE); /* the callback's own error */
        sh_error_release(&err);
        ck_assert_int_lt(sh_mp_feed(m, "x", 1, &err), 0);
        sh_error_release(&err);
        ck_assert_int_lt(sh_mp_finish(m, &err), 0);
        sh_error_release(&err);
        ck_assert_uint_eq(r.ends, 0);
        sh_mp_free(m);
        rec_done(&r);

        memset(&r, 0, sizeof(r));
        r.fail_begin = 1;
        ck_assert_int_eq(sh_mp_new(CT, &cbs, &r, &m, &err), 0);
        ck_assert_int_lt(sh_mp_feed(m, two, strlen(two), &err), 0);
        ck_assert_str_eq(err->msg, "refused by the caller");
        sh_error_release(&err);
        ck_assert_uint_eq(r.ends, 1);
        sh_mp_free(m);
        rec_done(&r);
        sh_mp_free(NULL);
}
END_TEST

/* ---- hostile input: random and mutated bodies in random chunks --------------------------------- */

static const char sample[] =
        "pre\r\n--XyZ\r\n"
        "Content-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
        "Content-Type: application/json\r\n"
        "\r\n"
        "{\"path\":\"/workspace/a.txt\"}\r\n"
        "--XyZ \r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"a\\\"b\"\r\n"
        "\r\n"
        "hello\r\n--XyZx\r\n--X\r\n"
        "--XyZ--\r\nepilogue";

/* Parse body whole, then in random chunks: both must agree on the result, the log and the
 * error, and the callbacks must be called in order (the recorder checks it). */
static void agree(const char *body, size_t len, unsigned *seed)
{
        char why1[512], why2[512];
        rec a, b;
        int r1 = parse(CT, body, len, 0, &a, why1, sizeof(why1));
        int r2 = parse(CT, body, len, 1 + (size_t)rand_r(seed) % 9, &b, why2, sizeof(why2));

        ck_assert_int_eq(r1 < 0, r2 < 0);
        if (r1 == 0) {
                ck_assert(a.n == b.n && memcmp(a.log, b.log, a.n) == 0);
                ck_assert_uint_eq(a.begins, a.ends);
        } else {
                ck_assert_uint_le(a.ends, a.begins);
        }
        rec_done(&a);
        rec_done(&b);
}

START_TEST(test_random_and_mutated_bodies_never_crash_and_cut_anywhere_agree)
{
        static const char alphabet[] = "\r\n-XyZ:;=\" \\aC";
        unsigned seed = 7;
        char body[sizeof(sample) + 64];

        for (int round = 0; round < 6000; round++) {
                size_t len;

                if (round % 3 == 0) {
                        /* the sample with a few bytes changed, dropped or doubled */
                        memcpy(body, sample, sizeof(sample) - 1);
                        len = sizeof(sample) - 1;
                        for (int k = rand_r(&seed) % 4; k >= 0; k--) {
                                size_t at = (size_t)rand_r(&seed) % len;

                                switch (rand_r(&seed) % 3) {
                                case 0:
                                        body[at] = (char)rand_r(&seed);
                                        break;
                                case 1:
                                        memmove(body + at, body + at + 1, len - at - 1);
                                        len--;
                                        break;
                                default:
                                        if (len + 1 < sizeof(body)) {
                                                memmove(body + at + 1, body + at, len - at);
                                                len++;
                                        }
                                }
                        }
                        if (rand_r(&seed) % 4 == 0)
                                len = (size_t)rand_r(&seed) % (len + 1); /* cut it */
                } else {
                        len = (size_t)rand_r(&seed) % sizeof(body);
                        memcpy(body, "--XyZ\r\n", len < 7 ? len : 7);
                        for (size_t i = 7; i < len; i++)
                                body[i] = round % 3 == 1 ? alphabet[(size_t)rand_r(&seed) %
                                                                    (sizeof(alphabet) - 1)]
                                                         : (char)rand_r(&seed);
                }
                agree(body, len, &seed);
        }
}
END_TEST

START_TEST(test_random_content_types_never_crash)
{
        static const char alphabet[] = "multipart/form-data; boundary=\"\\ \t,";
        unsigned seed = 99;
        char ct[96], b[SH_MP_BOUNDARY_MAX + 1];

        for (int round = 0; round < 50000; round++) {
                size_t len = (size_t)rand_r(&seed) % (sizeof(ct) - 1);
                sh_error *err = NULL;

                if (round & 1) {
                        memcpy(ct, "multipart/form-data; boundary=\"\\", 33);
                        for (size_t i = 20 + (size_t)rand_r(&seed) % 13; i < len; i++)
                                ct[i] = alphabet[(size_t)rand_r(&seed) % (sizeof(alphabet) - 1)];
                } else {
                        for (size_t i = 0; i < len; i++)
                                ct[i] = (char)(1 + rand_r(&seed) % 255);
                }
                ct[len] = '\0';
                if (sh_mp_boundary(ct, b, &err) == 0) {
                        size_t bl = strlen(b);

                        ck_assert(bl >= 1 && bl <= SH_MP_BOUNDARY_MAX && b[bl - 1] != ' ');
                } else {
                        ck_assert_ptr_nonnull(err);
                }
                sh_error_release(&err);
        }
}
END_TEST

static Suite *multipart_suite(void)
{
        Suite *s = suite_create("multipart");
        TCase *sdk = tcase_create("sdk");
        TCase *rules = tcase_create("rules");
        TCase *hostile = tcase_create("hostile");

        tcase_add_test(sdk, test_the_sdk_text_upload_through_undici_formdata);
        tcase_add_test(sdk, test_the_sdk_binary_upload_through_undici_formdata);
        tcase_add_test(sdk, test_the_sdk_streamed_upload_through_its_own_writer);
        tcase_add_test(sdk, test_several_pairs_in_one_body);
        tcase_add_test(rules, test_boundaries_quoted_or_not);
        tcase_add_test(rules, test_boundaries_among_other_parameters);
        tcase_add_test(rules, test_bad_boundaries_are_refused);
        tcase_add_test(rules, test_a_body_without_the_boundary_is_refused);
        tcase_add_test(rules, test_preamble_and_epilogue_are_ignored);
        tcase_add_test(rules, test_transport_padding_after_a_boundary);
        tcase_add_test(rules, test_boundary_lookalikes_in_data_are_data);
        tcase_add_test(rules, test_empty_parts_and_an_empty_form);
        tcase_add_test(rules, test_a_cut_body_is_refused_and_its_part_never_ends);
        tcase_add_test(rules, test_header_names_and_values_are_read_leniently_where_safe);
        tcase_add_test(rules, test_quoted_strings_are_decoded);
        tcase_add_test(rules, test_a_quote_or_crlf_that_breaks_a_header_is_refused);
        tcase_add_test(rules, test_malformed_part_headers_are_refused);
        tcase_add_test(rules, test_a_part_without_a_name_is_refused);
        tcase_add_test(rules, test_repeated_headers_and_parameters_are_refused);
        tcase_add_test(rules, test_part_headers_are_bounded);
        tcase_add_test(rules, test_the_number_of_parts_is_bounded);
        tcase_add_test(rules, test_a_callback_error_stops_the_parse);
        tcase_set_timeout(hostile, 120);
        tcase_add_test(hostile, test_data_is_handed_on_as_it_comes_not_kept);
        tcase_add_test(hostile, test_header_values_after_a_large_part_are_copied_within_the_buffer);
        tcase_add_test(hostile, test_random_and_mutated_bodies_never_crash_and_cut_anywhere_agree);
        tcase_add_test(hostile, test_random_content_types_never_crash);
        suite_add_tcase(s, sdk);
        suite_add_tcase(s, rules);
        suite_add_tcase(s, hostile);
        return s;
}

int main(void)
{
        return ut_run(multipart_suite());
}
