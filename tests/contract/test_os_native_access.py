"""OPENSANDBOX.md section 1, "One registry" and "Auth": the native contract is unauthenticated by
design, so with `SANDBOX_HOST_API_KEY` set it does not know the sandboxes made through `/v1`
(every native route that names one answers `404 SandboxNotFound`, as for an id that does not
exist), or the key and the access tokens would protect nothing: a `/v1` id would run commands
and take files on `/sandboxes/{id}/exec` and `/file` past an execd that answers 401.
`SANDBOX_HOST_NATIVE=off` turns the native surface off for a pod that serves only `/v1`: the
pod's probes and `/drain` stay (Kubernetes needs them), every other native path is the native
`404 NotFound`. `secureAccess: true` without a key is `400 NOT_SUPPORTED` (its token would be
anyone's through the endpoint look-up)."""
import pytest

import execlib
import oslib
import shlib
from oslib import expect

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

EXECD_H = "X-EXECD-ACCESS-TOKEN"


def native_routes(sid):
    """Every native route that names a sandbox (CONTRACT.md section 2), with a body that would
    do something if it were served."""
    base = "/sandboxes/" + sid
    return [
        ("POST", base + "/exec", {"cmd": ["/bin/busybox", "touch", "/workspace/ran"]}),
        ("PUT", base + "/file?path=planted", b"planted"),
        ("GET", base + "/file?path=planted", None),
        ("DELETE", base + "/file?path=planted", None),
        ("GET", base + "/exists?path=planted", None),
        ("GET", base + "/disk-usage", None),
        ("GET", base + "/size?path=planted", None),
        ("POST", base + "/mark-ready", None),
        ("GET", base + "/ready", None),
        ("GET", base + "/walk", None),
        ("POST", base + "/mkdir", {"path": "made"}),
        ("DELETE", base + "/dir?path=made", None),
        ("POST", base + "/rename", {"src": "a", "dst": "b"}),
        ("POST", base + "/persist", {"item_id": "stolen"}),
        ("DELETE", base, None),
    ]


def _native(client, method, url, body):
    hdrs = {"Content-Type": "application/octet-stream"} if isinstance(body, bytes) else None
    return client.request(method, url, body=body, headers=hdrs, timeout=10)


def test_with_a_key_every_native_route_answers_404_for_a_v1_sandbox(keyd, kc):
    j = kc.create_ok()
    sid = j["id"]
    try:
        for method, url, body in native_routes(sid):
            r = _native(keyd.client, method, url, body)
            shlib.assert_error(r, 404, "SandboxNotFound")
        # nothing happened to it: not deleted, no command ran, no file landed
        assert kc.sandbox_ok(sid)["status"]["state"] == "Running"
        ws = keyd.ws(sid)
        assert sorted(p.name for p in ws.iterdir()) == [], list(ws.iterdir())
    finally:
        kc.kill(sid)


def test_with_a_key_a_secure_access_sandbox_runs_nothing_without_its_token(keyd, kc):
    """The issue's attack: execd answers 401 without the token; the native exec and upload
    must not be the way around it."""
    j = kc.create_ok(secureAccess=True)
    sid = j["id"]
    try:
        assert kc.execd(sid, "POST", "/command", body={"command": "touch /workspace/x"},
                        api_key=False).status == 401
        st = execlib.ExecStream(keyd.client, sid, ["/bin/busybox", "touch", "/workspace/ran"])
        assert st.status == 404 and b"SandboxNotFound" in st.body, (st.status, st.body)
        shlib.assert_error(keyd.client.request(
            "PUT", "/sandboxes/%s/file?path=up" % sid, body=b"x",
            headers={"Content-Type": "application/octet-stream"}, timeout=10),
            404, "SandboxNotFound")
        assert not (keyd.ws(sid) / "ran").exists()
        assert not (keyd.ws(sid) / "up").exists()
    finally:
        kc.kill(sid)


def test_with_a_key_a_v1_sandbox_answers_as_an_unknown_id_does(keyd, kc):
    """The same status, type and detail as an id that does not exist: the native surface
    does not tell a /v1 sandbox's id from a wrong one."""
    j = kc.create_ok()
    try:
        unknown = "0" * len(j["id"])
        a = shlib.assert_error(keyd.client.get("/sandboxes/%s/exists?path=a" % j["id"]), 404)
        b = shlib.assert_error(keyd.client.get("/sandboxes/%s/exists?path=a" % unknown), 404)
        assert a == b
    finally:
        kc.kill(j["id"])


