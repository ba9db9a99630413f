"""Section 10: host configuration; start-up line; SIGTERM; leftovers from an earlier run."""
import json
import os
import re
import signal
import socket
import time

import pytest

import shlib
from shlib import assert_204, assert_error, assert_json, needs_root, run_to_exit

# variable suffix -> (valid values, invalid values)
SETTINGS = {
    "MAX_SANDBOXES": (["1", "300"], ["abc", "-1", "1.5", "10x", "99999999999999999999999"]),
    "MEMORY_MAX": (["1G", "512M", "512m", "1073741824", "2g", "1t", "1T", "65536K", "262144k"],
                   ["abc", "-1", "1X", "1Q", "G", "1.5.5G"]),
    "PIDS_MAX": (["512", "64"], ["abc", "-5", "1.5", "5k5"]),
    "CPU_MAX": (["1", "0.5", "2", "1.25"], ["abc", "-1", "1,5", "two"]),
    "EXEC_OUTPUT_MAX": (["16M", "1k", "1024", "2m"], ["abc", "-1", "16Q", "M"]),
    "UPLOAD_MAX": (["1G", "1K", "1k", "2048", "3m"], ["abc", "-1", "1Z", "K1"]),
    "EXEC_GRACE_MS": (["0", "1000", "250"], ["-1", "1.5", "abc", "1s"]),
    # this host's own addition (docs/configuration.md)
    "TOOL_INSECURE_HTTP": (["on", "off", "true", "false", "1", "0"], ["maybe", "2", "onn", ""]),
}


flag = shlib.setting_flag
_non_json_lines = shlib.non_json_lines


