/* framing.c: the RFC 9110/9112 rules on a request's header fields that libmicrohttpd 0.9.75
 * does not enforce and that decide where a request ends (request smuggling), checked once the
 * headers are in (pure). */
#include <string.h>
#include <strings.h>

#include "sh/http.h"

/* tchar of RFC 9110 section 5.6.2. */
static bool is_tchar(unsigned char c)
{
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_token(const char *s)
{
        if (!*s)
                return false;
        for (; *s; s++)
                if (!is_tchar((unsigned char)*s))
                        return false;
        return true;
}

/* RFC 9110 section 5.5: CR, LF and NUL in a field value are "invalid and dangerous"; the
 * other controls but HTAB are not field-content either. */
static bool has_ctl(const char *s)
{
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;

                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return true;
        }
        return false;
}

int sh_http_check_framing(const sh_http_field *f, size_t n, bool http10, sh_error **err)
{
        const char *te = NULL;
        bool have_cl = false;
        uint64_t cl = 0;
        size_t i;

        for (i = 0; i < n; i++) {
                /* MHD keeps whatever precedes the colon as the name: "Content-Length :" is a
                 * field MHD does not see as the length while a proxy in front may (RFC 9112
                 * section 5.1 says 400). */
                if (!is_token(f[i].name))
                        return sh_error_new(err, SH_E_INVALID,
                                            "a header field name that is not a token");
                /* MHD keeps a bare CR inside a value (RFC 9112 section 2.2: invalid). */
                if (has_ctl(f[i].value))
                        return sh_error_new(err, SH_E_INVALID,
                                            "a control character in header field '%.64s'",
                                            f[i].name);
                if (strcasecmp(f[i].name, "Transfer-Encoding") == 0) {
                        /* MHD reads only the first one and only "chunked" as chunked; any
                         * other coding leaves it reading the body until the connection
                         * closes. Chunked must be the final and here the only coding
                         * (RFC 9112 section 6.3 rule 4: else 400 and close). */
                        if (te)
                                return sh_error_new(err, SH_E_INVALID,
                                                    "more than one Transfer-Encoding field");
                        te = f[i].value;
                        if (strcasecmp(te, "chunked") != 0)
                                return sh_error_new(err, SH_E_INVALID,
                                                    "unsupported Transfer-Encoding '%.64s'", te);
                } else if (strcasecmp(f[i].name, "Content-Length") == 0) {
                        uint64_t v;

                        /* MHD parses the first one only: a second, different one is read by
                         * someone else as the length (RFC 9112 section 6.3 rule 5). The same
                         * value repeated is one length (RFC 9110 section 8.6). */
                        if (sh_parse_u64(f[i].value, &v) < 0)
                                return sh_error_new(err, SH_E_INVALID,
                                                    "invalid Content-Length '%.64s'", f[i].value);
                        if (have_cl && v != cl)
                                return sh_error_new(err, SH_E_INVALID,
                                                    "Content-Length fields that disagree");
                        have_cl = true;
                        cl = v;
                }
        }
        /* RFC 9112 section 6.1: Transfer-Encoding in HTTP/1.0 means faulty framing. */
        if (te && http10)
                return sh_error_new(err, SH_E_INVALID, "Transfer-Encoding in an HTTP/1.0 request");
        /* RFC 9112 section 6.3 rule 3: both is a smuggling attempt; MHD would silently use the
         * chunked framing and keep the connection. */
        if (te && have_cl)
                return sh_error_new(err, SH_E_INVALID, "both Content-Length and Transfer-Encoding");
        return 0;
}
