"""The Kubernetes deployment (issue 6, points 1-3): every manifest in contrib/k8s is valid
against the Kubernetes API schemas (npm package kubernetes-models, run with the machine's
Node.js: validate.js), and the probes, ports, env names and paths in it are what the daemon
really serves and reads (CONTRACT.md sections 7 and 10). The Dockerfile builds with the
project's own scripts/setup.sh.

Needs: node, and `npm ci --prefix tests/k8s` done (no network at test time). The checks that
start the daemon need root (it creates cgroups at start) and skip otherwise.
"""
import json
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from k8s_helpers import K8S_DIR, REPO, TESTS_DIR, binary, is_root, request, wait_until

DOC = REPO / "docs" / "deployment.md"
DOCKERFILE = K8S_DIR / "Dockerfile"
ENTRYPOINT = K8S_DIR / "entrypoint.sh"
EXPECTED_KINDS = {"Deployment", "Service", "NetworkPolicy", "PodDisruptionBudget",
                  "StorageClass", "Kustomization"}
# What the isolation layer needs, each justified in docs/deployment.md ("Privileges").
EXPECTED_CAPS = {"SYS_ADMIN", "SETUID", "SETGID", "SETPCAP", "NET_ADMIN", "KILL", "CHOWN",
                 "DAC_OVERRIDE", "FOWNER"}
DAEMON_SHUTDOWN_GRACE_S = 10  # docs/configuration.md: in-flight requests get 10 s


# ---- running the validator ----------------------------------------------------------------


def manifest_files():
    return sorted(K8S_DIR.glob("*.yaml")) + sorted(K8S_DIR.glob("*.yml"))


def run_validator(files):
    node = shutil.which("node")
    if node is None:
        pytest.fail("node not found: manifest validation needs Node.js (Debian package nodejs)",
                    pytrace=False)
    if not (TESTS_DIR / "node_modules" / "kubernetes-models").is_dir():
        pytest.fail("tests/k8s/node_modules missing: run `npm ci --prefix tests/k8s`",
                    pytrace=False)
    p = subprocess.run([node, str(TESTS_DIR / "validate.js")] + [str(f) for f in files],
                       capture_output=True, timeout=120)
    assert p.returncode in (0, 1), "validate.js failed (%d): %s" % (
        p.returncode, p.stderr.decode(errors="replace"))
    return p.returncode, json.loads(p.stdout)


@pytest.fixture(scope="module")
def validated():
    rc, out = run_validator(manifest_files())
    return rc, out


@pytest.fixture(scope="module")
def docs(validated):
    """{kind: document} of the manifests (each kind appears once)."""
    out = {}
    for d in validated[1]["documents"]:
        kind = d["kind"]
        # the pods' headless Service (service-peers.yaml) beside the clients' one
        if kind == "Service" and d["doc"]["spec"].get("clusterIP") == "None":
            kind = "Service/headless"
        assert kind not in out, "two %s documents" % kind
        out[kind] = d["doc"]
    return out


@pytest.fixture(scope="module")
def container(docs):
    cs = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert len(cs) == 1, "one container per pod"
    return cs[0]


@pytest.fixture(scope="module")
def env(container):
    return {e["name"]: e for e in container.get("env", [])}


@pytest.fixture(scope="module")
def help_names():
    b = binary()
    if not os.path.exists(b):
        pytest.fail("sandbox-host binary not found at %s (set SH_BIN)" % b, pytrace=False)
    p = subprocess.run([b, "--help"], capture_output=True, timeout=10)
    text = (p.stdout + p.stderr).decode(errors="replace")
    names = set(re.findall(r"\bSANDBOX_HOST_[A-Z0-9_]+\b", text))
    assert "SANDBOX_HOST_LISTEN" in names, text
    return names


def listen_port(env):
    v = env["SANDBOX_HOST_LISTEN"]["value"]
    m = re.fullmatch(r"(.+):(\d+)", v)
    assert m, v
    return int(m.group(2))


