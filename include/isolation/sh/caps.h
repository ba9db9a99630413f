/* caps.h: the capability steps of every confined child. PID 1 of a sandbox keeps only
 * CAP_SETUID, CAP_SETGID and CAP_SETPCAP (what an exec child needs to drop the rest); each exec
 * child, and the tool unpacker, drops every privilege before it runs hostile code: the
 * bounding set, supplementary groups, gid and uid, then the effective, permitted, inheritable
 * and ambient sets, and no_new_privs; the persist helper keeps the few rsync needs. Child side,
 * no allocation beyond libcap's own, no logging. */
#pragma once

#include <sys/capability.h>
#include <sys/types.h>

/* Returns 0, or -errno with *ret_step naming the step that failed (static string). */
int sh_caps_drop_to(uid_t uid, gid_t gid, const char **ret_step);
/* The same with `group` as the one supplementary group (0: none), a sandbox's volume group. */
int sh_caps_drop_to_group(uid_t uid, gid_t gid, gid_t group, const char **ret_step);

/* PID 1 after setup: bounding, permitted and effective sets reduced to CAP_SETUID,
 * CAP_SETGID and CAP_SETPCAP, inheritable and ambient empty, the sandbox securebits locked,
 * no_new_privs, not dumpable. Returns 0, or -errno with *ret_step naming the failed step. */
int sh_caps_limit_init(const char **ret_step);

/* Keep exactly `keep` (n of them, all held by the caller) and nothing else: the bounding set
 * reduced to them, effective and permitted exactly them, inheritable and ambient empty,
 * no_new_privs. Returns 0, or -errno with *ret_step naming the failed step. */
int sh_caps_keep_only(const cap_value_t *keep, int n, const char **ret_step);
