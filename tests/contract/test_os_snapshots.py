"""OPENSANDBOX.md section 2.1, snapshots: `POST /v1/sandboxes/{id}/snapshots` -> 202 Creating,
then a frozen, confined rsync of the workspace (not /tmp, not the image) into
{snapshot root}/{snapshot id}/ -> Ready; a byte-exact round trip into a new sandbox created
from `snapshotId`; list (sandboxId, state, name; pagination), get, delete (409 while
Creating); records (a JSON file beside each tree) that survive a daemon restart and the
sandbox; the snapshot root's defaults."""
import json
import os
import time
import urllib.parse

import pytest

import execlib
import oslib
import persistlib
import shlib
from oslib import expect, expect_400

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

READY_WAIT = 60.0


def snap(osc, sid, name=None):
    body = {} if name is None else {"name": name}
    r = osc.post("/v1/sandboxes/%s/snapshots" % sid, body)
    j = expect(r, 202)
    assert j["status"]["state"] == "Creating", j
    assert j["sandboxId"] == sid
    if name is not None:
        assert j["name"] == name
    return j


def wait_snapshot(osc, snid, want="Ready", timeout=READY_WAIT):
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        j = expect(osc.get("/v1/snapshots/" + snid), 200)
        st = j["status"]["state"]
        if not seen or seen[-1] != st:
            seen.append(st)
        if st == want:
            return j, seen
        assert st in ("Creating", want), "snapshot went %r (seen %r): %r" % (st, seen, j)
        assert time.monotonic() < deadline, "snapshot not %s in %ss: %r" % (want, timeout, seen)
        time.sleep(0.05)


def ready_snapshot(osc, sid, name=None):
    j = snap(osc, sid, name)
    return wait_snapshot(osc, j["id"])[0]


def from_snapshot(osc, snid, **kw):
    b = dict(oslib.SDK_DEFAULT_CREATE)
    del b["image"]
    del b["entrypoint"]  # optional with snapshotId
    b["snapshotId"] = snid
    b.update(kw)
    return osc.create_ok(b)


def populate(daemon, osc, sid, n_files=500):
    """A workspace with everything rsync keeps (docs/persistence.md, Fidelity): contents,
    modes, empty directories, links of every kind, a sparse file, hard links, awkward names
    (persistlib.fill_rich_tree, planted as root and given to the sandbox's uid), plus a file
    uploaded through the native API. Returns its tree_entries()."""
    ws = daemon.ws(sid)
    persistlib.fill_rich_tree(str(ws), n_files=n_files)
    persistlib.chown_tree(str(ws), os.stat(ws).st_uid)
    osc.native(sid).put_ok("bin/random.bin", os.urandom(1 << 20) + b"\0tail")
    return persistlib.tree_entries(str(ws))


def test_snapshot_round_trip_is_byte_exact(daemon, osc, sbx):
    before = populate(daemon, osc, sbx["id"])
    s = ready_snapshot(osc, sbx["id"], name="round-trip")
    assert s["status"]["state"] == "Ready"
    # the source changes afterwards: the snapshot is a point in time
    osc.native(sbx["id"]).put_ok("later.txt", b"after the snapshot")
    j = from_snapshot(osc, s["id"])
    try:
        after = persistlib.tree_entries(str(daemon.ws(j["id"])))
        assert after == before, persistlib.diff(before, after)
        g = osc.sandbox_ok(j["id"])
        assert g["snapshotId"] == s["id"]
        assert "image" not in g
        assert isinstance(g["entrypoint"], list) and g["entrypoint"]
        # the restored files belong to the new sandbox and are usable from inside
        n = osc.native(j["id"])
        assert execlib.sh(n, "cat hard/a && test -w empty-file && echo w") == \
            "hard linked\nw\n"
    finally:
        osc.kill(j["id"])


def test_snapshot_holds_the_workspace_not_tmp(daemon, osc, sbx):
    n = osc.native(sbx["id"])
    n.put_ok("in-workspace", b"w")
    execlib.ok(n, ["sh", "-c", "echo t > /tmp/in-tmp"])
    s = ready_snapshot(osc, sbx["id"])
    j = from_snapshot(osc, s["id"])
    try:
        m = osc.native(j["id"])
        assert m.get_v("in-workspace") == b"w"
        assert execlib.sh(m, "test -e /tmp/in-tmp && echo yes || echo no") == "no\n"
    finally:
        osc.kill(j["id"])


