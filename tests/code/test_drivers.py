"""The code interpreter's drivers (src/code/drivers/) run as the daemon runs them, without the
daemon: the interpreter started with the seam's argv, the driver's text from the source tree,
pipes on fds 0 (cells), 1, 2 (output) and 3 (frames), an interrupt sent to the whole process
group as sh_exec_signal sends it to the exec's cgroup. Each test one behaviour, each wait
bounded. The host's python3, node and bash play the sandbox image's."""

import json
import os
import selectors
import shutil
import signal
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRIVERS = os.path.join(ROOT, "src", "code", "drivers")
WAIT = 30  # seconds any one step may take, at most
# Debian's python3 (a sandbox image's is most likely that), else the first on PATH;
# SH_CODE_PYTHON names another (the driver on an older or newer Python).
PYTHON = os.environ.get("SH_CODE_PYTHON") or (
    "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3"))
NODE = shutil.which("node")


def has_matplotlib():
    r = subprocess.run([PYTHON, "-c", "import matplotlib"], capture_output=True)
    return r.returncode == 0


class Context:
    """One driver process and its four pipes."""

    def __init__(self, lang, cwd="", result_max=8 << 20, uid=None):
        src = open(os.path.join(DRIVERS, {"python": "driver.py", "javascript": "driver.js",
                                          "bash": "driver.sh"}[lang])).read()
        rm = str(result_max)
        argv = {
            "python": [PYTHON, "-c", src, "sandbox-host-code", cwd, rm],
            "javascript": [NODE or "node", "-e", src, cwd, rm],
            "bash": ["bash", "-c", src, "sandbox-host-code", cwd, rm],
        }[lang]
        cells_r, self.cells = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        frames_r, frames_w = os.pipe()
        env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1")

        def fd3():
            os.dup2(frames_w, 3)
            if uid is not None:  # a sandbox's uid: the pipes (this process's) are not its own
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)

        self.proc = subprocess.Popen(argv, stdin=cells_r, stdout=out_w, stderr=err_w,
                                     pass_fds=(3,), preexec_fn=fd3, env=env,
                                     start_new_session=True, cwd="/")
        for fd in (cells_r, out_w, err_w, frames_w):
            os.close(fd)
        self.sel = selectors.DefaultSelector()
        self.bufs = {}
        for fd, name in ((out_r, "out"), (err_r, "err"), (frames_r, "frames")):
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ, name)
            self.bufs[name] = b""
        self.taken = 0  # frame lines already handed out
        self.eof = set()

    def pump(self, until, timeout=WAIT):
        """Read the three pipes until until() holds; False when the time runs out or every
        pipe ended first."""
        deadline = time.monotonic() + timeout
        while not until():
            left = deadline - time.monotonic()
            if left <= 0 or len(self.eof) == 3:
                return until()
            for key, _ in self.sel.select(min(left, 0.5)):
                try:
                    b = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not b:
                    self.sel.unregister(key.fd)
                    os.close(key.fd)
                    self.eof.add(key.data)
                else:
                    self.bufs[key.data] += b
        return True

    def lines(self):
        return self.bufs["frames"].split(b"\n")[:-1]

    def frames(self):
        """The frame lines after those taken, decoded (a line that is not JSON as its bytes)."""
        out = []
        for l in self.lines()[self.taken:]:
            try:
                out.append(json.loads(l))
            except ValueError:
                out.append(l)
        return out

    def next_frames(self, n_types=("done", "fail"), timeout=WAIT):
        """Frames up to and with the next done (or fail), consumed."""
        def have():
            return any(isinstance(f, dict) and f.get("t") in n_types for f in self.frames())

        assert self.pump(have, timeout), "no %s frame: %r, stderr %r" % (
            n_types, self.bufs["frames"], self.bufs["err"])
        fs = self.frames()
        i = next(i for i, f in enumerate(fs) if isinstance(f, dict) and f.get("t") in n_types)
        self.taken += i + 1
        return fs[: i + 1]

    def ready(self):
        fs = self.next_frames(("ready", "fail"))
        assert fs[-1] == {"t": "ready"}, fs
        return self

    def send(self, code):
        b = code.encode() if isinstance(code, str) else code
        os.write(self.cells, b"%d\n" % len(b) + b)

    def run(self, code, timeout=WAIT):
        """One cell: its frames (through done), and what it wrote to stdout and stderr."""
        out0, err0 = len(self.bufs["out"]), len(self.bufs["err"])
        self.send(code)
        fs = self.next_frames(timeout=timeout)
        return fs, self.bufs["out"][out0:].decode(), self.bufs["err"][err0:].decode()

    def driver_pipes(self):
        """The names /proc gives the cells' and the frames' pipes ("pipe:[inode]")."""
        frames = next(fd for fd, k in self.sel.get_map().items() if k.data == "frames")
        return {"pipe:[%d]" % os.fstat(fd).st_ino for fd in (self.cells, frames)}

    def interrupt(self):
        os.killpg(self.proc.pid, signal.SIGINT)

    def close(self):
        try:
            os.close(self.cells)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=WAIT)
        for fd in list(self.sel.get_map()):
            self.sel.unregister(fd)
            os.close(fd)


