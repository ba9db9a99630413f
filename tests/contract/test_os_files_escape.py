"""OPENSANDBOX.md section 3.2, the security rule: no link inside a sandbox, however it changes
during a call, makes a file route reach a host file. The links are planted by a sandbox process
(in its /tmp and /workspace) and aim at /, /etc, ../.., host paths and /proc/self/root; a
sandbox process swaps a directory and a link in a loop while the routes are hammered through
it. Host side: a directory `outside` with a secret, which must never be read, written or
removed. Also the multipart edge cases of POST /files/upload (nothing left behind, old content
kept), a 100,000-entry directory, and hostile images: an /etc/passwd that is huge, binary,
without a newline, of 200,000 lines, a link to /proc or to a host file, an /etc/group that is
a FIFO (the parser itself: tests/unit/test_os_passwd.c)."""
import json
import os
import socket
import subprocess
import threading
import time

import pytest

import oslib
import shlib
from oslib import expect
from sselib import stdout_of
from test_os_files import download, info, multipart, put, upload

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CALL = 10.0
SECRET = b"HOST-SECRET-os-files"


@pytest.fixture
def host(outside):
    (outside / "secret").write_bytes(SECRET)
    before = shlib.snapshot_tree(outside)
    passwd = open("/etc/passwd", "rb").read()
    yield outside
    assert shlib.snapshot_tree(outside) == before, "a host directory changed"
    assert open("/etc/passwd", "rb").read() == passwd


def plant(osc, sid, O):
    """Links a hostile sandbox process would plant, in its /tmp and /workspace."""
    rel = os.path.relpath(str(O), "/")
    cmds = []
    for d in ("/tmp/e", "/workspace/e"):
        cmds += ["mkdir -p %s" % d,
                 "ln -s %s %s/abs" % (O, d), "ln -s %s/secret %s/absfile" % (O, d),
                 "ln -s / %s/root" % d, "ln -s /etc %s/etc" % d,
                 "ln -s ../../../../../../../.. %s/up" % d,
                 "ln -s /proc/self/root %s/pself" % d, "ln -s /proc/1/root %s/p1" % d,
                 "ln -s ../../../../../../%s %s/rel" % (rel, d)]
    stdout_of(osc, sid, " && ".join(cmds))
    paths = []
    for d in ("/tmp/e", "/workspace/e"):
        paths += ["%s/abs/secret" % d, "%s/absfile" % d, "%s/root%s/secret" % (d, O),
                  "%s/up/%s/secret" % (d, rel), "%s/pself%s/secret" % (d, O),
                  "%s/p1%s/secret" % (d, O), "%s/rel/secret" % d]
    return paths


def test_links_planted_by_the_sandbox_never_reach_a_host_file(osc, sbx, host):
    sid = sbx["id"]
    O = str(host)
    paths = plant(osc, sid, O)

    def reads():
        for p in paths:
            r = download(osc, sid, p)
            assert SECRET not in r.body, (p, r)
            r = info(osc, sid, p)
            assert r.status in (200, 400, 404), (p, r)
            r = osc.execd(sid, "GET", "/files/search?path=%s" % oslib.q(p.rsplit("/", 1)[0]),
                          timeout=CALL)
            assert SECRET not in r.body, (p, r)

    reads()
    for p in paths:
        r = download(osc, sid, p)
        assert r.status in (400, 404), (p, r)  # nothing there inside the sandbox yet
    # writes through the links land inside the sandbox (or nowhere), never on the host (the
    # fixture compares the host directory before and after)
    for i, p in enumerate(paths):
        r = upload(osc, sid, [({"path": p}, b"pwned")])
        assert r.status in (200, 400, 404), (p, r)
        r = osc.execd(sid, "POST", "/files/replace", body={p: {"old": "pwn", "new": "own"}},
                      timeout=CALL)
        assert r.status in (200, 400, 404), (p, r)
        r = osc.execd(sid, "POST", "/files/mv", body=[{"src": p, "dest": "/tmp/stolen%d" % i}],
                      timeout=CALL)
        assert r.status in (200, 400, 404), (p, r)
        r = osc.execd(sid, "DELETE", "/files?path=" + oslib.q(p), timeout=CALL)
        assert r.status in (200, 400), (p, r)
    reads()
    # recursive deletes through the links: each aims at `outside` if it escaped
    for p in paths:
        r = osc.execd(sid, "DELETE", "/directories?path=" + oslib.q(p.rsplit("/", 1)[0]),
                      timeout=CALL)
        assert r.status in (200, 400), (p, r)


