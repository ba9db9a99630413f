"""Helpers for the sandbox-host contract suite (CONTRACT.md is the law).

Python stdlib only. Every wait is time-bounded: sockets carry timeouts and every poll loop
has a deadline; conftest.py gives every test a hard timeout on top (pytest-timeout), so a
hung daemon fails its test, not the run. A test proves behaviour, never speed: "it did not
hang" is a call timeout that fails the call; how fast something is, tests/bench prints.
Every daemon started here is removed with all it made (Daemon.close), also when its test
fails.
"""
import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BIN = REPO / "build" / "sandbox-host"
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
REQ_TIMEOUT = 10.0
LISTEN_RE = re.compile(r"listening on http://([0-9A-Za-z.\-\[\]:]+):(\d+)")
# A remote_id (and a sandbox directory's name): the pod token (8 hex digits), then 128
# random bits (32 hex digits).
ID_RE = re.compile(r"^[0-9a-f]{40}$")
ID_LEN = 40


def binary():
    return os.environ.get("SH_BIN") or str(DEFAULT_BIN)


def base_env(root, extra=None):
    """The environment a daemon starts with: the caller's, minus any SANDBOX_HOST_*.
    SH_TEST_UID_BASE (a developer's knob, unset in CI) moves the default sandbox uid range, so
    that two test runs on one machine never count each other's sandbox processes.
    SANDBOX_HOST_DISK_MAX is 0 (no limit) unless a test says otherwise: the tests below were
    written against workspaces on the state root itself; the embedded default (auto: a limit
    wherever the host can hold one) is tested on its own (test_disk.py, tests/vm), and a test
    that wants the default passes SANDBOX_HOST_DISK_MAX=None.
    SANDBOX_HOST_IMAGE_PULL is off unless a test turns it on: an image name that is no host
    image would otherwise be pulled from its registry (docker.io for "nope"), and nothing a
    test does may reach an address it did not make itself; the image tests start their own
    registries (tests/images) and pass SANDBOX_HOST_IMAGE_PULL=on.
    SANDBOX_HOST_EGRESS is off unless a test turns it on: on, the daemon adds links, an address
    and an nftables table to its network namespace, and a test changes nothing of the host's;
    the egress tests run their daemon in namespaces they made (egresslib.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_HOST_")}
    env["SANDBOX_HOST_LISTEN"] = "127.0.0.1:0"
    env["SANDBOX_HOST_DISK_MAX"] = "0"
    env["SANDBOX_HOST_IMAGE_PULL"] = "off"
    env["SANDBOX_HOST_EGRESS"] = "off"
    if os.environ.get("SH_TEST_UID_BASE"):
        env["SANDBOX_HOST_UID_BASE"] = os.environ["SH_TEST_UID_BASE"]
    if root is not None:
        env["SANDBOX_HOST_ROOT"] = str(root)
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def q(p):
    """Percent-encode a workspace path (str or bytes) for a query string, '/' kept."""
    if isinstance(p, str):
        p = p.encode("utf-8", "surrogateescape")
    return urllib.parse.quote_from_bytes(p, safe="/")


class Resp:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # list of (name, value)
        self.body = body

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def header_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return "<Resp %d %r %r>" % (self.status, self.headers, self.body[:300])


class Client:
    def __init__(self, host, port):
        self.host = host
        self.port = port
        self.daemon_pid = None  # set by Daemon: whose descendants a test may kill

    def request(self, method, url, body=None, headers=None, timeout=REQ_TIMEOUT):
        """One request on a fresh connection. `url` is an already-encoded path+query."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            hdrs = dict(headers or {})
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
                hdrs.setdefault("Content-Type", "application/json")
            elif isinstance(body, str):
                body = body.encode("utf-8", "surrogatepass")
            if body is not None:
                hdrs.setdefault("Content-Length", str(len(body)))
            try:
                conn.request(method, url, body=body, headers=hdrs)
            except (BrokenPipeError, ConnectionResetError):
                # the server may answer early (413) and close while the body is still
                # being sent: read the answer it gave
                pass
            r = conn.getresponse()
            data = r.read()
            return Resp(r.status, r.getheaders(), data)
        finally:
            conn.close()

    def get(self, url, **kw):
        return self.request("GET", url, **kw)

    def post(self, url, body=None, **kw):
        return self.request("POST", url, body=body, **kw)

    def create(self, body=None, **kw):
        return self.request("POST", "/sandboxes", body=({} if body is None else body), **kw)

    def new_sandbox(self, body=None):
        r = self.create(body)
        assert r.status == 200, r
        return Sandbox(self, r.json()["remote_id"])


