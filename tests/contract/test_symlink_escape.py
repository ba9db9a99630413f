"""Section 3 security rule: symbolic links inside the workspace resolve as if the workspace
were "/" (openat2 RESOLVE_IN_ROOT); no file operation ever reads, writes, creates or removes
anything outside the workspace, also while a sandbox process races to swap links.

The links are planted directly on disk in {root}/{rid}/workspace (as a sandbox process
would), aiming at a host directory `outside` (with a secret) and at / and /etc.

SAFETY: these tests run as root against a daemon that may be buggy. Destructive operations
(delete file, rmdir, rename-from) are only ever aimed through links whose unconfined target
is our own temp directory, never / or /etc; links to / and /etc are used only for reads and
for creating probe names that the fixture removes again. Before the sandbox is deleted the
fixture removes every planted link from disk itself."""
import ctypes
import os
import threading
import time

import pytest

from shlib import assert_204, assert_error, needs_root, snapshot_tree

pytestmark = needs_root

ETC_PROBES = ["/etc/sh-ct-probe", "/etc/sh-ct-dir", "/etc/sh-ct-renamed"]


@pytest.fixture
def esc(sb, outside):
    """Plant the escape links; yield a helper with the before-snapshots."""
    ws = sb.ws
    O = str(outside)
    os.symlink(O, ws / "abs")                                   # absolute link to host dir
    os.symlink(O + "/secret", ws / "absfile")                   # absolute link to host file
    os.symlink("/", ws / "root")                                # "/" -> must mean the workspace
    os.symlink("/etc", ws / "hostetc")                          # /etc
    os.symlink(os.path.relpath(O, ws), ws / "rel")              # ../../../... to the host dir
    os.symlink(os.path.relpath(O + "/secret", ws), ws / "relfile")
    os.symlink("../../../../../../../../..", ws / "up")         # climbs "above" the root
    os.symlink("/../../../.." + O, ws / "dotabs")
    os.symlink("/proc/self/root", ws / "pself")
    (ws / "mid").mkdir()
    os.symlink("/", ws / "mid" / "lnk")                         # a link in the middle
    os.symlink("../..", ws / "mid" / "uplnk")
    os.symlink(O + "/newfile", ws / "dangling")                 # dangling on the host side
    os.symlink(os.path.relpath(O + "/newfile2", ws), ws / "danglingrel")
    os.symlink("c2", ws / "c1")                                 # chains
    os.symlink("/rel", ws / "c2")
    for p in ETC_PROBES:
        assert not os.path.lexists(p), "stale probe %s" % p

    class E:
        pass

    e = E()
    e.sb, e.ws, e.O, e.outside = sb, ws, O, outside
    e.secret = (outside / "secret").read_bytes()
    e.before = snapshot_tree(outside)
    e.passwd = open("/etc/passwd", "rb").read()
    # paths that an unconfined resolver would take to the host secret
    e.secret_paths = [
        "abs/secret", "absfile", "rel/secret", "relfile", "root" + O + "/secret",
        "mid/lnk" + O + "/secret", "up/" + os.path.relpath(O, "/") + "/secret",
        "mid/uplnk/" + os.path.relpath(O, "/") + "/secret",
        "dotabs/secret", "c1/secret", "pself" + O + "/secret",
    ]
    e.passwd_paths = ["hostetc/passwd", "root/etc/passwd", "up/etc/passwd", "mid/lnk/etc/passwd",
                      "pself/etc/passwd", "mid/uplnk/etc/passwd"]

    def unchanged():
        assert snapshot_tree(outside) == e.before, "host directory outside the workspace changed"
        for p in ETC_PROBES:
            assert not os.path.lexists(p), "created %s on the host" % p
        assert open("/etc/passwd", "rb").read() == e.passwd

    e.unchanged = unchanged
    yield e
    # remove every planted link before the sandbox fixture deletes the sandbox
    for dirpath, dirnames, filenames in os.walk(ws):
        for n in dirnames + filenames:
            full = os.path.join(dirpath, n)
            if os.path.islink(full):
                os.unlink(full)
    for p in ETC_PROBES:  # never leave litter in /etc, whatever happened
        if os.path.isdir(p) and not os.path.islink(p):
            os.rmdir(p)
        elif os.path.lexists(p):
            os.unlink(p)


