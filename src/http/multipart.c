/* multipart.c: the streaming multipart/form-data parser (RFC 7578/2046) of an upload's body sink
 * (the execd upload's). */
#include "sh/multipart.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sh/util.h"

#define DELIM_MAX (4 + SH_MP_BOUNDARY_MAX) /* "\r\n--" + boundary */
/* Room for a whole header block and a delimiter with what decides it: every state leaves less
 * than this in the buffer when it waits for more, so each feed makes progress. */
#define BUF_CAP (2 * SH_MP_HEADER_MAX)

typedef enum {
        ST_PREAMBLE = 0, /* before the first delimiter: dropped */
        ST_PADDING,      /* after a delimiter: spaces and tabs, then CRLF */
        ST_HEADERS,      /* a part's header lines */
        ST_DATA,         /* a part's data, up to the next delimiter */
        ST_EPILOGUE,     /* after the close delimiter: dropped */
        ST_FAILED,
} mp_state;

struct sh_mp {
        const sh_mp_callbacks *cb;
        void *ctx;
        char delim[DELIM_MAX + 1];
        size_t dlen;
        mp_state state;
        size_t header_bytes; /* of the part being read */
        size_t preamble;     /* bytes dropped before the first delimiter */
        unsigned parts;
        unsigned skip; /* bytes at the start of a part's data that are no data (see headers_end) */
        char *name, *filename, *ctype;
        bool has_cd, has_ct, has_cte;
        size_t len; /* bytes in buf */
        char buf[BUF_CAP];
};

/* ---- small syntax -------------------------------------------------------------------------- */

static bool is_token(unsigned char c)
{
        /* RFC 2045 token: CHAR except SPACE, CTLs and tspecials. */
        return c > 0x20 && c < 0x7f && !strchr("()<>@,;:\\\"/[]?=", c);
}

static bool is_bchar(unsigned char c)
{
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c && strchr("'()+_,-./:=? ", c));
}

static bool is_ows(char c)
{
        return c == ' ' || c == '\t';
}

static const char *skip_ows(const char *p, const char *end)
{
        while (p < end && is_ows(*p))
                p++;
        return p;
}

