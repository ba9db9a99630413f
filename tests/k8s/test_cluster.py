"""Issue 23: many pods as one service (OPENSANDBOX.md section 1, last bullet). Three daemons
that discover each other (SANDBOX_HOST_PEERS=static:...), one shared snapshot root, behind a
real HAProxy that balances EVERY request round robin: any /v1 call for any sandbox, sent to
any pod, is answered by the pod that holds it (relayed to it, streams included); listings
merge every pod's; creates stay where they land unless that pod is full or draining; a dead
or silent owner is a bounded 404, never a hang.

The first tests prove the harness itself (HAProxy balances per request, the cluster starts and
stops cleanly, the fake peer behaves); the rest need the cluster code of issue 23.

Needs root (the daemons create namespaces and cgroups) and Debian's haproxy package.
"""
import contextlib
import datetime
import http.client
import json
import os
import threading
import time

import pytest

from cluster_lib import (HOP_HEADER, ID_RE, INTERVAL_MS, PEER_TIMEOUT_MS, SDK_DEFAULT_CREATE,
                         SLACK, TOKEN_LEN, V1, Cluster, FakePeer, Listener, Sse, expect, fake_id,
                         ids_of, mfilter, served_by)
from k8s_helpers import haproxy_bin, header, is_root, request, wait_until

import shlib  # noqa: E402,I100  (tests/contract's, on the path cluster_lib set: a daemon's RSS)

pytestmark = [
    pytest.mark.skipif(not is_root(), reason="the daemons create namespaces: needs root"),
    pytest.mark.skipif(haproxy_bin() is None,
                       reason="haproxy not installed (Debian package haproxy; scripts/setup.sh)"),
]

# A relayed call that cannot reach its owner answers within the peer timeout; "within" is a
# deadline with slack for a loaded machine, never a measured duration.
PEER_BOUND = PEER_TIMEOUT_MS / 1000 + SLACK
PERIOD_BOUND = 2 * INTERVAL_MS / 1000 + PEER_TIMEOUT_MS / 1000 + SLACK


@contextlib.contextmanager
def sandbox_on(pod, **fields):
    """A /v1 sandbox created on `pod` (its id), deleted at the end through its owner."""
    sid = V1(pod.url).create_ok(**fields)[0]["id"]
    try:
        yield sid
    finally:
        V1(pod.url).kill_quietly(sid)


def close_cluster(c):
    problems = c.close()
    assert not problems, problems


@pytest.fixture(scope="module")
def svc():
    """One cluster for the tests that leave every pod alive and accepting."""
    c = Cluster()
    try:
        yield c
    finally:
        close_cluster(c)


@pytest.fixture
def fresh():
    """A cluster of its own, for a test that kills, fills or drains pods; made by the test
    (make(**Cluster kwargs)) so it can choose settings."""
    made = []

    def make(**kw):
        c = Cluster(**kw)
        made.append(c)
        return c

    yield make
    problems = []
    for c in made:
        problems += c.close()
    assert not problems, problems


@pytest.fixture
def fake():
    f = FakePeer()
    yield f
    f.close()


# ---- the harness itself (needs no cluster code) -------------------------------------------


def test_haproxy_balances_every_request_of_one_keepalive_connection_round_robin():
    c = Cluster(wait_peers=False)
    try:
        before = c.lb.counters("stot")
        m = c.lb.url.rsplit(":", 1)
        conn = http.client.HTTPConnection("127.0.0.1", int(m[1]), timeout=10)
        order = []
        sock = None
        try:
            for _ in range(9):
                conn.request("GET", "/healthz")
                r = conn.getresponse()
                r.read()
                assert r.status == 200
                assert (r.getheader("Connection") or "").lower() != "close", r.getheaders()
                # the client's connection is kept: the same socket for all nine requests
                if sock is None:
                    sock = conn.sock
                assert conn.sock is sock, "the client connection was reopened"
                order.append(r.getheader("X-Sh-Served-By"))
        finally:
            conn.close()
        names = [p.name for p in c.pods]
        assert sorted(order[:3]) == sorted(names), order
        # strict rotation: every request goes to the next pod
        assert order == order[:3] * 3, order
        after = c.lb.counters("stot")
        assert {n: after[n] - before.get(n, 0) for n in names} == {n: 3 for n in names}, \
            (before, after)
    finally:
        close_cluster(c)


