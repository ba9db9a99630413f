"""OPENSANDBOX.md section 3.1: background commands. `background: true` answers `init` and
`execution_complete` at once and closes the stream; the command runs on in its own cgroup,
its stdout and stderr appended to a log the daemon keeps outside the sandbox (the last
SANDBOX_HOST_COMMAND_LOG_MAX bytes of each; a sandbox's logs together are bounded too, finished
ones dropped first). `GET /command/status/{id}`, `GET /command/{id}/logs?cursor=N` (bytes from
offset N, from the oldest kept byte when N is older; `EXECD-COMMANDS-TAIL-CURSOR` the offset
after them), `DELETE /command?id=` kills the whole tree. A sandbox remembers its last 1024
commands (finished ones dropped oldest first)."""
import threading
import time

import pytest

import execlib
import oslib
import shlib
from oslib import expect
from sselib import Stream, run

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CALL = 10.0


def start_bg(osc, sid, command, **fields):
    """A background command: its stream must be init + execution_complete, then end."""
    body = {"command": command, "background": True}
    body.update(fields)
    st = Stream(osc, sid, body=body)
    assert st.status == 200, (st.status, st.body)
    st.read_all(timeout=CALL)
    assert st.types == ["init", "execution_complete"], st.types
    return st.id


def status(osc, sid, cid):
    return expect(osc.execd(sid, "GET", "/command/status/" + oslib.q(cid), timeout=CALL), 200)


