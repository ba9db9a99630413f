// Issue 26: the code interpreter through OpenSandbox's JavaScript SDK (npm
// @alibaba-group/opensandbox 0.1.11). The SDK has no code-interpreter class of its own; its
// execd client (`createExecdClient` of "@alibaba-group/opensandbox/internal", typed with the
// execd YAML's /code routes) is what OpenSandbox's code-interpreter SDK builds on: this file
// uses it exactly so, at the endpoint and with the headers the SDK's getEndpoint hands out, and
// reads a cell's stream with fetch as that SDK does (`{json}\n\n` events).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Sandbox } from "@alibaba-group/opensandbox";
import { createExecdClient } from "@alibaba-group/opensandbox/internal";

import { conn, needsRoot, Registry, startDaemon } from "./harness.mjs";

let d;
const reg = new Registry();

async function execd(sbx) {
  const ep = await sbx.getEndpoint(44772);
  const baseUrl = `http://${ep.endpoint}`;
  return { baseUrl, headers: ep.headers ?? {},
           client: createExecdClient({ baseUrl, headers: ep.headers ?? {} }) };
}

/** POST /code: the stream's events, in order. */
async function run(x, body) {
  const r = await fetch(`${x.baseUrl}/code`, {
    method: "POST",
    headers: { ...x.headers, "Content-Type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  assert.equal(r.status, 200, await r.clone().text());
  assert.match(r.headers.get("content-type") ?? "", /^text\/event-stream/);
  const text = await r.text();
  return text.split("\n\n").filter((s) => s.trim()).map((s) => JSON.parse(s));
}

function types(evs) {
  return evs.map((e) => e.type).filter((t) => t !== "ping");
}

describe("the code interpreter through the SDK's execd client", { skip: needsRoot, timeout: 300_000 }, () => {
  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    await reg.cleanup();
    const rc = d ? await d.stop() : 0;
    assert.equal(rc, 0, `daemon exit ${rc}; stderr tail:\n${d.stderr().slice(-2000)}`);
  });

  it("a python context keeps its state, shows the last value, lists, and is deleted", async () => {
    const sbx = reg.sbx(await Sandbox.create({ connectionConfig: conn(d), image: "default",
                                               timeoutSeconds: 120 }));
    const x = await execd(sbx);
    const made = await x.client.POST("/code/context", { body: { language: "python" } });
    assert.equal(made.response.status, 200, JSON.stringify(made.error));
    const ctx = made.data;
    assert.equal(ctx.language, "python");
    assert.ok(typeof ctx.id === "string" && ctx.id);

    let evs = await run(x, { context: ctx, code: "import math\nr = 3\nprint('set')" });
    assert.deepEqual(types(evs), ["init", "stdout", "execution_count", "execution_complete"]);
    assert.equal(evs[0].text, ctx.id);
    assert.equal(evs[1].text, "set");
    evs = await run(x, { context: ctx, code: "round(math.pi * r ** 2, 3)" });
    assert.deepEqual(types(evs), ["init", "execution_count", "result", "execution_complete"]);
    const res = evs.find((e) => e.type === "result");
    assert.deepEqual(res.results, { "text/plain": "28.274" });
    assert.equal(res.execution_count, 2);
    assert.equal(evs.find((e) => e.type === "execution_count").execution_count, 2);

    evs = await run(x, { context: ctx, code: "1 / 0" });
    const err = evs.at(-1);
    assert.equal(err.type, "error");
    assert.equal(err.error.ename, "ZeroDivisionError");
    assert.ok(err.error.traceback.length > 0);

    const listed = await x.client.GET("/code/contexts", { params: { query: { language: "python" } } });
    assert.equal(listed.response.status, 200);
    assert.ok(listed.data.some((c) => c.id === ctx.id && c.language === "python"));
    const got = await x.client.GET("/code/contexts/{context_id}",
      { params: { path: { context_id: ctx.id } } });
    assert.deepEqual(got.data, { id: ctx.id, language: "python" });
    const del = await x.client.DELETE("/code/contexts/{context_id}",
      { params: { path: { context_id: ctx.id } } });
    assert.equal(del.response.status, 200);
    const gone = await x.client.GET("/code/contexts/{context_id}",
      { params: { path: { context_id: ctx.id } } });
    assert.equal(gone.response.status, 404);
  });

  it("a cell without a context runs in a fresh one of its language", async () => {
    const sbx = reg.sbx(await Sandbox.create({ connectionConfig: conn(d), image: "default",
                                               timeoutSeconds: 120 }));
    const x = await execd(sbx);
    const evs = await run(x, { context: { language: "bash" }, code: "echo hello from bash" });
    assert.deepEqual(types(evs), ["init", "stdout", "execution_count", "execution_complete"]);
    assert.equal(evs[1].text, "hello from bash");
    const listed = await x.client.GET("/code/contexts", { params: { query: { language: "bash" } } });
    assert.deepEqual(listed.data, []);
  });
});
