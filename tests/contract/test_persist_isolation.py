"""Issue 10, items 4, 5, 9 and 12: attacks on the root helpers that persist, restore and
remove a sandbox's trees (rsync, the tree removers), over real HTTP.

- a FIFO swapped in while rsync copies (an additive persist, a drain checkpoint) must not
  hold a persist slot: every persist freezes the sandbox;
- a huge sparse file must fail the persist loudly at the byte cap, and rsync's CPU is the
  sandbox's (its cgroup), not the daemon's;
- persist, restore and drain work with exactly the capabilities of the Kubernetes manifest;
- rsync and the removers run in a network namespace of their own, under seccomp.

Processes are found through /proc by pid (descendants of the daemon), never by name alone.
Needs root: the daemon builds namespaces, cgroups and mounts.
Run: SH_BIN=build/sandbox-host python3 -m pytest -q tests/contract/test_persist_isolation.py
"""
import glob
import os
import re
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

# Far below the 1 h default of SANDBOX_HOST_PERSIST_TIMEOUT_MS: a hung job fails the test.
CALL_TIMEOUT = 60


def new(d, item):
    r = d.client.create({"item_id": item}, timeout=CALL_TIMEOUT)
    assert r.status == 200, r
    s = shlib.Sandbox(d.client, r.json()["remote_id"])
    s.ws = d.ws(s.rid)
    s.uid = os.stat(s.ws).st_uid
    return s


def persist(s, body=None, timeout=CALL_TIMEOUT):
    return s.c.post("%s/persist" % s.base, body=body or {}, timeout=timeout)


def archive_daemon(start_daemon, tmp_path, *args, **kw):
    arch = tmp_path / "archive"
    arch.mkdir(exist_ok=True)
    return start_daemon(args=["--nfs-root=%s" % arch] + list(args), **kw), arch


def _post_async(fn, results, key):
    def run():
        try:
            results[key] = fn()
        except Exception as e:  # recorded, asserted by the caller
            results[key] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


# -- item 4: a FIFO swapped in while rsync copies -------------------------------------------

# Runs inside the sandbox. It waits, with inotify, until rsync opens d/f000 (the first file it
# sends: the file list is made by then), then puts a FIFO where d/zz (the last one) was. An
# rsync that reaches d/zz blocks in open(2) until a writer comes, which is never.
FIFO_SWAPPER = r"""
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
IN_OPEN = 0x20
os.makedirs("d", exist_ok=True)
for i in range(40):
    with open("d/f%03d" % i, "wb") as f:
        f.write(os.urandom(2 << 20))
with open("d/zz", "w") as f:
    f.write("last\n")
os.mkfifo("fifo.tmp")
fd = libc.inotify_init1(0)
assert fd >= 0 and libc.inotify_add_watch(fd, b"d", IN_OPEN) >= 0
print("ready", flush=True)
while True:
    buf, off, hit = os.read(fd, 65536), 0, False
    while off < len(buf):
        _, mask, _, n = struct.unpack_from("iIII", buf, off)
        hit = hit or buf[off + 16:off + 16 + n].rstrip(b"\0") == b"f000"
        off += 16 + n
    if hit:
        os.rename("fifo.tmp", "d/zz")
        print("swapped", flush=True)
        break
"""


def _fifo_attack_setup(start_daemon, tmp_path):
    # one slot: a job that hangs holds every other sandbox's persist
    d, arch = archive_daemon(start_daemon, tmp_path, "--persist-parallel=1")
    a, b = new(d, "attacker"), new(d, "victim")
    b.put_ok("kept", b"VICTIM")
    st = execlib.start(a, ["python3", "-c", FIFO_SWAPPER])
    assert st.status == 200, st.describe()
    st.wait_output(b"ready", timeout=CALL_TIMEOUT)
    return d, arch, a, b, st


