"""OPENSANDBOX.md section 2 `volumes` (issue 25), what a user asks and gets: a `host` volume
(read-write: a marker the test put there is read inside, a write from inside appears on the
host; read-only: a write fails), a `pvc` named volume `{SANDBOX_HOST_VOLUME_ROOT}/{claimName}`
(created on first use, seeded beforehand, read-only, `subPath` created if absent, two sandboxes
of different uids sharing one read-write, `deleteOnSandboxTermination`, `createIfNotExists:
false`), the refusals (`ossfs`, host volumes without `SANDBOX_HOST_VOLUME_HOST_ALLOW`, a path
that does not exist), the file API under a `mountPath` (readOnly honoured), the YAML's rules for
every field of `Volume`, `Host` and `PVC`, and the three settings. The attacks are
test_os_volumes_attacks.py.

Each test's host directories are below the module's own temporary directory (volumelib), made
0777 where a sandbox must write (the operator's part: a host directory's permissions are its
own), and removed with every sandbox when the test ends."""
import os
import threading

import pytest

import oslib
import shlib
import volumelib
from oslib import expect
from shlib import run_to_exit
from test_os_files import download, put, upload
from volumelib import (ALLOW, CALL, OSSFS, VOLUME_MAX, VROOT, Vols, host, pvc,
                       read_only_refuses, sh)
from volumelib import vdirs, vold, vols  # noqa: F401

pytestmark = volumelib.needs_root


def wait_gone(p, timeout=15.0):
    return shlib.wait_until(lambda: not os.path.lexists(p), timeout=timeout)


# ---- host volumes ---------------------------------------------------------------------------

def test_a_host_volume_shows_the_hosts_marker_inside(vols):
    d = vols.hostdir(marker="host-marker-1")
    sid = vols.sandbox(host("data", d, "/data"))
    assert sh(vols.osc, sid, "cat /data/marker.txt") == ["host-marker-1"]


def test_a_write_inside_a_read_write_host_volume_appears_on_the_host(vols):
    d = vols.hostdir()
    sid = vols.sandbox(host("data", d, "/data", read_only=False))
    sh(vols.osc, sid, "mkdir /data/sub && echo written-inside > /data/sub/out.txt")
    assert (d / "sub" / "out.txt").read_text() == "written-inside\n"


def test_a_change_on_the_host_is_seen_inside_at_once(vols):
    d = vols.hostdir()
    sid = vols.sandbox(host("data", d, "/data"))
    (d / "late.txt").write_text("late")
    assert sh(vols.osc, sid, "cat /data/late.txt") == ["late"]


def test_a_write_to_a_read_only_host_volume_fails_and_the_host_is_unchanged(vols):
    d = vols.hostdir(marker="ro-marker")
    before = shlib.snapshot_tree(d)
    sid = vols.sandbox(host("data", d, "/data", read_only=True))
    assert sh(vols.osc, sid, "cat /data/marker.txt") == ["ro-marker"]
    for cmd in ("touch /data/new", "echo x > /data/marker.txt", "rm /data/marker.txt",
                "mkdir /data/dir", "chmod 600 /data/marker.txt"):
        read_only_refuses(vols.osc, sid, cmd)
    assert shlib.snapshot_tree(d) == before


def test_the_allowed_prefix_itself_may_be_mounted(vols):
    (vols.allowed / "top-marker").write_text("top")
    vols.track(vols.allowed / "top-marker")
    sid = vols.sandbox(host("all", vols.allowed, "/data", read_only=True))
    assert sh(vols.osc, sid, "cat /data/top-marker") == ["top"]


def test_a_relative_link_inside_the_prefix_to_a_directory_inside_it_is_followed(vols):
    # the law: "without following a link out of it"; a link that stays inside is followed
    d = vols.hostdir(marker="through-a-link")
    link = vols.track(vols.allowed / oslib.uniq("l"))
    os.symlink(d.name, link)
    sid = vols.sandbox(host("data", link, "/data"))
    assert sh(vols.osc, sid, "cat /data/marker.txt") == ["through-a-link"]


def test_a_host_path_that_does_not_exist_is_400_naming_the_volume(vols):
    vols.refused([host("missing-dir", vols.allowed / oslib.uniq("none"), "/data")],
                 names=["missing-dir"])


def test_a_host_path_that_is_a_file_is_400_naming_the_volume(vols):
    f = vols.track(vols.allowed / oslib.uniq("f"))
    f.write_text("a file")
    vols.refused([host("a-file", f, "/data")], names=["a-file"])


def test_a_host_path_outside_every_allowed_prefix_is_400(vols):
    out = vols.outside("outside")
    vols.refused([host("data", out, "/data")])
    vols.refused([host("data", "/etc", "/data")])


def test_a_host_path_is_under_a_prefix_by_whole_components(vols):
    # /x/allowed allows /x/allowed/y, never /x/allowed-y
    twin = vols.track(vols.allowed.parent / (vols.allowed.name + "-twin"))
    twin.mkdir()
    os.chmod(twin, 0o777)
    vols.refused([host("data", twin, "/data")])


