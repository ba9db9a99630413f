/* proctitle.c: in-place command-line overwrite (setproctitle without moving environ). */
#include "sh/proctitle.h"

#include <string.h>
#include <sys/prctl.h>

static char *area;
static size_t area_len;

void sh_proctitle_init(int argc, char **argv)
{
        int i;

        if (argc < 1 || !argv[0])
                return;
        area = argv[0];
        area_len = strlen(argv[0]) + 1;
        /* argv strings are laid out back to back; take them while they stay contiguous. */
        for (i = 1; i < argc && argv[i] == area + area_len; i++)
                area_len += strlen(argv[i]) + 1;
}

void sh_proctitle_set(const char *title)
{
        (void)prctl(PR_SET_NAME, title, 0, 0, 0);
        if (!area || area_len < 2)
                return;
        memset(area, 0, area_len);
        strncpy(area, title, area_len - 1);
        /* Shorten what /proc/PID/cmdline reports to the title (root only; best effort). */
        (void)prctl(PR_SET_MM, PR_SET_MM_ARG_END, (unsigned long)(area + strlen(area) + 1), 0, 0);
}
