"""Issue 25's shared helpers (test_os_volumes.py, test_os_volumes_attacks.py): a daemon with the
volume settings pointing into the test's own temporary directories, volume definitions as the
YAML's `Volume` (`host`, `pvc`, `ossfs`), and a per-test `Vols` that creates /v1 sandboxes with
volumes, makes host directories and named-volume names, and removes every one of them (and
every sandbox) when the test ends.

The daemon's settings (OPENSANDBOX.md sections 2 `volumes` and 5):
- SANDBOX_HOST_VOLUME_ROOT: `{vroot}/{claimName}` is a named volume (default
  `{state root}/volumes`);
- SANDBOX_HOST_VOLUME_HOST_ALLOW: colon-separated prefixes a `host.path` must lie under (unset:
  host volumes are `400 NOT_SUPPORTED` naming the setting);
- SANDBOX_HOST_VOLUME_MAX: volumes per sandbox (16).

Python stdlib + oslib/sselib.
"""
import os
import shutil
from pathlib import Path

import pytest

import oslib
import shlib
from oslib import expect
from sselib import run

CALL = 10.0
VOLUME_MAX = 16
ALLOW = "SANDBOX_HOST_VOLUME_HOST_ALLOW"
VROOT = "SANDBOX_HOST_VOLUME_ROOT"

needs_root = pytest.mark.skipif(not shlib.is_root(),
                                reason="sandboxes and mounts need root (CI is root)")


# ---- volume definitions (the YAML's Volume) ------------------------------------------------

def host(name, path, mount, read_only=None, sub=None):
    v = {"name": name, "host": {"path": str(path)}, "mountPath": mount}
    if read_only is not None:
        v["readOnly"] = read_only
    if sub is not None:
        v["subPath"] = sub
    return v


def pvc(name, claim, mount, read_only=None, sub=None, **fields):
    p = {"claimName": claim}
    p.update(fields)
    v = {"name": name, "pvc": p, "mountPath": mount}
    if read_only is not None:
        v["readOnly"] = read_only
    if sub is not None:
        v["subPath"] = sub
    return v


OSSFS = {"bucket": "bucket-1", "endpoint": "oss-cn-hangzhou.aliyuncs.com",
         "accessKeyId": "AKID-test", "accessKeySecret": "not-a-real-secret"}


def body(vols):
    return dict(oslib.SDK_DEFAULT_CREATE, volumes=list(vols))


# ---- inside a sandbox ----------------------------------------------------------------------

def sh(osc, sid, command):
    """stdout lines of a command that must succeed (its stderr in the failure)."""
    st = run(osc, sid, command)
    if st.final is None or st.final["type"] != "execution_complete":
        raise AssertionError("%r failed: %r; stdout %r; stderr %r" % (
            command, st.final, st.texts("stdout"), st.texts("stderr")))
    return st.texts("stdout")


def attempt(osc, sid, command):
    """(exit code, stdout and stderr lines) of a command that may fail."""
    st = run(osc, sid, "{ " + command + "\n} 2>&1; echo \"rc=$?\"")
    st.assert_complete()
    out = st.texts("stdout")
    assert out and out[-1].startswith("rc="), out
    return int(out[-1][3:]), out[:-1]


def read_only_refuses(osc, sid, command):
    """`command` (a write) fails inside, with EROFS's message."""
    rc, out = attempt(osc, sid, command)
    assert rc != 0 and any("Read-only file system" in ln for ln in out), \
        "%r on a read-only volume: rc %r, %r" % (command, rc, out)


# ---- the daemon and a test's volumes -------------------------------------------------------

def daemon_env(vroot, allow, extra=None):
    env = {VROOT: str(vroot)}
    if allow is not None:
        env[ALLOW] = ":".join(str(a) for a in allow) if isinstance(allow, (list, tuple)) \
            else str(allow)
    env.update(extra or {})
    return env


def module_dirs(tmp_path_factory):
    """The module's volume root and allowed prefix (made before the daemon starts)."""
    base = tmp_path_factory.mktemp("vol")
    vroot, allowed = base / "volumes", base / "allowed"
    vroot.mkdir()
    allowed.mkdir()
    return base, vroot, allowed


