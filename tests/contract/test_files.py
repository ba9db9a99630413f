"""Section 3: every file endpoint and every rule of it. Checks compare with the disk at
{root}/{rid}/workspace, which the tests (running as root) may read and plant into."""
import os
import socket
import stat

import pytest

from shlib import assert_204, assert_error, assert_json, needs_root, q

pytestmark = needs_root


# ---------------- upload / download ----------------

def test_upload_then_download_roundtrip(sb):
    data = bytes(range(256)) * 40
    assert_204(sb.put("f.bin", data))
    r = sb.get("f.bin")
    assert r.status == 200, r
    assert r.body == data
    assert r.header("Content-Length") == str(len(data))
    assert (r.header("Content-Type") or "").split(";")[0].strip() == "application/octet-stream"


def test_upload_writes_the_exact_bytes_on_disk(sb):
    sb.put_ok("x/y.txt", b"\x00\x01binary\r\n\xff")
    assert (sb.ws / "x" / "y.txt").read_bytes() == b"\x00\x01binary\r\n\xff"


def test_empty_upload_and_download(sb):
    assert_204(sb.put("empty", b""))
    r = sb.get("empty")
    assert r.status == 200 and r.body == b"", r
    assert r.header("Content-Length") == "0"
    assert (sb.ws / "empty").stat().st_size == 0


