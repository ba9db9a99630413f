/* macro.h: cleanup attributes, ownership transfer and small helpers used everywhere. */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a)  (sizeof(a) / sizeof((a)[0]))
#define _unused_       __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define likely(x)      __builtin_expect(!!(x), 1)
#define unlikely(x)    __builtin_expect(!!(x), 0)

/* Hand ownership of a pointer or fd out of a cleanup-managed variable. */
#define TAKE_PTR(p)                                                                                \
        ({                                                                                         \
                __typeof__(p) _tp = (p);                                                           \
                (p) = NULL;                                                                        \
                _tp;                                                                               \
        })
#define TAKE_FD(fd)                                                                                \
        ({                                                                                         \
                int _tf = (fd);                                                                    \
                (fd) = -1;                                                                         \
                _tf;                                                                               \
        })

static inline void sh_freep(void *p)
{
        free(*(void **)p);
}

/* close() is never retried on EINTR: on Linux the fd is gone either way. */
static inline void sh_closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
        *fd = -1;
}

#define _cleanup_(f)    __attribute__((cleanup(f)))
#define _cleanup_free_  _cleanup_(sh_freep)
#define _cleanup_close_ _cleanup_(sh_closep)

/* Close an fd we own and mark it closed. */
static inline int sh_close(int fd)
{
        if (fd >= 0) {
                int saved = errno;
                close(fd);
                errno = saved;
        }
        return -1;
}

#define STREQ(a, b) (strcmp((a), (b)) == 0)
