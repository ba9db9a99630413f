"""Issue 25's attacks on `volumes`, each a kept test (OPENSANDBOX.md section 2 `volumes`: no
volume definition, however crafted, and no link, however it changes during the create, mounts
anything outside what the operator allowed): `host.path` with `..`, through a link in the
allowed prefix to a directory outside it or to `/etc`, swapped between a directory and a link
to outside in a tight loop while creates run; `subPath` with `..`, absolute, through a link
(also one a sandbox planted in a shared volume); `mountPath` over `/`, `/proc`, `/dev`, `/sys`,
below them, the workspace root, with `..`, through a link planted in another volume; a
`claimName` of `..`; a setuid-root binary and device nodes the host put in a volume (nosuid,
nodev); a read-only volume with a mount below its host directory; 1,000 volumes in one create;
a volume whose directory is a FIFO; a sandbox that does not mount a named volume looking for
it; links a sandbox leaves in a volume removed with deleteOnSandboxTermination.

Host side: `outside` directories made by the test beside the allowed prefix and the volume
root, with markers that must never be seen inside nor change. Every create either is refused
(400 with the code the law gives) or mounts what the operator allowed: a 202 that mounted the
wrong thing is what each test looks for."""
import os
import stat
import subprocess
import sys

import pytest

import oslib
import shlib
import volumelib
from test_os_files import download, upload
from volumelib import ALLOW, CALL, attempt, host, pvc, sh
from volumelib import vdirs, vold, vols  # noqa: F401

pytestmark = volumelib.needs_root


@pytest.fixture
def out(vols):
    """A directory outside every allowed prefix and the volume root, with a marker; it must
    be the same when the test ends."""
    o = vols.outside("OUTSIDE-" + os.urandom(6).hex())
    before = shlib.snapshot_tree(o)
    yield o
    assert shlib.snapshot_tree(o) == before, "a directory outside what the operator allowed " \
                                             "changed"


def never_sees(osc, sid, mount, o):
    """The mount at `mount` does not show the outside directory `o`'s marker."""
    secret = (o / "marker.txt").read_text()
    rc, lines = attempt(osc, sid, "cat %s/marker.txt; ls -a %s" % (mount, mount))
    assert not any(secret in ln for ln in lines), "the outside marker is seen: %r" % lines


def refused_or_inside(vols, vols_def, mount, o):
    """The create is refused (400 INVALID_REQUEST), or it mounted something that is not `o`."""
    r = vols.create(vols_def, timeout=CALL)
    if r.status == 202:
        sid = r.json()["id"]
        never_sees(vols.osc, sid, mount, o)
        vols.kill(sid)
        return "mounted"
    oslib.expect_400(r)
    return "refused"


# ---- host.path ----------------------------------------------------------------------------------

@pytest.mark.parametrize("tail", ["../{out}", "x/../../{out}", "..", "./../{out}",
                                  "{good}/../../{out}", "{good}/.."])
def test_a_host_path_with_dot_dot_is_400(vols, out, tail):
    good = vols.hostdir(marker="good")
    p = str(vols.allowed) + "/" + tail.format(out=os.path.relpath(out, vols.allowed.parent),
                                              good=good.name)
    vols.refused([host("data", p, "/data")])


def test_a_link_in_the_prefix_to_a_directory_outside_is_400(vols, out):
    links = []
    for target in (str(out), os.path.relpath(out, vols.allowed), str(out.parent)):
        ln = vols.track(vols.allowed / oslib.uniq("l"))
        os.symlink(target, ln)
        links.append(ln)
    for ln in links:
        vols.refused([host("data", ln, "/data")])
    # a link as a middle component
    vols.refused([host("data", str(links[0]) + "/sub", "/data")])
    vols.refused([host("data", str(links[2]) + "/" + out.name, "/data")])


def test_a_link_in_the_prefix_to_etc_is_400_and_shadow_never_shows(vols):
    ln = vols.track(vols.allowed / oslib.uniq("etc"))
    os.symlink("/etc", ln)
    for path, sub in ((ln, None), (str(ln) + "/ssl", None), (ln, "ssl")):
        r = vols.create([host("etc", path, "/data", sub=sub)], timeout=CALL)
        if r.status == 202:
            sid = r.json()["id"]
            rc, lines = attempt(vols.osc, sid, "ls /data; head -c 64 /data/shadow")
            d = download(vols.osc, sid, "/data/shadow")
            pytest.fail("a link to /etc was mounted (%s, %s): inside %r, the file API %r" % (
                path, sub, lines, d))
        oslib.expect_400(r)