def test_the_image_etc_passwd_through_links_is_the_image_never_the_daemons_view(osc, sbx, host):
    """/etc of the default image is the host's own, read-only: through every link it reads as
    the same bytes the sandbox's `cat` sees, and never becomes writable."""
    sid = sbx["id"]
    plant(osc, sid, str(host))
    want = "\n".join(stdout_of(osc, sid, "cat /etc/passwd"))
    for p in ("/tmp/e/etc/passwd", "/tmp/e/root/etc/passwd", "/tmp/e/up/etc/passwd",
              "/workspace/e/etc/passwd"):
        r = download(osc, sid, p)
        assert r.status == 200 and r.body.decode().rstrip("\n") == want, p
        expect(upload(osc, sid, [({"path": p}, b"x")]), 400)


def test_proc_magic_links_are_refused(osc, sbx, host):
    sid = sbx["id"]
    plant(osc, sid, str(host))
    for p in ("/tmp/e/pself/etc/passwd", "/tmp/e/p1/etc/passwd", "/proc/1/root/etc/passwd",
              "/proc/self/root/etc/passwd"):
        r = download(osc, sid, p)
        assert r.status in (400, 404), (p, r)


def test_a_swapping_loop_never_redirects_any_route_outside(osc, sbx, host):
    """A sandbox process swaps /tmp/s between a directory and a link to the host path, as fast
    as it can, while every route goes through it for hundreds of rounds."""
    sid = sbx["id"]
    O = str(host)
    stdout_of(osc, sid, "mkdir -p /tmp/sw/real%s && echo inside > /tmp/sw/real%s/secret" % (O, O))
    loop = ("cd /tmp/sw && while [ ! -e stop ]; do ln -sfn real s; ln -sfn %s s; "
            "ln -sfn / s; ln -sfn ../../../.. s; done" % O)
    bg = osc.execd(sid, "POST", "/command", body={"command": loop, "background": True},
                   timeout=CALL)
    assert bg.status == 200
    try:
        for i in range(300):
            p = "/tmp/sw/s%s/secret" % O
            r = download(osc, sid, p)
            assert SECRET not in r.body, r
            r = info(osc, sid, p)
            assert r.status in (200, 400, 404), r
            r = upload(osc, sid, [({"path": "/tmp/sw/s%s/new%d" % (O, i)}, b"w")])
            assert r.status in (200, 400, 404, 503), r
            r = osc.execd(sid, "DELETE", "/files?path=" + oslib.q(p), timeout=CALL)
            assert r.status in (200, 400, 503), r
            r = osc.execd(sid, "POST", "/files/replace",
                          body={p: {"old": "HOST", "new": "PWND"}}, timeout=CALL)
            assert r.status in (200, 400, 404, 503), r
            r = osc.execd(sid, "GET", "/directories/list?path=/tmp/sw/s&depth=3", timeout=CALL)
            assert SECRET not in r.body
            r = osc.execd(sid, "POST", "/files/permissions",
                          body={"/tmp/sw/s%s" % O: {"mode": 777}}, timeout=CALL)
            assert r.status in (200, 400, 404, 503), r
    finally:
        stdout_of(osc, sid, "touch /tmp/sw/stop")
    assert oct(os.stat(O).st_mode & 0o777) != oct(0o777)


# ---- multipart edge cases ----------------------------------------------------------------------

B = "sh-test-boundary"
CT = {"Content-Type": "multipart/form-data; boundary=" + B}


def raw_upload(osc, sid, body, headers=CT):
    return osc.execd(sid, "POST", "/files/upload", body=body, timeout=CALL, headers=headers)


def leftovers(osc, sid, d):
    return stdout_of(osc, sid, "ls -A %s" % d)


