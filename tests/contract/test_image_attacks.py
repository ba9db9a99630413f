"""Issue 22's attacks, each a kept test, through the daemon (docs/images.md "What is refused,
and why"; "Every byte of an image is hostile"): hostile layers (`..`, absolute paths, a
symlink then a file through it, hard links out, device nodes, a FIFO) refused with the entry
named; a decompression bomb refused at SANDBOX_HOST_IMAGE_MAX; a manifest of 10,000 layers; a
blob whose digest lies; a redirect to another host (the credentials do not follow) or to a
scheme that is not http(s); a registry that never finishes an answer (the pull times out, the
daemon answers meanwhile); a registry that answers 429/503 a few times (retried); an image
whose files a host program would load (never loaded on the host; plain files inside). After
each refusal nothing of it is in the store (no layer directory, no image record, tmp/
emptied) and no host file was touched. Native surface, and /v1 where the failure reaches the
client differently (Pending, then Failed with IMAGE_PULL_FAILED)."""
import base64
import os

import pytest

import execlib
import imagelib
import oslib
import shlib
from imagelib import build, hostile
from oslib import expect
from sselib import stdout_of

pytestmark = [imagelib.skip_unless_possible]

WAIT = 90.0

# what each hostile layer's refusal must name (an entry of the layer)
ENTRY = {
    "dotdot": "sh-escape-dotdot",
    "absolute": "sh-escape-absolute",
    "symlink": "sh-escape-symlink",
    "symlink_rel": "sh-escape-symlink-rel",
    "hardlink": "passwd",
    "hardlink_up": "shadow",
    "chardev": "dev/mem",
    "blockdev": "dev/sda",
    "fifo": "pipe",
}
# where a layer that got out would have written, on the host
ESCAPES = ["/sh-escape-dotdot", "/sh-escape-dotdot2", "/tmp/sh-escape-dotdot",
           "/tmp/sh-escape-dotdot2", "/tmp/sh-escape-absolute", "/tmp/sh-escape-symlink",
           "/tmp/sh-escape-symlink-rel", "/etc/passwd", "/etc/shadow", "/dev/mem", "/dev/sda"]


@pytest.fixture(scope="module")
def hostile_reg(tmp_path_factory):
    """A FakeRegistry serving every hostile layer image as test/hostile-<name>:1, busybox as
    test/busybox:1, the lying image as test/lying:1: (registry, layout, {name: desc})."""
    lay = build.Layout(str(tmp_path_factory.mktemp("hostile")))
    descs = {}
    with hostile.FakeRegistry(blob_override={}) as reg:
        for name in ENTRY:
            descs[name] = build.hostile_image(lay, name)
            reg.load(lay, descs[name], "test/hostile-" + name, "1")
        m, digest, lie = build.lying_image(lay)
        descs["lying"] = m
        descs["lying_digest"] = digest
        reg.blob_override[digest] = lie
        reg.load(lay, m, "test/lying", "1")
        yield reg, lay, descs


@pytest.fixture(scope="module")
def ad(hostile_reg):
    reg, _, _ = hostile_reg
    with shlib.running(env=imagelib.env_for(reg.host)) as d:
        yield d


def refused(d, ref, surface, status=400):
    """Pull ref through `surface`; the failure's text (native: `status` (400 BadRequest, 503
    Unavailable with Retry-After), its detail; /v1: 202 Pending, then Failed with
    IMAGE_PULL_FAILED, its message)."""
    if surface == "native":
        r = imagelib.create(d, ref)
        why = shlib.assert_error(r, status, {400: "BadRequest", 503: "Unavailable"}[status])
        if status == 503:
            assert r.header("Retry-After") and r.header("Retry-After").isdigit(), r
        return why["detail"]
    oc = oslib.os_client(d)
    b = dict(oslib.SDK_DEFAULT_CREATE, image={"uri": ref})
    j = expect(oc.create(b, timeout=30), 202)
    assert j["status"]["state"] == "Pending", j
    got, seen = oc.wait_state(j["id"], "Failed", timeout=WAIT)
    assert got["status"]["reason"] == "IMAGE_PULL_FAILED", got
    assert got["status"].get("message"), got
    oc.kill(j["id"])
    return got["status"]["message"]


# ---- hostile layers -----------------------------------------------------------------------------

@pytest.mark.parametrize("surface", ["native", "v1"])
@pytest.mark.parametrize("name", sorted(ENTRY))
def test_a_hostile_layer_is_refused_naming_its_entry_and_nothing_is_kept(ad, hostile_reg, name,
                                                                          surface):
    reg, lay, descs = hostile_reg
    before = imagelib.host_paths_state(ESCAPES)
    ref = "%s/test/hostile-%s:1" % (reg.host, name)
    why = refused(ad, ref, surface)
    assert ENTRY[name] in why, "the refusal does not name the entry %r: %r" % (ENTRY[name], why)
    imagelib.assert_nothing_kept(ad, ref, imagelib.layer_hexes(lay, descs[name]), name)
    assert imagelib.host_paths_state(ESCAPES) == before, "a host file was touched"
    for dirpath, dirnames, filenames in os.walk(ad.root):
        for n in dirnames + filenames:
            assert not n.startswith("sh-escape"), os.path.join(dirpath, n)


