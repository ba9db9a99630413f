#!/usr/bin/python3
"""A registry with the test images, for test tiers that are not Python (the SDK tier):

    /usr/bin/python3 tests/images/serve.py [--mode plain|htpasswd|token] [--tls]
                                           [--image busybox] [--image python] ...

starts Debian's docker-registry (tests/images/registry.py), pushes the images asked for
(names below; default: busybox), then prints ONE line of JSON on stdout and keeps serving
until its stdin closes or it gets SIGTERM/SIGINT; then it stops the registry (by pid) and
removes every temp dir. The line:

    {"host": "127.0.0.1:PORT", "url": "http://127.0.0.1:PORT", "mode": "htpasswd",
     "user": "tester", "password": "...", "ca_file": null | "/tmp/.../ca.crt",
     "auth_file": "/tmp/.../config.json" (Docker config.json with the credentials),
     "refs": {"busybox": "127.0.0.1:PORT/test/busybox:1", ...},
     "skipped": {"python": "why it could not be built"}}

Images: busybox, whiteout, gzip, zstd, plain, mixed, multi (OCI index), multi-docker
(Docker manifest list), docker (Docker schema 2), python (Debian bookworm + python3, pip,
venv; cached in build/image-cache/, built by mmdebstrap when missing: minutes).
Exit 0 after a clean stop; 1 with the reason on stderr when the registry cannot start.
"""
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from images import build, registry  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", default="plain", choices=("plain", "htpasswd", "token"))
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--image", action="append", choices=build.NAMED)
    a = ap.parse_args()
    stop = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.set())
    work = tempfile.mkdtemp(prefix="sh-images-serve-")
    try:
        try:
            reg = registry.Registry(a.mode, tls=a.tls)
        except RuntimeError as e:
            print(f"serve.py: {e}", file=sys.stderr)
            return 1
        with reg:
            refs, skipped = build.push_named(reg, a.image or ["busybox"], work,
                                             log=lambda m: print(m, file=sys.stderr))
            auth = reg.docker_config(os.path.join(work, "config.json"))
            print(json.dumps({"host": reg.host, "url": reg.url, "mode": reg.mode,
                              "user": reg.user if reg.creds else None,
                              "password": reg.password if reg.creds else None,
                              "ca_file": reg.ca_file, "auth_file": auth, "refs": refs,
                              "skipped": skipped}), flush=True)
            # stdin closing (the parent gone) ends us too
            threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
            stop.wait()
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
