"""POST /files/replace never holds the loop (issue 20, finding 3): a file of 8 to 64 MiB with
hundreds of thousands of matches is rewritten while /healthz keeps answering within a tight
call timeout (it used to be one write(2) per match, all in one turn of the loop: 4.7 s for
8 MiB); the rewrite stays atomic (a reader sees the old file or the new one, never a part),
keeps the mode, finds matches that straddle the job's reads, and is bounded: a file that would
grow past 64 MiB, or holds more than 2^20 matches, is refused with a clear error and left as it
was, with nothing beside it."""
import hashlib
import os
import subprocess
import threading

import pytest

import oslib
import shlib
from oslib import expect

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

MIB = 1 << 20
CALL = 60.0
CHUNK = 256 << 10  # the job's reads (files.c REPLACE_CHUNK)


def sanitized():
    out = subprocess.run(["ldd", shlib.binary()], capture_output=True, text=True).stdout
    return "libasan" in out


# A probe answers within this: tight on the normal build, the default on the sanitizer build.
PROBE = shlib.PROBE_TIMEOUT if sanitized() else 0.25


def plant(daemon, sid, name, data, mode=0o644):
    """A file of the sandbox's own in its workspace, written from the host (fast)."""
    ws = daemon.ws(sid)
    st = os.stat(ws)
    path = ws / name
    with open(path, "wb") as f:
        f.write(data)
    os.chown(path, st.st_uid, st.st_gid)
    os.chmod(path, mode)
    return path


def replace(osc, sid, body, verbose=True):
    return osc.execd(sid, "POST", "/files/replace" + ("?verbose=true" if verbose else ""),
                     body=body, timeout=CALL)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("size,every", [(8 * MIB, 16), (60 * MIB, 128)])
def test_a_big_replace_with_many_matches_keeps_healthz_answering(daemon, osc, sbx, size, every):
    sid = sbx["id"]
    unit = b"a" + b"." * (every - 1)
    path = plant(daemon, sid, "big.txt", unit * (size // every), mode=0o640)
    matches = size // every
    seen, done = set(), threading.Event()

    def look():
        # what a reader of the path sees meanwhile: the old file or the whole new one
        while not done.is_set():
            try:
                seen.add(os.stat(path).st_size)
            except FileNotFoundError:
                seen.add(None)

    t = threading.Thread(target=look, daemon=True)
    t.start()
    try:
        with shlib.ProbeWatch(daemon.client, timeout=PROBE) as w:
            r = replace(osc, sid, {"/workspace/big.txt": {"old": "a", "new": "bc"}})
    finally:
        done.set()
        t.join(10)
    w.assert_answered()
    assert expect(r, 200) == {"/workspace/big.txt": {"replacedCount": matches}}
    assert seen <= {size, size + matches}, seen
    with open(path, "rb") as f:
        head = f.read(3 * (every + 1))
    assert head == (b"bc" + b"." * (every - 1)) * 3
    st = os.stat(path)
    assert st.st_size == size + matches and st.st_mode & 0o777 == 0o640
    assert os.listdir(daemon.ws(sid)) == ["big.txt"]


def test_a_match_across_the_jobs_reads_is_replaced(daemon, osc, sbx):
    sid = sbx["id"]
    needle = b"NEEDLE-" + b"n" * 300 + b"-END"
    data = bytearray(b"." * (3 * CHUNK))
    for at in (CHUNK - 5, 2 * CHUNK - len(needle) + 1):
        data[at:at + len(needle)] = needle
    path = plant(daemon, sid, "straddle", bytes(data))
    r = replace(osc, sid, {"/workspace/straddle": {"old": needle.decode(), "new": "X"}})
    assert expect(r, 200) == {"/workspace/straddle": {"replacedCount": 2}}
    with open(path, "rb") as f:
        got = f.read()
    assert got == bytes(data).replace(needle, b"X")


def test_a_replace_that_would_grow_past_the_bound_is_refused_and_changes_nothing(
        daemon, osc, sbx):
    sid = sbx["id"]
    path = plant(daemon, sid, "grow", (b"a" + b"." * 63) * (40 * MIB // 64))
    before, ino = digest(path), os.stat(path).st_ino
    r = replace(osc, sid, {"/workspace/grow": {"old": "a", "new": "x" * 64}})
    body = expect(r, 400, "INVALID_REQUEST_BODY")
    assert "would grow" in body["message"], body
    assert digest(path) == before and os.stat(path).st_ino == ino
    assert os.listdir(daemon.ws(sid)) == ["grow"]


def test_a_replace_with_more_matches_than_the_bound_is_refused_and_changes_nothing(
        daemon, osc, sbx):
    sid = sbx["id"]
    path = plant(daemon, sid, "many", b"ab" * (2 * MIB))  # 2^21 matches of "a"
    before = digest(path)
    r = replace(osc, sid, {"/workspace/many": {"old": "a", "new": "c"}})
    body = expect(r, 400, "INVALID_REQUEST_BODY")
    assert "matches" in body["message"], body
    assert digest(path) == before
    assert os.listdir(daemon.ws(sid)) == ["many"]


def test_a_replace_over_64_mib_is_refused(daemon, osc, sbx):
    sid = sbx["id"]
    path = plant(daemon, sid, "huge", b"")
    os.truncate(path, 64 * MIB + 1)
    r = replace(osc, sid, {"/workspace/huge": {"old": "a", "new": "b"}})
    assert "64 MiB" in expect(r, 400, "INVALID_REQUEST_BODY")["message"]


def test_a_replace_of_more_paths_than_the_bound_is_refused(osc, sbx):
    body = {"/tmp/f%d" % i: {"old": "a", "new": "b"} for i in range(1025)}
    expect(replace(osc, sbx["id"], body), 400, "INVALID_REQUEST_BODY")


def test_a_replace_without_a_match_leaves_the_file_itself(daemon, osc, sbx):
    sid = sbx["id"]
    path = plant(daemon, sid, "none", b"nothing to see" * 1000)
    ino = os.stat(path).st_ino
    r = replace(osc, sid, {"/workspace/none": {"old": "zzz", "new": "y"}})
    assert expect(r, 200) == {"/workspace/none": {"replacedCount": 0}}
    assert os.stat(path).st_ino == ino