def test_cluster_starts_and_stops_cleanly_and_removes_everything():
    c = Cluster(wait_peers=False)
    pods, d, lbdir = list(c.pods), c.dir, c.lb.dir
    for p in pods:
        assert request(p.url, "GET", "/readyz").status == 200
        assert p.env["SANDBOX_HOST_SNAPSHOT_ROOT"] == str(c.snapshots)
        assert p.env["SANDBOX_HOST_PEERS"] == "static:" + ",".join(q.url for q in pods)
    assert set(c.lb.states().values()) == {"UP"}
    lbproc = c.lb.proc
    close_cluster(c)
    assert lbproc.poll() is not None
    for p in pods:
        assert not p.alive()
        assert p.proc.returncode == 0
    assert not d.exists() and not lbdir.exists()


def test_fake_peer_answers_healthz_and_holds_everything_else(fake):
    r = request(fake.url, "GET", "/healthz")
    assert r.status == 200
    assert r.json()["cluster"]["token"] == fake.token
    with pytest.raises(OSError):  # socket.timeout: held, never answered
        request(fake.url, "GET", "/v1/sandboxes/" + fake_id(fake.token), timeout=0.5)
    wait_until(lambda: fake.held_for("/v1/sandboxes/"), 2, what="the held request recorded")


def test_listener_records_connections():
    ln = Listener()
    try:
        socket_conn = http.client.HTTPConnection("127.0.0.1", ln.port, timeout=2)
        try:
            socket_conn.request("GET", "/")
            socket_conn.getresponse()
        except (OSError, http.client.HTTPException):
            pass
        finally:
            socket_conn.close()
        wait_until(lambda: ln.accepted == 1, 2, what="the connection recorded")
    finally:
        ln.close()


# ---- one service: every call, any pod (needs issue 23's cluster) --------------------------


def test_every_pod_names_its_token_and_sees_its_two_peers(svc):
    tokens = [svc.token(p) for p in svc.pods]
    assert len(set(tokens)) == 3, tokens
    for t in tokens:
        assert len(t) == TOKEN_LEN and all(ch in "0123456789abcdef" for ch in t), t
    for p in svc.pods:
        c = svc.cluster_of(p)
        assert c["peers"] == 2, c
        assert c["accepting"] is True and c["room"] > 0, c
        assert isinstance(c["instance"], str) and c["instance"], c


def test_an_id_is_40_hex_and_begins_with_the_token_of_the_pod_that_made_it(svc):
    v = V1(svc.url)
    made = []
    try:
        for _ in range(3):
            j, r = v.create_ok()
            made.append(j["id"])
            pod = svc.pod(served_by(r))
            assert j["id"][:TOKEN_LEN] == svc.token(pod), (j["id"], pod.name)
    finally:
        for sid in made:
            v.kill_quietly(sid)
    assert len({m[:TOKEN_LEN] for m in made}) == 3, "round robin creates land on every pod"


