"""OPENSANDBOX.md section 2, `timeout` and expiry: integer seconds >= SANDBOX_HOST_MIN_TIMEOUT
(default 60, the spec's minimum; lowered here so a test watches a sandbox expire in seconds),
null/absent = no expiry, above SANDBOX_HOST_MAX_TIMEOUT -> 400, `expiresAt = createdAt +
timeout`, deleted at expiresAt (as DELETE, by a loop timer), then 404; renew-on-access
(`extensions["access.renew.extend.seconds"]`). With a ceiling, null/absent is 400 and no expiry
the daemon sets is later than now + the ceiling (renew on access included)."""
import shutil
import time

import pytest

import execlib
import oslib
import shlib
from oslib import DROP, expect, expect_400

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

EXPIRE_WAIT = 20.0  # bound on how long a 2-second sandbox may take to go


@pytest.fixture(scope="module")
def fastd():
    d = shlib.Daemon(env={"SANDBOX_HOST_MIN_TIMEOUT": "1"})
    yield d
    d.stop()
    shutil.rmtree(d.root, ignore_errors=True)


@pytest.fixture
def fc(fastd):
    return oslib.os_client(fastd)


def _span(j):
    return (oslib.parse_time(j["expiresAt"]) - oslib.parse_time(j["createdAt"])).total_seconds()


# ---- the timeout field ----------------------------------------------------------------------

def test_default_minimum_timeout_is_60(osc):
    expect_400(osc.create(dict(oslib.SDK_DEFAULT_CREATE, timeout=59)))
    j = osc.create_ok(timeout=60)
    try:
        assert abs(_span(j) - 60) <= 1
    finally:
        osc.kill(j["id"])


@pytest.mark.parametrize("t", [90.5, "90", True, -1, 0, [90], {"s": 90}])
def test_timeout_must_be_an_integer(osc, t):
    r = osc.create(dict(oslib.SDK_DEFAULT_CREATE, timeout=t))
    if r.status == 202:
        osc.kill(r.json()["id"])
    expect_400(r)


@pytest.mark.parametrize("how", ["null", "absent"])
def test_null_or_absent_timeout_means_no_expiry(osc, how):
    j = osc.create_ok(timeout=None if how == "null" else DROP)
    try:
        assert "expiresAt" not in j
        assert "expiresAt" not in osc.sandbox_ok(j["id"])
    finally:
        osc.kill(j["id"])


@pytest.mark.parametrize("t", [61, 3600, 86400 * 7])
def test_expires_at_is_created_at_plus_timeout(osc, t):
    j = osc.create_ok(timeout=t)
    try:
        assert abs(_span(j) - t) <= 1, j
        assert abs(_span(osc.sandbox_ok(j["id"])) - t) <= 1
    finally:
        osc.kill(j["id"])


def test_without_a_ceiling_any_long_timeout_is_accepted(osc):
    j = osc.create_ok(timeout=10 * 365 * 86400)
    osc.kill(j["id"])


@pytest.mark.parametrize("ceiling,ok,too_long", [("2m", 120, 121), ("120s", 120, 121),
                                                 ("1h", 3600, 3601), ("1d", 86400, 86401),
                                                 ("300", 300, 301)])
def test_timeout_above_the_max_timeout_is_400(start_daemon, ceiling, ok, too_long):
    d = start_daemon(env={"SANDBOX_HOST_MAX_TIMEOUT": ceiling})
    osc = oslib.os_client(d)
    r = osc.create(dict(oslib.SDK_DEFAULT_CREATE, timeout=too_long))
    # INTERPRETATION: INVALID_REQUEST (a bad value) or NOT_SUPPORTED (a value this host
    # cannot honour) both read the text
    expect_400(r, ("INVALID_REQUEST", "NOT_SUPPORTED"))
    j = osc.create_ok(timeout=ok)
    assert abs(_span(j) - ok) <= 1


