/* codes.c: OpenSandbox's error codes (OPENSANDBOX.md section 1), one table: each code the /v1
 * surface answers with its status, and why where OpenSandbox's own servers answer in a way
 * one would not guess; the kinds of the services' errors, and the errnos of execd's file
 * routes, as those codes (pure). */
#include <errno.h>

#include "os-internal.h"

typedef struct code_def {
        unsigned status;
        const char *name;
} code_def;

static const code_def codes[OS_E_COUNT] = {
        /* ---- the lifecycle API's (sandbox-lifecycle.yml) ---- */
        [OS_E_INVALID_REQUEST] = {400, "INVALID_REQUEST"},
        /* The YAML has no code for a body over its bound: the transport's 413 keeps its status
         * and says INVALID_REQUEST. */
        [OS_E_TOO_LARGE] = {413, "INVALID_REQUEST"},
        [OS_E_INVALID_IMAGE] = {400, "INVALID_IMAGE"},
        [OS_E_INVALID_METADATA] = {400, "INVALID_METADATA_FORMAT"},
        /* A field or value this host cannot honour: refused, never silently dropped. */
        [OS_E_NOT_SUPPORTED] = {400, "NOT_SUPPORTED"},
        /* The endpoint look-up of a port the sandbox does not expose: OpenSandbox's server
         * answers 404 with NOT_SUPPORTED (there is no such endpoint), not 400. */
        [OS_E_NO_SUCH_PORT] = {404, "NOT_SUPPORTED"},
        /* A route this host does not serve (code interpreters, isolated sessions, the
         * credential vault): 501, the status of an unimplemented method, with the same code. */
        [OS_E_NOT_SERVED] = {501, "NOT_SUPPORTED"},
        [OS_E_MISSING_API_KEY] = {401, "MISSING_API_KEY"},
        [OS_E_INVALID_API_KEY] = {401, "INVALID_API_KEY"},
        /* An execd or egress route without the sandbox's token, or with another: execd's own
         * code (its servers check the token, not the lifecycle API). */
        [OS_E_UNAUTHORIZED] = {401, "UNAUTHORIZED"},
        /* No route serves the path (the transport's 404 on /v1 paths). */
        [OS_E_NOT_FOUND] = {404, "NOT_FOUND"},
        [OS_E_SANDBOX_NOT_FOUND] = {404, "SANDBOX_NOT_FOUND"},
        [OS_E_SNAPSHOT_NOT_FOUND] = {404, "SNAPSHOT_NOT_FOUND"},
        [OS_E_METHOD_NOT_ALLOWED] = {405, "METHOD_NOT_ALLOWED"},
        [OS_E_INVALID_STATE] = {409, "INVALID_STATE"},
        /* Every execd route of a paused sandbox: the SDK's health check then reads false. */
        [OS_E_SANDBOX_PAUSED] = {409, "SANDBOX_PAUSED"},
        [OS_E_INTERNAL] = {500, "INTERNAL"},
        /* Draining, at capacity, shutting down: with Retry-After (surface.c). Also on execd
         * routes, which have no code of their own for it. */
        [OS_E_UNAVAILABLE] = {503, "UNAVAILABLE"},

        /* ---- execd's (execd.yml): its routes speak its own codes ---- */
        [OS_E_BAD_BODY] = {400, "INVALID_REQUEST_BODY"},
        /* execd's answer to anything it cannot take, a body over its bound too. */
        [OS_E_BODY_TOO_LARGE] = {413, "INVALID_REQUEST_BODY"},
        /* A Range no byte of the file satisfies: execd names no code for it. */
        [OS_E_RANGE_NOT_SATISFIABLE] = {416, "INVALID_REQUEST_BODY"},
        /* An unknown command id: execd answers 404 with its body code, not a code of its own
         * for commands. */
        [OS_E_NO_SUCH_COMMAND] = {404, "INVALID_REQUEST_BODY"},
        [OS_E_MISSING_QUERY] = {400, "MISSING_QUERY"},
        [OS_E_FILE_NOT_FOUND] = {404, "FILE_NOT_FOUND"},
        [OS_E_INVALID_FILE_METADATA] = {400, "INVALID_FILE_METADATA"},
        /* A bash session that is not there: execd's Jupyter-style name for it. */
        [OS_E_CONTEXT_NOT_FOUND] = {404, "CONTEXT_NOT_FOUND"},
        [OS_E_RUNTIME] = {500, "RUNTIME_ERROR"},
        /* A path that kept changing under a file operation: try again (execd has no 503 code
         * of its own). */
        [OS_E_RUNTIME_RETRY] = {503, "RUNTIME_ERROR"},
};

unsigned os_code_status(os_code c)
{
        return (unsigned)c < OS_E_COUNT ? codes[c].status : 500;
}

const char *os_code_name(os_code c)
{
        return (unsigned)c < OS_E_COUNT ? codes[c].name : "INTERNAL";
}

os_code os_code_of_kind(sh_error_kind kind, bool execd)
{
        switch (kind) {
        case SH_E_INVALID:
        case SH_E_EXISTS:
        case SH_E_IS_A_DIRECTORY:
        case SH_E_NOT_A_DIRECTORY:
                return execd ? OS_E_BAD_BODY : OS_E_INVALID_REQUEST;
        case SH_E_TOO_LARGE:
                return execd ? OS_E_BODY_TOO_LARGE : OS_E_TOO_LARGE;
        case SH_E_NOT_FOUND:
                return execd ? OS_E_FILE_NOT_FOUND : OS_E_NOT_FOUND;
        case SH_E_SANDBOX_NOT_FOUND:
                return OS_E_SANDBOX_NOT_FOUND;
        case SH_E_NO_ROUTE:
                return OS_E_NOT_FOUND;
        case SH_E_METHOD_NOT_ALLOWED:
                return OS_E_METHOD_NOT_ALLOWED;
        case SH_E_UNAVAILABLE:
        case SH_E_BUSY:
                return OS_E_UNAVAILABLE;
        default:
                return execd ? OS_E_RUNTIME : OS_E_INTERNAL;
        }
}

os_code os_code_of_file_errno(int errnum)
{
        switch (errnum) {
        case ENOENT:
                return OS_E_FILE_NOT_FOUND;
        /* What the client asked cannot be done to this path, as the kernel says: its request,
         * not the host, is at fault (a full disk included: the sandbox's own limit). */
        case EROFS:
        case EACCES:
        case EPERM:
        case ELOOP:
        case ENOTDIR:
        case EISDIR:
        case EEXIST:
        case ENOTEMPTY:
        case EINVAL:
        case ENAMETOOLONG:
        case EXDEV:
        case ENOSPC:
        case EDQUOT:
        case EFBIG:
        case EBUSY:
        case EMLINK:
        case E2BIG:
                return OS_E_BAD_BODY;
        case EAGAIN:
                return OS_E_RUNTIME_RETRY;
        default:
                return OS_E_RUNTIME;
        }
}
