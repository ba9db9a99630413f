#!/usr/bin/python3
"""The whole benchmark of issue 7: every figure beside its peer or limit, measured in one run,
printed as one table (figure | ours | peer or limit | ours / peer | goal | met), issue 27's
goals first, in the order of its table, then issue 15's, each beside its peer and its goal.

    /usr/bin/python3 tests/bench/bench_all.py --bin build-release/sandbox-host \
        --tool build-release/benchtool [--smoke] [--json out.json]

Normally started by tests/bench/run.sh, which builds the release binary and benchtool (the C
client and C peers, tests/bench/benchtool.c) and installs the peer tools. Not a test: it
asserts nothing about time. Every loop is bounded in count and time; every process it starts
is ended by its pid; the tmpfs it mounts and the temp dirs it makes are removed at the end.

The ratio is ours / peer for every row, as in issue 15's table: for a time (ms) below 1 beats
the peer, for a rate (MB/s, req/s, execs/s) above 1 does. (Until issue 15 it was peer / ours for
rates.)
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

from bench_isolation import Client, base64_text_file, bwrap_args, pct  # noqa: E402  (reused)
from bench_images import image_for, peer_pull_unpack  # noqa: E402  (issue 22's peer)
import bench_cluster  # noqa: E402  (issue 23's rows: a relay through a peer)
import bench_egress  # noqa: E402  (issue 24's rows: a sandbox's network against the pod's)

FULL = dict(create_n=200, exec_n=500, exec16_n=100, stream_mb=256, file_mb=512, osfile_mb=512,
            walk_files=100_000, persist_files=10_000, persist4k_files=5000, persist4k_runs=3,
            persist_mb=256, wrk_s=10, mem_steps=(1, 100, 500), bwrap_idle=50, hold_cap=10_000,
            hold_s=900, hold_floor_mib=3072, bomb_s=5, churn_n=200, churn_batch=50,
            img_pulls=3, img_lives=100, img_many=100, cluster_exec_n=500,
            cluster_stream_mb=256, cluster_per_pod=300, cluster_list_n=50, egress_tcp_mb=1024,
            egress_tcp_runs=3, egress_conn_n=2000, egress_dns_n=500, egress_create_n=200)
SMOKE = dict(create_n=5, exec_n=5, exec16_n=3, stream_mb=4, file_mb=8, osfile_mb=8,
             walk_files=1000, persist_files=100, persist4k_files=100, persist4k_runs=1,
             persist_mb=8, wrk_s=1, mem_steps=(1, 3, 5), bwrap_idle=3, hold_cap=20, hold_s=30,
             hold_floor_mib=1024, bomb_s=1, churn_n=5, churn_batch=5, img_pulls=1,
             img_lives=5, img_many=5, cluster_exec_n=5, cluster_stream_mb=2,
             cluster_per_pod=3, cluster_list_n=3, egress_tcp_mb=16, egress_tcp_runs=1,
             egress_conn_n=20, egress_dns_n=20, egress_create_n=5)

# The table in print order, one section after another: (row, the figure that measures it,
# goal). A goal is (op, bound, was) on the ratio ours / peer ("was": the issue's figure for a
# row it says to keep at the peer), ("n>=", bound, None) on ours itself, ("<=+", ms, None) on
# ours - peer, ("<=x+", (ratio, ms), None) on ours against ratio x peer + ms, or None.
ISSUE27 = [  # issue 27 (performance, round 2): its goals table, in its order
    ("os command true, p50 (ms)", "opensandbox", ("<=", 1.3, None)),
    ("os command stream (MB/s)", "opensandbox", (">=", 0.8, None)),
    ("upload (MB/s) vs nginx PUT", "files", (">=", 1.0, None)),
    ("exec true, 1 sandbox, p99 (ms)", "exec", ("<=", 2.0, None)),
    ("create p99 (ms)", "create", ("<=", 1.2, None)),
    ("time to interactive: create + first exec true, p50 (ms)", "tti", ("<=", 1.0, None)),
    ("time to interactive, warm pool of 4 (ms)", "tti", ("<=", 0.5, None)),
    ("exec true, 16 sandboxes at once (execs/s)", "exec", (">=", 0.8, None)),
    ("exec stream (MB/s)", "stream", (">=", 0.7, None)),
    ("exists rate, 64 conns (req/s)", "rate", (">=", 0.8, None)),
    ("persist 5000 files of 4 KiB, empty archive (ms)", "persist", ("<=", 1.3, None)),
    ("restore 5000 files of 4 KiB, the create counted (ms)", "persist", ("<=", 1.3, None)),
    ("create p50, 1G disk limit, loop (ms)", "create-disk", ("<=", 1.3, None)),
    ("create p50, 1G disk limit, tmpfs (ms)", "create-disk", ("<=", 1.3, None)),
]
ISSUE15 = [  # the rest of issue 15's table, in its order, each row beside the peer it names
    ("exec true, 1 sandbox, p50 (ms)", "exec", ("<=", 1.5, None)),
    ("exists p50 latency, 64 conns (ms)", "rate", None),  # the issue's goal is on req/s
    ("restore 5000 files of 4 KiB (ms)", "persist", ("<=", 1.3, None)),
    ("download (MB/s) vs nginx sendfile", "files", (">=", 1.0, None)),
    ("churn: create p50, interleaved (ms)", "churn", ("<=", 1.3, None)),
    ("churn: delete p50, interleaved (ms)", "churn", ("<=", 1.3, None)),
    ("sandboxes held before failure", "hold", ("n>=", 10000, None)),
]
KEPT = [  # "already at or past the peer, keep them there": goal = the looser of 1.0x and the
    # issue's own figure ("was")
    ("create p50 (ms)", "create", ("<=", 1.0, 0.6)),
    ("disk-usage (ms)", "walk", ("<=", 1.0, 0.9)),
    ("walk (ms)", "walk", ("<=", 1.1, 1.1)),
    ("persist one 256 MiB file (ms)", "persist", ("<=", 1.1, 1.1)),
    ("restore one 256 MiB file (ms)", "persist", ("<=", 1.1, 1.1)),
    ("per-sandbox PSS, daemon+workers (KiB)", "memory", ("<=", 1.0, 0.57)),
]
IMAGES = [  # issue 22's benchmark: OCI images pulled by reference, each beside its peer
    ("image pull + unpack, local registry, fresh store (ms)", "images", ("<=", 1.0, None)),
    ("create + first exec true, cached OCI image, p50 (ms)", "images", ("<=", 1.5, None)),
    ("create + first exec true, cached OCI image against a host image, p50 (ms)", "images",
     ("<=", 1.2, None)),
    # "≈ one copy of its layers plus their uppers", read as at most 10% above it
    ("disk used by 100 sandboxes of one OCI image (MiB)", "images", ("<=", 1.1, None)),
]
# issue 23's benchmark: one service of three pods, each row beside the same call made without
# the relay (bench_cluster.py)
CLUSTER = [(row, "cluster", goal) for row, goal in bench_cluster.ROWS]
# issue 24's benchmark: a /v1 sandbox's network, each row beside the same thing done from the
# pod's own network namespace (or a create without network), in the egress tests' namespaces
# (bench_egress.py)
EGRESS = [(row, "egress", goal) for row, goal in bench_egress.ROWS]
OTHER = [  # the other figures of the earlier issues, no goal of theirs
    ("exec true, 16 sandboxes, p50 (ms)", "exec", None),
    ("exec true, 16 sandboxes, p99 (ms)", "exec", None),
    ("upload (MB/s) vs cp", "files", None), ("download (MB/s) vs cp", "files", None),
    ("persist files (ms)", "persist", None), ("restore files (ms)", "persist", None),
    ("daemon RSS, 1 sandbox (MiB)", "memory", None),
    ("daemon RSS, 100 sandboxes (MiB)", "memory", None),
    ("daemon RSS, 500 sandboxes (MiB)", "memory", None),
    ("create p99, 1G disk limit, loop (ms)", "create-disk", None),
    ("create p99, 1G disk limit, tmpfs (ms)", "create-disk", None),
    # how fast /healthz answers while the daemon works hard: the contract tests only bound
    # these with call timeouts (the "limit" column), the figures are here
    ("healthz worst, during disk-usage (ms)", "walk", None),
    ("healthz worst, during 16 exec loops (ms)", "exec", None),
    ("healthz worst, during upload and download (ms)", "files", None),
    ("healthz worst, during the persist 256 MiB case (ms)", "persist", None),
    ("healthz worst, during a fork bomb (ms)", "abuse", None),
    ("healthz worst, during a memory hog (ms)", "abuse", None),
    # the OpenSandbox surface's execd (issue 13), beside the native exec on the same sandbox
    ("os command true against a native exec of bash -c true, p50 (ms)", "opensandbox", None),
    ("os command true, p99 (ms)", "opensandbox", None),
    # its files (issue 14): the SDK's path (multipart upload, download) beside the native one
    ("os upload (MB/s)", "osfiles", None),
    ("os download (MB/s)", "osfiles", None),
]
SECTIONS = [("issue 27: its goals, in its order", ISSUE27),
            ("issue 15: the rest of its table, in its order", ISSUE15),
            ("issue 15: at or past the peer today, keep them there", KEPT),
            ("issue 22: OCI images", IMAGES),
            ("issue 23: a cluster of three pods", CLUSTER),
            ("issue 24: network egress", EGRESS),
            ("the other figures", OTHER)]
SPEC = {row: (fig, goal) for _, rows in SECTIONS for row, fig, goal in rows}
ROWS = [row for _, rows in SECTIONS for row, _, _ in rows]  # every row the table always prints


def fig_rows(fig):
    return [row for row in ROWS if SPEC[row][0] == fig]


# ---- plumbing ---------------------------------------------------------------------------


class Daemon:
    """One sandbox-host on 127.0.0.1:0 with a given root, ended by its pid."""

    logdir = None

    def __init__(self, binary, root, *flags):
        os.makedirs(root, exist_ok=True)
        self.errlog = open(os.path.join(Daemon.logdir or os.path.dirname(root),
                                        f"daemon-{os.path.basename(root)}.log"), "a")
        # no disk limit unless the figure asks for one (a later flag wins): the rows were
        # measured so, and create-disk measures what a limit costs; no network (nothing of
        # the host's namespace changes: bench_egress.py measures it in namespaces of its own)
        self.p = subprocess.Popen([binary, "--listen=127.0.0.1:0", f"--root={root}",
                                   "--log-level=warn", "--disk-max=0", "--egress=off", *flags],
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


def goal_text(goal):
    if goal is None:
        return "—"
    op, bound, was = goal
    sign = "≥" if op.endswith(">=") else "≤"
    if op == "n>=":
        return f"{sign} {bound:,}"
    if op == "<=+":
        return f"{sign} +{bound:g} ms"
    if op == "<=x+":
        return f"{sign} {bound[0]:.1f}× + {bound[1]:g} ms"
    return f"{sign} {bound:.1f}×" + (f" (issue: {was}×)" if was is not None else "")


def goal_met(goal, r):
    if goal is None:
        return None
    op, bound, _ = goal
    if op in ("<=+", "<=x+"):
        if r["ours"] is None or r["peer"] is None:
            return None
        if op == "<=+":
            return r["ours"] - r["peer"] <= bound
        return r["ours"] <= bound[0] * r["peer"] + bound[1]
    v = r["ours"] if op == "n>=" else r["ratio"]
    if v is None:
        return None
    return v >= bound if op.endswith(">=") else v <= bound


class Table:
    def __init__(self):
        self.rows = {}

    def add(self, name, ours, peer, peer_name, kind, note=""):
        """kind: 'lat' (lower is better) or 'rate' (higher is better) or 'abs' (no peer).
        The ratio is ours / peer for every kind, as in issue 15's table."""
        assert name in ROWS, name
        ratio = ours / peer if ours is not None and peer else None
        self.rows[name] = dict(ours=ours, peer=peer, peer_name=peer_name, ratio=ratio,
                               kind=kind, note=note)
        self.rows[name]["met"] = goal_met(SPEC[name][1], self.rows[name])

    def na(self, name, reason):
        self.rows[name] = dict(ours=None, peer=None, peer_name="", ratio=None, kind="na",
                               note=f"n/a ({reason})", met=None)

    def print(self, out=sys.stdout):
        def f(v):
            if v is None:
                return "n/a"
            if isinstance(v, int):
                return str(v)
            return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}"
        out.write("| figure | ours | peer or limit (same run) | ours / peer | goal | met |\n"
                  "|---|---|---|---|---|---|\n")
        for title, rows in SECTIONS:
            out.write(f"| **{title}** | | | | | |\n")
            for name, _, goal in rows:
                r = self.rows.get(name) or dict(
                    ours=None, peer=None, peer_name="", ratio=None, met=None,
                    note="n/a: not measured (an earlier step failed)")
                peer = f"{f(r['peer'])} ({r['peer_name']})" if r["peer"] is not None else (
                    r["peer_name"] or "—")
                ratio = f"{r['ratio']:.2f}×" if r["ratio"] is not None else "—"
                ours = r["note"] if r["ours"] is None else (
                    f(r["ours"]) + (f" ({r['note']})" if r["note"] else ""))
                met = "—" if goal is None else {True: "yes", False: "**no**",
                                                None: "n/a"}[r["met"]]
                cells = [name, ours, peer, ratio, goal_text(goal), met]
                out.write("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |\n")
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


