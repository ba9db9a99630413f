"""Issue 3, "Tests": breakout attempts from inside a sandbox that must fail, over real HTTP.

Every probe runs as an exec (section 4) inside a sandbox: read or write outside the
workspace, see another sandbox's files or processes, reach the daemon's port or any network,
gain a capability, mount, create a user namespace, exhaust memory or pids, survive delete,
and a symlink-swap race against uploads and downloads.

SAFETY: the fork bomb only runs after a bounded fork loop proved the pids limit holds; every
process a test leaves behind is killed by pid (found by the sandbox's unique uid or a unique
`sleep 1000.<digits>` marker), never by name.

Needs root: the daemon builds namespaces, cgroups and a pivot_root for every sandbox.
"""
import errno
import json
import os
import shutil
import threading
import time

import pytest

import execlib
import shlib
from execlib import ExecStream, ok, py, run, sh

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="isolation needs a root daemon (namespaces, cgroups, pivot_root); CI runs as root")

UID_BASE = int(os.environ.get("SH_TEST_UID_BASE") or 200000)  # the daemons' (shlib.base_env)


@pytest.fixture
def small_daemon():
    """64M memory, 64 pids per sandbox, 500 ms grace."""
    with shlib.running(args=["--memory-max=64M", "--pids-max=64", "--exec-grace-ms=500"]) as d:
        yield d


def mounts(sb):
    """{mountpoint: (per-mount options, fstype, super options)} from /proc/self/mountinfo,
    the last mount on each point winning (it is the visible one)."""
    res = {}
    for ln in sh(sb, "cat /proc/self/mountinfo").splitlines():
        left, _, right = ln.partition(" - ")
        f = left.split()
        r = right.split()
        res[f[4]] = (f[5].split(","), r[0], r[2].split(",") if len(r) > 2 else [])
    return res


# -- identity and privilege ---------------------------------------------------------------------

def test_uid_is_non_root_and_unique_per_sandbox(sb, sb2):
    u1, u2 = execlib.sandbox_uid(sb), execlib.sandbox_uid(sb2)
    assert u1 != 0 and u2 != 0
    assert u1 != u2, "two sandboxes share uid %d" % u1
    for u in (u1, u2):
        assert UID_BASE <= u < UID_BASE + 256, "uid %d outside the configured range" % u
    g = int(sh(sb, "id -g").strip())
    assert g != 0
    assert sh(sb, "id -G").split() and "0" not in sh(sb, "id -G").split()


NAMESPACES = ("mnt", "pid", "ipc", "uts", "net", "cgroup")


def test_namespaces_are_new_and_per_sandbox(sb, sb2):
    script = "for n in %s; do readlink /proc/self/ns/$n; done" % " ".join(NAMESPACES)
    in1, in2 = sh(sb, script).split(), sh(sb2, script).split()
    host = [os.readlink("/proc/self/ns/" + n) for n in NAMESPACES]
    for name, a, b, h in zip(NAMESPACES, in1, in2, host):
        assert a != h, "sandbox shares the host's %s namespace" % name
        assert a != b, "two sandboxes share a %s namespace" % name


def test_sysv_ipc_is_private_to_the_sandbox(sb, sb2):
    key = int.from_bytes(os.urandom(3), "big") + 0x100000
    out = py(sb, "import ctypes\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 "print(libc.shmget(%d, 4096, 0o1666))\n" % key)   # IPC_CREAT | 0666
    assert int(out) >= 0, out
    keys = lambda text: {int(ln.split()[0]) for ln in text.splitlines()[1:] if ln.split()}
    assert key in keys(sh(sb, "cat /proc/sysvipc/shm"))
    assert key not in keys(sh(sb2, "cat /proc/sysvipc/shm")), "visible in another sandbox"
    with open("/proc/sysvipc/shm") as f:
        assert key not in keys(f.read()), "visible on the host"


def test_hostname_is_neutral_and_cannot_be_changed(sb):
    # "sandbox", never the remote_id (the API's only credential: issue 10, item 14)
    assert sh(sb, "uname -n").strip() == "sandbox"
    assert sh(sb, "cat /proc/sys/kernel/hostname").strip() == "sandbox"
    st = run(sb, ["hostname", "evil"]).assert_exit()
    assert st.exit != 0, st.describe()
    assert sh(sb, "uname -n").strip() == "sandbox"


def test_no_capabilities_no_new_privs_seccomp_filter(sb):
    status = sh(sb, "cat /proc/self/status")
    fields = dict(ln.split(":", 1) for ln in status.splitlines() if ":" in ln)
    fields = {k: v.strip() for k, v in fields.items()}
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[cap], 16) == 0, "%s = %s" % (cap, fields[cap])
    assert fields["NoNewPrivs"] == "1", fields.get("NoNewPrivs")
    assert fields["Seccomp"] == "2", fields.get("Seccomp")


def test_pid1_runs_under_the_seccomp_filter_every_command_inherits(sb):
    # loaded once, last of PID 1's setup; a command adds none of its own
    text = sh(sb, "grep -H -E '^Seccomp(_filters)?:' /proc/1/status /proc/self/status")
    got = {tuple(ln.split(":")[0:2]): ln.split(":")[2].strip() for ln in text.splitlines()}
    assert got[("/proc/1/status", "Seccomp")] == "2", got
    assert got[("/proc/1/status", "Seccomp_filters")] == "1", got
    assert got[("/proc/self/status", "Seccomp_filters")] == "1", got


