"""The network harness of issue 24's tests (test_os_egress_*.py): a "pod" and an "internet"
the test makes, the daemon inside the pod, and a probe that runs inside the sandboxes.

    internet (netns shi-<pid>)                        pod (netns shp-<pid>)
    dn0 198.51.100.2/24  <------- veth ------->  up0 198.51.100.1/24, default via .2
    lo: 192.0.2.10 (pypi.org), 203.0.113.20         lo: 127.0.0.1, the daemon (0.0.0.0:port)
        (www.github.com), 203.0.113.30/.31            a "pod service" on 0.0.0.0:8081
        (*.example.test, example.test), ...         the daemon's links to its sandboxes
    dnsmasq on 198.51.100.2:53, HTTP on :80,
    an echo/hold server on :7000

Only TEST-NET addresses are on the interfaces between the namespaces; the internet's lo
also holds the addresses the rebinding tests point names at (169.254.169.254, 10.1.2.3),
so that "unreachable" there is the daemon's doing, not an address nothing answers: they
never leave the test's own namespace. Nothing here reaches an address outside the two
namespaces: the pod's only route out is the veth to the internet, which has no route out.

Every name carries the test process's pid; World.close() kills what it started by pid and
deletes the two namespaces by name, also when a test failed (the fixtures call it).

The test reaches the daemon's 127.0.0.1 listener inside the pod: `enter()` moves the calling
thread (the main one: pytest runs tests there) into the pod's network namespace with
setns(2) (ctypes: Python 3.11 has no os.setns), and `leave()` back; every socket made
meanwhile (oslib's and sselib's clients alike) is the pod's, unchanged code.

The SDK tier's egress file (tests/opensandbox/egress.test.mjs) runs inside the same world:

    python3 tests/contract/egresslib.py run-in-pod -- node --test tests/opensandbox/egress.test.mjs

makes it, runs the command in the pod (nsenter) with SH_EGRESS_NETNS and SH_EGRESS_WORLD (the
addresses, names and operator deny list as JSON) in its environment, and removes it afterwards
whatever happened (SIGTERM included): anything the command left in the pod is killed by pid,
then World.close(). Where the world cannot be made (not root, no namespaces, dnsmasq or
nftables) the command runs outside with SH_EGRESS_SKIP=<why>, and the file skips with it.
"""
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

import oslib
import shlib
import sselib

CLONE_NEWNET = 0x40000000
DNSMASQ = shutil.which("dnsmasq") or shutil.which("dnsmasq", path="/usr/sbin:/sbin")
IP = shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin")
NSENTER = shutil.which("nsenter")

POD_ADDR = "198.51.100.1"
INET_ADDR = "198.51.100.2"
UPSTREAM = INET_ADDR + ":53"

# the test internet's names (dnsmasq's hosts file) and the addresses on its lo
PYPI = "192.0.2.10"
GITHUB = "203.0.113.20"
EXAMPLE_SUB = "203.0.113.30"  # a.example.test, b.example.test
EXAMPLE_APEX = "203.0.113.31"  # example.test itself
MIRROR = "192.0.2.50"  # mirror.test: on the operator's allow list
BLOCKED = "192.0.2.60"  # blocked.test: a name on the operator's deny list
UNNAMED = "192.0.2.98"  # no name: reached by a CIDR rule
OP_DENIED = "192.0.2.99"  # no name: on the operator's deny list (a /32)
METADATA = "169.254.169.254"  # rebind.test
PRIVATE = "10.1.2.3"  # private.test
SHORT = "192.0.2.70"  # short.test: an answer with a TTL of 1 s (the daemon keeps it 5 s)
BIG_NAME = "big.test"  # an answer of 255 A records (an oversized answer)
BIG_ADDRS = (["192.0.2.%d" % i for i in range(100, 255)] +
             ["203.0.113.%d" % i for i in range(100, 200)])
HOSTS = [
    (PYPI, "pypi.org"), (GITHUB, "www.github.com"), (EXAMPLE_SUB, "a.example.test"),
    (EXAMPLE_SUB, "b.example.test"), (EXAMPLE_APEX, "example.test"), (MIRROR, "mirror.test"),
    (BLOCKED, "blocked.test"), (METADATA, "rebind.test"), (PRIVATE, "private.test"),
    (POD_ADDR, "pod.test"),
] + [(a, BIG_NAME) for a in BIG_ADDRS]
INET_LO = [PYPI, GITHUB, EXAMPLE_SUB, EXAMPLE_APEX, MIRROR, BLOCKED, UNNAMED, OP_DENIED,
           METADATA, PRIVATE, SHORT]
HTTP_PORT = 80
ECHO_PORT = 7000
POD_SERVICE_PORT = 8081
DNS_TTL = 300  # long enough never to run out during a test (the daemon clamps to 5 s..1 h)