def test_host_volumes_without_the_allow_setting_are_400_not_supported_naming_it(start_daemon,
                                                                                 tmp_path):
    (tmp_path / "h").mkdir()
    (tmp_path / "v").mkdir()
    d = start_daemon(env={VROOT: str(tmp_path / "v")})
    osc = oslib.os_client(d)
    r = osc.create(volumelib.body([host("data", tmp_path / "h", "/data")]), timeout=CALL)
    b = expect(r, 400, "NOT_SUPPORTED")
    assert ALLOW in b["message"], b
    d.stop_ok()


def test_several_allowed_prefixes_each_allow_their_own_paths(start_daemon, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    (tmp_path / "v").mkdir()
    for p in (a, b):
        p.mkdir()
        (p / "m").write_text(p.name)
    d = start_daemon(env=volumelib.daemon_env(tmp_path / "v", [a, b]))
    osc = oslib.os_client(d)
    j = osc.create_ok(volumes=[host("va", a, "/va"), host("vb", b, "/vb")])
    try:
        assert sh(osc, j["id"], "cat /va/m; echo; cat /vb/m") == ["a", "b"]
    finally:
        osc.kill(j["id"])
    d.stop_ok()


# ---- named volumes (pvc) ----------------------------------------------------------------------

def test_a_named_volume_is_created_on_first_use(vols):
    c = vols.claim()
    assert not os.path.lexists(vols.vroot / c)
    sid = vols.sandbox(pvc("cache", c, "/cache"))
    assert os.path.isdir(vols.vroot / c) and not os.path.islink(vols.vroot / c)
    sh(vols.osc, sid, "echo first > /cache/f.txt && mkdir /cache/d && echo deep > /cache/d/g")
    assert (vols.vroot / c / "f.txt").read_text() == "first\n"
    assert (vols.vroot / c / "d" / "g").read_text() == "deep\n"


def test_a_named_volume_seeded_beforehand_shows_its_files_and_takes_writes(vols):
    c = vols.claim()
    vols.seed(c, "pvc-marker-data")
    sid = vols.sandbox(pvc("seeded", c, "/pvc"))
    assert sh(vols.osc, sid, "cat /pvc/marker.txt") == ["pvc-marker-data"]
    sh(vols.osc, sid, "echo written-to-pvc > /pvc/out.txt")
    assert (vols.vroot / c / "out.txt").read_text() == "written-to-pvc\n"


def test_a_named_volume_outlives_its_sandbox_and_the_next_one_reads_it(vols):
    c = vols.claim()
    sid = vols.sandbox(pvc("keep", c, "/keep"))
    sh(vols.osc, sid, "echo kept > /keep/k")
    vols.kill(sid)
    sid = vols.sandbox(pvc("keep", c, "/keep"))
    assert sh(vols.osc, sid, "cat /keep/k") == ["kept"]


def test_creates_racing_for_one_new_named_volume_all_mount_the_same_one(vols):
    c = vols.claim()
    results = [None] * 5

    def one(i):
        results[i] = vols.osc.create(volumelib.body([pvc("race", c, "/r")]), timeout=60)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(results))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(90)
    for r in results:
        assert r is not None and r.status == 202, r
        vols.sids.append(r.json()["id"])
    for i, sid in enumerate(vols.sids):
        sh(vols.osc, sid, "echo %d > /r/%d" % (i, i))
    assert sorted(os.listdir(vols.vroot / c)) == sorted(str(i) for i in range(len(results)))
    assert sh(vols.osc, vols.sids[0], "cat /r/* | sort -n") == \
        [str(i) for i in range(len(results))]


def test_a_read_only_named_volume_is_read_and_refuses_writes(vols):
    c = vols.claim()
    p = vols.seed(c, "pvc-ro")
    before = shlib.snapshot_tree(p)
    sid = vols.sandbox(pvc("ro", c, "/ro", read_only=True))
    assert sh(vols.osc, sid, "cat /ro/marker.txt") == ["pvc-ro"]
    for cmd in ("touch /ro/should-fail.txt", "echo x >> /ro/marker.txt", "rm /ro/marker.txt"):
        read_only_refuses(vols.osc, sid, cmd)
    assert shlib.snapshot_tree(p) == before


def test_a_read_only_named_volume_that_does_not_exist_yet_is_created_empty(vols):
    c = vols.claim()
    sid = vols.sandbox(pvc("ro", c, "/ro", read_only=True))
    assert os.path.isdir(vols.vroot / c)
    assert sh(vols.osc, sid, "ls -A /ro | wc -l") == ["0"]


