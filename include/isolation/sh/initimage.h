/* initimage.h: the sandbox-init executable embedded in the daemon (initimage.c). */
#pragma once

#include "sh/error.h"

/* The embedded sandbox-init executable, written into a sealed memfd: one per daemon, made at
 * start; every worker is exec'd from it. Returns the fd (O_CLOEXEC). */
int sh_init_image_open(sh_error **err);
