"""OPENSANDBOX.md section 2, pause/resume: `202`, `Pausing` then `Paused` once the sandbox's
cgroup is frozen, `Resuming` then `Running`; either from the wrong state `409 INVALID_STATE`;
while paused every execd route answers `409 SANDBOX_PAUSED` and the expiry keeps running.
Pausing really stops execution: a counter loop started through the native exec stops
advancing while paused and advances again after resume."""
import json
import os
import time

import pytest

import execlib
import persistlib
import oslib
import shlib
from oslib import expect
from sselib import stdout_of

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

COUNTER = ("i=0; while :; do i=$((i+1)); echo $i > /workspace/.counter.tmp && "
           "mv /workspace/.counter.tmp /workspace/counter; sleep 0.02; done")


def pause(osc, sid):
    r = osc.post("/v1/sandboxes/%s/pause" % sid)
    expect(r, 202)
    assert r.body == b""
    return r


def resume(osc, sid):
    r = osc.post("/v1/sandboxes/%s/resume" % sid)
    expect(r, 202)
    assert r.body == b""
    return r


def start_counter(osc, sid):
    """The counter loop in the background of a native exec (the exec ends, the loop runs on
    in the sandbox: CONTRACT.md section 4's grace rule)."""
    execlib.ok(osc.native(sid), ["sh", "-c", "(%s) </dev/null >/dev/null 2>&1 &" % COUNTER])


def counter(daemon, sid):
    p = daemon.ws(sid) / "counter"
    for _ in range(50):
        try:
            t = p.read_text().strip()
            if t:
                return int(t)
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    return None


def wait_advancing(daemon, sid, timeout=10.0):
    first = shlib.wait_until(lambda: counter(daemon, sid), timeout=timeout)
    assert first, "the counter never started"
    assert shlib.wait_until(lambda: (counter(daemon, sid) or 0) > first + 3, timeout=timeout), \
        "the counter does not advance"


def test_pause_goes_pausing_then_paused_and_resume_resuming_then_running(osc, sbx):
    sid = sbx["id"]
    pause(osc, sid)
    first = osc.sandbox_ok(sid)["status"]["state"]
    assert first in ("Pausing", "Paused"), first
    j, seen = osc.wait_state(sid, "Paused")
    assert set(seen) <= {"Pausing", "Paused"}, seen
    t_paused = oslib.parse_time(j["status"]["lastTransitionAt"])
    resume(osc, sid)
    first = osc.sandbox_ok(sid)["status"]["state"]
    assert first in ("Resuming", "Running"), first
    j, seen = osc.wait_state(sid, "Running")
    assert set(seen) <= {"Resuming", "Running"}, seen
    assert oslib.parse_time(j["status"]["lastTransitionAt"]) >= t_paused


def test_pause_really_stops_execution_and_resume_restarts_it(daemon, osc, sbx):
    sid = sbx["id"]
    start_counter(osc, sid)
    wait_advancing(daemon, sid)
    pause(osc, sid)
    osc.wait_state(sid, "Paused")
    c1 = counter(daemon, sid)
    time.sleep(1.0)  # observation window: ~50 increments if anything still ran
    c2 = counter(daemon, sid)
    assert c1 == c2, "the counter advanced while Paused: %r -> %r" % (c1, c2)
    resume(osc, sid)
    osc.wait_state(sid, "Running")
    assert shlib.wait_until(lambda: (counter(daemon, sid) or 0) > c2 + 3, timeout=10), \
        "the counter did not advance after resume"


def test_pause_freezes_the_entrypoint_too(daemon, osc):
    j = osc.create_ok(entrypoint=["sh", "-c", COUNTER])
    sid = j["id"]
    try:
        wait_advancing(daemon, sid)
        pause(osc, sid)
        osc.wait_state(sid, "Paused")
        c1 = counter(daemon, sid)
        time.sleep(0.6)
        assert counter(daemon, sid) == c1
    finally:
        osc.kill(sid)


def test_pause_from_paused_and_resume_from_running_are_409_invalid_state(osc, sbx):
    sid = sbx["id"]
    expect(osc.post("/v1/sandboxes/%s/resume" % sid), 409, "INVALID_STATE")
    pause(osc, sid)
    osc.wait_state(sid, "Paused")
    expect(osc.post("/v1/sandboxes/%s/pause" % sid), 409, "INVALID_STATE")
    assert osc.sandbox_ok(sid)["status"]["state"] == "Paused"
    resume(osc, sid)
    osc.wait_state(sid, "Running")
    expect(osc.post("/v1/sandboxes/%s/resume" % sid), 409, "INVALID_STATE")


