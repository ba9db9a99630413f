"""OPENSANDBOX.md section 2, `resourceLimits`: Kubernetes quantities for `cpu` and `memory`
become the sandbox's own cgroup limits, lowered to SANDBOX_HOST_CPU_MAX / SANDBOX_HOST_MEMORY_MAX
(the SDK's default asks 2Gi); unparsable -> 400 INVALID_REQUEST; `gpu` other than 0 -> 400
NOT_SUPPORTED; other names ignored; `resourceRequests` ignored.

The limits are read where the kernel holds them: a process started in the sandbox through the
native exec is found on the host, and its cgroups (/proc/<pid>/cgroup, as root) are walked up
to the nearest limited one below the daemon's own (v1 here: memory.limit_in_bytes,
cpu.cfs_quota_us / cpu.cfs_period_us; v2: memory.max, cpu.max)."""
import pytest

import oslib
import shlib
from oslib import expect, expect_400

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="reads cgroups as root (CI is root)")

PAGE = 4096
MIB = 1 << 20
GIB = 1 << 30


def limits(daemon, osc, sid):
    p = oslib.InsideProcess(osc, sid)
    try:
        return oslib.memory_limit_of(p.pid, daemon), oslib.cpu_limit_of(p.pid, daemon)
    finally:
        p.stop()


def assert_memory(got, want):
    # the kernel keeps whole pages: a limit reads back rounded to a page
    assert got is not None, "no memory limit on the sandbox's cgroup"
    assert abs(got - want) < PAGE, "memory limit %d, want %d" % (got, want)


def assert_cpu(got, want):
    assert got is not None, "no CPU limit on the sandbox's cgroup"
    assert abs(got - want) <= 0.01 * want, "CPU limit %.4f cores, want %.4f" % (got, want)


@pytest.fixture(scope="module")
def bigd():
    """A host whose maxima are above what the tests ask, so nothing is lowered."""
    d = shlib.Daemon(env={"SANDBOX_HOST_MEMORY_MAX": "4G", "SANDBOX_HOST_CPU_MAX": "2"})
    yield d
    d.stop()
    import shutil
    shutil.rmtree(d.root, ignore_errors=True)


@pytest.mark.parametrize("cpu,cores", [("500m", 0.5), ("250m", 0.25), ("1", 1.0), ("1.5", 1.5),
                                       ("2", 2.0), ("0.75", 0.75)])
def test_cpu_quantity_becomes_the_sandboxs_cpu_limit(bigd, cpu, cores):
    osc = oslib.os_client(bigd)
    j = osc.create_ok(resourceLimits={"cpu": cpu, "memory": "512Mi"})
    try:
        assert_cpu(limits(bigd, osc, j["id"])[1], cores)
    finally:
        osc.kill(j["id"])


@pytest.mark.parametrize("mem,nbytes", [
    ("512Mi", 512 * MIB), ("2Gi", 2 * GIB), ("1536Mi", 1536 * MIB), ("1.5Gi", 1536 * MIB),
    ("262144Ki", 256 * MIB), ("314572800", 300 * MIB),
    # INTERPRETATION: Kubernetes quantities: G and M are decimal (10^9, 10^6), unlike the
    # binary suffixes of the host's own settings (CONTRACT.md section 10)
    ("1G", 10 ** 9), ("300M", 300 * 10 ** 6),
])
def test_memory_quantity_becomes_the_sandboxs_memory_limit(bigd, mem, nbytes):
    osc = oslib.os_client(bigd)
    j = osc.create_ok(resourceLimits={"cpu": "1", "memory": mem})
    try:
        assert_memory(limits(bigd, osc, j["id"])[0], nbytes)
    finally:
        osc.kill(j["id"])


def test_sdk_defaults_are_lowered_to_the_host_maxima(daemon, osc, sbx):
    # SDK: {"cpu": "1", "memory": "2Gi"}; host defaults: CPU_MAX 1, MEMORY_MAX 1G (binary)
    mem, cpu = limits(daemon, osc, sbx["id"])
    assert_memory(mem, GIB)
    assert_cpu(cpu, 1.0)


