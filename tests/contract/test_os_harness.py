"""Sanity checks of the OpenSandbox-surface test harness itself (oslib.py): the YAML shapes
load and every `$ref` resolves, the validator accepts the YAML's own examples and rejects
broken answers, the section 1 invariant checker catches what it must, and paths map to the
right YAML operation. These pass without any /v1 code in the daemon; the daemon checks use
native routes only."""
import json
import os

import pytest

import oslib
import shlib

SHARED_SPECS = oslib.SPEC_DIR.parents[3].parent / "shared" / "opensandbox"


def test_spec_copy_equals_the_shared_folder():
    if not SHARED_SPECS.is_dir():
        pytest.skip("no shared/opensandbox beside the repository (%s)" % SHARED_SPECS)
    for f in sorted(SHARED_SPECS.iterdir()):
        if f.is_file():
            mine = oslib.SPEC_DIR / f.name
            assert mine.is_file(), "specs copy lacks %s" % f.name
            assert mine.read_bytes() == f.read_bytes(), "%s differs from %s" % (mine, f)


@pytest.mark.parametrize("name", sorted(oslib.SPEC_FILES))
def test_every_ref_of_the_yaml_resolves(name):
    doc = oslib.spec(name)
    refs = []

    def walk(o):
        if isinstance(o, dict):
            if "$ref" in o:
                refs.append(o["$ref"])
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(doc)
    assert refs
    for r in refs:
        assert isinstance(oslib.deref(doc, {"$ref": r}), dict), r


def _examples():
    """(spec, schema, example value, label) for every media-type example in the YAML files."""
    out = []
    for name in sorted(oslib.SPEC_FILES):
        doc = oslib.spec(name)
        for tpl, item in doc["paths"].items():
            for method, op in item.items():
                if not isinstance(op, dict):
                    continue
                media = []
                rb = op.get("requestBody")
                if rb:
                    media += list(oslib.deref(doc, rb).get("content", {}).items())
                for st, robj in op.get("responses", {}).items():
                    media += list(oslib.deref(doc, robj).get("content", {}).items())
                for ct, m in media:
                    if ct != "application/json" or "schema" not in m:
                        continue
                    for ex_name, ex in (m.get("examples") or {}).items():
                        if "value" in ex:
                            out.append((name, m["schema"], ex["value"],
                                        "%s %s %s %s" % (name, method, tpl, ex_name)))
    return out


EXAMPLES = _examples()


def test_yaml_has_examples_to_check_the_validator_with():
    assert len(EXAMPLES) >= 10, len(EXAMPLES)


@pytest.mark.parametrize("name,schema,value,label", EXAMPLES, ids=[e[3] for e in EXAMPLES])
def test_validator_accepts_the_yamls_own_examples(name, schema, value, label):
    oslib.validate_schema(oslib.spec(name), schema, value, label)


def _sandbox_ok():
    return {"id": "x", "status": {"state": "Running"}, "createdAt": "2026-01-02T03:04:05Z",
            "entrypoint": ["tail", "-f", "/dev/null"]}


def test_validator_accepts_a_minimal_sandbox():
    doc, s = oslib.component_schema("lifecycle", "Sandbox")
    oslib.validate_schema(doc, s, _sandbox_ok())


@pytest.mark.parametrize("breakage", ["no id", "bad time", "state not string", "entrypoint str",
                                      "metadata int", "expiresAt null"])
def test_validator_rejects_a_broken_sandbox(breakage):
    doc, s = oslib.component_schema("lifecycle", "Sandbox")
    b = _sandbox_ok()
    if breakage == "no id":
        del b["id"]
    elif breakage == "bad time":
        b["createdAt"] = "yesterday"
    elif breakage == "state not string":
        b["status"]["state"] = 3
    elif breakage == "entrypoint str":
        b["entrypoint"] = "tail -f /dev/null"
    elif breakage == "metadata int":
        b["metadata"] = {"a": 1}
    elif breakage == "expiresAt null":
        b["expiresAt"] = None
    with pytest.raises(AssertionError):
        oslib.validate_schema(doc, s, b)


def test_validator_rejects_extra_fields_where_the_yaml_forbids_them():
    doc, s = oslib.component_schema("lifecycle", "ErrorResponse")
    oslib.validate_schema(doc, s, {"code": "X", "message": "m"})
    with pytest.raises(AssertionError):
        oslib.validate_schema(doc, s, {"code": "X", "message": "m", "detail": "d"})
    doc, s = oslib.component_schema("lifecycle", "Endpoint")
    with pytest.raises(AssertionError):
        oslib.validate_schema(doc, s, {"endpoint": "h/p", "url": "x"})


