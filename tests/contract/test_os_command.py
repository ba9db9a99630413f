"""OPENSANDBOX.md section 3.1: `POST /command` in the foreground, over real HTTP. Shell text
through `bash -c`; `cwd` (default the workspace, `~` is HOME; one that cannot be entered is a
400 before any stream, as OpenSandbox's execd answers); `envs` last; stdin /dev/null;
`timeout` in ms kills the whole tree; the `uid`/`gid` rule. The SSE stream: `init` (the
command id), one `stdout`/`stderr` event per line (CR, LF and CRLF end lines, an empty line is
"\\n", 64 KiB cuts, the last partial line at the exit), `ping` after 3 s of silence, then
exactly one of `execution_complete` or `error` (`CommandExecError`, the exit code as text,
128 + N for a signal). Invalid UTF-8 arrives as U+DCxx (surrogateescape). A client that
disconnects kills the command's whole tree; a foreground command is interruptible by id."""
import json
import os
import threading
import time

import pytest

import execlib
import oslib
import shlib
import sselib
from oslib import expect
from sselib import Stream, run, stdout_of

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CALL = 10.0


def cmd_path(sid, sub):
    return "/v1/sandboxes/%s/proxy/%d%s" % (oslib.q(sid), oslib.EXECD_PORT, sub)


# ---- the stream's shape ------------------------------------------------------------------------

def test_echo_streams_init_then_one_stdout_event_per_line_then_execution_complete(osc, sbx):
    st = run(osc, sbx["id"], "echo hello; echo world")
    assert st.types == ["init", "stdout", "stdout", "execution_complete"], st.types
    assert st.texts() == ["hello", "world"]
    init = st.events[0][1]
    assert len(init["text"]) >= 8 and init["text"] == st.id
    assert st.final["execution_time"] >= 0


def test_a_non_zero_exit_is_one_error_event_with_the_code_as_text(osc, sbx):
    st = run(osc, sbx["id"], "echo partial; exit 3")
    e = st.assert_error("3")
    assert e["ename"] == "CommandExecError"
    assert e["traceback"] and all(isinstance(x, str) for x in e["traceback"])
    assert st.texts() == ["partial"]
    assert st.types.count("error") == 1


def test_a_signal_is_128_plus_its_number(osc, sbx):
    st = run(osc, sbx["id"], "kill -TERM $$")
    st.assert_error(str(128 + 15))


def test_command_not_found_is_127_with_the_shells_message_on_stderr(osc, sbx):
    st = run(osc, sbx["id"], "no-such-command-here")
    st.assert_error("127")
    assert any("not found" in t for t in st.texts("stderr")), st.texts("stderr")


def test_the_shell_is_bash(osc, sbx):
    out = stdout_of(osc, sbx["id"], '[[ -n "$BASH_VERSION" ]] && echo "bash $0"')
    assert out == ["bash bash"], out


def test_stdin_is_dev_null(osc, sbx):
    out = stdout_of(osc, sbx["id"], "cat; echo rc=$?; readlink /proc/self/fd/0")
    assert out == ["rc=0", "/dev/null"], out


def test_the_stream_carries_the_sse_headers_and_the_request_id(osc, sbx):
    st = Stream(osc, sbx["id"], body={"command": "true"}, headers={"X-Request-ID": "req-42"})
    assert st.status == 200
    assert st.header_all("X-Request-ID") == ["req-42"]
    st.read_all()
    st.assert_complete()


# ---- where and with what it runs ---------------------------------------------------------------

def test_the_default_working_directory_is_the_workspace(osc, sbx):
    assert stdout_of(osc, sbx["id"], "pwd") == ["/workspace"]


