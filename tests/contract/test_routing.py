"""Sections 2 and 8: routing, methods, HEAD, JSON body rules, query decoding, error model."""
import os

import pytest

from shlib import assert_204, assert_error, assert_json, q

UNKNOWN_RID = "0123456789abcdef0123456789abcdef"

# Route -> methods it serves (section 2 table, section 7). HEAD is served wherever GET is.
# exec/persist/tools-resolve are outside this milestone and deliberately not listed.
SANDBOX_ROUTES = {
    "": {"DELETE"},
    "/file": {"GET", "HEAD", "PUT", "DELETE"},
    "/exists": {"GET", "HEAD"},
    "/disk-usage": {"GET", "HEAD"},
    "/size": {"GET", "HEAD"},
    "/mark-ready": {"POST"},
    "/ready": {"GET", "HEAD"},
    "/walk": {"GET", "HEAD"},
    "/mkdir": {"POST"},
    "/dir": {"DELETE"},
    "/rename": {"POST"},
}
TOP_ROUTES = {
    "/sandboxes": {"POST"},
    "/healthz": {"GET", "HEAD"},
    "/readyz": {"GET", "HEAD"},
    "/drain": {"POST"},
}
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"]


def _allow_set(r):
    vals = r.header_all("Allow")
    assert vals, "405 without an Allow header: %r" % r
    return {m.strip().upper() for v in vals for m in v.split(",") if m.strip()}


def _check_405(r, served):
    assert r.status == 405, r
    if r.body:  # HEAD answers carry no body
        assert_error(r, 405, "MethodNotAllowed")
    allow = _allow_set(r)
    # Allow names exactly the served methods (HEAD may or may not be listed with GET).
    assert allow - {"HEAD"} == served - {"HEAD"}, (allow, served)


def _wrong_methods(served):
    return [m for m in ALL_METHODS if m not in served]


@pytest.mark.parametrize("route,served", sorted(TOP_ROUTES.items()))
def test_top_level_route_wrong_method_is_405_with_allow(client, route, served):
    if route == "/drain":
        # a POST would drain the shared daemon; only wrong methods are tried
        pass
    for m in _wrong_methods(served):
        r = client.request(m, route)
        _check_405(r, served)


@pytest.mark.parametrize("suffix,served", sorted(SANDBOX_ROUTES.items()))
def test_sandbox_route_wrong_method_is_405_with_allow(client, sb, suffix, served):
    for m in _wrong_methods(served):
        r = client.request(m, "/sandboxes/%s%s?path=x" % (sb.rid, suffix))
        _check_405(r, served)


@pytest.mark.parametrize("suffix,served", sorted(SANDBOX_ROUTES.items()))
def test_405_is_decided_before_sandbox_lookup(client, suffix, served):
    for rid in (UNKNOWN_RID, "no-such-sandbox"):
        for m in _wrong_methods(served):
            r = client.request(m, "/sandboxes/%s%s?path=x" % (rid, suffix))
            _check_405(r, served)


# /v1/... is the OpenSandbox surface's, on by default (OPENSANDBOX.md section 1); with it off
# every /v1 path is this 404 (test_os_surface.py::test_opensandbox_off_...). Other prefixes stay
# the native surface's.
@pytest.mark.parametrize("method", ALL_METHODS + ["OPTIONS"])
@pytest.mark.parametrize("path", [
    "/", "/nope", "/sandbox", "/healthzz", "/sandboxes/%s/nope" % UNKNOWN_RID,
    "/sandboxes/%s/file/extra" % UNKNOWN_RID, "/sandboxes/%s/exists/x" % UNKNOWN_RID,
    "/sandboxes/a/b/c/d", "/v2/sandboxes", "/v1", "/SANDBOXES", "/Healthz",
])
def test_unknown_route_is_404_notfound_whatever_the_method(client, method, path):
    r = client.request(method, path)
    assert r.status == 404, r
    if method != "HEAD":
        assert_error(r, 404, "NotFound")


@pytest.mark.parametrize("suffix", ["/expose_port", "/expose-port", "/upload_file",
                                    "/download_to_file", "/files", "/list", "/exec/x"])
def test_endpoints_the_contract_says_do_not_exist_are_404_notfound(client, sb, suffix):
    # "There is no expose_port endpoint"; upload_file / download_to_file are client
    # conveniences, "not endpoints of their own".
    for m in ("GET", "POST", "PUT"):
        assert_error(client.request(m, sb.base + suffix, body=b"{}"), 404, "NotFound")


