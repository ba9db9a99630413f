/* plan.c: the address plan of the sandboxes' range (net.h): parsing a network, the gateway,
 * each slot's address. Pure. */
#include <arpa/inet.h>
#include <errno.h>

#include "sh/net.h"
#include "sh/util.h"

int sh_egress_ipv4_net_parse(const char *s, sh_egress_ipv4_net *ret)
{
        uint32_t addr;
        unsigned prefix;
        int r = sh_parse_ipv4_net(s, &addr, &prefix);

        if (r < 0)
                return r;
        ret->addr.s_addr = addr;
        ret->prefix = prefix;
        return 0;
}

struct in_addr sh_egress_gateway(const sh_egress_ipv4_net *range)
{
        struct in_addr g = {htonl(ntohl(range->addr.s_addr) + 1)};

        return g;
}

uint32_t sh_egress_slots(const sh_egress_ipv4_net *range)
{
        if (range->prefix > SH_EGRESS_PREFIX_MAX)
                return 0;
        return (uint32_t)((1ull << (32 - range->prefix)) - 2);
}

int sh_egress_slot_addr(const sh_egress_ipv4_net *range, uint32_t slot, struct in_addr *ret)
{
        if (slot >= sh_egress_slots(range))
                return -ERANGE;
        ret->s_addr = htonl(ntohl(range->addr.s_addr) + 2 + slot);
        return 0;
}