def test_setuid_root_fails(sb):
    out = py(sb, "import os\n"
                 "for f in (lambda: os.setuid(0), lambda: os.setgid(0), lambda: os.seteuid(0),"
                 " lambda: os.setgroups([0])):\n"
                 "    try:\n        f(); print('GAINED')\n"
                 "    except PermissionError: print('EPERM')\n"
                 "print(os.getuid(), os.geteuid())")
    assert "GAINED" not in out, out
    assert out.count("EPERM") == 4, out
    # a setuid-root binary of the image gains nothing either (no_new_privs)
    st = run(sb, ["su", "-c", "id -u", "root"], timeout=20).assert_exit()
    assert not (st.exit == 0 and st.out.strip() == b"0"), st.describe()


PROBES = ("/etc/sh-ct-probe", "/usr/sh-ct-probe", "/usr/bin/sh-ct-probe", "/sh-ct-probe",
          "/tools/sh-ct-probe", "/dev/sh-ct-probe", "/proc/sh-ct-probe")


def test_etc_shadow_unreadable(sb):
    st = run(sb, ["cat", "/etc/shadow"]).assert_exit()
    assert st.exit != 0 and st.out == b"", st.describe()
    assert b"ermission denied" in st.err, st.describe()


def test_system_dirs_not_writable(sb):
    for p in PROBES:
        if os.path.lexists(p):
            pytest.skip("stale host probe %s" % p)
    try:
        for target in PROBES:
            st = run(sb, ["sh", "-c", "echo x > %s" % target]).assert_exit()
            assert st.exit != 0, "wrote %s from inside" % target
            assert not os.path.lexists(target), "created %s on the host!" % target
        # an existing file of the image cannot be opened for writing either (no O_TRUNC:
        # a broken isolation must not damage the host)
        out = py(sb, "import os\n"
                     "for p in ('/etc/passwd', '/usr/bin/env'):\n"
                     "    try: os.open(p, os.O_WRONLY | os.O_APPEND); print('OPENED', p)\n"
                     "    except OSError as e: print('ERR', e.errno)\n")
        assert "OPENED" not in out, out
    finally:
        for p in PROBES:
            if os.path.lexists(p) and not os.path.isdir(p):
                os.unlink(p)


def test_image_and_tools_mounted_read_only(sb):
    m = mounts(sb)
    for mp in ("/usr", "/etc", "/tools"):
        assert mp in m, "no mount at %s: %r" % (mp, sorted(m))
        assert "ro" in m[mp][0], "%s is mounted %r, not read-only" % (mp, m[mp][0])


def test_user_namespaces_refused(sb):
    for cmd in (["unshare", "-U", "true"], ["unshare", "-r", "true"],
                ["unshare", "-Ur", "id"]):
        st = run(sb, cmd, timeout=20).assert_exit()
        assert st.exit != 0, "%r succeeded: %s" % (cmd, st.describe())
    # the syscall itself, through ctypes: unshare(CLONE_NEWUSER) and clone with it
    out = py(sb, "import ctypes, os\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 "r = libc.unshare(0x10000000)\n"
                 "print(r, ctypes.get_errno())\n")
    r, e = out.split()
    assert r == "-1" and int(e) in (errno.EPERM, errno.EACCES, errno.ENOSYS, errno.EINVAL), out


def test_mount_refused(sb):
    st = run(sb, ["sh", "-c", "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m"]).assert_exit()
    assert st.exit != 0, st.describe()
    out = py(sb, "import ctypes\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 "import os; os.makedirs('/tmp/m2', exist_ok=True)\n"
                 "r = libc.mount(b'none', b'/tmp/m2', b'tmpfs', 0, None)\n"
                 "print(r, ctypes.get_errno())\n"
                 "r = libc.umount2(b'/workspace', 2)\n"
                 "print(r, ctypes.get_errno())\n")
    for ln in out.splitlines():
        r, e = ln.split()
        assert r == "-1" and int(e) in (errno.EPERM, errno.EACCES), out
    assert "/tmp/m2" not in mounts(sb)


def test_a_command_starts_with_no_signal_ignored_or_blocked_whatever_the_daemon_inherited(
        start_daemon):
    # The daemon started with SIGPIPE and SIGHUP ignored (as under nohup or a shell's trap):
    # an ignored disposition survives fork and execve, down to every command, unless the
    # sandbox's PID 1 resets them (once, when it starts: its exec children reset nothing).
    d = start_daemon(prefix=["/bin/sh", "-c", "trap '' PIPE HUP; exec \"$0\" \"$@\""])
    s = d.client.new_sandbox()
    for _ in range(2):  # the first command and a later one
        st = execlib.ok(s, ["grep", "-E", "^Sig(Ign|Blk):", "/proc/self/status"])
        got = dict(ln.split(":\t") for ln in st.out.decode().splitlines())
        assert got == {"SigIgn": "0" * 16, "SigBlk": "0" * 16}, got


def test_only_fds_0_1_2_are_inherited(sb):
    # the fd listdir used for the listing is closed again when readlink runs: skipped
    out = py(sb, "import os\n"
                 "for n in sorted(int(x) for x in os.listdir('/proc/self/fd')):\n"
                 "    try: print(n, os.readlink('/proc/self/fd/%d' % n))\n"
                 "    except FileNotFoundError: pass\n")
    fds = dict(ln.split(" ", 1) for ln in out.splitlines())
    assert sorted(fds) == ["0", "1", "2"], fds
    assert fds["0"] == "/dev/null"
    # a plain shell sees the same (`; true`: keep sh from exec'ing ls in its place)
    out = sh(sb, "ls /proc/$$/fd; true")
    assert out.split() == ["0", "1", "2"], out