static bool ieq(const char *p, size_t n, const char *lit)
{
        return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

/* One parameter value at *pp (below end): a quoted string, decoded (quoted-pairs), or a run
 * of printable ASCII but space, '"', ';' and '\' (a token, and the bchars a sender forgot to
 * quote). A new string in *ret. 0, or < 0 with err. */
static int param_value(const char **pp, const char *end, char **ret, sh_error **err)
{
        const char *p = *pp;
        char *out, *o;

        if (p < end && *p == '"') {
                out = malloc((size_t)(end - p)); /* the quotes' room holds the NUL */
                if (!out)
                        return sh_error_make(err, ENOMEM, "out of memory");
                o = out;
                for (p++;; p++) {
                        /* A backslash escapes the next byte (if there is one: else the string
                         * is unterminated). */
                        if (p < end && *p == '\\')
                                p++;
                        else if (p < end && *p == '"')
                                break;
                        if (p >= end) {
                                free(out);
                                return sh_error_new(err, SH_E_INVALID,
                                                    "unterminated quoted string in a multipart "
                                                    "header");
                        }
                        *o++ = *p;
                }
                *o = '\0';
                *pp = p + 1;
                *ret = out;
                return 0;
        }
        while (p < end && (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f &&
               !strchr("\";\\", *p))
                p++;
        if (p == *pp)
                return sh_error_new(err, SH_E_INVALID,
                                    "a parameter without a value in a "
                                    "multipart header");
        /* Not strndup: these bytes lie in the parser's buffer, which no NUL ends, and the
         * ASan tier's strict string checks read a strndup source to its NUL. */
        out = sh_memdup0(*pp, (size_t)(p - *pp));
        if (!out)
                return sh_error_make(err, ENOMEM, "out of memory");
        *pp = p;
        *ret = out;
        return 0;
}

typedef int (*param_fn)(void *data, const char *name, size_t nlen, char *value, sh_error **err);

/* The parameters `; name=value ...` of [p, end) in order; fn takes each value (it owns it).
 * A trailing ';' is allowed. 0, or < 0 with err. */
static int params(const char *p, const char *end, param_fn fn, void *data, sh_error **err)
{
        for (;;) {
                const char *name;
                size_t nlen;
                char *value = NULL;
                int r;

                p = skip_ows(p, end);
                if (p == end)
                        return 0;
                if (*p != ';')
                        return sh_error_new(err, SH_E_INVALID,
                                            "garbage where a ';' parameter "
                                            "was expected in a multipart "
                                            "header");
                p = skip_ows(p + 1, end);
                if (p == end)
                        return 0;
                for (name = p; p < end && is_token((unsigned char)*p); p++)
                        ;
                nlen = (size_t)(p - name);
                p = skip_ows(p, end);
                if (nlen == 0 || p == end || *p != '=')
                        return sh_error_new(err, SH_E_INVALID,
                                            "a malformed parameter in a multipart header");
                p = skip_ows(p + 1, end);
                r = param_value(&p, end, &value, err);
                if (r < 0)
                        return r;
                r = fn(data, name, nlen, value, err);
                if (r < 0)
                        return r;
        }
}

/* ---- the boundary -------------------------------------------------------------------------- */

typedef struct ct_params {
        char *boundary;
} ct_params;

static int ct_param(void *data, const char *name, size_t nlen, char *value, sh_error **err)
{
        ct_params *c = data;

        if (!ieq(name, nlen, "boundary")) {
                free(value);
                return 0;
        }
        if (c->boundary) {
                free(value);
                return sh_error_new(err, SH_E_INVALID, "the Content-Type has two boundaries");
        }
        c->boundary = value;
        return 0;
}

int sh_mp_boundary(const char *content_type, char ret[SH_MP_BOUNDARY_MAX + 1], sh_error **err)
{
        static const char type[] = "multipart/form-data";
        ct_params c = {NULL};
        const char *p, *end;
        size_t n, blen;
        int r;

        if (!content_type)
                return sh_error_new(err, SH_E_INVALID,
                                    "multipart/form-data expected, the "
                                    "request has no Content-Type");
        n = strnlen(content_type, SH_MP_CONTENT_TYPE_MAX + 1);
        if (n > SH_MP_CONTENT_TYPE_MAX)
                return sh_error_new(err, SH_E_INVALID,
                                    "the Content-Type is longer than %d "
                                    "bytes",
                                    SH_MP_CONTENT_TYPE_MAX);
        end = content_type + n;
        p = skip_ows(content_type, end);
        if ((size_t)(end - p) < sizeof(type) - 1 || strncasecmp(p, type, sizeof(type) - 1) != 0 ||
            (p + sizeof(type) - 1 < end && is_token((unsigned char)p[sizeof(type) - 1])))
                return sh_error_new(err, SH_E_INVALID, "multipart/form-data expected");
        r = params(p + sizeof(type) - 1, end, ct_param, &c, err);
        if (r < 0) {
                free(c.boundary);
                return r;
        }
        if (!c.boundary)
                return sh_error_new(err, SH_E_INVALID,
                                    "the multipart Content-Type has no "
                                    "boundary");
        blen = strlen(c.boundary);
        r = blen >= 1 && blen <= SH_MP_BOUNDARY_MAX && c.boundary[blen - 1] != ' ';
        for (size_t i = 0; r && i < blen; i++)
                r = is_bchar((unsigned char)c.boundary[i]);
        if (!r) {
                free(c.boundary);
                return sh_error_new(err, SH_E_INVALID,
                                    "the multipart boundary is not 1 to %d "
                                    "characters of RFC 2046",
                                    SH_MP_BOUNDARY_MAX);
        }
        memcpy(ret, c.boundary, blen + 1);
        free(c.boundary);
        return 0;
}

int sh_mp_new(const char *content_type, const sh_mp_callbacks *cb, void *ctx, sh_mp **ret,
              sh_error **err)
{
        char boundary[SH_MP_BOUNDARY_MAX + 1];
        sh_mp *m;
        int r;

        r = sh_mp_boundary(content_type, boundary, err);
        if (r < 0)
                return r;
        m = calloc(1, sizeof(*m));
        if (!m)
                return sh_error_make(err, ENOMEM, "out of memory");
        m->cb = cb;
        m->ctx = ctx;
        m->dlen = (size_t)snprintf(m->delim, sizeof(m->delim), "\r\n--%s", boundary);
        /* The body is read as if a CRLF came first, so that the first delimiter, which RFC
         * 2046 allows at the very start, is found by the same search as every other one. */
        memcpy(m->buf, "\r\n", 2);
        m->len = 2;
        *ret = m;
        return 0;
}

/* ---- the parts ----------------------------------------------------------------------------- */

static void part_clear(sh_mp *m)
{
        free(m->name);
        free(m->filename);
        free(m->ctype);
        m->name = m->filename = m->ctype = NULL;
        m->has_cd = m->has_ct = m->has_cte = false;
}

static int fail(sh_mp *m, int r)
{
        m->state = ST_FAILED;
        return r < 0 ? r : -1;
}

typedef struct cd_params {
        sh_mp *m;
        bool name, filename;
} cd_params;

static int cd_param(void *data, const char *name, size_t nlen, char *value, sh_error **err)
{
        cd_params *c = data;
        char **slot = NULL;
        bool *seen = NULL;

        if (ieq(name, nlen, "name")) {
                slot = &c->m->name;
                seen = &c->name;
        } else if (ieq(name, nlen, "filename")) {
                slot = &c->m->filename;
                seen = &c->filename;
        }
        if (!slot) {
                free(value);
                return 0;
        }
        if (*seen) {
                free(value);
                return sh_error_new(err, SH_E_INVALID,
                                    "a part's Content-Disposition has two "
                                    "'%.*s' parameters",
                                    (int)nlen, name);
        }
        *seen = true;
        *slot = value;
        return 0;
}

static int content_disposition(sh_mp *m, const char *p, const char *end, sh_error **err)
{
        cd_params c = {m, false, false};
        const char *t = p;

        while (p < end && is_token((unsigned char)*p))
                p++;
        if (!ieq(t, (size_t)(p - t), "form-data"))
                return sh_error_new(err, SH_E_INVALID,
                                    "a part's Content-Disposition is not "
                                    "form-data");
        return params(p, end, cd_param, &c, err);
}

/* One header line [p, p + n): no CR, LF or NUL in it (the caller cut it at its CRLF). */
static int header_line(sh_mp *m, const char *p, size_t n, sh_error **err)
{
        const char *end = p + n, *name = p, *v, *ve;
        size_t nlen;

        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)p[i];

                /* Control bytes have no place in a header (and tab only as white space). */
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return sh_error_new(err, SH_E_INVALID,
                                            "a control character in a "
                                            "part's headers");
        }
        if (is_ows(p[0]))
                return sh_error_new(err, SH_E_INVALID,
                                    "a folded header line in a part "
                                    "(obsolete, refused)");
        while (p < end && is_token((unsigned char)*p))
                p++;
        nlen = (size_t)(p - name);
        if (nlen == 0 || p == end || *p != ':')
                return sh_error_new(err, SH_E_INVALID,
                                    "a part's header line is not "
                                    "'Name: value'");
        v = skip_ows(p + 1, end);
        for (ve = end; ve > v && is_ows(ve[-1]); ve--)
                ;
        if (ieq(name, nlen, "content-disposition")) {
                if (m->has_cd)
                        return sh_error_new(err, SH_E_INVALID,
                                            "a part has two "
                                            "Content-Disposition headers");
                m->has_cd = true;
                return content_disposition(m, v, ve, err);
        }
        if (ieq(name, nlen, "content-type")) {
                if (m->has_ct)
                        return sh_error_new(err, SH_E_INVALID,
                                            "a part has two Content-Type "
                                            "headers");
                m->has_ct = true;
                m->ctype = sh_memdup0(v, (size_t)(ve - v)); /* not strndup: see param_value */
                return m->ctype ? 0 : sh_error_make(err, ENOMEM, "out of memory");
        }
        if (ieq(name, nlen, "content-transfer-encoding")) {
                size_t vl = (size_t)(ve - v);

                if (m->has_cte)
                        return sh_error_new(err, SH_E_INVALID,
                                            "a part has two "
                                            "Content-Transfer-Encoding "
                                            "headers");
                m->has_cte = true;
                /* Nothing is decoded: an encoding that would change the bytes is refused
                 * rather than written to the file as it came. */
                if (!ieq(v, vl, "7bit") && !ieq(v, vl, "8bit") && !ieq(v, vl, "binary"))
                        return sh_error_new(err, SH_E_INVALID,
                                            "a part's "
                                            "Content-Transfer-Encoding is "
                                            "not 7bit, 8bit or binary");
        }
        return 0; /* other headers are allowed and ignored (RFC 7578 4.8) */
}

