/* fuzz_sse.c: the /v1 encoder of a command's output (opensandbox/sse.c): a sandbox's processes
 * write any bytes, which become SSE events, one JSON object each. Input: a flags byte (bit 0: a
 * session run, whose state follows a nonce line; bit 1: stdout goes through the wrapper's
 * handshake first; bit 2: stderr shares that pipe), then events: 'o'/'e' + length byte + bytes
 * (a chunk of stdout/stderr), 'O' + byte N + 1..4 bytes (a chunk of (N % 136 + 1) x 512 bytes
 * of that pattern, up to past the 64 KiB line cut; one at most), 'h' (heartbeat), 'x' + code
 * byte (the exit), 'E' + length + text (an engine error); other bytes are skipped. Properties: every event is one valid JSON object
 * (lone surrogates for bytes that are not UTF-8) ending in a blank line, of a known type, its
 * text no longer than a line and holding no line end (but the "\n" of an empty line); without
 * a session, the stdout bytes that are no line end all come out as text. */
#include "fuzz.h"

#include <cjson/cJSON.h>

#include "execd.h"

#define NONCE "0123456789abcdef0123456789abcdef"

typedef struct counts {
        size_t out_text;  /* bytes of stdout's text events (the "\n" of an empty line not) */
        size_t out_bytes; /* stdout bytes fed that are no line end */
        bool end;
} counts;

/* The events q gained from `from` on. */
static void check_events(const sh_buf *q, size_t from, counts *c)
{
        const char *p, *end;

        if (q->len == from)
                return; /* nothing (q->p may still be NULL) */
        p = q->p + from;
        end = q->p + q->len;
        while (p < end) {
                const char *blank = memmem(p, (size_t)(end - p), "\n\n", 2);
                size_t len;
                const char *why = NULL;
                char *text;
                cJSON *j, *type, *t;

                FZ_CHECK(blank != NULL);
                len = (size_t)(blank - p);
                text = fz_dup(p, len);
                /* a NUL byte of the output is \u0000, which the intake refuses: read it as
                 * \u0001 here (a literal "\u0000" becomes "\u0001": as many bytes) */
                for (char *z = text; (z = memmem(z, len - (size_t)(z - text), "\\u0000", 6));)
                        z[5] = '1';
                j = sh_json_parse_text(text, &len, SH_JSON_SURROGATE_BYTES, &why);
                FZ_CHECK(cJSON_IsObject(j));
                type = cJSON_GetObjectItemCaseSensitive(j, "type");
                FZ_CHECK(cJSON_IsString(type));
                t = cJSON_GetObjectItemCaseSensitive(j, "text");
                if (STREQ(type->valuestring, "stdout") || STREQ(type->valuestring, "stderr")) {
                        size_t n;

                        FZ_CHECK(cJSON_IsString(t));
                        n = strlen(t->valuestring);
                        FZ_CHECK(n >= 1 && n <= OS_SSE_LINE_MAX);
                        if (!STREQ(t->valuestring, "\n"))
                                FZ_CHECK(!strpbrk(t->valuestring, "\r\n"));
                        if (STREQ(type->valuestring, "stdout") && !STREQ(t->valuestring, "\n"))
                                c->out_text += n;
                } else if (STREQ(type->valuestring, "error") ||
                           STREQ(type->valuestring, "execution_complete")) {
                        c->end = true;
                } else {
                        FZ_CHECK(STREQ(type->valuestring, "ping"));
                }
                cJSON_Delete(j);
                free(text);
                p = blank + 2;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        uint8_t flags = fz_u8(&f);
        os_sse s = {.session = flags & 1, .nonce = NONCE};
        os_handshake hs = {.nonce = NONCE};
        bool handshake = flags & 2, merged = flags & 4;
        sh_buf q = {0}, noise = {0};
        counts c = {0};
        char *big = NULL;
        unsigned bigs = 0;

        while (f.n && !c.end) {
                sh_exec_event ev = {.type = SH_EXEC_EV_CHUNK};
                uint8_t op = fz_u8(&f);
                size_t from = q.len, n, k, used;
                const char *p;
                char *text = NULL;

                switch (op) {
                case 'o':
                case 'e':
                        ev.chunk.stream = op == 'o' ? SH_EXEC_STDOUT : SH_EXEC_STDERR;
                        ev.chunk.len = fz_take(&f, fz_u8(&f), &ev.chunk.data);
                        break;
                case 'O':
                        if (++bigs > 1)
                                continue; /* one crosses a cut: keep runs fast */
                        n = (size_t)(fz_u8(&f) % 136 + 1) * 512; /* up to 68 KiB */
                        k = fz_take(&f, 1 + f.n % 4, &p);
                        free(big);
                        big = malloc(n);
                        if (!big)
                                abort();
                        for (size_t i = 0; i < n; i++)
                                big[i] = k ? p[i % k] : 'a';
                        ev.chunk.data = big;
                        ev.chunk.len = n;
                        break;
                case 'h':
                        ev.type = SH_EXEC_EV_HEARTBEAT;
                        break;
                case 'x':
                        ev.type = SH_EXEC_EV_EXIT;
                        ev.exit.code = fz_u8(&f);
                        ev.exit.signal = ev.exit.code > 128 ? ev.exit.code - 128 : 0;
                        break;
                case 'E':
                        ev.type = SH_EXEC_EV_ERROR;
                        n = fz_take(&f, fz_u8(&f), &p);
                        text = fz_str(p, n);
                        ev.error.kind = SH_E_INTERNAL;
                        ev.error.text = text;
                        break;
                default:
                        continue;
                }
                /* as commands.c does: stdout goes to the handshake until it has its answer */
                if (handshake && ev.type == SH_EXEC_EV_CHUNK && hs.result == OS_HS_WAIT) {
                        if (ev.chunk.stream == SH_EXEC_STDERR) {
                                free(text);
                                continue;
                        }
                        used = os_handshake_feed(&hs, ev.chunk.data, ev.chunk.len,
                                                 merged ? &noise : NULL);
                        FZ_CHECK(used <= ev.chunk.len && noise.len <= OS_CAPTURE);
                        ev.chunk.data += used;
                        ev.chunk.len -= used;
                        if (hs.result != OS_HS_OK || ev.chunk.len == 0) {
                                free(text);
                                continue;
                        }
                }
                if (ev.type == SH_EXEC_EV_CHUNK && ev.chunk.stream == SH_EXEC_STDOUT)
                        for (size_t i = 0; i < ev.chunk.len; i++)
                                c.out_bytes += ev.chunk.data[i] != '\n' && ev.chunk.data[i] != '\r';
                if (os_sse_event(&s, &q, &ev, 1000) < 0)
                        abort(); /* only out of memory */
                check_events(&q, from, &c);
                free(text);
        }
        if (c.end && !s.session)
                FZ_CHECK(c.out_text == c.out_bytes);
        free(big);
        os_sse_done(&s);
        sh_buf_done(&q);
        sh_buf_done(&noise);
        return 0;
}
