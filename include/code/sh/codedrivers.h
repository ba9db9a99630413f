/* codedrivers.h: the code interpreter's languages and their drivers (src/code/drivers/), the
 * programs of ours a context runs inside its sandbox, and the argv that starts one.
 *
 * A driver speaks the protocol of docs/architecture.md's code flow (the issue 26 seam): cells
 * on its fd 0 ("<decimal length>\n" then that many bytes), the cell's output on fds 1 and 2,
 * frames on fd 3 (one JSON object a line, sh/codeframe.h). Its text is embedded in the daemon
 * at build time and passed whole in argv, so the sandbox can read it but never change it. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef enum sh_code_lang {
        SH_CODE_PYTHON,
        SH_CODE_JAVASCRIPT,
        SH_CODE_BASH,
} sh_code_lang;

#define SH_CODE_LANGS 3

/* The language named "python", "javascript" or "bash" (exactly, lower case) into *ret: 0, else
 * -1 (*ret untouched). */
int sh_code_lang_parse(const char *s, sh_code_lang *ret);
/* The API's name of a language ("python", ...); "unknown" for a value out of the enum. */
const char *sh_code_lang_name(sh_code_lang l);
/* The driver's source text (static, NUL-terminated, no NUL inside); NULL out of the enum. */
const char *sh_code_driver_source(sh_code_lang l);
/* The interpreter the driver runs on, looked up in the sandbox's PATH: "python3", "node",
 * "bash"; NULL out of the enum. */
const char *sh_code_interpreter(sh_code_lang l);

/* Room sh_code_driver_argv needs in buf: result_max's decimal digits and a NUL. */
#define SH_CODE_ARGV_BUF 24u

/* The argv that starts a context of language l in directory cwd ("" = where the exec starts:
 * the workspace) with result_max as the bound of one result frame (bytes of its JSON line,
 * SANDBOX_HOST_CODE_RESULT_MAX):
 *   python      python3 -c <src> sandbox-host-code <cwd> <result_max>
 *   javascript  node -e <src> <cwd> <result_max>
 *   bash        bash -c <src> sandbox-host-code <cwd> <result_max>
 * NULL-terminated in argv (at most 7 entries and the NULL); the strings are the driver's
 * static text, cwd itself and result_max formatted into buf (bufsz >= SH_CODE_ARGV_BUF), so
 * argv lives as long as cwd and buf. 0, or -1 for a language out of the enum, a NULL cwd or a
 * buf too small (argv untouched). */
int sh_code_driver_argv(sh_code_lang l, const char *cwd, uint64_t result_max, char *buf,
                        size_t bufsz, char *argv[8]);