def bwrap_true(a, cfg):
    """This run's bwrap --unshare-all /bin/true times (hyperfine, create_n runs), measured once
    and shared by create and time to interactive: (seconds each or None, the peer's name)."""
    if not hasattr(a, "bwrap"):
        if have("bwrap") and have("hyperfine"):
            a.bwrap = (hyperfine_times(bwrap_args() + ["/bin/true"], cfg["create_n"]),
                       "bwrap --unshare-all /bin/true, hyperfine")
        else:
            a.bwrap = (None, "bwrap/hyperfine not installed")
    return a.bwrap


def fig_create(t, d, a, cfg):
    c = d.client()
    lat = []
    for _ in range(cfg["create_n"]):
        t0 = time.perf_counter()
        rid = create(c)
        lat.append(time.perf_counter() - t0)
        c.call("DELETE", f"/sandboxes/{rid}")
    bw, peer = bwrap_true(a, cfg)
    t.add("create p50 (ms)", pct(lat, .5) * 1e3, bw and pct(bw, .5) * 1e3, peer, "lat")
    t.add("create p99 (ms)", pct(lat, .99) * 1e3, bw and pct(bw, .99) * 1e3, peer, "lat")


def life(d, a, n, execs, pause_ms=0, image=None):
    """benchtool lifeloop: n times create (from `image` when given), `execs` execs of true,
    delete, then pause_ms of pause, not timed (one C client, one keep-alive connection); one
    row of seconds per sandbox: create, each exec, delete."""
    out = run([a.tool, "lifeloop", d.host, str(d.port), str(n), str(execs),
               str(pause_ms)] + ([image] if image else [])).stdout
    return [[int(x) / 1e9 for x in line.split()] for line in out.splitlines()]