def test_a_sub_path_of_a_named_volume_is_what_is_mounted(vols):
    c = vols.claim()
    p = vols.seed(c, "top")
    (p / "datasets" / "train").mkdir(parents=True)
    (p / "datasets" / "train" / "marker.txt").write_text("pvc-subpath-marker")
    os.chmod(p / "datasets" / "train", 0o777)
    sid = vols.sandbox(pvc("train", c, "/mnt/train", sub="datasets/train"))
    assert sh(vols.osc, sid, "cat /mnt/train/marker.txt") == ["pvc-subpath-marker"]
    assert sh(vols.osc, sid, "ls /mnt/train") == ["marker.txt"]
    sh(vols.osc, sid, "echo subpath-write > /mnt/train/output.txt")
    assert (p / "datasets" / "train" / "output.txt").read_text() == "subpath-write\n"


def test_a_sub_path_that_does_not_exist_is_created_and_takes_writes(vols):
    c = vols.claim()
    sid = vols.sandbox(pvc("sub", c, "/sub", sub="a/b/c"))
    assert os.path.isdir(vols.vroot / c / "a" / "b" / "c")
    sh(vols.osc, sid, "echo in-sub > /sub/f")
    assert (vols.vroot / c / "a" / "b" / "c" / "f").read_text() == "in-sub\n"


def test_a_sub_path_of_a_host_volume_is_what_is_mounted_and_is_created_if_absent(vols):
    d = vols.hostdir(marker="top")
    (d / "in").mkdir()
    (d / "in" / "inner.txt").write_text("inner")
    sid = vols.sandbox(host("in", d, "/in", sub="in"), host("new", d, "/new", sub="x/y"))
    assert sh(vols.osc, sid, "ls /in; cat /in/inner.txt") == ["inner.txt", "inner"]
    assert os.path.isdir(d / "x" / "y")
    assert sh(vols.osc, sid, "ls -A /new | wc -l") == ["0"]


def test_two_sandboxes_sharing_a_named_volume_read_and_change_each_others_files(vols):
    c = vols.claim()
    a = vols.sandbox(pvc("shared", c, "/shared"))
    b = vols.sandbox(pvc("shared", c, "/shared"))
    osc = vols.osc
    assert sh(osc, a, "id -u") != sh(osc, b, "id -u"), "the two sandboxes run as different uids"
    sh(osc, a, "echo from-a > /shared/a.txt && mkdir /shared/dir-a")
    assert sh(osc, b, "cat /shared/a.txt") == ["from-a"]
    sh(osc, b, "echo from-b >> /shared/a.txt && echo b-new > /shared/b.txt"
               " && echo into-a-dir > /shared/dir-a/f && mkdir /shared/dir-b")
    assert sh(osc, a, "cat /shared/a.txt /shared/b.txt /shared/dir-a/f") == \
        ["from-a", "from-b", "b-new", "into-a-dir"]
    sh(osc, a, "echo a-changed > /shared/b.txt && echo a-in-b > /shared/dir-b/g"
               " && mv /shared/dir-b/g /shared/dir-a/g")
    assert sh(osc, b, "cat /shared/b.txt /shared/dir-a/g") == ["a-changed", "a-in-b"]


def test_a_sandbox_mounting_the_shared_volume_read_only_sees_the_others_writes(vols):
    c = vols.claim()
    w = vols.sandbox(pvc("shared", c, "/shared"))
    r = vols.sandbox(pvc("shared", c, "/shared", read_only=True))
    sh(vols.osc, w, "mkdir -p /shared/d && echo news > /shared/d/n")
    assert sh(vols.osc, r, "cat /shared/d/n") == ["news"]
    read_only_refuses(vols.osc, r, "echo no >> /shared/d/n")


def test_one_sandbox_may_mount_the_same_named_volume_twice(vols):
    c = vols.claim()
    sid = vols.sandbox(pvc("rw", c, "/rw"), pvc("ro", c, "/ro", read_only=True))
    sh(vols.osc, sid, "echo both > /rw/b")
    assert sh(vols.osc, sid, "cat /ro/b") == ["both"]
    read_only_refuses(vols.osc, sid, "touch /ro/c")


def test_create_if_not_exists_false_on_a_missing_volume_is_400_naming_it(vols):
    c = vols.claim()
    vols.refused([pvc("strict", c, "/s", createIfNotExists=False)], names=["strict"])
    assert not os.path.lexists(vols.vroot / c)


def test_create_if_not_exists_false_on_an_existing_volume_mounts_it(vols):
    c = vols.claim()
    vols.seed(c, "exists")
    sid = vols.sandbox(pvc("strict", c, "/s", createIfNotExists=False))
    assert sh(vols.osc, sid, "cat /s/marker.txt") == ["exists"]


def test_delete_on_termination_removes_a_volume_this_pod_created(vols):
    c = vols.claim()
    sid = vols.sandbox(pvc("tmp", c, "/t", deleteOnSandboxTermination=True))
    # what a sandbox leaves is removed whatever its modes
    sh(vols.osc, sid, "mkdir -p /t/a/b && echo x > /t/a/b/f && chmod 000 /t/a/b/f"
                      " && chmod 500 /t/a/b && ln -s / /t/root && mkfifo /t/fifo")
    assert os.path.isdir(vols.vroot / c)
    vols.kill(sid)
    assert wait_gone(vols.vroot / c), "the volume this pod created was not removed"
    assert os.path.isdir(vols.vroot)


