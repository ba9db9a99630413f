#!/usr/bin/python3
"""The whole benchmark of issue 7: every figure beside its peer or limit, measured in one run,
printed as one table (figure | ours | peer or limit | ratio).

    /usr/bin/python3 tests/bench/bench_all.py --bin build-release/sandbox-host \
        --tool build-release/benchtool [--smoke] [--json out.json]

Normally started by tests/bench/run.sh, which builds the release binary and benchtool (the C
client and C peers, tests/bench/benchtool.c) and installs the peer tools. Not a test: it
asserts nothing about time. Every loop is bounded in count and time; every process it starts
is ended by its pid; the tmpfs it mounts and the temp dirs it makes are removed at the end.

Ratio = ours / peer for latencies (higher is worse) and peer / ours for rates (higher is
worse), so a ratio above 1 is always "this many times worse than the peer".
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_isolation import Client, bwrap_args, pct  # noqa: E402  (reused, not duplicated)

FULL = dict(create_n=200, exec_n=500, exec16_n=100, stream_mb=256, file_mb=1024,
            walk_files=100_000, persist_files=10_000, persist_mb=1024, wrk_s=10,
            mem_steps=(1, 100, 500), hold_cap=10_000, hold_s=900, hold_floor_mib=3072, bomb_s=5)
SMOKE = dict(create_n=5, exec_n=5, exec16_n=3, stream_mb=4, file_mb=8,
             walk_files=1000, persist_files=100, persist_mb=8, wrk_s=1,
             mem_steps=(1, 3, 5), hold_cap=20, hold_s=30, hold_floor_mib=1024, bomb_s=1)

ROWS = [  # every row the table always prints, in order (the smoke test checks them all)
    "create p50 (ms)", "create p99 (ms)",
    "exec true, 1 sandbox, p50 (ms)", "exec true, 1 sandbox, p99 (ms)",
    "exec true, 16 sandboxes, p50 (ms)", "exec true, 16 sandboxes, p99 (ms)",
    "exec stream (MB/s)",
    "upload (MB/s) vs nginx PUT", "upload (MB/s) vs cp",
    "download (MB/s) vs nginx sendfile", "download (MB/s) vs cp",
    "walk (ms)", "disk-usage (ms)",
    "persist files (ms)", "restore files (ms)", "persist 1GiB (ms)", "restore 1GiB (ms)",
    "exists rate, 64 conns (req/s)",
    "daemon RSS, 1 sandbox (MiB)", "daemon RSS, 100 sandboxes (MiB)",
    "daemon RSS, 500 sandboxes (MiB)",
    "per-sandbox PSS, daemon+workers (KiB)",
    "sandboxes held before failure",
    "create p50, 1G disk limit, loop (ms)", "create p99, 1G disk limit, loop (ms)",
    "create p50, 1G disk limit, tmpfs (ms)", "create p99, 1G disk limit, tmpfs (ms)",
    # how fast /healthz answers while the daemon works hard: the contract tests only bound
    # these with call timeouts (the "limit" column), the figures are here
    "healthz worst, during disk-usage (ms)", "healthz worst, during 16 exec loops (ms)",
    "healthz worst, during upload and download (ms)",
    "healthz worst, during the persist 1GiB case (ms)",
    "healthz worst, during a fork bomb (ms)", "healthz worst, during a memory hog (ms)",
    # the OpenSandbox surface's execd (issue 13), beside the native exec on the same sandbox
    "os command true, p50 (ms)", "os command true, p99 (ms)",
    "os command stream (MB/s)",
]

# ---- plumbing ---------------------------------------------------------------------------


class Daemon:
    """One sandbox-host on 127.0.0.1:0 with a given root, ended by its pid."""

    logdir = None

    def __init__(self, binary, root, *flags):
        os.makedirs(root, exist_ok=True)
        self.errlog = open(os.path.join(Daemon.logdir or os.path.dirname(root),
                                        f"daemon-{os.path.basename(root)}.log"), "a")
        self.p = subprocess.Popen([binary, "--listen=127.0.0.1:0", f"--root={root}",
                                   "--log-level=warn", *flags],
                                  stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 15
        self.port = None
        while time.time() < deadline:
            line = self.p.stderr.readline()
            if not line:
                break
            if line.startswith("listening on http://"):
                self.port = int(line.strip().rsplit(":", 1)[1])
                break
        if self.port is None:
            self.stop()
            raise RuntimeError("the daemon did not start")
        # keep draining its stderr so that a chatty daemon never blocks on a full pipe
        import threading
        threading.Thread(target=self._drain, daemon=True).start()
        self.host = "127.0.0.1"
        self.pid = self.p.pid

    def _drain(self):
        for line in self.p.stderr:
            self.errlog.write(line)
            self.errlog.flush()

    def client(self):
        return Client(self.host, self.port)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=10)


def create(c, body=None):
    st, b = c.call("POST", "/sandboxes", body or {})
    if st != 200:
        raise RuntimeError(f"create answered {st}: {b[:200]!r}")
    return json.loads(b)["remote_id"]


def run(cmd, timeout=600, **kw):
    return subprocess.run(cmd, check=True, timeout=timeout, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, **kw)


def hyperfine_times(cmd, runs, warmup=3):
    """Run cmd (a list) with hyperfine -N; return every run's wall time in seconds."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        run(["hyperfine", "-N", "--style", "none", "--warmup", str(warmup), "--runs", str(runs),
             "--export-json", f.name, " ".join(cmd)], timeout=900)
        return json.load(open(f.name))["results"][0]["times"]