def test_while_paused_every_execd_route_is_409_sandbox_paused(osc, sbx):
    sid = sbx["id"]
    pause(osc, sid)
    osc.wait_state(sid, "Paused")
    # INTERPRETATION: "every execd route": the paused answer comes before a route's own 501
    for method, sub, body in (("GET", "/ping", None), ("POST", "/command", {"command": "id"}),
                              ("GET", "/command/status/x", None),
                              ("GET", "/files/info?path=/tmp", None),
                              ("GET", "/metrics", None), ("POST", "/session", {}),
                              ("POST", "/code", {"code": "1"})):
        r = osc.execd(sid, method, sub, body=body, timeout=5)
        expect(r, 409, "SANDBOX_PAUSED")
    resume(osc, sid)
    osc.wait_state(sid, "Running")
    expect(osc.execd(sid, "GET", "/ping"), 200)


def test_lifecycle_calls_still_answer_while_paused(osc, sbx):
    # INTERPRETATION: section 2 refuses only execd routes while paused (and pause/resume from
    # the wrong state); the rest of the lifecycle keeps working on a paused sandbox.
    sid = sbx["id"]
    pause(osc, sid)
    osc.wait_state(sid, "Paused")
    assert expect(osc.patch("/v1/sandboxes/%s/metadata" % sid, {"p": "1"}), 200)[
        "metadata"] == {"p": "1"}
    expect(osc.post("/v1/sandboxes/%s/renew-expiration" % sid,
                    {"expiresAt": oslib.in_seconds(3600)}), 200)
    expect(osc.get("/v1/sandboxes/%s/diagnostics/events?scope=lifecycle" % sid), 200)
    assert osc.c.get("/healthz", timeout=2).status == 200


def test_delete_of_a_paused_sandbox_kills_everything(daemon, osc):
    j = osc.create_ok()
    sid = j["id"]
    uid = execlib.sandbox_uid(osc.native(sid))
    start_counter(osc, sid)
    wait_advancing(daemon, sid)
    pause(osc, sid)
    osc.wait_state(sid, "Paused")
    expect(osc.delete("/v1/sandboxes/" + sid, timeout=10), 204)
    left = execlib.wait_gone(lambda: execlib.host_procs_of_uid(uid), timeout=10)
    execlib.kill_pids([p[0] for p in left], osc.c.daemon_pid)
    assert not left, "frozen processes survived the delete: %r" % left
    expect(osc.sandbox(sid), 404, "SANDBOX_NOT_FOUND")
    assert not (daemon.root / sid).exists()


def test_pause_does_not_touch_other_sandboxes(daemon, osc, sbx):
    other = osc.create_ok()
    try:
        start_counter(osc, other["id"])
        wait_advancing(daemon, other["id"])
        pause(osc, sbx["id"])
        osc.wait_state(sbx["id"], "Paused")
        c = counter(daemon, other["id"])
        assert shlib.wait_until(lambda: (counter(daemon, other["id"]) or 0) > c + 3, timeout=10)
        expect(osc.execd(other["id"], "GET", "/ping"), 200)
        assert osc.sandbox_ok(other["id"])["status"]["state"] == "Running"
    finally:
        osc.kill(other["id"])


def test_the_daemon_keeps_answering_while_a_sandbox_is_paused(osc, sbx):
    """A frozen sandbox never stalls the loop: probes and lifecycle calls stay fast."""
    sid = sbx["id"]
    pause(osc, sid)
    osc.wait_state(sid, "Paused")
    for _ in range(5):
        assert osc.c.get("/healthz", timeout=2).status == 200
    expect(osc.get("/v1/sandboxes?pageSize=200"), 200)
    resume(osc, sid)
    osc.wait_state(sid, "Running")
    assert execlib.sh(osc.native(sid), "echo back") == "back\n"


def test_repeated_pause_resume_cycles_end_running(daemon, osc, sbx):
    sid = sbx["id"]
    start_counter(osc, sid)
    wait_advancing(daemon, sid)
    for _ in range(5):
        pause(osc, sid)
        osc.wait_state(sid, "Paused")
        resume(osc, sid)
        osc.wait_state(sid, "Running")
    wait_advancing(daemon, sid)
    expect(osc.execd(sid, "GET", "/ping"), 200)


# ---- the pause and the copies that freeze too (snapshots, persist) ---------------------------

