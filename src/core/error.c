/* error.c: the sh_error object and its mapping from errno to HTTP status and contract type. */
#include "sh/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int error_new(sh_error **err, int errnum, int status, const char *type, const char *fmt,
                     va_list ap)
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
        e->http_status = status;
        e->type = type;
        e->msg = msg;
        sh_error_release(err);
        *err = e;
        return errnum ? -errnum : -1;
}

int sh_error_make(sh_error **err, int errnum, const char *fmt, ...)
{
        va_list ap;
        int r;

        if (errnum < 0)
                errnum = -errnum;
        va_start(ap, fmt);
        r = error_new(err, errnum ? errnum : EIO, 0, NULL, fmt, ap);
        va_end(ap);
        return r;
}

int sh_error_http(sh_error **err, int status, const char *type, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        error_new(err, 0, status, type, fmt, ap);
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

int sh_error_status(const sh_error *err)
{
        if (!err)
                return 500;
        if (err->http_status)
                return err->http_status;
        switch (err->errnum) {
        case ENOENT:
                return 404;
        case EISDIR:
        case ENOTDIR:
        case EEXIST:
        case ENOTEMPTY:
        case EINVAL:
        case ELOOP:
        case ENAMETOOLONG:
        case EXDEV:
        case EBADMSG:
                return 400;
        case EFBIG:
                return 413;
        case EAGAIN:
        case EBUSY:
        case EMFILE: /* out of descriptors or processes: at capacity, try again later */
        case ENFILE:
                return 503;
        default:
                return 500;
        }
}

const char *sh_error_type(const sh_error *err)
{
        if (!err)
                return "Internal";
        if (err->type)
                return err->type;
        switch (err->errnum) {
        case ENOENT:
                return "FileNotFoundError";
        case EISDIR:
                return "IsADirectoryError";
        case ENOTDIR:
                return "NotADirectoryError";
        case EEXIST:
                return "FileExistsError";
        case EFBIG:
                return "PayloadTooLarge";
        case EAGAIN:
        case EBUSY:
        case EMFILE:
        case ENFILE:
                return "Unavailable";
        default:
                return sh_error_status(err) == 400 ? "BadRequest" : "Internal";
        }
}
