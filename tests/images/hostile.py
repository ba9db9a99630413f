"""Hostile "registries" for the attack tests: Python http.server subclasses on 127.0.0.1.

    lay = build.Layout(tmp); m = build.busybox(lay, tag="1")
    with BlobHost() as other, RedirectRegistry(other.url + "/b/{digest}", auth=("u", "p")) as r:
        r.load(lay, m, "test/busybox", "1")     # serve that image as HOST/test/busybox:1
        ... pull r.host + "/test/busybox:1" ...
        assert other.authorizations() == [None]   # the credentials did not follow

FakeRegistry speaks enough of the distribution API (GET/HEAD /v2/, manifests by tag or
digest, blobs) to serve images from a build.Layout; each subclass breaks one thing:
  RedirectRegistry   blob GETs answered 307 to another host:port (BlobHost records whether an
                     Authorization header arrived) or to any URL (file:///etc/passwd, ftp://)
  StallRegistry      sends headers and a few bytes of an answer, then nothing (until closed)
  FlakyRegistry      answers 429 or 503 (Retry-After) N times, then serves
  FakeRegistry(blob_override={digest: bytes}): a blob whose content does not match its digest
  many_layers(lay):  a loaded FakeRegistry serving the 10,000-layer manifest
Every server records its requests (.requests: method, path, lower-cased headers) and is
closed (shut down, its threads released) at the end of its with block.
"""
import base64
import json
import re

from . import build
from .registry import HTTPServerThread, _QuietHandler

_MANIFEST = re.compile(r"^/v2/(.+)/manifests/([^/]+)$")
_BLOB = re.compile(r"^/v2/(.+)/blobs/(sha256:[0-9a-f]{64})$")


