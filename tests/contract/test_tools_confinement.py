"""The tool unpacker holds hostile bytes (issue 10, item 1): a bundle is data. It can put files
under /tools/{sha}; it can never run code on the host, reach the network, the daemon's API or
another sandbox. These tests perform the attacks through the daemon and look for every trace
the attacker's code would leave. Also: non-ASCII entry names unpack byte for byte (a UTF-8
locale in the unpacker), and a bundle must be gzip-compressed (CONTRACT.md section 6,
issue 10 item 16).
"""
import io
import os
import shutil
import tarfile
import tempfile

import pytest

import shlib
from tools_lib import (GCONV_DIR, GCONV_MODULES, HELLO_SCRIPT, add_member, build_pwn_module,
                       make_bundle, make_pax_bundle, publish, resolve_ok)


@pytest.fixture
def marker_dir():
    """A host directory anyone may write to: the attacker's code would leave its mark here if
    it could reach the host's file system at all."""
    d = tempfile.mkdtemp(prefix="sh-ct-marker-")
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def installed(daemon, sha):
    return daemon.root / "tools" / sha


def tree_names(top):
    out = set()
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            out.add(os.path.relpath(os.path.join(dirpath, n), top))
    return out


UNICODE_NAME = "share/donn\u00e9es-\u2603.txt"


@pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc to build the hostile module")
def test_gconv_module_in_bundle_never_runs(daemon, store, sb, marker_dir, tmp_path):
    """The attack of issue 10 item 1: a bundle ships glibc's iconv configuration and a module
    at the system path; a non-ASCII entry name makes libarchive call iconv. If the unpacker
    ever sees the bundle's files as its system paths, the module's constructor runs: it writes
    markers, calls the artifact store and uses the daemon's API to write into another
    sandbox. None of that may happen, and the bundle is installed as plain data."""
    host_marker = os.path.join(marker_dir, "host-marker")
    pwn = build_pwn_module(tmp_path, host_marker, store.port, daemon.port, sb.rid)
    bundle = make_pax_bundle([
        (GCONV_DIR + "/gconv-modules", GCONV_MODULES, 0o644),
        (GCONV_DIR + "/pwn.so", pwn, 0o755),
        ("bin/hello", HELLO_SCRIPT, 0o755),
        (UNICODE_NAME, b"unicode-data", 0o644),
    ])
    murl, sha, _ = publish(store, "/pwn", bundle)
    body = resolve_ok(daemon.client, {"pwn": murl})

    traces = []
    if "/ctor-ran" in store.hits:
        traces.append("it reached the network (the artifact store saw GET /ctor-ran)")
    if os.path.lexists(host_marker):
        traces.append("it wrote a host file")
    if sb.exists_v("pwned"):
        traces.append("it wrote into another sandbox through the daemon's API")
    for where in (daemon.root / "tools", daemon.root / "tools" / ".stage"):
        for n in tree_names(where) if where.is_dir() else ():
            if "ctor-ran" in n:
                traces.append("it left a marker at %s/%s" % (where, n))
    assert not traces, "the bundle's code ran: " + "; ".join(traces) + " (resolve: %r)" % body
    # A bundle is data: it installs, and its files are there as plain files.
    assert body["tools"].get("pwn", {}).get("sha") == sha, body
    d = installed(daemon, sha)
    assert (d / GCONV_DIR / "pwn.so").read_bytes() == pwn
    assert (d / GCONV_DIR / "gconv-modules").read_bytes() == GCONV_MODULES
    assert (d / UNICODE_NAME).read_bytes() == b"unicode-data"


def test_utf8_entry_names_unpack_exactly(daemon, store):
    """Non-ASCII names, in pax headers (UTF-8, converted by libarchive) and as raw GNU tar
    bytes, arrive with exactly the bytes the author wrote."""
    pax = make_pax_bundle([("bin/hello", HELLO_SCRIPT, 0o755),
                           (UNICODE_NAME, b"pax-data", 0o644),
                           ("\u65e5\u672c/\u8a9e.txt", b"cjk", 0o644)])
    gnu = make_bundle({"bin/hello": (HELLO_SCRIPT, 0o755), UNICODE_NAME: b"gnu-data"})
    murl_pax, sha_pax, _ = publish(store, "/utf8-pax", pax)
    murl_gnu, sha_gnu, _ = publish(store, "/utf8-gnu", gnu)
    body = resolve_ok(daemon.client, {"pax": murl_pax, "gnu": murl_gnu})
    assert body["refused"] == {}, body
    d = installed(daemon, sha_pax)
    assert UNICODE_NAME.split("/")[1].encode() in os.listdir(os.fsencode(d / "share"))
    assert (d / UNICODE_NAME).read_bytes() == b"pax-data"
    assert (d / "\u65e5\u672c" / "\u8a9e.txt").read_bytes() == b"cjk"
    assert (installed(daemon, sha_gnu) / UNICODE_NAME).read_bytes() == b"gnu-data"


