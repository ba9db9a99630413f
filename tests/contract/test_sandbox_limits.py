"""Node-wide resources one sandbox must not exhaust for the others (issue 10, items 7 and 8):
ptys (every devpts instance but the host's draws from one node-wide pool, kernel.pty.max minus
kernel.pty.reserve) and open files (the node's fs.file-max), and every other resource limit a
sandbox process could raise if PID 1 left the daemon's hard limits in place.

Each test performs the attack from inside a sandbox: raise the limit, take the resource until
the kernel refuses, then check the bound and that a neighbour is unharmed. The values are the
ones docs/security.md ("Resource limits") and src/sandbox/worker.c document.

Needs root: sandboxes build namespaces, cgroups and a pivot_root.
"""
import resource

import pytest

import execlib
from execlib import py
from shlib import is_root

pytestmark = pytest.mark.skipif(not is_root(), reason="sandboxes need root (CI runs as root)")

PTYS_MAX = 16     # SH_WORKER_PTYS_MAX
NOFILE = 1024     # SH_WORKER_NOFILE
PIDS_MAX = 512    # SANDBOX_HOST_PIDS_MAX default (the module daemon's)
INF = resource.RLIM_INFINITY

# Linux's RLIMIT_* numbers (Python's resource module lacks some, RLIMIT_LOCKS for one)
NUM = {"RLIMIT_CPU": 0, "RLIMIT_FSIZE": 1, "RLIMIT_DATA": 2, "RLIMIT_STACK": 3, "RLIMIT_CORE": 4,
       "RLIMIT_RSS": 5, "RLIMIT_NPROC": 6, "RLIMIT_NOFILE": 7, "RLIMIT_MEMLOCK": 8,
       "RLIMIT_AS": 9, "RLIMIT_LOCKS": 10, "RLIMIT_SIGPENDING": 11, "RLIMIT_MSGQUEUE": 12,
       "RLIMIT_NICE": 13, "RLIMIT_RTPRIO": 14, "RLIMIT_RTTIME": 15}

# resource -> (soft, hard) in every sandbox, before the daemon's own hard limit caps them
LIMITS = {
    "RLIMIT_NOFILE": (NOFILE, NOFILE),
    "RLIMIT_CORE": (0, 0),
    "RLIMIT_MEMLOCK": (8 << 20, 8 << 20),
    "RLIMIT_MSGQUEUE": (819200, 819200),
    "RLIMIT_SIGPENDING": (4096, 4096),
    "RLIMIT_RTPRIO": (0, 0),
    "RLIMIT_NICE": (0, 0),
    "RLIMIT_NPROC": (PIDS_MAX, PIDS_MAX),
    "RLIMIT_STACK": (8 << 20, INF),
    "RLIMIT_RTTIME": (INF, INF),
    "RLIMIT_LOCKS": (INF, INF),
    "RLIMIT_RSS": (INF, INF),
    "RLIMIT_AS": (INF, INF),
    "RLIMIT_DATA": (INF, INF),
    "RLIMIT_CPU": (INF, INF),
    "RLIMIT_FSIZE": (INF, INF),
}
assert sorted(LIMITS) == sorted(NUM)


def expected(name):
    """The documented value, lowered to the daemon's own hard limit (it inherits ours)."""
    soft, hard = LIMITS[name]
    _, ours = resource.getrlimit(NUM[name])
    lo = lambda a, b: b if a == INF else a if b == INF else min(a, b)
    hard = lo(hard, ours)
    return lo(soft, hard), hard


# -- ptys (item 7) ------------------------------------------------------------------------------

PTY_HOG = r"""
import errno, os, resource, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
fds, err = [], None
while len(fds) < 5000:            # the node's whole pool is 3072 by default
    try:
        fds.append(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
    except OSError as e:
        err = e.errno
        break
print("HELD", len(fds), errno.errorcode.get(err, err), flush=True)
time.sleep(60)
"""


def test_one_sandbox_cannot_take_every_pty_on_the_node(sb, sb2):
    hog = execlib.start(sb, ["python3", "-c", PTY_HOG])
    try:
        hog.wait_output(b"\n", timeout=30)
        held, why = hog.o.split()[1:3]
        # the neighbour, while the hog holds all it could get
        out = py(sb2, "import os\nm, s = os.openpty()\nprint('PTY', os.ttyname(s))")
        assert out.startswith("PTY /dev/pts/"), out
        assert why == b"ENOSPC", hog.o
        assert int(held) <= PTYS_MAX, "one sandbox held %s ptys" % held.decode()
    finally:
        hog.abort()


def test_a_sandbox_gets_its_ptys_back_after_closing_them(sb):
    # the per-sandbox bound counts ptys in use, not ptys ever opened
    out = py(sb, "import os\n"
                 "for i in range(%d):\n"
                 "    m, s = os.openpty(); os.close(m); os.close(s)\n"
                 "print('OK')" % (3 * PTYS_MAX))
    assert out.strip() == "OK"


# -- open files (item 8) ------------------------------------------------------------------------

FD_HOG = r"""
import errno, os, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard + 1, hard + 1))
    raised = "RAISED"
except (ValueError, OSError):
    raised = "REFUSED"
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
fds, err = [], None
while len(fds) < 200000:
    try:
        fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        err = e.errno
        break
print(soft, hard, raised, len(fds), errno.errorcode.get(err, err))
"""


def test_open_files_of_a_process_are_bounded_by_a_hard_limit_it_cannot_raise(sb):
    soft, hard, raised, opened, why = py(sb, FD_HOG).split()
    assert (int(soft), int(hard)) == expected("RLIMIT_NOFILE"), (soft, hard)
    assert raised == "REFUSED", "the hard RLIMIT_NOFILE could be raised from inside"
    assert why == "EMFILE", why
    # 0, 1, 2 are open already
    assert int(opened) <= NOFILE - 3, "one process opened %s files" % opened


LIMITS_PROBE = r"""
import resource
for name, r in %r:
    soft, hard = resource.getrlimit(r)
    verdict = "FIXED"
    if hard != resource.RLIM_INFINITY:
        try:
            resource.setrlimit(r, (soft, hard + 1))
            verdict = "HARD-RAISED"
        except (ValueError, OSError):
            pass
    if verdict == "FIXED" and soft != hard:
        try:
            resource.setrlimit(r, (hard, hard))    # soft up to hard is always allowed
            resource.setrlimit(r, (soft, hard))
        except (ValueError, OSError):
            verdict = "SOFT-STUCK"
    print(name, soft, hard, verdict)
"""


def test_every_resource_limit_is_set_and_no_hard_limit_can_be_raised(sb):
    out = py(sb, LIMITS_PROBE % (sorted(NUM.items()),))
    seen = {}
    for ln in out.splitlines():
        name, soft, hard, verdict = ln.split()
        seen[name] = (int(soft), int(hard), verdict)
    wrong = {n: (seen[n][:2], expected(n)) for n in LIMITS if seen[n][:2] != expected(n)}
    assert not wrong, "limits differ from the documented ones (inside, wanted): %r" % wrong
    raised = [n for n in LIMITS if seen[n][2] != "FIXED"]
    assert not raised, "a sandbox could raise: %r" % {n: seen[n] for n in raised}