def test_cwd_is_entered_and_tilde_is_home(osc, sbx):
    sid = sbx["id"]
    assert stdout_of(osc, sid, "pwd", cwd="/tmp") == ["/tmp"]
    assert stdout_of(osc, sid, 'pwd; echo "$HOME"', cwd="~") == ["/workspace", "/workspace"]
    stdout_of(osc, sid, "mkdir -p sub/deeper")
    assert stdout_of(osc, sid, "pwd", cwd="~/sub/deeper") == ["/workspace/sub/deeper"]
    assert stdout_of(osc, sid, "pwd", cwd="sub") == ["/workspace/sub"]


@pytest.mark.parametrize("cwd,why", [
    ("/no/such/dir", "does not exist"),
    ("/etc/hostname", "not a directory"),
])
def test_a_cwd_that_cannot_be_entered_is_a_400_before_any_stream(osc, sbx, cwd, why):
    st = Stream(osc, sbx["id"], body={"command": "echo never", "cwd": cwd})
    assert st.status == 400, (st.status, st.body)
    b = st.json()
    assert b["code"] == "INVALID_REQUEST_BODY"
    assert why in b["message"] and cwd in b["message"], b


def test_a_cwd_the_sandbox_cannot_enter_is_a_400_saying_so(osc, sbx):
    sid = sbx["id"]
    stdout_of(osc, sid, "mkdir -p /tmp/locked/in && chmod 000 /tmp/locked")
    for cwd in ("/tmp/locked", "/tmp/locked/in"):
        st = Stream(osc, sid, body={"command": "echo never", "cwd": cwd})
        assert st.status == 400, (st.status, st.body)
        b = st.json()
        # inside a directory it cannot search, even stat fails: "does not exist", as the
        # shell's `[ -e ]` said
        why = "cannot access" if cwd == "/tmp/locked" else "does not exist"
        assert b["code"] == "INVALID_REQUEST_BODY" and why in b["message"], b


@pytest.mark.parametrize("cwd", ["/tmp/$(touch /tmp/pwned-cwd)", "/tmp/`touch /tmp/pwned-cwd`",
                                 "/tmp'; touch /tmp/pwned-cwd; '", "-P"])
def test_a_cwd_is_a_path_never_shell_text(osc, sbx, cwd):
    st = Stream(osc, sbx["id"], body={"command": "true", "cwd": cwd})
    assert st.status == 400, (st.status, st.body)
    assert stdout_of(osc, sbx["id"], "ls /tmp/pwned-cwd 2>&1 || echo absent")[-1] == "absent"


def test_a_directory_with_odd_characters_is_entered_as_named(osc, sbx):
    sid = sbx["id"]
    name = "/tmp/it's $(not) a \\ \"dir\""
    stdout_of(osc, sid, 'mkdir -p "$D"', envs={"D": name})
    assert stdout_of(osc, sid, "pwd", cwd=name) == [name]


def test_a_cwd_through_a_symlink_is_entered_as_a_shells_cd_enters_it(osc, sbx):
    """Logically, as `cd` does: the link's name stays in pwd and PWD, `..` is taken as text,
    and the directory it left is OLDPWD."""
    sid = sbx["id"]
    stdout_of(osc, sid, "mkdir -p /tmp/real/inner && ln -sfn /tmp/real /tmp/link")
    assert stdout_of(osc, sid, 'pwd; pwd -P; printenv PWD; echo "$OLDPWD"',
                     cwd="/tmp/link") == ["/tmp/link", "/tmp/real", "/tmp/link", "/workspace"]
    assert stdout_of(osc, sid, "pwd", cwd="/tmp/link/inner/..") == ["/tmp/link"]
    assert stdout_of(osc, sid, "pwd", cwd="/tmp//link/./inner/") == ["/tmp/link/inner"]


def test_without_a_cwd_pwd_is_exported_and_oldpwd_is_the_sandboxs_own(osc):
    j = osc.create_ok(env={"OLDPWD": "/tmp"})
    try:
        assert stdout_of(osc, j["id"], 'printenv PWD; echo "$OLDPWD"') == [
            "/workspace", "/tmp"]
    finally:
        osc.kill(j["id"])


