"""Crash safety (issue 3, point 7): a daemon killed with SIGKILL leaves sandbox processes,
cgroups, mounts and directories behind it for at most a moment; the next start with the same
state root finds and removes every one of them."""
import http.client
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from shlib import is_root, wait_until

pytestmark = pytest.mark.skipif(not is_root(), reason="sandboxes need root (CI runs as root)")

UID_BASE = 377000  # a range no other test uses, so "a process of this uid" is ours


def start_exec(port, rid, cmd):
    """Start an exec and leave its stream open (returns the connection)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", f"/sandboxes/{rid}/exec", body=json.dumps({"cmd": cmd}))
    r = c.getresponse()
    assert r.status == 200
    return c, r


def uid_pids(uid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{d}")
        except FileNotFoundError:
            continue
        if st.st_uid == uid:
            out.append(int(d))
    return out


def cgroup_dirs_named(name):
    found = []
    for ctl in ("pids", "memory", "cpu", "freezer", ""):
        base = Path("/sys/fs/cgroup") / ctl
        if not base.is_dir():
            continue
        for dirpath, dirnames, _ in os.walk(base):
            if dirpath.count("/") - str(base).count("/") > 5:
                dirnames[:] = []
                continue
            if os.path.basename(dirpath) == name:
                found.append(dirpath)
    return found


def test_restart_after_sigkill_removes_leftover_processes_cgroups_mounts_and_dirs(start_daemon):
    d = start_daemon(args=[f"--uid-base={UID_BASE}"])
    root = d.root
    r = d.client.create({})
    assert r.status == 200, r
    rid = r.json()["remote_id"]
    conn, resp = start_exec(d.port, rid, ["sh", "-c", "sleep 1000 & sleep 1000"])
    assert wait_until(lambda: len(uid_pids(UID_BASE)) >= 2, 5), "the sandbox's sleeps never ran"
    d.kill()  # SIGKILL by pid
    conn.close()

    d2 = start_daemon(root=str(root), args=[f"--uid-base={UID_BASE}"])
    try:
        assert wait_until(lambda: not uid_pids(UID_BASE), 10), \
            f"sandbox processes survived: {uid_pids(UID_BASE)}"
        assert wait_until(lambda: not (root / rid).exists(), 10), "sandbox directory left"
        assert wait_until(lambda: not cgroup_dirs_named(rid), 10), \
            f"sandbox cgroups left: {cgroup_dirs_named(rid)}"
        with open("/proc/self/mountinfo") as f:
            assert str(root) not in f.read(), "a mount below the state root is visible"
        # and the restarted daemon works
        r = d2.client.create({})
        assert r.status == 200, r
    finally:
        d2.stop_ok("restart")
        shutil.rmtree(root, ignore_errors=True)


def test_restart_removes_a_leftover_whose_cgroups_a_killed_daemon_left_frozen(start_daemon):
    # a daemon killed in the middle of a kill (freeze, SIGKILL, thaw) leaves cgroups frozen on
    # their own (cgroup v1: a frozen child stays frozen when its parent thaws), whose processes
    # take no SIGKILL; the next start must thaw them before it kills
    d = start_daemon(args=[f"--uid-base={UID_BASE}"])
    root = d.root
    rid = d.client.create({}).json()["remote_id"]
    conn, resp = start_exec(d.port, rid, ["sleep", "1000"])
    assert wait_until(lambda: len(uid_pids(UID_BASE)) >= 1, 5), "the sandbox's sleep never ran"
    frozen = [os.path.join(c, sub, "freezer.state") for c in cgroup_dirs_named(rid)
              if "/freezer/" in c for sub in os.listdir(c)
              if os.path.isfile(os.path.join(c, sub, "freezer.state"))]
    if not frozen:
        pytest.skip("no cgroup v1 freezer here (cgroup v2 kills frozen processes)")
    for f in frozen:
        with open(f, "w") as fh:
            fh.write("FROZEN")
    d.kill()  # SIGKILL by pid, its sandbox's cgroups left frozen
    conn.close()

    d2 = start_daemon(root=str(root), args=[f"--uid-base={UID_BASE}"])
    try:
        assert wait_until(lambda: not uid_pids(UID_BASE), 10), \
            f"sandbox processes survived: {uid_pids(UID_BASE)}"
        assert wait_until(lambda: not cgroup_dirs_named(rid), 10), \
            f"sandbox cgroups left: {cgroup_dirs_named(rid)}"
        assert d2.client.create({}).status == 200
    finally:
        d2.stop_ok("restart")
        shutil.rmtree(root, ignore_errors=True)


def test_worker_exits_when_the_daemon_is_killed(start_daemon):
    d = start_daemon(args=[f"--uid-base={UID_BASE + 500}"])
    r = d.client.create({})
    assert r.status == 200, r
    rid = r.json()["remote_id"]
    conn, _ = start_exec(d.port, rid, ["sleep", "1000"])
    assert wait_until(lambda: len(uid_pids(UID_BASE + 500)) >= 1, 5)
    d.kill()
    conn.close()
    # No restart: the sandbox's processes die with their worker on their own.
    assert wait_until(lambda: not uid_pids(UID_BASE + 500), 10), \
        f"sandbox processes outlived the daemon: {uid_pids(UID_BASE + 500)}"


def workers_of(daemon_pid):
    """The daemon's sandbox workers: its children named sandbox-init (found by pid)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == daemon_pid and comm == "sandbox-init":
            out.append(int(d))
    return out