# The daemon's defaults (docs/configuration.md) plus the test's own operator entries.
DEFAULT_DENY = ("0.0.0.0/8,127.0.0.0/8,169.254.0.0/16,10.0.0.0/8,172.16.0.0/12,"
                "192.168.0.0/16,100.64.0.0/10,224.0.0.0/4,240.0.0.0/4,255.255.255.255")
OPERATOR_DENY = DEFAULT_DENY + ",%s/32,blocked.test" % OP_DENIED
OPERATOR_ALLOW = "mirror.test"
CONN_MAX = 32  # SANDBOX_HOST_EGRESS_CONN_MAX of the module daemon

SERVER = textwrap.dedent(r'''
    import selectors, socket, sys
    # argv: [http_port, echo_port or 0, name]; "hello from <local address>" on HTTP, bytes
    # echoed (and the connection held) on the echo port. One thread, a selector: thousands of
    # held connections cost nothing.
    http_port, echo_port, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    sel = selectors.DefaultSelector()
    def listen(port, kind):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port)); s.listen(4096); s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, ("listen", kind))
    listen(http_port, "http")
    if echo_port:
        listen(echo_port, "echo")
    print("ready", flush=True)
    bufs = {}
    while True:
        for key, _ in sel.select():
            what, kind = key.data
            s = key.fileobj
            if what == "listen":
                try:
                    c, _ = s.accept()
                except OSError:
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ, ("conn", kind))
                bufs[c] = b""
                continue
            try:
                d = s.recv(65536)
            except OSError:
                d = b""
            if not d:
                sel.unregister(s); bufs.pop(s, None); s.close(); continue
            if kind == "echo":
                try:
                    s.sendall(d)
                except OSError:
                    sel.unregister(s); bufs.pop(s, None); s.close()
                continue
            bufs[s] += d
            if b"\r\n\r\n" in bufs[s] or len(bufs[s]) > 8192:
                body = ("hello from %s %s" % (name, s.getsockname()[0])).encode()
                try:
                    s.setblocking(True); s.settimeout(2)
                    s.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s"
                              % (len(body), body))
                except OSError:
                    pass
                sel.unregister(s); bufs.pop(s, None); s.close()
''')

