"""Section 5 (item_id, persist and restore) and section 7's drain checkpoint, over real HTTP.

A temporary directory is the archive root (--nfs-root). Trees are compared by a digest of
every entry (type, mode, content hash, link target, hard-link groups). rsync processes are
found through /proc as descendants of the daemon's pid and killed by pid, never by name.

Needs root: the daemon builds namespaces, cgroups and mounts, and rsync runs confined.
Run: SH_BIN=build/sandbox-host python3 -m pytest -q tests/contract/test_persist.py
"""
import json
import os
import signal
import socket
import stat
import subprocess
import threading
import time

import pytest

import execlib
import persistlib as pl
import shlib
from shlib import assert_error

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="persist needs a root daemon (namespaces, cgroups, mounts); CI runs as root")

ID_RE = shlib.ID_RE


@pytest.fixture(scope="module")
def nfs(tmp_path_factory):
    return tmp_path_factory.mktemp("archive")


@pytest.fixture(scope="module")
def pd(nfs):
    """A daemon with an archive root."""
    with shlib.running(args=["--nfs-root=%s" % nfs]) as d:
        yield d


_made = []


def new(d, item=None, body=None):
    b = dict(body or {})
    if item is not None:
        b["item_id"] = item
    r = d.client.create(b, timeout=120)
    assert r.status == 200, r
    s = shlib.Sandbox(d.client, r.json()["remote_id"])
    s.item = item
    s.ws = d.ws(s.rid)
    s.dir = d.root / s.rid
    s.uid = os.stat(s.ws).st_uid
    _made.append(s)
    return s


@pytest.fixture(autouse=True)
def _cleanup():
    yield
    while _made:
        try:
            _made.pop().delete()
        except Exception:
            pass


def item():
    return "it-" + os.urandom(6).hex()


def persist(s, body=None, timeout=120):
    return s.c.post("%s/persist" % s.base, body=body, timeout=timeout)


def persist_ok(s, body=None):
    r = persist(s, body)
    assert r.status == 204, r
    return r


def sandbox_dirs(d):
    return sorted(p.name for p in d.root.iterdir() if ID_RE.match(p.name))


def entries_without(tree, prefix):
    return {k: v for k, v in tree.items() if not k.startswith(prefix)}


# -- restore on create ------------------------------------------------------------------

def test_new_item_gives_an_empty_ready_workspace(pd, nfs):
    it = item()
    s = new(pd, it)
    assert s.ready_v() is True
    assert os.listdir(s.ws) == []
    # a restore never creates the archive directory
    assert not (nfs / it).exists()


def test_round_trip_keeps_the_whole_tree(pd, nfs):
    it = item()
    a = new(pd, it)
    pl.fill_rich_tree(a.ws, n_files=3000)
    pl.chown_tree(a.ws, a.uid)
    want = pl.tree_entries(a.ws)
    assert len(want) > 3000
    persist_ok(a, {"delete": True})
    arch = pl.tree_entries(nfs / it)
    assert arch == want, pl.diff(want, arch)

    b = new(pd, it)
    got = pl.tree_entries(b.ws)
    assert got == want, pl.diff(want, got)
    assert pl.tree_digest(b.ws) == pl.tree_digest(a.ws)
    # sparse stays sparse: 64 MiB apparent, only the two islands allocated
    st = os.lstat(b.ws / "sparse.img")
    assert st.st_size == 64 << 20
    assert st.st_blocks * 512 < (1 << 20), st.st_blocks
    # hard links stay one inode
    ha, hb = os.lstat(b.ws / "hard" / "a"), os.lstat(b.ws / "hard" / "b")
    assert ha.st_ino == hb.st_ino
    # links are links, never followed into a copy of their target
    assert os.readlink(b.ws / "links" / "to-root") == "/"
    assert os.path.islink(b.ws / "links" / "dir-link")
    assert b.ready_v() is True
    # the restored sandbox sees it all, as its own
    out = execlib.sh(b, "cat 'names/with space' && ls -ld links/to-root | cut -c1")
    assert out == "named with spacel\n"