def test_a_link_a_sandbox_planted_in_a_host_volume_is_not_a_way_out(vols, out):
    d = vols.hostdir()
    sid = vols.sandbox(host("data", d, "/data"))
    sh(vols.osc, sid, "ln -s / /data/root && ln -s %s /data/out && ln -s ../../.. /data/up"
       % out)
    for p in ("root", "out", "up", "root/etc", "up/" + out.name):
        assert refused_or_inside(vols, [host("data", str(d) + "/" + p, "/data")], "/data",
                                 out) == "refused", p


SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b, stop = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2]), sys.argv[3]
n = 0
while True:
    if libc.renameat2(-100, a, -100, b, 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
        sys.exit("renameat2: errno %d" % ctypes.get_errno())
    n += 1
    if n % 64 == 0 and os.path.exists(stop):
        break
print(n, flush=True)
"""


@pytest.mark.timeout(400)
def test_a_host_path_swapped_with_a_link_to_outside_during_creates_never_shows_outside(vols,
                                                                                        out):
    """A child process exchanges `swap` (a directory of the allowed prefix) with `other` (a
    link to the outside directory) as fast as it can while 30 creates mount `swap` (and
    `swap/sub`, a middle component that flips): each is refused or shows the inside marker,
    never the outside one."""
    race = vols.hostdir()
    inside = "INSIDE-" + os.urandom(6).hex()
    (race / "swap").mkdir()
    (race / "swap" / "sub").mkdir()
    for p in (race / "swap" / "marker.txt", race / "swap" / "sub" / "marker.txt"):
        p.write_text(inside)
    os.symlink(str(out), race / "other")
    stop = race.parent / (race.name + ".stop")
    vols.track(stop)
    child = subprocess.Popen([sys.executable, "-c", SWAPPER, str(race / "swap"),
                              str(race / "other"), str(stop)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    seen = {}
    try:
        for i in range(30):
            path = race / "swap" if i % 2 == 0 else race / "swap" / "sub"
            r = vols.create([host("race", path, "/data")], timeout=30)
            if r.status == 202:
                sid = r.json()["id"]
                never_sees(vols.osc, sid, "/data", out)
                assert sh(vols.osc, sid, "cat /data/marker.txt") == [inside]
                vols.kill(sid)
                what = "mounted"
            else:
                oslib.expect_400(r)
                what = "refused"
            key = "%s %s" % (path.name, what)
            seen[key] = seen.get(key, 0) + 1
            assert child.poll() is None, "the swapper stopped: %r" % (child.communicate(),)
    finally:
        stop.write_text("")
        try:
            outp, errp = child.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            outp, errp = child.communicate(timeout=10)
    print("swaps: %s, creates: %r" % (outp.decode().strip(), seen))
    assert child.returncode == 0, errp
    assert int(outp) > 30, "the swapper hardly ran: %r" % outp


# ---- subPath --------------------------------------------------------------------------------------

@pytest.mark.parametrize("sub", ["..", "../x", "a/../..", "a/..", "./..", "/etc", "/",
                                 "/abs/dir", "a//b/../../.."])
def test_a_sub_path_with_dot_dot_or_absolute_is_400(vols, sub):
    d = vols.hostdir()
    c = vols.claim()
    vols.refused([host("h", d, "/h", sub=sub)])
    vols.refused([pvc("p", c, "/p", sub=sub)])
    assert not os.path.lexists(vols.vroot / c)


def test_a_sub_path_through_a_link_to_outside_is_400(vols, out):
    d = vols.hostdir()
    os.symlink(str(out), d / "abs")
    os.symlink(os.path.relpath(out, d), d / "rel")
    os.symlink("/etc", d / "etc")
    (d / "real").mkdir()
    os.symlink(str(out), d / "real" / "deeper")
    for sub in ("abs", "rel", "etc", "real/deeper", "abs/.", "etc/ssl"):
        vols.refused([host("h", d, "/h", sub=sub)])


def test_a_link_a_sandbox_planted_in_a_shared_volume_is_no_sub_path_out(vols, out):
    c = vols.claim()
    a = vols.sandbox(pvc("shared", c, "/s"))
    sh(vols.osc, a, "ln -s / /s/root && ln -s /etc /s/etc && mkdir /s/d && ln -s %s /s/d/out"
       " && ln -s ../.. /s/d/up" % out)
    for sub in ("root", "etc", "d/out", "d/up", "root/etc", "d/up/" + out.name):
        assert refused_or_inside(vols, [pvc("shared", c, "/s", sub=sub)], "/s", out) == \
            "refused", sub


def test_a_sub_path_that_is_a_fifo_or_a_file_is_400(vols):
    d = vols.hostdir()
    os.mkfifo(d / "fifo")
    (d / "file").write_text("f")
    for sub in ("fifo", "file", "fifo/x", "file/x"):
        vols.refused([host("h", d, "/h", sub=sub)])


# ---- mountPath ----------------------------------------------------------------------------------

@pytest.mark.parametrize("mount", [
    "/", "//", "/.", "/proc", "/proc/", "//proc", "/proc/sys", "/proc/self/root", "/proc/1",
    "/proc/sys/kernel", "/sys", "/sys/fs/cgroup", "/dev", "/dev/shm", "/dev/pts", "/workspace",
    "/workspace/", "//workspace/.", "/mnt/../proc", "/mnt/..", "/data/../../etc", "/..",
    "/data/..", "/workspace/../proc/x", "/workspace/a/../../..",
])
def test_a_mount_path_over_a_kernel_filesystem_the_root_or_the_workspace_is_400(vols, mount):
    d = vols.hostdir(marker="over")
    vols.refused([host("h", d, mount)])


def test_a_mount_path_through_a_link_planted_in_another_volume_is_400(vols, out):
    c = vols.claim()
    a = vols.sandbox(pvc("shared", c, "/s"))
    sh(vols.osc, a, "ln -s / /s/root && ln -s %s /s/out && ln -s /proc /s/proc" % out)
    d = vols.hostdir(marker="inner")
    for sub in ("root/x", "out/x", "proc/sys", "root", "out"):
        r = vols.create([pvc("shared", c, "/s"), host("inner", d, "/s/" + sub)], timeout=CALL)
        if r.status == 202:
            sid = r.json()["id"]
            rc, lines = attempt(vols.osc, sid, "ls -la /s /s/%s; cat /proc/self/mountinfo"
                                % sub)
            pytest.fail("a mountPath through a planted link was mounted: %r" % lines)
        oslib.expect_400(r)
    assert not os.path.lexists(out / "x")
    assert not os.path.lexists("/x")


@pytest.mark.parametrize("mount", ["/etc/passwd", "/etc/passwd/x", "/dev/null"])
def test_a_mount_path_over_a_file_of_the_image_is_400(vols, mount):
    d = vols.hostdir(marker="over-a-file")
    vols.refused([host("h", d, mount)])


def test_the_file_api_never_follows_a_link_in_a_volume_to_a_host_path(vols, out):
    """Links a sandbox plants in its volume resolve as inside the sandbox (section 3.2), never
    to the host's directory they name."""
    d = vols.hostdir()
    sid = vols.sandbox(host("data", d, "/data"))
    sh(vols.osc, sid, "ln -s %s/marker.txt /data/esc && ln -s / /data/root && ln -s %s /data/dir"
       % (out, out))
    secret = (out / "marker.txt").read_bytes()
    for p in ("/data/esc", "/data/root%s/marker.txt" % out, "/data/dir/marker.txt"):
        r = download(vols.osc, sid, p)
        assert secret not in r.body, (p, r)
        assert r.status in (400, 404), (p, r)
    for p in ("/data/esc", "/data/dir/new.txt", "/data/root%s/new.txt" % out):
        upload(vols.osc, sid, [({"path": p}, b"planted")])
    assert not os.path.exists(out / "new.txt")


# ---- claimName ------------------------------------------------------------------------------------

@pytest.mark.parametrize("claim", ["..", ".", "../x", "x/..", "../../etc", "%2e%2e", "..\\x"])
def test_a_claim_name_of_dot_dot_is_400_and_nothing_is_made(vols, claim):
    listing = {p: sorted(os.listdir(p)) for p in (vols.vroot, vols.vroot.parent, vols.base)}
    vols.refused([pvc("p", claim, "/p")])
    vols.refused([pvc("p", claim, "/p", createIfNotExists=False)])
    assert {p: sorted(os.listdir(p)) for p in listing} == listing


def test_a_named_volume_that_is_a_link_out_of_the_volume_root_is_400(vols, out):
    c = vols.claim()
    os.symlink(str(out), vols.vroot / c)
    vols.refused([pvc("p", c, "/p")])
    vols.refused([pvc("p", c, "/p", createIfNotExists=False)])
    assert os.path.islink(vols.vroot / c)


def test_a_named_volume_that_is_a_fifo_or_a_file_is_400(vols):
    c, f = vols.claim(), vols.claim()
    os.mkfifo(vols.vroot / c)
    (vols.vroot / f).write_text("not a directory")
    vols.refused([pvc("fifo", c, "/p")], names=["fifo"])
    vols.refused([pvc("file", f, "/p")], names=["file"])
    assert stat.S_ISFIFO(os.lstat(vols.vroot / c).st_mode)


# ---- what the host put in a volume --------------------------------------------------------------

def test_a_setuid_root_binary_in_a_volume_runs_without_root(vols):
    d = vols.hostdir()
    with open("/usr/bin/id", "rb") as src, open(d / "id", "wb") as dst:
        dst.write(src.read())
    os.chown(d / "id", 0, 0)
    os.chmod(d / "id", 0o6755)
    assert os.stat(d / "id").st_mode & 0o6000 == 0o6000
    sid = vols.sandbox(host("data", d, "/data"))
    uid, gid = sh(vols.osc, sid, "id -u; id -g")
    assert sh(vols.osc, sid, "/data/id -u; /data/id -g") == [uid, gid]
    assert "euid=0" not in " ".join(sh(vols.osc, sid, "/data/id"))


def test_device_nodes_in_a_volume_cannot_be_opened(vols):
    d = vols.hostdir()
    null = os.stat("/dev/null").st_rdev
    os.mknod(d / "null", stat.S_IFCHR | 0o666, null)
    os.chmod(d / "null", 0o666)
    # the block device of the filesystem the test runs on: its bytes are the host's disk
    disk = os.stat(str(d)).st_dev
    os.mknod(d / "disk", stat.S_IFBLK | 0o666, disk)
    os.chmod(d / "disk", 0o666)
    sid = vols.sandbox(host("data", d, "/data"))
    assert sh(vols.osc, sid, "test -c /data/null && test -b /data/disk && echo there") == \
        ["there"]
    for cmd in ("echo x > /data/null", "cat /data/null", "head -c 512 /data/disk | wc -c",
                "dd if=/data/disk of=/dev/null bs=512 count=1"):
        rc, lines = attempt(vols.osc, sid, "set -o pipefail; " + cmd)
        assert rc != 0 and any("ermission denied" in ln for ln in lines), (cmd, rc, lines)


def test_a_read_only_volume_is_read_only_below_too(vols):
    """A filesystem mounted below the host directory (a tmpfs the test mounts) is either not
    carried into the sandbox or carried read-only: never writable through a readOnly volume."""
    d = vols.hostdir()
    (d / "sub").mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0777", "sh-vol-test",
                    str(d / "sub")], check=True, timeout=10)
    try:
        sid = vols.sandbox(host("ro", d, "/ro", read_only=True))
        rc, lines = attempt(vols.osc, sid, "touch /ro/sub/x")
        assert rc != 0, lines
        assert not os.path.exists(d / "sub" / "x")
        vols.kill(sid)
    finally:
        subprocess.run(["umount", str(d / "sub")], check=False, timeout=10)
        if os.path.ismount(d / "sub"):
            subprocess.run(["umount", "-l", str(d / "sub")], check=False, timeout=10)