def test_create_from_snapshot_takes_entrypoint_env_and_metadata(daemon, osc, sbx):
    osc.native(sbx["id"]).put_ok("f", b"1")
    s = ready_snapshot(osc, sbx["id"])
    m = execlib.marker()
    j = from_snapshot(osc, s["id"], entrypoint=["sleep", m], env={"R": "restored"},
                      metadata={"from": "snap"})
    try:
        assert shlib.wait_until(lambda: execlib.host_sleepers(m), timeout=10)
        g = osc.sandbox_ok(j["id"])
        assert g["entrypoint"] == ["sleep", m] and g["metadata"] == {"from": "snap"}
        assert execlib.sh(osc.native(j["id"]), "echo $R") == "restored\n"
    finally:
        osc.kill(j["id"])
        execlib.kill_pids([p[0] for p in execlib.wait_gone(lambda: execlib.host_sleepers(m),
                                                           timeout=10)], osc.c.daemon_pid)


def test_snapshot_leaves_the_source_running(daemon, osc, sbx):
    sid = sbx["id"]
    execlib.ok(osc.native(sid), ["sh", "-c", "(i=0; while :; do i=$((i+1)); echo $i > "
                                             "/tmp/c.t && mv /tmp/c.t /tmp/c; sleep 0.02; "
                                             "done) >/dev/null 2>&1 &"])
    ready_snapshot(osc, sid)
    assert osc.sandbox_ok(sid)["status"]["state"] == "Running"
    a = execlib.sh(osc.native(sid), "cat /tmp/c")
    time.sleep(0.3)
    b = execlib.sh(osc.native(sid), "cat /tmp/c")
    assert int(b) > int(a), "the source sandbox stayed frozen after its snapshot"
    expect(osc.execd(sid, "GET", "/ping"), 200)


def test_snapshot_tree_lands_in_the_default_root(daemon, osc, sbx):
    token = os.urandom(8).hex().encode()
    osc.native(sbx["id"]).put_ok("marker.bin", token)
    s = ready_snapshot(osc, sbx["id"])
    tree = daemon.root / "snapshots" / s["id"]
    assert tree.is_dir(), "section 2.1: {SANDBOX_HOST_ROOT}/snapshots/{snapshot id}/"
    hits = [p for p in tree.rglob("marker.bin") if p.read_bytes() == token]
    assert hits, "the workspace copy is not below %s" % tree
    # the record is a JSON file beside the tree
    assert [p for p in (daemon.root / "snapshots").iterdir() if p.suffix == ".json"] or \
        [p for p in (daemon.root / "snapshots").rglob("*.json") if tree not in p.parents]


def test_snapshot_root_defaults_below_the_nfs_root(start_daemon, tmp_path):
    nfs = tmp_path / "nfs"
    nfs.mkdir()
    d = start_daemon(env={"SANDBOX_HOST_NFS_ROOT": str(nfs)})
    osc = oslib.os_client(d)
    j = osc.create_ok()
    osc.native(j["id"]).put_ok("x", b"nfs")
    s = ready_snapshot(osc, j["id"])
    assert (nfs / ".snapshots" / s["id"]).is_dir()
    assert not (d.root / "snapshots" / s["id"]).exists()


@pytest.mark.parametrize("how", ["env", "flag"])
def test_snapshot_root_setting_wins(start_daemon, tmp_path, how):
    root = tmp_path / "snaps"
    nfs = tmp_path / "nfs"
    nfs.mkdir()
    if how == "env":
        d = start_daemon(env={"SANDBOX_HOST_SNAPSHOT_ROOT": str(root),
                              "SANDBOX_HOST_NFS_ROOT": str(nfs)})
    else:
        d = start_daemon(env={"SANDBOX_HOST_NFS_ROOT": str(nfs)},
                         args=["--snapshot-root", str(root)])
    osc = oslib.os_client(d)
    j = osc.create_ok()
    osc.native(j["id"]).put_ok("x", b"own root")
    s = ready_snapshot(osc, j["id"])
    assert (root / s["id"]).is_dir()
    assert not (nfs / ".snapshots" / s["id"]).exists()


