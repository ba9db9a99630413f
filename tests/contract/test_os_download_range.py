"""OPENSANDBOX.md section 3.2, `GET /files/download` with one `Range` (RFC 9110 section 14)
over a 10-byte file, every answer pinned to the byte: its status, `Content-Range`,
`Content-Length` and body. An end at or past the size is the last byte (`bytes=8-10` is
`bytes 8-9/10`, two bytes), a start at or past it is 416; several ranges or junk are the whole
file (200). Each call has a timeout: an answer that promised a byte the file does not have
would never end. The parser itself is unit-tested form by form (u/test_range.c)."""
import pytest

import oslib
import shlib
from oslib import expect

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

DATA = b"0123456789"
BIG = "99999999999999999999999999"  # past 64 bits


@pytest.fixture(scope="module")
def tenbytes(daemon):
    osc = oslib.os_client(daemon)
    j = osc.create_ok()
    from test_os_files import put
    put(osc, j["id"], "/tmp/ten", DATA)
    yield osc, j["id"]
    osc.kill(j["id"])


def _get(osc, sid, rng):
    return osc.execd(sid, "GET", "/files/download?path=%s" % oslib.q("/tmp/ten"),
                     headers={"Range": rng}, timeout=10)


@pytest.mark.parametrize("rng,first,last", [
    ("bytes=8-10", 8, 9),    # the end equal to the size: the last byte, not an eleventh
    ("bytes=0-10", 0, 9),
    ("bytes=9-10", 9, 9),
    ("bytes=0-9", 0, 9),     # the end the last byte
    ("bytes=8-11", 8, 9),    # past the size
    ("bytes=5-" + BIG, 5, 9),
    ("bytes=9-", 9, 9),
    ("bytes=-10", 0, 9),     # a suffix as long as the file, or longer
    ("bytes=-11", 0, 9),
    ("bytes=-" + BIG, 0, 9),
    ("bytes=-1", 9, 9),
    ("Bytes=2-3", 2, 3),     # the unit is case-insensitive
])
def test_a_satisfiable_range_is_206_with_exactly_its_bytes(tenbytes, rng, first, last):
    osc, sid = tenbytes
    r = _get(osc, sid, rng)
    assert r.status == 206, r
    assert r.header("Content-Range") == "bytes %d-%d/10" % (first, last), r
    assert r.header("Content-Length") == str(last - first + 1), r
    assert r.body == DATA[first:last + 1], r


@pytest.mark.parametrize("rng", ["bytes=10-", "bytes=10-10", "bytes=10-20", "bytes=-0",
                                 "bytes=%s-" % BIG])
def test_a_range_starting_at_or_past_the_size_is_416(tenbytes, rng):
    osc, sid = tenbytes
    r = _get(osc, sid, rng)
    expect(r, 416)
    assert r.header("Content-Range") == "bytes */10", r


@pytest.mark.parametrize("rng", ["bytes=0-1,3-4", "bytes=5-3", "bytes=x-1", "bytes= 1-2",
                                 "bytes=1", "items=0-1"])
def test_several_ranges_or_junk_are_the_whole_file(tenbytes, rng):
    osc, sid = tenbytes
    r = _get(osc, sid, rng)
    assert r.status == 200, r
    assert r.body == DATA and r.header("Content-Range") is None, r
