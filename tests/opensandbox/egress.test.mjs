// Issue 24 through OpenSandbox's JavaScript SDK (npm @alibaba-group/opensandbox 0.1.11): a
// sandbox's network under its networkPolicy, changed at run time with the SDK's egress calls
// (getEgressPolicy, patchEgressRules), as a user would. The daemon runs with egress on inside
// a "pod" network namespace linked to a test "internet" (tests/contract/egresslib.py: dnsmasq
// answers pypi.org, www.github.com, *.example.test with TEST-NET addresses on that namespace's
// lo; an HTTP server answers "hello from inet <address>" on each). This file runs inside the
// pod, started by the world's runner, which removes everything afterwards:
//
//   python3 tests/contract/egresslib.py run-in-pod -- \
//       node --test --test-timeout=120000 tests/opensandbox/egress.test.mjs
//
// Without it (SH_EGRESS_NETNS unset: the ordinary tier) the file skips, with the runner's
// reason when the runner could not make the world here. Inside the sandboxes the image's
// python3 fetches with urllib (3 s timeouts: a dropped SYN fails within them, nothing timed).
// SDK 0.1.11's getEgressPolicy hands back only the policy: the egress endpoint's `mode` and
// `enforcementMode` are read with a plain GET at the endpoint and headers the SDK names.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Sandbox } from "@alibaba-group/opensandbox";

import { conn, needsRoot, Registry, startOne } from "./harness.mjs";

const netns = process.env.SH_EGRESS_NETNS;
const W = netns ? JSON.parse(process.env.SH_EGRESS_WORLD) : null;
const skip = needsRoot || (netns ? false : (process.env.SH_EGRESS_SKIP ||
  "runs inside the network world of tests/contract/egresslib.py (SH_EGRESS_NETNS unset): " +
  "python3 tests/contract/egresslib.py run-in-pod -- " +
  "node --test tests/opensandbox/egress.test.mjs"));

// One fetch from inside a sandbox; prints one JSON line: {ok, body}, {ok: false, status, body}
// (an answer that is no 200) or {ok: false, err} (no answer).
const FETCH = String.raw`
import errno, json, socket, sys, urllib.error, urllib.request
def why(e):
    r = getattr(e, "reason", e)
    if isinstance(r, socket.gaierror):
        return "gaierror:%d" % r.errno
    if isinstance(r, TimeoutError):
        return "timeout"
    if isinstance(r, OSError) and r.errno:
        return errno.errorcode.get(r.errno, str(r.errno))
    return "%s: %s" % (type(r).__name__, r)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    with opener.open(sys.argv[1], timeout=3) as r:
        out = {"ok": r.status == 200, "body": r.read().decode("utf-8", "replace")}
except urllib.error.HTTPError as e:  # connected: an answer, only not a 200
    out = {"ok": False, "status": e.code, "body": e.read().decode("utf-8", "replace")}
except Exception as e:
    out = {"ok": False, "err": why(e)}
print(json.dumps(out), flush=True)
`;

let d;
const reg = new Registry();

async function create(networkPolicy) {
  return reg.sbx(await Sandbox.create({ connectionConfig: conn(d), image: "default",
    ...(networkPolicy ? { networkPolicy } : {}) }));
}

function rules(...pairs) {
  return pairs.map(([action, target]) => ({ action, target }));
}

/** GET http://<host>[:port]/ from inside the sandbox (sandbox.commands.run, python3). */
async function fetchIn(s, host, port = 80) {
  const url = `http://${host}${port === 80 ? "" : `:${port}`}/`;
  const ex = await s.commands.run(`python3 - '${url}' <<'SHFETCH'\n${FETCH}\nSHFETCH`,
    { timeoutSeconds: 60 });
  const out = ex.logs.stdout.map((m) => m.text).filter((t) => t.startsWith("{"));
  assert.ok(ex.exitCode === 0 && out.length === 1,
    `fetch ${url}: exit ${ex.exitCode}, stdout ${JSON.stringify(ex.logs.stdout)}, ` +
    `stderr ${JSON.stringify(ex.logs.stderr)}`);
  return JSON.parse(out[0]);
}

async function assertReaches(s, host, addr, port = 80) {
  const r = await fetchIn(s, host, port);
  assert.deepEqual(r, { ok: true, body: `hello from inet ${addr}` },
    `${host}:${port} from the sandbox`);
}

async function assertBlocked(s, host, port = 80) {
  const r = await fetchIn(s, host, port);
  assert.ok(r.ok === false && !("body" in r), `${host}:${port} must not be reachable: ` +
    JSON.stringify(r));
  return r;
}

/** The positive control: the pod itself (this process runs there) reaches host:port. */
async function podReaches(host, port, body) {
  const r = await fetch(`http://${host}:${port}/`, { signal: AbortSignal.timeout(5000) });
  assert.equal(await r.text(), body, `${host}:${port} from the pod itself`);
}

/** The egress endpoint's whole GET /policy answer (mode, enforcementMode), at the endpoint
 * and with the headers the SDK's getEndpoint names. */