# Runs inside the sandbox: each probe in a forked child (a filter may kill instead of
# refusing); prints {name: "ok" | "refused <errno>" | "killed <sig>" | "skip <why>"}.
# Every probe below succeeds for an unprivileged process on a stock kernel without the
# filter (this host: legacy_tiocsti=1, io_uring enabled, user namespaces enabled,
# perf_event_paranoid=2), so "refused" here is the filter's doing.
SECCOMP_PROBE = r"""
import ctypes, errno, fcntl, json, mmap, os, struct, termios
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(*a):
    r = libc.syscall(*[ctypes.c_long(x) for x in a])
    return r, ctypes.get_errno()
A = ctypes.addressof
A = ctypes.addressof
def buf(n, data=b''):
    b = ctypes.create_string_buffer(n)
    ctypes.memmove(b, data, len(data))
    return b
# int $0x80 trampoline: long f(nr, a1, a2, a3) -> i386 syscall, returns -errno on failure
CODE = bytes([0x53, 0x48, 0x89, 0xf8, 0x48, 0x89, 0xf3, 0x49, 0x89, 0xc8, 0x48, 0x89, 0xd1,
              0x4c, 0x89, 0xc2, 0xcd, 0x80, 0x48, 0x63, 0xc0, 0x5b, 0xc3])
try:
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(CODE)
    i386 = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long,
                            ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
except Exception as e:
    i386 = None
def i3(nr, a=0, b=0, c=0):
    if i386 is None:
        return None
    r = i386(nr, a, b, c)
    return (r, 0) if r >= 0 else (-1, -r)
X32 = 0x40000000
perf_attr = buf(128, struct.pack('IIQQQQQ', 1, 128, 0, 0, 0, 0, 1 | 1 << 5 | 1 << 6))
def tiocsti():
    os.setsid()
    try:
        mfd, sfd = os.openpty()
        fcntl.ioctl(sfd, termios.TIOCSCTTY, 0)
    except OSError as e:
        return None
    try:
        fcntl.ioctl(sfd, termios.TIOCSTI, b'x')
        return (0, 0)
    except OSError as e:
        return (-1, e.errno)
def clone_newuser():
    r, e = sc(56, 0x10000000 | 17, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    return r, e
P = {
    'native getpid (baseline)': lambda: sc(39),
    'i386 getpid (baseline)': lambda: i3(20),
    'x32 getpid (baseline)': lambda: sc(X32 | 39),
    'unshare(CLONE_NEWUSER)': lambda: sc(272, 0x10000000),
    'clone(CLONE_NEWUSER)': clone_newuser,
    'keyctl(GET_KEYRING_ID)': lambda: sc(250, 0, -2, 1),
    'io_uring_setup': lambda: sc(425, 4, ctypes.addressof(buf(120))),
    'userfaultfd(USER_MODE_ONLY)': lambda: sc(323, 1),
    'perf_event_open(self)': lambda: sc(298, ctypes.addressof(perf_attr), 0, -1, -1, 0),
    'bpf(MAP_CREATE)': lambda: sc(321, 0, A(buf(72, struct.pack('IIII', 2, 4, 8, 1))), 72),
    'ptrace(TRACEME)': lambda: sc(101, 0, 0, 0, 0),
    'mount(tmpfs)': lambda: sc(165, A(buf(8, b'none')), A(buf(8, b'/tmp')), A(buf(8, b'tmpfs')),
                               0, 0),
    'ioctl(TIOCSTI)': tiocsti,
    'i386 unshare(CLONE_NEWUSER)': lambda: i3(310, 0x10000000),
    'i386 keyctl(GET_KEYRING_ID)': lambda: i3(288, 0, 0xfffffffe, 1),
    'i386 ptrace(TRACEME)': lambda: i3(26, 0),
    'i386 userfaultfd(USER_MODE_ONLY)': lambda: i3(374, 1),
    'x32 unshare(CLONE_NEWUSER)': lambda: sc(X32 | 272, 0x10000000),
    'x32 keyctl(GET_KEYRING_ID)': lambda: sc(X32 | 250, 0, -2, 1),
    'x32 ptrace(TRACEME)': lambda: sc(X32 | 521, 0, 0, 0, 0),
    'x32 userfaultfd(USER_MODE_ONLY)': lambda: sc(X32 | 323, 1),
    'x32 io_uring_setup': lambda: sc(X32 | 425, 4, ctypes.addressof(buf(120))),
    'clone3': lambda: sc(435, 0, 0),
}
out = {}
for name, fn in P.items():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            res = fn()
            msg = 'skip' if res is None else 'ok' if res[0] >= 0 else 'refused %d' % res[1]
        except Exception as e:
            msg = 'skip %r' % e
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 1000).decode()
    os.close(r)
    _, st = os.waitpid(pid, 0)
    out[name] = 'killed %d' % os.WTERMSIG(st) if os.WIFSIGNALED(st) else data
print(json.dumps(out))
"""


def test_seccomp_refuses_dangerous_syscalls_on_every_abi(sb):
    res = json.loads(py(sb, SECCOMP_PROBE))
    assert res["native getpid (baseline)"] == "ok", res
    allowed = {k: v for k, v in res.items()
               if "baseline" not in k and not (v.startswith("refused") or v.startswith("killed")
                                               or v.startswith("skip"))}
    assert allowed == {}, "reachable from a sandbox: %r (all: %r)" % (allowed, res)
    # clone3 must answer ENOSYS so that libc falls back to the filtered clone
    assert res["clone3"] == "refused %d" % errno.ENOSYS, res
    assert not res["ioctl(TIOCSTI)"].startswith("skip"), "no pty to test TIOCSTI: %r" % res


