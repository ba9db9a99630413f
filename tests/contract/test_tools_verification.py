"""Tool verification is strong by default (issue 10, item 1): without trusted publisher keys
(SANDBOX_HOST_TOOL_KEYS) a manifest and its bundle, and every redirect on the way, must come
over https, or from a loopback host (127.0.0.0/8, [::1], localhost) that no network path
carries. SANDBOX_HOST_TOOL_INSECURE_HTTP=on allows plain http elsewhere. A refused fetch is a
per-tool refusal with the reason, decided before anything connects, never a 500.

The tests cannot reach other hosts. They use http://0.0.0.0:PORT/ for "another host": it is not
a loopback name, so the rule refuses it, yet Linux delivers a connection to it to this
machine's loopback, where the test's artifact server would see any request that got through.
"""
from tools_lib import Ed25519Key, make_manifest, publish, resolve_ok, sha256, standard_bundle


def other_host(store, path):
    """The store's URL for `path` through a name that is not loopback."""
    return "http://0.0.0.0:%d%s" % (store.port, path)


def assert_https_refusal(reason):
    assert "https" in reason and "SANDBOX_HOST_TOOL_INSECURE_HTTP" in reason, reason
    # decided by the rule, not by a failed connection (and so never the stale fallback)
    assert "cannot reach" not in reason and "no earlier" not in reason, reason


def test_plain_http_to_another_host_refused_without_connecting(daemon, store):
    murl, sha, _ = publish(store, "/other", standard_bundle("other"))
    body = resolve_ok(daemon.client, {
        "other": other_host(store, "/other/manifest.json"),
        "testnet": "http://203.0.113.7/manifest.json",
        "dns": "http://tools.example.invalid/manifest.json",
        "loopback-lookalike": "http://127.0.0.1.example.invalid/manifest.json"})
    assert body["tools"] == {}, body
    for name in ("other", "testnet", "dns", "loopback-lookalike"):
        assert_https_refusal(body["refused"][name])
    assert "/other/manifest.json" not in store.hits, store.hits  # nothing connected


def test_redirect_to_plain_http_elsewhere_refused(daemon, store):
    murl, sha, _ = publish(store, "/target", standard_bundle("target"))
    redir = store.put("/redir-out", b"", status=302,
                      headers={"Location": other_host(store, "/target/manifest.json")})
    body = resolve_ok(daemon.client, {"r": redir})
    assert body["tools"] == {}, body
    assert_https_refusal(body["refused"]["r"])
    assert "redirect" in body["refused"]["r"], body
    assert store.hits.get("/redir-out") == 1
    assert "/target/manifest.json" not in store.hits, store.hits


def test_bundle_over_plain_http_elsewhere_refused(daemon, store):
    bundle = standard_bundle("bundle-out")
    sha = sha256(bundle)
    store.put("/bo/b.tgz", bundle)
    murl = store.put("/bo/m.json", make_manifest(other_host(store, "/bo/b.tgz"), sha))
    body = resolve_ok(daemon.client, {"b": murl})
    assert body["tools"] == {}, body
    assert_https_refusal(body["refused"]["b"])
    assert "bundle" in body["refused"]["b"], body
    assert "/bo/b.tgz" not in store.hits, store.hits


def test_loopback_names_allowed_over_plain_http(daemon, store):
    murl, sha, _ = publish(store, "/lo", standard_bundle("lo"))
    body = resolve_ok(daemon.client, {
        "ip": murl, "name": "http://localhost:%d/lo/manifest.json" % store.port})
    assert body["refused"] == {}, body
    assert body["tools"]["ip"]["sha"] == body["tools"]["name"]["sha"] == sha


def test_insecure_http_setting_allows_other_hosts(start_daemon, store):
    d = start_daemon(env={"SANDBOX_HOST_TOOL_INSECURE_HTTP": "on"})
    bundle = standard_bundle("insecure")
    sha = sha256(bundle)
    store.put("/in/b.tgz", bundle)
    store.put("/in/m.json", make_manifest(other_host(store, "/in/b.tgz"), sha))
    redir = store.put("/in/r", b"", status=302,
                      headers={"Location": other_host(store, "/in/m.json")})
    body = resolve_ok(d.client, {"t": other_host(store, "/in/m.json"), "r": redir})
    assert body["refused"] == {}, body
    assert body["tools"]["t"]["sha"] == body["tools"]["r"]["sha"] == sha


def test_signed_manifests_may_use_plain_http(start_daemon, store, tmp_path):
    key = Ed25519Key(tmp_path)
    keys = tmp_path / "keys"
    keys.write_text(key.public_b64 + "\n")
    d = start_daemon(env={"SANDBOX_HOST_TOOL_KEYS": str(keys)})
    bundle = standard_bundle("signed-http")
    sha = sha256(bundle)
    store.put("/sh/b.tgz", bundle)
    man = make_manifest(other_host(store, "/sh/b.tgz"), sha)
    store.put("/sh/m.json", man)
    store.put("/sh/m.json.sig", key.sign(man))
    body = resolve_ok(d.client, {"s": other_host(store, "/sh/m.json")})
    assert body["refused"] == {}, body
    assert body["tools"]["s"]["sha"] == sha
