"""Issue 20, finding 1: the work of a path lookup is bounded, for one path and for one request.

A sandbox process plants a chain of 40 absolute links, each through a 2,000-level directory
path, so that one lookup of `/tmp/z/l0/f` re-walks the deep path 40 times (~80,000 component
lookups, 0.2 s or more of the daemon's loop); and links that cost ~2,000 steps each, within the
bound of one lookup, to be asked 1,024 times in one query (by 4 clients at once: unsliced, each
request would hold the loop for its whole budget in turn). `files/info`, `permissions`, `mv` and
`POST /directories` are asked for them, and `POST /directories` for a 2,000-level path that the
old `mkdir -p` resolved again from the root for every level (quadratic), all while
`shlib.ProbeWatch` probes `/healthz`: every probe must answer within its call timeout. Before
the fix each of these held the loop for seconds. Now a lookup costs at most 4,096 steps
(its path's components and its links' targets'), a request at most 65,536 (both answered 400
naming the path), a many-path request runs in slices of the loop, and `mkdir -p` walks its
path once (fs/safe_open.c, docs/security.md)."""
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

import shlib
from oslib import expect
from sselib import stdout_of
from test_os_files import info

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CALL = 60.0    # call timeout of an attacking request (the old code took seconds)
DEPTH = 2000   # levels of the deep directory path D
LINKS = 40     # links of the chain /tmp/z/l0 -> D/l1 -> ... -> D/l39 -> D
COSTLY = 24    # links /tmp/y/c<k> -> D, ~2,005 steps each to look below
CHAIN = "/tmp/z/l0/f"
CLIENTS = 4    # concurrent clients of the request-budget attack


def sanitized():
    """The ASan build is several times slower: its probes get the default call timeout."""
    out = subprocess.run(["ldd", shlib.binary()], capture_output=True, text=True).stdout
    return "libasan" in out


PROBE = shlib.PROBE_TIMEOUT if sanitized() else 0.25

PLANT = r"""
set -e
D=/tmp/z
i=0; while [ $i -lt %(depth)d ]; do D=$D/d; i=$((i+1)); done
mkdir -p "$D" /tmp/y
echo chained > "$D/f"
i=0; while [ $i -lt 16 ]; do echo m > "$D/m$i"; i=$((i+1)); done
i=1; while [ $i -lt %(last)d ]; do ln -s "$D/l$((i+1))" "$D/l$i"; i=$((i+1)); done
ln -s "$D" "$D/l%(last)d"
ln -s "$D/l1" /tmp/z/l0
i=0; while [ $i -lt %(costly)d ]; do ln -s "$D" /tmp/y/c$i; i=$((i+1)); done
readlink /tmp/z/l0 | wc -c
"""


@pytest.fixture
def chain(osc, sbx):
    """The sandbox's id, once its process planted the chain (every link target < PATH_MAX)."""
    sid = sbx["id"]
    out = stdout_of(osc, sid, PLANT % {"depth": DEPTH, "last": LINKS - 1, "costly": COSTLY})
    assert 4000 < int(out[-1]) < 4096, out
    return sid


def watched(daemon):
    return shlib.ProbeWatch(daemon.client, timeout=PROBE)


def under_probes(daemon, attack, probes=5, rounds=200):
    """`attack` again and again while /healthz is probed, until `probes` probes ran (each
    round is a few ms now; a round of the old code held the loop for seconds)."""
    with watched(daemon) as w:
        for _ in range(rounds):
            attack()
            if w.probes >= probes:
                break
    w.assert_answered(min_probes=probes)


def refused_naming(r, path):
    b = expect(r, 400)
    assert path in b["message"], b
    return b


def test_info_of_paths_through_forty_deep_links_is_400_and_healthz_keeps_answering(
        daemon, osc, chain):
    def attack():
        r = osc.execd(chain, "GET", "/files/info?" + "&".join(["path=" + CHAIN] * 16),
                      timeout=CALL)
        b = refused_naming(r, CHAIN)
        assert "4096" in b["message"], b

    under_probes(daemon, attack)


def test_info_of_1024_costly_paths_runs_in_slices_and_stops_at_the_requests_budget(
        daemon, osc, chain):
    """Each lookup is within its bound (~2,005 steps), so the request's budget ends it (~32
    lookups, ~0.15 s of work here); CLIENTS such requests at once would hold the loop that
    long each, one after the other, if they were not cut into slices."""
    paths = ["/tmp/y/c%d/f" % (i % COSTLY) for i in range(1024)]
    url = "/files/info?" + "&".join("path=" + p for p in paths)

    def one(_):
        b = expect(osc.execd(chain, "GET", url, timeout=CALL), 400)
        assert "65536" in b["message"] and "/tmp/y/c" in b["message"], b

    with ThreadPoolExecutor(CLIENTS) as pool:
        under_probes(daemon, lambda: list(pool.map(one, range(CLIENTS))))


