/* link.c: one veth pair per sandbox between the pod's network namespace and the sandbox's,
 * addressed from the range (net.h), by rtnetlink through libmnl (a small, well-kept
 * library of the netfilter project: message building and acknowledgements, nothing more).
 * Every request is answered before the kernel returns from sendmsg (rtnetlink runs in the
 * sender's context), so the socket is non-blocking and a missing answer is an error: the loop
 * never waits. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sh/net.h"

#define LOOPBACK_IFINDEX 1 /* lo is the first device of every network namespace */
#define PEER_NAME        "eth0"
#define NL_BUF           8192 /* a request, or one read of answers (ours are small) */

struct sh_egress_links {
        struct mnl_socket *nl; /* in the pod's namespace */
        int pod_ns;            /* the pod's namespace, to come back to after a setns */
        sh_egress_ipv4_net range;
        char ifprefix[SH_EGRESS_IFPREFIX_MAX + 1];
        bool own_gateway; /* the gateway on lo is ours to remove */
        uint32_t seq;
};

static struct mnl_socket *nl_open(void)
{
        struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (nl && mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                int e = errno;

                mnl_socket_close(nl);
                errno = e;
                return NULL;
        }
        return nl;
}

typedef struct ifindex_ask {
        int index;
} ifindex_ask;

static int ifindex_cb(const struct nlmsghdr *nlh, void *data)
{
        const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);

        if (nlh->nlmsg_type == RTM_NEWLINK)
                ((ifindex_ask *)data)->index = ifm->ifi_index;
        return MNL_CB_OK;
}

/* Send one request and read its answer up to the acknowledgement. 0 or -errno. */
static int talk(sh_egress_links *l, struct mnl_socket *nl, struct nlmsghdr *nlh, mnl_cb_t cb,
                void *data)
{
        _Alignas(struct nlmsghdr) char buf[NL_BUF];
        uint32_t seq = ++l->seq;
        ssize_t got;
        int r;

        nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
        nlh->nlmsg_seq = seq;
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        do {
                got = mnl_socket_recvfrom(nl, buf, sizeof(buf));
                if (got < 0)
                        return errno == EAGAIN ? -ETIMEDOUT : -errno;
                r = mnl_cb_run(buf, (size_t)got, seq, mnl_socket_get_portid(nl), cb, data);
                if (r == MNL_CB_ERROR)
                        return -errno;
        } while (r > MNL_CB_STOP);
        return 0;
}

static struct nlmsghdr *msg(char *buf, uint16_t type, uint16_t flags)
{
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);

        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = flags;
        return nlh;
}

/* RTM_NEWLINK / RTM_DELLINK / RTM_GETLINK of one device, by name or index. */
static struct nlmsghdr *link_msg(char *buf, uint16_t type, uint16_t flags, const char *name,
                                 int index)
{
        struct nlmsghdr *nlh = msg(buf, type, flags);
        struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));

        ifm->ifi_family = AF_UNSPEC;
        ifm->ifi_index = index;
        if (name)
                mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        return nlh;
}

static int link_up(sh_egress_links *l, struct mnl_socket *nl, int index)
{
        _Alignas(struct nlmsghdr) char buf[NL_BUF];
        struct nlmsghdr *nlh = link_msg(buf, RTM_NEWLINK, 0, NULL, index);
        struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);

        ifm->ifi_flags = IFF_UP;
        ifm->ifi_change = IFF_UP;
        return talk(l, nl, nlh, NULL, NULL);
}

static int link_index(sh_egress_links *l, struct mnl_socket *nl, const char *name)
{
        _Alignas(struct nlmsghdr) char buf[NL_BUF];
        ifindex_ask ask = {0};
        int r = talk(l, nl, link_msg(buf, RTM_GETLINK, 0, name, 0), ifindex_cb, &ask);

        if (r < 0)
                return r;
        return ask.index > 0 ? ask.index : -ENODEV;
}

static int link_delete(sh_egress_links *l, const char *name)
{
        _Alignas(struct nlmsghdr) char buf[NL_BUF];
        int r = talk(l, l->nl, link_msg(buf, RTM_DELLINK, 0, name, 0), NULL, NULL);

        return r == -ENODEV ? 0 : r;
}

