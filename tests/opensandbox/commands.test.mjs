// A sandbox's execd driven only through OpenSandbox's JavaScript SDK (npm
// @alibaba-group/opensandbox 0.1.11), as a user would (OPENSANDBOX.md section 3.1):
// commands.run with handlers, workingDirectory, envs, exit codes and timeouts; background
// commands with getCommandStatus and getBackgroundCommandLogs; interrupt; sessions
// (createSession / runInSession / deleteSession); getMetrics; isHealthy after pause and
// resume. Written from the SDK's typings (dist/index.d.ts) and sources. One daemon for the file.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Sandbox } from "@alibaba-group/opensandbox";

import { conn, needsRoot, Registry, rejectsWithApi, startDaemon, waitFor } from "./harness.mjs";

let d;
const reg = new Registry();
let sbx;

async function create(opts = {}) {
  return reg.sbx(await Sandbox.create({ connectionConfig: conn(d), image: "default", ...opts }));
}

describe("commands, sessions and metrics through the SDK", { skip: needsRoot, timeout: 120_000 }, () => {
  before(async () => {
    d = await startDaemon();
    sbx = await create();
  });
  after(async () => {
    await reg.cleanup();
    const rc = await d.stop();
    assert.equal(rc, 0, `daemon exit ${rc}; stderr tail:\n${d.stderr().slice(-2000)}`);
  });

  it("commands.run streams to the handlers in order and fills the execution", async () => {
    const seen = [];
    const ex = await sbx.commands.run("echo one; echo two >&2; echo three", {}, {
      onInit: (i) => seen.push(["init", i.id]),
      onStdout: (m) => seen.push(["out", m.text]),
      onStderr: (m) => seen.push(["err", m.text]),
      onExecutionComplete: (c) => seen.push(["complete", typeof c.executionTimeMs]),
      onError: (e) => seen.push(["error", e.value]),
    });
    assert.ok(ex.id && seen[0][0] === "init" && seen[0][1] === ex.id, JSON.stringify(seen));
    assert.deepEqual(seen.filter((s) => s[0] === "out").map((s) => s[1]), ["one", "three"]);
    assert.deepEqual(seen.filter((s) => s[0] === "err").map((s) => s[1]), ["two"]);
    assert.deepEqual(seen[seen.length - 1], ["complete", "number"]);
    assert.equal(ex.exitCode, 0);
    assert.equal(ex.error, undefined);
    assert.deepEqual(ex.logs.stdout.map((m) => m.text), ["one", "three"]);
    assert.equal(ex.logs.stderr[0].isError, true);
    assert.ok(ex.complete && ex.complete.timestamp > 1.6e12);
  });

  it("a failing command has its exit code and a CommandExecError", async () => {
    const ex = await sbx.commands.run("echo before; exit 42");
    assert.equal(ex.exitCode, 42);
    assert.equal(ex.error.name, "CommandExecError");
    assert.equal(ex.error.value, "42");
    assert.equal(ex.complete, undefined);
    const sig = await sbx.commands.run("kill -KILL $$");
    assert.equal(sig.exitCode, 137);
  });

  it("workingDirectory and envs", async () => {
    const ex = await sbx.commands.run('pwd; echo "$GREETING"', {
      workingDirectory: "/tmp", envs: { GREETING: "hi there" } });
    assert.deepEqual(ex.logs.stdout.map((m) => m.text), ["/tmp", "hi there"]);
    const home = await sbx.commands.run("pwd", { workingDirectory: "~" });
    assert.deepEqual(home.logs.stdout.map((m) => m.text), ["/workspace"]);
    // a directory that does not exist: the SDK's exception with execd's code
    await rejectsWithApi(sbx.commands.run("pwd", { workingDirectory: "/no/such" }), 400,
      "INVALID_REQUEST_BODY");
  });

  it("timeoutSeconds kills the command", async () => {
    const ex = await sbx.commands.run("sleep 30", { timeoutSeconds: 0.5 });
    assert.equal(ex.exitCode, 137);
    assert.ok(ex.error.traceback.some((t) => t.includes("timed out")), JSON.stringify(ex.error));
  });

  it("a background command with getCommandStatus and getBackgroundCommandLogs", async () => {
    const ex = await sbx.commands.run("echo first; sleep 0.3; echo second >&2; exit 3",
      { background: true });
    assert.ok(ex.id);
    assert.ok(ex.complete, "init and execution_complete at once");
    assert.equal(ex.exitCode, undefined, "the SDK infers no exit code for background runs");
    let st = await sbx.commands.getCommandStatus(ex.id);
    assert.equal(st.id, ex.id);
    assert.equal(st.content, "echo first; sleep 0.3; echo second >&2; exit 3");
    assert.ok(st.startedAt instanceof Date);
    const done = await waitFor(async () => {
      st = await sbx.commands.getCommandStatus(ex.id);
      return st.running === false;
    }, 15_000);
    assert.ok(done, "the command ended");
    assert.equal(st.exitCode, 3);
    assert.ok(st.finishedAt instanceof Date && st.finishedAt >= st.startedAt);
    const all = await sbx.commands.getBackgroundCommandLogs(ex.id);
    assert.equal(all.content, "first\nsecond\n");
    assert.equal(all.cursor, 13);
    const tail = await sbx.commands.getBackgroundCommandLogs(ex.id, 6);
    assert.equal(tail.content, "second\n");
    const none = await sbx.commands.getBackgroundCommandLogs(ex.id, all.cursor);
    assert.equal(none.content, "");
    assert.equal(none.cursor, 13);
  });

  it("interrupt kills a background command and a foreground one", async () => {
    const bg = await sbx.commands.run("sleep 300", { background: true });
    await sbx.commands.interrupt(bg.id);
    const st = await waitFor(async () => {
      const s = await sbx.commands.getCommandStatus(bg.id);
      return s.running === false ? s : null;
    }, 15_000);
    assert.ok(st, "interrupted");
    assert.equal(st.exitCode, 137);
    // a foreground one, by the id its init carried
    let id;
    const p = sbx.commands.run("sleep 300", {}, {
      onInit: async (i) => {
        id = i.id;
        await sbx.commands.interrupt(id);
      },
    });
    const ex = await p;
    assert.equal(ex.id, id);
    assert.equal(ex.exitCode, 137);
    await rejectsWithApi(sbx.commands.getCommandStatus("no-such-command"), 404,
      "INVALID_REQUEST_BODY");
  });

  it("sessions carry their directory and exports between runs", async () => {
    const sid = await sbx.commands.createSession({ workingDirectory: "/tmp/sdk-session" });
    assert.equal(typeof sid, "string");
    const a = await sbx.commands.runInSession(sid, "pwd; export COLOR=blue; cd /workspace");
    assert.deepEqual(a.logs.stdout.map((m) => m.text), ["/tmp/sdk-session"]);
    assert.equal(a.exitCode, 0);
    assert.equal(a.id, sid, "the init of a session run carries the session id");
    const b = await sbx.commands.runInSession(sid, 'pwd; echo "$COLOR"; exit 5');
    assert.deepEqual(b.logs.stdout.map((m) => m.text), ["/workspace", "blue"]);
    assert.equal(b.exitCode, 5);
    const c = await sbx.commands.runInSession(sid, "pwd", { workingDirectory: "/tmp" });
    assert.deepEqual(c.logs.stdout.map((m) => m.text), ["/tmp"]);
    const t = await sbx.commands.runInSession(sid, "sleep 30", { timeoutSeconds: 0.3 });
    assert.equal(t.exitCode, 137);
    await sbx.commands.deleteSession(sid);
    await rejectsWithApi(sbx.commands.runInSession(sid, "true"), 404, "CONTEXT_NOT_FOUND");
    await rejectsWithApi(sbx.commands.deleteSession(sid), 404, "CONTEXT_NOT_FOUND");
  });

  it("getMetrics reports the sandbox's own limits and use", async () => {
    const s = await create({ resource: { cpu: "500m", memory: "512Mi" } });
    const m = await s.getMetrics();
    assert.equal(m.cpuCount, 0.5);
    assert.equal(m.memoryTotalMiB, 512);
    assert.ok(m.memoryUsedMiB > 0 && m.memoryUsedMiB <= 512, JSON.stringify(m));
    assert.ok(m.cpuUsedPercentage >= 0 && m.cpuUsedPercentage <= 100, JSON.stringify(m));
    assert.ok(Math.abs(m.timestamp - Date.now()) < 60_000);
    const again = await s.getMetrics();
    assert.ok(again.timestamp >= m.timestamp);
  });

  it("isHealthy is false while paused and true after resume; commands run again", async () => {
    const s = await create();
    assert.equal(await s.isHealthy(), true);
    await s.pause();
    await waitFor(async () => (await s.getInfo()).status.state === "Paused", 30_000);
    assert.equal(await s.isHealthy(), false);
    await rejectsWithApi(s.commands.run("true"), 409, "SANDBOX_PAUSED");
    await rejectsWithApi(s.getMetrics(), 409, "SANDBOX_PAUSED");
    const resumed = reg.sbx(await s.resume());
    assert.equal(await resumed.isHealthy(), true);
    const ex = await resumed.commands.run("echo back");
    assert.deepEqual(ex.logs.stdout.map((m) => m.text), ["back"]);
  });
});