def test_snapshots_survive_a_daemon_restart_and_their_sandbox(start_daemon, tmp_path):
    root = tmp_path / "state"
    root.mkdir()
    d = start_daemon(root=str(root))
    osc = oslib.os_client(d)
    j = osc.create_ok()
    payload = os.urandom(4096)
    osc.native(j["id"]).put_ok("kept.bin", payload)
    s = ready_snapshot(osc, j["id"], name="before-restart")
    expect(osc.delete("/v1/sandboxes/" + j["id"]), 204)
    # still there without its sandbox
    assert expect(osc.get("/v1/snapshots/" + s["id"]), 200)["status"]["state"] == "Ready"
    d.stop_ok()
    d2 = start_daemon(root=str(root))
    osc2 = oslib.os_client(d2)
    g = expect(osc2.get("/v1/snapshots/" + s["id"]), 200)
    assert g["id"] == s["id"] and g["sandboxId"] == j["id"] and g["name"] == "before-restart"
    assert g["status"]["state"] == "Ready"
    assert g["createdAt"] == s["createdAt"]
    assert s["id"] in [x["id"] for x in expect(osc2.get("/v1/snapshots?pageSize=200"),
                                               200)["items"]]
    k = from_snapshot(osc2, s["id"])
    assert osc2.native(k["id"]).get_v("kept.bin") == payload


def test_snapshot_get_and_delete(daemon, osc, sbx):
    s = ready_snapshot(osc, sbx["id"], name="to-delete")
    g = expect(osc.get("/v1/snapshots/" + s["id"]), 200)
    assert g["name"] == "to-delete" and g["sandboxId"] == sbx["id"]
    oslib.parse_time(g["createdAt"])
    r = osc.delete("/v1/snapshots/" + s["id"])
    expect(r, 204)
    assert r.body == b""
    expect(osc.get("/v1/snapshots/" + s["id"]), 404, "SNAPSHOT_NOT_FOUND")
    expect(osc.delete("/v1/snapshots/" + s["id"]), 404, "SNAPSHOT_NOT_FOUND")
    assert not (daemon.root / "snapshots" / s["id"]).exists()
    # a sandbox can no longer be made from it
    b = dict(oslib.SDK_DEFAULT_CREATE, snapshotId=s["id"])
    del b["image"]
    r = osc.create(b)
    assert r.status in (400, 404), r


def test_delete_while_creating_is_409_invalid_state(daemon, osc, sbx):
    """A workspace big enough that its copy takes a while; the DELETE is sent right after
    the 202, while the snapshot is still Creating (tried a few times: a copy that finished
    first proves nothing and is retried)."""
    ws = daemon.ws(sbx["id"])
    persistlib.fill_rich_tree(str(ws), n_files=3000)
    with open(ws / "big.bin", "wb") as f:
        f.write(os.urandom(1 << 20) * 48)
    persistlib.chown_tree(str(ws), os.stat(ws).st_uid)
    got409 = False
    for _ in range(3):
        j = snap(osc, sbx["id"])
        r = osc.delete("/v1/snapshots/" + j["id"])
        if r.status == 409:
            assert r.json()["code"] == "INVALID_STATE", r
            got409 = True
            # it finishes anyway, and then can be deleted
            wait_snapshot(osc, j["id"])
            expect(osc.delete("/v1/snapshots/" + j["id"]), 204)
            break
        expect(r, 204)  # it was Ready already
    assert got409, "never caught a snapshot while Creating"


def test_snapshot_name_rules(osc, sbx):
    expect_400(osc.post("/v1/sandboxes/%s/snapshots" % sbx["id"], {"name": ""}))
    expect_400(osc.post("/v1/sandboxes/%s/snapshots" % sbx["id"], {"name": 5}))
    # no body at all is an unnamed snapshot (the request body is optional)
    r = osc.request("POST", "/v1/sandboxes/%s/snapshots" % sbx["id"], body=b"")
    j = expect(r, 202)
    assert "name" not in j or j["name"]
    wait_snapshot(osc, j["id"])