def test_fifo_swapped_in_during_an_additive_persist_cannot_hold_the_slot(start_daemon, tmp_path):
    d, arch, a, b, st = _fifo_attack_setup(start_daemon, tmp_path)
    r = persist(a, {"delete": False})
    assert r.status == 204, r
    # the sandbox was frozen: rsync copied d/zz as it stood, a file
    assert (arch / "attacker" / "d" / "zz").read_bytes() == b"last\n"
    # the slot is free again: another sandbox's persist goes through
    assert persist(b).status == 204
    assert (arch / "victim" / "kept").read_bytes() == b"VICTIM"
    st.abort()


def test_fifo_swapped_in_during_a_drain_checkpoint_cannot_hold_the_slot(start_daemon, tmp_path):
    d, arch, a, b, st = _fifo_attack_setup(start_daemon, tmp_path)
    r = d.client.post("/drain", timeout=CALL_TIMEOUT)
    assert r.status == 200, r
    assert r.json() == {"sandboxes": 2, "persisted": 2, "failed": 0}, r.json()
    b.put_ok("after", b"AFTER")
    assert persist(b).status == 204
    assert (arch / "victim" / "after").read_bytes() == b"AFTER"
    st.abort()


# -- item 5: what one job may read, and whose CPU it is --------------------------------------

def test_huge_sparse_file_fails_the_persist_loudly_at_the_byte_cap(start_daemon, tmp_path):
    d, arch = archive_daemon(start_daemon, tmp_path)
    s = new(d, "sparse")
    s.put_ok("small", b"SMALL")
    # 15 TiB of holes: nothing on disk, 15 TiB for rsync to read
    execlib.ok(s, ["truncate", "-s", "15T", "huge"])
    body = assert_error(persist(s), 500, "PersistFailed")
    assert "SANDBOX_HOST_PERSIST_MAX_BYTES" in body["detail"], body
    assert "workspace" in body["detail"], body
    # refused before rsync ran: nothing was copied
    assert not (arch / "sparse" / "huge").exists()
    assert not (arch / "sparse" / "small").exists()
    # under the cap again, the persist works
    execlib.ok(s, ["rm", "huge"])
    assert persist(s).status == 204
    assert (arch / "sparse" / "small").read_bytes() == b"SMALL"


def test_huge_sparse_file_in_the_archive_fails_the_restore_loudly(start_daemon, tmp_path):
    d, arch = archive_daemon(start_daemon, tmp_path)
    (arch / "item").mkdir()
    with open(arch / "item" / "huge", "wb") as f:
        f.truncate(15 << 40)
    r = d.client.create({"item_id": "item"}, timeout=CALL_TIMEOUT)
    body = assert_error(r, 500, "PersistFailed")
    assert "SANDBOX_HOST_PERSIST_MAX_BYTES" in body["detail"], body
    assert "archive" in body["detail"], body


def _sandbox_cgroup(d, s, controller):
    """The host directory of sandbox s's cgroup in `controller`'s hierarchy (v1), or in the
    unified one (v2): <the daemon's own cgroup>/sandbox-host.<instance>/<rid>."""
    own = execlib.cgroup_dirs_of(d.proc.pid)
    base = own.get(controller) or own.get("unified")
    # v2: the daemon sits in the leaf "daemon" of its subtree
    base = base.rstrip("/")
    hits = set(glob.glob(os.path.join(os.path.dirname(base), "sandbox-host.*", s.rid)) +
               glob.glob(os.path.join(base, "sandbox-host.*", s.rid)))
    assert len(hits) == 1, (base, hits)
    return hits.pop()


def _keyed(path):
    with open(path) as f:
        return {k: int(v) for k, v in (ln.split() for ln in f if ln.strip())}