def test_an_image_without_bash_runs_the_command_with_sh(start_daemon, tmp_path):
    """OPENSANDBOX.md 3.1: `sh -c` when the image has no bash (here dash as /bin/sh, alone)."""
    import shutil
    root = tmp_path / "images" / "onlysh"
    for d in ("bin", "lib/x86_64-linux-gnu", "lib64"):
        (root / d).mkdir(parents=True)
    shutil.copy2(os.path.realpath("/bin/dash"), root / "bin" / "sh")
    for lib in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"):
        shutil.copy2(os.path.realpath(lib), str(root) + lib)
    d = start_daemon(env={"SANDBOX_HOST_IMAGES": str(tmp_path / "images")})
    osc = oslib.os_client(d)
    j = osc.create_ok(image={"uri": "registry.example/team/onlysh:1.0"})
    assert stdout_of(osc, j["id"], 'echo "$0:${BASH_VERSION:-none}"; cd /tmp && pwd') == [
        "sh:none", "/tmp"]
    assert stdout_of(osc, j["id"], "pwd", cwd="/tmp") == ["/tmp"]


def test_envs_apply_last_over_the_sandboxs_env(osc):
    j = osc.create_ok(env={"FROM_CREATE": "c", "BOTH": "create"})
    try:
        out = stdout_of(osc, j["id"], 'echo "$FROM_CREATE $BOTH $ONLY_CMD"',
                        envs={"BOTH": "command", "ONLY_CMD": "x y"})
        assert out == ["c command x y"], out
    finally:
        osc.kill(j["id"])


@pytest.mark.parametrize("body", [
    {},
    {"command": ""},
    {"command": 5},
    {"command": "true", "envs": "A=1"},
    {"command": "true", "envs": {"A": 1}},
    {"command": "true", "envs": {"A=B": "1"}},
    {"command": "true", "background": "yes"},
    {"command": "true", "timeout": -1},
    {"command": "true", "timeout": 1.5},
    {"command": "true", "cwd": 7},
    {"command": "true", "gid": 0},
])
def test_an_invalid_body_is_a_400_invalid_request_body(osc, sbx, body):
    r = osc.execd(sbx["id"], "POST", "/command", body=body, timeout=CALL)
    expect(r, 400, "INVALID_REQUEST_BODY")


def test_a_body_that_is_not_json_is_a_400(osc, sbx):
    r = osc.execd(sbx["id"], "POST", "/command", body=b"{not json", timeout=CALL,
                  headers={"Content-Type": "application/json"})
    expect(r, 400, "INVALID_REQUEST_BODY")


def test_a_command_longer_than_one_argument_can_be_is_refused(osc, sbx):
    r = osc.execd(sbx["id"], "POST", "/command", body={"command": "#" * (128 * 1024)},
                  timeout=CALL)
    expect(r, 400, "INVALID_REQUEST_BODY")


def test_uid_and_gid_are_the_sandboxs_own_or_refused(osc, sbx):
    sid = sbx["id"]
    uid, gid = (int(x) for x in stdout_of(osc, sid, "id -u; id -g"))
    assert stdout_of(osc, sid, "id -u", uid=uid, gid=gid) == [str(uid)]
    r = osc.execd(sid, "POST", "/command", body={"command": "id", "uid": 0}, timeout=CALL)
    expect(r, 400, "NOT_SUPPORTED")
    r = osc.execd(sid, "POST", "/command", body={"command": "id", "uid": uid, "gid": gid + 1},
                  timeout=CALL)
    expect(r, 400, "NOT_SUPPORTED")


# ---- lines ------------------------------------------------------------------------------------

def test_lf_cr_and_crlf_end_lines_and_an_empty_line_is_a_newline(osc, sbx):
    st = run(osc, sbx["id"], r"printf 'a\nb\rc\r\nd\n\ne'")
    st.assert_complete()
    assert st.texts() == ["a", "b", "c", "d", "\n", "e"], st.texts()


