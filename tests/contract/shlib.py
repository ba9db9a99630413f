"""Helpers for the sandbox-host contract suite (CONTRACT.md is the law).

Python stdlib only. Every wait is time-bounded: sockets carry timeouts and every poll loop
has a deadline, because pytest-timeout is not available.
"""
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
HEX32_RE = re.compile(r"^[0-9a-f]{32}$")


def binary():
    return os.environ.get("SH_BIN") or str(DEFAULT_BIN)


def base_env(root, extra=None):
    """The environment a daemon starts with: the caller's, minus any SANDBOX_HOST_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_HOST_")}
    env["SANDBOX_HOST_LISTEN"] = "127.0.0.1:0"
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
    """Thin wrappers over the section 2 table, one per endpoint."""

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

    def delete_file(self, path):
        return self.c.request("DELETE", "%s/file?path=%s" % (self.base, q(path)))

    def exists(self, path):
        return self.c.request("GET", "%s/exists?path=%s" % (self.base, q(path)))

    def size(self, path):
        return self.c.request("GET", "%s/size?path=%s" % (self.base, q(path)))

    def du(self):
        return self.c.request("GET", "%s/disk-usage" % self.base)

    def walk(self, root=None):
        if root is None:
            return self.c.request("GET", "%s/walk" % self.base)
        return self.c.request("GET", "%s/walk?root=%s" % (self.base, q(root)))

    def mkdir(self, path):
        return self.c.request("POST", "%s/mkdir" % self.base, body={"path": path})

    def rmdir(self, path):
        return self.c.request("DELETE", "%s/dir?path=%s" % (self.base, q(path)))

    def rename(self, src, dst):
        return self.c.request("POST", "%s/rename" % self.base, body={"src": src, "dst": dst})

    def mark_ready(self):
        return self.c.request("POST", "%s/mark-ready" % self.base)

    def ready(self):
        return self.c.request("GET", "%s/ready" % self.base)

    def delete(self):
        return self.c.request("DELETE", self.base)

    # convenience: values, asserting success
    def exists_v(self, path):
        r = self.exists(path)
        assert r.status == 200, r
        return r.json()["exists"]

    def size_v(self, path):
        r = self.size(path)
        assert r.status == 200, r
        return r.json()["size"]

    def du_v(self):
        r = self.du()
        assert r.status == 200, r
        return r.json()["bytes"]

    def walk_v(self, root=None):
        r = self.walk(root)
        assert r.status == 200, r
        return r.json()["entries"]

    def ready_v(self):
        r = self.ready()
        assert r.status == 200, r
        return r.json()["ready"]

    def put_ok(self, path, data):
        r = self.put(path, data)
        assert r.status == 204, r
        return r

    def get_v(self, path):
        r = self.get(path)
        assert r.status == 200, r
        return r.body


class Daemon:
    """A sandbox-host subprocess with its own fresh state root."""

    def __init__(self, env=None, args=(), root=None, wait_listen=True, prefix=()):
        """`prefix`: a command that execs the daemon (e.g. setpriv with a capability set);
        it must exec in place, so that proc.pid stays the daemon's pid."""
        self.own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="sh-ct-root-"))
        self.env = base_env(self.root, env)
        self.args = list(args)
        self.lines = []
        self.stdout_lines = []
        self.cond = threading.Condition()
        self.host = None
        self.port = None
        self.listen_line = None
        b = binary()
        if not os.path.exists(b):
            raise RuntimeError("sandbox-host binary not found at %s (set SH_BIN)" % b)
        self.proc = subprocess.Popen(list(prefix) + [b] + self.args, env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self._t_err = threading.Thread(target=self._drain, args=(self.proc.stderr, self.lines),
                                       daemon=True)
        self._t_out = threading.Thread(target=self._drain,
                                       args=(self.proc.stdout, self.stdout_lines), daemon=True)
        self._t_err.start()
        self._t_out.start()
        if wait_listen:
            try:
                self.wait_listening()
            except RuntimeError:
                # a daemon that never listened leaves nothing behind (its own root included)
                if self.own_root:
                    shutil.rmtree(self.root, ignore_errors=True)
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
                             % (list(args), "it started listening" if started else "timeout",
                                d.stderr_text()))
    d.wait_exit()
    return d.proc.returncode, "\n".join(d.stdout_lines), d.stderr_text()


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
        deadline = time.monotonic() + read_timeout
        while time.monotonic() < deadline:
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            except (ConnectionResetError, OSError):
                break
            if not d:
                break
            got += d
    finally:
        s.close()
    return got


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


def healthz_fast(client, limit=2.0):
    t0 = time.monotonic()
    r = client.get("/healthz", timeout=limit + 1)
    dt = time.monotonic() - t0
    assert r.status == 200, r
    assert dt < limit, "healthz took %.2fs" % dt
    return r


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