static int headers_end(sh_mp *m, sh_error **err)
{
        sh_mp_part part;

        if (!m->has_cd)
                return sh_error_new(err, SH_E_INVALID, "part %u has no Content-Disposition",
                                    m->parts - 1);
        if (!m->name || !m->name[0])
                return sh_error_new(err, SH_E_INVALID, "part %u has no name", m->parts - 1);
        part.name = m->name;
        part.filename = m->filename;
        part.content_type = m->ctype;
        part.index = m->parts - 1;
        return m->cb->part_begin(m->ctx, &part, err);
}

/* ---- the machine --------------------------------------------------------------------------- */

/* Bytes [a, b) of buf leave the parser: dropped before the first delimiter, else part data. */
static int emit(sh_mp *m, size_t a, size_t b, sh_error **err)
{
        if (m->state == ST_PREAMBLE) {
                m->preamble += b - a;
                /* + 2: the CRLF sh_mp_new put before the body is counted too. */
                if (m->preamble > SH_MP_PREAMBLE_MAX + 2)
                        return sh_error_new(err, SH_E_INVALID,
                                            "no multipart boundary in the first %d bytes of the "
                                            "body (a wrong or missing boundary)",
                                            SH_MP_PREAMBLE_MAX);
                return 0;
        }
        for (; m->skip > 0 && a < b; m->skip--)
                a++;
        return a < b ? m->cb->part_data(m->ctx, m->buf + a, b - a, err) : 0;
}