def test_download_never_reads_host_files(esc):
    for p in esc.secret_paths + esc.passwd_paths:
        r = esc.sb.get(p)
        assert esc.secret not in r.body, p
        assert r.body != esc.passwd, p
        assert r.status in (400, 404), (p, r)
    esc.unchanged()


def test_download_through_links_absent_inside_is_filenotfound(esc):
    for p in ["abs/secret", "absfile", "rel/secret", "relfile", "root" + esc.O + "/secret",
              "hostetc/passwd", "root/etc/passwd", "up/etc/passwd", "dotabs/secret"]:
        assert_error(esc.sb.get(p), 404, "FileNotFoundError")


def test_links_resolve_as_if_workspace_were_root(esc):
    ws = esc.ws
    (ws / "secret").write_bytes(b"WS-SECRET")
    inner = ws / esc.O.lstrip("/")
    inner.mkdir(parents=True)
    (inner / "secret").write_bytes(b"INSIDE-COPY")
    (ws / "etc").mkdir()
    (ws / "etc" / "passwd").write_bytes(b"inside passwd")
    sb = esc.sb
    assert sb.get_v("root/secret") == b"WS-SECRET"
    assert sb.get_v("up/secret") == b"WS-SECRET"
    assert sb.get_v("mid/lnk/secret") == b"WS-SECRET"
    assert sb.get_v("mid/uplnk/secret") == b"WS-SECRET"
    assert sb.get_v("abs/secret") == b"INSIDE-COPY"
    assert sb.get_v("absfile") == b"INSIDE-COPY"
    assert sb.get_v("dotabs/secret") == b"INSIDE-COPY"
    assert sb.get_v("hostetc/passwd") == b"inside passwd"
    assert sb.get_v("root/etc/passwd") == b"inside passwd"
    assert sb.exists_v("abs/secret") is True
    assert sb.size_v("absfile") == len(b"INSIDE-COPY")
    esc.unchanged()


def test_exists_and_size_never_see_host_files(esc):
    for p in esc.secret_paths + esc.passwd_paths + ["abs", "rel", "abs/sub", "rel/sub/deep"]:
        assert esc.sb.exists_v(p) is False, p
        assert esc.sb.size_v(p) is None, p
    assert esc.sb.exists_v("hostetc") is False
    assert esc.sb.exists_v("dangling") is False
    esc.unchanged()


def test_walk_never_lists_host_files(esc):
    sb = esc.sb
    for root in [None, "/", "abs", "rel", "root", "up", "mid", "mid/lnk", "hostetc", "c1",
                 "dotabs", "pself", "abs/sub"]:
        r = sb.walk(root)
        assert r.status == 200, (root, r)
        for e in r.json()["entries"]:
            assert not e["path"].endswith(("secret", "deep", "passwd", "shadow")), (root, e)
    assert sb.walk_v("abs") == []
    assert sb.walk_v("rel") == []
    assert sb.walk_v() == []
    esc.unchanged()


def test_disk_usage_never_counts_host_files(esc):
    (esc.outside / "big").write_bytes(b"B" * 1_000_000)
    esc.before = snapshot_tree(esc.outside)
    esc.sb.put_ok("own", b"12345")
    assert esc.sb.du_v() == 5
    esc.unchanged()


def test_upload_never_writes_outside(esc):
    targets = ["abs/newfile", "rel/newfile", "root" + esc.O + "/newfile", "dotabs/newfile",
               "mid/lnk" + esc.O + "/newfile", "c1/newfile", "abs/sub/newfile",
               "hostetc/sh-ct-probe", "root/etc/sh-ct-probe", "up/etc/sh-ct-probe",
               "pself/etc/sh-ct-probe", "abs/secret", "rel/secret"]
    for p in targets:
        r = esc.sb.put(p, b"PWNED")
        assert r.status in (204, 400, 404), (p, r)
    esc.unchanged()


