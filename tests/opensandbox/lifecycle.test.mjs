// The lifecycle surface of sandbox-host driven only through OpenSandbox's JavaScript SDK
// (npm @alibaba-group/opensandbox 0.1.11), as a user would: Sandbox.create with the SDK's
// defaults, getInfo, SandboxManager list with filters, patchMetadata, renew, pause/resume,
// kill, getEndpoint, Sandbox.connect, snapshots, the egress policy, and errors that carry the
// server's code and request id. One daemon (the real binary) for the whole file.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
  DEFAULT_ENTRYPOINT,
  DEFAULT_TIMEOUT_SECONDS,
  Sandbox,
  SandboxManager,
} from "@alibaba-group/opensandbox";

import {
  conn,
  endpointHost,
  hostArch,
  needsRoot,
  Registry,
  rejectsWithApi,
  startDaemon,
  uniq,
  waitFor,
} from "./harness.mjs";

let d;
const reg = new Registry();

async function create(opts = {}) {
  return reg.sbx(await Sandbox.create({ connectionConfig: conn(d), image: "default", ...opts }));
}

function manager(extra = {}) {
  return reg.mgr(SandboxManager.create({ connectionConfig: conn(d, extra) }));
}

async function stateOf(s) {
  return (await s.getInfo()).status.state;
}

async function waitState(s, want, timeoutMs = 15_000) {
  const seen = [];
  const ok = await waitFor(async () => {
    const st = await stateOf(s);
    if (seen[seen.length - 1] !== st) seen.push(st);
    return st === want;
  }, timeoutMs);
  assert.ok(ok, `state ${want} not reached; seen ${seen.join(" -> ")}`);
  return seen;
}

