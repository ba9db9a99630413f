"""Disk limits (issue 10, item 6): SANDBOX_HOST_DISK_MAX and SANDBOX_HOST_DISK_INODES_MAX are
held by the kernel, so no way of taking space that a walk does not see (preallocation, an
unlinked file kept open, symlink targets, empty files) gets past them, the host's volume is
never taken beyond them, and a full sandbox leaves its neighbours writing. Here with a
filesystem per sandbox (a loop-mounted ext4 image, a tmpfs); project quota needs a kernel with
quota support and runs in the VM tier (tests/vm). Also: the workspace's mount never shows the
sandbox's id (item 14), and a limit the host cannot hold stops the start.

Each daemon's state root is a tmpfs of the test's own (disklib.Volume), so what the sandboxes
take from it is measured exactly; every mount and loop device below it is detached at the end
even when a test fails. The settings are given as variables, which a daemon that does not know
them ignores: against such a daemon every attack here succeeds, and its test fails."""
import json
import os

import pytest

import disklib
import execlib
from shlib import ID_LEN, Daemon, assert_error, is_root, run_to_exit, wait_until

pytestmark = pytest.mark.skipif(not is_root(), reason="mounts and sandboxes need root")

MIB = 1 << 20
LIMIT = 16 * MIB
INODES = 8192  # above LIMIT / 4 KiB: symlinks hit the space limit, empty files this one
SLACK = 2 * MIB  # filesystem metadata of an image, rounding
MODES = ["loop", "tmpfs"]
UID_BASE = {"loop": 381000, "tmpfs": 382000, "none": 383000}


def limited_env(mode, extra=None):
    env = {"SANDBOX_HOST_DISK_MAX": "16M", "SANDBOX_HOST_DISK_INODES_MAX": str(INODES),
           "SANDBOX_HOST_DISK_QUOTA": mode, "SANDBOX_HOST_UID_BASE": str(UID_BASE[mode])}
    env.update(extra or {})
    return env


@pytest.fixture(scope="module", params=MODES)
def vd(request):
    """(volume, daemon) for one mechanism: a daemon whose state root is a fresh tmpfs."""
    vol = disklib.Volume("256M")
    d, rc = None, 0
    try:
        d = Daemon(env=limited_env(request.param), root=vol.root)
        d.mode = request.param
        yield vol, d
    finally:
        if d is not None:
            rc = d.close()
        vol.close()
    assert rc == 0, "daemon exited %r; stderr tail:\n%s" % (rc, d.stderr_text()[-3000:])


@pytest.fixture
def box(vd):
    vol, d = vd
    s = d.client.new_sandbox()
    s.ws = d.ws(s.rid)
    yield s
    s.delete()


def attack(sb, script):
    """Run a python3 attack inside the sandbox (its cwd is /workspace); its last stdout line
    is a JSON report."""
    out = execlib.py(sb, "import errno, json, os\n" + script, timeout=120)
    return json.loads(out.strip().splitlines()[-1])


FULL = (28, 122)  # ENOSPC, EDQUOT

FILL = """
fd = os.open("fill", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
buf, n, err = b"x" * 1048576, 0, None
try:
    for _ in range(%d):
        n += os.write(fd, buf)
except OSError as e:
    err = e.errno
print(json.dumps({"written": n, "errno": err, "allocated": os.fstat(fd).st_blocks * 512}))
"""


def test_a_regular_file_stops_at_the_limit(box):
    r = attack(box, FILL % 64)
    assert r["errno"] in FULL, r
    assert r["written"] <= LIMIT and r["allocated"] <= LIMIT, r


FALLOC = """
fd = os.open("pre", os.O_WRONLY | os.O_CREAT, 0o644)
err = None
try:
    os.posix_fallocate(fd, 0, %d << 20)
except OSError as e:
    err = e.errno
print(json.dumps({"errno": err, "allocated": os.fstat(fd).st_blocks * 512}))
"""


def test_fallocate_beyond_the_limit_is_refused(box):
    r = attack(box, FALLOC % 64)
    assert r["errno"] in FULL, r
    assert r["allocated"] <= LIMIT, r