def test_get_sandboxes_is_not_a_listing(client, sb):
    # "There is no endpoint that lists sandboxes": /sandboxes serves POST only
    r = client.get("/sandboxes")
    assert_error(r, 405, "MethodNotAllowed")
    assert sb.rid.encode() not in r.body


def test_unknown_route_under_live_sandbox_is_notfound_not_sandboxnotfound(client, sb):
    r = client.get("/sandboxes/%s/bogus" % sb.rid)
    assert_error(r, 404, "NotFound")
    r = client.post("/sandboxes/%s/file/extra" % sb.rid, body={})
    assert_error(r, 404, "NotFound")


@pytest.mark.parametrize("rid", [UNKNOWN_RID, "nope", "A" * 64])
def test_unknown_sandbox_is_404_sandboxnotfound_on_every_endpoint(client, rid):
    base = "/sandboxes/" + rid
    calls = [
        ("DELETE", base, None),
        ("PUT", base + "/file?path=a", b"x"),
        ("GET", base + "/file?path=a", None),
        ("DELETE", base + "/file?path=a", None),
        ("GET", base + "/exists?path=a", None),
        ("GET", base + "/disk-usage", None),
        ("GET", base + "/size?path=a", None),
        ("POST", base + "/mark-ready", None),
        ("GET", base + "/ready", None),
        ("GET", base + "/walk", None),
        ("GET", base + "/walk?root=a", None),
        ("POST", base + "/mkdir", {"path": "a"}),
        ("DELETE", base + "/dir?path=a", None),
        ("POST", base + "/rename", {"src": "a", "dst": "b"}),
    ]
    for method, url, body in calls:
        r = client.request(method, url, body=body)
        assert_error(r, 404, "SandboxNotFound")


def test_head_unknown_sandbox_is_404_without_body(client):
    r = client.request("HEAD", "/sandboxes/%s/exists?path=a" % UNKNOWN_RID)
    assert r.status == 404, r
    assert r.body == b""


# ---- HEAD wherever GET ----

def test_head_healthz_is_200_without_body(client):
    g = client.get("/healthz")
    r = client.request("HEAD", "/healthz")
    assert r.status == 200, r
    assert r.body == b""
    assert (r.header("Content-Type") or "").startswith("application/json")


@pytest.mark.parametrize("suffix", ["/exists?path=f", "/disk-usage", "/size?path=f", "/ready",
                                    "/walk", "/walk?root=d"])
def test_head_is_served_on_every_get_endpoint(client, sb, suffix):
    sb.put_ok("d/f", b"hello")
    sb.put_ok("f", b"hello")
    g = client.get(sb.base + suffix)
    assert g.status == 200, g
    r = client.request("HEAD", sb.base + suffix)
    assert r.status == 200, r
    assert r.body == b""


def test_head_file_gives_content_length_and_no_body(sb):
    sb.put_ok("f.bin", b"x" * 12345)
    r = sb.head("f.bin")
    assert r.status == 200, r
    assert r.body == b""
    assert r.header("Content-Length") == "12345"


def test_head_absent_file_is_404(sb):
    r = sb.head("absent")
    assert r.status == 404, r


# ---- JSON body rules (section 2) ----

# Not valid JSON per RFC 8259 (raw control characters inside strings, e.g. "a\x01", and a
# lone NUL byte included: neither is whitespace nor JSON).
BAD_JSON = [
    "{", "}", "[", "nul", "tru", "{'path': 'a'}", '{"path": }', '{"path" "a"}',
    '{"path": "a",}', '{"path": "a"} trailing', '{"path": "a"}{"path": "b"}', "NaN",
    '{"path": NaN}', '{"path": "a\x01"}', "\x00", '{"path": "a"', "01", "+1",
    '{"path": undefined}', "/* c */ {}", '{"path": "\\x41"}',
]
NON_OBJECT_JSON = ["[]", "[{}]", "1", "0", "-2.5", '"str"', "true", "false", "null", '""']


@pytest.mark.parametrize("body", BAD_JSON)
def test_invalid_json_body_is_400_badrequest_mkdir(sb, client, body):
    r = client.post(sb.base + "/mkdir", body=body, headers={"Content-Type": "application/json"})
    assert_error(r, 400, "BadRequest")


@pytest.mark.parametrize("body", BAD_JSON)
def test_invalid_json_body_is_400_badrequest_create(client, body):
    r = client.post("/sandboxes", body=body, headers={"Content-Type": "application/json"})
    if r.status == 200:  # clean up before failing
        client.request("DELETE", "/sandboxes/" + r.json()["remote_id"])
    assert_error(r, 400, "BadRequest")


