// Issue 25: `volumes` driven only through OpenSandbox's JavaScript SDK (npm
// @alibaba-group/opensandbox 0.1.11 passes `volumes` of Sandbox.create through as the YAML's
// Volume list), as OpenSandbox's own e2e cases create them (a host volume read-write and
// read-only with a marker the host put there; a named volume seeded beforehand, read-write,
// read-only and by `subPath`; mount paths below /mnt), and two sandboxes sharing a named volume
// created on first use; `ossfs` refused with the server's code. The daemon's
// SANDBOX_HOST_VOLUME_ROOT and SANDBOX_HOST_VOLUME_HOST_ALLOW are directories of this file's own
// temporary directory (in cluster mode the three pods share them, as pods share an NFS volume
// root), removed at the end.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { Sandbox } from "@alibaba-group/opensandbox";

import { clusterMode, conn, needsRoot, Registry, rejectsWithApi, startDaemon, uniq }
  from "./harness.mjs";

let d;
let base;
let allowed;
let vroot;
const reg = new Registry();

// the host's part, as OpenSandbox's e2e set-up does it: a host directory with a marker, a named
// volume seeded with a marker and a datasets/train/marker.txt
const HOST_MARKER = "opensandbox-e2e-marker";
const PVC_MARKER = "pvc-marker-data";
const SUB_MARKER = "pvc-subpath-marker";
const CLAIM = "opensandbox-e2e-pvc-test";

function writable(dir) {
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o777);
  return dir;
}

function put(file, text) {
  writeFileSync(file, text);
  chmodSync(file, 0o666);
}

async function create(volumes) {
  return reg.sbx(await Sandbox.create({ connectionConfig: conn(d), image: "default",
                                        timeoutSeconds: 120, volumes }));
}

async function out(sbx, cmd) {
  const ex = await sbx.commands.run(cmd);
  assert.equal(ex.exitCode, 0, `${cmd}: ${JSON.stringify(ex.error)} ${JSON.stringify(ex.logs)}`);
  return ex.logs.stdout.map((m) => m.text);
}

async function refusedWrite(sbx, file) {
  const ex = await sbx.commands.run(`touch ${file}`);
  assert.notEqual(ex.exitCode, 0, `touch ${file} succeeded on a read-only volume`);
  assert.match(ex.logs.stderr.map((m) => m.text).join("\n"), /Read-only file system/);
  assert.deepEqual(await out(sbx, `test ! -e ${file} && echo OK`), ["OK"]);
}