def _children_cpu_s(pid):
    """CPU seconds of the reaped children of pid (cutime + cstime: the helper's whole tree,
    rsync included, since every level waits for its children)."""
    with open("/proc/%d/stat" % pid, "rb") as f:
        s = f.read()
    fields = s[s.rindex(b")") + 2:].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def test_rsync_cpu_is_charged_to_the_sandbox_cgroup(start_daemon, tmp_path):
    # a CPU limit small enough that rsync's work exhausts the sandbox's quota
    d, arch = archive_daemon(start_daemon, tmp_path, "--cpu-max=0.25")
    s = new(d, "cpu")
    execlib.ok(s, ["truncate", "-s", "384M", "sparse"])
    cpu_cg = _sandbox_cgroup(d, s, "cpu")
    stat_before = _keyed(os.path.join(cpu_cg, "cpu.stat"))
    kids_before = _children_cpu_s(d.proc.pid)
    seen, done = {}, threading.Event()

    def watch():
        while not done.is_set():
            for p in pl.top_rsyncs_of(d.proc.pid):
                seen.setdefault(p, execlib.cgroup_dirs_of(p))
            time.sleep(0.005)
    w = threading.Thread(target=watch, daemon=True)
    w.start()
    try:
        r = persist(s, timeout=120)
    finally:
        done.set()
        w.join(10)
    assert r.status == 204, r
    helper_cpu = _children_cpu_s(d.proc.pid) - kids_before
    stat_after = _keyed(os.path.join(cpu_cg, "cpu.stat"))
    assert helper_cpu >= 0.2, "rsync did too little work to measure: %.2f s" % helper_cpu
    assert seen, "no rsync seen"
    # rsync ran in a cgroup below the sandbox's, in every hierarchy that limits it
    for pid, dirs in seen.items():
        for c in ("cpu", "memory", "pids"):
            key = c if c in dirs else "unified"
            if dirs:
                here = _sandbox_cgroup(d, s, c) if key == c else cpu_cg
                assert dirs[key].startswith(here + "/"), (pid, c, dirs[key], here)
    # and the kernel charged its CPU there: the sandbox (frozen meanwhile, so idle itself)
    # ran into its CPU quota
    if "usage_usec" in stat_after:
        used = (stat_after["usage_usec"] - stat_before["usage_usec"]) / 1e6
        assert used >= 0.8 * helper_cpu, (used, helper_cpu)
    else:
        assert stat_after["nr_throttled"] > stat_before["nr_throttled"], (stat_before,
                                                                          stat_after)


# -- item 9: the Kubernetes manifest's capabilities ------------------------------------------

MANIFEST = shlib.REPO / "contrib" / "k8s" / "deployment.yaml"
CAP_BITS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "DAC_READ_SEARCH": 2, "FOWNER": 3, "FSETID": 4,
            "KILL": 5, "SETGID": 6, "SETUID": 7, "SETPCAP": 8, "NET_BIND_SERVICE": 10,
            "NET_ADMIN": 12, "NET_RAW": 13, "SYS_CHROOT": 18, "SYS_PTRACE": 19,
            "SYS_ADMIN": 21, "MKNOD": 27, "AUDIT_WRITE": 29, "SETFCAP": 31}


def manifest_caps():
    """The daemon container's capabilities.add of contrib/k8s/deployment.yaml (after a
    drop of ALL), read with a small line parser (stdlib only)."""
    lines = MANIFEST.read_text().splitlines()
    for i, ln in enumerate(lines):
        if ln.strip() != "capabilities:":
            continue
        ind = len(ln) - len(ln.lstrip())
        section, caps, drop = None, [], []
        for sub in lines[i + 1:]:
            if not sub.strip() or sub.strip().startswith("#"):
                continue
            if len(sub) - len(sub.lstrip()) <= ind:
                break
            m = re.match(r"\s*(add|drop):\s*$", sub)
            if m:
                section = m.group(1)
                continue
            m = re.match(r"\s*-\s*([A-Z_]+)\s*$", sub)
            if m and section == "add":
                caps.append(m.group(1))
            elif m and section == "drop":
                drop.append(m.group(1))
        assert drop == ["ALL"], drop
        return caps
    raise AssertionError("no capabilities section in %s" % MANIFEST)


def _cap_mask(caps):
    m = 0
    for c in caps:
        m |= 1 << CAP_BITS[c]
    return m


def _status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(ln.rstrip("\n").split(":\t", 1) for ln in f if ":\t" in ln)


