"""Issue 24's attacks, each a kept test: what a sandbox tries against the policy enforced from
the pod's side (egresslib's pod and internet; the daemon inside the pod with
SANDBOX_HOST_EGRESS_CONN_MAX=egresslib.CONN_MAX). Each attack that a dropped packet defeats
has its positive control: the same target answers from the pod's own namespace, so that
"unreachable" is the daemon's doing. Every network wait inside a sandbox has a 3 s timeout;
nothing is timed."""
import pytest

import oslib
import shlib
import sselib
from oslib import expect
from egresslib import (BIG_ADDRS, CONN_MAX, ECHO_PORT, GITHUB, INET_ADDR, METADATA, POD_ADDR,
                       POD_SERVICE_PORT, PRIVATE, PYPI, Background, create, policy, probe,
                       unique)
from egresslib import eosc, netd, own_daemon, own_netd, sandbox, world  # noqa: F401

NXDOMAIN = 3


def assert_blocked(osc, sid, host, port=80):
    r = probe(osc, sid, "http", host, port)
    assert not r["ok"] and "body" not in r, "%s:%d must not be reachable: %r" % (host, port, r)
    return r


def assert_answered(osc, sid, name, addrs, tcp=False):
    r = probe(osc, sid, "dns", name, "-", 53, 1, "tcp" if tcp else "udp")
    assert r.get("ok") and r["rcode"] == 0 and sorted(r["addrs"]) == sorted(addrs), \
        "%s over %s must be answered %r: %r" % (name, "TCP" if tcp else "UDP", addrs, r)


# ---- addresses the sandbox's policy did not open --------------------------------------------

def test_an_address_opened_by_one_sandboxs_answer_is_closed_to_another(eosc, sandbox):
    a = sandbox(policy("deny", ("allow", "pypi.org")))
    b = sandbox(policy("deny", ("allow", "www.github.com")))
    assert probe(eosc, a, "http", "pypi.org")["ok"]
    assert_blocked(eosc, b, PYPI)
    r = probe(eosc, b, "dns", "pypi.org")
    assert r.get("ok") and r["rcode"] == NXDOMAIN, r
    assert_blocked(eosc, b, PYPI)


def test_a_direct_ip_to_an_address_no_rule_allows_is_dropped(eosc, sandbox, world):
    sid = sandbox(policy("deny", ("allow", "pypi.org")))
    assert probe(eosc, sid, "http", "pypi.org")["ok"]
    for addr in (GITHUB, INET_ADDR):
        assert world.probe(world.pod, "http", addr)["ok"], addr
        assert_blocked(eosc, sid, addr)
    r = probe(eosc, sid, "connect", GITHUB, ECHO_PORT)
    assert r["ok"] is False, r


# ---- DNS ------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_dns_to_another_resolver_is_dropped(eosc, sandbox, world, transport):
    """Even an allow-all sandbox asks only the daemon's proxy: the upstream itself (which
    answers the pod) gets nothing from it."""
    sid = sandbox()
    ctl = world.probe(world.pod, "dns", "pypi.org", INET_ADDR, 53, 1, transport)
    assert ctl.get("addrs") == [PYPI], ctl
    r = probe(eosc, sid, "dns", "pypi.org", INET_ADDR, 53, 1, transport)
    assert r["ok"] is False, "DNS to %s over %s from a sandbox: %r" % (INET_ADDR, transport, r)
    r = probe(eosc, sid, "dns", "pypi.org", PYPI, 53, 1, transport)
    assert r["ok"] is False, r


@pytest.mark.parametrize("name,addr,port", [("rebind.test", METADATA, 80),
                                            ("private.test", PRIVATE, 80),
                                            ("pod.test", POD_ADDR, POD_SERVICE_PORT)])
def test_an_allowed_name_rebound_to_a_denied_address_is_not_opened(eosc, sandbox, world, name,
                                                                    addr, port):
    """DNS rebinding: the name is allowed, its answer points at the metadata address, a
    private one or the pod's own; each answers from the pod, none from the sandbox."""
    assert world.probe(world.pod, "http", addr, port)["ok"], (addr, port)
    for pol in (policy("deny", ("allow", name)), None):
        sid = sandbox(pol)
        assert_blocked(eosc, sid, name, port)
        assert_blocked(eosc, sid, addr, port)