def timed(cmd, reps=3, timeout=600):
    """Median wall seconds of `reps` runs of cmd (stdout to /dev/null)."""
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, timeout=timeout, stdout=subprocess.DEVNULL)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def have(tool):
    return shutil.which(tool) is not None


class Table:
    def __init__(self):
        self.rows = {}

    def add(self, name, ours, peer, peer_name, kind, note=""):
        """kind: 'lat' (lower is better) or 'rate' (higher is better) or 'abs' (no peer)."""
        assert name in ROWS, name
        ratio = None
        if ours is not None and peer:
            ratio = ours / peer if kind == "lat" else (peer / ours if ours else None)
        self.rows[name] = dict(ours=ours, peer=peer, peer_name=peer_name, ratio=ratio,
                               kind=kind, note=note)

    def na(self, name, reason):
        self.rows[name] = dict(ours=None, peer=None, peer_name="", ratio=None, kind="na",
                               note=f"n/a ({reason})")

    def print(self, out=sys.stdout):
        def f(v):
            if v is None:
                return "n/a"
            return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}"
        out.write("| figure | ours | peer or limit (same run) | ratio |\n|---|---|---|---|\n")
        for name in ROWS:
            r = self.rows.get(name) or dict(ours=None, peer=None, peer_name="", ratio=None,
                                            note="n/a: not measured (an earlier step failed)")
            peer = f"{f(r['peer'])} ({r['peer_name']})" if r["peer"] is not None else (
                r["peer_name"] or "—")
            ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "—"
            ours = r["note"] if r["ours"] is None else (
                f(r["ours"]) + (f" ({r['note']})" if r["note"] else ""))
            out.write(f"| {name} | {ours} | {peer} | {ratio} |\n")
        out.flush()


class Probe:
    """GET /healthz on a fresh connection every `interval` s from a thread while a figure's
    load runs; `worst_ms` is the slowest answer (an error counts as the call's timeout)."""

    def __init__(self, d, interval=0.02, timeout=30):
        import threading
        self.host, self.port, self.interval, self.timeout = d.host, d.port, interval, timeout
        self.times, self.errors = [], []
        self._halt = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._halt.is_set():
            t0 = time.perf_counter()
            try:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
                conn.request("GET", "/healthz")
                r = conn.getresponse()
                r.read()
                conn.close()
                if r.status != 200:
                    self.errors.append(r.status)
            except OSError as e:
                self.errors.append(repr(e))
            self.times.append(time.perf_counter() - t0)
            self._halt.wait(self.interval)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._halt.set()
        self._t.join(self.timeout + 10)
        return False

    def add(self, t, name, limit_ms, test):
        """One "healthz worst" row: ours the slowest probe, the limit the call timeout the
        contract test holds for it."""
        if not self.times:
            t.na(name, "no probe ran")
            return
        note = f"{len(self.times)} probes" + (f", {len(self.errors)} failed: "
                                               f"{self.errors[:2]}" if self.errors else "")
        t.add(name, max(self.times) * 1e3, limit_ms, f"call timeout of {test}", "lat", note)


def step(table, names, fn, *a):
    """Run one figure; a failure marks its rows n/a with the reason and the run goes on."""
    t0 = time.time()
    try:
        fn(table, *a)
    except Exception as e:  # noqa: BLE001 — reported in the table, never hidden
        why = f"{type(e).__name__}: {e}"
        if isinstance(e, subprocess.CalledProcessError):
            why = f"{os.path.basename(e.cmd[0])} exited {e.returncode}: {(e.stderr or '').strip()}"
        sys.stderr.write(f"bench: {fn.__name__} failed: {why}\n")
        for n in names:
            if n not in table.rows:
                table.na(n, why[:200])
    sys.stderr.write(f"bench: {fn.__name__} done in {time.time() - t0:.1f}s\n")


# ---- figures ------------------------------------------------------------------------------


def fig_create(t, d, a, cfg):
    c = d.client()
    lat = []
    for _ in range(cfg["create_n"]):
        t0 = time.perf_counter()
        rid = create(c)
        lat.append(time.perf_counter() - t0)
        c.call("DELETE", f"/sandboxes/{rid}")
    if have("bwrap") and have("hyperfine"):
        bw = hyperfine_times(bwrap_args() + ["/bin/true"], cfg["create_n"])
        peer = "bwrap --unshare-all /bin/true, hyperfine"
    else:
        bw, peer = None, "bwrap/hyperfine not installed"
    t.add("create p50 (ms)", pct(lat, .5) * 1e3, bw and pct(bw, .5) * 1e3, peer, "lat")
    t.add("create p99 (ms)", pct(lat, .99) * 1e3, bw and pct(bw, .99) * 1e3, peer, "lat")


