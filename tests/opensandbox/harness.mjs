// Harness of the SDK tier: starts the real daemon binary (SH_BIN, default
// <repo>/build/sandbox-host) on 127.0.0.1:0 with a fresh state root, reads its
// "listening on http://ADDRESS:PORT" line from stderr, and stops it by pid (SIGTERM, then
// SIGKILL after a bound). Every wait is bounded. The tests themselves talk to the daemon only
// through OpenSandbox's SDK (npm @alibaba-group/opensandbox, pinned in package.json).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, existsSync, writeFileSync, openSync, closeSync, readFileSync }
  from "node:fs";
import net from "node:net";
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

// Cluster mode (issue 23): SH_SDK_CLUSTER=1 makes startDaemon start three daemons that know
// each other (SANDBOX_HOST_PEERS=static:<all three>: a pod recognises itself) with one shared
// snapshot root, behind a real HAProxy balancing every request round robin, and hand back
// HAProxy's address: the whole tier then runs through a Service of three. SH_SDK_SERVER_PROXY=1
// also turns the SDK's useServerProxy on in conn(). A test that needs one pod (it reads one
// daemon's log, restarts it, ...) opts out with { skip: onePodOnly }.
export const clusterMode = process.env.SH_SDK_CLUSTER === "1";
export const serverProxy = process.env.SH_SDK_SERVER_PROXY === "1";
export const onePodOnly = clusterMode
  ? "needs one daemon (SH_SDK_CLUSTER=1 runs the tier through a Service of three)" : false;
export const CLUSTER_PODS = 3;
const CLUSTER_INTERVAL_MS = 300;
const CLUSTER_PEER_TIMEOUT_MS = 2000;

/** Start a daemon; resolves to {host, port, root, pid, stderr(), stop()}. In cluster mode
 * (SH_SDK_CLUSTER=1) the same shape names HAProxy in front of three daemons (startCluster). */
export async function startDaemon(env = {}, args = []) {
  if (clusterMode) return startCluster(env, args);
  return startOne(env, args);
}

/** One daemon, with `env` over the harness's defaults (SANDBOX_HOST_LISTEN may name a port). */
export async function startOne(env = {}, args = []) {
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
                            SANDBOX_HOST_IMAGE_PULL: "off",
                            SANDBOX_HOST_EGRESS: "off" }, env);
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

/** The SDK's connection options for a daemon: the pod's host:port as `domain`, plain http
 * (and the SDK's server proxy on when SH_SDK_SERVER_PROXY=1). */
export function conn(d, extra = {}) {
  return { domain: `127.0.0.1:${d.port}`, protocol: "http",
           ...(serverProxy ? { useServerProxy: true } : {}), ...extra };
}

/** The host:port an endpoint look-up of sandbox `id` names (OPENSANDBOX.md section 2: the
 * pod_url of the pod that holds it; use_server_proxy changes nothing): the daemon itself, or
 * in cluster mode the owner's own address (the pod whose token begins the id), never the
 * Service's. */
export function endpointHost(d, id) {
  if (!d.pods) return `127.0.0.1:${d.port}`;
  const owner = d.pods.find((p) => id.startsWith(p.token));
  assert.ok(owner, `no pod's token begins ${id} (${d.pods.map((p) => p.token)})`);
  return `127.0.0.1:${owner.port}`;
}

// ---- cluster mode ---------------------------------------------------------------------------

/** A port the kernel just handed out on 127.0.0.1 (bound to port 0, then released). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function getJson(url, timeoutMs = 5000) {
  const r = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  const body = await r.text();
  return { status: r.status, headers: r.headers, json: body ? JSON.parse(body) : null };
}

/** A command to HAProxy's admin socket; resolves to its answer. */
function haproxyAdmin(sock, command) {
  return new Promise((resolve, reject) => {
    const c = net.createConnection({ path: sock });
    let out = "";
    const t = setTimeout(() => { c.destroy(); reject(new Error("haproxy admin timed out")); }, 5000);
    c.on("connect", () => c.write(command + "\n"));
    c.on("data", (d) => { out += d.toString("utf8"); });
    c.on("end", () => { clearTimeout(t); resolve(out); });
    c.on("error", (e) => { clearTimeout(t); reject(e); });
  });
}