def test_limits_above_lowered_host_maxima_are_lowered_to_them(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_MEMORY_MAX": "256M", "SANDBOX_HOST_CPU_MAX": "0.5"})
    osc = oslib.os_client(d)
    j = osc.create_ok(resourceLimits={"cpu": "2", "memory": "1Gi"})
    mem, cpu = limits(d, osc, j["id"])
    assert_memory(mem, 256 * MIB)
    assert_cpu(cpu, 0.5)
    # below the maxima they are kept
    j2 = osc.create_ok(resourceLimits={"cpu": "250m", "memory": "128Mi"})
    mem, cpu = limits(d, osc, j2["id"])
    assert_memory(mem, 128 * MIB)
    assert_cpu(cpu, 0.25)


def test_each_sandbox_has_its_own_limits(bigd):
    osc = oslib.os_client(bigd)
    a = osc.create_ok(resourceLimits={"cpu": "250m", "memory": "256Mi"})
    b = osc.create_ok(resourceLimits={"cpu": "1500m", "memory": "768Mi"})
    try:
        ma, ca = limits(bigd, osc, a["id"])
        mb, cb = limits(bigd, osc, b["id"])
        assert_memory(ma, 256 * MIB)
        assert_cpu(ca, 0.25)
        assert_memory(mb, 768 * MIB)
        assert_cpu(cb, 1.5)
    finally:
        osc.kill(a["id"])
        osc.kill(b["id"])


def test_memory_limit_is_enforced_inside(bigd):
    """The limit is the sandbox's: a hog inside dies, the sandbox answers on."""
    import execlib
    osc = oslib.os_client(bigd)
    j = osc.create_ok(resourceLimits={"cpu": "1", "memory": "64Mi"})
    try:
        n = osc.native(j["id"])
        st = execlib.run(n, ["python3", "-c", "b = bytearray(256 << 20)\nprint(len(b))"],
                         timeout=60)
        assert st.final is not None and st.final.get("exit") != 0, st.describe()
        assert execlib.sh(n, "echo alive") == "alive\n"
    finally:
        osc.kill(j["id"])


@pytest.mark.parametrize("limits_", [
    {"cpu": "lots", "memory": "512Mi"}, {"cpu": "1.5.5", "memory": "512Mi"},
    {"cpu": "", "memory": "512Mi"}, {"cpu": "1,5", "memory": "512Mi"},
    {"cpu": "1", "memory": "12Qi"}, {"cpu": "1", "memory": "Gi"},
    {"cpu": "1", "memory": "abc"}, {"cpu": "1", "memory": "1..5Gi"},
    {"cpu": "1", "memory": "512 Mi"},
])
def test_unparsable_quantity_is_400_invalid_request(osc, limits_):
    r = osc.create(dict(oslib.SDK_DEFAULT_CREATE, resourceLimits=limits_))
    if r.status == 202:
        osc.kill(r.json()["id"])
    expect_400(r)


@pytest.mark.parametrize("limits_", [{"cpu": 1, "memory": "512Mi"}, {"cpu": "1", "memory": 512}])
def test_a_quantity_that_is_not_a_string_is_400(osc, limits_):
    r = osc.create(dict(oslib.SDK_DEFAULT_CREATE, resourceLimits=limits_))
    if r.status == 202:
        osc.kill(r.json()["id"])
    expect_400(r)


@pytest.mark.parametrize("gpu", ["1", "2", "500m"])
def test_gpu_other_than_0_is_400_not_supported(osc, gpu):
    r = osc.create(dict(oslib.SDK_DEFAULT_CREATE,
                        resourceLimits={"cpu": "1", "memory": "512Mi", "gpu": gpu}))
    if r.status == 202:
        osc.kill(r.json()["id"])
    expect(r, 400, "NOT_SUPPORTED")


def test_gpu_0_and_other_names_are_accepted(osc):
    j = osc.create_ok(resourceLimits={"cpu": "1", "memory": "512Mi", "gpu": "0",
                                      "ephemeral-storage": "10Gi", "hugepages-2Mi": "1Gi"})
    osc.kill(j["id"])


def test_resource_requests_are_ignored_even_unparsable(daemon, osc):
    j = osc.create_ok(resourceLimits={"cpu": "500m", "memory": "256Mi"},
                      resourceRequests={"cpu": "lots", "memory": "huge", "gpu": "8"})
    try:
        mem, cpu = limits(daemon, osc, j["id"])
        assert_memory(mem, 256 * MIB)
        assert_cpu(cpu, 0.5)
    finally:
        osc.kill(j["id"])
