"""Images for the image tests, made offline as OCI layouts written by Python, and pushed.

    lay = Layout(tmpdir)                       # an OCI image layout (oci-layout, index.json, blobs/)
    m = busybox(lay, tag="1")                  # an image's manifest descriptor, tagged in index.json
    push(lay, "1", reg, "test/busybox:1")      # skopeo copy oci:DIR:1 docker://HOST/test/busybox:1

Layers are tar archives written with tarfile from entry lists (see tar_layer), compressed
with gzip (mtime 0), zstd (the zstd binary) or not at all. push() uses skopeo with
--preserve-digests (layers are never recompressed); push_http() speaks the distribution
API itself (monolithic blob upload, manifest PUT) for what skopeo would refuse or rewrite:
Docker media types, hostile layers, 10,000-layer manifests.
"""
import base64
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = {
    "plain": "application/vnd.oci.image.layer.v1.tar",
    "gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
}
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = {
    "gzip": "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "plain": "application/vnd.docker.image.rootfs.diff.tar",
}

SKOPEO = os.environ.get("SH_SKOPEO", "/usr/bin/skopeo")
UMOCI = os.environ.get("SH_UMOCI", "/usr/bin/umoci")
MTIME = 1700000000  # every entry's mtime: layers are byte-for-byte reproducible


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- layers


