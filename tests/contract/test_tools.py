"""POST /tools/resolve (CONTRACT.md section 6) against the built daemon over real HTTP, with a
local artifact store on 127.0.0.1 (tools_lib.ArtifactServer). Covers: success and the store
layout, request validation, checksum mismatch, signatures, tar-slip and other unsafe bundles,
a slow store, parallel fetching, the stale fallback and its cache across restarts, mixed
requests, one install for concurrent resolves, and running a resolved tool in a sandbox.
"""
import json
import os
import shutil
import stat
import tarfile
import threading
import time

import pytest

import shlib
from tools_lib import (ArtifactServer, Ed25519Key, HELLO_SCRIPT, exec_final,
                       make_bundle, make_header_only_bundle, make_manifest, publish,
                       resolve_ok, sha256, standard_bundle)


def installed(daemon, sha):
    return daemon.root / "tools" / sha


def stage_empty(daemon):
    st = daemon.root / "tools" / ".stage"
    return shlib.wait_until(lambda: not os.path.isdir(st) or not os.listdir(st), timeout=10)


# ---- success ------------------------------------------------------------------------------

def test_success_layout_and_passthrough(daemon, store):
    bundle = standard_bundle("ok")
    commands = [{"name": "run", "description": "x", "schema": {"a": [1, 2.5, None, True]}},
                "plain string", 42]
    murl, sha, _ = publish(store, "/ok", bundle, version="2.3.4", commands=commands)
    body = resolve_ok(daemon.client, {"hello": murl})
    assert body["refused"] == {}
    t = body["tools"]["hello"]
    assert t == {"sha": sha, "version": "2.3.4", "stale": False, "commands": commands}
    d = installed(daemon, sha)
    assert (d / "bin" / "hello").read_bytes() == HELLO_SCRIPT
    assert (d / "share" / "data.txt").read_bytes() == b"data-ok"
    assert os.readlink(d / "bin" / "hello-link") == "hello"
    # normalised modes: readable by every sandbox uid, executable kept, nothing writable by
    # others, no setuid
    m = os.stat(d / "bin" / "hello").st_mode
    assert stat.S_IMODE(m) == 0o755, oct(m)
    assert stat.S_IMODE(os.stat(d / "share" / "data.txt").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o755
    if os.geteuid() == 0:
        # unpacked by an unprivileged uid (uid_base - 1, not a sandbox's), then every entry
        # handed to root before the install (issue 10: nothing under /tools stays the
        # unpacker's)
        assert os.stat(d / "bin" / "hello").st_uid == 0
        assert os.lstat(d / "bin" / "hello-link").st_uid == 0
        assert os.stat(d).st_uid == 0
    # the cache and staging areas are private to the host
    for priv in (".cache", ".stage"):
        assert stat.S_IMODE(os.stat(daemon.root / "tools" / priv).st_mode) == 0o700
    assert stage_empty(daemon)
    # a second resolve uses the store: the bundle is not downloaded again
    hits = store.hits.get("/ok/bundle.tar.gz")
    body = resolve_ok(daemon.client, {"again": murl})
    assert body["tools"]["again"]["sha"] == sha
    assert store.hits.get("/ok/bundle.tar.gz") == hits


def test_relative_bundle_url(daemon, store):
    bundle = standard_bundle("rel")
    sha = sha256(bundle)
    store.put("/rel/v1/b.tgz", bundle)
    murl = store.put("/rel/v1/m.json", make_manifest("b.tgz", sha.upper()))
    body = resolve_ok(daemon.client, {"rel": murl})
    assert body["tools"]["rel"]["sha"] == sha  # lower-case hex whatever the manifest said


# ---- request validation -------------------------------------------------------------------

@pytest.mark.parametrize("body", [{}, {"tools": None}, {"tools": []}, {"tools": "x"},
                                  {"tools": {"a": 1}}, {"tools": {"a": None}},
                                  {"tools": {"a": ["http://x"]}}, {"other": {}}])
def test_bad_requests_are_400(client, body):
    shlib.assert_error(client.post("/tools/resolve", body=body), 400, "BadRequest")


def test_empty_tools_and_duplicate_names(client):
    r = client.post("/tools/resolve", body={"tools": {}})
    assert shlib.assert_json(r) == {"tools": {}, "refused": {}}
    r = client.post("/tools/resolve", body='{"tools": {"a": "http://x/", "a": "http://y/"}}',
                    headers={"Content-Type": "application/json"})
    shlib.assert_error(r, 400, "BadRequest")


def test_bad_urls_refused(daemon, store):
    body = resolve_ok(daemon.client, {
        "file": "file:///etc/passwd", "gopher": "gopher://127.0.0.1/", "junk": "not a url",
        "empty": "", "long": "http://127.0.0.1/" + "a" * 5000})
    assert body["tools"] == {}
    assert "http" in body["refused"]["file"]


def test_redirects_http_only(daemon, store):
    murl, sha, _ = publish(store, "/redir-ok", standard_bundle("redir"))
    ok = store.put("/redir/ok", b"", status=302, headers={"Location": murl})
    to_file = store.put("/redir/file", b"", status=302, headers={"Location": "file:///etc/passwd"})
    body = resolve_ok(daemon.client, {"ok": ok, "file": to_file})
    assert body["tools"]["ok"]["sha"] == sha, body
    assert "file" in body["refused"], body


# ---- refusals that are never stale ----------------------------------------------------------

def test_checksum_mismatch(daemon, store):
    bundle = standard_bundle("mm")
    wrong = sha256(b"something else")
    store.put("/mm/b.tgz", bundle)
    murl = store.put("/mm/m.json", make_manifest(store.url("/mm/b.tgz"), wrong))
    body = resolve_ok(daemon.client, {"mm": murl})
    assert body["tools"] == {}
    reason = body["refused"]["mm"]
    assert "checksum" in reason and wrong in reason and sha256(bundle) in reason, reason
    assert not installed(daemon, wrong).exists()
    assert not installed(daemon, sha256(bundle)).exists()


def test_4xx_after_success_is_refused_not_stale(daemon, store):
    murl, sha, _ = publish(store, "/gone", standard_bundle("gone"))
    assert resolve_ok(daemon.client, {"g": murl})["tools"]["g"]["stale"] is False
    store.put("/gone/manifest.json", b"gone", status=404)
    body = resolve_ok(daemon.client, {"g": murl})
    assert body["tools"] == {}
    assert "404" in body["refused"]["g"], body
    store.put("/gone/manifest.json", b"no", status=403)
    body = resolve_ok(daemon.client, {"g": murl})
    assert "403" in body["refused"]["g"], body


def test_bad_manifest_after_success_is_refused(daemon, store):
    murl, sha, _ = publish(store, "/badm", standard_bundle("badm"))
    resolve_ok(daemon.client, {"b": murl})
    for bad in (b"{not json", b"[]", b'{"name": "x", "version": "1", "commands": []}',
                b'{"name": "x", "version": "1", "bundle": {"url": "http://x/", "sha256": "zz"},'
                b' "commands": []}',
                make_manifest(store.url("/badm/bundle.tar.gz"), sha, commands={"not": "array"})):
        store.put("/badm/manifest.json", bad)
        body = resolve_ok(daemon.client, {"b": murl})
        assert body["tools"] == {}, (bad, body)
        assert "manifest" in body["refused"]["b"], body


def test_manifest_too_large(daemon, store):
    murl = store.put("/big/m.json", b"{" + b" " * (1 << 20) + b"}")
    body = resolve_ok(daemon.client, {"big": murl})
    assert "larger" in body["refused"]["big"], body


# ---- unsafe bundles -------------------------------------------------------------------------

def _evil_cases(outside):
    hello = {"bin/hello": (HELLO_SCRIPT, 0o755)}
    return {
        "dotdot": make_bundle(hello, [{"name": "../../evil-dotdot", "data": b"x"}]),
        "dotdot_mid": make_bundle(hello, [{"name": "bin/../../evil-mid", "data": b"x"}]),
        "absolute": make_bundle(hello, [{"name": str(outside / "evil-abs"), "data": b"x"}]),
        "symlink_out_then_file": make_bundle(hello, [
            {"name": "l", "type": tarfile.SYMTYPE, "linkname": str(outside)},
            {"name": "l/evil-through-link", "data": b"x"}]),
        "symlink_etc": make_bundle(hello, [
            {"name": "etc", "type": tarfile.SYMTYPE, "linkname": "/etc"},
            {"name": "etc/sh-ct-evil", "data": b"x"}]),
        "symlink_relative_escape": make_bundle(hello, [
            {"name": "a/l", "type": tarfile.SYMTYPE, "linkname": "../../outside"}]),
        "symlink_dotdot_through_link": make_bundle(hello, [
            {"name": "d", "type": tarfile.SYMTYPE, "linkname": "."},
            {"name": "x", "type": tarfile.SYMTYPE, "linkname": "d/.."}]),
        "hardlink_passwd": make_bundle(hello, [
            {"name": "pw", "type": tarfile.LNKTYPE, "linkname": "/etc/passwd"}]),
        "hardlink_dotdot": make_bundle(hello, [
            {"name": "pw", "type": tarfile.LNKTYPE, "linkname": "../../../../etc/passwd"}]),
        "char_device": make_bundle(hello, [
            {"name": "null", "type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}]),
        "block_device": make_bundle(hello, [
            {"name": "sda", "type": tarfile.BLKTYPE, "devmajor": 8, "devminor": 0}]),
        "fifo": make_bundle(hello, [{"name": "fifo", "type": tarfile.FIFOTYPE}]),
        "too_big": make_header_only_bundle("huge", (1 << 30) + 1),
        "not_tar": b"\x1f\x8b" + b"garbage" * 10,
    }


@pytest.mark.parametrize("case", ["dotdot", "dotdot_mid", "absolute", "symlink_out_then_file",
                                  "symlink_etc", "symlink_relative_escape",
                                  "symlink_dotdot_through_link", "hardlink_passwd",
                                  "hardlink_dotdot", "char_device", "block_device", "fifo",
                                  "too_big", "not_tar"])
def test_unsafe_bundle_refused(daemon, store, outside, case):
    before = shlib.snapshot_tree(outside)
    tools_before = set(os.listdir(daemon.root / "tools"))
    bundle = _evil_cases(outside)[case]
    murl, sha, _ = publish(store, "/evil-" + case, bundle)
    body = resolve_ok(daemon.client, {case: murl})
    assert body["tools"] == {}, body
    assert "unsafe bundle" in body["refused"][case], body
    assert not installed(daemon, sha).exists()
    assert shlib.snapshot_tree(outside) == before
    for p in ("/etc/sh-ct-evil", str(daemon.root / "evil-dotdot"),
              str(daemon.root / "tools" / "evil-dotdot"), str(daemon.root / "evil-mid"),
              str(daemon.root / "tools" / "evil-mid")):
        assert not os.path.lexists(p), p
    assert set(os.listdir(daemon.root / "tools")) == tools_before
    assert stage_empty(daemon), os.listdir(daemon.root / "tools" / ".stage")


def test_too_many_files(daemon, store):
    members = [{"name": "f/%05d" % i} for i in range(20001)]
    bundle = make_bundle({"bin/hello": (HELLO_SCRIPT, 0o755)}, members)
    murl, sha, _ = publish(store, "/many", bundle)
    body = resolve_ok(daemon.client, {"many": murl})
    assert "more than" in body["refused"]["many"], body
    assert not installed(daemon, sha).exists()
    assert stage_empty(daemon)


def test_unsafe_after_success_is_not_stale(daemon, store, outside):
    murl, sha, _ = publish(store, "/flip", standard_bundle("flip"))
    resolve_ok(daemon.client, {"f": murl})
    publish(store, "/flip", _evil_cases(outside)["dotdot"])
    body = resolve_ok(daemon.client, {"f": murl})
    assert body["tools"] == {} and "unsafe" in body["refused"]["f"], body


# ---- slow stores and parallelism ------------------------------------------------------------

def test_slow_store_does_not_stall_the_daemon(daemon, store):
    bundle = standard_bundle("slow")
    sha = sha256(bundle)
    store.put("/slow/b.tgz", bundle)
    murl = store.put("/slow/m.json", make_manifest(store.url("/slow/b.tgz"), sha), delay=3)
    fast_url, _, _ = publish(store, "/fast", standard_bundle("fast"))
    out = {}

    def slow():
        t0 = time.monotonic()
        out["body"] = resolve_ok(daemon.client, {"slow": murl})
        out["dt"] = time.monotonic() - t0

    th = threading.Thread(target=slow)
    th.start()
    time.sleep(0.3)
    for _ in range(5):
        shlib.healthz_ok(daemon.client, timeout=0.5)
    # the fast resolve answers while the slow one still waits for its store (a resolve that
    # waited for the slow store fails its 2 s call timeout)
    body = resolve_ok(daemon.client, {"fast": fast_url}, timeout=2.0)
    assert body["tools"]["fast"]["stale"] is False
    assert th.is_alive(), "the slow resolve finished early?"
    th.join(30)
    assert out["body"]["tools"]["slow"]["sha"] == sha
    assert out["dt"] >= 2.5


def test_client_gone_mid_resolve(daemon, store):
    bundle = standard_bundle("gone-client")
    sha = sha256(bundle)
    store.put("/gc/b.tgz", bundle, delay=1)
    murl = store.put("/gc/m.json", make_manifest(store.url("/gc/b.tgz"), sha), delay=1)
    payload = json.dumps({"tools": {"gc": murl}}).encode()
    req = (b"POST /tools/resolve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(payload)) + payload
    shlib.raw_exchange(daemon.port, req, pre_close_wait=0.3)  # hang up while it fetches
    shlib.healthz_ok(daemon.client, timeout=0.5)
    # the install it started still completes, and a new resolve gets it
    assert shlib.wait_until(lambda: installed(daemon, sha).is_dir(), timeout=10)
    assert resolve_ok(daemon.client, {"gc": murl})["tools"]["gc"]["sha"] == sha


def test_tools_of_one_request_fetch_in_parallel(daemon, store):
    # The store holds the four manifest requests until all four are in flight at once, and
    # then the four bundle requests the same way: fetched one after another, at most one of
    # each would ever be in flight (each then waits out the gate's timeout).
    tools = {}
    for i in range(4):
        bundle = standard_bundle("par%d" % i)
        sha = sha256(bundle)
        store.put("/par%d/b.tgz" % i, bundle)
        tools["t%d" % i] = store.put("/par%d/m.json" % i,
                                     make_manifest(store.url("/par%d/b.tgz" % i), sha))
    manifests = store.gate(["/par%d/m.json" % i for i in range(4)], 4)
    bundles = store.gate(["/par%d/b.tgz" % i for i in range(4)], 4)
    body = resolve_ok(daemon.client, tools)
    assert set(body["tools"]) == set(tools), body
    assert manifests.most == 4, "manifests fetched %d at a time, not in parallel" % manifests.most
    assert bundles.most == 4, "bundles fetched %d at a time, not in parallel" % bundles.most


def test_same_bundle_concurrently_installed_once(daemon, store):
    bundle = standard_bundle("same")
    sha = sha256(bundle)
    store.put("/same/b.tgz", bundle, delay=1)
    urls = {"s%d" % i: store.put("/same/m%d.json" % i,
                                 make_manifest(store.url("/same/b.tgz"), sha, version=str(i)))
            for i in range(3)}
    results = []

    def go(name):
        results.append(resolve_ok(daemon.client, {name: urls[name]}))

    ths = [threading.Thread(target=go, args=(n,)) for n in urls]
    for t in ths:
        t.start()
    for t in ths:
        t.join(30)
    assert len(results) == 3
    for b in results:
        (name, t), = b["tools"].items()
        assert t["sha"] == sha and t["version"] == name[1:]
    assert store.hits["/same/b.tgz"] == 1, store.hits
    assert installed(daemon, sha).is_dir()
    assert stage_empty(daemon)


# ---- mixed ----------------------------------------------------------------------------------

def test_mixed_request_partial_success(daemon, store):
    good, gsha, _ = publish(store, "/mix-good", standard_bundle("mixgood"))
    store.put("/mix-bad/b.tgz", standard_bundle("mixbad"))
    bad = store.put("/mix-bad/m.json", make_manifest(store.url("/mix-bad/b.tgz"), "0" * 64))
    missing = store.url("/mix-missing/m.json")
    body = resolve_ok(daemon.client, {"good": good, "bad": bad, "missing": missing,
                                      "scheme": "ftp://127.0.0.1/x"})
    assert set(body["tools"]) == {"good"}
    assert body["tools"]["good"]["sha"] == gsha
    assert set(body["refused"]) == {"bad", "missing", "scheme"}


# ---- stale fallback and the cache ----------------------------------------------------------

def test_dead_store_stale_and_restart(start_daemon, tmp_path):
    root = tmp_path / "root"
    srv = ArtifactServer()
    try:
        murl, sha, _ = publish(srv, "/st", standard_bundle("stale"), version="9")
        never = srv.url("/never/m.json")
        d = start_daemon(root=str(root))
        b = resolve_ok(d.client, {"t": murl})
        assert "t" in b["tools"], b
        assert b["tools"]["t"] == {"sha": sha, "version": "9", "stale": False,
                                   "commands": b["tools"]["t"]["commands"]}
        srv.stop()  # the store dies
        b = resolve_ok(d.client, {"t": murl, "never": never})
        assert b["tools"]["t"]["stale"] is True
        assert b["tools"]["t"]["sha"] == sha and b["tools"]["t"]["version"] == "9"
        assert "never" in b["refused"] and "no earlier" in b["refused"]["never"], b
        d.stop_ok()
        # a restart with the same root keeps the cache and the store
        d2 = start_daemon(root=str(root))
        b = resolve_ok(d2.client, {"t": murl})
        assert b["tools"]["t"]["stale"] is True and b["tools"]["t"]["sha"] == sha
        d2.stop_ok()
    finally:
        srv.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("status", [500, 503, 408, 429])
def test_store_busy_statuses_are_stale(daemon, store, status):
    murl, sha, _ = publish(store, "/busy%d" % status, standard_bundle("busy%d" % status))
    resolve_ok(daemon.client, {"b": murl})
    store.put("/busy%d/manifest.json" % status, b"busy", status=status)
    b = resolve_ok(daemon.client, {"b": murl})
    assert b["tools"]["b"]["stale"] is True and b["tools"]["b"]["sha"] == sha, b


def test_bundle_unreachable_is_stale(daemon, store):
    murl, sha, _ = publish(store, "/bu", standard_bundle("bu1"))
    resolve_ok(daemon.client, {"b": murl})
    # a new release whose bundle cannot be fetched right now: the old one stands in
    murl2, sha2, _ = publish(store, "/bu", standard_bundle("bu2"))
    store.put("/bu/bundle.tar.gz", b"", status=503)
    b = resolve_ok(daemon.client, {"b": murl})
    assert b["tools"]["b"]["stale"] is True and b["tools"]["b"]["sha"] == sha, b


# ---- signatures -----------------------------------------------------------------------------

def test_signatures(start_daemon, store, tmp_path):
    good = Ed25519Key(tmp_path, "good")
    other = Ed25519Key(tmp_path, "other")
    keys = tmp_path / "keys"
    keys.write_text("# trusted publishers\n\n%s\n" % good.public_b64)
    d = start_daemon(env={"SANDBOX_HOST_TOOL_KEYS": str(keys)})

    murl, sha, man = publish(store, "/signed", standard_bundle("signed"))
    store.put("/signed/manifest.json.sig", good.sign(man))
    murl_bad, _, man_bad = publish(store, "/badsig", standard_bundle("badsig"))
    store.put("/badsig/manifest.json.sig", other.sign(man_bad))
    murl_tamper, _, man_t = publish(store, "/tamper", standard_bundle("tamper"))
    store.put("/tamper/manifest.json.sig", good.sign(man_t + b" "))
    murl_garbage, _, _ = publish(store, "/garbage", standard_bundle("garbage"))
    store.put("/garbage/manifest.json.sig", b"!!!not base64!!!")
    murl_unsigned, _, _ = publish(store, "/unsigned", standard_bundle("unsigned"))

    b = resolve_ok(d.client, {"ok": murl, "bad": murl_bad, "tamper": murl_tamper,
                              "garbage": murl_garbage, "unsigned": murl_unsigned})
    assert set(b["tools"]) == {"ok"}, b
    assert b["tools"]["ok"]["sha"] == sha
    for n in ("bad", "tamper", "garbage"):
        assert "signature" in b["refused"][n], b
    assert "signature" in b["refused"]["unsigned"] and "404" in b["refused"]["unsigned"], b
    # a query string stays a query string: the signature is at path + ".sig"
    q = store.put("/q/manifest.json", man)
    store.put("/q/manifest.json.sig", good.sign(man))
    b = resolve_ok(d.client, {"q": q + "?v=1"})
    assert b["tools"]["q"]["sha"] == sha, b


def test_unusable_keys_fail_closed(start_daemon, store, tmp_path):
    murl, _, _ = publish(store, "/fc", standard_bundle("fc"))
    bad = tmp_path / "badkeys"
    bad.write_text("not-a-key\n")
    for path in (str(bad), str(tmp_path / "missing")):
        d = start_daemon(env={"SANDBOX_HOST_TOOL_KEYS": path})
        b = resolve_ok(d.client, {"t": murl})
        assert b["tools"] == {} and "SANDBOX_HOST_TOOL_KEYS" in b["refused"]["t"], b
        d.stop_ok()


# ---- running a tool in a sandbox ------------------------------------------------------------

def test_exec_resolved_tool_in_sandbox_read_only(daemon, store):
    sb = daemon.client.new_sandbox()  # created before the resolve: must see it anyway
    try:
        murl, sha, _ = publish(store, "/run", standard_bundle("run"))
        b = resolve_ok(daemon.client, {"run": murl})
        assert b["tools"]["run"]["sha"] == sha
        base = "/tools/%s" % sha
        f = exec_final(daemon.client, sb.rid, [base + "/bin/hello", "arg1"])
        assert f.get("exit") == 0, f
        assert f["out_bytes"] == b"hello-tool arg1\n", f
        f = exec_final(daemon.client, sb.rid, [base + "/bin/hello-link"])
        assert f.get("exit") == 0 and f["out_bytes"] == b"hello-tool\n", f
        f = exec_final(daemon.client, sb.rid, ["cat", base + "/share/data.txt"])
        assert f["out_bytes"] == b"data-run", f
        for script in ("echo x > %s/new" % base, "echo x >> %s/bin/hello" % base,
                       "rm -f %s/share/data.txt" % base, "chmod 777 %s/bin/hello" % base,
                       "mkdir %s/d" % base, "ls /tools/.cache", "ls /tools/.stage"):
            f = exec_final(daemon.client, sb.rid, ["sh", "-c", script])
            assert f.get("exit") not in (None, 0), (script, f)
        assert installed(daemon, sha).joinpath("bin", "hello").read_bytes() == HELLO_SCRIPT
        assert not installed(daemon, sha).joinpath("new").exists()
    finally:
        sb.delete()


def test_healthz_lists_capability(client):
    r = client.get("/healthz")
    assert "tools.resolve" in r.json()["capabilities"]