def big_workspace(daemon, sid, mib=48):
    """A workspace whose copy takes a moment (files and one big one), the sandbox's own."""
    ws = daemon.ws(sid)
    persistlib.fill_rich_tree(str(ws), n_files=3000)
    with open(ws / "big.bin", "wb") as f:
        f.write(os.urandom(1 << 20) * mib)
    persistlib.chown_tree(str(ws), os.stat(ws).st_uid)


def snapshot_state(osc, snid):
    return expect(osc.get("/v1/snapshots/" + snid), 200)["status"]["state"]


def wait_snapshot_ready(osc, snid, timeout=60):
    assert shlib.wait_until(lambda: snapshot_state(osc, snid) != "Creating", timeout=timeout), \
        "the snapshot stayed Creating"
    assert snapshot_state(osc, snid) == "Ready"


def stays_frozen(daemon, sid, window=0.6):
    c1 = counter(daemon, sid)
    time.sleep(window)  # observation window: ~30 increments if anything still ran
    return c1 == counter(daemon, sid)


def test_a_snapshot_of_a_paused_sandbox_leaves_it_frozen(daemon, osc, sbx):
    """The copy freezes the sandbox and thaws what it froze: never the pause's freeze."""
    sid = sbx["id"]
    start_counter(osc, sid)
    wait_advancing(daemon, sid)
    pause(osc, sid)
    osc.wait_state(sid, "Paused")
    s = expect(osc.post("/v1/sandboxes/%s/snapshots" % sid, {}), 202)
    wait_snapshot_ready(osc, s["id"])
    assert osc.sandbox_ok(sid)["status"]["state"] == "Paused"
    assert stays_frozen(daemon, sid), "the sandbox ran again after its snapshot while Paused"
    resume(osc, sid)
    osc.wait_state(sid, "Running")
    c = counter(daemon, sid)
    assert shlib.wait_until(lambda: (counter(daemon, sid) or 0) > c + 3, timeout=10)


def test_a_pause_during_a_snapshot_copy_stays_frozen_after_the_copy(daemon, osc, sbx):
    """Paused while the copy holds the sandbox frozen: the copy's end must not thaw it (tried
    a few times: a copy that ended before the pause proves nothing and is retried)."""
    sid = sbx["id"]
    big_workspace(daemon, sid)
    start_counter(osc, sid)
    wait_advancing(daemon, sid)
    for _ in range(3):
        s = expect(osc.post("/v1/sandboxes/%s/snapshots" % sid, {}), 202)
        pause(osc, sid)
        osc.wait_state(sid, "Paused")
        during = snapshot_state(osc, s["id"]) == "Creating"
        wait_snapshot_ready(osc, s["id"])
        assert stays_frozen(daemon, sid), "the copy's end thawed a Paused sandbox"
        assert osc.sandbox_ok(sid)["status"]["state"] == "Paused"
        resume(osc, sid)
        osc.wait_state(sid, "Running")
        if during:
            break
    assert during, "never paused while the copy ran"
    c = counter(daemon, sid)
    assert shlib.wait_until(lambda: (counter(daemon, sid) or 0) > c + 3, timeout=10)


def test_a_resume_during_a_snapshot_copy_lets_it_run_once_the_copy_ends(daemon, osc, sbx):
    """Resumed while a copy of the paused sandbox runs: Running at once, and its processes run
    again when the copy lets go (never before: the copy reads a still tree)."""
    sid = sbx["id"]
    big_workspace(daemon, sid)
    start_counter(osc, sid)
    wait_advancing(daemon, sid)
    for _ in range(3):
        pause(osc, sid)
        osc.wait_state(sid, "Paused")
        s = expect(osc.post("/v1/sandboxes/%s/snapshots" % sid, {}), 202)
        resume(osc, sid)
        osc.wait_state(sid, "Running")
        during = snapshot_state(osc, s["id"]) == "Creating"
        wait_snapshot_ready(osc, s["id"])
        c = counter(daemon, sid)
        assert shlib.wait_until(lambda: (counter(daemon, sid) or 0) > c + 3, timeout=10), \
            "the sandbox stayed frozen after the copy ended"
        if during:
            break
    assert during, "never resumed while the copy ran"


def test_a_paused_sandbox_goes_with_the_daemon_at_sigterm(start_daemon):
    """Shutdown deletes every sandbox: frozen processes die too, and the exit is clean."""
    d = start_daemon()
    osc = oslib.os_client(d)
    m = execlib.marker()
    j = osc.create_ok(entrypoint=["sleep", m])
    pids = [p[0] for p in shlib.wait_until(lambda: execlib.host_sleepers(m), timeout=10) or []]
    assert pids, "the entrypoint never ran"
    pause(osc, j["id"])
    osc.wait_state(j["id"], "Paused")
    try:
        d.stop_ok("with a paused sandbox")
        assert not execlib.wait_gone(lambda: execlib.host_sleepers(m), timeout=10)
    finally:
        # safety net: only the pids this sandbox's entrypoint had
        for p in execlib.host_sleepers(m):
            if p[0] in pids:
                os.kill(p[0], 9)


