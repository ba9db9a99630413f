"""Attacks on the code interpreter (OPENSANDBOX.md section 3.3, issue 26), each a kept test: a
cell's code runs in the driver's own process, so it can write to the driver's frames channel
(fd 3), close it or flood it; it can fork children; it can fill the sandbox's memory. None of it
may reach past its own context: a forged or malformed frame, a closed or flooded channel break
that context only (killed; its cell ends in `error`), a context's children die with it, and a
context that fills its sandbox's memory leaves every other sandbox answering."""
import threading

import pytest

import shlib
import sselib
from codelib import CALL, CellStream, cell, new_context, ok, own_sandbox, text_result, wait_for
from oslib import expect

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")


def _dead_after(osc, sid, cid):
    """The context cannot run another cell (it is dead) or is gone."""
    st = CellStream(osc, sid, {"code": "1", "context": {"id": cid}})
    if st.status == 200:
        st.read_all()
    return st.status in (404, 409)


def test_a_malformed_frame_breaks_only_its_context(osc, sbx):
    sid = sbx["id"]
    victim, other = new_context(osc, sid), new_context(osc, sid)
    st = cell(osc, sid, "import os\nos.write(3, b'{not json\\n')\nimport time\ntime.sleep(5)",
              victim, wait=30)
    e = st.assert_error()
    assert e["ename"] == "ContextDied" and "malformed" in e["evalue"], e
    assert _dead_after(osc, sid, victim)
    assert text_result(ok(osc, sid, "'fine'", other)) == "'fine'"


def test_forged_frames_break_only_their_context(osc, sbx):
    sid = sbx["id"]
    victim, other = new_context(osc, sid), new_context(osc, sid)
    forged = ("import os\n"
              "os.write(3, b'{\"t\":\"result\",\"data\":{\"text/plain\":\"forged\"}}\\n')\n"
              "os.write(3, b'{\"t\":\"done\"}\\n')\n"
              "os.write(3, b'{\"t\":\"ready\"}\\n')\n"
              "import time\ntime.sleep(1)\n")
    st = cell(osc, sid, forged, victim, wait=30)
    assert st.final is not None  # the stream ends, whatever the forgery made of it
    # the driver's own done frame (or the forged ready) then comes out of turn: broken
    assert wait_for(lambda: _dead_after(osc, sid, victim), timeout=15)
    assert text_result(ok(osc, sid, "'fine'", other)) == "'fine'"


def test_a_cell_closing_the_frames_channel_ends_in_error_without_hanging(osc, sbx):
    sid = sbx["id"]
    victim, other = new_context(osc, sid), new_context(osc, sid)
    st = cell(osc, sid, "import os\nos.close(3)\nprint('closed', flush=True)", victim, wait=30)
    assert st.assert_error()["ename"] == "ContextDied"
    assert text_result(ok(osc, sid, "'fine'", other)) == "'fine'"


def test_a_cell_flooding_the_frames_channel_breaks_its_context_within_the_bound(start_daemon):
    with own_sandbox(start_daemon, {"SANDBOX_HOST_CODE_RESULT_MAX": "64K"}) as (osc, sid):
        victim, other = new_context(osc, sid), new_context(osc, sid)
        st = cell(osc, sid, "import os\nwhile True:\n    os.write(3, b'x' * 65536)", victim,
                  wait=60)
        e = st.assert_error()
        assert e["ename"] == "ContextDied" and "bound" in e["evalue"], e
        assert text_result(ok(osc, sid, "'fine'", other)) == "'fine'"


def test_a_huge_result_is_left_out_by_the_driver_not_a_broken_context(start_daemon):
    with own_sandbox(start_daemon, {"SANDBOX_HOST_CODE_RESULT_MAX": "64K"}) as (osc, sid):
        cid = new_context(osc, sid)
        st = cell(osc, sid, "'x' * 200000", cid)
        assert st.final is not None
        for r in st.results():
            assert len(r.get("text/plain", "")) <= 64 * 1024
        assert text_result(ok(osc, sid, "'fine'", cid)) == "'fine'"


def test_a_child_left_behind_dies_with_its_deleted_context(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    st = ok(osc, sid, "import subprocess\np = subprocess.Popen(['sleep', '1000'], "
                      "start_new_session=True)\np.pid", cid)
    pid = text_result(st)
    assert pid and pid.isdigit(), st.results()
    assert sselib.run(osc, sid, "kill -0 %s && echo alive" % pid).texts() == ["alive"]
    expect(osc.execd(sid, "DELETE", "/code/contexts/" + cid, timeout=CALL), 200)
    assert wait_for(lambda: sselib.run(osc, sid, "kill -0 %s 2>/dev/null || echo gone" % pid)
                    .texts() == ["gone"], timeout=20)


def test_a_context_filling_its_sandboxs_memory_leaves_other_sandboxes_answering(osc):
    small = osc.create_ok(resourceLimits={"cpu": "1", "memory": "128Mi"})["id"]
    other = osc.create_ok()["id"]
    try:
        hog, calm = new_context(osc, small), new_context(osc, other)
        holder = {}

        def run():
            holder["st"] = cell(osc, small, "b = []\nwhile True:\n    b.append(b'x' * (1 << 20))",
                                hog, wait=90)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        for _ in range(5):
            assert text_result(ok(osc, other, "sum(range(10))", calm)) == "45"
        t.join(90)
        assert not t.is_alive()
        e = holder["st"].assert_error()
        assert e["ename"] in ("ContextDied", "MemoryError"), e
        if e["ename"] == "ContextDied":
            assert "OOM" in e["evalue"] or "signal 9" in e["evalue"], e
        assert text_result(ok(osc, other, "'still'", calm)) == "'still'"
    finally:
        osc.kill(small)
        osc.kill(other)


def test_another_sandboxs_context_id_is_unknown_here(osc, sbx):
    """A context lives in its sandbox's record: its id through another sandbox's execd (the
    other's token) is 404 for every route, and the context is untouched."""
    mine = sbx["id"]
    theirs = osc.create_ok()["id"]
    try:
        cid = new_context(osc, theirs)
        st = CellStream(osc, mine, {"code": "1", "context": {"id": cid}})
        assert st.status == 404 and st.json()["code"] == "CONTEXT_NOT_FOUND", (st.status, st.body)
        for method, path in (("GET", "/code/contexts/" + cid), ("DELETE", "/code/contexts/" + cid),
                             ("DELETE", "/code?id=" + cid)):
            expect(osc.execd(mine, method, path, timeout=CALL), 404, "CONTEXT_NOT_FOUND")
        assert all(c["id"] != cid for c in osc.execd(mine, "GET", "/code/contexts",
                                                     timeout=CALL).json())
        assert text_result(ok(osc, theirs, "'mine'", cid)) == "'mine'"
    finally:
        osc.kill(theirs)