# The probe: runs inside a sandbox (the image's python3), one mode per call, prints JSON
# lines (the last one is the result). Every network wait has a timeout (a dropped packet
# fails within ~3 s); every wait for a signal file is bounded too.
PROBE = textwrap.dedent(r'''
    import errno, fcntl, json, os, random, select, socket, struct, sys, time
    T = 3.0
    def out(**kw):
        print(json.dumps(kw), flush=True)
    def ename(e):
        if isinstance(e, socket.timeout):
            return "timeout"
        if isinstance(e, socket.gaierror):
            return "gaierror:%d" % e.errno
        if isinstance(e, OSError) and e.errno:
            return errno.errorcode.get(e.errno, str(e.errno))
        return type(e).__name__
    def gateway():
        with open("/etc/resolv.conf") as f:
            for ln in f:
                p = ln.split()
                if len(p) >= 2 and p[0] == "nameserver":
                    return p[1]
        return None
    def wait_file(path, limit=90.0):
        end = time.monotonic() + limit
        while not os.path.exists(path) and time.monotonic() < end:
            time.sleep(0.02)
        return os.path.exists(path)
    def query(name, qtype=1, qid=None):
        qid = random.randrange(65536) if qid is None else qid
        q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
        for label in name.rstrip(".").split("."):
            q += bytes([len(label)]) + label.encode()
        return qid, q + b"\x00" + struct.pack(">HH", qtype, 1)
    def parse(data):
        rid, flags, qd, an = struct.unpack(">HHHH", data[:8])
        i = 12
        for _ in range(qd):
            while data[i]:
                i += data[i] + 1
            i += 5
        addrs = []
        for _ in range(an):
            if data[i] & 0xC0 == 0xC0:
                i += 2
            else:
                while data[i]:
                    i += data[i] + 1
                i += 1
            typ, _c, _t, rdlen = struct.unpack(">HHIH", data[i:i + 10])
            i += 10
            if typ == 1 and rdlen == 4:
                addrs.append(socket.inet_ntoa(data[i:i + 4]))
            i += rdlen
        return {"id": rid, "rcode": flags & 0xF, "tc": bool(flags & 0x200), "an": an,
                "addrs": addrs}
    def recv_exact(s, n):
        b = b""
        while len(b) < n:
            d = s.recv(n - len(b))
            if not d:
                raise ConnectionResetError(errno.ECONNRESET, "closed")
            b += d
        return b
    def dns(name, server=None, port=53, qtype=1, tcp=False):
        server = server or gateway()
        qid, q = query(name, qtype)
        try:
            if tcp:
                s = socket.create_connection((server, port), timeout=T)
                s.sendall(struct.pack(">H", len(q)) + q)
                n = struct.unpack(">H", recv_exact(s, 2))[0]
                data = recv_exact(s, n)
            else:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.settimeout(T)
                s.sendto(q, (server, port))
                data, _ = s.recvfrom(65536)
            s.close()
        except Exception as e:
            return {"ok": False, "err": ename(e)}
        r = parse(data)
        r["ok"] = r["id"] == qid
        return r
    def http(host, port=80):
        try:
            s = socket.create_connection((host, port), timeout=T)
            s.sendall(b"GET / HTTP/1.0\r\nHost: " + host.encode() + b"\r\n\r\n")
            data = b""
            while True:
                d = s.recv(4096)
                if not d:
                    break
                data += d
            s.close()
        except Exception as e:
            return {"ok": False, "err": ename(e)}
        body = data.partition(b"\r\n\r\n")[2].decode("utf-8", "replace")
        return {"ok": data.startswith(b"HTTP/1.0 200"), "body": body}
    def ifaces():
        res = {}
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _, name in socket.if_nameindex():
            try:
                r = fcntl.ioctl(s, 0x8915, struct.pack("256s", name.encode()[:15]))
                res[name] = socket.inet_ntoa(r[20:24])
            except OSError:
                res[name] = None
        return res
    def many(host, port, n):
        """n connections at once (non-blocking connects, one deadline): the connected ones."""
        socks, done = [], []
        for _ in range(n):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex((host, port))
            socks.append(s)
        end = time.monotonic() + T
        pending = list(socks)
        while pending and time.monotonic() < end:
            _, w, _ = select.select([], pending, [], max(0.0, end - time.monotonic()))
            for s in w:
                pending.remove(s)
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    done.append(s)
        for s in pending:
            s.close()
        return done
    mode, a = sys.argv[1], sys.argv[2:]
    if mode == "resolve":
        try:
            out(ok=True, addrs=sorted({i[4][0] for i in socket.getaddrinfo(
                a[0], None, socket.AF_INET, socket.SOCK_STREAM)}))
        except Exception as e:
            out(ok=False, err=ename(e))
    elif mode == "dns":
        out(**dns(a[0], a[1] if len(a) > 1 and a[1] != "-" else None,
                  int(a[2]) if len(a) > 2 else 53, int(a[3]) if len(a) > 3 else 1,
                  len(a) > 4 and a[4] == "tcp"))
    elif mode == "http":
        out(**http(a[0], int(a[1]) if len(a) > 1 else 80))
    elif mode == "connect":
        try:
            socket.create_connection((a[0], int(a[1])), timeout=T).close()
            out(ok=True)
        except Exception as e:
            out(ok=False, err=ename(e))
    elif mode == "ifaces":
        out(ok=True, ifaces=ifaces())
    elif mode == "raw":
        res = {}
        for label, args in (("packet", (socket.AF_PACKET, socket.SOCK_RAW, 0x0300)),
                            ("packet_dgram", (socket.AF_PACKET, socket.SOCK_DGRAM, 0x0300)),
                            ("raw_icmp", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
                            ("raw_ip", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW))):
            try:
                socket.socket(*args).close()
                res[label] = "ok"
            except Exception as e:
                res[label] = ename(e)
        out(ok=True, raw=res)
    elif mode == "setaddr":
        # SIOCSIFADDR, SIOCADDRT, SIOCSIFFLAGS (down) on eth0: what `ip` would ask for
        res = {}
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sin = lambda ad: struct.pack("HH4s8s", socket.AF_INET, 0, socket.inet_aton(ad), b"\0" * 8)
        try:
            fcntl.ioctl(s, 0x8916, struct.pack("16s16s", b"eth0", sin(a[0])) + b"\0" * 8)
            res["addr"] = "ok"
        except Exception as e:
            res["addr"] = ename(e)
        try:
            rt = struct.pack("L16s16s16sH", 0, sin("0.0.0.0"), sin("203.0.113.0"),
                             sin("255.255.255.0"), 0x1) + b"\0" * 80
            fcntl.ioctl(s, 0x890B, rt)
            res["route"] = "ok"
        except Exception as e:
            res["route"] = ename(e)
        try:
            fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"eth0", 0) + b"\0" * 22)
            res["down"] = "ok"
        except Exception as e:
            res["down"] = ename(e)
        out(ok=True, set=res)
    elif mode == "echo":
        # connect, one echo, say "open", wait for the go file, then one more echo
        host, port, go = a[0], int(a[1]), a[2]
        try:
            s = socket.create_connection((host, port), timeout=T)
            s.sendall(b"one")
            first = recv_exact(s, 3)
        except Exception as e:
            out(stage="open", ok=False, err=ename(e))
            sys.exit(0)
        out(stage="open", ok=first == b"one")
        if not wait_file(go):
            out(stage="after", ok=False, err="no go file")
            sys.exit(0)
        try:
            s.sendall(b"two")
            out(stage="after", ok=recv_exact(s, 3) == b"two")
        except Exception as e:
            out(stage="after", ok=False, err=ename(e))
    elif mode == "hold":
        # n connections at once, held until the stop file: how many connected
        host, port, n, stop = a[0], int(a[1]), int(a[2]), a[3]
        done = many(host, port, n)
        out(stage="held", ok=True, connected=len(done))
        wait_file(stop)
        out(stage="done", ok=True)
    elif mode == "slowtcp":
        # n TCP connections to the DNS proxy that send one byte of a length and stop
        n, stop = int(a[0]), a[1]
        done = many(gateway(), 53, n)
        for s in done:
            try:
                s.send(b"\x00")
            except OSError:
                pass
        out(stage="held", ok=True, connected=len(done))
        wait_file(stop)
        out(stage="done", ok=True)
    elif mode == "flood":
        # UDP queries to the proxy as fast as they go out, answers drained, until the stop
        # file (or n sent); names alternate between an allowed, a denied and a big one
        # (and at most 20 s: a backstop, should the stop file never come)
        n, stop, names = int(a[0]), a[1], a[2].split(",")
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        s.connect((gateway(), 53))
        sent = answered = 0
        out(stage="flooding", ok=True)
        end = time.monotonic() + 20
        while sent < n and not (sent % 256 == 0 and (os.path.exists(stop) or
                                                     time.monotonic() > end)):
            try:
                s.send(query(names[sent % len(names)])[1])
                sent += 1
            except BlockingIOError:
                select.select([s], [s], [], 0.05)
            except OSError:
                sent += 1
            while True:
                try:
                    s.recv(65536)
                    answered += 1
                except OSError:
                    break
        out(stage="done", ok=True, sent=sent, answered=answered)
    elif mode == "spoof":
        # a DNS query (UDP) and a TCP connect with another source address (IP_FREEBIND: no
        # privilege needed to bind an address the sandbox does not have)
        src, name, host, port = a[0], a[1], a[2], int(a[3])
        res = {}
        step = "bind"
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_IP, 15, 1)
            s.bind((src, 0))
            s.settimeout(1.0)
            step = "send"
            s.sendto(query(name)[1], (gateway(), 53))
            step = "recv"
            s.recvfrom(4096)
            res["dns"] = "answered"
        except Exception as e:
            res["dns"] = step + ":" + ename(e)
        try:
            t = socket.socket()
            t.setsockopt(socket.SOL_IP, 15, 1)
            t.bind((src, 0))
            t.settimeout(T)
            t.connect((host, port))
            res["tcp"] = "ok"
        except Exception as e:
            res["tcp"] = ename(e)
        out(ok=True, spoof=res)
    elif mode == "listen":
        port, stop = int(a[0]), a[1]
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("0.0.0.0", port))
        ls.listen(16)
        ls.settimeout(0.05)
        out(stage="listening", ok=True)
        got = 0
        end = time.monotonic() + 90
        while not os.path.exists(stop) and time.monotonic() < end:
            try:
                c, _ = ls.accept()
                got += 1
                c.close()
            except socket.timeout:
                pass
        out(stage="done", ok=True, accepted=got)
    else:
        out(ok=False, err="unknown mode " + mode)
''')


