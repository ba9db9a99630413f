"""Issue 22 on the native surface (CONTRACT.md 2.1, docs/images.md): `image` may be an OCI
reference, pulled into the store before the create answers 200; the sandbox's root is the
image (its files, its owners and modes: writable only where the image lets the sandbox's
uid), private to each sandbox; the image's Env is the base of every exec's environment;
whiteouts and opaque directories, gzip/zstd/plain layers, OCI and Docker indexes (this
machine's platform), Docker schema 2, digests; htpasswd and token registries with
SANDBOX_HOST_REGISTRY_AUTH; refusals (400 BadRequest with the reason) and an unreachable
registry (503 Unavailable + Retry-After); SANDBOX_HOST_IMAGE_PULL=off; /healthz; the store
on disk, kept across a restart (no registry needed) with tmp/ emptied; SANDBOX_HOST_PREPULL
and /readyz. Real registries (Debian's docker-registry) from tests/images."""
import base64
import hashlib
import json
import os
import shutil
import stat
import threading

import pytest

import execlib
import imagelib
import shlib
from imagelib import build, hostile, registry

pytestmark = [imagelib.skip_unless_possible]

CUSTOM_ENV = ["PATH=/bin", "IMG_ONLY=from-image", "IMG_BOTH=from-image"]
BUSYBOX_PASSWD = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n"


def custom_image(lay, tag="custom"):
    """busybox + a layer with a world-writable /shared (1777), /etc/image-file, /srv/wd; Env
    CUSTOM_ENV, WorkingDir /srv/wd."""
    base = lay.add_layer(build.busybox_entries(), "gzip")
    top = lay.add_layer([("dir", "etc"), ("file", "etc/image-file", b"from-the-image\n"),
                         ("dir", "shared", 0o1777), ("dir", "srv"), ("dir", "srv/wd")], "gzip")
    return lay.add_image([base, top], tag=tag, env=CUSTOM_ENV, workdir="/srv/wd")


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """A plain registry with the named images and `custom`: (registry, refs, layout)."""
    work = str(tmp_path_factory.mktemp("images"))
    with registry.Registry("plain") as reg:
        refs, _ = build.push_named(reg, ["busybox", "whiteout", "gzip", "zstd", "plain", "mixed",
                                         "multi", "multi-docker", "docker"], work)
        lay = build.Layout(os.path.join(work, "custom"))
        refs["custom_desc"] = custom_image(lay)
        refs["custom"] = build.push(lay, "custom", reg, "test/custom:1")
        refs["custom_layout"] = lay
        yield reg, refs


@pytest.fixture(scope="module")
def pd(images):
    """The module's daemon: the registry reached over plain http."""
    reg, _ = images
    with shlib.running(env=imagelib.env_for(reg.host)) as d:
        yield d


def run_ok(sb, script):
    return execlib.sh(sb, script, env={"PATH": "/bin"})


# ---- a reference as the sandbox's root ----------------------------------------------------------

def test_create_with_a_reference_answers_200_and_execs_the_images_busybox(pd, images):
    _, refs = images
    sb = imagelib.sandbox(pd, refs["busybox"])
    st = execlib.ok(sb, ["/bin/busybox", "cat", "/etc/passwd"])
    assert st.out == BUSYBOX_PASSWD, "the root is not the image's: %r" % st.out
    st = execlib.ok(sb, ["/bin/busybox", "readlink", "/bin/sh"])
    assert st.out == b"busybox\n", "the image's applet links"
    sb.delete()


def test_the_root_is_writable_only_where_the_image_lets_the_sandbox_uid(pd, images):
    _, refs = images
    sb = imagelib.sandbox(pd, refs["custom"])
    assert run_ok(sb, "cat /etc/image-file") == "from-the-image\n"
    for p in ("/usr/x", "/bin/x", "/etc/x", "/usr/local/bin/x"):
        st = execlib.run(sb, ["/bin/busybox", "touch", p])
        st.assert_exit()
        assert st.exit != 0, "%s written: the image gives it to root" % p
        assert (b"Permission denied" in st.err or b"Read-only file system" in st.err), \
            "%s: %r" % (p, st.err)
    assert run_ok(sb, "echo w > /workspace/w && cat /workspace/w && "
                  "echo t > /tmp/t && cat /tmp/t") == "w\nt\n"
    # the image's world-writable dir is writable by the sandbox's uid
    assert run_ok(sb, "echo s > /shared/s && cat /shared/s") == "s\n"
    sb.delete()


