"""OPENSANDBOX.md section 2.2, diagnostics: `GET …/diagnostics/logs?scope=` (lifecycle: the
daemon's log lines about this sandbox; container: the entrypoint's output; all) and
`…/diagnostics/events?scope=` (lifecycle, all: state transitions, one line each, with
times); inline delivery of the last 1 MiB (`truncated`); missing scope -> 400, another scope
-> 400 INVALID_REQUEST naming the supported ones."""
import re

import pytest

import execlib
import oslib
import shlib
from oslib import expect, expect_400

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

MIB = 1 << 20
TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}")


def logs(osc, sid, scope):
    return expect(osc.get("/v1/sandboxes/%s/diagnostics/logs?scope=%s" % (sid, scope)), 200)


def events(osc, sid, scope):
    return expect(osc.get("/v1/sandboxes/%s/diagnostics/events?scope=%s" % (sid, scope)), 200)


def assert_descriptor(j, sid, kind, scope):
    assert j["sandboxId"] == sid and j["kind"] == kind and j["scope"] == scope, j
    assert j["delivery"] == "inline", j
    assert j["contentType"].startswith("text/plain"), j
    assert isinstance(j["content"], str)
    assert "contentUrl" not in j and "expiresAt" not in j
    assert isinstance(j["truncated"], bool)


def wait_content(osc, sid, scope, needle, timeout=10.0):
    got = shlib.wait_until(lambda: needle in logs(osc, sid, scope)["content"], timeout=timeout)
    assert got, "%r never showed in scope %s: %r" % (needle, scope,
                                                     logs(osc, sid, scope)["content"][-500:])


@pytest.fixture
def talker(osc):
    m = oslib.uniq("said-")
    j = osc.create_ok(entrypoint=["sh", "-c", "echo %s-out; echo %s-err >&2; exec tail -f "
                                              "/dev/null" % (m, m)])
    yield j, m
    osc.kill(j["id"])


def test_lifecycle_logs_are_the_daemons_lines_about_this_sandbox(osc, sbx):
    j = logs(osc, sbx["id"], "lifecycle")
    assert_descriptor(j, sbx["id"], "logs", "lifecycle")
    assert j["content"].strip(), "a created sandbox has lifecycle log lines"
    assert j["truncated"] is False
    other = osc.create_ok()
    try:
        # INTERPRETATION: "about this sandbox": no line names another sandbox
        assert other["id"] not in j["content"]
        assert other["id"] not in logs(osc, sbx["id"], "lifecycle")["content"]
    finally:
        osc.kill(other["id"])


def test_container_logs_are_the_entrypoints_output(osc, talker):
    j, m = talker
    wait_content(osc, j["id"], "container", m + "-out")
    wait_content(osc, j["id"], "container", m + "-err")
    d = logs(osc, j["id"], "container")
    assert_descriptor(d, j["id"], "logs", "container")


def test_all_logs_hold_both_scopes(osc, talker):
    j, m = talker
    wait_content(osc, j["id"], "container", m + "-out")
    a = logs(osc, j["id"], "all")
    assert_descriptor(a, j["id"], "logs", "all")
    assert m + "-out" in a["content"]
    container = logs(osc, j["id"], "container")["content"]
    # the lifecycle lines are there too
    assert len(a["content"]) > len(container), a


def test_events_are_state_transitions_one_line_each_with_times(osc, sbx):
    sid = sbx["id"]
    expect(osc.post("/v1/sandboxes/%s/pause" % sid), 202)
    osc.wait_state(sid, "Paused")
    expect(osc.post("/v1/sandboxes/%s/resume" % sid), 202)
    osc.wait_state(sid, "Running")
    for scope in ("lifecycle", "all"):
        e = events(osc, sid, scope)
        assert_descriptor(e, sid, "events", scope)
        lines = [ln for ln in e["content"].splitlines() if ln.strip()]
        assert all(TIME_RE.search(ln) for ln in lines), lines
        text = "\n".join(lines)
        # Pausing, Paused, Resuming, Running again: one line per transition, in order
        # (INTERPRETATION: how the create itself shows is left open: Pending -> Running or not)
        at = [text.find("Pausing"), text.find("Paused"), text.find("Resuming"),
              text.rfind("Running")]
        assert all(i >= 0 for i in at) and at == sorted(at), text


