// A sandbox's files driven only through OpenSandbox's JavaScript SDK (npm
// @alibaba-group/opensandbox 0.1.11), as a user would (OPENSANDBOX.md section 3.2):
// writeFiles with modes and owners, readFile (text, range, lines), readBytes,
// readBytesStream, getFileInfo, search, replaceContents[Detailed], moveFiles, setPermissions,
// deleteFiles, listDirectory, createDirectories, deleteDirectories (listings, searches and line
// reads long enough to be streamed too), and commands that see the same files at the same
// paths. One daemon for the file.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Sandbox } from "@alibaba-group/opensandbox";

import { conn, needsRoot, Registry, rejectsWithApi, startDaemon } from "./harness.mjs";

let d;
const reg = new Registry();
let sbx;

async function out(cmd) {
  const ex = await sbx.commands.run(cmd, { workingDirectory: "/tmp" });
  assert.equal(ex.exitCode, 0, JSON.stringify(ex.error));
  return ex.logs.stdout.map((m) => m.text);
}

describe("files and directories through the SDK", { skip: needsRoot, timeout: 120_000 }, () => {
  before(async () => {
    d = await startDaemon();
    sbx = reg.sbx(await Sandbox.create({ connectionConfig: conn(d), image: "default" }));
  });
  after(async () => {
    await reg.cleanup();
    const rc = await d.stop();
    assert.equal(rc, 0, `daemon exit ${rc}; stderr tail:\n${d.stderr().slice(-2000)}`);
  });

  it("writeFiles with modes and owners is what a command sees at the same paths", async () => {
    await sbx.files.writeFiles([
      { path: "/tmp/sdk/a.txt", data: "hello\nworld", mode: 644 },
      { path: "/workspace/sdk/b.sh", data: new TextEncoder().encode("echo ran\n"), mode: 755 },
      { path: "/tmp/sdk/c.txt", data: "nobody's", mode: 644, owner: "nobody" },
    ]);
    assert.deepEqual(await out("cat /tmp/sdk/a.txt; echo; sh /workspace/sdk/b.sh"),
      ["hello", "world", "ran"]);
    const uid = (await out("id -u"))[0];
    assert.deepEqual(await out("stat -c '%a %u' /tmp/sdk/a.txt /workspace/sdk/b.sh; stat -c '%a %U' /tmp/sdk/c.txt"),
      [`644 ${uid}`, `755 ${uid}`, "644 nobody"]);
  });

  it("readFile, a range, lines, readBytes and readBytesStream", async () => {
    await sbx.files.writeFiles([{ path: "/tmp/sdk/r.txt", data: "l1\nl2\nl3\nl4" }]);
    assert.equal(await sbx.files.readFile("/tmp/sdk/r.txt"), "l1\nl2\nl3\nl4");
    assert.equal(await sbx.files.readFile("/tmp/sdk/r.txt", { range: "bytes=3-4" }), "l2");
    assert.equal(await sbx.files.readFile("/tmp/sdk/r.txt", { offset: 2, limit: 2 }), "l2\nl3");
    const bytes = await sbx.files.readBytes("/tmp/sdk/r.txt");
    assert.equal(new TextDecoder().decode(bytes), "l1\nl2\nl3\nl4");
    const big = new Uint8Array(3 << 20).map((_, i) => i % 251);
    await sbx.files.writeFiles([{ path: "/workspace/sdk/big.bin", data: big }]);
    let got = 0, ok = true;
    for await (const chunk of sbx.files.readBytesStream("/workspace/sdk/big.bin")) {
      for (let i = 0; i < chunk.length; i++) ok = ok && chunk[i] === (got + i) % 251;
      got += chunk.length;
    }
    assert.equal(got, big.length);
    assert.ok(ok, "the stream's bytes are the file's");
    // download errors: the SDK wraps them itself (UNEXPECTED_RESPONSE), status kept
    await rejectsWithApi(sbx.files.readFile("/tmp/sdk/none"), 404, "UNEXPECTED_RESPONSE");
  });

  it("getFileInfo, listDirectory and search", async () => {
    await sbx.files.createDirectories([{ path: "/tmp/sdk/d/e", mode: 750 }]);
    await sbx.files.writeFiles([{ path: "/tmp/sdk/d/e/x.py", data: "x" },
      { path: "/tmp/sdk/d/y.txt", data: "yy" }]);
    const info = await sbx.files.getFileInfo(["/tmp/sdk/d/y.txt", "/tmp/sdk/d/e"]);
    assert.equal(info["/tmp/sdk/d/y.txt"].size, 2);
    assert.equal(info["/tmp/sdk/d/y.txt"].type, "file");
    assert.equal(info["/tmp/sdk/d/e"].mode, 750);
    assert.ok(info["/tmp/sdk/d/y.txt"].modifiedAt instanceof Date);
    const ls = await sbx.files.listDirectory({ path: "/tmp/sdk/d", depth: 2 });
    assert.deepEqual(ls.map((e) => e.path), ["/tmp/sdk/d/e", "/tmp/sdk/d/e/x.py", "/tmp/sdk/d/y.txt"]);
    const found = await sbx.files.search({ path: "/tmp/sdk/d", pattern: "*.py" });
    assert.deepEqual(found.map((e) => e.path), ["/tmp/sdk/d/e/x.py"]);
  });

  it("a listing, a search and a line-mode read too long to come whole are streamed", async () => {
    // ~1 MB of listing, ~400 KB of search and ~600 KB of lines: past the 256 KiB the daemon
    // answers whole, so they come chunked as they are made; the SDK reads them like any answer.
    await out("mkdir -p /tmp/sdk/big && cd /tmp/sdk/big && seq -f 'file-%05g.txt' 1 5000 | xargs touch"
      + " && seq 1 100000 > /tmp/sdk/lines.txt");
    const ls = await sbx.files.listDirectory({ path: "/tmp/sdk/big" });
    assert.equal(ls.length, 5000);
    assert.equal(ls[0].path, "/tmp/sdk/big/file-00001.txt");
    assert.equal(ls[4999].path, "/tmp/sdk/big/file-05000.txt");
    const found = await sbx.files.search({ path: "/tmp/sdk/big", pattern: "file-0[34]*" });
    assert.equal(found.length, 2000);
    const text = await sbx.files.readFile("/tmp/sdk/lines.txt", { offset: 2, limit: 99998 });
    assert.equal(text.length, 588885);
    assert.ok(text.startsWith("2\n3\n") && text.endsWith("\n99999"));
  });

  it("replaceContents, replaceContentsDetailed and moveFiles", async () => {
    await sbx.files.writeFiles([{ path: "/tmp/sdk/rep.txt", data: "a b a", mode: 600 }]);
    const res = await sbx.files.replaceContentsDetailed([
      { path: "/tmp/sdk/rep.txt", oldContent: "a", newContent: "zz" }]);
    assert.deepEqual(res, [{ path: "/tmp/sdk/rep.txt", replacedCount: 2 }]);
    await sbx.files.replaceContents([{ path: "/tmp/sdk/rep.txt", oldContent: "b", newContent: "c" }]);
    assert.equal(await sbx.files.readFile("/tmp/sdk/rep.txt"), "zz c zz");
    assert.deepEqual(await out("stat -c %a /tmp/sdk/rep.txt"), ["600"]);
    await sbx.files.moveFiles([{ src: "/tmp/sdk/rep.txt", dest: "/tmp/sdk/moved/rep.txt" }]);
    assert.equal(await sbx.files.readFile("/tmp/sdk/moved/rep.txt"), "zz c zz");
  });

  it("setPermissions, deleteFiles, deleteDirectories", async () => {
    await sbx.files.writeFiles([{ path: "/tmp/sdk/p.txt", data: "p" }]);
    await sbx.files.setPermissions([{ path: "/tmp/sdk/p.txt", mode: 640, group: "nogroup" }]);
    const i = (await sbx.files.getFileInfo(["/tmp/sdk/p.txt"]))["/tmp/sdk/p.txt"];
    assert.equal(i.mode, 640);
    assert.equal(i.group, "nogroup");
    await rejectsWithApi(sbx.files.setPermissions([{ path: "/tmp/sdk/p.txt", mode: 4755 }]), 400,
      "INVALID_REQUEST_BODY");
    await sbx.files.deleteFiles(["/tmp/sdk/p.txt"]);
    await rejectsWithApi(sbx.files.readFile("/tmp/sdk/p.txt"), 404, "UNEXPECTED_RESPONSE");
    await sbx.files.deleteDirectories(["/tmp/sdk"]);
    assert.deepEqual(await out("test -e /tmp/sdk || echo gone"), ["gone"]);
  });

  it("the read-only image refuses a write with a clear error", async () => {
    const e = await rejectsWithApi(sbx.files.writeFiles([{ path: "/usr/sdk-probe", data: "x" }]),
      400, "UNEXPECTED_RESPONSE");
    assert.match(e.rawBody, /read-only/);
  });
});
