/* sse.c: the /v1 surface's encoder of exec events (OPENSANDBOX.md section 3.1), the second
 * encoder of the engine's typed events beside the native NDJSON one (native/ndjson.c): lines
 * split as OpenSandbox's execd splits them, each a `stdout` / `stderr` event, `ping`, then
 * `execution_complete` or `error`; each event one JSON object and a blank line. Also the
 * wrapper's handshake and the random nonces and ids. Pure but for the random bytes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "execd.h"

/* ---- events ----------------------------------------------------------------------------------- */

/* An event's end: `,"timestamp":N}` and the blank line. */
static size_t tail_of(char out[48], uint64_t ts_ms)
{
        return (size_t)snprintf(out, 48, ",\"timestamp\":%" PRIu64 "}\n\n", ts_ms);
}

/* One event, written in place after one reservation (an event per line of output: this is the
 * stream's inner loop). */
static int text_event(sh_buf *q, const char *type, const char *text, size_t n, const char *tail,
                      size_t tail_len)
{
        static const char head[] = "{\"type\":\"", mid[] = "\",\"text\":";
        size_t tl = strlen(type);
        char *o;

        /* the text's JSON: 6 bytes a byte at most, and its quotes */
        if (n > (SIZE_MAX - 64 - tl - tail_len) / 6 ||
            sh_buf_reserve(q, sizeof(head) + tl + sizeof(mid) + 6 * n + 2 + tail_len) < 0)
                return -ENOMEM;
        o = q->p + q->len;
        memcpy(o, head, sizeof(head) - 1);
        o += sizeof(head) - 1;
        memcpy(o, type, tl);
        o += tl;
        memcpy(o, mid, sizeof(mid) - 1);
        o += sizeof(mid) - 1;
        o += sh_json_quote_bytes(text, n, o);
        memcpy(o, tail, tail_len);
        o += tail_len;
        q->len = (size_t)(o - q->p);
        return 0;
}

int os_sse_text(sh_buf *q, const char *type, const char *text, size_t n, uint64_t ts_ms)
{
        char tail[48];

        return text_event(q, type, text, n, tail, tail_of(tail, ts_ms));
}

int os_sse_complete(sh_buf *q, uint64_t exec_ms, uint64_t ts_ms)
{
        char ev[128];

        snprintf(ev, sizeof(ev),
                 "{\"type\":\"execution_complete\",\"execution_time\":%" PRIu64
                 ",\"timestamp\":%" PRIu64 "}\n\n",
                 exec_ms, ts_ms);
        return sh_buf_append_str(q, ev);
}

int os_sse_error(sh_buf *q, const char *evalue, const char *traceback, uint64_t ts_ms)
{
        size_t keep = sh_buf_unread(q); /* growing q may move its unread bytes to the front */
        char head[96];

        snprintf(head, sizeof(head), "{\"type\":\"error\",\"timestamp\":%" PRIu64, ts_ms);
        if (sh_buf_append_str(q, head) < 0 ||
            sh_buf_append_str(q, ",\"error\":{\"ename\":\"CommandExecError\",\"evalue\":") < 0 ||
            sh_buf_append_json(q, evalue, strlen(evalue)) < 0 ||
            sh_buf_append_str(q, ",\"traceback\":[") < 0 ||
            sh_buf_append_json(q, traceback, strlen(traceback)) < 0 ||
            sh_buf_append_str(q, "]}}\n\n") < 0) {
                q->len = q->off + keep;
                return -ENOMEM;
        }
        return 0;
}

/* ---- the encoder of exec events --------------------------------------------------------------- */

typedef struct feed_ctx {
        os_sse *s;
        sh_buf *q;
        bool err;      /* stderr */
        char tail[48]; /* the events' end, made once for all the lines of a chunk */
        size_t tail_len;
} feed_ctx;

static void feed_init(feed_ctx *f, os_sse *s, sh_buf *q, bool err, uint64_t ts)
{
        f->s = s;
        f->q = q;
        f->err = err;
        f->tail_len = tail_of(f->tail, ts);
}