# ---- sizes and shapes -----------------------------------------------------------------------------

@pytest.mark.timeout(60)
def test_a_thousand_volumes_in_one_create_are_400_at_once_and_the_daemon_stays_healthy(vols,
                                                                                          vold):
    before = sorted(os.listdir(vols.vroot))
    many = [pvc("v%d" % i, "c%d-%s" % (i, os.urandom(3).hex()), "/v/%d" % i)
            for i in range(1000)]
    vols.refused(many)
    assert sorted(os.listdir(vols.vroot)) == before, "volumes were made for a refused create"
    assert shlib.healthz_ok(vold.client)
    c = vols.claim()
    sid = vols.sandbox(pvc("after", c, "/after"))
    sh(vols.osc, sid, "touch /after/ok")


def test_a_host_volume_whose_directory_is_a_fifo_is_400_without_hanging(vols):
    f = vols.track(vols.allowed / oslib.uniq("fifo"))
    os.mkfifo(f)
    vols.refused([host("fifo", f, "/data")], names=["fifo"])
    assert shlib.healthz_ok(vols.d.client)


# ---- reach -----------------------------------------------------------------------------------------

@pytest.mark.timeout(240)
def test_a_sandbox_not_mounting_a_named_volume_cannot_reach_it(vols):
    c, other = vols.claim(), vols.claim()
    name = "unreachable-" + os.urandom(6).hex()
    owner = vols.sandbox(pvc("mine", c, "/mine"))
    sh(vols.osc, owner, "echo secret > /mine/%s" % name)
    hostpath = vols.vroot / c / name
    assert hostpath.exists()
    for sid in (vols.sandbox(), vols.sandbox(pvc("theirs", other, "/theirs"))):
        found = sh(vols.osc, sid, "find / \\( -path /proc -o -path /sys -o -path /dev \\) "
                                  "-prune -o -name %s -print 2>/dev/null; true" % name)
        assert found == [], "a sandbox without the volume found it: %r" % found
        assert sh(vols.osc, sid, "test -e %s && echo file; test -e %s && echo root; true"
                  % (hostpath, vols.vroot)) == []
        assert c not in "\n".join(sh(vols.osc, sid, "cat /proc/self/mountinfo"))
        r = download(vols.osc, sid, str(hostpath))
        assert r.status in (400, 404), r


