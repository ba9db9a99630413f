"""Helpers for the OpenSandbox-surface contract tests (tests/contract/test_os_*.py).

OPENSANDBOX.md (shared/) is the law; the shapes are OpenSandbox's own OpenAPI files, copied
unchanged in specs/opensandbox/ (from shared/opensandbox/, commit 3bb6fad3). Every answer of
the /v1 surface that goes through `OsClient` is checked against the rules that hold for every
answer (section 1) before the test looks at it:

- `X-Request-ID` on every answer, exactly once, non-empty; the request's own when it sent one;
- an error (status >= 400) is JSON `{code, message}` with a non-empty message (never empty:
  the SDK treats an empty error body as success);
- an empty 2xx carries exactly one `Content-Length: 0`;
- the body validates against the operation's response schema for that status, loaded from the
  YAML with every `$ref` resolved (errors against the file's ErrorResponse; the egress file
  types its errors as text/plain, which OPENSANDBOX.md section 1 overrides with JSON).

Python stdlib + PyYAML (python3-yaml) + jsonschema (python3-jsonschema 4.10).
"""
import datetime
import functools
import json
import os
import re
import time
import urllib.parse
from pathlib import Path

import jsonschema
import yaml

import execlib
import shlib

SPEC_DIR = Path(__file__).resolve().parent / "specs" / "opensandbox"
SPEC_FILES = {
    "lifecycle": "sandbox-lifecycle.yml",
    "execd": "execd-api.yaml",
    "egress": "egress-api.yaml",
    "diagnostics": "diagnostic-api.yml",
}
EXECD_PORT = 44772
EGRESS_PORT = 18080
TEST_API_KEY = "k3y-" + "0123456789abcdef" * 2  # SANDBOX_HOST_API_KEY of conftest's `keyd`

# What the SDK 0.1.11 sends for `Sandbox.create({image: "default"})` with every default
# (observed on the wire; tests/opensandbox/sdk_wire.test.mjs pins it).
SDK_DEFAULT_CREATE = {
    "image": {"uri": "default"},
    "entrypoint": ["tail", "-f", "/dev/null"],
    "resourceLimits": {"cpu": "1", "memory": "2Gi"},
    "secureAccess": False,
    "env": {},
    "metadata": {},
    "extensions": {},
    "timeout": 600,
}

LIFECYCLE_CODES = {
    "INVALID_REQUEST", "INVALID_METADATA_FORMAT", "INVALID_IMAGE", "NOT_SUPPORTED",
    "MISSING_API_KEY", "INVALID_API_KEY", "SANDBOX_NOT_FOUND", "SNAPSHOT_NOT_FOUND",
    "INVALID_STATE", "UNAVAILABLE", "INTERNAL",
}
STATES = {"Pending", "Running", "Pausing", "Paused", "Resuming", "Stopping", "Terminated",
          "Failed"}

RFC3339_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


# ---- times -------------------------------------------------------------------------------

def parse_time(s):
    """An RFC 3339 date-time (as the YAML's `format: date-time`) -> aware datetime."""
    m = RFC3339_RE.match(s) if isinstance(s, str) else None
    assert m, "not an RFC 3339 date-time: %r" % (s,)
    y, mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 7))
    us = int((m.group(7) or ".0")[1:7].ljust(6, "0"))
    z = m.group(8)
    if z in ("Z", "z"):
        tz = datetime.timezone.utc
    else:
        sign = 1 if z[0] == "+" else -1
        tz = datetime.timezone(sign * datetime.timedelta(hours=int(z[1:3]), minutes=int(z[4:6])))
    return datetime.datetime(y, mo, d, h, mi, sec, us, tzinfo=tz)


def rfc3339(dt):
    return dt.astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc)


def in_seconds(s):
    return rfc3339(utcnow() + datetime.timedelta(seconds=s))


# ---- the YAML specs ------------------------------------------------------------------------