# ---- namespaces ---------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def setns(path):
    """Move the calling thread into the network namespace at `path`."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns %s: %s" % (path, os.strerror(e)))
    finally:
        os.close(fd)


def run(args, timeout=10, check=True):
    r = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s -> %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return r


def requirements():
    """Why this machine cannot run the network tests, or None."""
    if os.geteuid() != 0:
        return "the network tests make network namespaces and need root (CI is root)"
    for what, path in (("ip (iproute2)", IP), ("dnsmasq (dnsmasq-base)", DNSMASQ),
                       ("nsenter (util-linux)", NSENTER)):
        if not path:
            return "%s is not installed" % what
    return None


class Nft:
    """libnftables through ctypes: does the kernel take a table in the current namespace?"""

    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libnftables.so.1")
        except OSError:
            self.lib = None
            return
        self.lib.nft_ctx_new.restype = ctypes.c_void_p
        self.lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
        self.lib.nft_ctx_free.argtypes = [ctypes.c_void_p]
        self.lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        self.lib.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
        self.lib.nft_ctx_buffer_output.argtypes = [ctypes.c_void_p]
        self.lib.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
        self.lib.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
        self.lib.nft_ctx_get_output_buffer.restype = ctypes.c_char_p
        self.lib.nft_ctx_get_output_buffer.argtypes = [ctypes.c_void_p]

    def run(self, cmd):
        """One command in the calling thread's namespace: its output (RuntimeError if none)."""
        ctx = self.lib.nft_ctx_new(0)
        try:
            self.lib.nft_ctx_buffer_error(ctx)
            self.lib.nft_ctx_buffer_output(ctx)
            if self.lib.nft_run_cmd_from_buffer(ctx, cmd.encode()) != 0:
                err = self.lib.nft_ctx_get_error_buffer(ctx) or b""
                raise RuntimeError("nft %r: %s" % (cmd, err.decode(errors="replace")))
            return (self.lib.nft_ctx_get_output_buffer(ctx) or b"").decode(errors="replace")
        finally:
            self.lib.nft_ctx_free(ctx)

    def works(self, tag):
        """None when a table can be made and deleted here, else why not."""
        if self.lib is None:
            return "libnftables.so.1 is not installed"
        ctx = self.lib.nft_ctx_new(0)
        if not ctx:
            return "nft_ctx_new failed"
        try:
            self.lib.nft_ctx_buffer_error(ctx)
            self.lib.nft_ctx_buffer_output(ctx)
            for cmd in ("add table inet shprobe_%s" % tag, "delete table inet shprobe_%s" % tag):
                if self.lib.nft_run_cmd_from_buffer(ctx, cmd.encode()) != 0:
                    err = self.lib.nft_ctx_get_error_buffer(ctx) or b""
                    return "nftables: %r failed: %s" % (cmd, err.decode(errors="replace"))
            return None
        finally:
            self.lib.nft_ctx_free(ctx)