def test_lifecycle_calls_land_on_every_pod_and_reach_the_owner(svc):
    v = V1(svc.url)
    j, _ = v.create_ok(metadata={"a": "1"})
    sid = j["id"]
    try:
        landed = set()
        for _ in range(3):
            r = v.get(sid)
            expect(r, 200)
            assert r.json()["id"] == sid
            landed.add(served_by(r))
        assert landed == {p.name for p in svc.pods}, landed
        r = v.call("PATCH", "/v1/sandboxes/%s/metadata" % sid, body={"b": "2", "a": None})
        assert r.status == 200, r
        landed = {served_by(r)}
        for _ in range(2):
            r = v.get(sid)
            landed.add(served_by(r))
            assert expect(r, 200)["metadata"] == {"b": "2"}, r
        want = int(time.time()) + 3600
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(want))
        r = v.call("POST", "/v1/sandboxes/%s/renew-expiration" % sid, body={"expiresAt": when})
        assert r.status == 200, r
        landed.add(served_by(r))
        got = datetime.datetime.fromisoformat(expect(v.get(sid), 200)["expiresAt"]
                                              .replace("Z", "+00:00")).timestamp()
        assert abs(got - want) < 2, "renewed through another pod"
        r = v.call("POST", "/v1/sandboxes/%s/pause" % sid)
        expect(r, 202)
        landed.add(served_by(r))
        v.wait_state(sid, "Paused")
        r = v.call("POST", "/v1/sandboxes/%s/resume" % sid)
        expect(r, 202)
        landed.add(served_by(r))
        v.wait_state(sid, "Running")
        assert landed == {p.name for p in svc.pods}, landed
        # X-Request-ID is kept through a relay
        for p in svc.not_owner(sid):
            r = V1(p.url).get(sid, headers={"X-Request-ID": "cluster-rid-" + p.name})
            assert header(r, "X-Request-ID") == "cluster-rid-" + p.name, r.headers
    finally:
        r = v.delete(sid)
    assert r.status == 204, r
    for _ in range(3):
        expect(v.get(sid), 404, "SANDBOX_NOT_FOUND")


def test_an_sse_command_streams_through_a_relay(svc):
    owner = svc.pods[0]
    with sandbox_on(owner) as sid:
        relay = svc.not_owner(sid)[0]
        st = Sse(relay.url, sid, {"command": "for i in $(seq 1 50); do echo line$i; done; "
                                             "echo oops >&2; exit 3"})
        assert st.status == 200, st.status
        ct = dict((k.lower(), v) for k, v in st.headers).get("content-type", "")
        assert ct.startswith("text/event-stream"), st.headers
        st.read_all()
        assert not st.cut
        assert st.types()[0] == "init"
        assert st.lines() == ["line%d" % i for i in range(1, 51)], st.lines()[:5]
        assert st.lines("stderr") == ["oops"]
        assert st.types()[-1] == "error", st.types()  # exit 3: the execd's error event


def test_a_background_command_and_its_logs_through_relays(svc):
    owner = svc.pods[1]
    with sandbox_on(owner) as sid:
        a, b = svc.not_owner(sid)
        st = Sse(a.url, sid, {"command": "echo one; echo two", "background": True}).read_all()
        assert st.types() == ["init", "execution_complete"], st.events
        cid = st.events[0]["text"]

        def done():
            r = V1(b.url).execd(sid, "GET", "/command/status/" + cid)
            return expect(r, 200) if not r.json()["running"] else None
        s = wait_until(done, 20, interval=0.1, what="the background command to end")
        assert s["exit_code"] == 0, s
        r = V1(a.url).execd(sid, "GET", "/command/%s/logs" % cid)
        assert r.status == 200 and r.body == b"one\ntwo\n", r
        assert header(r, "EXECD-COMMANDS-TAIL-CURSOR") == "8", r.headers


def test_the_metrics_watch_streams_through_a_relay_and_ends_with_its_sandbox(svc):
    owner = svc.pods[0]
    sid = V1(owner.url).create_ok()[0]["id"]
    relay = svc.not_owner(sid)[1]
    conn = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=PEER_BOUND)
    try:
        conn.request("GET", "/v1/sandboxes/%s/proxy/44772/metrics/watch" % sid)
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("Content-Type").startswith("text/event-stream")
        for _ in range(2):  # one JSON object and "\n" a second, as it comes
            line = resp.readline()
            assert line.endswith(b"\n") and "cpu_count" in json.loads(line), line
        # deleted through the third pod: the owner ends the watch, and so does the relay
        assert V1(svc.not_owner(sid)[0].url).delete(sid).status == 204
        while True:  # every read bounded by the socket timeout: a hang raises
            line = resp.readline()
            if not line:
                break
            json.loads(line)
    finally:
        conn.close()
        V1(owner.url).kill_quietly(sid)


def multipart(path, data, boundary="sh-cluster-boundary"):
    meta = ('{"path": "%s"}' % path).encode()
    bd = boundary.encode()
    return (b"--" + bd + b"\r\n"
            b'Content-Disposition: form-data; name="metadata"; filename="metadata"\r\n'
            b"Content-Type: application/json\r\n\r\n" + meta + b"\r\n"
            b"--" + bd + b"\r\n"
            b'Content-Disposition: form-data; name="file"; filename="blob"\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n"
            b"--" + bd + b"--\r\n")