@pytest.fixture
def ctx(request):
    made = []

    def make(lang, **kw):
        if lang == "javascript" and not NODE:
            pytest.skip("node is not installed: the JavaScript driver needs it")
        c = Context(lang, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def results(fs):
    return [f["data"] for f in fs if isinstance(f, dict) and f.get("t") == "result"]


def errors(fs):
    return [f for f in fs if isinstance(f, dict) and f.get("t") == "error"]


# ---- Python ------------------------------------------------------------------------------


def test_python_keeps_a_variable_an_import_and_the_directory_across_cells(ctx, tmp_path):
    c = ctx("python").ready()
    c.run("x = 41\nimport json as J\nimport os\nos.chdir(%r)" % str(tmp_path))
    fs, out, _ = c.run("print(x + 1, J.dumps([1]), os.getcwd())")
    assert out == "42 [1] %s\n" % tmp_path
    assert errors(fs) == [] and fs[-1] == {"t": "done"}


def test_python_starts_in_the_cwd_given(ctx, tmp_path):
    c = ctx("python", cwd=str(tmp_path)).ready()
    _, out, _ = c.run("import os; print(os.getcwd())")
    assert out == "%s\n" % tmp_path


def test_python_a_missing_cwd_is_a_fail_frame_and_exit_1(ctx, tmp_path):
    c = ctx("python", cwd=str(tmp_path / "absent"))
    fs = c.next_frames(("ready", "fail"))
    assert fs[-1]["t"] == "fail" and "absent" in fs[-1]["msg"]
    assert c.proc.wait(timeout=WAIT) == 1


def test_python_the_last_expression_is_the_text_plain_result(ctx):
    c = ctx("python").ready()
    fs, _, _ = c.run("a = 20\na + 22")
    assert results(fs) == [{"text/plain": "42"}]


def test_python_a_none_value_or_a_statement_gives_no_result(ctx):
    c = ctx("python").ready()
    fs, _, _ = c.run("None")
    assert results(fs) == []
    fs, _, _ = c.run("y = 3")
    assert results(fs) == []


def test_python_an_object_with_repr_html_gives_text_html(ctx):
    c = ctx("python").ready()
    fs, _, _ = c.run(
        "class H:\n"
        "    def _repr_html_(self): return '<b>hi</b>'\n"
        "    def __repr__(self): return 'H()'\n"
        "H()")
    assert results(fs) == [{"text/plain": "H()", "text/html": "<b>hi</b>"}]


def test_python_repr_png_is_base64_and_repr_json_json_text(ctx):
    c = ctx("python").ready()
    fs, _, _ = c.run(
        "class P:\n"
        "    def _repr_png_(self): return b'\\x89PNG'\n"
        "    def _repr_json_(self): return {'a': [1]}\n"
        "P()")
    (r,) = results(fs)
    assert r["image/png"] == "iVBORw==" and json.loads(r["application/json"]) == {"a": [1]}


def test_python_an_exception_has_its_name_value_and_the_cells_traceback_only(ctx):
    c = ctx("python").ready()
    c.run("def f():\n    raise ValueError('bad thing')\n")
    fs, _, _ = c.run("x = 1\nf()")
    (e,) = errors(fs)
    assert e["ename"] == "ValueError" and e["evalue"] == "bad thing"
    tb = "\n".join(e["traceback"])
    assert "<cell-2>" in tb and "<cell-1>" in tb and "raise ValueError" in tb
    assert "<string>" not in tb and "driver" not in tb
    assert e["traceback"][-1] == "ValueError: bad thing"
    assert fs[-1] == {"t": "done"}


def test_python_a_syntax_error_is_an_error_frame(ctx):
    c = ctx("python").ready()
    fs, _, _ = c.run("x = (")
    (e,) = errors(fs)
    assert e["ename"] == "SyntaxError" and "<string>" not in "\n".join(e["traceback"])


def test_python_output_comes_before_the_frames_and_keeps_its_streams(ctx):
    c = ctx("python").ready()
    fs, out, err = c.run("import sys\nprint('o')\nprint('e', file=sys.stderr)\n5")
    assert out == "o\n" and err == "e\n" and results(fs) == [{"text/plain": "5"}]


def test_python_sigint_during_a_cell_is_keyboardinterrupt_and_the_context_lives(ctx):
    c = ctx("python").ready()
    c.send("n = 7\nprint('spinning', flush=True)\nwhile True: pass")
    assert c.pump(lambda: b"spinning" in c.bufs["out"]), c.bufs
    c.interrupt()
    fs = c.next_frames()
    (e,) = errors(fs)
    assert e["ename"] == "KeyboardInterrupt"
    fs, _, _ = c.run("n * 6")
    assert results(fs) == [{"text/plain": "42"}]


def test_python_sigint_while_idle_is_ignored(ctx):
    c = ctx("python").ready()
    c.interrupt()
    fs, _, _ = c.run("1 + 1")
    assert results(fs) == [{"text/plain": "2"}] and c.proc.poll() is None


def test_python_a_cell_writing_junk_to_fd_3_does_not_stop_the_driver(ctx):
    c = ctx("python").ready()
    fs, _, _ = c.run("import os\nos.write(3, b'junk, not a frame\\n')\n")
    assert b"junk, not a frame" in fs and fs[-1] == {"t": "done"}
    fs, _, _ = c.run("2 + 2")
    assert results(fs) == [{"text/plain": "4"}]


def test_python_a_cell_reading_stdin_gets_eof_and_so_do_its_children(ctx):
    c = ctx("python").ready()
    fs, out, _ = c.run(
        "import sys, subprocess\n"
        "print(repr(sys.stdin.read()))\n"
        "print(repr(subprocess.run(['cat'], stdout=subprocess.PIPE).stdout))")
    assert out == "''\nb''\n" and errors(fs) == []
    fs, _, _ = c.run("3")  # the cells' pipe untouched
    assert results(fs) == [{"text/plain": "3"}]


LIST_FDS = "for f in /proc/self/fd/*; do readlink $f; done"


def test_python_the_cells_pipe_and_fd_3_are_not_inherited_by_children(ctx):
    c = ctx("python").ready()
    _, out, _ = c.run("import os\nos.system(%r)" % LIST_FDS)
    assert out and not set(out.split()) & c.driver_pipes()


def test_python_a_bundle_entry_over_result_max_is_left_out(ctx):
    c = ctx("python", result_max=4096).ready()
    fs, _, err = c.run(
        "class B:\n"
        "    def _repr_html_(self): return 'x' * 10000\n"
        "    def _repr_markdown_(self): return '*m*'\n"
        "    def __repr__(self): return 'B()'\n"
        "B()")
    assert results(fs) == [{"text/plain": "B()", "text/markdown": "*m*"}]
    assert "text/html" in err
    assert all(len(l) < 4096 for l in c.lines())


def test_python_a_text_plain_over_result_max_is_cut(ctx):
    c = ctx("python", result_max=4096).ready()
    fs, _, _ = c.run("'y' * 100000")
    (r,) = results(fs)
    assert r["text/plain"].startswith("'yyy") and r["text/plain"].endswith("RESULT_MAX]")
    assert all(len(l) < 4096 for l in c.lines())


@pytest.mark.skipif(not has_matplotlib(), reason="matplotlib is not installed for %s" % PYTHON)
def test_python_an_open_matplotlib_figure_is_a_png_result(ctx):
    c = ctx("python").ready()
    fs, _, _ = c.run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nNone")
    pngs = [r for r in results(fs) if "image/png" in r]
    assert len(pngs) == 1
    import base64

    assert base64.b64decode(pngs[0]["image/png"]).startswith(b"\x89PNG")
    fs, _, _ = c.run("len(plt.get_fignums())")
    assert results(fs) == [{"text/plain": "0"}]


def test_python_the_end_of_the_cells_pipe_ends_the_driver(ctx):
    c = ctx("python").ready()
    os.close(c.cells)
    assert c.proc.wait(timeout=WAIT) == 0


# ---- JavaScript --------------------------------------------------------------------------


def test_javascript_keeps_a_variable_and_gives_the_last_value(ctx):
    c = ctx("javascript").ready()
    c.run("var a = 40; let b = 2; const o = {k: 'v'};")
    fs, _, _ = c.run("a + b")
    assert results(fs) == [{"text/plain": "42"}]
    fs, _, _ = c.run("o")
    assert results(fs) == [{"text/plain": "{ k: 'v' }"}]


def test_javascript_undefined_gives_no_result(ctx):
    c = ctx("javascript").ready()
    fs, _, _ = c.run("undefined")
    assert results(fs) == [] and fs[-1] == {"t": "done"}


def test_javascript_a_thrown_error_has_its_name_message_and_stack_without_the_driver(ctx):
    c = ctx("javascript").ready()
    fs, _, _ = c.run("function f() { throw new TypeError('bad thing'); }\nf()")
    (e,) = errors(fs)
    assert e["ename"] == "TypeError" and e["evalue"] == "bad thing"
    assert e["traceback"][0] == "TypeError: bad thing"
    tb = "\n".join(e["traceback"])
    assert "<cell-1>" in tb and "[eval]" not in tb and "node:vm" not in tb


def test_javascript_console_and_require_work_and_output_comes_before_frames(ctx):
    c = ctx("javascript").ready()
    fs, out, err = c.run("console.log('o'); console.error('e'); require('path').join('a', 'b')")
    assert out == "o\n" and err == "e\n" and results(fs) == [{"text/plain": "'a/b'"}]


def test_javascript_a_promise_value_is_awaited(ctx):
    c = ctx("javascript").ready()
    fs, _, _ = c.run("new Promise(r => setTimeout(() => r(6 * 7), 10))")
    assert results(fs) == [{"text/plain": "42"}]


def test_javascript_sigint_during_a_cell_is_an_error_and_the_context_lives(ctx):
    c = ctx("javascript").ready()
    c.send("var n = 7; console.log('spinning'); while (true) {}")
    assert c.pump(lambda: b"spinning" in c.bufs["out"]), c.bufs
    c.interrupt()
    fs = c.next_frames()
    assert len(errors(fs)) == 1
    fs, _, _ = c.run("n * 6")
    assert results(fs) == [{"text/plain": "42"}]


def test_javascript_a_cell_reading_stdin_gets_eof(ctx):
    c = ctx("javascript").ready()
    fs, _, _ = c.run("require('fs').readFileSync(0).length")
    assert results(fs) == [{"text/plain": "0"}]
    fs, _, _ = c.run("1")
    assert results(fs) == [{"text/plain": "1"}]


# ---- bash --------------------------------------------------------------------------------


def test_bash_keeps_the_directory_and_a_variable(ctx, tmp_path):
    c = ctx("bash").ready()
    c.run("cd %s\nv=hello\ndeclare -A m=([k]=w)" % tmp_path)
    fs, out, _ = c.run('echo "$v ${m[k]} $PWD"')
    assert out == "hello w %s\n" % tmp_path and errors(fs) == []


def test_bash_a_non_zero_last_status_is_a_commandexecerror(ctx):
    c = ctx("bash").ready()
    fs, _, _ = c.run("true\n(exit 3)")
    assert errors(fs) == [{"t": "error", "ename": "CommandExecError", "evalue": "3",
                           "traceback": []}]
    fs, _, _ = c.run("true")
    assert errors(fs) == [] and fs[-1] == {"t": "done"}


def test_bash_a_cell_reading_stdin_gets_eof(ctx):
    c = ctx("bash").ready()
    fs, out, _ = c.run("cat; read x; echo \"read=$?\"")
    assert out == "read=1\n"
    fs, out, _ = c.run("echo next")
    assert out == "next\n"


def test_bash_the_cells_pipe_and_fd_3_are_closed_in_a_cell(ctx):
    c = ctx("bash").ready()
    _, out, _ = c.run(LIST_FDS)  # the shell's own fds, in the cell
    assert out and not set(out.split()) & c.driver_pipes()
    fs, _, err = c.run("echo forged >&3")
    assert len(errors(fs)) == 1 and b"forged" not in c.bufs["frames"]


def test_bash_sigint_ends_a_builtin_loop_and_the_shell_lives(ctx):
    c = ctx("bash").ready()
    c.send("n=7; echo spinning; while :; do :; done; echo after")
    assert c.pump(lambda: b"spinning" in c.bufs["out"]), c.bufs
    c.interrupt()
    fs = c.next_frames()
    assert errors(fs)[0]["evalue"] == "130" and b"after" not in c.bufs["out"]
    _, out, _ = c.run("echo $((n * 6))")
    assert out == "42\n"


def test_bash_sigint_ends_a_foreground_command_and_the_shell_lives(ctx):
    c = ctx("bash").ready()
    c.send("echo spinning; sleep 60")
    assert c.pump(lambda: b"spinning" in c.bufs["out"]), c.bufs
    c.interrupt()
    fs = c.next_frames()
    assert len(errors(fs)) == 1
    _, out, _ = c.run("echo alive")
    assert out == "alive\n"


def test_bash_exit_in_a_cell_ends_the_context(ctx):
    c = ctx("bash").ready()
    c.send("exit 4")
    assert c.proc.wait(timeout=WAIT) == 4


def test_bash_a_missing_cwd_is_a_fail_frame_with_the_path_json_escaped(ctx, tmp_path):
    bad = str(tmp_path / 'a"b\\c\td\x01')
    c = ctx("bash", cwd=bad)
    fs = c.next_frames(("ready", "fail"))
    assert fs[-1]["t"] == "fail" and bad in fs[-1]["msg"]
    assert c.proc.wait(timeout=WAIT) == 1


def test_bash_a_cell_is_counted_in_bytes_whatever_its_characters(ctx):
    c = ctx("bash").ready()
    _, out, _ = c.run("echo 'héllo wörld ✓'")
    assert out == "héllo wörld ✓\n"
    _, out, _ = c.run("echo next")
    assert out == "next\n"


def test_javascript_the_cells_pipe_and_fd_3_are_not_inherited_by_children(ctx):
    c = ctx("javascript").ready()
    _, out, _ = c.run("require('child_process').spawnSync('sh', ['-c', %r], "
                      "{stdio: 'inherit'}).status" % LIST_FDS)
    assert out and not set(out.split()) & c.driver_pipes()


def test_python_a_cell_of_a_megabyte_is_read_whole(ctx):
    c = ctx("python").ready()
    fs, _, _ = c.run("s = '%s'\nlen(s)" % ("z" * (1 << 20)))
    assert results(fs) == [{"text/plain": str(1 << 20)}]


def test_bash_a_cell_of_a_megabyte_is_read_whole(ctx):
    c = ctx("bash").ready()
    _, out, _ = c.run("s='%s'\necho ${#s}" % ("z" * (1 << 20)), timeout=60)
    assert out == "%d\n" % (1 << 20)


def test_python_a_cell_closing_fd_3_ends_the_driver_cleanly(ctx):
    c = ctx("python").ready()
    c.send("import os\nos.close(3)")
    assert c.proc.wait(timeout=WAIT) == 1


def test_javascript_a_cell_writing_junk_to_fd_3_does_not_stop_the_driver(ctx):
    c = ctx("javascript").ready()
    fs, _, _ = c.run("try { require('fs').writeSync(3, 'junk, not a frame\\n'); } catch (e) {}")
    assert fs[-1] == {"t": "done"}
    fs, _, _ = c.run("2 + 2")
    assert results(fs) == [{"text/plain": "4"}]


def test_python_a_huge_exception_stays_within_the_error_frames_bound(ctx):
    c = ctx("python").ready()
    fs, _, _ = c.run("def f(n):\n    return f(n + 1) if n < 50 else 1 / 0\n"
                     "try:\n    f(0)\nexcept Exception:\n    raise ValueError('\\x01' * 10**6)")
    (e,) = errors(fs)
    assert e["ename"] == "ValueError" and e["evalue"].startswith("\x01")
    assert all(len(l) < 64 * 1024 for l in c.lines())


def test_javascript_a_huge_error_stays_within_the_error_frames_bound(ctx):
    c = ctx("javascript").ready()
    fs, _, _ = c.run("throw new RangeError('\\x01'.repeat(1e6))")
    (e,) = errors(fs)
    assert e["ename"] == "RangeError" and e["evalue"].startswith("\x01")
    assert all(len(l) < 64 * 1024 for l in c.lines())


STDIN_CELL = {
    "python": "import sys\nlen(sys.stdin.read())",
    "javascript": "new Promise(r => { let n = 0; process.stdin.on('data', d => n += d.length)"
                  ".on('end', () => r(n)); })",
    "bash": "n=$(cat | wc -c); echo $n",
}


@pytest.mark.parametrize("lang", ["python", "javascript", "bash"])
def test_a_driver_under_a_uid_that_does_not_own_its_pipes_reads_cells_and_its_stdin_is_empty(
        ctx, lang):
    # As in a sandbox: the daemon made the pipes, the driver runs as the sandbox's uid, so it
    # cannot reopen them through /proc/self/fd (node's way to move them: it keeps them then).
    if os.geteuid() != 0:
        pytest.skip("needs root to run the driver as another uid")
    c = ctx(lang, uid=65534).ready()
    fs, out, _ = c.run(STDIN_CELL[lang])
    assert results(fs) == [{"text/plain": "0"}] or out == "0\n"
    fs, _, _ = c.run({"python": "x = 1", "javascript": "var x = 1", "bash": "x=1"}[lang])
    assert errors(fs) == [] and fs[-1] == {"t": "done"}
