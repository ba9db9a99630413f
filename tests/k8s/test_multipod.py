"""Many pods on one machine (issue 6, point 4): three daemons, each with its own state root,
port and pod_url, behind a real HAProxy on 127.0.0.1 standing in for the ClusterIP Service
(CONTRACT.md section 1: creates are balanced, every later call goes to pod_url; section 7:
/readyz and /drain).

Needs root (the daemons create namespaces and cgroups) and Debian's haproxy package.
"""
import pytest

from k8s_helpers import HAProxy, Pod, haproxy_bin, is_root, request, stop_pods, wait_until

pytestmark = [
    pytest.mark.skipif(not is_root(), reason="the daemons create namespaces: needs root"),
    pytest.mark.skipif(haproxy_bin() is None,
                       reason="haproxy not installed (Debian package haproxy; scripts/setup.sh)"),
]

# Distinct sandbox uid ranges, away from the contract suite's, so the three "pods" never
# share a uid on this one machine.
UID_BASES = (381000, 382000, 383000)
CHECK_INTER_MS = 200
N_CREATES = 9


@pytest.fixture
def cluster():
    pods, lb = [], None
    try:
        for i, base in enumerate(UID_BASES):
            pods.append(Pod("pod%d" % i, base))
        lb = HAProxy(pods, inter_ms=CHECK_INTER_MS)
        yield lb, pods
    finally:
        # Every process is stopped and every directory removed even if one step fails.
        problems = []
        if lb is not None:
            try:
                lb.stop()
            finally:
                lb.cleanup()
        stop_pods(pods, problems)
        assert not problems, problems


def create_via_service(lb):
    r = request(lb.url, "POST", "/sandboxes", body={})
    assert r.status == 200, r
    j = r.json()
    assert set(j) >= {"pod_url", "remote_id"}, j
    return j["pod_url"], j["remote_id"]


def put_file(url, rid, path, data):
    return request(url, "PUT", "/sandboxes/%s/file?path=%s" % (rid, path), body=data)


def get_file(url, rid, path):
    return request(url, "GET", "/sandboxes/%s/file?path=%s" % (rid, path))


def assert_not_found(r):
    assert r.status == 404, r
    assert r.json()["error"] == "SandboxNotFound", r


def creates_land_on(lb, n):
    """n creates through the balancer: {pod_url: [remote_id, ...]}."""
    out = {}
    for _ in range(n):
        url, rid = create_via_service(lb)
        out.setdefault(url, []).append(rid)
    return out


def test_creates_spread_over_every_pod_and_later_calls_reach_the_owner(cluster):
    lb, pods = cluster
    urls = {p.url for p in pods}
    assert len(urls) == 3
    placed = creates_land_on(lb, N_CREATES)
    # Round robin over three ready pods: every pod gets creates, and pod_url is always the
    # URL of the pod that made the sandbox (never the Service's).
    assert set(placed) == urls, placed
    for url, rids in placed.items():
        for rid in rids:
            data = ("%s owns %s\n" % (url, rid)).encode()
            r = put_file(url, rid, "notes/owner.txt", data)
            assert r.status == 204, r
            r = get_file(url, rid, "notes/owner.txt")
            assert r.status == 200 and r.body == data, r
            # Any other pod has never heard of it: SandboxNotFound, for reads and writes.
            for other in urls - {url}:
                assert_not_found(get_file(other, rid, "notes/owner.txt"))
                assert_not_found(put_file(other, rid, "x", b"y"))
                assert_not_found(request(other, "GET", "/sandboxes/%s/walk" % rid))


def test_killed_pod_refuses_connections_and_gets_no_more_creates(cluster):
    lb, pods = cluster
    placed = creates_land_on(lb, N_CREATES)
    victim, survivors = pods[1], [pods[0], pods[2]]
    assert victim.url in placed
    for p in pods:
        for rid in placed[p.url]:
            assert put_file(p.url, rid, "a.txt", p.name.encode()).status == 204

    victim.kill()
    assert victim.proc.returncode == -9
    # The client sees what the contract calls a dead pod: connection refused.
    with pytest.raises(ConnectionRefusedError):
        request(victim.url, "GET", "/sandboxes/%s/file?path=a.txt" % placed[victim.url][0])
    with pytest.raises(ConnectionRefusedError):
        request(victim.url, "GET", "/healthz")

    # The other two keep working, sandboxes and all.
    for p in survivors:
        for rid in placed[p.url]:
            r = get_file(p.url, rid, "a.txt")
            assert r.status == 200 and r.body == p.name.encode(), r
        assert request(p.url, "GET", "/readyz").status == 200

    # Once the balancer's check has seen it gone, creates go to the survivors only.
    lb.wait_state(victim.name, "DOWN")
    after = creates_land_on(lb, N_CREATES)
    assert set(after) == {p.url for p in survivors}, after
    for url, rids in after.items():
        for rid in rids:
            assert put_file(url, rid, "b.txt", b"ok").status == 204


def test_draining_pod_gets_no_more_creates_once_not_ready(cluster):
    lb, pods = cluster
    placed = creates_land_on(lb, N_CREATES)
    draining, others = pods[2], [pods[0], pods[1]]
    mine = placed[draining.url]
    for rid in mine:
        assert put_file(draining.url, rid, "keep.txt", rid.encode()).status == 204

    # What the preStop hook does: POST /drain to the pod itself.
    r = request(draining.url, "POST", "/drain")
    assert r.status == 200, r
    j = r.json()
    assert j["sandboxes"] == len(mine), j
    assert j["persisted"] == 0, j  # no item_id, no archive: nothing to checkpoint

    # Not ready from now on; still alive (liveness must not restart a draining pod).
    assert request(draining.url, "GET", "/readyz").status == 503
    assert request(draining.url, "GET", "/healthz").status == 200
    assert request(draining.url, "POST", "/sandboxes", body={}).status == 503

    # The balancer's readiness check takes it out; creates go to the other two only.
    lb.wait_state(draining.name, "DOWN", timeout=10 * CHECK_INTER_MS / 1000 + 5)
    after = creates_land_on(lb, N_CREATES)
    assert set(after) == {p.url for p in others}, after

    # Its existing sandboxes stay reachable at their pod_url while it drains.
    for rid in mine:
        r = get_file(draining.url, rid, "keep.txt")
        assert r.status == 200 and r.body == rid.encode(), r
        assert put_file(draining.url, rid, "more.txt", b"still here").status == 204

    # And the pod stops cleanly when the kubelet's SIGTERM follows the preStop hook.
    assert draining.stop() == 0, draining.stderr_text()[-2000:]
    wait_until(lambda: lb.states().get(draining.name) == "DOWN", 5, what="still DOWN")
