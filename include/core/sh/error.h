/* error.h: the one error object (crun-style). Functions that can fail return int (<0)
 * and take `sh_error **err` last; *err must be NULL on entry. An error carries a kind, set
 * where it is made (from its errno, or named), and each API surface maps kinds to its own
 * status and body (the native contract: CONTRACT.md section 8, src/native/native.c): nothing
 * below the surfaces knows an HTTP status. */
#pragma once

#include "sh/macro.h"

/* What went wrong, in the terms a client can act on. New kinds go at the end of the list. */
typedef enum sh_error_kind {
        SH_E_INTERNAL = 0,       /* the host failed (an errno with no better kind) */
        SH_E_INVALID,            /* the request is malformed or asks for the impossible */
        SH_E_NOT_FOUND,          /* a file or directory is absent */
        SH_E_EXISTS,             /* it is there already */
        SH_E_IS_A_DIRECTORY,     /* a file was expected */
        SH_E_NOT_A_DIRECTORY,    /* a directory was expected */
        SH_E_TOO_LARGE,          /* over a size limit (a body, a file) */
        SH_E_NO_SPACE,           /* the workspace's disk limit is reached (ENOSPC, EDQUOT) */
        SH_E_UNAVAILABLE,        /* at capacity, draining, shutting down: try again later */
        SH_E_BUSY,               /* a resource is in use (EBUSY) */
        SH_E_SANDBOX_NOT_FOUND,  /* the sandbox is unknown, deleted, or its worker is gone */
        SH_E_PERSIST_FAILED,     /* a persist or restore did not complete */
        SH_E_CANCELLED,          /* the consumer went away before the end */
        SH_E_SETTING,            /* a setting this host cannot honour (start-up only) */
        SH_E_NO_ROUTE,           /* the transport: no route serves this path */
        SH_E_METHOD_NOT_ALLOWED, /* the transport: the route does not serve this method */
        SH_E_KIND_COUNT
} sh_error_kind;

typedef struct sh_error {
        int errnum;         /* errno that caused it, 0 if none */
        sh_error_kind kind; /* what it means to a client */
        char *msg;          /* human-readable, for the error body's text */
} sh_error;

/* Allocate *err from an errno and a message; the kind follows from the errno
 * (sh_error_kind_of_errno). Returns -errnum (or -EIO when errnum is 0). If allocation fails
 * *err stays NULL; callers must cope (the surfaces answer an internal error). */
int sh_error_make(sh_error **err, int errnum, const char *fmt, ...) _printf_(3, 4);

/* Allocate *err of an explicit kind (no errno). Returns -1. */
int sh_error_new(sh_error **err, sh_error_kind kind, const char *fmt, ...) _printf_(3, 4);

/* Prefix the message of *err with more context ("ctx: old"). Returns the original code. */
int sh_error_wrap(sh_error **err, const char *fmt, ...) _printf_(2, 3);

/* Free *err and set it to NULL. Accepts NULL and *NULL. */
void sh_error_release(sh_error **err);

/* The kind an errno means (pure): ENOENT not found, EEXIST exists, EINVAL and other bad
 * requests invalid, EFBIG too large, ENOSPC/EDQUOT no space, EAGAIN/EMFILE/ENFILE
 * unavailable, EBUSY busy, anything else internal. */
sh_error_kind sh_error_kind_of_errno(int errnum);

/* The kind of err; internal for NULL (an error that could not even be allocated). */
static inline sh_error_kind sh_error_kind_of(const sh_error *err)
{
        return err ? err->kind : SH_E_INTERNAL;
}

/* A stable lower-case name of a kind, for logs ("not-found"). */
const char *sh_error_kind_name(sh_error_kind kind);

static inline void sh_error_releasep(sh_error **err)
{
        sh_error_release(err);
}
#define _cleanup_error_ _cleanup_(sh_error_releasep)