# Shared by the probes below: raw syscalls, the i386 trampoline, and a witness filter.
# A witness is a second filter the probe loads over the sandbox's (no_new_privs is set, so
# any process may) that answers SECCOMP_RET_TRACE for the probed syscall numbers. With no
# tracer, a TRACE answer fails the call with ENOSYS without running it; and the sandbox
# filter's ERRNO outranks TRACE whatever the order. So under the witness ENOSYS means the
# sandbox filter let the call through, and any other errno is the sandbox filter's own
# answer, never the kernel's: this shows a refusal even for a family this kernel lacks.
PROBE_LIB = r"""
import ctypes, errno, json, mmap, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(*a):
    r = libc.syscall(*[ctypes.c_long(x) for x in a])
    return r, ctypes.get_errno()
CODE = bytes([0x53, 0x48, 0x89, 0xf8, 0x48, 0x89, 0xf3, 0x49, 0x89, 0xc8, 0x48, 0x89, 0xd1,
              0x4c, 0x89, 0xc2, 0xcd, 0x80, 0x48, 0x63, 0xc0, 0x5b, 0xc3])
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(CODE)
_i386 = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long,
                         ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
def i3(nr, a=0, b=0, c=0):
    r = _i386(nr, a, b, c)
    return (r, 0) if r >= 0 else (-1, -r)
X32 = 0x40000000
X86_64, I386 = 0xc000003e, 0x40000003
class Insn(ctypes.Structure):
    _fields_ = [('code', ctypes.c_ushort), ('jt', ctypes.c_ubyte), ('jf', ctypes.c_ubyte),
                ('k', ctypes.c_uint)]
class Prog(ctypes.Structure):
    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.POINTER(Insn))]
def witness(arch, nrs):
    k = len(nrs)
    ins = [(0x20, 0, 0, 4), (0x15, 0, k + 1, arch), (0x20, 0, 0, 0)]
    ins += [(0x15, k - i, 0, n) for i, n in enumerate(nrs)]
    ins += [(0x06, 0, 0, 0x7fff0000), (0x06, 0, 0, 0x7ff00000)]
    arr = (Insn * len(ins))(*[Insn(*x) for x in ins])
    prog = Prog(len(ins), arr)
    r, e = sc(317, 1, 0, ctypes.addressof(prog))  # seccomp(SET_MODE_FILTER)
    if r != 0:
        raise OSError(e, 'loading the witness')
def fork_run(fn):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            res = fn()
            msg = 'skip' if res is None else 'ok' if res[0] >= 0 else errno.errorcode.get(
                res[1], str(res[1]))
        except Exception as e:
            msg = 'exception %r' % e
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 1000).decode()
    os.close(r)
    _, st = os.waitpid(pid, 0)
    return 'killed %d' % os.WTERMSIG(st) if os.WIFSIGNALED(st) else data
def witnessed(arch, nr, call):
    def fn():
        witness(arch, [nr])
        return call()
    return fork_run(fn)
# A kernel without IA32 emulation faults every int $0x80 (SIGSEGV) before any filter: the
# i386 ABI is then out of every process's reach, and the probes leave it out (out['ia32']).
IA32 = fork_run(lambda: i3(20)) == 'ok'
"""

SOCKET_FAMILY_PROBE = PROBE_LIB + r"""
ALLOWED = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
out = {}
for fam in list(range(64)) + [1000, 0x7fffffff, 0xffffffff]:
    out['socket %d' % fam] = witnessed(X86_64, 41, lambda: sc(41, fam, 2, 0))
for fam in (17, 38, 15, 44, 40, 2, 16):  # socketpair of refused and allowed-but-unpairable
    out['socketpair %d' % fam] = witnessed(
        X86_64, 53, lambda: sc(53, fam, 2, 0, ctypes.addressof((ctypes.c_int * 2)())))
for proto in list(range(32)) + [1000]:
    out['netlink %d' % proto] = witnessed(X86_64, 41, lambda: sc(41, 16, 3, proto))
for fam in (17, 38, 15, 1):
    if IA32:
        out['i386 socket %d' % fam] = witnessed(I386, 359, lambda: i3(359, fam, 2, 0))
    out['x32 socket %d' % fam] = witnessed(X86_64, X32 | 41, lambda: sc(X32 | 41, fam, 2, 0))
for call in (1, 3, 8) if IA32 else ():  # socketcall SOCKET, CONNECT, SOCKETPAIR
    out['i386 socketcall %d' % call] = witnessed(I386, 102, lambda: i3(102, call, 0, 0))
out['ia32'] = IA32
print(json.dumps(out))
"""


def test_seccomp_refuses_every_socket_family_outside_the_allow_list(sb):
    res = json.loads(py(sb, SOCKET_FAMILY_PROBE))
    ia32 = res.pop("ia32")  # without it, the i386 ABI reaches nothing: nothing to refuse
    reached, refused = "ENOSYS", "EAFNOSUPPORT"  # the witness answers ENOSYS
    want = {}
    for fam in list(range(64)) + [1000, 0x7fffffff, 0xffffffff]:
        want["socket %d" % fam] = reached if fam in (1, 2, 10, 16) else refused
    for fam in (17, 38, 15, 44, 40, 2, 16):
        want["socketpair %d" % fam] = reached if fam in (2, 16) else refused
    for proto in list(range(32)) + [1000]:
        want["netlink %d" % proto] = reached if proto == 0 else "EPROTONOSUPPORT"
    for fam in (17, 38, 15, 1):
        if ia32:
            want["i386 socket %d" % fam] = reached if fam == 1 else refused
        want["x32 socket %d" % fam] = reached if fam == 1 else refused
    # socketcall's arguments are invisible to a filter: SOCKET and SOCKETPAIR refused whole
    for call in (1, 3, 8) if ia32 else ():
        want["i386 socketcall %d" % call] = reached if call == 3 else refused
    wrong = {k: (res.get(k), v) for k, v in want.items() if res.get(k) != v}
    assert wrong == {}, "(got, wanted): %r" % wrong