def named_port(container, ref):
    if isinstance(ref, int):
        return ref
    for p in container.get("ports", []):
        if p.get("name") == ref:
            return p["containerPort"]
    raise AssertionError("no container port named %r" % ref)


# ---- schema validation --------------------------------------------------------------------


def test_every_manifest_is_valid_against_the_kubernetes_api_schemas(validated):
    rc, out = validated
    assert out["errors"] == [], json.dumps(out["errors"], indent=1)
    assert rc == 0
    kinds = {d["kind"] for d in out["documents"]}
    assert kinds == EXPECTED_KINDS, kinds
    for d in out["documents"]:
        if d["kind"] != "Kustomization":
            assert d["validated"], d["file"]


@pytest.mark.parametrize("mutation,expect", [
    # unknown field (a typo): only the strict check sees these
    (("readinessProbe:", "readinesProbe:"), "unknown field \"readinesProbe\""),
    (("fieldPath: status.podIP", "fieldPath: status.podIP\n                  fieldPth: x"),
     "unknown field \"fieldPth\""),
    # wrong type, missing required field, unknown kind: the schema validators
    (("containerPort: 8080", "containerPort: \"8080\""), "must be integer"),
    (("server: nfs.example.internal", "srv: nfs.example.internal"), "required property"),
    (("kind: Deployment", "kind: Deploymnt"), "no Kubernetes API schema"),
])
def test_the_validator_catches_mistakes(tmp_path, mutation, expect):
    """A validator that silently checks nothing would pass every manifest."""
    src = (K8S_DIR / "deployment.yaml").read_text()
    assert mutation[0] in src
    bad = tmp_path / "deployment.yaml"
    bad.write_text(src.replace(mutation[0], mutation[1], 1))
    rc, out = run_validator([bad])
    assert rc == 1, out
    assert any(expect in e["message"] for e in out["errors"]), out["errors"]


def test_kustomization_lists_every_manifest_and_the_image(docs, container):
    k = docs["Kustomization"]
    others = {f.name for f in manifest_files()} - {"kustomization.yaml"}
    assert set(k["resources"]) == others
    version = cmake_version()
    (img,) = k["images"]
    assert container["image"] == "%s:%s" % (img["name"], version)
    assert img["newTag"] == version, "image tag != project version %s" % version


# ---- what the daemon reads: env names, values, paths --------------------------------------


def test_env_names_are_settings_the_daemon_knows(env, help_names):
    for name in env:
        if name.startswith("SANDBOX_HOST_"):
            assert name in help_names, "%s is not in `sandbox-host --help`" % name
        else:
            # only inputs of $(VAR) expansion, never something the daemon would ignore
            assert name in ("POD_IP", "POD_NAMESPACE"), name
            assert any("$(%s)" % name in e.get("value", "") for e in env.values()), name
    envs = [n for ins in instructions() if ins.startswith("ENV ")
            for n in re.findall(r"(\w+)=", ins)]
    assert envs, "the image sets the daemon's in-container defaults"
    for n in envs:
        assert n in help_names, "Dockerfile ENV %s unknown to the daemon" % n


def test_required_settings_are_set(env):
    for name in ("SANDBOX_HOST_LISTEN", "SANDBOX_HOST_POD_URL", "SANDBOX_HOST_ROOT",
                 "SANDBOX_HOST_NFS_ROOT"):
        assert name in env, name
    assert env["SANDBOX_HOST_LISTEN"]["value"] == "0.0.0.0:8080"


def test_pod_url_comes_from_the_downward_api(env, container):
    names = [e["name"] for e in container["env"]]
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    # $(VAR) expands only variables defined earlier in the list
    assert names.index("POD_IP") < names.index("SANDBOX_HOST_POD_URL")
    url = env["SANDBOX_HOST_POD_URL"]["value"]
    assert url == "http://$(POD_IP):%d" % listen_port(env), url
    assert not url.endswith("/")


def test_no_service_links(docs):
    """A Service named sandbox-host would inject SANDBOX_HOST_PORT=tcp://... etc."""
    assert docs["Deployment"]["spec"]["template"]["spec"]["enableServiceLinks"] is False


