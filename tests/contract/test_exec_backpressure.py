"""Backpressure (CONTRACT.md section 4, issue 3): a client that stops reading stops the
command through the full pipe, never the daemon's memory; and when such a client goes away,
the command is killed and its exec cgroup removed (the session drains its pipes to EOF)."""
import glob
import os
import socket
import time

import pytest

import execlib
import shlib
from shlib import Sandbox, is_root, wait_until

pytestmark = pytest.mark.skipif(not is_root(), reason="sandboxes need root (CI runs as root)")


def exec_cgroups(rid):
    return glob.glob(f"/sys/fs/cgroup/*/sandbox-host.*/{rid}/exec-*") + \
        glob.glob(f"/sys/fs/cgroup/*/*/sandbox-host.*/{rid}/exec-*") + \
        glob.glob(f"/sys/fs/cgroup/sandbox-host.*/{rid}/exec-*")


def busy_exec_cgroups(rid):
    """The exec cgroups holding a process: a command's own (an empty one may be the spare the
    sandbox keeps for its next exec)."""
    busy = []
    for c in exec_cgroups(rid):
        try:
            with open(os.path.join(c, "cgroup.procs")) as f:
                if f.read().strip():
                    busy.append(c)
        except FileNotFoundError:
            pass
    return busy


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_stalled_then_vanished_client_kills_the_command_and_frees_its_cgroup(start_daemon):
    d = start_daemon()
    r = d.client.create({})
    assert r.status == 200, r
    sb = Sandbox(d.client, r.json()["remote_id"])
    before = rss_kib(d.proc.pid)
    s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    body = b'{"cmd": ["yes", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]}'
    s.sendall(b"POST /sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (sb.rid.encode(), len(body), body))
    s.recv(1024)  # the stream has started; now read nothing more
    assert wait_until(lambda: busy_exec_cgroups(sb.rid), 5), "no exec cgroup seen"
    mine = busy_exec_cgroups(sb.rid)
    time.sleep(2)  # `yes` writes as fast as it can; nobody reads
    grown = rss_kib(d.proc.pid) - before
    # ASan keeps freed memory in quarantine (and its allocator's caches): there RSS says
    # nothing of our bounds, and crossed 16 MiB now and then on the old binary too
    if not shlib.sanitized():
        assert grown < 16 * 1024, f"daemon RSS grew by {grown} KiB behind a stalled client"
    s.close()
    # the killed command's cgroup goes (a killed exec's cgroup is never kept for another)
    assert wait_until(lambda: not any(os.path.exists(c) for c in mine), 15), \
        f"exec cgroup left after the client went away: {mine}"
    # the sandbox still works
    execlib.ok(sb, ["true"])