/** {server: status} of the backend "pods" from HAProxy's `show stat`. */
export async function haproxyStates(sock) {
  const lines = (await haproxyAdmin(sock, "show stat")).split("\n");
  if (!lines[0]?.startsWith("# ")) return {};
  const head = lines[0].slice(2).split(",");
  const px = head.indexOf("pxname"), sv = head.indexOf("svname"), st = head.indexOf("status");
  const out = {};
  for (const ln of lines.slice(1)) {
    const f = ln.split(",");
    if (f[px] === "pods" && f[sv] !== "BACKEND" && f[sv] !== undefined) out[f[sv]] = f[st];
  }
  return out;
}

export function haproxyBin() {
  for (const p of ["/usr/sbin/haproxy", "/usr/local/sbin/haproxy", "/usr/bin/haproxy"]) {
    if (existsSync(p)) return p;
  }
  return null;
}

// Every request balanced on its own (tests/k8s/k8s_helpers.py HAPROXY_HTTP_CFG, the same
// Service): http mode, the server side closed after each answer, no server connection reused.
function haproxyConfig(sock, port, pods) {
  return [
    "global", "    maxconn 512", `    stats socket ${sock} mode 600 level admin`, "",
    "defaults", "    mode http", "    option http-server-close", "    http-reuse never",
    "    timeout connect 2s", "    timeout client 300s", "    timeout server 300s",
    "    timeout http-request 60s", "    timeout check 1s", "    retries 0", "",
    "frontend service", `    bind 127.0.0.1:${port}`, "    default_backend pods", "",
    "backend pods", "    balance roundrobin", "    http-response set-header X-Sh-Served-By %s",
    "    option httpchk GET /readyz", "    http-check expect status 200",
    "    default-server inter 200ms fastinter 200ms downinter 200ms fall 2 rise 1",
    ...pods.map((p, i) => `    server pod${i} 127.0.0.1:${p.port} check`), "",
  ].join("\n");
}