def test_delete_on_termination_keeps_a_volume_seeded_beforehand(vols):
    seeded, anchor = vols.claim(), vols.claim()
    vols.seed(seeded, "seeded-before")
    sid = vols.sandbox(pvc("seeded", seeded, "/s", deleteOnSandboxTermination=True),
                       pvc("anchor", anchor, "/a", deleteOnSandboxTermination=True))
    sh(vols.osc, sid, "echo by-sandbox > /s/w")
    vols.kill(sid)
    # the anchor (created by this pod) goes: by then the seeded one would have gone too
    assert wait_gone(vols.vroot / anchor)
    assert (vols.vroot / seeded / "marker.txt").read_text() == "seeded-before"
    assert (vols.vroot / seeded / "w").read_text() == "by-sandbox\n"


def test_without_delete_on_termination_a_created_volume_is_kept(vols):
    kept, anchor = vols.claim(), vols.claim()
    sid = vols.sandbox(pvc("kept", kept, "/k"),
                       pvc("anchor", anchor, "/a", deleteOnSandboxTermination=True))
    sh(vols.osc, sid, "echo stays > /k/s")
    vols.kill(sid)
    assert wait_gone(vols.vroot / anchor)
    assert (vols.vroot / kept / "s").read_text() == "stays\n"


def test_delete_on_termination_keeps_a_volume_another_live_sandbox_mounts(vols):
    # INTERPRETATION (the design of issue 25): removing a directory another sandbox of this pod
    # has mounted would pull its files from under it; the removal is skipped then
    c, anchor = vols.claim(), vols.claim()
    a = vols.sandbox(pvc("shared", c, "/s", deleteOnSandboxTermination=True),
                     pvc("anchor", anchor, "/a", deleteOnSandboxTermination=True))
    b = vols.sandbox(pvc("shared", c, "/s"))
    sh(vols.osc, a, "echo from-a > /s/f")
    vols.kill(a)
    assert wait_gone(vols.vroot / anchor)
    assert (vols.vroot / c / "f").read_text() == "from-a\n"
    assert sh(vols.osc, b, "cat /s/f") == ["from-a"]


def test_a_volume_kept_for_another_sandbox_goes_with_the_last_one_mounting_it(vols):
    """deleteOnSandboxTermination of a volume this pod created still holds when another
    sandbox mounted it meanwhile: it goes when the last of them is deleted."""
    c = vols.claim()
    a = vols.sandbox(pvc("shared", c, "/s", deleteOnSandboxTermination=True))
    b = vols.sandbox(pvc("shared", c, "/s"))
    sh(vols.osc, b, "echo from-b > /s/f")
    vols.kill(a)
    assert sh(vols.osc, b, "cat /s/f") == ["from-b"]
    vols.kill(b)
    assert wait_gone(vols.vroot / c), "the volume outlived every sandbox mounting it"


def test_a_named_volume_name_of_253_characters_is_accepted(vols):
    c = "c" + "-".join(["abcdefgh"] * 28)[:251] + "z"
    assert len(c) == 253
    vols.track(vols.vroot / c)
    sid = vols.sandbox(pvc("long", c, "/l"))
    sh(vols.osc, sid, "touch /l/x")
    assert os.path.exists(vols.vroot / c / "x")


@pytest.mark.parametrize("fields", [
    {"storage": "1Gi"}, {"storage": "1.5Gi"}, {"storage": "100"}, {"storage": None},
    {"storageClass": "fast"}, {"storageClass": None}, {"accessModes": ["ReadWriteOnce"]},
    {"accessModes": None}, {"createIfNotExists": True, "deleteOnSandboxTermination": False},
])
def test_the_provisioning_hints_of_the_yaml_are_accepted(vols, fields):
    c = vols.claim()
    sid = vols.sandbox(pvc("hinted", c, "/h", **fields))
    sh(vols.osc, sid, "touch /h/x")


def test_storage_on_a_volume_root_without_project_quota_is_ignored_and_said(vols):
    """This machine's volume root has no project quota (tests/vm holds one that has): the
    start log says pvc.storage is not enforced there, and a create asking for it succeeds and
    says it was ignored, naming the volume."""
    start = [ln for ln in vols.d.stderr_text().splitlines() if '"volume-storage"' in ln]
    assert start and "not enforced" in start[0], vols.d.stderr_text()[-2000:]
    c = vols.claim()
    sid = vols.sandbox(pvc("sized", c, "/z", storage="2Mi"))
    sh(vols.osc, sid, "head -c 3145728 /dev/zero > /z/big")  # past 2Mi: not held here
    assert os.path.getsize(vols.vroot / c / "big") == 3145728
    assert shlib.wait_until(lambda: "volume 'sized': pvc.storage '2Mi' is not enforced"
                            in vols.d.stderr_text(), 5), vols.d.stderr_text()[-2000:]


