// Auth as the SDK meets it (OPENSANDBOX.md section 1): a pod started with
// SANDBOX_HOST_API_KEY wants `apiKey` in the SDK's connection config; the execd and egress
// calls then work only because the endpoint look-up hands the SDK the sandbox's token, which it
// forwards. secureAccess: true works with a key; without one it is refused (400 NOT_SUPPORTED:
// the look-up would hand its token to anyone).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Sandbox, SandboxManager } from "@alibaba-group/opensandbox";

import { conn, needsRoot, Registry, rejectsWithApi, startDaemon, waitFor } from "./harness.mjs";

const KEY = "sdk-tier-key-" + "0123456789abcdef";
let keyed;
let open;
const reg = new Registry();

function header(headers, name) {
  for (const [k, v] of Object.entries(headers ?? {})) {
    if (k.toLowerCase() === name.toLowerCase()) return v;
  }
  return undefined;
}

describe("auth through the SDK", { skip: needsRoot, timeout: 120_000 }, () => {
  before(async () => {
    keyed = await startDaemon({ SANDBOX_HOST_API_KEY: KEY });
    open = await startDaemon();
  });
  after(async () => {
    await reg.cleanup();
    assert.equal(await keyed.stop(), 0);
    assert.equal(await open.stop(), 0);
  });

  it("with apiKey the SDK creates, reaches execd with the handed-out token, and lists", async () => {
    const s = reg.sbx(await Sandbox.create({ connectionConfig: conn(keyed, { apiKey: KEY }),
      image: "default" }));
    assert.equal(await s.isHealthy(), true);
    const ep = await s.getEndpoint(44772);
    assert.ok(header(ep.headers, "X-EXECD-ACCESS-TOKEN"), JSON.stringify(ep));
    const eg = await s.getEndpoint(18080);
    assert.ok(header(eg.headers, "OPENSANDBOX-EGRESS-AUTH"), JSON.stringify(eg));
    assert.equal((await s.getEgressPolicy()).defaultAction, "deny");
    const m = reg.mgr(SandboxManager.create({ connectionConfig: conn(keyed, { apiKey: KEY }) }));
    assert.ok((await m.listSandboxInfos({})).items.some((x) => x.id === s.id));
    await s.pause();
    assert.ok(await waitFor(async () => (await s.getInfo()).status.state === "Paused"));
    const r = reg.sbx(await s.resume());
    assert.equal(await r.isHealthy(), true);
  });

  it("without apiKey every call is 401 MISSING_API_KEY with a request id", async () => {
    await rejectsWithApi(Sandbox.create({ connectionConfig: conn(keyed), image: "default" }),
      401, "MISSING_API_KEY");
    const m = reg.mgr(SandboxManager.create({ connectionConfig: conn(keyed) }));
    await rejectsWithApi(m.listSandboxInfos({}), 401, "MISSING_API_KEY");
    await rejectsWithApi(m.listSnapshots({}), 401, "MISSING_API_KEY");
  });

  it("a wrong apiKey is 401 INVALID_API_KEY", async () => {
    await rejectsWithApi(Sandbox.create({ connectionConfig: conn(keyed, { apiKey: KEY + "x" }),
      image: "default" }), 401, "INVALID_API_KEY");
    const m = reg.mgr(SandboxManager.create({ connectionConfig: conn(keyed, { apiKey: "nope" }) }));
    await rejectsWithApi(m.listSandboxInfos({}), 401, "INVALID_API_KEY");
  });

  it("secureAccess without a key is refused with 400 NOT_SUPPORTED", async () => {
    await rejectsWithApi(Sandbox.create({ connectionConfig: conn(open), image: "default",
      secureAccess: true }), 400, "NOT_SUPPORTED");
  });

  it("secureAccess with a key: the SDK works through the token, also reconnected", async () => {
    const s = reg.sbx(await Sandbox.create({ connectionConfig: conn(keyed, { apiKey: KEY }),
      image: "default", secureAccess: true }));
    assert.equal(await s.isHealthy(), true);
    const ep = await s.getEndpoint(44772);
    assert.ok(header(ep.headers, "X-EXECD-ACCESS-TOKEN"), JSON.stringify(ep));
    assert.equal((await s.getEgressPolicy()).defaultAction, "deny");
    const c = reg.sbx(await Sandbox.connect({ sandboxId: s.id,
      connectionConfig: conn(keyed, { apiKey: KEY }) }));
    assert.equal(await c.isHealthy(), true);
  });
});
