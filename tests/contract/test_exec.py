"""Section 4 (Exec: NDJSON streaming), every rule, over real HTTP.

The stream is read with http.client frame by frame as it arrives (execlib.ExecStream), each
frame timestamped on arrival and checked for shape. Timing assertions are orderings, call
timeouts (a stream or call that does not end in time fails) and lower bounds, never
latencies.

Needs root: the daemon builds namespaces, cgroups and a pivot_root for every sandbox.
Run: SH_BIN=build/sandbox-host python3 -m pytest -q tests/contract/test_exec.py
"""
import os
import threading
import time

import pytest

import execlib
import shlib
from execlib import ExecStream, ok, run, sh
from shlib import assert_error

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="exec needs a root daemon (namespaces, cgroups, pivot_root); CI runs as root")

GRACE_MS = 500
OUTPUT_MAX = 4096


@pytest.fixture(scope="module")
def tight():
    """A daemon with small limits: 64M memory, 64 pids, 4 KiB exit-frame buffers, 500 ms
    grace."""
    with shlib.running(args=["--memory-max=64M", "--pids-max=64",
                             "--exec-output-max=%d" % OUTPUT_MAX,
                             "--exec-grace-ms=%d" % GRACE_MS]) as d:
        yield d


@pytest.fixture
def tsb(tight):
    s = tight.client.new_sandbox()
    yield s
    try:
        s.delete()
    except Exception:
        pass


def env_of(st):
    """Parse `env` output of an exec into a dict."""
    res = {}
    for ln in st.out.decode().splitlines():
        k, sep, v = ln.partition("=")
        if sep:
            res[k] = v
    return res


# -- frames --------------------------------------------------------------------------------

def test_stream_is_ndjson_o_frames_then_one_exit_frame(sb):
    st = ok(sb, ["sh", "-c", "printf hello; printf world >&2"])
    ct = st.header("Content-Type") or ""
    assert ct.split(";")[0].strip().lower() == "application/x-ndjson", st.headers
    frames = [f for _, f in st.frames]
    assert frames[-1] is st.final and set(frames[-1]) >= {"exit", "out", "err"}
    for f in frames[:-1]:
        assert set(f) == {"o"}, frames
    assert st.exit == 0
    assert st.out == b"hello" and st.err == b"world"
    assert not st.cut
    # the live chunks carry both streams; across two pipes the order of the two writes is
    # not fixed when they are read in one wake-up, so only the content is checked here
    assert sorted([st.o[:5], st.o[5:]]) == [b"hello", b"world"], st.o
    assert "signal" not in st.final and "oom" not in st.final
    assert st.final.get("truncated") is not True


def test_stdout_and_stderr_separate_in_exit_frame_interleaved_in_o_frames(sb):
    st = ok(sb, ["sh", "-c", "echo out1; sleep 0.3; echo err1 >&2; sleep 0.3; echo out2; "
                             "sleep 0.3; echo err2 >&2"])
    assert st.out == b"out1\nout2\n"
    assert st.err == b"err1\nerr2\n"
    assert st.o == b"out1\nerr1\nout2\nerr2\n"


def test_output_streams_live_before_the_command_ends(sb):
    # The command cannot end before the test lets it (it waits for the file "go"): a daemon
    # that held the output back until the exit never delivers "first", and the wait fails.
    st = ExecStream(sb.c, sb.rid, ["sh", "-c", "echo first; i=0; while [ ! -e go ] && "
                                               "[ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); "
                                               "done; echo second"])
    try:
        assert st.status == 200, st.body
        st.wait_output(b"first", timeout=10)
        assert b"second" not in st.o and st.final is None
    finally:
        (sb.ws / "go").write_bytes(b"")
    st.read_all(timeout=20)
    st.assert_exit(0)
    assert st.o == b"first\nsecond\n"