def fig_tti(t, d, a, cfg):
    """Time to interactive (issue 15): create a sandbox and run its first exec of `true`, then
    delete it (not counted), create_n times from one C client; beside this run's bwrap
    --unshare-all /bin/true (the runs the create figure made)."""
    rows = life(d, a, cfg["create_n"], 1)
    bw, peer = bwrap_true(a, cfg)
    t.add("time to interactive: create + first exec true, p50 (ms)",
          pct([c + e for c, e, _ in rows], .5) * 1e3, bw and pct(bw, .5) * 1e3, peer, "lat",
          note=f"create p50 {pct([r[0] for r in rows], .5) * 1e3:.2f} + first exec p50 "
          f"{pct([r[1] for r in rows], .5) * 1e3:.2f}")
    fig_tti_pool(t, a, cfg, "time to interactive: create + first exec true, p50 (ms)")


POOL_PACE_MS = 30


def fig_tti_pool(t, a, cfg, peer_row):
    """Time to interactive with SANDBOX_HOST_WARM_POOL=4 (a daemon of its own): the same
    create + first exec + delete loop, each create taking a sandbox the pool started before,
    with a pause of POOL_PACE_MS (not timed) after each delete: the pool refills one sandbox
    at a time, and creates that arrive faster than a create takes (back to back) would
    measure the pool's refill rate, not what a create finds in it. The peer is the bwrap run
    of the row above."""
    root = os.path.join(a.base, "root-pool")
    d = Daemon(a.bin, root, "--max-sandboxes=64", "--warm-pool=4")
    try:
        time.sleep(1.0 if a.smoke else 2.0)  # the pool fills from the loop
        rows = life(d, a, cfg["create_n"], 1, POOL_PACE_MS)
    finally:
        d.stop()
    peer = t.rows.get(peer_row, {})
    t.add("time to interactive, warm pool of 4 (ms)", pct([c + e for c, e, _ in rows], .5) * 1e3,
          peer.get("peer"), peer.get("peer_name") or "bwrap (see the row above)", "lat",
          note=f"create p50 {pct([r[0] for r in rows], .5) * 1e3:.2f} + first exec p50 "
          f"{pct([r[1] for r in rows], .5) * 1e3:.2f}; {POOL_PACE_MS} ms between lives")


