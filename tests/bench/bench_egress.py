#!/usr/bin/python3
"""Issue 24's rows, for bench_all.py's `egress` figure: what a /v1 sandbox's network costs
against the pod's own namespace doing the same thing, in the network harness of the egress
tests (tests/contract/egresslib.World: a "pod" and an "internet" namespace joined by a veth,
dnsmasq in the internet, the daemons inside the pod):

1. TCP throughput to a sink in the internet: one connection sends tcp_mb MiB and waits for
   the sink's count (python3, 1 MiB writes), from a sandbox without networkPolicy (allow-all
   within the operator's lists: through its link, the daemon's nftables table, forwarding
   and masquerade) against the same sender run in the pod's namespace (nsenter), alternated,
   the best of egress_tcp_runs each;
2. connections per second: connect, the server's FIN, close, one after the other (python3),
   to an address a CIDR rule allows and to one a DNS answer opened (pypi.org), from a sandbox
   whose policy is deny + those two rules, against the pod's namespace to the same two,
   egress_tcp_runs rounds alternated, the best round per address; the row is the slower
   address of each side;
3. DNS: one A query at a time for pypi.org (allowed), from that sandbox to the daemon's proxy
   (which asks dnsmasq and opens the answer's address in the sandbox's set), against the same
   query from the pod's namespace to dnsmasq directly, egress_tcp_runs rounds alternated,
   150 queries a second at most (the proxy drops a sandbox's queries past 200 a second):
   p50 of every query; the note has the p50 of a denied name (NXDOMAIN from the proxy
   itself, nothing forwarded, nothing opened), the proxy's own cost;
4. create p50 of a /v1 sandbox with that networkPolicy (its link and its place in the table)
   on the daemon with egress, against the same create without networkPolicy on a second
   daemon in the same pod with SANDBOX_HOST_EGRESS=off; rounds of 10 alternating.

The timed loops run inside the sandbox (or the pod), timed by themselves: the exec that starts
them is not counted. Sizes come from cfg (egress_tcp_mb, egress_tcp_runs, egress_conn_n,
egress_dns_n, egress_create_n). Not a test: asserts nothing about time. Every process is
ended by its pid (World.close, Daemon.close), the namespaces removed by name.
"""
import json
import os
import shutil
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "contract"))

from bench_isolation import Client, pct  # noqa: E402

ROW_TCP = "TCP throughput, sandbox to the test internet (MB/s)"
ROW_CONN = "connections per second through the policy (conn/s)"
ROW_DNS = "DNS query through the proxy, p50 (ms)"
ROW_CREATE = "create p50 of a /v1 sandbox with network (ms)"
# (row, goal): goals as bench_all's; "<=x+" is ours <= bound[0] x peer + bound[1] (ms),
# "<=+" is ours - peer <= bound (ms)
ROWS = [
    (ROW_TCP, (">=", 0.9, None)),
    (ROW_CONN, (">=", 0.8, None)),
    (ROW_DNS, ("<=x+", (1.2, 0.1), None)),
    (ROW_CREATE, ("<=+", 1.0, None)),
]
SINK_PORT = 7001  # read to EOF, answer the count
CLOSE_PORT = 7002  # accept and close at once
UID_BASES = (395000, 396000)
# the DNS loop's pace: under the proxy's rate bound of a sandbox (SH_DNS_SANDBOX_RATE, 200/s):
# a query over it is dropped and costs the loop its 3 s timeout
DNS_GAP = 1 / 150  # the egress daemon's and the one without egress

SERVERS = textwrap.dedent(r'''
    import socket, struct, sys, threading
    def listener(port):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port)); s.listen(4096)
        return s
    def sink_one(c):
        buf = bytearray(1 << 20); n = 0
        try:
            while True:
                k = c.recv_into(buf)
                if not k:
                    break
                n += k
            c.sendall(struct.pack(">Q", n))
        except OSError:
            pass
        c.close()
    def sink(s):
        while True:
            c, _ = s.accept()
            threading.Thread(target=sink_one, args=(c,), daemon=True).start()
    def closer(s):
        while True:
            c, _ = s.accept()
            c.close()
    a, b = listener(int(sys.argv[1])), listener(int(sys.argv[2]))
    threading.Thread(target=sink, args=(a,), daemon=True).start()
    print("ready", flush=True)
    closer(b)
''')

