"""A cluster of sandbox-host pods for tests/k8s (issue 23, OPENSANDBOX.md section 1): three
daemons that know each other (SANDBOX_HOST_PEERS=static:<every pod's url>: a pod recognises
itself by the instance in its own /healthz), one shared snapshot root, behind a real HAProxy
balancing every request round robin (k8s_helpers.HAProxy, mode http). Also the fakes the
fault tests need: a peer that answers /healthz and then never answers anything else, and a
listener that records every connection made to it.

Python stdlib only. Everything listens on 127.0.0.1 and is owned by the test; every process is
stopped by its pid, every directory removed, every thread joined with a bound.
"""
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contract"))
from oslib import SDK_DEFAULT_CREATE  # noqa: E402  (the SDK's create body, as the contract's)
from k8s_helpers import (HAProxy, Pod, REQ_TIMEOUT, SERVED_BY, free_port, header, request,
                         stop_pods, wait_until)

HOP_HEADER = "X-Sandbox-Host-Hop"
ID_RE = re.compile(r"[0-9a-f]{40}")
TOKEN_LEN = 8
INTERVAL_MS = 300
PEER_TIMEOUT_MS = 2000
# What "within a discovery period" and "within the peer timeout" may take on a busy CI
# machine: the bound plus generous slack (never asserted as a duration, only as a deadline).
SLACK = 5.0



def served_by(r):
    return header(r, SERVED_BY)


def mfilter(md):
    """The SDK's encoding of a metadata filter (as tests/contract/test_os_lifecycle.py)."""
    return urllib.parse.quote("&".join("%s=%s" % kv for kv in md.items()), safe="")


def q(s):
    return urllib.parse.quote(s, safe="")


def expect(r, status, code=None):
    assert r.status == status, "expected %d %s, got %r" % (status, code or "", r)
    if code is not None:
        assert r.json().get("code") == code, r
    if r.body and (header(r, "Content-Type") or "").startswith("application/json"):
        return r.json()
    return None


def fake_id(token):
    """A well-formed id naming `token` (8 hex) that no pod ever minted."""
    return token + secrets.token_hex(16)


# ---- the cluster --------------------------------------------------------------------------


