/* caps.h: privileges inside a sandbox. PID 1 keeps only CAP_SETUID, CAP_SETGID and CAP_SETPCAP
 * (what an exec child needs to drop the rest); each exec child drops every privilege before
 * execve: the bounding set, supplementary groups, gid and uid (to the sandbox's), then the
 * effective, permitted, inheritable and ambient sets, and no_new_privs. Child side, no
 * allocation beyond libcap's own, no logging. */
#pragma once

#include <sys/types.h>

/* Returns 0, or -errno with *ret_step naming the step that failed (static string). */
int sh_caps_drop_to(uid_t uid, gid_t gid, const char **ret_step);

/* PID 1 after setup: bounding, permitted and effective sets reduced to CAP_SETUID,
 * CAP_SETGID and CAP_SETPCAP, inheritable and ambient empty, the sandbox securebits locked,
 * no_new_privs, not dumpable. Returns 0, or -errno with *ret_step naming the failed step. */
int sh_caps_limit_init(const char **ret_step);