@pytest.mark.parametrize("surface", ["native", "v1"])
def test_a_blob_whose_digest_lies_is_refused_and_not_kept(ad, hostile_reg, surface):
    reg, lay, descs = hostile_reg
    ref = "%s/test/lying:1" % reg.host
    why = refused(ad, ref, surface)
    assert "digest" in why.lower(), why
    h = descs["lying_digest"].split(":", 1)[1]
    imagelib.assert_nothing_kept(ad, ref, [h], "lying")
    assert h not in imagelib.store_listing(ad)["blobs"], "the lying blob was kept"


# ---- bounds -------------------------------------------------------------------------------------

@pytest.mark.timeout(300)
@pytest.mark.parametrize("surface", ["native", "v1"])
def test_a_decompression_bomb_is_refused_at_image_max(start_daemon, tmp_path, surface):
    lay = build.Layout(str(tmp_path / "lay"))
    m = build.bomb_image(lay, gib=1)
    with hostile.FakeRegistry() as reg:
        ref = reg.load(lay, m, "test/bomb", "1")
        d = start_daemon(env=imagelib.env_for(reg.host, IMAGE_MAX="64M"))
        with shlib.ProbeWatch(d.client) as w:
            why = refused(d, ref, surface)
        w.assert_answered()
        # the refusal names the bound it hit
        assert ("too large" in why.lower() or "SANDBOX_HOST_IMAGE_MAX" in why or
                str(64 << 20) in why), why
        imagelib.assert_nothing_kept(d, ref, imagelib.layer_hexes(lay, m), "bomb")
        du = sum(os.lstat(os.path.join(p, f)).st_size
                 for p, _, fs in os.walk(imagelib.store(d)) for f in fs)
        assert du < 128 << 20, "the store holds %d bytes after the bomb" % du


@pytest.mark.timeout(180)
@pytest.mark.parametrize("surface", ["native", "v1"])
def test_a_manifest_of_10000_layers_is_refused(start_daemon, tmp_path, surface):
    lay = build.Layout(str(tmp_path / "lay"))
    with hostile.many_layers(lay) as reg:
        ref = "%s/test/many:many" % reg.host
        d = start_daemon(env=imagelib.env_for(reg.host))
        why = refused(d, ref, surface)
        assert "layers" in why.lower(), why
        assert reg.count("blob") <= 1, "blobs fetched for a refused manifest: %d" % reg.count(
            "blob")
        imagelib.assert_nothing_kept(d, ref, [], "many layers")


# ---- hostile registries -------------------------------------------------------------------------

def test_a_redirect_to_another_host_never_carries_the_credentials(start_daemon, tmp_path):
    lay = build.Layout(str(tmp_path / "lay"))
    m = build.busybox(lay, tag="1")
    with hostile.BlobHost() as other, hostile.RedirectRegistry(
            other.url + "/b/{digest}", blob_host=other, auth=("puller", "pw-secret")) as reg:
        ref = reg.load(lay, m, "test/busybox", "1")
        auth = imagelib.docker_config(tmp_path / "config.json", reg.host, "puller", "pw-secret")
        d = start_daemon(env=imagelib.env_for(reg.host, other.host, auth=auth))
        sb = imagelib.sandbox(d, ref)
        assert execlib.ok(sb, ["/bin/busybox", "true"]).exit == 0
        got = other.authorizations()
        assert got, "the blob host was never asked"
        assert got == [None] * len(got), "credentials sent to another host: %r" % got
        want = "Basic " + base64.b64encode(b"puller:pw-secret").decode()
        assert any(r["headers"].get("authorization") == want for r in reg.requests), \
            "the registry itself never got the credentials"
        sb.delete()


@pytest.mark.parametrize("surface", ["native", "v1"])
@pytest.mark.parametrize("location", ["file:///etc/passwd", "ftp://127.0.0.1:21/{digest}"])
def test_a_redirect_to_a_scheme_that_is_not_http_fails_the_pull(start_daemon, tmp_path,
                                                                  location, surface):
    lay = build.Layout(str(tmp_path / "lay"))
    m = build.busybox(lay, tag="1")
    with hostile.RedirectRegistry(location) as reg:
        ref = reg.load(lay, m, "test/busybox", "1")
        d = start_daemon(env=imagelib.env_for(reg.host))
        # INTERPRETATION: a refused redirect is a refusal (400), not an unreachable registry
        why = refused(d, ref, surface)
        assert location.split(":", 1)[0] in why.lower() or "redirect" in why.lower(), why
        imagelib.assert_nothing_kept(d, ref, imagelib.layer_hexes(lay, m), location)
        with open("/etc/passwd", "rb") as f:
            passwd = f.read()
        for h in imagelib.store_listing(d)["blobs"]:
            with open(imagelib.store(d) / "blobs" / "sha256" / h, "rb") as f:
                assert f.read() != passwd


