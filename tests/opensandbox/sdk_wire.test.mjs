// What OpenSandbox's SDK 0.1.11 puts on the wire for each lifecycle call, pinned against a
// recording stub server on 127.0.0.1:0 (no daemon needed: these pass on their own). They
// document what the daemon must understand and keep the SDK's defaults visible: a new SDK
// version that changes them fails here first. The daemon-facing tests are in
// lifecycle.test.mjs and auth.test.mjs.
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, it } from "node:test";

import {
  DEFAULT_ENTRYPOINT,
  DEFAULT_RESOURCE_LIMITS,
  DEFAULT_TIMEOUT_SECONDS,
  Sandbox,
  SandboxApiException,
  SandboxManager,
} from "@alibaba-group/opensandbox";

import { Registry } from "./harness.mjs";

let server;
let port;
const log = [];

function reply(res, status, obj, extra = {}) {
  const body = obj === undefined ? "" : JSON.stringify(obj);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "x-request-id": "stub-req-1",
    ...extra,
  });
  res.end(body);
}

function sandbox(now) {
  return { id: "sb1", status: { state: "Running" }, createdAt: now, expiresAt: now,
    entrypoint: DEFAULT_ENTRYPOINT, metadata: {} };
}

function handle(req, res, body) {
  log.push({ method: req.method, url: req.url, headers: req.headers, body });
  const now = new Date().toISOString();
  const u = req.url;
  if (req.method === "POST" && u === "/v1/sandboxes") return reply(res, 202, sandbox(now));
  const ep = /^\/v1\/sandboxes\/sb1\/endpoints\/(\d+)/.exec(u);
  if (ep) {
    const name = ep[1] === "44772" ? "X-EXECD-ACCESS-TOKEN" : "OPENSANDBOX-EGRESS-AUTH";
    return reply(res, 200, { endpoint: `127.0.0.1:${port}/v1/sandboxes/sb1/proxy/${ep[1]}`,
      headers: { [name]: "tok-" + ep[1] } });
  }
  if (u.endsWith("/proxy/44772/ping")) return reply(res, 200, undefined);
  if (u === "/v1/sandboxes/sb1" && req.method === "GET") return reply(res, 200, sandbox(now));
  if (u === "/v1/sandboxes/nope") return reply(res, 404, { code: "SANDBOX_NOT_FOUND", message: "no" });
  if (u === "/v1/sandboxes/empty-error") return reply(res, 404, undefined);
  if (u.startsWith("/v1/sandboxes?")) {
    return reply(res, 200, { items: [sandbox(now)], pagination: { page: 1, pageSize: 5,
      totalItems: 1, totalPages: 1, hasNextPage: false } });
  }
  if (req.method === "PATCH" && u.endsWith("/metadata")) return reply(res, 200, sandbox(now));
  if (u.endsWith("/renew-expiration")) return reply(res, 200, { expiresAt: now });
  if (u.endsWith("/pause") || u.endsWith("/resume")) return reply(res, 202, undefined);
  if (u.endsWith("/policy")) {
    return reply(res, 200, { status: "ok", mode: "deny_all", enforcementMode: "namespace",
      policy: { defaultAction: "deny", egress: [] } });
  }
  if (u === "/v1/metrics/events") return reply(res, 204, undefined);
  if (u.startsWith("/v1/snapshots?")) {
    return reply(res, 200, { items: [], pagination: { page: 2, pageSize: 3, totalItems: 0,
      totalPages: 0, hasNextPage: false } });
  }
  if (u.endsWith("/snapshots")) {
    return reply(res, 202, { id: "sn1", sandboxId: "sb1", status: { state: "Creating" },
      createdAt: now });
  }
  if (req.method === "DELETE") return reply(res, 204, undefined);
  return reply(res, 404, { code: "STUB", message: `stub has no ${req.method} ${u}` });
}

