"""What a sandbox's execd commands can make the daemon hold (issue 20, findings 4, 7 and 10;
docs/opensandbox.md "Limits", docs/deployment.md "Memory of one sandbox"):

- a background log is read from its file in bounded steps: a client that asks a full log from
  cursor 0 and reads it slowly holds a bounded buffer of the daemon's, and /healthz answers
  meanwhile; the body ends at the offset the header named, however the log grows;
- running background commands are bounded per sandbox (SANDBOX_HOST_BACKGROUND_MAX: then
  `503 UNAVAILABLE`), and each holds one daemon fd at most (the start-time check of the fd
  limit counts that bound: test_density.py);
- the text of the commands a sandbox remembers is bounded in total, not only by count, and a
  finished command keeps none of its output buffers;
- background logs and the entrypoint's output live in files of the sandbox's own (outside its
  view, inside its disk limit), not in the daemon's memory.

The settings are given as variables, which a daemon that does not know them ignores: against
such a daemon the attacks here succeed, and their tests fail."""
import json
import os
import socket
import subprocess
import time

import pytest

import disklib
import execlib
import oslib
import shlib
from oslib import expect
from sselib import Stream, run

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CALL = 10.0
MIB = 1 << 20


def sanitized():
    """ASan keeps freed memory in quarantine (and is slower): RSS says nothing of our bounds
    there, and probes get the default call timeout."""
    out = subprocess.run(["ldd", os.environ.get("SH_BIN", "")], capture_output=True,
                         text=True).stdout
    return "libasan" in out


PROBE = shlib.PROBE_TIMEOUT if sanitized() else 0.25
no_rss_under_asan = pytest.mark.skipif(sanitized(), reason="RSS is not our memory under ASan")


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/status" % (key, pid))


def reset_peak(pid):
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def start_bg(osc, sid, command):
    st = Stream(osc, sid, body={"command": command, "background": True})
    assert st.status == 200, (st.status, st.body)
    st.read_all(timeout=CALL)
    assert st.types == ["init", "execution_complete"], st.types
    return st.id


