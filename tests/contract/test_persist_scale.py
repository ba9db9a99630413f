"""Persist fidelity at scale (issue 4, point 4): a 100,000-file workspace survives
persist -> new sandbox with the same item_id, entry for entry. The state root and the
archive live on a tmpfs mounted for this test only (files on this disk cost ~0.4 ms each),
unmounted afterwards."""
import os
import subprocess
import tempfile

import pytest

import persistlib as pl
import shlib

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="persist and tmpfs need root")

N_DIRS, PER_DIR = 100, 1000


@pytest.fixture
def tmpfs():
    mnt = tempfile.mkdtemp(prefix="sh-pscale-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4g", "tmpfs", mnt], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt], check=False)
        os.rmdir(mnt)


def test_100000_file_tree_round_trips_through_the_archive(tmpfs):
    nfs = os.path.join(tmpfs, "archive")
    os.mkdir(nfs)
    d = shlib.Daemon(root=os.path.join(tmpfs, "root"), args=["--nfs-root=%s" % nfs])
    try:
        item = "scale-" + os.urandom(4).hex()
        r = d.client.create({"item_id": item}, timeout=120)
        assert r.status == 200, r
        a = shlib.Sandbox(d.client, r.json()["remote_id"])
        ws = d.ws(a.rid)
        uid = os.stat(ws).st_uid
        for i in range(N_DIRS):
            sub = ws / ("d%03d" % i)
            sub.mkdir()
            for j in range(PER_DIR):
                fd = os.open(sub / ("f%04d" % j), os.O_CREAT | os.O_WRONLY, 0o644)
                os.write(fd, b"%d/%d" % (i, j))
                os.close(fd)
        pl.chown_tree(ws, uid)
        want = pl.tree_entries(ws)
        assert len(want) >= N_DIRS * PER_DIR

        r = a.c.post("%s/persist" % a.base, body={"delete": True}, timeout=600)
        assert r.status == 204, r
        r = d.client.create({"item_id": item}, timeout=600)
        assert r.status == 200, r
        b = shlib.Sandbox(d.client, r.json()["remote_id"])
        got = pl.tree_entries(d.ws(b.rid))
        assert got == want, pl.diff(want, got)
        assert b.ready_v() is True
    finally:
        assert d.stop() == 0
