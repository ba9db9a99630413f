"""OPENSANDBOX.md section 3.2 over real HTTP: a sandbox's execd files and directories on the
sandbox's whole filesystem (its /tmp, /workspace, the read-only image), every route and its
errors: upload (multipart, several pairs, parents, owner and mode), download (whole, one Range
-> 206 / 416, line mode, Content-Disposition), info (FileInfo exactly, links not followed, 404
naming the path), list (depth, sorted, links not entered), search (glob on base names),
replace (literal, counts, mode kept), mv, permissions (names of the image's /etc/passwd,
setuid refused), delete files, directories create and delete. Every answer is checked against
the YAML by oslib. The adversarial tests are test_os_files_escape.py."""
import json
import os

import pytest

import oslib
import shlib
from oslib import expect
from sselib import stdout_of

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CALL = 10.0


def multipart(pairs, boundary="sh-test-boundary"):
    """A body of (metadata dict or raw bytes, file bytes) pairs as the SDK sends them."""
    out = b""
    for meta, data in pairs:
        m = meta if isinstance(meta, bytes) else json.dumps(meta).encode()
        out += (b"--" + boundary.encode() + b"\r\n"
                b'Content-Disposition: form-data; name="metadata"; filename="metadata"\r\n'
                b"Content-Type: application/json\r\n\r\n" + m + b"\r\n")
        if data is not None:
            out += (b"--" + boundary.encode() + b"\r\n"
                    b'Content-Disposition: form-data; name="file"; filename="blob"\r\n'
                    b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n")
    return out + b"--" + boundary.encode() + b"--\r\n"


def upload(osc, sid, pairs, **kw):
    return osc.execd(sid, "POST", "/files/upload", body=multipart(pairs), timeout=CALL,
                     headers={"Content-Type": "multipart/form-data; boundary=sh-test-boundary"},
                     **kw)


def put(osc, sid, path, data, **meta):
    m = {"path": path}
    m.update(meta)
    expect(upload(osc, sid, [(m, data)]), 200)


def download(osc, sid, path, headers=None, query=""):
    return osc.execd(sid, "GET", "/files/download?path=%s%s" % (oslib.q(path), query),
                     headers=headers, timeout=CALL)


def info(osc, sid, *paths):
    qs = "&".join("path=" + oslib.q(p) for p in paths)
    return osc.execd(sid, "GET", "/files/info?" + qs, timeout=CALL)


def sh(osc, sid, command):
    return stdout_of(osc, sid, command)


# ---- upload and download ---------------------------------------------------------------------

def test_an_uploaded_file_is_what_a_command_in_the_sandbox_reads_at_the_same_path(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/a/b/hello.txt", b"hello from the SDK\n")
    assert sh(osc, sid, "cat /tmp/a/b/hello.txt") == ["hello from the SDK"]
    put(osc, sid, "/workspace/w.txt", b"ws")
    assert sh(osc, sid, "cat /workspace/w.txt; echo; cat ~/w.txt") == ["ws", "ws"]


def test_new_files_and_their_parents_belong_to_the_sandbox_user(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/own/deep/f", b"x")
    uid = sh(osc, sid, "id -u")[0]
    gid = sh(osc, sid, "id -g")[0]
    got = sh(osc, sid, "stat -c '%u %g %a' /tmp/own /tmp/own/deep /tmp/own/deep/f")
    assert got == ["%s %s 755" % (uid, gid)] * 2 + ["%s %s 644" % (uid, gid)], got


def test_upload_sets_the_mode_given_as_octal_digits(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/m.sh", b"#!/bin/sh\necho run\n", mode=755)
    assert sh(osc, sid, "stat -c %a /tmp/m.sh; /tmp/m.sh") == ["755", "run"]


def test_several_metadata_and_file_pairs_in_one_upload(osc, sbx):
    sid = sbx["id"]
    r = upload(osc, sid, [({"path": "/tmp/p1"}, b"one"), ({"path": "/tmp/p2"}, b"two"),
                          ({"path": "/workspace/p3"}, b"three")])
    expect(r, 200)
    assert sh(osc, sid, "cat /tmp/p1 /tmp/p2 /workspace/p3") == ["onetwothree"]


def test_an_upload_replaces_an_existing_file_and_a_link_there_is_replaced_not_followed(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/target", b"target")
    sh(osc, sid, "ln -s /tmp/target /tmp/lnk")
    put(osc, sid, "/tmp/lnk", b"new")
    assert sh(osc, sid, "cat /tmp/target; echo; test -L /tmp/lnk || echo notlink") == \
        ["target", "notlink"]


def test_a_binary_upload_round_trips_byte_for_byte(osc, sbx):
    sid = sbx["id"]
    data = os.urandom(300000) + b"\r\n--sh-test-boundar" + os.urandom(1000)
    put(osc, sid, "/tmp/bin", data)
    r = download(osc, sid, "/tmp/bin")
    assert r.status == 200 and r.body == data
    assert r.header("Content-Length") == str(len(data))
    assert 'filename="bin"' in r.header("Content-Disposition")


def test_download_of_a_missing_file_is_404_file_not_found(osc, sbx):
    expect(download(osc, sbx["id"], "/tmp/none"), 404, "FILE_NOT_FOUND")


def test_download_of_a_directory_is_400(osc, sbx):
    expect(download(osc, sbx["id"], "/tmp"), 400)


@pytest.mark.parametrize("rng,status,want", [
    ("bytes=0-3", 206, b"0123"),
    ("bytes=4-", 206, b"456789"),
    ("bytes=-3", 206, b"789"),
    ("bytes=8-100", 206, b"89"),
    ("bytes=10-", 416, None),
    ("bytes=-0", 416, None),
    ("pages=1-2", 200, b"0123456789"),
])
def test_one_range_is_206_with_content_range_and_unsatisfiable_is_416(osc, sbx, rng, status, want):
    sid = sbx["id"]
    put(osc, sid, "/tmp/r", b"0123456789")
    r = download(osc, sid, "/tmp/r", headers={"Range": rng})
    assert r.status == status, r
    if want is not None:
        assert r.body == want
    if status == 416:
        assert r.header("Content-Range") == "bytes */10"
    if status == 206:
        a = 10 - len(want) if rng.startswith("bytes=-") else int(rng[6:].split("-")[0])
        assert r.header("Content-Range") == "bytes %d-%d/10" % (a, a + len(want) - 1)


@pytest.mark.parametrize("query,want", [
    ("&offset=2&limit=2", b"l2\nl3"),
    ("&offset=4", b"l4\nl5"),
    ("&limit=2", b"l1\nl2"),
    ("&offset=9", b""),
])
def test_line_mode_returns_the_lines_asked_joined_by_newlines(osc, sbx, query, want):
    sid = sbx["id"]
    put(osc, sid, "/tmp/lines", b"l1\nl2\nl3\nl4\nl5")
    r = download(osc, sid, "/tmp/lines", query=query)
    assert r.status == 200 and r.body == want, r
    assert r.header("Content-Type").startswith("text/plain")


def test_line_mode_and_range_together_are_400(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/lines", b"a\nb")
    expect(download(osc, sid, "/tmp/lines", headers={"Range": "bytes=0-1"}, query="&offset=1"),
           400)


# ---- info, list, search ---------------------------------------------------------------------

def test_info_is_file_info_of_each_path_as_asked(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/i/f.txt", b"12345", mode=640)
    sh(osc, sid, "ln -s f.txt /tmp/i/l")
    r = info(osc, sid, "/tmp/i/f.txt", "/tmp/i", "/tmp/i/l")
    j = expect(r, 200)
    f = j["/tmp/i/f.txt"]
    assert f["type"] == "file" and f["size"] == 5 and f["mode"] == 640 and f["path"] == "/tmp/i/f.txt"
    assert j["/tmp/i"]["type"] == "directory" and j["/tmp/i"]["mode"] == 755
    assert j["/tmp/i/l"]["type"] == "symlink"  # the entry itself, never followed
    uid = sh(osc, sid, "id -u")[0]
    assert f["owner"] == sh(osc, sid, "id -un 2>/dev/null || id -u")[0], (f, uid)
    assert f["modified_at"].endswith("Z") and f["created_at"].endswith("Z")


def test_info_names_the_first_missing_path_in_its_404(osc, sbx):
    b = expect(info(osc, sbx["id"], "/tmp", "/tmp/missing-one"), 404, "FILE_NOT_FOUND")
    assert "/tmp/missing-one" in b["message"]


def test_info_without_a_path_is_400_missing_query(osc, sbx):
    expect(osc.execd(sbx["id"], "GET", "/files/info", timeout=CALL), 400, "MISSING_QUERY")


def test_info_of_the_image_shows_its_owner_by_name(osc, sbx):
    j = expect(info(osc, sbx["id"], "/etc/passwd"), 200)
    assert j["/etc/passwd"]["owner"] == "root" and j["/etc/passwd"]["type"] == "file"


def test_list_is_sorted_with_depth_and_never_enters_a_link(osc, sbx):
    sid = sbx["id"]
    sh(osc, sid, "mkdir -p /tmp/L/b/deep /tmp/L/a && touch /tmp/L/c /tmp/L/b/x /tmp/L/b/deep/y"
       " && ln -s / /tmp/L/root")
    r = osc.execd(sid, "GET", "/directories/list?path=/tmp/L", timeout=CALL)
    names = [e["path"] for e in expect(r, 200)]
    assert names == ["/tmp/L/a", "/tmp/L/b", "/tmp/L/c", "/tmp/L/root"]
    r = osc.execd(sid, "GET", "/directories/list?path=/tmp/L&depth=2", timeout=CALL)
    names = [e["path"] for e in expect(r, 200)]
    assert names == ["/tmp/L/a", "/tmp/L/b", "/tmp/L/b/deep", "/tmp/L/b/x", "/tmp/L/c",
                     "/tmp/L/root"]


def test_list_of_a_link_is_400(osc, sbx):
    sid = sbx["id"]
    sh(osc, sid, "mkdir -p /tmp/real && ln -s /tmp/real /tmp/linkdir")
    expect(osc.execd(sid, "GET", "/directories/list?path=/tmp/linkdir", timeout=CALL), 400)


def test_search_globs_base_names_of_regular_files_below_the_path(osc, sbx):
    sid = sbx["id"]
    sh(osc, sid, "mkdir -p /tmp/S/sub && touch /tmp/S/a.txt /tmp/S/b.py /tmp/S/sub/c.txt"
       " && ln -s /etc /tmp/S/etc")
    r = osc.execd(sid, "GET", "/files/search?path=/tmp/S&pattern=*.txt", timeout=CALL)
    assert sorted(e["path"] for e in expect(r, 200)) == ["/tmp/S/a.txt", "/tmp/S/sub/c.txt"]
    r = osc.execd(sid, "GET", "/files/search?path=/tmp/S", timeout=CALL)
    assert sorted(e["path"] for e in expect(r, 200)) == \
        ["/tmp/S/a.txt", "/tmp/S/b.py", "/tmp/S/sub/c.txt"]


# ---- replace, mv, permissions, delete -------------------------------------------------------

def test_replace_is_literal_counts_with_verbose_and_keeps_the_mode(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/rep", b"a.b a.b axb", mode=600)
    r = osc.execd(sid, "POST", "/files/replace?verbose=true", body={"/tmp/rep": {"old": "a.b",
                                                                                 "new": "Z"}},
                  timeout=CALL)
    assert expect(r, 200) == {"/tmp/rep": {"replacedCount": 2}}
    assert sh(osc, sid, "cat /tmp/rep; echo; stat -c %a /tmp/rep") == ["Z Z axb", "600"]
    r = osc.execd(sid, "POST", "/files/replace", body={"/tmp/rep": {"old": "Z", "new": "Y"}},
                  timeout=CALL)
    assert r.status == 200 and r.body == b""


def test_replace_with_an_empty_old_text_is_400(osc, sbx):
    r = osc.execd(sbx["id"], "POST", "/files/replace", body={"/tmp/x": {"old": "", "new": "y"}},
                  timeout=CALL)
    expect(r, 400)


def test_mv_creates_the_destination_parents_and_refuses_an_existing_destination(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/mv1", b"1")
    put(osc, sid, "/tmp/mv2", b"2")
    expect(osc.execd(sid, "POST", "/files/mv", body=[{"src": "/tmp/mv1", "dest": "/tmp/n/e/w"}],
                     timeout=CALL), 200)
    assert sh(osc, sid, "cat /tmp/n/e/w; test -e /tmp/mv1 || echo gone") == ["1gone"]
    expect(osc.execd(sid, "POST", "/files/mv", body=[{"src": "/tmp/mv2", "dest": "/tmp/n/e/w"}],
                     timeout=CALL), 400)
    expect(osc.execd(sid, "POST", "/files/mv", body=[{"src": "/tmp/nope", "dest": "/tmp/q"}],
                     timeout=CALL), 404, "FILE_NOT_FOUND")


def test_permissions_set_mode_and_an_owner_named_in_the_image(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/perm", b"p")
    r = osc.execd(sid, "POST", "/files/permissions",
                  body={"/tmp/perm": {"mode": 604, "owner": "nobody", "group": "nogroup"}},
                  timeout=CALL)
    expect(r, 200)
    j = expect(info(osc, sid, "/tmp/perm"), 200)["/tmp/perm"]
    assert (j["mode"], j["owner"], j["group"]) == (604, "nobody", "nogroup"), j


def test_permissions_refuse_setuid_setgid_sticky_and_unknown_names(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/perm2", b"p")
    for perm in ({"mode": 4755}, {"mode": 2755}, {"mode": 1755}, {"mode": 788},
                 {"mode": 644, "owner": "no-such-user-here"}):
        r = osc.execd(sid, "POST", "/files/permissions", body={"/tmp/perm2": perm}, timeout=CALL)
        expect(r, 400)
    assert sh(osc, sid, "stat -c %a /tmp/perm2") == ["644"]


def test_directories_given_away_are_made_with_parents_of_the_sandbox(osc, sbx):
    sid = sbx["id"]
    r = osc.execd(sid, "POST", "/directories",
                  body={"/tmp/G/a/b": {"mode": 755, "owner": "nobody", "group": "nogroup"}},
                  timeout=CALL)
    expect(r, 200)
    uid = sh(osc, sid, "id -u")[0]
    assert sh(osc, sid, "stat -c %u /tmp/G /tmp/G/a; stat -c %U:%G /tmp/G/a/b") == \
        [uid, uid, "nobody:nogroup"]


def test_permissions_never_give_a_file_to_another_sandboxs_uid(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/perm3", b"p")
    uid = int(sh(osc, sid, "id -u")[0])
    r = osc.execd(sid, "POST", "/files/permissions",
                  body={"/tmp/perm3": {"mode": 644, "owner": str(uid + 1)}}, timeout=CALL)
    expect(r, 400)


def test_delete_files_removes_files_absent_is_fine_and_a_directory_is_400(osc, sbx):
    sid = sbx["id"]
    put(osc, sid, "/tmp/d1", b"1")
    r = osc.execd(sid, "DELETE", "/files?path=/tmp/d1&path=/tmp/never", timeout=CALL)
    expect(r, 200)
    assert sh(osc, sid, "test -e /tmp/d1 || echo gone") == ["gone"]
    expect(osc.execd(sid, "DELETE", "/files?path=/tmp", timeout=CALL), 400)


def test_directories_are_made_with_their_mode_and_removed_recursively(osc, sbx):
    sid = sbx["id"]
    r = osc.execd(sid, "POST", "/directories", body={"/tmp/D/x/y": {"mode": 700},
                                                    "/workspace/D2": {"mode": 644}}, timeout=CALL)
    expect(r, 200)
    assert sh(osc, sid, "stat -c %a /tmp/D /tmp/D/x/y /workspace/D2") == ["755", "700", "644"]
    put(osc, sid, "/tmp/D/x/y/f", b"f")
    sh(osc, sid, "ln -s /workspace /tmp/D/x/ws")
    put(osc, sid, "/workspace/keep", b"k")
    expect(osc.execd(sid, "DELETE", "/directories?path=/tmp/D&path=/workspace/D2", timeout=CALL),
           200)
    assert sh(osc, sid, "test -e /tmp/D || test -e /workspace/D2 || cat /workspace/keep") == ["k"]


# ---- what the sandbox cannot do -------------------------------------------------------------

def test_writes_to_the_read_only_image_are_refused_with_a_clear_error(osc, sbx):
    sid = sbx["id"]
    for r in (upload(osc, sid, [({"path": "/usr/sh-probe"}, b"x")]),
              osc.execd(sid, "POST", "/directories", body={"/usr/sh-probe-dir": {"mode": 755}},
                        timeout=CALL),
              osc.execd(sid, "DELETE", "/files?path=/etc/passwd", timeout=CALL),
              osc.execd(sid, "POST", "/files/replace", body={"/etc/passwd": {"old": "root",
                                                                              "new": "toor"}},
                        timeout=CALL)):
        b = expect(r, 400)
        assert "read-only" in b["message"], b
    assert not os.path.exists("/usr/sh-probe") and not os.path.exists("/usr/sh-probe-dir")
    assert sh(osc, sid, "test -e /usr/sh-probe || head -c 4 /etc/passwd") == ["root"]


def test_a_file_the_sandbox_user_cannot_read_is_not_read_for_it(osc, sbx):
    """The daemon acts as root: /etc/shadow of the image (the host's own /etc in the default
    image) must stay as unreadable through the API as it is to the sandbox's processes."""
    if not os.path.exists("/etc/shadow"):
        pytest.skip("no /etc/shadow on this host")
    b = expect(download(osc, sbx["id"], "/etc/shadow"), 400)
    assert "permission denied" in b["message"]


def test_kernel_filesystems_are_not_served(osc, sbx):
    sid = sbx["id"]
    expect(download(osc, sid, "/proc/1/environ"), 400)
    expect(upload(osc, sid, [({"path": "/proc/sys/kernel/sh-probe"}, b"x")]), 400)
    expect(osc.execd(sid, "GET", "/directories/list?path=/proc", timeout=CALL), 400)


def test_fifos_and_devices_are_refused_without_blocking(osc, sbx):
    sid = sbx["id"]
    sh(osc, sid, "mkfifo /tmp/fifo")
    for p in ("/tmp/fifo", "/dev/null", "/dev/zero", "/dev/urandom"):
        b = expect(download(osc, sid, p), 400)
        assert "regular" in b["message"], b
    r = osc.execd(sid, "POST", "/files/replace", body={"/tmp/fifo": {"old": "a", "new": "b"}},
                  timeout=CALL)
    expect(r, 400)


def test_a_path_that_climbs_above_the_root_is_400(osc, sbx):
    expect(download(osc, sbx["id"], "/../../etc/passwd"), 400)
