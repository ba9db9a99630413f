/* multipart.c: a streaming multipart/form-data parser (RFC 7578) for POST /files/upload: the
 * body is fed in whatever pieces it arrives; parts come out as their headers (name, filename)
 * then their data, in bounded memory (a part's headers at most OS_MP_HEADERS_MAX, the data
 * held back to find the delimiter at most the delimiter's length). Pure: no I/O. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "files.h"

/* The boundary of a Content-Type `multipart/form-data; boundary=...` (quoted or not), RFC 2046:
 * 1 to 70 characters. 0, or -EINVAL. */
int os_mp_boundary(const char *ctype, char out[OS_MP_BOUNDARY_MAX + 1])
{
        const char *p;
        size_t n = 0;

        if (!ctype || strncasecmp(ctype, "multipart/form-data", 19) != 0)
                return -EINVAL;
        p = ctype + 19;
        for (;;) {
                while (*p == ' ' || *p == '\t' || *p == ';')
                        p++;
                if (!*p)
                        return -EINVAL;
                if (strncasecmp(p, "boundary=", 9) == 0)
                        break;
                while (*p && *p != ';')
                        p++;
        }
        p += 9;
        if (*p == '"') {
                p++;
                while (p[n] && p[n] != '"')
                        n++;
                if (p[n] != '"')
                        return -EINVAL;
        } else {
                while (p[n] && p[n] != ';' && p[n] != ' ' && p[n] != '\t')
                        n++;
        }
        if (n == 0 || n > OS_MP_BOUNDARY_MAX)
                return -EINVAL;
        memcpy(out, p, n);
        out[n] = '\0';
        return 0;
}

void os_mp_init(os_mp *m, const char *boundary)
{
        memset(m, 0, sizeof(*m));
        /* The delimiter is CRLF "--" boundary; the body's first one has no CRLF before it, so
         * the parser starts as if it had just seen a CRLF (state MP_START). */
        m->dlen = (size_t)snprintf(m->delim, sizeof(m->delim), "\r\n--%s", boundary);
        m->state = OS_MP_START;
}

/* The value of parameter `key` (name, filename) of a Content-Disposition value: quoted (a
 * backslash escapes the next character) or a bare token; copied, bounded. */
static int disposition_param(const char *v, const char *key, char *out, size_t size, bool *found)
{
        size_t klen = strlen(key), n = 0;
        const char *p = v;

        *found = false;
        while ((p = strchr(p, ';'))) {
                p++;
                while (*p == ' ' || *p == '\t')
                        p++;
                if (strncasecmp(p, key, klen) != 0 || p[klen] != '=')
                        continue;
                p += klen + 1;
                if (*p == '"') {
                        for (p++; *p && *p != '"'; p++) {
                                if (*p == '\\' && p[1])
                                        p++;
                                if (n + 1 >= size)
                                        return -E2BIG;
                                out[n++] = *p;
                        }
                        if (*p != '"')
                                return -EINVAL;
                } else {
                        for (; *p && *p != ';' && *p != ' ' && *p != '\t'; p++) {
                                if (n + 1 >= size)
                                        return -E2BIG;
                                out[n++] = *p;
                        }
                }
                out[n] = '\0';
                *found = true;
                return 0;
        }
        return 0;
}

/* A part's headers are complete (m->hdr, CRLF-separated lines, no final empty line): find its
 * Content-Disposition and its name and filename. */
static int parse_headers(os_mp *m)
{
        char *line = m->hdr, *next;
        bool disp = false, found;

        m->name[0] = m->filename[0] = '\0';
        m->has_filename = false;
        for (; line && *line; line = next) {
                next = strstr(line, "\r\n");
                if (next) {
                        *next = '\0';
                        next += 2;
                }
                if (strncasecmp(line, "content-disposition:", 20) != 0)
                        continue;
                if (disp)
                        return -EINVAL; /* two of them: which one is meant? */
                disp = true;
                if (strncasecmp(line + 20 + strspn(line + 20, " \t"), "form-data", 9) != 0)
                        return -EINVAL;
                if (disposition_param(line, "name", m->name, sizeof(m->name), &found) < 0 || !found)
                        return -EINVAL;
                if (disposition_param(line, "filename", m->filename, sizeof(m->filename),
                                      &m->has_filename) < 0)
                        return -EINVAL;
        }
        return disp ? 0 : -EINVAL;
}

/* The next byte of the input: first what is held (bytes after a delimiter), then p. */
static bool next_byte(os_mp *m, const char **p, size_t *n, char *c)
{
        if (m->hoff < m->hlen) {
                *c = m->hold[m->hoff++];
                if (m->hoff == m->hlen)
                        m->hoff = m->hlen = 0;
                return true;
        }
        if (*n == 0)
                return false;
        *c = **p;
        (*p)++;
        (*n)--;
        return true;
}

