"""OPENSANDBOX.md section 3.1: `GET /metrics` from the sandbox's own cgroup: `cpu_count` its CPU
limit in cores, `cpu_used_pct` its use over the last sampled second as a share of that limit
(0-100), `mem_total_mib` its memory limit, `mem_used_mib` its use (<= total), `timestamp`.
Sampled by a loop timer once a second per sandbox that was asked (the first ask waits for one
measured second, never the loop). `GET /metrics/watch`: one such JSON object and "\\n" per
second until the client leaves. Bounds under a CPU hog and a memory hog."""
import http.client
import json
import time

import pytest

import oslib
import shlib
from oslib import expect
from sselib import Stream

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CALL = 10.0


def metrics(osc, sid):
    m = expect(osc.execd(sid, "GET", "/metrics", timeout=CALL), 200)
    assert 0 <= m["cpu_used_pct"] <= 100, m
    assert 0 <= m["mem_used_mib"] <= m["mem_total_mib"], m
    assert abs(m["timestamp"] - time.time() * 1000) < 60000, m
    return m


def start_bg(osc, sid, command):
    st = Stream(osc, sid, body={"command": command, "background": True})
    assert st.status == 200
    st.read_all(timeout=CALL)
    return st.id


@pytest.fixture
def limited(osc):
    j = osc.create_ok(resourceLimits={"cpu": "500m", "memory": "256Mi"})
    yield j["id"]
    osc.kill(j["id"])


def test_metrics_are_the_sandboxs_limits_and_use(osc, limited):
    m = metrics(osc, limited)
    assert m["cpu_count"] == 0.5, m
    assert m["mem_total_mib"] == 256, m
    assert m["mem_used_mib"] > 0, m  # its PID 1 and entrypoint at least
    assert m["cpu_used_pct"] < 50, m  # an idle sandbox


def test_the_default_limits_are_the_hosts_maxima(osc, sbx):
    m = metrics(osc, sbx["id"])
    assert m["cpu_count"] == 1 and m["mem_total_mib"] == 1024, m  # SANDBOX_HOST_*_MAX defaults


@pytest.mark.timeout(90)
def test_a_cpu_hog_shows_and_stays_within_100(osc, limited):
    cid = start_bg(osc, limited, "while :; do :; done")
    try:
        deadline, best = time.monotonic() + 30, 0
        while best <= 30:
            assert time.monotonic() < deadline, "the hog never showed (best %.1f%%)" % best
            best = max(best, metrics(osc, limited)["cpu_used_pct"])
            time.sleep(0.3)
    finally:
        expect(osc.execd(limited, "DELETE", "/command?id=" + cid, timeout=CALL), 200)
    # and it goes down again once the hog is gone
    deadline = time.monotonic() + 30
    while metrics(osc, limited)["cpu_used_pct"] > 20:
        assert time.monotonic() < deadline, "the CPU use never went down"
        time.sleep(0.3)


@pytest.mark.timeout(90)
def test_a_memory_hog_shows_and_stays_within_the_limit(osc, limited):
    cid = start_bg(osc, limited, "python3 -c \"b = bytearray(b'x' * (120 << 20)); import time; "
                                 "print('held', flush=True); time.sleep(120)\"")
    try:
        deadline = time.monotonic() + 30
        while True:
            m = metrics(osc, limited)
            if m["mem_used_mib"] >= 110:
                break
            assert time.monotonic() < deadline, "the hog never showed: %r" % (m,)
            time.sleep(0.3)
        assert m["mem_used_mib"] <= 256
    finally:
        expect(osc.execd(limited, "DELETE", "/command?id=" + cid, timeout=CALL), 200)


def test_watch_streams_one_object_a_second_until_the_client_leaves(osc, sbx):
    sid = sbx["id"]
    conn = http.client.HTTPConnection(osc.host, osc.port, timeout=CALL)
    conn.request("GET", "/v1/sandboxes/%s/proxy/44772/metrics/watch" % sid)
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("Content-Type").startswith("text/event-stream")
    assert resp.getheader("X-Request-ID")
    doc, schema = oslib.component_schema("execd", "Metrics")
    got = []
    while len(got) < 3:
        line = resp.readline()
        assert line.endswith(b"\n"), line
        m = json.loads(line)
        oslib.validate_schema(doc, schema, m, "watch")
        got.append((time.monotonic(), m))
    assert got[0][1]["timestamp"] < got[1][1]["timestamp"] < got[2][1]["timestamp"]
    # a second apart (never early)
    assert got[2][0] - got[1][0] >= 0.7, got
    conn.close()
    # the host serves on
    metrics(osc, sid)


def test_watch_ends_when_the_sandbox_is_deleted(osc):
    j = osc.create_ok()
    conn = http.client.HTTPConnection(osc.host, osc.port, timeout=CALL)
    conn.request("GET", "/v1/sandboxes/%s/proxy/44772/metrics/watch" % j["id"])
    resp = conn.getresponse()
    assert resp.status == 200
    json.loads(resp.readline())
    osc.kill(j["id"])
    rest = resp.read()  # the end of the stream, within the call timeout
    for line in rest.splitlines():
        json.loads(line)
    conn.close()


def test_many_first_asks_at_once_are_all_answered(osc, sbx):
    import threading
    res = []

    def ask():
        res.append(osc.execd(sbx["id"], "GET", "/metrics", timeout=CALL).status)

    ts = [threading.Thread(target=ask) for _ in range(10)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert res == [200] * 10, res
