"""OPENSANDBOX.md section 2 after create: list (state OR, metadata AND, pagination, oldest
first), delete, metadata merge patch (RFC 7396), renew-expiration, endpoints (44772/18080,
format from pod_url, other ports, `expires`), `POST /v1/metrics/events`."""
import datetime
import json
import urllib.parse

import pytest

import execlib
import oslib
import shlib
from oslib import expect, expect_400

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")


def mfilter(md):
    """The SDK's encoding of a metadata filter: one form value `k=v&k2=v2`, percent-encoded
    once more as a query value (encodeURIComponent)."""
    return urllib.parse.quote("&".join("%s=%s" % kv for kv in md.items()), safe="")


def listing(osc, query=""):
    r = osc.get("/v1/sandboxes" + (("?" + query) if query else ""))
    return expect(r, 200)


def ids_of(page):
    return [s["id"] for s in page["items"]]


@pytest.fixture
def trio(osc):
    """Three sandboxes tagged with a fresh run tag, created in order a, b, c."""
    tag = oslib.uniq("run")
    made = []
    for role, env in (("a", "dev"), ("b", "prod"), ("c", "dev")):
        made.append(osc.create_ok(metadata={"run": tag, "role": role, "env": env}))
    yield tag, made
    for j in made:
        osc.kill(j["id"])


# ---- list -------------------------------------------------------------------------------------

def test_list_answers_items_and_pagination_with_the_defaults(osc, sbx):
    page = listing(osc)
    assert page["pagination"]["page"] == 1
    assert page["pagination"]["pageSize"] == 20
    assert sbx["id"] in ids_of(page) or page["pagination"]["totalItems"] > 20


def test_list_metadata_filter_is_an_and_of_pairs(osc, trio):
    tag, (a, b, c) = trio
    assert ids_of(listing(osc, "metadata=" + mfilter({"run": tag}))) == [a["id"], b["id"], c["id"]]
    assert ids_of(listing(osc, "metadata=" + mfilter({"run": tag, "env": "dev"}))) == \
        [a["id"], c["id"]]
    assert ids_of(listing(osc, "metadata=" + mfilter({"run": tag, "env": "dev",
                                                       "role": "c"}))) == [c["id"]]
    assert ids_of(listing(osc, "metadata=" + mfilter({"run": tag, "env": "qa"}))) == []
    # a key alone matches nothing unless the value is empty too
    assert ids_of(listing(osc, "metadata=" + mfilter({"run": tag, "role": ""}))) == []


def test_list_state_filter_is_an_or_of_states(osc, trio):
    tag, (a, b, c) = trio
    expect(osc.post("/v1/sandboxes/%s/pause" % b["id"]), 202)
    osc.wait_state(b["id"], "Paused")
    mf = "metadata=" + mfilter({"run": tag})
    assert ids_of(listing(osc, mf + "&state=Running")) == [a["id"], c["id"]]
    assert ids_of(listing(osc, mf + "&state=Paused")) == [b["id"]]
    assert ids_of(listing(osc, mf + "&state=Running&state=Paused")) == \
        [a["id"], b["id"], c["id"]]
    assert ids_of(listing(osc, mf + "&state=Terminated")) == []


def test_list_is_oldest_first_and_paginates(osc, trio):
    tag, (a, b, c) = trio
    mf = "metadata=" + mfilter({"run": tag})
    p1 = listing(osc, mf + "&pageSize=2")
    assert ids_of(p1) == [a["id"], b["id"]]
    assert p1["pagination"] == {"page": 1, "pageSize": 2, "totalItems": 3, "totalPages": 2,
                                "hasNextPage": True}
    p2 = listing(osc, mf + "&pageSize=2&page=2")
    assert ids_of(p2) == [c["id"]]
    assert p2["pagination"] == {"page": 2, "pageSize": 2, "totalItems": 3, "totalPages": 2,
                                "hasNextPage": False}
    # INTERPRETATION: a page past the end is an empty page, not an error
    p3 = listing(osc, mf + "&pageSize=2&page=3")
    assert ids_of(p3) == [] and p3["pagination"]["hasNextPage"] is False
    one = listing(osc, mf + "&pageSize=1&page=3")
    assert ids_of(one) == [c["id"]]
    assert listing(osc, mf + "&pageSize=200")["pagination"]["pageSize"] == 200
    created = [oslib.parse_time(s["createdAt"]) for s in listing(osc, mf)["items"]]
    assert created == sorted(created)