def test_a_multipart_upload_and_range_downloads_stream_through_relays(svc):
    owner = svc.pods[2]
    with sandbox_on(owner) as sid:
        a, b = svc.not_owner(sid)
        data = os.urandom(6 * 1024 * 1024 + 13)
        r = V1(a.url).execd(sid, "POST", "/files/upload", body=multipart("/tmp/big.bin", data),
                            headers={"Content-Type":
                                     "multipart/form-data; boundary=sh-cluster-boundary"},
                            timeout=60)
        assert r.status == 200, r
        r = V1(b.url).execd(sid, "GET", "/files/download?path=/tmp/big.bin", timeout=60)
        assert r.status == 200 and r.body == data, (r.status, len(r.body))
        assert header(r, "Content-Length") == str(len(data)), r.headers
        r = V1(b.url).execd(sid, "GET", "/files/download?path=/tmp/big.bin",
                            headers={"Range": "bytes=1000000-1999999"}, timeout=60)
        assert r.status == 206, r
        assert r.body == data[1000000:2000000]
        assert header(r, "Content-Range") == "bytes 1000000-1999999/%d" % len(data), r.headers
        # and the same through the Service, whichever pod it reaches
        for _ in range(3):
            r = V1(svc.url).execd(sid, "GET", "/files/download?path=/tmp/big.bin",
                                  headers={"Range": "bytes=-100"})
            assert r.status == 206 and r.body == data[-100:], r


BIG = 64 << 20
RELAY_GROWTH_MAX_KIB = 24 << 10


def upload_streamed(url, sid, path, size, boundary="sh-cluster-boundary"):
    """A multipart upload of `size` random bytes sent as it is made (never held whole)."""
    head = multipart(path, b"", boundary)
    head, tail = head[:-len(b"\r\n--%s--\r\n" % boundary.encode())], \
        b"\r\n--%s--\r\n" % boundary.encode()

    def body():
        yield head
        left = size
        while left:
            n = min(left, 1 << 20)
            yield os.urandom(n)
            left -= n
        yield tail
    m = url.rsplit(":", 1)
    c = http.client.HTTPConnection("127.0.0.1", int(m[1]), timeout=60)
    try:
        c.request("POST", "/v1/sandboxes/%s/proxy/44772/files/upload" % sid, body=body(),
                  headers={"Content-Type": "multipart/form-data; boundary=" + boundary,
                           "Content-Length": str(len(head) + size + len(tail))})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def download_slowly(url, sid, path):
    """Read a download 1 MiB at a time with a pause between (the relay must hold back the
    owner, not buffer the body); returns the bytes read."""
    m = url.rsplit(":", 1)
    c = http.client.HTTPConnection("127.0.0.1", int(m[1]), timeout=60)
    try:
        c.request("GET", "/v1/sandboxes/%s/proxy/44772/files/download?path=%s" % (sid, path))
        r = c.getresponse()
        assert r.status == 200, (r.status, r.read(300))
        got = 0
        while True:
            b = r.read1(1 << 20)
            if not b:
                return got
            got += len(b)
            time.sleep(0.03)
    finally:
        c.close()


@pytest.mark.skipif(shlib.sanitized(), reason="ASan's quarantine: RSS says nothing of our bounds")
def test_a_relay_holds_a_bounded_buffer_whatever_the_bodys_size(svc):
    owner, relay = svc.pods[0], svc.pods[1]
    with sandbox_on(owner) as sid:
        (st, body), kib = shlib.peak_rss_growth_kib(
            relay.proc.pid, lambda: upload_streamed(relay.url, sid, "/tmp/huge.bin", BIG))
        assert st == 200, body[:300]
        assert kib < RELAY_GROWTH_MAX_KIB, "the relay grew %d KiB for a %d MiB upload" % (
            kib, BIG >> 20)
        got, kib = shlib.peak_rss_growth_kib(
            relay.proc.pid, lambda: download_slowly(relay.url, sid, "/tmp/huge.bin"))
        assert got == BIG
        assert kib < RELAY_GROWTH_MAX_KIB, "the relay grew %d KiB for a %d MiB download" % (
            kib, BIG >> 20)