# Runs in a sandbox or in the pod's namespace: one mode, one JSON line.
LOOPS = textwrap.dedent(r'''
    import json, random, socket, struct, sys, time
    mode, a = sys.argv[1], sys.argv[2:]
    if mode == "send":
        host, port, nbytes = a[0], int(a[1]), int(a[2])
        chunk = memoryview(bytearray(1 << 20))
        t0 = time.perf_counter()
        s = socket.create_connection((host, port), timeout=10)
        left = nbytes
        while left > 0:
            left -= s.send(chunk[:min(left, len(chunk))])
        s.shutdown(socket.SHUT_WR)
        got = b""
        while len(got) < 8:
            d = s.recv(8 - len(got))
            if not d:
                break
            got += d
        dt = time.perf_counter() - t0
        s.close()
        print(json.dumps({"bytes": struct.unpack(">Q", got)[0] if len(got) == 8 else -1,
                          "s": dt}))
    elif mode == "conn":
        hosts, port, n = a[0].split(","), int(a[1]), int(a[2])
        res = {}
        for host in hosts:  # untimed warm-up: the first connections of a process are slower
            for _ in range(min(n, 50)):
                try:
                    socket.create_connection((host, port), timeout=3).close()
                except OSError:
                    pass
        for host in hosts:
            errs = 0
            t0 = time.perf_counter()
            for _ in range(n):
                try:
                    s = socket.create_connection((host, port), timeout=3)
                    s.recv(1)
                    s.close()
                except OSError:
                    errs += 1
            res[host] = {"s": time.perf_counter() - t0, "errors": errs}
        print(json.dumps(res))
    elif mode == "dns":
        name, server, n, gap = a[0], a[1], int(a[2]), float(a[3]) if len(a) > 3 else 0.0
        want_rcode = int(a[4]) if len(a) > 4 else 0  # 3: NXDOMAIN (a denied name)
        q = b""
        for label in name.split("."):
            q += bytes([len(label)]) + label.encode()
        q += b"\x00" + struct.pack(">HH", 1, 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(3)
        s.connect((server, 53))
        lat, errs, timeouts = [], 0, 0
        nxt = time.perf_counter()
        for _ in range(n):
            qid = random.randrange(65536)
            while time.perf_counter() < nxt:  # paced: one query every `gap` s at most
                time.sleep(max(0.0, nxt - time.perf_counter()))
            t0 = time.perf_counter()
            nxt = t0 + gap
            try:
                s.send(struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q)
                while True:
                    d = s.recv(4096)
                    if struct.unpack(">H", d[:2])[0] == qid:
                        break
                lat.append(time.perf_counter() - t0)
                rcode = struct.unpack(">H", d[2:4])[0] & 0xF
                if rcode != want_rcode or (not rcode and struct.unpack(">H", d[6:8])[0] == 0):
                    errs += 1
            except socket.timeout:
                timeouts += 1
            except OSError:
                errs += 1
        print(json.dumps({"lat": lat, "errors": errs, "timeouts": timeouts}))
''')


def why_not():
    """Why this machine cannot run the figure (the egress tests' requirements), or None."""
    import egresslib
    why = egresslib.requirements()
    if why:
        return why
    probe = "shp-bench-probe-%d" % os.getpid()
    r = egresslib.run([egresslib.IP, "netns", "add", probe], check=False)
    if r.returncode != 0:
        return "network namespaces are unavailable here: %s" % r.stderr.strip()
    egresslib.run([egresslib.IP, "netns", "delete", probe], check=False)
    return None


def _daemon(world, root, env):
    """A daemon inside the pod (nsenter execs it in place: the pid is the daemon's)."""
    import shlib
    os.makedirs(root)
    return shlib.Daemon(env=env, root=root, prefix=world.in_ns(world.pod, []))


def _loops_cmd(mode, *args):
    return "python3 - %s %s <<'SHLOOPS'\n%s\nSHLOOPS" % (
        mode, " ".join(str(x) for x in args), LOOPS)


def in_sandbox(osc, sid, mode, *args):
    import sselib
    st = sselib.run(osc, sid, _loops_cmd(mode, *args), wait=600)
    lines = [x for x in st.texts("stdout") if x.startswith("{")]
    if not lines:
        raise RuntimeError(f"{mode} in the sandbox printed nothing: {st.types} "
                           f"{st.texts('stderr')[-3:]}")
    return json.loads(lines[-1])


