"""Structured logs (issue 2, point 4): apart from the one `listening on` line, standard error
is one JSON object per line with time, level and event; every finished request logs method,
path, status and duration, and the sandbox id when it concerns one."""
import json
import re

import shlib

TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_stderr_is_json_lines_with_request_and_sandbox_fields():
    with shlib.running() as d:  # stopped at the end of the block, exit 0
        r = d.client.create({})
        assert r.status == 200, r
        rid = r.json()["remote_id"]
        assert d.client.get(f"/sandboxes/{rid}/exists?path=x").status == 200
        assert d.client.get("/no/such/route").status == 404
    lines = [ln for ln in d.stderr_text().splitlines() if ln.strip()]
    assert sum(1 for ln in lines if ln.startswith("listening on http://")) == 1
    objs = []
    for ln in lines:
        if ln.startswith("listening on http://"):
            continue
        o = json.loads(ln)  # every other line is one JSON object
        assert isinstance(o, dict), ln
        assert TIME_RE.match(o["time"]), ln
        assert o["level"] in ("debug", "info", "warn", "error"), ln
        assert isinstance(o["event"], str) and o["event"], ln
        objs.append(o)
    reqs = [o for o in objs if o["event"] == "request"]
    exists = [o for o in reqs if o["path"] == f"/sandboxes/{rid}/exists"]
    assert exists, reqs
    e = exists[0]
    assert e["method"] == "GET" and e["status"] == 200 and e["sandbox"] == rid
    assert isinstance(e["duration_ms"], (int, float)) and e["duration_ms"] >= 0
    nf = [o for o in reqs if o["path"] == "/no/such/route"]
    assert nf and nf[0]["status"] == 404 and "sandbox" not in nf[0]
    assert any(o["event"] == "sandbox-created" and o.get("sandbox") == rid for o in objs)
    assert any(o["event"] == "shutdown" for o in objs)
