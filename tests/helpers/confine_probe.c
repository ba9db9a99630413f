/* confine_probe.c: stands in for rsync in the persist helper (test_helper_confine) and prints,
 * one "key=value" line each, what it can do from inside: sockets by family, an abstract UNIX
 * socket of the host, mount, its seccomp and no_new_privs state, its capabilities; last it
 * makes a syscall through the i386 ABI, which must kill it. libc only, no sanitizer (there is
 * no /proc in its root). */
#include <errno.h>
#include <linux/capability.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

/* An abstract UNIX socket the test listens on in the host's network namespace. */
#define PROBE_ABSTRACT "sh-confine-probe"

static int err_of(int r)
{
        return r < 0 ? errno : 0;
}

static void sock(const char *key, int family, int type)
{
        int fd = socket(family, type | SOCK_CLOEXEC, 0);

        printf("%s=%d\n", key, fd < 0 ? errno : 0);
        if (fd >= 0)
                close(fd);
}

int main(int argc, char **argv)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct d[2] = {{0}};
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        const char *name = PROBE_ABSTRACT;
        int sp[2], fd;

        setvbuf(stdout, NULL, _IOLBF, 0);
        printf("argc=%d\n", argc);
        if (argc > 1)
                printf("opts=%s\n", argv[1]); /* the short options: -S and -H or not */
        printf("ldpath=%s\n", getenv("LD_LIBRARY_PATH") ? getenv("LD_LIBRARY_PATH") : "");
        for (int i = 1; i < argc; i++)
                if (strncmp(argv[i], "--temp-dir=", 11) == 0)
                        printf("tempdir=%s\n", argv[i] + 11);
        for (int i = 1; i < argc; i++)
                if (strncmp(argv[i], "--timeout=", 10) == 0)
                        printf("timeout=%s\n", argv[i] + 10);
        sock("inet", AF_INET, SOCK_STREAM);
        sock("inet6", AF_INET6, SOCK_DGRAM);
        sock("netlink", AF_NETLINK, SOCK_RAW);
        sock("packet", AF_PACKET, SOCK_RAW);
        sock("unix", AF_UNIX, SOCK_STREAM);
        printf("socketpair=%d\n", err_of(socketpair(AF_UNIX, SOCK_STREAM, 0, sp)));
        printf("socketpair_inet=%d\n", err_of(socketpair(AF_INET, SOCK_STREAM, 0, sp)));
        /* the host's abstract socket: reachable only from the host's network namespace */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
                size_t n = strlen(name);

                memcpy(sa.sun_path + 1, name, n);
                printf("abstract=%d\n",
                       err_of(connect(
                               fd, (struct sockaddr *)&sa,
                               (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n))));
        }
        printf("mount=%d\n", err_of(mount("none", "/", "tmpfs", 0, NULL)));
        printf("unshare_user=%d\n", err_of((int)syscall(SYS_unshare, 0x10000000)));
        printf("seccomp=%d\n", prctl(PR_GET_SECCOMP, 0, 0, 0, 0));
        printf("nnp=%d\n", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
        if (syscall(SYS_capget, &h, d) == 0)
                printf("capeff=%08x%08x\n", d[1].effective, d[0].effective);
        printf("i386=next\n");
        /* getpid through int $0x80: another ABI than the filter allows */
        {
                long r;

                __asm__ volatile("int $0x80" : "=a"(r) : "a"(20) : "memory");
                printf("i386=alive %ld\n", r);
        }
        return 0;
}