def test_persist_restore_and_drain_work_with_the_manifests_capabilities(start_daemon, tmp_path):
    caps = manifest_caps()
    assert "SYS_ADMIN" in caps and "DAC_READ_SEARCH" not in caps, caps
    # as the container runtime starts it: bounding, permitted and effective set = the list
    prefix = ["setpriv", "--bounding-set=-all," + ",".join("+" + c.lower() for c in caps),
              "--inh-caps=-all", "--"]
    arch = tmp_path / "archive"
    pl.write(arch / "item" / "a" / "f", b"ARCHIVED")
    pl.write(arch / "item" / "exec.sh", b"#!/bin/sh\n", 0o755)
    os.makedirs(arch / "item" / "locked")
    pl.write(arch / "item" / "locked" / "x", b"X", 0o600)
    os.chmod(arch / "item" / "locked", 0o700)
    d, _ = archive_daemon(start_daemon, tmp_path, prefix=prefix)
    st = _status(d.proc.pid)
    want = "%016x" % _cap_mask(caps)
    assert st["CapPrm"] == want and st["CapBnd"] == want, (st["CapPrm"], st["CapBnd"], want)
    # restore
    s = new(d, "item")
    assert (s.ws / "a" / "f").read_bytes() == b"ARCHIVED"
    assert pl.owners(s.ws) == {(s.uid, s.uid)}
    # persist, reconciling
    s.put_ok("new", b"NEW")
    s.delete_file("exec.sh")
    assert persist(s, {"delete": True}).status == 204
    assert pl.tree_entries(arch / "item") == pl.tree_entries(s.ws)
    # drain checkpoint
    s.put_ok("drained", b"D")
    r = d.client.post("/drain", timeout=CALL_TIMEOUT)
    assert r.status == 200 and r.json() == {"sandboxes": 1, "persisted": 1, "failed": 0}, r
    assert (arch / "item" / "drained").read_bytes() == b"D"
    d.stop_ok()


# -- item 12: the helpers' network namespace and seccomp filter ------------------------------

def _netns(pid):
    return os.readlink("/proc/%d/ns/net" % pid)


def test_rsync_runs_in_a_network_namespace_of_its_own_under_seccomp(start_daemon, tmp_path):
    d, arch = archive_daemon(start_daemon, tmp_path)
    s = new(d, "net")
    pl.write_big(s.ws / "big", 768 << 20)
    res, seen = {}, {}
    t = _post_async(lambda: persist(s, timeout=120), res, 1)
    deadline = time.monotonic() + CALL_TIMEOUT
    while t.is_alive() and time.monotonic() < deadline:
        for p in pl.top_rsyncs_of(d.proc.pid):
            if p not in seen:
                try:
                    seen[p] = (_netns(p), _status(p))
                except OSError:
                    pass
        time.sleep(0.005)
    t.join(CALL_TIMEOUT)
    assert res[1].status == 204, res
    assert seen, "no rsync seen"
    mine = _netns(d.proc.pid)
    for p, (ns, st) in seen.items():
        assert ns != mine, "rsync %d shares the daemon's network namespace %s" % (p, ns)
        assert st["Seccomp"] == "2", (p, st["Seccomp"])
        # the sandbox's deny list and the helpers' socket filter
        assert int(st["Seccomp_filters"]) >= 2, (p, st["Seccomp_filters"])
        assert st["NoNewPrivs"] == "1", p
        # never CAP_DAC_READ_SEARCH (open_by_handle_at) nor CAP_SYS_ADMIN
        eff = int(st["CapEff"], 16)
        assert not eff & (1 << CAP_BITS["DAC_READ_SEARCH"] | 1 << CAP_BITS["SYS_ADMIN"]), st


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _limits(dirs):
    """(pids, memory, cpu) limits of the cgroups in `dirs` (v1 or v2 file names)."""
    if "unified" in dirs and "pids" not in dirs:
        u = dirs["unified"]
        return (_read(u + "/pids.max"), _read(u + "/memory.max"), _read(u + "/cpu.max"))
    return (_read(dirs.get("pids", "") + "/pids.max"),
            _read(dirs.get("memory", "") + "/memory.limit_in_bytes"),
            _read(dirs.get("cpu", "") + "/cpu.cfs_quota_us"))


def _trashes(d):
    """The state root's trash and every sandbox's own ({root}/.sandboxes/N/.trash)."""
    return [d.root / ".trash"] + sorted(d.root.glob(".sandboxes/*/.trash"))