def test_state_root_and_archive_are_volumes(docs, container, env):
    spec = docs["Deployment"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    root = env["SANDBOX_HOST_ROOT"]["value"]
    nfs = env["SANDBOX_HOST_NFS_ROOT"]["value"]
    assert root in mounts and nfs in mounts, mounts
    assert set(volumes[mounts[root]]) & {"emptyDir", "hostPath", "ephemeral"}, \
        volumes[mounts[root]]
    assert set(volumes[mounts[nfs]]) & {"nfs", "persistentVolumeClaim"}, volumes[mounts[nfs]]
    assert not volumes[mounts[nfs]].get("readOnly"), "persist writes to the archive"
    # the image creates the same directories and defaults to the same root
    df = dockerfile_text()
    assert root in df and nfs in df
    assert "SANDBOX_HOST_ROOT=%s" % root in df


def test_the_state_volume_holds_project_quota_and_the_disk_limit_is_set(docs, container, env):
    """Issue 20, finding 14: the state root is a volume whose class formats XFS and mounts it
    pquota (each workspace's limit is its project quota), and the limit is written out, so
    that a pod whose volume cannot hold it stops at start instead of running unlimited."""
    spec = docs["Deployment"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    vol = volumes[mounts[env["SANDBOX_HOST_ROOT"]["value"]]]
    claim = vol["ephemeral"]["volumeClaimTemplate"]["spec"]
    sc = docs["StorageClass"]
    assert claim["storageClassName"] == sc["metadata"]["name"], (claim, sc)
    assert sc["parameters"]["csi.storage.k8s.io/fstype"] == "xfs", sc
    assert "pquota" in sc["mountOptions"], sc
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer", sc
    limit = env["SANDBOX_HOST_DISK_MAX"]["value"]
    assert limit not in ("0", "auto"), limit


def test_manifest_settings_are_accepted_by_the_daemon(env, tmp_path):
    """Start the daemon with the Deployment's environment (pod IP filled in, listen port,
    state root and archive moved to temporary places): it must accept every value, serve
    the probes and drain, and answer creates with pod_url built from the pod IP."""
    if not is_root():
        pytest.skip("the daemon creates cgroups at start: needs root")
    pod_ip = "10.1.2.3"
    e = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_HOST_")}
    for name, item in env.items():
        if "value" in item:
            e[name] = item["value"].replace("$(POD_IP)", pod_ip).replace(
                "$(POD_NAMESPACE)", "test-ns")
    e.pop("POD_IP", None)
    e.pop("POD_NAMESPACE", None)
    # The peers' DNS name is looked up at a UDP socket of this test's that never answers:
    # nothing goes to the machine's resolver.
    dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dns.bind(("127.0.0.1", 0))
    e["SANDBOX_HOST_PEERS_RESOLVER"] = "127.0.0.1:%d" % dns.getsockname()[1]
    expected_pod_url = e["SANDBOX_HOST_POD_URL"]
    assert expected_pod_url == "http://%s:8080" % pod_ip
    (tmp_path / "root").mkdir()
    (tmp_path / "archive").mkdir()
    e["SANDBOX_HOST_ROOT"] = str(tmp_path / "root")
    e["SANDBOX_HOST_NFS_ROOT"] = str(tmp_path / "archive")
    e["SANDBOX_HOST_LISTEN"] = "127.0.0.1:0"
    # nothing of the machine's network namespace changes (egress: tests/contract/egresslib.py)
    e["SANDBOX_HOST_EGRESS"] = "off"
    log = tmp_path / "stderr"
    with open(log, "wb") as lf:
        proc = subprocess.Popen([binary()], env=e, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=lf)
    try:
        def listening():
            assert proc.poll() is None, "daemon exited %s: %s" % (proc.returncode,
                                                                  log.read_text())
            return re.search(r"listening on http://127\.0\.0\.1:(\d+)", log.read_text())
        port = int(wait_until(listening, 10, what="listening line").group(1))
        url = "http://127.0.0.1:%d" % port
        assert request(url, "GET", "/healthz").status == 200
        assert request(url, "GET", "/readyz").status == 200
        r = request(url, "POST", "/sandboxes", body={})
        assert r.status == 200, r
        assert r.json()["pod_url"] == expected_pod_url
        r = request(url, "POST", "/drain")
        assert r.status == 200 and r.json()["sandboxes"] == 1, r
        assert request(url, "GET", "/readyz").status == 503
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            rc = proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait(15)
        dns.close()
    assert rc == 0, log.read_text()[-2000:]


# ---- what the daemon serves: ports, probes, drain -----------------------------------------


def test_container_port_is_the_listen_port(container, env):
    (p,) = container["ports"]
    assert p["containerPort"] == listen_port(env)
    assert p.get("protocol", "TCP") == "TCP"


def test_probes_hit_healthz_and_readyz_on_the_listen_port(container, env):
    port = listen_port(env)
    live, ready = container["livenessProbe"], container["readinessProbe"]
    assert live["httpGet"]["path"] == "/healthz"
    assert ready["httpGet"]["path"] == "/readyz"
    for pr in (live, ready):
        assert named_port(container, pr["httpGet"]["port"]) == port
        assert pr["httpGet"].get("scheme", "HTTP") == "HTTP"
    assert "startupProbe" not in container or \
        container["startupProbe"]["httpGet"]["path"] == "/healthz"


def test_prestop_posts_drain_and_the_grace_period_covers_it(docs, container, env):
    cmd = container["lifecycle"]["preStop"]["exec"]["command"]
    assert cmd[0] == "curl"
    assert ("-X" in cmd and cmd[cmd.index("-X") + 1] == "POST") or \
        ("--request" in cmd and cmd[cmd.index("--request") + 1] == "POST"), cmd
    urls = [a for a in cmd if a.startswith("http://")]
    assert urls == ["http://127.0.0.1:%d/drain" % listen_port(env)], cmd
    assert "--max-time" in cmd, "a hung drain must not eat the whole grace period"
    max_time = int(cmd[cmd.index("--max-time") + 1])
    grace = docs["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace >= max_time + DAEMON_SHUTDOWN_GRACE_S + 10, (grace, max_time)
    # the hook's program is in the image
    assert re.search(r"\bcurl\b", runtime_stage()), "curl not installed in the runtime image"


def test_service_and_policies_select_the_pods_on_the_listen_port(docs, container, env):
    port = listen_port(env)
    labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    match = docs["Deployment"]["spec"]["selector"]["matchLabels"]
    assert match.items() <= labels.items()
    svc = docs["Service"]["spec"]
    assert svc.get("type", "ClusterIP") == "ClusterIP"
    assert svc["selector"].items() <= labels.items()
    (sp,) = svc["ports"]
    assert named_port(container, sp["targetPort"]) == port
    np = docs["NetworkPolicy"]["spec"]
    assert np["podSelector"]["matchLabels"].items() <= labels.items()
    assert sorted(np["policyTypes"]) == ["Egress", "Ingress"]
    (rule,) = np["ingress"]
    assert rule["from"], "an empty from would admit everyone"
    for peer in rule["from"]:
        assert peer.get("podSelector", {}).get("matchLabels"), peer
        assert "ipBlock" not in peer
    assert [p["port"] for p in rule["ports"]] == [port]
    pdb = docs["PodDisruptionBudget"]["spec"]
    assert pdb["selector"]["matchLabels"].items() <= labels.items()
    assert pdb.get("maxUnavailable") == 1 or pdb.get("minAvailable") is not None


# ---- egress (issue 10, item 15) -----------------------------------------------------------


def egress_allows(np, ip, port, proto="TCP", pod_labels=None, ns_labels=None):
    """Whether the policy's egress rules admit a connection to ip:port (an address outside
    the cluster unless pod_labels/ns_labels say which pod it is), as NetworkPolicy reads them:
    a rule without `to` or without `ports` admits every peer or every port, and a port with
    an `endPort` the range from `port` to it."""
    import ipaddress

    addr = ipaddress.ip_address(ip)
    for rule in np.get("egress", []):
        ports = rule.get("ports")
        if ports is not None and not any(
                p.get("protocol", "TCP") == proto
                and p.get("port") <= port <= p.get("endPort", p.get("port")) for p in ports):
            continue
        peers = rule.get("to")
        if peers is None:
            return True
        for peer in peers:
            if "ipBlock" in peer and pod_labels is None:
                block = peer["ipBlock"]
                net = ipaddress.ip_network(block["cidr"])
                if addr.version == net.version and addr in net and not any(
                        addr in ipaddress.ip_network(e) for e in block.get("except", [])
                        if ipaddress.ip_network(e).version == addr.version):
                    return True
            elif pod_labels is not None and "podSelector" in peer:
                want = peer["podSelector"].get("matchLabels", {})
                want_ns = peer.get("namespaceSelector", {}).get("matchLabels")
                if want.items() <= pod_labels.items() and (
                        want_ns is None or want_ns.items() <= (ns_labels or {}).items()):
                    return True
    return False


def test_egress_is_refused_by_default_and_every_rule_names_its_ports(docs):
    np = docs["NetworkPolicy"]["spec"]
    assert "Egress" in np["policyTypes"], "an ingress-only policy leaves egress wide open"
    assert np.get("egress"), "Egress without rules would refuse DNS and the artifact store"
    for rule in np["egress"]:
        assert rule.get("to"), "a rule without `to` admits every destination: %r" % rule
        assert rule.get("ports"), "a rule without `ports` admits every port: %r" % rule


@pytest.mark.parametrize("ip", ["169.254.169.254", "100.100.100.200", "fd00:ec2::254",
                                "169.254.170.2"])
@pytest.mark.parametrize("port", [80, 443, 53])
def test_egress_never_reaches_the_cloud_metadata_services(docs, ip, port):
    np = docs["NetworkPolicy"]["spec"]
    for proto in ("TCP", "UDP"):
        assert not egress_allows(np, ip, port, proto), (ip, port, proto)


@pytest.mark.parametrize("ip,port", [("10.96.0.1", 443), ("10.0.0.5", 6443), ("172.20.1.1", 443),
                                     ("192.168.1.1", 443), ("127.0.0.1", 443),
                                     ("100.127.0.5", 443), ("2001:db8::7", 80),
                                     ("8.8.8.8", 53)])
def test_egress_refuses_cluster_services_private_ranges_and_other_ports(docs, ip, port):
    for proto in ("TCP", "UDP"):
        assert not egress_allows(docs["NetworkPolicy"]["spec"], ip, port, proto), (ip, port,
                                                                                  proto)


@pytest.mark.parametrize("port", [1, 22, 52, 54, 80, 443, 9418, 65535])
def test_egress_lets_the_sandboxes_reach_public_ipv4_addresses_on_every_port_but_dns(docs, port):
    """Issue 24: a /v1 sandbox's traffic leaves masqueraded to the pod's address, so the pod's
    policy must admit what a sandbox's networkPolicy may allow (pip, git, any API), and never
    DNS to an outside resolver (a sandbox's DNS goes only to the daemon's proxy)."""
    np = docs["NetworkPolicy"]["spec"]
    for proto in ("TCP", "UDP"):
        assert egress_allows(np, "203.0.113.7", port, proto), (port, proto)
        assert not egress_allows(np, "203.0.113.7", 53, proto), proto


def test_egress_admits_dns_only_to_the_cluster_dns_pods(docs):
    np = docs["NetworkPolicy"]["spec"]
    dns = {"k8s-app": "kube-dns"}
    ns = {"kubernetes.io/metadata.name": "kube-system"}
    assert egress_allows(np, "10.96.0.10", 53, "UDP", pod_labels=dns, ns_labels=ns)
    assert egress_allows(np, "10.96.0.10", 53, "TCP", pod_labels=dns, ns_labels=ns)
    assert not egress_allows(np, "10.96.0.10", 53, "UDP", pod_labels=dns,
                             ns_labels={"kubernetes.io/metadata.name": "workspace"})
    assert not egress_allows(np, "8.8.8.8", 53, "UDP"), "DNS to an outside resolver"


def test_egress_admits_https_to_a_public_artifact_store_and_the_nfs_port(docs):
    np = docs["NetworkPolicy"]["spec"]
    assert egress_allows(np, "203.0.113.7", 443)
    assert egress_allows(np, "2001:db8::7", 443)
    nfs = [r for r in np["egress"] if any(p.get("port") == 2049 for p in r["ports"])]
    assert nfs, "no rule for the NFS archive"
    for r in nfs:
        assert all("ipBlock" in peer and "/" in peer["ipBlock"]["cidr"] for peer in r["to"])


# ---- privileges ---------------------------------------------------------------------------


def test_privileges_are_the_documented_minimum(docs, container):
    sc = container["securityContext"]
    assert sc.get("privileged", False) is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert set(sc["capabilities"]["add"]) == EXPECTED_CAPS
    assert sc["seccompProfile"]["type"] in ("Unconfined", "Localhost")
    assert sc["appArmorProfile"]["type"] in ("Unconfined", "Localhost")
    ann = docs["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    key = "container.apparmor.security.beta.kubernetes.io/" + container["name"]
    assert ann.get(key) == "unconfined", ann
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    for k in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod.get(k), k
    assert not pod.get("automountServiceAccountToken", True)
    doc = DOC.read_text()
    for cap in EXPECTED_CAPS:
        assert "CAP_" + cap in doc, "CAP_%s is granted but not justified in %s" % (cap, DOC)


def test_the_pod_forwards_and_may_bind_the_dns_port_through_namespaced_sysctls(docs):
    """Issue 24: the sandboxes' links are routed through the pod (net.ipv4.ip_forward, an
    "unsafe" sysctl the kubelet must allow, said in the doc) and their DNS proxy binds port 53
    without CAP_NET_BIND_SERVICE (net.ipv4.ip_unprivileged_port_start, a safe one)."""
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    sysctls = {s["name"]: s["value"] for s in pod["securityContext"]["sysctls"]}
    assert sysctls == {"net.ipv4.ip_forward": "1", "net.ipv4.ip_unprivileged_port_start": "53"}
    doc = DOC.read_text()
    for needle in ("net.ipv4.ip_forward", "--allowed-unsafe-sysctls",
                   "net.ipv4.ip_unprivileged_port_start", "SANDBOX_HOST_EGRESS_DENY",
                   "SANDBOX_HOST_EGRESS_ALLOW"):
        assert needle in doc, needle


# ---- the image ----------------------------------------------------------------------------


def dockerfile_text():
    return DOCKERFILE.read_text()


def instructions():
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    out, cur = [], ""
    for ln in dockerfile_text().splitlines():
        if not cur and (not ln.strip() or ln.lstrip().startswith("#")):
            continue
        if ln.rstrip().endswith("\\"):
            cur += ln.rstrip()[:-1] + " "
            continue
        out.append((cur + ln).strip())
        cur = ""
    return out


def stages():
    """[(FROM line, body)] of the Dockerfile."""
    parts = re.split(r"^(FROM\s.+)$", dockerfile_text(), flags=re.M)
    return [(parts[i], parts[i + 1]) for i in range(1, len(parts), 2)]


def runtime_stage():
    return stages()[-1][1]


def cmake_version():
    m = re.search(r"project\(\s*sandbox-host\s+VERSION\s+([0-9.]+)",
                  (REPO / "CMakeLists.txt").read_text())
    assert m
    return m.group(1)


def test_dockerfile_builds_with_the_projects_own_setup_script():
    st = stages()
    assert len(st) >= 2, "multi-stage"
    build_from, build = st[0]
    assert " AS " in build_from.upper()
    # The builder runs scripts/setup.sh: the README's quick start (scripts/start.sh,
    # scripts/test.sh) goes through the same script, so the packages and the CMake
    # commands are one list, not two that drift.
    assert re.search(r"^RUN .*\bbash scripts/setup\.sh\b", build, re.M), build
    readme = (REPO / "README.md").read_text()
    for script in re.findall(r"^bash (scripts/\w+\.sh)$", readme, re.M):
        assert "scripts/setup.sh" in (REPO / script).read_text(), script
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert re.search(r"^cmake -S \. -B build\b", setup, re.M)
    assert re.search(r"^cmake --build build\b", setup, re.M)
    # what the builder installs is what setup.sh built
    assert "build/sandbox-host" in build
    assert "contrib/k8s/entrypoint.sh" in build


def test_runtime_stage_is_slim_debian_12_with_runtime_libraries_only():
    from_line, body = stages()[-1]
    base = re.search(r"ARG DEBIAN_IMAGE=(\S+)", dockerfile_text())
    image = from_line.split()[1]
    if image == "${DEBIAN_IMAGE}":
        assert base, from_line
        image = base.group(1)
    assert image in ("debian:12-slim", "debian:bookworm-slim"), image
    pkgs = runtime_packages()
    assert pkgs
    for bad in ("build-essential", "cmake", "gcc", "pkg-config", "check", "git"):
        assert bad not in pkgs, bad
    assert not [p for p in pkgs if p.endswith("-dev")]
    assert "rsync" in pkgs
    # every library the binary links directly comes from a listed package (or libc6)
    for pkg in needed_packages():
        assert pkg == "libc6" or pkg in pkgs, "runtime stage lacks %s" % pkg
    assert "HEALTHCHECK" not in re.sub(r"#.*", "", dockerfile_text())


def runtime_packages():
    """Package names of the apt-get install commands after the last FROM."""
    ins = instructions()
    last_from = max(i for i, x in enumerate(ins) if x.startswith("FROM "))
    pkgs = set()
    for x in ins[last_from:]:
        if not x.startswith("RUN "):
            continue
        for cmd in re.split(r"&&|;", x[4:]):
            words = cmd.split()
            if "apt-get" in words and "install" in words:
                rest = words[words.index("install") + 1:]
                pkgs |= {w for w in rest if not w.startswith("-")}
    return pkgs


def needed_packages():
    if not shutil.which("readelf") or not shutil.which("dpkg"):
        pytest.skip("readelf/dpkg not available")
    b = binary()
    out = subprocess.run(["readelf", "-d", b], capture_output=True, text=True,
                         timeout=30).stdout
    libs = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)
    assert libs, out
    # a sanitizer build (SH_BIN=build-asan/...) links its runtimes; the image ships the
    # RelWithDebInfo build, which does not
    libs = [x for x in libs if not re.match(r"lib(asan|ubsan|tsan|lsan)\.so", x)]
    pkgs = set()
    ldd = subprocess.run(["ldd", b], capture_output=True, text=True, timeout=30).stdout
    for lib in libs:
        m = re.search(r"^\s*%s => (\S+)" % re.escape(lib), ldd, re.M)
        assert m, lib
        path = os.path.realpath(m.group(1))
        found = None
        for candidate in (m.group(1), path, path.replace("/usr/lib/", "/lib/"),
                          path.replace("/lib/", "/usr/lib/", 1)):
            r = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            if r.returncode == 0:
                found = r.stdout.split(":")[0].strip()
                break
        assert found, "no Debian package owns %s" % lib
        pkgs.add(found)
    return pkgs


def test_image_labels_entrypoint_and_layout():
    df = dockerfile_text()
    assert re.search(r"^ARG VERSION=%s$" % re.escape(cmake_version()), df, re.M)
    assert re.search(r"^ARG VCS_REF=", df, re.M)
    assert 'org.opencontainers.image.version="${VERSION}"' in df
    assert 'org.opencontainers.image.revision="${VCS_REF}"' in df
    assert re.search(r'^ENTRYPOINT \["/usr/local/bin/sandbox-host-entrypoint"\]', df, re.M)
    assert re.search(r"^EXPOSE 8080$", df, re.M)
    ep = ENTRYPOINT.read_text()
    assert ep.startswith("#!/bin/sh\n")
    assert re.search(r'^exec /usr/local/bin/sandbox-host "\$@"$', ep, re.M)
    assert os.access(ENTRYPOINT, os.X_OK)
    subprocess.run(["sh", "-n", str(ENTRYPOINT)], check=True, timeout=10)
    ignore = K8S_DIR / "Dockerfile.dockerignore"
    assert {"build", "build-*"} <= set(ignore.read_text().split())


def test_entrypoint_leaves_writable_cgroups_alone_and_execs_the_daemon(tmp_path):
    """Run the entrypoint with a stand-in daemon: on a machine whose cgroup mounts are
    already writable it remounts nothing and passes its arguments through."""
    fake = tmp_path / "bin"
    fake.mkdir()
    script = ENTRYPOINT.read_text().replace("/usr/local/bin/sandbox-host", str(fake / "sh-host"))
    (fake / "ep.sh").write_text(script)
    (fake / "sh-host").write_text("#!/bin/sh\necho \"daemon $*\"\n")
    (fake / "sh-host").chmod(0o755)
    # `mount` must not be called when nothing is read-only: a stand-in that fails loudly
    (fake / "mount").write_text("#!/bin/sh\necho \"mount $*\" >&2\nexit 99\n")
    (fake / "mount").chmod(0o755)
    ro = [ln for ln in Path("/proc/self/mounts").read_text().splitlines()
          if ln.split()[2] in ("cgroup", "cgroup2") and "ro" in ln.split()[3].split(",")]
    r = subprocess.run(["sh", str(fake / "ep.sh"), "--listen=0.0.0.0:8080"],
                       env={"PATH": "%s:%s" % (fake, os.environ.get("PATH", ""))},
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r
    assert r.stdout == "daemon --listen=0.0.0.0:8080\n"
    if not ro:
        assert r.stderr == "", r.stderr
    else:
        assert "cannot remount" in r.stderr  # the stand-in mount refused


# ---- the documentation --------------------------------------------------------------------


def test_deployment_doc_covers_probes_drain_cgroups_and_the_unbuilt_image():
    doc = DOC.read_text()
    for needle in ("/healthz", "/readyz", "/drain", "preStop", "terminationGracePeriodSeconds",
                   "cgroup v1", "cgroup v2", "SandboxNotFound", "no container engine",
                   "kubectl apply -k contrib/k8s", "enableServiceLinks"):
        assert needle in doc, needle


# ---- many pods, one service (issue 23) --------------------------------------------------------


def test_peers_find_each_other_through_a_headless_service_of_every_pod(docs, container, env):
    """SANDBOX_HOST_PEERS=dns:<headless Service>: one record per pod, ready or not (a draining
    pod still answers for its sandboxes), on the pods' own port."""
    hs = docs["Service/headless"]
    spec = hs["spec"]
    assert spec["clusterIP"] == "None"
    assert spec["publishNotReadyAddresses"] is True
    labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert spec["selector"].items() <= labels.items()
    (sp,) = spec["ports"]
    assert sp.get("name"), "a named port"
    assert named_port(container, sp["targetPort"]) == listen_port(env)
    names = [e["name"] for e in container["env"]]
    peers = env["SANDBOX_HOST_PEERS"]["value"]
    m = re.fullmatch(r"dns:([a-z0-9.\-$()_A-Z]+)", peers)
    assert m, peers
    assert m.group(1).startswith(hs["metadata"]["name"] + "."), peers
    if "$(POD_NAMESPACE)" in peers:
        assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
        assert names.index("POD_NAMESPACE") < names.index("SANDBOX_HOST_PEERS")


def test_policy_lets_the_pods_reach_each_other_on_their_port_only(docs, env):
    port = listen_port(env)
    np = docs["NetworkPolicy"]["spec"]
    me = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    (rule,) = np["ingress"]
    assert any(p.get("podSelector", {}).get("matchLabels", {}).items() <= me.items()
               for p in rule["from"]), rule
    assert egress_allows(np, "10.0.0.7", port, pod_labels=me)
    assert not egress_allows(np, "10.0.0.7", port + 1, pod_labels=me)
