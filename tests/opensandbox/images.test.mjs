// Issue 22 through OpenSandbox's JavaScript SDK (0.1.11), as a user would write it:
// Sandbox.create({image: "<host:port>/test/python:3"}) against a daemon that pulls from a real
// registry (tests/images/serve.py: Debian's docker-registry, listed in
// SANDBOX_HOST_INSECURE_REGISTRIES), then python3 from the image, a write under /usr/local
// refused and one in HOME (the workspace, docs/opensandbox.md) accepted, a wheel uploaded and
// pip-installed offline (a venv, and pip's fallback to a user install), two sandboxes of one
// image that do not see each other's writes, and a pull that fails ending Failed
// (OPENSANDBOX.md section 2, docs/images.md). The python image may be missing (it is built
// with mmdebstrap, cached in build/image-cache/): its tests skip with serve.py's reason; the
// busybox ones still run.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, before, describe, it } from "node:test";

import { Sandbox } from "@alibaba-group/opensandbox";

import { conn, needsRoot, Registry, startDaemon, startImageRegistry, waitFor } from "./harness.mjs";

let d;
let images;
const reg = new Registry();
const PULL_S = 300; // readiness of a sandbox whose image is pulled (the python image: ~65 MB)

function options(extra = {}) {
  return conn(d, { requestTimeoutSeconds: 180, ...extra });
}

async function create(image, opts = {}) {
  return reg.sbx(await Sandbox.create({
    connectionConfig: options(), image, readyTimeoutSeconds: PULL_S, ...opts }));
}

async function out(s, command, opts = {}) {
  const ex = await s.commands.run(command, opts);
  assert.equal(ex.exitCode, 0, `${command}: ${JSON.stringify(ex.logs)} ${JSON.stringify(ex.error)}`);
  return ex.logs.stdout.map((m) => m.text);
}

async function exitOf(s, command) {
  return (await s.commands.run(command)).exitCode;
}

// A pure-python wheel made on the host (zipfile): shhello 1.0, GREETING.
function makeWheel() {
  const script = `
import base64, hashlib, io, sys, zipfile
files = {
  "shhello/__init__.py": b'GREETING = "hello from the wheel"\\n',
  "shhello-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\\nName: shhello\\nVersion: 1.0\\n",
  "shhello-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\\nGenerator: sandbox-host-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
rec = []
for n, b in files.items():
  h = base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
  rec.append(f"{n},sha256={h},{len(b)}")
rec.append("shhello-1.0.dist-info/RECORD,,")
files["shhello-1.0.dist-info/RECORD"] = ("\\n".join(rec) + "\\n").encode()
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
  for n, b in files.items():
    z.writestr(n, b)
sys.stdout.buffer.write(buf.getvalue())
`;
  const p = spawnSync("/usr/bin/python3", ["-c", script], { maxBuffer: 1 << 20 });
  assert.equal(p.status, 0, p.stderr.toString());
  return new Uint8Array(p.stdout);
}

