"""Issue 23, discovery from DNS: SANDBOX_HOST_PEERS=dns:<headless Service> resolves the
Service's A records (one address a pod) again every SANDBOX_HOST_PEERS_INTERVAL_MS, on the
resolver SANDBOX_HOST_PEERS_RESOLVER names; a peer reached on this pod's own listen port.
Here: dnsmasq on loopback started by the test serves the records, and the pods listen on
127.0.0.2, .3, .4 (all loopback on Linux), one port for all, as pods of one Deployment do.
A pod added to the records and one removed from them while clients run.

Needs root (the daemons create namespaces and cgroups) and Debian's dnsmasq package.
"""
import threading
import time

import pytest

from cluster_lib import (INTERVAL_MS, PEER_TIMEOUT_MS, SLACK, TOKEN_LEN, V1, DnsServer,
                         dnsmasq_bin, expect, ids_of, mfilter, stop_pods)
from k8s_helpers import Pod, free_port, is_root, request, wait_until

pytestmark = [
    pytest.mark.skipif(not is_root(), reason="the daemons create namespaces: needs root"),
    pytest.mark.skipif(dnsmasq_bin() is None,
                       reason="dnsmasq not installed (Debian package dnsmasq; scripts/setup.sh)"),
]

NAME = "sandbox-host-peers.sh-test.svc.cluster.local"
ADDRS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
UID_BASES = (387000, 388000, 389000)
PERIOD_BOUND = 3 * INTERVAL_MS / 1000 + PEER_TIMEOUT_MS / 1000 + SLACK


class DnsCluster:
    """Pods on ADDRS, one port, discovering each other through `dns`."""

    def __init__(self, dns, tmp_path):
        self.dns = dns
        self.tmp = tmp_path
        self.port = free_port()
        self.pods = []

    def start(self, i):
        root = self.tmp / ("pod%d" % i)
        root.mkdir()
        env = {"SANDBOX_HOST_PEERS": "dns:" + NAME,
               "SANDBOX_HOST_PEERS_RESOLVER": self.dns.resolver,
               "SANDBOX_HOST_PEERS_INTERVAL_MS": str(INTERVAL_MS),
               "SANDBOX_HOST_PEER_TIMEOUT_MS": str(PEER_TIMEOUT_MS),
               "SANDBOX_HOST_SNAPSHOT_ROOT": str(self.tmp / "snapshots"),
               "SANDBOX_HOST_IMAGE_PULL": "off"}
        p = Pod("pod%d" % i, UID_BASES[i], root=root, port=self.port, env=env, host=ADDRS[i])
        self.pods.append(p)
        return p

    def close(self):
        problems = []
        stop_pods(self.pods, problems)
        return problems


def cluster_of(pod):
    r = request(pod.url, "GET", "/healthz")
    assert r.status == 200, r
    return r.json().get("cluster")


def peers_of(pod):
    c = cluster_of(pod)
    return None if c is None else c.get("peers")


def wait_peers(pods, want):
    def seen():
        return all(peers_of(p) == want for p in pods)
    try:
        wait_until(seen, PERIOD_BOUND, interval=0.1)
    except AssertionError:
        raise AssertionError("every pod should see %d peers, saw %r" % (
            want, {p.name: peers_of(p) for p in pods}))


@pytest.fixture
def dns():
    d = DnsServer(NAME, ADDRS[:2])
    yield d
    d.close()


@pytest.fixture
def dc(dns, tmp_path):
    (tmp_path / "snapshots").mkdir()
    c = DnsCluster(dns, tmp_path)
    yield c
    problems = c.close()
    assert not problems, problems


# ---- the harness itself (needs no cluster code) -------------------------------------------


def test_the_test_resolver_serves_the_services_records_and_follows_changes(dns):
    assert sorted(dns.resolve()) == list(ADDRS[:2])
    assert dns.resolve("elsewhere.example") == [], "no upstream: nothing else resolves"
    dns.set(ADDRS)
    assert sorted(dns.resolve()) == list(ADDRS)
    dns.set(ADDRS[1:])
    assert sorted(dns.resolve()) == list(ADDRS[1:])


def test_pods_listen_on_their_own_loopback_address_one_port_for_all(dc):
    a, b = dc.start(0), dc.start(1)
    assert a.port == b.port and a.url != b.url
    for p in (a, b):
        assert request(p.url, "GET", "/readyz").status == 200


# ---- discovery (needs issue 23's cluster) -------------------------------------------------


def test_pods_find_each_other_in_dns_and_follow_a_pod_added_and_one_removed(dc, dns):
    a, b = dc.start(0), dc.start(1)
    wait_peers([a, b], 1)
    tag = "dns%d" % time.monotonic_ns()
    sa = V1(a.url).create_ok(metadata={"run": tag})[0]["id"]
    sb = V1(b.url).create_ok(metadata={"run": tag})[0]["id"]
    assert cluster_of(a)["token"] == sa[:TOKEN_LEN]

    # clients run all along: a's sandbox asked for through a and b, every answer a 200
    errors, stop = [], threading.Event()

    def client():
        n = 0
        while not stop.is_set():
            for p in (a, b):
                try:
                    r = V1(p.url).get(sa, timeout=PERIOD_BOUND)
                    if r.status != 200:
                        errors.append((p.name, r))
                except OSError as e:
                    errors.append((p.name, repr(e)))
            n += 1
            time.sleep(0.02)
        errors.append(("calls", n))
    t = threading.Thread(target=client)
    t.start()
    try:
        # a pod added: started, then in the records (it becomes ready, the Service lists it)
        c = dc.start(2)
        dns.set(ADDRS)
        wait_peers([a, b, c], 2)
        sc = V1(c.url).create_ok(metadata={"run": tag})[0]["id"]
        mf = "metadata=" + mfilter({"run": tag})
        for p in (a, b, c):
            assert ids_of(V1(p.url).listing(mf)) == [sa, sb, sc], p.name
            expect(V1(p.url).get(sc), 200)

        # a pod removed from the records (still running): the others drop it at once, its
        # sandboxes leave their listings within a period and its ids are no longer relayed
        dns.set((ADDRS[0], ADDRS[2]))
        wait_peers([a, c], 1)
        for p in (a, c):
            assert ids_of(V1(p.url).listing(mf)) == [sa, sc], p.name
            expect(V1(p.url).get(sb), 404, "SANDBOX_NOT_FOUND")
        expect(V1(b.url).get(sb), 200)  # its owner still answers for it
    finally:
        stop.set()
        t.join(PERIOD_BOUND + 10)
    calls = errors.pop()
    assert calls[0] == "calls" and calls[1] > 0, calls
    assert errors == [], errors[:5]