def test_seccomp_allowed_socket_families_still_work(sb):
    out = py(sb, "import socket\n"
                 "socket.socket(socket.AF_UNIX).close(); a, b = socket.socketpair()\n"
                 "socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()\n"
                 "n = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0); n.close()\n"
                 "print(sorted(i[1] for i in socket.if_nameindex()))\n"
                 "print(len(socket.getaddrinfo('127.0.0.1', 80, flags=socket.AI_ADDRCONFIG)) > 0)\n")
    assert out.split("\n")[:2] == ["['lo']", "True"], out


NEW_SYSCALL_PROBE = PROBE_LIB + r"""
out = {}
# statmount (457), mseal (462), file_setattr (469): Linux 6.8-6.17, unknown to libseccomp
# 2.5.4; 1000: no kernel has it. Harmless arguments (mseal of nothing is a no-op).
for nr in (457, 462, 469, 1000):
    out['%d' % nr] = fork_run(lambda: sc(nr, 0 if nr == 462 else -1, 0, 0, 0, 0))
for nr in (457, 469):
    if IA32:
        out['i386 %d' % nr] = fork_run(lambda: i3(nr, 0xffffffff, 0, 0))
    out['x32 %d' % nr] = fork_run(lambda: sc(X32 | nr, -1, 0, 0, 0, 0))
print(json.dumps(out))
"""


def test_seccomp_syscalls_unknown_to_libseccomp_answer_enosys(sb):
    res = json.loads(py(sb, NEW_SYSCALL_PROBE))
    wrong = {k: v for k, v in res.items() if v != "ENOSYS"}
    assert wrong == {}, "reached the kernel: %r (all: %r)" % (wrong, res)


QUOTA_IOCTL_PROBE = PROBE_LIB + r"""
import fcntl
FSGETXATTR, FSSETXATTR = 0x801c581f, 0x401c5820
GETFLAGS, SETFLAGS, SETFLAGS32 = 0x80086601, 0x40086602, 0x40046602
PROJINHERIT = 0x20000000
os.makedirs('/workspace/q', exist_ok=True)
open('/workspace/q/f', 'w').close()
out = {}
def ioc(path, req, buf):
    fd = os.open(path, os.O_RDONLY)
    try:
        r = libc.ioctl(fd, ctypes.c_ulong(req), buf)
        return r, ctypes.get_errno()
    finally:
        os.close(fd)
for path in ('/workspace/q', '/workspace/q/f'):
    fa = ctypes.create_string_buffer(28)
    out['get %s' % path] = fork_run(lambda: ioc(path, FSGETXATTR, fa))
    def set_same():
        ioc(path, FSGETXATTR, fa)
        return ioc(path, FSSETXATTR, fa)
    out['set %s' % path] = fork_run(set_same)
    def set_projid():  # the escape: the file leaves the sandbox's project
        ioc(path, FSGETXATTR, fa)
        struct.pack_into('I', fa, 12, 0)
        return ioc(path, FSSETXATTR, fa)
    out['projid0 %s' % path] = fork_run(set_projid)
    fl = ctypes.c_long(0)
    out['getflags %s' % path] = fork_run(lambda: ioc(path, GETFLAGS, ctypes.byref(fl)))
    def clear_projinherit():
        ioc(path, GETFLAGS, ctypes.byref(fl))
        fl.value &= ~PROJINHERIT
        return ioc(path, SETFLAGS, ctypes.byref(fl))
    out['setflags %s' % path] = fork_run(clear_projinherit)
    out['setflags32 %s' % path] = fork_run(lambda: ioc(path, SETFLAGS32, ctypes.byref(fl)))
print(json.dumps(out))
"""


def test_seccomp_refuses_the_ioctls_that_change_a_files_project_quota(sb):
    res = json.loads(py(sb, QUOTA_IOCTL_PROBE))
    for path in ("/workspace/q", "/workspace/q/f"):
        for k in ("set", "projid0", "setflags", "setflags32"):
            assert res["%s %s" % (k, path)] == "EPERM", res
        # reading stays allowed: the filesystem answers (ok, or ENOTTY/EOPNOTSUPP elsewhere)
        for k in ("get", "getflags"):
            assert res["%s %s" % (k, path)] not in ("EPERM", "ENOSYS"), res


def test_ordinary_tools_run_under_the_filter(sb):
    out = sh(sb, "set -e; cd /tmp; printf 'int main(void){return 42;}\\n' > t.c; "
                 "cp t.c u.c; sort -r u.c | uniq | wc -l; tar czf x.tgz t.c; tar tzf x.tgz; "
                 "if command -v gcc > /dev/null; then gcc -O1 t.c -o t; ./t || echo rc=$?; fi; "
                 "if command -v git > /dev/null; then git init -q r && cd r && cp ../t.c . && "
                 "git add t.c && git -c user.email=a@b -c user.name=n commit -qm one && "
                 "git log --format=%s; fi",
             env={"HOME": "/tmp"}, timeout=120)
    lines = out.split()
    assert lines[:2] == ["1", "t.c"], out
    if shutil.which("gcc"):
        assert "rc=42" in lines, out
    if shutil.which("git"):
        assert lines[-1] == "one", out


def test_cgroup_namespace_hides_the_host_hierarchy(sb):
    inside = sh(sb, "cat /proc/self/cgroup")
    with open("/proc/self/cgroup") as f:
        host_paths = {ln.strip().split(":", 2)[2] for ln in f if ln.strip()}
    for hp in host_paths - {"/"}:
        assert hp not in inside, "host cgroup path %s visible inside:\n%s" % (hp, inside)
    assert sb.rid not in inside, inside


# -- filesystem view -----------------------------------------------------------------------------

ALLOWED_TOP = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "workspace",
               "tmp", "proc", "dev", "tools", "var"}


