"""SSE helpers for the OpenSandbox execd contract tests (test_os_command*.py, test_os_session*.py,
test_os_metrics*.py): a POST /command (or a session's run) read event by event as the events
arrive, each checked against OPENSANDBOX.md section 3.1 and the YAML's ServerStreamEvent before
the test looks at it.

Every event is one JSON object on one line followed by a blank line (`{...}\\n\\n`), with `type`
and `timestamp` (Unix ms); the stream's headers are `Content-Type: text/event-stream`,
`Cache-Control: no-cache`, `X-Accel-Buffering: no` and one `X-Request-ID`. A non-200 answer
goes through oslib's invariants (a `{code, message}` body). Every wait is bounded: the socket
has a per-read timeout and every loop a deadline (a `ping` comes after 3 s of silence, so a
15 s read timeout is only hit by a broken daemon).

Python stdlib + oslib (PyYAML, jsonschema).
"""
import http.client
import json
import time

import oslib
import shlib

READ_TIMEOUT = 15.0
FINAL = ("execution_complete", "error")


def _event_validator():
    doc, schema = oslib.component_schema("execd", "ServerStreamEvent")
    return doc, schema


def decode_text(s):
    """The bytes a `text` carries: valid UTF-8 as is, an invalid byte as U+DCxx (surrogateescape,
    docs/opensandbox.md)."""
    return s.encode("utf-8", "surrogateescape")


