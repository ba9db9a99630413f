"""Issue 22 on /v1 (OPENSANDBOX.md section 2, docs/images.md): a create whose `image.uri` must
be pulled answers 202 Pending at once and becomes Running, or Failed with reason
IMAGE_PULL_FAILED and the registry's answer in `message`; execd routes of a Pending sandbox
answer 503 UNAVAILABLE with Retry-After; a Pending sandbox can be deleted (nothing of it
left running); `image.auth` is that pull's credentials, never shown; the image's program
runs and its WorkingDir is the default cwd; diagnostics `lifecycle` shows the pull's
progress; SANDBOX_HOST_IMAGE_PULL=off is 400 INVALID_IMAGE. Real registries from
tests/images, hostile ones (a registry that stalls) from tests/images/hostile.py."""
import json
import os

import pytest

import imagelib
import oslib
import shlib
from imagelib import build, hostile, registry
from oslib import expect, expect_400
from sselib import stdout_of

pytestmark = [imagelib.skip_unless_possible]

BUSYBOX_PASSWD = ["root:x:0:0:root:/root:/bin/sh", "nobody:x:65534:65534::/:/bin/sh"]
WAIT = 90.0  # a pull of a small image from a local registry ends within this


def body_for(uri, **image):
    b = dict(oslib.SDK_DEFAULT_CREATE)
    b["image"] = dict({"uri": uri}, **image)
    return b


@pytest.fixture(scope="module")
def regs(tmp_path_factory):
    """A plain registry (busybox, `wd`: busybox with WorkingDir /srv/wd) and an htpasswd one
    (busybox): (plain, refs, htpasswd, its busybox ref)."""
    work = str(tmp_path_factory.mktemp("osimages"))
    with registry.Registry("plain") as reg, registry.Registry("htpasswd") as ht:
        refs, _ = build.push_named(reg, ["busybox"], work)
        lay = build.Layout(os.path.join(work, "wd"))
        base = lay.add_layer(build.busybox_entries(), "gzip")
        top = lay.add_layer([("dir", "srv"), ("dir", "srv/wd", 0o777),
                             ("file", "srv/wd/here", b"wd\n")], "gzip")
        refs["wd_desc"] = lay.add_image([base, top], tag="wd", workdir="/srv/wd")
        refs["wd_layout"] = lay
        refs["wd"] = build.push(lay, "wd", reg, "test/wd:1")
        htlay = build.Layout(os.path.join(work, "ht"))
        build.busybox(htlay, tag="1")
        htref = build.push(htlay, "1", ht, "test/busybox:1")
        # another name of it, pulled only with wrong credentials (never in the store)
        refs["ht_wrong"] = build.push(htlay, "1", ht, "test/busybox-wrong-auth:1")
        yield reg, refs, ht, htref


@pytest.fixture(scope="module")
def od(regs):
    reg, _, ht, _ = regs
    with shlib.running(env=imagelib.env_for(reg.host, ht.host)) as d:
        yield d


@pytest.fixture
def oc(od):
    return oslib.os_client(od)


def create_pending(oc, body):
    r = oc.create(body, timeout=30)
    j = expect(r, 202)
    assert j["status"]["state"] == "Pending", "a create that must pull answers Pending: %r" % j
    return j


# ---- Pending, then Running ----------------------------------------------------------------------

def test_a_reference_not_in_the_store_is_202_pending_then_running_and_runs_the_images_program(
        oc, regs):
    _, refs, _, _ = regs
    j = create_pending(oc, body_for(refs["busybox"]))
    try:
        assert oc.sandbox_ok(j["id"])["image"]["uri"] == refs["busybox"]
        got, seen = oc.wait_state(j["id"], "Running", timeout=WAIT)
        assert set(seen) <= {"Pending", "Running"}, seen
        assert stdout_of(oc, j["id"], "cat /etc/passwd") == BUSYBOX_PASSWD
    finally:
        oc.kill(j["id"])