class Cluster:
    """n pods with static peers (each other, plus `extra_peers` urls), a shared snapshot
    root, `env` for every pod and `pod_env[i]` for pod i, behind HAProxy in http mode (none
    when `balancer` is false); `bin`: the daemon (default SH_BIN), `base`: where its
    directories go (default the temp dir).
    wait_peers: wait (bounded) until every pod's /healthz shows `cluster.peers` equal to the
    number of other peers (n - 1 + len(extra_peers)) before returning."""

    def __init__(self, n=3, uid_bases=(384000, 385000, 386000), env=None, pod_env=None,
                 extra_peers=(), wait_peers=True, inter_ms=200, bin=None, base=None,
                 balancer=True):
        self.bin = bin
        self.dir = Path(tempfile.mkdtemp(prefix="sh-k8s-cluster-", dir=base))
        self.snapshots = self.dir / "snapshots"
        self.snapshots.mkdir()
        self.pods = []
        self.lb = None
        self.extra_peers = list(extra_peers)
        try:
            self._start_pods(n, uid_bases, env or {}, pod_env or {})
            if balancer:
                self.lb = HAProxy(self.pods, inter_ms=inter_ms, mode="http")
            if wait_peers:
                self.wait_peers()
        except BaseException:
            self.close()
            raise

    def _start_pods(self, n, uid_bases, env, pod_env):
        # Every pod must know every url before the first starts: the ports are picked first,
        # and a lost race for one (another process took it) starts the whole set again.
        last = None
        for _ in range(3):
            ports = [free_port() for _ in range(n)]
            urls = ["http://127.0.0.1:%d" % p for p in ports]
            peers = "static:" + ",".join(urls + self.extra_peers)
            try:
                for i in range(n):
                    root = self.dir / ("pod%d" % i)
                    shutil.rmtree(root, ignore_errors=True)
                    root.mkdir()
                    e = {"SANDBOX_HOST_PEERS": peers,
                         "SANDBOX_HOST_PEERS_INTERVAL_MS": str(INTERVAL_MS),
                         "SANDBOX_HOST_PEER_TIMEOUT_MS": str(PEER_TIMEOUT_MS),
                         "SANDBOX_HOST_SNAPSHOT_ROOT": str(self.snapshots),
                         "SANDBOX_HOST_IMAGE_PULL": "off",
                         "SANDBOX_HOST_EGRESS": "off"}
                    e.update(env)
                    e.update(pod_env.get(i, {}))
                    self.pods.append(Pod("pod%d" % i, uid_bases[i], root=root, port=ports[i],
                                         env=e, bin=self.bin))
                return
            except RuntimeError as ex:
                last = ex
                self._stop_pods([])
        raise RuntimeError("the cluster did not start: %s" % last)

    @property
    def url(self):
        return self.lb.url

    def pod(self, name):
        return next(p for p in self.pods if p.name == name)

    def live(self):
        return [p for p in self.pods if p.alive()]

    # -- what each pod says of itself ---------------------------------------------------
    def health(self, pod):
        r = request(pod.url, "GET", "/healthz")
        assert r.status == 200, r
        return r.json()

    def cluster_of(self, pod):
        """The `cluster` object of the pod's /healthz, or None (a binary without it)."""
        return self.health(pod).get("cluster")

    def token(self, pod):
        c = self.cluster_of(pod)
        assert c and isinstance(c.get("token"), str), "no cluster.token in %s's /healthz" % pod.name
        return c["token"]

    def tokens(self):
        return {self.token(p): p for p in self.live()}

    def owner(self, sid):
        """The live pod whose token begins the id."""
        for p in self.live():
            if sid.startswith(self.token(p)):
                return p
        raise AssertionError("no live pod owns %s" % sid)

    def not_owner(self, sid):
        return [p for p in self.live() if not sid.startswith(self.token(p))]

    def wait_peers(self, want=None, pods=None, timeout=None):
        want = len(self.pods) - 1 + len(self.extra_peers) if want is None else want
        pods = self.live() if pods is None else pods
        timeout = timeout or (3 * INTERVAL_MS / 1000 + PEER_TIMEOUT_MS / 1000 + SLACK)

        def seen():
            got = {}
            for p in pods:
                c = self.cluster_of(p)
                got[p.name] = None if c is None else c.get("peers")
            return got if all(v == want for v in got.values()) else None

        try:
            wait_until(seen, timeout, interval=0.1)
        except AssertionError:
            got = {p.name: (self.cluster_of(p) or {}).get("peers") for p in pods}
            raise AssertionError("every pod should see %d peers, saw %r (a daemon without the "
                                 "cluster of issue 23 has no cluster object)" % (want, got))

    # -- teardown ------------------------------------------------------------------------
    def _stop_pods(self, problems):
        stop_pods(self.pods, problems)
        self.pods = []

    def close(self):
        """Stop HAProxy and every pod by pid, remove every directory; returns the problems
        (a pod that did not exit 0 on SIGTERM)."""
        problems = []
        if self.lb is not None:
            try:
                self.lb.stop()
            finally:
                self.lb.cleanup()
            self.lb = None
        self._stop_pods(problems)
        shutil.rmtree(self.dir, ignore_errors=True)
        return problems


# ---- a /v1 client -------------------------------------------------------------------------


class V1:
    """Calls on /v1 of one base url (a pod's or HAProxy's), each on a fresh connection."""

    def __init__(self, url, api_key=None):
        self.url = url
        self.api_key = api_key

    def call(self, method, path, body=None, headers=None, timeout=REQ_TIMEOUT):
        h = dict(headers or {})
        if self.api_key is not None:
            h.setdefault("OPEN-SANDBOX-API-KEY", self.api_key)
        return request(self.url, method, path, body=body, timeout=timeout, headers=h)

    def create(self, **fields):
        b = dict(SDK_DEFAULT_CREATE)
        b.update(fields)
        return self.call("POST", "/v1/sandboxes", body=b, timeout=60)

    def create_ok(self, **fields):
        r = self.create(**fields)
        j = expect(r, 202)
        assert j["status"]["state"] == "Running", j
        assert ID_RE.fullmatch(j["id"]), "ids are 40 hex: %r" % j["id"]
        return j, r

    def get(self, sid, **kw):
        return self.call("GET", "/v1/sandboxes/" + q(sid), **kw)

    def delete(self, sid, **kw):
        return self.call("DELETE", "/v1/sandboxes/" + q(sid), **kw)

    def listing(self, query="", **kw):
        r = self.call("GET", "/v1/sandboxes" + ("?" + query if query else ""), **kw)
        return expect(r, 200)

    def execd(self, sid, method, sub, **kw):
        return self.call(method, "/v1/sandboxes/%s/proxy/44772%s" % (q(sid), sub), **kw)

    def wait_state(self, sid, want, timeout=30.0):
        def st():
            j = expect(self.get(sid), 200)
            return j if j["status"]["state"] == want else None
        return wait_until(st, timeout, interval=0.05, what="%s to be %s" % (sid, want))

    def kill_quietly(self, sid):
        try:
            self.delete(sid, timeout=REQ_TIMEOUT)
        except OSError:
            pass