class Stream:
    """One streamed execd request, read event by event.

    After reading: status, headers, body (non-200 only), events [(t, dict)], final (the
    execution_complete or error event, or None), cut (ended without a final event)."""

    def __init__(self, osc, sid, sub="/command", body=None, read_timeout=READ_TIMEOUT,
                 headers=None, raw=None):
        self.osc = osc
        self.path = "/v1/sandboxes/%s/proxy/%d%s" % (oslib.q(sid), oslib.EXECD_PORT, sub)
        self.conn = http.client.HTTPConnection(osc.host, osc.port, timeout=read_timeout)
        data = raw if raw is not None else json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json", "Accept": "text/event-stream",
                "Content-Length": str(len(data))}
        hdrs.update(headers or {})
        self.t0 = time.monotonic()
        self.conn.request("POST", self.path, body=data, headers=hdrs)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = self.resp.getheaders()
        self.events = []
        self.final = None
        self.cut = False
        self.body = None
        self._buf = b""
        self._eof = False
        if self.status != 200:
            self.body = self.resp.read()
            self.conn.close()
            self._eof = True
            r = shlib.Resp(self.status, self.headers, self.body)
            oslib.check_invariants("POST", self.path, r)
            return
        self._check_headers()

    def header_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def header(self, name):
        v = self.header_all(name)
        return v[0] if v else None

    def json(self):
        return json.loads(self.body)

    def _check_headers(self):
        ct = (self.header("Content-Type") or "").split(";")[0].strip()
        assert ct == "text/event-stream", "stream Content-Type %r" % (ct,)
        assert self.header("Cache-Control") == "no-cache", self.headers
        assert self.header("X-Accel-Buffering") == "no", self.headers
        ids = self.header_all("X-Request-ID")
        assert len(ids) == 1 and ids[0], "X-Request-ID once on a stream: %r" % (ids,)

    def _fill(self):
        try:
            data = self.resp.read1(65536)
        except (http.client.IncompleteRead, ConnectionError, OSError):
            data = b""
            self.cut = True
        if not data:
            self._eof = True
        self._buf += data

    def _check(self, ev):
        doc, schema = _event_validator()
        oslib.validate_schema(doc, schema, ev, "event")
        assert isinstance(ev.get("type"), str), ev
        assert isinstance(ev.get("timestamp"), int) and ev["timestamp"] > 1.6e12, \
            "timestamp in Unix ms: %r" % (ev,)
        now = time.time() * 1000
        assert abs(now - ev["timestamp"]) < 120000, "timestamp far from now: %r" % (ev,)
        t = ev["type"]
        if t in ("init", "stdout", "stderr", "ping"):
            assert isinstance(ev.get("text"), str) and ev["text"] != "", \
                "%s carries a non-empty text: %r" % (t, ev)
        if t == "ping":
            assert ev["text"] == "pong", ev
        if t == "execution_complete":
            assert isinstance(ev.get("execution_time"), int) and ev["execution_time"] >= 0, ev
            assert "error" not in ev, ev
        if t == "error":
            e = ev.get("error")
            assert isinstance(e, dict) and e.get("ename") == "CommandExecError", ev
            assert isinstance(e.get("evalue"), str) and e["evalue"], ev
            assert isinstance(e.get("traceback"), list) and \
                all(isinstance(x, str) for x in e["traceback"]), ev

    def next_event(self, timeout=60.0):
        """The next event, or None at the end of the stream."""
        deadline = time.monotonic() + timeout
        while True:
            i = self._buf.find(b"\n\n")
            if i >= 0:
                raw, self._buf = self._buf[:i], self._buf[i + 2:]
                assert b"\n" not in raw, "an event is one line: %r" % raw[:300]
                ev = json.loads(raw.decode("utf-8"))
                assert isinstance(ev, dict), raw[:300]
                self._check(ev)
                assert self.final is None, "an event after the last one: %r" % (ev,)
                if self.events:
                    assert ev["timestamp"] >= self.events[-1][1]["timestamp"], \
                        "timestamps go back: %r" % (ev,)
                else:
                    assert ev["type"] == "init", "the first event is init: %r" % (ev,)
                self.events.append((time.monotonic(), ev))
                if ev["type"] in FINAL:
                    self.final = ev
                return ev
            if self._eof:
                assert self._buf.strip() == b"", "bytes after the last event: %r" % \
                    self._buf[:300]
                if self.final is None:
                    self.cut = True
                return None
            assert time.monotonic() < deadline, "no event within %ss" % timeout
            self._fill()

    def read_all(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while self.next_event(timeout=max(0.1, deadline - time.monotonic())) is not None:
            pass
        self.close()
        return self

    def close(self):
        try:
            self.conn.close()
        except OSError:
            pass

    def abort(self):
        """Vanish like a killed client: RST, no more reads."""
        import socket
        import struct
        try:
            s = self.conn.sock
            if s is not None:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close()

    # -- views ------------------------------------------------------------------------------
    @property
    def types(self):
        return [e["type"] for _, e in self.events]

    @property
    def id(self):
        return self.events[0][1]["text"] if self.events else None

    def texts(self, kind="stdout"):
        return [e["text"] for _, e in self.events if e["type"] == kind]

    def out_bytes(self, kind="stdout"):
        """The stream's lines of `kind` joined back as bytes (an event "\\n" is an empty line)."""
        parts = []
        for t in self.texts(kind):
            parts.append(b"" if t == "\n" else decode_text(t))
        return parts

    def assert_complete(self):
        assert self.final is not None and self.final["type"] == "execution_complete", \
            "expected execution_complete, got %r (events %r)" % (self.final, self.types)
        assert "error" not in self.types, self.types
        return self.final

    def assert_error(self, evalue=None):
        assert self.final is not None and self.final["type"] == "error", \
            "expected an error event, got %r (events %r)" % (self.final, self.types)
        assert "execution_complete" not in self.types, self.types
        if evalue is not None:
            assert self.final["error"]["evalue"] == evalue, self.final
        return self.final["error"]


def run(osc, sid, command, wait=60.0, **fields):
    """POST /command {command, **fields} to its end (read within `wait` s); the Stream."""
    body = {"command": command}
    body.update(fields)
    st = Stream(osc, sid, body=body)
    assert st.status == 200, "POST /command: %r %r" % (st.status, st.body)
    return st.read_all(timeout=wait)


def run_in(osc, sid, session, command, wait=60.0, **fields):
    """POST /session/{session}/run {command, **fields} to its end; the Stream."""
    body = {"command": command}
    body.update(fields)
    st = Stream(osc, sid, sub="/session/%s/run" % oslib.q(session), body=body)
    assert st.status == 200, "run in session: %r %r" % (st.status, st.body)
    return st.read_all(timeout=wait)


def stdout_of(osc, sid, command, **fields):
    """The stdout lines of a command that must succeed."""
    st = run(osc, sid, command, **fields)
    st.assert_complete()
    return st.texts("stdout")