/* A /32 `local` on device `index`, with `peer` on the other end (routed to the device). */
static int addr_add(sh_egress_links *l, struct mnl_socket *nl, uint16_t type, int index,
                    struct in_addr local, const struct in_addr *peer)
{
        _Alignas(struct nlmsghdr) char buf[NL_BUF];
        struct nlmsghdr *nlh = msg(buf, type, type == RTM_NEWADDR ? NLM_F_CREATE | NLM_F_EXCL : 0);
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));

        ifa->ifa_family = AF_INET;
        ifa->ifa_prefixlen = 32;
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        ifa->ifa_index = (unsigned)index;
        mnl_attr_put(nlh, IFA_LOCAL, sizeof(local), &local);
        mnl_attr_put(nlh, IFA_ADDRESS, sizeof(local), peer ? peer : &local);
        return talk(l, nl, nlh, NULL, NULL);
}

static int default_route(sh_egress_links *l, struct mnl_socket *nl, int index, struct in_addr gw)
{
        _Alignas(struct nlmsghdr) char buf[NL_BUF];
        struct nlmsghdr *nlh = msg(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));

        rtm->rtm_family = AF_INET;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = RTPROT_STATIC;
        rtm->rtm_scope = RT_SCOPE_UNIVERSE;
        rtm->rtm_type = RTN_UNICAST;
        mnl_attr_put(nlh, RTA_GATEWAY, sizeof(gw), &gw);
        mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)index);
        return talk(l, nl, nlh, NULL, NULL);
}

/* net.ipv4.ip_forward of the calling process's namespace to 1. 0 or -errno. */
static int forwarding_on(void)
{
        char c = 0;
        int fd = open("/proc/sys/net/ipv4/ip_forward", O_RDWR | O_CLOEXEC);
        int r = 0;

        if (fd < 0)
                fd = open("/proc/sys/net/ipv4/ip_forward", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (read(fd, &c, 1) != 1)
                r = -EIO;
        else if (c != '1' && (lseek(fd, 0, SEEK_SET) < 0 || write(fd, "1\n", 2) != 2))
                r = -errno;
        close(fd);
        return r;
}

int sh_egress_links_open(const sh_egress_ipv4_net *range, const char *ifprefix,
                         sh_egress_links **ret, sh_error **err)
{
        sh_egress_links *l;
        size_t i, plen = ifprefix ? strlen(ifprefix) : 0;
        int r;

        if (range->prefix > SH_EGRESS_PREFIX_MAX || plen == 0 || plen > SH_EGRESS_IFPREFIX_MAX)
                return sh_error_new(err, SH_E_INVALID, "links: a bad range or name prefix");
        for (i = 0; i < plen; i++)
                if (ifprefix[i] < 'a' || ifprefix[i] > 'z')
                        return sh_error_new(err, SH_E_INVALID, "links: a bad name prefix");
        r = forwarding_on();
        if (r < 0)
                return sh_error_make(err, -r,
                                     "links: net.ipv4.ip_forward is 0 and cannot be set here "
                                     "(set it in the pod's securityContext.sysctls)");
        l = calloc(1, sizeof(*l));
        if (!l)
                return sh_error_make(err, ENOMEM, "links: allocating");
        l->range = *range;
        memcpy(l->ifprefix, ifprefix, plen + 1);
        l->pod_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (l->pod_ns < 0) {
                r = sh_error_make(err, errno, "links: opening this network namespace");
                free(l);
                return r;
        }
        l->nl = nl_open();
        if (!l->nl) {
                r = sh_error_make(err, errno, "links: an rtnetlink socket");
                goto fail;
        }
        /* The gateway on lo: the DNS proxy binds it before any link exists. */
        r = addr_add(l, l->nl, RTM_NEWADDR, LOOPBACK_IFINDEX, sh_egress_gateway(range), NULL);
        if (r < 0 && r != -EEXIST) {
                r = sh_error_make(err, -r, "links: the gateway's address on lo");
                goto fail;
        }
        l->own_gateway = r == 0;
        *ret = l;
        return 0;
fail:
        if (l->nl)
                mnl_socket_close(l->nl);
        close(l->pod_ns);
        free(l);
        return r;
}

sh_egress_links *sh_egress_links_close(sh_egress_links *l)
{
        if (!l)
                return NULL;
        if (l->own_gateway)
                (void)addr_add(l, l->nl, RTM_DELADDR, LOOPBACK_IFINDEX,
                               sh_egress_gateway(&l->range), NULL);
        mnl_socket_close(l->nl);
        close(l->pod_ns);
        free(l);
        return NULL;
}

void sh_egress_link_name(const sh_egress_links *l, uint32_t slot, char *buf, size_t size)
{
        snprintf(buf, size, "%s%u", l->ifprefix, slot);
}

/* An rtnetlink socket in the namespace `ns`: entered for one socket() and left. A socket
 * stays in the namespace it was made in. */
static struct mnl_socket *nl_open_in(sh_egress_links *l, int ns)
{
        struct mnl_socket *nl;
        int e;

        if (setns(ns, CLONE_NEWNET) < 0)
                return NULL;
        nl = nl_open();
        e = errno;
        /* Coming back to a namespace we hold an fd of, with the capability that just let us
         * leave it, cannot fail; if it did, every socket the daemon made next would be in a
         * sandbox's network: stopping is the only safe answer. */
        if (setns(l->pod_ns, CLONE_NEWNET) < 0)
                abort();
        errno = e;
        return nl;
}

/* The veth pair: `name` here, its peer `eth0` made in the namespace `netns_fd`. */
static int veth_add(sh_egress_links *l, const char *name, int netns_fd)
{
        _Alignas(struct nlmsghdr) char buf[NL_BUF];
        struct nlmsghdr *nlh = link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, name, 0);
        struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        struct nlattr *data, *peer;
        struct ifinfomsg *pifm;

        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
        data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
        peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
        pifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*pifm));
        pifm->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, PEER_NAME);
        mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)netns_fd);
        mnl_attr_nest_end(nlh, peer);
        mnl_attr_nest_end(nlh, data);
        mnl_attr_nest_end(nlh, info);
        return talk(l, l->nl, nlh, NULL, NULL);
}