def fig_create_disk(t, a, cfg):
    """Create with SANDBOX_HOST_DISK_MAX=1G (issue 10, item 6): the disk limit is set up by a
    child before the worker starts (loop: image copied from the template, loop device, two
    mounts; tmpfs: a mount). The peer is this run's create without a limit."""
    base = t.rows.get("create p50 (ms)", {}).get("ours")
    base99 = t.rows.get("create p99 (ms)", {}).get("ours")
    for mode in ("loop", "tmpfs"):
        root = os.path.join(a.base, "root-disk-" + mode)
        d = Daemon(a.bin, root, "--max-sandboxes=64", "--disk-max=1G", f"--disk-quota={mode}")
        try:
            c = d.client()
            lat = []
            for _ in range(cfg["create_n"]):
                t0 = time.perf_counter()
                rid = create(c)
                lat.append(time.perf_counter() - t0)
                c.call("DELETE", f"/sandboxes/{rid}")
        finally:
            d.stop()
        t.add(f"create p50, 1G disk limit, {mode} (ms)", pct(lat, .5) * 1e3, base,
              "create without a limit", "lat")
        t.add(f"create p99, 1G disk limit, {mode} (ms)", pct(lat, .99) * 1e3, base99,
              "create without a limit", "lat")


def tool_lines(args, timeout=600):
    return [int(x) for x in run(args, timeout=timeout).stdout.split()]


def fig_exec(t, d, a, cfg):
    c = d.client()
    rid = create(c)
    n = cfg["exec_n"]
    tool_lines([a.tool, "execloop", d.host, str(d.port), rid, "3"])  # warm-up
    ours = [x / 1e9 for x in tool_lines([a.tool, "execloop", d.host, str(d.port), rid, str(n)])]
    fe = [x / 1e9 for x in tool_lines([a.tool, "forkloop", str(n)])]
    peer = "fork+exec+wait /bin/true (C loop)"
    t.add("exec true, 1 sandbox, p50 (ms)", pct(ours, .5) * 1e3, pct(fe, .5) * 1e3, peer, "lat")
    t.add("exec true, 1 sandbox, p99 (ms)", pct(ours, .99) * 1e3, pct(fe, .99) * 1e3, peer, "lat")
    c.call("DELETE", f"/sandboxes/{rid}")

    # 16 sandboxes, 16 clients at once (one C client process each)
    rids = [create(c) for _ in range(16)]
    m = cfg["exec16_n"]
    with Probe(d) as probe:
        procs = [subprocess.Popen([a.tool, "execloop", d.host, str(d.port), r, str(m)],
                                  stdout=subprocess.PIPE, text=True) for r in rids]
        ours16 = []
        for p in procs:
            out, _ = p.communicate(timeout=600)
            if p.returncode != 0:
                raise RuntimeError("an exec client failed")
            ours16 += [int(x) / 1e9 for x in out.split()]
    probe.add(t, "healthz worst, during 16 exec loops (ms)", 1000,
              "test_exec.py")
    procs = [subprocess.Popen([a.tool, "forkloop", str(m)], stdout=subprocess.PIPE, text=True)
             for _ in range(16)]
    fe16 = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        fe16 += [int(x) / 1e9 for x in out.split()]
    peer = "16 fork+exec+wait loops at once"
    t.add("exec true, 16 sandboxes, p50 (ms)", pct(ours16, .5) * 1e3, pct(fe16, .5) * 1e3,
          peer, "lat")
    t.add("exec true, 16 sandboxes, p99 (ms)", pct(ours16, .99) * 1e3, pct(fe16, .99) * 1e3,
          peer, "lat")
    for r in rids:
        c.call("DELETE", f"/sandboxes/{r}")


def fig_stream(t, d, a, cfg):
    c = d.client()
    rid = create(c)
    ws = os.path.join(d.root, rid, "workspace")
    nbytes = cfg["stream_mb"] << 20
    blob = os.path.join(ws, "blob")
    with open("/dev/urandom", "rb") as src, open(blob, "wb") as dst:
        left = nbytes
        while left:
            b = src.read(min(left, 1 << 20))
            dst.write(b)
            left -= len(b)
    os.chmod(blob, 0o644)
    res = []
    for _ in range(2):
        out = run([a.tool, "stream", d.host, str(d.port), rid, "cat", "blob"]).stdout.split()
        if int(out[0]) != nbytes:
            raise RuntimeError(f"streamed {out[0]} bytes of {nbytes}")
        res.append(nbytes / float(out[1]) / 1e6)
    peer = []
    for _ in range(2):
        out = run([a.tool, "pipecat", blob]).stdout.split()
        peer.append(int(out[0]) / float(out[1]) / 1e6)
    t.add("exec stream (MB/s)", max(res), max(peer), "cat FILE | reader, 64 KiB reads (C)",
          "rate", note="C client decodes every frame")
    c.call("DELETE", f"/sandboxes/{rid}")


