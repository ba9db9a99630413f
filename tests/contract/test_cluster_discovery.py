"""Issue 23: the pods of a cluster find each other (SANDBOX_HOST_PEERS, cluster.h). A resolver
on loopback (dnsmasq, started here) serves a name's A records, as a headless Service's DNS
does; each pod listens on its own loopback address (127.0.0.2, .3, ...: all loopback on Linux)
at one port, so the name's records are the pods. Through each pod's /healthz `cluster.peers`
(its live peers, itself not counted): every pod finds the others, a pod added to the records
is found, one removed from them or killed is dropped within a period. A static list works the
same; a malformed setting stops the start (exit 2)."""
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

import shlib
from shlib import run_to_exit, wait_until

DNSMASQ = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"
NAME = "pods.sandbox-host.test"
INTERVAL_MS = 200
# A bound for the discovery to settle, not a measurement: a few periods (a probe's timeout
# included) on a loaded 2-core machine.
SETTLE = 20.0
PEER_ENV = {"SANDBOX_HOST_PEERS_INTERVAL_MS": str(INTERVAL_MS),
            "SANDBOX_HOST_PEER_TIMEOUT_MS": "1000"}


def free_port(host="127.0.0.1", kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    try:
        s.bind((host, 0))
        return s.getsockname()[1]
    finally:
        s.close()


class Resolver:
    """dnsmasq on 127.0.0.1 at a free port, serving only NAME's A records from a hosts file
    (no upstream, no /etc/hosts); set() rewrites the file and SIGHUPs it (which re-reads it)."""

    def __init__(self, tmp):
        self.hosts = tmp / "hosts"
        self.hosts.write_text("")
        self.port = free_port(kind=socket.SOCK_DGRAM)
        self.proc = subprocess.Popen(
            [DNSMASQ, "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
             "--no-hosts", "--addn-hosts=%s" % self.hosts, "--listen-address=127.0.0.1",
             "--bind-interfaces", "--port=%d" % self.port, "--user=root", "--pid-file=",
             "--local-ttl=0", "--log-facility=-"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.3)
        if self.proc.poll() is not None:
            raise RuntimeError("dnsmasq exited: %s" % self.proc.stderr.read().decode())

    def set(self, addrs):
        tmp = self.hosts.with_suffix(".new")
        tmp.write_text("".join("%s %s\n" % (a, NAME) for a in addrs))
        os.replace(tmp, self.hosts)
        self.proc.send_signal(signal.SIGHUP)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def resolver(tmp_path):
    if not os.access(DNSMASQ, os.X_OK):
        pytest.skip("dnsmasq is not installed (Debian dnsmasq-base): no resolver to serve "
                    "the peers' records")
    r = Resolver(tmp_path)
    yield r
    r.close()


def peers_of(addr, port):
    """cluster.peers of the pod at addr:port (None when it does not answer)."""
    try:
        r = shlib.Client(addr, port).get("/healthz", timeout=2)
    except OSError:
        return None
    if r.status != 200:
        return None
    return r.json()["cluster"]["peers"]


def settle(pods, want, port):
    """Wait until every pod in `pods` (addresses) counts `want` peers."""
    ok = wait_until(lambda: all(peers_of(a, port) == want for a in pods), SETTLE, 0.1)
    assert ok, {a: peers_of(a, port) for a in pods}


def start_pod(start_daemon, addr, port, peers, extra=None):
    env = dict(PEER_ENV, SANDBOX_HOST_LISTEN="%s:%d" % (addr, port), SANDBOX_HOST_PEERS=peers)
    env.update(extra or {})
    return start_daemon(env=env)


def test_dns_pods_find_each_other_a_new_one_and_drop_a_gone_one(start_daemon, resolver):
    port = free_port()
    addrs = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    resolver.set(addrs)
    # no port in the setting: a peer is reached at this pod's own listen port
    spec = "dns:" + NAME
    extra = {"SANDBOX_HOST_PEERS_RESOLVER": "127.0.0.1:%d" % resolver.port}
    pods = {a: start_pod(start_daemon, a, port, spec, extra) for a in addrs}
    settle(addrs, 2, port)
    h = shlib.Client(addrs[0], port).get("/healthz").json()["cluster"]
    assert set(h) >= {"token", "instance", "accepting", "room", "in_use", "peers"}, h
    assert h["token"] == (pods[addrs[0]].root / "pod-token").read_text().strip()
    assert "peer-added" in pods[addrs[0]].stderr_text()

    # a pod added to the records is found by the others
    pods["127.0.0.5"] = start_pod(start_daemon, "127.0.0.5", port, spec, extra)
    resolver.set(addrs + ["127.0.0.5"])
    settle(addrs + ["127.0.0.5"], 3, port)

    # one the records no longer list is dropped, though it still answers
    resolver.set(addrs)
    settle(addrs, 2, port)
    assert peers_of("127.0.0.5", port) is not None

    # one that dies is dropped though the records still list it
    pods["127.0.0.4"].kill()
    settle(addrs[:2], 1, port)
    assert "peer-removed" in pods[addrs[0]].stderr_text()


def test_static_pods_find_each_other_and_drop_a_dead_one(start_daemon):
    port = free_port()
    addrs = ["127.0.0.2", "127.0.0.3"]
    spec = "static:" + ",".join("http://%s:%d" % (a, port) for a in addrs)
    pods = [start_pod(start_daemon, a, port, spec) for a in addrs]
    settle(addrs, 1, port)
    pods[1].kill()
    settle(addrs[:1], 0, port)


def test_without_peers_the_cluster_object_counts_none(daemon):
    h = daemon.client.get("/healthz").json()["cluster"]
    assert h["peers"] == 0 and h["accepting"] is True and h["in_use"] >= 0, h
    assert h["token"] == (daemon.root / "pod-token").read_text().strip()


@pytest.mark.parametrize("env", [
    {"SANDBOX_HOST_PEERS": "bogus"},
    {"SANDBOX_HOST_PEERS": "dns:bad..name"},
    {"SANDBOX_HOST_PEERS": "static:https://a:1"},
    {"SANDBOX_HOST_PEERS": "dns:peers", "SANDBOX_HOST_PEERS_RESOLVER": "not-an-address"},
])
def test_a_malformed_peers_setting_refuses_to_start(env):
    rc, _, err = run_to_exit(env=env)
    assert rc == 2, (rc, err)
    assert "SANDBOX_HOST_PEERS" in err, err
