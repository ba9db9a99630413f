"""Helpers for the disk-limit tests (test_disk.py, test_crash.py): a small filesystem of the
test's own as the state root, so that what a sandbox takes from the host can be measured
exactly, and the mounts and loop devices below a path (shlib's, re-exported), cleaned up by
path even when a test fails. Python stdlib only; needs root (mount, umount)."""
import os
import shutil
import subprocess
import tempfile

from shlib import detach_all, loops_backed_below, mountinfo, mounts_below

__all__ = ["Volume", "detach_all", "loops_backed_below", "mountinfo", "mounts_below"]


class Volume:
    """A tmpfs of `size` mounted at a fresh directory: the state root of a daemon under test,
    so statvfs tells exactly how much of its volume the daemon's sandboxes took."""

    def __init__(self, size="256M"):
        self.path = tempfile.mkdtemp(prefix="sh-ct-vol-")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % size, "tmpfs",
                        self.path], check=True, timeout=30)
        self.root = os.path.join(self.path, "root")

    def used(self):
        st = os.statvfs(self.path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def close(self):
        detach_all(self.path)
        subprocess.run(["umount", "-l", self.path], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
        shutil.rmtree(self.path, ignore_errors=True)