def ids_of(page):
    return [x["id"] for x in page["items"]]


class Sse:
    """A streamed execd command (POST …/proxy/44772/command), read event by event: events are
    one JSON object a line, separated by a blank line (OPENSANDBOX.md section 3.1). Every read
    is bounded by the socket timeout."""

    def __init__(self, url, sid, body, read_timeout=10.0, headers=None):
        m = re.fullmatch(r"http://([0-9.]+):(\d+)", url)
        self.conn = http.client.HTTPConnection(m.group(1), int(m.group(2)), timeout=read_timeout)
        data = json.dumps(body).encode()
        h = {"Content-Type": "application/json", "Accept": "text/event-stream",
             "Content-Length": str(len(data))}
        h.update(headers or {})
        self.conn.request("POST", "/v1/sandboxes/%s/proxy/44772/command" % q(sid), body=data,
                          headers=h)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = self.resp.getheaders()
        self.events = []
        self.cut = False
        self.bytes = 0
        self._buf = b""
        self._eof = False

    def next_event(self):
        """The next event (a dict), or None at the end of the stream; a socket timeout
        propagates (the stream hung)."""
        while True:
            i = self._buf.find(b"\n\n")
            if i >= 0:
                raw, self._buf = self._buf[:i], self._buf[i + 2:]
                ev = json.loads(raw.decode("utf-8"))
                self.events.append(ev)
                return ev
            if self._eof:
                return None
            try:
                d = self.resp.read1(65536)
            except (http.client.IncompleteRead, ConnectionError):
                d = b""
                self.cut = True
            self.bytes += len(d)
            if not d:
                self._eof = True
            self._buf += d

    def read_all(self):
        while self.next_event() is not None:
            pass
        self.close()
        return self

    def types(self):
        return [e["type"] for e in self.events]

    def lines(self, kind="stdout"):
        """The texts of the `kind` events: one line each, without its newline."""
        return [e.get("text", "") for e in self.events if e["type"] == kind]

    def close(self):
        try:
            self.conn.close()
        except OSError:
            pass


# ---- fakes --------------------------------------------------------------------------------


