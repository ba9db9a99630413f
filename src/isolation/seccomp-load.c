/* seccomp-load.c: loading the sandbox's exported seccomp program (seccomp.c builds it); apart
 * from the builder so that sandbox-init links it without libseccomp. */
#include <errno.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sh/seccomp.h"
#include "sh/syscalls.h"

int sh_seccomp_load(const struct sock_fprog *prog)
{
        /* Raw syscalls only: this runs in a forked child (async-signal-safe context). No
         * TSYNC flag: the child is single-threaded. The seccomp(2) syscall is preferred;
         * prctl is the pre-3.17 spelling of the same operation. */
        if (!prog || !prog->filter || prog->len == 0)
                return -EINVAL;
        if (sh_seccomp_syscall(SECCOMP_SET_MODE_FILTER, 0, (void *)prog) == 0)
                return 0;
        if (errno != ENOSYS)
                return -errno;
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0) == 0)
                return 0;
        return -errno;
}