def test_ossfs_is_400_not_supported(vols):
    vols.refused([{"name": "oss", "ossfs": dict(OSSFS), "mountPath": "/oss"}],
                 code="NOT_SUPPORTED")


# ---- mounts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mount", ["/data", "/mnt/host-data", "/opt/a/b/c", "/workspace/data",
                                   "/tmp/v/data", "/home/vol", "/srv"])
def test_a_mount_path_is_made_wherever_it_is_asked(vols, mount):
    """A mountPath below a directory of the image (OpenSandbox's own e2e cases use /mnt/…),
    below the workspace or /tmp, or new at the top."""
    d = vols.hostdir(marker="at " + mount)
    sid = vols.sandbox(host("data", d, mount))
    assert sh(vols.osc, sid, "cat %s/marker.txt" % mount) == ["at " + mount]


def test_a_mount_path_is_normalised(vols):
    d = vols.hostdir(marker="normalised")
    sid = vols.sandbox(host("data", d, "//data//./x/"))
    assert sh(vols.osc, sid, "cat /data/x/marker.txt") == ["normalised"]


def test_a_volume_mounted_below_another_is_on_top_of_it(vols):
    outer, inner = vols.hostdir(marker="outer"), vols.hostdir(marker="inner")
    # listed child first: the order of the list does not decide
    sid = vols.sandbox(host("inner", inner, "/data/in"), host("outer", outer, "/data"))
    assert sh(vols.osc, sid, "cat /data/marker.txt /data/in/marker.txt") == ["outerinner"]


def test_a_volume_mount_is_nosuid_and_nodev(vols):
    d = vols.hostdir()
    sid = vols.sandbox(host("data", d, "/data"), host("ro", d, "/ro", read_only=True))
    opts = volumelib.mount_options(vols.osc, sid, "/data")
    assert opts is not None and {"nosuid", "nodev", "rw"} <= opts, opts
    opts = volumelib.mount_options(vols.osc, sid, "/ro")
    assert opts is not None and {"nosuid", "nodev", "ro"} <= opts, opts


def test_as_many_volumes_as_the_limit_are_mounted(vols):
    d = vols.hostdir()
    for i in range(VOLUME_MAX):
        (d / str(i)).mkdir()
        (d / str(i) / "n").write_text("%d\n" % i)
    sid = vols.sandbox(*[host("v%d" % i, d, "/v/%d" % i, sub=str(i)) for i in range(VOLUME_MAX)])
    assert sh(vols.osc, sid, "for i in $(seq 0 %d); do cat /v/$i/n; done" % (VOLUME_MAX - 1)) \
        == [str(i) for i in range(VOLUME_MAX)]


def test_one_volume_above_the_limit_is_400(vols):
    d = vols.hostdir()
    vols.refused([host("v%d" % i, d, "/v/%d" % i) for i in range(VOLUME_MAX + 1)])


def test_a_sandbox_with_volumes_works_on_the_workspace_as_before(vols):
    d = vols.hostdir()
    sid = vols.sandbox(host("data", d, "/workspace/data"))
    sh(vols.osc, sid, "echo ws > /workspace/w && cp /workspace/w /workspace/data/w")
    assert (d / "w").read_text() == "ws\n"
    assert sh(vols.osc, sid, "cat /workspace/w") == ["ws"]


def test_a_create_with_volumes_never_takes_a_pooled_sandbox(start_daemon, tmp_path):
    """A pooled sandbox was started without volumes: a create with volumes starts its own
    (its volume is there) and leaves the pooled one in the pool."""
    from test_warm_pool import settled_workers
    vroot = tmp_path / "v"
    vroot.mkdir()
    d = start_daemon(env={VROOT: str(vroot), "SANDBOX_HOST_WARM_POOL": "1"})
    settled_workers(d, 1)
    v = Vols(d, vroot, tmp_path, tmp_path)
    try:
        sid = v.sandbox(pvc("p", "pooled-not", "/p"))
        sh(v.osc, sid, "echo mine > /p/f")
        assert (vroot / "pooled-not" / "f").read_text() == "mine\n"
        settled_workers(d, 2)
    finally:
        v.close()
    d.stop_ok()


def test_a_snapshot_holds_the_workspace_never_a_volume_mounted_in_it(vols):
    """Volumes are not part of snapshots (section 2): a restore has the workspace's files,
    none of a host or named volume mounted below /workspace."""
    from test_os_snapshots import from_snapshot, ready_snapshot
    d, c = vols.hostdir(), vols.claim()
    sid = vols.sandbox(host("h", d, "/workspace/hostvol"), pvc("p", c, "/workspace/named"))
    sh(vols.osc, sid, "echo ws > /workspace/w && echo hv > /workspace/hostvol/h"
                      " && echo nv > /workspace/named/n")
    s = ready_snapshot(vols.osc, sid)
    try:
        j = from_snapshot(vols.osc, s["id"])
        vols.sids.append(j["id"])
        assert sh(vols.osc, j["id"], "cat /workspace/w; test -e /workspace/hostvol/h && echo HV;"
                                     " test -e /workspace/named/n && echo NV; true") == ["ws"]
        assert (d / "h").read_text() == "hv\n" and (vols.vroot / c / "n").read_text() == "nv\n"
    finally:
        vols.osc.delete("/v1/snapshots/" + s["id"], check=False)


