"""The bench's C client decodes what it measures (issue 15): its vectorised base64 decoder must
agree with its table decoder and with an encoder on every length and refuse every bad byte at
every place, or the stream figure would count bytes it did not check.

    /usr/bin/python3 -m pytest -q tests/bench/test_benchtool.py
"""
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def test_benchtool_base64_decoders_agree_and_refuse_every_bad_byte():
    with tempfile.TemporaryDirectory(prefix="sh-benchtool-") as d:
        tool = os.path.join(d, "benchtool")
        p = subprocess.run(["cc", "-O2", "-std=gnu17", "-Wall", "-Wextra", "-Werror", "-o", tool,
                            os.path.join(HERE, "benchtool.c")], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr[-3000:]
        p = subprocess.run([tool, "b64check"], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "cases agree" in p.stdout, p.stdout