def _is_date_time(v):
    if not isinstance(v, str):
        return True
    if not RFC3339_RE.match(v):
        return False
    try:
        parse_time(v)
    except (ValueError, AssertionError):
        return False
    return True


FORMATS = jsonschema.FormatChecker(formats=())
FORMATS.checks("date-time")(_is_date_time)


@functools.lru_cache(maxsize=None)
def spec(name):
    with open(SPEC_DIR / SPEC_FILES[name], encoding="utf-8") as f:
        return yaml.safe_load(f)


def deref(doc, obj):
    """Follow local `$ref`s (`#/components/...`) until a non-ref object."""
    seen = 0
    while isinstance(obj, dict) and "$ref" in obj:
        ref = obj["$ref"]
        assert ref.startswith("#/"), "non-local $ref %r" % ref
        node = doc
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        obj = node
        seen += 1
        assert seen < 50, "$ref loop at %r" % ref
    return obj


def validator(doc, schema):
    """A JSON Schema 2020-12 validator for `schema`, whose `$ref`s resolve inside `doc`."""
    resolver = jsonschema.RefResolver(base_uri="", referrer=doc)
    return jsonschema.Draft202012Validator(schema, resolver=resolver, format_checker=FORMATS)


def validate_schema(doc, schema, instance, what=""):
    errs = sorted(validator(doc, schema).iter_errors(instance), key=lambda e: list(e.path))
    if errs:
        lines = ["%s: %s at %s" % (what, e.message, "/".join(str(p) for p in e.absolute_path))
                 for e in errs[:8]]
        raise AssertionError("answer does not match the YAML schema:\n  " + "\n  ".join(lines)
                             + "\nbody: " + json.dumps(instance)[:1500])


def component_schema(name, schema_name):
    doc = spec(name)
    return doc, doc["components"]["schemas"][schema_name]


def _template_regex(tpl):
    parts = re.split(r"(\{[^{}]+\})", tpl)
    rx = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile("^" + rx + "$")


def locate(path):
    """(spec name, path inside that spec) for a /v1 path (no query), or (None, None) for a
    route no YAML describes (/v1/metrics/events)."""
    m = re.match(r"^/v1/sandboxes/[^/]+/proxy/(\d+)(/.*)?$", path)
    if m:
        sub = m.group(2) or "/"
        if m.group(1) == str(EXECD_PORT):
            return "execd", sub
        if m.group(1) == str(EGRESS_PORT):
            return "egress", sub
        return None, None
    if re.match(r"^/v1/sandboxes/[^/]+/diagnostics/", path):
        return "diagnostics", path[3:]
    if path.startswith("/v1/"):
        return "lifecycle", path[3:]
    return None, None


def operation(method, path):
    """(doc, template, operation object) or (doc-or-None, None, None)."""
    name, sub = locate(path)
    if name is None:
        return None, None, None
    doc = spec(name)
    cands = sorted(doc["paths"], key=lambda t: t.count("{"))
    for tpl in cands:
        if _template_regex(tpl).match(sub):
            op = doc["paths"][tpl].get(method.lower())
            return doc, tpl, op
    return doc, None, None


def error_schema(doc):
    """The ErrorResponse to check an error against: the file's own, else the lifecycle's
    (egress declares text/plain errors; OPENSANDBOX.md section 1 makes them JSON)."""
    if doc is not None and "ErrorResponse" in doc.get("components", {}).get("schemas", {}):
        return doc, doc["components"]["schemas"]["ErrorResponse"]
    return component_schema("lifecycle", "ErrorResponse")