def fig_os(t, d, a, cfg):
    """OpenSandbox's `POST /command` (its SSE stream) against the native exec, both on one /v1
    sandbox (its id is a native remote_id) in the same run: `true` round trips on one
    keep-alive connection each, and the streaming rate of the same text file (base64 lines:
    SSE carries lines, so both sides stream the same valid UTF-8)."""
    c = d.client()
    st, b = c.call("POST", "/v1/sandboxes", {"image": {"uri": "default"},
                                             "entrypoint": ["tail", "-f", "/dev/null"]})
    if st != 202:
        raise RuntimeError(f"/v1 create answered {st}: {b[:200]!r}")
    sid = json.loads(b)["id"]
    n = cfg["exec_n"]
    tool_lines([a.tool, "oscmdloop", d.host, str(d.port), sid, "3"])  # warm-up
    tool_lines([a.tool, "execloop", d.host, str(d.port), sid, "3"])
    ours = [x / 1e9 for x in tool_lines([a.tool, "oscmdloop", d.host, str(d.port), sid, str(n)])]
    nat = [x / 1e9 for x in tool_lines([a.tool, "execloop", d.host, str(d.port), sid, str(n)])]
    peer = "native exec true, same sandbox"
    t.add("os command true, p50 (ms)", pct(ours, .5) * 1e3, pct(nat, .5) * 1e3, peer, "lat")
    t.add("os command true, p99 (ms)", pct(ours, .99) * 1e3, pct(nat, .99) * 1e3, peer, "lat")

    ws = os.path.join(d.root, sid, "workspace")
    text = os.path.join(ws, "text")
    nbytes = cfg["stream_mb"] << 20
    with open("/dev/urandom", "rb") as src, open(text, "wb") as dst:
        import base64
        left = nbytes * 3 // 4
        while left > 0:
            chunk = src.read(min(left, 57 * 16384))
            dst.write(base64.encodebytes(chunk))
            left -= len(chunk)
    os.chmod(text, 0o644)
    size = os.path.getsize(text)
    res, natr = [], []
    for _ in range(2):
        out = run([a.tool, "osstream", d.host, str(d.port), sid, "cat text"]).stdout.split()
        if int(out[0]) != size:
            raise RuntimeError(f"streamed {out[0]} bytes of {size}")
        res.append(size / float(out[1]) / 1e6)
        out = run([a.tool, "stream", d.host, str(d.port), sid, "cat", "text"]).stdout.split()
        if int(out[0]) != size:
            raise RuntimeError(f"native streamed {out[0]} bytes of {size}")
        natr.append(size / float(out[1]) / 1e6)
    t.add("os command stream (MB/s)", max(res), max(natr), "native exec stream, same file",
          "rate", note="C clients decode every event")
    c.call("DELETE", f"/v1/sandboxes/{sid}")


NGINX_CONF = """
user root;
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {tmp}/www;
        client_max_body_size 4g;
        location /put/ {{ dav_methods PUT; create_full_put_path on; }}
    }}
}}
"""


