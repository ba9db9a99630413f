"""A real registry for the image tests: Debian's docker-registry (distribution 2.8).

    with Registry(mode="htpasswd", tls=True) as reg:
        reg.host            # "127.0.0.1:PORT"
        reg.creds           # "tester:secret" (None for plain)
        reg.ca_file         # the test CA (PEM) for SANDBOX_HOST_REGISTRY_CA, None without tls
        reg.issuer.requests # token mode: what the token issuer was asked (headers included)

Modes: "plain" (no auth), "htpasswd" (basic auth, bcrypt hash written here), "token"
(the registry's auth.token with a realm served by TokenIssuer, a small HTTP server of this
module: JWT RS256 signed by a key whose self-signed certificate is the registry's
rootcertbundle). Everything listens on 127.0.0.1 on a free port; the registry is stopped by
its pid and its temp dir (config, storage, certificates) removed at exit.

Only the standard library plus Debian's python3-yaml, python3-bcrypt, python3-jwt and
python3-cryptography (scripts/setup.sh installs them).
"""
import base64
import datetime
import hashlib
import http.server
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

REGISTRY_BIN = os.environ.get("SH_DOCKER_REGISTRY", "/usr/bin/docker-registry")
SERVICE = "sandbox-host-test-registry"
ISSUER = "sandbox-host-test-issuer"


def free_port():
    """A port free on 127.0.0.1 right now (the caller binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def available():
    """None when a registry can be started here, else the reason (for pytest.skip)."""
    if not os.access(REGISTRY_BIN, os.X_OK):
        return f"{REGISTRY_BIN} missing (Debian package docker-registry)"
    return None


# ---------------------------------------------------------------- certificates and keys


def _crypto():
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    return x509, hashes, serialization, rsa, NameOID


def _key():
    _, _, _, rsa, _ = _crypto()
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key):
    _, _, serialization, _, _ = _crypto()
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _pem_cert(cert):
    _, _, serialization, _, _ = _crypto()
    return cert.public_bytes(serialization.Encoding.PEM)


def _cert(subject_cn, key, issuer_cert=None, issuer_key=None, ca=False, sans=()):
    """A certificate for key: self-signed without issuer_cert, else signed by it."""
    import ipaddress

    x509, hashes, _, _, NameOID = _crypto()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)])
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_cert.subject if issuer_cert is not None else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        alt = []
        for s in sans:
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(s)))
            except ValueError:
                alt.append(x509.DNSName(s))
        b = b.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    if ca:
        b = b.add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    return b.sign(issuer_key if issuer_key is not None else key, hashes.SHA256())


class TestCA:
    """A test CA and one server certificate for 127.0.0.1 and localhost, as PEM files in dir."""

    def __init__(self, dir):
        self.dir = dir
        ca_key = _key()
        ca = _cert("sandbox-host test CA", ca_key, ca=True)
        srv_key = _key()
        srv = _cert("127.0.0.1", srv_key, ca, ca_key, sans=("127.0.0.1", "localhost"))
        self.ca_file = os.path.join(dir, "ca.crt")
        self.cert_file = os.path.join(dir, "server.crt")
        self.key_file = os.path.join(dir, "server.key")
        with open(self.ca_file, "wb") as f:
            f.write(_pem_cert(ca))
        with open(self.cert_file, "wb") as f:
            f.write(_pem_cert(srv))
        with open(self.key_file, "wb") as f:
            f.write(_pem_key(srv_key))
        # skopeo's --*-cert-dir reads ca.crt (and would take client certs from *.cert/*.key)
        self.cert_dir = os.path.join(dir, "certs.d")
        os.mkdir(self.cert_dir)
        shutil.copy(self.ca_file, os.path.join(self.cert_dir, "ca.crt"))

    def server_context(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def client_context(self):
        return ssl.create_default_context(cafile=self.ca_file)


def bcrypt_htpasswd(user, password):
    """One htpasswd line with a bcrypt hash ($2y$, as the registry's htpasswd reader wants)."""
    try:
        import bcrypt

        h = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()
        return f"{user}:{h}\n"
    except ImportError:
        out = subprocess.run(
            ["htpasswd", "-nbB", "-C", "5", user, password],
            check=True, capture_output=True, text=True,
        ).stdout
        return out.strip() + "\n"


def libtrust_key_id(public_key):
    """The key ID distribution's token auth looks a JWT's "kid" up by (libtrust's format:
    base32 of the first 240 bits of sha256(DER SubjectPublicKeyInfo), in groups of 4)."""
    _, _, serialization, _, _ = _crypto()
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    s = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode().rstrip("=")
    return ":".join(s[i : i + 4] for i in range(0, len(s), 4))


# ---------------------------------------------------------------- small HTTP servers


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class HTTPServerThread:
    """An http.server on 127.0.0.1:<free port> in a thread; a context manager.

    handler: a BaseHTTPRequestHandler subclass; it finds this object as self.server.owner.
    tls: a TestCA to serve HTTPS with its server certificate."""

    def __init__(self, handler, tls=None):
        self.httpd = _Server(("127.0.0.1", 0), handler)
        self.httpd.owner = self
        self.stopping = threading.Event()
        self.scheme = "http"
        if tls is not None:
            self.httpd.socket = tls.server_context().wrap_socket(
                self.httpd.socket, server_side=True
            )
            self.scheme = "https"
        self.port = self.httpd.server_address[1]
        self.host = f"127.0.0.1:{self.port}"
        self.url = f"{self.scheme}://{self.host}"
        self.requests = []  # (method, path, headers dict) of every request seen
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def record(self, handler):
        with self.lock:
            self.requests.append(
                {"method": handler.command, "path": handler.path,
                 "headers": {k.lower(): v for k, v in handler.headers.items()}}
            )

    def close(self):
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _QuietHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_bytes(self, code, body, content_type, headers=()):
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, code, obj, headers=()):
        self.send_bytes(code, json.dumps(obj).encode(), "application/json", headers)


