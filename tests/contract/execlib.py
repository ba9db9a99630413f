"""Exec (CONTRACT.md section 4) helpers for the contract suite: an NDJSON stream reader over
http.client that timestamps every frame as it arrives and checks each frame's shape, plus
small helpers to run commands in a sandbox and to look at host processes.

Python stdlib only. Every wait is bounded: the socket has a per-read timeout and every loop a
deadline (the contract promises a frame at least every 5 s, so a 15 s read timeout is only hit
by a broken daemon).
"""
import base64
import binascii
import http.client
import json
import os
import signal
import socket
import struct
import time

import shlib
from shlib import KNOWN_ERROR_TYPES

READ_TIMEOUT = 15.0  # per socket read; heartbeats come at least every 5 s
HEARTBEAT_MAX = 5.0


def b64(s):
    """Strict base64 decode (raises ValueError on anything but canonical base64)."""
    if not isinstance(s, str):
        raise ValueError("not a string: %r" % (s,))
    try:
        return base64.b64decode(s.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise ValueError("bad base64 %r: %s" % (s[:80], e))


class ExecStream:
    """One POST /sandboxes/{rid}/exec, read frame by frame as the frames arrive.

    Attributes after reading: status, headers, body (non-200 only), frames [(t, dict)],
    chunks [(t, bytes)] (the o frames, heartbeats included as b""), final (the exit or error
    frame or None), cut (the stream ended without a final frame), shape_errors [str]."""

    def __init__(self, client, rid, cmd=None, env=None, body=None, read_timeout=READ_TIMEOUT,
                 raw_body=None):
        if body is None and raw_body is None:
            body = {"cmd": cmd}
            if env is not None:
                body["env"] = env
        self.conn = http.client.HTTPConnection(client.host, client.port, timeout=read_timeout)
        data = raw_body if raw_body is not None else json.dumps(body).encode()
        self.t0 = time.monotonic()
        self.conn.request("POST", "/sandboxes/%s/exec" % rid, body=data,
                          headers={"Content-Type": "application/json",
                                   "Content-Length": str(len(data))})
        self.resp = self.conn.getresponse()
        self.t_headers = time.monotonic()
        self.status = self.resp.status
        self.headers = self.resp.getheaders()
        self.body = None
        self.frames = []
        self.chunks = []
        self.final = None
        self.cut = False
        self.cut_reason = None
        self.shape_errors = []
        self.t_end = None
        self._buf = b""
        self._eof = False
        if self.status != 200:
            self.body = self.resp.read()
            self.conn.close()
            self._eof = True

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    # -- reading -------------------------------------------------------------------------
    def _fill(self):
        """One read from the socket into the line buffer; False at EOF or on a cut."""
        if self._eof:
            return False
        try:
            d = self.resp.read1(65536)
        except (http.client.IncompleteRead, ConnectionError, OSError,
                http.client.HTTPException) as e:
            if isinstance(e, socket.timeout):
                raise
            self.cut_reason = repr(e)
            d = b""
        if not d:
            self._eof = True
            return False
        self._buf += d
        return True

    def _check(self, fr):
        err = self.shape_errors.append
        if not isinstance(fr, dict):
            err("frame is not a JSON object: %r" % (fr,))
            return
        if self.final is not None:
            err("frame after the final frame: %r" % (fr,))
        if "o" in fr:
            if set(fr) != {"o"}:
                err("o frame with other keys: %r" % (fr,))
            try:
                b64(fr["o"])
            except ValueError as e:
                err("o frame: %s" % e)
        elif "exit" in fr:
            if type(fr["exit"]) is not int:
                err("exit is not an int: %r" % (fr,))
            for k in ("out", "err"):
                try:
                    b64(fr.get(k))
                except ValueError as e:
                    err("exit frame %s: %s" % (k, e))
            if "signal" in fr and type(fr["signal"]) is not int:
                err("signal is not an int: %r" % (fr,))
            for k in ("oom", "truncated"):
                # the contract only ever adds them as true; a false is tolerated as absent
                if k in fr and not isinstance(fr[k], bool):
                    err("%s present but not a bool: %r" % (k, fr))
            if "error" in fr:
                err("exit frame carries an error: %r" % (fr,))
        elif "error" in fr:
            if not isinstance(fr["error"], str) or not isinstance(fr.get("detail"), str):
                err("error frame needs string error and detail: %r" % (fr,))
            elif fr["error"] not in KNOWN_ERROR_TYPES:
                err("error frame type not in section 8: %r" % (fr,))
        else:
            err("unknown frame: %r" % (fr,))

    def next_frame(self, timeout=30.0):
        """The next frame dict (also recorded), or None at the end of the stream."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no complete frame within %ss (buffered %r)"
                                   % (timeout, self._buf[:200]))
            if not self._fill():
                if self.t_end is None:
                    self.t_end = time.monotonic()
                if self._buf:
                    self.shape_errors.append("unterminated trailing data %r" % self._buf[:200])
                    self._buf = b""
                if self.final is None:
                    self.cut = True
                return None
        line, _, self._buf = self._buf.partition(b"\n")
        t = time.monotonic()
        try:
            fr = json.loads(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            self.shape_errors.append("line is not JSON: %r" % line[:200])
            fr = {"_bad": line}
            self.frames.append((t, fr))
            return fr
        self._check(fr)
        self.frames.append((t, fr))
        if isinstance(fr, dict) and "o" in fr and isinstance(fr["o"], str):
            try:
                self.chunks.append((t, b64(fr["o"])))
            except ValueError:
                pass
        if isinstance(fr, dict) and ("exit" in fr or "error" in fr) and self.final is None:
            self.final = fr
            self.t_final = t
        return fr

    def read_all(self, timeout=60.0):
        """Read to the end of the stream; returns self."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise TimeoutError("exec stream did not end within %ss; frames so far: %r"
                                   % (timeout, [f for _, f in self.frames][-5:]))
            if self.next_frame(timeout=left) is None:
                break
        self.close()
        return self

    def wait_output(self, needle, timeout=20.0):
        """Read frames until the live output contains `needle` (bytes)."""
        deadline = time.monotonic() + timeout
        while needle not in self.o:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("%r not seen in live output within %ss; got %r"
                                   % (needle, timeout, self.o[-300:]))
            if self.next_frame(timeout=left) is None:
                raise AssertionError("stream ended before %r was printed: final=%r o=%r"
                                     % (needle, self.final, self.o[-300:]))

    def close(self):
        try:
            self.conn.close()
        except Exception:
            pass

    def abort(self):
        """Drop the connection abruptly (RST), as a vanished client would."""
        s = self.conn.sock
        if s is not None:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.close()

    # -- results -------------------------------------------------------------------------
    @property
    def o(self):
        return b"".join(c for _, c in self.chunks)

    @property
    def exit(self):
        return self.final.get("exit") if self.final else None

    @property
    def out(self):
        return b64(self.final["out"])

    @property
    def err(self):
        return b64(self.final["err"])

    def describe(self):
        return ("status=%r final=%r cut=%r(%s) shape_errors=%r o=%r" %
                (self.status, self.final and {k: (v if k not in ("out", "err") else
                                                  b64(v)[:300]) for k, v in self.final.items()},
                 self.cut, self.cut_reason, self.shape_errors[:5], self.o[:300]))

    def assert_exit(self, code=None):
        """The stream was well formed and ended with an exit frame (with `code`)."""
        assert self.status == 200, "exec answered %r %r" % (self.status, self.body)
        assert not self.shape_errors, self.describe()
        assert self.final is not None and "exit" in self.final, self.describe()
        if code is not None:
            assert self.final["exit"] == code, self.describe()
        return self