@pytest.mark.slow
def test_heartbeat_at_least_every_5s_while_silent(sb):
    # The stream's socket read timeout is the heartbeat's bound (plus a margin): a gap
    # between frames longer than that makes a read raise, which fails the test.
    st = run(sb, ["sleep", "7"], timeout=30,
             read_timeout=execlib.HEARTBEAT_MAX + 0.6).assert_exit(0)
    beats = [f for _, f in st.frames if f == {"o": ""}]
    assert beats, "no {'o': ''} heartbeat during a silent 7 s command: %r" % st.frames
    assert st.out == b"" and st.err == b""


# -- how the command runs --------------------------------------------------------------------

def test_argv_runs_without_a_shell(sb):
    assert ok(sb, ["echo", "$HOME;", "a b"]).out == b"$HOME; a b\n"
    st = ok(sb, ["printf", "%s|", "a b", "*", "$(id)", "`id`", "x;y", "'q'", ">f"])
    assert st.out == b"a b|*|$(id)|`id`|x;y|'q'|>f|"
    assert not sb.exists_v("f")


def test_cwd_is_workspace(sb):
    assert ok(sb, ["pwd"]).out == b"/workspace\n"
    sb.put_ok("sub/hello.txt", b"via http")
    assert ok(sb, ["cat", "sub/hello.txt"]).out == b"via http"
    ok(sb, ["sh", "-c", "echo made > made.txt"])
    assert sb.get_v("made.txt") == b"made\n"


def test_stdin_is_dev_null(sb):
    st = ok(sb, ["cat"], timeout=10)  # a cat waiting on a stdin that never ends fails here
    assert st.out == b"" and st.err == b""
    assert ok(sb, ["readlink", "/proc/self/fd/0"]).out == b"/dev/null\n"


# -- environment -----------------------------------------------------------------------------

def test_base_environment_path_home_lang(sb):
    env = env_of(ok(sb, ["env"]))
    assert env.get("HOME") == "/workspace", env
    path = env.get("PATH", "").split(":")
    assert "/usr/bin" in path and "/bin" in path, env
    assert env.get("LANG"), env


def test_env_layers_base_then_create_then_exec_last_wins(daemon):
    s = daemon.client.new_sandbox({"env": {"A": "create", "B": "create", "HOME": "/ch"}})
    try:
        env = env_of(ok(s, ["env"], env={"B": "exec", "C": "exec"}))
        assert env["A"] == "create" and env["B"] == "exec" and env["C"] == "exec", env
        assert env["HOME"] == "/ch", env
        env = env_of(ok(s, ["/usr/bin/env"], env={"HOME": "/eh", "PATH": "/custom:/usr/bin",
                                                  "LANG": "xx"}))
        assert env["HOME"] == "/eh" and env["PATH"] == "/custom:/usr/bin" and env["LANG"] == "xx"
        # values are passed as bytes-exact strings: spaces, '=', unicode, empty
        env = env_of(ok(s, ["env"], env={"SP": "a b=c", "U": "\u00e9\u4e2d", "E": ""}))
        assert env["SP"] == "a b=c" and env["U"] == "\u00e9\u4e2d" and env["E"] == "", env
    finally:
        s.delete()


def test_exec_env_does_not_persist_to_the_next_exec(daemon):
    s = daemon.client.new_sandbox({"env": {"KEEP": "1"}})
    value = "once-" + os.urandom(8).hex()
    try:
        env = env_of(ok(s, ["env"], env={"ONCE": value, "KEEP": "2"}))
        assert env["ONCE"] == value and env["KEEP"] == "2"
        env = env_of(ok(s, ["env"]))
        assert "ONCE" not in env, env
        assert env["KEEP"] == "1", env
        # nothing of it was written to disk: not in the sandbox, not in the daemon's state
        assert ok(s, ["sh", "-c", "grep -rl %s /workspace /tmp; true" % value]).out == b""
        for dirpath, _, files in os.walk(daemon.root):
            for n in files:
                p = os.path.join(dirpath, n)
                if os.path.isfile(p) and not os.path.islink(p):
                    with open(p, "rb") as f:
                        assert value.encode() not in f.read(), "exec env written to " + p
    finally:
        s.delete()