def test_listing_merges_every_pod_oldest_first_then_filters_and_paginates(svc):
    tag = "run%d" % time.monotonic_ns()
    made = []
    try:
        # two sandboxes on each pod, created in a known order across pods
        for i in range(6):
            p = svc.pods[i % 3]
            env = "dev" if i % 2 == 0 else "qa"
            made.append(V1(p.url).create_ok(metadata={"run": tag, "env": env})[0]["id"])
            time.sleep(0.01)
        assert {m[:TOKEN_LEN] for m in made} == {svc.token(p) for p in svc.pods}
        mf = "metadata=" + mfilter({"run": tag})
        for base in [p.url for p in svc.pods] + [svc.url]:
            v = V1(base)
            page = v.listing(mf + "&pageSize=50")
            assert ids_of(page) == made, (base, ids_of(page), made)
            assert page["pagination"]["totalItems"] == 6
            assert ids_of(v.listing("metadata=" + mfilter({"run": tag, "env": "dev"}))) == \
                made[0::2]
            p1 = v.listing(mf + "&pageSize=4")
            assert ids_of(p1) == made[:4]
            assert p1["pagination"] == {"page": 1, "pageSize": 4, "totalItems": 6,
                                        "totalPages": 2, "hasNextPage": True}, p1["pagination"]
            p2 = v.listing(mf + "&pageSize=4&page=2")
            assert ids_of(p2) == made[4:]
            assert p2["pagination"]["hasNextPage"] is False
        expect(V1(svc.pods[1].url).call("POST", "/v1/sandboxes/%s/pause" % made[3]), 202)
        V1(svc.url).wait_state(made[3], "Paused")
        assert ids_of(V1(svc.pods[2].url).listing(mf + "&state=Paused")) == [made[3]]
        assert ids_of(V1(svc.pods[0].url).listing(mf + "&state=Running")) == \
            made[:3] + made[4:]
    finally:
        for sid in made:
            V1(svc.url).kill_quietly(sid)


def test_snapshots_made_on_one_pod_are_listed_read_and_deleted_via_the_others(svc):
    owner = svc.pods[0]
    with sandbox_on(owner) as sid:
        a, b = svc.not_owner(sid)
        r = V1(a.url).execd(sid, "POST", "/files/upload", body=multipart("/workspace/keep.txt",
                                                                         b"kept"),
                            headers={"Content-Type":
                                     "multipart/form-data; boundary=sh-cluster-boundary"})
        assert r.status == 200, r
        r = V1(a.url).call("POST", "/v1/sandboxes/%s/snapshots" % sid, body={"name": "cl"})
        sn = expect(r, 202)
        snid = sn["id"]
        assert snid.startswith("snap-") and ID_RE.fullmatch(snid[5:]), snid
        assert snid[5:5 + TOKEN_LEN] == svc.token(owner), "a snapshot id names its pod"

        def ready():
            j = expect(V1(b.url).call("GET", "/v1/snapshots/" + snid), 200)
            return j if j["status"]["state"] == "Ready" else None
        wait_until(ready, 60, interval=0.2, what="the snapshot Ready")
        for p in svc.pods:
            got = expect(V1(p.url).call("GET", "/v1/snapshots?sandboxId=%s" % sid), 200)
            assert [x["id"] for x in got["items"]] == [snid], (p.name, got)
        # a create from it through another pod: made by the pod that made the snapshot (its
        # store holds the record), and a file of the workspace comes back
        expect(V1(owner.url).call("GET", "/v1/snapshots/" + snid), 200)
        body = {k: v for k, v in SDK_DEFAULT_CREATE.items() if k not in ("image", "entrypoint")}
        body["snapshotId"] = snid
        rj = expect(V1(b.url).call("POST", "/v1/sandboxes", body=body, timeout=60), 202)
        try:
            assert rj["id"][:TOKEN_LEN] == svc.token(owner), "made by the snapshot's pod"
            r = V1(a.url).execd(rj["id"], "GET", "/files/download?path=/workspace/keep.txt")
            assert r.status == 200 and r.body == b"kept", r
        finally:
            V1(svc.url).kill_quietly(rj["id"])
        r = V1(b.url).call("DELETE", "/v1/snapshots/" + snid)
        assert r.status == 204, r
        for p in svc.pods:
            expect(V1(p.url).call("GET", "/v1/snapshots/" + snid), 404, "SNAPSHOT_NOT_FOUND")


