/* fuzz_codeframe.c: the code driver's frames (code/codeframe.c), which the cell's own code can
 * forge. Input: a mode byte; '0': the rest is one line for sh_code_frame_parse (a bundle bound
 * from the next byte); '1': the rest is the frames pipe, fed to the splitter in pieces (a bound
 * byte, then pieces of a length byte each), every line taken after each piece parsed.
 * Properties: a frame taken holds exactly what its type promises within its bounds (bundle
 * keys MIME types none alike, string values, the byte bound; traceback count and bytes), the
 * same line parses the same twice, and the splitter gives back exactly the bytes it was fed,
 * line by line, each within its bound, breaking only on a line over it. */
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <strings.h>

#include "sh/codeframe.h"

static uint64_t frame_hash(int r, const sh_code_frame *f)
{
        uint64_t h = fz_hash(0, &r, sizeof(r));
        const cJSON *m;

        if (r < 0)
                return h;
        h = fz_hash(h, &f->type, sizeof(f->type));
        if (f->msg)
                h = fz_hash(h, f->msg, strlen(f->msg));
        if (f->ename)
                h = fz_hash(h, f->ename, strlen(f->ename));
        if (f->evalue)
                h = fz_hash(h, f->evalue, strlen(f->evalue));
        for (size_t i = 0; i < f->traceback_n; i++)
                h = fz_hash(h, f->traceback[i], strlen(f->traceback[i]) + 1);
        if (f->bundle)
                cJSON_ArrayForEach(m, f->bundle)
                {
                        h = fz_hash(h, m->string, strlen(m->string) + 1);
                        h = fz_hash(h, m->valuestring, strlen(m->valuestring) + 1);
                }
        return h;
}

static void check_frame(const sh_code_frame *f, size_t bundle_max)
{
        const cJSON *m, *k;
        size_t bytes = 0, items = 0;

        switch (f->type) {
        case SH_CODE_FRAME_READY:
        case SH_CODE_FRAME_DONE:
                FZ_CHECK(!f->msg && !f->bundle && !f->ename && !f->traceback);
                break;
        case SH_CODE_FRAME_FAIL:
                FZ_CHECK(f->msg && strlen(f->msg) <= SH_CODE_FAIL_MSG_MAX);
                break;
        case SH_CODE_FRAME_RESULT:
                FZ_CHECK(cJSON_IsObject(f->bundle));
                cJSON_ArrayForEach(m, f->bundle)
                {
                        FZ_CHECK(cJSON_IsString(m) && m->valuestring && m->string);
                        FZ_CHECK(strchr(m->string, '/') && strlen(m->string) <= SH_CODE_MIME_MAX);
                        for (k = f->bundle->child; k != m; k = k->next)
                                FZ_CHECK(strcasecmp(k->string, m->string) != 0);
                        bytes += strlen(m->string) + strlen(m->valuestring);
                        items++;
                }
                FZ_CHECK(items >= 1 && items <= SH_CODE_BUNDLE_ITEMS_MAX && bytes <= bundle_max);
                break;
        case SH_CODE_FRAME_ERROR:
                FZ_CHECK(f->ename && f->evalue && f->traceback);
                FZ_CHECK(*f->ename && strlen(f->ename) <= SH_CODE_ENAME_MAX);
                FZ_CHECK(f->traceback_n <= SH_CODE_TRACEBACK_MAX);
                bytes = strlen(f->ename) + strlen(f->evalue);
                for (size_t i = 0; i < f->traceback_n; i++)
                        bytes += strlen(f->traceback[i]);
                FZ_CHECK(bytes <= SH_CODE_ERROR_MAX);
                break;
        default:
                FZ_CHECK(!"a type out of the enum");
        }
}

/* One line, parsed twice (as an exact-size copy: a read past it is ASan's). */
static void one_line(const char *p, size_t n, size_t bundle_max)
{
        char *line = fz_dup(p, n);
        sh_code_frame a, b;
        int ra = sh_code_frame_parse(line, n, bundle_max, &a);
        int rb = sh_code_frame_parse(line, n, bundle_max, &b);

        FZ_CHECK(ra == 0 || ra == -1);
        FZ_CHECK(frame_hash(ra, &a) == frame_hash(rb, &b));
        if (ra == 0)
                check_frame(&a, bundle_max);
        else
                FZ_CHECK(!a.msg && !a.bundle && !a.ename && !a.evalue && !a.traceback);
        sh_code_frame_done(&a);
        sh_code_frame_done(&b);
        free(line);
}

static void splitter(fz *f)
{
        size_t max = fz_u8(f) % 64, fed = 0, got = 0, open = 0;
        /* What was fed, in one piece (the input has a length byte before each piece). */
        char *all = malloc(f->n + 1);
        const char *piece, *l;
        sh_code_framebuf b;
        bool over = false;
        size_t n, ln;
        int r;

        if (!all)
                abort();
        sh_code_framebuf_init(&b, max);
        while (f->n) {
                n = fz_take(f, fz_u8(f), &piece);
                /* Whether this piece puts a line over the bound, computed apart. */
                for (size_t i = 0; i < n; i++) {
                        if (piece[i] == '\n')
                                open = 0;
                        else if (++open > max)
                                over = true;
                }
                r = sh_code_framebuf_append(&b, piece, n);
                FZ_CHECK(r == 0 || r == -1);
                if (r < 0) {
                        FZ_CHECK(over);
                        FZ_CHECK(sh_code_framebuf_take(&b, &l, &ln) == -1);
                        break;
                }
                FZ_CHECK(!over);
                memcpy(all + fed, piece, n);
                fed += n;
                while ((r = sh_code_framebuf_take(&b, &l, &ln)) == 1) {
                        FZ_CHECK(ln <= max && !memchr(l, '\n', ln));
                        FZ_CHECK(got + ln < fed && memcmp(l, all + got, ln) == 0);
                        FZ_CHECK(all[got + ln] == '\n');
                        got += ln + 1;
                        one_line(l, ln, 1024);
                }
                FZ_CHECK(r == 0);
                FZ_CHECK(got + sh_code_framebuf_pending(&b) == fed);
        }
        sh_code_framebuf_done(&b);
        free(all);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        size_t bundle_max;
        const char *p;
        size_t n;

        switch (fz_mode(&f, 2)) {
        case 0:
                bundle_max = (size_t)fz_u8(&f) * 64;
                n = fz_take(&f, f.n, &p);
                one_line(p, n, bundle_max);
                break;
        case 1:
                splitter(&f);
                break;
        }
        return 0;
}
