/* fuzz_multipart.c: the streaming multipart/form-data parser of the /v1 upload, through its
 * header's API only (multipart.h). Input: the Content-Type up to the first '\n', one byte that
 * chooses how the body is cut, then the body. The body is parsed twice, whole and in chunks;
 * properties: the callbacks come in order (begin, data of n > 0, end), and the answer and,
 * for a body that parses, every part's name, filename, type and data are the same however the
 * body was cut. */
#include "fuzz.h"

#include "sh/multipart.h"

typedef struct rec {
        uint64_t h; /* of every callback's arguments, in order */
        unsigned begins, ends;
        bool open;
} rec;

static uint64_t hash_str(uint64_t h, const char *s)
{
        return s ? fz_hash(h, s, strlen(s) + 1) : fz_hash(h, "-", 1);
}

static int on_begin(void *ctx, const sh_mp_part *part, sh_error **err)
{
        rec *r = ctx;

        FZ_CHECK(!r->open);
        FZ_CHECK(part->index == r->begins);
        FZ_CHECK(part->name && part->name[0]);
        r->open = true;
        r->begins++;
        r->h = fz_hash(r->h, "[", 1);
        r->h = hash_str(r->h, part->name);
        r->h = hash_str(r->h, part->filename);
        r->h = hash_str(r->h, part->content_type);
        return 0;
}

static int on_data(void *ctx, const char *p, size_t n, sh_error **err)
{
        rec *r = ctx;

        FZ_CHECK(r->open);
        FZ_CHECK(n > 0);
        /* the pieces' bounds depend on the cut: only their bytes are hashed */
        r->h = fz_hash(r->h, p, n);
        return 0;
}

static int on_end(void *ctx, sh_error **err)
{
        rec *r = ctx;

        FZ_CHECK(r->open);
        r->open = false;
        r->ends++;
        r->h = fz_hash(r->h, "]", 1);
        return 0;
}

static const sh_mp_callbacks cbs = {
        .part_begin = on_begin, .part_data = on_data, .part_end = on_end};

/* Parse body[0..n) fed in pieces of step(i) bytes (0: all at once). 0 or the error's kind. */
static int parse(const char *ctype, const char *body, size_t n, unsigned cut, rec *r)
{
        sh_error *err = NULL;
        sh_mp *m = NULL;
        size_t off = 0, i = 0;
        int ret = 0;

        if (sh_mp_new(ctype, &cbs, r, &m, &err) < 0) {
                ret = -(int)sh_error_kind_of(err) - 1;
                sh_error_release(&err);
                return ret;
        }
        while (off < n && ret == 0) {
                /* 1..cut bytes, varying, so that a delimiter falls across every seam */
                size_t k = cut ? 1 + (i++ * 7 + cut) % cut : n - off;

                if (k > n - off)
                        k = n - off;
                if (sh_mp_feed(m, body + off, k, &err) < 0)
                        ret = -(int)sh_error_kind_of(err) - 1;
                off += k;
        }
        if (ret == 0 && sh_mp_finish(m, &err) < 0)
                ret = -(int)sh_error_kind_of(err) - 1;
        if (ret == 0) {
                FZ_CHECK(!r->open && r->begins == r->ends);
                FZ_CHECK(sh_mp_parts(m) == r->begins);
        }
        sh_error_release(&err);
        sh_mp_free(m);
        return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        char *ctype = fz_line(&f);
        unsigned cut = fz_u8(&f) % 32 + 1;
        char *body = fz_dup(f.p, f.n);
        rec whole = {0}, cutup = {0};
        int a, b;

        a = parse(ctype, body, f.n, 0, &whole);
        b = parse(ctype, body, f.n, cut, &cutup);
        FZ_CHECK((a == 0) == (b == 0));
        if (a == 0)
                FZ_CHECK(whole.h == cutup.h && whole.begins == cutup.begins);
        free(body);
        free(ctype);
        return 0;
}