def test_the_last_unterminated_line_comes_at_the_exit(osc, sbx):
    st = run(osc, sbx["id"], "printf 'no newline'; printf 'err tail' >&2; exit 4")
    st.assert_error("4")
    assert st.texts() == ["no newline"]
    assert st.texts("stderr") == ["err tail"]
    assert st.types[-3:-1] in (["stdout", "stderr"], ["stderr", "stdout"])


@pytest.mark.timeout(180)
def test_a_1mib_line_is_cut_into_64k_events_that_join_back(osc, sbx):
    st = run(osc, sbx["id"], "head -c 1048576 /dev/zero | tr '\\0' x; echo; echo after",
             wait=120)
    st.assert_complete()
    texts = st.texts()
    assert texts[-1] == "after"
    parts = texts[:-1]
    assert [len(p) for p in parts] == [65536] * 16, [len(p) for p in parts]
    assert "".join(parts) == "x" * 1048576


def test_binary_output_arrives_byte_exact_through_surrogateescape(osc, sbx):
    # every byte value but the line terminators, on one line
    want = bytes(b for b in range(256) if b not in (10, 13))
    hexs = "".join("\\x%02x" % b for b in want)
    st = run(osc, sbx["id"], "printf '%b' '" + hexs + "'")
    st.assert_complete()
    assert b"".join(st.out_bytes()) == want


def test_invalid_utf8_never_breaks_the_stream_and_valid_utf8_is_unchanged(osc, sbx):
    st = run(osc, sbx["id"], r"printf '\xff\xfe caf\xc3\xa9 \xe2\x82\n\xc3\xa9t\xc3\xa9\n'")
    st.assert_complete()
    lines = st.out_bytes()
    assert lines == [b"\xff\xfe caf\xc3\xa9 \xe2\x82", "été".encode()], lines
    assert st.texts()[1] == "été"


def test_stdout_and_stderr_keep_their_own_order(osc, sbx):
    st = run(osc, sbx["id"], "for i in $(seq 1 200); do echo o$i; echo e$i >&2; done")
    st.assert_complete()
    assert st.texts() == ["o%d" % i for i in range(1, 201)]
    assert st.texts("stderr") == ["e%d" % i for i in range(1, 201)]


# ---- time, heartbeats, timeouts ---------------------------------------------------------------

@pytest.mark.slow
def test_ping_comes_after_3s_of_silence(osc, sbx):
    st = run(osc, sbx["id"], "echo start; sleep 7.5; echo end", wait=40)
    st.assert_complete()
    assert st.types[:2] == ["init", "stdout"]
    pings = [(t, e) for t, e in st.events if e["type"] == "ping"]
    assert 1 <= len(pings) <= 3, st.types
    assert all(e["text"] == "pong" for _, e in pings)
    # never early: at least 3 s after the event before it
    prev = [t for t, e in st.events if e["type"] == "stdout"][0]
    assert pings[0][0] - prev >= 2.8, (pings[0][0] - prev)


def test_a_timeout_kills_the_whole_tree_and_ends_with_an_error(osc, sbx):
    m = execlib.marker()
    st = run(osc, sbx["id"], "sleep %s & sleep %s; echo never" % (m, m), wait=30, timeout=700)
    e = st.assert_error("137")
    assert any("timed out" in t for t in e["traceback"]), e
    assert "never" not in st.texts()
    left = execlib.wait_gone(lambda: execlib.host_sleepers(m), timeout=10)
    execlib.kill_pids([p[0] for p in left], osc.c.daemon_pid)
    assert not left, "the timeout left processes behind: %r" % left


# ---- the client goes, interrupts ---------------------------------------------------------------