def test_two_sandboxes_of_one_image_do_not_see_each_others_writes(pd, images):
    _, refs = images
    a = imagelib.sandbox(pd, refs["custom"])
    b = imagelib.sandbox(pd, refs["custom"])
    run_ok(a, "echo from-a > /shared/a")
    run_ok(b, "echo from-b > /shared/b")
    assert run_ok(a, "ls -a /shared").split() == [".", "..", "a"]
    assert run_ok(b, "ls -a /shared").split() == [".", "..", "b"]
    # the shared layers themselves are unchanged
    layers = imagelib.store(pd) / "layers" / "sha256"
    for h in imagelib.layer_hexes(refs["custom_layout"], refs["custom_desc"]):
        shared = layers / h / "root" / "shared"
        if shared.is_dir():
            assert sorted(os.listdir(shared)) == [], "a sandbox wrote into the layer"
    a.delete()
    b.delete()


def test_the_images_env_is_below_the_creates_env_in_every_exec(pd, images):
    _, refs = images
    sb = imagelib.sandbox(pd, refs["custom"], env={"IMG_BOTH": "from-create"})
    env = dict(ln.split("=", 1) for ln in run_ok(sb, "env").splitlines() if "=" in ln)
    assert env.get("IMG_ONLY") == "from-image", env
    assert env.get("IMG_BOTH") == "from-create", env
    st = execlib.ok(sb, ["/bin/busybox", "sh", "-c", "echo $IMG_BOTH $IMG_ONLY"],
                    env={"IMG_BOTH": "from-exec"})
    assert st.out == b"from-exec from-image\n"
    # the next exec inherits nothing of the previous one's env
    assert run_ok(sb, "echo $IMG_BOTH") == "from-create\n"
    sb.delete()


def test_whiteouts_hide_files_and_an_opaque_dir_shows_only_the_upper_layer(pd, images):
    _, refs = images
    sb = imagelib.sandbox(pd, refs["whiteout"])
    exp = build.WHITEOUT_EXPECT
    for p in exp["present"]:
        assert run_ok(sb, "test -e /%s && echo yes || echo no" % p) == "yes\n", p
    for p in exp["absent"]:
        assert run_ok(sb, "test -e /%s && echo yes || echo no" % p) == "no\n", p
    for p, content in exp["content"].items():
        assert execlib.ok(sb, ["/bin/busybox", "cat", "/" + p]).out == content, p
    assert run_ok(sb, "ls -a /opt/old").split() == [".", "..", "c"]
    # no whiteout device shows through
    assert "c" not in run_ok(sb, "ls -l /etc /data | cut -c1 | sort -u")
    sb.delete()


@pytest.mark.parametrize("name", ["gzip", "zstd", "plain", "mixed"])
def test_layers_of_each_compression_run(pd, images, name):
    _, refs = images
    sb = imagelib.sandbox(pd, refs[name])
    assert execlib.ok(sb, ["/bin/busybox", "echo", name]).out == (name + "\n").encode()
    if name == "mixed":
        assert run_ok(sb, "cat /etc/zstd-layer /etc/plain-layer") == "zstd\nplain\n"
    sb.delete()


@pytest.mark.parametrize("name", ["multi", "multi-docker"])
def test_an_index_picks_this_machines_platform(pd, images, name):
    _, refs = images
    sb = imagelib.sandbox(pd, refs[name])
    arch = build.host_arch()[0]
    assert run_ok(sb, "cat /etc/platform") == "linux/%s\n" % arch
    sb.delete()


def test_a_docker_schema2_image_runs(pd, images):
    _, refs = images
    sb = imagelib.sandbox(pd, refs["docker"])
    assert execlib.ok(sb, ["/bin/busybox", "cat", "/etc/passwd"]).out == BUSYBOX_PASSWD
    sb.delete()