def check_against_spec(method, path, resp):
    """Validate `resp` against the YAML operation of (method, path) for its status."""
    doc, tpl, op = operation(method, path)
    if resp.status >= 400:
        edoc, eschema = error_schema(doc)
        validate_schema(edoc, eschema, resp.json(), "%s %s -> %d" % (method, path, resp.status))
        return
    if op is None:
        return  # no YAML describes this route (e.g. /v1/metrics/events)
    robj = op.get("responses", {}).get(str(resp.status))
    assert robj is not None, "%s %s answered %d, a status its YAML operation (%s) does not " \
        "list for success (it lists %s)" % (method, path, resp.status, tpl,
                                            sorted(op.get("responses", {})))
    robj = deref(doc, robj)
    content = robj.get("content") or {}
    js = content.get("application/json")
    if resp.body == b"" and "response body is empty" in (robj.get("description") or ""):
        return  # the YAML's own words: without verbose=true (POST /files/replace)
    if js is None or "schema" not in js:
        if not content:
            assert resp.body == b"", "%s %s -> %d: the YAML says no content, got %r" % (
                method, path, resp.status, resp.body[:300])
        return
    ct = (resp.header("Content-Type") or "").split(";")[0].strip().lower()
    assert ct == "application/json", "%s %s -> %d: Content-Type %r" % (
        method, path, resp.status, resp.header("Content-Type"))
    validate_schema(doc, js["schema"], resp.json(), "%s %s -> %d" % (method, path, resp.status))


# ---- the client ----------------------------------------------------------------------------

class NativeAnswer(AssertionError):
    pass


def _is_native_404(resp):
    if resp.status != 404:
        return False
    try:
        b = resp.json()
    except ValueError:
        return False
    return isinstance(b, dict) and b.get("error") == "NotFound" and "code" not in b


def check_invariants(method, url, resp, sent_request_id=None):
    """Section 1's rules for every /v1 answer, then the YAML shape."""
    path = url.split("?", 1)[0]
    if _is_native_404(resp):
        raise NativeAnswer("%s %s was answered by the native router (404 %s): the /v1 surface "
                           "does not serve it" % (method, url, resp.body[:200]))
    ids = resp.header_all("X-Request-ID")
    assert len(ids) == 1 and ids[0].strip(), \
        "%s %s -> %d: X-Request-ID must be present exactly once and non-empty: %r" % (
            method, url, resp.status, ids)
    if sent_request_id is not None:
        assert ids[0] == sent_request_id, "X-Request-ID not echoed: sent %r, got %r" % (
            sent_request_id, ids[0])
    if resp.status >= 400:
        ct = (resp.header("Content-Type") or "").split(";")[0].strip().lower()
        assert resp.body, "%s %s -> %d with an EMPTY body (the SDK reads that as success)" % (
            method, url, resp.status)
        assert ct == "application/json", "%s %s -> %d: error Content-Type %r" % (
            method, url, resp.status, resp.header("Content-Type"))
        b = resp.json()
        assert isinstance(b, dict) and isinstance(b.get("code"), str) and b["code"], resp
        assert isinstance(b.get("message"), str) and b["message"].strip(), \
            "error message must be non-empty: %r" % (resp,)
    elif 200 <= resp.status < 300 and resp.body == b"" and method != "HEAD":
        cls = resp.header_all("Content-Length")
        assert cls == ["0"], "%s %s -> %d with an empty body must carry exactly one " \
            "'Content-Length: 0' (got %r)" % (method, url, resp.status, cls)
    if method != "HEAD":
        check_against_spec(method, path, resp)