def test_snapshot_list_filters_and_paginates(osc, sbx):
    other = osc.create_ok()
    try:
        tag = oslib.uniq("n")
        a = ready_snapshot(osc, sbx["id"], name=tag)
        b = ready_snapshot(osc, sbx["id"], name=tag + "-b")
        c = ready_snapshot(osc, other["id"], name=tag)

        def ids(query):
            return [x["id"] for x in expect(osc.get("/v1/snapshots?" + query), 200)["items"]]
        assert ids("sandboxId=" + sbx["id"]) == [a["id"], b["id"]]
        assert ids("sandboxId=" + other["id"]) == [c["id"]]
        assert ids("name=" + urllib.parse.quote(tag)) == [a["id"], c["id"]]
        assert ids("sandboxId=%s&name=%s" % (sbx["id"], tag)) == [a["id"]]
        assert ids("sandboxId=%s&state=Ready" % sbx["id"]) == [a["id"], b["id"]]
        assert ids("sandboxId=%s&state=Creating&state=Failed" % sbx["id"]) == []
        assert ids("sandboxId=%s&state=Failed&state=Ready" % sbx["id"]) == [a["id"], b["id"]]
        p1 = expect(osc.get("/v1/snapshots?sandboxId=%s&pageSize=1" % sbx["id"]), 200)
        assert [x["id"] for x in p1["items"]] == [a["id"]]
        assert p1["pagination"] == {"page": 1, "pageSize": 1, "totalItems": 2, "totalPages": 2,
                                    "hasNextPage": True}
        p2 = expect(osc.get("/v1/snapshots?sandboxId=%s&pageSize=1&page=2" % sbx["id"]), 200)
        assert [x["id"] for x in p2["items"]] == [b["id"]]
        assert p2["pagination"]["hasNextPage"] is False
        assert ids("sandboxId=" + oslib.uniq()) == []
    finally:
        osc.kill(other["id"])


@pytest.mark.parametrize("query", ["page=0", "pageSize=0", "pageSize=201", "page=x"])
def test_snapshot_list_pagination_bounds_are_400(osc, query):
    expect_400(osc.get("/v1/snapshots?" + query))


def test_snapshot_of_an_unknown_sandbox_is_404(osc):
    expect(osc.post("/v1/sandboxes/%s/snapshots" % ("f" * 40), {}), 404, "SANDBOX_NOT_FOUND")


def test_snapshot_is_refused_from_a_paused_sandbox_or_taken(osc, sbx):
    # INTERPRETATION: the YAML says the source must be Running; OPENSANDBOX.md freezes the
    # sandbox for the copy anyway. A paused source gives 409 INVALID_STATE or a snapshot.
    expect(osc.post("/v1/sandboxes/%s/pause" % sbx["id"]), 202)
    osc.wait_state(sbx["id"], "Paused")
    r = osc.post("/v1/sandboxes/%s/snapshots" % sbx["id"], {})
    if r.status == 202:
        wait_snapshot(osc, r.json()["id"])
        assert osc.sandbox_ok(sbx["id"])["status"]["state"] == "Paused"
    else:
        expect(r, 409, "INVALID_STATE")


# ---- failures, hostile records, what is refused ----------------------------------------------

SNAP_A = "snap-" + "a" * 40


def record(sid, sandbox_id, state="Ready", **extra):
    r = {"version": 1, "id": sid, "sandboxId": sandbox_id, "name": "planted", "state": state,
         "reason": "r", "createdAtMs": 1700000000000, "lastTransitionAtMs": 1700000000000}
    r.update(extra)
    return json.dumps(r)