def test_the_images_workingdir_is_the_default_cwd_of_a_command(oc, regs):
    _, refs, _, _ = regs
    r = oc.create(body_for(refs["wd"]), timeout=30)
    j = expect(r, 202)
    try:
        oc.wait_state(j["id"], "Running", timeout=WAIT)
        assert stdout_of(oc, j["id"], "pwd; cat here") == ["/srv/wd", "wd"]
        assert stdout_of(oc, j["id"], "pwd", cwd="/tmp") == ["/tmp"]
    finally:
        oc.kill(j["id"])


def test_the_pulls_progress_is_in_diagnostics_lifecycle(oc, regs, od):
    reg, refs, _, _ = regs
    # a fresh image (not in the module daemon's store yet): the wd image under another tag
    ref = build.push(refs["wd_layout"], "wd", reg, "test/wd-progress:1")
    j = create_pending(oc, body_for(ref))
    try:
        oc.wait_state(j["id"], "Running", timeout=WAIT)
        logs = expect(oc.get("/v1/sandboxes/%s/diagnostics/logs?scope=lifecycle" % j["id"]), 200)
        text = logs["content"]
        m = json.loads(refs["wd_layout"].read_blob(refs["wd_desc"]["digest"]))
        for layer in m["layers"]:
            h = layer["digest"].split(":", 1)[1]
            lines = [ln for ln in text.splitlines() if h[:12] in ln]
            assert lines, "no progress line names layer %s:\n%s" % (h[:12], text[-3000:])
            assert any(str(layer["size"]) in ln for ln in lines), \
                "no line gives layer %s's %d bytes: %r" % (h[:12], layer["size"], lines)
    finally:
        oc.kill(j["id"])


# ---- failures -----------------------------------------------------------------------------------

def test_an_unknown_tag_ends_failed_image_pull_failed_naming_the_registrys_answer(oc, regs):
    reg, _, _, _ = regs
    j = create_pending(oc, body_for(reg.ref("test/busybox", "no-such-tag")))
    got, seen = oc.wait_state(j["id"], "Failed", timeout=WAIT)
    st = got["status"]
    assert st["reason"] == "IMAGE_PULL_FAILED", st
    assert "manifest unknown" in st.get("message", "").lower().replace("_", " "), st
    assert oc.delete("/v1/sandboxes/" + j["id"]).status == 204
    expect(oc.sandbox(j["id"]), 404, "SANDBOX_NOT_FOUND")


def test_image_auth_is_that_pulls_credentials_and_never_shown(oc, od, regs):
    _, _, ht, ref = regs
    pw = ht.password
    j = create_pending(oc, body_for(ref, auth={"username": ht.user, "password": pw}))
    try:
        got, seen = oc.wait_state(j["id"], "Running", timeout=WAIT)
        assert stdout_of(oc, j["id"], "cat /etc/passwd") == BUSYBOX_PASSWD
        for r in (oc.sandbox(j["id"]), oc.get("/v1/sandboxes"),
                  oc.get("/v1/sandboxes/%s/diagnostics/logs?scope=all" % j["id"]),
                  oc.get("/v1/sandboxes/%s/diagnostics/events?scope=all" % j["id"])):
            assert pw.encode() not in r.body, r
        assert pw not in od.stderr_text(), "the password was logged"
    finally:
        oc.kill(j["id"])


def test_a_wrong_image_auth_ends_failed(oc, regs):
    _, refs, ht, _ = regs
    j = create_pending(oc, body_for(refs["ht_wrong"],
                                    auth={"username": ht.user, "password": "wrong-pw"}))
    got, _ = oc.wait_state(j["id"], "Failed", timeout=WAIT)
    assert got["status"]["reason"] == "IMAGE_PULL_FAILED", got
    assert "unauthorized" in got["status"].get("message", "").lower(), got
    assert oc.delete("/v1/sandboxes/" + j["id"]).status == 204


