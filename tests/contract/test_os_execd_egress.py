"""OPENSANDBOX.md sections 1, 3 (what issue 12 owns of it) and 4: a sandbox's execd under
`/v1/sandboxes/{id}/proxy/44772/…` and its egress API under `…/proxy/18080/…`, served by the
daemon itself. `GET /ping` -> 200 empty; `/v1/isolated…` -> 501 NOT_SUPPORTED at once, never (`/code…` is test_os_code.py's)
reading a body (the files and directories of issue 14 are test_os_files*.py). Egress: `GET /policy`,
`PATCH /policy` deny-only, `DELETE /policy`, credential vault -> 501. These daemons run without
network (SANDBOX_HOST_EGRESS=off, shlib.base_env): the policy is deny-all, enforcementMode "none"
(section 4, "Without egress support"); the egress of a sandbox with network is
test_os_egress_net.py's."""
import pytest

import shlib
from oslib import expect

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CALL = 5.0  # every call is bounded: an answer, never a hang

POLICY = {"status": "ok", "mode": "deny_all", "enforcementMode": "none",
          "policy": {"defaultAction": "deny", "egress": []}}


def test_ping_is_200_empty(osc, sbx):
    r = osc.execd(sbx["id"], "GET", "/ping", timeout=CALL)
    expect(r, 200)
    assert r.body == b""
    assert r.header_all("Content-Length") == ["0"]


def test_ping_answers_the_sdk_health_check_form(osc, sbx):
    # what the SDK sends (tests/opensandbox/sdk_wire.test.mjs): its own headers and the
    # client-IP header, no body
    r = osc.execd(sbx["id"], "GET", "/ping", timeout=CALL,
                  headers={"User-Agent": "OpenSandbox-JS-SDK/0.1.11",
                           "OPEN-SANDBOX-CLIENT-IP": "192.0.2.2", "Accept": "*/*"})
    expect(r, 200)


@pytest.mark.parametrize("method,sub,body", [
    ("GET", "/v1/isolated/capabilities", None),
    ("POST", "/v1/isolated/sessions", {}),
])
def test_isolated_routes_are_501_not_supported(osc, sbx, method, sub, body):
    r = osc.execd(sbx["id"], method, sub, body=body, timeout=CALL)
    expect(r, 501, "NOT_SUPPORTED")


def test_a_declared_gigabyte_to_an_unserved_route_is_answered_before_its_body(daemon, sbx):
    """The 501 comes before any body byte is read: a client that declares 1 GiB and sends a
    few bytes gets its answer, and the daemon never waits for (or buffers) the rest."""
    head = ("POST /v1/sandboxes/%s/proxy/44772/v1/isolated/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (sbx["id"], 1 << 30)).encode()
    raw = shlib.raw_exchange(daemon.port, head + b"{", read_timeout=CALL)
    assert raw.startswith(b"HTTP/1.1 501"), raw[:300]
    assert b'"NOT_SUPPORTED"' in raw and b"X-Request-ID" in raw, raw[:600]


def test_execd_routes_of_an_unknown_sandbox_are_404(osc):
    for sub in ("/ping", "/command", "/files/info?path=/"):
        r = osc.execd("f" * 40, "GET", sub, timeout=CALL)
        assert r.status == 404, r


def test_execd_routes_of_a_deleted_sandbox_are_404(osc):
    j = osc.create_ok()
    expect(osc.delete("/v1/sandboxes/" + j["id"]), 204)
    assert osc.execd(j["id"], "GET", "/ping", timeout=CALL).status == 404
    assert osc.egress(j["id"], "GET", "/policy", timeout=CALL).status == 404


def test_proxy_on_another_port_is_not_a_route_of_the_sandbox(osc, sbx):
    # INTERPRETATION: only 44772 and 18080 are served; any other port under /proxy is a 404
    # of the /v1 surface (the endpoint look-up answers 404 NOT_SUPPORTED for it)
    r = osc.get("/v1/sandboxes/%s/proxy/8080/ping" % sbx["id"], timeout=CALL)
    assert r.status == 404, r


# ---- egress -------------------------------------------------------------------------------------

def test_get_policy_without_network_says_deny_all_enforced_by_none(osc, sbx):
    r = osc.egress(sbx["id"], "GET", "/policy", timeout=CALL)
    assert expect(r, 200) == POLICY


def test_patch_policy_with_deny_rules_is_200_and_the_same_status(osc, sbx):
    r = osc.egress(sbx["id"], "PATCH", "/policy", timeout=CALL,
                   body=[{"action": "deny", "target": "example.com"},
                         {"action": "deny", "target": "*.bad.org"}])
    j = expect(r, 200)
    for k in ("status", "mode", "enforcementMode"):
        assert j[k] == POLICY[k], j
    assert expect(osc.egress(sbx["id"], "GET", "/policy"), 200)["mode"] == "deny_all"


@pytest.mark.parametrize("rules", [[{"action": "allow", "target": "pypi.org"}],
                                   [{"action": "deny", "target": "a.com"},
                                    {"action": "allow", "target": "b.com"}]])
def test_patch_policy_with_an_allow_rule_is_400_not_supported(osc, sbx, rules):
    r = osc.egress(sbx["id"], "PATCH", "/policy", body=rules, timeout=CALL)
    expect(r, 400, "NOT_SUPPORTED")
    assert expect(osc.egress(sbx["id"], "GET", "/policy"), 200) == POLICY


@pytest.mark.parametrize("body", [{"action": "deny", "target": "x.com"}, [{"target": "x.com"}],
                                  [{"action": "block", "target": "x.com"}], "deny", []])
def test_patch_policy_with_a_malformed_body_is_400(osc, sbx, body):
    r = osc.egress(sbx["id"], "PATCH", "/policy", body=body, timeout=CALL)
    # INTERPRETATION: no code is named for a malformed egress body; a 400 with
    # {code, message}. An empty list breaks the YAML's minItems: 1.
    assert r.status == 400, r


def test_delete_policy_is_200(osc, sbx):
    r = osc.egress(sbx["id"], "DELETE", "/policy", body=["example.com", "*.bad.org"],
                   timeout=CALL)
    j = expect(r, 200)
    assert j["status"] == "ok" and j["mode"] == "deny_all", j
    assert expect(osc.egress(sbx["id"], "GET", "/policy"), 200) == POLICY


@pytest.mark.parametrize("method,sub", [("POST", "/credential-vault"),
                                        ("GET", "/credential-vault"),
                                        ("PATCH", "/credential-vault"),
                                        ("DELETE", "/credential-vault"),
                                        ("GET", "/credential-vault/credentials"),
                                        ("GET", "/credential-vault/credentials/tok"),
                                        ("GET", "/credential-vault/bindings"),
                                        ("GET", "/credential-vault/bindings/b1")])
def test_credential_vault_routes_are_501(osc, sbx, method, sub):
    body = {"credentials": [], "bindings": []} if method in ("POST", "PATCH") else None
    r = osc.egress(sbx["id"], method, sub, body=body, timeout=CALL)
    expect(r, 501, "NOT_SUPPORTED")


def test_policy_while_paused_still_answers(osc, sbx):
    # INTERPRETATION: the paused rule (409 SANDBOX_PAUSED) is stated for execd routes only;
    # the egress answer is the daemon's own and needs nothing of the sandbox, so it is not
    # asserted either way beyond "an answer, never a hang".
    expect(osc.post("/v1/sandboxes/%s/pause" % sbx["id"]), 202)
    osc.wait_state(sbx["id"], "Paused")
    r = osc.egress(sbx["id"], "GET", "/policy", timeout=CALL)
    assert r.status in (200, 409), r
