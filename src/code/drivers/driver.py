# sandbox-host's code driver for Python (src/code/drivers/driver.py), run inside a sandbox as
#   python3 -c <this text> sandbox-host-code <cwd> <result_max>
# Cells come on fd 0 ("<decimal length>\n" then that many bytes of code), the cell's output goes
# to fds 1 and 2, frames go to fd 3, one JSON object a line (sh/codeframe.h): ready or fail once,
# then per cell zero or more result, at most one error, exactly one done.
# The cell's code runs in this very process: nothing it does is trusted, it can only break its
# own context. The cells' pipe is moved off fd 0 to a close-on-exec fd (/dev/null on fd 0), and
# fd 3 is made close-on-exec, so neither the cell's code reading stdin nor its children ever
# see them.
# SIGINT while a cell runs is a KeyboardInterrupt in it (the context lives on); between cells
# it is ignored. Any exception a cell lets out, SystemExit included (sys.exit() in a cell), is
# its error frame, as a notebook shows it; os._exit ends the context. Top-level await is not
# supported. A result's bundle is kept within result_max bytes of its frame's line: text/plain
# is cut when it alone passes it, the other types are left out biggest first, each said on the
# cell's stderr.
import ast
import base64
import builtins
import fcntl
import json
import linecache
import os
import signal
import sys
import types

FRAMES = 3
# An error frame's JSON line is kept under this, whatever result_max is (the daemon takes
# result_max + 64 KiB at most of any line).
ERROR_LINE_MAX = 60000
RESULT_MAX_DEFAULT = 8 << 20
REPRS = (
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
)


def clean(s):
    """Text any JSON decoder takes whole: no NUL, no lone surrogate."""
    if not isinstance(s, str):
        s = str(s)
    s = s.replace("\0", "\ufffd")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", "replace").decode("utf-8")
    return s


def frame_line(obj):
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def write_frame(obj):
    data = frame_line(obj)
    while data:
        try:
            n = os.write(FRAMES, data)
        except BlockingIOError:
            import select

            select.select([], [FRAMES], [])
            continue
        except OSError:
            # The daemon is gone or the cell closed fd 3: this context cannot report anymore.
            os._exit(1)
        data = data[n:]


def flush_output():
    for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            f.flush()
        except BaseException:
            pass


def read_exact(fd, n):
    parts = []
    while n > 0:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


def read_cell(fd):
    """The next cell's bytes, or None at the end of the pipe."""
    digits = b""
    while True:
        c = os.read(fd, 1)
        if not c:
            if digits:
                os._exit(2)  # the pipe ended inside a cell's header
            return None
        if c == b"\n":
            break
        if not c.isdigit() or len(digits) >= 20:
            os._exit(2)  # not the daemon's protocol: nothing sensible to do but end
        digits += c
    if not digits:
        os._exit(2)
    code = read_exact(fd, int(digits))
    if code is None:
        os._exit(2)
    return code


