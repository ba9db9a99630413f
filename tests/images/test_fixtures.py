"""Self-test of the image fixtures (tests/images): the real registry in each mode, the
images built offline, the hostile servers, and that every process and temp dir is gone.

    /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/images

Needs docker-registry, skopeo, umoci (scripts/setup.sh); the python image test needs the
cached image (build/image-cache/) or mmdebstrap and Debian's mirror to build it (minutes,
once), and root for bwrap; it skips with the reason otherwise.
"""
import base64
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.request

import pytest

from . import build, hostile, registry

pytestmark = [
    pytest.mark.skipif(registry.available() is not None, reason=str(registry.available())),
    pytest.mark.skipif(shutil.which("skopeo") is None, reason="skopeo missing"),
    pytest.mark.timeout(120),
]


PREFIXES = ("sh-registry-", "sh-skopeo-", "sh-images-", "python-build-")


def _ours():
    """Temp dirs of the fixtures' prefixes, and live children of this process."""
    dirs = set()
    for base in (tempfile.gettempdir(), build.image_cache_dir()):
        try:
            dirs |= {os.path.join(base, n) for n in os.listdir(base) if n.startswith(PREFIXES)}
        except FileNotFoundError:
            pass
    kids = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    st = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(st[1]) == os.getpid() and st[0] != "Z":
                kids.add(int(pid))
    return dirs, kids


@pytest.fixture(scope="module", autouse=True)
def no_leftovers():
    """The module leaves no temp dir of the fixtures and no child process behind."""
    dirs, kids = _ours()
    yield
    dirs2, kids2 = _ours()
    assert dirs2 - dirs == set(), "temp dirs left"
    assert kids2 - kids == set(), "processes left"


@pytest.fixture(scope="module")
def layout(no_leftovers):
    """One layout with every benign image of build.py, for the module."""
    d = tempfile.mkdtemp(prefix="sh-images-test-")
    lay = build.Layout(os.path.join(d, "layout"))
    imgs = {"busybox": build.busybox(lay, tag="busybox"),
            "whiteout": build.whiteout_image(lay),
            "multi": build.multiarch(lay, tag="multi"),
            "multi-docker": build.multiarch(lay, tag="multi-docker", docker=True),
            "docker": build.docker_image(lay)}
    imgs.update(build.compression_images(lay))
    lay.images = imgs
    yield lay
    shutil.rmtree(d)


def _inspect(reg, ref, creds=None, raw=True, check=False):
    args = ["inspect"] + (["--raw"] if raw else [])
    if reg.ca is not None:
        args += ["--cert-dir", reg.ca.cert_dir]
    else:
        args.append("--tls-verify=false")
    if creds:
        args += ["--creds", creds]
    return build.skopeo(args + [f"docker://{ref}"], check=check, timeout=60)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie of ours counts as gone
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


# ---------------------------------------------------------------- the registry's modes


@pytest.mark.parametrize("mode", ["plain", "htpasswd", "token"])
def test_registry_serves_pushed_image_with_credentials_as_its_mode_wants(layout, mode):
    with registry.Registry(mode) as reg:
        ref = build.push(layout, "busybox", reg, "test/busybox:1")
        with_creds = _inspect(reg, ref, creds=reg.creds)
        assert with_creds.returncode == 0, with_creds.stderr
        assert json.loads(with_creds.stdout)["layers"][0]["digest"] == json.loads(
            layout.read_blob(layout.images["busybox"]["digest"]))["layers"][0]["digest"]
        anon = _inspect(reg, ref)
        if mode == "plain":
            assert anon.returncode == 0, anon.stderr
        else:
            assert anon.returncode != 0
            assert "unauthorized" in anon.stderr.lower() or "401" in anon.stderr
        wrong = _inspect(reg, ref, creds=f"{reg.user}:wrong")
        if mode != "plain":
            assert wrong.returncode != 0


def test_token_issuer_records_credentials_sent_and_not_sent(layout):
    with registry.Registry("token") as reg:
        ref = build.push(layout, "busybox", reg, "test/busybox:1")
        basic = "Basic " + base64.b64encode(reg.creds.encode()).decode()
        assert basic in reg.issuer.authorizations()
        n = len(reg.issuer.requests)
        _inspect(reg, ref)
        assert reg.issuer.authorizations()[n:], "skopeo asked no token"
        assert set(reg.issuer.authorizations()[n:]) == {None}
        scopes = [r["path"] for r in reg.issuer.requests]
        assert any("scope=repository%3Atest%2Fbusybox%3Apull" in p for p in scopes), scopes


