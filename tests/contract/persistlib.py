"""Helpers for tests/contract/test_persist*.py: whole-tree
digests, tree builders, rsync processes of a daemon (found by pid through /proc, never by
name alone). Python stdlib only."""
import hashlib
import os
import stat

from shlib import descendants, proc_table


def tree_entries(root):
    """{relative path (bytes): description} for every entry below root, links not followed.
    A description holds the type, the permission bits, and the content hash (files), the
    target (links); hard links show as the same `inode group` number."""
    root = _b(root)
    res = {}
    groups = {}

    def visit(dpath, rel):
        with os.scandir(dpath) as it:
            ents = sorted(it, key=lambda e: e.name)
        for e in ents:
            p = os.path.join(dpath, e.name)
            r = os.path.join(rel, e.name) if rel else e.name
            st = os.lstat(p)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                res[r] = ("l", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                res[r] = ("d", oct(mode))
                visit(p, r)
            elif stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                g = None
                if st.st_nlink > 1:
                    g = groups.setdefault((st.st_dev, st.st_ino), len(groups))
                res[r] = ("f", oct(mode), st.st_size, h.hexdigest(), g)
            else:
                res[r] = ("other", stat.S_IFMT(st.st_mode))

    visit(root, b"")
    return res


def tree_digest(root):
    h = hashlib.sha256()
    for k, v in sorted(tree_entries(root).items()):
        h.update(repr((k, v)).encode())
    return h.hexdigest()


def diff(a, b, limit=10):
    """A short description of how two tree_entries() results differ."""
    out = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            out.append((k, a.get(k), b.get(k)))
            if len(out) >= limit:
                break
    return out


def owners(root):
    """{(uid, gid)} of root itself and of every entry below it (links not followed)."""
    root = _b(root)
    st = os.lstat(root)
    res = {(st.st_uid, st.st_gid)}
    for dpath, dnames, fnames in os.walk(root):
        for n in dnames + fnames:
            st = os.lstat(os.path.join(dpath, n))
            res.add((st.st_uid, st.st_gid))
    return res


def _b(path):
    return path if isinstance(path, bytes) else os.fsencode(str(path))


def write(path, data, mode=0o644, uid=None):
    path = _b(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)
    if uid is not None:
        os.lchown(path, uid, uid)


def chown_tree(root, uid):
    root = _b(root)
    for dpath, dnames, fnames in os.walk(root):
        for n in dnames + fnames:
            os.lchown(os.path.join(dpath, n), uid, uid)
    os.lchown(root, uid, uid)


def fill_rich_tree(ws, n_files=3000):
    """Everything a workspace must keep through persist -> restore: contents, modes, empty
    directories, links (relative, absolute, dangling, to a directory), a sparse file, a hard
    link pair, and names with spaces, newlines and non-UTF-8 bytes; n_files small files."""
    ws = _b(ws)
    j = lambda *p: os.path.join(ws, *p)  # noqa: E731
    for i in range(n_files):
        d = j(b"many", b"d%02d" % (i % 40))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, b"f%05d.txt" % i), "wb") as f:
            f.write(b"file %d\n" % i * (i % 7 + 1))
    write(j(b"modes", b"exec.sh"), b"#!/bin/sh\necho hi\n", 0o755)
    write(j(b"modes", b"private"), b"secret-ish\n", 0o600)
    write(j(b"modes", b"readonly"), b"ro\n", 0o444)
    os.makedirs(j(b"modes", b"locked-dir"), exist_ok=True)
    write(j(b"modes", b"locked-dir", b"inside"), b"x")
    os.chmod(j(b"modes", b"locked-dir"), 0o700)
    os.makedirs(j(b"empty", b"nested", b"deeper"), exist_ok=True)
    os.makedirs(j(b"empty2"), exist_ok=True)
    os.makedirs(j(b"links"), exist_ok=True)
    os.symlink(b"../modes/exec.sh", j(b"links", b"rel"))
    os.symlink(b"/", j(b"links", b"to-root"))
    os.symlink(b"/etc/passwd", j(b"links", b"abs"))
    os.symlink(b"does/not/exist", j(b"links", b"dangling"))
    os.symlink(b"../many", j(b"links", b"dir-link"))
    # sparse: 64 MiB apparent, two small islands of data
    with open(j(b"sparse.img"), "wb") as f:
        f.truncate(64 << 20)
        f.seek(10 << 20)
        f.write(b"island-one" * 100)
        f.seek(50 << 20)
        f.write(b"island-two" * 100)
    write(j(b"hard", b"a"), b"hard linked\n")
    os.link(j(b"hard", b"a"), j(b"hard", b"b"))
    for name in (b"with space", b"new\nline", b"bad-\xff\xfe-utf8", b"tab\there",
                 b"-dash-first", b"star*?[x]", b"back\\slash", b":colon"):
        write(j(b"names", name), b"named " + name)
    os.makedirs(j(b"names", b"dir with\nnewline \xff"), exist_ok=True)
    write(j(b"names", b"dir with\nnewline \xff", b"inner \xc3\xa9"), b"deep")
    write(j(b"empty-file"), b"")


# -- processes ----------------------------------------------------------------------------

def rsyncs_of(daemon_pid):
    """[(pid, ppid)] of rsync processes descending from the daemon."""
    t = proc_table()
    return [(p, t[p][0]) for p in descendants(daemon_pid, t) if p in t and t[p][1] == b"rsync"]


def _ns_pid1(pid):
    """Whether pid is PID 1 of a PID namespace of its own (NSpid: "<ours> 1")."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for ln in f:
                if ln.startswith("NSpid:"):
                    v = ln.split()[1:]
                    return len(v) > 1 and v[-1] == "1"
    except OSError:
        pass
    return False


def top_rsyncs_of(daemon_pid):
    """The rsync of each run: the child of PID 1 of its own PID namespace below the daemon
    (PID 1 is the helper's small init; the helper's short loader trace, also named rsync, is
    not in a namespace of its own)."""
    t = proc_table()
    return [p for p in descendants(daemon_pid, t)
            if p in t and t[p][1] == b"rsync" and t[p][0] in t and _ns_pid1(t[p][0])]


def write_big(path, size, uid=None, chunk=1 << 20):
    """A file of `size` bytes of non-zero data (so that rsync -S really writes it)."""
    block = (b"0123456789abcdef" * (chunk // 16))
    with open(path, "wb") as f:
        left = size
        i = 0
        while left > 0:
            n = min(left, chunk)
            # vary the blocks a little so that nothing dedups or compresses to nothing
            f.write(block[:n - 8] + i.to_bytes(8, "little") if n >= 8 else block[:n])
            left -= n
            i += 1
    if uid is not None:
        os.lchown(path, uid, uid)