def test_root_holds_only_the_sandbox_tree(sb, daemon):
    top = set(sh(sb, "ls -A /").split())
    assert top <= ALLOWED_TOP, "unexpected host entries visible at /: %r" % (top - ALLOWED_TOP)
    assert {"usr", "etc", "workspace", "tmp", "proc", "dev", "tools"} <= top, top
    # the daemon's state, the host's home dirs, service-account tokens: absent
    probes = [str(daemon.root), str(daemon.root / sb.rid), "/root", "/home", "/var/run/secrets",
              "/run", "/var/lib", "/var/log", "/work", "/sys/fs/cgroup", "/.ready", "/workspace/../.ready",
              "/workspace/../workspace/../.ready", "/proc/1/root" + str(daemon.root)]
    out = sh(sb, " ".join("test -e '%s' && echo '%s';" % (p, p) for p in probes) + " true")
    assert out == "", "visible inside the sandbox: %s" % out
    # /var is the sandbox's own (OPENSANDBOX.md section 3): nothing of the host's, its /var/tmp
    assert sh(sb, "ls -A /var").split() == ["tmp"]


def test_dev_is_minimal(sb):
    out = py(sb, "import os, stat\n"
                 "for n in sorted(os.listdir('/dev')):\n"
                 "    st = os.lstat('/dev/' + n)\n"
                 "    k = 'blk' if stat.S_ISBLK(st.st_mode) else 'chr' if stat.S_ISCHR(st.st_mode)"
                 " else 'other'\n"
                 "    print(n, k, os.major(st.st_rdev), os.minor(st.st_rdev))\n")
    allowed_chr = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8),
                   "urandom": (1, 9), "tty": (5, 0), "ptmx": (5, 2)}
    for ln in out.splitlines():
        n, kind, ma, mi = ln.split()
        assert kind != "blk", "block device /dev/%s visible" % n
        if kind == "chr":
            assert n in allowed_chr and allowed_chr[n] == (int(ma), int(mi)), \
                "unexpected device /dev/%s (%s:%s)" % (n, ma, mi)
    names = {ln.split()[0] for ln in out.splitlines()}
    assert {"null", "zero", "full", "random", "urandom", "tty"} <= names, names
    assert ok(sb, ["head", "-c", "16", "/dev/urandom"]).out.__len__() == 16


def test_tools_exists_and_is_not_writable(sb):
    sh(sb, "test -d /tools")
    st = run(sb, ["touch", "/tools/x"]).assert_exit()
    assert st.exit != 0


def test_tmp_is_a_writable_tmpfs_and_workspace_writable(sb):
    assert sh(sb, "echo data > /tmp/t && cat /tmp/t") == "data\n"
    m = mounts(sb)
    assert m["/tmp"][1] == "tmpfs", m.get("/tmp")
    assert sh(sb, "echo w > /workspace/w && cat /workspace/w") == "w\n"


def test_uploaded_files_owned_by_sandbox_uid(sb):
    sb.put_ok("a/b/c.txt", b"hello")
    uid = execlib.sandbox_uid(sb)
    out = sh(sb, "stat -c '%u %g %a %n' a a/b a/b/c.txt")
    rows = [ln.split() for ln in out.splitlines()]
    for u, g, mode, name in rows:
        assert int(u) == uid, rows
        assert mode == ("644" if name.endswith(".txt") else "755"), rows
    # and the sandbox can change what the host wrote
    sh(sb, "echo more >> a/b/c.txt && rm a/b/c.txt && rmdir a/b")


def test_other_sandbox_files_invisible(daemon, sb, sb2):
    mark = "sh-ct-mark-" + os.urandom(6).hex()
    sb2.put_ok(mark, b"secret of sandbox 2")
    other_ws = str(daemon.ws(sb2.rid))
    out = sh(sb, "test -e '%s' && echo VISIBLE; test -e '%s/%s' && echo VISIBLE2; "
                 "find / -path /proc -prune -o -path /sys -prune -o -path /usr -prune -o "
                 "-name '%s' -print 2>/dev/null; true" % (other_ws, other_ws, mark, mark),
             timeout=60)
    assert out == "", out
    assert sb2.rid not in sh(sb, "cat /proc/self/mountinfo")


def test_other_sandbox_and_host_processes_invisible(sb, sb2):
    m = execlib.marker()
    ok(sb2, ["sh", "-c", "sleep %s >/dev/null 2>&1 &" % m])
    assert shlib.wait_until(lambda: execlib.host_sleepers(m), timeout=5), \
        "background sleep not running"
    out = py(sb, "import os, json\n"
                 "ps = []\n"
                 "for n in os.listdir('/proc'):\n"
                 "    if n.isdigit():\n"
                 "        try: ps.append((int(n), open('/proc/%s/cmdline' % n, 'rb').read()"
                 ".replace(b'\\0', b' ').decode()))\n"
                 "        except OSError: pass\n"
                 "print(json.dumps(ps))\n")
    ps = json.loads(out)
    cmds = " | ".join(c for _, c in ps)
    assert ("sleep " + m) not in cmds, cmds
    # pid 1 is the sandbox's own init (a fork of the daemon, so its argv names the daemon's
    # binary); apart from it only this exec's own process may be visible
    assert 1 in [p for p, _ in ps], "no pid 1 (not a pid namespace?) %r" % ps
    others = [(p, c) for p, c in ps if p != 1 and not c.startswith("python3 -c import os")]
    assert others == [], "processes visible that are not this exec's: %r" % others


def test_sandbox_init_is_not_accessible(sb):
    # pid 1 runs as host root: its environment, memory, fds and root must stay closed
    out = sh(sb, "for p in /proc/1/environ /proc/1/mem /proc/1/fd/0; do "
                 "cat $p >/dev/null 2>&1 && echo READABLE $p; done; "
                 "ls /proc/1/fd >/dev/null 2>&1 && echo LISTED; "
                 "ls /proc/1/root/ >/dev/null 2>&1 && echo ROOT; true")
    assert out == "", out
    st = run(sb, ["kill", "-9", "1"]).assert_exit()
    assert st.exit != 0, st.describe()
    assert sh(sb, "echo alive") == "alive\n"


