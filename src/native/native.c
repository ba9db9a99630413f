/* native.c: the native surface's error model (CONTRACT.md section 8): every kind of error
 * becomes one status and one contract type. */
#include "sh/native.h"

static const struct {
        unsigned status;
        const char *type;
} native_errors[SH_E_KIND_COUNT] = {
        [SH_E_INTERNAL] = {500, "Internal"},
        [SH_E_INVALID] = {400, "BadRequest"},
        [SH_E_NOT_FOUND] = {404, "FileNotFoundError"},
        [SH_E_EXISTS] = {400, "FileExistsError"},
        [SH_E_IS_A_DIRECTORY] = {400, "IsADirectoryError"},
        [SH_E_NOT_A_DIRECTORY] = {400, "NotADirectoryError"},
        [SH_E_TOO_LARGE] = {413, "PayloadTooLarge"},
        /* A full workspace is the host's failure to most endpoints; the file endpoints that
         * take the client's bytes answer 413 themselves (api_files.c). */
        [SH_E_NO_SPACE] = {500, "Internal"},
        [SH_E_UNAVAILABLE] = {503, "Unavailable"},
        [SH_E_BUSY] = {503, "Unavailable"},
        [SH_E_SANDBOX_NOT_FOUND] = {404, "SandboxNotFound"},
        [SH_E_PERSIST_FAILED] = {500, "PersistFailed"},
        [SH_E_CANCELLED] = {500, "Cancelled"},
        [SH_E_SETTING] = {500, "InvalidSetting"},
        [SH_E_NO_ROUTE] = {404, "NotFound"},
        [SH_E_METHOD_NOT_ALLOWED] = {405, "MethodNotAllowed"},
};

unsigned sh_native_status(sh_error_kind kind)
{
        if ((unsigned)kind >= SH_E_KIND_COUNT || !native_errors[kind].type)
                return 500;
        return native_errors[kind].status;
}

const char *sh_native_type(sh_error_kind kind)
{
        if ((unsigned)kind >= SH_E_KIND_COUNT || !native_errors[kind].type)
                return "Internal";
        return native_errors[kind].type;
}