function find(method, re) {
  return log.filter((e) => e.method === method && re.test(e.url));
}

const reg = new Registry();
let sbx;

describe("the SDK's requests (recording stub)", () => {
  before(async () => {
    server = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => handle(req, res, body));
    });
    await new Promise((r) => server.listen(0, "127.0.0.1", r));
    port = server.address().port;
    sbx = reg.sbx(await Sandbox.create({
      connectionConfig: { domain: `127.0.0.1:${port}`, protocol: "http", apiKey: "KEY" },
      image: "default",
    }));
  });
  after(async () => {
    await reg.cleanup();
    await new Promise((r) => server.close(r));
  });

  it("create sends the SDK defaults: tail -f /dev/null, cpu 1 / memory 2Gi, timeout 600", () => {
    const [c] = find("POST", /^\/v1\/sandboxes$/);
    assert.ok(c, "no create request");
    assert.deepEqual(JSON.parse(c.body), {
      image: { uri: "default" },
      entrypoint: ["tail", "-f", "/dev/null"],
      resourceLimits: { cpu: "1", memory: "2Gi" },
      secureAccess: false,
      env: {},
      metadata: {},
      extensions: {},
      timeout: 600,
    });
    assert.deepEqual(DEFAULT_ENTRYPOINT, ["tail", "-f", "/dev/null"]);
    assert.deepEqual(DEFAULT_RESOURCE_LIMITS, { cpu: "1", memory: "2Gi" });
    assert.equal(DEFAULT_TIMEOUT_SECONDS, 600);
    assert.equal(c.headers["content-type"], "application/json");
    assert.equal(c.headers["open-sandbox-api-key"], "KEY");
    assert.equal(c.headers["user-agent"], "OpenSandbox-JS-SDK/0.1.11");
  });

  it("create then looks up both endpoints with use_server_proxy=false and pings execd", () => {
    const eps = find("GET", /\/endpoints\//).map((e) => e.url);
    assert.ok(eps.includes("/v1/sandboxes/sb1/endpoints/44772?use_server_proxy=false"), eps);
    assert.ok(eps.includes("/v1/sandboxes/sb1/endpoints/18080?use_server_proxy=false"), eps);
    const [ping] = find("GET", /\/proxy\/44772\/ping$/);
    assert.ok(ping, "no health-check ping");
    // the ping goes to http:// + endpoint + /ping with the endpoint's headers and the API key
    assert.equal(ping.headers["x-execd-access-token"], "tok-44772");
    assert.equal(ping.headers["open-sandbox-api-key"], "KEY");
  });

  it("create reports its latency to POST /v1/metrics/events", async () => {
    const got = [];
    for (let i = 0; i < 40 && !got.length; i++) {
      got.push(...find("POST", /^\/v1\/metrics\/events$/));
      if (!got.length) await new Promise((r) => setTimeout(r, 25));
    }
    assert.ok(got.length, "no metrics event");
    const ev = JSON.parse(got[0].body);
    assert.equal(ev.eventType, "sandbox.create");
    assert.equal(ev.success, true);
    assert.equal(ev.sandboxId, "sb1");
    assert.equal(ev.image, "default");
    assert.equal(typeof ev.createDurationMs, "number");
  });

  it("list sends state repeated and metadata as one encoded k=v&k2=v2 value", async () => {
    const m = reg.mgr(SandboxManager.create({
      connectionConfig: { domain: `127.0.0.1:${port}`, protocol: "http" } }));
    await m.listSandboxInfos({ states: ["Running", "Paused"], metadata: { team: "a", env: "b" },
      page: 1, pageSize: 5 });
    const [l] = find("GET", /^\/v1\/sandboxes\?/);
    assert.equal(l.url, "/v1/sandboxes?state=Running&state=Paused&metadata=team%3Da%26env%3Db&page=1&pageSize=5");
    assert.equal(l.headers["open-sandbox-api-key"], undefined);
  });

  it("patchMetadata, renew, pause, resume, kill: methods, paths, bodies", async () => {
    await sbx.patchMetadata({ a: "1", b: null });
    const [p] = find("PATCH", /\/metadata$/);
    assert.equal(p.url, "/v1/sandboxes/sb1/metadata");
    assert.deepEqual(JSON.parse(p.body), { a: "1", b: null });
    const t0 = Date.now();
    await sbx.renew(60);
    const [r] = find("POST", /\/renew-expiration$/);
    const sent = JSON.parse(r.body).expiresAt;
    // Date.toISOString(): milliseconds and Z
    assert.match(sent, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.ok(Math.abs(Date.parse(sent) - (t0 + 60_000)) < 5_000);
    await sbx.pause();
    const [pa] = find("POST", /\/pause$/);
    assert.equal(pa.url, "/v1/sandboxes/sb1/pause");
    assert.equal(pa.body, "");
    assert.equal(pa.headers["content-length"], "0");
    assert.equal(pa.headers["content-type"], undefined);
    const resumed = reg.sbx(await sbx.resume());
    assert.equal(resumed.id, "sb1");
    assert.equal(find("POST", /\/resume$/).length, 1);
    await resumed.kill();
    assert.deepEqual(find("DELETE", /^\/v1\/sandboxes\/sb1$/).map((e) => e.body), [""]);
  });

  it("egress calls go to the 18080 endpoint with its headers", async () => {
    await sbx.getEgressPolicy();
    await sbx.patchEgressRules([{ action: "deny", target: "x.com" }]);
    await sbx.deleteEgressRules(["x.com"]);
    const g = find("GET", /\/proxy\/18080\/policy$/);
    assert.equal(g.length, 1);
    assert.equal(g[0].headers["opensandbox-egress-auth"], "tok-18080");
    const [pt] = find("PATCH", /\/proxy\/18080\/policy$/);
    assert.deepEqual(JSON.parse(pt.body), [{ action: "deny", target: "x.com" }]);
    const [dl] = find("DELETE", /\/proxy\/18080\/policy$/);
    assert.deepEqual(JSON.parse(dl.body), ["x.com"]);
    assert.equal(dl.headers["content-type"], "application/json");
  });

  it("snapshot calls: create with {name}, list with sandboxId, name, state, page, pageSize", async () => {
    const m = reg.mgr(SandboxManager.create({
      connectionConfig: { domain: `127.0.0.1:${port}`, protocol: "http" } }));
    await m.createSnapshot("sb1", { name: "n" });
    const [c] = find("POST", /\/snapshots$/);
    assert.equal(c.url, "/v1/sandboxes/sb1/snapshots");
    assert.deepEqual(JSON.parse(c.body), { name: "n" });
    await m.listSnapshots({ sandboxId: "sb1", states: ["Ready"], name: "n", page: 2, pageSize: 3 });
    const [l] = find("GET", /^\/v1\/snapshots\?/);
    assert.equal(l.url, "/v1/snapshots?sandboxId=sb1&name=n&state=Ready&page=2&pageSize=3");
  });

  it("an error body becomes SandboxApiException with code, message and the X-Request-ID", async () => {
    const m = reg.mgr(SandboxManager.create({
      connectionConfig: { domain: `127.0.0.1:${port}`, protocol: "http" } }));
    await assert.rejects(m.getSandboxInfo("nope"), (e) => {
      assert.ok(e instanceof SandboxApiException);
      assert.equal(e.statusCode, 404);
      assert.equal(e.error.code, "SANDBOX_NOT_FOUND");
      assert.equal(e.requestId, "stub-req-1");
      return true;
    });
    // why OPENSANDBOX.md forbids empty error bodies: the SDK does not see the error at all
    await assert.rejects(m.getSandboxInfo("empty-error"), (e) => {
      assert.match(e.message, /unexpected response shape/);
      return true;
    });
  });
});