class Sandbox:
    """Thin wrappers over the section 2 table, one per endpoint. Keyword arguments go to
    Client.request (e.g. timeout=: a call that does not answer in time raises)."""

    def __init__(self, client, rid):
        self.c = client
        self.rid = rid
        self.base = "/sandboxes/" + rid

    def put(self, path, data, **kw):
        return self.c.request("PUT", "%s/file?path=%s" % (self.base, q(path)), body=data,
                              headers={"Content-Type": "application/octet-stream"}, **kw)

    def get(self, path, **kw):
        return self.c.request("GET", "%s/file?path=%s" % (self.base, q(path)), **kw)

    def head(self, path, **kw):
        return self.c.request("HEAD", "%s/file?path=%s" % (self.base, q(path)), **kw)

    def delete_file(self, path, **kw):
        return self.c.request("DELETE", "%s/file?path=%s" % (self.base, q(path)), **kw)

    def exists(self, path, **kw):
        return self.c.request("GET", "%s/exists?path=%s" % (self.base, q(path)), **kw)

    def size(self, path, **kw):
        return self.c.request("GET", "%s/size?path=%s" % (self.base, q(path)), **kw)

    def du(self, **kw):
        return self.c.request("GET", "%s/disk-usage" % self.base, **kw)

    def walk(self, root=None, **kw):
        if root is None:
            return self.c.request("GET", "%s/walk" % self.base, **kw)
        return self.c.request("GET", "%s/walk?root=%s" % (self.base, q(root)), **kw)

    def mkdir(self, path, **kw):
        return self.c.request("POST", "%s/mkdir" % self.base, body={"path": path}, **kw)

    def rmdir(self, path, **kw):
        return self.c.request("DELETE", "%s/dir?path=%s" % (self.base, q(path)), **kw)

    def rename(self, src, dst, **kw):
        return self.c.request("POST", "%s/rename" % self.base, body={"src": src, "dst": dst},
                              **kw)

    def mark_ready(self, **kw):
        return self.c.request("POST", "%s/mark-ready" % self.base, **kw)

    def ready(self, **kw):
        return self.c.request("GET", "%s/ready" % self.base, **kw)

    def delete(self, **kw):
        return self.c.request("DELETE", self.base, **kw)

    # convenience: values, asserting success
    def exists_v(self, path, **kw):
        r = self.exists(path, **kw)
        assert r.status == 200, r
        return r.json()["exists"]

    def size_v(self, path, **kw):
        r = self.size(path, **kw)
        assert r.status == 200, r
        return r.json()["size"]

    def du_v(self, **kw):
        r = self.du(**kw)
        assert r.status == 200, r
        return r.json()["bytes"]

    def walk_v(self, root=None, **kw):
        r = self.walk(root, **kw)
        assert r.status == 200, r
        return r.json()["entries"]

    def ready_v(self, **kw):
        r = self.ready(**kw)
        assert r.status == 200, r
        return r.json()["ready"]

    def put_ok(self, path, data, **kw):
        r = self.put(path, data, **kw)
        assert r.status == 204, r
        return r

    def get_v(self, path, **kw):
        r = self.get(path, **kw)
        assert r.status == 200, r
        return r.body


