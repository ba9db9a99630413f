"""Density (issue 15): what the daemon holds per idle sandbox, and the opens on demand that
replaced what it held.

An idle sandbox costs the daemon exactly one fd: its worker's control socket (the worker is
reaped by pid, without a pidfd: the daemon is its only reaper). Its directory, its workspace
and its cgroup directories are opened when a request needs them, by name, and checked to be
the very directories made for it; these tests
prove the count (a held fd that comes back fails them) and that the opens land where they
must after what could confuse them: the sandbox trying to move its workspace, a delete while
a request is in flight and the slot's directory name made again for the next sandbox, a tree
swapped by hand below the state root. Everything is timed by call timeouts only.
"""
import os
import re
import socket
import stat
import time


import execlib
import oslib
import shlib
from shlib import assert_error, needs_root

pytestmark = needs_root

N = 12  # sandboxes per count: one fd more per sandbox moves the count by 12


fd_links = shlib.fd_links


def unix_socket_inodes():
    """Inodes of every AF_UNIX socket of this network namespace (the daemon shares ours)."""
    with open("/proc/net/unix") as f:
        next(f)
        return {int(line.split()[6]) for line in f if len(line.split()) > 6}


def kinds(links):
    """Count the fds by what they are: unix sockets, other sockets, pidfds, and the paths."""
    unix = unix_socket_inodes()
    out = {"unix": 0, "socket": 0, "pidfd": 0, "pipe": 0, "paths": []}
    for target in links.values():
        if target.startswith("socket:["):
            out["unix" if int(target[8:-1]) in unix else "socket"] += 1
        elif target == "anon_inode:[pidfd]":
            out["pidfd"] += 1
        elif target.startswith("pipe:["):
            out["pipe"] += 1
        else:
            out["paths"].append(target)
    return out


def workers(pid):
    """The daemon's children that are sandbox workers (sandbox-init), zombies included."""
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        kids = f.read().split()
    out = []
    for k in kids:
        try:
            with open("/proc/%s/comm" % k) as f:
                if f.read().strip() == "sandbox-init":
                    out.append(int(k))
        except OSError:
            pass
    return out


def settled_new_fds(pid, before, want, timeout=10.0):
    """The daemon's fds that are not in `before`, once they match `want` (a count) or the
    call timeout passes: the sockets of finished requests close a moment after the client's."""
    deadline = time.monotonic() + timeout
    while True:
        now = fd_links(pid)
        new = {k: v for k, v in now.items() if before.get(k) != v}
        if len(new) == want or time.monotonic() > deadline:
            return new
        time.sleep(0.05)


def http_response(conn):
    """Read one HTTP/1.1 response with a Content-Length body from a raw socket."""
    f = conn.makefile("rb")
    status = int(f.readline().split(b" ", 2)[1])
    headers = []
    while True:
        line = f.readline().rstrip(b"\r\n")
        if not line:
            break
        k, _, v = line.decode("latin-1").partition(":")
        headers.append((k.strip(), v.strip()))
    n = int(next(v for k, v in headers if k.lower() == "content-length"))
    return shlib.Resp(status, headers, f.read(n))


def use_everything(s):
    """What opens a sandbox's directories and cgroups on demand: files, a walk, the marker,
    an exec (its own cgroup), a directory removal (the trash)."""
    s.put_ok("d/f", b"x")
    assert s.exists_v("d/f")
    assert s.walk_v()
    r = s.mark_ready()
    assert r.status == 204, r
    assert s.ready_v() is True
    execlib.ok(s, ["true"])
    r = s.rmdir("d")
    assert r.status == 204, r