describe("OCI images through the SDK", { skip: needsRoot, timeout: 900_000 }, () => {
  let pySkip = false;
  before(async () => {
    images = await startImageRegistry({ images: ["busybox", "python"], timeoutMs: 600_000 });
    pySkip = images.skipped.python ? `the python image: ${images.skipped.python}` : false;
    d = await startDaemon({
      SANDBOX_HOST_IMAGE_PULL: "on",
      SANDBOX_HOST_INSECURE_REGISTRIES: images.host,
    });
  }, { timeout: 700_000 }); // the python image's first build (mmdebstrap) takes minutes
  after(async () => {
    await reg.cleanup();
    if (d) {
      const rc = await d.stop();
      assert.equal(rc, 0, `daemon exit ${rc}; stderr tail:\n${d.stderr().slice(-2000)}`);
    }
    if (images) assert.equal(await images.stop(), 0);
  });

  it("Sandbox.create with a busybox reference runs the image's programs", async () => {
    const s = await create(images.refs.busybox);
    assert.equal((await s.getInfo()).status.state, "Running");
    assert.deepEqual(await out(s, "cat /etc/passwd"),
      ["root:x:0:0:root:/root:/bin/sh", "nobody:x:65534:65534::/:/bin/sh"]);
  });

  it("a pull that fails ends Failed with IMAGE_PULL_FAILED", async () => {
    const ref = images.refs.busybox.replace(/:1$/, ":no-such-tag");
    const s = reg.sbx(await Sandbox.create({
      connectionConfig: options(), image: ref, skipHealthCheck: true }));
    const info = await waitFor(async () => {
      const i = await s.getInfo();
      return i.status.state === "Failed" ? i : null;
    }, 60_000, 200);
    assert.ok(info, `never Failed: ${JSON.stringify(await s.getInfo())}`);
    assert.equal(info.status.reason, "IMAGE_PULL_FAILED");
    assert.match(info.status.message, /manifest[ _]unknown/i);
  });

  const PY = { timeout: 300_000 };
  it("python3 from the image runs", PY, async (t) => {
    if (pySkip) return t.skip(pySkip);
    const s = await create(images.refs.python);
    assert.deepEqual(await out(s, "python3 -c 'import sys; print(sys.version_info[0], sys.prefix)'"),
      ["3 /usr"]);
    assert.ok((await out(s, "cat /etc/os-release")).some((l) => l.includes("bookworm")));
  });

  it("a file under /usr/local is refused and one under HOME accepted", PY, async (t) => {
    if (pySkip) return t.skip(pySkip);
    const s = await create(images.refs.python);
    await assert.rejects(s.files.writeFiles([{ path: "/usr/local/sdk-probe", data: "x" }]));
    assert.notEqual(await exitOf(s, "touch /usr/local/bin/sdk-probe"), 0);
    const [home] = await out(s, "echo $HOME");
    assert.equal(home, "/workspace", "HOME is the workspace (docs/opensandbox.md)");
    await s.files.writeFiles([{ path: `${home}/notes.txt`, data: "mine" }]);
    assert.equal(await s.files.readFile(`${home}/notes.txt`), "mine");
    assert.deepEqual(await out(s, "echo more >> ~/notes.txt && cat ~/notes.txt"), ["minemore"]);
  });

  it("a wheel uploaded is pip-installed offline: into a venv, and as a user install", PY,
    async (t) => {
    if (pySkip) return t.skip(pySkip);
    const s = await create(images.refs.python);
    const whl = "/workspace/shhello-1.0-py3-none-any.whl";
    await s.files.writeFiles([{ path: whl, data: makeWheel() }]);
    await out(s, `python3 -m venv /workspace/venv && /workspace/venv/bin/pip install --no-index ${whl}`,
      { timeoutSeconds: 170 });
    assert.deepEqual(await out(s, "/workspace/venv/bin/python -c 'import shhello; print(shhello.GREETING)'"),
      ["hello from the wheel"]);
    // pip without a venv: site-packages are root's, so pip falls back to a user install in
    // ~/.local (docs/images.md). Debian marks its python externally managed (PEP 668): the
    // flag says we mean it.
    await out(s, `python3 -m pip install --no-index --break-system-packages ${whl}`,
      { timeoutSeconds: 170 });
    assert.deepEqual(await out(s, "python3 -c 'import shhello; print(shhello.GREETING, shhello.__file__)'"),
      ["hello from the wheel /workspace/.local/lib/python3.11/site-packages/shhello/__init__.py"]);
  });

  it("two sandboxes of one image do not see each other's writes", PY, async (t) => {
    if (pySkip) return t.skip(pySkip);
    const a = await create(images.refs.python);
    const b = await create(images.refs.python);
    // /run/lock is the image's own world-writable (1777) directory
    await out(a, "echo from-a > /run/lock/a");
    await out(b, "echo from-b > /run/lock/b");
    assert.deepEqual(await out(a, "ls /run/lock"), ["a"]);
    assert.deepEqual(await out(b, "ls /run/lock"), ["b"]);
    await out(a, "python3 -c 'open(\"/run/lock/py\", \"w\").write(\"x\")'");
    assert.equal(await exitOf(b, "test -e /run/lock/py"), 1);
  });
});