class Vols:
    """One test's sandboxes and directories on a volume daemon; .close() removes them all."""

    def __init__(self, daemon, vroot, allowed, base):
        self.d = daemon
        self.osc = oslib.os_client(daemon)
        self.vroot = Path(vroot)
        self.allowed = Path(allowed)
        self.base = Path(base)
        self.sids = []
        self.paths = []

    # -- creates ----------------------------------------------------------------------
    def create(self, vols, **kw):
        r = self.osc.create(body(vols), **kw)
        if r.status == 202:
            self.sids.append(r.json()["id"])
        return r

    def sandbox(self, *vols):
        """A Running /v1 sandbox with `vols`; its id."""
        r = self.create(vols)
        expect(r, 202)
        j = r.json()
        assert j["status"]["state"] == "Running", j
        return j["id"]

    def refused(self, vols, code="INVALID_REQUEST", names=None):
        """The create is 400 `code` (one of `code` when a tuple), its message naming each of
        `names`; no sandbox is left. Returns the error body."""
        n = self.count()
        r = self.create(vols, timeout=CALL)
        codes = code if isinstance(code, tuple) else (code,)
        b = oslib.expect_400(r, codes)
        for name in names or ():
            assert name in b["message"], "the message must name %r: %r" % (name, b)
        assert self.count() == n, "a refused create left a sandbox"
        return b

    def count(self):
        r = self.osc.get("/v1/sandboxes?pageSize=200", timeout=CALL)
        return expect(r, 200)["pagination"]["totalItems"]

    def kill(self, sid):
        expect(self.osc.delete("/v1/sandboxes/" + oslib.q(sid), timeout=CALL), 204)
        self.sids.remove(sid)

    # -- host side --------------------------------------------------------------------
    def hostdir(self, marker=None, mode=0o777, parent=None):
        """A new directory under the allowed prefix (or `parent`), mode `mode` (chmod, not
        masked), with marker.txt holding `marker` when given."""
        p = Path(parent or self.allowed) / oslib.uniq("h")
        p.mkdir()
        os.chmod(p, mode)
        if marker is not None:
            (p / "marker.txt").write_text(marker)
            os.chmod(p / "marker.txt", 0o666)
        self.paths.append(p)
        return p

    def outside(self, marker):
        """A directory outside every allowed prefix and the volume root, with marker.txt and
        sub/marker.txt holding `marker`."""
        p = self.base / oslib.uniq("out")
        p.mkdir()
        (p / "sub").mkdir()
        for f in (p / "marker.txt", p / "sub" / "marker.txt"):
            f.write_text(marker)
            os.chmod(f, 0o644)
        for x in (p, p / "sub"):
            os.chmod(x, 0o755)
        self.paths.append(p)
        return p

    def claim(self):
        """A fresh claimName (nothing at {vroot}/{claim} yet); removed at the end."""
        c = oslib.uniq("c")
        self.paths.append(self.vroot / c)
        return c

    def seed(self, claim, marker, mode=0o777):
        """{vroot}/{claim} made by the host beforehand, with marker.txt."""
        p = self.vroot / claim
        p.mkdir()
        os.chmod(p, mode)
        (p / "marker.txt").write_text(marker)
        os.chmod(p / "marker.txt", 0o666)
        if p not in self.paths:
            self.paths.append(p)
        return p

    def track(self, path):
        self.paths.append(Path(path))
        return Path(path)

    def close(self):
        for sid in list(self.sids):
            self.osc.kill(sid)
        self.sids = []
        for p in self.paths:
            if os.path.islink(p) or (os.path.lexists(p) and not os.path.isdir(p)):
                os.unlink(p)
            elif os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)


def mount_options(osc, sid, mount):
    """The mount options (per-mount field of /proc/self/mountinfo) of the mount at `mount`
    inside the sandbox, as a set, or None when nothing is mounted there."""
    lines = sh(osc, sid, "cat /proc/self/mountinfo")
    found = None
    for ln in lines:
        f = ln.split()
        if len(f) > 5 and shlib._unescape(f[4]) == mount:
            found = set(f[5].split(","))
    return found


# ---- fixtures (imported by the test modules) -----------------------------------------------

@pytest.fixture(scope="module")
def vdirs(tmp_path_factory):
    """(base, volume root, allowed prefix) of the module's daemon."""
    return module_dirs(tmp_path_factory)


@pytest.fixture(scope="module")
def vold(vdirs):
    """The module's daemon: SANDBOX_HOST_VOLUME_ROOT and _HOST_ALLOW in the module's own
    temporary directory; a clean stop."""
    base, vroot, allowed = vdirs
    with shlib.running(env=daemon_env(vroot, [allowed])) as d:
        yield d


@pytest.fixture
def vols(vold, vdirs):
    base, vroot, allowed = vdirs
    v = Vols(vold, vroot, allowed, base)
    yield v
    v.close()