def test_restore_owns_everything_to_the_sandbox_uid(pd, nfs):
    it = item()
    arch = nfs / it
    pl.write(arch / "root-owned", b"r", 0o644)
    pl.write(arch / "d" / "other-owned", b"o", 0o600, uid=12345)
    os.makedirs(arch / "empty")
    os.lchown(arch / "empty", 54321, 54321)
    os.symlink("/etc", arch / "link")
    os.lchown(arch / "link", 999, 999)
    os.chown(arch, 4242, 4242)
    s = new(pd, it)
    assert pl.owners(s.ws) == {(s.uid, s.uid)}
    # ... and the sandbox can work with its files
    execlib.sh(s, "echo more >> d/other-owned && rm root-owned && rmdir empty")


def test_archive_path_that_is_a_file_fails_create_and_leaves_nothing(pd, nfs):
    it = item()
    (nfs / it).write_bytes(b"not a directory")
    before = sandbox_dirs(pd)
    r = pd.client.create({"item_id": it}, timeout=60)
    body = assert_error(r, 500)
    assert "not a directory" in body["detail"], body
    assert sandbox_dirs(pd) == before
    assert (nfs / it).read_bytes() == b"not a directory"


def test_archive_path_that_is_a_link_fails_create(pd, nfs, outside):
    it = item()
    os.symlink(str(outside), nfs / it)
    before = sandbox_dirs(pd)
    snap = pl.tree_entries(outside)
    r = pd.client.create({"item_id": it}, timeout=60)
    assert_error(r, 500)
    assert sandbox_dirs(pd) == before
    # persist side: never creates through, never writes through the link
    assert pl.tree_entries(outside) == snap


# -- persist: modes and no-ops -------------------------------------------------------------

def test_additive_then_reconciling(pd, nfs):
    it = item()
    s = new(pd, it)
    s.put_ok("a", b"A")
    s.put_ok("b", b"B")
    s.put_ok("dir/c", b"C")
    persist_ok(s, {"delete": False})
    assert sorted(os.listdir(nfs / it)) == ["a", "b", "dir"]
    s.delete_file("b")
    s.rmdir("dir")
    s.put_ok("a", b"A2")
    s.put_ok("new", b"N")
    persist_ok(s, {})  # absent delete: additive
    assert sorted(os.listdir(nfs / it)) == ["a", "b", "dir", "new"]
    assert (nfs / it / "a").read_bytes() == b"A2"
    assert (nfs / it / "dir" / "c").read_bytes() == b"C"
    persist_ok(s, {"delete": None})  # null: additive
    assert (nfs / it / "b").exists()
    persist_ok(s, {"delete": True})
    assert sorted(os.listdir(nfs / it)) == ["a", "new"]
    assert pl.tree_entries(nfs / it) == pl.tree_entries(s.ws)


def test_same_size_rewrite_within_a_second_is_persisted(pd, nfs):
    it = item()
    s = new(pd, it)
    p = s.ws / "f"
    p.write_bytes(b"version-1")
    persist_ok(s)
    t = os.stat(p)
    p.write_bytes(b"version-2")
    os.utime(p, ns=(t.st_atime_ns, t.st_mtime_ns + 1000))  # same second, same size
    persist_ok(s)
    assert (nfs / it / "f").read_bytes() == b"version-2"


@pytest.mark.parametrize("val", ["yes", 1, 0, [], {}])
def test_delete_must_be_a_boolean(pd, val):
    s = new(pd, item())
    assert_error(persist(s, {"delete": val}), 400, "BadRequest")


def test_not_ready_is_a_noop(pd, nfs):
    it = item()
    s = new(pd, it)
    s.put_ok("f", b"x")
    os.unlink(s.dir / ".ready")  # as a half-restored sandbox would be
    assert s.ready_v() is False
    assert persist(s, {}).status == 204
    assert persist(s, {"delete": True}).status == 204
    assert not (nfs / it).exists()
    # ready again: it persists
    assert s.mark_ready().status == 204
    persist_ok(s)
    assert (nfs / it / "f").read_bytes() == b"x"


def test_no_item_id_is_a_noop(pd, nfs):
    s = new(pd)
    assert s.ready_v() is False
    assert s.mark_ready().status == 204
    s.put_ok("f", b"x")
    before = sorted(os.listdir(nfs))
    assert persist(s, {"delete": True}).status == 204
    assert persist(s, {}).status == 204
    assert sorted(os.listdir(nfs)) == before