@pytest.mark.timeout(120)
@pytest.mark.parametrize("surface", ["native", "v1"])
@pytest.mark.parametrize("on,prefix", [("blob", b"\x1f\x8b\x08\x00"), ("manifest", None)])
def test_a_registry_that_never_finishes_times_out_and_the_daemon_answers_meanwhile(
        start_daemon, tmp_path, on, prefix, surface):
    lay = build.Layout(str(tmp_path / "lay"))
    m = build.busybox(lay, tag="1")
    with hostile.StallRegistry(on=on, prefix=prefix) as reg:
        ref = reg.load(lay, m, "test/stall", "1")
        d = start_daemon(env=imagelib.env_for(reg.host, IMAGE_PULL_TIMEOUT_MS="3000"))
        with shlib.ProbeWatch(d.client) as w:
            refused(d, ref, surface, status=503)
        w.assert_answered(min_probes=5)
        assert reg.stalled >= 1
        imagelib.assert_nothing_kept(d, ref, imagelib.layer_hexes(lay, m), "stall")
        d.close()


@pytest.mark.parametrize("code", [429, 503])
def test_a_registry_that_answers_429_or_503_a_few_times_is_retried(start_daemon, tmp_path,
                                                                    code):
    lay = build.Layout(str(tmp_path / "lay"))
    m = build.busybox(lay, tag="1")
    with hostile.FlakyRegistry(times=2, code=code, on="manifest") as reg:
        ref = reg.load(lay, m, "test/flaky", "1")
        d = start_daemon(env=imagelib.env_for(reg.host))
        sb = imagelib.sandbox(d, ref)
        assert reg.failed == 2
        assert execlib.ok(sb, ["/bin/busybox", "true"]).exit == 0
        sb.delete()


# ---- an image whose files a host program would load ---------------------------------------------

LOADABLE = ["/etc/ld.so.preload", "/etc/nsswitch.conf", "/usr/lib/sh-canary.so",
            "/usr/lib/libnss_canary.so.2", "/usr/lib/x86_64-linux-gnu/gconv/gconv-modules",
            "/usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache"]


@pytest.mark.timeout(180)
def test_a_loadable_image_is_never_loaded_on_the_host_and_its_files_are_plain(start_daemon,
                                                                               tmp_path):
    marker = str(tmp_path / "canary-loaded")
    so = build.canary_so(marker, str(tmp_path))
    if so is None:
        pytest.skip("no C compiler: the canary library cannot be built")
    lay = build.Layout(str(tmp_path / "lay"))
    base = lay.add_layer(build.busybox_entries(), "gzip")
    top = lay.add_layer(build.hostile_entries(marker=marker, so=so)["loadable"], "gzip")
    m = lay.add_image([base, top], tag="1")
    with hostile.FakeRegistry() as reg:
        ref = reg.load(lay, m, "test/loadable", "1")
        d = start_daemon(env=imagelib.env_for(reg.host))
        sb = imagelib.sandbox(d, ref)
        for p in LOADABLE:
            st = execlib.ok(sb, ["/bin/busybox", "stat", "-c", "%F", p])
            assert st.out == b"regular file\n", (p, st.out)
        # daemon-side operations on that sandbox, on both surfaces
        execlib.ok(sb, ["/bin/busybox", "cat", "/etc/ld.so.preload"])
        sb.put("x", b"y")
        sb.walk_v()
        oc = oslib.os_client(d)
        j = expect(oc.create(dict(oslib.SDK_DEFAULT_CREATE, image={"uri": ref}), timeout=WAIT),
                   202)
        oc.wait_state(j["id"], "Running", timeout=WAIT)
        sid = j["id"]
        enc = "&".join("path=" + oslib.q(p) for p in LOADABLE)
        expect(oc.execd(sid, "GET", "/files/info?" + enc), 200)
        r = oc.execd(sid, "GET", "/files/download?path=/etc/nsswitch.conf")
        assert r.status == 200 and r.body.startswith(b"passwd: canary"), r
        expect(oc.execd(sid, "GET", "/directories/list?path=/usr/lib&depth=3"), 200)
        expect(oc.execd(sid, "GET", "/files/search?path=/usr/lib&pattern=*canary*"), 200)
        assert stdout_of(oc, sid, "cat /etc/ld.so.preload") == ["/usr/lib/sh-canary.so"]
        oc.kill(sid)
        sb.delete()
        d.stop_ok()
    assert not os.path.exists(marker), "the canary library was loaded on the host"