def test_empty_and_null_env_same_as_absent(sb):
    base = env_of(ok(sb, ["env"]))
    assert env_of(ok(sb, ["env"], env={})) == base
    st = ExecStream(sb.c, sb.rid, body={"cmd": ["env"], "env": None}).read_all()
    assert env_of(st.assert_exit(0)) == base


# -- exit codes -------------------------------------------------------------------------------

def test_exit_code_is_propagated(sb):
    for script, code in (("exit 3", 3), ("exit 255", 255), ("true", 0), ("false", 1)):
        st = ok(sb, ["sh", "-c", script], code=code)
        assert "signal" not in st.final and "oom" not in st.final, st.final


def test_missing_command_127_with_one_line_on_err(sb):
    for cmd in (["no-such-command-xyz"], ["/no/such/path"], ["./absent-here"]):
        st = ok(sb, cmd, code=127)
        assert st.out == b"", st.describe()
        lines = st.err.rstrip(b"\n").split(b"\n")
        assert len(lines) == 1 and lines[0].strip(), st.describe()


def test_not_executable_126_with_one_line_on_err(sb):
    sb.put_ok("script.sh", b"#!/bin/sh\necho ran\n")   # uploads are mode 0644
    for cmd in (["./script.sh"], ["/workspace/script.sh"], ["/tmp"]):
        st = ok(sb, cmd, code=126)
        assert st.out == b"", st.describe()
        lines = st.err.rstrip(b"\n").split(b"\n")
        assert len(lines) == 1 and lines[0].strip(), st.describe()


@pytest.mark.parametrize("sig", [9, 15])
def test_killed_by_signal_exits_128_plus_n_with_signal_field(sb, sig):
    st = ok(sb, ["sh", "-c", "echo before; kill -%d $$; echo after" % sig], code=128 + sig)
    assert st.final.get("signal") == sig, st.final
    assert st.out == b"before\n"
    assert st.final.get("oom") is not True


def test_oom_kill_sets_oom_flag(tsb):
    st = run(tsb, ["python3", "-c", "x = b'a' * (200 << 20); print('survived')"], timeout=60)
    st.assert_exit(137)
    assert st.final.get("oom") is True, st.describe()
    assert st.final.get("signal") == 9, st.describe()
    assert b"survived" not in st.out


def test_oom_flag_also_when_another_process_of_the_exec_was_killed(tsb):
    st = run(tsb, ["sh", "-c", "python3 -c \"x = b'a' * (200 << 20)\" | cat; echo after"],
             timeout=60)
    st.assert_exit(0)
    assert st.out == b"after\n", st.describe()
    assert st.final.get("oom") is True, st.describe()
    # the next exec in the same sandbox starts clean: no stale oom flag
    st = ok(tsb, ["true"])
    assert st.final.get("oom") is not True, st.final


# -- output limit ------------------------------------------------------------------------------

@pytest.mark.parametrize("stream", ["out", "err"])
def test_exit_frame_capped_at_exec_output_max_with_truncated(tsb, stream):
    full = "".join("%d\n" % i for i in range(1, 3001)).encode()
    assert len(full) > OUTPUT_MAX
    redir = "" if stream == "out" else " >&2"
    st = ok(tsb, ["sh", "-c", "seq 1 3000" + redir])
    other = "err" if stream == "out" else "out"
    assert getattr(st, stream) == full[:OUTPUT_MAX], st.describe()
    assert getattr(st, other) == b""
    assert st.final.get("truncated") is True, st.final.keys()
    assert st.o == full, "o frames must still carry everything (%d of %d bytes)" % (
        len(st.o), len(full))


def test_output_at_exactly_the_limit_is_not_truncated(tsb):
    st = ok(tsb, ["head", "-c", str(OUTPUT_MAX), "/dev/zero"])
    assert st.out == b"\0" * OUTPUT_MAX
    assert st.final.get("truncated") is not True, st.final.keys()


# -- the end of an exec ------------------------------------------------------------------------