@pytest.mark.parametrize("method,path,want", [
    ("GET", "/v1/sandboxes", ("lifecycle", "/sandboxes")),
    ("POST", "/v1/sandboxes", ("lifecycle", "/sandboxes")),
    ("GET", "/v1/sandboxes/abc", ("lifecycle", "/sandboxes/{sandboxId}")),
    ("PATCH", "/v1/sandboxes/abc/metadata", ("lifecycle", "/sandboxes/{sandboxId}/metadata")),
    ("GET", "/v1/sandboxes/abc/endpoints/44772",
     ("lifecycle", "/sandboxes/{sandboxId}/endpoints/{port}")),
    ("GET", "/v1/snapshots/s1", ("lifecycle", "/snapshots/{snapshotId}")),
    ("GET", "/v1/sandboxes/abc/diagnostics/logs",
     ("diagnostics", "/sandboxes/{sandboxId}/diagnostics/logs")),
    ("GET", "/v1/sandboxes/abc/proxy/44772/ping", ("execd", "/ping")),
    ("GET", "/v1/sandboxes/abc/proxy/18080/policy", ("egress", "/policy")),
])
def test_paths_map_to_their_yaml_operation(method, path, want):
    doc, tpl, op = oslib.operation(method, path)
    assert doc is oslib.spec(want[0]) and tpl == want[1] and op is not None, (tpl, op)


def test_routes_outside_the_yaml_map_to_no_operation():
    assert oslib.operation("POST", "/v1/metrics/events") == (oslib.spec("lifecycle"), None, None)
    assert oslib.locate("/v1/sandboxes/a/proxy/8080/x") == (None, None)


def _resp(status, body=b"", headers=()):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        headers = list(headers) + [("Content-Type", "application/json")]
    return shlib.Resp(status, list(headers), body)


def test_invariants_catch_a_native_404():
    r = _resp(404, {"error": "NotFound", "detail": "no such route"})
    with pytest.raises(oslib.NativeAnswer):
        oslib.check_invariants("GET", "/v1/sandboxes", r)


@pytest.mark.parametrize("case", ["no request id", "two request ids", "empty error",
                                  "error without message", "empty 2xx without length",
                                  "request id not echoed", "bad shape"])
def test_invariants_catch_each_broken_rule(case):
    rid = [("X-Request-ID", "r1")]
    sent = None
    if case == "no request id":
        r = _resp(200, {"items": [], "pagination": {}})
    elif case == "two request ids":
        r = _resp(204, b"", rid + rid + [("Content-Length", "0")])
    elif case == "empty error":
        r = _resp(404, b"", rid)
    elif case == "error without message":
        r = _resp(404, {"code": "SANDBOX_NOT_FOUND", "message": ""}, rid)
    elif case == "empty 2xx without length":
        r = _resp(204, b"", rid)
    elif case == "request id not echoed":
        r = _resp(204, b"", rid + [("Content-Length", "0")])
        sent = "mine"
    else:
        r = _resp(200, {"id": "x"}, rid)
    with pytest.raises(AssertionError):
        oslib.check_invariants("GET" if case == "bad shape" else "DELETE",
                               "/v1/sandboxes/x" if case != "no request id" else "/v1/sandboxes",
                               r, sent)


def test_invariants_accept_a_well_formed_answer():
    rid = [("X-Request-ID", "r1")]
    oslib.check_invariants("DELETE", "/v1/sandboxes/x", _resp(204, b"", rid + [("Content-Length",
                                                                                  "0")]), "r1")
    oslib.check_invariants("GET", "/v1/sandboxes/x",
                           _resp(404, {"code": "SANDBOX_NOT_FOUND", "message": "no"}, rid))
    oslib.check_invariants("GET", "/v1/sandboxes/x", _resp(200, _sandbox_ok(), rid))


@pytest.mark.parametrize("s", ["2026-01-02T03:04:05Z", "2026-01-02T03:04:05.123Z",
                               "2026-01-02T03:04:05.123456789+02:00", "2026-01-02t03:04:05z"])
def test_rfc3339_parser(s):
    t = oslib.parse_time(s)
    assert t.tzinfo is not None and t.year == 2026


def test_rfc3339_parser_rejects_non_rfc3339():
    for s in ("2026-01-02 03:04:05Z", "2026-01-02T03:04:05", "1700000000", ""):
        with pytest.raises(AssertionError):
            oslib.parse_time(s)


def test_daemon_harness_native_routes_work(daemon):
    """The shared daemon starts on port 0 and speaks the native contract (no /v1 needed)."""
    c = daemon.client
    assert c.get("/healthz").status == 200
    s = c.new_sandbox()
    assert s.put_ok("a", b"x")
    assert s.delete().status == 204
    assert daemon.port > 0 and daemon.host == "127.0.0.1"


def test_inside_process_and_cgroup_helpers_on_a_native_sandbox(daemon):
    """The cgroup walk used by the limits tests finds a native sandbox's own limits."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    c = daemon.client
    s = c.new_sandbox()
    osc = oslib.os_client(daemon)
    p = oslib.InsideProcess(osc, s.rid)
    try:
        assert oslib.memory_limit_of(p.pid, daemon) == 1 << 30  # SANDBOX_HOST_MEMORY_MAX 1G
        assert abs(oslib.cpu_limit_of(p.pid, daemon) - 1.0) < 0.01  # SANDBOX_HOST_CPU_MAX 1
    finally:
        p.stop()
        s.delete()