def wait_done(osc, sid, cid, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        s = status(osc, sid, cid)
        if not s["running"]:
            return s
        assert time.monotonic() < deadline, "still running: %r" % (s,)
        time.sleep(0.05)


def logs(osc, sid, cid, cursor=None):
    q = "" if cursor is None else "?cursor=%d" % cursor
    r = osc.execd(sid, "GET", "/command/%s/logs%s" % (oslib.q(cid), q), timeout=CALL)
    assert r.status == 200, r
    assert (r.header("Content-Type") or "").startswith("text/plain"), r.headers
    cur = r.header_all("EXECD-COMMANDS-TAIL-CURSOR")
    assert len(cur) == 1 and cur[0].isdigit(), r.headers
    return r.body, int(cur[0])


def test_background_answers_init_and_complete_at_once_and_runs_on(osc, sbx):
    sid = sbx["id"]
    m = execlib.marker()
    cid = start_bg(osc, sid, "sleep %s; echo late" % m)
    s = status(osc, sid, cid)
    assert s["running"] is True and "exit_code" not in s and "finished_at" not in s, s
    assert s["content"] == "sleep %s; echo late" % m and s["id"] == cid
    oslib.parse_time(s["started_at"])
    # it runs on (its shell may still be starting the sleep when the stream has ended)
    assert shlib.wait_until(lambda: execlib.host_sleepers(m), 10), "the command does not run on"
    expect(osc.execd(sid, "DELETE", "/command?id=" + cid, timeout=CALL), 200)
    wait_done(osc, sid, cid)


def test_status_and_logs_once_it_finished(osc, sbx):
    sid = sbx["id"]
    cid = start_bg(osc, sid, "echo out1; echo err1 >&2; sleep 0.2; echo out2; exit 7")
    s = wait_done(osc, sid, cid)
    assert s["exit_code"] == 7 and s["error"], s
    assert oslib.parse_time(s["started_at"]) <= oslib.parse_time(s["finished_at"])
    body, cur = logs(osc, sid, cid)
    assert sorted(body.decode().splitlines()) == ["err1", "out1", "out2"], body
    assert body.endswith(b"out2\n")
    assert cur == len(body)


def test_a_cursor_reads_from_that_offset_and_past_the_end_reads_nothing(osc, sbx):
    sid = sbx["id"]
    cid = start_bg(osc, sid, "printf 'abc\\ndef\\n'")
    wait_done(osc, sid, cid)
    body, cur = logs(osc, sid, cid, 0)
    assert body == b"abc\ndef\n" and cur == 8
    body, cur = logs(osc, sid, cid, 4)
    assert body == b"def\n" and cur == 8
    body, cur = logs(osc, sid, cid, 8)
    assert body == b"" and cur == 8
    body, cur = logs(osc, sid, cid, 10 ** 12)
    assert body == b"" and cur == 8


def test_polling_with_the_returned_cursor_yields_every_byte_once(osc, sbx):
    sid = sbx["id"]
    cid = start_bg(osc, sid, "for i in $(seq 1 40); do echo line$i; sleep 0.02; done")
    got, cur = b"", 0
    deadline = time.monotonic() + 30
    while True:
        running = status(osc, sid, cid)["running"]
        chunk, cur2 = logs(osc, sid, cid, cur)
        assert cur2 == cur + len(chunk), (cur, cur2, len(chunk))
        got, cur = got + chunk, cur2
        if not running:
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    chunk, cur = logs(osc, sid, cid, cur)
    got += chunk
    assert got == b"".join(b"line%d\n" % i for i in range(1, 41))


def test_binary_output_is_kept_byte_exact(osc, sbx):
    sid = sbx["id"]
    want = bytes(range(256))
    cid = start_bg(osc, sid, "printf '%b' '" + "".join("\\x%02x" % b for b in want) + "'")
    wait_done(osc, sid, cid)
    assert logs(osc, sid, cid)[0] == want


def test_interrupt_kills_the_whole_tree_of_a_background_command(osc, sbx):
    sid = sbx["id"]
    m = execlib.marker()
    cid = start_bg(osc, sid, "sleep %s & (setsid sleep %s &); sleep %s" % (m, m, m))
    deadline = time.monotonic() + 10
    while len(execlib.host_sleepers(m)) < 3:
        assert time.monotonic() < deadline, "the sleepers never started"
        time.sleep(0.05)
    r = osc.execd(sid, "DELETE", "/command?id=" + oslib.q(cid), timeout=CALL)
    expect(r, 200)
    s = wait_done(osc, sid, cid)
    assert s["exit_code"] == 137 and "interrupted" in s["error"], s
    left = execlib.wait_gone(lambda: execlib.host_sleepers(m), timeout=10)
    execlib.kill_pids([p[0] for p in left], osc.c.daemon_pid)
    assert not left, left
    # a second interrupt of a finished command changes nothing
    expect(osc.execd(sid, "DELETE", "/command?id=" + oslib.q(cid), timeout=CALL), 200)


def test_a_background_timeout_kills_it(osc, sbx):
    sid = sbx["id"]
    cid = start_bg(osc, sid, "sleep 60", timeout=300)
    s = wait_done(osc, sid, cid)
    assert s["exit_code"] == 137 and "timed out" in s["error"], s


def test_unknown_ids_and_missing_queries(osc, sbx):
    sid = sbx["id"]
    expect(osc.execd(sid, "GET", "/command/status/nope", timeout=CALL), 404,
           "INVALID_REQUEST_BODY")
    expect(osc.execd(sid, "GET", "/command/nope/logs", timeout=CALL), 404,
           "INVALID_REQUEST_BODY")
    expect(osc.execd(sid, "DELETE", "/command?id=nope", timeout=CALL), 404)
    expect(osc.execd(sid, "DELETE", "/command", timeout=CALL), 400, "MISSING_QUERY")
    cid = start_bg(osc, sid, "true")
    wait_done(osc, sid, cid)
    expect(osc.execd(sid, "GET", "/command/%s/logs?cursor=x" % cid, timeout=CALL), 400,
           "INVALID_REQUEST_BODY")


def test_another_sandboxs_command_id_is_unknown_here(osc, sbx):
    other = osc.create_ok()
    try:
        cid = start_bg(osc, other["id"], "echo secret-output")
        wait_done(osc, other["id"], cid)
        for sub in ("/command/status/" + cid, "/command/%s/logs" % cid):
            r = osc.execd(sbx["id"], "GET", sub, timeout=CALL)
            expect(r, 404)
            assert b"secret-output" not in r.body
        expect(osc.execd(sbx["id"], "DELETE", "/command?id=" + cid, timeout=CALL), 404)
    finally:
        osc.kill(other["id"])


# ---- bounds ------------------------------------------------------------------------------------

@pytest.fixture
def small_logs(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_COMMAND_LOG_MAX": "16384"})
    osc = oslib.os_client(d)
    j = osc.create_ok()
    return osc, j["id"]


def test_a_log_keeps_the_last_command_log_max_bytes(small_logs):
    osc, sid = small_logs
    cid = start_bg(osc, sid, "for i in $(seq 100000 110000); do echo $i; done")
    wait_done(osc, sid, cid)
    want = b"".join(b"%d\n" % i for i in range(100000, 110001))
    body, cur = logs(osc, sid, cid, 0)  # a cursor before the kept range
    assert cur == len(want)
    assert body == want[-16384:], (len(body), body[:40])
    body, cur = logs(osc, sid, cid, len(want) - 7)
    assert body == want[-7:]


def test_a_sandboxs_logs_together_are_bounded_finished_ones_first(small_logs):
    osc, sid = small_logs
    ids = []
    for k in range(12):
        cid = start_bg(osc, sid, "head -c 40000 /dev/zero | tr '\\0' %s" % "abcdefghijkl"[k])
        wait_done(osc, sid, cid)
        ids.append(cid)
    first, _ = logs(osc, sid, ids[0], 0)
    last, cur = logs(osc, sid, ids[-1], 0)
    assert first == b"", "the oldest finished log is dropped first (%d bytes left)" % len(first)
    assert last == b"l" * 16384 and cur == 40000
    # its status stays
    assert status(osc, sid, ids[0])["exit_code"] == 0


@pytest.mark.timeout(300)
def test_a_sandbox_remembers_its_last_1024_commands(osc, sbx):
    sid = sbx["id"]
    ids, errs = [], []
    lock = threading.Lock()

    def worker(n):
        try:
            for _ in range(n):
                st = run(osc, sid, "true", wait=60)
                st.assert_complete()
                with lock:
                    ids.append((st.events[0][0], st.id))
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(repr(e))

    ts = [threading.Thread(target=worker, args=(129,)) for _ in range(8)]  # 1032 commands
    for t in ts:
        t.start()
    for t in ts:
        t.join(280)
    assert not errs, errs[:3]
    ids.sort()
    found = [osc.execd(sid, "GET", "/command/status/" + cid, timeout=CALL).status
             for _, cid in ids]
    assert found.count(200) == 1024, found.count(200)
    # the ones forgotten are among the oldest
    assert all(s == 200 for s in found[16:]), found[:40]