def wait_done(osc, sid, cid, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        s = expect(osc.execd(sid, "GET", "/command/status/" + oslib.q(cid), timeout=CALL), 200)
        if not s["running"]:
            return s
        assert time.monotonic() < deadline, "still running: %r" % (s,)
        time.sleep(0.05)


def logs(osc, sid, cid, cursor=0):
    r = osc.execd(sid, "GET", "/command/%s/logs?cursor=%d" % (oslib.q(cid), cursor),
                  timeout=60)
    assert r.status == 200, r
    return r.body, int(r.header("EXECD-COMMANDS-TAIL-CURSOR"))


def pattern(n):
    """The first n bytes `yes 0123456789abcdef` writes."""
    line = b"0123456789abcdef\n"
    return (line * (n // len(line) + 1))[:n]


class RawGet:
    """A GET on a socket of its own with a bounded receive buffer (set before the connect, and
    above loopback's 64 KiB segment, so the window never gets stuck below one segment): the
    client reads when told."""

    def __init__(self, port, path):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
        self.s.settimeout(60)
        self.s.connect(("127.0.0.1", port))
        self.s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
        self.buf = bytearray()
        self.off = 0

    def _more(self):
        got = self.s.recv(1 << 20)
        assert got, "the connection was cut"
        if self.off > (1 << 20):
            del self.buf[:self.off]
            self.off = 0
        self.buf += got

    def _take(self, n):
        while len(self.buf) - self.off < n:
            self._more()
        out = bytes(self.buf[self.off:self.off + n])
        self.off += n
        return out

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.off)
            if i >= 0:
                line = bytes(self.buf[self.off:i])
                self.off = i + 2
                return line
            self._more()

    def head(self):
        status = self._line().decode("latin-1")
        hdrs = {}
        while True:
            ln = self._line().decode("latin-1")
            if not ln:
                return int(status.split()[1]), hdrs
            k, v = ln.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()

    def body(self, hdrs):
        """The whole body, chunked or sized (a cut connection fails the read)."""
        if "content-length" in hdrs:
            return self._take(int(hdrs["content-length"]))
        assert hdrs.get("transfer-encoding") == "chunked", hdrs
        out = []
        while True:
            n = int(self._line().split(b";")[0], 16)
            if n == 0:
                while self._line():  # trailers, then the empty line
                    pass
                return b"".join(out)
            out.append(self._take(n))
            assert self._take(2) == b"\r\n"

    def close(self):
        self.s.close()


# ---- finding 4: a log is read from its file in bounded steps --------------------------------

@pytest.mark.timeout(240)
def test_a_full_log_read_slowly_from_cursor_0_holds_little_memory_and_healthz_answers(
        start_daemon):
    size = 32 * MIB
    d = start_daemon(env={"SANDBOX_HOST_COMMAND_LOG_MAX": "32M"})
    osc = oslib.os_client(d)
    sid = osc.create_ok()["id"]
    cid = start_bg(osc, sid, "yes 0123456789abcdef | head -c %d" % size)
    wait_done(osc, sid, cid, timeout=120)
    want = pattern(size)
    path = "/v1/sandboxes/%s/proxy/44772/command/%s/logs?cursor=0" % (sid, cid)
    pid = d.proc.pid
    readers = []
    with shlib.ProbeWatch(d.client, timeout=PROBE) as w:
        reset_peak(pid)
        before = status_kib(pid, "VmRSS")
        # sixteen clients ask the whole log at once and read nothing yet
        readers = [RawGet(d.port, path) for _ in range(16)]
        heads = [g.head() for g in readers]
        time.sleep(2)
        grown = status_kib(pid, "VmHWM") - before
        bodies = [g.body(h[1]) for g, h in zip(readers, heads)]
    for g in readers:
        g.close()
    w.assert_answered(min_probes=10)
    for code, hdrs in heads:
        assert code == 200 and hdrs["execd-commands-tail-cursor"] == str(size), hdrs
    for b in bodies:
        assert len(b) == size and b == want, "a body of %d bytes is not the log" % len(b)
    if not sanitized():
        assert grown < 24 * 1024, \
            "16 slow readers of a 32 MiB log grew the daemon's peak RSS by %d KiB" % grown


def test_the_body_stops_at_the_offset_the_header_named_while_the_log_grows(osc, sbx):
    sid = sbx["id"]
    line = b"grow-grow-grow\n"
    cid = start_bg(osc, sid, "while :; do echo grow-grow-grow; done")
    time.sleep(0.5)
    for _ in range(5):
        g = RawGet(osc.port, "/v1/sandboxes/%s/proxy/44772/command/%s/logs?cursor=0"
                   % (sid, cid))
        code, hdrs = g.head()
        time.sleep(0.2)  # the log grows meanwhile
        body = g.body(hdrs)
        g.close()
        assert code == 200
        tail = int(hdrs["execd-commands-tail-cursor"])
        # the bytes at offsets [tail - len(body), tail) of the command's output
        start = tail - len(body)
        want = (line * (len(body) // len(line) + 2))[start % len(line):][:len(body)]
        assert body and body == want, (tail, len(body), body[-40:])
    expect(osc.execd(sid, "DELETE", "/command?id=" + oslib.q(cid), timeout=CALL), 200)
    wait_done(osc, sid, cid)


# ---- finding 7: running background commands are bounded, one daemon fd each ----------------

@pytest.mark.timeout(180)
def test_background_commands_stop_at_the_bound_and_hold_one_daemon_fd_each(start_daemon):
    bound = 8
    d = start_daemon(env={"SANDBOX_HOST_BACKGROUND_MAX": str(bound)})
    osc = oslib.os_client(d)
    sid = osc.create_ok()["id"]
    pid = d.proc.pid
    # settle what the first command makes (the spare exec cgroup, the log directory)
    wait_done(osc, sid, start_bg(osc, sid, "true"))
    base = fd_count(pid)
    base_fds = shlib.fd_links(pid)
    m = execlib.marker()
    ids = [start_bg(osc, sid, "sleep %s" % m) for _ in range(bound)]
    assert shlib.wait_until(lambda: len(execlib.host_sleepers(m)) == bound, timeout=20), \
        "the background commands do not run"
    # (a request's own fds, its socket or a workspace kept a second, may linger a moment)
    held = shlib.wait_until(lambda: fd_count(pid) - base <= bound, timeout=5)
    assert held, "%d running background commands hold %d daemon fds: %r" % (
        bound, fd_count(pid) - base,
        sorted(set(shlib.fd_links(pid).items()) - set(base_fds.items())))
    # past the bound: refused, nothing started
    r = osc.execd(sid, "POST", "/command", body={"command": "sleep %s" % m, "background": True},
                  timeout=CALL)
    b = expect(r, 503, "UNAVAILABLE")
    assert "SANDBOX_HOST_BACKGROUND_MAX" in b["message"], b
    assert r.header("Retry-After"), r.headers
    assert len(execlib.host_sleepers(m)) == bound
    # foreground commands still run
    st = run(osc, sid, "echo still-here")
    st.assert_complete()
    # one ended makes room for one more
    expect(osc.execd(sid, "DELETE", "/command?id=" + oslib.q(ids[0]), timeout=CALL), 200)
    wait_done(osc, sid, ids[0])
    ids[0] = start_bg(osc, sid, "sleep %s" % m)
    for cid in ids:
        expect(osc.execd(sid, "DELETE", "/command?id=" + oslib.q(cid), timeout=CALL), 200)
    for cid in ids:
        wait_done(osc, sid, cid)
    assert shlib.wait_until(lambda: fd_count(pid) <= base, timeout=10), \
        "%d fds above the base once they ended" % (fd_count(pid) - base)
    left = execlib.wait_gone(lambda: execlib.host_sleepers(m), timeout=10)
    execlib.kill_pids([p[0] for p in left], pid)
    assert not left


# ---- finding 10: what one sandbox's commands make the daemon hold ---------------------------

# The longest text a command can run with: the kernel's bound on one argument (131,072 bytes)
# less the wrapper and the environment, which travel with it.
TEXT_MAX = 128 * 1024 - 2048


@no_rss_under_asan
@pytest.mark.timeout(600)
def test_maximal_command_texts_times_1024_stay_within_the_budget(start_daemon):
    d = start_daemon()
    osc = oslib.os_client(d)
    sid = osc.create_ok()["id"]
    pid = d.proc.pid
    # warm up: the allocator's arenas, a first command's state
    for k in range(8):
        run(osc, sid, "true").assert_complete()
    before = status_kib(pid, "VmRSS")
    errs, ids = [], []

    def worker(k0, n):
        try:
            for k in range(k0, k0 + n):
                # a maximal text, and a last line without its newline on both streams (the
                # SSE line splitter keeps 64 KiB buffers for them while the command runs)
                head = "printf '%%60000s' x; printf '%%60000s' y >&2 #%06d" % k
                st = run(osc, sid, head + "#" * (TEXT_MAX - len(head)), wait=120)
                st.assert_complete()
                ids.append((k, st.id))
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(repr(e))

    # one at a time: two such requests at once may not both fit the worker's socket buffer
    # (the second is refused, "sending the exec request to the worker")
    worker(0, 1100)
    assert not errs, errs[:3]
    grown = status_kib(pid, "VmRSS") - before
    # docs/deployment.md: remembered commands hold at most 4 MiB of text and 1024 records
    assert grown < 16 * 1024, "1100 maximal commands grew the daemon's RSS by %d KiB" % grown
    ids.sort()
    newest = expect(osc.execd(sid, "GET", "/command/status/" + ids[-1][1], timeout=CALL), 200)
    assert len(newest["content"]) == TEXT_MAX
    # the oldest went first
    assert osc.execd(sid, "GET", "/command/status/" + ids[0][1], timeout=CALL).status == 404


@no_rss_under_asan
@pytest.mark.timeout(300)
def test_full_background_logs_and_the_entrypoints_output_cost_the_daemon_no_memory(
        start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_COMMAND_LOG_MAX": "8M"})
    osc = oslib.os_client(d)
    pid = d.proc.pid
    sids = []
    before = status_kib(pid, "VmRSS")
    try:
        for _ in range(4):
            sids.append(osc.create_ok(entrypoint=[
                "sh", "-c", "yes entrypoint-output | head -c 2097144; exec sleep 100000"])["id"])
            run(osc, sids[-1], "true").assert_complete()
        ids = [(sid, start_bg(osc, sid, "yes 0123456789abcdef | head -c %d" % (8 * MIB)))
               for sid in sids for _ in range(4)]
        for sid, cid in ids:
            wait_done(osc, sid, cid, timeout=120)
        for sid, cid in ids:
            assert logs(osc, sid, cid, 8 * MIB - 17)[0] == pattern(8 * MIB)[-17:]
        for sid in sids:
            r = osc.get("/v1/sandboxes/%s/diagnostics/logs?scope=container" % sid, timeout=CALL)
            c = expect(r, 200)["content"]
            assert c.endswith("entrypoint-output\n") and len(c) > 512 * 1024, len(c)
        grown = status_kib(pid, "VmRSS") - before
        # 16 full logs of 8 MiB and 4 entrypoints' 1 MiB: in files, not in the daemon (the
        # four sandboxes' own records and their first commands cost far less than this)
        assert grown < 16 * 1024, "full logs grew the daemon's RSS by %d KiB" % grown
    finally:
        for sid in sids:
            osc.kill(sid)


def stalled_streams_growth(start_daemon, command, envs=None, n=4):
    """The daemon's RSS growth (KiB) while n streams of `command` (which starts `sleep MARKER`
    first, %s in it) run with nobody reading them: 2 s, then the streams are cut and every
    process they started is checked gone."""
    d = start_daemon()
    osc = oslib.os_client(d)
    sid = osc.create_ok()["id"]
    pid = d.proc.pid
    run(osc, sid, "true").assert_complete()
    before = status_kib(pid, "VmRSS")
    m = execlib.marker()
    socks = []
    try:
        body = json.dumps({"command": command % m, "envs": envs or {}}).encode()
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            s.sendall(b"POST /v1/sandboxes/%s/proxy/44772/command HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (sid.encode(), len(body), body))
            assert b"200" in s.recv(1024)
            socks.append(s)
        time.sleep(2)  # each writes as fast as it can; nobody reads
        grown = status_kib(pid, "VmRSS") - before
    finally:
        for s in socks:
            s.close()
    left = execlib.wait_gone(lambda: execlib.host_sleepers(m), timeout=15)
    execlib.kill_pids([p[0] for p in left], pid)
    assert not left
    return grown


@no_rss_under_asan
def test_streams_of_empty_lines_nobody_reads_hold_a_bounded_queue_each(start_daemon):
    # One empty line is one event (~60 bytes): the bytes one read of the pipe gives may become
    # many times their size in queued events before the backpressure can see them.
    grown = stalled_streams_growth(start_daemon, "sleep %s & yes ''")
    assert grown < 16 * 1024, "4 stalled streams of empty lines grew the RSS by %d KiB" % grown


@no_rss_under_asan
def test_streams_that_alternate_text_and_empty_lines_nobody_reads_hold_a_bounded_queue(
        start_daemon):
    # Reads grow to 64 KiB while the output's events are few bytes more than it (text), and
    # fall back to 16 KiB after a read of empty lines (execd.h): output that alternates the two
    # gets a 64 KiB read of empty lines after each read of text, ~4 MiB of events at most,
    # before the backpressure pauses it.
    script = ("import sys\nt = ('x' * 63 + '\\n') * 1024\ne = '\\n' * 65536\n"
              "while True:\n    sys.stdout.write(t + e)\n    sys.stdout.flush()\n")
    grown = stalled_streams_growth(start_daemon, "sleep %s & python3 -c \"$S\"", {"S": script})
    # 4 x (the 1 MiB high mark + one read of 64 KiB of empty lines, ~4 MiB) and the buffers
    assert grown < 32 * 1024, "4 stalled streams grew the RSS by %d KiB" % grown


def test_a_create_env_larger_than_any_command_can_carry_is_refused(osc, daemon):
    # the sandbox keeps its env and every command carries it (128 KiB of argv and env at most)
    many = {"V%05d" % i: "" for i in range(1025)}
    big = {"BIG": "x" * (64 * 1024)}
    for env in (many, big):
        b = oslib.expect_400(osc.create(dict(oslib.SDK_DEFAULT_CREATE, env=env)))
        assert "env" in b["message"], b
        shlib.assert_error(daemon.client.post("/sandboxes", {"env": env}), 400,
                           "BadRequest")
    # the largest that fits still runs commands
    fits = {"V%04d" % i: "y" * 40 for i in range(1024)}
    sid = osc.create_ok(env=fits)["id"]
    try:
        st = run(osc, sid, "echo $V1023")
        st.assert_complete()
        assert st.texts("stdout") == ["y" * 40]
    finally:
        osc.kill(sid)


# ---- finding 10: the logs are inside the sandbox's disk limit, outside its view -------------

DISK_UID_BASE = {"loop": 384000, "tmpfs": 385000}
LOG_MARK = "log-mark-%s" % os.urandom(6).hex()


@pytest.fixture(scope="module", params=["loop", "tmpfs"])
def limited(request):
    """(volume, daemon, client): a daemon whose sandboxes have 16 MiB of disk, on a tmpfs of
    the test's own, with logs far larger than that limit."""
    vol = disklib.Volume("256M")
    d, rc = None, 0
    try:
        d = shlib.Daemon(env={"SANDBOX_HOST_DISK_MAX": "16M",
                              "SANDBOX_HOST_DISK_QUOTA": request.param,
                              "SANDBOX_HOST_COMMAND_LOG_MAX": "64M",
                              "SANDBOX_HOST_UID_BASE": str(DISK_UID_BASE[request.param])},
                         root=vol.root)
        yield vol, d, oslib.os_client(d)
    finally:
        if d is not None:
            rc = d.close()
        vol.close()
    assert rc == 0, "daemon exited %r; stderr tail:\n%s" % (rc, d.stderr_text()[-3000:])


@pytest.mark.timeout(240)
def test_a_background_log_is_bounded_by_the_sandboxs_disk_limit_and_hidden_from_it(limited):
    vol, d, osc = limited
    sid = osc.create_ok()["id"]
    try:
        used0 = vol.used()
        cid = start_bg(osc, sid, "echo %s; yes 0123456789abcdef | head -c 41943040" % LOG_MARK)
        wait_done(osc, sid, cid, timeout=120)
        body, tail = logs(osc, sid, cid)
        # the log is charged to the sandbox's 16 MiB: it holds less than that ...
        assert tail <= 16 * MIB and len(body) == tail, tail
        assert body.startswith(LOG_MARK.encode() + b"\n")
        assert body[len(LOG_MARK) + 1:] == pattern(tail - len(LOG_MARK) - 1)
        # ... the sandbox's own writes find its disk full ...
        st = run(osc, sid, "head -c 4194304 /dev/zero > /workspace/more; echo rc=$?")
        assert "rc=0" not in "".join(st.texts("stdout")), st.texts("stdout")
        # ... and the host's volume is not taken beyond the limit
        assert vol.used() - used0 <= 16 * MIB + 2 * MIB, vol.used() - used0
        # from inside, no file holds the log, and what the sandbox can remove leaves it
        st = run(osc, sid, "grep -rlF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev %s / 2>/dev/null;"
                           " rm -rf /workspace/* /workspace/.[!.]* 2>/dev/null; echo done"
                 % LOG_MARK, wait=120)
        st.assert_complete()
        assert st.texts("stdout") == ["done"], st.texts("stdout")
        again, tail2 = logs(osc, sid, cid)
        assert (again, tail2) == (body, tail)
    finally:
        osc.kill(sid)