class _TokenHandler(_QuietHandler):
    def do_GET(self):
        issuer = self.server.owner
        issuer.record(self)
        u = urllib.parse.urlsplit(self.path)
        if u.path != "/token":
            return self.send_json(404, {"error": "not found"})
        q = urllib.parse.parse_qs(u.query)
        user = None
        auth = self.headers.get("Authorization")
        if auth:
            user = issuer.check_basic(auth)
            if user is None:
                return self.send_json(
                    401, {"errors": [{"code": "UNAUTHORIZED", "message": "bad credentials"}]}
                )
        elif not issuer.anonymous:
            return self.send_json(
                401, {"errors": [{"code": "UNAUTHORIZED", "message": "credentials required"}]}
            )
        token = issuer.make_token(user, q.get("service", [SERVICE])[0], q.get("scope", []))
        self.send_json(200, {"token": token, "access_token": token, "expires_in": 300,
                             "issued_at": datetime.datetime.now(datetime.timezone.utc)
                             .strftime("%Y-%m-%dT%H:%M:%SZ")})


class TokenIssuer(HTTPServerThread):
    """The token endpoint of a token-auth registry: GET /token?service=..&scope=..

    Basic credentials must be (user, password) when given; without them a token with no
    access is issued when anonymous is True (the registry then answers 401 to the pull, as a
    private repository does), else 401. With good credentials every requested scope is
    granted. .requests records each request (its "authorization" header included)."""

    def __init__(self, dir, user, password, anonymous=True, tls=None):
        self.user, self.password, self.anonymous = user, password, anonymous
        self.key = _key()
        self.cert = _cert(ISSUER, self.key)
        self.kid = libtrust_key_id(self.key.public_key())
        self.bundle = os.path.join(dir, "token-bundle.crt")
        with open(self.bundle, "wb") as f:
            f.write(_pem_cert(self.cert))
        super().__init__(_TokenHandler, tls=tls)
        self.realm = f"{self.url}/token"

    def check_basic(self, header):
        try:
            scheme, b64 = header.split(None, 1)
            if scheme.lower() != "basic":
                return None
            u, _, p = base64.b64decode(b64).decode().partition(":")
        except Exception:
            return None
        return u if (u, p) == (self.user, self.password) else None

    def make_token(self, user, service, scopes):
        import jwt

        access = []
        if user is not None:
            for scope in scopes:
                for one in scope.split(" "):
                    parts = one.split(":")
                    if len(parts) >= 3:
                        access.append({"type": parts[0], "name": ":".join(parts[1:-1]),
                                       "actions": parts[-1].split(",")})
        now = int(time.time())
        claims = {"iss": ISSUER, "sub": user or "", "aud": service, "exp": now + 300,
                  "nbf": now - 10, "iat": now, "jti": os.urandom(8).hex(), "access": access}
        return jwt.encode(claims, _pem_key(self.key), algorithm="RS256",
                          headers={"kid": self.kid})

    def authorizations(self):
        """The Authorization headers the issuer saw, in order (None for none)."""
        with self.lock:
            return [r["headers"].get("authorization") for r in self.requests]


# ---------------------------------------------------------------- the registry


