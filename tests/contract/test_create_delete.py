"""Sections 1, 2.1, 2.2: create and delete."""
import os
import re

import pytest

from shlib import assert_204, assert_error, assert_json, needs_root

URL_SAFE = re.compile(r"^[A-Za-z0-9._~-]+$")


def _create(client, body):
    return client.request("POST", "/sandboxes", body=body)


def _cleanup(client, r):
    if r.status == 200:
        client.request("DELETE", "/sandboxes/" + r.json()["remote_id"])


def test_create_returns_200_pod_url_and_remote_id(daemon, client):
    r = _create(client, {})
    j = assert_json(r)
    try:
        assert isinstance(j.get("pod_url"), str) and isinstance(j.get("remote_id"), str), j
    finally:
        _cleanup(client, r)


def test_default_pod_url_is_http_plus_bound_address(daemon, client):
    r = _create(client, {})
    j = assert_json(r)
    _cleanup(client, r)
    assert j["pod_url"] == "http://127.0.0.1:%d" % daemon.port


def test_pod_url_has_no_trailing_slash(daemon, client):
    r = _create(client, {})
    j = assert_json(r)
    _cleanup(client, r)
    assert not j["pod_url"].endswith("/")


def test_remote_id_is_url_safe_and_at_least_128_bits(client):
    ids = set()
    for _ in range(20):
        r = _create(client, {})
        rid = assert_json(r)["remote_id"]
        _cleanup(client, r)
        assert URL_SAFE.match(rid), rid
        # >= 128 bits: 32 hex digits, or 22 base64url characters at the least
        if re.match(r"^[0-9a-fA-F]+$", rid):
            assert len(rid) >= 32, rid
        else:
            assert len(rid) >= 22, rid
        ids.add(rid)
    assert len(ids) == 20


def test_remote_id_is_usable_as_path_segment_for_later_calls(client):
    s = client.new_sandbox()
    assert s.exists_v("/") is True
    assert_204(s.delete())


@needs_root
def test_create_makes_sandbox_directory_under_root(daemon, client):
    s = client.new_sandbox()
    try:
        assert (daemon.root / s.rid).is_dir()
        assert (daemon.root / s.rid / "workspace").is_dir()
    finally:
        s.delete()


def test_new_sandbox_without_nfs_root_is_not_ready_and_empty(client):
    s = client.new_sandbox({"item_id": "item-1"})
    try:
        assert s.ready_v() is False
        assert s.walk_v() == []
        assert s.du_v() == 0
    finally:
        s.delete()


@pytest.mark.parametrize("body", [
    {}, {"image": "default"}, {"image": None}, {"env": None}, {"item_id": None},
    {"exposed_ports": None}, {"env": {}}, {"env": {"A": "1", "B": "", "C_D": "x=y"}},
    {"exposed_ports": [8080, 3000]}, {"exposed_ports": []},
    {"image": "default", "env": {"K": "v"}, "exposed_ports": [1], "item_id": "abc"},
    {"unknown_field": {"nested": [1, 2, 3]}, "another": None},
])
def test_create_accepts_valid_bodies(client, body):
    r = _create(client, body)
    _cleanup(client, r)
    assert_json(r)


@pytest.mark.parametrize("image", ["nope", "", "DEFAULT", "default/", "../default", "/", ".."])
def test_create_unknown_image_is_400_badrequest(client, image):
    r = _create(client, {"image": image})
    _cleanup(client, r)
    assert_error(r, 400, "BadRequest")


@pytest.mark.parametrize("body", [
    {"image": 1}, {"image": True}, {"image": ["default"]}, {"image": {"n": "default"}},
    {"env": "A=1"}, {"env": ["A=1"]}, {"env": 1}, {"env": True},
    {"env": {"A": 1}}, {"env": {"A": None}}, {"env": {"A": True}}, {"env": {"A": ["x"]}},
    {"env": {"A": {"x": "y"}}}, {"env": {"OK": "1", "BAD": 2}},
    {"item_id": 1}, {"item_id": True}, {"item_id": ["a"]}, {"item_id": {"a": "b"}},
])
def test_create_wrong_types_are_400(client, body):
    r = _create(client, body)
    _cleanup(client, r)
    assert_error(r, 400, "BadRequest")


@pytest.mark.parametrize("item_id", [
    "a", "Z", "0", "a" * 128, "A1._-", "item.v2_final-3", "0" + "-" * 127, "9.",
])
def test_create_valid_item_id_is_accepted(client, item_id):
    r = _create(client, {"item_id": item_id})
    _cleanup(client, r)
    assert_json(r)


@pytest.mark.parametrize("item_id", [
    "", "-a", ".a", "_a", "a" * 129, "a/b", "a b", "/a", "..", ".", "a\nb", "a\u0000b",
    "ü", "aü", "a:b", "a%2Fb", "a+b", "a\\b", "a@b", " a", "a ", "a\tb",
])
def test_create_invalid_item_id_is_400(client, item_id):
    r = _create(client, {"item_id": item_id})
    _cleanup(client, r)
    assert_error(r, 400, "BadRequest")


def test_delete_returns_204_without_body(client):
    s = client.new_sandbox()
    assert_204(s.delete())


def test_second_delete_is_404_sandboxnotfound(client):
    s = client.new_sandbox()
    assert_204(s.delete())
    assert_error(s.delete(), 404, "SandboxNotFound")