# -- network -----------------------------------------------------------------------------------

def test_daemon_port_unreachable_from_inside(sb, daemon):
    out = py(sb, "import socket\n"
                 "s = socket.socket(); s.settimeout(2)\n"
                 "try:\n    s.connect(('127.0.0.1', %d)); print('CONNECTED')\n"
                 "except OSError as e: print('ERR', e.errno)\n" % daemon.port)
    assert "CONNECTED" not in out, out


def test_no_route_to_any_non_loopback_address(sb):
    out = py(sb, "import socket\n"
                 "for a in ('10.255.255.1',):\n"
                 "    s = socket.socket(); s.settimeout(1)\n"
                 "    try:\n        s.connect((a, 9)); print(a, 'CONNECTED')\n"
                 "    except OSError as e:\n"
                 "        print(a, 'ERR', e.errno)\n"
                 "try:\n    s = socket.socket(socket.AF_INET6); s.settimeout(1)\n"
                 "    s.connect(('2001:db8::1', 9)); print('v6 CONNECTED')\n"
                 "except OSError as e: print('v6 ERR', e.errno)\n")
    lines = out.splitlines()
    assert len(lines) == 2 and "CONNECTED" not in out, out
    f = lines[0].split()
    # ENETUNREACH, not the 1 s socket timeout: connect failed at once instead of waiting
    assert int(f[2]) == errno.ENETUNREACH, out
    f = lines[1].split()
    assert int(f[2]) in (errno.ENETUNREACH, errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL), out
    devs = sh(sb, "cat /proc/net/dev")
    ifaces = [ln.split(":")[0].strip() for ln in devs.splitlines()[2:]]
    assert ifaces == ["lo"], devs


def test_loopback_works_inside(sb):
    out = py(sb, "import socket, threading\n"
                 "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)\n"
                 "port = srv.getsockname()[1]\n"
                 "def serve():\n"
                 "    c, _ = srv.accept(); c.sendall(c.recv(100).upper()); c.close()\n"
                 "t = threading.Thread(target=serve); t.start()\n"
                 "cl = socket.create_connection(('127.0.0.1', port), timeout=5)\n"
                 "cl.sendall(b'ping'); print(cl.recv(100).decode()); t.join(5)\n")
    assert out.strip() == "PING"


# -- resources ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_fork_bomb_stays_inside_pids_limit_and_host_keeps_answering(small_daemon):
    c = small_daemon.client
    s = c.new_sandbox()
    other = c.new_sandbox()
    uid = execlib.sandbox_uid(s)
    # the host keeps answering: every probe within its call timeout (the latency is
    # tests/bench's "healthz worst, during a fork bomb" figure)
    watch = shlib.ProbeWatch(c, timeout=1.0, interval=0.1)
    watch.start()
    try:
        # 1. a bounded fork loop proves the limit before anything unbounded runs
        out = py(s, "import os, signal, time\n"
                    "kids = []\n"
                    "try:\n"
                    "    while len(kids) < 400:\n"
                    "        pid = os.fork()\n"
                    "        if pid == 0:\n            time.sleep(20); os._exit(0)\n"
                    "        kids.append(pid)\n"
                    "    print('unbounded', len(kids))\n"
                    "except OSError as e:\n    print('stopped', len(kids), e.errno)\n"
                    "for k in kids: os.kill(k, signal.SIGKILL)\n"
                    "for k in kids: os.waitpid(k, 0)\n", timeout=60)
        word, n = out.split()[:2]
        assert word == "stopped" and int(n) < 64, "fork loop not stopped by pids-max=64: " + out
        assert len(execlib.host_procs_of_uid(uid)) <= 64
        # 2. the real thing: a bash fork bomb, left running in the sandbox
        st = run(s, ["bash", "-c", ":(){ :|:& };:"], timeout=60)
        assert st.final is not None, st.describe()
        t_end = time.monotonic() + 4
        most, limit = 0, None
        while time.monotonic() < t_end:
            procs = execlib.host_procs_of_uid(uid)
            # a /proc scan is not atomic (bomb processes come and go while it runs): the
            # kernel's own counter of the sandbox's pids cgroup is the measure
            most = max(most, len(procs))
            for p in procs[:3]:
                limit = execlib.pids_limit_of(p[0]) or limit
            if limit:
                assert limit[2] == 64 and limit[1] <= 64, limit
            time.sleep(0.2)
        assert limit, "no pids cgroup with a limit above the sandbox's processes"
        assert most >= 32, "the bomb never got going (%d processes)" % most
        # another sandbox still works
        assert sh(other, "echo alive") == "alive\n"
        r = s.delete(timeout=10)  # a delete that does not answer within 10 s fails here
        assert r.status == 204, r
        left = execlib.wait_gone(lambda: execlib.host_procs_of_uid(uid), timeout=10)
        assert not left, "%d processes of the deleted sandbox remain" % len(left)
    finally:
        watch.stop()
        execlib.kill_uid_leftovers(c.daemon_pid, uid)
        other.delete()
    watch.assert_answered()


def test_memory_hog_stays_inside_and_host_keeps_answering(small_daemon):
    c = small_daemon.client
    s = c.new_sandbox()
    # every probe within its call timeout (the latency: tests/bench's "healthz worst, during
    # a memory hog")
    watch = shlib.ProbeWatch(c, timeout=1.0, interval=0.1)
    watch.start()
    try:
        st = run(s, ["python3", "-c", "l = []\n"
                                      "while True: l.append(b'x' * (8 << 20))\n"], timeout=60)
        st.assert_exit()
        assert st.exit != 0, st.describe()
        assert sh(s, "echo still usable") == "still usable\n"
    finally:
        watch.stop()
        s.delete()
    watch.assert_answered()


