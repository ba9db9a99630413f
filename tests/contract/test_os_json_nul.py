"""A NUL in a /v1 JSON string (OPENSANDBOX.md section 1, as CONTRACT.md's input rules): JSON
may spell it `\\u0000`, but a C string ends there, so `{"/tmp/a\\u0000b": ...}` would act on
`/tmp/a` and `"default\\u0000x"` would name `default`. Every /v1 JSON body with a NUL in any
string, key or value, at any depth, is a 400 and changes nothing; so is an upload's `metadata`
part. A literal backslash before `u0000` (`"a\\\\u0000b"`, no NUL in it) is an ordinary
string. Python's json.dumps writes a NUL in a str as `\\u0000`, as any client would."""
import pytest

import oslib
import shlib
from oslib import expect
from sselib import stdout_of

pytestmark = pytest.mark.skipif(not shlib.is_root(), reason="sandboxes need root (CI is root)")

CALL = 10.0
NUL = "\x00"


def sh(osc, sid, command):
    return stdout_of(osc, sid, command)


def execd(osc, sid, method, sub, body):
    return osc.execd(sid, method, sub, body=body, timeout=CALL)


def refused(r):
    assert r.status == 400, "a NUL in a JSON string must be 400: %r" % (r,)
    return r.json()


def test_a_nul_in_a_permissions_path_key_changes_no_file(osc, sbx):
    sid = sbx["id"]
    sh(osc, sid, "echo x > /tmp/a; chmod 644 /tmp/a")
    refused(execd(osc, sid, "POST", "/files/permissions",
                  {"/tmp/a" + NUL + "b": {"mode": 600}}))
    assert sh(osc, sid, "stat -c %a /tmp/a") == ["644"]


def test_a_nul_in_a_move_source_moves_nothing(osc, sbx):
    sid = sbx["id"]
    sh(osc, sid, "echo m > /tmp/m")
    refused(execd(osc, sid, "POST", "/files/mv",
                  [{"src": "/tmp/m" + NUL + "x", "dest": "/tmp/moved"}]))
    refused(execd(osc, sid, "POST", "/files/mv",
                  [{"src": "/tmp/m", "dest": "/tmp/moved" + NUL + "x"}]))
    assert sh(osc, sid, "cat /tmp/m; test -e /tmp/moved || echo none") == ["m", "none"]


def test_a_nul_in_a_replace_path_rewrites_nothing(osc, sbx):
    sid = sbx["id"]
    sh(osc, sid, "echo aaa > /tmp/r")
    refused(execd(osc, sid, "POST", "/files/replace",
                  {"/tmp/r" + NUL + "z": {"old": "a", "new": "b"}}))
    refused(execd(osc, sid, "POST", "/files/replace",
                  {"/tmp/r": {"old": "a" + NUL + "q", "new": "b"}}))
    assert sh(osc, sid, "cat /tmp/r") == ["aaa"]


def test_a_nul_in_a_directory_path_makes_nothing(osc, sbx):
    sid = sbx["id"]
    refused(execd(osc, sid, "POST", "/directories", {"/tmp/d" + NUL + "e": {"mode": 755}}))
    assert sh(osc, sid, "test -e /tmp/d || echo none") == ["none"]


def test_a_nul_in_a_command_runs_nothing(osc, sbx):
    sid = sbx["id"]
    refused(execd(osc, sid, "POST", "/command",
                  {"command": "touch /tmp/ran" + NUL + "; echo cut"}))
    assert sh(osc, sid, "test -e /tmp/ran || echo none") == ["none"]


def test_a_nul_in_an_upload_metadata_path_writes_nothing(osc, sbx):
    from test_os_files import upload
    sid = sbx["id"]
    r = upload(osc, sid, [({"path": "/tmp/u" + NUL + "v"}, b"data")])
    refused(r)
    assert sh(osc, sid, "test -e /tmp/u || echo none") == ["none"]


@pytest.mark.parametrize("field", [
    {"image": {"uri": "default" + NUL + "x"}},  # nested: would name `default`
    {"env": {"K": "a" + NUL + "b"}},             # a value
    {"env": {"K" + NUL + "X": "v"}},             # a key
    {"metadata": {"team" + NUL + "x": "a"}},
    {"entrypoint": ["tail", "-f", "/dev/null" + NUL]},  # in a list
])
def test_a_nul_anywhere_in_a_create_body_creates_nothing(osc, field):
    before = {s["id"] for s in expect(osc.get("/v1/sandboxes?pageSize=200"), 200)["items"]}
    r = osc.create(dict(oslib.SDK_DEFAULT_CREATE, **field))
    if r.status == 202:
        osc.kill(r.json()["id"])
    refused(r)
    after = {s["id"] for s in expect(osc.get("/v1/sandboxes?pageSize=200"), 200)["items"]}
    assert after == before


def test_a_nul_in_a_metadata_patch_key_changes_nothing(osc):
    j = osc.create_ok(metadata={"k": "v"})
    try:
        refused(osc.patch("/v1/sandboxes/%s/metadata" % j["id"], {"k" + NUL + "x": None}))
        refused(osc.patch("/v1/sandboxes/%s/metadata" % j["id"], {"k": "v" + NUL}))
        assert osc.sandbox_ok(j["id"])["metadata"] == {"k": "v"}
    finally:
        osc.kill(j["id"])


def test_a_nul_deep_in_a_body_is_refused(osc, sbx):
    body = {"/tmp/deep": {"mode": 644, "x": [{"y": {"z": ["ok", "no" + NUL]}}]}}
    refused(execd(osc, sbx["id"], "POST", "/files/permissions", body))


def test_an_escaped_backslash_before_u0000_is_an_ordinary_string(osc):
    """Only a NUL is refused: `"a\\\\u0000b"` is the six characters a, \\, u, 0, 0, 0, 0, b."""
    j = osc.create_ok(env={"LITERAL": "a\\u0000b"})
    try:
        assert stdout_of(osc, j["id"], "printf '%s\\n' \"$LITERAL\"") == ["a\\u0000b"]
    finally:
        osc.kill(j["id"])