def test_an_image_pulled_with_one_callers_credentials_is_not_served_to_another(regs, start_daemon):
    # docs/images.md "A pull secret": the registry gave it to those credentials; a caller
    # without them (or with others) asks the registry itself and is refused, however long the
    # image stays in the store; the same credentials get it from the store.
    reg, _, ht, ref = regs
    d = start_daemon(env=imagelib.env_for(reg.host, ht.host))
    oc = oslib.os_client(d)
    good = {"username": ht.user, "password": ht.password}
    j = create_pending(oc, body_for(ref, auth=good))
    try:
        oc.wait_state(j["id"], "Running", timeout=WAIT)
        for auth in (None, {"username": ht.user, "password": "not-" + ht.password}):
            body = body_for(ref, auth=auth) if auth else body_for(ref)
            k = create_pending(oc, body)
            got, _ = oc.wait_state(k["id"], "Failed", timeout=WAIT)
            assert got["status"]["reason"] == "IMAGE_PULL_FAILED", got
            assert "unauthorized" in got["status"].get("message", "").lower(), got
            assert oc.delete("/v1/sandboxes/" + k["id"]).status == 204
        k = oc.create(body_for(ref, auth=good), timeout=30)
        kj = expect(k, 202)
        try:
            oc.wait_state(kj["id"], "Running", timeout=WAIT)
            assert stdout_of(oc, kj["id"], "cat /etc/passwd") == BUSYBOX_PASSWD
        finally:
            oc.kill(kj["id"])
        # nothing derived from the credentials is written: no record of that image
        assert imagelib.store_listing(d)["records"] == [], imagelib.store_listing(d)
    finally:
        oc.kill(j["id"])


def test_image_pull_off_is_400_invalid_image(start_daemon, regs):
    reg, refs, _, _ = regs
    d = start_daemon(env=imagelib.env_for(reg.host, IMAGE_PULL="off"))
    expect_400(oslib.os_client(d).create(body_for(refs["busybox"])), codes=("INVALID_IMAGE",))


def test_a_name_that_is_no_reference_is_400_invalid_image(oc):
    expect_400(oc.create(body_for("Foo/UPPER")), codes=("INVALID_IMAGE",))


# ---- while Pending ------------------------------------------------------------------------------

@pytest.fixture
def stalled(start_daemon, tmp_path):
    """A daemon whose pulls from a StallRegistry never end (blob answers stall): (daemon,
    client, the reference)."""
    lay = build.Layout(str(tmp_path / "lay"))
    m = build.busybox(lay, tag="1")
    with hostile.StallRegistry(on="blob") as sr:
        ref = sr.load(lay, m, "test/stall", "1")
        d = start_daemon(env=imagelib.env_for(sr.host))
        yield d, oslib.os_client(d), ref, sr
        d.close()


def test_execd_routes_of_a_pending_sandbox_are_503_unavailable_with_retry_after(stalled):
    d, oc, ref, sr = stalled
    j = create_pending(oc, body_for(ref))
    assert shlib.wait_until(lambda: sr.stalled > 0, timeout=30), "the pull never reached a blob"
    assert oc.sandbox_ok(j["id"])["status"]["state"] == "Pending"
    for method, sub, body in (("POST", "/command", {"command": "true"}), ("GET", "/ping", None),
                              ("GET", "/files/info?path=/etc/passwd", None)):
        r = oc.execd(j["id"], method, sub, body=body)
        expect(r, 503, "UNAVAILABLE")
        ra = r.header("Retry-After")
        assert ra and ra.isdigit(), r
    assert oc.delete("/v1/sandboxes/" + j["id"]).status == 204


def test_delete_while_pending_answers_and_leaves_nothing_running(stalled):
    d, oc, ref, sr = stalled
    before = set(shlib.descendants(d.proc.pid))
    j = create_pending(oc, body_for(ref))
    assert shlib.wait_until(lambda: sr.stalled > 0, timeout=30), "the pull never reached a blob"
    r = oc.delete("/v1/sandboxes/" + j["id"], timeout=10)
    assert r.status == 204, r
    expect(oc.sandbox(j["id"]), 404, "SANDBOX_NOT_FOUND")
    left = shlib.wait_until(lambda: not (set(shlib.descendants(d.proc.pid)) - before),
                            timeout=10)
    assert left, "processes of the deleted sandbox left: %r" % (
        set(shlib.descendants(d.proc.pid)) - before)
    assert imagelib.wait_tmp_empty(d), imagelib.store_listing(d)
    assert imagelib.store_listing(d)["records"] == []
    # the daemon still serves
    shlib.healthz_ok(d.client)