def test_upload_creates_missing_parents_0755_and_file_0644(sb):
    sb.put_ok("p1/p2/p3/file.txt", b"hi")
    for d in ("p1", "p1/p2", "p1/p2/p3"):
        st = os.lstat(sb.ws / d)
        assert stat.S_ISDIR(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o755, (d, oct(st.st_mode))
    st = os.lstat(sb.ws / "p1/p2/p3/file.txt")
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o644, oct(st.st_mode)


def test_upload_replacing_file_resets_mode_0644(sb):
    (sb.ws / "m").write_bytes(b"old")
    os.chmod(sb.ws / "m", 0o700)
    sb.put_ok("m", b"new")
    assert stat.S_IMODE(os.stat(sb.ws / "m").st_mode) == 0o644
    assert sb.get_v("m") == b"new"


def test_upload_replaces_existing_content(sb):
    sb.put_ok("f", b"first version, long content")
    sb.put_ok("f", b"short")
    assert sb.get_v("f") == b"short"
    assert (sb.ws / "f").read_bytes() == b"short"


def test_upload_replaces_file_atomically_new_inode(sb):
    # "replaces the file atomically": the new content arrives by rename, so an open reader
    # of the old file keeps seeing the old content.
    sb.put_ok("atom", b"OLD" * 1000)
    with open(sb.ws / "atom", "rb") as f:
        sb.put_ok("atom", b"NEW" * 1000)
        assert f.read() == b"OLD" * 1000
    assert sb.get_v("atom") == b"NEW" * 1000


def test_upload_leading_slash_means_workspace_root(sb):
    sb.put_ok("/lead", b"1")
    assert (sb.ws / "lead").read_bytes() == b"1"
    assert sb.get_v("lead") == b"1"
    assert sb.get_v("/lead") == b"1"


@pytest.mark.parametrize("variant", ["a//b", "a/./b", "/a/b", "//a///b", "./a/b",
                                     "a/./././b", "a/c/../b"])
def test_equivalent_path_spellings_are_accepted(sb, variant):
    sb.mkdir("a/c")
    sb.put_ok("a/b", b"target")
    assert sb.get_v(variant) == b"target"
    assert sb.exists_v(variant) is True
    assert sb.size_v(variant) == 6


def test_upload_with_double_slash_lands_at_normalised_path(sb):
    sb.put_ok("n1//n2/./f", b"v")
    assert (sb.ws / "n1" / "n2" / "f").read_bytes() == b"v"


BAD_PATHS = [b"", b"..", b"../x", b"/..", b"/../x", b"a/../../x", b"a/b/../../../x",
             b"./..", b"a\x00b", b"\x00", b"a/\x00", b"x" * 4097, b"/" + b"a/" * 2100]


def _ids(paths):
    return [repr(p[:20]) + ("..%d" % len(p) if len(p) > 20 else "") for p in paths]


@pytest.mark.parametrize("path", BAD_PATHS, ids=_ids(BAD_PATHS))
def test_bad_path_is_400_badrequest_on_every_path_endpoint(sb, client, path):
    enc = q(path)
    calls = [
        ("PUT", "/file?path=" + enc, b"x"),
        ("GET", "/file?path=" + enc, None),
        ("HEAD", "/file?path=" + enc, None),
        ("DELETE", "/file?path=" + enc, None),
        ("GET", "/exists?path=" + enc, None),
        ("GET", "/size?path=" + enc, None),
        ("DELETE", "/dir?path=" + enc, None),
    ]
    if path:  # an empty walk root means the workspace root
        calls.append(("GET", "/walk?root=" + enc, None))
    for method, suffix, body in calls:
        r = client.request(method, sb.base + suffix, body=body)
        if method == "HEAD":
            assert r.status == 400, (method, suffix, r)
        else:
            assert_error(r, 400, "BadRequest")


@pytest.mark.parametrize("path", BAD_PATHS, ids=_ids(BAD_PATHS))
def test_bad_path_in_json_is_400_badrequest(sb, client, path):
    p = path.decode()
    sb.put_ok("src", b"1")
    assert_error(client.post(sb.base + "/mkdir", body={"path": p}), 400, "BadRequest")
    assert_error(client.post(sb.base + "/rename", body={"src": p, "dst": "d"}), 400, "BadRequest")
    assert_error(client.post(sb.base + "/rename", body={"src": "src", "dst": p}), 400,
                 "BadRequest")
    assert sb.get_v("src") == b"1"


def test_missing_path_param_is_400(sb, client):
    for method, suffix in [("GET", "/file"), ("PUT", "/file"), ("DELETE", "/file"),
                           ("GET", "/exists"), ("GET", "/size"), ("DELETE", "/dir")]:
        r = client.request(method, sb.base + suffix, body=b"x" if method == "PUT" else None)
        assert_error(r, 400, "BadRequest")


def test_long_path_below_limit_works(sb):
    # 4000 bytes, components of 199 bytes: the contract refuses only paths over 4096 bytes.
    comp = "c" * 199
    path = "/".join([comp] * 20)
    assert len(path) == 3999
    sb.put_ok(path, b"deep")
    assert sb.get_v(path) == b"deep"
    assert sb.exists_v(path) is True


def test_path_with_dotdot_inside_root_is_fine(sb):
    sb.mkdir("d1/d2")
    sb.put_ok("d1/d2/../f", b"1")
    assert (sb.ws / "d1" / "f").read_bytes() == b"1"


def test_download_absent_is_404_filenotfounderror(sb):
    assert_error(sb.get("nope"), 404, "FileNotFoundError")
    assert_error(sb.get("no/such/dir/file"), 404, "FileNotFoundError")


def test_download_directory_is_400_isadirectoryerror(sb):
    sb.mkdir("adir")
    assert_error(sb.get("adir"), 400, "IsADirectoryError")


def test_download_workspace_root_is_400_isadirectoryerror(sb):
    assert_error(sb.get("/"), 400, "IsADirectoryError")


def test_download_fifo_is_400_badrequest_at_once(sb):
    os.mkfifo(sb.ws / "fifo")
    r = sb.get("fifo", timeout=2)  # a daemon blocked opening the FIFO fails this call
    assert_error(r, 400, "BadRequest")


def test_download_socket_is_400_badrequest(sb):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(sb.ws / "sock"))
        assert_error(sb.get("sock", timeout=5), 400, "BadRequest")
    finally:
        s.close()