# ---- the file API under a mountPath ---------------------------------------------------------

def test_the_file_api_reads_lists_and_writes_under_a_host_volume(vols):
    d = vols.hostdir(marker="via-api")
    sid = vols.sandbox(host("data", d, "/data"))
    osc = vols.osc
    r = download(osc, sid, "/data/marker.txt")
    assert r.status == 200 and r.body == b"via-api", r
    put(osc, sid, "/data/up/loaded.txt", b"uploaded")
    assert (d / "up" / "loaded.txt").read_bytes() == b"uploaded"
    r = osc.execd(sid, "GET", "/directories/list?path=/data", timeout=CALL)
    assert sorted(e["path"] for e in expect(r, 200)) == ["/data/marker.txt", "/data/up"]
    expect(osc.execd(sid, "POST", "/directories", body={"/data/made/deep": {"mode": 755}},
                     timeout=CALL), 200)
    assert os.path.isdir(d / "made" / "deep")
    r = osc.execd(sid, "GET", "/files/info?path=" + oslib.q("/data/up/loaded.txt"),
                  timeout=CALL)
    assert expect(r, 200)["/data/up/loaded.txt"]["size"] == 8
    expect(osc.execd(sid, "POST", "/files/replace", body={"/data/up/loaded.txt": {
        "old": "up", "new": "down"}}, timeout=CALL), 200)
    assert (d / "up" / "loaded.txt").read_bytes() == b"downloaded"
    expect(osc.execd(sid, "DELETE", "/files?path=" + oslib.q("/data/up/loaded.txt"),
                     timeout=CALL), 200)
    assert not os.path.exists(d / "up" / "loaded.txt")


def test_the_file_api_writes_into_a_named_volume_the_daemon_created(vols):
    """A named volume's directory lets only the volume's sharers write: the file API acting
    for the sandbox counts that group as the sandbox's."""
    c = vols.claim()
    sid = vols.sandbox(pvc("named", c, "/named"))
    put(vols.osc, sid, "/named/api/f.txt", b"api-write")
    assert (vols.vroot / c / "api" / "f.txt").read_bytes() == b"api-write"
    assert sh(vols.osc, sid, "cat /named/api/f.txt") == ["api-write"]


def test_a_file_written_through_the_file_api_is_read_by_another_sandbox_sharing_it(vols):
    c = vols.claim()
    a = vols.sandbox(pvc("shared", c, "/shared"))
    b = vols.sandbox(pvc("shared", c, "/shared"))
    put(vols.osc, a, "/shared/api.txt", b"from-a-api")
    assert sh(vols.osc, b, "cat /shared/api.txt") == ["from-a-api"]
    r = download(vols.osc, b, "/shared/api.txt")
    assert r.status == 200 and r.body == b"from-a-api", r


def test_the_file_api_honours_a_read_only_volume(vols):
    d = vols.hostdir(marker="ro")
    sid = vols.sandbox(host("ro", d, "/ro", read_only=True))
    osc = vols.osc
    # the sandbox's own file: only the mount's being read-only stands in the way
    uid, gid = (int(x) for x in sh(osc, sid, "id -u; id -g"))
    os.chown(d / "marker.txt", uid, gid)
    before = shlib.snapshot_tree(d)
    r = download(osc, sid, "/ro/marker.txt")
    assert r.status == 200 and r.body == b"ro", r
    for r in (upload(osc, sid, [({"path": "/ro/new"}, b"x")]),
              upload(osc, sid, [({"path": "/ro/marker.txt"}, b"x")]),
              osc.execd(sid, "POST", "/directories", body={"/ro/dir": {"mode": 755}},
                        timeout=CALL),
              osc.execd(sid, "DELETE", "/files?path=" + oslib.q("/ro/marker.txt"), timeout=CALL),
              osc.execd(sid, "POST", "/files/replace", body={"/ro/marker.txt": {
                  "old": "ro", "new": "rw"}}, timeout=CALL),
              osc.execd(sid, "POST", "/files/mv", body=[{"src": "/ro/marker.txt",
                                                         "dest": "/ro/moved"}], timeout=CALL),
              osc.execd(sid, "POST", "/files/permissions", body={"/ro/marker.txt": {"mode": 600}},
                        timeout=CALL)):
        b = expect(r, 400)
        assert "read-only" in b["message"], b
    assert shlib.snapshot_tree(d) == before


