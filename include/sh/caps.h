/* caps.h: dropping every privilege in a sandbox child before execve: the bounding set,
 * supplementary groups, gid and uid (to the sandbox's), then the effective, permitted,
 * inheritable and ambient sets, and no_new_privs. Child side, after fork, no allocation
 * beyond libcap's own, no logging. */
#pragma once

#include <sys/types.h>

/* Returns 0, or -errno with *ret_step naming the step that failed (static string). */
int sh_caps_drop_to(uid_t uid, gid_t gid, const char **ret_step);
