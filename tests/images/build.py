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
        return self.add_blob(compress(tar, compression), mt), sha256(tar)

    def add_image(self, layers, tag=None, env=None, workdir=None, cmd=None, arch="amd64",
                  os_="linux", variant=None, docker=False, annotations=None, diff_ids=None):
        """A manifest over layers ([(descriptor, diff_id)], lowest first) and its config;
        tagged in index.json when tag is given. Returns the manifest's descriptor (with
        its platform)."""
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
