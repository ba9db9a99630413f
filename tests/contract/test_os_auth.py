"""OPENSANDBOX.md section 1, auth: `SANDBOX_HOST_API_KEY` (`OPEN-SANDBOX-API-KEY` on every
lifecycle and diagnostics request), the per-sandbox access token handed out only by the
endpoint look-up (`X-EXECD-ACCESS-TOKEN` for execd, `OPENSANDBOX-EGRESS-AUTH` for egress),
and the native surface never protected by the key (what it hides, and `secureAccess`, are
test_os_native_access.py's)."""
import json
import re

import pytest

import oslib
import shlib
from oslib import expect

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

KEY = oslib.TEST_API_KEY  # the key of conftest's `keyd` and `kc`
EXECD_H = "X-EXECD-ACCESS-TOKEN"
EGRESS_H = "OPENSANDBOX-EGRESS-AUTH"


@pytest.fixture
def ksb(kc):
    j = kc.create_ok()
    yield j
    kc.kill(j["id"])


def _hdr(headers, name):
    """A header from an endpoint's `headers` object, by case-insensitive name."""
    for k, v in (headers or {}).items():
        if k.lower() == name.lower():
            return v
    return None


def tokens(c, sid):
    e1 = expect(c.endpoint(sid, 44772), 200)
    e2 = expect(c.endpoint(sid, 18080), 200)
    return _hdr(e1.get("headers"), EXECD_H), _hdr(e2.get("headers"), EGRESS_H)


def _lifecycle_routes(sid):
    return [("GET", "/v1/sandboxes", None), ("POST", "/v1/sandboxes", oslib.SDK_DEFAULT_CREATE),
            ("GET", "/v1/sandboxes/" + sid, None),
            ("PATCH", "/v1/sandboxes/%s/metadata" % sid, {"a": "b"}),
            ("POST", "/v1/sandboxes/%s/renew-expiration" % sid,
             {"expiresAt": oslib.in_seconds(3600)}),
            ("POST", "/v1/sandboxes/%s/pause" % sid, None),
            ("POST", "/v1/sandboxes/%s/resume" % sid, None),
            ("GET", "/v1/sandboxes/%s/endpoints/44772" % sid, None),
            ("POST", "/v1/sandboxes/%s/snapshots" % sid, {}),
            ("GET", "/v1/snapshots", None), ("GET", "/v1/snapshots/nope", None),
            ("DELETE", "/v1/snapshots/nope", None),
            ("GET", "/v1/sandboxes/%s/diagnostics/logs?scope=all" % sid, None),
            ("GET", "/v1/sandboxes/%s/diagnostics/events?scope=all" % sid, None),
            ("POST", "/v1/metrics/events", {"eventType": "sandbox.create"}),
            ("DELETE", "/v1/sandboxes/" + sid, None)]


def test_every_lifecycle_and_diagnostics_route_without_the_key_is_401_missing_api_key(kc, ksb):
    # INTERPRETATION: the key is checked before anything else (an unknown snapshot id without
    # the key is 401, not 404: nothing is learnt without it)
    for method, path, body in _lifecycle_routes(ksb["id"]):
        r = kc.request(method, path, body=body, api_key=False)
        expect(r, 401, "MISSING_API_KEY")
    # nothing happened to the sandbox
    assert kc.sandbox_ok(ksb["id"])["status"]["state"] == "Running"


@pytest.mark.parametrize("bad", [KEY[:-1], KEY + "x", KEY.upper(), "x" * len(KEY), " " + KEY + "x",
                                 KEY[1:] + "k"])
def test_a_wrong_key_is_401_invalid_api_key(kc, ksb, bad):
    for method, path, body in _lifecycle_routes(ksb["id"])[:3]:
        r = kc.request(method, path, body=body, api_key=bad)
        expect(r, 401, "INVALID_API_KEY")


def test_the_right_key_opens_every_lifecycle_route(kc, ksb):
    sid = ksb["id"]
    expect(kc.get("/v1/sandboxes"), 200)
    expect(kc.get("/v1/sandboxes/" + sid), 200)
    expect(kc.patch("/v1/sandboxes/%s/metadata" % sid, {"a": "b"}), 200)
    expect(kc.post("/v1/metrics/events", {"eventType": "sandbox.create"}), 204)
    expect(kc.get("/v1/sandboxes/%s/diagnostics/logs?scope=lifecycle" % sid), 200)
    expect(kc.delete("/v1/sandboxes/" + sid), 204)


def test_the_key_protects_v1_but_never_the_native_surface(keyd, kc):
    expect(kc.get("/v1/sandboxes", api_key=False), 401, "MISSING_API_KEY")
    c = keyd.client
    assert c.get("/healthz").status == 200
    s = c.new_sandbox()
    s.put_ok("a", b"x")
    assert s.get_v("a") == b"x"
    assert s.delete().status == 204


def test_with_a_key_the_endpoints_carry_the_sandbox_token(kc, ksb):
    t_exec, t_egress = tokens(kc, ksb["id"])
    assert t_exec and t_egress, "with the API key set, endpoints hand out the token"
    # INTERPRETATION: one token per sandbox (section 1: "the sandbox's own access token"),
    # handed out under the execd header name for 44772 and the egress one for 18080
    assert t_exec == t_egress
    # >= 128 random bits: at least 22 characters of base64url or 32 of hex
    assert re.fullmatch(r"[A-Za-z0-9._~+/=-]+", t_exec), t_exec
    assert len(t_exec) >= 22, t_exec
    other = kc.create_ok()
    try:
        assert tokens(kc, other["id"])[0] != t_exec
    finally:
        kc.kill(other["id"])