def test_lowered_minimum_still_refuses_below_it(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_MIN_TIMEOUT": "5"})
    osc = oslib.os_client(d)
    expect_400(osc.create(dict(oslib.SDK_DEFAULT_CREATE, timeout=4)))
    osc.create_ok(timeout=5)


def test_min_timeout_flag_form(start_daemon):
    d = start_daemon(args=["--min-timeout=1"])
    osc = oslib.os_client(d)
    j = osc.create_ok(timeout=1)
    assert abs(_span(j) - 1) <= 1


# ---- expiry ------------------------------------------------------------------------------------

def test_a_sandbox_expires_and_is_then_404(fastd, fc):
    j = fc.create_ok(timeout=2)
    sid = j["id"]
    uid = execlib.sandbox_uid(fc.native(sid))
    deadline = time.monotonic() + EXPIRE_WAIT
    while fc.sandbox(sid).status == 200:
        assert time.monotonic() < deadline, "not expired %ss after a 2 s timeout" % EXPIRE_WAIT
        time.sleep(0.1)
    expect(fc.sandbox(sid), 404, "SANDBOX_NOT_FOUND")
    expect(fc.delete("/v1/sandboxes/" + sid), 404, "SANDBOX_NOT_FOUND")
    expect(fc.execd(sid, "GET", "/ping"), 404)
    shlib.assert_error(fc.native(sid).exists("a"), 404, "SandboxNotFound")
    assert sid not in [s["id"] for s in fc.get("/v1/sandboxes?pageSize=200").json()["items"]]
    # deleted as DELETE deletes: processes and directory gone
    left = execlib.wait_gone(lambda: execlib.host_procs_of_uid(uid), timeout=10)
    execlib.kill_pids([p[0] for p in left], fc.c.daemon_pid)
    assert not left
    assert not (fastd.root / sid).exists()


def test_expiry_needs_no_request_to_happen(fastd, fc):
    """A loop timer, not a scan per request: with no HTTP call at all after the create, the
    sandbox's directory goes from the host at its expiry."""
    j = fc.create_ok(timeout=2)
    d = fastd.root / j["id"]
    assert d.exists()
    assert shlib.wait_until(lambda: not d.exists(), timeout=EXPIRE_WAIT), \
        "the sandbox directory is still there %ss after its expiry" % EXPIRE_WAIT


def test_expiry_keeps_running_while_paused(fastd, fc):
    j = fc.create_ok(timeout=3)
    sid = j["id"]
    expect(fc.post("/v1/sandboxes/%s/pause" % sid), 202)
    deadline = time.monotonic() + EXPIRE_WAIT
    while fc.sandbox(sid).status == 200:
        assert time.monotonic() < deadline, "a paused sandbox did not expire"
        time.sleep(0.1)
    expect(fc.sandbox(sid), 404, "SANDBOX_NOT_FOUND")
    assert not (fastd.root / sid).exists()


def test_renew_moves_the_expiry(fastd, fc):
    j = fc.create_ok(timeout=2)
    sid = j["id"]
    try:
        expect(fc.post("/v1/sandboxes/%s/renew-expiration" % sid,
                       {"expiresAt": oslib.in_seconds(120)}), 200)
        time.sleep(3.5)  # past the original expiry
        assert fc.sandbox_ok(sid)["status"]["state"] == "Running"
    finally:
        fc.kill(sid)


def test_sandboxes_without_timeout_never_expire(fastd, fc):
    j = fc.create_ok(timeout=None)
    short = fc.create_ok(timeout=1)
    try:
        assert shlib.wait_until(lambda: fc.sandbox(short["id"]).status == 404,
                                timeout=EXPIRE_WAIT)
        assert fc.sandbox_ok(j["id"])["status"]["state"] == "Running"
    finally:
        fc.kill(j["id"])


# ---- renew on access -----------------------------------------------------------------------------

def test_renew_on_access_moves_expires_at_on_every_execd_request(fc):
    j = fc.create_ok(timeout=60, extensions={"access.renew.extend.seconds": "300"})
    sid = j["id"]
    try:
        assert abs(_span(j) - 60) <= 1
        expect(fc.execd(sid, "GET", "/ping"), 200)
        exp = oslib.parse_time(fc.sandbox_ok(sid)["expiresAt"])
        left = (exp - oslib.utcnow()).total_seconds()
        assert 295 <= left <= 301, "expiresAt should be now + 300 after an execd call: %s" % left
        # "at least": a later expiry is never shortened
        expect(fc.post("/v1/sandboxes/%s/renew-expiration" % sid,
                       {"expiresAt": oslib.in_seconds(7200)}), 200)
        before = fc.sandbox_ok(sid)["expiresAt"]
        expect(fc.execd(sid, "GET", "/ping"), 200)
        assert fc.sandbox_ok(sid)["expiresAt"] == before
    finally:
        fc.kill(sid)


def test_renew_on_access_keeps_an_accessed_sandbox_alive(fc):
    j = fc.create_ok(timeout=2, extensions={"access.renew.extend.seconds": "300"})
    sid = j["id"]
    try:
        expect(fc.execd(sid, "GET", "/ping"), 200)
        time.sleep(3.5)  # past createdAt + timeout
        assert fc.sandbox_ok(sid)["status"]["state"] == "Running"
    finally:
        fc.kill(sid)


def test_without_the_extension_execd_requests_do_not_renew(fc):
    j = fc.create_ok(timeout=600)
    sid = j["id"]
    try:
        expect(fc.execd(sid, "GET", "/ping"), 200)
        assert fc.sandbox_ok(sid)["expiresAt"] == j["expiresAt"]
    finally:
        fc.kill(sid)


# ---- the ceiling bounds every expiry (issue 20, finding 8) -----------------------------------

@pytest.mark.parametrize("how", ["null", "absent"])
def test_with_a_ceiling_no_expiry_is_400(start_daemon, how):
    """Section 2: with SANDBOX_HOST_MAX_TIMEOUT set, null/absent (no expiry) is past any
    ceiling: 400 INVALID_REQUEST, and no sandbox is made."""
    d = start_daemon(env={"SANDBOX_HOST_MAX_TIMEOUT": "1h"})
    osc = oslib.os_client(d)
    r = osc.create(dict(oslib.SDK_DEFAULT_CREATE, timeout=None) if how == "null" else
                   {k: v for k, v in oslib.SDK_DEFAULT_CREATE.items() if k != "timeout"})
    if r.status == 202:
        osc.kill(r.json()["id"])
    expect(r, 400, "INVALID_REQUEST")
    assert expect(osc.get("/v1/sandboxes"), 200)["items"] == []
    # within the ceiling it is as ever
    j = osc.create_ok(timeout=3600)
    assert abs(_span(j) - 3600) <= 1


def test_with_a_ceiling_renew_on_access_stops_at_now_plus_the_ceiling(start_daemon):
    """access.renew.extend.seconds 3600 on a host whose ceiling is 2 minutes: an execd request
    moves expiresAt to now + 120 s, never to now + 3600 s."""
    d = start_daemon(env={"SANDBOX_HOST_MAX_TIMEOUT": "2m"})
    osc = oslib.os_client(d)
    j = osc.create_ok(timeout=60, extensions={"access.renew.extend.seconds": "3600"})
    sid = j["id"]
    expect(osc.execd(sid, "GET", "/ping"), 200)
    left = (oslib.parse_time(osc.sandbox_ok(sid)["expiresAt"]) - oslib.utcnow()).total_seconds()
    assert 110 <= left <= 121, "expiresAt should be at most now + the ceiling: %s s" % left
    # and again: each access moves it to now + the ceiling, no further
    expect(osc.execd(sid, "GET", "/ping"), 200)
    left = (oslib.parse_time(osc.sandbox_ok(sid)["expiresAt"]) - oslib.utcnow()).total_seconds()
    assert left <= 121, left
    osc.kill(sid)


def test_a_renew_that_shortens_the_expiry_is_when_the_sandbox_goes(fastd, fc):
    """The new expiresAt is the one the reaper keeps, earlier as well as later: a 10-minute
    sandbox renewed to 2 s from now is gone soon after."""
    j = fc.create_ok(timeout=600)
    sid = j["id"]
    try:
        expect(fc.post("/v1/sandboxes/%s/renew-expiration" % sid,
                       {"expiresAt": oslib.in_seconds(2)}), 200)
        assert shlib.wait_until(lambda: fc.sandbox(sid).status == 404, timeout=EXPIRE_WAIT), \
            "still there %ss after its renewed expiry" % EXPIRE_WAIT
        assert not (fastd.root / sid).exists()
    finally:
        fc.kill(sid)
