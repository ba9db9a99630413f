"""OPENSANDBOX.md section 3.1: bash sessions. `POST /session {cwd?}` -> `{session_id}`;
`POST /session/{sid}/run {command, cwd?, timeout?}` streams as `/command` does (its `init`
carries the session id, as OpenSandbox's execd sends), each run a fresh shell that starts in
the session's current directory with its exported environment, and whose final directory and
exports become the session's; `DELETE /session/{sid}` (its running command dies with its
tree); at most 64 sessions per sandbox."""
import time

import pytest

import execlib
import oslib
import shlib
from oslib import expect
from sselib import Stream, run_in

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CALL = 10.0


def new_session(osc, sid, body=None):
    r = osc.execd(sid, "POST", "/session", body=body if body is not None else {}, timeout=CALL)
    j = expect(r, 200)
    assert isinstance(j["session_id"], str) and j["session_id"], j
    return j["session_id"]


def out(osc, sid, ses, command, **fields):
    st = run_in(osc, sid, ses, command, **fields)
    st.assert_complete()
    return st.texts()


def test_a_run_streams_like_a_command_and_its_init_is_the_session_id(osc, sbx):
    sid = sbx["id"]
    ses = new_session(osc, sid)
    st = run_in(osc, sid, ses, "echo a; echo b >&2; exit 4")
    assert st.id == ses
    st.assert_error("4")
    assert st.texts() == ["a"] and st.texts("stderr") == ["b"]
    st = run_in(osc, sid, ses, "echo ok")
    assert st.types == ["init", "stdout", "execution_complete"]


def test_the_directory_is_carried_from_run_to_run(osc, sbx):
    sid = sbx["id"]
    ses = new_session(osc, sid)
    assert out(osc, sid, ses, "pwd") == ["/workspace"]
    out(osc, sid, ses, "mkdir -p /tmp/s1/deep && cd /tmp/s1/deep")
    assert out(osc, sid, ses, "pwd") == ["/tmp/s1/deep"]
    # a name with quotes and spaces survives the trip
    out(osc, sid, ses, "mkdir -p \"/tmp/it's a dir\" && cd \"/tmp/it's a dir\"")
    assert out(osc, sid, ses, "pwd") == ["/tmp/it's a dir"]


def test_exports_are_carried_and_plain_variables_are_not(osc, sbx):
    sid = sbx["id"]
    ses = new_session(osc, sid)
    out(osc, sid, ses, "export GREETING='hello \"world\" $x'; PLAIN=1; export MULTI=$'a\\nb'")
    got = out(osc, sid, ses, 'echo "$GREETING|${PLAIN:-unset}"; printf "%s" "$MULTI" | wc -l')
    assert got == ['hello "world" $x|unset', "1"], got


def test_the_state_is_carried_after_a_failing_run_too(osc, sbx):
    sid = sbx["id"]
    ses = new_session(osc, sid)
    st = run_in(osc, sid, ses, "cd /tmp; export X=7; false")
    st.assert_error("1")
    assert out(osc, sid, ses, "pwd; echo $X") == ["/tmp", "7"]


def test_sessions_are_independent(osc, sbx):
    sid = sbx["id"]
    a, b = new_session(osc, sid), new_session(osc, sid)
    assert a != b
    out(osc, sid, a, "cd /tmp; export WHO=a")
    assert out(osc, sid, b, "pwd; echo ${WHO:-none}") == ["/workspace", "none"]


def test_a_sessions_cwd_is_made_if_missing_and_a_runs_cwd_moves_it(osc, sbx):
    sid = sbx["id"]
    ses = new_session(osc, sid, {"cwd": "/tmp/made/by/session"})
    assert out(osc, sid, ses, "pwd") == ["/tmp/made/by/session"]
    assert out(osc, sid, ses, "pwd", cwd="/workspace") == ["/workspace"]
    assert out(osc, sid, ses, "pwd") == ["/workspace"]
    st = Stream(osc, sid, sub="/session/%s/run" % ses,
                body={"command": "pwd", "cwd": "/does/not/exist"})
    assert st.status == 400 and st.json()["code"] == "INVALID_REQUEST_BODY", st.body