async function egressAnswer(s) {
  const ep = await s.getEndpoint(18080);
  const r = await fetch(`http://${ep.endpoint}/policy`,
    { headers: ep.headers ?? {}, signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 200);
  return r.json();
}

describe("egress through the SDK, inside the test's pod", { skip, timeout: 300_000 }, () => {
  before(async () => {
    d = await startOne({
      SANDBOX_HOST_EGRESS: "on",
      SANDBOX_HOST_LISTEN: "0.0.0.0:0", // on the pod's address too: a sandbox must not reach it
      SANDBOX_HOST_DNS_UPSTREAM: W.upstream,
      SANDBOX_HOST_EGRESS_DENY: W.operatorDeny,
    });
    const h = await (await fetch(`http://127.0.0.1:${d.port}/healthz`,
      { signal: AbortSignal.timeout(5000) })).json();
    if (h.egress?.supported !== true || h.egress?.enforcement !== "dns+nft") {
      const err = d.stderr().slice(-3000);
      await d.stop();
      d = null;
      assert.fail("root, netns, nftables and dnsmasq are all here, yet /healthz says " +
        `${JSON.stringify(h.egress)}; stderr tail:\n${err}`);
    }
  });
  after(async () => {
    await reg.cleanup();
    if (!d) return;
    const rc = await d.stop();
    assert.equal(rc, 0, `daemon exit ${rc}; stderr tail:\n${d.stderr().slice(-3000)}`);
  });

  it("deny by default with pypi.org allowed: pypi.org answers, www.github.com does not resolve",
    async () => {
    const s = await create({ defaultAction: "deny", egress: rules(["allow", "pypi.org"]) });
    await assertReaches(s, "pypi.org", W.pypi);
    const r = await assertBlocked(s, "www.github.com");
    assert.match(r.err, /^gaierror/, "the proxy answers a denied name NXDOMAIN");
  });

  it("deny by default with pypi.org allowed: www.github.com's address by IP is dropped",
    async () => {
    const s = await create({ defaultAction: "deny", egress: rules(["allow", "pypi.org"]) });
    await assertBlocked(s, W.github);
  });

  it("patchEgressRules flips pypi.org and www.github.com for the next connection", async () => {
    const s = await create({ defaultAction: "deny", egress: rules(["allow", "pypi.org"]) });
    await assertReaches(s, "pypi.org", W.pypi);
    await assertBlocked(s, "www.github.com");
    await s.patchEgressRules(rules(["allow", "www.github.com"], ["deny", "pypi.org"]));
    await assertReaches(s, "www.github.com", W.github);
    const r = await assertBlocked(s, "pypi.org");
    assert.match(r.err, /^gaierror/, "pypi.org is NXDOMAIN now");
    // the address its earlier answer opened is closed with the name
    await assertBlocked(s, W.pypi);
  });

  it("getEgressPolicy shows the merged rules, the incoming ones first", async () => {
    const s = await create({ defaultAction: "deny",
      egress: rules(["allow", "pypi.org"], ["allow", "*.example.test"]) });
    assert.deepEqual(await s.getEgressPolicy(), { defaultAction: "deny",
      egress: rules(["allow", "pypi.org"], ["allow", "*.example.test"]) });
    await s.patchEgressRules(rules(["deny", "pypi.org"], ["allow", "www.github.com"]));
    assert.deepEqual(await s.getEgressPolicy(), { defaultAction: "deny",
      egress: rules(["deny", "pypi.org"], ["allow", "www.github.com"],
        ["allow", "*.example.test"]) });
  });

  it("the egress endpoint reports mode deny_all and enforcementMode dns+nft", async () => {
    const s = await create({ defaultAction: "deny", egress: rules(["allow", "pypi.org"]) });
    assert.deepEqual(await egressAnswer(s), { status: "ok", mode: "deny_all",
      enforcementMode: "dns+nft",
      policy: { defaultAction: "deny", egress: rules(["allow", "pypi.org"]) } });
  });

  it("the egress endpoint reports mode allow_all for a sandbox with no networkPolicy", async () => {
    const s = await create();
    assert.deepEqual(await s.getEgressPolicy(), { defaultAction: "allow", egress: [] });
    const a = await egressAnswer(s);
    assert.equal(a.mode, "allow_all", JSON.stringify(a));
    assert.equal(a.enforcementMode, "dns+nft", JSON.stringify(a));
  });

  it("a wildcard rule reaches the names below it, not the apex", async () => {
    const s = await create({ defaultAction: "deny", egress: rules(["allow", "*.example.test"]) });
    await assertReaches(s, "a.example.test", W.exampleSub);
    await assertBlocked(s, "example.test");
    await assertBlocked(s, W.exampleApex);
  });

  it("a CIDR rule reaches an unnamed address by IP, and nothing else", async () => {
    const s = await create({ defaultAction: "deny", egress: rules(["allow", `${W.unnamed}/32`]) });
    await assertReaches(s, W.unnamed, W.unnamed);
    await assertBlocked(s, W.github);
  });

  it("no networkPolicy reaches the test internet by name and by IP", async () => {
    const s = await create();
    await assertReaches(s, "pypi.org", W.pypi);
    await assertReaches(s, "www.github.com", W.github);
    await assertReaches(s, W.github, W.github);
    await assertReaches(s, W.unnamed, W.unnamed);
  });

  it("no networkPolicy does not reach an address on the operator's deny list", async () => {
    const s = await create();
    await podReaches(W.opDenied, W.httpPort, `hello from inet ${W.opDenied}`);
    await assertBlocked(s, W.opDenied);
  });

  it("no networkPolicy does not reach the pod's own address (its service, the daemon's API)",
    async () => {
    const s = await create();
    await podReaches(W.podAddr, W.podServicePort, `hello from pod ${W.podAddr}`);
    await assertBlocked(s, W.podAddr, W.podServicePort);
    const api = await fetch(`http://${W.podAddr}:${d.port}/healthz`,
      { signal: AbortSignal.timeout(5000) });
    assert.equal(api.status, 200, "the daemon's API answers on the pod's address");
    await assertBlocked(s, W.podAddr, d.port);
  });
});