@pytest.fixture
def old(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/mp/f", b"old content")
    return sid


def assert_old_kept(osc, sid):
    assert stdout_of(osc, sid, "cat /tmp/mp/f") == ["old content"]
    assert leftovers(osc, sid, "/tmp/mp") == ["f"], "nothing but the file is left behind"


def test_a_metadata_part_without_its_file_is_400_and_nothing_changes(osc, old):
    expect(raw_upload(osc, old, multipart([({"path": "/tmp/mp/f"}, None)])), 400)
    assert_old_kept(osc, old)


def test_a_file_part_before_its_metadata_is_400(osc, old):
    body = (b"--" + B.encode() + b'\r\nContent-Disposition: form-data; name="file"; '
            b'filename="f"\r\n\r\nnew\r\n' + b"--" + B.encode() + b"\r\n"
            b'Content-Disposition: form-data; name="metadata"\r\n\r\n{"path": "/tmp/mp/f"}\r\n'
            b"--" + B.encode() + b"--\r\n")
    expect(raw_upload(osc, old, body), 400)
    assert_old_kept(osc, old)


def test_a_huge_metadata_part_is_400(osc, old):
    meta = json.dumps({"path": "/tmp/mp/f", "pad": "x" * (200 << 10)}).encode()
    expect(raw_upload(osc, old, multipart([(meta, b"new")])), 400)
    assert_old_kept(osc, old)


def test_metadata_that_is_not_json_is_400_invalid_file_metadata(osc, old):
    expect(raw_upload(osc, old, multipart([(b"not json", b"new")])), 400, "INVALID_FILE_METADATA")
    assert_old_kept(osc, old)


def test_a_part_name_with_quotes_and_crlf_is_400(osc, old):
    body = (b"--" + B.encode() + b'\r\nContent-Disposition: form-data; name="meta\r\n'
            b'data"; filename="x\"y"\r\n\r\n{"path": "/tmp/mp/f"}\r\n--' + B.encode() + b"--\r\n")
    expect(raw_upload(osc, old, body), 400)
    assert_old_kept(osc, old)


def test_a_quoted_filename_with_an_escaped_quote_is_accepted(osc, old):
    body = (b"--" + B.encode() + b'\r\nContent-Disposition: form-data; name="metadata"; '
            b'filename="a\\"b"\r\n\r\n{"path": "/tmp/mp/g"}\r\n'
            b"--" + B.encode() + b'\r\nContent-Disposition: form-data; name="file"; '
            b'filename="a\\"b"\r\n\r\nG\r\n--' + B.encode() + b"--\r\n")
    expect(raw_upload(osc, old, body), 200)
    assert stdout_of(osc, old, "cat /tmp/mp/g") == ["G"]


def test_not_multipart_is_400(osc, old):
    expect(raw_upload(osc, old, b"{}", headers={"Content-Type": "application/json"}), 400)
    expect(raw_upload(osc, old, b"garbage without a delimiter"), 400)
    assert_old_kept(osc, old)


def test_a_cut_body_leaves_nothing_behind_and_keeps_the_old_content(daemon, osc, old):
    body = multipart([({"path": "/tmp/mp/f"}, b"N" * (1 << 20))])
    head = ("POST /v1/sandboxes/%s/proxy/44772/files/upload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n"
            % (old, B, len(body))).encode()
    shlib.raw_exchange(daemon.port, head + body[:len(body) // 2], read_timeout=1.0,
                       pre_close_wait=0.5)
    # the daemon notices the closed connection and drops the unnamed file
    deadline = time.monotonic() + CALL
    while True:
        try:
            assert_old_kept(osc, old)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_a_body_over_upload_max_is_413_before_it_is_read(daemon, osc, sbx):
    head = ("POST /v1/sandboxes/%s/proxy/44772/files/upload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n"
            % (sbx["id"], B, 1 << 40)).encode()
    raw = shlib.raw_exchange(daemon.port, head + b"--" + B.encode(), read_timeout=CALL)
    assert raw.startswith(b"HTTP/1.1 413"), raw[:300]


# ---- big trees ---------------------------------------------------------------------------------

def test_a_100000_entry_directory_is_listed_and_searched(osc, sbx):
    sid = sbx["id"]
    stdout_of(osc, sid, "mkdir -p /tmp/big && cd /tmp/big && seq -f 'f%06g' 1 100000 | "
              "xargs touch && echo done")
    r = osc.execd(sid, "GET", "/directories/list?path=/tmp/big", timeout=60)
    j = expect(r, 200)
    assert len(j) == 100000 and j[0]["path"] == "/tmp/big/f000001"
    r = osc.execd(sid, "GET", "/files/search?path=/tmp/big&pattern=f09999*", timeout=60)
    assert len(expect(r, 200)) == 10
    expect(osc.execd(sid, "DELETE", "/directories?path=/tmp/big", timeout=60), 200)
    assert stdout_of(osc, sid, "test -e /tmp/big || echo gone") == ["gone"]


def test_a_tree_deeper_than_the_walks_bound_is_removed_whole_and_its_links_never_followed(
        osc, sbx, host):
    sid = sbx["id"]
    O = str(host)
    stdout_of(osc, sid, "cd /tmp && mkdir deep && cd deep && for i in $(seq 100); do "
              "mkdir d && ln -s %s l && ln -s / r && touch f && cd d; done && echo ok" % O)
    expect(osc.execd(sid, "DELETE", "/directories?path=/tmp/deep", timeout=60), 200)
    assert stdout_of(osc, sid, "test -e /tmp/deep || echo gone") == ["gone"]
    assert stdout_of(osc, sid, "test -d /usr/bin && echo kept") == ["kept"]


# ---- a hostile image's /etc/passwd and /etc/group ------------------------------------------

BUSYBOX = "/bin/busybox"


def hostile_image(path, passwd, group=None):
    import shutil
    (path / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, path / "bin" / "busybox")
    os.symlink("busybox", path / "bin" / "sh")
    (path / "etc").mkdir()
    if isinstance(passwd, bytes):
        (path / "etc" / "passwd").write_bytes(passwd)
    if group == "fifo":
        os.mkfifo(path / "etc" / "group")
    elif isinstance(group, bytes):
        (path / "etc" / "group").write_bytes(group)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    if not os.path.exists(BUSYBOX):
        pytest.skip("busybox-static is not installed")
    images = tmp_path_factory.mktemp("images")
    big = os.urandom(3 << 20)  # huge, binary, no newline
    hostile_image(images / "binary", big.replace(b"\n", b"x"), group="fifo")
    lines = b"".join(b"u%d:x:%d:1::/:\n" % (i, 1000 + i) for i in range(200000))
    hostile_image(images / "many", b"root:x:0:0::/:\n" + lines + b"late:x:7:7::/:",
                  group=b"\x00\xff:x:5\nroot:x:0:\nnogroup:x:65534:")
    (images / "linked").mkdir()
    hostile_image(images / "linked" / "img", None)
    os.symlink("/proc/self/environ", images / "linked" / "img" / "etc" / "passwd")
    os.symlink("../../../../../../etc/shadow", images / "linked" / "img" / "etc" / "group")
    os.rename(images / "linked" / "img", images / "symlinked")
    # a world-readable file below a directory of root's that nobody else may search (as the
    # host's /etc/ssl/private in the default image), beside one that may be searched only
    hostile_image(images / "locked", b"root:x:0:0::/:\n")
    # ... and one that everyone may read but nobody else may search (0744): its names may be
    # listed by a process of the sandbox, what is below it never reached
    for d, mode in (("closed", 0o700), ("searchable", 0o711), ("readable", 0o744)):
        (images / "locked" / d / "sub").mkdir(parents=True)
        (images / "locked" / d / "world.txt").write_bytes(SECRET)
        (images / "locked" / d / "sub" / "deep.txt").write_bytes(SECRET)
        os.chmod(images / "locked" / d, mode)
    (images / "locked" / "acl").mkdir()  # the ACL tests' trees, made below it at run time
    d = shlib.Daemon(env={"SANDBOX_HOST_IMAGES": str(images)})
    d.images = images
    yield d
    d.stop()


BB_ENTRY = ["/bin/busybox", "sleep", "100000"]


def hostile_sandbox(d, name):
    osc = oslib.os_client(d)
    j = osc.create_ok(image={"uri": name}, entrypoint=BB_ENTRY)
    return osc, j["id"]


def test_a_huge_binary_passwd_and_a_fifo_group_are_read_safely(hostile):
    osc, sid = hostile_sandbox(hostile, "binary")
    try:
        put(osc, sid, "/tmp/f", b"x")
        j = expect(info(osc, sid, "/tmp/f", "/bin/busybox"), 200)
        # no names in the image: the numbers, and the FIFO /etc/group never blocks the answer
        assert j["/bin/busybox"]["owner"] == "0" and j["/bin/busybox"]["group"] == "0", j
        r = osc.execd(sid, "POST", "/files/permissions",
                      body={"/tmp/f": {"mode": 600, "owner": "root"}}, timeout=CALL)
        expect(r, 400)
        expect(osc.execd(sid, "POST", "/files/permissions",
                         body={"/tmp/f": {"mode": 600, "owner": "0", "group": "0"}},
                         timeout=CALL), 200)
    finally:
        osc.kill(sid)


def test_a_passwd_of_200000_lines_keeps_its_first_entries_and_skips_bad_lines(hostile):
    osc, sid = hostile_sandbox(hostile, "many")
    try:
        put(osc, sid, "/tmp/f", b"x")
        expect(osc.execd(sid, "POST", "/files/permissions",
                         body={"/tmp/f": {"mode": 600, "owner": "u5", "group": "nogroup"}},
                         timeout=CALL), 200)
        j = expect(info(osc, sid, "/tmp/f"), 200)["/tmp/f"]
        assert (j["owner"], j["group"]) == ("u5", "nogroup"), j
        # past the bounds (1 MiB, 16384 entries): not a name any more
        expect(osc.execd(sid, "POST", "/files/permissions",
                         body={"/tmp/f": {"mode": 600, "owner": "late"}}, timeout=CALL), 400)
    finally:
        osc.kill(sid)


def test_an_images_passwd_linked_to_proc_or_host_files_is_never_read(hostile):
    osc, sid = hostile_sandbox(hostile, "symlinked")
    try:
        j = expect(info(osc, sid, "/bin/busybox"), 200)
        assert j["/bin/busybox"]["owner"] == "0", j
        expect(osc.execd(sid, "POST", "/files/permissions",
                         body={"/bin": {"mode": 755, "owner": "root"}}, timeout=CALL), 400)
    finally:
        osc.kill(sid)


def assert_the_sandbox_cannot_read(osc, sid, *paths):
    """What the file routes must refuse, the sandbox's own processes cannot read either."""
    r = osc.execd(sid, "POST", "/command", body={"command": "cat " + " ".join(paths)},
                  timeout=CALL)
    assert SECRET not in r.body, r


def test_a_file_below_a_directory_the_sandbox_may_not_search_is_never_reached(hostile):
    osc, sid = hostile_sandbox(hostile, "locked")
    try:
        # the sandbox itself cannot read it...
        assert_the_sandbox_cannot_read(osc, sid, "/closed/world.txt")
        # ...nor through the file routes, by its path or through links it plants
        stdout_of(osc, sid, "ln -s /closed/world.txt /tmp/lf && ln -s /closed /tmp/ld && "
                            "ln -s ../closed/sub /tmp/lsub")
        for p in ("/closed/world.txt", "/closed/sub/deep.txt", "/tmp/lf", "/tmp/ld/world.txt",
                  "/tmp/lsub/deep.txt", "/closed/../closed/world.txt"):
            r = download(osc, sid, p)
            assert r.status == 400 and SECRET not in r.body, (p, r)
            r = info(osc, sid, p)
            # info shows a link itself (never followed); anything below the directory is 400
            assert r.status == (200 if p == "/tmp/lf" else 400), (p, r)
        for route in ("/directories/list?path=", "/files/search?pattern=*&path="):
            for p in ("/closed", "/tmp/ld", "/closed/sub"):
                r = osc.execd(sid, "GET", route + oslib.q(p), timeout=CALL)
                assert r.status == 400 and b"world.txt" not in r.body, (route, p, r)
        # a listing from above does not descend into it
        r = osc.execd(sid, "GET", "/files/search?pattern=deep.txt&path=/", timeout=CALL)
        assert b"/closed/" not in expect_body(r), r
    finally:
        osc.kill(sid)


def test_a_directory_the_sandbox_may_search_but_not_read_gives_its_files(hostile):
    osc, sid = hostile_sandbox(hostile, "locked")
    try:
        r = download(osc, sid, "/searchable/sub/deep.txt")
        assert r.status == 200 and r.body == SECRET, r
        expect(info(osc, sid, "/searchable/world.txt"), 200)
        expect(osc.execd(sid, "GET", "/directories/list?path=/searchable", timeout=CALL), 400)
    finally:
        osc.kill(sid)


# A root-owned 0744 directory: readable by the sandbox's uid, not searchable. Every route below
# it, by its path or through links the sandbox plants pointing into it, is refused: the lookup
# checks search permission on every directory it passes, never read. One test per route.
BELOW_READABLE = ("/readable/world.txt", "/readable/sub/deep.txt", "/readable/sub", "/tmp/rf",
                  "/tmp/rd/world.txt", "/tmp/rd/sub/deep.txt", "/tmp/rsub/deep.txt",
                  "/workspace/rdeep", "/readable/../readable/world.txt")
READABLE_DIRS = ("/readable", "/readable/sub", "/tmp/rd", "/tmp/rd/sub", "/tmp/rsub")


@pytest.fixture
def readable(hostile):
    osc, sid = hostile_sandbox(hostile, "locked")
    try:
        # the sandbox itself may list its names but reach nothing below it
        assert_the_sandbox_cannot_read(osc, sid, "/readable/world.txt")
        stdout_of(osc, sid, "ln -s /readable/world.txt /tmp/rf && "
                            "ln -s /readable /tmp/rd && ln -s ../readable/sub /tmp/rsub && "
                            "ln -s /readable/sub/deep.txt /workspace/rdeep && "
                            "echo x > /workspace/top.txt")
        yield osc, sid
    finally:
        osc.kill(sid)


def test_no_download_below_a_directory_the_sandbox_may_read_but_not_search(readable):
    osc, sid = readable
    for p in BELOW_READABLE:
        r = download(osc, sid, p)
        assert r.status == 400 and SECRET not in r.body, (p, r)


def test_no_info_below_a_directory_the_sandbox_may_read_but_not_search(readable):
    osc, sid = readable
    for p in BELOW_READABLE:
        if p in ("/tmp/rf", "/workspace/rdeep"):
            continue  # info shows a link itself, never followed
        r = info(osc, sid, p)
        assert r.status == 400 and b'"size"' not in r.body, (p, r)
    # the directory itself may be looked at, as `ls -ld` may
    expect(info(osc, sid, "/readable"), 200)


def walks_never_enter_the_readable_directory(osc, sid, route, from_top):
    """`route` (a listing or a search) refuses each directory below or through /readable,
    and the same walk from `from_top` leaves it out."""
    for p in READABLE_DIRS:
        r = osc.execd(sid, "GET", route + oslib.q(p), timeout=CALL)
        assert r.status == 400 and b"deep.txt" not in r.body, (p, r)
    body = expect_body(osc.execd(sid, "GET", from_top, timeout=CALL))
    assert b"/readable/" not in body and b"/workspace/top.txt" in body, body


def test_no_listing_below_a_directory_the_sandbox_may_read_but_not_search(readable):
    walks_never_enter_the_readable_directory(*readable, "/directories/list?path=",
                                             "/directories/list?path=/&depth=3")


def test_no_search_below_a_directory_the_sandbox_may_read_but_not_search(readable):
    walks_never_enter_the_readable_directory(*readable, "/files/search?pattern=*&path=",
                                             "/files/search?pattern=*.txt&path=/")


# ---- POSIX ACLs: what the sandbox's uid may do is what its ACL entries say ---------------

def setfacl(*args):
    subprocess.run(["setfacl"] + list(args), check=True, timeout=30)


@pytest.fixture
def acl_tree(hostile):
    """A root-owned tree added below /acl of the "locked" image (its top-level entries are
    bound into the sandbox, so it appears there), with ACL entries naming the sandbox's uid;
    removed after the test."""
    import shutil
    if not shutil.which("setfacl"):
        pytest.skip("setfacl is not installed (Debian's acl package, scripts/setup.sh)")
    osc, sid = hostile_sandbox(hostile, "locked")
    top = hostile.images / "locked" / "acl" / oslib.uniq()
    try:
        uid = int(stdout_of(osc, sid, "id -u")[0])
        try:
            top.mkdir()
            (top / "probe").write_bytes(b"x")
            setfacl("-m", "u:%d:r" % uid, str(top / "probe"))
        except subprocess.CalledProcessError:
            pytest.skip("the images' filesystem has no POSIX ACLs")
        yield osc, sid, uid, top
    finally:
        osc.kill(sid)
        shutil.rmtree(top, ignore_errors=True)


def test_an_acl_that_shuts_the_sandbox_out_is_honoured(acl_tree):
    """0755 and 0644 let everyone in, but an ACL entry `user:<sandbox uid>:---` shuts the
    sandbox's uid out: its own `cat` fails, and so must every route the daemon (root) serves
    for it: no download, no info or listing below the directory, no search into it."""
    osc, sid, uid, top = acl_tree
    name = "/acl/" + top.name
    (top / "deny").mkdir(mode=0o755)
    (top / "deny" / "world.txt").write_bytes(SECRET)
    (top / "file.txt").write_bytes(SECRET)
    os.chmod(top, 0o755)
    os.chmod(top / "file.txt", 0o644)
    setfacl("-m", "u:%d:---" % uid, str(top / "deny"))
    setfacl("-m", "u:%d:---" % uid, str(top / "file.txt"))
    assert_the_sandbox_cannot_read(osc, sid, name + "/deny/world.txt", name + "/file.txt")
    for p in (name + "/deny/world.txt", name + "/file.txt"):
        r = download(osc, sid, p)
        assert r.status == 400 and SECRET not in r.body, (p, r)
        assert b"permission denied" in r.body, r
    expect(info(osc, sid, name + "/deny/world.txt"), 400)
    for route in ("/directories/list?path=", "/files/search?pattern=*&path="):
        r = osc.execd(sid, "GET", route + oslib.q(name + "/deny"), timeout=CALL)
        assert r.status == 400 and b"world.txt" not in r.body, (route, r)
    r = osc.execd(sid, "GET", "/files/search?pattern=*.txt&path=" + oslib.q(name), timeout=CALL)
    body = expect_body(r)
    assert b"world.txt" not in body, r


def test_an_acl_that_lets_the_sandbox_in_is_honoured(acl_tree):
    """The other way round: a 0700 directory and a 0600 file of root's that an ACL entry
    opens to the sandbox's uid (as `setfacl -m u:<uid>:rx` is meant to): the sandbox's `cat`
    reads the file, and so does the download; the mask still limits the entry."""
    osc, sid, uid, top = acl_tree
    name = "/acl/" + top.name
    (top / "open").mkdir(mode=0o700)
    (top / "open" / "shared.txt").write_bytes(b"shared with the sandbox")
    (top / "masked.txt").write_bytes(b"masked")
    os.chmod(top, 0o755)
    os.chmod(top / "open" / "shared.txt", 0o600)
    os.chmod(top / "masked.txt", 0o600)
    setfacl("-m", "u:%d:rx" % uid, str(top / "open"))
    setfacl("-m", "u:%d:r" % uid, str(top / "open" / "shared.txt"))
    setfacl("-m", "u:%d:r,m::---" % uid, str(top / "masked.txt"))
    assert stdout_of(osc, sid, "cat %s/open/shared.txt" % name) == ["shared with the sandbox"]
    r = download(osc, sid, name + "/open/shared.txt")
    assert r.status == 200 and r.body == b"shared with the sandbox", r
    j = expect(osc.execd(sid, "GET", "/directories/list?path=" + oslib.q(name + "/open"),
                         timeout=CALL), 200)
    assert any(e["path"].endswith("/shared.txt") for e in j), j
    r = download(osc, sid, name + "/masked.txt")
    assert r.status == 400 and b"masked" not in r.body.replace(b"masked.txt", b""), r


def expect_body(r):
    assert r.status == 200, r
    return r.body