def test_an_idle_sandbox_holds_one_daemon_fd_its_workers_control_socket(start_daemon):
    d = start_daemon()
    pid = d.proc.pid
    warm = d.client.new_sandbox()  # the daemon's first-use fds (tool store, ...) open here
    use_everything(warm)
    before = settled_new_fds(pid, {}, -1, timeout=0.5)  # a settled baseline
    sbs = [d.client.new_sandbox() for _ in range(N)]
    for s in sbs:
        use_everything(s)
    new = settled_new_fds(pid, before, N)
    k = kinds(new)
    assert k == {"unix": N, "socket": 0, "pidfd": 0, "pipe": 0, "paths": []}, (
        "%d sandboxes made the daemon hold %r" % (N, sorted(new.values())))
    # no fd of the daemon leads into a sandbox's directory or cgroup, whatever it did
    ids = [s.rid for s in sbs + [warm]]
    for target in fd_links(pid).values():
        assert "/.sandboxes/" not in target, target
        assert not any(i in target for i in ids), target
    assert len(workers(pid)) == N + 1
    for s in sbs + [warm]:
        assert s.delete().status == 204
    gone = settled_new_fds(pid, before, 0)
    assert gone == {}, sorted(gone.values())
    # and every worker was reaped, though no pidfd watched it (no zombie left)
    assert shlib.wait_until(lambda: not workers(pid), 10), workers(pid)


def test_a_worker_killed_from_outside_is_noticed_and_reaped_without_a_pidfd(start_daemon):
    d = start_daemon()
    s = d.client.new_sandbox()
    other = d.client.new_sandbox()
    before = workers(d.proc.pid)
    assert len(before) == 2

    def busy():
        """The workers with a child: s's, once the exec started below runs."""
        out = []
        for w in before:
            with open("/proc/%d/task/%d/children" % (w, w)) as f:
                out += [w] if f.read().split() else []
        return out

    st = execlib.start(s, ["sleep", "1000"])
    assert shlib.wait_until(lambda: len(busy()) == 1, 10), busy()
    victim = busy()[0]
    os.kill(victim, 9)  # by pid, from outside: the daemon learns it from its socket
    st.close()
    assert shlib.wait_until(lambda: victim not in workers(d.proc.pid), 10), workers(d.proc.pid)
    assert_error(d.client.post("/sandboxes/%s/exec" % s.rid, body={"cmd": ["true"]}), 404,
                 "SandboxNotFound")
    execlib.ok(other, ["true"])
    assert s.delete().status == 204
    assert other.delete().status == 204
    assert shlib.wait_until(lambda: not workers(d.proc.pid), 10), workers(d.proc.pid)


def test_an_idle_v1_sandbox_holds_one_fd_more_its_entrypoints_one_pipe_for_both_streams(
        start_daemon):
    d = start_daemon()
    osc = oslib.os_client(d)
    m = oslib.uniq("said-")
    ep = ["sh", "-c", "echo %s-1; echo %s-2 >&2; echo %s-3; exec tail -f /dev/null" % (m, m, m)]
    warm = osc.create_ok(entrypoint=ep)
    before = settled_new_fds(d.proc.pid, {}, -1, timeout=0.5)
    ids = [osc.create_ok(entrypoint=ep)["id"] for _ in range(N)]
    new = settled_new_fds(d.proc.pid, before, 2 * N)
    assert kinds(new) == {"unix": N, "socket": 0, "pidfd": 0, "pipe": N, "paths": []}, (
        sorted(new.values()))
    # stdout and stderr through one pipe: both kept, in the order they were written
    want = "%s-1\n%s-2\n%s-3\n" % (m, m, m)
    path = "/v1/sandboxes/%s/diagnostics/logs?scope=container"
    assert shlib.wait_until(
        lambda: want in oslib.expect(osc.get(path % ids[-1]), 200)["content"], timeout=10), (
        oslib.expect(osc.get(path % ids[-1]), 200))
    for i in ids + [warm["id"]]:
        oslib.expect(osc.delete("/v1/sandboxes/" + i), 204)


def test_an_upload_whose_sandbox_is_deleted_meanwhile_never_lands_in_the_next_sandbox_of_its_slot(
        start_daemon):
    # One slot: the next sandbox gets the deleted one's uid and directory name.
    d = start_daemon(args=["--max-sandboxes=1"])
    a = d.client.new_sandbox()
    a_dir = os.readlink(d.root / a.rid)
    body = b"0123456789"
    conn = socket.create_connection((d.host, d.port), timeout=10)
    try:
        conn.sendall(b"PUT /sandboxes/%s/file?path=late HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: %d\r\n\r\n" % (a.rid.encode(), len(body)) + body[:4])
        # the daemon is streaming the body into a's workspace now; a goes, b takes its slot
        time.sleep(0.2)
        assert a.delete().status == 204
        b = d.client.new_sandbox()
        assert os.readlink(d.root / b.rid) == a_dir, "b did not get a's directory name"
        conn.sendall(body[4:])
        resp = http_response(conn)
    finally:
        conn.close()
    assert_error(resp, 404, "SandboxNotFound")
    assert b.exists_v("late") is False
    assert execlib.sh(b, "ls -A /workspace") == ""
    b.put_ok("mine", b"b's")
    assert b.get_v("mine") == b"b's"