def test_descendants_holding_pipes_get_the_grace_then_keep_running(tsb):
    m = execlib.marker()
    st = ExecStream(tsb.c, tsb.rid, ["sh", "-c", "sleep %s & echo hi" % m])
    assert st.status == 200, st.body
    # the exit frame comes once the grace is over, not when the sleep (1000 s) ends: a
    # stream still open past the grace and a margin fails this call
    st.read_all(timeout=GRACE_MS / 1000 + 2.5)
    st.assert_exit(0)
    assert st.out == b"hi\n"
    # the background sleep is still running in the sandbox
    ps = sh(tsb, "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline; echo; done")
    assert ("sleep " + m) in ps, ps


def test_output_written_within_the_grace_is_kept(tsb):
    st = ok(tsb, ["sh", "-c", "(sleep 0.2; echo late) & echo early"], timeout=30)
    assert st.out == b"early\nlate\n", st.describe()


def _cpu_ticks(pid):
    """utime + stime of one process (not its children), in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


def _fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def test_background_writers_after_the_exit_frame_cost_the_daemon_nothing(tight, tsb):
    # Issue 10 item 10: after the grace the exit frame is sent and the descendants keep
    # running; the daemon must not keep reading (and dropping) what they write. Four `yes`
    # writers used to hold the daemon at ~80% of a core for as long as they lived.
    pid = tight.proc.pid
    ok(tsb, ["true"])  # whatever a sandbox's first exec opens for good is in the baseline
    fds_before = _fd_count(pid)
    st = ok(tsb, ["sh", "-c", "yes & yes >&2 & yes & yes >&2 & exit 0"], timeout=30)
    assert st.final.get("truncated") is True  # the writers did write during the grace
    assert shlib.wait_until(lambda: _fd_count(pid) <= fds_before, timeout=5), \
        "the daemon still holds %d more fds (the writers' pipes): %r" % (
            _fd_count(pid) - fds_before, sorted(os.listdir("/proc/%d/fd" % pid)))
    interval = 2.0
    t0 = _cpu_ticks(pid)
    time.sleep(interval)
    used = (_cpu_ticks(pid) - t0) / os.sysconf("SC_CLK_TCK")
    assert used < 0.1 * interval, \
        "the daemon used %.2f s of CPU in %.1f s after the exit frame" % (used, interval)
    # the sandbox is still usable
    ok(tsb, ["true"])


def _spawn_daemons_script(m):
    # $$ (the command), a background child, a setsid'd session leader with its own child,
    # and a double-forked setsid daemon reparented to the sandbox's init; every pid goes to
    # /workspace/pids, then the command loops printing ticks
    return ("echo $$ >> pids; "
            "sleep %(m)s & echo $! >> pids; "
            "setsid sh -c 'sleep %(m)s & echo $! >> pids; exec sleep %(m)s' "
            "</dev/null >/dev/null 2>&1 & echo $! >> pids; "
            "sh -c '(setsid sleep %(m)s </dev/null >/dev/null 2>&1 & echo $! >> pids)'; "
            "echo ready; while :; do echo tick; sleep 0.3; done" % {"m": m})


def _wait_pids(s, n):
    deadline = time.monotonic() + 10
    while True:
        r = s.get("pids")
        pids = r.body.split() if r.status == 200 else []
        if len(pids) >= n or time.monotonic() > deadline:
            return [int(p) for p in pids]
        time.sleep(0.1)


def _alive_inside(s, pids):
    out = sh(s, " ".join("test -e /proc/%d && echo %d;" % (p, p) for p in pids) + " true")
    return [int(x) for x in out.split()]


def test_client_disconnect_kills_the_command_and_everything_it_started(sb):
    m = execlib.marker()
    st = ExecStream(sb.c, sb.rid, ["sh", "-c", _spawn_daemons_script(m)])
    try:
        assert st.status == 200, st.body
        st.wait_output(b"ready", timeout=15)
        pids = _wait_pids(sb, 5)
        assert len(pids) == 5, pids
        assert sorted(_alive_inside(sb, pids)) == sorted(pids)
        assert shlib.wait_until(lambda: len(execlib.host_sleepers(m)) == 4, timeout=5), \
            execlib.host_sleepers(m)
    finally:
        st.abort()
    left = execlib.wait_gone(lambda: execlib.host_sleepers(m),
                             timeout=12)
    try:
        assert not left, "still running after the client went away: %r" % left
        assert _alive_inside(sb, pids) == []
    finally:
        execlib.kill_pids([p[0] for p in left], sb.c.daemon_pid)


@pytest.mark.slow
def test_client_disconnect_during_a_silent_command_noticed_within_two_heartbeats(sb):
    m = execlib.marker()
    st = ExecStream(sb.c, sb.rid, ["sh", "-c", "echo ready; sleep %s; true" % m])
    try:
        assert st.status == 200, st.body
        st.wait_output(b"ready", timeout=15)
        assert shlib.wait_until(lambda: execlib.host_sleepers(m), timeout=5)
    finally:
        st.abort()
    left = execlib.wait_gone(lambda: execlib.host_sleepers(m),
                             timeout=2 * execlib.HEARTBEAT_MAX + 2)
    execlib.kill_pids([p[0] for p in left], sb.c.daemon_pid)
    assert not left, "silent command survived its client for two heartbeats: %r" % left


def test_delete_during_exec_ends_stream_with_in_band_error_frame(daemon):
    s = daemon.client.new_sandbox()
    m = execlib.marker()
    st = ExecStream(s.c, s.rid, ["sh", "-c", "echo started; sleep %s" % m])
    try:
        assert st.status == 200, st.body
        st.wait_output(b"started", timeout=15)
        r = s.delete(timeout=5)  # a delete waiting for the exec fails here
        assert r.status == 204, r
        st.read_all(timeout=15)
        assert not st.shape_errors, st.describe()
        assert not st.cut, "stream was cut instead of ending with an error frame: " + \
            st.describe()
        assert st.final is not None and "error" in st.final, st.describe()
        assert st.o.startswith(b"started\n")
    finally:
        st.close()
        left = execlib.wait_gone(lambda: execlib.host_sleepers(m), 10)
        execlib.kill_pids([p[0] for p in left], s.c.daemon_pid)
    assert not left, "command survived its sandbox's delete: %r" % left


# -- bad requests ------------------------------------------------------------------------------

BAD_BODIES = [
    ("empty body (= {}): cmd missing", b""),
    ("cmd missing", b'{"env": {}}'),
    ("cmd null", b'{"cmd": null}'),
    ("cmd empty", b'{"cmd": []}'),
    ("cmd a string", b'{"cmd": "ls -l"}'),
    ("cmd an object", b'{"cmd": {"0": "ls"}}'),
    ("cmd item a number", b'{"cmd": ["echo", 1]}'),
    ("cmd item null", b'{"cmd": ["echo", null]}'),
    ("cmd item a list", b'{"cmd": [["echo"]]}'),
    ("env a list", b'{"cmd": ["true"], "env": [["A", "1"]]}'),
    ("env a string", b'{"cmd": ["true"], "env": "A=1"}'),
    ("env value a number", b'{"cmd": ["true"], "env": {"A": 1}}'),
    ("env value null", b'{"cmd": ["true"], "env": {"A": null}}'),
    ("env value an object", b'{"cmd": ["true"], "env": {"A": {}}}'),
    ("not JSON", b'{"cmd": ["true"'),
    ("JSON array", b'[["true"]]'),
]


@pytest.mark.parametrize("why,body", BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_body_is_plain_400_before_any_stream(sb, why, body):
    st = ExecStream(sb.c, sb.rid, raw_body=body)
    r = shlib.Resp(st.status, st.headers, st.body or b"")
    assert_error(r, 400, "BadRequest")


def test_unknown_body_fields_are_ignored(sb):
    st = ExecStream(sb.c, sb.rid, body={"cmd": ["true"], "future": {"x": 1}}).read_all()
    st.assert_exit(0)


def test_exec_on_unknown_sandbox_is_404(client):
    st = ExecStream(client, "0" * 40, ["true"])
    assert_error(shlib.Resp(st.status, st.headers, st.body), 404, "SandboxNotFound")


def test_exec_on_deleted_sandbox_is_404(client):
    s = client.new_sandbox()
    assert s.delete().status == 204
    st = ExecStream(client, s.rid, ["true"])
    assert_error(shlib.Resp(st.status, st.headers, st.body), 404, "SandboxNotFound")


# -- concurrency -------------------------------------------------------------------------------

def test_parallel_execs_in_several_sandboxes_while_healthz_keeps_answering(daemon):
    c = daemon.client
    boxes = [c.new_sandbox() for _ in range(3)]
    jobs = []
    for s in boxes:
        jobs.append((s, ["sh", "-c", "for i in $(seq 1 20); do echo line $i; sleep 0.1; done"],
                     b"".join(b"line %d\n" % i for i in range(1, 21))))
        jobs.append((s, ["head", "-c", "8000000", "/dev/zero"], b"\0" * 8000000))
        jobs.append((s, ["seq", "1", "100000"],
                     "".join("%d\n" % i for i in range(1, 100001)).encode()))
    results = [None] * len(jobs)

    def worker(i, s, cmd):
        try:
            results[i] = run(s, cmd, timeout=60)
        except Exception as e:  # reported below
            results[i] = e

    threads = [threading.Thread(target=worker, args=(i, s, cmd), daemon=True)
               for i, (s, cmd, _) in enumerate(jobs)]
    try:
        # every probe answered within its call timeout (the latency: tests/bench's
        # "healthz worst, during 16 exec loops")
        with shlib.ProbeWatch(c, timeout=1.0, interval=0.1) as watch:
            for t in threads:
                t.start()
            for t in threads:
                t.join(90)
        watch.assert_answered()
        for (s, cmd, want), st in zip(jobs, results):
            assert isinstance(st, ExecStream), (cmd, st)
            st.assert_exit(0)
            assert st.out == want, (cmd, len(st.out), len(want))
            assert st.o == want, (cmd, len(st.o), len(want))
    finally:
        for s in boxes:
            s.delete()


# ---- exec cgroups: one empty cgroup kept for the next exec (sandbox.c, spare_make) ----------

def exec_cgroup(sb, script="cat /proc/self/cgroup"):
    """The name of the exec cgroup a command runs in, as the sandbox sees it: one name in every
    hierarchy. (Its cgroup namespace is rooted at its worker's cgroup, so the paths differ on
    v1: /exec-N in the memory hierarchy, where the worker has no leaf of its own, /../exec-N in
    the others, where it is in the sandbox's init leaf.)"""
    names = {ln.rsplit("/", 1)[1] for ln in sh(sb, script).splitlines() if "exec-" in ln}
    assert len(names) == 1, names
    return names.pop()


def host_exec_cgroups(rid):
    import glob
    return sorted({os.path.basename(p)  # one name in each v1 hierarchy
                   for pat in ("/sys/fs/cgroup/*/sandbox-host.*/%s/exec-*",
                               "/sys/fs/cgroup/*/*/sandbox-host.*/%s/exec-*",
                               "/sys/fs/cgroup/sandbox-host.*/%s/exec-*")
                   for p in glob.glob(pat % rid)})


def test_a_cleanly_exited_exec_hands_its_empty_cgroup_to_the_next(sb):
    first = exec_cgroup(sb)
    assert exec_cgroup(sb) == first


def test_a_command_that_leaves_a_process_never_shares_its_cgroup_with_the_next(sb):
    left = exec_cgroup(sb, "sleep 300 </dev/null >/dev/null 2>&1 & cat /proc/self/cgroup")
    after = exec_cgroup(sb)
    assert after != left, (left, after)
    # the process left behind still runs, in the cgroup it started in
    assert "sleep 300" in sh(sb, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert left in sh(sb, "for p in /proc/[0-9]*; do grep -q '^sleep' $p/comm 2>/dev/null && "
                          "cat $p/cgroup; done")


def test_the_kept_exec_cgroup_goes_after_ten_idle_seconds(sb):
    ok(sb, ["true"])
    assert len(host_exec_cgroups(sb.rid)) <= 1, host_exec_cgroups(sb.rid)
    assert execlib.wait_gone(lambda: host_exec_cgroups(sb.rid), timeout=20) == [], \
        host_exec_cgroups(sb.rid)