def _assert_config_error(rc, out, err, names):
    assert rc == 2, "expected exit 2, got %r; stderr=%r" % (rc, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    named = [ln for ln in lines if any(n.lower() in ln.lower() for n in names)]
    assert named, "no stderr line names %r: %r" % (names, err)
    # "a one-line message": at most one human line (JSON log lines aside)
    assert len(_non_json_lines(err)) <= 1, err


# ---- the start-up line ----

def test_listening_line_on_stderr(daemon):
    line = daemon.listen_line.strip()
    assert re.fullmatch(r"listening on http://127\.0\.0\.1:\d+", line), line
    assert daemon.port > 0


def test_stderr_other_lines_are_json_objects(daemon):
    daemon.client.get("/healthz")
    daemon.client.get("/nope")
    for ln in daemon.stderr_text().splitlines():
        if not ln.strip() or shlib.LISTEN_RE.search(ln):
            continue
        assert isinstance(json.loads(ln), dict), ln


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("form", ["env", "eq", "space"])
def test_listen_setting_forms_and_flag_wins(start_daemon, form):
    port = _free_port()
    addr = "127.0.0.1:%d" % port
    if form == "env":
        d = start_daemon(env={"SANDBOX_HOST_LISTEN": addr})
    elif form == "eq":
        d = start_daemon(args=["--listen=" + addr])  # env says 127.0.0.1:0
    else:
        d = start_daemon(args=["--listen", addr])
    assert d.port == port
    assert d.listen_line.strip() == "listening on http://" + addr
    assert d.client.get("/healthz").status == 200
    d.stop_ok()


def test_default_pod_url_follows_bound_port(start_daemon):
    d = start_daemon()
    assert assert_json(d.client.create({}))["pod_url"] == "http://127.0.0.1:%d" % d.port
    d.stop_ok()


def test_default_listen_is_127_0_0_1_8080(tmp_path):
    probe = socket.socket()
    try:
        probe.bind(("127.0.0.1", 8080))
    except OSError:
        pytest.skip("127.0.0.1:8080 is in use on this machine")
    finally:
        probe.close()
    try:
        d = shlib.Daemon(env={"SANDBOX_HOST_LISTEN": None}, root=tmp_path)
    except RuntimeError as e:
        pytest.fail(str(e))
    try:
        assert d.port == 8080
        assert d.listen_line.strip() == "listening on http://127.0.0.1:8080"
        assert d.client.get("/healthz").status == 200
    finally:
        d.stop_ok()


@needs_root
def test_default_max_sandboxes_is_256(start_daemon):
    d = start_daemon()
    c = d.client
    for i in range(256):
        r = c.create({})
        assert r.status == 200, (i, r)
    assert c.get("/readyz").status == 503
    assert_error(c.create({}), 503, "Unavailable")
    d.stop_ok()


@needs_root
def test_default_upload_max_is_1g(start_daemon):
    # 1 GiB + 1 byte is refused with 413; the body is streamed (the daemon may answer early).
    d = start_daemon()
    s = d.client.new_sandbox()
    s.put_ok("f", b"old")
    total = (1 << 30) + 1
    sock = socket.create_connection(("127.0.0.1", d.port), timeout=30)
    try:
        sock.sendall(("PUT %s/file?path=f HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                      % (s.base, total)).encode())
        chunk = b"z" * (1 << 20)
        sent = 0
        try:
            while sent < total:
                n = min(len(chunk), total - sent)
                sock.sendall(chunk[:n])
                sent += n
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                got = sock.recv(65536)
                if not got:
                    break
                data += got
        except ConnectionResetError:
            pass
    finally:
        sock.close()
    assert shlib.raw_status(data) == 413, data[:300]
    assert s.get_v("f") == b"old"
    d.stop_ok()


# ---- pod_url ----

def test_pod_url_from_env(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_POD_URL": "http://10.1.2.3:8080"})
    j = assert_json(d.client.create({}))
    assert j["pod_url"] == "http://10.1.2.3:8080"
    d.stop_ok()


@pytest.mark.parametrize("form", ["eq", "space"])
def test_pod_url_flag_forms(start_daemon, form):
    args = (["--pod-url=http://pod-flag:9"] if form == "eq" else ["--pod-url", "http://pod-flag:9"])
    d = start_daemon(args=args)
    assert assert_json(d.client.create({}))["pod_url"] == "http://pod-flag:9"
    d.stop_ok()


def test_pod_url_flag_wins_over_env(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_POD_URL": "http://from-env:1"},
                     args=["--pod-url=http://from-flag:2"])
    assert assert_json(d.client.create({}))["pod_url"] == "http://from-flag:2"
    d.stop_ok()


def test_pod_url_configured_with_trailing_slash_is_returned_without_it():
    # "pod_url is configured ... and has no trailing slash": either the daemon strips the
    # slash or it refuses the setting (exit 2); it never hands out "http://x:1/".
    try:
        d = shlib.Daemon(env={"SANDBOX_HOST_POD_URL": "http://pod-slash:7/"})
    except RuntimeError as e:
        assert "exited with 2" in str(e), str(e)
        return
    try:
        pod = assert_json(d.client.create({}))["pod_url"]
        assert pod == "http://pod-slash:7", pod
    finally:
        d.stop_ok()


# ---- root ----

@needs_root
@pytest.mark.parametrize("form", ["env", "eq", "space"])
def test_root_setting_forms(start_daemon, tmp_path, form):
    root = tmp_path / "state"
    root.mkdir()
    other = tmp_path / "env-root"
    other.mkdir()
    if form == "env":
        d = start_daemon(root=root)
    elif form == "eq":
        d = start_daemon(root=other, args=["--root=%s" % root])
    else:
        d = start_daemon(root=other, args=["--root", str(root)])
    s = d.client.new_sandbox()
    assert (root / s.rid / "workspace").is_dir()
    assert not (other / s.rid).exists()
    assert_204(s.delete())
    d.stop_ok()


# ---- max sandboxes: each form, flag wins ----

@pytest.mark.parametrize("how", ["env", "eq", "space", "flag-over-env"])
def test_max_sandboxes_forms(start_daemon, how):
    env, args = {}, []
    if how == "env":
        env = {"SANDBOX_HOST_MAX_SANDBOXES": "1"}
    elif how == "eq":
        args = ["--max-sandboxes=1"]
    elif how == "space":
        args = ["--max-sandboxes", "1"]
    else:
        env = {"SANDBOX_HOST_MAX_SANDBOXES": "5"}
        args = ["--max-sandboxes=1"]
    d = start_daemon(env=env, args=args)
    d.client.new_sandbox()
    assert_error(d.client.create({}), 503, "Unavailable")
    d.stop_ok()


def test_max_sandboxes_flag_wins_over_lower_env(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_MAX_SANDBOXES": "1"}, args=["--max-sandboxes=3"])
    for _ in range(3):
        d.client.new_sandbox()
    assert_error(d.client.create({}), 503, "Unavailable")
    d.stop_ok()


# ---- upload max: suffix semantics, forms ----

@pytest.mark.parametrize("how", [("env", "1K"), ("env", "1k"), ("eq", "1K"), ("space", "1k"),
                                 ("eq", "1024"), ("flag-over-env", "1K")])
def test_upload_max_forms_and_binary_suffix(start_daemon, how):
    form, val = how
    env, args = {}, []
    if form == "env":
        env = {"SANDBOX_HOST_UPLOAD_MAX": val}
    elif form == "eq":
        args = ["--upload-max=" + val]
    elif form == "space":
        args = ["--upload-max", val]
    else:
        env = {"SANDBOX_HOST_UPLOAD_MAX": "1M"}
        args = ["--upload-max=" + val]
    d = start_daemon(env=env, args=args)
    s = d.client.new_sandbox()
    s.put_ok("ok", b"a" * 1024)
    assert_error(s.put("big", b"a" * 1025), 413, "PayloadTooLarge")
    d.stop_ok()


@pytest.mark.parametrize("val", ["1m", "1M"])
def test_upload_max_mebibyte_suffix_is_binary(start_daemon, val):
    d = start_daemon(env={"SANDBOX_HOST_UPLOAD_MAX": val})
    s = d.client.new_sandbox()
    s.put_ok("ok", b"a" * (1 << 20))
    assert_error(s.put("big", b"a" * ((1 << 20) + 1)), 413, "PayloadTooLarge")
    d.stop_ok()


# ---- every setting: valid values start, invalid values exit 2 naming the setting ----

@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_valid_values_start_in_env_and_both_flag_forms(start_daemon, name):
    for v in SETTINGS[name][0]:
        for env, args in (({"SANDBOX_HOST_" + name: v}, []),
                          ({}, [flag(name) + "=" + v]),
                          ({}, [flag(name), v])):
            d = start_daemon(env=env, args=args)
            assert d.client.get("/healthz").status == 200
            d.stop_ok("%s=%s" % (name, v))


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_invalid_env_value_exits_2_naming_setting(name):
    for v in SETTINGS[name][1]:
        rc, out, err = run_to_exit(env={"SANDBOX_HOST_" + name: v})
        _assert_config_error(rc, out, err, ["SANDBOX_HOST_" + name, flag(name)[2:], name])


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_invalid_flag_value_exits_2_naming_setting(name):
    for v in SETTINGS[name][1]:
        for args in ([flag(name) + "=" + v], [flag(name), v]):
            rc, out, err = run_to_exit(args=args)
            _assert_config_error(rc, out, err, [flag(name)[2:], "SANDBOX_HOST_" + name, name])


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_invalid_flag_wins_over_valid_env(name):
    rc, out, err = run_to_exit(env={"SANDBOX_HOST_" + name: SETTINGS[name][0][0]},
                               args=[flag(name) + "=" + SETTINGS[name][1][0]])
    _assert_config_error(rc, out, err, [flag(name)[2:], "SANDBOX_HOST_" + name, name])


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_valid_flag_wins_over_invalid_env(start_daemon, name):
    # INTERPRETATION (contract: "a flag wins over the variable"): the flag wins, so an invalid
    # variable is never the value in force and must not stop the daemon. The contract does
    # not say this case explicitly.
    d = start_daemon(env={"SANDBOX_HOST_" + name: SETTINGS[name][1][0]},
                     args=[flag(name) + "=" + SETTINGS[name][0][0]])
    assert d.client.get("/healthz").status == 200
    d.stop_ok()


@pytest.mark.parametrize("value", ["nonsense", "127.0.0.1:99999", "127.0.0.1:abc",
                                   "127.0.0.1:-1", "127.0.0.1", "127.0.0.1:"])
def test_invalid_listen_exits_2_naming_setting(value):
    rc, out, err = run_to_exit(env={"SANDBOX_HOST_LISTEN": value})
    _assert_config_error(rc, out, err, ["listen", "SANDBOX_HOST_LISTEN"])
    rc, out, err = run_to_exit(args=["--listen=" + value])
    _assert_config_error(rc, out, err, ["listen", "SANDBOX_HOST_LISTEN"])


@pytest.mark.parametrize("args,name", [
    (["--bogus"], "bogus"), (["--bogus=1"], "bogus"), (["--bogus", "1"], "bogus"),
    (["--LISTEN=127.0.0.1:0"], "LISTEN"), (["--nfs_root=/tmp"], "nfs_root"),
    (["--sandbox-host-root=/tmp"], "sandbox-host-root"),
    # an abbreviation is not the flag's name (getopt_long would accept it): still unknown
    (["--max-sandbox=3"], "max-sandbox"),
])
def test_unknown_flag_exits_2_naming_it(args, name):
    rc, out, err = run_to_exit(args=args)
    _assert_config_error(rc, out, err, [name])


def test_flag_without_value_exits_2():
    rc, out, err = run_to_exit(args=["--max-sandboxes"])
    _assert_config_error(rc, out, err, ["max-sandboxes", "SANDBOX_HOST_MAX_SANDBOXES"])


@pytest.mark.parametrize("name", ["NFS_ROOT", "IMAGES", "POD_URL", "ROOT", "LISTEN"])
def test_path_and_url_settings_accept_both_flag_forms(start_daemon, tmp_path, name):
    val = {"NFS_ROOT": str(tmp_path / "nfs"), "IMAGES": str(tmp_path / "images"),
           "POD_URL": "http://pod:1", "ROOT": str(tmp_path / "root"),
           "LISTEN": "127.0.0.1:0"}[name]
    for sub in ("nfs", "images", "root"):
        (tmp_path / sub).mkdir(exist_ok=True)
    for args in ([flag(name) + "=" + val], [flag(name), val]):
        d = start_daemon(args=args)
        assert d.client.get("/healthz").status == 200
        d.stop_ok()


def test_help_exits_0():
    rc, out, err = run_to_exit(args=["--help"])
    assert rc == 0, (rc, err)
    assert (out + err).strip(), "no help text"


def test_version_exits_0():
    rc, out, err = run_to_exit(args=["--version"])
    assert rc == 0, (rc, err)
    assert (out + err).strip(), "no version text"


def test_help_does_not_start_listening():
    rc, out, err = run_to_exit(args=["--help"])
    assert "listening on" not in err


# ---- SIGTERM and leftovers ----

def test_sigterm_exits_0(start_daemon):
    d = start_daemon()
    d.stop_ok()


@needs_root
def test_sigterm_removes_every_sandbox_directory(start_daemon, outside):
    # links aim at our own temp dir only: a buggy daemon must never get to remove /etc
    before = shlib.snapshot_tree(outside)
    d = start_daemon()
    c = d.client
    rids = []
    for i in range(4):
        s = c.new_sandbox()
        s.put_ok("d%d/f" % i, os.urandom(1000))
        assert_204(s.mkdir("e/f/g"))
        if i % 2:
            assert_204(s.mark_ready())
        os.mkfifo(d.ws(s.rid) / "fifo")
        os.symlink(str(outside), d.ws(s.rid) / "out-link")
        rids.append(s.rid)
    d.stop_ok()
    for rid in rids:
        assert not os.path.lexists(d.root / rid), rid
    assert shlib.snapshot_tree(outside) == before


@needs_root
def test_sigterm_during_drain_state_still_exits_0(start_daemon):
    d = start_daemon()
    s = d.client.new_sandbox()
    assert_json(d.client.post("/drain"))
    d.stop_ok()
    assert not os.path.lexists(d.root / s.rid)


@needs_root
def test_leftover_sandbox_directories_removed_at_start(start_daemon, tmp_path, outside):
    # From the brief (not spelled out in CONTRACT.md): sandbox directories (40 hex: an id) left
    # in the root by an earlier run are removed at start.
    root = tmp_path / "root"
    root.mkdir()
    before = shlib.snapshot_tree(outside)
    stale = []
    for i in range(3):
        rid = ("%040x" % (0xABCDEF0123456789 * (i + 1)))[-40:]
        ws = root / rid / "workspace"
        (ws / "deep" / "er").mkdir(parents=True)
        (ws / "deep" / "er" / "f").write_bytes(b"old")
        (root / rid / ".ready").write_bytes(b"")
        os.mkfifo(ws / "fifo")
        os.symlink(str(outside), ws / "out")
        stale.append(rid)
    d = start_daemon(root=root)
    gone = shlib.wait_until(lambda: not any(os.path.lexists(root / r) for r in stale), 10)
    assert gone, [r for r in stale if os.path.lexists(root / r)]
    assert shlib.snapshot_tree(outside) == before
    # and the ids are not live sandboxes
    for rid in stale:
        assert_error(d.client.get("/sandboxes/%s/ready" % rid), 404, "SandboxNotFound")
    d.stop_ok()


def test_daemon_keeps_running_until_signalled(start_daemon):
    d = start_daemon()
    time.sleep(0.5)
    assert d.proc.poll() is None
    assert d.client.get("/healthz").status == 200
    d.stop_ok()


def test_sigint_also_stops(start_daemon):
    # Contract silent on SIGINT; a daemon is expected to stop on it as on SIGTERM.
    d = start_daemon()
    d.proc.send_signal(signal.SIGINT)
    rc = d.wait_exit()
    assert rc in (0, -signal.SIGINT, 128 + signal.SIGINT), rc
