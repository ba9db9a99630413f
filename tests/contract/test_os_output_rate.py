"""A sandbox's output nobody waits for (its entrypoint, its background commands) is read at
most SH_BG_RATE (8 MiB/s) per sandbox: past that its writers wait on their full pipes, so one
sandbox writing as fast as it can never takes the daemon's one thread from the others
(OPENSANDBOX.md sections 2 and 3.1; docs/opensandbox.md, Limits)."""
import time

import pytest

import codelib
import execlib
import shlib
from oslib import expect

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

RATE = 8 << 20
# the bucket (RATE / 8), a pipe's buffer and the engine's read chunks, with room to spare
SLACK = 4 << 20


def _written(pid):
    with open("/proc/%d/io" % pid) as f:
        for ln in f:
            if ln.startswith("wchar:"):
                return int(ln.split()[1])
    raise AssertionError("no wchar in /proc/%d/io" % pid)


def _writer(uid, marker):
    found = shlib.wait_until(
        lambda: [p for p in execlib.host_procs_of_uid(uid) if p[2] == marker], timeout=10)
    assert found, "the writer is not running"
    return found[0][0]


def _assert_read_at_most_the_rate(pid):
    # what the writer got through in a window is bounded by what the daemon read: the rate
    # times the window (measured around the two reads, so a slow machine only widens it)
    t0, w0 = time.monotonic(), _written(pid)
    time.sleep(1.0)
    w1, t1 = _written(pid), time.monotonic()
    assert w1 - w0 <= RATE * (t1 - t0) + SLACK, \
        "%d bytes in %.2f s: read faster than %d B/s" % (w1 - w0, t1 - t0, RATE)


def test_an_entrypoint_writing_as_fast_as_it_can_is_read_at_most_the_rate(osc):
    j = osc.create_ok(entrypoint=["yes", "entrypoint-flood"])
    sid = j["id"]
    try:
        uid = execlib.sandbox_uid(osc.native(sid))
        pid = _writer(uid, b"yes\0entrypoint-flood\0")
        _assert_read_at_most_the_rate(pid)
        # the daemon answers meanwhile, and the sandbox's own commands run
        expect(osc.execd(sid, "GET", "/ping"), 200)
        assert execlib.sh(osc.native(sid), "echo alive").strip() == "alive"
    finally:
        osc.kill(sid)


def test_a_background_command_writing_as_fast_as_it_can_is_read_at_most_the_rate(osc, sbx):
    sid = sbx["id"]
    r = osc.execd(sid, "POST", "/command",
                  body={"command": "exec yes background-flood", "background": True})
    assert r.status == 200, r
    uid = execlib.sandbox_uid(osc.native(sid))
    pid = _writer(uid, b"yes\0background-flood\0")
    _assert_read_at_most_the_rate(pid)
    expect(osc.execd(sid, "GET", "/ping"), 200)


def test_a_code_contexts_output_between_cells_is_read_at_most_the_rate(osc, sbx):
    """A cell leaves a writer behind: between cells nobody reads the context's output, so the
    daemon drops it, billed to the sandbox's unattended rate like a background command's."""
    sid = sbx["id"]
    r = osc.execd(sid, "POST", "/code/context", body={"language": "python"})
    assert r.status == 200, r
    cid = r.json()["id"]
    st = codelib.cell(osc, sid, "import subprocess\n"
                      "subprocess.Popen(['yes', 'code-idle-flood'])\nNone", cid, wait=30)
    st.assert_complete()
    uid = execlib.sandbox_uid(osc.native(sid))
    pid = _writer(uid, b"yes\0code-idle-flood\0")
    _assert_read_at_most_the_rate(pid)
    expect(osc.execd(sid, "GET", "/ping"), 200)