# ---- the YAML's rules for each field ----------------------------------------------------------

def _v(**over):
    v = {"name": "data", "pvc": {"claimName": "valid-claim"}, "mountPath": "/data"}
    for k, val in over.items():
        if val is oslib.DROP:
            v.pop(k, None)
        else:
            v[k] = val
    return v


@pytest.mark.parametrize("vol", [
    _v(name="Data"), _v(name="-data"), _v(name="data-"), _v(name="da_ta"), _v(name="da.ta"),
    _v(name=""), _v(name="a" * 64), _v(name=5), _v(name=None), _v(name=oslib.DROP),
    _v(name="dätä"),
], ids=lambda v: repr(v.get("name", "<absent>")))
def test_a_name_that_is_not_a_dns_label_is_400(vols, vol):
    vols.refused([vol])


def test_a_name_of_63_characters_is_accepted(vols):
    c = vols.claim()
    sid = vols.sandbox(pvc("a" * 62 + "z", c, "/data"))
    sh(vols.osc, sid, "test -d /data")


def test_two_volumes_of_one_name_are_400(vols):
    vols.refused([pvc("same", vols.claim(), "/a"), pvc("same", vols.claim(), "/b")])


def test_two_volumes_at_one_mount_path_are_400(vols):
    # INTERPRETATION: the second would hide the first; the design refuses it
    vols.refused([pvc("a", vols.claim(), "/same"), pvc("b", vols.claim(), "/same/")])


@pytest.mark.parametrize("vol", [
    {"name": "none", "mountPath": "/data"},
    {"name": "two", "mountPath": "/data", "host": {"path": "/x"}, "pvc": {"claimName": "c"}},
    {"name": "nul", "mountPath": "/data", "pvc": None},
], ids=["no-backend", "host-and-pvc", "null-backend"])
def test_not_exactly_one_backend_is_400_invalid_request(vols, vol):
    vols.refused([vol])


@pytest.mark.parametrize("mount", ["data", "mnt/data", "", " /data", 5, None, oslib.DROP])
def test_a_mount_path_that_is_not_absolute_is_400(vols, mount):
    vols.refused([_v(mountPath=mount)])


@pytest.mark.parametrize("field,value", [
    ("readOnly", "true"), ("readOnly", 1), ("subPath", 5), ("subPath", ["a"]),
])
def test_a_common_field_of_the_wrong_type_is_400(vols, field, value):
    vols.refused([_v(**{field: value})])


@pytest.mark.parametrize("hostobj", [{}, {"path": ""}, {"path": "relative/dir"}, {"path": 5},
                                     {"path": None}, "/x", ["/x"]],
                         ids=["no-path", "empty", "relative", "number", "null", "string",
                              "list"])
def test_a_host_backend_without_an_absolute_path_is_400(vols, hostobj):
    vols.refused([{"name": "h", "host": hostobj, "mountPath": "/data"}])


def test_a_windows_host_path_is_400(vols):
    # the YAML's pattern allows a drive letter; no such path is under a prefix here
    vols.refused([host("win", "C:\\data", "/data")], code=("INVALID_REQUEST", "NOT_SUPPORTED"))


@pytest.mark.parametrize("claim", ["Claim", "cl_aim", "cl.aim", "-claim", "claim-", "",
                                   "c" * 254, "a/b", "cl aim", 5, None],
                         ids=lambda c: repr(c)[:20])
def test_a_claim_name_that_is_not_a_dns_label_is_400(vols, claim):
    before = set(os.listdir(vols.vroot))
    vols.refused([{"name": "p", "pvc": {"claimName": claim}, "mountPath": "/data"}])
    vols.refused([{"name": "p", "pvc": {}, "mountPath": "/data"}])
    assert set(os.listdir(vols.vroot)) == before


@pytest.mark.parametrize("field,value", [
    ("createIfNotExists", "yes"), ("createIfNotExists", 1),
    ("deleteOnSandboxTermination", "true"), ("storage", "lots"), ("storage", "1GB"),
    ("storage", "-1Gi"), ("storage", "1.Gi"), ("storage", 5), ("storageClass", 5),
    ("accessModes", "ReadWriteOnce"), ("accessModes", [5]),
])
def test_a_pvc_field_of_the_wrong_type_or_pattern_is_400(vols, field, value):
    c = vols.claim()
    vols.refused([pvc("p", c, "/data", **{field: value})])
    assert not os.path.lexists(vols.vroot / c)


@pytest.mark.parametrize("volumes", [{}, "x", 5, [5], ["vol"], [None]],
                         ids=["object", "string", "number", "number-item", "string-item",
                              "null-item"])
def test_volumes_not_an_array_of_objects_is_400(vols, volumes):
    n = vols.count()
    r = vols.osc.create(dict(oslib.SDK_DEFAULT_CREATE, volumes=volumes), timeout=CALL)
    if r.status == 202:
        vols.sids.append(r.json()["id"])
    oslib.expect_400(r)
    assert vols.count() == n


