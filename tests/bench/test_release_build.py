"""CI guard for the bench's own build (tests/bench/run.sh without SH_BIN): the Release build
(-O3, where GCC's flow analysis sees more than at -O2) must compile with -Werror, or the one
benchmark command a newcomer runs fails before it measures anything.

    /usr/bin/python3 -m pytest -q tests/bench/test_release_build.py
"""
import os
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_release_build_of_the_daemon_compiles_with_werror():
    with tempfile.TemporaryDirectory(prefix="sh-release-") as b:
        p = subprocess.run(["cmake", "-S", REPO, "-B", b, "-DCMAKE_BUILD_TYPE=Release",
                            "-DSH_TESTS=OFF"], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        p = subprocess.run(["cmake", "--build", b, "-j%d" % (os.cpu_count() or 2), "--target",
                            "sandbox-host"], capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
        assert os.access(os.path.join(b, "sandbox-host"), os.X_OK)