class OsClient:
    """HTTP client for the /v1 surface; every answer passes check_invariants()."""

    def __init__(self, host, port, api_key=None):
        self.c = shlib.Client(host, port)
        self.host = host
        self.port = port
        self.api_key = api_key

    def request(self, method, url, body=None, headers=None, timeout=shlib.REQ_TIMEOUT,
                check=True, api_key=True):
        hdrs = dict(headers or {})
        if api_key is True and self.api_key is not None:
            hdrs.setdefault("OPEN-SANDBOX-API-KEY", self.api_key)
        elif isinstance(api_key, str):
            hdrs["OPEN-SANDBOX-API-KEY"] = api_key
        r = self.c.request(method, url, body=body, headers=hdrs, timeout=timeout)
        if check:
            sent = None
            for k, v in hdrs.items():
                if k.lower() == "x-request-id":
                    sent = v
            check_invariants(method, url, r, sent)
        return r

    def get(self, url, **kw):
        return self.request("GET", url, **kw)

    def post(self, url, body=None, **kw):
        return self.request("POST", url, body=body, **kw)

    def patch(self, url, body=None, **kw):
        return self.request("PATCH", url, body=body, **kw)

    def delete(self, url, **kw):
        return self.request("DELETE", url, **kw)

    # -- lifecycle conveniences ----------------------------------------------------------
    def create(self, body=None, **kw):
        b = dict(SDK_DEFAULT_CREATE) if body is None else body
        return self.post("/v1/sandboxes", b, **kw)

    def create_ok(self, body=None, **overrides):
        """Create (SDK defaults, then `overrides`), assert 202 Running; returns the JSON."""
        b = dict(SDK_DEFAULT_CREATE) if body is None else dict(body)
        for k, v in overrides.items():
            if v is DROP:
                b.pop(k, None)
            else:
                b[k] = v
        r = self.create(b)
        expect(r, 202)
        j = r.json()
        assert j["status"]["state"] == "Running", \
            "create answers once the sandbox runs (section 2): %r" % (j,)
        return j

    def sandbox(self, sid):
        return self.get("/v1/sandboxes/" + q(sid))

    def sandbox_ok(self, sid):
        r = self.sandbox(sid)
        expect(r, 200)
        return r.json()

    def kill(self, sid):
        try:
            return self.delete("/v1/sandboxes/" + q(sid), check=False)
        except OSError:
            return None

    def wait_state(self, sid, want, timeout=15.0, interval=0.02):
        """Poll GET until status.state == want; returns (last JSON, [states seen in order])."""
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            j = self.sandbox_ok(sid)
            st = j["status"]["state"]
            if not seen or seen[-1] != st:
                seen.append(st)
            if st == want:
                return j, seen
            assert time.monotonic() < deadline, "state %r not reached in %ss; seen %r" % (
                want, timeout, seen)
            time.sleep(interval)

    def execd(self, sid, method, sub, **kw):
        return self.request(method, "/v1/sandboxes/%s/proxy/%d%s" % (q(sid), EXECD_PORT, sub),
                            **kw)

    def egress(self, sid, method, sub, **kw):
        return self.request(method, "/v1/sandboxes/%s/proxy/%d%s" % (q(sid), EGRESS_PORT, sub),
                            **kw)

    def endpoint(self, sid, port, query="", **kw):
        return self.get("/v1/sandboxes/%s/endpoints/%s%s" % (q(sid), port, query), **kw)

    def native(self, sid):
        """The same sandbox on the native contract (its id is a remote_id)."""
        return shlib.Sandbox(self.c, sid)


DROP = object()


def q(s):
    return urllib.parse.quote(s, safe="")


def expect(r, status, code=None):
    """Assert the status (and for errors the code); returns the JSON body or None."""
    assert r.status == status, "expected %d%s, got %r" % (
        status, (" " + code) if code else "", r)
    if status >= 400:
        b = r.json()
        if code is not None:
            assert b["code"] == code, "expected code %s, got %r" % (code, b)
        return b
    return r.json() if r.body else None


def expect_400(r, codes=("INVALID_REQUEST",)):
    assert r.status == 400, "expected 400 %s, got %r" % ("/".join(codes), r)
    b = r.json()
    assert b["code"] in codes, "expected code in %r, got %r" % (codes, b)
    return b


def uniq(prefix="t"):
    return "%s%s" % (prefix, os.urandom(5).hex())


# ---- the daemon ----------------------------------------------------------------------------