def test_a_pull_by_digest_runs_and_a_wrong_digest_is_400(pd, images):
    reg, _ = images
    digest = imagelib.manifest_digest(reg, "test/busybox", "1")
    sb = imagelib.sandbox(pd, reg.ref("test/busybox", "@" + digest))
    assert execlib.ok(sb, ["/bin/busybox", "cat", "/etc/passwd"]).out == BUSYBOX_PASSWD
    sb.delete()
    wrong = "sha256:" + hashlib.sha256(b"no such manifest").hexdigest()
    r = imagelib.create(pd, reg.ref("test/busybox", "@" + wrong))
    shlib.assert_error(r, 400, "BadRequest")


# ---- refusals ----------------------------------------------------------------------------------

def test_an_unknown_tag_is_400_naming_the_registrys_answer(pd, images):
    reg, _ = images
    r = imagelib.create(pd, reg.ref("test/busybox", "no-such-tag"))
    b = shlib.assert_error(r, 400, "BadRequest")
    assert "manifest unknown" in b["detail"].lower().replace("_", " "), b


def test_a_registry_not_listening_is_503_with_retry_after(start_daemon):
    host = "127.0.0.1:%d" % imagelib.free_port()
    d = start_daemon(env=imagelib.env_for(host))
    r = imagelib.create(d, host + "/test/busybox:1")
    shlib.assert_error(r, 503, "Unavailable")
    assert r.header("Retry-After") and r.header("Retry-After").isdigit(), r
    assert imagelib.store_listing(d)["records"] == []


@pytest.mark.parametrize("name", ["Foo/UPPER", "127.0.0.1:5000/a/B:1", "x:" + "t" * 129,
                                  "busybox@sha512:" + "0" * 128])
def test_a_name_that_is_no_reference_is_400(pd, name):
    r = imagelib.create(pd, name)
    b = shlib.assert_error(r, 400, "BadRequest")
    assert b["detail"].strip()


def test_image_pull_off_makes_a_reference_400(start_daemon, images):
    _, refs = images
    reg, _ = images
    d = start_daemon(env=imagelib.env_for(reg.host, IMAGE_PULL="off"))
    r = imagelib.create(d, refs["busybox"])
    shlib.assert_error(r, 400, "BadRequest")
    # host images still work
    assert d.client.create({}).status == 200


def test_healthz_names_images_pull(pd):
    caps = pd.client.get("/healthz").json()["capabilities"]
    assert "images.pull" in caps, caps


# ---- credentials --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def htpasswd_reg(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("htimages"))
    with registry.Registry("htpasswd") as reg:
        refs, _ = build.push_named(reg, ["busybox"], work)
        yield reg, refs["busybox"]


def test_htpasswd_registry_with_the_auth_file_pulls(start_daemon, htpasswd_reg, tmp_path):
    reg, ref = htpasswd_reg
    d = start_daemon(env=imagelib.env_for(reg.host, auth=reg.docker_config(
        str(tmp_path / "config.json"))))
    sb = imagelib.sandbox(d, ref)
    assert execlib.ok(sb, ["/bin/busybox", "cat", "/etc/passwd"]).out == BUSYBOX_PASSWD


def test_htpasswd_registry_without_credentials_is_400_unauthorized(start_daemon, htpasswd_reg):
    reg, ref = htpasswd_reg
    d = start_daemon(env=imagelib.env_for(reg.host))
    r = imagelib.create(d, ref)
    b = shlib.assert_error(r, 400, "BadRequest")
    assert "unauthorized" in b["detail"].lower(), b


def test_token_registry_with_the_auth_file_pulls_and_the_issuer_saw_the_credentials(
        start_daemon, tmp_path):
    with registry.Registry("token") as reg:
        refs, _ = build.push_named(reg, ["busybox"], str(tmp_path / "w"))
        before = len(reg.issuer.authorizations())
        # the token realm is another host:port over plain http: listed too (docs/images.md)
        d = start_daemon(env=imagelib.env_for(reg.host, reg.issuer.host, auth=reg.docker_config(
            str(tmp_path / "config.json"))))
        sb = imagelib.sandbox(d, refs["busybox"])
        assert execlib.ok(sb, ["/bin/busybox", "cat", "/etc/passwd"]).out == BUSYBOX_PASSWD
        want = "Basic " + base64.b64encode(reg.creds.encode()).decode()
        assert want in reg.issuer.authorizations()[before:], reg.issuer.authorizations()
        sb.delete()
        d.stop_ok()


# ---- the store ----------------------------------------------------------------------------------

