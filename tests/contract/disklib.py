"""Helpers for the disk-limit tests (test_disk.py, test_crash.py): a small filesystem of the
test's own as the state root, so that what a sandbox takes from the host can be measured
exactly, and the mounts and loop devices below a path, cleaned up by path even when a test
fails. Python stdlib only; needs root (mount, umount)."""
import os
import shutil
import subprocess
import tempfile
import time


def _unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) + 1 and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def mountinfo(pid="self"):
    """[(mount point, root, fstype, source)] of /proc/PID/mountinfo."""
    res = []
    with open("/proc/%s/mountinfo" % pid) as f:
        for line in f:
            left, _, right = line.partition(" - ")
            lf, rf = left.split(), right.split()
            res.append((_unescape(lf[4]), _unescape(lf[3]), rf[0], _unescape(rf[1])))
    return res


def mounts_below(path):
    """Mount points strictly below `path` in this process's namespace."""
    p = os.path.realpath(str(path)).rstrip("/") + "/"
    return [mp for mp, _, _, _ in mountinfo() if mp.startswith(p)]


def loops_backed_below(path):
    """Loop devices whose backing file lies below `path` (also unlinked ones: the kernel
    shows those as 'PATH (deleted)')."""
    p = os.path.realpath(str(path)).rstrip("/") + "/"
    res = []
    for dev in sorted(os.listdir("/sys/block")):
        if not dev.startswith("loop"):
            continue
        try:
            with open("/sys/block/%s/loop/backing_file" % dev) as f:
                backing = f.read().strip()
        except OSError:
            continue
        if backing.startswith(p):
            res.append("/dev/" + dev)
    return res


def detach_all(path, timeout=10.0):
    """Detach every mount below `path`, deepest first, then every loop device still backed
    by a file below it. Returns what was found (for the caller's assertion)."""
    found = mounts_below(path)
    for mp in sorted(found, key=len, reverse=True):
        subprocess.run(["umount", "-l", mp], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
    # AUTOCLEAR devices go when their filesystem does; anything else is detached by hand.
    deadline = time.monotonic() + timeout
    loops = loops_backed_below(path)
    while loops and time.monotonic() < deadline:
        time.sleep(0.1)
        loops = loops_backed_below(path)
    for dev in loops:
        subprocess.run(["losetup", "-d", dev], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
    return found, loops


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
