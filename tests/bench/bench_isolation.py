#!/usr/bin/env python3
"""Isolation benchmarks (issue 3): sandbox create latency, exec round trip of `true` and exec
output streaming, each beside bubblewrap doing the comparable thing in the same run.

    python3 tests/bench/bench_isolation.py [--bin build/sandbox-host] [--n 200] [--smoke]

Prints a table: figure, ours, peer, ratio. Not a test: it asserts nothing about time.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def start_daemon(binary, root, *extra):
    """Start the daemon on 127.0.0.1:0; returns (process, host, port)."""
    p = subprocess.Popen([binary, "--listen=127.0.0.1:0", f"--root={root}",
                          "--log-level=warn", "--max-sandboxes=64", "--egress=off", *extra],
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    while time.time() < deadline:
        line = p.stderr.readline()
        if line.startswith("listening on http://"):
            host, port = line.strip().rsplit("/", 1)[1].rsplit(":", 1)
            # keep reading stderr, or a full pipe would stall the daemon's logging
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, host, int(port)
    p.kill()
    raise SystemExit("daemon did not start")


class Client:
    def __init__(self, host, port):
        self.c = http.client.HTTPConnection(host, port, timeout=60)

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        self.c.request(method, path, body=data)
        r = self.c.getresponse()
        return r.status, r.read()

    def exec_stream(self, rid, cmd):
        """Run cmd, return (exit frame, bytes of o-frames decoded, seconds)."""
        import base64
        t0 = time.perf_counter()
        self.c.request("POST", f"/sandboxes/{rid}/exec", body=json.dumps({"cmd": cmd}))
        r = self.c.getresponse()
        got = 0
        last = None
        while True:
            line = r.readline()
            if not line:
                break
            f = json.loads(line)
            if "o" in f:
                got += len(base64.b64decode(f["o"]))
            else:
                last = f
        return last, got, time.perf_counter() - t0


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def base64_text_file(path, nbytes):
    """A file of about nbytes of base64 lines of random bytes (an SSE stream carries lines:
    valid UTF-8), mode 0644; returns its size."""
    import base64
    with open("/dev/urandom", "rb") as src, open(path, "wb") as dst:
        left = nbytes * 3 // 4
        while left > 0:
            chunk = src.read(min(left, 57 * 16384))
            dst.write(base64.encodebytes(chunk))
            left -= len(chunk)
    os.chmod(path, 0o644)
    return os.path.getsize(path)


def bwrap_args():
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev",
            "--tmpfs", "/tmp"]
    for d in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
        if os.path.islink("/" + d):
            args += ["--symlink", os.readlink("/" + d), "/" + d]
        elif os.path.isdir("/" + d):
            args += ["--ro-bind", "/" + d, "/" + d]
    return args


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "sandbox-host"))
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--stream-mb", type=int, default=256)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    a = ap.parse_args()
    if a.smoke:
        a.n, a.stream_mb = 5, 4
    if not shutil.which("bwrap"):
        subprocess.run(["apt-get", "install", "-y", "-q", "bubblewrap"], check=False,
                       stdout=subprocess.DEVNULL)
    root = tempfile.mkdtemp(prefix="sh-bench-")
    d, host, port = start_daemon(a.bin, root)
    rows = []
    try:
        c = Client(host, port)
        # create latency (each sandbox deleted right after)
        lat = []
        for _ in range(a.n):
            t0 = time.perf_counter()
            st, body = c.call("POST", "/sandboxes", {})
            lat.append(time.perf_counter() - t0)
            rid = json.loads(body)["remote_id"]
            c.call("DELETE", f"/sandboxes/{rid}")
        bw = []
        have_bwrap = shutil.which("bwrap") is not None
        if have_bwrap:
            for _ in range(a.n):
                t0 = time.perf_counter()
                subprocess.run(bwrap_args() + ["/bin/true"], check=True)
                bw.append(time.perf_counter() - t0)
        rows.append(("create p50 (ms)", pct(lat, .5) * 1e3, pct(bw, .5) * 1e3 if bw else None))
        rows.append(("create p99 (ms)", pct(lat, .99) * 1e3, pct(bw, .99) * 1e3 if bw else None))

        st, body = c.call("POST", "/sandboxes", {})
        rid = json.loads(body)["remote_id"]
        ex = []
        for _ in range(a.n):
            _, _, s = c.exec_stream(rid, ["true"])
            ex.append(s)
        fe = []
        for _ in range(a.n):
            t0 = time.perf_counter()
            subprocess.run(["/bin/true"], check=True)
            fe.append(time.perf_counter() - t0)
        rows.append(("exec true p50 (ms) vs bwrap true", pct(ex, .5) * 1e3,
                     pct(bw, .5) * 1e3 if bw else None))
        rows.append(("exec true p99 (ms) vs bwrap true", pct(ex, .99) * 1e3,
                     pct(bw, .99) * 1e3 if bw else None))
        rows.append(("exec true p50 (ms) vs fork+exec", pct(ex, .5) * 1e3, pct(fe, .5) * 1e3))
        rows.append(("exec true p99 (ms) vs fork+exec", pct(ex, .99) * 1e3, pct(fe, .99) * 1e3))

        nbytes = a.stream_mb << 20
        last, got, s = c.exec_stream(rid, ["head", "-c", str(nbytes), "/dev/zero"])
        ours = got / s / 1e6
        peer = None
        if have_bwrap:
            t0 = time.perf_counter()
            p = subprocess.Popen(bwrap_args() + ["head", "-c", str(nbytes), "/dev/zero"],
                                 stdout=subprocess.PIPE)
            n = 0
            while True:
                b = p.stdout.read(1 << 16)
                if not b:
                    break
                n += len(b)
            p.wait()
            peer = n / (time.perf_counter() - t0) / 1e6
        rows.append(("exec stream MB/s vs bwrap pipe", ours, peer))
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)

    print(f"{'figure':40} {'ours':>10} {'peer':>10} {'ratio':>7}")
    for name, ours, peer in rows:
        ratio = f"{ours / peer:6.2f}x" if peer else "   -"
        ps = f"{peer:10.2f}" if peer is not None else f"{'-':>10}"
        print(f"{name:40} {ours:10.2f} {ps} {ratio}")


if __name__ == "__main__":
    sys.exit(main())