def test_list_items_are_full_sandboxes(osc, trio):
    tag, made = trio
    for it in listing(osc, "metadata=" + mfilter({"run": tag}))["items"]:
        assert it["image"] == {"uri": "default"}
        assert it["entrypoint"] == ["tail", "-f", "/dev/null"]
        assert it["metadata"]["run"] == tag


def test_list_with_no_match_is_an_empty_page(osc):
    page = listing(osc, "metadata=" + mfilter({"run": oslib.uniq("none")}))
    assert page["items"] == []
    assert page["pagination"]["totalItems"] == 0
    assert page["pagination"]["hasNextPage"] is False


@pytest.mark.parametrize("query", ["page=0", "page=-1", "page=x", "page=1.5", "pageSize=0",
                                   "pageSize=201", "pageSize=-3", "pageSize=ten",
                                   "pageSize=1e2"])
def test_list_pagination_out_of_bounds_is_400_invalid_request(osc, query):
    expect_400(osc.get("/v1/sandboxes?" + query))


def test_list_metadata_filter_that_is_not_pairs_is_400(osc):
    # INTERPRETATION: a metadata filter value that is not form-encoded k=v pairs is a bad
    # request (INVALID_REQUEST or INVALID_METADATA_FORMAT)
    r = osc.get("/v1/sandboxes?metadata=" + urllib.parse.quote("%zz", safe=""))
    expect_400(r, ("INVALID_REQUEST", "INVALID_METADATA_FORMAT"))


# ---- delete -----------------------------------------------------------------------------------

def test_delete_answers_204_then_the_sandbox_is_gone(daemon, osc):
    j = osc.create_ok()
    sid = j["id"]
    uid = execlib.sandbox_uid(osc.native(sid))
    r = osc.delete("/v1/sandboxes/" + sid)
    expect(r, 204)
    assert r.body == b""
    expect(osc.sandbox(sid), 404, "SANDBOX_NOT_FOUND")
    expect(osc.delete("/v1/sandboxes/" + sid), 404, "SANDBOX_NOT_FOUND")
    assert sid not in ids_of(listing(osc, "pageSize=200"))
    assert not (daemon.root / sid).exists()
    left = execlib.wait_gone(lambda: execlib.host_procs_of_uid(uid), timeout=10)
    execlib.kill_pids([p[0] for p in left], osc.c.daemon_pid)
    assert not left, "processes of the deleted sandbox remain: %r" % left


def test_delete_persists_nothing(start_daemon, tmp_path):
    nfs = tmp_path / "nfs"
    nfs.mkdir()
    d = start_daemon(env={"SANDBOX_HOST_NFS_ROOT": str(nfs)})
    osc = oslib.os_client(d)
    j = osc.create_ok()
    osc.native(j["id"]).put_ok("keep.txt", b"x")
    expect(osc.delete("/v1/sandboxes/" + j["id"]), 204)
    assert [p for p in nfs.rglob("*") if p.name == "keep.txt"] == []


# ---- metadata merge patch ---------------------------------------------------------------------

def _patch(osc, sid, body):
    return osc.patch("/v1/sandboxes/%s/metadata" % sid, body)


def test_patch_follows_rfc_7396(osc):
    j = osc.create_ok(metadata={"keep": "k", "change": "old", "drop": "d"})
    sid = j["id"]
    try:
        g = expect(_patch(osc, sid, {"change": "new", "drop": None, "add": "a",
                                     "absent-null": None}), 200)
        assert g["id"] == sid and g["status"]["state"] == "Running"
        assert g["entrypoint"] == ["tail", "-f", "/dev/null"]
        assert g["metadata"] == {"keep": "k", "change": "new", "add": "a"}
        assert osc.sandbox_ok(sid)["metadata"] == g["metadata"]
        # {} is a no-op answering the full sandbox
        g2 = expect(_patch(osc, sid, {}), 200)
        assert g2["metadata"] == g["metadata"]
        # removing everything leaves an empty map
        g3 = expect(_patch(osc, sid, {"keep": None, "change": None, "add": None}), 200)
        assert g3.get("metadata", {}) == {}
    finally:
        osc.kill(sid)