def start(sb, cmd, env=None, **kw):
    return ExecStream(sb.c, sb.rid, cmd, env=env, **kw)


def run(sb, cmd, env=None, timeout=60.0, **kw):
    """Run cmd to the end; returns the ExecStream (status checked by the caller)."""
    st = ExecStream(sb.c, sb.rid, cmd, env=env, **kw)
    if st.status == 200:
        st.read_all(timeout=timeout)
    return st


def ok(sb, cmd, env=None, code=0, timeout=60.0):
    """Run cmd; assert a well-formed stream ending with exit `code`; returns the stream."""
    st = run(sb, cmd, env=env, timeout=timeout)
    return st.assert_exit(code)


def sh(sb, script, code=0, timeout=60.0, env=None):
    """`sh -c script` inside the sandbox, asserting exit `code`; returns stdout as str."""
    st = ok(sb, ["sh", "-c", script], env=env, code=code, timeout=timeout)
    return st.out.decode("utf-8", "replace")


def py(sb, code_text, code=0, timeout=60.0):
    """`python3 -c code` inside the sandbox (the image's python3); returns stdout as str."""
    st = ok(sb, ["python3", "-c", code_text], code=code, timeout=timeout)
    return st.out.decode("utf-8", "replace")


def sandbox_uid(sb):
    return int(sh(sb, "id -u").strip())