def test_a_client_that_disconnects_kills_the_whole_tree(osc, sbx):
    m = execlib.marker()
    st = Stream(osc, sbx["id"], body={"command": "sleep %s & (setsid sleep %s &); sleep %s"
                                      % (m, m, m)})
    assert st.status == 200
    assert st.next_event(timeout=CALL)["type"] == "init"
    deadline = time.monotonic() + 10
    while len(execlib.host_sleepers(m)) < 3:
        assert time.monotonic() < deadline, "the sleepers never started"
        time.sleep(0.05)
    st.abort()
    left = execlib.wait_gone(lambda: execlib.host_sleepers(m), timeout=15)
    execlib.kill_pids([p[0] for p in left], osc.c.daemon_pid)
    assert not left, "a vanished client left its command's processes: %r" % left


def test_a_foreground_command_is_interrupted_by_its_id(osc, sbx):
    sid = sbx["id"]
    m = execlib.marker()
    st = Stream(osc, sid, body={"command": "echo up; sleep %s" % m})
    assert st.status == 200
    cid = st.next_event(timeout=CALL)["text"]
    assert st.next_event(timeout=CALL)["text"] == "up"
    r = osc.execd(sid, "DELETE", "/command?id=" + oslib.q(cid), timeout=CALL)
    expect(r, 200)
    assert r.body == b""
    st.read_all(timeout=CALL)
    e = st.assert_error("137")
    assert any("interrupted" in t for t in e["traceback"]), e
    s = expect(osc.execd(sid, "GET", "/command/status/" + cid, timeout=CALL), 200)
    assert s["running"] is False and s["exit_code"] == 137, s
    assert not execlib.wait_gone(lambda: execlib.host_sleepers(m), timeout=10)


def test_a_finished_foreground_command_has_a_status(osc, sbx):
    sid = sbx["id"]
    st = run(osc, sid, "exit 5")
    s = expect(osc.execd(sid, "GET", "/command/status/" + st.id, timeout=CALL), 200)
    assert s["id"] == st.id and s["content"] == "exit 5"
    assert s["running"] is False and s["exit_code"] == 5 and s["error"], s
    started, finished = oslib.parse_time(s["started_at"]), oslib.parse_time(s["finished_at"])
    assert started <= finished
    # its output was its stream: no logs
    r = osc.execd(sid, "GET", "/command/%s/logs" % st.id, timeout=CALL)
    expect(r, 400, "INVALID_REQUEST_BODY")


# ---- load --------------------------------------------------------------------------------------

@pytest.mark.timeout(180)
def test_many_concurrent_streams_each_get_their_own_output(osc, sbx):
    sid = sbx["id"]
    n, res, errs = 24, {}, []

    def one(i):
        try:
            st = run(osc, sid, "for k in $(seq 1 300); do echo %d-$k; done" % i, wait=120)
            st.assert_complete()
            res[i] = st.texts()
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append((i, repr(e)))

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(150)
    assert not errs, errs
    for i in range(n):
        assert res[i] == ["%d-%d" % (i, k) for k in range(1, 301)], i


def test_renew_on_access_applies_to_commands(osc):
    j = osc.create_ok(extensions={"access.renew.extend.seconds": "3600"}, timeout=600)
    try:
        before = oslib.parse_time(osc.sandbox_ok(j["id"])["expiresAt"])
        stdout_of(osc, j["id"], "true")
        after = oslib.parse_time(osc.sandbox_ok(j["id"])["expiresAt"])
        assert (after - before).total_seconds() > 2000, (before, after)
    finally:
        osc.kill(j["id"])


def test_a_deleted_sandboxs_running_command_ends_its_stream(osc):
    j = osc.create_ok()
    st = Stream(osc, j["id"], body={"command": "sleep 100"})
    assert st.status == 200
    assert st.next_event(timeout=CALL)["type"] == "init"
    osc.kill(j["id"])
    st.read_all(timeout=CALL)
    assert st.final is not None and st.final["type"] == "error", st.types
    r = osc.execd(j["id"], "POST", "/command", body={"command": "true"}, timeout=CALL)
    expect(r, 404, "SANDBOX_NOT_FOUND")