describe("volumes through the SDK", { skip: needsRoot, timeout: 300_000 }, () => {
  before(async () => {
    base = mkdtempSync(path.join(tmpdir(), "sh-sdk-volumes-"));
    allowed = writable(path.join(base, "allowed"));
    vroot = path.join(base, "volumes");
    mkdirSync(vroot);
    const hostDir = writable(path.join(allowed, "host-volume-test"));
    put(path.join(hostDir, "marker.txt"), HOST_MARKER);
    const claim = writable(path.join(vroot, CLAIM));
    put(path.join(claim, "marker.txt"), PVC_MARKER);
    writable(path.join(claim, "datasets"));
    const train = writable(path.join(claim, "datasets", "train"));
    put(path.join(train, "marker.txt"), SUB_MARKER);
    d = await startDaemon({ SANDBOX_HOST_VOLUME_ROOT: vroot,
                            SANDBOX_HOST_VOLUME_HOST_ALLOW: allowed });
  });
  after(async () => {
    await reg.cleanup();
    const rc = d ? await d.stop() : 0;
    rmSync(base, { recursive: true, force: true });
    assert.equal(rc, 0, `daemon exit ${rc}; stderr tail:\n${d.stderr().slice(-2000)}`);
  });

  it("a host volume read-write: the host's marker is read, a write appears on the host", async () => {
    const mount = "/mnt/host-data";
    const sbx = await create([{ name: "test-host-vol", host: { path: path.join(allowed, "host-volume-test") },
                                mountPath: mount, readOnly: false }]);
    assert.deepEqual(await out(sbx, `cat ${mount}/marker.txt`), [HOST_MARKER]);
    await out(sbx, `echo 'written-from-sandbox' > ${mount}/sandbox-output.txt`);
    assert.deepEqual(await out(sbx, `cat ${mount}/sandbox-output.txt`), ["written-from-sandbox"]);
    assert.equal(readFileSync(path.join(allowed, "host-volume-test", "sandbox-output.txt"), "utf8"),
      "written-from-sandbox\n");
    assert.deepEqual(await out(sbx, `test -d ${mount} && echo OK`), ["OK"]);
  });

  it("a host volume read-only: the marker is read, a write fails", async () => {
    const mount = "/mnt/host-data-ro";
    const sbx = await create([{ name: "test-host-vol-ro", host: { path: path.join(allowed, "host-volume-test") },
                                mountPath: mount, readOnly: true }]);
    assert.deepEqual(await out(sbx, `cat ${mount}/marker.txt`), [HOST_MARKER]);
    await refusedWrite(sbx, `${mount}/should-fail.txt`);
  });

  it("a named volume seeded beforehand, read-write", async () => {
    const mount = "/mnt/pvc-data";
    const sbx = await create([{ name: "test-pvc-vol", pvc: { claimName: CLAIM }, mountPath: mount,
                                readOnly: false }]);
    assert.deepEqual(await out(sbx, `cat ${mount}/marker.txt`), [PVC_MARKER]);
    await out(sbx, `echo 'written-to-pvc' > ${mount}/pvc-output.txt`);
    assert.deepEqual(await out(sbx, `cat ${mount}/pvc-output.txt`), ["written-to-pvc"]);
    assert.equal(readFileSync(path.join(vroot, CLAIM, "pvc-output.txt"), "utf8"), "written-to-pvc\n");
  });

  it("a named volume read-only: the marker is read, a write fails", async () => {
    const mount = "/mnt/pvc-data-ro";
    const sbx = await create([{ name: "test-pvc-vol-ro", pvc: { claimName: CLAIM }, mountPath: mount,
                                readOnly: true }]);
    assert.deepEqual(await out(sbx, `cat ${mount}/marker.txt`), [PVC_MARKER]);
    await refusedWrite(sbx, `${mount}/should-fail.txt`);
  });

  it("a named volume's subPath: only that directory is mounted, and it takes writes", async () => {
    const mount = "/mnt/train";
    const sbx = await create([{ name: "test-pvc-subpath", pvc: { claimName: CLAIM }, mountPath: mount,
                                readOnly: false, subPath: "datasets/train" }]);
    assert.deepEqual(await out(sbx, `cat ${mount}/marker.txt`), [SUB_MARKER]);
    const ls = await out(sbx, `ls ${mount}/`);
    assert.ok(ls.includes("marker.txt") && !ls.includes("datasets"), JSON.stringify(ls));
    await out(sbx, `echo 'subpath-write-test' > ${mount}/output.txt`);
    assert.deepEqual(await out(sbx, `cat ${mount}/output.txt`), ["subpath-write-test"]);
    assert.equal(readFileSync(path.join(vroot, CLAIM, "datasets", "train", "output.txt"), "utf8"),
      "subpath-write-test\n");
  });

  it("two sandboxes share a named volume created on first use, each changing the other's files",
    { skip: clusterMode ? "the harness gives each pod its own SANDBOX_HOST_UID_BASE, so its own "
      + "volume group; pods configured alike share one" : false }, async () => {
      const claim = uniq("shared-");
      const vol = { name: "shared", pvc: { claimName: claim }, mountPath: "/mnt/shared" };
      const a = await create([vol]);
      const b = await create([vol]);
      assert.notDeepEqual(await out(a, "id -u"), await out(b, "id -u"));
      await out(a, "echo from-a > /mnt/shared/a.txt");
      assert.deepEqual(await out(b, "cat /mnt/shared/a.txt"), ["from-a"]);
      await out(b, "echo from-b >> /mnt/shared/a.txt && echo b-new > /mnt/shared/b.txt");
      assert.deepEqual(await out(a, "cat /mnt/shared/a.txt /mnt/shared/b.txt"),
        ["from-a", "from-b", "b-new"]);
      await out(a, "echo a-changed > /mnt/shared/b.txt");
      assert.deepEqual(await out(b, "cat /mnt/shared/b.txt"), ["a-changed"]);
      // the SDK's file API on the same volume
      await a.files.writeFiles([{ path: "/mnt/shared/sdk.txt", data: "via-sdk" }]);
      assert.equal(await b.files.readFile("/mnt/shared/sdk.txt"), "via-sdk");
      rmSync(path.join(vroot, claim), { recursive: true, force: true });
    });

  it("the SDK's file API writes under a host volume and the read-only one refuses", async () => {
    const dir = writable(path.join(allowed, uniq("files-")));
    const sbx = await create([
      { name: "rw", host: { path: dir }, mountPath: "/mnt/rw" },
      { name: "ro", host: { path: dir }, mountPath: "/mnt/ro", readOnly: true },
    ]);
    await sbx.files.writeFiles([{ path: "/mnt/rw/w.txt", data: "sdk-write" }]);
    assert.equal(readFileSync(path.join(dir, "w.txt"), "utf8"), "sdk-write");
    assert.equal(await sbx.files.readFile("/mnt/ro/w.txt"), "sdk-write");
    const e = await rejectsWithApi(sbx.files.writeFiles([{ path: "/mnt/ro/no.txt", data: "x" }]),
      400, "UNEXPECTED_RESPONSE");
    assert.match(e.rawBody, /read-only/);
  });

  it("ossfs is 400 NOT_SUPPORTED with the server's code", async () => {
    await rejectsWithApi(Sandbox.create({ connectionConfig: conn(d), image: "default", volumes: [
      { name: "oss", mountPath: "/mnt/oss", ossfs: { bucket: "bucket-1",
        endpoint: "oss-cn-hangzhou.aliyuncs.com", accessKeyId: "id", accessKeySecret: "secret" } },
    ] }), 400, "NOT_SUPPORTED");
  });

  it("a host path outside the allowed prefixes is 400 INVALID_REQUEST", async () => {
    await rejectsWithApi(Sandbox.create({ connectionConfig: conn(d), image: "default", volumes: [
      { name: "etc", host: { path: "/etc" }, mountPath: "/mnt/etc" },
    ] }), 400, "INVALID_REQUEST");
  });
});