def test_download_device_is_400_badrequest(sb):
    os.mknod(sb.ws / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.mknod(sb.ws / "zero", 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    assert_error(sb.get("null", timeout=5), 400, "BadRequest")
    assert_error(sb.get("zero", timeout=5), 400, "BadRequest")


def test_upload_onto_directory_fails_and_keeps_directory(sb):
    # Contract: upload replaces whatever *non-directory* stood at its path; a directory is
    # therefore not replaced. The exact error type is not stated (IsADirectoryError expected).
    sb.put_ok("dd/inner", b"keep")
    r = sb.put("dd", b"x")
    assert_error(r, 400)
    assert sb.get_v("dd/inner") == b"keep"
    assert (sb.ws / "dd").is_dir()


def test_upload_to_workspace_root_is_400(sb):
    r = sb.put("/", b"x")
    assert_error(r, 400)


def test_upload_replaces_fifo(sb):
    os.mkfifo(sb.ws / "pipe")
    sb.put_ok("pipe", b"now a file")
    assert stat.S_ISREG(os.lstat(sb.ws / "pipe").st_mode)
    assert sb.get_v("pipe") == b"now a file"


def test_upload_replaces_symlink_itself_not_its_target(sb):
    (sb.ws / "target").write_bytes(b"target content")
    os.symlink("target", sb.ws / "link")
    sb.put_ok("link", b"new")
    assert not os.path.islink(sb.ws / "link")
    assert (sb.ws / "link").read_bytes() == b"new"
    assert (sb.ws / "target").read_bytes() == b"target content"


def test_upload_under_a_regular_file_is_400(sb):
    # Contract silent on the type (NotADirectoryError expected); only 400 is asserted.
    sb.put_ok("plain", b"p")
    r = sb.put("plain/child", b"c")
    assert_error(r, 400)
    assert sb.get_v("plain") == b"p"


# ---------------- names ----------------

NAMES = [
    "with space.txt", "dir with space/file name", "ünïcödé/日本語.txt", "emoji-🙂.bin",
    "plus+sign", "per%cent", "amp&eq=q?hash#", "semi;colon,comma", "quote'\"", "tab\tname",
    "new\nline", "back\\slash", "-dash", ".hidden", "..dots..", "~tilde", "*star?",
]


@pytest.mark.parametrize("name", NAMES)
def test_special_names_roundtrip(sb, name):
    data = name.encode() * 3
    sb.put_ok(name, data)
    assert (sb.ws / name).read_bytes() == data
    assert sb.get_v(name) == data
    assert sb.exists_v(name) is True
    assert sb.size_v(name) == len(data)
    assert [e["path"] for e in sb.walk_v()] == [name]


def test_non_utf8_name_roundtrip(sb):
    name = b"caf\xe9/\xff\xfe raw"
    sb.put_ok(name, b"latin1")
    assert open(os.path.join(os.fsencode(sb.ws), name), "rb").read() == b"latin1"
    assert sb.get_v(name) == b"latin1"
    assert sb.exists_v(name) is True
    assert sb.size_v(name) == 6
    assert sb.du_v() == 6


def test_walk_with_non_utf8_name_is_valid_json(sb):
    # Contract silent on how a non-UTF-8 path is spelled in JSON; whatever it is, the body
    # must be valid JSON (RFC 8259: UTF-8) and hold one entry with the right size.
    with open(os.path.join(os.fsencode(sb.ws), b"bad\xffname"), "wb") as f:
        f.write(b"12345")
    r = sb.walk()
    assert r.status == 200, r
    j = r.json()
    assert len(j["entries"]) == 1
    assert j["entries"][0]["size"] == 5


def test_non_utf8_name_from_disk_downloads_by_bytes(sb):
    with open(os.path.join(os.fsencode(sb.ws), b"\x80\x81"), "wb") as f:
        f.write(b"raw")
    assert sb.get_v(b"\x80\x81") == b"raw"
    assert sb.exists_v(b"\x80\x81") is True
    assert sb.exists_v(b"\x80") is False


# ---------------- exists ----------------

def test_exists_regular_file_and_directory_and_root(sb):
    sb.put_ok("e/f", b"1")
    assert assert_json(sb.exists("e/f")) == {"exists": True}
    assert assert_json(sb.exists("e")) == {"exists": True}
    assert assert_json(sb.exists("/")) == {"exists": True}


def test_exists_absent_is_false(sb):
    assert assert_json(sb.exists("absent")) == {"exists": False}
    assert sb.exists_v("no/such/deep/path") is False


def test_exists_fifo_socket_device_are_true(sb):
    os.mkfifo(sb.ws / "fifo")
    os.mknod(sb.ws / "dev", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(sb.ws / "sock"))
        # none of them is opened: a call that blocks on one fails its timeout
        assert sb.exists_v("fifo", timeout=1) is True
        assert sb.exists_v("sock", timeout=1) is True
        assert sb.exists_v("dev", timeout=1) is True
    finally:
        s.close()


def test_exists_link_to_existing_is_true_dangling_is_false(sb):
    (sb.ws / "real").write_bytes(b"r")
    os.symlink("real", sb.ws / "good")
    os.symlink("missing", sb.ws / "dangling")
    os.symlink("/real", sb.ws / "abs-good")
    assert sb.exists_v("good") is True
    assert sb.exists_v("abs-good") is True
    assert sb.exists_v("dangling") is False


def test_exists_through_file_is_false(sb):
    sb.put_ok("file", b"x")
    assert sb.exists_v("file/child") is False


# ---------------- size ----------------

def test_size_of_regular_file(sb):
    sb.put_ok("s", b"x" * 1234)
    assert assert_json(sb.size("s")) == {"size": 1234}
    sb.put_ok("z", b"")
    assert sb.size_v("z") == 0


def test_size_absent_is_null(sb):
    assert assert_json(sb.size("absent")) == {"size": None}


def test_size_of_directory_fifo_socket_device_is_null(sb):
    sb.mkdir("dir")
    os.mkfifo(sb.ws / "fifo")
    os.mknod(sb.ws / "dev", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(sb.ws / "sock"))
        for p in ("dir", "fifo", "sock", "dev", "/"):
            assert sb.size_v(p) is None, p
    finally:
        s.close()


def test_size_dangling_link_is_null(sb):
    os.symlink("nowhere", sb.ws / "dl")
    assert sb.size_v("dl") is None


def test_size_is_json_integer(sb):
    sb.put_ok("big", b"a" * 100000)
    r = sb.size("big")
    v = r.json()["size"]
    assert type(v) is int and v == 100000
    assert b"100000" in r.body and b"100000." not in r.body and b"e+" not in r.body


# ---------------- disk-usage ----------------

def test_disk_usage_empty_workspace_is_zero(sb):
    assert assert_json(sb.du()) == {"bytes": 0}


def test_disk_usage_sums_regular_file_sizes(sb):
    sb.put_ok("a", b"x" * 100)
    sb.put_ok("d/b", b"y" * 2000)
    sb.put_ok("d/e/c", b"z" * 30000)
    sb.mkdir("emptydir/sub")
    assert sb.du_v() == 32100


def test_disk_usage_equals_sum_of_walk_sizes(sb):
    for i in range(30):
        sb.put_ok("t/%d/f%d" % (i % 4, i), os.urandom(i * 37))
    total = sum(e["size"] for e in sb.walk_v("/"))
    assert sb.du_v() == total


def test_disk_usage_counts_hard_links_once(sb):
    sb.put_ok("h1", b"q" * 5000)
    os.link(sb.ws / "h1", sb.ws / "h2")
    os.makedirs(sb.ws / "sub")
    os.link(sb.ws / "h1", sb.ws / "sub" / "h3")
    assert sb.du_v() == 5000
    assert len(sb.walk_v()) == 3  # walk lists every path


def test_disk_usage_ignores_links_fifos_and_dirs(sb):
    sb.put_ok("real", b"r" * 10)
    os.symlink("real", sb.ws / "sym")
    os.mkfifo(sb.ws / "fifo")
    os.mkdir(sb.ws / "dd")
    assert sb.du_v() == 10


def test_disk_usage_is_apparent_size_of_sparse_file(sb):
    with open(sb.ws / "sparse", "wb") as f:
        f.truncate(50 * 1024 * 1024)
    assert sb.du_v() == 50 * 1024 * 1024


# ---------------- walk ----------------

def test_walk_empty_workspace(sb):
    assert assert_json(sb.walk()) == {"entries": []}


def test_walk_lists_regular_files_with_size_and_version(sb):
    sb.put_ok("a.txt", b"abc")
    sb.put_ok("d/e/f.bin", b"12345")
    entries = sb.walk_v()
    assert entries == [
        {"path": "a.txt", "size": 3, "version": os.lstat(sb.ws / "a.txt").st_mtime_ns},
        {"path": "d/e/f.bin", "size": 5, "version": os.lstat(sb.ws / "d/e/f.bin").st_mtime_ns},
    ]


def test_walk_version_is_mtime_ns_exactly(sb):
    sb.put_ok("v", b"1")
    os.utime(sb.ws / "v", ns=(1_000_000_000, 1_234_567_891_987_654_321))
    (e,) = sb.walk_v()
    assert e["version"] == 1_234_567_891_987_654_321
    assert isinstance(e["version"], int)


def test_walk_version_changes_on_rewrite(sb):
    sb.put_ok("v", b"1")
    os.utime(sb.ws / "v", ns=(1, 1_000_000_000_000_000_000))
    v1 = sb.walk_v()[0]["version"]
    sb.put_ok("v", b"2")
    v2 = sb.walk_v()[0]["version"]
    assert v1 != v2
    assert v2 == os.lstat(sb.ws / "v").st_mtime_ns


def test_walk_is_sorted_bytewise_by_full_path(sb):
    names = ["a/b", "a-b", "a.b", "a0", "B", "b", "Z", "_", "é", "a/a/z", "a/a", "aa",
             "~", "a b", "A"]
    for n in names:
        if n == "a/a":
            continue  # a/a is a directory (holds a/a/z)
        sb.put_ok(n, b"x")
    got = [e["path"] for e in sb.walk_v()]
    expected = sorted([n for n in names if n != "a/a"], key=lambda s: s.encode())
    assert got == expected
    # the interesting part: "a/b" sorts between "a.b" and "a0" (0x2e < 0x2f < 0x30)
    assert got.index("a.b") < got.index("a/a/z") < got.index("a/b") < got.index("a0")


def test_walk_sort_is_bytewise_not_per_directory(sb):
    sb.put_ok("x/y", b"1")
    sb.put_ok("x-y", b"1")
    sb.put_ok("x0", b"1")
    assert [e["path"] for e in sb.walk_v()] == ["x-y", "x/y", "x0"]


def test_walk_skips_dirs_links_fifos_sockets_devices(sb):
    sb.put_ok("reg", b"r")
    os.mkdir(sb.ws / "emptydir")
    os.symlink("reg", sb.ws / "sym")
    os.symlink("emptydir", sb.ws / "dirsym")
    os.mkfifo(sb.ws / "fifo")
    os.mknod(sb.ws / "dev", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(sb.ws / "sock"))
        assert [e["path"] for e in sb.walk_v()] == ["reg"]
    finally:
        s.close()


def test_walk_does_not_follow_dir_links(sb):
    sb.put_ok("real/f", b"1")
    os.symlink("real", sb.ws / "alias")
    os.symlink("/", sb.ws / "rootlink")
    try:
        assert [e["path"] for e in sb.walk_v()] == ["real/f"]
    finally:
        os.unlink(sb.ws / "rootlink")  # never leave a link to / for the teardown delete


def test_walk_root_subdirectory_paths_stay_workspace_relative(sb):
    sb.put_ok("top", b"1")
    sb.put_ok("sub/a", b"1")
    sb.put_ok("sub/deeper/b", b"1")
    sb.put_ok("subling", b"1")
    for root in ("sub", "/sub", "sub/", "sub//", "./sub"):
        assert [e["path"] for e in sb.walk_v(root)] == ["sub/a", "sub/deeper/b"], root


@pytest.mark.parametrize("root", [None, "", "/"])
def test_walk_root_absent_empty_or_slash_is_workspace_root(sb, root):
    sb.put_ok("r1", b"1")
    sb.put_ok("d/r2", b"1")
    assert [e["path"] for e in sb.walk_v(root)] == ["d/r2", "r1"]


def test_walk_root_param_empty_value_form(sb, client):
    sb.put_ok("r1", b"1")
    r = client.get(sb.base + "/walk?root=")
    assert [e["path"] for e in assert_json(r)["entries"]] == ["r1"]


def test_walk_nonexistent_root_is_empty_list(sb):
    assert assert_json(sb.walk("no/such/dir")) == {"entries": []}


def test_walk_paths_have_no_leading_slash(sb):
    sb.put_ok("/lead/x", b"1")
    for e in sb.walk_v("/lead"):
        assert not e["path"].startswith("/")
        assert "//" not in e["path"]


def test_walk_entry_has_exactly_path_size_version(sb):
    sb.put_ok("k", b"12")
    (e,) = sb.walk_v()
    assert set(e) == {"path", "size", "version"}
    assert isinstance(e["size"], int) and isinstance(e["version"], int)


def test_walk_many_files(sb):
    for i in range(300):
        with open(sb.ws / ("f%03d" % i), "wb") as f:
            f.write(b"x" * i)
    entries = sb.walk_v()
    assert [e["path"] for e in entries] == ["f%03d" % i for i in range(300)]
    assert [e["size"] for e in entries] == list(range(300))


# ---------------- delete file ----------------

def test_delete_file_removes_it(sb):
    sb.put_ok("gone", b"1")
    assert_204(sb.delete_file("gone"))
    assert not os.path.lexists(sb.ws / "gone")
    assert sb.exists_v("gone") is False


def test_delete_absent_file_is_404_filenotfounderror(sb):
    assert_error(sb.delete_file("absent"), 404, "FileNotFoundError")


def test_delete_file_on_directory_is_400_isadirectoryerror(sb):
    sb.mkdir("dir")
    assert_error(sb.delete_file("dir"), 400, "IsADirectoryError")
    assert (sb.ws / "dir").is_dir()


def test_delete_file_on_root_is_400(sb):
    r = sb.delete_file("/")
    assert_error(r, 400)


def test_delete_file_removes_link_not_target(sb):
    (sb.ws / "t").write_bytes(b"t")
    os.symlink("t", sb.ws / "l")
    os.symlink("gone", sb.ws / "dl")
    assert_204(sb.delete_file("l"))
    assert_204(sb.delete_file("dl"))
    assert not os.path.lexists(sb.ws / "l")
    assert not os.path.lexists(sb.ws / "dl")
    assert (sb.ws / "t").read_bytes() == b"t"


def test_delete_file_removes_fifo(sb):
    os.mkfifo(sb.ws / "fifo")
    assert_204(sb.delete_file("fifo"))
    assert not os.path.lexists(sb.ws / "fifo")


# ---------------- mkdir ----------------

def test_mkdir_creates_parents(sb):
    assert_204(sb.mkdir("m1/m2/m3"))
    assert (sb.ws / "m1" / "m2" / "m3").is_dir()


def test_mkdir_new_directories_are_0755(sb):
    # Contract states 0755 for directories an upload creates; mkdir is expected to match.
    assert_204(sb.mkdir("k1/k2"))
    for d in ("k1", "k1/k2"):
        assert stat.S_IMODE(os.stat(sb.ws / d).st_mode) == 0o755


def test_mkdir_existing_directory_is_fine(sb):
    assert_204(sb.mkdir("x"))
    sb.put_ok("x/keep", b"1")
    assert_204(sb.mkdir("x"))
    assert sb.get_v("x/keep") == b"1"


def test_mkdir_root_is_existing_directory_so_fine(sb):
    assert_204(sb.mkdir("/"))


def test_mkdir_existing_file_is_400_fileexistserror(sb):
    sb.put_ok("f", b"1")
    assert_error(sb.mkdir("f"), 400, "FileExistsError")
    assert sb.get_v("f") == b"1"


def test_mkdir_existing_fifo_is_400_fileexistserror(sb):
    os.mkfifo(sb.ws / "fifo")
    assert_error(sb.mkdir("fifo"), 400, "FileExistsError")


def test_mkdir_under_a_file_is_400(sb):
    # Contract silent on the type (NotADirectoryError expected); only 400 is asserted.
    sb.put_ok("f", b"1")
    r = sb.mkdir("f/sub")
    assert_error(r, 400)
    assert sb.get_v("f") == b"1"


def test_mkdir_equivalent_spellings(sb):
    assert_204(sb.mkdir("/s1//s2/./s3/"))
    assert (sb.ws / "s1" / "s2" / "s3").is_dir()


# ---------------- delete dir ----------------

def test_rmdir_removes_tree(sb):
    sb.put_ok("t/a/b/c", b"1")
    sb.put_ok("t/x", b"1")
    os.mkfifo(sb.ws / "t" / "fifo")
    os.symlink("/t/x", sb.ws / "t" / "a" / "lnk")
    assert_204(sb.rmdir("t"))
    assert not os.path.lexists(sb.ws / "t")
    assert sb.exists_v("t") is False


def test_rmdir_empty_directory(sb):
    sb.mkdir("e")
    assert_204(sb.rmdir("e"))
    assert not os.path.lexists(sb.ws / "e")


def test_rmdir_absent_is_404_filenotfounderror(sb):
    assert_error(sb.rmdir("nope"), 404, "FileNotFoundError")


@pytest.mark.parametrize("root", ["/", "//", "/.", "a/.."])
def test_rmdir_workspace_root_is_400(sb, root):
    sb.put_ok("keep", b"1")
    sb.mkdir("a")
    r = sb.rmdir(root)
    assert_error(r, 400)
    assert sb.get_v("keep") == b"1"


def test_rmdir_on_file_is_400(sb):
    # Contract silent on the type (NotADirectoryError expected); only 400 is asserted.
    sb.put_ok("f", b"1")
    r = sb.rmdir("f")
    assert_error(r, 400)
    assert sb.get_v("f") == b"1"


def test_rmdir_does_not_follow_links_inside(sb):
    sb.put_ok("keep/precious", b"p")
    sb.mkdir("victim")
    os.symlink("/keep", sb.ws / "victim" / "link")
    os.symlink("../keep/precious", sb.ws / "victim" / "flink")
    assert_204(sb.rmdir("victim"))
    assert sb.get_v("keep/precious") == b"p"


def test_rmdir_large_tree_returns_and_tree_is_gone(sb):
    for i in range(20):
        os.makedirs(sb.ws / "big" / ("d%d" % i))
        for j in range(50):
            (sb.ws / "big" / ("d%d" % i) / ("f%d" % j)).write_bytes(b"x")
    assert_204(sb.rmdir("big"))
    assert sb.exists_v("big") is False
    assert sb.walk_v() == []


# ---------------- rename ----------------

def test_rename_file(sb):
    sb.put_ok("a", b"A")
    assert_204(sb.rename("a", "b"))
    assert sb.exists_v("a") is False
    assert sb.get_v("b") == b"A"


def test_rename_absent_src_is_404_filenotfounderror(sb):
    assert_error(sb.rename("absent", "b"), 404, "FileNotFoundError")
    assert sb.exists_v("b") is False


def test_rename_creates_missing_dst_parents(sb):
    sb.put_ok("a", b"A")
    assert_204(sb.rename("a", "n1/n2/n3/b"))
    assert (sb.ws / "n1/n2/n3/b").read_bytes() == b"A"


def test_rename_replaces_existing_dst_file(sb):
    sb.put_ok("a", b"new")
    sb.put_ok("b", b"old")
    assert_204(sb.rename("a", "b"))
    assert sb.get_v("b") == b"new"
    assert sb.exists_v("a") is False


def test_rename_directory(sb):
    sb.put_ok("d1/x/y", b"1")
    assert_204(sb.rename("d1", "d2"))
    assert sb.get_v("d2/x/y") == b"1"
    assert sb.exists_v("d1") is False


def test_rename_keeps_mtime_version(sb):
    sb.put_ok("a", b"A")
    os.utime(sb.ws / "a", ns=(1, 1_500_000_000_123_456_789))
    assert_204(sb.rename("a", "b"))
    assert sb.walk_v() == [{"path": "b", "size": 1, "version": 1_500_000_000_123_456_789}]


def test_rename_symlink_moves_link_itself(sb):
    (sb.ws / "t").write_bytes(b"t")
    os.symlink("t", sb.ws / "l")
    assert_204(sb.rename("l", "l2"))
    assert os.path.islink(sb.ws / "l2")
    assert os.readlink(sb.ws / "l2") == "t"
    assert (sb.ws / "t").read_bytes() == b"t"


def test_rename_file_onto_directory_is_400(sb):
    # rename(2) gives EISDIR; contract maps it to a 400 (IsADirectoryError expected).
    sb.put_ok("f", b"1")
    sb.put_ok("d/inner", b"2")
    r = sb.rename("f", "d")
    assert_error(r, 400)
    assert sb.get_v("d/inner") == b"2"
    assert sb.get_v("f") == b"1"


def test_rename_root_is_400(sb):
    r = sb.rename("/", "x")
    assert_error(r, 400)
    sb.put_ok("f", b"1")
    r = sb.rename("f", "/")
    assert_error(r, 400)
    assert sb.get_v("f") == b"1"


def test_rename_to_itself_is_noop(sb):
    sb.put_ok("same", b"s")
    assert_204(sb.rename("same", "same"))
    assert sb.get_v("same") == b"s"


# ---------------- the upload temp file never shows ----------------

def test_no_temp_files_visible_after_uploads(sb):
    for i in range(20):
        sb.put_ok("u/f%d" % i, os.urandom(1000))
    assert sorted(os.listdir(sb.ws / "u")) == sorted("f%d" % i for i in range(20))
    assert sorted(os.listdir(sb.ws)) == ["u"]
    assert len(sb.walk_v()) == 20


def test_upload_owner_is_the_sandbox_uid(sb):
    # "the file belongs to the sandbox uid": the workspace root belongs to that uid too
    # (INTERPRETATION: the contract does not name the uid; it is taken to be the owner of the
    # workspace directory, and to be unprivileged since no sandbox process may forge .ready).
    (sb.ws / "planted").write_bytes(b"root-owned")
    sb.put_ok("planted", b"replaced")
    sb.put_ok("o1/o2/f", b"x")
    uid = os.stat(sb.ws).st_uid
    gid = os.stat(sb.ws).st_gid
    assert uid != 0
    for p in ("planted", "o1", "o1/o2", "o1/o2/f"):
        st = os.lstat(sb.ws / p)
        assert (st.st_uid, st.st_gid) == (uid, gid), p


def test_rename_directory_over_empty_directory_replaces_it(sb):
    # rename(2) semantics: a directory may replace an empty directory
    sb.put_ok("src/f", b"1")
    assert_204(sb.mkdir("dst"))
    assert_204(sb.rename("src", "dst"))
    assert sb.get_v("dst/f") == b"1"
    assert sb.exists_v("src") is False


def test_rename_directory_over_nonempty_directory_fails_unchanged(sb):
    # rename(2) gives ENOTEMPTY; the contract names no type for it, so only a 4xx error body
    # and an unchanged tree are asserted.
    sb.put_ok("src/f", b"1")
    sb.put_ok("dst/g", b"2")
    r = sb.rename("src", "dst")
    assert 400 <= r.status < 500, r
    assert_error(r, r.status)
    assert sb.get_v("src/f") == b"1"
    assert sb.get_v("dst/g") == b"2"


def test_rename_directory_over_file_is_400(sb):
    # rename(2) gives ENOTDIR -> 400 (NotADirectoryError expected)
    sb.put_ok("src/f", b"1")
    sb.put_ok("file", b"2")
    assert_error(sb.rename("src", "file"), 400)
    assert sb.get_v("file") == b"2"
    assert sb.get_v("src/f") == b"1"


def test_rename_directory_into_itself_is_400(sb):
    # rename(2) gives EINVAL for moving a directory below itself
    sb.put_ok("d/f", b"1")
    assert_error(sb.rename("d", "d/sub/d2"), 400)
    assert sb.get_v("d/f") == b"1"
