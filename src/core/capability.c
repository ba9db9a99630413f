/* capability.c: the registry behind SH_CAPABILITY and the /healthz capability list. */
#include "sh/capability.h"

#include <stdlib.h>
#include <string.h>

static struct {
        const char *name;
        bool (*available)(void);
} caps[64];
static unsigned n_caps;

void sh_capability_register(const char *name, bool (*available)(void))
{
        if (n_caps < sizeof(caps) / sizeof(caps[0])) {
                caps[n_caps].name = name;
                caps[n_caps].available = available;
                n_caps++;
        }
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

cJSON *sh_capabilities_json(void)
{
        const char *names[64];
        unsigned i, n = 0;
        cJSON *arr = cJSON_CreateArray();

        if (!arr)
                return NULL;
        for (i = 0; i < n_caps; i++)
                if (!caps[i].available || caps[i].available())
                        names[n++] = caps[i].name;
        qsort(names, n, sizeof(names[0]), cmp_str);
        for (i = 0; i < n; i++)
                cJSON_AddItemToArray(arr, cJSON_CreateString(names[i]));
        return arr;
}