def flood_while_another_asks(daemon, names):
    """Sandbox A sends UDP queries for `names` to the proxy as fast as they go out, while
    sandbox B's queries (allowed, denied) must each be answered within the probe's 3 s and
    /healthz within 3 s: the loop keeps serving the others. A daemon of the test's own: a
    jammed one fails this test, not the module's next ones."""
    osc = oslib.os_client(daemon)
    made = []

    def sandbox(pol=None):
        made.append(create(osc, pol))
        return made[-1]

    flooder = sandbox()
    other = sandbox(policy("deny", ("allow", "pypi.org"), ("allow", "www.github.com")))
    stop = unique("stop")
    bg = Background(osc, flooder, "flood", 10 ** 7, stop, ",".join(names), stop_file=stop)
    try:
        assert bg.next()["stage"] == "flooding"
        with shlib.ProbeWatch(daemon.client, timeout=3.0) as w:
            for _ in range(4):
                assert_answered(osc, other, "pypi.org", [PYPI])
                assert_answered(osc, other, "www.github.com", [GITHUB])
                r = probe(osc, other, "dns", "nope.test")
                assert r.get("ok") and r["rcode"] == NXDOMAIN, r
        w.assert_answered(min_probes=2)
    finally:
        bg.stop()
        for sid in made:
            osc.kill(sid)
    done = bg.results[-1]
    assert done["stage"] == "done" and done["sent"] >= 1000, \
        "the flood sent too little to be one: %r" % (done,)


def test_a_dns_flood_does_not_stop_anothers_answers(own_netd):
    flood_while_another_asks(own_netd, ["pypi.org", "nope.test", "www.github.com"])


def test_a_flood_of_oversized_answers_does_not_stop_anothers_answers(own_netd):
    """big.test is allowed and answers 255 A records (truncated over UDP)."""
    flood_while_another_asks(own_netd, ["big.test"])


def test_an_oversized_answer_over_tcp_is_answered_or_refused_whole(eosc, sandbox):
    sid = sandbox()
    r = probe(eosc, sid, "dns", "big.test", "-", 53, 1, "tcp")
    # whatever the proxy makes of 255 records (all, capped, SERVFAIL), a whole message
    assert r.get("ok") is True, r
    assert set(r["addrs"]) <= set(BIG_ADDRS), r


def test_a_slow_tcp_dns_client_does_not_stop_others(eosc, sandbox, netd):
    slow = sandbox()
    other = sandbox(policy("deny", ("allow", "pypi.org")))
    stop = unique("stop")
    bg = Background(eosc, slow, "slowtcp", 64, stop, stop_file=stop)
    try:
        held = bg.next()
        assert held["stage"] == "held" and held["connected"] >= 1, held
        assert_answered(eosc, other, "pypi.org", [PYPI], tcp=True)
        assert_answered(eosc, other, "pypi.org", [PYPI], tcp=False)
        # the slow one's own next query over UDP is answered too (its TCP ones hold nothing)
        assert_answered(eosc, slow, "pypi.org", [PYPI], tcp=False)
        shlib.healthz_ok(netd.client, timeout=3.0)
    finally:
        bg.stop()


# ---- the pod, the daemon, the other sandboxes -----------------------------------------------

def test_the_daemons_api_is_unreachable_from_inside(eosc, sandbox, netd, world):
    """The daemon listens on 0.0.0.0 in the pod: its API answers the pod on the pod's address,
    never a sandbox (on it, on the gateway, or on the sandbox's own loopback)."""
    gw = netd.egress["gateway"]
    assert shlib.Client(POD_ADDR, netd.port).get("/healthz", timeout=3).status == 200
    sid = sandbox()
    for addr in (POD_ADDR, gw, "127.0.0.1"):
        r = probe(eosc, sid, "connect", addr, netd.port)
        assert r["ok"] is False, "the daemon's API at %s:%d from a sandbox: %r" % (
            addr, netd.port, r)


def test_the_pods_own_address_is_unreachable_from_inside(eosc, sandbox, world):
    assert world.probe(world.pod, "http", POD_ADDR, POD_SERVICE_PORT)["ok"]
    sid = sandbox()
    assert_blocked(eosc, sid, POD_ADDR, POD_SERVICE_PORT)


def test_another_sandboxs_address_is_unreachable_from_inside(eosc, sandbox):
    a, b = sandbox(), sandbox()
    a_addr = probe(eosc, a, "ifaces")["ifaces"]["eth0"]
    b_addr = probe(eosc, b, "ifaces")["ifaces"]["eth0"]
    assert a_addr != b_addr
    stop = unique("stop")
    bg = Background(eosc, a, "listen", 8000, stop, stop_file=stop)
    try:
        assert bg.next()["stage"] == "listening"
        r = probe(eosc, b, "connect", a_addr, 8000)
        assert r["ok"] is False, "sandbox %s reached sandbox %s:8000: %r" % (b_addr, a_addr, r)
    finally:
        bg.stop()
    assert bg.results[-1] == {"stage": "done", "ok": True, "accepted": 0}, bg.results


