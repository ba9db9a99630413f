"""The graveyard of cgroups (src/isolation/cgroup.c, docs/architecture.md): a cgroup whose last
processes have not exited yet waits there and is retried; one still there after a minute is
a real leftover, logged once ("cgroup-remove-failed ... giving up"). An exec's cgroup that went
meanwhile by another path (its sandbox's subtree, removed when both waited there together)
is removed, not a leftover: it is never logged, or hundreds of such lines, one per killed
exec, would hide a real leak (issue 20, finding 12).

One daemon for the module: it deletes many sandboxes in the middle of their execs (each exec's
cgroup and its sandbox's then wait together), then leaves one real leftover (a command's
background process keeps its exec cgroup busy), and is watched until that leftover is given
up: by then every grave of the churn, all buried earlier, has been decided too."""
import os
import time

import pytest

import execlib
import shlib

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CHURN = 30          # sandboxes deleted with an exec running
GIVE_UP_S = 60      # GRAVE_GIVE_UP_MS: a grave still there after this is a leftover
WAIT_S = GIVE_UP_S + 90  # bound on the wait for the leftover's line (busy, sanitized builds)
MANY = "for i in $(seq 20); do sleep 1000 & done; wait"  # an exec whose kill takes a moment


def _gave_up(d):
    """The relpaths of the "giving up" lines so far (each line names its cgroup first)."""
    out = []
    for ln in d.stderr_text().splitlines():
        if '"cgroup-remove-failed"' in ln and "giving up" in ln:
            msg = ln.split('"msg":"', 1)[1]
            out.append(msg.split("'")[1])
    return out


def _exists(d, relpath):
    return any(os.path.isdir(os.path.join(top, relpath))
               for top in shlib.daemon_cgroup_dirs(d.root))


@pytest.fixture(scope="module")
def watched():
    d = shlib.Daemon()
    c = d.client
    deleted = []
    keep = None
    try:
        for _ in range(CHURN):
            s = c.new_sandbox()
            execlib.ok(s, ["true"])
            st = execlib.ExecStream(c, s.rid, ["/bin/sh", "-c", MANY])
            assert st.status == 200, st.body
            assert s.delete(timeout=30).status == 204
            deleted.append(s.rid)
            st.conn.close()
        # the real leftover: the command exits, its background sleep keeps its cgroup busy
        keep = c.new_sandbox()
        execlib.ok(keep, ["/bin/sh", "-c", "sleep 1000 </dev/null >/dev/null 2>&1 &"])
        uid = execlib.sandbox_uid(keep)
        procs = [p for p in execlib.host_procs_of_uid(uid) if b"sleep" in p[2]]
        assert procs, "the background sleep is not running"
        mine = execlib.cgroup_dirs_of(procs[0][0])
        leftover = None
        for path in mine.values():
            if "/" + keep.rid + "/" in path:
                leftover = path[path.index(keep.rid):]
        assert leftover and leftover.startswith(keep.rid + "/exec-"), mine
        deadline = time.monotonic() + WAIT_S
        while leftover not in _gave_up(d):
            assert time.monotonic() < deadline, \
                "the leftover %r was not reported within %d s" % (leftover, WAIT_S)
            time.sleep(0.5)
        yield d, deleted, leftover
    finally:
        if keep is not None:
            keep.delete()
        d.close()


@pytest.mark.timeout(WAIT_S + 120)
def test_a_cgroup_removed_with_its_sandbox_is_never_reported(watched):
    d, deleted, leftover = watched
    lines = [p for p in _gave_up(d) if p != leftover]
    # nothing of the deleted sandboxes is a leftover: their subtrees are gone
    assert not [p for p in lines if p.split("/")[0] in deleted], \
        "cgroups that were removed are reported as leftovers: %r" % lines[:10]
    assert [p for p in lines if not _exists(d, p)] == [], lines[:10]
    assert not any(_exists(d, rid) for rid in deleted)


@pytest.mark.timeout(WAIT_S + 120)
def test_a_real_leftover_is_reported_once_and_is_there(watched):
    d, deleted, leftover = watched
    assert _gave_up(d).count(leftover) == 1, _gave_up(d)
    assert _exists(d, leftover), "the reported cgroup %r is not there" % leftover
    line = [ln for ln in d.stderr_text().splitlines() if leftover in ln and "giving up" in ln][0]
    assert "processes remain" in line, line