# -- host processes ----------------------------------------------------------------------
def host_procs():
    """[(pid, real uid, cmdline bytes)] of every live host process (zombies included)."""
    res = []
    for n in os.listdir("/proc"):
        if not n.isdigit():
            continue
        try:
            with open("/proc/%s/status" % n) as f:
                uid = None
                for ln in f:
                    if ln.startswith("Uid:"):
                        uid = int(ln.split()[1])
                        break
            with open("/proc/%s/cmdline" % n, "rb") as f:
                cmd = f.read()
        except (OSError, ValueError):
            continue
        res.append((int(n), uid, cmd))
    return res


def host_procs_of_uid(uid):
    return [p for p in host_procs() if p[1] == uid]


def host_procs_with(marker):
    """Host processes whose command line contains `marker` (bytes)."""
    return [p for p in host_procs() if marker in p[2]]


def host_sleepers(m):
    """Host processes running exactly `sleep m` (m from marker())."""
    want = b"sleep\0" + m.encode() + b"\0"
    return [p for p in host_procs() if p[2] == want]


def kill_pids(pids, daemon_pid):
    """Safety net for a broken daemon: SIGKILL those of `pids` that descend from the test's
    own daemon (what it started for the test), by pid; never by uid or name, which could
    hit a process of another daemon on this host."""
    own = set(shlib.descendants(daemon_pid))
    for pid in pids:
        if pid in own:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def kill_uid_leftovers(daemon_pid, uid):
    """Kill, by pid, the processes of sandbox uid `uid` that descend from the test's daemon
    (only called after the daemon was supposed to have killed them, so a daemon bug cannot
    leak them); returns the ones found."""
    left = host_procs_of_uid(uid)
    kill_pids([p[0] for p in left], daemon_pid)
    return left


def wait_gone(fn, timeout=10.0, interval=0.1):
    """Poll fn() (returning a collection) until it is empty; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if not v or time.monotonic() > deadline:
            return v
        time.sleep(interval)


def marker():
    """A unique sleep duration usable as a process marker: `sleep 1000.<digits>`."""
    return "1000.%d" % (int.from_bytes(os.urandom(4), "big") % 10 ** 8 + 10 ** 8)


# -- host cgroups --------------------------------------------------------------------------
def cgroup_dirs_of(pid):
    """{controller: host directory} of a host process's cgroups (v1 controllers and the v2
    unified hierarchy as "unified")."""
    res = {}
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            lines = f.read().splitlines()
    except OSError:
        return res
    for ln in lines:
        _, ctrls, path = ln.split(":", 2)
        if ctrls == "":
            base = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") \
                else "/sys/fs/cgroup"
            res["unified"] = base + path
        else:
            for c in ctrls.split(","):
                res[c] = "/sys/fs/cgroup/%s%s" % (c, path)
    return res


def pids_limit_of(pid):
    """(directory, pids.current, pids.max) of the nearest cgroup above `pid` with a numeric
    pids.max, or None."""
    dirs = cgroup_dirs_of(pid)
    for key in ("pids", "unified"):
        d = dirs.get(key)
        while d and d.startswith("/sys/fs/cgroup/") and os.path.isdir(d):
            try:
                with open(os.path.join(d, "pids.max")) as f:
                    mx = f.read().strip()
                if mx != "max":
                    with open(os.path.join(d, "pids.current")) as f:
                        return d, int(f.read()), int(mx)
            except OSError:
                pass
            d = os.path.dirname(d)
    return None
