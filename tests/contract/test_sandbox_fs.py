"""The sandbox's own mounts (issue 3, point 3): /tmp is a size-limited tmpfs (at most 256 MiB
and half the sandbox's memory limit, since tmpfs pages count against it), /dev holds exactly
the minimal set of nodes; filling /tmp or memory never kills the sandbox's PID 1."""
import pytest

import execlib
from shlib import Sandbox, is_root

pytestmark = pytest.mark.skipif(not is_root(), reason="sandboxes need root (CI runs as root)")


def sandbox(d):
    r = d.client.create({})
    assert r.status == 200, r
    return Sandbox(d.client, r.json()["remote_id"])


def tmp_size_bytes(sb):
    out = execlib.py(sb, "import os; s = os.statvfs('/tmp'); print(s.f_blocks * s.f_frsize)")
    return int(out)


def test_tmp_is_a_tmpfs_of_bounded_size(start_daemon):
    d = start_daemon()
    sb = sandbox(d)
    fs = execlib.sh(sb, "awk '$2 == \"/tmp\" {print $3}' /proc/self/mounts")
    assert fs.split() == ["tmpfs"], fs
    assert 0 < tmp_size_bytes(sb) <= 256 << 20


def test_tmp_is_at_most_half_the_memory_limit_and_filling_it_is_survivable(start_daemon):
    d = start_daemon(args=["--memory-max=64M"])
    sb = sandbox(d)
    assert 0 < tmp_size_bytes(sb) <= 32 << 20
    # writing past it fails inside the sandbox (ENOSPC), and the sandbox lives on
    st = execlib.run(sb, ["sh", "-c", "head -c 100000000 /dev/zero > /tmp/big"])
    assert st.final is not None and "exit" in st.final, st.describe()
    assert st.final["exit"] != 0
    execlib.ok(sb, ["true"])


def test_oom_never_kills_the_sandboxes_pid1(start_daemon):
    d = start_daemon(args=["--memory-max=64M"])
    sb = sandbox(d)
    # /tmp full (32M of the 64M) plus a hog: the OOM killer must pick the hog
    execlib.run(sb, ["sh", "-c", "head -c 100000000 /dev/zero > /tmp/big"])
    st = execlib.run(sb, ["python3", "-c", "b = bytearray(200 << 20)"])
    assert st.final is not None and "exit" in st.final, st.describe()
    assert st.final["exit"] != 0 and st.final.get("oom") is True, st.describe()
    # every command is the OOM killer's first choice, PID 1 is not
    assert execlib.sh(sb, "cat /proc/self/oom_score_adj").strip() == "1000"
    assert int(execlib.sh(sb, "cat /proc/1/oom_score_adj")) < 1000
    execlib.ok(sb, ["true"])


def test_dev_holds_only_the_minimal_nodes(start_daemon):
    d = start_daemon()
    sb = sandbox(d)
    names = set(execlib.sh(sb, "ls -A /dev").split())
    assert names == {"null", "zero", "full", "random", "urandom", "tty", "shm", "pts", "ptmx",
                     "fd", "stdin", "stdout", "stderr"}, names
