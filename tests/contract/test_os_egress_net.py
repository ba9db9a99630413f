"""Issue 24 (OPENSANDBOX.md sections 2 `networkPolicy` and 4): a /v1 sandbox on the network,
under its policy, enforced from the pod's side. The daemon runs inside a "pod" namespace the
test made, linked to an "internet" namespace it made (egresslib: dnsmasq answers pypi.org,
www.github.com, *.example.test with that namespace's addresses; an HTTP server answers
"hello from inet <address>" on each). Inside the sandboxes the image's python3 connects and
resolves (egresslib.PROBE); every network wait there has a 3 s timeout (a dropped SYN fails
within it), nothing is timed.

What is proved here: a policy's names, wildcards and CIDRs, the egress API (GET, PATCH,
DELETE) changing them at run time (an open connection to a now-denied address cut), no
policy = allow-all bounded by the operator's lists, and native sandboxes without network.
The attacks are test_os_egress_attacks.py."""
import json
import re

import pytest

import execlib
import oslib
import shlib
import sselib
from egresslib import (BLOCKED, EXAMPLE_APEX, EXAMPLE_SUB, GITHUB, INET_ADDR, MIRROR, OP_DENIED,
                       PROBE, PYPI, SHORT, UNNAMED, Background, create, policy, probe,
                       start_daemon, unique)
from egresslib import eosc, netd, own_daemon, sandbox, world  # noqa: F401  (fixtures)
from oslib import expect
from test_warm_pool import settled_workers

NXDOMAIN = 3


def hello(addr):
    return "hello from inet " + addr


def assert_reaches(osc, sid, host, addr, port=80):
    r = probe(osc, sid, "http", host, port)
    assert r["ok"] and r["body"] == hello(addr), "%s:%d from the sandbox: %r" % (host, port, r)


def assert_blocked(osc, sid, host, port=80):
    r = probe(osc, sid, "http", host, port)
    assert not r["ok"] and "body" not in r, "%s:%d must not be reachable: %r" % (host, port, r)
    return r


def assert_nxdomain(osc, sid, name):
    r = probe(osc, sid, "dns", name)
    assert r.get("ok") and r["rcode"] == NXDOMAIN and r["addrs"] == [], \
        "%s must be NXDOMAIN from the proxy: %r" % (name, r)


def get_policy(osc, sid):
    return expect(osc.egress(sid, "GET", "/policy"), 200)


# ---- the link and the resolver --------------------------------------------------------------

def test_healthz_says_egress_is_supported_with_dns_and_nft(netd):
    eg = netd.egress
    assert eg["enforcement"] == "dns+nft", eg
    assert eg["range"] == "100.127.0.0/16" and eg["gateway"] == "100.127.0.1", eg


def test_a_v1_sandbox_has_eth0_in_the_range_and_the_gateway_as_its_resolver(eosc, sandbox,
                                                                            netd):
    sid = sandbox()
    ifs = probe(eosc, sid, "ifaces")["ifaces"]
    assert set(ifs) == {"lo", "eth0"}, ifs
    a = [int(x) for x in ifs["eth0"].split(".")]
    assert a[:2] == [100, 127] and ifs["eth0"] != netd.egress["gateway"], ifs
    st = sselib.stdout_of(eosc, sid, "cat /etc/resolv.conf")
    assert [ln.split()[1:] for ln in st if ln.startswith("nameserver")] == \
        [[netd.egress["gateway"]]], st


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_the_proxy_answers_an_allowed_name_over_udp_and_tcp(eosc, sandbox, transport):
    sid = sandbox(policy("deny", ("allow", "pypi.org")))
    r = probe(eosc, sid, "dns", "pypi.org", "-", 53, 1, transport)
    assert r.get("ok") and r["rcode"] == 0 and r["addrs"] == [PYPI], r