def test_removing_a_volume_never_follows_a_link_the_sandbox_left_in_it(vols, out):
    c = vols.claim()
    sid = vols.sandbox(pvc("tmp", c, "/t", deleteOnSandboxTermination=True))
    passwd = open("/etc/passwd", "rb").read()
    sh(vols.osc, sid, "ln -s %s /t/out && ln -s / /t/root && ln -s /etc/passwd /t/passwd"
       " && mkdir -p /t/d/e && ln -s %s/marker.txt /t/d/e/m && ln -s ../../../.. /t/d/up"
       % (out, out))
    vols.kill(sid)
    assert shlib.wait_until(lambda: not os.path.lexists(vols.vroot / c), timeout=15), \
        "the volume was not removed"
    assert open("/etc/passwd", "rb").read() == passwd
    assert os.path.isdir(vols.vroot)


# ---- an operator's prefix over the daemon's own directories ----------------------------------

@pytest.mark.parametrize("where", ["the state root's parent", "the state root", "inside it",
                                   "the named volumes' root", "a link to the state root"])
def test_an_allowed_prefix_overlapping_the_daemons_own_directories_stops_the_start(tmp_path,
                                                                                  where):
    """A host volume at or above the daemon's state root would hand a sandbox every other
    sandbox's workspace (and a prefix inside it, or over the named volumes' root, the same):
    such a prefix stops the start with the reason, even reached through a link."""
    root = tmp_path / "state"
    root.mkdir()
    (root / "inner").mkdir()
    vroot = tmp_path / "volumes"
    vroot.mkdir()
    link = tmp_path / "link"
    link.symlink_to(root)
    prefix = {"the state root's parent": tmp_path, "the state root": root,
              "inside it": root / "inner", "the named volumes' root": vroot,
              "a link to the state root": link}[where]
    rc, out, err = shlib.run_to_exit(env={ALLOW: str(prefix), "SANDBOX_HOST_VOLUME_ROOT":
                                          str(vroot)}, root=str(root))
    assert rc not in (0, None), (rc, err)
    assert ALLOW in err and "overlaps the daemon's own directory" in err, err

