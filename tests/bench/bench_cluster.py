#!/usr/bin/python3
"""Issue 23's rows, for bench_all.py's `cluster` figure: what a relay through a peer costs.
Three daemons that know each other (tests/k8s/cluster_lib.Cluster: static peers, one shared
snapshot root, no balancer: each call names its pod), on the bench's tmpfs:

1. `POST /command {"command": "true"}` round trips (benchtool oscmdloop, one keep-alive
   connection) sent to a pod that does not hold the sandbox (relayed to its owner) against
   the same loop sent to the owner directly;
2. the SSE stream of `cat` of a base64 text file (benchtool osstream) through the same relay
   against direct;
3. `GET /v1/sandboxes` (fresh connection each, default page) on a cluster of 3 pods holding
   `cluster_per_pod` sandboxes each (every peer asked for its own list, merged) against one
   pod without peers holding 3 × cluster_per_pod.

Sizes come from cfg (cluster_exec_n, cluster_stream_mb, cluster_per_pod, cluster_list_n).
Not a test: asserts nothing about time. Every process is ended by its pid (Cluster.close,
Pod.stop), every directory removed.
"""
import http.client
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "k8s"))

from bench_isolation import base64_text_file, pct  # noqa: E402
from cluster_lib import SDK_DEFAULT_CREATE, Cluster  # noqa: E402
from k8s_helpers import Pod  # noqa: E402

ROW_EXEC = "command true via a non-owner pod, p50 (ms)"
ROW_STREAM = "command stream via a non-owner pod (MB/s)"
ROW_LIST = "GET /v1/sandboxes, 3 pods × n, p50 (ms)"
ROWS = [  # (row, goal on ours / peer), as bench_all's sections
    (ROW_EXEC, ("<=", 1.3, None)),
    (ROW_STREAM, (">=", 0.8, None)),
    (ROW_LIST, ("<=", 2.0, None)),
]
UID_BASES = (391000, 392000, 393000)
ONE_POD_UID_BASE = 394000


def _call(port, method, path, body=None, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        c.request(method, path, body=data, headers=hdrs)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def _create(port, metadata=None):
    b = dict(SDK_DEFAULT_CREATE, metadata=metadata or {})
    st, body = _call(port, "POST", "/v1/sandboxes", b)
    if st != 202:
        raise RuntimeError(f"/v1 create on :{port} answered {st}: {body[:200]!r}")
    return json.loads(body)["id"]


def _fill(port, n):
    for _ in range(n):
        _create(port, {"bench": "list"})


def _list_times(port, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        st, body = _call(port, "GET", "/v1/sandboxes")
        out.append(time.perf_counter() - t0)
        if st != 200:
            raise RuntimeError(f"GET /v1/sandboxes on :{port} answered {st}: {body[:200]!r}")
    return out, json.loads(body)["pagination"]["totalItems"]


def fig_cluster(t, a, cfg, tool_lines, run):
    """The three rows into table t (bench_all.Table). a: bench_all's args (bin, tool, base)."""
    per_pod = cfg["cluster_per_pod"]
    # One background command each: 3 × per_pod idle sandboxes must fit this machine's fd limit.
    env = {"SANDBOX_HOST_MAX_SANDBOXES": str(max(256, 3 * per_pod + 16)),
           "SANDBOX_HOST_BACKGROUND_MAX": "1",
           "SANDBOX_HOST_LOG_LEVEL": "warn", "SANDBOX_HOST_DISK_MAX": "0"}
    c = Cluster(uid_bases=UID_BASES, env=env, bin=a.bin, base=a.base, balancer=False)
    try:
        owner, relay = c.pods[0], c.pods[1]
        sid = _create(owner.port)
        if not sid.startswith(c.token(owner)):
            raise RuntimeError(f"{sid} does not begin with its pod's token {c.token(owner)}")
        n = cfg["cluster_exec_n"]
        for p in (owner, relay):  # warm-up, and the relay must answer at all
            tool_lines([a.tool, "oscmdloop", "127.0.0.1", str(p.port), sid, "3"])
        direct = [x / 1e9 for x in tool_lines([a.tool, "oscmdloop", "127.0.0.1",
                                                str(owner.port), sid, str(n)])]
        relayed = [x / 1e9 for x in tool_lines([a.tool, "oscmdloop", "127.0.0.1",
                                                 str(relay.port), sid, str(n)])]
        t.add(ROW_EXEC, pct(relayed, .5) * 1e3, pct(direct, .5) * 1e3,
              "the owner directly, same sandbox", "lat", note=f"{n} round trips each")

        size = base64_text_file(os.path.join(str(owner.root), sid, "workspace", "text"),
                          cfg["cluster_stream_mb"] << 20)
        res, dir_res = [], []
        for _ in range(2):
            for p, into in ((relay, res), (owner, dir_res)):
                out = run([a.tool, "osstream", "127.0.0.1", str(p.port), sid,
                           "cat text"]).stdout.split()
                if int(out[0]) != size:
                    raise RuntimeError(f"streamed {out[0]} bytes of {size} via {p.name}")
                into.append(size / float(out[1]) / 1e6)
        t.add(ROW_STREAM, max(res), max(dir_res), "the owner directly, same file", "rate",
              note=f"{size >> 20} MiB of base64 lines")
        _call(owner.port, "DELETE", "/v1/sandboxes/" + sid)

        for p in c.pods:
            _fill(p.port, per_pod)
        spread, total = _list_times(relay.port, cfg["cluster_list_n"])
        if total != 3 * per_pod:
            raise RuntimeError(f"the cluster listed {total} sandboxes of {3 * per_pod}")
    finally:
        problems = c.close()
        if problems:
            sys.stderr.write(f"bench: cluster: {problems}\n")

    root = os.path.join(a.base, "one-pod")
    os.makedirs(root)
    one = Pod("one", ONE_POD_UID_BASE, root=root, env=env, bin=a.bin)
    try:
        _fill(one.port, 3 * per_pod)
        single, total = _list_times(one.port, cfg["cluster_list_n"])
        if total != 3 * per_pod:
            raise RuntimeError(f"one pod listed {total} sandboxes of {3 * per_pod}")
    finally:
        one.stop()
        one.cleanup()
        shutil.rmtree(root, ignore_errors=True)
    t.add(ROW_LIST, pct(spread, .5) * 1e3, pct(single, .5) * 1e3,
          f"one pod, {3 * per_pod} sandboxes", "lat",
          note=f"n = {per_pod} sandboxes a pod, {cfg['cluster_list_n']} calls each")
