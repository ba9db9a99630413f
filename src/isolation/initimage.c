/* initimage.c: the sandbox-init executable, embedded in the daemon at build time, and the
 * sealed memfd every sandbox worker is exec'd from. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sh/macro.h"
#include "sh/syscalls.h"
#include "sh/initimage.h"

/*
 * Why embedded and exec'd from a memfd: PID 1 of a sandbox must hold nothing of the daemon
 * (no other sandbox's ids or env, no settings, no libmicrohttpd), so it is a program of its
 * own, statically linked so that it needs no library of whatever image the sandbox uses. It
 * travels inside the daemon's binary, so the daemon and its init can never be of different
 * builds, and a memfd needs no file on the host that could be swapped or tampered with; the
 * seals make it immutable for as long as it is used. CMake builds sandbox-init first and
 * passes its path as SH_INIT_PATH.
 */
#ifndef SH_INIT_PATH
/* cppcheck-suppress preprocessorErrorDirective ; cppcheck runs without the build's defines */
#error "SH_INIT_PATH (the built sandbox-init) must be defined by the build"
#endif
__asm__(".section .rodata.sh_init_image,\"a\",@progbits\n"
        ".balign 64\n"
        ".globl sh_init_image_start\n"
        ".hidden sh_init_image_start\n"
        "sh_init_image_start:\n"
        ".incbin \"" SH_INIT_PATH "\"\n"
        ".globl sh_init_image_end\n"
        ".hidden sh_init_image_end\n"
        "sh_init_image_end:\n"
        ".previous\n");
extern const unsigned char sh_init_image_start[], sh_init_image_end[];

int sh_init_image_open(sh_error **err)
{
        const unsigned char *p = sh_init_image_start;
        size_t left = (size_t)(sh_init_image_end - sh_init_image_start);
        _cleanup_close_ int fd = -1;

        /* MFD_EXEC: kernels from 6.3 may make memfds non-executable by default
         * (vm.memfd_noexec); older ones refuse the unknown flag with EINVAL. */
        fd = memfd_create("sandbox-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
        if (fd < 0 && errno == EINVAL)
                fd = memfd_create("sandbox-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return sh_error_make(err, errno,
                                     "memfd_create for sandbox-init (vm.memfd_noexec = 2 forbids "
                                     "executable memfds)");
        while (left > 0) {
                ssize_t n = write(fd, p, left);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return sh_error_make(err, n < 0 ? errno : EIO, "writing sandbox-init");
                p += n;
                left -= (size_t)n;
        }
        if (fchmod(fd, 0500) < 0)
                return sh_error_make(err, errno, "chmod of sandbox-init");
        /* F_SEAL_WRITE is EBUSY while the kernel sees a page of it referenced (the page cache's
         * per-CPU batches, a migration or compaction under memory pressure: it waits ~150 ms
         * itself): a start on a loaded machine failed so once. At start only, so waiting a
         * little more, bounded, costs no request anything. */
        for (int tries = 0; fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0;
             tries++) {
                if (errno != EBUSY || tries == 20)
                        return sh_error_make(err, errno, "sealing sandbox-init: %s",
                                             strerror(errno));
                nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
        }
        /* Its mode cannot change any more (6.3+), then no seal can be added or removed. */
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_EXEC) < 0 && errno != EINVAL)
                return sh_error_make(err, errno, "sealing sandbox-init: %s", strerror(errno));
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL) < 0)
                return sh_error_make(err, errno, "sealing sandbox-init: %s", strerror(errno));
        return TAKE_FD(fd);
}