def test_registry_accepts_issuer_jwt_and_refuses_one_signed_by_another_key(layout):
    with registry.Registry("token") as reg:
        build.push(layout, "busybox", reg, "test/busybox:1")
        c = build.Client(reg)
        st, h, body = c.get_manifest("test/busybox", "1")
        assert st == 200, body
        # the same claims signed by a key the registry does not trust
        other = registry.TokenIssuer(reg.dir, reg.user, reg.password)
        try:
            forged = other.make_token(reg.user, registry.SERVICE,
                                      ["repository:test/busybox:pull"])
        finally:
            other.close()
        req = urllib.request.Request(f"{reg.url}/v2/test/busybox/manifests/1",
                                     headers={"Authorization": "Bearer " + forged,
                                              "Accept": build.OCI_MANIFEST})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=30)
        assert e.value.code == 401


@pytest.mark.parametrize("mode", ["htpasswd", "token"])
def test_tls_registry_verifies_with_its_test_ca_only(layout, mode):
    with registry.Registry(mode, tls=True) as reg:
        assert reg.url.startswith("https://") and os.path.exists(reg.ca_file)
        ref = build.push(layout, "busybox", reg, "test/busybox:1")
        assert _inspect(reg, ref, creds=reg.creds).returncode == 0
        with tempfile.TemporaryDirectory() as empty:
            p = build.skopeo(["inspect", "--raw", "--cert-dir", empty, "--creds", reg.creds,
                              f"docker://{ref}"], check=False, timeout=60)
        assert p.returncode != 0 and "certificate" in p.stderr.lower()


# ---------------------------------------------------------------- the images


