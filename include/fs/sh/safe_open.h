/* safe_open.h: every open of a path a client or a sandbox controls goes through here.
 * Resolution is confined to a root directory fd with the semantics of
 * openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): symbolic links resolve as if the root
 * were `/`, `..` never climbs above it, /proc magic links are refused. When openat2 is not
 * available (ENOSYS, or refused by a seccomp policy with EPERM) a component-by-component
 * walk with O_NOFOLLOW gives the same semantics. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The work of a lookup is bounded in component steps: a lookup costs one step for each
 * component of its path and one for each component of every link target it follows ("." and
 * ".." count, empty components do not), charged as each is taken up, whichever resolver runs.
 * One lookup may take at most SH_SAFE_LOOKUP_STEPS: a path of SH_PATH_MAX bytes and as much
 * again through its links (the kernel's own bound, 40 links of PATH_MAX bytes, allows ~84,000,
 * which the walker needs ~0.2 s of the loop for). Past it the lookup fails with -E2BIG. */
#define SH_SAFE_LOOKUP_STEPS 4096u
/* A default for all the lookups of one request together (sh_safe_budget). */
#define SH_SAFE_REQUEST_STEPS (16u * SH_SAFE_LOOKUP_STEPS)
/* What one turn of the loop may spend on the lookups of a request that is not cut into slices
 * (~2.2 us a step in the walker: ~36 ms), and so all that such a request may spend. */
#define SH_SAFE_TURN_STEPS (4u * SH_SAFE_LOOKUP_STEPS)

/* Steps left to every lookup that draws from it (a request's lookups, through its guard): a
 * lookup that would take more than `left` fails with -E2BIG and sets `exhausted` (so the caller
 * can tell "this request looked up too much" from "this path costs too much"). Set `left`
 * once (e.g. SH_SAFE_REQUEST_STEPS) and read it back: what was used is the difference. */
typedef struct sh_safe_budget {
        uint64_t left;
        bool exhausted;
} sh_safe_budget;

/* Open `path` (normalised by sh_path_normalize: "" is the root itself, no leading '/')
 * below `rootfd` (an O_PATH or O_RDONLY directory fd). `flags` are open(2) flags; O_CLOEXEC
 * is always added. O_CREAT is allowed only without O_EXCL semantics surprises: the final
 * component is created inside the root. With O_NOFOLLOW the final component is not followed.
 * Returns the new fd or -errno. EAGAIN from openat2 (a rename raced) is retried, up to 64
 * times, then -EAGAIN. Both resolvers give the same errors: -ELOOP beyond 40 links,
 * -ENAMETOOLONG for a component over NAME_MAX or a path of PATH_MAX bytes or more, -E2BIG past
 * SH_SAFE_LOOKUP_STEPS, O_PATH|O_NOFOLLOW opens a link itself, O_CREAT|O_EXCL never follows a
 * final link (-EEXIST). openat2 is asked with RESOLVE_NO_SYMLINKS: a path without links costs
 * exactly its components there too, and one with links is handed to the walker, which counts
 * every step, so both resolvers charge the same and refuse the same lookups. The fallback walker
 * keeps one fd per directory level it descends (released before returning). */
int sh_safe_openat(int rootfd, const char *path, int flags, mode_t mode);

/* Open the parent directory of normalised non-root `path` as an O_PATH|O_DIRECTORY fd and
 * point *ret_base at the last component inside `path`. The root path ("") is -EINVAL.
 * Returns the fd or -errno (-ENOENT/-ENOTDIR when the parent is missing / not a dir). */
int sh_safe_open_parent(int rootfd, const char *path, const char **ret_base);

/* What a caller asks of each lookup beyond the semantics above.
 * `dir`: a check of every directory a lookup passes through, for a caller that acts with more
 * privilege than the user it acts for (the OpenSandbox file routes: the daemon is root, the
 * sandbox is not): it is called with an O_PATH fd of the root, then of each directory the walk
 * enters (a link's target included) before anything in it is looked at; 0 goes on, a -errno
 * ends the lookup with that error. The final component itself is not checked. NULL: none.
 * `budget`: the steps the lookup draws from besides its own bound (NULL: only that). */
typedef struct sh_safe_guard {
        int (*dir)(void *data, int dirfd);
        void *data;
        sh_safe_budget *budget;
} sh_safe_guard;

/* sh_safe_openat with what `g` asks (NULL: nothing). A lookup with a `dir` check always takes
 * the walker (openat2 does not say which directories it passed), with the same semantics and
 * errors as above. */
int sh_safe_openat_guarded(int rootfd, const char *path, int flags, mode_t mode,
                           const sh_safe_guard *g);

/* sh_safe_open_parent with every directory on the way, the parent included, checked by g. */
int sh_safe_open_parent_guarded(int rootfd, const char *path, const char **ret_base,
                                const sh_safe_guard *g);

/* mkdir -p in one walk: what sh_safe_mkdir_p gives each directory it makes. A uid or gid of
 * -1 keeps the daemon's. `may_create` (NULL: always) is asked before each mkdirat with the fd
 * of the directory it is made in (checked by the guard already); a -errno refuses. */
typedef struct sh_safe_mkdir {
        mode_t mode; /* `path` itself, exactly (the umask plays no part) */
        uid_t uid;
        gid_t gid;
        mode_t parents_mode; /* each level made on the way to it */
        uid_t parents_uid;
        gid_t parents_gid;
        int (*may_create)(void *data, int dirfd);
        void *data;
} sh_safe_mkdir;

/* Create the directory `path` and every missing level on the way, resolving it once from the
 * root with the walker's semantics (links inside the root, ".." never above it, every
 * directory entered shown to g->dir, the steps charged as for a lookup): each level is made
 * with mkdirat in the fd of its parent, reopened with O_NOFOLLOW (a link swapped in is never
 * chowned) and entered by that fd, so no prefix is ever resolved again. A link on the way is
 * followed; a missing level inside a link's target is not made (as mkdir(1), nothing is
 * created through a dangling link). Returns a directory fd of `path` (O_PATH, or O_RDONLY
 * when made), or -errno: -EEXIST when `path` itself is (or a dangling link there names) no
 * directory, -ENOTDIR when a level on the way is, -E2BIG past the steps, the guard's or
 * may_create's error, -EAGAIN when a racer kept swapping an entry. "" is the root. */
int sh_safe_mkdir_p(int rootfd, const char *path, const sh_safe_mkdir *how, const sh_safe_guard *g);

/* Whether openat2 is used (probed once and cached; false while the fallback is forced). */
bool sh_safe_openat2_available(void);

/* Tests: force the fallback walker even when openat2 exists. */
void sh_safe_force_fallback(bool on);