class _RegistryHandler(_QuietHandler):
    def do_HEAD(self):
        self._serve()

    def do_GET(self):
        self._serve()

    def _serve(self):
        reg = self.server.owner
        reg.record(self)
        path = self.path.split("?", 1)[0]
        if reg.auth is not None and not reg.authorized(self.headers.get("Authorization")):
            return self.send_json(
                401, {"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]},
                headers=[("WWW-Authenticate", 'Basic realm="hostile"')])
        m = _MANIFEST.match(path)
        b = _BLOB.match(path)
        if path in ("/v2/", "/v2"):
            kind, name, ref = "v2", None, None
        elif m:
            kind, name, ref = "manifest", m.group(1), m.group(2)
        elif b:
            kind, name, ref = "blob", b.group(1), b.group(2)
        else:
            return self.send_json(404, {"errors": [{"code": "NOT_FOUND"}]})
        if reg.behave(self, kind, name, ref):
            return
        if kind == "v2":
            return self.send_json(200, {})
        if kind == "manifest":
            got = reg.manifests.get((name, ref))
            if got is None:
                return self.send_json(404, {"errors": [{"code": "MANIFEST_UNKNOWN"}]})
            mt, body = got
            return self.send_bytes(200, body, mt, [("Docker-Content-Digest", build.sha256(body))])
        body = reg.blob_override.get(ref, reg.blobs.get(ref))
        if body is None:
            return self.send_json(404, {"errors": [{"code": "BLOB_UNKNOWN"}]})
        return self.send_bytes(200, body, "application/octet-stream",
                               [("Docker-Content-Digest", ref)])


class FakeRegistry(HTTPServerThread):
    """A distribution API server from memory. auth=(user, password): basic auth required
    (401 + WWW-Authenticate: Basic otherwise). blob_override: bytes served instead of a
    blob's true ones (a digest that lies)."""

    handler = _RegistryHandler

    def __init__(self, auth=None, blob_override=None, tls=None):
        self.auth = auth
        self.manifests = {}  # (name, tag or digest) -> (media type, bytes)
        self.blobs = {}  # digest -> bytes
        self.blob_override = dict(blob_override or {})
        super().__init__(self.handler, tls=tls)

    def authorized(self, header):
        if not header or not header.lower().startswith("basic "):
            return False
        try:
            got = base64.b64decode(header.split(None, 1)[1]).decode()
        except Exception:
            return False
        return got == f"{self.auth[0]}:{self.auth[1]}"

    def load(self, layout, desc, name, tag):
        """Serve desc (a manifest or index of layout) and all it references as name:tag."""
        body = layout.read_blob(desc["digest"])
        self.manifests[(name, tag)] = (desc["mediaType"], body)
        self.manifests[(name, desc["digest"])] = (desc["mediaType"], body)
        doc = json.loads(body)
        if "manifests" in doc:
            for m in doc["manifests"]:
                self.load(layout, m, name, m["digest"])
        else:
            for b in [doc["config"]] + doc["layers"]:
                if b["digest"] not in self.blobs:
                    self.blobs[b["digest"]] = layout.read_blob(b["digest"])
        return f"{self.host}/{name}:{tag}"

    def behave(self, handler, kind, name, ref):
        """A subclass's hook: answer the request itself and return True, or False."""
        return False

    def count(self, kind=None):
        """Requests seen (of one kind: "manifest", "blob", "v2")."""
        with self.lock:
            paths = [r["path"].split("?", 1)[0] for r in self.requests]
        if kind is None:
            return len(paths)
        pat = {"manifest": _MANIFEST, "blob": _BLOB}.get(kind)
        return sum(1 for p in paths if (pat.match(p) if pat else p.rstrip("/") == "/v2"))


class _BlobHostHandler(_QuietHandler):
    def do_GET(self):
        host = self.server.owner
        host.record(self)
        m = re.search(r"(sha256:[0-9a-f]{64})", self.path)
        body = host.blobs.get(m.group(1)) if m else None
        if body is None:
            return self.send_json(404, {"error": "no such blob"})
        self.send_bytes(200, body, "application/octet-stream")


class BlobHost(HTTPServerThread):
    """The other host:port a redirect points at (blob storage): serves the blobs it is
    given at any path that names their digest and records every request's headers."""

    def __init__(self, tls=None):
        self.blobs = {}
        super().__init__(_BlobHostHandler, tls=tls)

    def authorizations(self):
        """The Authorization header of each request seen (None where there was none)."""
        with self.lock:
            return [r["headers"].get("authorization") for r in self.requests]


class RedirectRegistry(FakeRegistry):
    """Blob GETs answered `code` with Location: location.format(digest=..., name=...)
    (another host:port, file:///etc/passwd, ftp://...). Give blob_host to have its blobs
    filled from what load() serves."""

    def __init__(self, location, code=307, blob_host=None, **kw):
        self.location, self.code, self.blob_host = location, code, blob_host
        super().__init__(**kw)

    def load(self, *a, **kw):
        ref = super().load(*a, **kw)
        if self.blob_host is not None:
            self.blob_host.blobs.update(self.blobs)
        return ref

    def behave(self, handler, kind, name, ref):
        if kind != "blob":
            return False
        handler.send_response(self.code)
        handler.send_header("Location", self.location.format(digest=ref, name=name))
        handler.send_header("Content-Length", "0")
        handler.end_headers()
        return True


class StallRegistry(FakeRegistry):
    """For requests of kind `on` ("manifest", "blob" or "v2"): the status line, headers
    announcing `length` bytes, `prefix` of them, then nothing until the server is closed
    (or `stall_s` passed); prefix None: not even a status line. .stalled counts the answers
    left hanging."""

    def __init__(self, on="blob", prefix=b"\x1f\x8b\x08\x00", length=1 << 20, stall_s=600, **kw):
        self.on, self.prefix, self.length, self.stall_s = on, prefix, length, stall_s
        self.stalled = 0
        super().__init__(**kw)

    def behave(self, handler, kind, name, ref):
        if kind != self.on:
            return False
        if self.prefix is None:
            return self._hang(handler)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json"
                            if kind == "manifest" else "application/octet-stream")
        handler.send_header("Content-Length", str(self.length))
        handler.end_headers()
        try:
            handler.wfile.write(self.prefix)
            handler.wfile.flush()
        except OSError:
            return True
        return self._hang(handler)

    def _hang(self, handler):
        with self.lock:
            self.stalled += 1
        self.stopping.wait(self.stall_s)
        handler.close_connection = True
        return True


class FlakyRegistry(FakeRegistry):
    """The first `times` requests of kind `on` ("manifest", "blob", "v2" or "any") answered
    `code` (429 or 503) with Retry-After: retry_after (None: no header); then served.
    .failed counts the errors given."""

    def __init__(self, times=2, code=503, on="any", retry_after="1", **kw):
        self.times, self.code, self.on, self.retry_after = times, code, on, retry_after
        self.failed = 0
        super().__init__(**kw)

    def behave(self, handler, kind, name, ref):
        if self.on != "any" and kind != self.on:
            return False
        with self.lock:
            if self.failed >= self.times:
                return False
            self.failed += 1
        hdrs = [("Retry-After", self.retry_after)] if self.retry_after is not None else []
        handler.send_json(self.code, {"errors": [{"code": "TOOMANYREQUESTS" if self.code == 429
                                                  else "UNAVAILABLE"}]}, headers=hdrs)
        return True


def many_layers(layout, name="test/many", tag="many", n=10000, **kw):
    """A FakeRegistry serving build.many_layers_image (n layers) as name:tag (not entered:
    use it in a with block)."""
    reg = FakeRegistry(**kw)
    reg.load(layout, build.many_layers_image(layout, tag=tag, n=n), name, tag)
    return reg


def lying(layout, name="test/lying", tag="lying", **kw):
    """A FakeRegistry serving build.lying_image with its plain layer's bytes replaced by
    others of the same length: (registry, the lying digest)."""
    m, digest, lie = build.lying_image(layout, tag=tag)
    reg = FakeRegistry(blob_override={digest: lie}, **kw)
    reg.load(layout, m, name, tag)
    return reg, digest