def test_calls_after_delete_are_404_sandboxnotfound(client):
    s = client.new_sandbox()
    s.put_ok("f", b"1")
    assert_204(s.delete())
    assert_error(s.get("f"), 404, "SandboxNotFound")
    assert_error(s.exists("f"), 404, "SandboxNotFound")
    assert_error(s.ready(), 404, "SandboxNotFound")
    assert_error(s.walk(), 404, "SandboxNotFound")
    assert_error(s.put("g", b"1"), 404, "SandboxNotFound")
    assert_error(s.mark_ready(), 404, "SandboxNotFound")


@needs_root
def test_delete_removes_sandbox_directory(daemon, client):
    s = client.new_sandbox()
    s.put_ok("a/b/c.txt", b"data")
    assert_204(s.mkdir("empty/dir"))
    assert_204(s.mark_ready())
    os.mkfifo(daemon.ws(s.rid) / "fifo")
    d = daemon.root / s.rid
    assert d.is_dir()
    assert_204(s.delete())
    assert not os.path.lexists(d)


def test_sandboxes_are_isolated_from_each_other(client):
    a = client.new_sandbox()
    b = client.new_sandbox()
    try:
        a.put_ok("only-a", b"A")
        assert b.exists_v("only-a") is False
        assert b.walk_v() == []
        assert_204(a.mark_ready())
        assert b.ready_v() is False
    finally:
        a.delete()
        b.delete()


def test_delete_one_sandbox_leaves_others_working(client):
    a = client.new_sandbox()
    b = client.new_sandbox()
    b.put_ok("f", b"B")
    assert_204(a.delete())
    assert b.get_v("f") == b"B"
    assert_204(b.delete())


# ---- images (SANDBOX_HOST_IMAGES) ----

@needs_root
def test_named_image_from_images_dir_is_accepted_and_unknown_refused(start_daemon, tmp_path):
    images = tmp_path / "images"
    (images / "alpine").mkdir(parents=True)
    (images / "plainfile").write_bytes(b"not an image directory")
    d = start_daemon(env={"SANDBOX_HOST_IMAGES": str(images)})
    r = _create(d.client, {"image": "alpine"})
    assert_json(r)
    _cleanup(d.client, r)
    r = _create(d.client, {"image": "default"})  # no images/default: host system dirs
    assert_json(r)
    _cleanup(d.client, r)
    r = _create(d.client, {"image": "debian"})
    assert_error(r, 400, "BadRequest")
    r = _create(d.client, {"image": "plainfile"})  # {images}/{name}/ must be a directory
    _cleanup(d.client, r)
    assert_error(r, 400, "BadRequest")
    r = _create(d.client, {"image": "../images/alpine"})
    _cleanup(d.client, r)
    assert_error(r, 400, "BadRequest")
    d.stop_ok()


def _trash_events(trash, action):
    """Names moved or created into the trash directory while `action` runs (inotify)."""
    import ctypes
    import struct
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert fd >= 0, ctypes.get_errno()
    try:
        IN_CREATE, IN_MOVED_TO = 0x100, 0x80
        assert libc.inotify_add_watch(fd, str(trash).encode(), IN_CREATE | IN_MOVED_TO) >= 0
        action()
        names = []
        try:
            buf = os.read(fd, 65536)
        except BlockingIOError:
            buf = b""
        while buf:
            _, _, _, n = struct.unpack_from("iIII", buf)
            names.append(buf[16:16 + n].rstrip(b"\0").decode())
            buf = buf[16 + n:]
        return names
    finally:
        os.close(fd)


@needs_root
def test_a_sandbox_that_left_nothing_is_removed_at_once_without_a_remover(daemon, client):
    s = client.new_sandbox()
    slot = os.path.realpath(daemon.root / s.rid)
    names = _trash_events(daemon.root / ".trash", lambda: assert_204(s.delete()))
    assert names == [], names
    assert not os.path.exists(slot)


@needs_root
def test_a_sandbox_that_left_files_goes_to_the_trash_for_its_remover(daemon, client):
    s = client.new_sandbox()
    s.put_ok("left", b"x")
    names = _trash_events(daemon.root / ".trash", lambda: assert_204(s.delete()))
    assert [n for n in names if n.startswith("sb.")], names


def test_ids_begin_with_the_pod_token_kept_across_restarts(start_daemon, tmp_path):
    """Every id this pod mints begins with its token (8 hex digits, issue 23), made once per
    state root and kept in {root}/pod-token: a restart on the same root keeps it."""
    root = tmp_path / "root"
    root.mkdir()
    d = start_daemon(root=str(root))
    token = (root / "pod-token").read_text().strip()
    assert re.fullmatch(r"[0-9a-f]{8}", token), token
    ids = []
    for _ in range(2):
        r = _create(d.client, {})
        ids.append(assert_json(r)["remote_id"])
        _cleanup(d.client, r)
    d.stop_ok()
    d = start_daemon(root=str(root))
    r = _create(d.client, {})
    ids.append(assert_json(r)["remote_id"])
    _cleanup(d.client, r)
    assert all(len(i) == 40 and i[:8] == token for i in ids), (token, ids)
    assert len({i[8:] for i in ids}) == 3, ids


def test_a_malformed_pod_token_file_is_replaced(start_daemon, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "pod-token").write_text("NOT-HEX!\n")
    d = start_daemon(root=str(root))
    token = (root / "pod-token").read_text().strip()
    assert re.fullmatch(r"[0-9a-f]{8}", token), token
    r = _create(d.client, {})
    rid = assert_json(r)["remote_id"]
    _cleanup(d.client, r)
    assert rid[:8] == token
    assert "pod-token-malformed" in d.stderr_text()