def test_with_a_key_a_v1_sandbox_from_the_warm_pool_is_hidden_too(start_daemon):
    """A pooled sandbox was started for no surface yet; the /v1 create that takes it makes it
    a /v1 sandbox (the claim carries the surface), so the native surface does not know it."""
    from test_warm_pool import settled_workers
    d = start_daemon(env={"SANDBOX_HOST_API_KEY": oslib.TEST_API_KEY,
                          "SANDBOX_HOST_WARM_POOL": "1"})
    kc = oslib.os_client(d, api_key=oslib.TEST_API_KEY)
    before = settled_workers(d, 1, 30)
    # default options (no resourceLimits): the create a pooled sandbox serves
    body = {k: v for k, v in oslib.SDK_DEFAULT_CREATE.items() if k != "resourceLimits"}
    sid = expect(kc.create(body), 202)["id"]
    assert sid in before.values(), (sid, before)
    shlib.assert_error(d.client.get("/sandboxes/%s/exists?path=a" % sid), 404,
                       "SandboxNotFound")
    kc.kill(sid)
    d.stop_ok()


def test_with_a_key_native_sandboxes_are_served_as_ever(keyd):
    s = keyd.client.new_sandbox()
    try:
        s.put_ok("a", b"x")
        assert s.get_v("a") == b"x"
        assert execlib.sh(s, "echo native") == "native\n"
    finally:
        assert s.delete().status == 204


def test_without_a_key_the_native_surface_serves_v1_sandboxes(osc, daemon):
    # INTERPRETATION: section 1 hides /v1 sandboxes from the native surface only when a key is
    # set; without one nothing on the host is authenticated and a remote_id is the capability.
    j = osc.create_ok()
    try:
        n = osc.native(j["id"])
        n.put_ok("a", b"1")
        assert execlib.sh(n, "cat /workspace/a") == "1"
    finally:
        osc.kill(j["id"])


def test_secure_access_without_a_key_is_400_not_supported(osc):
    r = osc.create(dict(oslib.SDK_DEFAULT_CREATE, secureAccess=True))
    if r.status == 202:
        osc.kill(r.json()["id"])
    expect(r, 400, "NOT_SUPPORTED")
    # false (the SDK's default) is as ever
    osc.kill(osc.create_ok(secureAccess=False)["id"])


def test_secure_access_with_a_key_hands_out_a_token_that_opens_execd(kc):
    j = kc.create_ok(secureAccess=True)
    try:
        e = expect(kc.endpoint(j["id"], 44772), 200)
        tok = {k.lower(): v for k, v in e["headers"].items()}[EXECD_H.lower()]
        assert kc.execd(j["id"], "GET", "/ping").status == 401
        expect(kc.execd(j["id"], "GET", "/ping", headers={EXECD_H: tok}), 200)
    finally:
        kc.kill(j["id"])


# ---- SANDBOX_HOST_NATIVE=off ------------------------------------------------------------------

def test_native_off_serves_only_the_probes_and_drain(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_NATIVE": "off"})
    c = d.client
    osc = oslib.os_client(d)
    sid = osc.create_ok()["id"]
    assert c.get("/healthz", timeout=5).status == 200
    assert c.get("/readyz", timeout=5).status == 200
    # every other native path, a /v1 sandbox's id included, any method: 404 NotFound (not
    # 405: the routes are not there at all); the probes and /drain keep their methods (405)
    for method, url, body in native_routes(sid) + [
            ("POST", "/sandboxes", {}), ("GET", "/sandboxes", None),
            ("POST", "/tools/resolve", {"tools": []}), ("GET", "/nope", None)]:
        r = _native(c, method, url, body)
        shlib.assert_error(r, 404, "NotFound")
    shlib.assert_error(c.get("/drain", timeout=5), 405, "MethodNotAllowed")
    # the /v1 surface is whole
    expect(osc.execd(sid, "GET", "/ping"), 200)
    assert osc.sandbox_ok(sid)["status"]["state"] == "Running"
    # /drain (the preStop hook) drains: creates are 503 and readyz says not ready
    j = shlib.assert_json(c.post("/drain", timeout=30))
    assert isinstance(j, dict), j
    assert c.get("/readyz", timeout=5).status == 503
    expect(osc.create(), 503, "UNAVAILABLE")
    d.stop_ok()


def test_native_off_flag_form(start_daemon):
    d = start_daemon(args=["--native", "off"])
    shlib.assert_error(d.client.create(), 404, "NotFound")
    assert d.client.get("/healthz", timeout=5).status == 200
    expect(oslib.os_client(d).get("/v1/sandboxes"), 200)
    d.stop_ok()