class Nginx:
    def __init__(self, base):
        self.tmp = os.path.join(base, "nginx")
        os.makedirs(os.path.join(self.tmp, "www", "put"), exist_ok=True)
        self.port = free_port()
        conf = os.path.join(self.tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(tmp=self.tmp, port=self.port))
        self.p = subprocess.Popen(["nginx", "-c", conf, "-p", self.tmp],
                                  stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not start")

    def url(self, path):
        return f"http://127.0.0.1:{self.port}/{path}"

    def stop(self):
        # nginx's master is our child (daemon off): SIGQUIT to it ends its workers too
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def curl_speed(args):
    """MB/s from curl's own counter (bytes/s of the body)."""
    out = run(["curl", "-sS", "--fail", "-o", "/dev/null", "-w", "%{speed_download} %{speed_upload}"
               " %{http_code}", *args], timeout=900).stdout.split()
    return max(float(out[0]), float(out[1])) / 1e6


def fig_files(t, d, a, cfg, ngx):
    c = d.client()
    rid = create(c)
    nbytes = cfg["file_mb"] << 20
    src = os.path.join(a.base, "upload.bin")
    with open("/dev/urandom", "rb") as r, open(src, "wb") as w:
        left = nbytes
        while left:
            b = r.read(min(left, 1 << 20))
            w.write(b)
            left -= len(b)
    base = f"http://{d.host}:{d.port}/sandboxes/{rid}/file?path="
    with Probe(d) as probe:
        up = max(curl_speed(["-T", src, base + "big.bin"]) for _ in range(2))
        dn = max(curl_speed([base + "big.bin"]) for _ in range(2))
    probe.add(t, "healthz worst, during upload and download (ms)", 1000,
              "test_robustness.py")
    cp_dst = os.path.join(a.base, "cp.bin")
    cp = []
    for _ in range(2):
        t0 = time.perf_counter()
        run(["cp", src, cp_dst])
        cp.append(nbytes / (time.perf_counter() - t0) / 1e6)
        os.unlink(cp_dst)
    cpv = max(cp)
    ws_file = os.path.join(d.root, rid, "workspace", "big.bin")
    if os.path.getsize(ws_file) != nbytes:
        raise RuntimeError("the uploaded file has the wrong size")
    if ngx:
        shutil.copyfile(src, os.path.join(ngx.tmp, "www", "big.bin"))
        nup = max(curl_speed(["-T", src, ngx.url("put/big.bin")]) for _ in range(2))
        ndn = max(curl_speed([ngx.url("big.bin")]) for _ in range(2))
        os.unlink(os.path.join(ngx.tmp, "www", "big.bin"))
        os.unlink(os.path.join(ngx.tmp, "www", "put", "big.bin"))
        t.add("upload (MB/s) vs nginx PUT", up, nup, "nginx dav PUT, curl", "rate")
        t.add("download (MB/s) vs nginx sendfile", dn, ndn, "nginx sendfile, curl", "rate")
    else:
        t.add("upload (MB/s) vs nginx PUT", up, None, "nginx not installed", "rate")
        t.add("download (MB/s) vs nginx sendfile", dn, None, "nginx not installed", "rate")
    t.add("upload (MB/s) vs cp", up, cpv, "cp, same tmpfs", "rate")
    t.add("download (MB/s) vs cp", dn, cpv, "cp, same tmpfs", "rate")
    os.unlink(src)
    c.call("DELETE", f"/sandboxes/{rid}")


def make_tree(root, nfiles, per_dir=1000, size=100):
    data = b"x" * size
    ndirs = max(1, (nfiles + per_dir - 1) // per_dir)
    k = 0
    for i in range(ndirs):
        dpath = os.path.join(root, f"d{i:04d}")
        os.makedirs(dpath, exist_ok=True)
        for j in range(min(per_dir, nfiles - k)):
            fd = os.open(os.path.join(dpath, f"f{j:05d}.txt"), os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, data)
            os.close(fd)
            k += 1


def get_body_seconds(d, path):
    conn = http.client.HTTPConnection(d.host, d.port, timeout=600)
    t0 = time.perf_counter()
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    s = time.perf_counter() - t0
    conn.close()
    if r.status != 200:
        raise RuntimeError(f"{path} answered {r.status}")
    return s, body


def fig_walk(t, d, a, cfg):
    c = d.client()
    rid = create(c)
    ws = os.path.join(d.root, rid, "workspace")
    n = cfg["walk_files"]
    make_tree(ws, n)
    walk = []
    for _ in range(3):
        s, body = get_body_seconds(d, f"/sandboxes/{rid}/walk")
        walk.append(s)
    got = len(json.loads(body)["entries"])
    if got != n:
        raise RuntimeError(f"walk returned {got} entries of {n}")
    du = []
    with Probe(d, interval=0) as probe:
        for _ in range(3):
            s, body = get_body_seconds(d, f"/sandboxes/{rid}/disk-usage")
            du.append(s)
    probe.add(t, "healthz worst, during disk-usage (ms)", 500,
              "test_scale.py")
    find = timed(["find", ws, "-type", "f", "-printf", "%s %T@\n"])
    dub = timed(["du", "-sb", ws])
    t.add("walk (ms)", statistics.median(walk) * 1e3, find * 1e3,
          f"find -printf '%s %T@' ({n} files)", "lat")
    t.add("disk-usage (ms)", statistics.median(du) * 1e3, dub * 1e3, f"du -sb ({n} files)",
          "lat")
    c.call("DELETE", f"/sandboxes/{rid}")


def fig_persist(t, a, cfg):
    """Persist/restore through bench_persist.py's own case (reused, not duplicated): a sandbox
    created with item_id, filled with files owned by its uid; "checkpoint, empty archive"
    (POST /persist into an empty archive) is our persist row, "restore on create" less the
    create without item_id is our restore row; peers are plain rsync -a of the same trees.
    If POST /persist does not answer 204 the rows are n/a with the answer, never faked."""
    import bench_persist as bp
    base = os.path.join(a.base, "persist")
    root, nfs, scratch = (os.path.join(base, x) for x in ("root", "nfs", "scratch"))
    for x in (nfs, scratch):
        os.makedirs(x)
    d = Daemon(a.bin, root, "--max-sandboxes=16", f"--nfs-root={nfs}", "--upload-max=4G")
    names = {"files": ("persist files (ms)", "restore files (ms)"),
             "1GiB": ("persist 1GiB (ms)", "restore 1GiB (ms)")}
    try:
        cli = bp.Client(d.host, d.port)
        # probe: is persist there at all?
        rid = cli.create("bench-probe")
        st, body = cli.call("POST", f"/sandboxes/{rid}/persist", {"delete": True})
        cli.delete(rid)
        shutil.rmtree(os.path.join(nfs, "bench-probe"), ignore_errors=True)
        if st != 204:
            reason = f"POST /persist answered {st} {body[:120].decode(errors='replace')}"
            for pn, rn in names.values():
                t.na(pn, reason)
                t.na(rn, reason)
            return
        nfiles, mb = cfg["persist_files"], cfg["persist_mb"]
        cases = [("files", f"{nfiles} files", lambda ws, uid: bp.make_small(ws, nfiles, uid)),
                 ("1GiB", f"{mb} MiB", lambda ws, uid: bp.make_big(ws, mb << 20, uid))]
        for key, what, build in cases:
            pn, rn = names[key]
            try:
                with Probe(d) as probe:
                    res = bp.bench_case(cli, root, nfs, scratch, what, build, 1)
            except SystemExit as e:  # bench_persist stops on a failed call: report it
                t.na(pn, str(e)[:200])
                t.na(rn, str(e)[:200])
                continue
            if key == "1GiB":
                probe.add(t, "healthz worst, during the persist 1GiB case (ms)", 1000,
                          "test_persist.py")
            rows = {fig.split(": ", 1)[1]: (ours, peer) for fig, ours, peer in res}
            base_ms = rows["(create without item, for reference)"][0]
            ours, peer = rows["checkpoint, empty archive"]
            t.add(pn, ours, peer, f"rsync -a, {what}", "lat")
            ours, peer = rows["restore on create"]
            t.add(rn, ours - base_ms, peer, f"rsync -a, {what} (ours: create less "
                  f"{base_ms:.1f} ms)", "lat")
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)


def wrk_rate(url, seconds):
    out = run(["wrk", "-t2", "-c64", f"-d{seconds}s", "--latency", url], timeout=seconds + 60)
    for line in out.stdout.splitlines():
        if line.startswith("Requests/sec:"):
            non2xx = [ln for ln in out.stdout.splitlines() if "Non-2xx" in ln or "errors" in ln]
            if non2xx:
                st = subprocess.run(["curl", "-s", "-i", url], stdout=subprocess.PIPE,
                                    text=True, timeout=30).stdout.splitlines()
                raise RuntimeError("wrk saw errors: " + "; ".join(non2xx).strip() +
                                   f"; one GET now: {st[:1]} {st[-1:]}")
            return float(line.split()[1])
    raise RuntimeError("no rate in wrk's output")


def fig_rate(t, d, a, cfg, ngx):
    if not have("wrk"):
        t.add("exists rate, 64 conns (req/s)", None, None, "wrk not installed", "rate")
        return
    c = d.client()
    rid = create(c)
    ours = wrk_rate(f"http://{d.host}:{d.port}/sandboxes/{rid}/exists?path=x", cfg["wrk_s"])
    peer = None
    if ngx:
        with open(os.path.join(ngx.tmp, "www", "tiny.json"), "w") as f:
            f.write('{"exists":false}')
        peer = wrk_rate(ngx.url("tiny.json"), cfg["wrk_s"])
    t.add("exists rate, 64 conns (req/s)", ours, peer,
          "nginx tiny file, wrk -t2 -c64" if ngx else "nginx not installed", "rate")
    c.call("DELETE", f"/sandboxes/{rid}")


def descendants(pid):
    kids = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/stat") as f:
                    s = f.read()
                ppid = int(s[s.rindex(")") + 2:].split()[1])
                kids.setdefault(ppid, []).append(int(e))
            except (OSError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append(k)
            todo.append(k)
    return out


def rollup(pid):
    v = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k, _, rest = line.partition(":")
                if k in ("Rss", "Pss"):
                    v[k] = int(rest.split()[0])
    except OSError:
        pass
    return v.get("Rss", 0), v.get("Pss", 0)


def kernel_kib():
    v = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, _, rest = line.partition(":")
            v[k] = int(rest.split()[0])
    return v["Slab"] + v["KernelStack"] + v["PageTables"]


def fig_memory(t, a, cfg):
    root = os.path.join(a.base, "mem-root")
    d = Daemon(a.bin, root, "--max-sandboxes=600")
    d.root = root
    rids = []
    try:
        c = d.client()
        samples = {}
        for n in cfg["mem_steps"]:
            while len(rids) < n:
                rids.append(create(c))
            time.sleep(1)
            rss, pss = rollup(d.pid)
            kids = descendants(d.pid)
            fds = len(os.listdir(f"/proc/{d.pid}/fd"))
            kmem = kernel_kib()
            krss = sum(rollup(k)[0] for k in kids)
            kpss = sum(rollup(k)[1] for k in kids)
            samples[n] = dict(rss=rss, pss=pss, total_pss=pss + kpss, procs=len(kids),
                              kid_rss=krss, fds=fds, kmem=kmem)
            sys.stderr.write(f"bench: memory at {n}: {samples[n]}\n")
        steps = cfg["mem_steps"]
        names = ["daemon RSS, 1 sandbox (MiB)", "daemon RSS, 100 sandboxes (MiB)",
                 "daemon RSS, 500 sandboxes (MiB)"]
        for name, n in zip(names, steps):
            s = samples[n]
            t.add(name, s["rss"] / 1024, None,
                  f"{n} idle; daemon+workers PSS {s['total_pss'] / 1024:.1f} MiB, "
                  f"{s['procs']} processes", "abs")
        lo, hi = steps[0], steps[-1]
        per = (samples[hi]["total_pss"] - samples[lo]["total_pss"]) / (hi - lo)
        per_d = (samples[hi]["pss"] - samples[lo]["pss"]) / (hi - lo)
        per_k = (samples[hi]["kmem"] - samples[lo]["kmem"]) / (hi - lo)
        per_fd = (samples[hi]["fds"] - samples[lo]["fds"]) / (hi - lo)
        t.add("per-sandbox PSS, daemon+workers (KiB)", per, None,
              f"({hi}-{lo}) slope; of which daemon {per_d:.0f} KiB; kernel "
              f"(Slab+KernelStack+PageTables, machine-wide) {per_k:.0f} KiB; daemon fds "
              f"{per_fd:.1f}", "abs")
    finally:
        for r in rids:
            try:
                c.call("DELETE", f"/sandboxes/{r}")
            except Exception:  # noqa: BLE001
                pass
        d.stop()


def fig_abuse(t, a, cfg):
    """A fork bomb left running in a sandbox (64 pids) for bomb_s seconds, then deleted; a
    memory hog (64M) until the OOM killer ends it: /healthz meanwhile."""
    from bench_isolation import Client as ExecClient
    root = os.path.join(a.base, "abuse-root")
    d = Daemon(a.bin, root, "--max-sandboxes=8", "--pids-max=64", "--memory-max=64M",
               "--exec-grace-ms=500")
    try:
        c = ExecClient(d.host, d.port)
        rid = create(c)
        with Probe(d, interval=0.1) as probe:
            c.exec_stream(rid, ["bash", "-c", ":(){ :|:& };:"])
            time.sleep(cfg["bomb_s"])
            st, _ = c.call("DELETE", f"/sandboxes/{rid}")
            if st != 204:
                raise RuntimeError(f"delete of the bombed sandbox answered {st}")
        probe.add(t, "healthz worst, during a fork bomb (ms)", 1000,
                  "test_isolation.py")
        rid = create(c)
        with Probe(d, interval=0.1) as probe:
            last, _, _ = c.exec_stream(rid, ["python3", "-c", "l = []\nwhile True: "
                                             "l.append(b'x' * (8 << 20))\n"])
        if not last or last.get("exit") in (None, 0):
            raise RuntimeError(f"the memory hog did not end by the OOM killer: {last}")
        probe.add(t, "healthz worst, during a memory hog (ms)", 1000,
                  "test_isolation.py")
        c.call("DELETE", f"/sandboxes/{rid}")
    finally:
        d.stop()


def meminfo_kib(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def hold_refusal(a, root, flags):
    """Why a daemon with these flags does not start: its own line (exit 2), or None."""
    try:
        p = subprocess.run([a.bin, "--listen=127.0.0.1:0", f"--root={root}", *flags],
                           capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        return None
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("sandbox-host:")]
    return lines[-1] if p.returncode == 2 and lines else None


def fig_hold(t, a, cfg):
    """Idle native sandboxes created one after the other until a create fails, the cap, the
    time bound, or the machine's memory floor (MemAvailable under hold_floor_mib: the machine
    is shared); then what they cost: the daemon's fds and RSS per sandbox, the workers' PSS,
    the kernel's memory (machine-wide), and whether the daemon still serves (a fresh
    connection, an exec in the first and the last sandbox). The /v1 surface is off: its
    sandboxes cost one fd more, and the fd budget the daemon checks at start counts it."""
    root = os.path.join(a.base, "hold-root")
    cap = cfg["hold_cap"]
    flags = [f"--max-sandboxes={min(cap, 32768)}", "--opensandbox=off"]
    try:
        d = Daemon(a.bin, root, *flags)
    except RuntimeError:
        why = hold_refusal(a, root, flags)
        raise RuntimeError(why or "the daemon did not start") from None
    d.root = root
    rids, lat = [], []
    floor = cfg["hold_floor_mib"] * 1024
    reason = f"cap of the bench ({cap}) reached"
    base_fds = len(os.listdir(f"/proc/{d.pid}/fd"))
    base_kmem, avail0 = kernel_kib(), meminfo_kib("MemAvailable")
    c = d.client()
    try:
        deadline = time.time() + cfg["hold_s"]
        while len(rids) < cap:
            if time.time() > deadline:
                reason = f"time bound of the bench ({cfg['hold_s']} s) reached"
                break
            if len(rids) % 100 == 0 and meminfo_kib("MemAvailable") < floor:
                reason = (f"memory floor of the bench reached (MemAvailable < "
                          f"{cfg['hold_floor_mib']} MiB)")
                break
            try:
                t0 = time.perf_counter()
                st, b = c.call("POST", "/sandboxes", {})
                lat.append(time.perf_counter() - t0)
            except Exception as e:  # noqa: BLE001
                reason = f"transport error: {e}"
                c = d.client()
                break
            if st != 200:
                reason = f"create answered {st}: {b[:160].decode(errors='replace')}"
                break
            rids.append(json.loads(b)["remote_id"])
            if len(rids) % 1000 == 0:
                sys.stderr.write(f"bench: hold: {len(rids)} sandboxes\n")
        held = len(rids)
        time.sleep(1)  # the workspaces kept in use let go
        fds = len(os.listdir(f"/proc/{d.pid}/fd"))
        kmem = kernel_kib()
        rss, _ = rollup(d.pid)
        kids = descendants(d.pid)
        wpss = sum(rollup(k)[1] for k in kids)
        # still serving: a fresh connection, and an exec in the first and the last sandbox
        alive = []
        for rid in (rids[:1] + rids[-1:]) if rids else []:
            st, body = d.client().call("POST", f"/sandboxes/{rid}/exec", {"cmd": ["true"]})
            ok = st == 200 and b'"exit":0' in body.replace(b" ", b"")
            alive.append("exec ok" if ok else f"exec answered {st}")
        t0 = time.perf_counter()
        st, _ = d.client().call("GET", "/healthz")
        alive.append(f"healthz {st} in {(time.perf_counter() - t0) * 1000:.1f} ms")
        n = max(held, 1)
        first = statistics.median(lat[:200]) * 1000 if lat else 0
        last = statistics.median(lat[-200:]) * 1000 if lat else 0
        note = (f"{reason}; daemon fds {(fds - base_fds) / n:.2f} per sandbox ({fds} open), "
                f"daemon RSS {rss / 1024:.1f} MiB, workers PSS {wpss / n:.0f} KiB per sandbox, "
                f"kernel (Slab+KernelStack+PageTables, machine-wide) {(kmem - base_kmem) / n:.0f}"
                f" KiB per sandbox, MemAvailable {avail0 // 1024} -> "
                f"{meminfo_kib('MemAvailable') // 1024} MiB; create p50 {first:.1f} ms (first "
                f"200) -> {last:.1f} ms (last 200); {', '.join(alive)}")
        sys.stderr.write(f"bench: hold: {held}: {note}\n")
        t.add("sandboxes held before failure", held, None, note, "abs")
    finally:
        t0 = time.time()
        for r in rids:
            if time.time() - t0 > cfg["hold_s"]:
                break
            try:
                c.call("DELETE", f"/sandboxes/{r}")
            except Exception:  # noqa: BLE001
                c = d.client()
        d.stop()
        if d.p.returncode != 0:
            # killed before it had deleted everything: a fresh daemon on the same root kills
            # and removes what it left (processes, cgroups, directories), as after a crash
            Daemon(a.bin, root, *flags).stop()


# ---- main ---------------------------------------------------------------------------------


def machine():
    mem = open("/proc/meminfo").readline().split()[1]
    model = ""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return (f"nproc {os.cpu_count()}, {model}, memory {int(mem) // 1024} MiB, kernel "
            f"{os.uname().release}, load average {open('/proc/loadavg').read().split()[0]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("SH_BIN") or
                    os.path.join(REPO, "build-release", "sandbox-host"))
    ap.add_argument("--tool", default=os.path.join(REPO, "build-release", "benchtool"))
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    ap.add_argument("--json", help="write the rows as JSON here too")
    ap.add_argument("--logs", help="keep the daemons' logs (warn and above) in this directory")
    ap.add_argument("--hold-cap", type=int, help="cap of the held-sandboxes figure")
    ap.add_argument("--only", help="comma-separated figures to run (create, exec, stream, "
                    "opensandbox, "
                    "files, walk, rate, persist, memory, hold, create-disk, abuse); default: all")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    cfg = dict(SMOKE if a.smoke else FULL)
    if a.hold_cap:
        cfg["hold_cap"] = a.hold_cap
        cfg["hold_s"] = max(cfg["hold_s"], a.hold_cap // 5)
    only = set(a.only.split(",")) if a.only else None

    def want(name):
        return only is None or name in only
    if os.geteuid() != 0:
        raise SystemExit("bench: needs root (namespaces, cgroups, mount)")

    tmp = tempfile.mkdtemp(prefix="sh-bench-")
    Daemon.logdir = a.logs or tmp
    os.makedirs(Daemon.logdir, exist_ok=True)
    a.base = os.path.join(tmp, "t")
    os.makedirs(a.base)
    # Everything on a tmpfs mounted for the run: on this VM's disk every file costs ~0.4 ms,
    # which would measure the disk, not the daemon (walk, persist, upload).
    size = "2g" if a.smoke else "12g"
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "sh-bench", a.base],
                   check=True)
    sys.stderr.write(f"bench: {machine()}\n")
    t = Table()
    d = ngx = None
    try:
        root = os.path.join(a.base, "root")
        d = Daemon(a.bin, root, "--max-sandboxes=64", "--upload-max=4G")
        d.root = root
        if have("nginx"):
            try:
                ngx = Nginx(a.base)
            except Exception as e:  # noqa: BLE001
                sys.stderr.write(f"bench: nginx: {e}\n")
        hz = ROWS[27:33]  # the "healthz worst" rows, each measured within a figure
        for name, rows, fn, args in [
                ("create", ROWS[0:2], fig_create, (d, a, cfg)),
                ("exec", ROWS[2:6] + hz[1:2], fig_exec, (d, a, cfg)),
                ("stream", ROWS[6:7], fig_stream, (d, a, cfg)),
                ("opensandbox", ROWS[33:36], fig_os, (d, a, cfg)),
                ("files", ROWS[7:11] + hz[2:3], fig_files, (d, a, cfg, ngx)),
                ("walk", ROWS[11:13] + hz[0:1], fig_walk, (d, a, cfg)),
                ("rate", ROWS[17:18], fig_rate, (d, a, cfg, ngx))]:
            if want(name):
                step(t, rows, fn, *args)
        if ngx:
            ngx.stop()
            ngx = None
        d.stop()
        d = None
        for name, rows, fn in [("persist", ROWS[13:17] + hz[3:4], fig_persist),
                               ("memory", ROWS[18:22], fig_memory),
                               ("hold", ROWS[22:23], fig_hold),
                               ("create-disk", ROWS[23:27], fig_create_disk),
                               ("abuse", hz[4:6], fig_abuse)]:
            if want(name):
                step(t, rows, fn, a, cfg)
    finally:
        if ngx:
            ngx.stop()
        if d:
            d.stop()
        for _ in range(20):
            if subprocess.run(["umount", a.base], stderr=subprocess.DEVNULL).returncode == 0:
                break
            time.sleep(0.5)
        else:
            subprocess.run(["umount", "-l", a.base])
        shutil.rmtree(tmp, ignore_errors=True)
    ver = subprocess.run([a.bin, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True).stdout.strip()
    sys.stdout.write(f"machine: {machine()}\nbinary: {a.bin} ({ver})\n\n")
    t.print()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": machine(), "rows": t.rows}, f, indent=1)
    print(f"\nbench: {len(ROWS)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