def test_aaaa_is_answered_empty(eosc, sandbox):
    sid = sandbox()
    r = probe(eosc, sid, "dns", "pypi.org", "-", 53, 28)
    assert r.get("ok") and r["rcode"] == 0 and r["an"] == 0, r


# ---- a policy at create ---------------------------------------------------------------------

def test_deny_default_with_pypi_allowed_reaches_pypi_by_name(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", "pypi.org")))
    assert probe(eosc, sid, "resolve", "pypi.org") == {"ok": True, "addrs": [PYPI]}
    assert_reaches(eosc, sid, "pypi.org", PYPI)


def test_deny_default_with_pypi_allowed_answers_other_names_nxdomain(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", "pypi.org")))
    assert_nxdomain(eosc, sid, "www.github.com")
    r = assert_blocked(eosc, sid, "www.github.com")
    assert r["err"].startswith("gaierror"), r


def test_deny_default_with_pypi_allowed_drops_a_direct_ip(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", "pypi.org")))
    assert_blocked(eosc, sid, GITHUB)


def test_an_allowed_names_address_opens_only_with_its_answer(eosc, sandbox):
    """Before the sandbox asked for pypi.org, its address by IP is dropped; after the answer,
    it is reachable (the answer's addresses enter the sandbox's set)."""
    sid = sandbox(policy("deny", ("allow", "pypi.org")))
    assert_blocked(eosc, sid, PYPI)
    assert probe(eosc, sid, "resolve", "pypi.org")["addrs"] == [PYPI]
    assert_reaches(eosc, sid, PYPI, PYPI)


def test_wildcard_rule_allows_the_names_below_it_not_the_apex(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", "*.example.test")))
    assert_reaches(eosc, sid, "a.example.test", EXAMPLE_SUB)
    assert_reaches(eosc, sid, "b.example.test", EXAMPLE_SUB)
    assert_nxdomain(eosc, sid, "example.test")
    assert_blocked(eosc, sid, EXAMPLE_APEX)


def test_cidr_allow_rule_opens_an_address_by_ip_under_default_deny(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", UNNAMED + "/32")))
    assert_reaches(eosc, sid, UNNAMED, UNNAMED)
    assert_blocked(eosc, sid, GITHUB)


def test_cidr_deny_rule_closes_a_range_under_default_allow_by_ip_and_by_name(eosc, sandbox):
    """A CIDR deny rule binds DNS answers too: www.github.com resolves (no name rule denies
    it) but its address in the denied range is not opened."""
    sid = sandbox(policy("allow", ("deny", "203.0.113.0/24")))
    assert_blocked(eosc, sid, GITHUB)
    assert_blocked(eosc, sid, "www.github.com")
    assert_reaches(eosc, sid, "pypi.org", PYPI)


def test_rules_are_evaluated_in_order_first_match_wins(eosc, sandbox):
    sid = sandbox(policy("deny", ("deny", "a.example.test"), ("allow", "*.example.test")))
    assert_nxdomain(eosc, sid, "a.example.test")
    assert_reaches(eosc, sid, "b.example.test", EXAMPLE_SUB)


# ---- no policy: allow-all within the operator's lists ---------------------------------------

def test_no_policy_reaches_the_test_internet_by_name_and_by_ip(eosc, sandbox):
    sid = sandbox()
    assert_reaches(eosc, sid, "pypi.org", PYPI)
    assert_reaches(eosc, sid, "www.github.com", GITHUB)
    assert_reaches(eosc, sid, GITHUB, GITHUB)
    assert_reaches(eosc, sid, UNNAMED, UNNAMED)
    assert_reaches(eosc, sid, INET_ADDR, INET_ADDR)


def test_no_policy_stops_at_the_operators_deny_list(eosc, sandbox, world):
    sid = sandbox()
    # both answer from the pod itself: the deny list, not the network, stops the sandbox
    assert world.probe(world.pod, "http", OP_DENIED)["body"] == hello(OP_DENIED)
    assert world.probe(world.pod, "http", BLOCKED)["body"] == hello(BLOCKED)
    assert_blocked(eosc, sid, OP_DENIED)
    # a name on the list is closed at the resolver: its address by IP is the CIDR entries'
    # business (an allow-all sandbox reaches BLOCKED by IP, as OpenSandbox's name rules go)
    assert_nxdomain(eosc, sid, "blocked.test")
    assert_blocked(eosc, sid, "blocked.test")


def test_the_operators_allow_list_opens_a_name_to_a_deny_all_sandbox(eosc, sandbox):
    sid = sandbox(policy("deny"))
    assert_reaches(eosc, sid, "mirror.test", MIRROR)
    assert_nxdomain(eosc, sid, "pypi.org")


def test_the_operators_deny_list_wins_over_a_sandboxs_allow_rule(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", "blocked.test"), ("allow", OP_DENIED + "/32")))
    assert_nxdomain(eosc, sid, "blocked.test")
    assert_blocked(eosc, sid, OP_DENIED)
    assert_blocked(eosc, sid, BLOCKED)


# ---- the egress API at run time -------------------------------------------------------------

def test_get_policy_shows_the_rules_mode_and_dns_nft(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", "pypi.org"), ("allow", "*.example.test")))
    assert get_policy(eosc, sid) == {
        "status": "ok", "mode": "deny_all", "enforcementMode": "dns+nft",
        "policy": {"defaultAction": "deny",
                   "egress": [{"action": "allow", "target": "pypi.org"},
                              {"action": "allow", "target": "*.example.test"}]}}


def test_get_policy_without_a_policy_is_allow_all(eosc, sandbox):
    sid = sandbox()
    assert get_policy(eosc, sid) == {
        "status": "ok", "mode": "allow_all", "enforcementMode": "dns+nft",
        "policy": {"defaultAction": "allow", "egress": []}}


def test_patch_merges_incoming_rules_first_and_get_shows_the_merge(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", "pypi.org"), ("allow", "*.example.test")))
    r = eosc.egress(sid, "PATCH", "/policy", body=[{"action": "deny", "target": "pypi.org"},
                                                   {"action": "allow",
                                                    "target": "www.github.com"}])
    j = expect(r, 200)
    assert j["status"] == "ok" and j["mode"] == "deny_all" and \
        j["enforcementMode"] == "dns+nft", j
    assert get_policy(eosc, sid)["policy"] == {
        "defaultAction": "deny",
        "egress": [{"action": "deny", "target": "pypi.org"},
                   {"action": "allow", "target": "www.github.com"},
                   {"action": "allow", "target": "*.example.test"}]}


def test_patch_policy_flips_pypi_and_github(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", "pypi.org")))
    assert_reaches(eosc, sid, "pypi.org", PYPI)
    assert_nxdomain(eosc, sid, "www.github.com")
    expect(eosc.egress(sid, "PATCH", "/policy",
                       body=[{"action": "allow", "target": "www.github.com"},
                             {"action": "deny", "target": "pypi.org"}]), 200)
    assert_reaches(eosc, sid, "www.github.com", GITHUB)
    assert_nxdomain(eosc, sid, "pypi.org")
    # the address its earlier answer opened is closed with the name
    assert_blocked(eosc, sid, PYPI)


def test_patch_cuts_an_established_connection_to_a_now_denied_address(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", "pypi.org")))
    go = unique("go")
    bg = Background(eosc, sid, "echo", "pypi.org", 7000, go)
    try:
        opened = bg.next()
        assert opened == {"stage": "open", "ok": True}, opened
        expect(eosc.egress(sid, "PATCH", "/policy",
                           body=[{"action": "deny", "target": "pypi.org"}]), 200)
        bg.signal(go)
        after = bg.next()
        assert after["stage"] == "after" and after["ok"] is False, \
            "the connection to pypi.org outlived the PATCH that denied it: %r" % (after,)
    finally:
        bg.stop()


def test_patch_keeps_an_established_connection_to_a_still_allowed_address(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", "pypi.org")))
    go = unique("go")
    bg = Background(eosc, sid, "echo", "pypi.org", 7000, go)
    try:
        assert bg.next() == {"stage": "open", "ok": True}
        expect(eosc.egress(sid, "PATCH", "/policy",
                           body=[{"action": "allow", "target": "www.github.com"}]), 200)
        bg.signal(go)
        after = bg.next()
        assert after == {"stage": "after", "ok": True}, after
    finally:
        bg.stop()


def test_patch_with_a_cidr_rule_applies_to_the_next_connection(eosc, sandbox):
    sid = sandbox(policy("deny"))
    assert_blocked(eosc, sid, UNNAMED)
    expect(eosc.egress(sid, "PATCH", "/policy",
                       body=[{"action": "allow", "target": "192.0.2.96/30"}]), 200)
    assert_reaches(eosc, sid, UNNAMED, UNNAMED)


def test_delete_policy_removes_targets_and_is_idempotent(eosc, sandbox):
    sid = sandbox(policy("deny", ("allow", "pypi.org"), ("allow", "www.github.com")))
    assert_reaches(eosc, sid, "pypi.org", PYPI)
    for _ in range(2):
        j = expect(eosc.egress(sid, "DELETE", "/policy", body=["pypi.org", "nothere.test"]),
                   200)
        assert j["status"] == "ok" and j["enforcementMode"] == "dns+nft", j
        assert get_policy(eosc, sid)["policy"] == {
            "defaultAction": "deny",
            "egress": [{"action": "allow", "target": "www.github.com"}]}
    assert_nxdomain(eosc, sid, "pypi.org")
    assert_blocked(eosc, sid, PYPI)
    assert_reaches(eosc, sid, "www.github.com", GITHUB)


@pytest.mark.parametrize("target", ["a..b", "*", "*.", "1.2.3.4/33", "http://pypi.org", ""])
def test_a_target_that_is_no_name_wildcard_or_cidr_is_400(eosc, sandbox, target):
    sid = sandbox(policy("deny", ("allow", "pypi.org")))
    r = eosc.egress(sid, "PATCH", "/policy", body=[{"action": "allow", "target": target}])
    expect(r, 400, "INVALID_REQUEST")
    assert get_policy(eosc, sid)["policy"]["egress"] == [
        {"action": "allow", "target": "pypi.org"}]


# ---- the native surface ---------------------------------------------------------------------

def assert_no_network(sb):
    out = execlib.ok(sb, ["python3", "-c", PROBE, "ifaces"]).out.decode()
    assert list(json.loads(out.splitlines()[-1])["ifaces"]) == ["lo"], out
    out = execlib.ok(sb, ["python3", "-c", PROBE, "connect", PYPI, "80"]).out.decode()
    r = json.loads(out.splitlines()[-1])
    assert r["ok"] is False, r


def test_a_native_sandbox_from_the_warm_pool_has_no_network(own_daemon):
    """A pooled sandbox gets its link as it starts (denying everything): the native create that
    takes it takes the link away too."""
    d = own_daemon(extra={"SANDBOX_HOST_WARM_POOL": "1"})
    pooled = set(settled_workers(d, 1).values())
    sb = d.client.new_sandbox()
    try:
        assert sb.rid in pooled, (sb.rid, pooled)
        assert_no_network(sb)
    finally:
        sb.delete()


def test_native_sandboxes_have_no_network(netd, world):
    sb = netd.client.new_sandbox()
    try:
        assert_no_network(sb)
    finally:
        sb.delete()



# ---- what a daemon leaves in the pod --------------------------------------------------------

def test_a_second_daemon_on_another_range_serves_and_leaves_nothing_in_the_pod(world, netd):
    """Two daemons in one pod, each with its own range: the second's sandbox is on the
    network too; deleting the sandbox removes its link, stopping the daemon its table, its
    gateway on lo and its links: the pod is as before."""
    before = world.state()
    d = start_daemon(world, {"SANDBOX_HOST_EGRESS_CIDR": "100.126.0.0/16"})
    try:
        assert d.egress["range"] == "100.126.0.0/16" and d.egress["gateway"] == "100.126.0.1"
        during = world.state()
        assert "100.126.0.1/32" in during["lo"], during
        assert len(during["tables"]) == len(before["tables"]) + 1, (before, during)
        osc = oslib.os_client(d)
        sid = create(osc)
        with_link = world.state()
        assert len(with_link["links"]) == len(during["links"]) + 1, (during, with_link)
        assert probe(osc, sid, "ifaces")["ifaces"]["eth0"].startswith("100.126.0."), sid
        r = probe(osc, sid, "http", "pypi.org")
        assert r["ok"] and r["body"] == hello(PYPI), r
        expect(osc.delete("/v1/sandboxes/" + sid), 204)
        assert shlib.wait_until(lambda: world.state()["links"] == during["links"], 10), \
            world.state()
    finally:
        rc = d.close()
    assert rc == 0, d.stderr_text()[-3000:]
    assert world.state() == before


# ---- an answer's TTL ------------------------------------------------------------------------

def test_an_answers_address_closes_after_its_ttl_but_keeps_open_connections(eosc, sandbox):
    """short.test answers with a TTL of 1 s (clamped to the daemon's minimum, 5 s): new
    connections to its address by IP stop once that has run out (polled, bounded), while a
    connection opened before stays (the daemon's decision, include/egress/sh/net.h)."""
    sid = sandbox(policy("deny", ("allow", "short.test")))
    go = unique("go")
    bg = Background(eosc, sid, "echo", "short.test", 7000, go)
    try:
        assert bg.next() == {"stage": "open", "ok": True}
        closed = shlib.wait_until(lambda: not probe(eosc, sid, "connect", SHORT, 80)["ok"],
                                  timeout=60, interval=0.5)
        assert closed, "short.test's address stayed open past its TTL"
        bg.signal(go)
        assert bg.next() == {"stage": "after", "ok": True}
    finally:
        bg.stop()
    assert_reaches(eosc, sid, "short.test", SHORT)  # asked again: open again


# ---- the pod's capabilities and sysctls (contrib/k8s/deployment.yaml) ------------------------

def caps_prefix(caps):
    """setpriv as the container runtime starts the daemon: bounding, permitted and effective
    set = `caps`."""
    return ["setpriv", "--bounding-set=-all," + ",".join("+" + c.lower() for c in caps),
            "--inh-caps=-all", "--"]


def manifest_sysctls():
    """The pod's securityContext.sysctls of the manifest: {name: value} (a line parser)."""
    from test_persist_isolation import MANIFEST
    out, name = {}, None
    for ln in MANIFEST.read_text().splitlines():
        m = re.match(r"\s*- name: (net\.[a-z0-9_.]+)\s*$", ln)
        if m:
            name = m.group(1)
            continue
        m = re.match(r'\s*value: "([^"]*)"\s*$', ln)
        if m and name:
            out[name] = m.group(1)
        name = None
    return out


@pytest.fixture
def pod_sysctls(world):
    """Set {name: value} in the pod's namespace (namespaced sysctls, as the kubelet sets the
    pod's); the old values back after the test."""
    old = {}

    def path(name):
        return "/proc/sys/" + name.replace(".", "/")

    def set_(values):
        with world.entered():  # /proc/sys/net is the calling thread's namespace's
            for k, v in values.items():
                with open(path(k)) as f:
                    old.setdefault(k, f.read().strip())
                with open(path(k), "w") as f:
                    f.write(v)

    yield set_
    with world.entered():
        for k, v in old.items():
            with open(path(k), "w") as f:
                f.write(v)


@pytest.mark.parametrize("pool", ["0", "1"], ids=["started", "from_the_warm_pool"])
def test_with_the_manifests_capabilities_and_sysctls_a_sandbox_is_on_the_network(
        own_daemon, pod_sysctls, pool):
    """Its link made as its worker starts, or, from the warm pool, once it is handed out (its
    worker set up long before)."""
    from test_persist_isolation import manifest_caps
    caps, sysctls = manifest_caps(), manifest_sysctls()
    assert "NET_ADMIN" in caps and sysctls.get("net.ipv4.ip_forward") == "1", (caps, sysctls)
    pod_sysctls(sysctls)
    d = own_daemon(extra={"SANDBOX_HOST_WARM_POOL": pool}, prefix=caps_prefix(caps))
    pooled = set(settled_workers(d, int(pool)).values())
    osc = oslib.os_client(d)
    # the pool's sandboxes have the host's limits: a create that names none takes one
    body = {k: v for k, v in oslib.SDK_DEFAULT_CREATE.items() if k != "resourceLimits"}
    sid = osc.create_ok(dict(body, networkPolicy=policy("deny", ("allow", "pypi.org"))))["id"]
    assert (sid in pooled) == (pool != "0"), (sid, pooled)
    try:
        assert_reaches(osc, sid, "pypi.org", PYPI)
        assert_blocked(osc, sid, GITHUB)
    finally:
        osc.kill(sid)


def unsupported_and_a_sandbox(own_daemon, caps, why):
    """A daemon with `caps` whose /healthz says egress is unsupported, the reason naming `why`;
    an allowing policy refused 400 NOT_SUPPORTED; a sandbox without one made: (osc, its id)."""
    d = own_daemon(prefix=caps_prefix(caps), must_support=False)
    assert d.egress["supported"] is False and why in d.egress["reason"], d.egress
    osc = oslib.os_client(d)
    body = dict(oslib.SDK_DEFAULT_CREATE,
                networkPolicy=policy("deny", ("allow", "pypi.org")))
    expect(osc.create(body), 400, "NOT_SUPPORTED")
    return osc, create(osc)


def test_a_pod_without_net_admin_runs_sandboxes_without_network_and_says_so(own_daemon):
    """The manifest's capabilities less NET_ADMIN: /healthz says egress is unsupported and
    why; an allowing policy is 400 NOT_SUPPORTED; a sandbox is made all the same, with no
    network at all (the kernel lets only a holder of CAP_NET_ADMIN bring its lo up), and runs
    commands."""
    from test_persist_isolation import manifest_caps
    caps = [c for c in manifest_caps() if c != "NET_ADMIN"]
    osc, sid = unsupported_and_a_sandbox(own_daemon, caps, "CAP_NET_ADMIN")
    try:
        ifaces = probe(osc, sid, "ifaces")["ifaces"]
        assert list(ifaces) == ["lo"] and ifaces["lo"] is None, ifaces
        r = probe(osc, sid, "connect", PYPI, 80)
        assert r["ok"] is False, r
    finally:
        osc.kill(sid)


def test_a_pod_that_cannot_serve_dns_runs_sandboxes_without_network_and_says_so(own_daemon):
    """The manifest's capabilities without its sysctls (no port 53 for the proxy): /healthz
    says egress is unsupported and why; an allowing policy is 400 NOT_SUPPORTED; no policy is
    loopback only, and the egress API says enforcementMode none, mode deny_all."""
    from test_persist_isolation import manifest_caps
    osc, sid = unsupported_and_a_sandbox(own_daemon, manifest_caps(), "53")
    try:
        assert list(probe(osc, sid, "ifaces")["ifaces"]) == ["lo"]
        j = get_policy(osc, sid)
        assert j["enforcementMode"] == "none" and j["mode"] == "deny_all", j
        r = probe(osc, sid, "connect", PYPI, 80)
        assert r["ok"] is False, r
    finally:
        osc.kill(sid)