static int emit_line(feed_ctx *f, const char *line, size_t len)
{
        const char *type = f->err ? "stderr" : "stdout";

        /* An empty line is sent as "\n" (OpenSandbox's execd does): never an empty text. */
        return len ? text_event(f->q, type, line, len, f->tail, f->tail_len)
                   : text_event(f->q, type, "\n", 1, f->tail, f->tail_len);
}

static int on_line(void *data, const char *line, size_t len)
{
        feed_ctx *f = data;
        os_sse *s = f->s;

        if (f->err || !s->session)
                return emit_line(f, line, len);
        /* A session run: its state follows the marker line; the empty line before it is the
         * wrapper's own "\n" (unless the command's output ended unterminated). */
        if (len == OS_NONCE_LEN && memcmp(line, s->nonce, OS_NONCE_LEN) == 0) {
                s->held_empty = false;
                s->in_state = true;
                return 1;
        }
        if (s->held_empty) {
                s->held_empty = false;
                if (emit_line(f, "", 0) < 0)
                        return -ENOMEM;
        }
        if (len == 0) {
                s->held_empty = true;
                return 0;
        }
        return emit_line(f, line, len);
}

static void keep_state(os_sse *s, const char *p, size_t n)
{
        if (s->state_over)
                return;
        if (s->state.len + n > OS_SESSION_STATE_MAX || sh_buf_append(&s->state, p, n) < 0) {
                s->state_over = true;
                sh_buf_done(&s->state);
        }
}

static int feed_chunk(os_sse *s, sh_buf *q, sh_exec_stream stream, const char *p, size_t n,
                      uint64_t ts)
{
        feed_ctx f;
        ssize_t k;

        feed_init(&f, s, q, stream == SH_EXEC_STDERR, ts);
        if (!f.err && s->in_state) {
                keep_state(s, p, n);
                return 0;
        }
        s->lines[f.err].max = OS_SSE_LINE_MAX;
        k = sh_linesplit_feed(&s->lines[f.err], p, n, on_line, &f);
        if (k < 0)
                return (int)k;
        if ((size_t)k < n)
                keep_state(s, p + k, n - (size_t)k);
        return 0;
}

/* The end: the last unterminated line of each stream, stdout first. */
static int flush_lines(os_sse *s, sh_buf *q, uint64_t ts)
{
        feed_ctx f;

        feed_init(&f, s, q, false, ts);
        if (!s->in_state) {
                if (sh_linesplit_flush(&s->lines[0], on_line, &f) < 0)
                        return -ENOMEM;
                if (s->held_empty) {
                        s->held_empty = false;
                        if (emit_line(&f, "", 0) < 0)
                                return -ENOMEM;
                }
        }
        f.err = true;
        return sh_linesplit_flush(&s->lines[1], on_line, &f);
}

static int encode_exit(os_sse *s, sh_buf *q, const sh_exec_exit *x, const char *why, uint64_t now)
{
        char evalue[16], tb[160];

        if (flush_lines(s, q, now) < 0)
                return -ENOMEM;
        if (x->code == 0)
                return os_sse_complete(q, now > s->start_ms ? now - s->start_ms : 0, now);
        snprintf(evalue, sizeof(evalue), "%d", x->code);
        sh_exec_exit_text(x, why, tb, sizeof(tb));
        return os_sse_error(q, evalue, tb, now);
}

int os_sse_event(os_sse *s, sh_buf *q, const sh_exec_event *ev, uint64_t now_ms)
{
        size_t keep = sh_buf_unread(q); /* growing q may move its unread bytes to the front */
        int r = 0;

        if (s->ended)
                return 0;
        switch (ev->type) {
        case SH_EXEC_EV_CHUNK:
                r = feed_chunk(s, q, ev->chunk.stream, ev->chunk.data, ev->chunk.len, now_ms);
                break;
        case SH_EXEC_EV_HEARTBEAT:
                r = os_sse_text(q, "ping", "pong", 4, now_ms);
                break;
        case SH_EXEC_EV_EXIT:
                s->ended = true;
                r = encode_exit(s, q, &ev->exit, ev->why, now_ms);
                break;
        case SH_EXEC_EV_ERROR:
                s->ended = true;
                r = flush_lines(s, q, now_ms);
                if (r == 0) {
                        const char *t = ev->why ? ev->why : ev->error.text ? ev->error.text : "";

                        r = os_sse_error(q, t, t, now_ms);
                }
                break;
        }
        /* Whole events only: a client never sees half of one. */
        if (r < 0)
                q->len = q->off + keep;
        return r;
}