describe("lifecycle through the SDK", { skip: needsRoot, timeout: 120_000 }, () => {
  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    await reg.cleanup();
    const rc = await d.stop();
    assert.equal(rc, 0, `daemon exit ${rc}; stderr tail:\n${d.stderr().slice(-2000)}`);
  });

  it("Sandbox.create with the SDK's defaults returns a running, healthy sandbox", async () => {
    // only what a user must give: the pod as domain, http, and an image
    const s = reg.sbx(await Sandbox.create({
      connectionConfig: { domain: `127.0.0.1:${d.port}`, protocol: "http" },
      image: "default",
    }));
    assert.equal(typeof s.id, "string");
    assert.ok(s.id.length >= 22);
    const info = await s.getInfo();
    assert.equal(info.id, s.id);
    assert.equal(info.status.state, "Running");
    assert.deepEqual(info.image, { uri: "default" });
    // the defaults the SDK sent: tail -f /dev/null, timeout 600 s (and 2Gi, lowered by the host)
    assert.deepEqual(info.entrypoint, DEFAULT_ENTRYPOINT);
    assert.ok(info.createdAt instanceof Date && info.expiresAt instanceof Date);
    const span = info.expiresAt.getTime() - info.createdAt.getTime();
    assert.ok(Math.abs(span - DEFAULT_TIMEOUT_SECONDS * 1000) <= 1500, `span ${span} ms`);
    assert.ok(Math.abs(info.createdAt.getTime() - Date.now()) < 60_000);
    assert.deepEqual(info.metadata ?? {}, {});
    assert.equal(await s.isHealthy(), true);
  });

  it("getEndpoint names the pod and the sandbox's proxy path for execd and egress", async () => {
    const s = await create();
    const ex = await s.getEndpoint(44772);
    const host = endpointHost(d, s.id);
    assert.equal(ex.endpoint, `${host}/v1/sandboxes/${s.id}/proxy/44772`);
    const eg = await s.getEndpoint(18080);
    assert.equal(eg.endpoint, `${host}/v1/sandboxes/${s.id}/proxy/18080`);
    // no auth on this pod: no token to hand out
    const h = Object.keys(ex.headers ?? {}).map((k) => k.toLowerCase());
    assert.ok(!h.includes("x-execd-access-token"), JSON.stringify(ex.headers));
    assert.equal(await s.getEndpointUrl(44772),
      `http://${host}/v1/sandboxes/${s.id}/proxy/44772`);
    await rejectsWithApi(s.getEndpoint(8080), 404, "NOT_SUPPORTED");
    await rejectsWithApi(s.getSignedEndpoint(44772, Math.floor(Date.now() / 1000) + 600),
      400, "NOT_SUPPORTED");
  });

  it("SandboxManager lists sandboxes with state and metadata filters, oldest first", async () => {
    const tag = uniq("suite");
    const a = await create({ metadata: { suite: tag, role: "a" } });
    const b = await create({ metadata: { suite: tag, role: "b" } });
    const m = manager();
    const ids = async (f) => (await m.listSandboxInfos(f)).items.map((x) => x.id);
    assert.deepEqual(await ids({ metadata: { suite: tag } }), [a.id, b.id]);
    assert.deepEqual(await ids({ metadata: { suite: tag, role: "b" } }), [b.id]);
    assert.deepEqual(await ids({ metadata: { suite: tag, role: "c" } }), []);
    await b.pause();
    await waitState(b, "Paused");
    assert.deepEqual(await ids({ states: ["Paused"], metadata: { suite: tag } }), [b.id]);
    assert.deepEqual(await ids({ states: ["Running"], metadata: { suite: tag } }), [a.id]);
    assert.deepEqual(await ids({ states: ["Running", "Paused"], metadata: { suite: tag } }),
      [a.id, b.id]);
    const page = await m.listSandboxInfos({ metadata: { suite: tag }, pageSize: 1 });
    assert.deepEqual(page.items.map((x) => x.id), [a.id]);
    assert.deepEqual(page.pagination, { page: 1, pageSize: 1, totalItems: 2, totalPages: 2,
      hasNextPage: true });
    const page2 = await m.listSandboxInfos({ metadata: { suite: tag }, pageSize: 1, page: 2 });
    assert.deepEqual(page2.items.map((x) => x.id), [b.id]);
    assert.equal(page2.pagination.hasNextPage, false);
    const info = (await m.listSandboxInfos({ metadata: { suite: tag, role: "a" } })).items[0];
    assert.ok(info.createdAt instanceof Date);
    assert.deepEqual(info.metadata, { suite: tag, role: "a" });
    assert.equal((await m.getSandboxInfo(a.id)).id, a.id);
  });

  it("patchMetadata merges (null removes, absent keeps) and returns the sandbox", async () => {
    const s = await create({ metadata: { keep: "k", drop: "d", change: "old" } });
    const info = await s.patchMetadata({ drop: null, change: "new", add: "a" });
    assert.equal(info.id, s.id);
    assert.deepEqual(info.metadata, { keep: "k", change: "new", add: "a" });
    assert.deepEqual((await s.getInfo()).metadata, { keep: "k", change: "new", add: "a" });
    const m = manager();
    const again = await m.patchSandboxMetadata(s.id, {});
    assert.deepEqual(again.metadata, { keep: "k", change: "new", add: "a" });
    await rejectsWithApi(s.patchMetadata({ "opensandbox.io/owner": "me" }), 400,
      "INVALID_METADATA_FORMAT");
  });

  it("renew moves expiresAt to now + the given seconds", async () => {
    const s = await create();
    const t0 = Date.now();
    const res = await s.renew(3600);
    assert.ok(res.expiresAt instanceof Date);
    assert.ok(Math.abs(res.expiresAt.getTime() - (t0 + 3_600_000)) < 5_000);
    const info = await s.getInfo();
    assert.ok(Math.abs(info.expiresAt.getTime() - res.expiresAt.getTime()) < 1_000);
    await manager().renewSandbox(s.id, 1800);
    const later = (await s.getInfo()).expiresAt.getTime();
    assert.ok(Math.abs(later - (Date.now() + 1_800_000)) < 5_000);
  });

  it("timeoutSeconds: null makes a sandbox without expiry, whose renew is refused", async () => {
    const s = await create({ timeoutSeconds: null });
    assert.equal((await s.getInfo()).expiresAt, null);
    await rejectsWithApi(s.renew(600), 409, "INVALID_STATE");
  });

  it("pause stops it (health false), resume brings it back through a fresh instance", async () => {
    const s = await create();
    await s.pause();
    const seen = await waitState(s, "Paused");
    assert.ok(seen.every((x) => x === "Pausing" || x === "Paused"), seen.join());
    assert.equal(await s.isHealthy(), false, "execd answers 409 SANDBOX_PAUSED while paused");
    await rejectsWithApi(s.pause(), 409, "INVALID_STATE");
    const resumed = reg.sbx(await s.resume());
    assert.equal(resumed.id, s.id);
    // resume() returns once execd answers its ping; the state may still say Resuming
    const after = await waitState(resumed, "Running");
    assert.ok(after.every((x) => x === "Resuming" || x === "Running"), after.join());
    assert.equal(await resumed.isHealthy(), true);
    await rejectsWithApi(manager().resumeSandbox(s.id), 409, "INVALID_STATE");
    // the manager's pause and the static resume
    await manager().pauseSandbox(s.id);
    await waitState(s, "Paused");
    const again = reg.sbx(await Sandbox.resume({ sandboxId: s.id, connectionConfig: conn(d) }));
    await waitState(again, "Running");
    assert.equal(await again.isHealthy(), true);
  });

  it("Sandbox.connect attaches to an existing sandbox", async () => {
    const s = await create({ metadata: { via: "connect" } });
    const c = reg.sbx(await Sandbox.connect({ sandboxId: s.id, connectionConfig: conn(d) }));
    assert.equal(c.id, s.id);
    assert.equal(await c.isHealthy(), true);
    assert.deepEqual((await c.getInfo()).metadata, { via: "connect" });
    await rejectsWithApi(Sandbox.connect({ sandboxId: "0".repeat(40), connectionConfig: conn(d) }),
      404, "SANDBOX_NOT_FOUND");
  });

  it("kill deletes it: getInfo then fails with SANDBOX_NOT_FOUND and the request id", async () => {
    const s = await create();
    await s.kill();
    const e = await rejectsWithApi(s.getInfo(), 404, "SANDBOX_NOT_FOUND");
    assert.ok(e.requestId.length >= 16);
    await rejectsWithApi(s.kill(), 404, "SANDBOX_NOT_FOUND");
    assert.equal(await s.isHealthy(), false);
    // a request id of the caller's own comes back in the exception
    const m = manager({ headers: { "X-Request-ID": "sdk-trace-0001" } });
    const e2 = await rejectsWithApi(m.getSandboxInfo(s.id), 404, "SANDBOX_NOT_FOUND");
    assert.equal(e2.requestId, "sdk-trace-0001");
    await rejectsWithApi(manager().killSandbox(s.id), 404, "SANDBOX_NOT_FOUND");
  });

  it("a refused create throws the server's code, message and request id", async () => {
    const e = await rejectsWithApi(Sandbox.create({ connectionConfig: conn(d),
      image: "registry.example.com/no-such-image:1" }), 400, "INVALID_IMAGE");
    assert.match(e.error.message, /default/, "INVALID_IMAGE names the images there are");
    await rejectsWithApi(Sandbox.create({ connectionConfig: conn(d), image: "default",
      resource: { cpu: "1", memory: "1Gi", gpu: "1" } }), 400, "NOT_SUPPORTED");
    await rejectsWithApi(Sandbox.create({ connectionConfig: conn(d), image: "default",
      networkPolicy: { egress: [{ action: "allow", target: "pypi.org" }] } }), 400,
    "NOT_SUPPORTED");
    await rejectsWithApi(Sandbox.create({ connectionConfig: conn(d), image: "default",
      volumes: [{ name: "data", host: { path: "/tmp" }, mountPath: "/mnt" }] }), 400,
    "NOT_SUPPORTED");
    await rejectsWithApi(Sandbox.create({ connectionConfig: conn(d), image: "default",
      timeoutSeconds: 5 }), 400, "INVALID_REQUEST");
  });

  it("every create option the host honours is kept", async () => {
    const platform = { os: "linux", arch: hostArch() };
    const s = await create({
      entrypoint: ["sh", "-c", "exec tail -f /dev/null"],
      resource: { cpu: "500m", memory: "512Mi" },
      env: { HELLO: "world" },
      metadata: { project: "sdk-tier" },
      timeoutSeconds: 120,
      platform,
      networkPolicy: { egress: [] }, // the SDK makes it defaultAction "deny"
      extensions: { "access.renew.extend.seconds": "300" },
    });
    const info = await s.getInfo();
    assert.deepEqual(info.entrypoint, ["sh", "-c", "exec tail -f /dev/null"]);
    assert.deepEqual(info.metadata, { project: "sdk-tier" });
    assert.deepEqual(info.platform, platform);
    // renew on access: the SDK's own health-check ping (an execd request) moved expiresAt
    // from createdAt + 120 s to at least now + 300 s
    assert.ok(info.expiresAt.getTime() >= Date.now() + 290_000,
      `expiresAt ${info.expiresAt.toISOString()}`);
  });

  it("the sandbox's egress policy is deny-all, deny rules are taken, allow rules refused", async () => {
    const s = await create();
    assert.deepEqual(await s.getEgressPolicy(), { defaultAction: "deny", egress: [] });
    await s.patchEgressRules([{ action: "deny", target: "example.com" }]);
    await rejectsWithApi(s.patchEgressRules([{ action: "allow", target: "example.com" }]), 400,
      "NOT_SUPPORTED");
    await s.deleteEgressRules(["example.com"]);
    assert.equal((await s.getEgressPolicy()).defaultAction, "deny");
  });

  it("snapshots: create, wait Ready, list, restore into a new sandbox, delete", async () => {
    const s = await create();
    const m = manager();
    const name = uniq("snap");
    const sn = await m.createSnapshot(s.id, { name });
    assert.equal(sn.status.state, "Creating");
    assert.equal(sn.sandboxId, s.id);
    assert.ok(sn.createdAt instanceof Date);
    const ready = await waitFor(async () => {
      const g = await m.getSnapshot(sn.id);
      return g.status.state === "Ready" ? g : null;
    }, 60_000);
    assert.ok(ready, "snapshot never Ready");
    assert.equal(ready.name, name);
    const list = await m.listSnapshots({ sandboxId: s.id });
    assert.deepEqual(list.items.map((x) => x.id), [sn.id]);
    assert.deepEqual((await m.listSnapshots({ name, states: ["Ready"] })).items.map((x) => x.id),
      [sn.id]);
    const r = reg.sbx(await Sandbox.create({ connectionConfig: conn(d), snapshotId: sn.id }));
    const info = await r.getInfo();
    assert.equal(info.snapshotId, sn.id);
    assert.equal(info.status.state, "Running");
    assert.equal(await r.isHealthy(), true);
    await m.deleteSnapshot(sn.id);
    await rejectsWithApi(m.getSnapshot(sn.id), 404, "SNAPSHOT_NOT_FOUND");
  });

  it("the domain may be given as a full URL, and useServerProxy changes nothing", async () => {
    const s = reg.sbx(await Sandbox.create({
      connectionConfig: { domain: `http://127.0.0.1:${d.port}`, useServerProxy: true },
      image: "default",
    }));
    assert.equal(await s.isHealthy(), true);
    assert.equal((await s.getEndpoint(44772)).endpoint,
      `${endpointHost(d, s.id)}/v1/sandboxes/${s.id}/proxy/44772`);
  });
});
