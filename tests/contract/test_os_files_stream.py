"""Long answers of the /v1 file API (issue 20, findings 2, 4 and 11), attacked: listings and
searches of deep trees of long control-character names (each entry ~98 KiB of JSON) are
streamed with backpressure and a bound on the whole answer (SANDBOX_HOST_LISTING_MAX: 400
before the answer, or a cut stream a client cannot take for a whole one); line-mode downloads
are streamed from the file whatever its size; a file answer whose file shrinks is closed at
once, on both surfaces; and a download that is stuck holds a shutdown no longer than its
grace. The daemon's memory is read in /proc (VmHWM), and /healthz is probed with a tight call
timeout while each attack runs; nothing here measures a time."""
import hashlib
import http.client
import json
import os
import socket
import time

import pytest

import oslib
import shlib
from oslib import expect
from sselib import stdout_of

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CALL = 10.0
# An answer that is counted first (a deep tree's listing) comes after a whole walk of it.
HEAD_CALL = 120.0
# A probe answers within this while an attack runs (a call timeout); the ASan build is slower.
PROBE = shlib.PROBE_TIMEOUT if shlib.sanitized() else 0.25
GRACE = 10.0  # docs/configuration.md: in-flight requests get 10 s after SIGTERM
MiB = 1 << 20

# A tree below `top` (made inside the sandbox): `levels` nested directories under it, each
# named with 255 bytes of control characters (escaped as \u00XX in JSON: 6 bytes each), and
# at the bottom `links` symbolic links and `files` hard links of one file, named alike. At
# 63 levels a bottom entry's path is ~16 KiB and its FileInfo ~98 KiB of JSON.
TREE = r'''
import os, sys
top, levels, links, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
name = (bytes(range(1, 32)) * 9)[:255]
os.makedirs(top, exist_ok=True)
os.chdir(top)
for _ in range(levels):
    os.mkdir(name)
    os.chdir(name)
for i in range(links):
    os.symlink(b"x", name[:249] + b"l%05d" % i)
for i in range(files):
    if i == 0:
        open(name[:249] + b"f00000", "wb").close()
    else:
        os.link(name[:249] + b"f00000", name[:249] + b"f%05d" % i)
print("made")
'''


def make_tree(osc, sid, top, levels=63, links=0, files=0):
    cmd = "cat > /tmp/tree.py <<'EOF'\n%s\nEOF\npython3 /tmp/tree.py %s %d %d %d" % (
        TREE, top, levels, links, files)
    assert stdout_of(osc, sid, cmd) == ["made"]


def execd(sid, sub):
    return "/v1/sandboxes/%s/proxy/%d%s" % (sid, oslib.EXECD_PORT, sub)