def test_a_delete_of_many_costly_paths_runs_in_slices_and_stops_at_the_requests_budget(
        daemon, osc, chain):
    """`DELETE /files` looks its paths up as `info` does: in slices of the loop, all of them
    together within a request's 65,536 steps (~32 of these ~2,005-step lookups), so CLIENTS
    such requests at once never hold the loop for more than a slice each."""
    url = "/files?" + "&".join("path=/tmp/y/c%d/nothing" % (i % COSTLY) for i in range(1024))

    def one(_):
        b = expect(osc.execd(chain, "DELETE", url, timeout=CALL), 400)
        assert "65536" in b["message"] and "/tmp/y/c" in b["message"], b

    with ThreadPoolExecutor(CLIENTS) as pool:
        under_probes(daemon, lambda: list(pool.map(one, range(CLIENTS))))
    # and nothing of the sandbox's was touched meanwhile
    assert stdout_of(osc, chain, "cat /tmp/y/c0/f") == ["chained"]


def test_info_of_costly_paths_within_the_budget_is_answered_whole(daemon, osc, chain):
    """24 lookups of ~2,005 steps (48,000 of the request's 65,536): answered from several
    slices, every path as asked, in a 200."""
    paths = ["/tmp/y/c%d/f" % i for i in range(COSTLY)]
    with watched(daemon) as w:
        j = expect(info(osc, chain, *paths), 200)
    w.assert_answered()
    assert sorted(j) == sorted(paths)
    assert all(j[p]["type"] == "file" and j[p]["size"] == 8 for p in paths), j


def test_permissions_of_many_paths_through_forty_deep_links_are_400_and_nothing_changes(
        daemon, osc, chain):
    body = {"/tmp/z/l0" + "/" * k + "f": {"mode": 600} for k in range(1, 17)}
    before = stdout_of(osc, chain, "cd /tmp/y/c0 && stat -c %a f")
    assert before != ["600"]
    under_probes(daemon, lambda: refused_naming(
        osc.execd(chain, "POST", "/files/permissions", body=body, timeout=CALL), "/tmp/z/l0/f"))
    assert stdout_of(osc, chain, "cd /tmp/y/c0 && stat -c %a f") == before


def test_mv_of_many_entries_through_forty_deep_links_is_400_and_nothing_moves(
        daemon, osc, chain):
    body = [{"src": "/tmp/z/l0/m%d" % i, "dest": "/tmp/out/m%d" % i} for i in range(16)]
    under_probes(daemon, lambda: refused_naming(
        osc.execd(chain, "POST", "/files/mv", body=body, timeout=CALL), "/tmp/z/l0/m0"))
    assert stdout_of(osc, chain, "cd /tmp/y/c0 && ls m* | wc -l") == ["16"]


def test_mkdir_through_forty_deep_links_is_400_and_makes_nothing(daemon, osc, chain):
    under_probes(daemon, lambda: refused_naming(
        osc.execd(chain, "POST", "/directories", body={"/tmp/z/l0/new/a/b/c": {"mode": 755}},
                  timeout=CALL), "/tmp/z/l0/new/a/b/c"))
    assert stdout_of(osc, chain, "test -e /tmp/y/c0/new || echo none") == ["none"]


def test_mkdir_of_a_2000_level_path_is_one_walk_and_healthz_keeps_answering(daemon, osc, sbx):
    """The old mkdir -p resolved every prefix again from the root: ~4 million component
    lookups for this path, seconds of the loop."""
    sid = sbx["id"]
    deep = "/tmp/m" + "/d" * DEPTH
    with watched(daemon) as w:
        expect(osc.execd(sid, "POST", "/directories", body={deep: {"mode": 700}},
                         timeout=CALL), 200)
        r = osc.execd(sid, "POST", "/files/upload", timeout=CALL,
                      body=upload_body(deep + "/x/y/file", b"deep"),
                      headers={"Content-Type": "multipart/form-data; boundary=b0undary"})
        expect(r, 200)
        expect(osc.execd(sid, "POST", "/files/mv", timeout=CALL,
                         body=[{"src": deep + "/x/y/file", "dest": deep + "/x/z/moved"}]), 200)
    w.assert_answered()
    script = "cd /tmp/m && cd ./%s && stat -c %%a . && cat x/z/moved" % ("d/" * DEPTH)
    assert stdout_of(osc, sid, script) == ["700", "deep"]


def upload_body(path, data, boundary="b0undary"):
    return (b"--" + boundary.encode() + b"\r\n"
            b'Content-Disposition: form-data; name="metadata"; filename="metadata"\r\n'
            b"Content-Type: application/json\r\n\r\n"
            b'{"path": "' + path.encode() + b'"}\r\n'
            b"--" + boundary.encode() + b"\r\n"
            b'Content-Disposition: form-data; name="file"; filename="blob"\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n"
            b"--" + boundary.encode() + b"--\r\n")


@pytest.mark.parametrize("route,body", [
    ("/files/permissions", {"/tmp/p%d" % i: {"mode": 644} for i in range(1025)}),
    ("/files/mv", [{"src": "/tmp/s%d" % i, "dest": "/tmp/d%d" % i} for i in range(1025)]),
    ("/directories", {"/tmp/n%d" % i: {"mode": 755} for i in range(1025)}),
])
def test_a_body_of_more_than_1024_entries_is_400_naming_the_bound(osc, sbx, route, body):
    b = expect(osc.execd(sbx["id"], "POST", route, body=body, timeout=CALL), 400)
    assert "1024" in b["message"], b