def test_markers_in_a_runs_output_are_just_output(osc, sbx):
    sid = sbx["id"]
    ses = new_session(osc, sid)
    fake = ["__ENV_DUMP_START__", "declare -x EVIL=1", "__ENV_DUMP_END__", "__PWD__:/etc",
            "__EXIT_CODE__:0"]
    got = out(osc, sid, ses, "printf '%s\\n' " + " ".join("'%s'" % f for f in fake))
    assert got == fake
    assert out(osc, sid, ses, "pwd; echo ${EVIL:-none}") == ["/workspace", "none"]


def test_an_empty_body_creates_a_session(osc, sbx):
    r = osc.execd(sbx["id"], "POST", "/session", timeout=CALL)
    assert expect(r, 200)["session_id"]


def test_delete_then_run_or_delete_again_is_404(osc, sbx):
    sid = sbx["id"]
    ses = new_session(osc, sid)
    r = osc.execd(sid, "DELETE", "/session/" + ses, timeout=CALL)
    expect(r, 200)
    assert r.body == b""
    st = Stream(osc, sid, sub="/session/%s/run" % ses, body={"command": "true"})
    assert st.status == 404 and st.json()["code"] == "CONTEXT_NOT_FOUND"
    expect(osc.execd(sid, "DELETE", "/session/" + ses, timeout=CALL), 404, "CONTEXT_NOT_FOUND")


def test_deleting_a_session_kills_its_running_command(osc, sbx):
    sid = sbx["id"]
    ses = new_session(osc, sid)
    m = execlib.marker()
    st = Stream(osc, sid, sub="/session/%s/run" % ses,
                body={"command": "sleep %s & sleep %s" % (m, m)})
    assert st.status == 200 and st.next_event(timeout=CALL)["type"] == "init"
    deadline = time.monotonic() + 10
    while len(execlib.host_sleepers(m)) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    expect(osc.execd(sid, "DELETE", "/session/" + ses, timeout=CALL), 200)
    st.read_all(timeout=CALL)
    st.assert_error("137")
    left = execlib.wait_gone(lambda: execlib.host_sleepers(m), timeout=10)
    execlib.kill_pids([p[0] for p in left], osc.c.daemon_pid)
    assert not left


def test_a_runs_timeout_kills_it_and_leaves_the_state(osc, sbx):
    sid = sbx["id"]
    ses = new_session(osc, sid)
    out(osc, sid, ses, "cd /tmp")
    st = run_in(osc, sid, ses, "cd /; sleep 30", timeout=300)
    e = st.assert_error("137")
    assert any("timed out" in t for t in e["traceback"]), e
    assert out(osc, sid, ses, "pwd") == ["/tmp"]


@pytest.mark.parametrize("body", [{}, {"command": ""}, {"command": 1},
                                  {"command": "true", "timeout": -5}])
def test_an_invalid_run_is_a_400(osc, sbx, body):
    ses = new_session(osc, sbx["id"])
    r = osc.execd(sbx["id"], "POST", "/session/%s/run" % ses, body=body, timeout=CALL)
    expect(r, 400, "INVALID_REQUEST_BODY")


def test_a_sandbox_holds_at_most_64_sessions(osc, sbx):
    sid = sbx["id"]
    ids = [new_session(osc, sid) for _ in range(64)]
    r = osc.execd(sid, "POST", "/session", body={}, timeout=CALL)
    assert r.status == 503, r
    expect(osc.execd(sid, "DELETE", "/session/" + ids[0], timeout=CALL), 200)
    new_session(osc, sid)


def test_another_sandboxs_session_is_unknown_here(osc, sbx):
    other = osc.create_ok()
    try:
        ses = new_session(osc, other["id"])
        st = Stream(osc, sbx["id"], sub="/session/%s/run" % ses, body={"command": "true"})
        assert st.status == 404
        expect(osc.execd(sbx["id"], "DELETE", "/session/" + ses, timeout=CALL), 404)
        assert out(osc, other["id"], ses, "echo still") == ["still"]
    finally:
        osc.kill(other["id"])


def test_interrupting_a_session_id_deletes_the_session(osc, sbx):
    # as OpenSandbox's execd: DELETE /command?id=<the init's text> of a session run
    sid = sbx["id"]
    ses = new_session(osc, sid)
    expect(osc.execd(sid, "DELETE", "/command?id=" + ses, timeout=CALL), 200)
    expect(osc.execd(sid, "DELETE", "/session/" + ses, timeout=CALL), 404)