@pytest.mark.parametrize("body", [{"opensandbox.io/x": "y"}, {"bad key": "v"}, {"k": "bad value"},
                                  {"k": "v" * 64}, {"-k": "v"}])
def test_patch_validates_like_create(osc, sbx, body):
    before = osc.sandbox_ok(sbx["id"])["metadata"]
    expect(_patch(osc, sbx["id"], dict(body, fine="yes")), 400, "INVALID_METADATA_FORMAT")
    # INTERPRETATION: all or nothing: the valid key of a refused patch is not applied
    assert osc.sandbox_ok(sbx["id"])["metadata"] == before


@pytest.mark.parametrize("body", [["a"], "a=b", 5, {"k": 5}, {"k": ["v"]}, {"k": {"v": 1}}])
def test_patch_body_that_is_no_metadata_object_is_400(osc, sbx, body):
    r = osc.request("PATCH", "/v1/sandboxes/%s/metadata" % sbx["id"],
                    body=json.dumps(body),
                    headers={"Content-Type": "application/json"})
    expect_400(r, ("INVALID_REQUEST", "INVALID_METADATA_FORMAT"))


# ---- renew-expiration ------------------------------------------------------------------------

def _renew(osc, sid, when):
    return osc.post("/v1/sandboxes/%s/renew-expiration" % sid, {"expiresAt": when})


def test_renew_sets_expires_at(osc, sbx):
    want = oslib.utcnow().replace(microsecond=0) + datetime.timedelta(hours=2)
    j = expect(_renew(osc, sbx["id"], oslib.rfc3339(want)), 200)
    assert set(j) == {"expiresAt"}
    assert abs((oslib.parse_time(j["expiresAt"]) - want).total_seconds()) < 1
    g = osc.sandbox_ok(sbx["id"])
    assert abs((oslib.parse_time(g["expiresAt"]) - want).total_seconds()) < 1


@pytest.mark.parametrize("form", ["%Y-%m-%dT%H:%M:%S.{ms}Z", "%Y-%m-%dT%H:%M:%S+02:00",
                                  "%Y-%m-%dT%H:%M:%SZ"])