/** HAProxy in front of `pods` ({port}); resolves to {port, dir, sock, pid, stop()}. */
export async function startHAProxy(pods) {
  const bin = haproxyBin();
  if (!bin) throw new Error("haproxy not installed (Debian package haproxy; scripts/setup.sh)");
  const dir = mkdtempSync(path.join(tmpdir(), "sh-sdk-haproxy-"));
  const sock = path.join(dir, "admin.sock");
  const cfg = path.join(dir, "haproxy.cfg");
  const logPath = path.join(dir, "haproxy.log");
  const port = await freePort();
  writeFileSync(cfg, haproxyConfig(sock, port, pods));
  const fd = openSync(logPath, "w");
  // -db: stay in the foreground, so the pid we hold is HAProxy's own
  const proc = spawn(bin, ["-db", "-f", cfg], { stdio: ["ignore", fd, fd] });
  closeSync(fd);
  let exited = null;
  const exitPromise = new Promise((resolve) => {
    proc.on("exit", (code, signal) => { exited = { code, signal }; resolve(exited); });
  });
  const output = () => { try { return readFileSync(logPath, "utf8"); } catch { return ""; } };
  const h = {
    port, dir, sock, pid: proc.pid, output,
    async stop() {
      if (exited === null) {
        process.kill(proc.pid, "SIGTERM");
        const t = setTimeout(() => { if (exited === null) process.kill(proc.pid, "SIGKILL"); },
          STOP_TIMEOUT_MS);
        await exitPromise;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
      return exited.code;
    },
  };
  const up = await waitFor(async () => {
    if (exited !== null) return false;
    try {
      const st = await haproxyStates(sock);
      return Object.keys(st).length === pods.length && Object.values(st).every((s) => s === "UP");
    } catch {
      return false;
    }
  }, START_TIMEOUT_MS);
  if (!up) {
    const out = output();
    await h.stop();
    throw new Error(`haproxy did not bring every pod UP in ${START_TIMEOUT_MS} ms:\n${out}`);
  }
  return h;
}

/** Three daemons with static peers (each other), one shared snapshot root, `env` for each, behind
 * HAProxy (every request round robin). Waits (bounded) until every pod sees its two peers in its
 * /healthz `cluster` object. Resolves to {host, port (HAProxy's), root, pid (HAProxy's), pods:
 * [{port, url, token, pid, root, stderr(), stop()}], haproxy, stderr(), stop()}; stop() stops
 * HAProxy and every pod by pid and resolves to 0 when every pod exited 0. */
export async function startCluster(env = {}, args = [], { waitPeers = true } = {}) {
  const snapRoot = mkdtempSync(path.join(tmpdir(), "sh-sdk-snapshots-"));
  // distinct uid ranges per pod, and per test process (node --test may run files at once)
  const uidBase = 500_000 + (process.pid % 100) * 3000;
  let pods = [];
  let lb = null;
  const stopAll = async () => {
    let rc = 0;
    if (lb) await lb.stop();
    for (const p of pods) {
      const c = await p.stop();
      if (c !== 0) rc = c;
    }
    rmSync(snapRoot, { recursive: true, force: true });
    return rc;
  };
  try {
    let last;
    for (let attempt = 0; attempt < 3 && pods.length < CLUSTER_PODS; attempt++) {
      // every pod must know every url before the first starts: ports first, and a lost race
      // for one starts the whole set again
      const ports = [];
      for (let i = 0; i < CLUSTER_PODS; i++) ports.push(await freePort());
      const urls = ports.map((p) => `http://127.0.0.1:${p}`);
      try {
        for (let i = 0; i < CLUSTER_PODS; i++) {
          pods.push(await startOne({
            SANDBOX_HOST_LISTEN: `127.0.0.1:${ports[i]}`,
            SANDBOX_HOST_POD_URL: urls[i],
            SANDBOX_HOST_UID_BASE: String(uidBase + i * 1000),
            SANDBOX_HOST_PEERS: "static:" + urls.join(","),
            SANDBOX_HOST_PEERS_INTERVAL_MS: String(CLUSTER_INTERVAL_MS),
            SANDBOX_HOST_PEER_TIMEOUT_MS: String(CLUSTER_PEER_TIMEOUT_MS),
            SANDBOX_HOST_SNAPSHOT_ROOT: snapRoot,
            ...env,
          }, args));
        }
      } catch (e) {
        last = e;
        for (const p of pods) await p.stop();
        pods = [];
      }
    }
    if (pods.length < CLUSTER_PODS) throw last;
    for (const p of pods) p.url = `http://127.0.0.1:${p.port}`;
    lb = await startHAProxy(pods);
    const healths = async () => Promise.all(pods.map(async (p) => {
      try {
        return (await getJson(`${p.url}/healthz`)).json?.cluster ?? null;
      } catch {
        return null;
      }
    }));
    if (waitPeers) {
      const seen = await waitFor(async () => {
        const h = await healths();
        return h.every((c) => c && c.peers === CLUSTER_PODS - 1) ? h : null;
      }, 3 * CLUSTER_INTERVAL_MS + CLUSTER_PEER_TIMEOUT_MS + 5000, 100);
      if (!seen) {
        throw new Error("every pod should see its two peers in /healthz cluster.peers, saw " +
          JSON.stringify(await healths()) + " (a daemon without issue 23's cluster has none)");
      }
      seen.forEach((c, i) => { pods[i].token = c.token; });
    }
  } catch (e) {
    await stopAll();
    throw e;
  }
  return {
    host: "127.0.0.1",
    port: lb.port,
    root: snapRoot,
    pid: lb.pid,
    pods,
    haproxy: lb,
    stderr: () => pods.map((p, i) => `--- pod${i} ---\n${p.stderr()}`).join("\n"),
    stop: stopAll,
  };
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