def test_an_unlinked_file_kept_open_cannot_grow_past_the_limit(box):
    r = attack(box, """
fd = os.open("ghost", os.O_RDWR | os.O_CREAT, 0o644)
os.unlink("ghost")
buf, n, err = b"x" * 1048576, 0, None
try:
    for _ in range(64):
        n += os.write(fd, buf)
except OSError as e:
    err = e.errno
print(json.dumps({"written": n, "errno": err}))
""")
    assert r["errno"] in FULL, r
    assert r["written"] <= LIMIT, r
    # and the space came back when the file's last user went
    box.put_ok("after", b"x" * MIB)


def test_long_symlinks_are_charged_to_the_limit(box):
    r = attack(box, """
target, n, err = "t" * 4000, 0, None
try:
    for i in range(%d):
        os.symlink(target, "l%%d" %% i)
        n += 1
except OSError as e:
    err = e.errno
print(json.dumps({"links": n, "errno": err}))
""" % (2 * LIMIT // 4096))
    assert r["errno"] in FULL, r
    assert r["links"] * 4096 <= LIMIT, r


def test_many_empty_files_stop_at_the_inode_limit(box):
    r = attack(box, """
n, err = 0, None
try:
    for i in range(%d):
        os.close(os.open("e%%d" %% i, os.O_WRONLY | os.O_CREAT, 0o644))
        n += 1
except OSError as e:
    err = e.errno
print(json.dumps({"files": n, "errno": err}))
""" % (2 * INODES))
    assert r["errno"] in FULL, r
    # ext4 rounds its inode count up to whole inode table blocks (16 inodes of 256 bytes)
    assert r["files"] <= INODES + 16, r


def test_an_upload_past_the_limit_is_413_and_leaves_the_old_file(box):
    box.put_ok("keep", b"old")
    r = attack(box, FILL % 12)
    assert r["errno"] is None and r["written"] == 12 * MIB, r
    # INTERPRETATION (contract silent): a full workspace is the client's body not fitting,
    # 413 PayloadTooLarge like a body above the upload limit, not 500 Internal.
    body = assert_error(box.put("keep", b"y" * (8 * MIB)), 413, "PayloadTooLarge")
    assert "full" in body["detail"], body
    assert box.get_v("keep") == b"old"
    assert_error(box.put("new", b"y" * (8 * MIB)), 413, "PayloadTooLarge")
    assert not box.exists_v("new")
    # room again once the sandbox deletes its own file
    assert box.delete_file("fill").status == 204
    box.put_ok("new", b"y" * (8 * MIB))


def test_the_hosts_volume_is_not_taken_beyond_the_limit(vd, box):
    vol, d = vd
    before = vol.used()
    # Everything at once, held while the host measures: a file, preallocation, an unlinked
    # file kept open, symlink targets, empty files.
    st = execlib.start(box, ["python3", "-c", r"""
import os, sys, time
def fill(fd, n):
    try:
        for _ in range(n):
            os.write(fd, b"x" * 1048576)
    except OSError:
        pass
fill(os.open("a", os.O_WRONLY | os.O_CREAT, 0o644), 64)
try:
    os.posix_fallocate(os.open("b", os.O_WRONLY | os.O_CREAT, 0o644), 0, 64 << 20)
except OSError:
    pass
g = os.open("c", os.O_RDWR | os.O_CREAT, 0o644)
os.unlink("c")
fill(g, 64)
try:
    for i in range(8192):
        os.symlink("t" * 4000, "l%d" % i)
except OSError:
    pass
try:
    for i in range(16384):
        os.close(os.open("e%d" % i, os.O_WRONLY | os.O_CREAT, 0o644))
except OSError:
    pass
print("READY", flush=True)
time.sleep(60)
"""])
    try:
        st.wait_output(b"READY", timeout=120)
        taken = vol.used() - before
    finally:
        st.close()
    assert taken <= LIMIT + SLACK, "the sandbox took %d bytes of the host's volume" % taken


def test_a_neighbour_keeps_writing_when_one_sandbox_is_full(vd, box):
    vol, d = vd
    other = d.client.new_sandbox()
    try:
        # more than the whole volume: without a limit this fills the host's disk
        r = attack(box, FILL % 300)
        assert r["errno"] in FULL and r["written"] <= LIMIT, r
        r2 = attack(other, FILL % 8)
        assert r2["errno"] is None and r2["written"] == 8 * MIB, r2
        other.put_ok("up", b"z" * MIB)
    finally:
        other.delete()


def test_delete_dir_frees_the_space_in_the_sandbox_filesystem(box):
    box.mkdir("tree/sub")
    for i in range(4):
        box.put_ok("tree/sub/f%d" % i, b"x" * (3 * MIB))
    assert box.rmdir("tree").status == 204
    assert not box.exists_v("tree")

    def free():
        return attack(box, 'print(json.dumps({"free": os.statvfs(".").f_bavail * '
                           'os.statvfs(".").f_frsize}))')["free"]
    assert wait_until(lambda: free() > LIMIT - 4 * MIB, 10), free()


def test_delete_detaches_the_filesystem_and_frees_the_volume(vd):
    vol, d = vd
    base = vol.used()
    s = d.client.new_sandbox()
    own = d.root / os.readlink(d.root / s.rid)  # {root}/{id} -> .sandboxes/N
    mounts = disklib.mounts_below(own)
    assert len(mounts) == 2, disklib.mountinfo()  # its filesystem and the workspace's bind
    attack(s, FILL % 10)
    assert s.delete().status == 204
    assert wait_until(lambda: not disklib.mounts_below(d.root), 10), disklib.mounts_below(d.root)
    assert wait_until(lambda: not disklib.loops_backed_below(vol.path), 10)
    assert wait_until(lambda: vol.used() <= base + SLACK, 10), (vol.used(), base)


@pytest.mark.parametrize("mode", ["none"] + MODES)
def test_mountinfo_inside_never_shows_the_remote_id(mode):
    """Item 14: the workspace's mount (its root field, its source) carried the sandbox's id,
    the API's only credential, to every process inside."""
    vol = disklib.Volume("64M")
    d = None
    try:
        env = limited_env(mode) if mode != "none" else {"SANDBOX_HOST_UID_BASE": "383000"}
        d = Daemon(env=env, root=vol.root)
        s = d.client.new_sandbox()
        text = execlib.sh(s, "cat /proc/self/mountinfo; echo ==; cat /proc/1/mountinfo")
        assert s.rid not in text, text
        ws = [ln for ln in text.splitlines() if " /workspace " in ln]
        assert ws, text
        if mode != "none":
            # a filesystem of its own: root "/workspace" of a loop device or a tmpfs
            fields = ws[0].split(" - ")[1].split()
            assert fields[0] == ("ext4" if mode == "loop" else "tmpfs"), ws
            assert ws[0].split()[3] == "/workspace", ws
        # the contract's host path still leads to the sandbox's files
        s.put_ok("probe", b"here")
        assert (d.ws(s.rid) / "probe").read_bytes() == b"here"
    finally:
        if d is not None:
            d.stop_ok()
        vol.close()


def test_no_limit_is_reported_as_such(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_UID_BASE": "383500", "SANDBOX_HOST_DISK_MAX": "0"})
    caps = d.client.get("/healthz").json()["capabilities"]
    assert "disk-quota.none" in caps, caps
    assert not [c for c in caps if c.startswith("disk-quota.") and c != "disk-quota.none"]
    assert wait_until(lambda: '"disk-limit"' in d.stderr_text(), 5)
    line = [ln for ln in d.stderr_text().splitlines() if '"disk-limit"' in ln][0]
    assert "none" in json.loads(line)["msg"], line


def test_the_mechanism_in_use_is_reported(vd):
    vol, d = vd
    caps = d.client.get("/healthz").json()["capabilities"]
    assert "disk-quota." + d.mode in caps and "disk-quota.none" not in caps, caps


def disk_limit_line(d):
    assert wait_until(lambda: '"disk-limit"' in d.stderr_text(), 5), d.stderr_text()[-2000:]
    return json.loads([ln for ln in d.stderr_text().splitlines() if '"disk-limit"' in ln][0])


# ---- the embedded default (issue 20, finding 14): a limit wherever the host can hold one ----

def test_the_default_holds_a_limit_of_a_quarter_of_a_small_state_volume():
    """No SANDBOX_HOST_DISK_* at all: on a 256 MiB state volume (a tmpfs: no project quota, so
    a loop-mounted image here) each workspace gets 64 MiB, a quarter of it, and a sandbox that
    writes without end, preallocates or keeps an unlinked file open stops there; the volume
    keeps the rest for its neighbours."""
    vol = disklib.Volume("256M")
    d, rc = None, 0
    try:
        d = Daemon(env={"SANDBOX_HOST_DISK_MAX": None, "SANDBOX_HOST_UID_BASE": "383600"},
                   root=vol.root)
        caps = d.client.get("/healthz").json()["capabilities"]
        assert "disk-quota.loop" in caps and "disk-quota.none" not in caps, caps
        line = disk_limit_line(d)
        assert line["level"] == "info" and "loop: 67108864 bytes" in line["msg"] and \
            "auto" in line["msg"], line
        s = d.client.new_sandbox()
        before = vol.used()
        r = attack(s, FILL % 512)
        assert r["errno"] in FULL and r["written"] <= 64 * MIB, r
        r = attack(s, "os.remove('fill')\n" + FALLOC % 200)
        assert r["errno"] in FULL and r["allocated"] <= 64 * MIB, r
        assert vol.used() - before <= 64 * MIB + SLACK, (vol.used(), before)
        s.delete()
    finally:
        if d is not None:
            rc = d.close()
        vol.close()
    assert rc == 0, "daemon exited %r; stderr tail:\n%s" % (rc, d.stderr_text()[-3000:])


# In a mount namespace of its own, /dev/loop-control is /dev/null: no loop device can be had.
NO_LOOP = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
           "mount --bind /dev/null /dev/loop-control && exec \"$@\"", "sh"]


def test_the_default_runs_without_a_limit_where_none_can_be_held_and_says_why(start_daemon):
    """Neither project quota (a tmpfs state root) nor loop devices: the default runs without a
    limit, says so in /healthz, and logs one warning naming each mechanism's reason."""
    vol = disklib.Volume("64M")
    try:
        d = start_daemon(env={"SANDBOX_HOST_DISK_MAX": None, "SANDBOX_HOST_UID_BASE": "383700"},
                         root=vol.root, prefix=NO_LOOP)
        caps = d.client.get("/healthz").json()["capabilities"]
        assert "disk-quota.none" in caps, caps
        line = disk_limit_line(d)
        assert line["level"] == "warn", line
        for what in ("SANDBOX_HOST_DISK_MAX=auto", "project quota:", "loop devices:",
                     "no disk limit"):
            assert what in line["msg"], line
        s = d.client.new_sandbox()
        execlib.ok(s, ["true"])
        s.delete()
        d.stop_ok()
    finally:
        vol.close()


def test_an_explicit_limit_that_cannot_be_held_still_stops_the_start():
    """Only the default gives way: a size asked for where no loop device can be had (and no
    project quota) stops the start, as before."""
    vol = disklib.Volume("64M")
    try:
        d = Daemon(env={"SANDBOX_HOST_DISK_MAX": "16M"}, root=vol.root, wait_listen=False,
                   prefix=NO_LOOP)
        rc = d.wait_exit()
        err = d.stderr_text()
        assert rc == 2, (rc, err)
        assert "SANDBOX_HOST_DISK_MAX" in err and "loop devices" in err, err
    finally:
        d.close()
        vol.close()


def test_a_limit_the_host_cannot_hold_stops_the_start():
    vol = disklib.Volume("16M")
    try:
        # a tmpfs has no project quota: asked for, the daemon must refuse, not run unlimited
        rc, out, err = run_to_exit(env={"SANDBOX_HOST_DISK_MAX": "16M",
                                        "SANDBOX_HOST_DISK_QUOTA": "project"}, root=vol.root)
        assert rc == 2, (rc, err)
        msg = [ln for ln in err.splitlines() if ln.startswith("sandbox-host: ")]
        assert len(msg) == 1 and "SANDBOX_HOST_DISK_QUOTA" in msg[0], err
    finally:
        vol.close()


@pytest.mark.parametrize("env, name", [
    ({"SANDBOX_HOST_DISK_MAX": "16M", "SANDBOX_HOST_DISK_QUOTA": "none"},
     "SANDBOX_HOST_DISK_QUOTA"),
    ({"SANDBOX_HOST_DISK_INODES_MAX": "100"}, "SANDBOX_HOST_DISK_INODES_MAX"),
    ({"SANDBOX_HOST_DISK_QUOTA": "loop"}, "SANDBOX_HOST_DISK_QUOTA"),
    ({"SANDBOX_HOST_DISK_MAX": "100K"}, "SANDBOX_HOST_DISK_MAX"),
    ({"SANDBOX_HOST_DISK_QUOTA": "xfs"}, "SANDBOX_HOST_DISK_QUOTA"),
])
def test_inconsistent_disk_settings_exit_2(env, name):
    rc, out, err = run_to_exit(env=env)
    assert rc == 2, (rc, err)
    assert name in err and len(err.strip().splitlines()) == 1, err


def test_sigterm_leaves_no_mount_loop_device_or_image():
    vol = disklib.Volume("128M")
    try:
        d = Daemon(env=limited_env("loop"), root=vol.root)
        try:
            for _ in range(3):
                s = d.client.new_sandbox()
                attack(s, FILL % 4)
            assert disklib.loops_backed_below(vol.path)
        finally:
            d.stop_ok()
        assert not disklib.mounts_below(vol.path), disklib.mounts_below(vol.path)
        assert wait_until(lambda: not disklib.loops_backed_below(vol.path), 10)
        assert os.listdir(os.path.join(vol.root, ".disk")) == []
        assert vol.used() < 2 * MIB, vol.used()
    finally:
        vol.close()


def test_a_create_whose_limit_cannot_be_set_up_fails_and_leaves_nothing():
    """The loop image is sparse: on a host volume with no room left, copying the template
    fails. The create answers 500 with the failed step, and leaves no mount, loop device,
    image or directory; with room again, creates work."""
    vol = disklib.Volume("32M")
    d = None
    try:
        d = Daemon(env=limited_env("loop", {"SANDBOX_HOST_DISK_MAX": "64M"}), root=vol.root)
        filler = os.path.join(vol.path, "filler")
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * MIB)
                    f.flush()
            except OSError:
                pass
        r = d.client.create({})
        body = assert_error(r, 500, "Internal")
        assert "disk limit" in body["detail"], body
        assert wait_until(lambda: not disklib.mounts_below(vol.path), 10)
        assert wait_until(lambda: not disklib.loops_backed_below(vol.path), 10)
        assert wait_until(lambda: os.listdir(os.path.join(vol.root, ".sandboxes")) == [], 10)
        assert [n for n in os.listdir(vol.root) if len(n) == ID_LEN] == []
        os.unlink(filler)
        s = d.client.new_sandbox()
        s.put_ok("x", b"fine")
        s.delete()
    finally:
        if d is not None:
            d.stop_ok()
        vol.close()


def test_a_download_in_flight_outlives_the_delete_and_then_the_filesystem_goes(vd):
    """The daemon still holds the file of a download when the sandbox is deleted: its
    filesystem is unmounted only once that fd is closed (by a child, which then pays for the
    unmount), and the download completes meanwhile."""
    import http.client
    vol, d = vd
    s = d.client.new_sandbox()
    data = os.urandom(4 * MIB)
    s.put_ok("blob", data)
    own = d.root / os.readlink(d.root / s.rid)
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    try:
        conn.request("GET", "/sandboxes/%s/file?path=blob" % s.rid)
        resp = conn.getresponse()
        assert resp.status == 200
        head = resp.read(4096)
        assert s.delete().status == 204
        assert d.client.get("/healthz", timeout=5).status == 200
        rest = resp.read()
        assert head + rest == data
    finally:
        conn.close()
    trash = os.path.join(vol.root, ".trash")
    assert wait_until(lambda: not [m for m in disklib.mounts_below(trash)] and
                      not disklib.mounts_below(own), 15), disklib.mounts_below(vol.path)
