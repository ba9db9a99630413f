// Harness of the SDK tier: starts the real daemon binary (SH_BIN, default
// <repo>/build/sandbox-host) on 127.0.0.1:0 with a fresh state root, reads its
// "listening on http://ADDRESS:PORT" line from stderr, and stops it by pid (SIGTERM, then
// SIGKILL after a bound). Every wait is bounded. The tests themselves talk to the daemon only
// through OpenSandbox's SDK (npm @alibaba-group/opensandbox, pinned in package.json).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { SandboxApiException } from "@alibaba-group/opensandbox";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, "..", "..");
export const START_TIMEOUT_MS = 10_000;
export const STOP_TIMEOUT_MS = 10_000;
const LISTEN_RE = /listening on http:\/\/([0-9A-Za-z.\-[\]:]+):(\d+)/;

export const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
export const needsRoot = isRoot ? false : "the daemon needs root (CI runs as root)";

// The SDK reads these from the environment: the tests say everything explicitly.
delete process.env.OPEN_SANDBOX_API_KEY;
delete process.env.OPEN_SANDBOX_DOMAIN;

export function binary() {
  return process.env.SH_BIN || path.join(REPO, "build", "sandbox-host");
}

/** Start a daemon; resolves to {host, port, root, pid, stderr(), stop()}. */
export async function startDaemon(env = {}, args = []) {
  const bin = binary();
  if (!existsSync(bin)) throw new Error(`sandbox-host binary not found at ${bin} (set SH_BIN)`);
  const root = mkdtempSync(path.join(tmpdir(), "sh-sdk-root-"));
  const childEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith("SANDBOX_HOST_")) childEnv[k] = v;
  }
  // Pulls are off unless a test turns them on (SANDBOX_HOST_IMAGE_PULL=on, with a registry of
  // its own, tests/images): nothing a test does may reach a registry it did not start.
  Object.assign(childEnv, { SANDBOX_HOST_LISTEN: "127.0.0.1:0", SANDBOX_HOST_ROOT: root,
                            SANDBOX_HOST_IMAGE_PULL: "off" }, env);
  const proc = spawn(bin, args, { env: childEnv, stdio: ["ignore", "pipe", "pipe"] });
  const lines = [];
  let buf = "";
  let exited = null;
  const exitPromise = new Promise((resolve) => {
    proc.on("exit", (code, signal) => {
      exited = { code, signal };
      resolve(exited);
    });
  });
  proc.stdout.on("data", () => {});
  const listening = new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`no 'listening on' line within ${START_TIMEOUT_MS} ms:\n${lines.join("\n")}`));
    }, START_TIMEOUT_MS);
    proc.stderr.on("data", (chunk) => {
      buf += chunk.toString("utf8");
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        lines.push(line);
        const m = LISTEN_RE.exec(line);
        if (m) {
          clearTimeout(timer);
          resolve({ host: m[1], port: Number(m[2]) });
        }
      }
    });
    exitPromise.then((x) => {
      clearTimeout(timer);
      reject(new Error(`sandbox-host exited (${JSON.stringify(x)}) before listening:\n${lines.join("\n")}`));
    });
  });
  let addr;
  try {
    addr = await listening;
  } catch (e) {
    if (exited === null) proc.kill("SIGKILL");
    rmSync(root, { recursive: true, force: true });
    throw e;
  }
  const d = {
    host: addr.host,
    port: addr.port,
    root,
    pid: proc.pid,
    stderr: () => lines.join("\n"),
    /** SIGTERM by pid; resolves to the exit code (SIGKILL after STOP_TIMEOUT_MS). */
    async stop() {
      if (exited === null) {
        process.kill(proc.pid, "SIGTERM");
        const t = setTimeout(() => {
          if (exited === null) process.kill(proc.pid, "SIGKILL");
        }, STOP_TIMEOUT_MS);
        await exitPromise;
        clearTimeout(t);
      }
      rmSync(root, { recursive: true, force: true });
      return exited.code;
    },
  };
  return d;
}

/** The SDK's connection options for a daemon: the pod's host:port as `domain`, plain http. */
export function conn(d, extra = {}) {
  return { domain: `127.0.0.1:${d.port}`, protocol: "http", ...extra };
}