class Driver:
    def __init__(self, cells, result_max):
        self.cells = cells
        self.result_max = result_max
        self.count = 0
        # The cells' namespace is a module of its own named __main__ (pickle finds its classes
        # there), not this driver's globals.
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        self.ns = main.__dict__

    # ---- results -------------------------------------------------------------------------

    def bundle(self, value):
        data = {"text/plain": clean(repr(value))}
        if isinstance(value, type):
            return data  # a class's _repr_*_ are unbound functions, not its display
        for meth, mime in REPRS:
            f = getattr(value, meth, None)
            if not callable(f):
                continue
            try:
                v = f()
            except Exception:
                continue
            if isinstance(v, tuple) and len(v) == 2:
                v = v[0]  # (data, metadata)
            if v is None:
                continue
            if mime == "application/json":
                try:
                    v = v if isinstance(v, str) else json.dumps(v)
                except (TypeError, ValueError):
                    continue
            elif isinstance(v, (bytes, bytearray)):
                v = base64.b64encode(bytes(v)).decode("ascii")
            elif not isinstance(v, str):
                continue
            data[mime] = clean(v)
        return data

    def bounded(self, data):
        """The bundle within result_max bytes of its frame's line: text/plain kept (cut if it
        alone is too big), the other types added smallest first while they fit; what is
        dropped is said on stderr."""
        size = lambda k, v: len(frame_line({k: v})) - 3  # '"k":"v"' with its escapes
        budget = self.result_max - len(frame_line({"t": "result", "data": {}}))
        text = data.get("text/plain", "")
        if size("text/plain", text) > budget:
            note = "\n[... cut: over SANDBOX_HOST_CODE_RESULT_MAX]"
            lo, hi = 0, len(text)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if size("text/plain", text[:mid] + note) <= budget:
                    lo = mid
                else:
                    hi = mid - 1
            text = text[:lo] + note if size("text/plain", note) <= budget else ""
        out = {"text/plain": text}
        used = size("text/plain", text)
        others = sorted((size(k, v), k, v) for k, v in data.items() if k != "text/plain")
        for n, k, v in others:
            if used + n + 1 <= budget:
                out[k] = v
                used += n + 1
            else:
                sys.stderr.write(
                    "sandbox-host: the result's %s (%d bytes) is left out: over "
                    "SANDBOX_HOST_CODE_RESULT_MAX (%d bytes)\n" % (k, n, self.result_max)
                )
        return out

    def figures(self, results):
        """Figures matplotlib holds open, as PNG results, then closed (only where the cell's
        code imported pyplot: never imported here)."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            import io

            for num in plt.get_fignums():
                fig = plt.figure(num)
                buf = io.BytesIO()
                fig.savefig(buf, format="png", bbox_inches="tight")
                results.append(
                    {
                        "text/plain": clean(repr(fig)),
                        "image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                    }
                )
        except Exception as e:
            sys.stderr.write("sandbox-host: a figure could not be drawn: %r\n" % (e,))
        finally:
            try:
                plt.close("all")
            except Exception:
                pass

    # ---- errors --------------------------------------------------------------------------

    def error(self, e):
        import traceback

        tb = e.__traceback__
        # The driver's own frames (the text of python3 -c is "<string>") come first: the
        # traceback starts at the first frame of the cell's.
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>" and \
                tb.tb_frame.f_globals is not self.ns:
            tb = tb.tb_next
        try:
            lines = "".join(traceback.format_exception(type(e), e, tb)).splitlines()
        except Exception:
            lines = []
        try:
            evalue = str(e)
        except Exception:
            evalue = "<str() of the exception failed>"
        f = {
            "t": "error",
            "ename": clean(type(e).__name__)[:1000],
            "evalue": clean(evalue),
            "traceback": [clean(l) for l in lines],
        }
        # Within ERROR_LINE_MAX: the value cut, then the traceback's middle lines dropped.
        if len(frame_line(f)) > ERROR_LINE_MAX and len(f["evalue"]) > 8000:
            f["evalue"] = f["evalue"][:8000] + "[... cut]"
        while len(frame_line(f)) > ERROR_LINE_MAX and len(f["traceback"]) > 2:
            tbl = f["traceback"]
            half = len(tbl) // 2
            f["traceback"] = tbl[: half // 2] + ["[... lines left out]"] + tbl[half + half // 2 + 1:]
            if len(f["traceback"]) >= len(tbl):
                break
        if len(frame_line(f)) > ERROR_LINE_MAX:
            f["traceback"] = [l[:150] for l in f["traceback"][:40]]
            f["evalue"] = f["evalue"][:1000]
        return f

    # ---- a cell --------------------------------------------------------------------------

    def run(self, code):
        self.count += 1
        name = "<cell-%d>" % self.count
        results, err = [], None
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            try:
                src = code.decode("utf-8", "surrogateescape")
                # Tracebacks show the cell's lines, now and from the cells after it.
                linecache.cache[name] = (len(src), None, src.splitlines(True), name)
                tree = ast.parse(code, filename=name, mode="exec")
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                exec(compile(tree, name, "exec"), self.ns)
                if last is not None:
                    value = eval(compile(last, name, "eval"), self.ns)
                    if value is not None:
                        self.ns["_"] = value
                        results.append(self.bundle(value))
            except BaseException as e:
                err = self.error(e)
            try:
                self.figures(results)
            except BaseException:
                pass
        except BaseException as e:
            # An interrupt that came while the error was being written down.
            err = err or self.error(e)
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        results = [self.bounded(data) for data in results]
        flush_output()
        for data in results:
            write_frame({"t": "result", "data": data})
        if err is not None:
            write_frame(err)
        write_frame({"t": "done"})

    def serve(self):
        while True:
            code = read_cell(self.cells)
            if code is None:
                return
            self.run(code)


def main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt between cells is nothing
    try:
        os.set_inheritable(FRAMES, False)
    except OSError:
        os._exit(1)  # no frames channel: nobody to tell
    args = sys.argv[1:]
    cwd = args[1] if len(args) > 1 else ""
    try:
        result_max = int(args[2]) if len(args) > 2 else RESULT_MAX_DEFAULT
        if result_max <= 0:
            raise ValueError
    except ValueError:
        write_frame({"t": "fail", "msg": "bad result_max %r" % clean(args[2])[:100]})
        os._exit(1)
    # The cells' pipe off fd 0, close-on-exec; /dev/null in its place.
    try:
        cells = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 64)
        nul = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nul, 0)
        os.close(nul)
    except OSError as e:
        write_frame({"t": "fail", "msg": "stdin: %s" % clean(e.strerror or e)})
        os._exit(1)
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as e:
            write_frame({"t": "fail", "msg": "cwd '%s': %s" % (clean(cwd)[:1000], clean(e.strerror))})
            os._exit(1)
    sys.argv = [""]
    d = Driver(cells, result_max)
    write_frame({"t": "ready"})
    d.serve()
    flush_output()
    os._exit(0)


main()