def test_the_token_is_handed_out_only_by_the_endpoint_lookup(kc, ksb):
    tok = tokens(kc, ksb["id"])[0]
    for r in (kc.get("/v1/sandboxes/" + ksb["id"]), kc.get("/v1/sandboxes?pageSize=200"),
              kc.get("/v1/sandboxes/%s/diagnostics/logs?scope=all" % ksb["id"]),
              kc.get("/v1/sandboxes/%s/diagnostics/events?scope=all" % ksb["id"])):
        assert r.status == 200 and tok.encode() not in r.body, r
    assert tok not in json.dumps(ksb)


def test_with_a_key_execd_needs_the_token(kc, ksb):
    sid = ksb["id"]
    tok = tokens(kc, sid)[0]
    r = kc.execd(sid, "GET", "/ping", api_key=False)
    assert r.status == 401, r
    r = kc.execd(sid, "GET", "/ping")  # the API key alone is not the token
    assert r.status == 401, r
    r = kc.execd(sid, "GET", "/ping", headers={EXECD_H: tok[:-1] + ("A" if tok[-1] != "A" else
                                                                     "B")})
    assert r.status == 401, r
    r = kc.execd(sid, "GET", "/ping", headers={EGRESS_H: tok})  # the egress header name
    assert r.status == 401, r
    expect(kc.execd(sid, "GET", "/ping", headers={EXECD_H: tok}), 200)
    # INTERPRETATION: section 1 asks the API key of lifecycle and diagnostics requests only;
    # an execd route requires the sandbox's token, so the token alone opens it.
    expect(kc.execd(sid, "GET", "/ping", headers={EXECD_H: tok}, api_key=False), 200)


def test_with_a_key_egress_needs_the_token(kc, ksb):
    sid = ksb["id"]
    tok = tokens(kc, sid)[1]
    assert kc.egress(sid, "GET", "/policy", api_key=False).status == 401
    assert kc.egress(sid, "GET", "/policy").status == 401
    assert kc.egress(sid, "GET", "/policy", headers={EXECD_H: tok}).status == 401
    expect(kc.egress(sid, "GET", "/policy", headers={EGRESS_H: tok}), 200)
    expect(kc.egress(sid, "GET", "/policy", headers={EGRESS_H: tok}, api_key=False), 200)


def test_a_token_opens_only_its_own_sandbox(kc, ksb):
    other = kc.create_ok()
    try:
        tok_a = tokens(kc, ksb["id"])[0]
        tok_b = tokens(kc, other["id"])[0]
        assert kc.execd(other["id"], "GET", "/ping", headers={EXECD_H: tok_a}).status == 401
        assert kc.execd(ksb["id"], "GET", "/ping", headers={EXECD_H: tok_b}).status == 401
        assert kc.egress(other["id"], "GET", "/policy", headers={EGRESS_H: tok_a}).status == 401
    finally:
        kc.kill(other["id"])


def test_execd_auth_covers_the_routes_of_later_issues_too(kc, ksb):
    """A route that is 501 today (issue 13/14) or forever (/code) still asks the token first:
    no unauthenticated caller learns anything about a sandbox (INTERPRETATION: auth is
    checked before the route's own answer)."""
    sid = ksb["id"]
    for method, sub, body in (("POST", "/command", {"command": "id"}),
                              ("GET", "/files/info?path=/etc/passwd", None),
                              ("POST", "/code", {"code": "1"}), ("GET", "/metrics", None)):
        r = kc.execd(sid, method, sub, body=body)
        assert r.status == 401, r


def test_without_a_key_nothing_is_checked(osc, sbx):
    sid = sbx["id"]
    expect(osc.get("/v1/sandboxes"), 200)
    expect(osc.execd(sid, "GET", "/ping"), 200)
    expect(osc.egress(sid, "GET", "/policy"), 200)
    t_exec, t_egress = tokens(osc, sid)
    # "headers with the token when auth applies": here it does not
    assert t_exec is None and t_egress is None
    # a stray key header changes nothing
    expect(osc.get("/v1/sandboxes/" + sid, api_key="whatever"), 200)


def test_401_answers_are_code_message_json_with_request_id(kc, ksb):
    r = kc.get("/v1/sandboxes", api_key=False, headers={"X-Request-ID": "auth-probe-1"})
    assert r.status == 401 and r.header("X-Request-ID") == "auth-probe-1"
    r = kc.execd(ksb["id"], "GET", "/ping", headers={"X-Request-ID": "auth-probe-2"})
    assert r.status == 401 and r.header("X-Request-ID") == "auth-probe-2"


def test_api_key_flag_form(start_daemon):
    d = start_daemon(args=["--api-key", KEY])
    c = oslib.os_client(d)
    expect(c.get("/v1/sandboxes", api_key=False), 401, "MISSING_API_KEY")
    expect(c.get("/v1/sandboxes", api_key=KEY), 200)