/** Remembers every Sandbox / SandboxManager a test file makes, to kill and close them. */
export class Registry {
  constructor() {
    this.sandboxes = [];
    this.managers = [];
  }
  sbx(s) {
    this.sandboxes.push(s);
    return s;
  }
  mgr(m) {
    this.managers.push(m);
    return m;
  }
  async cleanup() {
    for (const s of this.sandboxes) {
      try {
        await s.kill();
      } catch {
        // already gone
      }
      try {
        await s.close();
      } catch {
        // ignore
      }
    }
    for (const m of this.managers) {
      try {
        await m.close();
      } catch {
        // ignore
      }
    }
    this.sandboxes = [];
    this.managers = [];
  }
}

/** Assert that `p` rejects with a SandboxApiException of this status and server code, carrying
 * a request id (the daemon's X-Request-ID). Returns the exception. */
export async function rejectsWithApi(p, status, code) {
  let caught;
  await assert.rejects(p, (e) => {
    caught = e;
    return true;
  });
  assert.ok(caught instanceof SandboxApiException,
    `expected SandboxApiException, got ${caught?.name}: ${caught?.message}`);
  assert.equal(caught.statusCode, status,
    `expected ${status} ${code}, got ${caught.statusCode}: ${JSON.stringify(caught.rawBody)}`);
  assert.equal(caught.error.code, code, `code: ${JSON.stringify(caught.rawBody)}`);
  assert.equal(typeof caught.requestId, "string");
  assert.ok(caught.requestId.length > 0, "the exception carries the request id");
  assert.ok(caught.error.message && caught.error.message.length > 0, "a message");
  return caught;
}

/** Poll fn() until it returns a truthy value or timeoutMs passes; returns the last value. */
export async function waitFor(fn, timeoutMs = 15_000, intervalMs = 50) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export function uniq(prefix = "t") {
  return prefix + Math.random().toString(16).slice(2, 12);
}

export function hostArch() {
  return process.arch === "arm64" ? "arm64" : "amd64";
}

/** A real registry with test images (tests/images/serve.py: Debian's docker-registry on
 * 127.0.0.1, images built offline and pushed). opts: {mode: "plain"|"htpasswd"|"token",
 * tls: bool, images: ["busybox", "python", ...], timeoutMs}. Resolves to serve.py's line
 * ({host, url, user, password, ca_file, auth_file, refs, skipped}) plus stop(), which closes
 * its stdin (it then stops the registry by pid and removes its dirs) and resolves to its exit
 * code (SIGKILL by pid after STOP_TIMEOUT_MS). The first use of "python" builds the image with
 * mmdebstrap (minutes; cached in build/image-cache/): give timeoutMs; a python image that
 * cannot be built is in `skipped` with the reason. */
export async function startImageRegistry(opts = {}) {
  const args = [path.join(REPO, "tests", "images", "serve.py"), "--mode", opts.mode || "plain"];
  if (opts.tls) args.push("--tls");
  for (const i of opts.images || ["busybox"]) args.push("--image", i);
  const proc = spawn("/usr/bin/python3", args, { stdio: ["pipe", "pipe", "pipe"] });
  let err = "";
  proc.stderr.on("data", (c) => { err += c.toString("utf8"); });
  let exited = null;
  const exitPromise = new Promise((resolve) => {
    proc.on("exit", (code, signal) => {
      exited = { code, signal };
      resolve(exited);
    });
  });
  const timeoutMs = opts.timeoutMs || 120_000;
  const line = new Promise((resolve, reject) => {
    let buf = "";
    const timer = setTimeout(() => reject(new Error(`serve.py gave no line in ${timeoutMs} ms: ${err}`)),
      timeoutMs);
    proc.stdout.on("data", (c) => {
      buf += c.toString("utf8");
      const i = buf.indexOf("\n");
      if (i >= 0) {
        clearTimeout(timer);
        resolve(JSON.parse(buf.slice(0, i)));
      }
    });
    exitPromise.then((x) => {
      clearTimeout(timer);
      reject(new Error(`serve.py exited (${JSON.stringify(x)}): ${err}`));
    });
  });
  let info;
  try {
    info = await line;
  } catch (e) {
    if (exited === null) proc.kill("SIGKILL");
    throw e;
  }
  info.pid = proc.pid;
  info.stop = async () => {
    if (exited === null) {
      proc.stdin.end();
      const t = setTimeout(() => {
        if (exited === null) process.kill(proc.pid, "SIGKILL");
      }, STOP_TIMEOUT_MS);
      await exitPromise;
      clearTimeout(t);
    }
    return exited.code;
  };
  return info;
}