def test_a_sandbox_cannot_move_or_replace_its_workspace_and_the_daemon_finds_the_same_one(
        start_daemon):
    d = start_daemon()
    s = d.client.new_sandbox()
    s.put_ok("before", b"1")
    out = execlib.sh(s, "cd /; "
                        "mv /workspace /moved 2>/dev/null && echo moved; "
                        "rmdir /workspace 2>/dev/null && echo removed; "
                        "ln -sT /tmp /workspace 2>/dev/null && echo linked; "
                        "ln -s / /workspace/workspace; mkdir /workspace/.sandboxes; "
                        "cd /tmp; echo done")
    assert out.split() == ["done"], out
    s.put_ok("after", b"2")
    assert execlib.sh(s, "cat /workspace/before /workspace/after") == "12"
    # what it planted is an entry of its workspace, nothing more
    assert s.get_v("after") == b"2"
    assert sorted(e["path"] for e in s.walk_v()) == ["after", "before"]
    assert execlib.sh(s, "ls -A /workspace").split() == [".sandboxes", "after", "before",
                                                          "workspace"]


def test_a_workspace_swapped_by_hand_below_the_state_root_is_refused_not_served(start_daemon):
    d = start_daemon()
    s = d.client.new_sandbox()
    s.put_ok("real", b"the sandbox's")
    sbdir = d.root / os.readlink(d.root / s.rid)
    moved = sbdir.with_name(sbdir.name + ".moved")
    os.rename(sbdir, moved)
    try:
        # an impostor with the same name and a file of the same name
        (sbdir / "workspace").mkdir(parents=True)
        (sbdir / "workspace" / "real").write_bytes(b"an impostor's")
        # A workspace in use keeps its checked fd a second after its last use: meanwhile its
        # own files are served; once it is let go, the impostor is refused. Never served.
        served = []

        def refused():
            r = s.get("real")
            served.append(r)
            return r if r.status != 200 else None

        # polled less often than the second it is kept after each use, or it would stay kept
        r = shlib.wait_until(refused, 30, 2.5)
        assert r is not None, served[-1]
        assert all(x.body == b"the sandbox's" for x in served if x.status == 200), served
        for r in (r, s.exists("real"), s.walk(), s.put("x", b"x")):
            body = assert_error(r, 500, "Internal")
            assert "not the one made for it" in body["detail"], body
        assert not (sbdir / "workspace" / "x").exists()
        assert "sandbox-dir-changed" in d.stderr_text()
    finally:
        for p in sorted(sbdir.rglob("*"), reverse=True):
            p.unlink() if not p.is_dir() else p.rmdir()
        sbdir.rmdir()
        os.rename(moved, sbdir)
    assert s.get_v("real") == b"the sandbox's"
    assert stat.S_ISDIR(os.lstat(sbdir).st_mode)



def test_every_sandbox_is_found_by_its_id_among_many_as_others_come_and_go(start_daemon):
    # 16 sandboxes in the smallest id table (32 chains): ids share chains, and each delete
    # unlinks one from the middle of its chain; the freed slots come back to new sandboxes.
    d = start_daemon(args=["--max-sandboxes=16"])
    live = [d.client.new_sandbox() for _ in range(16)]
    assert_error(d.client.create({}), 503, "Unavailable")
    gone = live[1::2]
    live = live[0::2]
    for s in gone:
        assert s.delete().status == 204
    live += [d.client.new_sandbox() for _ in range(8)]
    for s in live:
        assert s.ready_v() is False
        assert s.exists_v("x") is False
    for s in gone:
        assert_error(s.ready(), 404, "SandboxNotFound")
    uids = {execlib.sandbox_uid(s) for s in live}
    assert len(uids) == 16, uids
    for s in live:
        assert s.delete().status == 204
        assert_error(s.ready(), 404, "SandboxNotFound")