def test_container_output_is_cut_to_the_last_mib(osc):
    j = osc.create_ok(entrypoint=["sh", "-c", "yes 0123456789abcdefghijklmnopqrstuvwxyz | "
                                              "head -c 3000000; echo; echo END-OF-OUTPUT; "
                                              "exec tail -f /dev/null"])
    sid = j["id"]
    try:
        wait_content(osc, sid, "container", "END-OF-OUTPUT", timeout=20)
        d = logs(osc, sid, "container")
        assert d["truncated"] is True
        n = len(d["content"].encode("utf-8"))
        assert MIB - 200 <= n <= MIB, "the last 1 MiB inline, got %d bytes" % n
        assert d["content"].rstrip().endswith("END-OF-OUTPUT")
        if "contentLength" in d:
            assert d["contentLength"] == n
        a = logs(osc, sid, "all")
        assert a["truncated"] is True and len(a["content"].encode()) <= MIB
    finally:
        osc.kill(sid)


def test_small_output_is_not_truncated(osc, talker):
    j, m = talker
    wait_content(osc, j["id"], "container", m + "-err")
    assert logs(osc, j["id"], "container")["truncated"] is False


@pytest.mark.parametrize("kind", ["logs", "events"])
def test_missing_scope_is_400(osc, sbx, kind):
    r = osc.get("/v1/sandboxes/%s/diagnostics/%s" % (sbx["id"], kind))
    assert r.status == 400, r
    r = osc.get("/v1/sandboxes/%s/diagnostics/%s?scope=" % (sbx["id"], kind))
    assert r.status == 400, r


@pytest.mark.parametrize("kind,scope,supported", [
    ("logs", "runtime", ("lifecycle", "container", "all")),
    ("logs", "network", ("lifecycle", "container", "all")),
    ("events", "container", ("lifecycle", "all")),
    ("events", "runtime", ("lifecycle", "all")),
])
def test_another_scope_is_400_invalid_request_naming_the_supported_ones(osc, sbx, kind, scope,
                                                                        supported):
    r = osc.get("/v1/sandboxes/%s/diagnostics/%s?scope=%s" % (sbx["id"], kind, scope))
    e = expect_400(r)
    for s in supported:
        assert s in e["message"], e


def test_diagnostics_of_a_deleted_sandbox_are_404(osc):
    j = osc.create_ok()
    expect(osc.delete("/v1/sandboxes/" + j["id"]), 204)
    expect(osc.get("/v1/sandboxes/%s/diagnostics/logs?scope=all" % j["id"]), 404,
           "SANDBOX_NOT_FOUND")
    expect(osc.get("/v1/sandboxes/%s/diagnostics/events?scope=all" % j["id"]), 404,
           "SANDBOX_NOT_FOUND")


def test_output_that_is_not_utf8_comes_back_as_valid_text(osc):
    """The entrypoint's bytes are anything: what is not UTF-8 (and NUL) is shown as '?', one
    for one, so that the answer is valid JSON text."""
    j = osc.create_ok(entrypoint=["sh", "-c", "printf 'a\\377\\376b\\000c caf\\303\\251 END\\n'; "
                                              "exec tail -f /dev/null"])
    try:
        wait_content(osc, j["id"], "container", "END")
        c = logs(osc, j["id"], "container")["content"]
        assert "a??b?c café END\n" in c, repr(c)
    finally:
        osc.kill(j["id"])


def test_lifecycle_logs_hold_the_daemons_lines_about_the_sandbox_from_every_surface(daemon, osc,
                                                                                     sbx):
    """Lines about the sandbox that the /v1 surface did not write itself are there too: a
    native exec's access-log line names the sandbox."""
    execlib.ok(osc.native(sbx["id"]), ["true"])
    assert shlib.wait_until(lambda: "/exec" in logs(osc, sbx["id"], "lifecycle")["content"],
                            timeout=10)


def test_events_of_a_sandbox_made_from_a_create_start_with_its_start(osc, sbx):
    e = events(osc, sbx["id"], "lifecycle")["content"]
    assert "-> Running" in e.splitlines()[0], e
