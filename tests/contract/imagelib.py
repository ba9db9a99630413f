"""Helpers for the image tests of the contract suite (test_image_pull.py, test_os_images.py,
test_image_attacks.py): docs/images.md, CONTRACT.md 2.1 and OPENSANDBOX.md section 2 are the
law. The registries, images and hostile servers are tests/images' (its README); this module
only adds what the daemon-facing tests share: the daemon's settings for a registry, a native
create that waits for its pull, and looks at the image store on disk
({SANDBOX_HOST_ROOT}/images: blobs/sha256, layers/sha256/<hex>/root, images/*.json, tmp/).
"""
import base64
import hashlib
import json
import os
import sys
import time

import pytest

import shlib

sys.path.insert(0, str(shlib.REPO / "tests"))

from images import build, hostile, registry  # noqa: E402,F401

PULL_TIMEOUT = 90.0  # a native create that pulls answers within this (call timeout)


def why_not():
    """None when the image tests can run here, else the reason (for pytest.skip)."""
    if not shlib.is_root():
        return "sandboxes need root (CI runs as root)"
    return registry.available() or build.busybox_available()


skip_unless_possible = pytest.mark.skipif(why_not() is not None, reason=str(why_not()))


def env_for(*hosts, auth=None, ca=None, **more):
    """A daemon's settings for registries: hosts (host:port) reached over plain http, auth a
    Docker config.json path, ca a PEM file; more: other SANDBOX_HOST_<NAME>=value. Pulls are
    on (shlib's daemons start with them off)."""
    env = {"SANDBOX_HOST_IMAGE_PULL": "on"}
    if hosts:
        env["SANDBOX_HOST_INSECURE_REGISTRIES"] = ",".join(hosts)
    if auth:
        env["SANDBOX_HOST_REGISTRY_AUTH"] = str(auth)
    if ca:
        env["SANDBOX_HOST_REGISTRY_CA"] = str(ca)
    for k, v in more.items():
        env["SANDBOX_HOST_" + k] = v
    return env


def docker_config(path, host, user, password):
    """A Docker config.json with one registry's credentials (SANDBOX_HOST_REGISTRY_AUTH)."""
    with open(path, "w") as f:
        json.dump({"auths": {host: {"auth": base64.b64encode(
            ("%s:%s" % (user, password)).encode()).decode()}}}, f)
    os.chmod(path, 0o600)
    return str(path)


def create(d, image, timeout=PULL_TIMEOUT, **body):
    """POST /sandboxes {image, **body}: the Resp (the create answers once the pull is done)."""
    b = {"image": image}
    b.update(body)
    return d.client.create(b, timeout=timeout)


def sandbox(d, image, **body):
    """A native sandbox on image, asserting 200 (with the daemon's stderr tail on failure)."""
    r = create(d, image, **body)
    assert r.status == 200, "create of %s: %r\nstderr tail:\n%s" % (
        image, r, d.stderr_text()[-3000:])
    return shlib.Sandbox(d.client, r.json()["remote_id"])


def detail(r):
    """The `detail` of a native error answer (section 8's shape checked)."""
    return shlib.assert_error(r, r.status)["detail"]


def free_port():
    return registry.free_port()


# ---- the store on disk ------------------------------------------------------------------------

def store(d):
    return d.root / "images"


def store_listing(d):
    """{blobs: [hex], layers: [hex], records: [file name], tmp: [name]} of the store now."""
    s = store(d)

    def ls(p):
        try:
            return sorted(os.listdir(p))
        except FileNotFoundError:
            return []
    return {"blobs": ls(s / "blobs" / "sha256"), "layers": ls(s / "layers" / "sha256"),
            "records": ls(s / "images"), "tmp": ls(s / "tmp")}


def record_name(ref):
    """images/<sha256 of the reference>.json (docs/images.md "The store")."""
    return hashlib.sha256(ref.encode()).hexdigest() + ".json"


def records(d):
    """The image records' JSON texts, by file name."""
    out = {}
    for n in store_listing(d)["records"]:
        try:
            out[n] = (store(d) / "images" / n).read_text(errors="replace")
        except OSError:
            pass
    return out


def wait_tmp_empty(d, timeout=15.0):
    """tmp/ of the store empties once a pull ended (its partial files dropped)."""
    return shlib.wait_until(lambda: not store_listing(d)["tmp"], timeout=timeout)


def layer_hexes(layout, desc):
    """The compressed digests' hex of the layers of a manifest of layout, lowest first."""
    m = json.loads(layout.read_blob(desc["digest"]))
    return [x["digest"].split(":", 1)[1] for x in m["layers"]]


def assert_nothing_kept(d, ref, hexes, what=""):
    """After a refused pull: no image record for ref, no layer directory (and no blob) of the
    refused layers, tmp/ emptied."""
    assert wait_tmp_empty(d), "%s: tmp/ keeps %r" % (what, store_listing(d)["tmp"])
    ls = store_listing(d)
    assert record_name(ref) not in ls["records"], "%s: an image record was written" % what
    for n, text in records(d).items():
        assert ref not in text, "%s: record %s names %s" % (what, n, ref)
    for h in hexes:
        assert h not in ls["layers"], "%s: layer %s kept in the store" % (what, h[:12])


def host_paths_state(paths):
    """{path: lstat key or None} to compare before/after an attack."""
    out = {}
    for p in paths:
        try:
            st = os.lstat(p)
            out[p] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode, st.st_nlink)
        except FileNotFoundError:
            out[p] = None
    return out


def wait_ready_state(client, want, timeout):
    """Poll /readyz until it answers `want`; returns the last status."""
    deadline = time.monotonic() + timeout
    while True:
        st = client.get("/readyz", timeout=5).status
        if st == want or time.monotonic() > deadline:
            return st
        time.sleep(0.1)


def manifest_digest(reg, name, tag):
    """The digest the registry gives name:tag's manifest (Docker-Content-Digest)."""
    st, h, body = build.Client(reg).get_manifest(name, tag)
    assert st == 200, (st, body[:300])
    return {k.lower(): v for k, v in h.items()}["docker-content-digest"]
