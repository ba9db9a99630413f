/* fs-internal.h: what fsops.c, walk.c and remove.c share inside the fs layer. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

/* How often to pick a new random temporary name when one is taken (a sandbox process can
 * create entries with any name, so a collision is possible, just never for long). */
#define SH_FS_TMPNAME_TRIES 16

/* An open or lookup that failed because the entry is not there (or a component is no
 * directory, or a link where none may be followed): absence, not an error. */
static inline bool sh_fs_is_absent(int r)
{
        return r == -ENOENT || r == -ENOTDIR || r == -ELOOP;
}

/* A random name that no sandbox process can predict, so it cannot pre-plant an entry there
 * to make us fail (it could still collide by chance; callers retry on EEXIST). */
void sh_fs_random_name(char *buf, size_t size, const char *prefix);

/* Give the unnamed file fd (O_TMPFILE, never O_EXCL) the name `name` in directory pfd, never
 * over an existing entry (EEXIST). 0 or -errno. */
int sh_fs_link_unnamed(int fd, int pfd, const char *name);