/* The sandbox's side: its address with the gateway as peer, eth0 and lo up, the default
 * route. */
static int inside(sh_egress_links *l, int netns_fd, struct in_addr addr, struct in_addr gw,
                  const char **step)
{
        struct mnl_socket *nl;
        int r, index;

        *step = "entering the sandbox's network namespace";
        nl = nl_open_in(l, netns_fd);
        if (!nl)
                return -errno;
        *step = "finding eth0";
        r = index = link_index(l, nl, PEER_NAME);
        if (r >= 0) {
                *step = "addressing eth0";
                r = addr_add(l, nl, RTM_NEWADDR, index, addr, &gw);
        }
        if (r >= 0) {
                *step = "eth0 up";
                r = link_up(l, nl, index);
        }
        if (r >= 0) {
                *step = "lo up";
                r = link_up(l, nl, LOOPBACK_IFINDEX);
        }
        if (r >= 0) {
                *step = "the default route";
                r = default_route(l, nl, index, gw);
        }
        mnl_socket_close(nl);
        return r;
}

int sh_egress_link_add(sh_egress_links *l, uint32_t slot, int netns_fd, sh_error **err)
{
        char name[IFNAMSIZ];
        const char *step = "the veth pair";
        struct in_addr addr, gw = sh_egress_gateway(&l->range);
        int r, index;

        if (sh_egress_slot_addr(&l->range, slot, &addr) < 0)
                return sh_error_new(err, SH_E_INVALID, "links: no slot %u in the range", slot);
        sh_egress_link_name(l, slot, name, sizeof(name));
        r = veth_add(l, name, netns_fd);
        if (r == -EEXIST) { /* a previous run's, left by a crash */
                r = link_delete(l, name);
                if (r >= 0)
                        r = veth_add(l, name, netns_fd);
        }
        if (r < 0)
                return sh_error_make(err, -r, "links: %s: %s", name, step);
        step = "finding the host end";
        r = index = link_index(l, l->nl, name);
        if (r >= 0) {
                step = "addressing the host end";
                r = addr_add(l, l->nl, RTM_NEWADDR, index, gw, &addr);
        }
        if (r >= 0) {
                step = "the host end up";
                r = link_up(l, l->nl, index);
        }
        if (r >= 0)
                r = inside(l, netns_fd, addr, gw, &step);
        if (r < 0) {
                int e = -r;

                (void)link_delete(l, name);
                return sh_error_make(err, e, "links: %s: %s", name, step);
        }
        return 0;
}

int sh_egress_link_del(sh_egress_links *l, uint32_t slot, sh_error **err)
{
        char name[IFNAMSIZ];
        int r;

        sh_egress_link_name(l, slot, name, sizeof(name));
        r = link_delete(l, name);
        return r < 0 ? sh_error_make(err, -r, "links: deleting %s", name) : 0;
}