@pytest.mark.parametrize("tag", ["busybox", "whiteout", "gzip", "zstd", "plain", "mixed"])
def test_image_layout_validates(layout, tag):
    p = subprocess.run([build.UMOCI, "stat", "--image", f"{layout.dir}:{tag}"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert build.skopeo(["inspect", f"oci:{layout.dir}:{tag}"], timeout=60).returncode == 0


def test_multiarch_index_validates_and_lists_three_platforms(layout):
    raw = build.skopeo(["inspect", "--raw", f"oci:{layout.dir}:multi"], timeout=60).stdout
    idx = json.loads(raw)
    assert idx["mediaType"] == build.OCI_INDEX
    plats = {(m["platform"]["os"], m["platform"]["architecture"]) for m in idx["manifests"]}
    assert len(plats) == 3 and build.BOGUS_PLATFORM in plats
    assert ("linux", build.host_arch()[0]) in plats


def test_images_keep_media_types_and_digests_when_pushed(layout):
    with registry.Registry("htpasswd") as reg:
        for tag in ("gzip", "zstd", "plain", "mixed"):
            build.push(layout, tag, reg, f"test/c:{tag}")
        build.push(layout, "multi", reg, "test/multi:oci", all_=True)
        build.push_http(layout, layout.images["multi-docker"], reg, "test/multi", "docker")
        build.push_http(layout, layout.images["docker"], reg, "test/docker", "1")
        c = build.Client(reg)
        for tag in ("gzip", "zstd", "plain", "mixed"):
            st, h, body = c.get_manifest("test/c", tag)
            assert st == 200
            assert build.sha256(body) == layout.images[tag]["digest"]
            assert {l["mediaType"] for l in json.loads(body)["layers"]} <= set(
                build.OCI_LAYER.values())
        want = {"multi": ("test/multi", "oci", build.OCI_INDEX),
                "multi-docker": ("test/multi", "docker", build.DOCKER_LIST),
                "docker": ("test/docker", "1", build.DOCKER_MANIFEST)}
        for img, (name, tag, mt) in want.items():
            st, h, body = c.get_manifest(name, tag)
            assert st == 200 and h["Content-Type"] == mt
            assert build.sha256(body) == layout.images[img]["digest"]
        p = _inspect(reg, reg.ref("test/docker", "1"), creds=reg.creds, raw=False, check=True)
        assert json.loads(p.stdout)["Architecture"] == build.host_arch()[0]


def test_whiteout_image_unpacks_to_the_merged_tree(layout, tmp_path):
    root = tmp_path / "root"
    p = subprocess.run([build.UMOCI, "raw", "unpack", "--rootless", "--image",
                        f"{layout.dir}:whiteout", str(root)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    for f in build.WHITEOUT_EXPECT["present"]:
        assert (root / f).exists(), f
    for f in build.WHITEOUT_EXPECT["absent"]:
        assert not (root / f).exists(), f
    for f, data in build.WHITEOUT_EXPECT["content"].items():
        assert (root / f).read_bytes() == data
    assert os.path.islink(root / "bin/sh")


# ---------------------------------------------------------------- the hostile images


def _names(tar_bytes):
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:*") as tf:
        return {(m.name, m.type, m.linkname) for m in tf.getmembers()}


def test_hostile_layers_hold_the_entries_they_name(tmp_path):
    lay = build.Layout(str(tmp_path / "l"))
    so = build.canary_so(str(tmp_path / "canary"), str(tmp_path))
    for name in build.hostile_entries():
        m = build.hostile_image(lay, name, so=so)
        man = json.loads(lay.read_blob(m["digest"]))
        got = _names(lay.read_blob(man["layers"][0]["digest"]))
        want = {(e[1], None, None) for e in build.hostile_entries()[name]}
        assert {n for n, _, _ in got} == {n for n, _, _ in want}, name
    assert ("../sh-escape-dotdot", tarfile.REGTYPE, "") in _names(
        build.tar_layer(build.hostile_entries()["dotdot"]))
    assert ("passwd", tarfile.LNKTYPE, "/etc/passwd") in _names(
        build.tar_layer(build.hostile_entries()["hardlink"]))
    assert ("dev/mem", tarfile.CHRTYPE, "") in _names(
        build.tar_layer(build.hostile_entries()["chardev"]))


def test_canary_library_marks_when_loaded(tmp_path):
    marker = tmp_path / "loaded"
    so = build.canary_so(str(marker), str(tmp_path))
    if so is None:
        pytest.skip("no C compiler: the canary is a stub")
    (tmp_path / "c.so").write_bytes(so)
    subprocess.run(["/bin/true"], env={"LD_PRELOAD": str(tmp_path / "c.so")}, check=True)
    assert marker.read_text() == "loaded\n"


@pytest.mark.parametrize("how", ["gzip", "zstd"])
def test_bomb_is_small_on_disk_and_huge_unpacked(tmp_path, how):
    lay = build.Layout(str(tmp_path / "l"))
    m = build.bomb_image(lay, gib=8, how=how)
    layer = json.loads(lay.read_blob(m["digest"]))["layers"][0]
    assert layer["size"] < 16 << 20 and layer["mediaType"] == build.OCI_LAYER[how]
    # the first KiB decompressed, by the real tools, stopped by pid (never the whole)
    p = subprocess.Popen([how, "-dc", lay.blob_path(layer["digest"])], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    try:
        head = p.stdout.read(4096)
    finally:
        p.kill()
        p.wait(timeout=10)
        p.stdout.close()
    with tarfile.open(fileobj=io.BytesIO(head + b"\0" * 8192), mode="r|") as tf:
        first = next(iter(tf))
    assert (first.name, first.size) == ("zeros", 8 << 30)


def test_many_layers_manifest_is_pushed_and_served(tmp_path):
    lay = build.Layout(str(tmp_path / "l"))
    m = build.many_layers_image(lay, n=10000)
    with registry.Registry("plain") as reg:
        build.push_http(lay, m, reg, "test/many", "many")
        st, h, body = build.Client(reg).get_manifest("test/many", "many")
        assert st == 200 and len(json.loads(body)["layers"]) == 10000
    with hostile.many_layers(build.Layout(str(tmp_path / "l2"))) as fake:
        st, h, body = build.Client(fake_reg(fake)).get_manifest("test/many", "many")
        assert st == 200 and len(json.loads(body)["layers"]) == 10000


def test_real_registry_serves_a_lying_blob_after_corrupt_blob(tmp_path):
    lay = build.Layout(str(tmp_path / "l"))
    m, digest, lie = build.lying_image(lay)
    with registry.Registry("plain") as reg:
        build.push_http(lay, m, reg, "test/lying", "1")
        reg.corrupt_blob(digest, lie)
        st, h, body = build.Client(reg).get_blob("test/lying", digest)
        assert st == 200 and body == lie and build.sha256(body) != digest


# ---------------------------------------------------------------- the hostile servers


def fake_reg(fake):
    """A Client for a hostile.FakeRegistry (no auth unless it has some)."""

    class R:
        url, mode, ca = fake.url, "htpasswd" if fake.auth else "plain", None
        creds = f"{fake.auth[0]}:{fake.auth[1]}" if fake.auth else None

        def ssl_context(self):
            return None

    return R()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **kw):
        return None


def test_redirect_registry_sends_blob_elsewhere_and_blob_host_records_no_credentials(tmp_path):
    lay = build.Layout(str(tmp_path / "l"))
    m = build.busybox(lay, tag="1")
    layer = json.loads(lay.read_blob(m["digest"]))["layers"][0]["digest"]
    with hostile.BlobHost() as other, hostile.RedirectRegistry(
            other.url + "/storage/{digest}", auth=("u", "p"), blob_host=other) as r:
        r.load(lay, m, "test/busybox", "1")
        opener = urllib.request.build_opener(_NoRedirect)
        req = urllib.request.Request(f"{r.url}/v2/test/busybox/blobs/{layer}",
                                     headers={"Authorization": "Basic " +
                                              base64.b64encode(b"u:p").decode()})
        with pytest.raises(urllib.error.HTTPError) as e:
            opener.open(req, timeout=30)
        assert e.value.code == 307
        loc = e.value.headers["Location"]
        assert loc.startswith(other.url)
        with urllib.request.urlopen(loc, timeout=30) as resp:  # as a careful client follows
            assert build.sha256(resp.read()) == layer
        assert other.authorizations() == [None]


@pytest.mark.parametrize("loc", ["file:///etc/passwd", "ftp://127.0.0.1:1/x"])
def test_redirect_registry_points_at_non_http_scheme(tmp_path, loc):
    lay = build.Layout(str(tmp_path / "l"))
    m = build.busybox(lay, tag="1")
    layer = json.loads(lay.read_blob(m["digest"]))["layers"][0]["digest"]
    with hostile.RedirectRegistry(loc) as r:
        r.load(lay, m, "test/busybox", "1")
        opener = urllib.request.build_opener(_NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as e:
            opener.open(f"{r.url}/v2/test/busybox/blobs/{layer}", timeout=30)
        assert e.value.headers["Location"] == loc
        st, h, body = build.Client(fake_reg(r)).get_manifest("test/busybox", "1")
        assert st == 200


def test_stall_registry_sends_a_prefix_then_nothing(tmp_path):
    lay = build.Layout(str(tmp_path / "l"))
    m = build.busybox(lay, tag="1")
    with hostile.StallRegistry(on="manifest", prefix=b'{"sche') as r:
        r.load(lay, m, "test/busybox", "1")
        s = socket.create_connection(("127.0.0.1", r.port), timeout=5)
        try:
            s.sendall(b"GET /v2/test/busybox/manifests/1 HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            s.settimeout(1.0)
            with pytest.raises(socket.timeout):
                while True:
                    chunk = s.recv(4096)
                    assert chunk, "the server closed the answer"
                    got += chunk
            assert got.startswith(b"HTTP/1.1 200") and got.endswith(b'{"sche')
            assert r.stalled == 1
        finally:
            s.close()


def test_stall_registry_without_prefix_sends_not_even_a_status_line(tmp_path):
    with hostile.StallRegistry(on="v2", prefix=None) as r:
        s = socket.create_connection(("127.0.0.1", r.port), timeout=5)
        try:
            s.sendall(b"GET /v2/ HTTP/1.1\r\nHost: x\r\n\r\n")
            s.settimeout(1.0)
            with pytest.raises(socket.timeout):
                s.recv(4096)
        finally:
            s.close()


@pytest.mark.parametrize("code", [429, 503])
def test_flaky_registry_fails_n_times_then_serves(tmp_path, code):
    lay = build.Layout(str(tmp_path / "l"))
    m = build.busybox(lay, tag="1")
    with hostile.FlakyRegistry(times=2, code=code, on="manifest", retry_after="0") as r:
        r.load(lay, m, "test/busybox", "1")
        c = build.Client(fake_reg(r))
        got = [c.get_manifest("test/busybox", "1") for _ in range(3)]
        assert [g[0] for g in got] == [code, code, 200]
        assert got[0][1]["Retry-After"] == "0"
        assert build.sha256(got[2][2]) == m["digest"]


def test_lying_fake_registry_serves_other_bytes_under_the_digest(tmp_path):
    fake, digest = hostile.lying(build.Layout(str(tmp_path / "l")))
    with fake:
        st, h, body = build.Client(fake_reg(fake)).get_blob("test/lying", digest)
        assert st == 200 and build.sha256(body) != digest
        assert h["Docker-Content-Digest"] == digest


# ---------------------------------------------------------------- the python image


def test_python_image_not_cached_and_not_buildable_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("SH_IMAGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no mmdebstrap here
    assert build.python_layout_cached() is None
    with pytest.raises(RuntimeError, match="mmdebstrap missing"):
        build.python_image()
    assert [n for n in os.listdir(tmp_path / "cache") if not n.startswith(".lock")] == []


def test_python_image_key_names_its_inputs(monkeypatch):
    k = build.python_key()
    assert k == build.python_key()
    monkeypatch.setattr(build, "PY_INCLUDE", build.PY_INCLUDE + ("python3-dev",))
    assert build.python_key() != k


@pytest.fixture(scope="module")
def python_layout():
    try:
        lay, desc = build.python_image()
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"the python image cannot be built here: {e}")
    return lay, desc


@pytest.mark.timeout(1800)  # the first build (mmdebstrap) takes minutes; cached: seconds
@pytest.mark.skipif(os.geteuid() != 0, reason="bwrap as root over the unpacked root")
def test_python_image_runs_python3(python_layout, tmp_path):
    lay, desc = python_layout
    root = tmp_path / "root"
    p = subprocess.run([build.UMOCI, "raw", "unpack", "--rootless", "--image",
                        f"{lay.dir}:{build.PY_TAG}", str(root)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(["bwrap", "--bind", str(root), "/", "--proc", "/proc", "--dev", "/dev",
                        "--unshare-all", "--die-with-parent", "--clearenv",
                        "--setenv", "PATH", "/usr/bin:/bin",
                        "python3", "-c",
                        "import sys, venv, ensurepip; print(sys.version_info[0])"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "3"
    assert (root / "usr/lib/python3/dist-packages/pip").is_dir()


@pytest.mark.timeout(1800)
def test_python_image_pushes_to_the_registry(python_layout):
    lay, desc = python_layout
    with registry.Registry("plain") as reg:
        ref = build.push(lay, build.PY_TAG, reg, "test/python:3")
        st, h, body = build.Client(reg).get_manifest("test/python", "3")
        assert st == 200 and build.sha256(body) == desc["digest"]
        assert ref == f"{reg.host}/test/python:3"


# ---------------------------------------------------------------- clean-up


def test_everything_stops_and_is_removed(tmp_path):
    with registry.Registry("token", tls=True) as reg:
        pid, d, port, iport = reg.proc.pid, reg.dir, reg.port, reg.issuer.port
        assert _pid_alive(pid) and os.path.isdir(d)
    assert not _pid_alive(pid)
    assert not os.path.exists(d)
    for p in (port, iport):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", p), timeout=2).close()
    lay = build.Layout(str(tmp_path / "l"))
    m = build.busybox(lay, tag="1")
    with hostile.StallRegistry(on="blob") as r:
        r.load(lay, m, "t/b", "1")
        s = socket.create_connection(("127.0.0.1", r.port), timeout=5)
        layer = json.loads(lay.read_blob(m["digest"]))["layers"][0]["digest"]
        s.sendall(f"GET /v2/t/b/blobs/{layer} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        s.recv(100)
    # the stalled answer was released when the server closed: the peer sees EOF
    s.settimeout(5)
    while s.recv(65536):
        pass
    s.close()


def test_serve_script_prints_its_registry_and_stops_when_stdin_closes():
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.Popen(["/usr/bin/python3", os.path.join(here, "serve.py"), "--mode",
                          "htpasswd", "--image", "busybox", "--image", "docker"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        info = json.loads(p.stdout.readline())
        assert set(info["refs"]) == {"busybox", "docker"}
        with open(info["auth_file"]) as f:
            assert info["host"] in json.load(f)["auths"]

        class R:
            ca, creds = None, f"{info['user']}:{info['password']}"
        assert _inspect(R(), info["refs"]["busybox"], creds=R.creds).returncode == 0
        assert _inspect(R(), info["refs"]["busybox"]).returncode != 0
        work = os.path.dirname(info["auth_file"])
        p.stdin.close()
        assert p.wait(timeout=30) == 0, p.stderr.read()
        assert not os.path.exists(work)
        with pytest.raises(OSError):
            socket.create_connection(tuple(info["host"].rsplit(":", 1)[:1]) +
                                     (int(info["host"].rsplit(":", 1)[1]),), timeout=2).close()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