@pytest.mark.parametrize("body", BAD_JSON)
def test_invalid_json_body_is_400_badrequest_rename(sb, client, body):
    r = client.post(sb.base + "/rename", body=body, headers={"Content-Type": "application/json"})
    assert_error(r, 400, "BadRequest")


def test_invalid_utf8_in_json_body_is_400(sb, client):
    r = client.post(sb.base + "/mkdir", body=b'{"path": "a\xff\xfe"}',
                    headers={"Content-Type": "application/json"})
    # INTERPRETATION: the contract does not mention invalid UTF-8 inside a JSON body; RFC 8259
    # JSON text exchanged between systems MUST be UTF-8, so such a body is "not valid JSON"
    # -> 400. (Tension: paths are byte strings, but JSON has no way to carry raw bytes; a
    # Python client sends "\udcff"-style escapes, never raw invalid UTF-8.)
    assert_error(r, 400, "BadRequest")


@pytest.mark.parametrize("body", NON_OBJECT_JSON)
def test_non_object_json_body_is_400(sb, client, body):
    for url in ("/sandboxes", sb.base + "/mkdir", sb.base + "/rename"):
        r = client.post(url, body=body, headers={"Content-Type": "application/json"})
        if url == "/sandboxes" and r.status == 200:
            client.request("DELETE", "/sandboxes/" + r.json()["remote_id"])
        assert_error(r, 400, "BadRequest")


@pytest.mark.parametrize("body", ["", " ", "\n", " \t\r\n "])
def test_empty_or_whitespace_body_is_empty_object_on_create(client, body):
    r = client.post("/sandboxes", body=body, headers={"Content-Type": "application/json"})
    j = assert_json(r)
    client.request("DELETE", "/sandboxes/" + j["remote_id"])


@pytest.mark.parametrize("body", ["", " ", "\n\t "])
def test_empty_body_is_empty_object_so_mkdir_lacks_path_400(sb, client, body):
    r = client.post(sb.base + "/mkdir", body=body, headers={"Content-Type": "application/json"})
    assert_error(r, 400, "BadRequest")


def test_create_without_body_at_all_is_ok(client):
    r = client.request("POST", "/sandboxes")
    j = assert_json(r)
    client.request("DELETE", "/sandboxes/" + j["remote_id"])


def test_whitespace_around_valid_json_is_accepted(sb, client):
    r = client.post(sb.base + "/mkdir", body=' \n {"path": "ws"} \n ',
                    headers={"Content-Type": "application/json"})
    assert_204(r)
    assert sb.exists_v("ws") is True


def test_unknown_json_fields_are_ignored(sb, client):
    r = client.post(sb.base + "/mkdir", body={"path": "u1", "future": {"x": [1, 2]}, "n": None})
    assert_204(r)
    r = client.post(sb.base + "/rename", body={"src": "u1", "dst": "u2", "mode": "fast"})
    assert_204(r)
    assert sb.exists_v("u2") is True


@pytest.mark.parametrize("body", [
    {"path": 1}, {"path": True}, {"path": ["a"]}, {"path": {"a": "b"}}, {"path": 1.5},
])
def test_mkdir_wrong_type_is_400(sb, client, body):
    assert_error(client.post(sb.base + "/mkdir", body=body), 400, "BadRequest")


@pytest.mark.parametrize("body", [
    {"src": 1, "dst": "b"}, {"src": "a", "dst": 2}, {"src": ["a"], "dst": "b"},
    {"src": "a", "dst": {"x": 1}}, {"src": "a"}, {"dst": "b"}, {"src": None, "dst": "b"},
    {"src": "a", "dst": None}, {},
])
def test_rename_wrong_type_or_missing_field_is_400(sb, client, body):
    sb.put_ok("a", b"1")
    assert_error(client.post(sb.base + "/rename", body=body), 400, "BadRequest")
    assert sb.get_v("a") == b"1"


def test_mkdir_null_path_is_absent_so_400(sb, client):
    assert_error(client.post(sb.base + "/mkdir", body={"path": None}), 400, "BadRequest")


def test_endpoints_without_body_ignore_one(sb, client):
    junk = b"{not json at all \x00\xff"
    assert_204(client.post(sb.base + "/mark-ready", body=junk))
    assert sb.ready_v() is True
    sb.put_ok("f", b"abc")
    r = client.request("GET", sb.base + "/exists?path=f", body=junk)
    assert assert_json(r) == {"exists": True}
    r = client.request("GET", sb.base + "/file?path=f", body=b"[1,2]")
    assert r.status == 200 and r.body == b"abc", r
    r = client.request("DELETE", sb.base + "/file?path=f", body=junk)
    assert_204(r)