def test_a_failed_copy_is_failed_with_its_reason_and_leaves_no_tree(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_PERSIST_MAX_BYTES": "1M"})
    osc = oslib.os_client(d)
    j = osc.create_ok()
    osc.native(j["id"]).put_ok("big.bin", os.urandom(2 << 20))
    s = snap(osc, j["id"])
    g, _ = wait_snapshot(osc, s["id"], want="Failed")
    assert g["status"]["reason"] == "snapshot_capture_failed", g
    assert "SANDBOX_HOST_PERSIST_MAX_BYTES" in g["status"]["message"], g
    assert shlib.wait_until(lambda: not (d.root / "snapshots" / s["id"]).exists(), timeout=10)
    # a Failed snapshot restores nothing, and can be deleted
    b = dict(oslib.SDK_DEFAULT_CREATE, snapshotId=s["id"])
    del b["image"]
    expect(osc.create(b), 409, "INVALID_STATE")
    expect(osc.delete("/v1/snapshots/" + s["id"]), 204)
    # the source still runs
    expect(osc.execd(j["id"], "GET", "/ping"), 200)


def test_hostile_and_corrupt_record_files_are_skipped_at_start(start_daemon, tmp_path):
    """Every file in the snapshot root is hostile input (a shared NFS root, a past version):
    a record is used only when it is a regular file named {id}.json holding that id, valid in
    every field; a Ready one only with its tree a real directory. Nothing in a record is ever a
    path. The rest is skipped with a log line, and the start is not held up (a FIFO)."""
    root = tmp_path / "snaps"
    root.mkdir()
    sb = "0" * 40
    good = "snap-" + "1" * 40
    (root / (good + ".json")).write_text(record(good, sb))
    (root / good).mkdir()
    (root / good / "kept.txt").write_text("kept")
    hostile = {
        # the id is not the file's name: a path elsewhere
        "snap-" + "2" * 40: record("../../etc", sb),
        # a Ready record whose tree is a link to the host's /etc
        "snap-" + "3" * 40: record("snap-" + "3" * 40, sb),
        # not JSON, not an object, a future version, a bad sandbox id, a bad state
        "snap-" + "4" * 40: "{\"version\": 1,",
        "snap-" + "5" * 40: "[]",
        "snap-" + "6" * 40: record("snap-" + "6" * 40, sb, version=99),
        "snap-" + "7" * 40: record("snap-" + "7" * 40, "/etc/passwd"),
        "snap-" + "8" * 40: record("snap-" + "8" * 40, sb, state="Gone"),
        # larger than a record may be
        "snap-" + "9" * 40: record("snap-" + "9" * 40, sb, message="x" * 100000),
    }
    for sid, text in hostile.items():
        (root / (sid + ".json")).write_text(text)
    os.symlink("/etc", root / ("snap-" + "3" * 40))
    link = "snap-" + "b" * 40
    os.symlink(root / (good + ".json"), root / (link + ".json"))  # a record that is a link
    fifo = "snap-" + "c" * 40
    os.mkfifo(root / (fifo + ".json"))
    d = start_daemon(env={"SANDBOX_HOST_SNAPSHOT_ROOT": str(root)})
    osc = oslib.os_client(d)
    items = expect(osc.get("/v1/snapshots?pageSize=200"), 200)["items"]
    assert [x["id"] for x in items] == [good], items
    assert items[0]["status"]["state"] == "Ready" and items[0]["sandboxId"] == sb
    for sid in list(hostile) + [link, fifo]:
        expect(osc.get("/v1/snapshots/" + sid), 404, "SNAPSHOT_NOT_FOUND")
    skipped = [ln for ln in d.lines if "snapshot-record-skipped" in ln]
    assert len(skipped) >= len(hostile) + 2, "\n".join(skipped)
    # the link's target was never followed: /etc is untouched and no tree of its is used
    b = dict(oslib.SDK_DEFAULT_CREATE, snapshotId="snap-" + "3" * 40)
    del b["image"]
    expect(osc.create(b), 404, "SNAPSHOT_NOT_FOUND")
    # the good one restores
    k = from_snapshot(osc, good)
    assert osc.native(k["id"]).get_v("kept.txt") == b"kept"


def test_a_creating_record_is_failed_after_a_restart(start_daemon, tmp_path):
    """A record still Creating is a copy the daemon that made it did not finish."""
    root = tmp_path / "snaps"
    root.mkdir()
    sid = "snap-" + "d" * 40
    (root / (sid + ".json")).write_text(record(sid, "0" * 40, state="Creating"))
    d = start_daemon(env={"SANDBOX_HOST_SNAPSHOT_ROOT": str(root)})
    g = expect(oslib.os_client(d).get("/v1/snapshots/" + sid), 200)
    assert g["status"]["state"] == "Failed" and g["status"]["reason"] == "snapshot_interrupted"


def test_a_native_sandbox_has_no_snapshots(daemon, osc):
    """A native remote_id is a capability of the native API; the /v1 surface knows only its own
    sandboxes (a snapshot would list the id to anyone who lists snapshots)."""
    n = daemon.client.new_sandbox()
    try:
        expect(osc.post("/v1/sandboxes/%s/snapshots" % n.rid, {}), 404, "SANDBOX_NOT_FOUND")
    finally:
        n.delete()


def test_a_snapshot_body_takes_only_a_name(osc, sbx):
    expect_400(osc.post("/v1/sandboxes/%s/snapshots" % sbx["id"], {"name": "n", "ttl": 5}))
    expect_400(osc.post("/v1/sandboxes/%s/snapshots" % sbx["id"], ["n"]))
    expect_400(osc.post("/v1/sandboxes/%s/snapshots" % sbx["id"], {"name": "a\nb"}))
    expect_400(osc.post("/v1/sandboxes/%s/snapshots" % sbx["id"], {"name": "x" * 257}))


def test_snapshot_list_refuses_an_unknown_state(osc):
    expect_400(osc.get("/v1/snapshots?state=Gone"))


def test_a_sandbox_from_a_snapshot_runs_the_source_entrypoint_unless_told(daemon, osc):
    m = execlib.marker()
    src = osc.create_ok(entrypoint=["sleep", m])
    try:
        s = ready_snapshot(osc, src["id"])
    finally:
        osc.kill(src["id"])
    j = from_snapshot(osc, s["id"])
    try:
        assert osc.sandbox_ok(j["id"])["entrypoint"] == ["sleep", m]
        assert shlib.wait_until(lambda: execlib.host_sleepers(m), timeout=10)
    finally:
        osc.kill(j["id"])
        execlib.kill_pids([p[0] for p in execlib.wait_gone(lambda: execlib.host_sleepers(m),
                                                           timeout=10)], osc.c.daemon_pid)


def test_snapshot_copies_are_not_the_sandboxes_to_reach(daemon, osc, sbx):
    """The snapshot root is outside every sandbox: nothing of it shows inside, and a workspace
    link to it is copied as a link, never followed."""
    n = osc.native(sbx["id"])
    s = ready_snapshot(osc, sbx["id"])
    root = daemon.root / "snapshots"
    ws = daemon.ws(sbx["id"])
    os.symlink(str(root / s["id"]), ws / "to-snapshot")
    assert execlib.sh(n, "test -e /workspace/to-snapshot && echo seen || echo unseen") == \
        "unseen\n"
    t = ready_snapshot(osc, sbx["id"])
    assert os.path.islink(root / t["id"] / "to-snapshot")


def test_the_snapshot_root_appears_with_the_first_snapshot_not_at_start(start_daemon, tmp_path):
    """A daemon that never takes a snapshot leaves no trace in the archive root (the native
    contract's archive holds only items); the first snapshot makes the root, 0700."""
    nfs = tmp_path / "nfs"
    nfs.mkdir()
    d = start_daemon(env={"SANDBOX_HOST_NFS_ROOT": str(nfs)})
    osc = oslib.os_client(d)
    j = osc.create_ok()
    assert os.listdir(nfs) == []
    ready_snapshot(osc, j["id"])
    assert os.stat(nfs / ".snapshots").st_mode & 0o777 == 0o700


def test_a_shutdown_during_a_copy_exits_cleanly_and_the_snapshot_is_failed_or_ready(start_daemon,
                                                                                     tmp_path):
    """SIGTERM while a copy runs: the shutdown deletes the sandbox, which stops the copy; its
    snapshot ends Failed (sandbox_deleted, or snapshot_interrupted when the persister goes
    first) and says so after the restart; the daemon exits 0."""
    root = tmp_path / "state"
    root.mkdir()
    d = start_daemon(root=str(root))
    osc = oslib.os_client(d)
    j = osc.create_ok()
    ws = d.ws(j["id"])
    persistlib.fill_rich_tree(str(ws), n_files=3000)
    with open(ws / "big.bin", "wb") as f:
        f.write(os.urandom(1 << 20) * 48)
    persistlib.chown_tree(str(ws), os.stat(ws).st_uid)
    s = snap(osc, j["id"])
    d.stop_ok("during a snapshot's copy")
    d2 = start_daemon(root=str(root))
    g = expect(oslib.os_client(d2).get("/v1/snapshots/" + s["id"]), 200)
    assert g["status"]["state"] in ("Ready", "Failed"), g
    if g["status"]["state"] == "Failed":
        assert g["status"]["reason"] in ("sandbox_deleted", "snapshot_interrupted"), g
    d2.stop_ok()