/* Search the next delimiter from *pos. 1: one was found and consumed (the state is changed);
 * 0: more bytes are needed (*pos is where to resume); < 0: an error. */
static int scan_delimiter(sh_mp *m, size_t *pos, sh_error **err)
{
        for (;;) {
                const char *hit = memmem(m->buf + *pos, m->len - *pos, m->delim, m->dlen);
                size_t i, after;
                int r;

                if (!hit) {
                        /* All but the last dlen - 1 bytes can go: a delimiter starting later
                         * would have been found. */
                        size_t keep = m->len - *pos < m->dlen - 1 ? m->len - *pos : m->dlen - 1;

                        r = emit(m, *pos, m->len - keep, err);
                        *pos = m->len - keep;
                        return r < 0 ? r : 0;
                }
                i = (size_t)(hit - m->buf);
                after = i + m->dlen;
                if (after + 2 > m->len) {
                        /* What follows decides whether it is a delimiter: wait for it. */
                        r = emit(m, *pos, i, err);
                        *pos = i;
                        return r < 0 ? r : 0;
                }
                if ((m->buf[after] == '-' && m->buf[after + 1] == '-') ||
                    (m->buf[after] == '\r' && m->buf[after + 1] == '\n') || is_ows(m->buf[after])) {
                        r = emit(m, *pos, i, err);
                        if (r < 0)
                                return r;
                        if (m->state == ST_DATA) {
                                m->skip = 0;
                                r = m->cb->part_end(m->ctx, err);
                                if (r < 0)
                                        return r;
                                part_clear(m);
                        }
                        if (m->buf[after] == '-') {
                                m->state = ST_EPILOGUE;
                                *pos = after + 2;
                                return 1;
                        }
                        m->state = ST_PADDING;
                        *pos = after;
                        return 1;
                }
                /* The boundary's bytes followed by anything else: data, not a delimiter. */
                r = emit(m, *pos, i + 1, err);
                if (r < 0)
                        return r;
                *pos = i + 1;
        }
}

static int begin_part(sh_mp *m, sh_error **err)
{
        if (m->parts >= SH_MP_PARTS_MAX)
                return sh_error_new(err, SH_E_TOO_LARGE, "more than %d parts in the body",
                                    SH_MP_PARTS_MAX);
        m->parts++;
        m->header_bytes = 0;
        part_clear(m);
        m->state = ST_HEADERS;
        return 0;
}

