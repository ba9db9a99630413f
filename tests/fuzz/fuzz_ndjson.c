/* fuzz_ndjson.c: the native encoder of a command's output (native/ndjson.c) and the base64 it
 * uses (core/base64.c, AVX2 where the CPU has it). Input: events as in fuzz_sse ('o'/'e' +
 * length byte + bytes, 'h', 'x' + code byte + flags byte, 'E' + length + text); other bytes are
 * skipped. Properties: every event is one line of one JSON object; a chunk's "o" (an exit's
 * "out" and "err") decodes to its very bytes; the vector and the table base64 agree. */
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <sodium.h>

#include "sh/base64.h"
#include "sh/native.h"

/* The base64 of a field is the n bytes at p. */
static void check_b64(const cJSON *o, const char *key, const char *p, size_t n)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        unsigned char *bin = malloc(n + 1);
        size_t len = 0;

        if (!bin)
                abort();
        FZ_CHECK(cJSON_IsString(v));
        FZ_CHECK(sodium_base642bin(bin, n + 1, v->valuestring, strlen(v->valuestring), NULL, &len,
                                   NULL, sodium_base64_VARIANT_ORIGINAL) == 0);
        FZ_CHECK(len == n && (n == 0 || memcmp(bin, p, n) == 0));
        free(bin);
}

/* Both base64 paths give the same text. */
static void check_paths(const char *p, size_t n)
{
        char *a = malloc(sh_base64_len(n) + 1), *b = malloc(sh_base64_len(n) + 1);
        size_t la, lb;

        if (!a || !b)
                abort();
        la = sh_base64_encode(a, p, n);
        sh_base64_force_scalar(true);
        lb = sh_base64_encode(b, p, n);
        sh_base64_force_scalar(false);
        FZ_CHECK(la == sh_base64_len(n) && la == lb && memcmp(a, b, la) == 0);
        free(a);
        free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        sh_buf q = {0};

        while (f.n) {
                sh_exec_event ev = {.type = SH_EXEC_EV_CHUNK};
                uint8_t op = fz_u8(&f), bits;
                size_t from = q.len, n;
                const char *p;
                char *text = NULL, *line;
                cJSON *j;

                switch (op) {
                case 'o':
                case 'e':
                        ev.chunk.stream = op == 'o' ? SH_EXEC_STDOUT : SH_EXEC_STDERR;
                        ev.chunk.len = fz_take(&f, fz_u8(&f), &ev.chunk.data);
                        check_paths(ev.chunk.data, ev.chunk.len);
                        break;
                case 'h':
                        ev.type = SH_EXEC_EV_HEARTBEAT;
                        break;
                case 'x':
                        ev.type = SH_EXEC_EV_EXIT;
                        ev.exit.code = (int8_t)fz_u8(&f);
                        bits = fz_u8(&f);
                        ev.exit.signal = bits & 1 ? 9 : 0;
                        ev.exit.oom = bits & 2;
                        ev.exit.truncated = bits & 4;
                        n = fz_take(&f, bits >> 3, &ev.exit.out);
                        ev.exit.out_len = n / 2;
                        ev.exit.err = ev.exit.out + n / 2;
                        ev.exit.err_len = n - n / 2;
                        break;
                case 'E':
                        ev.type = SH_EXEC_EV_ERROR;
                        n = fz_take(&f, fz_u8(&f), &p);
                        text = fz_str(p, n);
                        ev.error.kind = (sh_error_kind)(n % 8);
                        ev.error.text = text;
                        break;
                default:
                        continue;
                }
                if (sh_ndjson_event(&q, &ev) < 0)
                        abort(); /* only out of memory */
                FZ_CHECK(q.len > from && q.p[q.len - 1] == '\n');
                FZ_CHECK(!memchr(q.p + from, '\n', q.len - from - 1));
                line = fz_dup(q.p + from, q.len - from - 1);
                j = cJSON_ParseWithLength(line, q.len - from - 1);
                FZ_CHECK(cJSON_IsObject(j));
                if (ev.type == SH_EXEC_EV_CHUNK) {
                        check_b64(j, "o", ev.chunk.data, ev.chunk.len);
                } else if (ev.type == SH_EXEC_EV_EXIT) {
                        check_b64(j, "out", ev.exit.out, ev.exit.out_len);
                        check_b64(j, "err", ev.exit.err, ev.exit.err_len);
                }
                cJSON_Delete(j);
                free(line);
                free(text);
        }
        sh_buf_done(&q);
        return 0;
}