def test_upload_onto_link_replaces_link_not_host_target(esc):
    for p in ["absfile", "relfile", "dangling", "danglingrel"]:
        assert_204(esc.sb.put(p, b"REPLACED"))
        assert not os.path.islink(esc.ws / p)
        assert (esc.ws / p).read_bytes() == b"REPLACED"
    esc.unchanged()
    assert not os.path.lexists(esc.outside / "newfile")
    assert not os.path.lexists(esc.outside / "newfile2")


def test_delete_file_never_removes_outside(esc):
    for p in esc.secret_paths[:-1] + ["abs/sub/deep", "rel/sub/deep", "dotabs/sub/deep"]:
        if p in ("absfile", "relfile"):
            continue
        r = esc.sb.delete_file(p)
        assert r.status in (400, 404), (p, r)
    esc.unchanged()


def test_delete_file_on_link_removes_only_the_link(esc):
    for p in ["absfile", "abs", "rel", "relfile", "dangling", "dotabs"]:
        assert_204(esc.sb.delete_file(p))
        assert not os.path.lexists(esc.ws / p)
    esc.unchanged()


def test_mkdir_never_creates_outside(esc):
    for p in ["abs/newdir", "rel/newdir", "root" + esc.O + "/newdir", "abs/sub/nd",
              "c1/newdir", "hostetc/sh-ct-dir", "root/etc/sh-ct-dir", "up/etc/sh-ct-dir",
              "mid/lnk" + esc.O + "/newdir/deeper", "dangling/x", "dotabs/nd"]:
        r = esc.sb.mkdir(p)
        assert r.status in (204, 400, 404), (p, r)
    esc.unchanged()


def test_rmdir_never_removes_outside(esc):
    for p in ["abs/sub", "rel/sub", "root" + esc.O + "/sub", "mid/lnk" + esc.O,
              "abs", "rel", "c1", "dotabs", "absfile", "dangling"]:
        r = esc.sb.rmdir(p)
        assert r.status in (204, 400, 404), (p, r)
        esc.unchanged()


def test_rmdir_of_dir_holding_links_removes_links_only(esc):
    h = esc.ws / "holder"
    h.mkdir()
    os.symlink(esc.O, h / "abs")
    os.symlink(os.path.relpath(esc.O, h), h / "rel")
    os.symlink(esc.O + "/secret", h / "file")
    assert_204(esc.sb.rmdir("holder"))
    assert not os.path.lexists(h)
    esc.unchanged()


def test_rename_never_moves_host_files(esc):
    for src in esc.secret_paths + ["abs/sub", "rel/sub"]:
        if src in ("absfile", "relfile"):
            continue
        r = esc.sb.rename(src, "stolen")
        assert r.status in (400, 404), (src, r)
        assert not os.path.lexists(esc.ws / "stolen") or esc.secret not in (
            esc.ws / "stolen").read_bytes()
    esc.unchanged()


def test_rename_never_lands_outside(esc):
    for dst in ["abs/payload", "rel/payload", "root" + esc.O + "/payload", "c1/payload",
                "hostetc/sh-ct-renamed", "root/etc/sh-ct-renamed", "up/etc/sh-ct-renamed",
                "abs/secret", "rel/sub/deep", "dangling/x"]:
        esc.sb.put_ok("payload", b"PAYLOAD")
        r = esc.sb.rename("payload", dst)
        assert r.status in (204, 400, 404), (dst, r)
        esc.unchanged()


def test_rename_of_link_moves_the_link_only(esc):
    assert_204(esc.sb.rename("absfile", "moved"))
    assert os.readlink(esc.ws / "moved") == esc.O + "/secret"
    assert_204(esc.sb.rename("abs", "d/abs2"))
    assert os.path.islink(esc.ws / "d" / "abs2")
    esc.sb.put_ok("p", b"P")
    assert_204(esc.sb.rename("p", "dangling"))  # replaces the link, never writes its target
    assert (esc.ws / "dangling").read_bytes() == b"P"
    esc.unchanged()