# ---- the paused rule in every frozen state (issue 20, finding 16) ------------------------------

def pipelined(daemon, sid, first, then):
    """POST …/{first}, and in the same write a request `then` = (method, sub of execd or a
    lifecycle path): both on one connection, so the daemon reads them together and answers the
    second in the same turn of its loop, right behind the first (before any timer: Pausing ->
    Paused and Resuming -> Running are steps of later turns). [(status, JSON body or None)]."""
    method, path = then
    reqs = ("POST /v1/sandboxes/%s/%s HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"
            "%s %s HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            % (sid, first, method, path))
    got, closed = shlib.exchange_to_close(daemon.port, reqs.encode(), timeout=10)
    assert closed, got
    out = []
    while got:
        head, _, rest = got.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        n = 0
        for ln in head.split(b"\r\n")[1:]:
            k, _, v = ln.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        body, got = rest[:n], rest[n:]
        out.append((status, json.loads(body) if body else None))
    assert len(out) == 2, out
    return out


def execd_path(sid, sub):
    return "/v1/sandboxes/%s/proxy/%d%s" % (sid, oslib.EXECD_PORT, sub)


def test_an_execd_call_right_behind_a_pause_is_409_sandbox_paused(daemon, osc, sbx):
    """While Pausing (the freeze asked, not yet complete) the sandbox's execd does not answer
    either: the paused rule is every state from the pause to Running, not Paused alone."""
    sid = sbx["id"]
    (s1, _), (s2, b2) = pipelined(daemon, sid, "pause", ("GET", execd_path(sid, "/ping")))
    assert s1 == 202
    assert (s2, b2["code"] if b2 else None) == (409, "SANDBOX_PAUSED"), (s2, b2)
    osc.wait_state(sid, "Paused")
    resume(osc, sid)
    osc.wait_state(sid, "Running")
    (s1, _), (s2, b2) = pipelined(daemon, sid, "pause",
                                  ("GET", execd_path(sid, "/files/info?path=/tmp")))
    assert (s1, s2, b2["code"]) == (202, 409, "SANDBOX_PAUSED"), b2


def test_an_execd_call_right_behind_a_resume_is_409_sandbox_paused(daemon, osc, sbx):
    """INTERPRETATION: section 2's "while paused" holds until the sandbox is Running again:
    Resuming is still the pause (the SDK's health check turns true once it runs)."""
    sid = sbx["id"]
    pause(osc, sid)
    osc.wait_state(sid, "Paused")
    (s1, _), (s2, b2) = pipelined(daemon, sid, "resume", ("GET", execd_path(sid, "/ping")))
    assert s1 == 202
    assert (s2, b2["code"] if b2 else None) == (409, "SANDBOX_PAUSED"), (s2, b2)
    osc.wait_state(sid, "Running")
    expect(osc.execd(sid, "GET", "/ping"), 200)


def test_a_resume_right_behind_a_pause_is_409_invalid_state(daemon, osc, sbx):
    """Only a Paused sandbox resumes: one still Pausing does not, and the pause goes on to
    Paused (a resume taken then would leave it frozen with no hold, or thawed but Paused)."""
    sid = sbx["id"]
    (s1, _), (s2, b2) = pipelined(daemon, sid, "pause", ("POST", "/v1/sandboxes/%s/resume" % sid))
    assert s1 == 202
    assert (s2, b2["code"]) == (409, "INVALID_STATE"), b2
    osc.wait_state(sid, "Paused")
    resume(osc, sid)
    osc.wait_state(sid, "Running")
    expect(osc.execd(sid, "GET", "/ping"), 200)


def test_commands_run_after_each_of_two_resumes_and_a_third_resume_is_409(osc, sbx):
    sid = sbx["id"]
    for n in (1, 2):
        pause(osc, sid)
        osc.wait_state(sid, "Paused")
        resume(osc, sid)
        osc.wait_state(sid, "Running")
        # the command really runs: the sandbox is thawed, not only called Running
        assert stdout_of(osc, sid, "echo round-%d" % n) == ["round-%d" % n]
    expect(osc.post("/v1/sandboxes/%s/resume" % sid), 409, "INVALID_STATE")
    assert osc.sandbox_ok(sid)["status"]["state"] == "Running"
