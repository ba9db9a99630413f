#!/usr/bin/python3
"""Image pull benchmark (issue 22), the peer side: pull and unpack of the python image from a
local registry by `skopeo copy` (registry -> OCI layout) + `umoci unpack` (layout -> root
tree), timed, in the same run as the daemon's figure (added beside it by bench_all later).

    sudo /usr/bin/python3 tests/bench/bench_images.py [--n 3] [--smoke] [--disk] [--json F]

The registry is Debian's docker-registry on 127.0.0.1 (tests/images/registry.py, no auth, no
TLS), the image the Debian bookworm + python3/pip/venv one of tests/images/build.py (cached
in build/image-cache/; built by mmdebstrap when missing, which takes minutes and needs
Debian's mirror). --smoke uses the busybox image instead when the python one is not cached.
Scratch dirs are on a tmpfs (/dev/shm) unless --disk (/tmp). Prints medians of --n runs, ms.
Not a test: asserts nothing about time. Every process is ended by pid, every dir removed.
"""
import argparse
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
sys.path.insert(0, os.path.join(REPO, "tests"))

from images import build, registry  # noqa: E402

ROW = "pull + unpack of the python image, local registry (ms)"


def peer_pull_unpack(ref, scratch, rootless=None):
    """`skopeo copy docker://REF oci:...` then `umoci unpack` into scratch (removed after):
    (copy ms, unpack ms). ref: "127.0.0.1:PORT/name:tag" of a plain-HTTP registry."""
    rootless = os.geteuid() != 0 if rootless is None else rootless
    d = tempfile.mkdtemp(prefix="sh-bench-images-", dir=scratch)
    try:
        t0 = time.perf_counter()
        build.skopeo(["copy", "--quiet", "--src-tls-verify=false", f"docker://{ref}",
                      f"oci:{d}/layout:img"], timeout=1800)
        t1 = time.perf_counter()
        cmd = [build.UMOCI, "unpack"] + (["--rootless"] if rootless else []) + [
            "--image", f"{d}/layout:img", f"{d}/bundle"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        t2 = time.perf_counter()
        if p.returncode != 0:
            raise RuntimeError(f"umoci unpack: {p.stderr.strip()[-1000:]}")
        return (t1 - t0) * 1000.0, (t2 - t1) * 1000.0
    finally:
        shutil.rmtree(d, ignore_errors=True)


def image_for(smoke):
    """(layout, tag, label): the python image, or busybox for --smoke when python is not cached."""
    if smoke and build.python_layout_cached() is None:
        tmp = tempfile.mkdtemp(prefix="sh-bench-images-layout-")
        lay = build.Layout(tmp)
        build.busybox(lay, tag="1")
        return lay, "1", "busybox (smoke: the python image is not cached)", tmp
    lay, _ = build.python_image(log=lambda m: print(m, file=sys.stderr))
    return lay, build.PY_TAG, "python", None


def run(n, smoke, scratch):
    """The peer's figures: [(figure, ours or None, peer ms)], medians of n runs."""
    lay, tag, label, tmp = image_for(smoke)
    try:
        with registry.Registry("plain") as reg:
            ref = build.push(lay, tag, reg, f"test/{label.split()[0]}:{tag}")
            copy, unpack, total = [], [], []
            for _ in range(n):
                c, u = peer_pull_unpack(ref, scratch)
                copy.append(c)
                unpack.append(u)
                total.append(c + u)
            size = sum(l["size"] for l in
                       json.loads(lay.read_blob(lay.tagged(tag)["digest"]))["layers"])
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return label, size, [
        (ROW, None, statistics.median(total)),
        ("  of which skopeo copy (ms)", None, statistics.median(copy)),
        ("  of which umoci unpack (ms)", None, statistics.median(unpack)),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="one run; busybox if python is not cached")
    ap.add_argument("--disk", action="store_true", help="scratch on /tmp, not tmpfs")
    ap.add_argument("--json", help="write the rows here too")
    a = ap.parse_args()
    why = registry.available()
    if why:
        raise SystemExit(why)
    n = 1 if a.smoke else a.n
    scratch = "/tmp" if a.disk or not os.path.isdir("/dev/shm") else "/dev/shm"
    label, size, rows = run(n, a.smoke, scratch)
    print(f"image pull, {label} image ({size / 1e6:.1f} MB compressed), median of {n} run(s), "
          f"scratch on {scratch}; ms")
    print(f"{'figure':<58} {'sandbox-host':>12} {'skopeo+umoci':>12} {'ratio':>6}")
    for fig, ours, peer in rows:
        o = f"{ours:>12.1f}" if ours is not None else f"{'-':>12}"
        r = f"{ours / peer:>6.2f}" if ours is not None else f"{'':>6}"
        print(f"{fig:<58} {o} {peer:>12.1f} {r}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"figure": fig, "ours": o, "peer": p} for fig, o, p in rows], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