def nofile_limits(pid):
    """(soft, hard) of RLIMIT_NOFILE of process pid, from /proc/pid/limits."""
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no 'Max open files' line")


def have_cap_sys_resource():
    with open("/proc/self/status") as f:
        eff = next(int(ln.split()[1], 16) for ln in f if ln.startswith("CapEff:"))
    return bool(eff >> 24 & 1)  # CAP_SYS_RESOURCE


# The daemon run as a pod runs it: no CAP_SYS_RESOURCE, a nofile limit of the runtime's.
def unprivileged_limit(soft, hard):
    return ["prlimit", "--nofile=%d:%d" % (soft, hard), "setpriv",
            "--bounding-set=-sys_resource", "--inh-caps=-all", "--"]


# The fd checks hold with the embedded disk default too (a limit, by loop device here): the
# harness's SANDBOX_HOST_DISK_MAX=0 is taken away for them.
DISK_DEFAULT = {"SANDBOX_HOST_DISK_MAX": None}


def test_the_daemon_raises_its_open_file_limit_as_far_as_the_system_allows(start_daemon):
    with open("/proc/sys/fs/nr_open") as f:
        nr_open = int(f.read())
    d = start_daemon(env=DISK_DEFAULT)
    got = nofile_limits(d.proc.pid)
    mine = nofile_limits(os.getpid())
    # root with CAP_SYS_RESOURCE: both limits to fs.nr_open; else the soft one to the hard one
    want = nr_open if have_cap_sys_resource() and nr_open > mine[1] else mine[1]
    assert got == (want, want), (got, mine, nr_open)
    # in a pod: CAP_SYS_RESOURCE is not granted, the runtime gives soft 1024 and a hard limit
    d2 = start_daemon(prefix=unprivileged_limit(1024, 9000), args=["--max-sandboxes=8"],
                      env=DISK_DEFAULT)
    assert nofile_limits(d2.proc.pid) == (9000, 9000)
    s = d2.client.new_sandbox()
    execlib.ok(s, ["true"])
    # and a sandbox never inherits it: its PID 1 sets 1024/1024 for every command
    assert execlib.sh(s, "ulimit -Sn; ulimit -Hn").split() == ["1024", "1024"]


def _refused_start(args, nofile):
    """The stderr of a daemon that must stop at start with exit 2 under a nofile limit."""
    d = shlib.Daemon(args=args, prefix=unprivileged_limit(nofile, nofile), wait_listen=False,
                     env=DISK_DEFAULT)
    try:
        rc = d.wait_exit()
    finally:
        d.close()
    err = d.stderr_text()
    assert rc == 2, (rc, err)
    assert "RLIMIT_NOFILE is %d" % nofile in err, err
    assert "listening" not in err
    return err


def test_a_capacity_the_open_file_limit_cannot_hold_stops_the_start_with_exit_2():
    # 1,000 sandboxes need 1,000 x 18 fds (a /v1 sandbox: its socket, its entrypoint's pipe and
    # the pipes of its 16 background commands at most) and 8,192 for requests: more than 9,000
    err = _refused_start(["--max-sandboxes=1000"], 9000)
    assert "SANDBOX_HOST_MAX_SANDBOXES=1000 needs 26192 open files" in err, err


def test_the_start_time_fd_check_counts_every_sandbox_at_its_background_bound(start_daemon):
    # issue 20: 50 /v1 sandboxes each with 16 background commands (SANDBOX_HOST_BACKGROUND_MAX)
    # need 50 x (1 + 1 + 16) + 8,192 = 9,092 fds: more than 9,000, though 50 x 2 + 8,192 fit
    err = _refused_start(["--max-sandboxes=50"], 9000)
    assert "SANDBOX_HOST_MAX_SANDBOXES=50 needs 9092 open files" in err, err
    assert "SANDBOX_HOST_BACKGROUND_MAX" in err, err
    # with a lower bound the same capacity fits
    d = start_daemon(args=["--max-sandboxes=50", "--background-max=1"],
                     prefix=unprivileged_limit(9000, 9000), env=DISK_DEFAULT)
    assert d.client.get("/healthz").status == 200