int os_sse_flush(os_sse *s, sh_buf *q, uint64_t now_ms)
{
        size_t keep = sh_buf_unread(q);
        int r = flush_lines(s, q, now_ms);

        if (r < 0)
                q->len = q->off + keep;
        return r;
}

int os_sse_object(sh_buf *q, const char *type, cJSON *o, uint64_t ts_ms)
{
        size_t keep = sh_buf_unread(q);
        char *text;
        int r = -ENOMEM;

        if (cJSON_AddStringToObject(o, "type", type) &&
            cJSON_AddNumberToObject(o, "timestamp", (double)ts_ms) &&
            (text = cJSON_PrintUnformatted(o))) {
                r = sh_buf_append_str(q, text) < 0 || sh_buf_append_str(q, "\n\n") < 0 ? -ENOMEM
                                                                                       : 0;
                free(text);
        }
        if (r < 0)
                q->len = q->off + keep;
        return r;
}

const char *os_sse_session_state(os_sse *s, size_t *ret_len)
{
        char end[OS_NONCE_LEN + 3];
        const char *at;

        if (!s->in_state || s->state_over || !s->state.p)
                return NULL;
        snprintf(end, sizeof(end), "%s.\n", s->nonce);
        at = memmem(s->state.p, s->state.len, end, strlen(end));
        if (!at)
                return NULL;
        *ret_len = (size_t)(at - s->state.p);
        return s->state.p;
}

void os_sse_done(os_sse *s)
{
        sh_linesplit_done(&s->lines[0]);
        sh_linesplit_done(&s->lines[1]);
        sh_buf_done(&s->state);
}

/* ---- the handshake ---------------------------------------------------------------------------- */

static os_hs_result handshake_word(const os_handshake *h)
{
        static const struct {
                const char *word;
                os_hs_result result;
        } words[] = {{"ok", OS_HS_OK},
                     {"nodir", OS_HS_NODIR},
                     {"notdir", OS_HS_NOTDIR},
                     {"noaccess", OS_HS_NOACCESS}};

        if (h->len > OS_NONCE_LEN + 1 && memcmp(h->line, h->nonce, OS_NONCE_LEN) == 0 &&
            h->line[OS_NONCE_LEN] == ' ')
                for (size_t w = 0; w < ARRAY_SIZE(words); w++)
                        if (STREQ(h->line + OS_NONCE_LEN + 1, words[w].word))
                                return words[w].result;
        return OS_HS_BAD;
}

/* Merged: bytes before the handshake line, kept up to OS_CAPTURE. */
static void keep_noise(sh_buf *noise, const char *p, size_t n)
{
        size_t room = noise->len < OS_CAPTURE ? OS_CAPTURE - noise->len : 0;

        if (room && sh_buf_append(noise, p, n < room ? n : room) < 0)
                return; /* out of memory: only an explanation is lost */
}

size_t os_handshake_feed(os_handshake *h, const char *p, size_t n, sh_buf *noise)
{
        size_t i;

        for (i = 0; i < n && h->result == OS_HS_WAIT; i++) {
                if (h->skip) {
                        keep_noise(noise, p + i, 1);
                        if (p[i] == '\n')
                                h->skip = false;
                        continue;
                }
                if (p[i] != '\n') {
                        if (h->len == sizeof(h->line) - 1) {
                                if (!noise) {
                                        h->result = OS_HS_BAD;
                                        return i + 1;
                                }
                                /* longer than the handshake's: someone else's line */
                                keep_noise(noise, h->line, h->len);
                                keep_noise(noise, p + i, 1);
                                h->len = 0;
                                h->skip = true;
                                continue;
                        }
                        h->line[h->len++] = p[i];
                        continue;
                }
                h->line[h->len] = '\0';
                if (noise && handshake_word(h) == OS_HS_BAD) {
                        keep_noise(noise, h->line, h->len);
                        keep_noise(noise, "\n", 1);
                        h->len = 0;
                        continue;
                }
                h->result = handshake_word(h);
                return i + 1;
        }
        return i;
}
