"""Section 7 (healthz, readyz, drain) and the 503 rule of 2.1 (capacity, draining)."""
import email.utils
import re

from shlib import assert_204, assert_error, assert_json


def _check_retry_after(r):
    ra = r.header("Retry-After")
    assert ra is not None and ra.strip() != "", "503 without Retry-After: %r" % r
    ra = ra.strip()
    # RFC 9110: delay-seconds or an HTTP-date
    assert re.fullmatch(r"\d+", ra) or email.utils.parsedate_to_datetime(ra), ra


def _unavailable(r):
    assert_error(r, 503, "Unavailable")
    _check_retry_after(r)


def test_healthz_shape(client):
    j = assert_json(client.get("/healthz"))
    assert isinstance(j.get("status"), str) and j["status"], j
    assert isinstance(j.get("version"), str) and j["version"], j
    assert isinstance(j.get("capabilities"), list), j
    assert all(isinstance(c, str) for c in j["capabilities"]), j


def test_healthz_ignores_query(client):
    assert_json(client.get("/healthz?probe=1"))


def test_readyz_200_when_accepting(client):
    assert client.get("/readyz").status == 200


def test_head_readyz_and_healthz(client):
    for url in ("/readyz", "/healthz"):
        r = client.request("HEAD", url)
        assert r.status == 200 and r.body == b"", (url, r)


def test_capacity_503_unavailable_with_retry_after(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_MAX_SANDBOXES": "2"})
    c = d.client
    a = c.new_sandbox()
    b = c.new_sandbox()
    _unavailable(c.create({}))
    _unavailable(c.create({"item_id": "x"}))
    # existing sandboxes still work
    a.put_ok("f", b"1")
    assert b.exists_v("/") is True
    assert_204(a.delete())
    r = c.create({})
    assert_json(r)
    d.stop_ok()


def test_readyz_503_at_capacity_and_200_again_after_delete(start_daemon):
    d = start_daemon(env={"SANDBOX_HOST_MAX_SANDBOXES": "1"})
    c = d.client
    assert c.get("/readyz").status == 200
    s = c.new_sandbox()
    assert c.get("/readyz").status == 503
    assert c.get("/healthz").status == 200
    assert_204(s.delete())
    assert c.get("/readyz").status == 200
    d.stop_ok()


def test_drain_answers_counts_without_nfs_root(start_daemon):
    d = start_daemon()
    c = d.client
    s1 = c.new_sandbox({"item_id": "item-a"})
    s2 = c.new_sandbox()
    c.new_sandbox({"item_id": "item-b"})
    assert_204(s1.mark_ready())
    assert_204(s2.mark_ready())
    j = assert_json(c.post("/drain"))
    assert j.get("sandboxes") == 3, j
    assert j.get("persisted") == 0, j
    assert type(j["sandboxes"]) is int and type(j["persisted"]) is int
    assert j.get("failed", 0) == 0, j
    d.stop_ok()


def test_drain_with_no_sandboxes(start_daemon):
    d = start_daemon()
    j = assert_json(d.client.post("/drain"))
    assert j["sandboxes"] == 0 and j["persisted"] == 0, j
    d.stop_ok()


def test_after_drain_creates_are_503_and_readyz_503(start_daemon):
    d = start_daemon()
    c = d.client
    assert_json(c.post("/drain"))
    _unavailable(c.create({}))
    assert c.get("/readyz").status == 503
    assert c.get("/healthz").status == 200
    d.stop_ok()


def test_existing_sandboxes_keep_working_after_drain(start_daemon):
    d = start_daemon()
    c = d.client
    s = c.new_sandbox()
    s.put_ok("before", b"1")
    assert_json(c.post("/drain"))
    s.put_ok("after", b"2")
    assert s.get_v("before") == b"1"
    assert s.get_v("after") == b"2"
    assert_204(s.mkdir("d"))
    assert_204(s.rename("after", "d/after"))
    assert_204(s.mark_ready())
    assert s.ready_v() is True
    assert [e["path"] for e in s.walk_v()] == ["before", "d/after"]
    assert_204(s.delete())
    d.stop_ok()


def test_second_drain_is_harmless(start_daemon):
    d = start_daemon()
    c = d.client
    s = c.new_sandbox()
    j1 = assert_json(c.post("/drain"))
    j2 = assert_json(c.post("/drain"))
    assert j1["sandboxes"] == j2["sandboxes"] == 1
    assert j2["persisted"] == 0
    s.put_ok("f", b"x")
    _unavailable(c.create({}))
    d.stop_ok()


def test_drain_counts_drop_after_delete(start_daemon):
    d = start_daemon()
    c = d.client
    a = c.new_sandbox()
    c.new_sandbox()
    assert_204(a.delete())
    assert assert_json(c.post("/drain"))["sandboxes"] == 1
    d.stop_ok()


def test_drain_ignores_a_body(start_daemon):
    d = start_daemon()
    j = assert_json(d.client.post("/drain", body=b"{garbage"))
    assert j["sandboxes"] == 0
    d.stop_ok()
