"""Helpers for the code interpreter's contract tests (test_os_code*.py; OPENSANDBOX.md section
3.3): contexts made and asked over real HTTP, a cell's SSE stream read event by event and
checked as sselib checks a command's (section 3.1), except that an `error` carries the
interpreter's own ename, and that `execution_count` and `result` events come before the end.

Python stdlib + oslib, sselib."""
import contextlib
import time

import oslib
import sselib
from oslib import expect

CALL = 30.0


def code_path(sid, sub):
    return "/v1/sandboxes/%s/proxy/%d%s" % (oslib.q(sid), oslib.EXECD_PORT, sub)


class CellStream(sselib.Stream):
    """POST /code read as a stream: events checked against the YAML's ServerStreamEvent."""

    def __init__(self, osc, sid, body, read_timeout=sselib.READ_TIMEOUT):
        super().__init__(osc, sid, sub="/code", body=body, read_timeout=read_timeout)

    def _check(self, ev):
        if ev.get("type") == "error":
            e = ev.get("error")
            assert isinstance(e, dict) and isinstance(e.get("ename"), str) and e["ename"], ev
            assert isinstance(e.get("evalue"), str), ev
            assert isinstance(e.get("traceback"), list) and \
                all(isinstance(x, str) for x in e["traceback"]), ev
            ev = dict(ev)
            ev["error"] = dict(e, ename="CommandExecError", evalue=e["evalue"] or "-")
        if ev.get("type") == "execution_count":
            assert isinstance(ev.get("execution_count"), int) and ev["execution_count"] >= 1, ev
        if ev.get("type") == "result":
            assert isinstance(ev.get("results"), dict), ev
            assert all(isinstance(k, str) and "/" in k for k in ev["results"]), ev
            assert isinstance(ev.get("execution_count"), int), ev
        super()._check(ev)

    def results(self):
        return [e["results"] for _, e in self.events if e["type"] == "result"]

    def count(self):
        c = [e["execution_count"] for _, e in self.events if e["type"] == "execution_count"]
        assert len(c) == 1, self.types
        return c[0]


def new_context(osc, sid, language="python", cwd=None, status=200):
    body = {"language": language}
    if cwd is not None:
        body["cwd"] = cwd
    r = osc.execd(sid, "POST", "/code/context", body=body, timeout=CALL)
    if status != 200:
        return r
    expect(r, 200)
    j = r.json()
    assert j["language"] == language and isinstance(j["id"], str) and j["id"], j
    return j["id"]


def cell(osc, sid, code, ctx=None, language=None, wait=60.0, **fields):
    """POST /code {context, code} to its end; the CellStream (200 asserted)."""
    body = {"code": code}
    c = {}
    if ctx is not None:
        c["id"] = ctx
    if language is not None:
        c["language"] = language
    if c:
        body["context"] = c
    body.update(fields)
    st = CellStream(osc, sid, body)
    assert st.status == 200, "POST /code: %r %r" % (st.status, st.body)
    return st.read_all(timeout=wait)


def ok(osc, sid, code, ctx=None, **kw):
    st = cell(osc, sid, code, ctx=ctx, **kw)
    st.assert_complete()
    return st


def text_result(st):
    r = st.results()
    return r[-1].get("text/plain") if r else None


def has_in_sandbox(osc, sid, binary):
    st = sselib.run(osc, sid, "command -v %s >/dev/null && echo yes || echo no" % binary)
    return st.texts() == ["yes"]


def contexts(osc, sid, language=None):
    sub = "/code/contexts" + ("?language=" + language if language else "")
    r = osc.execd(sid, "GET", sub, timeout=CALL)
    expect(r, 200)
    return r.json()


@contextlib.contextmanager
def own_sandbox(start_daemon, env):
    """A daemon of the test's with `env`, and a /v1 sandbox on it: (osc, sandbox id)."""
    d = start_daemon(env=env)
    osc = oslib.os_client(d)
    sid = osc.create_ok()["id"]
    try:
        yield osc, sid
    finally:
        osc.kill(sid)


def wait_for(pred, timeout=20.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return pred()
