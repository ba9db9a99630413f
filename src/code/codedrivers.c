/* codedrivers.c: the code interpreter's languages, their drivers' embedded texts and the argv
 * that starts a context (sh/codedrivers.h). */
#include "sh/codedrivers.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "drivers.h"

static const struct {
        const char *name;
        const char *interpreter;
        const char *source;
        /* The flag that runs a program given as text: python3 -c, node -e, bash -c. */
        const char *flag;
        /* python3 and bash take the next word as $0 / sys.argv[0]; node has no such word. */
        bool zeroth;
} langs[SH_CODE_LANGS] = {
        [SH_CODE_PYTHON] = {"python", "python3", sh_code_driver_python, "-c", true},
        [SH_CODE_JAVASCRIPT] = {"javascript", "node", sh_code_driver_javascript, "-e", false},
        [SH_CODE_BASH] = {"bash", "bash", sh_code_driver_bash, "-c", true},
};

static bool lang_known(sh_code_lang l)
{
        return (unsigned)l < SH_CODE_LANGS;
}

int sh_code_lang_parse(const char *s, sh_code_lang *ret)
{
        if (!s)
                return -1;
        for (unsigned i = 0; i < SH_CODE_LANGS; i++) {
                if (strcmp(s, langs[i].name) == 0) {
                        *ret = (sh_code_lang)i;
                        return 0;
                }
        }
        return -1;
}

const char *sh_code_lang_name(sh_code_lang l)
{
        return lang_known(l) ? langs[l].name : "unknown";
}

const char *sh_code_driver_source(sh_code_lang l)
{
        return lang_known(l) ? langs[l].source : NULL;
}

const char *sh_code_interpreter(sh_code_lang l)
{
        return lang_known(l) ? langs[l].interpreter : NULL;
}

int sh_code_driver_argv(sh_code_lang l, const char *cwd, uint64_t result_max, char *buf,
                        size_t bufsz, char *argv[8])
{
        size_t k = 0;
        int n;

        if (!lang_known(l) || !cwd || !buf || bufsz < SH_CODE_ARGV_BUF)
                return -1;
        n = snprintf(buf, bufsz, "%" PRIu64, result_max);
        if (n < 0 || (size_t)n >= bufsz)
                return -1;
        /* execve takes char *const argv[]: the strings are never written. */
        argv[k++] = (char *)langs[l].interpreter;
        argv[k++] = (char *)langs[l].flag;
        argv[k++] = (char *)langs[l].source;
        if (langs[l].zeroth)
                argv[k++] = (char *)"sandbox-host-code";
        argv[k++] = (char *)cwd;
        argv[k++] = buf;
        argv[k] = NULL;
        return 0;
}