def in_pod(world, mode, *args):
    import egresslib
    r = egresslib.run(world.in_ns(world.pod, ["python3", "-c", LOOPS, mode] +
                                  [str(x) for x in args]), timeout=600)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _create_times(c, body, n):
    lat, sids = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        st, b = c.call("POST", "/v1/sandboxes", body)
        lat.append(time.perf_counter() - t0)
        if st != 202:
            raise RuntimeError(f"/v1 create answered {st}: {b[:300]!r}")
        sids.append(json.loads(b)["id"])
        st, b = c.call("DELETE", "/v1/sandboxes/" + sids[-1])
        if st not in (200, 204):
            raise RuntimeError(f"/v1 delete answered {st}: {b[:300]!r}")
    return lat


def fig_egress(t, a, cfg):
    """The four rows into table t (bench_all.Table). a: bench_all's args (bin, base)."""
    why = why_not()
    if why:
        raise RuntimeError("skipped: " + why)
    import egresslib
    import oslib

    os.environ["SH_BIN"] = a.bin  # shlib.Daemon's binary
    world = egresslib.World()
    daemons = []
    try:
        world._spawn(world.inet, ["python3", "-u", "-c", SERVERS, str(SINK_PORT),
                                  str(CLOSE_PORT)], ready=True)
        world.enter()  # the clients below are the pod's
        env = egresslib.daemon_env({"SANDBOX_HOST_EGRESS_CONN_MAX": None,  # the default
                                    "SANDBOX_HOST_LOG_LEVEL": "warn",
                                    "SANDBOX_HOST_UID_BASE": str(UID_BASES[0])})
        d = _daemon(world, os.path.join(a.base, "egress-on"), env)
        daemons.append(d)
        eg = Client("127.0.0.1", d.port).call("GET", "/healthz")
        eg = json.loads(eg[1]).get("egress") or {}
        if eg.get("supported") is not True:
            raise RuntimeError(f"the daemon in the pod runs without egress: {eg}; stderr "
                               f"{d.stderr_text()[-1000:]}")
        gw = eg["gateway"]
        off = _daemon(world, os.path.join(a.base, "egress-off"),
                      {"SANDBOX_HOST_EGRESS": "off", "SANDBOX_HOST_LOG_LEVEL": "warn",
                       "SANDBOX_HOST_UID_BASE": str(UID_BASES[1])})
        daemons.append(off)
        osc = oslib.os_client(d)
        pol = egresslib.policy("deny", ("allow", egresslib.UNNAMED + "/32"),
                               ("allow", "pypi.org"))
        open_sid = egresslib.create(osc)  # allow-all within the operator's lists
        pol_sid = egresslib.create(osc, pol)

        # 1. TCP throughput
        nbytes = cfg["egress_tcp_mb"] << 20
        ours, peer = [], []
        for _ in range(cfg["egress_tcp_runs"]):
            for into, fn, first in ((ours, in_sandbox, (osc, open_sid)), (peer, in_pod, (world,))):
                r = fn(*first, "send", egresslib.PYPI, SINK_PORT, nbytes)
                if r["bytes"] != nbytes:
                    raise RuntimeError(f"the sink counted {r['bytes']} bytes of {nbytes}")
                into.append(nbytes / r["s"] / 1e6)
        t.add(ROW_TCP, max(ours), max(peer), "the pod's namespace, same sender and sink",
              "rate", note=f"{cfg['egress_tcp_mb']} MiB, one connection, python3 1 MiB "
              f"writes, best of {cfg['egress_tcp_runs']}; sandbox without networkPolicy")

        # 2. connections per second (the DNS-allowed address opened by a lookup first)
        r = in_sandbox(osc, pol_sid, "dns", "pypi.org", gw, 1)
        if r["errors"]:
            raise RuntimeError(f"pypi.org did not resolve through the proxy: {r}")
        targets = f"{egresslib.UNNAMED},{egresslib.PYPI}"
        n = cfg["egress_conn_n"]
        in_sandbox(osc, pol_sid, "conn", targets, CLOSE_PORT, 3)  # warm-up
        rate = {h: 0.0 for h in targets.split(",")}
        prate = dict(rate)
        for _ in range(cfg["egress_tcp_runs"]):  # alternated, the best of each per address
            rs = in_sandbox(osc, pol_sid, "conn", targets, CLOSE_PORT, n)
            rp = in_pod(world, "conn", targets, CLOSE_PORT, n)
            for side, res, into in (("sandbox", rs, rate), ("pod", rp, prate)):
                bad = {h: v["errors"] for h, v in res.items() if v["errors"]}
                if bad:
                    raise RuntimeError(f"failed connections from the {side}: {bad}")
                for h, v in res.items():
                    into[h] = max(into[h], n / v["s"])
        t.add(ROW_CONN, min(rate.values()), min(prate.values()),
              "the pod's namespace, same two addresses", "rate",
              note=f"{n} sequential connect+close per address, best of "
              f"{cfg['egress_tcp_runs']} alternated; by CIDR rule "
              f"{rate[egresslib.UNNAMED]:.0f}/s (pod {prate[egresslib.UNNAMED]:.0f}), by DNS "
              f"{rate[egresslib.PYPI]:.0f}/s (pod {prate[egresslib.PYPI]:.0f}); policy deny + "
              "those two rules")

        # 3. DNS through the proxy against dnsmasq directly
        n = cfg["egress_dns_n"]
        in_sandbox(osc, pol_sid, "dns", "pypi.org", gw, 3)
        rs, rp = {"lat": [], "errors": 0, "timeouts": 0}, {"lat": [], "errors": 0, "timeouts": 0}
        for _ in range(cfg["egress_tcp_runs"]):  # alternated, the latencies pooled
            for into, r in ((rs, in_sandbox(osc, pol_sid, "dns", "pypi.org", gw, n, DNS_GAP)),
                            (rp, in_pod(world, "dns", "pypi.org", egresslib.INET_ADDR, n,
                                        DNS_GAP))):
                for k in into:
                    into[k] += r[k]
        # the proxy's own cost: a name the policy denies, answered NXDOMAIN by the loop
        nx = in_sandbox(osc, pol_sid, "dns", "www.github.com", gw, n, DNS_GAP, 3)
        for side, r in (("the proxy", rs), ("dnsmasq", rp), ("the proxy (denied)", nx)):
            if r["errors"] or r["timeouts"] * 20 > len(r["lat"]):
                raise RuntimeError(f"DNS through {side}: {r['errors']} errors, {r['timeouts']} "
                                   f"timeouts, {len(r['lat'])} answers")
        t.add(ROW_DNS, pct(rs["lat"], .5) * 1e3, pct(rp["lat"], .5) * 1e3,
              "dnsmasq directly from the pod's namespace", "lat",
              note=f"{n} × {cfg['egress_tcp_runs']} A queries for pypi.org one at a time, "
              f"{1 / DNS_GAP:.0f}/s at most; {rs['timeouts']} unanswered (3 s); a denied name "
              f"(NXDOMAIN from the proxy, nothing forwarded) p50 {pct(nx['lat'], .5) * 1e3:.3f}; "
              f"p99 {pct(rs['lat'], .99) * 1e3:.3f} (direct {pct(rp['lat'], .99) * 1e3:.3f})")
        osc.kill(open_sid)
        osc.kill(pol_sid)

        # 4. create with network against create on a daemon without egress
        body = dict(oslib.SDK_DEFAULT_CREATE, networkPolicy=pol)
        plain = dict(oslib.SDK_DEFAULT_CREATE)
        c_on, c_off = Client("127.0.0.1", d.port), Client("127.0.0.1", off.port)
        _create_times(c_on, body, 2)  # warm-up
        _create_times(c_off, plain, 2)
        with_net, without = [], []
        left = cfg["egress_create_n"]
        while left > 0:
            k = min(10, left)
            with_net += _create_times(c_on, body, k)
            without += _create_times(c_off, plain, k)
            left -= k
        t.add(ROW_CREATE, pct(with_net, .5) * 1e3, pct(without, .5) * 1e3,
              "the same create, no networkPolicy, on a daemon in the pod with "
              "SANDBOX_HOST_EGRESS=off", "lat",
              note=f"{len(with_net)} creates each (deleted after each, not timed); p99 "
              f"{pct(with_net, .99) * 1e3:.2f} (without {pct(without, .99) * 1e3:.2f})")
    finally:
        problems = []
        for d in reversed(daemons):
            try:
                rc = d.close(check=False)
                if rc != 0:
                    problems.append(f"a daemon exited {rc}: {d.stderr_text()[-500:]}")
            except Exception as e:  # noqa: BLE001
                problems.append(repr(e))
        world.close()
        for p in ("egress-on", "egress-off"):
            shutil.rmtree(os.path.join(a.base, p), ignore_errors=True)
        if problems:
            sys.stderr.write(f"bench: egress: {problems}\n")