def test_no_archive_root_is_a_noop(daemon):
    s = daemon.client.new_sandbox({"item_id": "some-item"})
    try:
        ws = daemon.ws(s.rid)
        assert s.ready_v() is False  # nothing restored, the app restores and marks
        assert os.listdir(ws) == []
        assert s.mark_ready().status == 204
        s.put_ok("f", b"x")
        assert persist(s, {"delete": True}).status == 204
        assert persist(s, {}).status == 204
    finally:
        s.delete()


def test_setuid_bits_never_reach_the_archive(pd, nfs):
    it = item()
    s = new(pd, it)
    pl.write(s.ws / "suid", b"#!/bin/sh\n", 0o6755, uid=s.uid)
    os.chmod(s.ws / "suid", 0o6755)
    persist_ok(s)
    m = stat.S_IMODE(os.lstat(nfs / it / "suid").st_mode)
    assert m == 0o755, oct(m)


def test_devices_and_fifos_are_not_copied(pd, nfs):
    it = item()
    s = new(pd, it)
    os.mkfifo(s.ws / "fifo")
    os.mknod(s.ws / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    s.put_ok("f", b"x")
    persist_ok(s)
    assert sorted(os.listdir(nfs / it)) == ["f"]


# -- concurrency -----------------------------------------------------------------------------

def _post_async(s, body, results, key):
    def run():
        try:
            results[key] = persist(s, body, timeout=300)
        except Exception as e:  # recorded, asserted by the caller
            results[key] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _rsync_tree(daemon_pid, rid):
    """The rsync processes of the persist of sandbox `rid` that runs now: the top rsync of
    each run below the daemon (found by pid) whose cgroup lies below that sandbox's, with
    its own children (a local rsync forks a receiver and a generator)."""
    tops = [p for p in pl.top_rsyncs_of(daemon_pid)
            if any("/%s/" % rid in d for d in execlib.cgroup_dirs_of(p).values())]
    return [p for top in tops for p in [top] + shlib.descendants(top)]


def _signal_all(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def _hold_rsync(daemon_pid, rid, thread, timeout=60):
    """Stop (SIGSTOP, by pid) the rsync of the persist of `rid` that `thread` asked for, as
    soon as it shows; returns its pids (empty if the persist ended first). The caller sends
    SIGCONT to them in a finally."""
    deadline = time.monotonic() + timeout
    while thread.is_alive() and time.monotonic() < deadline:
        held = _rsync_tree(daemon_pid, rid)
        if held:
            _signal_all(held, signal.SIGSTOP)
            held = _rsync_tree(daemon_pid, rid)  # and a child forked meanwhile
            _signal_all(held, signal.SIGSTOP)
            return held
        time.sleep(0.002)
    return []


def test_persists_of_one_sandbox_are_serialized_of_two_run_in_parallel(pd, nfs):
    # a's first persist is held mid-copy: the test stops its rsync (SIGSTOP, by pid: the
    # test's own daemon's child). Meanwhile b's persist must run and answer, and a's second
    # must wait: no second rsync of a, no answer. Held, nothing is short enough to be missed
    # by looking at /proc; released, both of a's answer, the second one last.
    a, b = new(pd, item()), new(pd, item())
    pl.write_big(a.ws / "big", 256 << 20)  # long enough a run to be seen and stopped
    b.put_ok("small", b"b")
    pid = pd.proc.pid
    res = {}
    t1 = _post_async(a, {}, res, 1)
    held = _hold_rsync(pid, a.rid, t1)
    try:
        assert held, "a's first persist ended before its rsync was seen: %r" % res
        t2 = _post_async(a, {"delete": True}, res, 2)
        t3 = _post_async(b, {}, res, 3)
        # another sandbox's persist runs beside the held one
        t3.join(60)
        assert res.get(3) is not None and res[3].status == 204, \
            "b's persist waited for a's: %r" % res.get(3)
        assert (nfs / b.item / "small").read_bytes() == b"b"
        # the second persist of a has not started: still only the held run, no answer
        assert set(_rsync_tree(pid, a.rid)) == set(held), "two rsync runs of one sandbox"
        assert 1 not in res and 2 not in res, res
    finally:
        _signal_all(held, signal.SIGCONT)
    t1.join(120)
    t2.join(120)
    assert res[1].status == 204 and res[2].status == 204, res
    # and the reconciling one made the archive exactly the workspace
    assert pl.tree_entries(nfs / a.item) == pl.tree_entries(a.ws)


def _send_persist(s, body):
    """Send a persist request on a socket of its own, without waiting for the answer; then
    make sure the daemon has taken it: a /healthz round trip after it was sent is answered
    by the same loop, which read the persist's bytes first (they were in its socket)."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", s.c.port), timeout=120)
    sock.sendall(b"POST %s/persist HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                 % (s.base.encode(), len(data), data))
    for _ in range(2):
        shlib.healthz_ok(s.c)
    return sock


def _answer(sock):
    data, _ = shlib.read_to_close(sock, 120)
    sock.close()
    return shlib.parse_raw_response(data)


def test_queued_persist_rechecks_readiness_when_it_starts(start_daemon, tmp_path):
    # One persist at a time: b's persist queues behind a's, which the test holds (its rsync
    # stopped, by pid). b was ready when its persist was asked for; its marker goes while it
    # waits. When its turn comes it must see that, and write nothing: 204, no archive. A
    # check made only when the request came would copy a workspace no longer trusted.
    arch = tmp_path / "archive"
    arch.mkdir()
    d = start_daemon(env={"SANDBOX_HOST_PERSIST_PARALLEL": "1"}, args=["--nfs-root=%s" % arch])
    a, b = new(d, item()), new(d, item())
    pl.write_big(a.ws / "big", 256 << 20)
    b.put_ok("f", b"must not reach the archive")
    assert b.ready_v() is True
    pid = d.proc.pid
    res = {}
    t1 = _post_async(a, {}, res, 1)
    held = _hold_rsync(pid, a.rid, t1)
    sock = None
    try:
        assert held, "a's persist ended before its rsync was seen: %r" % res
        sock = _send_persist(b, {"delete": True})  # queued: a's holds the one slot
        assert not _rsync_tree(pid, b.rid)
        os.unlink(b.dir / ".ready")  # no longer trusted while it waits
    finally:
        _signal_all(held, signal.SIGCONT)
    t1.join(120)
    assert res[1].status == 204, res
    status, _, body = _answer(sock)
    assert status == 204, body
    assert not (arch / b.item).exists(), os.listdir(arch / b.item)
    d.stop_ok()


# Runs until the test creates "stop" (or argv[1] seconds pass): every persist freezes it, so
# a fixed duration would end it early on a slow machine.
WRITER = r"""
import os, sys, time
end = time.time() + float(sys.argv[1])
os.makedirs("w", exist_ok=True)
i = 0
while time.time() < end and not os.path.exists("stop"):
    name = "w/f%03d" % (i % 300)
    data = (("%d:" % i).encode() * 40000)[:65536]
    with open(name + ".tmp", "wb") as f:
        f.write(data)
    os.rename(name + ".tmp", name)
    if i % 7 == 0:
        try:
            os.unlink("w/f%03d" % ((i * 13) % 300))
        except FileNotFoundError:
            pass
    i += 1
print(i)
"""


def _consistent(path):
    """A writer file is whole: 64 KiB of one repeated "<i>:" token."""
    data = open(path, "rb").read()
    tok = data.split(b":", 1)[0] + b":"
    return data == (tok * 40000)[:65536]


def test_persist_during_heavy_writes(pd, nfs):
    it = item()
    s = new(pd, it)
    st = execlib.start(s, ["python3", "-c", WRITER, "60"])
    assert st.status == 200
    time.sleep(1.0)
    hz = shlib.ProbeWatch(pd.client, timeout=1.0, interval=0.05)
    hz.start()
    try:
        for body in ({}, {}, {"delete": True}, {}):
            persist_ok(s, body)
            # every persist is a quiet point's snapshot: every file whole (written by
            # rename)
            names = [n for n in os.listdir(nfs / it / "w") if not n.endswith(".tmp")]
            assert names
            bad = [n for n in names if not _consistent(nfs / it / "w" / n)]
            assert not bad, bad
            # thawed again: the writer goes on
            t0 = os.lstat(s.ws / "w").st_mtime_ns
            time.sleep(0.5)
            t1 = os.lstat(s.ws / "w").st_mtime_ns
            assert t1 > t0, "the sandbox stayed frozen after persist %r" % body
    finally:
        hz.stop()
        pl.write(s.ws / "stop", b"")
    st.read_all(timeout=60)
    st.assert_exit(0)
    assert int(st.out) > 100
    hz.assert_answered()
    # quiet now: a reconciling persist makes the archive exactly the workspace
    persist_ok(s, {"delete": True})
    assert pl.tree_entries(nfs / it) == pl.tree_entries(s.ws)


# -- hostile workspaces ---------------------------------------------------------------------

SWAPPER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2
def xchg(a, b):
    libc.renameat2(-100, a.encode(), -100, b.encode(), RENAME_EXCHANGE)
end = time.time() + float(sys.argv[1])
targets = sys.argv[2:]
os.makedirs("d/sub", exist_ok=True)
os.makedirs("d/etc", exist_ok=True)
for p in ("d/secret", "d/sub/deep", "d/etc/shadow", "d/etc/passwd"):
    open(p, "w").write("SANDBOX-OWN-DATA\n")
for k, t in enumerate(targets):
    try:
        os.unlink("l%d" % k)
    except FileNotFoundError:
        pass
    os.symlink(t, "l%d" % k)
n = 0
while time.time() < end:
    for k in range(len(targets)):
        xchg("d", "l%d" % k)
        xchg("d", "l%d" % k)
        n += 1
print(n)
"""


def _no_host_bytes(root, needles):
    hits = []
    for dpath, dnames, fnames in os.walk(os.fsencode(str(root))):
        for n in fnames:
            p = os.path.join(dpath, n)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            data = open(p, "rb").read()
            if any(x in data for x in needles):
                hits.append(p)
    return hits


def test_link_swap_race_during_persist(pd, nfs, outside):
    """A sandbox process swaps a directory with links to / and to a host directory while
    rsync copies: nothing outside the archive item is written, no host file is read in."""
    it = item()
    s = new(pd, it)
    before_outside = pl.tree_entries(outside)
    before_nfs = set(os.listdir(nfs))
    secret = (outside / "secret").read_bytes()
    shadow = open("/etc/shadow", "rb").read() if os.path.exists("/etc/shadow") else b""
    st = execlib.start(s, ["python3", "-c", SWAPPER, "6", "/", str(outside), "/etc"])
    assert st.status == 200
    time.sleep(0.5)
    n, partial = 0, []
    t_end = time.monotonic() + 5
    while time.monotonic() < t_end:
        reconcile = n % 2 == 1
        r = persist(s, {"delete": reconcile})
        if r.status != 204:
            # an additive checkpoint racing the swaps may be partial (rsync code 23: an
            # honest PersistFailed); the quiet point freezes the swapper and always succeeds
            assert not reconcile and r.status == 500, r
            partial.append(assert_error(r, 500, "PersistFailed")["detail"])
        n += 1
    st.read_all(timeout=60)
    st.assert_exit(0)
    assert int(st.out) > 100 and n >= 4
    needles = [secret, b"HOST-DEEP"] + ([shadow[:64]] if shadow else [])
    assert not _no_host_bytes(nfs / it, needles) and not _no_host_bytes(s.ws, needles)
    assert pl.tree_entries(outside) == before_outside
    assert set(os.listdir(nfs)) == before_nfs | {it}
    # the archive holds only the sandbox's own names
    names = {os.path.basename(k) for k in pl.tree_entries(nfs / it)}
    assert names <= {b"d", b"l0", b"l1", b"l2", b"sub", b"etc", b"secret", b"deep", b"shadow",
                     b"passwd"}, names


def test_archive_link_is_replaced_never_written_through(pd, nfs, outside):
    it = item()
    s = new(pd, it)
    before = pl.tree_entries(outside)
    os.symlink(str(outside), s.ws / "d")
    persist_ok(s)
    assert os.readlink(nfs / it / "d") == str(outside)
    os.unlink(s.ws / "d")
    pl.write(s.ws / "d" / "secret", b"SANDBOX-WRITES-HERE")
    pl.write(s.ws / "d" / "sub" / "deep", b"SANDBOX-WRITES-HERE")
    persist_ok(s)
    assert pl.tree_entries(outside) == before
    assert (nfs / it / "d" / "secret").read_bytes() == b"SANDBOX-WRITES-HERE"
    assert not os.path.islink(nfs / it / "d")


# -- failures ------------------------------------------------------------------------------------

@pytest.fixture
def ro_archive(tmp_path):
    """An archive root that is a read-only bind mount of a directory holding one item."""
    src, ro = tmp_path / "arch-src", tmp_path / "arch-ro"
    src.mkdir()
    ro.mkdir()
    pl.write(src / "item1" / "keep", b"KEEP")
    pl.write(src / "item1" / "sub" / "old", b"OLD")
    subprocess.run(["mount", "--bind", str(src), str(ro)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        yield ro
    finally:
        subprocess.run(["umount", str(ro)], check=False)


def test_rsync_failure_answers_persistfailed_and_leaves_the_archive(start_daemon, ro_archive):
    d = start_daemon(args=["--nfs-root=%s" % ro_archive])
    before = pl.tree_entries(ro_archive / "item1")
    s = new(d, "item1")  # restoring from a read-only archive works
    assert (s.ws / "keep").read_bytes() == b"KEEP"
    s.put_ok("new-file", b"NEW")
    s.delete_file("sub/old")
    for body in ({}, {"delete": True}):
        body_r = assert_error(persist(s, body), 500, "PersistFailed")
        assert "rsync" in body_r["detail"] and "ead-only" in body_r["detail"], body_r
        assert pl.tree_entries(ro_archive / "item1") == before
    # creating the archive directory fails the same way
    s2 = new(d, "item2")
    assert_error(persist(s2, {}), 500, "PersistFailed")
    assert not (ro_archive / "item2").exists()
    d.stop_ok()


def test_sigkilled_rsync_answers_persistfailed(pd, nfs):
    it = item()
    s = new(pd, it)
    s.put_ok("kept", b"KEPT")
    persist_ok(s)
    before = pl.tree_entries(nfs / it)
    pl.write_big(s.ws / "big", 768 << 20)
    res = {}
    t = _post_async(s, {}, res, 1)
    deadline = time.monotonic() + 30
    killed = None
    while time.monotonic() < deadline and killed is None and t.is_alive():
        tops = pl.top_rsyncs_of(pd.proc.pid)
        if tops:
            killed = tops[0]
            os.kill(killed, signal.SIGKILL)
        else:
            time.sleep(0.005)
    t.join(120)
    assert killed, "no rsync seen"
    body = assert_error(res[1], 500, "PersistFailed")
    assert "signal 9" in body["detail"], body
    after = pl.tree_entries(nfs / it)
    for k, v in before.items():
        assert after.get(k) == v, k
    assert execlib.wait_gone(lambda: pl.rsyncs_of(pd.proc.pid)) == []
    # the next persist goes through
    persist_ok(s)
    assert os.path.getsize(nfs / it / "big") == 768 << 20


def _persist_big_until(pd, it, seen):
    """A sandbox of item `it` with a 768 MiB file, its persist started in a thread, returned
    (sandbox, thread, results) once seen() holds or the persist ended (60 s at most)."""
    s = new(pd, it)
    pl.write_big(s.ws / "big", 768 << 20)
    res = {}
    t = _post_async(s, {}, res, 1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not seen() and t.is_alive():
        time.sleep(0.005)
    return s, t, res


def test_sandbox_deleted_during_persist(pd, nfs):
    it = item()
    s, t, res = _persist_big_until(pd, it, lambda: pl.top_rsyncs_of(pd.proc.pid))
    assert s.delete().status == 204
    t.join(10)  # the persist's answer comes within 10 s of the delete, or this fails
    assert not t.is_alive(), "the persist did not answer within 10 s of its sandbox's delete"
    assert_error(res[1], 404, "SandboxNotFound")
    assert execlib.wait_gone(lambda: pl.rsyncs_of(pd.proc.pid)) == []
    # no half-written temporary file of rsync is left in the item
    assert _rsync_temp_files(nfs / it) == []


def _rsync_temp_files(item_dir):
    """rsync's temporary files of "big" (".big.XXXXXX" beside it, or "big.XXXXXX" in a
    temporary directory) and temporary directories (".sh-rsync.*") anywhere in an item."""
    found = []
    for dirpath, dirs, files in os.walk(item_dir):
        found += [os.path.join(dirpath, n) for n in files
                  if n.startswith(".big.") or n.startswith("big.")]
        found += [os.path.join(dirpath, n) for n in dirs if n.startswith(".sh-rsync.")]
    return found


def test_rsync_killed_mid_file_leaves_no_temporary_file_in_the_archive(pd, nfs):
    # every rsync process SIGKILLed while it writes a file: none of them can remove its
    # temporary file, the helper removes what they left
    it = item()
    s, t, res = _persist_big_until(pd, it, lambda: [
        p for p in _rsync_temp_files(nfs / it) if "big." in os.path.basename(p)])
    assert t.is_alive(), "the persist ended before rsync wrote its temporary file: %r" % res
    for pid, _ in pl.rsyncs_of(pd.proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    t.join(120)
    assert not t.is_alive()
    assert_error(res[1], 500, "PersistFailed")
    assert execlib.wait_gone(lambda: pl.rsyncs_of(pd.proc.pid)) == []
    assert _rsync_temp_files(nfs / it) == []
    # the next persist goes through
    persist_ok(s)
    assert os.path.getsize(nfs / it / "big") == 768 << 20
    assert _rsync_temp_files(nfs / it) == []


# -- drain -------------------------------------------------------------------------------------

def test_drain_checkpoints_every_ready_sandbox_with_an_item(start_daemon, tmp_path):
    arch = tmp_path / "drain-arch"
    arch.mkdir()
    d = start_daemon(args=["--nfs-root=%s" % arch])
    a, b = new(d, "a"), new(d, "b")
    c = new(d)  # no item
    n = new(d, "notready")
    f = new(d, "fails")
    a.put_ok("x", b"A")
    b.put_ok("y/z", b"B")
    c.mark_ready()
    c.put_ok("c", b"C")
    n.put_ok("n", b"N")
    os.unlink(n.dir / ".ready")
    f.put_ok("f", b"F")
    (arch / "fails").write_bytes(b"a file where the item should be")
    r = d.client.post("/drain", timeout=120)
    assert r.status == 200, r
    assert r.json() == {"sandboxes": 5, "persisted": 2, "failed": 1}, r.json()
    assert (arch / "a" / "x").read_bytes() == b"A"
    assert (arch / "b" / "y" / "z").read_bytes() == b"B"
    assert not (arch / "notready").exists()
    assert sorted(os.listdir(arch)) == ["a", "b", "fails"]
    # draining: creates refused; existing sandboxes keep working; a second drain is fresh
    assert_error(d.client.create({}), 503, "Unavailable")
    a.put_ok("x2", b"A2")
    r = d.client.post("/drain", timeout=120)
    assert r.json() == {"sandboxes": 5, "persisted": 2, "failed": 1}
    assert (arch / "a" / "x2").read_bytes() == b"A2"
    d.stop_ok()


def test_drain_without_archive_root(start_daemon):
    d = start_daemon()
    s = d.client.new_sandbox({"item_id": "x"})
    s.mark_ready()
    r = d.client.post("/drain")
    assert r.status == 200 and r.json() == {"sandboxes": 1, "persisted": 0, "failed": 0}
    d.stop_ok()


# -- the loop keeps serving ---------------------------------------------------------------------

def test_healthz_answers_throughout_1gib_persist_and_restore(pd, nfs):
    # Every probe answers within its call timeout while 1 GiB goes out and back in: the copy
    # runs in rsync, never on the loop. (How fast: tests/bench's "healthz worst, during
    # persist+restore 1GiB".)
    it = item()
    s = new(pd, it)
    pl.write_big(s.ws / "big", 1 << 30, uid=s.uid)
    with shlib.ProbeWatch(pd.client, timeout=1.0) as hz:
        persist_ok(s)
        s2 = new(pd, it)
    hz.assert_answered(min_probes=10)
    assert os.path.getsize(s2.ws / "big") == 1 << 30
    assert os.lstat(s2.ws / "big").st_uid == s2.uid
