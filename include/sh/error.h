/* error.h: the one error object (crun-style). Functions that can fail return int (<0)
 * and take `sh_error **err` last; *err must be NULL on entry. The HTTP layer maps the
 * error to a status and a contract error type (CONTRACT.md section 8). */
#pragma once

#include "sh/macro.h"

typedef struct sh_error {
        int errnum;       /* errno that caused it, 0 if none */
        int http_status;  /* 0: derive from errnum */
        const char *type; /* contract error type, NULL: derive from errnum */
        char *msg;        /* human-readable, for `detail` */
} sh_error;

/* Allocate *err from an errno and a message. Returns -errnum (or -EIO when errnum is 0).
 * If allocation fails *err stays NULL; callers must cope (the HTTP layer answers 500). */
int sh_error_make(sh_error **err, int errnum, const char *fmt, ...) _printf_(3, 4);

/* Allocate *err with an explicit HTTP status and contract type. Returns -1. */
int sh_error_http(sh_error **err, int status, const char *type, const char *fmt, ...)
        _printf_(4, 5);

/* Prefix the message of *err with more context ("ctx: old"). Returns the original code. */
int sh_error_wrap(sh_error **err, const char *fmt, ...) _printf_(2, 3);

/* Free *err and set it to NULL. Accepts NULL and *NULL. */
void sh_error_release(sh_error **err);

/* The HTTP status and contract type an error maps to. */
int sh_error_status(const sh_error *err);
const char *sh_error_type(const sh_error *err);

static inline void sh_error_releasep(sh_error **err)
{
        sh_error_release(err);
}
#define _cleanup_error_ _cleanup_(sh_error_releasep)
