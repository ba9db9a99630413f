/* codeframe.c: the frames of a code driver's fd 3, decoded, and the splitter of that pipe into
 * lines (sh/codeframe.h) (pure). Every line is hostile: the cell's code runs in the driver's
 * process and may write anything there. */
#include "sh/codeframe.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sh/macro.h"
#include "sh/util.h"

const char *sh_code_frame_type_name(sh_code_frame_type t)
{
        switch (t) {
        case SH_CODE_FRAME_READY:
                return "ready";
        case SH_CODE_FRAME_FAIL:
                return "fail";
        case SH_CODE_FRAME_RESULT:
                return "result";
        case SH_CODE_FRAME_ERROR:
                return "error";
        case SH_CODE_FRAME_DONE:
                return "done";
        }
        return "unknown";
}

void sh_code_frame_done(sh_code_frame *f)
{
        if (!f)
                return;
        free(f->msg);
        cJSON_Delete(f->bundle);
        free(f->ename);
        free(f->evalue);
        for (size_t i = 0; i < f->traceback_n; i++)
                free(f->traceback[i]);
        free(f->traceback);
        memset(f, 0, sizeof(*f));
}

/* The object's members are exactly `keys` (n of them), each once. */
static bool exact_keys(const cJSON *o, const char *const *keys, size_t n)
{
        bool seen[4] = {false};
        size_t count = 0;
        const cJSON *m;

        if (n > sizeof(seen) / sizeof(seen[0]))
                return false;
        cJSON_ArrayForEach(m, o)
        {
                size_t i;

                for (i = 0; i < n; i++)
                        if (strcmp(m->string, keys[i]) == 0)
                                break;
                if (i == n || seen[i])
                        return false;
                seen[i] = true;
                count++;
        }
        return count == n;
}