def _paused(osc, sid):
    expect(osc.post("/v1/sandboxes/%s/pause" % sid, timeout=CALL), 202)
    osc.wait_state(sid, "Paused", timeout=30)


def test_a_paused_sandboxs_commands_sessions_and_metrics_are_409_then_serve_again(osc):
    j = osc.create_ok()
    sid = j["id"]
    try:
        _paused(osc, sid)
        for method, sub, body in (("POST", "/command", {"command": "true"}),
                                  ("GET", "/command/status/x", None),
                                  ("POST", "/session", {}),
                                  ("GET", "/metrics", None)):
            r = osc.execd(sid, method, sub, body=body, timeout=CALL)
            expect(r, 409, "SANDBOX_PAUSED")
        expect(osc.post("/v1/sandboxes/%s/resume" % sid, timeout=CALL), 202)
        osc.wait_state(sid, "Running", timeout=30)
        assert stdout_of(osc, sid, "echo back") == ["back"]
    finally:
        osc.kill(sid)


def test_a_command_that_cannot_start_gets_init_then_an_error_naming_why(start_daemon, tmp_path):
    # an image with no shell at all: neither bash nor sh to run the command with
    images = tmp_path / "images"
    (images / "noshell" / "etc").mkdir(parents=True)
    (images / "noshell" / "etc" / "marker").write_text("no shell here")
    d = start_daemon(env={"SANDBOX_HOST_IMAGES": str(images)})
    osc = oslib.os_client(d)
    j = osc.create_ok(image={"uri": "registry.example/team/noshell:1.0"})
    st = run(osc, j["id"], "echo never")
    assert st.types == ["init", "error"], st.types
    e = st.final["error"]
    assert not e["evalue"].isdigit() and "neither bash nor sh" in e["evalue"], e
    s = expect(osc.execd(j["id"], "GET", "/command/status/" + st.id, timeout=CALL), 200)
    assert s["running"] is False and "neither bash nor sh" in s["error"], s


def _rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_a_client_that_stops_reading_stops_the_command_not_the_daemons_memory(start_daemon):
    import socket
    d = start_daemon()
    osc = oslib.os_client(d)
    j = osc.create_ok()
    before = _rss_kib(d.proc.pid)
    m = execlib.marker()
    s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    body = json.dumps({"command": "sleep %s & yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                       % m}).encode()
    s.sendall(b"POST /v1/sandboxes/%s/proxy/44772/command HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (j["id"].encode(), len(body), body))
    assert b"200" in s.recv(1024)  # the stream has started; now read nothing more
    time.sleep(2)  # `yes` writes as fast as it can; nobody reads
    grown = _rss_kib(d.proc.pid) - before
    assert grown < 16 * 1024, "daemon RSS grew by %d KiB behind a stalled client" % grown
    s.close()
    left = execlib.wait_gone(lambda: execlib.host_sleepers(m), timeout=15)
    execlib.kill_pids([p[0] for p in left], osc.c.daemon_pid)
    assert not left, "the stalled client's command outlived it: %r" % left
    assert stdout_of(osc, j["id"], "echo alive") == ["alive"]


@pytest.mark.parametrize("method,sub", [("GET", "/command"), ("PUT", "/command"),
                                        ("POST", "/command/status/x"),
                                        ("DELETE", "/command/x/logs"), ("GET", "/session"),
                                        ("GET", "/session/x/run"), ("POST", "/session/x"),
                                        ("POST", "/metrics"), ("DELETE", "/metrics/watch")])
def test_a_served_route_asked_with_another_method_is_405(osc, sbx, method, sub):
    r = osc.execd(sbx["id"], method, sub, timeout=CALL)
    expect(r, 405, "METHOD_NOT_ALLOWED")
