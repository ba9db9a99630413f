"""The image store's pulls against a real registry (src/images/registry.c, store.c), driven by
build/sh-pull (tests/helpers/sh-pull.c: the store alone on its own loop, answers as JSON):
anonymous, basic (htpasswd) and bearer (token) auth, by digest, a blob whose digest lies, an
unknown manifest, an unreachable registry, two gets of one image sharing one pull, and a
store restarted after a pull was cut by a kill.

    /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/images/test_pull.py

Root (the unpacker's cgroups and namespaces); SH_PULL names the driver (default
build/sh-pull). Everything listens on 127.0.0.1.
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse

import pytest

from . import build, hostile, registry

SH_PULL = os.environ.get("SH_PULL") or os.path.join(build.repo_root(), "build", "sh-pull")

pytestmark = [
    pytest.mark.skipif(registry.available() is not None, reason=str(registry.available())),
    pytest.mark.skipif(shutil.which("skopeo") is None, reason="skopeo missing"),
    pytest.mark.skipif(not os.access(SH_PULL, os.X_OK), reason=f"{SH_PULL} not built"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the layer unpacker needs root"),
    pytest.mark.timeout(180),
]


@pytest.fixture
def work():
    d = tempfile.mkdtemp(prefix="sh-images-pull-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run_pull(store, refs, insecure=(), timeout=120, **env):
    """sh-pull STORE refs...: (answers by order, the final line, stderr)."""
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("SANDBOX_HOST_") or k.startswith("SH_PULL_"):
            del e[k]
    e["SANDBOX_HOST_INSECURE_REGISTRIES"] = ",".join(insecure)
    e.update({k: str(v) for k, v in env.items()})
    p = subprocess.run([SH_PULL, store] + list(refs), env=e, capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    return lines[:-1], lines[-1], p.stderr


def store_files(store, sub):
    try:
        return sorted(os.listdir(os.path.join(store, sub)))
    except FileNotFoundError:
        return []


def assert_nothing_kept_of(store, digest):
    hexd = digest.split(":", 1)[1]
    assert hexd not in store_files(store, "blobs/sha256")
    assert hexd not in store_files(store, "layers/sha256")
    assert store_files(store, "images") == []


@pytest.fixture(scope="module")
def plain():
    with registry.Registry("plain") as reg:
        d = tempfile.mkdtemp(prefix="sh-images-")
        try:
            refs, _ = build.push_named(reg, ["busybox"], d)
            yield reg, refs["busybox"]
        finally:
            shutil.rmtree(d, ignore_errors=True)


def test_an_anonymous_pull_stores_the_unpacked_image_and_its_record(plain, work):
    reg, ref = plain
    store = os.path.join(work, "store")
    answers, last, _ = run_pull(store, [ref], insecure=[reg.host])
    a = answers[0]
    assert a["ok"], a
    assert a["name"] == ref
    assert len(a["layers"]) == 1 and os.path.isfile(os.path.join(a["layers"][0], "bin/busybox"))
    assert any(e.startswith("PATH=") for e in a["env"])
    assert a["digest"].split(":")[1] in store_files(store, "blobs/sha256")
    assert len(store_files(store, "images")) == 1
    assert store_files(store, "tmp") == []
    assert last["ready"] is True


def test_a_pull_by_digest_gets_that_manifest(plain, work):
    reg, ref = plain
    store = os.path.join(work, "store")
    first, _, _ = run_pull(store, [ref], insecure=[reg.host])
    digest = first[0]["digest"]
    by_digest = ref.rsplit(":", 1)[0] + "@" + digest
    answers, _, _ = run_pull(os.path.join(work, "store2"), [by_digest], insecure=[reg.host])
    assert answers[0]["ok"], answers[0]
    assert answers[0]["digest"] == digest


def test_two_gets_of_one_image_share_one_pull(plain, work):
    reg, ref = plain
    answers, _, err = run_pull(os.path.join(work, "store"), [ref, ref], insecure=[reg.host])
    assert [a["ok"] for a in answers] == [True, True]
    assert answers[0]["layers"] == answers[1]["layers"]
    assert err.count(f'"pulling {ref}"') == 1, err


def test_an_image_in_the_store_is_not_pulled_again(plain, work):
    reg, ref = plain
    store = os.path.join(work, "store")
    run_pull(store, [ref], insecure=[reg.host])
    answers, _, err = run_pull(store, [ref], insecure=[reg.host])
    assert answers[0]["ok"]
    assert "pulling" not in err


def test_an_unknown_manifest_is_invalid_and_named(plain, work):
    reg, _ = plain
    ref = reg.ref("test/nothing-here", "1")
    answers, _, _ = run_pull(os.path.join(work, "store"), [ref], insecure=[reg.host])
    a = answers[0]
    assert not a["ok"] and a["kind"] == "invalid", a
    assert "manifest unknown" in a["error"] and "404" in a["error"], a


def test_an_unreachable_registry_is_unavailable(work):
    port = registry.free_port()
    ref = f"127.0.0.1:{port}/test/busybox:1"
    answers, _, _ = run_pull(os.path.join(work, "store"), [ref], insecure=[f"127.0.0.1:{port}"])
    a = answers[0]
    assert not a["ok"] and a["kind"] == "unavailable", a
    assert "127.0.0.1" in a["error"]


def test_plain_http_to_a_registry_not_listed_insecure_is_refused_before_connecting(plain, work):
    reg, ref = plain
    answers, _, _ = run_pull(os.path.join(work, "store"), [ref], insecure=[])
    a = answers[0]
    # https is tried (the registry speaks plain http): it fails, never plain http
    assert not a["ok"], a


def test_basic_auth_with_the_credentials_file(work):
    with registry.Registry("htpasswd") as reg:
        refs, _ = build.push_named(reg, ["busybox"], os.path.join(work, "img"))
        ref = refs["busybox"]
        cfg = reg.docker_config(os.path.join(work, "config.json"))
        answers, _, _ = run_pull(os.path.join(work, "s1"), [ref], insecure=[reg.host],
                                 SANDBOX_HOST_REGISTRY_AUTH=cfg)
        assert answers[0]["ok"], answers[0]
        # without credentials: unauthorized, a 400
        answers, _, _ = run_pull(os.path.join(work, "s2"), [ref], insecure=[reg.host])
        assert not answers[0]["ok"] and answers[0]["kind"] == "invalid", answers[0]
        assert "credentials" in answers[0]["error"] or "unauthorized" in answers[0]["error"]
        # the pull's own credentials (the /v1 image.auth)
        answers, _, err = run_pull(os.path.join(work, "s3"), [ref], insecure=[reg.host],
                                   SH_PULL_AUTH=reg.creds)
        assert answers[0]["ok"], answers[0]
        assert reg.creds.split(":", 1)[1] not in err  # never logged
        # wrong ones
        answers, _, _ = run_pull(os.path.join(work, "s4"), [ref], insecure=[reg.host],
                                 SH_PULL_AUTH="tester:wrong")
        assert not answers[0]["ok"] and answers[0]["kind"] == "invalid"
        assert "unauthorized" in answers[0]["error"], answers[0]


def test_bearer_token_auth(work):
    with registry.Registry("token") as reg:
        refs, _ = build.push_named(reg, ["busybox"], os.path.join(work, "img"))
        ref = refs["busybox"]
        cfg = reg.docker_config(os.path.join(work, "config.json"))
        before = len(reg.issuer.requests)
        answers, _, _ = run_pull(os.path.join(work, "s1"), [ref],
                                 insecure=[reg.host, reg.issuer.host],
                                 SANDBOX_HOST_REGISTRY_AUTH=cfg)
        assert answers[0]["ok"], answers[0]
        asked = reg.issuer.requests[before:]
        assert asked and all("repository:test/busybox:pull" in urllib.parse.unquote(r["path"])
                             for r in asked)
        assert any(r["headers"].get("authorization", "").startswith("Basic ") for r in asked)


def test_a_blob_whose_digest_lies_fails_the_pull_and_nothing_of_it_is_kept(work):
    lay = build.Layout(os.path.join(work, "layout"))
    reg, digest = hostile.lying(lay)
    with reg:
        store = os.path.join(work, "store")
        answers, _, _ = run_pull(store, [f"{reg.host}/test/lying:lying"], insecure=[reg.host])
        a = answers[0]
        assert not a["ok"] and a["kind"] == "invalid", a
        assert "digest mismatch" in a["error"] and digest in a["error"], a
        assert_nothing_kept_of(store, digest)
        assert store_files(store, "tmp") == []


def _wait_for(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


class LayerStall(hostile.StallRegistry):
    """Stalls on one blob only (the layer): the manifest and config are served."""

    layer = None

    def behave(self, handler, kind, name, ref):
        if kind == "blob" and ref != self.layer:
            return False
        return super().behave(handler, kind, name, ref)


def test_a_pull_cut_by_a_kill_is_never_taken_for_a_complete_one(plain, work):
    reg, good = plain
    lay = build.Layout(os.path.join(work, "layout"))
    m = build.busybox(lay, tag="stall")
    store = os.path.join(work, "store")
    e = dict(os.environ, SANDBOX_HOST_INSECURE_REGISTRIES="", SH_PULL_INSTANCE="sh-pull-cut")
    ldesc = json.loads(lay.read_blob(m["digest"]))["layers"][0]
    layer = ldesc["digest"]
    with LayerStall(on="blob", length=ldesc["size"]) as stall:
        stall.layer = layer
        ref = stall.load(lay, m, "test/stall", "1")
        e["SANDBOX_HOST_INSECURE_REGISTRIES"] = stall.host
        p = subprocess.Popen([SH_PULL, store, ref], env=e, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            # the layer is arriving (partial) in tmp/: cut it there
            assert _wait_for(lambda: any(n.startswith("blob-") for n in
                                         store_files(store, "tmp")), 60)
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=30)
            p.stdout.close()
            p.stderr.close()
    assert store_files(store, "images") == []
    # the next start empties tmp/ and the store works (the same cgroup instance: removed)
    answers, last, _ = run_pull(store, [good], insecure=[reg.host],
                                SH_PULL_INSTANCE="sh-pull-cut")
    assert answers[0]["ok"], answers[0]
    assert store_files(store, "tmp") == []
    assert len(store_files(store, "images")) == 1
    # the stalled layer is busybox's too: pulled whole now, never the cut copy
    assert layer.split(":")[1] in store_files(store, "blobs/sha256")


def test_a_redirect_to_another_host_gets_the_blob_without_the_credentials(work):
    lay = build.Layout(os.path.join(work, "layout"))
    m = build.busybox(lay, tag="r")
    with hostile.BlobHost() as blobs:
        with hostile.RedirectRegistry(blobs.url + "/b/{digest}", blob_host=blobs,
                                      auth=("tester", "pw")) as reg:
            ref = reg.load(lay, m, "test/redir", "1")
            answers, _, _ = run_pull(os.path.join(work, "store"), [ref],
                                     insecure=[reg.host, blobs.host], SH_PULL_AUTH="tester:pw")
            assert answers[0]["ok"], answers[0]
            assert blobs.authorizations() and all(a is None for a in blobs.authorizations())
            # the registry itself was sent them
            assert any(r["headers"].get("authorization") for r in reg.requests)


def test_a_redirect_to_another_scheme_is_refused(work):
    lay = build.Layout(os.path.join(work, "layout"))
    m = build.busybox(lay, tag="r")
    with hostile.RedirectRegistry("file:///etc/passwd") as reg:
        ref = reg.load(lay, m, "test/redir", "1")
        store = os.path.join(work, "store")
        answers, _, _ = run_pull(store, [ref], insecure=[reg.host])
        a = answers[0]
        assert not a["ok"] and a["kind"] == "invalid", a
        assert "redirect" in a["error"], a
        assert store_files(store, "images") == []


def test_a_busy_registry_is_retried_then_served(work):
    lay = build.Layout(os.path.join(work, "layout"))
    m = build.busybox(lay, tag="f")
    with hostile.FlakyRegistry(times=2, code=503, on="manifest") as reg:
        ref = reg.load(lay, m, "test/flaky", "1")
        answers, _, _ = run_pull(os.path.join(work, "store"), [ref], insecure=[reg.host])
        assert answers[0]["ok"], answers[0]
        assert reg.failed == 2


def test_a_registry_busy_past_the_retries_is_unavailable(work):
    lay = build.Layout(os.path.join(work, "layout"))
    m = build.busybox(lay, tag="f")
    with hostile.FlakyRegistry(times=100, code=429, on="manifest") as reg:
        ref = reg.load(lay, m, "test/flaky", "1")
        answers, _, _ = run_pull(os.path.join(work, "store"), [ref], insecure=[reg.host])
        a = answers[0]
        assert not a["ok"] and a["kind"] == "unavailable", a
        assert "429" in a["error"], a


def test_a_registry_that_never_finishes_times_the_pull_out(work):
    lay = build.Layout(os.path.join(work, "layout"))
    m = build.busybox(lay, tag="s")
    ldesc = json.loads(lay.read_blob(m["digest"]))["layers"][0]
    with LayerStall(on="blob", length=ldesc["size"], stall_s=60) as reg:
        reg.layer = ldesc["digest"]
        ref = reg.load(lay, m, "test/stall", "1")
        store = os.path.join(work, "store")
        answers, _, _ = run_pull(store, [ref], insecure=[reg.host],
                                 SANDBOX_HOST_IMAGE_PULL_TIMEOUT_MS=2000)
        a = answers[0]
        assert not a["ok"] and a["kind"] == "unavailable", a
        assert "timed out" in a["error"], a
        assert store_files(store, "images") == []
        assert store_files(store, "tmp") == []


def test_an_unused_image_above_the_cache_bound_is_evicted(plain, work):
    reg, ref = plain
    store = os.path.join(work, "store")
    answers, _, _ = run_pull(store, [ref], insecure=[reg.host], SANDBOX_HOST_IMAGE_CACHE_MAX=0)
    assert answers[0]["ok"]
    # the driver let go of it at once: with no bytes of unused images allowed, it is gone
    assert store_files(store, "images") == []
    assert store_files(store, "layers/sha256") == []
    assert store_files(store, "blobs/sha256") == []


def test_the_prepull_list_is_pulled_at_start_and_then_ready(plain, work):
    reg, ref = plain
    store = os.path.join(work, "store")
    answers, last, _ = run_pull(store, [], insecure=[reg.host], SANDBOX_HOST_PREPULL=ref)
    assert answers == [] and last["ready"] is True
    assert len(store_files(store, "images")) == 1


def test_a_pull_nobody_waits_for_any_more_is_stopped_and_leaves_nothing(plain, work):
    reg, ref = plain
    store = os.path.join(work, "store")
    answers, _, err = run_pull(store, [ref], insecure=[reg.host], SH_PULL_CANCEL=0)
    assert answers == [{"ref": ref, "cancelled": True}]
    assert "nobody waits" in err
    assert store_files(store, "images") == []
    assert store_files(store, "tmp") == []