/* Consume what buf holds as far as it goes; what cannot be decided yet is moved to its start. */
static int process(sh_mp *m, sh_error **err)
{
        size_t pos = 0;
        int r = 0;

        while (r >= 0) {
                if (m->state == ST_PREAMBLE || m->state == ST_DATA) {
                        r = scan_delimiter(m, &pos, err);
                        if (r == 0)
                                break;
                } else if (m->state == ST_PADDING) {
                        while (pos < m->len && is_ows(m->buf[pos]))
                                pos++;
                        if (pos + 2 > m->len)
                                break;
                        if (m->buf[pos] != '\r' || m->buf[pos + 1] != '\n') {
                                r = sh_error_new(err, SH_E_INVALID,
                                                 "garbage after a multipart boundary");
                                break;
                        }
                        pos += 2;
                        r = begin_part(m, err);
                } else if (m->state == ST_HEADERS) {
                        const char *nl = memchr(m->buf + pos, '\n', m->len - pos);
                        size_t n;

                        if (!nl) {
                                const char *cr = memchr(m->buf + pos, '\r', m->len - pos);

                                if (cr && cr != m->buf + m->len - 1)
                                        r = sh_error_new(err, SH_E_INVALID,
                                                         "a bare CR in a part's headers");
                                else if (m->header_bytes + (m->len - pos) > SH_MP_HEADER_MAX)
                                        r = sh_error_new(err, SH_E_TOO_LARGE,
                                                         "a part's headers are longer than %d "
                                                         "bytes",
                                                         SH_MP_HEADER_MAX);
                                break;
                        }
                        n = (size_t)(nl - (m->buf + pos));
                        if (n == 0 || m->buf[pos + n - 1] != '\r') {
                                r = sh_error_new(err, SH_E_INVALID,
                                                 "a bare LF in a part's headers");
                                break;
                        }
                        n--; /* the line without its CRLF */
                        m->header_bytes += n + 2;
                        if (m->header_bytes > SH_MP_HEADER_MAX) {
                                r = sh_error_new(err, SH_E_TOO_LARGE,
                                                 "a part's headers are longer than %d bytes",
                                                 SH_MP_HEADER_MAX);
                                break;
                        }
                        if (memchr(m->buf + pos, '\r', n) || memchr(m->buf + pos, '\0', n)) {
                                r = sh_error_new(err, SH_E_INVALID,
                                                 "a bare CR or a NUL in a part's headers");
                                break;
                        }
                        if (n > 0) {
                                r = header_line(m, m->buf + pos, n, err);
                                pos += n + 2;
                                continue;
                        }
                        /* The blank line ends the headers. Its CRLF stays in the buffer as the
                         * start of the data, two bytes to skip: if the delimiter comes right
                         * after it, that CRLF is the delimiter's own and the part has no data
                         * (RFC 2046: "body-part := MIME-part-headers [CRLF *OCTET]"). */
                        r = headers_end(m, err);
                        m->state = ST_DATA;
                        m->skip = 2;
                } else if (m->state == ST_EPILOGUE) {
                        pos = m->len; /* ignored (RFC 2046 5.1.1) */
                        break;
                } else {
                        r = -1;
                }
        }
        if (r < 0)
                return fail(m, r);
        memmove(m->buf, m->buf + pos, m->len - pos);
        m->len -= pos;
        return 0;
}

int sh_mp_feed(sh_mp *m, const char *p, size_t n, sh_error **err)
{
        if (m->state == ST_FAILED)
                return sh_error_new(err, SH_E_INVALID, "the multipart body was already refused");
        while (n > 0) {
                /* process() leaves less than BUF_CAP: a header block is at most
                 * SH_MP_HEADER_MAX, a held-back tail at most DELIM_MAX + 1. */
                size_t k = BUF_CAP - m->len < n ? BUF_CAP - m->len : n;
                int r;

                memcpy(m->buf + m->len, p, k);
                m->len += k;
                p += k;
                n -= k;
                r = process(m, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int sh_mp_finish(sh_mp *m, sh_error **err)
{
        mp_state s = m->state;

        if (s == ST_EPILOGUE)
                return 0;
        m->state = ST_FAILED;
        if (s == ST_FAILED)
                return sh_error_new(err, SH_E_INVALID, "the multipart body was already refused");
        /* A body cut inside its first delimiter is a cut body, not one without a boundary. */
        if (s == ST_PREAMBLE && !memmem(m->buf, m->len, m->delim, m->dlen))
                return sh_error_new(err, SH_E_INVALID,
                                    "the body holds no multipart boundary "
                                    "(a wrong or missing boundary)");
        return sh_error_new(err, SH_E_INVALID,
                            "the multipart body ends before its closing "
                            "boundary");
}

unsigned sh_mp_parts(const sh_mp *m)
{
        return m->parts;
}

sh_mp *sh_mp_free(sh_mp *m)
{
        if (m) {
                part_clear(m);
                free(m);
        }
        return NULL;
}
