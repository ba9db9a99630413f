"""Fixtures for the sandbox-host contract suite.

The daemon binary comes from $SH_BIN, default <repo>/build/sandbox-host. Each daemon gets
SANDBOX_HOST_LISTEN=127.0.0.1:0 and a fresh SANDBOX_HOST_ROOT, announces its port on stderr
("listening on http://ADDRESS:PORT"), and is stopped with SIGTERM by pid; a clean stop must
exit 0 (section 10 / the brief).

Run: python3 -m pytest tests/contract   (Debian's python3-pytest)
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import shlib  # noqa: E402


# Every test ends within this (pytest-timeout, SIGALRM: the test fails and its fixtures
# still tear down, so a hung daemon fails one test, not the run). A test that legitimately
# needs more says so with @pytest.mark.timeout(N); sizes are for the sanitizer build on a
# busy two-core machine.
TEST_TIMEOUT = 120


def _start(env=None, args=(), root=None, prefix=()):
    try:
        return shlib.Daemon(env=env, args=args, root=root, prefix=prefix)
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="module")
def daemon():
    """One daemon shared by the cheap tests of a module."""
    with shlib.running() as d:
        yield d


@pytest.fixture
def client(daemon):
    return daemon.client


def _fresh_sandbox(daemon):
    s = daemon.client.new_sandbox()
    s.ws = daemon.ws(s.rid)
    yield s
    try:
        s.delete()
    except Exception:
        pass


@pytest.fixture
def sb(daemon):
    """A fresh sandbox on the module daemon, deleted afterwards (best effort)."""
    yield from _fresh_sandbox(daemon)


@pytest.fixture
def sb2(daemon):
    """A second fresh sandbox (tests that need two at once)."""
    yield from _fresh_sandbox(daemon)


@pytest.fixture
def start_daemon():
    """Factory for fresh daemons (config, shutdown, capacity tests). At teardown each is
    closed (stopped by pid if still running, and everything it made removed, shlib.Daemon.
    close); tests that care about the exit code call d.stop() themselves."""
    started = []

    def start(env=None, args=(), root=None, prefix=()):
        d = _start(env=env, args=args, root=root, prefix=prefix)
        started.append(d)
        return d

    yield start
    for d in started:
        d.close()


@pytest.fixture
def store():
    """A local artifact store for /tools/resolve (tools_lib.ArtifactServer), stopped after."""
    import tools_lib
    s = tools_lib.ArtifactServer()
    yield s
    s.stop()


@pytest.fixture
def outside(tmp_path):
    """A host directory outside every workspace, with a secret in it."""
    o = tmp_path / "outside"
    o.mkdir()
    (o / "secret").write_bytes(b"HOST-SECRET-" + os.urandom(8).hex().encode())
    (o / "sub").mkdir()
    (o / "sub" / "deep").write_bytes(b"HOST-DEEP")
    return o


# ---- the OpenSandbox surface (OPENSANDBOX.md; tests/contract/test_os_*.py) ----

@pytest.fixture
def osc(daemon):
    """An OsClient (oslib) on the module daemon: every /v1 answer is checked against
    OPENSANDBOX.md section 1 and the YAML shapes before the test sees it."""
    import oslib
    return oslib.os_client(daemon)


@pytest.fixture
def sbx(osc):
    """A fresh /v1 sandbox created with the SDK's default body (its JSON), killed afterwards."""
    j = osc.create_ok()
    yield j
    osc.kill(j["id"])


@pytest.fixture(scope="module")
def keyd():
    """A daemon of the module with SANDBOX_HOST_API_KEY = oslib.TEST_API_KEY; a clean stop."""
    import oslib
    d = shlib.Daemon(env={"SANDBOX_HOST_API_KEY": oslib.TEST_API_KEY})
    yield d
    rc = d.stop()
    import shutil
    shutil.rmtree(d.root, ignore_errors=True)
    assert rc == 0, d.stderr_text()[-2000:]


@pytest.fixture
def kc(keyd):
    """An OsClient on keyd that sends the key."""
    import oslib
    return oslib.os_client(keyd, api_key=oslib.TEST_API_KEY)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes several seconds (heartbeats, fork bombs)")
    if not config.pluginmanager.hasplugin("timeout"):
        raise pytest.UsageError("the contract suite needs pytest-timeout (Debian "
                                "python3-pytest-timeout, installed by scripts/setup.sh)")


def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT))


@pytest.fixture(autouse=True)
def _every_daemon_removed(request):
    """Every daemon a test started is closed when the test ends, also when it failed
    (shlib.Daemon.close: stopped by pid, its leftovers and its state root removed); module
    fixtures close theirs, pytest_sessionfinish whatever is left. A daemon the test left
    running fails the test; so does one that exited 0 and left a cgroup or mount behind."""
    before = list(shlib.Daemon.started)
    yield
    running, errors = [], []
    for d in [d for d in shlib.Daemon.started if d not in before]:
        if d.proc.poll() is None:
            running.append(" ".join(d.args))
        try:
            d.close()
        except AssertionError as e:
            errors.append(str(e))
    assert not running, "the test left daemon(s) running: %r" % running
    assert not errors, "\n".join(errors)


def pytest_sessionfinish(session):
    for d in list(shlib.Daemon.started):
        d.close(check=False)