class Daemon:
    """A sandbox-host subprocess with its own fresh state root.

    close() stops it and removes everything it made, also after a SIGKILL; prefer the
    `running()` context manager or the conftest fixtures, which call it."""

    started = []  # every Daemon not closed yet (conftest closes what a test forgot)

    def __init__(self, env=None, args=(), root=None, wait_listen=True, prefix=()):
        """`prefix`: a command that execs the daemon (e.g. setpriv with a capability set);
        it must exec in place, so that proc.pid stays the daemon's pid."""
        self.own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="sh-ct-root-"))
        self.extra_env = dict(env or {})
        self.env = base_env(self.root, env)
        self.args = list(args)
        self.prefix = list(prefix)
        self.lines = []
        self.stdout_lines = []
        self.cond = threading.Condition()
        self.host = None
        self.port = None
        self.listen_line = None
        self.closed = False
        b = binary()
        if not os.path.exists(b):
            self._remove_root()
            raise RuntimeError("sandbox-host binary not found at %s (set SH_BIN)" % b)
        self.proc = subprocess.Popen(self.prefix + [b] + self.args, env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self._t_err = threading.Thread(target=self._drain, args=(self.proc.stderr, self.lines),
                                       daemon=True)
        self._t_out = threading.Thread(target=self._drain,
                                       args=(self.proc.stdout, self.stdout_lines), daemon=True)
        self._t_err.start()
        self._t_out.start()
        Daemon.started.append(self)
        if wait_listen:
            try:
                self.wait_listening()
            except BaseException:
                self.close(check=False)  # a failed start leaves nothing behind either
                raise

    def _drain(self, pipe, sink):
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            with self.cond:
                sink.append(line)
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_listening(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    m = LISTEN_RE.search(line)
                    if m:
                        self.listen_line = line
                        self.host, self.port = m.group(1), int(m.group(2))
                        self.client = Client("127.0.0.1", self.port)
                        self.client.daemon_pid = self.proc.pid
                        return
                if self.proc.poll() is not None:
                    # let the drain thread finish collecting
                    self.cond.wait(0.2)
                    raise RuntimeError("sandbox-host exited with %s before listening; stderr:\n%s"
                                       % (self.proc.returncode, "\n".join(self.lines)))
                left = deadline - time.monotonic()
                if left <= 0:
                    self.kill()
                    raise RuntimeError("no 'listening on' line within %ss; stderr:\n%s"
                                       % (timeout, "\n".join(self.lines)))
                self.cond.wait(min(left, 0.2))

    def wait_exit(self, timeout=STOP_TIMEOUT):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("sandbox-host did not exit within %ss" % timeout)
        self._t_err.join(2)
        self._t_out.join(2)
        return rc

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM by pid and wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def stop_ok(self, what=""):
        """SIGTERM and assert exit 0 (brief/section 10), with the stderr tail on failure."""
        rc = self.stop()
        assert rc == 0, "sandbox-host %sexited %r on SIGTERM; stderr tail:\n%s" % (
            (what + ": ") if what else "", rc, self.stderr_text()[-2500:])

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass

    def stderr_text(self):
        with self.cond:
            return "\n".join(self.lines)

    def ws(self, rid):
        return self.root / rid / "workspace"

    def sandbox(self, body=None):
        return self.client.new_sandbox(body)

    # -- removing what it made -----------------------------------------------------------
    def state_root(self):
        """The state root the daemon uses: a --root flag wins over the environment."""
        root = self.env.get("SANDBOX_HOST_ROOT")
        for i, a in enumerate(self.args):
            if a.startswith("--root="):
                root = a[len("--root="):]
            elif a == "--root" and i + 1 < len(self.args):
                root = self.args[i + 1]
        return root

    def leftovers(self):
        """What of this daemon is still on the host: its cgroup directories, the mounts
        below its state root, the loop devices backed by files below it."""
        root = self.state_root()
        if not root:
            return []
        return (daemon_cgroup_dirs(root) + ["mount " + m for m in mounts_below(root)] +
                ["loop " + d for d in loops_backed_below(root)])

    def close(self, check=True):
        """Stop the daemon (SIGTERM, SIGKILL past STOP_TIMEOUT) and remove everything it made,
        whatever state the test left it in: the leftovers of a daemon that did not stop
        cleanly (killed, crashed) go the way the product removes them after a crash, by a
        fresh daemon on the same root (which kills the sandboxes' processes, removes their
        cgroups and detaches their filesystems) and, should that fail, by hand; then the
        state root, when this object made it. Returns the exit code. With `check`, a daemon
        that exited 0 and still left a cgroup or a mount is an AssertionError (after the
        clean-up). Idempotent."""
        if self.closed:
            return self.proc.returncode
        self.closed = True
        if self in Daemon.started:
            Daemon.started.remove(self)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()
        self._t_err.join(2)
        self._t_out.join(2)
        rc = self.proc.returncode
        heirs = [d for d in Daemon.started
                 if d.proc.poll() is None and d.state_root() == self.state_root()]
        if heirs:
            # another live daemon on the same root: what is there is its own now, and so is
            # the root itself when this object made it
            heirs[0].own_root = heirs[0].own_root or self.own_root
            return rc
        left = self.leftovers()
        if left and rc != 0:
            self._restart_to_clean()
        remove_leftovers(self.state_root())
        self._remove_root()
        if check and left and rc == 0:
            raise AssertionError("sandbox-host exited 0 but left %r behind; stderr tail:\n%s"
                                 % (left, self.stderr_text()[-2500:]))
        return rc

    def _restart_to_clean(self):
        try:
            d = Daemon(env=self.extra_env, args=self.args, root=str(self.root),
                       prefix=self.prefix)
        except RuntimeError:
            return  # the manual clean-up below removes what it can
        d.own_root = False
        d.close(check=False)

    def _remove_root(self):
        if self.own_root:
            remove_leftovers(str(self.root))
            shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def running(env=None, args=(), root=None, prefix=()):
    """A daemon for a with-block (or a fixture's yield): a start that fails fails the test;
    at the end it is stopped with SIGTERM and must exit 0 (section 10) and leave nothing
    behind; everything it made is removed, also when the block fails."""
    try:
        d = Daemon(env=env, args=args, root=root, prefix=prefix)
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield d
    finally:
        rc = d.close()
    assert rc == 0, "sandbox-host exited %r on SIGTERM; stderr tail:\n%s" % (
        rc, d.stderr_text()[-3000:])


# -- what a daemon leaves on the host --------------------------------------------------------

def daemon_cgroup_name(root):
    """The cgroup subtree a daemon with this state root makes below its own cgroup in every
    hierarchy: sandbox-host.<FNV-1a of the root as given> (src/sandbox/manager.c)."""
    h = 1469598103934665603
    for b in os.fsencode(str(root)):
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "sandbox-host.%016x" % h


def _own_cgroup_dirs():
    """This process's cgroup directory in every mounted hierarchy (v1 and v2): a daemon it
    starts sits there too, and makes its subtree below it."""
    mounts = []
    for mp, mroot, fstype, opts in _mounts_with_options():
        if fstype == "cgroup2":
            mounts.append((mp, mroot, None))
        elif fstype == "cgroup":
            mounts.append((mp, mroot, set(opts.split(","))))
    res = []
    with open("/proc/self/cgroup") as f:
        for ln in f.read().splitlines():
            _, ctrls, path = ln.split(":", 2)
            for mp, mroot, copts in mounts:
                if (ctrls == "" and copts is None) or (
                        copts is not None and ctrls and set(ctrls.split(",")) <= copts):
                    rel = path[len(mroot):] if mroot != "/" and path.startswith(mroot) else path
                    res.append(mp.rstrip("/") + rel)
    return sorted(set(res))


def daemon_cgroup_dirs(root):
    """The cgroup directories of the subtree of a daemon with this state root that exist."""
    name = daemon_cgroup_name(root)
    return [os.path.join(d, name) for d in _own_cgroup_dirs()
            if os.path.isdir(os.path.join(d, name))]


def _cgroup_tree_bottom_up(top):
    out = []
    for dirpath, _, _ in os.walk(top):
        out.append(dirpath)
    return sorted(out, key=lambda p: p.count("/"), reverse=True)


def remove_cgroup_tree(top, timeout=10.0):
    """Remove a cgroup directory and its children: thaw it, SIGKILL the processes in it (by
    the pids the kernel lists in it: only what the daemon under test started sits there),
    then rmdir from the leaves up. Returns the directories that could not be removed."""
    deadline = time.monotonic() + timeout
    left = _cgroup_tree_bottom_up(top)
    while left and time.monotonic() < deadline:
        for d in left:
            try:
                with open(os.path.join(d, "freezer.state"), "w") as f:
                    f.write("THAWED")
            except OSError:
                pass
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    pids = [int(x) for x in f.read().split()]
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.rmdir(d)
            except OSError:
                pass
        left = [d for d in _cgroup_tree_bottom_up(top) if os.path.isdir(d)] \
            if os.path.isdir(top) else []
        if left:
            time.sleep(0.05)
    return left


def remove_leftovers(root):
    """Detach the mounts and loop devices below `root` and remove the cgroup subtree of a
    daemon with that state root: the safety net for a daemon that could not clean up."""
    if not root:
        return
    for top in daemon_cgroup_dirs(root):
        remove_cgroup_tree(top)
    if os.path.exists(str(root)):
        detach_all(root)


def _unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and s[i + 1:i + 4].isdigit() and len(s[i + 1:i + 4]) == 3:
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def _mounts_with_options(pid="self"):
    """[(mount point, root, fstype, super options)] of /proc/PID/mountinfo."""
    res = []
    with open("/proc/%s/mountinfo" % pid) as f:
        for line in f:
            left, _, right = line.partition(" - ")
            lf, rf = left.split(), right.split()
            res.append((_unescape(lf[4]), _unescape(lf[3]), rf[0], rf[2] if len(rf) > 2 else ""))
    return res


def mountinfo(pid="self"):
    """[(mount point, root, fstype, source)] of /proc/PID/mountinfo."""
    res = []
    with open("/proc/%s/mountinfo" % pid) as f:
        for line in f:
            left, _, right = line.partition(" - ")
            lf, rf = left.split(), right.split()
            res.append((_unescape(lf[4]), _unescape(lf[3]), rf[0], _unescape(rf[1])))
    return res


def mounts_below(path):
    """Mount points strictly below `path` in this process's namespace."""
    p = os.path.realpath(str(path)).rstrip("/") + "/"
    return [mp for mp, _, _, _ in mountinfo() if mp.startswith(p)]


def loops_backed_below(path):
    """Loop devices whose backing file lies below `path` (also unlinked ones: the kernel
    shows those as 'PATH (deleted)')."""
    p = os.path.realpath(str(path)).rstrip("/") + "/"
    res = []
    for dev in sorted(os.listdir("/sys/block")):
        if not dev.startswith("loop"):
            continue
        try:
            with open("/sys/block/%s/loop/backing_file" % dev) as f:
                backing = f.read().strip()
        except OSError:
            continue
        if backing.startswith(p):
            res.append("/dev/" + dev)
    return res


def detach_all(path, timeout=10.0):
    """Detach every mount below `path`, deepest first, then every loop device still backed
    by a file below it. Returns what was found (for the caller's assertion)."""
    found = mounts_below(path)
    for mp in sorted(found, key=len, reverse=True):
        subprocess.run(["umount", "-l", mp], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
    # AUTOCLEAR devices go when their filesystem does; anything else is detached by hand.
    deadline = time.monotonic() + timeout
    loops = loops_backed_below(path)
    while loops and time.monotonic() < deadline:
        time.sleep(0.1)
        loops = loops_backed_below(path)
    for dev in loops:
        subprocess.run(["losetup", "-d", dev], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
    return found, loops


# -- inotify (ctypes: the stdlib has no binding) --------------------------------------------

class Inotify:
    """An inotify instance: watches on host directories, events read with a timeout. The
    kernel queues the events of all watches of one instance in the order they happened, so
    a test can see in which order the daemon touched several directories."""

    IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
    IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
    IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED, IN_Q_OVERFLOW = 0x400, 0x800, 0x8000, 0x4000
    NAMES = {0x2: "MODIFY", 0x4: "ATTRIB", 0x8: "CLOSE_WRITE", 0x40: "MOVED_FROM",
             0x80: "MOVED_TO", 0x100: "CREATE", 0x200: "DELETE", 0x400: "DELETE_SELF",
             0x800: "MOVE_SELF", 0x8000: "IGNORED", 0x4000: "Q_OVERFLOW"}

    def __init__(self):
        import ctypes
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.paths = {}  # wd -> the watched directory

    def watch(self, path, mask):
        import ctypes
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(str(path)), mask)
        if wd < 0:
            raise OSError(ctypes.get_errno(), "inotify_add_watch %s" % path)
        self.paths[wd] = str(path)
        return wd

    def read(self, timeout):
        """Events that come within `timeout` s of silence: [(directory, event names, name)]."""
        import select
        import struct
        out = []
        while select.select([self.fd], [], [], timeout)[0]:
            buf = os.read(self.fd, 1 << 16)
            i = 0
            while i < len(buf):
                wd, mask, _, n = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16:i + 16 + n].rstrip(b"\0").decode("utf-8", "surrogateescape")
                i += 16 + n
                names = {v for k, v in self.NAMES.items() if mask & k}
                out.append((self.paths.get(wd, "?"), names, name))
        return out

    def close(self):
        os.close(self.fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# -- processes (found by pid through /proc) ---------------------------------------------------

def proc_table():
    """{pid: (ppid, comm)} of every live process."""
    res = {}
    for n in os.listdir("/proc"):
        if not n.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % n, "rb") as f:
                s = f.read()
        except OSError:
            continue
        lp, rp = s.index(b"("), s.rindex(b")")
        comm = s[lp + 1:rp]
        fields = s[rp + 2:].split()
        res[int(n)] = (int(fields[1]), comm)
    return res


def descendants(pid, table=None):
    """The pids below `pid` in the process tree (children, their children, ...)."""
    table = table if table is not None else proc_table()
    kids = {}
    for p, (pp, _) in table.items():
        kids.setdefault(pp, []).append(p)
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def run_to_exit(args=(), env=None, root="__tmp__", timeout=START_TIMEOUT):
    """Run the binary expecting it to exit on its own (bad config, --help, --version).
    Returns (rc, stdout, stderr). If it starts listening instead, it is stopped at once and
    AssertionError is raised (fail fast rather than wait out the timeout)."""
    own_tmp = root == "__tmp__"
    if own_tmp:
        root = tempfile.mkdtemp(prefix="sh-ct-root-")
    try:
        return _run_to_exit(args, env, root, timeout)
    finally:
        if own_tmp:
            shutil.rmtree(root, ignore_errors=True)


def _run_to_exit(args, env, root, timeout):
    d = Daemon(env=env, args=args, root=root, wait_listen=False)
    try:
        deadline = time.monotonic() + timeout
        started = False
        while d.proc.poll() is None:
            with d.cond:
                if any(LISTEN_RE.search(ln) for ln in d.lines):
                    started = True
                    break
                d.cond.wait(0.05)
            if time.monotonic() > deadline:
                break
        if d.proc.poll() is None:
            d.stop()
            raise AssertionError("sandbox-host %r did not exit by itself (%s); stderr:\n%s"
                                 % (list(args), "it started listening" if started else
                                    "timeout", d.stderr_text()))
        d.wait_exit()
        return d.proc.returncode, "\n".join(d.stdout_lines), d.stderr_text()
    finally:
        d.close()


# Section 8: every error type the contract names.
KNOWN_ERROR_TYPES = {
    "SandboxNotFound", "FileNotFoundError", "BadRequest", "IsADirectoryError",
    "NotADirectoryError", "FileExistsError", "NotFound", "MethodNotAllowed", "PayloadTooLarge",
    "Unavailable", "Internal", "PersistFailed",
}


def assert_error(r, status, etype=None):
    """Section 8: errors carry {"error": "<type>", "detail": "<msg>"}, the type one of the
    contract's names."""
    assert r.status == status, r
    ct = r.header("Content-Type") or ""
    assert ct.split(";")[0].strip().lower() == "application/json", r
    body = r.json()
    assert isinstance(body, dict), r
    assert isinstance(body.get("error"), str), r
    assert isinstance(body.get("detail"), str), r
    assert body["error"] in KNOWN_ERROR_TYPES, r
    if etype is not None:
        assert body["error"] == etype, r
    return body


def assert_json(r, status=200):
    assert r.status == status, r
    ct = r.header("Content-Type") or ""
    assert ct.split(";")[0].strip().lower() == "application/json", r
    return r.json()


def assert_204(r):
    assert r.status == 204, r
    assert r.body == b"", r


def raw_exchange(port, payload, read_timeout=3.0, shutdown_write=False, pre_close_wait=None):
    """Send raw bytes on a fresh socket; return whatever comes back before the server closes
    or `read_timeout` of silence passes. Never raises for resets."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(read_timeout)
    got = b""
    try:
        try:
            for chunk in payload if isinstance(payload, (list, tuple)) else [payload]:
                s.sendall(chunk)
            if shutdown_write:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        if pre_close_wait is not None:
            time.sleep(pre_close_wait)
            return got
        got, _ = read_to_close(s, read_timeout)
    finally:
        s.close()
    return got


def read_to_close(s, timeout):
    """Read from socket s until the peer closes, or `timeout` of silence passes, or the whole
    read has taken `timeout`: (bytes, whether the peer closed)."""
    got, closed = b"", False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            d = s.recv(65536)
        except socket.timeout:
            break
        except (ConnectionResetError, OSError):
            closed = True
            break
        if not d:
            closed = True
            break
        got += d
    return got, closed


def exchange_to_close(port, payload, timeout=5.0):
    """Send payload on a fresh socket, read until the server closes: (bytes, closed). The
    socket's timeout and the read's deadline bound it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return read_to_close(s, timeout)
    finally:
        s.close()


def read_head(s):
    """Read from socket s until the end of a response's header block (or EOF); the bytes.
    Bounded by the socket's timeout (a daemon that does not answer makes recv raise)."""
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(4096)
        if not d:
            break
        data += d
    return data


def raw_status(resp_bytes):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", resp_bytes)
    return int(m.group(1)) if m else None


def parse_raw_response(data):
    """Split the first raw HTTP response into (status, headers dict lower-case, body)."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        hdrs[k.strip().lower().decode()] = v.strip().decode("latin-1")
    return status, hdrs, body


def healthz_ok(client, timeout=2.0):
    """GET /healthz answers 200 within `timeout` seconds. A call timeout, not a measurement:
    a daemon that does not answer in time makes the call raise (socket.timeout), which
    fails the test. How fast it answers is tests/bench's figure."""
    r = client.get("/healthz", timeout=timeout)
    assert r.status == 200, r
    return r


PROBE_TIMEOUT = 1.0  # a probe while the daemon works hard answers within this (call timeout)


class ProbeWatch(threading.Thread):
    """Probes /healthz in a loop, each call bounded by a call timeout, from start() until
    stop(): the daemon kept answering if every probe got a 200 in time. Failures (a timeout,
    a refused connection, another status) are kept for the assertion; nothing is measured.

        with ProbeWatch(client) as w:
            ...the heavy work...
        w.assert_answered(min_probes=10)
    """

    def __init__(self, client, timeout=PROBE_TIMEOUT, interval=0.02):
        super().__init__(daemon=True)
        self.client, self.timeout, self.interval = client, timeout, interval
        self.probes = 0
        self.failures = []
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            try:
                r = self.client.get("/healthz", timeout=self.timeout)
                if r.status != 200:
                    self.failures.append(r)
            except OSError as e:  # socket.timeout among them: no answer within the timeout
                self.failures.append(repr(e))
            self.probes += 1
            self._halt.wait(self.interval)

    def stop(self):
        self._halt.set()
        self.join(self.timeout + 10)
        return self

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def assert_answered(self, min_probes=1):
        assert not self.failures, "/healthz did not answer 200 within %.1f s: %r" % (
            self.timeout, self.failures[:3])
        assert self.probes >= min_probes, "only %d probes ran" % self.probes


def sanitized():
    """ASan keeps freed memory in quarantine: RSS says nothing about our bounds there."""
    out = subprocess.run(["ldd", binary()], capture_output=True, text=True).stdout
    return "libasan" in out


def peak_rss_growth_kib(pid, call):
    """VmHWM growth of `pid` while `call` runs (the peak is reset first: clear_refs 5)."""
    def status(key):
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        raise AssertionError("no " + key)

    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")
    before = status("VmRSS")
    res = call()
    return res, status("VmHWM") - before


def fd_links(pid):
    """{fd number: link target} of process pid (an fd closing meanwhile is skipped)."""
    res = {}
    for name in os.listdir("/proc/%d/fd" % pid):
        try:
            res[int(name)] = os.readlink("/proc/%d/fd/%s" % (pid, name))
        except OSError:
            pass
    return res


def wait_until(fn, timeout=5.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            return v
        time.sleep(interval)


def is_root():
    return os.geteuid() == 0


def snapshot_tree(path):
    """Everything observable about a host directory tree: for the escape tests."""
    snap = {}
    path = str(path)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, path)
            content = None
            if os.path.islink(full):
                content = ("link", os.readlink(full))
            elif os.path.isfile(full):
                with open(full, "rb") as f:
                    content = f.read()
            snap[rel] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino, content)
    st = os.lstat(path)
    snap["."] = (st.st_mode, st.st_mtime_ns, st.st_ino)
    return snap


needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="plants files directly in the daemon's state root and "
                                       "needs root (CI runs as root)")


def setting_flag(name):
    """The command-line flag of setting SANDBOX_HOST_<name>: --<name in lower case, - for _>."""
    return "--" + name.lower().replace("_", "-")


def non_json_lines(text):
    """The non-empty lines of a daemon's output that are not a JSON object (the log's lines
    are; a configuration error is one plain line)."""
    out = []
    for ln in text.splitlines():
        if not ln.strip():
            continue
        try:
            if isinstance(json.loads(ln), dict):
                continue
        except ValueError:
            pass
        out.append(ln)
    return out
