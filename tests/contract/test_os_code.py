"""OPENSANDBOX.md section 3.3, the code interpreter, over real HTTP: `POST /code/context`
({id, language}), `GET /code/contexts[?language=]`, `GET`/`DELETE /code/contexts/{id}` (404
CONTEXT_NOT_FOUND), `DELETE /code/contexts?language=` (required), `POST /code` streaming SSE as
section 3.1 (`init` = the context id, `stdout`/`stderr` per line, `execution_count`, `result`
MIME bundles, then `execution_complete` or `error` with the interpreter's own ename, evalue and
traceback), `DELETE /code?id=` (an interrupt: the context lives on). Python's state across
cells, its last expression, `_repr_html_`, exceptions, interrupts, a cell's timeout, a context
killed from outside; JavaScript and bash contexts; the stateless form; the settings
SANDBOX_HOST_CODE_CONTEXTS_MAX and SANDBOX_HOST_CODE_CONTEXT_IDLE."""
import threading
import time

import pytest

import codelib
import shlib
import sselib
from codelib import (CALL, CellStream, cell, contexts, new_context, ok, own_sandbox, text_result,
                     wait_for)
from oslib import expect

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")


# ---- contexts ---------------------------------------------------------------------------------

def test_a_context_is_made_got_listed_and_deleted(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    r = osc.execd(sid, "GET", "/code/contexts/" + cid, timeout=CALL)
    expect(r, 200)
    assert r.json() == {"id": cid, "language": "python"}
    assert {"id": cid, "language": "python"} in contexts(osc, sid)
    assert {"id": cid, "language": "python"} in contexts(osc, sid, "python")
    assert contexts(osc, sid, "bash") == []
    expect(osc.execd(sid, "DELETE", "/code/contexts/" + cid, timeout=CALL), 200)
    expect(osc.execd(sid, "GET", "/code/contexts/" + cid, timeout=CALL), 404, "CONTEXT_NOT_FOUND")
    expect(osc.execd(sid, "DELETE", "/code/contexts/" + cid, timeout=CALL), 404,
           "CONTEXT_NOT_FOUND")
    assert contexts(osc, sid) == []


def test_delete_by_language_ends_only_that_languages_contexts(osc, sbx):
    sid = sbx["id"]
    p1, p2 = new_context(osc, sid), new_context(osc, sid)
    b = new_context(osc, sid, "bash")
    expect(osc.execd(sid, "DELETE", "/code/contexts?language=python", timeout=CALL), 200)
    assert contexts(osc, sid) == [{"id": b, "language": "bash"}]
    for c in (p1, p2):
        expect(osc.execd(sid, "GET", "/code/contexts/" + c, timeout=CALL), 404)


def test_delete_by_language_needs_the_language(osc, sbx):
    expect(osc.execd(sbx["id"], "DELETE", "/code/contexts", timeout=CALL), 400, "MISSING_QUERY")


@pytest.mark.parametrize("body", [{}, {"language": 3}, {"language": "python", "cwd": 1}, []])
def test_a_malformed_create_is_a_400(osc, sbx, body):
    r = osc.execd(sbx["id"], "POST", "/code/context", body=body, timeout=CALL)
    expect(r, 400, "INVALID_REQUEST_BODY")


def test_an_unknown_language_is_a_400_naming_it(osc, sbx):
    r = osc.execd(sbx["id"], "POST", "/code/context", body={"language": "cobol"}, timeout=CALL)
    expect(r, 400, "INVALID_REQUEST")
    assert "cobol" in r.json()["message"]


def test_a_cwd_is_where_the_context_starts_and_a_missing_one_is_a_400(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid, cwd="/tmp")
    assert text_result(ok(osc, sid, "import os\nos.getcwd()", cid)) == "'/tmp'"
    r = new_context(osc, sid, cwd="/no/such/dir", status=400)
    expect(r, 400, "INVALID_REQUEST")
    assert "/no/such/dir" in r.json()["message"], r.json()


def test_the_default_cwd_is_the_workspace(osc, sbx):
    cid = new_context(osc, sbx["id"])
    assert text_result(ok(osc, sbx["id"], "import os\nos.getcwd()", cid)) == "'/workspace'"


def test_a_cell_in_an_unknown_context_is_a_404_before_any_stream(osc, sbx):
    st = CellStream(osc, sbx["id"], {"code": "1", "context": {"id": "nope"}})
    assert st.status == 404 and st.json()["code"] == "CONTEXT_NOT_FOUND", (st.status, st.body)


def test_an_interrupt_of_an_unknown_context_is_a_404_and_needs_an_id(osc, sbx):
    expect(osc.execd(sbx["id"], "DELETE", "/code?id=nope", timeout=CALL), 404,
           "CONTEXT_NOT_FOUND")
    expect(osc.execd(sbx["id"], "DELETE", "/code", timeout=CALL), 400, "MISSING_QUERY")


# ---- Python cells -------------------------------------------------------------------------------

def test_a_cell_streams_init_output_count_result_then_complete(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    st = ok(osc, sid, "print('hello')\nprint('world')\n1 + 2", cid)
    assert st.id == cid
    assert st.types == ["init", "stdout", "stdout", "execution_count", "result",
                        "execution_complete"], st.types
    assert st.texts() == ["hello", "world"]
    assert st.count() == 1
    assert st.results() == [{"text/plain": "3"}]
    assert st.final["execution_time"] >= 0


def test_state_is_kept_across_cells(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    ok(osc, sid, "x = 41\nimport json\nimport os\nos.chdir('/tmp')", cid)
    st = ok(osc, sid, "print(json.dumps({'x': x + 1}), os.getcwd())", cid)
    assert st.texts() == ['{"x": 42} /tmp']
    assert st.count() == 2
    assert ok(osc, sid, "x", cid).count() == 3


def test_a_statement_last_gives_no_result(osc, sbx):
    cid = new_context(osc, sbx["id"])
    st = ok(osc, sbx["id"], "y = 5", cid)
    assert st.results() == [] and st.types == ["init", "execution_count",
                                                "execution_complete"], st.types


def test_stderr_is_its_own_stream(osc, sbx):
    cid = new_context(osc, sbx["id"])
    st = ok(osc, sbx["id"], "import sys\nprint('oops', file=sys.stderr)", cid)
    assert st.texts("stderr") == ["oops"]


def test_a_repr_html_object_gives_text_html_beside_text_plain(osc, sbx):
    cid = new_context(osc, sbx["id"])
    code = ("class T:\n"
            "    def _repr_html_(self):\n"
            "        return '<b>bold</b>'\n"
            "    def __repr__(self):\n"
            "        return 'T()'\n"
            "T()")
    r = ok(osc, sbx["id"], code, cid).results()
    assert r == [{"text/plain": "T()", "text/html": "<b>bold</b>"}], r


def test_an_exception_is_an_error_with_the_interpreters_ename_evalue_and_traceback(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    st = cell(osc, sid, "def f():\n    return 1 / 0\nprint('before')\nf()", cid)
    e = st.assert_error()
    assert e["ename"] == "ZeroDivisionError" and e["evalue"] == "division by zero", e
    assert e["traceback"] and any("f()" in line or "in f" in line for line in e["traceback"]), e
    assert not any("driver" in line for line in e["traceback"]), e["traceback"]
    assert st.texts() == ["before"]
    assert st.types.count("error") == 1 and "execution_count" in st.types
    # the context lives on
    assert text_result(ok(osc, sid, "2 * 21", cid)) == "42"


def test_a_matplotlib_figure_left_open_is_an_image_png(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    probe = cell(osc, sid, "import importlib.util\nimportlib.util.find_spec('matplotlib') "
                           "is not None", cid)
    if text_result(probe) != "True":
        pytest.skip("the test image's python3 has no matplotlib")
    st = ok(osc, sid, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nNone", cid)
    pngs = [r["image/png"] for r in st.results() if "image/png" in r]
    assert pngs, st.results()
    import base64
    assert base64.b64decode(pngs[0])[:8] == b"\x89PNG\r\n\x1a\n"


# ---- interrupts, timeouts, deaths ---------------------------------------------------------------

def _start_cell(osc, sid, cid, code, **fields):
    """A cell's stream read in a thread: (thread, holder) where holder['st'] is its Stream."""
    holder = {}

    def run():
        holder["st"] = cell(osc, sid, code, cid, **fields)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, holder


def test_an_interrupt_ends_a_busy_loop_with_keyboardinterrupt_and_the_context_lives(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    t, h = _start_cell(osc, sid, cid, "n = 0\nprint('spinning', flush=True)\nwhile True:\n"
                                      "    n += 1")
    time.sleep(1.0)  # the cell runs (an interrupt before it would be a no-op)
    expect(osc.execd(sid, "DELETE", "/code?id=" + cid, timeout=CALL), 200)
    t.join(30)
    assert not t.is_alive()
    e = h["st"].assert_error()
    assert e["ename"] == "KeyboardInterrupt", e
    assert h["st"].texts() == ["spinning"]
    st = ok(osc, sid, "n > 0", cid)
    assert text_result(st) == "True" and st.count() == 2


def test_an_interrupt_of_an_idle_context_is_harmless(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    expect(osc.execd(sid, "DELETE", "/code?id=" + cid, timeout=CALL), 200)
    time.sleep(0.3)
    assert text_result(ok(osc, sid, "1", cid)) == "1"


def test_a_second_cell_while_one_runs_is_refused(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    t, h = _start_cell(osc, sid, cid, "import time\ntime.sleep(3)")
    time.sleep(0.8)
    st = CellStream(osc, sid, {"code": "1", "context": {"id": cid}})
    assert st.status == 409, (st.status, st.body)
    assert "runs a cell" in st.json()["message"]
    t.join(30)
    h["st"].assert_complete()


def test_a_cells_timeout_interrupts_it_and_the_context_lives(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    st = cell(osc, sid, "while True:\n    pass", cid, timeout=1000)
    assert st.assert_error()["ename"] == "KeyboardInterrupt"
    assert text_result(ok(osc, sid, "'alive'", cid)) == "'alive'"


def test_a_cell_that_ignores_its_interrupt_ends_its_context_after_the_grace(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    code = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "while True:\n    time.sleep(0.05)")
    t0 = time.monotonic()
    st = cell(osc, sid, code, cid, timeout=500)
    e = st.assert_error()
    assert e["ename"] == "ContextDied" and "interrupt" in e["evalue"], e
    assert time.monotonic() - t0 < 20
    st2 = CellStream(osc, sid, {"code": "1", "context": {"id": cid}})
    assert st2.status == 409, (st2.status, st2.body)


def test_a_client_gone_interrupts_its_cell_and_the_context_lives(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    st = CellStream(osc, sid, {"code": "n = 0\nprint('go', flush=True)\nwhile True:\n"
                                       "    n += 1", "context": {"id": cid}})
    assert st.status == 200
    while st.next_event(timeout=30)["type"] != "stdout":
        pass
    st.abort()

    def usable():
        s = CellStream(osc, sid, {"code": "n > 0", "context": {"id": cid}})
        if s.status != 200:
            return False
        s.read_all()
        return text_result(s) == "True"

    assert wait_for(usable, timeout=20)


def test_a_client_gone_from_a_cell_deaf_to_interrupts_kills_its_context(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    code = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "print('go', flush=True)\nwhile True:\n    time.sleep(0.05)")
    st = CellStream(osc, sid, {"code": code, "context": {"id": cid}})
    while st.next_event(timeout=30)["type"] != "stdout":
        pass
    st.abort()

    def dead():
        s = CellStream(osc, sid, {"code": "1", "context": {"id": cid}})
        if s.status == 200:
            s.read_all()
        return s.status == 409 and "went away" in s.json()["message"]

    assert wait_for(dead, timeout=20)


def test_a_context_killed_from_outside_is_reported_on_its_running_cell(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    pid = text_result(ok(osc, sid, "import os\nos.getpid()", cid))
    t, h = _start_cell(osc, sid, cid, "import time\ntime.sleep(60)")
    time.sleep(0.8)
    sselib.run(osc, sid, "kill -9 %s" % pid).assert_complete()
    t.join(30)
    assert not t.is_alive()
    e = h["st"].assert_error()
    assert e["ename"] == "ContextDied" and "signal 9" in e["evalue"], e
    st = CellStream(osc, sid, {"code": "1", "context": {"id": cid}})
    assert st.status == 409 and "signal 9" in st.json()["message"], (st.status, st.body)


def test_exit_in_a_cell_ends_its_context(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid)
    st = cell(osc, sid, "import os\nos._exit(3)", cid)
    e = st.assert_error()
    assert e["ename"] == "ContextDied" and "3" in e["evalue"], e


# ---- other languages ----------------------------------------------------------------------------

def test_a_javascript_context_keeps_state_and_shows_the_last_value(osc, sbx):
    sid = sbx["id"]
    if not codelib.has_in_sandbox(osc, sid, "node"):
        pytest.skip("the test image has no node")
    cid = new_context(osc, sid, "javascript")
    ok(osc, sid, "var a = 20; console.log('set')", cid)
    st = ok(osc, sid, "a * 2 + 2", cid)
    assert text_result(st) == "42"
    e = cell(osc, sid, "null.x", cid).assert_error()
    assert e["ename"] == "TypeError" and e["traceback"], e


@pytest.mark.parametrize("language,code", [
    ("python", "import sys\nlen(sys.stdin.buffer.read())"),
    ("javascript", "require('fs').readFileSync(0).length"),
    ("bash", "wc -c"),
])
def test_a_cell_reads_nothing_of_the_cells_on_its_stdin(osc, sbx, language, code):
    """The driver moved its cells off fd 0 (node by reopening its pipes, which are the sandbox
    uid's): a cell that reads its stdin reads EOF at once, never the next cells."""
    sid = sbx["id"]
    if language == "javascript" and not codelib.has_in_sandbox(osc, sid, "node"):
        pytest.skip("the test image has no node")
    cid = new_context(osc, sid, language)
    st = ok(osc, sid, code, cid, timeout=20000)
    got = text_result(st) if language != "bash" else st.texts()[-1].strip()
    assert got == "0", st.events


def test_a_bash_context_keeps_variables_and_directory(osc, sbx):
    sid = sbx["id"]
    cid = new_context(osc, sid, "bash")
    ok(osc, sid, "X=7\ncd /tmp", cid)
    st = ok(osc, sid, "echo $X\npwd", cid)
    assert st.texts() == ["7", "/tmp"]
    e = cell(osc, sid, "false", cid).assert_error()
    assert e["ename"] == "CommandExecError" and e["evalue"] == "1", e
    assert ok(osc, sid, "echo still", cid).texts() == ["still"]


@pytest.mark.parametrize("language,binary", [("javascript", "node"), ("python", "python3")])
def test_a_missing_interpreter_is_a_400_naming_it(osc, language, binary):
    """A sandbox whose PATH finds no interpreter stands for an image without it."""
    sid = osc.create_ok(env={"PATH": "/nonexistent"})["id"]
    try:
        r = new_context(osc, sid, language, status=400)
        expect(r, 400, "INVALID_REQUEST")
        assert binary in r.json()["message"], r.json()
        assert codelib.contexts(osc, sid) == []
    finally:
        osc.kill(sid)


# ---- the stateless form ---------------------------------------------------------------------------

def test_a_cell_without_a_context_runs_in_one_of_its_own_that_ends_after_it(osc, sbx):
    sid = sbx["id"]
    st = ok(osc, sid, "import os\nprint(os.getpid())\n6 * 7")
    assert text_result(st) == "42" and st.count() == 1
    pid = st.texts()[0]
    assert contexts(osc, sid) == []
    assert wait_for(lambda: sselib.run(osc, sid, "kill -0 %s 2>/dev/null || echo gone" % pid)
                    .texts() == ["gone"])
    # and a second one starts afresh
    assert cell(osc, sid, "x").assert_error()["ename"] == "NameError"


def test_a_cell_without_a_context_takes_its_language(osc, sbx):
    st = ok(osc, sbx["id"], "echo from bash", language="bash")
    assert st.texts() == ["from bash"]


# ---- the settings -----------------------------------------------------------------------------------

def test_contexts_max_bounds_a_sandboxs_contexts(start_daemon):
    with own_sandbox(start_daemon, {"SANDBOX_HOST_CODE_CONTEXTS_MAX": "2"}) as (osc, sid):
        new_context(osc, sid)
        c2 = new_context(osc, sid)
        r = new_context(osc, sid, status=400)
        expect(r, 400, "INVALID_REQUEST")
        assert "SANDBOX_HOST_CODE_CONTEXTS_MAX" in r.json()["message"]
        st = CellStream(osc, sid, {"code": "1"})
        assert st.status == 400, (st.status, st.body)
        expect(osc.execd(sid, "DELETE", "/code/contexts/" + c2, timeout=CALL), 200)
        new_context(osc, sid)


def test_an_idle_context_is_ended_after_the_idle_setting(start_daemon):
    with own_sandbox(start_daemon, {"SANDBOX_HOST_CODE_CONTEXT_IDLE": "1s"}) as (osc, sid):
        cid = new_context(osc, sid)
        pid = text_result(ok(osc, sid, "import os\nos.getpid()", cid))
        assert wait_for(lambda: osc.execd(sid, "GET", "/code/contexts/" + cid,
                                          timeout=CALL).status == 404, timeout=20)
        assert wait_for(lambda: sselib.run(osc, sid, "kill -0 %s 2>/dev/null || echo gone"
                                           % pid).texts() == ["gone"])


def test_a_busy_context_is_not_ended_by_the_idle_timer(start_daemon):
    with own_sandbox(start_daemon, {"SANDBOX_HOST_CODE_CONTEXT_IDLE": "1s"}) as (osc, sid):
        cid = new_context(osc, sid)
        ok(osc, sid, "import time\ntime.sleep(2.5)", cid)


def test_contexts_end_with_their_sandbox(osc):
    sid = osc.create_ok()["id"]
    cid = new_context(osc, sid)
    t, h = _start_cell(osc, sid, cid, "import time\ntime.sleep(60)")
    time.sleep(0.8)
    osc.kill(sid)
    t.join(30)
    assert not t.is_alive()
    assert h["st"].final is None or h["st"].final["type"] == "error"