# ---- the sandbox's own network stack --------------------------------------------------------

def test_raw_and_packet_sockets_are_refused(eosc, sandbox):
    sid = sandbox()
    raw = probe(eosc, sid, "raw")["raw"]
    # EAFNOSUPPORT: a seccomp filter that refuses the family outright
    assert all(v in ("EPERM", "EACCES", "EAFNOSUPPORT") for v in raw.values()), raw


def test_changing_its_own_address_routes_or_link_fails(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", "pypi.org")))
    before = probe(eosc, sid, "ifaces")["ifaces"]
    sets = probe(eosc, sid, "setaddr", "100.127.250.250")["set"]
    assert all(v in ("EPERM", "EACCES") for v in sets.values()), sets
    # and with iproute2, when the image has it (the host image does)
    st = sselib.run(eosc, sid, "command -v ip >/dev/null || exit 0; "
                    "ip addr add 100.127.250.250/32 dev eth0 && echo CHANGED; "
                    "ip route add 203.0.113.0/24 dev eth0 && echo CHANGED; "
                    "ip route replace default dev eth0 && echo CHANGED; "
                    "ip link set eth0 address 02:00:00:00:00:01 && echo CHANGED; "
                    "ip link set eth0 down && echo CHANGED; true")
    st.assert_complete()
    assert "CHANGED" not in st.texts(), (st.texts(), st.texts("stderr"))
    assert probe(eosc, sid, "ifaces")["ifaces"] == before
    assert_blocked(eosc, sid, GITHUB)
    assert probe(eosc, sid, "http", "pypi.org")["ok"]


# ---- tenant bounds --------------------------------------------------------------------------

def test_connections_past_the_per_sandbox_bound_fail_while_another_connects(eosc, sandbox):
    """SANDBOX_HOST_EGRESS_CONN_MAX: a sandbox holding CONN_MAX connections opens no more;
    another sandbox still does."""
    hog, other = sandbox(), sandbox()
    stop = unique("stop")
    bg = Background(eosc, hog, "hold", PYPI, ECHO_PORT, 2 * CONN_MAX, stop, stop_file=stop)
    try:
        held = bg.next()
        assert held["stage"] == "held" and 1 <= held["connected"] <= CONN_MAX, \
            "%d connections asked, bound %d: %r" % (2 * CONN_MAX, CONN_MAX, held)
        r = probe(eosc, hog, "connect", PYPI, ECHO_PORT)
        assert r["ok"] is False, "a connection past the bound: %r" % (r,)
        assert probe(eosc, other, "http", "pypi.org")["ok"]
        assert probe(eosc, other, "connect", PYPI, ECHO_PORT)["ok"]
    finally:
        bg.stop()



def test_a_spoofed_source_address_gets_no_answer_and_opens_nothing_for_its_owner(eosc,
                                                                                sandbox):
    """IP_FREEBIND lets a sandbox bind another sandbox's address without privilege: its DNS
    query from that address must neither be answered nor open the name for the owner, and
    its connection from it must not leave."""
    victim = sandbox(policy("deny", ("allow", "www.github.com")))
    attacker = sandbox(policy("deny", ("allow", "pypi.org")))
    v_addr = probe(eosc, victim, "ifaces")["ifaces"]["eth0"]
    sp = probe(eosc, attacker, "spoof", v_addr, "pypi.org", PYPI, ECHO_PORT)["spoof"]
    assert sp["dns"] != "answered" and sp["tcp"] != "ok", sp
    assert_blocked(eosc, victim, PYPI)


def test_a_sandbox_in_a_deleted_sandboxs_slot_inherits_none_of_its_addresses(own_daemon):
    """A's answer opened pypi.org's address for A; A is deleted; a deny-all sandbox that gets
    A's address (its slot: a daemon of 2 slots reuses them) cannot reach it."""
    d = own_daemon({"SANDBOX_HOST_MAX_SANDBOXES": "2"})
    osc = oslib.os_client(d)
    a = create(osc, policy("deny", ("allow", "pypi.org")))
    a_addr = probe(osc, a, "ifaces")["ifaces"]["eth0"]
    assert probe(osc, a, "http", "pypi.org")["ok"]
    expect(osc.delete("/v1/sandboxes/" + a), 204)
    made = []
    try:
        for _ in range(3):
            made.append(create(osc, policy("deny")))
            if probe(osc, made[-1], "ifaces")["ifaces"]["eth0"] == a_addr:
                break
            osc.kill(made[-1])
        else:
            pytest.fail("no new sandbox got the deleted one's address %s" % a_addr)
        assert_blocked(osc, made[-1], PYPI)
    finally:
        for sid in made:
            osc.kill(sid)
