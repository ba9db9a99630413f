// Sanity checks of the SDK tier's harness (pass without any /v1 code): the SDK imports, the
// daemon starts on 127.0.0.1:0 with a fresh root, answers its native /healthz, and stops by pid
// with exit 0, its state root removed.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { describe, it } from "node:test";

import * as sdk from "@alibaba-group/opensandbox";

import {
  haproxyBin, haproxyStates, needsRoot, startCluster, startDaemon, startImageRegistry,
} from "./harness.mjs";

const noHaproxy = haproxyBin() ? false : "haproxy not installed (Debian package haproxy)";

describe("SDK tier harness", () => {
  it("the pinned SDK imports with the API the tests use", () => {
    for (const name of ["Sandbox", "SandboxManager", "ConnectionConfig", "SandboxApiException",
      "SandboxException"]) {
      assert.equal(typeof sdk[name], "function", name);
    }
    assert.equal(new sdk.ConnectionConfig({ domain: "127.0.0.1:1", protocol: "http" }).getBaseUrl(),
      "http://127.0.0.1:1/v1");
  });

  it("starts the daemon on port 0, speaks native HTTP, stops by pid with exit 0",
    { skip: needsRoot }, async () => {
      const d = await startDaemon();
      assert.equal(d.host, "127.0.0.1");
      assert.ok(d.port > 0);
      const r = await fetch(`http://127.0.0.1:${d.port}/healthz`,
        { signal: AbortSignal.timeout(5000) });
      assert.equal(r.status, 200);
      await r.arrayBuffer();
      assert.ok(existsSync(d.root));
      assert.equal(await d.stop(), 0);
      assert.ok(!existsSync(d.root));
    });

  it("starts a Service of three daemons behind HAProxy that balances every request round robin",
    { skip: needsRoot || noHaproxy }, async () => {
      // waitPeers off: the harness itself, whether or not the daemon has issue 23's cluster
      const c = await startCluster({}, [], { waitPeers: false });
      try {
        assert.equal(c.pods.length, 3);
        assert.deepEqual(Object.values(await haproxyStates(c.haproxy.sock)), ["UP", "UP", "UP"]);
        // one keep-alive client (fetch's pool holds the connection): nine requests, strictly
        // rotating over the three pods
        const order = [];
        for (let i = 0; i < 9; i++) {
          const r = await fetch(`http://127.0.0.1:${c.port}/healthz`,
            { signal: AbortSignal.timeout(5000) });
          assert.equal(r.status, 200);
          await r.arrayBuffer();
          order.push(r.headers.get("x-sh-served-by"));
        }
        assert.deepEqual([...order.slice(0, 3)].sort(), ["pod0", "pod1", "pod2"]);
        assert.deepEqual(order, [...order.slice(0, 3), ...order.slice(0, 3), ...order.slice(0, 3)]);
        assert.ok(existsSync(c.root));
      } finally {
        assert.equal(await c.stop(), 0);
      }
      assert.ok(!existsSync(c.root));
      assert.ok(!existsSync(c.haproxy.dir));
      for (const p of c.pods) assert.ok(!existsSync(p.root));
    });

  it("starts a registry with test images through tests/images/serve.py, stops it by pid",
    async () => {
      const reg = await startImageRegistry({ mode: "htpasswd", images: ["busybox"] });
      assert.match(reg.host, /^127\.0\.0\.1:\d+$/);
      assert.equal(reg.refs.busybox, `${reg.host}/test/busybox:1`);
      const auth = "Basic " + Buffer.from(`${reg.user}:${reg.password}`).toString("base64");
      const accept = "application/vnd.oci.image.manifest.v1+json";
      const ok = await fetch(`${reg.url}/v2/test/busybox/manifests/1`,
        { headers: { authorization: auth, accept }, signal: AbortSignal.timeout(5000) });
      assert.equal(ok.status, 200);
      await ok.arrayBuffer();
      const anon = await fetch(`${reg.url}/v2/test/busybox/manifests/1`,
        { headers: { accept }, signal: AbortSignal.timeout(5000) });
      assert.equal(anon.status, 401);
      await anon.arrayBuffer();
      assert.equal(await reg.stop(), 0);
      assert.ok(!existsSync(reg.auth_file));
    });
});