def memory_cgroups(d):
    """The memory cgroups below the daemon's subtree (v1: its memory hierarchy; v2: every
    cgroup there with the memory controller, i.e. with a memory.current file)."""
    out = []
    for top in shlib.daemon_cgroup_dirs(d.root):
        if not (top.startswith("/sys/fs/cgroup/memory/") or "memory" not in top.split("/")):
            continue
        for dirpath, _, files in os.walk(top):
            if dirpath != top and ("memory.usage_in_bytes" in files or
                                   "memory.current" in files):
                out.append(os.path.relpath(dirpath, top))
    return sorted(set(out))


def test_an_idle_sandbox_has_the_fewest_memory_cgroups_its_layout_allows(start_daemon):
    # Every memory cgroup costs the kernel memory in proportion to every superblock of the
    # machine: v1 gives an idle sandbox one (its worker is in it), v2 two (a cgroup with
    # children holds no processes there, so the worker has its leaf).
    d = start_daemon(args=["--opensandbox=off"])
    sbs = [d.client.new_sandbox() for _ in range(3)]
    v1 = os.path.isdir("/sys/fs/cgroup/memory") and any(
        p.startswith("/sys/fs/cgroup/memory/") for p in shlib.daemon_cgroup_dirs(d.root))
    want = sorted([s.rid for s in sbs] + ([] if v1 else [s.rid + "/init" for s in sbs]))
    # Beside those, a new sandbox keeps at most one empty exec cgroup for its first exec (the
    # spare, dropped after 10 s idle): one exec-N each at most, nothing else.
    got = memory_cgroups(d)
    spares = [c for c in got if re.fullmatch(r"[0-9a-f]{40}/exec-[0-9]+", c)]
    assert sorted(c for c in got if c not in spares) == want, got
    assert len({c.split("/")[0] for c in spares}) == len(spares) <= len(sbs), spares
    # and each worker is in its sandbox's memory cgroup (v1) or its leaf below it (v2): under
    # the sandbox's memory limit all the same
    homes = set()
    for w in workers(d.proc.pid):
        with open("/proc/%d/cgroup" % w) as f:
            line = next(ln for ln in f if ":memory:" in ln or ln.startswith("0::"))
        homes.add(line.strip().rsplit("/sandbox-host.", 1)[1].split("/", 1)[1])
    assert homes == {s.rid if v1 else s.rid + "/init" for s in sbs}, homes
    for s in sbs:
        execlib.ok(s, ["true"])


def test_an_idle_sandbox_mounts_four_superblocks_tmp_var_tmp_and_shm_share_one(start_daemon):
    # Every superblock costs the kernel memory in every memory cgroup of the machine: a
    # sandbox's are its root, one tmpfs for /tmp, /var/tmp and /dev/shm, its /proc, its devpts.
    d = start_daemon()
    s = d.client.new_sandbox()
    own = {}
    for ln in execlib.sh(s, "cat /proc/self/mountinfo").splitlines():
        f = ln.split()
        fstype = f[f.index("-") + 1]
        if fstype in ("tmpfs", "proc", "devpts"):
            own.setdefault(f[2], set()).add(f[4])
    assert sorted(map(sorted, own.values())) == sorted(
        [["/"], ["/dev/shm", "/tmp", "/var/tmp"], ["/proc"], ["/dev/pts"]]), own
    # each writable by the sandbox, one size for the three; /dev is read-only
    out = execlib.sh(s, "for d in /tmp /var/tmp /dev/shm; do echo x > $d/f && echo ok; done; "
                        "stat -f -c %i /tmp /var/tmp /dev/shm | sort -u | wc -l; "
                        "touch /dev/x 2>/dev/null || echo ro; echo y > /dev/null && echo null")
    assert out.split() == ["ok", "ok", "ok", "1", "ro", "null"], out
    # the scratch mount the tmpfs was made at is not the sandbox's to see
    assert ".tmpfs" not in execlib.sh(s, "ls -A / /dev /var")
