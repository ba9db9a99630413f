"""Named images (issue 3, point 3; CONTRACT.md 2.1): `image` selects
{SANDBOX_HOST_IMAGES}/{name}/ as the sandbox's root filesystem, read-only; an images dir with
a `default/` makes that the default image. The images here are tiny trees holding a static
busybox, so what a command sees proves which root it runs in."""
import os
import shutil

import pytest

import execlib
from shlib import Sandbox, is_root

BUSYBOX = "/bin/busybox"

pytestmark = [
    pytest.mark.skipif(not is_root(), reason="sandboxes need root (CI runs as root)"),
    pytest.mark.skipif(not os.path.exists(BUSYBOX), reason="busybox-static is not installed"),
]


def make_image(path, marker):
    (path / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, path / "bin" / "busybox")
    os.symlink("busybox", path / "bin" / "sh")
    (path / "etc").mkdir()
    (path / "etc" / "marker").write_text(marker)


def sandbox(d, body):
    r = d.client.create(body)
    assert r.status == 200, r
    return Sandbox(d.client, r.json()["remote_id"])


def test_named_image_is_the_sandbox_root_and_read_only(start_daemon, tmp_path):
    images = tmp_path / "images"
    make_image(images / "tiny", "tiny-image")
    d = start_daemon(env={"SANDBOX_HOST_IMAGES": str(images)})
    sb = sandbox(d, {"image": "tiny"})
    st = execlib.ok(sb, ["/bin/busybox", "cat", "/etc/marker"])
    assert st.out == b"tiny-image"
    # The host's own system directories are not there: only the image, and the sandbox's own.
    st = execlib.ok(sb, ["/bin/busybox", "ls", "/"])
    top = set(st.out.decode().split())
    assert top == {"bin", "etc", "workspace", "tmp", "proc", "dev", "tools", "var"}, top
    st = execlib.run(sb, ["/bin/busybox", "touch", "/etc/new"])
    assert st.final["exit"] != 0, "the image is writable from inside"
    assert not (images / "tiny" / "etc" / "new").exists()
    # PATH search and the workspace work as in the default image.
    st = execlib.ok(sb, ["sh", "-c", "echo hi > f && busybox cat f && busybox pwd"],
                    env={"PATH": "/bin"})
    assert st.out == b"hi\n/workspace\n"


def test_images_default_dir_is_the_default_image(start_daemon, tmp_path):
    images = tmp_path / "images"
    make_image(images / "default", "the-default")
    d = start_daemon(env={"SANDBOX_HOST_IMAGES": str(images)})
    for body in ({}, {"image": "default"}, {"image": None}):
        sb = sandbox(d, body)
        st = execlib.ok(sb, ["/bin/busybox", "cat", "/etc/marker"])
        assert st.out == b"the-default"


def test_without_images_dir_the_default_image_is_the_hosts_system(start_daemon):
    d = start_daemon()
    sb = sandbox(d, {})
    st = execlib.ok(sb, ["sh", "-c", "test -x /usr/bin/env && ls /"])
    top = set(st.out.decode().split())
    assert {"usr", "etc", "bin", "workspace", "tmp", "proc", "dev", "tools"} <= top
    assert not top & {"root", "home", "run", "srv", "opt", "mnt"}, top
    # /var is the sandbox's own (an empty directory with its /var/tmp), never the host's
    st = execlib.ok(sb, ["ls", "-A", "/var"])
    assert st.out == b"tmp\n"


def test_var_tmp_is_writable_in_an_image_without_var(start_daemon, tmp_path):
    # OPENSANDBOX.md section 3: at least /var, with /var/tmp writable like /tmp
    images = tmp_path / "images"
    make_image(images / "tiny", "tiny-image")
    d = start_daemon(env={"SANDBOX_HOST_IMAGES": str(images)})
    sb = sandbox(d, {"image": "tiny"})
    st = execlib.ok(sb, ["/bin/busybox", "sh", "-c",
                         "echo x > /var/tmp/f && /bin/busybox cat /var/tmp/f && "
                         "/bin/busybox awk '$2 == \"/var/tmp\" {print $3}' /proc/self/mounts"])
    assert st.out == b"x\ntmpfs\n"
    assert not (images / "tiny" / "var").exists(), "the image itself was changed"


def test_an_images_own_var_is_kept_read_only_with_a_writable_var_tmp(start_daemon, tmp_path):
    images = tmp_path / "images"
    make_image(images / "tiny", "tiny-image")
    (images / "tiny" / "var" / "tmp").mkdir(parents=True)
    (images / "tiny" / "var" / "lib").mkdir()
    (images / "tiny" / "var" / "lib" / "marker").write_text("image-var")
    d = start_daemon(env={"SANDBOX_HOST_IMAGES": str(images)})
    sb = sandbox(d, {"image": "tiny"})
    st = execlib.ok(sb, ["/bin/busybox", "sh", "-c",
                         "/bin/busybox cat /var/lib/marker && echo y > /var/tmp/g && "
                         "/bin/busybox cat /var/tmp/g"])
    assert st.out == b"image-vary\n"
    st = execlib.run(sb, ["/bin/busybox", "touch", "/var/new"])
    assert st.final["exit"] != 0, "the image's /var is writable from inside"
    assert os.listdir(images / "tiny" / "var" / "tmp") == []


def test_an_images_var_link_is_left_as_a_link(start_daemon, tmp_path):
    # a mount never lands where an image's link points
    images = tmp_path / "images"
    make_image(images / "tiny", "tiny-image")
    (images / "tiny" / "data").mkdir()
    os.symlink("data", images / "tiny" / "var")
    d = start_daemon(env={"SANDBOX_HOST_IMAGES": str(images)})
    sb = sandbox(d, {"image": "tiny"})
    st = execlib.ok(sb, ["/bin/busybox", "readlink", "/var"])
    assert st.out == b"data\n"
    assert not (images / "tiny" / "data" / "tmp").exists()