def test_delete_kills_every_process_of_the_sandbox(daemon):
    c = daemon.client
    s = c.new_sandbox()
    uid = execlib.sandbox_uid(s)
    m = execlib.marker()
    ok(s, ["sh", "-c", "sleep %(m)s >/dev/null 2>&1 & "
                       "setsid sh -c 'sleep %(m)s & exec sleep %(m)s' </dev/null >/dev/null "
                       "2>&1 & (setsid sleep %(m)s </dev/null >/dev/null 2>&1 &) ; true"
           % {"m": m}])
    try:
        shlib.wait_until(lambda: len(execlib.host_sleepers(m)) >= 4, timeout=5)
        assert len(execlib.host_sleepers(m)) == 4
        procs = execlib.host_procs_of_uid(uid)
        assert procs
        # the sandbox's own cgroup: the one carrying its pids limit (section 2.2: delete
        # removes it)
        cg = execlib.pids_limit_of(procs[0][0])
        r = s.delete()
        assert r.status == 204, r
        left = execlib.wait_gone(lambda: execlib.host_procs_of_uid(uid), timeout=5)
        assert not left, "survived delete: %r" % left
        if cg:
            assert shlib.wait_until(lambda: not os.path.exists(cg[0]), timeout=5), \
                "cgroup %s left after delete" % cg[0]
        assert not execlib.host_sleepers(m)
        assert not os.path.exists(daemon.root / s.rid)
    finally:
        execlib.kill_uid_leftovers(c.daemon_pid, uid)
        execlib.kill_pids([p[0] for p in execlib.host_sleepers(m)], c.daemon_pid)


# -- symlink swap race -------------------------------------------------------------------------

# Runs inside the sandbox, in /workspace: swaps `d` between a directory, a link to "/" and an
# absolute link to the host directory `outside` (dangling inside the sandbox, whose /tmp is
# its own tmpfs), as fast as it can for argv[2] seconds. Uploads may recreate `d` as a
# directory in the gaps; every failure is ignored, the loop just goes on.
SWAPPER = r"""
import os, shutil, sys, time
O = sys.argv[1]
end = time.time() + float(sys.argv[2])
i = 0
while time.time() < end:
    i += 1
    tmp = 't%d' % i
    k = i % 3
    if k == 0:
        os.mkdir(tmp)
    elif k == 1:
        os.symlink('/', tmp)
    else:
        os.symlink(O, tmp)
    old = 'old%d' % i
    try:
        os.rename('d', old)
    except OSError:
        pass
    try:
        os.rename(tmp, 'd')
    except OSError:
        try:
            os.unlink(tmp) if os.path.islink(tmp) else shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            pass
    try:
        if os.path.islink(old):
            os.unlink(old)
        elif os.path.isdir(old):
            shutil.rmtree(old, ignore_errors=True)
    except OSError:
        pass
print('swaps', i)
"""

# what the writes would create at the host's / if `d` -> "/" were followed on the host
HOST_ROOT_NAMES = ("/secret", "/newfile", "/sub")


def test_symlink_swap_race_never_reaches_outside(sb, outside):
    O = str(outside)
    for p in HOST_ROOT_NAMES:
        if os.path.lexists(p):
            pytest.skip("host already has %s; the race could not tell a leak from it" % p)
    secret = (outside / "secret").read_bytes()
    before = shlib.snapshot_tree(outside)
    passwd = open("/etc/passwd", "rb").read()
    sb.put_ok("swapper.py", SWAPPER.encode())
    sb.mkdir("d")
    # paths an unconfined resolver would take to `outside` (or to the host's /etc)
    reads = ["d/secret", "d" + O + "/secret", "d/etc/passwd", "d/sub/deep",
             "d" + O + "/sub/deep"]
    writes = ["d/secret", "d" + O + "/secret", "d/newfile", "d" + O + "/newfile",
              "d/sub/deep", "d" + O + "/sub/new/deeper"]
    seen = {"ok_put": 0, "ok_get": 0, "leak": [], "exc": []}
    stop = threading.Event()

    def hammer():
        while not stop.is_set():
            try:
                for p in writes:
                    if sb.put(p, b"PWNED-BY-RACE").status == 204:
                        seen["ok_put"] += 1
                for p in reads:
                    r = sb.get(p)
                    if r.status == 200:
                        seen["ok_get"] += 1
                        if r.body in (secret, b"HOST-DEEP", passwd):
                            seen["leak"].append(p)
            except Exception as e:  # a reset connection is not a leak; keep hammering
                seen["exc"].append(repr(e))

    st = ExecStream(sb.c, sb.rid, ["python3", "swapper.py", O, "3"])
    assert st.status == 200, st.body
    threads = [threading.Thread(target=hammer, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        st.read_all(timeout=30)
    finally:
        stop.set()
        for t in threads:
            t.join(15)
        created = [p for p in HOST_ROOT_NAMES if os.path.lexists(p)]
        for p in created:  # we checked they did not exist before
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
    assert not created, "upload through the race created %r on the host" % created
    assert not seen["leak"], "host file read through %r" % seen["leak"]
    assert shlib.snapshot_tree(outside) == before, "host directory outside was changed"
    assert open("/etc/passwd", "rb").read() == passwd
    st.assert_exit(0)
    swaps = int(st.out.split()[1])
    assert swaps > 50, "the race barely ran: %d swaps" % swaps
    assert seen["ok_put"] > 0, "no upload ever succeeded: the race never overlapped (%r)" % (
        seen["exc"][:3],)