def test_the_store_on_disk_after_a_pull(start_daemon, images):
    """docs/images.md "The store": root's 0700; blobs/sha256/<hex> whose sha256 is <hex>;
    layers/sha256/<layer digest>/root/ (a layer is kept once: its compressed blob goes once it
    is unpacked); images/<sha256 of the reference>.json; tmp/ empty."""
    _, refs = images
    reg, _ = images
    d = start_daemon(env=imagelib.env_for(reg.host))
    sb = imagelib.sandbox(d, refs["custom"])
    s = imagelib.store(d)
    st = os.stat(s)
    assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
    ls = imagelib.store_listing(d)
    for h in ls["blobs"]:
        with open(s / "blobs" / "sha256" / h, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == h, "blob %s lies" % h
    lay, desc = refs["custom_layout"], refs["custom_desc"]
    manifest = json.loads(lay.read_blob(desc["digest"]))
    for x in [desc, manifest["config"]]:
        assert x["digest"].split(":", 1)[1] in ls["blobs"], x
    for x in manifest["layers"]:
        assert x["digest"].split(":", 1)[1] not in ls["blobs"], x
    for h in imagelib.layer_hexes(lay, desc):
        assert h in ls["layers"], h
        assert (s / "layers" / "sha256" / h / "root").is_dir()
    assert (s / "layers" / "sha256" / imagelib.layer_hexes(lay, desc)[1] / "root" / "etc" /
            "image-file").read_bytes() == b"from-the-image\n"
    assert ls["records"] == [imagelib.record_name(refs["custom"])], ls["records"]
    json.loads((s / "images" / ls["records"][0]).read_text())
    assert ls["tmp"] == []
    sb.delete()


def test_a_restart_creates_from_the_store_without_the_registry_and_empties_tmp(
        start_daemon, tmp_path):
    with registry.Registry("plain") as reg:
        refs, _ = build.push_named(reg, ["busybox"], str(tmp_path / "w"))
        env = imagelib.env_for(reg.host)
        d1 = start_daemon(env=env)
        imagelib.sandbox(d1, refs["busybox"]).delete()
        d1.stop_ok()
    # the registry is gone; a pull cut by a crash left things in tmp/
    tmp = imagelib.store(d1) / "tmp"
    (tmp / "cut-pull").mkdir()
    (tmp / "cut-pull" / "layer.tar").write_bytes(b"partial")
    (tmp / "cut-blob").write_bytes(b"partial")
    d2 = start_daemon(env=env, root=str(d1.root))
    assert imagelib.store_listing(d2)["tmp"] == [], "tmp/ not emptied at start"
    sb = imagelib.sandbox(d2, refs["busybox"])
    assert execlib.ok(sb, ["/bin/busybox", "cat", "/etc/passwd"]).out == BUSYBOX_PASSWD
    sb.delete()


class GateRegistry(hostile.FakeRegistry):
    """Holds every blob request until .gate is set (bounded by stall_s)."""

    def __init__(self, stall_s=60, **kw):
        self.gate = threading.Event()
        self.held = threading.Event()
        self.stall_s = stall_s
        super().__init__(**kw)

    def behave(self, handler, kind, name, ref):
        if kind == "blob":
            self.held.set()
            self.gate.wait(self.stall_s)
        return False


@pytest.mark.timeout(180)
def test_prepull_readyz_is_503_until_the_image_is_in_then_200(start_daemon, tmp_path):
    lay = build.Layout(str(tmp_path / "lay"))
    m = build.busybox(lay, tag="1")
    with GateRegistry() as reg:
        ref = reg.load(lay, m, "test/pre", "1")
        d = start_daemon(env=imagelib.env_for(reg.host, PREPULL=ref))
        assert reg.held.wait(30), "the prepull never asked for a blob"
        r = d.client.get("/readyz")
        shlib.assert_error(r, 503, "Unavailable")
        reg.gate.set()
        assert imagelib.wait_ready_state(d.client, 200, 60) == 200, d.stderr_text()[-2000:]
    # it is in the store: a create needs no registry
    sb = imagelib.sandbox(d, ref)
    assert execlib.ok(sb, ["/bin/busybox", "cat", "/etc/passwd"]).out == BUSYBOX_PASSWD
    sb.delete()


# ---- more of docs/images.md ----------------------------------------------------------------------

def test_a_tls_registry_is_trusted_with_registry_ca_and_not_without(start_daemon, tmp_path):
    with registry.Registry("plain", tls=True) as reg:
        refs, _ = build.push_named(reg, ["busybox"], str(tmp_path / "w"))
        d = start_daemon(env=imagelib.env_for(ca=reg.ca_file))
        sb = imagelib.sandbox(d, refs["busybox"])
        assert execlib.ok(sb, ["/bin/busybox", "cat", "/etc/passwd"]).out == BUSYBOX_PASSWD
        sb.delete()
        # INTERPRETATION: docs/images.md does not say which of 400/503 an untrusted
        # certificate is; it is a failed create either way, and nothing is kept
        bare = start_daemon(env=imagelib.env_for())
        r = imagelib.create(bare, refs["busybox"])
        assert r.status in (400, 503), r
        shlib.assert_error(r, r.status)
        assert imagelib.store_listing(bare)["records"] == []


def test_a_mirror_is_tried_first_and_the_registry_itself_when_the_mirror_fails(start_daemon,
                                                                                 tmp_path):
    lay = build.Layout(str(tmp_path / "lay"))
    m = build.busybox(lay, tag="1")
    with hostile.FakeRegistry() as mirror, hostile.FakeRegistry() as origin:
        mirror.load(lay, m, "test/busybox", "1")  # the origin does not have it
        ref = "%s/test/busybox:1" % origin.host
        d = start_daemon(env=imagelib.env_for(origin.host, mirror.host, REGISTRY_MIRRORS="%s=%s" % (
            origin.host, mirror.url)))
        sb = imagelib.sandbox(d, ref)
        assert execlib.ok(sb, ["/bin/busybox", "cat", "/etc/passwd"]).out == BUSYBOX_PASSWD
        assert mirror.count("manifest") >= 1
        sb.delete()
    # a mirror that is not there: the registry itself
    with hostile.FakeRegistry() as origin:
        origin.load(lay, m, "test/busybox", "1")
        gone = "127.0.0.1:%d" % imagelib.free_port()
        ref = "%s/test/busybox:1" % origin.host
        d = start_daemon(env=imagelib.env_for(origin.host, gone, REGISTRY_MIRRORS="%s=http://%s" % (
            origin.host, gone)))
        sb = imagelib.sandbox(d, ref)
        assert execlib.ok(sb, ["/bin/busybox", "true"]).exit == 0
        assert origin.count("blob") >= 1
        sb.delete()


@pytest.mark.timeout(180)
def test_many_creates_of_one_image_at_once_pull_it_once(start_daemon, tmp_path):
    lay = build.Layout(str(tmp_path / "lay"))
    m = build.busybox(lay, tag="1")
    with GateRegistry() as reg:
        ref = reg.load(lay, m, "test/once", "1")
        d = start_daemon(env=imagelib.env_for(reg.host))
        res = [None] * 3

        def one(i):
            res[i] = imagelib.create(d, ref, timeout=120)
        ts = [threading.Thread(target=one, args=(i,)) for i in range(3)]
        for t in ts:
            t.start()
        assert reg.held.wait(30), "the pull never asked for a blob"
        # the three creates are in (each logs its pull) before the blobs flow
        shlib.wait_until(lambda: d.stderr_text().count('"event":"image-pull","sandbox"') >= 3,
                         timeout=10)
        reg.gate.set()
        for t in ts:
            t.join(130)
        for r in res:
            assert r is not None and r.status == 200, r
        with reg.lock:
            blobs = [r["path"] for r in reg.requests if "/blobs/" in r["path"]
                     and r["method"] == "GET"]
        assert len(blobs) == len(set(blobs)), "a blob was fetched twice: %r" % blobs
        for r in res:
            shlib.Sandbox(d.client, r.json()["remote_id"]).delete()


@pytest.mark.timeout(180)
def test_unused_images_are_evicted_above_cache_max_and_one_in_use_never(start_daemon, images):
    reg, refs = images
    d = start_daemon(env=imagelib.env_for(reg.host, IMAGE_CACHE_MAX="0"))
    a = imagelib.sandbox(d, refs["gzip"])
    ra = imagelib.record_name(refs["gzip"])
    assert ra in imagelib.store_listing(d)["records"]
    a.delete()
    b = imagelib.sandbox(d, refs["zstd"])
    rb = imagelib.record_name(refs["zstd"])
    assert shlib.wait_until(lambda: ra not in imagelib.store_listing(d)["records"], timeout=60), \
        "an unused image above SANDBOX_HOST_IMAGE_CACHE_MAX=0 is kept: %r" % (
            imagelib.store_listing(d),)
    assert rb in imagelib.store_listing(d)["records"], "the image in use was removed"
    assert execlib.ok(b, ["/bin/busybox", "echo", "still"]).out == b"still\n"
    b.delete()


def test_a_host_image_wins_over_a_registry(start_daemon, tmp_path, images):
    reg, _ = images
    img = tmp_path / "images" / "busybox"
    (img / "bin").mkdir(parents=True)
    shutil.copy(build.BUSYBOX, img / "bin" / "busybox")
    (img / "etc").mkdir()
    (img / "etc" / "marker").write_text("host-image")
    d = start_daemon(env=imagelib.env_for(reg.host, IMAGES=str(tmp_path / "images")))
    sb = imagelib.sandbox(d, "busybox")
    assert execlib.ok(sb, ["/bin/busybox", "cat", "/etc/marker"]).out == b"host-image"
    assert imagelib.store_listing(d)["records"] == []
    sb.delete()


def test_docker_schema1_is_refused_by_name():
    body = json.dumps({"schemaVersion": 1, "name": "test/s1", "tag": "1",
                       "architecture": "amd64", "fsLayers": [], "history": []}).encode()
    with hostile.FakeRegistry() as reg, shlib.running(env=imagelib.env_for(reg.host)) as d:
        reg.manifests[("test/s1", "1")] = (
            "application/vnd.docker.distribution.manifest.v1+prettyjws", body)
        b = shlib.assert_error(imagelib.create(d, reg.host + "/test/s1:1"), 400, "BadRequest")
        assert "schema 1" in b["detail"].lower() or "schema1" in b["detail"].lower() or \
            "manifest.v1" in b["detail"].lower(), b


@pytest.mark.parametrize("what", ["manifest", "config"])
def test_a_manifest_or_config_above_4mib_is_refused(start_daemon, tmp_path, what):
    lay = build.Layout(str(tmp_path / "lay"))
    pad = "x" * (4 << 20)
    if what == "manifest":
        m = build.busybox(lay, tag="1", annotations={"pad": pad})
    else:
        m = build.busybox(lay, tag="1", env=["PAD=" + pad])
    with hostile.FakeRegistry() as reg:
        ref = reg.load(lay, m, "test/big", "1")
        d = start_daemon(env=imagelib.env_for(reg.host))
        shlib.assert_error(imagelib.create(d, ref), 400, "BadRequest")
        imagelib.assert_nothing_kept(d, ref, [], what)


@pytest.mark.parametrize("mode,uid_base", [("tmpfs", "386000"), ("loop", "387000")])
def test_the_images_root_and_the_workspace_fill_one_disk_budget(start_daemon, images, mode,
                                                                  uid_base):
    """docs/images.md: the upper lives inside the sandbox's disk limit, the same limit as its
    workspace (writes to the root and to the workspace fill one budget)."""
    reg, refs = images
    d = start_daemon(env=imagelib.env_for(reg.host, DISK_MAX="16M", DISK_QUOTA=mode,
                                          UID_BASE=uid_base))
    sb = imagelib.sandbox(d, refs["custom"])
    run_ok(sb, "head -c 10485760 /dev/zero > /shared/big && echo ok")
    st = execlib.run(sb, ["/bin/busybox", "sh", "-c",
                          "head -c 10485760 /dev/zero > /workspace/big"], env={"PATH": "/bin"})
    st.assert_exit()
    assert st.exit != 0, "20 MiB written under a 16M limit (10 in the root, 10 in the workspace)"
    # (busybox's head says only "I/O error"): the sizes tell the limit held
    sizes = [int(x) for x in run_ok(sb, "wc -c < /shared/big; wc -c < /workspace/big").split()]
    assert sizes[0] == 10 << 20 and sizes[1] < 10 << 20, sizes
    assert sum(sizes) <= 16 << 20, sizes
    sb.delete()