def open_get(port, url, rcvbuf=64 << 10, timeout=CALL, headers=None):
    """A GET whose body the test reads itself, slowly if it likes: (connection, response)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.connect()
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    c.request("GET", url, headers=headers or {})
    return c, c.getresponse()


def read_slowly(resp, total, chunk=64 << 10, pause=0.005):
    """Read about `total` bytes of the body, a chunk at a time with a pause after each."""
    got = 0
    while got < total:
        b = resp.read1(chunk)
        if not b:
            break
        got += len(b)
        time.sleep(pause)
    return got


def slow_client_growth_kib(d, url, total):
    """Peak RSS growth of the daemon while a slow client reads `total` bytes of url's answer
    (then leaves), with /healthz probed all along: (growth in KiB, bytes read)."""
    def call():
        c, resp = open_get(d.port, url, timeout=HEAD_CALL)
        try:
            assert resp.status == 200, (resp.status, resp.read(300))
            c.sock.settimeout(CALL)
            return read_slowly(resp, total)
        finally:
            c.close()

    with shlib.ProbeWatch(d.client, timeout=PROBE) as w:
        got, kib = shlib.peak_rss_growth_kib(d.proc.pid, call)
    w.assert_answered(min_probes=5)
    return kib, got


def listing_daemon(listing_max):
    daemon = shlib.Daemon(env={"SANDBOX_HOST_LISTING_MAX": listing_max})
    yield daemon
    daemon.close()


@pytest.fixture(scope="module")
def d():
    """The answers here are far above the default bound: what the daemon holds for them while
    a client reads them is under test, not the bound (see `bounded` for that)."""
    yield from listing_daemon("1G")


@pytest.fixture(scope="module")
def osc(d):
    return oslib.os_client(d)


@pytest.fixture(scope="module")
def deep(osc):
    """A sandbox with /tmp/deep: 63 levels, 1,000 links and 1,000 files at the bottom (a
    ~196 MB listing, a ~98 MB search)."""
    sid = osc.create_ok()["id"]
    make_tree(osc, sid, "/tmp/deep", links=1000, files=1000)
    yield sid
    osc.kill(sid)


# ---- listings and searches: streamed, bounded ----------------------------------------------

@pytest.mark.parametrize("route", [
    "/directories/list?path=/tmp/deep&depth=64",
    "/files/search?path=/tmp/deep&pattern=*",
])
def test_a_deep_tree_of_long_names_is_streamed_to_a_slow_client_in_bounded_memory(
        d, deep, route):
    # Without a bound the answer was built whole before its first byte (hundreds of MB for
    # this tree); streamed, the daemon holds a block and an entry or so for its reader.
    kib, got = slow_client_growth_kib(d, execd(deep, route), 24 * MiB)
    assert got >= 24 * MiB, "the answer ended after %d bytes" % got
    if not shlib.sanitized():  # ASan's quarantine keeps what is freed: RSS says nothing there
        assert kib < 32 * 1024, "the daemon's peak RSS grew by %d KiB" % kib


@pytest.fixture(scope="module")
def bounded():
    yield from listing_daemon("32M")


@pytest.fixture(scope="module")
def trees(bounded):
    """A sandbox with /tmp/over (~39 MB of listing, 400 links at the bottom) and /tmp/under
    (~20 MB): (client, sandbox id)."""
    bosc = oslib.os_client(bounded)
    sid = bosc.create_ok()["id"]
    make_tree(bosc, sid, "/tmp/over", links=400)
    make_tree(bosc, sid, "/tmp/under", links=200)
    yield bosc, sid
    bosc.kill(sid)


def test_a_listing_past_the_answer_bound_is_400_naming_it_before_any_of_it_is_sent(trees):
    bosc, sid = trees
    r = bosc.execd(sid, "GET", "/directories/list?path=/tmp/over&depth=64", timeout=HEAD_CALL)
    b = expect(r, 400)
    assert "SANDBOX_HOST_LISTING_MAX" in b["message"], b


def test_a_listing_within_the_answer_bound_is_streamed_whole(trees):
    bosc, sid = trees
    r = bosc.execd(sid, "GET", "/directories/list?path=/tmp/under&depth=64",
                   timeout=HEAD_CALL)
    entries = expect(r, 200)
    assert len(entries) == 63 + 200
    assert [e["type"] for e in entries[63:]] == ["symlink"] * 200
    paths = [e["path"] for e in entries]
    assert all(paths[i].startswith(paths[i - 1]) for i in range(1, 63)), "a directory first"


def test_a_tree_grown_past_the_bound_while_streamed_cuts_the_stream(bounded):
    """Counted within the bound, then grown past it while its answer is sent: the 200 is gone,
    so the stream is cut, and the client sees a body that is no whole answer."""
    bosc = oslib.os_client(bounded)
    sid = bosc.create_ok()["id"]
    try:
        make_tree(bosc, sid, "/tmp/g/a", levels=62, links=200)  # ~20 MB, first
        stdout_of(bosc, sid, "mkdir /tmp/g/z")  # empty when counted
        c, resp = open_get(bounded.port, execd(sid, "/directories/list?path=/tmp/g&depth=64"),
                           rcvbuf=16 << 10, timeout=HEAD_CALL)
        try:
            assert resp.status == 200, (resp.status, resp.read(300))
            c.sock.settimeout(CALL)
            head = resp.read1(16 << 10)  # the walk waits in a/ for this reader
            make_tree(bosc, sid, "/tmp/g/z", levels=62, links=200)  # ~20 MB more: past 32M
            with pytest.raises(http.client.IncompleteRead) as e:
                resp.read()
        finally:
            c.close()
        body = head + e.value.partial
        assert len(body) > 16 << 20, "cut after %d bytes" % len(body)
        with pytest.raises(ValueError):
            json.loads(body)
        assert shlib.wait_until(lambda: "listing-cut" in bounded.stderr_text(), timeout=CALL)
    finally:
        bosc.kill(sid)


# ---- line mode: streamed from the file -----------------------------------------------------

LINE = b"a line of the file, as text\n"


@pytest.fixture(scope="module")
def lines64(osc):
    """A sandbox with /tmp/lines: 64 MiB of lines (the largest file line mode took before)."""
    sid = osc.create_ok()["id"]
    stdout_of(osc, sid, "yes '%s' | head -c %d > /tmp/lines && echo ok" % (
        LINE[:-1].decode(), 64 * MiB))
    yield sid
    osc.kill(sid)


def test_line_mode_of_a_64_mib_file_is_streamed_in_bounded_memory(d, lines64):
    """It was read whole in one step of the loop and held until the client read it."""
    want = hashlib.sha256((LINE * (64 * MiB // len(LINE) + 1))[:64 * MiB]).hexdigest()
    sha = hashlib.sha256()

    def call():
        c, resp = open_get(d.port, execd(lines64, "/files/download?path=/tmp/lines&offset=1"))
        try:
            assert resp.status == 200, (resp.status, resp.read(300))
            got = 0
            while True:  # slowly for the first 8 MiB, then as fast as it comes
                b = resp.read1(64 << 10)
                if not b:
                    return got
                sha.update(b)
                got += len(b)
                if got < 8 * MiB:
                    time.sleep(0.002)
        finally:
            c.close()

    with shlib.ProbeWatch(d.client, timeout=PROBE) as w:
        got, kib = shlib.peak_rss_growth_kib(d.proc.pid, call)
    w.assert_answered(min_probes=5)
    assert got == 64 * MiB and sha.hexdigest() == want
    if not shlib.sanitized():
        assert kib < 16 * 1024, "the daemon's peak RSS grew by %d KiB" % kib


def test_line_mode_reads_past_64_mib_and_answers_a_short_result_whole(d, osc):
    """80 MiB of zeros (one line), then "last": the lines before are skipped in slices, and the
    short answer comes with its Content-Length. It was a 400 above 64 MiB."""
    sid = osc.create_ok()["id"]
    try:
        stdout_of(osc, sid, "truncate -s 80M /tmp/sparse && printf '\\nlast\\nafter' >> "
                            "/tmp/sparse && echo ok")
        with shlib.ProbeWatch(d.client, timeout=PROBE) as w:
            r = osc.execd(sid, "GET", "/files/download?path=/tmp/sparse&offset=2&limit=1",
                          timeout=CALL)
        w.assert_answered()
        assert r.status == 200 and r.body == b"last", r
        assert r.header("Content-Length") == "4"
    finally:
        osc.kill(sid)


# ---- a file answer whose file shrinks ------------------------------------------------------

def read_until_cut(resp):
    """The rest of a body that was promised longer than its file now is: the connection must
    be closed at once (IncompleteRead), not left waiting (a timeout of the call)."""
    with pytest.raises(http.client.IncompleteRead):
        resp.read()


@pytest.mark.parametrize("headers,status", [({}, 200), ({"Range": "bytes=1024-"}, 206)])
def test_a_download_whose_file_shrinks_is_closed_at_once(d, osc, headers, status):
    sid = osc.create_ok()["id"]
    try:
        stdout_of(osc, sid, "head -c %d /dev/zero > /tmp/shrink && echo ok" % (64 * MiB))
        c, resp = open_get(d.port, execd(sid, "/files/download?path=/tmp/shrink"),
                           rcvbuf=16 << 10, headers=headers)
        try:
            assert resp.status == status, resp.status
            assert resp.read(1 << 20) == b"\0" * (1 << 20)
            stdout_of(osc, sid, "truncate -s 4096 /tmp/shrink && echo ok")
            read_until_cut(resp)
        finally:
            c.close()
    finally:
        osc.kill(sid)


def test_a_native_download_whose_file_shrinks_is_closed_at_once(d):
    sb = d.sandbox()
    try:
        big = d.ws(sb.rid) / "shrink"
        with open(big, "wb") as f:
            f.truncate(64 * MiB)
        c, resp = open_get(d.port, "/sandboxes/%s/file?path=shrink" % sb.rid, rcvbuf=16 << 10)
        try:
            assert resp.status == 200, resp.status
            assert len(resp.read(1 << 20)) == 1 << 20
            os.truncate(big, 4096)
            read_until_cut(resp)
        finally:
            c.close()
    finally:
        sb.delete()


# ---- shutdown with a stuck download --------------------------------------------------------

def stuck_download(daemon, shrink):
    """A /v1 download of 64 MiB whose client reads nothing past the status line; with
    `shrink`, its file is cut short meanwhile. (connection, sandbox id)"""
    osc = oslib.os_client(daemon)
    sid = osc.create_ok()["id"]
    stdout_of(osc, sid, "head -c %d /dev/zero > /tmp/held && echo ok" % (64 * MiB))
    c, resp = open_get(daemon.port, execd(sid, "/files/download?path=/tmp/held"), rcvbuf=4096)
    assert resp.status == 200, resp.status
    if shrink:
        stdout_of(osc, sid, "truncate -s 4096 /tmp/held && echo ok")
    return c


def test_sigterm_with_a_download_its_client_does_not_read_exits_within_the_grace(
        start_daemon):
    daemon = start_daemon()
    c = stuck_download(daemon, shrink=False)
    try:
        daemon.proc.send_signal(15)
        assert daemon.wait_exit(timeout=GRACE + 5) == 0
    finally:
        c.close()


def test_sigterm_with_a_download_whose_file_shrank_does_not_wait_for_it(start_daemon):
    """A response that can never send what it promised is not in flight: it held the
    shutdown for its whole grace."""
    daemon = start_daemon()
    c = stuck_download(daemon, shrink=True)
    try:
        daemon.proc.send_signal(15)
        assert daemon.wait_exit(timeout=GRACE / 2) == 0
    finally:
        c.close()