class World:
    """The two namespaces, the veth between them, the internet's servers. close() removes
    everything (by the pids and names it made); a failed start closes what it made."""

    def __init__(self):
        pid = os.getpid()
        self.pod, self.inet = "shp-%d" % pid, "shi-%d" % pid
        self.dir = tempfile.mkdtemp(prefix="sh-egress-")
        os.chmod(self.dir, 0o755)
        self.procs = []
        self.made = []
        self._home = None
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def path(self, ns):
        return "/run/netns/" + ns

    def ip(self, ns, *args):
        return run([IP, "-n", ns] + list(args))

    def in_ns(self, ns, args):
        return [NSENTER, "--net=" + self.path(ns)] + list(args)

    def _make(self):
        for ns in (self.pod, self.inet):
            run([IP, "netns", "add", ns])
            self.made.append(ns)
            self.ip(ns, "link", "set", "lo", "up")
        self.ip(self.pod, "link", "add", "up0", "type", "veth", "peer", "name", "dn0", "netns",
                self.inet)
        self.ip(self.pod, "addr", "add", POD_ADDR + "/24", "dev", "up0")
        self.ip(self.pod, "link", "set", "up0", "up")
        self.ip(self.inet, "addr", "add", INET_ADDR + "/24", "dev", "dn0")
        self.ip(self.inet, "link", "set", "dn0", "up")
        self.ip(self.pod, "route", "add", "default", "via", INET_ADDR)
        for a in INET_LO:
            self.ip(self.inet, "addr", "add", a + "/32", "dev", "lo")
        hosts = os.path.join(self.dir, "hosts")
        with open(hosts, "w") as f:
            f.write("".join("%s %s\n" % h for h in HOSTS))
        os.chmod(hosts, 0o644)
        self.dns_log = os.path.join(self.dir, "dnsmasq.log")
        self.dnsmasq = self._spawn(self.inet, [
            DNSMASQ, "-k", "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--no-poll",
            "--listen-address=" + INET_ADDR, "--bind-interfaces", "--port=53", "--user=root",
            "--pid-file=", "--log-facility=-", "--addn-hosts=" + hosts,
            "--local-ttl=%d" % DNS_TTL, "--neg-ttl=%d" % DNS_TTL, "--cache-size=0",
            "--host-record=short.test,%s,1" % SHORT],
            out=open(self.dns_log, "wb"))
        server = os.path.join(self.dir, "server.py")
        with open(server, "w") as f:
            f.write(SERVER)
        self.http = self._spawn(self.inet, ["python3", "-u", server, str(HTTP_PORT),
                                            str(ECHO_PORT), "inet"], ready=True)
        self.pod_service = self._spawn(self.pod, ["python3", "-u", server,
                                                  str(POD_SERVICE_PORT), "0", "pod"],
                                       ready=True)
        deadline = time.monotonic() + 10
        while True:
            if self.probe(self.pod, "dns", "pypi.org", INET_ADDR).get("addrs") == [PYPI]:
                break
            if self.dnsmasq.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("dnsmasq does not answer in %s: %s" % (
                    self.inet, open(self.dns_log, errors="replace").read()[-2000:]))
            time.sleep(0.05)

    def _spawn(self, ns, args, ready=False, out=None):
        p = subprocess.Popen(self.in_ns(ns, args), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE if ready else (out or subprocess.DEVNULL),
                             stderr=subprocess.STDOUT if out else subprocess.PIPE)
        self.procs.append(p)
        if ready:
            # a bounded wait for its "ready" line (the readline ends when it exits, too)
            import selectors
            sel = selectors.DefaultSelector()
            sel.register(p.stdout, selectors.EVENT_READ)
            if not sel.select(10) or p.stdout.readline().strip() != b"ready":
                raise RuntimeError("%s did not start: %s" % (args, p.stderr.read1(4096)))
            sel.close()
        return p

    # -- from a namespace's own side (the test's checks, never a sandbox's) ---------------
    def probe(self, ns, mode, *args):
        """The sandbox probe run in namespace `ns` itself (not in a sandbox): its last JSON
        line. The harness's own checks, and the positive controls of the attack tests."""
        r = run(self.in_ns(ns, ["python3", "-c", PROBE, mode] + [str(a) for a in args]),
                timeout=30)
        return json.loads(r.stdout.strip().splitlines()[-1])

    # -- the calling thread's namespace ---------------------------------------------------
    def enter(self):
        """Move the calling thread into the pod's namespace (leave() brings it back)."""
        assert self._home is None, "already in the pod"
        self._home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            setns(self.path(self.pod))
        except BaseException:
            os.close(self._home)
            self._home = None
            raise

    def leave(self):
        if self._home is None:
            return
        try:
            if _libc.setns(self._home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the test's namespace")
        finally:
            os.close(self._home)
            self._home = None

    @contextlib.contextmanager
    def entered(self):
        """In the pod for a with-block (a no-op when the thread is there already)."""
        if self._home is not None:
            yield
            return
        self.enter()
        try:
            yield
        finally:
            self.leave()

    def state(self, ns=None):
        """What a daemon could leave in a namespace (the pod by default): its links, the
        addresses on its lo, its nftables tables."""
        ns = ns or self.pod
        links = sorted(ln.split(":")[1].strip().split("@")[0] for ln in
                       run([IP, "-n", ns, "-o", "link", "show"]).stdout.splitlines())
        lo = sorted(ln.split()[3] for ln in
                    run([IP, "-n", ns, "-o", "-4", "addr", "show", "dev", "lo"]).stdout
                    .splitlines())
        with self.entered() if ns == self.pod else contextlib.nullcontext():
            tables = sorted(ln.strip() for ln in Nft().run("list tables").splitlines()
                            if ln.strip())
        return {"links": links, "lo": lo, "tables": tables}

    def restore(self, before):
        """Remove from the pod what was not there in `before` (a state()): what a daemon
        killed mid-test left (a later daemon of the same range would meet its table)."""
        now = self.state()
        for t in sorted(set(now["tables"]) - set(before["tables"])):
            with self.entered():
                Nft().run("delete " + t)
        for link in sorted(set(now["links"]) - set(before["links"])):
            run([IP, "-n", self.pod, "link", "delete", link], check=False)
        for a in sorted(set(now["lo"]) - set(before["lo"])):
            run([IP, "-n", self.pod, "addr", "delete", a, "dev", "lo"], check=False)

    def close(self):
        self.leave()
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
            for f in (p.stdout, p.stderr):
                if f:
                    f.close()
        self.procs = []
        for ns in reversed(self.made):
            run([IP, "netns", "delete", ns], check=False)
        self.made = []
        shutil.rmtree(self.dir, ignore_errors=True)


def daemon_env(extra=None):
    env = {
        "SANDBOX_HOST_EGRESS": "on",  # shlib.base_env turns it off for every other test
        "SANDBOX_HOST_LISTEN": "0.0.0.0:0",  # on the pod's addresses too: a sandbox must not
        "SANDBOX_HOST_DNS_UPSTREAM": UPSTREAM,  # reach it there either
        "SANDBOX_HOST_EGRESS_DENY": OPERATOR_DENY,
        "SANDBOX_HOST_EGRESS_ALLOW": OPERATOR_ALLOW,
        "SANDBOX_HOST_EGRESS_CONN_MAX": str(CONN_MAX),
    }
    env.update(extra or {})
    return env


def start_daemon(world, extra=None, prefix=(), must_support=True):
    """A daemon inside the pod (nsenter, then `prefix`: each execs in place, the pid is the
    daemon's), its /healthz `egress` object in .egress. With `must_support`, egress must be
    supported (a failure, not a skip: this machine has everything it needs, so the feature
    must work)."""
    d = shlib.Daemon(env=daemon_env(extra), prefix=world.in_ns(world.pod, list(prefix)))
    try:
        with world.entered():
            h = d.client.get("/healthz").json()
    except BaseException:
        d.close(check=False)
        raise
    eg = h.get("egress")
    if must_support and not (isinstance(eg, dict) and eg.get("supported") is True):
        err = d.stderr_text()[-3000:]
        d.close(check=False)
        pytest.fail("root, ip, netns and nftables are all here, yet /healthz says egress is "
                    "not supported: %r\nstderr tail:\n%s" % (eg, err), pytrace=False)
    d.egress = eg
    return d


# ---- the sandboxes -------------------------------------------------------------------------

def policy(default="deny", *rules):
    """A networkPolicy: rules are (action, target) pairs."""
    return {"defaultAction": default,
            "egress": [{"action": a, "target": t} for a, t in rules]}


def create(osc, network_policy=None):
    """A /v1 sandbox (the SDK's defaults) with that networkPolicy (None: none)."""
    body = dict(oslib.SDK_DEFAULT_CREATE)
    if network_policy is not None:
        body["networkPolicy"] = network_policy
    return osc.create_ok(body)["id"]


def probe_command(mode, *args):
    return "python3 - %s %s <<'SHPROBE'\n%s\nSHPROBE" % (
        mode, " ".join(_shq(str(a)) for a in args), PROBE)


def _shq(s):
    return "'" + s.replace("'", "'\\''") + "'"


def probe(osc, sid, mode, *args, wait=60.0):
    """Run the probe in the sandbox to its end; its last JSON line."""
    st = sselib.run(osc, sid, probe_command(mode, *args), wait=wait)
    lines = [t for t in st.texts("stdout") if t.startswith("{")]
    assert st.final is not None and st.final["type"] == "execution_complete" and lines, \
        "probe %s %r: events %r, stderr %r" % (mode, args, st.types, st.texts("stderr"))
    return json.loads(lines[-1])


class Background:
    """A probe that runs on (hold, echo, flood, slowtcp, listen) while the test does other
    things: its stdout read line by line; stop() creates its stop file and reads it out."""

    def __init__(self, osc, sid, mode, *args, stop_file=None):
        self.osc, self.sid = osc, sid
        self.stop_file = stop_file
        self.st = sselib.Stream(osc, sid, body={"command": probe_command(mode, *args)},
                                read_timeout=30)
        assert self.st.status == 200, (self.st.status, self.st.body)

    @property
    def results(self):
        """Every JSON line the probe printed so far (after stop(): all of them)."""
        return [json.loads(t) for t in self.st.texts("stdout") if t.startswith("{")]

    def next(self, timeout=30.0):
        """The probe's next JSON line."""
        deadline = time.monotonic() + timeout
        while True:
            ev = self.st.next_event(timeout=max(0.1, deadline - time.monotonic()))
            assert ev is not None, "the probe ended early: %r stderr %r" % (
                self.st.types, self.st.texts("stderr"))
            if ev["type"] == "stdout" and ev["text"].startswith("{"):
                return json.loads(ev["text"])
            if ev["type"] in sselib.FINAL:
                raise AssertionError("the probe ended: %r stderr %r" % (
                    ev, self.st.texts("stderr")))

    def signal(self, name=None):
        """Create the probe's stop (or go) file from a second command in the sandbox."""
        st = sselib.run(self.osc, self.sid, "touch " + _shq(name or self.stop_file), wait=30)
        st.assert_complete()

    def stop(self):
        if self.stop_file:
            try:
                self.signal()
            except Exception:
                pass
        try:
            self.st.read_all(timeout=30)
        except Exception:
            self.st.abort()
        return self


def gateway_of(daemon):
    return daemon.egress["gateway"]


def tcp_ok(host, port, timeout=3.0):
    """Can the calling thread open a TCP connection to host:port (a call timeout)?"""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False


def unique(prefix):
    return "%s-%s" % (prefix, os.urandom(4).hex())



# ---- fixtures (imported by the test modules) ------------------------------------------------

@pytest.fixture(scope="module")
def world():
    """The pod and the internet, with the test's main thread inside the pod for the module
    (its sockets are the pod's); everything removed at the end, also after a failure."""
    why = requirements()
    if why:
        pytest.skip(why)
    probe_ns = "shp-probe-%d" % os.getpid()
    r = run([IP, "netns", "add", probe_ns], check=False)
    if r.returncode != 0:
        pytest.skip("network namespaces are unavailable here: %s" % r.stderr.strip())
    run([IP, "netns", "delete", probe_ns], check=False)
    w = World()
    try:
        w.enter()
        why = Nft().works(os.getpid())
        if why:
            pytest.skip("nftables is unavailable in a new network namespace: " + why)
        yield w
    finally:
        w.close()


@pytest.fixture(scope="module")
def netd(world):
    """The module's daemon, inside the pod; a clean stop (exit 0, nothing left behind)."""
    d = start_daemon(world)
    yield d
    rc = d.close()
    assert rc == 0, "sandbox-host exited %r on SIGTERM; stderr tail:\n%s" % (
        rc, d.stderr_text()[-3000:])


@pytest.fixture
def own_daemon(world):
    """Factory: a daemon of the test's own (range 100.125.0.0/16, beside the module's; `extra`
    settings), for the tests that may jam a daemon (floods: a failure there fails that test
    alone) or need other settings. Closed after the test, and whatever it left in the pod
    (a daemon killed mid-test leaves its table) removed."""
    made = []
    before = world.state()

    def start(extra=None, prefix=(), must_support=True):
        assert not made, "one own daemon at a time (they share the range)"
        env = {"SANDBOX_HOST_EGRESS_CIDR": "100.125.0.0/16"}
        env.update(extra or {})
        made.append(start_daemon(world, env, prefix, must_support))
        return made[-1]

    yield start
    for d in made:
        d.close(check=False)
    world.restore(before)


@pytest.fixture
def own_netd(own_daemon):
    return own_daemon()


@pytest.fixture
def eosc(netd):
    return oslib.os_client(netd)


@pytest.fixture
def sandbox(eosc):
    """Factory: sandbox(networkPolicy or None) -> a /v1 sandbox's id, killed afterwards."""
    made = []

    def make(network_policy=None):
        sid = create(eosc, network_policy)
        made.append(sid)
        return sid

    yield make
    for sid in made:
        eosc.kill(sid)


# ---- the SDK tier's runner (tests/opensandbox/egress.test.mjs) ------------------------------

def world_env(w):
    """What a test run inside the pod needs to know of the world: SH_EGRESS_NETNS (the pod's
    namespace) and SH_EGRESS_WORLD (its addresses, names and the operator's deny list)."""
    return {
        "SH_EGRESS_NETNS": w.pod,
        "SH_EGRESS_WORLD": json.dumps({
            "pod": w.pod, "inet": w.inet, "podAddr": POD_ADDR, "inetAddr": INET_ADDR,
            "upstream": UPSTREAM, "pypi": PYPI, "github": GITHUB, "exampleSub": EXAMPLE_SUB,
            "exampleApex": EXAMPLE_APEX, "unnamed": UNNAMED, "opDenied": OP_DENIED,
            "podServicePort": POD_SERVICE_PORT, "httpPort": HTTP_PORT,
            # the daemon's default list plus one TEST-NET /32 nothing names
            "operatorDeny": DEFAULT_DENY + ",%s/32" % OP_DENIED,
        }),
    }


def pids_in(ns_path):
    """The pids of the processes whose network namespace is the one at ns_path."""
    want = os.stat(ns_path)
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = os.stat("/proc/%s/ns/net" % d)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
            found.append(int(d))
    return found


def run_in_pod(cmd):
    """Make the world, run `cmd` inside the pod (nsenter) with world_env() in its environment,
    and remove the world afterwards whatever happened: the command's own processes first
    (by pid: anything still in the pod's namespace that the world did not start), then the
    world's (World.close). When the world cannot be made here, `cmd` runs in the caller's
    namespace with SH_EGRESS_SKIP=<why>, so that its tests skip with that reason."""
    def term(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, term)
    env = dict(os.environ)
    env.pop("SH_EGRESS_NETNS", None)
    env.pop("SH_EGRESS_WORLD", None)
    why = requirements()
    if not why:
        why = _netns_and_nft()
    if why:
        print("egress SDK tier skipped: " + why, file=sys.stderr, flush=True)
        env["SH_EGRESS_SKIP"] = why
        return subprocess.call(cmd, env=env)
    w = World()
    child = None
    try:
        env.update(world_env(w))
        child = subprocess.Popen(w.in_ns(w.pod, cmd), env=env)
        return child.wait()
    finally:
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(5)
        _stop_leftovers(w)
        w.close()


def _stop_leftovers(w):
    """What the command left in the pod (a daemon whose test runner was stopped before its
    after hook): SIGTERM by pid (a daemon then removes its sandboxes, mounts and cgroups),
    SIGKILL after a bound; a harness state root (sh-sdk-root-*) it named is removed."""
    ours = {p.pid for p in w.procs}
    left = [pid for pid in pids_in(w.path(w.pod)) if pid not in ours]
    roots = []
    for pid in left:
        print("egresslib: pid %d was still in the pod; stopping it" % pid, file=sys.stderr)
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
            root = env.get(b"SANDBOX_HOST_ROOT", b"").decode(errors="replace")
            if os.path.basename(root).startswith("sh-sdk-root-") and \
                    os.path.dirname(root) == tempfile.gettempdir():
                roots.append(root)
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, FileNotFoundError):
            pass
    deadline = time.monotonic() + 15
    while left and time.monotonic() < deadline:
        left = [pid for pid in left if os.path.exists("/proc/%d" % pid) and
                not _zombie(pid)]
        time.sleep(0.1)
    for pid in left:
        print("egresslib: pid %d outlived SIGTERM; killed" % pid, file=sys.stderr)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    with open("/proc/self/mounts") as f:
        mounts = [ln.split()[1] for ln in f]
    for root in roots:
        held = [m for m in mounts if m == root or m.startswith(root + "/")]
        if held:  # never rmtree through a mount: say what was left instead
            print("egresslib: %s keeps %d mount(s); left in place" % (root, len(held)),
                  file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


def _zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _netns_and_nft():
    """None when a namespace can be made here and takes an nftables table, else why not."""
    ns = "shp-probe-%d" % os.getpid()
    r = run([IP, "netns", "add", ns], check=False)
    if r.returncode != 0:
        return "network namespaces are unavailable here: %s" % r.stderr.strip()
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        setns("/run/netns/" + ns)
        why = Nft().works(os.getpid())
        if why:
            return "nftables is unavailable in a new network namespace: " + why
        return None
    finally:
        if _libc.setns(home, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back to the runner's namespace")
        os.close(home)
        run([IP, "netns", "delete", ns], check=False)


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] != "run-in-pod" or sys.argv[2] != "--":
        sys.exit("usage: egresslib.py run-in-pod -- COMMAND [ARG...]")
    sys.exit(run_in_pod(sys.argv[3:]))