def test_worker_killed_mid_exec_ends_the_stream_with_an_error_frame(start_daemon):
    d = start_daemon(args=[f"--uid-base={UID_BASE + 1000}"])
    r = d.client.create({})
    assert r.status == 200, r
    rid = r.json()["remote_id"]
    conn, resp = start_exec(d.port, rid, ["sh", "-c", "echo started; sleep 1000"])
    first = json.loads(resp.readline())
    assert "o" in first
    workers = workers_of(d.proc.pid)
    assert len(workers) == 1, workers
    os.kill(workers[0], 9)  # by pid
    frames = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        line = resp.readline()
        if not line:
            break
        frames.append(json.loads(line))
        if "exit" in frames[-1] or "error" in frames[-1]:
            break
    conn.close()
    assert frames and "error" in frames[-1], frames
    assert frames[-1]["error"] == "SandboxNotFound"
    # the daemon lives on; the broken sandbox answers exec with SandboxNotFound, and goes
    r = d.client.post(f"/sandboxes/{rid}/exec", body={"cmd": ["true"]})
    assert r.status == 404 and r.json()["error"] == "SandboxNotFound", r
    assert d.client.request("DELETE", f"/sandboxes/{rid}").status == 204
    assert d.client.get("/healthz").status == 200


def test_restart_after_sigkill_detaches_workspace_filesystems_and_loop_devices(start_daemon):
    """Item 6: a SIGKILLed daemon leaves each sandbox's filesystem mounted (an ext4 image on a
    loop device, or a tmpfs); the next start with the same state root detaches them all, so
    no mount, loop device or image outlives them (the images never have a name)."""
    import disklib

    vol = disklib.Volume("192M")
    try:
        env = {"SANDBOX_HOST_DISK_MAX": "16M", "SANDBOX_HOST_DISK_QUOTA": "loop"}
        d = start_daemon(env=env, args=[f"--uid-base={UID_BASE + 2000}"], root=vol.root)
        rids = [d.client.new_sandbox().rid for _ in range(2)]
        conn, _ = start_exec(d.port, rids[0], ["sh", "-c", "head -c 4M /dev/zero > f; sleep 1000"])
        assert wait_until(lambda: len(uid_pids(UID_BASE + 2000)) >= 1, 5)
        assert len(disklib.loops_backed_below(vol.path)) == 2, disklib.mountinfo()
        d.kill()
        conn.close()
        assert len(disklib.mounts_below(vol.root)) == 4  # left behind: 2 filesystems + binds

        d2 = start_daemon(env=env, args=[f"--uid-base={UID_BASE + 2000}"], root=vol.root)
        try:
            assert wait_until(lambda: not disklib.mounts_below(vol.root), 10), \
                disklib.mounts_below(vol.root)
            assert wait_until(lambda: not disklib.loops_backed_below(vol.path), 10), \
                disklib.loops_backed_below(vol.path)
            assert wait_until(lambda: os.listdir(vol.root + "/.trash") == [], 10)
            assert os.listdir(vol.root + "/.disk") == []
            assert not any((Path(vol.root) / rid).exists() for rid in rids)
            # and the restarted daemon works, with a limit
            s = d2.client.new_sandbox()
            assert len(disklib.loops_backed_below(vol.path)) == 1
            s.delete()
        finally:
            d2.stop_ok("restart")
        assert not disklib.mounts_below(vol.path)
    finally:
        vol.close()