def test_delete_sandbox_ignores_a_body(client):
    s = client.new_sandbox()
    assert_204(client.request("DELETE", s.base, body=b"garbage{"))


# ---- query decoding ----

def test_query_plus_is_space(sb, client):
    sb.put_ok("a b", b"spaced")
    r = client.get(sb.base + "/file?path=a+b")
    assert r.status == 200 and r.body == b"spaced", r


def test_query_percent_2b_is_plus(sb, client):
    sb.put_ok("a+b", b"plus")
    sb.put_ok("a b", b"space")
    r = client.get(sb.base + "/file?path=a%2Bb")
    assert r.status == 200 and r.body == b"plus", r
    r = client.get(sb.base + "/file?path=a%2bb")  # lower-case hex
    assert r.status == 200 and r.body == b"plus", r


def test_query_plus_in_upload_path_creates_space_name(sb, client):
    r = client.request("PUT", sb.base + "/file?path=x+y/z+w", body=b"1")
    assert_204(r)
    assert (sb.ws / "x y" / "z w").read_bytes() == b"1"


def test_query_percent_escapes_decode(sb, client):
    r = client.request("PUT", sb.base + "/file?path=%2Fd%C3%BCr%2F%26%3D%3F%23.txt", body=b"1")
    assert_204(r)
    assert (sb.ws / "dür" / "&=?#.txt").read_bytes() == b"1"


def test_walk_root_is_query_decoded(sb, client):
    sb.put_ok("my dir/f", b"1")
    sb.put_ok("other/f", b"1")
    r = client.get(sb.base + "/walk?root=my+dir")
    assert [e["path"] for e in assert_json(r)["entries"]] == ["my dir/f"]
    r = client.get(sb.base + "/walk?root=my%20dir")
    assert [e["path"] for e in assert_json(r)["entries"]] == ["my dir/f"]


BAD_ESCAPES = ["%", "%4", "%zz", "%g0", "a%", "%%", "%-1", "%+1", "a%2", "%0"]


@pytest.mark.parametrize("esc", BAD_ESCAPES)
def test_invalid_escape_in_path_param_is_400(sb, client, esc):
    sb.put_ok("f", b"1")
    for method, suffix in [("GET", "/file"), ("PUT", "/file"), ("DELETE", "/file"),
                           ("GET", "/exists"), ("GET", "/size"), ("DELETE", "/dir")]:
        r = client.request(method, sb.base + suffix + "?path=" + esc,
                           body=b"x" if method == "PUT" else None)
        assert_error(r, 400, "BadRequest")
    assert sb.get_v("f") == b"1"


@pytest.mark.parametrize("esc", ["%", "%zz", "%4", "a%g1"])
def test_invalid_escape_anywhere_in_query_is_400(sb, client, esc):
    sb.put_ok("f", b"1")
    urls = [
        ("GET", sb.base + "/file?path=f&x=" + esc),
        ("GET", sb.base + "/file?x=" + esc + "&path=f"),
        ("GET", sb.base + "/exists?" + esc + "=1&path=f"),
        ("GET", sb.base + "/disk-usage?x=" + esc),
        ("GET", sb.base + "/ready?x=" + esc),
        ("GET", sb.base + "/walk?x=" + esc),
        ("GET", sb.base + "/walk?root=" + esc),
        ("POST", sb.base + "/mark-ready?x=" + esc),
        ("DELETE", sb.base + "/file?path=f&y=" + esc),
    ]
    for method, url in urls:
        r = client.request(method, url)
        assert_error(r, 400, "BadRequest")
    assert sb.get_v("f") == b"1"
    assert sb.ready_v() is False


def test_query_escape_for_non_utf8_bytes(sb, client):
    r = client.request("PUT", sb.base + "/file?path=raw%FF%FEname", body=b"bytes")
    assert_204(r)
    assert (sb.ws / os.fsdecode(b"raw\xff\xfename")).read_bytes() == b"bytes"


def test_json_responses_have_json_content_type(client, sb):
    for url in [sb.base + "/exists?path=x", sb.base + "/disk-usage", sb.base + "/size?path=x",
                sb.base + "/ready", sb.base + "/walk", "/healthz"]:
        assert_json(client.get(url))

