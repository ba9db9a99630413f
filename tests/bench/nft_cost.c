/* nft_cost.c: what a change of the daemon's nftables table (src/egress/nft.c) costs on the
 * loop as the table grows (net.h, "Cost"). In a network namespace of its own (needs root):
 * for each size N, a table with N sandboxes, then timed: an address opened to one sandbox
 * (sh_egress_nft_allow_addr), a sandbox added and removed again, a policy replaced; the
 * median of `reps` of each. No link is made (the table does not need them). Not built by
 * CMake (after `cmake --build build`):
 *   cc -O2 -D_GNU_SOURCE -Iinclude/core -Iinclude/egress -o /tmp/nft_cost tests/bench/nft_cost.c \
 *      build/libsh_egress.a build/libsh_core.a -lnftables -lnftnl -lmnl -lcjson
 *   /tmp/nft_cost 16 256 1024
 */
#include <arpa/inet.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sh/net.h"

#define REPS 101

static double now_ms(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
        qsort(v, n, sizeof(*v), cmp);
        return v[n / 2];
}

static void die(const char *what, sh_error *err)
{
        fprintf(stderr, "%s: %s\n", what, err ? err->msg : "failed");
        exit(1);
}

static void one_size(uint32_t size)
{
        static const char *rule = "198.51.100.0/24";
        sh_egress_nft_config c = {
                .tag = "bench", .ifprefix = "shv", .conn_max = 64, .dns_max = 4096};
        sh_egress_nft_rule rules[1] = {{.allow = true}};
        double t_addr[REPS], t_add[REPS], t_pol[REPS];
        sh_error *err = NULL;
        sh_egress_nft *n;
        char name[16];
        uint32_t i;

        sh_egress_ipv4_net_parse(SH_EGRESS_CIDR_DEFAULT, &c.range);
        sh_egress_ipv4_net_parse(rule, &rules[0].net);
        c.proxy = sh_egress_gateway(&c.range);
        if (sh_egress_nft_open(&c, &n, &err) < 0)
                die("open", err);
        for (i = 0; i <= size; i++) {
                struct in_addr a;

                sh_egress_slot_addr(&c.range, i, &a);
                snprintf(name, sizeof(name), "shv%u", i);
                if (i < size && sh_egress_nft_sandbox_add(n, i, name, a, rules, 1, false, &err) < 0)
                        die("sandbox add", err);
        }
        for (i = 0; i < REPS; i++) {
                struct in_addr a = {htonl(0xcb007100u + i)}, sa; /* 203.0.113.x */
                double t0;

                t0 = now_ms();
                if (sh_egress_nft_allow_addr(n, size / 2, a, 60, &err) < 0)
                        die("allow addr", err);
                t_addr[i] = now_ms() - t0;
                sh_egress_slot_addr(&c.range, size, &sa);
                snprintf(name, sizeof(name), "shv%u", size);
                t0 = now_ms();
                if (sh_egress_nft_sandbox_add(n, size, name, sa, rules, 1, false, &err) < 0)
                        die("sandbox add", err);
                t_add[i] = now_ms() - t0;
                if (sh_egress_nft_sandbox_del(n, size, &err) < 0)
                        die("sandbox del", err);
                t0 = now_ms();
                if (sh_egress_nft_policy(n, size / 2, rules, 1, false, NULL, 0, &err) < 0)
                        die("policy", err);
                t_pol[i] = now_ms() - t0;
        }
        printf("%5u sandboxes: address opened %.3f ms, sandbox added %.3f ms, policy replaced "
               "%.3f ms (medians of %d)\n",
               size, median(t_addr, REPS), median(t_add, REPS), median(t_pol, REPS), REPS);
        fflush(stdout);
        if (sh_egress_nft_close(n, &err) < 0)
                die("close", err);
}

int main(int argc, char **argv)
{
        int i;

        if (unshare(CLONE_NEWNET) < 0) {
                perror("unshare (needs root)");
                return 1;
        }
        for (i = 1; i < argc; i++)
                one_size((uint32_t)strtoul(argv[i], NULL, 10));
        return 0;
}
