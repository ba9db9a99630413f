"""Long answers of the /v1 file API (issue 20, finding 11), attacked: a file answer whose file
shrinks is closed at once, on both surfaces, and a download that is stuck holds a shutdown no
longer than its grace. Every wait is a call timeout; nothing here measures a time."""
import http.client
import os
import socket

import pytest

import oslib
import shlib
from sselib import stdout_of

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CALL = 10.0
GRACE = 10.0  # docs/configuration.md: in-flight requests get 10 s after SIGTERM
MiB = 1 << 20


def execd(sid, sub):
    return "/v1/sandboxes/%s/proxy/%d%s" % (sid, oslib.EXECD_PORT, sub)


def open_get(port, url, rcvbuf=64 << 10, timeout=CALL, headers=None):
    """A GET whose body the test reads itself, slowly if it likes: (connection, response)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.connect()
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    c.request("GET", url, headers=headers or {})
    return c, c.getresponse()


@pytest.fixture(scope="module")
def d():
    daemon = shlib.Daemon()
    yield daemon
    daemon.close()


@pytest.fixture(scope="module")
def osc(d):
    return oslib.os_client(d)


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