class _Server:
    """A thread accepting on 127.0.0.1:<free port>, handing each connection to handle()."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.lock = threading.Lock()
        self.conns = []
        self.accepted = 0
        self._stop = threading.Event()
        self._threads = []
        self._t = threading.Thread(target=self._accept, daemon=True)
        self._t.start()

    def _accept(self):
        while not self._stop.is_set():
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.accepted += 1
                self.conns.append(c)
            t = threading.Thread(target=self._serve, args=(c,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, c):
        try:
            self.handle(c)
        except OSError:
            pass

    def handle(self, c):
        pass

    def close(self):
        self._stop.set()
        self._t.join(5)
        self.sock.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.close()
                except OSError:
                    pass
        for t in self._threads:
            t.join(5)


class Listener(_Server):
    """Records every connection made to it and closes it: a test asserts `accepted == 0`
    (nothing a client sent made a pod connect here)."""

    def handle(self, c):
        c.close()


def read_head(c, stop, limit=65536):
    """The request head (bytes up to the blank line) read from c, or None when the peer closed
    or `stop` was set first."""
    c.settimeout(0.1)
    buf = b""
    while b"\r\n\r\n" not in buf:
        if stop.is_set() or len(buf) > limit:
            return None
        try:
            d = c.recv(4096)
        except socket.timeout:
            continue
        if not d:
            return None
        buf += d
    return buf.split(b"\r\n\r\n", 1)[0].decode("latin-1")


class FakePeer(_Server):
    """A peer that answers GET /healthz like a pod of the cluster (a `cluster` object with its
    own token and instance, accepting, `room`), and accepts every other request and never
    answers it: the owner that does not answer. `held` lists (method, target, headers dict)
    of the requests it is holding or held; `healthz` counts its probes."""

    def __init__(self, token=None, room=10, accepting=True):
        self.token = token or secrets.token_hex(4)
        self.instance = secrets.token_hex(16)
        self.room = room
        self.accepting = accepting
        self.held = []
        self.healthz = 0
        self.open_held = 0
        super().__init__()

    def health_body(self):
        return json.dumps({"status": "ok", "version": "fake",
                           "cluster": {"token": self.token, "instance": self.instance,
                                       "accepting": self.accepting, "room": self.room,
                                       "in_use": 0, "peers": 0}}).encode()

    def handle(self, c):
        while not self._stop.is_set():
            head = read_head(c, self._stop)
            if head is None:
                break
            lines = head.split("\r\n")
            method, target = lines[0].split(" ")[:2]
            hdrs = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                hdrs[k.strip().lower()] = v.strip()
            if method == "GET" and target == "/healthz":
                body = self.health_body()
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                with self.lock:
                    self.healthz += 1
                if hdrs.get("connection", "").lower() == "close":
                    break
                continue
            with self.lock:
                self.held.append((method, target, hdrs))
                self.open_held += 1
            try:
                # never answer: hold the connection until the pod gives up or the test ends
                while not self._stop.is_set():
                    try:
                        c.settimeout(0.1)
                        if not c.recv(65536):
                            break
                    except socket.timeout:
                        continue
            finally:
                with self.lock:
                    self.open_held -= 1
            break
        c.close()

    def held_for(self, fragment):
        with self.lock:
            return [h for h in self.held if fragment in h[1]]


# ---- DNS: the headless Service's records --------------------------------------------------


def dnsmasq_bin():
    return shutil.which("dnsmasq") or shutil.which("dnsmasq", path="/usr/sbin:/sbin")


class DnsServer:
    """dnsmasq on 127.0.0.1:<free port> answering A records of `name` from a hosts file (the
    headless Service: one address a ready pod) and nothing else (no upstream, TTL 0).
    set(addrs) rewrites the records and makes dnsmasq read them again (SIGHUP)."""

    def __init__(self, name, addrs=()):
        self.name = name
        self.dir = Path(tempfile.mkdtemp(prefix="sh-k8s-dns-"))
        os.chmod(self.dir, 0o755)  # dnsmasq reads the hosts file again as its own user
        self.hosts = self.dir / "hosts"
        self.log_path = self.dir / "dnsmasq.log"
        self._write(addrs)
        last = ""
        for _ in range(3):
            self.port = free_port()
            self.log = open(self.log_path, "wb")
            # -k: stay in the foreground, so the pid we hold is dnsmasq's own
            self.proc = subprocess.Popen(
                [dnsmasq_bin(), "-k", "--no-resolv", "--no-hosts", "--no-poll",
                 "--port=%d" % self.port, "--listen-address=127.0.0.1", "--bind-interfaces",
                 "--addn-hosts=%s" % self.hosts, "--local-ttl=0", "--neg-ttl=0",
                 "--cache-size=0", "--pid-file=", "--log-facility=-"],
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
            try:
                wait_until(lambda: self.proc.poll() is not None or self._answers(),
                           START_TIMEOUT_DNS, interval=0.05, what="dnsmasq to answer")
            except AssertionError:
                pass
            if self.proc.poll() is None and self._answers():
                return
            last = self.output()
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        raise RuntimeError("dnsmasq did not start:\n" + last)

    @property
    def resolver(self):
        return "127.0.0.1:%d" % self.port

    def _write(self, addrs):
        tmp = self.dir / "hosts.new"
        tmp.write_text("".join("%s %s\n" % (a, self.name) for a in addrs))
        os.chmod(tmp, 0o644)
        os.replace(tmp, self.hosts)
        self.addrs = list(addrs)

    def set(self, addrs):
        self._write(addrs)
        os.kill(self.proc.pid, signal.SIGHUP)
        wait_until(lambda: sorted(self.resolve()) == sorted(self.addrs), 5, interval=0.05,
                   what="dnsmasq to answer %r" % (self.addrs,))

    def _answers(self):
        try:
            return sorted(self.resolve()) == sorted(self.addrs)
        except OSError:
            return False

    def resolve(self, name=None, timeout=1.0):
        """The A records dnsmasq answers for `name` (a plain DNS query over UDP)."""
        return dns_query_a("127.0.0.1", self.port, name or self.name, timeout)

    def output(self):
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except FileNotFoundError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.log.close()

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


START_TIMEOUT_DNS = 5.0


def dns_query_a(server, port, name, timeout=1.0):
    """The IPv4 addresses of the A records in the answer to one query (RFC 1035 over UDP)."""
    qid = secrets.randbelow(65536)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(q, (server, port))
        data, _ = s.recvfrom(4096)
    finally:
        s.close()
    rid, flags, qd, an = struct.unpack(">HHHH", data[:8])
    if rid != qid:
        raise OSError("a DNS answer to another query")
    i = 12
    for _ in range(qd):  # skip the question
        while data[i]:
            i += data[i] + 1
        i += 5
    out = []
    for _ in range(an):
        if data[i] & 0xC0 == 0xC0:
            i += 2
        else:
            while data[i]:
                i += data[i] + 1
            i += 1
        typ, _cls, _ttl, rdlen = struct.unpack(">HHIH", data[i:i + 10])
        i += 10
        if typ == 1 and rdlen == 4:
            out.append(socket.inet_ntoa(data[i:i + 4]))
        i += rdlen
    return out