def test_the_endpoint_lookup_names_the_owners_pod_url(svc):
    owner = svc.pods[1]
    with sandbox_on(owner) as sid:
        own = owner.url[len("http://"):]
        for base in [p.url for p in svc.pods] + [svc.url]:
            for port in (44772, 18080):
                # use_server_proxy changes nothing (OPENSANDBOX.md section 2)
                for query in ("", "?use_server_proxy=true"):
                    j = expect(V1(base).call("GET", "/v1/sandboxes/%s/endpoints/%d%s" % (
                        sid, port, query)), 200)
                    assert j["endpoint"] == "%s/v1/sandboxes/%s/proxy/%d" % (own, sid, port), \
                        (base, query, j)
        # and the execd it names answers directly, no relay
        expect(V1(owner.url).execd(sid, "GET", "/ping"), 200)


def test_a_hop_marked_request_for_an_id_not_here_is_not_relayed(svc):
    # a real peer's id, hop-marked, sent to a pod that does not hold it
    owner = svc.pods[0]
    with sandbox_on(owner) as sid:
        other = svc.pods[1]
        r = V1(other.url).get(sid, headers={HOP_HEADER: svc.token(owner)})
        expect(r, 404, "SANDBOX_NOT_FOUND")
        # unmarked, the same call is relayed and answered
        expect(V1(other.url).get(sid), 200)


def test_an_id_whose_token_names_no_peer_is_not_found_at_once(svc):
    tokens = {svc.token(p) for p in svc.pods}
    tok = "0badf00d"
    assert tok not in tokens
    for p in svc.pods:
        t0 = time.monotonic()
        expect(V1(p.url).get(fake_id(tok)), 404, "SANDBOX_NOT_FOUND")
        expect(V1(p.url).execd(fake_id(tok), "GET", "/ping"), 404)
        assert time.monotonic() - t0 < PEER_BOUND


def test_forged_ids_never_make_a_pod_connect_elsewhere(svc):
    ln = Listener()
    try:
        tok = svc.token(svc.pods[1])
        hp = "127.0.0.1:%d" % ln.port
        forged = [
            hp, "http%3A%2F%2F" + hp, tok + "@" + hp, tok + hp,
            tok + "zz" + "0" * 30, tok + "0" * 33, tok.upper() + "0" * 32,
            tok + "0" * 31, "%2F%2F" + hp, tok + "%00" + "0" * 29,
        ]
        for p in svc.pods:
            for f in forged:
                r = V1(p.url).call("GET", "/v1/sandboxes/" + f)
                assert r.status == 404, (f, r)
                r = V1(p.url).call("GET", "/v1/sandboxes/%s/proxy/44772/ping" % f)
                assert r.status == 404, (f, r)
        time.sleep(INTERVAL_MS / 1000)
        assert ln.accepted == 0, "a pod connected to an address a client named"
    finally:
        ln.close()


# ---- keys, faults and changes (a cluster of their own) --------------------------------