def fig_churn(t, d, a, cfg):
    """An agent's life, one sandbox at a time (issue 15): create, exec `true` twice, delete
    (benchtool lifeloop); beside the same calls not interleaved: churn_batch creates in a row,
    then their deletes in a row (benchtool batchloop; the daemon holds 64 at most). The two
    alternate in rounds of churn_batch sandboxes on the same daemon, so that the machine's load
    falls on both alike."""
    b = cfg["churn_batch"]
    inter, apart = [], []
    for _ in range(max(1, cfg["churn_n"] // b)):
        inter += life(d, a, b, 2)
        out = run([a.tool, "batchloop", d.host, str(d.port), str(b)]).stdout
        apart += [[int(x) / 1e9 for x in line.split()] for line in out.splitlines()]
    t.add("churn: create p50, interleaved (ms)", pct([r[0] for r in inter], .5) * 1e3,
          pct([r[0] for r in apart], .5) * 1e3, f"the same creates not interleaved: {b} in a "
          "row", "lat")
    t.add("churn: delete p50, interleaved (ms)", pct([r[3] for r in inter], .5) * 1e3,
          pct([r[1] for r in apart], .5) * 1e3, f"the same deletes not interleaved: {b} in a "
          "row", "lat")


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


def par_lines(args):
    """benchtool forkpar/execpar: (seconds from the start to the last loop's end, every
    latency in seconds)."""
    v = tool_lines(args)
    return v[0] / 1e9, [x / 1e9 for x in v[1:]]


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

    # 16 sandboxes at once: 16 C clients (one connection and one sandbox each), started
    # together by benchtool execpar; the peer, 16 fork+exec+wait loops started together
    rids = [create(c) for _ in range(16)]
    m = cfg["exec16_n"]
    span, ours16 = par_lines([a.tool, "execpar", d.host, str(d.port), str(m), *rids])
    span_f, fe16 = par_lines([a.tool, "forkpar", "16", str(m)])
    peer = "16 fork+exec+wait loops at once"
    t.add("exec true, 16 sandboxes at once (execs/s)", 16 * m / span, 16 * m / span_f, peer,
          "rate", note=f"{16 * m} execs in {span:.2f} s")
    t.add("exec true, 16 sandboxes, p50 (ms)", pct(ours16, .5) * 1e3, pct(fe16, .5) * 1e3,
          peer, "lat")
    t.add("exec true, 16 sandboxes, p99 (ms)", pct(ours16, .99) * 1e3, pct(fe16, .99) * 1e3,
          peer, "lat")
    # /healthz while the same 16 loops run again: a pass of its own, so that no figure above
    # shares the machine with the probe
    with Probe(d) as probe:
        par_lines([a.tool, "execpar", d.host, str(d.port), str(m), *rids])
    probe.add(t, "healthz worst, during 16 exec loops (ms)", 1000,
              "test_exec.py")
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
    # its floor: a command is `bash -c TEXT` (OPENSANDBOX.md 3.1), so bash's own start is in
    # every command; the native exec of the same `bash -c true`, same sandbox, is the least a
    # command can cost
    bash = [x / 1e9 for x in tool_lines([a.tool, "execloop", d.host, str(d.port), sid, str(n),
                                         "bash", "-c", "true"])]
    t.add("os command true against a native exec of bash -c true, p50 (ms)", pct(ours, .5) * 1e3,
          pct(bash, .5) * 1e3, "native exec of bash -c true, same sandbox: the floor", "lat",
          note=f"native exec of true {pct(nat, .5) * 1e3:.2f}")

    ws = os.path.join(d.root, sid, "workspace")
    size = base64_text_file(os.path.join(ws, "text"), cfg["stream_mb"] << 20)
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


def fig_osfiles(t, d, a, cfg):
    """OpenSandbox's `POST /files/upload` (multipart, as the SDK sends it) and
    `GET /files/download` of one file into a /v1 sandbox's /workspace, beside the native
    `PUT /file` and `GET /file` of the same file in the same sandbox, all with curl."""
    c = d.client()
    st, b = c.call("POST", "/v1/sandboxes", {"image": {"uri": "default"},
                                             "entrypoint": ["tail", "-f", "/dev/null"]})
    if st != 202:
        raise RuntimeError(f"/v1 create answered {st}: {b[:200]!r}")
    sid = json.loads(b)["id"]
    nbytes = cfg["osfile_mb"] << 20
    src = os.path.join(a.base, "osupload.bin")
    meta = os.path.join(a.base, "osmeta.json")
    with open("/dev/urandom", "rb") as r, open(src, "wb") as w:
        left = nbytes
        while left:
            blk = r.read(min(left, 1 << 20))
            w.write(blk)
            left -= len(blk)
    with open(meta, "w") as f:
        json.dump({"path": "/workspace/os.bin"}, f)
    execd = f"http://{d.host}:{d.port}/v1/sandboxes/{sid}/proxy/44772"
    native = f"http://{d.host}:{d.port}/sandboxes/{sid}/file?path="
    up = max(curl_speed(["-F", f"metadata=@{meta};filename=metadata;type=application/json",
                         "-F", f"file=@{src};type=application/octet-stream",
                         execd + "/files/upload"]) for _ in range(2))
    if os.path.getsize(os.path.join(d.root, sid, "workspace", "os.bin")) != nbytes:
        raise RuntimeError("the /v1 upload has the wrong size")
    dn = max(curl_speed([execd + "/files/download?path=/workspace/os.bin"]) for _ in range(2))
    nup = max(curl_speed(["-T", src, native + "nat.bin"]) for _ in range(2))
    ndn = max(curl_speed([native + "nat.bin"]) for _ in range(2))
    size = f"{cfg['osfile_mb']} MiB"
    t.add("os upload (MB/s)", up, nup, f"native PUT /file, same sandbox, {size}, curl", "rate")
    t.add("os download (MB/s)", dn, ndn, f"native GET /file, same sandbox, {size}, curl",
          "rate")
    os.unlink(src)
    os.unlink(meta)
    c.call("DELETE", f"/v1/sandboxes/{sid}")


NGINX_CONF = """
user root;
worker_processes 2;
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
        t.add("upload (MB/s) vs nginx PUT", up, nup, f"nginx dav PUT, curl, {cfg['file_mb']} MiB",
              "rate")
        t.add("download (MB/s) vs nginx sendfile", dn, ndn,
              f"nginx sendfile, curl, {cfg['file_mb']} MiB", "rate")
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


def du_kib(path):
    """du -skx: KiB allocated under path, on its own file system only."""
    return int(run(["du", "-skx", path]).stdout.split()[0])


def pull_log_ms(d, ref, timeout=5):
    """The pull of ref as the daemon logs it: from its "pulling REF" line to its "pulled REF"
    line (ms, the log's millisecond clock), or None."""
    import datetime

    def at(line):
        return datetime.datetime.strptime(line["time"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
    deadline = time.time() + timeout
    while True:
        start = end = None
        with open(d.errlog.name) as f:
            for ln in f:
                try:
                    o = json.loads(ln)
                except ValueError:
                    continue
                if o.get("event") != "image-pull":
                    continue
                if o.get("msg") == f"pulling {ref}":
                    start = at(o)
                elif o.get("msg", "").startswith(f"pulled {ref} "):
                    end = at(o)
        if start is not None and end is not None:
            return (end - start) * 1e3
        if time.time() > deadline:
            return None
        time.sleep(0.1)


def fig_images(t, a, cfg):
    """Issue 22's rows. The image: the python one of tests/images/build.py (built when missing,
    minutes), or busybox for --smoke when python is not cached; pushed to a plain-HTTP
    docker-registry on 127.0.0.1 (tests/images/registry.py). Everything on the bench's tmpfs.

    1. pull + unpack, img_pulls rounds, each: the peer (`skopeo copy` into an OCI layout, then
       `umoci unpack`), then ours on a fresh daemon with a fresh state root: the create with
       the image's reference, less the median of 3 host-image creates in the same daemon just
       before (the row), and the pull as the daemon logs it (the note).
    2. create + first exec of true from the now cached image (benchtool lifeloop with the
       reference), beside `bwrap --ro-bind TREE / ... /bin/true` on the image's tree the last
       peer unpacked (hyperfine), and beside the same lives on the host image in the same
       daemon (rounds of 10 alternating, so that the load falls on both alike).
    3. img_many sandboxes of the image held at once: du of the image store ({root}/images)
       plus their uppers, beside one copy of the image's tree (the umoci one) plus the same
       uppers."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from images import build, registry

    why = registry.available() or (a.smoke and build.busybox_available())
    if why:
        raise RuntimeError(why)
    lay, tag, label, tmp = image_for(a.smoke)
    name = label.split()[0]  # label: "python", or "busybox (smoke: ...)"
    work = os.path.join(a.base, "images")
    os.makedirs(work)
    d = None
    try:
        size = sum(x["size"] for x in
                   json.loads(lay.read_blob(lay.tagged(tag)["digest"]))["layers"])
        with registry.Registry("plain") as reg:
            ref = build.push(lay, tag, reg, f"test/{name}:{tag}")
            flags = ["--max-sandboxes=128", "--log-level=info", f"--insecure-registries={reg.host}"]
            peer, copy, unpack, ours, base, logged = [], [], [], [], [], []
            tree = os.path.join(work, "tree")  # the last peer's tree, for 2 and 3
            for i in range(cfg["img_pulls"]):
                if os.path.isdir(tree):
                    shutil.rmtree(tree)
                c_ms, u_ms = peer_pull_unpack(ref, work, keep=tree)
                copy.append(c_ms)
                unpack.append(u_ms)
                peer.append(c_ms + u_ms)
                if d:
                    d.stop()
                    shutil.rmtree(d.root, ignore_errors=True)
                root = os.path.join(work, f"root-{i}")
                d = Daemon(a.bin, root, *flags)
                d.root = root
                c = d.client()
                host = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    rid = create(c)
                    host.append(time.perf_counter() - t0)
                    c.call("DELETE", f"/sandboxes/{rid}")
                t0 = time.perf_counter()
                rid = create(c, {"image": ref})
                dt = time.perf_counter() - t0
                c.call("DELETE", f"/sandboxes/{rid}")
                base.append(statistics.median(host) * 1e3)
                ours.append(dt * 1e3 - base[-1])
                logged.append(pull_log_ms(d, ref))
            med = statistics.median
            lg = [x for x in logged if x is not None]
            t.add("image pull + unpack, local registry, fresh store (ms)", med(ours), med(peer),
                  f"skopeo copy + umoci unpack, same registry and tmpfs: copy {med(copy):.0f} "
                  f"+ unpack {med(unpack):.0f}", "lat",
                  note=f"{label} image, {size / 1e6:.1f} MB compressed, median of "
                  f"{cfg['img_pulls']}: the create from the reference less a host-image create "
                  f"({med(base):.1f} ms) in the same fresh daemon; the pull alone by the daemon's "
                  f"log (pulling -> pulled): " + (f"{med(lg):.0f} ms" if lg else "not logged"))

            # 2: the image is in the last daemon's store now
            n = cfg["img_lives"]
            bw = hyperfine_times(["bwrap", "--ro-bind", tree, "/", "--proc", "/proc", "--dev",
                                  "/dev", "--unshare-all", "/bin/true"], n)
            oci, hst = [], []
            for k in range(0, n, 10):
                oci += life(d, a, min(10, n - k), 1, image=ref)
                hst += life(d, a, min(10, n - k), 1)

            def tti(rows):
                return pct([r[0] + r[1] for r in rows], .5) * 1e3

            def parts(rows):
                return (f"create p50 {pct([r[0] for r in rows], .5) * 1e3:.2f} + first exec p50 "
                        f"{pct([r[1] for r in rows], .5) * 1e3:.2f}")
            t.add("create + first exec true, cached OCI image, p50 (ms)", tti(oci),
                  pct(bw, .5) * 1e3, "bwrap --ro-bind TREE / --proc /proc --dev /dev "
                  "--unshare-all /bin/true on the image's tree unpacked by umoci, hyperfine",
                  "lat", note=f"{name}; {parts(oci)}")
            t.add("create + first exec true, cached OCI image against a host image, p50 (ms)",
                  tti(oci), tti(hst), f"the default host image, same daemon, interleaved; "
                  f"{parts(hst)}", "lat", note=name)

            # 3: img_many sandboxes of the image at once
            m = cfg["img_many"]
            c = d.client()
            rids = []
            try:
                for _ in range(m):
                    rids.append(create(c, {"image": ref}))
                ups = [os.path.join(d.root, ".sandboxes", s, "root")
                       for s in os.listdir(os.path.join(d.root, ".sandboxes"))]
                ups = [u for u in ups if os.path.isdir(u)]
                if len(ups) != m:
                    raise RuntimeError(f"{len(ups)} uppers found for {m} sandboxes")
                store = du_kib(os.path.join(d.root, "images"))
                blobs = du_kib(os.path.join(d.root, "images", "blobs"))
                layers = du_kib(os.path.join(d.root, "images", "layers"))
                upper = sum(du_kib(u) for u in ups)
                one = du_kib(tree)
            finally:
                for r in rids:
                    c.call("DELETE", f"/sandboxes/{r}")
            t.add("disk used by 100 sandboxes of one OCI image (MiB)", (store + upper) / 1024,
                  (one + upper) / 1024, f"one copy of the image's tree (umoci unpack, "
                  f"{one / 1024:.1f} MiB) plus the same uppers", "lat",
                  note=f"{name}, {m} sandboxes: the store {store / 1024:.1f} MiB (compressed "
                  f"blobs {blobs / 1024:.1f}, unpacked layers {layers / 1024:.1f}) + the uppers "
                  f"{upper / 1024:.1f} MiB ({upper / m:.0f} KiB each), du -skx")
    finally:
        if d:
            d.stop()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def fig_cluster(t, a, cfg):
    bench_cluster.fig_cluster(t, a, cfg, tool_lines, run)


def fig_persist(t, a, cfg):
    """Persist/restore through bench_persist.py's own case (reused, not duplicated), for 10,000
    files of 1 KiB, 5,000 files of 4 KiB (issue 15's row) and one 256 MiB file: a sandbox
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
    nfiles, n4k, mb = cfg["persist_files"], cfg["persist4k_files"], cfg["persist_mb"]
    # (persist row, restore row, what, runs (median), the tree)
    cases = [("persist files (ms)", "restore files (ms)", f"{nfiles} files", 1,
              lambda ws, uid: bp.make_small(ws, nfiles, uid)),
             ("persist 5000 files of 4 KiB, empty archive (ms)",
              "restore 5000 files of 4 KiB (ms)", f"{n4k} files of 4 KiB",
              cfg["persist4k_runs"], lambda ws, uid: bp.make_small(ws, n4k, uid, 4096)),
             ("persist one 256 MiB file (ms)", "restore one 256 MiB file (ms)", f"{mb} MiB", 1,
              lambda ws, uid: bp.make_big(ws, mb << 20, uid))]
    try:
        cli = bp.Client(d.host, d.port)
        # probe: is persist there at all?
        rid = cli.create("bench-probe")
        st, body = cli.call("POST", f"/sandboxes/{rid}/persist", {"delete": True})
        cli.delete(rid)
        shutil.rmtree(os.path.join(nfs, "bench-probe"), ignore_errors=True)
        if st != 204:
            reason = f"POST /persist answered {st} {body[:120].decode(errors='replace')}"
            for pn, rn, *_ in cases:
                t.na(pn, reason)
                t.na(rn, reason)
            return
        for pn, rn, what, runs, build in cases:
            try:
                with Probe(d) as probe:
                    res = bp.bench_case(cli, root, nfs, scratch, what, build, runs)
            except SystemExit as e:  # bench_persist stops on a failed call: report it
                t.na(pn, str(e)[:200])
                t.na(rn, str(e)[:200])
                continue
            if pn.startswith("persist one"):
                probe.add(t, "healthz worst, during the persist 256 MiB case (ms)", 1000,
                          "test_persist.py")
            rows = {fig.split(": ", 1)[1]: (ours, peer) for fig, ours, peer in res}
            base_ms = rows["(create without item, for reference)"][0]
            med = f", median of {runs}" if runs > 1 else ""
            ours, peer = rows["checkpoint, empty archive"]
            t.add(pn, ours, peer, f"rsync -a, {what}{med}", "lat")
            ours, peer = rows["restore on create"]
            t.add(rn, ours - base_ms, peer, f"rsync -a, {what}{med} (ours: create with item_id "
                  f"less a create without, {base_ms:.1f} ms)", "lat")
            if rn == "restore 5000 files of 4 KiB (ms)":  # issue 27: the whole create
                t.add("restore 5000 files of 4 KiB, the create counted (ms)", ours, peer,
                      f"rsync -a, {what}{med} (ours: the whole create with item_id)", "lat")
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)


def wrk_rate(url, seconds):
    """wrk -t2 -c64: (requests/s, p50 latency in ms)."""
    out = run(["wrk", "-t2", "-c64", f"-d{seconds}s", "--latency", url], timeout=seconds + 60)
    rate = p50 = None
    for line in out.stdout.splitlines():
        w = line.split()
        if line.startswith("Requests/sec:"):
            rate = float(w[1])
        elif len(w) == 2 and w[0] == "50%":
            num = w[1].rstrip("smu")
            p50 = float(num) * {"us": 1e-3, "ms": 1, "s": 1e3, "m": 60e3}[w[1][len(num):]]
    non2xx = [ln for ln in out.stdout.splitlines() if "Non-2xx" in ln or "errors" in ln]
    if non2xx:
        st = subprocess.run(["curl", "-s", "-i", url], stdout=subprocess.PIPE,
                            text=True, timeout=30).stdout.splitlines()
        raise RuntimeError("wrk saw errors: " + "; ".join(non2xx).strip() +
                           f"; one GET now: {st[:1]} {st[-1:]}")
    if rate is None or p50 is None:
        raise RuntimeError("no rate or no p50 in wrk's output")
    return rate, p50


def fig_rate(t, d, a, cfg, ngx):
    if not have("wrk"):
        t.add("exists rate, 64 conns (req/s)", None, None, "wrk not installed", "rate")
        t.add("exists p50 latency, 64 conns (ms)", None, None, "wrk not installed", "lat")
        return
    c = d.client()
    rid = create(c)
    ours, ours50 = wrk_rate(f"http://{d.host}:{d.port}/sandboxes/{rid}/exists?path=x",
                            cfg["wrk_s"])
    peer = peer50 = None
    if ngx:
        with open(os.path.join(ngx.tmp, "www", "tiny.json"), "w") as f:
            f.write('{"exists":false}')
        peer, peer50 = wrk_rate(ngx.url("tiny.json"), cfg["wrk_s"])
    name = "nginx (2 workers) tiny file, wrk -t2 -c64" if ngx else "nginx not installed"
    t.add("exists rate, 64 conns (req/s)", ours, peer, name, "rate")
    t.add("exists p50 latency, 64 conns (ms)", ours50, peer50, name + ", its p50", "lat")
    c.call("DELETE", f"/sandboxes/{rid}")


def children():
    """{ppid: [pid, ...]} of every process now."""
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
    return kids


def descendants(pid, kids=None):
    kids = children() if kids is None else kids
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


def bwrap_idle_kib(n):
    """PSS (KiB) of one idle bwrap sandbox, the peer of our per-sandbox PSS: n of
    `bwrap --unshare-all ... sleep 600` at once, the PSS of all their processes (bwrap, its
    child in the new pid namespace, sleep) summed, over n. Each ended by its pid (SIGKILL to
    bwrap; --die-with-parent ends what runs inside)."""
    procs = []
    try:
        for _ in range(n):
            procs.append(subprocess.Popen(bwrap_args() + ["sleep", "600"],
                                          stdin=subprocess.DEVNULL))
        deadline = time.time() + 30
        while True:
            kids = children()
            trees = [descendants(p.pid, kids) for p in procs]
            if all(any(comm(k) == "sleep" for k in tree) for tree in trees):
                break
            if time.time() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError("the idle bwrap sandboxes did not all start")
            time.sleep(0.2)
        time.sleep(1)
        kids = children()
        return sum(rollup(p.pid)[1] + sum(rollup(k)[1] for k in descendants(p.pid, kids))
                   for p in procs) / n
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=30)


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


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
        nb = cfg["bwrap_idle"]
        peer = bwrap_idle_kib(nb) if have("bwrap") else None
        t.add("per-sandbox PSS, daemon+workers (KiB)", per, peer,
              f"one idle bwrap --unshare-all sandbox (bwrap + sleep), PSS, {nb} at once"
              if peer else "bwrap not installed", "lat",
              note=f"({hi}-{lo}) slope; of which daemon {per_d:.0f} KiB; kernel "
              f"(Slab+KernelStack+PageTables, machine-wide) {per_k:.0f} KiB; daemon fds "
              f"{per_fd:.1f}")
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
            f"{os.uname().release}")


def loadavg():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("SH_BIN") or
                    os.path.join(REPO, "build-release", "sandbox-host"))
    ap.add_argument("--tool", default=os.path.join(REPO, "build-release", "benchtool"))
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    ap.add_argument("--json", help="write the rows as JSON here too")
    ap.add_argument("--logs", help="keep the daemons' logs (warn and above) in this directory")
    ap.add_argument("--hold-cap", type=int, help="cap of the held-sandboxes figure")
    ap.add_argument("--only", help="comma-separated figures to run (create, tti, churn, exec, "
                    "stream, opensandbox, files, osfiles, walk, rate, persist, memory, hold, "
                    "create-disk, abuse, images, cluster, egress); default: all")
    ap.add_argument("--cluster-per-pod", type=int,
                    help="sandboxes a pod of the cluster listing row holds (one pod: 3x)")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    cfg = dict(SMOKE if a.smoke else FULL)
    if a.hold_cap:
        cfg["hold_cap"] = a.hold_cap
        cfg["hold_s"] = max(cfg["hold_s"], a.hold_cap // 5)
    if a.cluster_per_pod:
        cfg["cluster_per_pod"] = a.cluster_per_pod
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
    load0 = loadavg()
    sys.stderr.write(f"bench: {machine()}, load average {load0}\n")
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
        for name, fn, args in [("create", fig_create, (d, a, cfg)),
                               ("tti", fig_tti, (d, a, cfg)),
                               ("churn", fig_churn, (d, a, cfg)),
                               ("exec", fig_exec, (d, a, cfg)),
                               ("stream", fig_stream, (d, a, cfg)),
                               ("opensandbox", fig_os, (d, a, cfg)),
                               ("files", fig_files, (d, a, cfg, ngx)),
                               ("osfiles", fig_osfiles, (d, a, cfg)),
                               ("walk", fig_walk, (d, a, cfg)),
                               ("rate", fig_rate, (d, a, cfg, ngx))]:
            if want(name):
                step(t, fig_rows(name), fn, *args)
        if ngx:
            ngx.stop()
            ngx = None
        d.stop()
        d = None
        for name, fn in [("persist", fig_persist), ("memory", fig_memory), ("hold", fig_hold),
                         ("create-disk", fig_create_disk), ("abuse", fig_abuse),
                         ("images", fig_images), ("cluster", fig_cluster),
                         ("egress", bench_egress.fig_egress)]:
            if want(name):
                step(t, fig_rows(name), fn, a, cfg)
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
    load = f"load average (1, 5, 15 min) {load0} at the start, {loadavg()} at the end"
    sys.stdout.write(f"machine: {machine()}\n{load}\nbinary: {a.bin} ({ver})\n"
                     "ours / peer: for a time below 1 is faster than the peer, for a rate above "
                     "1 is; goal: issue 15's (issues 22's, 23's and 24's for their rows), met or not\n\n")
    t.print()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": machine(), "load": load, "rows": t.rows}, f, indent=1)
    print(f"\nbench: {len(ROWS)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
