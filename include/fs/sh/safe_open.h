/* safe_open.h: every open of a path a client or a sandbox controls goes through here.
 * Resolution is confined to a root directory fd with the semantics of
 * openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): symbolic links resolve as if the root
 * were `/`, `..` never climbs above it, /proc magic links are refused. When openat2 is not
 * available (ENOSYS, or refused by a seccomp policy with EPERM) a component-by-component
 * walk with O_NOFOLLOW gives the same semantics. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Open `path` (normalised by sh_path_normalize: "" is the root itself, no leading '/')
 * below `rootfd` (an O_PATH or O_RDONLY directory fd). `flags` are open(2) flags; O_CLOEXEC
 * is always added. O_CREAT is allowed only without O_EXCL semantics surprises: the final
 * component is created inside the root. With O_NOFOLLOW the final component is not followed.
 * Returns the new fd or -errno. EAGAIN from openat2 (a rename raced) is retried, up to 64
 * times, then -EAGAIN. Both resolvers give the same errors: -ELOOP beyond 40 links,
 * -ENAMETOOLONG for a component over NAME_MAX, O_PATH|O_NOFOLLOW opens a link itself,
 * O_CREAT|O_EXCL never follows a final link (-EEXIST). The fallback walker keeps one fd per
 * directory level it descends (released before returning). */
int sh_safe_openat(int rootfd, const char *path, int flags, mode_t mode);

/* Open the parent directory of normalised non-root `path` as an O_PATH|O_DIRECTORY fd and
 * point *ret_base at the last component inside `path`. The root path ("") is -EINVAL.
 * Returns the fd or -errno (-ENOENT/-ENOTDIR when the parent is missing / not a dir). */
int sh_safe_open_parent(int rootfd, const char *path, const char **ret_base);

/* A check of every directory a lookup passes through, for a caller that acts with more
 * privilege than the user it acts for (the OpenSandbox file routes: the daemon is root, the
 * sandbox is not): `dir` is called with an O_PATH fd of the root, then of each directory the
 * walk enters (a link's target included) before anything in it is looked at; 0 goes on, a
 * -errno ends the lookup with that error. The final component itself is not checked. */
typedef struct sh_safe_guard {
        int (*dir)(void *data, int dirfd);
        void *data;
} sh_safe_guard;

/* sh_safe_openat with every directory on the way checked by `g` (NULL: none). A guarded
 * lookup always takes the walker (openat2 does not say which directories it passed), with
 * the same semantics and errors as above. */
int sh_safe_openat_guarded(int rootfd, const char *path, int flags, mode_t mode,
                           const sh_safe_guard *g);

/* sh_safe_open_parent with every directory on the way, the parent included, checked by g. */
int sh_safe_open_parent_guarded(int rootfd, const char *path, const char **ret_base,
                                const sh_safe_guard *g);

/* Whether openat2 is used (probed once and cached; false while the fallback is forced). */
bool sh_safe_openat2_available(void);

/* Tests: force the fallback walker even when openat2 exists. */
void sh_safe_force_fallback(bool on);