@pytest.mark.skipif(not shlib.is_root(), reason="ownership checks need root")
def test_installed_tree_owned_by_root_throughout(daemon, store):
    """Every entry of an installed tree, links included, belongs to root: the unprivileged
    unpacker's uid owns nothing under /tools once the tree is in place."""
    bundle = make_bundle({"bin/hello": (HELLO_SCRIPT, 0o755), "a/b/c/d.txt": b"deep"},
                         [{"name": "a/link", "type": tarfile.SYMTYPE, "linkname": "b/c/d.txt"},
                          {"name": "a/hard", "type": tarfile.LNKTYPE, "linkname": "a/b/c/d.txt"},
                          {"name": "empty", "type": tarfile.DIRTYPE, "mode": 0o755}])
    murl, sha, _ = publish(store, "/owned", bundle)
    body = resolve_ok(daemon.client, {"owned": murl})
    assert body["tools"]["owned"]["sha"] == sha, body
    d = installed(daemon, sha)
    seen = 0
    for dirpath, dirnames, filenames in os.walk(d):
        for n in [""] + dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, n))
            assert (st.st_uid, st.st_gid) == (0, 0), (dirpath, n, st.st_uid, st.st_gid)
            seen += 1
    assert seen >= 10, seen


def test_plain_tar_bundle_refused(daemon, store):
    """CONTRACT.md section 6: a bundle is a gzip-compressed tar. An uncompressed tar (which
    libarchive's gzip support would pass through) is refused, and nothing is installed."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        ti = tarfile.TarInfo("bin/hello")
        ti.size = len(HELLO_SCRIPT)
        ti.mode = 0o755
        tf.addfile(ti, io.BytesIO(HELLO_SCRIPT))
    murl, sha, _ = publish(store, "/plain-tar", buf.getvalue())
    body = resolve_ok(daemon.client, {"plain": murl})
    assert body["tools"] == {}, body
    reason = body["refused"]["plain"]
    assert "unsafe bundle" in reason and "gzip" in reason, reason
    assert not installed(daemon, sha).exists()


def test_every_entry_kind_unpacks_under_the_filter(daemon, store):
    """The unpacker's system call filter is an allow-list: every path libarchive takes for
    the entries a bundle may hold still works under it (a large file, an entry replaced by a
    later one of the same name, a hard link, links, an empty file, deep and long names, a
    directory entry after its contents)."""
    big = os.urandom(3 << 20)
    deep = "/".join("d%02d" % i for i in range(40)) + "/leaf"
    longname = "long/" + "n" * 200
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        def add(name, data=b"", mode=0o644, **kw):
            add_member(tf, name, data, mode, **kw)
        add("bin/hello", HELLO_SCRIPT, 0o755)
        add("data/big.bin", big)
        add("data/dup.txt", b"first")
        add("data/dup.txt", b"second")
        add("data/empty")
        add(deep, b"deep")
        add(longname, b"long")
        add("data/hard", type=tarfile.LNKTYPE, linkname="data/big.bin")
        add("data/soft", type=tarfile.SYMTYPE, linkname="../" + longname)
        add("data", type=tarfile.DIRTYPE, mode=0o700)
    murl, sha, _ = publish(store, "/kinds", buf.getvalue())
    body = resolve_ok(daemon.client, {"kinds": murl})
    assert body["tools"].get("kinds", {}).get("sha") == sha, body
    d = installed(daemon, sha)
    assert (d / "data" / "big.bin").read_bytes() == big
    assert (d / "data" / "dup.txt").read_bytes() == b"second"
    assert (d / "data" / "empty").read_bytes() == b""
    assert (d / deep).read_bytes() == b"deep"
    assert (d / longname).read_bytes() == b"long"
    assert os.stat(d / "data" / "hard").st_ino == os.stat(d / "data" / "big.bin").st_ino
    assert os.readlink(d / "data" / "soft") == "../" + longname
    assert (d / "data" / "soft").read_bytes() == b"long"
    assert stat_mode(d / "data") == 0o755  # normalised, also when the entry comes late


def stat_mode(p):
    return os.stat(p).st_mode & 0o7777