class Registry:
    """Debian's docker-registry on 127.0.0.1:<free port>; a context manager."""

    def __init__(self, mode="plain", tls=False, user="tester", password="s3cret-pw",
                 anonymous_token=True):
        if mode not in ("plain", "htpasswd", "token"):
            raise ValueError(f"mode {mode!r}")
        why = available()
        if why:
            raise RuntimeError(why)
        self.mode, self.user, self.password = mode, user, password
        self.creds = None if mode == "plain" else f"{user}:{password}"
        self.dir = tempfile.mkdtemp(prefix="sh-registry-")
        self.storage = os.path.join(self.dir, "storage")
        os.mkdir(self.storage)
        self.proc = None
        self.issuer = None
        self.ca = None
        self.ca_file = None
        try:
            if tls:
                self.ca = TestCA(self.dir)
                self.ca_file = self.ca.ca_file
            if mode == "token":
                self.issuer = TokenIssuer(self.dir, user, password, anonymous=anonymous_token,
                                          tls=self.ca)
            self._start()
        except BaseException:
            self.close()
            raise

    # the config and the process

    def _config(self, port):
        cfg = {
            "version": 0.1,
            "log": {"level": "warn", "formatter": "text"},
            "storage": {
                "filesystem": {"rootdirectory": self.storage},
                "delete": {"enabled": True},
                "maintenance": {"uploadpurging": {"enabled": False}},
            },
            "http": {
                "addr": f"127.0.0.1:{port}",
                "secret": os.urandom(16).hex(),
                "headers": {"X-Content-Type-Options": ["nosniff"]},
            },
        }
        if self.ca is not None:
            cfg["http"]["tls"] = {"certificate": self.ca.cert_file, "key": self.ca.key_file}
        if self.mode == "htpasswd":
            path = os.path.join(self.dir, "htpasswd")
            with open(path, "w") as f:
                f.write(bcrypt_htpasswd(self.user, self.password))
            cfg["auth"] = {"htpasswd": {"realm": "sandbox-host-test", "path": path}}
        elif self.mode == "token":
            cfg["auth"] = {"token": {"realm": self.issuer.realm, "service": SERVICE,
                                     "issuer": ISSUER,
                                     "rootcertbundle": self.issuer.bundle}}
        return cfg

    def _start(self):
        import yaml

        last = None
        for _ in range(5):  # a free port may be taken between free_port() and the bind
            port = free_port()
            conf = os.path.join(self.dir, "config.yml")
            with open(conf, "w") as f:
                yaml.safe_dump(self._config(port), f)
            self.log_path = os.path.join(self.dir, "registry.log")
            log = open(self.log_path, "ab")
            env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": self.dir,
                   "OTEL_TRACES_EXPORTER": "none"}
            self.proc = subprocess.Popen([REGISTRY_BIN, "serve", conf], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)
            log.close()
            self.port = port
            self.host = f"127.0.0.1:{port}"
            self.scheme = "https" if self.ca is not None else "http"
            self.url = f"{self.scheme}://{self.host}"
            if self._wait_ready():
                return
            last = self.log()
            self._stop_proc()
        raise RuntimeError(f"docker-registry did not start: {last}")

    def _wait_ready(self, timeout=20):
        deadline = time.monotonic() + timeout
        ctx = self.ca.client_context() if self.ca is not None else None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                urllib.request.urlopen(f"{self.url}/v2/", timeout=2, context=ctx)
                return True
            except urllib.error.HTTPError as e:
                if e.code == 401:
                    return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        return False

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def _stop_proc(self):
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)  # by pid (Popen), never by name
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)

    def close(self):
        self._stop_proc()
        if self.issuer is not None:
            self.issuer.close()
            self.issuer = None
        if self.dir and os.path.isdir(self.dir):
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # helpers for tests

    def ref(self, name, tag="latest"):
        """"127.0.0.1:PORT/name:tag" (tag may be "@sha256:..." for a digest)."""
        sep = "" if tag.startswith("@") else ":"
        return f"{self.host}/{name}{sep}{tag}"

    def ssl_context(self):
        return self.ca.client_context() if self.ca is not None else None

    def docker_config(self, path, creds=True):
        """Write a Docker config.json for this registry (SANDBOX_HOST_REGISTRY_AUTH)."""
        auths = {}
        if creds and self.creds:
            auths[self.host] = {"auth": base64.b64encode(self.creds.encode()).decode()}
        with open(path, "w") as f:
            json.dump({"auths": auths}, f)
        os.chmod(path, 0o600)
        return path

    def blob_path(self, digest):
        """The file the filesystem driver keeps a blob's bytes in."""
        algo, hexd = digest.split(":", 1)
        return os.path.join(self.storage, "docker/registry/v2/blobs", algo, hexd[:2], hexd,
                            "data")

    def corrupt_blob(self, digest, data):
        """Replace a pushed blob's bytes in storage: the registry then serves data under a
        digest it does not have (no descriptor cache is configured, so nothing masks it)."""
        with open(self.blob_path(digest), "wb") as f:
            f.write(data)
