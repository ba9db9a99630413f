"""PID 1 of a sandbox and what a sandbox learns about itself (issue 10, items 12 and 14).

PID 1 is sandbox-init, a small static program exec'd from a sealed memfd, not a fork of the
daemon: it keeps CAP_SETUID, CAP_SETGID and CAP_SETPCAP only (what starting an exec needs), in
every set including the bounding set, with no_new_privs; its command line is "sandbox-init",
its environment empty, its mappings nothing but its own image, and its memory holds no other
sandbox's remote_id or env and none of the daemon's settings. The hostname is a neutral
"sandbox": the remote_id is the API's only credential, and nothing a sandbox process can read
about its own identity (uname, PID 1, its environment, /etc/hostname) names it. (The mount
table is another matter, tested with the workspace mount.)

The checks from inside run as the sandbox uid; the checks of PID 1's memory and mappings run on
the host as root, through /proc/<pid>/maps and /proc/<pid>/mem.

Needs root: sandboxes build namespaces, cgroups and a pivot_root; reading another process's
memory needs CAP_SYS_PTRACE.
"""
import os

import pytest

import execlib
from execlib import sh
from shlib import Sandbox, is_root

pytestmark = pytest.mark.skipif(not is_root(), reason="sandboxes need root (CI runs as root)")

INIT_CAPS = (1 << 6) | (1 << 7) | (1 << 8)  # CAP_SETGID, CAP_SETUID, CAP_SETPCAP


def status_fields(text):
    return {k: v.strip() for k, v in (ln.split(":", 1) for ln in text.splitlines() if ":" in ln)}


def host_pid1(sb):
    """The host pid of the sandbox's PID 1: the process whose own PID namespace is the one an
    exec of the sandbox sees, and which is PID 1 in it."""
    ns = sh(sb, "readlink /proc/self/ns/pid").strip()
    found = []
    for n in os.listdir("/proc"):
        if not n.isdigit():
            continue
        try:
            if os.readlink("/proc/%s/ns/pid" % n) != ns:
                continue
            with open("/proc/%s/status" % n) as f:
                nspid = status_fields(f.read()).get("NSpid", "").split()
        except OSError:
            continue
        if nspid and nspid[-1] == "1":
            found.append(int(n))
    assert len(found) == 1, "PID 1 of %s not found exactly once: %r" % (sb.rid, found)
    return found[0]


def readable_regions(pid):
    """[(start, end, perms, path)] of pid's mappings that can be read through /proc/pid/mem."""
    res = []
    with open("/proc/%d/maps" % pid) as f:
        for ln in f:
            parts = ln.split(None, 5)
            start, end = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5].strip() if len(parts) > 5 else ""
            if parts[1][0] == "r" and path not in ("[vvar]", "[vvar_vclock]", "[vsyscall]"):
                res.append((start, end, parts[1], path))
    return res


REGION_MAX = 256 << 20  # bigger regions are reserved address space (a sanitizer's shadow)
CHUNK = 1 << 20


def scan_memory(pid, needles):
    """(bytes read, {needle found}) over pid's readable memory, read chunk by chunk."""
    found, total = set(), 0
    keep = max(len(n) for n in needles)
    with open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
        for start, end, _, _ in readable_regions(pid):
            if end - start > REGION_MAX:
                continue
            tail, pos = b"", start
            while pos < end:
                try:
                    mem.seek(pos)
                    data = mem.read(min(CHUNK, end - pos))
                except OSError:
                    break  # a region that went away or cannot be read
                if not data:
                    break
                total += len(data)
                window = tail + data
                found.update(n for n in needles if n in window)
                tail, pos = window[-keep:], pos + len(data)
    return total, found


@pytest.fixture
def marked_daemon(start_daemon):
    """A daemon with settings worth stealing, and a first sandbox A (with a secret in its env)
    that exists before sandbox B starts."""
    token = os.urandom(8).hex()
    d = start_daemon(args=["--pod-url=http://pod-%s.invalid" % token])
    secret = "a-secret-" + os.urandom(12).hex()
    r = d.client.create({"env": {"SH_SECRET": secret}})
    assert r.status == 200, r
    a = Sandbox(d.client, r.json()["remote_id"])
    execlib.ok(a, ["sh", "-c", "echo $SH_SECRET"])  # A has run something with its env
    r = d.client.create({})
    assert r.status == 200, r
    b = Sandbox(d.client, r.json()["remote_id"])
    return d, token, a, secret, b