def _trashes_empty(d):
    for t in _trashes(d):
        try:
            if os.listdir(t):
                return False
        except FileNotFoundError:  # its sandbox's directory moved into the state root's
            pass
    return True


def _removers(d):
    """{pid: (netns, status, cgroup dirs, limits)} of the daemon's children working on a
    trash (their fd 3 is the trash directory: the state root's or a sandbox's)."""
    trashes = tuple(str(t) for t in _trashes(d))
    out = {}
    try:
        with open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)) as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return out
    for k in kids:
        try:
            if not os.readlink("/proc/%d/fd/3" % k).startswith(trashes):
                continue
            dirs = execlib.cgroup_dirs_of(k)
            v = (_netns(k), _status(k), dirs, _limits(dirs))
        except OSError:
            continue
        # an exited child (a zombie) shows the root cgroup
        if not v[1]["State"].startswith("Z"):
            out[k] = v
    return out


def _big_tree(root, uid, dirs=10, files=600):
    for i in range(dirs):
        dd = root / ("d%02d" % i)
        dd.mkdir(parents=True)
        for j in range(files):
            (dd / ("f%04d" % j)).write_bytes(b"x")
    pl.chown_tree(root, uid)


def _catch_remover(d, action):
    """Every look at the one remover that `action` starts: [(netns, status, cgroups,
    limits)]. It confines itself right after the fork and leaves its cgroups as it exits, so
    the looks before and after differ from those in between."""
    seen, done = {}, threading.Event()

    def watch():
        while not done.is_set():
            for k, v in _removers(d).items():
                seen.setdefault(k, []).append(v)
    w = threading.Thread(target=watch, daemon=True)
    w.start()
    try:
        r = action()
        assert r.status == 204, r
        # the removal runs in the background: wait until the trashes are empty
        assert shlib.wait_until(lambda: _trashes_empty(d), timeout=CALL_TIMEOUT)
    finally:
        done.set()
        w.join(10)
    assert len(seen) == 1, list(seen)
    return next(iter(seen.values()))


def _confined(looks, mine, cgroup_ok):
    """The first look showing all of: a network namespace of its own, seccomp, no_new_privs,
    a cgroup as cgroup_ok wants; else the last look (for the failure message)."""
    for ns, st, cgs, lim in looks:
        pids = cgs.get("pids", cgs.get("unified", ""))
        if ns != mine and st["Seccomp"] == "2" and st["NoNewPrivs"] == "1" and \
                cgroup_ok(pids, lim):
            return True, (ns, pids, lim)
    ns, st, cgs, lim = looks[-1]
    return False, (ns, st["Seccomp"], st["NoNewPrivs"], cgs, lim)


def test_tree_removers_run_in_a_network_namespace_of_their_own_under_seccomp(start_daemon):
    d = start_daemon()
    s = d.client.new_sandbox()
    ws, uid = d.ws(s.rid), os.stat(d.ws(s.rid)).st_uid
    mine = _netns(d.proc.pid)
    sb_cg = _sandbox_cgroup(d, s, "pids")

    # DELETE /dir: billed to the sandbox, below its cgroup
    _big_tree(ws / "t", uid)
    looks = _catch_remover(d, lambda: s.rmdir("t"))
    ok, why = _confined(looks, mine, lambda pids, lim: pids.startswith(sb_cg + "/"))
    assert ok, ("DELETE /dir's remover", mine, sb_cg, why)

    # the removal of a deleted sandbox: its cgroup is going, the remover has one of its own
    # below the daemon's subtree, with limits (pids, memory, CPU)
    def own_cgroup_with_limits(pids, lim):
        return os.path.dirname(pids) == os.path.dirname(sb_cg) and all(
            v and v not in ("max", "-1", "9223372036854771712") and not v.startswith("max ")
            for v in lim)
    _big_tree(ws / "u", uid)
    looks = _catch_remover(d, s.delete)
    ok, why = _confined(looks, mine, own_cgroup_with_limits)
    assert ok, ("the deleted sandbox's remover", mine, sb_cg, why)
