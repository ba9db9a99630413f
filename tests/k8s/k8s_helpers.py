"""Helpers for tests/k8s: the manifests, the daemon binary, HTTP and HAProxy.

Python stdlib only (Debian's python3 + python3-pytest). Every wait has a deadline; every
process is started here and stopped by its pid.
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
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
K8S_DIR = REPO / "contrib" / "k8s"
TESTS_DIR = Path(__file__).resolve().parent
LISTEN_RE = re.compile(r"listening on http://([0-9A-Za-z.\-\[\]:]+):(\d+)")
REQ_TIMEOUT = 10.0
START_TIMEOUT = 10.0
STOP_TIMEOUT = 15.0


def binary():
    return os.environ.get("SH_BIN") or str(REPO / "build" / "sandbox-host")


def haproxy_bin():
    """Debian installs haproxy in /usr/sbin, which a non-root PATH may lack."""
    return shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/sbin")


def is_root():
    return os.geteuid() == 0


def wait_until(pred, timeout, interval=0.05, what="condition"):
    """Poll pred() until it returns a true value (returned) or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def free_port():
    """A port the kernel just handed out for 127.0.0.1 (bound to port 0, then released)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


# ---- HTTP ---------------------------------------------------------------------------------


class Resp:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return "<Resp %d %r>" % (self.status, self.body[:300])


def request(url, method="GET", path="/", body=None, timeout=REQ_TIMEOUT, headers=None):
    """One request on a fresh connection to base `url` (http://host:port, no trailing /),
    with extra `headers` (a dict). Connection errors (refused, reset) propagate as OSError."""
    m = re.fullmatch(r"http://([0-9.]+):(\d+)", url)
    assert m, "unexpected base url %r" % url
    conn = http.client.HTTPConnection(m.group(1), int(m.group(2)), timeout=timeout)
    try:
        headers = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif isinstance(body, str):
            body = body.encode()
        if body is not None:
            headers["Content-Length"] = str(len(body))
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        return Resp(r.status, r.getheaders(), r.read())
    finally:
        conn.close()


# ---- the daemon ---------------------------------------------------------------------------


class Pod:
    """One sandbox-host daemon standing in for one pod: its own state root, its own port and
    a pod_url naming that port."""

    def __init__(self, name, uid_base, root=None, port=None, env=None, bin=None,
                 host="127.0.0.1"):
        self.name = name
        self.host = host
        self.env = dict(env or {})
        self.bin = bin or binary()
        self.uid_base = uid_base
        self.own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="sh-k8s-%s-" % name))
        self.log_path = self.root.parent / (self.root.name + ".stderr")
        self.proc = None
        self.port = None
        self.url = None
        self._start(port)

    def _spawn(self, port):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_HOST_")}
        env.update(self.env)
        url = "http://%s:%d" % (self.host, port)
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.bin, "--listen=%s:%d" % (self.host, port), "--pod-url=" + url,
             "--root=" + str(self.root), "--uid-base=%d" % self.uid_base],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        return url

    def _start(self, port=None):
        # The daemon must know its pod_url before it binds (as in Kubernetes, where the pod
        # IP comes from the downward API), so the port is picked first; a lost race for it
        # is retried with a fresh port.
        last = ""
        for _ in range(5):
            p = port or free_port()
            url = self._spawn(p)
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline:
                # the log is appended to across restarts: any line naming this port
                if any(int(m.group(2)) == p for m in LISTEN_RE.finditer(self.stderr_text())):
                    self.port, self.url = p, url
                    return
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
            last = self.stderr_text()
            self.kill()
            if port:
                break
        raise RuntimeError("%s did not start; stderr:\n%s" % (self.name, last[-3000:]))

    def stderr_text(self):
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL by pid (a crashed pod) and reap."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
            self.log.close()

    def stop(self):
        """SIGTERM by pid (the kubelet's stop); SIGKILL if it outlives STOP_TIMEOUT.
        Returns the exit status."""
        if self.proc is None:
            return None
        if self.alive():
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            rc = self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            rc = self.proc.wait(STOP_TIMEOUT)
        self.log.close()
        return rc

    def restart_and_stop(self):
        """After a SIGKILL: start again on the same state root, which removes what the
        killed daemon left (sandbox processes, cgroups, directories), then stop cleanly
        (which removes the daemon's cgroup subtree). What a new pod does on the same node."""
        self._start()
        return self.stop()

    def cleanup(self):
        if self.own_root:
            shutil.rmtree(self.root, ignore_errors=True)
        try:
            self.log_path.unlink()
        except FileNotFoundError:
            pass


def stop_pods(pods, problems):
    """Stop every pod by pid (SIGTERM; one SIGKILLed by a test is started again on its root,
    which clears what it left, then stopped), remove its files; a pod that did not exit 0 is
    appended to `problems`."""
    for p in pods:
        try:
            if p.alive():
                rc = p.stop()
                if rc != 0:
                    problems.append("%s exited %r on SIGTERM" % (p.name, rc))
            elif p.proc is not None and p.proc.returncode == -9:
                rc = p.restart_and_stop()
                if rc != 0:
                    problems.append("%s restart exited %r on SIGTERM" % (p.name, rc))
        except Exception as e:  # keep tearing down the others
            problems.append("%s: %s" % (p.name, e))
        finally:
            if p.alive():
                p.kill()
            p.cleanup()


# ---- HAProxy ------------------------------------------------------------------------------

HAPROXY_CFG = """\
# Written by tests/k8s/test_multipod.py: a stand-in for the ClusterIP Service in front of
# the sandbox-host pods. Layer 4 like kube-proxy; the HTTP check on /readyz plays the
# readiness probe (a pod answering 503 leaves the endpoints).
global
    maxconn 256
    stats socket {sock} mode 600 level admin

defaults
    mode tcp
    timeout connect 2s
    timeout client 15s
    timeout server 15s
    timeout check 1s
    retries 2
    option redispatch

frontend service
    bind 127.0.0.1:{port}
    default_backend pods

backend pods
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter {inter_ms}ms fastinter {inter_ms}ms downinter {inter_ms}ms fall 2 rise 1
{servers}
"""


# The Service as an HTTP balancer (issue 23: "a real HAProxy that balances every request round
# robin"). In http mode HAProxy picks a server for each request; `option http-server-close`
# closes the server side after every answer and `http-reuse never` forbids handing one
# server connection to another request, so no request can ride on the connection of the one
# before and every request of one keep-alive client is balanced on its own. Each answer says
# which server gave it (X-Sh-Served-By), so a test can see where its calls landed.
HAPROXY_HTTP_CFG = """\
# Written by tests/k8s (k8s_helpers.HAProxy, mode http): the Service in front of a cluster of
# sandbox-host pods, every request balanced round robin.
global
    maxconn 512
    stats socket {sock} mode 600 level admin

defaults
    mode http
    option http-server-close
    http-reuse never
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    timeout http-request 30s
    timeout check 1s
    retries 0

frontend service
    bind 127.0.0.1:{port}
    default_backend pods

backend pods
    balance roundrobin
    http-response set-header X-Sh-Served-By %s
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter {inter_ms}ms fastinter {inter_ms}ms downinter {inter_ms}ms fall 2 rise 1
{servers}
"""
SERVED_BY = "X-Sh-Served-By"


def header(resp, name):
    """The first value of header `name` in a Resp (or None)."""
    for k, v in resp.headers:
        if k.lower() == name.lower():
            return v
    return None


class HAProxy:
    def __init__(self, pods, inter_ms=200, mode="tcp"):
        self.dir = Path(tempfile.mkdtemp(prefix="sh-k8s-haproxy-"))
        self.sock = self.dir / "admin.sock"
        self.cfg = self.dir / "haproxy.cfg"
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.names = {}
        servers = []
        for p in pods:
            self.names[p.name] = p
            servers.append("    server %s 127.0.0.1:%d check" % (p.name, p.port))
        cfg = HAPROXY_HTTP_CFG if mode == "http" else HAPROXY_CFG
        self.cfg.write_text(cfg.format(sock=self.sock, port=self.port,
                                               inter_ms=inter_ms, servers="\n".join(servers)))
        self.log_path = self.dir / "haproxy.log"
        self.log = open(self.log_path, "wb")
        # -db: stay in the foreground, so the pid we hold is HAProxy's own.
        self.proc = subprocess.Popen([haproxy_bin(), "-db", "-f", str(self.cfg)],
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        try:
            wait_until(self._listening, START_TIMEOUT, what="haproxy to listen")
            wait_until(lambda: all(s == "UP" for s in self.states().values()), START_TIMEOUT,
                       what="every server UP in haproxy")
        except AssertionError as e:
            self.stop()
            raise AssertionError("%s; haproxy output:\n%s" % (e, self.output()))

    def _listening(self):
        if self.proc.poll() is not None:
            raise AssertionError("haproxy exited with %s:\n%s" % (self.proc.returncode,
                                                                  self.output()))
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return self.sock.exists()
        except OSError:
            return False

    def output(self):
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except FileNotFoundError:
            return ""

    def admin(self, command):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect(str(self.sock))
            s.sendall(command.encode() + b"\n")
            out = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                out += d
            return out.decode(errors="replace")
        finally:
            s.close()

    def states(self):
        """{server name: status} of the backend, from `show stat` ("UP", "DOWN", ...)."""
        lines = self.admin("show stat").splitlines()
        if not lines or not lines[0].startswith("# "):
            return {}
        head = lines[0][2:].split(",")
        px, sv, st = head.index("pxname"), head.index("svname"), head.index("status")
        out = {}
        for ln in lines[1:]:
            f = ln.split(",")
            if len(f) > st and f[px] == "pods" and f[sv] in self.names:
                out[f[sv]] = f[st].split(" ")[0]
        return out

    def counters(self, field="stot"):
        """{server name: int} of one `show stat` column of the backend (stot: sessions, i.e.
        requests in http-server-close mode; hrsp_2xx: 2xx answers; ...)."""
        lines = self.admin("show stat").splitlines()
        if not lines or not lines[0].startswith("# "):
            return {}
        head = lines[0][2:].split(",")
        px, sv, col = head.index("pxname"), head.index("svname"), head.index(field)
        out = {}
        for ln in lines[1:]:
            f = ln.split(",")
            if len(f) > col and f[px] == "pods" and f[sv] in self.names:
                out[f[sv]] = int(f[col] or 0)
        return out

    def wait_state(self, name, state, timeout=10.0):
        wait_until(lambda: self.states().get(name) == state, timeout,
                   what="haproxy to mark %s %s (states: %s)" % (name, state, self.states()))

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(STOP_TIMEOUT)
        self.log.close()

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)
