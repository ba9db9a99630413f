/* error.c: the sh_error object, its kinds, and the kind each errno means. */
#include "sh/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int error_new(sh_error **err, int errnum, sh_error_kind kind, const char *fmt, va_list ap)
{
        sh_error *e;
        char *msg = NULL;

        if (!err)
                return errnum ? -errnum : -1;
        e = calloc(1, sizeof(*e));
        if (!e)
                return errnum ? -errnum : -1;
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        e->errnum = errnum;
        e->kind = kind;
        e->msg = msg;
        sh_error_release(err);
        *err = e;
        return errnum ? -errnum : -1;
}

sh_error_kind sh_error_kind_of_errno(int errnum)
{
        switch (errnum) {
        case ENOENT:
                return SH_E_NOT_FOUND;
        case EISDIR:
                return SH_E_IS_A_DIRECTORY;
        case ENOTDIR:
                return SH_E_NOT_A_DIRECTORY;
        case EEXIST:
                return SH_E_EXISTS;
        case ENOTEMPTY:
        case EINVAL:
        case ELOOP:
        case E2BIG: /* a lookup over its steps (fs/safe_open.c), a list over its bound */
        case ENAMETOOLONG:
        case EXDEV:
        case EBADMSG:
                return SH_E_INVALID;
        case EFBIG:
                return SH_E_TOO_LARGE;
        case ENOSPC:
        case EDQUOT:
                return SH_E_NO_SPACE;
        case EAGAIN:
        case EMFILE: /* out of descriptors or processes: at capacity, try again later */
        case ENFILE:
                return SH_E_UNAVAILABLE;
        case EBUSY:
                return SH_E_BUSY;
        default:
                return SH_E_INTERNAL;
        }
}

int sh_error_make(sh_error **err, int errnum, const char *fmt, ...)
{
        va_list ap;
        int r;

        if (errnum < 0)
                errnum = -errnum;
        if (!errnum)
                errnum = EIO;
        va_start(ap, fmt);
        r = error_new(err, errnum, sh_error_kind_of_errno(errnum), fmt, ap);
        va_end(ap);
        return r;
}

int sh_error_new(sh_error **err, sh_error_kind kind, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        error_new(err, 0, kind, fmt, ap);
        va_end(ap);
        return -1;
}

int sh_error_wrap(sh_error **err, const char *fmt, ...)
{
        va_list ap;
        char *prefix = NULL, *joined = NULL;
        int r;

        if (!err || !*err)
                return -EIO;
        r = (*err)->errnum ? -(*err)->errnum : -1;
        va_start(ap, fmt);
        if (vasprintf(&prefix, fmt, ap) < 0)
                prefix = NULL;
        va_end(ap);
        if (!prefix)
                return r;
        if (asprintf(&joined, "%s: %s", prefix, (*err)->msg ? (*err)->msg : "") < 0)
                joined = NULL;
        free(prefix);
        if (joined) {
                free((*err)->msg);
                (*err)->msg = joined;
        }
        return r;
}

void sh_error_release(sh_error **err)
{
        if (!err || !*err)
                return;
        free((*err)->msg);
        free(*err);
        *err = NULL;
}

const char *sh_error_kind_name(sh_error_kind kind)
{
        static const char *const names[SH_E_KIND_COUNT] = {
                [SH_E_INTERNAL] = "internal",
                [SH_E_INVALID] = "invalid",
                [SH_E_NOT_FOUND] = "not-found",
                [SH_E_EXISTS] = "exists",
                [SH_E_IS_A_DIRECTORY] = "is-a-directory",
                [SH_E_NOT_A_DIRECTORY] = "not-a-directory",
                [SH_E_TOO_LARGE] = "too-large",
                [SH_E_NO_SPACE] = "no-space",
                [SH_E_UNAVAILABLE] = "unavailable",
                [SH_E_BUSY] = "busy",
                [SH_E_SANDBOX_NOT_FOUND] = "sandbox-not-found",
                [SH_E_PERSIST_FAILED] = "persist-failed",
                [SH_E_CANCELLED] = "cancelled",
                [SH_E_SETTING] = "setting",
                [SH_E_NO_ROUTE] = "no-route",
                [SH_E_METHOD_NOT_ALLOWED] = "method-not-allowed",
        };

        if ((unsigned)kind >= SH_E_KIND_COUNT || !names[kind])
                return "internal";
        return names[kind];
}
