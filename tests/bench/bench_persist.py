#!/usr/bin/env python3
"""Persist and restore benchmarks (issue 4): checkpoint (cold: empty archive, warm: nothing
changed), reconciling persist and restore-on-create, for 10,000 small files and for one
1 GiB file, each beside plain `rsync -a` of the same tree in the same run.

    sudo python3 tests/bench/bench_persist.py [--bin build/sandbox-host] [--n 3] [--disk]
                                               [--smoke]

By default the state root and the archive root are on a tmpfs (/dev/shm), so the figures
compare the daemon's overhead with rsync's own work, not the disk. --disk puts both on /tmp
instead (creating a file on this machine's disk costs ~0.4 ms, which then dominates the small
-file case for both columns). Prints medians of --n runs. Not a test: asserts nothing about
time. Needs root (the daemon builds namespaces and mounts).
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_isolation import start_daemon  # noqa: E402


class Client:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def call(self, method, path, body=None):
        c = http.client.HTTPConnection(self.host, self.port, timeout=600)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def create(self, item=None):
        st, body = self.call("POST", "/sandboxes", {"item_id": item} if item else {})
        if st != 200:
            raise SystemExit("create failed: %d %r" % (st, body))
        return json.loads(body)["remote_id"]

    def persist(self, rid, delete=False):
        st, body = self.call("POST", f"/sandboxes/{rid}/persist", {"delete": delete})
        if st != 204:
            raise SystemExit("persist failed: %d %r" % (st, body))

    def delete(self, rid):
        self.call("DELETE", f"/sandboxes/{rid}")


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def make_small(ws, n, uid, size=1024):
    for i in range(n):
        d = os.path.join(ws, "d%03d" % (i % 100))
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, "f%05d" % i)
        with open(p, "wb") as f:
            f.write(os.urandom(64) * (size // 64))
        os.lchown(p, uid, uid)
    for i in range(100):
        os.lchown(os.path.join(ws, "d%03d" % i), uid, uid)


def make_big(ws, size, uid):
    p = os.path.join(ws, "big")
    block = os.urandom(1 << 20)
    with open(p, "wb") as f:
        for _ in range(size >> 20):
            f.write(block)
    os.lchown(p, uid, uid)


def plain_rsync(src, dst):
    subprocess.run(["rsync", "-a", src + "/", dst + "/"], check=True)


def bench_case(cli, root, nfs, scratch, name, build, n):
    rows = {k: ([], []) for k in ("checkpoint, empty archive", "checkpoint, nothing changed",
                                  "reconcile (delete:true), nothing changed",
                                  "restore on create")}
    base_create = []
    for run in range(n):
        item = "bench-%s-%d-%s" % (name.replace(" ", "-").replace(",", ""), run, os.urandom(3).hex())
        rid = cli.create(item)
        ws = os.path.join(root, rid, "workspace")
        build(ws, os.stat(ws).st_uid)
        # ours
        rows["checkpoint, empty archive"][0].append(timed(lambda: cli.persist(rid)))
        rows["checkpoint, nothing changed"][0].append(timed(lambda: cli.persist(rid)))
        rows["reconcile (delete:true), nothing changed"][0].append(
            timed(lambda: cli.persist(rid, True)))
        box = {}
        rows["restore on create"][0].append(timed(lambda: box.setdefault("r", cli.create(item))))
        base_create.append(timed(lambda: box.setdefault("b", cli.create())))
        # plain rsync -a of the same trees, same run
        dst = os.path.join(scratch, "plain-" + item)
        rows["checkpoint, empty archive"][1].append(timed(lambda: plain_rsync(ws, dst)))
        rows["checkpoint, nothing changed"][1].append(timed(lambda: plain_rsync(ws, dst)))
        rows["reconcile (delete:true), nothing changed"][1].append(timed(lambda: subprocess.run(
            ["rsync", "-a", "--delete-after", ws + "/", dst + "/"], check=True)))
        dst2 = os.path.join(scratch, "plain-restore-" + item)
        rows["restore on create"][1].append(timed(lambda: plain_rsync(
            os.path.join(nfs, item), dst2)))
        for r in (rid, box["r"], box["b"]):
            cli.delete(r)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.rmtree(dst2, ignore_errors=True)
        shutil.rmtree(os.path.join(nfs, item), ignore_errors=True)
    out = []
    for k, (ours, peer) in rows.items():
        out.append((f"{name}: {k}", statistics.median(ours), statistics.median(peer)))
    out.append((f"{name}: (create without item, for reference)",
                statistics.median(base_create), None))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "sandbox-host"))
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--disk", action="store_true", help="state and archive on /tmp, not tmpfs")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one run (CI)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root")
    n_small, big = (10000, 1 << 30) if not a.smoke else (200, 16 << 20)
    n = 1 if a.smoke else a.n
    base = tempfile.mkdtemp(prefix="sh-bench-persist-", dir=None if a.disk else "/dev/shm")
    root, nfs, scratch = (os.path.join(base, x) for x in ("root", "nfs", "scratch"))
    for d in (root, nfs, scratch):
        os.makedirs(d)
    p, host, port = start_daemon(a.bin, root, f"--nfs-root={nfs}")
    try:
        cli = Client(host, port)
        res = bench_case(cli, root, nfs, scratch, "%d small files" % n_small,
                         lambda ws, uid: make_small(ws, n_small, uid), n)
        res += bench_case(cli, root, nfs, scratch, "one %d MiB file" % (big >> 20),
                          lambda ws, uid: make_big(ws, big, uid), n)
    finally:
        p.terminate()
        p.wait(30)
        shutil.rmtree(base, ignore_errors=True)
    where = "disk (/tmp)" if a.disk else "tmpfs (/dev/shm)"
    print(f"persist/restore, median of {n} run(s), trees on {where}; ms")
    print(f"{'figure':<62} {'sandbox-host':>12} {'rsync -a':>10} {'ratio':>6}")
    for fig, ours, peer in res:
        if peer is None:
            print(f"{fig:<62} {ours:>12.1f} {'':>10} {'':>6}")
        else:
            print(f"{fig:<62} {ours:>12.1f} {peer:>10.1f} {ours / peer:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