def tar_layer(entries):
    """An uncompressed tar from entries, each a tuple:
        ("dir", path[, mode])          ("file", path, bytes[, mode])
        ("symlink", path, target)      ("hardlink", path, target)
        ("chardev"|"blockdev", path, major, minor)    ("fifo", path)
    path is written into the archive exactly as given (no normalisation: hostile layers
    need "../x" and "/x"); owner 0:0 unless a dict {"uid":, "gid":} ends the tuple."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            owner = e[-1] if isinstance(e[-1], dict) else {}
            if owner:
                e = e[:-1]
            kind, path = e[0], e[1]
            ti = tarfile.TarInfo(path)
            ti.mtime = MTIME
            ti.uid = owner.get("uid", 0)
            ti.gid = owner.get("gid", 0)
            ti.uname = ti.gname = ""
            data = None
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
                ti.mode = e[2] if len(e) > 2 else 0o755
            elif kind == "file":
                data = e[2]
                ti.type = tarfile.REGTYPE
                ti.mode = e[3] if len(e) > 3 else 0o644
                ti.size = len(data)
            elif kind == "symlink":
                ti.type = tarfile.SYMTYPE
                ti.linkname = e[2]
                ti.mode = 0o777
            elif kind == "hardlink":
                ti.type = tarfile.LNKTYPE
                ti.linkname = e[2]
                ti.mode = 0o644
            elif kind in ("chardev", "blockdev"):
                ti.type = tarfile.CHRTYPE if kind == "chardev" else tarfile.BLKTYPE
                ti.devmajor, ti.devminor = e[2], e[3]
                ti.mode = 0o666
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
                ti.mode = 0o644
            else:
                raise ValueError(f"entry kind {kind!r}")
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def compress(data, how):
    if how == "plain":
        return data
    if how == "gzip":
        return gzip.compress(data, compresslevel=6, mtime=0)
    if how == "zstd":
        try:
            import zstandard

            return zstandard.ZstdCompressor(level=3).compress(data)
        except ImportError:
            return subprocess.run(["zstd", "-q", "-c", "-3"], input=data, check=True,
                                  capture_output=True).stdout
    raise ValueError(f"compression {how!r}")


# ---------------------------------------------------------------- the OCI layout

_COMPRESSED = {}  # (diff_id, compression) -> compressed bytes, for this process


class Layout:
    """An OCI image layout in dir: blobs/sha256/<hex>, oci-layout, index.json (written at
    every tag() so the directory is always a valid layout)."""

    def __init__(self, dir):
        self.dir = dir
        os.makedirs(os.path.join(dir, "blobs", "sha256"), exist_ok=True)
        with open(os.path.join(dir, "oci-layout"), "w") as f:
            json.dump({"imageLayoutVersion": "1.0.0"}, f)
        self.index = []
        self._write_index()

    def blob_path(self, digest):
        return os.path.join(self.dir, "blobs", "sha256", digest.split(":", 1)[1])

    def add_blob(self, data, media_type):
        d = sha256(data)
        p = self.blob_path(d)
        if not os.path.exists(p):
            with open(p + ".tmp", "wb") as f:
                f.write(data)
            os.rename(p + ".tmp", p)
        return {"mediaType": media_type, "digest": d, "size": len(data)}

    def add_blob_file(self, path, media_type):
        """A blob from a file (streamed, for large layers); the file is moved in."""
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        d = "sha256:" + h.hexdigest()
        size = os.path.getsize(path)
        p = self.blob_path(d)
        if os.path.exists(p):
            os.unlink(path)
        else:
            shutil.move(path, p)
        return {"mediaType": media_type, "digest": d, "size": size}

    def read_blob(self, digest):
        with open(self.blob_path(digest), "rb") as f:
            return f.read()

    def add_layer(self, entries_or_tar, compression="gzip", docker=False):
        """A layer from tar_layer entries (or a tar's bytes): (descriptor, diff_id)."""
        tar = entries_or_tar if isinstance(entries_or_tar, bytes) else tar_layer(entries_or_tar)
        mt = (DOCKER_LAYER if docker else OCI_LAYER)[compression]
        key = (sha256(tar), compression)
        if key not in _COMPRESSED:  # busybox's 2 MB are in many images: compress once
            _COMPRESSED[key] = compress(tar, compression)
        return self.add_blob(_COMPRESSED[key], mt), key[0]

    def add_image(self, layers, tag=None, env=None, workdir=None, cmd=None, arch=None,
                  os_="linux", variant=None, docker=False, annotations=None, diff_ids=None):
        """A manifest over layers ([(descriptor, diff_id)], lowest first) and its config;
        tagged in index.json when tag is given; arch None: this machine's (and its variant).
        Returns the manifest's descriptor (with its platform)."""
        if arch is None:
            arch, variant = host_arch()[0], variant or host_arch()[1]
        config = {
            "created": "2023-11-14T22:13:20Z",
            "architecture": arch,
            "os": os_,
            "config": {
                "Env": env if env is not None else
                ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            },
            "rootfs": {"type": "layers",
                       "diff_ids": diff_ids if diff_ids is not None else [d for _, d in layers]},
        }
        if variant:
            config["variant"] = variant
        if workdir:
            config["config"]["WorkingDir"] = workdir
        if cmd:
            config["config"]["Cmd"] = cmd
        cdesc = self.add_blob(json.dumps(config, sort_keys=True).encode(),
                              DOCKER_CONFIG if docker else OCI_CONFIG)
        manifest = {
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST if docker else OCI_MANIFEST,
            "config": cdesc,
            "layers": [d for d, _ in layers],
        }
        if annotations:
            manifest["annotations"] = annotations
        mdesc = self.add_blob(json.dumps(manifest, sort_keys=True).encode(),
                              manifest["mediaType"])
        mdesc["platform"] = {"architecture": arch, "os": os_}
        if variant:
            mdesc["platform"]["variant"] = variant
        if tag:
            self.tag(mdesc, tag)
        return mdesc

    def add_index(self, manifests, tag=None, docker=False):
        """An image index (OCI) or manifest list (Docker) over manifest descriptors."""
        idx = {"schemaVersion": 2, "mediaType": DOCKER_LIST if docker else OCI_INDEX,
               "manifests": manifests}
        desc = self.add_blob(json.dumps(idx, sort_keys=True).encode(), idx["mediaType"])
        if tag:
            self.tag(desc, tag)
        return desc

    def tag(self, desc, tag):
        d = {k: v for k, v in desc.items() if k != "platform"}
        d["annotations"] = {"org.opencontainers.image.ref.name": tag}
        self.index = [e for e in self.index
                      if e["annotations"]["org.opencontainers.image.ref.name"] != tag]
        self.index.append(d)
        self._write_index()

    def _write_index(self):
        with open(os.path.join(self.dir, "index.json.tmp"), "w") as f:
            json.dump({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": self.index}, f)
        os.rename(os.path.join(self.dir, "index.json.tmp"), os.path.join(self.dir, "index.json"))

    def tagged(self, tag):
        for e in self.index:
            if e["annotations"]["org.opencontainers.image.ref.name"] == tag:
                return e
        raise KeyError(tag)


# ---------------------------------------------------------------- pushing


def _policy(dir):
    p = os.path.join(dir, "policy.json")
    if not os.path.exists(p):
        with open(p, "w") as f:
            json.dump({"default": [{"type": "insecureAcceptAnything"}]}, f)
    return p


def skopeo_env(dir):
    """An environment for skopeo that reads no user or host registries.conf/auth state."""
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": dir, "TMPDIR": dir,
            "XDG_RUNTIME_DIR": dir, "REGISTRY_AUTH_FILE": os.path.join(dir, "auth.json")}


def skopeo(args, timeout=300, check=True):
    """Run skopeo with a policy that accepts anything and a private HOME; returns the
    CompletedProcess (stderr in the exception's message when check fails)."""
    with tempfile.TemporaryDirectory(prefix="sh-skopeo-") as d:
        cmd = [SKOPEO, "--policy", _policy(d), "--insecure-policy"] + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=skopeo_env(d), stdin=subprocess.DEVNULL)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def push(layout, tag, reg, name, creds=True, all_=False):
    """skopeo copy oci:LAYOUT:TAG docker://HOST/NAME, layers kept byte for byte. name is
    "repo:tag" (or "repo" to keep tag). all_: every instance of an index (--all)."""
    if ":" not in name.rsplit("/", 1)[-1]:
        name = f"{name}:{tag}"
    args = ["copy", "--quiet", "--preserve-digests"]
    if all_:
        args.append("--all")
    if reg.ca is not None:
        args += ["--dest-cert-dir", reg.ca.cert_dir]
    else:
        args.append("--dest-tls-verify=false")
    if creds and reg.creds:
        args += ["--dest-creds", reg.creds]
    args += [f"oci:{layout.dir}:{tag}", f"docker://{reg.host}/{name}"]
    skopeo(args)
    return f"{reg.host}/{name}"


class Client:
    """The distribution API spoken from Python: enough to push and fetch what skopeo would
    refuse or rewrite. Basic credentials, or the bearer flow against a token realm."""

    def __init__(self, reg, creds=True):
        self.reg = reg
        self.creds = reg.creds if creds else None
        self.ctx = reg.ssl_context()
        self.token = {}

    def _basic(self):
        return "Basic " + base64.b64encode(self.creds.encode()).decode()

    def _bearer(self, challenge, scope_key):
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = params.pop("realm")
        req = urllib.request.Request(realm + "?" + urllib.parse.urlencode(params))
        if self.creds:
            req.add_header("Authorization", self._basic())
        with urllib.request.urlopen(req, timeout=30, context=self.ctx) as r:
            tok = json.load(r)
        self.token[scope_key] = tok.get("token") or tok.get("access_token")

    def request(self, method, path, data=None, headers=None, scope_key="", url=None):
        for attempt in range(2):
            req = urllib.request.Request(url or self.reg.url + path, data=data, method=method)
            for k, v in (headers or {}).items():
                req.add_header(k, v)
            if self.token.get(scope_key):
                req.add_header("Authorization", "Bearer " + self.token[scope_key])
            elif self.creds and self.reg.mode == "htpasswd":
                req.add_header("Authorization", self._basic())
            try:
                r = urllib.request.urlopen(req, timeout=120, context=self.ctx)
                body = r.read()
                r.close()
                return r.status, dict(r.headers), body
            except urllib.error.HTTPError as e:
                ch = e.headers.get("WWW-Authenticate", "")
                if e.code == 401 and attempt == 0 and ch.lower().startswith("bearer"):
                    self._bearer(ch, scope_key)
                    continue
                return e.code, dict(e.headers), e.read()
        return 401, {}, b""

    def put_blob(self, name, data, digest=None):
        """Monolithic upload (POST, then PUT ?digest=); digest defaults to the true one."""
        digest = digest or sha256(data)
        st, h, _ = self.request("HEAD", f"/v2/{name}/blobs/{digest}", scope_key=name)
        if st == 200:
            return digest
        st, h, body = self.request("POST", f"/v2/{name}/blobs/uploads/", data=b"",
                                   scope_key=name)
        if st != 202:
            raise RuntimeError(f"blob upload start: {st} {body[:300]!r}")
        loc = urllib.parse.urljoin(self.reg.url + "/", h["Location"])
        loc += ("&" if "?" in loc else "?") + "digest=" + urllib.parse.quote(digest)
        st, h, body = self.request("PUT", "", data=data, url=loc, scope_key=name,
                                   headers={"Content-Type": "application/octet-stream"})
        if st != 201:
            raise RuntimeError(f"blob upload {digest}: {st} {body[:300]!r}")
        return digest

    def put_manifest(self, name, ref, data, media_type):
        st, h, body = self.request("PUT", f"/v2/{name}/manifests/{ref}", data=data,
                                   headers={"Content-Type": media_type}, scope_key=name)
        if st != 201:
            raise RuntimeError(f"manifest PUT {name}:{ref}: {st} {body[:500]!r}")
        return h.get("Docker-Content-Digest")

    def get_manifest(self, name, ref, accept=(OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST,
                                              DOCKER_LIST)):
        return self.request("GET", f"/v2/{name}/manifests/{ref}",
                            headers={"Accept": ", ".join(accept)}, scope_key=name)

    def get_blob(self, name, digest):
        return self.request("GET", f"/v2/{name}/blobs/{digest}", scope_key=name)


def push_http(layout, desc, reg, name, tag, creds=True):
    """Push the manifest or index desc of layout and everything it references through the
    distribution API, bytes as they are (no validation, no conversion)."""
    c = Client(reg, creds=creds)
    _push_tree(c, layout, desc, name, None)
    c.put_manifest(name, tag, layout.read_blob(desc["digest"]), desc["mediaType"])
    return f"{reg.host}/{name}:{tag}"


def _push_tree(c, layout, desc, name, ref):
    doc = json.loads(layout.read_blob(desc["digest"]))
    if "manifests" in doc:
        for m in doc["manifests"]:
            _push_tree(c, layout, m, name, m["digest"])
    else:
        pushed = set()
        for b in [doc["config"]] + doc["layers"]:
            if b["digest"] not in pushed:
                c.put_blob(name, layout.read_blob(b["digest"]))
                pushed.add(b["digest"])
    if ref:
        c.put_manifest(name, ref, layout.read_blob(desc["digest"]), desc["mediaType"])


# ---------------------------------------------------------------- images

BUSYBOX = "/bin/busybox"
BUSYBOX_APPLETS = ("sh", "ls", "cat", "id", "echo", "env", "pwd", "mkdir", "rm", "cp", "mv",
                   "touch", "stat", "sleep", "true", "false", "test", "head", "tail", "wc",
                   "grep", "sed", "find", "chmod", "readlink", "uname", "whoami", "printf",
                   "sha256sum", "mknod", "ln", "df", "mount", "ps")


def busybox_available():
    """None when /bin/busybox is busybox-static (no dynamic loader needed), else why not."""
    if not os.access(BUSYBOX, os.X_OK):
        return f"{BUSYBOX} missing (Debian package busybox-static)"
    with open(BUSYBOX, "rb") as f:
        head = f.read(1 << 16)
    if b"/lib64/ld-linux" in head or b"/lib/ld-linux" in head:
        return f"{BUSYBOX} is dynamically linked (install busybox-static)"
    return None


def busybox_entries():
    with open(BUSYBOX, "rb") as f:
        bb = f.read()
    e = [("dir", "bin"), ("file", "bin/busybox", bb, 0o755)]
    e += [("symlink", f"bin/{a}", "busybox") for a in BUSYBOX_APPLETS]
    e += [("dir", "etc"), ("file", "etc/passwd",
                            b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n"),
          ("file", "etc/group", b"root:x:0:\nnogroup:x:65534:\n"),
          ("dir", "root", 0o700), ("dir", "tmp", 0o1777), ("dir", "home"),
          ("dir", "usr"), ("dir", "usr/local"), ("dir", "usr/local/bin"),
          ("dir", "var"), ("dir", "proc"), ("dir", "dev"), ("dir", "workspace", 0o777)]
    return e


def busybox(layout, tag="latest", compression="gzip", docker=False, **kw):
    """A one-layer busybox-static image: /bin/busybox and its applets as symlinks."""
    layer = layout.add_layer(busybox_entries(), compression, docker=docker)
    return layout.add_image([layer], tag=tag, docker=docker, **kw)


# ---------------------------------------------------------------- the python image (mmdebstrap)

PY_SUITE = "bookworm"
PY_VARIANT = "apt"
PY_INCLUDE = ("python3", "python3-pip", "python3-venv")
PY_SOURCES = "/etc/apt/sources.list.d/debian.sources"
PY_DPKGOPTS = ("path-exclude=/usr/share/man/*", "path-exclude=/usr/share/locale/*",
               "path-include=/usr/share/locale/locale.alias", "path-exclude=/usr/share/doc/*",
               "path-include=/usr/share/doc/*/copyright")
PY_ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]
PY_TAG = "3"


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def image_cache_dir():
    return os.environ.get("SH_IMAGE_CACHE") or os.path.join(repo_root(), "build", "image-cache")


def _sources():
    """The machine's apt sources for the suite (deb822 file), or None: mmdebstrap's default."""
    try:
        with open(PY_SOURCES) as f:
            return f.read()
    except OSError:
        return None


def python_key():
    """What the python image is made from: its cache key (the mmdebstrap version, the
    options, the apt sources, the architecture)."""
    try:
        ver = subprocess.run(["mmdebstrap", "--version"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        ver = "none"
    inputs = {"suite": PY_SUITE, "variant": PY_VARIANT, "include": PY_INCLUDE,
              "dpkgopts": PY_DPKGOPTS, "env": PY_ENV, "sources": _sources(),
              "mmdebstrap": ver, "arch": os.uname().machine, "format": 1}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def python_layout_cached():
    """The cached python image's layout dir if it is complete, else None (never builds)."""
    d = os.path.join(image_cache_dir(), f"python-{python_key()}")
    return d if os.path.exists(os.path.join(d, "index.json")) else None


def python_image(timeout=1800, log=None):
    """The Debian bookworm image with python3, python3-pip, python3-venv, one gzip layer,
    tagged PY_TAG: (Layout, manifest descriptor). Built by mmdebstrap (variant apt, the
    machine's apt sources) into build/image-cache/python-<key>/ only when missing; a lock
    keeps two builders from racing. Raises RuntimeError with the reason when it cannot be
    built (the caller skips). The cached layout is shared: never write into it."""
    import fcntl

    cache = image_cache_dir()
    key = python_key()
    final = os.path.join(cache, f"python-{key}")
    os.makedirs(cache, exist_ok=True)
    with open(os.path.join(cache, f".lock-python-{key}"), "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(final, "index.json")):
            _build_python(cache, final, timeout, log)
    lay = Layout.__new__(Layout)
    lay.dir = final
    with open(os.path.join(final, "index.json")) as f:
        lay.index = json.load(f)["manifests"]
    return lay, lay.tagged(PY_TAG)


def _build_python(cache, final, timeout, log):
    if shutil.which("mmdebstrap") is None:
        raise RuntimeError("mmdebstrap missing (Debian package mmdebstrap)")
    if os.geteuid() != 0:
        raise RuntimeError("building the python image needs root (mmdebstrap's root mode)")
    work = tempfile.mkdtemp(prefix="python-build-", dir=cache)
    try:
        raw = os.path.join(work, "rootfs.tar")
        cmd = ["mmdebstrap", "--quiet", f"--variant={PY_VARIANT}", "--mode=root",
               "--include=" + ",".join(PY_INCLUDE), "--format=tar"]
        cmd += [f"--dpkgopt={o}" for o in PY_DPKGOPTS]
        # no apt lists or caches in the image
        cmd += ["--customize-hook=rm -rf \"$1\"/var/lib/apt/lists/* \"$1\"/var/cache/apt/*.bin"]
        cmd += [PY_SUITE, raw]
        if _sources() is not None:
            cmd.append(PY_SOURCES)
        t0 = time.monotonic()
        errf = os.path.join(work, "mmdebstrap.err")
        with open(errf, "wb") as err:
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                 stdin=subprocess.DEVNULL, start_new_session=True,
                                 env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR": work,
                                      "LC_ALL": "C"})
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(p)
                raise RuntimeError(f"mmdebstrap did not finish in {timeout} s")
        if rc != 0:
            with open(errf, errors="replace") as f:
                raise RuntimeError(f"mmdebstrap failed (exit {rc}): {f.read().strip()[-2000:]}")
        # device nodes out (mmdebstrap's root mode puts /dev/null & co in the tar): an
        # image layer has none, the unpacker refuses them
        tar = os.path.join(work, "layer.tar")
        _strip_devices(raw, tar)
        os.unlink(raw)
        h = hashlib.sha256()
        with open(tar, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        diff_id = "sha256:" + h.hexdigest()
        gz = os.path.join(work, "layer.tar.gz")
        with open(tar, "rb") as src, open(gz, "wb") as dst:
            subprocess.run(["gzip", "-n", "-6", "-c"], stdin=src, stdout=dst, check=True)
        os.unlink(tar)
        out = os.path.join(work, "layout")
        lay = Layout(out)
        ldesc = lay.add_blob_file(gz, OCI_LAYER["gzip"])
        lay.add_image([(ldesc, diff_id)], tag=PY_TAG, env=PY_ENV, cmd=["python3"])
        with open(os.path.join(out, "build-info.json"), "w") as f:
            json.dump({"seconds": round(time.monotonic() - t0, 1), "command": cmd}, f)
        if log:
            log(f"python image built in {time.monotonic() - t0:.0f} s")
        os.rename(out, final)
    finally:
        _remove_build_dir(work)


def _kill_group(p):
    """Stop mmdebstrap and what it started: its own process group (it is our child, started
    in a session of its own), TERM then KILL."""
    import signal

    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            break
        try:
            p.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            pass


def _mounts_under(path):
    path = os.path.realpath(path)
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp == path or mp.startswith(path + "/"):
                out.append(mp)
    return sorted(out, key=len, reverse=True)


def _remove_build_dir(work):
    """Remove a build dir; a chroot's proc/sys/dev mounts left by a killed mmdebstrap are
    unmounted first (lazily, deepest first), and the dir is left in place, never walked
    into a mount, if one stays."""
    for mp in _mounts_under(work):
        subprocess.run(["umount", "-l", mp], capture_output=True)
    if _mounts_under(work):
        raise RuntimeError(f"mounts left under {work}: not removed")
    shutil.rmtree(work, ignore_errors=True)


def _strip_devices(src, dst):
    """Copy a tar without its character/block devices and FIFOs, byte-exact otherwise."""
    with tarfile.open(src, "r:") as tin, tarfile.open(dst, "w:", format=tarfile.PAX_FORMAT) as tout:
        for ti in tin:
            if ti.ischr() or ti.isblk() or ti.isfifo():
                continue
            tout.addfile(ti, tin.extractfile(ti) if ti.isreg() else None)


# ---------------------------------------------------------------- more images


def host_arch():
    """The OCI architecture (and variant) of this machine."""
    m = os.uname().machine
    return {"x86_64": ("amd64", None), "aarch64": ("arm64", "v8"), "armv7l": ("arm", "v7"),
            "i686": ("386", None), "ppc64le": ("ppc64le", None), "s390x": ("s390x", None),
            "riscv64": ("riscv64", None)}.get(m, (m, None))


# What the whiteout image shows once its layers are merged (as overlayfs would):
WHITEOUT_EXPECT = {
    "present": ["etc/keep", "opt/old/c", "data/x", "data/new", "etc/replaced"],
    "absent": ["etc/gone", "opt/old/a", "opt/old/b", "data/sub"],
    "content": {"etc/replaced": b"upper\n", "etc/keep": b"keep\n"},
}


def whiteout_layers(layout, compression="gzip"):
    """Two layers over nothing: the lower has etc/{keep,gone,replaced}, opt/old/{a,b},
    data/{x,sub/}; the upper whites out etc/gone (.wh.gone) and data/sub, makes opt/old
    opaque (.wh..wh..opq) with a new c, and replaces etc/replaced. WHITEOUT_EXPECT says
    what the merged tree shows."""
    lower = layout.add_layer([
        ("dir", "etc"), ("file", "etc/keep", b"keep\n"), ("file", "etc/gone", b"gone\n"),
        ("file", "etc/replaced", b"lower\n"),
        ("dir", "opt"), ("dir", "opt/old"), ("file", "opt/old/a", b"a\n"),
        ("file", "opt/old/b", b"b\n"),
        ("dir", "data"), ("file", "data/x", b"x\n"), ("dir", "data/sub"),
        ("file", "data/sub/y", b"y\n"),
    ], compression)
    upper = layout.add_layer([
        ("dir", "etc"), ("file", "etc/.wh.gone", b""), ("file", "etc/replaced", b"upper\n"),
        ("dir", "opt"), ("dir", "opt/old"), ("file", "opt/old/.wh..wh..opq", b""),
        ("file", "opt/old/c", b"c\n"),
        ("dir", "data"), ("file", "data/.wh.sub", b""), ("file", "data/new", b"new\n"),
    ], compression)
    return [lower, upper]


def whiteout_image(layout, tag="whiteout", compression="gzip"):
    """busybox + the two whiteout layers (WHITEOUT_EXPECT), runnable."""
    base = layout.add_layer(busybox_entries(), compression)
    return layout.add_image([base] + whiteout_layers(layout, compression), tag=tag)


def compression_images(layout):
    """busybox with its layer in each compression, tagged "gzip", "zstd", "plain", and
    "mixed": busybox (gzip) + a zstd layer (/etc/zstd-layer) + a plain one (/etc/plain-layer)."""
    out = {}
    for c in ("gzip", "zstd", "plain"):
        out[c] = busybox(layout, tag=c, compression=c)
    base = layout.add_layer(busybox_entries(), "gzip")
    z = layout.add_layer([("dir", "etc"), ("file", "etc/zstd-layer", b"zstd\n")], "zstd")
    p = layout.add_layer([("dir", "etc"), ("file", "etc/plain-layer", b"plain\n")], "plain")
    out["mixed"] = layout.add_image([base, z, p], tag="mixed")
    return out


BOGUS_PLATFORM = ("bogus-os", "bogus-arch")


def multiarch(layout, tag="multi", docker=False):
    """An index (OCI) or manifest list (Docker) of three images: this machine's arch
    (busybox; /etc/platform says it), the other of amd64/arm64 (only /etc/platform), and a
    bogus platform (bogus-os/bogus-arch). Returns the index's descriptor."""
    arch, variant = host_arch()
    other = ("arm64", "v8") if arch != "arm64" else ("amd64", None)
    ms = []
    for a, v, os_ in ((arch, variant, "linux"), (other[0], other[1], "linux"),
                      (BOGUS_PLATFORM[1], None, BOGUS_PLATFORM[0])):
        ents = [("dir", "etc"), ("file", "etc/platform", f"{os_}/{a}\n".encode())]
        if a == arch and os_ == "linux":
            ents = busybox_entries() + ents[1:]
        layer = layout.add_layer(ents, "gzip", docker=docker)
        ms.append(layout.add_image([layer], arch=a, variant=v, os_=os_, docker=docker))
    return layout.add_index(ms, tag=tag, docker=docker)


def docker_image(layout, tag="docker"):
    """busybox as a Docker schema 2 image (Docker media types: push it with push_http)."""
    return busybox(layout, tag=tag, docker=True)


# ---------------------------------------------------------------- hostile layers

CANARY_SRC = r"""
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void sh_canary(void) {
    int fd = open("%s", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { (void)write(fd, "loaded\n", 7); close(fd); }
}
void gconv_init(void) {}
void gconv(void) {}
"""


def canary_so(marker, workdir):
    """A shared object that appends "loaded" to marker when any program loads it (its
    constructor): the payload of the host-program-loads-the-image attack. None without cc."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    src = os.path.join(workdir, "canary.c")
    out = os.path.join(workdir, "canary.so")
    with open(src, "w") as f:
        f.write(CANARY_SRC % marker)
    p = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", out, src], capture_output=True)
    if p.returncode != 0:
        return None
    with open(out, "rb") as f:
        return f.read()


def hostile_entries(marker="/tmp/sh-canary-loaded", so=None):
    """The attack list's layers as tar_layer entries, by name. Each must be refused by the
    unpacker with the entry named (or, for "loadable", unpacked and never loaded):
      dotdot      "../" paths                        absolute    "/etc/..." paths
      symlink     a symlink to /, then a file written through it
      symlink_rel a symlink to ../../.., then a file through it
      hardlink    a hard link to /etc/passwd          hardlink_up a hard link to ../../etc/shadow
      chardev     /dev/mem-like device node           blockdev    a block device
      fifo        a FIFO
      loadable    ld.so.preload, gconv-modules, nsswitch.conf naming a library of the image
                  (so: a canary .so writing marker when loaded; a stub without cc)"""
    so = so if so is not None else b"\x7fELF not really a library\n"
    return {
        "dotdot": [("file", "../sh-escape-dotdot", b"escaped\n"),
                   ("dir", "a"), ("file", "a/../../sh-escape-dotdot2", b"escaped\n")],
        "absolute": [("file", "/tmp/sh-escape-absolute", b"escaped\n")],
        "symlink": [("symlink", "link", "/"), ("file", "link/tmp/sh-escape-symlink", b"x\n")],
        "symlink_rel": [("dir", "d"), ("symlink", "d/up", "../../../../../../.."),
                        ("file", "d/up/tmp/sh-escape-symlink-rel", b"x\n")],
        "hardlink": [("hardlink", "passwd", "/etc/passwd")],
        "hardlink_up": [("hardlink", "shadow", "../../../../etc/shadow")],
        "chardev": [("dir", "dev"), ("chardev", "dev/mem", 1, 1)],
        "blockdev": [("dir", "dev"), ("blockdev", "dev/sda", 8, 0)],
        "fifo": [("fifo", "pipe")],
        "loadable": [
            ("dir", "etc"), ("file", "etc/ld.so.preload", b"/usr/lib/sh-canary.so\n"),
            ("file", "etc/nsswitch.conf", b"passwd: canary files\ngroup: canary files\n"),
            ("dir", "usr"), ("dir", "usr/lib"), ("file", "usr/lib/sh-canary.so", so, 0o755),
            ("file", "usr/lib/libnss_canary.so.2", so, 0o755),
            ("dir", "usr/lib/x86_64-linux-gnu"), ("dir", "usr/lib/x86_64-linux-gnu/gconv"),
            ("file", "usr/lib/x86_64-linux-gnu/gconv/gconv-modules",
             b"module  INTERNAL  CANARY//  ../../../sh-canary  1\n"
             b"module  CANARY//  INTERNAL  ../../../sh-canary  1\n"),
            ("file", "usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache", b"\0" * 64),
            ("dir", "usr/lib/sh-canary.so.d"),
        ],
    }


def hostile_image(layout, name, tag=None, compression="gzip", **kw):
    """An image whose only layer is hostile_entries()[name] (kw go to hostile_entries)."""
    layer = layout.add_layer(hostile_entries(**kw)[name], compression)
    return layout.add_image([layer], tag=tag or f"hostile-{name}")


def bomb_layer(layout, gib=16, how="gzip"):
    """A decompression bomb: a tar with one regular file of gib GiB of zeros, gzip'd (or
    zstd'd), made without writing the zeros anywhere: one compressed member of 64 MiB of
    zeros repeated (gzip members and zstd frames concatenate). A few MiB on disk. Returns
    (descriptor, diff_id); the diff_id is the true one (computed streaming)."""
    chunk = 64 << 20
    size = gib << 30
    ti = tarfile.TarInfo("zeros")
    ti.size, ti.mtime, ti.mode = size, MTIME, 0o644
    header = ti.tobuf(format=tarfile.PAX_FORMAT)
    trailer = b"\0" * 1024  # size is a multiple of 512: no padding, then two zero blocks
    zeros = b"\0" * chunk
    diff_id = _bomb_diff_id(header, zeros, size // chunk, trailer)
    member = compress(zeros, how)
    path = os.path.join(layout.dir, "bomb.tmp")
    with open(path, "wb") as f:
        f.write(compress(header, how))
        for _ in range(size // chunk):
            f.write(member)
        f.write(compress(trailer, how))
    return layout.add_blob_file(path, OCI_LAYER[how]), diff_id


def _bomb_diff_id(header, zeros, n, trailer):
    """sha256 of the bomb's tar (seconds of hashing for many GiB: remembered in the image
    cache, keyed by the header, chunk and count)."""
    key = hashlib.sha256(header + trailer + f"{len(zeros)}:{n}".encode()).hexdigest()
    path = os.path.join(image_cache_dir(), "bomb-diff-ids.json")
    try:
        with open(path) as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    h = hashlib.sha256(header)
    for _ in range(n):
        h.update(zeros)
    h.update(trailer)
    known[key] = "sha256:" + h.hexdigest()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(known, f)
        os.rename(tmp, path)
    except OSError:
        pass
    return known[key]


def bomb_image(layout, tag="bomb", gib=16, how="gzip"):
    return layout.add_image([bomb_layer(layout, gib, how)], tag=tag)


def many_layers_image(layout, tag="many-layers", n=10000):
    """A manifest of n layers (each the same tiny layer blob): far above any layer bound.
    Push it with push_http (one blob, one manifest PUT of ~1.5 MB)."""
    layer = layout.add_layer([("file", "f", b"x\n")], "gzip")
    return layout.add_image([layer] * n, tag=tag)


def lying_image(layout, tag="lying"):
    """busybox + a plain layer L; returns (manifest descriptor, L's digest, bytes of the
    same length and other content). After pushing, reg.corrupt_blob(digest, lie) makes the
    real registry serve the lie under L's digest; a FakeRegistry can serve it directly."""
    base = layout.add_layer(busybox_entries(), "gzip")
    good = tar_layer([("file", "etc/motd", b"the true content\n")])
    lie = tar_layer([("file", "etc/motd", b"the LYING content\n"[:17])])
    assert len(good) == len(lie) and good != lie
    ldesc, diff = layout.add_layer(good, "plain")
    return layout.add_image([base, (ldesc, diff)], tag=tag), ldesc["digest"], lie


# ---------------------------------------------------------------- by name

NAMED = ("busybox", "whiteout", "gzip", "zstd", "plain", "mixed", "multi", "multi-docker",
         "docker", "python")


def push_named(reg, names, workdir, log=None):
    """Build the named images (NAMED) in workdir and push them to reg as test/<name>:1
    (python: test/python:3): (refs {name: ref}, skipped {name: reason}); the python image
    is skipped with the reason when it cannot be built."""
    lay = Layout(os.path.join(workdir, "layout"))
    refs, skipped = {}, {}
    for n in names:
        if n == "busybox":
            busybox(lay, tag="busybox")
            refs[n] = push(lay, "busybox", reg, "test/busybox:1")
        elif n == "whiteout":
            whiteout_image(lay)
            refs[n] = push(lay, "whiteout", reg, "test/whiteout:1")
        elif n in ("gzip", "zstd", "plain", "mixed"):
            compression_images(lay)
            refs[n] = push(lay, n, reg, f"test/{n}:1")
        elif n == "multi":
            multiarch(lay, tag="multi")
            refs[n] = push(lay, "multi", reg, "test/multi:1", all_=True)
        elif n == "multi-docker":
            refs[n] = push_http(lay, multiarch(lay, tag="multi-docker", docker=True), reg,
                                "test/multi-docker", "1")
        elif n == "docker":
            refs[n] = push_http(lay, docker_image(lay), reg, "test/docker", "1")
        elif n == "python":
            try:
                play, _ = python_image(log=log)
            except (RuntimeError, OSError) as e:
                skipped[n] = str(e)
                continue
            refs[n] = push(play, PY_TAG, reg, f"test/python:{PY_TAG}")
        else:
            raise ValueError(f"unknown image {n!r} (one of {', '.join(NAMED)})")
    return refs, skipped