/* A part's body (or the preamble): look for the delimiter in what is held plus the new bytes,
 * keeping back at most dlen - 1 bytes that may start it. */
static int scan_body(os_mp *m, const char **p, size_t *n, os_mp_fn cb, void *data)
{
        size_t take = *n < sizeof(m->hold) - m->hlen ? *n : sizeof(m->hold) - m->hlen;
        const char *d;
        int r;

        memcpy(m->hold + m->hlen, *p, take);
        m->hlen += take;
        *p += take;
        *n -= take;
        d = memmem(m->hold, m->hlen, m->delim, m->dlen);
        if (d) {
                size_t before = (size_t)(d - m->hold);

                if (m->state == OS_MP_BODY) {
                        if (before > 0 && (r = cb(data, OS_MP_DATA, m->hold, before)) < 0)
                                return r;
                        if ((r = cb(data, OS_MP_PART_END, NULL, 0)) < 0)
                                return r;
                }
                m->hlen -= before + m->dlen;
                memmove(m->hold, m->hold + before + m->dlen, m->hlen);
                m->hoff = 0;
                m->state = OS_MP_AFTER_DELIM;
                m->tail = 0;
                m->pad = 0;
        } else if (m->hlen >= m->dlen) {
                size_t out = m->hlen - (m->dlen - 1);

                if (m->state == OS_MP_BODY && (r = cb(data, OS_MP_DATA, m->hold, out)) < 0)
                        return r;
                memmove(m->hold, m->hold + out, m->hlen - out);
                m->hlen -= out;
        }
        return 0;
}

int os_mp_feed(os_mp *m, const char *p, size_t n, os_mp_fn cb, void *data)
{
        char c, *end;
        int r;

        for (;;) {
                switch (m->state) {
                case OS_MP_START:
                        /* the virtual CRLF before the first delimiter */
                        memcpy(m->hold, "\r\n", 2);
                        m->hlen = 2;
                        m->hoff = 0;
                        m->state = OS_MP_PREAMBLE;
                        break;
                case OS_MP_PREAMBLE:
                case OS_MP_BODY:
                        if (n == 0 && !m->rescan)
                                return 0;
                        m->rescan = false;
                        if ((r = scan_body(m, &p, &n, cb, data)) < 0)
                                return r;
                        break;
                case OS_MP_AFTER_DELIM:
                        /* "--" ends the body; else optional whitespace, then CRLF */
                        if (!next_byte(m, &p, &n, &c))
                                return 0;
                        if (m->tail == 0 && c == '-') {
                                m->tail = '-';
                        } else if (m->tail == '-') {
                                if (c != '-')
                                        return -EINVAL;
                                m->state = OS_MP_DONE;
                        } else if (m->tail == 0 && (c == ' ' || c == '\t')) {
                                if (++m->pad > 64)
                                        return -EINVAL;
                        } else if (m->tail == 0 && c == '\r') {
                                m->tail = '\r';
                        } else if (m->tail == '\r' && c == '\n') {
                                m->state = OS_MP_HEADERS;
                                m->hdr_len = 0;
                        } else {
                                return -EINVAL;
                        }
                        break;
                case OS_MP_HEADERS:
                        if (!next_byte(m, &p, &n, &c))
                                return 0;
                        if (m->hdr_len == OS_MP_HEADERS_MAX)
                                return -E2BIG;
                        if (c == '\0')
                                return -EINVAL;
                        m->hdr[m->hdr_len++] = c;
                        m->hdr[m->hdr_len] = '\0';
                        if (m->hdr_len == 2 && memcmp(m->hdr, "\r\n", 2) == 0)
                                return -EINVAL; /* a part without any header */
                        if (m->hdr_len < 4 || !(end = strstr(m->hdr + m->hdr_len - 4, "\r\n\r\n")))
                                break;
                        *end = '\0';
                        if (parse_headers(m) < 0)
                                return -EINVAL;
                        if ((r = cb(data, OS_MP_PART, NULL, 0)) < 0)
                                return r;
                        /* what is still held is the part's first bytes */
                        memmove(m->hold, m->hold + m->hoff, m->hlen - m->hoff);
                        m->hlen -= m->hoff;
                        m->hoff = 0;
                        m->rescan = m->hlen > 0;
                        m->state = OS_MP_BODY;
                        break;
                case OS_MP_DONE:
                        return 0; /* the epilogue is ignored */
                }
        }
}

bool os_mp_done(const os_mp *m)
{
        return m->state == OS_MP_DONE;
}