/* RFC 9110's token characters. */
static bool tchar(unsigned char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A MIME type without parameters: token "/" token, at most SH_CODE_MIME_MAX bytes. */
static bool mime_type(const char *s)
{
        size_t n = strlen(s), type = 0;

        if (n == 0 || n > SH_CODE_MIME_MAX)
                return false;
        while (type < n && tchar((unsigned char)s[type]))
                type++;
        if (type == 0 || type >= n - 1 || s[type] != '/')
                return false;
        for (size_t i = type + 1; i < n; i++)
                if (!tchar((unsigned char)s[i]))
                        return false;
        return true;
}

/* A result's data: 1..SH_CODE_BUNDLE_ITEMS_MAX members, MIME type keys none alike ignoring
 * case, string values, keys and values within bundle_max bytes. */
static bool bundle_ok(const cJSON *data, size_t bundle_max)
{
        const cJSON *m, *k;
        size_t items = 0, bytes = 0;

        if (!cJSON_IsObject(data))
                return false;
        cJSON_ArrayForEach(m, data)
        {
                size_t add;

                if (++items > SH_CODE_BUNDLE_ITEMS_MAX || !mime_type(m->string) ||
                    !cJSON_IsString(m) || !m->valuestring)
                        return false;
                add = strlen(m->string) + strlen(m->valuestring);
                if (add > bundle_max - bytes)
                        return false;
                bytes += add;
                for (k = data->child; k != m; k = k->next)
                        if (strcasecmp(k->string, m->string) == 0)
                                return false;
        }
        return items > 0;
}

/* A string member's text, or NULL. */
static const char *text_of(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int parse_fail(const cJSON *j, sh_code_frame *f)
{
        static const char *const keys[] = {"t", "msg"};
        const char *msg = text_of(j, "msg");

        if (!exact_keys(j, keys, 2) || !msg || strlen(msg) > SH_CODE_FAIL_MSG_MAX)
                return -1;
        f->msg = strdup(msg);
        return f->msg ? 0 : -1;
}

static int parse_result(cJSON *j, size_t bundle_max, sh_code_frame *f)
{
        static const char *const keys[] = {"t", "data"};

        if (!exact_keys(j, keys, 2) ||
            !bundle_ok(cJSON_GetObjectItemCaseSensitive(j, "data"), bundle_max))
                return -1;
        f->bundle = cJSON_DetachItemFromObjectCaseSensitive(j, "data");
        return f->bundle ? 0 : -1;
}

static int parse_error(const cJSON *j, sh_code_frame *f)
{
        static const char *const keys[] = {"t", "ename", "evalue", "traceback"};
        const char *ename = text_of(j, "ename"), *evalue = text_of(j, "evalue");
        const cJSON *tb = cJSON_GetObjectItemCaseSensitive(j, "traceback"), *l;
        size_t bytes, n = 0;

        if (!exact_keys(j, keys, 4) || !ename || !evalue || !cJSON_IsArray(tb))
                return -1;
        bytes = strlen(ename);
        if (bytes == 0 || bytes > SH_CODE_ENAME_MAX)
                return -1;
        bytes += strlen(evalue);
        if (bytes > SH_CODE_ERROR_MAX)
                return -1;
        cJSON_ArrayForEach(l, tb)
        {
                size_t add;

                if (++n > SH_CODE_TRACEBACK_MAX || !cJSON_IsString(l) || !l->valuestring)
                        return -1;
                add = strlen(l->valuestring);
                if (add > SH_CODE_ERROR_MAX - bytes)
                        return -1;
                bytes += add;
        }
        f->ename = strdup(ename);
        f->evalue = strdup(evalue);
        f->traceback = calloc(n ? n : 1, sizeof(*f->traceback));
        if (!f->ename || !f->evalue || !f->traceback)
                return -1;
        cJSON_ArrayForEach(l, tb)
        {
                f->traceback[f->traceback_n] = strdup(l->valuestring);
                if (!f->traceback[f->traceback_n])
                        return -1;
                f->traceback_n++;
        }
        return 0;
}

int sh_code_frame_parse(const char *line, size_t len, size_t bundle_max, sh_code_frame *ret)
{
        static const char *const t_only[] = {"t"};
        _cleanup_free_ char *text = NULL;
        _cleanup_cjson_ cJSON *j = NULL;
        sh_code_frame f = {0};
        const char *t, *why;
        size_t n = len;
        int r = -1;

        memset(ret, 0, sizeof(*ret));
        if (!line || len == 0 || len == SIZE_MAX)
                return -1;
        /* sh_json_parse_text judges the text in place: a copy of the line, NUL-terminated. */
        text = malloc(len + 1);
        if (!text)
                return -1;
        memcpy(text, line, len);
        text[len] = '\0';
        j = sh_json_parse_text(text, &n, 0, &why);
        if (!cJSON_IsObject(j))
                return -1;
        t = text_of(j, "t");
        if (!t)
                return -1;
        if (strcmp(t, "ready") == 0 || strcmp(t, "done") == 0) {
                f.type = t[0] == 'r' ? SH_CODE_FRAME_READY : SH_CODE_FRAME_DONE;
                r = exact_keys(j, t_only, 1) ? 0 : -1;
        } else if (strcmp(t, "fail") == 0) {
                f.type = SH_CODE_FRAME_FAIL;
                r = parse_fail(j, &f);
        } else if (strcmp(t, "result") == 0) {
                f.type = SH_CODE_FRAME_RESULT;
                r = parse_result(j, bundle_max, &f);
        } else if (strcmp(t, "error") == 0) {
                f.type = SH_CODE_FRAME_ERROR;
                r = parse_error(j, &f);
        }
        if (r < 0) {
                sh_code_frame_done(&f);
                return -1;
        }
        *ret = f;
        return 0;
}

/* ---- the splitter ------------------------------------------------------------------------ */

void sh_code_framebuf_init(sh_code_framebuf *b, size_t max)
{
        *b = (sh_code_framebuf){.max = max};
}

void sh_code_framebuf_done(sh_code_framebuf *b)
{
        sh_buf_done(&b->buf);
        b->complete = 0;
}

/* Broken for good: what it holds is dropped. */
static int framebuf_break(sh_code_framebuf *b, int r)
{
        sh_code_framebuf_done(b);
        b->broken = true;
        return r;
}

int sh_code_framebuf_append(sh_code_framebuf *b, const void *p, size_t n)
{
        const char *nl, *start;
        size_t from;

        if (b->broken)
                return -1;
        if (n == 0)
                return 0;
        from = sh_buf_unread(&b->buf);
        /* sh_buf drops what was taken before it grows: it holds no more than the lines not
         * taken and this append. */
        if (sh_buf_append(&b->buf, p, n) < 0)
                return framebuf_break(b, -2);
        start = b->buf.p + b->buf.off;
        /* Each line this append completes, and the one it leaves open, within max. */
        while ((nl = memchr(start + from, '\n', sh_buf_unread(&b->buf) - from))) {
                if ((size_t)(nl - start) - b->complete > b->max)
                        return framebuf_break(b, -1);
                b->complete = (size_t)(nl - start) + 1;
                from = b->complete;
        }
        if (sh_buf_unread(&b->buf) - b->complete > b->max)
                return framebuf_break(b, -1);
        return 0;
}

int sh_code_framebuf_take(sh_code_framebuf *b, const char **ret_line, size_t *ret_len)
{
        const char *start, *nl;
        size_t used;

        if (b->broken)
                return -1;
        if (b->complete == 0)
                return 0;
        /* Every '\n' among the complete bytes ends a line append has checked. */
        start = b->buf.p + b->buf.off;
        nl = memchr(start, '\n', b->complete);
        if (!nl)
                return framebuf_break(b, -1); /* cannot be: complete ends with a '\n' */
        used = (size_t)(nl - start) + 1;
        *ret_line = start;
        *ret_len = used - 1;
        b->buf.off += used;
        b->complete -= used;
        return 1;
}

size_t sh_code_framebuf_pending(const sh_code_framebuf *b)
{
        return b->broken ? 0 : sh_buf_unread(&b->buf) - b->complete;
}