def os_client(daemon, api_key=None):
    c = OsClient("127.0.0.1", daemon.port, api_key=api_key)
    # whose descendants a test may kill (execlib.kill_pids), as shlib.Daemon sets it natively
    c.c.daemon_pid = daemon.proc.pid
    return c


def pod_base(daemon):
    """host:port of the daemon's default pod_url (http:// + the bound address)."""
    return "%s:%d" % (daemon.host, daemon.port)


# ---- the sandbox seen from the host (root) -------------------------------------------------

def daemon_cgroup(daemon, controller):
    return execlib.cgroup_dirs_of(daemon.proc.pid).get(controller)


class InsideProcess:
    """`sleep <marker>` started through the native exec in a sandbox: its host pid, so the
    test can read /proc/<pid>/cgroup as root. .stop() kills it by that pid."""

    def __init__(self, client, sid, timeout=10.0):
        self.client = client
        self.m = execlib.marker()
        self.st = execlib.start(client.native(sid), ["sleep", self.m])
        assert self.st.status == 200, "native exec on a /v1 sandbox: %r %r" % (
            self.st.status, self.st.body)
        deadline = time.monotonic() + timeout
        while True:
            p = execlib.host_sleepers(self.m)
            if p:
                self.pid = p[0][0]
                break
            assert time.monotonic() < deadline, "the sleeper never showed on the host"
            time.sleep(0.02)

    def stop(self):
        # our own process, by its pid: the exec then ends at once with its exit frame
        execlib.kill_pids([self.pid], self.client.c.daemon_pid)
        try:
            self.st.read_all(timeout=10)
        except OSError:
            pass
        self.st.close()
        execlib.kill_pids([p[0] for p in execlib.host_sleepers(self.m)],
                          self.client.c.daemon_pid)


def _read(p):
    try:
        with open(p) as f:
            return f.read().strip()
    except OSError:
        return None


def nearest_limit(pid, controller, files, daemon, accept):
    """Walk up from `pid`'s `controller` cgroup toward (not into) the daemon's own cgroup;
    return (directory, value) of the first whose `files` values satisfy accept(values)."""
    d = execlib.cgroup_dirs_of(pid).get(controller)
    stop = daemon_cgroup(daemon, controller)
    while d and d.startswith("/sys/fs/cgroup/") and os.path.isdir(d):
        if stop and os.path.normpath(d) == os.path.normpath(stop):
            break
        vals = [_read(os.path.join(d, f)) for f in files]
        if all(v is not None for v in vals):
            got = accept(vals)
            if got is not None:
                return d, got
        d = os.path.dirname(d)
    return None, None


UNLIMITED_V1 = 1 << 62


def memory_limit_of(pid, daemon):
    """The sandbox's memory limit in bytes as the kernel holds it (v1 memory.limit_in_bytes,
    v2 memory.max), from the nearest limited cgroup above `pid` below the daemon's."""
    def acc(v):
        n = int(v[0])
        return n if n < UNLIMITED_V1 else None

    def acc2(v):
        return None if v[0] == "max" else int(v[0])
    d, n = nearest_limit(pid, "memory", ["memory.limit_in_bytes"], daemon, acc)
    if n is None:
        d, n = nearest_limit(pid, "unified", ["memory.max"], daemon, acc2)
    return n


def cpu_limit_of(pid, daemon):
    """The sandbox's CPU limit in cores (v1 cpu.cfs_quota_us / cpu.cfs_period_us, v2 cpu.max)."""
    def acc(v):
        quota, period = int(v[0]), int(v[1])
        return quota / period if quota > 0 else None

    def acc2(v):
        a, b = v[0].split()
        return None if a == "max" else int(a) / int(b)
    d, n = nearest_limit(pid, "cpu", ["cpu.cfs_quota_us", "cpu.cfs_period_us"], daemon, acc)
    if n is None:
        d, n = nearest_limit(pid, "unified", ["cpu.max"], daemon, acc2)
    return n


def host_arch():
    m = os.uname().machine
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(m, m)
