"""Section 3.1: the readiness marker {root}/{rid}/.ready, outside the workspace."""
import os

import shlib
from shlib import assert_204, assert_error, assert_json, needs_root

pytestmark = needs_root


def test_new_sandbox_ready_is_false(sb):
    assert assert_json(sb.ready()) == {"ready": False}


def test_mark_ready_204_then_ready_true(sb):
    assert_204(sb.mark_ready())
    assert assert_json(sb.ready()) == {"ready": True}


def test_mark_ready_is_idempotent(sb):
    assert_204(sb.mark_ready())
    assert_204(sb.mark_ready())
    assert sb.ready_v() is True


def test_marker_is_empty_file_beside_workspace(daemon, sb):
    marker = daemon.root / sb.rid / ".ready"
    assert not os.path.lexists(marker)
    assert_204(sb.mark_ready())
    assert marker.is_file()
    assert marker.stat().st_size == 0
    assert not os.path.lexists(sb.ws / ".ready")


def test_marker_never_shows_in_walk_or_exists(sb):
    assert_204(sb.mark_ready())
    assert sb.walk_v() == []
    assert sb.walk_v("/") == []
    for p in (".ready", "/.ready", "./.ready"):
        assert sb.exists_v(p) is False, p
    assert sb.size_v(".ready") is None
    assert_error(sb.get(".ready"), 404, "FileNotFoundError")
    assert sb.du_v() == 0


def test_marker_cannot_be_reached_with_dotdot(sb):
    assert_204(sb.mark_ready())
    assert_error(sb.exists("../.ready"), 400, "BadRequest")
    assert_error(sb.get("../.ready"), 400, "BadRequest")
    assert_error(sb.delete_file("../.ready"), 400, "BadRequest")
    assert sb.ready_v() is True


def test_workspace_file_named_ready_does_not_make_ready(sb):
    sb.put_ok(".ready", b"")
    assert sb.ready_v() is False
    (sb.ws / "sub").mkdir()
    (sb.ws / "sub" / ".ready").write_bytes(b"")
    assert sb.ready_v() is False
    # the workspace's own .ready is an ordinary workspace file
    assert sb.exists_v(".ready") is True
    assert [e["path"] for e in sb.walk_v()] == [".ready", "sub/.ready"]


def test_symlink_to_marker_does_not_forge_or_reveal_it(daemon, sb):
    # a sandbox process plants links aiming at the marker; they resolve inside the workspace
    os.symlink("../.ready", sb.ws / "rel")
    os.symlink(str(daemon.root / sb.rid / ".ready"), sb.ws / "abs")
    sb.put_ok("rel", b"")  # replaces the link itself
    assert sb.ready_v() is False
    assert not os.path.lexists(daemon.root / sb.rid / ".ready")
    assert_204(sb.mark_ready())
    assert sb.exists_v("abs") is False


def test_deleting_workspace_ready_file_keeps_real_marker(sb):
    assert_204(sb.mark_ready())
    sb.put_ok(".ready", b"x")
    assert_204(sb.delete_file(".ready"))
    assert sb.ready_v() is True


def test_rmdir_and_uploads_do_not_touch_marker(sb):
    assert_204(sb.mark_ready())
    sb.put_ok("a/b", b"1")
    assert_204(sb.rmdir("a"))
    assert sb.ready_v() is True


def test_delete_sandbox_removes_marker(daemon, client):
    s = client.new_sandbox()
    assert_204(s.mark_ready())
    assert (daemon.root / s.rid / ".ready").exists()
    assert_204(s.delete())
    assert not os.path.lexists(daemon.root / s.rid / ".ready")
    assert not os.path.lexists(daemon.root / s.rid)


def test_delete_removes_the_marker_before_anything_else_of_the_sandbox(daemon, client):
    # A reader of the marker (a restore, a drain, an operator) must never see a half-removed
    # sandbox as trusted: the first change a delete makes to the sandbox's files is the
    # marker's removal. Watched from outside with inotify on every directory the delete
    # touches ({root}, where {id} is a link; the sandbox's directory, found through it; its
    # parent; the workspace), whose events the kernel queues in the order they happened.
    s = client.new_sandbox()
    s.put_ok("keep/f", b"x")
    assert_204(s.mark_ready())
    link = daemon.root / s.rid
    sbdir = os.path.realpath(link)
    I = shlib.Inotify
    every = (I.IN_CREATE | I.IN_DELETE | I.IN_MOVED_FROM | I.IN_MOVED_TO | I.IN_ATTRIB |
             I.IN_MODIFY | I.IN_CLOSE_WRITE | I.IN_DELETE_SELF | I.IN_MOVE_SELF)
    with I() as ino:
        ino.watch(daemon.root, every)
        ino.watch(os.path.dirname(sbdir), every)
        ino.watch(sbdir, every)
        ino.watch(os.path.join(sbdir, "workspace"), every)
        assert_204(s.delete())
        events = ino.read(timeout=1.0)
    # of the shared directories, only the entries of this sandbox count
    mine = [e for e in events
            if (e[0] != str(daemon.root) or e[2] == s.rid) and
            (e[0] != os.path.dirname(sbdir) or e[2] == os.path.basename(sbdir))]
    assert mine, events
    assert mine[0] == (sbdir, {"DELETE"}, ".ready"), "first change of the delete: %r" % mine[:5]
    assert not os.path.lexists(link)


def test_ready_of_unknown_sandbox_is_404(client):
    assert_error(client.get("/sandboxes/ffffffffffffffffffffffffffffffff/ready"), 404,
                 "SandboxNotFound")
    assert_error(client.post("/sandboxes/ffffffffffffffffffffffffffffffff/mark-ready"), 404,
                 "SandboxNotFound")
