/* capability.h: the capability names /healthz reports (CONTRACT.md section 7), declared with
 * SH_CAPABILITY next to the code that implements each behaviour, so the list cannot drift
 * from the build. A capability may depend on a runtime probe (SH_CAPABILITY_IF). */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>

void sh_capability_register(const char *name, bool (*available)(void));
#define SH_CAPABILITY(ident, name)                                                                 \
        __attribute__((constructor)) static void sh_cap_##ident(void)                              \
        {                                                                                          \
                sh_capability_register(name, NULL);                                                \
        }
#define SH_CAPABILITY_IF(ident, name, fn)                                                          \
        __attribute__((constructor)) static void sh_cap_##ident(void)                              \
        {                                                                                          \
                sh_capability_register(name, fn);                                                  \
        }
/* A new cJSON array of the available capability names. */
cJSON *sh_capabilities_json(void);