def test_fifo_download_answers_400_at_once(esc):
    os.mkfifo(esc.ws / "fifo")
    os.symlink("/fifo", esc.ws / "fifolink")
    os.mkfifo(esc.outside / "hostfifo")
    os.symlink(esc.O + "/hostfifo", esc.ws / "hostfifolink")
    esc.before = snapshot_tree(esc.outside)
    # "at once": each call has a timeout, and a daemon blocked on a FIFO fails it
    for p in ("fifo", "fifolink", "mid/lnk/fifo"):
        r = esc.sb.get(p, timeout=2)
        assert_error(r, 400, "BadRequest")
    r = esc.sb.get("hostfifolink", timeout=2)
    assert_error(r, 404, "FileNotFoundError")
    # HEAD, exists and size must not block on it either
    assert esc.sb.head("fifo", timeout=1).status == 400
    assert esc.sb.exists_v("fifolink", timeout=1) is True
    assert esc.sb.size_v("fifo", timeout=1) is None
    esc.unchanged()


def test_directory_swapped_for_link(esc):
    sb, ws = esc.sb, esc.ws
    sb.put_ok("swap/secret", b"mine")
    assert sb.get_v("swap/secret") == b"mine"
    # a sandbox process swaps the directory for a link to the host directory
    os.unlink(ws / "swap" / "secret")
    os.rmdir(ws / "swap")
    os.symlink(esc.O, ws / "swap")
    r = sb.get("swap/secret")
    assert r.status == 404 and esc.secret not in r.body, r
    assert sb.exists_v("swap/secret") is False
    assert sb.size_v("swap/secret") is None
    assert sb.walk_v("swap") == []
    sb.put(("swap/new"), b"PWNED")
    sb.mkdir("swap/newdir")
    sb.delete_file("swap/secret")
    sb.rmdir("swap/sub")
    sb.rename("swap/secret", "got")
    assert not os.path.lexists(ws / "got") or esc.secret not in (ws / "got").read_bytes()
    sb.put_ok("x", b"x")
    sb.rename("x", "swap/x")
    esc.unchanged()


def test_racing_link_swap_never_escapes(esc):
    sb, ws = esc.sb, esc.ws
    stop = threading.Event()
    swaps = [0]

    # renameat2(RENAME_EXCHANGE) swaps "race" (a real directory) and ".race-alt" (a link to
    # the host directory) atomically, as fast as it can: the sharpest race a sandbox process
    # can run against the host's path resolution.
    libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    real = ws / "race"
    alt = ws / ".race-alt"
    real.mkdir()
    (real / "secret").write_bytes(b"inside")
    (real / "sub").mkdir()
    os.symlink(esc.O, alt)
    a, b = bytes(real), bytes(alt)
    if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        pytest.skip("renameat2(RENAME_EXCHANGE) unavailable: errno %d" % ctypes.get_errno())

    def swapper():
        while not stop.is_set():
            if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0:
                swaps[0] += 1

    t = threading.Thread(target=swapper, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 3.0
        n = 0
        while time.monotonic() < deadline:
            r = sb.get("race/secret")
            assert esc.secret not in r.body
            sb.put("race/written", b"PWNED")
            sb.mkdir("race/newdir")
            sb.delete_file("race/secret")
            sb.rmdir("race/sub")
            sb.put_ok("pl", b"P")
            sb.rename("pl", "race/pl")
            r = sb.walk("race")
            assert r.status == 200
            for e in r.json()["entries"]:
                assert not e["path"].endswith("deep"), e
            n += 1
    finally:
        stop.set()
        t.join(5)
    assert swaps[0] > 10, "swapper made too few swaps (%d)" % swaps[0]
    assert n > 5
    esc.unchanged()