@pytest.mark.parametrize("volumes", [[], None])
def test_no_volumes_is_a_plain_sandbox(vols, volumes):
    j = vols.osc.create_ok(volumes=volumes)
    vols.sids.append(j["id"])


def test_a_refused_create_removes_the_delete_on_termination_volume_it_made(vols):
    """INTERPRETATION: the second volume is refused only when its source is looked at (it
    does not exist), maybe after the first, a named volume with deleteOnSandboxTermination,
    was made for it; the refused sandbox goes as a deleted one does, and its volume with it."""
    c = vols.claim()
    vols.refused([pvc("first", c, "/first", deleteOnSandboxTermination=True),
                  host("second", vols.allowed / oslib.uniq("none"), "/second")],
                 names=["second"])
    assert wait_gone(vols.vroot / c)


# ---- the settings -----------------------------------------------------------------------------

def test_the_default_volume_root_is_below_the_state_root(start_daemon):
    d = start_daemon()
    osc = oslib.os_client(d)
    assert os.path.isdir(d.root / "volumes"), "made at start"
    c = oslib.uniq("c")
    j = osc.create_ok(volumes=[pvc("p", c, "/p")])
    try:
        sh(osc, j["id"], "echo in-default > /p/f")
        assert (d.root / "volumes" / c / "f").read_text() == "in-default\n"
    finally:
        osc.kill(j["id"])
    d.stop_ok()


def test_the_volume_limit_setting_bounds_the_volumes_of_a_sandbox(start_daemon, tmp_path):
    d = start_daemon(env={VROOT: str(tmp_path), "SANDBOX_HOST_VOLUME_MAX": "2"})
    v = Vols(d, tmp_path, tmp_path, tmp_path)
    try:
        v.refused([pvc("a", "a", "/a"), pvc("b", "b", "/b"), pvc("c", "c", "/c")])
        v.sandbox(pvc("a", "a", "/a"), pvc("b", "b", "/b"))
    finally:
        v.close()
    d.stop_ok()


def test_volume_limit_zero_refuses_every_volume(start_daemon, tmp_path):
    d = start_daemon(env={VROOT: str(tmp_path), "SANDBOX_HOST_VOLUME_MAX": "0"})
    v = Vols(d, tmp_path, tmp_path, tmp_path)
    try:
        v.refused([pvc("a", "a", "/a")])
        v.sandbox()
    finally:
        v.close()
    d.stop_ok()


def _config_error(rc, err, names, code=2):
    if code is None:
        assert rc not in (0, None), "expected a failed start, got %r; stderr=%r" % (rc, err)
    else:
        assert rc == code, "expected exit %d, got %r; stderr=%r" % (code, rc, err)
    assert any(any(n.lower() in ln.lower() for n in names) for ln in err.splitlines()), \
        "no stderr line names %r: %r" % (names, err)


@pytest.mark.parametrize("bad", ["65", "-1", "abc", "1.5"])
def test_an_invalid_volume_limit_exits_2_naming_it(bad):
    rc, out, err = run_to_exit(env={"SANDBOX_HOST_VOLUME_MAX": bad})
    _config_error(rc, err, ["SANDBOX_HOST_VOLUME_MAX", "--volume-max"])


def test_an_allowed_prefix_that_does_not_exist_stops_the_start_naming_it(tmp_path):
    missing = tmp_path / "not-there"
    rc, out, err = run_to_exit(env={ALLOW: "%s:%s" % (tmp_path, missing)})
    # "refuses to start with the reason": a value the host does not hold, not a malformed one
    # (section 10's exit 2), so any failed start
    _config_error(rc, err, [ALLOW, "--volume-host-allow"], code=None)
    assert str(missing) in err, err
    assert any(w in err.lower() for w in ("no such file", "not exist", "missing", "not found")), \
        "the reason is not said: %r" % err


def test_a_relative_allowed_prefix_stops_the_start(tmp_path):
    rc, out, err = run_to_exit(env={ALLOW: "relative/dir"})
    _config_error(rc, err, [ALLOW, "--volume-host-allow"])


@pytest.mark.parametrize("name,value", [("VOLUME_ROOT", "__tmp__"),
                                        ("VOLUME_HOST_ALLOW", "__tmp__"),
                                        ("VOLUME_MAX", "8")])
def test_each_volume_setting_has_its_flag(start_daemon, tmp_path, name, value):
    val = str(tmp_path) if value == "__tmp__" else value
    start_daemon(args=[shlib.setting_flag(name) + "=" + val]).stop_ok()
    start_daemon(args=[shlib.setting_flag(name), val]).stop_ok()


def test_help_names_the_volume_settings():
    rc, out, err = run_to_exit(args=["--help"])
    assert rc == 0
    for name in ("VOLUME_ROOT", "VOLUME_HOST_ALLOW", "VOLUME_MAX"):
        assert "SANDBOX_HOST_" + name in out + err and shlib.setting_flag(name) in out + err