# -- PID 1 as a sandbox process sees it ------------------------------------------------------------

def test_pid1_keeps_only_setuid_setgid_and_setpcap(sb):
    f = status_fields(sh(sb, "cat /proc/1/status"))
    assert f["Name"] == "sandbox-init", f["Name"]
    for k in ("CapPrm", "CapEff", "CapBnd"):
        assert int(f[k], 16) == INIT_CAPS, "PID 1 %s = %s" % (k, f[k])
    for k in ("CapInh", "CapAmb"):
        assert int(f[k], 16) == 0, "PID 1 %s = %s" % (k, f[k])
    assert f["NoNewPrivs"] == "1", f["NoNewPrivs"]


def test_pid1_command_line_is_its_name_and_its_memory_is_closed(sb):
    st = execlib.ok(sb, ["cat", "/proc/1/cmdline"])
    assert st.out == b"sandbox-init\0", st.out
    for f in ("environ", "maps", "mem", "auxv"):
        st = execlib.run(sb, ["cat", "/proc/1/" + f]).assert_exit()
        assert st.exit != 0 and st.out == b"", "/proc/1/%s: %s" % (f, st.describe())


# -- PID 1 as the host sees it -------------------------------------------------------------------

def test_pid1_has_no_environment_and_maps_nothing_of_the_daemon(sb):
    pid = host_pid1(sb)
    with open("/proc/%d/environ" % pid, "rb") as f:
        env = f.read()
    assert env == b"", "PID 1's environment: %r" % env[:300]
    paths = {p for _, _, _, p in readable_regions(pid) if p and not p.startswith("[")}
    # only its own image: not the daemon's binary, no libmicrohttpd, no shared library at all
    assert paths == {"/memfd:sandbox-init (deleted)"}, sorted(paths)
    with open("/proc/%d/exe" % pid, "rb") as f:
        head = f.read(4)
    assert head == b"\x7fELF"
    assert os.readlink("/proc/%d/exe" % pid) == "/memfd:sandbox-init (deleted)"


def test_pid1_memory_holds_no_other_sandbox_and_no_daemon_setting(marked_daemon):
    d, token, a, secret, b = marked_daemon
    leaks = {
        "another sandbox's remote_id": a.rid.encode(),
        "another sandbox's env value": secret.encode(),
        "the daemon's pod URL setting": token.encode(),
        "the daemon's state root": str(d.root).encode(),
        "its own remote_id": b.rid.encode(),
    }
    total, seen = scan_memory(host_pid1(b), list(leaks.values()) + [b"sandbox-init"])
    assert total > 100000, "read only %d bytes of PID 1's memory" % total
    assert b"sandbox-init" in seen  # the scan does see what is there
    found = [what for what, needle in leaks.items() if needle in seen]
    assert not found, "PID 1 of B holds %s" % ", ".join(found)


# -- the sandbox's identity (item 14) -------------------------------------------------------

# (the hostname itself: test_isolation.py::test_hostname_is_neutral_and_cannot_be_changed)

IDENTITY = r"""
uname -a
cat /proc/sys/kernel/hostname /proc/sys/kernel/domainname
hostname
cat /etc/hostname
tr '\0' '\n' < /proc/1/cmdline
cat /proc/1/status /proc/self/status /proc/self/cgroup
tr '\0' '\n' < /proc/self/environ
env
"""


def test_remote_id_is_not_visible_from_inside(sb):
    out = sh(sb, IDENTITY)
    assert sb.rid not in out, "the remote_id is readable from inside:\n%s" % out
    assert sb.rid[:12] not in out, "a prefix of the remote_id is readable from inside"
    # /etc/hostname is the image's own (the default image is the host's /etc)
    with open("/etc/hostname") as f:
        assert sh(sb, "cat /etc/hostname") == f.read()