def test_renew_accepts_rfc_3339_forms_the_sdks_send(osc, sbx, form):
    # the JS SDK sends Date.toISOString(): milliseconds and Z
    base = oslib.utcnow() + datetime.timedelta(hours=1)
    if "+02:00" in form:
        base = base.astimezone(datetime.timezone(datetime.timedelta(hours=2)))
    text = base.strftime(form.replace("{ms}", "%03d" % (base.microsecond // 1000)))
    j = expect(_renew(osc, sbx["id"], text), 200)
    assert abs((oslib.parse_time(j["expiresAt"]) - oslib.parse_time(text)).total_seconds()) < 1


@pytest.mark.parametrize("body", [{"expiresAt": "tomorrow"}, {"expiresAt": 1700000000},
                                  {"expiresAt": "2026-01-02 03:04:05"}, {}, {"expiresAt": None}])
def test_renew_with_a_bad_time_is_400(osc, sbx, body):
    expect_400(osc.post("/v1/sandboxes/%s/renew-expiration" % sbx["id"], body))


def test_renew_to_the_past_is_400(osc, sbx):
    before = osc.sandbox_ok(sbx["id"])["expiresAt"]
    expect_400(_renew(osc, sbx["id"], oslib.in_seconds(-60)))
    assert osc.sandbox_ok(sbx["id"])["expiresAt"] == before


def test_renew_of_a_sandbox_without_expiry_is_409_invalid_state(osc):
    j = osc.create_ok(timeout=oslib.DROP)
    try:
        assert "expiresAt" not in j
        expect(_renew(osc, j["id"], oslib.in_seconds(3600)), 409, "INVALID_STATE")
        assert "expiresAt" not in osc.sandbox_ok(j["id"])
    finally:
        osc.kill(j["id"])


def test_renew_beyond_the_ceiling_is_400(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_MAX_TIMEOUT": "1h"})
    osc = oslib.os_client(d)
    j = osc.create_ok(timeout=600)
    # INTERPRETATION: "within the ceiling": no later than now + SANDBOX_HOST_MAX_TIMEOUT
    # (the test stays far from the edge either way)
    expect_400(_renew(osc, j["id"], oslib.in_seconds(10 * 86400)))
    expect(_renew(osc, j["id"], oslib.in_seconds(1800)), 200)


# ---- endpoints -------------------------------------------------------------------------------

@pytest.mark.parametrize("port", [44772, 18080])
def test_endpoint_is_the_pod_url_host_and_the_proxy_path(daemon, osc, sbx, port):
    e = expect(osc.endpoint(sbx["id"], port), 200)
    assert e["endpoint"] == "%s/v1/sandboxes/%s/proxy/%d" % (oslib.pod_base(daemon), sbx["id"],
                                                             port)
    # use_server_proxy changes nothing
    e2 = expect(osc.endpoint(sbx["id"], port, "?use_server_proxy=true"), 200)
    e3 = expect(osc.endpoint(sbx["id"], port, "?use_server_proxy=false"), 200)
    assert e2["endpoint"] == e3["endpoint"] == e["endpoint"]


def test_endpoint_keeps_the_pod_url_path_prefix(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_POD_URL": "http://pod-7.example.internal:9999/base/path"})
    osc = oslib.os_client(d)
    j = osc.create_ok()
    for port in (44772, 18080):
        e = expect(osc.endpoint(j["id"], port), 200)
        assert e["endpoint"] == "pod-7.example.internal:9999/base/path/v1/sandboxes/%s/proxy/%d" \
            % (j["id"], port), e


def test_the_execd_endpoint_is_reachable_as_the_sdk_uses_it(daemon, osc, sbx):
    """The SDK calls `http://` + endpoint + `/ping` (its health check)."""
    e = expect(osc.endpoint(sbx["id"], 44772), 200)
    host_port, _, path = e["endpoint"].partition("/")
    assert host_port == oslib.pod_base(daemon)
    expect(osc.get("/" + path + "/ping"), 200)


@pytest.mark.parametrize("port", [8080, 80, 1, 65535, 44771, 18081])
def test_other_ports_are_404_not_supported(osc, sbx, port):
    expect(osc.endpoint(sbx["id"], port), 404, "NOT_SUPPORTED")


def test_signed_endpoint_expires_is_400_not_supported(osc, sbx):
    expect(osc.endpoint(sbx["id"], 44772, "?expires=1900000000"), 400, "NOT_SUPPORTED")


def test_endpoint_of_a_paused_sandbox_is_still_answered(osc, sbx):
    # the SDK's resume() reconnects through the endpoint look-up
    expect(osc.post("/v1/sandboxes/%s/pause" % sbx["id"]), 202)
    osc.wait_state(sbx["id"], "Paused")
    expect(osc.endpoint(sbx["id"], 44772), 200)


# ---- metrics events ---------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    {"eventType": "sandbox.create", "createDurationMs": 215, "success": True,
     "sandboxId": "abc", "image": "default"},
    {"eventType": "sandbox.create", "createDurationMs": 3, "success": False, "image": "x"},
    {},
])
def test_metrics_events_are_accepted_with_204(osc, body):
    r = osc.post("/v1/metrics/events", body, headers={"User-Agent": "OpenSandbox-JS-SDK/0.1.11"})
    expect(r, 204)
    assert r.body == b""


# ---- merge patch, one rule a test (issue 20, finding 16) ------------------------------------

def _md(osc, sid):
    return osc.sandbox_ok(sid).get("metadata", {})


@pytest.fixture
def tagged(osc):
    j = osc.create_ok(metadata={"a": "1", "b": "2", "c": "3"})
    yield j["id"]
    osc.kill(j["id"])


def test_patch_null_removes_that_key_only(osc, tagged):
    g = expect(_patch(osc, tagged, {"b": None}), 200)
    assert g["metadata"] == {"a": "1", "c": "3"}
    assert _md(osc, tagged) == {"a": "1", "c": "3"}
    # null for a key that is not there is no error and no change
    assert expect(_patch(osc, tagged, {"nope": None}), 200)["metadata"] == {"a": "1", "c": "3"}


def test_patch_keeps_every_key_it_does_not_name(osc, tagged):
    g = expect(_patch(osc, tagged, {"b": "two", "d": "4"}), 200)
    assert g["metadata"] == {"a": "1", "b": "two", "c": "3", "d": "4"}
    assert _md(osc, tagged) == g["metadata"]


def test_an_empty_patch_changes_nothing_and_answers_the_full_sandbox(osc, tagged):
    before = osc.sandbox_ok(tagged)
    g = expect(_patch(osc, tagged, {}), 200)
    assert g["metadata"] == {"a": "1", "b": "2", "c": "3"}
    assert g["id"] == tagged and g["status"]["state"] == "Running"
    assert g["expiresAt"] == before["expiresAt"] and g["image"] == before["image"]


def test_patch_to_an_empty_string_sets_it_never_removes_it(osc, tagged):
    # a label value may be empty: "" is a value, only null removes
    assert expect(_patch(osc, tagged, {"a": ""}), 200)["metadata"] == {"a": "", "b": "2",
                                                                       "c": "3"}


def test_a_patch_with_a_reserved_key_applies_none_of_its_changes(osc, tagged):
    for bad in ({"opensandbox.io/owner": "me", "a": None, "d": "4"},
                {"a": None, "x.opensandbox.io/ok": "fine", "opensandbox.io/x": "y"}):
        expect(_patch(osc, tagged, bad), 400, "INVALID_METADATA_FORMAT")
        assert _md(osc, tagged) == {"a": "1", "b": "2", "c": "3"}


def test_the_bound_applies_to_the_merged_map(osc):
    """128 pairs at most: a new key onto a full map is refused, a change of a held key or a
    removal with an addition is not (the bound is the merged result's, not the patch's)."""
    full = {"k%03d" % i: "v" for i in range(128)}
    j = osc.create_ok(metadata=full)
    sid = j["id"]
    try:
        expect(_patch(osc, sid, {"one-more": "v"}), 400, "INVALID_METADATA_FORMAT")
        assert _md(osc, sid) == full
        assert expect(_patch(osc, sid, {"k000": "changed"}), 200)["metadata"]["k000"] == \
            "changed"
        g = expect(_patch(osc, sid, {"k001": None, "one-more": "v"}), 200)["metadata"]
        assert len(g) == 128 and "one-more" in g and "k001" not in g
    finally:
        osc.kill(sid)


# ---- renew-expiration, one rule a test ---------------------------------------------------------

def test_a_refused_renew_changes_nothing(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_MAX_TIMEOUT": "1h"})
    osc = oslib.os_client(d)
    j = osc.create_ok(timeout=600)
    sid = j["id"]
    for when in (oslib.in_seconds(-5), oslib.in_seconds(2 * 3600), "2026-13-01T00:00:00Z"):
        expect_400(_renew(osc, sid, when))
        assert osc.sandbox_ok(sid)["expiresAt"] == j["expiresAt"], when


@pytest.mark.parametrize("when", ["2026-13-02T03:04:05Z", "2025-02-29T00:00:00Z",
                                  "2026-01-02T03:04:05", "2026-01-02T03:04:05+0200",
                                  "2026-01-02T25:00:00Z", "2026-01-02T03:04:05Zjunk", ""])
def test_renew_with_a_time_that_is_not_rfc_3339_is_400(osc, sbx, when):
    before = osc.sandbox_ok(sbx["id"])["expiresAt"]
    expect_400(_renew(osc, sbx["id"], when))
    assert osc.sandbox_ok(sbx["id"])["expiresAt"] == before


def test_renew_within_the_ceiling_is_honoured_exactly(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_MAX_TIMEOUT": "1h"})
    osc = oslib.os_client(d)
    j = osc.create_ok(timeout=600)
    want = oslib.utcnow().replace(microsecond=0) + datetime.timedelta(seconds=3500)
    got = expect(_renew(osc, j["id"], oslib.rfc3339(want)), 200)["expiresAt"]
    assert abs((oslib.parse_time(got) - want).total_seconds()) < 1
    assert osc.sandbox_ok(j["id"])["expiresAt"] == got