def test_the_api_key_and_the_sandbox_token_go_through_a_relay_and_mean_what_they_say(fresh):
    key = "cluster-key-" + "k" * 24
    c = fresh(env={"SANDBOX_HOST_API_KEY": key})
    owner = c.pods[0]
    sid = V1(owner.url, api_key=key).create_ok()[0]["id"]
    a, b = c.not_owner(sid)
    expect(V1(a.url).get(sid), 401, "MISSING_API_KEY")
    expect(V1(a.url, api_key=key + "x").get(sid), 401, "INVALID_API_KEY")
    expect(V1(a.url, api_key=key).get(sid), 200)
    # the sandbox's token, handed out by a look-up at one non-owner, opens its execd at another
    e = expect(V1(a.url, api_key=key).call("GET", "/v1/sandboxes/%s/endpoints/44772" % sid), 200)
    tok = {k.lower(): v for k, v in (e.get("headers") or {}).items()}["x-execd-access-token"]
    assert V1(b.url).execd(sid, "GET", "/ping").status == 401
    bad = tok[:-1] + ("A" if tok[-1] != "A" else "B")
    assert V1(b.url).execd(sid, "GET", "/ping", headers={"X-EXECD-ACCESS-TOKEN": bad}).status \
        == 401
    expect(V1(b.url).execd(sid, "GET", "/ping", headers={"X-EXECD-ACCESS-TOKEN": tok}), 200)
    # the hop mark grants nothing: still the key
    expect(V1(b.url).get(sid, headers={HOP_HEADER: c.token(a)}), 401, "MISSING_API_KEY")


def test_the_owner_killed_mid_stream_ends_the_relayed_stream_never_hangs(fresh):
    c = fresh()
    owner = c.pods[2]
    sid = V1(owner.url).create_ok()[0]["id"]
    relay = c.not_owner(sid)[0]
    st = Sse(relay.url, sid, {"command": "i=0; while :; do i=$((i+1)); echo $i; sleep 0.05; "
                                         "done"}, read_timeout=PEER_BOUND)
    assert st.status == 200
    for _ in range(5):
        assert st.next_event() is not None
    owner.kill()
    # every read is bounded by the socket timeout: a hang raises socket.timeout here
    while st.next_event() is not None:
        pass
    assert st.types()[-1] not in ("execution_complete", "error"), "the stream was cut"
    st.close()
    # the dead owner's sandbox: a bounded 404 from every live pod
    for p in c.live():
        expect(V1(p.url).get(sid, timeout=PEER_BOUND + 5), 404, "SANDBOX_NOT_FOUND")


def test_a_dead_pods_sandboxes_leave_the_listing_within_a_discovery_period(fresh):
    c = fresh()
    tag = "dead%d" % time.monotonic_ns()
    ids = [V1(p.url).create_ok(metadata={"run": tag})[0]["id"] for p in c.pods]
    mf = "metadata=" + mfilter({"run": tag})
    assert ids_of(V1(c.url).listing(mf)) == ids
    c.pods[1].kill()
    left = ids[:1] + ids[2:]

    def gone():
        return ids_of(V1(c.pods[0].url).listing(mf, timeout=PEER_BOUND + 5)) == left
    wait_until(gone, PERIOD_BOUND, interval=0.1, what="the dead pod's sandbox to leave")
    for p in c.live():
        assert ids_of(V1(p.url).listing(mf, timeout=PEER_BOUND + 5)) == left
        wait_until(lambda: c.cluster_of(p)["peers"] == 1, PERIOD_BOUND, interval=0.1,
                   what="the dead pod dropped at its next probe")


def test_a_peer_that_never_answers_costs_a_bounded_404_and_is_left_out_of_listings(fresh,
                                                                                    fake):
    c = fresh(extra_peers=[fake.url])
    sid = fake_id(fake.token)
    for p in c.pods:
        t0 = time.monotonic()
        expect(V1(p.url).get(sid, timeout=PEER_BOUND + 5), 404, "SANDBOX_NOT_FOUND")
        assert time.monotonic() - t0 < PEER_BOUND
    assert len(fake.held_for("/v1/sandboxes/" + sid)) == 3
    for _, _, h in fake.held_for("/v1/sandboxes/" + sid):
        assert h.get(HOP_HEADER.lower()) in {c.token(p) for p in c.pods}, h
    # a listing still answers, without the silent peer
    mine = V1(c.pods[0].url).create_ok()[0]["id"]
    page = V1(c.pods[1].url).listing(timeout=PEER_BOUND + 5)
    assert mine in ids_of(page)
    # ... and the one left out is logged, its address named
    wait_until(lambda: "127.0.0.1:%d" % fake.port in c.pods[1].stderr_text(), 5,
               what="the silent peer logged")
    # hop-marked, the same id is not relayed: 404 at once, nothing reaches the fake
    n = len(fake.held)
    expect(V1(c.pods[0].url).get(sid, headers={HOP_HEADER: c.token(c.pods[1])}), 404,
           "SANDBOX_NOT_FOUND")
    # a token that is the fake's plus junk is no id: never relayed
    for f in (fake.token + "zz" + "0" * 30, fake.token + "0" * 33, fake.token):
        assert V1(c.pods[0].url).get(f).status == 404
    time.sleep(0.3)
    assert len(fake.held) == n, fake.held[n:]


def test_relays_in_flight_are_bounded_then_503_with_retry_after(fresh, fake):
    c = fresh(extra_peers=[fake.url],
              env={"SANDBOX_HOST_PEER_RELAY_MAX": "2", "SANDBOX_HOST_PEER_TIMEOUT_MS": "8000"})
    pod = c.pods[0]
    sid = fake_id(fake.token)
    results = []

    def hold():
        try:
            results.append(V1(pod.url).get(sid, timeout=20).status)
        except OSError as e:
            results.append(e)
    ts = [threading.Thread(target=hold) for _ in range(2)]
    for t in ts:
        t.start()
    try:
        wait_until(lambda: len(fake.held_for("/v1/sandboxes/" + sid)) == 2, 6,
                   what="two relays held by the silent peer")
        r = V1(pod.url).get(fake_id(fake.token))
        expect(r, 503, "UNAVAILABLE")
        assert (header(r, "Retry-After") or "").isdigit(), r.headers
    finally:
        for t in ts:
            t.join(30)
    assert results == [404, 404], results
    # once they ended, relays are taken again
    owner = c.pods[1]
    mine = V1(owner.url).create_ok()[0]["id"]
    expect(V1(pod.url).get(mine), 200)


def test_a_full_pod_hands_a_create_to_a_peer_and_all_full_is_503(fresh):
    c = fresh(env={"SANDBOX_HOST_MAX_SANDBOXES": "1"})
    first = c.pods[0]
    v = V1(first.url)
    a = v.create_ok()[0]["id"]
    assert a[:TOKEN_LEN] == c.token(first)
    time.sleep(3 * INTERVAL_MS / 1000)  # the peers learn its room
    b = v.create_ok()[0]["id"]
    assert b[:TOKEN_LEN] in {c.token(p) for p in c.pods[1:]}, "handed to a peer"
    time.sleep(3 * INTERVAL_MS / 1000)
    d = v.create_ok()[0]["id"]
    assert {a[:TOKEN_LEN], b[:TOKEN_LEN], d[:TOKEN_LEN]} == {c.token(p) for p in c.pods}
    time.sleep(3 * INTERVAL_MS / 1000)
    for p in c.pods:
        r = V1(p.url).create()
        expect(r, 503, "UNAVAILABLE")
        assert (header(r, "Retry-After") or "").isdigit(), r.headers
    # every sandbox answers through every pod
    for sid in (a, b, d):
        for p in c.pods:
            expect(V1(p.url).get(sid), 200)


def test_a_draining_pod_hands_creates_to_peers_and_keeps_answering_for_its_own(fresh):
    c = fresh()
    pod = c.pods[0]
    mine = V1(pod.url).create_ok()[0]["id"]
    r = request(pod.url, "POST", "/drain")
    assert r.status == 200, r
    time.sleep(3 * INTERVAL_MS / 1000)  # the peers learn it is not accepting
    assert c.cluster_of(pod)["accepting"] is False
    j = V1(pod.url).create_ok()[0]
    assert j["id"][:TOKEN_LEN] in {c.token(p) for p in c.pods[1:]}, "handed to a peer"
    # its own sandbox: answered directly, through peers and through the Service
    expect(V1(pod.url).get(mine), 200)
    for p in c.pods[1:]:
        expect(V1(p.url).get(mine), 200)
        st = Sse(p.url, mine, {"command": "echo still"}).read_all()
        assert st.lines() == ["still"], st.events
    # the Service no longer sends it anything, and creates through it land on the others
    c.lb.wait_state(pod.name, "DOWN")
    for _ in range(4):
        sid = V1(c.url).create_ok()[0]["id"]
        assert sid[:TOKEN_LEN] != c.token(pod)
